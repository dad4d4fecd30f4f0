//! Shortest-path ECMP groups for every (switch, destination edge switch), found by one shortest-path
//! search per edge switch over the switch graph. Hosts never forward, so paths are up/down in Clos;
//! in dragonflies global links weigh more than a group's diameter, so paths are minimal (one global
//! hop).

use std::collections::HashMap;

use crate::topology::{Fabric, NodeId, PortId, Role, Tier};

const NONE: u32 = u32::MAX;

/// Routing cost of the link leaving port `p`: 1, but a dragonfly's global links cost more than any
/// path inside a group, so minimal routes cross exactly one.
fn link_cost(f: &Fabric, p: PortId) -> u32 {
    if f.tier[p as usize] == Tier::Global {
        1 << 16
    } else {
        1
    }
}

/// Routes as flat arrays: groups are deduplicated port lists.
#[derive(Debug, Clone)]
pub struct RouteTable {
    num_hosts: u32,
    /// Components of the switch graph (a GPU cluster's planes; 1 for every host-only fabric), and
    /// each node's (hosts and scale-up switches: `NONE`; they are not routed by the table).
    num_comps: u32,
    node_comp: Vec<u32>,
    /// Per (host, component), at `host * num_comps + component`: the switch of that component
    /// the host attaches to (`NONE`: none), the port of that switch leading to the host, and the
    /// index of that switch among edge switches. With one component, simply per host.
    host_switch: Vec<NodeId>,
    host_downlink: Vec<PortId>,
    host_edge_index: Vec<u32>,
    num_edges: u32,
    /// `[(switch - num_hosts) * num_edges + edge_index]` -> group id.
    group_of: Vec<u32>,
    group_start: Vec<u32>,
    group_ports: Vec<PortId>,
    /// Dragonflies: the group of every node (hosts: their router's), else empty.
    node_group: Vec<u32>,
    num_df_groups: u32,
    /// `[(switch - num_hosts) * num_df_groups + group]` -> ports toward the group (group id).
    to_group: Vec<u32>,
}

/// Shortest-path search state, reused across targets; port groups are deduplicated.
struct Search {
    dist: Vec<u32>,
    heap: std::collections::BinaryHeap<std::cmp::Reverse<(u32, NodeId)>>,
    members: Vec<PortId>,
    dedup: HashMap<Vec<PortId>, u32>,
    group_start: Vec<u32>,
    group_ports: Vec<PortId>,
}

impl Search {
    /// Dijkstra toward the switches `targets` over link costs (1 inside Clos tiers and dragonfly
    /// groups, so Clos routes are the shortest hop counts; global links cost more than any detour
    /// inside a group, so dragonfly routes take one global hop: minimal routing). Calls
    /// `found(switch, group id)` for every other switch that reaches a target.
    fn toward(
        &mut self,
        f: &Fabric,
        is_down: &impl Fn(PortId) -> bool,
        targets: &[NodeId],
        mut found: impl FnMut(NodeId, u32),
    ) {
        let dist = &mut self.dist;
        dist.fill(u32::MAX);
        self.heap.clear();
        for &t in targets {
            dist[t as usize] = 0;
            self.heap.push(std::cmp::Reverse((0u32, t)));
        }
        while let Some(std::cmp::Reverse((d, u))) = self.heap.pop() {
            if d > dist[u as usize] {
                continue;
            }
            for p in f.ports_of(u) {
                let v = f.peer_node[p as usize];
                // v would forward to u over the reverse port.
                let back = f.peer_port[p as usize];
                if is_down(back) || f.is_host(v) {
                    continue;
                }
                let nd = d + link_cost(f, back);
                if nd < dist[v as usize] {
                    dist[v as usize] = nd;
                    self.heap.push(std::cmp::Reverse((nd, v)));
                }
            }
        }
        for s in f.num_hosts..f.num_nodes {
            if dist[s as usize] == 0 || dist[s as usize] == u32::MAX {
                continue;
            }
            self.members.clear();
            for p in f.ports_of(s) {
                let v = f.peer_node[p as usize];
                if !is_down(p)
                    && !f.is_host(v)
                    && dist[v as usize] != u32::MAX
                    && dist[v as usize] + link_cost(f, p) == dist[s as usize]
                {
                    self.members.push(p);
                }
            }
            let (starts, ports) = (&mut self.group_start, &mut self.group_ports);
            let id = *self.dedup.entry(self.members.clone()).or_insert_with(|| {
                ports.extend_from_slice(&self.members);
                starts.push(ports.len() as u32);
                (starts.len() - 2) as u32
            });
            found(s, id);
        }
    }
}

