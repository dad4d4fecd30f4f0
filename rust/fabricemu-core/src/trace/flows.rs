//! flows.arrow: one row per flow.
//!
//! An Arrow IPC *file* (random-access format, readable by `pyarrow.ipc.open_file`, polars `read_ipc`
//! and DuckDB), uncompressed, written in record batches of at most [`BATCH_ROWS`] rows so a large table
//! is never held twice in memory. The bytes depend only on the inputs: identical runs give identical
//! files.

use std::collections::HashMap;
use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{BooleanBuilder, Float64Builder, Int64Builder, UInt32Builder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_ipc::writer::FileWriter;
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use super::atomic::AtomicFile;
use super::tables::{dict_field, int64, DictColumn};

/// What the engine knows of one flow at the end of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowRow {
    pub flow_id: u64,
    pub src: u32,
    pub dst: u32,
    pub size_bytes: u64,
    /// When the flow started, or (if it never did) when it was scheduled to; [`NOT_SCHEDULED`]
    /// for a flow waiting on others that never finished (written as null).
    pub start_ps: u64,
    /// Whether the flow started sending before the run stopped.
    pub started: bool,
    /// When the last byte reached the receiver; `None` if it had not when the run stopped.
    pub finish_ps: Option<u64>,
    /// FCT of the flow alone in the fabric on its path.
    pub ideal_fct_ps: u64,
    /// Index into the scenario's workloads.
    pub workload: u32,
    pub packets_sent: u64,
    pub retransmits: u64,
    pub drops: u64,
    /// Data packets that arrived ECN-marked, and CNPs the receiver sent for them.
    pub ecn_marks: u64,
    pub cnps: u64,
    /// Data packets that arrived ahead of the next expected one, and the largest such gap.
    pub out_of_order_packets: u64,
    pub max_reorder_distance: u64,
    /// Packets of the flow (data or control) dropped because no live path led to their
    /// destination (a fault cut it off).
    pub unreachable_drops: u64,
}

/// [`FlowRow::start_ps`] of a flow whose start was never scheduled.
pub const NOT_SCHEDULED: u64 = u64::MAX;

impl FlowRow {
    /// The start time, `None` if it was never scheduled.
    pub fn start(&self) -> Option<u64> {
        (self.start_ps != NOT_SCHEDULED).then_some(self.start_ps)
    }

    /// Flow completion time, `finish - start`; `None` if unfinished.
    pub fn fct_ps(&self) -> Option<u64> {
        self.finish_ps.map(|f| f.saturating_sub(self.start_ps))
    }

    /// FCT over the ideal FCT; `None` if unfinished (or the ideal is 0).
    pub fn slowdown(&self) -> Option<f64> {
        match self.fct_ps() {
            Some(fct) if self.ideal_fct_ps > 0 => Some(fct as f64 / self.ideal_fct_ps as f64),
            _ => None,
        }
    }
}

/// What a flow belongs to beyond its workload: its collective (an index into collectives.arrow's
/// `collective` column), iteration and step, and its replay tag (an index into the tag names).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowLabels {
    pub collective: Option<u32>,
    pub iteration: Option<u32>,
    pub step: Option<u32>,
    pub tag: Option<u32>,
    /// Synthetic workloads: whether the message was generated in the measurement window (null for
    /// other workloads).
    pub measured: Option<bool>,
}

/// Most rows in one record batch.
pub const BATCH_ROWS: usize = 1 << 16;

/// The column names of flows.arrow, in order.
pub const COLUMNS: [&str; 25] = [
    "flow_id",
    "src",
    "dst",
    "size_bytes",
    "start_ps",
    "finish_ps",
    "fct_ps",
    "ideal_fct_ps",
    "slowdown",
    "workload",
    "workload_index",
    "packets_sent",
    "retransmits",
    "drops",
    "ecn_marks",
    "cnps",
    "out_of_order_packets",
    "max_reorder_distance",
    "unreachable_drops",
    "collective",
    "collective_iteration",
    "collective_step",
    "tag",
    "measured",
    "started",
];

