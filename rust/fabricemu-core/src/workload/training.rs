//! `kind = "training"`: a Megatron-style training step (data, tensor, pipeline and expert
//! parallelism) expanded into the step [`Graph`] the graph workload runs.
//!
//! What one iteration is, per pipeline stage replica (the `tp` ranks of stage `s` in data-parallel
//! replica `d`), following Megatron-LM (Shoeybi et al. 2019; Narayanan et al. 2021, "Efficient
//! Large-Scale Language Model Training on GPU Clusters Using Megatron-LM"):
//! - the stage's `layers / pp` transformer layers, each an attention block and an MLP block. With
//!   `tp > 1` each block ends with a tensor-parallel all-reduce of the activations (b*s*h*bytes;
//!   two in the forward pass and two in the backward pass per layer), or with
//!   `sequence_parallel = true` starts with an all-gather and ends with a reduce-scatter of the same
//!   size. An expert layer (`moe`) wraps its MLP in an all-to-all dispatch and combine over the
//!   expert-parallel group (b*s*top_k*h*bytes/tp sent per rank).
//! - micro-batches ordered by the schedule: `gpipe` (all forwards, then all backwards) or `1f1b`
//!   (PipeDream-Flush: `p - s - 1` warm-up forwards, then one forward / one backward, then the
//!   remaining backwards). A stage's forward of micro-batch j waits for the activations from stage
//!   s-1 (one send per TP rank), its backward for the gradient from stage s+1.
//! - the gradient all-reduce over the data-parallel group of each stage and TP rank: the stage's
//!   gradients (12*h^2 parameters per dense layer, over tp; bytes_per_element each), walked from the
//!   last layer back, cut into `dp_bucket`-sized buckets; a bucket starts when the backward of every
//!   layer it holds has finished for the last micro-batch (on every replica) and after the previous
//!   bucket (one communicator, one stream): overlapped with the rest of the backward pass. Expert
//!   parameters (8*h^2 per expert, experts/ep per rank) are reduced over the expert-data-parallel
//!   group (the ranks of the same expert shard) the same way.
//! - an optional `optimizer` compute per rank after its reductions; the next iteration starts on a
//!   rank after it.
//!
//! Compute per layer is a time (`forward`, optionally `backward`) or derived from FLOPs: a layer's
//! forward is 24*b*s*h^2 + 4*b*s^2*h FLOPs (Narayanan et al. 2021, eq. 3, per layer and forward
//! pass: the attention block 8bsh^2 + 4bs^2h, the MLP block 16bsh^2), divided over the tp ranks, at
//! `gpu_flops` x `efficiency`; an expert MLP counts `top_k` experts' 16bsh^2. Backward is twice the
//! forward unless given. A given time is split between the attention and MLP blocks in the ratio
//! of their FLOPs.
//!
//! Ranks: global rank r runs on GPU (or host) r. Its (tp, dp, pp) coordinates come from
//! `placement`, innermost first: the default "tp,dp,pp" keeps a TP group on consecutive GPUs, so
//! inside a scale-up domain when tp divides the domain's GPUs.

use serde::{Deserialize, Serialize};

use super::config::{start_of, Context};
use super::graph::reaction::{CheckpointFile, OnFailureName, RejoinName};
use super::graph::{CollectiveParams, Graph, GraphOp, Noise, NoiseFile, OpKind, OpPhase};
use crate::config::check::{count, quoted_list, Res};
use crate::config::values::{Duration, Size};
use crate::config::{CollectiveAlgorithm, CollectiveOp, ScenarioError};
use crate::units::{Bytes, Time, PS_PER_SEC};

/// `kind = "training"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainingFile {
    /// Optional label (defaults to `kind`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<Duration>,
    /// Data-parallel replicas (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dp: Option<i64>,
    /// Tensor-parallel ranks per stage (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tp: Option<i64>,
    /// Pipeline stages (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pp: Option<i64>,
    /// Expert-parallel ranks (a divisor of dp; default 1). Needs `moe`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ep: Option<i64>,
    /// Micro-batches per iteration (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub micro_batches: Option<i64>,
    /// Sequences per micro-batch (b; default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub micro_batch_size: Option<i64>,
    /// Transformer layers of the model (a multiple of pp).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layers: Option<i64>,
    /// Hidden size h.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden: Option<i64>,
    /// Sequence length s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq_len: Option<i64>,
    /// Bytes of an activation or gradient element (default 2: bf16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_per_element: Option<i64>,
    /// Forward compute of one layer for one micro-batch on each rank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forward: Option<Duration>,
    /// Backward compute of one layer (default twice the forward).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backward: Option<Duration>,
    /// Peak FLOP/s of one GPU (compute from FLOPs when `forward` is not given), e.g. 989e12.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_flops: Option<f64>,
    /// Fraction of `gpu_flops` achieved (default 0.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub efficiency: Option<f64>,
    /// "1f1b" (default) or "gpipe".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<PipelineSchedule>,
    /// TP all-gather + reduce-scatter instead of all-reduce (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence_parallel: Option<bool>,
    /// Gradient bucket of the data-parallel reduction (default 25MiB, PyTorch DDP's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dp_bucket: Option<Size>,
    /// Mixture of experts: `{ experts = 8, every = 2, top_k = 2 }`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moe: Option<MoeFile>,
    /// Training iterations (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iterations: Option<i64>,
    /// Collective algorithm per group: `{ tp = "ring", dp = "hierarchical_ring", ep = "pxn" }`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithms: Option<AlgorithmsFile>,
    /// Order of the rank coordinates, innermost first (default "tp,dp,pp").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<String>,
    /// Optimizer step per rank after its gradient reductions (default none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optimizer: Option<Duration>,
    /// Compute jitter and stragglers, as in `kind = "graph"` (ranks are global ranks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise: Option<NoiseFile>,
    /// What a failure that cuts off one of its ranks does to the job: `"stall"`, `"restart"`
    /// or `"elastic"` (docs/failures.md, "Jobs that react").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_failure: Option<OnFailureName>,
    /// `on_failure = "restart"`: the time a restart takes (after detection and repair).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_time: Option<Duration>,
    /// `on_failure = "restart"`: a checkpoint every n iterations (an integer) or so long.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_interval: Option<CheckpointFile>,
    /// With `on_failure`: the job's detection delay (stall: of the repair; restart: of the
    /// failure). Default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detection: Option<Duration>,
    /// `on_failure = "elastic"`: the time the survivors take to re-form their communicator
    /// (also on a rejoin). Default 1s (a chosen default: docs/failures.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reformation_time: Option<Duration>,
    /// `on_failure = "elastic"`: when the failed ranks rejoin: `"next_step"` (at the first
    /// iteration end after their repair; the default) or `"never"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejoin: Option<RejoinName>,
    /// `on_failure = "restart"`: the time saving a checkpoint takes (the job pauses). Default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_time: Option<Duration>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PipelineSchedule {
    #[serde(rename = "gpipe")]
    Gpipe,
    #[serde(rename = "1f1b")]
    OneFOneB,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MoeFile {
    /// Experts per expert layer (a multiple of ep).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experts: Option<i64>,
    /// Every n-th layer is an expert layer (layers n-1, 2n-1, ...; default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every: Option<i64>,
    /// Experts per token (default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlgorithmsFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tp: Option<CollectiveAlgorithm>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dp: Option<CollectiveAlgorithm>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ep: Option<CollectiveAlgorithm>,
}

/// A parallelism dimension (rank coordinate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dim {
    Tp,
    Dp,
    Pp,
}

/// Compute of one block (attention or MLP) of one layer for one micro-batch on one rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BlockTimes {
    pub attn_fwd_ps: Time,
    pub mlp_fwd_ps: Time,
    pub attn_bwd_ps: Time,
    pub mlp_bwd_ps: Time,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MoeSpec {
    pub experts: u32,
    pub every: u32,
    pub top_k: u32,
}

/// A checked training workload.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainingSpec {
    pub dp: u32,
    pub tp: u32,
    pub pp: u32,
    pub ep: u32,
    pub micro_batches: u32,
    pub micro_batch_size: u32,
    pub layers: u32,
    pub hidden: u32,
    pub seq_len: u32,
    pub bytes_per_element: u32,
    /// Dense layers.
    pub dense: BlockTimes,
    /// Expert layers (the MLP block is the experts').
    pub expert: BlockTimes,
    pub schedule: PipelineSchedule,
    pub sequence_parallel: bool,
    pub dp_bucket_bytes: Bytes,
    pub moe: Option<MoeSpec>,
    pub iterations: u32,
    pub tp_algorithm: Option<CollectiveAlgorithm>,
    pub dp_algorithm: Option<CollectiveAlgorithm>,
    pub ep_algorithm: Option<CollectiveAlgorithm>,
    /// Innermost first.
    pub placement: [Dim; 3],
    pub optimizer_ps: Time,
    pub start_ps: Time,
    /// GPUs per scale-up domain (the hierarchical algorithms' domains; the default algorithm).
    pub domain_size: Option<u32>,
    pub noise: Noise,
    /// What the step's collectives take from the scenario (as `kind = "collective"`).
    pub collective: CollectiveParams,
}

/// PyTorch DDP's default bucket (`bucket_cap_mb = 25`).
pub const DEFAULT_DP_BUCKET: Bytes = 25 << 20;
/// Default fraction of peak FLOP/s a layer achieves (Megatron-LM reaches 44-52 % of peak on
/// A100s, Narayanan et al. 2021, Table 1).
pub const DEFAULT_EFFICIENCY: f64 = 0.5;
/// The most ops one generated graph may hold, iterations included (`TrainingSpec::op_count`): a
/// guard against a typo'd size, checked before the graph is made. It also bounds what the memory
/// estimate makes: the estimate generates the graph to count its flows.
pub const MAX_GRAPH_OPS: u64 = 2_000_000;
/// The largest activation (or gradient bucket) one op may move: 1 TiB.
pub const MAX_MESSAGE_BYTES: u64 = 1 << 40;

