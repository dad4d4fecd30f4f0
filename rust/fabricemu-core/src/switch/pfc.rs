//! Priority flow control: bytes are counted per (ingress port, priority) at every switch; above
//! XOFF the switch sends PAUSE to the upstream port, below XOFF - xon_offset it sends RESUME. The
//! headroom reserved per (ingress port, lossless priority) absorbs what is still in flight.
//!
//! Ingress ports are named by the upstream's egress port id `p` (the link the bytes came over,
//! `Packet::ingress`), which is also the port a PAUSE stops.

use crate::config::{PfcSpec, PfcThreshold};
use crate::ids::{IdVec, NodeId, PortId};
use crate::topology::Fabric;

use super::NUM_PRIORITIES;

/// Wire size of a PFC frame (a minimum Ethernet frame).
pub const PFC_FRAME_BYTES: u32 = 64;

#[derive(Debug, Clone)]
pub struct Pfc {
    pub spec: PfcSpec,
    /// Per link `p` and priority: bytes in the downstream switch that arrived over it.
    ingress_bytes: IdVec<PortId, [u64; NUM_PRIORITIES]>,
    /// Per link `p` and priority: of those, bytes admitted into the headroom.
    headroom_used: IdVec<PortId, [u64; NUM_PRIORITIES]>,
    /// Per link `p`: headroom of each lossless priority at its downstream switch.
    headroom: IdVec<PortId, u64>,
    /// Per link `p`: priorities the downstream switch has paused.
    paused_by_us: IdVec<PortId, u8>,
}

/// What an enqueue or dequeue asks of the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PfcAction {
    None,
    Pause,
    Resume,
}

impl Pfc {
    /// PFC state for `fabric`, and the headroom each node reserves out of its buffer.
    pub fn new(
        spec: PfcSpec,
        fabric: &Fabric,
        max_packet_wire: u64,
        switch_latency_ps: u64,
    ) -> (Self, IdVec<NodeId, u64>) {
        let np = fabric.num_ports() as usize;
        let lossless = spec.priorities.count_ones() as u64;
        let mut headroom: IdVec<PortId, u64> = IdVec::from_elem(0, np);
        let mut reserved = IdVec::from_elem(0u64, fabric.num_nodes as usize);
        for p in fabric.ports() {
            let down = fabric.peer_node[p];
            if fabric.is_host(down) {
                continue; // hosts do not send PFC
            }
            let h = spec.headroom_bytes.unwrap_or_else(|| {
                auto_headroom(
                    fabric.rate_bps[p],
                    fabric.delay_ps[p] + switch_latency_ps,
                    max_packet_wire,
                )
            });
            headroom[p] = h;
            reserved[down] += h * lossless;
        }
        let pfc = Self {
            spec,
            ingress_bytes: IdVec::from_elem([0; NUM_PRIORITIES], np),
            headroom_used: IdVec::from_elem([0; NUM_PRIORITIES], np),
            headroom,
            paused_by_us: IdVec::from_elem(0, np),
        };
        (pfc, reserved)
    }

    #[inline]
    pub fn is_lossless(&self, priority: u8) -> bool {
        self.spec.priorities & (1 << priority) != 0
    }

    #[inline]
    pub fn headroom_of(&self, p: PortId) -> u64 {
        self.headroom[p]
    }

    #[inline]
    pub fn headroom_used(&self, p: PortId, priority: u8) -> u64 {
        self.headroom_used[p][priority as usize]
    }

    #[inline]
    fn xoff(&self, free_shared: u64) -> u64 {
        match self.spec.xoff {
            PfcThreshold::Static(x) => x,
            PfcThreshold::Dynamic(beta) => (beta * free_shared as f64) as u64,
        }
    }

    /// Bytes of a lossless packet entered the switch over link `p`.
    #[inline]
    pub fn on_enqueue(
        &mut self,
        p: PortId,
        priority: u8,
        bytes: u64,
        in_headroom: bool,
        free_shared: u64,
    ) -> PfcAction {
        let c = priority as usize;
        self.ingress_bytes[p][c] += bytes;
        if in_headroom {
            self.headroom_used[p][c] += bytes;
        }
        let bit = 1 << priority;
        if self.paused_by_us[p] & bit == 0 && self.ingress_bytes[p][c] > self.xoff(free_shared) {
            self.paused_by_us[p] |= bit;
            return PfcAction::Pause;
        }
        PfcAction::None
    }

