//! `kind = "poisson"`: every sender starts flows as a Poisson process, sizes drawn from a CDF, at a
//! target load of its host link.
//!
//! Load is offered payload: a sender at load L on a link of rate R starts flows at the rate
//! L x R / (8 x mean flow size), so its payload bits average L x R per second (headers come on top:
//! with 62 B per 4 KiB packet, about 1.5 % more on the wire; the run reports both). This is the
//! definition of the HPCC and DCQCN evaluations. Destinations are drawn uniformly among the other
//! hosts of the group (or among a sender's configured pairs), so receivers see the same load on
//! average. Arrivals are generated until the end of the window (`duration`, or the scenario's stop
//! time) or until `count` flows, whichever comes first; flow ids follow arrival time.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::cdf::{self, Cdf};
use super::config::{start_of, Context, MAX_WORKLOAD_FLOWS};
use super::{FlowInit, FlowPlan, PoissonReport};
use crate::config::check::{host_id, quoted_list, Res};
use crate::config::hosts::Hosts;
use crate::config::values::Duration;
use crate::config::{CdfSource, PoissonPeers, PoissonSpec, ScenarioError, StopAt};
use crate::ids::NodeId;
use crate::rng::Rng;
use crate::units::PS_PER_SEC;

/// `kind = "poisson"`: Poisson arrivals sized from a CDF at a target load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoissonFile {
    /// Optional label carried into flows.arrow (defaults to `kind`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Host ids and selectors (`"server:3"`, `"rack:1"`, `"rail:2"`); default: every host.
    pub hosts: Option<Hosts>,
    /// A shipped CDF name (`websearch`, `datamining`, `fb_hadoop`, `alistorage`, `google_rpc`) or the
    /// path of a CSV file of `size_bytes,cdf` points.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cdf: Option<String>,
    /// Offered load per sender as a fraction of its host link rate (payload bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<f64>,
    /// Flows arrive during this long after `start` (default: until the scenario's stop time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<Duration>,
    /// At most this many flows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<i64>,
    /// Only these [src, dst] pairs (instead of random pairs among `hosts`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pairs: Option<Vec<Vec<i64>>>,
}

impl PoissonFile {
    /// With every default written out: the arrival window as a `duration` (by default it runs
    /// to the stop time); hosts and pairs as written.
    pub fn normalised(&self, name: Option<String>, spec: &PoissonSpec) -> PoissonFile {
        PoissonFile {
            name,
            start: Some(Duration(spec.start_ps)),
            duration: spec.end_ps.map(|e| Duration(e - spec.start_ps)),
            load: Some(spec.load),
            count: spec.count.map(|c| c as i64),
            ..self.clone()
        }
    }

