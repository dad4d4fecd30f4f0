//! In-network reduction at the switches (see `switch::reduction` and docs/in-network.md).
//!
//! A rank's operand packets carry `flags::INR` and the call's epoch (in `pfc_class`); at a switch
//! of the rank's tree they are absorbed by its engine: packet k of every child, once all arrived,
//! leaves as ONE combined packet toward the parent after the engine's combining time (the engine
//! is serial: each operand takes payload / throughput); at the root the result turns around and
//! goes down the tree as `flags::INR_DOWN` packets, replicated per child port; a copy for a rank
//! becomes that rank's flow's data packet `k`, which the rank acknowledges (to itself).
//!
//! State per (tree, switch): a ring of `window` sequence slots, each a bit mask of the children
//! whose packet arrived (bit 63: combined), and the lowest sequence not yet combined; sized when
//! the world is built, nothing is allocated per packet. A rank never has more than `window`
//! packets beyond its last result, so every live sequence has a slot.
//!
//! Loss: a lost operand leaves its slot waiting; the rank's receiver sees the later results
//! arrive, reports the gap and retransmits, and the switch counts the copy. An operand for a
//! sequence already combined (the combined packet or a result was lost) goes up as it is; the
//! root, where it is combined too, answers it with the result for that rank alone (a repair). A
//! duplicate of an operand already counted is dropped. Packets of an earlier call (wrong epoch)
//! are dropped.
//!
//! Reduce-scatter and all-gather (see `workload::collective::in_network`) run the same way with
//! other packet sizes: packet k belongs to rank `k * n / P`; a reduce-scatter result goes down
//! in full only along its owner's path (a header elsewhere), an all-gather operand goes up in
//! full only from its owner (a header from the others) and in full from every switch above it.
//!
//! INT (HPCC): the result turns around at the root with a fresh record (the up path's records
//! and their bytes dropped), and every copy carries the records of the packet it copies, so a
//! rank's result packet reports the down path it took.

use super::queue::Event;
use super::world::World;
use crate::config::CollectiveOp;
use crate::ids::{FlowId, IdVec, NodeId, PortId};
use crate::packet::{flags, PacketId, PacketKind, PacketList};
use crate::units::{serialisation_ps, Time};
use crate::workload::collective::in_network::{InNetworkPlan, Tree};

const DONE: u64 = 1 << 63;
const NONE16: u16 = u16::MAX;
const NO_CALL: u32 = u32::MAX;

/// What changes the calls' shared state (which call each tree runs, the calls waiting, the
/// contexts held), which on threads every partition keeps alike: a flow of a call its tree does
/// not run asks to start, or a flow of a call finishes. The partition where it happens tells
/// the others (at once in a window run merged, else with the window's mail), and each makes the
/// same change to its copy (`World::inr_told`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Gate {
    Ask(FlowId),
    Finished(FlowId),
}

struct RtNode {
    switch: NodeId,
    parent: Option<PortId>,
    /// (down port, rank, the child's node index or NONE16 for a rank) per child.
    children: Vec<(PortId, Option<u32>, u16)>,
    full: u64,
    throughput_bps: u64,
    /// Lowest sequence not yet combined here.
    base: u32,
    /// Offset of its slots in `InNetwork::slots`.
    slots: usize,
}

struct RtTree {
    nodes: Vec<RtNode>,
    /// Per node id: its index in `nodes` (NONE16: not in the tree).
    node_index: Vec<u16>,
    /// Per port: the child index of the port's node at its tree parent (NONE16: none).
    child_index: Vec<u16>,
    /// Per rank: its host's port up to its leaf.
    up_ports: Vec<PortId>,
    /// Per rank: the nodes from its leaf up to the root (indices in `nodes`).
    paths: Vec<Vec<u16>>,
    window: u32,
    epoch: u8,
    /// The call running on it, and the calls waiting (in order).
    active: u32,
    queue: std::collections::VecDeque<u32>,
    /// `on_exhausted = "wait"`: its calls not yet finished, and whether it holds its switches'
    /// contexts (from its first call's start to its last call's end).
    calls_left: u32,
    holding: bool,
}

struct RtCall {
    tree: u32,
    op: CollectiveOp,
    flows: Vec<FlowId>,
    left: u32,
    started: bool,
}

/// The counters run.json reports (`in_network_*`, `reduction_*`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InNetworkCounters {
    pub calls: u64,
    pub fallbacks: u64,
    pub contexts: u64,
    pub operands: u64,
    pub combined: u64,
    pub duplicates: u64,
    pub repairs: u64,
    pub buffer_peak: u64,
    /// Calls that waited for a free context (`on_exhausted = "wait"`).
    pub waits: u64,
}

