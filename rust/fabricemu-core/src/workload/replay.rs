//! `kind = "replay"`: flows read from a CSV or Arrow IPC file, one flow per row.
//!
//! Columns are found by name (others are ignored, so a run's flows.arrow replays as it is):
//! - `src`, `dst`: host ids;
//! - the size: `size_bytes` (whole bytes) or `size` (`"1MB"`, `"4KiB"` or a number of bytes);
//! - the start: `start_ps` (whole ps), `start_ns` or `start_us` (numbers, exact decimals in text),
//!   or `start` (a duration with its unit, `"1.5us"`);
//! - optionally `tag` (any text; where it is absent or null, the `workload` column if there is
//!   one, so replaying a run's flows.arrow tags each flow with the workload that made it), carried
//!   into the `tag` column of the run's flows.arrow.
//!
//! CSV files have a header line; `#` lines and blank lines are skipped; fields may be quoted with
//! `"` (`""` inside quotes is a quote). A bad value is reported with its line (CSV) or 0-based row
//! (Arrow) and column. The workload's `start` is added to every flow's start.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type,
    UInt64Type, UInt8Type,
};
use arrow_array::{Array, RecordBatch};
use arrow_ipc::reader::{FileReader, StreamReader};
use arrow_schema::DataType;

use super::{FlowInit, FlowPlan};
use crate::config::FlowSpec;
use crate::ids::NodeId;
use crate::units::{parse_bytes, parse_time, Time};

/// The flows of a file, and their tags.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplayData {
    pub flows: Vec<FlowSpec>,
    /// Per flow: index into `tag_names`.
    pub tags: Vec<Option<u32>>,
    pub tag_names: Vec<String>,
}

/// The flows of `data`, each start moved by `offset_ps` (the workload's `start`).
pub fn expand(plan: &mut FlowPlan, workload: u32, data: &ReplayData, offset_ps: Time) {
    let base = plan.tag_names.len() as u32;
    plan.tag_names.extend(data.tag_names.iter().cloned());
    for (f, tag) in data.flows.iter().zip(data.tags.iter()) {
        plan.flows.push(FlowInit {
            tag: tag.map(|t| base + t),
            ..FlowInit::at(
                NodeId::new(f.src),
                NodeId::new(f.dst),
                f.size_bytes,
                f.start_ps.saturating_add(offset_ps),
                workload,
            )
        });
    }
}

/// Read a flow file (Arrow IPC file or stream, else CSV), checking every row against `n_hosts`.
///
/// Errors quote at most one offending field, and only of a file of the expected format (a binary
/// or non-regular file is refused without quoting it). A corrupt Arrow file is an error, never a
/// panic.
pub fn read_flow_file(path: &Path, n_hosts: u32) -> Result<ReplayData, String> {
    const WHAT: &str = "a CSV or Arrow IPC file of flows";
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot open: {e}"))?;
    if !meta.is_file() {
        return Err(format!("not a regular file (expected {WHAT})"));
    }
    let mut head = [0u8; 8];
    let mut file = File::open(path).map_err(|e| format!("cannot open: {e}"))?;
    let got = file
        .read(&mut head)
        .map_err(|e| format!("cannot read: {e}"))?;
    drop(file);
    let arrow = |stream: bool| -> Result<ReplayData, String> {
        let kind = if stream { "stream" } else { "file" };
        let bytes = std::fs::read(path).map_err(|e| format!("cannot read: {e}"))?;
        // The Arrow reader allocates what the file's lengths declare: check them against the
        // file's size first, so that a corrupt length is an error, not an allocation of terabytes.
        check_ipc_lengths(&bytes, !stream)
            .map_err(|e| format!("not a readable Arrow IPC {kind}: {e}"))?;
        // It validates what it decodes, but a corrupt file must not be able to reach a panic
        // inside it either: that is an unreadable file too.
        let cursor = std::io::Cursor::new(bytes);
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            if stream {
                let reader = StreamReader::try_new(cursor, None)
                    .map_err(|e| format!("not a readable Arrow IPC stream: {e}"))?;
                read_batches(reader, n_hosts)
            } else {
                let reader = FileReader::try_new(cursor, None)
                    .map_err(|e| format!("not a readable Arrow IPC file: {e}"))?;
                read_batches(reader, n_hosts)
            }
        }))
        .unwrap_or_else(|_| {
            Err(format!(
                "not a readable Arrow IPC {kind}: its data is corrupt"
            ))
        })
    };
    let data = if got >= 6 && &head[..6] == b"ARROW1" {
        arrow(false)?
    } else if got >= 4 && head[..4] == [0xff, 0xff, 0xff, 0xff] {
        arrow(true)?
    } else {
        let text = crate::workload::cdf::read_text_file(path, WHAT)?;
        read_csv(&text, n_hosts)?
    };
    if data.flows.is_empty() {
        return Err("no flows in the file".into());
    }
    Ok(data)
}

