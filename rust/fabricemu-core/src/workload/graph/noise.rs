//! Compute noise of step workloads: per-op jitter and slow ranks (stragglers). The `noise` key
//! reads the same in every step workload (`graph`, `training`, `inference`):
//!
//! ```toml
//! noise = { jitter = "uniform", max = 0.1 }          # x ~ U[0, 0.1)
//! noise = { jitter = "half_normal", sigma = 0.05 }   # x = |N(0, 0.05)|
//! noise = { jitter = "exponential", mean = 0.02 }    # x ~ Exp(mean 0.02)
//! noise = { slow_ranks = { "3" = 1.25 } }            # rank 3 computes 25 % slower
//! ```
//!
//! Every compute op's duration is multiplied by (1 + x), x drawn per op (in op order) from the
//! workload's own random stream, and by its rank's slow factor. A slow link is a `[[fault]]` with
//! `kind = "degrade"` (the faults module), not a noise key.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::spec::{Graph, Jitter, Noise, OpKind};
use crate::config::check::Res;
use crate::config::ScenarioError;
use crate::rng::Rng;

/// The jitter distributions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JitterKind {
    Uniform,
    HalfNormal,
    Exponential,
}

/// `noise = { ... }` of a step workload, as written.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoiseFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter: Option<JitterKind>,
    /// Uniform: x in [0, max).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// Half-normal: x = |N(0, sigma)|.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sigma: Option<f64>,
    /// Exponential: the mean of x.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean: Option<f64>,
    /// Rank (as a string key: TOML keys are strings) -> factor >= 1 on its compute time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slow_ranks: Option<BTreeMap<String, f64>>,
}

/// The largest jitter parameter and slow factor accepted (a guard against typos).
const MAX_FACTOR: f64 = 1000.0;

impl NoiseFile {
    /// Check the key at `path` (e.g. `workload.0.noise`) for a graph of `ranks` ranks.
    pub fn check(&self, path: &str, ranks: u32) -> Res<Noise> {
        let key = |k: &str| format!("{path}.{k}");
        let param = |name: &str, v: Option<f64>, need: bool| -> Res<Option<f64>> {
            match (v, need) {
                (Some(_), false) => Err(ScenarioError::at(
                    key(name),
                    format!(
                        "not a parameter of jitter = {}",
                        self.jitter
                            .map_or("(none)".into(), |j| format!("\"{}\"", jitter_name(j)))
                    ),
                )),
                (None, true) => Err(ScenarioError::at(
                    key(name),
                    format!(
                        "missing: jitter = \"{}\" needs it",
                        jitter_name(self.jitter.expect("needed"))
                    ),
                )),
                (Some(x), true) if !(x.is_finite() && (0.0..=MAX_FACTOR).contains(&x)) => {
                    Err(ScenarioError::at(
                        key(name),
                        format!("expected a number in 0..={MAX_FACTOR}, found {x}"),
                    ))
                }
                (v, _) => Ok(v),
            }
        };
        let j = self.jitter;
        let max = param("max", self.max, j == Some(JitterKind::Uniform))?;
        let sigma = param("sigma", self.sigma, j == Some(JitterKind::HalfNormal))?;
        let mean = param("mean", self.mean, j == Some(JitterKind::Exponential))?;
        let jitter = j.map(|k| match k {
            JitterKind::Uniform => Jitter::Uniform {
                max: max.expect("checked"),
            },
            JitterKind::HalfNormal => Jitter::HalfNormal {
                sigma: sigma.expect("checked"),
            },
            JitterKind::Exponential => Jitter::Exponential {
                mean: mean.expect("checked"),
            },
        });
        let mut slow_ranks = Vec::new();
        for (r, &f) in self.slow_ranks.iter().flatten() {
            let p = key(&format!("slow_ranks.{r}"));
            let rank: u32 = match r.parse::<u32>() {
                Ok(x) if x < ranks => x,
                _ => {
                    return Err(ScenarioError::at(
                        p,
                        format!(
                            "expected a rank in 0..={} as the key, found {r:?}",
                            ranks.saturating_sub(1)
                        ),
                    ))
                }
            };
            if !(f.is_finite() && (1.0..=MAX_FACTOR).contains(&f)) {
                return Err(ScenarioError::at(
                    p,
                    format!(
                        "expected a slow-down factor in 1..={MAX_FACTOR} (1.25: 25 % slower), found {f}"
                    ),
                ));
            }
            slow_ranks.push((rank, f));
        }
        slow_ranks.sort_by_key(|&(r, _)| r);
        Ok(Noise { jitter, slow_ranks })
    }
}

fn jitter_name(j: JitterKind) -> &'static str {
    match j {
        JitterKind::Uniform => "uniform",
        JitterKind::HalfNormal => "half_normal",
        JitterKind::Exponential => "exponential",
    }
}

