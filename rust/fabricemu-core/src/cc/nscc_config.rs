//! `[transport.nscc]`: the parameters of NSCC, Ultra Ethernet's network-signalled congestion
//! control (see `cc::nscc` for the model), their defaults and the checks.

use serde::{Deserialize, Serialize};

use crate::config::check::{fraction, Res};
use crate::config::values::{Duration, Size};
use crate::config::ScenarioError;
use crate::units::Time;

/// `[transport.nscc]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NsccFile {
    /// Queueing-delay target: the RTT above the path's base RTT the flow aims for (default: 3/4
    /// of the path's base RTT).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_qdelay: Option<Duration>,
    /// Fair increase, packets per RTT added in every quadrant without a congestion mark above
    /// target (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_increase: Option<f64>,
    /// Proportional increase gain: below target and unmarked the window grows by this fraction of
    /// the acknowledged bytes, scaled by (target - delay) / target (default 0.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proportional_increase: Option<f64>,
    /// Multiplicative decrease gain: marked and above target, at most once per RTT, the window is
    /// multiplied by 1 - md x (delay - target) / delay (default 0.8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub md: Option<f64>,
    /// Largest cut per RTT, a fraction of the window; also the cut of a trimmed-packet NACK
    /// (default 0.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_md: Option<f64>,
    /// Smallest window (default one MTU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_window: Option<Size>,
    /// Largest window (default 1.5 x the path's BDP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_window: Option<Size>,
    /// First window (default the path's BDP: the flow starts at line rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_window: Option<Size>,
}

/// NSCC's parameters, validated (windows in payload bytes).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NsccSpec {
    /// None: 3/4 of the path's base RTT.
    pub target_qdelay_ps: Option<Time>,
    pub fair_increase: f64,
    pub proportional_increase: f64,
    pub md: f64,
    pub max_md: f64,
    pub min_window_bytes: u64,
    /// None: 1.5 x the path's BDP.
    pub max_window_bytes: Option<u64>,
    /// None: the path's BDP.
    pub initial_window_bytes: Option<u64>,
    /// Payload bytes of a full packet.
    pub mss_bytes: u64,
}

/// Keys of `[transport.nscc]` whose absence from a normalised scenario is itself the setting.
pub const ABSENT_MEANS: &[(&str, &str)] = &[
    (
        "transport.nscc.target_qdelay",
        "derived from each flow's path (see cc/nscc.rs)",
    ),
    (
        "transport.nscc.max_window",
        "derived from each flow's path (see cc/nscc.rs)",
    ),
    (
        "transport.nscc.initial_window",
        "derived from each flow's path (see cc/nscc.rs)",
    ),
];

impl NsccFile {
    /// `[transport.nscc]` with every parameter the run uses; the absent windows and target are
    /// derived per flow (see `ABSENT_MEANS`).
    pub fn normalised(s: &NsccSpec) -> NsccFile {
        NsccFile {
            target_qdelay: s.target_qdelay_ps.map(Duration),
            fair_increase: Some(s.fair_increase),
            proportional_increase: Some(s.proportional_increase),
            md: Some(s.md),
            max_md: Some(s.max_md),
            min_window: Some(Size(s.min_window_bytes)),
            max_window: s.max_window_bytes.map(Size),
            initial_window: s.initial_window_bytes.map(Size),
        }
    }

    pub fn validate(n: Option<&NsccFile>, mss_bytes: u64) -> Res<NsccSpec> {
        let default = NsccFile::default();
        let n = n.unwrap_or(&default);
        let p = |key: &str| format!("transport.nscc.{key}");
        let number = |key: &str, v: Option<f64>, default: f64, lo: f64, hi: f64| -> Res<f64> {
            match v {
                None => Ok(default),
                Some(x) if x.is_finite() && x > lo && x <= hi => Ok(x),
                Some(x) => Err(ScenarioError::at(
                    p(key),
                    format!("expected a number in ({lo}, {hi}], found {x}"),
                )),
            }
        };
        if n.target_qdelay.is_some_and(|d| d.0 == 0) {
            return Err(ScenarioError::at(
                p("target_qdelay"),
                "expected a positive duration",
            ));
        }
        let min_window_bytes = n.min_window.map_or(mss_bytes, |s| s.0);
        if min_window_bytes == 0 {
            return Err(ScenarioError::at(
                p("min_window"),
                "expected a positive size",
            ));
        }
        for (key, w) in [
            ("max_window", n.max_window),
            ("initial_window", n.initial_window),
        ] {
            if let Some(w) = w {
                if w.0 < min_window_bytes {
                    return Err(ScenarioError::at(
                        p(key),
                        format!("expected at least min_window ({min_window_bytes} bytes)"),
                    ));
                }
            }
        }
        Ok(NsccSpec {
            target_qdelay_ps: n.target_qdelay.map(|d| d.0),
            fair_increase: number("fair_increase", n.fair_increase, 1.0, 0.0, 1e6)?,
            proportional_increase: match n.proportional_increase {
                None => 0.5,
                Some(x) => fraction(&p("proportional_increase"), x, 0.0, 16.0)?,
            },
            md: number("md", n.md, 0.8, 0.0, 1.0)?,
            max_md: number("max_md", n.max_md, 0.5, 0.0, 1.0)?,
            min_window_bytes,
            max_window_bytes: n.max_window.map(|s| s.0),
            initial_window_bytes: n.initial_window.map(|s| s.0),
            mss_bytes,
        })
    }
}
