//! `run`: the engine in slices with the GIL released, progress and Ctrl-C between slices.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use fabricemu_core::budget::{self, Limits};
use fabricemu_core::control::ControlStep;
use fabricemu_core::scenario::Built;
use fabricemu_core::{
    output, Scenario, ScenarioError as CoreScenarioError, Simulation, StepOutcome,
};
use pyo3::prelude::*;

use crate::errors::{guard, io_error, panic_error, scenario_error, SimulationError};
use crate::scenario::{take_built, validated};

/// How often the caller wakes up to check for Ctrl-C while the fabric is built.
const BUILD_POLL: Duration = Duration::from_millis(50);

/// Run a scenario (JSON text) and write `flows.arrow` and `run.json` into `out_dir`.
///
/// Before anything is allocated, the run's memory and trace volume are estimated and checked
/// against `max_memory` (bytes; default: 80 % of the available memory) and `max_trace_size`
/// (bytes; default 20 GiB): a scenario over either is a ScenarioError stating the estimate and
/// the limit. The fabric is built and the flows generated in a worker thread while this one waits
/// without the GIL and checks for signals: Ctrl-C then stops the build at once.
///
/// The engine runs `slice_events` events at a time without the GIL. Between slices it checks for
/// signals and calls `progress(simulated_ps, stop_ps, events, flows_finished, flows_total)` (`stop_ps`
/// is None when the run ends with its last flow). If either raises (Ctrl-C raises
/// `KeyboardInterrupt`), the partial outputs are written with `interrupted: true` and the exception
/// propagates. Returns run.json as JSON text.
///
/// With `controller` (a callable), the engine also stops at every control boundary (every
/// `control_interval` ps of simulated time; None: the scenario's `[control] interval`, or 20us)
/// and calls `controller(telemetry)` with the snapshot as a dict (see `crate::control`); it
/// returns a list of action dicts applied at that simulated time. A bad action raises
/// `fabricemu.errors.ControlError` naming the action and field; that, or any exception from the
/// controller, stops the run like Ctrl-C (partial outputs, `interrupted: true`).
///
/// A run that ends checks that its packets balance (`balanced`): if not, its outputs are written
/// and it raises `SimulationError`. `miscount_for_test` miscounts one packet first (tests only).
///
/// `shadow_alongside`: a failure-free shadow run a job under failures may need for its baseline
/// (run.json's `relative_throughput`) may run on a spare core while the run goes on, where the
/// machine has a core beside the run's threads and the memory limit holds twice the estimate
/// (`engine::shadow`); false (sweeps, whose points use every core) runs it after the run.
#[pyfunction]
#[pyo3(signature = (scenario_json, out_dir, progress = None, slice_events = 2_000_000, max_memory = None, max_trace_size = None, controller = None, control_interval = None, miscount_for_test = false, shadow_alongside = true))]
#[allow(clippy::too_many_arguments)]
pub fn run(
    py: Python<'_>,
    scenario_json: &str,
    out_dir: PathBuf,
    progress: Option<Bound<'_, PyAny>>,
    slice_events: u64,
    max_memory: Option<u64>,
    max_trace_size: Option<u64>,
    controller: Option<Bound<'_, PyAny>>,
    control_interval: Option<u64>,
    miscount_for_test: bool,
    shadow_alongside: bool,
) -> PyResult<String> {
    guard("running the scenario", || {
        run_guarded(
            py,
            scenario_json,
            out_dir,
            progress,
            slice_events,
            Limits::new(max_memory, max_trace_size),
            controller.map(|c| (c, control_interval)),
            miscount_for_test,
            shadow_alongside,
        )
    })
}

