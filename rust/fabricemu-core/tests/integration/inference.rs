//! `kind = "inference"` end to end: serving steps run on a fabric through the step graph engine,
//! alone and with background incast sharing it.
//!
//! Validation: the engine runs the graph exactly (each op starts when its last dependency ended
//! and, for a step that admits requests, not before the last of them arrived): the network-free
//! schedule given each communication op's measured duration reproduces every start and end to
//! the picosecond. Background incast onto a rank of the model lengthens the tail of the step
//! times (P99) while an idle fabric keeps them at their compute plus all-reduce time.

use fabricemu_core::config::WorkloadSpec;
use fabricemu_core::workload::inference::generate;

use crate::common;
use common::{run, spec};

fn scenario(workloads: &str) -> String {
    format!(
        r#"
        seed = 3
        [topology]
        kind = "leaf_spine"
        leaves = 2
        spines = 2
        hosts_per_leaf = 8
        link_rate = "100Gbps"
        link_delay = "500ns"
        [[workload]]
        kind = "inference"
        tp = 4
        pp = 2
        layers = 4
        hidden = 1024
        token_time = "100ns"
        rate = 20000.0
        requests = 12
        prompt_tokens = 64
        decode_steps = 8
        max_batch = 4
        {workloads}
    "#
    )
}

/// Per op (start, end) from the engine, and per step its time.
fn run_steps(text: &str) -> (Vec<(u64, u64)>, Vec<u64>) {
    let sim = run(text);
    let plan = sim.workload_plan();
    let w = sim.world();
    let times: Vec<(u64, u64)> = plan
        .ops
        .iter()
        .filter(|o| o.workload == 0)
        .map(|o| {
            (
                w.barrier_released(o.ready).unwrap(),
                w.barrier_released(o.done).unwrap(),
            )
        })
        .collect();
    let steps = plan.ops.iter().map(|o| o.iteration).max().unwrap() as usize + 1;
    let mut span = vec![(u64::MAX, 0u64); steps];
    for (o, t) in plan.ops.iter().filter(|o| o.workload == 0).zip(&times) {
        let s = &mut span[o.iteration as usize];
        s.0 = s.0.min(t.0);
        s.1 = s.1.max(t.1);
    }
    (times, span.iter().map(|s| s.1 - s.0).collect())
}

fn percentile(v: &[u64], q: f64) -> u64 {
    let mut v = v.to_vec();
    v.sort_unstable();
    v[((v.len() - 1) as f64 * q).round() as usize]
}

#[test]
fn the_engine_runs_the_serving_steps_exactly() {
    let text = scenario("");
    let s = spec(&text);
    let WorkloadSpec::Inference(i) = &s.workloads[0].spec else {
        panic!("not inference")
    };
    let (graph, release) = generate(i, 0, s.seed).unwrap();
    assert!(!release.is_empty());
    let (times, steps) = run_steps(&text);
    assert_eq!(times.len(), graph.ops.len());
    assert_eq!(steps.len() as u32, graph.iterations);
    let sched = graph
        .schedule_released(|k, _| times[k as usize].1 - times[k as usize].0, &release)
        .unwrap();
    for (k, &(a, b)) in times.iter().enumerate() {
        assert_eq!((sched.start_ps[k], sched.end_ps[k]), (a, b), "op {k}");
    }
    // Steps admitting requests start no earlier than their arrival.
    for &(k, at) in &release {
        assert!(times[k as usize].0 >= at);
    }
}

#[test]
fn background_incast_lengthens_the_step_tail() {
    let (_, quiet) = run_steps(&scenario(""));
    // 8 hosts of the other leaf send 2 MB each, repeatedly, to rank 0's host.
    let (_, loaded) = run_steps(&scenario(
        r#"
        [[workload]]
        kind = "incast"
        receiver = 0
        senders = [8, 9, 10, 11, 12, 13, 14, 15]
        size = "2MB"
        rounds = 20
        "#,
    ));
    assert_eq!(quiet.len(), loaded.len());
    let (q50, q99) = (percentile(&quiet, 0.5), percentile(&quiet, 0.99));
    let (l50, l99) = (percentile(&loaded, 0.5), percentile(&loaded, 0.99));
    assert!(
        l99 as f64 > 1.5 * q99 as f64,
        "P99 {q99} -> {l99} (P50 {q50} -> {l50})"
    );
    assert!(l50 >= q50);
}
