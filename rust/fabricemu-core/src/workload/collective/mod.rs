//! `kind = "collective"`: collective operations of distributed training and inference as dependency
//! graphs of flows, one graph per group of ranks and iteration.
//!
//! An algorithm ([`ring`], [`tree`], [`halving_doubling`], [`all_to_all`]) describes one iteration
//! as a list of [`Transfer`]s between ranks, each with the transfers whose data it needs (its
//! inputs). A transfer starts when all its inputs have arrived: the last byte of each reached this
//! rank (the engine's barrier: a flow waits for a set of flows, then a gap). A transfer with no
//! inputs starts with the iteration; iteration i + 1 starts `compute_gap` after the last flow of
//! iteration i arrived. Ranks map to hosts through the group's host list; ranks sharing a host
//! (NVLink inside a server) are not modelled: every rank is one host (one NIC).

pub mod all_to_all;
mod config;
pub mod halving_doubling;
pub mod hierarchical;
pub mod in_network;
pub mod ring;
pub mod tree;

pub use config::{algorithms, CollectiveFile, GroupLayout, GroupsValue, RankOrder};
pub use hierarchical::Domains;

use super::{CollectiveInstance, CollectiveTag, FlowInit, FlowPlan, Start};
use crate::config::{CollectiveAlgorithm, CollectiveOp, CollectiveSpec};
use crate::ids::NodeId;
use crate::units::{serialisation_ps, Bytes, Rate, Time};

/// The tree's pipeline chunk when the scenario does not set `chunk_size`.
pub const DEFAULT_TREE_CHUNK: Bytes = 512 << 10;

/// One transfer of an iteration: rank `src` sends `bytes` to rank `dst` once every transfer in
/// `inputs` (indices into the iteration's list) has arrived, plus `delay`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transfer {
    pub src: u32,
    pub dst: u32,
    pub bytes: u64,
    pub inputs: Vec<u32>,
    /// The algorithm's step (reported in flows.arrow).
    pub step: u32,
    pub delay: Time,
    /// The algorithm's phase (0 for single-phase algorithms): the time per tier in
    /// collectives.arrow sums, over phases, the span of the phase's transfers on that tier.
    pub phase: u8,
}

/// The most phases an algorithm has (hierarchical all-reduce: scale-up reduce-scatter,
/// scale-out all-reduce, scale-up all-gather).
pub const MAX_PHASES: usize = 3;

/// Time to put `chunk` payload bytes on a host link (one header per MTU packet).
pub fn chunk_interval(chunk: Bytes, mtu: Bytes, header: Bytes, rate_bps: Rate) -> Time {
    let packets = chunk.div_ceil(mtu.max(1));
    serialisation_ps(
        chunk.saturating_add(packets.saturating_mul(header)),
        rate_bps,
    )
}

/// The scale-up domains of a group of ranks on `hosts`.
pub fn group_domains(spec: &CollectiveSpec, hosts: &[u32]) -> Domains {
    let ids: Vec<u32> = hosts.iter().map(|&h| spec.domain_of(h)).collect();
    Domains::of(&ids)
}

/// Whether a transfer between these hosts stays inside a scale-up domain.
pub fn is_scaleup(spec: &CollectiveSpec, src: u32, dst: u32) -> bool {
    spec.domain_size.is_some() && spec.domain_of(src) == spec.domain_of(dst)
}

/// The transfers of one iteration on a group whose ranks lie in `dom` (flat algorithms use only
/// the number of ranks).
pub fn transfers(spec: &CollectiveSpec, dom: &Domains) -> Vec<Transfer> {
    let n = dom.ranks.iter().map(Vec::len).sum();
    match spec.algorithm {
        CollectiveAlgorithm::Ring => ring::transfers(spec.op, n, spec.size_bytes),
        CollectiveAlgorithm::Tree => {
            tree::all_reduce(n, spec.size_bytes, spec.chunk_bytes, spec.chunk_interval_ps)
        }
        CollectiveAlgorithm::HalvingDoubling => {
            halving_doubling::transfers(spec.op, n, spec.size_bytes)
        }
        CollectiveAlgorithm::Direct => all_to_all::direct(n, spec.size_bytes),
        CollectiveAlgorithm::Pairwise => all_to_all::pairwise(n, spec.size_bytes),
        CollectiveAlgorithm::HierarchicalRing => match spec.op {
            CollectiveOp::AllReduce => hierarchical::all_reduce(dom, spec.size_bytes, None),
            op => hierarchical::gather_or_scatter(op, dom, spec.size_bytes),
        },
        CollectiveAlgorithm::HierarchicalTree => hierarchical::all_reduce(
            dom,
            spec.size_bytes,
            Some((spec.chunk_bytes, spec.chunk_interval_ps)),
        ),
        CollectiveAlgorithm::Pxn => hierarchical::pxn(dom, spec.size_bytes),
        CollectiveAlgorithm::InNetwork | CollectiveAlgorithm::Nvls => {
            in_network::transfers(n, spec.size_bytes)
        }
    }
}