    /// Bytes of a lossless packet that came over link `p` left the switch.
    #[inline]
    pub fn on_dequeue(
        &mut self,
        p: PortId,
        priority: u8,
        bytes: u64,
        in_headroom: bool,
        free_shared: u64,
    ) -> PfcAction {
        let c = priority as usize;
        self.ingress_bytes[p][c] -= bytes;
        if in_headroom {
            self.headroom_used[p][c] -= bytes;
        }
        let bit = 1 << priority;
        // Resume only once the headroom is empty again: a resumed upstream may send a full round
        // trip before a new PAUSE takes effect, and that is what the headroom is sized for.
        if self.paused_by_us[p] & bit != 0 && self.headroom_used[p][c] == 0 {
            let q = self.ingress_bytes[p][c];
            if q == 0 || q + self.spec.xon_offset_bytes <= self.xoff(free_shared) {
                self.paused_by_us[p] &= !bit;
                return PfcAction::Resume;
            }
        }
        PfcAction::None
    }

    /// Bytes queued at the downstream switch that came over link `p` with `priority`.
    pub fn ingress_bytes(&self, p: PortId, priority: u8) -> u64 {
        self.ingress_bytes[p][priority as usize]
    }

    /// Link `p` went down: its downstream switch no longer counts itself as pausing it (the
    /// link's MAC state resets, and frames on a down link are lost), so it pauses anew if it is
    /// still congested once the link is back.
    pub fn forget_pauses(&mut self, p: PortId) {
        self.paused_by_us[p] = 0;
    }

    /// Whether the downstream switch of link `p` has paused `priority` on it (its last frame for
    /// that class was a PAUSE).
    pub fn paused_by_us(&self, p: PortId, priority: u8) -> bool {
        self.paused_by_us[p] & (1 << priority) != 0
    }
}

/// Headroom for one (ingress port, priority): the bytes that can still arrive after the PAUSE is
/// decided. The PAUSE may wait behind one packet on the way up and takes its own serialisation and
/// a propagation delay; the upstream finishes the packet it is sending; everything it sent in the
/// last propagation delay is still on the wire; and a packet partly sent before that window still
/// lands after the decision. So: a round trip of the link's bytes, three packets and the frame.
pub fn auto_headroom(rate_bps: u64, one_way_ps: u64, max_packet_wire: u64) -> u64 {
    let round_trip_bytes =
        (2 * one_way_ps as u128 * rate_bps as u128).div_ceil(8 * 1_000_000_000_000) as u64;
    round_trip_bytes + 3 * max_packet_wire + PFC_FRAME_BYTES as u64
}

