//! Faults: links (or every link of a component, or of a tier) go down, slow down, lose packets
//! at random or gain latency for a while; routing notices a down link after a detection delay and
//! recomputes its tables around it. Overlapping faults on one link add up: a link is down while
//! any down fault covers it, runs at the lowest rate of its active degradations, loses packets
//! as its active loss faults together would, and carries the sum of its added delays.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use super::queue::Event;
use super::world::World;
use crate::ids::{FlowId, IdVec, LinkId, PortId};
use crate::packet::PacketId;
use crate::rng::{Rng, RngStream};
use crate::routing::{RouteBuilder, RouteTable};
use crate::scenario::FaultKind;
use crate::topology::faults::LinkFault;
use crate::topology::Fabric;
use crate::units::Time;

/// A fault resolved against the fabric, and its state in the run.
#[derive(Debug, Clone)]
pub(super) struct Fault {
    pub spec: LinkFault,
    /// Its row in `Faults::applied` while it is active.
    row: Option<usize>,
    /// Loss faults: packets its links had lost when it started.
    lost_before: u64,
    /// Its end is scheduled (a live restore).
    ending: bool,
}

impl Fault {
    pub fn new(spec: LinkFault) -> Self {
        Self {
            spec,
            row: None,
            lost_before: 0,
            ending: false,
        }
    }
}

/// One fault period that happened (a row of faults.arrow).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppliedFault {
    /// Index into the resolved faults (`Built::faults`).
    pub fault: u32,
    pub start_ps: Time,
    /// None: still active when the run stopped.
    pub end_ps: Option<Time>,
    /// Packets it cost: on the wire and queued when its links went down (down, flap), or
    /// corrupted on its links while it was active (loss).
    pub packets_lost: u64,
}

/// The random loss of one link while loss faults cover it: a packet of `b` wire bits survives
/// with probability `exp(keep_ln + b keep_ln_per_bit)`.
#[derive(Clone)]
struct LossLink {
    keep_ln: f64,
    keep_ln_per_bit: f64,
    /// Loss faults covering the link now.
    active: u32,
    rng: Rng,
    drops: u64,
}

/// What makes a world's route tables, which a copy of the faults (the parallel engine's view
/// takes one at every fold, and routes nothing) does not take: the builder kept to update them
/// after the next change (16 bytes per (switch, destination edge switch); a copy that reroutes
/// starts from scratch), or a partition's handle on [`SharedRoutes`].
#[derive(Default)]
struct NotCopied<T>(Option<T>);

impl<T> Clone for NotCopied<T> {
    fn clone(&self) -> Self {
        NotCopied(None)
    }
}

/// The table after the ports in `toggled` changed (as `down` marks them): `builder` updated, or
/// made anew where there is none yet or the fabric was `rewired`.
fn next_table(
    builder: &mut Option<RouteBuilder>,
    fabric: &Fabric,
    down: &[bool],
    toggled: &[PortId],
    rewired: bool,
) -> RouteTable {
    let builder = match builder {
        Some(b) if !rewired => {
            b.update(fabric, down, toggled);
            b
        }
        b => b.insert(RouteBuilder::new(fabric, down)),
    };
    builder.table()
}

/// The route tables of a parallel run's partitions, made once for all of them. Every partition
/// applies every fault, OCS change and controller command at its place in the order, so each
/// reroutes at the same changes, with the same ports toggled, and the k-th table is the same in
/// all: the first partition to need it makes it (the others would have waited at the window's
/// end anyway), the others take it. Each made the tables itself until 2026-12-05: a tenth of
/// both threads' time for a 16,384-GPU job under a failure process.
pub(crate) struct SharedRoutes {
    partitions: usize,
    seq: Mutex<RouteSeq>,
}

#[derive(Default)]
struct RouteSeq {
    builder: Option<RouteBuilder>,
    /// Changes made so far (the next to make is number `made`) ...
    made: u64,
    /// ... and those some partition has yet to take, oldest first.
    pending: VecDeque<Change>,
}

/// One change of the routes: what a partition asks for it with, and the table made.
struct Change {
    number: u64,
    toggled: Vec<PortId>,
    rewired: bool,
    table: Arc<RouteTable>,
    taken: usize,
}