/// The schema of flows.arrow with `metadata` as schema-level key/value metadata (a repeated key keeps
/// its last value).
pub fn flows_schema(metadata: &[(String, String)]) -> Schema {
    // Times, sizes and counts are int64 (Arrow's and the PyData tools' convention: differences
    // cannot wrap); ids are uint32.
    use DataType::{Boolean, Float64, Int64, UInt32};
    let fields = vec![
        Field::new("flow_id", Int64, false),
        Field::new("src", UInt32, false),
        Field::new("dst", UInt32, false),
        Field::new("size_bytes", Int64, false),
        Field::new("start_ps", Int64, true),
        Field::new("finish_ps", Int64, true),
        Field::new("fct_ps", Int64, true),
        Field::new("ideal_fct_ps", Int64, false),
        Field::new("slowdown", Float64, true),
        dict_field("workload", false),
        Field::new("workload_index", UInt32, false),
        Field::new("packets_sent", Int64, false),
        Field::new("retransmits", Int64, false),
        Field::new("drops", Int64, false),
        Field::new("ecn_marks", Int64, false),
        Field::new("cnps", Int64, false),
        Field::new("out_of_order_packets", Int64, false),
        Field::new("max_reorder_distance", Int64, false),
        Field::new("unreachable_drops", Int64, false),
        Field::new("collective", UInt32, true),
        Field::new("collective_iteration", UInt32, true),
        Field::new("collective_step", UInt32, true),
        dict_field("tag", true),
        Field::new("measured", Boolean, true),
        Field::new("started", Boolean, false),
    ];
    let metadata: HashMap<String, String> = metadata.iter().cloned().collect();
    Schema::new_with_metadata(fields, metadata)
}

/// One record batch of `rows`.
fn batch(
    schema: &SchemaRef,
    rows: &[FlowRow],
    labels: &[FlowLabels],
    workload_names: &[String],
    tag_names: &[String],
) -> io::Result<RecordBatch> {
    let n = rows.len();
    let label = |i: usize| labels.get(i).copied().unwrap_or_default();
    let opt_u32_col = |f: fn(&FlowLabels) -> Option<u32>| -> ArrayRef {
        let mut b = UInt32Builder::with_capacity(n);
        for i in 0..n {
            b.append_option(f(&label(i)));
        }
        Arc::new(b.finish())
    };
    let tag: ArrayRef = {
        let mut b = DictColumn::new(tag_names);
        for i in 0..n {
            b.append_option(
                label(i)
                    .tag
                    .map(|t| t as usize)
                    .filter(|&t| t < tag_names.len()),
            );
        }
        b.finish()
    };
    let measured: ArrayRef = {
        let mut b = BooleanBuilder::with_capacity(n);
        for i in 0..n {
            b.append_option(label(i).measured);
        }
        Arc::new(b.finish())
    };
    let u64_col = |f: fn(&FlowRow) -> u64| -> ArrayRef {
        let mut b = Int64Builder::with_capacity(n);
        for r in rows {
            b.append_value(int64(f(r)));
        }
        Arc::new(b.finish())
    };
    let u32_col = |f: fn(&FlowRow) -> u32| -> ArrayRef {
        let mut b = UInt32Builder::with_capacity(n);
        for r in rows {
            b.append_value(f(r));
        }
        Arc::new(b.finish())
    };
    let opt_u64_col = |f: fn(&FlowRow) -> Option<u64>| -> ArrayRef {
        let mut b = Int64Builder::with_capacity(n);
        for r in rows {
            b.append_option(f(r).map(int64));
        }
        Arc::new(b.finish())
    };
    let started: ArrayRef = {
        let mut b = BooleanBuilder::with_capacity(n);
        for r in rows {
            b.append_value(r.started);
        }
        Arc::new(b.finish())
    };
    let slowdown: ArrayRef = {
        let mut b = Float64Builder::with_capacity(n);
        for r in rows {
            b.append_option(r.slowdown());
        }
        Arc::new(b.finish())
    };
    let workload: ArrayRef = {
        // A workload index without a name (never, from the engine) is the empty string, the
        // dictionary's last entry.
        let mut b = DictColumn::new(workload_names);
        let missing = workload_names.len();
        for r in rows {
            b.append((r.workload as usize).min(missing));
        }
        b.finish()
    };
    let columns = vec![
        u64_col(|r| r.flow_id),
        u32_col(|r| r.src),
        u32_col(|r| r.dst),
        u64_col(|r| r.size_bytes),
        opt_u64_col(FlowRow::start),
        opt_u64_col(|r| r.finish_ps),
        opt_u64_col(FlowRow::fct_ps),
        u64_col(|r| r.ideal_fct_ps),
        slowdown,
        workload,
        u32_col(|r| r.workload),
        u64_col(|r| r.packets_sent),
        u64_col(|r| r.retransmits),
        u64_col(|r| r.drops),
        u64_col(|r| r.ecn_marks),
        u64_col(|r| r.cnps),
        u64_col(|r| r.out_of_order_packets),
        u64_col(|r| r.max_reorder_distance),
        u64_col(|r| r.unreachable_drops),
        opt_u32_col(|l| l.collective),
        opt_u32_col(|l| l.iteration),
        opt_u32_col(|l| l.step),
        tag,
        measured,
        started,
    ];
    RecordBatch::try_new(schema.clone(), columns).map_err(io::Error::other)
}

