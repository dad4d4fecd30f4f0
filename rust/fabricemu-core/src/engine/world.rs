//! The World: every piece of simulation state in flat arrays indexed by port, node, flow or packet
//! id, and the handlers of each event. Components schedule only themselves: a port has at most one
//! pending `PortFree`; a link holds its packets in flight in a FIFO, with one `LinkArrival` per
//! packet (see `transmit` for why not one per link).

use std::collections::VecDeque;

use super::queue::{Event, EventQueue};
use super::RunStats;
use crate::packet::{Packet, PacketArena, PacketId, PacketKind, PacketList, NIL};
use crate::rng::{self, Purpose};
use crate::routing::{header_key, Router, ROCE_UDP_PORT};
use crate::scenario::{Scenario, StopAt};
use crate::switch::{Buffers, PortQueue, CONTROL_PRIORITY, DATA_PRIORITY};
use crate::topology::{self, Fabric, NodeId, PortId};
use crate::transport::ideal::{ideal_fct, Hop};
use crate::transport::{segment, Flow, NEVER, NO_BARRIER};
use crate::units::Time;
use crate::workload::{self, Start};

/// What the per-packet path reads of a port, in one cache line.
#[derive(Debug, Clone, Copy)]
struct PortHot {
    /// When the packet being serialised ends (the port is free from then on).
    busy_until: Time,
    /// Serialisation end -> reception at the far end: propagation plus the far switch's latency.
    arrival_delay: Time,
    rate_bps: u64,
    /// Exact serialisation time per byte, or 0 when the rate does not divide 8e12.
    ps_per_byte: u64,
    node: NodeId,
    peer_node: NodeId,
    /// Whether a `PortFree` event is scheduled.
    free_pending: bool,
    from_host: bool,
    to_host: bool,
    /// Packets on the link, in arrival order (the delay is constant).
    pipe: PacketList,
}

/// Flows waiting for a set of other flows to finish.
#[derive(Debug, Default)]
struct Barrier {
    remaining: u32,
    waiting: Vec<(u32, Time)>,
}

pub struct World {
    pub fabric: Fabric,
    router: Router,
    packets: PacketArena,
    events: EventQueue,
    pub now: Time,
    stop: StopAt,

    // Per port.
    ports: Vec<PortHot>,
    queues: Vec<PortQueue>,
    buffers: Buffers,

    // Per host: active flows served round robin (the front was served last if `nic_rotate`).
    nic_ring: Vec<VecDeque<u32>>,
    nic_rotate: Vec<bool>,

    // Flows.
    pub flows: Vec<Flow>,
    /// Flows with a fixed start, sorted by (start, id); `next_static` is the next to start.
    static_order: Vec<u32>,
    next_static: usize,
    barriers: Vec<Barrier>,

    // Transport settings.
    mtu: u32,
    header: u32,
    ack_bytes: u32,
    ack_every: u32,
    rto: Time,

    pub stats: RunStats,
    finished: bool,
}