/// The engines' state (None in the World without in-network calls).
pub struct InNetwork {
    trees: Vec<RtTree>,
    calls: Vec<RtCall>,
    flow_call: IdVec<FlowId, u32>,
    /// Per flow of a call: its rank.
    flow_rank: IdVec<FlowId, u32>,
    /// Per flow of a call: it asked to start and waits (its call waits for the tree or for
    /// contexts); it starts when the call may run.
    asked: IdVec<FlowId, bool>,
    slots: Vec<u64>,
    /// Per node: when its engine is free, its combined packets waiting for their time, bytes of
    /// partial aggregates held.
    engine_free: IdVec<NodeId, Time>,
    engine_out: IdVec<NodeId, PacketList>,
    held: IdVec<NodeId, u64>,
    payload: u64,
    num_ports: usize,
    /// `on_exhausted = "wait"`: every switch's free contexts, and the calls waiting for them
    /// (in the order they asked).
    pool: Option<IdVec<NodeId, u32>>,
    waiting: std::collections::VecDeque<u32>,
    pub counters: InNetworkCounters,
}

impl InNetwork {
    pub fn new(
        plan: &InNetworkPlan,
        fabric: &crate::topology::Fabric,
        flows: usize,
        mtu: u64,
    ) -> Self {
        let mut inr = Self::empty(plan, fabric, flows, mtu);
        for t in &plan.trees {
            inr.add_tree(t);
        }
        for c in &plan.calls {
            let flows: Vec<FlowId> = c.flows.iter().map(|&f| FlowId::new(f)).collect();
            inr.add_call(c.tree, &flows, c.op);
        }
        inr.counters.contexts = plan.contexts_used;
        inr
    }

    /// The engines with no tree and no call yet (a run whose first in-network call is chosen
    /// live).
    pub fn empty(
        plan: &InNetworkPlan,
        fabric: &crate::topology::Fabric,
        flows: usize,
        mtu: u64,
    ) -> Self {
        let nn = fabric.num_nodes as usize;
        InNetwork {
            trees: Vec::new(),
            calls: Vec::new(),
            flow_call: IdVec::from_elem(NO_CALL, flows),
            flow_rank: IdVec::from_elem(0, flows),
            asked: IdVec::from_elem(false, flows),
            slots: Vec::new(),
            engine_free: IdVec::from_elem(0, nn),
            engine_out: IdVec::from_elem(PacketList::EMPTY, nn),
            held: IdVec::from_elem(0, nn),
            payload: mtu,
            num_ports: fabric.num_ports() as usize,
            pool: plan.waits().then(|| plan.contexts().into_iter().collect()),
            waiting: Default::default(),
            counters: InNetworkCounters {
                fallbacks: plan.fallbacks,
                ..Default::default()
            },
        }
    }

    /// Whether calls wait for free contexts (`on_exhausted = "wait"`).
    pub fn waits_for_contexts(&self) -> bool {
        self.pool.is_some()
    }

    /// Trees the engines know (the plan's first `n`).
    pub fn num_trees(&self) -> usize {
        self.trees.len()
    }

