//! Workloads turn scenario entries into flows: who sends how much to whom, and when. A flow starts
//! at a fixed time or when a barrier (a set of earlier flows) has finished, plus a gap; that is how
//! repeated incast rounds (and, later, collective steps) express their dependencies.

use crate::rng::{self, Purpose, Rng};
use crate::scenario::{NamedWorkload, WorkloadSpec};
use crate::units::Time;

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

/// A flow as a workload produced it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowInit {
    pub src: u32,
    pub dst: u32,
    pub size_bytes: u64,
    pub start: Start,
    pub workload: u32,
    /// The barrier this flow counts toward, if any.
    pub completes: Option<u32>,
}

/// All flows of a scenario, in flow-id order, and the number of flows each barrier waits for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlowPlan {
    pub flows: Vec<FlowInit>,
    pub barrier_sizes: Vec<u32>,
}

/// Expand every workload; each draws from its own seeded stream.
pub fn plan(workloads: &[NamedWorkload], seed: u64) -> FlowPlan {
    let mut plan = FlowPlan::default();
    for (wi, w) in workloads.iter().enumerate() {
        let mut rng = rng::stream(seed, Purpose::Workload, 1_000_000 + wi as u64);
        let wi = wi as u32;
        match &w.spec {
            WorkloadSpec::Flows { flows } => {
                for f in flows {
                    plan.flows.push(FlowInit {
                        src: f.src,
                        dst: f.dst,
                        size_bytes: f.size_bytes,
                        start: Start::At(f.start_ps),
                        workload: wi,
                        completes: None,
                    });
                }
            }
            WorkloadSpec::Incast {
                receiver,
                senders,
                size_bytes,
                start_ps,
                rounds,
                round_gap_ps,
            } => {
                let mut previous: Option<u32> = None;
                for round in 0..*rounds {
                    let barrier = if round + 1 < *rounds {
                        plan.barrier_sizes.push(senders.len() as u32);
                        Some(plan.barrier_sizes.len() as u32 - 1)
                    } else {
                        None
                    };
                    let start = match previous {
                        None => Start::At(*start_ps),
                        Some(b) => Start::After {
                            barrier: b,
                            gap: *round_gap_ps,
                        },
                    };
                    for &s in senders {
                        plan.flows.push(FlowInit {
                            src: s,
                            dst: *receiver,
                            size_bytes: *size_bytes,
                            start,
                            workload: wi,
                            completes: barrier,
                        });
                    }
                    previous = barrier;
                }
            }
            WorkloadSpec::Permutation {
                hosts,
                size_bytes,
                start_ps,
            } => {
                let dsts = derangement(hosts, &mut rng);
                for (&src, &dst) in hosts.iter().zip(&dsts) {
                    plan.flows.push(FlowInit {
                        src,
                        dst,
                        size_bytes: *size_bytes,
                        start: Start::At(*start_ps),
                        workload: wi,
                        completes: None,
                    });
                }
            }
        }
    }
    plan
}

/// A uniformly random permutation of `hosts` with no fixed point (rejection sampling; the expected
/// number of tries is e).
pub fn derangement(hosts: &[u32], rng: &mut Rng) -> Vec<u32> {
    let mut out = hosts.to_vec();
    loop {
        rng.shuffle(&mut out);
        if hosts.iter().zip(&out).all(|(a, b)| a != b) {
            return out;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derangements_have_no_fixed_points_and_vary_with_seed() {
        let hosts: Vec<u32> = (0..64).collect();
        let a = derangement(&hosts, &mut rng::stream(1, Purpose::Workload, 0));
        let b = derangement(&hosts, &mut rng::stream(2, Purpose::Workload, 0));
        for d in [&a, &b] {
            let mut sorted = d.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, hosts);
            assert!(hosts.iter().zip(d.iter()).all(|(x, y)| x != y));
        }
        assert_ne!(a, b);
    }
}
