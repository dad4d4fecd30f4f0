//! `kind = "synthetic"`: open-loop synthetic traffic, as dragonfly routing is evaluated in the
//! literature (BookSim style): every host generates messages of one size at a fraction `load` of its
//! host link rate, counting wire bytes, from the workload's start until the scenario's stop time;
//! each message goes where the traffic pattern says and is one flow.
//!
//! Arrivals: `bernoulli` divides time into slots of one message's wire time at the host link rate
//! and generates a message at the start of a slot with probability `load` (drawn as geometric gaps
//! between successes, so the cost is per message, not per slot); `poisson` draws exponential gaps
//! (rounded to integer ps) with the same mean, slot / load. Senders are merged in time order, so flow
//! ids follow generation time (ties by host id).
//!
//! Three seeded streams per workload ([`RngStream::SyntheticArrivals`] and the next two): arrival times, destinations and the
//! permutation, so that changing the pattern does not move the arrivals.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::config::{start_of, Context, MAX_WORKLOAD_FLOWS};
use super::{FlowInit, FlowPlan};
use crate::config::check::{fraction, positive_size, Res};
use crate::config::hosts::Hosts;
use crate::config::values::{Duration, Size};
use crate::config::{ArrivalProcess, ScenarioError, StopAt, SyntheticPattern, SyntheticSpec};
use crate::ids::NodeId;
use crate::rng::{Rng, RngStream};
use crate::units::{Rate, Time};

/// `pattern` of a synthetic workload (BookSim-style traffic patterns).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PatternName {
    UniformRandom,
    WorstCase,
    Permutation,
    Tornado,
    Shift,
    HotSpot,
}

impl PatternName {
    fn name(self) -> &'static str {
        match self {
            PatternName::UniformRandom => "uniform_random",
            PatternName::WorstCase => "worst_case",
            PatternName::Permutation => "permutation",
            PatternName::Tornado => "tornado",
            PatternName::Shift => "shift",
            PatternName::HotSpot => "hot_spot",
        }
    }
}

/// `kind = "synthetic"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyntheticFile {
    /// Optional label carried into flows.arrow (defaults to `kind`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<f64>,
    /// `uniform_random`, `worst_case`, `permutation`, `tornado`, `shift` or `hot_spot`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<PatternName>,
    /// Arrival process: `bernoulli` (default, slotted) or `poisson`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<ArrivalProcess>,
    /// Pattern `shift`: host i sends to (i + shift) mod N (default: hosts per group).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shift: Option<i64>,
    /// Pattern `hot_spot`: the hot hosts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hot_spot: Option<Hosts>,
    /// Pattern `hot_spot`: the fraction of messages sent to a hot host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hot_fraction: Option<f64>,
}

impl SyntheticFile {
    /// With every default written out: the arrival process, a shift pattern's shift.
    pub fn normalised(&self, name: Option<String>, spec: &SyntheticSpec) -> SyntheticFile {
        SyntheticFile {
            name,
            start: Some(Duration(spec.start_ps)),
            size: Some(Size(spec.size_bytes)),
            load: Some(spec.load),
            process: Some(spec.process),
            shift: match spec.pattern {
                SyntheticPattern::Shift(s) => Some(s as i64),
                _ => None,
            },
            ..self.clone()
        }
    }

