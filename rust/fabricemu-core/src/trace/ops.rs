//! ops.arrow and steps.arrow: the executions of step-graph ops and the per-iteration breakdown
//! of step time (written when the scenario has step workloads: `graph`, `training`,
//! `inference`).
//!
//! **ops.arrow** has one row per op and rank it occupies (a compute op one row, a send two: its
//! source then its destination, a collective one per member in rank order): `workload`,
//! `workload_index`, `op` (the op's index among the ops of its iteration), `iteration`, `rank`,
//! `node` (the rank's endpoint), `kind` (`compute`, `send`, `collective`), `phase` (`forward`,
//! `backward`, `compute`, `tp`, `pp`, `dp`, `ep`, `comm`), `name`, `collective_op` and
//! `algorithm` (collectives), `start_ps` (when all its dependencies had ended), `end_ps` (compute:
//! start + duration; a send: its last byte arrived; a collective: the last byte of its last
//! transfer arrived), `duration_ps`, and `bytes` (a send's message, a collective's size, 0 for
//! compute). `start_ps`/`end_ps` are null for ops that had not started/ended when the run stopped.
//!
//! **steps.arrow** has one row per step workload and iteration. Its window is `start_ps` (the
//! earliest start of the iteration's ops) to `end_ps` (the latest end; null, with the breakdown,
//! while some op had not ended), `time_ps = end_ps - start_ps`. For each rank, over the window
//! and counting only this iteration's ops that occupy the rank:
//! - *compute* is the time covered by its compute ops;
//! - *comm* is the time covered by its communication ops (sends from or to it, collectives it is
//!   a member of);
//! - *exposed communication* is the time covered by communication while it computes nothing
//!   (comm minus its overlap with compute);
//! - *bubble* is the time it does neither (idle): time - compute - exposed communication.
//!
//! The table gives each one's mean over the ranks (`*_ps_mean`) and maximum (`*_ps_max`), and
//! the means over `time_ps` as fractions (`compute_fraction`, `exposed_comm_fraction`,
//! `bubble_fraction`; they add up to 1).
//!
//! When a step workload reacts to failures (`on_failure`), steps.arrow has two more columns
//! (null for the other workloads' rows): `useful` (the iteration completed and its work counts:
//! false if a restart threw it away, or if it had not completed) and `stalled_ps` (the time in
//! its window, or from its start to the stop while incomplete, the job was frozen by failures).

use std::collections::HashMap;
use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{Float64Builder, Int64Builder, StringBuilder, UInt32Builder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_ipc::writer::FileWriter;
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use super::atomic::AtomicFile;
use super::tables::int64;

/// One op on one rank.
#[derive(Debug, Clone, PartialEq)]
pub struct OpRow {
    pub workload: u32,
    pub op: u32,
    pub iteration: u32,
    pub rank: u32,
    pub node: u32,
    pub kind: &'static str,
    pub phase: &'static str,
    /// The phase is compute (forward, backward, other compute).
    pub is_compute: bool,
    pub name: Option<String>,
    pub collective_op: Option<&'static str>,
    pub algorithm: Option<&'static str>,
    pub start_ps: Option<u64>,
    pub end_ps: Option<u64>,
    pub bytes: u64,
}

impl OpRow {
    pub fn duration_ps(&self) -> Option<u64> {
        Some(self.end_ps?.saturating_sub(self.start_ps?))
    }
}

/// One iteration of one step workload (see the module's documentation).
#[derive(Debug, Clone, PartialEq)]
pub struct StepRow {
    pub workload: u32,
    pub iteration: u32,
    pub ranks: u32,
    pub ops: u64,
    pub start_ps: Option<u64>,
    pub end_ps: Option<u64>,
    /// Per rank: compute, communication, exposed communication, bubble (None while incomplete).
    pub breakdown: Option<Breakdown>,
    /// Workloads that react to failures (`on_failure`): the iteration's outcome.
    pub failure: Option<StepFailure>,
}

/// An iteration of a job that reacts to failures (steps.arrow's `useful` and `stalled_ps`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepFailure {
    /// Its work counts: it completed and no restart threw it away.
    pub useful: bool,
    /// Time within [start_ps, end_ps) (or up to the stop) the job was frozen by failures.
    pub stalled_ps: u64,
    /// The job is elastic (steps.arrow then has `group_size`): the ranks that took part in the
    /// iteration when it ended (None: it did not end).
    pub elastic: bool,
    pub group_size: Option<u32>,
}

