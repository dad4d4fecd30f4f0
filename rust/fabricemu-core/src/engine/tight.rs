//! Barriers that release too soon for the parallel engine's windows: counted by every partition
//! (their flows finish in several), and starting something sooner than the lookahead after their
//! last arrival (a collective's iterations back to back, incast rounds or step-graph ops without
//! a gap). The other partitions would hear of the last arrival only at the window's end, too
//! late; a window in which one may release runs merged instead (`parallel::run_merged`).
//!
//! Which windows: one with such a barrier whose flows have all started somewhere (the
//! *frontier*: every partition tells the others of the starts it saw, at window ends) and which
//! cannot be ruled out from what its receivers have left to receive. A flow that has not started
//! cannot finish within the next window: from its start its last packet crosses at least one
//! link (with windows longer than the shortest link, those are no longer than the quickest flow
//! of a barrier still waiting takes: [`Tight::reach`]). One still missing `n` packets at its
//! receiver needs at least `n - 2` full packets' time on its receiver's links (the first may
//! have been on its way since before, the last may be short). Each partition posts, for each
//! frontier barrier, the soonest its own flows allow (an offset from the next event anywhere:
//! nothing happens before it); the barrier's bound is the latest over the partitions.

use crate::ids::{FlowId, IdVec, NodeId, PortId};
use crate::topology::Fabric;
use crate::transport::NEVER;
use crate::units::Time;
use crate::workload::{FlowPlan, Start};

use super::flows::FlowTable;
use super::world::{Barrier, PortHot};

/// No tight barrier.
const NONE: u32 = u32::MAX;

/// The barriers of `plan` every partition counts (`home` is `parallel::MIRRORED`, here
/// `mirrored`) that flows finishing count toward and whose release starts something (a flow or
/// a chained arrival) sooner than `window` after it, each with the flows it counts. Also, at
/// any delay, the ops' barriers of jobs that react to failures: their releases change the job's
/// state (progress, checkpoints, pauses), which every partition must see in one world's order;
/// and those whose release may start an in-network call (`parallel::in_network_feeders`).
pub fn tight_barriers(
    plan: &FlowPlan,
    home: &[u16],
    mirrored: u16,
    window: Time,
) -> Vec<(u32, Vec<FlowId>)> {
    let mut counted: Vec<Vec<FlowId>> = vec![Vec::new(); home.len()];
    let mut soonest = vec![Time::MAX; home.len()];
    for (i, f) in plan.flows.iter().enumerate() {
        if let Some(b) = f.completes {
            counted[b as usize].push(FlowId::new(i as u32));
        }
        if let Start::After { barrier, gap } = f.start {
            let s = &mut soonest[barrier as usize];
            *s = (*s).min(gap);
        }
    }
    for e in &plan.barrier_edges {
        let s = &mut soonest[e.from as usize];
        *s = (*s).min(e.delay);
    }
    for j in &plan.jobs {
        soonest[j.op_barriers()].fill(0);
    }
    // A release that may start an in-network call changes what every partition keeps alike.
    for (s, feeds) in soonest
        .iter_mut()
        .zip(super::parallel::in_network_feeders(plan))
    {
        if feeds {
            *s = 0;
        }
    }
    (counted.into_iter().enumerate())
        .filter(|(b, flows)| home[*b] == mirrored && !flows.is_empty() && soonest[*b] < window)
        .map(|(b, flows)| (b as u32, flows))
        .collect()
}

/// A flow that finishes here, with its receiver's time for one full packet (None: sent to
/// itself, nothing to tell) and its packets (all missing while it has no record here).
type Received = (FlowId, Option<Time>, u32);

