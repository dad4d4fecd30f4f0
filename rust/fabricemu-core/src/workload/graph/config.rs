//! `kind = "graph"`: a step graph given as ops in the scenario (`ops = [...]`), or in a JSON or
//! Arrow file (`file = "step.json"`, read when the scenario is built). docs/step-workloads.md
//! documents the format; the JSON file holds the same keys as the scenario table (`ranks`,
//! `groups`, `ops`, `gpu_flops`).

use serde::{Deserialize, Serialize};

use super::noise::NoiseFile;
use super::plan::CollectiveParams;
use super::reaction::{CheckpointFile, OnFailureName, RejoinName};
use super::spec::{Graph, GraphOp, Noise, OpKind, OpPhase};
use crate::config::check::{count, Res};
use crate::config::values::{Duration, Size};
use crate::config::{CollectiveAlgorithm, CollectiveOp, ScenarioError, WorkloadSpec};
use crate::units::Time;
use crate::workload::collective::algorithms;
use crate::workload::config::{start_of, Context, MAX_WORKLOAD_FLOWS};

/// One op as written (`ops = [...]` or a file's `ops`). `kind` selects which keys apply.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpEntry {
    /// `compute`, `send` or `collective`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Indices of the ops that must end first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deps: Option<Vec<i64>>,
    /// `forward`, `backward`, `compute`, `tp`, `pp`, `dp`, `ep`, `comm`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Compute: its rank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<i64>,
    /// Compute: its time, or `flops` at the workload's `gpu_flops`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flops: Option<f64>,
    /// Send: the two ranks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst: Option<i64>,
    /// Send: the message; collective: the nccl-tests size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<Size>,
    /// Collective: the operation, algorithm (default: the collective workload's), and its ranks
    /// (`group`: an index into `groups`, or `ranks`: the list).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<CollectiveOp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<CollectiveAlgorithm>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranks: Option<Vec<i64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain_size: Option<i64>,
}

/// The graph keys a file holds (and the scenario table too).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphBody {
    /// Endpoint of each rank (default: rank r on endpoint r).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranks: Option<Vec<i64>>,
    /// Collective groups (lists of ranks), referenced by ops' `group`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<Vec<Vec<i64>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ops: Option<Vec<OpEntry>>,
    /// FLOP/s of one GPU: converts compute ops' `flops` into time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_flops: Option<f64>,
}

/// `kind = "graph"`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphFile {
    /// Optional label carried into flows.arrow and ops.arrow (defaults to `kind`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<Duration>,
    /// A JSON or Arrow IPC file of the graph (instead of `ops`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranks: Option<Vec<i64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<Vec<Vec<i64>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ops: Option<Vec<OpEntry>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_flops: Option<f64>,
    /// Run the graph this many times; iteration i + 1's first ops on a rank wait for iteration
    /// i's last ops on that rank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iterations: Option<i64>,
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
    /// Endpoints per scale-up domain for hierarchical collectives (default: the cluster's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain_size: Option<i64>,
}

/// Where the graph comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum GraphSource {
    /// Checked at validation (one iteration; repeated when built).
    Inline(Graph),
    /// Read and checked when the scenario is built (the scenario's `ranks` override the file's).
    File {
        path: String,
        ranks: Option<Vec<i64>>,
        gpu_flops: Option<f64>,
        noise: Option<NoiseFile>,
    },
}

/// A validated `kind = "graph"` workload.
#[derive(Debug, Clone, PartialEq)]
pub struct GraphSpec {
    pub source: GraphSource,
    pub iterations: u32,
    pub start_ps: Time,
    /// Inline graphs: the checked noise (files: checked at build against the file's ranks).
    pub noise: Noise,
    pub params: CollectiveParams,
    /// Endpoints of the scenario (hosts or GPUs).
    pub endpoints: u32,
}

/// The most ops of one graph workload, iterations included (each costs a few hundred bytes
/// while the run is built and runs).
pub const MAX_GRAPH_OPS: f64 = 4e6;

/// The largest graph file read.
const MAX_GRAPH_FILE_BYTES: u64 = 1 << 30;

/// The most iterations of one graph workload.
const MAX_ITERATIONS: i64 = 1_000_000;

