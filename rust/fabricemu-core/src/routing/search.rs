//! Shortest paths over the switch graph toward each *destination* (a destination edge switch, or
//! the switches of a dragonfly group), as the group of next-hop ports every switch has toward it,
//! and their upkeep as links go down and come back.
//!
//! A fault changes some switch's group toward nearly every destination (an edge switch that lost
//! an uplink sends everything over the others) but the distances toward only a few (those the
//! link was the only shortest way to). So an update searches a destination again only where a
//! changed link shortens a path or leaves a switch with no shortest one; elsewhere it works out
//! again the groups of the switches owning the changed links. The groups and distances are
//! exactly those a search from scratch finds: a distance labelling that still satisfies every
//! switch's shortest-path equation after the change is the (unique) shortest-path labelling.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use crate::topology::{Fabric, PortId, Tier};

/// A distance no path has (the destination is unreachable from the switch).
const UNREACHED: u32 = u32::MAX;

/// Routing cost of the link leaving port `p`: 1, but a dragonfly's global links cost more than any
/// path inside a group, so minimal routes cross exactly one.
fn link_cost(f: &Fabric, p: PortId) -> u32 {
    if f.tier[p] == Tier::Global {
        1 << 16
    } else {
        1
    }
}

/// A switch's link to another switch, as the searches read it.
#[derive(Clone, Copy)]
struct SwitchLink {
    port: PortId,
    /// The switch at the far end (its switch index).
    peer: u32,
    /// Cost of forwarding over `port`, and of the peer forwarding back over the reverse port.
    cost: u32,
    back_cost: u32,
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

/// No group (`Paths::last_group`).
const NO_GROUP: u32 = u32::MAX;

/// Deduplicated port lists, numbered in order of first appearance.
#[derive(Clone, Default)]
pub(super) struct Groups {
    /// Group `g` is `ports[start[g]..start[g + 1]]`.
    pub start: Vec<u32>,
    pub ports: Vec<PortId>,
    dedup: HashMap<Vec<PortId>, u32, BuildHasherDefault<GroupHasher>>,
}

impl Groups {
    fn new() -> Self {
        Self {
            start: vec![0],
            ..Self::default()
        }
    }

    pub fn len(&self) -> usize {
        self.start.len() - 1
    }

    pub fn get(&self, g: u32) -> &[PortId] {
        &self.ports[self.start[g as usize] as usize..self.start[g as usize + 1] as usize]
    }

    /// The id of the group of `members`, trying group `*last` first (a switch's group toward
    /// the previous destination; `NO_GROUP`: none), and leaving it in `*last`. A switch's
    /// group is mostly the same for destination after destination (all its uplinks, toward
    /// every host outside its pod), and comparing one list costs less than hashing it.
    fn id_after(&mut self, members: &[PortId], last: &mut u32) -> u32 {
        if *last != NO_GROUP && self.get(*last) == members {
            return *last;
        }
        *last = self.id(members);
        *last
    }