    /// Add tree `t` (the next index): its slots are allocated now.
    pub fn add_tree(&mut self, t: &Tree) {
        let nn = self.engine_free.len();
        let mut slots = self.slots.len();
        let mut node_index = vec![NONE16; nn];
        let mut child_index = vec![NONE16; self.num_ports];
        // A switch child's node: the one whose port to its parent is the child's up port.
        let node_of_up = |up: PortId| {
            t.nodes
                .iter()
                .position(|m| m.parent == Some(up))
                .map_or(NONE16, |j| j as u16)
        };
        let mut paths = vec![Vec::new(); t.up_ports.len()];
        for (i, n) in t.nodes.iter().enumerate() {
            for c in &n.children {
                if let Some(r) = c.rank {
                    // The rank's leaf, then each parent up to the root.
                    let path = &mut paths[r as usize];
                    let mut j = i;
                    path.push(j as u16);
                    while let Some(up) = t.nodes[j].parent {
                        let parent = t.nodes.iter().position(|m| {
                            m.children.iter().any(|ch| ch.up == up && ch.rank.is_none())
                        });
                        let Some(pj) = parent else { break };
                        j = pj;
                        path.push(j as u16);
                    }
                }
            }
        }
        let nodes = t
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                node_index[n.switch.index()] = i as u16;
                for (c, ch) in n.children.iter().enumerate() {
                    child_index[ch.up.index()] = c as u16;
                }
                let node = RtNode {
                    switch: n.switch,
                    parent: n.parent,
                    children: n
                        .children
                        .iter()
                        .map(|c| {
                            let child = match c.rank {
                                Some(_) => NONE16,
                                None => node_of_up(c.up),
                            };
                            (c.down, c.rank, child)
                        })
                        .collect(),
                    full: (1u64 << n.children.len()) - 1,
                    throughput_bps: n.throughput_bps,
                    base: 0,
                    slots,
                };
                slots += t.window_packets as usize;
                node
            })
            .collect();
        self.slots.resize(slots, 0);
        self.trees.push(RtTree {
            nodes,
            node_index,
            child_index,
            up_ports: t.up_ports.clone(),
            paths,
            window: t.window_packets,
            epoch: 0,
            active: NO_CALL,
            queue: Default::default(),
            calls_left: 0,
            holding: false,
        });
    }

    /// Add a call of `op` on tree `tree` whose flows (one per rank, in the tree's rank order)
    /// are `flows`; the flows must exist (`grow_flows`).
    pub fn add_call(&mut self, tree: u32, flows: &[FlowId], op: CollectiveOp) {
        let i = self.calls.len() as u32;
        for (r, &f) in flows.iter().enumerate() {
            self.flow_call[f] = i;
            self.flow_rank[f] = r as u32;
        }
        self.trees[tree as usize].calls_left += 1;
        self.calls.push(RtCall {
            tree,
            op,
            flows: flows.to_vec(),
            left: flows.len() as u32,
            started: false,
        });
        self.counters.calls += 1;
    }

    /// The run has `n` flows now.
    pub fn grow_flows(&mut self, n: usize) {
        if n > self.flow_call.len() {
            let extra = n - self.flow_call.len();
            self.flow_call.extend(std::iter::repeat_n(NO_CALL, extra));
            self.flow_rank.extend(std::iter::repeat_n(0, extra));
            self.asked.extend(std::iter::repeat_n(false, extra));
        }
    }

    /// The payload a rank's operand packet `seq` of flow `fid` (of `packets` packets, `payload`
    /// bytes in full) carries up: an all-gather rank sends only its own shard in full (the
    /// other packets as headers).
    #[inline]
    pub fn operand_payload(&self, fid: FlowId, seq: u32, packets: u32, payload: u32) -> u32 {
        let Some(&c) = self.flow_call.get(fid).filter(|&&c| c != NO_CALL) else {
            return payload;
        };
        let call = &self.calls[c as usize];
        if call.op == CollectiveOp::AllGather
            && owner(seq, packets, call.flows.len()) != self.flow_rank[fid]
        {
            0
        } else {
            payload
        }
    }

    /// Whether flow `fid` is a rank's part of an in-network call.
    #[inline]
    pub fn is_member(&self, fid: FlowId) -> bool {
        self.flow_call.get(fid).is_some_and(|&c| c != NO_CALL)
    }

    /// The up port and window of an in-network flow (the World sets them when it is built).
    pub fn flow_setup(&self, fid: FlowId) -> Option<(PortId, u32)> {
        let c = *self.flow_call.get(fid)?;
        if c == NO_CALL {
            return None;
        }
        let call = &self.calls[c as usize];
        let tree = &self.trees[call.tree as usize];
        let rank = call.flows.iter().position(|&f| f == fid)?;
        Some((tree.up_ports[rank], tree.window))
    }

    /// The trees whose running call's end would start a waiting call: one waits for the tree,
    /// or calls wait for contexts and this is the tree's last call (its end frees them). On
    /// threads a window in which such a call may end runs merged (`World::inr_end_offset`).
    pub fn blocking_trees(&self, out: &mut Vec<u32>) {
        out.clear();
        for (i, t) in self.trees.iter().enumerate() {
            let frees = !self.waiting.is_empty() && t.holding && t.calls_left == 1;
            if t.active != NO_CALL && (!t.queue.is_empty() || frees) {
                out.push(i as u32);
            }
        }
    }

    /// For a rank's flow of a call, the fewest bytes a packet of its result can bring (a
    /// reduce-scatter's results for the other ranks' shards are headers): None for other flows.
    pub fn result_bytes(&self, fid: FlowId, payload: u64, header: u64) -> Option<u64> {
        let c = *self.flow_call.get(fid).filter(|&&c| c != NO_CALL)?;
        Some(match self.calls[c as usize].op {
            CollectiveOp::ReduceScatter => header,
            _ => payload,
        })
    }

    /// The run's counters from every partition's (`parts`, the first included): the calls,
    /// contexts and waits are kept alike in each (take the first's), the engines' counts are
    /// each switch's partition's (summed, the buffer peak the largest).
    pub fn fold_counters<'a>(&mut self, parts: impl Iterator<Item = &'a InNetwork>) {
        let mut c = InNetworkCounters::default();
        for (i, p) in parts.enumerate() {
            let q = &p.counters;
            if i == 0 {
                c = InNetworkCounters {
                    operands: 0,
                    combined: 0,
                    duplicates: 0,
                    repairs: 0,
                    buffer_peak: 0,
                    ..*q
                };
            }
            c.operands += q.operands;
            c.combined += q.combined;
            c.duplicates += q.duplicates;
            c.repairs += q.repairs;
            c.buffer_peak = c.buffer_peak.max(q.buffer_peak);
        }
        self.counters = c;
    }

    /// Packets held in the engines' output queues.
    pub fn queued(&self, arena: &crate::packet::PacketArena) -> u64 {
        self.engine_out.iter().map(|l| l.len(arena) as u64).sum()
    }
}

