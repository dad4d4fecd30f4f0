//! `[transport.swift]`: Swift's parameters (Kumar et al., "Swift: Delay is Simple and Effective
//! for Congestion Control in the Datacenter", SIGCOMM 2020), defaults and checks.

use serde::{Deserialize, Serialize};

use crate::config::check::{fraction, Res};
use crate::config::values::Duration;
use crate::config::ScenarioError;
use crate::units::Time;

/// `[transport.swift]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwiftFile {
    /// Fabric-delay target before hop and flow scaling (default 20us: above the base RTT of a
    /// 3-tier fat tree with 1us links, ~12us, with room for a few packets of queue per hop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_target: Option<Duration>,
    /// Target added per switch on the flow's path (default 1us), `h` in the paper.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hop_scale: Option<Duration>,
    /// Additive increase, packets per RTT (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ai: Option<f64>,
    /// Multiplicative decrease constant beta (default 0.8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beta: Option<f64>,
    /// Largest cut per RTT, a fraction of the window (default 0.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_mdf: Option<f64>,
    /// Flow scaling: the most target it adds, as a multiple of `base_target` (default 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs_range: Option<f64>,
    /// Flow scaling adds all of its range at this window and below, packets (default 0.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs_min_cwnd: Option<f64>,
    /// Flow scaling adds nothing at this window and above, packets (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs_max_cwnd: Option<f64>,
    /// Smallest window, packets (default 0.001: below one packet Swift paces).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_cwnd: Option<f64>,
    /// Largest window, packets (default: none beyond the path's BDP x 4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cwnd: Option<f64>,
    /// Window at the start, packets (default: the path's BDP, as NICs start at line rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_cwnd: Option<f64>,
}

/// Swift's parameters, validated. Windows are in packets (of `mss_bytes` payload).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SwiftSpec {
    pub base_target_ps: Time,
    pub hop_scale_ps: Time,
    pub ai: f64,
    pub beta: f64,
    pub max_mdf: f64,
    /// Flow scaling's range, ps.
    pub fs_range_ps: f64,
    pub fs_min_cwnd: f64,
    pub fs_max_cwnd: f64,
    pub min_cwnd: f64,
    /// None: 4 x the path's BDP.
    pub max_cwnd: Option<f64>,
    /// None: the path's BDP.
    pub initial_cwnd: Option<f64>,
    pub mss_bytes: u64,
    /// Wire bytes of a full data packet (pacing below one packet spaces these).
    pub wire_bytes: u64,
}

const US: u64 = 1_000_000;

/// `fs_range` when not given (in units of `base_target`).
pub const DEFAULT_FS_RANGE: f64 = 5.0;

/// Keys of `[transport.swift]` whose absence from a normalised scenario is itself the setting.
pub const ABSENT_MEANS: &[(&str, &str)] = &[
    ("transport.swift.max_cwnd", "no cap on the window"),
    (
        "transport.swift.initial_cwnd",
        "the sender's default first window (see cc/swift.rs)",
    ),
];

impl SwiftFile {
    /// `[transport.swift]` with every parameter the run uses (`fs_range` as written or its
    /// default: the spec holds it multiplied by `base_target`).
    pub fn normalised(file: Option<&SwiftFile>, s: &SwiftSpec) -> SwiftFile {
        SwiftFile {
            base_target: Some(Duration(s.base_target_ps)),
            hop_scale: Some(Duration(s.hop_scale_ps)),
            ai: Some(s.ai),
            beta: Some(s.beta),
            max_mdf: Some(s.max_mdf),
            fs_range: Some(file.and_then(|f| f.fs_range).unwrap_or(DEFAULT_FS_RANGE)),
            fs_min_cwnd: Some(s.fs_min_cwnd),
            fs_max_cwnd: Some(s.fs_max_cwnd),
            min_cwnd: Some(s.min_cwnd),
            max_cwnd: s.max_cwnd,
            initial_cwnd: s.initial_cwnd,
        }
    }

    pub fn validate(s: Option<&SwiftFile>, mss_bytes: u64, wire_bytes: u64) -> Res<SwiftSpec> {
        let default = SwiftFile::default();
        let s = s.unwrap_or(&default);
        let p = |key: &str| format!("transport.swift.{key}");
        let positive = |key: &str, v: Option<f64>, default: f64, max: f64| -> Res<f64> {
            match v {
                None => Ok(default),
                Some(x) if x.is_finite() && x > 0.0 && x <= max => Ok(x),
                Some(x) => Err(ScenarioError::at(
                    p(key),
                    format!("expected a number in (0, {max}], found {x}"),
                )),
            }
        };
        let base_target_ps = s.base_target.map_or(20 * US, |d| d.0);
        if base_target_ps == 0 {
            return Err(ScenarioError::at(
                p("base_target"),
                "expected a positive duration",
            ));
        }
        let fs_min_cwnd = positive("fs_min_cwnd", s.fs_min_cwnd, 0.1, 1e9)?;
        let fs_max_cwnd = positive("fs_max_cwnd", s.fs_max_cwnd, 100.0, 1e9)?;
        if fs_max_cwnd <= fs_min_cwnd {
            return Err(ScenarioError::at(
                p("fs_max_cwnd"),
                "expected fs_max_cwnd > fs_min_cwnd",
            ));
        }
        let fs_range = match s.fs_range {
            None => DEFAULT_FS_RANGE,
            Some(r) => fraction(&p("fs_range"), r, 0.0, 1e6)?,
        };
        let min_cwnd = positive("min_cwnd", s.min_cwnd, 0.001, 1e9)?;
        let max_cwnd = match s.max_cwnd {
            None => None,
            Some(m) => Some(positive("max_cwnd", Some(m), 0.0, 1e12)?),
        };
        if max_cwnd.is_some_and(|m| m < min_cwnd) {
            return Err(ScenarioError::at(
                p("max_cwnd"),
                "expected max_cwnd >= min_cwnd",
            ));
        }
        let initial_cwnd = match s.initial_cwnd {
            None => None,
            Some(c) => Some(positive("initial_cwnd", Some(c), 0.0, 1e12)?),
        };
        Ok(SwiftSpec {
            base_target_ps,
            hop_scale_ps: s.hop_scale.map_or(US, |d| d.0),
            ai: positive("ai", s.ai, 1.0, 1e6)?,
            beta: positive("beta", s.beta, 0.8, 1.0)?,
            max_mdf: positive("max_mdf", s.max_mdf, 0.5, 1.0)?,
            fs_range_ps: fs_range * base_target_ps as f64,
            fs_min_cwnd,
            fs_max_cwnd,
            min_cwnd,
            max_cwnd,
            initial_cwnd,
            mss_bytes,
            wire_bytes,
        })
    }
}
