//! Periodic observation: the samples of the trace tables and the PFC deadlock detector. Samples
//! are events like any other, so they see the fabric at exact times. What a sample writes is the
//! tracing part's (`trace::Tracer`); the World lends it the figures (queues, link counters).

use std::io;
use std::path::Path;

use super::queue::Event;
use super::world::{PortHot, World, DEADLOCK_CHECK_PS};
use crate::ids::{LinkId, PortId};
use crate::scenario::StopAt;
use crate::switch::{pfc, NUM_PRIORITIES};
use crate::trace::LinkSample;
use crate::transport::NEVER;
use crate::units::Time;

impl World {
    pub(super) fn sample_queues(&mut self) {
        // A partition samples its own ports (the others' rows come from their partitions).
        let part = self.partition.as_ref();
        let ports = self
            .ports
            .iter_enumerated()
            .zip(self.queues.iter_mut())
            .filter(|((_, port), _)| part.is_none_or(|o| o.owns(port.node)))
            .map(|((p, port), q)| (p, port.node, port.from_host, q));
        if let Some(interval) = self.tracer.sample_queues(self.now, ports) {
            if !self.finished {
                self.events.push_after(interval, Event::SampleQueues);
            }
        }
    }

    pub(super) fn sample_links(&mut self) {
        let now = self.now;
        let (fabric, rates) = (&self.fabric, &self.port_rate);
        let (pause_since, paused_ps) = (&self.pause_since, &self.paused_ps);
        let part = self.partition.as_ref();
        let ports = self
            .ports
            .iter_enumerated()
            .filter(|(_, port)| part.is_none_or(|o| o.owns(port.node)))
            .map(|(p, port)| LinkSample {
                link: LinkId::of_egress(p),
                node: port.node,
                peer_node: port.peer_node,
                tier: fabric.tier[p],
                rate_bps: fabric.rate_bps[p],
                tx_bytes: bytes_serialised(port, rates[p], now),
                paused_ps: paused_time(pause_since[p], paused_ps[p], now),
            });
        if let Some(interval) = self.tracer.sample_links(now, ports) {
            if !self.finished {
                self.events.push_after(interval, Event::SampleLinks);
            }
        }
    }

    /// Edges u -> v where switch u's port toward switch v is paused while holding packets of a
    /// paused class; a cycle that is still there at the next check is a deadlock.
    pub(super) fn deadlock_check(&mut self) {
        let mut waits = WaitCandidates::default();
        self.wait_candidates(&mut waits);
        let edges = waits.edges(|p| self.ports[p].paused);
        let cycle = pfc::find_cycle(&edges);
        if self.settle_deadlock_check(cycle, waits.any_paused, true) {
            self.deadlock_check_pending = true;
            self.events
                .push_after(DEADLOCK_CHECK_PS, Event::DeadlockCheck);
        }
    }

    /// What this world's ports add to the wait-for graph: whether any is paused, the paused ones
    /// (with their classes) and the waits their queued packets may make. Channels are (egress
    /// port, class). A paused channel P waits on channel Q when Q, itself paused, holds packets
    /// that arrived over P in P's class: they keep P's pause on. A cycle of such waits never
    /// drains (a pause cycle between nodes alone may be transient, as when the packets a pause
    /// holds back are bound elsewhere). Whether P is paused is the graph's to check
    /// ([`WaitCandidates::edges`]): with partitions, P's switch may be another's.
    pub(super) fn wait_candidates(&self, out: &mut WaitCandidates) {
        for (q, port) in self.ports.iter_enumerated() {
            if port.paused == 0 {
                continue;
            }
            out.any_paused = true;
            out.paused.push((q, port.paused));
            if port.from_host || port.to_host {
                continue;
            }
            for c in 0..NUM_PRIORITIES {
                if port.paused & (1 << c) == 0 || self.queues[q].class_packets(c) == 0 {
                    continue;
                }
                let to = channel(q, c);
                let mut next = self.queues[q].class_list(c).front();
                while let Some(id) = next {
                    let pk = self.packets.get(id);
                    if let Some(from) = pk.ingress_port() {
                        out.waits.push((from, pk.ingress_class(), to));
                    }
                    next = pk.next_in_list();
                }
            }
        }
    }