    pub fn validate(&self, ctx: &Context) -> Res<PoissonSpec> {
        let p = |key: &str| ctx.path(key);
        let start_ps = start_of(self.start);
        let cdf_name = self.cdf.as_ref().ok_or_else(|| {
            ScenarioError::at(
                p("cdf"),
                format!(
                    "missing: expected a flow-size distribution: one of {} or the path of a CSV file",
                    quoted_list(&cdf::builtin_names())
                ),
            )
        })?;
        let builtin = Cdf::builtin(cdf_name);
        let cdf = match &builtin {
            Some(_) => CdfSource::Builtin,
            None => {
                let looks_like_path =
                    cdf_name.contains('/') || cdf_name.contains('\\') || cdf_name.contains('.');
                if !looks_like_path {
                    return Err(ScenarioError::at(
                        p("cdf"),
                        format!(
                            "expected one of {} or the path of a CSV file (size_bytes,cdf), found {cdf_name:?}",
                            quoted_list(&cdf::builtin_names())
                        ),
                    ));
                }
                CdfSource::File
            }
        };
        const LOAD: &str = "the offered load as a fraction of the host link rate";
        let load = match self.load {
            None => {
                return Err(ScenarioError::at(
                    p("load"),
                    format!("missing: expected {LOAD}, like 0.5"),
                ))
            }
            Some(l) if !(l.is_finite() && l > 0.0 && l <= 10.0) => {
                return Err(ScenarioError::at(
                    p("load"),
                    format!("expected {LOAD} in (0, 10], like 0.5, found {l}"),
                ))
            }
            Some(l) => l,
        };
        let (senders, peers) = match (&self.pairs, &self.hosts) {
            (Some(_), Some(_)) => {
                return Err(ScenarioError::at(
                    p("pairs"),
                    "give either hosts (random pairs among them) or pairs, not both",
                ))
            }
            (Some(pairs), None) => self.pairs(ctx, pairs)?,
            (None, hosts) => {
                let hosts = ctx.hosts_or_all("hosts", hosts.as_ref(), "a poisson workload")?;
                (hosts.clone(), PoissonPeers::Among(hosts))
            }
        };
        let end_ps = match (self.duration, ctx.stop) {
            (Some(d), _) => {
                if d.0 == 0 {
                    return Err(ScenarioError::at(
                        p("duration"),
                        "expected a positive duration",
                    ));
                }
                // No flow is generated at or after the stop time: it could never start.
                let end = start_ps.saturating_add(d.0);
                match ctx.stop {
                    StopAt::Time(t) if t <= start_ps => {
                        return Err(ScenarioError::at(
                            p("start"),
                            "the workload starts after the scenario's stop time",
                        ))
                    }
                    StopAt::Time(t) => Some(end.min(t)),
                    StopAt::AllFlowsDone => Some(end),
                }
            }
            (None, StopAt::Time(t)) => {
                if t <= start_ps {
                    return Err(ScenarioError::at(
                        p("start"),
                        "the workload starts after the scenario's stop time",
                    ));
                }
                Some(t)
            }
            (None, StopAt::AllFlowsDone) => None,
        };
        let count = match self.count {
            None => None,
            Some(c) if c < 1 => {
                return Err(ScenarioError::at(
                    p("count"),
                    format!("expected a positive number of flows, found {c}"),
                ))
            }
            Some(c) => Some(c as u64),
        };
        if end_ps.is_none() && count.is_none() {
            return Err(ScenarioError::at(
                p("duration"),
                "missing: with stop = \"all_flows_done\", give the arrival window (duration = \"5ms\") \
                 or a number of flows (count = 10000)",
            ));
        }
        let spec = PoissonSpec {
            cdf_name: cdf_name.clone(),
            cdf,
            load,
            senders,
            peers,
            start_ps,
            end_ps,
            count,
            host_rate_bps: ctx.host_rate_bps,
            mtu_bytes: ctx.mtu_bytes,
            header_bytes: ctx.header_bytes,
        };
        if let Some(c) = &builtin {
            check_volume(ctx.index, &spec, c)?;
        }
        Ok(spec)
    }

    fn pairs(&self, ctx: &Context, pairs: &[Vec<i64>]) -> Res<(Vec<u32>, PoissonPeers)> {
        if pairs.is_empty() {
            return Err(ScenarioError::at(
                ctx.path("pairs"),
                "expected at least one pair",
            ));
        }
        let mut senders: Vec<u32> = Vec::new();
        let mut dsts: Vec<Vec<u32>> = Vec::new();
        let mut index_of: Vec<Option<usize>> = vec![None; ctx.n_hosts as usize];
        for (j, pair) in pairs.iter().enumerate() {
            let pp = ctx.path(&format!("pairs.{j}"));
            if pair.len() != 2 {
                return Err(ScenarioError::at(
                    pp,
                    format!("expected a pair [src, dst], found {} values", pair.len()),
                ));
            }
            let src = host_id(format!("{pp}.0"), pair[0], ctx.n_hosts)?;
            let dst = host_id(format!("{pp}.1"), pair[1], ctx.n_hosts)?;
            if src == dst {
                return Err(ScenarioError::at(
                    format!("{pp}.1"),
                    "a pair's dst must differ from its src",
                ));
            }
            let k = *index_of[src as usize].get_or_insert_with(|| {
                senders.push(src);
                dsts.push(Vec::new());
                senders.len() - 1
            });
            if dsts[k].contains(&dst) {
                return Err(ScenarioError::at(pp, "pair listed twice"));
            }
            dsts[k].push(dst);
        }
        Ok((senders, PoissonPeers::Pairs(dsts)))
    }
}

