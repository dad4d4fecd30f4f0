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
    #[inline]
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

/// The INT side array, one [`IntStack`] per packet-arena slot, plus the receiver's echo buffer.
#[derive(Debug, Clone)]
pub struct IntStore {
    slots: Vec<IntStack>,
    /// Bytes a switch adds to a data packet's wire size per stamped hop (an ACK carries the
    /// echoed records too).
    pub bytes_per_hop: u32,
    /// The records of the data packet a receiver handles now (its ACK echoes them).
    pub echo: IntStack,
}

impl IntStore {
    /// Bytes of one packet's INT records (one slot per packet id).
    pub const BYTES_PER_PACKET: usize = std::mem::size_of::<IntStack>();

    pub fn new(bytes_per_hop: u32) -> Self {
        Self {
            slots: Vec::new(),
            bytes_per_hop,
            echo: IntStack::EMPTY,
        }
    }

    /// The stack of packet slot `idx` (grown on first use of a new arena slot).
    #[inline]
    pub fn slot_mut(&mut self, idx: usize) -> &mut IntStack {
        if idx >= self.slots.len() {
            self.slots.resize(idx + 1, IntStack::EMPTY);
        }
        &mut self.slots[idx]
    }

    /// The receiver takes the records of the data packet in slot `idx` for its ACK (only the
    /// records used are copied).
    #[inline]
    pub fn take_echo(&mut self, idx: usize) {
        match self.slots.get(idx) {
            Some(s) => {
                let n = s.len as usize;
                self.echo.hops[..n].copy_from_slice(&s.hops[..n]);
                self.echo.len = s.len;
            }
            None => self.echo.len = 0,
        }
    }

    /// The ACK in slot `idx` carries the echoed records (`echo`), or none.
    #[inline]
    pub fn set_slot(&mut self, idx: usize, echo: bool) {
        let n = if echo { self.echo.len as usize } else { 0 };
        if idx >= self.slots.len() {
            self.slots.resize(idx + 1, IntStack::EMPTY);
        }
        let slot = &mut self.slots[idx];
        slot.hops[..n].copy_from_slice(&self.echo.hops[..n]);
        slot.len = n as u8;
    }

    /// The stack of packet slot `idx` (empty if that slot never carried INT).
    #[inline]
    pub fn slot(&self, idx: usize) -> &IntStack {
        self.slots.get(idx).unwrap_or(&IntStack::EMPTY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stack_holds_up_to_max_hops_in_order() {
        let mut s = IntStack::EMPTY;
        for i in 0..MAX_INT_HOPS as u32 + 2 {
            let ok = s.push(IntRecord {
                node: NodeId::new(i),
                ..IntRecord::default()
            });
            assert_eq!(ok, (i as usize) < MAX_INT_HOPS);
        }
        let nodes: Vec<u32> = s.records().iter().map(|r| r.node.get()).collect();
        assert_eq!(nodes, (0..MAX_INT_HOPS as u32).collect::<Vec<_>>());
        s.clear();
        assert!(s.records().is_empty());
    }

    #[test]
    fn the_store_grows_to_the_slots_used() {
        let mut st = IntStore::new(8);
        assert!(st.slot(5).records().is_empty());
        st.slot_mut(5).push(IntRecord::default());
        assert_eq!(st.slot(5).records().len(), 1);
        assert_eq!(st.slots.len(), 6);
    }
}
