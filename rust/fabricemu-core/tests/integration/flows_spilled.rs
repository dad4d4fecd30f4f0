//! Rows of finished flows spilled to disk during the run (issue 19 item 2): a run that retires
//! flows keeps no row per finished message, and its flows.arrow is the one written from rows kept
//! in memory, byte for byte, as is run.json (whose per-workload and synthetic figures read the
//! spilled flows' times).

use std::path::{Path, PathBuf};

use fabricemu_core::scenario::parse_toml;
use fabricemu_core::trace::flows::BATCH_ROWS;
use fabricemu_core::{output, scenario, Simulation, StepOutcome};

use crate::common::repo_file;

/// The 1,056-host dragonfly of `scenarios/dragonfly_ugal_1k.toml` (open-loop synthetic traffic
/// at 0.6 of the links, worst case: the sources' backlog grows, and some messages wait in the
/// fabric for tens of microseconds) cut to 60 us: about 115 k messages, more than one record
/// batch of flows.arrow; and an incast whose rounds start after the last one's flows finished.
fn dragonfly() -> String {
    let shipped = repo_file("scenarios/dragonfly_ugal_1k.toml");
    let cut = shipped
        .replace("stop = \"600us\"", "stop = \"60us\"")
        .replace("warmup = \"300us\"", "warmup = \"20us\"");
    assert_ne!(cut, shipped);
    cut + r#"
[[workload]]
name = "incast"
kind = "incast"
receiver = 0
senders = 8
size = "64KiB"
rounds = 3
round_gap = "2us"
"#
}

fn dir(name: &str) -> PathBuf {
    crate::common::scratch("flows_spilled", name)
}

/// What a run left: rows spilled and rows kept in memory at the end, the most flow records held
/// at once (one world's; on threads, each partition's).
#[derive(Debug)]
struct Held {
    spilled: usize,
    kept: usize,
    peak_records: Vec<usize>,
}

/// Run `text` for `slices` slices of `events` (all of it when `slices` is None), spilling rows
/// when `spill`, write the outputs into `out`.
fn run(text: &str, out: &Path, spill: bool, slices: Option<u32>, events: u64) -> Held {
    run_on(text, 1, out, spill, slices, events)
}

/// [`run`] on `threads` threads (the outputs echo the one-thread scenario).
fn run_on(
    text: &str,
    threads: u32,
    out: &Path,
    spill: bool,
    slices: Option<u32>,
    events: u64,
) -> Held {
    let (file, spec) = parse_toml(text, "t.toml").unwrap_or_else(|e| panic!("{e}"));
    let json = scenario::to_json(&file);
    let spec = fabricemu_core::Scenario { threads, ..spec };
    let mut sim = Simulation::build(&spec).unwrap();
    if spill {
        sim.open_traces(out, &output::metadata(&json, spec.seed))
            .unwrap();
    }
    let mut n = 0;
    while sim.step(events) == StepOutcome::Running && slices.is_none_or(|s| n + 1 < s) {
        n += 1;
    }
    let held = Held {
        spilled: sim.world().flows.spilled_count(),
        kept: sim.world().flows.rows_kept(),
        peak_records: match sim.partition_peak_records() {
            p if p.is_empty() => vec![sim.world().flows.peak_live()],
            p => p,
        },
    };
    output::write_outputs(out, &mut sim, &json, spec.seed, slices.is_some(), 0.0).unwrap();
    held
}

fn same_file(a: &Path, b: &Path, name: &str) {
    let read = |dir: &Path| crate::common::comparable(name, std::fs::read(dir.join(name)).unwrap());
    let (x, y) = (read(a), read(b));
    assert!(x == y, "{name} differs ({} and {} bytes)", x.len(), y.len());
}

