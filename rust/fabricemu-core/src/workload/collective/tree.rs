//! Double binary tree all-reduce (Sanders, Speck and Träff, "Two-tree algorithms for full bandwidth
//! broadcast, reduction and scan", Parallel Computing 2009; the scheme NCCL uses for its tree
//! all-reduce).
//!
//! Tree 1 is the in-order binary tree on positions 1..n (rank r at position r + 1): a position's
//! height is its number of trailing zero bits, its parent the neighbour at distance 2^height with one
//! more trailing zero (positions beyond n are skipped), the root the largest power of two <= n. All
//! its leaves are even ranks. Tree 2 is tree 1 mirrored (rank r plays rank n - 1 - r) when n is even,
//! or shifted by one rank when n is odd, so that (for even n) every rank is a leaf in one tree and an
//! inner node in the other. Each tree carries half the buffer, cut into chunks that are pipelined:
//! a rank sends chunk c up once it received chunk c from all its children, the root sends it down
//! once it reduced it, and every rank forwards it down once it arrived.
//!
//! Leaves have no inputs; like NCCL's fixed number of receive slots, they are flow-controlled: a
//! leaf sends chunk c (c >= 2) once its parent has received chunk c - 2 from all its children, so
//! at most two chunks per child are in flight (the first two go out one chunk-time apart). Without
//! it the leaves would push the whole buffer into the fabric at once and the queues in front of
//! their parents (which receive from two children) would hold it.

use super::Transfer;
use crate::units::Time;
use crate::workload::split_even;

/// One binary tree over ranks 0..n: the root and each rank's children (parents implied).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinaryTree {
    pub root: u32,
    pub parent: Vec<Option<u32>>,
    pub children: Vec<Vec<u32>>,
}

impl BinaryTree {
    /// The ranks with every child before its parent (depth first, children in order).
    pub fn post_order(&self) -> Vec<u32> {
        let mut post = Vec::with_capacity(self.parent.len());
        let mut stack = vec![(self.root, false)];
        while let Some((x, expanded)) = stack.pop() {
            if expanded {
                post.push(x);
            } else {
                stack.push((x, true));
                for &c in self.children[x as usize].iter().rev() {
                    stack.push((c, false));
                }
            }
        }
        post
    }
}

/// The in-order tree (tree 1).
pub fn in_order_tree(n: usize) -> BinaryTree {
    let root_pos = 1usize << (usize::BITS - 1 - n.leading_zeros());
    let mut parent = vec![None; n];
    let mut children = vec![Vec::new(); n];
    for pos in 1..=n {
        if pos == root_pos {
            continue;
        }
        let mut v = pos;
        let up = loop {
            let h = v.trailing_zeros();
            let lower = v - (1 << h);
            let upper = v + (1 << h);
            let p = if (v >> (h + 1)) & 1 == 1 {
                lower
            } else {
                upper
            };
            if p <= n {
                break p;
            }
            v = p;
        };
        parent[pos - 1] = Some((up - 1) as u32);
        children[up - 1].push((pos - 1) as u32);
    }
    BinaryTree {
        root: (root_pos - 1) as u32,
        parent,
        children,
    }
}

/// The two trees of the double binary tree.
pub fn double_tree(n: usize) -> [BinaryTree; 2] {
    let t1 = in_order_tree(n);
    let map = |r: u32| -> u32 {
        if n.is_multiple_of(2) {
            n as u32 - 1 - r
        } else {
            (r + 1) % n as u32
        }
    };
    let mut parent = vec![None; n];
    let mut children = vec![Vec::new(); n];
    for r in 0..n as u32 {
        parent[map(r) as usize] = t1.parent[r as usize].map(map);
        children[map(r) as usize] = t1.children[r as usize].iter().map(|&c| map(c)).collect();
    }
    let t2 = BinaryTree {
        root: map(t1.root),
        parent,
        children,
    };
    [t1, t2]
}

