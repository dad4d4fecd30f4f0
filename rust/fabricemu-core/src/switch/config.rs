//! `[switch]`: buffers, scheduler, ECN marking and PFC, and their checks, producing a [`SwitchSpec`].

use crate::ids::{IdVec, NodeId};
use serde::{Deserialize, Serialize};

use crate::config::check::{fraction, positive_size, priority_mask, Res};
use crate::config::values::{Duration, Size};
use crate::config::{
    EcnSpec, PfcSpec, PfcThreshold, ScenarioError, Scheduler, SwitchSpec, TransportSpec,
};

/// `[switch]`: buffers and forwarding latency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchFile {
    /// Packet memory of one switch, shared by all its egress queues.
    #[serde(default = "SwitchFile::default_buffer")]
    pub buffer: Size,
    /// Optional cap on one egress port's queue (drop-tail beyond it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_buffer: Option<Size>,
    /// Fixed forwarding latency added after a packet is fully received.
    #[serde(default = "SwitchFile::default_latency")]
    pub latency: Duration,
    /// Dynamic threshold of lossy queues: a queue may grow to alpha x the free shared buffer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alpha: Option<f64>,
    /// Static cap on one (port, priority) queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_limit: Option<Size>,
    /// `strict` priority (default) or `dwrr` (deficit weighted round robin by `weights`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler: Option<SchedulerName>,
    /// DWRR weights of the eight priorities (control frames still go first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights: Option<Vec<i64>>,
    /// RED/ECN marking on egress queue depth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecn: Option<EcnFile>,
    /// Priority flow control (lossless classes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pfc: Option<PfcFile>,
    /// Packet trimming (Ultra Ethernet; see `switch::trim`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trimming: Option<crate::switch::trim::TrimmingFile>,
    /// Reduction engines for in-network collectives (see `switch::reduction`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reduction: Option<crate::switch::reduction::ReductionFile>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SchedulerName {
    Strict,
    Dwrr,
}

/// Where RED decides to mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MarkAt {
    Dequeue,
    Enqueue,
}

/// `[switch.ecn]`: RED marking; defaults are the DCQCN paper's (Kmin 5 KB, Kmax 200 KB, Pmax 1 %).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EcnFile {
    #[serde(default = "default_enabled")]
    pub enabled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kmin: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kmax: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pmax: Option<f64>,
    /// `dequeue` (default, Broadcom-style) or `enqueue`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mark: Option<MarkAt>,
    /// Priorities that are marked (default: the data priority).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priorities: Option<Vec<i64>>,
}

fn default_enabled() -> bool {
    true
}

/// `[switch.pfc]`: per (ingress port, priority) pause thresholds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PfcFile {
    #[serde(default = "default_enabled")]
    pub enabled: bool,
    /// Lossless priorities (default: the data priority).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priorities: Option<Vec<i64>>,
    /// Static XOFF threshold per (ingress port, priority); if unset, the dynamic one applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xoff: Option<Size>,
    /// Dynamic XOFF: pause when an ingress queue exceeds beta x the free shared buffer. Default 1:
    /// the DCQCN paper's beta = 8 shared by 8 priorities (HPCC's MMU uses 1/8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beta: Option<f64>,
    /// RESUME when the ingress queue falls this far below XOFF (default two packets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xon_offset: Option<Size>,
    /// Headroom reserved per (ingress port, lossless priority); default sized from link rate and
    /// delay: a round trip of bytes plus two packets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headroom: Option<Size>,
}

impl SwitchFile {
    fn default_buffer() -> Size {
        Size(32 << 20)
    }
    fn default_latency() -> Duration {
        Duration(0)
    }

