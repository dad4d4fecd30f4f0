//! `kind = "flows"`: flows listed in the scenario, each at its own start time.

use super::{FlowInit, FlowPlan};
use crate::scenario::FlowSpec;

pub fn expand(plan: &mut FlowPlan, workload: u32, flows: &[FlowSpec]) {
    for f in flows {
        plan.flows.push(FlowInit::at(
            f.src,
            f.dst,
            f.size_bytes,
            f.start_ps,
            workload,
        ));
    }
}
