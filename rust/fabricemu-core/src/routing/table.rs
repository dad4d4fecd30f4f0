//! Shortest-path ECMP groups for every (switch, destination edge switch), found by one shortest-path
//! search per edge switch over the switch graph. Hosts never forward, so paths are up/down in Clos;
//! in dragonflies global links weigh more than a group's diameter, so paths are minimal (one global
//! hop).

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
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

/// `GroupMap::blocks` entry: 0 is "no group" (unreachable), `DETAIL | i` a block whose edges
/// differ (its groups at `detail[i..i + block]`), any other value a group id + 1 shared by every
/// edge of the block.
const DETAIL: u32 = 1 << 31;

/// The group of every (switch, destination edge switch), in two levels, as real switches route by
/// prefixes. Destination edge switches are numbered in host order, so a pod's (a leaf's, a
/// dragonfly group's) edges are consecutive; cut into blocks of `block` edges, nearly every block
/// of a switch's row has one group for all its edges (a Clos switch sends everything outside its
/// own pod up the same uplinks; a core switch sends a whole pod down one port), and only the
/// blocks that differ keep one entry per edge. The map is then about switches x pods instead of
/// switches x edge switches (k=32 fat tree: 70 KiB instead of 2.6 MiB), small enough to stay in
/// cache, and a lookup is two loads. Irregular fabrics (and the tables rebuilt after faults)
/// compress as far as they allow; at worst (`block` 1) the map is the flat table.
#[derive(Debug, Clone)]
struct GroupMap {
    block: u32,
    /// Blocks per switch row.
    row_blocks: u32,
    /// `[switch_row * row_blocks + edge / block]` -> an entry as [`DETAIL`] says.
    blocks: Vec<u32>,
    detail: Vec<Option<GroupRef>>,
}

impl GroupMap {
    /// Compress the flat table `[row * edges + edge]` with the block size that makes it smallest.
    fn compress(flat: &[Option<GroupRef>], rows: usize, edges: usize) -> Self {
        let enc = |g: Option<GroupRef>| g.map_or(0, |g| g.0.get());
        // Candidate block sizes: the divisors of the edge count (pods divide it) and powers of two.
        let mut candidates: Vec<usize> = (1..=edges.min(4096))
            .filter(|&b| edges.is_multiple_of(b) || b.is_power_of_two())
            .collect();
        candidates.dedup();
        let size_with = |b: usize| -> usize {
            let row_blocks = edges.div_ceil(b);
            let mut size = rows * row_blocks;
            for r in 0..rows {
                let row = &flat[r * edges..(r + 1) * edges];
                for chunk in row.chunks(b) {
                    if chunk.iter().any(|&g| g != chunk[0]) {
                        size += b;
                    }
                }
            }
            size
        };
        let block = candidates
            .into_iter()
            .min_by_key(|&b| (size_with(b), b))
            .unwrap_or(1)
            .max(1);
        let row_blocks = edges.div_ceil(block);
        let mut blocks = Vec::with_capacity(rows * row_blocks);
        let mut detail = Vec::new();
        for r in 0..rows {
            let row = &flat[r * edges..(r + 1) * edges];
            for chunk in row.chunks(block) {
                if chunk.iter().all(|&g| g == chunk[0]) {
                    blocks.push(enc(chunk[0]));
                } else {
                    let at = detail.len() as u32;
                    assert!(at < DETAIL, "route table detail overflow");
                    blocks.push(DETAIL | at);
                    detail.extend_from_slice(chunk);
                    // A short last block keeps `block` entries so every lookup stays in range.
                    detail.resize(at as usize + block, None);
                }
            }
        }
        Self {
            block: block as u32,
            row_blocks: row_blocks as u32,
            blocks,
            detail,
        }
    }

    /// The group of (switch row `row`, edge switch number `block * self.block + within`).
    #[inline(always)]
    fn get(&self, row: usize, b: u32, within: u32) -> Option<GroupRef> {
        let e = self.blocks[row * self.row_blocks as usize + b as usize];
        if e & DETAIL != 0 {
            self.detail[(e & !DETAIL) as usize + within as usize]
        } else {
            NonZeroU32::new(e).map(GroupRef)
        }
    }

