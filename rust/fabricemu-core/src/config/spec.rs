//! The validated scenario the engine runs: every default applied, every id checked, units resolved.

use serde::{Deserialize, Serialize};

use crate::units::{Bytes, Rate, Time};

/// When the run ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopAt {
    /// When every flow has finished (and no more can start).
    AllFlowsDone,
    /// At this simulated time, whatever is still in flight.
    Time(Time),
}

/// Rate and propagation delay of one tier of links.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkSpec {
    pub rate_bps: Rate,
    pub delay_ps: Time,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopologySpec {
    /// k-ary three-tier Clos: k pods of k/2 edge and k/2 aggregation switches, (k/2)^2 cores.
    FatTree {
        k: u32,
        host: LinkSpec,
        fabric: LinkSpec,
        core: LinkSpec,
    },
    /// Two-tier Clos: every leaf connects to every spine.
    LeafSpine {
        leaves: u32,
        spines: u32,
        hosts_per_leaf: u32,
        host: LinkSpec,
        fabric: LinkSpec,
    },
    /// Dragonfly (Kim et al. 2008): g groups of a routers, fully connected inside a group; each
    /// router has p hosts and h global links.
    Dragonfly {
        p: u32,
        a: u32,
        h: u32,
        g: u32,
        arrangement: Arrangement,
        host: LinkSpec,
        local: LinkSpec,
        global: LinkSpec,
    },
    /// General three-tier Clos: pods of ToRs and aggregation switches, planes of cores
    /// (`topology::clos`).
    Clos {
        shape: ClosShape,
        host: LinkSpec,
        fabric: LinkSpec,
        core: LinkSpec,
    },
    /// A fabric read from a graph (`kind = "graph"`, `topology::graph_file`).
    Graph(std::sync::Arc<crate::topology::graph_file::GraphSpec>),
    /// Dragonfly+ (Shpiner et al. 2017): each group a leaf-spine; spines carry h global links.
    DragonflyPlus {
        leaves: u32,
        spines: u32,
        hosts_per_leaf: u32,
        h: u32,
        g: u32,
        arrangement: Arrangement,
        host: LinkSpec,
        local: LinkSpec,
        global: LinkSpec,
    },
}

/// The counts of a three-tier Clos (`kind = "clos"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClosShape {
    pub pods: u32,
    pub tors_per_pod: u32,
    pub hosts_per_tor: u32,
    pub aggs_per_pod: u32,
    /// A multiple of `aggs_per_pod`: aggregation switch a of each pod links to the
    /// `cores / aggs_per_pod` cores of plane a.
    pub cores: u32,
}

impl ClosShape {
    pub fn tors(&self) -> u32 {
        self.pods * self.tors_per_pod
    }

    pub fn hosts(&self) -> u32 {
        self.tors() * self.hosts_per_tor
    }
}

/// How a dragonfly's global links connect groups (g = a*h + 1 uses every global port).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrangement {
    /// Group port j of group G goes to group j (j < G) or j + 1 (Kim et al.'s "absolute",
    /// consecutive).
    Absolute,
    /// Group port j of group G goes to group G + j + 1 (mod g): "relative" / circulant.
    Relative,
}

impl TopologySpec {
    /// The links between hosts and their first switch.
    pub fn host_link(&self) -> LinkSpec {
        match *self {
            TopologySpec::FatTree { host, .. }
            | TopologySpec::LeafSpine { host, .. }
            | TopologySpec::Dragonfly { host, .. }
            | TopologySpec::DragonflyPlus { host, .. }
            | TopologySpec::Clos { host, .. } => host,
            // The slowest host link (a graph's may differ).
            TopologySpec::Graph(ref g) => g
                .links
                .iter()
                .filter(|l| l.tier == crate::topology::Tier::Host)
                .map(|l| l.spec)
                .min_by_key(|l| (l.rate_bps, l.delay_ps))
                .unwrap_or(LinkSpec {
                    rate_bps: 1,
                    delay_ps: 0,
                }),
        }
    }

    /// The switches hosts attach to (edge switches, leaves, routers) and the host slots of each:
    /// `(switches, slots per switch)`. Slots are numbered switch by switch.
    pub fn slot_switches(&self) -> (u32, u32) {
        match *self {
            TopologySpec::Dragonfly { p, a, g, .. } => (a * g, p),
            TopologySpec::DragonflyPlus {
                leaves,
                hosts_per_leaf,
                g,
                ..
            } => (leaves * g, hosts_per_leaf),
            TopologySpec::FatTree { k, .. } => (k * k / 2, k / 2),
            TopologySpec::LeafSpine {
                leaves,
                hosts_per_leaf,
                ..
            } => (leaves, hosts_per_leaf),
            TopologySpec::Clos { shape, .. } => (shape.tors(), shape.hosts_per_tor),
            // Not slot-shaped: one slot per host (a [cluster] is refused on a graph).
            TopologySpec::Graph(ref g) => (g.num_hosts, 1),
        }
    }