/// Forward FLOPs of one layer's attention and MLP blocks for b sequences of s tokens, hidden h
/// (Narayanan et al. 2021): attention 8bsh^2 + 4bs^2h, MLP 16bsh^2.
pub fn layer_forward_flops(b: f64, s: f64, h: f64) -> (f64, f64) {
    (
        8.0 * b * s * h * h + 4.0 * b * s * s * h,
        16.0 * b * s * h * h,
    )
}

/// `flops` at `rate` FLOP/s in picoseconds (rounded to the nearest; at most the longest time a
/// scenario may span, which validation then refuses).
pub fn flops_time(flops: f64, rate: f64) -> Time {
    let t = (flops / rate * PS_PER_SEC as f64).round();
    if t.is_nan() {
        return crate::config::values::MAX_TIME_PS;
    }
    (t as Time).min(crate::config::values::MAX_TIME_PS)
}

/// `total` split in the ratio a : b (the first part rounded down; the parts sum to `total`).
pub fn split_ratio(total: Time, a: f64, b: f64) -> (Time, Time) {
    let first = ((total as f64) * a / (a + b)).floor() as Time;
    let first = first.min(total);
    (first, total - first)
}

/// The coordinate order of `placement` ("tp,dp,pp" and its permutations).
fn parse_placement(path: &str, text: &str) -> Res<[Dim; 3]> {
    let dims: Vec<&str> = text.split(',').map(str::trim).collect();
    let mut out = Vec::with_capacity(3);
    for d in &dims {
        let dim = match *d {
            "tp" => Dim::Tp,
            "dp" => Dim::Dp,
            "pp" => Dim::Pp,
            other => {
                return Err(ScenarioError::at(
                    path,
                    format!("expected \"tp\", \"dp\" and \"pp\" in some order, innermost first (like \"tp,dp,pp\"), found {other:?}"),
                ))
            }
        };
        if out.contains(&dim) {
            return Err(ScenarioError::at(path, format!("{d:?} is listed twice")));
        }
        out.push(dim);
    }
    if out.len() != 3 {
        return Err(ScenarioError::at(
            path,
            format!("expected all of \"tp\", \"dp\" and \"pp\", innermost first (like \"tp,dp,pp\"), found {text:?}"),
        ));
    }
    Ok([out[0], out[1], out[2]])
}

/// Whether `hosts` spread over more than one scale-up domain of `size` GPUs with the same number
/// (more than one) in each: where the hierarchical algorithms apply.
pub fn spans_domains_regularly(hosts: &[u32], size: u32) -> bool {
    let mut per: Vec<(u32, u32)> = Vec::new();
    for &h in hosts {
        let d = h / size.max(1);
        match per.iter_mut().find(|(x, _)| *x == d) {
            Some(e) => e.1 += 1,
            None => per.push((d, 1)),
        }
    }
    per.len() > 1 && per[0].1 > 1 && per.iter().all(|e| e.1 == per[0].1)
}

/// Hosts of a group sitting in domains of `size` with as many in each (one domain counts).
fn regular(hosts: &[u32], size: u32) -> bool {
    let mut per: Vec<(u32, u32)> = Vec::new();
    for &h in hosts {
        let d = h / size.max(1);
        match per.iter_mut().find(|(x, _)| *x == d) {
            Some(e) => e.1 += 1,
            None => per.push((d, 1)),
        }
    }
    per.iter().all(|e| e.1 == per[0].1)
}

/// The collective algorithm for a group: the configured one, else hierarchical (ring, or PXN for
/// all-to-all) when the group spans several scale-up domains with several ranks in each, else ring
/// (direct for all-to-all).
pub fn default_algorithm(
    op: CollectiveOp,
    hosts: &[u32],
    domain_size: Option<u32>,
) -> CollectiveAlgorithm {
    let hier = domain_size.is_some_and(|d| spans_domains_regularly(hosts, d));
    match (op, hier) {
        (CollectiveOp::AllToAll, true) => CollectiveAlgorithm::Pxn,
        (CollectiveOp::AllToAll, false) => CollectiveAlgorithm::Direct,
        (_, true) => CollectiveAlgorithm::HierarchicalRing,
        (_, false) => CollectiveAlgorithm::Ring,
    }
}

/// Check a configured algorithm for `op` over `groups` (key path `path`).
pub fn check_algorithm(
    path: &str,
    algorithm: CollectiveAlgorithm,
    op: CollectiveOp,
    groups: &[Vec<u32>],
    domain_size: Option<u32>,
) -> Res<()> {
    let choices = super::collective::algorithms(op);
    if !choices.contains(&algorithm) {
        let names: Vec<&str> = choices.iter().map(|a| a.name()).collect();
        return Err(ScenarioError::at(
            path,
            format!(
                "expected one of {} for this group's {}, found {:?}",
                quoted_list(&names),
                op.name(),
                algorithm.name()
            ),
        ));
    }
    if algorithm == CollectiveAlgorithm::HalvingDoubling && op != CollectiveOp::AllReduce {
        if let Some(g) = groups.iter().find(|g| !g.len().is_power_of_two()) {
            return Err(ScenarioError::at(
                path,
                format!(
                    "halving_doubling {} needs a power-of-two group, found {} ranks (use ring)",
                    op.name(),
                    g.len()
                ),
            ));
        }
    }
    if algorithm.is_hierarchical() {
        let Some(size) = domain_size else {
            return Err(ScenarioError::at(
                path,
                format!(
                    "algorithm \"{}\" is built from scale-up domains: this scenario has none (add a [cluster] with a scale-up domain)",
                    algorithm.name()
                ),
            ));
        };
        if let Some(g) = groups.iter().find(|g| !regular(g, size)) {
            return Err(ScenarioError::at(
                path,
                format!(
                    "algorithm \"{}\" needs as many ranks in every scale-up domain a group touches; the group of GPUs {:?} does not (change placement or the algorithm)",
                    algorithm.name(),
                    g
                ),
            ));
        }
    }
    Ok(())
}

/// A layer's backward compute when only the forward is given: twice it (the weight and the
/// input gradients).
pub fn default_backward(forward: Time) -> Time {
    2 * forward
}

impl MoeFile {
    /// `moe` with every default written out.
    pub fn normalised(m: &MoeSpec) -> MoeFile {
        MoeFile {
            experts: Some(m.experts as i64),
            every: Some(m.every as i64),
            top_k: Some(m.top_k as i64),
        }
    }
}

impl TrainingFile {
    /// With every default written out (see `WorkloadFile::normalised`): the parallelism, batch,
    /// model and schedule from the validated `spec`; the compute as given (`forward` with its
    /// `backward`, or `gpu_flops` with its `efficiency`); the algorithms and noise as written
    /// (an absent algorithm is chosen per group when the step is built).
    pub fn normalised(&self, name: Option<String>, s: &TrainingSpec) -> TrainingFile {
        let n = |x: u32| Some(x as i64);
        let dim = |d: Dim| match d {
            Dim::Tp => "tp",
            Dim::Dp => "dp",
            Dim::Pp => "pp",
        };
        TrainingFile {
            name,
            start: Some(Duration(s.start_ps)),
            dp: n(s.dp),
            tp: n(s.tp),
            pp: n(s.pp),
            ep: n(s.ep),
            micro_batches: n(s.micro_batches),
            micro_batch_size: n(s.micro_batch_size),
            layers: n(s.layers),
            hidden: n(s.hidden),
            seq_len: n(s.seq_len),
            bytes_per_element: n(s.bytes_per_element),
            forward: self.forward,
            backward: self
                .backward
                .or(self.forward.map(|f| Duration(default_backward(f.0)))),
            gpu_flops: self.gpu_flops,
            efficiency: self
                .gpu_flops
                .map(|_| self.efficiency.unwrap_or(DEFAULT_EFFICIENCY)),
            schedule: Some(s.schedule),
            sequence_parallel: Some(s.sequence_parallel),
            dp_bucket: Some(Size(s.dp_bucket_bytes)),
            moe: s.moe.as_ref().map(MoeFile::normalised),
            iterations: n(s.iterations),
            algorithms: self.algorithms.clone(),
            placement: Some(s.placement.map(dim).join(",")),
            optimizer: Some(Duration(s.optimizer_ps)),
            noise: self.noise.clone(),
            // Filled by `WorkloadFile::normalised` from the validated reaction.
            on_failure: None,
            restart_time: None,
            checkpoint_interval: None,
            detection: None,
            reformation_time: None,
            rejoin: None,
            checkpoint_time: None,
        }
    }

