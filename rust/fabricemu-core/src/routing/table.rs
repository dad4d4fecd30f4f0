//! Shortest-path ECMP groups for every (switch, destination edge switch), found by one shortest-path
//! search per edge switch over the switch graph. Hosts never forward, so paths are up/down in Clos;
//! in dragonflies global links weigh more than a group's diameter, so paths are minimal (one global
//! hop).

use std::num::NonZeroU32;
use std::sync::Arc;

use super::search::Paths;
use crate::topology::{Fabric, IdVec, NodeId, PortId, Role, Tier};

/// A port group in the flat tables, stored as its id + 1 so that "no group" (a destination no path
/// reaches) is `None` in 4 bytes: the per-(switch, destination) table is read for every packet, and
/// an `Option<u32>` would double it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct GroupRef(NonZeroU32);

impl GroupRef {
    #[cfg(test)]
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

/// A group map entry (raw, as stored) for the destination edge switch's own row: the host hangs
/// off this switch, and its downlink is the one candidate. Marked in the map rather than found by
/// comparing the switch with an attachment record, so a lookup reads one small key per
/// destination (4 bytes, not a 20-byte attachment: at 8,192 hosts 32 KiB, which stays in cache).
const LOCAL: u32 = DETAIL - 1;

/// `RouteTable::dest_key` of a (host, component) pair where the host does not attach.
const NO_KEY: u32 = u32::MAX;

/// A group map entry (raw) `PORT | port`: a group of one port (a core switch's port toward a pod,
/// a spine's toward a leaf), held in the entry itself, so the lookup reads no group list.
const PORT: u32 = 1 << 30;

/// Candidate egress ports of a switch toward a destination: a group's list (and its id), or one
/// port held here (the last hop's downlink, or a group of one port). Read with
/// [`Ports::as_slice`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ports<'a> {
    one: PortId,
    many: &'a [PortId],
    id: Option<u32>,
}

impl<'a> Ports<'a> {
    const NONE: Ports<'static> = Ports {
        one: PortId::NONE,
        many: &[],
        id: None,
    };

    #[inline(always)]
    fn one(port: PortId) -> Self {
        Ports {
            one: port,
            many: &[],
            id: None,
        }
    }

    /// The candidates (empty where no live path leads on).
    #[inline(always)]
    pub fn as_slice(&self) -> &[PortId] {
        if self.one == PortId::NONE {
            self.many
        } else {
            std::slice::from_ref(&self.one)
        }
    }

    /// The group's id where there are several candidates (round-robin state is indexed by it).
    #[inline(always)]
    pub fn id(&self) -> Option<u32> {
        self.id
    }
}

/// The group of every (switch, destination edge switch), in two levels, as real switches route by
/// prefixes. Destination edge switches are numbered in host order, so a pod's (a leaf's, a
/// dragonfly group's) edges are consecutive; cut into blocks of `block` edges, nearly every block
/// of a switch's row has one group for all its edges (a Clos switch sends everything outside its
/// own pod up the same uplinks; a core switch sends a whole pod down one port), and only the
/// blocks that differ keep one entry per edge. Each row then keeps only the blocks from its first
/// to its last that differ from the row's most common entry, its default (an edge or aggregation
/// switch: its own pod's block; a core switch: every pod's). The map is then about switches x
/// pods at most instead of switches x edge switches (k=32 fat tree: 120 KiB, 64 of them the
/// aggregation and edge switches' own pods' detail, instead of 2.6 MiB), small enough to stay in
/// cache, and a lookup (after the destination's key) is at most three loads, the first of a
/// 12-byte record per switch. Irregular fabrics (and the tables rebuilt after faults) compress as far as they allow;
/// at worst (`block` 1) the map is the flat table.
#[derive(Debug, Clone)]
struct GroupMap {
    block: u32,
    /// A destination's key is its block `<< shift` and its place in the block in the low bits
    /// (`mask`): a lookup needs no division.
    shift: u32,
    mask: u32,
    /// Per switch row: where its entries are in `blocks`.
    rows: Vec<RowSpan>,
    /// Per row: its default entry, then the entries of its blocks `lo..lo + len`; an entry as
    /// [`DETAIL`] says.
    blocks: Vec<u32>,
    detail: Vec<Option<GroupRef>>,
}

