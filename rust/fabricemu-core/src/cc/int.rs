//! In-band telemetry storage: the INT records a data packet collects hop by hop, kept beside the
//! packet arena (indexed by packet id) so the 48-byte `Packet` record stays as it is. The store
//! exists only when the run's controller uses INT (HPCC); it grows with the arena's high-water
//! mark (amortised, like the arena), so the hot path allocates nothing per packet.

use super::IntRecord;
use crate::ids::{NodeId, PortId};

/// At most this many hops are recorded per packet (further hops are not stamped; HPCC's ns-3
/// model keeps 5). Eight covers a 3-tier fat tree (5 switches) and dragonfly paths with a
/// Valiant detour.
pub const MAX_INT_HOPS: usize = 8;

/// The records of one packet, first hop first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IntStack {
    len: u8,
    hops: [IntRecord; MAX_INT_HOPS],
}

impl IntStack {
    pub const EMPTY: IntStack = IntStack {
        len: 0,
        hops: [IntRecord {
            node: NodeId::new(0),
            port: PortId::new(0),
            time_ps: 0,
            queue_bytes: 0,
            tx_bytes: 0,
            rate_bps: 0,
        }; MAX_INT_HOPS],
    };

    #[inline]
    pub fn records(&self) -> &[IntRecord] {
        &self.hops[..self.len as usize]
    }

    #[inline]
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Append one hop's record; false (and nothing stored) when the stack is full.
    #[inline(always)]
    pub fn push(&mut self, r: IntRecord) -> bool {
        if (self.len as usize) < MAX_INT_HOPS {
            self.hops[self.len as usize] = r;
            self.len += 1;
            true
        } else {
            false
        }
    }
}

/// One packet's record array in the store, aligned to a cache line: the five records of a
/// 3-tier fat-tree path span four lines.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(64))]
struct Hops([IntRecord; MAX_INT_HOPS]);

const NO_HOPS: Hops = Hops(IntStack::EMPTY.hops);

/// A packet slot's records, to write (see [`IntStore::slot_mut`]).
pub struct SlotMut<'a> {
    len: &'a mut u8,
    hops: &'a mut [IntRecord; MAX_INT_HOPS],
}

impl SlotMut<'_> {
    /// No records (a packet fresh from a NIC).
    #[inline(always)]
    pub fn clear(self) {
        *self.len = 0;
    }

    /// Append one hop's record; false (and nothing stored) when the slot is full.
    #[inline(always)]
    pub fn push(self, r: IntRecord) -> bool {
        let n = *self.len as usize;
        if n < MAX_INT_HOPS {
            self.hops[n] = r;
            *self.len += 1;
            true
        } else {
            false
        }
    }
}

/// The INT side arrays, one record array per packet-arena slot, plus the receiver's echo.
///
/// The records' counts live in an array of their own (one byte per slot, dense and so cached):
/// a switch stamping a packet reads the count there and touches only the line its record goes
/// to.
///
/// The echo is lazy: a receiver that takes a data packet's records for its ACK only notes the
/// packet's slot (`echo_src`), whose records stay valid until that slot is written again. The ACK
/// usually reuses that very slot (the arena's free list is last in, first out: the data packet
/// was released just before), so its records are already in place and nothing is copied; only a
/// write to the noted slot first saves its records in `echo` (every write goes through
/// [`IntStore::slot_mut`] or [`IntStore::set_slot`]).
#[derive(Debug, Clone)]
pub struct IntStore {
    lens: Vec<u8>,
    hops: Vec<Hops>,
    /// Bytes a switch adds to a data packet's wire size per stamped hop (an ACK carries the
    /// echoed records too).
    pub bytes_per_hop: u32,
    /// The records an ACK echoes now, when `echo_src` is None.
    echo: IntStack,
    /// The slot holding the records an ACK echoes now (None: `echo` holds them).
    echo_src: Option<usize>,
}

impl IntStore {
    /// Bytes of one packet's INT records and their count (one slot per packet id).
    pub const BYTES_PER_PACKET: usize = std::mem::size_of::<Hops>() + 1;

