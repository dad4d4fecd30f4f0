//! `[transport.hpcc]`: HPCC's parameters (Li et al., "HPCC: High Precision Congestion Control",
//! SIGCOMM 2019, and the authors' ns-3 setup, shared/reference/hpcc_simulation_setup.csv),
//! defaults and checks.

use serde::{Deserialize, Serialize};

use crate::config::check::{fraction, Res};
use crate::config::values::{LinkRate, Size};
use crate::config::ScenarioError;

/// `[transport.hpcc]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HpccFile {
    /// Target utilisation eta (default 0.95, the paper; the project site uses 0.99).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eta: Option<f64>,
    /// Additive-increase stages before a multiplicative update is forced (default 0, run.py).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_stage: Option<i64>,
    /// Additive increase as a rate: W_AI = rate_ai x the flow's base RTT (default 10 Mbps per
    /// 25 Gbps of NIC rate, 40 Mbps at 100G: run.py).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_ai: Option<LinkRate>,
    /// The rate never goes below this (default 1 Gbps: run.py's MIN_RATE).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_rate: Option<LinkRate>,
    /// INT bytes each switch adds to a data packet (default 8: the paper's per-hop record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub int_bytes_per_hop: Option<Size>,
}

/// HPCC's parameters, validated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HpccSpec {
    pub eta: f64,
    pub max_stage: u32,
    pub rate_ai_bps: u64,
    pub min_rate_bps: u64,
    pub int_bytes_per_hop: u32,
}

impl HpccFile {
    /// `[transport.hpcc]` with every parameter the run uses.
    pub fn normalised(s: &HpccSpec) -> HpccFile {
        HpccFile {
            eta: Some(s.eta),
            max_stage: Some(s.max_stage as i64),
            rate_ai: Some(LinkRate(s.rate_ai_bps)),
            min_rate: Some(LinkRate(s.min_rate_bps)),
            int_bytes_per_hop: Some(Size(s.int_bytes_per_hop as u64)),
        }
    }

    pub fn validate(h: Option<&HpccFile>, host_rate_bps: u64) -> Res<HpccSpec> {
        let default = HpccFile::default();
        let h = h.unwrap_or(&default);
        let p = |key: &str| format!("transport.hpcc.{key}");
        let eta = match h.eta {
            Some(e) => fraction(&p("eta"), e, 0.01, 1.0)?,
            None => 0.95,
        };
        let max_stage = match h.max_stage {
            None => 0,
            Some(m) if (0..=1000).contains(&m) => m as u32,
            Some(m) => {
                return Err(ScenarioError::at(
                    p("max_stage"),
                    format!("expected 0..=1000, found {m}"),
                ))
            }
        };
        let rate_ai_bps = h.rate_ai.map_or(
            (host_rate_bps as u128 * 10_000_000 / 25_000_000_000).max(1) as u64,
            |r| r.0,
        );
        let min_rate_bps = h.min_rate.map_or(1_000_000_000.min(host_rate_bps), |r| r.0);
        if min_rate_bps == 0 || min_rate_bps > host_rate_bps {
            return Err(ScenarioError::at(
                p("min_rate"),
                "expected a positive rate at most the host link rate",
            ));
        }
        let int_bytes_per_hop = match h.int_bytes_per_hop {
            None => 8,
            Some(s) if s.0 <= 1024 => s.0 as u32,
            Some(_) => {
                return Err(ScenarioError::at(
                    p("int_bytes_per_hop"),
                    "expected at most 1024 bytes",
                ))
            }
        };
        Ok(HpccSpec {
            eta,
            max_stage,
            rate_ai_bps,
            min_rate_bps,
            int_bytes_per_hop,
        })
    }
}
