//! Writing a run's output folder: flows.arrow, nodes.arrow, ports.arrow and run.json, each
//! complete or absent.

use std::io;
use std::path::Path;

use serde_json::{json, Value};

use crate::engine::Simulation;
use crate::trace::collectives::write_collectives;
pub use crate::trace::latency::LATENCY_FILE;
use crate::trace::run_json::write_run_json;
use crate::workload::FlowPlan;

/// Name of the flow table in an output folder.
pub const FLOWS_FILE: &str = "flows.arrow";
/// Name of the collectives table (written when the scenario has collective workloads).
pub const COLLECTIVES_FILE: &str = "collectives.arrow";
/// Name of the fault table (written when the scenario has faults or failure processes).
pub const FAULTS_FILE: &str = "faults.arrow";
/// Name of the circuit table (written when the fabric has an optical circuit switch, `[ocs]`).
pub const CIRCUITS_FILE: &str = "circuits.arrow";
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

/// Write `dir/flows.arrow`, `dir/collectives.arrow` (if the scenario has collectives), the traces,
/// `dir/nodes.arrow` and `dir/ports.arrow` (the fabric by name, [`crate::trace::fabric`]) and then
/// `dir/run.json` (creating `dir` if needed), each atomically, and return the run.json value:
/// `scenario` (the scenario as a JSON object), `seed`, `version`, `interrupted`, `wall_seconds`,
/// `stats` (every [`crate::RunStats`] counter), `workloads` (see [`workload_reports`]), `fabric`
/// (the fabric as built, [`crate::topology::summary::describe`]), and for
/// convenience `simulated_ps`, `events`, `packet_hops`, `events_per_second`,
/// `packet_hops_per_second` (0 when `wall_seconds` is 0), and with synthetic workloads `synthetic`
/// (the measurement window's [`crate::engine::SyntheticStats`]), and with packet trimming
/// `trimmed_by_port` (switch, port and count of every port that trimmed).
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
    sim.write_flows_file(dir, &metadata)?;
    let plan = sim.workload_plan();
    let names = sim.workload_names();
    if !plan.collectives.is_empty() {
        write_collectives(
            &dir.join(COLLECTIVES_FILE),
            &sim.collective_rows_of(plan),
            &names,
            &metadata,
        )?;
    }

    if !sim.action_rows().is_empty() {
        crate::trace::actions::write_actions(
            &dir.join(crate::trace::actions::ACTIONS_FILE),
            sim.action_rows(),
            &metadata,
        )?;
    }
    if sim.has_faults() {
        crate::trace::faults::write_faults(&dir.join(FAULTS_FILE), &sim.fault_rows(), &metadata)?;
    }
    if sim.has_ocs() {
        crate::trace::circuits::write_circuits(
            &dir.join(CIRCUITS_FILE),
            &sim.circuit_rows(),
            &metadata,
        )?;
    }
    let steps = if plan.ops.is_empty() {
        Vec::new()
    } else {
        crate::trace::ops::write_ops_and_steps_annotated(
            dir,
            &sim.op_rows_of(plan),
            &names,
            &metadata,
            |steps| sim.annotate_steps(steps),
        )?
    };

    sim.finish_traces(dir, &metadata)?;
    if let Some(l) = sim.latency() {
        l.write(&dir.join(LATENCY_FILE), &names, &metadata)?;
    }
    crate::trace::fabric::write_fabric_tables(
        dir,
        &sim.world().fabric,
        &sim.scenario().topology,
        &metadata,
    )?;
    let plan = sim.workload_plan();

    let stats = sim.stats();
    let wall_seconds = if wall_seconds.is_finite() {
        wall_seconds.max(0.0)
    } else {
        0.0
    };
    let mut run = json!({
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
        "workloads": workload_reports(sim, plan),
        "fabric": crate::topology::summary::describe(&sim.world().fabric, &scenario["topology"]),
    });
    if !steps.is_empty() {
        run.as_object_mut()
            .expect("an object")
            .insert("steps".into(), steps_summary(&steps));
    }
    if !sim.jobs().is_empty() {
        let jobs = sim.job_summaries(&steps);
        run.as_object_mut().expect("an object").insert(
            "jobs".into(),
            serde_json::to_value(&jobs).map_err(io::Error::other)?,
        );
    }
    if !sim.warnings().is_empty() {
        run.as_object_mut()
            .expect("an object")
            .insert("warnings".into(), json!(sim.warnings()));
    }
    if let Some(w) = sim.parallel_windows() {
        // How the parallel engine ran: a measure of the machine as much as of the run (which
        // windows ran on one thread varies from run to run; the outputs do not).
        run.as_object_mut().expect("an object").insert(
            "parallel".into(),
            json!({
                "threads": sim.scenario().threads,
                "windows": w.count,
                "windows_merged": w.merged,
                "windows_long": w.long,
                "windows_on_one_thread": w.on_one_thread,
                "lookahead_ps": w.lookahead,
                "grid_ps": w.grid,
            }),
        );
    }
    if let Some(l) = sim.latency() {
        run.as_object_mut()
            .expect("an object")
            .insert("latency".into(), l.summary(&names));
    }
    if let Some((rows, truncated)) = sim.packet_trace() {
        let m = run.as_object_mut().expect("an object");
        m.insert("packet_trace_rows".into(), json!(rows));
        m.insert("packet_trace_truncated".into(), json!(truncated));
    }
    if let Some(ports) = sim.trimmed_by_port() {
        // Packet trimming: where it happened (the total is stats.trimmed_packets).
        let rows: Vec<Value> = ports
            .iter()
            .map(|&(switch, port, n)| json!({"switch": switch, "port": port, "trimmed": n}))
            .collect();
        run.as_object_mut()
            .expect("an object")
            .insert("trimmed_by_port".into(), Value::Array(rows));
    }
    if let Some(synth) = sim.synthetic_stats() {
        run.as_object_mut().expect("an object").insert(
            "synthetic".into(),
            serde_json::to_value(&synth).map_err(io::Error::other)?,
        );
    }
    write_run_json(&dir.join(RUN_JSON_FILE), &run)?;
    Ok(run)
}

