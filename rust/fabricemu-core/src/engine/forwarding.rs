//! Forwarding decisions at switches: the load-balancing schemes, which need queue depths and time,
//! and dragonfly non-minimal routing.

use super::world::World;
use crate::packet::{flags, Packet, PacketId, PacketKind, NO_VIA};
use crate::routing::{Flowlet, FlowletChoice, RouteTable};
use crate::scenario::{LoadBalancing, NonMinimal, NonMinimalMode, Pick};
use crate::topology::{NodeId, PortId, Tier};

impl World {
    /// The egress port of switch `node` for `pkt`, or None if every candidate is known to be down.
    #[inline]
    pub(super) fn route(&mut self, node: NodeId, pkt: PacketId) -> Option<PortId> {
        if self.router.dragonfly {
            self.route_dragonfly(node, pkt)
        } else {
            self.route_minimal(node, pkt)
        }
    }

    /// Among the shortest paths to the packet's destination, by the load-balancing scheme.
    #[inline]
    fn route_minimal(&mut self, node: NodeId, pkt: PacketId) -> Option<PortId> {
        let &Packet {
            dst,
            header_key: key,
            ..
        } = self.packets.get(pkt);
        let group = self.router.table.group(node, dst);
        match group.len() {
            0 => return None, // no live path
            1 => return Some(group[0]),
            n if self.router.mode == LoadBalancing::Ecmp => {
                return Some(group[self.router.ecmp_index(node, key, n)]);
            }
            _ => {}
        }
        self.scratch.clear();
        self.scratch.extend_from_slice(group);
        let n = self.scratch.len();
        let gid = self.router.table.group_id(node, dst);
        Some(match self.router.mode {
            LoadBalancing::Ecmp | LoadBalancing::NonMinimal(_) => {
                self.scratch[self.router.ecmp_index(node, key, n)]
            }
            LoadBalancing::Spray(pick) => self.pick(pick, gid),
            LoadBalancing::Flowlet { gap_ps, pick } => {
                let slot = self.router.flowlet_slot(node, self.fabric.num_hosts, key);
                let entry = *self.router.flowlet(slot);
                let kept = entry
                    .port()
                    .filter(|p| self.now - entry.last <= gap_ps && self.scratch.contains(p));
                let port = match kept {
                    Some(p) => p,
                    None => self.pick(pick, gid),
                };
                *self.router.flowlet(slot) = Flowlet {
                    last: self.now,
                    choice: FlowletChoice::Port(port),
                };
                port
            }
            LoadBalancing::Adaptive {
                per_packet,
                gap_ps,
                bias_bytes,
            } => {
                let slot = self.router.flowlet_slot(node, self.fabric.num_hosts, key);
                let entry = *self.router.flowlet(slot);
                let prev = entry.port().filter(|p| self.scratch.contains(p));
                let port = match prev {
                    Some(prev) if !per_packet && self.now - entry.last <= gap_ps => prev,
                    _ => {
                        let best = self.pick(Pick::LeastLoaded, gid);
                        match prev {
                            Some(prev) if self.load(prev) <= self.load(best) + bias_bytes => prev,
                            _ => best,
                        }
                    }
                };
                *self.router.flowlet(slot) = Flowlet {
                    last: self.now,
                    choice: FlowletChoice::Port(port),
                };
                port
            }
        })
    }

