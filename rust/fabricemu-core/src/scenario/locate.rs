//! Positions of errors: the key path of a serde error and the line/column of a key path in the text.
//!
//! Key paths are dotted with list indices as numbers (`topology.k`, `workload.0.flows.2.dst`), the
//! same form `Scenario.with_` takes. Positions are 1-based lines and columns (in characters).

use std::ops::Range;

use toml::de::{DeTable, DeValue};
use toml::Spanned;

use super::schema::ScenarioFile;
use crate::config::kinds::{path_of, unknown_field_key, unmark};
use crate::config::ScenarioError;

/// Deserialize TOML, reporting the key path and position of the first error.
pub fn deserialize_toml(text: &str) -> Result<ScenarioFile, ScenarioError> {
    let de = toml::Deserializer::parse(text).map_err(|e| {
        // A syntax error: no key path, but toml knows where.
        let mut message = first_line(e.message());
        if message.starts_with("duplicate key") {
            // Name the key (toml's span covers it).
            if let Some(key) = e.span().and_then(|s| text.get(s)) {
                let key = key.split('=').next().unwrap_or("").trim();
                if !key.is_empty() && !message.contains(&format!("`{key}`")) {
                    message =
                        format!("duplicate key `{key}`: each key may be given once per table");
                }
            }
        }
        let mut err = ScenarioError::at("", message);
        set_position(text, &mut err, e.span().map(|s| s.start));
        err
    })?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = path_of(e.path());
        // A kind's table reports its own key path: locate it by path, not by toml's span (that of
        // the whole table).
        let span = e
            .inner()
            .span()
            .filter(|_| unmark(e.inner().message()).is_none());
        let err = serde_error(path, e.inner().message());
        match span {
            // An unknown key is best shown at its key, which `position_of` finds from the path.
            Some(span) if !is_unknown_key(&err) => {
                let mut err = err;
                set_position(text, &mut err, Some(span.start));
                err
            }
            _ => position_of(text, err),
        }
    })
}

/// Build the error of a JSON deserialization (how Python dictionaries arrive): key path and a clean
/// message, no position (the JSON text is generated, its lines mean nothing to the user).
pub fn from_json_error(e: serde_path_to_error::Error<serde_json::Error>) -> ScenarioError {
    let path = path_of(e.path());
    let inner = e.into_inner();
    let mut msg = inner.to_string();
    // serde_json appends " at line L column C"; drop it.
    if inner.line() > 0 {
        let suffix = format!(" at line {} column {}", inner.line(), inner.column());
        if let Some(stripped) = msg.strip_suffix(&suffix) {
            msg = stripped.to_string();
        }
    }
    serde_error(path, &msg)
}

/// Normalise a path as `serde_path_to_error` prints it (`workload[0].flows[2].dst`, `.`) to the dotted
/// form with numeric segments (`workload.0.flows.2.dst`, ``).
#[allow(dead_code)] // for callers that only have the printed path
pub fn normalise_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut chars = path.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '[' => {
                if !out.is_empty() && !out.ends_with('.') {
                    out.push('.');
                }
            }
            ']' => {
                if chars.peek().is_some_and(|&n| n != '.' && n != '[') {
                    out.push('.');
                }
            }
            _ => out.push(c),
        }
    }
    let out = out.trim_matches('.');
    out.to_string()
}

/// An error of the serde stage with a readable message; an unknown or missing field's key is appended
/// to the path (`topology` + "unknown field `kk`" -> `topology.kk`).
fn serde_error(mut path: String, message: &str) -> ScenarioError {
    let message = match unmark(message) {
        Some((inner, message)) => {
            if !inner.is_empty() {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(inner);
            }
            message
        }
        None => message,
    };
    let mut message = clean_message(message);
    if message == "expected a list, found map"
        && (path == "workload" || path == "fault" || path == "failure_process")
    {
        message = format!(
            "expected a list of tables, found one table: write [[{path}]] (double brackets) for \
             each {path}, not [{path}]"
        );
    }
    if let Some(key) = missing_field_key(&message) {
        let key = key.to_string();
        message = format!("missing required key `{key}`");
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(&key);
    } else if let Some(key) = unknown_field_key(&message) {
        if !path.ends_with(&format!(".{key}")) && path != key {
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(key);
        }
    }
    ScenarioError::at(path, message)
}

