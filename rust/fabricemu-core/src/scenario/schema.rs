//! The scenario file as written by users: the top-level table, and each section's struct from the
//! domain that owns it. Every struct is `deny_unknown_fields`; string choices are enums; tables
//! whose `kind` selects their keys (`[topology]`, `[[workload]]`) are read kind by kind
//! ([`super::kinds`]), so every error keeps its key path and position.

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize, Serializer};

pub use crate::cc::config::CcName;
pub use crate::cc::dcqcn_config::{DcqcnFile, DcqcnVariant};
pub use crate::cc::dctcp_config::DctcpFile;
pub use crate::cc::hpcc_config::HpccFile;
pub use crate::cc::swift_config::SwiftFile;
use crate::config::spec::StopAt;
use crate::config::values::{bounded_time, Duration};
pub use crate::control::config::ControlFile;
pub use crate::routing::config::RoutingFile;
pub use crate::switch::config::{EcnFile, PfcFile, SwitchFile};
pub use crate::topology::cluster::config::{ClusterFile, NicAttachFile, ScaleUpFile};
pub use crate::topology::config::TopologyFile;
pub use crate::topology::faults::{FailureProcessFile, FaultFile, NodeRef};
pub use crate::topology::ocs::{CircuitsFile, OcsFile, ReconfigureFile};
pub use crate::trace::config::{
    IntervalTraceFile, OutputFile, QueuesTraceFile, RatesTraceFile, TraceFile,
};
pub use crate::transport::config::{NicFile, TransportFile};
pub use crate::workload::config::WorkloadFile;
pub use crate::workload::explicit::FlowEntry;
pub use crate::workload::incast::Senders;

fn default_seed() -> u64 {
    1
}

/// `stop`: `"all_flows_done"` or a duration, written back exactly as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stop {
    pub text: String,
    pub at: StopAt,
}

impl Serialize for Stop {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Stop {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        let at = if text == "all_flows_done" {
            StopAt::AllFlowsDone
        } else {
            let t = crate::units::parse_time(&text).map_err(|_| {
                de::Error::custom(format!(
                    "expected \"all_flows_done\" or a duration like \"5ms\", found {text:?}"
                ))
            })?;
            StopAt::Time(bounded_time(t, &text).map_err(de::Error::custom)?)
        };
        Ok(Stop { text, at })
    }
}

/// The whole scenario file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Threads of one run (the parallel engine, one fabric partition each; default 1). Outputs
    /// are byte-identical for any number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<i64>,
    /// `"all_flows_done"` (default) or a duration such as `"5ms"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<Stop>,
    /// Start of the measurement window of synthetic workloads, `[warmup, stop)` (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<Duration>,
    pub topology: TopologyFile,
    /// `[cluster]`: GPU servers on the topology (its host slots become NIC ports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterFile>,
    /// `[ocs]`: an optical circuit switch layer between electrical switches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ocs: Option<OcsFile>,
    #[serde(default)]
    pub switch: SwitchFile,
    #[serde(default)]
    pub routing: RoutingFile,
    /// Link failures and degradations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fault: Vec<FaultFile>,
    /// Failures drawn from MTBF / MTTR per component class.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failure_process: Vec<FailureProcessFile>,
    #[serde(default)]
    pub transport: TransportFile,
    /// `[nic]`: how a NIC arbitrates among its active flows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic: Option<NicFile>,
    #[serde(default)]
    pub workload: Vec<WorkloadFile>,
    #[serde(default)]
    pub trace: TraceFile,
    /// `[output]`: the format and compression of the run's tables (applied by the Python layer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<OutputFile>,
    /// `[control]`: the live control loop (interval, built-in policy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control: Option<ControlFile>,
}