/// Dragonfly groups (components of the switch graph without global links), numbered in order of
/// their lowest switch, with hosts in their switch's group; `(vec![], 0)` without global links.
fn dragonfly_groups(f: &Fabric) -> (Vec<u32>, u32) {
    if !f.tier.contains(&Tier::Global) {
        return (Vec::new(), 0);
    }
    let mut group = vec![NONE; f.num_nodes as usize];
    let mut count = 0;
    let mut stack = Vec::new();
    for s in f.num_hosts..f.num_nodes {
        // A scale-up switch joins only GPUs: it is in no dragonfly group.
        if group[s as usize] != NONE || f.role[s as usize] == Role::NvSwitch {
            continue;
        }
        group[s as usize] = count;
        stack.push(s);
        while let Some(u) = stack.pop() {
            for p in f.ports_of(u) {
                let v = f.peer_node[p as usize];
                if f.tier[p as usize] != Tier::Global && !f.is_host(v) && group[v as usize] == NONE
                {
                    group[v as usize] = count;
                    stack.push(v);
                }
            }
        }
        count += 1;
    }
    for h in 0..f.num_hosts {
        group[h as usize] = group[f.peer_node[f.host_port(h) as usize] as usize];
    }
    (group, count)
}

/// Connected components of the switch graph (links between switches; hosts do not forward),
/// numbered in order of their lowest switch. Scale-up switches are in none (`NONE`): they join
/// only GPUs and forward by the cluster layout. Every host-only fabric is one component; a GPU
/// cluster has one per plane (its shared NICs, if any, join the planes into one).
fn components(f: &Fabric) -> (Vec<u32>, u32) {
    let mut comp = vec![NONE; f.num_nodes as usize];
    let mut count = 0;
    let mut stack = Vec::new();
    for s in f.num_hosts..f.num_nodes {
        if comp[s as usize] != NONE || f.role[s as usize] == Role::NvSwitch {
            continue;
        }
        comp[s as usize] = count;
        stack.push(s);
        while let Some(u) = stack.pop() {
            for p in f.ports_of(u) {
                let v = f.peer_node[p as usize];
                if !f.is_host(v) && comp[v as usize] == NONE {
                    comp[v as usize] = count;
                    stack.push(v);
                }
            }
        }
        count += 1;
    }
    (comp, count.max(1))
}

impl RouteTable {
    pub fn build(f: &Fabric) -> Self {
        Self::build_avoiding(f, &[])
    }