/// The rank that owns packet `seq` of a call's `packets` among its `n` ranks (reduce-scatter:
/// the rank that keeps its result; all-gather: the rank whose shard it is).
#[inline]
fn owner(seq: u32, packets: u32, n: usize) -> u32 {
    (seq as u64 * n as u64 / packets.max(1) as u64) as u32
}

impl World {
    /// An in-network flow asks to start: it runs if its tree is free or already runs its call;
    /// else it waits for the call before it. Returns whether it may start now.
    pub(super) fn inr_may_start(&mut self, fid: FlowId) -> bool {
        let Some(inr) = &self.in_network else {
            return true;
        };
        let c = inr.flow_call[fid];
        if c == NO_CALL {
            return true;
        }
        if inr.trees[inr.calls[c as usize].tree as usize].active != c {
            // Its tree starts running it, or it waits: every partition's copy must know.
            self.inr_tell(Gate::Ask(fid), true);
        }
        self.inr_ask(fid)
    }

    /// On threads: tell the other partitions of `gate`, which happened here (`exact`: it must
    /// be at its place in the order, so only in a window run merged).
    fn inr_tell(&mut self, gate: Gate, exact: bool) {
        if let Some(part) = &mut self.partition {
            // The windows in which a call may start or end with calls waiting run merged
            // (`Part::inr_pending`, `InNetwork::blocking_trees`): a miss would be a bug, stopped
            // here rather than run on in a different order than one world's.
            assert!(
                part.merged || !exact,
                "parallel engine: an in-network call changed its tree's state outside a window \
                 run merged"
            );
            part.outbox.inr.push(gate);
        }
    }

    /// Another partition's `gate`, applied to this partition's copy of the calls' state (at
    /// once in a window run merged, else at the window's end, when it starts nothing).
    pub(super) fn inr_told(&mut self, gate: Gate) {
        match gate {
            Gate::Ask(fid) => {
                self.inr_ask(fid);
            }
            Gate::Finished(fid) => self.inr_finish(fid),
        }
    }

    /// [`World::inr_may_start`]'s change to the calls' state.
    fn inr_ask(&mut self, fid: FlowId) -> bool {
        let inr = self.in_network.as_mut().expect("in-network calls");
        let c = inr.flow_call[fid];
        let t = inr.calls[c as usize].tree as usize;
        if inr.trees[t].active == NO_CALL && !inr.trees[t].holding {
            if let Some(pool) = &mut inr.pool {
                // Wait mode: the communicator's first call takes its tree's contexts, or waits.
                let tree = &mut inr.trees[t];
                if tree.nodes.iter().all(|n| pool[n.switch] > 0) {
                    for n in &tree.nodes {
                        pool[n.switch] -= 1;
                    }
                    tree.holding = true;
                } else {
                    if !inr.waiting.contains(&c) {
                        inr.waiting.push_back(c);
                        inr.counters.waits += 1;
                    }
                    inr.asked[fid] = true;
                    return false;
                }
            }
        }
        let tree = &mut inr.trees[t];
        if tree.active == NO_CALL {
            tree.active = c;
            tree.epoch = tree.epoch.wrapping_add(1);
            for n in &mut tree.nodes {
                n.base = 0;
                inr.slots[n.slots..n.slots + tree.window as usize].fill(0);
            }
        }
        if tree.active == c {
            inr.calls[c as usize].started = true;
            return true;
        }
        if !tree.queue.contains(&c) {
            tree.queue.push_back(c);
        }
        inr.asked[fid] = true;
        false
    }

    /// A rank's flow of an in-network call finished; the last one frees the tree for the next
    /// waiting call, whose released flows start now.
    pub(super) fn inr_flow_finished(&mut self, fid: FlowId) {
        let Some(inr) = &self.in_network else {
            return;
        };
        if inr.flow_call[fid] == NO_CALL {
            return;
        }
        self.inr_tell(Gate::Finished(fid), false);
        self.inr_finish(fid);
    }

    /// [`World::inr_flow_finished`]'s change to the calls' state.
    fn inr_finish(&mut self, fid: FlowId) {
        let inr = self.in_network.as_mut().expect("in-network calls");
        let c = inr.flow_call[fid];
        let call = &mut inr.calls[c as usize];
        call.left -= 1;
        if call.left == 0 {
            self.inr_call_ended(c);
        }
    }