impl Jitter {
    /// One draw of x.
    pub fn draw(self, rng: &mut Rng) -> f64 {
        match self {
            Jitter::Uniform { max } => rng.unit() * max,
            Jitter::HalfNormal { sigma } => {
                // Box-Muller; 1 - u is in (0, 1].
                let (u1, u2) = (1.0 - rng.unit(), rng.unit());
                ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()).abs() * sigma
            }
            Jitter::Exponential { mean } => -(1.0 - rng.unit()).ln() * mean,
        }
    }
}

/// Scale every compute op of `graph` by its noise: (1 + x) with x drawn per op in op order (one
/// draw per compute op, whatever its rank), times its rank's slow factor; rounded to the nearest
/// picosecond.
pub fn apply(graph: &mut Graph, noise: &Noise, rng: &mut Rng) {
    let mut slow = vec![1.0f64; graph.ranks.len()];
    for &(r, f) in &noise.slow_ranks {
        if let Some(s) = slow.get_mut(r as usize) {
            *s = f;
        }
    }
    for op in &mut graph.ops {
        if let OpKind::Compute { rank, duration_ps } = &mut op.kind {
            let x = noise.jitter.map_or(0.0, |j| j.draw(rng));
            let factor = (1.0 + x) * slow.get(*rank as usize).copied().unwrap_or(1.0);
            if factor != 1.0 {
                *duration_ps = (*duration_ps as f64 * factor).round().min(u64::MAX as f64) as u64;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::RngStream;
    use crate::workload::graph::{GraphOp, OpPhase};

    fn compute(rank: u32, d: u64) -> GraphOp {
        GraphOp {
            kind: OpKind::Compute {
                rank,
                duration_ps: d,
            },
            deps: vec![],
            iteration: 0,
            phase: OpPhase::Forward,
            name: None,
        }
    }

    #[test]
    fn slow_ranks_scale_only_their_rank_and_jitter_stays_in_range() {
        let mut g = Graph {
            ranks: vec![0, 1],
            ops: (0..200).map(|i| compute(i % 2, 1_000_000)).collect(),
            iterations: 1,
            ..Graph::default()
        };
        let noise = NoiseFile {
            slow_ranks: Some([("1".to_string(), 1.5)].into()),
            jitter: Some(JitterKind::Uniform),
            max: Some(0.1),
            ..NoiseFile::default()
        }
        .check("n", 2)
        .unwrap();
        apply(&mut g, &noise, &mut RngStream::GraphNoise(0).rng(1));
        let d = |i: usize| match g.ops[i].kind {
            OpKind::Compute { duration_ps, .. } => duration_ps,
            _ => unreachable!(),
        };
        for i in 0..200 {
            let lo = if i % 2 == 1 { 1_500_000 } else { 1_000_000 };
            assert!(d(i) >= lo && d(i) < lo * 11 / 10 + 1, "op {i}: {}", d(i));
        }
        assert!(
            (0..200)
                .map(d)
                .collect::<std::collections::HashSet<_>>()
                .len()
                > 150
        );
    }

    #[test]
    fn distributions_have_their_means() {
        let mut rng = RngStream::GraphNoise(0).rng(7);
        let n = 200_000;
        for (j, mean) in [
            (Jitter::Uniform { max: 0.2 }, 0.1),
            (
                Jitter::HalfNormal { sigma: 0.1 },
                0.1 * (2.0 / std::f64::consts::PI).sqrt(),
            ),
            (Jitter::Exponential { mean: 0.05 }, 0.05),
        ] {
            let m = (0..n).map(|_| j.draw(&mut rng)).sum::<f64>() / n as f64;
            assert!(
                (m - mean).abs() < 0.01 * mean + 1e-4,
                "{j:?}: {m} vs {mean}"
            );
        }
    }

    #[test]
    fn bad_noise_names_the_key() {
        let e = |f: NoiseFile| f.check("workload.0.noise", 4).unwrap_err().to_string();
        let uniform = NoiseFile {
            jitter: Some(JitterKind::Uniform),
            ..NoiseFile::default()
        };
        assert!(e(uniform.clone()).contains("workload.0.noise.max"));
        let wrong = NoiseFile {
            sigma: Some(0.1),
            max: Some(0.1),
            ..uniform
        };
        assert!(e(wrong).contains("workload.0.noise.sigma"));
        let slow = NoiseFile {
            slow_ranks: Some([("9".to_string(), 2.0)].into()),
            ..NoiseFile::default()
        };
        assert!(e(slow).contains("workload.0.noise.slow_ranks.9"));
        let fast = NoiseFile {
            slow_ranks: Some([("1".to_string(), 0.5)].into()),
            ..NoiseFile::default()
        };
        assert!(e(fast).contains("slow-down factor"));
    }
}
