//! The network-free schedule of a [`Graph`]: every op starts as soon as all its dependencies have
//! finished (the graph's own semantics, with no resource other than the dependencies), compute ops
//! take their `duration_ps`, and communication takes zero time ([`Graph::ideal_schedule`]) or a
//! given time per op ([`Graph::schedule_with`]).
//!
//! It is the lower bound the fabric can only lengthen (the "network-free" iteration time), and the
//! basis of exact tests of the generators: a pipeline's bubble, a data-parallel all-reduce hidden
//! behind the backward pass or exposed by a known amount.

use super::spec::{Graph, GraphOp, OpKind};
use crate::units::Time;

/// Start and end of every op (indices as in [`Graph::ops`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    pub start_ps: Vec<Time>,
    pub end_ps: Vec<Time>,
}

/// The graph is not a DAG: `op` is on a cycle (or depends on an op that does not exist).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScheduleError {
    Cycle { op: u32 },
    MissingDep { op: u32, dep: u32 },
}

impl std::fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScheduleError::Cycle { op } => write!(f, "op {op} is on a dependency cycle"),
            ScheduleError::MissingDep { op, dep } => {
                write!(f, "op {op} depends on op {dep}, which does not exist")
            }
        }
    }
}

/// One iteration of a schedule, seen per rank.
#[derive(Debug, Clone, PartialEq)]
pub struct IterationTimes {
    pub iteration: u32,
    /// Earliest start and latest end of the iteration's ops.
    pub start_ps: Time,
    pub end_ps: Time,
    /// Per rank: time spent in compute ops (their union, so overlapping compute counts once).
    pub compute_ps: Vec<Time>,
    /// Per rank: time a communication op involving the rank was in flight while the rank
    /// computed nothing.
    pub exposed_comm_ps: Vec<Time>,
}

impl IterationTimes {
    pub fn time_ps(&self) -> Time {
        self.end_ps - self.start_ps
    }

    /// Per rank: the iteration's time neither computing nor waiting on its communication.
    pub fn bubble_ps(&self) -> Vec<Time> {
        self.compute_ps
            .iter()
            .zip(&self.exposed_comm_ps)
            .map(|(c, e)| self.time_ps() - c - e)
            .collect()
    }

    /// Mean over ranks of bubble / iteration time.
    pub fn bubble_fraction(&self) -> f64 {
        let t = self.time_ps() as f64;
        let b = self.bubble_ps();
        if t == 0.0 || b.is_empty() {
            return 0.0;
        }
        b.iter().map(|&x| x as f64 / t).sum::<f64>() / b.len() as f64
    }

    /// Mean over ranks of exposed communication / iteration time.
    pub fn exposed_comm_fraction(&self) -> f64 {
        let t = self.time_ps() as f64;
        if t == 0.0 || self.exposed_comm_ps.is_empty() {
            return 0.0;
        }
        self.exposed_comm_ps
            .iter()
            .map(|&x| x as f64 / t)
            .sum::<f64>()
            / self.exposed_comm_ps.len() as f64
    }
}

impl Graph {
    /// The ranks an op occupies: its compute rank, both ends of a send, every member of a
    /// collective's group.
    pub fn op_ranks(&self, op: &GraphOp) -> Vec<u32> {
        op.kind.ranks(&self.groups)
    }

