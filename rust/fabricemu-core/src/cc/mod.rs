//! Congestion control of RDMA senders. A scheme sets each flow's sending rate; the NIC paces the
//! flow's packets at that rate. DCQCN is the first; others implement the same calls.

pub mod config;
pub mod dcqcn;
pub mod dcqcn_config;

pub use dcqcn::Dcqcn;
