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
    /// Start of the measurement window of synthetic workloads, `[warmup, stop)` (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<Duration>,
    pub topology: TopologyFile,
    #[serde(default)]
    pub switch: SwitchFile,
    #[serde(default)]
    pub routing: RoutingFile,
    /// Link failures and degradations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fault: Vec<FaultFile>,
    #[serde(default)]
    pub transport: TransportFile,
    /// `[nic]`: how a NIC arbitrates among its active flows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic: Option<NicFile>,
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
    // dragonfly, dragonfly_plus
    /// Hosts per router (dragonfly).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p: Option<i64>,
    /// Routers per group (dragonfly).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub a: Option<i64>,
    /// Global links per router (dragonfly) or per spine (dragonfly_plus).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub h: Option<i64>,
    /// Groups (at most a*h + 1; spines*h + 1 for dragonfly_plus).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub g: Option<i64>,
    /// Global-link arrangement: `absolute` (consecutive, default) or `relative` (circulant).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrangement: Option<String>,
    /// Links between groups (dragonfly families); local links use `fabric_link_*`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global_link_rate: Option<LinkRate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global_link_delay: Option<Duration>,
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
    /// Dynamic threshold of lossy queues: a queue may grow to alpha x the free shared buffer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alpha: Option<f64>,
    /// Static cap on one (port, priority) queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_limit: Option<Size>,
    /// `strict` priority (default) or `dwrr` (deficit weighted round robin by `weights`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler: Option<String>,
    /// DWRR weights of the eight priorities (control frames still go first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights: Option<Vec<i64>>,
    /// RED/ECN marking on egress queue depth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecn: Option<EcnFile>,
    /// Priority flow control (lossless classes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pfc: Option<PfcFile>,
}

/// `[switch.ecn]`: RED marking; defaults are the DCQCN paper's (Kmin 5 KB, Kmax 200 KB, Pmax 1 %).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EcnFile {
    #[serde(default = "EcnFile::default_enabled")]
    pub enabled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kmin: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kmax: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pmax: Option<f64>,
    /// `dequeue` (default, Broadcom-style) or `enqueue`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mark: Option<String>,
    /// Priorities that are marked (default: the data priority).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priorities: Option<Vec<i64>>,
}

impl EcnFile {
    fn default_enabled() -> bool {
        true
    }
}

/// `[switch.pfc]`: per (ingress port, priority) pause thresholds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PfcFile {
    #[serde(default = "EcnFile::default_enabled")]
    pub enabled: bool,
    /// Lossless priorities (default: the data priority).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priorities: Option<Vec<i64>>,
    /// Static XOFF threshold per (ingress port, priority); if unset, the dynamic one applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xoff: Option<Size>,
    /// Dynamic XOFF: pause when an ingress queue exceeds beta x the free shared buffer. Default 1:
    /// the DCQCN paper's beta = 8 shared by 8 priorities (HPCC's MMU uses 1/8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beta: Option<f64>,
    /// RESUME when the ingress queue falls this far below XOFF (default two packets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xon_offset: Option<Size>,
    /// Headroom reserved per (ingress port, lossless priority); default sized from link rate and
    /// delay: a round trip of bytes plus two packets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headroom: Option<Size>,
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
            alpha: None,
            queue_limit: None,
            scheduler: None,
            weights: None,
            ecn: None,
            pfc: None,
        }
    }
}