    pub fn validate(&self, ctx: &Context) -> Res<TrainingSpec> {
        let p = |key: &str| ctx.path(key);
        let opt = |key: &str, v: Option<i64>, what: &str| {
            count(&p(key), Some(v.unwrap_or(1)), 1, 1 << 20, what)
        };
        let dp = opt("dp", self.dp, "a number of data-parallel replicas")?;
        let tp = opt("tp", self.tp, "a number of tensor-parallel ranks")?;
        let pp = opt("pp", self.pp, "a number of pipeline stages")?;
        let ep = opt("ep", self.ep, "a number of expert-parallel ranks")?;
        let micro_batches = opt(
            "micro_batches",
            self.micro_batches,
            "a number of micro-batches",
        )?;
        let micro_batch_size = opt(
            "micro_batch_size",
            self.micro_batch_size,
            "a number of sequences per micro-batch",
        )?;
        let iterations = opt("iterations", self.iterations, "a number of iterations")?;
        let bytes_per_element = count(
            &p("bytes_per_element"),
            Some(self.bytes_per_element.unwrap_or(2)),
            1,
            16,
            "bytes per element",
        )?;
        let layers = count(
            &p("layers"),
            self.layers,
            1,
            1 << 20,
            "the model's number of layers",
        )?;
        let hidden = count(&p("hidden"), self.hidden, 1, 1 << 24, "the hidden size")?;
        let seq_len = count(
            &p("seq_len"),
            self.seq_len,
            1,
            1 << 24,
            "the sequence length",
        )?;
        let ranks = dp as u64 * tp as u64 * pp as u64;
        if ranks > ctx.n_hosts as u64 {
            return Err(ScenarioError::at(
                p("dp"),
                format!(
                    "dp x tp x pp = {dp} x {tp} x {pp} = {ranks} ranks, but the fabric has {} GPUs (or hosts)",
                    ctx.n_hosts
                ),
            ));
        }
        if layers % pp != 0 {
            return Err(ScenarioError::at(
                p("layers"),
                format!("{layers} layers do not split into pp = {pp} equal stages"),
            ));
        }
        let moe = match &self.moe {
            None => {
                if ep > 1 {
                    return Err(ScenarioError::at(
                        p("ep"),
                        "expert parallelism needs experts: add moe = { experts = ..., top_k = ... }",
                    ));
                }
                None
            }
            Some(m) => {
                let experts = count(
                    &p("moe.experts"),
                    m.experts,
                    1,
                    1 << 16,
                    "a number of experts per expert layer",
                )?;
                let every = count(
                    &p("moe.every"),
                    Some(m.every.unwrap_or(1)),
                    1,
                    layers as i64,
                    "a layer interval",
                )?;
                let top_k = count(
                    &p("moe.top_k"),
                    Some(m.top_k.unwrap_or(2)),
                    1,
                    experts as i64,
                    "a number of experts per token",
                )?;
                if dp % ep != 0 {
                    return Err(ScenarioError::at(
                        p("ep"),
                        format!("expert-parallel groups are carved out of the data-parallel replicas: ep = {ep} must divide dp = {dp}"),
                    ));
                }
                if experts % ep != 0 {
                    return Err(ScenarioError::at(
                        p("moe.experts"),
                        format!("{experts} experts do not split over ep = {ep} ranks"),
                    ));
                }
                Some(MoeSpec {
                    experts,
                    every,
                    top_k,
                })
            }
        };
        let (b, s, h) = (micro_batch_size as f64, seq_len as f64, hidden as f64);
        let (attn_flops, mlp_flops) = layer_forward_flops(b, s, h);
        let top_k = moe.map_or(1, |m| m.top_k) as f64;
        let efficiency = match self.efficiency {
            None => DEFAULT_EFFICIENCY,
            Some(e) if e.is_finite() && e > 0.0 && e <= 1.0 => e,
            Some(e) => {
                return Err(ScenarioError::at(
                    p("efficiency"),
                    format!("expected a fraction of peak FLOP/s in (0, 1], found {e}"),
                ))
            }
        };
        let (dense, expert) = match (self.forward, self.gpu_flops) {
            (Some(_), Some(_)) => {
                return Err(ScenarioError::at(
                    p("gpu_flops"),
                    "give the compute as forward = \"<time>\" or as gpu_flops (FLOPs from the model), not both",
                ))
            }
            (None, None) => {
                return Err(ScenarioError::at(
                    p("forward"),
                    "missing: expected the forward compute of one layer like \"120us\", or gpu_flops (e.g. 989e12) to derive it from the model's FLOPs",
                ))
            }
            (Some(f), None) => {
                if f.0 == 0 && self.backward.is_none() {
                    // Allowed: communication-only studies.
                }
                let (af, mf) = split_ratio(f.0, attn_flops, mlp_flops);
                let bwd = self.backward.map_or(default_backward(f.0), |d| d.0);
                let (ab, mb) = split_ratio(bwd, attn_flops, mlp_flops);
                let t = BlockTimes {
                    attn_fwd_ps: af,
                    mlp_fwd_ps: mf,
                    attn_bwd_ps: ab,
                    mlp_bwd_ps: mb,
                };
                (t, t)
            }
            (None, Some(rate)) => {
                if !(rate.is_finite() && rate > 0.0) {
                    return Err(ScenarioError::at(
                        p("gpu_flops"),
                        format!("expected a positive FLOP/s like 989e12, found {rate}"),
                    ));
                }
                if self.backward.is_some() {
                    return Err(ScenarioError::at(
                        p("backward"),
                        "with gpu_flops the backward pass is twice the forward FLOPs; give forward = \"<time>\" to set times",
                    ));
                }
                // Each of the tp ranks computes 1/tp of the layer.
                let rate = rate * efficiency * tp as f64;
                let af = flops_time(attn_flops, rate);
                let mf = flops_time(mlp_flops, rate);
                let ef = flops_time(mlp_flops * top_k, rate);
                (
                    BlockTimes {
                        attn_fwd_ps: af,
                        mlp_fwd_ps: mf,
                        attn_bwd_ps: 2 * af,
                        mlp_bwd_ps: 2 * mf,
                    },
                    BlockTimes {
                        attn_fwd_ps: af,
                        mlp_fwd_ps: ef,
                        attn_bwd_ps: 2 * af,
                        mlp_bwd_ps: 2 * ef,
                    },
                )
            }
        };
        if self.efficiency.is_some() && self.gpu_flops.is_none() {
            return Err(ScenarioError::at(
                p("efficiency"),
                "efficiency applies to gpu_flops: leave it out with forward = \"<time>\"",
            ));
        }
        let placement = match &self.placement {
            None => [Dim::Tp, Dim::Dp, Dim::Pp],
            Some(t) => parse_placement(&p("placement"), t)?,
        };
        let dp_bucket_bytes = match self.dp_bucket {
            None => DEFAULT_DP_BUCKET,
            Some(s) if s.0 == 0 => {
                return Err(ScenarioError::at(
                    p("dp_bucket"),
                    "expected a positive size",
                ))
            }
            Some(s) => s.0,
        };
        let sequence_parallel = self.sequence_parallel.unwrap_or(false);
        let algorithms = self.algorithms.clone().unwrap_or_default();
        let spec = TrainingSpec {
            dp,
            tp,
            pp,
            ep,
            micro_batches,
            micro_batch_size,
            layers,
            hidden,
            seq_len,
            bytes_per_element,
            dense,
            expert,
            schedule: self.schedule.unwrap_or(PipelineSchedule::OneFOneB),
            sequence_parallel,
            dp_bucket_bytes,
            moe,
            iterations,
            tp_algorithm: algorithms.tp,
            dp_algorithm: algorithms.dp,
            ep_algorithm: algorithms.ep,
            placement,
            optimizer_ps: self.optimizer.map_or(0, |d| d.0),
            start_ps: start_of(self.start),
            domain_size: ctx.scaleup_gpus,
            noise: match &self.noise {
                None => Noise::default(),
                Some(n) => n.check(&p("noise"), dp * tp * pp)?,
            },
            collective: CollectiveParams::new(
                ctx.mtu_bytes,
                ctx.header_bytes,
                ctx.host_rate_bps,
                ctx.scaleup_gpus,
            ),
        };
        let act_wide =
            micro_batch_size as u128 * seq_len as u128 * hidden as u128 * bytes_per_element as u128;
        if act_wide > MAX_MESSAGE_BYTES as u128 {
            return Err(ScenarioError::at(
                p("hidden"),
                format!("one micro-batch's activations, b x s x h x bytes = {act_wide} B, exceed {MAX_MESSAGE_BYTES} B"),
            ));
        }
        let h2e = hidden as u128 * hidden as u128 * bytes_per_element as u128;
        let experts = moe.map_or(0, |m| m.experts / ep) as u128;
        let params = h2e * (12 + 8 * experts);
        if params > MAX_MESSAGE_BYTES as u128 {
            return Err(ScenarioError::at(
                p("hidden"),
                format!(
                    "a layer's gradients on one rank, {params} B, exceed {MAX_MESSAGE_BYTES} B"
                ),
            ));
        }
        // Compute on the critical path of all iterations must stay within a scenario's time range.
        let per_mb = spec.dense.attn_fwd_ps.max(spec.expert.attn_fwd_ps) as u128
            + spec.dense.mlp_fwd_ps.max(spec.expert.mlp_fwd_ps) as u128
            + spec.dense.attn_bwd_ps.max(spec.expert.attn_bwd_ps) as u128
            + spec.dense.mlp_bwd_ps.max(spec.expert.mlp_bwd_ps) as u128;
        let total = per_mb
            * (micro_batches as u128 + pp as u128)
            * spec.layers_per_stage() as u128
            * iterations as u128
            + spec.optimizer_ps as u128 * iterations as u128;
        if total > crate::config::values::MAX_TIME_PS as u128 {
            return Err(ScenarioError::at(
                p("forward"),
                "the iterations' compute exceeds the longest time a scenario may span: shorter compute or fewer iterations, micro-batches or layers",
            ));
        }
        // Sizes every collective needs at least one byte per rank of.
        let act = spec.activation_bytes();
        if act < tp as u64 {
            return Err(ScenarioError::at(
                p("hidden"),
                format!("activations of {act} B do not split over tp = {tp} ranks"),
            ));
        }
        if spec.moe.is_some() && spec.dispatch_bytes() < ep as u64 {
            return Err(ScenarioError::at(
                p("hidden"),
                format!(
                    "the expert all-to-all of {} B per rank does not split over ep = {ep} ranks",
                    spec.dispatch_bytes()
                ),
            ));
        }
        let ops = spec.op_count();
        if ops > MAX_GRAPH_OPS {
            return Err(ScenarioError::at(
                p("layers"),
                format!(
                    "this step would have {ops} ops (at most {MAX_GRAPH_OPS}): fewer layers, micro-batches or iterations"
                ),
            ));
        }
        let groups = spec.groups();
        let keys = [
            (
                "algorithms.tp",
                spec.tp_algorithm,
                &groups.tp,
                spec.tp_ops(),
            ),
            (
                "algorithms.dp",
                spec.dp_algorithm,
                &groups.dp,
                vec![CollectiveOp::AllReduce],
            ),
            (
                "algorithms.ep",
                spec.ep_algorithm,
                &groups.ep,
                vec![CollectiveOp::AllToAll],
            ),
        ];
        for (key, alg, gs, ops) in keys {
            if let Some(a) = alg {
                if gs.is_empty() {
                    return Err(ScenarioError::at(
                        p(key),
                        "this step has no such group (its parallel size is 1)",
                    ));
                }
                for op in ops {
                    check_algorithm(&p(key), a, op, gs, spec.domain_size)?;
                }
            }
        }
        Ok(spec)
    }
}

