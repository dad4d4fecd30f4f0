//! `kind = "incast"`: every sender sends `size` to one receiver at once; with `rounds`, each round
//! starts `round_gap` after the previous round's last flow finished.

use super::{FlowInit, FlowPlan, Start};
use crate::units::Time;

#[allow(clippy::too_many_arguments)]
pub fn expand(
    plan: &mut FlowPlan,
    workload: u32,
    receiver: u32,
    senders: &[u32],
    size_bytes: u64,
    start_ps: Time,
    rounds: u32,
    round_gap_ps: Time,
) {
    let mut previous: Option<u32> = None;
    for round in 0..rounds {
        let barrier = (round + 1 < rounds).then(|| plan.barrier(senders.len() as u32));
        let start = match previous {
            None => Start::At(start_ps),
            Some(b) => Start::After {
                barrier: b,
                gap: round_gap_ps,
            },
        };
        for &s in senders {
            plan.flows.push(FlowInit {
                start,
                completes: barrier,
                ..FlowInit::at(s, receiver, size_bytes, 0, workload)
            });
        }
        previous = barrier;
    }
}
