//! `topology_summary`: the fabric a scenario builds, measured (sizes, bisection, diameter);
//! `fabric_tables`: the same fabric by name (nodes.arrow and ports.arrow as a run writes them).

use std::panic::catch_unwind;

use fabricemu_core::budget;
use fabricemu_core::topology::{self, summary};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors::{guard, guard_input, panic_error, scenario_error};
use crate::scenario::validated;

/// Build the fabric of a scenario (JSON text) and return its statistics as JSON text: hosts,
/// switches, links, per-role and per-tier figures, bisection bandwidth, oversubscription, diameter.
///
/// A fabric that would need more memory than `max_memory` (bytes; default 80 % of the available
/// memory) is refused before it is built.
#[pyfunction]
#[pyo3(signature = (scenario_json, max_memory = None))]
pub fn topology_summary(
    py: Python<'_>,
    scenario_json: &str,
    max_memory: Option<u64>,
) -> PyResult<String> {
    let spec = guard_input(py, "validating the scenario", || {
        let (spec, _) = validated(py, scenario_json)?;
        let e = budget::estimate(&spec);
        budget::check_fabric_memory(&e, &budget::Limits::new(max_memory, None))
            .map_err(|e| scenario_error(py, &e))?;
        Ok(spec)
    })?;
    let stats = py
        .detach(|| catch_unwind(|| topology::build_scenario(&spec).map(|f| summary::summarize(&f))))
        .map_err(|p| panic_error("building the fabric", p))?
        .map_err(|e| scenario_error(py, &e))?;
    guard("describing the fabric", || {
        serde_json::to_string(&stats)
            .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))
    })
}

/// Build the fabric of a scenario (JSON text) and return its nodes and ports tables (what a run
/// writes as nodes.arrow and ports.arrow) as two Arrow IPC files' bytes.
#[pyfunction]
#[pyo3(signature = (scenario_json, max_memory = None))]
pub fn fabric_tables<'py>(
    py: Python<'py>,
    scenario_json: &str,
    max_memory: Option<u64>,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    let spec = guard_input(py, "validating the scenario", || {
        let (spec, _) = validated(py, scenario_json)?;
        let e = budget::estimate(&spec);
        budget::check_fabric_memory(&e, &budget::Limits::new(max_memory, None))
            .map_err(|e| scenario_error(py, &e))?;
        Ok(spec)
    })?;
    let tables = py
        .detach(|| {
            catch_unwind(|| {
                topology::build_scenario(&spec).map(|fabric| {
                    fabricemu_core::trace::fabric::fabric_tables_ipc(&fabric, &spec.topology)
                })
            })
        })
        .map_err(|p| panic_error("building the fabric", p))?
        .map_err(|e| scenario_error(py, &e))?;
    let (nodes, ports) =
        tables.map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(e.to_string()))?;
    Ok((PyBytes::new(py, &nodes), PyBytes::new(py, &ports)))
}