    /// Host slots (the hosts without a `[cluster]`; NIC ports of one plane with one).
    pub fn num_hosts(&self) -> u32 {
        match *self {
            TopologySpec::Dragonfly { p, a, g, .. } => p * a * g,
            TopologySpec::DragonflyPlus {
                leaves,
                hosts_per_leaf,
                g,
                ..
            } => leaves * hosts_per_leaf * g,
            TopologySpec::FatTree { k, .. } => k * k * k / 4,
            TopologySpec::LeafSpine {
                leaves,
                hosts_per_leaf,
                ..
            } => leaves * hosts_per_leaf,
            TopologySpec::Clos { shape, .. } => shape.hosts(),
            TopologySpec::Graph(ref g) => g.num_hosts,
        }
    }
}

/// `[cluster]`: GPU servers on the scale-out topology (see `topology::cluster`). The topology's host
/// slots become NIC ports; the endpoints are GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClusterSpec {
    pub gpus_per_server: u32,
    /// Divides `gpus_per_server`; fewer NICs than GPUs: consecutive GPUs share a NIC.
    pub nics_per_server: u32,
    pub cabling: Cabling,
    /// Copies of the scale-out topology; each NIC has one port on each.
    pub planes: u32,
    pub cross_rail: CrossRail,
    /// The scale-up domain (NVSwitch), if any.
    pub scaleup: Option<ScaleUpSpec>,
    /// The GPU-NIC attachment (PCIe-like): a link of its own to a shared NIC, or on a one-NIC-per-GPU
    /// server its latency added to the NIC link and its rate a cap on it.
    pub nic: NicAttachSpec,
    /// Whether `nic` was given on a one-NIC-per-GPU server (without it, the GPU attaches directly
    /// to its NIC port); always false with shared NICs, whose attachment is always a link.
    pub nic_given: bool,
    pub servers_per_rack: u32,
    /// PXN: the relay GPU's transit buffer (bytes) before it pauses its scale-up link.
    pub pxn_buffer_bytes: u64,
}

/// How NICs are cabled to the leaves (the topology's slot switches).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cabling {
    /// NIC i of every server of a scalable unit on leaf i of the unit.
    Rail,
    /// All NICs of a server on one leaf (top of rack).
    Tor,
}

/// How a GPU reaches a GPU on another rail (used by path choice).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrossRail {
    /// Through the scale-out spine.
    Spine,
    /// PCIe x NVLink: a scale-up hop to the GPU on the destination's rail, then that rail.
    Pxn,
}

/// The scale-up domain: a non-blocking switch (NVSwitch) joining `gpus` GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScaleUpSpec {
    /// GPUs per domain (a multiple of gpus_per_server).
    pub gpus: u32,
    /// Per GPU, each direction.
    pub rate_bps: Rate,
    /// Forwarding latency of the scale-up switch.
    pub latency_ps: Time,
    /// Propagation delay of a GPU <-> scale-up switch link.
    pub link_delay_ps: Time,
    pub buffer_bytes: Bytes,
}

/// The GPU-NIC attachment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NicAttachSpec {
    pub rate_bps: Rate,
    pub latency_ps: Time,
    /// Packet memory of a shared NIC.
    pub buffer_bytes: Bytes,
}

impl ClusterSpec {
    /// Servers on a topology with `slots` host slots per plane.
    pub fn servers(&self, slots: u32) -> u32 {
        slots / self.nics_per_server
    }

    /// GPUs on a topology with `slots` host slots per plane.
    pub fn gpus(&self, slots: u32) -> u32 {
        self.servers(slots) * self.gpus_per_server
    }
}

