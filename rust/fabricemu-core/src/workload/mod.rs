//! Workloads turn scenario entries into flows: who sends how much to whom, and when. A flow starts
//! at a fixed time or when a barrier (a set of earlier flows) has finished, plus a gap; that is how
//! repeated incast rounds, collective steps and iterations express their dependencies.
//!
//! One module per kind: [`explicit`] (`flows`), [`incast`], [`permutation`], [`all_to_all`],
//! [`poisson`] (sizes from a [`cdf`]), [`collective`] and [`replay`]. Each expands its spec into
//! [`FlowInit`]s appended to one [`FlowPlan`]; the engine gives them ids in that order.

pub mod all_to_all;
pub mod cdf;
pub mod collective;
pub mod config;
pub mod explicit;
pub mod graph;
pub mod incast;
pub mod inference;
pub mod permutation;
pub mod poisson;
pub mod replay;
pub mod stream;
pub mod synthetic;
pub mod training;

use std::borrow::Cow;

use crate::config::{
    CollectiveAlgorithm, CollectiveOp, NamedWorkload, ScenarioError, WorkloadSpec,
};
use crate::ids::NodeId;
use crate::rng::{Rng, RngStream};
use crate::units::{Bytes, Rate, Time};

/// When a flow starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    At(Time),
    /// `gap` after barrier `barrier` completes.
    After {
        barrier: u32,
        gap: Time,
    },
}

/// Which collective, iteration and algorithm step a flow belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CollectiveTag {
    /// Index into [`FlowPlan::collectives`] (one per workload and group).
    pub instance: u32,
    pub iteration: u32,
    pub step: u32,
    /// The algorithm's phase (see `collective::Transfer::phase`).
    pub phase: u8,
    /// Both hosts are in one scale-up domain.
    pub scaleup: bool,
}

/// A flow as a workload produced it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowInit {
    pub src: NodeId,
    pub dst: NodeId,
    pub size_bytes: u64,
    pub start: Start,
    pub workload: u32,
    /// The barrier this flow counts toward, if any.
    pub completes: Option<u32>,
    pub collective: Option<CollectiveTag>,
    /// Replay: index into [`FlowPlan::tag_names`].
    pub tag: Option<u32>,
}

impl FlowInit {
    /// A flow at a fixed time, with no dependencies.
    pub fn at(src: NodeId, dst: NodeId, size_bytes: u64, start: Time, workload: u32) -> Self {
        FlowInit {
            src,
            dst,
            size_bytes,
            start: Start::At(start),
            workload,
            completes: None,
            collective: None,
            tag: None,
        }
    }
}

/// One collective of the run: a group of ranks running one workload's operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectiveInstance {
    pub workload: u32,
    /// The group's index within its workload.
    pub group: u32,
    pub op: CollectiveOp,
    pub algorithm: CollectiveAlgorithm,
    /// Host of each rank.
    pub hosts: Vec<u32>,
    pub size_bytes: Bytes,
    pub iterations: u32,
    pub compute_gap_ps: Time,
    pub start_ps: Time,
    /// The group's ranks per scale-up domain when every domain it touches holds as many (1 when
    /// the scenario defines no domains: every host is one).
    pub ranks_per_domain: Option<u32>,
}

/// What a Poisson workload generated, to compare with its target load.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PoissonReport {
    pub target_load: f64,
    pub senders: u32,
    pub host_rate_bps: Rate,
    /// The arrival window: the configured one, or up to the last arrival with only a count.
    pub window_ps: Time,
    pub payload_bytes: u64,
    /// Payload plus one header per packet.
    pub wire_bytes: u64,
    /// The distribution's mean flow size (what the arrival rate was derived from).
    pub mean_flow_bytes: f64,
}

impl PoissonReport {
    fn load_of(&self, bytes: u64) -> Option<f64> {
        let capacity = self.senders as f64 * self.host_rate_bps as f64 * self.window_ps as f64
            / crate::units::PS_PER_SEC as f64;
        (capacity > 0.0).then(|| bytes as f64 * 8.0 / capacity)
    }

    /// Offered payload load: payload bits generated over the senders' link capacity in the window.
    pub fn offered_load(&self) -> Option<f64> {
        self.load_of(self.payload_bytes)
    }

