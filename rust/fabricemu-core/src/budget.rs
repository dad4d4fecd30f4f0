//! Resource estimates of a validated scenario, made before anything is allocated: the memory a run
//! needs (flows, packets in flight, per-port and per-switch state, route tables, the flow table
//! written at the end) and the volume of the trace files it writes. A run, `describe` and `topo`
//! refuse a scenario whose estimate exceeds the limit, with a [`ScenarioError`] that states both.
//!
//! Nothing here materialises a flow: each workload kind counts its flows from its parameters
//! (Poisson and synthetic arrivals from rate x window, with a margin for their randomness).

use crate::scenario::{
    ClusterSpec, CollectiveAlgorithm, CollectiveOp, CollectiveSpec, LinkSpec, Scenario,
    ScenarioError, StopAt, TopologySpec, WorkloadSpec,
};
use crate::units::PS_PER_SEC;

/// Bytes of one flow over a run: the engine's flow record, its plan entry (made when the fabric is
/// built and again when the outputs are written), its row and labels in flows.arrow, the Arrow
/// columns, and the per-flow side arrays (start order, rate trace, congestion control).
fn bytes_per_flow(s: &Scenario) -> u64 {
    use std::mem::size_of;
    flow_record_bytes(s)
        + (2 * size_of::<crate::workload::FlowInit>()
            + size_of::<crate::trace::flows::FlowRow>()
            + size_of::<crate::trace::flows::FlowLabels>()
            + 20 * 8 // the Arrow columns of flows.arrow
            + 16) as u64 // start order, rate-trace state
}

/// Bytes of one flow's record while it is in progress: the transport state and its congestion
/// controller's.
fn flow_record_bytes(s: &Scenario) -> u64 {
    use crate::scenario::CongestionControl as C;
    use std::mem::size_of;
    let cc = match s.transport.cc {
        C::None => 0,
        C::Dcqcn(_) => size_of::<crate::cc::dcqcn::Dcqcn>(),
        C::Dctcp(_) => size_of::<crate::cc::dctcp::Dctcp>(),
        C::Swift(_) => size_of::<crate::cc::swift::Swift>(),
        C::Hpcc(_) => size_of::<crate::cc::hpcc::Hpcc>(),
        C::Nscc(_) => size_of::<crate::cc::nscc::Nscc>(),
    };
    (size_of::<crate::transport::Flow>() + cc) as u64
}

/// Bytes per flow that every world of a parallel run holds for the whole run: the flow
/// table's index slot, the header entropy, the start order and the rate trace's state.
const PER_WORLD_FLOW_BYTES: u64 = (std::mem::size_of::<u32>()
    + std::mem::size_of::<(u16, u32)>()
    + std::mem::size_of::<crate::ids::FlowId>()
    + std::mem::size_of::<crate::units::Time>()) as u64;

/// Bytes of one port (egress queues, PFC counters, link state, sampling state), measured.
const BYTES_PER_PORT: u64 = 512;
/// Bytes of one switch besides its ports (buffer accounting, routing state).
const BYTES_PER_SWITCH: u64 = 256;
/// One packet record in the arena, with its queue slot.
const BYTES_PER_PACKET: u64 = 48 + 8;
/// The process before any scenario: the engine's code, the Python interpreter's share.
const BASE_BYTES: u64 = 64 << 20;
/// Bytes of one trace row in an Arrow file (the widest tables: links and queues).
const BYTES_PER_TRACE_ROW: u64 = 40;

/// Bytes of one packets.arrow row (seventeen narrow columns, two short strings).
const BYTES_PER_PACKET_ROW: u64 = 64;

/// Bytes of one op of a step graph (`training`, `inference`, `graph`) over a run: the op, its
/// planned state and its barrier (dhat: 393 B per op at the peak of a 400,000-op build, 475 B of
/// RSS).
const BYTES_PER_OP: u64 = 512;

