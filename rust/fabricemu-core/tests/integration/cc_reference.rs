//! The reference table of every congestion-control parameter (issue 15, item 4: "defaults = the
//! published values, with sources in a reference table"), docs/reference/cc_parameters.csv and
//! its copy in docs/congestion-control.md, against the code: for each scheme, a small scenario at
//! the table's reference fabric (100 Gbps host links, the default MTU) is normalised and
//! - every row's default is the value the normalised scenario writes (or, for `absent`, the key
//!   is absent and listed with its meaning in `absent_means()`),
//! - every key of the scheme's normalised table has a row (a new key without a row fails),
//! - the docs table has exactly the CSV's rows.
//!
//! So neither the table nor the docs can drift from the defaults the code uses.

use std::collections::BTreeSet;
use std::fs;

use fabricemu_core::scenario::normalise::may_be_absent;
use fabricemu_core::scenario::{normalised_json, parse_toml};
use serde_json::Value;

use crate::common::crate_dir;

const COLUMNS: [&str; 6] = ["scheme", "key", "default", "unit", "rule", "source"];

/// One CSV line split into fields (double quotes around a field that holds commas; no escaped
/// quotes inside: the table has none).
fn csv_fields(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    assert!(!quoted, "unbalanced quotes: {line}");
    out.push(cur);
    out
}

fn csv_rows() -> Vec<Vec<String>> {
    let path = crate_dir().join("../../docs/reference/cc_parameters.csv");
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines();
    assert_eq!(
        csv_fields(lines.next().unwrap()),
        COLUMNS,
        "the CSV's header"
    );
    lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f = csv_fields(l);
            assert_eq!(f.len(), COLUMNS.len(), "{l}");
            f
        })
        .collect()
}

/// The rows of the markdown table after the heading `heading` in docs/congestion-control.md
/// (backticks dropped, cells trimmed; the header and separator rows skipped).
fn docs_rows(heading: &str) -> Vec<Vec<String>> {
    let path = crate_dir().join("../../docs/congestion-control.md");
    let text = fs::read_to_string(&path).unwrap();
    let start = text
        .find(heading)
        .unwrap_or_else(|| panic!("docs/congestion-control.md has no {heading:?}"));
    let rows: Vec<Vec<String>> = text[start..]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let inner = l.trim().trim_start_matches('|').trim_end_matches('|');
            inner
                .split(" | ")
                .map(|c| c.trim().replace('`', ""))
                .collect()
        })
        .collect();
    assert_eq!(rows[0], COLUMNS, "the docs table's header");
    rows[2..].to_vec()
}

/// The scenario of `scheme` at the reference fabric.
fn scenario(scheme: &str) -> String {
    let extra = match scheme {
        "dcqcn" => "[switch.ecn]\nenabled = true\n[transport]\ncc = \"dcqcn\"\n",
        "dcqcn_mellanox" => {
            "[switch.ecn]\nenabled = true\n[transport]\ncc = \"dcqcn\"\n\
             [transport.dcqcn]\nvariant = \"mellanox\"\n"
        }
        "dctcp" => "[transport]\ncc = \"dctcp\"\n",
        "swift" => "[transport]\ncc = \"swift\"\n",
        "hpcc" => "[transport]\ncc = \"hpcc\"\n",
        "nscc" => "[switch.ecn]\nenabled = true\n[transport]\ncc = \"nscc\"\n",
        "credits" => "[transport.credits]\n",
        "trimming" => "[switch.pfc]\nenabled = false\n[switch.trimming]\n",
        other => panic!("scheme {other:?}: add its scenario here"),
    };
    format!(
        "name = \"cc-reference\"\nstop = \"1us\"\n\
         [topology]\nkind = \"leaf_spine\"\nleaves = 1\nspines = 1\nhosts_per_leaf = 2\n\
         link_rate = \"100Gbps\"\nlink_delay = \"1us\"\n\
         [[workload]]\nkind = \"incast\"\nreceiver = 0\nsenders = 1\nsize = \"4KB\"\n{extra}"
    )
}

/// Whether normalised value `v` is the table's `default`.
fn same(v: &Value, default: &str) -> bool {
    match v {
        Value::String(s) => s == default,
        Value::Bool(b) => default.parse::<bool>().ok() == Some(*b),
        Value::Number(n) => default.parse::<f64>().ok() == n.as_f64(),
        _ => false,
    }
}

#[test]
fn the_reference_table_holds_the_defaults_the_code_uses() {
    let rows = csv_rows();
    let schemes: BTreeSet<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    for needed in [
        "dcqcn", "dctcp", "swift", "hpcc", "nscc", "credits", "trimming",
    ] {
        assert!(schemes.contains(needed), "no rows for {needed}");
    }
    for scheme in &schemes {
        let text = scenario(scheme);
        let (file, spec) = parse_toml(&text, scheme).unwrap_or_else(|e| panic!("{scheme}: {e}"));
        let norm: Value = serde_json::from_str(&normalised_json(&file, &spec)).unwrap();
        let mine: Vec<&Vec<String>> = rows.iter().filter(|r| r[0] == *scheme).collect();
        // The table the scheme's keys live in (all its rows share it).
        let table_path = mine[0][1].rsplit_once('.').unwrap().0.to_string();
        let table = table_path
            .split('.')
            .fold(&norm, |v, seg| &v[seg])
            .as_object()
            .unwrap_or_else(|| panic!("{scheme}: no [{table_path}] in the normalised scenario"));
        let mut listed = BTreeSet::new();
        for r in &mine {
            let (key, default) = (&r[1], &r[2]);
            let (t, leaf) = key.rsplit_once('.').unwrap();
            assert_eq!(t, table_path, "{scheme}: {key} is not in [{table_path}]");
            assert!(!r[3].is_empty(), "{scheme}: {key} has no unit");
            assert!(!r[5].is_empty(), "{scheme}: {key} has no source");
            listed.insert(leaf.to_string());
            match table.get(leaf) {
                None => {
                    assert_eq!(
                        default, "absent",
                        "{scheme}: {key} is absent from the normalised scenario"
                    );
                    assert!(
                        may_be_absent(key),
                        "{scheme}: {key} absent without a meaning"
                    );
                    assert!(!r[4].is_empty(), "{scheme}: {key}: absent needs its rule");
                }
                Some(v) => assert!(
                    same(v, default),
                    "{scheme}: {key}: the table says {default}, the code {v}"
                ),
            }
        }
        for key in table.keys() {
            assert!(
                listed.contains(key),
                "{scheme}: {table_path}.{key} has no row in docs/reference/cc_parameters.csv"
            );
        }
    }
}

#[test]
fn the_docs_table_is_the_csv() {
    let csv = csv_rows();
    let docs = docs_rows("### Reference table");
    assert_eq!(docs.len(), csv.len(), "rows in the docs and the CSV");
    for (d, c) in docs.iter().zip(&csv) {
        assert_eq!(d, c, "docs/congestion-control.md against the CSV");
    }
}
