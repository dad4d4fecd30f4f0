//! The World: every piece of simulation state in flat arrays indexed by port, node, flow or packet
//! id, grouped into parts owned by their modules (the router, switches, NICs, congestion control,
//! faults, the tracer) that the World lends to each other. The handlers of each event live beside
//! it: `ports.rs` (queues, links, switches, PFC, ECN), `forwarding.rs` (dispatch to
//! `Router::choose`), `nic.rs` (sending, receiving, loss recovery, congestion control),
//! `faults.rs` and `sampling.rs` (the trace samples, lent to the tracer, and the deadlock
//! detector). Components schedule only themselves: a port has one pending wake-up
//! (`wake_at`); a link holds its packets in flight in a FIFO, with one `LinkArrival` per packet
//! (see `transmit` for why not one per link).

pub(super) use super::barriers::Barrier;
use super::barriers::BarrierLinks;
use super::circuits::Circuits;
use super::faults::{Fault, Faults};
use super::flows::FlowTable;
use super::queue::{Event, EventQueue};
use super::RunStats;
use crate::cc::Cc;
use crate::ids::{FlowId, IdVec, NodeId, PortId};
use crate::packet::{flags, PacketArena, PacketList};
use crate::rng::RngStream;
use crate::routing::{header_key, Header, Router, ROCE_UDP_PORT};
use crate::scenario::{LossRecovery, Scenario, Scheduler, StopAt};
use crate::switch::pfc::Pfc;
use crate::switch::queue::DwrrState;
use crate::switch::{PortQueue, SharedBuffer, Switches, NUM_PRIORITIES};
use crate::topology::faults::LinkFault;
use crate::topology::Fabric;
use crate::trace::Tracer;
use crate::transport::ideal::{ideal_fct, Hop};
use crate::transport::{segment, Flow, Nics, TransportParams, NEVER};
use crate::units::Time;
use crate::workload::{FlowPlan, Start};
use std::sync::Arc;

/// The per-port hot record stays one cache line with typed ids.
const _: () = assert!(std::mem::size_of::<PortHot>() == 64);

/// What the per-packet path reads of a port, in one cache line: aligned to one, since a 64-byte
/// record at the allocator's 16-byte alignment would straddle two lines and cost two misses.
#[derive(Debug, Clone, Copy)]
#[repr(align(64))]
pub(super) struct PortHot {
    /// When the packet being serialised ends (the port is free from then on).
    pub busy_until: Time,
    /// Serialisation end -> reception at the far end: propagation plus the far switch's latency.
    pub arrival_delay: Time,
    /// Exact serialisation time per byte, or 0 when the rate does not divide 8e12.
    pub ps_per_byte: u64,
    /// Bytes sent so far (for links.arrow).
    pub tx_bytes: u64,
    /// The port's one pending `PortFree` is for this time (NEVER: none). An event for another
    /// time is stale and ignored, which lets a wake-up be moved earlier.
    pub wake_at: Time,
    pub node: NodeId,
    pub peer_node: NodeId,
    /// Packets on the link, in arrival order (the delay is constant).
    pub pipe: PacketList,
    /// Priorities paused by the downstream node's PFC.
    pub paused: u8,
    pub from_host: bool,
    pub to_host: bool,
    /// The far end is a scale-up switch (it forwards by the cluster layout, not the route table).
    pub to_scaleup: bool,
    /// A scale-up switch's link to a GPU that may relay PXN packets onto its NIC.
    pub to_relay: bool,
    /// The link is down (a fault): nothing is sent on it.
    pub down: bool,
    /// A loss fault covers the link now: each packet that crosses it may be corrupted.
    pub lossy: bool,
    /// The far end belongs to another partition (the parallel engine): packets leave this
    /// world through its outbox.
    pub remote: bool,
}

/// GPU clusters, PXN: where one direction of a flow (its data, or its control packets back) leaves
/// the scale-up switch (toward the relay GPU) and the relay GPU (its NIC port).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct PxnHops {
    pub switch_out: PortId,
    pub relay_out: PortId,
}

/// A flow's PXN hops: `[data, control]`, None for a direction that is not PXN.
pub(super) type FlowPxn = [Option<PxnHops>; 2];

/// Where a flow's packets leave its two ends (see [`crate::topology::ClusterLayout::first_hop`]).
struct EndpointPorts {
    src_port: PortId,
    dst_port: PortId,
    /// `World::pxn`'s entry.
    pxn: FlowPxn,
    /// The flow's line rate: its first link's, and with PXN at most the relay NIC's.
    rate_bps: u64,
}

fn endpoint_ports(fabric: &Fabric, src: NodeId, dst: NodeId, fwd: u64, rev: u64) -> EndpointPorts {
    let Some(c) = fabric.cluster.as_deref() else {
        let src_port = fabric.host_port(src);
        return EndpointPorts {
            src_port,
            dst_port: fabric.host_port(dst),
            pxn: [None; 2],
            rate_bps: fabric.rate_bps[src_port],
        };
    };
    let (src_port, src_relay) = c.first_hop(src, dst, fwd);
    let (dst_port, dst_relay) = c.first_hop(dst, src, rev);
    // At the scale-up switch: the port to the relay; at the relay: its NIC port.
    let hops = |relay: Option<NodeId>, key: u64| {
        relay.map(|r| {
            let up = c.scaleup_port(r).expect("a relay is in a scale-up domain");
            PxnHops {
                switch_out: fabric.peer_port[up],
                relay_out: c.nic_port(r, key),
            }
        })
    };
    let data = hops(src_relay, fwd);
    let control = hops(dst_relay, rev);
    let mut rate_bps = fabric.rate_bps[src_port];
    if let Some(h) = data {
        rate_bps = rate_bps.min(fabric.rate_bps[h.relay_out]);
    }
    EndpointPorts {
        src_port,
        dst_port,
        pxn: [data, control],
        rate_bps,
    }
}

/// The ECMP hash keys of a flow's two directions (data, then control), from its header entropy.
fn header_keys(
    routing: &crate::scenario::RoutingSpec,
    f: &crate::workload::FlowInit,
    sport: u16,
    flow_label: u32,
) -> (u64, u64) {
    let header = Header {
        src: f.src,
        dst: f.dst,
        sport,
        dport: ROCE_UDP_PORT,
        flow_label,
    };
    (
        header_key(routing, header),
        header_key(routing, header.reversed()),
    )
}

/// The state of a new flow from its plan entry, with the header entropy drawn for it (UDP source
/// port, flow label), and its PXN hops. A flow waiting on a barrier starts at NEVER.
pub(super) fn new_flow(
    fabric: &Fabric,
    routing: &crate::scenario::RoutingSpec,
    t: &crate::scenario::TransportSpec,
    f: &crate::workload::FlowInit,
    sport: u16,
    flow_label: u32,
) -> (Flow, FlowPxn) {
    let (num_packets, last_payload) = segment(f.size_bytes, t.mtu_bytes);
    let start = match f.start {
        Start::At(t) => t,
        Start::After { .. } => NEVER,
    };
    let (header_fwd, header_rev) = header_keys(routing, f, sport, flow_label);
    let ends = endpoint_ports(fabric, f.src, f.dst, header_fwd, header_rev);
    let flow = Flow {
        src: f.src,
        dst: f.dst,
        src_port: ends.src_port,
        dst_port: ends.dst_port,
        size_bytes: f.size_bytes,
        start,
        num_packets,
        last_payload,
        header_fwd,
        header_rev,
        workload: f.workload,
        completes: f.completes,
        next_seq: 0,
        high_seq: 0,
        acked: 0,
        in_nic_ring: false,
        rto_deadline: NEVER,
        rto_armed: false,
        started: false,
        expected: 0,
        nacked_at: None,
        finish: NEVER,
        rate_bps: ends.rate_bps,
        next_send: 0,
        resend: Vec::new(),
        received_ahead: Vec::new(),
        reorder_threshold: t.reorder_threshold,
        reorder_window: 0,
        hole_since: NEVER,
        window_bytes: None,
        rtt_probe: None,
        ce_unechoed: false,
        packets_sent: 0,
        retransmits: 0,
        drops: 0,
        ecn_marks: 0,
        cnps: 0,
        out_of_order: 0,
        max_reorder: 0,
        trim_nacks: 0,
        unreachable_drops: 0,
        abandoned: false,
        packets_alive: 0,
        withdrawn: false,
        long_at_receiver: false,
    };
    (flow, ends.pxn)
}

