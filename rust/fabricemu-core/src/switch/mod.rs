//! Egress queues and buffer admission. Every port (switch or NIC) has `NUM_PRIORITIES` FIFO classes
//! served in strict priority; a switch admits a packet if its shared packet memory and the port's
//! optional cap both have room (drop-tail otherwise). ECN and PFC will hook into `admit` / dequeue.

use std::collections::VecDeque;

use crate::packet::PacketId;

/// Priority classes per port (802.1p has eight).
pub const NUM_PRIORITIES: usize = 8;
/// Class of ACK / NACK (and later CNP, PAUSE) packets.
pub const CONTROL_PRIORITY: u8 = 7;
/// Class of RDMA data (RoCE deployments commonly use 3).
pub const DATA_PRIORITY: u8 = 3;

/// One port's queues.
#[derive(Debug, Default)]
pub struct PortQueue {
    classes: [VecDeque<PacketId>; NUM_PRIORITIES],
    /// Bit c set when class c is non-empty.
    nonempty: u8,
    /// Bytes waiting (all classes).
    pub bytes: u64,
}

impl PortQueue {
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.nonempty == 0
    }

    #[inline]
    pub fn push(&mut self, pkt: PacketId, priority: u8, wire_bytes: u32) {
        self.classes[priority as usize].push_back(pkt);
        self.nonempty |= 1 << priority;
        self.bytes += wire_bytes as u64;
    }

    /// The head of the highest non-empty class; the caller subtracts its bytes with `dequeued`.
    #[inline]
    pub fn pop(&mut self) -> Option<PacketId> {
        if self.nonempty == 0 {
            return None;
        }
        let c = 7 - self.nonempty.leading_zeros() as usize;
        let q = &mut self.classes[c];
        let pkt = q.pop_front();
        if q.is_empty() {
            self.nonempty &= !(1 << c);
        }
        pkt
    }

    #[inline]
    pub fn dequeued(&mut self, wire_bytes: u32) {
        self.bytes -= wire_bytes as u64;
    }

    /// Packets waiting in all classes.
    pub fn len(&self) -> usize {
        self.classes.iter().map(VecDeque::len).sum()
    }

    /// Drain every packet (end of run accounting).
    pub fn drain(&mut self) -> impl Iterator<Item = PacketId> + '_ {
        self.nonempty = 0;
        self.bytes = 0;
        self.classes.iter_mut().flat_map(|q| q.drain(..))
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
        let mut q = PortQueue::default();
        q.push(1, DATA_PRIORITY, 100);
        q.push(2, DATA_PRIORITY, 100);
        q.push(3, CONTROL_PRIORITY, 10);
        q.push(4, 0, 10);
        assert_eq!(q.bytes, 220);
        assert_eq!(
            [q.pop(), q.pop(), q.pop(), q.pop(), q.pop()],
            [Some(3), Some(1), Some(2), Some(4), None]
        );
        assert!(q.is_empty());
    }
}