    /// The ops in an order where every op comes after its dependencies (Kahn's algorithm; among
    /// ready ops the lowest index first).
    pub fn topological_order(&self) -> Result<Vec<u32>, ScheduleError> {
        let n = self.ops.len();
        let mut pending = vec![0u32; n];
        let mut succ_count = vec![0u32; n + 1];
        for (i, op) in self.ops.iter().enumerate() {
            for &d in &op.deps {
                if d as usize >= n {
                    return Err(ScheduleError::MissingDep {
                        op: i as u32,
                        dep: d,
                    });
                }
                pending[i] += 1;
                succ_count[d as usize + 1] += 1;
            }
        }
        // Successor lists in one flat array (CSR).
        for i in 0..n {
            succ_count[i + 1] += succ_count[i];
        }
        let mut fill = succ_count.clone();
        let mut succ = vec![0u32; succ_count[n] as usize];
        for (i, op) in self.ops.iter().enumerate() {
            for &d in &op.deps {
                succ[fill[d as usize] as usize] = i as u32;
                fill[d as usize] += 1;
            }
        }
        let mut ready: std::collections::BinaryHeap<std::cmp::Reverse<u32>> = (0..n as u32)
            .filter(|&i| pending[i as usize] == 0)
            .map(std::cmp::Reverse)
            .collect();
        let mut order = Vec::with_capacity(n);
        while let Some(std::cmp::Reverse(i)) = ready.pop() {
            order.push(i);
            let (a, b) = (succ_count[i as usize], succ_count[i as usize + 1]);
            for &s in &succ[a as usize..b as usize] {
                pending[s as usize] -= 1;
                if pending[s as usize] == 0 {
                    ready.push(std::cmp::Reverse(s));
                }
            }
        }
        if order.len() < n {
            let op = (0..n).find(|&i| pending[i] > 0).unwrap_or(0) as u32;
            return Err(ScheduleError::Cycle { op });
        }
        Ok(order)
    }

    /// The schedule with communication taking no time.
    pub fn ideal_schedule(&self) -> Result<Schedule, ScheduleError> {
        self.schedule_with(|_, _| 0)
    }

    /// The schedule with communication op `i` taking `comm_ps(i, op)`; compute takes its duration.
    pub fn schedule_with(
        &self,
        comm_ps: impl FnMut(u32, &GraphOp) -> Time,
    ) -> Result<Schedule, ScheduleError> {
        self.schedule_released(comm_ps, &[])
    }

    /// The same where op `i` of each `(i, t)` of `release` also starts no earlier than `t`.
    pub fn schedule_released(
        &self,
        mut comm_ps: impl FnMut(u32, &GraphOp) -> Time,
        release: &[(u32, Time)],
    ) -> Result<Schedule, ScheduleError> {
        let order = self.topological_order()?;
        let mut not_before = vec![0; self.ops.len()];
        for &(i, t) in release {
            if let Some(x) = not_before.get_mut(i as usize) {
                *x = t.max(*x);
            }
        }
        let n = self.ops.len();
        let mut start_ps = vec![0; n];
        let mut end_ps = vec![0; n];
        for i in order {
            let op = &self.ops[i as usize];
            let start = op
                .deps
                .iter()
                .map(|&d| end_ps[d as usize])
                .max()
                .unwrap_or(self.start_ps)
                .max(not_before[i as usize]);
            let took = match op.kind {
                OpKind::Compute { duration_ps, .. } => duration_ps,
                _ => comm_ps(i, op),
            };
            start_ps[i as usize] = start;
            end_ps[i as usize] = start.saturating_add(took);
        }
        Ok(Schedule { start_ps, end_ps })
    }
}

impl Schedule {
    /// The end of the last op (the makespan's end).
    pub fn end(&self) -> Time {
        self.end_ps.iter().copied().max().unwrap_or(0)
    }

    /// Per iteration of `graph`: its span and, per rank, compute and exposed communication.
    pub fn iterations(&self, graph: &Graph) -> Vec<IterationTimes> {
        let n_ranks = graph.ranks.len();
        let iters = graph
            .ops
            .iter()
            .map(|o| o.iteration + 1)
            .max()
            .unwrap_or(0)
            .max(graph.iterations);
        let mut out = Vec::with_capacity(iters as usize);
        for it in 0..iters {
            // Per rank: the intervals of its compute and of its communication.
            let mut compute: Vec<Vec<(Time, Time)>> = vec![Vec::new(); n_ranks];
            let mut comm: Vec<Vec<(Time, Time)>> = vec![Vec::new(); n_ranks];
            let (mut lo, mut hi) = (Time::MAX, 0);
            for (i, op) in graph.ops.iter().enumerate() {
                if op.iteration != it {
                    continue;
                }
                let iv = (self.start_ps[i], self.end_ps[i]);
                lo = lo.min(iv.0);
                hi = hi.max(iv.1);
                let is_compute = matches!(op.kind, OpKind::Compute { .. });
                for r in graph.op_ranks(op) {
                    if is_compute {
                        compute[r as usize].push(iv);
                    } else {
                        comm[r as usize].push(iv);
                    }
                }
            }
            if lo == Time::MAX {
                lo = 0;
            }
            let mut compute_ps = Vec::with_capacity(n_ranks);
            let mut exposed_comm_ps = Vec::with_capacity(n_ranks);
            for r in 0..n_ranks {
                let c = union(&mut compute[r]);
                let busy: Time = c.iter().map(|(a, b)| b - a).sum();
                let mut all = c.clone();
                all.extend(union(&mut comm[r]));
                let any: Time = union(&mut all).iter().map(|(a, b)| b - a).sum();
                compute_ps.push(busy);
                exposed_comm_ps.push(any - busy);
            }
            out.push(IterationTimes {
                iteration: it,
                start_ps: lo,
                end_ps: hi,
                compute_ps,
                exposed_comm_ps,
            });
        }
        out
    }
}

