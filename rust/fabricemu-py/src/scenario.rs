//! Scenario parsing, validation and conversion: JSON text in, JSON or TOML text out.

use fabricemu_core::budget;
use fabricemu_core::scenario::{self, Built, Scenario, StopAt, WorkloadSpec};
use fabricemu_core::topology::{summary, Fabric};
use fabricemu_core::units::{format_bytes, format_time};
use fabricemu_core::workload::FlowPlan;
use fabricemu_core::ScenarioError as CoreScenarioError;
use pyo3::prelude::*;
use serde_json::{json, Value};
use std::sync::Mutex;

use crate::errors::{guard_input, scenario_error};

/// Validate scenario JSON; the validated spec and the normalised JSON (every default written out).
pub fn validated(py: Python<'_>, scenario_json: &str) -> PyResult<(Scenario, String)> {
    let (file, spec) = scenario::parse_json(scenario_json).map_err(|e| scenario_error(py, &e))?;
    let normalised = scenario::normalised_json(&file, &spec);
    Ok((spec, normalised))
}

/// Parse, validate and build scenario TOML (the fabric, fault links, replay and CDF files, the
/// flow plan: everything that can fail before the first event); returns the normalised scenario
/// as JSON text.
///
/// Errors carry the key path, line and column; `source` (a file name) prefixes the message.
#[pyfunction]
#[pyo3(signature = (text, source = ""))]
pub fn parse_toml(py: Python<'_>, text: &str, source: &str) -> PyResult<String> {
    guard_input(py, "validating the scenario", || {
        let (file, spec) =
            scenario::parse_toml(text, source).map_err(|e| scenario_error(py, &e))?;
        if affordable(&spec) {
            // Build too (fault links, replay and CDF files), with errors located in the text.
            let (_, built) = py
                .detach(|| scenario::load_toml(text, source))
                .map_err(|e| scenario_error(py, &e))?;
            let normalised = scenario::normalised_json(&file, &spec);
            keep_built(&normalised, built);
            return Ok(normalised);
        }
        Ok(scenario::normalised_json(&file, &spec))
    })
}

/// Validate and build a scenario given as JSON text (a Python dictionary), so that a bad replay
/// or CDF file or fault link fails here; returns the normalised JSON.
#[pyfunction]
pub fn parse_json(py: Python<'_>, text: &str) -> PyResult<String> {
    guard_input(py, "validating the scenario", || {
        let (spec, normalised) = validated(py, text)?;
        if affordable(&spec) {
            let built = py
                .detach(|| scenario::build(&spec))
                .map_err(|e| scenario_error(py, &e))?;
            keep_built(&normalised, built);
        }
        Ok(normalised)
    })
}

/// The scenario (JSON text) as normalised TOML text (every default written out), after
/// validating it.
#[pyfunction]
pub fn to_toml(py: Python<'_>, scenario_json: &str) -> PyResult<String> {
    guard_input(py, "validating the scenario", || {
        let (file, spec) =
            scenario::parse_json(scenario_json).map_err(|e| scenario_error(py, &e))?;
        Ok(scenario::to_toml(&scenario::normalise(&file, &spec)))
    })
}

/// TOML text as JSON text, exactly as written (no schema, no defaults): the user's own dictionary.
#[pyfunction]
pub fn toml_to_json(py: Python<'_>, text: &str) -> PyResult<String> {
    guard_input(py, "reading the TOML text", || toml_value_json(py, text))
}

fn toml_value_json(py: Python<'_>, text: &str) -> PyResult<String> {
    let value: Value = toml::from_str(text).map_err(|e| {
        let (line, column) = match e.span() {
            Some(span) => line_col(text, span.start),
            None => (None, None),
        };
        let err = CoreScenarioError {
            source_name: String::new(),
            path: String::new(),
            line,
            column,
            message: e.message().trim().to_string(),
        };
        scenario_error(py, &err)
    })?;
    Ok(value.to_string())
}

/// A summary of the built scenario as JSON text: the fabric's size, links and the workloads (as
/// they were planned: the scenario is built, so anything that fails before a run fails here).
///
/// Describing a workload plans it: a scenario whose run would need more memory than `max_memory`
/// (bytes; default 80 % of the available memory) is refused first, with the estimate.
#[pyfunction]
#[pyo3(signature = (scenario_json, max_memory = None))]
pub fn describe(py: Python<'_>, scenario_json: &str, max_memory: Option<u64>) -> PyResult<String> {
    guard_input(py, "describing the scenario", || {
        let (spec, normalised) = validated(py, scenario_json)?;
        let limits = budget::Limits::new(max_memory, None);
        let e = budget::estimate(&spec);
        budget::check_memory(&spec, &e, &limits).map_err(|e| scenario_error(py, &e))?;
        let built = py
            .detach(|| scenario::build(&spec))
            .map_err(|e| scenario_error(py, &e))?;
        Ok(summary(&built.scenario, &built.fabric, &built.plan, &normalised)?.to_string())
    })
}

/// The last scenario built when a Scenario was constructed, keyed by its normalised JSON: the
/// usual `Scenario.load(...).run(...)` (and `fabricemu run`) then runs that build instead of
/// building the same fabric and flow plan a second time. One slot: a program constructing many
/// scenarios keeps at most one build alive (a run of any other scenario builds its own).
static LAST_BUILT: Mutex<Option<(String, Built)>> = Mutex::new(None);

