//! Flows that never started (scheduled after `stop`, or waiting on flows that never finished) are
//! written with their scheduled start (null if it was never scheduled) and `started = false`, not
//! with `start_ps = 0`; times and counts are int64 (issue 11 items 9 and 10).

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::Array;
use fabricemu_core::scenario::parse_toml;
use fabricemu_core::{output, scenario, Simulation};

const SCENARIO: &str = r#"
name = "unstarted"
seed = 1
stop = "30us"
[topology]
kind = "fat_tree"
k = 4
link_rate = "100Gbps"
link_delay = "500ns"
[trace]
unfinished_flows = true
[[workload]]
name = "early"
kind = "flows"
flows = [{ src = 0, dst = 5, size = "10KB" }, { src = 1, dst = 6, size = "10KB", start = "50us" }]
[[workload]]
name = "rounds"
kind = "incast"
receiver = 8
senders = [9, 10]
size = "1MB"
rounds = 2
"#;

#[test]
fn unstarted_flows_keep_their_scheduled_start() {
    let (file, spec) = parse_toml(SCENARIO, "t.toml").unwrap_or_else(|e| panic!("{e}"));
    let mut sim = Simulation::build(&spec).unwrap();
    sim.run_to_end();
    let rows = sim.flow_rows();
    assert_eq!(rows.len(), 6);
    // Started and finished.
    assert!(rows[0].started && rows[0].finish_ps.is_some());
    assert_eq!(rows[0].start(), Some(0));
    // Scheduled after stop: its start is its scheduled start, and it did not start.
    assert!(!rows[1].started);
    assert_eq!(rows[1].start(), Some(50_000_000));
    assert_eq!(rows[1].finish_ps, None);
    // The first incast round started (1 MB each into one 100G link: not done by 30 us); the second
    // waits on it and was never scheduled.
    assert!(rows[2].started && rows[3].started);
    assert!(!rows[4].started && !rows[5].started);
    assert_eq!(rows[4].start(), None);

    let dir = crate::common::scratch("unstarted_flows", "traces");
    let json = scenario::to_json(&file);
    sim.open_traces(&dir, &output::metadata(&json, spec.seed))
        .unwrap();
    output::write_outputs(&dir, &mut sim, &json, spec.seed, false, 0.0).unwrap();
    let f = std::fs::File::open(dir.join("flows.arrow")).unwrap();
    let batches: Vec<_> = arrow_ipc::reader::FileReader::try_new(f, None)
        .unwrap()
        .map(|b| b.unwrap())
        .collect();
    let b = &batches[0];
    let start = b
        .column_by_name("start_ps")
        .unwrap()
        .as_primitive::<Int64Type>();
    let started = b.column_by_name("started").unwrap().as_boolean();
    let got: Vec<(Option<i64>, bool)> = (0..b.num_rows())
        .map(|i| {
            (
                (!start.is_null(i)).then(|| start.value(i)),
                started.value(i),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (Some(0), true),
            (Some(50_000_000), false),
            (Some(0), true),
            (Some(0), true),
            (None, false),
            (None, false),
        ]
    );
    // finish - start cannot wrap: both int64, nulls where unknown.
    let fct = b
        .column_by_name("fct_ps")
        .unwrap()
        .as_primitive::<Int64Type>();
    assert!(fct.value(0) > 0 && fct.is_null(1) && fct.is_null(4));
    std::fs::remove_dir_all(&dir).unwrap();
}