    /// Call `c`'s last flow finished (or was cancelled): its tree runs the next waiting call.
    fn inr_call_ended(&mut self, c: u32) {
        let Some(inr) = &mut self.in_network else {
            return;
        };
        let t = inr.calls[c as usize].tree as usize;
        self.inr_call_over(t);
        let Some(inr) = &mut self.in_network else {
            return;
        };
        let tree = &mut inr.trees[t];
        if tree.active != c {
            return; // a call cancelled before it ran
        }
        tree.active = NO_CALL;
        // The next waiting call (one whose flows were all cancelled waits for nothing).
        while tree
            .queue
            .front()
            .is_some_and(|&c| inr.calls[c as usize].left == 0)
        {
            tree.queue.pop_front();
        }
        if let Some(next) = tree.queue.pop_front() {
            let flows = inr.calls[next as usize].flows.clone();
            self.inr_release(&flows);
        }
    }

    /// Flow `fid` (not started) was cancelled by a plan amendment: a call whose flows are all
    /// cancelled is no longer counted.
    pub(super) fn inr_flow_cancelled(&mut self, fid: FlowId) {
        let Some(inr) = &mut self.in_network else {
            return;
        };
        let Some(&c) = inr.flow_call.get(fid).filter(|&&c| c != NO_CALL) else {
            return;
        };
        let call = &mut inr.calls[c as usize];
        call.left -= 1;
        if call.left == 0 {
            if !call.started {
                inr.counters.calls -= 1;
            }
            self.inr_call_ended(c);
        }
    }

    /// A call of tree `t` finished (or was cancelled whole). Wait mode: after the tree's last
    /// call its contexts are freed, and the waiting calls (in the order they asked) whose trees
    /// now find free contexts take them and start.
    fn inr_call_over(&mut self, t: usize) {
        let Some(inr) = &mut self.in_network else {
            return;
        };
        let tree = &mut inr.trees[t];
        tree.calls_left -= 1;
        let Some(pool) = &mut inr.pool else {
            return;
        };
        if tree.calls_left > 0 || !tree.holding {
            return;
        }
        tree.holding = false;
        for n in &tree.nodes {
            pool[n.switch] += 1;
        }
        let mut released = Vec::new();
        let mut i = 0;
        while i < inr.waiting.len() {
            let c = inr.waiting[i] as usize;
            let call = &inr.calls[c];
            if call.left == 0 {
                inr.waiting.remove(i); // cancelled while it waited
                continue;
            }
            let tree = &mut inr.trees[call.tree as usize];
            if tree.holding || !tree.nodes.iter().all(|n| pool[n.switch] > 0) {
                i += 1;
                continue;
            }
            for n in &tree.nodes {
                pool[n.switch] -= 1;
            }
            tree.holding = true;
            inr.waiting.remove(i);
            released.extend_from_slice(&inr.calls[c].flows);
        }
        self.inr_release(&released);
    }

    /// A waiting call's `flows` that asked to start start now (on threads, each partition its
    /// own, all told at once). The others ask when their own start comes (a later planned
    /// time, a barrier not yet released) and find their call running.
    fn inr_release(&mut self, flows: &[FlowId]) {
        for &f in flows {
            let inr = self.in_network.as_mut().expect("in-network calls");
            if !std::mem::take(&mut inr.asked[f]) {
                continue;
            }
            if let Some(part) = &self.partition {
                assert!(
                    part.merged,
                    "parallel engine: an in-network call released another outside a window run \
                     merged"
                );
                if !part.starts_flow(self.flows[f].src) {
                    continue;
                }
            }
            self.push_flow_start(self.now, f);
        }
    }

    /// Make the flows `flows` (appended now, one per rank in the order of the hosts the call was
    /// placed with) a call on tree `tree` of `plan`, whose trees the engines learn first if they
    /// are new (their contexts counted): each flow leaves by its rank's up port, with the
    /// tree's window.
    pub(super) fn inr_add_live_call(
        &mut self,
        plan: &InNetworkPlan,
        tree: u32,
        flows: &[FlowId],
        op: CollectiveOp,
    ) {
        let mtu = self.transport.mtu as u64;
        let n = self.flows.len();
        let inr = self
            .in_network
            .get_or_insert_with(|| InNetwork::empty(plan, &self.fabric, n, mtu));
        inr.grow_flows(n);
        while inr.num_trees() < plan.trees.len() {
            let t = &plan.trees[inr.num_trees()];
            inr.counters.contexts += t.nodes.len() as u64;
            inr.add_tree(t);
        }
        let t = &plan.trees[tree as usize];
        // The call's flows in the tree's rank order (its hosts' order when it was built).
        let hosts: Vec<u32> = flows.iter().map(|&f| self.flows[f].src.get()).collect();
        let ordered: Vec<FlowId> = t
            .hosts
            .iter()
            .map(|h| flows[hosts.iter().position(|x| x == h).expect("the tree's hosts")])
            .collect();
        inr.add_call(tree, &ordered, op);
        for &f in flows {
            if let Some((up, window)) = inr.flow_setup(f) {
                let fl = &mut self.flows[f];
                fl.src_port = up;
                fl.rate_bps = self.fabric.rate_bps[up];
                fl.window_bytes = Some(window as u64 * mtu);
            }
        }
    }

