//! Shortest-path ECMP groups for every (switch, destination edge switch), found by one shortest-path
//! search per edge switch over the switch graph. Hosts never forward, so paths are up/down in Clos;
//! in dragonflies global links weigh more than a group's diameter, so paths are minimal (one global
//! hop).

use std::collections::HashMap;
use std::num::NonZeroU32;

use crate::topology::{Fabric, IdVec, NodeId, PortId, Role, Tier};

/// A port group in the flat tables, stored as its id + 1 so that "no group" (a destination no path
/// reaches) is `None` in 4 bytes: the per-(switch, destination) table is read for every packet, and
/// an `Option<u32>` would double it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct GroupRef(NonZeroU32);

impl GroupRef {
    #[inline(always)]
    fn new(id: u32) -> Self {
        GroupRef(NonZeroU32::new(id + 1).expect("group ids are below u32::MAX"))
    }

    #[inline(always)]
    fn id(self) -> u32 {
        self.0.get() - 1
    }
}

/// Routing cost of the link leaving port `p`: 1, but a dragonfly's global links cost more than any
/// path inside a group, so minimal routes cross exactly one.
fn link_cost(f: &Fabric, p: PortId) -> u32 {
    if f.tier[p] == Tier::Global {
        1 << 16
    } else {
        1
    }
}

/// Where a host attaches to one component of the switch graph.
#[derive(Debug, Clone, Copy)]
struct Attachment {
    /// The switch it attaches to.
    switch: NodeId,
    /// The port of `switch` leading to the host.
    downlink: PortId,
    /// `switch`'s index among edge switches.
    edge: u32,
}

/// Routes as flat arrays: groups are deduplicated port lists.
#[derive(Debug, Clone)]
pub struct RouteTable {
    num_hosts: u32,
    /// Components of the switch graph (a GPU cluster's planes; 1 for every host-only fabric), and
    /// each node's (hosts and scale-up switches: None; they are not routed by the table).
    num_comps: u32,
    node_comp: IdVec<NodeId, Option<u32>>,
    /// Per (host, component), at `host * num_comps + component`: where the host attaches to that
    /// component (None: it does not). With one component, simply per host.
    attachments: Vec<Option<Attachment>>,
    num_edges: u32,
    /// `[(switch - num_hosts) * num_edges + edge_index]` -> group (None: unreachable).
    group_of: Vec<Option<GroupRef>>,
    group_start: Vec<u32>,
    group_ports: Vec<PortId>,
    /// Dragonflies: the group of every node (hosts: their router's; scale-up switches: None),
    /// else empty.
    node_group: IdVec<NodeId, Option<u32>>,
    num_df_groups: u32,
    /// `[(switch - num_hosts) * num_df_groups + group]` -> ports toward the group (None: no
    /// live path).
    to_group: Vec<Option<GroupRef>>,
}

