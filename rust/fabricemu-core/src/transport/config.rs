//! `[transport]` and `[nic]`: segmentation, acknowledgement, loss recovery, priorities, the
//! congestion control's choice, and their checks, producing a [`TransportSpec`].

use serde::{Deserialize, Serialize};

use crate::cc::config::CcName;
use crate::cc::dcqcn_config::DcqcnFile;
use crate::cc::dctcp_config::DctcpFile;
use crate::cc::hpcc_config::HpccFile;
use crate::cc::nscc_config::NsccFile;
use crate::cc::swift_config::SwiftFile;
use crate::config::check::Res;
use crate::config::values::{Duration, Size};
use crate::config::{LossRecovery, NicArbitration, ScenarioError, TransportSpec};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LossRecoveryName {
    GoBackN,
    Selective,
}

/// `[transport]`: NIC segmentation, acknowledgement and loss recovery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransportFile {
    /// Payload bytes per packet (RoCE's MTU counts payload, as here).
    #[serde(default = "TransportFile::default_mtu")]
    pub mtu: Size,
    /// Header bytes added to every data packet on the wire.
    #[serde(default = "TransportFile::default_header")]
    pub header: Size,
    /// Wire size of an ACK / NACK.
    #[serde(default = "TransportFile::default_ack_size")]
    pub ack_size: Size,
    /// The receiver acknowledges every n-th in-order packet (and always the last).
    #[serde(default = "TransportFile::default_ack_every")]
    pub ack_every: i64,
    /// Retransmission timeout: no acknowledged progress for this long -> go back to the last ACK.
    #[serde(default = "TransportFile::default_rto")]
    pub rto: Duration,
    /// Congestion control: `none` (line rate), `dcqcn`, `dctcp`, `swift`, `hpcc` or `nscc`.
    #[serde(default = "TransportFile::default_cc")]
    pub cc: CcName,
    /// `go_back_n` (RoCE NICs) or `selective` (tolerates reordering). Default: selective when
    /// packets are sprayed or adaptively routed per packet, go_back_n otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_recovery: Option<LossRecoveryName>,
    /// Selective: packets received beyond a hole before it is reported lost (default 8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reorder_threshold: Option<i64>,
    /// Priority class of data packets (ACKs and CNPs use `control_priority`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_priority: Option<i64>,
    /// DCQCN parameters (used when `cc = "dcqcn"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dcqcn: Option<DcqcnFile>,
    /// DCTCP parameters (used when `cc = "dctcp"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dctcp: Option<DctcpFile>,
    /// Swift parameters (used when `cc = "swift"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swift: Option<SwiftFile>,
    /// HPCC parameters (used when `cc = "hpcc"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hpcc: Option<HpccFile>,
    /// Receiver-driven credits (Ultra Ethernet, NDP/EQDS style; see `transport::credits`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credits: Option<crate::transport::credits::CreditsFile>,
    /// NSCC parameters (used when `cc = "nscc"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nscc: Option<NsccFile>,
}

impl TransportFile {
    fn default_mtu() -> Size {
        Size(4096)
    }
    fn default_header() -> Size {
        // Ethernet 14 + FCS 4, IPv4 20, UDP 8, RoCE BTH 12, ICRC 4.
        Size(62)
    }
    fn default_ack_size() -> Size {
        // Header plus the 4-byte AETH.
        Size(66)
    }
    fn default_ack_every() -> i64 {
        1
    }
    fn default_rto() -> Duration {
        Duration(1_000_000_000) // 1 ms
    }
    fn default_cc() -> CcName {
        CcName::None
    }

    /// The transport of NICs of `host_rate_bps`; `per_packet` says whether routing spreads a
    /// flow's packets over paths (then selective loss recovery is the default).
    pub fn validate(&self, host_rate_bps: u64, per_packet: bool) -> Res<TransportSpec> {
        if self.mtu.0 == 0 {
            return Err(ScenarioError::at(
                "transport.mtu",
                "expected a positive size",
            ));
        }
        if self.mtu.0 > u32::MAX as u64 / 2 || self.header.0 > 65_535 || self.ack_size.0 > 65_535 {
            let key = if self.mtu.0 > u32::MAX as u64 / 2 {
                "transport.mtu"
            } else {
                "transport.header"
            };
            return Err(ScenarioError::at(key, "value is too large for a packet"));
        }
        if self.ack_size.0 == 0 {
            return Err(ScenarioError::at(
                "transport.ack_size",
                "expected a positive size",
            ));
        }
        if self.ack_every < 1 || self.ack_every > 1 << 20 {
            return Err(ScenarioError::at(
                "transport.ack_every",
                format!("expected an integer >= 1, found {}", self.ack_every),
            ));
        }
        if self.rto.0 == 0 {
            return Err(ScenarioError::at(
                "transport.rto",
                "expected a positive duration",
            ));
        }
        let priority = |key: &str, v: Option<i64>, default: u8| -> Res<u8> {
            match v {
                None => Ok(default),
                Some(p) if (0..8).contains(&p) => Ok(p as u8),
                Some(p) => Err(ScenarioError::at(
                    format!("transport.{key}"),
                    format!("expected a priority in 0..=7, found {p}"),
                )),
            }
        };
        let data_priority = priority("priority", self.priority, crate::switch::DATA_PRIORITY)?;
        let control_priority = priority(
            "control_priority",
            self.control_priority,
            crate::switch::CONTROL_PRIORITY,
        )?;
        if data_priority == control_priority {
            return Err(ScenarioError::at(
                "transport.control_priority",
                "must differ from transport.priority",
            ));
        }
        let cc = crate::cc::config::validate(
            self.cc,
            crate::cc::config::CcTables {
                dcqcn: self.dcqcn.as_ref(),
                dctcp: self.dctcp.as_ref(),
                swift: self.swift.as_ref(),
                hpcc: self.hpcc.as_ref(),
                nscc: self.nscc.as_ref(),
            },
            host_rate_bps,
            self.mtu.0,
            self.header.0,
        )?;
        let loss_recovery = match self.loss_recovery {
            None if per_packet => LossRecovery::Selective,
            None | Some(LossRecoveryName::GoBackN) => LossRecovery::GoBackN,
            Some(LossRecoveryName::Selective) => LossRecovery::Selective,
        };
        Ok(TransportSpec {
            mtu_bytes: self.mtu.0,
            header_bytes: self.header.0,
            ack_bytes: self.ack_size.0,
            ack_every: self.ack_every as u32,
            rto_ps: self.rto.0,
            cc,
            loss_recovery,
            reorder_threshold: match self.reorder_threshold {
                None => 8,
                Some(r) if (1..=1_000_000).contains(&r) => r as u32,
                Some(r) => {
                    return Err(ScenarioError::at(
                        "transport.reorder_threshold",
                        format!("expected an integer in 1..=1000000, found {r}"),
                    ))
                }
            },
            data_priority,
            control_priority,
            credits: crate::transport::credits::CreditsFile::validate(self.credits.as_ref())?,
        })
    }
}