/// Check the lengths an Arrow IPC file (`file`) or stream declares (footer, blocks, messages)
/// against its size.
pub(crate) fn check_ipc_lengths(bytes: &[u8], file: bool) -> Result<(), String> {
    let len = bytes.len();
    if !file {
        return check_ipc_messages(bytes);
    }
    if len < 18 {
        return Err("too short".into());
    }
    let tail: [u8; 10] = bytes[len - 10..].try_into().expect("10 bytes");
    let footer_len = arrow_ipc::reader::read_footer_length(tail).map_err(|e| e.to_string())?;
    if footer_len > len - 18 {
        return Err(format!("footer length {footer_len} exceeds the file"));
    }
    let footer_at = len - 10 - footer_len;
    let footer = arrow_ipc::root_as_footer(&bytes[footer_at..len - 10])
        .map_err(|e| format!("corrupt footer: {e}"))?;
    let blocks = footer
        .recordBatches()
        .into_iter()
        .chain(footer.dictionaries());
    for list in blocks {
        for b in list {
            let (at, meta, body) = (b.offset(), b.metaDataLength(), b.bodyLength());
            if at < 0
                || meta < 0
                || body < 0
                || at as i128 + meta as i128 + body as i128 > len as i128
            {
                return Err(format!(
                    "a block (offset {at}, {meta} + {body} bytes) lies outside the file ({len} bytes)"
                ));
            }
            check_ipc_messages(&bytes[at as usize..(at + meta as i64) as usize])?;
        }
    }
    check_ipc_messages(&bytes[8..footer_at])
}

/// Check a sequence of encapsulated IPC messages: each metadata and body length fits.
fn check_ipc_messages(mut b: &[u8]) -> Result<(), String> {
    let word = |b: &[u8]| i32::from_le_bytes(b[..4].try_into().expect("4 bytes"));
    loop {
        if b.len() < 4 {
            return Ok(());
        }
        let mut meta = word(b);
        b = &b[4..];
        if meta == -1 {
            if b.len() < 4 {
                return Ok(());
            }
            meta = word(b);
            b = &b[4..];
        }
        if meta == 0 {
            return Ok(());
        }
        if meta < 0 || meta as usize > b.len() {
            return Err(format!(
                "a message's metadata length {meta} exceeds the file"
            ));
        }
        let (head, rest) = b.split_at(meta as usize);
        let message =
            arrow_ipc::root_as_message(head).map_err(|e| format!("corrupt message: {e}"))?;
        let body = message.bodyLength();
        if body < 0 || body as u64 > rest.len() as u64 {
            // Inside a file's block the body follows the block's metadata: checked by the caller.
            if body >= 0 && rest.is_empty() {
                return Ok(());
            }
            return Err(format!("a message's body length {body} exceeds the file"));
        }
        b = &rest[body as usize..];
    }
}

/// One value of a row, whatever the file's type for it.
#[derive(Debug, Clone, Copy)]
enum Cell<'a> {
    Null,
    Int(i128),
    Float(f64),
    Text(&'a str),
}

impl std::fmt::Display for Cell<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cell::Null => write!(f, "null"),
            Cell::Int(v) => write!(f, "{v}"),
            Cell::Float(v) => write!(f, "{v}"),
            Cell::Text(s) => write!(f, "{}", crate::workload::cdf::quote_field(s)),
        }
    }
}

