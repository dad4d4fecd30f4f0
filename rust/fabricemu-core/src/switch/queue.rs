//! One egress port's queues: a FIFO per priority class threaded through the packets, plus a MAC
//! control class for PAUSE/RESUME frames that goes before everything and is never paused. Served
//! in strict priority, or deficit weighted round robin over the eight priorities.

use crate::packet::{PacketArena, PacketId, PacketList};

use super::NUM_PRIORITIES;

/// Eight priorities plus MAC control.
pub const NUM_CLASSES: usize = NUM_PRIORITIES + 1;
/// Class index of PFC frames.
pub const MAC_CONTROL_CLASS: u8 = NUM_PRIORITIES as u8;

/// One class's FIFO and what it holds (16 bytes: four to a cache line).
#[derive(Debug, Default, Clone, Copy)]
struct ClassQueue {
    list: PacketList,
    bytes: u32,
    packets: u32,
}

/// Where class c's record sits in [`PortQueue`]'s `slots`: the default data (3) and control (7)
/// classes and MAC control (8) share the first cache line with the header, so a push or pop of
/// the usual traffic touches one line of the queue instead of the three or four that per-field
/// arrays spread a class over.
const SLOT: [usize; NUM_CLASSES] = [3, 4, 5, 0, 6, 7, 8, 1, 2];
const _: () = assert!(
    SLOT[super::DATA_PRIORITY as usize] == 0
        && SLOT[super::CONTROL_PRIORITY as usize] == 1
        && SLOT[MAC_CONTROL_CLASS as usize] == 2
);

/// Three cache lines: the header (12 bytes), then the classes from offset 12 (slots 0-2 in the
/// first line), the high-water marks in the last 36 bytes.
#[derive(Debug)]
#[repr(C, align(64))]
pub struct PortQueue {
    /// Bytes waiting (all classes).
    pub bytes: u64,
    /// Bit c set when class c is non-empty.
    nonempty: u16,
    /// Keep `class_max` (only queues.arrow reads it, and it is a line the push would not
    /// otherwise touch).
    track_max: bool,
    /// Per class (at `SLOT[c]`): its FIFO, bytes and packets waiting.
    slots: [ClassQueue; NUM_CLASSES],
    /// Per class: the most bytes seen since `take_max`.
    class_max: [u32; NUM_CLASSES],
}

const _: () = assert!(std::mem::size_of::<PortQueue>() == 192);
const _: () = assert!(std::mem::offset_of!(PortQueue, slots) + 3 * 16 <= 64);

impl Default for PortQueue {
    fn default() -> Self {
        Self::new(true)
    }
}

impl PortQueue {
    /// An empty queue; `keep_max`: keep its classes' high-water marks (without them `take_max`
    /// returns the current depth: for runs that do not sample queues).
    pub fn new(keep_max: bool) -> Self {
        Self {
            nonempty: 0,
            track_max: keep_max,
            bytes: 0,
            slots: [ClassQueue::default(); NUM_CLASSES],
            class_max: [0; NUM_CLASSES],
        }
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.nonempty == 0
    }

    /// Whether a class not in `paused` (a mask of priorities) has a packet.
    #[inline]
    pub fn has_sendable(&self, paused: u8) -> bool {
        self.nonempty & !(paused as u16) != 0
    }

    /// Bytes waiting in class `c`.
    #[inline]
    pub fn class_bytes(&self, c: usize) -> u32 {
        self.slots[SLOT[c]].bytes
    }

    /// Packets waiting in class `c`.
    #[inline]
    pub fn class_packets(&self, c: usize) -> u32 {
        self.slots[SLOT[c]].packets
    }

    #[inline]
    pub fn push(&mut self, arena: &mut PacketArena, pkt: PacketId, class: u8, wire_bytes: u32) {
        let c = class as usize;
        let q = &mut self.slots[SLOT[c]];
        q.list.push_back(arena, pkt);
        q.bytes += wire_bytes;
        q.packets += 1;
        let class_bytes = q.bytes;
        self.nonempty |= 1 << c;
        self.bytes += wire_bytes as u64;
        if self.track_max {
            self.class_max[c] = self.class_max[c].max(class_bytes);
        }
    }

    /// Strict priority: the highest non-empty class not paused.
    #[inline(always)]
    fn strict_class(&self, paused: u8) -> Option<usize> {
        let eligible = self.nonempty & !(paused as u16);
        (eligible != 0).then(|| 15 - eligible.leading_zeros() as usize)
    }