/// The communication groups of a training step, as GPU ids (rank r is on GPU r).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TrainingGroups {
    /// One per (stage, replica): its tp ranks (empty list of groups when tp = 1).
    pub tp: Vec<Vec<u32>>,
    /// One per (stage, tp index): its dp replicas.
    pub dp: Vec<Vec<u32>>,
    /// One per (stage, expert group, tp index): its ep ranks.
    pub ep: Vec<Vec<u32>>,
    /// One per (stage, expert shard, tp index): the dp/ep ranks holding the same experts.
    pub edp: Vec<Vec<u32>>,
}

impl TrainingSpec {
    pub fn ranks(&self) -> u32 {
        self.dp * self.tp * self.pp
    }

    /// The global rank (= GPU) of stage `s`, replica `d`, tensor rank `t`.
    pub fn rank(&self, s: u32, d: u32, t: u32) -> u32 {
        let mut r = 0;
        for dim in self.placement.iter().rev() {
            let (size, x) = match dim {
                Dim::Tp => (self.tp, t),
                Dim::Dp => (self.dp, d),
                Dim::Pp => (self.pp, s),
            };
            r = r * size + x;
        }
        r
    }

    /// b*s*h*bytes: one micro-batch's activations (the TP collectives' size).
    pub fn activation_bytes(&self) -> Bytes {
        self.micro_batch_size as u64
            * self.seq_len as u64
            * self.hidden as u64
            * self.bytes_per_element as u64
    }

    /// A pipeline send per TP rank: the activations, split over tp with sequence parallelism.
    pub fn pp_send_bytes(&self) -> Bytes {
        if self.sequence_parallel {
            (self.activation_bytes() / self.tp as u64).max(1)
        } else {
            self.activation_bytes()
        }
    }

    /// The expert all-to-all's send buffer of one rank: its share (1/tp) of the micro-batch's
    /// tokens, top_k copies each.
    pub fn dispatch_bytes(&self) -> Bytes {
        let k = self.moe.map_or(1, |m| m.top_k) as u64;
        self.activation_bytes() * k / self.tp as u64
    }

    pub fn layers_per_stage(&self) -> u32 {
        self.layers / self.pp
    }

    pub fn is_expert_layer(&self, layer: u32) -> bool {
        self.moe.is_some_and(|m| layer % m.every == m.every - 1)
    }

    /// TP collectives per block: all-reduce, or all-gather and reduce-scatter.
    fn tp_ops(&self) -> Vec<CollectiveOp> {
        if self.sequence_parallel {
            vec![CollectiveOp::AllGather, CollectiveOp::ReduceScatter]
        } else {
            vec![CollectiveOp::AllReduce]
        }
    }

    /// Gradient bytes per rank of a layer reduced over the dp group (dense) and over the expert
    /// data-parallel group (expert weights).
    pub fn grad_bytes(&self, layer: u32) -> (Bytes, Bytes) {
        let h2 = self.hidden as u64 * self.hidden as u64;
        let e = self.bytes_per_element as u64;
        let tp = self.tp as u64;
        match self.moe {
            Some(m) if self.is_expert_layer(layer) => (
                4 * h2 * e / tp,
                (m.experts / self.ep) as u64 * 8 * h2 * e / tp,
            ),
            _ => (12 * h2 * e / tp, 0),
        }
    }

    pub fn groups(&self) -> TrainingGroups {
        let mut g = TrainingGroups::default();
        for s in 0..self.pp {
            if self.tp > 1 {
                for d in 0..self.dp {
                    g.tp.push((0..self.tp).map(|t| self.rank(s, d, t)).collect());
                }
            }
            if self.dp > 1 {
                for t in 0..self.tp {
                    g.dp.push((0..self.dp).map(|d| self.rank(s, d, t)).collect());
                }
            }
            if self.moe.is_some() {
                let n_groups = self.dp / self.ep;
                if self.ep > 1 {
                    for eg in 0..n_groups {
                        for t in 0..self.tp {
                            g.ep.push(
                                (0..self.ep)
                                    .map(|k| self.rank(s, eg * self.ep + k, t))
                                    .collect(),
                            );
                        }
                    }
                }
                if n_groups > 1 {
                    for k in 0..self.ep {
                        for t in 0..self.tp {
                            g.edp.push(
                                (0..n_groups)
                                    .map(|eg| self.rank(s, eg * self.ep + k, t))
                                    .collect(),
                            );
                        }
                    }
                }
            }
        }
        g
    }

    /// The ops of the generated graph (`generate`), counted from the spec: exact for the layers'
    /// blocks, the pipeline sends and the optimizer, an upper bound for the gradient buckets.
    /// (Until 2026-12-05 an upper bound of 2 (4 tp + 6) ops per replica and layer, ten times
    /// the graph at tp = 1, refused a 16,384-GPU data-parallel job of two layers past one
    /// iteration.)
    pub fn op_count(&self) -> u64 {
        let (exact, buckets) = self.ops_per_iteration();
        let n = (exact + buckets) * self.iterations as f64;
        if n >= u64::MAX as f64 {
            u64::MAX
        } else {
            n.ceil() as u64
        }
    }

    /// One iteration's ops: those counted exactly (blocks, pipeline sends, the optimizer), and an
    /// upper bound of the gradient buckets.
    fn ops_per_iteration(&self) -> (f64, f64) {
        let f = |x: u32| x as f64;
        let (dp, tp, ep) = (f(self.dp), f(self.tp), f(self.ep));
        // One block of one layer, micro-batch and direction on a stage (`stage_block`): a compute
        // op per rank, the TP collectives per replica, the expert dispatch and combine per EP
        // group.
        let tp_collectives = if self.tp > 1 {
            dp * if self.sequence_parallel { 2.0 } else { 1.0 }
        } else {
            0.0
        };
        let block = dp * tp + tp_collectives;
        let expert_block = block
            + if self.ep > 1 {
                2.0 * (dp / ep).floor() * tp
            } else {
                0.0
            };
        // The layers the stages hold (`layers_per_stage` each).
        let held = self.layers_per_stage() * self.pp;
        let experts = (0..held).filter(|&l| self.is_expert_layer(l)).count() as f64;
        let layers = f(held);
        // Attention and MLP blocks of every layer, forward and backward, per micro-batch.
        let blocks = 2.0
            * f(self.micro_batches)
            * (layers * block + (layers - experts) * block + experts * expert_block);
        let sends = 2.0 * f(self.micro_batches) * f(self.pp.saturating_sub(1)) * dp * tp;
        // Buckets per reduction group: its bytes over the bucket size, plus one per layer.
        let (dense, expert) = (0..self.layers).fold((0.0, 0.0), |(d, e), l| {
            let (a, b) = self.grad_bytes(l);
            (d + a as f64, e + b as f64)
        });
        let cap = self.dp_bucket_bytes as f64;
        let groups = f(self.tp) * f(self.ep);
        let buckets = groups * ((dense + expert) / cap + 2.0 * f(self.layers));
        let optimizer = if self.optimizer_ps > 0 {
            f(self.ranks())
        } else {
            0.0
        };
        (blocks + sends + optimizer, buckets)
    }
}

impl TrainingSpec {
    /// The network-free iteration time (communication taking no time) of the first iteration.
    pub fn ideal_iteration_ps(&self) -> Option<Time> {
        let mut one = self.clone();
        one.iterations = 1;
        let graph = generate(&one);
        graph.ideal_schedule().ok().map(|s| {
            let end = s.end();
            end - graph.start_ps
        })
    }

    /// What `validate` and `describe()` show of the workload.
    pub fn describe(&self) -> serde_json::Value {
        let ideal = self.ideal_iteration_ps();
        serde_json::json!({
            "ideal_iteration_ps": ideal,
            "dp": self.dp, "tp": self.tp, "pp": self.pp, "ep": self.ep,
            "ranks": self.ranks(), "micro_batches": self.micro_batches,
            "layers": self.layers, "iterations": self.iterations,
            "schedule": match self.schedule {
                PipelineSchedule::Gpipe => "gpipe",
                PipelineSchedule::OneFOneB => "1f1b",
            },
            "sequence_parallel": self.sequence_parallel,
            "activation_bytes": self.activation_bytes(),
            "layer_forward_ps": self.dense.attn_fwd_ps + self.dense.mlp_fwd_ps,
        })
    }
}