/// What a partition's [`Tight`] is worked out from: which partition it is, the node map, the
/// flows' records (their ends) and the fabric with the MTU (a full packet's time at a host).
#[derive(Clone, Copy)]
pub(super) struct Where<'a> {
    pub me: u16,
    pub owner: &'a IdVec<NodeId, u16>,
    pub flows: &'a FlowTable,
    pub fabric: &'a Fabric,
    pub mtu: u64,
    /// A packet's header bytes, and the in-network calls (a rank's flow of one is sent to
    /// itself, but through the switches: its results come in over its links).
    pub header: u64,
    pub in_network: Option<&'a super::in_network::InNetwork>,
    /// The shortest delay of a link between two partitions (`Parallel::lookahead`).
    pub cut: Time,
    /// Per port, when a packet sent on it arrives at the far node: the link's delay plus the
    /// far switch's forwarding latency (`PortHot::arrival_delay`).
    pub ports: &'a IdVec<PortId, PortHot>,
    /// The plan of the flows without a record here (a partition whose records are lazy).
    pub maker: Option<&'a super::world::FlowMaker>,
}

impl Where<'_> {
    /// Flow `fid`'s sender, receiver and packets: from its record, or its plan if it has none
    /// here yet (None: the partition forgot it, it finished).
    fn ends(&self, fid: FlowId) -> Option<(NodeId, NodeId, u32)> {
        if let Some(f) = self.flows.get(fid) {
            return Some((f.src, f.dst, f.num_packets));
        }
        let m = self.maker.filter(|_| self.flows.is_unborn(fid))?;
        let init = m.init(fid);
        let (packets, _) = crate::transport::segment(init.size_bytes, self.mtu);
        Some((init.src, init.dst, packets))
    }

    /// The barrier flow `fid` counts toward: from its record, or its plan.
    fn completes(&self, fid: FlowId) -> Option<u32> {
        super::flows::completes_of(self.flows, self.maker, fid)
    }
}

/// One partition's view of the tight barriers (indexed as [`tight_barriers`] lists them).
#[derive(Debug, Default)]
pub(super) struct Tight {
    /// Per tight barrier: its id, and the flows counted toward it that finish here.
    barriers: Vec<(u32, Vec<Received>)>,
    /// Per flow id, for flows that start here: the tight barrier it counts toward (or NONE).
    counts_toward: IdVec<FlowId, u32>,
    /// Per tight barrier: its flows not yet started anywhere, as of the last window's mail.
    unstarted: Vec<u32>,
    /// The tight barriers whose flows all started and which have not released.
    frontier: Vec<u32>,
    /// The tight barriers of the flows that started here in this window, for the others.
    pub started: Vec<u32>,
    /// Per tight barrier: the soonest one of its flows can finish after it starts
    /// ([`Tight::reach`]) ...
    soonest: Vec<Time>,
    /// ... the tight barriers by it, and the first of them still waiting for a flow to start
    /// (barriers only stop waiting, but at an amendment, which sorts them anew).
    by_soonest: Vec<u32>,
    head: usize,
}

impl Tight {
    /// Partition `at.me`'s view of `tight` (from [`tight_barriers`]) under the node map
    /// `at.owner`.
    pub fn new(tight: &[(u32, Vec<FlowId>)], at: &Where) -> Self {
        let mut t = Self::default();
        if tight.is_empty() {
            return t;
        }
        t.counts_toward = IdVec::from_elem(NONE, at.flows.len());
        for (b, fids) in tight {
            t.track(*b, fids, at, |_| Some(false));
        }
        t.sort_by_soonest();
        t
    }

    /// Order the barriers by their soonest (for [`Tight::reach`]), from the first.
    fn sort_by_soonest(&mut self) {
        self.by_soonest = (0..self.barriers.len() as u32).collect();
        let soonest = &self.soonest;
        self.by_soonest.sort_by_key(|&i| (soonest[i as usize], i));
        self.head = 0;
    }

    /// How long after the next event (anywhere) the tight barriers still waiting for a flow to
    /// start (outside the frontier) cannot release: none of their flows can finish sooner
    /// should it start at once (NEVER: none waits). The parallel engine's long windows are no
    /// longer (`Parallel::lookahead`).
    pub fn reach(&mut self) -> Time {
        while let Some(&i) = self.by_soonest.get(self.head) {
            if self.unstarted[i as usize] > 0 {
                return self.soonest[i as usize];
            }
            self.head += 1;
        }
        NEVER
    }

