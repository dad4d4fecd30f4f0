//! All-to-all as a collective: each rank's send buffer of S bytes is cut into n blocks and block j
//! goes to rank j (the nccl-tests convention; the block to itself stays local).
//!
//! - `direct`: all n(n - 1) transfers start together (the NIC shares its link among them).
//! - `pairwise`: n - 1 rounds; in round k (1..n-1) rank r sends to r + k (mod n), once its send of
//!   round k - 1 has arrived, so each rank has one transfer in flight.

use super::Transfer;
use crate::workload::split_even;

pub fn direct(n: usize, size: u64) -> Vec<Transfer> {
    let blocks = split_even(size, n);
    let mut out = Vec::with_capacity(n * (n - 1));
    for k in 1..n {
        for r in 0..n {
            let dst = (r + k) % n;
            out.push(Transfer {
                src: r as u32,
                dst: dst as u32,
                bytes: blocks[dst],
                inputs: Vec::new(),
                step: 0,
                delay: 0,
                phase: 0,
            });
        }
    }
    out
}

pub fn pairwise(n: usize, size: u64) -> Vec<Transfer> {
    let blocks = split_even(size, n);
    let mut out = Vec::with_capacity(n * (n - 1));
    for k in 1..n {
        for r in 0..n {
            let dst = (r + k) % n;
            let inputs = if k == 1 {
                Vec::new()
            } else {
                vec![((k - 2) * n + r) as u32]
            };
            out.push(Transfer {
                src: r as u32,
                dst: dst as u32,
                bytes: blocks[dst],
                inputs,
                step: (k - 1) as u32,
                delay: 0,
                phase: 0,
            });
        }
    }
    out
}
