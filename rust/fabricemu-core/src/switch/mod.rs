//! Switch (and NIC) egress machinery: per-port priority queues and their scheduler, the shared
//! buffer's admission, RED/ECN marking and priority flow control. Each concept is its own module;
//! the engine calls them at enqueue and dequeue.

pub mod buffer;
pub mod config;
pub mod ecn;
pub mod pfc;
pub mod queue;
pub mod reduction;
pub mod trim;

pub use buffer::SharedBuffer;

use crate::config::{EcnSpec, Scheduler};
use crate::ids::{IdVec, NodeId, PortId};
use crate::rng::Rng;

/// The switches' part of the World: every switch's shared buffer, PFC state, ECN marking and the
/// egress scheduler (per-port queues stay with the ports, NICs have them too).
pub struct Switches {
    pub buffer: SharedBuffer,
    pub pfc: Option<pfc::Pfc>,
    pub ecn: Option<EcnSpec>,
    /// RED draws, one stream per switch (indexed by node id; see `Router::rng`).
    pub ecn_rng: IdVec<NodeId, Rng>,
    /// Packet trimming, if on.
    pub trimming: Option<trim::TrimmingSpec>,
    /// Per port: data packets trimmed there (empty without trimming).
    pub trimmed: IdVec<PortId, u64>,
    pub scheduler: Scheduler,
    /// Per port, with the DWRR scheduler (empty with strict priority).
    pub dwrr: IdVec<PortId, queue::DwrrState>,
}

impl Switches {
    /// RED: whether a packet seen at queue depth `depth` at switch `node` gets a congestion
    /// mark.
    #[inline]
    pub fn ecn_marks(&mut self, node: NodeId, depth: u64) -> bool {
        let ecn = self.ecn.as_ref().expect("ECN configured");
        let prob = ecn::mark_probability(ecn, depth);
        prob > 0.0 && (prob >= 1.0 || self.ecn_rng[node].unit() < prob)
    }
}
pub use queue::{PortQueue, MAC_CONTROL_CLASS, NUM_CLASSES};

/// Priority classes per port (802.1p has eight).
pub const NUM_PRIORITIES: usize = 8;
/// Default class of ACK / NACK / CNP packets.
pub const CONTROL_PRIORITY: u8 = 7;
/// Default class of RDMA data (RoCE deployments commonly use 3).
pub const DATA_PRIORITY: u8 = 3;