/// The PXN hops of a flow with plan entry `f` and header entropy (`sport`, `flow_label`): those
/// of [`new_flow`], without making its record.
pub(super) fn flow_pxn(
    fabric: &Fabric,
    routing: &crate::scenario::RoutingSpec,
    f: &crate::workload::FlowInit,
    sport: u16,
    flow_label: u32,
) -> FlowPxn {
    let (fwd, rev) = header_keys(routing, f, sport, flow_label);
    endpoint_ports(fabric, f.src, f.dst, fwd, rev).pxn
}

/// Whether `fabric` is a GPU cluster whose flows may cross rails through a PXN relay.
fn has_pxn(fabric: &Fabric) -> bool {
    (fabric.cluster.as_deref())
        .is_some_and(|c| c.spec.cross_rail == crate::config::CrossRail::Pxn && c.domains > 0)
}

/// What a run's worlds derive alike from its plan at the build, made once: the view and every
/// partition of a parallel run share it (each made its own until 2026-12-05: a 163,840-flow
/// training run on two threads spent 2.9 % of its instructions on the three, and each world
/// kept 32 bytes per flow and 16 per barrier link of them).
pub(super) struct PlanDerived {
    /// Per flow, in flow-id order (planned flows, then streamed ones): the UDP source port and
    /// flow label its ECMP header hashes (RoCEv2 NICs put per-queue-pair entropy in the source
    /// port, 49152..65535).
    entropy: Arc<Vec<(u16, u32)>>,
    /// Per planned flow on a GPU cluster with PXN, its PXN hops (the relays read them for every
    /// packet of it, wherever they are); empty otherwise.
    pxn: Arc<IdVec<FlowId, FlowPxn>>,
    /// The flows waiting for each barrier and the barriers chained after it.
    links: BarrierLinks,
}

impl PlanDerived {
    pub(super) fn of(s: &Scenario, fabric: &Fabric, plan: &FlowPlan) -> Self {
        let mut sport_rng = RngStream::SourcePorts.rng(s.seed);
        let mut label_rng = RngStream::FlowLabels.rng(s.seed);
        let entropy: Vec<(u16, u32)> = (0..plan.total_flows())
            .map(|_| {
                let sport = 49152 + sport_rng.below(16384) as u16;
                (sport, label_rng.below(1 << 20) as u32)
            })
            .collect();
        let mut pxn = IdVec::new();
        if has_pxn(fabric) {
            pxn.reserve(plan.flows.len());
            for (f, &(sport, label)) in plan.flows.iter().zip(&entropy) {
                pxn.push(flow_pxn(fabric, &s.routing, f, sport, label));
            }
        }
        Self {
            entropy: Arc::new(entropy),
            pxn: Arc::new(pxn),
            links: BarrierLinks::of_plan(plan),
        }
    }
}

/// What makes a flow's record when it starts, in runs that retire flows (see `engine::flows`).
pub(super) struct FlowMaker {
    /// The plan's flows, by flow id (shared with the Simulation's plan, not a copy; taken again
    /// when the plan grows by what elastic re-plans appended, [`FlowMaker::take_plan`]).
    pub inits: crate::workload::PlanFlows,
    /// The first streamed flow's id (streamed flows: up to `entropy.len()`).
    pub first_streamed: usize,
    /// Per flow: the UDP source port and flow label drawn for it at the build (in flow-id
    /// order, as for every flow of a run that keeps them all; shared by a parallel run's
    /// worlds, [`PlanDerived`]).
    pub entropy: Arc<Vec<(u16, u32)>>,
    /// Streamed workloads (`workload::stream`; ids on from `inits.len()`), each as it was
    /// before its first draw.
    pub streams: Vec<crate::workload::stream::StreamedFlows>,
    /// Per stream: the generator the run starts its flows from.
    pub heads: Vec<StreamHead>,
    /// Makes streamed flows' entries again for what reads them later (outputs, reports).
    pub cursor: std::sync::Mutex<crate::workload::stream::StreamCursor>,
    /// A partition of a parallel run: the streamed flows other partitions started, by id, until
    /// a packet of theirs first comes in here (their record is made then) or the view retires
    /// them. Every partition runs every stream, starting only its own flows.
    pub foreign: std::collections::HashMap<u32, crate::workload::FlowInit>,
    /// Flows appended by plan amendments (an elastic job's re-plans), ids on from
    /// `entropy.len()`: the header entropy drawn for each at its amendment. Their records are
    /// made as they start, as the plan's are.
    pub appended_entropy: Vec<(u16, u32)>,
    /// The appended flows' entries, from id `appended_from` on, until the plan takes them.
    pub appended: Vec<crate::workload::FlowInit>,
    pub appended_from: usize,
}

/// A streamed workload as the run reaches it: its next flow, that flow's id, and the generator
/// of the rest.
pub(super) struct StreamHead {
    pub id: u32,
    pub end: u32,
    pub next: Option<crate::workload::FlowInit>,
    pub rest: crate::workload::stream::ArrivalStream,
}

impl StreamHead {
    /// When the next flow starts, and its id (None: none left).
    #[inline]
    pub fn peek(&self) -> Option<(Time, FlowId)> {
        match self.next?.start {
            Start::At(t) => Some((t, FlowId::new(self.id))),
            Start::After { .. } => unreachable!("streamed flows start at a fixed time"),
        }
    }

    /// The next flow's entry; the one after it drawn.
    pub fn pop(&mut self) -> crate::workload::FlowInit {
        let f = self.next.take().expect("a flow left");
        self.id += 1;
        self.next = if self.id < self.end {
            self.rest.next()
        } else {
            None
        };
        f
    }
}

impl FlowMaker {
    /// Flow `fid`'s header entropy (UDP source port, flow label), drawn at the build or, for an
    /// appended flow, at its amendment.
    #[inline]
    pub fn entropy_of(&self, fid: FlowId) -> (u16, u32) {
        match fid.index().checked_sub(self.entropy.len()) {
            Some(i) => self.appended_entropy[i],
            None => self.entropy[fid.index()],
        }
    }

    /// Whether flow `fid` is of a streamed workload (made again from its stream).
    pub fn is_streamed(&self, fid: FlowId) -> bool {
        (self.first_streamed..self.entropy.len()).contains(&fid.index())
    }

    /// Appended flow `fid` (its header entropy drawn) with entry `f`.
    pub fn append(&mut self, fid: FlowId, f: crate::workload::FlowInit, entropy: (u16, u32)) {
        debug_assert_eq!(self.appended_from + self.appended.len(), fid.index());
        debug_assert_eq!(
            self.entropy.len() + self.appended_entropy.len(),
            fid.index()
        );
        self.appended.push(f);
        self.appended_entropy.push(entropy);
    }

