//! `transport.cc`: which congestion control runs, and its parameters' checks. Adding a controller
//! is its file (its `[transport.<name>]` config and state) plus one arm here.

use serde::{Deserialize, Serialize};

use crate::config::check::Res;
use crate::config::{CongestionControl, ScenarioError};

use super::dcqcn_config::DcqcnFile;
use super::dctcp_config::DctcpFile;
use super::hpcc_config::HpccFile;
use super::nscc_config::NsccFile;
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
    /// Ultra Ethernet's network-signalled congestion control.
    Nscc,
}

impl CcName {
    fn key(self) -> &'static str {
        match self {
            CcName::None => "none",
            CcName::Dcqcn => "dcqcn",
            CcName::Dctcp => "dctcp",
            CcName::Swift => "swift",
            CcName::Hpcc => "hpcc",
            CcName::Nscc => "nscc",
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
    pub nscc: Option<&'a NsccFile>,
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
        (CcName::Nscc, tables.nscc.is_some()),
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
        CcName::Nscc => CongestionControl::Nscc(NsccFile::validate(tables.nscc, mtu)?),
    })
}

#[cfg(test)]
mod tests {
    use crate::config::CongestionControl;
    use crate::scenario::parse_toml;

    /// The rest of a valid scenario, after the lines under test.
    const TAIL: &str = "[topology]\nkind = \"fat_tree\"\nk = 4\n\
        [[workload]]\nkind = \"incast\"\nreceiver = 0\nsenders = 2\nsize = \"1KB\"\n";

    fn parse(text: &str) -> Result<crate::scenario::Scenario, crate::config::ScenarioError> {
        parse_toml(&format!("{text}{TAIL}"), "s.toml").map(|(_, s)| s)
    }

    fn err(text: &str) -> String {
        match parse(text) {
            Ok(_) => panic!("expected an error for {text}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn a_table_of_another_controller_is_an_error_at_its_key() {
        let e = err("[transport]\ncc = \"dcqcn\"\n[transport.hpcc]\neta = 0.9\n");
        assert!(
            e.starts_with("s.toml:3:") && e.contains("transport.hpcc"),
            "{e}"
        );
        assert!(e.contains("HPCC parameters need cc = \"hpcc\""), "{e}");
    }

    #[test]
    fn bad_values_name_their_key_and_line() {
        let e = err("[transport]\ncc = \"swift\"\nswift = { beta = 1.5 }\n");
        assert!(
            e.starts_with("s.toml:3:") && e.contains("transport.swift.beta"),
            "{e}"
        );
        let e = err("[transport]\ncc = \"hpcc\"\n[transport.hpcc]\neta = 0\n");
        assert!(e.contains("transport.hpcc.eta"), "{e}");
        let e = err("[transport]\ncc = \"dctcp\"\ndctcp = { min_window = \"0B\" }\n");
        assert!(e.contains("transport.dctcp.min_window"), "{e}");
    }

    #[test]
    fn dctcp_k_sets_step_marking_at_the_switches() {
        let s = parse("[transport]\ncc = \"dctcp\"\ndctcp = { k = \"300KB\" }\n").unwrap();
        let ecn = s.switch.ecn.expect("k turns ECN on");
        assert_eq!(
            (ecn.kmin_bytes, ecn.kmax_bytes, ecn.pmax),
            (300_000, 300_000, 1.0)
        );
        let s = parse(
            "[switch]\necn = { kmin = \"5KB\", mark = \"enqueue\" }\n\
             [transport]\ncc = \"dctcp\"\ndctcp = { k = \"60KB\" }\n",
        )
        .unwrap();
        let ecn = s.switch.ecn.unwrap();
        assert_eq!((ecn.kmin_bytes, ecn.kmax_bytes), (60_000, 60_000));
        assert!(!ecn.on_dequeue, "the table's other settings stay");
        match s.transport.cc {
            CongestionControl::Dctcp(d) => assert_eq!(d.g, 1.0 / 16.0),
            other => panic!("{other:?}"),
        }
    }
}