    pub fn validate(&self, ctx: &Context) -> Res<SyntheticSpec> {
        let p = |key: &str| ctx.path(key);
        let n_hosts = ctx.n_hosts;
        let start_ps = start_of(self.start);
        let end_ps = match ctx.stop {
            StopAt::Time(t) => t,
            StopAt::AllFlowsDone => return Err(ScenarioError::at(
                p("kind"),
                "a synthetic workload needs the top-level key stop = a time (e.g. stop = \"300us\"): \
                 its hosts inject until then",
            )),
        };
        if start_ps >= end_ps {
            return Err(ScenarioError::at(
                p("start"),
                "the workload starts at or after the scenario's stop time",
            ));
        }
        let pattern_name = self.pattern.ok_or_else(|| {
            ScenarioError::at(
                p("pattern"),
                "missing: expected one of \"uniform_random\", \"worst_case\", \"permutation\", \
                 \"tornado\", \"shift\", \"hot_spot\"",
            )
        })?;
        for (key, is_set, only) in [
            ("shift", self.shift.is_some(), PatternName::Shift),
            ("hot_spot", self.hot_spot.is_some(), PatternName::HotSpot),
            (
                "hot_fraction",
                self.hot_fraction.is_some(),
                PatternName::HotSpot,
            ),
        ] {
            if is_set && pattern_name != only {
                return Err(ScenarioError::at(
                    p(key),
                    format!(
                        "only for pattern = \"{}\", not \"{}\"",
                        only.name(),
                        pattern_name.name()
                    ),
                ));
            }
        }
        const LOAD: &str = "the offered load per host as a fraction of its host link rate";
        let load = match self.load {
            None => {
                return Err(ScenarioError::at(
                    p("load"),
                    format!("missing: expected {LOAD}, like 0.5"),
                ))
            }
            Some(l) if !(l.is_finite() && l > 0.0 && l <= 1.0) => {
                return Err(ScenarioError::at(
                    p("load"),
                    format!("expected {LOAD} in (0, 1], found {l}"),
                ))
            }
            Some(l) => l,
        };
        let size_bytes = match self.size {
            None => {
                return Err(ScenarioError::at(
                    p("size"),
                    "missing: expected a message size like \"4KiB\"",
                ))
            }
            Some(s) => positive_size(&p("size"), s.0)?,
        };
        let group_size = ctx.group_size.max(1);
        let groups = n_hosts / group_size;
        let two_groups = |what: &str| -> Res<()> {
            if groups < 2 {
                return Err(ScenarioError::at(
                    p("pattern"),
                    format!("{what} needs at least two groups; this topology has one group of {group_size} hosts"),
                ));
            }
            Ok(())
        };
        let pattern = match pattern_name {
            PatternName::UniformRandom => SyntheticPattern::UniformRandom,
            PatternName::Permutation => SyntheticPattern::Permutation,
            PatternName::WorstCase => {
                two_groups("worst_case")?;
                SyntheticPattern::WorstCase
            }
            PatternName::Tornado => {
                two_groups("tornado")?;
                SyntheticPattern::Tornado
            }
            PatternName::Shift => {
                let shift = self.shift.unwrap_or(group_size as i64);
                let s = shift.rem_euclid(n_hosts as i64);
                if s == 0 {
                    return Err(ScenarioError::at(
                        if self.shift.is_some() { p("shift") } else { p("pattern") },
                        format!(
                            "a shift of {shift} sends every host to itself (it is a multiple of the {n_hosts} hosts)"
                        ),
                    ));
                }
                SyntheticPattern::Shift(s as u32)
            }
            PatternName::HotSpot => {
                let list = self.hot_spot.as_ref().ok_or_else(|| {
                    ScenarioError::at(p("hot_spot"), "missing: expected a list of hot host ids")
                })?;
                let hosts = ctx.host_set(&p("hot_spot"), list)?;
                if hosts.is_empty() {
                    return Err(ScenarioError::at(
                        p("hot_spot"),
                        "expected at least one hot host",
                    ));
                }
                let fraction = match self.hot_fraction {
                    None => return Err(ScenarioError::at(
                        p("hot_fraction"),
                        "missing: expected the fraction of messages sent to a hot host, like 0.5",
                    )),
                    Some(f) => fraction(&p("hot_fraction"), f, 0.0, 1.0)?,
                };
                SyntheticPattern::HotSpot { hosts, fraction }
            }
        };
        let packets = size_bytes.div_ceil(ctx.mtu_bytes);
        let wire_bytes = size_bytes.saturating_add(packets.saturating_mul(ctx.header_bytes));
        let slot_ps = crate::units::serialisation_ps(wire_bytes, ctx.host_rate_bps).max(1);
        let expected = n_hosts as f64 * load * (end_ps - start_ps) as f64 / slot_ps as f64;
        if expected > MAX_WORKLOAD_FLOWS {
            return Err(ScenarioError::at(
                p("load"),
                format!(
                    "this would generate about {expected:.3e} messages (at most {MAX_WORKLOAD_FLOWS:.0e}): \
                     shorten the run, lower the load or send larger messages"
                ),
            ));
        }
        Ok(SyntheticSpec {
            pattern,
            process: self.process.unwrap_or(ArrivalProcess::Bernoulli),
            load,
            size_bytes,
            n_hosts,
            group_size,
            start_ps,
            end_ps,
            host_rate_bps: ctx.host_rate_bps,
            wire_bytes,
            slot_ps,
        })
    }
}

