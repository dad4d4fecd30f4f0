//! Switch (and NIC) egress machinery: per-port priority queues and their scheduler, the shared
//! buffer's admission, RED/ECN marking and priority flow control. Each concept is its own module;
//! the engine calls them at enqueue and dequeue.

pub mod buffer;
pub mod config;
pub mod ecn;
pub mod pfc;
pub mod queue;

pub use buffer::SharedBuffer;
pub use queue::{PortQueue, MAC_CONTROL_CLASS, NUM_CLASSES};

/// Priority classes per port (802.1p has eight).
pub const NUM_PRIORITIES: usize = 8;
/// Default class of ACK / NACK / CNP packets.
pub const CONTROL_PRIORITY: u8 = 7;
/// Default class of RDMA data (RoCE deployments commonly use 3).
pub const DATA_PRIORITY: u8 = 3;
