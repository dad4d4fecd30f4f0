//! circuits.arrow: one row per optical circuit that came up or went dark during the run (written
//! when the scenario has an `[ocs]`). The initial configuration's circuits have an "up" row at
//! time 0 (`source` "initial"); each reconfiguration a "down" row per circuit it took dark (at its
//! start) and an "up" row per circuit it made (at its end).
//!
//! Columns: `time_ps`; `event` ("up" or "down"); `source` ("initial", "schedule": an
//! `[[ocs.reconfigure]]` entry, "control": a controller's action); `reconfiguration` (0, 1, ...
//! in start order; null for the initial circuits); `ocs_port_a`, `ocs_port_b` (the circuit's two
//! OCS ports, lower first); `switch_a`, `switch_b` (node ids), `name_a`, `name_b` (`"agg:3"`),
//! `port_a`, `port_b` (the switch ports: the circuit's two directed links, by egress port as in
//! links.arrow and ports.arrow).

use std::collections::HashMap;
use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{Int64Builder, StringBuilder, UInt32Builder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use super::tables::int64;

/// One circuit coming up or going dark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CircuitRow {
    pub time_ps: u64,
    pub event: &'static str,
    pub source: &'static str,
    pub reconfiguration: Option<u32>,
    pub ocs_port_a: u32,
    pub ocs_port_b: u32,
    pub switch_a: u32,
    pub switch_b: u32,
    pub name_a: String,
    pub name_b: String,
    pub port_a: u32,
    pub port_b: u32,
}

pub const COLUMNS: [&str; 12] = [
    "time_ps",
    "event",
    "source",
    "reconfiguration",
    "ocs_port_a",
    "ocs_port_b",
    "switch_a",
    "switch_b",
    "name_a",
    "name_b",
    "port_a",
    "port_b",
];

pub fn circuits_schema(metadata: &[(String, String)]) -> Schema {
    use DataType::{Int64, UInt32, Utf8};
    let fields = vec![
        Field::new("time_ps", Int64, false),
        Field::new("event", Utf8, false),
        Field::new("source", Utf8, false),
        Field::new("reconfiguration", UInt32, true),
        Field::new("ocs_port_a", UInt32, false),
        Field::new("ocs_port_b", UInt32, false),
        Field::new("switch_a", UInt32, false),
        Field::new("switch_b", UInt32, false),
        Field::new("name_a", Utf8, false),
        Field::new("name_b", Utf8, false),
        Field::new("port_a", UInt32, false),
        Field::new("port_b", UInt32, false),
    ];
    let metadata: HashMap<String, String> = metadata.iter().cloned().collect();
    Schema::new_with_metadata(fields, metadata)
}

fn batch(schema: &SchemaRef, rows: &[CircuitRow]) -> io::Result<RecordBatch> {
    let n = rows.len();
    let str_col = |f: &dyn Fn(&CircuitRow) -> &str| -> ArrayRef {
        let mut b = StringBuilder::with_capacity(n, n * 8);
        rows.iter().for_each(|r| b.append_value(f(r)));
        Arc::new(b.finish())
    };
    let u32_col = |f: &dyn Fn(&CircuitRow) -> Option<u32>| -> ArrayRef {
        let mut b = UInt32Builder::with_capacity(n);
        rows.iter().for_each(|r| b.append_option(f(r)));
        Arc::new(b.finish())
    };
    let mut time = Int64Builder::with_capacity(n);
    rows.iter()
        .for_each(|r| time.append_value(int64(r.time_ps)));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(time.finish()),
        str_col(&|r| r.event),
        str_col(&|r| r.source),
        u32_col(&|r| r.reconfiguration),
        u32_col(&|r| Some(r.ocs_port_a)),
        u32_col(&|r| Some(r.ocs_port_b)),
        u32_col(&|r| Some(r.switch_a)),
        u32_col(&|r| Some(r.switch_b)),
        str_col(&|r| &r.name_a),
        str_col(&|r| &r.name_b),
        u32_col(&|r| Some(r.port_a)),
        u32_col(&|r| Some(r.port_b)),
    ];
    RecordBatch::try_new(schema.clone(), columns).map_err(io::Error::other)
}

/// Write circuits.arrow to `out`.
pub fn write_circuits_to<W: Write>(
    out: W,
    rows: &[CircuitRow],
    metadata: &[(String, String)],
) -> io::Result<W> {
    super::rows::write_rows_to(out, circuits_schema(metadata), rows, batch)
}

/// Write circuits.arrow to `path` atomically.
pub fn write_circuits(
    path: &Path,
    rows: &[CircuitRow],
    metadata: &[(String, String)],
) -> io::Result<()> {
    super::rows::write_rows(path, circuits_schema(metadata), rows, batch)
}