impl StepRow {
    pub fn time_ps(&self) -> Option<u64> {
        Some(self.end_ps?.saturating_sub(self.start_ps?))
    }

    fn fraction(&self, v: impl Fn(&Breakdown) -> f64) -> Option<f64> {
        let t = self.time_ps()?;
        let b = self.breakdown.as_ref()?;
        (t > 0).then(|| v(b) / t as f64)
    }
}

/// Mean and maximum over ranks of each part of the step time.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Breakdown {
    pub compute: (f64, u64),
    pub comm: (f64, u64),
    pub exposed_comm: (f64, u64),
    pub bubble: (f64, u64),
}

/// Time intervals [start, end).
type Spans = Vec<(u64, u64)>;

/// Total length of the union of `spans` (sorted in place), clipped to [lo, hi).
fn covered(spans: &mut [(u64, u64)], lo: u64, hi: u64) -> u64 {
    spans.sort_unstable();
    let (mut total, mut at) = (0u64, lo);
    for &(s, e) in spans.iter() {
        let (s, e) = (s.max(at), e.min(hi));
        if e > s {
            total += e - s;
            at = e;
        }
    }
    total
}

/// The steps of every workload and iteration in `ops` (rows grouped by workload, iteration).
pub fn steps(ops: &[OpRow]) -> Vec<StepRow> {
    // (workload, iteration) -> row indices
    let mut groups: HashMap<(u32, u32), Vec<usize>> = HashMap::new();
    for (i, r) in ops.iter().enumerate() {
        groups.entry((r.workload, r.iteration)).or_default().push(i);
    }
    let mut keys: Vec<(u32, u32)> = groups.keys().copied().collect();
    keys.sort_unstable();
    let mut out = Vec::with_capacity(keys.len());
    for key in keys {
        let rows = &groups[&key];
        let mut ranks: Vec<u32> = rows.iter().map(|&i| ops[i].rank).collect();
        ranks.sort_unstable();
        ranks.dedup();
        let start = rows.iter().filter_map(|&i| ops[i].start_ps).min();
        let complete = rows.iter().all(|&i| ops[i].end_ps.is_some());
        let end = if complete {
            rows.iter().filter_map(|&i| ops[i].end_ps).max()
        } else {
            None
        };
        let distinct_ops = {
            let mut o: Vec<u32> = rows.iter().map(|&i| ops[i].op).collect();
            o.sort_unstable();
            o.dedup();
            o.len() as u64
        };
        let breakdown = match (start, end) {
            (Some(lo), Some(hi)) => {
                let time = hi - lo;
                let mut b = Breakdown::default();
                let mut by_rank: HashMap<u32, (Spans, Spans)> = HashMap::new();
                for &i in rows {
                    let r = &ops[i];
                    let span = (r.start_ps.expect("complete"), r.end_ps.expect("complete"));
                    let e = by_rank.entry(r.rank).or_default();
                    if r.is_compute {
                        e.0.push(span);
                    } else {
                        e.1.push(span);
                    }
                }
                let n = ranks.len() as f64;
                for rank in &ranks {
                    let (mut comp, mut all) = by_rank.remove(rank).unwrap_or_default();
                    let c = covered(&mut comp, lo, hi);
                    let m = covered(&mut all, lo, hi);
                    all.extend_from_slice(&comp);
                    let busy = covered(&mut all, lo, hi);
                    let exposed = busy - c;
                    let bubble = time - busy;
                    for (slot, v) in [
                        (&mut b.compute, c),
                        (&mut b.comm, m),
                        (&mut b.exposed_comm, exposed),
                        (&mut b.bubble, bubble),
                    ] {
                        slot.0 += v as f64 / n;
                        slot.1 = slot.1.max(v);
                    }
                }
                Some(b)
            }
            _ => None,
        };
        out.push(StepRow {
            workload: key.0,
            iteration: key.1,
            ranks: ranks.len() as u32,
            ops: distinct_ops,
            start_ps: start,
            end_ps: end,
            breakdown,
            failure: None,
        });
    }
    out
}

/// The column names of ops.arrow, in order.
pub const OP_COLUMNS: [&str; 16] = [
    "workload",
    "workload_index",
    "op",
    "iteration",
    "rank",
    "node",
    "kind",
    "phase",
    "name",
    "collective_op",
    "algorithm",
    "start_ps",
    "end_ps",
    "duration_ps",
    "bytes",
    "is_compute",
];

