//! One-way packet latency without a packet trace: each data packet's delivery time minus the time
//! its transmission started at the source NIC, accumulated per workload and flow-size bucket
//! ([`SIZE_EDGES`]) into a log-bucketed histogram (latency.arrow) with exact count, sum, sum of
//! squares, min and max (the run.json summary: percentiles, mean, standard deviation and jitter,
//! for all packets, per workload and per flow-size bucket).
//!
//! A packet's send time is not in the 48-byte packet record (no room): it lives in a side array
//! indexed by the packet's arena slot, like the INT records, written when the source NIC creates
//! the packet and read when the destination receives it. A retransmitted packet is a new copy,
//! timed from its own transmission.
//!
//! Buckets: values below 2^SUB_BITS ps each have their own bucket; above, each power of two is
//! split into 2^SUB_BITS equal buckets, so a bucket is at most 1/32 of its lower edge wide.

use std::io;
use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{Int64Builder, StringBuilder, UInt32Builder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use serde_json::{json, Value};

use super::atomic::write_atomic;
use super::tables::int64;
use crate::units::Time;

/// Name of the histogram table.
pub const LATENCY_FILE: &str = "latency.arrow";

const SUB_BITS: u32 = 5;
const SUB: u64 = 1 << SUB_BITS;
/// Flow-size buckets: `[0, 10 KB)`, `[10 KB, 100 KB)`, `[100 KB, 1 MB)`, `[1 MB, 10 MB)`,
/// `[10 MB, ...)` (decimal units, as sizes are written in scenarios).
pub const SIZE_EDGES: [u64; 4] = [10_000, 100_000, 1_000_000, 10_000_000];
const NUM_SIZES: usize = SIZE_EDGES.len() + 1;

/// The flow-size bucket of a flow of `bytes`.
#[inline(always)]
pub fn size_bucket(bytes: u64) -> usize {
    SIZE_EDGES.iter().filter(|&&e| bytes >= e).count()
}

/// The edges of flow-size bucket `s`: `[min, max)`, max None for the last.
pub fn size_edges(s: usize) -> (u64, Option<u64>) {
    let lo = if s == 0 { 0 } else { SIZE_EDGES[s - 1] };
    (lo, SIZE_EDGES.get(s).copied())
}

/// Buckets of one histogram (every u64 value has one).
pub const NUM_BUCKETS: usize = ((64 - SUB_BITS as usize) + 1) * SUB as usize;

/// The bucket of `v` ps.
#[inline(always)]
pub fn bucket_of(v: u64) -> usize {
    if v < SUB {
        v as usize
    } else {
        let e = 63 - v.leading_zeros(); // >= SUB_BITS
        let sub = (v >> (e - SUB_BITS)) & (SUB - 1);
        ((e - SUB_BITS + 1) as usize) * SUB as usize + sub as usize
    }
}

/// The edges of bucket `b`: `[lower, upper)` in ps (the last bucket's upper edge saturates).
pub fn bucket_edges(b: usize) -> (u64, u64) {
    let (major, sub) = ((b / SUB as usize) as u32, (b % SUB as usize) as u64);
    if major == 0 {
        return (sub, sub + 1);
    }
    let shift = major - 1;
    let lower = (SUB + sub) << shift;
    let upper = ((SUB + sub + 1) as u128) << shift;
    (lower, u64::try_from(upper).unwrap_or(u64::MAX))
}

/// One histogram and exact moments (`counts` is allocated with the first value).
#[derive(Debug, Clone)]
pub struct Histogram {
    pub counts: Vec<u64>,
    pub count: u64,
    pub sum: u128,
    pub sum_sq: u128,
    pub min: u64,
    pub max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self {
            counts: Vec::new(),
            count: 0,
            sum: 0,
            sum_sq: 0,
            min: u64::MAX,
            max: 0,
        }
    }
}

