//! The columns of the streamed trace tables: queues, links, pfc and rates (flows.arrow, written once
//! at the end, is in `flows.rs`).

use std::sync::Arc;

use arrow_array::builder::{
    ArrayBuilder, Float64Builder, Int32Builder, Int64Builder, UInt32Builder, UInt8Builder,
};
use arrow_array::types::Int32Type;
use arrow_array::{ArrayRef, DictionaryArray, StringArray};
use arrow_schema::{DataType, Field};

use super::stream::Columns;
use crate::ids::{FlowId, LinkId, NodeId, PortId};

/// A count or time as Arrow's (and the PyData tools') int64: `finish - start` cannot wrap in
/// DuckDB or polars. The engine's values stay far below 2^63 (validated times); a larger one is
/// written as i64::MAX.
pub fn int64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn done<B: ArrayBuilder>(b: &mut B) -> ArrayRef {
    b.finish()
}

/// The Arrow type of a dictionary-encoded string column: int32 keys into utf8 values (what
/// `pyarrow`'s `dictionary_encode` gives; DuckDB, polars and pandas read it as a category).
pub fn dict_type() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
}

/// A dictionary-encoded string field.
pub fn dict_field(name: &str, nullable: bool) -> Field {
    Field::new(name, dict_type(), nullable)
}

/// A string column whose values come from a list fixed when the table starts: each row is a
/// key into it. Every batch carries the same dictionary (an Arrow IPC *file* allows one per
/// column), and a row costs a key, not a string.
#[derive(Debug)]
pub struct DictColumn {
    keys: Int32Builder,
    values: ArrayRef,
}

impl DictColumn {
    pub fn new<S: AsRef<str>>(values: &[S]) -> Self {
        let values: StringArray = values.iter().map(|v| Some(v.as_ref())).collect();
        Self {
            keys: Int32Builder::new(),
            values: Arc::new(values),
        }
    }

    /// A row with value `values[key]`.
    #[inline]
    pub fn append(&mut self, key: usize) {
        debug_assert!(key < self.values.len());
        self.keys.append_value(key as i32);
    }

    /// A row with value `values[key]`, or null.
    #[inline]
    pub fn append_option(&mut self, key: Option<usize>) {
        match key {
            Some(k) => self.append(k),
            None => self.keys.append_null(),
        }
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.len() == 0
    }

    /// The rows so far, leaving the column empty (the dictionary stays).
    pub fn finish(&mut self) -> ArrayRef {
        let keys = self.keys.finish();
        Arc::new(
            DictionaryArray::<Int32Type>::try_new(keys, self.values.clone())
                .expect("keys index the dictionary"),
        )
    }
}

/// The names of the link tiers, in the order of [`crate::topology::Tier`] (its `as u8`).
pub const TIER_NAMES: [&str; 6] = ["host", "fabric", "core", "global", "scaleup", "pcie"];

/// [`TIER_NAMES`] and "ocs": the dictionary of fabrics with an `[ocs]` (others keep the six,
/// so their files do not change).
pub const TIER_NAMES_OCS: [&str; 7] =
    ["host", "fabric", "core", "global", "scaleup", "pcie", "ocs"];

/// queues.arrow: one row per (switch port, priority) and sample.
#[derive(Default)]
pub struct QueueRows {
    pub time_ps: Int64Builder,
    pub switch: UInt32Builder,
    pub port: UInt32Builder,
    pub priority: UInt8Builder,
    pub bytes: Int64Builder,
    pub packets: UInt32Builder,
    /// Most bytes the queue held since the previous sample.
    pub max_bytes: Int64Builder,
    /// The node the port belongs to (a switch, or a host with `trace.queues.hosts`): the same
    /// value as `switch`, under a name that fits both (join with nodes.arrow's `node`).
    pub node: UInt32Builder,
}

/// One queues.arrow row's figures (see [`QueueRows`]).
#[derive(Debug, Clone, Copy)]
pub struct QueueRow {
    pub time_ps: u64,
    pub node: NodeId,
    pub port: PortId,
    pub priority: u8,
    pub bytes: u64,
    pub packets: u32,
    pub max_bytes: u64,
}