impl SharedRoutes {
    pub fn new(partitions: usize) -> Self {
        Self {
            partitions,
            seq: Mutex::new(RouteSeq::default()),
        }
    }

    /// Tables made, and those some partition has yet to take.
    #[cfg(test)]
    pub fn made_and_pending(&self) -> (u64, usize) {
        let seq = self
            .seq
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        (seq.made, seq.pending.len())
    }

    /// The table after change `number` (a partition's count of its reroutes), where `toggled`
    /// changed (and the fabric was `rewired`) since the last; None if the change that was made
    /// under that number was another (never, as every partition applies every change).
    fn table(
        &self,
        number: u64,
        fabric: &Fabric,
        down: &[bool],
        toggled: &[PortId],
        rewired: bool,
    ) -> Option<Arc<RouteTable>> {
        let mut seq = self
            .seq
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let table = if number == seq.made {
            let table = Arc::new(next_table(&mut seq.builder, fabric, down, toggled, rewired));
            seq.made += 1;
            seq.pending.push_back(Change {
                number,
                toggled: toggled.to_vec(),
                rewired,
                table: Arc::clone(&table),
                taken: 1,
            });
            table
        } else {
            let change = seq.pending.iter_mut().find(|c| c.number == number)?;
            if change.toggled != toggled || change.rewired != rewired {
                return None;
            }
            change.taken += 1;
            Arc::clone(&change.table)
        };
        // Forget the changes every partition has taken.
        while seq
            .pending
            .front()
            .is_some_and(|c| c.taken >= self.partitions)
        {
            seq.pending.pop_front();
        }
        Some(table)
    }
}

/// The faults part of the World: the scenario's faults, what each link suffers now and what
/// routing knows of it.
#[derive(Clone)]
pub(super) struct Faults {
    list: Vec<Fault>,
    /// Ports routing avoids (failed links, once detected).
    excluded: IdVec<PortId, bool>,
    /// Ports whose `excluded` changed since routes were last computed ...
    toggled: Vec<PortId>,
    /// ... and what computed them, kept to update (None: none yet) ...
    routes: NotCopied<RouteBuilder>,
    /// ... or, in a partition of a parallel run, where all partitions' are made, and the
    /// changes this partition has asked for.
    share: NotCopied<(Arc<SharedRoutes>, u64)>,
    /// The fabric was rewired since routes were last computed.
    rewired: bool,
    /// Fault events (start, end, detection) still to come: while any is, a cut-off destination
    /// may come back.
    events_left: u32,
    /// The latest time any such event was scheduled for (0 before the first).
    last_event_at: Time,
    /// Per port: down faults covering its link now, and since when it is down.
    down_count: IdVec<PortId, u32>,
    down_since: IdVec<PortId, Time>,
    /// Link-ps down so far of links that came back; with `down_now` links down since a sum of
    /// `down_since_sum`, the total is `down_ps + down_now * now - down_since_sum`.
    down_ps: u64,
    down_now: u64,
    down_since_sum: u64,
    /// Per port: its loss state, for links a loss fault covers at some point.
    loss_slot: IdVec<PortId, Option<u32>>,
    loss: Vec<LossLink>,
    /// Whether each fault is active now.
    active: Vec<bool>,
    /// The degrade faults (a degraded link's rate is the lowest of those active on it).
    degrades: Vec<u32>,
    /// Every fault period applied so far.
    applied: Vec<AppliedFault>,
}