/// A row of the group map: its default at `blocks[start]`, and its blocks `lo..lo + len` after it.
#[derive(Debug, Clone, Copy)]
struct RowSpan {
    start: u32,
    lo: u32,
    len: u32,
}

impl GroupMap {
    /// Compress the flat table `[row * edges + edge]` with the block size that makes it smallest.
    #[cfg(test)]
    fn compress(flat: &[Option<GroupRef>], rows: usize, edges: usize) -> Self {
        Self::compress_by(
            flat,
            rows,
            edges,
            Self::best_block(flat, rows, edges),
            |e| e,
        )
    }

    /// The block size that makes the flat table `[row * edges + edge]` smallest (counting every
    /// block of a row: the rows' defaults are left out of the choice).
    fn best_block(flat: &[Option<GroupRef>], rows: usize, edges: usize) -> usize {
        // Candidate block sizes: the divisors of the edge count (pods divide it) and powers of two.
        let mut candidates: Vec<usize> = (1..=edges.min(4096))
            .filter(|&b| edges.is_multiple_of(b) || b.is_power_of_two())
            .collect();
        candidates.dedup();
        // Where each row's group changes (edge j differs from edge j - 1): a block is uniform
        // unless a change falls strictly inside it, so each candidate is sized from the changes
        // alone (few on regular fabrics) rather than from every entry.
        let mut changes: Vec<(u32, u32)> = Vec::new();
        for r in 0..rows {
            let row = &flat[r * edges..(r + 1) * edges];
            for j in 1..edges {
                if row[j] != row[j - 1] {
                    changes.push((r as u32, j as u32));
                }
            }
        }
        let size_with = |b: usize| -> usize {
            let mut size = rows * edges.div_ceil(b);
            let mut last = None;
            for &(r, j) in &changes {
                let block = (r, j as usize / b);
                if !(j as usize).is_multiple_of(b) && last != Some(block) {
                    size += b;
                    last = Some(block);
                }
            }
            size
        };
        candidates
            .into_iter()
            .min_by_key(|&b| (size_with(b), b))
            .unwrap_or(1)
            .max(1)
    }

    /// Compress the flat table `[row * edges + edge]` in blocks of `block` edges, each group
    /// entry `e` (a group id + 1, or [`LOCAL`]) held as `entry(e)` (nonzero).
    fn compress_by(
        flat: &[Option<GroupRef>],
        rows: usize,
        edges: usize,
        block: usize,
        entry: impl Fn(u32) -> u32,
    ) -> Self {
        let enc = |g: Option<GroupRef>| g.map_or(0, |g| entry(g.0.get()));
        let mut spans = Vec::with_capacity(rows);
        let mut blocks = Vec::new();
        let mut detail = Vec::new();
        let mut row_entries = Vec::new();
        for r in 0..rows {
            let row = &flat[r * edges..(r + 1) * edges];
            row_entries.clear();
            for chunk in row.chunks(block) {
                if chunk.iter().all(|&g| g == chunk[0]) {
                    row_entries.push(enc(chunk[0]));
                } else {
                    let at = detail.len() as u32;
                    assert!(at < DETAIL, "route table detail overflow");
                    row_entries.push(DETAIL | at);
                    detail.extend(chunk.iter().map(|&g| NonZeroU32::new(enc(g)).map(GroupRef)));
                    // A short last block keeps `block` entries so every lookup stays in range.
                    detail.resize(at as usize + block, None);
                }
            }
            // The row's default: the entry held by most of its blocks, where one is (a majority
            // vote, Boyer and Moore's; any entry would route alike, this one keeps the row short).
            let mut default = 0;
            let mut votes = 0u32;
            for &e in &row_entries {
                if votes == 0 {
                    default = e;
                }
                votes = if e == default { votes + 1 } else { votes - 1 };
            }
            // No majority (a core switch's row, a port per pod): the first block.
            if row_entries.iter().filter(|&&e| e == default).count() * 2 <= row_entries.len() {
                default = row_entries.first().copied().unwrap_or(0);
            }
            let lo = row_entries.iter().position(|&e| e != default);
            let (lo, hi) = match lo {
                Some(lo) => (
                    lo,
                    row_entries.iter().rposition(|&e| e != default).unwrap() + 1,
                ),
                None => (0, 0),
            };
            let start = u32::try_from(blocks.len()).expect("route table blocks overflow");
            spans.push(RowSpan {
                start,
                lo: lo as u32,
                len: (hi - lo) as u32,
            });
            blocks.push(default);
            blocks.extend_from_slice(&row_entries[lo..hi]);
        }
        let shift = u32::BITS - (block as u32 - 1).leading_zeros();
        Self {
            block: block as u32,
            shift,
            mask: (1 << shift) - 1,
            rows: spans,
            blocks,
            detail,
        }
    }

