//! Fabric statistics: how many hosts, switches and links, the capacity of each tier, bisection
//! bandwidth, oversubscription and diameter, computed from the built [`Fabric`] (so every topology
//! kind gets them, including explicit graphs).
//!
//! - **Bisection**: hosts are split in two halves by id (`0..n/2` and the rest; builders number hosts
//!   pod by pod, leaf by leaf or group by group, so this is the pod-, leaf- or group-aligned cut, the
//!   worst one for Clos and dragonfly fabrics). The bisection bandwidth is the maximum flow from the
//!   first half to the second over the directed links (each direction carries its rate); the
//!   demand is the smaller half's total host-link rate. `bisection_ratio = bisection / demand` is 1
//!   for a non-blocking fabric, and `oversubscription` is its inverse. With a `[cluster]` the hosts
//!   are GPUs and this is the scale-out bisection: scale-up links are left out, and a GPU's demand
//!   is its scale-out rate (its NIC ports, or its share of a shared NIC's).
//! - **Levels**: a node's level is its hop distance from the nearest host (hosts 0, edge or leaf 1,
//!   ...). A switch's downlinks lead to a lower level, its uplinks to a higher one; its
//!   oversubscription is downlink capacity over uplink capacity.
//! - **Diameter**: the longest shortest path between two hosts, in links (host to host, never
//!   through a third host).
//!
//! [`describe`] is the cheap part (sizes per role and tier, no max-flow, no search) joined with the
//! scenario's own topology settings: the one description of a fabric that `fabricemu validate`, the
//! scenario's reprs, `fabricemu topo`, run.json (`fabric`) and the report all show.

use std::collections::VecDeque;

use serde::Serialize;
use serde_json::{json, Map, Value};

use super::{Fabric, IdVec, NodeId, Tier};
use crate::units::{format_rate, format_time};

/// Statistics of one fabric (see the module documentation for the definitions).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FabricSummary {
    pub hosts: u32,
    pub switches: u32,
    /// Bidirectional links (cables), host links included.
    pub links: u32,
    /// One-direction links: two per cable, what links.arrow has a row for per interval (its
    /// `link` column, the egress port) and ports.arrow one row each.
    pub directed_links: u32,
    /// Switches per role, in the order of their ids.
    pub roles: Vec<RoleSummary>,
    /// Links per tier, in the order host, fabric, core, global (tiers without links are left out).
    pub tiers: Vec<TierSummary>,
    /// Maximum flow between the two host halves, bits per second (one direction).
    pub bisection_bps: u64,
    /// The smaller half's total host-link rate: what a full-bisection fabric would carry.
    pub bisection_demand_bps: u64,
    /// `bisection_bps / bisection_demand_bps` (1 when non-blocking; 0 with fewer than two hosts).
    pub bisection_ratio: f64,
    /// `bisection_demand_bps / bisection_bps` (1 when non-blocking; `None` if nothing can cross).
    pub oversubscription: Option<f64>,
    /// Longest shortest host-to-host path in links (`None` if some hosts cannot reach each other).
    pub diameter_links: Option<u32>,
    /// Switches on that path (`diameter_links - 1`).
    pub diameter_switches: Option<u32>,
    /// GPU servers, when the scenario has a `[cluster]` (left out otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterSummary>,
    /// The optical circuit switch, when the scenario has an `[ocs]` (left out otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ocs: Option<OcsSummary>,
}

/// An `[ocs]`: its switches, ports, initial circuits and scheduled reconfigurations.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OcsSummary {
    /// The role of the switches with uplinks into the OCS, and how many there are.
    pub role: &'static str,
    pub switches: u32,
    pub uplinks: u32,
    /// Ports of the OCS, and of those the ones a switch uplink is attached to.
    pub ports: u32,
    pub attached_ports: u32,
    /// Circuits of the initial configuration (each a bidirectional link).
    pub circuits: u32,
    /// Attached OCS ports in no initial circuit.
    pub dark_ports: u32,
    pub link_rate_bps: u64,
    pub link_delay_ps: u64,
    /// Scheduled reconfigurations (`[[ocs.reconfigure]]`) and the default time each takes.
    pub reconfigurations: u32,
    pub reconfiguration_time_ps: u64,
    /// How long routing takes to follow a change.
    pub detection_ps: u64,
}