/// The column names of steps.arrow, in order.
pub const STEP_COLUMNS: [&str; 19] = [
    "workload",
    "workload_index",
    "iteration",
    "ranks",
    "ops",
    "start_ps",
    "end_ps",
    "time_ps",
    "compute_ps_mean",
    "compute_ps_max",
    "comm_ps_mean",
    "comm_ps_max",
    "exposed_comm_ps_mean",
    "exposed_comm_ps_max",
    "bubble_ps_mean",
    "bubble_ps_max",
    "compute_fraction",
    "exposed_comm_fraction",
    "bubble_fraction",
];

fn schema_of(fields: Vec<Field>, metadata: &[(String, String)]) -> SchemaRef {
    let metadata: HashMap<String, String> = metadata.iter().cloned().collect();
    Arc::new(Schema::new_with_metadata(fields, metadata))
}

pub fn ops_schema(metadata: &[(String, String)]) -> SchemaRef {
    use DataType::{Boolean, Int64, UInt32, Utf8};
    let f = |name: &str, t: DataType, null: bool| Field::new(name, t, null);
    schema_of(
        vec![
            f("workload", Utf8, false),
            f("workload_index", UInt32, false),
            f("op", UInt32, false),
            f("iteration", UInt32, false),
            f("rank", UInt32, false),
            f("node", UInt32, false),
            f("kind", Utf8, false),
            f("phase", Utf8, false),
            f("name", Utf8, true),
            f("collective_op", Utf8, true),
            f("algorithm", Utf8, true),
            f("start_ps", Int64, true),
            f("end_ps", Int64, true),
            f("duration_ps", Int64, true),
            f("bytes", Int64, false),
            f("is_compute", Boolean, false),
        ],
        metadata,
    )
}

pub fn steps_schema(metadata: &[(String, String)]) -> SchemaRef {
    steps_schema_with(metadata, false, false)
}

/// The columns steps.arrow adds when a workload reacts to failures.
pub const STEP_FAILURE_COLUMNS: [&str; 2] = ["useful", "stalled_ps"];

/// The column steps.arrow adds when a workload is elastic (`on_failure = "elastic"`).
pub const STEP_ELASTIC_COLUMNS: [&str; 1] = ["group_size"];

/// steps.arrow's schema, with [`STEP_FAILURE_COLUMNS`] when `failures` and
/// [`STEP_ELASTIC_COLUMNS`] too when `elastic`.
pub fn steps_schema_with(
    metadata: &[(String, String)],
    failures: bool,
    elastic: bool,
) -> SchemaRef {
    use DataType::{Boolean, Float64, Int64, UInt32, Utf8};
    let mut fields = vec![
        Field::new("workload", Utf8, false),
        Field::new("workload_index", UInt32, false),
        Field::new("iteration", UInt32, false),
        Field::new("ranks", UInt32, false),
        Field::new("ops", Int64, false),
        Field::new("start_ps", Int64, true),
        Field::new("end_ps", Int64, true),
        Field::new("time_ps", Int64, true),
    ];
    for part in ["compute", "comm", "exposed_comm", "bubble"] {
        fields.push(Field::new(format!("{part}_ps_mean"), Float64, true));
        fields.push(Field::new(format!("{part}_ps_max"), Int64, true));
    }
    for part in ["compute", "exposed_comm", "bubble"] {
        fields.push(Field::new(format!("{part}_fraction"), Float64, true));
    }
    if failures {
        fields.push(Field::new("useful", Boolean, true));
        fields.push(Field::new("stalled_ps", Int64, true));
        if elastic {
            fields.push(Field::new("group_size", UInt32, true));
        }
    }
    schema_of(fields, metadata)
}

fn name_of(names: &[String], w: u32) -> String {
    names.get(w as usize).cloned().unwrap_or_default()
}

