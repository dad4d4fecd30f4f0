//! `kind = "flows"`: flows listed in the scenario, each at its own start time.

use serde::{Deserialize, Serialize};

use super::config::{start_of, Context};
use crate::config::check::{host_id, Res};
use crate::config::values::{Duration, Size};
use crate::config::{ScenarioError, WorkloadSpec};

use super::{FlowInit, FlowPlan};
use crate::config::FlowSpec;
use crate::ids::NodeId;

pub fn expand(plan: &mut FlowPlan, workload: u32, flows: &[FlowSpec]) {
    for f in flows {
        plan.flows.push(FlowInit::at(
            NodeId::new(f.src),
            NodeId::new(f.dst),
            f.size_bytes,
            f.start_ps,
            workload,
        ));
    }
}

/// One explicit flow of a `kind = "flows"` workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowEntry {
    pub src: i64,
    pub dst: i64,
    pub size: Size,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<Duration>,
}

/// `kind = "flows"`: a list of flows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowsFile {
    /// Optional label carried into flows.arrow (defaults to `kind`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flows: Option<Vec<FlowEntry>>,
}

impl FlowsFile {
    /// With every default written out: the name, the start and each flow's start.
    pub fn normalised(&self, name: Option<String>, flows: &[FlowSpec]) -> FlowsFile {
        FlowsFile {
            name,
            start: Some(Duration(start_of(self.start))),
            flows: self.flows.as_ref().map(|entries| {
                entries
                    .iter()
                    .zip(flows)
                    .map(|(e, f)| FlowEntry {
                        start: Some(Duration(f.start_ps)),
                        ..e.clone()
                    })
                    .collect()
            }),
        }
    }

    pub fn validate(&self, ctx: &Context) -> Res<WorkloadSpec> {
        let entries = self.flows.as_ref().ok_or_else(|| {
            ScenarioError::at(
                ctx.path("flows"),
                "missing: expected a list of {src, dst, size, start}",
            )
        })?;
        let start_ps = start_of(self.start);
        let mut flows = Vec::with_capacity(entries.len());
        for (j, f) in entries.iter().enumerate() {
            let fp = |key: &str| ctx.path(&format!("flows.{j}.{key}"));
            let src = host_id(fp("src"), f.src, ctx.n_hosts)?;
            let dst = host_id(fp("dst"), f.dst, ctx.n_hosts)?;
            if src == dst {
                return Err(ScenarioError::at(
                    fp("dst"),
                    "a flow's dst must differ from its src",
                ));
            }
            if f.size.0 == 0 {
                return Err(ScenarioError::at(fp("size"), "expected a positive size"));
            }
            flows.push(FlowSpec {
                src,
                dst,
                size_bytes: f.size.0,
                start_ps: f.start.map(|d| d.0).unwrap_or(start_ps),
            });
        }
        Ok(WorkloadSpec::Flows { flows })
    }
}