    fn bytes(&self) -> usize {
        std::mem::size_of_val(&self.blocks[..]) + std::mem::size_of_val(&self.detail[..])
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
    /// `switch`'s index among edge switches, then (once the group map is built) the position of
    /// its entries in the map: the block of the edge in a switch row ...
    edge: u32,
    /// ... and the edge's place within that block.
    within: u32,
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
    /// The groups per (switch, destination edge switch), as two levels (see [`GroupMap`]).
    group_of: GroupMap,
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
    /// Every link costs 1 (no global links): a breadth-first search finds the same costs
    /// without the heap.
    unit_costs: bool,
    fifo: std::collections::VecDeque<NodeId>,
    /// With unit costs: each switch's links to switches (`adj_start` by switch index), in port
    /// order, with whether each direction is up: read for every target, so hosts' ports and the
    /// down flags are looked at once per build.
    adj_start: Vec<u32>,
    adj: Vec<SwitchLink>,
    members: Vec<PortId>,
    dedup: HashMap<Vec<PortId>, u32, BuildHasherDefault<GroupHasher>>,
    group_start: Vec<u32>,
    group_ports: Vec<PortId>,
}

/// A switch's link to another switch, as the unit-cost search reads it.
#[derive(Clone, Copy)]
struct SwitchLink {
    port: PortId,
    peer: NodeId,
    /// The switch may forward over it (its port is up).
    out_up: bool,
    /// The peer may forward back over it (the reverse port is up).
    back_up: bool,
}

/// A multiply-rotate hash for the port lists of next-hop groups: the tables are rebuilt at every
/// link fault routing notices, and hashing each (switch, destination)'s group with SipHash took
/// a fifth of a faulty k=16 run; the keys are our own ports, so no flooding to guard against.
#[derive(Default)]
struct GroupHasher(u64);

impl std::hash::Hasher for GroupHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.write_u64(n as u64);
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7C_C1_B7_27_22_0A_95);
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

impl Search {
    /// A search over `nodes` nodes, breadth first if every link costs 1 (`unit_costs`).
    fn new(nodes: usize, unit_costs: bool) -> Self {
        Self {
            dist: IdVec::from_elem(None, nodes),
            heap: std::collections::BinaryHeap::new(),
            unit_costs,
            fifo: std::collections::VecDeque::new(),
            adj_start: Vec::new(),
            adj: Vec::new(),
            members: Vec::new(),
            dedup: HashMap::default(),
            group_start: vec![0u32],
            group_ports: Vec::new(),
        }
    }

    /// Shortest paths toward the switches `targets` over link costs (1 inside Clos tiers and dragonfly
    /// groups, so Clos routes are the shortest hop counts; global links cost more than any detour
    /// inside a group, so dragonfly routes take one global hop: minimal routing). Calls
    /// `found(switch, group)` for every other switch that reaches a target.
    fn toward(
        &mut self,
        f: &Fabric,
        is_down: &impl Fn(PortId) -> bool,
        targets: &[NodeId],
        found: impl FnMut(NodeId, GroupRef),
    ) {
        if self.unit_costs {
            return self.breadth_first(f, is_down, targets, found);
        }
        self.dijkstra(f, is_down, targets, found);
    }

    /// [`Search::toward`] where every link costs 1: breadth first from every target at once
    /// over the switches' links (the same costs and groups as Dijkstra's).
    fn breadth_first(
        &mut self,
        f: &Fabric,
        is_down: &impl Fn(PortId) -> bool,
        targets: &[NodeId],
        mut found: impl FnMut(NodeId, GroupRef),
    ) {
        if self.adj_start.is_empty() {
            self.adj_start.push(0);
            for s in f.switches() {
                for p in f.ports_of(s) {
                    let peer = f.peer_node[p];
                    if !f.is_host(peer) {
                        self.adj.push(SwitchLink {
                            port: p,
                            peer,
                            out_up: !is_down(p),
                            back_up: !is_down(f.peer_port[p]),
                        });
                    }
                }
                self.adj_start.push(self.adj.len() as u32);
            }
        }
        let links = |s: NodeId, start: &[u32]| {
            let i = f.switch_index(s);
            start[i] as usize..start[i + 1] as usize
        };
        let dist = &mut self.dist;
        dist.fill(None);
        self.fifo.clear();
        for &t in targets {
            dist[t] = Some(0);
            self.fifo.push_back(t);
        }
        while let Some(u) = self.fifo.pop_front() {
            let d = dist[u].expect("queued with its cost") + 1;
            for l in &self.adj[links(u, &self.adj_start)] {
                if l.back_up && dist[l.peer].is_none() {
                    dist[l.peer] = Some(d);
                    self.fifo.push_back(l.peer);
                }
            }
        }
        for s in f.switches() {
            let ds = match self.dist[s] {
                None | Some(0) => continue,
                Some(d) => d,
            };
            self.members.clear();
            for l in &self.adj[links(s, &self.adj_start)] {
                if l.out_up && self.dist[l.peer] == Some(ds - 1) {
                    self.members.push(l.port);
                }
            }
            let id = self.group_id();
            found(s, GroupRef::new(id));
        }
    }