impl Histogram {
    #[inline(always)]
    pub fn add(&mut self, v: u64) {
        if self.counts.is_empty() {
            self.counts = vec![0; NUM_BUCKETS]; // once per histogram, not per packet
        }
        self.counts[bucket_of(v)] += 1;
        self.count += 1;
        self.sum += v as u128;
        self.sum_sq += (v as u128) * (v as u128);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    pub fn merge(&mut self, o: &Histogram) {
        if o.count == 0 {
            return;
        }
        if self.counts.is_empty() {
            self.counts = vec![0; NUM_BUCKETS];
        }
        for (a, b) in self.counts.iter_mut().zip(&o.counts) {
            *a += b;
        }
        self.count += o.count;
        self.sum += o.sum;
        self.sum_sq += o.sum_sq;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
    }

    /// The `q` quantile (0..=1): the lower edge of the bucket holding the value of rank
    /// `ceil(q * count)`, kept within [min, max] (so a histogram of one value gives it exactly;
    /// otherwise within 1/32 of the true value, below it). None when empty.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.count == 0 {
            return None;
        }
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(bucket_edges(b).0.clamp(self.min, self.max));
            }
        }
        Some(self.max)
    }

    /// Summary figures (ps): count, min, mean, p50, p99, p999, max, stddev (population) and
    /// jitter (p99 - p50); nulls when no packet was measured.
    pub fn summary(&self) -> Value {
        if self.count == 0 {
            return json!({"packets": 0, "min_ps": null, "mean_ps": null, "p50_ps": null,
                "p99_ps": null, "p999_ps": null, "max_ps": null, "stddev_ps": null,
                "jitter_ps": null});
        }
        let n = self.count as f64;
        let mean = self.sum as f64 / n;
        let var = (self.sum_sq as f64 / n - mean * mean).max(0.0);
        let p50 = self.quantile(0.5).expect("non-empty");
        let p99 = self.quantile(0.99).expect("non-empty");
        json!({
            "packets": self.count,
            "min_ps": self.min,
            "mean_ps": mean,
            "p50_ps": p50,
            "p99_ps": p99,
            "p999_ps": self.quantile(0.999),
            "max_ps": self.max,
            "stddev_ps": var.sqrt(),
            "jitter_ps": p99 - p50,
        })
    }
}

/// The latency part of the World: send times per packet slot, a histogram per workload and
/// flow-size bucket.
#[derive(Debug, Default)]
pub struct Latency {
    /// Per packet arena slot: when its transmission started at the source NIC.
    sent: Vec<Time>,
    /// Index `workload * NUM_SIZES + size bucket`.
    hists: Vec<Histogram>,
}

impl Latency {
    pub fn new(workloads: usize) -> Self {
        Self {
            sent: Vec::new(),
            hists: vec![Histogram::default(); workloads.max(1) * NUM_SIZES],
        }
    }

    /// The histogram of workload `w` and flow-size bucket `s`.
    pub fn histogram(&self, w: usize, s: usize) -> &Histogram {
        &self.hists[w * NUM_SIZES + s]
    }

    fn workloads(&self) -> usize {
        self.hists.len() / NUM_SIZES
    }

    /// Workload `w`, all flow sizes.
    pub fn of_workload(&self, w: usize) -> Histogram {
        let mut t = Histogram::default();
        for h in &self.hists[w * NUM_SIZES..(w + 1) * NUM_SIZES] {
            t.merge(h);
        }
        t
    }

    /// Flow-size bucket `s`, all workloads.
    pub fn of_size(&self, s: usize) -> Histogram {
        let mut t = Histogram::default();
        for w in 0..self.workloads() {
            t.merge(self.histogram(w, s));
        }
        t
    }

    /// Data packet in arena slot `slot` starts its transmission at its source NIC at `now`.
    #[inline(always)]
    pub fn sent(&mut self, slot: usize, now: Time) {
        if slot >= self.sent.len() {
            // Grows with the arena's high-water mark, not per packet.
            self.sent.resize((slot + 1).next_power_of_two(), 0);
        }
        self.sent[slot] = now;
    }

    /// When the packet in `slot` started its transmission at its source NIC (a data packet
    /// moving to another partition takes it along).
    pub fn sent_at(&self, slot: usize) -> Time {
        self.sent.get(slot).copied().unwrap_or(0)
    }