/// A cycle in a wait-for graph, if there is one (the engine's nodes are (port, class) channels,
/// edge u -> v when paused u's packets sit in paused v). Nodes are visited in id order, and each
/// node's edges in the order of their far ends, so the answer is deterministic. The work grows
/// with the edges, not the fabric: only the nodes an edge names are indexed (it took a list per
/// channel of the fabric, 8 per port, at every check until 2026-12-05). `edges` come sorted and
/// without repeats, as `WaitCandidates::edges` makes them.
pub fn find_cycle(edges: &[(u32, u32)]) -> Option<Vec<u32>> {
    debug_assert!(edges.windows(2).all(|w| w[0] < w[1]), "sorted, no repeats");
    // The nodes the edges name, in id order: a node's colour and parent are at its index here.
    let mut nodes: Vec<u32> = edges.iter().flat_map(|&(u, v)| [u, v]).collect();
    nodes.sort_unstable();
    nodes.dedup();
    let index = |n: u32| nodes.binary_search(&n).expect("a node an edge names");
    // Node n's edges: a run of the sorted list.
    let out = |n: u32| {
        let from = edges.partition_point(|e| e.0 < n);
        let to = from + edges[from..].partition_point(|e| e.0 == n);
        &edges[from..to]
    };
    // Iterative DFS with colours: 0 new, 1 on stack, 2 done.
    let mut colour = vec![0u8; nodes.len()];
    // Set for every node pushed after the start; the walk back from a back edge stays on those.
    let mut parent: Vec<u32> = vec![u32::MAX; nodes.len()];
    for (i, &start) in nodes.iter().enumerate() {
        if colour[i] != 0 || out(start).is_empty() {
            continue;
        }
        let mut stack: Vec<(u32, usize)> = vec![(start, 0)];
        colour[i] = 1;
        while let Some(&mut (u, ref mut next)) = stack.last_mut() {
            if let Some(&(_, v)) = out(u).get(*next) {
                *next += 1;
                let vi = index(v);
                match colour[vi] {
                    0 => {
                        colour[vi] = 1;
                        parent[vi] = u;
                        stack.push((v, 0));
                    }
                    1 => {
                        // Back edge u -> v: the cycle is v ... u.
                        let mut cycle = vec![u];
                        let mut w = u;
                        while w != v {
                            w = parent[index(w)];
                            debug_assert!(w != u32::MAX, "on the DFS stack below v");
                            cycle.push(w);
                        }
                        cycle.reverse();
                        return Some(cycle);
                    }
                    _ => {}
                }
            } else {
                colour[index(u)] = 2;
                stack.pop();
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headroom_covers_a_round_trip_and_three_packets() {
        // 100 Gbps, 500 ns: 6250 B each way.
        assert_eq!(
            auto_headroom(100_000_000_000, 500_000, 4158),
            12_500 + 3 * 4158 + 64
        );
    }

    #[test]
    fn cycles_are_found() {
        assert_eq!(find_cycle(&[(0, 1), (1, 2)]), None);
        assert_eq!(
            find_cycle(&[(0, 1), (1, 2), (2, 3), (3, 1)]),
            Some(vec![1, 2, 3])
        );
        assert_eq!(find_cycle(&[(2, 2)]), Some(vec![2]));
    }

    /// The dense search this one replaced: a list per node of the whole graph.
    fn dense_cycle(num_nodes: usize, edges: &[(u32, u32)]) -> Option<Vec<u32>> {
        let mut adj: Vec<Vec<u32>> = vec![Vec::new(); num_nodes];
        for &(u, v) in edges {
            adj[u as usize].push(v);
        }
        for a in &mut adj {
            a.sort_unstable();
            a.dedup();
        }
        let mut colour = vec![0u8; num_nodes];
        let mut parent: Vec<Option<u32>> = vec![None; num_nodes];
        for start in 0..num_nodes {
            if colour[start] != 0 || adj[start].is_empty() {
                continue;
            }
            let mut stack: Vec<(u32, usize)> = vec![(start as u32, 0)];
            colour[start] = 1;
            while let Some(&mut (u, ref mut next)) = stack.last_mut() {
                if let Some(&v) = adj[u as usize].get(*next) {
                    *next += 1;
                    match colour[v as usize] {
                        0 => {
                            colour[v as usize] = 1;
                            parent[v as usize] = Some(u);
                            stack.push((v, 0));
                        }
                        1 => {
                            let mut cycle = vec![u];
                            let mut w = u;
                            while w != v {
                                w = parent[w as usize].unwrap();
                                cycle.push(w);
                            }
                            cycle.reverse();
                            return Some(cycle);
                        }
                        _ => {}
                    }
                } else {
                    colour[u as usize] = 2;
                    stack.pop();
                }
            }
        }
        None
    }

    /// The same cycle as the dense search, on random graphs of few and many edges, sparse node
    /// ids included.
    #[test]
    fn the_same_cycle_as_a_search_over_every_node() {
        let mut rng = crate::rng::RngStream::SourcePorts.rng(7);
        let mut cycles = 0;
        for round in 0..2_000u64 {
            let nodes = 2 + rng.below(60) as u32;
            let spread = if round % 2 == 0 { 1 } else { 1_000 };
            let mut edges: Vec<(u32, u32)> = (0..rng.below(3 * nodes as u64))
                .map(|_| {
                    let u = rng.below(nodes as u64) as u32 * spread;
                    (u, rng.below(nodes as u64) as u32 * spread)
                })
                .collect();
            // As the wait-for graph hands them over.
            edges.sort_unstable();
            edges.dedup();
            let want = dense_cycle((nodes * spread) as usize, &edges);
            cycles += want.is_some() as u32;
            assert_eq!(find_cycle(&edges), want, "edges {edges:?}");
        }
        assert!(
            cycles > 200 && cycles < 1_800,
            "{cycles} graphs of 2,000 had a cycle"
        );
    }
}