    /// The key of edge switch number `edge` (see `shift`).
    fn key(&self, edge: u32) -> u32 {
        let key = ((edge / self.block) << self.shift) | (edge % self.block);
        assert!(key < NO_KEY, "route table keys overflow");
        key
    }

    /// The group of (switch row `row`, the edge switch whose key is `key`).
    #[inline(always)]
    fn get(&self, row: usize, key: u32) -> Option<GroupRef> {
        let r = self.rows[row];
        let off = (key >> self.shift).wrapping_sub(r.lo);
        // Within the row's blocks: one of them; else the row's default.
        let at = r.start + if off < r.len { 1 + off } else { 0 };
        let e = self.blocks[at as usize];
        if e & DETAIL != 0 {
            self.detail[(e & !DETAIL) as usize + (key & self.mask) as usize]
        } else {
            NonZeroU32::new(e).map(GroupRef)
        }
    }

    fn bytes(&self) -> usize {
        std::mem::size_of_val(&self.rows[..])
            + std::mem::size_of_val(&self.blocks[..])
            + std::mem::size_of_val(&self.detail[..])
    }
}

/// Where a host attaches to one component of the switch graph.
#[derive(Debug, Clone, Copy)]
struct Attachment {
    /// The port of the switch it attaches to leading to the host.
    downlink: PortId,
    /// That switch's index among edge switches.
    edge: u32,
}

/// Routes as flat arrays: groups are deduplicated port lists.
#[derive(Debug, Clone)]
pub struct RouteTable {
    num_hosts: u32,
    /// Components of the switch graph (a GPU cluster's planes; 1 for every host-only fabric), and
    /// each node's (hosts and scale-up switches: None; they are not routed by the table).
    num_comps: u32,
    /// (By node index.)
    node_comp: Arc<[Option<u32>]>,
    /// Per (host, component), at `host * num_comps + component`: the key of the edge switch the
    /// host attaches to in that component, in the group map ([`NO_KEY`]: it does not attach).
    /// With one component, simply per host. Faults do not move hosts: every table a builder makes
    /// shares them (and the node maps and downlinks).
    dest_key: Arc<[u32]>,
    /// Likewise: the edge switch's port to the host (read on the last hop alone).
    downlink: Arc<[PortId]>,
    /// The groups per (switch, destination edge switch), as two levels (see [`GroupMap`]).
    group_of: GroupMap,
    group_start: Vec<u32>,
    group_ports: Vec<PortId>,
    /// Dragonflies: the group of every node (hosts: their router's; scale-up switches: None),
    /// else empty; by node index.
    node_group: Arc<[Option<u32>]>,
    num_df_groups: u32,
    /// `[(switch - num_hosts) * num_df_groups + group]` -> ports toward the group (None: no
    /// live path).
    to_group: Vec<Option<GroupRef>>,
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

/// Whether a port is marked in `down` (a port past its end is up: an empty slice is all up).
fn marked_down(down: &[bool]) -> impl Fn(PortId) -> bool + '_ {
    |p: PortId| down.get(p.index()).copied().unwrap_or(false)
}

/// A table's `dest_key` and `downlink`.
type DestArrays = (Arc<[u32]>, Arc<[PortId]>);