/// The columns a file uses for each field (indices into its columns).
#[derive(Debug, Clone, Copy)]
struct Layout {
    src: usize,
    dst: usize,
    size: (usize, SizeUnit),
    start: (usize, StartUnit),
    tag: Option<usize>,
    /// A `workload` column, the tag of rows whose `tag` is null (a run's flows.arrow).
    tag_fallback: Option<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SizeUnit {
    Bytes,
    WithUnit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StartUnit {
    Ps,
    Ns,
    Us,
    WithUnit,
}

fn layout(names: &[String]) -> Result<Layout, String> {
    let find = |name: &str| names.iter().position(|n| n.trim() == name);
    // The file's column names, if they look like column names (short words): a file of another
    // format is not quoted.
    let listing = || {
        let plausible = names.len() <= 64
            && names.iter().all(|n| {
                let n = n.trim();
                n.len() <= 64
                    && n.chars().all(|c| {
                        c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ' ' | '(' | ')')
                    })
            });
        if names.is_empty() {
            "none".to_string()
        } else if plausible {
            names.join(", ")
        } else {
            format!("{} names that do not look like column names", names.len())
        }
    };
    let need = |name: &str| -> Result<usize, String> {
        find(name).ok_or_else(|| format!("no column {name:?} (the file has: {})", listing()))
    };
    let size = match (find("size_bytes"), find("size")) {
        (Some(i), _) => (i, SizeUnit::Bytes),
        (None, Some(i)) => (i, SizeUnit::WithUnit),
        (None, None) => {
            return Err(format!(
                "no column \"size_bytes\" or \"size\" (the file has: {})",
                listing()
            ))
        }
    };
    let start = [
        ("start_ps", StartUnit::Ps),
        ("start_ns", StartUnit::Ns),
        ("start_us", StartUnit::Us),
        ("start", StartUnit::WithUnit),
    ]
    .iter()
    .find_map(|&(name, unit)| find(name).map(|i| (i, unit)))
    .ok_or_else(|| {
        format!(
            "no start column: expected one of \"start_ps\", \"start_ns\", \"start_us\", \"start\" \
             (the file has: {})",
            listing()
        )
    })?;
    Ok(Layout {
        src: need("src")?,
        dst: need("dst")?,
        size,
        start,
        tag: find("tag"),
        tag_fallback: find("workload"),
    })
}

fn integer(cell: Cell<'_>) -> Option<i128> {
    match cell {
        Cell::Int(v) => Some(v),
        Cell::Float(v) if v.fract() == 0.0 && v.abs() < 1e30 => Some(v as i128),
        Cell::Text(s) => s.trim().replace('_', "").parse().ok(),
        _ => None,
    }
}

fn host(cell: Cell<'_>, n_hosts: u32) -> Result<u32, String> {
    match integer(cell) {
        Some(v) if (0..n_hosts as i128).contains(&v) => Ok(v as u32),
        Some(v) => Err(format!(
            "host id {v} is out of range: this topology has hosts 0..={}",
            n_hosts - 1
        )),
        None => Err(format!("expected a host id, found {cell}")),
    }
}

fn size(cell: Cell<'_>, unit: SizeUnit) -> Result<u64, String> {
    let v = match (cell, unit) {
        (Cell::Text(s), SizeUnit::WithUnit) => parse_bytes(s).map_err(|_| {
            format!(
                "expected a size like \"1500B\", \"4KiB\" or \"1MB\" (or a number of bytes), found {}",
                crate::workload::cdf::quote_field(s)
            )
        })?,
        _ => match integer(cell) {
            Some(v) if (0..=u64::MAX as i128).contains(&v) => v as u64,
            _ => return Err(format!("expected a whole number of bytes, found {cell}")),
        },
    };
    if v == 0 {
        return Err("expected a positive size, found 0".into());
    }
    Ok(v)
}

fn start(cell: Cell<'_>, unit: StartUnit) -> Result<u64, String> {
    let (suffix, scale) = match unit {
        StartUnit::Ps => ("ps", 1.0),
        StartUnit::Ns => ("ns", 1e3),
        StartUnit::Us => ("us", 1e6),
        StartUnit::WithUnit => {
            return match cell {
                Cell::Text(s) => parse_time(s).map_err(|_| {
                    format!(
                        "expected a duration like \"1.5us\" or \"0ns\", found {}",
                        crate::workload::cdf::quote_field(s)
                    )
                }),
                _ => Err(format!(
                    "expected a duration with a unit like \"1.5us\", found {cell} (a column named \
                     start_ps, start_ns or start_us holds plain numbers)"
                )),
            }
        }
    };
    let bad = || format!("expected a time >= 0 in {suffix}, found {cell}");
    match cell {
        Cell::Int(v) => {
            let ps = v.checked_mul(scale as i128).ok_or_else(bad)?;
            u64::try_from(ps).map_err(|_| bad())
        }
        Cell::Float(v) => {
            let ps = (v * scale).round();
            if v.is_finite() && ps >= 0.0 && ps < u64::MAX as f64 {
                Ok(ps as u64)
            } else {
                Err(bad())
            }
        }
        Cell::Text(s) => {
            let s = s.trim();
            if s.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
                parse_time(&format!("{s}{suffix}")).map_err(|_| bad())
            } else {
                Err(bad())
            }
        }
        Cell::Null => Err(bad()),
    }
}