/// Refuse a workload `index` that would generate more than [`MAX_WORKLOAD_FLOWS`] flows (expected
/// number: senders x window / mean gap, at most `count`).
pub fn check_volume(index: usize, spec: &PoissonSpec, cdf: &Cdf) -> Res<()> {
    let expected = match spec.end_ps {
        Some(end) => {
            spec.senders.len() as f64 * (end - spec.start_ps) as f64 / mean_gap_ps(spec, cdf)
        }
        None => f64::INFINITY,
    }
    .min(spec.count.map_or(f64::INFINITY, |c| c as f64));
    if expected > MAX_WORKLOAD_FLOWS {
        let key = if spec.count.is_some() && spec.end_ps.is_none() {
            "count"
        } else {
            "duration"
        };
        return Err(ScenarioError::at(
            format!("workload.{index}.{key}"),
            format!(
                "this would generate about {expected:.3e} flows (at most {MAX_WORKLOAD_FLOWS:.0e}): \
                 shorten the window or lower the count"
            ),
        ));
    }
    Ok(())
}

/// Mean time between two flows of one sender, in ps.
pub fn mean_gap_ps(spec: &PoissonSpec, cdf: &Cdf) -> f64 {
    cdf.mean_bytes() * 8.0 * PS_PER_SEC as f64 / (spec.load * spec.host_rate_bps as f64)
}

/// The distribution of `spec`: shipped, or read from its CSV file (relative paths from the
/// current directory) when the scenario is built.
pub fn load_cdf(index: usize, spec: &PoissonSpec) -> Res<Arc<Cdf>> {
    let path = format!("workload.{index}.cdf");
    let name = &spec.cdf_name;
    match spec.cdf {
        CdfSource::Builtin => Cdf::builtin(name).map(Arc::new).ok_or_else(|| {
            ScenarioError::at(path.as_str(), format!("no shipped distribution {name:?}"))
        }),
        CdfSource::File => {
            let cdf = Cdf::read_file(std::path::Path::new(name))
                .map_err(|e| ScenarioError::at(path.as_str(), format!("{name}: {e}")))?;
            check_volume(index, spec, &cdf)?;
            Ok(Arc::new(cdf))
        }
    }
}

/// An exponential draw with the given mean.
fn exponential(rng: &mut Rng, mean: f64) -> f64 {
    -(1.0 - rng.unit()).ln() * mean
}

/// A Poisson workload's arrivals in time order (flow ids follow it), one flow per `next`: the
/// whole draw sequence from one random stream, so the flows made as the run goes (a streamed
/// plan, `workload::stream`) are the ones [`expand`] makes up front.
#[derive(Clone)]
pub struct PoissonArrivals {
    spec: Arc<PoissonSpec>,
    cdf: Arc<Cdf>,
    rng: Rng,
    workload: u32,
    mean_gap: f64,
    end: u64,
    limit: u64,
    made: u64,
    /// Per sender: time since `start` of its next arrival (exact sum of the gaps), and a heap
    /// of (arrival in ps, sender) to merge the senders in time order.
    clock: Vec<f64>,
    heap: BinaryHeap<Reverse<(u64, u32)>>,
    done: bool,
}

impl std::fmt::Debug for PoissonArrivals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoissonArrivals")
            .field("workload", &self.workload)
            .field("made", &self.made)
            .finish_non_exhaustive()
    }
}

