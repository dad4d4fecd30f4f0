//! The tracing part of the World: the streamed trace tables (queues, links, pfc, rates), what they
//! are configured to record, and the state sampling keeps between rows (link counters at the
//! previous sample, each flow's last rates row). The engine decides *when* (sample events, rate
//! changes, PFC frames) and lends the figures; the tracer decides *what* becomes a row and writes it.
//!
//! A write error is kept (the first one) and reported when the run's outputs are written
//! ([`Tracer::finish`]); a sampler that hit one stops rescheduling itself.

use std::io;
use std::path::Path;

use super::latency::Latency;
use super::packets::{PacketFilter, PacketRow, PacketRows, META_NODE_ROLES};
use super::stream::{Place, Stream};
use super::tables::{LinkRow, LinkRows, PfcRow, PfcRows, QueueRow, QueueRows, RateRow, RateRows};
use crate::cc::RateSample;
use crate::config::TraceSpec;
use crate::ids::{FlowId, IdVec, LinkId, NodeId, PortId};
use crate::switch::{PortQueue, NUM_PRIORITIES};
use crate::topology::Tier;
use crate::transport::NEVER;
use crate::units::Time;

/// Optional trace tables being written.
#[derive(Default)]
pub struct Traces {
    pub queues: Option<Stream<QueueRows>>,
    pub links: Option<Stream<LinkRows>>,
    pub pfc: Option<Stream<PfcRows>>,
    pub rates: Option<Stream<RateRows>>,
    pub packets: Option<Stream<PacketRows>>,
    /// The first error writing a trace (reported when the run's outputs are written).
    pub error: Option<io::Error>,
}