fn ops_batch(schema: &SchemaRef, rows: &[OpRow], names: &[String]) -> io::Result<RecordBatch> {
    let n = rows.len();
    let u32_col = |f: &dyn Fn(&OpRow) -> u32| -> ArrayRef {
        let mut b = UInt32Builder::with_capacity(n);
        rows.iter().for_each(|r| b.append_value(f(r)));
        Arc::new(b.finish())
    };
    let i64_col = |f: &dyn Fn(&OpRow) -> Option<u64>| -> ArrayRef {
        let mut b = Int64Builder::with_capacity(n);
        rows.iter().for_each(|r| b.append_option(f(r).map(int64)));
        Arc::new(b.finish())
    };
    let str_col = |f: &dyn Fn(&OpRow) -> Option<String>| -> ArrayRef {
        let mut b = StringBuilder::new();
        rows.iter().for_each(|r| b.append_option(f(r)));
        Arc::new(b.finish())
    };
    let columns = vec![
        str_col(&|r| Some(name_of(names, r.workload))),
        u32_col(&|r| r.workload),
        u32_col(&|r| r.op),
        u32_col(&|r| r.iteration),
        u32_col(&|r| r.rank),
        u32_col(&|r| r.node),
        str_col(&|r| Some(r.kind.to_string())),
        str_col(&|r| Some(r.phase.to_string())),
        str_col(&|r| r.name.clone()),
        str_col(&|r| r.collective_op.map(str::to_string)),
        str_col(&|r| r.algorithm.map(str::to_string)),
        i64_col(&|r| r.start_ps),
        i64_col(&|r| r.end_ps),
        i64_col(&OpRow::duration_ps),
        i64_col(&|r| Some(r.bytes)),
        Arc::new(arrow_array::BooleanArray::from(
            rows.iter().map(|r| r.is_compute).collect::<Vec<_>>(),
        )) as ArrayRef,
    ];
    RecordBatch::try_new(schema.clone(), columns).map_err(io::Error::other)
}

fn steps_batch(schema: &SchemaRef, rows: &[StepRow], names: &[String]) -> io::Result<RecordBatch> {
    let n = rows.len();
    let u32_col = |f: &dyn Fn(&StepRow) -> u32| -> ArrayRef {
        let mut b = UInt32Builder::with_capacity(n);
        rows.iter().for_each(|r| b.append_value(f(r)));
        Arc::new(b.finish())
    };
    let i64_col = |f: &dyn Fn(&StepRow) -> Option<u64>| -> ArrayRef {
        let mut b = Int64Builder::with_capacity(n);
        rows.iter().for_each(|r| b.append_option(f(r).map(int64)));
        Arc::new(b.finish())
    };
    let f64_col = |f: &dyn Fn(&StepRow) -> Option<f64>| -> ArrayRef {
        let mut b = Float64Builder::with_capacity(n);
        rows.iter().for_each(|r| b.append_option(f(r)));
        Arc::new(b.finish())
    };
    let mut b = StringBuilder::new();
    rows.iter()
        .for_each(|r| b.append_value(name_of(names, r.workload)));
    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(b.finish()),
        u32_col(&|r| r.workload),
        u32_col(&|r| r.iteration),
        u32_col(&|r| r.ranks),
        i64_col(&|r| Some(r.ops)),
        i64_col(&|r| r.start_ps),
        i64_col(&|r| r.end_ps),
        i64_col(&StepRow::time_ps),
    ];
    type Part = fn(&Breakdown) -> (f64, u64);
    let parts: [Part; 4] = [|b| b.compute, |b| b.comm, |b| b.exposed_comm, |b| b.bubble];
    for part in parts {
        columns.push(f64_col(&|r| r.breakdown.as_ref().map(|b| part(b).0)));
        columns.push(i64_col(&|r| r.breakdown.as_ref().map(|b| part(b).1)));
    }
    for i in [0, 2, 3] {
        let part = parts[i];
        columns.push(f64_col(&|r| r.fraction(|b| part(b).0)));
    }
    if schema.fields().len() > STEP_COLUMNS.len() {
        columns.push(Arc::new(arrow_array::BooleanArray::from(
            rows.iter()
                .map(|r| r.failure.map(|f| f.useful))
                .collect::<Vec<_>>(),
        )));
        columns.push(i64_col(&|r| r.failure.map(|f| f.stalled_ps)));
        if schema.fields().len() > STEP_COLUMNS.len() + STEP_FAILURE_COLUMNS.len() {
            columns.push(Arc::new(arrow_array::UInt32Array::from(
                rows.iter()
                    .map(|r| r.failure.and_then(|f| f.group_size))
                    .collect::<Vec<_>>(),
            )));
        }
    }
    RecordBatch::try_new(schema.clone(), columns).map_err(io::Error::other)
}

/// Write ops.arrow to any writer.
pub fn write_ops_to<W: Write>(
    out: W,
    rows: &[OpRow],
    names: &[String],
    metadata: &[(String, String)],
) -> io::Result<W> {
    let schema = ops_schema(metadata);
    let mut writer = FileWriter::try_new(out, &schema).map_err(io::Error::other)?;
    for chunk in rows.chunks(super::flows::BATCH_ROWS) {
        writer
            .write(&ops_batch(&schema, chunk, names)?)
            .map_err(io::Error::other)?;
    }
    writer.finish().map_err(io::Error::other)?;
    writer.into_inner().map_err(io::Error::other)
}