#[test]
fn spilled_rows_give_the_same_files_and_are_not_kept() {
    let (a, b) = (dir("spilled-a"), dir("spilled-b"));
    let Held { spilled, kept, .. } = run(&dragonfly(), &a, true, None, 1 << 20);
    let Held {
        spilled: none,
        kept: kept_all,
        ..
    } = run(&dragonfly(), &b, false, None, 1 << 20);
    for name in ["flows.arrow", "run.json"] {
        same_file(&a, &b, name);
    }
    let batches: Vec<usize> = arrow_ipc::reader::FileReader::try_new(
        std::fs::File::open(a.join("flows.arrow")).unwrap(),
        None,
    )
    .unwrap()
    .map(|b| b.unwrap().num_rows())
    .collect();
    assert!(
        batches.len() >= 2 && batches[0] == BATCH_ROWS,
        "{batches:?}"
    );
    // Every retired row but those of the last slice went to disk, and the spill file is gone.
    assert_eq!(none, 0);
    assert_eq!(spilled + kept, kept_all);
    assert!(kept < kept_all / 10, "kept {kept} of {kept_all} rows");
    let left: Vec<_> = std::fs::read_dir(&a)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn an_interrupted_run_writes_the_same_files_spilled_or_not() {
    let (a, b) = (dir("spilled-stop-a"), dir("spilled-stop-b"));
    let Held { spilled, .. } = run(&dragonfly(), &a, true, Some(8), 400_000);
    run(&dragonfly(), &b, false, Some(8), 400_000);
    assert!(spilled > 10_000, "{spilled}");
    for name in ["flows.arrow", "run.json"] {
        same_file(&a, &b, name);
    }
    let info: serde_json::Value =
        serde_json::from_slice(&std::fs::read(a.join("run.json")).unwrap()).unwrap();
    assert_eq!(info["interrupted"], true);
}

/// On threads, the view retires the flows as it folds the partitions (whose copies it forgets)
/// and spills their rows: the files are one world's, and no partition holds more records at
/// once than one world plus what finished within one slice.
#[test]
fn on_threads_flows_are_retired_spilled_and_forgotten_as_on_one() {
    let (a, b) = (dir("spilled-threads-1"), dir("spilled-threads-2"));
    let one = run(&dragonfly(), &a, true, None, 1 << 18);
    let two = run_on(&dragonfly(), 2, &b, true, None, 1 << 18);
    for name in ["flows.arrow", "run.json"] {
        same_file(&a, &b, name);
    }
    assert!(two.spilled > 0 && two.spilled + two.kept == one.spilled + one.kept);
    assert!(
        two.kept < (two.spilled + two.kept) / 10,
        "kept {}",
        two.kept
    );
    let total = one.spilled + one.kept;
    for &peak in &two.peak_records {
        assert!(
            peak < one.peak_records[0] * 3 / 2 && peak < total / 2,
            "{peak} records in a partition; one world {:?}; {total} retired",
            one.peak_records
        );
    }
}

/// The dragonfly's synthetic traffic alone (`dragonfly()` without its incast), every flow's row
/// kept (`trace.unfinished_flows`: an interrupted run writes rows of flows never started).
fn dragonfly_streamed() -> String {
    let d = dragonfly();
    let cut = d.split("\n[[workload]]\nname = \"incast\"").next().unwrap();
    assert_ne!(cut.len(), d.len());
    format!("{cut}\n[trace]\nunfinished_flows = true\n")
}

/// Run `text` on one thread, its open-loop flows streamed or (`planned`) all planned at the build,
/// for `slices` slices (None: to the end), spilling rows; write the outputs into `out`.
/// Returns the flows streamed and the plan entries held.
fn run_streamed(text: &str, out: &Path, planned: bool, slices: Option<u32>) -> (usize, usize) {
    let (file, spec) = parse_toml(text, "t.toml").unwrap_or_else(|e| panic!("{e}"));
    let json = scenario::to_json(&file);
    let mut built = scenario::build(&spec).unwrap();
    if planned {
        built.plan.materialise_streams();
    }
    let mut sim = Simulation::new(built);
    sim.open_traces(out, &output::metadata(&json, spec.seed))
        .unwrap();
    let mut n = 0;
    while sim.step(200_000) == StepOutcome::Running && slices.is_none_or(|s| n + 1 < s) {
        n += 1;
    }
    let held = (
        sim.world().streamed_flows(),
        sim.workload_plan().flows.len(),
    );
    output::write_outputs(out, &mut sim, &json, spec.seed, slices.is_some(), 0.0).unwrap();
    held
}

/// Issue 19 item 2: an open-loop workload's flows are made as the run reaches them, not planned
/// at the build; the outputs are those of the planned run, byte for byte, whether the run ends
/// or is interrupted (with rows of flows never started), and those of two threads.
#[test]
fn streamed_open_loop_flows_give_the_planned_runs_files() {
    let text = dragonfly_streamed();
    for slices in [None, Some(3)] {
        let (a, b) = (dir("streamed-a"), dir("streamed-b"));
        let (streamed, entries) = run_streamed(&text, &a, false, slices);
        let (none, all) = run_streamed(&text, &b, true, slices);
        assert!(
            streamed > 100_000 && entries == 0,
            "{streamed} streamed, {entries} planned"
        );
        assert_eq!((none, all), (0, streamed));
        for name in ["flows.arrow", "run.json"] {
            same_file(&a, &b, name);
        }
        if slices.is_none() {
            // Two threads stream too: each partition runs the streams, starting its own flows.
            let (_, spec) = parse_toml(&text, "t.toml").unwrap();
            let sim = Simulation::build(&fabricemu_core::Scenario { threads: 2, ..spec }).unwrap();
            assert_eq!(sim.world().streamed_flows(), streamed);
            assert!(sim.workload_plan().flows.is_empty());
            let c = dir("streamed-threads");
            run_on(&text, 2, &c, true, None, 1 << 18);
            for name in ["flows.arrow", "run.json"] {
                same_file(&a, &c, name);
            }
        }
    }
}

/// A training step graph on a GPU cluster (collectives, sends, computes): its flows retire
/// (since 2026-12-04; before, a step graph kept every flow's record for the whole run).
fn training() -> String {
    crate::common::gpt_steps(4)
}

/// Every file of `a` is `b`'s, byte for byte.
fn same_files(a: &Path, b: &Path) {
    let names = |d: &Path| {
        let mut v: Vec<String> = (std::fs::read_dir(d).unwrap())
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names(a), names(b));
    for name in names(a) {
        same_file(a, b, &name);
    }
}

/// A step graph's flows retire and their rows spill, on one world and, in the view, on threads:
/// every file is one world's; interrupted (where a parallel run stops depends on its windows),
/// spilled or not, every file is the same.
#[test]
fn on_threads_a_step_graph_run_retires_and_spills_its_flows_with_one_worlds_files() {
    let (a, b) = (dir("steps-1"), dir("steps-2"));
    let one = run(&training(), &a, true, None, 2_000);
    let two = run_on(&training(), 2, &b, true, None, 2_000);
    same_files(&a, &b);
    assert!(one.spilled > 0 && two.spilled > 0, "rows spilled");
    let total = one.spilled + one.kept;
    assert!(one.peak_records[0] < total / 4, "{one:?} of {total}");
    assert!(
        two.peak_records.iter().all(|&p| p < total / 4),
        "{:?} records of {total}",
        two.peak_records
    );
    let (c, d) = (dir("steps-cut-spilled"), dir("steps-cut-kept"));
    let spilled = run_on(&training(), 2, &c, true, Some(3), 2_000);
    let kept = run_on(&training(), 2, &d, false, Some(3), 2_000);
    same_files(&c, &d);
    assert!(spilled.spilled > 0 && kept.spilled == 0);
    assert_eq!(kept.kept, spilled.spilled + spilled.kept);
    for d in [a, b, c, d] {
        let _ = std::fs::remove_dir_all(d);
    }
}