#[allow(clippy::too_many_arguments)]
fn run_guarded(
    py: Python<'_>,
    scenario_json: &str,
    out_dir: PathBuf,
    progress: Option<Bound<'_, PyAny>>,
    slice_events: u64,
    limits: Limits,
    controller: Option<(Bound<'_, PyAny>, Option<u64>)>,
    miscount_for_test: bool,
    shadow_alongside: bool,
) -> PyResult<String> {
    let (spec, normalised) = validated(py, scenario_json)?;
    let estimate = budget::check(&spec, &limits).map_err(|e| scenario_error(py, &e))?;
    std::fs::create_dir_all(&out_dir).map_err(|e| io_error(&e, &out_dir))?;
    let slice_events = slice_events.max(1);

    let started = Instant::now();
    let mut sim = build(py, &spec, take_built(&normalised))?;
    let stop_ps = sim.stop_time();
    sim.open_traces(&out_dir, &output::metadata(&normalised, spec.seed))
        .map_err(|e| io_error(&e, &out_dir))?;
    if let Some((_, interval)) = &controller {
        if let Some(i) = interval {
            crate::control::check_interval(*i)?;
        }
        sim.enable_control(*interval);
    }
    if shadow_alongside {
        sim.shadow_alongside(&estimate, &limits);
    }

    loop {
        let outcome = if let Some((callable, _)) = &controller {
            let step = py
                .detach(|| catch_unwind(AssertUnwindSafe(|| sim.step_control(slice_events))))
                .map_err(|p| panic_error("running", p))?;
            match step {
                ControlStep::Finished => StepOutcome::Finished,
                ControlStep::Running => StepOutcome::Running,
                ControlStep::Boundary(_) => {
                    if let Err(e) = crate::control::call_controller(py, &mut sim, callable) {
                        let wall = started.elapsed().as_secs_f64();
                        write(py, &out_dir, &mut sim, &normalised, spec.seed, true, wall)?;
                        return Err(e);
                    }
                    StepOutcome::Running
                }
            }
        } else {
            py.detach(|| catch_unwind(AssertUnwindSafe(|| sim.step(slice_events))))
                .map_err(|p| panic_error("running", p))?
        };
        let checked = py.check_signals().and_then(|()| match &progress {
            Some(callback) => {
                let s = sim.stats();
                callback
                    .call1((
                        s.simulated_ps,
                        stop_ps,
                        s.events,
                        s.flows_finished,
                        s.flows_total,
                    ))
                    .map(drop)
            }
            None => Ok(()),
        });
        if let Err(interrupt) = checked {
            // Leave readable partial outputs, then let the exception (usually Ctrl-C) propagate.
            let wall = started.elapsed().as_secs_f64();
            write(py, &out_dir, &mut sim, &normalised, spec.seed, true, wall)?;
            return Err(interrupt);
        }
        if outcome == StepOutcome::Finished {
            break;
        }
    }
    let wall = started.elapsed().as_secs_f64();
    let info = write(py, &out_dir, &mut sim, &normalised, spec.seed, false, wall)?;
    if miscount_for_test {
        sim.miscount_for_test(); // (tests of the check below)
    }
    balanced(py, &mut sim)?;
    Ok(info.to_string())
}

/// The run's packets balance at its end: each one live is in one queue or on one link, every
/// packet made was delivered, dropped or is live, and every switch's buffer counters hold what
/// its queues do (`Simulation::check_conservation`). Otherwise the engine went wrong, and the
/// run is an error (its outputs written, for the report) rather than figures that look right.
/// (Until 2026-12-05 only the engine's own tests and examples checked; a fault that counted a
/// GPU cluster's switch buffer below zero ran on to the end with plausible outputs.)
fn balanced(py: Python<'_>, sim: &mut Simulation) -> PyResult<()> {
    let checked = py
        .detach(|| catch_unwind(AssertUnwindSafe(|| sim.check_conservation())))
        .map_err(|p| panic_error("checking the run's packets", p))?;
    checked.map_err(|e| {
        SimulationError::new_err(format!(
            "internal error: the run's packets do not balance at its end ({e}); its outputs \
             were written, but may be wrong. Please report it with the scenario"
        ))
    })
}

/// Build the fabric and generate the flows in a worker thread; this thread waits without the
/// GIL in short slices and checks for signals in between. On Ctrl-C (or any exception a signal
/// handler raises) the worker is told to stop generating flows and the exception propagates at
/// once; the worker's partial result is dropped when it ends.
///
/// `kept` is the build made when the Scenario was constructed (same normalised JSON), if still
/// held: then only the world is set up from it.
fn build(py: Python<'_>, spec: &Scenario, kept: Option<Built>) -> PyResult<Simulation> {
    let cancel = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let worker_spec = spec.clone();
    let worker_cancel = Arc::clone(&cancel);
    std::thread::Builder::new()
        .name("fabricemu-build".into())
        .spawn(move || {
            budget::set_cancel_flag(Some(worker_cancel));
            let built = catch_unwind(AssertUnwindSafe(|| match kept {
                Some(built) => Ok(Simulation::new(built)),
                None => Simulation::build(&worker_spec),
            }));
            // The receiver is gone if the caller was interrupted: nothing to report then.
            let _ = tx.send(built);
        })
        .map_err(|e| pyo3::exceptions::PyOSError::new_err(format!("cannot start a thread: {e}")))?;
    let mut rx = Some(rx);
    loop {
        let waiting = rx.take().expect("kept between waits");
        let (got, back) = py.detach(move || (waiting.recv_timeout(BUILD_POLL), waiting));
        rx = Some(back);
        match got {
            Ok(Ok(Ok(sim))) => {
                // An interrupt that came while the build finished (or during the validation
                // before it) stops here, before the run writes anything.
                py.check_signals()?;
                return Ok(sim);
            }
            Ok(Ok(Err(e))) => return Err(scenario_error(py, &e)),
            Ok(Err(p)) => return Err(panic_error("building the fabric", p)),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let Err(interrupt) = py.check_signals() {
                    cancel.store(true, Ordering::Relaxed);
                    return Err(interrupt);
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let e = CoreScenarioError::at("", "the build thread ended without a result");
                return Err(panic_error("building the fabric", Box::new(e.to_string())));
            }
        }
    }
}

fn write(
    py: Python<'_>,
    dir: &Path,
    sim: &mut Simulation,
    scenario_json: &str,
    seed: u64,
    interrupted: bool,
    wall_seconds: f64,
) -> PyResult<serde_json::Value> {
    py.detach(|| {
        catch_unwind(AssertUnwindSafe(|| {
            output::write_outputs(dir, sim, scenario_json, seed, interrupted, wall_seconds)
        }))
    })
    .map_err(|p| panic_error("writing the outputs", p))?
    .map_err(|e| io_error(&e, dir))
}