/// The key of serde's "missing field `kind`" message.
fn missing_field_key(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("missing field `")?;
    let end = rest.find('`')?;
    Some(&rest[..end])
}

fn is_unknown_key(e: &ScenarioError) -> bool {
    e.message.starts_with("unknown field") || e.message.starts_with("unknown key")
}

/// One line of text, with Rust type names that serde puts in messages said in scenario terms.
fn clean_message(message: &str) -> String {
    let msg = first_line(message);
    if msg.starts_with("data did not match any variant of untagged enum Senders") {
        return "expected a number of senders or a list of host ids (or a selector like \"server:3\")"
            .to_string();
    }
    // A string enum (`rename_all = "snake_case"`): serde's "unknown variant `x`, expected one of
    // `a`, `b`" said as "expected one of "a", "b", found "x"".
    if let Some(rest) = msg.strip_prefix("unknown variant `") {
        if let Some((found, expected)) = rest.split_once("`, expected ") {
            // serde says "`a` or `b`" for two: list them all the same way.
            let expected = match expected.split_once("` or `") {
                Some((a, b)) => format!("one of {a}`, `{b}"),
                None => expected.to_string(),
            };
            let expected = expected.replace('`', "\"");
            return format!("expected {expected}, found \"{found}\"");
        }
    }
    // serde: "invalid type: string \"eight\", expected i64" -> "expected an integer, found string \"eight\"".
    match msg
        .strip_prefix("invalid type: ")
        .or_else(|| msg.strip_prefix("invalid value: "))
        .and_then(|rest| rest.rsplit_once(", expected "))
    {
        Some((found, expected)) => format!("expected {}, found {found}", say_expected(expected)),
        None => msg,
    }
}

/// Serde's "expected" in scenario terms (Rust type names mean nothing to a scenario's author).
fn say_expected(expected: &str) -> &str {
    match expected {
        "i8" | "i16" | "i32" | "i64" | "i128" => "an integer",
        "u8" | "u16" | "u32" | "u64" | "u128" => "a non-negative integer",
        "f32" | "f64" => "a number",
        "a boolean" => "true or false",
        "a sequence" => "a list",
        s if s.starts_with("struct ") => "a table",
        s => s,
    }
}

/// The first non-empty line, trimmed (toml messages are single-line; be safe anyway).
fn first_line(message: &str) -> String {
    message
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
        .to_string()
}

fn set_position(text: &str, e: &mut ScenarioError, at: Option<usize>) {
    match at {
        Some(at) => {
            let (line, col) = line_col(text, at);
            e.line = Some(line);
            e.column = Some(col);
        }
        None => {
            e.line = None;
            e.column = None;
        }
    }
}

/// 1-based line and column (in characters) of byte offset `at`.
fn line_col(text: &str, at: usize) -> (usize, usize) {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let col = before[line_start..].chars().count() + 1;
    (line, col)
}

/// Where a key path is in the document.
enum Found {
    /// The key exists: the span of its key (if it has one) and of its value.
    Value {
        key: Option<Range<usize>>,
        value: Range<usize>,
    },
    /// The key is missing: the span of the nearest existing parent (empty for the root).
    MissingIn(Range<usize>),
}

/// Look a dotted key path up in the parsed document.
fn find(root: &Spanned<DeTable<'_>>, path: &str) -> Found {
    let segments: Vec<&str> = path.split('.').filter(|s| !s.is_empty()).collect();
    let Some((first, rest)) = segments.split_first() else {
        return Found::MissingIn(root.span());
    };
    let Some((key, mut current)) = table_entry(root.get_ref(), first) else {
        return Found::MissingIn(root.span());
    };
    let mut key_span = Some(key);
    for seg in rest {
        let next = match current.get_ref() {
            DeValue::Table(t) => table_entry(t, seg).map(|(k, v)| (Some(k), v)),
            DeValue::Array(a) => seg
                .parse::<usize>()
                .ok()
                .and_then(|i| a.get(i))
                .map(|v| (None, v)),
            _ => None,
        };
        match next {
            Some((k, v)) => {
                key_span = k;
                current = v;
            }
            None => return Found::MissingIn(current.span()),
        }
    }
    Found::Value {
        key: key_span,
        value: current.span(),
    }
}