    /// The switch settings for packets of transport `t`.
    pub fn validate(&self, t: &TransportSpec) -> Res<SwitchSpec> {
        positive_size("switch.buffer", self.buffer.0)?;
        let packet = t.mtu_bytes + t.header_bytes;
        if self.buffer.0 < packet {
            return Err(ScenarioError::at(
                "switch.buffer",
                format!(
                    "a switch buffer of {} B cannot hold one packet of {packet} B (transport.mtu + \
                     transport.header)",
                    self.buffer.0
                ),
            ));
        }
        if let Some(b) = self.port_buffer {
            positive_size("switch.port_buffer", b.0)?;
        }
        if let Some(b) = self.queue_limit {
            positive_size("switch.queue_limit", b.0)?;
        }
        if let Some(a) = self.alpha {
            fraction("switch.alpha", a, 1.0 / 1024.0, 1024.0)?;
        }
        let ecn = match &self.ecn {
            Some(e) if e.enabled => Some(e.validate(t)?),
            _ => None,
        };
        // DCTCP's `transport.dctcp.k`: step marking at K (see cc/dctcp_config.rs).
        let ecn = match t.cc {
            crate::config::CongestionControl::Dctcp(d) => match d.k_bytes {
                Some(k) => {
                    let base = match (&self.ecn, ecn) {
                        (_, Some(e)) => e,
                        (Some(e), None) if !e.enabled => {
                            return Err(ScenarioError::at(
                                "switch.ecn.enabled",
                                "transport.dctcp.k needs ECN marking",
                            ))
                        }
                        _ => EcnFile::default_for_dctcp().validate(t)?,
                    };
                    Some(EcnSpec {
                        kmin_bytes: k,
                        kmax_bytes: k,
                        pmax: 1.0,
                        ..base
                    })
                }
                None => ecn,
            },
            _ => ecn,
        };
        if matches!(t.cc, crate::config::CongestionControl::Nscc(_)) && ecn.is_none() {
            return Err(ScenarioError::at(
                "switch.ecn",
                "transport.cc = \"nscc\" decreases its window on ECN marks: enable ECN marking \
                 ([switch.ecn], e.g. kmin and kmax at 20 % and 80 % of the bandwidth-delay product)",
            ));
        }
        let pfc = match &self.pfc {
            Some(p) if p.enabled => Some(p.validate(t)?),
            _ => None,
        };
        let trimming = crate::switch::trim::TrimmingFile::validate(self.trimming.as_ref(), t)?;
        if let (Some(trim), Some(pfc)) = (&trimming, &pfc) {
            if pfc.priorities & (1 << t.data_priority) != 0 {
                return Err(ScenarioError::at(
                    "switch.trimming",
                    "the data priority is lossless (switch.pfc): PFC keeps its packets from ever \
                     being dropped, so none would be trimmed; disable one of the two",
                ));
            }
            if pfc.priorities & (1 << trim.priority) != 0 {
                return Err(ScenarioError::at(
                    "switch.trimming.priority",
                    "trimmed headers cannot go in a lossless class (switch.pfc.priorities)",
                ));
            }
        }
        if trimming.is_some()
            && self
                .reduction
                .as_ref()
                .is_some_and(|r| r.enabled != Some(false))
        {
            return Err(ScenarioError::at(
                "switch.reduction",
                "in-network reduction with packet trimming is not modelled (a trimmed operand \
                 carries no data to combine): disable one of the two",
            ));
        }
        Ok(SwitchSpec {
            buffer_bytes: self.buffer.0,
            port_buffer_bytes: self.port_buffer.map(|b| b.0),
            latency_ps: self.latency.0,
            alpha: self.alpha,
            queue_limit_bytes: self.queue_limit.map(|b| b.0),
            scheduler: self.scheduler()?,
            ecn,
            pfc,
            trimming,
            reduction: crate::switch::reduction::ReductionFile::validate(
                self.reduction.as_ref(),
                t,
            )?,
        })
    }

    fn scheduler(&self) -> Res<Scheduler> {
        match self.scheduler {
            None | Some(SchedulerName::Strict) => {
                if self.weights.is_some() {
                    return Err(ScenarioError::at(
                        "switch.weights",
                        "weights need scheduler = \"dwrr\"",
                    ));
                }
                Ok(Scheduler::Strict)
            }
            Some(SchedulerName::Dwrr) => {
                let w = self.weights.as_ref().ok_or_else(|| {
                    ScenarioError::at(
                        "switch.weights",
                        "missing: expected eight weights, one per priority",
                    )
                })?;
                if w.len() != 8 {
                    return Err(ScenarioError::at(
                        "switch.weights",
                        format!("expected eight weights, found {}", w.len()),
                    ));
                }
                let mut weights = [0u32; 8];
                for (i, &x) in w.iter().enumerate() {
                    if !(1..=1_000_000).contains(&x) {
                        return Err(ScenarioError::at(
                            format!("switch.weights.{i}"),
                            format!("expected a weight in 1..=1000000, found {x}"),
                        ));
                    }
                    weights[i] = x as u32;
                }
                Ok(Scheduler::Dwrr(weights))
            }
        }
    }
}

