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
//! Nothing here runs per packet: only at a job's barrier events, flow starts and failures.

use std::collections::HashMap;

use super::queue::Event;
use super::world::World;
use crate::ids::FlowId;
use crate::transport::NEVER;
use crate::units::Time;
use crate::workload::graph::reaction::{Checkpoint, JobPlan, OnFailure};
use crate::workload::FlowPlan;

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
            plan,
            op_iteration,
            ops_left,
            iteration_end: vec![NEVER; n],
            useful: vec![false; n],
            completed: Vec::new(),
            progress: 0,
            checkpoint: 0,
            freezes: Vec::new(),
            outcomes: Vec::new(),
        }
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

    /// Op `op` (index within the job) ended at `now`.
    fn op_ended(&mut self, op: usize, now: Time) {
        let it = self.op_iteration[op] as usize;
        self.ops_left[it] -= 1;
        if self.ops_left[it] > 0 {
            return;
        }
        self.iteration_end[it] = now;
        self.useful[it] = true;
        self.completed.push(it as u32);
        self.progress += 1;
        if let OnFailure::Restart { checkpoint, .. } = self.plan.reaction.on_failure {
            let take = match checkpoint {
                Checkpoint::Iterations(k) => self.progress.is_multiple_of(k),
                Checkpoint::Time(every) => now - self.checkpoint_ps >= every,
            };
            if take {
                self.checkpoint = self.progress;
                self.checkpoint_ps = now;
            }
        }
    }
}

/// The reacting jobs of a run.
#[derive(Default)]
pub struct Jobs {
    pub list: Vec<Job>,
    /// `JobFailure` / `JobResume` event payloads: (job, episode).
    episodes: Vec<(u32, u32)>,
    /// Barriers of a job with a delayed arrival pending, or a release deferred: when it is due
    /// on the job's clock.
    due: HashMap<u32, Time>,
    /// Flows of a job whose start is pending after a gap: when it is due on the job's clock.
    flow_due: HashMap<FlowId, Time>,
}

impl Jobs {
    pub fn new(plan: &FlowPlan) -> Self {
        let mut jobs = Jobs::default();
        for (j, p) in plan.jobs.iter().enumerate() {
            for k in 0..p.episodes.len() {
                jobs.episodes.push((j as u32, k as u32));
            }
            jobs.list.push(Job::new(p.clone(), plan));
        }
        jobs
    }

    /// The job barrier `b` belongs to.
    #[inline]
    pub fn job_of(&self, b: u32) -> Option<usize> {
        self.list.iter().position(|j| j.plan.barriers.contains(&b))
    }

    /// (time, event index) of every episode's start.
    pub fn failure_events(&self) -> Vec<(Time, u32)> {
        self.episodes
            .iter()
            .enumerate()
            .map(|(e, &(j, k))| {
                let ep = &self.list[j as usize].plan.episodes[k as usize];
                (ep.fail_ps, e as u32)
            })
            .collect()
    }
}

impl World {
    /// Barrier `b` of job `j` is about to release at `now`: false if the job is frozen (the
    /// release is deferred to the freeze's end); else its op's end is recorded.
    pub(super) fn job_release(&mut self, j: usize, b: u32) -> bool {
        let now = self.now;
        let job = &mut self.jobs.list[j];
        if let Some(end) = job.frozen_until(now) {
            self.barriers[b as usize].remaining = 1;
            self.jobs.due.insert(b, job.clock(now));
            if end != NEVER {
                self.pending_arrivals += 1;
                self.events.push(end, Event::BarrierArrive(b));
            }
            return false;
        }
        let rel = b - job.plan.barriers.start;
        let op = (rel / 2) as usize;
        if rel % 2 == 1 && op < job.op_iteration.len() {
            job.op_ended(op, now);
        }
        true
    }

    /// Barrier `b` of job `j` releases now: its flows start and its chained barriers get their
    /// arrival, each after its gap or delay on the job's clock.
    pub(super) fn job_barrier_released(&mut self, j: usize, b: u32) {
        let now = self.now;
        let barrier = &mut self.barriers[b as usize];
        barrier.released_at = now;
        let waiting = std::mem::take(&mut barrier.waiting);
        let then = std::mem::take(&mut barrier.then);
        for &(fid, gap) in &waiting {
            if gap == 0 {
                self.events.push(now, Event::FlowStart(fid));
            } else {
                self.job_defer_flow(j, fid, gap);
            }
        }
        for &(next, delay) in &then {
            if delay == 0 {
                self.pending_arrivals += 1;
                self.events.push(now, Event::BarrierArrive(next));
            } else {
                self.job_defer_arrival(j, next, delay);
            }
        }
        let barrier = &mut self.barriers[b as usize];
        barrier.waiting = waiting;
        barrier.then = then;
    }

    /// When a delayed event of job `j` (due `delay` after now on its clock) happens; remembers
    /// the due time in `due` under `key`.
    pub(super) fn job_delay(&self, j: usize, delay: Time) -> (Time, Time) {
        let job = &self.jobs.list[j];
        let due = job.clock(self.now).saturating_add(delay);
        (due, job.thaw(due))
    }

