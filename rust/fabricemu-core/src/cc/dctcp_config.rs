//! `[transport.dctcp]`: DCTCP's sender parameters, their published defaults and the checks. The
//! switch side of DCTCP is the existing ECN marking with Kmin = Kmax = K and Pmax = 1
//! (`[switch.ecn] kmin = kmax = "K", pmax = 1.0`, see docs/congestion-control.md).

use serde::{Deserialize, Serialize};

use crate::config::check::{fraction, Res};
use crate::config::values::Size;
use crate::config::ScenarioError;

/// `[transport.dctcp]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DctcpFile {
    /// Alpha's EWMA gain g (default 1/16: Alizadeh et al., SIGCOMM 2010, section 3.4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub g: Option<f64>,
    /// Alpha before the first window of feedback (default 1: Linux `dctcp_alpha_on_init`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alpha_init: Option<f64>,
    /// Start in slow start from `initial_window` (default false: RDMA NICs start at line rate, so
    /// the window starts at the path's bandwidth-delay product and grows additively).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slow_start: Option<bool>,
    /// The first window (default: the path's BDP; with slow start, 10 MSS as RFC 6928).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_window: Option<Size>,
    /// The window never goes below this (default 1 MSS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_window: Option<Size>,
    /// DCTCP's marking threshold K: when set, switches mark with Kmin = Kmax = K and Pmax = 1
    /// whatever `[switch.ecn]` says of thresholds (ECN is on even without that table). Unset:
    /// `[switch.ecn]` decides (set kmin = kmax = K and pmax = 1 there). The HPCC evaluation
    /// used K = 30 KB per 10 Gbps of port rate (300 KB at 100G).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k: Option<Size>,
}

/// DCTCP's parameters, validated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DctcpSpec {
    pub g: f64,
    pub alpha_init: f64,
    pub slow_start: bool,
    /// None: the path's BDP (or 10 MSS with slow start).
    pub initial_window_bytes: Option<u64>,
    pub min_window_bytes: u64,
    /// Payload bytes of a full packet (the MSS: `transport.mtu`).
    pub mss_bytes: u64,
    /// The marking threshold K the switches use, if set here.
    pub k_bytes: Option<u64>,
}

/// Keys of `[transport.dctcp]` whose absence from a normalised scenario is itself the setting.
pub const ABSENT_MEANS: &[(&str, &str)] = &[
    (
        "transport.dctcp.initial_window",
        "the sender's default first window (see cc/dctcp.rs)",
    ),
    (
        "transport.dctcp.k",
        "the switches' [switch.ecn] marking applies as written",
    ),
];

impl DctcpFile {
    /// `[transport.dctcp]` with every parameter the run uses; absent `initial_window` and `k`
    /// are settings of their own (see `ABSENT_MEANS`).
    pub fn normalised(s: &DctcpSpec) -> DctcpFile {
        DctcpFile {
            g: Some(s.g),
            alpha_init: Some(s.alpha_init),
            slow_start: Some(s.slow_start),
            initial_window: s.initial_window_bytes.map(Size),
            min_window: Some(Size(s.min_window_bytes)),
            k: s.k_bytes.map(Size),
        }
    }

    pub fn validate(d: Option<&DctcpFile>, mss_bytes: u64) -> Res<DctcpSpec> {
        let default = DctcpFile::default();
        let d = d.unwrap_or(&default);
        let p = |key: &str| format!("transport.dctcp.{key}");
        let g = match d.g {
            Some(g) => fraction(&p("g"), g, 1e-9, 1.0)?,
            None => 1.0 / 16.0,
        };
        let alpha_init = match d.alpha_init {
            Some(a) => fraction(&p("alpha_init"), a, 0.0, 1.0)?,
            None => 1.0,
        };
        let min_window_bytes = d.min_window.map_or(mss_bytes, |s| s.0);
        if min_window_bytes == 0 {
            return Err(ScenarioError::at(
                p("min_window"),
                "expected a positive size",
            ));
        }
        if let Some(w) = d.initial_window {
            if w.0 < min_window_bytes {
                return Err(ScenarioError::at(
                    p("initial_window"),
                    format!("expected at least min_window ({min_window_bytes} bytes)"),
                ));
            }
        }
        Ok(DctcpSpec {
            g,
            alpha_init,
            slow_start: d.slow_start.unwrap_or(false),
            initial_window_bytes: d.initial_window.map(|s| s.0),
            min_window_bytes,
            mss_bytes,
            k_bytes: match d.k {
                Some(k) => Some(crate::config::check::positive_size(&p("k"), k.0)?),
                None => None,
            },
        })
    }
}