    /// Track tight barrier `b` (the next index), counted by `fids`; `status` says of each
    /// whether it started somewhere (not waited for), or None if it was cancelled (left out).
    fn track(
        &mut self,
        b: u32,
        fids: &[FlowId],
        at: &Where,
        status: impl Fn(FlowId) -> Option<bool>,
    ) {
        let i = self.barriers.len() as u32;
        self.barriers.push((b, Vec::new()));
        self.unstarted.push(0);
        self.soonest.push(NEVER);
        for &fid in fids {
            if let Some(started) = status(fid) {
                self.add_flow(i, fid, at, started);
            }
        }
        if self.unstarted[i as usize] == 0 {
            self.frontier.push(i);
        }
    }

    /// Flow `fid` counts toward tight barrier `i` (`gone`: it started somewhere already).
    fn add_flow(&mut self, i: u32, fid: FlowId, at: &Where, gone: bool) {
        let Where {
            me,
            owner,
            fabric,
            mtu,
            header,
            in_network,
            cut,
            ports,
            ..
        } = *at;
        // A flow a partition forgot finished (the view retired it before an amendment made every
        // record kept): it waits neither to start nor to finish.
        let Some((src, dst, num_packets)) = at.ends(fid) else {
            return;
        };
        // An in-network rank's flow goes up its tree and its results come down: the smallest
        // result packet is its full packet here.
        let result = in_network.and_then(|i| i.result_bytes(fid, mtu, header));
        let to_itself = src == dst && result.is_none();
        // The most bits the receiver's links bring in per second: a full packet takes at least
        // its payload's time at that rate.
        let outside = result.is_none() && from_outside(fabric, src, dst);
        let into = inbound_rate_from(fabric, dst, outside);
        let packet = crate::units::serialisation_ps(result.unwrap_or(mtu), into.max(1));
        if !to_itself && !gone {
            self.unstarted[i as usize] += 1;
            if owner[src] == me {
                self.counts_toward[fid] = i;
            }
        }
        if !to_itself {
            // Started at once, its first packet crosses its sender's link, the far switch, and
            // its receiver's link (one link if they are linked: the least of the two), or more:
            // one between partitions, if it crosses; the rest come in at most at the receiver's
            // rate; the last two count for nothing, as in `Tight::offset`.
            let out = (fabric.ports_of(src))
                .map(|p| ports[p].arrival_delay)
                .min()
                .unwrap_or(0);
            let last = (fabric.ports_of(dst))
                .map(|p| ports[fabric.peer_port[p]].arrival_delay)
                .min()
                .unwrap_or(0);
            let linked = (fabric.ports_of(src)).any(|p| fabric.peer_node[p] == dst);
            let mut path = if linked {
                out.min(last)
            } else {
                out.saturating_add(last)
            };
            if owner[src] != owner[dst] {
                path = path.max(cut);
            }
            let rest = (num_packets as u64).saturating_sub(2);
            let soonest = path.saturating_add(rest.saturating_mul(packet));
            let s = &mut self.soonest[i as usize];
            *s = (*s).min(soonest);
        }
        if owner[dst] == me {
            self.barriers[i as usize]
                .1
                .push((fid, (!to_itself).then_some(packet), num_packets));
        }
    }

