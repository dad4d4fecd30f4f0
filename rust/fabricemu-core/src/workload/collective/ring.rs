//! Ring algorithms: rank r sends to rank r + 1 (mod n) and receives from r - 1; the buffer is cut
//! into n blocks.
//!
//! - reduce-scatter: n - 1 steps; in step k rank r sends block (r - k - 1) mod n, which it received
//!   (and reduced into) in step k - 1; after the last step rank r holds block r reduced.
//! - all-gather: n - 1 steps; in step k rank r forwards block (r - k) mod n (its own block first).
//! - all-reduce: reduce-scatter then all-gather, 2(n - 1) steps of S/n bytes. Each step starts when
//!   its input (the previous step's block from r - 1) has arrived, so on a non-blocking fabric it
//!   takes 2(n - 1) x (S/n serialised + one step's latency).

use super::Transfer;
use crate::config::CollectiveOp;
use crate::workload::split_even;

pub fn transfers(op: CollectiveOp, n: usize, size: u64) -> Vec<Transfer> {
    let blocks = split_even(size, n);
    let rs = n - 1;
    let steps = match op {
        CollectiveOp::AllReduce => 2 * rs,
        _ => rs,
    };
    let block = |r: usize, k: usize| -> u64 {
        let index = match op {
            CollectiveOp::AllGather => (r + n - k % n) % n,
            _ if k < rs => (r + 2 * n - k - 1) % n,
            _ => (r + 2 * n - (k - rs)) % n,
        };
        blocks[index]
    };
    let mut out = Vec::with_capacity(steps * n);
    for k in 0..steps {
        for r in 0..n {
            let inputs = if k == 0 {
                Vec::new()
            } else {
                // The block rank r - 1 sent in the previous step.
                vec![((k - 1) * n + (r + n - 1) % n) as u32]
            };
            out.push(Transfer {
                src: r as u32,
                dst: ((r + 1) % n) as u32,
                bytes: block(r, k),
                inputs,
                step: k as u32,
                delay: 0,
                phase: 0,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Follow the blocks: in every step a rank forwards the block it received in the previous step
    /// (the data dependency the graph encodes), and the all-reduce's all-gather phase starts with
    /// the block reduce-scatter left on that rank.
    #[test]
    fn each_rank_forwards_what_it_received() {
        let n = 5;
        let size = 5 * 7 + 3; // uneven blocks: 8, 8, 8, 7, 7
        for op in [
            CollectiveOp::AllReduce,
            CollectiveOp::ReduceScatter,
            CollectiveOp::AllGather,
        ] {
            let ts = transfers(op, n, size);
            for t in ts.iter() {
                for &i in &t.inputs {
                    let input = &ts[i as usize];
                    assert_eq!(input.dst, t.src);
                    assert_eq!(input.step + 1, t.step);
                    assert_eq!(input.bytes, t.bytes, "the same block moves on");
                }
            }
        }
    }
}