/// What a synthetic workload generated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SyntheticReport {
    pub target_load: f64,
    pub senders: u32,
    pub host_rate_bps: Rate,
    pub start_ps: Time,
    pub end_ps: Time,
    pub messages: u64,
    /// Wire bytes of every message generated (payload plus a header per packet).
    pub wire_bytes: u64,
}

impl SyntheticReport {
    /// Wire bits generated over the senders' capacity in `[start, end)`.
    pub fn offered_load(&self) -> Option<f64> {
        let window = self.end_ps.saturating_sub(self.start_ps);
        let capacity = self.senders as f64 * self.host_rate_bps as f64 * window as f64 * 1e-12;
        (capacity > 0.0).then(|| self.wire_bytes as f64 * 8.0 / capacity)
    }
}

/// The random streams of synthetic workload `index`: arrivals, destinations, permutation.
fn streams(seed: u64, index: usize) -> (Rng, Rng, Rng) {
    (
        RngStream::SyntheticArrivals(index).rng(seed),
        RngStream::SyntheticDestinations(index).rng(seed),
        RngStream::SyntheticPermutation(index).rng(seed),
    )
}

/// An exponential draw with the given mean, rounded to integer ps.
fn exponential_ps(rng: &mut Rng, mean: f64) -> u64 {
    // f64 -> u64 casts saturate.
    (-(1.0 - rng.unit()).ln() * mean).round() as u64
}

/// Failed slots before the next success of a Bernoulli(p) sequence (geometric on 0, 1, ...).
fn geometric_failures(rng: &mut Rng, p: f64) -> u64 {
    if p >= 1.0 {
        return 0;
    }
    let u = 1.0 - rng.unit(); // (0, 1]
    (u.ln() / (1.0 - p).ln()).floor() as u64
}

/// Picks the destination of each message of a pattern.
#[derive(Clone)]
pub struct Destinations {
    spec: Arc<SyntheticSpec>,
    /// Pattern `permutation`: the destination of each host.
    perm: Vec<u32>,
    rng: Rng,
}

impl Destinations {
    /// `perm_rng` draws the permutation (pattern `permutation` only), `rng` every later choice.
    pub fn new(spec: Arc<SyntheticSpec>, rng: Rng, perm_rng: &mut Rng) -> Self {
        let perm = match spec.pattern {
            SyntheticPattern::Permutation => {
                let hosts: Vec<u32> = (0..spec.n_hosts).collect();
                super::permutation::derangement(&hosts, perm_rng)
            }
            _ => Vec::new(),
        };
        Destinations { spec, perm, rng }
    }

    /// A uniformly random host other than `src`.
    fn other(&mut self, src: u32) -> u32 {
        let k = self.rng.below(self.spec.n_hosts as u64 - 1) as u32;
        if k >= src {
            k + 1
        } else {
            k
        }
    }

    /// The destination of the next message of `src`.
    pub fn pick(&mut self, src: u32) -> u32 {
        let n = self.spec.n_hosts;
        let gs = self.spec.group_size;
        let groups = n / gs;
        match &self.spec.pattern {
            SyntheticPattern::UniformRandom => self.other(src),
            SyntheticPattern::WorstCase => {
                let target = (src / gs + 1) % groups;
                target * gs + self.rng.below(gs as u64) as u32
            }
            SyntheticPattern::Permutation => self.perm[src as usize],
            SyntheticPattern::Tornado => {
                let offset = (groups / 2).max(1);
                ((src / gs + offset) % groups) * gs + src % gs
            }
            SyntheticPattern::Shift(s) => ((src as u64 + *s as u64) % n as u64) as u32,
            SyntheticPattern::HotSpot { hosts, fraction } => {
                if self.rng.unit() >= *fraction {
                    return self.other(src);
                }
                let k = self.rng.below(hosts.len() as u64) as usize;
                if hosts[k] != src {
                    return hosts[k];
                }
                // The sender drew itself: another hot host, or any other host if it is the only one.
                if hosts.len() == 1 {
                    return self.other(src);
                }
                let j = self.rng.below(hosts.len() as u64 - 1) as usize;
                hosts[if j >= k { j + 1 } else { j }]
            }
        }
    }
}