/// RED marking on egress queue depth (per priority).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EcnSpec {
    pub kmin_bytes: Bytes,
    pub kmax_bytes: Bytes,
    pub pmax: f64,
    /// Decide at dequeue (default) or at enqueue.
    pub on_dequeue: bool,
    /// Bit c set: priority c is marked.
    pub priorities: u8,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PfcThreshold {
    /// Pause when an ingress queue holds more than this many bytes.
    Static(Bytes),
    /// Pause when an ingress queue holds more than beta x the free shared buffer.
    Dynamic(f64),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PfcSpec {
    /// Bit c set: priority c is lossless.
    pub priorities: u8,
    pub xoff: PfcThreshold,
    pub xon_offset_bytes: Bytes,
    /// Headroom per (ingress port, lossless priority); `None` sizes it per link.
    pub headroom_bytes: Option<Bytes>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheduler {
    Strict,
    /// Deficit weighted round robin over priorities 0..7 (weights), control frames first.
    Dwrr([u32; 8]),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SwitchSpec {
    pub buffer_bytes: Bytes,
    pub port_buffer_bytes: Option<Bytes>,
    pub latency_ps: Time,
    /// Dynamic threshold of lossy queues (alpha x free shared buffer).
    pub alpha: Option<f64>,
    /// Static cap per (port, priority) queue.
    pub queue_limit_bytes: Option<Bytes>,
    pub scheduler: Scheduler,
    pub ecn: Option<EcnSpec>,
    pub pfc: Option<PfcSpec>,
    /// Packet trimming (Ultra Ethernet).
    pub trimming: Option<crate::switch::trim::TrimmingSpec>,
    /// Reduction engines (in-network collectives; see `switch::reduction`).
    pub reduction: Option<crate::switch::reduction::ReductionSpec>,
}

/// How a switch picks among the egress ports of an ECMP group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadBalancing {
    /// Per flow, by a hash of its header.
    Ecmp,
    /// Per packet.
    Spray(Pick),
    /// Per flowlet: a flow re-picks after an idle gap.
    Flowlet { gap_ps: Time, pick: Pick },
    /// The least-loaded port by local queue depth, with a bias toward the previous choice, per
    /// packet or per flowlet.
    Adaptive {
        per_packet: bool,
        gap_ps: Time,
        bias_bytes: Bytes,
    },
    /// Dragonfly non-minimal routing through an intermediate group (Valiant, UGAL, PAR); ECMP
    /// hashing picks among equal ports along the way.
    NonMinimal(NonMinimal),
}

/// Which path a dragonfly packet takes: minimal, or via a random intermediate group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NonMinimalMode {
    /// Always via a random intermediate group.
    Valiant,
    /// At the source router: minimal unless its local queue x hops exceeds a non-minimal
    /// candidate's by more than the threshold.
    UgalL,
    /// As UGAL-L, comparing the queues along the whole paths (global knowledge).
    UgalG,
    /// UGAL-L, re-decided at each router of the source group (progressive adaptive routing).
    Par,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NonMinimal {
    pub mode: NonMinimalMode,
    /// Random intermediate groups compared with the minimal path (UGAL, PAR).
    pub candidates: u32,
    /// Bias toward the minimal path, in queued bytes (x hops for UGAL-L and PAR).
    pub threshold_bytes: Bytes,
    /// Decide once per flowlet (a flow's packets closer than `gap_ps`) instead of per packet, so
    /// a flow's packets keep their order.
    pub per_flowlet: bool,
    pub gap_ps: Time,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    Random,
    RoundRobin,
    LeastLoaded,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HashFunction {
    Mix,
    Crc32,
    Xor,
}

/// Header fields ECMP hashes (bits of `RoutingSpec::hash_fields`).
pub mod hash_field {
    pub const SRC: u8 = 1;
    pub const DST: u8 = 2;
    pub const SPORT: u8 = 4;
    pub const DPORT: u8 = 8;
    pub const FLOW_LABEL: u8 = 16;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoutingSpec {
    pub load_balancing: LoadBalancing,
    pub hash_fields: u8,
    pub hash: HashFunction,
    pub per_switch_seed: bool,
    pub flowlet_table: u32,
    /// Dragonflies under PFC: a lossless packet moves up one priority class per global hop (and
    /// once more when PAR diverts it inside the source group), the virtual-channel method of
    /// deadlock freedom.
    pub hop_classes: bool,
}

impl RoutingSpec {
    /// Classes a packet may climb above its own with hop classes on.
    pub fn max_class_rise(&self) -> u8 {
        match self.load_balancing {
            LoadBalancing::NonMinimal(NonMinimal {
                mode: NonMinimalMode::Par,
                ..
            }) => 3,
            LoadBalancing::NonMinimal(_) => 2,
            _ => 1,
        }
    }
}

/// A node named in a scenario, resolved against the fabric when it is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeName {
    Id(u32),
    Role { role: String, index: u32 },
}

/// What a fault does to each link it covers while it lasts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FaultKind {
    /// Nothing passes; what is on the wire and queued for the link is lost.
    Down,
    /// The link runs at this rate.
    Degrade { rate_bps: u64 },
    /// Packets are lost at random (corrupted, dropped by the receiver's CRC check): each packet
    /// with `probability`, and each of its wire bits independently with `ber`, so a packet of
    /// `b` bytes is lost with `1 - (1 - probability) (1 - ber)^(8 b)`.
    Loss { probability: f64, ber: f64 },
    /// The link's propagation delay grows by this much.
    Delay { added_ps: Time },
}

impl FaultKind {
    /// The kind's name in scenarios and faults.arrow.
    pub fn name(&self) -> &'static str {
        match self {
            FaultKind::Down => "down",
            FaultKind::Degrade { .. } => "degrade",
            FaultKind::Loss { .. } => "loss",
            FaultKind::Delay { .. } => "delay",
        }
    }
}

/// Which direction(s) of a link a fault covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FaultDirection {
    /// Both directions (the cable).
    #[default]
    Both,
    /// Only from the first end named to the second (`"a->b"`).
    Forward,
    /// Only from the second end to the first (`"b->a"`).
    Backward,
}