impl Faults {
    /// The resolved faults of a fabric with `num_ports` ports, none scheduled yet; loss draws
    /// come from each link's stream under `seed`.
    pub fn new(list: Vec<Fault>, num_ports: usize, seed: u64) -> Self {
        let per_port = !list.is_empty();
        let mut loss_slot = IdVec::from_elem(None, if per_port { num_ports } else { 0 });
        let mut loss = Vec::new();
        for f in &list {
            if let FaultKind::Loss { .. } = f.spec.kind {
                for l in f.spec.links.iter() {
                    let p = l.egress();
                    if loss_slot[p].is_none() {
                        loss_slot[p] = Some(loss.len() as u32);
                        loss.push(LossLink {
                            keep_ln: 0.0,
                            keep_ln_per_bit: 0.0,
                            active: 0,
                            rng: RngStream::LinkLoss(p.get()).rng(seed),
                            drops: 0,
                        });
                    }
                }
            }
        }
        let n = if per_port { num_ports } else { 0 };
        let degrades = (0..list.len() as u32)
            .filter(|&i| matches!(list[i as usize].spec.kind, FaultKind::Degrade { .. }))
            .collect();
        Self {
            degrades,
            active: vec![false; list.len()],
            list,
            excluded: IdVec::from_elem(false, num_ports),
            toggled: Vec::new(),
            routes: NotCopied(None),
            share: NotCopied(None),
            rewired: false,
            events_left: 0,
            last_event_at: 0,
            down_count: IdVec::from_elem(0, n),
            down_since: IdVec::from_elem(0, n),
            down_ps: 0,
            down_now: 0,
            down_since_sum: 0,
            loss_slot,
            loss,
            applied: Vec::new(),
        }
    }

    /// A fault added during the run (a controller's): its number. The per-port state is made
    /// here if the scenario had no faults. Its events are scheduled by the caller
    /// ([`Faults::expect_event_at`]).
    pub fn add(&mut self, fault: Fault, num_ports: usize) -> u32 {
        if self.down_count.len() < num_ports {
            self.down_count = IdVec::from_elem(0, num_ports);
            self.down_since = IdVec::from_elem(0, num_ports);
            self.loss_slot = IdVec::from_elem(None, num_ports);
        }
        let i = self.list.len() as u32;
        if matches!(fault.spec.kind, FaultKind::Degrade { .. }) {
            self.degrades.push(i);
        }
        self.list.push(fault);
        self.active.push(false);
        i
    }

    /// Faults so far (the scenario's and live ones).
    pub fn len(&self) -> u32 {
        self.list.len() as u32
    }

    /// Fault `i`'s resolved spec and whether it is active (started, not ended or ending).
    pub fn get(&self, i: u32) -> Option<(&LinkFault, bool)> {
        let f = self.list.get(i as usize)?;
        Some((&f.spec, self.active[i as usize] && !f.ending))
    }

    /// Fault `i`'s end is scheduled.
    pub fn mark_ending(&mut self, i: u32) {
        self.list[i as usize].ending = true;
    }

    /// No fault will start, end or be noticed any more: what is cut off now stays so.
    #[inline]
    pub fn settled(&self) -> bool {
        self.events_left == 0
    }

    /// One more event to come, at `at`, that may change what is reachable (OCS changes use the
    /// count too).
    pub fn expect_event_at(&mut self, at: Time) {
        self.events_left += 1;
        self.last_event_at = self.last_event_at.max(at);
    }

    /// The latest time an event that may change what is reachable was scheduled for (0 before
    /// the first): while some are to come, the soonest a flow may be given up on (on threads,
    /// `World::earliest_give_up`).
    pub fn last_event_at(&self) -> Time {
        self.last_event_at
    }

    /// One of those events happened.
    pub fn event_done(&mut self) {
        self.events_left -= 1;
    }

    /// Whether routing should avoid port `p` (`down`); true if that changed.
    pub fn exclude(&mut self, p: PortId, down: bool) -> bool {
        let changed = std::mem::replace(&mut self.excluded[p], down) != down;
        if changed {
            self.toggled.push(p);
        }
        changed
    }

    /// Bytes kept to update the route tables (0 before the first fault routing notices).
    pub fn routes_bytes(&self) -> usize {
        self.routes.0.as_ref().map_or(0, RouteBuilder::bytes)
    }

    /// The fabric's wiring changed (OCS circuits): the next routes are computed from scratch.
    pub fn rewired(&mut self) {
        self.rewired = true;
    }

    /// Take the route tables from `shared`, made once for every partition of a parallel run.
    pub fn share_routes(&mut self, shared: Arc<SharedRoutes>) {
        self.share = NotCopied(Some((shared, 0)));
    }

    /// The shared route tables and the changes this partition took from them (None: it makes
    /// its own).
    #[cfg(test)]
    pub fn shared_routes(&self) -> Option<(&SharedRoutes, u64)> {
        self.share.0.as_ref().map(|(r, n)| (&**r, *n))
    }

    /// Whether a down fault covers port `p`'s link now.
    pub fn fault_down(&self, p: PortId) -> bool {
        self.down_count.get(p).is_some_and(|&c| c > 0)
    }