    /// The plan's flows grew by the appended flows (`Simulation::sync_job_plan`): share them
    /// again, and drop the entries the plan now holds. (Dropped beforehand, `release_plan`, so
    /// that the plan grows in place rather than into a copy.)
    pub fn take_plan(&mut self, flows: &crate::workload::PlanFlows) {
        self.inits = flows.share();
        let held = (self.inits.len().saturating_sub(self.appended_from)).min(self.appended.len());
        self.appended.drain(..held);
        self.appended_from += held;
    }

    /// Let go of the plan's flows for a moment (see [`FlowMaker::take_plan`]).
    pub fn release_plan(&mut self) {
        self.inits = crate::workload::PlanFlows::default();
    }

    /// Flow `fid`'s plan entry (a streamed one made again).
    pub fn init(&self, fid: FlowId) -> crate::workload::FlowInit {
        if let Some(f) = self.inits.get(fid.index()) {
            return *f;
        }
        if let Some(i) = fid.index().checked_sub(self.appended_from) {
            return self.appended[i];
        }
        match self.foreign.get(&fid.get()) {
            Some(f) => *f,
            None => self
                .cursor
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .init(&self.streams, fid.get()),
        }
    }
}

pub struct World {
    pub fabric: Fabric,
    pub(super) router: Router,
    pub(super) packets: PacketArena,
    pub(super) events: EventQueue,
    pub now: Time,
    pub(super) stop: StopAt,

    /// Ask for the state of the events a few places ahead, and work switches' egress ports out
    /// ahead, to prefetch them (prefetch.rs): only where the ports' state outgrows the caches.
    pub(super) look_ahead: bool,

    // Per port.
    pub(super) ports: IdVec<PortId, PortHot>,
    pub(super) queues: IdVec<PortId, PortQueue>,
    /// Per port: when the current pause began (NEVER if not paused) and paused time so far.
    pub(super) pause_since: IdVec<PortId, Time>,
    pub(super) paused_ps: IdVec<PortId, u64>,
    /// Current rate of each port (differs from the fabric's while a link is degraded).
    pub(super) port_rate: IdVec<PortId, u64>,
    /// Link faults: the scenario's, the ports routing avoids, the fault events still to come.
    pub(super) faults: Faults,
    /// The optical circuit switch's circuits (None without `[ocs]`).
    pub(super) circuits: Option<Circuits>,

    /// Switches: shared buffers, PFC, ECN and the egress scheduler.
    pub(super) switches: Switches,
    /// The pause cycle seen at the previous deadlock check.
    pub(super) last_cycle: Option<Vec<u32>>,
    pub(super) in_deadlock: bool,
    pub(super) deadlock_check_pending: bool,

    /// The NICs' arbitration among their active flows.
    pub(super) nics: Nics,
    /// Synthetic workloads: the measurement window and its counters (None without them).
    pub(super) synth: Option<super::synthetic::SynthMeter>,

    // Flows.
    /// Every flow's state: its transport record while it runs, its output row once retired
    /// (see `engine::flows`).
    pub flows: FlowTable,
    /// Runs that retire flows: what makes a flow's record when it starts (None: every flow has
    /// its record from the build on and keeps it).
    pub(super) maker: Option<FlowMaker>,
    /// Flows get their records when they start (a run with `maker`, until `keep_all_flows`);
    /// in a partition of a parallel run, also when a packet of theirs first comes in.
    pub(super) lazy_records: bool,
    /// Flows are retired here when done (a lazy run on one world; a parallel run's view
    /// retires them as it folds the partitions, `Parallel::fold_into`).
    pub(super) retiring: bool,
    /// GPU clusters with PXN, per flow: where its packets leave the scale-up switch and the relay
    /// GPU, data then control (see [`PxnHops`]). Empty without PXN. Shared by a parallel run's
    /// worlds ([`PlanDerived`]); a plan amendment appends to its own copy.
    pub(super) pxn: Arc<IdVec<FlowId, FlowPxn>>,
    /// GPU clusters with PXN: the relay GPUs' transit buffers (None without PXN).
    pub(super) relays: Option<super::relay::Relays>,
    /// Congestion control: the scheme and every flow's sender and receiver state.
    pub(super) cc: Cc,
    /// INT records of packets in flight, when the controller uses INT (HPCC); None otherwise.
    pub(super) int: Option<crate::cc::IntStore>,
    /// In-network collectives: the switches' reduction engines (None without in-network calls).
    pub(super) in_network: Option<super::in_network::InNetwork>,
    /// Calls that fell back when none ran in the network.
    pub(super) inr_fallbacks_only: Option<u64>,
    /// Receiver-driven credits, when `[transport.credits]` asks for them.
    pub(super) credits: Option<crate::transport::credits::Credits>,
    /// Flows with a fixed start, sorted by (start, id); `next_static` is the next to start.
    pub(super) static_order: Vec<FlowId>,
    pub(super) next_static: usize,
    pub(super) barriers: Vec<Barrier>,
    /// Per barrier, the flows waiting for it and the barriers chained after it.
    pub(super) links: BarrierLinks,
    /// Step workloads that react to failures (`on_failure`): their clocks and freezes.
    pub jobs: super::jobs::Jobs,
    /// `BarrierArrive` events not yet handled: a run that waits for every flow also waits for
    /// them (a step graph may end with compute).
    pub(super) pending_arrivals: u64,

    /// Transport settings.
    pub(super) transport: TransportParams,

    /// Tracing: the streamed trace tables and what sampling remembers between rows.
    pub tracer: Tracer,

    pub stats: RunStats,
    /// Flows finished or given up on (`all_flows_done` stops when all are).
    pub(super) flows_settled: u64,
    /// The lookahead grid: the shortest delay of any link (serialisation end to arrival), at
    /// least 1 ps. No event can affect another node sooner, so the fabric's partitions can run
    /// a window of this length each on its own (the parallel engine). A run that waits for every
    /// flow looks whether all are done only where a window ends, so that it stops at the same
    /// event however the fabric is partitioned: all events before the window end run.
    pub(super) window_ps: Time,
    /// The end of the current window (a multiple of `window_ps`).
    pub(super) window_end: Time,
    /// The parallel engine's long windows (`Parallel::lookahead`), per host port: a flow sent
    /// on it that has at least this many packets never sent cannot finish within one (empty:
    /// windows are `window_ps`, nothing counted; see [`sends_long`]) ...
    pub(super) long_packets: Vec<u32>,
    /// ... and per host, as a receiver: a flow to it that misses at least this many packets
    /// cannot finish within one either (the last two may be on their way or short; empty:
    /// nothing counted), from inside its scale-up domain and from outside
    /// (`tight::from_outside`) ...
    pub(super) long_receive: Vec<[u32; 2]>,
    /// ... and the flows counted here by either (started here with that many packets never
    /// sent, or received here missing that many; a flow may count on both sides): while any
    /// partition counts one, the run cannot end within a long window.
    pub(super) long_flows: u64,
    /// ... among them, as a bit per planned flow, those counted before they started
    /// (`World::count_unstarted_long`; empty: none).
    pub(super) unstarted_long: Vec<u64>,
    /// The latest time of anything scheduled here that the run waits for: a flow's start (its
    /// sender's partition), an arrival at a barrier counted in `pending_arrivals`. Events run
    /// in time order, so one at or after the next event has not run: the run cannot end
    /// before it (the parallel engine's long windows, `Parallel::lookahead`).
    pub(super) latest_pending: Time,
    /// The parallel engine: this world's partition (None: the world is the whole fabric).
    pub(super) partition: Option<super::parallel::Part>,
    pub(super) finished: bool,
    /// The last `run_events_until` stopped at its time limit.
    pub(super) reached_limit: bool,
    /// Per-port counters for live telemetry (`engine::live`).
    pub(super) live: super::live::LiveCounters,
    /// Plan amendments: cancelled flows and what appended flows need.
    pub(super) amends: super::amend::Amends,
}

