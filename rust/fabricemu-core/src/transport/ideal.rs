//! The ideal flow completion time: the flow alone on its path, sent back to back at line rate,
//! store-and-forward at every hop.
//!
//! With hops i = 1..h (service time S_i of a full packet, S'_i of the last, possibly shorter, one;
//! delay d_i after hop i: propagation plus the next switch's latency), packet j leaves hop i at
//! E(i,j) = max(E(i-1,j) + d_(i-1), E(i,j-1)) + S_i(j). Unrolled, E(h,n) is the heaviest monotone
//! path through the (hop, packet) grid; since packets 1..n-1 are equal it is
//!   FCT = sum_i d_i + max over i' of [ sum_(i<=i') S_i + (n-2) max_(i<=i') S_i + sum_(i>=i') S'_i ]
//! for n >= 2, and sum_i (S'_i + d_i) for n = 1.

use crate::units::{serialisation_ps, Rate, Time};

/// One hop of a path: link rate and the delay from the end of serialisation to the next node's
/// reception of the packet (propagation plus the next switch's latency).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hop {
    pub rate_bps: Rate,
    pub delay_ps: Time,
}

/// Ideal FCT of `n` packets (all `full_wire` bytes but the last, `last_wire` bytes) over `hops`.
pub fn ideal_fct(hops: &[Hop], n: u32, full_wire: u64, last_wire: u64) -> Time {
    let delays: Time = hops.iter().map(|h| h.delay_ps).sum();
    let last: Vec<Time> = hops
        .iter()
        .map(|h| serialisation_ps(last_wire, h.rate_bps))
        .collect();
    if n <= 1 {
        return delays + last.iter().sum::<Time>();
    }
    let mut best = 0;
    let mut prefix = 0;
    let mut prefix_max = 0;
    let mut suffix_last: Time = last.iter().sum();
    for (i, h) in hops.iter().enumerate() {
        let s = serialisation_ps(full_wire, h.rate_bps);
        prefix += s;
        prefix_max = prefix_max.max(s);
        let candidate = prefix + (n as Time - 2) * prefix_max + suffix_last;
        best = best.max(candidate);
        suffix_last -= last[i];
    }
    delays + best
}

/// The same by the recurrence, packet by packet (reference for tests).
pub fn ideal_fct_by_recurrence(hops: &[Hop], n: u32, full_wire: u64, last_wire: u64) -> Time {
    let mut end_prev_hop: Vec<Time> = vec![0; n as usize]; // arrival times at the current hop
    for h in hops {
        let mut free_at = 0;
        for (j, t) in end_prev_hop.iter_mut().enumerate() {
            let wire = if j + 1 == n as usize {
                last_wire
            } else {
                full_wire
            };
            let start = (*t).max(free_at);
            free_at = start + serialisation_ps(wire, h.rate_bps);
            *t = free_at + h.delay_ps;
        }
    }
    end_prev_hop[n as usize - 1]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{stream, Purpose};

    #[test]
    fn closed_form_matches_recurrence() {
        let mut r = stream(3, Purpose::Workload, 9);
        let rates = [
            10_000_000_000u64,
            25_000_000_000,
            40_000_000_000,
            100_000_000_000,
            400_000_000_000,
        ];
        for _ in 0..2000 {
            let h = 1 + r.below(7) as usize;
            let hops: Vec<Hop> = (0..h)
                .map(|_| Hop {
                    rate_bps: rates[r.below(5) as usize],
                    delay_ps: r.below(2_000_000),
                })
                .collect();
            let n = 1 + r.below(40) as u32;
            let full = 64 + r.below(9000);
            let last = 1 + r.below(full);
            assert_eq!(
                ideal_fct(&hops, n, full, last),
                ideal_fct_by_recurrence(&hops, n, full, last),
                "{hops:?} n={n} full={full} last={last}"
            );
        }
    }
}