impl SwitchFile {
    /// The table with every default written out (see `scenario::normalise`): each value from the
    /// validated `spec` (what the run uses), in canonical units. `t` is the validated transport
    /// (the default priorities). Tables that are off are written `{ enabled = false }`; keys that
    /// do not apply (weights without DWRR, thresholds of a disabled table) stay absent, and so do
    /// the keys whose absence is itself the setting (see `ABSENT_MEANS`).
    pub fn normalised(&self, spec: &SwitchSpec, t: &TransportSpec) -> SwitchFile {
        let data_priority = || Some(vec![t.data_priority as i64]);
        let ecn = match &spec.ecn {
            None => EcnFile {
                enabled: false,
                ..EcnFile::default_for_dctcp()
            },
            Some(e) => EcnFile {
                enabled: true,
                kmin: Some(Size(e.kmin_bytes)),
                kmax: Some(Size(e.kmax_bytes)),
                pmax: Some(e.pmax),
                mark: Some(if e.on_dequeue {
                    MarkAt::Dequeue
                } else {
                    MarkAt::Enqueue
                }),
                // As written (hop classes widen the spec's set when the scenario is validated).
                priorities: self
                    .ecn
                    .as_ref()
                    .and_then(|f| f.priorities.clone())
                    .or_else(data_priority),
            },
        };
        let pfc = match &spec.pfc {
            None => PfcFile {
                enabled: false,
                priorities: None,
                xoff: None,
                beta: None,
                xon_offset: None,
                headroom: None,
            },
            Some(p) => PfcFile {
                enabled: true,
                priorities: self
                    .pfc
                    .as_ref()
                    .and_then(|f| f.priorities.clone())
                    .or_else(data_priority),
                xoff: match p.xoff {
                    PfcThreshold::Static(x) => Some(Size(x)),
                    PfcThreshold::Dynamic(_) => None,
                },
                beta: match p.xoff {
                    PfcThreshold::Static(_) => None,
                    PfcThreshold::Dynamic(b) => Some(b),
                },
                xon_offset: Some(Size(p.xon_offset_bytes)),
                headroom: p.headroom_bytes.map(Size),
            },
        };
        let trimming = crate::switch::trim::TrimmingFile::normalised(spec.trimming.as_ref());
        let (scheduler, weights) = match spec.scheduler {
            Scheduler::Strict => (SchedulerName::Strict, None),
            Scheduler::Dwrr(w) => (
                SchedulerName::Dwrr,
                Some(w.iter().map(|&x| x as i64).collect()),
            ),
        };
        SwitchFile {
            buffer: Size(spec.buffer_bytes),
            port_buffer: spec.port_buffer_bytes.map(Size),
            latency: Duration(spec.latency_ps),
            alpha: spec.alpha,
            queue_limit: spec.queue_limit_bytes.map(Size),
            scheduler: Some(scheduler),
            weights,
            ecn: Some(ecn),
            pfc: Some(pfc),
            trimming: Some(trimming),
            reduction: crate::switch::reduction::ReductionFile::normalised(
                self.reduction.as_ref(),
                spec.reduction.as_ref(),
            ),
        }
    }
}

/// Keys of `[switch]` whose absence from a normalised scenario is itself the setting.
pub const ABSENT_MEANS: &[(&str, &str)] = &[
    ("switch.port_buffer", "no per-port cap"),
    ("switch.alpha", "no dynamic threshold on lossy queues"),
    ("switch.queue_limit", "no static per-queue cap"),
    (
        "switch.weights",
        "scheduler = \"strict\" (weights are DWRR's)",
    ),
    ("switch.pfc.xoff", "the dynamic threshold `beta` applies"),
    ("switch.pfc.beta", "the static threshold `xoff` applies"),
    (
        "switch.pfc.headroom",
        "sized per link: a round trip of bytes plus two packets",
    ),
];

impl Default for SwitchFile {
    fn default() -> Self {
        Self {
            buffer: Self::default_buffer(),
            port_buffer: None,
            latency: Self::default_latency(),
            alpha: None,
            queue_limit: None,
            scheduler: None,
            weights: None,
            ecn: None,
            pfc: None,
            trimming: None,
            reduction: None,
        }
    }
}

impl EcnFile {
    /// An enabled table with every default (DCTCP's `k` then sets the thresholds).
    fn default_for_dctcp() -> Self {
        EcnFile {
            enabled: true,
            kmin: None,
            kmax: None,
            pmax: None,
            mark: None,
            priorities: None,
        }
    }

