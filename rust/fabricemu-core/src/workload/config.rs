//! `[[workload]]`: `kind` selects the struct of its keys (one per kind, each beside its kind's
//! generator) and that kind's checks produce a [`WorkloadSpec`].

use serde::{Deserialize, Serialize};

use super::all_to_all::AllToAllFile;
use super::collective::CollectiveFile;
use super::explicit::FlowsFile;
use super::graph::reaction::{Reaction, ReactionKeys};
use super::graph::GraphFile;
use super::incast::IncastFile;
use super::inference::InferenceFile;
use super::permutation::PermutationFile;
use super::poisson::PoissonFile;
use super::synthetic::SyntheticFile;
use super::training::TrainingFile;
use crate::config::check::{positive_size, Res};
use crate::config::hosts::{resolve, resolve_or_all, Groups, Hosts};
use crate::config::kinds::kind_table;
use crate::config::values::{Duration, Size};
use crate::config::{ReplaySpec, ScenarioError, StopAt, TopologySpec, WorkloadSpec};
use crate::units::{Bytes, Rate, Time};

kind_table!(
    /// One `[[workload]]` entry; `kind` selects which keys apply.
    WorkloadFile,
    WorkloadKind {
        Flows(FlowsFile) = "flows",
        Incast(IncastFile) = "incast",
        Permutation(PermutationFile) = "permutation",
        AllToAll(AllToAllFile) = "all_to_all",
        Poisson(PoissonFile) = "poisson",
        Collective(CollectiveFile) = "collective",
        Replay(ReplayFile) = "replay",
        Synthetic(SyntheticFile) = "synthetic",
        Training(Box<TrainingFile>) = "training",
        Inference(Box<InferenceFile>) = "inference",
        Graph(GraphFile) = "graph",
    }
);

/// `kind = "replay"`: flows read from a file when the scenario is built.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayFile {
    /// Optional label carried into flows.arrow (defaults to `kind`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<Duration>,
    /// A CSV or Arrow IPC file of flows (src, dst, size, start[, tag]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

/// What checking a workload needs to know of the rest of the scenario.
pub struct Context {
    /// The workload's index (its key path is `workload.<index>`).
    pub index: usize,
    pub n_hosts: u32,
    pub stop: StopAt,
    pub host_rate_bps: Rate,
    pub mtu_bytes: Bytes,
    pub header_bytes: Bytes,
    /// Hosts per group (synthetic patterns).
    pub group_size: u32,
    /// GPUs per scale-up domain of the scenario's `[cluster]` (None without one, or without a
    /// scale-up domain): the collectives' default `domain_size`.
    pub scaleup_gpus: Option<u32>,
    /// The servers, racks and rails of the scenario's `[cluster]` (None without one): what host
    /// selectors (`"server:3"`) name.
    pub groups: Option<Groups>,
}

/// The most flows one workload may generate (a guard against a typo'd duration or load).
pub const MAX_WORKLOAD_FLOWS: f64 = 50e6;

impl Context {
    pub fn new(
        index: usize,
        topology: &TopologySpec,
        stop: StopAt,
        mtu_bytes: Bytes,
        header_bytes: Bytes,
    ) -> Self {
        Self {
            index,
            n_hosts: topology.num_hosts(),
            stop,
            host_rate_bps: topology.host_link().rate_bps,
            mtu_bytes,
            header_bytes,
            group_size: host_group_size(topology),
            scaleup_gpus: None,
            groups: None,
        }
    }

    /// The key path of `key` of this workload.
    pub fn path(&self, key: &str) -> String {
        format!("workload.{}.{key}", self.index)
    }

    /// The hosts of list `key` (ids and selectors), at least two; every host when absent.
    pub fn hosts_or_all(&self, key: &str, hosts: Option<&Hosts>, what: &str) -> Res<Vec<u32>> {
        resolve_or_all(
            &self.path(key),
            hosts,
            self.n_hosts,
            self.groups.as_ref(),
            what,
        )
    }

    /// The hosts of a host list at key path `path` (ids and selectors).
    pub fn host_set(&self, path: &str, hosts: &Hosts) -> Res<Vec<u32>> {
        resolve(path, hosts, self.n_hosts, self.groups.as_ref())
    }

    /// A required positive `size` (`what`: how the missing-key error describes it).
    pub fn size(&self, size: Option<Size>, what: &str) -> Res<u64> {
        match size {
            None => Err(ScenarioError::at(
                self.path("size"),
                format!("missing: expected {what}"),
            )),
            Some(s) => positive_size(&self.path("size"), s.0),
        }
    }
}

/// A workload's `start` (default 0).
pub fn start_of(start: Option<Duration>) -> Time {
    start.map(|d| d.0).unwrap_or(0)
}