/// `[routing]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoutingFile {
    /// `ecmp`, `spray`, `flowlet` or `adaptive`; on dragonflies also `min` (= ecmp), `valiant`,
    /// `ugal_l`, `ugal_g` or `par`.
    #[serde(default = "RoutingFile::default_lb")]
    pub load_balancing: String,
    /// ECMP: header fields hashed, a subset of `src`, `dst`, `sport`, `dport`, `flow_label`
    /// (default: the 5-tuple's src, dst, sport, dport).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash_fields: Option<Vec<String>>,
    /// ECMP hash function: `mix` (default, a well-mixed 64-bit hash), `crc32` or `xor` (a plain
    /// XOR fold, as cheap ASICs; prone to polarisation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    /// Each switch hashes with its own seed (default true); with one seed for all, hash
    /// polarisation across tiers appears.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_switch_seed: Option<bool>,
    /// Spray: `random` (default), `round_robin` or `least_loaded` egress among the ECMP group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spray: Option<String>,
    /// Flowlet / adaptive: idle gap after which a flow may take another path (default 50us).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flowlet_gap: Option<Duration>,
    /// Flowlet: how a new flowlet picks its port, `random` (default, LetFlow) or `least_loaded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flowlet_pick: Option<String>,
    /// Flowlet / adaptive: entries of each switch's flowlet table (default 4096).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flowlet_table: Option<i64>,
    /// Adaptive: decide per `packet` (default) or per `flowlet`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adaptive: Option<String>,
    /// Adaptive: keep the previous port unless another queue is shorter by more than this
    /// (default one MTU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adaptive_bias: Option<Size>,
    /// UGAL-L / UGAL-G / PAR: random intermediate groups compared with the minimal path
    /// (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ugal_candidates: Option<i64>,
    /// UGAL-L / UGAL-G / PAR: bias toward the minimal path (queued bytes; default two packets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ugal_threshold: Option<Size>,
    /// Dragonflies with PFC: lossless packets move up a priority class per global hop (deadlock
    /// freedom by virtual channels; default true on dragonflies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hop_classes: Option<bool>,
}

/// A node named in a scenario: its id, or `"role:index"` (`"spine:0"`, `"core:3"`, `"host:12"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum NodeRef {
    Id(i64),
    Name(String),
}

/// One `[[fault]]`: a link (both directions) goes down or runs slower, from `at` until `until`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultFile {
    /// The two ends of the link.
    pub link: Vec<NodeRef>,
    /// `down` (default) or `degrade`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub at: Duration,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<Duration>,
    /// `degrade`: the link's rate meanwhile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<LinkRate>,
    /// How long switches keep using a failed (or restored) link before routing notices (default
    /// 10us).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detection: Option<Duration>,
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
            hash_fields: None,
            hash: None,
            per_switch_seed: None,
            spray: None,
            flowlet_gap: None,
            flowlet_pick: None,
            flowlet_table: None,
            adaptive: None,
            adaptive_bias: None,
            ugal_candidates: None,
            ugal_threshold: None,
            hop_classes: None,
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
    /// Congestion control: `none` (line rate) or `dcqcn`.
    #[serde(default = "TransportFile::default_cc")]
    pub cc: String,
    /// `go_back_n` (RoCE NICs) or `selective` (tolerates reordering). Default: selective when
    /// packets are sprayed or adaptively routed per packet, go_back_n otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_recovery: Option<String>,
    /// Selective: packets received beyond a hole before it is reported lost (default 8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reorder_threshold: Option<i64>,
    /// Priority class of data packets (ACKs and CNPs use `control_priority`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_priority: Option<i64>,
    /// DCQCN parameters (used when `cc = "dcqcn"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dcqcn: Option<DcqcnFile>,
}

/// `[transport.dcqcn]`: every parameter of DCQCN; `variant` picks the defaults of the paper
/// (SIGCOMM 2015) or of the Mellanox/HPCC-repo implementation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DcqcnFile {
    /// `paper` (default) or `mellanox`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// Alpha EWMA gain g.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub g: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alpha_init: Option<f64>,
    /// NP: at most one CNP per flow per interval (N).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cnp_interval: Option<Duration>,
    /// RP: alpha update period without CNP (K).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alpha_interval: Option<Duration>,
    /// RP: rate-increase timer (T).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_timer: Option<Duration>,
    /// RP: rate-increase byte counter (B); "0B" turns it off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub byte_counter: Option<Size>,
    /// RP: fast-recovery steps (F).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fast_recovery: Option<i64>,
    /// RP: additive increase step (R_AI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_ai: Option<LinkRate>,
    /// RP: hyper increase step (R_HAI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_hai: Option<LinkRate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_rate: Option<LinkRate>,
    /// RP: at most one rate cut per interval (Mellanox: 4us; paper: every CNP, i.e. 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_decrease_interval: Option<Duration>,
    /// RP: set the target rate to the current rate on every cut (paper) or only after a timer
    /// increase since the last cut (Mellanox).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clamp_target_rate: Option<bool>,
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
            loss_recovery: None,
            reorder_threshold: None,
            priority: None,
            control_priority: None,
            dcqcn: None,
        }
    }
}

