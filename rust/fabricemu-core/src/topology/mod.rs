//! Fabric graphs: nodes (hosts first, then switches) and unidirectional links named by their egress
//! port. Builders for each topology kind live in their own module.

pub mod config;
mod dragonfly;
mod fat_tree;
pub mod faults;
mod leaf_spine;
pub mod summary;

use crate::config::{LinkSpec, SwitchSpec, TopologySpec};
pub use crate::ids::{IdRange, IdVec, LinkId, NodeId, PortId};
use crate::units::{Rate, Time};

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
    /// Ports of node n are `port_start[n]..port_start[n + 1]` (`num_nodes + 1` entries: the
    /// last, past every node, is the number of ports; use [`Fabric::ports_of`]).
    pub port_start: IdVec<NodeId, PortId>,
    /// Per port: the node that transmits on it.
    pub port_node: IdVec<PortId, NodeId>,
    /// Per port: the node at the far end.
    pub peer_node: IdVec<PortId, NodeId>,
    /// Per port: the reverse-direction port (the ingress port at the far end).
    pub peer_port: IdVec<PortId, PortId>,
    pub rate_bps: IdVec<PortId, Rate>,
    /// Propagation delay of the link.
    pub delay_ps: IdVec<PortId, Time>,
    pub tier: IdVec<PortId, Tier>,
    /// What each node is.
    pub role: IdVec<NodeId, Role>,
}

impl Fabric {
    pub fn num_ports(&self) -> u32 {
        self.port_node.len() as u32
    }

    /// Every port (every link, named by its egress port).
    #[inline]
    pub fn ports(&self) -> IdRange<PortId> {
        self.port_node.ids()
    }

    /// Every node: hosts, then switches.
    #[inline]
    pub fn nodes(&self) -> IdRange<NodeId> {
        IdRange::from_indices(0, self.num_nodes as usize)
    }

    /// The hosts.
    #[inline]
    pub fn hosts(&self) -> IdRange<NodeId> {
        IdRange::from_indices(0, self.num_hosts as usize)
    }

    /// The switches.
    #[inline]
    pub fn switches(&self) -> IdRange<NodeId> {
        IdRange::from_indices(self.num_hosts as usize, self.num_nodes as usize)
    }

    #[inline]
    pub fn is_host(&self, n: NodeId) -> bool {
        n.get() < self.num_hosts
    }

    /// The ports of node `n`, contiguous.
    #[inline]
    pub fn ports_of(&self, n: NodeId) -> IdRange<PortId> {
        let starts = self.port_start.as_slice();
        IdRange::from_indices(starts[n.index()].index(), starts[n.index() + 1].index())
    }

    /// The port a host transmits on (hosts have one NIC port).
    #[inline]
    pub fn host_port(&self, h: NodeId) -> PortId {
        self.port_start[h]
    }

    /// The switch's position among switches (`node - num_hosts`), for arrays kept per switch.
    #[inline(always)]
    pub fn switch_index(&self, n: NodeId) -> usize {
        debug_assert!(!self.is_host(n));
        (n.get() - self.num_hosts) as usize
    }
}

/// Collects links, then lays ports out node by node (each node's ports contiguous, in link order).
/// The builders number nodes arithmetically (`edge0 + pod * half + e`), so the builder takes node
/// numbers and makes them `NodeId`s: it is where the fabric's ids are assigned.
pub(crate) struct FabricBuilder {
    num_hosts: u32,
    roles: IdVec<NodeId, Role>,
    links: Vec<(NodeId, NodeId, LinkSpec, Tier)>,
}

impl FabricBuilder {
    pub fn new(num_hosts: u32) -> Self {
        Self {
            num_hosts,
            roles: IdVec::from_elem(Role::Host, num_hosts as usize),
            links: Vec::new(),
        }
    }

    /// Add `count` switches of a role; returns the first one's number.
    pub fn add_switches(&mut self, count: u32, role: Role) -> u32 {
        let first = self.roles.len() as u32;
        self.roles.extend(std::iter::repeat_n(role, count as usize));
        first
    }

    /// A bidirectional link between nodes numbered `a` and `b`: two ports, one at each end.
    pub fn link(&mut self, a: u32, b: u32, spec: LinkSpec, tier: Tier) {
        self.links
            .push((NodeId::new(a), NodeId::new(b), spec, tier));
    }

    pub fn build(self) -> Fabric {
        let n = self.roles.len();
        let mut degree: IdVec<NodeId, u32> = IdVec::from_elem(0, n);
        for &(a, b, _, _) in &self.links {
            degree[a] += 1;
            degree[b] += 1;
        }
        // One entry past the last node: the number of ports.
        let mut port_start: IdVec<NodeId, PortId> = IdVec::with_capacity(n + 1);
        let mut total = 0u32;
        for &d in &degree {
            port_start.push(PortId::new(total));
            total += d;
        }
        port_start.push(PortId::new(total));
        let total = total as usize;
        let mut next = port_start.clone();
        let mut f = Fabric {
            num_hosts: self.num_hosts,
            num_nodes: n as u32,
            port_start,
            port_node: IdVec::from_elem(NodeId::new(0), total),
            peer_node: IdVec::from_elem(NodeId::new(0), total),
            peer_port: IdVec::from_elem(PortId::new(0), total),
            rate_bps: IdVec::from_elem(0, total),
            delay_ps: IdVec::from_elem(0, total),
            tier: IdVec::from_elem(Tier::Host, total),
            role: self.roles,
        };
        for &(a, b, spec, tier) in &self.links {
            let pa = next[a];
            next[a] = PortId::new(pa.get() + 1);
            let pb = next[b];
            next[b] = PortId::new(pb.get() + 1);
            for (p, from, to, peer) in [(pa, a, b, pb), (pb, b, a, pa)] {
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