fn phase_of(name: &str) -> Option<OpPhase> {
    Some(match name {
        "forward" => OpPhase::Forward,
        "backward" => OpPhase::Backward,
        "compute" => OpPhase::OtherCompute,
        "tp" => OpPhase::TensorParallel,
        "pp" => OpPhase::PipelineParallel,
        "dp" => OpPhase::DataParallel,
        "ep" => OpPhase::ExpertParallel,
        "comm" => OpPhase::OtherCommunication,
        _ => return None,
    })
}

/// The phase names, as `phase` takes them.
pub const PHASES: [&str; 8] = [
    "forward", "backward", "compute", "tp", "pp", "dp", "ep", "comm",
];

impl GraphFile {
    /// With every default written out (see `WorkloadFile::normalised`): the name, start,
    /// iterations and scale-up domain size; the graph itself (ops, ranks, groups, file, noise)
    /// as written.
    pub fn normalised(&self, name: Option<String>, s: &GraphSpec) -> GraphFile {
        GraphFile {
            name,
            start: Some(Duration(s.start_ps)),
            iterations: Some(s.iterations as i64),
            domain_size: s.params.domain_size.map(|d| d as i64),
            ..self.clone()
        }
    }

    pub fn validate(&self, ctx: &Context) -> Res<WorkloadSpec> {
        let p = |key: &str| ctx.path(key);
        let iterations = count(
            &p("iterations"),
            Some(self.iterations.unwrap_or(1)),
            1,
            MAX_ITERATIONS,
            "a number of iterations",
        )?;
        let domain_size = match self.domain_size {
            None => ctx.scaleup_gpus,
            Some(d) => Some(count(
                &p("domain_size"),
                Some(d),
                1,
                ctx.n_hosts.max(1) as i64,
                "a number of endpoints per scale-up domain",
            )?),
        };
        let params = CollectiveParams::new(
            ctx.mtu_bytes,
            ctx.header_bytes,
            ctx.host_rate_bps,
            domain_size,
        );
        if let Some(f) = self.gpu_flops {
            check_flops(&p("gpu_flops"), f)?;
        }
        let spec = |source, noise| GraphSpec {
            source,
            iterations,
            start_ps: start_of(self.start),
            noise,
            params,
            endpoints: ctx.n_hosts,
        };
        match (&self.file, &self.ops) {
            (Some(_), Some(_)) => Err(ScenarioError::at(
                p("ops"),
                "give the graph either as ops or as a file, not both",
            )),
            (None, None) => Err(ScenarioError::at(
                p("ops"),
                "missing: expected a list of ops ({kind = \"compute\", rank, duration}, {kind = \
                 \"send\", src, dst, size}, {kind = \"collective\", op, group, size}) or a file",
            )),
            (Some(path), None) => {
                if let Some(key) = self.groups.as_ref().map(|_| "groups") {
                    return Err(ScenarioError::at(
                        p(key),
                        "the file gives the groups with its ops: leave out this key",
                    ));
                }
                Ok(WorkloadSpec::Graph(Box::new(spec(
                    GraphSource::File {
                        path: path.clone(),
                        ranks: self.ranks.clone(),
                        gpu_flops: self.gpu_flops,
                        noise: self.noise.clone(),
                    },
                    Noise::default(),
                ))))
            }
            (None, Some(_)) => {
                let body = GraphBody {
                    ranks: self.ranks.clone(),
                    groups: self.groups.clone(),
                    ops: self.ops.clone(),
                    gpu_flops: self.gpu_flops,
                };
                let graph = body.to_graph(&|k| p(k), ctx.n_hosts, domain_size)?;
                let noise = match &self.noise {
                    None => Noise::default(),
                    Some(n) => n.check(&p("noise"), graph.ranks.len() as u32)?,
                };
                check_size(&graph, &params, iterations, &p("iterations"))?;
                Ok(WorkloadSpec::Graph(Box::new(spec(
                    GraphSource::Inline(graph),
                    noise,
                ))))
            }
        }
    }
}

fn check_flops(path: &str, f: f64) -> Res<()> {
    if !(f.is_finite() && f > 0.0) {
        return Err(ScenarioError::at(
            path,
            format!("expected a positive number of FLOP/s (e.g. 989e12), found {f}"),
        ));
    }
    Ok(())
}

