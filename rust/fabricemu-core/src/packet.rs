//! The Packet record and its arena: packets are `Copy` records in one `Vec`, named by `PacketId`;
//! freed slots are recycled through a free list, so the hot path allocates nothing per packet.
//! A packet is in at most one FIFO at a time (an egress queue or a link), so FIFOs are lists
//! threaded through the packets' `next` field: no per-queue buffers, no extra cache misses.

pub use crate::ids::PacketId;
use crate::ids::{FlowId, Idx, NodeId, PortId};
use crate::units::Time;

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
    /// PFC frames: `pfc_class` is the priority paused or resumed.
    Pause,
    Resume,
    /// Receiver-driven credits: the receiver grants its sender one more packet.
    Pull,
}

impl PacketKind {
    /// A PFC frame (handled per link, not by a host or a router).
    #[inline(always)]
    pub fn is_pfc(self) -> bool {
        matches!(self, PacketKind::Pause | PacketKind::Resume)
    }
}

/// `Packet::flags` bits.
pub mod flags {
    /// ECN-capable transport.
    pub const ECT: u16 = 1;
    /// Congestion experienced (marked by a switch).
    pub const CE: u16 = 2;
    /// Admitted into PFC headroom (released from there).
    pub const HEADROOM: u16 = 4;
    /// A retransmission (the receiver tells reordering from loss with it).
    pub const RETX: u16 = 8;
    /// At a switch: the packet moved up one priority class here (a dragonfly hop class), so its
    /// ingress class, for PFC accounting, is `priority - 1`.
    pub const CLASS_UP: u16 = 16;
    /// Dragonfly: the source router chose the packet's path (minimal or an intermediate group);
    /// later routers of the source group do not re-decide (they do under PAR).
    pub const DECIDED: u16 = 32;
    /// On an ACK: the receiver saw a congestion-experienced packet since its previous ACK.
    pub const ECE: u16 = 64;
    /// On a data packet: a switch trimmed it (its payload was cut; the header is forwarded at high
    /// priority). On a NACK: the NACK is for the trimmed packet `seq` alone (not cumulative).
    pub const TRIMMED: u16 = 128;
    /// At a PXN relay GPU: held in its transit buffer (counted there until it leaves).
    pub const RELAYED: u16 = 256;
    /// An in-network collective's operand going up its reduction tree (its `pfc_class` holds the
    /// call's epoch).
    pub const INR: u16 = 512;
    /// An in-network collective's result going down its reduction tree.
    pub const INR_DOWN: u16 = 1024;
}

/// `Packet::via` when the packet routes minimally (no intermediate group, or already past it): a
/// named value in the packed record (an `Option<u16>` would grow it), read through
/// [`Packet::via_group`].
const NO_VIA: u16 = u16::MAX;

/// The record is touched once per hop: it stays 48 bytes (the ids are `u32` newtypes; the absent
/// `ingress` and `flow` are named values, not `Option`s, which would grow it).
const _: () = assert!(std::mem::size_of::<Packet>() == 48);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet {
    /// Header fields folded into one key (src, dst, ports), which ECMP hashes with each switch's seed.
    pub header_key: u64,
    /// On a link: when the packet reaches the far end.
    pub arrive: Time,
    /// The next packet in the FIFO this packet is in.
    next: PacketId,
    /// The flow (`FlowId::NONE` for a PFC frame; read it with [`Packet::flow_id`] where a PFC
    /// frame can be met).
    pub flow: FlowId,
    /// Data: packet index within the flow. Ack/Nack/Cnp: the next expected index. PFC: 0.
    pub seq: u32,
    /// Destination node (routing looks only at this and `header_key`).
    pub dst: NodeId,
    /// Bytes on the wire, headers included.
    pub wire_bytes: u32,
    pub kind: PacketKind,
    /// Priority class (0..8, higher is served first).
    pub priority: u8,
    /// At a switch: the link it arrived over, as the upstream's egress port, for PFC accounting;
    /// `PortId::NONE` before the first switch (read it with [`Packet::ingress_port`]).
    pub ingress: PortId,
    /// [`flags`] bits.
    pub flags: u16,
    /// Non-minimal dragonfly routing: the intermediate group still to reach, or `NO_VIA` (see
    /// [`Packet::via_group`]).
    via: u16,
    /// Global (inter-group) links crossed so far.
    pub ghops: u8,
    /// PFC frames: the priority class paused or resumed (0 for other packets).
    pub pfc_class: u8,
}