    pub fn new(bytes_per_hop: u32) -> Self {
        Self {
            lens: Vec::new(),
            hops: Vec::new(),
            bytes_per_hop,
            echo: IntStack::EMPTY,
            echo_src: None,
        }
    }

    /// Slot `idx` is about to be written: if it holds the echo, keep a copy of the records.
    #[inline(always)]
    fn settle(&mut self, idx: usize) {
        if self.echo_src == Some(idx) {
            self.save_echo(idx);
        }
    }

    #[cold]
    #[inline(never)]
    fn save_echo(&mut self, idx: usize) {
        let n = self.lens[idx] as usize;
        self.echo.hops[..n].copy_from_slice(&self.hops[idx].0[..n]);
        self.echo.len = n as u8;
        self.echo_src = None;
    }

    /// Slots up to `idx` (amortised like the packet arena: the hot path allocates nothing).
    #[cold]
    #[inline(never)]
    fn grow(&mut self, idx: usize) {
        self.lens.resize(idx + 1, 0);
        self.hops.resize(idx + 1, NO_HOPS);
    }

    /// The records of packet slot `idx`, to write (grown on first use of a new arena slot).
    /// Called per stamped hop: inlined, with the rare growth out of line.
    #[inline(always)]
    pub fn slot_mut(&mut self, idx: usize) -> SlotMut<'_> {
        if idx >= self.lens.len() {
            self.grow(idx);
        }
        self.settle(idx);
        SlotMut {
            len: &mut self.lens[idx],
            hops: &mut self.hops[idx].0,
        }
    }

    /// The receiver takes the records of the data packet in slot `idx` (just released) for its
    /// ACK: they stay where they are until that slot is written.
    #[inline]
    pub fn take_echo(&mut self, idx: usize) {
        if idx < self.lens.len() {
            self.echo_src = Some(idx);
        } else {
            self.echo.len = 0;
            self.echo_src = None;
        }
    }

    /// The records an ACK echoes now.
    #[inline]
    pub fn echo(&self) -> &[IntRecord] {
        match self.echo_src {
            Some(i) => self.records(i),
            None => self.echo.records(),
        }
    }

    /// The ACK in slot `idx` carries the echoed records (`echo`), or none.
    #[inline]
    pub fn set_slot(&mut self, idx: usize, echo: bool) {
        if idx >= self.lens.len() {
            self.grow(idx);
        }
        if echo && self.echo_src == Some(idx) {
            return; // the ACK took the data packet's slot: its records are in place
        }
        self.settle(idx);
        let n = if echo { self.echo().len() } else { 0 };
        if n > 0 {
            match self.echo_src {
                Some(src) => {
                    // src != idx (handled above), so the two slots borrow apart.
                    let (from, to) = if src < idx {
                        let (l, r) = self.hops.split_at_mut(idx);
                        (&l[src], &mut r[0])
                    } else {
                        let (l, r) = self.hops.split_at_mut(src);
                        (&r[0], &mut l[idx])
                    };
                    to.0[..n].copy_from_slice(&from.0[..n]);
                }
                None => self.hops[idx].0[..n].copy_from_slice(&self.echo.hops[..n]),
            }
        }
        self.lens[idx] = n as u8;
    }

    /// Slot `to` gets slot `from`'s records (a packet replicated by a switch: the copy carries
    /// the records of its original).
    pub fn copy_slot(&mut self, from: usize, to: usize) {
        if from == to {
            return;
        }
        if from.max(to) >= self.lens.len() {
            self.grow(from.max(to));
        }
        self.settle(to);
        let n = self.lens[from] as usize;
        let hops = self.hops[from];
        self.hops[to].0[..n].copy_from_slice(&hops.0[..n]);
        self.lens[to] = n as u8;
    }

    /// A copy of packet slot `idx`'s records (a packet leaving for another partition).
    pub fn stack(&self, idx: usize) -> IntStack {
        let mut s = IntStack::EMPTY;
        for &r in self.records(idx) {
            s.push(r);
        }
        s
    }

    /// Slot `idx` gets `stack`'s records (a packet arriving from another partition).
    pub fn set_stack(&mut self, idx: usize, stack: &IntStack) {
        if idx >= self.lens.len() {
            self.grow(idx);
        }
        self.settle(idx);
        let r = stack.records();
        self.hops[idx].0[..r.len()].copy_from_slice(r);
        self.lens[idx] = r.len() as u8;
    }

    /// The records of packet slot `idx`, first hop first (none if that slot never carried INT).
    #[inline]
    pub fn records(&self, idx: usize) -> &[IntRecord] {
        match self.lens.get(idx) {
            Some(&n) => &self.hops[idx].0[..n as usize],
            None => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(i: u32) -> IntRecord {
        IntRecord {
            node: NodeId::new(i),
            ..IntRecord::default()
        }
    }

    fn nodes(r: &[IntRecord]) -> Vec<u32> {
        r.iter().map(|r| r.node.get()).collect()
    }

    #[test]
    fn a_stack_holds_up_to_max_hops_in_order() {
        let mut s = IntStack::EMPTY;
        for i in 0..MAX_INT_HOPS as u32 + 2 {
            assert_eq!(s.push(rec(i)), (i as usize) < MAX_INT_HOPS);
        }
        assert_eq!(
            nodes(s.records()),
            (0..MAX_INT_HOPS as u32).collect::<Vec<_>>()
        );
        s.clear();
        assert!(s.records().is_empty());
        // The store's slots likewise.
        let mut st = IntStore::new(8);
        for i in 0..MAX_INT_HOPS as u32 + 1 {
            assert_eq!(st.slot_mut(2).push(rec(i)), (i as usize) < MAX_INT_HOPS);
        }
        assert_eq!(st.records(2).len(), MAX_INT_HOPS);
        st.slot_mut(2).clear();
        assert!(st.records(2).is_empty());
    }

    #[test]
    fn the_store_grows_to_the_slots_used() {
        let mut st = IntStore::new(8);
        assert!(st.records(5).is_empty());
        st.slot_mut(5).push(IntRecord::default());
        assert_eq!(st.records(5).len(), 1);
        assert_eq!((st.lens.len(), st.hops.len()), (6, 6));
        assert_eq!(std::mem::align_of::<Hops>(), 64);
    }

    /// A data packet with records `ids` in slot `idx`, received (its ACK will echo it).
    fn received(st: &mut IntStore, idx: usize, ids: &[u32]) {
        st.slot_mut(idx).clear();
        for &i in ids {
            st.slot_mut(idx).push(rec(i));
        }
        st.take_echo(idx);
    }

    #[test]
    fn an_ack_echoes_the_records_of_the_packet_received_last() {
        // The ACK reuses the data packet's slot: the records stay in place.
        let mut st = IntStore::new(8);
        received(&mut st, 3, &[1, 2, 3]);
        assert_eq!(nodes(st.echo()), [1, 2, 3]);
        st.set_slot(3, true);
        assert_eq!(nodes(st.records(3)), [1, 2, 3]);
        // Another slot: copied.
        st.set_slot(7, true);
        assert_eq!(nodes(st.records(7)), [1, 2, 3]);
        // A control packet without echo takes the data packet's slot first (a CNP): the echo
        // survives the slot's reuse, and the ACK after it still carries the records.
        received(&mut st, 4, &[5, 6]);
        st.set_slot(4, false);
        assert!(st.records(4).is_empty());
        assert_eq!(nodes(st.echo()), [5, 6]);
        st.set_slot(9, true);
        assert_eq!(nodes(st.records(9)), [5, 6]);
        // A new data packet in the echoed slot (a NIC's clear, a switch's stamp) likewise.
        received(&mut st, 1, &[8]);
        st.slot_mut(1).clear();
        st.slot_mut(1).push(rec(42));
        assert_eq!(nodes(st.echo()), [8]);
        st.set_slot(2, true);
        assert_eq!(nodes(st.records(2)), [8]);
        // A packet from a slot the store never grew to has no records to echo.
        received(&mut st, 1, &[4]);
        st.take_echo(100);
        st.set_slot(0, true);
        assert!(st.records(0).is_empty());
    }
}