/// Write the flow table as an Arrow IPC file to any writer (what [`write_flows`] does, minus the
/// temporary name and rename). Returns the writer.
pub fn write_flows_to<W: Write>(
    out: W,
    rows: &[FlowRow],
    workload_names: &[String],
    metadata: &[(String, String)],
) -> io::Result<W> {
    write_labelled_flows_to(out, rows, &[], workload_names, &[], metadata)
}

/// [`write_flows_to`] with each row's [`FlowLabels`] (`labels[i]` for `rows[i]`; missing ones are
/// null) and the replay tag names they index.
pub fn write_labelled_flows_to<W: Write>(
    out: W,
    rows: &[FlowRow],
    labels: &[FlowLabels],
    workload_names: &[String],
    tag_names: &[String],
    metadata: &[(String, String)],
) -> io::Result<W> {
    let named = |w: u32| (w as usize) < workload_names.len();
    let mut names = workload_names.to_vec();
    if !rows.iter().all(|r| named(r.workload)) {
        names.push(String::new());
    }
    let mut writer = FlowWriter::new(out, names, tag_names.to_vec(), metadata)?;
    for (i, row) in rows.iter().enumerate() {
        writer.push(row.clone(), labels.get(i).copied().unwrap_or_default())?;
    }
    writer.finish()
}

/// flows.arrow written row by row, a record batch of [`BATCH_ROWS`] at a time, so that the rows
/// need not all be held at once (a run that spilled its finished flows' rows reads them back a
/// group at a time: `engine::flows_out`). The file is the same, byte for byte, as one written
/// from all the rows at once.
pub struct FlowWriter<W: Write> {
    schema: SchemaRef,
    writer: FileWriter<W>,
    workload_names: Vec<String>,
    tag_names: Vec<String>,
    rows: Vec<FlowRow>,
    labels: Vec<FlowLabels>,
}

impl<W: Write> FlowWriter<W> {
    /// Start the file on `out` (schema metadata `metadata`); `workload_names[row.workload]` and
    /// `tag_names[label.tag]` fill the named columns.
    pub fn new(
        out: W,
        workload_names: Vec<String>,
        tag_names: Vec<String>,
        metadata: &[(String, String)],
    ) -> io::Result<Self> {
        let schema: SchemaRef = Arc::new(flows_schema(metadata));
        let writer = FileWriter::try_new(out, &schema).map_err(io::Error::other)?;
        Ok(Self {
            schema,
            writer,
            workload_names,
            tag_names,
            rows: Vec::new(),
            labels: Vec::new(),
        })
    }

    /// Add the next row; writes a batch when one is full.
    pub fn push(&mut self, row: FlowRow, labels: FlowLabels) -> io::Result<()> {
        self.rows.push(row);
        self.labels.push(labels);
        if self.rows.len() == BATCH_ROWS {
            self.write_batch()?;
        }
        Ok(())
    }

    fn write_batch(&mut self) -> io::Result<()> {
        if self.rows.is_empty() {
            return Ok(());
        }
        let b = batch(
            &self.schema,
            &self.rows,
            &self.labels,
            &self.workload_names,
            &self.tag_names,
        )?;
        self.writer.write(&b).map_err(io::Error::other)?;
        self.rows.clear();
        self.labels.clear();
        Ok(())
    }

    /// Write the rows left and the file's footer; returns the writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.write_batch()?;
        self.writer.finish().map_err(io::Error::other)?;
        self.writer.into_inner().map_err(io::Error::other)
    }
}

/// Write flows.arrow to `path` atomically (temporary name in the same directory, then rename).
/// `workload_names[row.workload]` fills the `workload` column; `metadata` becomes the schema metadata.
/// An empty `rows` still gives a valid file with the schema and no batches.
pub fn write_flows(
    path: &Path,
    rows: &[FlowRow],
    workload_names: &[String],
    metadata: &[(String, String)],
) -> io::Result<()> {
    write_labelled_flows(path, rows, &[], workload_names, &[], metadata)
}

/// [`write_flows`] with labels (see [`write_labelled_flows_to`]).
pub fn write_labelled_flows(
    path: &Path,
    rows: &[FlowRow],
    labels: &[FlowLabels],
    workload_names: &[String],
    tag_names: &[String],
    metadata: &[(String, String)],
) -> io::Result<()> {
    let file = AtomicFile::create(path)?;
    let file = write_labelled_flows_to(file, rows, labels, workload_names, tag_names, metadata)?;
    file.commit()
}
