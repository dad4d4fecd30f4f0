//! faults.arrow: one row per fault period applied during the run (written when the scenario has
//! `[[fault]]` or `[[failure_process]]` entries). A flapping link has one row per down period, a
//! failure process one per failure; a period that had not ended when the run stopped has a null
//! `end_ps`, and a period scheduled after the stop has no row.
//!
//! Columns: `source` ("fault" or "failure_process") and `index` (the entry's position in its
//! list); `kind` ("down", "degrade", "loss", "delay", "flap"); `target` (what failed:
//! `"leaf:0--spine:1"` a cable, `"leaf:0->spine:1"` one direction, `"spine:3"` a node and all its
//! links, `"server:5"` a GPU server, `"tier:fabric"` every link of a tier); `time_ps`, `end_ps`,
//! `duration_ps` (null while open); `links` (the directed links it covered, by egress port as in
//! links.arrow) and `num_links`; `detection_ps` (how long routing took to notice a down link);
//! `packets_lost` (down and flap: packets on the wire and queued when the links went down; loss:
//! packets corrupted on its links while it was active; else 0).

use std::collections::HashMap;
use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{Int64Builder, ListBuilder, StringBuilder, UInt32Builder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use super::tables::int64;

/// One fault period.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultRow {
    pub source: &'static str,
    pub index: u32,
    pub kind: &'static str,
    pub target: String,
    pub time_ps: u64,
    pub end_ps: Option<u64>,
    /// Egress ports of the directed links covered.
    pub links: Vec<u32>,
    pub detection_ps: u64,
    pub packets_lost: u64,
}

pub const COLUMNS: [&str; 11] = [
    "source",
    "index",
    "kind",
    "target",
    "time_ps",
    "end_ps",
    "duration_ps",
    "links",
    "num_links",
    "detection_ps",
    "packets_lost",
];

pub fn faults_schema(metadata: &[(String, String)]) -> Schema {
    use DataType::{Int64, UInt32, Utf8};
    let fields = vec![
        Field::new("source", Utf8, false),
        Field::new("index", UInt32, false),
        Field::new("kind", Utf8, false),
        Field::new("target", Utf8, false),
        Field::new("time_ps", Int64, false),
        Field::new("end_ps", Int64, true),
        Field::new("duration_ps", Int64, true),
        Field::new(
            "links",
            DataType::List(Arc::new(Field::new("item", UInt32, true))),
            false,
        ),
        Field::new("num_links", UInt32, false),
        Field::new("detection_ps", Int64, false),
        Field::new("packets_lost", Int64, false),
    ];
    let metadata: HashMap<String, String> = metadata.iter().cloned().collect();
    Schema::new_with_metadata(fields, metadata)
}

fn batch(schema: &SchemaRef, rows: &[FaultRow]) -> io::Result<RecordBatch> {
    let n = rows.len();
    let str_col = |f: &dyn Fn(&FaultRow) -> &str| -> ArrayRef {
        let mut b = StringBuilder::with_capacity(n, n * 8);
        rows.iter().for_each(|r| b.append_value(f(r)));
        Arc::new(b.finish())
    };
    let u32_col = |f: &dyn Fn(&FaultRow) -> u32| -> ArrayRef {
        let mut b = UInt32Builder::with_capacity(n);
        rows.iter().for_each(|r| b.append_value(f(r)));
        Arc::new(b.finish())
    };
    let i64_col = |f: &dyn Fn(&FaultRow) -> Option<u64>| -> ArrayRef {
        let mut b = Int64Builder::with_capacity(n);
        rows.iter().for_each(|r| b.append_option(f(r).map(int64)));
        Arc::new(b.finish())
    };
    let mut links = ListBuilder::new(UInt32Builder::new());
    for r in rows {
        links.values().append_slice(&r.links);
        links.append(true);
    }
    let columns: Vec<ArrayRef> = vec![
        str_col(&|r| r.source),
        u32_col(&|r| r.index),
        str_col(&|r| r.kind),
        str_col(&|r| &r.target),
        i64_col(&|r| Some(r.time_ps)),
        i64_col(&|r| r.end_ps),
        i64_col(&|r| r.end_ps.map(|e| e.saturating_sub(r.time_ps))),
        Arc::new(links.finish()),
        u32_col(&|r| r.links.len() as u32),
        i64_col(&|r| Some(r.detection_ps)),
        i64_col(&|r| Some(r.packets_lost)),
    ];
    RecordBatch::try_new(schema.clone(), columns).map_err(io::Error::other)
}

/// Write faults.arrow to `out`.
pub fn write_faults_to<W: Write>(
    out: W,
    rows: &[FaultRow],
    metadata: &[(String, String)],
) -> io::Result<W> {
    super::rows::write_rows_to(out, faults_schema(metadata), rows, batch)
}

/// Write faults.arrow to `path` atomically.
pub fn write_faults(
    path: &Path,
    rows: &[FaultRow],
    metadata: &[(String, String)],
) -> io::Result<()> {
    super::rows::write_rows(path, faults_schema(metadata), rows, batch)
}
