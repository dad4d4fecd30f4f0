//! Shortest-path ECMP groups for every (switch, destination edge switch), found by one shortest-path
//! search per edge switch over the switch graph. Hosts never forward, so paths are up/down in Clos;
//! in dragonflies global links weigh more than a group's diameter, so paths are minimal (one global
//! hop).

use std::collections::HashMap;

use crate::topology::{Fabric, NodeId, PortId, Tier};

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
    /// Per host: the switch it attaches to.
    host_switch: Vec<NodeId>,
    /// Per host: the port of `host_switch` that leads to it.
    host_downlink: Vec<PortId>,
    /// Per host: index of its edge switch among edge switches.
    host_edge_index: Vec<u32>,
    num_edges: u32,
    /// `[(switch - num_hosts) * num_edges + edge_index]` -> group id.
    group_of: Vec<u32>,
    group_start: Vec<u32>,
    group_ports: Vec<PortId>,
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
        let mut host_switch = Vec::with_capacity(f.num_hosts as usize);
        let mut host_downlink = Vec::with_capacity(f.num_hosts as usize);
        let mut edge_index = vec![NONE; n];
        let mut edges = Vec::new();
        for h in 0..f.num_hosts {
            let p = f.host_port(h);
            let sw = f.peer_node[p as usize];
            host_switch.push(sw);
            host_downlink.push(f.peer_port[p as usize]);
            if edge_index[sw as usize] == NONE {
                edge_index[sw as usize] = edges.len() as u32;
                edges.push(sw);
            }
        }
        let host_edge_index = host_switch
            .iter()
            .map(|&s| edge_index[s as usize])
            .collect();
        let num_edges = edges.len() as u32;

        let mut group_of = vec![NONE; num_switches * edges.len()];
        let mut groups: HashMap<Vec<PortId>, u32> = HashMap::new();
        let mut group_start = vec![0u32];
        let mut group_ports = Vec::new();
        let mut dist = vec![u32::MAX; n];
        let mut heap = std::collections::BinaryHeap::new();
        let mut members = Vec::new();
        for (ei, &target) in edges.iter().enumerate() {
            // Dijkstra toward `target` over link costs (1 inside Clos tiers and dragonfly groups, so
            // Clos routes are the shortest hop counts; global links cost more than any detour
            // inside a group, so dragonfly routes take one global hop: minimal routing).
            dist.fill(u32::MAX);
            dist[target as usize] = 0;
            heap.clear();
            heap.push(std::cmp::Reverse((0u32, target)));
            while let Some(std::cmp::Reverse((d, u))) = heap.pop() {
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
                        heap.push(std::cmp::Reverse((nd, v)));
                    }
                }
            }
            for s in f.num_hosts..f.num_nodes {
                if s == target || dist[s as usize] == u32::MAX {
                    continue;
                }
                members.clear();
                for p in f.ports_of(s) {
                    let v = f.peer_node[p as usize];
                    if !is_down(p)
                        && !f.is_host(v)
                        && dist[v as usize] != u32::MAX
                        && dist[v as usize] + link_cost(f, p) == dist[s as usize]
                    {
                        members.push(p);
                    }
                }
                let id = *groups.entry(members.clone()).or_insert_with(|| {
                    group_ports.extend_from_slice(&members);
                    group_start.push(group_ports.len() as u32);
                    (group_start.len() - 2) as u32
                });
                group_of[(s - f.num_hosts) as usize * edges.len() + ei] = id;
            }
        }
        Self {
            num_hosts: f.num_hosts,
            host_switch,
            host_downlink,
            host_edge_index,
            num_edges,
            group_of,
            group_start,
            group_ports,
        }
    }

    /// Candidate egress ports of switch `node` toward host `dst` (one port when it is the last hop).
    #[inline(always)]
    pub fn group(&self, node: NodeId, dst: NodeId) -> &[PortId] {
        let d = dst as usize;
        if self.host_switch[d] == node {
            return std::slice::from_ref(&self.host_downlink[d]);
        }
        let g = self.group_of[(node - self.num_hosts) as usize * self.num_edges as usize
            + self.host_edge_index[d] as usize];
        if g == NONE {
            return &[]; // unreachable (a partition after link failures)
        }
        &self.group_ports
            [self.group_start[g as usize] as usize..self.group_start[g as usize + 1] as usize]
    }

    /// The group id of (`node`, `dst`) (groups are unique to a switch), or None on the last hop.
    #[inline]
    pub fn group_id(&self, node: NodeId, dst: NodeId) -> Option<u32> {
        let d = dst as usize;
        if self.host_switch[d] == node {
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
}