    /// Dragonfly forwarding: minimal, or via an intermediate group chosen at the source router
    /// (Valiant, UGAL) or at any router of the source group (PAR); then the hop classes.
    fn route_dragonfly(&mut self, node: NodeId, pkt: PacketId) -> Option<PortId> {
        let p = *self.packets.get(pkt);
        let table = &self.router.table;
        let here = table.df_group(node);
        let mut via = p.via;
        if via != NO_VIA && here == via as u32 {
            via = NO_VIA; // reached the intermediate group: minimal from here on
        }
        let mut diverted_late = false;
        if let LoadBalancing::NonMinimal(nm) = self.router.mode {
            let dst_group = table.df_group(p.dst);
            // Still undecided in the source group (no global hop yet), bound elsewhere, and
            // there is a third group to go through.
            if via == NO_VIA
                && p.ghops == 0
                && here != dst_group
                && p.flags & flags::DECIDED == 0
                && table.num_df_groups() >= 3
            {
                let at_source = self.ports[p.ingress].from_host;
                let decides = at_source || nm.mode == NonMinimalMode::Par;
                // Per flowlet: the flow keeps its last choice while its packets stay close.
                let slot = (nm.per_flowlet && decides).then(|| {
                    self.router
                        .flowlet_slot(node, self.fabric.num_hosts, p.header_key)
                });
                let kept = slot.and_then(|s| {
                    let entry = *self.router.flowlet(s);
                    entry.via().filter(|_| self.now - entry.last <= nm.gap_ps)
                });
                via = match (kept, nm.mode) {
                    (Some(v), _) => v,
                    (None, NonMinimalMode::Valiant) => self.random_group(here, dst_group),
                    (None, _) if decides => self.ugal(node, &p, nm, here, dst_group),
                    _ => NO_VIA,
                };
                if let Some(s) = slot {
                    *self.router.flowlet(s) = Flowlet {
                        last: self.now,
                        choice: FlowletChoice::Via(via),
                    };
                }
                if via != NO_VIA {
                    self.stats.packets_nonminimal += 1;
                    if p.kind == PacketKind::Data {
                        self.stats.data_packets_nonminimal += 1;
                    } else {
                        self.stats.control_packets_nonminimal += 1;
                    }
                    diverted_late = !at_source;
                }
                if nm.mode != NonMinimalMode::Par {
                    self.packets.get_mut(pkt).flags |= flags::DECIDED;
                }
            }
        }
        let out = if via == NO_VIA {
            self.route_minimal(node, pkt)?
        } else {
            // None: the intermediate group is cut off.
            self.ecmp_toward(node, via, p.dst, p.header_key)?
        };
        let global = self.fabric.tier[out] == Tier::Global;
        let pk = self.packets.get_mut(pkt);
        pk.via = via;
        pk.flags &= !flags::CLASS_UP;
        if global {
            pk.ghops = pk.ghops.saturating_add(1);
            self.stats.max_global_hops = self.stats.max_global_hops.max(pk.ghops as u64);
        }
        // Hop classes: up one lossless class per global hop, and when PAR diverts a packet over
        // a local link (its extra hop inside the source group), so no cycle of pauses can close
        // within a class. Never past the classes validation made lossless.
        if self.router.hop_classes
            && (global || diverted_late)
            && pk.priority < 7
            && self
                .switches
                .pfc
                .as_ref()
                .is_some_and(|pfc| pfc.is_lossless(pk.priority) && pfc.is_lossless(pk.priority + 1))
        {
            pk.priority += 1;
            pk.flags |= flags::CLASS_UP;
        }
        Some(out)
    }

    /// A uniformly random dragonfly group other than `a` and `b`.
    fn random_group(&mut self, a: u32, b: u32) -> u16 {
        let (lo, hi) = if a < b { (a, b) } else { (b, a) };
        let mut g = self
            .router
            .rng
            .below(self.router.table.num_df_groups() as u64 - 2) as u32;
        if g >= lo {
            g += 1;
        }
        if g >= hi {
            g += 1;
        }
        g as u16
    }