/// The OCS of `fabric` (None without an `[ocs]`).
pub fn ocs_summary(f: &Fabric) -> Option<OcsSummary> {
    let o = f.ocs.as_deref()?;
    let circuits = super::ocs::OcsLayout::circuits(&o.initial).count() as u32;
    Some(OcsSummary {
        role: o.role.as_str(),
        switches: o.switches.len() as u32,
        uplinks: o.uplinks,
        ports: o.radix,
        attached_ports: o.attached(),
        circuits,
        dark_ports: o.attached() - 2 * circuits,
        link_rate_bps: o.link.rate_bps,
        link_delay_ps: o.link.delay_ps,
        reconfigurations: o.changes.len() as u32,
        reconfiguration_time_ps: o.reconfiguration_ps,
        detection_ps: o.detection_ps,
    })
}

/// Ports of `f` that are links (a dark OCS port is its own peer, and no link).
fn linked_ports(f: &Fabric) -> u32 {
    match &f.ocs {
        None => f.num_ports(),
        Some(_) => f.ports().filter(|&p| f.peer_port[p] != p).count() as u32,
    }
}

/// The GPU servers of a `[cluster]`: counts, and the bandwidth of each tier a GPU reaches.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClusterSummary {
    pub gpus: u32,
    pub servers: u32,
    pub gpus_per_server: u32,
    /// NICs in all (servers x nics_per_server); each has one port per plane.
    pub nics: u32,
    pub nics_per_server: u32,
    /// Whether GPUs share NICs (then a NIC is a switch of role `nic`).
    pub shared_nics: bool,
    /// Rails: NIC index within a server (nics_per_server of them).
    pub rails: u32,
    pub planes: u32,
    /// "rail" or "tor".
    pub cabling: &'static str,
    /// "pxn" or "spine".
    pub cross_rail: &'static str,
    pub scaleup_domains: u32,
    /// GPUs per scale-up domain (0 without one).
    pub gpus_per_domain: u32,
    pub racks: u32,
    pub servers_per_rack: u32,
    /// Per GPU, each direction: scale-up rate (0 without a domain) and scale-out rate (its NIC
    /// ports on all planes, capped by a shared NIC's PCIe link).
    pub scaleup_bps_per_gpu: u64,
    pub scaleout_bps_per_gpu: u64,
}

/// The switches of one role ("edge", "agg", "core", "leaf", "spine", ...).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoleSummary {
    pub role: String,
    pub switches: u32,
    /// Hop distance from the nearest host (the smallest among the role's switches).
    pub level: u32,
    /// Ports per switch, smallest and largest.
    pub ports_min: u32,
    pub ports_max: u32,
    /// Total rate of one switch's downlinks and uplinks (the largest among the role's switches).
    pub down_bps: u64,
    pub up_bps: u64,
    /// Largest downlink / uplink capacity ratio among the role's switches (`None` for a top tier).
    pub oversubscription: Option<f64>,
}

/// The links of one tier.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TierSummary {
    /// "host", "fabric", "core" or "global" (between dragonfly groups).
    pub tier: &'static str,
    pub links: u32,
    pub rate_min_bps: u64,
    pub rate_max_bps: u64,
    /// Sum of the link rates (one direction).
    pub capacity_bps: u64,
    pub delay_min_ps: u64,
    pub delay_max_ps: u64,
}

/// The size of a fabric as built: what [`describe`] adds to the scenario's topology settings.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FabricSize {
    pub hosts: u32,
    pub switches: u32,
    /// Bidirectional links (cables), host links included.
    pub links: u32,
    /// Switches per role, in the order of their ids.
    pub roles: Vec<RoleCount>,
    /// Links per tier, in the order host, fabric, core, global (tiers without links are left out).
    pub tiers: Vec<TierSummary>,
}

/// How many switches have one role.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoleCount {
    pub role: String,
    pub switches: u32,
}

