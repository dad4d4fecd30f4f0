//! A switch's shared packet memory and its admission rules.
//!
//! Lossy classes are admitted if the shared pool has room and the queue is under its limits: a
//! dynamic threshold (alpha x the free shared buffer, as Broadcom MMUs do), a static per-queue cap,
//! and the per-port cap. Lossless (PFC) classes are admitted to the shared pool while it has room,
//! then into the headroom reserved for their (ingress port, priority); a lossless drop means the
//! headroom was too small.

use crate::config::SwitchSpec;
use crate::ids::{IdVec, NodeId};

/// Where an admitted packet's bytes are counted (released from the same place).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    Shared,
    Headroom,
    Dropped,
}

/// The shared pool of every switch.
#[derive(Debug)]
pub struct SharedBuffer {
    /// Bytes in each switch's shared pool (indexed by node; hosts unused).
    pub used: IdVec<NodeId, u64>,
    /// Shared pool size of each switch: the buffer less the reserved headroom.
    pub capacity: IdVec<NodeId, u64>,
    port_cap: u64,
    queue_cap: u64,
    alpha: Option<f64>,
}

impl SharedBuffer {
    /// `reserved_headroom`: per node, the PFC headroom it sets aside (empty without PFC).
    pub fn new(num_nodes: u32, spec: &SwitchSpec, reserved_headroom: &IdVec<NodeId, u64>) -> Self {
        let used: IdVec<NodeId, u64> = IdVec::from_elem(0, num_nodes as usize);
        let capacity = used
            .ids()
            .map(|n| {
                spec.buffer_bytes
                    .saturating_sub(reserved_headroom.get(n).copied().unwrap_or(0))
            })
            .collect();
        Self {
            used,
            capacity,
            port_cap: spec.port_buffer_bytes.unwrap_or(u64::MAX),
            queue_cap: spec.queue_limit_bytes.unwrap_or(u64::MAX),
            alpha: spec.alpha,
        }
    }

    #[inline]
    pub fn free(&self, node: NodeId) -> u64 {
        self.capacity[node] - self.used[node]
    }

    /// Admission of a lossy packet of `bytes` into a queue holding `queue_bytes` on a port
    /// holding `port_bytes`.
    #[inline]
    pub fn admit_lossy(&self, node: NodeId, port_bytes: u64, queue_bytes: u64, bytes: u64) -> bool {
        let free = self.free(node);
        if bytes > free
            || port_bytes + bytes > self.port_cap
            || queue_bytes + bytes > self.queue_cap
        {
            return false;
        }
        match self.alpha {
            None => true,
            Some(a) => (queue_bytes + bytes) as f64 <= a * free as f64,
        }
    }

    /// Admission of a lossless packet: shared pool first, then the ingress headroom.
    #[inline]
    pub fn admit_lossless(
        &self,
        node: NodeId,
        bytes: u64,
        headroom_used: u64,
        headroom: u64,
    ) -> Admission {
        if bytes <= self.free(node) {
            Admission::Shared
        } else if headroom_used + bytes <= headroom {
            Admission::Headroom
        } else {
            Admission::Dropped
        }
    }
}
