//! Jobs that react to failures (`on_failure` on a step workload; see
//! `workload::graph::reaction`). The build found when failures cut off a job's ranks (its
//! episodes); here the job freezes for each: from the failure until it resumes (stall: detection
//! after the repair; restart: restart time after the later of detection and repair, plus the
//! interrupted iteration's redone part).
//!
//! A frozen job starts nothing: a barrier of the job that would release during a freeze releases
//! when it ends; a compute op (a delayed barrier arrival) or a delayed flow start runs on the
//! job's clock, which stops while the job is frozen (a compute op of 10 us that a 1 ms freeze
//! interrupts after 4 us ends 6 us after the job resumes). Transfers already on the wire go on
//! (their data still moves); those of the cut-off ranks wait for the repair, and resend what was
//! not acknowledged as soon as the job resumes (it reconnects), not at their next timeout.
//!
//! An elastic job freezes only while it detects the failure and re-forms its groups; then the
//! plan of its ops not yet ended is amended (`engine::amend`): the flows of the excluded ranks
//! are cancelled (not started) or withdrawn (started: the sender stops, its arrival is taken
//! back), and each collective is re-planned over the ranks that remain (the interrupted one
//! starts over, now). Ranks cut off later in an episode leave then (one failure event per
//! time ranks are newly cut off; none for ranks out already). A rejoin (at the first iteration
//! end at which excluded ranks are reachable again, every failure cutting them off repaired)
//! freezes the job again for a re-formation and re-plans the collectives over the full groups.
//!
//! A restarting job with `checkpoint_time` pauses that long after each checkpoint it takes.
//!
//! Nothing here runs per packet: only at a job's barrier events, flow starts and failures.

use std::collections::HashMap;

use super::amend::Amendment;
use super::queue::Event;
use super::world::World;
use crate::config::{CollectiveAlgorithm, CollectiveSpec};
use crate::ids::{FlowId, NodeId};
use crate::transport::NEVER;
use crate::units::Time;
use crate::workload::collective;
use crate::workload::graph::reaction::{Checkpoint, JobPlan, OnFailure};
use crate::workload::graph::{OpPhase, PlannedKind};
use crate::workload::{FlowInit, FlowPlan, Start};

/// What one episode did to its job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpisodeOutcome {
    /// Index into the job's episodes.
    pub episode: u32,
    pub fail_ps: Time,
    /// When the job resumed (None: not before the end, or never).
    pub resume_ps: Option<Time>,
    /// The end of the freeze: `resume_ps` plus the redone part of the interrupted iteration.
    pub freeze_end_ps: Option<Time>,
    /// Restart: iterations completed since the last checkpoint, lost.
    pub lost_iterations: u32,
    /// Restart: work lost, from the last checkpoint to the failure.
    pub rework_ps: Time,
    /// Restart: the interrupted iteration's part before the failure (redone after resuming).
    pub redo_ps: Time,
    /// Iterations that counted when the failure happened (before a restart's rollback) and
    /// when the job resumed.
    pub progress_at_fail: u32,
    pub progress_at_resume: Option<u32>,
}

/// One reacting job's state in the run.
pub struct Job {
    pub plan: JobPlan,
    /// Per op of the job: its iteration.
    op_iteration: Vec<u32>,
    /// Per iteration: ops not ended yet, and when its last op ended (NEVER: not yet).
    ops_left: Vec<u32>,
    pub iteration_end: Vec<Time>,
    /// Per iteration: its work counts (false: not completed, or lost to a restart).
    pub useful: Vec<bool>,
    /// Iterations that count, in completion order.
    completed: Vec<u32>,
    /// Iterations that count (progress) and as of the last checkpoint, and when it was taken.
    pub progress: u32,
    checkpoint: u32,
    checkpoint_ps: Time,
    /// Frozen intervals [start, end), sorted and disjoint (end NEVER: for ever).
    pub freezes: Vec<(Time, Time)>,
    pub outcomes: Vec<EpisodeOutcome>,
    /// Restart: the checkpoints taken, and the time their saving paused the job.
    pub checkpoints: u32,
    pub checkpoint_pause_ps: Time,
    /// Restart: the checkpoint saves' pauses [start, end).
    checkpoint_pauses: Vec<(Time, Time)>,
    /// Elastic: what it needs to re-plan its ops (empty for the other reactions).
    elastic: Elastic,
}

/// An op of an elastic job as it can be re-planned.
#[derive(Debug)]
struct ElasticOp {
    kind: PlannedKind,
    phase: OpPhase,
    nodes: Vec<u32>,
    bytes: u64,
    ready: u32,
    done: u32,
    /// Its current flows and the endpoints that take part now.
    flows: Vec<FlowId>,
    members: Vec<u32>,
}

/// Ranks left out of an elastic job's groups after a failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exclusion {
    /// The episode (index into the job's episodes) and the endpoints it excludes: the cut-off
    /// ones and the other ranks of their model replicas.
    pub episode: u32,
    pub endpoints: Vec<u32>,
    /// From the failure to the end of the re-formation that let them rejoin (None: not yet).
    pub from_ps: Time,
    pub until_ps: Option<Time>,
}

/// One re-formation of an elastic job's groups: the job was frozen over [start, end) while
/// `idle` ranks (the survivors) waited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reformation {
    pub start_ps: Time,
    pub end_ps: Time,
    pub idle: u32,
    /// A rejoin (else a shrink after a failure).
    pub rejoin: bool,
}

#[derive(Debug, Default)]
struct Elastic {
    ops: Vec<ElasticOp>,
    /// Per endpoint of the job (`plan.endpoints` order): its model replica (the ranks linked by
    /// tensor-, pipeline- or expert-parallel ops), as the smallest endpoint index in it.
    replica: Vec<u32>,
    exclusions: Vec<Exclusion>,
    reformations: Vec<Reformation>,
    /// A rejoin's re-formation is under way (its start).
    rejoining: Option<Time>,
    /// Per iteration: the ranks that took part when it ended.
    group: Vec<u32>,
    /// Per op: a compute op its rank skipped (it was excluded when the op became ready: it
    /// took no time and has no row in ops.arrow).
    skipped: Vec<bool>,
    /// Compute ops of excluded ranks that became ready for a later iteration than the one under
    /// way (op index, duration): they wait for that iteration's start, to be skipped, or run
    /// after a rejoin that takes their rank back.
    held: Vec<(usize, Time)>,
    /// Held compute ops that ran after their rank rejoined: when they started.
    started_late: HashMap<usize, Time>,
    /// Ranks cut off, not yet excluded: the job detects it and re-forms its groups. Per
    /// failure event: its index, its outcome (index into `outcomes`) and the ranks it excludes.
    pending: Vec<(u32, usize, Vec<u32>)>,
    /// Every time one of the job's endpoints is cut off (all episodes): (endpoint, from,
    /// until; NEVER: for ever), sorted by endpoint.
    cuts: Vec<(u32, Time, Time)>,
}

// A parallel run's view copies its jobs from a partition at every fold: copied field by field
// into the vectors it holds (`clone_from`), not into new ones (a 1,024-GPU elastic job's ops were
// a fresh 6 MB mapping, zeroed by the kernel, at each of its folds: 2026-12-05). Each copy
// names every field, so that a new one cannot be left out.
impl Clone for Job {
    fn clone(&self) -> Self {
        let Job {
            plan,
            op_iteration,
            ops_left,
            iteration_end,
            useful,
            completed,
            progress,
            checkpoint,
            checkpoint_ps,
            freezes,
            outcomes,
            checkpoints,
            checkpoint_pause_ps,
            checkpoint_pauses,
            elastic,
        } = self;
        Job {
            plan: plan.clone(),
            op_iteration: op_iteration.clone(),
            ops_left: ops_left.clone(),
            iteration_end: iteration_end.clone(),
            useful: useful.clone(),
            completed: completed.clone(),
            progress: *progress,
            checkpoint: *checkpoint,
            checkpoint_ps: *checkpoint_ps,
            freezes: freezes.clone(),
            outcomes: outcomes.clone(),
            checkpoints: *checkpoints,
            checkpoint_pause_ps: *checkpoint_pause_ps,
            checkpoint_pauses: checkpoint_pauses.clone(),
            elastic: elastic.clone(),
        }
    }

    fn clone_from(&mut self, src: &Self) {
        let Job {
            plan,
            op_iteration,
            ops_left,
            iteration_end,
            useful,
            completed,
            progress,
            checkpoint,
            checkpoint_ps,
            freezes,
            outcomes,
            checkpoints,
            checkpoint_pause_ps,
            checkpoint_pauses,
            elastic,
        } = self;
        plan.clone_from(&src.plan);
        op_iteration.clone_from(&src.op_iteration);
        ops_left.clone_from(&src.ops_left);
        iteration_end.clone_from(&src.iteration_end);
        useful.clone_from(&src.useful);
        completed.clone_from(&src.completed);
        *progress = src.progress;
        *checkpoint = src.checkpoint;
        *checkpoint_ps = src.checkpoint_ps;
        freezes.clone_from(&src.freezes);
        outcomes.clone_from(&src.outcomes);
        *checkpoints = src.checkpoints;
        *checkpoint_pause_ps = src.checkpoint_pause_ps;
        checkpoint_pauses.clone_from(&src.checkpoint_pauses);
        elastic.clone_from(&src.elastic);
    }
}

