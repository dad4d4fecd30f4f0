//! Jobs that react to failures: what a failure that cuts off one of a step workload's ranks does
//! to the job (`on_failure`), and, in the build phase, which failures do (episodes).
//!
//! - `"stall"`: synchronous training blocks: a rank that cannot reach the others blocks every
//!   collective of its groups, so the whole job waits. The job freezes from the failure until
//!   `detection` after the repair (the job notices the repair and reconnects), then carries on
//!   where it was; transfers that were waiting resend what was not acknowledged at once.
//! - `"restart"`: the job notices the failure `detection` after it (a collective's timeout),
//!   aborts, and restarts from its last checkpoint once the failed part is back: it resumes
//!   `restart_time` after the later of detection and repair. The work since the checkpoint is
//!   lost: the iterations completed since then (they no longer count) and the interrupted
//!   iteration's part before the failure (redone, as a pause of the same length, after resuming).
//!   Saving a checkpoint may take time (`checkpoint_time`): the job pauses that long after each.
//! - `"elastic"`: the job notices the failure `detection` after it and the survivors re-form
//!   their groups without the failed ranks (and the ranks of their model replicas: those sharing
//!   a tensor-, pipeline- or expert-parallel op with one), which takes `reformation_time`; the
//!   job then goes on with the smaller group, losing no work: the collectives not yet ended are
//!   re-planned over the surviving ranks (the interrupted one starts over). A rank leaves when
//!   it is itself cut off (a rank cut off later in an episode, later: another re-formation).
//!   The failed ranks rejoin (`rejoin = "next_step"`, the default) at the first iteration end
//!   at which they are reachable again (every failure cutting them off repaired), with another
//!   re-formation, or never (`"never"`).
//!
//! Which ranks a failure cuts off follows from the fabric, computed here from the resolved
//! faults: a rank is cut off while its endpoint shares no live part of the fabric with most of
//! the job's endpoints (its server, its NIC or the NIC's only link down; a switch or fabric link
//! only when no path remains). Routing's detection delay does not count: only what remains
//! after reconvergence matters.

use std::ops::Range;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use crate::config::check::Res;
use crate::config::values::Duration;
use crate::config::ScenarioError;
use crate::ids::{NodeId, PortId};
use crate::scenario::FaultKind;
use crate::topology::faults::LinkFault;
use crate::topology::Fabric;
use crate::units::Time;
use crate::workload::config::Context;

/// `on_failure`'s values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnFailureName {
    Stall,
    Restart,
    Elastic,
}

/// `rejoin`'s values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RejoinName {
    NextStep,
    Never,
}

/// `checkpoint_interval`: every n iterations (an integer) or every so long (a duration).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CheckpointFile {
    Iterations(i64),
    Time(Duration),
}

impl Serialize for CheckpointFile {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            CheckpointFile::Iterations(n) => s.serialize_i64(*n),
            CheckpointFile::Time(d) => d.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for CheckpointFile {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = CheckpointFile;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a number of iterations like 10 or a duration like \"2ms\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<CheckpointFile, E> {
                Duration::deserialize(de::value::StrDeserializer::<E>::new(v))
                    .map(CheckpointFile::Time)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<CheckpointFile, E> {
                Ok(CheckpointFile::Iterations(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<CheckpointFile, E> {
                Ok(CheckpointFile::Iterations(v.min(i64::MAX as u64) as i64))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<CheckpointFile, E> {
                Err(E::custom(format!(
                    "expected a number of iterations like 10 or a duration like \"2ms\", found {v}"
                )))
            }
        }
        d.deserialize_any(V)
    }
}

/// The keys a step workload (`graph`, `training`, `inference`) takes for its reaction.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ReactionKeys {
    pub on_failure: Option<OnFailureName>,
    pub restart_time: Option<Duration>,
    pub checkpoint_interval: Option<CheckpointFile>,
    pub detection: Option<Duration>,
    pub reformation_time: Option<Duration>,
    pub rejoin: Option<RejoinName>,
    pub checkpoint_time: Option<Duration>,
}

/// When a restarting job has a checkpoint to go back to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checkpoint {
    /// After every n-th iteration that counts.
    Iterations(u32),
    /// At the first iteration end at least this long after the previous checkpoint (or the
    /// job's start).
    Time(Time),
}

/// What a failure does to a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnFailure {
    Stall,
    Restart {
        restart_ps: Time,
        checkpoint: Checkpoint,
        /// Saving a checkpoint: the job pauses this long after each.
        checkpoint_save_ps: Time,
    },
    Elastic {
        /// Re-forming the groups (after detection; and on a rejoin).
        reformation_ps: Time,
        /// The failed ranks rejoin at the first iteration end after their repair.
        rejoin: bool,
    },
}