    /// Routes over the fabric without the links whose egress port is marked in `down` (empty: all
    /// links up). A destination no path reaches gets an empty group.
    pub fn build_avoiding(f: &Fabric, down: &[bool]) -> Self {
        let is_down = |p: u32| down.get(p as usize).copied().unwrap_or(false);
        let n = f.num_nodes as usize;
        let num_switches = n - f.num_hosts as usize;
        // Every attachment of every host (a GPU: one per plane, or its shared NIC; its scale-up
        // port is left out, the scale-up switch forwards by the cluster layout), per component.
        let (node_comp, num_comps) = components(f);
        let c = num_comps as usize;
        let mut host_switch = vec![NONE; f.num_hosts as usize * c];
        let mut host_downlink = vec![NONE; f.num_hosts as usize * c];
        let mut edge_index = vec![NONE; n];
        let mut edges = Vec::new();
        for h in 0..f.num_hosts {
            for p in f.ports_of(h) {
                let sw = f.peer_node[p as usize];
                let comp = node_comp[sw as usize];
                let a = h as usize * c + comp as usize;
                if comp == NONE || host_switch[a] != NONE {
                    continue;
                }
                host_switch[a] = sw;
                host_downlink[a] = f.peer_port[p as usize];
                if edge_index[sw as usize] == NONE {
                    edge_index[sw as usize] = edges.len() as u32;
                    edges.push(sw);
                }
            }
        }
        let host_edge_index = host_switch
            .iter()
            .map(|&s| {
                if s == NONE {
                    NONE
                } else {
                    edge_index[s as usize]
                }
            })
            .collect();
        let num_edges = edges.len() as u32;

        let mut search = Search {
            dist: vec![u32::MAX; n],
            heap: std::collections::BinaryHeap::new(),
            members: Vec::new(),
            dedup: HashMap::new(),
            group_start: vec![0u32],
            group_ports: Vec::new(),
        };
        let mut group_of = vec![NONE; num_switches * edges.len()];
        for (ei, &target) in edges.iter().enumerate() {
            search.toward(f, &is_down, &[target], |s, id| {
                group_of[(s - f.num_hosts) as usize * edges.len() + ei] = id;
            });
        }

        // Dragonfly groups: the switches connected without global links. Routes toward each
        // group (to any of its switches) serve non-minimal routing via an intermediate group.
        let (node_group, num_df_groups) = dragonfly_groups(f);
        let mut to_group = vec![NONE; num_switches * num_df_groups as usize];
        let mut targets = Vec::new();
        for g in 0..num_df_groups {
            targets.clear();
            targets.extend((f.num_hosts..f.num_nodes).filter(|&s| node_group[s as usize] == g));
            search.toward(f, &is_down, &targets, |s, id| {
                to_group[(s - f.num_hosts) as usize * num_df_groups as usize + g as usize] = id;
            });
        }
        Self {
            num_hosts: f.num_hosts,
            num_comps,
            node_comp,
            host_switch,
            host_downlink,
            host_edge_index,
            num_edges,
            group_of,
            group_start: search.group_start,
            group_ports: search.group_ports,
            node_group,
            num_df_groups,
            to_group,
        }
    }

    /// Where `dst` attaches in `node`'s component (hosts with several attachments: GPUs).
    #[inline(always)]
    fn attachment(&self, node: NodeId, dst: NodeId) -> usize {
        if self.num_comps == 1 {
            dst as usize
        } else {
            dst as usize * self.num_comps as usize + self.node_comp[node as usize] as usize
        }
    }

    /// Candidate egress ports of switch `node` toward host `dst` (one port when it is the last hop).
    #[inline(always)]
    pub fn group(&self, node: NodeId, dst: NodeId) -> &[PortId] {
        let d = self.attachment(node, dst);
        if self.host_switch[d] == node {
            return std::slice::from_ref(&self.host_downlink[d]);
        }
        let edge = self.host_edge_index[d];
        if edge == NONE {
            return &[]; // dst does not attach to this component
        }
        let g = self.group_of
            [(node - self.num_hosts) as usize * self.num_edges as usize + edge as usize];
        if g == NONE {
            return &[]; // unreachable (a partition after link failures)
        }
        &self.group_ports
            [self.group_start[g as usize] as usize..self.group_start[g as usize + 1] as usize]
    }

    /// The group id of (`node`, `dst`) (groups are unique to a switch), or None on the last hop.
    #[inline]
    pub fn group_id(&self, node: NodeId, dst: NodeId) -> Option<u32> {
        let d = self.attachment(node, dst);
        if self.host_switch[d] == node || self.host_edge_index[d] == NONE {
            return None;
        }
        Some(
            self.group_of[(node - self.num_hosts) as usize * self.num_edges as usize
                + self.host_edge_index[d] as usize],
        )
    }

    pub fn num_groups(&self) -> usize {
        self.group_start.len() - 1
    }

    /// Dragonfly groups (0 on other fabrics).
    #[inline]
    pub fn num_df_groups(&self) -> u32 {
        self.num_df_groups
    }

    /// The dragonfly group of a node (a host's is its router's).
    #[inline(always)]
    pub fn df_group(&self, node: NodeId) -> u32 {
        self.node_group[node as usize]
    }

    /// Candidate egress ports of switch `node` toward any switch of dragonfly group `g` (empty
    /// when `node` is in `g`, or no live path reaches it).
    #[inline]
    pub fn toward_group(&self, node: NodeId, g: u32) -> &[PortId] {
        let id = self.to_group
            [(node - self.num_hosts) as usize * self.num_df_groups as usize + g as usize];
        if id == NONE {
            return &[];
        }
        &self.group_ports
            [self.group_start[id as usize] as usize..self.group_start[id as usize + 1] as usize]
    }
}