impl World {
    pub fn new(s: &Scenario) -> Self {
        let fabric = topology::build(&s.topology, &s.switch);
        let router = Router::new(&fabric, s.routing.load_balancing, s.seed);
        let np = fabric.num_ports() as usize;
        let ports = (0..np)
            .map(|p| {
                let far = fabric.peer_node[p];
                let rate = fabric.rate_bps[p];
                let bits_ps = 8 * crate::units::PS_PER_SEC;
                let latency = if fabric.is_host(far) {
                    0
                } else {
                    s.switch.latency_ps
                };
                PortHot {
                    busy_until: 0,
                    arrival_delay: fabric.delay_ps[p] + latency,
                    rate_bps: rate,
                    ps_per_byte: if bits_ps.is_multiple_of(rate) {
                        bits_ps / rate
                    } else {
                        0
                    },
                    node: fabric.port_node[p],
                    peer_node: far,
                    free_pending: false,
                    from_host: fabric.is_host(fabric.port_node[p]),
                    to_host: fabric.is_host(far),
                    pipe: PacketList::EMPTY,
                }
            })
            .collect();
        let t = &s.transport;
        let plan = workload::plan(&s.workloads, s.seed);
        let mut sport_rng = rng::stream(s.seed, Purpose::SourcePort, 0);
        let mut flows = Vec::with_capacity(plan.flows.len());
        let mut barriers: Vec<Barrier> = plan
            .barrier_sizes
            .iter()
            .map(|&n| Barrier {
                remaining: n,
                waiting: Vec::new(),
            })
            .collect();
        let mut static_order = Vec::new();
        for (id, f) in plan.flows.iter().enumerate() {
            // RoCEv2 NICs put per-queue-pair entropy in the UDP source port (49152..65535).
            let sport = 49152 + sport_rng.below(16384) as u16;
            let (num_packets, last_payload) = segment(f.size_bytes, t.mtu_bytes);
            let start = match f.start {
                Start::At(t) => {
                    static_order.push(id as u32);
                    t
                }
                Start::After { barrier, gap } => {
                    barriers[barrier as usize].waiting.push((id as u32, gap));
                    NEVER
                }
            };
            flows.push(Flow {
                src: f.src,
                dst: f.dst,
                size_bytes: f.size_bytes,
                start,
                num_packets,
                last_payload,
                header_fwd: header_key(f.src, f.dst, sport, ROCE_UDP_PORT),
                header_rev: header_key(f.dst, f.src, ROCE_UDP_PORT, sport),
                workload: f.workload,
                completes: f.completes.unwrap_or(NO_BARRIER),
                next_seq: 0,
                high_seq: 0,
                acked: 0,
                in_nic_ring: false,
                rto_deadline: NEVER,
                rto_armed: false,
                started: false,
                expected: 0,
                nacked_at: u32::MAX,
                finish: NEVER,
                packets_sent: 0,
                retransmits: 0,
                drops: 0,
            });
        }
        static_order.sort_by_key(|&id| (flows[id as usize].start, id));
        let mut events = EventQueue::new();
        if let Some(&first) = static_order.first() {
            events.push(flows[first as usize].start, Event::NextFlowStarts);
        }
        let stats = RunStats {
            flows_total: flows.len() as u64,
            ..RunStats::default()
        };
        World {
            router,
            packets: PacketArena::default(),
            events,
            now: 0,
            stop: s.stop,
            ports,
            queues: (0..np).map(|_| PortQueue::default()).collect(),
            buffers: Buffers::new(
                fabric.num_nodes,
                s.switch.buffer_bytes,
                s.switch.port_buffer_bytes,
            ),
            nic_ring: (0..fabric.num_hosts).map(|_| VecDeque::new()).collect(),
            nic_rotate: vec![false; fabric.num_hosts as usize],
            flows,
            static_order,
            next_static: 0,
            barriers,
            mtu: t.mtu_bytes as u32,
            header: t.header_bytes as u32,
            ack_bytes: t.ack_bytes as u32,
            ack_every: t.ack_every,
            rto: t.rto_ps,
            stats,
            finished: false,
            fabric,
        }
    }

    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Process up to `max_events` events; returns true when the run is over.
    pub fn run_events(&mut self, max_events: u64) -> bool {
        for _ in 0..max_events {
            if self.finished {
                break;
            }
            if self.stop == StopAt::AllFlowsDone
                && self.stats.flows_finished == self.stats.flows_total
            {
                self.finish_run();
                break;
            }
            let Some(t) = self.events.peek_time() else {
                self.finish_run();
                break;
            };
            if let StopAt::Time(stop) = self.stop {
                if t > stop {
                    self.now = stop;
                    self.finish_run();
                    break;
                }
            }
            let (t, ev) = self.events.pop().expect("peeked");
            self.now = t;
            self.stats.events += 1;
            match ev {
                Event::LinkArrival(p) => self.link_arrival(p),
                Event::PortFree(p) => {
                    self.ports[p as usize].free_pending = false;
                    self.start_next(p);
                }
                Event::NextFlowStarts => self.start_static_flows(),
                Event::FlowStart(f) => self.start_flow(f),
                Event::Retransmit(f) => self.retransmit_timer(f),
            }
        }
        self.finished
    }

    fn finish_run(&mut self) {
        self.finished = true;
        self.stats.simulated_ps = self.now;
    }

    /// Counters, with the in-flight figures taken now.
    pub fn stats(&self) -> RunStats {
        let mut s = self.stats.clone();
        s.simulated_ps = self.now;
        s.packets_created = self.packets.created();
        s.packets_in_flight = self.packets.live();
        s
    }