    /// Add the partitions' histograms `parts` (the view's figures: each packet was received in
    /// one partition).
    pub fn sum_of<'a>(&mut self, parts: impl Iterator<Item = &'a Latency>) {
        self.hists
            .iter_mut()
            .for_each(|h| *h = Histogram::default());
        for p in parts {
            for (h, o) in self.hists.iter_mut().zip(&p.hists) {
                h.merge(o);
            }
        }
    }

    /// The data packet in `slot`, of workload `w` and a flow of `flow_bytes`, reached its
    /// destination at `now`.
    #[inline(always)]
    pub fn received(&mut self, slot: usize, workload: u32, flow_bytes: u64, now: Time) {
        let v = now - self.sent[slot];
        self.hists[workload as usize * NUM_SIZES + size_bucket(flow_bytes)].add(v);
    }

    /// All workloads together.
    pub fn total(&self) -> Histogram {
        let mut t = Histogram::default();
        for h in &self.hists {
            t.merge(h);
        }
        t
    }

    /// run.json's `latency`: the summary of all packets, then `workloads` (by name) and `sizes`
    /// (the non-empty flow-size buckets, with `size_min_bytes` and `size_max_bytes`, null for the
    /// last).
    pub fn summary(&self, names: &[String]) -> Value {
        let mut all = self.total().summary();
        let per: serde_json::Map<String, Value> = (0..self.workloads())
            .map(|w| (name_of(names, w), self.of_workload(w).summary()))
            .collect();
        let sizes: Vec<Value> = (0..NUM_SIZES)
            .map(|s| (s, self.of_size(s)))
            .filter(|(_, h)| h.count > 0)
            .map(|(s, h)| {
                let (lo, hi) = size_edges(s);
                let mut v = h.summary();
                let m = v.as_object_mut().expect("an object");
                m.insert("size_min_bytes".into(), json!(lo));
                m.insert("size_max_bytes".into(), json!(hi));
                v
            })
            .collect();
        let m = all.as_object_mut().expect("an object");
        m.insert("workloads".into(), Value::Object(per));
        m.insert("sizes".into(), Value::Array(sizes));
        all
    }

    /// latency.arrow: one row per workload, flow-size bucket and non-empty latency bucket (in
    /// that order).
    pub fn batch(
        &self,
        names: &[String],
        metadata: &[(String, String)],
    ) -> io::Result<RecordBatch> {
        let mut workload = StringBuilder::new();
        let mut index = UInt32Builder::new();
        let mut size_min = Int64Builder::new();
        let mut size_max = Int64Builder::new();
        let mut lower = Int64Builder::new();
        let mut upper = Int64Builder::new();
        let mut count = Int64Builder::new();
        for w in 0..self.workloads() {
            for s in 0..NUM_SIZES {
                let (smin, smax) = size_edges(s);
                for (b, &c) in self.histogram(w, s).counts.iter().enumerate() {
                    if c == 0 {
                        continue;
                    }
                    let (lo, hi) = bucket_edges(b);
                    workload.append_value(name_of(names, w));
                    index.append_value(w as u32);
                    size_min.append_value(int64(smin));
                    size_max.append_option(smax.map(int64));
                    lower.append_value(int64(lo));
                    upper.append_value(int64(hi));
                    count.append_value(int64(c));
                }
            }
        }
        let schema = Schema::new_with_metadata(
            vec![
                Field::new("workload", DataType::Utf8, false),
                Field::new("workload_index", DataType::UInt32, false),
                Field::new("size_min_bytes", DataType::Int64, false),
                Field::new("size_max_bytes", DataType::Int64, true),
                Field::new("lower_ps", DataType::Int64, false),
                Field::new("upper_ps", DataType::Int64, false),
                Field::new("count", DataType::Int64, false),
            ],
            metadata.iter().cloned().collect(),
        );
        let cols: Vec<ArrayRef> = vec![
            Arc::new(workload.finish()),
            Arc::new(index.finish()),
            Arc::new(size_min.finish()),
            Arc::new(size_max.finish()),
            Arc::new(lower.finish()),
            Arc::new(upper.finish()),
            Arc::new(count.finish()),
        ];
        RecordBatch::try_new(Arc::new(schema), cols).map_err(io::Error::other)
    }

    /// Write `path` (atomically).
    pub fn write(
        &self,
        path: &Path,
        names: &[String],
        metadata: &[(String, String)],
    ) -> io::Result<()> {
        let batch = self.batch(names, metadata)?;
        write_atomic(path, |f| {
            let mut w = arrow_ipc::writer::FileWriter::try_new(f, &batch.schema())
                .map_err(io::Error::other)?;
            w.write(&batch).map_err(io::Error::other)?;
            w.finish().map_err(io::Error::other)
        })
    }
}

