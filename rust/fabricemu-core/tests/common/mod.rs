//! Helpers shared by the integration tests (`mod common;` in each test file): a scenario from TOML
//! text, a simulation built or run to its end (with packet conservation checked), a run written
//! as the Python API writes it, fresh scratch folders, Arrow files read back, scenario errors.
//!
//! Each test file is its own crate and uses only some of these, hence `dead_code` is allowed.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use fabricemu_core::scenario::{normalised_json, parse_toml, Scenario};
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
    output::write_outputs(
        dir,
        &mut sim,
        &normalised_json(&file, &s),
        s.seed,
        false,
        0.0,
    )
    .unwrap();
    sim
}

/// A fresh, empty folder for one test: `<tmp>/fabricemu-tests-<pid>/<suite>-<name>`.
pub fn scratch(suite: &str, name: &str) -> PathBuf {
    let dir = test_root().join(format!("{suite}-{name}"));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// This test process's folder, `<tmp>/fabricemu-tests-<pid>`. The tests' outputs are left there
/// to be read after a failure; the folders of earlier test processes no longer running are
/// removed when the first test asks for its folder, so they do not pile up.
pub fn test_root() -> &'static Path {
    static ROOT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    ROOT.get_or_init(|| {
        let tmp = std::env::temp_dir();
        let me = std::process::id();
        for entry in fs::read_dir(&tmp).into_iter().flatten().flatten() {
            let name = entry.file_name();
            let pid = name
                .to_str()
                .and_then(|n| n.strip_prefix("fabricemu-tests-"));
            let Some(pid) = pid.and_then(|p| p.parse::<u32>().ok()) else {
                continue;
            };
            // (Where /proc is missing nothing is known to have ended: nothing is removed.)
            let ended =
                Path::new("/proc/self").exists() && !Path::new(&format!("/proc/{pid}")).exists();
            if pid != me && ended {
                let _ = fs::remove_dir_all(entry.path());
            }
        }
        let root = tmp.join(format!("fabricemu-tests-{me}"));
        fs::create_dir_all(&root).unwrap();
        root
    })
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

/// FNV-1a, 64 bits, of a file's bytes (the golden hashes; no security boundary).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The crate's folder (tests/golden, ../../scenarios are relative to it).
pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// tests/golden/hashes.txt.
pub fn golden_hashes_file() -> PathBuf {
    crate_dir().join("tests/golden/hashes.txt")
}

/// The recorded golden hashes: `<label>/<scenario>.toml/<file>` -> hash.
pub fn golden_hashes() -> std::collections::BTreeMap<String, u64> {
    let Ok(text) = fs::read_to_string(golden_hashes_file()) else {
        return Default::default();
    };
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (key, hash) = l
                .rsplit_once(' ')
                .expect("`<scenario>/<file> <hash>` lines");
            (
                key.to_string(),
                u64::from_str_radix(hash, 16).expect("a hex hash"),
            )
        })
        .collect()
}

/// Every golden scenario: the shipped ones (`scenarios/NAME`), then the coverage ones
/// (`golden/NAME`), by file name.
pub fn golden_scenarios() -> Vec<(String, PathBuf)> {
    let mut all = Vec::new();
    for (label, dir) in [
        ("scenarios", crate_dir().join("../../scenarios")),
        ("golden", crate_dir().join("tests/golden")),
    ] {
        let mut files: Vec<PathBuf> = fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        files.sort();
        for f in files {
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            all.push((format!("{label}/{name}"), f));
        }
    }
    all
}

/// Run scenario TOML `text` (`source` names it in errors) into `dir` as the Python API does
/// (normalised scenario JSON in the metadata, traces streamed, wall-clock figures zero) and hash
/// each output file by name.
/// A file's bytes as the outputs' comparisons take them: run.json without its `parallel`
/// section (how the parallel engine ran: which windows ran on one thread varies from run to
/// run), cut out of the text (a float parsed and written again may move by an ulp; the
/// pretty-printed object's keys are sorted, and `parallel` is never the last); the rest as is.
pub fn comparable(name: &str, bytes: Vec<u8>) -> Vec<u8> {
    if name != "run.json" {
        return bytes;
    }
    let text = String::from_utf8(bytes).unwrap();
    match text.find("\n  \"parallel\": {") {
        Some(start) => {
            let end = start + text[start..].find("\n  },").unwrap() + "\n  },".len();
            format!("{}{}", &text[..start], &text[end..]).into_bytes()
        }
        None => text.into_bytes(),
    }
}

pub fn run_and_hash(
    text: &str,
    source: &str,
    dir: &Path,
) -> std::collections::BTreeMap<String, u64> {
    let (file, spec) = parse_toml(text, source).unwrap_or_else(|e| panic!("{e}"));
    let json = normalised_json(&file, &spec);
    let _ = fs::remove_dir_all(dir);
    fs::create_dir_all(dir).unwrap();
    let mut sim = Simulation::build(&spec).unwrap_or_else(|e| panic!("{e}"));
    sim.open_traces(dir, &output::metadata(&json, spec.seed))
        .unwrap();
    sim.run_to_end();
    sim.check_conservation().unwrap();
    output::write_outputs(dir, &mut sim, &json, spec.seed, false, 0.0).unwrap();
    let mut hashes = std::collections::BTreeMap::new();
    for entry in fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let bytes = comparable(&name, fs::read(&p).unwrap());
        hashes.insert(name, fnv1a(&bytes));
    }
    hashes
}

/// N senders (hosts 1..=N) to host 0 through one switch: host 0's link is the bottleneck.
pub fn one_switch(
    n: usize,
    rate: &str,
    delay: &str,
    stop: &str,
    extra: &str,
    size: &str,
) -> String {
    format!(
        r#"
        stop = "{stop}"
        [topology]
        kind = "leaf_spine"
        leaves = 1
        spines = 1
        hosts_per_leaf = {hosts}
        link_rate = "{rate}"
        link_delay = "{delay}"
        {extra}
        [[workload]]
        kind = "incast"
        receiver = 0
        senders = {n}
        size = "{size}"
        "#,
        hosts = n + 1
    )
}

/// The text of file `rel` of the repository (`scenarios/...`).
pub fn repo_file(rel: &str) -> String {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel);
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Megatron-style training steps (TP in each server's NVSwitch domain, PP and DP across
/// servers) of `dp` replicas on a rail-optimised GPU cluster of 32 GPUs.
pub fn gpt_steps(dp: u32) -> String {
    format!(
        r#"
        seed = 1
        [topology]
        kind = "leaf_spine"
        leaves = 4
        hosts_per_leaf = 8
        spines = 2
        link_rate = "400Gbps"
        link_delay = "500ns"
        [cluster]
        gpus_per_server = 4
        cabling = "rail"
        scaleup = {{ kind = "nvswitch", gpus = 4, rate = "3600Gbps", latency = "250ns" }}
        [[workload]]
        name = "gpt"
        kind = "training"
        dp = {dp}
        tp = 4
        pp = 2
        micro_batches = 2
        micro_batch_size = 1
        layers = 2
        hidden = 512
        seq_len = 128
        gpu_flops = 989e12
        efficiency = 0.5
        dp_bucket = "256KiB"
        iterations = 2
        "#
    )
}
