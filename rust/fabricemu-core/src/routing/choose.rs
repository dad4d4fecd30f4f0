//! The router's per-packet decision, `Router::choose`: among the shortest paths by the
//! load-balancing scheme (ECMP, spray, flowlet, adaptive), and on dragonflies minimally or via an
//! intermediate group (Valiant, UGAL-L/G, PAR). The router owns what it decides with (tables,
//! hash seeds, flowlet slots, round-robin positions, its random stream, the candidate buffer);
//! the engine lends what it reads of the rest of the world: the fabric, the time and the bytes
//! queued at each egress port ([`PortLoad`]).

use super::{Flowlet, FlowletChoice, Foreseen, RouteTable, Router, FORESEEN};
use crate::config::{LoadBalancing, NonMinimal, NonMinimalMode, Pick};
use crate::ids::PacketId;
use crate::packet::{flags, Packet, PacketKind};
use crate::topology::{Fabric, NodeId, PortId, Tier};
use crate::units::Time;

/// Bytes waiting at an egress port: what adaptive, least-loaded and UGAL choices compare.
pub trait PortLoad {
    fn load(&self, p: PortId) -> u64;
}

/// What routing counts (copied into the run statistics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RouteStats {
    /// Dragonflies: packets sent via an intermediate group, data and control alike.
    pub packets_nonminimal: u64,
    pub data_packets_nonminimal: u64,
    pub control_packets_nonminimal: u64,
    /// Dragonflies: the most global links one packet crossed.
    pub max_global_hops: u64,
}

/// A routing decision: the egress port, and whether the packet should climb one lossless class
/// there (hop classes: a global hop, or PAR's extra local hop in the source group). The engine
/// climbs it if the switch's PFC makes both classes lossless.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Choice {
    pub port: PortId,
    pub climb: bool,
}

impl Router {
    /// The egress port of switch `node` for packet `p` (arrived over `p.ingress`) at `now`, or
    /// None if every candidate is known to be down. Dragonfly routing records its decision in
    /// the packet (`via`, `ghops`, the `DECIDED` flag; `CLASS_UP` cleared).
    #[inline]
    pub fn choose<L: PortLoad + ?Sized>(
        &mut self,
        node: NodeId,
        p: &mut Packet,
        now: Time,
        fabric: &Fabric,
        loads: &L,
    ) -> Option<Choice> {
        if self.dragonfly {
            self.choose_dragonfly(node, p, now, fabric, loads)
        } else {
            let port = self.choose_minimal(node, p.dst, p.header_key, now, fabric, loads)?;
            Some(Choice { port, climb: false })
        }
    }

    /// Work out ahead the port `choose` will pick at switch `node` for packet `pkt` (to `dst`,
    /// header `key`) where that is a function of the packet and the table alone: one live path,
    /// or ECMP hashing off a dragonfly. Remembered for [`Router::foreseen`], which `choose`'s
    /// caller asks first; None (and nothing remembered) where the choice reads load, time or
    /// draws.
    #[inline(always)]
    pub fn predict(
        &mut self,
        pkt: PacketId,
        node: NodeId,
        dst: NodeId,
        key: u64,
    ) -> Option<PortId> {
        if self.dragonfly {
            return None;
        }
        let port = self.fixed_choice(node, key, self.table.group(node, dst).as_slice())??;
        self.foreseen[pkt.index() % FORESEEN] = Foreseen {
            pkt,
            node,
            dst,
            port,
            key,
        };
        Some(port)
    }

    /// The port `predict` worked out for `pkt` at `node`, if it did so for these header fields
    /// since the table last changed: what `choose` would pick (it only hashes or has one path).
    #[inline(always)]
    pub fn foreseen(&self, pkt: PacketId, node: NodeId, dst: NodeId, key: u64) -> Option<PortId> {
        let f = &self.foreseen[pkt.index() % FORESEEN];
        (f.pkt == pkt && f.node == node && f.dst == dst && f.key == key).then_some(f.port)
    }

    /// The member of `group` (switch `node`'s shortest paths) that the packet with header `key`
    /// takes whatever the time and the load: `Some(None)` without a live path, the only path, or
    /// the ECMP hash's; None where the load-balancing scheme chooses. `choose_minimal` and
    /// `predict` share it, so a route worked out ahead is the one chosen.
    #[inline(always)]
    fn fixed_choice(&self, node: NodeId, key: u64, group: &[PortId]) -> Option<Option<PortId>> {
        match group.len() {
            0 => Some(None), // no live path
            1 => Some(Some(group[0])),
            n if self.mode == LoadBalancing::Ecmp => {
                Some(Some(group[self.ecmp_index(node, key, n)]))
            }
            _ => None,
        }
    }