    /// Strict priority: the head of the highest non-empty class not paused.
    #[inline]
    pub fn pop_strict(&mut self, arena: &PacketArena, paused: u8) -> Option<PacketId> {
        let c = self.strict_class(paused)?;
        self.pop_class(arena, c)
    }

    /// The packet `pop_strict` would return, left in place.
    #[inline]
    pub fn peek_strict(&self, paused: u8) -> Option<PacketId> {
        self.slots[SLOT[self.strict_class(paused)?]].list.front()
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
                let head = self.class_list(c).front().expect("non-empty class");
                let size = arena.get(head).wire_bytes as i64;
                if dwrr.deficit[c] >= size {
                    dwrr.deficit[c] -= size;
                    let pkt = self.pop_class(arena, c);
                    if self.class_list(c).is_empty() {
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
        let q = &mut self.slots[SLOT[c]];
        let pkt = q.list.pop_front(arena)?;
        let w = arena.get(pkt).wire_bytes;
        q.bytes -= w;
        q.packets -= 1;
        if q.list.is_empty() {
            self.nonempty &= !(1 << c);
        }
        self.bytes -= w as u64;
        Some(pkt)
    }

    /// The most bytes class `c` held since the last call (then restarts from the current depth).
    pub fn take_max(&mut self, c: usize) -> u32 {
        let now = self.class_bytes(c);
        if !self.track_max {
            return now;
        }
        std::mem::replace(&mut self.class_max[c], now)
    }

    /// Packets waiting in all classes (walks the lists).
    pub fn len(&self, arena: &PacketArena) -> usize {
        self.slots.iter().map(|c| c.list.len(arena)).sum()
    }

    /// Packets of class `c`, oldest first (walks the list).
    pub fn class_list(&self, c: usize) -> PacketList {
        self.slots[SLOT[c]].list
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
        q.push(&mut arena, ids[0], 3, 10);
        q.push(&mut arena, ids[1], 3, 10);
        q.push(&mut arena, ids[2], 7, 10);
        q.push(&mut arena, ids[3], 0, 10);
        q.push(&mut arena, ids[4], MAC_CONTROL_CLASS, 10);
        assert_eq!(q.bytes, 50);
        assert_eq!(q.class_bytes(3), 20);
        // Priority 7 paused: MAC control first, then 3, 3, 0; 7 stays.
        let order: Vec<_> = std::iter::from_fn(|| {
            let next = q.peek_strict(1 << 7);
            let popped = q.pop_strict(&arena, 1 << 7);
            assert_eq!(next, popped);
            popped
        })
        .collect();
        assert_eq!(order, vec![ids[4], ids[0], ids[1], ids[3]]);
        assert!(!q.has_sendable(1 << 7) && q.has_sendable(0));
        assert_eq!(q.pop_strict(&arena, 0), Some(ids[2]));
        assert!(q.is_empty());
        assert_eq!(q.take_max(3), 20);
        assert_eq!(q.take_max(3), 0);
    }

    #[test]
    fn a_queue_without_max_reports_its_depth_and_counts_the_same() {
        let mut arena = PacketArena::default();
        let mut tracked = PortQueue::default();
        let mut plain = PortQueue::new(false);
        for (seq, class) in [(0, 3), (1, 3), (2, 0), (3, 7)] {
            for q in [&mut tracked, &mut plain] {
                let id = alloc(&mut arena, seq, 100);
                q.push(&mut arena, id, class, 100);
            }
        }
        for q in [&mut tracked, &mut plain] {
            assert_eq!(q.pop_strict(&arena, 0).map(|p| arena.get(p).seq), Some(3));
            assert_eq!(q.pop_strict(&arena, 0).map(|p| arena.get(p).seq), Some(0));
            assert_eq!(
                (q.bytes, q.class_bytes(3), q.class_packets(3)),
                (200, 100, 1)
            );
            assert_eq!((q.class_bytes(0), q.class_packets(0)), (100, 1));
        }
        // Class 3 held 200 bytes at most: only the tracking queue remembers it.
        assert_eq!(tracked.take_max(3), 200);
        assert_eq!(plain.take_max(3), 100);
        assert_eq!(tracked.take_max(3), 100);
    }

    #[test]
    fn dwrr_shares_bytes_by_weight() {
        let mut arena = PacketArena::default();
        let mut q = PortQueue::default();
        for i in 0..300 {
            let id = alloc(&mut arena, i, 1000);
            q.push(&mut arena, id, if i % 2 == 0 { 1 } else { 2 }, 1000);
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
