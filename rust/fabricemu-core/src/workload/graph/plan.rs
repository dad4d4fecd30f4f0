//! Planning a step graph into the flow plan: the one mechanism every step workload (`graph`,
//! `training`, `inference`) runs on.
//!
//! Each op gets two barriers: `ready` (released when all its dependencies ended) and `done`
//! (released when the op ended). A dependency is a [`BarrierEdge`] from the dependency's `done`
//! to the op's `ready`; an op without dependencies gets one timed arrival at the graph's start.
//! - Compute: an edge `ready -> done` delayed by the op's duration (one timer event, no flow).
//! - Send: one flow that starts when `ready` releases and counts toward `done`.
//! - Collective: the flows of the collective's algorithm (the same transfers and internal
//!   barriers as `kind = "collective"`); its first transfers wait on `ready` (plus the
//!   algorithm's delay), its last ones count toward `done`.
//!
//! The engine records when each barrier released, so an op's start is its `ready` time and its
//! end its `done` time (ops.arrow, steps.arrow).

use std::collections::HashMap;

use super::noise::apply as apply_noise;
use super::spec::{Graph, Noise, OpKind, OpPhase};
use crate::config::{CollectiveAlgorithm, CollectiveOp, CollectiveSpec};
use crate::ids::NodeId;
use crate::rng::RngStream;
use crate::units::{Bytes, Time};
use crate::workload::collective::{self, Domains, Transfer};
use crate::workload::{BarrierEdge, FlowInit, FlowPlan, Start};

/// What a graph's collectives need of the scenario (as `kind = "collective"` takes them): the
/// tree's pipeline chunk and its interval at the host link, and the scale-up domain size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CollectiveParams {
    pub chunk_bytes: Bytes,
    /// A chunk's serialisation at the host link (`collective::chunk_interval`).
    pub chunk_interval_ps: Time,
    /// Endpoints per scale-up domain (endpoint e is in domain e / domain_size); an op's own
    /// `domain_size` overrides it. None: every endpoint is a domain of its own.
    pub domain_size: Option<u32>,
}

impl CollectiveParams {
    /// The parameters `kind = "collective"` would use with the default chunk.
    pub fn new(
        mtu_bytes: Bytes,
        header_bytes: Bytes,
        host_rate_bps: u64,
        domain_size: Option<u32>,
    ) -> Self {
        let chunk_bytes = collective::DEFAULT_TREE_CHUNK;
        Self {
            chunk_bytes,
            chunk_interval_ps: collective::chunk_interval(
                chunk_bytes,
                mtu_bytes,
                header_bytes,
                host_rate_bps,
            ),
            domain_size,
        }
    }
}

/// The kind of a planned op (ops.arrow's `kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlannedKind {
    Compute,
    Send,
    Collective {
        op: CollectiveOp,
        algorithm: CollectiveAlgorithm,
    },
}

impl PlannedKind {
    pub fn name(self) -> &'static str {
        match self {
            PlannedKind::Compute => "compute",
            PlannedKind::Send => "send",
            PlannedKind::Collective { .. } => "collective",
        }
    }
}

/// One op of a planned graph, for ops.arrow and steps.arrow.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedOp {
    pub workload: u32,
    /// The op's position among the ops of its iteration (its index in a one-iteration graph).
    pub op: u32,
    pub iteration: u32,
    pub kind: PlannedKind,
    pub phase: OpPhase,
    pub name: Option<String>,
    /// The ranks it occupies (compute: one; send: source then destination; collective: the
    /// group in rank order) and their endpoints.
    pub ranks: Vec<u32>,
    pub nodes: Vec<u32>,
    /// Payload bytes (a send's message, a collective's size; 0 for compute).
    pub bytes: u64,
    /// Compute: the planned duration (after noise).
    pub duration_ps: Time,
    /// Released when the op may start / when it ended.
    pub ready: u32,
    pub done: u32,
    /// Its flows (indices into `FlowPlan::flows`; empty for compute).
    pub flows: std::ops::Range<usize>,
}

/// Add step graph `graph` of workload `workload` (its index in the scenario) to `plan`, with
/// compute noise `noise` drawn from the workload's `GraphNoise` stream under `seed`. `graph`
/// must be valid ([`Graph::check`]); the training and inference generators and the `graph`
/// workload all call this. Returns the range of `plan.ops` it added.
pub fn plan_graph(
    plan: &mut FlowPlan,
    workload: usize,
    seed: u64,
    graph: &Graph,
    noise: &Noise,
    params: &CollectiveParams,
) -> std::ops::Range<usize> {
    if noise.is_empty() {
        plan_exact(plan, workload as u32, graph, params)
    } else {
        let mut noisy = graph.clone();
        apply_noise(
            &mut noisy,
            noise,
            &mut RngStream::GraphNoise(workload).rng(seed),
        );
        plan_exact(plan, workload as u32, &noisy, params)
    }
}

/// One collective's transfers and barrier structure, shared by every op of the same shape.
struct Shape {
    transfers: Vec<Transfer>,
    graph: collective::IterationGraph,
}