fn name_of(names: &[String], i: usize) -> String {
    names
        .get(i)
        .cloned()
        .unwrap_or_else(|| format!("workload{i}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_lies_in_its_bucket_and_buckets_tile_the_line() {
        let mut prev_upper = 0;
        for b in 0..NUM_BUCKETS {
            let (lo, hi) = bucket_edges(b);
            assert_eq!(
                lo,
                prev_upper,
                "bucket {b} starts where {} ends",
                b.max(1) - 1
            );
            assert!(hi > lo);
            prev_upper = hi;
            if hi == u64::MAX {
                assert_eq!(b, NUM_BUCKETS - 1);
                break;
            }
        }
        for v in [
            0u64,
            1,
            31,
            32,
            33,
            63,
            64,
            65,
            1000,
            1_234_567,
            u64::MAX / 3,
            u64::MAX,
        ] {
            let (lo, hi) = bucket_edges(bucket_of(v));
            assert!(lo <= v && (v < hi || hi == u64::MAX), "{v} in [{lo}, {hi})");
            if v >= SUB {
                assert!((hi - lo) as f64 <= lo as f64 / SUB as f64 + 1e-9);
            }
        }
    }

    #[test]
    fn quantiles_moments_and_one_value() {
        let mut h = Histogram::default();
        for _ in 0..10 {
            h.add(1_500_000);
        }
        assert_eq!(h.quantile(0.5), Some(1_500_000));
        assert_eq!(h.quantile(0.999), Some(1_500_000));
        let s = h.summary();
        assert_eq!(s["jitter_ps"], 0);
        assert_eq!(s["stddev_ps"], 0.0);
        let mut h = Histogram::default();
        for v in 1..=1000u64 {
            h.add(v * 1000);
        }
        let p50 = h.quantile(0.5).unwrap();
        assert!(
            p50 <= 500_000 && p50 as f64 >= 500_000.0 * (1.0 - 1.0 / 32.0),
            "{p50}"
        );
        let p99 = h.quantile(0.99).unwrap();
        assert!(
            p99 <= 990_000 && p99 as f64 >= 990_000.0 * (1.0 - 1.0 / 32.0),
            "{p99}"
        );
        assert_eq!((h.min, h.max, h.count), (1000, 1_000_000, 1000));
        let sd = h.summary()["stddev_ps"].as_f64().unwrap();
        // Population standard deviation of 1000, 2000, ..., 1e6.
        let exact = ((1000f64 * 1000.0 - 1.0) / 12.0).sqrt() * 1000.0;
        assert!((sd - exact).abs() < 1.0, "{sd} vs {exact}");
        assert_eq!(Histogram::default().quantile(0.5), None);
    }

    #[test]
    fn flow_sizes_fall_in_decade_buckets_and_merge_per_workload() {
        assert_eq!(size_bucket(0), 0);
        assert_eq!(size_bucket(9_999), 0);
        assert_eq!(size_bucket(10_000), 1);
        assert_eq!(size_bucket(999_999), 2);
        assert_eq!(size_bucket(20_000_000), 4);
        assert_eq!(size_edges(0), (0, Some(10_000)));
        assert_eq!(size_edges(4), (10_000_000, None));
        let mut l = Latency::new(2);
        l.sent(0, 100);
        l.received(0, 1, 5_000, 1_100);
        l.sent(3, 200);
        l.received(3, 1, 5_000_000, 2_200);
        assert_eq!(l.histogram(1, 0).count, 1);
        assert_eq!(l.histogram(1, 3).count, 1);
        assert_eq!(l.of_workload(1).count, 2);
        assert_eq!(l.of_workload(0).count, 0);
        let s = l.summary(&["a".into(), "b".into()]);
        assert_eq!(s["workloads"]["b"]["min_ps"], 1000);
        assert_eq!(s["workloads"]["b"]["max_ps"], 2000);
        assert_eq!(s["sizes"][1]["size_min_bytes"], 1_000_000);
        assert_eq!(s["sizes"][1]["p50_ps"], 2000);
        assert_eq!(s["workloads"]["a"]["packets"], 0);
        let b = l.batch(&["a".into(), "b".into()], &[]).unwrap();
        assert_eq!(b.num_rows(), 2);
    }
}