/// The number of flows of one iteration over all groups, without building them.
pub fn flows_per_iteration(spec: &CollectiveSpec) -> u64 {
    spec.groups
        .iter()
        .map(|g| {
            let n = g.len() as u64;
            match (spec.algorithm, spec.op) {
                (CollectiveAlgorithm::Ring, CollectiveOp::AllReduce) => 2 * (n - 1) * n,
                (CollectiveAlgorithm::Ring, _) => (n - 1) * n,
                (CollectiveAlgorithm::Tree, _) => {
                    let halves = [spec.size_bytes.div_ceil(2), spec.size_bytes / 2];
                    halves
                        .iter()
                        .map(|&h| h.div_ceil(spec.chunk_bytes) * 2 * (n - 1))
                        .sum()
                }
                (CollectiveAlgorithm::HalvingDoubling, op) => {
                    let p = 1u64 << (63 - n.leading_zeros());
                    let steps = p.trailing_zeros() as u64;
                    match op {
                        CollectiveOp::AllReduce => 2 * steps * p + 2 * (n - p),
                        _ => steps * p,
                    }
                }
                (CollectiveAlgorithm::Direct | CollectiveAlgorithm::Pairwise, _) => n * (n - 1),
                // In-network: one flow per rank (a communicator that falls back to the ring
                // makes the ring's; `budget` bounds `kind = "collective"` by the ring's).
                (CollectiveAlgorithm::InNetwork | CollectiveAlgorithm::Nvls, _) => n,
                (
                    CollectiveAlgorithm::HierarchicalRing
                    | CollectiveAlgorithm::HierarchicalTree
                    | CollectiveAlgorithm::Pxn,
                    op,
                ) => hierarchical::flows(
                    op,
                    (spec.algorithm == CollectiveAlgorithm::HierarchicalTree)
                        .then_some(spec.chunk_bytes),
                    &group_domains(spec, g),
                    spec.size_bytes,
                ),
            }
        })
        .sum()
}

/// The barrier structure of an iteration, shared by all its repetitions (and by step graphs'
/// collective ops).
pub struct IterationGraph {
    /// Per transfer: the local barrier it waits on (None: it starts with the iteration).
    pub waits: Vec<Option<u32>>,
    /// Per transfer: the local barrier its arrival counts toward (None: it ends the iteration).
    pub completes: Vec<Option<u32>>,
    /// Per local barrier: how many transfers it waits for.
    pub sizes: Vec<u32>,
    /// Transfers that end the iteration.
    pub terminal: u32,
}

#[cfg(test)]
fn graph(ts: &[Transfer]) -> IterationGraph {
    iteration_graph(ts)
}

