//! `kind = "all_to_all"`: every host of the group sends `size` to every other. With `stagger`, the
//! flows go out in n - 1 shifted rounds: in round k (1..n-1) host i sends to host i + k (mod n), at
//! `start + (k - 1) x stagger`, so each host sends to and receives from one peer per round; without
//! it, all n(n - 1) flows start at once.

use super::{FlowInit, FlowPlan};
use crate::units::Time;

pub fn expand(
    plan: &mut FlowPlan,
    workload: u32,
    hosts: &[u32],
    size_bytes: u64,
    start_ps: Time,
    stagger_ps: Time,
) {
    let n = hosts.len();
    for k in 1..n {
        let start = start_ps.saturating_add(stagger_ps.saturating_mul(k as u64 - 1));
        for (i, &src) in hosts.iter().enumerate() {
            let dst = hosts[(i + k) % n];
            plan.flows
                .push(FlowInit::at(src, dst, size_bytes, start, workload));
        }
    }
}