/// Hosts per group for the synthetic patterns: a dragonfly group (p*a), a Dragonfly+ group
/// (leaves*hosts_per_leaf), a fat-tree pod (k*k/4) or a leaf (hosts_per_leaf). Hosts are numbered
/// group by group.
fn host_group_size(t: &TopologySpec) -> u32 {
    match *t {
        TopologySpec::Dragonfly { p, a, .. } => p * a,
        TopologySpec::DragonflyPlus {
            leaves,
            hosts_per_leaf,
            ..
        } => leaves * hosts_per_leaf,
        TopologySpec::FatTree { k, .. } => k * k / 4,
        TopologySpec::LeafSpine { hosts_per_leaf, .. } => hosts_per_leaf,
        TopologySpec::Clos { shape, .. } => shape.tors_per_pod * shape.hosts_per_tor,
        // A graph has no arithmetic grouping: all its hosts are one group.
        TopologySpec::Graph(ref g) => g.num_hosts,
    }
}

impl WorkloadFile {
    /// The `name` key (flows.arrow's label; defaults to the kind).
    pub fn name(&self) -> Option<&str> {
        match self {
            WorkloadFile::Flows(w) => w.name.as_deref(),
            WorkloadFile::Incast(w) => w.name.as_deref(),
            WorkloadFile::Permutation(w) => w.name.as_deref(),
            WorkloadFile::AllToAll(w) => w.name.as_deref(),
            WorkloadFile::Poisson(w) => w.name.as_deref(),
            WorkloadFile::Collective(w) => w.name.as_deref(),
            WorkloadFile::Replay(w) => w.name.as_deref(),
            WorkloadFile::Synthetic(w) => w.name.as_deref(),
            WorkloadFile::Training(w) => w.name.as_deref(),
            WorkloadFile::Inference(w) => w.name.as_deref(),
            WorkloadFile::Graph(w) => w.name.as_deref(),
        }
    }

    /// A step workload's reaction to failures (`on_failure` and its keys; None for the other
    /// kinds, which have no such keys).
    pub fn reaction(&self, ctx: &Context) -> Res<Option<Reaction>> {
        match self {
            WorkloadFile::Training(w) => w.reaction_keys().check(ctx),
            WorkloadFile::Inference(w) => w.reaction_keys().check(ctx),
            WorkloadFile::Graph(w) => w.reaction_keys().check(ctx),
            _ => Ok(None),
        }
    }

    pub fn validate(&self, ctx: &Context) -> Res<WorkloadSpec> {
        match self {
            WorkloadFile::Flows(w) => w.validate(ctx),
            WorkloadFile::Incast(w) => w.validate(ctx),
            WorkloadFile::Permutation(w) => w.validate(ctx),
            WorkloadFile::AllToAll(w) => w.validate(ctx),
            WorkloadFile::Poisson(w) => w.validate(ctx).map(WorkloadSpec::Poisson),
            WorkloadFile::Collective(w) => w.validate(ctx).map(WorkloadSpec::Collective),
            WorkloadFile::Replay(w) => w.validate(ctx).map(WorkloadSpec::Replay),
            WorkloadFile::Synthetic(w) => w.validate(ctx).map(WorkloadSpec::Synthetic),
            WorkloadFile::Training(w) => w.validate(ctx).map(WorkloadSpec::Training),
            WorkloadFile::Inference(w) => w.validate(ctx).map(WorkloadSpec::Inference),
            WorkloadFile::Graph(w) => w.validate(ctx),
        }
    }
}

impl WorkloadFile {
    /// This entry with every default written out (see `scenario::normalise`), from its validated
    /// `spec`: the name (the kind by default), the start and each kind's defaulted keys. Host
    /// lists, selectors, groups and graphs stay as written (the spec holds them expanded); an
    /// absent host list is every host (see `ABSENT_MEANS`).
    pub fn normalised(&self, spec: &crate::config::NamedWorkload) -> WorkloadFile {
        let name = Some(spec.name.clone());
        let mut w = self.normalised_kind(name, spec);
        let r = ReactionKeys::normalised(spec.reaction.as_ref());
        match &mut w {
            WorkloadFile::Training(t) => t.set_reaction_keys(r),
            WorkloadFile::Inference(t) => t.set_reaction_keys(r),
            WorkloadFile::Graph(t) => t.set_reaction_keys(r),
            _ => {}
        }
        w
    }