impl Packet {
    /// A packet of `kind` fresh from a NIC: on no list, at no switch yet, minimally routed.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn new(
        kind: PacketKind,
        flow: FlowId,
        seq: u32,
        dst: NodeId,
        header_key: u64,
        wire_bytes: u32,
        priority: u8,
        flags: u16,
    ) -> Self {
        Packet {
            header_key,
            arrive: 0,
            next: PacketId::NIL,
            flow,
            seq,
            dst,
            wire_bytes,
            kind,
            priority,
            ingress: PortId::NONE,
            flags,
            via: NO_VIA,
            ghops: 0,
            pfc_class: 0,
        }
    }

    /// Data packet `seq` of `flow`, ECN-capable; `retx` marks a retransmission.
    #[inline(always)]
    pub fn data(
        flow: FlowId,
        seq: u32,
        dst: NodeId,
        header_key: u64,
        wire_bytes: u32,
        priority: u8,
        retx: bool,
    ) -> Self {
        let f = if retx {
            flags::ECT | flags::RETX
        } else {
            flags::ECT
        };
        Self::new(
            PacketKind::Data,
            flow,
            seq,
            dst,
            header_key,
            wire_bytes,
            priority,
            f,
        )
    }

    /// A receiver's ACK, NACK or CNP for `flow`, carrying the next expected packet index.
    #[inline(always)]
    pub fn control(
        kind: PacketKind,
        flow: FlowId,
        expected: u32,
        dst: NodeId,
        header_key: u64,
        wire_bytes: u32,
        priority: u8,
    ) -> Self {
        debug_assert!(matches!(
            kind,
            PacketKind::Ack | PacketKind::Nack | PacketKind::Cnp | PacketKind::Pull
        ));
        Self::new(
            kind, flow, expected, dst, header_key, wire_bytes, priority, 0,
        )
    }

    /// A PFC PAUSE (or RESUME) of `class`, sent to the upstream node `dst` in the MAC control
    /// class `priority`.
    #[inline(always)]
    pub fn pfc(pause: bool, class: u8, dst: NodeId, wire_bytes: u32, priority: u8) -> Self {
        let kind = if pause {
            PacketKind::Pause
        } else {
            PacketKind::Resume
        };
        let mut p = Self::new(kind, FlowId::NONE, 0, dst, 0, wire_bytes, priority, 0);
        p.pfc_class = class;
        p
    }

    /// The class the packet arrived in at its current switch (PFC counts it there).
    #[inline(always)]
    pub fn ingress_class(&self) -> u8 {
        self.priority - ((self.flags & flags::CLASS_UP) != 0) as u8
    }

    /// The link the packet arrived over at its current switch, if it is at a switch.
    #[inline(always)]
    pub fn ingress_port(&self) -> Option<PortId> {
        (self.ingress != PortId::NONE).then_some(self.ingress)
    }

    /// Non-minimal dragonfly routing: the intermediate group the packet still has to reach (None:
    /// it routes minimally).
    #[inline(always)]
    pub fn via_group(&self) -> Option<u16> {
        (self.via != NO_VIA).then_some(self.via)
    }

    /// Route the packet via dragonfly group `g` from here on (None: minimally).
    #[inline(always)]
    pub fn set_via_group(&mut self, g: Option<u16>) {
        debug_assert!(g != Some(NO_VIA), "group {NO_VIA} is out of range");
        self.via = g.unwrap_or(NO_VIA);
    }

    /// The flow the packet belongs to (None for a PFC frame).
    #[inline(always)]
    pub fn flow_id(&self) -> Option<FlowId> {
        (self.flow != FlowId::NONE).then_some(self.flow)
    }

    /// The packet after this one in its FIFO.
    #[inline(always)]
    pub fn next_in_list(&self) -> Option<PacketId> {
        (self.next != PacketId::NIL).then_some(self.next)
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
    #[inline(always)]
    pub fn alloc(&mut self, p: Packet) -> PacketId {
        self.live += 1;
        self.created += 1;
        match self.free.pop() {
            Some(id) => {
                self.slots[id.index()] = p;
                id
            }
            None => {
                self.slots.push(p);
                PacketId::from_index(self.slots.len() - 1)
            }
        }
    }

    #[inline]
    /// A packet another arena created (another partition's, see `engine::parallel`): alive
    /// here from now on, counted as created there.
    pub fn adopt(&mut self, p: Packet) -> PacketId {
        let id = self.alloc(p);
        self.created -= 1;
        id
    }

    pub fn release(&mut self, id: PacketId) {
        self.live -= 1;
        self.free.push(id);
    }

    #[inline]
    pub fn get(&self, id: PacketId) -> &Packet {
        &self.slots[id.index()]
    }

    #[inline]
    pub fn get_mut(&mut self, id: PacketId) -> &mut Packet {
        &mut self.slots[id.index()]
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
        head: PacketId::NIL,
        tail: PacketId::NIL,
    };

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.head == PacketId::NIL
    }

    #[inline]
    pub fn front(&self) -> Option<PacketId> {
        (self.head != PacketId::NIL).then_some(self.head)
    }

    /// The last packet (the one `push_back` links the next to).
    #[inline]
    pub fn back(&self) -> Option<PacketId> {
        (self.tail != PacketId::NIL).then_some(self.tail)
    }

    #[inline]
    pub fn push_back(&mut self, arena: &mut PacketArena, id: PacketId) {
        arena.get_mut(id).next = PacketId::NIL;
        if self.tail == PacketId::NIL {
            self.head = id;
        } else {
            arena.get_mut(self.tail).next = id;
        }
        self.tail = id;
    }

    #[inline]
    pub fn pop_front(&mut self, arena: &PacketArena) -> Option<PacketId> {
        if self.head == PacketId::NIL {
            return None;
        }
        let id = self.head;
        self.head = arena.get(id).next;
        if self.head == PacketId::NIL {
            self.tail = PacketId::NIL;
        }
        Some(id)
    }

    /// Number of packets (walks the list: for checks, not the hot path).
    pub fn len(&self, arena: &PacketArena) -> usize {
        let mut n = 0;
        let mut at = self.head;
        while at != PacketId::NIL {
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
        Packet::data(FlowId::new(0), seq, NodeId::new(0), 0, 1, 0, false)
    }

    #[test]
    fn a_packet_record_stays_48_bytes() {
        // Queued packets are touched once per hop; the dragonfly fields live in former padding.
        assert_eq!(std::mem::size_of::<Packet>(), 48);
    }

    #[test]
    fn constructors_fill_their_own_fields() {
        let d = Packet::data(FlowId::new(3), 9, NodeId::new(5), 77, 4158, 3, true);
        assert_eq!(
            (d.kind, d.flow, d.seq, d.dst),
            (PacketKind::Data, FlowId::new(3), 9, NodeId::new(5))
        );
        assert_eq!(d.flow_id(), Some(FlowId::new(3)));
        assert_eq!(d.flags, flags::ECT | flags::RETX);
        assert_eq!(d.ingress_port(), None);
        assert_eq!(d.next_in_list(), None);
        assert_eq!(d.via_group(), None);
        let mut v = d;
        v.set_via_group(Some(4));
        assert_eq!(v.via_group(), Some(4));
        v.set_via_group(None);
        assert_eq!(v, d);
        let c = Packet::control(
            PacketKind::Nack,
            FlowId::new(3),
            4,
            NodeId::new(1),
            78,
            64,
            7,
        );
        assert_eq!(
            (c.kind, c.seq, c.flags, c.priority),
            (PacketKind::Nack, 4, 0, 7)
        );
        let p = Packet::pfc(true, 5, NodeId::new(2), 64, 8);
        assert_eq!(
            (p.kind, p.pfc_class, p.seq, p.flow_id()),
            (PacketKind::Pause, 5, 0, None)
        );
        assert!(p.kind.is_pfc());
        assert_eq!(
            Packet::pfc(false, 5, NodeId::new(2), 64, 8).kind,
            PacketKind::Resume
        );
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