    /// A plan amendment (at a window's end, every partition alike) appended the flows from
    /// `first` on and cancelled `cancelled` (none of which started), and `tight` is
    /// [`tight_barriers`] of the amended plan. A barrier tight already counts its appended flows
    /// and no longer waits for the cancelled ones; a barrier tight now (a new one, or an old
    /// one that an appended flow leaves sooner than the window) is tracked from now, waiting
    /// for its flows that have not started anywhere (`status`, as [`Tight::track`] takes it).
    pub fn amend(
        &mut self,
        tight: &[(u32, Vec<FlowId>)],
        first: FlowId,
        cancelled: &[FlowId],
        at: &Where,
        status: impl Fn(FlowId) -> Option<bool>,
    ) {
        let flows = at.flows;
        self.counts_toward.resize(flows.len(), NONE);
        let index: std::collections::HashMap<u32, u32> = (self.barriers.iter().enumerate())
            .map(|(i, &(b, _))| (b, i as u32))
            .collect();
        for &fid in cancelled {
            let Some(&i) = at.completes(fid).and_then(|b| index.get(&b)) else {
                continue;
            };
            let Some((src, dst, _)) = at.ends(fid) else {
                continue; // (a cancelled flow never started: not forgotten)
            };
            self.counts_toward[fid] = NONE;
            self.barriers[i as usize].1.retain(|&(g, _, _)| g != fid);
            if src != dst {
                self.count_start(i); // it never will: no longer waited for
            }
        }
        for (b, fids) in tight {
            let Some(&i) = index.get(b) else {
                self.track(*b, fids, at, &status);
                continue;
            };
            let was = self.unstarted[i as usize];
            for &fid in fids.iter().filter(|&&f| f >= first) {
                self.add_flow(i, fid, at, false);
            }
            if was == 0 && self.unstarted[i as usize] > 0 {
                self.frontier.retain(|&j| j != i);
            }
        }
        // (Barriers may wait again, and new ones were tracked.)
        self.sort_by_soonest();
    }

    /// Whether barrier `b` is tracked as tight.
    pub fn tracks(&self, b: u32) -> bool {
        self.barriers.iter().any(|&(x, _)| x == b)
    }

    /// How many tight barriers the run has (the same in every partition).
    pub fn len(&self) -> usize {
        self.barriers.len()
    }

    /// Flow `fid` started here.
    #[inline]
    pub fn flow_started(&mut self, fid: FlowId) {
        if let Some(&i) = self.counts_toward.get(fid) {
            if i != NONE {
                self.started.push(i);
                self.count_start(i);
            }
        }
    }

    /// A flow of tight barrier `i` started (here, or in another partition, told at a window's
    /// end).
    pub fn count_start(&mut self, i: u32) {
        let left = &mut self.unstarted[i as usize];
        *left -= 1;
        if *left == 0 {
            self.frontier.push(i);
        }
    }

    /// Drop from the frontier the barriers that released or died, and those whose release a
    /// job's freeze deferred (`held`: each partition releases them at the freeze's end by an
    /// arrival of its own, whatever their flows do; every partition deferred them at the same
    /// point, as their last arrival came in a window run merged).
    pub fn prune(&mut self, barriers: &[Barrier], held: impl Fn(u32) -> bool) {
        let list = &self.barriers;
        self.frontier.retain(|&i| {
            let id = list[i as usize].0;
            let b = &barriers[id as usize];
            b.released_at == NEVER && !b.dead && !held(id)
        });
    }

    /// The frontier (the same set in every partition once the window's mail is in and
    /// [`Tight::prune`] ran).
    pub fn frontier(&self) -> &[u32] {
        &self.frontier
    }

    /// A digest of the frontier's set (not its order), for the partitions to check they agree.
    pub fn digest(&self) -> u64 {
        (self.frontier.iter()).fold(self.frontier.len() as u64, |d, &i| {
            d.wrapping_add((i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15))
        })
    }

