//! flows.arrow and run.json: contents, determinism, batching and atomic replacement.

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type, UInt32Type};
use arrow_array::{Array, RecordBatch};
use arrow_ipc::reader::FileReader;
use arrow_schema::DataType;

use fabricemu_core::trace::flows::{write_flows, FlowRow, BATCH_ROWS, COLUMNS};
use fabricemu_core::trace::run_json::write_run_json;

use crate::common;

/// A fresh, empty directory for one test.
fn scratch(name: &str) -> PathBuf {
    common::scratch("trace-files", name)
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn read(path: &Path) -> (arrow_schema::SchemaRef, Vec<RecordBatch>) {
    let reader = FileReader::try_new(File::open(path).unwrap(), None).unwrap();
    let schema = reader.schema();
    let batches = reader.collect::<Result<Vec<_>, _>>().unwrap();
    (schema, batches)
}

fn row(flow_id: u64, finish_ps: Option<u64>, workload: u32) -> FlowRow {
    FlowRow {
        flow_id,
        src: flow_id as u32 % 16,
        dst: (flow_id as u32 + 5) % 16,
        size_bytes: 1_000_000 + flow_id,
        start_ps: 1_000 * flow_id,
        started: true,
        finish_ps,
        ideal_fct_ps: 80_000_000,
        workload,
        packets_sent: 245 + flow_id,
        retransmits: flow_id % 3,
        drops: flow_id % 2,
        ecn_marks: flow_id * 7,
        cnps: flow_id,
        out_of_order_packets: flow_id % 4,
        max_reorder_distance: flow_id % 5,
        unreachable_drops: 0,
    }
}

fn sample_rows() -> Vec<FlowRow> {
    vec![
        row(0, Some(80_000_000), 0),
        row(1, Some(1_000 + 200_000_000), 1),
        row(2, None, 1),
        row(3, Some(3_000 + 120_000_000), 0),
    ]
}

fn names() -> Vec<String> {
    vec!["incast".to_string(), "background".to_string()]
}

fn metadata() -> Vec<(String, String)> {
    vec![
        (
            "fabricemu.scenario".to_string(),
            r#"{"name":"t","seed":7}"#.to_string(),
        ),
        ("fabricemu.seed".to_string(), "7".to_string()),
        ("fabricemu.version".to_string(), "0.0.0-test".to_string()),
    ]
}

#[test]
fn every_column_nulls_and_metadata() {
    let dir = scratch("columns");
    let path = dir.join("flows.arrow");
    let rows = sample_rows();
    write_flows(&path, &rows, &names(), &metadata()).unwrap();
    assert_eq!(entries(&dir), vec!["flows.arrow"]);

    let (schema, batches) = read(&path);
    let names_in_file: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names_in_file, COLUMNS);
    let types: Vec<DataType> = schema
        .fields()
        .iter()
        .map(|f| f.data_type().clone())
        .collect();
    use DataType::*;
    // String columns are dictionary-encoded (int32 keys, utf8 values).
    let dict = || Dictionary(Box::new(Int32), Box::new(Utf8));
    assert_eq!(
        types,
        vec![
            Int64,
            UInt32,
            UInt32,
            Int64,
            Int64,
            Int64,
            Int64,
            Int64,
            Float64,
            dict(),
            UInt32,
            Int64,
            Int64,
            Int64,
            Int64,
            Int64,
            Int64,
            Int64,
            Int64,
            UInt32,
            UInt32,
            UInt32,
            dict(),
            Boolean,
            Boolean
        ]
    );
    for f in schema.fields() {
        let nullable = matches!(
            f.name().as_str(),
            "start_ps"
                | "finish_ps"
                | "fct_ps"
                | "slowdown"
                | "collective"
                | "collective_iteration"
                | "collective_step"
                | "tag"
                | "measured"
        );
        assert_eq!(f.is_nullable(), nullable, "{}", f.name());
    }
    let md = schema.metadata();
    assert_eq!(md.len(), 3);
    assert_eq!(md["fabricemu.scenario"], r#"{"name":"t","seed":7}"#);
    assert_eq!(md["fabricemu.seed"], "7");
    assert_eq!(md["fabricemu.version"], "0.0.0-test");

    assert_eq!(batches.len(), 1);
    let b = &batches[0];
    assert_eq!(b.num_rows(), 4);
    // Times, sizes and counts are int64 (issue 11 item 10).
    let u64s = |name: &str| -> Vec<Option<u64>> {
        b.column_by_name(name)
            .unwrap()
            .as_primitive::<Int64Type>()
            .iter()
            .map(|v| v.map(|v| v as u64))
            .collect()
    };
    let u32s = |name: &str| -> Vec<u32> {
        b.column_by_name(name)
            .unwrap()
            .as_primitive::<UInt32Type>()
            .values()
            .to_vec()
    };
    let all = |f: fn(&FlowRow) -> u64| rows.iter().map(|r| Some(f(r))).collect::<Vec<_>>();
    assert_eq!(u64s("flow_id"), all(|r| r.flow_id));
    assert_eq!(u32s("src"), rows.iter().map(|r| r.src).collect::<Vec<_>>());
    assert_eq!(u32s("dst"), rows.iter().map(|r| r.dst).collect::<Vec<_>>());
    assert_eq!(u64s("size_bytes"), all(|r| r.size_bytes));
    assert_eq!(
        u64s("start_ps"),
        vec![Some(0), Some(1_000), Some(2_000), Some(3_000)]
    );
    assert_eq!(
        u64s("finish_ps"),
        vec![Some(80_000_000), Some(200_001_000), None, Some(120_003_000)]
    );
    assert_eq!(
        u64s("fct_ps"),
        vec![Some(80_000_000), Some(200_000_000), None, Some(120_000_000)]
    );
    assert_eq!(u64s("ideal_fct_ps"), all(|r| r.ideal_fct_ps));
    let slowdown: Vec<Option<f64>> = b
        .column_by_name("slowdown")
        .unwrap()
        .as_primitive::<Float64Type>()
        .iter()
        .collect();
    assert_eq!(slowdown, vec![Some(1.0), Some(2.5), None, Some(1.5)]);
    for name in ["finish_ps", "fct_ps", "slowdown"] {
        let col = b.column_by_name(name).unwrap();
        assert_eq!(col.null_count(), 1, "{name}");
        assert!(col.is_null(2), "{name}");
    }
    let workload: Vec<&str> = {
        let d = b
            .column_by_name("workload")
            .unwrap()
            .as_dictionary::<arrow_array::types::Int32Type>();
        let values = d.values().as_string::<i32>();
        d.keys()
            .values()
            .iter()
            .map(|&k| values.value(k as usize))
            .collect()
    };
    assert_eq!(
        workload,
        vec!["incast", "background", "background", "incast"]
    );
    assert_eq!(u32s("workload_index"), vec![0, 1, 1, 0]);
    assert_eq!(u64s("packets_sent"), all(|r| r.packets_sent));
    assert_eq!(u64s("retransmits"), all(|r| r.retransmits));
    assert_eq!(u64s("drops"), all(|r| r.drops));
    assert_eq!(u64s("ecn_marks"), all(|r| r.ecn_marks));
    assert_eq!(u64s("cnps"), all(|r| r.cnps));
    assert_eq!(
        u64s("out_of_order_packets"),
        all(|r| r.out_of_order_packets)
    );
    assert_eq!(
        u64s("max_reorder_distance"),
        all(|r| r.max_reorder_distance)
    );
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn identical_inputs_give_identical_bytes() {
    let dir = scratch("identical");
    let a = dir.join("a.arrow");
    let b = dir.join("b.arrow");
    // Many metadata keys: their order in the file must not depend on hashing.
    let mut md = metadata();
    for i in 0..20 {
        md.push((format!("key{i}"), format!("value{i}")));
    }
    write_flows(&a, &sample_rows(), &names(), &md).unwrap();
    md.reverse();
    write_flows(&b, &sample_rows(), &names(), &md).unwrap();
    let bytes_a = fs::read(&a).unwrap();
    assert_eq!(bytes_a, fs::read(&b).unwrap());
    // And a rewrite of the same path.
    write_flows(&a, &sample_rows(), &names(), &md).unwrap();
    assert_eq!(bytes_a, fs::read(&a).unwrap());
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn empty_table_is_valid() {
    let dir = scratch("empty");
    let path = dir.join("flows.arrow");
    write_flows(&path, &[], &[], &metadata()).unwrap();
    let (schema, batches) = read(&path);
    assert_eq!(schema.fields().len(), COLUMNS.len());
    assert_eq!(schema.metadata()["fabricemu.seed"], "7");
    assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 0);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn large_tables_are_written_in_bounded_batches() {
    let dir = scratch("large");
    let path = dir.join("flows.arrow");
    let n = 2 * BATCH_ROWS + 1234;
    let rows: Vec<FlowRow> = (0..n as u64)
        .map(|i| {
            row(
                i,
                (i % 7 != 0).then_some(1_000 * i + 90_000_000),
                (i % 2) as u32,
            )
        })
        .collect();
    write_flows(&path, &rows, &names(), &[]).unwrap();
    let (_, batches) = read(&path);
    let sizes: Vec<usize> = batches.iter().map(|b| b.num_rows()).collect();
    assert_eq!(sizes, vec![BATCH_ROWS, BATCH_ROWS, 1234]);
    let mut next = 0u64;
    for b in &batches {
        let ids = b
            .column_by_name("flow_id")
            .unwrap()
            .as_primitive::<Int64Type>();
        let finish = b
            .column_by_name("finish_ps")
            .unwrap()
            .as_primitive::<Int64Type>();
        for j in 0..b.num_rows() {
            assert_eq!(ids.value(j) as u64, next);
            assert_eq!(finish.is_null(j), next.is_multiple_of(7));
            next += 1;
        }
    }
    assert_eq!(next, n as u64);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn rewrite_replaces_atomically() {
    let dir = scratch("replace");
    let path = dir.join("flows.arrow");
    write_flows(&path, &sample_rows(), &names(), &metadata()).unwrap();
    let first = fs::read(&path).unwrap();
    let new_rows = vec![row(10, Some(99_000_000), 0)];
    write_flows(&path, &new_rows, &names(), &metadata()).unwrap();
    assert_ne!(first, fs::read(&path).unwrap());
    let (_, batches) = read(&path);
    assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 1);
    // No temporary file is left behind.
    assert_eq!(entries(&dir), vec!["flows.arrow"]);

    // A write into a directory that does not exist fails and leaves nothing.
    let missing = dir.join("no-such-dir").join("flows.arrow");
    assert!(write_flows(&missing, &new_rows, &names(), &[]).is_err());
    assert_eq!(entries(&dir), vec!["flows.arrow"]);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn run_json_is_pretty_and_atomic() {
    let dir = scratch("runjson");
    let path = dir.join("run.json");
    let v = serde_json::json!({"seed": 1, "stats": {"events": 3}});
    write_run_json(&path, &v).unwrap();
    write_run_json(&path, &v).unwrap();
    let text = fs::read_to_string(&path).unwrap();
    assert!(text.contains("\n  \"seed\": 1"), "{text}");
    assert!(text.ends_with("}\n"));
    let back: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(back, v);
    assert_eq!(entries(&dir), vec!["run.json"]);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn output_folder_has_flows_and_run_json() {
    let toml = r#"
seed = 5
[topology]
kind = "fat_tree"
k = 4
[[workload]]
kind = "flows"
flows = [{ src = 0, dst = 15, size = "64KB" }]
"#;
    let (file, scenario) = fabricemu_core::scenario::parse_toml(toml, "t.toml").unwrap();
    let mut sim = fabricemu_core::Simulation::build(&scenario).unwrap();
    sim.run_to_end();
    let dir = scratch("output").join("out"); // created by write_outputs
    let scenario_json = fabricemu_core::scenario::to_json(&file);
    let run = fabricemu_core::output::write_outputs(&dir, &mut sim, &scenario_json, 5, false, 0.0)
        .unwrap();
    assert_eq!(
        entries(&dir),
        vec!["flows.arrow", "nodes.arrow", "ports.arrow", "run.json"]
    );

    let on_disk: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(on_disk, run);
    assert!(run["scenario"].is_object());
    assert_eq!(run["scenario"]["seed"], 5);
    assert_eq!(run["seed"], 5);
    assert_eq!(run["version"], fabricemu_core::VERSION);
    assert_eq!(run["interrupted"], false);
    assert_eq!(run["wall_seconds"], 0.0);
    assert_eq!(run["events_per_second"], 0.0);
    assert_eq!(run["packet_hops_per_second"], 0.0);
    let stats = sim.stats();
    assert_eq!(run["stats"], serde_json::to_value(&stats).unwrap());
    assert_eq!(run["simulated_ps"], stats.simulated_ps);
    assert_eq!(run["events"], stats.events);
    assert_eq!(run["packet_hops"], stats.packet_hops);

    let (schema, batches) = read(&dir.join("flows.arrow"));
    assert_eq!(schema.metadata()["fabricemu.seed"], "5");
    assert_eq!(
        schema.metadata()["fabricemu.version"],
        fabricemu_core::VERSION
    );
    assert_eq!(schema.metadata()["fabricemu.scenario"], scenario_json);
    let n: usize = batches.iter().map(|b| b.num_rows()).sum();
    assert_eq!(n, sim.flow_rows().len());

    // With a wall time, the rates are counts over it.
    let run = fabricemu_core::output::write_outputs(&dir, &mut sim, &scenario_json, 5, true, 2.0)
        .unwrap();
    assert_eq!(run["interrupted"], true);
    assert_eq!(run["events_per_second"], stats.events as f64 / 2.0);
    assert_eq!(
        entries(&dir),
        vec!["flows.arrow", "nodes.arrow", "ports.arrow", "run.json"]
    );
    fs::remove_dir_all(dir.parent().unwrap()).unwrap();
}
