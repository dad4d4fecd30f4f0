//! `kind = "all_to_all"`: every host of the group sends `size` to every other. With `stagger`, the
//! flows go out in n - 1 shifted rounds: in round k (1..n-1) host i sends to host i + k (mod n), at
//! `start + (k - 1) x stagger`, so each host sends to and receives from one peer per round; without
//! it, all n(n - 1) flows start at once.

use serde::{Deserialize, Serialize};

use super::config::{start_of, Context};
use crate::config::check::Res;
use crate::config::hosts::Hosts;
use crate::config::values::{Duration, Size};
use crate::config::WorkloadSpec;

use super::{FlowInit, FlowPlan};
use crate::ids::NodeId;
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
            plan.flows.push(FlowInit::at(
                NodeId::new(src),
                NodeId::new(dst),
                size_bytes,
                start,
                workload,
            ));
        }
    }
}

/// `kind = "all_to_all"`: every host sends to every other.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllToAllFile {
    /// Optional label carried into flows.arrow (defaults to `kind`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Host ids and selectors (`"server:3"`, `"rack:1"`, `"rail:2"`); default: every host.
    pub hosts: Option<Hosts>,
    /// Flows to the k-th next host start (k - 1) x stagger after `start`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stagger: Option<Duration>,
}

impl AllToAllFile {
    /// With every default written out (the hosts as written; absent: every host).
    pub fn normalised(&self, name: Option<String>, spec: &WorkloadSpec) -> AllToAllFile {
        let WorkloadSpec::AllToAll {
            size_bytes,
            start_ps,
            stagger_ps,
            ..
        } = *spec
        else {
            unreachable!("an all-to-all's spec")
        };
        AllToAllFile {
            name,
            start: Some(Duration(start_ps)),
            size: Some(Size(size_bytes)),
            hosts: self.hosts.clone(),
            stagger: Some(Duration(stagger_ps)),
        }
    }

    pub fn validate(&self, ctx: &Context) -> Res<WorkloadSpec> {
        let hosts = ctx.hosts_or_all("hosts", self.hosts.as_ref(), "an all-to-all")?;
        Ok(WorkloadSpec::AllToAll {
            hosts,
            size_bytes: ctx.size(self.size, "a flow size like \"1MB\"")?,
            start_ps: start_of(self.start),
            stagger_ps: self.stagger.map(|d| d.0).unwrap_or(0),
        })
    }
}
