//! `transport.cc`: which congestion control runs, and its parameters' checks. Adding a controller
//! is its file (its `[transport.<name>]` config and state) plus one arm here.

use serde::{Deserialize, Serialize};

use crate::config::check::Res;
use crate::config::{CongestionControl, ScenarioError};

use super::dcqcn_config::DcqcnFile;

/// `transport.cc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CcName {
    /// Send at line rate.
    None,
    Dcqcn,
}

/// The controller named by `cc`, from its parameter table (`[transport.dcqcn]` for DCQCN); a
/// table of another controller is an error.
pub fn validate(
    cc: CcName,
    dcqcn: Option<&DcqcnFile>,
    host_rate_bps: u64,
) -> Res<CongestionControl> {
    match cc {
        CcName::None => {
            if dcqcn.is_some() {
                return Err(ScenarioError::at(
                    "transport.dcqcn",
                    "DCQCN parameters need cc = \"dcqcn\"",
                ));
            }
            Ok(CongestionControl::None)
        }
        CcName::Dcqcn => Ok(CongestionControl::Dcqcn(DcqcnFile::validate(
            dcqcn,
            host_rate_bps,
        )?)),
    }
}
