//! `kind = "inference"`: LLM serving steps of one TP x PP (and EP) model instance, expanded into
//! the step [`Graph`] the graph workload runs. Each step (a "forward pass" of the batch) is one
//! iteration of the graph, so steps.arrow holds the step times (their P50, P99 and jitter).
//!
//! What is modelled:
//! - **Requests** arrive by a seeded Poisson process at `rate` per second, or every `interval`,
//!   `requests` of them or until `window` ends. Each needs a prefill of `prompt_tokens` tokens
//!   (which yields its first token) and then `decode_steps` decode steps of one token each.
//! - **Continuous batching** (iteration-level scheduling, Orca, Yu et al. OSDI 2022): before each
//!   step, requests that have arrived join the batch while it has fewer than `max_batch` requests;
//!   a step runs the prefills of the requests that joined and one decode token of every other
//!   request in the batch; a request leaves after its last decode step. `max_batch = 1` serves
//!   one request at a time. The batch of each step is decided when the scenario is built, on the
//!   network-free timeline (compute only): the graph is fixed before the run, so a step the
//!   fabric delays does not admit the requests that arrived meanwhile (they join where the
//!   network-free timeline put them). A step that admits requests does not start before the last
//!   of them arrived (a release time), so an idle server waits for its next request.
//! - **A step**: stage by stage, every layer's attention block then MLP block on each TP rank;
//!   with tp > 1 each block ends with a TP all-reduce of the step's activations (tokens x h x
//!   bytes); an expert layer (`moe`) with `ep = tp` spreads the experts over the stage's TP ranks
//!   (vLLM's expert parallelism) and wraps its MLP in an all-to-all dispatch and combine
//!   (tokens x top_k x h x bytes / tp per rank) instead of the all-reduce; stage s sends its
//!   activations to stage s+1 (one send per TP rank); the last stage returns the sampled token
//!   ids (4 B per request) to stage 0, which the next step waits for.
//! - **Compute** per layer: `token_time` per token (prefill tokens count one each), or from FLOPs
//!   at `gpu_flops` x `efficiency`: per token 24h^2 (attention projections 8h^2, MLP 16h^2, x top_k
//!   in an expert layer) plus attention over the context, 4 x context x h (a prefill of P tokens:
//!   4P^2h, as the training generator counts it), over tp; with `memory_bandwidth` (bytes/s) a
//!   block takes at least the time to read its weights (attention 4h^2, MLP 8h^2 per expert
//!   touched, over tp) and the KV cache (2 x context x h per decoding request) - decode is
//!   memory-bound in practice.
//!
//! Background traffic is another `[[workload]]` of the same scenario (incast, poisson, ...),
//! sharing the fabric.

use serde::{Deserialize, Serialize};

use super::config::{start_of, Context};
use super::graph::reaction::{CheckpointFile, OnFailureName, RejoinName};
use super::graph::{CollectiveParams, Graph, Noise, NoiseFile, OpKind, OpPhase};
use super::training::{
    check_algorithm, default_algorithm, flops_time, AlgorithmsFile, Builder, MoeFile, MoeSpec,
    DEFAULT_EFFICIENCY, MAX_GRAPH_OPS,
};
use crate::config::check::{count, Res};
use crate::config::values::Duration;
use crate::config::{CollectiveAlgorithm, CollectiveOp, ScenarioError};
use crate::rng::{Rng, RngStream};
use crate::units::{Time, PS_PER_SEC};

/// The most requests one inference workload may generate.
pub const MAX_REQUESTS: u64 = 1_000_000;