    /// Fault `i`'s event happened: one fewer to come; the fault's kind and links.
    fn event(&mut self, i: u32) -> (FaultKind, Arc<[LinkId]>) {
        self.events_left -= 1;
        let f = &self.list[i as usize].spec;
        (f.kind, f.links.clone())
    }

    /// Every fault period applied so far (faults.arrow), in start order, with the fault it is
    /// of; a loss fault still active counts the packets lost so far.
    pub fn applied(&self) -> Vec<(AppliedFault, &LinkFault)> {
        self.applied
            .iter()
            .map(|a| {
                let f = &self.list[a.fault as usize];
                let mut a = *a;
                if let (None, FaultKind::Loss { .. }) = (a.end_ps, f.spec.kind) {
                    a.packets_lost = self.loss_drops(&f.spec.links) - f.lost_before;
                }
                (a, &f.spec)
            })
            .collect()
    }

    /// Resolved fault `i` (as `Built::faults` lists them).
    pub fn spec(&self, i: usize) -> Option<&LinkFault> {
        self.list.get(i).map(|f| &f.spec)
    }

    /// Count in `other`'s packets lost (another partition's copy of the same faults, applied
    /// at the same instants: each partition lost what it held).
    pub fn add_losses_of(&mut self, other: &Faults) {
        for (a, b) in self.applied.iter_mut().zip(&other.applied) {
            a.packets_lost += b.packets_lost;
        }
        for (a, b) in self.loss.iter_mut().zip(&other.loss) {
            a.drops += b.drops;
        }
        for (a, b) in self.list.iter_mut().zip(&other.list) {
            a.lost_before += b.lost_before;
        }
    }

    /// Link-ps spent down by time `now` (each direction of a cable counted).
    pub fn link_down_ps(&self, now: Time) -> u64 {
        self.down_ps + self.down_now * now - self.down_since_sum
    }

    /// Packets lost so far by random loss on `links`.
    fn loss_drops(&self, links: &[LinkId]) -> u64 {
        links
            .iter()
            .filter_map(|l| self.loss_slot.get(l.egress()).copied().flatten())
            .map(|s| self.loss[s as usize].drops)
            .sum()
    }
}

impl World {
    /// Schedule every fault's start, end and detection.
    pub(super) fn schedule_faults(&mut self) {
        for i in 0..self.faults.list.len() {
            let f = &self.faults.list[i].spec;
            let (at, until, detection, down) = (
                f.at_ps,
                f.until_ps,
                f.detection_ps,
                matches!(f.kind, FaultKind::Down),
            );
            let i = i as u32;
            self.events.push(at, Event::FaultStart(i));
            self.faults.expect_event_at(at);
            if down {
                self.events.push(at + detection, Event::FaultDetected(i));
                self.faults.expect_event_at(at + detection);
            }
            if let Some(u) = until {
                self.events.push(u, Event::FaultEnd(i));
                self.faults.expect_event_at(u);
                if down {
                    self.events.push(u + detection, Event::FaultDetected(i));
                    self.faults.expect_event_at(u + detection);
                }
            }
        }
    }