/// What a scenario's run is estimated to need.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize)]
pub struct Estimate {
    /// Flows of each workload (expected counts for random arrivals).
    pub workload_flows: Vec<u64>,
    pub flows: u64,
    /// Step-graph ops of each workload (0 for the other kinds), and in all.
    pub workload_ops: Vec<u64>,
    pub ops: u64,
    /// Payload bytes of all flows.
    pub flow_bytes: u64,
    pub hosts: u64,
    pub switches: u64,
    /// Egress ports (two per cable).
    pub ports: u64,
    pub packets_in_flight: u64,
    /// Memory, by part.
    pub flow_memory: u64,
    /// The step graphs' ops.
    pub op_memory: u64,
    pub fabric_memory: u64,
    pub packet_memory: u64,
    pub memory: u64,
    /// The simulated time the traces cover (the stop time, or an estimate of the last finish).
    pub duration_ps: u64,
    /// Trace files, by table (rows x row size).
    pub trace_links: u64,
    pub trace_queues: u64,
    pub trace_rates: u64,
    /// packets.arrow: at most `trace.packets.max_rows` rows.
    pub trace_packets: u64,
    pub trace_bytes: u64,
}

/// Limits a run is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of memory.
    pub memory: u64,
    /// Whether `memory` is the default (a fraction of the machine's available memory).
    pub memory_is_default: bool,
    /// Bytes of trace files.
    pub trace: u64,
    pub trace_is_default: bool,
}

/// The fraction of the machine's available memory a run may plan to use by default.
pub const DEFAULT_MEMORY_FRACTION: f64 = 0.8;
/// The default trace budget.
pub const DEFAULT_TRACE_BYTES: u64 = 20 << 30;

impl Limits {
    /// `memory`: bytes, or None for [`DEFAULT_MEMORY_FRACTION`] of the available memory;
    /// `trace`: bytes, or None for [`DEFAULT_TRACE_BYTES`].
    pub fn new(memory: Option<u64>, trace: Option<u64>) -> Limits {
        Limits {
            memory: memory.unwrap_or_else(default_memory_limit),
            memory_is_default: memory.is_none(),
            trace: trace.unwrap_or(DEFAULT_TRACE_BYTES),
            trace_is_default: trace.is_none(),
        }
    }
}

/// The memory this machine has available now (Linux: `MemAvailable` of /proc/meminfo), if known.
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// [`DEFAULT_MEMORY_FRACTION`] of the available memory (8 GiB where it is not known).
pub fn default_memory_limit() -> u64 {
    available_memory()
        .map(|m| (m as f64 * DEFAULT_MEMORY_FRACTION) as u64)
        .unwrap_or(8 << 30)
}

/// Counts of a topology with its cluster: endpoints (GPUs), switches (every plane's, shared NICs
/// and scale-up switches), and the cables of each tier with their link.
fn cluster_counts(
    t: &TopologySpec,
    cluster: Option<&ClusterSpec>,
) -> (u64, u64, Vec<(u64, LinkSpec)>) {
    let (hosts, switches, mut tiers) = fabric_counts(t);
    let Some(c) = cluster else {
        return (hosts, switches, tiers);
    };
    let planes = c.planes as u64;
    let gpus = c.gpus(t.num_hosts()) as u64;
    for tier in &mut tiers {
        tier.0 = tier.0.saturating_mul(planes);
    }
    let mut switches = switches.saturating_mul(planes);
    if c.nics_per_server < c.gpus_per_server {
        switches += c.servers(t.num_hosts()) as u64 * c.nics_per_server as u64;
        tiers.push((
            gpus,
            LinkSpec {
                rate_bps: c.nic.rate_bps,
                delay_ps: c.nic.latency_ps,
            },
        ));
    }
    if let Some(s) = c.scaleup {
        switches += gpus / s.gpus as u64;
        tiers.push((
            gpus,
            LinkSpec {
                rate_bps: s.rate_bps,
                delay_ps: s.link_delay_ps,
            },
        ));
    }
    (gpus, switches, tiers)
}

