//! The graph a step workload is: ops (compute on one rank, a point-to-point transfer, a collective
//! over a group of ranks) and their dependencies. Generators (`training`, `inference`) and loaders
//! (JSON, Arrow, Python builder) all produce a [`Graph`]; the engine runs only this.

use crate::config::{CollectiveAlgorithm, CollectiveOp};
use crate::units::{Bytes, Time};

/// One step workload's graph. Ranks are indices into `ranks`; ops are indices into `ops`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Graph {
    /// Endpoint (host or GPU id, as other workloads address them) of each rank.
    pub ranks: Vec<u32>,
    /// Collective groups: each a list of ranks in rank order within the group.
    pub groups: Vec<Vec<u32>>,
    pub ops: Vec<GraphOp>,
    /// Iterations the graph holds (ops carry their own `iteration`); 1 for a single step.
    pub iterations: u32,
    /// Time of the first op without predecessors.
    pub start_ps: Time,
}

/// One node of the graph.
#[derive(Debug, Clone, PartialEq)]
pub struct GraphOp {
    pub kind: OpKind,
    /// Ops that must have finished first (indices into [`Graph::ops`], each smaller or larger: the
    /// graph need not be listed in topological order, but must be acyclic).
    pub deps: Vec<u32>,
    /// The training iteration (or inference step) this op belongs to, from 0.
    pub iteration: u32,
    /// What the op is for: steps.arrow splits time into compute, exposed communication and bubble
    /// by it, and ops.arrow reports it.
    pub phase: OpPhase,
    /// Optional label carried into ops.arrow (e.g. "layer3.fwd", "dp_bucket2").
    pub name: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum OpKind {
    /// Compute on one rank for a fixed time (FLOPs are converted by the loader or generator).
    Compute { rank: u32, duration_ps: Time },
    /// One message from rank `src` to rank `dst`. It stands for a send on `src` and the matching
    /// receive on `dst`: ops that depend on it wait for the last byte to arrive.
    Send { src: u32, dst: u32, bytes: Bytes },
    /// A collective over `groups[group]`, with the same meaning of `bytes` as `kind = "collective"`'s
    /// `size` (nccl-tests convention). Starts when all its dependencies finished (on every member).
    Collective {
        group: u32,
        op: CollectiveOp,
        algorithm: CollectiveAlgorithm,
        bytes: Bytes,
        /// Ranks per scale-up domain for hierarchical algorithms (None: the scenario's default).
        domain_size: Option<u32>,
    },
}

/// The role of an op in a step (for the step breakdown and the report's timeline).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpPhase {
    Forward,
    Backward,
    /// Optimizer step or other compute that is neither forward nor backward.
    OtherCompute,
    /// Tensor-parallel communication (all-reduce, or all-gather/reduce-scatter with sequence
    /// parallelism).
    TensorParallel,
    /// Pipeline-parallel activation or gradient send.
    PipelineParallel,
    /// Data-parallel gradient reduction.
    DataParallel,
    /// Expert-parallel (MoE) all-to-all.
    ExpertParallel,
    /// Any other communication (graphs loaded from files without a phase).
    OtherCommunication,
}

impl OpPhase {
    pub fn name(self) -> &'static str {
        match self {
            OpPhase::Forward => "forward",
            OpPhase::Backward => "backward",
            OpPhase::OtherCompute => "compute",
            OpPhase::TensorParallel => "tp",
            OpPhase::PipelineParallel => "pp",
            OpPhase::DataParallel => "dp",
            OpPhase::ExpertParallel => "ep",
            OpPhase::OtherCommunication => "comm",
        }
    }

    pub fn is_compute(self) -> bool {
        matches!(
            self,
            OpPhase::Forward | OpPhase::Backward | OpPhase::OtherCompute
        )
    }
}

/// Compute-time noise applied when the graph is planned (seeded, so runs stay reproducible).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Noise {
    /// Each compute op's duration is multiplied by (1 + x), x drawn per op from this distribution.
    pub jitter: Option<Jitter>,
    /// (rank, factor): every compute op on `rank` takes `factor` times as long (a straggler).
    pub slow_ranks: Vec<(u32, f64)>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Jitter {
    /// x uniform in [0, max).
    Uniform { max: f64 },
    /// x = |N(0, sigma)|.
    HalfNormal { sigma: f64 },
    /// x exponential with this mean.
    Exponential { mean: f64 },
}

impl Noise {
    /// No jitter and no slow rank: planning leaves durations as they are.
    pub fn is_empty(&self) -> bool {
        self.jitter.is_none() && self.slow_ranks.iter().all(|&(_, f)| f == 1.0)
    }
}

impl OpKind {
    /// The ranks the op occupies: compute its rank, a send its source then destination, a
    /// collective its group in rank order.
    pub fn ranks(&self, groups: &[Vec<u32>]) -> Vec<u32> {
        match *self {
            OpKind::Compute { rank, .. } => vec![rank],
            OpKind::Send { src, dst, .. } => vec![src, dst],
            OpKind::Collective { group, .. } => {
                groups.get(group as usize).cloned().unwrap_or_default()
            }
        }
    }
}
