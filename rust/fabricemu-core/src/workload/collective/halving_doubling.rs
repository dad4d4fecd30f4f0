//! Recursive halving and doubling (Rabenseifner's all-reduce; Thakur, Rabenseifner and Gropp,
//! "Optimization of Collective Communication Operations in MPICH", 2005).
//!
//! With p = 2^m ranks and the buffer cut into p blocks:
//! - reduce-scatter by recursive halving: in step j (0..m) rank r exchanges with r XOR p/2^(j+1),
//!   sending the half of its current block range it does not keep (S/2, S/4, ..., S/p bytes); after
//!   m steps rank r holds block r reduced;
//! - all-gather by recursive doubling: in step j rank r exchanges with r XOR 2^j, sending everything
//!   it holds (S/p, 2S/p, ..., S/2 bytes).
//!
//! A step's send waits for what the rank received in the previous step. For an all-reduce over n
//! ranks that is not a power of two, the n - p extra ranks first send their whole buffer to rank
//! r - p (which waits for it before its first step) and get the result back at the end.

use super::Transfer;
use crate::config::CollectiveOp;
use crate::workload::split_even;

pub fn transfers(op: CollectiveOp, n: usize, size: u64) -> Vec<Transfer> {
    let p = 1usize << (usize::BITS - 1 - n.leading_zeros());
    let m = p.trailing_zeros() as usize;
    let extra = n - p;
    let blocks = split_even(size, p);
    let bytes = |lo: usize, hi: usize| -> u64 { blocks[lo..hi].iter().sum() };
    let mut out: Vec<Transfer> = Vec::new();
    // Per rank: the transfer it received last (its next send waits for it).
    let mut received: Vec<Option<u32>> = vec![None; n];
    let mut step = 0u32;
    let with_pre = op == CollectiveOp::AllReduce && extra > 0;
    if with_pre {
        for (e, slot) in received.iter_mut().enumerate().take(extra) {
            *slot = Some(out.len() as u32);
            out.push(Transfer {
                src: (p + e) as u32,
                dst: e as u32,
                bytes: size,
                inputs: Vec::new(),
                step,
                delay: 0,
                phase: 0,
            });
        }
        step += 1;
    }
    // One exchange step among ranks 0..p: `send(r)` is the (lo, hi) block range rank r sends to
    // `partner(r)`.
    let exchange = |out: &mut Vec<Transfer>,
                    received: &mut Vec<Option<u32>>,
                    step: u32,
                    partner: &dyn Fn(usize) -> usize,
                    send: &dyn Fn(usize) -> (usize, usize)| {
        let first = out.len() as u32;
        for (r, input) in received.iter().enumerate().take(p) {
            let (lo, hi) = send(r);
            out.push(Transfer {
                src: r as u32,
                dst: partner(r) as u32,
                bytes: bytes(lo, hi),
                inputs: input.iter().copied().collect(),
                step,
                delay: 0,
                phase: 0,
            });
        }
        for r in 0..p {
            received[partner(r)] = Some(first + r as u32);
        }
    };
    // Block range held by each rank (all of it before reduce-scatter, its own block before a
    // stand-alone all-gather).
    let mut range: Vec<(usize, usize)> = match op {
        CollectiveOp::AllGather => (0..p).map(|r| (r, r + 1)).collect(),
        _ => vec![(0, p); p],
    };
    if op != CollectiveOp::AllGather {
        for j in 0..m {
            let d = p >> (j + 1);
            let current = range.clone();
            // Keep the lower half if bit d of r is clear, send the upper half.
            let keep_lower = |r: usize| r & d == 0;
            let half = |r: usize| {
                let (lo, hi) = current[r];
                let mid = lo + (hi - lo) / 2;
                if keep_lower(r) {
                    ((lo, mid), (mid, hi))
                } else {
                    ((mid, hi), (lo, mid))
                }
            };
            exchange(&mut out, &mut received, step, &|r| r ^ d, &|r| half(r).1);
            for (r, slot) in range.iter_mut().enumerate() {
                *slot = half(r).0;
            }
            step += 1;
        }
    }
    if op != CollectiveOp::ReduceScatter {
        for j in 0..m {
            let d = 1usize << j;
            let current = range.clone();
            exchange(&mut out, &mut received, step, &|r| r ^ d, &|r| current[r]);
            for (r, slot) in range.iter_mut().enumerate() {
                let (a, b) = (current[r], current[r ^ d]);
                *slot = (a.0.min(b.0), a.1.max(b.1));
            }
            step += 1;
        }
    }
    if with_pre {
        for (e, input) in received.iter().enumerate().take(extra) {
            out.push(Transfer {
                src: e as u32,
                dst: (p + e) as u32,
                bytes: size,
                inputs: input.iter().copied().collect(),
                step,
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

    #[test]
    fn sizes_halve_then_double() {
        let ts = transfers(CollectiveOp::AllReduce, 8, 8000);
        let by_step: Vec<u64> = (0..6)
            .map(|s| ts.iter().find(|t| t.step == s).unwrap().bytes)
            .collect();
        assert_eq!(by_step, vec![4000, 2000, 1000, 1000, 2000, 4000]);
        // Far partners first: step 0 pairs r with r ^ 4.
        assert!(ts
            .iter()
            .filter(|t| t.step == 0)
            .all(|t| t.dst == t.src ^ 4));
        // Each rank's all-gather range ends as the whole buffer: 4000 + 2000 + 1000 + its block.
        for r in 0..8u32 {
            let got: u64 = ts
                .iter()
                .filter(|t| t.dst == r && t.step >= 3)
                .map(|t| t.bytes)
                .sum();
            assert_eq!(got + 1000, 8000);
        }
    }

    #[test]
    fn extra_ranks_fold_in_and_get_the_result() {
        let ts = transfers(CollectiveOp::AllReduce, 6, 6000);
        let pre: Vec<_> = ts.iter().filter(|t| t.src >= 4).collect();
        assert_eq!(pre.len(), 2);
        assert!(pre.iter().all(|t| t.bytes == 6000 && t.inputs.is_empty()));
        let post: Vec<_> = ts.iter().filter(|t| t.dst >= 4).collect();
        assert_eq!(post.len(), 2);
        assert!(post.iter().all(|t| t.bytes == 6000 && t.inputs.len() == 1));
        // Rank 0's first exchange waits for rank 4's buffer.
        let first0 = ts.iter().position(|t| t.src == 0 && t.step == 1).unwrap();
        assert_eq!(ts[first0].inputs, vec![0]);
    }
}
