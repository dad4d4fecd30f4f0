//! `kind = "permutation"`: each host sends `size` to another, a seeded derangement of the hosts.

use serde::{Deserialize, Serialize};

use super::config::{start_of, Context};
use crate::config::check::Res;
use crate::config::hosts::Hosts;
use crate::config::values::{Duration, Size};
use crate::config::WorkloadSpec;

use super::{FlowInit, FlowPlan};
use crate::ids::NodeId;
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
        plan.flows.push(FlowInit::at(
            NodeId::new(src),
            NodeId::new(dst),
            size_bytes,
            start_ps,
            workload,
        ));
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

/// `kind = "permutation"`: every host sends to another, a seeded derangement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PermutationFile {
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
}

impl PermutationFile {
    /// With every default written out (the hosts as written; absent: every host).
    pub fn normalised(&self, name: Option<String>, spec: &WorkloadSpec) -> PermutationFile {
        let WorkloadSpec::Permutation {
            size_bytes,
            start_ps,
            ..
        } = *spec
        else {
            unreachable!("a permutation's spec")
        };
        PermutationFile {
            name,
            start: Some(Duration(start_ps)),
            size: Some(Size(size_bytes)),
            hosts: self.hosts.clone(),
        }
    }

    pub fn validate(&self, ctx: &Context) -> Res<WorkloadSpec> {
        let hosts = ctx.hosts_or_all("hosts", self.hosts.as_ref(), "a permutation")?;
        Ok(WorkloadSpec::Permutation {
            hosts,
            size_bytes: ctx.size(self.size, "a flow size like \"1MB\"")?,
            start_ps: start_of(self.start),
        })
    }
}