    /// The epoch of flow `fid`'s call (its operand packets carry it).
    #[inline]
    pub(super) fn inr_epoch(&self, fid: FlowId) -> u8 {
        let inr = self.in_network.as_ref().expect("an in-network flow");
        let c = inr.flow_call[fid];
        inr.trees[inr.calls[c as usize].tree as usize].epoch
    }

    /// On threads: the soonest tree `t`'s running call can end as far as its ranks' flows in
    /// this partition (`mine`) tell, as an offset from the next event anywhere, at most
    /// `enough`. A flow not started cannot end in the next window (its start would have made
    /// the window merged); one missing `n` result packets needs `n - 2` of the smallest
    /// (`InNetwork::result_bytes`) on its host's links, as `engine::tight` bounds flows.
    pub(super) fn inr_end_offset(
        &self,
        t: u32,
        mine: impl Fn(NodeId) -> bool,
        enough: Time,
    ) -> Time {
        let inr = self.in_network.as_ref().expect("in-network calls");
        let c = inr.trees[t as usize].active;
        let mtu = self.transport.mtu as u64;
        let header = self.transport.header as u64;
        let mut at = 0;
        for &fid in &inr.calls[c as usize].flows {
            let f = &self.flows[fid];
            if !mine(f.dst) || f.finished() || self.amends.is_cancelled(fid) {
                continue;
            }
            if !f.started {
                return enough;
            }
            let into = super::tight::inbound_rate(&self.fabric, f.dst);
            let bytes = inr.result_bytes(fid, mtu, header).unwrap_or(header);
            let packet = serialisation_ps(bytes, into.max(1));
            let left = super::tight::packets_missing(f);
            at = at.max(left.saturating_sub(2).saturating_mul(packet));
            if at >= enough {
                return enough;
            }
        }
        at
    }

    /// An in-network packet arrived at switch `node` over link `p`.
    pub(super) fn inr_arrival(&mut self, node: NodeId, p: PortId, pkt: PacketId) {
        let packet = *self.packets.get(pkt);
        let inr = self.in_network.as_mut().expect("in-network packet");
        let c = inr.flow_call.get(packet.flow).copied().unwrap_or(NO_CALL);
        let t = match c {
            NO_CALL => None,
            c => Some(inr.calls[c as usize].tree as usize),
        };
        let Some(t) = t.filter(|&t| {
            inr.trees[t].epoch == packet.pfc_class
                && inr.trees[t].node_index[node.index()] != NONE16
        }) else {
            // A packet of an earlier call (or off its tree): nothing waits for it.
            inr.counters.duplicates += 1;
            self.stats.packets_dropped += 1;
            self.packets.release(pkt);
            return;
        };
        let ni = inr.trees[t].node_index[node.index()] as usize;
        if packet.flags & flags::INR_DOWN != 0 {
            self.inr_multicast(t, ni, pkt);
            return;
        }
        let tree = &inr.trees[t];
        let n = &tree.nodes[ni];
        let window = tree.window;
        let child = tree.child_index[p.index()];
        let seq = packet.seq;
        let done = seq < n.base || {
            seq < n.base + window && inr.slots[n.slots + (seq % window) as usize] & DONE != 0
        };
        if child == NONE16 || (!done && seq >= n.base + window) {
            // Not from a child of this switch, or beyond the window (cannot happen while ranks
            // keep their window): dropped, the rank retransmits.
            inr.counters.duplicates += 1;
            self.stats.packets_dropped += 1;
            self.packets.release(pkt);
            return;
        }
        if done {
            // Already combined here: a retransmission for a lost combined packet or result.
            match n.parent {
                Some(up) => self.switch_enqueue(node, up, pkt),
                None => self.inr_repair(node, pkt),
            }
            return;
        }
        let slot = n.slots + (seq % window) as usize;
        let bit = 1u64 << child;
        if inr.slots[slot] & bit != 0 {
            inr.counters.duplicates += 1;
            self.stats.packets_dropped += 1;
            self.packets.release(pkt);
            return;
        }
        let payload = (packet.wire_bytes as u64).saturating_sub(self.transport.header as u64);
        if inr.slots[slot] == 0 {
            // The slot opens: a partial aggregate of one packet in the reduction buffer.
            inr.held[node] += inr.payload;
            inr.counters.buffer_peak = inr.counters.buffer_peak.max(inr.held[node]);
        }
        inr.slots[slot] |= bit;
        inr.counters.operands += 1;
        let free = inr.engine_free[node].max(self.now);
        let ready = free + serialisation_ps(payload, n.throughput_bps);
        inr.engine_free[node] = ready;
        if inr.slots[slot] & n.full != n.full {
            self.stats.packets_delivered += 1; // absorbed by the engine
            self.packets.release(pkt);
            return;
        }
        // Combined: this packet leaves as the result of sequence `seq`, at `ready`.
        inr.slots[slot] |= DONE;
        inr.held[node] -= inr.payload;
        inr.counters.combined += 1;
        let nm = &mut inr.trees[t].nodes[ni];
        while nm.base < u32::MAX && inr.slots[nm.slots + (nm.base % window) as usize] & DONE != 0 {
            inr.slots[nm.slots + (nm.base % window) as usize] = 0;
            nm.base += 1;
        }
        if inr.calls[c as usize].op == CollectiveOp::AllGather {
            // All-gather: in full from a switch above the packet's owner, else a header.
            let tree = &inr.trees[t];
            let o = owner(
                seq,
                self.flows[packet.flow].num_packets,
                tree.up_ports.len(),
            );
            let full = tree.paths[o as usize].contains(&(ni as u16));
            self.inr_resize(pkt, full);
        }
        let inr = self.in_network.as_mut().expect("in-network packet");
        let pk = self.packets.get_mut(pkt);
        pk.flags &= !(flags::RETX | flags::CE);
        pk.arrive = ready;
        let out = &mut inr.engine_out[node];
        let was_empty = out.is_empty();
        out.push_back(&mut self.packets, pkt);
        if was_empty {
            self.events.push(ready, Event::ReductionDone(node));
        }
    }

