//! The built-in telemetry-aware policy (`[control] policy = "telemetry_aware"`): per collective
//! call, the algorithm with the lowest predicted time from the bandwidth and congestion measured
//! on the links its transfers cross (docs/control.md, "The policy's model").
//!
//! **When.** A group's next call is decided at a boundary where the group is idle and has been
//! for the whole last interval (its previous call finished at least one interval ago, or none
//! started yet and the run is at least one interval old): the last interval's figures are then
//! the other traffic's, not the group's own. A call that starts before such a boundary keeps the
//! algorithm it has (planned, or chosen earlier). Leave a compute gap of at least two intervals
//! between calls for every call to be decided.
//!
//! **Model.** Each candidate algorithm's transfers (the same list the workload would plan) are
//! list-scheduled in plan order over the links they cross (`World::endpoint_path`): a transfer
//! starts when its inputs have arrived (plus its own delay); on each link it occupies the link
//! for `wire bytes / available bandwidth` from when both it and the link are free, where the
//! available bandwidth is `rate x max(1 - background, 0.05)` and `background` the link's
//! utilisation or paused fraction (the larger) over the last interval; it arrives after its
//! slowest link's end, plus the links' latency and the time to drain the bytes queued at each
//! link at the boundary. The call's predicted time is the last arrival. Transfers sharing a link
//! serialise on it, so the model sees an algorithm's own contention (a tree's parent receiving
//! from two children) as well as the background's.
//!
//! **In-network** (`in_network`, `nvls`; all-reduce): a candidate only when the scenario has
//! reduction engines and the group's communicator has its tree or one can be placed now on
//! switches with free contexts ([`LinkModel::in_network`]): every tree link carries S up and S
//! down at once, so the call takes its slowest link's (or busiest engine's) time for S plus the
//! deepest rank's round trip through the tree. Choosing it places the tree: its contexts are
//! held for the rest of the run, as when the scenario sets it.
//!
//! **Candidates.** [`candidates`] lists the flat and in-network algorithms of the operation that
//! may be chosen live; [`predicted_time`] has one arm per algorithm (the place to add another
//! algorithm's own predictor).

use crate::config::{CollectiveAlgorithm, CollectiveSpec, WorkloadSpec};
use crate::engine::Simulation;
use crate::ids::{NodeId, PortId};
use crate::units::Time;
use crate::workload::collective;

use super::actions::Action;
use super::telemetry::Telemetry;

/// The available fraction of a link is never taken below this (a saturated link still moves
/// its fair share).
pub const MIN_AVAILABLE: f64 = 0.05;

/// The fabric as the model sees it at one boundary.
pub struct LinkModel<'a> {
    sim: &'a Simulation,
    telemetry: &'a Telemetry,
    /// Wire bytes per payload byte (headers).
    overhead: f64,
}

impl<'a> LinkModel<'a> {
    pub fn new(sim: &'a Simulation, telemetry: &'a Telemetry) -> Self {
        let t = &sim.scenario().transport;
        Self {
            sim,
            telemetry,
            overhead: (t.mtu_bytes + t.header_bytes) as f64 / t.mtu_bytes.max(1) as f64,
        }
    }

    /// Bytes per second left on the link leaving `p` by the last interval's other traffic.
    pub fn available_bps(&self, p: PortId) -> f64 {
        let Some(t) = self.telemetry.ports.get(p.index()) else {
            return 0.0;
        };
        if t.down {
            return t.rate_bps as f64 * MIN_AVAILABLE / 8.0;
        }
        let paused = if self.telemetry.interval_ps > 0 {
            t.paused_ps as f64 / self.telemetry.interval_ps as f64
        } else {
            0.0
        };
        let busy = t.utilisation.max(paused).min(1.0);
        t.rate_bps as f64 / 8.0 * (1.0 - busy).max(MIN_AVAILABLE)
    }

