//! A step graph as an Arrow IPC file (file or stream): one row per op, columns by name (others
//! are ignored): `kind` (text), `deps` (a list of integers), and per kind the op's keys as in
//! the JSON form: `rank`, `duration_ps` (integer) or `duration` (text) or `flops`; `src`, `dst`,
//! `size_bytes` (integer) or `size` (text); `op`, `algorithm`, `group`, `ranks` (a list),
//! `domain_size`; and `phase`, `name`. Nulls are absent keys. The file holds only ops: the
//! workload's `ranks` and `gpu_flops` keys give the rest; a collective names its ranks (`ranks`)
//! since there is no `groups` table.

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type,
    UInt64Type, UInt8Type,
};
use arrow_array::{Array, RecordBatch};
use arrow_ipc::reader::{FileReader, StreamReader};
use arrow_schema::{ArrowError, DataType};
use serde_json::{Map, Value};

use super::config::GraphBody;

/// The keys a column may give (a column `duration_ps` gives `duration`, `size_bytes` `size`).
const COLUMNS: [&str; 17] = [
    "kind",
    "deps",
    "phase",
    "name",
    "rank",
    "duration",
    "duration_ps",
    "flops",
    "src",
    "dst",
    "size",
    "size_bytes",
    "op",
    "algorithm",
    "group",
    "ranks",
    "domain_size",
];

/// Read the ops of an Arrow IPC file or stream (its bytes).
pub fn read(bytes: Vec<u8>) -> Result<GraphBody, String> {
    let stream = !bytes.starts_with(b"ARROW1");
    let kind = if stream { "stream" } else { "file" };
    crate::workload::replay::check_ipc_lengths(&bytes, !stream)
        .map_err(|e| format!("not a readable Arrow IPC {kind}: {e}"))?;
    let cursor = std::io::Cursor::new(bytes);
    let rows = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if stream {
            let reader = StreamReader::try_new(cursor, None)
                .map_err(|e| format!("not a readable Arrow IPC stream: {e}"))?;
            rows_of(reader)
        } else {
            let reader = FileReader::try_new(cursor, None)
                .map_err(|e| format!("not a readable Arrow IPC file: {e}"))?;
            rows_of(reader)
        }
    }))
    .unwrap_or_else(|_| {
        Err(format!(
            "not a readable Arrow IPC {kind}: its data is corrupt"
        ))
    })?;
    let body = Value::Object(Map::from_iter([("ops".to_string(), Value::Array(rows))]));
    serde_path_to_error::deserialize(body).map_err(|e| format!("{}: {}", e.path(), e.inner()))
}

fn rows_of<I>(reader: I) -> Result<Vec<Value>, String>
where
    I: Iterator<Item = Result<RecordBatch, ArrowError>>,
{
    let mut rows = Vec::new();
    let mut seen_batch = false;
    for batch in reader {
        let batch = batch.map_err(|e| format!("row {} (0-based): cannot read: {e}", rows.len()))?;
        seen_batch = true;
        let schema = batch.schema();
        let cols: Vec<(usize, &str)> = schema
            .fields()
            .iter()
            .enumerate()
            .filter_map(|(i, f)| COLUMNS.iter().find(|&&c| c == f.name()).map(|&c| (i, c)))
            .collect();
        if !cols.iter().any(|&(_, c)| c == "kind") {
            return Err("no `kind` column (one row per op: kind, deps, ...)".into());
        }
        for r in 0..batch.num_rows() {
            let mut row = Map::new();
            for &(i, name) in &cols {
                let v = value(batch.column(i).as_ref(), r).map_err(|t| {
                    format!("column {name:?}: unsupported type {t} (expected integers, floats, text or lists)")
                })?;
                let (key, v) = match (name, v) {
                    (_, Value::Null) => continue,
                    ("duration_ps", Value::Number(n)) => {
                        ("duration", Value::String(format!("{n}ps")))
                    }
                    ("size_bytes", v) => ("size", v),
                    (k, v) => (k, v),
                };
                row.insert(key.to_string(), v);
            }
            rows.push(Value::Object(row));
        }
    }
    if !seen_batch {
        return Err("no record batches in the file".into());
    }
    Ok(rows)
}

/// One cell as JSON (Err: the column's unsupported type).
fn value(a: &dyn Array, r: usize) -> Result<Value, String> {
    if a.is_null(r) {
        return Ok(Value::Null);
    }
    use DataType::*;
    Ok(match a.data_type() {
        Int8 => a.as_primitive::<Int8Type>().value(r).into(),
        Int16 => a.as_primitive::<Int16Type>().value(r).into(),
        Int32 => a.as_primitive::<Int32Type>().value(r).into(),
        Int64 => a.as_primitive::<Int64Type>().value(r).into(),
        UInt8 => a.as_primitive::<UInt8Type>().value(r).into(),
        UInt16 => a.as_primitive::<UInt16Type>().value(r).into(),
        UInt32 => a.as_primitive::<UInt32Type>().value(r).into(),
        UInt64 => a.as_primitive::<UInt64Type>().value(r).into(),
        Float32 => f64::from(a.as_primitive::<Float32Type>().value(r)).into(),
        Float64 => a.as_primitive::<Float64Type>().value(r).into(),
        Utf8 => a.as_string::<i32>().value(r).into(),
        LargeUtf8 => a.as_string::<i64>().value(r).into(),
        Utf8View => a.as_string_view().value(r).into(),
        List(_) => {
            let inner = a.as_list::<i32>().value(r);
            Value::Array(
                (0..inner.len())
                    .map(|j| value(inner.as_ref(), j))
                    .collect::<Result<_, _>>()?,
            )
        }
        LargeList(_) => {
            let inner = a.as_list::<i64>().value(r);
            Value::Array(
                (0..inner.len())
                    .map(|j| value(inner.as_ref(), j))
                    .collect::<Result<_, _>>()?,
            )
        }
        t => return Err(t.to_string()),
    })
}