/// Counts of a topology: hosts, switches, and the cables of each tier with their link.
fn fabric_counts(t: &TopologySpec) -> (u64, u64, Vec<(u64, LinkSpec)>) {
    let hosts = t.num_hosts() as u64;
    match *t {
        TopologySpec::FatTree {
            k,
            host,
            fabric,
            core,
        } => {
            let k = k as u64;
            let per_tier = k * k * k / 4;
            (
                hosts,
                5 * k * k / 4,
                vec![(per_tier, host), (per_tier, fabric), (per_tier, core)],
            )
        }
        TopologySpec::LeafSpine {
            leaves,
            spines,
            host,
            fabric,
            ..
        } => {
            let (l, s) = (leaves as u64, spines as u64);
            (hosts, l + s, vec![(hosts, host), (l * s, fabric)])
        }
        TopologySpec::Dragonfly {
            a,
            h,
            g,
            host,
            local,
            global,
            ..
        } => {
            let (a, h, g) = (a as u64, h as u64, g as u64);
            (
                hosts,
                a * g,
                vec![
                    (hosts, host),
                    (g * a * a.saturating_sub(1) / 2, local),
                    (g * a * h / 2, global),
                ],
            )
        }
        TopologySpec::Clos {
            shape,
            host,
            fabric,
            core,
        } => {
            let (pods, tors, aggs, cores) = (
                shape.pods as u64,
                shape.tors() as u64,
                (shape.pods * shape.aggs_per_pod) as u64,
                shape.cores as u64,
            );
            (
                hosts,
                tors + aggs + cores,
                vec![
                    (hosts, host),
                    (tors * shape.aggs_per_pod as u64, fabric),
                    (pods * cores, core),
                ],
            )
        }
        TopologySpec::Graph(ref g) => {
            // Cables by link kind (a graph's links may all differ).
            let mut kinds: std::collections::BTreeMap<(u64, u64), u64> = Default::default();
            for l in &g.links {
                *kinds.entry((l.spec.rate_bps, l.spec.delay_ps)).or_default() += 1;
            }
            (
                hosts,
                (g.nodes.len() - g.num_hosts as usize) as u64,
                kinds
                    .into_iter()
                    .map(|((rate_bps, delay_ps), n)| (n, LinkSpec { rate_bps, delay_ps }))
                    .collect(),
            )
        }
        TopologySpec::DragonflyPlus {
            leaves,
            spines,
            h,
            g,
            host,
            local,
            global,
            ..
        } => {
            let (l, s, h, g) = (leaves as u64, spines as u64, h as u64, g as u64);
            (
                hosts,
                (l + s) * g,
                vec![(hosts, host), (l * s * g, local), (g * s * h / 2, global)],
            )
        }
    }
}

/// Flows of one collective group of `n` ranks per iteration (an upper bound where the algorithm's
/// count depends on details).
fn collective_flows_per_group(c: &CollectiveSpec, n: u64) -> u64 {
    if n < 2 {
        return 0;
    }
    let ring = (n - 1) * n;
    match (c.algorithm, c.op) {
        (CollectiveAlgorithm::Ring, CollectiveOp::AllReduce) => 2 * ring,
        (CollectiveAlgorithm::Ring, _) => ring,
        (CollectiveAlgorithm::Tree, _) => {
            let chunks = c.size_bytes.div_ceil(c.chunk_bytes.max(1)).max(1);
            4 * (n - 1) * chunks
        }
        (CollectiveAlgorithm::HalvingDoubling, _) => {
            2 * (64 - (n - 1).leading_zeros() as u64) * n + 2 * n
        }
        // As many flows as the flat ring (a piece per sub-block through both tiers).
        (CollectiveAlgorithm::HierarchicalRing, CollectiveOp::AllReduce) => 2 * ring,
        // Per piece (a chunk of a block's half: at most S / chunk + 2 n of them) 2(n - 1).
        (CollectiveAlgorithm::HierarchicalTree, _) => {
            let chunks = c.size_bytes.div_ceil(c.chunk_bytes.max(1)).max(1);
            2 * (n - 1) * (chunks + 2 * n)
        }
        // One flow per rank, or the flat ring's when the communicator falls back.
        (CollectiveAlgorithm::InNetwork | CollectiveAlgorithm::Nvls, _) => 2 * ring,
        _ => ring,
    }
}

/// A count drawn from a Poisson process with this mean, with a margin of four standard
/// deviations.
fn random_count(mean: f64) -> u64 {
    if !mean.is_finite() || mean >= 1e19 {
        return u64::MAX;
    }
    (mean + 4.0 * mean.sqrt() + 1.0).ceil() as u64
}

/// Flows, payload bytes and step-graph ops of one workload, counted from its parameters.
fn workload_counts(spec: &WorkloadSpec) -> (u64, u64, u64) {
    let graph = |g: &crate::workload::graph::Graph, params| {
        let (flows, bytes) = crate::workload::training::graph_flows(g, params);
        (flows, bytes, g.ops.len() as u64)
    };
    match spec {
        WorkloadSpec::Training(t) => graph(&crate::workload::training::generate(t), &t.collective),
        WorkloadSpec::Inference(i) => {
            // The arrivals are drawn by the build; seed 0's draw sizes the estimate.
            match crate::workload::inference::generate(i, 0, 0) {
                Ok((g, _)) => graph(&g, &i.collective),
                // Too large a graph: the build refuses it with its own error.
                Err(_) => (u64::MAX, u64::MAX, u64::MAX),
            }
        }
        WorkloadSpec::Graph(g) => {
            let (flows, bytes) = g.estimate();
            (flows, bytes, g.ops_estimate())
        }
        _ => {
            let (flows, bytes) = other_flows(spec);
            (flows, bytes, 0)
        }
    }
}

