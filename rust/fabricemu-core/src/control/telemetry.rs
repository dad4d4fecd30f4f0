//! The telemetry snapshot a controller reads at each boundary: bounded (one row per port and one
//! per collective group), made from counters the engine keeps, differenced between boundaries.
//!
//! Per port (the link leaving it, named by its egress port as in links.arrow): bytes sent,
//! utilisation, ECN marks, PFC pause frames received and time paused over the last interval;
//! the bytes queued at the boundary. Per collective group: calls done, the current call's
//! algorithm and progress (flows and bytes done), the next call not yet started.

use crate::engine::live::PortCounters;
use crate::engine::Simulation;
use crate::units::Time;

/// One port over the last interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PortTelemetry {
    /// Egress port id (= link id in links.arrow).
    pub port: u32,
    pub node: u32,
    /// The node at the far end of the link.
    pub peer: u32,
    /// Current rate of the link.
    pub rate_bps: u64,
    /// Bytes put on the wire in the interval.
    pub tx_bytes: u64,
    /// `tx_bytes` over what the link could carry in the interval (0 for an empty interval).
    pub utilisation: f64,
    /// Bytes queued at the port at the boundary.
    pub queue_bytes: u64,
    /// ECN marks made at the port in the interval.
    pub ecn_marks: u64,
    /// PFC pause frames that paused the link in the interval.
    pub pause_frames: u64,
    /// Time the link spent paused in the interval.
    pub paused_ps: u64,
    /// The link is down (a fault).
    pub down: bool,
}

/// One collective group's progress.
#[derive(Debug, Clone, PartialEq)]
pub struct CollectiveProgress {
    /// Index of the group (collectives.arrow's `collective`).
    pub collective: u32,
    pub workload: u32,
    pub group: u32,
    pub op: &'static str,
    pub ranks: u32,
    /// The host (endpoint) of each rank.
    pub hosts: Vec<u32>,
    pub size_bytes: u64,
    /// Calls (iterations) in all, and finished.
    pub calls: u32,
    pub calls_done: u32,
    /// The first call not finished (None: all are).
    pub current_call: Option<u32>,
    /// Its algorithm, whether any of its flows started, its flows and bytes (done so far).
    pub current_algorithm: Option<&'static str>,
    pub current_started: bool,
    pub current_flows: u32,
    pub current_flows_done: u32,
    pub current_bytes: u64,
    pub current_bytes_done: u64,
    /// The first call none of whose flows started: the one a `set_algorithm` action re-plans.
    pub next_call: Option<u32>,
    pub next_algorithm: Option<&'static str>,
}

/// The snapshot of one boundary.
#[derive(Debug, Clone, PartialEq)]
pub struct Telemetry {
    /// The boundary's simulated time.
    pub time_ps: Time,
    /// Since the previous boundary (0 at the first).
    pub interval_ps: Time,
    pub ports: Vec<PortTelemetry>,
    pub collectives: Vec<CollectiveProgress>,
}

impl Telemetry {
    /// The snapshot of `sim` now, differenced against the counters of the previous boundary
    /// (`last`, empty at the first), which it replaces.
    pub fn take(sim: &Simulation, last: &mut Vec<PortCounters>, last_ps: Time) -> Telemetry {
        let w = sim.world();
        let now = w.now;
        let interval_ps = now - last_ps.min(now);
        let counters: Vec<PortCounters> = sim.port_counters();
        let ports = counters
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let before = last.get(i).copied();
                let d = |f: fn(&PortCounters) -> u64| f(c) - before.as_ref().map_or(0, f);
                let tx_bytes = d(|p| p.tx_bytes);
                let capacity = c.rate_bps as f64 * interval_ps as f64 * 1e-12 / 8.0;
                PortTelemetry {
                    port: c.port.get(),
                    node: c.node,
                    peer: c.peer,
                    rate_bps: c.rate_bps,
                    tx_bytes,
                    utilisation: if capacity > 0.0 {
                        tx_bytes as f64 / capacity
                    } else {
                        0.0
                    },
                    queue_bytes: c.queue_bytes,
                    ecn_marks: d(|p| p.ecn_marks),
                    pause_frames: d(|p| p.pause_frames),
                    paused_ps: d(|p| p.paused_ps),
                    down: c.down,
                }
            })
            .collect();
        *last = counters;
        Telemetry {
            time_ps: now,
            interval_ps,
            ports,
            collectives: progress(sim),
        }
    }
}

/// Every re-plannable collective group's progress now.
pub fn progress(sim: &Simulation) -> Vec<CollectiveProgress> {
    let Some(control) = sim.control() else {
        return Vec::new();
    };
    let w = sim.world();
    let mtu = sim.scenario().transport.mtu_bytes;
    let plan = sim.workload_plan();
    let mut out = Vec::new();
    for (ci, calls) in control.calls.by_instance.iter().enumerate() {
        let Some(calls) = calls else { continue };
        let inst = &plan.collectives[ci];
        let mut p = CollectiveProgress {
            collective: ci as u32,
            workload: inst.workload,
            group: inst.group,
            op: inst.op.name(),
            ranks: inst.hosts.len() as u32,
            hosts: inst.hosts.clone(),
            size_bytes: inst.size_bytes,
            calls: calls.len() as u32,
            calls_done: 0,
            current_call: None,
            current_algorithm: None,
            current_started: false,
            current_flows: 0,
            current_flows_done: 0,
            current_bytes: 0,
            current_bytes_done: 0,
            next_call: None,
            next_algorithm: None,
        };
        // The leading calls known done are not looked at again (a finished flow stays so, and
        // only calls not started are re-planned): a boundary reads the flows of the calls under
        // way and of the next one, not of every call of the run.
        let known = control.done_calls.get(ci).copied().unwrap_or(0) as usize;
        p.calls_done = known as u32;
        for (k, call) in calls.iter().enumerate().skip(known) {
            if p.current_call.is_some() && p.next_call.is_some() {
                break; // nothing later changes either
            }
            let flows = || call.flows.iter().map(|&f| &w.flows[f]);
            let started = flows().any(|f| f.started);
            if p.next_call.is_none() && !started {
                p.next_call = Some(k as u32);
                p.next_algorithm = Some(call.algorithm.name());
            }
            if p.current_call.is_some() {
                continue;
            }
            let done = flows().filter(|f| f.finished()).count() as u32;
            if done == call.flows.len() as u32 && !call.flows.is_empty() {
                p.calls_done += 1;
                continue;
            }
            p.current_call = Some(k as u32);
            p.current_algorithm = Some(call.algorithm.name());
            p.current_started = started;
            p.current_flows = call.flows.len() as u32;
            p.current_flows_done = done;
            for f in flows() {
                p.current_bytes += f.size_bytes;
                p.current_bytes_done += if f.finished() {
                    f.size_bytes
                } else {
                    (f.acked as u64 * mtu).min(f.size_bytes)
                };
            }
        }
        out.push(p);
    }
    out
}