    /// [`Search::toward`] over any link costs.
    fn dijkstra(
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
            let ds = match self.dist[s] {
                None | Some(0) => continue,
                Some(d) => d,
            };
            self.members.clear();
            for p in f.ports_of(s) {
                let v = f.peer_node[p];
                if !is_down(p)
                    && !f.is_host(v)
                    && self.dist[v].is_some_and(|dv| dv + link_cost(f, p) == ds)
                {
                    self.members.push(p);
                }
            }
            let id = self.group_id();
            found(s, GroupRef::new(id));
        }
    }

    /// The id of the group of `members`, numbered in order of first appearance.
    fn group_id(&mut self) -> u32 {
        // Most groups were seen before: look up without copying the list.
        if let Some(&id) = self.dedup.get(self.members.as_slice()) {
            return id;
        }
        self.group_ports.extend_from_slice(&self.members);
        self.group_start.push(self.group_ports.len() as u32);
        let id = (self.group_start.len() - 2) as u32;
        self.dedup.insert(self.members.clone(), id);
        id
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
                    within: 0,
                });
            }
        }

        let mut search = Search::new(n, f.ports().all(|p| link_cost(f, p) == 1));
        let mut flat = vec![None; num_switches * edges.len()];
        for (ei, &target) in edges.iter().enumerate() {
            search.toward(f, &is_down, &[target], |s, g| {
                flat[f.switch_index(s) * edges.len() + ei] = Some(g);
            });
        }
        let group_of = GroupMap::compress(&flat, num_switches, edges.len());
        drop(flat);
        // Lookups then need no division: each attachment keeps its (block, place in block).
        for a in attachments.iter_mut().flatten() {
            (a.edge, a.within) = (a.edge / group_of.block, a.edge % group_of.block);
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
        match self.group_of.get(self.switch_row(node), a.edge, a.within) {
            Some(g) => self.ports_of_group(g),
            None => &[], // unreachable (a partition after link failures)
        }
    }

    /// Candidate egress ports of switch `node` toward host `dst` with their group id (None on
    /// the last hop, where the one candidate is the downlink), in one lookup.
    #[inline(always)]
    pub fn group_with_id(&self, node: NodeId, dst: NodeId) -> (&[PortId], Option<u32>) {
        let Some(a) = self.attachment(node, dst) else {
            return (&[], None);
        };
        if a.switch == node {
            return (std::slice::from_ref(&a.downlink), None);
        }
        match self.group_of.get(self.switch_row(node), a.edge, a.within) {
            Some(g) => (self.ports_of_group(g), Some(g.id())),
            None => (&[], None),
        }
    }

    /// Row of switch `node` in `group_of`.
    #[inline(always)]
    fn switch_row(&self, node: NodeId) -> usize {
        (node.get() - self.num_hosts) as usize
    }

    /// Bytes of the (switch, destination) group map (it does not grow as switches x hosts on
    /// regular fabrics: see [`GroupMap`]).
    pub fn group_map_bytes(&self) -> usize {
        self.group_of.bytes()
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
        self.group_of
            .get(self.switch_row(node), a.edge, a.within)
            .map(GroupRef::id)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn fabric(toml: &str) -> Fabric {
        let (_, s) = crate::scenario::parse_toml(
            &format!("{toml}\n[[workload]]\nkind = \"permutation\"\nsize = \"1MB\""),
            "t.toml",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        crate::topology::build(&s.topology, &s.switch)
    }

    #[test]
    fn the_group_map_returns_every_entry_of_the_flat_table() {
        // Random tables (rows of runs of equal groups, holes, sizes no block divides) and the
        // worst case (every entry different).
        let mut r = crate::rng::stream(5, crate::rng::Purpose::Workload, 0);
        for (rows, edges) in [(1, 1), (3, 7), (10, 12), (17, 96), (5, 130)] {
            for runs in [1u64, 3, 1000] {
                let mut flat = Vec::new();
                for _ in 0..rows {
                    let mut g = None;
                    for _ in 0..edges {
                        if r.below(runs) == 0 || flat.is_empty() {
                            g = match r.below(5) {
                                0 => None,
                                _ => Some(GroupRef::new(r.below(50) as u32)),
                            };
                        }
                        flat.push(g);
                    }
                }
                let m = GroupMap::compress(&flat, rows, edges);
                for row in 0..rows {
                    for e in 0..edges as u32 {
                        assert_eq!(
                            m.get(row, e / m.block, e % m.block),
                            flat[row * edges + e as usize],
                            "rows {rows} edges {edges} runs {runs} block {}",
                            m.block
                        );
                    }
                }
            }
        }
    }

    /// Every (switch, host) group of `t` equals the one found by a search per destination edge
    /// switch kept flat (the table before the group map).
    fn check_against_flat(f: &Fabric, t: &RouteTable, down: &[bool]) {
        let is_down = |p: PortId| down.get(p.index()).copied().unwrap_or(false);
        // The reference takes the heap's search also where the tables take breadth first.
        let mut search = Search::new(f.num_nodes as usize, false);
        for h in f.hosts() {
            let sw = f.peer_node[f.host_port(h)];
            let mut flat: IdVec<NodeId, Option<Vec<PortId>>> =
                IdVec::from_elem(None, f.num_nodes as usize);
            let mut found = Vec::new();
            search.toward(f, &is_down, &[sw], |s, g| found.push((s, g)));
            for (s, g) in found {
                let i = g.id() as usize;
                let (a, b) = (search.group_start[i], search.group_start[i + 1]);
                flat[s] = Some(search.group_ports[a as usize..b as usize].to_vec());
            }
            for s in f.switches().filter(|&s| t.node_comp[s].is_some()) {
                let want: Vec<PortId> = if s == sw {
                    vec![f.peer_port[f.host_port(h)]]
                } else {
                    flat[s].clone().unwrap_or_default()
                };
                assert_eq!(t.group(s, h), &want[..], "switch {s} to host {h}");
            }
        }
    }

    #[test]
    fn the_group_map_routes_like_the_flat_table_on_every_fabric_and_after_faults() {
        for toml in [
            "[topology]\nkind = \"fat_tree\"\nk = 4",
            "[topology]\nkind = \"fat_tree\"\nk = 8",
            "[topology]\nkind = \"leaf_spine\"\nleaves = 5\nspines = 3\nhosts_per_leaf = 3",
            "[topology]\nkind = \"dragonfly\"\np = 2\na = 4\nh = 2\ng = 9",
        ] {
            let f = fabric(toml);
            let t = RouteTable::build(&f);
            check_against_flat(&f, &t, &[]);
            // Every third switch-to-switch link down: irregular rows.
            let mut down = vec![false; f.num_ports() as usize];
            for (i, p) in f.ports().enumerate() {
                if !f.is_host(f.port_node[p]) && !f.is_host(f.peer_node[p]) && i % 3 == 0 {
                    down[p.index()] = true;
                }
            }
            let t = RouteTable::build_avoiding(&f, &down);
            check_against_flat(&f, &t, &down);
        }
    }

    #[test]
    fn the_group_map_grows_with_pods_not_with_switches_times_hosts() {
        // k=16: 320 switches x 128 edge switches would be 160 KiB flat.
        let f = fabric("[topology]\nkind = \"fat_tree\"\nk = 16");
        let t = RouteTable::build(&f);
        let flat = 320 * 128 * 4;
        assert!(
            t.group_map_bytes() * 4 < flat,
            "{} bytes of group map",
            t.group_map_bytes()
        );
    }
}