    /// The id of the group of `members`.
    fn id(&mut self, members: &[PortId]) -> u32 {
        // Most groups were seen before: look up without copying the list.
        if let Some(&id) = self.dedup.get(members) {
            return id;
        }
        self.ports.extend_from_slice(members);
        self.start.push(self.ports.len() as u32);
        let id = (self.start.len() - 2) as u32;
        self.dedup.insert(members.to_vec(), id);
        id
    }
}

/// Every switch's next-hop group toward every destination, and the distances they follow from.
pub(super) struct Paths {
    switches: usize,
    /// Every link costs 1 (no global links): breadth-first searches find the costs without a heap.
    unit_costs: bool,
    /// Each switch's links to switches (`adj_start` by switch index), in port order.
    adj_start: Vec<u32>,
    /// The switches with a link to a switch: the others (a GPU server's scale-up switch) reach
    /// no destination through the switches and name no group (their entries stay 0), so
    /// [`Paths::numbered`] passes them by.
    linked: Vec<u32>,
    adj: Vec<SwitchLink>,
    /// Per port: its link in `adj` and the switch owning it (None: a host's port, or a switch's
    /// port to a host, which routing between switches never uses).
    link_of_port: Vec<Option<(u32, u32)>>,
    /// Per destination: its switches (switch indices).
    targets: Vec<Vec<u32>>,
    /// `[destination * switches + switch]`: the cost to the destination (`UNREACHED`: no path) ...
    dist: Vec<u32>,
    /// ... and the switch's group toward it in `interned` + 1 (0: none; on the destination's
    /// switches and where no path reaches it).
    entry: Vec<u32>,
    /// Every group `entry` has named since the last compaction; [`Paths::numbered`] renumbers
    /// them as a search from scratch would.
    interned: Groups,
    /// Per switch: its group in `interned` toward the destination searched last (`NO_GROUP`:
    /// none), tried first for the next (`Groups::id_after`).
    last_group: Vec<u32>,
    members: Vec<PortId>,
    fifo: std::collections::VecDeque<u32>,
    heap: std::collections::BinaryHeap<std::cmp::Reverse<(u32, u32)>>,
    owners: Vec<u32>,
    /// Destinations searched from scratch so far (tests check updates search few).
    #[cfg(test)]
    searched: u64,
}

impl Paths {
    /// Shortest paths toward each destination of `targets` (switch indices) over the fabric
    /// without the links whose egress port is `down`.
    pub fn new(f: &Fabric, is_down: &impl Fn(PortId) -> bool, targets: Vec<Vec<u32>>) -> Self {
        let switches = (f.num_nodes - f.num_hosts) as usize;
        let mut adj_start = vec![0u32];
        let mut adj = Vec::new();
        let mut link_of_port = vec![None; f.num_ports() as usize];
        for s in f.switches() {
            for p in f.ports_of(s) {
                let peer = f.peer_node[p];
                if !f.is_host(peer) {
                    let back = f.peer_port[p];
                    link_of_port[p.index()] = Some((adj.len() as u32, f.switch_index(s) as u32));
                    adj.push(SwitchLink {
                        port: p,
                        peer: f.switch_index(peer) as u32,
                        cost: link_cost(f, p),
                        back_cost: link_cost(f, back),
                        out_up: !is_down(p),
                        back_up: !is_down(back),
                    });
                }
            }
            adj_start.push(adj.len() as u32);
        }
        let n = targets.len() * switches;
        let linked = (0..switches as u32)
            .filter(|&s| adj_start[s as usize + 1] > adj_start[s as usize])
            .collect();
        let mut paths = Self {
            switches,
            unit_costs: f.ports().all(|p| link_cost(f, p) == 1),
            adj_start,
            linked,
            adj,
            link_of_port,
            targets,
            dist: vec![UNREACHED; n],
            entry: vec![0; n],
            interned: Groups::new(),
            last_group: vec![NO_GROUP; switches],
            members: Vec::new(),
            fifo: std::collections::VecDeque::new(),
            heap: std::collections::BinaryHeap::new(),
            owners: Vec::new(),
            #[cfg(test)]
            searched: 0,
        };
        for d in 0..paths.targets.len() {
            paths.search(d);
        }
        paths
    }

    /// The ports in `toggled` went down or came back (as `is_down` now says): bring every
    /// destination's distances and groups up to date.
    pub fn update(&mut self, f: &Fabric, is_down: &impl Fn(PortId) -> bool, toggled: &[PortId]) {
        for &p in toggled {
            if let Some((i, _)) = self.link_of_port[p.index()] {
                self.adj[i as usize].out_up = !is_down(p);
            }
            if let Some((i, _)) = self.link_of_port[f.peer_port[p].index()] {
                self.adj[i as usize].back_up = !is_down(p);
            }
        }
        for d in 0..self.targets.len() {
            if !self.regroup(d, toggled) {
                self.search(d);
            }
        }
    }