/// `[nic]`: NIC behaviour beyond the transport.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NicFile {
    /// `round_robin` (default: a packet of each active flow in turn) or `fifo` (active flows in
    /// start order, each sent completely before the next, as an open-loop source queue).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arbitration: Option<String>,
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
    /// `flows`, `incast`, `permutation`, `all_to_all`, `poisson`, `collective` or `replay`.
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
    // permutation, all_to_all, poisson, collective
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts: Option<Vec<i64>>,
    // all_to_all
    /// Flows to the k-th next host start (k - 1) x stagger after `start`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stagger: Option<Duration>,
    // poisson
    /// A shipped CDF name (`websearch`, `datamining`, `fb_hadoop`, `alistorage`, `google_rpc`) or the
    /// path of a CSV file of `size_bytes,cdf` points.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cdf: Option<String>,
    /// Offered load per sender as a fraction of its host link rate (payload bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<f64>,
    /// Flows arrive during this long after `start` (default: until the scenario's stop time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<Duration>,
    /// At most this many flows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<i64>,
    /// Only these [src, dst] pairs (instead of random pairs among `hosts`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pairs: Option<Vec<Vec<i64>>>,
    // collective
    /// `all_reduce`, `all_gather`, `reduce_scatter` or `all_to_all`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
    /// `ring`, `tree`, `halving_doubling` (all-reduce family); `direct`, `pairwise` (all-to-all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<String>,
    /// Explicit groups of host ids in rank order, each running the collective at the same time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<Vec<Vec<i64>>>,
    /// Split `hosts` into groups of this many ranks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_size: Option<i64>,
    /// `block` (consecutive hosts form a group) or `strided` (every m-th host: rail-aligned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_layout: Option<String>,
    /// `hosts` (ranks in the order of `hosts`) or `shuffled` (a seeded random placement).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank_order: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iterations: Option<i64>,
    /// Compute time between the end of an iteration and the start of the next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_gap: Option<Duration>,
    /// Tree: the pipeline chunk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk_size: Option<Size>,
    // replay
    /// A CSV or Arrow IPC file of flows (src, dst, size, start[, tag]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    // synthetic
    /// `uniform_random`, `worst_case`, `permutation`, `tornado`, `shift` or `hot_spot`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// Arrival process: `bernoulli` (default, slotted) or `poisson`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<String>,
    /// Pattern `shift`: host i sends to (i + shift) mod N (default: hosts per group).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shift: Option<i64>,
    /// Pattern `hot_spot`: the hot hosts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hot_spot: Option<Vec<i64>>,
    /// Pattern `hot_spot`: the fraction of messages sent to a hot host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hot_fraction: Option<f64>,
}

/// `[trace]`: which tables to write besides flows.arrow (more come with later features).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceFile {
    /// Write flows that have not finished when the run stops (finish_ps null). Default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unfinished_flows: Option<bool>,
    /// queues.arrow: queue depth per (switch port, priority), sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queues: Option<QueuesTraceFile>,
    /// pfc.arrow: every PAUSE and RESUME frame.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pfc: Option<bool>,
    /// links.arrow: bytes, utilisation and paused time per link and interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub links: Option<IntervalTraceFile>,
    /// rates.arrow: DCQCN rate changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rates: Option<RatesTraceFile>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueuesTraceFile {
    pub interval: Duration,
    /// Also sample NIC (host) ports. Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts: Option<bool>,
    /// Write empty queues too. Default false (only non-empty queues).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub empty: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntervalTraceFile {
    pub interval: Duration,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RatesTraceFile {
    /// Only these flow ids (default: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flows: Option<Vec<i64>>,
    /// At most one row per flow per interval (default: every change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<Duration>,
}
