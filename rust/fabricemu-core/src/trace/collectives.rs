//! collectives.arrow: one row per collective and iteration (written when a scenario has collective
//! workloads). A collective is one group of ranks of one `kind = "collective"` workload; its flows
//! in flows.arrow carry the same `collective` id and their `collective_iteration`.
//!
//! `start_ps` is when the iteration was released (the workload's start, then the previous
//! iteration's finish plus the compute gap), `finish_ps` when its last flow's last byte arrived
//! (null if some flow had not arrived when the run stopped). Bandwidths follow nccl-tests:
//! `algbw_bps = 8 x size_bytes / duration`, `busbw_bps = algbw x factor` with factor 2(n-1)/n for
//! all-reduce and (n-1)/n for all-gather, reduce-scatter and all-to-all: the rate each rank's link
//! carried, comparable to the link rate whatever n.
//!
//! Tiers: a flow whose two hosts are in one scale-up domain (the collective's `domain_size`) is on
//! the scale-up tier, any other on the scale-out tier (without domains every flow is scale-out).
//! `scaleup_flow_bytes` / `scaleout_flow_bytes` are the payload each tier carried;
//! `scaleup_time_ps` / `scaleout_time_ps` the time spent in the tier: over the algorithm's phases
//! (hierarchical all-reduce: scale-up reduce-scatter, scale-out all-reduce, scale-up all-gather;
//! other algorithms: one phase), the sum of the span from the first start to the last arrival of
//! the phase's flows on that tier (null when the tier has no flows or one had not arrived).
//! Phases can overlap (a piece moves on as soon as it is ready), so the two times may add up to
//! more than `duration_ps`. `scaleup_busbw_bps` / `scaleout_busbw_bps` apply nccl-tests'
//! definition to each tier's own collective: 8 x S_tier / tier time x the operation's factor for
//! n_tier ranks, where a hierarchical algorithm runs the operation on S over the n1 ranks of each
//! domain (scale-up) and on S/n1 (all-to-all: S) over the n2 ranks of each scale-out group; a flat
//! algorithm has a tier bandwidth only on the tier it wholly lies in (n ranks in one domain, or in
//! n domains). Null where the tier has fewer than two ranks or no time.