/// Flows and payload bytes a step graph plans (sends one flow each; collectives as their
/// algorithm expands them), for the run's budget.
pub fn graph_flows(graph: &Graph, params: &CollectiveParams) -> (u64, u64) {
    let (mut flows, mut bytes) = (0u64, 0u64);
    for op in &graph.ops {
        match &op.kind {
            OpKind::Compute { .. } => {}
            OpKind::Send { bytes: b, .. } => {
                flows += 1;
                bytes = bytes.saturating_add(*b);
            }
            OpKind::Collective {
                group,
                op: cop,
                algorithm,
                bytes: b,
                domain_size,
            } => {
                let hosts: Vec<u32> = graph.groups[*group as usize]
                    .iter()
                    .map(|&r| graph.ranks[r as usize])
                    .collect();
                let n = hosts.len() as u64;
                let spec = crate::config::CollectiveSpec {
                    op: *cop,
                    algorithm: *algorithm,
                    groups: vec![hosts],
                    shuffle: None,
                    size_bytes: *b,
                    iterations: 1,
                    compute_gap_ps: 0,
                    start_ps: 0,
                    chunk_bytes: params.chunk_bytes,
                    chunk_interval_ps: params.chunk_interval_ps,
                    domain_size: domain_size.or(params.domain_size),
                };
                flows += super::collective::flows_per_iteration(&spec);
                bytes = bytes.saturating_add(b.saturating_mul(2 * n));
            }
        }
    }
    (flows, bytes)
}

/// Expand a training workload into `plan` (the build phase): its graph through the one step
/// graph planner.
pub fn expand(plan: &mut super::FlowPlan, index: usize, spec: &TrainingSpec, seed: u64) {
    let graph = generate(spec);
    super::graph::plan_graph(plan, index, seed, &graph, &spec.noise, &spec.collective);
}

/// The order of (micro-batch, is_backward) on stage `s` of `p` under `schedule` with `m`
/// micro-batches.
pub fn stage_order(schedule: PipelineSchedule, s: u32, p: u32, m: u32) -> Vec<(u32, bool)> {
    match schedule {
        PipelineSchedule::Gpipe => (0..m)
            .map(|j| (j, false))
            .chain((0..m).map(|j| (j, true)))
            .collect(),
        PipelineSchedule::OneFOneB => {
            let warm = (p - s - 1).min(m);
            let mut out: Vec<(u32, bool)> = (0..warm).map(|j| (j, false)).collect();
            for i in 0..m - warm {
                out.push((warm + i, false));
                out.push((i, true));
            }
            out.extend((m - warm..m).map(|j| (j, true)));
            out
        }
    }
}

/// Builds a graph op by op, keeping per rank what its next op must wait for.
pub(crate) struct Builder {
    pub graph: Graph,
    /// Global rank -> ops the next op on it waits for.
    pub frontier: Vec<Vec<u32>>,
    pub iteration: u32,
}

impl Builder {
    pub fn new(ranks: Vec<u32>, start_ps: Time, iterations: u32) -> Self {
        let n = ranks.len();
        Builder {
            graph: Graph {
                ranks,
                groups: Vec::new(),
                ops: Vec::new(),
                iterations,
                start_ps,
            },
            frontier: vec![Vec::new(); n],
            iteration: 0,
        }
    }

    pub fn group(&mut self, ranks: Vec<u32>) -> u32 {
        self.graph.groups.push(ranks);
        self.graph.groups.len() as u32 - 1
    }

    pub fn push(&mut self, kind: OpKind, deps: Vec<u32>, phase: OpPhase, name: String) -> u32 {
        self.graph.ops.push(GraphOp {
            kind,
            deps,
            iteration: self.iteration,
            phase,
            name: Some(name),
        });
        self.graph.ops.len() as u32 - 1
    }

    /// Compute on `rank` after its frontier; it becomes the frontier.
    pub fn compute(&mut self, rank: u32, duration_ps: Time, phase: OpPhase, name: String) -> u32 {
        let deps = std::mem::take(&mut self.frontier[rank as usize]);
        let i = self.push(OpKind::Compute { rank, duration_ps }, deps, phase, name);
        self.frontier[rank as usize] = vec![i];
        i
    }

    /// A collective over group `group` (its `ranks`, graph rank ids) after every member's
    /// frontier; it becomes theirs.
    #[allow(clippy::too_many_arguments)]
    pub fn collective(
        &mut self,
        group: u32,
        op: CollectiveOp,
        algorithm: CollectiveAlgorithm,
        bytes: Bytes,
        domain_size: Option<u32>,
        phase: OpPhase,
        name: String,
    ) -> u32 {
        let members = self.graph.groups[group as usize].clone();
        let mut deps: Vec<u32> = Vec::new();
        for &r in &members {
            for d in std::mem::take(&mut self.frontier[r as usize]) {
                if !deps.contains(&d) {
                    deps.push(d);
                }
            }
        }
        let i = self.push(
            OpKind::Collective {
                group,
                op,
                algorithm,
                bytes,
                domain_size,
            },
            deps,
            phase,
            name,
        );
        for &r in &members {
            self.frontier[r as usize] = vec![i];
        }
        i
    }
}

/// One (stage, micro-batch, direction) chunk: its ops that took the chunk's start dependencies
/// (the first op touching each rank of the stage), and the op each rank ended it with.
#[derive(Debug, Clone, Default)]
struct Chunk {
    entries: Vec<u32>,
    /// Per (replica, tp index) of the stage.
    exits: Vec<u32>,
}

/// Group ids (in the graph) and algorithms of a training step, indexed as [`TrainingGroups`].
struct GroupIds {
    tp: Vec<(u32, CollectiveAlgorithm)>,
    dp: Vec<(u32, CollectiveAlgorithm)>,
    ep: Vec<(u32, CollectiveAlgorithm)>,
    edp: Vec<(u32, CollectiveAlgorithm)>,
}

impl GroupIds {
    fn register(spec: &TrainingSpec, b: &mut Builder) -> Self {
        let groups = spec.groups();
        let dom = spec.domain_size;
        let mut add = |list: &[Vec<u32>], alg: Option<CollectiveAlgorithm>, op: CollectiveOp| {
            list.iter()
                .map(|g| {
                    let a = alg.unwrap_or_else(|| default_algorithm(op, g, dom));
                    (b.group(g.clone()), a)
                })
                .collect::<Vec<_>>()
        };
        let tp_op = spec.tp_ops()[0];
        GroupIds {
            tp: add(&groups.tp, spec.tp_algorithm, tp_op),
            dp: add(&groups.dp, spec.dp_algorithm, CollectiveOp::AllReduce),
            ep: add(&groups.ep, spec.ep_algorithm, CollectiveOp::AllToAll),
            edp: add(&groups.edp, spec.dp_algorithm, CollectiveOp::AllReduce),
        }
    }
}