impl Columns for QueueRows {
    const FILE: &'static str = "queues.arrow";
    type Row = QueueRow;
    fn push_row(&mut self, r: &QueueRow) {
        self.time_ps.append_value(int64(r.time_ps));
        self.switch.append_value(r.node.get());
        self.port.append_value(r.port.get());
        self.priority.append_value(r.priority);
        self.bytes.append_value(int64(r.bytes));
        self.packets.append_value(r.packets);
        self.max_bytes.append_value(int64(r.max_bytes));
        self.node.append_value(r.node.get());
    }
    fn fields() -> Vec<Field> {
        vec![
            Field::new("time_ps", DataType::Int64, false),
            Field::new("switch", DataType::UInt32, false),
            Field::new("port", DataType::UInt32, false),
            Field::new("priority", DataType::UInt8, false),
            Field::new("bytes", DataType::Int64, false),
            Field::new("packets", DataType::UInt32, false),
            Field::new("max_bytes", DataType::Int64, false),
            Field::new("node", DataType::UInt32, false),
        ]
    }
    fn rows(&self) -> usize {
        self.time_ps.len()
    }
    fn finish_columns(&mut self) -> Vec<ArrayRef> {
        vec![
            Arc::new(self.time_ps.finish()),
            Arc::new(self.switch.finish()),
            Arc::new(self.port.finish()),
            Arc::new(self.priority.finish()),
            Arc::new(self.bytes.finish()),
            Arc::new(self.packets.finish()),
            Arc::new(self.max_bytes.finish()),
            Arc::new(self.node.finish()),
        ]
    }
}

/// links.arrow: one row per link (named by its egress port) and interval.
pub struct LinkRows {
    /// End of the interval.
    pub time_ps: Int64Builder,
    pub link: UInt32Builder,
    pub src: UInt32Builder,
    pub dst: UInt32Builder,
    pub tier: DictColumn,
    pub tx_bytes: Int64Builder,
    pub utilisation: Float64Builder,
    pub paused_ps: Int64Builder,
}

impl Default for LinkRows {
    fn default() -> Self {
        Self {
            time_ps: Int64Builder::new(),
            link: UInt32Builder::new(),
            src: UInt32Builder::new(),
            dst: UInt32Builder::new(),
            tier: DictColumn::new(&TIER_NAMES),
            tx_bytes: Int64Builder::new(),
            utilisation: Float64Builder::new(),
            paused_ps: Int64Builder::new(),
        }
    }
}

/// One links.arrow row's figures (see [`LinkRows`]).
#[derive(Debug, Clone, Copy)]
pub struct LinkRow {
    pub time_ps: u64,
    pub link: LinkId,
    pub src: NodeId,
    pub dst: NodeId,
    pub tier: crate::topology::Tier,
    pub tx_bytes: u64,
    pub utilisation: f64,
    pub paused_ps: u64,
}

impl Columns for LinkRows {
    const FILE: &'static str = "links.arrow";
    type Row = LinkRow;
    fn push_row(&mut self, r: &LinkRow) {
        self.time_ps.append_value(int64(r.time_ps));
        self.link.append_value(r.link.get());
        self.src.append_value(r.src.get());
        self.dst.append_value(r.dst.get());
        self.tier.append(r.tier as usize);
        self.tx_bytes.append_value(int64(r.tx_bytes));
        self.utilisation.append_value(r.utilisation);
        self.paused_ps.append_value(int64(r.paused_ps));
    }
    fn fields() -> Vec<Field> {
        vec![
            Field::new("time_ps", DataType::Int64, false),
            Field::new("link", DataType::UInt32, false),
            Field::new("src", DataType::UInt32, false),
            Field::new("dst", DataType::UInt32, false),
            dict_field("tier", false),
            Field::new("tx_bytes", DataType::Int64, false),
            Field::new("utilisation", DataType::Float64, false),
            Field::new("paused_ps", DataType::Int64, false),
        ]
    }
    fn rows(&self) -> usize {
        self.time_ps.len()
    }
    fn finish_columns(&mut self) -> Vec<ArrayRef> {
        vec![
            done(&mut self.time_ps),
            done(&mut self.link),
            done(&mut self.src),
            done(&mut self.dst),
            self.tier.finish(),
            done(&mut self.tx_bytes),
            done(&mut self.utilisation),
            done(&mut self.paused_ps),
        ]
    }
}

/// pfc.arrow: one row per PAUSE or RESUME frame a switch sends.
pub struct PfcRows {
    pub time_ps: Int64Builder,
    /// The switch that sent the frame, and the port it left on.
    pub switch: UInt32Builder,
    pub port: UInt32Builder,
    /// The upstream node and its egress port being paused.
    pub upstream: UInt32Builder,
    pub paused_port: UInt32Builder,
    pub priority: UInt8Builder,
    pub action: DictColumn,
}

