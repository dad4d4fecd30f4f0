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
//! available bandwidth is `rate / (1 + background)` (a new flow's FIFO share) and `background`
//! the link's utilisation or paused fraction (the larger) over the last interval; it arrives
//! after its slowest link's end, plus the links' latency and the time to drain the bytes queued at each
//! link at the boundary. The call's predicted time is the last arrival. Transfers sharing a link
//! serialise on it, so the model sees an algorithm's own contention (a tree's parent receiving
//! from two children) as well as the background's.
//!
//! **In-network** (`in_network`, `nvls`; all-reduce): a candidate only when the scenario has
//! reduction engines and the group's communicator has its tree or one can be placed now on
//! switches with free contexts ([`LinkModel::in_network`]): every tree link carries S up and S
//! down at once, so the call takes its slowest link's (or busiest engine's) time for S plus the
//! deepest rank's round trip through the tree. Under DCQCN a rank whose tree links mark (now,
//! as soon as its flow adds to them, or within the cost of a cut) takes at least
//! [`dcqcn_cut_time`]: its one flow per call is cut to the minimum rate and regains rate only by
//! DCQCN's slow increase, and the tree runs at its slowest rank's pace (docs/control.md, "The
//! congestion control's cuts"). Choosing it places the tree: its contexts are
//! held for the rest of the run, as when the scenario sets it.
//!
//! **Candidates.** [`candidates`] lists the flat and in-network algorithms of the operation that
//! may be chosen live; [`predicted_time`] has one arm per algorithm (the place to add another
//! algorithm's own predictor).