    pub(super) fn job_defer_arrival(&mut self, j: usize, next: u32, delay: Time) {
        let (due, at) = self.job_delay(j, delay);
        self.jobs.due.insert(next, due);
        self.pending_arrivals += 1;
        self.events.push(at, Event::BarrierArrive(next));
    }

    pub(super) fn job_defer_flow(&mut self, j: usize, fid: FlowId, gap: Time) {
        let (due, at) = self.job_delay(j, gap);
        self.jobs.flow_due.insert(fid, due);
        self.events.push(at, Event::FlowStart(fid));
    }

    /// A `BarrierArrive(b)` popped: false if it is not due yet on its job's clock (it was pushed
    /// again for when it is, or dropped if its job never resumes).
    pub(super) fn job_arrival_due(&mut self, b: u32) -> bool {
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
            self.events.push(at, Event::BarrierArrive(b));
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
        let w = self.flows[fid].workload;
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
            self.events.push(at, Event::FlowStart(fid));
        }
        false
    }

    /// Episode event `e` begins: its job freezes.
    pub(super) fn job_failure(&mut self, e: u32) {
        let now = self.now;
        let (j, k) = self.jobs.episodes[e as usize];
        let job = &mut self.jobs.list[j as usize];
        if job.finished() {
            return; // the failure came after the job ended
        }
        let ep = &job.plan.episodes[k as usize];
        let r = job.plan.reaction;
        let frozen = job.frozen_until(now).is_some();
        let progress_at_fail = job.progress;
        let started = now > job.plan.start_ps;
        let (resume, lost, rework, redo) = match r.on_failure {
            OnFailure::Stall => (
                ep.repair_ps.map(|t| t.saturating_add(r.detection_ps)),
                0,
                0,
                0,
            ),
            OnFailure::Restart { restart_ps, .. } => {
                let resume = ep.repair_ps.map(|rep| {
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
            self.events.push(end, Event::JobResume(e));
        }
    }

    /// Episode event `e`'s freeze ended: the flows of its cut-off ranks resend what was not
    /// acknowledged now (the job reconnects) rather than at their next timeout.
    pub(super) fn job_resume(&mut self, e: u32) {
        let now = self.now;
        let (j, k) = self.jobs.episodes[e as usize];
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
            let fl = &self.flows[fid];
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
            let r = self.cc.on_loss(fid, true, now);
            self.react(fid, r);
            self.activate(fid);
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
    /// GPU-seconds not doing useful work because of failures, and by cause: waiting for the
    /// repair (stall), detection + repair + restart (restart), work since the checkpoint
    /// thrown away (rework).
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

impl Job {
    /// The job's outcome at `now` (the stop) from its steps (`steps`: its rows of steps.arrow).
    pub fn summary(
        &self,
        name: String,
        now: Time,
        steps: &[&crate::trace::ops::StepRow],
        fault: impl Fn(u32) -> (&'static str, u32, String),
    ) -> JobSummary {
        let gpus = self.plan.endpoints.len() as u32;
        let (mut stall, mut restart, mut rework) = (0u64, 0u64, 0u64);
        for o in &self.outcomes {
            let until = |t: Option<Time>| t.unwrap_or(now).min(now).saturating_sub(o.fail_ps);
            match self.plan.reaction.on_failure {
                OnFailure::Stall => stall += until(o.freeze_end_ps),
                OnFailure::Restart { .. } => {
                    restart += until(o.resume_ps);
                    rework += o.rework_ps;
                }
            }
        }
        let gpu_s = |ps: u64| ps as f64 / PS * gpus as f64;
        let stalled_ps = self.frozen_within(0, now);
        let end = (!self.iteration_end.is_empty()
            && self.iteration_end.iter().all(|&t| t != NEVER))
        .then(|| self.iteration_end.iter().copied().max().unwrap_or(0));
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
        JobSummary {
            workload: self.plan.workload,
            name,
            on_failure: self.plan.reaction.on_failure.name(),
            gpus,
            iterations: self.plan.iterations,
            useful_iterations: self.progress,
            lost_iterations: self.outcomes.iter().map(|o| o.lost_iterations).sum(),
            failures: self.outcomes.len() as u32,
            stalled_ps,
            lost_gpu_seconds: gpu_s(stall + restart + rework),
            lost_gpu_seconds_stall: gpu_s(stall),
            lost_gpu_seconds_restart: gpu_s(restart),
            lost_gpu_seconds_rework: gpu_s(rework),
            start_ps: self.plan.start_ps,
            end_ps: end,
            iterations_per_second: rate(self.progress as f64, span),
            iterations_per_second_before: before,
            iterations_per_second_after: after,
            iterations_per_second_during: during,
            ideal_iterations_per_second: self
                .plan
                .ideal_iteration_ps
                .filter(|&t| t > 0)
                .map(|t| PS / t as f64),
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
            s.failure = Some(crate::trace::ops::StepFailure {
                useful: self.useful.get(it).copied().unwrap_or(false),
                stalled_ps,
            });
        }
    }
}
