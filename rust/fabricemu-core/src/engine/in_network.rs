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

use super::queue::Event;
use super::world::World;
use crate::ids::{FlowId, IdVec, NodeId, PortId};
use crate::packet::{flags, PacketId, PacketKind, PacketList};
use crate::units::{serialisation_ps, Time};
use crate::workload::collective::in_network::InNetworkPlan;

const DONE: u64 = 1 << 63;
const NONE16: u16 = u16::MAX;
const NO_CALL: u32 = u32::MAX;

struct RtNode {
    switch: NodeId,
    parent: Option<PortId>,
    /// (down port, rank) per child.
    children: Vec<(PortId, Option<u32>)>,
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
    window: u32,
    epoch: u8,
    /// The call running on it, and the calls waiting (in order).
    active: u32,
    queue: std::collections::VecDeque<u32>,
}

struct RtCall {
    tree: u32,
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
}

/// The engines' state (None in the World without in-network calls).
pub struct InNetwork {
    trees: Vec<RtTree>,
    calls: Vec<RtCall>,
    flow_call: IdVec<FlowId, u32>,
    slots: Vec<u64>,
    /// Per node: when its engine is free, its combined packets waiting for their time, bytes of
    /// partial aggregates held.
    engine_free: IdVec<NodeId, Time>,
    engine_out: IdVec<NodeId, PacketList>,
    held: IdVec<NodeId, u64>,
    payload: u64,
    pub counters: InNetworkCounters,
}

impl InNetwork {
    pub fn new(
        plan: &InNetworkPlan,
        fabric: &crate::topology::Fabric,
        flows: usize,
        mtu: u64,
    ) -> Self {
        let nn = fabric.num_nodes as usize;
        let np = fabric.num_ports() as usize;
        let mut slots = 0usize;
        let trees = plan
            .trees
            .iter()
            .map(|t| {
                let mut node_index = vec![NONE16; nn];
                let mut child_index = vec![NONE16; np];
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
                            children: n.children.iter().map(|c| (c.down, c.rank)).collect(),
                            full: (1u64 << n.children.len()) - 1,
                            throughput_bps: n.throughput_bps,
                            base: 0,
                            slots,
                        };
                        slots += t.window_packets as usize;
                        node
                    })
                    .collect();
                RtTree {
                    nodes,
                    node_index,
                    child_index,
                    window: t.window_packets,
                    epoch: 0,
                    active: NO_CALL,
                    queue: Default::default(),
                }
            })
            .collect();
        let mut flow_call = IdVec::from_elem(NO_CALL, flows);
        let calls = plan
            .calls
            .iter()
            .enumerate()
            .map(|(i, c)| {
                for &f in &c.flows {
                    flow_call[FlowId::new(f)] = i as u32;
                }
                RtCall {
                    tree: c.tree,
                    flows: c.flows.iter().map(|&f| FlowId::new(f)).collect(),
                    left: c.flows.len() as u32,
                    started: false,
                }
            })
            .collect();
        InNetwork {
            trees,
            calls,
            flow_call,
            slots: vec![0; slots],
            engine_free: IdVec::from_elem(0, nn),
            engine_out: IdVec::from_elem(PacketList::EMPTY, nn),
            held: IdVec::from_elem(0, nn),
            payload: mtu,
            counters: InNetworkCounters {
                calls: plan.calls.len() as u64,
                fallbacks: plan.fallbacks,
                contexts: plan.contexts_used,
                ..Default::default()
            },
        }
    }

    /// Whether flow `fid` is a rank's part of an in-network call.
    #[inline]
    pub fn is_member(&self, fid: FlowId) -> bool {
        self.flow_call.get(fid).is_some_and(|&c| c != NO_CALL)
    }

    /// The up port and window of an in-network flow (the World sets them when it is built).
    pub fn flow_setup(&self, plan: &InNetworkPlan, fid: FlowId) -> Option<(PortId, u32)> {
        let c = *self.flow_call.get(fid)?;
        if c == NO_CALL {
            return None;
        }
        let call = &plan.calls[c as usize];
        let tree = &plan.trees[call.tree as usize];
        let rank = call.flows.iter().position(|&f| f == fid.get())?;
        Some((tree.up_ports[rank], tree.window_packets))
    }

    /// Packets held in the engines' output queues.
    pub fn queued(&self, arena: &crate::packet::PacketArena) -> u64 {
        self.engine_out.iter().map(|l| l.len(arena) as u64).sum()
    }
}

impl World {
    /// An in-network flow asks to start: it runs if its tree is free or already runs its call;
    /// else it waits for the call before it. Returns whether it may start now.
    pub(super) fn inr_may_start(&mut self, fid: FlowId) -> bool {
        let Some(inr) = &mut self.in_network else {
            return true;
        };
        let c = inr.flow_call[fid];
        if c == NO_CALL {
            return true;
        }
        let t = inr.calls[c as usize].tree as usize;
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
        false
    }

    /// A rank's flow of an in-network call finished; the last one frees the tree for the next
    /// waiting call, whose released flows start now.
    pub(super) fn inr_flow_finished(&mut self, fid: FlowId) {
        let Some(inr) = &mut self.in_network else {
            return;
        };
        let c = inr.flow_call[fid];
        if c == NO_CALL {
            return;
        }
        let call = &mut inr.calls[c as usize];
        call.left -= 1;
        if call.left > 0 {
            return;
        }
        let tree = &mut inr.trees[call.tree as usize];
        tree.active = NO_CALL;
        if let Some(next) = tree.queue.pop_front() {
            let flows: Vec<FlowId> = inr.calls[next as usize]
                .flows
                .iter()
                .copied()
                .filter(|&f| self.flows[f].start != crate::transport::NEVER)
                .collect();
            for f in flows {
                self.events.push(self.now, Event::FlowStart(f));
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
                    // The root: the result goes down.
                    self.packets.get_mut(head).flags |= flags::INR_DOWN;
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
        let call = inr.flow_call[self.packets.get(pkt).flow];
        for i in 0..k {
            let inr = self.in_network.as_ref().expect("engine");
            let (down, rank) = inr.trees[t].nodes[ni].children[i];
            let copy = if i + 1 == k {
                pkt
            } else {
                let p = *self.packets.get(pkt);
                self.packets.alloc(p)
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
            self.switch_enqueue(node, down, copy);
        }
    }

    /// The root answers an operand for a sequence it already combined: the result for that rank
    /// alone, routed to it.
    fn inr_repair(&mut self, node: NodeId, pkt: PacketId) {
        let inr = self.in_network.as_mut().expect("engine");
        inr.counters.repairs += 1;
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
}
