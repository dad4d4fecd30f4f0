//! Link faults: a link goes down (what is on it and queued for it is lost) or slows down; routing
//! notices a down link after a detection delay and recomputes its tables around it.

use super::queue::Event;
use super::world::World;
use crate::ids::{FlowId, IdVec, LinkId, PortId};
use crate::packet::PacketId;
use crate::routing::RouteTable;
use crate::scenario::{FaultKind, FaultSpec};

/// A fault resolved against the fabric: the two directed links (one per direction) of the cable.
#[derive(Debug, Clone)]
pub(super) struct Fault {
    pub links: [LinkId; 2],
    pub kind: FaultKind,
    /// Rates before a degradation.
    pub saved_rates: [u64; 2],
}

/// The faults part of the World: the scenario's faults and what routing knows of them.
pub(super) struct Faults {
    list: Vec<Fault>,
    /// Ports routing avoids (failed links, once detected).
    excluded: IdVec<PortId, bool>,
    /// Fault events (start, end, detection) still to come: while any is, a cut-off destination
    /// may come back.
    events_left: u32,
}

impl Faults {
    /// The resolved faults of a fabric with `num_ports` ports, none scheduled yet.
    pub fn new(list: Vec<Fault>, num_ports: usize) -> Self {
        Self {
            list,
            excluded: IdVec::from_elem(false, num_ports),
            events_left: 0,
        }
    }

    /// No fault will start, end or be noticed any more: what is cut off now stays so.
    #[inline]
    pub fn settled(&self) -> bool {
        self.events_left == 0
    }

    /// Fault `i`'s event happened: one fewer to come; the fault.
    fn event(&mut self, i: u32) -> Fault {
        self.events_left -= 1;
        self.list[i as usize].clone()
    }
}

impl World {
    /// Schedule every fault's start, end and detection.
    pub(super) fn schedule_faults(&mut self, specs: &[FaultSpec]) {
        for (i, f) in specs.iter().enumerate() {
            let i = i as u32;
            self.events.push(f.at_ps, Event::FaultStart(i));
            self.faults.events_left += 1;
            if matches!(f.kind, FaultKind::Down) {
                self.events
                    .push(f.at_ps + f.detection_ps, Event::FaultDetected(i));
                self.faults.events_left += 1;
            }
            if let Some(u) = f.until_ps {
                self.events.push(u, Event::FaultEnd(i));
                self.faults.events_left += 1;
                if matches!(f.kind, FaultKind::Down) {
                    self.events
                        .push(u + f.detection_ps, Event::FaultDetected(i));
                    self.faults.events_left += 1;
                }
            }
        }
    }

    pub(super) fn fault_start(&mut self, i: u32) {
        let f = self.faults.event(i);
        for &l in &f.links {
            match f.kind {
                FaultKind::Down => self.link_down(l),
                FaultKind::Degrade { rate_bps } => self.set_rate(l.egress(), rate_bps),
            }
        }
    }

