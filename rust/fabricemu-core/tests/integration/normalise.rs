//! The normalised scenario (every default written out; `scenario::normalise`), over every shipped
//! scenario (scenarios/*.toml), every golden coverage scenario (tests/golden/*.toml) and every
//! valid scenario of the fuzz corpus (tests/fuzz_corpus/*.toml):
//! 1. parsing the normalised scenario (as JSON, and as TOML) gives the same validated spec;
//! 2. normalising is idempotent;
//! 3. running the normalised scenario gives the golden outputs, byte for byte (tests/golden.rs runs
//!    every golden scenario in its normalised form);
//! 4. no key with a default is missing: a walk of every table of every normalised scenario finds
//!    each key of the table's struct present, or listed with its meaning in
//!    `scenario::normalise::absent_means()`, or in a table that is off. A key added without a
//!    filler fails here (see "Adding a scenario key" in src/scenario/normalise.rs).

use std::collections::BTreeSet;
use std::fs;
use std::path::PathBuf;

use fabricemu_core::config::kinds::field_names;
use fabricemu_core::scenario::normalise::{absent_means, is_off, may_be_absent};
use fabricemu_core::scenario::{normalise, parse_json, parse_toml, to_json, to_toml};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::common;
use common::{crate_dir, golden_scenarios};

/// Every scenario checked, as (label, TOML text): the golden ones, then the fuzz corpus (only
/// those that validate: the corpus also holds scenarios that must fail).
fn corpus() -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> = golden_scenarios()
        .into_iter()
        .map(|(label, path)| {
            let text = fs::read_to_string(&path).unwrap();
            (label, with_absolute_files(&text, &path))
        })
        .collect();
    let dir = crate_dir().join("../../tests/fuzz_corpus");
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    for f in files {
        let text = fs::read_to_string(&f).unwrap();
        if parse_toml(&text, "").is_ok() {
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            all.push((format!("fuzz_corpus/{name}"), text));
        }
    }
    all
}