    /// After `toggled` changed, work out again the groups toward destination `d` of the switches
    /// owning those links, if its distances still hold; false if they do not (a changed link
    /// makes a path shorter, or takes a switch's last shortest one), and `d` needs a search.
    fn regroup(&mut self, d: usize, toggled: &[PortId]) -> bool {
        let dist = &self.dist[d * self.switches..(d + 1) * self.switches];
        self.owners.clear();
        for &p in toggled {
            let Some((i, s)) = self.link_of_port[p.index()] else {
                continue;
            };
            let l = self.adj[i as usize];
            let (ds, dv) = (dist[s as usize], dist[l.peer as usize]);
            if dv == UNREACHED {
                continue; // no path through the link
            }
            if ds == UNREACHED {
                if l.out_up {
                    return false; // the first path
                }
                continue;
            }
            let via = dv + l.cost;
            if via > ds {
                continue; // on no shortest path, and makes none
            }
            if l.out_up && via < ds {
                return false; // a shorter path
            }
            self.owners.push(s);
        }
        for k in 0..self.owners.len() {
            let s = self.owners[k] as usize;
            let ds = self.dist[d * self.switches + s];
            if self.collect_members(d, s, ds) {
                self.entry[d * self.switches + s] = self.interned.id(&self.members) + 1;
            } else {
                return false; // its last shortest path is gone
            }
        }
        true
    }

    /// The ports of switch `s` on shortest paths toward `d` (cost `ds` from `s`) into
    /// `self.members`; false if there are none.
    fn collect_members(&mut self, d: usize, s: usize, ds: u32) -> bool {
        let dist = &self.dist[d * self.switches..(d + 1) * self.switches];
        self.members.clear();
        let links = self.adj_start[s] as usize..self.adj_start[s + 1] as usize;
        for l in &self.adj[links] {
            let dv = dist[l.peer as usize];
            if l.out_up && dv != UNREACHED && dv + l.cost == ds {
                self.members.push(l.port);
            }
        }
        !self.members.is_empty()
    }

    /// Search destination `d` from scratch: its distances, then every switch's group.
    fn search(&mut self, d: usize) {
        #[cfg(test)]
        {
            self.searched += 1;
        }
        let n = self.switches;
        let dist = &mut self.dist[d * n..(d + 1) * n];
        dist.fill(UNREACHED);
        for &t in &self.targets[d] {
            dist[t as usize] = 0;
        }
        let links =
            |u: u32, start: &[u32]| start[u as usize] as usize..start[u as usize + 1] as usize;
        if self.unit_costs {
            // Breadth first from every target at once: the same costs as Dijkstra's.
            self.fifo.clear();
            self.fifo.extend(self.targets[d].iter().copied());
            while let Some(u) = self.fifo.pop_front() {
                let next = dist[u as usize] + 1;
                for l in &self.adj[links(u, &self.adj_start)] {
                    if l.back_up && dist[l.peer as usize] == UNREACHED {
                        dist[l.peer as usize] = next;
                        self.fifo.push_back(l.peer);
                    }
                }
            }
        } else {
            self.heap.clear();
            self.heap
                .extend(self.targets[d].iter().map(|&t| std::cmp::Reverse((0, t))));
            while let Some(std::cmp::Reverse((du, u))) = self.heap.pop() {
                if du > dist[u as usize] {
                    continue;
                }
                for l in &self.adj[links(u, &self.adj_start)] {
                    // The peer would forward to u over the reverse port.
                    let next = du + l.back_cost;
                    if l.back_up && next < dist[l.peer as usize] {
                        dist[l.peer as usize] = next;
                        self.heap.push(std::cmp::Reverse((next, l.peer)));
                    }
                }
            }
        }
        for s in 0..n {
            let ds = self.dist[d * n + s];
            self.entry[d * n + s] = if ds == 0 || ds == UNREACHED {
                0
            } else {
                // A switch a search reached has a link to one a step nearer (possibly only
                // empty with no live link: then an empty group, as the search found).
                self.collect_members(d, s, ds);
                self.interned
                    .id_after(&self.members, &mut self.last_group[s])
                    + 1
            };
        }
    }