/// What a fault covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultTarget {
    /// One link, given by its two ends.
    Link {
        ends: [NodeName; 2],
        direction: FaultDirection,
    },
    /// A component: every link of a node (a switch, a NIC, a GPU, a host), or of every node of a
    /// GPU server (`"server:N"` on a `[cluster]`).
    Component(NodeName),
    /// Every link of a tier ("host", "fabric", "core", "global", "scaleup", "pcie").
    Tier(String),
}

/// A random (or fixed) duration: flap periods, times between failures and to repair.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Holding {
    Fixed(Time),
    Exponential { mean_ps: Time },
    Uniform { min_ps: Time, max_ps: Time },
}

impl Holding {
    /// One draw, in ps (at least 1 ps, so that a fault never ends before it starts, and at most
    /// the longest scenario time, so that sums of draws stay far from overflowing).
    pub fn draw(&self, rng: &mut crate::rng::Rng) -> Time {
        let t = match *self {
            Holding::Fixed(t) => t,
            Holding::Exponential { mean_ps } => {
                // Inverse transform of 1 - U, U in [0, 1): never ln(0).
                let u = 1.0 - rng.unit();
                (-(u.ln()) * mean_ps as f64).round() as Time
            }
            Holding::Uniform { min_ps, max_ps } => min_ps + rng.below(max_ps - min_ps + 1),
        };
        t.clamp(1, super::values::MAX_TIME_PS)
    }

    /// The mean of the distribution, ps.
    pub fn mean_ps(&self) -> f64 {
        match *self {
            Holding::Fixed(t) => t as f64,
            Holding::Exponential { mean_ps } => mean_ps as f64,
            Holding::Uniform { min_ps, max_ps } => (min_ps as f64 + max_ps as f64) / 2.0,
        }
    }
}

/// A link that flaps: down for `down`, up for `up`, again and again from the fault's `at` until
/// its `until` or `count` down periods.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FlapSpec {
    pub down: Holding,
    pub up: Holding,
    pub count: Option<u32>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FaultSpec {
    pub target: FaultTarget,
    pub kind: FaultKind,
    pub at_ps: Time,
    pub until_ps: Option<Time>,
    pub detection_ps: Time,
    /// `kind = "flap"`: repeated down periods (the kind is then `Down`).
    pub flap: Option<FlapSpec>,
}

/// Which components a failure process fails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessComponents {
    /// Links (cables, both directions), of one tier or all.
    Links { tier: Option<String> },
    /// Every node of a role ("spine", "leaf", "nic", "gpu", "host", ...).
    Role(String),
    /// The GPU servers of a `[cluster]`.
    Servers,
}

/// `[[failure_process]]`: every component of a class fails after a time drawn from `mtbf` and is
/// repaired after one drawn from `mttr`, independently, over `[start, until)`.
#[derive(Debug, Clone, PartialEq)]
pub struct FailureProcessSpec {
    pub components: ProcessComponents,
    pub mtbf: Holding,
    pub mttr: Holding,
    pub start_ps: Time,
    pub until_ps: Time,
    pub detection_ps: Time,
}