/// Accumulates rows; `at` names the row in messages ("line 12" or "row 11 (0-based)").
#[derive(Default)]
struct Collector {
    data: ReplayData,
    tag_index: HashMap<String, u32>,
}

impl Collector {
    fn row<'c>(
        &mut self,
        at: &str,
        names: &[String],
        l: &Layout,
        n_hosts: u32,
        cell: &dyn Fn(usize) -> Cell<'c>,
    ) -> Result<(), String> {
        let col = |i: usize, r: Result<u64, String>| -> Result<u64, String> {
            r.map_err(|e| format!("{at}, column {}: {e}", names[i].trim()))
        };
        let null_check = |i: usize| -> Result<(), String> {
            if matches!(cell(i), Cell::Null)
                || matches!(cell(i), Cell::Text(s) if s.trim().is_empty())
            {
                return Err(format!("{at}, column {}: missing value", names[i].trim()));
            }
            Ok(())
        };
        for i in [l.src, l.dst, l.size.0, l.start.0] {
            null_check(i)?;
        }
        let src = col(l.src, host(cell(l.src), n_hosts).map(u64::from))? as u32;
        let dst = col(l.dst, host(cell(l.dst), n_hosts).map(u64::from))? as u32;
        if src == dst {
            return Err(format!(
                "{at}, column {}: a flow's dst must differ from its src ({src})",
                names[l.dst].trim()
            ));
        }
        let size_bytes = col(l.size.0, size(cell(l.size.0), l.size.1))?;
        let start_ps = col(l.start.0, start(cell(l.start.0), l.start.1))?;
        let tag_cell = match l.tag.map(cell) {
            None | Some(Cell::Null) => l.tag_fallback.map(cell),
            given => given,
        };
        let tag = match tag_cell {
            None | Some(Cell::Null) => None,
            Some(c) => {
                let text = match c {
                    Cell::Text(s) => s.to_string(),
                    other => other.to_string(),
                };
                let next = self.data.tag_names.len() as u32;
                let id = *self.tag_index.entry(text.clone()).or_insert(next);
                if id == next {
                    self.data.tag_names.push(text);
                }
                Some(id)
            }
        };
        self.data.flows.push(FlowSpec {
            src,
            dst,
            size_bytes,
            start_ps,
        });
        self.data.tags.push(tag);
        Ok(())
    }
}

