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
//! - elastic: after losing r of n data-parallel ranks the ring all-reduce takes the ring time of
//!   n - r ranks, 2(n-r-1)/(n-r) x S/B plus 2(n-r-1) per-step latencies (Patarasuk & Yuan 2009;
//!   the same model as workloads.rs's ring test), within 5 %; the useful throughput (samples per
//!   second) is (n-r)/n of the failure-free one within 5 % when compute dominates the step; the
//!   lost GPU-time is the failed ranks' downtime plus the survivors' detection + re-formation
//!   (exact when the failure hits during compute).
//! - checkpoint_time: each checkpoint before the last iteration pauses the job exactly that long.

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::Array;

use crate::common;
use common::{read_arrow, run, scenario_error, scratch, spec, write_run};

/// 2 leaves x 2 hosts, 2 spines; four ranks compute, all-reduce 1 MiB, compute; `iterations`
/// times; `reaction` (workload keys) and `faults` ([[fault]] tables) added.
fn job(iterations: u32, reaction: &str, faults: &str) -> String {
    sized_job(iterations, "100us", "1MiB", reaction, faults)
}

/// [`job`] with the forward compute and the all-reduce's size given.
fn sized_job(iterations: u32, forward: &str, size: &str, reaction: &str, faults: &str) -> String {
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
  {{ kind = "compute", rank = 0, duration = "{forward}", phase = "forward" }},
  {{ kind = "compute", rank = 1, duration = "{forward}", phase = "forward" }},
  {{ kind = "compute", rank = 2, duration = "{forward}", phase = "forward" }},
  {{ kind = "compute", rank = 3, duration = "{forward}", phase = "forward" }},
  {{ kind = "collective", op = "all_reduce", group = 0, size = "{size}", deps = [0, 1, 2, 3], phase = "dp" }},
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
            "on_failure = \"elastic\"\nrestart_time = \"1us\"",
            "workload.0.restart_time",
            "only with on_failure = \"restart\"",
        ),
        (
            "on_failure = \"elastic\"\ncheckpoint_interval = 2",
            "workload.0.checkpoint_interval",
            "only with on_failure = \"restart\"",
        ),
        (
            "on_failure = \"stall\"\nreformation_time = \"1us\"",
            "workload.0.reformation_time",
            "only with on_failure = \"elastic\"",
        ),
        (
            "on_failure = \"restart\"\nrestart_time = \"1us\"\ncheckpoint_interval = 2\n\
             rejoin = \"never\"",
            "workload.0.rejoin",
            "only with on_failure = \"elastic\"",
        ),
        (
            "on_failure = \"elastic\"\nrejoin = \"sometimes\"",
            "workload.0.rejoin",
            "expected one of",
        ),
        (
            "on_failure = \"elastic\"\nreformation_time = \"7200s\"",
            "workload.0.reformation_time",
            "at most 3600s",
        ),
        (
            "on_failure = \"elastic\"\nreformation_time = 5",
            "workload.0.reformation_time",
            "",
        ),
        (
            "on_failure = \"elastic\"\ncheckpoint_time = \"1us\"",
            "workload.0.checkpoint_time",
            "only with on_failure = \"restart\"",
        ),
        (
            "reformation_time = \"1us\"",
            "workload.0.reformation_time",
            "only with on_failure",
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

// ---- elastic -----------------------------------------------------------------------------------

/// Per iteration: the all-reduce's (op 4's) start and end.
fn all_reduce_times(sim: &fabricemu_core::Simulation) -> Vec<(u64, u64)> {
    let mut out: Vec<(u32, u64, u64)> = sim
        .op_rows()
        .iter()
        .filter(|r| r.op == 4 && r.rank == 0)
        .map(|r| (r.iteration, r.start_ps.unwrap(), r.end_ps.unwrap()))
        .collect();
    out.sort_unstable();
    out.into_iter().map(|(_, a, b)| (a, b)).collect()
}

/// The ring all-reduce time of `n` ranks (workloads.rs's model): 2(n-1)/n x S x 8 / 100 Gb/s
/// plus, per step, the longest path's latency here (4 links of 500 ns, 3 store-and-forward
/// hops of a full 4158 B packet).
fn ring_time(n: u64, size: u64) -> f64 {
    let steps = 2 * (n - 1);
    let bandwidth = steps as f64 / n as f64 * size as f64 * 8.0 / 100e9 * 1e12;
    bandwidth + steps as f64 * (4.0 * 500_000.0 + 3.0 * 4158.0 * 80.0)
}

#[test]
fn an_elastic_job_reduces_over_the_survivors_at_the_ring_time_of_n_minus_r() {
    let size = 8u64 << 20;
    let clean = run(&sized_job(3, "100us", "8MiB", "", ""));
    // Host 3's link fails for good during iteration 0's forward compute.
    let fault = "[[fault]]\nlink = [\"host:3\", \"leaf:1\"]\nat = \"50us\"\n";
    let reaction = "on_failure = \"elastic\"\nreformation_time = \"100us\"\nrejoin = \"never\"";
    let failed = run(&sized_job(3, "100us", "8MiB", reaction, fault));
    let check = |times: &[(u64, u64)], n: u64| {
        for &(a, b) in times {
            let (t, want) = ((b - a) as f64, ring_time(n, size));
            assert!(
                (t / want - 1.0).abs() < 0.05,
                "all-reduce over {n}: {t} ps, ring formula {want} ps"
            );
        }
    };
    check(&all_reduce_times(&clean), 4);
    check(&all_reduce_times(&failed), 3);
    // The two formulas differ by 11 %: the test tells 3 ranks from 4.
    assert!(ring_time(4, size) / ring_time(3, size) > 1.1);
    let j = &failed.jobs()[0];
    assert_eq!(j.group_sizes(), &[3, 3, 3]);
    assert_eq!(j.exclusions()[0].endpoints, vec![3]);
    assert_eq!(j.reformations().len(), 1);
    assert_eq!(j.progress, 3);
}

#[test]
fn elastic_throughput_is_the_surviving_fraction_and_lost_time_is_analytic() {
    // Compute dominates the step (1 ms forward, a ~70 us all-reduce).
    let clean = run(&sized_job(4, "1ms", "1MiB", "", ""));
    let base = iteration_ends(&clean);
    let clean_rate = 1e12 * 4.0 / base[3] as f64; // the job starts at 0
    let fault = "[[fault]]\nlink = [\"host:1\", \"leaf:0\"]\nat = \"50us\"\n";
    let reaction = "on_failure = \"elastic\"\ndetection = \"10us\"\n\
                    reformation_time = \"100us\"\nrejoin = \"never\"";
    let dir = scratch("job_failures", "elastic_outputs");
    let failed = write_run(&sized_job(4, "1ms", "1MiB", reaction, fault), &dir);
    let ends = iteration_ends(&failed);
    let run_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    let js = &run_json["jobs"][0];
    assert_eq!(js["on_failure"], "elastic");
    assert_eq!(js["reformations"], 1);
    assert_eq!(js["group_size_min"], 3);
    // Samples per second after the failure (iterations 1..3 with 3 of 4 ranks) over the
    // failure-free run's: 3/4 within 5 %.
    let shrunk_rate = 1e12 * 3.0 / (ends[3] - ends[0]) as f64 * 0.75;
    let rel = shrunk_rate / clean_rate;
    assert!((rel / 0.75 - 1.0).abs() < 0.05, "relative throughput {rel}");
    // run.json's relative throughput (against a shadow run's failure-free rate: every
    // iteration was touched) is that fraction too.
    assert_eq!(js["relative_throughput_baseline"], "shadow");
    let reported_rel = js["relative_throughput"].as_f64().unwrap();
    assert!((reported_rel / 0.75 - 1.0).abs() < 0.05, "{reported_rel}");
    let reported = js["work_per_second"].as_f64().unwrap();
    let expected_work = 4.0 * 0.75 * 1e12 / ends[3] as f64;
    assert!(
        (reported / expected_work - 1.0).abs() < 1e-9,
        "{reported} vs {expected_work}"
    );
    // Lost GPU-time: the failed rank from the failure to the job's end, plus 3 survivors x
    // (detection + re-formation).
    let lost = js["lost_gpu_seconds"].as_f64().unwrap();
    let want = 1.0 * (ends[3] - 50 * US) as f64 / 1e12 + 3.0 * 110e-6;
    assert!((lost - want).abs() < 1e-12, "lost {lost} vs {want}");
    assert!((js["lost_gpu_seconds_reformation"].as_f64().unwrap() - 3.0 * 110e-6).abs() < 1e-15);
    // The job froze only for detection + re-formation (110 us, during iteration 0's compute);
    // its all-reduce over 3 ranks is ~14 us shorter than over 4.
    assert!(ends[0] <= base[0] + 110 * US && ends[0] >= base[0] + 80 * US);
    // steps.arrow: the group size per iteration.
    let b = &read_arrow(&dir.join("steps.arrow"))[0];
    let g = b
        .column_by_name("group_size")
        .expect("group_size column")
        .as_primitive::<arrow_array::types::UInt32Type>();
    assert_eq!(
        (0..4).map(|i| g.value(i)).collect::<Vec<_>>(),
        vec![3, 3, 3, 3]
    );
}

#[test]
fn an_elastic_job_rejoins_at_the_first_iteration_end_after_the_repair() {
    let reaction = "on_failure = \"elastic\"\nreformation_time = \"100us\"";
    // Down from 50 us to 1.5 ms; routing knows it is back 10 us later.
    let failed = run(&sized_job(
        5,
        "1ms",
        "1MiB",
        reaction,
        &host_link_down("50us", "1500us"),
    ));
    let j = &failed.jobs()[0];
    let ends = iteration_ends(&failed);
    let r = j.reformations();
    assert_eq!(r.len(), 2);
    assert!(!r[0].rejoin && r[1].rejoin);
    assert_eq!(
        (r[0].start_ps, r[0].end_ps, r[0].idle),
        (50 * US, 150 * US, 3)
    );
    // The first iteration to end after the repair (1510 us) is iteration 1; the rejoin
    // re-formation follows it, and iterations 2.. run with all four ranks.
    assert!(ends[0] < 1510 * US && ends[1] >= 1510 * US);
    assert_eq!(
        (r[1].start_ps, r[1].end_ps, r[1].idle),
        (ends[1], ends[1] + 100 * US, 3)
    );
    assert_eq!(j.group_sizes(), &[3, 3, 4, 4, 4]);
    assert_eq!(j.exclusions()[0].until_ps, Some(ends[1] + 100 * US));
    assert_eq!(j.progress, 5);
    // The all-reduces after the rejoin run over four ranks again (ring time of 4 ranks, 1 MiB:
    // more than that of 3 by 10 %, less the shared latency).
    let t = all_reduce_times(&failed);
    assert!(t[1].1 - t[1].0 < t[3].1 - t[3].0);
}

#[test]
fn a_model_replica_of_a_failed_rank_is_excluded_with_it() {
    // Ranks 0,1 and 2,3 are tensor-parallel pairs (two replicas); the data-parallel all-reduce
    // spans all four. Host 1 fails: its replica (0 and 1) leaves; the replica 2,3 goes on.
    let text = r#"
name = "replicas"
seed = 1
[topology]
kind = "leaf_spine"
leaves = 2
spines = 2
hosts_per_leaf = 2
link_rate = "100Gbps"
[[workload]]
kind = "graph"
iterations = 3
groups = [[0, 1], [2, 3], [0, 1, 2, 3]]
on_failure = "elastic"
reformation_time = "10us"
rejoin = "never"
ops = [
  { kind = "compute", rank = 0, duration = "100us" },
  { kind = "compute", rank = 1, duration = "100us" },
  { kind = "compute", rank = 2, duration = "100us" },
  { kind = "compute", rank = 3, duration = "100us" },
  { kind = "collective", op = "all_reduce", group = 0, size = "64KiB", deps = [0, 1], phase = "tp" },
  { kind = "collective", op = "all_reduce", group = 1, size = "64KiB", deps = [2, 3], phase = "tp" },
  { kind = "collective", op = "all_reduce", group = 2, size = "256KiB", deps = [4, 5], phase = "dp" },
]
[[fault]]
link = ["host:1", "leaf:0"]
at = "50us"
"#;
    let sim = run(text);
    let j = &sim.jobs()[0];
    assert_eq!(j.exclusions()[0].endpoints, vec![0, 1]);
    assert_eq!(j.group_sizes(), &[2, 2, 2]);
    assert_eq!(j.progress, 3);
    // The excluded replica sends nothing after the failure; the other pair all-reduces.
    let flows = sim.flow_rows();
    assert!(flows
        .iter()
        .filter(|f| f.start_ps > 60 * US)
        .all(|f| f.src >= 2 && f.dst >= 2));
}

#[test]
fn saving_a_checkpoint_pauses_the_job_by_checkpoint_time() {
    let clean = run(&job(6, "", ""));
    let base = iteration_ends(&clean);
    let reaction = "on_failure = \"restart\"\nrestart_time = \"10us\"\ncheckpoint_interval = 2\n\
                    checkpoint_time = \"30us\"";
    let dir = scratch("job_failures", "checkpoint_time");
    let saved = write_run(&job(6, reaction, ""), &dir);
    let ends = iteration_ends(&saved);
    // Checkpoints after iterations 2, 4 (and 6: the last, nothing waits for it).
    for (it, pauses) in [(0, 0), (1, 0), (2, 1), (3, 1), (4, 2), (5, 2)] {
        assert_eq!(ends[it] - base[it], pauses * 30 * US, "iteration {it}");
    }
    let run_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    let js = &run_json["jobs"][0];
    assert_eq!(js["checkpoints"], 3);
    let lost = js["lost_gpu_seconds_checkpoint"].as_f64().unwrap();
    assert!((lost - 4.0 * 60e-6).abs() < 1e-15, "{lost}");
    assert_eq!(js["lost_gpu_seconds"].as_f64().unwrap(), lost);
}

// ---- overlapping failures, excluded ranks' rows, the throughput baseline ---------------------
//
// Lost GPU-time is a union (docs/failures.md, "Lost GPU-time"): a GPU-second lost to two
// failures at once counts once. Each case below has two failures whose losses overlap, and the
// expectation is the analytic union from the scenario's times (exact, to the picosecond).

/// run.json's `jobs[0]` of `text` run into a scratch directory, with the run.
fn job_json(text: &str, name: &str) -> (fabricemu_core::Simulation, serde_json::Value) {
    let dir = scratch("job_failures", name);
    let sim = write_run(text, &dir);
    let run_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    (sim, run_json["jobs"][0].clone())
}

fn link_down(host: u32, leaf: u32, at: u64, until: u64) -> String {
    format!(
        "[[fault]]\nlink = [\"host:{host}\", \"leaf:{leaf}\"]\nat = \"{at}ps\"\nuntil = \"{until}ps\"\n"
    )
}

fn gpu_seconds(j: &serde_json::Value, key: &str) -> f64 {
    j[key].as_f64().unwrap_or_else(|| panic!("{key} in {j}"))
}

#[test]
fn overlapping_stalls_count_each_gpu_second_once() {
    let clean = run(&job(3, "", ""));
    let base = iteration_ends(&clean);
    // Host 1 down 50..150 us (routing: back at 160 us; the job resumes at 180 us); host 2 fails
    // at 170 us, during that detection: a second episode (160 < 170), down to 300 us (back at
    // 310 us, resumed at 330 us). The freezes overlap on 170..180 us.
    let faults = link_down(1, 0, 50 * US, 150 * US) + &link_down(2, 1, 170 * US, 300 * US);
    let (sim, j) = job_json(
        &job(3, "on_failure = \"stall\"\ndetection = \"20us\"", &faults),
        "overlap_stall",
    );
    assert_eq!(j["failures"], 2);
    let frozen = 330 * US - 50 * US; // the union of 50..180 and 170..330
    assert_eq!(j["stalled_ps"], frozen);
    let want = 4.0 * frozen as f64 / 1e12;
    let lost = gpu_seconds(&j, "lost_gpu_seconds");
    assert!(
        (lost - want).abs() < 1e-15,
        "lost {lost} GPU-s, want {want}"
    );
    assert_eq!(gpu_seconds(&j, "lost_gpu_seconds_stall"), lost);
    // The failures hit compute: every iteration ends exactly the frozen time later.
    let ends = iteration_ends(&sim);
    for (a, b) in base.iter().zip(&ends) {
        assert_eq!(b - a, frozen);
    }
}

#[test]
fn overlapping_restarts_count_each_gpu_second_once() {
    let clean = run(&job(6, "", ""));
    let base = iteration_ends(&clean);
    let at = base[2] + 10 * US;
    let reaction = "on_failure = \"restart\"\nrestart_time = \"300us\"\ncheckpoint_interval = 2";
    // (a) A second failure 100 us into the first restart (as in a_restart_during_a_restart):
    // lost is everything from the checkpoint (after iteration 1) to the second resume
    // (at + 420 us), once: 4 GPUs x that. Summed per episode it would count 100..320 us twice.
    let faults = link_down(1, 0, at, at + 10 * US) + &link_down(2, 1, at + 100 * US, at + 110 * US);
    let (_, j) = job_json(&job(6, reaction, &faults), "overlap_restart_a");
    assert_eq!(j["failures"], 2);
    let lost = gpu_seconds(&j, "lost_gpu_seconds");
    let want = 4.0 * (at + 420 * US - base[1]) as f64 / 1e12;
    assert!(
        (lost - want).abs() < 1e-15,
        "lost {lost} GPU-s, want {want}"
    );
    let restart = gpu_seconds(&j, "lost_gpu_seconds_restart");
    assert!((restart - 4.0 * 420e-6).abs() < 1e-15, "{restart}");
    let rework = gpu_seconds(&j, "lost_gpu_seconds_rework");
    assert!((rework - 4.0 * (at - base[1]) as f64 / 1e12).abs() < 1e-15);
    // (b) A second failure after the first restart, before the next checkpoint: the work since
    // the checkpoint it throws away spans the first failure's loss. Lost: from the checkpoint
    // to the second resume (its repair is seen at at2 + 20 us, then 300 us), once.
    let at2 = at + 400 * US;
    let faults = link_down(1, 0, at, at + 10 * US) + &link_down(2, 1, at2, at2 + 10 * US);
    let (sim, j) = job_json(&job(6, reaction, &faults), "overlap_restart_b");
    assert_eq!(j["failures"], 2);
    let o = &sim.jobs()[0].outcomes;
    assert_eq!(o[1].resume_ps, Some(at2 + 320 * US));
    assert!(
        o[0].freeze_end_ps.unwrap() < at2,
        "the second failure comes after the restart"
    );
    let lost = gpu_seconds(&j, "lost_gpu_seconds");
    let want = 4.0 * (at2 + 320 * US - base[1]) as f64 / 1e12;
    assert!(
        (lost - want).abs() < 1e-15,
        "lost {lost} GPU-s, want {want}"
    );
}

#[test]
fn overlapping_elastic_failures_count_each_gpu_second_once() {
    // Host 1 fails twice during iteration 0's 1 ms compute (50..150 us and 300..400 us, two
    // episodes); it is excluded from 50 us until the rejoin after iteration 0 ends (the second
    // failure finds it out already: no re-formation). Lost: host 1 from 50 us to the rejoin's
    // end, once, and 3 survivors x the two re-formation freezes (110 us and the rejoin's 100).
    let reaction = "on_failure = \"elastic\"\ndetection = \"10us\"\nreformation_time = \"100us\"";
    let faults = link_down(1, 0, 50 * US, 150 * US) + &link_down(1, 0, 300 * US, 400 * US);
    let (sim, j) = job_json(
        &sized_job(4, "1ms", "1MiB", reaction, &faults),
        "overlap_elastic",
    );
    let job = &sim.jobs()[0];
    assert_eq!(j["failures"], 2);
    assert_eq!(j["reformations"], 2);
    let rejoined = job.iteration_end[0] + 100 * US;
    assert_eq!(job.exclusions().len(), 1);
    assert!(job
        .exclusions()
        .iter()
        .all(|x| x.until_ps == Some(rejoined)));
    let excluded = gpu_seconds(&j, "lost_gpu_seconds_excluded");
    let want_excluded = (rejoined - 50 * US) as f64 / 1e12;
    assert!(
        (excluded - want_excluded).abs() < 1e-15,
        "{excluded} vs {want_excluded}"
    );
    let reformation = gpu_seconds(&j, "lost_gpu_seconds_reformation");
    assert!((reformation - 3.0 * 210e-6).abs() < 1e-15, "{reformation}");
    let lost = gpu_seconds(&j, "lost_gpu_seconds");
    assert!(
        (lost - (want_excluded + 3.0 * 210e-6)).abs() < 1e-15,
        "{lost}"
    );
    // Host 1 has rows only for what it ran in the group: its first forward compute (cut at the
    // re-formation, 160 us) and iterations 1.. after the rejoin (3 ops each). Its forward
    // compute of iteration 1 became ready while it was out, before iteration 0 ended: it waited
    // for the rejoin and then took its full 1 ms.
    let rows: Vec<_> = sim.op_rows().into_iter().filter(|r| r.node == 1).collect();
    let fwd = rows.iter().find(|r| r.iteration == 1 && r.op == 1).unwrap();
    assert_eq!(
        (fwd.start_ps, fwd.end_ps),
        (Some(rejoined), Some(rejoined + 1000 * US))
    );
    assert!(rows
        .iter()
        .all(|r| r.start_ps.unwrap() < 50 * US || r.start_ps.unwrap() >= rejoined));
    assert_eq!(rows.iter().filter(|r| r.iteration == 0).count(), 1);
    assert_eq!(rows.iter().filter(|r| r.iteration > 0).count(), 3 * 3);
}

#[test]
fn excluded_ranks_do_not_compute_and_have_no_rows() {
    // Host 1 fails for good 50 us into iteration 0's 1 ms forward compute.
    let reaction = "on_failure = \"elastic\"\ndetection = \"10us\"\n\
                    reformation_time = \"100us\"\nrejoin = \"never\"";
    let fault = "[[fault]]\nlink = [\"host:1\", \"leaf:0\"]\nat = \"50us\"\n";
    let (sim, j) = job_json(
        &sized_job(4, "1ms", "1MiB", reaction, fault),
        "excluded_rows",
    );
    let rows = sim.op_rows();
    // Its compute stops when the groups re-form without it (50 + 10 + 100 us): one row, ending
    // then; nothing after it, neither compute nor the all-reduces it sits out.
    let mine: Vec<_> = rows.iter().filter(|r| r.node == 1).collect();
    assert_eq!(mine.len(), 1, "{mine:?}");
    assert_eq!(
        (mine[0].op, mine[0].iteration),
        (1, 0),
        "its forward compute"
    );
    assert_eq!(mine[0].end_ps, Some(160 * US));
    for it in 0..4 {
        let mut nodes: Vec<u32> = rows
            .iter()
            .filter(|r| r.iteration == it && r.op == 4)
            .map(|r| r.node)
            .collect();
        nodes.sort_unstable();
        assert_eq!(nodes, vec![0, 2, 3], "iteration {it}'s all-reduce");
    }
    assert_eq!(rows.len(), 1 + 4 * 3 * 3);
    assert_eq!(sim.jobs()[0].progress, 4);
    // The failure hits the first iteration and the rank never rejoins: no iteration is
    // untouched, so the failure-free rate comes from a shadow run of the same scenario without
    // the fault: its first two iterations, exactly those of the run without the fault.
    let clean = iteration_ends(&run(&sized_job(4, "1ms", "1MiB", reaction, "")));
    assert_eq!(j["relative_throughput_baseline"], "shadow");
    let baseline = gpu_seconds(&j, "baseline_iterations_per_second");
    assert_eq!(baseline, 2e12 / clean[1] as f64);
    let work = gpu_seconds(&j, "work_per_second");
    let rel = gpu_seconds(&j, "relative_throughput");
    assert!((rel - work / baseline).abs() < 1e-12, "{rel}");
    // The network-free comparison (1 / 1.05 ms) is its own key. Expected for the shrunk
    // iterations: 3/4 x the ideal iteration over the mean measured one, i.e. 1.05 ms + the ring
    // all-reduce over 3 ranks (ring_time, Patarasuk & Yuan) + the 110 us freeze spread over
    // the 4 iterations; the ring model is within 5 % of a ~6 % share, so within 1 %.
    let ideal = gpu_seconds(&j, "ideal_iterations_per_second");
    assert!((ideal - 1e12 / (1050.0 * US as f64)).abs() < 1e-6);
    let eff = gpu_seconds(&j, "network_efficiency");
    assert!((eff - work / ideal).abs() < 1e-12, "{eff}");
    let shrunk = gpu_seconds(&j, "network_efficiency_shrunk");
    let t_ideal = 1050.0 * US as f64;
    let mean = t_ideal + ring_time(3, 1 << 20) + 110.0 * US as f64 / 4.0;
    let want = 0.75 * t_ideal / mean;
    assert!((shrunk / want - 1.0).abs() < 0.01, "{shrunk} vs {want}");
    // Against the failure-free rate, the shrunk iterations keep 3/4 of the throughput less
    // the freeze (110 us over ~4.3 ms) and plus the shorter all-reduce: within 5 %.
    let rel_shrunk = gpu_seconds(&j, "relative_throughput_shrunk");
    assert!((rel_shrunk / 0.75 - 1.0).abs() < 0.05, "{rel_shrunk}");
}

// ---- elastic: who leaves when, who rejoins when ------------------------------------------------

#[test]
fn an_elastic_rank_leaves_when_it_is_itself_cut_off() {
    // Host 1 fails for good at 50 us; host 2 at 600 us, while host 1 is still out: one episode
    // (some rank is cut off from 50 us on). Host 2 stays in the group until it is cut off
    // itself: the groups re-form twice, each detection + re-formation (110 us) after a failure,
    // the first with 3 survivors waiting, the second with 2 (both during iteration 0's 1 ms
    // forward compute).
    let reaction = "on_failure = \"elastic\"\ndetection = \"10us\"\n\
                    reformation_time = \"100us\"\nrejoin = \"never\"";
    let faults = "[[fault]]\nlink = [\"host:1\", \"leaf:0\"]\nat = \"50us\"\n\
                  [[fault]]\nlink = [\"host:2\", \"leaf:1\"]\nat = \"600us\"\n";
    let (sim, j) = job_json(
        &sized_job(3, "1ms", "1MiB", reaction, faults),
        "elastic_later_cut",
    );
    let job = &sim.jobs()[0];
    assert_eq!(job.plan.episodes.len(), 1, "one episode");
    let x: Vec<(Vec<u32>, u64, Option<u64>)> = job
        .exclusions()
        .iter()
        .map(|x| (x.endpoints.clone(), x.from_ps, x.until_ps))
        .collect();
    assert_eq!(x, vec![(vec![1], 50 * US, None), (vec![2], 600 * US, None)]);
    let r: Vec<(u64, u64, u32, bool)> = job
        .reformations()
        .iter()
        .map(|r| (r.start_ps, r.end_ps, r.idle, r.rejoin))
        .collect();
    assert_eq!(
        r,
        vec![
            (50 * US, 160 * US, 3, false),
            (600 * US, 710 * US, 2, false)
        ]
    );
    assert_eq!(job.group_sizes(), &[2, 2, 2]);
    // Host 2 computed until the groups re-formed without it (710 us): its forward compute's
    // row ends then, and it has no other.
    let mine: Vec<_> = sim.op_rows().into_iter().filter(|r| r.node == 2).collect();
    assert_eq!(mine.len(), 1, "{mine:?}");
    assert_eq!(mine[0].end_ps, Some(710 * US));
    // Lost GPU-time (exact): host 1 from 50 us and host 2 from 600 us to the job's end; ranks 0
    // and 3 during both re-formations, host 2 during the first.
    let end = job.iteration_end[2];
    let excluded = gpu_seconds(&j, "lost_gpu_seconds_excluded");
    let want = ((end - 50 * US) + (end - 600 * US)) as f64 / 1e12;
    assert!((excluded - want).abs() < 1e-15, "{excluded} vs {want}");
    let reformation = gpu_seconds(&j, "lost_gpu_seconds_reformation");
    assert!((reformation - 5.0 * 110e-6).abs() < 1e-15, "{reformation}");
    assert_eq!(j["failures"], 1);
}

#[test]
fn an_elastic_rank_cut_off_twice_rejoins_only_when_reachable_again() {
    // Host 1's link fails 50..150 us and again 300..2500 us (two episodes; routing knows each
    // repair 10 us later). Host 1 leaves at 50 us; the second failure finds it out already (no
    // re-formation); it is reachable again at 2510 us only, so it rejoins at the first
    // iteration end after that, not at the first one after 160 us.
    let reaction = "on_failure = \"elastic\"\ndetection = \"10us\"\nreformation_time = \"100us\"";
    let faults = link_down(1, 0, 50 * US, 150 * US) + &link_down(1, 0, 300 * US, 2500 * US);
    let (sim, j) = job_json(
        &sized_job(5, "1ms", "1MiB", reaction, &faults),
        "elastic_twice",
    );
    let job = &sim.jobs()[0];
    assert_eq!(job.plan.episodes.len(), 2);
    assert_eq!(j["failures"], 2);
    let ends = iteration_ends(&sim);
    let k = ends
        .iter()
        .position(|&e| e >= 2510 * US)
        .expect("an end after");
    assert!(k >= 1, "an iteration ends between the repairs: {ends:?}");
    let r: Vec<(u64, u64, u32, bool)> = job
        .reformations()
        .iter()
        .map(|r| (r.start_ps, r.end_ps, r.idle, r.rejoin))
        .collect();
    assert_eq!(
        r,
        vec![
            (50 * US, 160 * US, 3, false),
            (ends[k], ends[k] + 100 * US, 3, true)
        ]
    );
    assert_eq!(job.exclusions().len(), 1);
    assert_eq!(job.exclusions()[0].until_ps, Some(ends[k] + 100 * US));
    let groups: Vec<u32> = (0..5).map(|i| if i <= k { 3 } else { 4 }).collect();
    assert_eq!(job.group_sizes(), &groups[..]);
    let excluded = gpu_seconds(&j, "lost_gpu_seconds_excluded");
    let want = (ends[k] + 100 * US - 50 * US) as f64 / 1e12;
    assert!((excluded - want).abs() < 1e-15, "{excluded} vs {want}");
}

// ---- relative throughput: against the failure-free rate ----------------------------------------

/// Per iteration of a run: its period, from the previous iteration's end (or 0, the job's
/// start) to its own end.
fn periods(ends: &[u64]) -> Vec<u64> {
    let mut prev = 0;
    ends.iter()
        .map(|&e| {
            let p = e - prev;
            prev = e;
            p
        })
        .collect()
}

#[test]
fn a_failure_free_job_scores_relative_throughput_one() {
    for reaction in [
        "on_failure = \"stall\"",
        "on_failure = \"restart\"\nrestart_time = \"10us\"\ncheckpoint_interval = 2",
        "on_failure = \"elastic\"",
    ] {
        let (sim, j) = job_json(&job(4, reaction, ""), "failure_free");
        assert_eq!(j["relative_throughput"], 1.0, "{reaction}: {j}");
        assert_eq!(j["relative_throughput_baseline"], "measured");
        // The network-free comparison is its own key: below 1 (the all-reduce costs time).
        let ends = iteration_ends(&sim);
        let ips = 4e12 / ends[3] as f64;
        assert!((gpu_seconds(&j, "baseline_iterations_per_second") / ips - 1.0).abs() < 1e-12);
        let eff = gpu_seconds(&j, "network_efficiency");
        let want = ips / gpu_seconds(&j, "ideal_iterations_per_second");
        assert!(
            (eff / want - 1.0).abs() < 1e-12 && eff < 1.0,
            "{eff} vs {want}"
        );
    }
}

#[test]
fn a_stalled_job_scores_the_analytic_throughput_ratio() {
    // Host 1 down 120..420 us, during iteration 0's... (its second iteration's) compute: the
    // job stalls from the failure to 20 us after routing sees the repair (430 us): D = 330 us,
    // and every later iteration ends exactly D later (a_stall_during_compute...). Achieved
    // N / (S + D) over the failure-free rate: 1 / the mean period of the untouched iterations
    // (their periods are the failure-free run's, to the picosecond). Analytic: the ratio is
    // N T / (N T + D) with T the failure-free period, within 0.5 % (the clean periods differ
    // from their mean by less).
    let n = 6usize;
    let clean = run(&job(n as u32, "", ""));
    let base = iteration_ends(&clean);
    let p = periods(&base);
    let at = base[0] + 20 * US; // during iteration 1's forward compute
    let faults = link_down(1, 0, at, at + 300 * US);
    let (sim, j) = job_json(
        &job(
            n as u32,
            "on_failure = \"stall\"\ndetection = \"20us\"",
            &faults,
        ),
        "stall_ratio",
    );
    let ends = iteration_ends(&sim);
    let d = 330 * US;
    assert_eq!(ends[1] - base[1], d, "the stall costs D exactly");
    assert_eq!(ends[n - 1] - base[n - 1], d);
    assert_eq!(j["relative_throughput_baseline"], "measured");
    // Iteration 1's period holds the stall; the others are untouched.
    let untouched: Vec<u64> = (0..n).filter(|&i| i != 1).map(|i| p[i]).collect();
    let baseline = untouched.len() as f64 * 1e12 / untouched.iter().sum::<u64>() as f64;
    let achieved = n as f64 * 1e12 / (base[n - 1] + d) as f64;
    let rel = gpu_seconds(&j, "relative_throughput");
    assert!(
        (rel / (achieved / baseline) - 1.0).abs() < 1e-12,
        "{rel} vs {}",
        achieved / baseline
    );
    let t = base[n - 1] as f64 / n as f64;
    let analytic = n as f64 * t / (n as f64 * t + d as f64);
    assert!((rel / analytic - 1.0).abs() < 0.005, "{rel} vs {analytic}");
    assert!(rel < 0.95, "the stall shows: {rel}");
}

/// Run `text` to its end, the shadow allowed alongside (if this machine has a spare core: false
/// if not); whether a shadow ran alongside at some point and still ran at the end, and the
/// job summaries.
fn with_shadow_alongside(text: &str) -> Option<(bool, bool, serde_json::Value)> {
    let s = spec(text);
    let mut sim = fabricemu_core::Simulation::build(&s).unwrap();
    let limits = fabricemu_core::budget::Limits::new(None, None);
    if !sim.shadow_alongside(&fabricemu_core::budget::estimate(&s), &limits) {
        return None;
    }
    let mut ran = false;
    // Slices shorter than a run: the shadow starts (or stops) between them.
    while sim.step(2_000) == fabricemu_core::StepOutcome::Running {
        ran |= sim.shadow_running();
    }
    let at_end = sim.shadow_running();
    Some((
        ran,
        at_end,
        serde_json::to_value(sim.job_summaries(&[])).unwrap(),
    ))
}

#[test]
fn a_shadow_run_alongside_gives_the_same_baseline_and_stops_where_not_needed() {
    // A rank fails in iteration 0 for good: every iteration is touched, the baseline is the
    // shadow's. Alongside, the shadow starts once the failure touches the job, and its figures
    // are those of the shadow run after the run.
    let reaction = "on_failure = \"elastic\"\ndetection = \"10us\"\n\
                    reformation_time = \"100us\"\nrejoin = \"never\"";
    let fault = "[[fault]]\nlink = [\"host:1\", \"leaf:0\"]\nat = \"50us\"\n";
    let text = sized_job(4, "1ms", "1MiB", reaction, fault);
    let mut after = run(&text);
    let after = serde_json::to_value(after.job_summaries(&[])).unwrap();
    assert_eq!(after[0]["relative_throughput_baseline"], "shadow");
    let Some((ran, _, alongside)) = with_shadow_alongside(&text) else {
        eprintln!("one core: no shadow alongside");
        return;
    };
    assert!(ran, "the shadow ran alongside");
    assert_eq!(alongside, after);
    // A link down 50..150 us in iteration 0 of 3 (stall): the shadow starts at the failure,
    // and stops once an iteration ends untouched; the baseline is measured.
    let faults = link_down(1, 0, 50 * US, 150 * US);
    let text = job(3, "on_failure = \"stall\"\ndetection = \"20us\"", &faults);
    let mut after = run(&text);
    let after = serde_json::to_value(after.job_summaries(&[])).unwrap();
    assert_eq!(after[0]["relative_throughput_baseline"], "measured");
    let (ran, at_end, alongside) = with_shadow_alongside(&text).expect("a spare core, as above");
    assert!(ran, "the shadow started at the failure");
    assert!(!at_end, "and stopped when an iteration ended untouched");
    assert_eq!(alongside, after);
}