    /// For frontier barrier `i`, the soonest its flows finishing here allow it to release, as
    /// an offset from when the next event runs (anywhere), with every event before it run: 0
    /// when they cannot tell, at most `enough` (an offset that already rules the next window
    /// out ends the scan). Flows that finished leave the list (a finished flow stays so), and
    /// so do those an elastic job withdrew (their arrival was taken when it did).
    pub fn offset(&mut self, i: u32, flows: &FlowTable, enough: Time) -> Time {
        let list = &mut self.barriers[i as usize].1;
        let mut at = 0;
        let mut k = 0;
        while k < list.len() {
            let (fid, packet_ps, packets) = list[k];
            // (No record here yet: no packet of it came in.)
            let missing = match flows.get(fid) {
                Some(f) if f.finished() || f.withdrawn => None,
                Some(f) => Some(packets_missing(f)),
                None => flows.is_unborn(fid).then_some(packets as u64),
            };
            let Some(missing) = missing else {
                list.swap_remove(k);
                continue;
            };
            k += 1;
            let Some(packet_ps) = packet_ps else {
                return 0;
            };
            at = at.max(missing.saturating_sub(2).saturating_mul(packet_ps));
            if at >= enough {
                return enough;
            }
        }
        at
    }
}

/// The most bits `host`'s links bring in per second: a packet of `b` bytes takes at least
/// `b` bytes' time at that rate.
pub(super) fn inbound_rate(fabric: &Fabric, host: NodeId) -> crate::units::Rate {
    inbound_rate_from(fabric, host, false)
}

/// The same for data from outside `host`'s scale-up domain (`outside`, [`from_outside`]):
/// none of it comes in on its scale-up link.
pub(super) fn inbound_rate_from(
    fabric: &Fabric,
    host: NodeId,
    outside: bool,
) -> crate::units::Rate {
    let skip = (fabric.cluster.as_deref())
        .filter(|_| outside)
        .and_then(|c| c.scaleup_port(host));
    (fabric.ports_of(host))
        .filter(|&p| Some(p) != skip)
        .map(|p| fabric.rate_bps[fabric.peer_port[p]])
        .sum()
}

/// Whether data from host `src` reaches GPU `dst` from outside `dst`'s scale-up domain: a
/// scale-up switch links only its domain's GPUs, and a PXN transfer crosses the sender's
/// domain, not the receiver's, so such data comes in on a NIC link.
#[inline]
pub(super) fn from_outside(fabric: &Fabric, src: NodeId, dst: NodeId) -> bool {
    fabric.cluster.as_deref().is_some_and(|c| {
        let gpu = |n: NodeId| n.get() < c.gpus;
        c.domains > 0 && gpu(dst) && (!gpu(src) || c.domain(src) != c.domain(dst))
    })
}