/// `reformation_time`'s default: 1 s, a chosen default of the order of what re-forming a NCCL
/// communicator over a torchelastic rendezvous takes (docs/failures.md); set the measured one.
pub const DEFAULT_REFORMATION_PS: Time = 1_000_000_000_000;

impl OnFailure {
    pub fn name(self) -> &'static str {
        match self {
            OnFailure::Stall => "stall",
            OnFailure::Restart { .. } => "restart",
            OnFailure::Elastic { .. } => "elastic",
        }
    }
}

/// A validated reaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reaction {
    pub on_failure: OnFailure,
    /// Stall: from the repair to the job's resuming; restart: from the failure to the abort.
    pub detection_ps: Time,
}

/// The longest re-formation or checkpoint save: an hour.
const MAX_REFORMATION_PS: Time = 3_600 * 1_000_000_000_000;

/// The most iterations between checkpoints.
const MAX_CHECKPOINT_ITERATIONS: i64 = 1_000_000;

impl ReactionKeys {
    /// The reaction these keys describe (None without `on_failure`), or an error naming the key.
    pub fn check(&self, ctx: &Context) -> Res<Option<Reaction>> {
        let p = |k: &str| ctx.path(k);
        let Some(mode) = self.on_failure else {
            for (key, given) in [
                ("restart_time", self.restart_time.is_some()),
                ("checkpoint_interval", self.checkpoint_interval.is_some()),
                ("detection", self.detection.is_some()),
                ("reformation_time", self.reformation_time.is_some()),
                ("rejoin", self.rejoin.is_some()),
                ("checkpoint_time", self.checkpoint_time.is_some()),
            ] {
                if given {
                    return Err(ScenarioError::at(
                        p(key),
                        "applies only with on_failure (\"stall\", \"restart\" or \
                         \"elastic\"): add on_failure or leave out this key",
                    ));
                }
            }
            return Ok(None);
        };
        let detection_ps = self.detection.map_or(0, |d| d.0);
        if mode != OnFailureName::Elastic {
            for (key, given) in [
                ("reformation_time", self.reformation_time.is_some()),
                ("rejoin", self.rejoin.is_some()),
            ] {
                if given {
                    return Err(ScenarioError::at(
                        p(key),
                        "applies only with on_failure = \"elastic\" (the job re-forms its \
                         groups without the failed ranks)",
                    ));
                }
            }
        }
        if mode != OnFailureName::Restart && self.checkpoint_time.is_some() {
            return Err(ScenarioError::at(
                p("checkpoint_time"),
                "applies only with on_failure = \"restart\" (with checkpoint_interval: the \
                 time saving a checkpoint takes)",
            ));
        }
        let on_failure = match mode {
            OnFailureName::Elastic => {
                for (key, given) in [
                    ("restart_time", self.restart_time.is_some()),
                    ("checkpoint_interval", self.checkpoint_interval.is_some()),
                ] {
                    if given {
                        return Err(ScenarioError::at(
                            p(key),
                            "applies only with on_failure = \"restart\" (an elastic job goes \
                             on without the failed ranks and loses no work)",
                        ));
                    }
                }
                let reformation_ps = self
                    .reformation_time
                    .map_or(DEFAULT_REFORMATION_PS, |d| d.0);
                if reformation_ps > MAX_REFORMATION_PS {
                    return Err(ScenarioError::at(
                        p("reformation_time"),
                        format!(
                            "expected at most 3600s (the time re-forming the groups takes), found \
                             {reformation_ps} ps"
                        ),
                    ));
                }
                OnFailure::Elastic {
                    reformation_ps,
                    rejoin: self.rejoin.unwrap_or(RejoinName::NextStep) == RejoinName::NextStep,
                }
            }
            OnFailureName::Stall => {
                for (key, given) in [
                    ("restart_time", self.restart_time.is_some()),
                    ("checkpoint_interval", self.checkpoint_interval.is_some()),
                ] {
                    if given {
                        return Err(ScenarioError::at(
                            p(key),
                            "applies only with on_failure = \"restart\" (a stalled job waits \
                             for the repair and loses no work)",
                        ));
                    }
                }
                OnFailure::Stall
            }
            OnFailureName::Restart => {
                let restart_ps = self
                    .restart_time
                    .ok_or_else(|| {
                        ScenarioError::at(
                            p("restart_time"),
                            "missing: on_failure = \"restart\" needs the time a restart takes \
                             (load the checkpoint, rejoin), like \"200us\"",
                        )
                    })?
                    .0;
                let checkpoint =
                    match self.checkpoint_interval {
                        None => return Err(ScenarioError::at(
                            p("checkpoint_interval"),
                            "missing: on_failure = \"restart\" needs how often the job saves a \
                             checkpoint: a number of iterations like 10 or a duration like \
                             \"2ms\"",
                        )),
                        Some(CheckpointFile::Iterations(n)) => {
                            if !(1..=MAX_CHECKPOINT_ITERATIONS).contains(&n) {
                                return Err(ScenarioError::at(
                                    p("checkpoint_interval"),
                                    format!(
                                        "expected a number of iterations from 1 to \
                                     {MAX_CHECKPOINT_ITERATIONS}, found {n}"
                                    ),
                                ));
                            }
                            Checkpoint::Iterations(n as u32)
                        }
                        Some(CheckpointFile::Time(d)) => {
                            if d.0 == 0 {
                                return Err(ScenarioError::at(
                                    p("checkpoint_interval"),
                                    "expected a positive duration (or a number of iterations), \
                                 found 0",
                                ));
                            }
                            Checkpoint::Time(d.0)
                        }
                    };
                let checkpoint_save_ps = self.checkpoint_time.map_or(0, |d| d.0);
                if checkpoint_save_ps > MAX_REFORMATION_PS {
                    return Err(ScenarioError::at(
                        p("checkpoint_time"),
                        format!(
                            "expected at most 3600s (the time saving a checkpoint takes), found \
                             {checkpoint_save_ps} ps"
                        ),
                    ));
                }
                OnFailure::Restart {
                    restart_ps,
                    checkpoint,
                    checkpoint_save_ps,
                }
            }
        };
        Ok(Some(Reaction {
            on_failure,
            detection_ps,
        }))
    }
}