/// What builds route tables, kept between them: a run with faults rebuilds its table at every
/// change routing notices, and most of the work (the paths toward each destination edge switch)
/// carries over from the last table ([`Paths::update`]). Tables built by updates are identical to
/// tables built from scratch, group numbers included (round-robin state is indexed by them).
pub struct RouteBuilder {
    num_hosts: u32,
    num_comps: u32,
    node_comp: Arc<[Option<u32>]>,
    /// Where each host attaches, per (host, component) as [`RouteTable::dest_key`].
    attachments: Vec<Option<Attachment>>,
    /// Each destination edge switch's row in the (switch, destination) table.
    edge_rows: Vec<u32>,
    /// The tables' keys and downlinks, made for the first table: the block is chosen then and
    /// kept, so every later table shares them (copying the attachments at every fault was a
    /// quarter of the route tables' time for a 16,384-GPU fabric under a failure process).
    table_dests: Option<DestArrays>,
    /// Destination edge switches: paths' destinations `0..edges`; then the dragonfly groups'.
    edges: usize,
    node_group: Arc<[Option<u32>]>,
    num_df_groups: u32,
    paths: Paths,
    /// The group map's block size, chosen for the first table and kept for the tables updates
    /// build: choosing costs a pass per candidate size, and a few faults barely change the best.
    block: Option<usize>,
    /// Every table's (switch, destination) groups, as numbered and as the group map reads them:
    /// kept, as allocating them anew at every fault fragments the heap.
    rows: Vec<u32>,
    flat: Vec<Option<GroupRef>>,
    /// By group id + 1 (0: none): the group's entry in the map.
    entries: Vec<u32>,
}

impl RouteBuilder {
    /// Routes over the fabric without the links whose egress port is marked in `down` (empty:
    /// all links up).
    pub fn new(f: &Fabric, down: &[bool]) -> Self {
        let is_down = marked_down(down);
        let n = f.num_nodes as usize;
        // Every attachment of every host (a GPU: one per plane, or its shared NIC; its scale-up
        // port is left out, the scale-up switch forwards by the cluster layout), per component.
        let (node_comp, num_comps) = components(f);
        let c = num_comps as usize;
        let mut attachments: Vec<Option<Attachment>> = vec![None; f.num_hosts as usize * c];
        let mut edge_index: IdVec<NodeId, Option<u32>> = IdVec::from_elem(None, n);
        let mut targets: Vec<Vec<u32>> = Vec::new();
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
                    targets.push(vec![f.switch_index(sw) as u32]);
                    (targets.len() - 1) as u32
                });
                attachments[a] = Some(Attachment {
                    downlink: f.peer_port[p],
                    edge,
                });
            }
        }
        let edges = targets.len();
        let edge_rows = targets.iter().map(|t| t[0]).collect();
        // Dragonfly groups: the switches connected without global links. Routes toward each
        // group (to any of its switches) serve non-minimal routing via an intermediate group.
        let (node_group, num_df_groups) = dragonfly_groups(f);
        for g in 0..num_df_groups {
            let members = f.switches().filter(|&s| node_group[s] == Some(g));
            targets.push(members.map(|s| f.switch_index(s) as u32).collect());
        }
        Self {
            num_hosts: f.num_hosts,
            num_comps,
            node_comp: node_comp.as_slice().into(),
            attachments,
            edge_rows,
            table_dests: None,
            edges,
            node_group: node_group.as_slice().into(),
            num_df_groups,
            paths: Paths::new(f, &is_down, targets),
            block: None,
            rows: Vec::new(),
            flat: Vec::new(),
            entries: Vec::new(),
        }
    }

    /// The ports in `toggled` went down or came back, as `down` now marks them.
    pub fn update(&mut self, f: &Fabric, down: &[bool], toggled: &[PortId]) {
        let is_down = marked_down(down);
        self.paths.update(f, &is_down, toggled);
    }

    /// The route table (a destination no path reaches gets an empty group).
    pub fn table(&mut self) -> RouteTable {
        let switches = self.node_comp.len() - self.num_hosts as usize;
        let (edges, dfg) = (self.edges, self.num_df_groups as usize);
        let groups = self.paths.numbered(&mut self.rows);
        assert!(groups.start.len() < PORT as usize, "route groups overflow");
        let dests = edges + dfg;
        let as_ref = |e: u32| NonZeroU32::new(e).map(GroupRef);
        let flat = &mut self.flat;
        flat.clear();
        let mut to_group = Vec::with_capacity(switches * dfg);
        for row in self.rows.chunks(dests.max(1)) {
            flat.extend(row[..edges].iter().map(|&e| as_ref(e)));
            to_group.extend(row[edges..].iter().map(|&e| as_ref(e)));
        }
        // An edge switch's entry toward itself (no path: it is the destination) says so.
        for (e, &row) in self.edge_rows.iter().enumerate() {
            flat[row as usize * edges + e] = as_ref(LOCAL);
        }
        let block =
            *(self.block).get_or_insert_with(|| GroupMap::best_block(flat, switches, edges));
        // A group of one port is held in its entries (as the map is made, which compares groups
        // alike either way: there are far fewer entries than (switch, destination) pairs).
        let entry = &mut self.entries;
        entry.clear();
        entry.push(0); // no group
        entry.extend(groups.start.windows(2).enumerate().map(|(g, w)| {
            if w[1] - w[0] == 1 {
                let port = groups.ports[w[0] as usize].get();
                assert!(port < PORT - 1, "port ids overflow the route table");
                PORT | port
            } else {
                g as u32 + 1
            }
        }));
        let group_of = GroupMap::compress_by(flat, switches, edges, block, |e| match e {
            LOCAL => LOCAL,
            e => entry[e as usize],
        });
        let (dest_key, downlink) = self.table_dests.get_or_insert_with(|| {
            let key = |a: &Option<Attachment>| a.map_or(NO_KEY, |a| group_of.key(a.edge));
            let down = |a: &Option<Attachment>| a.map_or(PortId::NONE, |a| a.downlink);
            (
                self.attachments.iter().map(key).collect(),
                self.attachments.iter().map(down).collect(),
            )
        });
        RouteTable {
            num_hosts: self.num_hosts,
            num_comps: self.num_comps,
            node_comp: Arc::clone(&self.node_comp),
            dest_key: Arc::clone(dest_key),
            downlink: Arc::clone(downlink),
            group_of,
            group_start: groups.start,
            group_ports: groups.ports,
            node_group: Arc::clone(&self.node_group),
            num_df_groups: self.num_df_groups,
            to_group,
        }
    }

    /// Bytes kept between tables.
    pub fn bytes(&self) -> usize {
        self.paths.bytes()
            + std::mem::size_of_val(&self.attachments[..])
            + std::mem::size_of_val(&self.rows[..])
            + std::mem::size_of_val(&self.flat[..])
            + std::mem::size_of_val(&self.entries[..])
    }
}

