//! `[trace]`: which tables a run writes besides flows.arrow, and their checks.

use serde::{Deserialize, Serialize};

use crate::config::check::{positive_time, Res};
use crate::config::values::Duration;
use crate::config::{QueuesTraceSpec, RatesTraceSpec, ScenarioError, TraceSpec};

/// `[trace]`: which tables to write besides flows.arrow (more come with later features).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceFile {
    /// Write flows that have not finished when the run stops (finish_ps null). Default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unfinished_flows: Option<bool>,
    /// queues.arrow: queue depth per (switch port, priority), sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queues: Option<QueuesTraceFile>,
    /// pfc.arrow: every PAUSE and RESUME frame.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pfc: Option<bool>,
    /// links.arrow: bytes, utilisation and paused time per link and interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub links: Option<IntervalTraceFile>,
    /// rates.arrow: DCQCN rate changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rates: Option<RatesTraceFile>,
}

/// `[output]`: how the run's tables are stored. The engine writes Arrow IPC files; the Python
/// layer (`fabricemu.run`, `fabricemu run`) converts them after the run when asked (each file
/// written under a temporary name and renamed, in the run's staging folder, before the folder is
/// moved into place), so no compression library is built into the engine.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputFile {
    /// `"arrow"` (Arrow IPC files, `<table>.arrow`; default) or `"parquet"` (`<table>.parquet`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<OutputFormat>,
    /// `"none"` (default), `"zstd"` or `"lz4"`: buffer compression of Arrow files, page
    /// compression of Parquet files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<OutputCompression>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputFormat {
    Arrow,
    Parquet,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputCompression {
    None,
    Zstd,
    Lz4,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueuesTraceFile {
    pub interval: Duration,
    /// Also sample NIC (host) ports. Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts: Option<bool>,
    /// Write empty queues too. Default false (only non-empty queues).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub empty: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntervalTraceFile {
    pub interval: Duration,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RatesTraceFile {
    /// Only these flow ids (default: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flows: Option<Vec<i64>>,
    /// At most one row per flow per interval (default: every change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<Duration>,
}

impl TraceFile {
    pub fn validate(&self) -> Res<TraceSpec> {
        let queues = match &self.queues {
            None => None,
            Some(q) => Some(QueuesTraceSpec {
                interval_ps: positive_time("trace.queues.interval", q.interval.0)?,
                hosts: q.hosts.unwrap_or(false),
                empty: q.empty.unwrap_or(false),
            }),
        };
        let links_interval_ps = match &self.links {
            None => None,
            Some(l) => Some(positive_time("trace.links.interval", l.interval.0)?),
        };
        let rates = match &self.rates {
            None => None,
            Some(r) => Some(RatesTraceSpec {
                flows: match &r.flows {
                    None => None,
                    Some(list) => Some(flow_ids(list)?),
                },
                interval_ps: r.interval.map(|d| d.0).unwrap_or(0),
            }),
        };
        Ok(TraceSpec {
            unfinished_flows: self.unfinished_flows.unwrap_or(true),
            queues,
            pfc: self.pfc.unwrap_or(false),
            links_interval_ps,
            rates,
        })
    }
}

/// `trace.rates.flows`: flow ids, sorted.
fn flow_ids(list: &[i64]) -> Res<Vec<u32>> {
    let mut out = Vec::with_capacity(list.len());
    for (i, &f) in list.iter().enumerate() {
        if !(0..=u32::MAX as i64).contains(&f) {
            return Err(ScenarioError::at(
                format!("trace.rates.flows.{i}"),
                format!("expected a flow id, found {f}"),
            ));
        }
        out.push(f as u32);
    }
    out.sort_unstable();
    Ok(out)
}