    pub(super) fn fault_start(&mut self, i: u32) {
        let (kind, links) = self.faults.event(i);
        let now = self.now;
        let mut lost = 0;
        self.faults.active[i as usize] = true;
        for (j, &l) in links.iter().enumerate() {
            let p = l.egress();
            match kind {
                FaultKind::Down => {
                    let f = &mut self.faults;
                    f.down_count[p] += 1;
                    if f.down_count[p] == 1 {
                        f.down_since[p] = now;
                        f.down_now += 1;
                        f.down_since_sum += now;
                        lost += self.link_down(l, j as u32);
                    }
                }
                FaultKind::Degrade { .. } => self.degraded_rate(p),
                FaultKind::Loss { probability, ber } => {
                    let slot = self.faults.loss_slot[p].expect("a slot per lossy link") as usize;
                    let s = &mut self.faults.loss[slot];
                    s.keep_ln += (-probability).ln_1p();
                    s.keep_ln_per_bit += (-ber).ln_1p();
                    s.active += 1;
                    self.ports[p].lossy = true;
                }
                FaultKind::Delay { added_ps } => self.ports[p].arrival_delay += added_ps,
            }
        }
        if kind == FaultKind::Down {
            // A link that failed one way only: the other way's pause was lifted (`link_down`),
            // so it sends what it holds (once every link of the fault is down).
            for &l in links.iter() {
                let back = self.fabric.peer_port[l.egress()];
                let owned = (self.partition.as_ref()).is_none_or(|p| p.owns(self.ports[back].node));
                if owned && !self.ports[back].down {
                    self.kick(back);
                }
            }
        }
        let f = &mut self.faults;
        if matches!(kind, FaultKind::Loss { .. }) {
            f.list[i as usize].lost_before = f.loss_drops(&links);
        }
        f.list[i as usize].row = Some(f.applied.len());
        f.applied.push(AppliedFault {
            fault: i,
            start_ps: now,
            end_ps: None,
            packets_lost: lost,
        });
        // Every partition applies every fault: one world's one fault, counted once.
        if self.partition.as_ref().is_none_or(|p| p.is_first()) {
            self.stats.faults_applied += 1;
        }
    }

    pub(super) fn fault_end(&mut self, i: u32) {
        let (kind, links) = self.faults.event(i);
        let now = self.now;
        self.faults.active[i as usize] = false;
        for (j, &l) in links.iter().enumerate() {
            let p = l.egress();
            match kind {
                FaultKind::Down => {
                    let f = &mut self.faults;
                    f.down_count[p] -= 1;
                    if f.down_count[p] == 0 {
                        f.down_ps += now - f.down_since[p];
                        f.down_now -= 1;
                        f.down_since_sum -= f.down_since[p];
                        self.ports[p].down = false;
                        self.rows_at(j as u32);
                        self.kick(p);
                    }
                }
                FaultKind::Degrade { .. } => self.degraded_rate(p),
                FaultKind::Loss { probability, ber } => {
                    let slot = self.faults.loss_slot[p].expect("a slot per lossy link") as usize;
                    let s = &mut self.faults.loss[slot];
                    s.active -= 1;
                    if s.active == 0 {
                        // Exactly lossless again (no rounding left over).
                        s.keep_ln = 0.0;
                        s.keep_ln_per_bit = 0.0;
                        self.ports[p].lossy = false;
                    } else {
                        s.keep_ln -= (-probability).ln_1p();
                        s.keep_ln_per_bit -= (-ber).ln_1p();
                    }
                }
                FaultKind::Delay { added_ps } => {
                    // Toward another partition, the packets on the wire are in that one's copy.
                    let busy = if self.ports[p].remote {
                        self.remote_link_busy(p)
                    } else {
                        !self.ports[p].pipe.is_empty()
                    };
                    let port = &mut self.ports[p];
                    port.arrival_delay -= added_ps;
                    if busy {
                        // A link delivers in order: nothing new starts before the packets
                        // still delayed would be overtaken.
                        port.busy_until = port.busy_until.max(now) + added_ps;
                    }
                }
            }
        }
        let f = &mut self.faults;
        let lost = match kind {
            FaultKind::Loss { .. } => Some(f.loss_drops(&links) - f.list[i as usize].lost_before),
            _ => None,
        };
        if let Some(row) = f.list[i as usize].row.take() {
            let r = &mut f.applied[row];
            r.end_ps = Some(now);
            if let Some(lost) = lost {
                r.packets_lost = lost;
            }
        }
    }

    /// The packet that just crossed link `p` (which a loss fault covers) is corrupted: it is
    /// dropped (the receiver's CRC check fails) and counted. PFC frames are not lost.
    #[inline(never)]
    pub(super) fn corrupted(&mut self, p: PortId, pkt: PacketId) -> bool {
        let packet = self.packets.get(pkt);
        if packet.kind.is_pfc() {
            return false;
        }
        let bits = 8.0 * packet.wire_bytes as f64;
        let slot = self.faults.loss_slot[p].expect("a slot per lossy link") as usize;
        let s = &mut self.faults.loss[slot];
        let lost_p = -(s.keep_ln + bits * s.keep_ln_per_bit).exp_m1();
        if s.rng.unit() >= lost_p {
            return false;
        }
        s.drops += 1;
        self.stats.corrupted_drops += 1;
        self.drop_packet(pkt);
        true
    }