/// `kind = "inference"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InferenceFile {
    /// Optional label (defaults to `kind`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<Duration>,
    /// Tensor-parallel ranks per stage (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tp: Option<i64>,
    /// Pipeline stages (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pp: Option<i64>,
    /// Expert parallelism: 1 (default; experts sharded like dense layers) or tp (experts spread
    /// over each stage's TP ranks, all-to-all dispatch and combine). Needs `moe`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ep: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layers: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden: Option<i64>,
    /// Bytes of an activation element (default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_per_element: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moe: Option<MoeFile>,
    /// Compute per layer per token on each rank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_time: Option<Duration>,
    /// Peak FLOP/s of a GPU (compute from FLOPs when `token_time` is not given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_flops: Option<f64>,
    /// Fraction of `gpu_flops` achieved (default 0.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub efficiency: Option<f64>,
    /// GPU memory bandwidth in bytes/s (with gpu_flops): a block reads at least its weights.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bandwidth: Option<f64>,
    /// "poisson" (default) at `rate`, or "fixed" every `interval`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrivals: Option<ArrivalKind>,
    /// Requests per second (poisson).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Time between requests (fixed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<Duration>,
    /// Number of requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<i64>,
    /// Requests arrive until `start + window`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<Duration>,
    /// Prompt tokens per request (default 128).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<i64>,
    /// Decode steps (generated tokens after the first) per request (default 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_steps: Option<i64>,
    /// Requests per batch (continuous batching; default 8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_batch: Option<i64>,
    /// `{ tp = "ring", ep = "direct" }`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithms: Option<AlgorithmsFile>,
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
#[serde(rename_all = "snake_case")]
pub enum ArrivalKind {
    Poisson,
    Fixed,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arrivals {
    /// Exponential gaps, mean 1/rate seconds.
    Poisson {
        rate_per_s: f64,
    },
    Fixed {
        interval_ps: Time,
    },
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TokenCompute {
    /// Per layer per token.
    Time(Time),
    /// FLOP/s achieved per GPU and optional memory bandwidth (bytes/s).
    Flops {
        rate: f64,
        memory_bandwidth: Option<f64>,
    },
}

/// A checked inference workload.
#[derive(Debug, Clone, PartialEq)]
pub struct InferenceSpec {
    pub tp: u32,
    pub pp: u32,
    pub ep: u32,
    pub layers: u32,
    pub hidden: u32,
    pub bytes_per_element: u32,
    pub moe: Option<MoeSpec>,
    pub compute: TokenCompute,
    pub arrivals: Arrivals,
    pub requests: Option<u32>,
    pub window_ps: Option<Time>,
    pub prompt_tokens: u32,
    pub decode_steps: u32,
    pub max_batch: u32,
    pub tp_algorithm: Option<CollectiveAlgorithm>,
    pub ep_algorithm: Option<CollectiveAlgorithm>,
    pub start_ps: Time,
    pub domain_size: Option<u32>,
    pub noise: Noise,
    pub collective: CollectiveParams,
}

impl InferenceFile {
    /// With every default written out (see `WorkloadFile::normalised`): parallelism, model,
    /// arrivals and batching from the validated `spec`; the compute as given (`token_time`, or
    /// `gpu_flops` with its `efficiency`); algorithms and noise as written.
    pub fn normalised(&self, name: Option<String>, s: &InferenceSpec) -> InferenceFile {
        let n = |x: u32| Some(x as i64);
        let (arrivals, rate, interval) = match s.arrivals {
            Arrivals::Poisson { rate_per_s } => (ArrivalKind::Poisson, Some(rate_per_s), None),
            Arrivals::Fixed { interval_ps } => {
                (ArrivalKind::Fixed, None, Some(Duration(interval_ps)))
            }
        };
        InferenceFile {
            name,
            start: Some(Duration(s.start_ps)),
            tp: n(s.tp),
            pp: n(s.pp),
            ep: n(s.ep),
            layers: n(s.layers),
            hidden: n(s.hidden),
            bytes_per_element: n(s.bytes_per_element),
            moe: s.moe.as_ref().map(MoeFile::normalised),
            token_time: self.token_time,
            gpu_flops: self.gpu_flops,
            efficiency: self
                .gpu_flops
                .map(|_| self.efficiency.unwrap_or(DEFAULT_EFFICIENCY)),
            memory_bandwidth: self.memory_bandwidth,
            arrivals: Some(arrivals),
            rate,
            interval,
            requests: s.requests.map(|r| r as i64),
            window: s.window_ps.map(Duration),
            prompt_tokens: n(s.prompt_tokens),
            decode_steps: n(s.decode_steps),
            max_batch: n(s.max_batch),
            algorithms: self.algorithms.clone(),
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

    pub fn validate(&self, ctx: &Context) -> Res<InferenceSpec> {
        let p = |key: &str| ctx.path(key);
        let opt = |key: &str, v: Option<i64>, default: i64, max: i64, what: &str| {
            count(&p(key), Some(v.unwrap_or(default)), 1, max, what)
        };
        let tp = opt(
            "tp",
            self.tp,
            1,
            1 << 16,
            "a number of tensor-parallel ranks",
        )?;
        let pp = opt("pp", self.pp, 1, 1 << 16, "a number of pipeline stages")?;
        let ep = opt("ep", self.ep, 1, 1 << 16, "1 or tp")?;
        let layers = count(
            &p("layers"),
            self.layers,
            1,
            1 << 20,
            "the model's number of layers",
        )?;
        let hidden = count(&p("hidden"), self.hidden, 1, 1 << 24, "the hidden size")?;
        let bytes_per_element = opt(
            "bytes_per_element",
            self.bytes_per_element,
            2,
            16,
            "bytes per element",
        )?;
        let ranks = tp as u64 * pp as u64;
        if ranks > ctx.n_hosts as u64 {
            return Err(ScenarioError::at(
                p("tp"),
                format!(
                    "tp x pp = {tp} x {pp} = {ranks} ranks, but the fabric has {} GPUs (or hosts)",
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
            None => None,
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
                Some(MoeSpec {
                    experts,
                    every,
                    top_k,
                })
            }
        };
        if ep > 1 {
            if moe.is_none() {
                return Err(ScenarioError::at(
                    p("ep"),
                    "expert parallelism needs experts: add moe = { experts = ..., top_k = ... }",
                ));
            }
            if ep != tp {
                return Err(ScenarioError::at(
                    p("ep"),
                    format!("the experts are spread over each stage's tensor-parallel ranks: ep must be 1 or tp = {tp}, found {ep}"),
                ));
            }
            if moe.is_some_and(|m| m.experts % ep != 0) {
                return Err(ScenarioError::at(
                    p("moe.experts"),
                    format!("the experts do not split over ep = {ep} ranks"),
                ));
            }
        }
        let compute = match (self.token_time, self.gpu_flops) {
            (Some(_), Some(_)) => {
                return Err(ScenarioError::at(
                    p("gpu_flops"),
                    "give the compute as token_time = \"<time>\" or as gpu_flops (FLOPs from the model), not both",
                ))
            }
            (None, None) => {
                return Err(ScenarioError::at(
                    p("token_time"),
                    "missing: expected the compute of one layer per token like \"2us\", or gpu_flops (e.g. 989e12) to derive it from the model's FLOPs",
                ))
            }
            (Some(t), None) => {
                for key in ["efficiency", "memory_bandwidth"] {
                    let set = match key {
                        "efficiency" => self.efficiency.is_some(),
                        _ => self.memory_bandwidth.is_some(),
                    };
                    if set {
                        return Err(ScenarioError::at(
                            p(key),
                            "applies to gpu_flops: leave it out with token_time",
                        ));
                    }
                }
                TokenCompute::Time(t.0)
            }
            (None, Some(rate)) => {
                if !(rate.is_finite() && rate > 0.0) {
                    return Err(ScenarioError::at(
                        p("gpu_flops"),
                        format!("expected a positive FLOP/s like 989e12, found {rate}"),
                    ));
                }
                let eff = match self.efficiency {
                    None => DEFAULT_EFFICIENCY,
                    Some(e) if e.is_finite() && e > 0.0 && e <= 1.0 => e,
                    Some(e) => {
                        return Err(ScenarioError::at(
                            p("efficiency"),
                            format!("expected a fraction of peak FLOP/s in (0, 1], found {e}"),
                        ))
                    }
                };
                if let Some(bw) = self.memory_bandwidth {
                    if !(bw.is_finite() && bw > 0.0) {
                        return Err(ScenarioError::at(
                            p("memory_bandwidth"),
                            format!("expected a positive number of bytes per second like 3.35e12, found {bw}"),
                        ));
                    }
                }
                TokenCompute::Flops {
                    rate: rate * eff,
                    memory_bandwidth: self.memory_bandwidth,
                }
            }
        };
        let arrivals = match (self.arrivals.unwrap_or(if self.interval.is_some() { ArrivalKind::Fixed } else { ArrivalKind::Poisson }), self.rate, self.interval) {
            (ArrivalKind::Poisson, Some(r), None) if r.is_finite() && r > 0.0 => Arrivals::Poisson { rate_per_s: r },
            (ArrivalKind::Poisson, Some(r), None) => {
                return Err(ScenarioError::at(p("rate"), format!("expected a positive number of requests per second, found {r}")))
            }
            (ArrivalKind::Poisson, None, None) => {
                return Err(ScenarioError::at(p("rate"), "missing: expected the requests per second of the Poisson arrivals (or arrivals = \"fixed\" with interval)"))
            }
            (ArrivalKind::Poisson, _, Some(_)) => {
                return Err(ScenarioError::at(p("interval"), "interval is for arrivals = \"fixed\"; Poisson arrivals take rate"))
            }
            (ArrivalKind::Fixed, None, Some(i)) => Arrivals::Fixed { interval_ps: i.0 },
            (ArrivalKind::Fixed, Some(_), _) => {
                return Err(ScenarioError::at(p("rate"), "rate is for arrivals = \"poisson\"; fixed arrivals take interval"))
            }
            (ArrivalKind::Fixed, None, None) => {
                return Err(ScenarioError::at(p("interval"), "missing: expected the time between requests like \"1ms\""))
            }
        };
        let requests = match self.requests {
            None => None,
            Some(r) => Some(count(
                &p("requests"),
                Some(r),
                1,
                MAX_REQUESTS as i64,
                "a number of requests",
            )?),
        };
        let window_ps = match self.window {
            None => None,
            Some(w) if w.0 == 0 => {
                return Err(ScenarioError::at(
                    p("window"),
                    "expected a positive duration",
                ))
            }
            Some(w) => Some(w.0),
        };
        if requests.is_none() && window_ps.is_none() {
            return Err(ScenarioError::at(
                p("requests"),
                "missing: expected a number of requests, or a window of arrivals like \"2ms\"",
            ));
        }
        let expected = match (arrivals, window_ps) {
            (Arrivals::Poisson { rate_per_s }, Some(w)) => {
                rate_per_s * w as f64 / PS_PER_SEC as f64
            }
            (Arrivals::Fixed { interval_ps }, Some(w)) => w as f64 / interval_ps.max(1) as f64,
            _ => 0.0,
        };
        if requests.is_none() && expected > MAX_REQUESTS as f64 {
            return Err(ScenarioError::at(
                p("window"),
                format!("about {expected:.3e} requests would arrive (at most {MAX_REQUESTS}): a shorter window, a lower rate or requests = N"),
            ));
        }
        let prompt_tokens = opt(
            "prompt_tokens",
            self.prompt_tokens,
            128,
            1 << 24,
            "a number of prompt tokens",
        )?;
        let decode_steps = count(
            &p("decode_steps"),
            Some(self.decode_steps.unwrap_or(16)),
            0,
            1 << 24,
            "a number of decode steps",
        )?;
        let max_batch = opt(
            "max_batch",
            self.max_batch,
            8,
            1 << 16,
            "a number of requests per batch",
        )?;
        let algorithms = self.algorithms.clone().unwrap_or_default();
        let least_requests = requests.map_or(expected.floor(), |r| r as f64).max(1.0);
        let per_step = {
            let comm = if tp > 1 { 4.0 } else { 0.0 };
            pp as f64
                * ((layers / pp) as f64 * (2.0 * tp as f64 + comm)
                    + if pp > 1 { tp as f64 } else { 0.0 })
        };
        let least_ops =
            (least_requests / max_batch as f64).ceil() * (1.0 + decode_steps as f64) * per_step;
        if least_ops > MAX_GRAPH_OPS as f64 {
            return Err(ScenarioError::at(
                p("requests"),
                format!("this run would have at least {least_ops:.3e} ops (at most {MAX_GRAPH_OPS}): fewer requests, decode steps or layers, or a larger max_batch"),
            ));
        }
        if let Some(a) = algorithms.dp {
            let _ = a;
            return Err(ScenarioError::at(
                p("algorithms.dp"),
                "an inference instance has no data-parallel group",
            ));
        }
        let spec = InferenceSpec {
            tp,
            pp,
            ep,
            layers,
            hidden,
            bytes_per_element,
            moe,
            compute,
            arrivals,
            requests,
            window_ps,
            prompt_tokens,
            decode_steps,
            max_batch,
            tp_algorithm: algorithms.tp,
            ep_algorithm: algorithms.ep,
            start_ps: start_of(self.start),
            domain_size: ctx.scaleup_gpus,
            noise: match &self.noise {
                None => Noise::default(),
                Some(n) => n.check(&p("noise"), tp * pp)?,
            },
            collective: CollectiveParams::new(
                ctx.mtu_bytes,
                ctx.header_bytes,
                ctx.host_rate_bps,
                ctx.scaleup_gpus,
            ),
        };
        let groups = spec.tp_groups();
        if let Some(a) = spec.tp_algorithm {
            if tp == 1 {
                return Err(ScenarioError::at(
                    p("algorithms.tp"),
                    "this model has no such group (tp = 1)",
                ));
            }
            check_algorithm(
                &p("algorithms.tp"),
                a,
                CollectiveOp::AllReduce,
                &groups,
                spec.domain_size,
            )?;
        }
        if let Some(a) = spec.ep_algorithm {
            if ep == 1 {
                return Err(ScenarioError::at(
                    p("algorithms.ep"),
                    "this model has no such group (ep = 1)",
                ));
            }
            check_algorithm(
                &p("algorithms.ep"),
                a,
                CollectiveOp::AllToAll,
                &groups,
                spec.domain_size,
            )?;
        }
        Ok(spec)
    }
}

/// One step of the batch: the requests that joined (a prefill each) and the context lengths of
/// the requests decoding one token.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Step {
    /// Joiners' request ids.
    pub prefills: Vec<u32>,
    /// Per decoding request: tokens already in its context.
    pub decode_contexts: Vec<u32>,
    /// Not before this time (the last joiner's arrival).
    pub release_ps: Option<Time>,
    /// The network-free start of the step (compute only).
    pub ideal_start_ps: Time,
    /// Its network-free duration (its compute on every stage).
    pub ideal_ps: Time,
}

impl Step {
    pub fn requests(&self) -> usize {
        self.prefills.len() + self.decode_contexts.len()
    }
}

impl InferenceSpec {
    pub fn ranks(&self) -> u32 {
        self.tp * self.pp
    }

    /// Rank (= GPU) of tensor rank t of stage s: tp innermost.
    pub fn rank(&self, s: u32, t: u32) -> u32 {
        s * self.tp + t
    }

    pub fn tp_groups(&self) -> Vec<Vec<u32>> {
        if self.tp == 1 {
            return Vec::new();
        }
        (0..self.pp)
            .map(|s| (0..self.tp).map(|t| self.rank(s, t)).collect())
            .collect()
    }

    pub fn is_expert_layer(&self, layer: u32) -> bool {
        self.moe.is_some_and(|m| layer % m.every == m.every - 1)
    }

    /// Arrival times of the requests (seeded).
    pub fn arrivals(&self, rng: &mut Rng) -> Vec<Time> {
        let end = self.window_ps.map(|w| self.start_ps.saturating_add(w));
        let max = self.requests.map_or(MAX_REQUESTS, u64::from);
        let mut out = Vec::new();
        let mut t = self.start_ps as f64;
        while (out.len() as u64) < max {
            let at = t.round() as Time;
            if end.is_some_and(|e| at >= e) {
                break;
            }
            out.push(at);
            t += match self.arrivals {
                Arrivals::Poisson { rate_per_s } => {
                    -(1.0 - rng.unit()).ln() * PS_PER_SEC as f64 / rate_per_s
                }
                Arrivals::Fixed { interval_ps } => interval_ps as f64,
            };
        }
        out
    }

    /// Compute of one block of `layer` for a step on each rank: (attention, MLP).
    pub fn block_times(&self, layer: u32, step: &Step) -> (Time, Time) {
        let prefill_tokens = step.prefills.len() as u64 * self.prompt_tokens as u64;
        let tokens = prefill_tokens + step.decode_contexts.len() as u64;
        match self.compute {
            TokenCompute::Time(per_token) => {
                let t = per_token.saturating_mul(tokens);
                let attn = t / 2;
                (attn, t - attn)
            }
            TokenCompute::Flops {
                rate,
                memory_bandwidth,
            } => {
                let h = self.hidden as f64;
                let tp = self.tp as f64;
                let e = self.bytes_per_element as f64;
                let p = self.prompt_tokens as f64;
                let ctx: f64 = step.decode_contexts.iter().map(|&c| c as f64).sum();
                let n_prefill = step.prefills.len() as f64;
                let attn_flops = 8.0 * h * h * tokens as f64 + 4.0 * h * (n_prefill * p * p + ctx);
                let expert = self.is_expert_layer(layer);
                let top_k = if expert {
                    self.moe.map_or(1, |m| m.top_k)
                } else {
                    1
                } as f64;
                let mlp_flops = 16.0 * h * h * tokens as f64 * top_k;
                let mut attn = flops_time(attn_flops / tp, rate);
                let mut mlp = flops_time(mlp_flops / tp, rate);
                if let Some(bw) = memory_bandwidth {
                    // Weights (and the KV cache) read once per step.
                    let kv = 2.0 * h * ctx * e;
                    let attn_bytes = (4.0 * h * h * e + kv) / tp;
                    let experts_touched = match self.moe {
                        Some(m) if expert => (m.experts as f64).min(tokens as f64 * top_k),
                        _ => 1.0,
                    };
                    let mlp_bytes = 8.0 * h * h * e * experts_touched / tp;
                    attn = attn.max(flops_time(attn_bytes, bw));
                    mlp = mlp.max(flops_time(mlp_bytes, bw));
                }
                (attn, mlp)
            }
        }
    }

    /// Ops of one step's graph with `requests` requests in it.
    pub fn ops_per_step(&self) -> u64 {
        let lps = (self.layers / self.pp) as u64;
        let tp = self.tp as u64;
        let comm = if self.tp > 1 { 4 } else { 0 };
        self.pp as u64 * (lps * (2 * tp + comm) + if self.pp > 1 { tp } else { 0 })
    }

    /// The steps of continuous batching on the network-free timeline.
    pub fn steps(&self, arrivals: &[Time]) -> Vec<Step> {
        let mut out = Vec::new();
        let mut next = 0usize;
        // Active: (request, context tokens, decode steps left).
        let mut active: Vec<(u32, u32, u32)> = Vec::new();
        let mut t = self.start_ps;
        let lps = self.layers / self.pp;
        while next < arrivals.len() || !active.is_empty() {
            if active.is_empty() && arrivals[next] > t {
                t = arrivals[next];
            }
            let mut step = Step {
                ideal_start_ps: t,
                ..Step::default()
            };
            for a in &active {
                step.decode_contexts.push(a.1);
            }
            let mut joined = Vec::new();
            while next < arrivals.len()
                && arrivals[next] <= t
                && active.len() + joined.len() < self.max_batch as usize
            {
                step.prefills.push(next as u32);
                step.release_ps = Some(arrivals[next]);
                joined.push(next as u32);
                next += 1;
            }
            let mut took: Time = 0;
            for s in 0..self.pp {
                for l in 0..lps {
                    let (a, m) = self.block_times(s * lps + l, &step);
                    took = took.saturating_add(a).saturating_add(m);
                }
            }
            step.ideal_ps = took;
            t = t.saturating_add(took);
            // Decoders advance; the finished leave; joiners start decoding.
            for a in active.iter_mut() {
                a.1 += 1;
                a.2 -= 1;
            }
            active.retain(|a| a.2 > 0);
            for r in joined {
                if self.decode_steps > 0 {
                    active.push((r, self.prompt_tokens + 1, self.decode_steps));
                }
            }
            out.push(step);
        }
        out
    }

    pub fn describe(&self) -> serde_json::Value {
        serde_json::json!({
            "tp": self.tp, "pp": self.pp, "ep": self.ep, "ranks": self.ranks(),
            "layers": self.layers, "prompt_tokens": self.prompt_tokens,
            "decode_steps": self.decode_steps, "max_batch": self.max_batch,
            "requests": self.requests, "window_ps": self.window_ps,
        })
    }
}

/// The step graph of an inference workload and the release times of some of its ops (op index,
/// not before), drawn from stream `WorkloadPlan(index)` under `seed`; an error (naming the keys of
/// workload `index`) if it would hold more than [`MAX_GRAPH_OPS`] ops.
pub fn generate(
    spec: &InferenceSpec,
    index: usize,
    seed: u64,
) -> Result<(Graph, Vec<(u32, Time)>), ScenarioError> {
    let arrivals = spec.arrivals(&mut RngStream::WorkloadPlan(index).rng(seed));
    // Every request takes at least 1 + decode_steps steps of at most max_batch requests.
    let least =
        (arrivals.len() as u64).div_ceil(spec.max_batch as u64) * (1 + spec.decode_steps as u64);
    let too_many = |steps: u64| {
        ScenarioError::at(
            format!("workload.{index}.requests"),
            format!(
                "{} requests make {steps} or more steps of {} ops (at most {MAX_GRAPH_OPS} ops): fewer requests, decode steps or layers, or a larger max_batch",
                arrivals.len(),
                spec.ops_per_step()
            ),
        )
    };
    if least.saturating_mul(spec.ops_per_step()) > MAX_GRAPH_OPS {
        return Err(too_many(least));
    }
    let steps = spec.steps(&arrivals);
    let end = steps
        .last()
        .map_or(0, |s| s.ideal_start_ps.saturating_add(s.ideal_ps));
    if end > crate::config::values::MAX_TIME_PS {
        return Err(ScenarioError::at(
            format!(
                "workload.{index}.{}",
                match spec.compute {
                    TokenCompute::Time(_) => "token_time",
                    TokenCompute::Flops { .. } => "gpu_flops",
                }
            ),
            "the steps' compute exceeds the longest time a scenario may span: less compute per token or fewer requests",
        ));
    }
    if (steps.len() as u64).saturating_mul(spec.ops_per_step()) > MAX_GRAPH_OPS {
        return Err(too_many(steps.len() as u64));
    }
    Ok(graph_of(spec, &steps))
}

/// The graph of `steps`.
pub fn graph_of(spec: &InferenceSpec, steps: &[Step]) -> (Graph, Vec<(u32, Time)>) {
    let (tp, pp) = (spec.tp, spec.pp);
    let mut b = Builder::new(
        (0..spec.ranks()).collect(),
        spec.start_ps,
        steps.len() as u32,
    );
    let dom = spec.domain_size;
    let groups: Vec<(u32, CollectiveAlgorithm, CollectiveAlgorithm)> = spec
        .tp_groups()
        .into_iter()
        .map(|g| {
            let tp_alg = spec
                .tp_algorithm
                .unwrap_or_else(|| default_algorithm(CollectiveOp::AllReduce, &g, dom));
            let ep_alg = spec
                .ep_algorithm
                .unwrap_or_else(|| default_algorithm(CollectiveOp::AllToAll, &g, dom));
            (b.group(g), tp_alg, ep_alg)
        })
        .collect();
    let lps = spec.layers / pp;
    let e = spec.bytes_per_element as u64;
    let h = spec.hidden as u64;
    let mut release = Vec::new();
    for (n, step) in steps.iter().enumerate() {
        b.iteration = n as u32;
        let tokens = step.prefills.len() as u64 * spec.prompt_tokens as u64
            + step.decode_contexts.len() as u64;
        let act = (tokens * h * e).max(tp as u64);
        let dispatch =
            (tokens * spec.moe.map_or(1, |m| m.top_k) as u64 * h * e / tp as u64).max(tp as u64);
        let label = |l: u32, what: &str| format!("L{l}.{what}.step{n}");
        for s in 0..pp {
            for l in 0..lps {
                let layer = s * lps + l;
                let (attn, mlp) = spec.block_times(layer, step);
                let first: Vec<u32> = (0..tp)
                    .map(|t| {
                        b.compute(
                            spec.rank(s, t),
                            attn,
                            OpPhase::Forward,
                            label(layer, "attn"),
                        )
                    })
                    .collect();
                if s == 0 && l == 0 {
                    if let Some(at) = step.release_ps {
                        release.extend(first.iter().map(|&i| (i, at)));
                    }
                }
                let group = (tp > 1).then(|| groups[s as usize]);
                if let Some((g, alg, _)) = group {
                    b.collective(
                        g,
                        CollectiveOp::AllReduce,
                        alg,
                        act,
                        dom,
                        OpPhase::TensorParallel,
                        label(layer, "attn.ar"),
                    );
                }
                let ep = spec.ep > 1 && spec.is_expert_layer(layer);
                if let (true, Some((g, _, ep_alg))) = (ep, group) {
                    b.collective(
                        g,
                        CollectiveOp::AllToAll,
                        ep_alg,
                        dispatch,
                        dom,
                        OpPhase::ExpertParallel,
                        label(layer, "dispatch"),
                    );
                }
                for t in 0..tp {
                    b.compute(spec.rank(s, t), mlp, OpPhase::Forward, label(layer, "mlp"));
                }
                match group {
                    Some((g, _, ep_alg)) if ep => {
                        b.collective(
                            g,
                            CollectiveOp::AllToAll,
                            ep_alg,
                            dispatch,
                            dom,
                            OpPhase::ExpertParallel,
                            label(layer, "combine"),
                        );
                    }
                    Some((g, alg, _)) => {
                        b.collective(
                            g,
                            CollectiveOp::AllReduce,
                            alg,
                            act,
                            dom,
                            OpPhase::TensorParallel,
                            label(layer, "mlp.ar"),
                        );
                    }
                    None => {}
                }
            }
            // Activations to the next stage, or the sampled tokens back to the first.
            if pp > 1 {
                let (to, bytes, what) = if s + 1 < pp {
                    (s + 1, act, "act")
                } else {
                    (0, 4 * step.requests() as u64, "tokens")
                };
                for t in 0..tp {
                    let (src, dst) = (spec.rank(s, t), spec.rank(to, t));
                    let deps = b.frontier[src as usize].clone();
                    let i = b.push(
                        OpKind::Send { src, dst, bytes },
                        deps,
                        OpPhase::PipelineParallel,
                        format!("pp.{what}.s{s}to{to}.step{n}"),
                    );
                    b.frontier[dst as usize].push(i);
                }
            }
        }
    }
    (b.graph, release)
}

/// Expand an inference workload into `plan`: its graph through the step graph planner, and one
/// more (timed) arrival at the ready barrier of each op with a release time.
pub fn expand(
    plan: &mut super::FlowPlan,
    index: usize,
    spec: &InferenceSpec,
    seed: u64,
) -> Result<(), ScenarioError> {
    let (graph, release) = generate(spec, index, seed)?;
    let ops = super::graph::plan_graph(plan, index, seed, &graph, &spec.noise, &spec.collective);
    for (op, at) in release {
        let ready = plan.ops[ops.start + op as usize].ready;
        plan.barrier_sizes[ready as usize] += 1;
        plan.barrier_timers.push((at, ready));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::training::tests::ctx;

    fn file() -> InferenceFile {
        InferenceFile {
            name: None,
            start: None,
            tp: None,
            pp: None,
            ep: None,
            layers: Some(4),
            hidden: Some(256),
            bytes_per_element: None,
            moe: None,
            token_time: Some(Duration(1_000)),
            gpu_flops: None,
            efficiency: None,
            memory_bandwidth: None,
            arrivals: Some(ArrivalKind::Fixed),
            rate: None,
            interval: Some(Duration(10_000_000)),
            requests: Some(4),
            window: None,
            prompt_tokens: Some(10),
            decode_steps: Some(2),
            max_batch: Some(2),
            algorithms: None,
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

    #[test]
    fn an_idle_server_takes_requests_one_by_one_at_their_arrival() {
        let spec = file().validate(&ctx(8, None)).unwrap();
        let arrivals = spec.arrivals(&mut RngStream::WorkloadPlan(0).rng(1));
        assert_eq!(arrivals, vec![0, 10_000_000, 20_000_000, 30_000_000]);
        let steps = spec.steps(&arrivals);
        // Prefill (10 tokens x 4 layers x 1 ns) then 2 decode steps (1 token) per request.
        assert_eq!(steps.len(), 12);
        for (r, w) in steps.chunks(3).enumerate() {
            assert_eq!(w[0].prefills, vec![r as u32]);
            assert_eq!(w[0].release_ps, Some(arrivals[r]));
            assert_eq!(w[0].ideal_start_ps, arrivals[r]);
            assert_eq!(w[1].decode_contexts, vec![11]);
            assert_eq!(w[2].decode_contexts, vec![12]);
            assert_eq!(w[1].ideal_start_ps, arrivals[r] + 40_000);
            assert_eq!(w[2].ideal_start_ps, arrivals[r] + 44_000);
        }
    }

    #[test]
    fn continuous_batching_fills_the_batch_as_requests_arrive() {
        let spec = file().validate(&ctx(8, None)).unwrap();
        let steps = spec.steps(&[0, 0, 0, 50_000]);
        let shape: Vec<(Vec<u32>, usize)> = steps
            .iter()
            .map(|s| (s.prefills.clone(), s.decode_contexts.len()))
            .collect();
        // Two join at once; r2 and r3 (arrived at 50 ns, during step 0) wait for free slots.
        assert_eq!(
            shape,
            vec![
                (vec![0, 1], 0),
                (vec![], 2),
                (vec![], 2),
                (vec![2, 3], 0),
                (vec![], 2),
                (vec![], 2),
            ]
        );
        // Step 0: 2 x 10 tokens x 4 layers x 1 ns = 80 ns; steps 1 and 2: 8 ns each.
        assert_eq!(steps[3].ideal_start_ps, 96_000);
        assert_eq!(steps[3].release_ps, Some(50_000));
        // With three slots r2 joins at once; r3 still waits for a free one.
        let mut f = file();
        f.max_batch = Some(3);
        let spec = f.validate(&ctx(8, None)).unwrap();
        let steps = spec.steps(&[0, 0, 0, 50_000]);
        assert_eq!(steps[0].prefills, vec![0, 1, 2]);
        assert_eq!(steps[1].prefills, Vec::<u32>::new());
        assert_eq!(steps[3].prefills, vec![3]);
        assert_eq!(steps[3].decode_contexts, Vec::<u32>::new());
    }

    #[test]
    fn the_graph_runs_the_steps_on_their_timeline() {
        for (tp, pp) in [(1, 1), (2, 1), (2, 2), (1, 4)] {
            let mut f = file();
            f.tp = Some(tp);
            f.pp = Some(pp);
            f.requests = Some(6);
            f.interval = Some(Duration(30_000));
            let spec = f.validate(&ctx(8, None)).unwrap();
            let arrivals = spec.arrivals(&mut RngStream::WorkloadPlan(0).rng(1));
            let steps = spec.steps(&arrivals);
            let (g, release) = graph_of(&spec, &steps);
            assert_eq!(g.iterations as usize, steps.len());
            let s = g.schedule_released(|_, _| 0, &release).unwrap();
            let its = s.iterations(&g);
            for (n, it) in its.iter().enumerate() {
                assert_eq!(
                    it.start_ps, steps[n].ideal_start_ps,
                    "tp={tp} pp={pp} step {n}"
                );
            }
            let tp_ops = g
                .ops
                .iter()
                .filter(|o| o.phase == OpPhase::TensorParallel)
                .count();
            let pp_ops = g
                .ops
                .iter()
                .filter(|o| o.phase == OpPhase::PipelineParallel)
                .count();
            let per_step = if tp > 1 { 2 * 4 } else { 0 };
            assert_eq!(tp_ops, per_step * steps.len());
            let sends = if pp > 1 { pp as usize * tp as usize } else { 0 };
            assert_eq!(pp_ops, sends * steps.len());
        }
    }

    #[test]
    fn expert_layers_use_all_to_all_over_the_tp_ranks() {
        let mut f = file();
        f.tp = Some(4);
        f.ep = Some(4);
        f.moe = Some(MoeFile {
            experts: Some(8),
            every: Some(2),
            top_k: Some(2),
        });
        let spec = f.validate(&ctx(8, None)).unwrap();
        let (g, _) = graph_of(
            &spec,
            &[Step {
                prefills: vec![0],
                ..Step::default()
            }],
        );
        let count = |p: OpPhase| g.ops.iter().filter(|o| o.phase == p).count();
        // 4 layers: 4 attention all-reduces, 2 dense MLP all-reduces, 2 x 2 all-to-alls.
        assert_eq!(count(OpPhase::TensorParallel), 6);
        assert_eq!(count(OpPhase::ExpertParallel), 4);
        for op in &g.ops {
            if let OpKind::Collective {
                bytes, op: kind, ..
            } = op.kind
            {
                match kind {
                    CollectiveOp::AllToAll => assert_eq!(bytes, 10 * 2 * 256 * 2 / 4),
                    _ => assert_eq!(bytes, 10 * 256 * 2),
                }
            }
        }
    }

    #[test]
    fn poisson_arrivals_are_seeded_and_at_the_rate() {
        let mut f = file();
        f.arrivals = None;
        f.interval = None;
        f.rate = Some(1e6);
        f.requests = None;
        f.window = Some(Duration(10_000_000_000)); // 10 ms: 10,000 expected
        let spec = f.validate(&ctx(8, None)).unwrap();
        let a = spec.arrivals(&mut RngStream::WorkloadPlan(0).rng(1));
        let b = spec.arrivals(&mut RngStream::WorkloadPlan(0).rng(1));
        let c = spec.arrivals(&mut RngStream::WorkloadPlan(0).rng(2));
        assert_eq!(a, b);
        assert_ne!(a, c);
        // Poisson count: mean 10,000, sd 100; within 5 sd.
        assert!((a.len() as f64 - 10_000.0).abs() < 500.0, "{}", a.len());
        assert!(a.windows(2).all(|w| w[0] <= w[1]));
        assert!(*a.last().unwrap() < 10_000_000_000);
    }

    #[test]
    fn flops_and_memory_bound_compute() {
        let mut f = file();
        f.token_time = None;
        f.gpu_flops = Some(1e15);
        f.efficiency = Some(1.0);
        f.hidden = Some(1024);
        let spec = f.validate(&ctx(8, None)).unwrap();
        let prefill = Step {
            prefills: vec![0],
            ..Step::default()
        };
        let (a, m) = spec.block_times(0, &prefill);
        let h = 1024.0;
        assert_eq!(
            a,
            ((8.0 * h * h * 10.0 + 4.0 * h * 100.0) / 1e15 * 1e12_f64).round() as u64
        );
        assert_eq!(m, (16.0 * h * h * 10.0 / 1e3_f64).round() as u64);
        f.memory_bandwidth = Some(1e12);
        let spec = f.validate(&ctx(8, None)).unwrap();
        let decode = Step {
            decode_contexts: vec![100],
            ..Step::default()
        };
        let (a, m) = spec.block_times(0, &decode);
        // Memory-bound: weights 4h^2 x 2 B plus KV 2 x 100 x h x 2 B at 1 TB/s; MLP 8h^2 x 2 B.
        assert_eq!(
            a,
            ((4.0 * h * h * 2.0 + 2.0 * h * 100.0 * 2.0) / 1e12 * 1e12_f64).round() as u64
        );
        assert_eq!(m, (8.0 * h * h * 2.0_f64).round() as u64);
    }

    #[test]
    fn steps_beyond_the_time_range_are_a_build_error() {
        let mut f = file();
        f.token_time = Some(Duration(crate::config::values::MAX_TIME_PS));
        let spec = f.validate(&ctx(8, None)).unwrap();
        let e = generate(&spec, 2, 1).unwrap_err();
        assert_eq!(e.path, "workload.2.token_time");
        assert!(e.message.contains("longest time"), "{}", e.message);
    }

    #[test]
    fn errors_name_their_keys() {
        let check = |f: InferenceFile, key: &str, needle: &str| {
            let e = f.validate(&ctx(8, Some(8))).unwrap_err();
            assert_eq!(e.path, format!("workload.0.{key}"), "{}", e.message);
            assert!(e.message.contains(needle), "{}", e.message);
        };
        let mut f = file();
        f.tp = Some(4);
        f.pp = Some(4);
        check(f, "tp", "16 ranks, but the fabric has 8");
        let mut f = file();
        f.requests = None;
        check(f, "requests", "missing");
        let mut f = file();
        f.rate = Some(10.0);
        check(f, "rate", "fixed arrivals take interval");
        let mut f = file();
        f.arrivals = Some(ArrivalKind::Poisson);
        check(f, "interval", "Poisson arrivals take rate");
        let mut f = file();
        f.tp = Some(2);
        f.ep = Some(2);
        check(f, "ep", "needs experts");
        let mut f = file();
        f.tp = Some(4);
        f.ep = Some(2);
        f.moe = Some(MoeFile {
            experts: Some(8),
            every: None,
            top_k: None,
        });
        check(f, "ep", "1 or tp = 4");
        let mut f = file();
        f.token_time = None;
        check(f, "token_time", "missing");
        let mut f = file();
        f.efficiency = Some(0.5);
        check(f, "efficiency", "applies to gpu_flops");
        let mut f = file();
        f.layers = Some(3);
        f.pp = Some(2);
        check(f, "layers", "do not split");
        let mut f = file();
        f.arrivals = None;
        f.interval = None;
        f.rate = Some(1e12);
        f.requests = None;
        f.window = Some(Duration(1_000_000_000_000));
        check(f, "window", "requests would arrive");
        let mut f = file();
        f.requests = Some(1_000_000);
        f.decode_steps = Some(1000);
        check(f, "requests", "ops (at most");
    }
}
