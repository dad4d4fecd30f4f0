//! run.json: the scenario, seed, version and run statistics.

use std::io::{self, Write};
use std::path::Path;

use super::atomic::write_atomic;

/// Write `value` as pretty-printed JSON (with a final newline) to `path`, atomically.
pub fn write_run_json(path: &Path, value: &serde_json::Value) -> io::Result<()> {
    let mut text = serde_json::to_string_pretty(value).map_err(io::Error::other)?;
    text.push('\n');
    write_atomic(path, |f| f.write_all(text.as_bytes()))
}