fn read_batches<I>(reader: I, n_hosts: u32) -> Result<ReplayData, String>
where
    I: Iterator<Item = Result<RecordBatch, arrow_schema::ArrowError>>,
{
    let mut out = Collector::default();
    let mut offset = 0usize;
    let mut l: Option<(Vec<String>, Layout)> = None;
    for batch in reader {
        let batch = batch.map_err(|e| format!("row {offset} (0-based): cannot read: {e}"))?;
        if l.is_none() {
            let names: Vec<String> = batch
                .schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect();
            let lay = layout(&names)?;
            for i in [
                Some(lay.src),
                Some(lay.dst),
                Some(lay.size.0),
                Some(lay.start.0),
                lay.tag,
                lay.tag_fallback,
            ]
            .into_iter()
            .flatten()
            {
                let t = batch.column(i).data_type();
                if !supported(t) {
                    return Err(format!(
                        "column {}: unsupported type {t} (expected integers, floats or text)",
                        crate::workload::cdf::quote_field(&names[i])
                    ));
                }
            }
            l = Some((names, lay));
        }
        let (names, lay) = l.as_ref().expect("set above");
        for r in 0..batch.num_rows() {
            let at = format!("row {} (0-based)", offset + r);
            let cell = |i: usize| arrow_cell(batch.column(i).as_ref(), r);
            out.row(&at, names, lay, n_hosts, &cell)?;
        }
        offset += batch.num_rows();
    }
    if l.is_none() {
        return Err("no record batches in the file".into());
    }
    Ok(out.data)
}

fn supported(t: &DataType) -> bool {
    use DataType::*;
    matches!(
        t,
        Int8 | Int16
            | Int32
            | Int64
            | UInt8
            | UInt16
            | UInt32
            | UInt64
            | Float32
            | Float64
            | Utf8
            | LargeUtf8
            | Utf8View
    ) || matches!(t, Dictionary(k, v) if k.is_integer() && matches!(**v, Utf8 | LargeUtf8))
}

/// Row `r` of a dictionary-encoded string column (as fabricemu writes its string columns).
fn dict_text(a: &dyn Array, r: usize) -> Cell<'_> {
    fn of<K: arrow_array::types::ArrowDictionaryKeyType>(a: &dyn Array, r: usize) -> Cell<'_> {
        let d = a.as_dictionary::<K>();
        let Some(k) = arrow_buffer::ArrowNativeType::to_usize(d.keys().value(r)) else {
            return Cell::Null;
        };
        let values = d.values();
        if k >= values.len() || values.is_null(k) {
            return Cell::Null;
        }
        match values.data_type() {
            DataType::Utf8 => Cell::Text(values.as_string::<i32>().value(k)),
            DataType::LargeUtf8 => Cell::Text(values.as_string::<i64>().value(k)),
            _ => Cell::Null,
        }
    }
    let DataType::Dictionary(key, _) = a.data_type() else {
        return Cell::Null;
    };
    use DataType::*;
    match **key {
        Int8 => of::<Int8Type>(a, r),
        Int16 => of::<Int16Type>(a, r),
        Int32 => of::<Int32Type>(a, r),
        Int64 => of::<Int64Type>(a, r),
        UInt8 => of::<UInt8Type>(a, r),
        UInt16 => of::<UInt16Type>(a, r),
        UInt32 => of::<UInt32Type>(a, r),
        UInt64 => of::<UInt64Type>(a, r),
        _ => Cell::Null,
    }
}

fn arrow_cell(a: &dyn Array, r: usize) -> Cell<'_> {
    if a.is_null(r) {
        return Cell::Null;
    }
    use DataType::*;
    match a.data_type() {
        Int8 => Cell::Int(a.as_primitive::<Int8Type>().value(r).into()),
        Int16 => Cell::Int(a.as_primitive::<Int16Type>().value(r).into()),
        Int32 => Cell::Int(a.as_primitive::<Int32Type>().value(r).into()),
        Int64 => Cell::Int(a.as_primitive::<Int64Type>().value(r).into()),
        UInt8 => Cell::Int(a.as_primitive::<UInt8Type>().value(r).into()),
        UInt16 => Cell::Int(a.as_primitive::<UInt16Type>().value(r).into()),
        UInt32 => Cell::Int(a.as_primitive::<UInt32Type>().value(r).into()),
        UInt64 => Cell::Int(a.as_primitive::<UInt64Type>().value(r).into()),
        Float32 => Cell::Float(a.as_primitive::<Float32Type>().value(r).into()),
        Float64 => Cell::Float(a.as_primitive::<Float64Type>().value(r)),
        Utf8 => Cell::Text(a.as_string::<i32>().value(r)),
        LargeUtf8 => Cell::Text(a.as_string::<i64>().value(r)),
        Utf8View => Cell::Text(a.as_string_view().value(r)),
        Dictionary(..) => dict_text(a, r),
        _ => Cell::Null,
    }
}