use crate::cc::dcqcn::Dcqcn;
use crate::config::{
    CollectiveAlgorithm, CollectiveSpec, CongestionControl, DcqcnSpec, WorkloadSpec,
};
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

    /// Bytes per second a new flow gets on the link leaving `p`: `rate / (1 + background)`,
    /// `background` the link's utilisation or paused fraction (the larger) over the last
    /// interval. A new flow offers its line rate and a FIFO serves it in proportion to what it
    /// offers against the background's arrivals (at least the link's rate when it is busy):
    /// half a saturated link, all of an idle one. (A down link: `MIN_AVAILABLE` of its rate.)
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
        t.rate_bps as f64 / 8.0 / (1.0 + busy)
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
    /// Whether the congestion control will see congestion on the link leaving `p`: it marked
    /// packets (ECN) over the last interval, or its queue is at or above the marking threshold
    /// (`switch.ecn.kmin`) at the boundary.
    pub fn marked(&self, p: PortId) -> bool {
        let Some(t) = self.telemetry.ports.get(p.index()) else {
            return false;
        };
        let kmin = self.sim.scenario().switch.ecn.map(|e| e.kmin_bytes);
        t.ecn_marks > 0 || kmin.is_some_and(|k| t.queue_bytes >= k.max(1))
    }

    /// Bits per second of other traffic the link leaving `p` carried over the last interval
    /// (its utilisation or paused fraction, the larger, times its rate).
    pub fn background_bps(&self, p: PortId) -> f64 {
        let Some(t) = self.telemetry.ports.get(p.index()) else {
            return 0.0;
        };
        let paused = if self.telemetry.interval_ps > 0 {
            t.paused_ps as f64 / self.telemetry.interval_ps as f64
        } else {
            0.0
        };
        t.rate_bps as f64 * t.utilisation.max(paused).min(1.0)
    }

    /// When a flow from a NIC of `line_bps` starting now across the link leaving `p` would get
    /// its first ECN mark (None: never, as far as the last interval shows): after the queue
    /// ahead of it if the link is [`LinkModel::marked`]; else, if the flow and the background
    /// together offer more than the link's rate, once the excess has filled the queue to
    /// `switch.ecn.kmin`; else never. (Marking on dequeue: a packet is marked when it leaves.)
    pub fn first_mark_s(&self, p: PortId, line_bps: u64, horizon_s: f64) -> Option<f64> {
        let ecn = self.sim.scenario().switch.ecn?;
        let t = self.telemetry.ports.get(p.index())?;
        let queue = self.queue_delay_s(p);
        if self.marked_within(p, horizon_s) {
            return Some(queue);
        }
        let excess = self.excess_bps(p, line_bps);
        (excess > 0.0).then(|| {
            let fill = ecn.kmin_bytes.saturating_sub(t.queue_bytes) as f64 * 8.0 / excess;
            fill + queue
        })
    }

    /// Bits per second by which a flow from a NIC of `line_bps` and the link's background
    /// together exceed the rate of the link leaving `p` (negative: they fit).
    pub fn excess_bps(&self, p: PortId, line_bps: u64) -> f64 {
        let rate = self
            .telemetry
            .ports
            .get(p.index())
            .map_or(0, |t| t.rate_bps);
        line_bps as f64 + self.background_bps(p) - rate as f64
    }

    /// Whether a flow from a NIC of `line_bps` and the background would overflow the link
    /// leaving `p` (a queue builds at once).
    pub fn overflows(&self, p: PortId, line_bps: u64) -> bool {
        self.excess_bps(p, line_bps) > 0.0
    }

    /// Under DCQCN, the seconds a flow from a NIC of `line_bps` needs for `bytes` (wire) over
    /// `ports` when one of them will mark it ([`LinkModel::first_mark_s`]):
    /// [`dcqcn_cut_time`] at the link that marks it first (of those, the one with the most
    /// background), its first CNP at that mark. None when the congestion control is not DCQCN or no link will
    /// mark the flow.
    pub fn cut_time(
        &self,
        ports: &[PortId],
        line_bps: u64,
        bytes: f64,
        horizon_s: f64,
    ) -> Option<f64> {
        let CongestionControl::Dcqcn(spec) = self.sim.world().live_transport().cc else {
            return None;
        };
        let w = self.sim.world();
        let (p, first) = ports
            .iter()
            .filter_map(|&p| Some((p, self.first_mark_s(p, line_bps, horizon_s)?)))
            .min_by(|a, b| {
                a.1.total_cmp(&b.1).then(
                    self.background_bps(b.0)
                        .total_cmp(&self.background_bps(a.0)),
                )
            })?;
        Some(dcqcn_cut_time(
            &spec,
            line_bps,
            bytes * 8.0,
            w.fabric.rate_bps[p] as f64,
            self.background_bps(p),
            (first * 1e12) as Time,
        ))
    }

    /// Whether the link leaving `p` is [`LinkModel::marked`] now or marked packets in an
    /// interval that ended less than `horizon_s` ago (the control loop's memory of marks).
    pub fn marked_within(&self, p: PortId, horizon_s: f64) -> bool {
        if self.marked(p) {
            return true;
        }
        let last = self
            .sim
            .control()
            .and_then(|c| c.last_marked_ps.get(p.index()).copied().flatten());
        last.is_some_and(|t| {
            ((self.telemetry.time_ps.saturating_sub(t)) as f64) * 1e-12 < horizon_s
        })
    }

    /// The predicted time (seconds) of an in-network call of `size` bytes on `tree`.
    ///
    /// Every rank's S goes up and the result's S comes down every tree link at once
    /// (pipelined), so the call takes the slowest link's `wire bytes / available bandwidth` (or
    /// the busiest engine's `children x S / throughput`), plus the deepest rank's round trip:
    /// per link up and down, its latency, its queue's drain time and one packet's serialisation.
    ///
    /// A rank's call is ONE flow (it sends S and receives the result of each packet), and the
    /// tree runs at its slowest rank's pace (a rank sends at most a window beyond its last
    /// result). Under DCQCN a rank whose round trip through the tree crosses a marked link
    /// ([`LinkModel::marked`]) has that flow cut by the CNPs the marks bring and regains rate only
    /// by DCQCN's own increase: its time is [`dcqcn_cut_time`] (the cuts down to the minimum
    /// rate, then the recovery), and the call takes at least the slowest such rank's.
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
        let mut rank_ports: Vec<(Vec<PortId>, u64)> = Vec::new();
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
                // The rank's round trip: its own link both ways, then each tree link above.
                let mut ports = vec![c.up, c.down];
                let mut at = n;
                while let Some(up) = at.parent {
                    ports.extend([up, f.peer_port[up]]);
                    match index.get(&f.peer_node[up]) {
                        Some(&i) => at = &tree.nodes[i],
                        None => break,
                    }
                }
                round_trip = round_trip.max(ports.iter().map(|&p| hop(p)).sum::<f64>());
                rank_ports.push((ports, f.rate_bps[c.up]));
            }
        }
        // The congestion control's cuts: a rank whose round trip crosses a link that marks now
        // or will as soon as the rank's flow adds to it, or that marked within as long as the
        // cuts would cost (a background quiet for less than that may return during the call,
        // and a cut outlasts it).
        let mut cut = 0.0f64;
        for (ports, line) in &rank_ports {
            if let Some(t) = self.cut_time(ports, *line, bytes, f64::INFINITY) {
                if ports
                    .iter()
                    .any(|&p| self.marked_within(p, t) || self.overflows(p, *line))
                {
                    cut = cut.max(t);
                }
            }
        }
        slowest.max(cut) + round_trip
    }
}