fn plan_exact(
    plan: &mut FlowPlan,
    workload: u32,
    graph: &Graph,
    params: &CollectiveParams,
) -> std::ops::Range<usize> {
    let first_op = plan.ops.len();
    let n = graph.ops.len();
    // Two barriers per op: ready = base + 2i, done = base + 2i + 1.
    let base = plan.barrier_sizes.len() as u32;
    let ready = |i: usize| base + 2 * i as u32;
    let done = |i: usize| base + 2 * i as u32 + 1;
    let mut index_in_iteration: HashMap<u32, u32> = HashMap::new();
    let mut deps: Vec<u32> = Vec::new();
    for op in &graph.ops {
        deps.clear();
        deps.extend_from_slice(&op.deps);
        deps.sort_unstable();
        deps.dedup();
        plan.barrier_sizes.push((deps.len() as u32).max(1));
        plan.barrier_sizes.push(1); // set below for collectives
    }
    for (i, op) in graph.ops.iter().enumerate() {
        deps.clear();
        deps.extend_from_slice(&op.deps);
        deps.sort_unstable();
        deps.dedup();
        if deps.is_empty() {
            plan.barrier_timers.push((graph.start_ps, ready(i)));
        }
        for &d in &deps {
            plan.barrier_edges.push(BarrierEdge {
                from: done(d as usize),
                to: ready(i),
                delay: 0,
            });
        }
    }
    type ShapeKey = (&'static str, &'static str, Bytes, (usize, Option<Domains>));
    let mut shapes: HashMap<ShapeKey, Shape> = HashMap::new();
    for (i, op) in graph.ops.iter().enumerate() {
        let slot = index_in_iteration.entry(op.iteration).or_insert(0);
        let position = *slot;
        *slot += 1;
        let op_first_flow = plan.flows.len();
        let (kind, ranks, bytes, duration_ps) = match op.kind {
            OpKind::Compute { rank, duration_ps } => {
                plan.barrier_edges.push(BarrierEdge {
                    from: ready(i),
                    to: done(i),
                    delay: duration_ps,
                });
                (PlannedKind::Compute, vec![rank], 0, duration_ps)
            }
            OpKind::Send { src, dst, bytes } => {
                plan.flows.push(FlowInit {
                    src: NodeId::new(graph.ranks[src as usize]),
                    dst: NodeId::new(graph.ranks[dst as usize]),
                    size_bytes: bytes,
                    start: Start::After {
                        barrier: ready(i),
                        gap: 0,
                    },
                    workload,
                    completes: Some(done(i)),
                    collective: None,
                    tag: None,
                });
                (PlannedKind::Send, vec![src, dst], bytes, 0)
            }
            OpKind::Collective {
                group,
                op: cop,
                algorithm,
                bytes,
                domain_size,
            } => {
                let ranks = graph.groups[group as usize].clone();
                let hosts: Vec<u32> = ranks.iter().map(|&r| graph.ranks[r as usize]).collect();
                // In-network: the communicator's tree, or the flat ring without a context.
                let tree = match algorithm.is_in_network() {
                    true => {
                        match collective::in_network::place(plan, workload, &hosts, algorithm) {
                            Ok(t) => t,
                            Err(e) => {
                                plan.deferred_error.get_or_insert(e);
                                None
                            }
                        }
                    }
                    false => None,
                };
                let algorithm = match (algorithm.is_in_network(), tree) {
                    (true, None) => CollectiveAlgorithm::Ring,
                    _ => algorithm,
                };
                let first_flow = plan.flows.len() as u32;
                let spec = CollectiveSpec {
                    op: cop,
                    algorithm,
                    groups: Vec::new(),
                    shuffle: None,
                    size_bytes: bytes,
                    iterations: 1,
                    compute_gap_ps: 0,
                    start_ps: 0,
                    chunk_bytes: params.chunk_bytes,
                    chunk_interval_ps: params.chunk_interval_ps,
                    domain_size: domain_size.or(params.domain_size),
                };
                let dom = collective::group_domains(&spec, &hosts);
                // Flat algorithms depend only on the number of ranks; hierarchical ones on the
                // ranks' domains (as `kind = "collective"` caches them).
                let key = (
                    hosts.len(),
                    algorithm.is_hierarchical().then(|| dom.clone()),
                );
                let shape = shapes
                    .entry((cop.name(), algorithm.name(), bytes, key))
                    .or_insert_with(|| {
                        let transfers = collective::transfers(&spec, &dom);
                        let graph = collective::iteration_graph(&transfers);
                        Shape { transfers, graph }
                    });
                let inner = plan.barrier_sizes.len() as u32;
                plan.barrier_sizes.extend_from_slice(&shape.graph.sizes);
                plan.barrier_sizes[done(i) as usize] = shape.graph.terminal;
                for (k, t) in shape.transfers.iter().enumerate() {
                    let start = match shape.graph.waits[k] {
                        Some(b) => Start::After {
                            barrier: inner + b,
                            gap: t.delay,
                        },
                        None => Start::After {
                            barrier: ready(i),
                            gap: t.delay,
                        },
                    };
                    plan.flows.push(FlowInit {
                        src: NodeId::new(hosts[t.src as usize]),
                        dst: NodeId::new(hosts[t.dst as usize]),
                        size_bytes: t.bytes,
                        start,
                        workload,
                        completes: Some(shape.graph.completes[k].map_or(done(i), |b| inner + b)),
                        collective: None,
                        tag: None,
                    });
                }
                if let Some(tree) = tree {
                    collective::in_network::add_call(plan, tree, first_flow, &hosts, cop);
                }
                (
                    PlannedKind::Collective { op: cop, algorithm },
                    ranks,
                    bytes,
                    0,
                )
            }
        };
        let nodes = ranks.iter().map(|&r| graph.ranks[r as usize]).collect();
        plan.ops.push(PlannedOp {
            workload,
            op: position,
            iteration: op.iteration,
            kind,
            phase: op.phase,
            name: op.name.clone(),
            ranks,
            nodes,
            bytes,
            duration_ps,
            ready: ready(i),
            done: done(i),
            flows: op_first_flow..plan.flows.len(),
        });
    }
    debug_assert_eq!(plan.ops.len() - first_op, n);
    first_op..plan.ops.len()
}
