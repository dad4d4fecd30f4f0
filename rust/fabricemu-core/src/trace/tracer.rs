//! The tracing part of the World: the streamed trace tables (queues, links, pfc, rates), what they
//! are configured to record, and the state sampling keeps between rows (link counters at the
//! previous sample, each flow's last rates row). The engine decides *when* (sample events, rate
//! changes, PFC frames) and lends the figures; the tracer decides *what* becomes a row and writes it.
//!
//! A write error is kept (the first one) and reported when the run's outputs are written
//! ([`Tracer::finish`]); a sampler that hit one stops rescheduling itself.

use std::io;
use std::path::Path;

use super::stream::Stream;
use super::tables::{LinkRows, PfcRows, QueueRows, RateRows};
use crate::cc::RateSample;
use crate::config::TraceSpec;
use crate::switch::{PortQueue, NUM_PRIORITIES};
use crate::topology::{NodeId, Tier};
use crate::transport::NEVER;
use crate::units::Time;

/// Optional trace tables being written.
#[derive(Default)]
pub struct Traces {
    pub queues: Option<Stream<QueueRows>>,
    pub links: Option<Stream<LinkRows>>,
    pub pfc: Option<Stream<PfcRows>>,
    pub rates: Option<Stream<RateRows>>,
    /// The first error writing a trace (reported when the run's outputs are written).
    pub error: Option<io::Error>,
}

/// One port as the links trace samples it: its ends, tier and rate, and its counters so far.
#[derive(Debug, Clone, Copy)]
pub struct LinkSample {
    pub node: NodeId,
    pub peer_node: NodeId,
    pub tier: Tier,
    pub rate_bps: u64,
    /// Bytes put on the wire by now.
    pub tx_bytes: u64,
    /// Time paused by now.
    pub paused_ps: u64,
}

pub struct Tracer {
    spec: TraceSpec,
    pub traces: Traces,
    /// Per port, at the previous links sample: tx bytes and paused time.
    links_last: Vec<(u64, u64)>,
    /// Per flow: when its last rates row was written.
    rates_last: Vec<Time>,
}

impl Tracer {
    /// The tables `spec` asks for (pfc only with PFC on, rates only if the congestion control
    /// reports rates), for `num_ports` ports and `num_flows` flows.
    pub fn new(
        spec: TraceSpec,
        pfc: bool,
        cc_reports_rates: bool,
        num_ports: usize,
        num_flows: usize,
    ) -> Self {
        let traces = Traces {
            queues: spec.queues.map(|_| Stream::default()),
            links: spec.links_interval_ps.map(|_| Stream::default()),
            pfc: (spec.pfc && pfc).then(Stream::default),
            rates: (spec.rates.is_some() && cc_reports_rates).then(Stream::default),
            error: None,
        };
        Self {
            spec,
            traces,
            links_last: vec![(0, 0); num_ports],
            rates_last: vec![NEVER; num_flows],
        }
    }

    /// The queues sampling interval, if queues are traced.
    pub fn queues_interval(&self) -> Option<Time> {
        self.spec.queues.map(|q| q.interval_ps)
    }

    /// The links sampling interval, if links are traced.
    pub fn links_interval(&self) -> Option<Time> {
        self.spec.links_interval_ps
    }

    fn keep_error(&mut self, r: io::Result<()>) -> bool {
        match r {
            Ok(()) => true,
            Err(e) => {
                self.traces.error.get_or_insert(e);
                false
            }
        }
    }

