//! `[trace]`: which tables a run writes besides flows.arrow, and their checks.

use serde::{Deserialize, Serialize};

use crate::config::check::{positive_time, Res};
use crate::config::values::Duration;
use crate::config::{
    NodeName, PacketsTraceSpec, PortName, QueuesTraceSpec, RatesTraceSpec, ScenarioError, TraceSpec,
};
use crate::topology::faults::{node_name, NodeRef};

/// `trace.packets.max_rows` when not given: about 40 MB of packets.arrow.
pub const DEFAULT_PACKET_ROWS: u64 = 1_000_000;
/// Whether latency.arrow (and the one-way latency summary) is on when `trace.latency` is not given.
pub const LATENCY_DEFAULT: bool = false;

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
    /// packets.arrow: per-packet events at switch and NIC queues (off by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packets: Option<PacketsTraceFile>,
    /// latency.arrow: a histogram of one-way packet latency per workload, and its summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<bool>,
}

/// A port in `trace.packets.ports`: its id or `"node/index"` (`"leaf:3/2"`, `"17/0"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PortRef {
    Id(i64),
    Name(String),
}

/// `[trace] packets = { flows, nodes, ports, start, end, max_rows }`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PacketsTraceFile {
    /// Only these flow ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flows: Option<Vec<i64>>,
    /// Only events at these nodes: ids or names like "leaf:3".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Vec<NodeRef>>,
    /// Only events at these egress ports: ids or "node/index" like "leaf:3/2".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<Vec<PortRef>>,
    /// Only events from this time on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<Duration>,
    /// Only events before this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<Duration>,
    /// At most this many rows (default 1000000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rows: Option<i64>,
}

fn port_name(path: String, p: &PortRef) -> Res<PortName> {
    match p {
        PortRef::Id(id) if (0..=u32::MAX as i64).contains(id) => Ok(PortName::Id(*id as u32)),
        PortRef::Id(id) => Err(ScenarioError::at(
            path,
            format!("expected a port id, found {id}"),
        )),
        PortRef::Name(s) => {
            let bad = || {
                ScenarioError::at(
                    path.clone(),
                    format!("expected a port id or \"node/index\" like \"leaf:3/2\", found {s:?}"),
                )
            };
            let (node, index) = s.rsplit_once('/').ok_or_else(bad)?;
            let index: u32 = index.trim().parse().map_err(|_| bad())?;
            let node = node.trim();
            let node = match node.parse::<i64>() {
                Ok(id) => NodeRef::Id(id),
                Err(_) => NodeRef::Name(node.to_string()),
            };
            let node: NodeName = node_name(path.clone(), &node)?;
            Ok(PortName::OfNode { node, index })
        }
    }
}

impl PacketsTraceFile {
    pub fn validate(&self) -> Res<PacketsTraceSpec> {
        let flows = match &self.flows {
            None => None,
            Some(list) => Some(flow_ids("trace.packets.flows", list)?),
        };
        let nodes = match &self.nodes {
            None => None,
            Some(list) => Some(
                list.iter()
                    .enumerate()
                    .map(|(i, n)| node_name(format!("trace.packets.nodes.{i}"), n))
                    .collect::<Res<Vec<_>>>()?,
            ),
        };
        let ports = match &self.ports {
            None => None,
            Some(list) => Some(
                list.iter()
                    .enumerate()
                    .map(|(i, p)| port_name(format!("trace.packets.ports.{i}"), p))
                    .collect::<Res<Vec<_>>>()?,
            ),
        };
        let start_ps = self.start.map(|d| d.0).unwrap_or(0);
        let end_ps = self.end.map(|d| d.0);
        if let Some(end) = end_ps {
            if end <= start_ps {
                return Err(ScenarioError::at(
                    "trace.packets.end",
                    "must be after `start`",
                ));
            }
        }
        let max_rows = match self.max_rows {
            None => DEFAULT_PACKET_ROWS,
            Some(n) if n > 0 => n as u64,
            Some(n) => {
                return Err(ScenarioError::at(
                    "trace.packets.max_rows",
                    format!("expected a positive number of rows, found {n}"),
                ))
            }
        };
        Ok(PacketsTraceSpec {
            flows,
            nodes,
            ports,
            start_ps,
            end_ps,
            max_rows,
        })
    }
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
                    Some(list) => Some(flow_ids("trace.rates.flows", list)?),
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
            packets: match &self.packets {
                None => None,
                Some(p) => Some(p.validate()?),
            },
            latency: self.latency.unwrap_or(LATENCY_DEFAULT),
        })
    }
}

impl TraceFile {
    /// `[trace]` with every default written out (see `scenario::normalise`): the switches from
    /// the validated `spec`; a table that is absent is a table not written (it has no `enabled`
    /// key), and the filters keep the user's node and port names.
    pub fn normalised(&self, spec: &TraceSpec) -> TraceFile {
        let flows = |f: &Option<Vec<u32>>| {
            f.as_ref()
                .map(|l| l.iter().map(|&x| x as i64).collect::<Vec<_>>())
        };
        TraceFile {
            unfinished_flows: Some(spec.unfinished_flows),
            queues: spec.queues.map(|q| QueuesTraceFile {
                interval: Duration(q.interval_ps),
                hosts: Some(q.hosts),
                empty: Some(q.empty),
            }),
            pfc: Some(spec.pfc),
            links: spec.links_interval_ps.map(|i| IntervalTraceFile {
                interval: Duration(i),
            }),
            rates: spec.rates.as_ref().map(|r| RatesTraceFile {
                flows: flows(&r.flows),
                interval: Some(Duration(r.interval_ps)),
            }),
            packets: spec.packets.as_ref().map(|p| PacketsTraceFile {
                flows: flows(&p.flows),
                nodes: self.packets.as_ref().and_then(|f| f.nodes.clone()),
                ports: self.packets.as_ref().and_then(|f| f.ports.clone()),
                start: Some(Duration(p.start_ps)),
                end: p.end_ps.map(Duration),
                max_rows: Some(p.max_rows as i64),
            }),
            latency: Some(spec.latency),
        }
    }
}

impl OutputFile {
    /// `[output]` with every default written out.
    pub fn normalised(this: Option<&OutputFile>) -> OutputFile {
        let this = this.cloned().unwrap_or_default();
        OutputFile {
            format: Some(this.format.unwrap_or(OutputFormat::Arrow)),
            compression: Some(this.compression.unwrap_or(OutputCompression::None)),
        }
    }
}

/// Keys of `[trace]` whose absence from a normalised scenario is itself the setting.
pub const ABSENT_MEANS: &[(&str, &str)] = &[
    ("trace.queues", "queues.arrow is not written"),
    ("trace.links", "links.arrow is not written"),
    ("trace.rates", "rates.arrow is not written"),
    ("trace.packets", "packets.arrow is not written"),
    ("trace.rates.flows", "every flow"),
    ("trace.packets.flows", "every flow"),
    ("trace.packets.nodes", "every node"),
    ("trace.packets.ports", "every port"),
    ("trace.packets.end", "until the run stops"),
];

/// `trace.rates.flows`, `trace.packets.flows` (at `path`): flow ids, sorted.
fn flow_ids(path: &str, list: &[i64]) -> Res<Vec<u32>> {
    let mut out = Vec::with_capacity(list.len());
    for (i, &f) in list.iter().enumerate() {
        if !(0..=u32::MAX as i64).contains(&f) {
            return Err(ScenarioError::at(
                format!("{path}.{i}"),
                format!("expected a flow id, found {f}"),
            ));
        }
        out.push(f as u32);
    }
    out.sort_unstable();
    Ok(out)
}