/// A synthetic workload's messages in time order (flow ids follow it), one per `next`: the
/// same draws whether the plan holds them all ([`expand`]) or makes them as the run goes
/// (`workload::stream`).
#[derive(Clone)]
pub struct SyntheticArrivals {
    spec: Arc<SyntheticSpec>,
    workload: u32,
    arrivals: Rng,
    dests: Destinations,
    /// Per host: the next candidate slot (Bernoulli); a heap of (arrival time, host).
    next_slot: Vec<u64>,
    heap: BinaryHeap<Reverse<(u64, u32)>>,
}

impl std::fmt::Debug for SyntheticArrivals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyntheticArrivals")
            .field("workload", &self.workload)
            .finish_non_exhaustive()
    }
}

impl SyntheticArrivals {
    /// The messages of `spec`, workload `workload` (index `index` in the scenario, whose
    /// random streams it uses).
    pub fn new(workload: u32, index: usize, spec: Arc<SyntheticSpec>, seed: u64) -> Self {
        let (arrivals, dest_rng, mut perm_rng) = streams(seed, index);
        let dests = Destinations::new(Arc::clone(&spec), dest_rng, &mut perm_rng);
        let n = spec.n_hosts;
        let mut a = SyntheticArrivals {
            next_slot: vec![0u64; n as usize],
            heap: BinaryHeap::with_capacity(n as usize),
            spec,
            workload,
            arrivals,
            dests,
        };
        for h in 0..n {
            if let Some(t) = a.next_arrival(h, None) {
                a.heap.push(Reverse((t, h)));
            }
        }
        a
    }

    /// Host `h`'s next message after `now` (None: the first), if before the end.
    fn next_arrival(&mut self, h: u32, now: Option<u64>) -> Option<u64> {
        let spec = &*self.spec;
        let rng = &mut self.arrivals;
        let t = match spec.process {
            ArrivalProcess::Bernoulli => {
                let slot = &mut self.next_slot[h as usize];
                let k = slot.saturating_add(geometric_failures(rng, spec.load));
                *slot = k.saturating_add(1);
                k.checked_mul(spec.slot_ps)
                    .and_then(|o| o.checked_add(spec.start_ps))?
            }
            ArrivalProcess::Poisson => now
                .unwrap_or(spec.start_ps)
                .checked_add(exponential_ps(rng, spec.slot_ps as f64 / spec.load))?,
        };
        (t < spec.end_ps).then_some(t)
    }
}

impl SyntheticArrivals {
    /// The next message's time and sender, its sender's following one drawn. (A pop and a
    /// push: replacing the top in place sifts it down comparing both children at every level,
    /// which cost more here, where the new time is late and a push rarely moves.)
    #[inline]
    fn advance(&mut self) -> Option<(u64, u32)> {
        let Reverse((t, src)) = self.heap.pop()?;
        if let Some(next) = self.next_arrival(src, Some(t)) {
            self.heap.push(Reverse((next, src)));
        }
        Some((t, src))
    }

    /// How many messages are left (their destinations, drawn from a stream of their own, not
    /// drawn): what a streamed plan counts at the build.
    pub fn count(mut self) -> u64 {
        let mut n = 0;
        while self.advance().is_some() {
            n += 1;
            if n % 4096 == 0 && crate::budget::cancelled() {
                break;
            }
        }
        n
    }
}

impl Iterator for SyntheticArrivals {
    type Item = FlowInit;

    fn next(&mut self) -> Option<FlowInit> {
        let (t, src) = self.advance()?;
        let dst = self.dests.pick(src);
        Some(FlowInit::at(
            NodeId::new(src),
            NodeId::new(dst),
            self.spec.size_bytes,
            t,
            self.workload,
        ))
    }
}

