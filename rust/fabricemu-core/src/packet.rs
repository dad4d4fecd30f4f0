//! The Packet record and its arena: packets are `Copy` records in one `Vec`, named by `PacketId`;
//! freed slots are recycled through a free list, so the hot path allocates nothing per packet.
//! A packet is in at most one FIFO at a time (an egress queue or a link), so FIFOs are lists
//! threaded through the packets' `next` field: no per-queue buffers, no extra cache misses.

use crate::units::Time;

/// Index of a packet in the arena.
pub type PacketId = u32;

/// No packet (end of a list).
pub const NIL: PacketId = PacketId::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum PacketKind {
    Data,
    /// Cumulative acknowledgement: `seq` is the next packet the receiver expects.
    Ack,
    /// Loss report: `seq` is the packet the receiver expects (a gap was seen).
    Nack,
    /// DCQCN congestion notification from the receiver (NP) to the sender (RP).
    Cnp,
    /// PFC frames: `seq` is the priority paused or resumed.
    Pause,
    Resume,
}

/// `Packet::flags` bits.
pub mod flags {
    /// ECN-capable transport.
    pub const ECT: u8 = 1;
    /// Congestion experienced (marked by a switch).
    pub const CE: u8 = 2;
    /// Admitted into PFC headroom (released from there).
    pub const HEADROOM: u8 = 4;
    /// A retransmission (the receiver tells reordering from loss with it).
    pub const RETX: u8 = 8;
    /// At a switch: the packet moved up one priority class here (a dragonfly hop class), so its
    /// ingress class, for PFC accounting, is `priority - 1`.
    pub const CLASS_UP: u8 = 16;
    /// Dragonfly: the source router chose the packet's path (minimal or an intermediate group);
    /// later routers of the source group do not re-decide (they do under PAR).
    pub const DECIDED: u8 = 32;
}

/// `Packet::via` when the packet routes minimally (no intermediate group, or already past it).
pub const NO_VIA: u16 = u16::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet {
    /// Header fields folded into one key (src, dst, ports), which ECMP hashes with each switch's seed.
    pub header_key: u64,
    /// On a link: when the packet reaches the far end.
    pub arrive: Time,
    /// The next packet in the FIFO this packet is in.
    pub next: PacketId,
    pub flow: u32,
    /// Data: packet index within the flow. Ack/Nack: the next expected index.
    pub seq: u32,
    /// Destination host (routing looks only at this and `header_key`).
    pub dst: u32,
    /// Bytes on the wire, headers included.
    pub wire_bytes: u32,
    pub kind: PacketKind,
    /// Priority class (0..8, higher is served first).
    pub priority: u8,
    /// At a switch: the link it arrived over (the upstream's egress port), for PFC accounting.
    pub ingress: u32,
    pub flags: u8,
    /// Non-minimal dragonfly routing: the intermediate group still to reach, or `NO_VIA`.
    pub via: u16,
    /// Global (inter-group) links crossed so far.
    pub ghops: u8,
}

impl Packet {
    /// The class the packet arrived in at its current switch (PFC counts it there).
    #[inline(always)]
    pub fn ingress_class(&self) -> u8 {
        self.priority - ((self.flags & flags::CLASS_UP) != 0) as u8
    }
}

/// All live packets; ids are recycled.
#[derive(Debug, Default)]
pub struct PacketArena {
    slots: Vec<Packet>,
    free: Vec<PacketId>,
    live: u64,
    created: u64,
}

impl PacketArena {
    #[inline]
    pub fn alloc(&mut self, p: Packet) -> PacketId {
        self.live += 1;
        self.created += 1;
        match self.free.pop() {
            Some(id) => {
                self.slots[id as usize] = p;
                id
            }
            None => {
                self.slots.push(p);
                (self.slots.len() - 1) as PacketId
            }
        }
    }

    #[inline]
    pub fn release(&mut self, id: PacketId) {
        self.live -= 1;
        self.free.push(id);
    }

    #[inline]
    pub fn get(&self, id: PacketId) -> &Packet {
        &self.slots[id as usize]
    }

    #[inline]
    pub fn get_mut(&mut self, id: PacketId) -> &mut Packet {
        &mut self.slots[id as usize]
    }

    /// Packets created and not yet released (in queues, on links).
    pub fn live(&self) -> u64 {
        self.live
    }

    /// Packets ever created.
    pub fn created(&self) -> u64 {
        self.created
    }

    /// Arena slots allocated (the high-water mark of live packets).
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }
}

/// A FIFO of packets threaded through their `next` fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketList {
    head: PacketId,
    tail: PacketId,
}

impl Default for PacketList {
    fn default() -> Self {
        Self::EMPTY
    }
}

impl PacketList {
    pub const EMPTY: PacketList = PacketList {
        head: NIL,
        tail: NIL,
    };

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.head == NIL
    }

    #[inline]
    pub fn front(&self) -> Option<PacketId> {
        (self.head != NIL).then_some(self.head)
    }

    #[inline]
    pub fn push_back(&mut self, arena: &mut PacketArena, id: PacketId) {
        arena.get_mut(id).next = NIL;
        if self.tail == NIL {
            self.head = id;
        } else {
            arena.get_mut(self.tail).next = id;
        }
        self.tail = id;
    }

    #[inline]
    pub fn pop_front(&mut self, arena: &PacketArena) -> Option<PacketId> {
        if self.head == NIL {
            return None;
        }
        let id = self.head;
        self.head = arena.get(id).next;
        if self.head == NIL {
            self.tail = NIL;
        }
        Some(id)
    }

    /// Number of packets (walks the list: for checks, not the hot path).
    pub fn len(&self, arena: &PacketArena) -> usize {
        let mut n = 0;
        let mut at = self.head;
        while at != NIL {
            n += 1;
            at = arena.get(at).next;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(seq: u32) -> Packet {
        Packet {
            header_key: 0,
            arrive: 0,
            next: NIL,
            flow: 0,
            seq,
            dst: 0,
            wire_bytes: 1,
            kind: PacketKind::Data,
            priority: 0,
            ingress: u32::MAX,
            flags: 0,
            via: NO_VIA,
            ghops: 0,
        }
    }

    #[test]
    fn a_packet_record_stays_48_bytes() {
        // Queued packets are touched once per hop; the dragonfly fields live in former padding.
        assert_eq!(std::mem::size_of::<Packet>(), 48);
    }

    #[test]
    fn lists_are_fifo_and_slots_recycle() {
        let mut arena = PacketArena::default();
        let mut list = PacketList::EMPTY;
        let ids: Vec<_> = (0..5).map(|i| arena.alloc(pkt(i))).collect();
        for &id in &ids {
            list.push_back(&mut arena, id);
        }
        assert_eq!(list.len(&arena), 5);
        let first = list.pop_front(&arena).unwrap();
        assert_eq!(arena.get(first).seq, 0);
        arena.release(first);
        let reused = arena.alloc(pkt(9));
        assert_eq!(reused, first, "freed slots are reused");
        list.push_back(&mut arena, reused);
        let order: Vec<u32> = std::iter::from_fn(|| list.pop_front(&arena))
            .map(|id| arena.get(id).seq)
            .collect();
        assert_eq!(order, vec![1, 2, 3, 4, 9]);
        assert!(list.is_empty());
        assert_eq!(arena.capacity(), 5);
    }
}