impl RouteTable {
    pub fn build(f: &Fabric) -> Self {
        Self::build_avoiding(f, &[])
    }

    /// Routes over the fabric without the links whose egress port is marked in `down` (empty: all
    /// links up). A destination no path reaches gets an empty group.
    pub fn build_avoiding(f: &Fabric, down: &[bool]) -> Self {
        RouteBuilder::new(f, down).table()
    }

    /// Where `dst` attaches in `node`'s component (hosts with several attachments: GPUs), as an
    /// index of `dest_key` and `downlink`; None for a node that is not a host (a PFC frame's
    /// destination, which a route worked out ahead may look up: `Router::predict`).
    #[inline(always)]
    fn dest_at(&self, node: NodeId, dst: NodeId) -> Option<usize> {
        if self.num_comps == 1 {
            Some(dst.index())
        } else {
            Some(dst.index() * self.num_comps as usize + self.node_comp[node.index()]? as usize)
        }
    }

    /// The group map's entry for switch `node` toward host `dst`, and where `dst`'s downlink is
    /// (None: `dst` does not attach to `node`'s component).
    #[inline(always)]
    fn entry(&self, node: NodeId, dst: NodeId) -> Option<(Option<GroupRef>, usize)> {
        let at = self.dest_at(node, dst)?;
        let key = *self.dest_key.get(at)?;
        if key == NO_KEY {
            return None;
        }
        Some((self.group_of.get(self.switch_row(node), key), at))
    }