    /// The same with every packet's header counted.
    pub fn offered_load_wire(&self) -> Option<f64> {
        self.load_of(self.wire_bytes)
    }
}

/// Per workload: how many flows and bytes it made.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct WorkloadReport {
    pub kind: &'static str,
    pub flows: u64,
    pub bytes: u64,
    pub poisson: Option<PoissonReport>,
    pub synthetic: Option<synthetic::SyntheticReport>,
    /// Replay: the distinct tags of its file.
    pub tags: u32,
}

/// One arrival at barrier `to`, `delay` after barrier `from` released: how barriers chain without
/// a flow between them (a step graph's op releases its dependents when it ends; a compute op
/// ends its duration after it started).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BarrierEdge {
    pub from: u32,
    pub to: u32,
    pub delay: Time,
}

/// The flows of a plan, in flow-id order: shared, not copied, between the Simulation (its outputs)
/// and an engine that makes flow records as flows start (`engine::flows`), since at a million
/// messages a second copy is tens of MiB. It reads as a `Vec`; a write (planning, amendments)
/// copies the vector only if another owner still shares it, which no run that amends its plan does.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlanFlows(std::sync::Arc<Vec<FlowInit>>);

impl PlanFlows {
    /// Another owner of the same flows.
    pub fn share(&self) -> Self {
        PlanFlows(std::sync::Arc::clone(&self.0))
    }
}

impl std::ops::Deref for PlanFlows {
    type Target = Vec<FlowInit>;

    #[inline]
    fn deref(&self) -> &Vec<FlowInit> {
        &self.0
    }
}

impl std::ops::DerefMut for PlanFlows {
    fn deref_mut(&mut self) -> &mut Vec<FlowInit> {
        std::sync::Arc::make_mut(&mut self.0)
    }
}

impl From<Vec<FlowInit>> for PlanFlows {
    fn from(v: Vec<FlowInit>) -> Self {
        PlanFlows(std::sync::Arc::new(v))
    }
}

impl<'a> IntoIterator for &'a PlanFlows {
    type Item = &'a FlowInit;
    type IntoIter = std::slice::Iter<'a, FlowInit>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

/// All flows of a scenario, in flow-id order, and the number of arrivals each barrier waits for.
/// An arrival is a flow that finished (its `completes`), an edge from a released barrier
/// ([`BarrierEdge`]) or a timed arrival (`barrier_timers`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FlowPlan {
    /// The planned flows, by flow id; a streamed plan's last workloads are in `streams` instead.
    pub flows: PlanFlows,
    /// Open-loop workloads whose flows are made as the run goes (see [`stream`]): ids on from
    /// `flows.len()`, in order. Empty unless the plan was made by [`plan_streamed`].
    pub streams: Vec<stream::StreamedFlows>,
    pub barrier_sizes: Vec<u32>,
    /// Barrier-to-barrier arrivals (step graphs; empty otherwise).
    pub barrier_edges: Vec<BarrierEdge>,
    /// (time, barrier): one arrival at a fixed time (a step graph's first ops start so).
    pub barrier_timers: Vec<(Time, u32)>,
    /// The ops of step-graph workloads, in planning order (ops.arrow, steps.arrow).
    pub ops: Vec<graph::PlannedOp>,
    pub collectives: Vec<CollectiveInstance>,
    /// Replay tags, all workloads together.
    pub tag_names: Vec<String>,
    /// The step workloads that react to failures (`on_failure`), with the failure episodes
    /// that cut off their ranks (filled in by the build once the faults are resolved).
    pub jobs: Vec<graph::reaction::JobPlan>,
    /// One per workload.
    pub reports: Vec<WorkloadReport>,
    /// In-network collectives: the reduction trees, contexts and calls (None without
    /// `[switch.reduction]`).
    pub in_network: Option<Box<collective::in_network::InNetworkPlan>>,
    /// The first error a step graph's in-network collective met while planning (the graph
    /// planner cannot fail; the build reports it).
    pub deferred_error: Option<ScenarioError>,
}

impl FlowPlan {
    /// Flows of the plan: planned and streamed.
    pub fn total_flows(&self) -> usize {
        self.flows.len() + self.streams.iter().map(|s| s.count as usize).sum::<usize>()
    }