/// Whether flow `f` has at least `World::long_packets` (`per_port`) of its sending port's
/// packets never sent: it cannot finish within one of the parallel engine's long windows.
#[inline]
pub(super) fn sends_long(per_port: &[u32], f: &crate::transport::Flow) -> bool {
    let long = per_port
        .get(f.src_port.index())
        .copied()
        .unwrap_or(u32::MAX);
    f.num_packets - f.high_seq >= long
}

/// What the engine's state costs per entity, from the sizes of the records in the World's
/// per-entity arrays (`size_of` of each element type, for the parts this run has). The README's
/// memory table is this for its scenarios; `tests/memory.rs` checks it against the heap a built
/// simulation really holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryFootprint {
    /// Per port (each direction of a link, host and switch ports alike): the hot record, the
    /// queues, pause time, rate, the fabric's description of the link, PFC counters, DWRR and
    /// trimming counters (when the run has them), the links.arrow sample state.
    pub per_port: usize,
    /// Per node (host or switch): its port range, role, shared buffer, ECMP seed.
    pub per_node: usize,
    /// Per host port: the NIC's arbitration ring (empty until flows are active) and its flag.
    pub per_host_port: usize,
    /// Per flow record (the transport state of a flow in progress, and the congestion
    /// controller's sender and receiver in the record's slot; a run that retires flows recycles
    /// the records, so `flows` counts the most in use at once).
    pub per_flow: usize,
    /// Per flow id, for the whole run: PXN hops (GPU clusters), the rates.arrow sample state
    /// (when traced), the record's index and, in a run that retires flows, its header entropy.
    pub per_message: usize,
    /// Per planned flow, for the whole run: its plan entry and its place in the start order (a
    /// streamed flow has neither, see `workload::stream`).
    pub per_planned: usize,
    /// Per retired flow: its output row, kept until flows.arrow is written.
    pub per_retired: usize,
    /// Per packet in flight (arena slots are kept at the high-water mark): the record, its free
    /// list entry, and its INT records under HPCC.
    pub per_packet: usize,
    /// The route table's (switch, destination) group map, whole, and what updates it after
    /// faults (`routing::RouteBuilder`).
    pub route_map: usize,
    /// Per barrier (step graphs, collectives, incast rounds): its counters and where its links
    /// start (`engine::barriers`).
    pub per_barrier: usize,
    /// Per link of a barrier: a flow waiting for it, or a barrier chained after it.
    pub per_barrier_link: usize,
    pub ports: usize,
    pub nodes: usize,
    pub host_ports: usize,
    /// Flow records allocated (in a run that retires flows: the most in use at once).
    pub flows: usize,
    /// Flow ids (every flow of the plan).
    pub messages: usize,
    /// Flows with a plan entry: the messages but the streamed ones.
    pub planned: usize,
    /// Flows retired so far.
    pub retired: usize,
    /// Arena slots (the most packets alive at once so far).
    pub packets: usize,
    pub barriers: usize,
    pub barrier_links: usize,
}

impl MemoryFootprint {
    /// Every per-entity figure times its count.
    pub fn total(&self) -> usize {
        self.per_port * self.ports
            + self.per_node * self.nodes
            + self.per_host_port * self.host_ports
            + self.per_flow * self.flows
            + self.per_message * self.messages
            + self.per_planned * self.planned
            + self.per_retired * self.retired
            + self.per_packet * self.packets
            + self.route_map
            + self.per_barrier * self.barriers
            + self.per_barrier_link * self.barrier_links
    }
}

/// How often the deadlock detector looks for a cycle of pauses while any port is paused: at
/// multiples of this period, the first at least one period after the first pause.
pub(super) const DEADLOCK_CHECK_PS: Time = 100_000_000;

/// Whether a run retires flows when they are done (their records recycled): unless a feature
/// of the run may look at any flow at any time (see `engine::flows`): a controller, an
/// in-network call (its setup rewrites every member's record at the build). (An elastic job's
/// re-plans read its ops' flows' fates, which a retired flow keeps: it finished.)
pub(super) fn retires_flows(s: &Scenario, plan: &FlowPlan) -> bool {
    s.control.is_none() && plan.in_network.is_none()
}