/// One link as the links trace samples it: its ends, tier and rate, and its counters so far.
#[derive(Debug, Clone, Copy)]
pub struct LinkSample {
    pub link: LinkId,
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
    /// Per link, at the previous links sample: tx bytes and paused time.
    links_last: IdVec<LinkId, (u64, u64)>,
    /// Per flow: when its last rates row was written.
    rates_last: IdVec<FlowId, Time>,
    /// packets.arrow is recording: the one branch the per-packet hooks take when it is off (and
    /// once `max_rows` rows are written).
    pub packets_on: bool,
    packet_filter: Option<PacketFilter>,
    packet_rows: u64,
    /// packets.arrow stopped at `max_rows`.
    pub packets_truncated: bool,
    /// One-way latency histograms (`trace.latency`).
    pub latency: Option<Latency>,
    /// A partition of the parallel engine: its tables hold their rows, each at its place in one
    /// world's order, which the engine keeps here (the event running, `place.within` set by
    /// events every partition runs); the view's tables take them in that order
    /// ([`Tracer::take_rows_of`]).
    pub holds: bool,
    pub place: Place,
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
            packets: None,
            error: None,
        };
        // Per flow only when rates.arrow is traced.
        let rated_flows = if traces.rates.is_some() { num_flows } else { 0 };
        Self {
            spec,
            traces,
            links_last: IdVec::from_elem((0, 0), num_ports),
            rates_last: IdVec::from_elem(NEVER, rated_flows),
            packets_on: false,
            packet_filter: None,
            packet_rows: 0,
            packets_truncated: false,
            latency: None,
            holds: false,
            place: Place::default(),
        }
    }

    /// Whether any streamed table is written.
    pub fn any_table(&self) -> bool {
        let t = &self.traces;
        t.queues.is_some()
            || t.links.is_some()
            || t.pfc.is_some()
            || t.rates.is_some()
            || t.packets.is_some()
    }

    /// Hold every table's rows with their places (a partition's tracer). Only with a table to
    /// hold for does the engine keep the place of every event it runs.
    pub fn hold_rows(&mut self) {
        self.holds = self.any_table();
        let t = &mut self.traces;
        t.queues.as_mut().map(Stream::hold);
        t.links.as_mut().map(Stream::hold);
        t.pfc.as_mut().map(Stream::hold);
        t.rates.as_mut().map(Stream::hold);
        t.packets.as_mut().map(Stream::hold);
    }

    /// Take the rows `parts` (the partitions' tracers) hold into this one's tables, in one
    /// world's order; packets.arrow keeps its first `max_rows` as one world would.
    pub fn take_rows_of(&mut self, parts: &mut [&mut Tracer]) {
        fn merged<C: super::stream::Columns>(
            parts: &mut [&mut Tracer],
            table: impl Fn(&mut Traces) -> Option<&mut Stream<C>>,
        ) -> Vec<C::Row> {
            let held = parts
                .iter_mut()
                .filter_map(|t| table(&mut t.traces).map(Stream::take_held))
                .collect();
            Stream::<C>::merge(held)
        }
        fn put<C: super::stream::Columns>(
            error: &mut Option<io::Error>,
            table: &mut Option<Stream<C>>,
            rows: Vec<C::Row>,
        ) {
            let Some(table) = table else { return };
            for row in rows {
                if let Err(e) = table.push(Place::default(), row) {
                    error.get_or_insert(e);
                    return;
                }
            }
        }
        let queues = merged(parts, |t| t.queues.as_mut());
        let links = merged(parts, |t| t.links.as_mut());
        let pfc = merged(parts, |t| t.pfc.as_mut());
        let rates = merged(parts, |t| t.rates.as_mut());
        let mut packets = merged(parts, |t| t.packets.as_mut());
        let t = &mut self.traces;
        put(&mut t.error, &mut t.queues, queues);
        put(&mut t.error, &mut t.links, links);
        put(&mut t.error, &mut t.pfc, pfc);
        put(&mut t.error, &mut t.rates, rates);
        if let Some(filter) = &self.packet_filter {
            // Each partition kept at most `max_rows` (no more of its rows can be among the
            // first `max_rows` of all), and stopped when it had more: then so did one world.
            let room = filter.max_rows.saturating_sub(self.packet_rows);
            if packets.len() as u64 > room || parts.iter().any(|p| p.packets_truncated) {
                self.packets_truncated = true;
                self.packets_on = false;
            }
            packets.truncate(room.min(packets.len() as u64) as usize);
            self.packet_rows += packets.len() as u64;
            put(&mut t.error, &mut t.packets, packets);
        }
        for p in parts.iter_mut() {
            if let Some(e) = p.traces.error.take() {
                self.traces.error.get_or_insert(e);
            }
        }
    }

    /// Per-flow state for `num_flows` flows in all (flows appended during the run).
    pub fn grow_flows(&mut self, num_flows: usize) {
        while self.traces.rates.is_some() && self.rates_last.len() < num_flows {
            self.rates_last.push(NEVER);
        }
    }

    /// Record packets.arrow with `filter` (the scenario's `trace.packets` resolved).
    pub fn trace_packets(&mut self, filter: PacketFilter) {
        self.packet_filter = Some(filter);
        self.traces.packets = Some(Stream::default());
        self.packets_on = true;
    }

    /// Measure one-way latency for `workloads` workloads.
    pub fn measure_latency(&mut self, workloads: usize) {
        self.latency = Some(Latency::new(workloads));
    }

    /// Rows written to packets.arrow so far.
    pub fn packet_rows(&self) -> u64 {
        self.packet_rows
    }

    /// A packet event, if packets are traced and the filter keeps it (`flow`: None for a PFC
    /// frame); `row` builds the row only then.
    #[inline(never)]
    pub fn packet_event(&mut self, row: impl FnOnce() -> PacketRow, flow: Option<u32>) {
        let (Some(filter), Some(table)) = (&self.packet_filter, &mut self.traces.packets) else {
            return;
        };
        let r = row();
        if !filter.keeps(r.time_ps, r.node, r.port, flow) {
            return;
        }
        if self.packet_rows >= filter.max_rows {
            self.packets_truncated = true;
            self.packets_on = false;
            return;
        }
        self.packet_rows += 1;
        let res = table.push(self.place, r);
        if !self.keep_error(res) {
            self.packets_on = false;
        }
    }

    /// packets.arrow's schema metadata: the run's, and the fabric's node roles.
    fn packets_metadata(&self, metadata: &[(String, String)]) -> Vec<(String, String)> {
        let mut m = metadata.to_vec();
        if let Some(f) = &self.packet_filter {
            m.push((META_NODE_ROLES.to_string(), f.node_roles.clone()));
        }
        m
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

    /// One queues sample at `now` over every port (in port order: the port, its node, whether it
    /// is a NIC's, its queue; each class's high-water mark is taken). Returns the interval to the
    /// next sample, or None when queues are not traced or writing failed.
    pub fn sample_queues<'q>(
        &mut self,
        now: Time,
        ports: impl Iterator<Item = (PortId, NodeId, bool, &'q mut PortQueue)>,
    ) -> Option<Time> {
        let spec = self.spec.queues?;
        let table = self.traces.queues.as_mut()?;
        for (p, node, from_host, q) in ports {
            if from_host && !spec.hosts {
                continue;
            }
            for c in 0..NUM_PRIORITIES {
                let bytes = q.class_bytes(c);
                let max = q.take_max(c);
                if bytes == 0 && max == 0 && !spec.empty {
                    continue;
                }
                let row = QueueRow {
                    time_ps: now,
                    node,
                    port: p,
                    priority: c as u8,
                    bytes: bytes as u64,
                    packets: q.class_packets(c),
                    max_bytes: max as u64,
                };
                let place = Place {
                    within: p.get(),
                    ..self.place
                };
                if let Err(e) = table.push(place, row) {
                    self.traces.error.get_or_insert(e);
                    return None;
                }
            }
        }
        Some(spec.interval_ps)
    }

    /// One links sample at `now` over every link (in link order): bytes sent, utilisation and
    /// paused time since the previous sample. Returns the interval to the next sample, or None
    /// when links are not traced or writing failed.
    pub fn sample_links(
        &mut self,
        now: Time,
        ports: impl Iterator<Item = LinkSample>,
    ) -> Option<Time> {
        let interval = self.spec.links_interval_ps?;
        for s in ports {
            let (last_tx, last_paused) =
                std::mem::replace(&mut self.links_last[s.link], (s.tx_bytes, s.paused_ps));
            let bytes = s.tx_bytes - last_tx;
            let utilisation = (bytes as f64 * 8.0) / (s.rate_bps as f64 * interval as f64 * 1e-12);
            let table = self.traces.links.as_mut()?;
            let row = LinkRow {
                time_ps: now,
                link: s.link,
                src: s.node,
                dst: s.peer_node,
                tier: s.tier,
                tx_bytes: bytes,
                utilisation,
                paused_ps: s.paused_ps - last_paused,
            };
            let place = Place {
                within: s.link.get(),
                ..self.place
            };
            if let Err(e) = table.push(place, row) {
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
        port: PortId,
        upstream: NodeId,
        paused_port: PortId,
        priority: u8,
        pause: bool,
    ) {
        if let Some(t) = &mut self.traces.pfc {
            let row = PfcRow {
                time_ps: now,
                switch,
                port,
                upstream,
                paused_port,
                priority,
                pause,
            };
            let r = t.push(self.place, row);
            self.keep_error(r);
        }
    }

    /// Flow `fid`'s rate changed at `now`: a rates row if the flow is traced and its previous row
    /// is at least the interval old; `sample` reads the congestion control's state (only then).
    pub fn rate_changed(
        &mut self,
        fid: FlowId,
        now: Time,
        sample: impl FnOnce() -> Option<RateSample>,
    ) {
        let Some(rates) = &mut self.traces.rates else {
            return;
        };
        let spec = self.spec.rates.as_ref().expect("rates trace configured");
        if let Some(only) = &spec.flows {
            if only.binary_search(&fid.get()).is_err() {
                return;
            }
        }
        let last = self.rates_last[fid];
        if spec.interval_ps > 0 && last != NEVER && now - last < spec.interval_ps {
            return;
        }
        self.rates_last[fid] = now;
        let Some(r) = sample() else {
            return;
        };
        let row = RateRow {
            time_ps: now,
            flow_id: fid,
            sample: r,
        };
        let r = rates.push(self.place, row);
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
        let pm = self.packets_metadata(metadata);
        if let Some(s) = &mut self.traces.packets {
            s.open(dir, &pm)?;
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
        let pm = self.packets_metadata(metadata);
        if let Some(s) = &mut self.traces.packets {
            s.finish(dir, &pm)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{QueuesTraceSpec, RatesTraceSpec};
    use arrow_array::{Array, Float64Array, Int64Array};

    fn spec() -> TraceSpec {
        TraceSpec {
            unfinished_flows: false,
            queues: Some(QueuesTraceSpec {
                interval_ps: 1_000,
                hosts: false,
                empty: false,
            }),
            pfc: true,
            links_interval_ps: Some(1_000_000),
            rates: Some(RatesTraceSpec {
                flows: Some(vec![1, 3]),
                interval_ps: 100,
            }),
            packets: None,
            latency: false,
        }
    }

    fn sample(fid: u32) -> Option<RateSample> {
        Some(RateSample {
            rate_bps: 1000 + fid as u64,
            target_bps: Some(2000),
            alpha: Some(0.5),
            ..RateSample::default()
        })
    }

    #[test]
    fn rates_rows_only_for_traced_flows_and_at_most_one_per_interval() {
        let mut t = Tracer::new(spec(), true, true, 4, 4);
        let mut asked = 0;
        let mut change = |t: &mut Tracer, fid: u32, now: Time| {
            t.rate_changed(FlowId::new(fid), now, || {
                asked += 1;
                sample(fid)
            })
        };
        change(&mut t, 0, 0); // not traced
        change(&mut t, 1, 0); // row
        change(&mut t, 1, 50); // too soon
        change(&mut t, 3, 60); // row (its own interval)
        change(&mut t, 1, 100); // row
        assert_eq!(asked, 3, "the congestion control is read only for a row");
        let b = t.traces.rates.as_mut().unwrap().batches().unwrap();
        let times: Vec<i64> = b
            .iter()
            .flat_map(|b| {
                let c = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
                c.values().to_vec()
            })
            .collect();
        assert_eq!(times, vec![0, 60, 100]);
    }

    #[test]
    fn links_rows_carry_what_happened_since_the_previous_sample() {
        let mut t = Tracer::new(spec(), false, false, 1, 0);
        let at = |tx: u64, paused: u64| LinkSample {
            link: LinkId::new(0),
            node: NodeId::new(4),
            peer_node: NodeId::new(0),
            tier: Tier::Host,
            rate_bps: 8_000_000_000, // 1 byte per ns
            tx_bytes: tx,
            paused_ps: paused,
        };
        assert_eq!(
            t.sample_links(1_000_000, std::iter::once(at(500, 10))),
            Some(1_000_000)
        );
        assert_eq!(
            t.sample_links(2_000_000, std::iter::once(at(1500, 30))),
            Some(1_000_000)
        );
        let b = &t.traces.links.as_mut().unwrap().batches().unwrap()[0];
        let col = |name: &str| b.column(b.schema().index_of(name).unwrap()).clone();
        let tx = col("tx_bytes");
        let tx = tx.as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(tx.values().to_vec(), vec![500, 1000]);
        let u = col("utilisation");
        let u = u.as_any().downcast_ref::<Float64Array>().unwrap();
        assert!((u.value(0) - 0.5).abs() < 1e-9 && (u.value(1) - 1.0).abs() < 1e-9);
        let paused = col("paused_ps");
        let paused = paused.as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(paused.values().to_vec(), vec![10, 20]);
        assert_eq!(paused.len(), 2);
    }

    #[test]
    fn queues_rows_skip_nic_ports_and_empty_classes_unless_asked() {
        use crate::packet::{Packet, PacketArena};
        let mut arena = PacketArena::default();
        let mut q = [PortQueue::default(), PortQueue::default()];
        for (port, class) in [(0usize, 3u8), (1, 3), (1, 3)] {
            let id = arena.alloc(Packet::data(
                FlowId::new(0),
                0,
                NodeId::new(1),
                0,
                1000,
                class,
                false,
            ));
            q[port].push(&mut arena, id, class, 1000);
        }
        let mut t = Tracer::new(spec(), false, false, 2, 0);
        let from_host = [true, false];
        let ports = q.iter_mut().enumerate().map(|(p, q)| {
            let port = PortId::new(p as u32);
            (port, NodeId::new(7 + p as u32), from_host[p], q)
        });
        assert_eq!(t.sample_queues(42, ports), Some(1_000));
        let b = &t.traces.queues.as_mut().unwrap().batches().unwrap()[0];
        assert_eq!(
            b.num_rows(),
            1,
            "the NIC's queue and the empty classes are left out"
        );
        let col = |name: &str| {
            let c = b.column(b.schema().index_of(name).unwrap()).clone();
            c.as_any().downcast_ref::<Int64Array>().unwrap().value(0)
        };
        assert_eq!(
            (col("time_ps"), col("bytes"), col("max_bytes")),
            (42, 2000, 2000)
        );
    }

    #[test]
    fn untraced_tables_take_no_rows_and_stop_their_sampler() {
        let none = TraceSpec {
            unfinished_flows: false,
            queues: None,
            pfc: true,
            links_interval_ps: None,
            rates: Some(RatesTraceSpec {
                flows: None,
                interval_ps: 0,
            }),
            packets: None,
            latency: false,
        };
        // PFC traced but off in the switch; rates traced but the scheme reports none.
        let mut t = Tracer::new(none, false, false, 2, 2);
        assert!(t.traces.pfc.is_none() && t.traces.rates.is_none());
        let (n, p) = (NodeId::new, PortId::new);
        t.pfc_frame(5, n(4), p(1), n(5), p(2), 3, true);
        t.rate_changed(FlowId::new(0), 5, || {
            panic!("no rates table: nothing to sample")
        });
        let mut q = [PortQueue::default(), PortQueue::default()];
        let ports = q.iter_mut().map(|q| (p(0), n(4), false, q));
        assert_eq!(t.sample_queues(5, ports), None);
        assert_eq!(t.sample_links(5, std::iter::empty()), None);
    }

    #[test]
    fn the_first_write_error_is_reported_by_finish_once() {
        let mut t = Tracer::new(spec(), true, true, 1, 1);
        let first = io::Error::other("disk full");
        t.keep_error(Err(first));
        t.keep_error(Err(io::Error::other("later")));
        let dir = std::env::temp_dir().join(format!("fabricemu-tracer-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let e = t.finish(&dir, &[]).unwrap_err();
        assert_eq!(e.to_string(), "disk full");
        // Reported once: a later finish writes the tables.
        t.finish(&dir, &[]).unwrap();
        assert!(dir.join("queues.arrow").exists() && dir.join("rates.arrow").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
