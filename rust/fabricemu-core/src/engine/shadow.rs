//! The failure-free shadow run, on a spare core while the run goes on.
//!
//! A job every iteration of which a failure touched takes its failure-free rate (run.json's
//! `relative_throughput`) from a shadow: the same scenario without its faults and failure
//! processes, run until the job has ended its first two iterations (docs/failures.md, "Relative
//! throughput"). Run after the run, it can take as long again (a 16,384-GPU job under failures:
//! 6.5 s after a 7.5 s run). Where a core is spare (`Simulation::shadow_alongside`), it runs on
//! its own thread from the moment failures make it likely to be needed: a failure has touched a
//! job and some job has no untouched iteration yet. It is stopped if every job gets one. The
//! shadow is the same deterministic run either way, so outputs are the same.

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::{Simulation, StepOutcome};
use crate::config::Scenario;

/// Each job's first (up to two) iterations' count and period in the shadow (`Job::first_periods`),
/// by index into `Simulation::jobs`; None where the shadow ended first.
pub(super) type Periods = Vec<Option<(u32, u64)>>;

/// Events the shadow runs between looks at what it is asked for.
const SLICE_EVENTS: u64 = 100_000;

/// The scenario of a run's shadow: no faults, no failure processes.
pub(super) fn shadow_scenario(s: &Scenario) -> Scenario {
    let mut s = s.clone();
    s.faults.clear();
    s.failure_processes.clear();
    s
}

/// Run the shadow of `s` until each of `jobs()` (None: every job) has its first periods, or the
/// shadow ends; `jobs` is asked again every slice (an empty list stops it at once).
pub(super) fn run_shadow(s: &Scenario, jobs: impl Fn() -> Option<Vec<usize>>) -> Option<Periods> {
    let mut sim = Simulation::build(s).ok()?;
    let get = |sim: &Simulation, j: usize| sim.jobs().get(j).and_then(|x| x.first_periods());
    loop {
        let want = jobs().unwrap_or_else(|| (0..sim.jobs().len()).collect());
        if want.iter().all(|&j| get(&sim, j).is_some()) {
            break;
        }
        if matches!(sim.step(SLICE_EVENTS), StepOutcome::Finished) {
            break;
        }
    }
    Some((0..sim.jobs().len()).map(|j| get(&sim, j)).collect())
}

/// A shadow running on its own thread.
pub(super) struct ShadowThread {
    /// The jobs whose periods are still wanted (None: all of them; empty: stop).
    want: Arc<Mutex<Option<Vec<usize>>>>,
    handle: Option<JoinHandle<Option<Periods>>>,
}

impl ShadowThread {
    /// Start the shadow of `s` (one thread: the run's others are busy).
    pub(super) fn start(s: &Scenario) -> std::io::Result<Self> {
        let mut s = shadow_scenario(s);
        s.threads = 1;
        let want: Arc<Mutex<Option<Vec<usize>>>> = Arc::new(Mutex::new(None));
        let asked = Arc::clone(&want);
        let handle = std::thread::Builder::new()
            .name("fabricemu-shadow".into())
            .spawn(move || {
                run_shadow(&s, || asked.lock().map_or(Some(Vec::new()), |w| w.clone()))
            })?;
        Ok(Self {
            want,
            handle: Some(handle),
        })
    }

    /// The periods of `jobs` (every other job's too, where the shadow has them), once it has
    /// them; None if the shadow could not be built or its thread failed (the caller then runs
    /// one itself).
    pub(super) fn finish(mut self, jobs: &[usize]) -> Option<Periods> {
        if let Ok(mut w) = self.want.lock() {
            *w = Some(jobs.to_vec());
        }
        self.handle.take()?.join().ok().flatten()
    }
}

impl Drop for ShadowThread {
    /// Stop the shadow (a run ended without it being needed, or ended in an error).
    fn drop(&mut self) {
        if let Some(handle) = self.handle.take() {
            if let Ok(mut w) = self.want.lock() {
                *w = Some(Vec::new());
            }
            let _ = handle.join();
        }
    }
}