    fn validate(&self, t: &TransportSpec) -> Res<EcnSpec> {
        let kmin = self.kmin.map(|s| s.0).unwrap_or(5_000);
        let kmax = self.kmax.map(|s| s.0).unwrap_or(200_000);
        if kmax < kmin {
            return Err(ScenarioError::at(
                "switch.ecn.kmax",
                "expected kmax >= kmin",
            ));
        }
        let pmax = fraction("switch.ecn.pmax", self.pmax.unwrap_or(0.01), 0.0, 1.0)?;
        Ok(EcnSpec {
            kmin_bytes: kmin,
            kmax_bytes: kmax,
            pmax,
            on_dequeue: self.mark != Some(MarkAt::Enqueue),
            priorities: priority_mask(
                "switch.ecn.priorities",
                self.priorities.as_ref(),
                t.data_priority,
            )?,
        })
    }
}

impl PfcFile {
    fn validate(&self, t: &TransportSpec) -> Res<PfcSpec> {
        let priorities = priority_mask(
            "switch.pfc.priorities",
            self.priorities.as_ref(),
            t.data_priority,
        )?;
        if priorities & (1 << t.control_priority) != 0 {
            return Err(ScenarioError::at(
                "switch.pfc.priorities",
                "the control priority (ACK, CNP) cannot be lossless: pausing it can deadlock the transport",
            ));
        }
        let xoff = match (self.xoff, self.beta) {
            (Some(_), Some(_)) => {
                return Err(ScenarioError::at(
                    "switch.pfc.beta",
                    "give either a static xoff or a dynamic beta, not both",
                ))
            }
            (Some(x), None) => PfcThreshold::Static(positive_size("switch.pfc.xoff", x.0)?),
            (None, b) => PfcThreshold::Dynamic(fraction(
                "switch.pfc.beta",
                b.unwrap_or(1.0),
                1.0 / 1024.0,
                1024.0,
            )?),
        };
        let xon_offset_bytes = self
            .xon_offset
            .map(|s| s.0)
            .unwrap_or(2 * (t.mtu_bytes + t.header_bytes));
        if let Some(h) = self.headroom {
            positive_size("switch.pfc.headroom", h.0)?;
        }
        Ok(PfcSpec {
            priorities,
            xoff,
            xon_offset_bytes,
            headroom_bytes: self.headroom.map(|s| s.0),
        })
    }
}

/// PFC headroom that leaves no shared buffer: `reserved[n]` is what switch `n` reserves (every
/// ingress link times every lossless priority); the lossless classes need at least one packet of
/// shared buffer beyond it. Checked once the fabric is built (the default headroom depends on each
/// link's rate and delay). An explicit `headroom` that does not fit is an error; the default one
/// (sized per link, which the user did not choose) is a warning, returned for run.json.
pub fn check_headroom(
    spec: &SwitchSpec,
    reserved: &IdVec<NodeId, u64>,
    buffer_of: impl Fn(NodeId) -> Option<u64>,
    packet_bytes: u64,
) -> Res<Option<String>> {
    let Some(pfc) = &spec.pfc else {
        return Ok(None);
    };
    // The switch whose headroom leaves the least shared buffer (`buffer_of`: None for hosts).
    let tightest = reserved
        .iter_enumerated()
        .filter_map(|(n, &r)| buffer_of(n).map(|b| (r, b)))
        .max_by_key(|&(r, b)| r.saturating_add(packet_bytes).saturating_sub(b));
    let Some((worst, buffer)) = tightest else {
        return Ok(None);
    };
    if worst.saturating_add(packet_bytes) <= buffer {
        return Ok(None);
    }
    let what = match pfc.headroom_bytes {
        Some(h) => format!("{h} B per ingress port and lossless priority"),
        None => "the default headroom (a round trip of each link plus two packets)".to_string(),
    };
    let message = format!(
        "PFC headroom of {what} reserves {worst} B at a switch, which with one packet \
         ({packet_bytes} B) exceeds the {buffer} B buffer: enlarge switch.buffer or lower the headroom"
    );
    match pfc.headroom_bytes {
        Some(_) => Err(ScenarioError::at("switch.pfc.headroom", message)),
        None => Ok(Some(format!(
            "switch.buffer: {message} (lossless packets then queue in the headroom only)"
        ))),
    }
}