/// The step graph of a training workload. Graph ranks are global ranks; rank r runs on GPU r.
pub fn generate(spec: &TrainingSpec) -> Graph {
    let n = spec.ranks();
    let mut b = Builder::new((0..n).collect(), spec.start_ps, spec.iterations);
    let ids = GroupIds::register(spec, &mut b);
    let (pp, dp, tp, m) = (spec.pp, spec.dp, spec.tp, spec.micro_batches);
    let lps = spec.layers_per_stage();
    let chunk_index = |s: u32, j: u32, bwd: bool| ((s * m + j) * 2 + bwd as u32) as usize;
    let ready_index = |s: u32, d: u32, l: u32, t: u32| (((s * dp + d) * lps + l) * tp + t) as usize;
    for it in 0..spec.iterations {
        b.iteration = it;
        let mut chunks = vec![Chunk::default(); (pp * m * 2) as usize];
        // Per (stage, replica, layer, tp index): the op after which the layer's dense and expert
        // gradients are complete (the last micro-batch's backward of its attention and MLP).
        let mut dense_ready = vec![0u32; (pp * dp * lps * tp) as usize];
        let mut expert_ready = vec![0u32; (pp * dp * lps * tp) as usize];
        // Per rank: its place in the stage's list below (u32::MAX: not on the stage), where a
        // search of the list for each op's ranks made 16,384 ranks cost seconds.
        let mut place = vec![u32::MAX; n as usize];
        for s in 0..pp {
            // The stage's ranks, replica-major.
            let ranks: Vec<u32> = (0..dp)
                .flat_map(|d| (0..tp).map(move |t| (d, t)))
                .map(|(d, t)| spec.rank(s, d, t))
                .collect();
            place.fill(u32::MAX);
            for (x, &r) in ranks.iter().enumerate() {
                place[r as usize] = x as u32;
            }
            for (j, bwd) in stage_order(spec.schedule, s, pp, m) {
                let first_op = b.graph.ops.len() as u32;
                let layers: Vec<u32> = if bwd {
                    (0..lps).rev().collect()
                } else {
                    (0..lps).collect()
                };
                for l in layers {
                    let blocks: [bool; 2] = if bwd { [true, false] } else { [false, true] };
                    for mlp in blocks {
                        let done = stage_block(spec, &ids, &mut b, s, s * lps + l, mlp, j, bwd);
                        if bwd && j == m - 1 {
                            for (x, &op) in done.iter().enumerate() {
                                let (d, t) = (x as u32 / tp, x as u32 % tp);
                                let i = ready_index(s, d, l, t);
                                if mlp {
                                    expert_ready[i] = op;
                                } else {
                                    dense_ready[i] = op;
                                }
                            }
                        }
                    }
                }
                let mut entries = Vec::new();
                let mut seen = vec![false; ranks.len()];
                let mut left = ranks.len();
                for i in first_op..b.graph.ops.len() as u32 {
                    let mut fresh = false;
                    for r in b.graph.op_ranks(&b.graph.ops[i as usize]) {
                        let x = place[r as usize] as usize;
                        if x != u32::MAX as usize && !seen[x] {
                            seen[x] = true;
                            left -= 1;
                            fresh = true;
                        }
                    }
                    if fresh {
                        entries.push(i);
                    }
                    if left == 0 {
                        break;
                    }
                }
                let exits = ranks.iter().map(|&r| b.frontier[r as usize][0]).collect();
                chunks[chunk_index(s, j, bwd)] = Chunk { entries, exits };
            }
        }
        // Pipeline sends: activations forward, gradients backward, one per rank of the stage.
        for s in 0..pp {
            for j in 0..m {
                for (bwd, to) in [(false, s + 1), (true, s.wrapping_sub(1))] {
                    if to >= pp {
                        continue;
                    }
                    let dir = if bwd { "grad" } else { "act" };
                    let mut sends: Vec<(u32, u32)> = Vec::with_capacity((dp * tp) as usize);
                    for d in 0..dp {
                        for t in 0..tp {
                            let from = chunks[chunk_index(s, j, bwd)].exits[(d * tp + t) as usize];
                            let (src, dst) = (spec.rank(s, d, t), spec.rank(to, d, t));
                            let i = b.push(
                                OpKind::Send {
                                    src,
                                    dst,
                                    bytes: spec.pp_send_bytes(),
                                },
                                vec![from],
                                OpPhase::PipelineParallel,
                                format!("pp.{dir}.s{s}to{to}.mb{j}"),
                            );
                            sends.push((dst, i));
                        }
                    }
                    let entries = chunks[chunk_index(to, j, bwd)].entries.clone();
                    for e in entries {
                        let touched = b.graph.op_ranks(&b.graph.ops[e as usize]);
                        for &(dst, i) in &sends {
                            if touched.contains(&dst) {
                                b.graph.ops[e as usize].deps.push(i);
                            }
                        }
                    }
                }
            }
        }
        // Data-parallel gradient reduction in buckets, overlapped with the backward pass.
        for s in 0..pp {
            if dp > 1 {
                for t in 0..tp {
                    let members: Vec<(u32, u32)> = (0..dp).map(|d| (d, t)).collect();
                    let ready: Vec<Vec<u32>> = (0..lps)
                        .map(|l| {
                            members
                                .iter()
                                .map(|&(d, t)| dense_ready[ready_index(s, d, l, t)])
                                .collect()
                        })
                        .collect();
                    let bytes: Vec<Bytes> =
                        (0..lps).map(|l| spec.grad_bytes(s * lps + l).0).collect();
                    let (gid, alg) = ids.dp[(s * tp + t) as usize];
                    let ranks: Vec<u32> =
                        members.iter().map(|&(d, t)| spec.rank(s, d, t)).collect();
                    reduce_buckets(
                        spec,
                        &mut b,
                        gid,
                        alg,
                        &ranks,
                        &bytes,
                        &ready,
                        &format!("dp.s{s}"),
                    );
                }
            }
            let groups = dp / spec.ep;
            if spec.moe.is_some() && groups > 1 {
                for k in 0..spec.ep {
                    for t in 0..tp {
                        let members: Vec<(u32, u32)> =
                            (0..groups).map(|eg| (eg * spec.ep + k, t)).collect();
                        let ready: Vec<Vec<u32>> = (0..lps)
                            .map(|l| {
                                members
                                    .iter()
                                    .map(|&(d, t)| expert_ready[ready_index(s, d, l, t)])
                                    .collect()
                            })
                            .collect();
                        let bytes: Vec<Bytes> =
                            (0..lps).map(|l| spec.grad_bytes(s * lps + l).1).collect();
                        let (gid, alg) = ids.edp[((s * spec.ep + k) * tp + t) as usize];
                        let ranks: Vec<u32> =
                            members.iter().map(|&(d, t)| spec.rank(s, d, t)).collect();
                        reduce_buckets(
                            spec,
                            &mut b,
                            gid,
                            alg,
                            &ranks,
                            &bytes,
                            &ready,
                            &format!("edp.s{s}"),
                        );
                    }
                }
            }
        }
        if spec.optimizer_ps > 0 {
            for r in 0..n {
                b.compute(
                    r,
                    spec.optimizer_ps,
                    OpPhase::OtherCompute,
                    "optimizer".into(),
                );
            }
        }
    }
    b.graph
}

/// One block (attention or MLP) of `layer` for micro-batch `j` on every rank of stage `s`: TP
/// all-gather (sequence parallel), expert dispatch, compute, expert combine, TP all-reduce or
/// reduce-scatter. Returns each rank's compute op (replica-major).
#[allow(clippy::too_many_arguments)]
fn stage_block(
    spec: &TrainingSpec,
    ids: &GroupIds,
    b: &mut Builder,
    s: u32,
    layer: u32,
    mlp: bool,
    j: u32,
    bwd: bool,
) -> Vec<u32> {
    let (dp, tp) = (spec.dp, spec.tp);
    let dom = spec.domain_size;
    let expert = mlp && spec.is_expert_layer(layer);
    let times = if expert { &spec.expert } else { &spec.dense };
    let dur = match (mlp, bwd) {
        (false, false) => times.attn_fwd_ps,
        (true, false) => times.mlp_fwd_ps,
        (false, true) => times.attn_bwd_ps,
        (true, true) => times.mlp_bwd_ps,
    };
    let (dir, phase) = if bwd {
        ("bwd", OpPhase::Backward)
    } else {
        ("fwd", OpPhase::Forward)
    };
    let name = if mlp { "mlp" } else { "attn" };
    let label = |what: &str| format!("L{layer}.{name}.{what}.{dir}.mb{j}");
    let tp_group = |d: u32| ids.tp[(s * dp + d) as usize];
    if tp > 1 && spec.sequence_parallel {
        for d in 0..dp {
            let (g, alg) = tp_group(d);
            b.collective(
                g,
                CollectiveOp::AllGather,
                alg,
                spec.activation_bytes(),
                dom,
                OpPhase::TensorParallel,
                label("ag"),
            );
        }
    }
    let ep_groups: Vec<(u32, CollectiveAlgorithm)> = if expert && spec.ep > 1 {
        let per_stage = (dp / spec.ep * tp) as usize;
        ids.ep[s as usize * per_stage..][..per_stage].to_vec()
    } else {
        Vec::new()
    };
    for &(g, alg) in &ep_groups {
        b.collective(
            g,
            CollectiveOp::AllToAll,
            alg,
            spec.dispatch_bytes(),
            dom,
            OpPhase::ExpertParallel,
            label("dispatch"),
        );
    }
    let mut computed = Vec::with_capacity((dp * tp) as usize);
    for d in 0..dp {
        for t in 0..tp {
            computed.push(b.compute(spec.rank(s, d, t), dur, phase, label("compute")));
        }
    }
    for &(g, alg) in &ep_groups {
        b.collective(
            g,
            CollectiveOp::AllToAll,
            alg,
            spec.dispatch_bytes(),
            dom,
            OpPhase::ExpertParallel,
            label("combine"),
        );
    }
    if tp > 1 {
        let (op, what) = if spec.sequence_parallel {
            (CollectiveOp::ReduceScatter, "rs")
        } else {
            (CollectiveOp::AllReduce, "ar")
        };
        for d in 0..dp {
            let (g, alg) = tp_group(d);
            b.collective(
                g,
                op,
                alg,
                spec.activation_bytes(),
                dom,
                OpPhase::TensorParallel,
                label(what),
            );
        }
    }
    computed
}

