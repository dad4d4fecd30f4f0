//! `kind = "incast"`: every sender sends `size` to one receiver at once; with `rounds`, each round
//! starts `round_gap` after the previous round's last flow finished.

use serde::{Deserialize, Serialize};

use super::config::{start_of, Context};
use crate::config::check::{count, host_id, within_time_range, Res};
use crate::config::hosts::{is_selector, Hosts};
use crate::config::values::{Duration, Size};
use crate::config::{IncastSenders, ScenarioError, WorkloadSpec};
use crate::rng::{Rng, RngStream};

use super::{FlowInit, FlowPlan, Start};
use crate::ids::NodeId;
use crate::units::Time;

#[allow(clippy::too_many_arguments)]
pub fn expand(
    plan: &mut FlowPlan,
    workload: u32,
    receiver: u32,
    senders: &[u32],
    size_bytes: u64,
    start_ps: Time,
    rounds: u32,
    round_gap_ps: Time,
) {
    let mut previous: Option<u32> = None;
    for round in 0..rounds {
        let barrier = (round + 1 < rounds).then(|| plan.barrier(senders.len() as u32));
        let start = match previous {
            None => Start::At(start_ps),
            Some(b) => Start::After {
                barrier: b,
                gap: round_gap_ps,
            },
        };
        for &s in senders {
            plan.flows.push(FlowInit {
                start,
                completes: barrier,
                ..FlowInit::at(
                    NodeId::new(s),
                    NodeId::new(receiver),
                    size_bytes,
                    0,
                    workload,
                )
            });
        }
        previous = barrier;
    }
}

/// `senders = 63` (that many distinct hosts, drawn with the seed), `senders = [1, 2, 3]` or host
/// selectors (`senders = "server:1"`, `["rack:0", 40]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Senders {
    Count(i64),
    List(Hosts),
}

/// `kind = "incast"`: senders to one receiver at once, optionally in rounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IncastFile {
    /// Optional label carried into flows.arrow (defaults to `kind`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub senders: Option<Senders>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round_gap: Option<Duration>,
}

impl IncastFile {
    /// With every default written out (the senders as written: a count is drawn when built).
    pub fn normalised(&self, name: Option<String>, spec: &WorkloadSpec) -> IncastFile {
        let WorkloadSpec::Incast {
            receiver,
            size_bytes,
            start_ps,
            rounds,
            round_gap_ps,
            ..
        } = *spec
        else {
            unreachable!("an incast's spec")
        };
        IncastFile {
            name,
            start: Some(Duration(start_ps)),
            size: Some(Size(size_bytes)),
            receiver: Some(receiver as i64),
            senders: self.senders.clone(),
            rounds: Some(rounds as i64),
            round_gap: Some(Duration(round_gap_ps)),
        }
    }

    pub fn validate(&self, ctx: &Context) -> Res<WorkloadSpec> {
        let n_hosts = ctx.n_hosts;
        let receiver = match self.receiver {
            None => {
                return Err(ScenarioError::at(
                    ctx.path("receiver"),
                    "missing: expected a host id",
                ))
            }
            Some(r) => host_id(ctx.path("receiver"), r, n_hosts)?,
        };
        let senders = match &self.senders {
            None => {
                return Err(ScenarioError::at(
                    ctx.path("senders"),
                    "missing: expected a count or a list of host ids",
                ))
            }
            Some(Senders::Count(c)) => IncastSenders::Drawn {
                count: count(
                    &ctx.path("senders"),
                    Some(*c),
                    1,
                    n_hosts as i64 - 1,
                    "a number of senders",
                )?,
                n_hosts,
            },
            Some(Senders::List(Hosts::Select(text))) if !is_selector(text) => {
                return Err(ScenarioError::at(
                    ctx.path("senders"),
                    format!(
                        "expected a number of senders or a list of host ids (or a selector like \
                         \"server:3\"), found \"{text}\""
                    ),
                ))
            }
            Some(Senders::List(list)) => {
                let out = ctx.host_set(&ctx.path("senders"), list)?;
                if out.is_empty() {
                    return Err(ScenarioError::at(
                        ctx.path("senders"),
                        "expected at least one sender",
                    ));
                }
                if out.contains(&receiver) {
                    // The entry that names it (an id, or the selector that includes it).
                    let path = match list {
                        Hosts::List(items) => {
                            let j = items
                                .iter()
                                .position(|item| {
                                    ctx.host_set("", &Hosts::List(vec![item.clone()]))
                                        .is_ok_and(|ids| ids.contains(&receiver))
                                })
                                .unwrap_or(0);
                            ctx.path(&format!("senders.{j}"))
                        }
                        Hosts::Select(_) => ctx.path("senders"),
                    };
                    return Err(ScenarioError::at(
                        path,
                        "the receiver cannot be one of the senders",
                    ));
                }
                IncastSenders::Listed(out)
            }
        };
        let rounds = count(
            &ctx.path("rounds"),
            Some(self.rounds.unwrap_or(1)),
            1,
            1_000_000,
            "a number of rounds",
        )?;
        let round_gap_ps = self.round_gap.map(|d| d.0).unwrap_or(0);
        within_time_range(&ctx.path("round_gap"), round_gap_ps, rounds - 1, "rounds")?;
        Ok(WorkloadSpec::Incast {
            receiver,
            senders,
            size_bytes: ctx.size(self.size, "a flow size like \"1MB\"")?,
            start_ps: start_of(self.start),
            rounds,
            round_gap_ps,
        })
    }
}

/// The senders of incast workload `index`: the listed ones, or `count` distinct hosts other than
/// the receiver drawn from the workload's own stream.
pub fn resolve_senders(
    senders: &IncastSenders,
    receiver: u32,
    seed: u64,
    index: usize,
) -> Vec<u32> {
    match senders {
        IncastSenders::Listed(list) => list.clone(),
        IncastSenders::Drawn { count, n_hosts } => {
            let mut others: Vec<u32> = (0..*n_hosts).filter(|&h| h != receiver).collect();
            let mut r: Rng = RngStream::IncastSenders(index).rng(seed);
            r.shuffle(&mut others);
            others.truncate(*count as usize);
            others.sort_unstable();
            others
        }
    }
}