impl Clone for ElasticOp {
    fn clone(&self) -> Self {
        let ElasticOp {
            kind,
            phase,
            nodes,
            bytes,
            ready,
            done,
            flows,
            members,
        } = self;
        ElasticOp {
            kind: *kind,
            phase: *phase,
            nodes: nodes.clone(),
            bytes: *bytes,
            ready: *ready,
            done: *done,
            flows: flows.clone(),
            members: members.clone(),
        }
    }

    fn clone_from(&mut self, src: &Self) {
        let ElasticOp {
            kind,
            phase,
            nodes,
            bytes,
            ready,
            done,
            flows,
            members,
        } = self;
        *kind = src.kind;
        *phase = src.phase;
        nodes.clone_from(&src.nodes);
        *bytes = src.bytes;
        *ready = src.ready;
        *done = src.done;
        flows.clone_from(&src.flows);
        members.clone_from(&src.members);
    }
}

impl Clone for Elastic {
    fn clone(&self) -> Self {
        let mut e = Elastic::default();
        e.clone_from(self);
        e
    }

    fn clone_from(&mut self, src: &Self) {
        let Elastic {
            ops,
            replica,
            exclusions,
            reformations,
            rejoining,
            group,
            skipped,
            held,
            started_late,
            pending,
            cuts,
        } = self;
        ops.clone_from(&src.ops);
        replica.clone_from(&src.replica);
        exclusions.clone_from(&src.exclusions);
        reformations.clone_from(&src.reformations);
        *rejoining = src.rejoining;
        group.clone_from(&src.group);
        skipped.clone_from(&src.skipped);
        held.clone_from(&src.held);
        started_late.clone_from(&src.started_late);
        pending.clone_from(&src.pending);
        cuts.clone_from(&src.cuts);
    }
}

impl Elastic {
    fn new(plan: &JobPlan, flow_plan: &FlowPlan) -> Self {
        let ops: Vec<ElasticOp> = flow_plan.ops[plan.ops.clone()]
            .iter()
            .map(|o| ElasticOp {
                kind: o.kind,
                phase: o.phase,
                nodes: o.nodes.clone(),
                bytes: o.bytes,
                ready: o.ready,
                done: o.done,
                flows: o.flows.clone().map(|f| FlowId::new(f as u32)).collect(),
                members: if matches!(o.kind, PlannedKind::Compute) {
                    Vec::new()
                } else {
                    o.nodes.clone()
                },
            })
            .collect();
        let idx = |e: u32| plan.endpoints.binary_search(&e).expect("a job endpoint");
        let mut replica: Vec<u32> = (0..plan.endpoints.len() as u32).collect();
        fn find(r: &[u32], mut x: u32) -> u32 {
            while r[x as usize] != x {
                x = r[x as usize];
            }
            x
        }
        // Union by the smaller root: every set's root is its smallest index.
        for o in &ops {
            if !ties_replica(o.phase) || o.nodes.len() < 2 {
                continue;
            }
            let first = idx(o.nodes[0]) as u32;
            for &n in &o.nodes[1..] {
                let a = find(&replica, first);
                let b = find(&replica, idx(n) as u32);
                replica[a.max(b) as usize] = a.min(b);
            }
        }
        let replica: Vec<u32> = (0..replica.len() as u32)
            .map(|i| find(&replica, i))
            .collect();
        let mut cuts: Vec<(u32, Time, Time)> = plan
            .episodes
            .iter()
            .flat_map(|ep| &ep.cuts)
            .map(|c| (c.endpoint, c.from_ps, c.until_ps.unwrap_or(NEVER)))
            .collect();
        cuts.sort_unstable();
        Self {
            skipped: vec![false; ops.len()],
            ops,
            replica,
            group: vec![0; plan.iterations as usize],
            cuts,
            ..Self::default()
        }
    }
}

/// Whether an op of this phase ties its ranks into one model replica (an elastic job excludes
/// the whole replica of a failed rank): tensor-, pipeline- and expert-parallel ops.
fn ties_replica(phase: OpPhase) -> bool {
    matches!(
        phase,
        OpPhase::TensorParallel | OpPhase::PipelineParallel | OpPhase::ExpertParallel
    )
}

impl Job {
    fn new(plan: JobPlan, flow_plan: &FlowPlan) -> Self {
        let ops = &flow_plan.ops[plan.ops.clone()];
        let op_iteration: Vec<u32> = ops.iter().map(|o| o.iteration).collect();
        let n = plan.iterations as usize;
        let mut ops_left = vec![0u32; n];
        for &i in &op_iteration {
            ops_left[i as usize] += 1;
        }
        Self {
            checkpoint_ps: plan.start_ps,
            op_iteration,
            ops_left,
            iteration_end: vec![NEVER; n],
            useful: vec![false; n],
            completed: Vec::new(),
            progress: 0,
            checkpoint: 0,
            freezes: Vec::new(),
            outcomes: Vec::new(),
            checkpoints: 0,
            checkpoint_pause_ps: 0,
            checkpoint_pauses: Vec::new(),
            elastic: match plan.reaction.on_failure {
                OnFailure::Elastic { .. } => Elastic::new(&plan, flow_plan),
                _ => Elastic::default(),
            },
            plan,
        }
    }