impl TransportFile {
    /// The table with every default written out (see `scenario::normalise`), from the validated
    /// `spec`: the chosen controller's table with each of its parameters, no table of another
    /// controller; `reorder_threshold` only with selective recovery (go-back-N has none);
    /// `[transport.credits]` always (`mode = "sender"` when off).
    pub fn normalised(&self, spec: &TransportSpec) -> TransportFile {
        use crate::config::CongestionControl as C;
        let selective = spec.loss_recovery == LossRecovery::Selective;
        TransportFile {
            mtu: Size(spec.mtu_bytes),
            header: Size(spec.header_bytes),
            ack_size: Size(spec.ack_bytes),
            ack_every: spec.ack_every as i64,
            rto: Duration(spec.rto_ps),
            cc: self.cc,
            loss_recovery: Some(if selective {
                LossRecoveryName::Selective
            } else {
                LossRecoveryName::GoBackN
            }),
            reorder_threshold: selective.then_some(spec.reorder_threshold as i64),
            priority: Some(spec.data_priority as i64),
            control_priority: Some(spec.control_priority as i64),
            dcqcn: match &spec.cc {
                C::Dcqcn(d) => Some(DcqcnFile::normalised(d)),
                _ => None,
            },
            dctcp: match &spec.cc {
                C::Dctcp(d) => Some(DctcpFile::normalised(d)),
                _ => None,
            },
            swift: match &spec.cc {
                C::Swift(d) => Some(SwiftFile::normalised(self.swift.as_ref(), d)),
                _ => None,
            },
            hpcc: match &spec.cc {
                C::Hpcc(d) => Some(HpccFile::normalised(d)),
                _ => None,
            },
            nscc: match &spec.cc {
                C::Nscc(d) => Some(NsccFile::normalised(d)),
                _ => None,
            },
            credits: Some(crate::transport::credits::CreditsFile::normalised(
                spec.credits.as_ref(),
            )),
        }
    }
}

/// Keys of `[transport]` whose absence from a normalised scenario is itself the setting.
pub const ABSENT_MEANS: &[(&str, &str)] = &[
    (
        "transport.reorder_threshold",
        "go-back-N recovery (no reorder window)",
    ),
    ("transport.dcqcn", "cc is not \"dcqcn\""),
    ("transport.dctcp", "cc is not \"dctcp\""),
    ("transport.swift", "cc is not \"swift\""),
    ("transport.hpcc", "cc is not \"hpcc\""),
    ("transport.nscc", "cc is not \"nscc\""),
];

impl Default for TransportFile {
    fn default() -> Self {
        Self {
            mtu: Self::default_mtu(),
            header: Self::default_header(),
            ack_size: Self::default_ack_size(),
            ack_every: Self::default_ack_every(),
            rto: Self::default_rto(),
            cc: Self::default_cc(),
            loss_recovery: None,
            reorder_threshold: None,
            priority: None,
            control_priority: None,
            dcqcn: None,
            dctcp: None,
            swift: None,
            hpcc: None,
            nscc: None,
            credits: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ArbitrationName {
    RoundRobin,
    Fifo,
}

/// `[nic]`: NIC behaviour beyond the transport.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NicFile {
    /// `round_robin` (default: a packet of each active flow in turn) or `fifo` (active flows in
    /// start order, each sent completely before the next, as an open-loop source queue).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arbitration: Option<ArbitrationName>,
}

impl NicFile {
    /// `[nic]` with every default written out.
    pub fn normalised(a: NicArbitration) -> NicFile {
        NicFile {
            arbitration: Some(match a {
                NicArbitration::RoundRobin => ArbitrationName::RoundRobin,
                NicArbitration::Fifo => ArbitrationName::Fifo,
            }),
        }
    }

    pub fn arbitration(nic: Option<&NicFile>) -> NicArbitration {
        match nic.and_then(|n| n.arbitration) {
            None | Some(ArbitrationName::RoundRobin) => NicArbitration::RoundRobin,
            Some(ArbitrationName::Fifo) => NicArbitration::Fifo,
        }
    }
}