/// Shortest-path search state, reused across targets; port groups are deduplicated.
struct Search {
    /// Cost to the nearest target (None: not reached).
    dist: IdVec<NodeId, Option<u32>>,
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
    /// `found(switch, group)` for every other switch that reaches a target.
    fn toward(
        &mut self,
        f: &Fabric,
        is_down: &impl Fn(PortId) -> bool,
        targets: &[NodeId],
        mut found: impl FnMut(NodeId, GroupRef),
    ) {
        let dist = &mut self.dist;
        dist.fill(None);
        self.heap.clear();
        for &t in targets {
            dist[t] = Some(0);
            self.heap.push(std::cmp::Reverse((0u32, t)));
        }
        while let Some(std::cmp::Reverse((d, u))) = self.heap.pop() {
            if dist[u].is_some_and(|best| d > best) {
                continue;
            }
            for p in f.ports_of(u) {
                let v = f.peer_node[p];
                // v would forward to u over the reverse port.
                let back = f.peer_port[p];
                if is_down(back) || f.is_host(v) {
                    continue;
                }
                let nd = d + link_cost(f, back);
                if dist[v].is_none_or(|best| nd < best) {
                    dist[v] = Some(nd);
                    self.heap.push(std::cmp::Reverse((nd, v)));
                }
            }
        }
        for s in f.switches() {
            let ds = match dist[s] {
                None | Some(0) => continue,
                Some(d) => d,
            };
            self.members.clear();
            for p in f.ports_of(s) {
                let v = f.peer_node[p];
                if !is_down(p)
                    && !f.is_host(v)
                    && dist[v].is_some_and(|dv| dv + link_cost(f, p) == ds)
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
            found(s, GroupRef::new(id));
        }
    }
}

/// Dragonfly groups (components of the switch graph without global links), numbered in order of
/// their lowest switch, with hosts in their switch's group; `(empty, 0)` without global links.
fn dragonfly_groups(f: &Fabric) -> (IdVec<NodeId, Option<u32>>, u32) {
    if !f.tier.contains(&Tier::Global) {
        return (IdVec::new(), 0);
    }
    let mut group: IdVec<NodeId, Option<u32>> = IdVec::from_elem(None, f.num_nodes as usize);
    let mut count = 0;
    let mut stack = Vec::new();
    for s in f.switches() {
        // A scale-up switch joins only GPUs: it is in no dragonfly group.
        if group[s].is_some() || f.role[s] == Role::NvSwitch {
            continue;
        }
        group[s] = Some(count);
        stack.push(s);
        while let Some(u) = stack.pop() {
            for p in f.ports_of(u) {
                let v = f.peer_node[p];
                if f.tier[p] != Tier::Global && !f.is_host(v) && group[v].is_none() {
                    group[v] = Some(count);
                    stack.push(v);
                }
            }
        }
        count += 1;
    }
    for h in f.hosts() {
        group[h] = group[f.peer_node[f.host_port(h)]];
    }
    // Every switch but the scale-up ones got a group above, and every host its switch's.
    (group, count)
}

/// Connected components of the switch graph (links between switches; hosts do not forward),
/// numbered in order of their lowest switch. Scale-up switches are in none (None): they join
/// only GPUs and forward by the cluster layout. Every host-only fabric is one component; a GPU
/// cluster has one per plane (its shared NICs, if any, join the planes into one).
fn components(f: &Fabric) -> (IdVec<NodeId, Option<u32>>, u32) {
    let mut comp: IdVec<NodeId, Option<u32>> = IdVec::from_elem(None, f.num_nodes as usize);
    let mut count = 0;
    let mut stack = Vec::new();
    for s in f.switches() {
        if comp[s].is_some() || f.role[s] == Role::NvSwitch {
            continue;
        }
        comp[s] = Some(count);
        stack.push(s);
        while let Some(u) = stack.pop() {
            for p in f.ports_of(u) {
                let v = f.peer_node[p];
                if !f.is_host(v) && comp[v].is_none() {
                    comp[v] = Some(count);
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
        let is_down = |p: PortId| down.get(p.index()).copied().unwrap_or(false);
        let n = f.num_nodes as usize;
        let num_switches = n - f.num_hosts as usize;
        // Every attachment of every host (a GPU: one per plane, or its shared NIC; its scale-up
        // port is left out, the scale-up switch forwards by the cluster layout), per component.
        let (node_comp, num_comps) = components(f);
        let c = num_comps as usize;
        let mut attachments: Vec<Option<Attachment>> = vec![None; f.num_hosts as usize * c];
        let mut edge_index: IdVec<NodeId, Option<u32>> = IdVec::from_elem(None, n);
        let mut edges = Vec::new();
        for h in f.hosts() {
            for p in f.ports_of(h) {
                let sw = f.peer_node[p];
                let Some(comp) = node_comp[sw] else {
                    continue;
                };
                let a = h.index() * c + comp as usize;
                if attachments[a].is_some() {
                    continue;
                }
                let edge = *edge_index[sw].get_or_insert_with(|| {
                    edges.push(sw);
                    (edges.len() - 1) as u32
                });
                attachments[a] = Some(Attachment {
                    switch: sw,
                    downlink: f.peer_port[p],
                    edge,
                });
            }
        }
        let num_edges = edges.len() as u32;

        let mut search = Search {
            dist: IdVec::from_elem(None, n),
            heap: std::collections::BinaryHeap::new(),
            members: Vec::new(),
            dedup: HashMap::new(),
            group_start: vec![0u32],
            group_ports: Vec::new(),
        };
        let mut group_of = vec![None; num_switches * edges.len()];
        for (ei, &target) in edges.iter().enumerate() {
            search.toward(f, &is_down, &[target], |s, g| {
                group_of[f.switch_index(s) * edges.len() + ei] = Some(g);
            });
        }

        // Dragonfly groups: the switches connected without global links. Routes toward each
        // group (to any of its switches) serve non-minimal routing via an intermediate group.
        let (node_group, num_df_groups) = dragonfly_groups(f);
        let mut to_group = vec![None; num_switches * num_df_groups as usize];
        let mut targets = Vec::new();
        for g in 0..num_df_groups {
            targets.clear();
            targets.extend(f.switches().filter(|&s| node_group[s] == Some(g)));
            search.toward(f, &is_down, &targets, |s, r| {
                to_group[f.switch_index(s) * num_df_groups as usize + g as usize] = Some(r);
            });
        }
        Self {
            num_hosts: f.num_hosts,
            num_comps,
            node_comp,
            attachments,
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
    fn attachment(&self, node: NodeId, dst: NodeId) -> Option<&Attachment> {
        let at = if self.num_comps == 1 {
            dst.index()
        } else {
            dst.index() * self.num_comps as usize + self.node_comp[node]? as usize
        };
        self.attachments[at].as_ref()
    }

    /// Candidate egress ports of switch `node` toward host `dst` (one port when it is the last hop).
    #[inline(always)]
    pub fn group(&self, node: NodeId, dst: NodeId) -> &[PortId] {
        let Some(a) = self.attachment(node, dst) else {
            return &[]; // dst does not attach to this component
        };
        if a.switch == node {
            return std::slice::from_ref(&a.downlink);
        }
        match self.group_of[self.slot(node, a.edge)] {
            Some(g) => self.ports_of_group(g),
            None => &[], // unreachable (a partition after link failures)
        }
    }

    /// Position of (switch `node`, destination edge switch number `edge`) in `group_of`.
    #[inline(always)]
    fn slot(&self, node: NodeId, edge: u32) -> usize {
        (node.get() - self.num_hosts) as usize * self.num_edges as usize + edge as usize
    }

    #[inline(always)]
    fn ports_of_group(&self, g: GroupRef) -> &[PortId] {
        let g = g.id() as usize;
        &self.group_ports[self.group_start[g] as usize..self.group_start[g + 1] as usize]
    }

    /// The group id of (`node`, `dst`) (groups are unique to a switch), or None on the last hop
    /// and where no path reaches `dst`.
    #[inline]
    pub fn group_id(&self, node: NodeId, dst: NodeId) -> Option<u32> {
        let a = self.attachment(node, dst)?;
        if a.switch == node {
            return None;
        }
        self.group_of[self.slot(node, a.edge)].map(GroupRef::id)
    }

    pub fn num_groups(&self) -> usize {
        self.group_start.len() - 1
    }

    /// Dragonfly groups (0 on other fabrics).
    #[inline]
    pub fn num_df_groups(&self) -> u32 {
        self.num_df_groups
    }

    /// The dragonfly group of a node (a host's is its router's; a scale-up switch is in none).
    #[inline(always)]
    pub fn df_group(&self, node: NodeId) -> Option<u32> {
        self.node_group[node]
    }

    /// Candidate egress ports of switch `node` toward any switch of dragonfly group `g` (empty
    /// when `node` is in `g`, or no live path reaches it).
    #[inline]
    pub fn toward_group(&self, node: NodeId, g: u32) -> &[PortId] {
        let at = (node.get() - self.num_hosts) as usize * self.num_df_groups as usize + g as usize;
        match self.to_group[at] {
            Some(r) => self.ports_of_group(r),
            None => &[],
        }
    }
}