    pub(super) fn fault_end(&mut self, i: u32) {
        let f = self.faults.event(i);
        for (k, &l) in f.links.iter().enumerate() {
            let p = l.egress();
            match f.kind {
                FaultKind::Down => {
                    self.ports[p].down = false;
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
        let f = self.faults.event(i);
        let mut changed = false;
        for l in f.links {
            let p = l.egress();
            let down = self.ports[p].down;
            if self.faults.excluded[p] != down {
                self.faults.excluded[p] = down;
                changed = true;
            }
        }
        if changed {
            let table = RouteTable::build_avoiding(&self.fabric, self.faults.excluded.as_slice());
            let nominal = std::mem::replace(&mut self.router.table, table);
            // The fault-free table stays for flows' nominal paths (ideal FCT).
            self.router.nominal.get_or_insert(nominal);
            self.router.rr.resize(self.router.table.num_groups(), 0);
        }
    }

    /// Link `l` fails: what is on the wire and queued at its egress port is lost.
    fn link_down(&mut self, l: LinkId) {
        let p = l.egress();
        self.ports[p].down = true;
        while let Some(pkt) = self.ports[p].pipe.pop_front(&self.packets) {
            self.fault_drop(pkt);
        }
        let node = self.ports[p].node;
        let from_host = self.ports[p].from_host;
        while let Some(pkt) = self.queues[p].pop_strict(&self.packets, 0) {
            if !from_host {
                self.release_from_switch(node, pkt);
            }
            self.fault_drop(pkt);
        }
    }

    /// A switch has no live path to the packet's destination: it drops the packet (a link-fault
    /// drop, counted as unreachable too, for the run and the packet's flow).
    pub(super) fn unreachable_drop(&mut self, pkt: PacketId) {
        self.stats.unreachable_drops += 1;
        if let Some(f) = self.packets.get(pkt).flow_id() {
            self.flows[f].unreachable_drops += 1;
        }
        self.fault_drop(pkt);
    }

    /// Whether flow `fid`'s packets (data if `data`, else its control packets back) can reach
    /// their destination now: its first link is up and routing has a live path on (routing tables
    /// hold shortest live paths, so any member of a next-hop group leads on; scale-up switches
    /// and PXN relays forward by the cluster layout).
    pub(super) fn reachable(&self, fid: FlowId, data: bool) -> bool {
        let f = &self.flows[fid];
        let (mut port, target) = if data {
            (f.src_port, f.dst)
        } else {
            (f.dst_port, f.src)
        };
        for _ in 0..=self.fabric.num_nodes {
            if self.ports[port].down {
                return false;
            }
            let node = self.fabric.peer_node[port];
            let next = if self.fabric.is_host(node) {
                if node == target {
                    return true;
                }
                self.relay_out(fid, data)
            } else if self.ports[port].to_scaleup {
                self.scaleup_out(node, target, fid, data)
            } else {
                self.router.table.group(node, target).first().copied()
            };
            match next {
                Some(p) => port = p,
                None => return false,
            }
        }
        false
    }

    /// Give up on flow `fid` (its destination is cut off for good), and on every flow that waits
    /// for it to finish (they can never start).
    pub(super) fn abandon(&mut self, fid: FlowId) {
        let mut work = vec![fid];
        let mut dead_barriers: Vec<u32> = Vec::new();
        while let Some(fid) = work.pop() {
            let f = &mut self.flows[fid];
            if f.abandoned || f.finished() {
                continue;
            }
            f.abandoned = true;
            f.rto_armed = false;
            // Nothing more to send: the NIC drops it from its round robin.
            f.next_seq = f.num_packets;
            f.resend.clear();
            self.stats.flows_unreachable += 1;
            self.flows_settled += 1;
            dead_barriers.extend(f.completes);
            // The barrier never releases: neither do the flows waiting on it, nor the barriers
            // chained after it (a step graph's later ops), nor theirs.
            while let Some(b) = dead_barriers.pop() {
                let barrier = &mut self.barriers[b as usize];
                if std::mem::replace(&mut barrier.dead, true) {
                    continue;
                }
                work.extend(barrier.waiting.iter().map(|&(w, _)| w));
                dead_barriers.extend(barrier.then.iter().map(|&(next, _)| next));
            }
        }
    }

    pub(super) fn fault_drop(&mut self, pkt: PacketId) {
        self.stats.link_fault_drops += 1;
        if self.packets.get(pkt).kind.is_pfc() {
            self.stats.packets_dropped += 1;
            self.packets.release(pkt);
            return;
        }
        self.drop_packet(pkt);
    }

    fn set_rate(&mut self, p: PortId, rate_bps: u64) {
        let bits_ps = 8 * crate::units::PS_PER_SEC;
        self.port_rate[p] = rate_bps;
        self.ports[p].ps_per_byte = if bits_ps.is_multiple_of(rate_bps) {
            bits_ps / rate_bps
        } else {
            0
        };
    }
}