/// DCQCN parameters (see shared/reference/dcqcn_parameters.csv for the published values).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DcqcnSpec {
    /// Mellanox/HPCC-repo behaviour: alpha updated on a fixed period (with or without CNP), the
    /// first CNP sets alpha = 1 without cutting, cuts gated by `rate_decrease_interval_ps`.
    pub mellanox: bool,
    pub g: f64,
    pub alpha_init: f64,
    pub cnp_interval_ps: Time,
    pub alpha_interval_ps: Time,
    pub rate_timer_ps: Time,
    /// 0: no byte counter.
    pub byte_counter_bytes: Bytes,
    pub fast_recovery: u32,
    pub rate_ai_bps: u64,
    pub rate_hai_bps: u64,
    pub min_rate_bps: u64,
    /// 0: cut on every CNP.
    pub rate_decrease_interval_ps: Time,
    pub clamp_target_rate: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CongestionControl {
    /// Send at line rate.
    None,
    Dcqcn(DcqcnSpec),
    Dctcp(crate::cc::dctcp_config::DctcpSpec),
    Swift(crate::cc::swift_config::SwiftSpec),
    Hpcc(crate::cc::hpcc_config::HpccSpec),
    Nscc(crate::cc::nscc_config::NsccSpec),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LossRecovery {
    /// Discard out-of-order packets, NACK the gap, resend from it (RoCE NICs).
    GoBackN,
    /// Keep out-of-order packets; resend only what is missing.
    Selective,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TransportSpec {
    pub mtu_bytes: Bytes,
    pub header_bytes: Bytes,
    pub ack_bytes: Bytes,
    pub ack_every: u32,
    pub rto_ps: Time,
    pub cc: CongestionControl,
    pub loss_recovery: LossRecovery,
    pub reorder_threshold: u32,
    pub data_priority: u8,
    pub control_priority: u8,
    /// Receiver-driven credits (None: senders send as their congestion control allows).
    pub credits: Option<crate::transport::credits::CreditSpec>,
}

/// One flow as a workload describes it, before the engine gives it an id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowSpec {
    pub src: u32,
    pub dst: u32,
    pub size_bytes: Bytes,
    pub start_ps: Time,
}

/// Who a Poisson sender sends to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PoissonPeers {
    /// Every sender is one of these hosts and picks a destination uniformly among the others.
    Among(Vec<u32>),
    /// `dsts[i]` are the destinations of `senders[i]`, one picked uniformly per flow.
    Pairs(Vec<Vec<u32>>),
}

/// Where a Poisson workload's flow sizes come from (`PoissonSpec::cdf_name` names it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CdfSource {
    /// A shipped distribution.
    Builtin,
    /// A CSV file of `size_bytes,cdf` points, read when the scenario is built.
    File,
}

/// Poisson flow arrivals with sizes from a CDF, at a target load of the senders' host links.
#[derive(Debug, Clone, PartialEq)]
pub struct PoissonSpec {
    /// The scenario's name for the distribution (a shipped name or the CSV path).
    pub cdf_name: String,
    pub cdf: CdfSource,
    /// Offered payload load per sender, as a fraction of its host link rate.
    pub load: f64,
    pub senders: Vec<u32>,
    pub peers: PoissonPeers,
    pub start_ps: Time,
    /// Flows arrive before this time (from `duration`, or the scenario's stop time).
    pub end_ps: Option<Time>,
    /// At most this many flows in all.
    pub count: Option<u64>,
    pub host_rate_bps: Rate,
    pub mtu_bytes: Bytes,
    pub header_bytes: Bytes,
}

/// A collective operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CollectiveOp {
    AllReduce,
    AllGather,
    ReduceScatter,
    AllToAll,
}

impl CollectiveOp {
    pub fn name(self) -> &'static str {
        match self {
            CollectiveOp::AllReduce => "all_reduce",
            CollectiveOp::AllGather => "all_gather",
            CollectiveOp::ReduceScatter => "reduce_scatter",
            CollectiveOp::AllToAll => "all_to_all",
        }
    }

    /// Bus bandwidth over algorithm bandwidth for `n` ranks (the nccl-tests convention): what each
    /// rank's link must carry relative to size / time.
    pub fn bus_factor(self, n: u32) -> f64 {
        let n = n as f64;
        match self {
            CollectiveOp::AllReduce => 2.0 * (n - 1.0) / n,
            CollectiveOp::AllGather | CollectiveOp::ReduceScatter | CollectiveOp::AllToAll => {
                (n - 1.0) / n
            }
        }
    }
}