/// A time when some of a job's ranks are cut off: from `fail_ps` (a failure cut the first one
/// off) to `repair_ps` (none is any more, routing knowing it: a fault's links count as back
/// its detection delay after it ends; None: never). Overlapping failures make
/// one episode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Episode {
    pub fail_ps: Time,
    pub repair_ps: Option<Time>,
    /// The endpoints cut off at some time during the episode, sorted.
    pub endpoints: Vec<u32>,
    /// The fault (index into the resolved faults) that started it.
    pub fault: u32,
    /// When each endpoint was cut off within the episode: one entry per interval (an endpoint
    /// may be cut off, reachable again and cut off again within one episode), sorted by start
    /// then endpoint. An elastic job excludes a rank when it is itself cut off, and takes it
    /// back only when it is reachable again.
    pub cuts: Vec<Cut>,
}

/// An endpoint cut off from `from_ps` to `until_ps` (reachable again then, routing knowing
/// it; None: not before the episode's end, which is never).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut {
    pub endpoint: u32,
    pub from_ps: Time,
    pub until_ps: Option<Time>,
}

impl Episode {
    /// The times at which endpoints are newly cut off within the episode (the first is
    /// `fail_ps`), sorted.
    pub fn waves(&self) -> Vec<Time> {
        let mut w: Vec<Time> = self.cuts.iter().map(|c| c.from_ps).collect();
        w.sort_unstable();
        w.dedup();
        w
    }
}

/// A step workload that reacts to failures, as planned.
#[derive(Debug, Clone, PartialEq)]
pub struct JobPlan {
    pub workload: u32,
    pub reaction: Reaction,
    /// Its barriers (two per op from `barriers.start`: ready, done; then its collectives'
    /// inner barriers), ops (in `FlowPlan::ops`) and flows.
    pub barriers: Range<u32>,
    pub ops: Range<usize>,
    pub flows: Range<usize>,
    /// Its endpoints (GPUs or hosts), sorted.
    pub endpoints: Vec<u32>,
    pub iterations: u32,
    pub start_ps: Time,
    /// One iteration of the network-free schedule (`Graph::ideal_schedule`): what the job would
    /// take per iteration if communication were free (None if it has no ideal, e.g. inference).
    pub ideal_iteration_ps: Option<Time>,
    /// Its collectives' parameters (an elastic job re-plans them during the run).
    pub params: Option<crate::workload::graph::CollectiveParams>,
    /// Filled in by the build once the faults are resolved ([`episodes`]).
    pub episodes: Vec<Episode>,
}

/// An elastic job re-plans its collectives during the run over the surviving ranks: refused
/// for collectives whose switch contexts are placed when the run is built (in-network, NVLS).
impl JobPlan {
    /// Whether the job goes on without the ranks a failure cuts off (`on_failure = "elastic"`).
    pub fn is_elastic(&self) -> bool {
        matches!(self.reaction.on_failure, OnFailure::Elastic { .. })
    }

    /// The barriers of the job's ops (each op's ready and done, in op order): their releases
    /// are the ops' starts and ends, from which the job's state follows.
    pub fn op_barriers(&self) -> std::ops::Range<usize> {
        let start = self.barriers.start as usize;
        start..(start + 2 * self.ops.len()).min(self.barriers.end as usize)
    }
}