    /// Among the shortest paths to `dst`, by the load-balancing scheme.
    #[inline]
    fn choose_minimal<L: PortLoad + ?Sized>(
        &mut self,
        node: NodeId,
        dst: NodeId,
        key: u64,
        now: Time,
        fabric: &Fabric,
        loads: &L,
    ) -> Option<PortId> {
        let ports = self.table.group(node, dst);
        let (group, gid) = (ports.as_slice(), ports.id());
        if let Some(fixed) = self.fixed_choice(node, key, group) {
            return fixed;
        }
        self.scratch.clear();
        self.scratch.extend_from_slice(group);
        let n = self.scratch.len();
        Some(match self.mode {
            LoadBalancing::Ecmp | LoadBalancing::NonMinimal(_) => {
                self.scratch[self.ecmp_index(node, key, n)]
            }
            LoadBalancing::Spray(pick) => self.pick(node, pick, gid, loads),
            LoadBalancing::Flowlet { gap_ps, pick } => {
                let slot = self.flowlet_slot(node, fabric.num_hosts, key);
                let entry = *self.flowlet(slot);
                let kept = entry
                    .port()
                    .filter(|p| now - entry.last <= gap_ps && self.scratch.contains(p));
                let port = match kept {
                    Some(p) => p,
                    None => self.pick(node, pick, gid, loads),
                };
                *self.flowlet(slot) = Flowlet {
                    last: now,
                    choice: FlowletChoice::Port(port),
                };
                port
            }
            LoadBalancing::Adaptive {
                per_packet,
                gap_ps,
                bias_bytes,
            } => {
                let slot = self.flowlet_slot(node, fabric.num_hosts, key);
                let entry = *self.flowlet(slot);
                let prev = entry.port().filter(|p| self.scratch.contains(p));
                let port = match prev {
                    Some(prev) if !per_packet && now - entry.last <= gap_ps => prev,
                    _ => {
                        let best = self.pick(node, Pick::LeastLoaded, gid, loads);
                        match prev {
                            Some(prev) if loads.load(prev) <= loads.load(best) + bias_bytes => prev,
                            _ => best,
                        }
                    }
                };
                *self.flowlet(slot) = Flowlet {
                    last: now,
                    choice: FlowletChoice::Port(port),
                };
                port
            }
        })
    }

    /// Dragonfly forwarding: minimal, or via an intermediate group chosen at the source router
    /// (Valiant, UGAL) or at any router of the source group (PAR); then the hop classes.
    fn choose_dragonfly<L: PortLoad + ?Sized>(
        &mut self,
        node: NodeId,
        p: &mut Packet,
        now: Time,
        fabric: &Fabric,
        loads: &L,
    ) -> Option<Choice> {
        // Every router is in a dragonfly group, and every host in its router's (only scale-up
        // switches are in none, and they do not forward by the route table).
        let here = self.table.df_group(node)?;
        let mut via = p.via_group();
        if via.is_some_and(|g| here == g as u32) {
            via = None; // reached the intermediate group: minimal from here on
        }
        let mut diverted_late = false;
        if let LoadBalancing::NonMinimal(nm) = self.mode {
            let dst_group = self.table.df_group(p.dst)?;
            // Still undecided in the source group (no global hop yet), bound elsewhere, and
            // there is a third group to go through.
            if via.is_none()
                && p.ghops == 0
                && here != dst_group
                && p.flags & flags::DECIDED == 0
                && self.table.num_df_groups() >= 3
            {
                let at_source = fabric.is_host(fabric.port_node[p.ingress]);
                let decides = at_source || nm.mode == NonMinimalMode::Par;
                // Per flowlet: the flow keeps its last choice while its packets stay close.
                let slot = (nm.per_flowlet && decides)
                    .then(|| self.flowlet_slot(node, fabric.num_hosts, p.header_key));
                let kept = slot.and_then(|s| {
                    let entry = *self.flowlet(s);
                    entry.via().filter(|_| now - entry.last <= nm.gap_ps)
                });
                via = match (kept, nm.mode) {
                    (Some(v), _) => v,
                    (None, NonMinimalMode::Valiant) => {
                        Some(self.random_group(node, here, dst_group))
                    }
                    (None, _) if decides => self.ugal(node, p, nm, here, dst_group, fabric, loads),
                    _ => None,
                };
                if let Some(s) = slot {
                    *self.flowlet(s) = Flowlet {
                        last: now,
                        choice: FlowletChoice::Via(via),
                    };
                }
                if via.is_some() {
                    self.stats.packets_nonminimal += 1;
                    if p.kind == PacketKind::Data {
                        self.stats.data_packets_nonminimal += 1;
                    } else {
                        self.stats.control_packets_nonminimal += 1;
                    }
                    diverted_late = !at_source;
                }
                if nm.mode != NonMinimalMode::Par {
                    p.flags |= flags::DECIDED;
                }
            }
        }
        let out = match via {
            None => self.choose_minimal(node, p.dst, p.header_key, now, fabric, loads)?,
            // None: the intermediate group is cut off.
            Some(_) => self.ecmp_toward(node, via, p.dst, p.header_key)?,
        };
        let global = fabric.tier[out] == Tier::Global;
        p.set_via_group(via);
        p.flags &= !flags::CLASS_UP;
        if global {
            p.ghops = p.ghops.saturating_add(1);
            self.stats.max_global_hops = self.stats.max_global_hops.max(p.ghops as u64);
        }
        Some(Choice {
            port: out,
            climb: self.hop_classes && (global || diverted_late),
        })
    }

