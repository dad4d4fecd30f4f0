//! Positions of errors: the key path of a serde error and the line/column of a key path in the text.

use super::error::ScenarioError;
use super::schema::ScenarioFile;

/// Deserialize TOML, reporting the key path and position of the first error.
pub fn deserialize_toml(text: &str) -> Result<ScenarioFile, ScenarioError> {
    let de =
        toml::Deserializer::parse(text).map_err(|e| from_toml_error(text, String::new(), &e))?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let path = if path == "." { String::new() } else { path };
        from_toml_error(text, path, e.inner())
    })
}

fn from_toml_error(text: &str, path: String, e: &toml::de::Error) -> ScenarioError {
    let (line, column) = match e.span() {
        Some(span) => line_col(text, span.start),
        None => (None, None),
    };
    ScenarioError {
        source_name: String::new(),
        path,
        line,
        column,
        message: e.message().trim().to_string(),
    }
}

/// 1-based line and column of byte offset `at`.
fn line_col(text: &str, at: usize) -> (Option<usize>, Option<usize>) {
    let at = at.min(text.len());
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let col = before
        .rsplit('\n')
        .next()
        .map(|l| l.chars().count())
        .unwrap_or(0)
        + 1;
    (Some(line), Some(col))
}

/// Fill in the line and column of a validation error from its key path.
pub fn position_of(text: &str, mut e: ScenarioError) -> ScenarioError {
    let _ = text;
    // TODO(helper): look the key path up in the TOML document's spans.
    e.line = None;
    e.column = None;
    e
}