/// How a collective moves its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CollectiveAlgorithm {
    /// Ranks in a ring; each step passes one block to the next rank.
    Ring,
    /// Double binary tree (two complementary in-order binary trees, half the data each), pipelined
    /// in chunks: reduce up, broadcast down.
    Tree,
    /// Recursive halving (reduce-scatter) and doubling (all-gather); Rabenseifner's all-reduce.
    HalvingDoubling,
    /// All-to-all: every rank sends to every other at once.
    Direct,
    /// All-to-all in n-1 rounds: rank r sends to r+k in round k, after its round k-1 send finished.
    Pairwise,
    /// Two tiers: ring reduce-scatter inside each scale-up domain, ring across domains per local
    /// index, ring all-gather inside the domain (all-gather: across then inside; reduce-scatter:
    /// inside then across).
    HierarchicalRing,
    /// All-reduce in two tiers: ring reduce-scatter inside each domain, double binary tree across
    /// domains per local index, ring all-gather inside the domain.
    HierarchicalTree,
    /// All-to-all in two tiers (NCCL's PXN): exchange inside the domain to the rank with the
    /// destination's local index, then across domains between ranks of the same local index.
    Pxn,
    /// In-network reduction (SHARP-style): every rank streams its buffer up a reduction tree of
    /// the scale-out fabric's switches, which combine it and multicast the result down (see
    /// `switch::reduction`).
    InNetwork,
    /// NVLink SHARP: the reduction in the scale-up domain's NVSwitch (one-switch tree).
    Nvls,
}

impl CollectiveAlgorithm {
    pub fn name(self) -> &'static str {
        match self {
            CollectiveAlgorithm::Ring => "ring",
            CollectiveAlgorithm::Tree => "tree",
            CollectiveAlgorithm::HalvingDoubling => "halving_doubling",
            CollectiveAlgorithm::Direct => "direct",
            CollectiveAlgorithm::Pairwise => "pairwise",
            CollectiveAlgorithm::HierarchicalRing => "hierarchical_ring",
            CollectiveAlgorithm::HierarchicalTree => "hierarchical_tree",
            CollectiveAlgorithm::Pxn => "pxn",
            CollectiveAlgorithm::InNetwork => "in_network",
            CollectiveAlgorithm::Nvls => "nvls",
        }
    }

    /// Whether the algorithm is built from the group's scale-up domains (needs their size).
    pub fn is_hierarchical(self) -> bool {
        matches!(
            self,
            CollectiveAlgorithm::HierarchicalRing
                | CollectiveAlgorithm::HierarchicalTree
                | CollectiveAlgorithm::Pxn
        )
    }

    /// Whether the switches reduce the data (`in_network`, `nvls`).
    pub fn is_in_network(self) -> bool {
        matches!(
            self,
            CollectiveAlgorithm::InNetwork | CollectiveAlgorithm::Nvls
        )
    }
}

/// One collective workload: the same operation on each group (concurrently), `iterations` times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectiveSpec {
    pub op: CollectiveOp,
    pub algorithm: CollectiveAlgorithm,
    /// Each group's hosts in rank order (rank i runs on `groups[g][i]`); with `shuffle`, the
    /// groups before the shuffle (the same sizes).
    pub groups: Vec<Vec<u32>>,
    /// `rank_order = "shuffled"`: the hosts and grouping whose ranks the build places by a seeded
    /// shuffle.
    pub shuffle: Option<RankPlacement>,
    /// The nccl-tests size: the all-reduce buffer, the all-gather output, the reduce-scatter input,
    /// the all-to-all send buffer of one rank.
    pub size_bytes: Bytes,
    pub iterations: u32,
    /// Between the end of an iteration and the start of the next (the compute phase).
    pub compute_gap_ps: Time,
    pub start_ps: Time,
    /// Tree: pipeline chunk.
    pub chunk_bytes: Bytes,
    /// Tree: a leaf sends its chunks this far apart (a chunk's serialisation at the host link).
    pub chunk_interval_ps: Time,
    /// Hosts per scale-up domain: host h is in domain h / domain_size (hosts numbered
    /// domain-major). None: every host is a domain of its own (a plain host has no scale-up tier).
    pub domain_size: Option<u32>,
}

impl CollectiveSpec {
    /// The scale-up domain of `host`.
    pub fn domain_of(&self, host: u32) -> u32 {
        match self.domain_size {
            Some(d) => host / d.max(1),
            None => host,
        }
    }
}

/// Hosts split into groups of `group_size` ranks, consecutively or (`strided`) every m-th.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankPlacement {
    pub hosts: Vec<u32>,
    pub group_size: u32,
    pub strided: bool,
}

/// Flows read from a file (`replay`) when the scenario is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplaySpec {
    pub file: String,
    /// Added to every row's start.
    pub offset_ps: Time,
    /// Every row's hosts must be below this.
    pub n_hosts: u32,
}

