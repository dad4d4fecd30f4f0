//! Egress queues and buffer admission. Every port (switch or NIC) has `NUM_PRIORITIES` FIFO classes
//! served in strict priority; a switch admits a packet if its shared packet memory and the port's
//! optional cap both have room (drop-tail otherwise). ECN and PFC will hook into `admit` / dequeue.

use crate::packet::{PacketArena, PacketId, PacketList};

/// Priority classes per port (802.1p has eight).
pub const NUM_PRIORITIES: usize = 8;
/// Class of ACK / NACK (and later CNP, PAUSE) packets.
pub const CONTROL_PRIORITY: u8 = 7;
/// Class of RDMA data (RoCE deployments commonly use 3).
pub const DATA_PRIORITY: u8 = 3;

/// One port's queues: a FIFO per class, threaded through the packets.
#[derive(Debug, Default)]
pub struct PortQueue {
    /// Bit c set when class c is non-empty.
    nonempty: u8,
    /// Bytes waiting (all classes).
    pub bytes: u64,
    classes: [PacketList; NUM_PRIORITIES],
}

impl PortQueue {
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.nonempty == 0
    }

    #[inline]
    pub fn push(&mut self, arena: &mut PacketArena, pkt: PacketId, priority: u8, wire_bytes: u32) {
        self.classes[priority as usize].push_back(arena, pkt);
        self.nonempty |= 1 << priority;
        self.bytes += wire_bytes as u64;
    }

    /// The head of the highest non-empty class; the caller subtracts its bytes with `dequeued`.
    #[inline]
    pub fn pop(&mut self, arena: &PacketArena) -> Option<PacketId> {
        if self.nonempty == 0 {
            return None;
        }
        let c = 7 - self.nonempty.leading_zeros() as usize;
        let q = &mut self.classes[c];
        let pkt = q.pop_front(arena);
        if q.is_empty() {
            self.nonempty &= !(1 << c);
        }
        pkt
    }

    #[inline]
    pub fn dequeued(&mut self, wire_bytes: u32) {
        self.bytes -= wire_bytes as u64;
    }

    /// Packets waiting in all classes (walks the lists).
    pub fn len(&self, arena: &PacketArena) -> usize {
        self.classes.iter().map(|c| c.len(arena)).sum()
    }
}

/// Buffer state of every switch.
#[derive(Debug)]
pub struct Buffers {
    /// Bytes queued in each node's packet memory (hosts: unused).
    pub used: Vec<u64>,
    pub capacity: u64,
    pub port_cap: u64,
}

impl Buffers {
    pub fn new(num_nodes: u32, capacity: u64, port_cap: Option<u64>) -> Self {
        Self {
            used: vec![0; num_nodes as usize],
            capacity,
            port_cap: port_cap.unwrap_or(u64::MAX),
        }
    }

    /// Drop-tail admission of `bytes` into a port queue currently holding `port_bytes`.
    #[inline]
    pub fn admit(&self, node: u32, port_bytes: u64, bytes: u64) -> bool {
        self.used[node as usize] + bytes <= self.capacity && port_bytes + bytes <= self.port_cap
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_priority_then_fifo() {
        use crate::packet::{Packet, PacketKind, NIL};
        let mut arena = PacketArena::default();
        let mut ids = Vec::new();
        for seq in 0..4 {
            ids.push(arena.alloc(Packet {
                header_key: 0,
                arrive: 0,
                next: NIL,
                flow: 0,
                seq,
                dst: 0,
                wire_bytes: 10,
                kind: PacketKind::Data,
                priority: 0,
            }));
        }
        let mut q = PortQueue::default();
        q.push(&mut arena, ids[0], DATA_PRIORITY, 100);
        q.push(&mut arena, ids[1], DATA_PRIORITY, 100);
        q.push(&mut arena, ids[2], CONTROL_PRIORITY, 10);
        q.push(&mut arena, ids[3], 0, 10);
        assert_eq!(q.bytes, 220);
        assert_eq!(q.len(&arena), 4);
        let order: Vec<_> = std::iter::from_fn(|| q.pop(&arena)).collect();
        assert_eq!(order, vec![ids[2], ids[0], ids[1], ids[3]]);
        assert!(q.is_empty());
    }
}
