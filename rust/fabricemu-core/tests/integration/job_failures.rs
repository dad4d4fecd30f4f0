//! Jobs that react to failures (`on_failure` on a step workload). Sources of the expectations:
//! - stall: the job freezes from the failure to `detection` after the repair, so on an
//!   otherwise deterministic step it ends exactly that much later than without the failure
//!   (a failure during compute: to the picosecond; during communication: within 1 %, the
//!   transfers on the wire go on meanwhile);
//! - lost GPU-time = GPUs x stalled time (exact);
//! - restart: the iterations completed since the last checkpoint are lost (an exact count from
//!   the failure time and the failure-free iteration ends), and the job resumes `restart_time`
//!   after the later of detection and repair;
//! - which ranks a failure cuts off follows from the fabric: a host's only link, its leaf; not a
//!   spine of two (a path remains).

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::Array;

use crate::common;
use common::{read_arrow, run, scenario_error, scratch, spec, write_run};

/// 2 leaves x 2 hosts, 2 spines; four ranks compute, all-reduce 1 MiB, compute; `iterations`
/// times; `reaction` (workload keys) and `faults` ([[fault]] tables) added.
fn job(iterations: u32, reaction: &str, faults: &str) -> String {
    format!(
        r#"
name = "job"
seed = 1
[topology]
kind = "leaf_spine"
leaves = 2
spines = 2
hosts_per_leaf = 2
link_rate = "100Gbps"
link_delay = "500ns"
[transport]
rto = "50us"
[[workload]]
kind = "graph"
iterations = {iterations}
groups = [[0, 1, 2, 3]]
{reaction}
ops = [
  {{ kind = "compute", rank = 0, duration = "100us", phase = "forward" }},
  {{ kind = "compute", rank = 1, duration = "100us", phase = "forward" }},
  {{ kind = "compute", rank = 2, duration = "100us", phase = "forward" }},
  {{ kind = "compute", rank = 3, duration = "100us", phase = "forward" }},
  {{ kind = "collective", op = "all_reduce", group = 0, size = "1MiB", deps = [0, 1, 2, 3], phase = "dp" }},
  {{ kind = "compute", rank = 0, duration = "50us", deps = [4], phase = "backward" }},
  {{ kind = "compute", rank = 1, duration = "50us", deps = [4], phase = "backward" }},
  {{ kind = "compute", rank = 2, duration = "50us", deps = [4], phase = "backward" }},
  {{ kind = "compute", rank = 3, duration = "50us", deps = [4], phase = "backward" }},
]
{faults}
"#
    )
}

/// host 1's only link down from `at` to `until`.
fn host_link_down(at: &str, until: &str) -> String {
    format!("[[fault]]\nlink = [\"host:1\", \"leaf:0\"]\nat = \"{at}\"\nuntil = \"{until}\"\n")
}

/// The end of every iteration (the latest end of its ops), workload 0.
fn iteration_ends(sim: &fabricemu_core::Simulation) -> Vec<u64> {
    let rows = sim.op_rows();
    let n = rows.iter().map(|r| r.iteration + 1).max().unwrap_or(0);
    (0..n)
        .map(|it| {
            rows.iter()
                .filter(|r| r.iteration == it)
                .map(|r| r.end_ps.expect("every op ended"))
                .max()
                .unwrap()
        })
        .collect()
}

const US: u64 = 1_000_000;

#[test]
fn a_stall_during_compute_costs_exactly_the_repair_time_plus_detection() {
    let clean = run(&job(5, "", ""));
    let base = iteration_ends(&clean);
    // 50 us into the first forward compute; down for 1 ms, back for routing 10 us later (its
    // detection delay); the job notices 20 us after that.
    let failed = run(&job(
        5,
        "on_failure = \"stall\"\ndetection = \"20us\"",
        &host_link_down("50us", "1050us"),
    ));
    let ends = iteration_ends(&failed);
    for (a, b) in base.iter().zip(&ends) {
        assert_eq!(b - a, 1030 * US, "iteration ends {base:?} vs {ends:?}");
    }
    let jobs = failed.jobs();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].freezes, vec![(50 * US, 1080 * US)]);
    assert_eq!(jobs[0].plan.episodes[0].endpoints, vec![1]);
}

