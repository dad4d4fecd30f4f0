//! `kind = "poisson"`: every sender starts flows as a Poisson process, sizes drawn from a CDF, at a
//! target load of its host link.
//!
//! Load is offered payload: a sender at load L on a link of rate R starts flows at the rate
//! L x R / (8 x mean flow size), so its payload bits average L x R per second (headers come on top:
//! with 62 B per 4 KiB packet, about 1.5 % more on the wire; the run reports both). This is the
//! definition of the HPCC and DCQCN evaluations. Destinations are drawn uniformly among the other
//! hosts of the group (or among a sender's configured pairs), so receivers see the same load on
//! average. Arrivals are generated until the end of the window (`duration`, or the scenario's stop
//! time) or until `count` flows, whichever comes first; flow ids follow arrival time.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::{FlowInit, FlowPlan, PoissonReport};
use crate::rng::Rng;
use crate::scenario::{PoissonPeers, PoissonSpec};
use crate::units::PS_PER_SEC;

/// Mean time between two flows of one sender, in ps.
pub fn mean_gap_ps(spec: &PoissonSpec) -> f64 {
    spec.cdf.mean_bytes() * 8.0 * PS_PER_SEC as f64 / (spec.load * spec.host_rate_bps as f64)
}

/// An exponential draw with the given mean.
fn exponential(rng: &mut Rng, mean: f64) -> f64 {
    -(1.0 - rng.unit()).ln() * mean
}

pub fn expand(
    plan: &mut FlowPlan,
    workload: u32,
    spec: &PoissonSpec,
    rng: &mut Rng,
) -> PoissonReport {
    let mean_gap = mean_gap_ps(spec);
    let n = spec.senders.len();
    let end = spec.end_ps.unwrap_or(u64::MAX);
    let limit = spec.count.unwrap_or(u64::MAX);
    // Per sender: time since `start` of its next arrival (exact sum of the gaps), and a heap of
    // (arrival in ps, sender) to merge the senders in time order.
    let mut clock: Vec<f64> = Vec::with_capacity(n);
    let mut heap: BinaryHeap<Reverse<(u64, u32)>> = BinaryHeap::with_capacity(n);
    let at = |offset: f64| -> u64 {
        let t = offset.round();
        if t >= (u64::MAX - spec.start_ps) as f64 {
            u64::MAX
        } else {
            spec.start_ps + t as u64
        }
    };
    for s in 0..n {
        let first = exponential(rng, mean_gap);
        clock.push(first);
        heap.push(Reverse((at(first), s as u32)));
    }
    let mut made = 0u64;
    let mut payload = 0u64;
    let mut wire = 0u64;
    let mut last = spec.start_ps;
    while let Some(Reverse((t, s))) = heap.pop() {
        if t >= end || made >= limit {
            break;
        }
        if made % 4096 == 4095 && crate::budget::cancelled() {
            break;
        }
        let si = s as usize;
        let src = spec.senders[si];
        let dst = match &spec.peers {
            PoissonPeers::Among(hosts) => {
                // Uniform among the others: skip the sender's own position.
                let k = rng.below(hosts.len() as u64 - 1) as usize;
                hosts[if k >= si { k + 1 } else { k }]
            }
            PoissonPeers::Pairs(dsts) => {
                let list = &dsts[si];
                list[rng.below(list.len() as u64) as usize]
            }
        };
        let size = spec.cdf.sample(rng.unit());
        plan.flows.push(FlowInit::at(src, dst, size, t, workload));
        made += 1;
        payload = payload.saturating_add(size);
        let packets = size.div_ceil(spec.mtu_bytes);
        wire = wire.saturating_add(size.saturating_add(packets.saturating_mul(spec.header_bytes)));
        last = t;
        clock[si] += exponential(rng, mean_gap);
        heap.push(Reverse((at(clock[si]), s)));
    }
    let window_ps = match spec.end_ps {
        Some(e) if made < limit => e - spec.start_ps,
        _ => last - spec.start_ps,
    };
    PoissonReport {
        target_load: spec.load,
        senders: n as u32,
        host_rate_bps: spec.host_rate_bps,
        window_ps,
        payload_bytes: payload,
        wire_bytes: wire,
        mean_flow_bytes: spec.cdf.mean_bytes(),
    }
}