/// The `kind = "collective"` spec of one collective op (one group, one iteration).
pub fn collective_spec(
    graph: &Graph,
    params: &CollectiveParams,
    group: u32,
    op: CollectiveOp,
    algorithm: CollectiveAlgorithm,
    bytes: u64,
    domain_size: Option<u32>,
) -> crate::config::CollectiveSpec {
    crate::config::CollectiveSpec {
        op,
        algorithm,
        groups: vec![graph.groups[group as usize]
            .iter()
            .map(|&r| graph.ranks[r as usize])
            .collect()],
        shuffle: None,
        size_bytes: bytes,
        iterations: 1,
        compute_gap_ps: 0,
        start_ps: 0,
        chunk_bytes: params.chunk_bytes,
        chunk_interval_ps: params.chunk_interval_ps,
        domain_size: domain_size.or(params.domain_size),
    }
}

/// Refuse a graph that, repeated `iterations` times, would make more flows (or ops) than any
/// workload may.
pub fn check_size(
    graph: &Graph,
    params: &CollectiveParams,
    iterations: u32,
    path: &str,
) -> Res<()> {
    let ops = graph.ops.len() as f64 * iterations as f64;
    if ops > MAX_GRAPH_OPS {
        return Err(ScenarioError::at(
            path,
            format!(
                "this graph would have {ops:.3e} ops (at most {MAX_GRAPH_OPS:.0e}): fewer \
                 iterations or ops"
            ),
        ));
    }
    let mut flows = 0f64;
    for op in &graph.ops {
        flows += match op.kind {
            OpKind::Compute { .. } => 0.0,
            OpKind::Send { .. } => 1.0,
            OpKind::Collective {
                group,
                op,
                algorithm,
                bytes,
                domain_size,
            } => crate::workload::collective::flows_per_iteration(&collective_spec(
                graph,
                params,
                group,
                op,
                algorithm,
                bytes,
                domain_size,
            )) as f64,
        };
    }
    flows *= iterations as f64;
    if flows > MAX_WORKLOAD_FLOWS {
        return Err(ScenarioError::at(
            path,
            format!(
                "this graph would generate {flows:.3e} flows (at most {MAX_WORKLOAD_FLOWS:.0e}): \
                 fewer iterations or ops"
            ),
        ));
    }
    Ok(())
}

impl GraphBody {
    /// The (one-iteration) graph these keys describe, checked; `path(key)` is the key path of
    /// `key` (`ops.3.rank`) for errors.
    pub fn to_graph(
        &self,
        path: &dyn Fn(&str) -> String,
        endpoints: u32,
        domain_size: Option<u32>,
    ) -> Res<Graph> {
        let Some(entries) = &self.ops else {
            return Err(ScenarioError::at(
                path("ops"),
                "missing: expected a list of ops",
            ));
        };
        if entries.is_empty() {
            return Err(ScenarioError::at(path("ops"), "expected at least one op"));
        }
        let mut groups: Vec<Vec<u32>> = Vec::new();
        for (g, list) in self.groups.iter().flatten().enumerate() {
            groups.push(rank_list(&path(&format!("groups.{g}")), list)?);
        }
        let mut ops = Vec::with_capacity(entries.len());
        let mut max_rank = 0u32;
        for (i, e) in entries.iter().enumerate() {
            let op = self.op(i, e, path, &mut groups)?;
            for r in op.kind.ranks(&groups) {
                max_rank = max_rank.max(r);
            }
            ops.push(op);
        }
        let ranks = match &self.ranks {
            Some(list) => {
                let mut v = Vec::with_capacity(list.len());
                for (r, &e) in list.iter().enumerate() {
                    if e < 0 || e > u32::MAX as i64 {
                        return Err(ScenarioError::at(
                            path(&format!("ranks.{r}")),
                            format!("expected an endpoint id, found {e}"),
                        ));
                    }
                    v.push(e as u32);
                }
                v
            }
            None => {
                let n = max_rank
                    .max(groups.iter().flatten().copied().max().unwrap_or(0))
                    .saturating_add(1);
                if n > endpoints {
                    return Err(ScenarioError::at(
                        path("ops"),
                        format!(
                            "the ops use ranks 0..={} but this topology has {endpoints} endpoints: \
                             give `ranks` (the endpoint of each rank) or fewer ranks",
                            n - 1
                        ),
                    ));
                }
                (0..n).collect()
            }
        };
        let graph = Graph {
            ranks,
            groups,
            ops,
            iterations: 1,
            start_ps: 0,
        };
        graph.check(endpoints, domain_size).map_err(|e| {
            let key = match e.op {
                Some(i) => format!("ops.{i}.{}", e.key),
                None => e.key.clone(),
            };
            ScenarioError::at(path(&key), e.message)
        })?;
        Ok(graph)
    }