    /// The groups numbered as a search from scratch numbers them (in order of first appearance,
    /// destination by destination, switch by switch), and each (switch, destination)'s group
    /// id + 1 (0: none) into `rows` at `[switch * destinations + destination]`, as route tables
    /// lay them out.
    pub fn numbered(&mut self, rows: &mut Vec<u32>) -> Groups {
        let (n, dests) = (self.switches, self.targets.len());
        let mut renumber = vec![u32::MAX; self.interned.len()];
        let mut out = Groups::new();
        out.start.reserve(self.interned.len());
        out.ports.reserve(self.interned.ports.len());
        rows.resize(n * dests, 0);
        // Numbered along the destinations' columns, written along the switches' rows: through
        // a tile of a few columns, so that neither side strides through memory.
        const TILE: usize = 16;
        // The linked switches' rows only: the others' stay 0 from the first table on.
        let mut tile = vec![0u32; self.linked.len() * TILE];
        for d0 in (0..dests).step_by(TILE) {
            let w = TILE.min(dests - d0);
            for dd in 0..w {
                let column = &self.entry[(d0 + dd) * n..(d0 + dd + 1) * n];
                for (i, &s) in self.linked.iter().enumerate() {
                    let e = column[s as usize];
                    tile[i * TILE + dd] = if e == 0 {
                        0
                    } else {
                        let g = &mut renumber[e as usize - 1];
                        if *g == u32::MAX {
                            *g = out.len() as u32;
                            out.ports.extend_from_slice(self.interned.get(e - 1));
                            out.start.push(out.ports.len() as u32);
                        }
                        *g + 1
                    };
                }
            }
            for (i, &s) in self.linked.iter().enumerate() {
                let (to, from) = (s as usize * dests + d0, i * TILE);
                if w == TILE {
                    // A whole tile row: a fixed-size copy, not a call to memcpy.
                    let to: &mut [u32; TILE] = (&mut rows[to..to + TILE]).try_into().unwrap();
                    *to = tile[from..from + TILE].try_into().unwrap();
                } else {
                    rows[to..to + w].copy_from_slice(&tile[from..from + w]);
                }
            }
        }
        // Groups no switch uses any more accumulate over many faults: past twice the live ones,
        // keep only the live ones (renumbered as above).
        if self.interned.len() > 2 * out.len() + 64 {
            for e in self.entry.iter_mut().filter(|e| **e != 0) {
                *e = renumber[*e as usize - 1] + 1;
            }
            let mut live = Groups::new();
            for g in 0..out.len() as u32 {
                live.id(out.get(g));
            }
            self.interned = live;
            self.last_group.fill(NO_GROUP); // ids of the groups before
        }
        out
    }

    #[cfg(test)]
    pub fn searches(&self) -> u64 {
        self.searched
    }

    /// Bytes held between updates.
    pub fn bytes(&self) -> usize {
        std::mem::size_of_val(&self.dist[..])
            + std::mem::size_of_val(&self.entry[..])
            + std::mem::size_of_val(&self.adj[..])
            + std::mem::size_of_val(&self.link_of_port[..])
            + std::mem::size_of_val(&self.interned.ports[..]) * 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_found_through_the_last_one_has_the_id_a_lookup_gives() {
        let p = PortId::new;
        let mut groups = Groups::new();
        let mut last = NO_GROUP;
        assert_eq!(groups.id_after(&[p(1), p(2)], &mut last), 0);
        assert_eq!(last, 0);
        assert_eq!(
            groups.id_after(&[p(1), p(2)], &mut last),
            0,
            "the last group"
        );
        assert_eq!(groups.id_after(&[p(3)], &mut last), 1);
        assert_eq!(last, 1);
        assert_eq!(
            groups.id_after(&[p(1), p(2)], &mut last),
            0,
            "an earlier group"
        );
        assert_eq!(last, 0);
        // A list that only starts like the last group is a group of its own.
        assert_eq!(groups.id_after(&[p(1)], &mut last), 2);
        assert_eq!(groups.len(), 3);
        assert_eq!(groups.id(&[p(1)]), 2);
    }
}