impl World {
    /// The world of a built scenario (see `scenario::build`): its fabric, flow plan, resolved
    /// faults and PFC state, and what its plan gives every world of the run
    /// ([`PlanDerived::of`], made once for them all). Nothing is checked here.
    pub(super) fn new(
        s: &Scenario,
        fabric: Fabric,
        plan: &FlowPlan,
        faults: &[LinkFault],
        pfc: Option<Pfc>,
        reserved_headroom: &IdVec<NodeId, u64>,
        derived: &PlanDerived,
    ) -> Self {
        let router = Router::new(&fabric, &s.routing, s.seed);
        let np = fabric.num_ports() as usize;
        let cluster = fabric.cluster.as_deref();
        let pxn_cluster = has_pxn(&fabric);
        let relays = cluster.filter(|_| pxn_cluster).and_then(|c| {
            super::relay::Relays::new(
                &fabric,
                c.spec.pxn_buffer_bytes,
                s.transport.mtu_bytes + s.transport.header_bytes,
            )
        });
        let ports: IdVec<PortId, PortHot> = fabric
            .ports()
            .map(|p| {
                let far = fabric.peer_node[p];
                let rate = fabric.rate_bps[p];
                let bits_ps = 8 * crate::units::PS_PER_SEC;
                let latency = if fabric.is_host(far) {
                    0
                } else {
                    fabric.switch_latency(far).unwrap_or(s.switch.latency_ps)
                };
                PortHot {
                    busy_until: 0,
                    arrival_delay: fabric.delay_ps[p] + latency,
                    ps_per_byte: if bits_ps.is_multiple_of(rate) {
                        bits_ps / rate
                    } else {
                        0
                    },
                    tx_bytes: 0,
                    wake_at: NEVER,
                    node: fabric.port_node[p],
                    peer_node: far,
                    pipe: PacketList::EMPTY,
                    paused: 0,
                    from_host: fabric.is_host(fabric.port_node[p]),
                    to_host: fabric.is_host(far),
                    to_scaleup: cluster.is_some_and(|c| c.is_scaleup_switch(far)),
                    to_relay: pxn_cluster
                        && cluster.is_some_and(|c| c.is_scaleup_switch(fabric.port_node[p])),
                    down: false,
                    lossy: false,
                    remote: false,
                }
            })
            .collect();
        // A link's propagation delay never shrinks during a run (delay faults add to it and give
        // back what they added; a circuit's far switch may change, its cable does not). With
        // PFC, no longer than the deadlock-check period: a check is asked for a period ahead
        // and must not fall in the window that asks for it (a shorter window is always safe).
        let mut window_ps = fabric.shortest_delay().max(1);
        if s.switch.pfc.is_some() {
            window_ps = window_ps.min(DEADLOCK_CHECK_PS);
        }
        let t = &s.transport;
        let mut buffer = SharedBuffer::new(fabric.num_nodes, &s.switch, reserved_headroom);
        if fabric.cluster.is_some() {
            // Scale-up switches and shared NICs have buffers of their own.
            for n in fabric.switches() {
                if let Some(b) = fabric.switch_buffer(n) {
                    buffer.capacity[n] =
                        b.saturating_sub(reserved_headroom.get(n).copied().unwrap_or(0));
                }
            }
        }

        // Flows are retired when done (their records recycled) unless a feature of the run may
        // look at any flow at any time (see `engine::flows`).
        let retires = retires_flows(s, plan);
        debug_assert!(
            retires || plan.streams.is_empty(),
            "streams are materialised"
        );
        let maker = retires.then(|| FlowMaker {
            inits: plan.flows.share(),
            entropy: Arc::clone(&derived.entropy),
            streams: plan.streams.clone(),
            heads: (plan.streams.iter())
                .map(|st| {
                    let mut rest = st.source.clone();
                    StreamHead {
                        id: st.first,
                        end: st.end(),
                        next: if st.count > 0 { rest.next() } else { None },
                        rest,
                    }
                })
                .collect(),
            cursor: Default::default(),
            foreign: Default::default(),
            first_streamed: plan.flows.len(),
            appended_entropy: Vec::new(),
            appended: Vec::new(),
            appended_from: derived.entropy.len(),
        });
        let mut flows = FlowTable::default();
        flows.reserve(plan.total_flows(), maker.is_none());
        let barriers: Vec<Barrier> = plan
            .barrier_sizes
            .iter()
            .map(|&n| Barrier {
                remaining: n,
                dead: false,
                released_at: NEVER,
                latest: 0,
            })
            .collect();
        let links = derived.links.clone();
        let mut static_order = Vec::new();
        for (id, f) in plan.flows.iter().enumerate() {
            let id = FlowId::new(id as u32);
            if let Start::At(_) = f.start {
                static_order.push(id);
            }
            if maker.is_some() {
                // The record is made when the flow starts (`World::materialise`), and its
                // congestion-control state with it.
                flows.push_unborn();
            } else {
                let (sport, label) = derived.entropy[id.index()];
                flows.push(new_flow(&fabric, &s.routing, t, f, sport, label).0);
            }
        }
        if maker.is_some() {
            // Streamed flows: their entries are made as they start.
            for _ in plan.flows.len()..plan.total_flows() {
                flows.push_unborn();
            }
        }
        let pxn = Arc::clone(&derived.pxn);
        let in_network = plan
            .in_network
            .as_deref()
            .filter(|p| !p.calls.is_empty())
            .map(|p| {
                let inr = super::in_network::InNetwork::new(p, &fabric, flows.len(), t.mtu_bytes);
                for id in flows.ids() {
                    if let Some((up, window)) = inr.flow_setup(id) {
                        let f = &mut flows[id];
                        f.src_port = up;
                        f.rate_bps = fabric.rate_bps[up];
                        f.window_bytes = Some(window as u64 * t.mtu_bytes);
                    }
                }
                inr
            });
        let planned_start = |id: FlowId| match plan.flows[id.index()].start {
            Start::At(t) => t,
            Start::After { .. } => NEVER,
        };
        static_order.sort_by_key(|&id| (planned_start(id), id));
        static_order.shrink_to_fit();
        let mut events = EventQueue::new();
        let first_start = (static_order.first().map(|&f| planned_start(f)))
            .into_iter()
            .chain(
                maker
                    .iter()
                    .flat_map(|m| &m.heads)
                    .filter_map(|h| h.peek())
                    .map(|(t, _)| t),
            )
            .min();
        // (The first flow's start is some partition's own, and every partition has the timers.)
        let mut latest_pending = first_start.unwrap_or(0);
        if let Some(t) = first_start {
            events.push(t, Event::NextFlowStarts);
        }
        for &(at, b) in &plan.barrier_timers {
            events.push(at, Event::BarrierArrive(b));
            latest_pending = latest_pending.max(at);
        }
        let jobs = super::jobs::Jobs::new(plan);
        for (at, e) in jobs.failure_events() {
            events.push(at, Event::JobFailure(e));
        }
        // Congestion control's state by record slot: every record's now, in a run that keeps
        // them all (slot = flow id); none yet in one that makes them as flows start.
        let cc = Cc::new(&t.cc, flows.live().map(|(_, f)| f.rate_bps));
        let mut tracer = Tracer::new(
            s.trace.clone(),
            pfc.is_some(),
            cc.reports_rates(),
            np,
            flows.len(),
        );
        if s.trace.latency {
            tracer.measure_latency(s.workloads.len());
        }
        let queues_sampled = tracer.queues_interval().is_some();
        if let Some(i) = tracer.queues_interval() {
            events.push(i, Event::SampleQueues);
        }
        if let Some(i) = tracer.links_interval() {
            events.push(i, Event::SampleLinks);
        }
        let credits = t.credits.map(|spec| {
            crate::transport::credits::Credits::new(
                spec,
                flows.len(),
                fabric.host_ports().map(|p| fabric.rate_bps[p]),
                t.mtu_bytes + t.header_bytes,
            )
        });
        let stats = RunStats {
            flows_total: flows.len() as u64,
            trimmed_packets: s.switch.trimming.map(|_| 0),
            pulls_sent: t.credits.map(|_| 0),
            ..RunStats::default()
        };
        let faults = faults.iter().cloned().map(Fault::new).collect();
        let circuits = fabric.ocs.clone().map(|layout| {
            let latency = layout
                .ports
                .iter()
                .map(|&p| {
                    let n = fabric.port_node[p];
                    fabric.switch_latency(n).unwrap_or(s.switch.latency_ps)
                })
                .collect();
            Circuits::new(layout, latency)
        });
        if circuits.is_some() {
            if let Some(links) = &mut tracer.traces.links {
                links.cols.tier =
                    crate::trace::tables::DictColumn::new(&crate::trace::tables::TIER_NAMES_OCS);
            }
        }
        let mut world = World {
            router,
            packets: PacketArena::default(),
            events,
            now: 0,
            stop: s.stop,
            look_ahead: super::prefetch::worth_looking_ahead(np),
            ports,
            queues: (0..np).map(|_| PortQueue::new(queues_sampled)).collect(),
            pause_since: IdVec::from_elem(NEVER, np),
            paused_ps: IdVec::from_elem(0, np),
            port_rate: fabric.rate_bps.clone(),
            faults: Faults::new(faults, np, s.seed),
            circuits,
            switches: Switches {
                dwrr: match s.switch.scheduler {
                    Scheduler::Dwrr(_) => IdVec::from_elem(DwrrState::default(), np),
                    Scheduler::Strict => IdVec::new(),
                },
                scheduler: s.switch.scheduler,
                buffer,
                pfc,
                ecn: s.switch.ecn,
                ecn_rng: fabric
                    .nodes()
                    .map(|n| RngStream::EcnMarking(n.get()).rng(s.seed))
                    .collect(),
                trimming: s.switch.trimming,
                trimmed: match s.switch.trimming {
                    Some(_) => IdVec::from_elem(0, np),
                    None => IdVec::new(),
                },
            },
            last_cycle: None,
            in_deadlock: false,
            deadlock_check_pending: false,
            nics: Nics::new(
                fabric.host_ports().len() as u32,
                s.nic_arbitration == crate::scenario::NicArbitration::Fifo,
            ),
            synth: super::synthetic::SynthMeter::new(s),
            flows,
            lazy_records: maker.is_some(),
            retiring: retires,
            maker,
            pxn,
            relays,
            int: cc.int_bytes_per_hop().map(crate::cc::IntStore::new),
            credits,
            in_network,
            inr_fallbacks_only: plan
                .in_network
                .as_deref()
                .filter(|p| p.calls.is_empty() && p.fallbacks > 0)
                .map(|p| p.fallbacks),
            cc,
            static_order,
            next_static: 0,
            barriers,
            links,
            jobs,
            pending_arrivals: plan.barrier_timers.len() as u64,
            transport: TransportParams {
                mtu: t.mtu_bytes as u32,
                header: t.header_bytes as u32,
                ack_bytes: t.ack_bytes as u32,
                ack_every: t.ack_every,
                rto: t.rto_ps,
                selective: t.loss_recovery == LossRecovery::Selective,
                gap_nacks: s.switch.trimming.is_none(),
                data_priority: t.data_priority,
                control_priority: t.control_priority,
            },
            tracer,
            stats,
            flows_settled: 0,
            window_ps,
            window_end: window_ps,
            long_packets: Vec::new(),
            long_receive: Vec::new(),
            latest_pending,
            long_flows: 0,
            unstarted_long: Vec::new(),
            partition: None,
            finished: false,
            reached_limit: false,
            live: super::live::LiveCounters::new(np),
            amends: super::amend::Amends::new(&s.routing, &s.transport, pxn_cluster, s.seed),
            fabric,
        };
        world.schedule_faults();
        world.schedule_circuits();
        world
    }

    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Process up to `max_events` events; returns true when the run is over.
    pub fn run_events(&mut self, max_events: u64) -> bool {
        self.run_events_until(max_events, NEVER)
    }