    /// The outcome of a deadlock check at `now` that found `cycle` in the wait-for graph (and
    /// `any_paused` ports): a cycle found twice in a row is a deadlock, counted once while it
    /// lasts (`count`: in this world's stats) and, in a run that waits for every flow, its end.
    /// True when another check is due a period later.
    pub(super) fn settle_deadlock_check(
        &mut self,
        cycle: Option<Vec<u32>>,
        any_paused: bool,
        count: bool,
    ) -> bool {
        self.deadlock_check_pending = false;
        if cycle.is_some() && cycle == self.last_cycle {
            if count && self.stats.first_deadlock_ps.is_none() {
                self.stats.first_deadlock_ps = Some(self.now);
            }
            // Count each persisting cycle once.
            if !self.in_deadlock {
                if count {
                    self.stats.pfc_deadlocks += 1;
                }
                self.in_deadlock = true;
            }
            // Paused packets in a cycle never move again: a run waiting for every flow would
            // never end, so it ends here (the deadlock is in the stats).
            if self.stop == StopAt::AllFlowsDone {
                self.finish_run();
                return false;
            }
        } else if cycle.is_none() {
            self.in_deadlock = false;
        }
        self.last_cycle = cycle;
        any_paused && !self.finished
    }

    /// Stream the trace tables into `dir` from now on (under temporary names until `finish_traces`).
    pub fn open_traces(&mut self, dir: &Path, metadata: &[(String, String)]) -> io::Result<()> {
        self.tracer.open(dir, metadata)
    }

    /// Write the rest of every trace table and move the files into place.
    pub fn finish_traces(&mut self, dir: &Path, metadata: &[(String, String)]) -> io::Result<()> {
        self.tracer.finish(dir, metadata)
    }
}

/// Channel (port p, class c) is vertex `p * NUM_PRIORITIES + c` of the wait-for graph.
fn channel(p: PortId, c: usize) -> u32 {
    (p.index() * NUM_PRIORITIES + c) as u32
}

/// The parts of the PFC wait-for graph that ports contribute (`World::wait_candidates`).
#[derive(Debug, Default)]
pub(super) struct WaitCandidates {
    pub any_paused: bool,
    /// Every paused port and its paused classes.
    pub paused: Vec<(PortId, u8)>,
    /// (P, class, Q's channel): a packet queued on channel Q arrived over link P in that class.
    pub waits: Vec<(PortId, u8, u32)>,
}

impl WaitCandidates {
    /// The wait-for graph's edges, sorted: the waits whose link P is paused in their class.
    pub fn edges(&self, paused: impl Fn(PortId) -> u8) -> Vec<(u32, u32)> {
        let mut edges: Vec<(u32, u32)> = self
            .waits
            .iter()
            .filter(|&&(from, class, _)| paused(from) & (1 << class) != 0)
            .map(|&(from, class, to)| (channel(from, class as usize), to))
            .collect();
        edges.sort_unstable();
        edges.dedup();
        edges
    }
}

/// Time a port has been paused by `now`: `paused_ps` so far plus the pause going on since
/// `pause_since` (NEVER: none).
pub(super) fn paused_time(pause_since: Time, paused_ps: u64, now: Time) -> u64 {
    let ongoing = if pause_since == NEVER {
        0
    } else {
        now - pause_since
    };
    paused_ps + ongoing
}

/// Bytes a port (sending at `rate_bps`) has put on the wire by `now`: what it started, less the
/// part of the current packet still to serialise (so an interval is credited only with its own
/// bytes).
pub(super) fn bytes_serialised(port: &PortHot, rate_bps: u64, now: Time) -> u64 {
    if port.busy_until <= now {
        return port.tx_bytes;
    }
    let left_ps = (port.busy_until - now) as u128;
    let left_bytes = (left_ps * rate_bps as u128 / (8 * crate::units::PS_PER_SEC as u128)) as u64;
    port.tx_bytes - left_bytes
}