impl PoissonArrivals {
    /// The arrivals of `spec` for workload `workload`, drawn from `rng` (its plan stream).
    pub fn new(workload: u32, spec: Arc<PoissonSpec>, cdf: Arc<Cdf>, mut rng: Rng) -> Self {
        let mean_gap = mean_gap_ps(&spec, &cdf);
        let n = spec.senders.len();
        let mut clock: Vec<f64> = Vec::with_capacity(n);
        let mut heap: BinaryHeap<Reverse<(u64, u32)>> = BinaryHeap::with_capacity(n);
        for s in 0..n {
            let first = exponential(&mut rng, mean_gap);
            clock.push(first);
            heap.push(Reverse((at(&spec, first), s as u32)));
        }
        PoissonArrivals {
            end: spec.end_ps.unwrap_or(u64::MAX),
            limit: spec.count.unwrap_or(u64::MAX),
            spec,
            cdf,
            rng,
            workload,
            mean_gap,
            made: 0,
            clock,
            heap,
            done: false,
        }
    }
}

/// The arrival `offset` ps after the workload's start (saturating).
fn at(spec: &PoissonSpec, offset: f64) -> u64 {
    let t = offset.round();
    if t >= (u64::MAX - spec.start_ps) as f64 {
        u64::MAX
    } else {
        spec.start_ps + t as u64
    }
}

impl Iterator for PoissonArrivals {
    type Item = FlowInit;

    fn next(&mut self) -> Option<FlowInit> {
        if self.done {
            return None;
        }
        let Some(Reverse((t, s))) = self.heap.pop() else {
            self.done = true;
            return None;
        };
        if t >= self.end || self.made >= self.limit {
            self.done = true;
            return None;
        }
        let spec = &*self.spec;
        let rng = &mut self.rng;
        let si = s as usize;
        let src = spec.senders[si];
        let dst = match &spec.peers {
            PoissonPeers::Among(hosts) => {
                // Uniform among the others: skip the sender's own position.
                let k = rng.below(hosts.len() as u64 - 1) as usize;
                hosts[if k >= si { k + 1 } else { k }]
            }
            PoissonPeers::Pairs(dsts) => {
                let list = &dsts[si];
                list[rng.below(list.len() as u64) as usize]
            }
        };
        let size = self.cdf.sample(rng.unit());
        self.made += 1;
        self.clock[si] += exponential(rng, self.mean_gap);
        self.heap.push(Reverse((at(spec, self.clock[si]), s)));
        Some(FlowInit::at(
            NodeId::new(src),
            NodeId::new(dst),
            size,
            t,
            self.workload,
        ))
    }
}

/// Generate every flow of `spec` into `plan` (`stream`: count them only, for a plan that makes
/// them as the run goes; see `workload::stream`), and report what was generated.
pub fn expand(
    plan: &mut FlowPlan,
    workload: u32,
    spec: &PoissonSpec,
    cdf: &Arc<Cdf>,
    rng: Rng,
    stream: bool,
) -> (PoissonReport, u64) {
    let arrivals = PoissonArrivals::new(workload, Arc::new(spec.clone()), Arc::clone(cdf), rng);
    if stream {
        plan.streams.push(super::stream::StreamedFlows::new(
            plan.total_flows(),
            super::stream::ArrivalStream::Poisson(arrivals.clone()),
        ));
    }
    let mut made = 0u64;
    let mut payload = 0u64;
    let mut wire = 0u64;
    let mut last = spec.start_ps;
    for f in arrivals {
        if made % 4096 == 4095 && crate::budget::cancelled() {
            break;
        }
        made += 1;
        let size = f.size_bytes;
        payload = payload.saturating_add(size);
        let packets = size.div_ceil(spec.mtu_bytes);
        wire = wire.saturating_add(size.saturating_add(packets.saturating_mul(spec.header_bytes)));
        last = match f.start {
            super::Start::At(t) => t,
            super::Start::After { .. } => last,
        };
        if !stream {
            plan.flows.push(f);
        }
    }
    let limit = spec.count.unwrap_or(u64::MAX);
    let window_ps = match spec.end_ps {
        Some(e) if made < limit => e - spec.start_ps,
        _ => last - spec.start_ps,
    };
    let report = PoissonReport {
        target_load: spec.load,
        senders: spec.senders.len() as u32,
        host_rate_bps: spec.host_rate_bps,
        window_ps,
        payload_bytes: payload,
        wire_bytes: wire,
        mean_flow_bytes: cdf.mean_bytes(),
    };
    (report, made)
}