/// run.json `steps`: over every complete iteration of the step workloads, `iterations`,
/// `time_ps_mean`, `time_ps_p50`, `time_ps_p99` (nearest rank), `time_ps_max`, and the mean
/// `compute_fraction`, `exposed_comm_fraction` and `bubble_fraction`.
fn steps_summary(steps: &[crate::trace::ops::StepRow]) -> Value {
    let done: Vec<&crate::trace::ops::StepRow> =
        steps.iter().filter(|s| s.breakdown.is_some()).collect();
    let mut times: Vec<u64> = done.iter().filter_map(|s| s.time_ps()).collect();
    times.sort_unstable();
    let n = times.len();
    let pct = |p: f64| -> Option<u64> {
        (n > 0).then(|| times[((p * n as f64).ceil() as usize).clamp(1, n) - 1])
    };
    let mean = |f: &dyn Fn(&crate::trace::ops::StepRow) -> Option<f64>| -> Option<f64> {
        let v: Vec<f64> = done.iter().filter_map(|s| f(s)).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let frac = |part: fn(&crate::trace::ops::Breakdown) -> f64| {
        mean(&move |s: &crate::trace::ops::StepRow| {
            let t = s.time_ps()? as f64;
            let b = s.breakdown.as_ref()?;
            (t > 0.0).then(|| part(b) / t)
        })
    };
    json!({
        "iterations": n,
        "time_ps_mean": (n > 0).then(|| times.iter().map(|&t| t as f64).sum::<f64>() / n as f64),
        "time_ps_p50": pct(0.5),
        "time_ps_p99": pct(0.99),
        "time_ps_max": times.last(),
        "compute_fraction": frac(|b| b.compute.0),
        "exposed_comm_fraction": frac(|b| b.exposed_comm.0),
        "bubble_fraction": frac(|b| b.bubble.0),
    })
}

/// Per workload (in scenario order): `name`, `kind`, `flows` and `bytes` it generated, and
/// `flows_finished`, `bytes_finished` by the end of the run. A `poisson` workload adds
/// `target_load`, `offered_load` (payload bits generated over the senders' host-link capacity in
/// the arrival window), `offered_load_wire` (the same with every packet's header),
/// `window_ps`, `senders` and `mean_flow_bytes`; a `synthetic` workload adds `target_load`,
/// `offered_load` (wire bits generated over the senders' capacity from its start to the stop time),
/// `window_ps` and `senders`; a `collective` workload adds `collectives` (its
/// groups) and `iterations_finished` (summed over groups).
pub fn workload_reports(sim: &Simulation, plan: &FlowPlan) -> Value {
    let names = sim.workload_names();
    let mut finished = vec![(0u64, 0u64); names.len()];
    let w = sim.world();
    for id in w.flows.ids() {
        let f = w.flow_brief(id);
        if f.finish.is_some() {
            let e = &mut finished[f.workload as usize];
            e.0 += 1;
            e.1 = e.1.saturating_add(f.size_bytes);
        }
    }
    let collective_rows = sim.collective_rows_of(plan);
    let out: Vec<Value> = plan
        .reports
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut v = json!({
                "name": names[i],
                "kind": r.kind,
                "flows": r.flows,
                "bytes": r.bytes,
                "flows_finished": finished[i].0,
                "bytes_finished": finished[i].1,
            });
            let m = v.as_object_mut().expect("an object");
            if let Some(p) = &r.poisson {
                m.insert("target_load".into(), json!(p.target_load));
                m.insert("offered_load".into(), json!(p.offered_load()));
                m.insert("offered_load_wire".into(), json!(p.offered_load_wire()));
                m.insert("window_ps".into(), json!(p.window_ps));
                m.insert("senders".into(), json!(p.senders));
                m.insert("mean_flow_bytes".into(), json!(p.mean_flow_bytes));
            }
            if let Some(s) = &r.synthetic {
                m.insert("target_load".into(), json!(s.target_load));
                m.insert("offered_load".into(), json!(s.offered_load()));
                m.insert("window_ps".into(), json!(s.end_ps - s.start_ps));
                m.insert("senders".into(), json!(s.senders));
            }
            if r.kind == "collective" {
                let groups = plan
                    .collectives
                    .iter()
                    .filter(|c| c.workload as usize == i)
                    .count();
                let done = collective_rows
                    .iter()
                    .filter(|c| c.workload as usize == i && c.finish_ps.is_some())
                    .count();
                m.insert("collectives".into(), json!(groups));
                m.insert("iterations_finished".into(), json!(done));
            }
            v
        })
        .collect();
    Value::Array(out)
}