    fn normalised_kind(
        &self,
        name: Option<String>,
        spec: &crate::config::NamedWorkload,
    ) -> WorkloadFile {
        use crate::config::WorkloadSpec as S;
        match (self, &spec.spec) {
            (WorkloadFile::Flows(w), S::Flows { flows }) => {
                WorkloadFile::Flows(w.normalised(name, flows))
            }
            (WorkloadFile::Incast(w), s @ S::Incast { .. }) => {
                WorkloadFile::Incast(w.normalised(name, s))
            }
            (WorkloadFile::Permutation(w), s @ S::Permutation { .. }) => {
                WorkloadFile::Permutation(w.normalised(name, s))
            }
            (WorkloadFile::AllToAll(w), s @ S::AllToAll { .. }) => {
                WorkloadFile::AllToAll(w.normalised(name, s))
            }
            (WorkloadFile::Poisson(w), S::Poisson(s)) => {
                WorkloadFile::Poisson(w.normalised(name, s))
            }
            (WorkloadFile::Collective(w), S::Collective(s)) => {
                WorkloadFile::Collective(w.normalised(name, s))
            }
            (WorkloadFile::Replay(w), S::Replay(s)) => WorkloadFile::Replay(ReplayFile {
                name,
                start: Some(Duration(s.offset_ps)),
                file: w.file.clone(),
            }),
            (WorkloadFile::Synthetic(w), S::Synthetic(s)) => {
                WorkloadFile::Synthetic(w.normalised(name, s))
            }
            (WorkloadFile::Training(w), S::Training(s)) => {
                WorkloadFile::Training(Box::new(w.normalised(name, s)))
            }
            (WorkloadFile::Inference(w), S::Inference(s)) => {
                WorkloadFile::Inference(Box::new(w.normalised(name, s)))
            }
            (WorkloadFile::Graph(w), S::Graph(s)) => WorkloadFile::Graph(w.normalised(name, s)),
            // The spec is validated from this entry: its kind is the entry's.
            _ => unreachable!("a workload spec of another kind than its entry"),
        }
    }
}

/// Keys of `[[workload]]` entries whose absence from a normalised scenario is itself the
/// setting (or that another key of the entry replaces).
pub const ABSENT_MEANS: &[(&str, &str)] = &[
    (
        "workload.*.hosts",
        "every host (GPU with a [cluster]), or the entry's groups or pairs",
    ),
    ("workload.*.pairs", "random pairs among `hosts`"),
    ("workload.*.count", "no cap on the number of flows"),
    (
        "workload.*.duration",
        "stop = \"all_flows_done\": `count` flows",
    ),
    ("workload.*.shift", "pattern is not \"shift\""),
    ("workload.*.hot_spot", "pattern is not \"hot_spot\""),
    ("workload.*.hot_fraction", "pattern is not \"hot_spot\""),
    ("workload.*.groups", "`hosts` split by `group_size`"),
    ("workload.*.group_size", "explicit `groups`"),
    ("workload.*.group_layout", "explicit `groups`"),
    ("workload.*.rank_order", "explicit `groups`"),
    ("workload.*.chunk_size", "not a pipelined (tree) algorithm"),
    (
        "workload.*.domain_size",
        "no scale-up domains: every endpoint is a domain of its own",
    ),
    ("workload.*.forward", "the compute comes from `gpu_flops`"),
    (
        "workload.*.backward",
        "the compute comes from `gpu_flops` (twice the forward FLOPs)",
    ),
    (
        "workload.*.gpu_flops",
        "the compute is given as a time (`forward`, `token_time`)",
    ),
    ("workload.*.efficiency", "the compute is given as a time"),
    (
        "workload.*.memory_bandwidth",
        "compute-bound blocks (no weight-read bound)",
    ),
    (
        "workload.*.token_time",
        "the compute comes from `gpu_flops`",
    ),
    ("workload.*.moe", "a dense model"),
    (
        "workload.*.algorithms",
        "each group's algorithm is chosen for it when the step is built",
    ),
    (
        "workload.*.algorithms.*",
        "that group's algorithm is chosen for it when the step is built",
    ),
    ("workload.*.noise", "no compute noise"),
    ("workload.*.noise.*", "no such noise"),
    ("workload.*.rate", "fixed arrivals (`interval`)"),
    ("workload.*.interval", "Poisson arrivals (`rate`)"),
    ("workload.*.requests", "requests arrive over `window`"),
    ("workload.*.window", "`requests` requests"),
    ("workload.*.file", "the graph is given inline (`ops`)"),
    ("workload.*.ops", "the graph is read from `file`"),
    ("workload.*.ranks", "the graph's ranks are endpoints 0..n"),
];

impl ReplayFile {
    fn validate(&self, ctx: &Context) -> Res<ReplaySpec> {
        let file = self.file.as_ref().ok_or_else(|| {
            ScenarioError::at(
                ctx.path("file"),
                "missing: expected the path of a CSV or Arrow file of flows",
            )
        })?;
        Ok(ReplaySpec {
            file: file.clone(),
            offset_ps: start_of(self.start),
            n_hosts: ctx.n_hosts,
        })
    }
}