    /// Elastic: the endpoints excluded now (sorted).
    pub fn excluded(&self) -> Vec<u32> {
        let mut out: Vec<u32> = self
            .elastic
            .exclusions
            .iter()
            .filter(|x| x.until_ps.is_none())
            .flat_map(|x| x.endpoints.iter().copied())
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Elastic: the endpoints cut off and not yet excluded (the job is detecting it and
    /// re-forming its groups), sorted.
    fn pending(&self) -> Vec<u32> {
        let mut out: Vec<u32> = self
            .elastic
            .pending
            .iter()
            .flat_map(|p| p.2.iter().copied())
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Elastic: endpoint `e` is reachable (cut off by no failure) throughout [a, b].
    fn reachable_over(&self, e: u32, a: Time, b: Time) -> bool {
        let cuts = &self.elastic.cuts;
        let lo = cuts.partition_point(|c| c.0 < e);
        cuts[lo..]
            .iter()
            .take_while(|c| c.0 == e)
            .all(|&(_, from, until)| from > b || until <= a)
    }

    /// Elastic: exclusion `x` can end over [a, b]: all its ranks are reachable throughout.
    fn repaired_over(&self, x: &Exclusion, a: Time, b: Time) -> bool {
        x.endpoints.iter().all(|&e| self.reachable_over(e, a, b))
    }

    /// Elastic: the exclusions so far.
    pub fn exclusions(&self) -> &[Exclusion] {
        &self.elastic.exclusions
    }

    /// Elastic: the re-formations so far.
    pub fn reformations(&self) -> &[Reformation] {
        &self.elastic.reformations
    }

    /// Elastic: per iteration, the ranks that took part when it ended (0: not ended).
    pub fn group_sizes(&self) -> &[u32] {
        &self.elastic.group
    }

    /// Elastic: `cut` and every endpoint in a model replica with one of them (sorted).
    fn replicas_of(&self, cut: &[u32]) -> Vec<u32> {
        let eps = &self.plan.endpoints;
        let roots: Vec<u32> = cut
            .iter()
            .filter_map(|e| eps.binary_search(e).ok())
            .map(|i| self.elastic.replica[i])
            .collect();
        eps.iter()
            .enumerate()
            .filter(|&(i, _)| roots.contains(&self.elastic.replica[i]))
            .map(|(_, &e)| e)
            .collect()
    }

    /// The nodes of op `k` (index within the job) that took part in it, for ops.arrow (None: all
    /// of them, the job is not elastic). An elastic job's compute op its excluded rank skipped
    /// has none; a collective or send has the members it ran with (none: dropped).
    pub fn op_row_nodes(&self, k: usize) -> Option<&[u32]> {
        if !self.is_elastic() {
            return None;
        }
        let op = self.elastic.ops.get(k)?;
        Some(match op.kind {
            PlannedKind::Compute if self.elastic.skipped[k] => &[],
            PlannedKind::Compute => &op.nodes,
            _ => &op.members,
        })
    }

    /// When op `k` (index within the job) started, if not when it became ready: a compute op of
    /// an excluded rank held until the rank rejoined.
    pub fn op_row_start(&self, k: usize) -> Option<Time> {
        self.elastic.started_late.get(&k).copied()
    }

    fn is_elastic(&self) -> bool {
        self.plan.is_elastic()
    }

    /// The job's clock at `t`: time not frozen since 0.
    pub fn clock(&self, t: Time) -> Time {
        let mut frozen = 0;
        for &(a, b) in &self.freezes {
            if a >= t {
                break;
            }
            frozen += b.min(t) - a;
        }
        t - frozen
    }

    /// The first time, not frozen, when the job's clock reaches `due` (NEVER: frozen for ever).
    pub fn thaw(&self, due: Time) -> Time {
        let mut t = due;
        for &(a, b) in &self.freezes {
            if a > t {
                break;
            }
            if b == NEVER {
                return NEVER;
            }
            t = t.saturating_add(b - a);
        }
        t
    }

    /// The end of the freeze `t` is in, if any.
    pub fn frozen_until(&self, t: Time) -> Option<Time> {
        self.freezes
            .iter()
            .rev()
            .find(|&&(a, _)| a <= t)
            .and_then(|&(_, b)| (t < b).then_some(b))
    }

    fn freeze(&mut self, from: Time, to: Time) {
        match self.freezes.last_mut() {
            Some(last) if last.1 >= from => last.1 = last.1.max(to),
            _ => self.freezes.push((from, to)),
        }
    }

    fn finished(&self) -> bool {
        self.ops_left.iter().all(|&n| n == 0)
    }

    /// Time frozen within [lo, hi).
    pub fn frozen_within(&self, lo: Time, hi: Time) -> Time {
        self.freezes
            .iter()
            .map(|&(a, b)| b.min(hi).saturating_sub(a.max(lo)))
            .sum()
    }

    /// Op `op` (index within the job) ended at `now`. Returns when a pause it begins (a
    /// checkpoint's saving, a rejoin's re-formation) ends, if it begins one.
    fn op_ended(&mut self, op: usize, now: Time) -> Option<(Time, bool)> {
        let it = self.op_iteration[op] as usize;
        self.ops_left[it] -= 1;
        if self.ops_left[it] > 0 {
            return None;
        }
        self.iteration_end[it] = now;
        self.useful[it] = true;
        self.completed.push(it as u32);
        self.progress += 1;
        match self.plan.reaction.on_failure {
            OnFailure::Restart {
                checkpoint,
                checkpoint_save_ps,
                ..
            } => {
                let take = match checkpoint {
                    Checkpoint::Iterations(k) => self.progress.is_multiple_of(k),
                    Checkpoint::Time(every) => now - self.checkpoint_ps >= every,
                };
                if take {
                    self.checkpoint = self.progress;
                    self.checkpoint_ps = now;
                    self.checkpoints += 1;
                    if checkpoint_save_ps > 0 && self.iterations_left() {
                        // The job saves before its next iteration goes on.
                        let end = now.saturating_add(checkpoint_save_ps);
                        self.freeze(now, end);
                        self.checkpoint_pause_ps += checkpoint_save_ps;
                        self.checkpoint_pauses.push((now, end));
                        return Some((end, false));
                    }
                }
                None
            }
            OnFailure::Elastic {
                reformation_ps,
                rejoin,
            } => {
                let n = self.plan.endpoints.len() as u32;
                self.elastic.group[it] = n - self.excluded().len() as u32;
                // A rank rejoins when it is reachable again: every failure that cut it off (or a
                // rank of its replica) repaired, not just one of them.
                let repaired = self
                    .elastic
                    .exclusions
                    .iter()
                    .any(|x| x.until_ps.is_none() && self.repaired_over(x, now, now));
                if rejoin
                    && repaired
                    && self.elastic.rejoining.is_none()
                    && self.frozen_until(now).is_none()
                    && self.iterations_left()
                {
                    let end = now.saturating_add(reformation_ps);
                    self.freeze(now, end);
                    self.elastic.rejoining = Some(now);
                    return Some((end, true));
                }
                None
            }
            OnFailure::Stall => None,
        }
    }

    /// Some iteration has not ended yet.
    fn iterations_left(&self) -> bool {
        self.iteration_end.contains(&NEVER)
    }
}

/// The reacting jobs of a run.
#[derive(Default)]
pub struct Jobs {
    pub list: Vec<Job>,
    /// `JobFailure` / `JobResume` event payloads: (job, episode, time). An elastic job has one
    /// per time ranks are newly cut off within the episode (they leave the groups then); the
    /// others one per episode, at its start.
    episodes: Vec<(u32, u32, Time)>,
    /// Barriers appended by an elastic job's re-planning, a range per re-plan (sorted, as
    /// barriers are only appended), and their job.
    extra_barriers: Vec<(std::ops::Range<u32>, usize)>,
    /// The amendments of elastic re-plans since the plan was last synced, in order
    /// (`Simulation` appends their barriers and flows to its flow plan, as for a controller's
    /// amendment). Kept whole, not merged into one: a job re-planned again and again appends
    /// hundreds of thousands of flows, and one list would be copied as it grew.
    pub appended: Vec<Amendment>,
    /// Barriers of a job with a delayed arrival pending, or a release deferred: when it is due
    /// on the job's clock.
    due: HashMap<u32, Time>,
    /// Flows of a job whose start is pending after a gap: when it is due on the job's clock.
    flow_due: HashMap<FlowId, Time>,
    /// Compute ops' done barriers whose pending timed arrival no longer counts (an elastic job
    /// ended the compute early: its rank was excluded).
    stale: std::collections::HashSet<u32>,
    /// Barriers whose release a freeze deferred: they release at its end by an arrival every
    /// partition schedules for itself, so no window need run merged for them (on threads,
    /// `Tight::prune`), even while the job stays frozen.
    held: std::collections::HashSet<u32>,
    /// On threads: when the elastic re-formations still to come end (`JobResume` of an elastic
    /// job, `JobRejoin`). Their re-plans read flows of every partition, so the windows that
    /// hold one run merged (`parallel::run_merged` gives them the flows' [`Fate`]s).
    pub replans_due: std::collections::BinaryHeap<std::cmp::Reverse<Time>>,
    /// On threads, in the first partition: each re-plan's time and amendment, for the view to
    /// apply (`Parallel::fold_into`).
    pub replans: Vec<(Time, Amendment)>,
}

/// What an elastic re-plan reads of a flow of its job's ops, as one world's one record tells
/// it: whether it started (its sender knows), finished (its receiver knows), or is gone
/// (withdrawn, or given up on). On threads every partition reads the same snapshot of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Fate {
    pub started: bool,
    pub finished: bool,
    pub gone: bool,
}

impl Jobs {
    pub fn new(plan: &FlowPlan) -> Self {
        let mut jobs = Jobs::default();
        for (j, p) in plan.jobs.iter().enumerate() {
            let elastic = p.is_elastic();
            for (k, ep) in p.episodes.iter().enumerate() {
                if elastic {
                    for t in ep.waves() {
                        jobs.episodes.push((j as u32, k as u32, t));
                    }
                } else {
                    jobs.episodes.push((j as u32, k as u32, ep.fail_ps));
                }
            }
            jobs.list.push(Job::new(p.clone(), plan));
        }
        jobs
    }

    /// Whether a freeze deferred barrier `b`'s release (`Jobs::held`).
    #[inline]
    pub fn is_held(&self, b: u32) -> bool {
        !self.held.is_empty() && self.held.contains(&b)
    }

    /// The job barrier `b` belongs to.
    #[inline]
    pub fn job_of(&self, b: u32) -> Option<usize> {
        self.list
            .iter()
            .position(|j| j.plan.barriers.contains(&b))
            .or_else(|| {
                let extra = &self.extra_barriers;
                let i = extra.partition_point(|(r, _)| r.end <= b);
                extra
                    .get(i)
                    .filter(|(r, _)| r.contains(&b))
                    .map(|&(_, j)| j)
            })
    }

    /// (time, event index) of every episode's start.
    pub fn failure_events(&self) -> Vec<(Time, u32)> {
        self.episodes
            .iter()
            .enumerate()
            .map(|(e, &(_, _, t))| (t, e as u32))
            .collect()
    }
}

impl World {
    /// Barrier `b` of job `j` is about to release at `now` (its last arrival's time: in a
    /// partition told of it, earlier than its clock): false if the job is frozen (the
    /// release is deferred to the freeze's end); else its op's end is recorded.
    pub(super) fn job_release(&mut self, j: usize, b: u32, now: Time) -> bool {
        let job = &mut self.jobs.list[j];
        if let Some(end) = job.frozen_until(now) {
            self.barriers[b as usize].remaining = 1;
            self.jobs.due.insert(b, job.clock(now));
            self.jobs.held.insert(b);
            if end != NEVER {
                self.pending_arrivals += 1;
                self.push_barrier_arrival(end, b);
            }
            return false;
        }
        let rel = b.saturating_sub(job.plan.barriers.start);
        let op = (rel / 2) as usize;
        if rel % 2 == 1 && op < job.op_iteration.len() && job.plan.barriers.contains(&b) {
            // A pause it begins defers what this release starts (job_barrier_released).
            if let Some((end, rejoin)) = job.op_ended(op, now) {
                if rejoin {
                    self.events.push(end, Event::JobRejoin(j as u32));
                    self.replan_due(end);
                }
            }
            self.elastic_release_held(j, now);
        }
        true
    }

    /// Barrier `b` of job `j` releases now: its flows start and its chained barriers get their
    /// arrival, each after its gap or delay on the job's clock.
    pub(super) fn job_barrier_released(&mut self, j: usize, b: u32, now: Time) {
        // A pause begun at this release (a checkpoint's saving, a rejoin) defers even what
        // would start now.
        let paused = self.jobs.list[j].frozen_until(now).is_some();
        let skip = self.elastic_skip(j, b);
        let barrier = &mut self.barriers[b as usize];
        barrier.released_at = now;
        if let Some(p) = self.partition.as_mut() {
            p.released.push(b); // for the view's next fold
        }
        // Read in place, one link at a time: starting a flow or deferring an arrival changes no
        // barrier's links. (Taking them out of the world, as until 2026-12-05, made and dropped
        // an empty set at each release: a heap block, with two more for what the partition runs.)
        for k in 0..self.links.waiting(b).len() {
            let (fid, gap) = self.links.waiting(b)[k];
            // In a partition: only its senders' flows start and its barriers' arrivals happen.
            if !self.starts_here(fid) {
                continue;
            }
            if gap == 0 && !paused {
                self.push_flow_start(now, fid);
            } else {
                self.job_defer_flow(j, fid, now, gap);
            }
        }
        for k in 0..self.links.then(b).len() {
            let (next, delay) = self.links.then(b)[k];
            if !(self.partition.as_ref()).is_none_or(|p| p.runs_barrier(next)) {
                continue;
            }
            let delay = match skip {
                Some((done, true)) if done == next => continue, // held
                Some((done, false)) if done == next => 0,
                _ => delay,
            };
            if delay == 0 && !paused {
                self.pending_arrivals += 1;
                self.push_barrier_arrival(now, next);
            } else {
                self.job_defer_arrival(j, next, now, delay);
            }
        }
    }

    /// Elastic job `j`: if `b` is the ready barrier of a compute op whose rank is excluded now,
    /// the op is skipped (its rank does not compute while excluded): its done barrier, returned,
    /// follows with no delay. One of a later iteration than the first not ended is held instead
    /// (its done barrier is returned with nothing to follow now): the rank may rejoin before it.
    fn elastic_skip(&mut self, j: usize, b: u32) -> Option<(u32, bool)> {
        let job = &mut self.jobs.list[j];
        if !job.is_elastic() || job.elastic.exclusions.iter().all(|x| x.until_ps.is_some()) {
            return None;
        }
        let rel = b.checked_sub(job.plan.barriers.start)?;
        let k = (rel / 2) as usize;
        let op = job.elastic.ops.get(k)?;
        if rel % 2 != 0 || op.ready != b || !matches!(op.kind, PlannedKind::Compute) {
            return None;
        }
        let excluded = job.excluded();
        if !op.nodes.iter().all(|n| excluded.binary_search(n).is_ok()) {
            return None;
        }
        let done = op.done;
        let current = job
            .iteration_end
            .iter()
            .position(|&t| t == NEVER)
            .unwrap_or(job.iteration_end.len()) as u32;
        if job.op_iteration[k] > current {
            let duration = (self.links.then(b).iter())
                .find(|&&(n, _)| n == done)
                .map_or(0, |&(_, d)| d);
            self.jobs.list[j].elastic.held.push((k, duration));
            return Some((done, true));
        }
        job.elastic.skipped[k] = true;
        Some((done, false))
    }

    /// Elastic job `j`'s held compute ops (see `elastic_skip`), at an iteration's end or a
    /// rejoin's: those whose rank is back run (their full duration, from now); those of the
    /// iteration now under way whose rank is still excluded are skipped; the others wait on.
    ///
    /// `now` is the release's time: on threads, a partition told of the last arrival of an
    /// op's barrier in a window run merged releases it at that arrival's time, ahead of its
    /// own clock.
    fn elastic_release_held(&mut self, j: usize, now: Time) {
        let job = &mut self.jobs.list[j];
        if job.elastic.held.is_empty() || job.elastic.rejoining.is_some() {
            return;
        }
        let current = job
            .iteration_end
            .iter()
            .position(|&t| t == NEVER)
            .unwrap_or(job.iteration_end.len()) as u32;
        let excluded = job.excluded();
        let mut run: Vec<(u32, Time)> = Vec::new();
        let held = std::mem::take(&mut job.elastic.held);
        for (k, duration) in held {
            let op = &job.elastic.ops[k];
            if !op.nodes.iter().all(|n| excluded.binary_search(n).is_ok()) {
                run.push((op.done, duration));
                job.elastic.started_late.insert(k, now);
            } else if job.op_iteration[k] <= current {
                job.elastic.skipped[k] = true;
                run.push((op.done, 0));
            } else {
                job.elastic.held.push((k, duration));
            }
        }
        for (done, duration) in run {
            self.job_defer_arrival(j, done, now, duration);
        }
    }

    /// A delayed event of job `j`, `delay` after `now` on its clock: when it is due on that
    /// clock, and when it happens (after the freezes). `now` is the release that schedules it:
    /// on threads, a partition told of a barrier's last arrival in a window run merged releases
    /// it at that arrival's time, ahead of its own clock (a partition with no host of the job's
    /// ranks may be far behind), and a delay counted from its clock would come due early.
    pub(super) fn job_delay(&self, j: usize, now: Time, delay: Time) -> (Time, Time) {
        let job = &self.jobs.list[j];
        let due = job.clock(now).saturating_add(delay);
        (due, job.thaw(due))
    }

    /// Barrier `next`'s arrival, `delay` after `now` on job `j`'s clock.
    pub(super) fn job_defer_arrival(&mut self, j: usize, next: u32, now: Time, delay: Time) {
        let (due, at) = self.job_delay(j, now, delay);
        self.jobs.due.insert(next, due);
        self.pending_arrivals += 1;
        self.push_barrier_arrival(at, next);
    }

    /// Flow `fid`'s start, `gap` after `now` on job `j`'s clock.
    pub(super) fn job_defer_flow(&mut self, j: usize, fid: FlowId, now: Time, gap: Time) {
        let (due, at) = self.job_delay(j, now, gap);
        self.jobs.flow_due.insert(fid, due);
        self.push_flow_start(at, fid);
    }

    /// A `BarrierArrive(b)` popped: false if it is not due yet on its job's clock (it was pushed
    /// again for when it is, or dropped if its job never resumes).
    pub(super) fn job_arrival_due(&mut self, b: u32) -> bool {
        if self.jobs.stale.remove(&b) {
            self.pending_arrivals -= 1;
            return false;
        }
        let Some(&due) = self.jobs.due.get(&b) else {
            return true;
        };
        let j = self.jobs.job_of(b).expect("a job barrier");
        let at = self.jobs.list[j].thaw(due);
        if at <= self.now {
            self.jobs.due.remove(&b);
            return true;
        }
        if at != NEVER {
            self.push_barrier_arrival(at, b);
        } else {
            self.pending_arrivals -= 1;
        }
        false
    }

    /// A `FlowStart(fid)` popped: false if it is not due yet on its job's clock.
    pub(super) fn job_flow_due(&mut self, fid: FlowId) -> bool {
        let Some(&due) = self.jobs.flow_due.get(&fid) else {
            return true;
        };
        let w = self.flow_brief(fid).workload; // (it may have no record yet: not started)
        let j = self
            .jobs
            .list
            .iter()
            .position(|j| j.plan.workload == w)
            .expect("a job flow");
        let at = self.jobs.list[j].thaw(due);
        if at <= self.now {
            self.jobs.flow_due.remove(&fid);
            return true;
        }
        if at != NEVER {
            self.push_flow_start(at, fid);
        }
        false
    }

    /// Episode event `e` begins: its job freezes.
    pub(super) fn job_failure(&mut self, e: u32) {
        let now = self.now;
        let (j, k, _) = self.jobs.episodes[e as usize];
        let job = &mut self.jobs.list[j as usize];
        if job.finished() {
            return; // the failure came after the job ended
        }
        // Elastic: the ranks cut off now (and their replicas) that are not out already.
        let mut leaving = None;
        let ep = &job.plan.episodes[k as usize];
        let repair_ps = ep.repair_ps;
        let newly: Vec<u32> = ep
            .cuts
            .iter()
            .filter(|c| c.from_ps == now)
            .map(|c| c.endpoint)
            .collect();
        let r = job.plan.reaction;
        // Frozen by an earlier failure (not by a checkpoint's saving or a rejoin).
        let frozen = job
            .outcomes
            .last()
            .is_some_and(|o| o.freeze_end_ps.is_none_or(|e| e > now));
        let progress_at_fail = job.progress;
        let started = now > job.plan.start_ps;
        let (resume, lost, rework, redo) = match r.on_failure {
            OnFailure::Stall => (repair_ps.map(|t| t.saturating_add(r.detection_ps)), 0, 0, 0),
            OnFailure::Elastic { reformation_ps, .. } => {
                // The ranks newly cut off now leave (those cut off later in the episode leave
                // when they are: another failure event); ranks out already change nothing.
                let mut all = job.excluded();
                all.extend(job.pending());
                all.sort_unstable();
                all.dedup();
                let cut: Vec<u32> = job
                    .replicas_of(&newly)
                    .into_iter()
                    .filter(|x| all.binary_search(x).is_err())
                    .collect();
                if cut.is_empty() {
                    // The episode hit the job, but its group does not change: no freeze.
                    if !job.outcomes.iter().any(|o| o.episode == k) {
                        let progress = job.progress;
                        job.outcomes.push(EpisodeOutcome {
                            episode: k,
                            fail_ps: now,
                            resume_ps: Some(now),
                            freeze_end_ps: Some(now),
                            lost_iterations: 0,
                            rework_ps: 0,
                            redo_ps: 0,
                            progress_at_fail: progress,
                            progress_at_resume: Some(progress),
                        });
                    }
                    return;
                }
                all.extend(cut.iter().copied());
                all.sort_unstable();
                all.dedup();
                leaving = Some(cut);
                // The survivors re-form after detection; with none left, after the repair.
                let resume = if all.len() < job.plan.endpoints.len() {
                    Some(now.saturating_add(r.detection_ps))
                } else {
                    repair_ps.map(|rep| rep.max(now.saturating_add(r.detection_ps)))
                };
                (resume.map(|t| t.saturating_add(reformation_ps)), 0, 0, 0)
            }
            OnFailure::Restart { restart_ps, .. } => {
                let resume = repair_ps.map(|rep| {
                    rep.max(now.saturating_add(r.detection_ps))
                        .saturating_add(restart_ps)
                });
                if frozen || !started {
                    // Restarting already (or not started): no work to lose.
                    (resume, 0, 0, 0)
                } else {
                    let lost = job.progress - job.checkpoint;
                    let n = job.completed.len();
                    for &it in &job.completed[n - lost as usize..] {
                        job.useful[it as usize] = false;
                    }
                    job.completed.truncate(n - lost as usize);
                    job.progress = job.checkpoint;
                    let boundary = job
                        .iteration_end
                        .iter()
                        .copied()
                        .filter(|&t| t != NEVER)
                        .max()
                        .unwrap_or(job.plan.start_ps)
                        .max(job.plan.start_ps);
                    (
                        resume,
                        lost,
                        now - job.checkpoint_ps.min(now),
                        now - boundary.min(now),
                    )
                }
            }
        };
        // A failure during a restart restarts it: the interrupted iteration's part still to
        // redo is redone after the new resume.
        let carried = match (r.on_failure, frozen) {
            (OnFailure::Restart { .. }, true) => job.outcomes.last().map_or(0, |o| o.redo_ps),
            _ => 0,
        };
        let end = resume.map_or(NEVER, |t| t.saturating_add(redo).saturating_add(carried));
        job.freeze(now, end);
        if let Some(cut) = leaving {
            let o = job.outcomes.len();
            job.elastic.pending.push((e, o, cut));
        }
        job.outcomes.push(EpisodeOutcome {
            episode: k,
            fail_ps: now,
            resume_ps: resume,
            freeze_end_ps: resume.map(|_| end),
            lost_iterations: lost,
            rework_ps: rework,
            redo_ps: redo + carried,
            progress_at_fail,
            progress_at_resume: None,
        });
        if end != NEVER {
            let elastic = job.is_elastic();
            self.events.push(end, Event::JobResume(e));
            if elastic {
                self.replan_due(end);
            }
        }
    }

    /// On threads: the least time from an event that may begin an elastic job's re-formation
    /// to its end, which no window may be longer than: a failure (its detection and
    /// re-formation times), while failures may still come, and an iteration's end (the
    /// re-formation time), while ranks are out that may rejoin. The re-formation's end is
    /// scheduled then, and the window holding it must be known to run merged when it is
    /// decided. (Until 2026-12-05 an iteration that ended inside a long window could end its
    /// rejoin's re-formation in the same window, whose partitions then re-planned apart: an
    /// internal error, found by the fuzzer.) NEVER: neither can happen.
    pub(super) fn elastic_reach(&self) -> Time {
        let failures_to_come = !self.faults.settled();
        let mut reach = NEVER;
        for j in &self.jobs.list {
            let OnFailure::Elastic {
                reformation_ps,
                rejoin,
            } = j.plan.reaction.on_failure
            else {
                continue;
            };
            if failures_to_come {
                reach = reach.min(j.plan.reaction.detection_ps.saturating_add(reformation_ps));
            }
            if rejoin && j.elastic.exclusions.iter().any(|x| x.until_ps.is_none()) {
                reach = reach.min(reformation_ps);
            }
        }
        reach
    }

    /// On threads: an elastic re-formation ends at `at` (`Jobs::replans_due`).
    fn replan_due(&mut self, at: Time) {
        if self.partition.is_some() {
            self.jobs.replans_due.push(std::cmp::Reverse(at));
        }
    }

    /// On threads: an elastic re-formation ends now (`Jobs::replans_due`).
    fn replan_ran(&mut self) {
        let due = &mut self.jobs.replans_due;
        while due.peek().is_some_and(|r| r.0 <= self.now) {
            due.pop();
        }
    }

    /// The elastic job whose re-plan event `ev` may run (`JobResume` of an elastic job's
    /// failure, `JobRejoin`).
    pub(super) fn elastic_replan_job(&self, ev: Event) -> Option<usize> {
        match ev {
            Event::JobResume(e) => {
                let j = self.jobs.episodes[e as usize].0 as usize;
                self.jobs.list[j].is_elastic().then_some(j)
            }
            Event::JobRejoin(j) => Some(j as usize),
            _ => None,
        }
    }

    /// Elastic job `j`: the flows of its ops not ended (their done barrier not released), as
    /// planned now: those whose [`Fate`]s a re-plan reads.
    pub(super) fn elastic_open_flows(&self, j: usize) -> Vec<FlowId> {
        let ops = &self.jobs.list[j].elastic.ops;
        (ops.iter())
            .filter(|op| self.barriers[op.done as usize].released_at == NEVER)
            .flat_map(|op| op.flows.iter().copied())
            .collect()
    }

    /// Flow `fid`'s [`Fate`], for an elastic re-plan: from its record, or on threads from the
    /// snapshot of every partition's copies taken for the re-plan (`Part::fates`).
    fn fate(&self, fid: FlowId) -> Fate {
        if let Some(p) = &self.partition {
            let fates = p.fates.as_ref();
            let fates = fates.expect("an elastic re-plan on threads runs in a merged window");
            let i = fates.binary_search_by_key(&fid, |&(f, _)| f);
            return i.map_or(Fate::default(), |i| fates[i].1);
        }
        match self.flows.get(fid) {
            Some(f) => Fate {
                started: f.started,
                finished: f.finished(),
                gone: f.withdrawn || f.abandoned,
            },
            None if self.flows.is_unborn(fid) => Fate::default(),
            // Retired: it finished (only a finished flow retires).
            None => Fate {
                started: true,
                finished: true,
                gone: false,
            },
        }
    }

    /// Episode event `e`'s freeze ended: the flows of its cut-off ranks resend what was not
    /// acknowledged now (the job reconnects) rather than at their next timeout. An elastic job
    /// instead goes on without them: its groups are re-formed.
    pub(super) fn job_resume(&mut self, e: u32) {
        let now = self.now;
        let (j, k, _) = self.jobs.episodes[e as usize];
        if self.jobs.list[j as usize].is_elastic() {
            self.replan_ran();
            return self.elastic_resume(j as usize, k, e);
        }
        let job = &mut self.jobs.list[j as usize];
        if job.frozen_until(now).is_some() {
            return; // a later failure extended the freeze: its own resume kicks
        }
        let progress = job.progress;
        if let Some(o) = job.outcomes.iter_mut().rev().find(|o| o.episode == k) {
            o.progress_at_resume = Some(progress);
        }
        let cut = job.plan.episodes[k as usize].endpoints.clone();
        for f in job.plan.flows.clone() {
            let fid = FlowId::new(f as u32);
            // (A flow without a record did not start, here, or is done for good.)
            let Some(fl) = self.flows.get(fid) else {
                continue;
            };
            let touches = cut.binary_search(&fl.src.get()).is_ok()
                || cut.binary_search(&fl.dst.get()).is_ok();
            if !touches || !fl.started || !fl.rto_armed || fl.sender_stopped() {
                continue;
            }
            if let Some(c) = &mut self.credits {
                c.credit[fid] = c.credit[fid].max(fl.high_seq - fl.acked);
            }
            let f = &mut self.flows[fid];
            f.next_seq = f.acked;
            f.resend.clear();
            // Its pending timer event finds the later deadline and waits for it.
            f.rto_deadline = now.saturating_add(self.transport.rto);
            let r = self.cc.on_loss(self.flows.slot(fid), true, now);
            self.react(fid, r);
            self.activate(fid);
        }
    }
}

impl World {
    /// Elastic job `j`'s re-formation after failure event `e` (of episode `k`) ended: its
    /// groups go on without the ranks it cut off and their replicas (all of them back already:
    /// none excluded).
    fn elastic_resume(&mut self, j: usize, k: u32, e: u32) {
        let now = self.now;
        let job = &mut self.jobs.list[j];
        let Some(p) = job.elastic.pending.iter().position(|p| p.0 == e) else {
            return;
        };
        let (_, o, cut) = job.elastic.pending.remove(p);
        let before = job.excluded();
        let mut all = before.clone();
        all.extend(cut.iter().copied());
        all.sort_unstable();
        all.dedup();
        let n = job.plan.endpoints.len() as u32;
        if all.len() < n as usize {
            job.elastic.exclusions.push(Exclusion {
                episode: k,
                endpoints: cut,
                from_ps: job.outcomes[o].fail_ps,
                until_ps: None,
            });
        }
        let fail = job.outcomes[o].fail_ps;
        // The survivors waited; with none left, every rank not excluded before.
        let idle = if all.len() < n as usize {
            n - all.len() as u32
        } else {
            n - before.len() as u32
        };
        job.elastic.reformations.push(Reformation {
            start_ps: fail,
            end_ps: now,
            idle,
            rejoin: false,
        });
        let progress = job.progress;
        job.outcomes[o].progress_at_resume = Some(progress);
        if job.frozen_until(now).is_none() {
            self.elastic_replan(j);
        }
    }

    /// Elastic job `j`'s rejoin re-formation ended: the repaired ranks take part again.
    pub(super) fn job_rejoin(&mut self, j: u32) {
        self.replan_ran();
        let now = self.now;
        let job = &mut self.jobs.list[j as usize];
        let Some(start) = job.elastic.rejoining.take() else {
            return;
        };
        let n = job.plan.endpoints.len() as u32;
        let idle = n - job.excluded().len() as u32;
        // The excluded ranks reachable over the whole re-formation take part again; one cut off
        // by another failure still (or again) stays out.
        let back: Vec<bool> = job
            .elastic
            .exclusions
            .iter()
            .map(|x| x.until_ps.is_none() && job.repaired_over(x, start, now))
            .collect();
        for (x, back) in job.elastic.exclusions.iter_mut().zip(back) {
            if back {
                x.until_ps = Some(now);
            }
        }
        job.elastic.reformations.push(Reformation {
            start_ps: start,
            end_ps: now,
            idle,
            rejoin: true,
        });
        if job.frozen_until(now).is_none() {
            self.elastic_replan(j as usize);
        }
        self.elastic_release_held(j as usize, now);
    }

    /// Re-plan elastic job `j`'s ops not ended yet whose taking part changed: the flows of the
    /// old plan not finished are cancelled (not started) or withdrawn (started), the new ones
    /// appended (starting when the op's `ready` released, or now if it has) and completing the
    /// op's `done` (one amendment).
    fn elastic_replan(&mut self, j: usize) {
        // Compute under way on a rank now excluded ends now (its rank does not compute while
        // excluded); its timed arrival, still pending, no longer counts.
        let job = &self.jobs.list[j];
        let excluded = job.excluded();
        let cut: Vec<u32> = job
            .elastic
            .ops
            .iter()
            .filter(|op| {
                matches!(op.kind, PlannedKind::Compute)
                    && op.nodes.iter().all(|n| excluded.binary_search(n).is_ok())
                    && self.barriers[op.ready as usize].released_at != NEVER
                    && self.barriers[op.done as usize].released_at == NEVER
                    && self.jobs.due.contains_key(&op.done)
            })
            .map(|op| op.done)
            .collect();
        for d in cut {
            self.jobs.due.remove(&d);
            self.jobs.stale.insert(d);
            self.barrier_arrive(d);
        }
        let job = &self.jobs.list[j];
        let excluded = job.excluded();
        let active = |e: &u32| excluded.binary_search(e).is_err();
        let Some(params) = job.plan.params else {
            return;
        };
        let workload = job.plan.workload;
        let first_barrier = self.barriers.len() as u32;
        let mut a = Amendment::default();
        let mut withdraw: Vec<FlowId> = Vec::new();
        let mut changed: Vec<(usize, Vec<u32>, std::ops::Range<usize>)> = Vec::new();
        for (k, op) in job.elastic.ops.iter().enumerate() {
            // Ended, or every transfer done (its release deferred by a freeze): nothing to redo.
            if matches!(op.kind, PlannedKind::Compute)
                || self.barriers[op.done as usize].released_at != NEVER
                || (!op.flows.is_empty() && op.flows.iter().all(|&f| self.fate(f).finished))
            {
                continue;
            }
            let members: Vec<u32> = match op.kind {
                PlannedKind::Compute => continue,
                PlannedKind::Send => match op.nodes.iter().all(active) {
                    true => op.nodes.clone(),
                    false => Vec::new(),
                },
                PlannedKind::Collective { .. } => {
                    let m: Vec<u32> = op.nodes.iter().copied().filter(active).collect();
                    if m.len() < 2 || (ties_replica(op.phase) && m.len() < op.nodes.len()) {
                        Vec::new()
                    } else {
                        m
                    }
                }
            };
            if members == op.members {
                continue;
            }
            for &f in &op.flows {
                let fate = self.fate(f);
                if fate.finished || self.amends.is_cancelled(f) {
                    continue;
                }
                if fate.started {
                    // (One given up on settled already: nothing to withdraw.)
                    if !fate.gone {
                        withdraw.push(f);
                    }
                } else {
                    a.cancel.push(f);
                }
            }
            let first = a.flows.len();
            if !members.is_empty() {
                let local = first_barrier + a.barriers.len() as u32;
                match op.kind {
                    PlannedKind::Send => a.flows.push(FlowInit {
                        src: NodeId::new(members[0]),
                        dst: NodeId::new(members[1]),
                        size_bytes: op.bytes,
                        start: Start::After {
                            barrier: op.ready,
                            gap: 0,
                        },
                        workload,
                        completes: Some(op.done),
                        collective: None,
                        tag: None,
                    }),
                    PlannedKind::Collective { op: cop, algorithm } => {
                        let mut spec = CollectiveSpec {
                            op: cop,
                            algorithm,
                            groups: Vec::new(),
                            shuffle: None,
                            size_bytes: op.bytes,
                            iterations: 1,
                            compute_gap_ps: 0,
                            start_ps: 0,
                            chunk_bytes: params.chunk_bytes,
                            chunk_interval_ps: params.chunk_interval_ps,
                            domain_size: params.domain_size,
                        };
                        // A smaller group runs a flat algorithm (ring when its own needs the
                        // group's original layout).
                        if members.len() < op.nodes.len()
                            && crate::control::calls::choosable(&spec, algorithm, members.len())
                                .is_err()
                        {
                            let flat = collective::algorithms(cop);
                            spec.algorithm = if flat.contains(&CollectiveAlgorithm::Ring) {
                                CollectiveAlgorithm::Ring
                            } else {
                                flat[0]
                            };
                        }
                        let dom = collective::group_domains(&spec, &members);
                        let ts = collective::transfers(&spec, &dom);
                        let gr = collective::iteration_graph(&ts);
                        a.barriers.extend_from_slice(&gr.sizes);
                        for (i, t) in ts.iter().enumerate() {
                            a.flows.push(FlowInit {
                                src: NodeId::new(members[t.src as usize]),
                                dst: NodeId::new(members[t.dst as usize]),
                                size_bytes: t.bytes,
                                start: Start::After {
                                    barrier: gr.waits[i].map_or(op.ready, |b| local + b),
                                    gap: t.delay,
                                },
                                workload,
                                completes: Some(gr.completes[i].map_or(op.done, |b| local + b)),
                                collective: None,
                                tag: None,
                            });
                        }
                    }
                    PlannedKind::Compute => {}
                }
            }
            changed.push((k, members, first..a.flows.len()));
        }
        if changed.is_empty() {
            return;
        }
        // On threads every partition re-plans alike (from the same `Fate`s): the appended
        // barriers first get the partitions that run them.
        if self.partition.is_some() {
            self.home_appended_barriers(&a);
        }
        // The re-plan names only barriers not released and the job's endpoints: a refusal is
        // not expected, and would leave the job waiting on its old plan (never a panic).
        let Ok(report) = self.amend_lazily(&a) else {
            return;
        };
        for &f in &withdraw {
            self.withdraw_flow(f);
        }
        let first_partition = self.partition.as_ref().map(|p| p.is_first());
        if first_partition.is_some() {
            self.track_appended_flows(&a, FlowId::new(report.first_flow));
            self.recount_latest_pending();
        }
        let nb = a.barriers.len() as u32;
        if nb > 0 {
            let barriers = report.first_barrier..report.first_barrier + nb;
            self.jobs.extra_barriers.push((barriers, j));
        }
        let job = &mut self.jobs.list[j];
        for (k, members, range) in changed {
            let op = &mut job.elastic.ops[k];
            op.members = members;
            op.flows = range
                .map(|i| FlowId::new(report.first_flow + i as u32))
                .collect();
        }
        match first_partition {
            None => {
                self.jobs.appended.push(a);
            }
            // On threads the view applies it, from the first partition (`Parallel::fold_into`).
            Some(true) => self.jobs.replans.push((self.now, a)),
            Some(false) => {}
        }
    }

    /// Stop started flow `fid` of an elastic job's old plan: its sender stops and its arrival at
    /// its barrier is taken back (a packet of it still arriving later counts for nothing).
    ///
    /// On threads every partition withdraws it alike (its [`Fate`] said to): each marks its
    /// copy, its sender's partition counts it settled and every partition that counts its
    /// barrier takes the arrival.
    fn withdraw_flow(&mut self, fid: FlowId) {
        let fate = self.fate(fid);
        if fate.finished || fate.gone || !fate.started {
            return;
        }
        // Every copy is marked: on threads, one whose packets have not come here yet (its
        // record made now from the plan) must not count them when they do.
        self.materialise(fid);
        let part = self.partition.as_ref();
        let sends = part.is_none_or(|p| p.starts_flow(self.flows[fid].src));
        let f = &mut self.flows[fid];
        if sends && super::world::sends_long(&self.long_packets, f) {
            self.long_flows -= 1; // settled with packets never sent
        }
        if std::mem::take(&mut f.long_at_receiver) {
            self.long_flows -= 1; // its receiver (here) misses packets that never come
        }
        f.withdrawn = true;
        f.abandoned = true;
        f.rto_armed = false;
        f.next_seq = f.num_packets;
        f.resend.clear();
        let completes = f.completes;
        if sends {
            self.flows_settled += 1;
        }
        if let Some(b) = completes {
            let b = b as usize;
            let runs = part.is_none_or(|p| p.runs_barrier(b as u32));
            if runs && self.barriers[b].released_at == NEVER && !self.barriers[b].dead {
                if self.barriers[b].remaining == 1 {
                    self.barrier_arrive(b as u32);
                } else {
                    self.barriers[b].remaining -= 1;
                }
            }
        }
    }
}

/// A reacting job's outcome in run.json's `jobs` (docs/failures.md, "Jobs that react").
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct JobSummary {
    pub workload: u32,
    pub name: String,
    pub on_failure: &'static str,
    /// Ranks' endpoints (GPUs or hosts) of the job: lost GPU-time counts each.
    pub gpus: u32,
    pub iterations: u32,
    /// Iterations completed whose work counts (not thrown away by a restart).
    pub useful_iterations: u32,
    pub lost_iterations: u32,
    /// Failure episodes that hit the job while it ran.
    pub failures: u32,
    /// Time the job was frozen by failures (up to the stop).
    pub stalled_ps: u64,
    /// GPU-seconds not doing useful work because of failures, each counted once (per GPU the
    /// union of its lost intervals: docs/failures.md, "Lost GPU-time"), and by cause: waiting
    /// for the repair (stall), detection + repair + restart (restart), work since the
    /// checkpoint thrown away and not already lost otherwise (rework).
    pub lost_gpu_seconds: f64,
    pub lost_gpu_seconds_stall: f64,
    pub lost_gpu_seconds_restart: f64,
    pub lost_gpu_seconds_rework: f64,
    pub start_ps: u64,
    /// When its last iteration ended (None: not by the stop).
    pub end_ps: Option<u64>,
    /// Useful iterations per second over the job's span (to its end, or the stop).
    pub iterations_per_second: Option<f64>,
    /// Iterations per second (1 / mean iteration time) of the iterations that ended before the
    /// first failure, and that started after the last freeze ended.
    pub iterations_per_second_before: Option<f64>,
    pub iterations_per_second_after: Option<f64>,
    /// Net progress (iterations that count, after a restart's rollback) per second from the
    /// first failure to the end of the last freeze.
    pub iterations_per_second_during: Option<f64>,
    /// 1 / the network-free iteration time (`Graph::ideal_schedule`; None for inference).
    pub ideal_iterations_per_second: Option<f64>,
    /// Restart with `checkpoint_time`: checkpoints taken, and GPU-seconds their saving paused
    /// the job (also in `lost_gpu_seconds`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoints: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost_gpu_seconds_checkpoint: Option<f64>,
    /// Elastic: re-formations of the groups (after failures and at rejoins).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reformations: Option<u32>,
    /// Elastic: GPU-seconds of the excluded ranks (from the failure to the end of the
    /// re-formation that let them rejoin, or the job's end) and of the ranks that waited while
    /// the groups re-formed (both in `lost_gpu_seconds`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost_gpu_seconds_excluded: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost_gpu_seconds_reformation: Option<f64>,
    /// Elastic: the smallest group the job ran an iteration with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group_size_min: Option<u32>,
    /// Elastic: useful work per second over the job's span, in full-group iterations (an
    /// iteration of g of n ranks counts g / n: samples per second / samples per full step).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub work_per_second: Option<f64>,
    /// Degraded throughput: the job's achieved rate (elastic: `work_per_second`; else
    /// `iterations_per_second`) over its failure-free rate on the same fabric
    /// (`baseline_iterations_per_second`), so 1 exactly for a run without failures; elastic:
    /// the same for the iterations run with a smaller group only (their mean rate x their mean
    /// group fraction). None without a failure-free rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub relative_throughput: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub relative_throughput_shrunk: Option<f64>,
    /// The failure-free rate: 1 / the mean period (from the previous iteration's end, or the
    /// job's start, to the iteration's end) of the iterations no failure touched ("measured"),
    /// or, when every iteration was touched, of the first two iterations of a failure-free
    /// shadow run of the same scenario without its faults and failure processes ("shadow").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline_iterations_per_second: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub relative_throughput_baseline: Option<&'static str>,
    /// The achieved rate over the network-free rate (`ideal_iterations_per_second`: the same
    /// for every run of the job; 1 only if the network and failures cost nothing), and the same
    /// for the shrunk iterations (elastic). None without an ideal (inference).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_efficiency: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_efficiency_shrunk: Option<f64>,
    pub episodes: Vec<EpisodeSummary>,
}

/// One failure episode of a job (run.json `jobs[].episodes`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct EpisodeSummary {
    pub fail_ps: u64,
    /// When the last cut-off rank came back (None: not before the end).
    pub repair_ps: Option<u64>,
    /// When the job resumed (None: not before the stop, or the episode came after the job).
    pub resume_ps: Option<u64>,
    /// The endpoints (GPUs or hosts) it cut off.
    pub endpoints: Vec<u32>,
    /// The fault that started it (faults.arrow's source, index and target).
    pub fault_source: &'static str,
    pub fault_index: u32,
    pub fault_target: String,
    /// It hit the job while it ran (else it came after the job's end).
    pub hit: bool,
    pub lost_iterations: u32,
    pub rework_ps: u64,
    pub redo_ps: u64,
}

const PS: f64 = 1e12;

/// The length of the union of intervals [a, b) cut at `cap`.
fn union_len(mut v: Vec<(Time, Time)>, cap: Time) -> u64 {
    for x in v.iter_mut() {
        x.1 = x.1.min(cap);
    }
    v.retain(|x| x.0 < x.1);
    v.sort_unstable();
    let mut total = 0;
    let mut cur: Option<(Time, Time)> = None;
    for (a, b) in v {
        match &mut cur {
            Some(c) if a <= c.1 => c.1 = c.1.max(b),
            _ => {
                total += cur.map_or(0, |c| c.1 - c.0);
                cur = Some((a, b));
            }
        }
    }
    total + cur.map_or(0, |c| c.1 - c.0)
}

impl Job {
    /// The iterations no failure touched: how many, and the sum of their periods (from the
    /// previous iteration's end, or the job's start, to their own end). A failure touches the
    /// periods that overlap its effect: from the failure to the end of the freeze it caused,
    /// and (elastic) while its ranks were excluded. None if there are none.
    pub fn untouched_periods(&self) -> Option<(u32, u64)> {
        let mut ends: Vec<Time> = self
            .iteration_end
            .iter()
            .copied()
            .filter(|&t| t != NEVER)
            .collect();
        ends.sort_unstable();
        let hit: Vec<(Time, Time)> = self
            .outcomes
            .iter()
            .map(|o| (o.fail_ps, o.freeze_end_ps.unwrap_or(NEVER)))
            .chain(
                self.elastic
                    .exclusions
                    .iter()
                    .map(|x| (x.from_ps, x.until_ps.unwrap_or(NEVER))),
            )
            .map(|(a, b)| (a, b.max(a.saturating_add(1))))
            .collect();
        let (mut k, mut sum, mut prev) = (0u32, 0u64, self.plan.start_ps);
        for e in ends {
            if !hit.iter().any(|&(a, b)| a < e && b > prev) {
                k += 1;
                sum += e.saturating_sub(prev);
            }
            prev = e;
        }
        (k > 0 && sum > 0).then_some((k, sum))
    }

