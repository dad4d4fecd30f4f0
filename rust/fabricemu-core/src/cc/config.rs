//! `transport.cc`: which congestion control runs, and its parameters' checks. Adding a controller
//! is its file (its `[transport.<name>]` config and state) plus one arm here.

use serde::{Deserialize, Serialize};

use crate::config::check::Res;
use crate::config::{CongestionControl, ScenarioError};

use super::dcqcn_config::DcqcnFile;
use super::dctcp_config::DctcpFile;
use super::hpcc_config::HpccFile;
use super::swift_config::SwiftFile;

/// `transport.cc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CcName {
    /// Send at line rate.
    None,
    Dcqcn,
    Dctcp,
    Swift,
    Hpcc,
}

impl CcName {
    fn key(self) -> &'static str {
        match self {
            CcName::None => "none",
            CcName::Dcqcn => "dcqcn",
            CcName::Dctcp => "dctcp",
            CcName::Swift => "swift",
            CcName::Hpcc => "hpcc",
        }
    }
}

/// The parameter tables of `[transport]`, one per controller (at most the chosen one is set).
#[derive(Debug, Clone, Copy, Default)]
pub struct CcTables<'a> {
    pub dcqcn: Option<&'a DcqcnFile>,
    pub dctcp: Option<&'a DctcpFile>,
    pub swift: Option<&'a SwiftFile>,
    pub hpcc: Option<&'a HpccFile>,
}

/// The controller named by `cc`, from its parameter table (`[transport.dcqcn]` for DCQCN, ...); a
/// table of another controller is an error. `mtu` and `header`: payload and header bytes of a
/// full data packet.
pub fn validate(
    cc: CcName,
    tables: CcTables<'_>,
    host_rate_bps: u64,
    mtu: u64,
    header: u64,
) -> Res<CongestionControl> {
    let present = [
        (CcName::Dcqcn, tables.dcqcn.is_some()),
        (CcName::Dctcp, tables.dctcp.is_some()),
        (CcName::Swift, tables.swift.is_some()),
        (CcName::Hpcc, tables.hpcc.is_some()),
    ];
    for (name, set) in present {
        if set && name != cc {
            let msg = match name {
                CcName::Dcqcn => "DCQCN parameters need cc = \"dcqcn\"".to_string(),
                other => format!(
                    "{} parameters need cc = \"{}\"",
                    other.key().to_uppercase(),
                    other.key()
                ),
            };
            return Err(ScenarioError::at(format!("transport.{}", name.key()), msg));
        }
    }
    Ok(match cc {
        CcName::None => CongestionControl::None,
        CcName::Dcqcn => {
            CongestionControl::Dcqcn(DcqcnFile::validate(tables.dcqcn, host_rate_bps)?)
        }
        CcName::Dctcp => CongestionControl::Dctcp(DctcpFile::validate(tables.dctcp, mtu)?),
        CcName::Swift => {
            CongestionControl::Swift(SwiftFile::validate(tables.swift, mtu, mtu + header)?)
        }
        CcName::Hpcc => CongestionControl::Hpcc(HpccFile::validate(tables.hpcc, host_rate_bps)?),
    })
}