/// Generate every message of `spec` into `plan` (flows of workload `workload`, index `index` in
/// the scenario, whose random streams it uses); `stream`: count them only, for a plan that makes
/// them as the run goes (`workload::stream`).
pub fn expand(
    plan: &mut FlowPlan,
    workload: u32,
    index: usize,
    spec: &SyntheticSpec,
    seed: u64,
    stream: bool,
) -> SyntheticReport {
    let arrivals = SyntheticArrivals::new(workload, index, Arc::new(spec.clone()), seed);
    if stream {
        plan.streams.push(super::stream::StreamedFlows::new(
            plan.total_flows(),
            super::stream::ArrivalStream::Synthetic(arrivals.clone()),
        ));
    }
    let mut messages = 0u64;
    if stream {
        messages = arrivals.count();
    } else {
        for f in arrivals {
            plan.flows.push(f);
            messages += 1;
            if messages.is_multiple_of(4096) && crate::budget::cancelled() {
                break;
            }
        }
    }
    SyntheticReport {
        target_load: spec.load,
        senders: spec.n_hosts,
        host_rate_bps: spec.host_rate_bps,
        start_ps: spec.start_ps,
        end_ps: spec.end_ps,
        messages,
        wire_bytes: messages.saturating_mul(spec.wire_bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ArrivalProcess, SyntheticPattern, SyntheticSpec};

    fn spec(pattern: SyntheticPattern, n_hosts: u32, group_size: u32) -> SyntheticSpec {
        SyntheticSpec {
            pattern,
            process: ArrivalProcess::Bernoulli,
            load: 0.5,
            size_bytes: 4096,
            n_hosts,
            group_size,
            start_ps: 0,
            end_ps: 1_000_000_000,
            host_rate_bps: 100_000_000_000,
            wire_bytes: 4158,
            slot_ps: 332_640,
        }
    }

    fn dests(s: &SyntheticSpec, seed: u64) -> Destinations {
        let (_, d, mut p) = streams(seed, 0);
        Destinations::new(Arc::new(s.clone()), d, &mut p)
    }

    #[test]
    fn worst_case_lands_in_the_next_group() {
        // 6 groups of 8 hosts: every destination is in group (x + 1) mod 6, and every host of that
        // group is reached (200 draws per sender: missing one of 8 has probability < 1e-10).
        let s = spec(SyntheticPattern::WorstCase, 48, 8);
        let mut d = dests(&s, 1);
        for src in 0..48 {
            let mut seen = [false; 8];
            for _ in 0..200 {
                let dst = d.pick(src);
                assert_eq!(dst / 8, (src / 8 + 1) % 6, "src {src} dst {dst}");
                seen[(dst % 8) as usize] = true;
            }
            assert!(seen.iter().all(|&x| x), "src {src}");
        }
    }

    #[test]
    fn permutation_is_a_fixed_derangement() {
        for seed in 1..20 {
            let s = spec(SyntheticPattern::Permutation, 64, 16);
            let mut d = dests(&s, seed);
            let image: Vec<u32> = (0..64).map(|h| d.pick(h)).collect();
            let mut sorted = image.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..64).collect::<Vec<_>>(), "a bijection");
            assert!(image.iter().enumerate().all(|(h, &x)| h as u32 != x));
            // Fixed for the run: the same again.
            assert!((0..64).all(|h| d.pick(h) == image[h as usize]));
        }
    }

    #[test]
    fn tornado_and_shift_arithmetic() {
        // 9 groups of 4: offset floor(9/2) = 4; host 4*x + j -> 4*((x + 4) mod 9) + j.
        let s = spec(SyntheticPattern::Tornado, 36, 4);
        let mut d = dests(&s, 1);
        assert_eq!(d.pick(0), 16);
        assert_eq!(d.pick(5), 21);
        assert_eq!(d.pick(4 * 8 + 3), 4 * 3 + 3);
        // Two groups: offset 1, the halves swap.
        let s = spec(SyntheticPattern::Tornado, 16, 8);
        let mut d = dests(&s, 1);
        assert!((0..16).all(|h| d.pick(h) == (h + 8) % 16));
        let s = spec(SyntheticPattern::Shift(5), 16, 4);
        let mut d = dests(&s, 1);
        assert!((0..16).all(|h| d.pick(h) == (h + 5) % 16));
    }

    #[test]
    fn uniform_random_never_picks_the_sender_and_covers_the_others() {
        let s = spec(SyntheticPattern::UniformRandom, 8, 4);
        let mut d = dests(&s, 3);
        let mut counts = [0u32; 8];
        for _ in 0..7000 {
            let x = d.pick(2);
            assert_ne!(x, 2);
            counts[x as usize] += 1;
        }
        // 1000 expected per other host, sd ~ 29.5: within 5 sd.
        for (h, &c) in counts.iter().enumerate() {
            if h != 2 {
                assert!((c as i64 - 1000).abs() < 150, "host {h}: {c}");
            }
        }
    }

    #[test]
    fn hot_spot_fraction_within_statistical_bounds() {
        // 64 hosts, hot hosts {0, 1}, fraction 0.3. A message from a cold host reaches a hot host
        // with probability 0.3 + 0.7 x 2/63. Over n = 200000 draws the sd of the share is
        // sqrt(p(1-p)/n) ~ 0.0011; allow 5 sd.
        let s = spec(
            SyntheticPattern::HotSpot {
                hosts: vec![0, 1],
                fraction: 0.3,
            },
            64,
            8,
        );
        let mut d = dests(&s, 7);
        let n = 200_000;
        let mut hot = 0;
        for i in 0..n {
            let src = 2 + (i % 62) as u32;
            let x = d.pick(src);
            assert_ne!(x, src);
            if x < 2 {
                hot += 1;
            }
        }
        let p = 0.3 + 0.7 * 2.0 / 63.0;
        let share = hot as f64 / n as f64;
        let sd = (p * (1.0 - p) / n as f64).sqrt();
        assert!((share - p).abs() < 5.0 * sd, "share {share}, expected {p}");
        // A hot host never sends to itself.
        assert!((0..1000).all(|_| d.pick(0) != 0));
    }

    #[test]
    fn injection_rate_matches_the_load() {
        // Realised messages over N x window / slot slots: Bernoulli is Binomial(slots, load), sd
        // sqrt(slots x load x (1 - load)); Poisson has sd sqrt(mean). Allow 4 sd.
        for process in [ArrivalProcess::Bernoulli, ArrivalProcess::Poisson] {
            for load in [0.1, 0.5, 0.9, 1.0] {
                let mut s = spec(SyntheticPattern::UniformRandom, 64, 8);
                s.process = process;
                s.load = load;
                let mut plan = FlowPlan::default();
                let r = expand(&mut plan, 0, 0, &s, 11, false);
                let slots = 64.0 * (s.end_ps as f64 / s.slot_ps as f64);
                let mean = slots * load;
                let sd = match process {
                    ArrivalProcess::Bernoulli => (slots * load * (1.0 - load)).sqrt(),
                    ArrivalProcess::Poisson => mean.sqrt(),
                };
                let got = r.messages as f64;
                assert!(
                    (got - mean).abs() <= 4.0 * sd + 1.0 + 64.0,
                    "{process:?} load {load}: {got} messages, expected {mean} +- {sd}"
                );
                // Flows in time order, all inside the window, on slot boundaries for Bernoulli.
                assert!(plan
                    .flows
                    .windows(2)
                    .all(|w| match (w[0].start, w[1].start) {
                        (super::super::Start::At(a), super::super::Start::At(b)) => a <= b,
                        _ => false,
                    }));
                for f in &plan.flows {
                    let super::super::Start::At(t) = f.start else {
                        panic!()
                    };
                    assert!(t < s.end_ps);
                    if process == ArrivalProcess::Bernoulli {
                        assert_eq!(t % s.slot_ps, 0);
                    }
                }
                if load == 1.0 && process == ArrivalProcess::Bernoulli {
                    // Every slot.
                    assert_eq!(r.messages, 64 * s.end_ps.div_ceil(s.slot_ps));
                }
            }
        }
    }
}