/// The senders of an incast.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IncastSenders {
    /// These hosts.
    Listed(Vec<u32>),
    /// `count` distinct hosts other than the receiver, drawn when the scenario is built.
    Drawn { count: u32, n_hosts: u32 },
}

impl IncastSenders {
    pub fn len(&self) -> usize {
        match self {
            IncastSenders::Listed(l) => l.len(),
            IncastSenders::Drawn { count, .. } => *count as usize,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Where a synthetic workload's messages go (BookSim-style traffic patterns).
#[derive(Debug, Clone, PartialEq)]
pub enum SyntheticPattern {
    /// A uniformly random other host per message.
    UniformRandom,
    /// A host of group x sends to a uniformly random host of group (x + 1) mod G.
    WorstCase,
    /// A seeded random derangement of the hosts, fixed for the run.
    Permutation,
    /// The host at position j of group x sends to position j of group (x + max(G/2, 1)) mod G.
    Tornado,
    /// Host i sends to (i + shift) mod N (0 < shift < N).
    Shift(u32),
    /// A fraction of messages to a uniformly chosen hot host, the others uniform random.
    HotSpot { hosts: Vec<u32>, fraction: f64 },
}

impl SyntheticPattern {
    pub fn name(&self) -> &'static str {
        match self {
            SyntheticPattern::UniformRandom => "uniform_random",
            SyntheticPattern::WorstCase => "worst_case",
            SyntheticPattern::Permutation => "permutation",
            SyntheticPattern::Tornado => "tornado",
            SyntheticPattern::Shift(_) => "shift",
            SyntheticPattern::HotSpot { .. } => "hot_spot",
        }
    }
}

/// How a synthetic source's messages arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ArrivalProcess {
    /// Slots of one message's wire time at the host link rate; a message per slot with
    /// probability `load`.
    Bernoulli,
    /// Exponential inter-arrival times (integer ps) with the same mean rate.
    Poisson,
}

/// Open-loop synthetic traffic: every host generates messages of one size at a fraction of its
/// host link rate (wire bytes), from `start_ps` until `end_ps` (the scenario's stop time).
#[derive(Debug, Clone, PartialEq)]
pub struct SyntheticSpec {
    pub pattern: SyntheticPattern,
    pub process: ArrivalProcess,
    /// Offered wire load per host, a fraction of its host link rate, in (0, 1].
    pub load: f64,
    pub size_bytes: Bytes,
    /// Hosts 0..n_hosts all send.
    pub n_hosts: u32,
    /// Hosts per group (dragonfly group, Dragonfly+ group, fat-tree pod, leaf): group x holds
    /// hosts x*group_size .. (x+1)*group_size.
    pub group_size: u32,
    pub start_ps: Time,
    pub end_ps: Time,
    pub host_rate_bps: Rate,
    /// One message on the wire: payload plus a header per packet.
    pub wire_bytes: Bytes,
    /// Its serialisation at the host link rate (the Bernoulli slot).
    pub slot_ps: Time,
}

#[derive(Debug, Clone, PartialEq)]
pub enum WorkloadSpec {
    Flows {
        flows: Vec<FlowSpec>,
    },
    /// `senders` listed, or drawn when the scenario is built.
    Incast {
        receiver: u32,
        senders: IncastSenders,
        size_bytes: Bytes,
        start_ps: Time,
        rounds: u32,
        round_gap_ps: Time,
    },
    /// `hosts` take part; the destinations are a seeded derangement of them.
    Permutation {
        hosts: Vec<u32>,
        size_bytes: Bytes,
        start_ps: Time,
    },
    /// Every host of `hosts` sends `size_bytes` to every other; the flows to the k-th next host
    /// start (k - 1) x `stagger_ps` after `start_ps`.
    AllToAll {
        hosts: Vec<u32>,
        size_bytes: Bytes,
        start_ps: Time,
        stagger_ps: Time,
    },
    Poisson(PoissonSpec),
    Collective(CollectiveSpec),
    Replay(ReplaySpec),
    Synthetic(SyntheticSpec),
    /// A training step, expanded into a step graph when the scenario is built.
    Training(crate::workload::training::TrainingSpec),
    /// LLM serving steps, expanded into a step graph when the scenario is built.
    Inference(crate::workload::inference::InferenceSpec),
    /// A step graph (`kind = "graph"`).
    Graph(Box<crate::workload::graph::GraphSpec>),
}

impl WorkloadSpec {
    pub fn kind(&self) -> &'static str {
        match self {
            WorkloadSpec::Flows { .. } => "flows",
            WorkloadSpec::Incast { .. } => "incast",
            WorkloadSpec::Permutation { .. } => "permutation",
            WorkloadSpec::AllToAll { .. } => "all_to_all",
            WorkloadSpec::Poisson(_) => "poisson",
            WorkloadSpec::Collective(_) => "collective",
            WorkloadSpec::Replay(_) => "replay",
            WorkloadSpec::Synthetic(_) => "synthetic",
            WorkloadSpec::Training(_) => "training",
            WorkloadSpec::Inference(_) => "inference",
            WorkloadSpec::Graph(_) => "graph",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct NamedWorkload {
    pub name: String,
    pub spec: WorkloadSpec,
    /// Step workloads: what a failure that cuts off one of its ranks does to the job.
    pub reaction: Option<crate::workload::graph::reaction::Reaction>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueuesTraceSpec {
    pub interval_ps: Time,
    pub hosts: bool,
    pub empty: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RatesTraceSpec {
    /// Only these flows (None: all).
    pub flows: Option<Vec<u32>>,
    /// At most one row per flow per interval (0: every change).
    pub interval_ps: Time,
}

/// A port named in `trace.packets.ports`: its id, or a node and the index of the port among
/// the node's ports (`"leaf:3/2"`, `"17/0"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortName {
    Id(u32),
    OfNode { node: NodeName, index: u32 },
}

/// `trace.packets`: which packet events packets.arrow records (each filter: None = all).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketsTraceSpec {
    /// Only these flows (sorted ids); PFC frames belong to no flow and are left out by a flow
    /// filter.
    pub flows: Option<Vec<u32>>,
    /// Only events at these nodes (resolved against the fabric when it is built).
    pub nodes: Option<Vec<NodeName>>,
    /// Only events at these egress ports.
    pub ports: Option<Vec<PortName>>,
    /// Only events in `[start_ps, end_ps)`.
    pub start_ps: Time,
    pub end_ps: Option<Time>,
    /// Stop recording after this many rows (run.json then says `packet_trace_truncated`).
    pub max_rows: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceSpec {
    pub unfinished_flows: bool,
    pub queues: Option<QueuesTraceSpec>,
    pub pfc: bool,
    pub links_interval_ps: Option<Time>,
    pub rates: Option<RatesTraceSpec>,
    /// packets.arrow (off by default).
    pub packets: Option<PacketsTraceSpec>,
    /// latency.arrow and the one-way latency summary.
    pub latency: bool,
}

/// How a NIC picks the next data packet among its active flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NicArbitration {
    /// One packet of each active flow in turn.
    #[default]
    RoundRobin,
    /// Flows in start order: the oldest active flow sends until it has nothing left to send.
    Fifo,
}

/// A validated scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    pub name: String,
    pub seed: u64,
    /// Threads of one run: 1 runs one world; more split the fabric into that many partitions
    /// (`engine::parallel`), with the same outputs.
    pub threads: u32,
    pub stop: StopAt,
    pub topology: TopologySpec,
    pub switch: SwitchSpec,
    pub routing: RoutingSpec,
    pub faults: Vec<FaultSpec>,
    /// `[[failure_process]]` entries: failures drawn from MTBF / MTTR when the scenario is built.
    pub failure_processes: Vec<FailureProcessSpec>,
    pub transport: TransportSpec,
    pub workloads: Vec<NamedWorkload>,
    pub trace: TraceSpec,
    /// Start of the measurement window `[warmup_ps, stop)` of synthetic workloads.
    pub warmup_ps: Time,
    pub nic_arbitration: NicArbitration,
    /// `[cluster]`: GPU servers on the topology (None: one host per slot, as without it).
    pub cluster: Option<ClusterSpec>,
    /// `[ocs]`: an optical circuit switch between electrical switches (None: without).
    pub ocs: Option<crate::topology::ocs::OcsSpec>,
    /// `[control]`: the live control loop (None: no `[control]` table).
    pub control: Option<crate::control::config::ControlSpec>,
}

impl Scenario {
    /// The endpoints workloads address: GPUs with a `[cluster]`, else the topology's hosts.
    pub fn num_endpoints(&self) -> u32 {
        endpoints(&self.topology, self.cluster.as_ref())
    }
}

/// The endpoints of `topology` with `cluster`: its GPUs, or its hosts without a cluster.
pub fn endpoints(topology: &TopologySpec, cluster: Option<&ClusterSpec>) -> u32 {
    match cluster {
        Some(c) => c.gpus(topology.num_hosts()),
        None => topology.num_hosts(),
    }
}