    fn op(
        &self,
        i: usize,
        e: &OpEntry,
        path: &dyn Fn(&str) -> String,
        groups: &mut Vec<Vec<u32>>,
    ) -> Res<GraphOp> {
        let key = |k: &str| path(&format!("ops.{i}.{k}"));
        let rank = |k: &str, v: Option<i64>| -> Res<u32> {
            match v {
                None => Err(ScenarioError::at(key(k), "missing: expected a rank")),
                Some(r) if r < 0 || r > u32::MAX as i64 => Err(ScenarioError::at(
                    key(k),
                    format!("expected a rank (0 or more), found {r}"),
                )),
                Some(r) => Ok(r as u32),
            }
        };
        let kind_name = e.kind.as_deref().ok_or_else(|| {
            ScenarioError::at(
                key("kind"),
                "missing: expected one of \"compute\", \"send\", \"collective\"",
            )
        })?;
        // Keys of the other kinds are refused rather than ignored.
        let set: [(&str, bool); 12] = [
            ("rank", e.rank.is_some()),
            ("duration", e.duration.is_some()),
            ("flops", e.flops.is_some()),
            ("src", e.src.is_some()),
            ("dst", e.dst.is_some()),
            ("size", e.size.is_some()),
            ("op", e.op.is_some()),
            ("algorithm", e.algorithm.is_some()),
            ("group", e.group.is_some()),
            ("ranks", e.ranks.is_some()),
            ("domain_size", e.domain_size.is_some()),
            ("name", false),
        ];
        let allowed: &[&str] = match kind_name {
            "compute" => &["rank", "duration", "flops"],
            "send" => &["src", "dst", "size"],
            "collective" => &["op", "algorithm", "group", "ranks", "size", "domain_size"],
            other => {
                return Err(ScenarioError::at(
                    key("kind"),
                    format!(
                        "expected one of \"compute\", \"send\", \"collective\", found {other:?}"
                    ),
                ))
            }
        };
        if let Some((k, _)) = set.iter().find(|(k, s)| *s && !allowed.contains(k)) {
            return Err(ScenarioError::at(
                key(k),
                format!(
                    "not a key of a {kind_name} op (its keys: {})",
                    allowed.join(", ")
                ),
            ));
        }
        let kind = match kind_name {
            "compute" => {
                let duration_ps = match (e.duration, e.flops) {
                    (Some(_), Some(_)) => {
                        return Err(ScenarioError::at(
                            key("flops"),
                            "give a compute op either a duration or flops, not both",
                        ))
                    }
                    (Some(d), None) => d.0,
                    (None, Some(f)) => {
                        if !(f.is_finite() && f >= 0.0) {
                            return Err(ScenarioError::at(
                                key("flops"),
                                format!("expected a number of FLOPs (0 or more), found {f}"),
                            ));
                        }
                        let Some(rate) = self.gpu_flops else {
                            return Err(ScenarioError::at(
                                path("gpu_flops"),
                                format!(
                                    "missing: op {i} gives flops: the workload needs gpu_flops \
                                     (FLOP/s of one GPU, e.g. 989e12) to turn them into time"
                                ),
                            ));
                        };
                        let ps = (f / rate * 1e12).round();
                        if ps >= u64::MAX as f64 / 4.0 {
                            return Err(ScenarioError::at(
                                key("flops"),
                                format!("{f} FLOPs at {rate} FLOP/s is too long a time"),
                            ));
                        }
                        ps as u64
                    }
                    (None, None) => {
                        return Err(ScenarioError::at(
                            key("duration"),
                            "missing: expected the op's time like \"10us\" (or flops with the \
                             workload's gpu_flops)",
                        ))
                    }
                };
                OpKind::Compute {
                    rank: rank("rank", e.rank)?,
                    duration_ps,
                }
            }
            "send" => OpKind::Send {
                src: rank("src", e.src)?,
                dst: rank("dst", e.dst)?,
                bytes: e
                    .size
                    .ok_or_else(|| {
                        ScenarioError::at(key("size"), "missing: expected the message size")
                    })?
                    .0,
            },
            _ => {
                let op = e.op.ok_or_else(|| {
                    ScenarioError::at(
                        key("op"),
                        "missing: expected one of \"all_reduce\", \"all_gather\", \
                         \"reduce_scatter\", \"all_to_all\"",
                    )
                })?;
                let group =
                    match (e.group, &e.ranks) {
                        (Some(_), Some(_)) => {
                            return Err(ScenarioError::at(
                                key("ranks"),
                                "give a collective either a group or its ranks, not both",
                            ))
                        }
                        (Some(g), None) => {
                            if g < 0 || g as usize >= groups.len() || self.groups.is_none() {
                                return Err(ScenarioError::at(
                                    key("group"),
                                    format!(
                                        "unknown group {g}: the graph's groups are 0..{}",
                                        self.groups.as_ref().map_or(0, Vec::len)
                                    ),
                                ));
                            }
                            g as u32
                        }
                        (None, Some(list)) => {
                            let ranks = rank_list(&key("ranks"), list)?;
                            match groups.iter().position(|g| *g == ranks) {
                                Some(g) => g as u32,
                                None => {
                                    groups.push(ranks);
                                    groups.len() as u32 - 1
                                }
                            }
                        }
                        (None, None) => return Err(ScenarioError::at(
                            key("group"),
                            "missing: expected the collective's group (an index into groups) or \
                             its ranks",
                        )),
                    };
                let domain_size = match e.domain_size {
                    None => None,
                    Some(d) if d >= 1 && d <= u32::MAX as i64 => Some(d as u32),
                    Some(d) => {
                        return Err(ScenarioError::at(
                            key("domain_size"),
                            format!("expected a positive number of endpoints, found {d}"),
                        ))
                    }
                };
                OpKind::Collective {
                    group,
                    op,
                    algorithm: e.algorithm.unwrap_or(algorithms(op)[0]),
                    bytes: e
                        .size
                        .ok_or_else(|| {
                            ScenarioError::at(
                                key("size"),
                                "missing: expected the collective's size like \"64MiB\"",
                            )
                        })?
                        .0,
                    domain_size,
                }
            }
        };
        let mut deps = Vec::new();
        for (j, &d) in e.deps.iter().flatten().enumerate() {
            if d < 0 || d > u32::MAX as i64 {
                return Err(ScenarioError::at(
                    key(&format!("deps.{j}")),
                    format!("expected an op index, found {d}"),
                ));
            }
            deps.push(d as u32);
        }
        let phase = match e.phase.as_deref() {
            None if kind_name == "compute" => OpPhase::OtherCompute,
            None => OpPhase::OtherCommunication,
            Some(name) => {
                let phase = phase_of(name).ok_or_else(|| {
                    ScenarioError::at(
                        key("phase"),
                        format!(
                            "expected one of {}, found {name:?}",
                            PHASES.map(|p| format!("\"{p}\"")).join(", ")
                        ),
                    )
                })?;
                if phase.is_compute() != (kind_name == "compute") {
                    return Err(ScenarioError::at(
                        key("phase"),
                        format!(
                            "phase {name:?} is for {} ops",
                            if phase.is_compute() {
                                "compute"
                            } else {
                                "send and collective"
                            }
                        ),
                    ));
                }
                phase
            }
        };
        Ok(GraphOp {
            kind,
            deps,
            iteration: 0,
            phase,
            name: e.name.clone(),
        })
    }
}