/// Flows and payload bytes of a workload that is not a step graph (step graphs: 0, counted by
/// [`workload_counts`] with their ops).
fn other_flows(spec: &WorkloadSpec) -> (u64, u64) {
    let sat = |a: u64, b: u64| a.saturating_mul(b);
    match spec {
        WorkloadSpec::Flows { flows } => (
            flows.len() as u64,
            flows
                .iter()
                .fold(0u64, |acc, f| acc.saturating_add(f.size_bytes)),
        ),
        WorkloadSpec::Incast {
            senders,
            size_bytes,
            rounds,
            ..
        } => {
            let n = sat(senders.len() as u64, *rounds as u64);
            (n, sat(n, *size_bytes))
        }
        WorkloadSpec::Permutation {
            hosts, size_bytes, ..
        } => (hosts.len() as u64, sat(hosts.len() as u64, *size_bytes)),
        WorkloadSpec::AllToAll {
            hosts, size_bytes, ..
        } => {
            let n = hosts.len() as u64;
            let flows = sat(n, n.saturating_sub(1));
            (flows, sat(flows, *size_bytes))
        }
        WorkloadSpec::Poisson(p) => {
            // The distribution is read here, before the build, only to size the estimate (a file
            // that cannot be read is reported by the build; count it as one-byte flows meanwhile).
            let cdf = match p.cdf {
                crate::config::spec::CdfSource::Builtin => {
                    crate::workload::cdf::Cdf::builtin(&p.cdf_name)
                }
                crate::config::spec::CdfSource::File => {
                    crate::workload::cdf::Cdf::read_file(std::path::Path::new(&p.cdf_name)).ok()
                }
            };
            let mean = cdf.as_ref().map_or(1.0, |c| c.mean_bytes().max(1.0));
            let mean_gap = mean * 8.0 * PS_PER_SEC as f64 / (p.load * p.host_rate_bps as f64);
            let by_window = match p.end_ps {
                Some(end) => random_count(
                    p.senders.len() as f64 * end.saturating_sub(p.start_ps) as f64 / mean_gap,
                ),
                None => u64::MAX,
            };
            let n = by_window.min(p.count.unwrap_or(u64::MAX));
            (n, (n as f64 * mean).min(u64::MAX as f64) as u64)
        }
        WorkloadSpec::Collective(c) => {
            let per_iteration = c.groups.iter().fold(0u64, |acc, g| {
                acc.saturating_add(collective_flows_per_group(c, g.len() as u64))
            });
            let flows = sat(per_iteration, c.iterations as u64);
            let ranks = c.groups.iter().map(|g| g.len() as u64).sum::<u64>();
            let bytes = sat(sat(ranks, c.size_bytes), 2 * c.iterations as u64);
            (flows, bytes)
        }
        WorkloadSpec::Replay(r) => {
            // The file is read by the build; before it, its size bounds its rows (a CSV row or an
            // Arrow record of src, dst, size and start takes at least REPLAY_ROW_BYTES).
            let len = std::fs::metadata(&r.file).map_or(0, |m| m.len());
            (len / REPLAY_ROW_BYTES, 0)
        }
        WorkloadSpec::Training(_) | WorkloadSpec::Inference(_) | WorkloadSpec::Graph(_) => (0, 0),
        WorkloadSpec::Synthetic(s) => {
            // One message per slot of one message's wire time, with probability `load`.
            let slot_ps = s.wire_bytes as f64 * 8.0 * PS_PER_SEC as f64 / s.host_rate_bps as f64;
            let window = s.end_ps.saturating_sub(s.start_ps) as f64;
            let n = random_count(s.n_hosts as f64 * s.load * window / slot_ps);
            (n, sat(n, s.size_bytes))
        }
    }
}

/// Fewest bytes one replayed flow takes in its file (bounds the rows from the file's size).
const REPLAY_ROW_BYTES: u64 = 16;