    /// A uniformly random dragonfly group other than `a` and `b`, drawn by switch `node`.
    fn random_group(&mut self, node: NodeId, a: u32, b: u32) -> u16 {
        let (lo, hi) = if a < b { (a, b) } else { (b, a) };
        let mut g = self.rng[node].below(self.table.num_df_groups() as u64 - 2) as u32;
        if g >= lo {
            g += 1;
        }
        if g >= hi {
            g += 1;
        }
        g as u16
    }

    /// UGAL: the intermediate group to route through, or None for the minimal path. Local
    /// (UGAL-L, PAR): queue at this router's first egress x hops; global (UGAL-G): the bytes
    /// queued along the whole path plus one packet per hop, as a delay estimate.
    #[allow(clippy::too_many_arguments)]
    fn ugal<L: PortLoad + ?Sized>(
        &mut self,
        node: NodeId,
        p: &Packet,
        nm: NonMinimal,
        here: u32,
        dst_g: u32,
        fabric: &Fabric,
        loads: &L,
    ) -> Option<u16> {
        let global = nm.mode == NonMinimalMode::UgalG;
        let cost = |r: &Router, via: Option<u16>| -> u64 {
            match r.walk(node, via, p.dst, p.header_key, fabric, loads, global) {
                None => u64::MAX / 4, // cut off
                Some((hops, _, path_q)) if global => path_q + hops as u64 * p.wire_bytes as u64,
                Some((hops, first_q, _)) => first_q * hops as u64,
            }
        };
        let min_cost = cost(self, None);
        let mut best = (u64::MAX, None);
        for _ in 0..nm.candidates {
            let g = Some(self.random_group(node, here, dst_g));
            let c = cost(self, g);
            if c < best.0 {
                best = (c, g);
            }
        }
        if min_cost <= best.0.saturating_add(nm.threshold_bytes) {
            None
        } else {
            best.1
        }
    }

    /// Follow the path a packet would take from switch `node` (via group `via`, or minimally)
    /// to host `dst`, picking as ECMP would: (links, bytes queued at the first egress, bytes
    /// queued along the path, or 0 unless `along`); None when it is cut off. UGAL-L needs only
    /// the first egress's queue: reading the others' would be a cache miss per hop of every
    /// candidate path (on the 1,056-host dragonfly, 4 % of the run).
    #[allow(clippy::too_many_arguments)]
    fn walk<L: PortLoad + ?Sized>(
        &self,
        node: NodeId,
        via: Option<u16>,
        dst: NodeId,
        key: u64,
        fabric: &Fabric,
        loads: &L,
        along: bool,
    ) -> Option<(u32, u64, u64)> {
        let mut via = via;
        let (mut n, mut hops, mut first, mut total) = (node, 0u32, 0u64, 0u64);
        while hops < 16 {
            if via.is_some_and(|g| self.table.df_group(n) == Some(g as u32)) {
                via = None;
            }
            let Some(out) = self.ecmp_toward(n, via, dst, key) else {
                break;
            };
            if hops == 0 {
                first = loads.load(out);
                total = first;
            } else if along {
                total += loads.load(out);
            }
            hops += 1;
            n = fabric.peer_node[out];
            if fabric.is_host(n) {
                return Some((hops, first, total));
            }
        }
        None
    }

