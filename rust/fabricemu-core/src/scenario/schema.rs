//! The scenario file as written by users: serde structs with `deny_unknown_fields`.
//!
//! Kind-dependent sections (`[topology]`, `[[workload]]`) are flat structs with a `kind` and optional
//! fields rather than tagged enums: serde's tagged enums buffer their content, which loses the key
//! path and position of an error. `validate.rs` turns these into the typed specs the engine runs.

use serde::{Deserialize, Serialize};

use super::values::{Duration, LinkRate, Size};

fn default_seed() -> u64 {
    1
}

/// The whole scenario file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// `"all_flows_done"` (default) or a duration such as `"5ms"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<String>,
    pub topology: TopologyFile,
    #[serde(default)]
    pub switch: SwitchFile,
    #[serde(default)]
    pub routing: RoutingFile,
    #[serde(default)]
    pub transport: TransportFile,
    #[serde(default)]
    pub workload: Vec<WorkloadFile>,
    #[serde(default)]
    pub trace: TraceFile,
}

/// `[topology]`: `kind` selects which of the other keys apply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologyFile {
    /// `fat_tree` or `leaf_spine`.
    pub kind: String,
    // fat_tree
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k: Option<i64>,
    // leaf_spine
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leaves: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spines: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts_per_leaf: Option<i64>,
    /// Default rate and delay of every link; the per-tier keys below override them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_rate: Option<LinkRate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_delay: Option<Duration>,
    /// Host <-> first switch (edge / leaf).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_link_rate: Option<LinkRate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_link_delay: Option<Duration>,
    /// Switch <-> switch: edge-aggregation (fat_tree) or leaf-spine (leaf_spine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fabric_link_rate: Option<LinkRate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fabric_link_delay: Option<Duration>,
    /// Aggregation <-> core (fat_tree only); defaults to the fabric values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core_link_rate: Option<LinkRate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core_link_delay: Option<Duration>,
}

/// `[switch]`: buffers and forwarding latency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchFile {
    /// Packet memory of one switch, shared by all its egress queues.
    #[serde(default = "SwitchFile::default_buffer")]
    pub buffer: Size,
    /// Optional cap on one egress port's queue (drop-tail beyond it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_buffer: Option<Size>,
    /// Fixed forwarding latency added after a packet is fully received.
    #[serde(default = "SwitchFile::default_latency")]
    pub latency: Duration,
}

impl SwitchFile {
    fn default_buffer() -> Size {
        Size(32 << 20)
    }
    fn default_latency() -> Duration {
        Duration(0)
    }
}

impl Default for SwitchFile {
    fn default() -> Self {
        Self {
            buffer: Self::default_buffer(),
            port_buffer: None,
            latency: Self::default_latency(),
        }
    }
}

/// `[routing]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoutingFile {
    /// `ecmp` (the only scheme so far).
    #[serde(default = "RoutingFile::default_lb")]
    pub load_balancing: String,
}

impl RoutingFile {
    fn default_lb() -> String {
        "ecmp".into()
    }
}

impl Default for RoutingFile {
    fn default() -> Self {
        Self {
            load_balancing: Self::default_lb(),
        }
    }
}

/// `[transport]`: NIC segmentation, acknowledgement and loss recovery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransportFile {
    /// Payload bytes per packet (RoCE's MTU counts payload, as here).
    #[serde(default = "TransportFile::default_mtu")]
    pub mtu: Size,
    /// Header bytes added to every data packet on the wire.
    #[serde(default = "TransportFile::default_header")]
    pub header: Size,
    /// Wire size of an ACK / NACK.
    #[serde(default = "TransportFile::default_ack_size")]
    pub ack_size: Size,
    /// The receiver acknowledges every n-th in-order packet (and always the last).
    #[serde(default = "TransportFile::default_ack_every")]
    pub ack_every: i64,
    /// Retransmission timeout: no acknowledged progress for this long -> go back to the last ACK.
    #[serde(default = "TransportFile::default_rto")]
    pub rto: Duration,
    /// Congestion control: `none` (line rate).
    #[serde(default = "TransportFile::default_cc")]
    pub cc: String,
}

impl TransportFile {
    fn default_mtu() -> Size {
        Size(4096)
    }
    fn default_header() -> Size {
        // Ethernet 14 + FCS 4, IPv4 20, UDP 8, RoCE BTH 12, ICRC 4.
        Size(62)
    }
    fn default_ack_size() -> Size {
        // Header plus the 4-byte AETH.
        Size(66)
    }
    fn default_ack_every() -> i64 {
        1
    }
    fn default_rto() -> Duration {
        Duration(1_000_000_000) // 1 ms
    }
    fn default_cc() -> String {
        "none".into()
    }
}

impl Default for TransportFile {
    fn default() -> Self {
        Self {
            mtu: Self::default_mtu(),
            header: Self::default_header(),
            ack_size: Self::default_ack_size(),
            ack_every: Self::default_ack_every(),
            rto: Self::default_rto(),
            cc: Self::default_cc(),
        }
    }
}

/// `senders = 63` (that many distinct hosts, drawn with the seed) or `senders = [1, 2, 3]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Senders {
    Count(i64),
    List(Vec<i64>),
}

/// One explicit flow of a `kind = "flows"` workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowEntry {
    pub src: i64,
    pub dst: i64,
    pub size: Size,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<Duration>,
}

/// One `[[workload]]` entry; `kind` selects which keys apply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadFile {
    /// `flows`, `incast` or `permutation`.
    pub kind: String,
    /// Optional label carried into flows.arrow (defaults to `kind`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<Size>,
    // flows
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flows: Option<Vec<FlowEntry>>,
    // incast
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub senders: Option<Senders>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round_gap: Option<Duration>,
    // permutation
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts: Option<Vec<i64>>,
}

/// `[trace]`: which tables to write besides flows.arrow (more come with later features).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceFile {
    /// Write flows that have not finished when the run stops (finish_ps null). Default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unfinished_flows: Option<bool>,
}
