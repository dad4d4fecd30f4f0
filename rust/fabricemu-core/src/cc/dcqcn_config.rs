//! `[transport.dcqcn]`: every parameter of DCQCN, the variant's defaults and the checks.

use serde::{Deserialize, Serialize};

use crate::config::check::{fraction, positive_time, Res};
use crate::config::values::{Duration, LinkRate, Size};
use crate::config::{DcqcnSpec, ScenarioError};

/// Whose defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DcqcnVariant {
    /// Zhu et al., SIGCOMM 2015.
    Paper,
    /// The Mellanox/HPCC-repo implementation.
    Mellanox,
}

/// `[transport.dcqcn]`: every parameter of DCQCN; `variant` picks the defaults of the paper
/// (SIGCOMM 2015) or of the Mellanox/HPCC-repo implementation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DcqcnFile {
    /// `paper` (default) or `mellanox`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<DcqcnVariant>,
    /// Alpha EWMA gain g.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub g: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alpha_init: Option<f64>,
    /// NP: at most one CNP per flow per interval (N).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cnp_interval: Option<Duration>,
    /// RP: alpha update period without CNP (K).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alpha_interval: Option<Duration>,
    /// RP: rate-increase timer (T).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_timer: Option<Duration>,
    /// RP: rate-increase byte counter (B); "0B" turns it off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub byte_counter: Option<Size>,
    /// RP: fast-recovery steps (F).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fast_recovery: Option<i64>,
    /// RP: additive increase step (R_AI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_ai: Option<LinkRate>,
    /// RP: hyper increase step (R_HAI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_hai: Option<LinkRate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_rate: Option<LinkRate>,
    /// RP: at most one rate cut per interval (Mellanox: 4us; paper: every CNP, i.e. 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_decrease_interval: Option<Duration>,
    /// RP: set the target rate to the current rate on every cut (paper) or only after a timer
    /// increase since the last cut (Mellanox).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clamp_target_rate: Option<bool>,
}

const US: u64 = 1_000_000;

impl DcqcnVariant {
    /// The variant's parameters for NICs of `host_rate_bps`.
    pub(crate) fn defaults(self, host_rate_bps: u64) -> DcqcnSpec {
        match self {
            // Zhu et al., SIGCOMM 2015 (R_HAI from the author's ns3-rdma config; min rate its
            // code default).
            DcqcnVariant::Paper => DcqcnSpec {
                mellanox: false,
                g: 1.0 / 256.0,
                alpha_init: 1.0,
                cnp_interval_ps: 50 * US,
                alpha_interval_ps: 55 * US,
                rate_timer_ps: 55 * US,
                byte_counter_bytes: 10_000_000,
                fast_recovery: 5,
                rate_ai_bps: 40_000_000,
                rate_hai_bps: 200_000_000,
                min_rate_bps: 100_000_000,
                rate_decrease_interval_ps: 0,
                clamp_target_rate: true,
            },
            // HPCC repository's "Mellanox CX4+" DCQCN: steps scale with the NIC rate (per 25G).
            DcqcnVariant::Mellanox => {
                let scale =
                    |bps: u64| (bps as u128 * host_rate_bps as u128 / 25_000_000_000) as u64;
                DcqcnSpec {
                    mellanox: true,
                    g: 1.0 / 256.0,
                    alpha_init: 1.0,
                    cnp_interval_ps: 0,
                    alpha_interval_ps: US,
                    rate_timer_ps: 300 * US,
                    byte_counter_bytes: 0,
                    fast_recovery: 1,
                    rate_ai_bps: scale(5_000_000).max(1),
                    rate_hai_bps: scale(50_000_000).max(1),
                    min_rate_bps: 1_000_000_000,
                    rate_decrease_interval_ps: 4 * US,
                    clamp_target_rate: false,
                }
            }
        }
    }
}

impl DcqcnFile {
    /// `[transport.dcqcn]` with every parameter the run uses (the variant's defaults scaled to the
    /// host rate, then the user's keys), for the normalised scenario.
    pub fn normalised(s: &DcqcnSpec) -> DcqcnFile {
        DcqcnFile {
            variant: Some(if s.mellanox {
                DcqcnVariant::Mellanox
            } else {
                DcqcnVariant::Paper
            }),
            g: Some(s.g),
            alpha_init: Some(s.alpha_init),
            cnp_interval: Some(Duration(s.cnp_interval_ps)),
            alpha_interval: Some(Duration(s.alpha_interval_ps)),
            rate_timer: Some(Duration(s.rate_timer_ps)),
            byte_counter: Some(Size(s.byte_counter_bytes)),
            fast_recovery: Some(s.fast_recovery as i64),
            rate_ai: Some(LinkRate(s.rate_ai_bps)),
            rate_hai: Some(LinkRate(s.rate_hai_bps)),
            min_rate: Some(LinkRate(s.min_rate_bps)),
            rate_decrease_interval: Some(Duration(s.rate_decrease_interval_ps)),
            clamp_target_rate: Some(s.clamp_target_rate),
        }
    }

    /// DCQCN parameters: the variant's defaults, then every key the user set.
    pub fn validate(d: Option<&DcqcnFile>, host_rate_bps: u64) -> Res<DcqcnSpec> {
        let default = DcqcnFile::default();
        let d = d.unwrap_or(&default);
        let p = |key: &str| format!("transport.dcqcn.{key}");
        let mut s = d
            .variant
            .unwrap_or(DcqcnVariant::Paper)
            .defaults(host_rate_bps);
        if let Some(g) = d.g {
            s.g = fraction(&p("g"), g, 1e-9, 1.0)?;
        }
        if let Some(a) = d.alpha_init {
            s.alpha_init = fraction(&p("alpha_init"), a, 0.0, 1.0)?;
        }
        if let Some(v) = d.cnp_interval {
            s.cnp_interval_ps = v.0;
        }
        if let Some(v) = d.alpha_interval {
            s.alpha_interval_ps = positive_time(&p("alpha_interval"), v.0)?;
        }
        if let Some(v) = d.rate_timer {
            s.rate_timer_ps = positive_time(&p("rate_timer"), v.0)?;
        }
        if let Some(v) = d.byte_counter {
            s.byte_counter_bytes = v.0;
        }
        if let Some(f) = d.fast_recovery {
            if !(0..=1000).contains(&f) {
                return Err(ScenarioError::at(
                    p("fast_recovery"),
                    format!("expected 0..=1000, found {f}"),
                ));
            }
            s.fast_recovery = f as u32;
        }
        if let Some(r) = d.rate_ai {
            s.rate_ai_bps = r.0;
        }
        if let Some(r) = d.rate_hai {
            s.rate_hai_bps = r.0;
        }
        if let Some(r) = d.min_rate {
            s.min_rate_bps = r.0;
        }
        if s.min_rate_bps > host_rate_bps {
            return Err(ScenarioError::at(
                p("min_rate"),
                "exceeds the host link rate",
            ));
        }
        if let Some(v) = d.rate_decrease_interval {
            s.rate_decrease_interval_ps = v.0;
        }
        if let Some(c) = d.clamp_target_rate {
            s.clamp_target_rate = c;
        }
        Ok(s)
    }
}
