//! Helpers shared by the integration tests (`mod common;` in each test file): a scenario from TOML
//! text, a simulation built or run to its end (with packet conservation checked), a run written
//! as the Python API writes it, fresh scratch folders, Arrow files read back, scenario errors.
//!
//! Each test file is its own crate and uses only some of these, hence `dead_code` is allowed.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use fabricemu_core::scenario::{parse_toml, to_json, Scenario};
use fabricemu_core::{output, ScenarioError, Simulation};

/// The validated scenario of TOML `text` (panics with the located error if it is invalid).
pub fn spec(text: &str) -> Scenario {
    parse_toml(text, "test.toml")
        .unwrap_or_else(|e| panic!("{e}"))
        .1
}

/// The simulation of TOML `text`, built, not run.
pub fn build(text: &str) -> Simulation {
    Simulation::build(&spec(text)).unwrap_or_else(|e| panic!("{e}"))
}

/// The simulation of TOML `text` run to its stop condition; packet conservation is checked.
pub fn run(text: &str) -> Simulation {
    let mut sim = build(text);
    sim.run_to_end();
    sim.check_conservation().unwrap();
    sim
}

/// Run TOML `text` and write its outputs into `dir` as the Python API does (normalised scenario
/// JSON in the metadata, wall-clock time zero).
pub fn write_run(text: &str, dir: &Path) -> Simulation {
    let (file, s) = parse_toml(text, "t.toml").unwrap_or_else(|e| panic!("{e}"));
    let mut sim = Simulation::build(&s).unwrap_or_else(|e| panic!("{e}"));
    sim.run_to_end();
    output::write_outputs(dir, &mut sim, &to_json(&file), s.seed, false, 0.0).unwrap();
    sim
}

/// A fresh, empty folder for one test: `<tmp>/fabricemu-<suite>-<name>-<pid>`.
pub fn scratch(suite: &str, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fabricemu-{suite}-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// The record batches of an Arrow IPC file.
pub fn read_arrow(path: &Path) -> Vec<RecordBatch> {
    let f = fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let reader = arrow_ipc::reader::FileReader::try_new(f, None).unwrap();
    reader.map(|b| b.unwrap()).collect()
}

/// The error of a scenario that must not validate.
pub fn scenario_error(text: &str) -> ScenarioError {
    match parse_toml(text, "bad.toml") {
        Ok(_) => panic!("expected an error for:\n{text}"),
        Err(e) => e,
    }
}

/// The `[topology]` table of a leaf-spine: `leaves` x `spines`, `per_leaf` host slots per leaf,
/// host links of `link_rate`, `fabric` (leaf-spine links; the host rate when None) and delay
/// `link_delay`.
pub fn leaf_spine(
    leaves: u32,
    spines: u32,
    per_leaf: u32,
    link_rate: &str,
    fabric: Option<&str>,
    link_delay: &str,
) -> String {
    let fabric = fabric.map_or(String::new(), |r| format!("fabric_link_rate = \"{r}\"\n"));
    format!(
        "[topology]\nkind = \"leaf_spine\"\nleaves = {leaves}\nspines = {spines}\n\
         hosts_per_leaf = {per_leaf}\nlink_rate = \"{link_rate}\"\n{fabric}link_delay = \"{link_delay}\"\n"
    )
}

/// Bytes sent on all ports of links of `tier` (both directions).
pub fn tier_bytes(sim: &Simulation, tier: fabricemu_core::topology::Tier) -> u64 {
    let w = sim.world();
    w.fabric
        .ports()
        .filter(|&p| w.fabric.tier[p] == tier)
        .map(|p| w.port_tx_bytes(p))
        .sum()
}

/// Bytes sent by nodes of `role` (all their ports).
pub fn role_bytes(sim: &Simulation, role: fabricemu_core::topology::Role) -> u64 {
    let w = sim.world();
    let f = &w.fabric;
    f.ports()
        .filter(|&p| f.role[f.port_node[p]] == role)
        .map(|p| w.port_tx_bytes(p))
        .sum()
}

/// Run TOML `text` (conservation checked) and return its flows with their labels and its
/// collectives.arrow rows.
pub fn collective_run(
    text: &str,
) -> (
    Vec<(
        fabricemu_core::trace::flows::FlowRow,
        fabricemu_core::trace::flows::FlowLabels,
    )>,
    Vec<fabricemu_core::trace::collectives::CollectiveRow>,
) {
    let sim = run(text);
    let rows = sim.flow_rows();
    let labels = sim.flow_labels();
    (
        rows.into_iter().zip(labels).collect(),
        sim.collective_rows(),
    )
}