    /// Port `p`'s rate: the lowest of its active degradations, else the fabric's.
    fn degraded_rate(&mut self, p: PortId) {
        let mut rate = self.fabric.rate_bps[p];
        for &i in &self.faults.degrades {
            let (f, on) = (
                &self.faults.list[i as usize],
                self.faults.active[i as usize],
            );
            if let (true, FaultKind::Degrade { rate_bps }) = (on, f.spec.kind) {
                if f.spec.links.iter().any(|l| l.egress() == p) {
                    rate = rate.min(rate_bps);
                }
            }
        }
        self.set_rate(p, rate);
    }

    /// Routing learns the link's current state: routes are recomputed around the links known to be
    /// down (as a routing protocol converges: a spine that lost its link to a leaf stops being a
    /// next hop toward that leaf everywhere).
    pub(super) fn fault_detected(&mut self, i: u32) {
        let (_, links) = self.faults.event(i);
        let mut changed = false;
        for &l in links.iter() {
            let p = l.egress();
            changed |= self.faults.exclude(p, self.ports[p].down);
        }
        if changed {
            self.reroute();
        }
    }

    /// Recompute the route tables around the ports routing knows to be down: from the last
    /// computation, updated for the ports that changed since, or from scratch the first time
    /// and after the fabric was rewired.
    pub(super) fn reroute(&mut self) {
        let faults = &mut self.faults;
        let down = faults.excluded.as_slice();
        let shared = faults.share.0.as_mut().map(|(routes, changes)| {
            *changes += 1;
            routes.table(
                *changes - 1,
                &self.fabric,
                down,
                &faults.toggled,
                faults.rewired,
            )
        });
        let table = match shared {
            Some(Some(table)) => table,
            taken => {
                if taken.is_some() {
                    // Another change was made under this number (never: see `SharedRoutes`).
                    // This partition makes its own from now on, from scratch.
                    faults.share.0 = None;
                    faults.routes.0 = None;
                }
                Arc::new(next_table(
                    &mut faults.routes.0,
                    &self.fabric,
                    down,
                    &faults.toggled,
                    faults.rewired,
                ))
            }
        };
        faults.toggled.clear();
        faults.rewired = false;
        let nominal = self.router.replace_table(table);
        // The fault-free table stays for flows' nominal paths (ideal FCT).
        self.router.nominal.get_or_insert(nominal);
        // Round-robin spraying starts over on the new groups: a rebuild may renumber them, and a
        // count carried over by group id would be another switch's (on threads, a partition
        // counts only its own switches': the runs diverged).
        self.router.rr.clear();
        self.router.rr.resize(self.router.table().num_groups(), 0);
    }

    /// Link `p` goes down now (an OCS circuit going dark): what is on it and queued is lost.
    /// Its trace rows go at `rows` within the event.
    pub(super) fn link_down_now(&mut self, p: PortId, rows: u32) -> u64 {
        self.link_down(LinkId::of_egress(p), rows)
    }

    /// Link `l` fails: what is on the wire and queued at its egress port is lost (how many).
    /// Its trace rows go at `rows` within the event (its place in the fault's links: the
    /// parallel engine merges the partitions' rows of one event by it). On the parallel engine, the near end's partition
    /// writes the rows of the whole wire (`World::lose_wire_of`): the far end's drops what
    /// earlier windows delivered to it without rows.
    fn link_down(&mut self, l: LinkId, rows: u32) -> u64 {
        let p = l.egress();
        self.ports[p].down = true;
        // The cable's PFC state resets in both directions: a frame on a down link is lost, so
        // a RESUME for a pause either end received might never come (each such port stayed
        // paused for good, repaired or not, and its flows timed out without end).
        self.lift_pauses(p);
        self.lift_pauses(self.fabric.peer_port[p]);
        self.rows_at(rows);
        let mut lost = 0;
        let rows_here = (self.partition.as_ref()).is_none_or(|part| part.owns(self.ports[p].node));
        while let Some(pkt) = self.ports[p].pipe.pop_front(&self.packets) {
            if rows_here {
                self.trace_packet(crate::trace::packets::PacketEvent::Drop, p, pkt);
            }
            self.fault_drop(pkt);
            lost += 1;
        }
        if self.ports[p].remote {
            lost += self.lose_wire_of(p);
        }
        let node = self.ports[p].node;
        let from_host = self.ports[p].from_host;
        while let Some(pkt) = self.queues[p].pop_strict(&self.packets, 0) {
            if !from_host {
                self.release_from_switch(node, pkt);
            } else if self.relays.is_some() {
                self.relay_release(node, pkt);
            }
            self.trace_packet(crate::trace::packets::PacketEvent::Drop, p, pkt);
            self.fault_drop(pkt);
            lost += 1;
        }
        lost
    }

