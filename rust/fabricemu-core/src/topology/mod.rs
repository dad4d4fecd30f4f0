//! Fabric graphs: nodes (hosts first, then switches) and unidirectional links named by their egress
//! port. Builders for each topology kind live in their own module.

pub mod config;
mod dragonfly;
mod fat_tree;
pub mod faults;
mod leaf_spine;
pub mod summary;

use crate::config::{LinkSpec, SwitchSpec, TopologySpec};
use crate::units::{Rate, Time};

pub type NodeId = u32;
/// An egress port, which is also the id of the unidirectional link leaving it.
pub type PortId = u32;

/// Which tier a link belongs to (for reporting and per-tier settings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Tier {
    /// Host <-> edge / leaf switch.
    Host,
    /// Edge <-> aggregation, or leaf <-> spine.
    Fabric,
    /// Aggregation <-> core.
    Core,
    /// Between dragonfly groups.
    Global,
}

/// What a node is. Outputs, fault names (`"edge:0"`) and the topology summary print it with
/// [`Role::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Role {
    Host,
    /// Fat tree tiers.
    Edge,
    Agg,
    Core,
    /// Leaf-spine (and Dragonfly+ groups).
    Leaf,
    Spine,
    /// Dragonfly router.
    Router,
}

impl Role {
    pub const fn as_str(self) -> &'static str {
        match self {
            Role::Host => "host",
            Role::Edge => "edge",
            Role::Agg => "agg",
            Role::Core => "core",
            Role::Leaf => "leaf",
            Role::Spine => "spine",
            Role::Router => "router",
        }
    }

    /// Tiers bottom-up (to tell uplinks from downlinks): hosts, then edge / leaf switches, then
    /// aggregation / spine, then the rest.
    pub const fn tier_rank(self) -> u8 {
        match self {
            Role::Host => 0,
            Role::Edge | Role::Leaf => 1,
            Role::Agg | Role::Spine => 2,
            Role::Core | Role::Router => 3,
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The fabric as flat arrays. Node ids `0..num_hosts` are hosts, the rest switches. Every link is a
/// pair of ports, one per direction: `peer_port[p]` is the port carrying the reverse direction.
#[derive(Debug, Clone, Default)]
pub struct Fabric {
    pub num_hosts: u32,
    pub num_nodes: u32,
    /// Ports of node n are `port_start[n]..port_start[n + 1]`.
    pub port_start: Vec<PortId>,
    /// Per port: the node that transmits on it.
    pub port_node: Vec<NodeId>,
    /// Per port: the node at the far end.
    pub peer_node: Vec<NodeId>,
    /// Per port: the reverse-direction port (the ingress port at the far end).
    pub peer_port: Vec<PortId>,
    pub rate_bps: Vec<Rate>,
    /// Propagation delay of the link.
    pub delay_ps: Vec<Time>,
    pub tier: Vec<Tier>,
    /// What each node is.
    pub role: Vec<Role>,
}

impl Fabric {
    pub fn num_ports(&self) -> u32 {
        self.port_node.len() as u32
    }

    #[inline]
    pub fn is_host(&self, n: NodeId) -> bool {
        n < self.num_hosts
    }

    #[inline]
    pub fn ports_of(&self, n: NodeId) -> std::ops::Range<PortId> {
        self.port_start[n as usize]..self.port_start[n as usize + 1]
    }

    /// The port a host transmits on (hosts have one NIC port).
    #[inline]
    pub fn host_port(&self, h: NodeId) -> PortId {
        self.port_start[h as usize]
    }
}

/// Collects links, then lays ports out node by node (each node's ports contiguous, in link order).
pub(crate) struct FabricBuilder {
    num_hosts: u32,
    roles: Vec<Role>,
    links: Vec<(NodeId, NodeId, LinkSpec, Tier)>,
}

impl FabricBuilder {
    pub fn new(num_hosts: u32) -> Self {
        Self {
            num_hosts,
            roles: vec![Role::Host; num_hosts as usize],
            links: Vec::new(),
        }
    }

    /// Add `count` switches of a role; returns the first id.
    pub fn add_switches(&mut self, count: u32, role: Role) -> NodeId {
        let first = self.roles.len() as NodeId;
        self.roles.extend(std::iter::repeat_n(role, count as usize));
        first
    }

    /// A bidirectional link: two ports, one at each end.
    pub fn link(&mut self, a: NodeId, b: NodeId, spec: LinkSpec, tier: Tier) {
        self.links.push((a, b, spec, tier));
    }

    pub fn build(self) -> Fabric {
        let n = self.roles.len();
        let mut degree = vec![0u32; n + 1];
        for &(a, b, _, _) in &self.links {
            degree[a as usize] += 1;
            degree[b as usize] += 1;
        }
        let mut port_start = vec![0u32; n + 1];
        for i in 0..n {
            port_start[i + 1] = port_start[i] + degree[i];
        }
        let total = port_start[n] as usize;
        let mut next = port_start.clone();
        let mut f = Fabric {
            num_hosts: self.num_hosts,
            num_nodes: n as u32,
            port_start,
            port_node: vec![0; total],
            peer_node: vec![0; total],
            peer_port: vec![0; total],
            rate_bps: vec![0; total],
            delay_ps: vec![0; total],
            tier: vec![Tier::Host; total],
            role: self.roles,
        };
        for &(a, b, spec, tier) in &self.links {
            let pa = next[a as usize];
            next[a as usize] += 1;
            let pb = next[b as usize];
            next[b as usize] += 1;
            for (p, from, to, peer) in [(pa, a, b, pb), (pb, b, a, pa)] {
                let p = p as usize;
                f.port_node[p] = from;
                f.peer_node[p] = to;
                f.peer_port[p] = peer;
                f.rate_bps[p] = spec.rate_bps;
                f.delay_ps[p] = spec.delay_ps;
                f.tier[p] = tier;
            }
        }
        f
    }
}

/// Build the fabric a scenario describes.
pub fn build(spec: &TopologySpec, _switch: &SwitchSpec) -> Fabric {
    match *spec {
        TopologySpec::Dragonfly {
            p,
            a,
            h,
            g,
            arrangement,
            host,
            local,
            global,
        } => dragonfly::build(p, a, h, g, arrangement, host, local, global),
        TopologySpec::DragonflyPlus {
            leaves,
            spines,
            hosts_per_leaf,
            h,
            g,
            arrangement,
            host,
            local,
            global,
        } => dragonfly::build_plus(
            leaves,
            spines,
            hosts_per_leaf,
            h,
            g,
            arrangement,
            host,
            local,
            global,
        ),
        TopologySpec::FatTree {
            k,
            host,
            fabric,
            core,
        } => fat_tree::build(k, host, fabric, core),
        TopologySpec::LeafSpine {
            leaves,
            spines,
            hosts_per_leaf,
            host,
            fabric,
        } => leaf_spine::build(leaves, spines, hosts_per_leaf, host, fabric),
    }
}