/// The gradient reduction of one group: `bytes[l]` per layer of the stage, walked from the last
/// layer back and cut into buckets of `dp_bucket_bytes` (the last one the rest); a bucket waits
/// for `ready[l]` of every layer with bytes in it and for the previous bucket. The last bucket
/// joins every member's frontier (the next iteration and the optimizer wait for it).
#[allow(clippy::too_many_arguments)]
fn reduce_buckets(
    spec: &TrainingSpec,
    b: &mut Builder,
    group: u32,
    algorithm: CollectiveAlgorithm,
    ranks: &[u32],
    bytes: &[Bytes],
    ready: &[Vec<u32>],
    label: &str,
) {
    let cap = spec.dp_bucket_bytes;
    let min = ranks.len() as u64;
    let mut prev: Option<u32> = None;
    let mut acc: Bytes = 0;
    let mut deps: Vec<u32> = Vec::new();
    let mut k = 0;
    let mut bucket = |b: &mut Builder, size: Bytes, deps: &[u32], prev: &mut Option<u32>| {
        let mut ds = deps.to_vec();
        ds.extend(*prev);
        let i = b.push(
            OpKind::Collective {
                group,
                op: CollectiveOp::AllReduce,
                algorithm,
                bytes: size.max(min),
                domain_size: spec.domain_size,
            },
            ds,
            OpPhase::DataParallel,
            format!("{label}.bucket{k}"),
        );
        k += 1;
        *prev = Some(i);
    };
    for l in (0..bytes.len()).rev() {
        if bytes[l] == 0 {
            continue;
        }
        deps.extend_from_slice(&ready[l]);
        acc += bytes[l];
        while acc >= cap {
            bucket(b, cap, &deps, &mut prev);
            acc -= cap;
            deps.clear();
            if acc > 0 {
                // The rest of this layer's bytes: the next bucket waits for this layer too.
                deps.extend_from_slice(&ready[l]);
            }
        }
    }
    if acc > 0 {
        bucket(b, acc, &deps, &mut prev);
    }
    if let Some(last) = prev {
        for &r in ranks {
            b.frontier[r as usize].push(last);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn one_f_one_b_order() {
        use PipelineSchedule::OneFOneB as S;
        assert_eq!(
            stage_order(S, 0, 3, 4),
            vec![
                (0, false),
                (1, false),
                (2, false),
                (0, true),
                (3, false),
                (1, true),
                (2, true),
                (3, true)
            ]
        );
        assert_eq!(
            stage_order(S, 2, 3, 2),
            vec![(0, false), (0, true), (1, false), (1, true)]
        );
        // Fewer micro-batches than warm-up slots.
        assert_eq!(
            stage_order(S, 0, 4, 2),
            vec![(0, false), (1, false), (0, true), (1, true)]
        );
    }

    #[test]
    fn placement_orders_coordinates_innermost_first() {
        let mut spec = test_spec();
        spec.dp = 2;
        spec.tp = 4;
        spec.pp = 3;
        assert_eq!(spec.rank(0, 0, 3), 3);
        assert_eq!(spec.rank(0, 1, 0), 4);
        assert_eq!(spec.rank(2, 1, 1), 2 * 8 + 4 + 1);
        spec.placement = [Dim::Dp, Dim::Tp, Dim::Pp];
        assert_eq!(spec.rank(0, 1, 0), 1);
        assert_eq!(spec.rank(0, 0, 1), 2);
    }

    /// The op count the guard checks is the generated graph's, exactly but for the gradient
    /// buckets (bounded), across parallelisms, sequence parallelism, MoE layers, the optimizer
    /// and iterations: it refuses no graph within the limit.
    #[test]
    fn op_count_is_the_generated_graphs() {
        let mut checked = 0;
        for (dp, tp, pp) in [
            (1, 1, 1),
            (4, 1, 1),
            (2, 2, 2),
            (4, 4, 1),
            (2, 1, 4),
            (8, 2, 2),
        ] {
            for (sp, moe, ep, optimizer, mb, layers) in [
                (false, false, 1, 0, 1, 4),
                (true, false, 1, 5, 3, 4),
                (false, true, 2, 0, 2, 8),
                (true, true, 1, 5, 4, 6),
            ] {
                let mut spec = test_spec();
                (spec.dp, spec.tp, spec.pp) = (dp, tp, pp);
                spec.ep = if dp % ep == 0 { ep } else { 1 };
                spec.sequence_parallel = sp && tp > 1;
                spec.moe = moe.then_some(MoeSpec {
                    experts: 2 * spec.ep,
                    every: 2,
                    top_k: 1,
                });
                spec.optimizer_ps = optimizer;
                spec.micro_batches = mb;
                spec.layers = layers;
                spec.iterations = 2;
                spec.dp_bucket_bytes = 4096;
                let graph = generate(&spec);
                let buckets = graph
                    .ops
                    .iter()
                    .filter(|o| o.phase == OpPhase::DataParallel)
                    .count();
                let (exact, bound) = spec.ops_per_iteration();
                let what = format!("dp {dp} tp {tp} pp {pp} sp {sp} moe {moe} ep {}", spec.ep);
                assert_eq!(2.0 * exact, (graph.ops.len() - buckets) as f64, "{what}");
                assert!(buckets as f64 <= 2.0 * bound, "{what}: {buckets} buckets");
                assert!(spec.op_count() as usize >= graph.ops.len(), "{what}");
                checked += 1;
            }
        }
        assert_eq!(checked, 24);
    }

    pub(super) fn test_spec() -> TrainingSpec {
        TrainingSpec {
            dp: 1,
            tp: 1,
            pp: 1,
            ep: 1,
            micro_batches: 1,
            micro_batch_size: 1,
            layers: 1,
            hidden: 64,
            seq_len: 16,
            bytes_per_element: 2,
            dense: BlockTimes::default(),
            expert: BlockTimes::default(),
            schedule: PipelineSchedule::OneFOneB,
            sequence_parallel: false,
            dp_bucket_bytes: DEFAULT_DP_BUCKET,
            moe: None,
            iterations: 1,
            tp_algorithm: None,
            dp_algorithm: None,
            ep_algorithm: None,
            placement: [Dim::Tp, Dim::Dp, Dim::Pp],
            optimizer_ps: 0,
            start_ps: 0,
            domain_size: None,
            noise: Noise::default(),
            collective: CollectiveParams::new(4096, 64, 100_000_000_000, None),
        }
    }

    fn file() -> TrainingFile {
        TrainingFile {
            name: None,
            start: None,
            dp: None,
            tp: None,
            pp: None,
            ep: None,
            micro_batches: None,
            micro_batch_size: None,
            layers: Some(4),
            hidden: Some(256),
            seq_len: Some(128),
            bytes_per_element: None,
            forward: Some(Duration(100_000)),
            backward: None,
            gpu_flops: None,
            efficiency: None,
            schedule: None,
            sequence_parallel: None,
            dp_bucket: None,
            moe: None,
            iterations: None,
            algorithms: None,
            placement: None,
            optimizer: None,
            noise: None,
            on_failure: None,
            restart_time: None,
            checkpoint_interval: None,
            detection: None,
            reformation_time: None,
            rejoin: None,
            checkpoint_time: None,
        }
    }

    pub(crate) fn ctx(n_hosts: u32, scaleup: Option<u32>) -> Context {
        Context {
            index: 0,
            n_hosts,
            stop: crate::config::StopAt::AllFlowsDone,
            host_rate_bps: 100_000_000_000,
            mtu_bytes: 4096,
            header_bytes: 64,
            group_size: 8,
            scaleup_gpus: scaleup,
            groups: None,
        }
    }

    fn phase_count(g: &Graph, phase: OpPhase) -> usize {
        g.ops.iter().filter(|o| o.phase == phase).count()
    }

    /// Source: GPipe (Huang et al. 2019) and 1F1B (Narayanan et al. 2021, sec. 2.2.1): with p
    /// stages, m micro-batches and no communication time, the bubble is (p-1)/(m+p-1) of the
    /// iteration and the iteration takes (m+p-1)(f+b). Exact.
    #[test]
    fn pipeline_bubble_is_exact_without_communication() {
        for schedule in [PipelineSchedule::Gpipe, PipelineSchedule::OneFOneB] {
            for (p, m) in [(1, 1), (2, 1), (2, 4), (4, 4), (4, 8), (3, 7), (8, 2)] {
                for (tp, sp) in [(1, false), (2, false), (2, true)] {
                    let mut f = file();
                    f.pp = Some(p);
                    f.micro_batches = Some(m);
                    f.layers = Some(2 * p);
                    f.tp = Some(tp);
                    f.sequence_parallel = Some(sp);
                    f.dp = Some(2);
                    f.schedule = Some(schedule);
                    f.forward = Some(Duration(100_000));
                    f.backward = Some(Duration(230_000));
                    let spec = f.validate(&ctx(64, None)).unwrap();
                    let g = generate(&spec);
                    let s = g.ideal_schedule().unwrap();
                    let it = &s.iterations(&g)[0];
                    let (p, m) = (p as u64, m as u64);
                    let fb = 2 * (100_000 + 230_000);
                    assert_eq!(
                        it.time_ps(),
                        (m + p - 1) * fb,
                        "{schedule:?} p={p} m={m} tp={tp}"
                    );
                    for r in 0..g.ranks.len() {
                        assert_eq!(it.compute_ps[r], m * fb);
                        assert_eq!(it.exposed_comm_ps[r], 0);
                        assert_eq!(it.bubble_ps()[r], (p - 1) * fb);
                    }
                    let want = (p - 1) as f64 / (m + p - 1) as f64;
                    assert!((it.bubble_fraction() - want).abs() < 1e-12);
                }
            }
        }
    }

    /// With one layer per bucket and the all-reduce taking c per bucket: the buckets run back to
    /// back from the last layer's backward; the last one ends c after the backward pass when
    /// c <= b (all but one hidden), and b + L*c - L*b after it otherwise (Megatron/DDP overlap,
    /// analytic; exact in the network-free schedule).
    #[test]
    fn dp_reduction_overlaps_the_backward_pass() {
        let (fwd, bwd) = (100_000u64, 200_000u64);
        for layers in [1u64, 4, 8] {
            for c in [20_000u64, 150_000, 200_000, 300_000, 1_000_000] {
                let mut f = file();
                f.dp = Some(4);
                f.layers = Some(layers as i64);
                f.forward = Some(Duration(fwd));
                let h = 256u64;
                f.dp_bucket = Some(Size(12 * h * h * 2));
                let spec = f.validate(&ctx(8, None)).unwrap();
                let g = generate(&spec);
                assert_eq!(
                    phase_count(&g, OpPhase::DataParallel),
                    4 * layers as usize / 4
                );
                let s = g
                    .schedule_with(|_, op| {
                        if op.phase == OpPhase::DataParallel {
                            c
                        } else {
                            0
                        }
                    })
                    .unwrap();
                let it = &s.iterations(&g)[0];
                let compute = layers * (fwd + bwd);
                let exposed = if c <= bwd {
                    c
                } else {
                    bwd + layers * c - layers * bwd
                };
                assert_eq!(it.time_ps(), compute + exposed, "L={layers} c={c}");
                assert_eq!(it.exposed_comm_ps, vec![exposed; 4]);
            }
        }
    }

    #[test]
    fn buckets_cut_the_gradient_stream_from_the_last_layer() {
        let mut f = file();
        f.dp = Some(2);
        f.layers = Some(3);
        let per_layer = 12 * 256 * 256 * 2u64;
        // 2.5 layers per bucket: bucket 0 waits for layers 2, 1, 0 (its last half-layer), ...
        f.dp_bucket = Some(Size(per_layer * 5 / 2));
        let spec = f.validate(&ctx(8, None)).unwrap();
        let g = generate(&spec);
        let buckets: Vec<&GraphOp> = g
            .ops
            .iter()
            .filter(|o| o.phase == OpPhase::DataParallel)
            .collect();
        assert_eq!(buckets.len(), 2);
        let size = |o: &GraphOp| match o.kind {
            OpKind::Collective { bytes, .. } => bytes,
            _ => 0,
        };
        assert_eq!(size(buckets[0]), per_layer * 5 / 2);
        assert_eq!(size(buckets[1]), per_layer / 2);
        // Bucket 0: layer 2, 1 and 0's backward on both replicas; bucket 1: layer 0 and bucket 0.
        assert_eq!(buckets[0].deps.len(), 6);
        assert_eq!(buckets[1].deps.len(), 3);
    }

    #[test]
    fn communication_per_layer_and_micro_batch() {
        let mut f = file();
        f.dp = Some(2);
        f.tp = Some(4);
        f.pp = Some(2);
        f.micro_batches = Some(3);
        let spec = f.validate(&ctx(16, Some(8))).unwrap();
        let g = generate(&spec);
        // 2 all-reduces forward, 2 backward per layer, micro-batch and (stage, replica).
        assert_eq!(phase_count(&g, OpPhase::TensorParallel), 4 * 4 * 3 * 2);
        // One send per tp rank and replica, each way, per micro-batch.
        assert_eq!(phase_count(&g, OpPhase::PipelineParallel), 2 * 3 * 2 * 4);
        // A TP group is 4 consecutive GPUs (one scale-up domain): ring; a DP group spans two.
        for op in &g.ops {
            if let OpKind::Collective {
                group,
                algorithm,
                op: kind,
                bytes,
                ..
            } = &op.kind
            {
                let members = &g.groups[*group as usize];
                match op.phase {
                    OpPhase::TensorParallel => {
                        assert_eq!(*kind, CollectiveOp::AllReduce);
                        assert_eq!(*bytes, 128 * 256 * 2);
                        assert_eq!(members[3] - members[0], 3);
                        assert_eq!(*algorithm, CollectiveAlgorithm::Ring);
                    }
                    OpPhase::DataParallel => {
                        assert_eq!(members.len(), 2);
                        assert_eq!(*algorithm, CollectiveAlgorithm::Ring);
                    }
                    _ => panic!("unexpected collective {op:?}"),
                }
            }
        }
        // Sequence parallel: an all-gather and a reduce-scatter per block.
        f.sequence_parallel = Some(true);
        let g = generate(&f.validate(&ctx(16, Some(8))).unwrap());
        assert_eq!(phase_count(&g, OpPhase::TensorParallel), 8 * 4 * 3 * 2);
        // With tp = 2 in domains of 8, a DP group of 4 has 4 ranks per domain.
        f.tp = Some(2);
        f.dp = Some(4);
        f.sequence_parallel = None;
        let g = generate(&f.validate(&ctx(16, Some(4))).unwrap());
        let dp_alg: Vec<_> = g
            .ops
            .iter()
            .filter_map(|o| match (&o.kind, o.phase) {
                (OpKind::Collective { algorithm, .. }, OpPhase::DataParallel) => Some(*algorithm),
                _ => None,
            })
            .collect();
        assert!(!dp_alg.is_empty());
        assert!(dp_alg
            .iter()
            .all(|a| *a == CollectiveAlgorithm::HierarchicalRing));
    }

    #[test]
    fn expert_layers_add_all_to_all_over_the_expert_group() {
        let mut f = file();
        f.dp = Some(4);
        f.ep = Some(2);
        f.layers = Some(4);
        f.micro_batches = Some(2);
        f.moe = Some(MoeFile {
            experts: Some(8),
            every: Some(2),
            top_k: Some(2),
        });
        let spec = f.validate(&ctx(8, None)).unwrap();
        let g = generate(&spec);
        // 2 expert layers x 2 micro-batches x (dispatch + combine) x (fwd + bwd) x 2 ep groups.
        assert_eq!(phase_count(&g, OpPhase::ExpertParallel), 2 * 2 * 2 * 2 * 2);
        for op in &g.ops {
            if let (OpKind::Collective { group, bytes, .. }, OpPhase::ExpertParallel) =
                (&op.kind, op.phase)
            {
                assert_eq!(g.groups[*group as usize].len(), 2);
                assert_eq!(*bytes, 128 * 256 * 2 * 2);
            }
        }
        // Expert gradients: 4 experts per rank x 8h^2, over the 2 ranks of each expert shard.
        let edp: Vec<&GraphOp> = g
            .ops
            .iter()
            .filter(|o| o.name.as_deref().is_some_and(|n| n.starts_with("edp")))
            .collect();
        assert_eq!(edp.len(), 2);
        let sizes: u64 = edp
            .iter()
            .map(|o| match o.kind {
                OpKind::Collective { bytes, .. } => bytes,
                _ => 0,
            })
            .sum();
        assert_eq!(sizes, 2 * 2 * 4 * 8 * 256 * 256 * 2);
        let s = g.ideal_schedule().unwrap();
        let it = &s.iterations(&g)[0];
        assert_eq!(it.time_ps(), 2 * 4 * 300_000);
    }

    #[test]
    fn compute_from_flops() {
        let mut f = file();
        f.forward = None;
        f.gpu_flops = Some(1e15);
        f.efficiency = Some(0.5);
        f.tp = Some(2);
        f.hidden = Some(4096);
        f.seq_len = Some(2048);
        let spec = f.validate(&ctx(8, None)).unwrap();
        let (b, s, h) = (1.0, 2048.0, 4096.0);
        let flops = 24.0 * b * s * h * h + 4.0 * b * s * s * h;
        let want = flops / 2.0 / (1e15 * 0.5) * 1e12;
        let got = (spec.dense.attn_fwd_ps + spec.dense.mlp_fwd_ps) as f64;
        assert!((got - want).abs() <= 1.0, "{got} vs {want}");
        assert_eq!(spec.dense.attn_bwd_ps, 2 * spec.dense.attn_fwd_ps);
    }

    #[test]
    fn iterations_follow_each_other_on_every_rank() {
        let mut f = file();
        f.pp = Some(2);
        f.dp = Some(2);
        f.micro_batches = Some(2);
        f.iterations = Some(3);
        f.optimizer = Some(Duration(50_000));
        let g = generate(&f.validate(&ctx(8, None)).unwrap());
        let s = g.ideal_schedule().unwrap();
        let its = s.iterations(&g);
        assert_eq!(its.len(), 3);
        let one = its[0].time_ps();
        assert_eq!(one, 3 * 2 * 300_000 + 50_000);
        for w in its.windows(2) {
            assert!(w[1].start_ps >= w[0].start_ps + one - 2 * 300_000);
            assert_eq!(w[1].time_ps(), one);
        }
    }

    #[test]
    fn describe_gives_the_network_free_iteration_time() {
        let mut f = file();
        f.pp = Some(4);
        f.micro_batches = Some(4);
        f.iterations = Some(3);
        let d = f.validate(&ctx(8, None)).unwrap().describe();
        assert_eq!(d["ideal_iteration_ps"], 7 * 300_000);
        assert_eq!(d["schedule"], "1f1b");
    }

    #[test]
    fn errors_name_their_keys() {
        let check = |f: TrainingFile, n: u32, key: &str, needle: &str| {
            let e = f.validate(&ctx(n, Some(8))).unwrap_err();
            assert_eq!(e.path, format!("workload.0.{key}"), "{}", e.message);
            assert!(e.message.contains(needle), "{}", e.message);
        };
        let mut f = file();
        f.dp = Some(4);
        f.tp = Some(8);
        check(f, 16, "dp", "32 ranks, but the fabric has 16");
        let mut f = file();
        f.pp = Some(3);
        check(f, 16, "layers", "do not split into pp = 3");
        let mut f = file();
        f.forward = None;
        check(f, 16, "forward", "missing");
        let mut f = file();
        f.gpu_flops = Some(1e15);
        check(f, 16, "gpu_flops", "not both");
        let mut f = file();
        f.ep = Some(2);
        check(f, 16, "ep", "needs experts");
        let mut f = file();
        f.dp = Some(3);
        f.ep = Some(2);
        f.moe = Some(MoeFile {
            experts: Some(4),
            every: None,
            top_k: None,
        });
        check(f, 16, "ep", "must divide dp = 3");
        let mut f = file();
        f.placement = Some("tp,dp".into());
        check(f, 16, "placement", "expected all of");
        let mut f = file();
        f.placement = Some("tp,xp,pp".into());
        check(f, 16, "placement", "\"xp\"");
        let mut f = file();
        f.tp = Some(2);
        f.algorithms = Some(AlgorithmsFile {
            tp: Some(CollectiveAlgorithm::Pxn),
            ..Default::default()
        });
        check(f, 16, "algorithms.tp", "expected one of");
        let mut f = file();
        f.dp = Some(2);
        f.algorithms = Some(AlgorithmsFile {
            ep: Some(CollectiveAlgorithm::Direct),
            ..Default::default()
        });
        check(f, 16, "algorithms.ep", "no such group");
        let mut f = file();
        f.dp = Some(2);
        f.efficiency = Some(1.5);
        f.forward = None;
        f.gpu_flops = Some(1e15);
        check(f, 16, "efficiency", "(0, 1]");
        let mut f = file();
        f.dp = Some(2);
        f.algorithms = Some(AlgorithmsFile {
            dp: Some(CollectiveAlgorithm::HierarchicalRing),
            ..Default::default()
        });
        let e = f.validate(&ctx(16, None)).unwrap_err();
        assert_eq!(e.path, "workload.0.algorithms.dp");
        let mut f = file();
        f.layers = Some(1 << 20);
        f.micro_batches = Some(1000);
        check(f, 16, "layers", "ops (at most");
        let mut f = file();
        f.hidden = Some(1 << 24);
        f.seq_len = Some(1 << 24);
        check(f, 16, "hidden", "exceed");
        let mut f = file();
        f.forward = Some(Duration(crate::config::values::MAX_TIME_PS));
        f.micro_batches = Some(100);
        check(f, 16, "forward", "longest time");
    }
}