    /// Plan the streamed workloads' flows now (for a run that keeps every flow from its start,
    /// or an amended plan): the same entries at the same ids.
    pub fn materialise_streams(&mut self) {
        if self.streams.is_empty() {
            return;
        }
        let streams = std::mem::take(&mut self.streams);
        let flows = &mut *self.flows;
        flows.reserve_exact(streams.iter().map(|s| s.count as usize).sum());
        for s in &streams {
            debug_assert_eq!(flows.len(), s.first as usize);
            flows.extend(s.flows());
        }
    }

    /// A new barrier that releases its waiting flows after `size` flows finished.
    pub fn barrier(&mut self, size: u32) -> u32 {
        self.barrier_sizes.push(size);
        self.barrier_sizes.len() as u32 - 1
    }
}

/// Expand every workload, in order, into one plan: the build phase of the workloads. Draws come
/// from each workload's named streams; replay and CDF files are read here (errors name the key).
pub fn plan(workloads: &[NamedWorkload], seed: u64) -> Result<FlowPlan, ScenarioError> {
    plan_with(workloads, seed, None)
}

/// [`plan`] with the reduction engines in-network collectives are placed on.
pub fn plan_with(
    workloads: &[NamedWorkload],
    seed: u64,
    in_network: Option<Box<collective::in_network::InNetworkPlan>>,
) -> Result<FlowPlan, ScenarioError> {
    plan_all(workloads, seed, in_network, workloads.len())
}

/// [`plan_with`], the trailing open-loop workloads (`poisson`, `synthetic`) streamed: their flows
/// are counted, not stored, and made as the run goes (see [`stream`]).
pub fn plan_streamed(
    workloads: &[NamedWorkload],
    seed: u64,
    in_network: Option<Box<collective::in_network::InNetworkPlan>>,
) -> Result<FlowPlan, ScenarioError> {
    let streams = |w: &NamedWorkload| {
        w.reaction.is_none()
            && matches!(
                w.spec,
                WorkloadSpec::Poisson(_) | WorkloadSpec::Synthetic(_)
            )
    };
    let first = workloads.len() - workloads.iter().rev().take_while(|w| streams(w)).count();
    plan_all(workloads, seed, in_network, first)
}

/// Plan `workloads`, streaming those from index `first_streamed` on.
fn plan_all(
    workloads: &[NamedWorkload],
    seed: u64,
    in_network: Option<Box<collective::in_network::InNetworkPlan>>,
    first_streamed: usize,
) -> Result<FlowPlan, ScenarioError> {
    let mut plan = FlowPlan {
        in_network,
        ..FlowPlan::default()
    };
    for (wi, w) in workloads.iter().enumerate() {
        let (barriers, ops, flows) = (
            plan.barrier_sizes.len() as u32,
            plan.ops.len(),
            plan.flows.len(),
        );
        expand(&mut plan, wi, &w.spec, seed, wi >= first_streamed)?;
        if let Some(reaction) = w.reaction {
            let made = &plan.ops[ops..];
            let mut endpoints: Vec<u32> = made.iter().flat_map(|o| o.nodes.clone()).collect();
            endpoints.sort_unstable();
            endpoints.dedup();
            let iterations = made.iter().map(|o| o.iteration + 1).max().unwrap_or(0);
            let (start_ps, ideal_iteration_ps, params) = match &w.spec {
                WorkloadSpec::Training(t) => {
                    (t.start_ps, t.ideal_iteration_ps(), Some(t.collective))
                }
                WorkloadSpec::Graph(g) => {
                    let (graph, _) = g.graph(wi)?;
                    let ideal = graph
                        .ideal_schedule()
                        .ok()
                        .map(|s| (s.end() - graph.start_ps) / u64::from(graph.iterations.max(1)));
                    (graph.start_ps, ideal, Some(g.params))
                }
                WorkloadSpec::Inference(i) => (i.start_ps, None, Some(i.collective)),
                _ => (0, None, None),
            };
            if matches!(
                reaction.on_failure,
                graph::reaction::OnFailure::Elastic { .. }
            ) {
                graph::reaction::check_elastic(made, wi)?;
            }
            plan.jobs.push(graph::reaction::JobPlan {
                workload: wi as u32,
                reaction,
                barriers: barriers..plan.barrier_sizes.len() as u32,
                ops: ops..plan.ops.len(),
                flows: flows..plan.flows.len(),
                endpoints,
                iterations,
                start_ps,
                ideal_iteration_ps,
                params,
                episodes: Vec::new(),
            });
        }
    }
    if let Some(e) = plan.deferred_error.take() {
        return Err(e);
    }
    Ok(plan)
}

