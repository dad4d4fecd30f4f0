//! `[[workload]]`: `kind` selects the struct of its keys (one per kind, each beside its kind's
//! generator) and that kind's checks produce a [`WorkloadSpec`].

use serde::{Deserialize, Serialize};

use super::all_to_all::AllToAllFile;
use super::collective::CollectiveFile;
use super::explicit::FlowsFile;
use super::graph::reaction::Reaction;
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