/// Write steps.arrow to any writer.
pub fn write_steps_to<W: Write>(
    out: W,
    rows: &[StepRow],
    names: &[String],
    metadata: &[(String, String)],
) -> io::Result<W> {
    let schema = steps_schema_with(
        metadata,
        rows.iter().any(|r| r.failure.is_some()),
        rows.iter().any(|r| r.failure.is_some_and(|f| f.elastic)),
    );
    let mut writer = FileWriter::try_new(out, &schema).map_err(io::Error::other)?;
    for chunk in rows.chunks(super::flows::BATCH_ROWS) {
        writer
            .write(&steps_batch(&schema, chunk, names)?)
            .map_err(io::Error::other)?;
    }
    writer.finish().map_err(io::Error::other)?;
    writer.into_inner().map_err(io::Error::other)
}

/// Write ops.arrow and steps.arrow into `dir` atomically.
pub fn write_ops_and_steps(
    dir: &Path,
    rows: &[OpRow],
    names: &[String],
    metadata: &[(String, String)],
) -> io::Result<Vec<StepRow>> {
    write_ops_and_steps_annotated(dir, rows, names, metadata, |_| {})
}

/// [`write_ops_and_steps`], with `annotate` filling in the steps' failure outcomes first.
pub fn write_ops_and_steps_annotated(
    dir: &Path,
    rows: &[OpRow],
    names: &[String],
    metadata: &[(String, String)],
    annotate: impl FnOnce(&mut [StepRow]),
) -> io::Result<Vec<StepRow>> {
    let file = AtomicFile::create(&dir.join(OPS_FILE))?;
    write_ops_to(file, rows, names, metadata)?.commit()?;
    let mut steps = steps(rows);
    annotate(&mut steps);
    let file = AtomicFile::create(&dir.join(STEPS_FILE))?;
    write_steps_to(file, &steps, names, metadata)?.commit()?;
    Ok(steps)
}

/// File names.
pub const OPS_FILE: &str = "ops.arrow";
pub const STEPS_FILE: &str = "steps.arrow";

#[cfg(test)]
mod tests {
    use super::*;

    fn row(rank: u32, op: u32, compute: bool, s: u64, e: u64) -> OpRow {
        OpRow {
            workload: 0,
            op,
            iteration: 0,
            rank,
            node: rank,
            kind: if compute { "compute" } else { "send" },
            phase: if compute { "compute" } else { "comm" },
            is_compute: compute,
            name: None,
            collective_op: None,
            algorithm: None,
            start_ps: Some(s),
            end_ps: Some(e),
            bytes: 0,
        }
    }

    #[test]
    fn breakdown_splits_time_into_compute_exposed_comm_and_bubble() {
        // rank 0: compute 0..10, comm 5..20 (exposed 10..20), idle 20..30
        // rank 1: comm 5..20 (all exposed), compute 20..30, idle 0..5
        let ops = vec![
            row(0, 0, true, 0, 10),
            row(0, 1, false, 5, 20),
            row(1, 1, false, 5, 20),
            row(1, 2, true, 20, 30),
        ];
        let s = steps(&ops);
        assert_eq!(s.len(), 1);
        let r = &s[0];
        assert_eq!(
            (r.start_ps, r.end_ps, r.time_ps()),
            (Some(0), Some(30), Some(30))
        );
        assert_eq!((r.ranks, r.ops), (2, 3));
        let b = r.breakdown.unwrap();
        assert_eq!(b.compute, (10.0, 10));
        assert_eq!(b.comm, (15.0, 15));
        assert_eq!(b.exposed_comm, (12.5, 15));
        assert_eq!(b.bubble, (7.5, 10));
        let sum = r.fraction(|b| b.compute.0).unwrap()
            + r.fraction(|b| b.exposed_comm.0).unwrap()
            + r.fraction(|b| b.bubble.0).unwrap();
        assert!((sum - 1.0).abs() < 1e-12);
    }

    #[test]
    fn an_unfinished_op_leaves_the_step_open() {
        let mut ops = vec![row(0, 0, true, 0, 10), row(0, 1, false, 10, 20)];
        ops[1].end_ps = None;
        let s = steps(&ops);
        assert_eq!(s[0].end_ps, None);
        assert!(s[0].breakdown.is_none());
    }
}
