//! Writing a run's output folder: flows.arrow and run.json, each complete or absent.

use std::io;
use std::path::Path;

use serde_json::{json, Value};

use crate::engine::Simulation;
use crate::trace::flows::write_flows;
use crate::trace::run_json::write_run_json;

/// Name of the flow table in an output folder.
pub const FLOWS_FILE: &str = "flows.arrow";
/// Name of the run summary in an output folder.
pub const RUN_JSON_FILE: &str = "run.json";

/// Schema metadata keys of the Arrow tables.
pub const META_SCENARIO: &str = "fabricemu.scenario";
pub const META_SEED: &str = "fabricemu.seed";
pub const META_VERSION: &str = "fabricemu.version";

/// Schema metadata of every table of a run: the scenario (JSON text), seed and version.
pub fn metadata(scenario_json: &str, seed: u64) -> Vec<(String, String)> {
    vec![
        (META_SCENARIO.to_string(), scenario_json.to_string()),
        (META_SEED.to_string(), seed.to_string()),
        (META_VERSION.to_string(), crate::VERSION.to_string()),
    ]
}

fn per_second(count: u64, wall_seconds: f64) -> f64 {
    if wall_seconds > 0.0 && wall_seconds.is_finite() {
        count as f64 / wall_seconds
    } else {
        0.0
    }
}

/// Write `dir/flows.arrow` and then `dir/run.json` (creating `dir` if needed), each atomically, and
/// return the run.json value: `scenario` (the scenario as a JSON object), `seed`, `version`,
/// `interrupted`, `wall_seconds`, `stats` (every [`crate::RunStats`] counter), and for convenience
/// `simulated_ps`, `events`, `packet_hops`, `events_per_second`, `packet_hops_per_second` (0 when
/// `wall_seconds` is 0).
pub fn write_outputs(
    dir: &Path,
    sim: &mut Simulation,
    scenario_json: &str,
    seed: u64,
    interrupted: bool,
    wall_seconds: f64,
) -> io::Result<Value> {
    let scenario: Value = serde_json::from_str(scenario_json).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("scenario JSON does not parse: {e}"),
        )
    })?;
    std::fs::create_dir_all(dir)?;

    let metadata = metadata(scenario_json, seed);
    write_flows(
        &dir.join(FLOWS_FILE),
        &sim.flow_rows(),
        &sim.workload_names(),
        &metadata,
    )?;

    sim.finish_traces(dir, &metadata)?;

    let stats = sim.stats();
    let wall_seconds = if wall_seconds.is_finite() {
        wall_seconds.max(0.0)
    } else {
        0.0
    };
    let run = json!({
        "scenario": scenario,
        "seed": seed,
        "version": crate::VERSION,
        "interrupted": interrupted,
        "wall_seconds": wall_seconds,
        "simulated_ps": stats.simulated_ps,
        "events": stats.events,
        "packet_hops": stats.packet_hops,
        "events_per_second": per_second(stats.events, wall_seconds),
        "packet_hops_per_second": per_second(stats.packet_hops, wall_seconds),
        "stats": serde_json::to_value(&stats).map_err(io::Error::other)?,
    });
    write_run_json(&dir.join(RUN_JSON_FILE), &run)?;
    Ok(run)
}