    /// Seconds to drain the bytes queued at `p` at the boundary.
    pub fn queue_delay_s(&self, p: PortId) -> f64 {
        let Some(t) = self.telemetry.ports.get(p.index()) else {
            return 0.0;
        };
        if t.rate_bps == 0 {
            return 0.0;
        }
        t.queue_bytes as f64 * 8.0 / t.rate_bps as f64
    }

    /// The predicted time (seconds) of `transfers` on the ranks `hosts`: a list schedule over
    /// the links (see the module docs).
    pub fn schedule(&self, transfers: &[collective::Transfer], hosts: &[u32]) -> f64 {
        let w = self.sim.world();
        let n = w.fabric.num_ports() as usize;
        let mut link_free = vec![0.0f64; n];
        let mut arrive = vec![0.0f64; transfers.len()];
        let mut paths: std::collections::HashMap<(u32, u32), Vec<PortId>> =
            std::collections::HashMap::new();
        let mut end = 0.0f64;
        for (k, t) in transfers.iter().enumerate() {
            let ready = t
                .inputs
                .iter()
                .map(|&i| arrive[i as usize])
                .fold(0.0, f64::max)
                + t.delay as f64 * 1e-12;
            let (src, dst) = (hosts[t.src as usize], hosts[t.dst as usize]);
            let path = paths
                .entry((src, dst))
                .or_insert_with(|| w.endpoint_path(NodeId::new(src), NodeId::new(dst)));
            let bytes = t.bytes as f64 * self.overhead;
            let mut done = ready;
            let mut latency = 0.0;
            for &p in path.iter() {
                let begin = ready.max(link_free[p.index()]);
                let finish = begin + bytes / self.available_bps(p).max(1.0);
                link_free[p.index()] = finish;
                done = done.max(finish);
                latency += w.port_delay(p) as f64 * 1e-12 + self.queue_delay_s(p);
            }
            arrive[k] = done + latency;
            end = end.max(arrive[k]);
        }
        end
    }
}

/// The algorithms the policy weighs for a call of `spec` with `n` ranks.
pub fn candidates(spec: &CollectiveSpec, n: usize) -> Vec<CollectiveAlgorithm> {
    collective::algorithms(spec.op)
        .iter()
        .copied()
        .filter(|&a| super::calls::choosable(spec, a, n).is_ok())
        .collect()
}

/// The predicted time (seconds) of one call of `spec` (workload `workload`) on `hosts` with
/// `algorithm`, or None if the policy has no model of it or cannot run it now (in-network: no
/// reduction engines, or no tree with free contexts). One arm per algorithm.
pub fn predicted_time(
    model: &LinkModel<'_>,
    workload: u32,
    spec: &CollectiveSpec,
    hosts: &[u32],
    algorithm: CollectiveAlgorithm,
) -> Option<f64> {
    let mut s = spec.clone();
    s.algorithm = algorithm;
    let dom = collective::group_domains(&s, hosts);
    match algorithm {
        CollectiveAlgorithm::Ring
        | CollectiveAlgorithm::Tree
        | CollectiveAlgorithm::HalvingDoubling
        | CollectiveAlgorithm::Direct
        | CollectiveAlgorithm::Pairwise => {
            Some(model.schedule(&collective::transfers(&s, &dom), hosts))
        }
        CollectiveAlgorithm::InNetwork | CollectiveAlgorithm::Nvls => {
            let inr = model.sim.workload_plan().in_network.as_deref()?;
            let tree = inr.live_tree(workload, hosts, algorithm)?;
            Some(model.in_network(&tree, spec.size_bytes))
        }
        _ => None,
    }
}

