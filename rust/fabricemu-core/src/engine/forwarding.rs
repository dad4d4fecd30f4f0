//! Forwarding decisions at switches (the load-balancing schemes, which need queue depths and time)
//! and link faults (a link goes down or slows down, switches notice after a detection delay).

use super::queue::Event;
use super::world::World;
use crate::packet::{Packet, PacketId, PacketKind};
use crate::routing::RouteTable;
use crate::scenario::{FaultKind, FaultSpec, LoadBalancing, NodeName, Pick, ScenarioError};
use crate::topology::{Fabric, NodeId, PortId};
use crate::transport::NEVER;

/// A fault resolved against the fabric: the two directed ports of its link.
#[derive(Debug, Clone)]
pub(super) struct Fault {
    pub ports: [PortId; 2],
    pub kind: FaultKind,
    /// Rates before a degradation.
    pub saved_rates: [u64; 2],
}

/// Resolve `[[fault]]` entries: node names to ids, ends to a link.
pub(super) fn resolve_faults(
    fabric: &Fabric,
    specs: &[FaultSpec],
) -> Result<Vec<Fault>, ScenarioError> {
    let mut out = Vec::with_capacity(specs.len());
    for (i, f) in specs.iter().enumerate() {
        let mut ends = [0u32; 2];
        for (j, name) in f.ends.iter().enumerate() {
            let path = format!("fault.{i}.link.{j}");
            ends[j] = match name {
                NodeName::Id(id) if *id < fabric.num_nodes => *id,
                NodeName::Id(id) => {
                    return Err(ScenarioError::at(
                        path,
                        format!(
                            "node {id} does not exist: the fabric has nodes 0..={}",
                            fabric.num_nodes - 1
                        ),
                    ))
                }
                NodeName::Role { role, index } => {
                    let found = fabric
                        .role
                        .iter()
                        .enumerate()
                        .filter(|(_, r)| **r == role.as_str())
                        .nth(*index as usize)
                        .map(|(n, _)| n as u32);
                    match found {
                        Some(n) => n,
                        None => {
                            let count = fabric.role.iter().filter(|r| **r == role.as_str()).count();
                            let mut roles: Vec<&str> = fabric.role.to_vec();
                            roles.dedup();
                            return Err(ScenarioError::at(
                                path,
                                if count == 0 {
                                    format!(
                                        "no node has role {role:?}; this fabric has {}",
                                        roles.join(", ")
                                    )
                                } else {
                                    format!("{role}:{index} does not exist: there are {count} ({role}:0..={})", count - 1)
                                },
                            ));
                        }
                    }
                }
            };
        }
        let port = fabric
            .ports_of(ends[0])
            .find(|&p| fabric.peer_node[p as usize] == ends[1]);
        let Some(p) = port else {
            return Err(ScenarioError::at(
                format!("fault.{i}.link"),
                format!("nodes {} and {} are not linked", ends[0], ends[1]),
            ));
        };
        let q = fabric.peer_port[p as usize];
        out.push(Fault {
            ports: [p, q],
            kind: f.kind,
            saved_rates: [fabric.rate_bps[p as usize], fabric.rate_bps[q as usize]],
        });
    }
    Ok(out)
}