#[test]
fn a_stall_during_communication_costs_the_repair_time_within_one_percent() {
    let clean = run(&job(4, "", ""));
    let base = iteration_ends(&clean);
    // Iteration 1's all-reduce: after its forward compute.
    let at = base[0] + 100 * US + 20 * US;
    let failed = run(&job(
        4,
        "on_failure = \"stall\"",
        &host_link_down(&format!("{at}ps"), &format!("{}ps", at + 2000 * US)),
    ));
    let ends = iteration_ends(&failed);
    assert_eq!(ends[0], base[0]);
    let extra = (ends[3] - base[3]) as f64;
    let expected = (2010 * US) as f64; // down 2 ms, routing notices the repair 10 us later
    assert!(
        (extra - expected).abs() <= 0.01 * expected,
        "the stall cost {extra} ps, expected {expected} ps"
    );
}

#[test]
fn lost_gpu_time_is_gpus_times_the_stalled_time_and_steps_show_it() {
    let dir = scratch("job_failures", "stall_outputs");
    let sim = write_run(
        &job(
            3,
            "on_failure = \"stall\"",
            &host_link_down("50us", "550us"),
        ),
        &dir,
    );
    let run_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    let j = &run_json["jobs"][0];
    assert_eq!(j["on_failure"], "stall");
    assert_eq!(j["gpus"], 4);
    assert_eq!(j["failures"], 1);
    assert_eq!(j["stalled_ps"], 510 * US);
    let lost = j["lost_gpu_seconds"].as_f64().unwrap();
    assert!((lost - 4.0 * 510e-6).abs() < 1e-12, "{lost}");
    assert_eq!(j["lost_gpu_seconds_stall"].as_f64().unwrap(), lost);
    assert_eq!(j["useful_iterations"], 3);
    assert_eq!(j["episodes"][0]["endpoints"], serde_json::json!([1]));
    assert_eq!(j["episodes"][0]["fault_target"], "host:1--leaf:0");
    let ideal = j["ideal_iterations_per_second"].as_f64().unwrap();
    assert!((ideal - 1e12 / (150.0 * US as f64)).abs() < 1e-6, "{ideal}");
    // steps.arrow: the first iteration holds the stall.
    let batches = read_arrow(&dir.join("steps.arrow"));
    let b = &batches[0];
    let stalled = b
        .column_by_name("stalled_ps")
        .expect("stalled_ps column")
        .as_primitive::<Int64Type>();
    assert_eq!(stalled.value(0), (510 * US) as i64);
    assert_eq!(stalled.value(1), 0);
    let useful = b.column_by_name("useful").unwrap().as_boolean();
    assert!((0..3).all(|i| useful.value(i) && !useful.is_null(i)));
    drop(sim);
}

#[test]
fn a_restart_loses_the_iterations_since_the_last_checkpoint() {
    let clean = run(&job(8, "", ""));
    let base = iteration_ends(&clean);
    // After 5 iterations ended (checkpoints after 2 and 4): iteration 4 is lost, and the part
    // of iteration 5 run before the failure.
    let at = base[4] + 30 * US;
    let reaction = "on_failure = \"restart\"\nrestart_time = \"200us\"\ncheckpoint_interval = 2\n\
                    detection = \"100us\"";
    let failed = run(&job(
        8,
        reaction,
        &host_link_down(&format!("{at}ps"), &format!("{}ps", at + 50 * US)),
    ));
    let j = &failed.jobs()[0];
    let o = &j.outcomes[0];
    assert_eq!(o.lost_iterations, 1);
    // Resumes restart_time after the later of detection (100 us) and repair (50 us).
    assert_eq!(o.resume_ps, Some(at + 100 * US + 200 * US));
    assert_eq!(o.redo_ps, at - base[4]);
    assert_eq!(o.rework_ps, at - base[3]);
    assert_eq!(j.useful.iter().filter(|&&u| !u).count(), 1);
    assert!(!j.useful[4]);
    assert_eq!(j.progress, 7);
    // Everything after the failure runs (300 us + the redone 30 us) later.
    let ends = iteration_ends(&failed);
    assert_eq!(ends[4], base[4]);
    for it in 5..8 {
        let extra = (ends[it] - base[it]) as f64;
        let expected = (330 * US) as f64;
        assert!(
            (extra - expected).abs() <= 0.01 * expected,
            "iteration {it}: {extra} vs {expected}"
        );
    }
}