/// Seconds a DCQCN flow of `line_bps` needs to send `bits` across a marked link of `link_bps`
/// that `background_bps` of other traffic arrives at. The flow starts at line rate; the first
/// CNP reaches it at `first_cnp_ps` (its first packet's wait in the marked queue), then one every
/// `max(cnp_interval, rate_decrease_interval, 1 us)` (the notification point's limit), each
/// cutting its rate, until the rate is at `min_rate`. Meanwhile the marked FIFO serves it in
/// proportion to what it offers: `Rc x min(1, link / (Rc + background))`. Then no more CNPs (the
/// congestion assumed over), and its rate grows by DCQCN's own increase (the reaction point's
/// timer and byte-counter stages: fast recovery, additive, hyper) toward line rate. The rate is
/// integrated between the reaction point's events ([`crate::cc::dcqcn::Dcqcn`], the engine's
/// own state machine). A short transfer ends before the cuts bite (it takes its FIFO share); a
/// long one pays the cuts and the slow recovery: a lower bound on its time while the
/// congestion lasts longer than the cuts.
pub fn dcqcn_cut_time(
    spec: &DcqcnSpec,
    line_bps: u64,
    bits: f64,
    link_bps: f64,
    background_bps: f64,
    first_cnp_ps: Time,
) -> f64 {
    const PS: f64 = 1e-12;
    let mut s = Dcqcn::new(spec, line_bps, 0);
    let cnp_every = spec
        .cnp_interval_ps
        .max(spec.rate_decrease_interval_ps)
        .max(1_000_000);
    let mut now: Time = 0;
    let mut sent = 0.0f64;
    // The increase timer is armed (it fires at `s.next_increase`).
    let mut armed = false;
    let mut next_cnp: Option<Time> = Some(first_cnp_ps);
    let mut cuts = 0u32;
    // Every event of the reaction point until the flow has sent `bits` (bounded: a flow with no
    // increase left finishes at its rate after the loop).
    for _ in 0..1_000_000 {
        let rc = s.rc as f64;
        let rate = if next_cnp.is_some() {
            rc * (link_bps / (rc + background_bps).max(1.0)).min(1.0)
        } else {
            rc
        }
        .min(line_bps as f64)
        .max(1.0);
        let timer = armed.then_some(s.next_increase);
        let next = match (next_cnp, timer) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) => a,
            (None, Some(b)) => b,
            (None, None) => break,
        };
        let dt = next.saturating_sub(now) as f64 * PS;
        if sent + rate * dt >= bits {
            return now as f64 * PS + (bits - sent) / rate;
        }
        sent += rate * dt;
        // The byte counter's stages (its rate change applies from the next event on).
        s.on_sent(spec, (rate * dt / 8.0) as u64);
        now = next;
        if next_cnp == Some(now) {
            let r = s.on_cnp(spec, now);
            armed |= r.timer_at.is_some();
            if r.decrease_check_at.is_some() {
                // Mellanox: the cut happens at the gated check (taken at once here).
                armed |= s.on_decrease_check(spec, now).timer_at.is_some();
            }
            cuts += 1;
            next_cnp = (s.rc > spec.min_rate_bps && cuts < 64).then_some(now + cnp_every);
        }
        if armed && s.next_increase == now {
            armed = s.on_timer(spec, now).timer_at.is_some();
        }
    }
    let rate = (s.rc as f64).max(1.0);
    now as f64 * PS + (bits - sent).max(0.0) / rate
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
        // Idle over the whole last interval: every earlier call finished by its start (latest
        // calls first: a call under way fails at once instead of after every older call's flows).
        let idle = calls[..k].iter().rev().all(|c| {
            (c.flows.iter().rev())
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