fn expand(
    plan: &mut FlowPlan,
    index: usize,
    spec: &WorkloadSpec,
    seed: u64,
    stream: bool,
) -> Result<(), ScenarioError> {
    let mut rng = RngStream::WorkloadPlan(index).rng(seed);
    let wi = index as u32;
    let first = plan.flows.len();
    let first_tag = plan.tag_names.len();
    let mut poisson_report = None;
    let mut synthetic_report = None;
    // A streamed workload's count and bytes (its flows are not in `plan.flows`).
    let mut streamed: Option<(u64, u64)> = None;
    match spec {
        WorkloadSpec::Flows { flows } => explicit::expand(plan, wi, flows),
        WorkloadSpec::Incast {
            receiver,
            senders,
            size_bytes,
            start_ps,
            rounds,
            round_gap_ps,
        } => incast::expand(
            plan,
            wi,
            *receiver,
            &incast::resolve_senders(senders, *receiver, seed, index),
            *size_bytes,
            *start_ps,
            *rounds,
            *round_gap_ps,
        ),
        WorkloadSpec::Permutation {
            hosts,
            size_bytes,
            start_ps,
        } => permutation::expand(plan, wi, hosts, *size_bytes, *start_ps, &mut rng),
        WorkloadSpec::AllToAll {
            hosts,
            size_bytes,
            start_ps,
            stagger_ps,
        } => all_to_all::expand(plan, wi, hosts, *size_bytes, *start_ps, *stagger_ps),
        WorkloadSpec::Poisson(p) => {
            let cdf = poisson::load_cdf(index, p)?;
            let (report, made) = poisson::expand(plan, wi, p, &cdf, rng, stream);
            poisson_report = Some(report);
            streamed = stream.then_some((made, report.payload_bytes));
        }
        WorkloadSpec::Collective(c) => {
            let c = match &c.shuffle {
                None => Cow::Borrowed(c),
                Some(placement) => {
                    let mut placed = c.clone();
                    placed.groups = placement.shuffled_groups(seed, index);
                    Cow::Owned(placed)
                }
            };
            collective::expand(plan, wi, &c)?
        }
        WorkloadSpec::Replay(r) => {
            let data =
                replay::read_flow_file(std::path::Path::new(&r.file), r.n_hosts).map_err(|e| {
                    ScenarioError::at(format!("workload.{index}.file"), format!("{}: {e}", r.file))
                })?;
            replay::expand(plan, wi, &data, r.offset_ps)
        }
        WorkloadSpec::Synthetic(s) => {
            let report = synthetic::expand(plan, wi, index, s, seed, stream);
            synthetic_report = Some(report);
            streamed = stream.then_some((
                report.messages,
                report.messages.saturating_mul(s.size_bytes),
            ));
        }
        WorkloadSpec::Training(t) => training::expand(plan, index, t, seed),
        WorkloadSpec::Inference(i) => inference::expand(plan, index, i, seed)?,
        WorkloadSpec::Graph(g) => {
            let (graph, noise) = g.graph(index)?;
            graph::plan_graph(plan, index, seed, &graph, &noise, &g.params);
        }
    }
    let (flows, bytes) = match streamed {
        Some((count, bytes)) => {
            let s = plan.streams.last_mut().expect("a streamed workload");
            s.count = u32::try_from(count).expect("a workload's flows fit in 32 bits");
            (count, bytes)
        }
        None => {
            let made = &plan.flows[first..];
            let bytes = made
                .iter()
                .fold(0u64, |acc, f| acc.saturating_add(f.size_bytes));
            (made.len() as u64, bytes)
        }
    };
    plan.reports.push(WorkloadReport {
        kind: spec.kind(),
        flows,
        bytes,
        poisson: poisson_report,
        synthetic: synthetic_report,
        tags: (plan.tag_names.len() - first_tag) as u32,
    });
    Ok(())
}