    /// Every live packet is in exactly one queue or on one link: count them there and compare with
    /// the arena (and created = delivered + dropped + live).
    pub fn check_conservation(&self) -> Result<(), String> {
        let queued: u64 = self
            .queues
            .iter()
            .map(|q| q.len(&self.packets) as u64)
            .sum();
        let on_links: u64 = self
            .ports
            .iter()
            .map(|p| p.pipe.len(&self.packets) as u64)
            .sum();
        let live = self.packets.live();
        if queued + on_links != live {
            return Err(format!(
                "{queued} queued + {on_links} on links != {live} live packets"
            ));
        }
        let s = &self.stats;
        if self.packets.created() != s.packets_delivered + s.packets_dropped + live {
            return Err(format!(
                "created {} != delivered {} + dropped {} + in flight {live}",
                self.packets.created(),
                s.packets_delivered,
                s.packets_dropped
            ));
        }
        Ok(())
    }

    // ---- ports and links -------------------------------------------------------------------

    #[inline]
    fn port_idle(&self, p: PortId) -> bool {
        let p = p as usize;
        let port = &self.ports[p];
        !port.free_pending && port.busy_until <= self.now && self.queues[p].is_empty()
    }

    /// More to send after the current packet?
    #[inline]
    fn port_has_work(&self, p: PortId) -> bool {
        if !self.queues[p as usize].is_empty() {
            return true;
        }
        let port = &self.ports[p as usize];
        port.from_host && !self.nic_ring[port.node as usize].is_empty()
    }

    /// The port is free: send the next packet, if any, and wake up again when it is out.
    fn start_next(&mut self, p: PortId) {
        let PortHot {
            node, from_host, ..
        } = self.ports[p as usize];
        let pkt = match self.queues[p as usize].pop(&self.packets) {
            Some(pkt) => {
                let w = self.packets.get(pkt).wire_bytes;
                self.queues[p as usize].dequeued(w);
                if !from_host {
                    self.buffers.used[node as usize] -= w as u64;
                }
                pkt
            }
            None if from_host => match self.nic_next_data(node) {
                Some(pkt) => pkt,
                None => return,
            },
            None => return,
        };
        self.transmit(p, pkt);
        if self.port_has_work(p) {
            let port = &mut self.ports[p as usize];
            port.free_pending = true;
            self.events
                .push_after(port.busy_until - self.now, Event::PortFree(p));
        }
    }

    /// Serialise `pkt` on `p` from now; it reaches the far end after serialisation and delay.
    #[inline]
    fn transmit(&mut self, p: PortId, pkt: PacketId) {
        let pu = p as usize;
        let packet = self.packets.get_mut(pkt);
        let w = packet.wire_bytes as u64;
        let port = &mut self.ports[pu];
        // Exact: a whole number of ps per byte when the rate divides 8e12 bit-ps (all usual rates).
        let ser = if port.ps_per_byte != 0 {
            w * port.ps_per_byte
        } else {
            crate::units::serialisation_ps(w, port.rate_bps)
        };
        port.busy_until = self.now + ser;
        let arrive = self.now + ser + port.arrival_delay;
        packet.arrive = arrive;
        // One arrival event per packet on the wire. Its delay (serialisation + propagation) takes
        // only a few distinct values, so it lands in an O(1) FIFO lane of the event queue;
        // scheduling only the link's head instead would need the gap to the next packet, an
        // arbitrary delay that costs a heap operation (measured: 15% of the run).
        self.events
            .push_after(arrive - self.now, Event::LinkArrival(p));
        port.pipe.push_back(&mut self.packets, pkt);
    }

    fn link_arrival(&mut self, p: PortId) {
        let port = &mut self.ports[p as usize];
        let pkt = port
            .pipe
            .pop_front(&self.packets)
            .expect("a link arrival has a packet");
        debug_assert_eq!(self.packets.get(pkt).arrive, self.now);
        self.stats.packet_hops += 1;
        let PortHot {
            peer_node: node,
            to_host,
            ..
        } = self.ports[p as usize];
        if to_host {
            self.host_receive(pkt);
        } else {
            let out = self.router.next_port(node, self.packets.get(pkt));
            self.enqueue(out, pkt);
        }
    }

    /// Queue `pkt` on egress port `p` (drop-tail at switches), or send it at once if `p` is idle.
    fn enqueue(&mut self, p: PortId, pkt: PacketId) {
        if self.port_idle(p) {
            self.transmit(p, pkt);
            return;
        }
        let &Packet {
            wire_bytes,
            priority,
            ..
        } = self.packets.get(pkt);
        let node = self.fabric.port_node[p as usize];
        let q = &mut self.queues[p as usize];
        if !self.fabric.is_host(node) {
            if !self.buffers.admit(node, q.bytes, wire_bytes as u64) {
                self.drop_packet(pkt);
                return;
            }
            self.buffers.used[node as usize] += wire_bytes as u64;
            self.stats.max_queue_bytes =
                self.stats.max_queue_bytes.max(q.bytes + wire_bytes as u64);
        }
        q.push(&mut self.packets, pkt, priority, wire_bytes);
        let port = &mut self.ports[p as usize];
        if !port.free_pending {
            port.free_pending = true;
            self.events.push(port.busy_until, Event::PortFree(p));
        }
    }