/// Estimate what a run of `s` needs.
pub fn estimate(s: &Scenario) -> Estimate {
    let (hosts, switches, tiers) = cluster_counts(&s.topology, s.cluster.as_ref());
    let cables: u64 = tiers.iter().map(|t| t.0).sum();
    let ports = 2 * cables;
    let mut e = Estimate {
        hosts,
        switches,
        ports,
        ..Estimate::default()
    };
    for w in &s.workloads {
        let (flows, bytes, ops) = workload_counts(&w.spec);
        e.workload_flows.push(flows);
        e.flows = e.flows.saturating_add(flows);
        e.flow_bytes = e.flow_bytes.saturating_add(bytes);
        e.workload_ops.push(ops);
        e.ops = e.ops.saturating_add(ops);
    }
    // The graphs are planned once and shared by the threads of a parallel run.
    e.op_memory = e.ops.saturating_mul(BYTES_PER_OP);
    let wire_packet = (s.transport.mtu_bytes + s.transport.header_bytes).max(1);
    // Packets in flight: on the wires (both directions, a bandwidth-delay product each) and in
    // the switches' buffers, which cannot hold more than the flows carry.
    let on_wires = tiers.iter().fold(0u64, |acc, (n, l)| {
        let bdp = (l.rate_bps as u128 * l.delay_ps as u128 / 8 / PS_PER_SEC as u128) as u64;
        acc.saturating_add((2 * n).saturating_mul(bdp / wire_packet + 2))
    });
    let buffered = switches
        .saturating_mul(s.switch.buffer_bytes)
        .min(e.flow_bytes)
        / wire_packet;
    // Every data packet may have an ACK or a control packet beside it.
    e.packets_in_flight = on_wires.saturating_add(buffered).saturating_mul(2);
    e.flow_memory = e.flows.saturating_mul(bytes_per_flow(s));
    // Route tables: a group id per (switch, destination edge switch or group). A run whose
    // links go down also keeps what built them, to update them (`routing::RouteBuilder`: a
    // distance and a group per entry) and the two per-entry arrays each update fills.
    let route_entries = switches.saturating_mul(switches.max(1));
    let rerouted = !s.faults.is_empty() || !s.failure_processes.is_empty() || s.ocs.is_some();
    let route_bytes_per_entry = if rerouted { 4 + 16 } else { 4 };
    e.fabric_memory = ports
        .saturating_mul(BYTES_PER_PORT)
        .saturating_add(switches.saturating_mul(BYTES_PER_SWITCH))
        .saturating_add(hosts.saturating_mul(BYTES_PER_PORT))
        .saturating_add(route_entries.saturating_mul(route_bytes_per_entry));
    // HPCC keeps every packet's INT records beside the arena.
    let int = match s.transport.cc {
        crate::scenario::CongestionControl::Hpcc(_) => crate::cc::IntStore::BYTES_PER_PACKET as u64,
        _ => 0,
    };
    e.packet_memory = e.packets_in_flight.saturating_mul(BYTES_PER_PACKET + int);
    // The parallel engine: every partition and the view hold the whole fabric; packets are
    // where they are.
    if s.threads > 1 {
        let copies = s.threads as u64 + 1;
        let threads = s.threads as u64;
        e.fabric_memory = e.fabric_memory.saturating_mul(copies);
        // Flows (`engine::parallel`): the plan is shared, and its entries, the rows and the
        // Arrow columns are the view's, counted once above. A flow's record may be in every
        // world: a partition makes one for each flow whose packets it sees, senders', receivers'
        // and switches' partitions alike (a run that retires flows holds those in progress
        // only, so this is an upper bound). Every world holds a few bytes per flow for the
        // whole run, and each partition a bit for the view's fold (`FlowTable::track_touches`)
        // and, when barriers may release within a window, the tight barrier it counts toward
        // (`engine::tight`, 4 bytes): counted as if every run had them. (Until 2026-12-05 the
        // plan's and the outputs' share was counted in every world too.)
        let per_flow = (flow_record_bytes(s).saturating_mul(threads))
            .saturating_add((PER_WORLD_FLOW_BYTES + 5).saturating_mul(threads));
        e.flow_memory = e
            .flow_memory
            .saturating_add(e.flows.saturating_mul(per_flow));
        // Where links may fail (faults, an OCS, a controller), each partition keeps a copy of
        // the packets it sent to the others until they arrive (`Part::on_wire`).
        if rerouted || s.control.is_some() {
            let copy = std::mem::size_of::<crate::packet::Packet>() as u64;
            e.packet_memory = e
                .packet_memory
                .saturating_add(e.packets_in_flight.saturating_mul(copy));
        }
    }
    e.memory = BASE_BYTES
        .saturating_add(e.flow_memory)
        .saturating_add(e.op_memory)
        .saturating_add(e.fabric_memory)
        .saturating_add(e.packet_memory);

    // Traces: rows per sampling interval over the run.
    e.duration_ps = match s.stop {
        StopAt::Time(t) => t,
        StopAt::AllFlowsDone => {
            // The last start plus the time to carry every byte at the hosts' total rate (a
            // lower bound of the run's length: trace volumes are not overstated).
            let host_rate = tiers.first().map_or(1, |t| t.1.rate_bps.max(1));
            let carry = (e.flow_bytes as u128 * 8 * PS_PER_SEC as u128
                / (host_rate as u128 * hosts.max(1) as u128)) as u64;
            last_fixed_start(s).saturating_add(carry)
        }
    };
    let rows = |per_interval: u64, interval: u64| -> u64 {
        let samples = (e.duration_ps / interval.max(1)).saturating_add(1);
        samples
            .saturating_mul(per_interval)
            .saturating_mul(BYTES_PER_TRACE_ROW)
    };
    if let Some(interval) = s.trace.links_interval_ps {
        e.trace_links = rows(ports, interval);
    }
    if let Some(q) = &s.trace.queues {
        let sampled = if q.hosts { ports } else { ports - hosts };
        let per_port = if q.empty {
            crate::switch::NUM_PRIORITIES as u64
        } else {
            1
        };
        e.trace_queues = rows(sampled.saturating_mul(per_port), q.interval_ps);
    }
    if let Some(r) = &s.trace.rates {
        if r.interval_ps > 0 {
            let flows = r.flows.as_ref().map_or(e.flows, |f| f.len() as u64);
            e.trace_rates = rows(flows, r.interval_ps);
        }
    }
    if let Some(p) = &s.trace.packets {
        e.trace_packets = p.max_rows.saturating_mul(BYTES_PER_PACKET_ROW);
    }
    e.trace_bytes = e
        .trace_links
        .saturating_add(e.trace_queues)
        .saturating_add(e.trace_rates)
        .saturating_add(e.trace_packets);
    e
}