fn rank_list(path: &str, list: &[i64]) -> Res<Vec<u32>> {
    list.iter()
        .enumerate()
        .map(|(j, &r)| {
            if r < 0 || r > u32::MAX as i64 {
                Err(ScenarioError::at(
                    format!("{path}.{j}"),
                    format!("expected a rank (0 or more), found {r}"),
                ))
            } else {
                Ok(r as u32)
            }
        })
        .collect()
}

/// Read a graph file (JSON, or Arrow IPC: see [`super::arrow_file`]) into its keys.
pub fn read_graph_file(path: &str) -> Result<GraphBody, String> {
    const WHAT: &str = "a JSON or Arrow IPC file of a step graph";
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot open: {e}"))?;
    if !meta.is_file() {
        return Err(format!("not a regular file (expected {WHAT})"));
    }
    if meta.len() > MAX_GRAPH_FILE_BYTES {
        return Err(format!(
            "{} bytes is larger than a graph file may be ({MAX_GRAPH_FILE_BYTES} bytes)",
            meta.len()
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read: {e}"))?;
    if bytes.starts_with(b"ARROW1") || bytes.starts_with(&[0xff, 0xff, 0xff, 0xff]) {
        return super::arrow_file::read(bytes);
    }
    let text = std::str::from_utf8(&bytes)
        .map_err(|_| "not a JSON graph file (not UTF-8 text) nor an Arrow IPC file".to_string())?;
    let de = &mut serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let inner = e.inner();
        format!(
            "line {} column {}: {}: {}",
            inner.line(),
            inner.column(),
            e.path(),
            inner
        )
    })
}

impl GraphSpec {
    /// Ops of all iterations, counted without planning (a file graph: from the file's size, at
    /// least 16 bytes per op).
    pub fn ops_estimate(&self) -> u64 {
        let it = self.iterations as u64;
        match &self.source {
            GraphSource::File { path, .. } => {
                let len = std::fs::metadata(path).map_or(0, |m| m.len());
                (len / 16).saturating_mul(it)
            }
            GraphSource::Inline(g) => (g.ops.len() as u64).saturating_mul(it),
        }
    }

    /// Flows and payload bytes, counted without planning (a file graph: from the file's size,
    /// at least 16 bytes per op, as replay files are bounded).
    pub fn estimate(&self) -> (u64, u64) {
        let it = self.iterations as u64;
        match &self.source {
            GraphSource::File { path, .. } => {
                let len = std::fs::metadata(path).map_or(0, |m| m.len());
                ((len / 16).saturating_mul(it), 0)
            }
            GraphSource::Inline(g) => {
                let (mut flows, mut bytes) = (0u64, 0u64);
                for op in &g.ops {
                    let (f, b) = match op.kind {
                        OpKind::Compute { .. } => (0, 0),
                        OpKind::Send { bytes, .. } => (1, bytes),
                        OpKind::Collective {
                            group,
                            op,
                            algorithm,
                            bytes,
                            domain_size,
                        } => {
                            let n = g.groups[group as usize].len() as u64;
                            let spec =
                                self.collective_spec(g, group, op, algorithm, bytes, domain_size);
                            (
                                crate::workload::collective::flows_per_iteration(&spec),
                                bytes.saturating_mul(2 * n),
                            )
                        }
                    };
                    flows = flows.saturating_add(f);
                    bytes = bytes.saturating_add(b);
                }
                (flows.saturating_mul(it), bytes.saturating_mul(it))
            }
        }
    }

    fn collective_spec(
        &self,
        g: &Graph,
        group: u32,
        op: CollectiveOp,
        algorithm: CollectiveAlgorithm,
        bytes: u64,
        domain_size: Option<u32>,
    ) -> crate::config::CollectiveSpec {
        collective_spec(g, &self.params, group, op, algorithm, bytes, domain_size)
    }

    /// The graph to plan (reading the file now for file graphs) and its noise: the build phase.
    pub fn graph(&self, index: usize) -> Res<(Graph, Noise)> {
        let (graph, noise) = match &self.source {
            GraphSource::Inline(g) => (g.clone(), self.noise.clone()),
            GraphSource::File {
                path,
                ranks,
                gpu_flops,
                noise,
            } => {
                let file_key = format!("workload.{index}.file");
                let fail = |m: String| ScenarioError::at(file_key.clone(), format!("{path}: {m}"));
                let mut body = read_graph_file(path).map_err(&fail)?;
                if ranks.is_some() {
                    body.ranks = ranks.clone();
                }
                if gpu_flops.is_some() {
                    body.gpu_flops = *gpu_flops;
                }
                if let Some(f) = body.gpu_flops {
                    check_flops("gpu_flops", f).map_err(|e| fail(e.to_string()))?;
                }
                let graph = body
                    .to_graph(&|k| k.to_string(), self.endpoints, self.params.domain_size)
                    .map_err(|e| fail(e.to_string()))?;
                check_size(&graph, &self.params, self.iterations, "iterations")
                    .map_err(|e| fail(e.to_string()))?;
                let noise = match noise {
                    None => Noise::default(),
                    Some(n) => {
                        n.check(&format!("workload.{index}.noise"), graph.ranks.len() as u32)?
                    }
                };
                (graph, noise)
            }
        };
        let mut graph = graph.repeat(self.iterations);
        graph.start_ps = self.start_ps;
        Ok((graph, noise))
    }
}