    /// The port ECMP hashes `key` to at switch `node`, toward group `via` or (None) host `dst`;
    /// None when no live path leads there.
    #[inline]
    fn ecmp_toward(&self, node: NodeId, via: Option<u16>, dst: NodeId, key: u64) -> Option<PortId> {
        let direct;
        let ports = match via {
            None => {
                direct = self.table.group(node, dst);
                direct.as_slice()
            }
            Some(g) => self.table.toward_group(node, g as u32),
        };
        (!ports.is_empty()).then(|| ports[self.ecmp_index(node, key, ports.len())])
    }

    /// Pick among the candidates in `self.scratch` (non-empty), at switch `node`.
    fn pick<L: PortLoad + ?Sized>(
        &mut self,
        node: NodeId,
        pick: Pick,
        group: Option<u32>,
        loads: &L,
    ) -> PortId {
        let n = self.scratch.len();
        match pick {
            Pick::Random => self.scratch[self.rng[node].below(n as u64) as usize],
            Pick::RoundRobin => {
                let g = group.expect("round robin over a group") as usize;
                let i = self.rr[g] as usize % n;
                self.rr[g] = self.rr[g].wrapping_add(1);
                self.scratch[i]
            }
            Pick::LeastLoaded => {
                // Start at a random member so ties (often all empty) spread evenly.
                let start = self.rng[node].below(n as u64) as usize;
                let mut best = self.scratch[start];
                let mut best_load = loads.load(best);
                for k in 1..n {
                    let p = self.scratch[(start + k) % n];
                    let l = loads.load(p);
                    if l < best_load {
                        best = p;
                        best_load = l;
                    }
                }
                best
            }
        }
    }