/// The latest fixed start time of any workload's flows (0 if none is known).
fn last_fixed_start(s: &Scenario) -> u64 {
    s.workloads
        .iter()
        .map(|w| match &w.spec {
            WorkloadSpec::Flows { flows } => flows.iter().map(|f| f.start_ps).max().unwrap_or(0),
            WorkloadSpec::Incast { start_ps, .. }
            | WorkloadSpec::Permutation { start_ps, .. }
            | WorkloadSpec::AllToAll { start_ps, .. } => *start_ps,
            WorkloadSpec::Poisson(p) => p.end_ps.unwrap_or(p.start_ps),
            WorkloadSpec::Collective(c) => c.start_ps,
            WorkloadSpec::Replay(r) => r.offset_ps,
            WorkloadSpec::Synthetic(sy) => sy.end_ps,
            WorkloadSpec::Training(t) => t.start_ps,
            WorkloadSpec::Inference(i) => i.start_ps + i.window_ps.unwrap_or(0),
            WorkloadSpec::Graph(g) => g.start_ps,
        })
        .max()
        .unwrap_or(0)
}

/// Bytes for a message: "20.8 GiB", "512.0 MiB", exact below 1 KiB.
fn gb(b: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if b < 1024 {
        return format!("{b} B");
    }
    let mut v = b as f64 / 1024.0;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.1} {}", UNITS[u])
}

/// The key path an error about the estimate names: the workload whose flows and step-graph ops
/// need the most memory if flows and ops dominate, else the topology.
fn culprit(s: &Scenario, e: &Estimate) -> String {
    if e.flow_memory.saturating_add(e.op_memory) >= e.fabric_memory.max(e.packet_memory) {
        let per_flow = bytes_per_flow(s);
        let need = |i: usize| {
            let ops = e.workload_ops.get(i).copied().unwrap_or(0);
            (e.workload_flows[i].saturating_mul(per_flow))
                .saturating_add(ops.saturating_mul(BYTES_PER_OP))
        };
        if let Some(i) =
            (0..e.workload_flows.len()).max_by_key(|&i| (need(i), std::cmp::Reverse(i)))
        {
            return format!("workload.{i}");
        }
    }
    "topology".to_string()
}