impl World {
    /// The egress port of switch `node` for `pkt`, or None if every candidate is known to be down.
    #[inline]
    pub(super) fn route(&mut self, node: NodeId, pkt: PacketId) -> Option<PortId> {
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
            LoadBalancing::Ecmp => self.scratch[self.router.ecmp_index(node, key, n)],
            LoadBalancing::Spray(pick) => self.pick(pick, gid),
            LoadBalancing::Flowlet { gap_ps, pick } => {
                let slot = self.router.flowlet_slot(node, self.fabric.num_hosts, key);
                let (last, port) = *self.router.flowlet(slot);
                let keep =
                    last != NEVER && self.now - last <= gap_ps && self.scratch.contains(&port);
                let port = if keep { port } else { self.pick(pick, gid) };
                *self.router.flowlet(slot) = (self.now, port);
                port
            }
            LoadBalancing::Adaptive {
                per_packet,
                gap_ps,
                bias_bytes,
            } => {
                let slot = self.router.flowlet_slot(node, self.fabric.num_hosts, key);
                let (last, prev) = *self.router.flowlet(slot);
                let have_prev = last != NEVER && self.scratch.contains(&prev);
                let port = if have_prev && !per_packet && self.now - last <= gap_ps {
                    prev
                } else {
                    let best = self.pick(Pick::LeastLoaded, gid);
                    if have_prev && self.load(prev) <= self.load(best) + bias_bytes {
                        prev
                    } else {
                        best
                    }
                };
                *self.router.flowlet(slot) = (self.now, port);
                port
            }
        })
    }

    /// Bytes waiting at egress port `p`.
    #[inline]
    fn load(&self, p: PortId) -> u64 {
        self.queues[p as usize].bytes
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

    /// The port ECMP would pick, ignoring load and faults (for a flow's nominal path).
    pub(super) fn ecmp_port(&self, node: NodeId, pkt: &Packet) -> PortId {
        let group = self.router.table.group(node, pkt.dst);
        group[self.router.ecmp_index(node, pkt.header_key, group.len())]
    }

    // ---- faults ------------------------------------------------------------------------------

    /// Schedule every fault's start, end and detection.
    pub(super) fn schedule_faults(&mut self, specs: &[FaultSpec]) {
        for (i, f) in specs.iter().enumerate() {
            let i = i as u32;
            self.events.push(f.at_ps, Event::FaultStart(i));
            if matches!(f.kind, FaultKind::Down) {
                self.events
                    .push(f.at_ps + f.detection_ps, Event::FaultDetected(i));
            }
            if let Some(u) = f.until_ps {
                self.events.push(u, Event::FaultEnd(i));
                if matches!(f.kind, FaultKind::Down) {
                    self.events
                        .push(u + f.detection_ps, Event::FaultDetected(i));
                }
            }
        }
    }

    pub(super) fn fault_start(&mut self, i: u32) {
        let f = self.faults[i as usize].clone();
        for &p in &f.ports {
            match f.kind {
                FaultKind::Down => self.link_down(p),
                FaultKind::Degrade { rate_bps } => self.set_rate(p, rate_bps),
            }
        }
    }

    pub(super) fn fault_end(&mut self, i: u32) {
        let f = self.faults[i as usize].clone();
        for (k, &p) in f.ports.iter().enumerate() {
            match f.kind {
                FaultKind::Down => {
                    self.ports[p as usize].down = false;
                    self.kick(p);
                }
                FaultKind::Degrade { .. } => self.set_rate(p, f.saved_rates[k]),
            }
        }
    }

    /// Routing learns the link's current state: routes are recomputed around the links known to be
    /// down (as a routing protocol converges: a spine that lost its link to a leaf stops being a
    /// next hop toward that leaf everywhere).
    pub(super) fn fault_detected(&mut self, i: u32) {
        let mut changed = false;
        for p in self.faults[i as usize].ports {
            let down = self.ports[p as usize].down;
            if self.excluded[p as usize] != down {
                self.excluded[p as usize] = down;
                changed = true;
            }
        }
        if changed {
            self.router.table = RouteTable::build_avoiding(&self.fabric, &self.excluded);
            self.router.rr.resize(self.router.table.num_groups(), 0);
        }
    }

    /// The link leaving `p` fails: what is on the wire and in its queue is lost.
    fn link_down(&mut self, p: PortId) {
        self.ports[p as usize].down = true;
        while let Some(pkt) = self.ports[p as usize].pipe.pop_front(&self.packets) {
            self.fault_drop(pkt);
        }
        let node = self.ports[p as usize].node;
        let from_host = self.ports[p as usize].from_host;
        while let Some(pkt) = self.queues[p as usize].pop_strict(&self.packets, 0) {
            if !from_host {
                self.release_from_switch(node, pkt);
            }
            self.fault_drop(pkt);
        }
    }

    pub(super) fn fault_drop(&mut self, pkt: PacketId) {
        self.stats.link_fault_drops += 1;
        if self.packets.get(pkt).kind == PacketKind::Pause
            || self.packets.get(pkt).kind == PacketKind::Resume
        {
            self.stats.packets_dropped += 1;
            self.packets.release(pkt);
            return;
        }
        self.drop_packet(pkt);
    }

    fn set_rate(&mut self, p: PortId, rate_bps: u64) {
        let bits_ps = 8 * crate::units::PS_PER_SEC;
        self.port_rate[p as usize] = rate_bps;
        self.ports[p as usize].ps_per_byte = if bits_ps.is_multiple_of(rate_bps) {
            bits_ps / rate_bps
        } else {
            0
        };
    }
}