    /// Whether a failure has touched the job so far.
    pub fn touched(&self) -> bool {
        !self.outcomes.is_empty() || !self.elastic.exclusions.is_empty()
    }

    /// The first (up to) two iterations' count and period once they have ended: the
    /// failure-free baseline a shadow run gives.
    pub fn first_periods(&self) -> Option<(u32, u64)> {
        let k = self.iteration_end.len().min(2);
        let ends = &self.iteration_end[..k];
        if k == 0 || ends.contains(&NEVER) {
            return None;
        }
        let last = ends.iter().copied().max()?;
        let sum = last.saturating_sub(self.plan.start_ps);
        (sum > 0).then_some((k as u32, sum))
    }

    /// The job's outcome at `now` (the stop) from its steps (`steps`: its rows of steps.arrow).
    /// `shadow`: the failure-free baseline of a shadow run (`first_periods`), used when no
    /// iteration of this run was untouched by failures.
    pub fn summary(
        &self,
        name: String,
        now: Time,
        steps: &[&crate::trace::ops::StepRow],
        fault: impl Fn(u32) -> (&'static str, u32, String),
        shadow: Option<(u32, u64)>,
    ) -> JobSummary {
        let gpus = self.plan.endpoints.len() as u32;
        // Lost time is a union of intervals: a GPU-second two failures' losses overlap on counts
        // once (docs/failures.md, "Lost GPU-time"). Stall: the freezes; restart: from the
        // failure to the resume (R), the checkpoint saves' pauses not in R (C), and the work
        // since the last checkpoint thrown away not in R or C (W).
        let on = self.plan.reaction.on_failure;
        let (stall, restart, rework, checkpoint_lost) = match on {
            OnFailure::Stall => {
                let s = self
                    .outcomes
                    .iter()
                    .map(|o| (o.fail_ps, o.freeze_end_ps.unwrap_or(NEVER)));
                (union_len(s.collect(), now), 0, 0, 0)
            }
            OnFailure::Restart { .. } => {
                let r: Vec<(Time, Time)> = self
                    .outcomes
                    .iter()
                    .map(|o| (o.fail_ps, o.resume_ps.unwrap_or(NEVER)))
                    .collect();
                let w: Vec<(Time, Time)> = self
                    .outcomes
                    .iter()
                    .map(|o| (o.fail_ps - o.rework_ps.min(o.fail_ps), o.fail_ps))
                    .collect();
                let c = &self.checkpoint_pauses;
                let rc: Vec<(Time, Time)> = r.iter().chain(c).copied().collect();
                let (r_len, rc_len) = (union_len(r.clone(), now), union_len(rc.clone(), now));
                let all = union_len(rc.into_iter().chain(w).collect(), now);
                (0, r_len, all - rc_len, rc_len - r_len)
            }
            OnFailure::Elastic { .. } => (0, 0, 0, 0),
        };
        let gpu_s = |ps: u64| ps as f64 / PS * gpus as f64;
        let stalled_ps = self.frozen_within(0, now);
        let end = (!self.iteration_end.is_empty()
            && self.iteration_end.iter().all(|&t| t != NEVER))
        .then(|| self.iteration_end.iter().copied().max().unwrap_or(0));
        // Elastic: GPU-time of the excluded ranks and of the re-formations (GPU-picoseconds),
        // per rank a union: its exclusions (X), and the job's re-formation freezes (F) not in X.
        let stop = end.unwrap_or(now).min(now);
        let f: Vec<(Time, Time)> = self
            .elastic
            .reformations
            .iter()
            .map(|r| (r.start_ps, r.end_ps))
            .collect();
        let f_len = union_len(f.clone(), now);
        let mut touched: Vec<u32> = self
            .elastic
            .exclusions
            .iter()
            .flat_map(|x| x.endpoints.iter().copied())
            .collect();
        touched.sort_unstable();
        touched.dedup();
        let (mut excluded_gpu_ps, mut reform_gpu_ps) = (
            0u128,
            gpus.saturating_sub(touched.len() as u32) as u128 * u128::from(f_len),
        );
        for e in &touched {
            let x: Vec<(Time, Time)> = self
                .elastic
                .exclusions
                .iter()
                .filter(|x| x.endpoints.binary_search(e).is_ok())
                .map(|x| (x.from_ps, x.until_ps.unwrap_or(stop)))
                .collect();
            let x_len = union_len(x.clone(), now);
            excluded_gpu_ps += u128::from(x_len);
            reform_gpu_ps += u128::from(
                union_len(x.into_iter().chain(f.iter().copied()).collect(), now) - x_len,
            );
        }
        let gpu_ps_s = |v: u128| v as f64 / PS;
        let (checkpoint_save_ps, elastic) = match self.plan.reaction.on_failure {
            OnFailure::Restart {
                checkpoint_save_ps, ..
            } => (checkpoint_save_ps, false),
            OnFailure::Elastic { .. } => (0, true),
            OnFailure::Stall => (0, false),
        };
        let span = end.unwrap_or(now).saturating_sub(self.plan.start_ps);
        let rate = |n: f64, ps: u64| (ps > 0).then(|| n * PS / ps as f64);
        let mean_rate = |rows: Vec<u64>| {
            (!rows.is_empty()).then(|| PS * rows.len() as f64 / rows.iter().sum::<u64>() as f64)
        };
        let first_fail = self.outcomes.first().map(|o| o.fail_ps);
        let last_end = self.freezes.last().map(|f| f.1);
        let before = mean_rate(
            steps
                .iter()
                .filter(|s| matches!((s.end_ps, first_fail), (Some(e), Some(f)) if e <= f))
                .filter_map(|s| s.time_ps())
                .collect(),
        );
        let after = mean_rate(
            steps
                .iter()
                .filter(|s| matches!((s.start_ps, last_end), (Some(a), Some(l)) if l != NEVER && a >= l))
                .filter_map(|s| s.time_ps())
                .collect(),
        );
        let during = match (self.outcomes.first(), self.outcomes.last()) {
            (Some(a), Some(b)) => match (b.freeze_end_ps, b.progress_at_resume) {
                (Some(e), Some(p)) if e > a.fail_ps => {
                    Some((p as f64 - a.progress_at_fail as f64) * PS / (e - a.fail_ps) as f64)
                }
                _ => None,
            },
            _ => None,
        };
        let episodes = self
            .plan
            .episodes
            .iter()
            .enumerate()
            .map(|(k, ep)| {
                let o = self.outcomes.iter().find(|o| o.episode == k as u32);
                let (source, index, target) = fault(ep.fault);
                EpisodeSummary {
                    fail_ps: ep.fail_ps,
                    repair_ps: ep.repair_ps,
                    resume_ps: o.and_then(|o| o.resume_ps).filter(|&t| t <= now),
                    endpoints: ep.endpoints.clone(),
                    fault_source: source,
                    fault_index: index,
                    fault_target: target,
                    hit: o.is_some(),
                    lost_iterations: o.map_or(0, |o| o.lost_iterations),
                    rework_ps: o.map_or(0, |o| o.rework_ps),
                    redo_ps: o.map_or(0, |o| o.redo_ps),
                }
            })
            .collect();
        let n = gpus.max(1) as f64;
        let groups = &self.elastic.group;
        let work: f64 = (0..self.iteration_end.len())
            .filter(|&i| self.useful[i])
            .map(|i| groups.get(i).copied().unwrap_or(0) as f64 / n)
            .sum();
        let work_per_second = if elastic { rate(work, span) } else { None };
        let shrunk: Vec<(u64, u32)> = steps
            .iter()
            .filter_map(|s| {
                let g = groups.get(s.iteration as usize).copied()?;
                (g > 0 && g < gpus).then_some((s.time_ps()?, g))
            })
            .collect();
        let shrunk_rate = (!shrunk.is_empty()).then(|| {
            let t: u64 = shrunk.iter().map(|&(t, _)| t).sum();
            let g: f64 = shrunk.iter().map(|&(_, g)| g as f64 / n).sum::<f64>();
            g * PS / t as f64
        });
        let ideal = self
            .plan
            .ideal_iteration_ps
            .filter(|&t| t > 0)
            .map(|t| PS / t as f64);
        // Against the failure-free rate of the same job on the same fabric: measured on the
        // iterations no failure touched, else from a failure-free shadow run. The same formula
        // as the achieved rate, so a run without failures scores 1 exactly.
        let (base, base_source) = match self.untouched_periods() {
            Some(b) => (Some(b), Some("measured")),
            None => (shadow, shadow.map(|_| "shadow")),
        };
        let base_rate = base.and_then(|(k, sum)| rate(k as f64, sum));
        let over = |w: Option<f64>, b: Option<f64>| match (w, b) {
            (Some(w), Some(b)) if b > 0.0 => Some(w / b),
            _ => None,
        };
        let achieved = if elastic {
            work_per_second
        } else {
            rate(self.progress as f64, span)
        };
        let lost_extra = gpu_ps_s(excluded_gpu_ps + reform_gpu_ps) + gpu_s(checkpoint_lost);
        JobSummary {
            workload: self.plan.workload,
            name,
            on_failure: self.plan.reaction.on_failure.name(),
            gpus,
            iterations: self.plan.iterations,
            useful_iterations: self.progress,
            lost_iterations: self.outcomes.iter().map(|o| o.lost_iterations).sum(),
            failures: {
                let mut k: Vec<u32> = self.outcomes.iter().map(|o| o.episode).collect();
                k.sort_unstable();
                k.dedup();
                k.len() as u32
            },
            stalled_ps,
            lost_gpu_seconds: gpu_s(stall + restart + rework) + lost_extra,
            lost_gpu_seconds_stall: gpu_s(stall),
            lost_gpu_seconds_restart: gpu_s(restart),
            lost_gpu_seconds_rework: gpu_s(rework),
            start_ps: self.plan.start_ps,
            end_ps: end,
            iterations_per_second: rate(self.progress as f64, span),
            iterations_per_second_before: before,
            iterations_per_second_after: after,
            iterations_per_second_during: during,
            ideal_iterations_per_second: ideal,
            checkpoints: (checkpoint_save_ps > 0).then_some(self.checkpoints),
            lost_gpu_seconds_checkpoint: (checkpoint_save_ps > 0).then(|| gpu_s(checkpoint_lost)),
            reformations: elastic.then_some(self.elastic.reformations.len() as u32),
            lost_gpu_seconds_excluded: elastic.then(|| gpu_ps_s(excluded_gpu_ps)),
            lost_gpu_seconds_reformation: elastic.then(|| gpu_ps_s(reform_gpu_ps)),
            group_size_min: if elastic {
                groups.iter().copied().filter(|&g| g > 0).min()
            } else {
                None
            },
            work_per_second,
            relative_throughput: over(achieved, base_rate),
            relative_throughput_shrunk: over(shrunk_rate, base_rate),
            baseline_iterations_per_second: base_rate,
            relative_throughput_baseline: base_rate.and(base_source),
            network_efficiency: over(achieved, ideal),
            network_efficiency_shrunk: over(shrunk_rate, ideal),
            episodes,
        }
    }

    /// Fill in the steps.arrow failure columns of this job's rows.
    pub fn annotate(&self, steps: &mut [crate::trace::ops::StepRow], now: Time) {
        for s in steps
            .iter_mut()
            .filter(|s| s.workload == self.plan.workload)
        {
            let it = s.iteration as usize;
            let stalled_ps = match s.start_ps {
                Some(a) => self.frozen_within(a, s.end_ps.unwrap_or(now).min(now)),
                None => 0,
            };
            let elastic = self.is_elastic();
            s.failure = Some(crate::trace::ops::StepFailure {
                useful: self.useful.get(it).copied().unwrap_or(false),
                stalled_ps,
                elastic,
                group_size: self
                    .elastic
                    .group
                    .get(it)
                    .copied()
                    .filter(|&g| elastic && g > 0),
            });
        }
    }
}