impl Default for PfcRows {
    fn default() -> Self {
        Self {
            time_ps: Int64Builder::new(),
            switch: UInt32Builder::new(),
            port: UInt32Builder::new(),
            upstream: UInt32Builder::new(),
            paused_port: UInt32Builder::new(),
            priority: UInt8Builder::new(),
            action: DictColumn::new(&["pause", "resume"]),
        }
    }
}

/// One pfc.arrow row's figures (see [`PfcRows`]).
#[derive(Debug, Clone, Copy)]
pub struct PfcRow {
    pub time_ps: u64,
    pub switch: NodeId,
    pub port: PortId,
    pub upstream: NodeId,
    pub paused_port: PortId,
    pub priority: u8,
    pub pause: bool,
}

impl Columns for PfcRows {
    const FILE: &'static str = "pfc.arrow";
    type Row = PfcRow;
    fn push_row(&mut self, r: &PfcRow) {
        self.time_ps.append_value(int64(r.time_ps));
        self.switch.append_value(r.switch.get());
        self.port.append_value(r.port.get());
        self.upstream.append_value(r.upstream.get());
        self.paused_port.append_value(r.paused_port.get());
        self.priority.append_value(r.priority);
        self.action.append(if r.pause { 0 } else { 1 });
    }
    fn fields() -> Vec<Field> {
        vec![
            Field::new("time_ps", DataType::Int64, false),
            Field::new("switch", DataType::UInt32, false),
            Field::new("port", DataType::UInt32, false),
            Field::new("upstream", DataType::UInt32, false),
            Field::new("paused_port", DataType::UInt32, false),
            Field::new("priority", DataType::UInt8, false),
            dict_field("action", false),
        ]
    }
    fn rows(&self) -> usize {
        self.time_ps.len()
    }
    fn finish_columns(&mut self) -> Vec<ArrayRef> {
        vec![
            done(&mut self.time_ps),
            done(&mut self.switch),
            done(&mut self.port),
            done(&mut self.upstream),
            done(&mut self.paused_port),
            done(&mut self.priority),
            self.action.finish(),
        ]
    }
}

/// rates.arrow: congestion-control state changes of a flow (sampled). Each scheme fills the
/// columns it has; the others are null (DCQCN: rate, target, alpha; DCTCP: rate, alpha, window,
/// ECN fraction and acked packets; Swift: rate, window, delay and target delay, the delay samples' mean, max and
/// count; HPCC: rate, window, utilisation and its largest sample; NSCC: as Swift, plus the ECN
/// fraction and acked packets). The signal columns cover the flow's samples since its previous row.
#[derive(Default)]
pub struct RateRows {
    pub time_ps: Int64Builder,
    pub flow_id: Int64Builder,
    pub rate_bps: Int64Builder,
    pub target_bps: Int64Builder,
    pub alpha: Float64Builder,
    pub window_bytes: Int64Builder,
    pub delay_ps: Int64Builder,
    pub target_delay_ps: Int64Builder,
    pub utilisation: Float64Builder,
    pub delay_mean_ps: Int64Builder,
    pub delay_max_ps: Int64Builder,
    pub delay_samples: Int64Builder,
    pub ecn_fraction: Float64Builder,
    pub acked_packets: Int64Builder,
    pub utilisation_max: Float64Builder,
}

/// One rates.arrow row's figures: a flow's rate sample (see [`RateRows`]).
#[derive(Debug, Clone, Copy)]
pub struct RateRow {
    pub time_ps: u64,
    pub flow_id: FlowId,
    pub sample: crate::cc::RateSample,
}