fn table_entry<'a, 'i>(
    table: &'a DeTable<'i>,
    key: &str,
) -> Option<(Range<usize>, &'a Spanned<DeValue<'i>>)> {
    table
        .iter()
        .find(|(k, _)| k.get_ref().as_ref() as &str == key)
        .map(|(k, v)| (k.span(), v))
}

/// Fill in the line and column of an error from its key path: the key's value when present (its
/// key for an unknown-key error), else the header of the table that should hold it (line 1 for the
/// top level). Errors that already have a position, and texts that do not parse, are left as they are.
pub fn position_of(text: &str, mut e: ScenarioError) -> ScenarioError {
    if e.line.is_some() {
        return e;
    }
    let Ok(doc) = DeTable::parse(text) else {
        return e;
    };
    let at = match find(&doc, &e.path) {
        Found::Value { key, value } => {
            if is_unknown_key(&e) {
                key.unwrap_or(value).start
            } else {
                value.start
            }
        }
        Found::MissingIn(parent) => parent.start,
    };
    set_position(text, &mut e, Some(at));
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_paths() {
        assert_eq!(normalise_path("."), "");
        assert_eq!(normalise_path(""), "");
        assert_eq!(normalise_path("topology.k"), "topology.k");
        assert_eq!(normalise_path("workload[0].size"), "workload.0.size");
        assert_eq!(
            normalise_path("workload[1].flows[2].dst"),
            "workload.1.flows.2.dst"
        );
        assert_eq!(normalise_path("workload.0.size"), "workload.0.size");
        assert_eq!(normalise_path("workload[0][3]"), "workload.0.3");
    }

    #[test]
    fn json_errors() {
        let parse = |text: &str| {
            let mut de = serde_json::Deserializer::from_str(text);
            let r: Result<ScenarioFile, _> = serde_path_to_error::deserialize(&mut de);
            from_json_error(r.unwrap_err())
        };
        let e = parse(
            r#"{"topology": {"kind": "fat_tree"}, "workload": [{"kind": "flows"}, {"kind": "incast", "size": "1x"}]}"#,
        );
        assert_eq!(e.path, "workload.1.size");
        assert_eq!(
            e.message,
            r#"expected a size like "1500B", "4KiB", "1MB" or "32MiB", found "1x""#
        );
        assert_eq!((e.line, e.column), (None, None));
        let e = parse(r#"{"topology": {"kind": "fat_tree", "kk": 8}}"#);
        assert_eq!(e.path, "topology.kk");
        assert!(e.message.starts_with("unknown field `kk`"), "{e}");
        let e = parse(r#"{"topology": {"k": 8}}"#);
        assert_eq!(e.path, "topology.kind");
        assert_eq!(e.message, "missing required key `kind`");
        let e = parse(r#"{"topology": {"kind": "fat_tree", "k": "eight"}}"#);
        assert_eq!(e.path, "topology.k");
        assert_eq!(e.message, r#"expected an integer, found string "eight""#);
    }

    #[test]
    fn line_and_column() {
        let text = "a = 1\nbb = \"µx\"\n";
        assert_eq!(line_col(text, 0), (1, 1));
        assert_eq!(line_col(text, 6), (2, 1));
        assert_eq!(line_col(text, 11), (2, 6));
        assert_eq!(line_col(text, text.len()), (3, 1));
    }

    #[test]
    fn finds_nested_values() {
        let text = "seed = 1\n[topology]\nkind = \"fat_tree\"\nk = 7\n\n[[workload]]\nkind = \"flows\"\nflows = [{src = 0, dst = 1, size = \"1MB\"}, { src = 2, dst = 99, size = 5 }]\n[[workload]]\nkind = \"incast\"\nsize = \"1MB\"\n";
        let pos = |path: &str| {
            let e = position_of(text, ScenarioError::at(path, "x"));
            (e.line.unwrap(), e.column.unwrap())
        };
        assert_eq!(pos("topology.k"), (4, 5));
        assert_eq!(pos("topology.leaves"), (2, 1));
        assert_eq!(pos("workload.1.size"), (11, 8));
        assert_eq!(pos("workload.1.receiver"), (9, 1));
        assert_eq!(pos("workload.0.flows.1.dst"), (8, 61));
        assert_eq!(pos("stop"), (1, 1));
        assert_eq!(pos(""), (1, 1));
    }
}
