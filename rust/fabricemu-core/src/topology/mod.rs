//! Fabric graphs: nodes (hosts first, then switches) and unidirectional links named by their egress
//! port. Builders for each topology kind live in their own module.

mod clos;
pub mod cluster;
pub mod config;
mod dragonfly;
mod fat_tree;
pub mod faults;
pub mod graph_file;
mod leaf_spine;
pub mod nodes;
pub mod ocs;
pub mod summary;

pub use cluster::ClusterLayout;

use crate::config::{ClusterSpec, LinkSpec, SwitchSpec, TopologySpec};
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
    /// GPU <-> scale-up switch (NVLink).
    ScaleUp,
    /// GPU <-> shared NIC (PCIe).
    Pcie,
    /// A circuit of the optical circuit switch (`[ocs]`) between two electrical switches.
    Ocs,
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
    /// A GPU: the endpoint of a `[cluster]`.
    Gpu,
    /// A scale-up switch (one per scale-up domain).
    NvSwitch,
    /// A NIC shared by several GPUs (a small switch between their PCIe links and the rails).
    Nic,
    /// A switch of a graph topology (`kind = "graph"`) given no tier role.
    Switch,
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
            Role::Gpu => "gpu",
            Role::NvSwitch => "nvswitch",
            Role::Nic => "nic",
            Role::Switch => "switch",
        }
    }

    /// Tiers bottom-up (to tell uplinks from downlinks): hosts (GPUs and their shared NICs), then
    /// edge / leaf (and scale-up) switches, then aggregation / spine, then the rest.
    pub const fn tier_rank(self) -> u8 {
        match self {
            Role::Host | Role::Gpu | Role::Nic => 0,
            Role::Edge | Role::Leaf | Role::NvSwitch => 1,
            Role::Agg | Role::Spine | Role::Switch => 2,
            Role::Core | Role::Router => 3,
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The fabric as flat arrays. Node ids `0..num_hosts` are hosts (the endpoints: GPUs with a
/// `[cluster]`), the rest switches. Every link is a pair of ports, one per direction: `peer_port[p]`
/// is the port carrying the reverse direction.
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
    /// GPU servers (`[cluster]`): which GPU is where, and its ports (cold data; None without).
    pub cluster: Option<Box<ClusterLayout>>,
    /// The optical circuit switch (`[ocs]`): its ports, circuits and scheduled changes (cold
    /// data; None without). Its switch ports are the last of each switch's; a dark one (in no
    /// circuit) is its own peer.
    pub ocs: Option<Box<ocs::OcsLayout>>,
    /// The fault-free route table, when it was built ahead for many worlds of this fabric (the
    /// partitions of a parallel run share it: at 65,536 hosts it takes seconds to build).
    /// Empty otherwise: each world's router builds its own.
    pub routes: Option<std::sync::Arc<crate::routing::RouteTable>>,
}

impl Fabric {
    /// A fabric of `role.len()` nodes whose ports (`port_start`: each node's first port, and one
    /// entry past the last) are laid out but not wired yet: the builders wire them.
    pub(crate) fn unwired(
        num_hosts: u32,
        port_start: IdVec<NodeId, PortId>,
        role: IdVec<NodeId, Role>,
    ) -> Fabric {
        let total = port_start.as_slice().last().map_or(0, |p| p.get() as usize);
        Fabric {
            num_hosts,
            num_nodes: role.len() as u32,
            port_start,
            port_node: IdVec::from_elem(NodeId::new(0), total),
            peer_node: IdVec::from_elem(NodeId::new(0), total),
            peer_port: IdVec::from_elem(PortId::new(0), total),
            rate_bps: IdVec::from_elem(0, total),
            delay_ps: IdVec::from_elem(0, total),
            tier: IdVec::from_elem(Tier::Host, total),
            role,
            cluster: None,
            ocs: None,
            routes: None,
        }
    }

    pub fn num_ports(&self) -> u32 {
        self.port_node.len() as u32
    }

    /// Every port (every link, named by its egress port).
    #[inline]
    pub fn ports(&self) -> IdRange<PortId> {
        self.port_node.ids()
    }

    /// The shortest link delay (0 without links): nothing at one node reaches another sooner,
    /// the parallel engine's lookahead.
    pub fn shortest_delay(&self) -> Time {
        self.ports().map(|p| self.delay_ps[p]).min().unwrap_or(0)
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

    /// The ports of all hosts (hosts come first, so their ports do too).
    #[inline]
    pub fn host_ports(&self) -> IdRange<PortId> {
        IdRange::new(PortId::new(0), self.port_start[NodeId::new(self.num_hosts)])
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

    /// The port a host transmits on (hosts have one NIC port; a GPU's first port is its NIC port on
    /// plane 0, or its PCIe link to a shared NIC).
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

    /// Forwarding latency of switch `n` if it differs from `[switch].latency` (scale-up switches
    /// and shared NICs).
    pub fn switch_latency(&self, n: NodeId) -> Option<crate::units::Time> {
        self.cluster.as_ref()?.switch_latency(n)
    }

    /// Buffer of switch `n` if it differs from `[switch].buffer` (scale-up switches and shared
    /// NICs).
    pub fn switch_buffer(&self, n: NodeId) -> Option<crate::units::Bytes> {
        self.cluster.as_ref()?.switch_buffer(n)
    }
}

type LinkEntry = (NodeId, NodeId, LinkSpec, Tier);

/// Collects links, then lays ports out node by node (each node's ports contiguous, in link order).
/// Topology builders add switches, the links between them and the host *slots* (the switch a host
/// attaches to and the link spec, in host order); whoever drives the builder then attaches the
/// endpoints to the slots ([`FabricBuilder::attach`]): hosts one per slot, or a cluster's NICs.
/// Attachment links come first in every node's port list, then the switch links, in the order
/// they were added.
/// The builders number nodes arithmetically (`edge0 + pod * half + e`), so the builder takes node
/// numbers and makes them `NodeId`s: it is where the fabric's ids are assigned.
pub(crate) struct FabricBuilder {
    num_hosts: u32,
    roles: IdVec<NodeId, Role>,
    attached: Vec<LinkEntry>,
    links: Vec<LinkEntry>,
    slots: Vec<(u32, LinkSpec)>,
    /// OCS ports: (switch, link spec), in OCS port order; each is its own peer until wired.
    ocs_ports: Vec<(NodeId, LinkSpec)>,
}

impl FabricBuilder {
    /// `num_hosts` endpoints (node ids `0..num_hosts`) of role `role`.
    pub fn new(num_hosts: u32, role: Role) -> Self {
        Self {
            num_hosts,
            roles: IdVec::from_elem(role, num_hosts as usize),
            attached: Vec::new(),
            links: Vec::new(),
            slots: Vec::new(),
            ocs_ports: Vec::new(),
        }
    }

    /// An OCS port on switch `sw` (after every link in its port list): dark until a circuit
    /// joins it to another ([`ocs::wire`]).
    pub fn ocs_port(&mut self, sw: u32, spec: LinkSpec) {
        self.ocs_ports.push((NodeId::new(sw), spec));
    }

    /// The node numbers of the switches of role `role` added so far.
    pub fn nodes_of(&self, role: &str) -> Vec<u32> {
        ocs::members(&self.roles, role)
    }

    /// A host slot on switch `sw`: where the next host (or NIC) attaches, over a `spec` link.
    pub fn slot(&mut self, sw: u32, spec: LinkSpec) {
        self.slots.push((sw, spec));
    }

    /// The slots added since the last call, in order.
    pub fn take_slots(&mut self) -> Vec<(u32, LinkSpec)> {
        std::mem::take(&mut self.slots)
    }

    /// An attachment link (ahead of every switch link in its nodes' port lists).
    pub fn attach(&mut self, a: u32, b: u32, spec: LinkSpec, tier: Tier) {
        self.attached
            .push((NodeId::new(a), NodeId::new(b), spec, tier));
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
        let links: Vec<LinkEntry> = self.attached.into_iter().chain(self.links).collect();
        for &(a, b, _, _) in &links {
            degree[a] += 1;
            degree[b] += 1;
        }
        for &(a, _) in &self.ocs_ports {
            degree[a] += 1;
        }
        // One entry past the last node: the number of ports.
        let mut port_start: IdVec<NodeId, PortId> = IdVec::with_capacity(n + 1);
        let mut total = 0u32;
        for &d in &degree {
            port_start.push(PortId::new(total));
            total += d;
        }
        port_start.push(PortId::new(total));
        let mut next = port_start.clone();
        let mut f = Fabric::unwired(self.num_hosts, port_start, self.roles);
        for &(a, b, spec, tier) in &links {
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
        for &(a, spec) in &self.ocs_ports {
            let p = next[a];
            next[a] = PortId::new(p.get() + 1);
            f.port_node[p] = a;
            f.peer_node[p] = a;
            f.peer_port[p] = p;
            f.rate_bps[p] = spec.rate_bps;
            f.delay_ps[p] = spec.delay_ps;
            f.tier[p] = Tier::Ocs;
        }
        f
    }
}

/// Build the fabric of a topology without a cluster: one host per slot.
pub fn build(spec: &TopologySpec, _switch: &SwitchSpec) -> Fabric {
    build_with(spec, None)
}

/// Build the fabric a scenario describes: its topology, with its `[cluster]` if any.
pub fn build_with(spec: &TopologySpec, cluster: Option<&ClusterSpec>) -> Fabric {
    build_ocs(spec, cluster, None)
}

/// Build the fabric of a topology, with its `[cluster]` and the switch ports of its `[ocs]` (all
/// dark: [`ocs::attach`] wires the circuits).
pub fn build_ocs(
    spec: &TopologySpec,
    cluster: Option<&ClusterSpec>,
    ocs: Option<&ocs::OcsSpec>,
) -> Fabric {
    match (cluster, spec) {
        // A graph lays its ports out in its own order (the export's port ids); `[ocs]` refuses a
        // graph topology in its checks.
        (None, TopologySpec::Graph(g)) => graph_file::build(g),
        (None, _) => hosts_only(spec.num_hosts(), |b| lay_out(spec, b, ocs)),
        (Some(c), _) => cluster::build(spec, c, ocs),
    }
}

/// The fabric of a scenario (topology, cluster and OCS with its initial circuits).
pub fn build_scenario(s: &crate::config::Scenario) -> crate::config::check::Res<Fabric> {
    let mut f = build_ocs(&s.topology, s.cluster.as_ref(), s.ocs.as_ref());
    if let Some(o) = &s.ocs {
        ocs::attach(&mut f, &s.topology, o)?;
    }
    Ok(f)
}

/// Hosts `0..num_hosts`, host i on slot i.
fn hosts_only(num_hosts: u32, lay_out: impl FnOnce(&mut FabricBuilder)) -> Fabric {
    let mut b = FabricBuilder::new(num_hosts, Role::Host);
    lay_out(&mut b);
    for (h, (sw, spec)) in b.take_slots().into_iter().enumerate() {
        b.attach(h as u32, sw, spec, Tier::Host);
    }
    b.build()
}

/// Add one copy of the topology's switches, switch links and host slots to `b`, and the OCS
/// ports of `ocs` (its tier above the OCS switches left out if it replaces it).
fn lay_out(spec: &TopologySpec, b: &mut FabricBuilder, ocs: Option<&ocs::OcsSpec>) {
    lay_out_topology(spec, b, ocs.is_some_and(|o| o.replace));
    add_ocs_ports(b, ocs);
}

/// The OCS ports of `ocs` (if any) on every switch of its role, `uplinks` each.
fn add_ocs_ports(b: &mut FabricBuilder, ocs: Option<&ocs::OcsSpec>) {
    if let Some(o) = ocs {
        for sw in b.nodes_of(&o.role) {
            for _ in 0..o.uplinks {
                b.ocs_port(sw, o.link);
            }
        }
    }
}

/// Add one copy of the topology's switches, switch links and host slots to `b` (`replace`:
/// without the tier an OCS replaces).
fn lay_out_topology(spec: &TopologySpec, b: &mut FabricBuilder, replace: bool) {
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
        } => dragonfly::lay_out(b, p, a, h, g, arrangement, host, local, global),
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
        } => dragonfly::lay_out_plus(
            b,
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
        } => fat_tree::lay_out(b, k, host, fabric, (!replace).then_some(core)),
        TopologySpec::LeafSpine {
            leaves,
            spines,
            hosts_per_leaf,
            host,
            fabric,
        } => leaf_spine::lay_out(
            b,
            leaves,
            if replace { 0 } else { spines },
            hosts_per_leaf,
            host,
            fabric,
        ),
        TopologySpec::Clos {
            shape,
            host,
            fabric,
            core,
        } => clos::lay_out(b, shape, host, fabric, core),
        TopologySpec::Graph(ref g) => graph_file::lay_out(b, g),
    }
}
