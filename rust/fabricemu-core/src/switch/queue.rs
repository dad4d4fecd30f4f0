//! One egress port's queues: a FIFO per priority class, plus a MAC control class for PAUSE/RESUME
//! frames that goes before everything and is never paused. Served in strict priority, or deficit
//! weighted round robin over the eight priorities.
//!
//! Each class is a ring buffer of packet ids. A list threaded through the packets' records would
//! make every push touch the tail packet, queued a while ago and usually out of cache (profile of a
//! k=8 fat tree: the push's write to the tail was a tenth of the data cache misses of the run);
//! the ring's tail slot sits beside the previous push's. A ring only grows (to the deepest the
//! class has been, a power of two), so a run in its steady state allocates nothing.

use std::collections::VecDeque;

use crate::packet::{PacketArena, PacketId};

use super::NUM_PRIORITIES;

/// Eight priorities plus MAC control.
pub const NUM_CLASSES: usize = NUM_PRIORITIES + 1;
/// Class index of PFC frames.
pub const MAC_CONTROL_CLASS: u8 = NUM_PRIORITIES as u8;

/// One class of a port: its ring and its counters together, so that a push or a pop touches the
/// port's header and this (a hot/cold split by class: the k=8 profile saw the per-class counters
/// and rings of one push spread over four cache lines when they were arrays by field).
#[derive(Debug, Default)]
struct ClassQueue {
    /// The packets, oldest first.
    ring: VecDeque<PacketId>,
    /// Bytes and packets waiting, and the most bytes seen since `take_max`.
    bytes: u32,
    packets: u32,
    max: u32,
}

#[derive(Debug, Default)]
pub struct PortQueue {
    /// Bit c set when class c is non-empty.
    nonempty: u16,
    /// Bytes waiting (all classes).
    pub bytes: u64,
    classes: [ClassQueue; NUM_CLASSES],
}

impl PortQueue {
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.nonempty == 0
    }

    /// Whether a class not in `paused` (a mask of priorities) has a packet.
    #[inline]
    pub fn has_sendable(&self, paused: u8) -> bool {
        self.nonempty & !(paused as u16) != 0
    }

    #[inline]
    pub fn push(&mut self, pkt: PacketId, class: u8, wire_bytes: u32) {
        let c = class as usize;
        self.nonempty |= 1 << c;
        self.bytes += wire_bytes as u64;
        let q = &mut self.classes[c];
        q.ring.push_back(pkt);
        q.bytes += wire_bytes;
        q.packets += 1;
        q.max = q.max.max(q.bytes);
    }

    /// Bytes waiting in class `c`.
    #[inline]
    pub fn class_bytes(&self, c: usize) -> u32 {
        self.classes[c].bytes
    }

    /// Packets waiting in class `c`.
    #[inline]
    pub fn class_packets(&self, c: usize) -> u32 {
        self.classes[c].packets
    }

    /// Strict priority: the head of the highest non-empty class not paused.
    #[inline]
    pub fn pop_strict(&mut self, arena: &PacketArena, paused: u8) -> Option<PacketId> {
        let eligible = self.nonempty & !(paused as u16);
        if eligible == 0 {
            return None;
        }
        let c = 15 - eligible.leading_zeros() as usize;
        self.pop_class(arena, c)
    }

    /// Deficit weighted round robin over priorities (MAC control still first).
    pub fn pop_dwrr(
        &mut self,
        arena: &PacketArena,
        paused: u8,
        dwrr: &mut DwrrState,
        weights: &[u32; NUM_PRIORITIES],
        quantum: u32,
    ) -> Option<PacketId> {
        let eligible = self.nonempty & !(paused as u16);
        if eligible == 0 {
            return None;
        }
        if eligible & (1 << MAC_CONTROL_CLASS) != 0 {
            return self.pop_class(arena, MAC_CONTROL_CLASS as usize);
        }
        loop {
            let c = dwrr.cursor as usize;
            if eligible & (1 << c) != 0 {
                let head = *self.classes[c].ring.front().expect("non-empty class");
                let size = arena.get(head).wire_bytes as i64;
                if dwrr.deficit[c] >= size {
                    dwrr.deficit[c] -= size;
                    let pkt = self.pop_class(arena, c);
                    if self.classes[c].ring.is_empty() {
                        dwrr.deficit[c] = 0;
                        dwrr.cursor = (dwrr.cursor + 1) % NUM_PRIORITIES as u8;
                        dwrr.fresh = true;
                    }
                    return pkt;
                }
                if dwrr.fresh {
                    dwrr.deficit[c] += weights[c] as i64 * quantum as i64;
                    dwrr.fresh = false;
                    continue;
                }
            } else {
                dwrr.deficit[c] = 0;
            }
            dwrr.cursor = (dwrr.cursor + 1) % NUM_PRIORITIES as u8;
            dwrr.fresh = true;
        }
    }

    #[inline]
    fn pop_class(&mut self, arena: &PacketArena, c: usize) -> Option<PacketId> {
        let q = &mut self.classes[c];
        let pkt = q.ring.pop_front()?;
        let w = arena.get(pkt).wire_bytes;
        q.bytes -= w;
        q.packets -= 1;
        if q.ring.is_empty() {
            self.nonempty &= !(1 << c);
        }
        self.bytes -= w as u64;
        Some(pkt)
    }

    /// The most bytes class `c` held since the last call (then restarts from the current depth).
    pub fn take_max(&mut self, c: usize) -> u32 {
        let q = &mut self.classes[c];
        std::mem::replace(&mut q.max, q.bytes)
    }

    /// Packets waiting in all classes.
    pub fn len(&self) -> usize {
        self.classes.iter().map(|c| c.ring.len()).sum()
    }

    /// The oldest packet of class `c`.
    pub fn class_front(&self, c: usize) -> Option<PacketId> {
        self.classes[c].ring.front().copied()
    }

    /// Packets of class `c`, oldest first.
    pub fn class_packets_iter(&self, c: usize) -> impl Iterator<Item = PacketId> + '_ {
        self.classes[c].ring.iter().copied()
    }

    /// Ring slots allocated (all classes): the queue's memory beyond its fixed part.
    pub fn ring_capacity(&self) -> usize {
        self.classes.iter().map(|c| c.ring.capacity()).sum()
    }
}

