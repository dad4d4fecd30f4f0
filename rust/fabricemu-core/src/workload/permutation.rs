//! `kind = "permutation"`: each host sends `size` to another, a seeded derangement of the hosts.

use super::{FlowInit, FlowPlan};
use crate::rng::Rng;
use crate::units::Time;

pub fn expand(
    plan: &mut FlowPlan,
    workload: u32,
    hosts: &[u32],
    size_bytes: u64,
    start_ps: Time,
    rng: &mut Rng,
) {
    let dsts = derangement(hosts, rng);
    for (&src, &dst) in hosts.iter().zip(&dsts) {
        plan.flows
            .push(FlowInit::at(src, dst, size_bytes, start_ps, workload));
    }
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