#[test]
fn a_time_checkpoint_is_taken_at_the_first_iteration_end_after_the_interval() {
    let clean = run(&job(6, "", ""));
    let base = iteration_ends(&clean);
    // Iterations take ~280 us: a checkpoint every 500 us is taken after iterations 1 and 3.
    let at = base[4] + 10 * US;
    let failed = run(&job(
        6,
        "on_failure = \"restart\"\nrestart_time = \"10us\"\ncheckpoint_interval = \"500us\"",
        &host_link_down(&format!("{at}ps"), &format!("{}ps", at + 10 * US)),
    ));
    let per = base[0];
    let last_ckpt = (0..5).fold((0u64, 0u32), |(t, n), i| {
        if base[i] - t >= 500 * US {
            (base[i], i as u32 + 1)
        } else {
            (t, n)
        }
    });
    assert!(per > 200 * US);
    assert_eq!(
        failed.jobs()[0].outcomes[0].lost_iterations,
        5 - last_ckpt.1
    );
}

#[test]
fn which_ranks_a_failure_cuts_off_follows_from_the_fabric() {
    let build = |faults: &str| {
        let s = spec(&job(1, "on_failure = \"stall\"", faults));
        fabricemu_core::scenario::build(&s).unwrap()
    };
    // One spine of two: a path remains.
    let b = build("[[fault]]\ntarget = \"spine:0\"\nat = \"10us\"\nuntil = \"20us\"\n");
    assert!(b.plan.jobs[0].episodes.is_empty());
    // A leaf: its two hosts.
    let b = build("[[fault]]\ntarget = \"leaf:1\"\nat = \"10us\"\nuntil = \"20us\"\n");
    let e = &b.plan.jobs[0].episodes;
    assert_eq!(e.len(), 1);
    assert_eq!(e[0].endpoints, vec![2, 3]);
    assert_eq!((e[0].fail_ps, e[0].repair_ps), (10 * US, Some(30 * US)));
    // Both spines: the leaves are apart; the first leaf's hosts count as the job's part (tie:
    // the lowest), the second leaf's are cut off.
    let b = build(
        "[[fault]]\ntarget = \"spine:0\"\nat = \"10us\"\nuntil = \"30us\"\n\
         [[fault]]\ntarget = \"spine:1\"\nat = \"20us\"\nuntil = \"40us\"\n",
    );
    let e = &b.plan.jobs[0].episodes;
    assert_eq!(e.len(), 1);
    assert_eq!((e[0].fail_ps, e[0].repair_ps), (20 * US, Some(40 * US)));
    // Overlapping failures of two hosts make one episode; one direction of a host link too.
    let b = build(
        "[[fault]]\nlink = [\"host:0\", \"leaf:0\"]\nat = \"10us\"\nuntil = \"30us\"\n\
         [[fault]]\nlink = [\"host:3\", \"leaf:1\"]\ndirection = \"b->a\"\nat = \"20us\"\nuntil = \"50us\"\n",
    );
    let e = &b.plan.jobs[0].episodes;
    assert_eq!(e.len(), 1);
    assert_eq!(e[0].endpoints, vec![0, 3]);
    assert_eq!((e[0].fail_ps, e[0].repair_ps), (10 * US, Some(60 * US)));
    // Degradation and loss cut nothing off.
    let b = build("[[fault]]\ntarget = \"leaf:1\"\nkind = \"degrade\"\nrate = \"10Gbps\"\n");
    assert!(b.plan.jobs[0].episodes.is_empty());
}