    /// Port `p` is no longer paused (the pause it received is lifted) and the switch at its
    /// far end no longer counts itself as pausing it (`Pfc::forget_pauses`).
    fn lift_pauses(&mut self, p: PortId) {
        self.unpause(p, u8::MAX);
        if let Some(pfc) = &mut self.switches.pfc {
            pfc.forget_pauses(p);
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
                self.router
                    .table()
                    .group(node, target)
                    .as_slice()
                    .first()
                    .copied()
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
        self.give_up(vec![fid], Vec::new(), true);
    }

    /// Another partition gave up on a flow barrier `b` waits for: so does this one on the flows
    /// that wait at `b` (told at the end of the window, before any window's end counts them).
    pub(super) fn barrier_dead(&mut self, b: u32) {
        self.give_up(Vec::new(), vec![b], false);
    }

    /// Give up on the flows of `work` and on those waiting at `dead_barriers`, and so on down
    /// the chains. A partition counts the flows it starts (their sender's), and tells the others
    /// of the barriers that died here that they also count (`tell`).
    fn give_up(&mut self, mut work: Vec<FlowId>, mut dead_barriers: Vec<u32>, tell: bool) {
        loop {
            // The barrier never releases: neither do the flows waiting on it, nor the barriers
            // chained after it (a step graph's later ops), nor theirs.
            while let Some(b) = dead_barriers.pop() {
                let barrier = &mut self.barriers[b as usize];
                if std::mem::replace(&mut barrier.dead, true) {
                    continue;
                }
                work.extend(self.links.waiting(b).iter().map(|&(w, _)| w));
                dead_barriers.extend(self.links.then(b).iter().map(|&(next, _)| next));
                if let (true, Some(part)) = (tell, &mut self.partition) {
                    part.tell_dead(b);
                }
            }
            let Some(fid) = work.pop() else {
                return;
            };
            // (A flow that finished at its receiver, here or, on threads, in another partition:
            // one world's one record says so.)
            let elsewhere = (self.partition.as_ref()).is_some_and(|p| p.finished_elsewhere(fid));
            if self.flows.is_retired(fid) {
                continue; // done for good (retired; on threads, forgotten once the view retired it)
            }
            self.materialise(fid); // (not started, or on threads never came here: from its plan)
            let f = &mut self.flows[fid];
            if f.abandoned || f.finished() || elsewhere {
                continue;
            }
            if f.started && super::world::sends_long(&self.long_packets, f) {
                self.long_flows -= 1; // settled with packets never sent
            }
            if crate::transport::window::clear(&mut self.unstarted_long, fid.index() as u32) {
                self.long_flows -= 1; // counted as one that cannot finish within a window
            }
            if std::mem::take(&mut f.long_at_receiver) {
                self.long_flows -= 1; // its receiver (here) misses packets that never come
            }
            f.abandoned = true;
            f.rto_armed = false;
            // Nothing more to send: the NIC drops it from its round robin.
            f.next_seq = f.num_packets;
            f.resend.clear();
            if self.partition.as_ref().is_none_or(|p| p.starts_flow(f.src)) {
                self.stats.flows_unreachable += 1;
                self.flows_settled += 1;
                if let Some(p) = (self.partition.as_mut()).filter(|_| f.started) {
                    p.tell(fid, f.dst, super::parallel::FlowNews::GivenUp);
                }
            }
            dead_barriers.extend(f.completes);
        }
    }

    /// The trace rows written next go at position `within` of the current event (the parallel
    /// engine merges the partitions' rows of one event by it).
    #[inline]
    fn rows_at(&mut self, within: u32) {
        if self.tracer.holds {
            self.tracer.place.within = within;
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