/// The transfers of one all-reduce of `size` bytes over `n` ranks.
pub fn all_reduce(n: usize, size: u64, chunk: u64, chunk_interval: Time) -> Vec<Transfer> {
    let trees = double_tree(n);
    let halves = [size.div_ceil(2), size / 2];
    let mut out: Vec<Transfer> = Vec::new();
    for (tree, &half) in trees.iter().zip(&halves) {
        if half == 0 {
            continue;
        }
        let chunks = split_even(half, half.div_ceil(chunk) as usize);
        // Post-order (children before parents) for the reduction, pre-order for the broadcast.
        let mut post = Vec::with_capacity(n);
        let mut stack = vec![(tree.root, false)];
        while let Some((x, expanded)) = stack.pop() {
            if expanded {
                post.push(x);
            } else {
                stack.push((x, true));
                for &c in tree.children[x as usize].iter().rev() {
                    stack.push((c, false));
                }
            }
        }
        // ups[c][x]: the transfer carrying chunk c from x to its parent (None at the root).
        // Post-order makes every child's transfer before its parent's.
        const CHILD_FIRST: &str = "post-order: a child's transfer precedes its parent's";
        let mut ups: Vec<Vec<Option<u32>>> = Vec::with_capacity(chunks.len());
        for (c, &bytes) in chunks.iter().enumerate() {
            let mut up: Vec<Option<u32>> = vec![None; n];
            let mut level = vec![0u32; n];
            for &x in &post {
                let Some(parent) = tree.parent[x as usize] else {
                    continue;
                };
                let kids = &tree.children[x as usize];
                let step = kids
                    .iter()
                    .map(|&k| level[k as usize] + 1)
                    .max()
                    .unwrap_or(0);
                let (inputs, delay) = if !kids.is_empty() {
                    (
                        kids.iter()
                            .map(|&k| up[k as usize].expect(CHILD_FIRST))
                            .collect(),
                        0,
                    )
                } else if c >= 2 {
                    // Flow control: the parent has received chunk c - 2 from all its children.
                    let siblings = &tree.children[parent as usize];
                    (
                        siblings
                            .iter()
                            .map(|&k| ups[c - 2][k as usize].expect(CHILD_FIRST))
                            .collect(),
                        0,
                    )
                } else {
                    (Vec::new(), c as Time * chunk_interval)
                };
                level[x as usize] = step;
                up[x as usize] = Some(out.len() as u32);
                out.push(Transfer {
                    src: x,
                    dst: parent,
                    bytes,
                    inputs,
                    step,
                    delay,
                    phase: 0,
                });
            }
            // Broadcast, from the root down (reverse post-order visits parents first).
            let root = tree.root as usize;
            let root_inputs: Vec<u32> = tree.children[root]
                .iter()
                .map(|&k| up[k as usize].expect(CHILD_FIRST))
                .collect();
            let root_step = tree.children[root]
                .iter()
                .map(|&k| level[k as usize] + 1)
                .max()
                .unwrap_or(0);
            // down[x]: the transfer bringing the result to x (None at the root); parents first.
            let mut down: Vec<Option<u32>> = vec![None; n];
            let mut down_step = vec![0u32; n];
            for &x in post.iter().rev() {
                let (inputs, step) = if x as usize == root {
                    (root_inputs.clone(), root_step)
                } else {
                    let from_parent = down[x as usize].expect("reverse post-order: parents first");
                    (vec![from_parent], down_step[x as usize] + 1)
                };
                for &k in &tree.children[x as usize] {
                    down[k as usize] = Some(out.len() as u32);
                    down_step[k as usize] = step;
                    out.push(Transfer {
                        src: x,
                        dst: k,
                        bytes,
                        inputs: inputs.clone(),
                        step,
                        delay: 0,
                        phase: 0,
                    });
                }
            }
            ups.push(up);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth(t: &BinaryTree, mut r: u32) -> u32 {
        let mut d = 0;
        while let Some(p) = t.parent[r as usize] {
            r = p;
            d += 1;
        }
        d
    }

    #[test]
    fn post_order_visits_every_rank_once_children_first() {
        for n in 1..40 {
            for t in double_tree(n) {
                let post = t.post_order();
                let mut at = vec![None; n];
                for (i, &x) in post.iter().enumerate() {
                    assert!(at[x as usize].replace(i).is_none(), "n={n}: {x} twice");
                }
                assert_eq!(post.len(), n);
                assert_eq!(*post.last().unwrap(), t.root, "the root last");
                for (x, p) in t.parent.iter().enumerate() {
                    if let Some(p) = p {
                        assert!(at[x] < at[*p as usize], "n={n}: {x} after its parent {p}");
                    }
                }
            }
        }
    }

    #[test]
    fn trees_are_binary_spanning_and_complementary() {
        for n in 2..=64usize {
            let trees = double_tree(n);
            for t in &trees {
                assert!(t.parent[t.root as usize].is_none());
                for r in 0..n as u32 {
                    assert!(t.children[r as usize].len() <= 2, "n={n} rank {r}");
                    assert!(
                        depth(t, r) <= 2 * (usize::BITS - n.leading_zeros()),
                        "n={n}"
                    );
                    if r != t.root {
                        let p = t.parent[r as usize].unwrap();
                        assert!(t.children[p as usize].contains(&r));
                    }
                }
            }
            if n % 2 == 0 {
                // Leaves of tree 1 are inner nodes of tree 2 and the other way round.
                for r in 0..n {
                    let leaf1 = trees[0].children[r].is_empty();
                    let leaf2 = trees[1].children[r].is_empty();
                    assert!(!(leaf1 && leaf2), "n={n}: rank {r} is a leaf in both trees");
                }
            }
        }
        let t = in_order_tree(6);
        assert_eq!(t.root, 3);
        assert_eq!(t.children[3], vec![1, 5]);
        assert_eq!(t.children[1], vec![0, 2]);
        assert_eq!(t.children[5], vec![4]);
    }

    #[test]
    fn leaves_are_flow_controlled() {
        let ts = all_reduce(4, 8000, 1000, 10);
        // Two trees x four chunks x (3 up + 3 down).
        assert_eq!(ts.len(), 48);
        // Without inputs: each tree's leaves' first two chunks, one chunk-time apart.
        let free: Vec<Time> = ts
            .iter()
            .filter(|t| t.inputs.is_empty())
            .map(|t| t.delay)
            .collect();
        assert_eq!(free.iter().filter(|&&d| d == 0).count(), free.len() / 2);
        assert!(free.iter().all(|&d| d == 0 || d == 10));
        // A leaf's later chunks wait for its parent's inputs two chunks earlier: the same input set
        // as the parent's own send of that chunk.
        let trees = double_tree(4);
        for t in &ts {
            if trees
                .iter()
                .all(|tr| !tr.children[t.src as usize].is_empty())
            {
                continue;
            }
            for &i in &t.inputs {
                assert!(ts[i as usize].dst == t.dst || ts[i as usize].dst == t.src);
            }
        }
    }
}
