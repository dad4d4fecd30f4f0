//! Repeating a one-iteration graph: iteration i + 1 is a copy of iteration i whose first ops on
//! each rank wait for iteration i's last ops on that rank.

use super::spec::Graph;

impl Graph {
    /// This graph (one iteration, every op's `iteration` 0) run `iterations` times. Per rank,
    /// iteration i's *last* ops are those occupying the rank that no other op occupying it
    /// depends on; iteration i + 1's ops without dependencies wait for the last ops of iteration
    /// i on every rank they occupy (a collective: on every member).
    pub fn repeat(&self, iterations: u32) -> Graph {
        let n = self.ops.len();
        let ranks_of: Vec<Vec<u32>> = self
            .ops
            .iter()
            .map(|o| o.kind.ranks(&self.groups))
            .collect();
        // Per rank: its ops, and whether an op on the same rank depends on each.
        let mut followed = vec![Vec::<u32>::new(); n]; // ranks on which op i has a successor
        for (i, o) in self.ops.iter().enumerate() {
            for &d in &o.deps {
                for &r in &ranks_of[i] {
                    if ranks_of[d as usize].contains(&r) {
                        followed[d as usize].push(r);
                    }
                }
            }
        }
        let mut last: Vec<Vec<u32>> = vec![Vec::new(); self.ranks.len()];
        for (i, rs) in ranks_of.iter().enumerate() {
            for &r in rs {
                if !followed[i].contains(&r) {
                    last[r as usize].push(i as u32);
                }
            }
        }
        let mut out = Graph {
            ranks: self.ranks.clone(),
            groups: self.groups.clone(),
            ops: Vec::with_capacity(n * iterations as usize),
            iterations,
            start_ps: self.start_ps,
        };
        for it in 0..iterations {
            let base = it * n as u32;
            for (i, o) in self.ops.iter().enumerate() {
                let mut op = o.clone();
                op.iteration = it;
                for d in &mut op.deps {
                    *d += base;
                }
                if it > 0 && o.deps.is_empty() {
                    let prev = base - n as u32;
                    let mut deps: Vec<u32> = ranks_of[i]
                        .iter()
                        .flat_map(|&r| last[r as usize].iter().map(|&l| l + prev))
                        .collect();
                    deps.sort_unstable();
                    deps.dedup();
                    op.deps = deps;
                }
                out.ops.push(op);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use crate::workload::graph::{Graph, GraphOp, OpKind, OpPhase};

    fn op(kind: OpKind, deps: Vec<u32>) -> GraphOp {
        GraphOp {
            kind,
            deps,
            iteration: 0,
            phase: OpPhase::OtherCompute,
            name: None,
        }
    }

    #[test]
    fn the_next_iteration_waits_for_the_last_ops_of_each_rank() {
        // rank 0: c0 -> send(0->1) ; rank 1: c2 (root) and the send -> c3
        let g = Graph {
            ranks: vec![0, 1],
            ops: vec![
                op(
                    OpKind::Compute {
                        rank: 0,
                        duration_ps: 5,
                    },
                    vec![],
                ),
                op(
                    OpKind::Send {
                        src: 0,
                        dst: 1,
                        bytes: 10,
                    },
                    vec![0],
                ),
                op(
                    OpKind::Compute {
                        rank: 1,
                        duration_ps: 5,
                    },
                    vec![],
                ),
                op(
                    OpKind::Compute {
                        rank: 1,
                        duration_ps: 5,
                    },
                    vec![1, 2],
                ),
            ],
            iterations: 1,
            ..Graph::default()
        };
        let r = g.repeat(3);
        assert_eq!(r.ops.len(), 12);
        assert_eq!(r.ops[5].deps, vec![4]);
        assert_eq!(r.ops[7].deps, vec![5, 6]);
        // c0 of iteration 1 waits for rank 0's last op (the send); c2 for rank 1's (c3).
        assert_eq!(r.ops[4].deps, vec![1]);
        assert_eq!(r.ops[6].deps, vec![3]);
        assert_eq!(r.ops[8].deps, vec![5]);
        assert_eq!(r.ops[11].iteration, 2);
        assert!(r.find_cycle().is_none());
    }
}