/// `text` with each `file = "..."` that names a file beside the scenario (a graph topology's)
/// made absolute: the checks below parse the text (and its normalised JSON) without a folder.
fn with_absolute_files(text: &str, scenario: &std::path::Path) -> String {
    let dir = scenario.parent().unwrap();
    text.lines()
        .map(|line| {
            let rel = line
                .strip_prefix("file = \"")
                .and_then(|r| r.split_once('"'))
                .filter(|(r, _)| !r.starts_with('/') && dir.join(r).is_file());
            match rel {
                Some((r, rest)) => {
                    format!("file = {:?}{rest}", dir.join(r).canonicalize().unwrap())
                }
                None => line.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The normalised JSON of TOML `text`.
fn normalised(label: &str, text: &str) -> String {
    let (file, spec) = parse_toml(text, label).unwrap_or_else(|e| panic!("{e}"));
    to_json(&normalise(&file, &spec))
}

#[test]
fn the_normalised_scenario_has_the_same_spec_and_is_a_fixed_point() {
    let all = corpus();
    assert!(
        all.len() > 40,
        "the corpus is the shipped, golden and fuzz scenarios"
    );
    for (label, text) in &all {
        let (file, spec) = parse_toml(text, label).unwrap_or_else(|e| panic!("{e}"));
        let norm = normalise(&file, &spec);
        let json = to_json(&norm);

        // As JSON (run.json, the Python API).
        let (file2, spec2) =
            parse_json(&json).unwrap_or_else(|e| panic!("{label}: normalised JSON: {e}\n{json}"));
        assert_eq!(
            spec2, spec,
            "{label}: the normalised JSON validates differently"
        );
        assert_eq!(
            to_json(&normalise(&file2, &spec2)),
            json,
            "{label}: normalising twice differs"
        );

        // As TOML (`Scenario.to_toml()`, `fabricemu validate --normalised`).
        let toml_text = to_toml(&norm);
        let (file3, spec3) = parse_toml(&toml_text, label)
            .unwrap_or_else(|e| panic!("{label}: normalised TOML: {e}\n{toml_text}"));
        assert_eq!(
            spec3, spec,
            "{label}: the normalised TOML validates differently"
        );
        assert_eq!(
            to_json(&normalise(&file3, &spec3)),
            json,
            "{label}: via TOML"
        );

        // Normalising does fill: the defaults the issue names are there for every scenario.
        let v: Value = serde_json::from_str(&json).unwrap();
        for key in ["buffer", "latency", "ecn", "pfc", "scheduler"] {
            assert!(v["switch"].get(key).is_some(), "{label}: switch.{key}");
        }
        for key in ["mtu", "cc", "loss_recovery", "priority", "credits"] {
            assert!(
                v["transport"].get(key).is_some(),
                "{label}: transport.{key}"
            );
        }
        assert!(v["routing"].get("hash").is_some(), "{label}: routing.hash");
        assert!(
            v["trace"].get("latency").is_some(),
            "{label}: trace.latency"
        );
    }
}

/// The struct fields of the table at `path` (whose normalised value is `table`), `None` for
/// what is kept as the user wrote it (graphs, distributions, maps of ranks). A table the walk
/// does not know fails the test: add it here.
fn fields_of(path: &str, table: &Map<String, Value>) -> Option<Vec<&'static str>> {
    use fabricemu_core::cc::{
        dcqcn_config::DcqcnFile, dctcp_config::DctcpFile, hpcc_config::HpccFile,
        nscc_config::NsccFile, swift_config::SwiftFile,
    };
    use fabricemu_core::scenario::schema::*;
    use fabricemu_core::switch::trim::TrimmingFile;
    use fabricemu_core::topology::config::*;
    use fabricemu_core::trace::config::PacketsTraceFile;
    use fabricemu_core::transport::credits::CreditsFile;
    use fabricemu_core::workload::{
        all_to_all::AllToAllFile, collective::CollectiveFile, config::ReplayFile,
        explicit::FlowsFile, graph::GraphFile, graph::NoiseFile, incast::IncastFile,
        inference::InferenceFile, permutation::PermutationFile, poisson::PoissonFile,
        synthetic::SyntheticFile, training::AlgorithmsFile, training::MoeFile,
        training::TrainingFile,
    };
    fn f<T: DeserializeOwned>() -> Option<Vec<&'static str>> {
        Some(field_names::<T>().to_vec())
    }
    let kind = table.get("kind").and_then(Value::as_str).unwrap_or("");
    let segs: Vec<&str> = path.split('.').collect();
    let generic: Vec<&str> = segs
        .iter()
        .map(|s| if s.parse::<usize>().is_ok() { "*" } else { s })
        .collect();
    match generic.join(".").as_str() {
        "" => f::<ScenarioFile>(),
        "topology" => match kind {
            "fat_tree" => f::<FatTreeFile>(),
            "leaf_spine" => f::<LeafSpineFile>(),
            "dragonfly" => f::<DragonflyFile>(),
            "dragonfly_plus" => f::<DragonflyPlusFile>(),
            "clos" => f::<ClosFile>(),
            // A graph's links give their own rates and delays (the defaults only fill gaps, as
            // written), and it is a file or inline edges, as written.
            "graph" => Some(vec!["kind"]),
            other => panic!("topology kind {other:?}: add it to the walk"),
        },
        "cluster" => f::<ClusterFile>(),
        "ocs" => f::<OcsFile>(),
        "control" => f::<fabricemu_core::control::config::ControlFile>(),
        "ocs.reconfigure.*" => f::<ReconfigureFile>(),
        // Circuit lists: the user's data, as written.
        "ocs.circuits" | "ocs.reconfigure.*.circuits" => None,
        "cluster.scaleup" => f::<ScaleUpFile>(),
        "cluster.nic" => f::<NicAttachFile>(),
        "switch" => f::<SwitchFile>(),
        "switch.ecn" => f::<EcnFile>(),
        "switch.pfc" => f::<PfcFile>(),
        "switch.trimming" => f::<TrimmingFile>(),
        "switch.reduction" => f::<fabricemu_core::switch::reduction::ReductionFile>(),
        "switch.reduction.edge"
        | "switch.reduction.agg"
        | "switch.reduction.core"
        | "switch.reduction.leaf"
        | "switch.reduction.spine"
        | "switch.reduction.nvswitch" => f::<fabricemu_core::switch::reduction::EngineFile>(),
        "routing" => f::<RoutingFile>(),
        "transport" => f::<TransportFile>(),
        "transport.dcqcn" => f::<DcqcnFile>(),
        "transport.dctcp" => f::<DctcpFile>(),
        "transport.swift" => f::<SwiftFile>(),
        "transport.hpcc" => f::<HpccFile>(),
        "transport.nscc" => f::<NsccFile>(),
        "transport.credits" => f::<CreditsFile>(),
        "nic" => f::<NicFile>(),
        "trace" => f::<TraceFile>(),
        "trace.queues" => f::<QueuesTraceFile>(),
        "trace.links" => f::<IntervalTraceFile>(),
        "trace.rates" => f::<RatesTraceFile>(),
        "trace.packets" => f::<PacketsTraceFile>(),
        "output" => f::<OutputFile>(),
        "fault.*" => f::<FaultFile>(),
        "failure_process.*" => f::<FailureProcessFile>(),
        // Distributions of flap periods, failures and repairs: as written.
        "fault.*.down" | "fault.*.up" | "failure_process.*.mtbf" | "failure_process.*.mttr" => None,
        "workload.*" => match kind {
            "flows" => f::<FlowsFile>(),
            "incast" => f::<IncastFile>(),
            "permutation" => f::<PermutationFile>(),
            "all_to_all" => f::<AllToAllFile>(),
            "poisson" => f::<PoissonFile>(),
            "collective" => f::<CollectiveFile>(),
            "replay" => f::<ReplayFile>(),
            "synthetic" => f::<SyntheticFile>(),
            "training" => f::<TrainingFile>(),
            "inference" => f::<InferenceFile>(),
            "graph" => f::<GraphFile>(),
            other => panic!("workload kind {other:?}: add it to the walk"),
        },
        "workload.*.flows.*" => f::<FlowEntry>(),
        "workload.*.moe" => f::<MoeFile>(),
        "workload.*.algorithms" => f::<AlgorithmsFile>(),
        "workload.*.noise" => f::<NoiseFile>(),
        // A graph's ops, a noise's slow ranks: the user's data, as written.
        "workload.*.ops.*" | "workload.*.noise.slow_ranks" => None,
        other => panic!("{path}: a table the walk does not know ({other}): add it to fields_of"),
    }
}

/// Walk `value` at `path`; every key of a known table that is neither present nor allowed to be
/// absent goes into `missing`; every pattern of `absent_means()` that allowed one into `used`.
fn walk(path: &str, value: &Value, missing: &mut Vec<String>, seen: &mut BTreeSet<String>) {
    match value {
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                walk(&join(path, &i.to_string()), v, missing, seen);
            }
        }
        Value::Object(table) => {
            let Some(fields) = fields_of(path, table) else {
                return;
            };
            let off = is_off(table);
            for key in fields {
                let p = join(path, key);
                seen.insert(p.clone());
                if !table.contains_key(key) && !off && !may_be_absent(&p) {
                    missing.push(p);
                }
            }
            for (key, v) in table {
                walk(&join(path, key), v, missing, seen);
            }
        }
        _ => {}
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

#[test]
fn every_key_with_a_default_is_written_out() {
    let mut missing = BTreeSet::new();
    let mut seen = BTreeSet::new();
    for (label, text) in corpus() {
        let v: Value = serde_json::from_str(&normalised(&label, &text)).unwrap();
        let mut m = Vec::new();
        walk("", &v, &mut m, &mut seen);
        missing.extend(m.into_iter().map(|p| format!("{label}: {p}")));
    }
    assert!(
        missing.is_empty(),
        "keys missing from normalised scenarios (fill them in the table's `normalised`, or list \
         what their absence means in its ABSENT_MEANS):\n{}",
        missing.into_iter().collect::<Vec<_>>().join("\n")
    );
    // The walk reaches the tables it is about.
    for p in [
        "switch.ecn.kmin",
        "switch.pfc.xon_offset",
        "transport.dcqcn.rate_ai",
        "routing.flowlet_gap",
        "trace.queues.interval",
        "cluster.scaleup.rate",
        "workload.0.start",
    ] {
        assert!(seen.contains(p), "no scenario reaches {p}");
    }
}

#[test]
fn the_absent_keys_are_documented_once_each() {
    let all = absent_means();
    let mut keys = BTreeSet::new();
    for (key, meaning) in &all {
        assert!(keys.insert(*key), "{key} is listed twice");
        assert!(!meaning.is_empty(), "{key}: say what its absence means");
    }
}