    /// Whether the last `run_events_until` stopped at its time limit.
    pub fn reached_limit(&self) -> bool {
        self.reached_limit
    }

    /// Process up to `max_events` events that happen before `limit` (NEVER: no limit); returns
    /// true when the run is over. When the next event is at or after `limit` (and the run would
    /// go on to it), the clock moves to `limit` and [`World::reached_limit`] is true: the world
    /// is then exactly as it is at simulated time `limit`, before any of its events at `limit`.
    pub fn run_events_until(&mut self, max_events: u64, limit: Time) -> bool {
        self.reached_limit = false;
        if self.finished {
            return true; // (only finish_run sets it, and the loop stops right after)
        }
        let stop_at = self.stop;
        for _ in 0..max_events {
            if stop_at == StopAt::AllFlowsDone {
                if let Some(t) = self.events.peek_time().filter(|&t| t >= self.window_end) {
                    if self.flows_settled == self.stats.flows_total && self.pending_arrivals == 0 {
                        self.finish_run();
                        break;
                    }
                    self.window_end = (t / self.window_ps + 1).saturating_mul(self.window_ps);
                }
            }
            if limit != NEVER {
                // With no event left the run ends as it would without a limit (its clock stays
                // at the last event), so a limit never changes a run's outputs.
                let before_stop = match stop_at {
                    StopAt::Time(stop) => limit <= stop,
                    StopAt::AllFlowsDone => true,
                };
                if before_stop && self.events.peek_time().is_some_and(|t| t >= limit) {
                    self.now = self.now.max(limit);
                    self.reached_limit = true;
                    break;
                }
            }
            if let StopAt::Time(stop) = stop_at {
                match self.events.peek_time() {
                    Some(t) if t <= stop => {}
                    Some(_) => {
                        self.now = stop;
                        self.finish_run();
                        break;
                    }
                    None => {
                        self.finish_run();
                        break;
                    }
                }
            }
            let Some((t, ev)) = self.events.pop() else {
                self.finish_run();
                break;
            };
            self.now = t;
            self.handle(ev);
            if ev == Event::DeadlockCheck && self.finished {
                break; // a deadlock ended a run that waits for every flow
            }
        }
        self.finished
    }

    /// Run one event (popped at `self.now`).
    #[inline(always)]
    pub(super) fn handle(&mut self, ev: Event) {
        let t = self.now;
        // Static flow starts are one event per start time per partition: not counted, so that
        // the count is the same however the fabric is partitioned.
        self.stats.events += (ev != Event::NextFlowStarts) as u64;
        self.prefetch_upcoming();
        match ev {
            Event::LinkArrival(p) => self.link_arrival(p),
            Event::PortFree(p) => {
                let port = &mut self.ports[p];
                if port.wake_at == t {
                    port.wake_at = NEVER;
                    self.start_next(p);
                }
            }
            Event::NextFlowStarts => self.start_static_flows(),
            Event::FlowStart(f) => {
                if self.jobs.list.is_empty() || self.job_flow_due(f) {
                    self.start_flow(f)
                }
            }
            Event::BarrierArrive(b) => {
                if self.jobs.list.is_empty() || self.job_arrival_due(b) {
                    self.pending_arrivals -= 1;
                    self.barrier_arrive(b);
                }
            }
            Event::Retransmit(f) => self.retransmit_timer(f),
            Event::CcTimer(f, k) => self.cc_timer(f, k),
            Event::PullPacer(p) => self.pull_pacer(p),
            Event::SampleQueues => self.sample_queues(),
            Event::SampleLinks => self.sample_links(),
            Event::DeadlockCheck => self.deadlock_check(),
            Event::FaultStart(i) => self.fault_start(i),
            Event::FaultEnd(i) => self.fault_end(i),
            Event::FaultDetected(i) => self.fault_detected(i),
            Event::CircuitsChange(i) => self.scheduled_change(i),
            Event::CircuitsUp(i) => self.circuits_up(i),
            Event::CircuitsRoute => self.circuits_route_event(),
            Event::JobFailure(e) => self.job_failure(e),
            Event::JobResume(e) => self.job_resume(e),
            Event::JobRejoin(j) => self.job_rejoin(j),
            Event::ReductionDone(n) => self.reduction_done(n),
        }
    }

    pub(super) fn finish_run(&mut self) {
        self.finished = true;
        self.stats.simulated_ps = self.now;
    }

    /// Counters, with the in-flight and pause figures taken now.
    pub fn stats(&self) -> RunStats {
        let mut s = self.stats.clone();
        let r = self.router.stats;
        s.packets_nonminimal = r.packets_nonminimal;
        s.data_packets_nonminimal = r.data_packets_nonminimal;
        s.control_packets_nonminimal = r.control_packets_nonminimal;
        s.max_global_hops = r.max_global_hops;
        s.simulated_ps = self.now;
        s.packets_created = self.packets.created();
        s.packets_in_flight = self.packets.live();
        s.paused_ps = self.ports.ids().map(|p| self.paused_time(p)).sum();
        s.link_down_ps = self.faults.link_down_ps(self.now);
        if let Some(c) = &self.circuits {
            s.ocs_circuit_ps_lost = c.circuit_ps_lost(self.now);
        }
        if let Some(inr) = &self.in_network {
            let c = inr.counters;
            s.in_network_calls = Some(c.calls);
            s.in_network_fallbacks = Some(c.fallbacks);
            s.reduction_contexts = Some(c.contexts);
            s.reduction_operands = Some(c.operands);
            s.reduction_combined = Some(c.combined);
            s.reduction_duplicates = Some(c.duplicates);
            s.reduction_repairs = Some(c.repairs);
            s.reduction_buffer_peak_bytes = Some(c.buffer_peak);
            s.in_network_waits = inr.waits_for_contexts().then_some(c.waits);
        } else if let Some(f) = self.inr_fallbacks_only {
            s.in_network_calls = Some(0);
            s.in_network_fallbacks = Some(f);
        }
        let up = self.uplink_utilisation();
        if !up.is_empty() {
            let n = up.len() as f64;
            let mean = up.iter().sum::<f64>() / n;
            let var = up.iter().map(|u| (u - mean) * (u - mean)).sum::<f64>() / n;
            s.uplink_utilisation_min = up.iter().copied().fold(f64::INFINITY, f64::min);
            s.uplink_utilisation_max = up.iter().copied().fold(0.0, f64::max);
            s.uplink_utilisation_mean = mean;
            s.uplink_utilisation_cv = if mean > 0.0 { var.sqrt() / mean } else { 0.0 };
        }
        s
    }

