//! actions.arrow: one row per action a live controller applied (written when a run's control
//! loop applied any; a run whose controller did nothing has no actions.arrow, so its outputs
//! are byte-identical to a run without one).
//!
//! Columns: `time_ps` (the boundary's simulated time: the action took effect then), `source`
//! (`"policy:telemetry_aware"` for the built-in policy, `"python"` for a Python controller),
//! `action` (`set_algorithm`, `reroute`, `set_cc`, `fault`, `restore`), `target` (what it acted
//! on: `"collective 0 call 3"`, `"flow 12"`, `"dcqcn.g"`, `"link 40"`), `value` (the new
//! algorithm, entropy, parameter value, fault kind, or `"up"`), `detail` (what it did: flows
//! cancelled and appended, the old value, the fault's number, the policy's predictions).

use std::collections::HashMap;
use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{Int64Builder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use super::tables::int64;
use crate::control::ActionRow;

/// Name of the actions table in an output folder.
pub const ACTIONS_FILE: &str = "actions.arrow";

pub const COLUMNS: [&str; 6] = ["time_ps", "source", "action", "target", "value", "detail"];

pub fn actions_schema(metadata: &[(String, String)]) -> Schema {
    use DataType::{Int64, Utf8};
    let fields = vec![
        Field::new("time_ps", Int64, false),
        Field::new("source", Utf8, false),
        Field::new("action", Utf8, false),
        Field::new("target", Utf8, false),
        Field::new("value", Utf8, false),
        Field::new("detail", Utf8, false),
    ];
    let metadata: HashMap<String, String> = metadata.iter().cloned().collect();
    Schema::new_with_metadata(fields, metadata)
}

fn batch(schema: &SchemaRef, rows: &[ActionRow]) -> io::Result<RecordBatch> {
    let n = rows.len();
    let str_col = |f: &dyn Fn(&ActionRow) -> &str| -> ArrayRef {
        let mut b = StringBuilder::with_capacity(n, n * 16);
        rows.iter().for_each(|r| b.append_value(f(r)));
        Arc::new(b.finish())
    };
    let mut time = Int64Builder::with_capacity(n);
    rows.iter()
        .for_each(|r| time.append_value(int64(r.time_ps)));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(time.finish()),
        str_col(&|r| &r.source),
        str_col(&|r| r.action),
        str_col(&|r| &r.target),
        str_col(&|r| &r.value),
        str_col(&|r| &r.detail),
    ];
    RecordBatch::try_new(schema.clone(), columns).map_err(io::Error::other)
}

/// Write actions.arrow to `out`.
pub fn write_actions_to<W: Write>(
    out: W,
    rows: &[ActionRow],
    metadata: &[(String, String)],
) -> io::Result<W> {
    super::rows::write_rows_to(out, actions_schema(metadata), rows, batch)
}

/// Write actions.arrow to `path` atomically.
pub fn write_actions(
    path: &Path,
    rows: &[ActionRow],
    metadata: &[(String, String)],
) -> io::Result<()> {
    super::rows::write_rows(path, actions_schema(metadata), rows, batch)
}