/// Group transfers by their input set: one barrier per distinct set, numbered as the sets first
/// come. The engine counts a flow toward one barrier only, so input sets must be disjoint
/// (every algorithm here guarantees it).
pub fn iteration_graph(ts: &[Transfer]) -> IterationGraph {
    let mut waits = vec![None; ts.len()];
    let mut completes: Vec<Option<u32>> = vec![None; ts.len()];
    let mut sizes: Vec<u32> = Vec::new();
    // Each barrier's input set, flat (barrier `b`'s is `sets[set_from[b]..set_from[b + 1]]`).
    // Sets are disjoint, so a set seen before is the one its first transfer already feeds: no
    // hashing of the sets (hashing and copying them was half of an elastic job's re-plans'
    // planning, which runs at every re-formation).
    let mut set_from: Vec<u32> = vec![0];
    let mut sets: Vec<u32> = Vec::new();
    let mut set: Vec<u32> = Vec::new();
    for (k, t) in ts.iter().enumerate() {
        if t.inputs.is_empty() {
            continue;
        }
        set.clear();
        set.extend_from_slice(&t.inputs);
        set.sort_unstable();
        set.dedup();
        let last = set[set.len() - 1];
        assert!(
            (last as usize) < k,
            "transfer {k} depends on a later transfer {last}"
        );
        let b = match completes[set[0] as usize] {
            Some(b) => {
                let (from, to) = (set_from[b as usize], set_from[b as usize + 1]);
                assert!(
                    sets[from as usize..to as usize] == set[..],
                    "transfer {} feeds two different input sets",
                    set[0]
                );
                b
            }
            None => {
                sizes.push(set.len() as u32);
                sets.extend_from_slice(&set);
                set_from.push(sets.len() as u32);
                sizes.len() as u32 - 1
            }
        };
        waits[k] = Some(b);
        for &i in &set {
            let c = &mut completes[i as usize];
            assert!(
                c.is_none() || *c == Some(b),
                "transfer {i} feeds two different input sets"
            );
            *c = Some(b);
        }
    }
    let terminal = completes.iter().filter(|c| c.is_none()).count() as u32;
    IterationGraph {
        waits,
        completes,
        sizes,
        terminal,
    }
}

/// The size and group size each tier's bus bandwidth is computed with (nccl-tests' factor of the
/// operation for that many ranks), scale-up then scale-out; None where the tier runs no
/// collective of its own. A hierarchical algorithm runs the operation on S bytes over the n1
/// ranks of each domain and on S/n1 bytes (all-to-all: S) over the n2 ranks of each scale-out
/// group; a flat algorithm is a one-tier collective when its group lies in one domain (scale-up)
/// or in n distinct domains (scale-out), and None on both tiers otherwise.
pub fn tier_sizes(
    op: CollectiveOp,
    algorithm: CollectiveAlgorithm,
    size: u64,
    n: u32,
    ranks_per_domain: Option<u32>,
) -> [Option<(f64, u32)>; 2] {
    let Some(n1) = ranks_per_domain.filter(|&n1| n1 > 0 && n.is_multiple_of(n1)) else {
        return [None, None];
    };
    let n2 = n / n1;
    let s = size as f64;
    let (up, out) = if algorithm.is_hierarchical() {
        let out_size = if op == CollectiveOp::AllToAll {
            s
        } else {
            s / n1 as f64
        };
        ((s, n1), (out_size, n2))
    } else if n2 == 1 {
        ((s, n), (s, 1))
    } else if n1 == 1 {
        ((s, 1), (s, n))
    } else {
        return [None, None];
    };
    [(up.1 > 1).then_some(up), (out.1 > 1).then_some(out)]
}

/// One phase's flows on one tier of one collective iteration.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Span {
    flows: u64,
    finished: u64,
    bytes: u64,
    first_start: Option<Time>,
    last_finish: Time,
}

/// The flows of one collective iteration by phase and tier (collectives.arrow's per-tier
/// columns): tier 0 is scale-up, tier 1 scale-out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TierSpans {
    spans: [[Span; 2]; MAX_PHASES],
}

impl TierSpans {
    /// Count one flow: its tag, payload, start and (if it arrived) finish.
    pub fn add(&mut self, tag: &CollectiveTag, bytes: u64, start: Time, finish: Option<Time>) {
        let s =
            &mut self.spans[(tag.phase as usize).min(MAX_PHASES - 1)][usize::from(!tag.scaleup)];
        s.flows += 1;
        s.bytes = s.bytes.saturating_add(bytes);
        if let Some(f) = finish {
            s.finished += 1;
            s.last_finish = s.last_finish.max(f);
            s.first_start = Some(s.first_start.map_or(start, |t| t.min(start)));
        }
    }

    /// Payload bytes per tier.
    pub fn bytes(&self) -> [u64; 2] {
        [0, 1].map(|t| self.spans.iter().map(|p| p[t].bytes).sum())
    }

