//! `run`: the engine in slices with the GIL released, progress and Ctrl-C between slices.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::Instant;

use fabricemu_core::{output, Simulation, StepOutcome};
use pyo3::prelude::*;

use crate::errors::{io_error, panic_error, scenario_error};
use crate::scenario::validated;

/// Run a scenario (JSON text) and write `flows.arrow` and `run.json` into `out_dir`.
///
/// The engine runs `slice_events` events at a time without the GIL. Between slices it checks for
/// signals and calls `progress(simulated_ps, stop_ps, events, flows_finished, flows_total)` (`stop_ps`
/// is None when the run ends with its last flow). If either raises (Ctrl-C raises
/// `KeyboardInterrupt`), the partial outputs are written with `interrupted: true` and the exception
/// propagates. Returns run.json as JSON text.
#[pyfunction]
#[pyo3(signature = (scenario_json, out_dir, progress = None, slice_events = 2_000_000))]
pub fn run(
    py: Python<'_>,
    scenario_json: &str,
    out_dir: PathBuf,
    progress: Option<Bound<'_, PyAny>>,
    slice_events: u64,
) -> PyResult<String> {
    let (spec, normalised) = validated(py, scenario_json)?;
    std::fs::create_dir_all(&out_dir).map_err(|e| io_error(&e, &out_dir))?;
    let slice_events = slice_events.max(1);

    let started = Instant::now();
    let mut sim = py
        .detach(|| catch_unwind(|| Simulation::build(&spec)))
        .map_err(|p| panic_error("building the fabric", p))?
        .map_err(|e| scenario_error(py, &e))?;
    let stop_ps = sim.stop_time();
    sim.open_traces(&out_dir, &output::metadata(&normalised, spec.seed))
        .map_err(|e| io_error(&e, &out_dir))?;

    loop {
        let outcome = py
            .detach(|| catch_unwind(AssertUnwindSafe(|| sim.step(slice_events))))
            .map_err(|p| panic_error("running", p))?;
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
    Ok(info.to_string())
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