impl LinkModel<'_> {
    /// The predicted time (seconds) of an in-network call of `size` bytes on `tree`: every
    /// rank's S goes up and the result's S comes down every tree link at once (pipelined), so
    /// the call takes the slowest link's `wire bytes / available bandwidth` (or the busiest
    /// engine's `children x S / throughput`), plus the deepest rank's round trip: per link up
    /// and down, its latency, its queue's drain time and one packet's serialisation.
    pub fn in_network(&self, tree: &collective::in_network::Tree, size: u64) -> f64 {
        let w = self.sim.world();
        let f = &w.fabric;
        let t = &self.sim.scenario().transport;
        let bytes = size as f64 * self.overhead;
        let packet = (t.mtu_bytes.min(size) + t.header_bytes) as f64;
        let hop = |p: PortId| {
            w.port_delay(p) as f64 * 1e-12
                + self.queue_delay_s(p)
                + packet * 8.0 / (f.rate_bps[p] as f64).max(1.0)
        };
        let index: std::collections::HashMap<NodeId, usize> = tree
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.switch, i))
            .collect();
        let mut slowest = 0.0f64;
        let mut round_trip = 0.0f64;
        for n in &tree.nodes {
            let engine =
                n.children.len() as f64 * size as f64 * 8.0 / n.throughput_bps.max(1) as f64;
            slowest = slowest.max(engine);
            for c in &n.children {
                for p in [c.up, c.down] {
                    slowest = slowest.max(bytes / self.available_bps(p).max(1.0));
                }
                if c.rank.is_none() {
                    continue;
                }
                let mut rt = hop(c.up) + hop(c.down);
                let mut at = n;
                while let Some(up) = at.parent {
                    rt += hop(up) + hop(f.peer_port[up]);
                    match index.get(&f.peer_node[up]) {
                        Some(&i) => at = &tree.nodes[i],
                        None => break,
                    }
                }
                round_trip = round_trip.max(rt);
            }
        }
        slowest + round_trip
    }
}

/// The policy at one boundary: the actions it takes (one `set_algorithm` per collective whose
/// next call it decides to change), each with the predictions it was chosen by
/// ("ring 812.0us, tree 640.5us").
pub fn decide(sim: &Simulation, telemetry: &Telemetry, interval_ps: Time) -> Vec<(Action, String)> {
    let mut actions = Vec::new();
    if telemetry.interval_ps < interval_ps {
        return actions; // the first boundary: nothing measured yet
    }
    let Some(control) = sim.control() else {
        return actions;
    };
    let model = LinkModel::new(sim, telemetry);
    let w = sim.world();
    let plan = sim.workload_plan();
    let idle_since = telemetry.time_ps - interval_ps;
    for (ci, calls) in control.calls.by_instance.iter().enumerate() {
        let Some(calls) = calls else { continue };
        let Some(k) = calls
            .iter()
            .position(|c| c.flows.iter().all(|&f| !w.flows[f].started))
        else {
            continue;
        };
        // Idle over the whole last interval: every earlier call finished by its start.
        let idle = calls[..k].iter().all(|c| {
            c.flows
                .iter()
                .all(|&f| w.flows[f].finished() && w.flows[f].finish <= idle_since)
        });
        if !idle {
            continue;
        }
        let inst = &plan.collectives[ci];
        let WorkloadSpec::Collective(spec) = &sim.scenario().workloads[inst.workload as usize].spec
        else {
            continue;
        };
        let mut best: Option<(CollectiveAlgorithm, f64)> = None;
        let mut predicted = Vec::new();
        for a in candidates(spec, inst.hosts.len()) {
            if let Some(t) = predicted_time(&model, inst.workload, spec, &inst.hosts, a) {
                predicted.push(format!("{} {:.1}us", a.name(), t * 1e6));
                if best.is_none_or(|(_, b)| t < b) {
                    best = Some((a, t));
                }
            }
        }
        if let Some((a, _)) = best {
            if a != calls[k].algorithm {
                actions.push((
                    Action::SetAlgorithm {
                        collective: ci as u32,
                        algorithm: a,
                    },
                    format!("predicted {}", predicted.join(", ")),
                ));
            }
        }
    }
    actions
}