    /// Utilisation of every uplink (a switch port toward a higher tier) since the start.
    pub fn uplink_utilisation(&self) -> Vec<f64> {
        if self.now == 0 {
            return Vec::new();
        }
        self.ports
            .ids()
            .filter(|&p| {
                let (a, b) = (self.ports[p].node, self.ports[p].peer_node);
                !self.fabric.is_host(a)
                    && self.fabric.role[a].tier_rank() < self.fabric.role[b].tier_rank()
            })
            .map(|p| {
                self.ports[p].tx_bytes as f64 * 8.0
                    / (self.fabric.rate_bps[p] as f64 * self.now as f64 * 1e-12)
            })
            .collect()
    }

    /// Time port `p` has been paused so far (any priority).
    pub(super) fn paused_time(&self, p: PortId) -> u64 {
        super::sampling::paused_time(self.pause_since[p], self.paused_ps[p], self.now)
    }

    /// Every live packet is in exactly one queue or on one link: count them there and compare with
    /// the arena (and created = delivered + dropped + live); and the switches' buffer counters
    /// ([`World::check_buffers`]).
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
        let queued = queued
            + self
                .in_network
                .as_ref()
                .map_or(0, |inr| inr.queued(&self.packets));
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
        self.check_buffers()
    }

    /// Every switch's counters hold what its queues hold ([`World::check_switch_accounting`]),
    /// and the shared pools and headrooms together what the switches' queues hold.
    pub(super) fn check_buffers(&self) -> Result<(), String> {
        self.check_switch_accounting()?;
        let shared: u64 = self.switches.buffer.used.iter().sum();
        let queued_bytes: u64 = self
            .queues
            .ids()
            .filter(|&p| !self.ports[p].from_host)
            .map(|p| {
                self.queues[p].bytes
                    - self.queues[p].class_bytes(crate::switch::MAC_CONTROL_CLASS as usize) as u64
            })
            .sum();
        let headroom: u64 = match &self.switches.pfc {
            None => 0,
            Some(pfc) => self
                .ports
                .ids()
                .flat_map(|p| (0..8u8).map(move |c| (p, c)))
                .map(|(p, c)| pfc.headroom_used(p, c))
                .sum(),
        };
        if shared + headroom != queued_bytes {
            return Err(format!(
                "buffer accounting: shared {shared} + headroom {headroom} != queued {queued_bytes}"
            ));
        }
        Ok(())
    }

    /// Every switch's counters hold exactly what its queues hold: its shared pool the bytes of
    /// the packets not in a headroom; each PFC (ingress link, class) counter the bytes of the
    /// lossless packets that arrived over that link in that class, and its headroom counter those
    /// of them admitted into the headroom. A class its switch paused still holds bytes (else it
    /// would never be resumed). Totals alone would miss bytes released against another counter.
    fn check_switch_accounting(&self) -> Result<(), String> {
        let np = self.ports.len();
        let mut shared: IdVec<NodeId, u64> = IdVec::from_elem(0, self.switches.buffer.used.len());
        let mut ingress: IdVec<PortId, [u64; NUM_PRIORITIES]> =
            IdVec::from_elem([0; NUM_PRIORITIES], np);
        let mut headroom: IdVec<PortId, [u64; NUM_PRIORITIES]> =
            IdVec::from_elem([0; NUM_PRIORITIES], np);
        let pfc = self.switches.pfc.as_ref();
        for (q, port) in self.ports.iter_enumerated() {
            if port.from_host {
                continue; // a NIC's queue is not a switch buffer
            }
            for c in 0..NUM_PRIORITIES {
                let mut next = self.queues[q].class_list(c).front();
                while let Some(id) = next {
                    let pk = self.packets.get(id);
                    next = pk.next_in_list();
                    let w = pk.wire_bytes as u64;
                    let in_headroom = pk.flags & flags::HEADROOM != 0;
                    if !in_headroom {
                        shared[port.node] += w;
                    }
                    let class = pk.ingress_class();
                    let counted = match (pfc, pk.ingress_port()) {
                        (Some(pfc), Some(from)) if pfc.is_lossless(class) => {
                            ingress[from][class as usize] += w;
                            if in_headroom {
                                headroom[from][class as usize] += w;
                            }
                            true
                        }
                        _ => false,
                    };
                    if in_headroom && !counted {
                        return Err(format!(
                            "packet of class {class} queued at port {q} is marked in a headroom \
                             but no PFC (ingress, class) counts it"
                        ));
                    }
                }
            }
        }
        for (node, (&used, &held)) in self
            .switches
            .buffer
            .used
            .iter_enumerated()
            .zip(&shared)
            .map(|((n, u), h)| (n, (u, h)))
        {
            if used != held {
                return Err(format!(
                    "switch {node}: shared buffer counts {used} bytes, its queues hold {held}"
                ));
            }
        }
        let Some(pfc) = pfc else {
            return Ok(());
        };
        for p in self.ports.ids() {
            for c in 0..NUM_PRIORITIES as u8 {
                let i = c as usize;
                let (counted, room) = (pfc.ingress_bytes(p, c), pfc.headroom_used(p, c));
                if counted != ingress[p][i] || room != headroom[p][i] {
                    return Err(format!(
                        "PFC (ingress link {p}, class {c}): counts {counted} bytes ({room} in \
                         headroom), the queued packets hold {} ({} in headroom)",
                        ingress[p][i], headroom[p][i]
                    ));
                }
                if pfc.paused_by_us(p, c) && counted == 0 {
                    return Err(format!(
                        "PFC (ingress link {p}, class {c}): paused with nothing queued (no \
                         dequeue will resume it)"
                    ));
                }
            }
        }
        Ok(())
    }

    // ---- reporting ---------------------------------------------------------------------------

    /// The hops flow `fid`'s data packets take (the ECMP path its header hashes to).
    pub fn flow_path(&self, fid: FlowId) -> Vec<Hop> {
        self.flow_path_of(fid, &self.flow_record(fid))
    }

    /// [`World::flow_path`] of flow `fid` with record `f`.
    fn flow_path_of(&self, fid: FlowId, f: &Flow) -> Vec<Hop> {
        self.flow_path_ports_of(fid, f)
            .into_iter()
            .map(|p| Hop {
                rate_bps: self.fabric.rate_bps[p],
                delay_ps: self.ports[p].arrival_delay,
            })
            .collect()
    }

    /// The egress ports flow `fid`'s data packets take, from its source NIC on: by the current
    /// routes, or, when faults cut the flow off, by the fault-free ones (its nominal path).
    pub fn flow_path_ports(&self, fid: FlowId) -> Vec<PortId> {
        self.flow_path_ports_of(fid, &self.flow_record(fid))
    }

    fn flow_path_ports_of(&self, fid: FlowId, f: &Flow) -> Vec<PortId> {
        let current = self.path_in(self.router.table(), fid, f);
        match (current, &self.router.nominal) {
            (Ok(path), _) => path,
            (Err(_), Some(nominal)) => self.path_in(nominal, fid, f).unwrap_or_else(|p| p),
            (Err(partial), None) => partial,
        }
    }

    /// The path of flow `fid` by `table`; Err(the ports up to where it ends) if it is cut off.
    fn path_in(
        &self,
        table: &crate::routing::RouteTable,
        fid: FlowId,
        f: &Flow,
    ) -> Result<Vec<PortId>, Vec<PortId>> {
        let mut ports = vec![f.src_port];
        for _ in 0..=self.fabric.num_nodes {
            let last = *ports.last().expect("non-empty");
            let node = self.fabric.peer_node[last];
            let next = if self.fabric.is_host(node) {
                if node == f.dst {
                    return Ok(ports);
                }
                self.relay_out(fid, true) // PXN: the relay GPU's NIC port
            } else if self.ports[last].to_scaleup {
                self.scaleup_out(node, f.dst, fid, true)
            } else {
                self.router.ecmp_port(table, node, f.dst, f.header_fwd)
            };
            match next {
                Some(p) => ports.push(p),
                None => return Err(ports),
            }
        }
        Err(ports)
    }

    /// GPU clusters: the egress port of scale-up switch `node` toward `dst` for flow `fid`'s
    /// data (`data`) or control packets: to `dst` in the domain, else (PXN) to the flow's relay.
    #[inline]
    pub(super) fn scaleup_out(
        &self,
        node: NodeId,
        dst: NodeId,
        fid: FlowId,
        data: bool,
    ) -> Option<PortId> {
        let c = self.fabric.cluster.as_deref()?;
        let out = if c.domain(dst).and_then(|d| c.domain_switch(d)) == Some(node) {
            self.fabric.peer_port[c.scaleup_port(dst)?]
        } else {
            self.pxn_hops(fid, data)?.switch_out
        };
        (!self.ports[out].down).then_some(out)
    }

    /// GPU clusters, PXN: the relay GPU's NIC port for flow `fid`'s data or control packets.
    #[inline]
    pub(super) fn relay_out(&self, fid: FlowId, data: bool) -> Option<PortId> {
        Some(self.pxn_hops(fid, data)?.relay_out)
    }

    /// GPU clusters, PXN: flow `fid`'s hops through its relay, for its data or control packets
    /// (None: it needs no relay). A planned or amended flow's are in `pxn`; a streamed flow,
    /// made as the run goes, has no entry there, and its hops are worked out again from its
    /// record (until 2026-12-05 it had none: a streamed workload's cross-rail flows on a PXN
    /// cluster were dropped as unreachable at the first scale-up switch).
    #[inline]
    fn pxn_hops(&self, fid: FlowId, data: bool) -> Option<PxnHops> {
        let i = usize::from(!data);
        if self.maker.as_ref().is_some_and(|m| m.is_streamed(fid)) {
            let f = self.flows.get(fid)?;
            let ends = endpoint_ports(&self.fabric, f.src, f.dst, f.header_fwd, f.header_rev);
            return ends.pxn[i];
        }
        self.pxn.get(fid)?[i]
    }

    /// Ideal FCT of flow `fid`: alone on its path.
    pub fn ideal_fct(&self, fid: FlowId) -> Time {
        self.ideal_fct_of(fid, &self.flow_record(fid))
    }

    /// [`World::ideal_fct`] of flow `fid` with record `f`.
    pub(super) fn ideal_fct_of(&self, fid: FlowId, f: &Flow) -> Time {
        let hops = self.flow_path_of(fid, f);
        ideal_fct(
            &hops,
            f.num_packets,
            (self.transport.mtu + self.transport.header) as u64,
            (f.last_payload + self.transport.header) as u64,
        )
    }

    /// The engine's memory per entity (see [`MemoryFootprint`]).
    pub fn memory_footprint(&self) -> MemoryFootprint {
        use crate::topology::{Role, Tier};
        use crate::units::Rate;
        use std::mem::size_of;
        let fabric_per_port = size_of::<NodeId>() * 2
            + size_of::<PortId>()
            + size_of::<Rate>()
            + size_of::<Time>()
            + size_of::<Tier>();
        let pfc_per_port = if self.switches.pfc.is_some() {
            2 * size_of::<[u64; NUM_PRIORITIES]>() + size_of::<u64>() + size_of::<u8>()
        } else {
            0
        };
        let per_port = size_of::<PortHot>()
            + size_of::<PortQueue>()
            + 2 * size_of::<Time>() // pause_since, paused_ps
            + size_of::<u64>() // port_rate
            + size_of::<u64>() * usize::from(!self.switches.trimmed.is_empty())
            + size_of::<DwrrState>() * usize::from(!self.switches.dwrr.is_empty())
            + fabric_per_port
            + pfc_per_port
            + size_of::<(u64, u64)>(); // tracer.links_last
        let per_node = size_of::<PortId>() // fabric.port_start
            + size_of::<Role>()
            + 2 * size_of::<u64>() // buffer used, capacity
            + size_of::<u64>(); // router seed
        let per_host_port = size_of::<crate::transport::ring::FlowRing>();
        // Congestion control's state lives beside the record, in its slot.
        let per_flow = size_of::<Flow>() + self.cc.bytes_per_flow();
        let per_message = if self.pxn.is_empty() {
                0
            } else {
                size_of::<FlowPxn>()
            }
            + size_of::<Time>() * usize::from(self.tracer.traces.rates.is_some()) // rates_last
            + size_of::<u32>() // the flow table's index
            + if self.maker.is_some() {
                size_of::<(u16, u32)>() // header entropy (the plan's flows are shared)
            } else {
                0
            };
        let per_packet = size_of::<crate::packet::Packet>()
            + size_of::<crate::packet::PacketId>()
            + if self.int.is_some() {
                crate::cc::IntStore::BYTES_PER_PACKET
            } else {
                0
            };
        MemoryFootprint {
            per_port,
            per_node,
            per_host_port,
            per_flow,
            per_message,
            // The plan the Simulation keeps, and the start order of flows with a fixed start.
            per_planned: size_of::<crate::workload::FlowInit>() + size_of::<FlowId>(),
            per_retired: size_of::<crate::trace::flows::FlowRow>(),
            per_packet,
            route_map: self.router.table().group_map_bytes() + self.faults.routes_bytes(),
            per_barrier: BarrierLinks::BYTES_PER_BARRIER,
            per_barrier_link: BarrierLinks::BYTES_PER_LINK,
            ports: self.ports.len(),
            nodes: self.fabric.num_nodes as usize,
            host_ports: self.nics.ring.len(),
            flows: self.flows.slot_capacity(),
            messages: self.flows.len(),
            planned: self.flows.len() - self.streamed_flows(),
            retired: self.flows.retired_count(),
            packets: self.packets.capacity(),
            barriers: self.barriers.len(),
            barrier_links: self.links.len(),
        }
    }

    /// Flows of streamed workloads (made as the run goes: no plan entry; `workload::stream`).
    pub fn streamed_flows(&self) -> usize {
        self.maker
            .as_ref()
            .map_or(0, |m| m.streams.iter().map(|s| s.count as usize).sum())
    }

    /// Arena high-water mark (packets).
    pub fn packet_capacity(&self) -> usize {
        self.packets.capacity()
    }

    /// When barrier `b` released (None: not yet). Step graphs: an op's start and end.
    pub fn barrier_released(&self, b: u32) -> Option<Time> {
        let t = self.barriers.get(b as usize)?.released_at;
        (t != NEVER).then_some(t)
    }

    pub fn pending_events(&self) -> usize {
        self.events.len()
    }

    /// Bytes sent on port `p` so far (tests and tools; links.arrow samples them).
    pub fn port_tx_bytes(&self, p: PortId) -> u64 {
        self.ports[p].tx_bytes
    }

    /// Queue bytes of port `p`, priority `c` (tests and tools).
    pub fn queue_bytes(&self, p: PortId, c: u8) -> u64 {
        self.queues[p].class_bytes(c as usize) as u64
    }

    /// DCQCN state of flow `fid` (current rate, target rate), if DCQCN runs and the flow has
    /// its record.
    pub fn dcqcn_rates(&self, fid: FlowId) -> Option<(u64, u64)> {
        self.flows.get(fid)?;
        self.cc.dcqcn_rates(self.flows.slot(fid))
    }
}
