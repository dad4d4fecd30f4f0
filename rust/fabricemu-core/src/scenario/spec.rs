//! The validated scenario the engine runs: every default applied, every id checked, units resolved.

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
}

impl TopologySpec {
    /// The links between hosts and their first switch.
    pub fn host_link(&self) -> LinkSpec {
        match *self {
            TopologySpec::FatTree { host, .. } | TopologySpec::LeafSpine { host, .. } => host,
        }
    }

    pub fn num_hosts(&self) -> u32 {
        match *self {
            TopologySpec::FatTree { k, .. } => k * k * k / 4,
            TopologySpec::LeafSpine {
                leaves,
                hosts_per_leaf,
                ..
            } => leaves * hosts_per_leaf,
        }
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
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadBalancing {
    Ecmp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoutingSpec {
    pub load_balancing: LoadBalancing,
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
    pub data_priority: u8,
    pub control_priority: u8,
}

/// One flow as a workload describes it, before the engine gives it an id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowSpec {
    pub src: u32,
    pub dst: u32,
    pub size_bytes: Bytes,
    pub start_ps: Time,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkloadSpec {
    Flows {
        flows: Vec<FlowSpec>,
    },
    /// `senders` are resolved to host ids (drawn with the workload's seed when given as a count).
    Incast {
        receiver: u32,
        senders: Vec<u32>,
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
}

impl WorkloadSpec {
    pub fn kind(&self) -> &'static str {
        match self {
            WorkloadSpec::Flows { .. } => "flows",
            WorkloadSpec::Incast { .. } => "incast",
            WorkloadSpec::Permutation { .. } => "permutation",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedWorkload {
    pub name: String,
    pub spec: WorkloadSpec,
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

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceSpec {
    pub unfinished_flows: bool,
    pub queues: Option<QueuesTraceSpec>,
    pub pfc: bool,
    pub links_interval_ps: Option<Time>,
    pub rates: Option<RatesTraceSpec>,
}

/// A validated scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    pub name: String,
    pub seed: u64,
    pub stop: StopAt,
    pub topology: TopologySpec,
    pub switch: SwitchSpec,
    pub routing: RoutingSpec,
    pub transport: TransportSpec,
    pub workloads: Vec<NamedWorkload>,
    pub trace: TraceSpec,
}