#[test]
fn a_failure_the_job_does_not_react_to_leaves_it_unchanged() {
    // Without on_failure a spine failure (paths remain) and with it: the same ends.
    let fault = "[[fault]]\ntarget = \"spine:0\"\nat = \"10us\"\nuntil = \"20us\"\n";
    let a = iteration_ends(&run(&job(2, "", fault)));
    let b = iteration_ends(&run(&job(2, "on_failure = \"stall\"", fault)));
    assert_eq!(a, b);
}

#[test]
fn bad_reaction_keys_are_refused_with_their_key_path() {
    let cases = [
        (
            "on_failure = \"elastic\"",
            "workload.0.on_failure",
            "not modelled yet",
        ),
        (
            "on_failure = \"bounce\"",
            "workload.0.on_failure",
            "expected one of",
        ),
        (
            "on_failure = \"restart\"\ncheckpoint_interval = 2",
            "workload.0.restart_time",
            "missing",
        ),
        (
            "on_failure = \"restart\"\nrestart_time = \"1us\"",
            "workload.0.checkpoint_interval",
            "missing",
        ),
        (
            "on_failure = \"restart\"\nrestart_time = \"1us\"\ncheckpoint_interval = 0",
            "workload.0.checkpoint_interval",
            "from 1",
        ),
        (
            "on_failure = \"restart\"\nrestart_time = \"1us\"\ncheckpoint_interval = 1.5",
            "workload.0.checkpoint_interval",
            "number of iterations",
        ),
        (
            "on_failure = \"stall\"\nrestart_time = \"1us\"",
            "workload.0.restart_time",
            "only with on_failure = \"restart\"",
        ),
        (
            "detection = \"1us\"",
            "workload.0.detection",
            "only with on_failure",
        ),
    ];
    for (keys, path, msg) in cases {
        let e = scenario_error(&job(1, keys, ""));
        let text = e.to_string();
        assert!(
            text.contains(path) && text.contains(msg),
            "{keys}: got {text}"
        );
    }
}

#[test]
fn a_job_cut_off_for_good_stays_frozen_and_the_run_still_ends() {
    let failed = run(&job(
        4,
        "on_failure = \"stall\"",
        "[[fault]]\nlink = [\"host:1\", \"leaf:0\"]\nat = \"50us\"\n",
    ));
    let j = &failed.jobs()[0];
    assert_eq!(j.freezes.len(), 1);
    assert_eq!(j.outcomes[0].resume_ps, None);
    assert_eq!(j.progress, 0, "no iteration ends while frozen");
    // The run ended (run() returned) without the job's later ops.
    assert!(failed.op_rows().iter().any(|r| r.end_ps.is_none()));
}

#[test]
fn a_restart_during_a_restart_loses_nothing_more() {
    let clean = run(&job(6, "", ""));
    let base = iteration_ends(&clean);
    let at = base[2] + 10 * US;
    let reaction = "on_failure = \"restart\"\nrestart_time = \"300us\"\ncheckpoint_interval = 2";
    // A second GPU fails 100 us into the first restart (a separate episode: the first link is
    // back, for routing, 20 us after the failure).
    let faults = format!(
        "{}{}",
        host_link_down(&format!("{at}ps"), &format!("{}ps", at + 10 * US)),
        "[[fault]]\nlink = [\"host:2\", \"leaf:1\"]\n".to_string()
            + &format!(
                "at = \"{}ps\"\nuntil = \"{}ps\"\n",
                at + 100 * US,
                at + 110 * US
            )
    );
    let failed = run(&job(6, reaction, &faults));
    let j = &failed.jobs()[0];
    assert_eq!(j.outcomes.len(), 2);
    assert_eq!(j.outcomes[0].lost_iterations, 1);
    assert_eq!(j.outcomes[1].lost_iterations, 0);
    assert_eq!(j.outcomes[1].rework_ps, 0);
    assert_eq!(j.outcomes[1].redo_ps, j.outcomes[0].redo_ps);
    // The second restart starts over: resume 300 us after its repair (noticed 10 us after).
    assert_eq!(j.outcomes[1].resume_ps, Some(at + 120 * US + 300 * US));
    // One freeze, extended to the second resume plus the redo of the interrupted iteration.
    assert_eq!(j.freezes, vec![(at, at + 420 * US + 10 * US)]);
    assert_eq!(j.progress, 6 - 1);
}