/// The union of intervals as disjoint sorted intervals (sorts `v`).
fn union(v: &mut [(Time, Time)]) -> Vec<(Time, Time)> {
    v.sort_unstable();
    let mut out: Vec<(Time, Time)> = Vec::with_capacity(v.len());
    for &(a, b) in v.iter() {
        if a == b {
            continue;
        }
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::spec::OpPhase;
    use super::*;
    use crate::config::{CollectiveAlgorithm, CollectiveOp};

    fn op(kind: OpKind, deps: &[u32]) -> GraphOp {
        GraphOp {
            kind,
            deps: deps.to_vec(),
            iteration: 0,
            phase: OpPhase::OtherCompute,
            name: None,
        }
    }

    fn compute(rank: u32, d: Time, deps: &[u32]) -> GraphOp {
        op(
            OpKind::Compute {
                rank,
                duration_ps: d,
            },
            deps,
        )
    }

    fn graph(ops: Vec<GraphOp>) -> Graph {
        Graph {
            ranks: vec![0, 1],
            groups: vec![vec![0, 1]],
            ops,
            iterations: 1,
            start_ps: 1000,
        }
    }

    #[test]
    fn ops_start_when_all_deps_finished() {
        let ar = OpKind::Collective {
            group: 0,
            op: CollectiveOp::AllReduce,
            algorithm: CollectiveAlgorithm::Ring,
            bytes: 64,
            domain_size: None,
        };
        // Listed out of order on purpose: op 0 depends on op 3.
        let g = graph(vec![
            compute(0, 5, &[3]),
            compute(0, 10, &[]),
            compute(1, 30, &[]),
            op(ar, &[1, 2]),
        ]);
        let s = g.ideal_schedule().unwrap();
        assert_eq!(s.start_ps, vec![1030, 1000, 1000, 1030]);
        assert_eq!(s.end_ps, vec![1035, 1010, 1030, 1030]);
        let s = g.schedule_with(|_, _| 7).unwrap();
        assert_eq!(s.end_ps, vec![1042, 1010, 1030, 1037]);
        let it = &s.iterations(&g)[0];
        assert_eq!(it.time_ps(), 42);
        assert_eq!(it.compute_ps, vec![15, 30]);
        // Rank 0: the all-reduce (7) is exposed; it idles 20 waiting for rank 1.
        assert_eq!(it.exposed_comm_ps, vec![7, 7]);
        assert_eq!(it.bubble_ps(), vec![20, 5]);
    }

    #[test]
    fn cycles_and_missing_deps_are_errors() {
        let g = graph(vec![compute(0, 1, &[1]), compute(0, 1, &[0])]);
        assert_eq!(g.ideal_schedule(), Err(ScheduleError::Cycle { op: 0 }));
        let g = graph(vec![compute(0, 1, &[4])]);
        assert_eq!(
            g.ideal_schedule(),
            Err(ScheduleError::MissingDep { op: 0, dep: 4 })
        );
    }

    #[test]
    fn overlapping_communication_is_not_exposed() {
        let send = OpKind::Send {
            src: 0,
            dst: 1,
            bytes: 8,
        };
        let g = graph(vec![compute(0, 100, &[]), op(send, &[])]);
        let s = g.schedule_with(|_, _| 60).unwrap();
        let it = &s.iterations(&g)[0];
        assert_eq!(it.exposed_comm_ps, vec![0, 60]);
        assert_eq!(it.bubble_ps(), vec![0, 40]);
    }
}