/// Split one CSV line into fields (quotes with `""` escapes); `None` if a quote is not closed.
fn csv_fields(line: &str) -> Option<Vec<String>> {
    let mut fields = Vec::new();
    let mut cur = String::new();
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    let mut was_quoted = false;
    while let Some(c) = chars.next() {
        if quoted {
            if c == '"' {
                if chars.peek() == Some(&'"') {
                    chars.next();
                    cur.push('"');
                } else {
                    quoted = false;
                }
            } else {
                cur.push(c);
            }
        } else if c == '"' && cur.trim().is_empty() {
            cur.clear();
            quoted = true;
            was_quoted = true;
        } else if c == ',' {
            fields.push(if was_quoted {
                std::mem::take(&mut cur)
            } else {
                std::mem::take(&mut cur).trim().to_string()
            });
            was_quoted = false;
        } else {
            cur.push(c);
        }
    }
    if quoted {
        return None;
    }
    fields.push(if was_quoted {
        cur
    } else {
        cur.trim().to_string()
    });
    Some(fields)
}

fn read_csv(text: &str, n_hosts: u32) -> Result<ReplayData, String> {
    let mut out = Collector::default();
    let mut header: Option<(Vec<String>, Layout)> = None;
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let line = raw.trim_end_matches('\r');
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let fields = csv_fields(line).ok_or_else(|| format!("line {line_no}: unclosed quote"))?;
        match &header {
            None => {
                let names: Vec<String> = fields.iter().map(|f| f.trim().to_string()).collect();
                let lay = layout(&names).map_err(|e| format!("line {line_no} (header): {e}"))?;
                header = Some((names, lay));
            }
            Some((names, lay)) => {
                if fields.len() != names.len() {
                    return Err(format!(
                        "line {line_no}: expected {} fields as in the header, found {}",
                        names.len(),
                        fields.len()
                    ));
                }
                let at = format!("line {line_no}");
                let cell = |k: usize| {
                    let f = fields[k].as_str();
                    if f.is_empty() {
                        Cell::Null
                    } else {
                        Cell::Text(f)
                    }
                };
                out.row(&at, names, lay, n_hosts, &cell)?;
            }
        }
    }
    if header.is_none() {
        return Err("empty file: expected a header line (src,dst,size_bytes,start_ps)".into());
    }
    Ok(out.data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_rows_and_errors() {
        let ok = "# a trace\nsrc,dst,size,start,tag\n0,1,1MB,1.5us,\"a, b\"\n2,3,4096,0ns,x\n";
        let d = read_csv(ok, 4).unwrap();
        assert_eq!(d.flows.len(), 2);
        assert_eq!(
            d.flows[0],
            FlowSpec {
                src: 0,
                dst: 1,
                size_bytes: 1_000_000,
                start_ps: 1_500_000
            }
        );
        assert_eq!(d.tag_names, vec!["a, b".to_string(), "x".to_string()]);
        assert_eq!(d.tags, vec![Some(0), Some(1)]);

        let d = read_csv("src,dst,size_bytes,start_ns\n0,1,10,2.5\n", 2).unwrap();
        assert_eq!(d.flows[0].start_ps, 2500);
        assert_eq!(d.tags, vec![None]);

        let bad = |t: &str| read_csv(t, 4).unwrap_err();
        assert_eq!(
            bad("src,dst,size_bytes,start_ps\n0,1,10,0\n0,9,10,0\n"),
            "line 3, column dst: host id 9 is out of range: this topology has hosts 0..=3"
        );
        assert!(
            bad("src,dst,size_bytes,start_ps\n0,1,x,0\n").starts_with("line 2, column size_bytes:")
        );
        assert!(bad("src,dst,size_bytes,start_ps\n0,1,0,0\n").contains("positive size"));
        assert!(bad("src,dst,size_bytes,start_ps\n0,0,5,0\n").contains("must differ"));
        assert!(bad("src,dst,size_bytes,start_ps\n0,1,5\n").contains("expected 4 fields"));
        assert!(
            bad("src,dst,size_bytes,start_ps\n0,1,5,\n").contains("column start_ps: missing value")
        );
        assert!(bad("src,dst,size,start\n0,1,5,7\n").contains("column start: expected a duration"));
        assert!(bad("src,dest,size,start\n").contains("no column \"dst\""));
        assert!(bad("").contains("header"));
    }

    /// A file `name` holding `bytes` in test `test`'s folder (see [`temp_dir`]).
    fn temp(test: &str, name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let dir = temp_dir(test);
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    #[test]
    fn errors_echo_no_file_contents() {
        let secret = "AWS_SECRET=abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnop";
        // An environment block: binary (NUL-separated), refused without a word of it.
        let p = temp(
            "echo",
            "environ",
            format!("HOME=/root\0{secret}\0PATH=/bin\0").as_bytes(),
        );
        let e = read_flow_file(&p, 4).unwrap_err();
        assert!(e.contains("binary data") && !e.contains("SECRET"), "{e}");
        // A text file of another format: its "header" is not listed.
        let p = temp(
            "echo",
            "env.txt",
            format!("{secret}\nHOME=/root\n").as_bytes(),
        );
        let e = read_flow_file(&p, 4).unwrap_err();
        assert!(!e.contains("SECRET") && !e.contains("HOME"), "{e}");
        // A bad field of a real flow file is quoted, but at most 40 characters of it.
        let p = temp(
            "echo",
            "long.csv",
            format!("src,dst,size,start_ps\n0,1,{secret},0\n").as_bytes(),
        );
        let e = read_flow_file(&p, 4).unwrap_err();
        assert!(e.starts_with("line 2, column size:"), "{e}");
        assert!(!e.contains("0123456789abcdefghijklmnop"), "{e}");
        #[cfg(unix)]
        {
            let e = read_flow_file(Path::new("/dev/zero"), 4).unwrap_err();
            assert!(e.contains("not a regular file"), "{e}");
        }
        let _ = std::fs::remove_dir_all(temp_dir("echo"));
    }

    /// Test `test`'s folder of files (removed at the test's end).
    fn temp_dir(test: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("fabricemu-replay-{test}-{}", std::process::id()))
    }

    #[test]
    fn corrupt_arrow_files_are_errors() {
        use arrow_array::UInt64Array;
        use std::sync::Arc;
        let col = |v: Vec<u64>| Arc::new(UInt64Array::from(v)) as arrow_array::ArrayRef;
        let batch = RecordBatch::try_from_iter([
            ("src", col(vec![0, 1, 2])),
            ("dst", col(vec![1, 2, 3])),
            ("size_bytes", col(vec![10, 20, 30])),
            ("start_ps", col(vec![0, 5, 7])),
        ])
        .unwrap();
        let mut bytes = Vec::new();
        {
            let mut w =
                arrow_ipc::writer::FileWriter::try_new(&mut bytes, &batch.schema()).unwrap();
            w.write(&batch).unwrap();
            w.finish().unwrap();
        }
        let good = temp("corrupt", "good.arrow", &bytes);
        assert_eq!(read_flow_file(&good, 4).unwrap().flows.len(), 3);
        // Truncated at every length, and with every byte garbled in turn: an error or a valid
        // read, never a panic.
        for cut in (6..bytes.len()).step_by(7) {
            let p = temp("corrupt", "cut.arrow", &bytes[..cut]);
            assert!(read_flow_file(&p, 4).is_err(), "cut at {cut}");
        }
        for i in 8..bytes.len() {
            let mut g = bytes.clone();
            g[i] ^= 0xa5;
            let p = temp("corrupt", "garbled.arrow", &g);
            let _ = read_flow_file(&p, 4);
        }
        let _ = std::fs::remove_dir_all(temp_dir("corrupt"));
    }
}
