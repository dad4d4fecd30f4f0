//! Measurement of synthetic workloads over the window `[warmup, stop)`: accepted throughput
//! (counted at the receiving NIC as data packets are first delivered), offered load and message
//! latency, all exact.

use super::world::World;
use super::Simulation;
use crate::packet::Packet;
use crate::scenario::{Scenario, StopAt, WorkloadSpec};
use crate::transport::{window, NEVER};
use crate::units::Time;

/// The window and the counter the run keeps while synthetic workloads run.
#[derive(Debug, Clone)]
pub(crate) struct SynthMeter {
    pub from: Time,
    pub to: Time,
    /// Per workload index: is it synthetic.
    pub workloads: Vec<bool>,
    /// Data wire bytes of synthetic flows first delivered to their receiver inside the window.
    pub accepted_wire_bytes: u64,
}

impl SynthMeter {
    pub fn new(s: &Scenario) -> Option<Self> {
        let workloads: Vec<bool> = s
            .workloads
            .iter()
            .map(|w| matches!(w.spec, WorkloadSpec::Synthetic(_)))
            .collect();
        if !workloads.iter().any(|&x| x) {
            return None;
        }
        Some(SynthMeter {
            from: s.warmup_ps,
            to: match s.stop {
                StopAt::Time(t) => t,
                StopAt::AllFlowsDone => NEVER,
            },
            workloads,
            accepted_wire_bytes: 0,
        })
    }
}

impl World {
    /// A data packet reached its receiver: count its wire bytes if it is the first copy of that
    /// packet delivered (not a duplicate; not an out-of-order packet a go-back-N receiver discards),
    /// its flow synthetic and now inside the window. Called before the receiver's state changes.
    pub(super) fn meter_data(&mut self, p: &Packet) {
        let now = self.now;
        let Some(m) = self.synth.as_mut() else { return };
        let f = &self.flows[p.flow];
        if now < m.from || now >= m.to || !m.workloads[f.workload as usize] {
            return;
        }
        let first = if p.seq == f.expected {
            true
        } else if p.seq > f.expected && self.transport.selective {
            !window::get(&f.received_ahead, p.seq - f.expected)
        } else {
            false
        };
        if first {
            m.accepted_wire_bytes += p.wire_bytes as u64;
        }
    }
}

/// What the synthetic workloads of a run offered and got over the measurement window
/// `[warmup_ps, stop_ps)`. Loads are fractions of the injection bandwidth: bits over
/// `senders x host_rate_bps x window`. Latency is `finish - start` of a message (generation to its
/// last byte delivered, source queueing included), over the messages generated in the window that
/// finished by the stop time; percentiles interpolate linearly between order statistics.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SyntheticStats {
    pub warmup_ps: Time,
    pub stop_ps: Time,
    pub window_ps: Time,
    /// Hosts that send synthetic traffic (every host).
    pub senders: u32,
    pub host_rate_bps: u64,
    /// Sum of the synthetic workloads' `load`.
    pub target_load: f64,
    pub offered_load: f64,
    pub accepted_throughput: f64,
    /// Wire bytes of the messages generated in the window.
    pub offered_wire_bytes: u64,
    /// Data wire bytes first delivered to receivers in the window.
    pub accepted_wire_bytes: u64,
    /// Messages generated in the window.
    pub messages_generated: u64,
    /// ... of which finished by the stop time (the latency sample).
    pub messages_measured: u64,
    pub messages_unfinished: u64,
    pub latency_mean_ps: Option<f64>,
    pub latency_p50_ps: Option<f64>,
    pub latency_p99_ps: Option<f64>,
    pub latency_max_ps: Option<u64>,
}

/// Linear interpolation between order statistics of sorted `v` (numpy's default).
fn percentile(v: &[u64], q: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let rank = q * (v.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = rank.ceil() as usize;
    let frac = rank - lo as f64;
    Some(v[lo] as f64 + (v[hi] as f64 - v[lo] as f64) * frac)
}

impl World {
    /// Whether a flow of workload `workload` starting at `start_ps` is a synthetic message
    /// generated in the window.
    pub(super) fn synthetic_measured(&self, workload: u32, start_ps: Time) -> Option<bool> {
        let m = self.synth.as_ref()?;
        m.workloads[workload as usize].then_some(start_ps >= m.from && start_ps < m.to)
    }
}

impl Simulation {
    /// Whether flow `f` (of workload `workload`) is a synthetic message generated in the window.
    pub fn synthetic_measured(&self, workload: u32, start_ps: Time) -> Option<bool> {
        self.world.synthetic_measured(workload, start_ps)
    }

    /// The measurement of the synthetic workloads (None if the scenario has none).
    pub fn synthetic_stats(&self) -> Option<SyntheticStats> {
        let w = &self.world;
        let m = w.synth.as_ref()?;
        let window_ps = m.to.saturating_sub(m.from);
        let header = w.transport.header as u64;
        let mut offered = 0u64;
        let mut generated = 0u64;
        let mut latencies: Vec<u64> = Vec::new();
        for id in w.flows.ids() {
            let f = w.flow_brief(id);
            if !m.workloads[f.workload as usize] || f.start < m.from || f.start >= m.to {
                continue;
            }
            generated += 1;
            offered += f.size_bytes + f.num_packets as u64 * header;
            if let Some(finish) = f.finish {
                latencies.push(finish - f.start);
            }
        }
        latencies.sort_unstable();
        let senders = self.scenario.num_endpoints();
        let host_rate_bps = self.scenario.topology.host_link().rate_bps;
        let capacity_bits = senders as f64 * host_rate_bps as f64 * window_ps as f64 * 1e-12;
        let load = |bytes: u64| {
            if capacity_bits > 0.0 {
                bytes as f64 * 8.0 / capacity_bits
            } else {
                0.0
            }
        };
        let target_load = self
            .scenario
            .workloads
            .iter()
            .map(|wl| match &wl.spec {
                WorkloadSpec::Synthetic(s) => s.load,
                _ => 0.0,
            })
            .sum();
        let n = latencies.len();
        Some(SyntheticStats {
            warmup_ps: m.from,
            stop_ps: m.to,
            window_ps,
            senders,
            host_rate_bps,
            target_load,
            offered_load: load(offered),
            accepted_throughput: load(m.accepted_wire_bytes),
            offered_wire_bytes: offered,
            accepted_wire_bytes: m.accepted_wire_bytes,
            messages_generated: generated,
            messages_measured: n as u64,
            messages_unfinished: generated - n as u64,
            latency_mean_ps: (n > 0)
                .then(|| latencies.iter().map(|&x| x as f64).sum::<f64>() / n as f64),
            latency_p50_ps: percentile(&latencies, 0.5),
            latency_p99_ps: percentile(&latencies, 0.99),
            latency_max_ps: latencies.last().copied(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn percentiles_interpolate_like_numpy() {
        // numpy.percentile([1, 2, 3, 4], [50, 99]) = [2.5, 3.97]
        let v = [1, 2, 3, 4];
        assert_eq!(percentile(&v, 0.5), Some(2.5));
        assert!((percentile(&v, 0.99).unwrap() - 3.97).abs() < 1e-12);
        assert_eq!(percentile(&[7], 0.99), Some(7.0));
        assert_eq!(percentile(&[], 0.5), None);
    }
}