    fn drop_packet(&mut self, pkt: PacketId) {
        let p = *self.packets.get(pkt);
        if p.kind == PacketKind::Data {
            self.flows[p.flow as usize].drops += 1;
        }
        self.stats.packets_dropped += 1;
        self.packets.release(pkt);
    }

    // ---- NIC: sending ----------------------------------------------------------------------

    /// The next data packet of host `h`, round robin over its flows with data to send. The flow
    /// served last stays at the front until the next choice, so a flow that became active meanwhile
    /// is served before it again.
    fn nic_next_data(&mut self, h: NodeId) -> Option<PacketId> {
        let ring = &mut self.nic_ring[h as usize];
        if std::mem::take(&mut self.nic_rotate[h as usize]) {
            if let Some(fid) = ring.pop_front() {
                ring.push_back(fid);
            }
        }
        while let Some(&fid) = ring.front() {
            let f = &mut self.flows[fid as usize];
            if !f.has_data_to_send() {
                f.in_nic_ring = false;
                ring.pop_front();
                continue;
            }
            let seq = f.next_seq;
            f.next_seq += 1;
            if seq < f.high_seq {
                f.retransmits += 1;
                self.stats.retransmitted_packets += 1;
            } else {
                f.high_seq = seq + 1;
            }
            f.packets_sent += 1;
            self.nic_rotate[h as usize] = true;
            let payload = f.payload_of(seq, self.mtu);
            let pkt = Packet {
                header_key: f.header_fwd,
                arrive: 0,
                next: NIL,
                flow: fid,
                seq,
                dst: f.dst,
                wire_bytes: payload + self.header,
                kind: PacketKind::Data,
                priority: DATA_PRIORITY,
            };
            self.stats.data_packets_sent += 1;
            return Some(self.packets.alloc(pkt));
        }
        None
    }

    /// Put flow `f` in its NIC's round robin if it has data, and wake the NIC if it is idle.
    fn activate(&mut self, fid: u32) {
        let f = &mut self.flows[fid as usize];
        if f.in_nic_ring || !f.has_data_to_send() {
            return;
        }
        f.in_nic_ring = true;
        let h = f.src;
        self.nic_ring[h as usize].push_back(fid);
        let p = self.fabric.host_port(h);
        if self.port_idle(p) {
            self.start_next(p);
        }
    }

    fn start_static_flows(&mut self) {
        while let Some(&fid) = self.static_order.get(self.next_static) {
            let start = self.flows[fid as usize].start;
            if start > self.now {
                self.events.push(start, Event::NextFlowStarts);
                return;
            }
            self.next_static += 1;
            self.start_flow(fid);
        }
    }

    fn start_flow(&mut self, fid: u32) {
        let now = self.now;
        let f = &mut self.flows[fid as usize];
        f.start = now;
        f.started = true;
        f.rto_deadline = now + self.rto;
        f.rto_armed = true;
        self.stats.flows_started += 1;
        self.events.push_after(self.rto, Event::Retransmit(fid));
        self.activate(fid);
    }

    fn retransmit_timer(&mut self, fid: u32) {
        let now = self.now;
        let f = &mut self.flows[fid as usize];
        if f.sender_done() {
            f.rto_armed = false;
            return;
        }
        if f.rto_deadline > now {
            self.events.push(f.rto_deadline, Event::Retransmit(fid));
            return;
        }
        // No acknowledged progress for a whole timeout: go back to the first unacknowledged packet.
        self.stats.timeouts += 1;
        f.next_seq = f.acked;
        f.rto_deadline = now + self.rto;
        self.events.push_after(self.rto, Event::Retransmit(fid));
        self.activate(fid);
    }

    // ---- NIC: receiving --------------------------------------------------------------------

    fn host_receive(&mut self, pkt: PacketId) {
        let p = *self.packets.get(pkt);
        self.packets.release(pkt);
        self.stats.packets_delivered += 1;
        match p.kind {
            PacketKind::Data => self.receive_data(p.flow, p.seq),
            PacketKind::Ack => self.receive_ack(p.flow, p.seq),
            PacketKind::Nack => self.receive_nack(p.flow, p.seq),
        }
    }