/// Per-port DWRR state.
#[derive(Debug, Clone, Copy)]
pub struct DwrrState {
    deficit: [i64; NUM_PRIORITIES],
    cursor: u8,
    /// The cursor just moved: the class gets its quantum before it is served.
    fresh: bool,
}

impl Default for DwrrState {
    fn default() -> Self {
        Self {
            deficit: [0; NUM_PRIORITIES],
            cursor: 0,
            fresh: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Packet;

    fn alloc(arena: &mut PacketArena, seq: u32, wire: u32) -> PacketId {
        arena.alloc(Packet::data(
            crate::ids::FlowId::new(0),
            seq,
            crate::ids::NodeId::new(0),
            0,
            wire,
            0,
            false,
        ))
    }

    #[test]
    fn strict_priority_then_fifo_and_pause() {
        let mut arena = PacketArena::default();
        let ids: Vec<_> = (0..5).map(|i| alloc(&mut arena, i, 10)).collect();
        let mut q = PortQueue::default();
        q.push(ids[0], 3, 10);
        q.push(ids[1], 3, 10);
        q.push(ids[2], 7, 10);
        q.push(ids[3], 0, 10);
        q.push(ids[4], MAC_CONTROL_CLASS, 10);
        assert_eq!(q.bytes, 50);
        assert_eq!(q.class_bytes(3), 20);
        // Priority 7 paused: MAC control first, then 3, 3, 0; 7 stays.
        let order: Vec<_> = std::iter::from_fn(|| q.pop_strict(&arena, 1 << 7)).collect();
        assert_eq!(order, vec![ids[4], ids[0], ids[1], ids[3]]);
        assert!(!q.has_sendable(1 << 7) && q.has_sendable(0));
        assert_eq!(q.pop_strict(&arena, 0), Some(ids[2]));
        assert!(q.is_empty());
        assert_eq!(q.take_max(3), 20);
        assert_eq!(q.take_max(3), 0);
    }

    #[test]
    fn dwrr_shares_bytes_by_weight() {
        let mut arena = PacketArena::default();
        let mut q = PortQueue::default();
        for i in 0..300 {
            let id = alloc(&mut arena, i, 1000);
            q.push(id, if i % 2 == 0 { 1 } else { 2 }, 1000);
        }
        let mut weights = [1u32; 8];
        weights[1] = 1;
        weights[2] = 3;
        let mut st = DwrrState::default();
        let mut served = [0u32; 8];
        for _ in 0..200 {
            let id = q.pop_dwrr(&arena, 0, &mut st, &weights, 1000).unwrap();
            served[arena.get(id).seq as usize % 2 + 1] += 1;
        }
        // While both are backlogged, class 2 gets three times class 1's bytes.
        assert_eq!(served[1], 50);
        assert_eq!(served[2], 150);
    }
}