use std::collections::HashMap;
use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{Float64Builder, Int64Builder, ListBuilder, UInt32Builder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_ipc::writer::FileWriter;
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use super::atomic::AtomicFile;

/// One iteration of one collective.
#[derive(Debug, Clone, PartialEq)]
pub struct CollectiveRow {
    pub collective: u32,
    /// Index into the scenario's workloads.
    pub workload: u32,
    /// The group's index within its workload.
    pub group: u32,
    pub op: &'static str,
    pub algorithm: &'static str,
    /// Host of each rank.
    pub hosts: Vec<u32>,
    pub iteration: u32,
    pub size_bytes: u64,
    /// Network flows of this iteration and their payload bytes.
    pub flows: u64,
    pub flow_bytes: u64,
    pub flows_finished: u64,
    pub start_ps: Option<u64>,
    pub finish_ps: Option<u64>,
    /// busbw / algbw.
    pub bus_factor: f64,
    /// Scale-up, scale-out: payload bytes of the tier's flows.
    pub tier_bytes: [u64; 2],
    /// Scale-up, scale-out: time in the tier's phases (see the module's documentation).
    pub tier_time_ps: [Option<u64>; 2],
    /// Scale-up, scale-out: the size and bus factor of the tier's own collective, if it has one.
    pub tier_bus: [Option<(f64, f64)>; 2],
}

impl CollectiveRow {
    pub fn ranks(&self) -> u32 {
        self.hosts.len() as u32
    }

    pub fn duration_ps(&self) -> Option<u64> {
        match (self.start_ps, self.finish_ps) {
            (Some(s), Some(f)) => Some(f.saturating_sub(s)),
            _ => None,
        }
    }

    /// Algorithm bandwidth: 8 x size / duration, bits per second.
    pub fn algbw_bps(&self) -> Option<f64> {
        match self.duration_ps() {
            Some(d) if d > 0 => Some(self.size_bytes as f64 * 8.0 * 1e12 / d as f64),
            _ => None,
        }
    }

    /// Bus bandwidth: algbw x the operation's factor, bits per second.
    pub fn busbw_bps(&self) -> Option<f64> {
        self.algbw_bps().map(|a| a * self.bus_factor)
    }

    /// Bus bandwidth of tier 0 (scale-up) or 1 (scale-out), bits per second.
    pub fn tier_busbw_bps(&self, tier: usize) -> Option<f64> {
        let (size, factor) = self.tier_bus[tier]?;
        match self.tier_time_ps[tier] {
            Some(t) if t > 0 => Some(size * 8.0 * 1e12 / t as f64 * factor),
            _ => None,
        }
    }
}

/// The column names of collectives.arrow, in order.
pub const COLUMNS: [&str; 24] = [
    "collective",
    "workload",
    "workload_index",
    "group",
    "op",
    "algorithm",
    "ranks",
    "hosts",
    "iteration",
    "size_bytes",
    "flows",
    "flow_bytes",
    "flows_finished",
    "start_ps",
    "finish_ps",
    "duration_ps",
    "algbw_bps",
    "busbw_bps",
    "scaleup_flow_bytes",
    "scaleout_flow_bytes",
    "scaleup_time_ps",
    "scaleout_time_ps",
    "scaleup_busbw_bps",
    "scaleout_busbw_bps",
];

pub fn collectives_schema(metadata: &[(String, String)]) -> Schema {
    use super::tables::dict_field;
    use DataType::{Float64, Int64, UInt32};
    let fields = vec![
        Field::new("collective", UInt32, false),
        dict_field("workload", false),
        Field::new("workload_index", UInt32, false),
        Field::new("group", UInt32, false),
        dict_field("op", false),
        dict_field("algorithm", false),
        Field::new("ranks", UInt32, false),
        Field::new(
            "hosts",
            DataType::List(Arc::new(Field::new("item", UInt32, true))),
            false,
        ),
        Field::new("iteration", UInt32, false),
        Field::new("size_bytes", Int64, false),
        Field::new("flows", Int64, false),
        Field::new("flow_bytes", Int64, false),
        Field::new("flows_finished", Int64, false),
        Field::new("start_ps", Int64, true),
        Field::new("finish_ps", Int64, true),
        Field::new("duration_ps", Int64, true),
        Field::new("algbw_bps", Float64, true),
        Field::new("busbw_bps", Float64, true),
        Field::new("scaleup_flow_bytes", Int64, false),
        Field::new("scaleout_flow_bytes", Int64, false),
        Field::new("scaleup_time_ps", Int64, true),
        Field::new("scaleout_time_ps", Int64, true),
        Field::new("scaleup_busbw_bps", Float64, true),
        Field::new("scaleout_busbw_bps", Float64, true),
    ];
    let metadata: HashMap<String, String> = metadata.iter().cloned().collect();
    Schema::new_with_metadata(fields, metadata)
}

/// The values of the table's string columns, the same for every batch: (workload, op,
/// algorithm), each in order of first appearance (workloads: the scenario's names).
struct Dictionaries {
    workload: Vec<String>,
    op: Vec<String>,
    algorithm: Vec<String>,
}

impl Dictionaries {
    fn of(rows: &[CollectiveRow], workload_names: &[String]) -> Self {
        let mut d = Dictionaries {
            workload: workload_names.to_vec(),
            op: Vec::new(),
            algorithm: Vec::new(),
        };
        for r in rows {
            if r.workload as usize >= d.workload.len() && !d.workload.contains(&String::new()) {
                d.workload.push(String::new());
            }
            for (list, v) in [
                (&mut d.op, r.op.to_string()),
                (&mut d.algorithm, r.algorithm.to_string()),
            ] {
                if !list.contains(&v) {
                    list.push(v);
                }
            }
        }
        d
    }

    fn key(list: &[String], v: &str) -> usize {
        list.iter().position(|x| x == v).expect("in the dictionary")
    }
}

fn batch(
    schema: &SchemaRef,
    rows: &[CollectiveRow],
    dicts: &Dictionaries,
) -> io::Result<RecordBatch> {
    let n = rows.len();
    let u32_col = |f: &dyn Fn(&CollectiveRow) -> u32| -> ArrayRef {
        let mut b = UInt32Builder::with_capacity(n);
        rows.iter().for_each(|r| b.append_value(f(r)));
        Arc::new(b.finish())
    };
    let u64_col = |f: &dyn Fn(&CollectiveRow) -> Option<u64>| -> ArrayRef {
        let mut b = Int64Builder::with_capacity(n);
        rows.iter()
            .for_each(|r| b.append_option(f(r).map(super::tables::int64)));
        Arc::new(b.finish())
    };
    let f64_col = |f: &dyn Fn(&CollectiveRow) -> Option<f64>| -> ArrayRef {
        let mut b = Float64Builder::with_capacity(n);
        rows.iter().for_each(|r| b.append_option(f(r)));
        Arc::new(b.finish())
    };
    let str_col = |list: &[String], f: &dyn Fn(&CollectiveRow) -> String| -> ArrayRef {
        let mut b = super::tables::DictColumn::new(list);
        rows.iter()
            .for_each(|r| b.append(Dictionaries::key(list, &f(r))));
        b.finish()
    };
    let hosts: ArrayRef = {
        let mut b = ListBuilder::new(UInt32Builder::new());
        for r in rows {
            b.values().append_slice(&r.hosts);
            b.append(true);
        }
        Arc::new(b.finish())
    };
    let columns = vec![
        u32_col(&|r| r.collective),
        str_col(&dicts.workload, &|r| {
            dicts
                .workload
                .get(r.workload as usize)
                .cloned()
                .unwrap_or_default()
        }),
        u32_col(&|r| r.workload),
        u32_col(&|r| r.group),
        str_col(&dicts.op, &|r| r.op.to_string()),
        str_col(&dicts.algorithm, &|r| r.algorithm.to_string()),
        u32_col(&|r| r.ranks()),
        hosts,
        u32_col(&|r| r.iteration),
        u64_col(&|r| Some(r.size_bytes)),
        u64_col(&|r| Some(r.flows)),
        u64_col(&|r| Some(r.flow_bytes)),
        u64_col(&|r| Some(r.flows_finished)),
        u64_col(&|r| r.start_ps),
        u64_col(&|r| r.finish_ps),
        u64_col(&CollectiveRow::duration_ps),
        f64_col(&CollectiveRow::algbw_bps),
        f64_col(&CollectiveRow::busbw_bps),
        u64_col(&|r| Some(r.tier_bytes[0])),
        u64_col(&|r| Some(r.tier_bytes[1])),
        u64_col(&|r| r.tier_time_ps[0]),
        u64_col(&|r| r.tier_time_ps[1]),
        f64_col(&|r| r.tier_busbw_bps(0)),
        f64_col(&|r| r.tier_busbw_bps(1)),
    ];
    RecordBatch::try_new(schema.clone(), columns).map_err(io::Error::other)
}

/// Write the table as an Arrow IPC file to any writer.
pub fn write_collectives_to<W: Write>(
    out: W,
    rows: &[CollectiveRow],
    workload_names: &[String],
    metadata: &[(String, String)],
) -> io::Result<W> {
    let schema: SchemaRef = Arc::new(collectives_schema(metadata));
    let mut writer = FileWriter::try_new(out, &schema).map_err(io::Error::other)?;
    let dicts = Dictionaries::of(rows, workload_names);
    for chunk in rows.chunks(super::flows::BATCH_ROWS) {
        let b = batch(&schema, chunk, &dicts)?;
        writer.write(&b).map_err(io::Error::other)?;
    }
    writer.finish().map_err(io::Error::other)?;
    writer.into_inner().map_err(io::Error::other)
}

/// Write collectives.arrow to `path` atomically.
pub fn write_collectives(
    path: &Path,
    rows: &[CollectiveRow],
    workload_names: &[String],
    metadata: &[(String, String)],
) -> io::Result<()> {
    let file = AtomicFile::create(path)?;
    let file = write_collectives_to(file, rows, workload_names, metadata)?;
    file.commit()
}