/// Kind-specific facts of a workload for a one-line description (`validate`, `describe()`): what
/// its keys resolved to and (`report`) what it generated. Sizes are byte counts, times picoseconds.
pub fn describe(spec: &WorkloadSpec, report: &WorkloadReport) -> serde_json::Value {
    use serde_json::json;
    match spec {
        WorkloadSpec::Flows { .. } => json!({}),
        WorkloadSpec::Incast {
            receiver,
            senders,
            size_bytes,
            rounds,
            ..
        } => json!({ "receiver": receiver, "senders": senders.len(), "size_bytes": size_bytes,
                      "rounds": rounds }),
        WorkloadSpec::Permutation {
            hosts, size_bytes, ..
        } => json!({ "hosts": hosts.len(), "size_bytes": size_bytes }),
        WorkloadSpec::AllToAll {
            hosts,
            size_bytes,
            stagger_ps,
            ..
        } => json!({ "hosts": hosts.len(), "size_bytes": size_bytes, "stagger_ps": stagger_ps }),
        WorkloadSpec::Poisson(p) => json!({
            "cdf": p.cdf_name, "load": p.load, "senders": p.senders.len(),
            "mean_flow_bytes": report.poisson.map(|r| r.mean_flow_bytes), "window_ps": p.end_ps.map(|e| e - p.start_ps),
            "count": p.count,
        }),
        WorkloadSpec::Collective(c) => json!({
            "op": c.op.name(), "algorithm": c.algorithm.name(), "groups": c.groups.len(),
            "ranks": c.groups.iter().map(Vec::len).max().unwrap_or(0),
            "size_bytes": c.size_bytes, "iterations": c.iterations,
            "compute_gap_ps": c.compute_gap_ps,
        }),
        WorkloadSpec::Replay(r) => json!({ "file": r.file, "tags": report.tags }),
        WorkloadSpec::Synthetic(s) => json!({
            "pattern": s.pattern.name(), "load": s.load, "size_bytes": s.size_bytes,
            "process": match s.process {
                crate::config::ArrivalProcess::Bernoulli => "bernoulli",
                crate::config::ArrivalProcess::Poisson => "poisson",
            },
            "senders": s.n_hosts, "window_ps": s.end_ps - s.start_ps,
        }),
        WorkloadSpec::Training(t) => t.describe(),
        WorkloadSpec::Inference(i) => i.describe(),
        WorkloadSpec::Graph(g) => match &g.source {
            graph::config::GraphSource::Inline(graph) => json!({
                "ops": graph.ops.len(), "ranks": graph.ranks.len(),
                "groups": graph.groups.len(), "iterations": g.iterations,
            }),
            graph::config::GraphSource::File { path, .. } => json!({
                "file": path, "iterations": g.iterations,
            }),
        },
    }
}

/// A uniformly random permutation of `hosts` with no fixed point (rejection sampling; the expected
/// number of tries is e).
pub fn derangement(hosts: &[u32], rng: &mut Rng) -> Vec<u32> {
    permutation::derangement(hosts, rng)
}

/// `total` bytes cut into `n` blocks whose sizes differ by at most one byte (the larger first).
pub fn split_even(total: u64, n: usize) -> Vec<u64> {
    let n64 = n as u64;
    let (q, r) = (total / n64, total % n64);
    (0..n64).map(|i| q + u64::from(i < r)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derangements_have_no_fixed_points_and_vary_with_seed() {
        let hosts: Vec<u32> = (0..64).collect();
        let a = derangement(&hosts, &mut RngStream::IncastSenders(0).rng(1));
        let b = derangement(&hosts, &mut RngStream::IncastSenders(0).rng(2));
        for d in [&a, &b] {
            let mut sorted = d.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, hosts);
            assert!(hosts.iter().zip(d.iter()).all(|(x, y)| x != y));
        }
        assert_ne!(a, b);
    }

    #[test]
    fn even_split() {
        assert_eq!(split_even(10, 4), vec![3, 3, 2, 2]);
        assert_eq!(split_even(8, 4), vec![2, 2, 2, 2]);
        assert_eq!(split_even(3, 3), vec![1, 1, 1]);
    }
}