    /// UGAL: the intermediate group to route through, or `NO_VIA` for the minimal path. Local
    /// (UGAL-L, PAR): queue at this router's first egress x hops; global (UGAL-G): the bytes
    /// queued along the whole path plus one packet per hop, as a delay estimate.
    fn ugal(&mut self, node: NodeId, p: &Packet, nm: NonMinimal, here: u32, dst_g: u32) -> u16 {
        let global = nm.mode == NonMinimalMode::UgalG;
        let cost = |w: &World, via: u16| -> u64 {
            let (hops, first_q, path_q) = w.walk(node, via, p.dst, p.header_key);
            if hops == u32::MAX {
                u64::MAX / 4
            } else if global {
                path_q + hops as u64 * p.wire_bytes as u64
            } else {
                first_q * hops as u64
            }
        };
        let min_cost = cost(self, NO_VIA);
        let mut best = (u64::MAX, NO_VIA);
        for _ in 0..nm.candidates {
            let g = self.random_group(here, dst_g);
            let c = cost(self, g);
            if c < best.0 {
                best = (c, g);
            }
        }
        if min_cost <= best.0.saturating_add(nm.threshold_bytes) {
            NO_VIA
        } else {
            best.1
        }
    }

    /// Follow the path a packet would take from switch `node` (via group `via`, or minimally)
    /// to host `dst`, picking as ECMP would: (links, bytes queued at the first egress, bytes
    /// queued along the path); `u32::MAX` links when it is cut off.
    fn walk(&self, node: NodeId, via: u16, dst: NodeId, key: u64) -> (u32, u64, u64) {
        let table = &self.router.table;
        let mut via = via;
        let (mut n, mut hops, mut first, mut total) = (node, 0u32, 0u64, 0u64);
        while hops < 16 {
            if via != NO_VIA && table.df_group(n) == via as u32 {
                via = NO_VIA;
            }
            let Some(out) = self.ecmp_toward(n, via, dst, key) else {
                break;
            };
            let q = self.load(out);
            if hops == 0 {
                first = q;
            }
            total += q;
            hops += 1;
            n = self.fabric.peer_node[out];
            if self.fabric.is_host(n) {
                return (hops, first, total);
            }
        }
        (u32::MAX, first, total)
    }

    /// The port ECMP hashes `key` to at switch `node`, toward group `via` or (`NO_VIA`) host
    /// `dst`; None when no live path leads there.
    #[inline]
    fn ecmp_toward(&self, node: NodeId, via: u16, dst: NodeId, key: u64) -> Option<PortId> {
        let table = &self.router.table;
        let ports = if via == NO_VIA {
            table.group(node, dst)
        } else {
            table.toward_group(node, via as u32)
        };
        (!ports.is_empty()).then(|| ports[self.router.ecmp_index(node, key, ports.len())])
    }

    /// Bytes waiting at egress port `p`.
    #[inline]
    fn load(&self, p: PortId) -> u64 {
        self.queues[p].bytes
    }

    /// Pick among `self.scratch` (non-empty).
    fn pick(&mut self, pick: Pick, group: Option<u32>) -> PortId {
        let n = self.scratch.len();
        match pick {
            Pick::Random => self.scratch[self.router.rng.below(n as u64) as usize],
            Pick::RoundRobin => {
                let g = group.expect("round robin over a group") as usize;
                let i = self.router.rr[g] as usize % n;
                self.router.rr[g] = self.router.rr[g].wrapping_add(1);
                self.scratch[i]
            }
            Pick::LeastLoaded => {
                // Start at a random member so ties (often all empty) spread evenly.
                let start = self.router.rng.below(n as u64) as usize;
                let mut best = self.scratch[start];
                let mut best_load = self.load(best);
                for k in 1..n {
                    let p = self.scratch[(start + k) % n];
                    let l = self.load(p);
                    if l < best_load {
                        best = p;
                        best_load = l;
                    }
                }
                best
            }
        }
    }

    /// The port ECMP would pick in `table`, ignoring load (for a flow's nominal path); None if
    /// the table has no path to the packet's destination.
    pub(super) fn ecmp_port(
        &self,
        table: &RouteTable,
        node: NodeId,
        pkt: &Packet,
    ) -> Option<PortId> {
        let group = table.group(node, pkt.dst);
        (!group.is_empty())
            .then(|| group[self.router.ecmp_index(node, pkt.header_key, group.len())])
    }
}