    fn receive_data(&mut self, fid: u32, seq: u32) {
        let f = &mut self.flows[fid as usize];
        if seq == f.expected {
            f.expected += 1;
            if f.expected == f.num_packets {
                f.finish = self.now;
                self.stats.flows_finished += 1;
                let barrier = f.completes;
                self.send_control(fid, PacketKind::Ack);
                if barrier != NO_BARRIER {
                    self.barrier_arrive(barrier);
                }
            } else if f.expected.is_multiple_of(self.ack_every) {
                self.send_control(fid, PacketKind::Ack);
            }
        } else if seq > f.expected {
            // A gap: go-back-N receivers discard out-of-order packets and NACK once per gap.
            if f.nacked_at != f.expected {
                f.nacked_at = f.expected;
                self.send_control(fid, PacketKind::Nack);
            }
        } else {
            // A duplicate (after a retransmission): re-acknowledge so the sender moves on.
            self.send_control(fid, PacketKind::Ack);
        }
    }

    fn send_control(&mut self, fid: u32, kind: PacketKind) {
        let f = &self.flows[fid as usize];
        let pkt = Packet {
            header_key: f.header_rev,
            arrive: 0,
            next: NIL,
            flow: fid,
            seq: f.expected,
            dst: f.src,
            wire_bytes: self.ack_bytes,
            kind,
            priority: CONTROL_PRIORITY,
        };
        let port = self.fabric.host_port(f.dst);
        self.stats.control_packets_sent += 1;
        let id = self.packets.alloc(pkt);
        self.enqueue(port, id);
    }

    fn receive_ack(&mut self, fid: u32, cumulative: u32) {
        let f = &mut self.flows[fid as usize];
        if cumulative > f.acked {
            f.acked = cumulative;
            f.rto_deadline = self.now + self.rto;
            if f.next_seq < cumulative {
                f.next_seq = cumulative;
            }
        }
    }

    fn receive_nack(&mut self, fid: u32, expected: u32) {
        self.receive_ack(fid, expected);
        let f = &mut self.flows[fid as usize];
        if expected < f.next_seq {
            f.next_seq = expected;
            self.activate(fid);
        }
    }

    fn barrier_arrive(&mut self, b: u32) {
        let barrier = &mut self.barriers[b as usize];
        barrier.remaining -= 1;
        if barrier.remaining == 0 {
            for &(fid, gap) in &barrier.waiting {
                self.events.push(self.now + gap, Event::FlowStart(fid));
            }
        }
    }

    // ---- reporting ---------------------------------------------------------------------------

    /// The hops flow `fid`'s data packets take (the ECMP path its header hashes to).
    pub fn flow_path(&self, fid: u32) -> Vec<Hop> {
        self.flow_path_ports(fid)
            .into_iter()
            .map(|p| Hop {
                rate_bps: self.fabric.rate_bps[p as usize],
                delay_ps: self.ports[p as usize].arrival_delay,
            })
            .collect()
    }

    /// The egress ports flow `fid`'s data packets take, from its source NIC on.
    pub fn flow_path_ports(&self, fid: u32) -> Vec<PortId> {
        let f = &self.flows[fid as usize];
        let probe = self.probe_packet(fid);
        let mut ports = vec![self.fabric.host_port(f.src)];
        loop {
            let node = self.fabric.peer_node[*ports.last().expect("non-empty") as usize];
            if self.fabric.is_host(node) {
                return ports;
            }
            ports.push(self.router.next_port(node, &probe));
        }
    }

    fn probe_packet(&self, fid: u32) -> Packet {
        let f = &self.flows[fid as usize];
        Packet {
            header_key: f.header_fwd,
            arrive: 0,
            next: NIL,
            flow: fid,
            seq: 0,
            dst: f.dst,
            wire_bytes: 0,
            kind: PacketKind::Data,
            priority: DATA_PRIORITY,
        }
    }

    /// Ideal FCT of flow `fid`: alone on its path.
    pub fn ideal_fct(&self, fid: u32) -> Time {
        let f = &self.flows[fid as usize];
        let hops = self.flow_path(fid);
        ideal_fct(
            &hops,
            f.num_packets,
            (self.mtu + self.header) as u64,
            (f.last_payload + self.header) as u64,
        )
    }

    /// Arena high-water mark (packets).
    pub fn packet_capacity(&self) -> usize {
        self.packets.capacity()
    }

    pub fn pending_events(&self) -> usize {
        self.events.len()
    }
}