    /// Switch `node`'s engine: send the combined packets whose time has come.
    pub(super) fn reduction_done(&mut self, node: NodeId) {
        loop {
            let inr = self.in_network.as_mut().expect("engine");
            let Some(head) = inr.engine_out[node].front() else {
                return;
            };
            let at = self.packets.get(head).arrive;
            if at > self.now {
                self.events.push(at, Event::ReductionDone(node));
                return;
            }
            inr.engine_out[node].pop_front(&self.packets);
            let packet = *self.packets.get(head);
            let c = inr.flow_call[packet.flow];
            let t = inr.calls[c as usize].tree as usize;
            let ni = inr.trees[t].node_index[node.index()] as usize;
            match inr.trees[t].nodes[ni].parent {
                Some(up) => self.switch_enqueue(node, up, head),
                None => {
                    // The root: the result goes down, its INT record fresh.
                    self.packets.get_mut(head).flags |= flags::INR_DOWN;
                    let op = inr.calls[c as usize].op;
                    if let Some(int) = &mut self.int {
                        int.slot_mut(head.index()).clear();
                    }
                    if op != CollectiveOp::AllReduce || self.int.is_some() {
                        self.inr_resize(head, true);
                    }
                    self.inr_multicast(t, ni, head);
                }
            }
        }
    }

    /// Replicate result packet `pkt` to every child of node `ni` of tree `t`: down the tree, or
    /// to a rank as its flow's data packet.
    fn inr_multicast(&mut self, t: usize, ni: usize, pkt: PacketId) {
        let inr = self.in_network.as_ref().expect("engine");
        let n = &inr.trees[t].nodes[ni];
        let node = n.switch;
        let k = n.children.len();
        let packet = *self.packets.get(pkt);
        let call = inr.flow_call[packet.flow];
        // Reduce-scatter: the result goes down in full only toward its owner.
        let scatter = inr.calls[call as usize].op == CollectiveOp::ReduceScatter;
        let o = owner(
            packet.seq,
            self.flows[packet.flow].num_packets,
            inr.trees[t].up_ports.len(),
        );
        for i in 0..k {
            let inr = self.in_network.as_ref().expect("engine");
            let (down, rank, child) = inr.trees[t].nodes[ni].children[i];
            let full = match rank {
                Some(r) => r == o,
                None => inr.trees[t].paths[o as usize].contains(&child),
            };
            let copy = if i + 1 == k {
                pkt
            } else {
                let p = *self.packets.get(pkt);
                let copy = self.packets.alloc(p);
                if let Some(int) = &mut self.int {
                    int.copy_slot(pkt.index(), copy.index());
                }
                // A copy's one-way latency counts from when the packet it copies left its NIC
                // (not the slot's last occupant's: that differed with the partitioning).
                if let Some(l) = &mut self.tracer.latency {
                    l.sent(copy.index(), l.sent_at(pkt.index()));
                }
                copy
            };
            if let Some(r) = rank {
                let fid = inr.calls[call as usize].flows[r as usize];
                let f = &self.flows[fid];
                let (dst, key) = (f.dst, f.header_fwd);
                let pk = self.packets.get_mut(copy);
                pk.flow = fid;
                pk.dst = dst;
                pk.header_key = key;
                pk.kind = PacketKind::Data;
                pk.flags = (pk.flags & (flags::HEADROOM | flags::CE)) | flags::ECT;
                pk.pfc_class = 0;
            }
            if scatter {
                self.inr_resize(copy, full);
            }
            self.switch_enqueue(node, down, copy);
        }
    }