/// Check the memory estimate of `s` against `limits.memory`.
pub fn check_memory(s: &Scenario, e: &Estimate, limits: &Limits) -> Result<(), ScenarioError> {
    if e.memory <= limits.memory {
        return Ok(());
    }
    let limit = if limits.memory_is_default {
        format!(
            "the limit of {} ({:.0} % of the memory available)",
            gb(limits.memory),
            DEFAULT_MEMORY_FRACTION * 100.0
        )
    } else {
        format!("the limit of {}", gb(limits.memory))
    };
    Err(ScenarioError::at(
        culprit(s, e),
        format!(
            "this run would need about {} of memory ({} flows: {}; {}{} packets in flight: {}; \
             fabric of {} switches and {} ports: {}), more than {limit}: make the scenario \
             smaller, or raise the limit with max_memory= (CLI: --max-memory)",
            gb(e.memory),
            e.flows,
            gb(e.flow_memory),
            if e.ops > 0 {
                format!("{} step-graph ops: {}; ", e.ops, gb(e.op_memory))
            } else {
                String::new()
            },
            e.packets_in_flight,
            gb(e.packet_memory),
            e.switches,
            e.ports,
            gb(e.fabric_memory),
        ),
    ))
}

/// Check the memory the fabric alone needs (`topo`: no flows are made).
pub fn check_fabric_memory(e: &Estimate, limits: &Limits) -> Result<(), ScenarioError> {
    let need = BASE_BYTES.saturating_add(e.fabric_memory);
    if need <= limits.memory {
        return Ok(());
    }
    Err(ScenarioError::at(
        "topology",
        format!(
            "building this fabric ({} switches, {} ports) would need about {} of memory, more \
             than the limit of {}: raise it with max_memory= (CLI: --max-memory)",
            e.switches,
            e.ports,
            gb(need),
            gb(limits.memory)
        ),
    ))
}

/// Check the trace volume estimate against `limits.trace`.
pub fn check_traces(e: &Estimate, limits: &Limits) -> Result<(), ScenarioError> {
    if e.trace_bytes <= limits.trace {
        return Ok(());
    }
    let (path, what) = [
        (e.trace_links, "trace.links", "links"),
        (e.trace_queues, "trace.queues", "queues"),
        (e.trace_rates, "trace.rates", "rates"),
        (e.trace_packets, "trace.packets.max_rows", "packets"),
    ]
    .iter()
    .max_by_key(|t| t.0)
    .map(|t| (t.1, t.2))
    .expect("four tables");
    Err(ScenarioError::at(
        path,
        format!(
            "the trace files would hold about {} ({what}: {} over {} of simulated time), more \
             than the budget of {}{}: lengthen the interval (packets: lower max_rows), or raise the budget with \
             max_trace_size= (CLI: --max-trace-size)",
            gb(e.trace_bytes),
            gb(e
                .trace_links
                .max(e.trace_queues)
                .max(e.trace_rates)
                .max(e.trace_packets)),
            crate::units::format_time(e.duration_ps),
            gb(limits.trace),
            if limits.trace_is_default {
                " (the default)"
            } else {
                ""
            }
        ),
    ))
}

thread_local! {
    static CANCEL: std::cell::RefCell<Option<std::sync::Arc<std::sync::atomic::AtomicBool>>> =
        const { std::cell::RefCell::new(None) };
}

/// Let `flag` cancel the work of this thread: flow generation checks [`cancelled`] and stops
/// early once it is set (the partial result is to be discarded). A build thread sets it so that
/// Ctrl-C stops a long build.
pub fn set_cancel_flag(flag: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>) {
    CANCEL.with(|c| *c.borrow_mut() = flag);
}

/// Whether this thread's work was cancelled (see [`set_cancel_flag`]).
pub fn cancelled() -> bool {
    CANCEL.with(|c| {
        c.borrow()
            .as_ref()
            .is_some_and(|f| f.load(std::sync::atomic::Ordering::Relaxed))
    })
}

/// Estimate `s` and check it against `limits` (memory first, then trace volume).
pub fn check(s: &Scenario, limits: &Limits) -> Result<Estimate, ScenarioError> {
    let e = estimate(s);
    check_memory(s, &e, limits)?;
    check_traces(&e, limits)?;
    Ok(e)
}