/// Hosts, switches, links, switches per role and links per tier of `fabric`.
pub fn size(fabric: &Fabric) -> FabricSize {
    let mut roles: Vec<RoleCount> = Vec::new();
    for n in fabric.switches() {
        let role = fabric.role[n].as_str();
        match roles.iter_mut().find(|r| r.role == role) {
            Some(r) => r.switches += 1,
            None => roles.push(RoleCount {
                role: role.to_string(),
                switches: 1,
            }),
        }
    }
    FabricSize {
        hosts: fabric.num_hosts,
        switches: fabric.num_nodes - fabric.num_hosts,
        links: linked_ports(fabric) / 2,
        roles,
        tiers: tiers(fabric),
    }
}

/// The description of the fabric built from a scenario's (normalised) `topology` table: its
/// settings as written (`kind` and the shape parameters such as `k`, `leaves`, `p`, `a`, `h`, `g`;
/// link rate and delay keys are left out), then, measured on `fabric`: `hosts`, `switches`, `links`,
/// `roles` and `tiers` (see [`FabricSize`]), and per tier `<tier>_link = { rate, delay }`, the tier
/// named `host`, `fabric`, `core`, or for dragonflies `local` and `global` (rates or delays that
/// differ within a tier are written as a range, `"min-max"`).
pub fn describe(fabric: &Fabric, topology: &Value) -> Value {
    let mut out = Map::new();
    if let Value::Object(t) = topology {
        for (key, value) in t {
            // A graph's inline edge list is its content, not a setting.
            let link_setting = key.ends_with("_rate") || key.ends_with("_delay") || key == "edges";
            if !link_setting && !value.is_object() && !value.is_array() && !value.is_null() {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    let size = size(fabric);
    let dragonfly = size.tiers.iter().any(|t| t.tier == "global");
    for t in &size.tiers {
        let name = match t.tier {
            "fabric" if dragonfly => "local",
            other => other,
        };
        let range = |lo: String, hi: String| if lo == hi { lo } else { format!("{lo}-{hi}") };
        out.insert(
            format!("{name}_link"),
            json!({
                "rate": range(format_rate(t.rate_min_bps), format_rate(t.rate_max_bps)),
                "delay": range(format_time(t.delay_min_ps), format_time(t.delay_max_ps)),
            }),
        );
    }
    out.insert("hosts".into(), json!(size.hosts));
    out.insert("switches".into(), json!(size.switches));
    out.insert("links".into(), json!(size.links));
    out.insert("roles".into(), json!(size.roles));
    out.insert("tiers".into(), json!(size.tiers));
    if let Some(c) = cluster_summary(fabric) {
        out.insert("cluster".into(), json!(c));
    }
    if let Some(o) = ocs_summary(fabric) {
        out.insert("ocs".into(), json!(o));
    }
    Value::Object(out)
}

/// A GPU's scale-out rate, each direction: its NIC ports on all planes, or its share of a shared
/// NIC's ports (capped by its PCIe link).
fn scaleout_bps(f: &Fabric, c: &super::ClusterLayout, gpu: NodeId) -> u64 {
    let own: u64 = c.nic_ports(gpu).iter().map(|&p| f.rate_bps[p]).sum();
    match c.nic_node(c.server(gpu), c.rail(gpu)) {
        Some(nic) => {
            let share = (c.spec.gpus_per_server / c.spec.nics_per_server) as u64;
            let rails: u64 = f
                .ports_of(nic)
                .filter(|&p| f.tier[p] == Tier::Host)
                .map(|p| f.rate_bps[p])
                .sum();
            own.min(rails / share)
        }
        None => own,
    }
}

/// The GPU servers of `fabric` (None without a `[cluster]`).
pub fn cluster_summary(f: &Fabric) -> Option<ClusterSummary> {
    use crate::config::{Cabling, CrossRail};
    let c = f.cluster.as_deref()?;
    let per_gpu = |gpu: NodeId| -> (u64, u64) {
        let up = c.scaleup_port(gpu).map_or(0, |p| f.rate_bps[p]);
        (up, scaleout_bps(f, c, gpu))
    };
    let (up, out) = if c.gpus > 0 {
        per_gpu(NodeId::new(0))
    } else {
        (0, 0)
    };
    Some(ClusterSummary {
        gpus: c.gpus,
        servers: c.servers,
        gpus_per_server: c.spec.gpus_per_server,
        nics: c.servers * c.spec.nics_per_server,
        nics_per_server: c.spec.nics_per_server,
        shared_nics: c.first_nic.is_some(),
        rails: c.spec.nics_per_server,
        planes: c.spec.planes,
        cabling: match c.spec.cabling {
            Cabling::Rail => "rail",
            Cabling::Tor => "tor",
        },
        cross_rail: match c.spec.cross_rail {
            CrossRail::Pxn => "pxn",
            CrossRail::Spine => "spine",
        },
        scaleup_domains: c.domains,
        gpus_per_domain: c.gpus_per_domain,
        racks: c.racks(),
        servers_per_rack: c.spec.servers_per_rack,
        scaleup_bps_per_gpu: up,
        scaleout_bps_per_gpu: out,
    })
}

/// The name of a tier as reports and traces write it.
pub fn tier_name(tier: Tier) -> &'static str {
    match tier {
        Tier::Host => "host",
        Tier::Fabric => "fabric",
        Tier::Core => "core",
        Tier::Global => "global",
        Tier::ScaleUp => "scaleup",
        Tier::Pcie => "pcie",
        Tier::Ocs => "ocs",
    }
}

/// Statistics of `fabric`.
pub fn summarize(fabric: &Fabric) -> FabricSummary {
    let levels = levels(fabric);
    let roles = roles(fabric, &levels);
    let tiers = tiers(fabric);
    let (bisection_bps, bisection_demand_bps) = bisection(fabric);
    let bisection_ratio = if bisection_demand_bps == 0 {
        0.0
    } else {
        bisection_bps as f64 / bisection_demand_bps as f64
    };
    let oversubscription = if bisection_bps == 0 {
        None
    } else {
        Some(bisection_demand_bps as f64 / bisection_bps as f64)
    };
    let diameter_links = diameter(fabric);
    FabricSummary {
        hosts: fabric.num_hosts,
        switches: fabric.num_nodes - fabric.num_hosts,
        links: linked_ports(fabric) / 2,
        directed_links: linked_ports(fabric),
        roles,
        tiers,
        bisection_bps,
        bisection_demand_bps,
        bisection_ratio,
        oversubscription,
        diameter_links,
        diameter_switches: diameter_links.map(|d| d.saturating_sub(1)),
        cluster: cluster_summary(fabric),
        ocs: ocs_summary(fabric),
    }
}

/// Hop distance of every node from the nearest host (None if no host reaches it).
fn levels(f: &Fabric) -> IdVec<NodeId, Option<u32>> {
    let mut level = IdVec::from_elem(None, f.num_nodes as usize);
    let mut queue = VecDeque::new();
    for h in f.hosts() {
        level[h] = Some(0);
        queue.push_back((h, 0));
    }
    while let Some((n, at)) = queue.pop_front() {
        for p in f.ports_of(n) {
            let m = f.peer_node[p];
            if level[m].is_none() {
                level[m] = Some(at + 1);
                queue.push_back((m, at + 1));
            }
        }
    }
    level
}

fn roles(f: &Fabric, levels: &IdVec<NodeId, Option<u32>>) -> Vec<RoleSummary> {
    // Unreached nodes sort above every reached one, as the largest level would.
    let level = |n: NodeId| levels[n].unwrap_or(u32::MAX);
    let mut out: Vec<RoleSummary> = Vec::new();
    for n in f.switches() {
        let role = f.role[n].as_str();
        let (mut down, mut up) = (0u64, 0u64);
        for p in f.ports_of(n) {
            let peer = level(f.peer_node[p]);
            let rate = f.rate_bps[p];
            if peer < level(n) {
                down = down.saturating_add(rate);
            } else if peer > level(n) {
                up = up.saturating_add(rate);
            }
        }
        let ports = f.ports_of(n).len() as u32;
        let ratio = (up > 0 && down > 0).then(|| down as f64 / up as f64);
        match out.iter_mut().find(|r| r.role == role) {
            Some(r) => {
                r.switches += 1;
                r.level = r.level.min(level(n));
                r.ports_min = r.ports_min.min(ports);
                r.ports_max = r.ports_max.max(ports);
                r.down_bps = r.down_bps.max(down);
                r.up_bps = r.up_bps.max(up);
                r.oversubscription = match (r.oversubscription, ratio) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    (a, b) => a.or(b),
                };
            }
            None => out.push(RoleSummary {
                role: role.to_string(),
                switches: 1,
                level: level(n),
                ports_min: ports,
                ports_max: ports,
                down_bps: down,
                up_bps: up,
                oversubscription: ratio,
            }),
        }
    }
    out
}

fn tiers(f: &Fabric) -> Vec<TierSummary> {
    let mut out = Vec::new();
    for tier in [
        Tier::Host,
        Tier::Fabric,
        Tier::Core,
        Tier::Global,
        Tier::ScaleUp,
        Tier::Pcie,
        Tier::Ocs,
    ] {
        let mut t = TierSummary {
            tier: tier_name(tier),
            links: 0,
            rate_min_bps: u64::MAX,
            rate_max_bps: 0,
            capacity_bps: 0,
            delay_min_ps: u64::MAX,
            delay_max_ps: 0,
        };
        // Each cable is two ports; count it once, from its lower-numbered port.
        for i in f.ports() {
            // A dark OCS port (its own peer) is no link.
            if f.tier[i] != tier || f.peer_port[i] <= i {
                continue;
            }
            t.links += 1;
            t.rate_min_bps = t.rate_min_bps.min(f.rate_bps[i]);
            t.rate_max_bps = t.rate_max_bps.max(f.rate_bps[i]);
            t.capacity_bps = t.capacity_bps.saturating_add(f.rate_bps[i]);
            t.delay_min_ps = t.delay_min_ps.min(f.delay_ps[i]);
            t.delay_max_ps = t.delay_max_ps.max(f.delay_ps[i]);
        }
        if t.links > 0 {
            out.push(t);
        }
    }
    out
}

/// Longest shortest path between two hosts, in links (hosts attach to switches; paths never pass
/// through a third host).
fn diameter(f: &Fabric) -> Option<u32> {
    let hosts = f.num_hosts;
    if hosts < 2 {
        return Some(0);
    }
    // A host is seen from the fabric as the set of switches it attaches to; hosts with the same set
    // are the same distance from everything. BFS once per distinct set.
    let attachment = |h: NodeId| -> Vec<NodeId> {
        let mut v: Vec<NodeId> = f.ports_of(h).map(|p| f.peer_node[p]).collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    let mut sets: Vec<Vec<NodeId>> = f.hosts().map(attachment).collect();
    let mut shared_set = false;
    sets.sort_unstable();
    let before = sets.len();
    sets.dedup();
    if sets.len() < before {
        // Two hosts on the same switch(es): 2 links apart.
        shared_set = true;
    }
    let mut dist: IdVec<NodeId, Option<u32>> = IdVec::from_elem(None, f.num_nodes as usize);
    let mut queue = VecDeque::new();
    let mut longest = if shared_set { 2 } else { 0 };
    for (i, from) in sets.iter().enumerate() {
        dist.fill(None);
        queue.clear();
        for &sw in from {
            dist[sw] = Some(1);
            queue.push_back((sw, 1));
        }
        while let Some((n, d)) = queue.pop_front() {
            if f.is_host(n) {
                continue;
            }
            for p in f.ports_of(n) {
                let m = f.peer_node[p];
                if dist[m].is_none() {
                    dist[m] = Some(d + 1);
                    queue.push_back((m, d + 1));
                }
            }
        }
        for to in &sets[i + 1..] {
            // Every host attaches to some switch; a set none of whose switches was reached is
            // cut off.
            let d = to.iter().filter_map(|&sw| dist[sw]).min()?;
            longest = longest.max(d + 1);
        }
    }
    Some(longest)
}

/// (max flow from hosts `0..n/2` to the others, the smaller half's total host-link rate).
fn bisection(f: &Fabric) -> (u64, u64) {
    let hosts = f.num_hosts;
    if hosts < 2 {
        return (0, 0);
    }
    let half = hosts / 2;
    // GPU clusters: the scale-out bisection, each GPU demanding its scale-out rate; scale-up links
    // (inside servers and racks) are left out.
    let host_rate = |h: NodeId| -> u64 {
        match f.cluster.as_deref() {
            Some(c) => scaleout_bps(f, c, h),
            None => f
                .ports_of(h)
                .map(|p| f.rate_bps[p])
                .fold(0u64, u64::saturating_add),
        }
    };
    let a: u64 = f
        .hosts()
        .take(half as usize)
        .map(host_rate)
        .fold(0, u64::saturating_add);
    let b: u64 = f
        .hosts()
        .skip(half as usize)
        .map(host_rate)
        .fold(0, u64::saturating_add);
    let demand = a.min(b);

    let n = f.num_nodes as usize;
    let (source, sink) = (n, n + 1);
    let mut g = FlowNetwork::new(n + 2);
    let unlimited = u64::MAX / 4;
    // The flow network numbers its vertices: node ids become plain indices here.
    for h in f.hosts() {
        if h.get() < half {
            g.add_edge(source, h.index(), unlimited);
        } else {
            g.add_edge(h.index(), sink, unlimited);
        }
    }
    for p in f.ports() {
        if f.tier[p] == Tier::ScaleUp {
            continue;
        }
        g.add_edge(
            f.port_node[p].index(),
            f.peer_node[p].index(),
            f.rate_bps[p],
        );
    }
    (g.max_flow(source, sink).min(demand), demand)
}

/// The maximum flow from `sources` to `sinks` (hosts or any nodes, each unlimited) over the
/// fabric's links, leaving out the links `down(port)` says are down: the throughput bound of a
/// degraded fabric between two groups of endpoints (the bisection above with faults).
pub fn max_flow_between(
    f: &Fabric,
    sources: &[NodeId],
    sinks: &[NodeId],
    down: impl Fn(super::PortId) -> bool,
) -> u64 {
    let n = f.num_nodes as usize;
    let (source, sink) = (n, n + 1);
    let mut g = FlowNetwork::new(n + 2);
    let unlimited = u64::MAX / 4;
    for s in sources {
        g.add_edge(source, s.index(), unlimited);
    }
    for t in sinks {
        g.add_edge(t.index(), sink, unlimited);
    }
    for p in f.ports() {
        if !down(p) {
            g.add_edge(
                f.port_node[p].index(),
                f.peer_node[p].index(),
                f.rate_bps[p],
            );
        }
    }
    g.max_flow(source, sink)
}

/// Dinic's maximum flow on a directed graph with `u64` capacities.
struct FlowNetwork {
    head: Vec<Vec<usize>>,
    to: Vec<usize>,
    cap: Vec<u64>,
}

impl FlowNetwork {
    fn new(nodes: usize) -> Self {
        Self {
            head: vec![Vec::new(); nodes],
            to: Vec::new(),
            cap: Vec::new(),
        }
    }

    /// An edge and its residual twin (edge `e`'s twin is `e ^ 1`).
    fn add_edge(&mut self, from: usize, to: usize, cap: u64) {
        self.head[from].push(self.to.len());
        self.to.push(to);
        self.cap.push(cap);
        self.head[to].push(self.to.len());
        self.to.push(from);
        self.cap.push(0);
    }

    fn max_flow(&mut self, s: usize, t: usize) -> u64 {
        let nodes = self.head.len();
        let mut total = 0u64;
        let mut level = vec![u32::MAX; nodes];
        let mut next = vec![0usize; nodes];
        loop {
            level.fill(u32::MAX);
            level[s] = 0;
            let mut queue = VecDeque::from([s]);
            while let Some(v) = queue.pop_front() {
                for &e in &self.head[v] {
                    let w = self.to[e];
                    if self.cap[e] > 0 && level[w] == u32::MAX {
                        level[w] = level[v] + 1;
                        queue.push_back(w);
                    }
                }
            }
            if level[t] == u32::MAX {
                return total;
            }
            next.fill(0);
            loop {
                let pushed = self.augment(s, t, u64::MAX, &level, &mut next);
                if pushed == 0 {
                    break;
                }
                total = total.saturating_add(pushed);
            }
        }
    }

    /// One blocking-flow augmentation along level-increasing edges (iterative depth-first search).
    fn augment(
        &mut self,
        s: usize,
        t: usize,
        limit: u64,
        level: &[u32],
        next: &mut [usize],
    ) -> u64 {
        // The path as a stack of edges.
        let mut path: Vec<usize> = Vec::new();
        let mut v = s;
        loop {
            if v == t {
                let pushed = path.iter().map(|&e| self.cap[e]).fold(limit, u64::min);
                for &e in &path {
                    self.cap[e] -= pushed;
                    self.cap[e ^ 1] += pushed;
                }
                return pushed;
            }
            let mut advanced = false;
            while next[v] < self.head[v].len() {
                let e = self.head[v][next[v]];
                let w = self.to[e];
                if self.cap[e] > 0 && level[w] == level[v] + 1 {
                    path.push(e);
                    v = w;
                    advanced = true;
                    break;
                }
                next[v] += 1;
            }
            if !advanced {
                // Dead end: retreat one edge and skip it from now on.
                match path.pop() {
                    Some(e) => {
                        v = self.to[e ^ 1];
                        next[v] += 1;
                    }
                    None => return 0,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LinkSpec;
    use crate::topology::{fat_tree, leaf_spine};

    const G100: u64 = 100_000_000_000;

    fn link(rate_bps: u64) -> LinkSpec {
        LinkSpec {
            rate_bps,
            delay_ps: 500_000,
        }
    }

    #[test]
    fn fat_tree_is_non_blocking() {
        for k in [2u32, 4, 8] {
            let s = summarize(&fat_tree::build(k, link(G100), link(G100), link(G100)));
            assert_eq!(s.hosts, k * k * k / 4);
            assert_eq!(s.switches, 5 * k * k / 4);
            assert_eq!(s.links, 3 * k * k * k / 4);
            assert_eq!(s.bisection_demand_bps, u64::from(s.hosts / 2) * G100);
            assert_eq!(s.bisection_bps, s.bisection_demand_bps, "k={k}");
            assert_eq!(s.oversubscription, Some(1.0));
            assert_eq!(s.diameter_links, Some(6));
            let roles: Vec<&str> = s.roles.iter().map(|r| r.role.as_str()).collect();
            assert_eq!(roles, ["edge", "agg", "core"]);
            assert_eq!(s.roles[0].oversubscription, Some(1.0));
            assert_eq!(s.roles[2].oversubscription, None);
            assert_eq!(s.roles[2].level, 3);
            let tiers: Vec<(&str, u32)> = s.tiers.iter().map(|t| (t.tier, t.links)).collect();
            assert_eq!(
                tiers,
                [
                    ("host", k * k * k / 4),
                    ("fabric", k * k * k / 4),
                    ("core", k * k * k / 4)
                ]
            );
        }
    }

    #[test]
    fn slow_core_halves_the_bisection() {
        let s = summarize(&fat_tree::build(4, link(G100), link(G100), link(G100 / 2)));
        // Pods 0-1 reach pods 2-3 only through their 8 core uplinks at 50 Gbps.
        assert_eq!(s.bisection_bps, 8 * G100 / 2);
        assert_eq!(s.bisection_demand_bps, 8 * G100);
        assert_eq!(s.oversubscription, Some(2.0));
        assert_eq!(s.roles[1].oversubscription, Some(2.0));
        assert_eq!(s.roles[0].oversubscription, Some(1.0));
    }

    #[test]
    fn leaf_spine_oversubscription_and_diameter() {
        // 4 hosts of 100G per leaf, 2 spines of 100G: 2:1.
        let s = summarize(&leaf_spine::build(4, 2, 4, link(G100), link(G100)));
        assert_eq!((s.hosts, s.switches, s.links), (16, 6, 16 + 8));
        assert_eq!(s.bisection_bps, 4 * G100);
        assert_eq!(s.bisection_demand_bps, 8 * G100);
        assert_eq!(s.bisection_ratio, 0.5);
        assert_eq!(s.oversubscription, Some(2.0));
        assert_eq!(s.roles[0].role, "leaf");
        assert_eq!(s.roles[0].oversubscription, Some(2.0));
        assert_eq!(s.roles[0].down_bps, 4 * G100);
        assert_eq!(s.roles[0].up_bps, 2 * G100);
        assert_eq!(s.diameter_links, Some(4));
        assert_eq!(s.diameter_switches, Some(3));
        // One leaf: hosts meet at their leaf.
        let one = summarize(&leaf_spine::build(1, 2, 4, link(G100), link(G100)));
        assert_eq!(one.diameter_links, Some(2));
        assert_eq!(one.bisection_bps, 2 * G100);
    }
}

#[cfg(test)]
mod description_tests {
    use super::*;
    use crate::scenario;
    use crate::topology;

    /// The fabric of a scenario given as TOML, and the normalised `topology` table.
    fn built(toml_text: &str) -> (Fabric, Value) {
        let (file, spec) = scenario::parse_toml(toml_text, "test.toml").expect("a valid scenario");
        let json: Value = serde_json::from_str(&scenario::to_json(&file)).unwrap();
        (
            topology::build_scenario(&spec).expect("a fabric"),
            json["topology"].clone(),
        )
    }

    const WORKLOAD: &str = "[[workload]]\nkind = \"permutation\"\nsize = \"1MB\"\n";

    #[test]
    fn dragonfly_1k_counts_its_global_links() {
        // scenarios/dragonfly_ugal_1k.toml: 33 groups, each pair joined by one global link.
        let (f, t) = built(&format!(
            "[topology]\nkind = \"dragonfly\"\np = 4\na = 8\nh = 4\ng = 33\n{WORKLOAD}"
        ));
        let s = summarize(&f);
        let tiers: Vec<(&str, u32)> = s.tiers.iter().map(|t| (t.tier, t.links)).collect();
        assert_eq!(
            tiers,
            [("host", 1056), ("fabric", 33 * 8 * 7 / 2), ("global", 528)]
        );
        assert_eq!(s.links, 1056 + 924 + 528);
        let d = describe(&f, &t);
        assert_eq!(d["kind"], "dragonfly");
        assert_eq!((d["p"].clone(), d["g"].clone()), (json!(4), json!(33)));
        assert_eq!(d["hosts"], 1056);
        assert_eq!(d["switches"], 264);
        assert_eq!(d["links"], 2508);
        assert_eq!(d["global_link"]["rate"], d["local_link"]["rate"]);
        assert!(d.get("fabric_link").is_none());
        assert_eq!(d["roles"], json!([{"role": "router", "switches": 264}]));
        assert!(
            d.get("link_rate").is_none(),
            "link settings are described per tier"
        );
    }

    #[test]
    fn every_kind_is_described_from_its_fabric() {
        for (topo, hosts, switches, links) in [
            ("kind = \"fat_tree\"\nk = 4", 16, 20, 48),
            (
                "kind = \"leaf_spine\"\nleaves = 4\nspines = 2\nhosts_per_leaf = 4",
                16,
                6,
                24,
            ),
            ("kind = \"dragonfly\"\np = 2\na = 4\nh = 2\ng = 9", 72, 36, 72 + 54 + 36),
            (
                "kind = \"dragonfly_plus\"\nleaves = 2\nspines = 2\nhosts_per_leaf = 2\nh = 2\ng = 5",
                20,
                20,
                20 + 20 + 10,
            ),
        ] {
            let (f, t) = built(&format!("[topology]\n{topo}\n{WORKLOAD}"));
            let d = describe(&f, &t);
            assert_eq!(
                (d["hosts"].clone(), d["switches"].clone(), d["links"].clone()),
                (json!(hosts), json!(switches), json!(links)),
                "{topo}"
            );
            let by_tier: u64 = d["tiers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["links"].as_u64().unwrap())
                .sum();
            assert_eq!(by_tier, links as u64, "{topo}: every link is in a tier");
            assert_eq!(d["host_link"]["rate"], "100Gbps", "{topo}");
        }
    }
}