    /// Per tier: the sum over phases of the first start to last arrival of the tier's flows;
    /// None when the tier has no flows or some had not arrived.
    pub fn times(&self) -> [Option<Time>; 2] {
        [0, 1].map(|t| {
            let phases = self.spans.iter().map(|p| p[t]).filter(|s| s.flows > 0);
            let mut total: Option<Time> = None;
            for s in phases {
                if s.finished < s.flows {
                    return None;
                }
                let span = s.last_finish - s.first_start.unwrap_or(s.last_finish);
                total = Some(total.unwrap_or(0) + span);
            }
            total
        })
    }
}

pub fn expand(
    plan: &mut FlowPlan,
    workload: u32,
    spec: &CollectiveSpec,
) -> Result<(), crate::config::ScenarioError> {
    type Cached = (
        usize,
        CollectiveAlgorithm,
        Option<Domains>,
        Vec<Transfer>,
        IterationGraph,
    );
    let mut cache: Vec<Cached> = Vec::new();
    for (g, hosts) in spec.groups.iter().enumerate() {
        let n = hosts.len();
        let dom = group_domains(spec, hosts);
        // In-network: the communicator's tree, or the flat ring when it found no context.
        let tree = match spec.algorithm.is_in_network() {
            true => in_network::place(plan, workload, hosts, spec.algorithm)?,
            false => None,
        };
        let algorithm = match (spec.algorithm.is_in_network(), tree) {
            (true, None) => CollectiveAlgorithm::Ring,
            _ => spec.algorithm,
        };
        let key = algorithm.is_hierarchical().then(|| dom.clone());
        if !cache
            .iter()
            .any(|c| c.0 == n && c.1 == algorithm && c.2 == key)
        {
            let s = CollectiveSpec {
                algorithm,
                ..spec.clone()
            };
            let ts = transfers(&s, &dom);
            let gr = iteration_graph(&ts);
            cache.push((n, algorithm, key.clone(), ts, gr));
        }
        let (_, _, _, ts, gr) = cache
            .iter()
            .find(|c| c.0 == n && c.1 == algorithm && c.2 == key)
            .expect("cached above");
        let instance = plan.collectives.len() as u32;
        plan.collectives.push(CollectiveInstance {
            workload,
            group: g as u32,
            op: spec.op,
            algorithm,
            hosts: hosts.clone(),
            size_bytes: spec.size_bytes,
            iterations: spec.iterations,
            compute_gap_ps: spec.compute_gap_ps,
            start_ps: spec.start_ps,
            ranks_per_domain: (spec.domain_size.is_some() && dom.is_regular())
                .then_some(dom.n1() as u32)
                .or(spec.domain_size.is_none().then_some(1)),
        });
        let mut previous_end: Option<u32> = None;
        for it in 0..spec.iterations {
            let base = plan.barrier_sizes.len() as u32;
            plan.barrier_sizes.extend_from_slice(&gr.sizes);
            let end = (it + 1 < spec.iterations).then(|| plan.barrier(gr.terminal));
            let first_flow = plan.flows.len() as u32;
            for (k, t) in ts.iter().enumerate() {
                let start = match (gr.waits[k], previous_end) {
                    (Some(b), _) => Start::After {
                        barrier: base + b,
                        gap: t.delay,
                    },
                    (None, None) => Start::At(spec.start_ps.saturating_add(t.delay)),
                    (None, Some(e)) => Start::After {
                        barrier: e,
                        gap: spec.compute_gap_ps.saturating_add(t.delay),
                    },
                };
                plan.flows.push(FlowInit {
                    src: NodeId::new(hosts[t.src as usize]),
                    dst: NodeId::new(hosts[t.dst as usize]),
                    size_bytes: t.bytes,
                    start,
                    workload,
                    completes: gr.completes[k].map(|b| base + b).or(end),
                    collective: Some(CollectiveTag {
                        instance,
                        iteration: it,
                        step: t.step,
                        phase: t.phase,
                        scaleup: is_scaleup(spec, hosts[t.src as usize], hosts[t.dst as usize]),
                    }),
                    tag: None,
                });
            }
            if let Some(tree) = tree {
                in_network::add_call(plan, tree, first_flow, hosts, spec.op);
            }
            previous_end = end;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CollectiveSpec;

    fn after(inputs: &[u32]) -> Transfer {
        Transfer {
            src: 0,
            dst: 1,
            bytes: 1,
            inputs: inputs.to_vec(),
            step: 0,
            delay: 0,
            phase: 0,
        }
    }

    #[test]
    fn transfers_with_one_input_set_share_a_barrier_numbered_as_the_sets_first_come() {
        // 0, 1 and 2 start the iteration; 3 and 4 wait for {1, 2} (in any order, repeated),
        // 5 for {0}, 6 for {3, 4}; 5 and 6 end it.
        let ts = [&[][..], &[], &[], &[2, 1], &[1, 2, 2], &[0], &[4, 3]].map(after);
        let g = iteration_graph(&ts);
        assert_eq!(
            g.waits,
            [None, None, None, Some(0), Some(0), Some(1), Some(2)]
        );
        assert_eq!(
            g.completes,
            [Some(1), Some(0), Some(0), Some(2), Some(2), None, None]
        );
        assert_eq!(g.sizes, [2, 1, 2]);
        assert_eq!(g.terminal, 2);
    }

    #[test]
    #[should_panic(expected = "transfer 1 feeds two different input sets")]
    fn input_sets_that_overlap_are_refused() {
        iteration_graph(&[&[][..], &[], &[], &[0, 1], &[1, 2]].map(after));
    }

    #[test]
    #[should_panic(expected = "transfer 1 depends on a later transfer 1")]
    fn a_transfer_that_waits_for_itself_is_refused() {
        iteration_graph(&[&[][..], &[1]].map(after));
    }

    fn spec(
        op: CollectiveOp,
        algorithm: CollectiveAlgorithm,
        n: usize,
        size: u64,
    ) -> CollectiveSpec {
        CollectiveSpec {
            op,
            algorithm,
            groups: vec![(0..n as u32).collect()],
            shuffle: None,
            size_bytes: size,
            iterations: 1,
            compute_gap_ps: 0,
            start_ps: 0,
            chunk_bytes: 1000,
            chunk_interval_ps: 7,
            domain_size: None,
        }
    }

    /// Every rank in a domain of its own.
    fn flat(n: usize) -> Domains {
        Domains::of(&(0..n as u32).collect::<Vec<_>>())
    }

    /// Every algorithm for many group sizes: a valid graph (inputs earlier, disjoint input sets),
    /// the counted number of flows, and each rank's bytes sent as the algorithm prescribes.
    #[test]
    fn every_algorithm_builds_a_valid_graph() {
        use CollectiveAlgorithm::*;
        use CollectiveOp::*;
        let cases = [
            (AllReduce, Ring),
            (AllGather, Ring),
            (ReduceScatter, Ring),
            (AllReduce, Tree),
            (AllReduce, HalvingDoubling),
            (AllGather, HalvingDoubling),
            (ReduceScatter, HalvingDoubling),
            (AllToAll, Direct),
            (AllToAll, Pairwise),
        ];
        for (op, alg) in cases {
            for n in 2..=19usize {
                if alg == HalvingDoubling && op != AllReduce && !n.is_power_of_two() {
                    continue;
                }
                let size = 12_345 + n as u64;
                let s = spec(op, alg, n, size);
                let ts = transfers(&s, &flat(n));
                let g = graph(&ts);
                assert_eq!(
                    ts.len() as u64,
                    flows_per_iteration(&s),
                    "{op:?} {alg:?} n={n}"
                );
                assert!(g.terminal > 0);
                for t in &ts {
                    assert!(t.src != t.dst && (t.src as usize) < n && (t.dst as usize) < n);
                    assert!(t.bytes > 0);
                }
                let mut sent = vec![0u64; n];
                for t in &ts {
                    sent[t.src as usize] += t.bytes;
                }
                let total: u64 = sent.iter().sum();
                let n64 = n as u64;
                match (op, alg) {
                    (AllReduce, Ring) => assert_eq!(total, 2 * (n64 - 1) * size),
                    (AllGather | ReduceScatter, Ring) => assert_eq!(total, (n64 - 1) * size),
                    (AllToAll, _) => assert_eq!(total, (n64 - 1) * size),
                    (AllReduce, Tree) => {
                        // Each tree moves its half up once and down once over n - 1 edges.
                        assert_eq!(total, 2 * (n64 - 1) * size);
                    }
                    (AllReduce, HalvingDoubling) => {
                        let p = 1u64 << (63 - n64.leading_zeros());
                        assert_eq!(total, 2 * (p - 1) * size + 2 * (n64 - p) * size);
                    }
                    (_, HalvingDoubling) => assert_eq!(total, (n64 - 1) * size),
                    _ => unreachable!(),
                }
            }
        }
    }

    #[test]
    fn iterations_chain_through_an_end_barrier() {
        let mut s = spec(CollectiveOp::AllReduce, CollectiveAlgorithm::Ring, 4, 4000);
        s.iterations = 3;
        s.compute_gap_ps = 55;
        let mut plan = FlowPlan::default();
        expand(&mut plan, 0, &s).unwrap();
        assert_eq!(plan.flows.len(), 3 * 24);
        // Iteration 1's first step waits on iteration 0's end barrier (its 4 last flows) + the gap.
        let f = &plan.flows[24];
        let Start::After { barrier, gap } = f.start else {
            panic!("{f:?}")
        };
        assert_eq!(gap, 55);
        assert_eq!(plan.barrier_sizes[barrier as usize], 4);
        let counted = plan.flows[..24]
            .iter()
            .filter(|g| g.completes == Some(barrier))
            .count();
        assert_eq!(counted, 4);
        assert!(plan.flows[48..]
            .iter()
            .all(|f| f.collective.unwrap().iteration == 2));
        // The last iteration's last step completes nothing.
        assert!(plan.flows[68..].iter().all(|f| f.completes.is_none()));
    }

    /// Hierarchical algorithms on hosts 0..16 in domains of 4: the plan's flows carry their phase
    /// and tier (scale-up exactly when both hosts share a domain), the counted number of flows,
    /// and the instance its ranks per domain; a flat ring on the same hosts has both tiers.
    #[test]
    fn flows_carry_phase_and_tier() {
        use CollectiveAlgorithm::*;
        use CollectiveOp::*;
        for (op, alg) in [
            (AllReduce, HierarchicalRing),
            (AllReduce, HierarchicalTree),
            (AllGather, HierarchicalRing),
            (ReduceScatter, HierarchicalRing),
            (AllToAll, Pxn),
            (AllReduce, Ring),
        ] {
            let mut s = spec(op, alg, 16, 1 << 16);
            s.domain_size = Some(4);
            s.groups = vec![(0..16).collect(), (16..32).rev().collect()];
            let mut plan = FlowPlan::default();
            expand(&mut plan, 0, &s).unwrap();
            assert_eq!(
                plan.flows.len() as u64,
                flows_per_iteration(&s),
                "{op:?} {alg:?}"
            );
            assert!(plan
                .collectives
                .iter()
                .all(|c| c.ranks_per_domain == Some(4)));
            let mut tiers = [false; 2];
            for f in &plan.flows {
                let tag = f.collective.unwrap();
                assert_eq!(tag.scaleup, f.src.get() / 4 == f.dst.get() / 4);
                tiers[usize::from(tag.scaleup)] = true;
                if alg.is_hierarchical() {
                    // Scale-up phases: 0 and 2 (all-reduce), 1 (all-gather), 0 (the others).
                    let up = match op {
                        AllReduce => tag.phase != 1,
                        AllGather => tag.phase == 1,
                        _ => tag.phase == 0,
                    };
                    assert_eq!(tag.scaleup, up, "{op:?} {alg:?} {f:?}");
                }
                assert!((tag.phase as usize) < MAX_PHASES);
            }
            assert_eq!(tiers, [true, true]);
        }
    }

    #[test]
    fn tier_sizes_follow_each_tier_group() {
        use CollectiveAlgorithm::*;
        use CollectiveOp::*;
        let up_out = |op, alg, n1| tier_sizes(op, alg, 1024, 16, n1);
        assert_eq!(
            up_out(AllReduce, HierarchicalRing, Some(4)),
            [Some((1024.0, 4)), Some((256.0, 4))]
        );
        assert_eq!(
            up_out(AllToAll, Pxn, Some(8)),
            [Some((1024.0, 8)), Some((1024.0, 2))]
        );
        assert_eq!(up_out(AllReduce, Ring, Some(1)), [None, Some((1024.0, 16))]);
        assert_eq!(
            up_out(AllReduce, Ring, Some(16)),
            [Some((1024.0, 16)), None]
        );
        assert_eq!(up_out(AllReduce, Ring, Some(4)), [None, None]);
        assert_eq!(up_out(AllReduce, HierarchicalRing, None), [None, None]);
    }
}