    /// The root answers an operand for a sequence it already combined: the result for that rank
    /// alone, routed to it.
    fn inr_repair(&mut self, node: NodeId, pkt: PacketId) {
        let inr = self.in_network.as_mut().expect("engine");
        inr.counters.repairs += 1;
        let packet = *self.packets.get(pkt);
        let c = inr.flow_call[packet.flow];
        let call = &inr.calls[c as usize];
        match call.op {
            CollectiveOp::ReduceScatter => {
                let o = owner(
                    packet.seq,
                    self.flows[packet.flow].num_packets,
                    call.flows.len(),
                );
                let full = o == inr.flow_rank[packet.flow];
                self.inr_resize(pkt, full);
            }
            CollectiveOp::AllGather => self.inr_resize(pkt, true),
            _ => {}
        }
        let pk = self.packets.get_mut(pkt);
        pk.flags = (pk.flags & flags::HEADROOM) | flags::ECT | flags::RETX;
        pk.pfc_class = 0;
        let out = if self.fabric.role[node] == crate::topology::Role::NvSwitch {
            let (dst, fid) = (pk.dst, pk.flow);
            self.scaleup_out(node, dst, fid, true)
        } else {
            self.route(node, pkt)
        };
        match out {
            Some(out) => self.switch_enqueue(node, out, pkt),
            None => self.unreachable_drop(pkt),
        }
    }

    /// Packet `pkt` carries its sequence's payload in full, or its header alone (plus its INT
    /// records' bytes).
    fn inr_resize(&mut self, pkt: PacketId, full: bool) {
        let int_bytes = self
            .int
            .as_ref()
            .map_or(0, |i| i.records(pkt.index()).len() as u32 * i.bytes_per_hop);
        let (fid, seq) = {
            let p = self.packets.get(pkt);
            (p.flow, p.seq)
        };
        let payload = match full {
            true => self.flows[fid].payload_of(seq, self.transport.mtu),
            false => 0,
        };
        self.packets.get_mut(pkt).wire_bytes = self.transport.header + payload + int_bytes;
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::{Simulation, StepOutcome};

    /// The soonest a call can end, as its ranks' flows bound it (what a parallel run decides
    /// its merged windows from while another call waits for it), is never after its end: two
    /// jobs on one context per switch (the second waits for the first's communicator), sampled
    /// every few dozen events of a one-world run.
    #[test]
    fn no_call_ends_sooner_than_its_flows_bound() {
        for op in ["all_reduce", "reduce_scatter", "all_gather"] {
            let text = format!(
                r#"
                seed = 1
                [topology]
                kind = "fat_tree"
                k = 4
                link_rate = "100Gbps"
                link_delay = "500ns"
                [switch.reduction]
                contexts = 1
                on_exhausted = "wait"
                [[workload]]
                kind = "collective"
                op = "{op}"
                algorithm = "in_network"
                hosts = [0, 1, 2, 3, 4, 5]
                size = "256KiB"
                iterations = 2
                [[workload]]
                kind = "collective"
                op = "all_reduce"
                algorithm = "in_network"
                hosts = [0, 1, 2, 3]
                size = "64KiB"
                "#
            );
            let (_, s) = crate::scenario::parse_toml(&text, "t.toml").expect("valid");
            let mut sim = Simulation::build(&s).expect("builds");
            sim.keep_all_flows();
            let mut bounds: Vec<(u32, u64)> = Vec::new();
            let mut trees = Vec::new();
            while sim.step(37) == StepOutcome::Running {
                let w = sim.world();
                let inr = w.in_network.as_ref().expect("in-network calls");
                inr.blocking_trees(&mut trees);
                for &t in &trees {
                    let offset = w.inr_end_offset(t, |_| true, u64::MAX);
                    bounds.push((inr.trees[t as usize].active, w.now + offset));
                }
            }
            let w = sim.world();
            let inr = w.in_network.as_ref().expect("in-network calls");
            assert!(bounds.iter().any(|&(c, b)| {
                let start = inr.calls[c as usize]
                    .flows
                    .iter()
                    .map(|&f| w.flows[f].start);
                b > start.max().unwrap_or(0) + 1_000_000
            }));
            for (c, bound) in bounds {
                let end = (inr.calls[c as usize].flows.iter())
                    .map(|&f| w.flows[f].finish)
                    .max()
                    .expect("ranks");
                assert!(end >= bound, "{op}: call {c} ended at {end}, bound {bound}");
            }
        }
    }
}