    /// Candidate egress ports of switch `node` toward host `dst` (one port on the last hop), with
    /// their group id where there are several.
    #[inline(always)]
    pub fn group(&self, node: NodeId, dst: NodeId) -> Ports<'_> {
        match self.entry(node, dst) {
            None | Some((None, _)) => Ports::NONE, // not attached here, or unreachable
            Some((Some(g), at)) => match g.0.get() {
                LOCAL => Ports::one(self.downlink[at]),
                e if e & PORT != 0 => Ports::one(PortId::new(e & !PORT)),
                _ => Ports {
                    one: PortId::NONE,
                    many: self.ports_of_group(g),
                    id: Some(g.id()),
                },
            },
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
        self.node_group[node.index()]
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
                            m.get(row, m.key(e)),
                            flat[row * edges + e as usize],
                            "rows {rows} edges {edges} runs {runs} block {}",
                            m.block
                        );
                    }
                }
            }
        }
    }

    /// Every (switch, host) group of `t` equals the one a plain reference finds: Bellman-Ford
    /// relaxation of every link until nothing changes, toward the host's edge switch, and the
    /// live links one cost step nearer, in port order.
    fn check_against_flat(f: &Fabric, t: &RouteTable, down: &[bool]) {
        let is_down = marked_down(down);
        let cost = |p: PortId| {
            if f.tier[p] == Tier::Global {
                1 << 16
            } else {
                1
            }
        };
        for h in f.hosts() {
            let sw = f.peer_node[f.host_port(h)];
            let mut dist: IdVec<NodeId, Option<u32>> = IdVec::from_elem(None, f.num_nodes as usize);
            dist[sw] = Some(0);
            let mut changed = true;
            while changed {
                changed = false;
                for s in f.switches() {
                    for p in f.ports_of(s) {
                        let v = f.peer_node[p];
                        if is_down(p) || f.is_host(v) {
                            continue;
                        }
                        if let Some(dv) = dist[v] {
                            if dist[s].is_none_or(|ds| dv + cost(p) < ds) {
                                dist[s] = Some(dv + cost(p));
                                changed = true;
                            }
                        }
                    }
                }
            }
            for s in f.switches().filter(|&s| t.node_comp[s.index()].is_some()) {
                let want: Vec<PortId> = if s == sw {
                    vec![f.peer_port[f.host_port(h)]]
                } else {
                    let Some(ds) = dist[s] else {
                        assert!(
                            t.group(s, h).as_slice().is_empty(),
                            "switch {s} to host {h}"
                        );
                        continue;
                    };
                    f.ports_of(s)
                        .filter(|&p| {
                            let v = f.peer_node[p];
                            !is_down(p)
                                && !f.is_host(v)
                                && dist[v].map(|dv| dv + cost(p)) == Some(ds)
                        })
                        .collect()
                };
                assert_eq!(
                    t.group(s, h).as_slice(),
                    &want[..],
                    "switch {s} to host {h}"
                );
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

    /// `a` and `b` route alike: the same groups, numbered alike, for every (switch, host) and
    /// every (switch, dragonfly group).
    fn assert_same_routes(f: &Fabric, a: &RouteTable, b: &RouteTable, what: &str) {
        assert_eq!(a.group_start, b.group_start, "{what}: group numbering");
        assert_eq!(a.group_ports, b.group_ports, "{what}: group ports");
        for s in f.switches() {
            for h in f.hosts() {
                assert_eq!(a.group(s, h), b.group(s, h), "{what}: {s} to {h}");
            }
            for g in 0..a.num_df_groups() {
                assert_eq!(
                    a.toward_group(s, g),
                    b.toward_group(s, g),
                    "{what}: {s} to group {g}"
                );
            }
        }
    }

    #[test]
    fn tables_updated_link_by_link_are_the_tables_built_from_scratch() {
        // Links between switches go down and come back in random batches (one link, or several
        // at once, some toggled twice); after each batch the updated table must equal a fresh
        // build over the same down links, group numbers included (round robin indexes them).
        for (i, toml) in [
            "[topology]\nkind = \"fat_tree\"\nk = 4",
            "[topology]\nkind = \"fat_tree\"\nk = 8",
            "[topology]\nkind = \"leaf_spine\"\nleaves = 5\nspines = 3\nhosts_per_leaf = 3",
            "[topology]\nkind = \"dragonfly\"\np = 2\na = 4\nh = 2\ng = 9",
        ]
        .into_iter()
        .enumerate()
        {
            let f = fabric(toml);
            let links: Vec<PortId> = f
                .ports()
                .filter(|&p| !f.is_host(f.port_node[p]) && !f.is_host(f.peer_node[p]))
                .collect();
            let mut r = crate::rng::stream(7, crate::rng::Purpose::Workload, i as u64);
            let mut down = vec![false; f.num_ports() as usize];
            let mut builder = RouteBuilder::new(&f, &down);
            for batch in 0..60 {
                let mut toggled = Vec::new();
                for _ in 0..1 + r.below(4) {
                    // A cable fails in both directions; sometimes only one direction changes.
                    let p = links[r.below(links.len() as u64) as usize];
                    let both = r.below(3) != 0;
                    for q in [p, f.peer_port[p]].into_iter().take(1 + both as usize) {
                        down[q.index()] = !down[q.index()];
                        toggled.push(q);
                    }
                }
                // A host's link changes nothing in the tables between switches.
                toggled.push(f.host_port(f.hosts().next().unwrap()));
                builder.update(&f, &down, &toggled);
                let fresh = RouteTable::build_avoiding(&f, &down);
                assert_same_routes(
                    &f,
                    &builder.table(),
                    &fresh,
                    &format!("{toml} batch {batch}"),
                );
            }
        }
    }

    #[test]
    fn an_update_searches_again_only_the_destinations_whose_distances_change() {
        // k=8 fat tree: an edge switch's cable to an aggregation switch fails. The aggregation
        // switch's distance to that edge switch changes (1 to 3), so that one destination is
        // searched again; toward the 31 others only the two switches' groups change.
        let f = fabric("[topology]\nkind = \"fat_tree\"\nk = 8");
        let edge = f.peer_node[f.host_port(f.hosts().next().unwrap())];
        let up = f
            .ports_of(edge)
            .find(|&p| !f.is_host(f.peer_node[p]))
            .expect("an uplink");
        let mut down = vec![false; f.num_ports() as usize];
        let mut builder = RouteBuilder::new(&f, &down);
        let before = builder.paths.searches();
        for up_again in [false, true] {
            for q in [up, f.peer_port[up]] {
                down[q.index()] = !up_again;
            }
            builder.update(&f, &down, &[up, f.peer_port[up]]);
            let fresh = RouteTable::build_avoiding(&f, &down);
            assert_same_routes(&f, &builder.table(), &fresh, "k=8");
        }
        assert_eq!(
            builder.paths.searches() - before,
            2,
            "one search down, one back up"
        );
        // The edge switch sends its other destinations over its 3 other uplinks meanwhile.
        let far = f.hosts().next_back().unwrap();
        down[up.index()] = true;
        down[f.peer_port[up].index()] = true;
        builder.update(&f, &down, &[up, f.peer_port[up]]);
        assert_eq!(builder.table().group(edge, far).as_slice().len(), 3);
    }

    #[test]
    fn the_group_map_grows_with_pods_not_with_switches_times_hosts() {
        // k=16: 320 switches x 128 edge switches would be 160 KiB flat; by pods (blocks of 8
        // edges) 20 KiB of blocks and 8 KiB of pod detail. Each edge and aggregation row keeps
        // only its own pod's block beside its default (its uplinks), a core row its default (its
        // port toward pod 0) and the 15 other pods': 1,536 entries.
        let f = fabric("[topology]\nkind = \"fat_tree\"\nk = 16");
        let t = RouteTable::build(&f);
        let m = &t.group_of;
        assert_eq!(m.block, 8);
        assert_eq!(m.blocks.len(), 128 * 2 + 128 * 2 + 64 * 16);
        assert!(
            t.group_map_bytes() < 20 << 10,
            "{} bytes of group map",
            t.group_map_bytes()
        );
        // A core switch's port toward a pod, an aggregation switch's toward an edge switch and
        // the last hop are held in the map: no group list is read for them.
        let h = f.hosts().next_back().unwrap();
        let edge = f.peer_node[f.host_port(h)];
        let agg = f.peer_node[f
            .ports_of(edge)
            .find(|&p| !f.is_host(f.peer_node[p]))
            .unwrap()];
        let core = f.peer_node[f.ports_of(agg).next_back().unwrap()];
        for s in [edge, agg, core] {
            let ports = t.group(s, h);
            assert_eq!(
                (ports.many, ports.as_slice().len()),
                (&[][..], 1),
                "switch {s}"
            );
        }
        // Toward a host in another pod the edge switch holds its uplinks' group.
        let far = f.hosts().next().unwrap();
        assert_eq!(t.group(edge, far).as_slice().len(), 8);
        assert!(t.group(edge, far).id().is_some());
    }
}
