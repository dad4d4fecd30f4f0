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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwitchSpec {
    pub buffer_bytes: Bytes,
    pub port_buffer_bytes: Option<Bytes>,
    pub latency_ps: Time,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadBalancing {
    Ecmp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoutingSpec {
    pub load_balancing: LoadBalancing,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CongestionControl {
    /// Send at line rate.
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransportSpec {
    pub mtu_bytes: Bytes,
    pub header_bytes: Bytes,
    pub ack_bytes: Bytes,
    pub ack_every: u32,
    pub rto_ps: Time,
    pub cc: CongestionControl,
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
pub struct TraceSpec {
    pub unfinished_flows: bool,
}

/// A validated scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
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