pub fn check_elastic(ops: &[crate::workload::graph::PlannedOp], workload: usize) -> Res<()> {
    for op in ops {
        if let crate::workload::graph::PlannedKind::Collective { algorithm, .. } = op.kind {
            if algorithm.is_in_network() {
                return Err(ScenarioError::at(
                    format!("workload.{workload}.on_failure"),
                    format!(
                        "\"elastic\" re-plans the job's collectives over the surviving ranks \
                         during the run; its {} collectives hold switch contexts placed when the \
                         run is built: use a flat or hierarchical algorithm, or \"stall\" / \
                         \"restart\"",
                        algorithm.name()
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Union-find over nodes.
struct Parts {
    parent: Vec<u32>,
}

impl Parts {
    fn new(n: usize) -> Self {
        Self {
            parent: (0..n as u32).collect(),
        }
    }
    fn find(&mut self, mut x: u32) -> u32 {
        while self.parent[x as usize] != x {
            let p = self.parent[self.parent[x as usize] as usize];
            self.parent[x as usize] = p;
            x = p;
        }
        x
    }
    fn union(&mut self, a: u32, b: u32) {
        let (a, b) = (self.find(a), self.find(b));
        if a != b {
            let (lo, hi) = (a.min(b), a.max(b));
            self.parent[hi as usize] = lo;
        }
    }
}

/// Which of a job's endpoints are cut off, kept up to date as links go down and come back (the
/// build phase walks every fault's start and end, tens of thousands of them under an aggressive
/// failure process, so nothing is recomputed that a change did not touch).
///
/// A cable carries traffic while both its directions are up; switches forward, endpoints do not.
/// The endpoints that touch the live part of the fabric most of them touch are connected (ties:
/// the part with the lowest node); the others are cut off.
struct Reachability<'a> {
    fabric: &'a Fabric,
    endpoints: &'a [u32],
    /// Per node: its index in `endpoints`, or `u32::MAX`.
    endpoint_of: Vec<u32>,
    /// Faults holding each directed link (egress port) down.
    down: Vec<u32>,
    /// The switches' live parts; recomputed when a switch-to-switch cable changes.
    parts: Parts,
    /// The cables between two switches (one direction each), listed once: what `parts` is
    /// made from.
    switch_cables: Vec<PortId>,
    /// The switches with a cable to another switch: the only nodes whose part can change
    /// (every other node is a part of its own).
    linked: Vec<u32>,
    /// Per endpoint: the parts its live cables reach, sorted.
    touched: Vec<Vec<u32>>,
    /// Per part: how many endpoints touch it.
    count: std::collections::BTreeMap<u32, u32>,
    /// What changed since the last `cut`: a switch-to-switch cable, and which endpoints.
    fabric_changed: bool,
    changed: Vec<u32>,
    /// Endpoints re-touched so far (what the tests check is not redone needlessly).
    retouched: u64,
}

impl<'a> Reachability<'a> {
    fn new(fabric: &'a Fabric, endpoints: &'a [u32]) -> Self {
        let mut endpoint_of = vec![u32::MAX; fabric.num_nodes as usize];
        for (i, &e) in endpoints.iter().enumerate() {
            endpoint_of[e as usize] = i as u32;
        }
        let f = fabric;
        let switch_cables: Vec<PortId> = f
            .ports()
            .filter(|&p| {
                let (a, b) = (f.port_node[p], f.peer_node[p]);
                !f.is_host(a) && !f.is_host(b) && p < f.peer_port[p]
            })
            .collect();
        let mut linked: Vec<u32> = switch_cables
            .iter()
            .flat_map(|&p| [f.port_node[p].get(), f.peer_node[p].get()])
            .collect();
        linked.sort_unstable();
        linked.dedup();
        Self {
            fabric,
            endpoints,
            endpoint_of,
            down: vec![0; fabric.num_ports() as usize],
            parts: Parts::new(fabric.num_nodes as usize),
            switch_cables,
            linked,
            touched: vec![Vec::new(); endpoints.len()],
            count: Default::default(),
            fabric_changed: true,
            // Every endpoint's touched parts are worked out at the first `cut`.
            changed: (0..endpoints.len() as u32).collect(),
            retouched: 0,
        }
    }

    fn up(&self, p: PortId) -> bool {
        self.down[p.index()] == 0 && self.down[self.fabric.peer_port[p].index()] == 0
    }

    /// One more (`add`) or one fewer fault holds egress port `p` down.
    fn hold(&mut self, p: PortId, add: bool) {
        let d = &mut self.down[p.index()];
        let was = *d > 0;
        if add {
            *d += 1;
        } else {
            *d -= 1;
        }
        if was == (*d > 0) {
            return;
        }
        let f = self.fabric;
        let (a, b) = (f.port_node[p], f.peer_node[p]);
        if !f.is_host(a) && !f.is_host(b) {
            self.fabric_changed = true;
        }
        for n in [a, b] {
            let e = self.endpoint_of[n.index()];
            if e != u32::MAX {
                self.changed.push(e);
            }
        }
    }

    /// Endpoint `e`'s touched parts recomputed, and the parts' counts with them.
    fn retouch(&mut self, e: usize) {
        self.retouched += 1;
        let f = self.fabric;
        let mut t = std::mem::take(&mut self.touched[e]);
        for c in &t {
            let v = self.count.get_mut(c).expect("counted");
            *v -= 1;
            if *v == 0 {
                self.count.remove(c);
            }
        }
        t.clear();
        for p in f.ports_of(NodeId::new(self.endpoints[e])) {
            let b = f.peer_node[p];
            if self.up(p) && !f.is_host(b) {
                t.push(self.parts.find(b.get()));
            }
        }
        t.sort_unstable();
        t.dedup();
        for &c in &t {
            *self.count.entry(c).or_default() += 1;
        }
        self.touched[e] = t;
    }

    /// The endpoints cut off now, in `endpoints` order.
    fn cut(&mut self) -> Vec<u32> {
        if self.fabric_changed {
            let f = self.fabric;
            let mut parts = Parts::new(f.num_nodes as usize);
            for &p in &self.switch_cables {
                if self.up(p) {
                    parts.union(f.port_node[p].get(), f.peer_node[p].get());
                }
            }
            // A part is named by its lowest node (`Parts::union`), so the same names for every
            // linked switch are the same parts: the endpoints' touched parts stand (a cable
            // between two spines' leaves going down in a fabric with other paths changes
            // nothing, and re-touching every endpoint at each such change made the build of a
            // 16,384-GPU job under a fabric failure process take seconds).
            let old = &mut self.parts;
            if self.linked.iter().any(|&n| parts.find(n) != old.find(n)) {
                self.changed.clear();
                self.changed.extend(0..self.endpoints.len() as u32);
            }
            self.parts = parts;
            self.fabric_changed = false;
        }
        let mut changed = std::mem::take(&mut self.changed);
        changed.sort_unstable();
        changed.dedup();
        for &e in &changed {
            self.retouch(e as usize);
        }
        changed.clear();
        self.changed = changed;
        let Some(best) = self.count.values().copied().max() else {
            return self.endpoints.to_vec(); // nothing is connected to anything
        };
        let main = self
            .count
            .iter()
            .find(|&(_, &v)| v == best)
            .map(|(&c, _)| c)
            .expect("a maximum");
        self.endpoints
            .iter()
            .zip(&self.touched)
            .filter(|(_, t)| !t.contains(&main))
            .map(|(&e, _)| e)
            .collect()
    }
}

/// The episodes of a job on `endpoints`: the times some are cut off by the `down` faults
/// (degradations, loss and delay do not cut anything off).
pub fn episodes(fabric: &Fabric, faults: &[LinkFault], endpoints: &[u32]) -> Vec<Episode> {
    let downs: Vec<usize> = (0..faults.len())
        .filter(|&i| matches!(faults[i].kind, FaultKind::Down))
        .collect();
    if downs.is_empty() {
        return Vec::new();
    }
    // A fault's links count as back when routing notices (its detection delay after its end):
    // before that, traffic to them is still dropped.
    let back = |i: usize| {
        faults[i]
            .until_ps
            .map(|u| u.saturating_add(faults[i].detection_ps))
    };
    let mut times: Vec<Time> = downs
        .iter()
        .flat_map(|&i| std::iter::once(faults[i].at_ps).chain(back(i)))
        .collect();
    times.sort_unstable();
    times.dedup();
    let mut reach = Reachability::new(fabric, endpoints);
    // Faults sorted by start and by end, walked alongside the times.
    let mut by_start = downs.clone();
    by_start.sort_by_key(|&i| (faults[i].at_ps, i));
    let mut by_end: Vec<usize> = downs
        .iter()
        .copied()
        .filter(|&i| faults[i].until_ps.is_some())
        .collect();
    by_end.sort_by_key(|&i| (back(i), i));
    let (mut si, mut ei) = (0, 0);
    let mut out: Vec<Episode> = Vec::new();
    let mut open: Option<Episode> = None;
    // The endpoints of the open episode, marked (its list is sorted when it closes).
    let mut in_open = vec![false; fabric.num_nodes as usize];
    // The endpoints cut off now, in `endpoints` order, with their interval (index in `cuts`).
    let mut now_cut: Vec<(u32, usize)> = Vec::new();
    for &t in &times {
        let mut first_start = None;
        while ei < by_end.len() && back(by_end[ei]) == Some(t) {
            let f = &faults[by_end[ei]];
            if f.at_ps < t {
                for l in f.links.iter() {
                    reach.hold(l.egress(), false);
                }
            }
            ei += 1;
        }
        while si < by_start.len() && faults[by_start[si]].at_ps == t {
            let i = by_start[si];
            let f = &faults[i];
            if back(i).is_none_or(|u| u > t) {
                for l in f.links.iter() {
                    reach.hold(l.egress(), true);
                }
                first_start.get_or_insert(i as u32);
            }
            si += 1;
        }
        let cut = reach.cut();
        if !cut.is_empty() {
            let e = open.get_or_insert_with(|| Episode {
                fail_ps: t,
                repair_ps: None,
                endpoints: Vec::new(),
                fault: first_start.unwrap_or(0),
                cuts: Vec::new(),
            });
            // The cut-off intervals: those of endpoints no longer cut off end now (`cut` is in
            // `endpoints` order, like `now_cut`), those of newly cut-off ones begin.
            let mut still = Vec::with_capacity(now_cut.len());
            for &(c, i) in &now_cut {
                if cut
                    .binary_search_by_key(&reach.endpoint_of[c as usize], |&x| {
                        reach.endpoint_of[x as usize]
                    })
                    .is_ok()
                {
                    still.push((c, i));
                } else {
                    e.cuts[i].until_ps = Some(t);
                }
            }
            let mut began = Vec::new();
            for c in cut {
                if !std::mem::replace(&mut in_open[c as usize], true) {
                    e.endpoints.push(c);
                }
                if still
                    .binary_search_by_key(&reach.endpoint_of[c as usize], |&(x, _)| {
                        reach.endpoint_of[x as usize]
                    })
                    .is_err()
                {
                    e.cuts.push(Cut {
                        endpoint: c,
                        from_ps: t,
                        until_ps: None,
                    });
                    began.push((c, e.cuts.len() - 1));
                }
            }
            still.extend(began);
            still.sort_unstable_by_key(|&(x, _)| reach.endpoint_of[x as usize]);
            now_cut = still;
        } else if let Some(mut e) = open.take() {
            e.repair_ps = Some(t);
            for &(_, i) in &now_cut {
                e.cuts[i].until_ps = Some(t);
            }
            now_cut.clear();
            close(&mut e, &mut in_open);
            out.push(e);
        }
    }
    if let Some(mut e) = open {
        close(&mut e, &mut in_open);
        out.push(e);
    }
    out
}

/// An episode's endpoints and cut-off intervals sorted, and their marks cleared for the next.
fn close(e: &mut Episode, marks: &mut [bool]) {
    e.endpoints.sort_unstable();
    e.cuts.sort_unstable_by_key(|c| (c.from_ps, c.endpoint));
    for &c in &e.endpoints {
        marks[c as usize] = false;
    }
}

impl ReactionKeys {
    /// The keys with every default written out (see `scenario::normalise`), from the validated
    /// reaction: none without one; a stall's detection; a restart's time, checkpoint interval and
    /// detection (the keys that do not apply to the mode stay absent: they are errors there).
    pub fn normalised(r: Option<&Reaction>) -> ReactionKeys {
        let Some(r) = r else {
            return ReactionKeys::default();
        };
        let detection = Some(Duration(r.detection_ps));
        match r.on_failure {
            OnFailure::Stall => ReactionKeys {
                on_failure: Some(OnFailureName::Stall),
                detection,
                ..ReactionKeys::default()
            },
            OnFailure::Restart {
                restart_ps,
                checkpoint,
                checkpoint_save_ps,
            } => ReactionKeys {
                on_failure: Some(OnFailureName::Restart),
                restart_time: Some(Duration(restart_ps)),
                checkpoint_interval: Some(match checkpoint {
                    Checkpoint::Iterations(n) => CheckpointFile::Iterations(n as i64),
                    Checkpoint::Time(t) => CheckpointFile::Time(Duration(t)),
                }),
                detection,
                // Absent: saving takes no time (ABSENT_MEANS).
                checkpoint_time: (checkpoint_save_ps > 0).then_some(Duration(checkpoint_save_ps)),
                ..ReactionKeys::default()
            },
            OnFailure::Elastic {
                reformation_ps,
                rejoin,
            } => ReactionKeys {
                on_failure: Some(OnFailureName::Elastic),
                detection,
                reformation_time: Some(Duration(reformation_ps)),
                rejoin: Some(if rejoin {
                    RejoinName::NextStep
                } else {
                    RejoinName::Never
                }),
                ..ReactionKeys::default()
            },
        }
    }
}

/// Keys of a step workload whose absence from a normalised scenario is itself the setting.
pub const ABSENT_MEANS: &[(&str, &str)] = &[
    (
        "workload.*.on_failure",
        "the job does not react to failures",
    ),
    ("workload.*.detection", "no reaction to failures"),
    (
        "workload.*.restart_time",
        "applies only with on_failure = \"restart\"",
    ),
    (
        "workload.*.checkpoint_interval",
        "applies only with on_failure = \"restart\"",
    ),
    (
        "workload.*.checkpoint_time",
        "saving a checkpoint takes no time (and applies only with on_failure = \"restart\")",
    ),
    (
        "workload.*.reformation_time",
        "applies only with on_failure = \"elastic\"",
    ),
    (
        "workload.*.rejoin",
        "applies only with on_failure = \"elastic\"",
    ),
];

/// `reaction_keys()` and `set_reaction_keys()` for a step workload's file struct: the
/// reaction keys are fields of its own (serde's `flatten` does not combine with
/// `deny_unknown_fields`), read and written here once for every kind.
macro_rules! reaction_fields {
    ($($file:ty),*) => {$(
        impl $file {
            /// The keys of its reaction to failures.
            pub fn reaction_keys(&self) -> ReactionKeys {
                ReactionKeys {
                    on_failure: self.on_failure,
                    restart_time: self.restart_time,
                    checkpoint_interval: self.checkpoint_interval,
                    detection: self.detection,
                    reformation_time: self.reformation_time,
                    rejoin: self.rejoin,
                    checkpoint_time: self.checkpoint_time,
                }
            }

            /// Set the keys of its reaction to failures (the normalised scenario).
            pub fn set_reaction_keys(&mut self, r: ReactionKeys) {
                self.on_failure = r.on_failure;
                self.restart_time = r.restart_time;
                self.checkpoint_interval = r.checkpoint_interval;
                self.detection = r.detection;
                self.reformation_time = r.reformation_time;
                self.rejoin = r.rejoin;
                self.checkpoint_time = r.checkpoint_time;
            }
        }
    )*};
}

reaction_fields!(
    crate::workload::training::TrainingFile,
    crate::workload::inference::InferenceFile,
    crate::workload::graph::GraphFile
);

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::ids::LinkId;
    use crate::topology::faults::FaultSource;

    /// Which endpoints are cut off under `active` faults, recomputed from nothing (the
    /// definition `Reachability` keeps up to date).
    fn cut_from_scratch(fabric: &Fabric, active: &[&LinkFault], endpoints: &[u32]) -> Vec<u32> {
        let mut down = vec![false; fabric.num_ports() as usize];
        for f in active {
            for l in f.links.iter() {
                down[l.egress().index()] = true;
            }
        }
        let up = |p: PortId| !down[p.index()] && !down[fabric.peer_port[p].index()];
        let mut parts = Parts::new(fabric.num_nodes as usize);
        for p in fabric.ports() {
            let (a, b) = (fabric.port_node[p], fabric.peer_node[p]);
            if !fabric.is_host(a) && !fabric.is_host(b) && up(p) {
                parts.union(a.get(), b.get());
            }
        }
        let touched: Vec<Vec<u32>> = endpoints
            .iter()
            .map(|&e| {
                let mut t: Vec<u32> = fabric
                    .ports_of(NodeId::new(e))
                    .filter(|&p| up(p) && !fabric.is_host(fabric.peer_node[p]))
                    .map(|p| parts.find(fabric.peer_node[p].get()))
                    .collect();
                t.sort_unstable();
                t.dedup();
                t
            })
            .collect();
        let mut count = std::collections::BTreeMap::<u32, u32>::new();
        for c in touched.iter().flatten() {
            *count.entry(*c).or_default() += 1;
        }
        let Some(&best) = count.values().max() else {
            return endpoints.to_vec();
        };
        let main = *count.iter().find(|(_, &v)| v == best).expect("max").0;
        endpoints
            .iter()
            .zip(&touched)
            .filter(|(_, t)| !t.contains(&main))
            .map(|(&e, _)| e)
            .collect()
    }

    /// The episodes, with every instant's cut-off set recomputed from the faults active then.
    fn episodes_from_scratch(
        fabric: &Fabric,
        faults: &[LinkFault],
        endpoints: &[u32],
    ) -> Vec<Episode> {
        let back = |f: &LinkFault| f.until_ps.map(|u| u + f.detection_ps);
        let mut times: Vec<Time> = faults
            .iter()
            .flat_map(|f| std::iter::once(f.at_ps).chain(back(f)))
            .collect();
        times.sort_unstable();
        times.dedup();
        let (mut out, mut open) = (Vec::new(), None::<Episode>);
        for t in times {
            let live = |f: &&LinkFault| f.at_ps <= t && back(f).is_none_or(|b| b > t);
            let active: Vec<&LinkFault> = faults.iter().filter(live).collect();
            let cut = cut_from_scratch(fabric, &active, endpoints);
            // Close the intervals of the endpoints no longer cut off.
            if let Some(e) = &mut open {
                for c in e.cuts.iter_mut() {
                    if c.until_ps.is_none() && !cut.contains(&c.endpoint) {
                        c.until_ps = Some(t);
                    }
                }
            }
            if cut.is_empty() {
                if let Some(mut e) = open.take() {
                    e.repair_ps = Some(t);
                    e.cuts.sort_by_key(|c| (c.from_ps, c.endpoint));
                    out.push(e);
                }
                continue;
            }
            let first = faults
                .iter()
                .position(|f| f.at_ps == t && live(&f))
                .unwrap_or(0) as u32;
            let e = open.get_or_insert_with(|| Episode {
                fail_ps: t,
                repair_ps: None,
                endpoints: Vec::new(),
                fault: first,
                cuts: Vec::new(),
            });
            for &c in &cut {
                if !e
                    .cuts
                    .iter()
                    .any(|x| x.endpoint == c && x.until_ps.is_none())
                {
                    e.cuts.push(Cut {
                        endpoint: c,
                        from_ps: t,
                        until_ps: None,
                    });
                }
            }
            e.endpoints.extend(cut);
            e.endpoints.sort_unstable();
            e.endpoints.dedup();
        }
        if let Some(mut e) = open {
            e.cuts.sort_by_key(|c| (c.from_ps, c.endpoint));
            out.push(e);
        }
        out
    }

    /// A leaf-spine of 4 leaves of 4 hosts and 2 spines.
    fn four_leaves_two_spines() -> Fabric {
        let (_, s) = crate::scenario::parse_toml(
            "[topology]\nkind = \"leaf_spine\"\nleaves = 4\nhosts_per_leaf = 4\nspines = 2\n\
             [[workload]]\nkind = \"permutation\"\nsize = \"1MB\"",
            "t.toml",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        crate::topology::build(&s.topology, &s.switch)
    }

    /// A cable between two switches that leaves the switches connected changes no endpoint's
    /// reach: nothing is re-touched (every endpoint was, at each such change, until 2026-12-05:
    /// seconds of the build of a 16,384-GPU job under a fabric failure process). One whose loss
    /// cuts a leaf off re-touches them all, and the leaf's endpoints are cut off.
    #[test]
    fn a_switch_cable_that_splits_nothing_retouches_no_endpoint() {
        let fabric = four_leaves_two_spines();
        let endpoints: Vec<u32> = (0..fabric.num_hosts).collect();
        let mut reach = Reachability::new(&fabric, &endpoints);
        assert!(reach.cut().is_empty());
        assert_eq!(reach.retouched, 16, "every endpoint at the first cut");
        // Leaf 0's two cables to the spines.
        let leaf = fabric.peer_node[fabric.host_port(NodeId::new(0))];
        let uplinks: Vec<PortId> = fabric
            .ports_of(leaf)
            .filter(|&p| !fabric.is_host(fabric.peer_node[p]))
            .collect();
        assert_eq!(uplinks.len(), 2);
        reach.hold(uplinks[0], true);
        assert!(reach.cut().is_empty());
        assert_eq!(reach.retouched, 16, "one spine left: nothing changes");
        reach.hold(uplinks[1], true);
        let cut = reach.cut();
        assert_eq!(reach.retouched, 32, "the leaf is split off");
        assert_eq!(cut.len(), 4, "{cut:?}");
        reach.hold(uplinks[0], false);
        assert!(reach.cut().is_empty());
        assert_eq!(reach.retouched, 48);
    }

    #[test]
    fn episodes_kept_up_to_date_equal_episodes_recomputed_at_every_instant() {
        let fabric = four_leaves_two_spines();
        let endpoints: Vec<u32> = (0..fabric.num_hosts).filter(|h| h % 3 != 1).collect();
        let ports: Vec<PortId> = fabric.ports().collect();
        let mut r = crate::rng::stream(7, crate::rng::Purpose::Workload, 0);
        for round in 0..200 {
            let faults: Vec<LinkFault> = (0..1 + r.below(12))
                .map(|_| {
                    // A cable, one direction, or every cable of a node.
                    let p = ports[r.below(ports.len() as u64) as usize];
                    let mut links = match r.below(3) {
                        0 => vec![p, fabric.peer_port[p]],
                        1 => vec![p],
                        _ => fabric
                            .ports_of(fabric.port_node[p])
                            .flat_map(|q| [q, fabric.peer_port[q]])
                            .collect(),
                    };
                    links.sort_unstable();
                    let at_ps = r.below(20) * 100;
                    LinkFault {
                        source: FaultSource::Process(0),
                        kind_name: "down",
                        kind: FaultKind::Down,
                        target: Arc::from("t"),
                        links: links.into_iter().map(LinkId::of_egress).collect(),
                        at_ps,
                        until_ps: (r.below(5) > 0).then(|| at_ps + r.below(10) * 100),
                        detection_ps: r.below(3) * 50,
                    }
                })
                .collect();
            assert_eq!(
                episodes(&fabric, &faults, &endpoints),
                episodes_from_scratch(&fabric, &faults, &endpoints),
                "round {round}: {faults:?}"
            );
        }
    }
}