impl Columns for RateRows {
    const FILE: &'static str = "rates.arrow";
    type Row = RateRow;
    fn push_row(&mut self, row: &RateRow) {
        let r = &row.sample;
        self.time_ps.append_value(int64(row.time_ps));
        self.flow_id.append_value(int64(row.flow_id.get() as u64));
        self.rate_bps.append_value(int64(r.rate_bps));
        self.target_bps.append_option(r.target_bps.map(int64));
        self.alpha.append_option(r.alpha);
        self.window_bytes.append_option(r.window_bytes.map(int64));
        self.delay_ps.append_option(r.delay_ps.map(int64));
        self.target_delay_ps
            .append_option(r.target_delay_ps.map(int64));
        self.utilisation.append_option(r.utilisation);
        self.delay_mean_ps.append_option(r.delay_mean_ps.map(int64));
        self.delay_max_ps.append_option(r.delay_max_ps.map(int64));
        self.delay_samples.append_option(r.delay_samples.map(int64));
        self.ecn_fraction.append_option(r.ecn_fraction);
        self.acked_packets.append_option(r.acked_packets.map(int64));
        self.utilisation_max.append_option(r.utilisation_max);
    }
    fn fields() -> Vec<Field> {
        vec![
            Field::new("time_ps", DataType::Int64, false),
            Field::new("flow_id", DataType::Int64, false),
            Field::new("rate_bps", DataType::Int64, false),
            Field::new("target_bps", DataType::Int64, true),
            Field::new("alpha", DataType::Float64, true),
            Field::new("window_bytes", DataType::Int64, true),
            Field::new("delay_ps", DataType::Int64, true),
            Field::new("target_delay_ps", DataType::Int64, true),
            Field::new("utilisation", DataType::Float64, true),
            Field::new("delay_mean_ps", DataType::Int64, true),
            Field::new("delay_max_ps", DataType::Int64, true),
            Field::new("delay_samples", DataType::Int64, true),
            Field::new("ecn_fraction", DataType::Float64, true),
            Field::new("acked_packets", DataType::Int64, true),
            Field::new("utilisation_max", DataType::Float64, true),
        ]
    }
    fn rows(&self) -> usize {
        self.time_ps.len()
    }
    fn finish_columns(&mut self) -> Vec<ArrayRef> {
        vec![
            done(&mut self.time_ps),
            done(&mut self.flow_id),
            done(&mut self.rate_bps),
            done(&mut self.target_bps),
            done(&mut self.alpha),
            done(&mut self.window_bytes),
            done(&mut self.delay_ps),
            done(&mut self.target_delay_ps),
            done(&mut self.utilisation),
            done(&mut self.delay_mean_ps),
            done(&mut self.delay_max_ps),
            done(&mut self.delay_samples),
            done(&mut self.ecn_fraction),
            done(&mut self.acked_packets),
            done(&mut self.utilisation_max),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::Tier;
    use crate::trace::stream::{Stream, STREAM_BATCH_ROWS};
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int32Type;
    use arrow_array::Array;

    #[test]
    fn a_streamed_dictionary_column_spans_batches() {
        // More rows than one batch: every batch carries the same dictionary, which an Arrow IPC
        // file requires (a changed one is refused as a replacement).
        let dir = std::env::temp_dir().join(format!("fabricemu-dict-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut s: Stream<PfcRows> = Stream::default();
        s.open(&dir, &[]).unwrap();
        let n = STREAM_BATCH_ROWS + 10;
        for i in 0..n {
            let id = i as u32;
            let row = PfcRow {
                time_ps: i as u64,
                switch: NodeId::new(id),
                port: PortId::new(id),
                upstream: NodeId::new(id),
                paused_port: PortId::new(id),
                priority: 3,
                pause: i % 3 == 0,
            };
            s.push(Default::default(), row).unwrap();
        }
        s.finish(&dir, &[]).unwrap();
        let f = std::fs::File::open(dir.join(PfcRows::FILE)).unwrap();
        let batches: Vec<_> = arrow_ipc::reader::FileReader::try_new(f, None)
            .unwrap()
            .map(|b| b.unwrap())
            .collect();
        assert_eq!(batches.len(), 2);
        let mut k = 0;
        for b in &batches {
            let d = b
                .column_by_name("action")
                .unwrap()
                .as_dictionary::<Int32Type>();
            let values = d.values().as_string::<i32>();
            assert_eq!(values.len(), 2);
            for key in d.keys().values() {
                let want = if k % 3 == 0 { "pause" } else { "resume" };
                assert_eq!(values.value(*key as usize), want);
                k += 1;
            }
        }
        assert_eq!(k, n);
        std::fs::remove_dir_all(&dir).unwrap();
        // Tiers: the key is the tier's position in TIER_NAMES.
        let mut links = LinkRows::default();
        links.push_row(&LinkRow {
            time_ps: 0,
            link: LinkId::new(0),
            src: NodeId::new(0),
            dst: NodeId::new(1),
            tier: Tier::Global,
            tx_bytes: 1,
            utilisation: 0.5,
            paused_ps: 0,
        });
        let tier = links.tier.finish();
        let d = tier.as_dictionary::<Int32Type>();
        assert_eq!(d.keys().value(0), 3);
        assert_eq!(d.values().as_string::<i32>().value(3), "global");
        assert_eq!(d.len(), 1);
    }
}