/// The packets flow `f` still misses at its receiver (in order or ahead of a gap).
pub(super) fn packets_missing(f: &crate::transport::Flow) -> u64 {
    let ahead: u32 = f.received_ahead.iter().map(|w| w.count_ones()).sum();
    (f.num_packets as u64).saturating_sub(f.expected as u64 + ahead as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Simulation, StepOutcome};

    /// `w` as the one partition of `owner` (every node partition 0's).
    fn whole<'a>(w: &'a crate::engine::World, owner: &'a IdVec<NodeId, u16>) -> Where<'a> {
        Where {
            me: 0,
            owner,
            flows: &w.flows,
            fabric: &w.fabric,
            mtu: w.transport.mtu as u64,
            header: w.transport.header as u64,
            in_network: None,
            ports: &w.ports,
            cut: 0,
            maker: None,
        }
    }

    /// An amendment (a controller re-planning a call) cancels flows a tight barrier waited for
    /// and appends others: the barrier stops waiting for the cancelled ones (else it would never
    /// join the frontier, and its windows would not run merged), waits for the appended ones
    /// (leaving the frontier), and a barrier tight from now waits only for its flows that have
    /// not started anywhere.
    #[test]
    fn an_amendment_updates_what_tight_barriers_wait_for() {
        let text = "seed = 1\n[topology]\nkind = \"fat_tree\"\nk = 4\n[[workload]]\n\
                    kind = \"incast\"\nreceiver = 0\nsenders = [1, 2, 3]\nsize = \"10KB\"\n\
                    rounds = 3\n";
        let (_, s) = crate::scenario::parse_toml(text, "t.toml").expect("valid");
        let mut sim = Simulation::build(&s).expect("builds");
        sim.keep_all_flows();
        let w = sim.world();
        let f: Vec<FlowId> = w.flows.ids().collect();
        assert_eq!(f.len(), 9);
        let (b0, b1) = (
            w.flows[f[0]]
                .completes
                .expect("round 1 completes a barrier"),
            w.flows[f[3]].completes.expect("round 2 too"),
        );
        assert!((0..3).all(|k| w.flows[f[k]].completes == Some(b0)));
        let owner = IdVec::from_elem(0u16, w.fabric.num_nodes as usize);
        let at = whole(w, &owner);
        let mut t = Tight::new(&[(b0, vec![f[0], f[1]])], &at);
        t.flow_started(f[0]);
        assert_eq!((t.unstarted.as_slice(), t.frontier()), (&[1][..], &[][..]));
        // Flow 2 appended to b0, flow 1 cancelled; b1 tight from now: flow 3 started already,
        // flow 4 cancelled before.
        let status = |fid: FlowId| match fid.index() {
            4 => None,
            3 => Some(true),
            _ => Some(false),
        };
        let tight = [(b0, vec![f[0], f[1], f[2]]), (b1, vec![f[3], f[4], f[5]])];
        t.amend(&tight, f[2], &[f[1]], &at, status);
        assert_eq!(t.unstarted, [1, 1]);
        assert_eq!(t.frontier(), &[] as &[u32]);
        let waits = |t: &Tight, i: usize| -> Vec<FlowId> {
            t.barriers[i].1.iter().map(|&(fid, _, _)| fid).collect()
        };
        assert_eq!(waits(&t, 0), [f[0], f[2]]);
        assert_eq!(waits(&t, 1), [f[3], f[5]]);
        t.flow_started(f[2]);
        t.flow_started(f[5]);
        assert_eq!(t.frontier(), &[0, 1]);
        assert_eq!(t.counts_toward[f[1]], NONE);
    }

    /// The bound a receiver gives is a lower bound on when its flow finishes: an incast whose
    /// receiver link is saturated (packets arrive back to back, the case where the bound is
    /// nearly met), and the same flows on an idle fabric, sampled every few hundred events of a
    /// one-world run.
    #[test]
    fn no_flow_finishes_sooner_than_its_receivers_bound() {
        for senders in ["[1, 2, 3, 5, 6, 7]", "[5]"] {
            let text = format!(
                r#"
                seed = 1
                [topology]
                kind = "leaf_spine"
                leaves = 2
                spines = 2
                hosts_per_leaf = 4
                link_rate = "100Gbps"
                link_delay = "1us"
                [[workload]]
                kind = "incast"
                receiver = 0
                senders = {senders}
                size = "200KB"
                "#
            );
            let (_, s) = crate::scenario::parse_toml(&text, "t.toml").expect("valid");
            let mut sim = Simulation::build(&s).expect("builds");
            sim.keep_all_flows();
            let w = sim.world();
            let all: Vec<FlowId> = w.flows.ids().collect();
            let owner = IdVec::from_elem(0u16, w.fabric.num_nodes as usize);
            let at = whole(w, &owner);
            let tight = Tight::new(&[(0, all.clone())], &at);
            let mut bounds: Vec<(FlowId, Time)> = Vec::new();
            let mut tight_at_least_once = false;
            while sim.step(97) == StepOutcome::Running {
                let w = sim.world();
                for (k, &fid) in all.iter().enumerate() {
                    let mut one = Tight {
                        barriers: vec![(0, vec![tight.barriers[0].1[k]])],
                        ..Tight::default()
                    };
                    if w.flows[fid].finished() {
                        continue;
                    }
                    let offset = one.offset(0, &w.flows, Time::MAX);
                    tight_at_least_once |= offset > 0;
                    bounds.push((fid, w.now + offset));
                }
            }
            let w = sim.world();
            assert!(tight_at_least_once);
            for (fid, bound) in bounds {
                let finish = w.flows[fid].finish;
                assert!(
                    finish >= bound,
                    "{senders}: flow {fid} finished at {finish}, bound {bound}"
                );
            }
        }
    }
}
