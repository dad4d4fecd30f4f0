//! Periodic observation: queue depths and link counters for the trace tables, and the PFC deadlock
//! detector. Samples are events like any other, so they see the fabric at exact times.

use std::io;
use std::path::Path;

use super::queue::Event;
use super::world::{World, DEADLOCK_CHECK_PS};
use crate::ids::{LinkId, PortId};
use crate::scenario::StopAt;
use crate::switch::{pfc, NUM_PRIORITIES};

impl World {
    pub(super) fn sample_queues(&mut self) {
        let Some(spec) = self.trace_spec.queues else {
            return;
        };
        let Some(table) = &mut self.traces.queues else {
            return;
        };
        for p in self.ports.ids() {
            let port = &self.ports[p];
            if port.from_host && !spec.hosts {
                continue;
            }
            let q = &mut self.queues[p];
            for c in 0..NUM_PRIORITIES {
                let bytes = q.class_bytes[c];
                let max = q.take_max(c);
                if bytes == 0 && max == 0 && !spec.empty {
                    continue;
                }
                table.cols.push(
                    self.now,
                    port.node,
                    p,
                    c as u8,
                    bytes as u64,
                    q.class_packets[c],
                    max as u64,
                );
                if let Err(e) = table.row_done() {
                    self.traces.error.get_or_insert(e);
                    return;
                }
            }
        }
        if !self.finished {
            self.events
                .push_after(spec.interval_ps, Event::SampleQueues);
        }
    }

    pub(super) fn sample_links(&mut self) {
        let Some(interval) = self.trace_spec.links_interval_ps else {
            return;
        };
        for p in self.ports.ids() {
            let paused = self.paused_time(p);
            let tx = self.bytes_serialised(p);
            let (last_tx, last_paused) = std::mem::replace(&mut self.links_last[p], (tx, paused));
            let bytes = tx - last_tx;
            let rate = self.fabric.rate_bps[p];
            let utilisation = (bytes as f64 * 8.0) / (rate as f64 * interval as f64 * 1e-12);
            let tier = crate::topology::summary::tier_name(self.fabric.tier[p]);
            let port = &self.ports[p];
            let Some(table) = &mut self.traces.links else {
                return;
            };
            table.cols.push(
                self.now,
                LinkId::of_egress(p),
                port.node,
                port.peer_node,
                tier,
                bytes,
                utilisation,
                paused - last_paused,
            );
            if let Err(e) = table.row_done() {
                self.traces.error.get_or_insert(e);
                return;
            }
        }
        if !self.finished {
            self.events.push_after(interval, Event::SampleLinks);
        }
    }

    /// Bytes port `p` has put on the wire by now: what it started, less the part of the current
    /// packet still to serialise (so an interval is credited only with its own bytes).
    fn bytes_serialised(&self, p: PortId) -> u64 {
        let port = &self.ports[p];
        if port.busy_until <= self.now {
            return port.tx_bytes;
        }
        let left_ps = (port.busy_until - self.now) as u128;
        let left_bytes =
            (left_ps * self.port_rate[p] as u128 / (8 * crate::units::PS_PER_SEC as u128)) as u64;
        port.tx_bytes - left_bytes
    }

    /// Edges u -> v where switch u's port toward switch v is paused while holding packets of a
    /// paused class; a cycle that is still there at the next check is a deadlock.
    pub(super) fn deadlock_check(&mut self) {
        self.deadlock_check_pending = false;
        // Channels are (egress port, class). A paused channel P waits on channel Q when Q, itself
        // paused, holds packets that arrived over P in P's class: they keep P's pause on. A cycle
        // of such waits never drains (a pause cycle between nodes alone may be transient, as
        // when the packets a pause holds back are bound elsewhere).
        let mut edges = Vec::new();
        let mut any_paused = false;
        // Channel (port p, class c) is vertex `p * NUM_PRIORITIES + c` of the wait-for graph.
        let channel = |p: PortId, c: usize| (p.index() * NUM_PRIORITIES + c) as u32;
        for (q, port) in self.ports.iter_enumerated() {
            if port.paused == 0 {
                continue;
            }
            any_paused = true;
            if port.from_host || port.to_host {
                continue;
            }
            for c in 0..NUM_PRIORITIES {
                if port.paused & (1 << c) == 0 || self.queues[q].class_packets[c] == 0 {
                    continue;
                }
                let to = channel(q, c);
                let mut next = self.queues[q].class_list(c).front();
                while let Some(id) = next {
                    let pk = self.packets.get(id);
                    let in_class = pk.ingress_class() as usize;
                    if let Some(from) = pk.ingress_port() {
                        if self.ports[from].paused & (1 << in_class) != 0 {
                            edges.push((channel(from, in_class), to));
                        }
                    }
                    next = pk.next_in_list();
                }
            }
        }
        edges.sort_unstable();
        edges.dedup();
        let cycle = pfc::find_cycle(self.ports.len() * NUM_PRIORITIES, &edges);
        if cycle.is_some() && cycle == self.last_cycle {
            if self.stats.first_deadlock_ps.is_none() {
                self.stats.first_deadlock_ps = Some(self.now);
            }
            // Count each persisting cycle once.
            if !self.in_deadlock {
                self.stats.pfc_deadlocks += 1;
                self.in_deadlock = true;
            }
            // Paused packets in a cycle never move again: a run waiting for every flow would
            // never end, so it ends here (the deadlock is in the stats).
            if self.stop == StopAt::AllFlowsDone {
                self.finish_run();
                return;
            }
        } else if cycle.is_none() {
            self.in_deadlock = false;
        }
        self.last_cycle = cycle;
        if any_paused && !self.finished {
            self.deadlock_check_pending = true;
            self.events
                .push_after(DEADLOCK_CHECK_PS, Event::DeadlockCheck);
        }
    }

    /// Stream the trace tables into `dir` from now on (under temporary names until `finish_traces`).
    pub fn open_traces(&mut self, dir: &Path, metadata: &[(String, String)]) -> io::Result<()> {
        let t = &mut self.traces;
        if let Some(s) = &mut t.queues {
            s.open(dir, metadata)?;
        }
        if let Some(s) = &mut t.links {
            s.open(dir, metadata)?;
        }
        if let Some(s) = &mut t.pfc {
            s.open(dir, metadata)?;
        }
        if let Some(s) = &mut t.rates {
            s.open(dir, metadata)?;
        }
        Ok(())
    }

    /// Write the rest of every trace table and move the files into place.
    pub fn finish_traces(&mut self, dir: &Path, metadata: &[(String, String)]) -> io::Result<()> {
        if let Some(e) = self.traces.error.take() {
            return Err(e);
        }
        let t = &mut self.traces;
        if let Some(s) = &mut t.queues {
            s.finish(dir, metadata)?;
        }
        if let Some(s) = &mut t.links {
            s.finish(dir, metadata)?;
        }
        if let Some(s) = &mut t.pfc {
            s.finish(dir, metadata)?;
        }
        if let Some(s) = &mut t.rates {
            s.finish(dir, metadata)?;
        }
        Ok(())
    }
}
