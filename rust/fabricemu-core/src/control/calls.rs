//! Every call (iteration) of every `kind = "collective"` workload group: its flows, its
//! algorithm, how it starts (at a time, or a gap after the previous call's end barrier) and the
//! barrier its last transfers complete (the next call's start). A call whose flows have not
//! started can be re-planned with another algorithm: its flows are cancelled and the new
//! algorithm's transfers appended (`engine::amend`), starting as the call would have and
//! completing the same end barrier.

use std::collections::HashSet;

use crate::config::{CollectiveAlgorithm, CollectiveSpec, WorkloadSpec};
use crate::engine::amend::Amendment;
use crate::ids::{FlowId, NodeId};
use crate::workload::collective::{self, algorithms};
use crate::workload::{CollectiveTag, FlowInit, FlowPlan, Start};

/// One call of one collective group.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub flows: Vec<FlowId>,
    pub algorithm: CollectiveAlgorithm,
    /// How its first transfers start (without their own delay).
    pub entry: Start,
    /// The barrier its last transfers complete (None: the last call).
    pub exit: Option<u32>,
}

/// The calls of every collective group that a controller may re-plan.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Calls {
    /// Per collective instance (`FlowPlan::collectives`): its calls, or None when it belongs to
    /// a step workload (not re-plannable).
    pub by_instance: Vec<Option<Vec<Call>>>,
}

impl Calls {
    pub fn new(plan: &FlowPlan, workloads: &[crate::config::NamedWorkload]) -> Self {
        let mut by_instance: Vec<Option<Vec<Call>>> = plan
            .collectives
            .iter()
            .map(|c| {
                let plain = matches!(
                    workloads.get(c.workload as usize).map(|w| &w.spec),
                    Some(WorkloadSpec::Collective(_))
                );
                plain.then(|| {
                    (0..c.iterations)
                        .map(|_| Call {
                            flows: Vec::new(),
                            algorithm: c.algorithm,
                            entry: Start::At(c.start_ps),
                            exit: None,
                        })
                        .collect()
                })
            })
            .collect();
        for (i, f) in plan.flows.iter().enumerate() {
            let Some(tag) = f.collective else { continue };
            if let Some(Some(calls)) = by_instance.get_mut(tag.instance as usize) {
                if let Some(call) = calls.get_mut(tag.iteration as usize) {
                    call.flows.push(FlowId::new(i as u32));
                }
            }
        }
        for calls in by_instance.iter_mut().flatten() {
            for call in calls.iter_mut() {
                let (entry, exit) = entry_exit(plan, &call.flows);
                if let Some(e) = entry {
                    call.entry = e;
                }
                call.exit = exit;
            }
        }
        Self { by_instance }
    }

    /// The calls of collective `c`, if it can be re-planned.
    pub fn of(&self, c: u32) -> Option<&[Call]> {
        self.by_instance.get(c as usize)?.as_deref()
    }
}

/// A call's start (the earliest of its entry flows) and end barrier.
fn entry_exit(plan: &FlowPlan, flows: &[FlowId]) -> (Option<Start>, Option<u32>) {
    let completed: HashSet<u32> = flows
        .iter()
        .filter_map(|f| plan.flows[f.index()].completes)
        .collect();
    let waited: HashSet<u32> = flows
        .iter()
        .filter_map(|f| match plan.flows[f.index()].start {
            Start::After { barrier, .. } => Some(barrier),
            Start::At(_) => None,
        })
        .collect();
    let exit = completed.iter().copied().find(|b| !waited.contains(b));
    let mut entry: Option<Start> = None;
    for f in flows {
        let s = plan.flows[f.index()].start;
        let external = match s {
            Start::At(_) => true,
            Start::After { barrier, .. } => !completed.contains(&barrier),
        };
        if !external {
            continue;
        }
        entry = Some(match (entry, s) {
            (None, s) => s,
            (Some(Start::At(a)), Start::At(b)) => Start::At(a.min(b)),
            (Some(Start::After { barrier, gap: a }), Start::After { gap: b, .. }) => Start::After {
                barrier,
                gap: a.min(b),
            },
            (Some(e), _) => e,
        });
    }
    (entry, exit)
}

/// Whether `algorithm` may be chosen live for a call of `spec` with `n` ranks: a flat algorithm
/// of the operation (hierarchical ones need the scale-up layout the group was planned with), or
/// an in-network one (whether its tree finds free contexts is known only when it is placed).
pub fn choosable(
    spec: &CollectiveSpec,
    algorithm: CollectiveAlgorithm,
    n: usize,
) -> Result<(), String> {
    if !algorithms(spec.op).contains(&algorithm) {
        let names: Vec<&str> = algorithms(spec.op).iter().map(|a| a.name()).collect();
        return Err(format!(
            "{} is not an algorithm of {} (one of: {})",
            algorithm.name(),
            spec.op.name(),
            names.join(", ")
        ));
    }
    if algorithm.is_hierarchical() {
        return Err(format!(
            "{} cannot be chosen live (only flat algorithms: the group was placed for {})",
            algorithm.name(),
            spec.algorithm.name()
        ));
    }
    if algorithm == CollectiveAlgorithm::HalvingDoubling
        && spec.op != crate::config::CollectiveOp::AllReduce
        && !n.is_power_of_two()
    {
        return Err(format!(
            "halving_doubling {} needs a power-of-two group; this one has {n} ranks",
            spec.op.name()
        ));
    }
    Ok(())
}

/// The amendment that re-plans call `iteration` (`call`) of collective `instance` (of workload
/// `workload`, on `hosts`) with `algorithm`: its flows cancelled, the new transfers appended
/// (their barriers numbered from `first_barrier`, the world's barrier count).
#[allow(clippy::too_many_arguments)]
pub fn replan(
    spec: &CollectiveSpec,
    algorithm: CollectiveAlgorithm,
    workload: u32,
    instance: u32,
    iteration: u32,
    hosts: &[u32],
    call: &Call,
    first_barrier: u32,
) -> Amendment {
    let mut spec = spec.clone();
    spec.algorithm = algorithm;
    let dom = collective::group_domains(&spec, hosts);
    let ts = collective::transfers(&spec, &dom);
    let gr = collective::iteration_graph(&ts);
    let flows = ts
        .iter()
        .enumerate()
        .map(|(k, t)| {
            let start = match (gr.waits[k], call.entry) {
                (Some(b), _) => Start::After {
                    barrier: first_barrier + b,
                    gap: t.delay,
                },
                (None, Start::At(at)) => Start::At(at.saturating_add(t.delay)),
                (None, Start::After { barrier, gap }) => Start::After {
                    barrier,
                    gap: gap.saturating_add(t.delay),
                },
            };
            FlowInit {
                src: NodeId::new(hosts[t.src as usize]),
                dst: NodeId::new(hosts[t.dst as usize]),
                size_bytes: t.bytes,
                start,
                workload,
                completes: gr.completes[k].map(|b| first_barrier + b).or(call.exit),
                collective: Some(CollectiveTag {
                    instance,
                    iteration,
                    step: t.step,
                    phase: t.phase,
                    scaleup: collective::is_scaleup(
                        &spec,
                        hosts[t.src as usize],
                        hosts[t.dst as usize],
                    ),
                }),
                tag: None,
            }
        })
        .collect();
    Amendment {
        cancel: call.flows.clone(),
        barriers: gr.sizes.clone(),
        flows,
        edges: Vec::new(),
    }
}