fn keep_built(normalised: &str, built: Built) {
    let mut slot = LAST_BUILT
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    *slot = Some((normalised.to_owned(), built));
}

/// The build kept for this normalised scenario, if it is the last one built (taken: a second run
/// of the same Scenario builds again).
pub fn take_built(normalised: &str) -> Option<Built> {
    let mut slot = LAST_BUILT
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    match slot.take() {
        Some((key, built)) if key == normalised => Some(built),
        other => {
            *slot = other;
            None
        }
    }
}

/// The normalised JSON of the scenario whose build is kept for its next run (None if none is):
/// for tests of the reuse.
#[pyfunction]
pub fn kept_build() -> Option<String> {
    let slot = LAST_BUILT
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    slot.as_ref().map(|(key, _)| key.clone())
}

/// Whether building the scenario fits the default memory limit: constructing a Scenario builds it
/// (so a bad fault link or replay file fails there) only then; a larger one is refused, with its
/// estimate, by `describe` and `run` under their own `max_memory`.
fn affordable(spec: &Scenario) -> bool {
    let e = budget::estimate(spec);
    budget::check_memory(spec, &e, &budget::Limits::new(None, None)).is_ok()
}
/// The resources a run of the scenario (JSON text) is estimated to need, as JSON text (flows,
/// packets in flight, memory by part, trace bytes by table), after checking them against
/// `max_memory` and `max_trace_size` (bytes; defaults as in `run`): over either is a
/// ScenarioError stating the estimate and the limit. Nothing is allocated.
#[pyfunction]
#[pyo3(signature = (scenario_json, max_memory = None, max_trace_size = None))]
pub fn estimate(
    py: Python<'_>,
    scenario_json: &str,
    max_memory: Option<u64>,
    max_trace_size: Option<u64>,
) -> PyResult<String> {
    guard_input(py, "estimating the scenario's resources", || {
        let (spec, _) = validated(py, scenario_json)?;
        let limits = budget::Limits::new(max_memory, max_trace_size);
        let e = budget::check(&spec, &limits).map_err(|e| scenario_error(py, &e))?;
        let mut v = serde_json::to_value(&e)
            .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
        if let Value::Object(m) = &mut v {
            m.insert("max_memory".into(), json!(limits.memory));
            m.insert("max_trace_size".into(), json!(limits.trace));
        }
        Ok(v.to_string())
    })
}

fn line_col(text: &str, at: usize) -> (Option<usize>, Option<usize>) {
    let before = &text[..at.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (Some(line), Some(column))
}

fn summary(s: &Scenario, fabric: &Fabric, plan: &FlowPlan, normalised: &str) -> PyResult<Value> {
    let scenario: Value = serde_json::from_str(normalised)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
    // The fabric as the run builds it, described by the core (counts per role and tier).
    let topology = summary::describe(fabric, &scenario["topology"]);
    let mut flows_total = 0u64;
    let mut bytes_total = 0u64;
    let workloads: Vec<Value> = s
        .workloads
        .iter()
        .map(|w| {
            let (flows, bytes, extra) = match &w.spec {
                WorkloadSpec::Flows { flows } => (
                    flows.len() as u64,
                    flows.iter().map(|f| f.size_bytes).sum::<u64>(),
                    json!({}),
                ),
                WorkloadSpec::Incast {
                    receiver,
                    senders,
                    size_bytes,
                    rounds,
                    ..
                } => {
                    let n = senders.len() as u64 * *rounds as u64;
                    (
                        n,
                        n * size_bytes,
                        json!({ "receiver": receiver, "senders": senders.len(), "rounds": rounds,
                                "size": format_bytes(*size_bytes) }),
                    )
                }
                WorkloadSpec::Permutation {
                    hosts, size_bytes, ..
                } => {
                    let n = hosts.len() as u64;
                    (
                        n,
                        n * size_bytes,
                        json!({ "size": format_bytes(*size_bytes) }),
                    )
                }
                other => {
                    // As planned for the run (the flow count of a poisson workload is drawn).
                    let index = s
                        .workloads
                        .iter()
                        .position(|x| std::ptr::eq(x, w))
                        .unwrap_or(0);
                    let r = &plan.reports[index];
                    (
                        r.flows,
                        r.bytes,
                        fabricemu_core::workload::describe(other, r),
                    )
                }
            };
            flows_total += flows;
            bytes_total = bytes_total.saturating_add(bytes);
            let mut v = json!({ "name": w.name, "kind": w.spec.kind(), "flows": flows,
                                "bytes": bytes, "volume": format_bytes(bytes) });
            if let (Value::Object(m), Value::Object(e)) = (&mut v, extra) {
                m.extend(e);
            }
            v
        })
        .collect();
    let stop = match s.stop {
        StopAt::AllFlowsDone => json!("all_flows_done"),
        StopAt::Time(t) => json!(format_time(t)),
    };
    Ok(json!({
        "name": s.name,
        "seed": s.seed,
        "stop": stop,
        "topology": topology,
        "workloads": workloads,
        "flows": flows_total,
        "bytes": bytes_total,
        "volume": format_bytes(bytes_total),
    }))
}