    /// The port ECMP would pick in `table` (the current one or another, such as the fault-free
    /// `nominal`), ignoring load, for a packet to `dst` with header `key` at switch `node`; None
    /// if the table has no path there.
    pub fn ecmp_port(
        &self,
        table: &RouteTable,
        node: NodeId,
        dst: NodeId,
        key: u64,
    ) -> Option<PortId> {
        let group = table.group(node, dst);
        let group = group.as_slice();
        (!group.is_empty()).then(|| group[self.ecmp_index(node, key, group.len())])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{HashFunction, RoutingSpec};
    use crate::ids::{FlowId, IdVec};

    /// Queue depths set by the test, per port.
    struct Loads(IdVec<PortId, u64>);

    impl PortLoad for Loads {
        fn load(&self, p: PortId) -> u64 {
            self.0[p]
        }
    }

    /// A leaf-spine (2 leaves, 4 spines, 2 hosts per leaf), a router with `lb` on it, the leaf
    /// of host 0 and a packet from host 0 to a host on the other leaf.
    fn setup(lb: LoadBalancing) -> (Fabric, Router, NodeId, Packet) {
        let (_, scenario) = crate::scenario::parse_toml(
            "[topology]\nkind = \"leaf_spine\"\nleaves = 2\nspines = 4\nhosts_per_leaf = 2\n[[workload]]\nkind = \"permutation\"\nsize = \"1MB\"",
            "",
        )
        .unwrap();
        let fabric = crate::topology::build(&scenario.topology, &scenario.switch);
        let spec = RoutingSpec {
            load_balancing: lb,
            hash_fields: 31,
            hash: HashFunction::Mix,
            per_switch_seed: true,
            flowlet_table: 64,
            hop_classes: false,
        };
        let router = Router::new(&fabric, &spec, 7);
        let host0 = NodeId::new(0);
        let leaf = fabric.peer_node[fabric.host_port(host0)];
        let dst = fabric
            .hosts()
            .find(|&h| fabric.peer_node[fabric.host_port(h)] != leaf)
            .unwrap();
        let mut pkt = Packet::data(FlowId::new(0), 0, dst, 12345, 1000, 3, false);
        pkt.ingress = fabric.host_port(host0);
        (fabric, router, leaf, pkt)
    }

    #[test]
    fn least_loaded_spray_takes_the_emptiest_uplink_the_loads_lend() {
        let (fabric, mut router, leaf, mut pkt) = setup(LoadBalancing::Spray(Pick::LeastLoaded));
        let group = router.table().group(leaf, pkt.dst).as_slice().to_vec();
        assert_eq!(group.len(), 4);
        for &light in &group {
            let mut loads = Loads(IdVec::from_elem(5000, fabric.num_ports() as usize));
            loads.0[light] = 100;
            for t in 0..20 {
                let c = router
                    .choose(leaf, &mut pkt, t * 1000, &fabric, &loads)
                    .unwrap();
                assert_eq!(
                    c,
                    Choice {
                        port: light,
                        climb: false
                    }
                );
            }
        }
    }

    #[test]
    fn adaptive_keeps_its_port_within_the_bias_and_leaves_it_beyond() {
        let lb = LoadBalancing::Adaptive {
            per_packet: true,
            gap_ps: 0,
            bias_bytes: 1000,
        };
        let (fabric, mut router, leaf, mut pkt) = setup(lb);
        let group = router.table().group(leaf, pkt.dst).as_slice().to_vec();
        let mut loads = Loads(IdVec::from_elem(10_000, fabric.num_ports() as usize));
        loads.0[group[1]] = 0;
        let first = router.choose(leaf, &mut pkt, 0, &fabric, &loads).unwrap();
        assert_eq!(first.port, group[1]);
        // Another port is now lighter, but by less than the bias: the flow stays.
        loads.0[group[1]] = 900;
        loads.0[group[2]] = 0;
        let kept = router.choose(leaf, &mut pkt, 10, &fabric, &loads).unwrap();
        assert_eq!(kept.port, group[1]);
        // Beyond the bias it moves.
        loads.0[group[1]] = 1001;
        let moved = router.choose(leaf, &mut pkt, 20, &fabric, &loads).unwrap();
        assert_eq!(moved.port, group[2]);
    }

    #[test]
    fn ecmp_ignores_the_loads_and_matches_ecmp_port() {
        let (fabric, mut router, leaf, mut pkt) = setup(LoadBalancing::Ecmp);
        let hashed = router
            .ecmp_port(router.table(), leaf, pkt.dst, pkt.header_key)
            .unwrap();
        for heavy in [0u64, 1 << 30] {
            let mut loads = Loads(IdVec::from_elem(0, fabric.num_ports() as usize));
            loads.0[hashed] = heavy;
            let c = router.choose(leaf, &mut pkt, 0, &fabric, &loads).unwrap();
            assert_eq!(c.port, hashed);
        }
        assert_eq!(router.stats, RouteStats::default());
    }

    #[test]
    fn a_route_worked_out_ahead_is_what_choose_picks_until_the_table_changes() {
        let (fabric, mut router, leaf, mut pkt) = setup(LoadBalancing::Ecmp);
        let loads = Loads(IdVec::from_elem(0, fabric.num_ports() as usize));
        let id = PacketId::new(70);
        let mut spread = std::collections::HashSet::new();
        for key in 0..64u64 {
            pkt.header_key = key * 0x9E37_79B9;
            let ahead = router.predict(id, leaf, pkt.dst, pkt.header_key).unwrap();
            assert_eq!(
                router.foreseen(id, leaf, pkt.dst, pkt.header_key),
                Some(ahead)
            );
            let chosen = router.choose(leaf, &mut pkt, 0, &fabric, &loads).unwrap();
            assert_eq!(chosen.port, ahead);
            spread.insert(ahead);
            // Another packet in the slot, another switch or header: not this prediction.
            assert_eq!(
                router.foreseen(PacketId::new(70 + 64), leaf, pkt.dst, pkt.header_key),
                None
            );
            assert_eq!(router.foreseen(id, leaf, pkt.dst, pkt.header_key ^ 1), None);
        }
        assert_eq!(spread.len(), 4, "the keys hash over every uplink");
        // A new table forgets what was worked out from the old one.
        let table = router.table().clone();
        router.replace_table(table);
        assert_eq!(router.foreseen(id, leaf, pkt.dst, pkt.header_key), None);
        // Spraying reads state: nothing is worked out ahead where there is a choice.
        let (_, mut spray, leaf, pkt) = setup(LoadBalancing::Spray(Pick::Random));
        assert_eq!(spray.predict(id, leaf, pkt.dst, pkt.header_key), None);
    }
}
