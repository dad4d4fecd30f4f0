//! Issue 11 item 1: a fault that cuts every path to a destination is a modelled state. Packets to
//! it are dropped and counted, the flow is given up on once no fault can bring the path back, a
//! run that waits for every flow ends, and the outputs are written.

use std::path::PathBuf;

use fabricemu_core::scenario::{parse_toml, to_json};
use fabricemu_core::{output, Simulation, StepOutcome};

const CUT: &str = r#"
stop = "all_flows_done"
[topology]
kind = "fat_tree"
k = 4
[[workload]]
kind = "flows"
flows = [{src = 0, dst = 5, size = "1MB"}, {src = 2, dst = 9, size = "200KB"}]
[[fault]]
link = ["edge:0", "agg:0"]
kind = "down"
at = "1us"
[[fault]]
link = ["edge:0", "agg:1"]
kind = "down"
at = "1us"
"#;

fn scratch(name: &str) -> PathBuf {
    crate::common::scratch("unreachable", name)
}

/// Run with a bound on events (a run that never ends fails instead of hanging).
fn run_bounded(toml: &str) -> Simulation {
    let (_, spec) = parse_toml(toml, "cut.toml").unwrap_or_else(|e| panic!("{e}"));
    let mut sim = Simulation::build(&spec).unwrap();
    let mut steps = 0;
    while sim.step(1 << 16) == StepOutcome::Running {
        steps += 1;
        assert!(steps < 2_000, "the run does not end: {:?}", sim.stats());
    }
    sim.check_conservation().unwrap();
    sim
}

#[test]
fn a_cut_off_destination_ends_the_run_and_is_reported() {
    let mut sim = run_bounded(CUT);
    let st = sim.stats();
    // Host 0 hangs off edge:0, whose both uplinks failed: flow 0 (to host 5, another edge) is
    // cut off; flow 1 (host 2 -> 9, another pod) is not.
    assert_eq!(st.flows_total, 2);
    assert_eq!(st.flows_finished, 1, "{st:?}");
    assert_eq!(st.flows_unreachable, 1, "{st:?}");
    assert!(st.unreachable_drops > 0, "{st:?}");
    assert!(st.link_fault_drops >= st.unreachable_drops, "{st:?}");

    let rows = sim.flow_rows();
    let cut = rows
        .iter()
        .find(|r| r.flow_id == 0)
        .expect("the cut flow has a row");
    assert_eq!(cut.finish_ps, None);
    assert!(cut.unreachable_drops > 0, "{cut:?}");
    assert!(cut.ideal_fct_ps > 0, "its nominal path gives an ideal FCT");
    let ok = rows.iter().find(|r| r.flow_id == 1).expect("finished");
    assert!(ok.finish_ps.is_some());
    assert_eq!(ok.unreachable_drops, 0);

    // Outputs are written (no panic on the cut flow's path).
    let (file, spec) = parse_toml(CUT, "cut.toml").unwrap();
    let dir = scratch("unreachable");
    output::write_outputs(&dir, &mut sim, &to_json(&file), spec.seed, false, 0.0).unwrap();
    for name in ["run.json", "flows.arrow"] {
        assert!(dir.join(name).is_file(), "{name} written");
    }
    let run: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap();
    let stats = &run["stats"];
    assert_eq!(stats["flows_unreachable"], 1, "{run}");
    assert!(stats["unreachable_drops"].as_u64().unwrap() > 0, "{run}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_cut_that_is_restored_later_is_waited_for() {
    // The same cut, restored at 2ms: the flow is not given up on while a fault event is to come;
    // it finishes after the restore.
    let toml = CUT.replace(
        "kind = \"down\"\nat = \"1us\"\n",
        "kind = \"down\"\nat = \"1us\"\nuntil = \"2ms\"\n",
    );
    assert_eq!(toml.matches("until").count(), 2);
    let sim = run_bounded(&toml);
    let st = sim.stats();
    assert_eq!(st.flows_finished, 2, "{st:?}");
    assert_eq!(st.flows_unreachable, 0, "{st:?}");
    assert!(st.unreachable_drops > 0, "{st:?}");
    let f0 = sim
        .flow_rows()
        .into_iter()
        .find(|r| r.flow_id == 0)
        .unwrap();
    assert!(f0.finish_ps.unwrap() > 2_000_000_000, "{f0:?}");
}

/// Step graphs: a send to a cut-off host is given up on, and so is every later op's flow that
/// waited on it (through compute in between); the run still ends.
#[test]
fn a_cut_off_send_gives_up_the_graph_ops_after_it() {
    let toml = r#"
stop = "all_flows_done"
[topology]
kind = "fat_tree"
k = 4
[[workload]]
kind = "graph"
ranks = [0, 5, 9, 12]
ops = [
  { kind = "send", src = 0, dst = 1, size = "1MB" },
  { kind = "compute", rank = 1, duration = "1us", deps = [0] },
  { kind = "send", src = 1, dst = 2, size = "100KB", deps = [1] },
  { kind = "collective", op = "all_reduce", ranks = [1, 2, 3], size = "30KB", deps = [2] },
  { kind = "send", src = 2, dst = 3, size = "100KB" },
]
[[fault]]
link = ["edge:0", "agg:0"]
kind = "down"
at = "1us"
[[fault]]
link = ["edge:0", "agg:1"]
kind = "down"
at = "1us"
"#;
    let sim = run_bounded(toml);
    let st = sim.stats();
    // 1 + 1 + 12 (ring all-reduce of 3 ranks: 2 x 2 steps x 3) + 1 flows; the last send is
    // independent and finishes.
    assert_eq!(st.flows_total, 15);
    assert_eq!(st.flows_finished, 1, "{st:?}");
    assert_eq!(st.flows_unreachable, 14, "{st:?}");
    let ops = sim.op_rows();
    assert!(ops
        .iter()
        .filter(|r| r.op == 1)
        .all(|r| r.start_ps.is_none()));
    assert!(ops.iter().filter(|r| r.op == 4).all(|r| r.end_ps.is_some()));
}