    /// One queues sample at `now` over every port (in port order: its node, whether it is a
    /// NIC's, its queue; each class's high-water mark is taken). Returns the interval to the next
    /// sample, or None when queues are not traced or writing failed.
    pub fn sample_queues<'q>(
        &mut self,
        now: Time,
        ports: impl Iterator<Item = (NodeId, bool, &'q mut PortQueue)>,
    ) -> Option<Time> {
        let spec = self.spec.queues?;
        let table = self.traces.queues.as_mut()?;
        for (p, (node, from_host, q)) in ports.enumerate() {
            if from_host && !spec.hosts {
                continue;
            }
            for c in 0..NUM_PRIORITIES {
                let bytes = q.class_bytes[c];
                let max = q.take_max(c);
                if bytes == 0 && max == 0 && !spec.empty {
                    continue;
                }
                table.cols.push(
                    now,
                    node,
                    p as u32,
                    c as u8,
                    bytes as u64,
                    q.class_packets[c],
                    max as u64,
                );
                if let Err(e) = table.row_done() {
                    self.traces.error.get_or_insert(e);
                    return None;
                }
            }
        }
        Some(spec.interval_ps)
    }

    /// One links sample at `now` over every port (in port order): bytes sent, utilisation and
    /// paused time since the previous sample. Returns the interval to the next sample, or None
    /// when links are not traced or writing failed.
    pub fn sample_links(
        &mut self,
        now: Time,
        ports: impl Iterator<Item = LinkSample>,
    ) -> Option<Time> {
        let interval = self.spec.links_interval_ps?;
        for (p, s) in ports.enumerate() {
            let (last_tx, last_paused) =
                std::mem::replace(&mut self.links_last[p], (s.tx_bytes, s.paused_ps));
            let bytes = s.tx_bytes - last_tx;
            let utilisation = (bytes as f64 * 8.0) / (s.rate_bps as f64 * interval as f64 * 1e-12);
            let tier = crate::topology::summary::tier_name(s.tier);
            let table = self.traces.links.as_mut()?;
            table.cols.push(
                now,
                p as u32,
                s.node,
                s.peer_node,
                tier,
                bytes,
                utilisation,
                s.paused_ps - last_paused,
            );
            if let Err(e) = table.row_done() {
                self.traces.error.get_or_insert(e);
                return None;
            }
        }
        Some(interval)
    }

    /// A PFC frame sent at `now` (pfc.arrow), if PFC is traced.
    #[allow(clippy::too_many_arguments)] // one argument per column
    pub fn pfc_frame(
        &mut self,
        now: Time,
        switch: NodeId,
        port: u32,
        upstream: NodeId,
        paused_port: u32,
        priority: u8,
        pause: bool,
    ) {
        if let Some(t) = &mut self.traces.pfc {
            t.cols
                .push(now, switch, port, upstream, paused_port, priority, pause);
            let r = t.row_done();
            self.keep_error(r);
        }
    }

    /// Flow `fid`'s rate changed at `now`: a rates row if the flow is traced and its previous row
    /// is at least the interval old; `sample` reads the congestion control's state (only then).
    pub fn rate_changed(
        &mut self,
        fid: u32,
        now: Time,
        sample: impl FnOnce() -> Option<RateSample>,
    ) {
        let Some(rates) = &mut self.traces.rates else {
            return;
        };
        let spec = self.spec.rates.as_ref().expect("rates trace configured");
        if let Some(only) = &spec.flows {
            if only.binary_search(&fid).is_err() {
                return;
            }
        }
        let last = self.rates_last[fid as usize];
        if spec.interval_ps > 0 && last != NEVER && now - last < spec.interval_ps {
            return;
        }
        self.rates_last[fid as usize] = now;
        let Some(r) = sample() else {
            return;
        };
        rates
            .cols
            .push(now, fid as u64, r.rate_bps, r.target_bps, r.alpha);
        let r = rates.row_done();
        self.keep_error(r);
    }

    /// Stream the tables into `dir` from now on (under temporary names until `finish`).
    pub fn open(&mut self, dir: &Path, metadata: &[(String, String)]) -> io::Result<()> {
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

    /// Write the rest of every table and move the files into place; the first error a row hit
    /// during the run, if any, instead.
    pub fn finish(&mut self, dir: &Path, metadata: &[(String, String)]) -> io::Result<()> {
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
