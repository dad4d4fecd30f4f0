//! `kind = "training"` end to end: the generated step graph run on a fabric through the graph
//! engine (plan_graph). Each op's start and end are its ready and done barriers' release times.
//!
//! Validation sources and tolerances:
//! - The engine runs the graph exactly: every op starts when its last dependency ended, compute
//!   takes its duration; the network-free schedule (`Graph::schedule_with`) given each
//!   communication op's measured duration reproduces every start and end to the picosecond.
//! - Pipeline bubble (GPipe, Huang et al. 2019; 1F1B, Narayanan et al. 2021): with communication
//!   small next to compute, the iteration takes (m+p-1)(f+b) and the bubble is (p-1)/(m+p-1) of
//!   it, within 2 % (the sends' latency is the difference).
//! - DP all-reduce overlap: buckets of one layer each reduce while the backward pass goes on;
//!   exposed communication is the last bucket's time when compute dominates (c <= b) and
//!   b + L*c - L*b otherwise (c the measured bucket time), within 5 %.

use fabricemu_core::config::WorkloadSpec;
use fabricemu_core::workload::graph::{Graph, OpPhase};
use fabricemu_core::workload::training::generate;
use fabricemu_core::Simulation;

use crate::common;
use common::{run, spec};

fn scenario(hosts_per_leaf: u32, leaves: u32, workload: &str) -> String {
    format!(
        r#"
        seed = 1
        [topology]
        kind = "leaf_spine"
        leaves = {leaves}
        spines = 2
        hosts_per_leaf = {hosts_per_leaf}
        link_rate = "100Gbps"
        link_delay = "500ns"
        [[workload]]
        kind = "training"
        {workload}
    "#
    )
}

/// The generated graph and, per op, the engine's (start, end).
fn run_graph(text: &str) -> (Graph, Vec<(u64, u64)>) {
    let s = spec(text);
    let WorkloadSpec::Training(t) = &s.workloads[0].spec else {
        panic!("not a training workload")
    };
    let graph = generate(t);
    let sim: Simulation = run(text);
    let plan = sim.workload_plan();
    assert_eq!(plan.ops.len(), graph.ops.len());
    let times = plan
        .ops
        .iter()
        .map(|o| {
            let w = sim.world();
            (
                w.barrier_released(o.ready).expect("op never started"),
                w.barrier_released(o.done).expect("op never ended"),
            )
        })
        .collect();
    (graph, times)
}

#[test]
fn the_engine_runs_the_generated_graph_exactly() {
    let (graph, times) = run_graph(&scenario(
        4,
        2,
        r#"dp = 2
        tp = 2
        pp = 2
        micro_batches = 3
        layers = 4
        hidden = 64
        seq_len = 32
        forward = "20us"
        iterations = 2
        optimizer = "5us""#,
    ));
    let s = graph
        .schedule_with(|i, _| times[i as usize].1 - times[i as usize].0)
        .unwrap();
    for (i, &(start, end)) in times.iter().enumerate() {
        assert_eq!(
            (s.start_ps[i], s.end_ps[i]),
            (start, end),
            "op {i}: {:?}",
            graph.ops[i]
        );
    }
    // Every kind of communication took time on the fabric.
    for phase in [
        OpPhase::TensorParallel,
        OpPhase::PipelineParallel,
        OpPhase::DataParallel,
    ] {
        let i = graph.ops.iter().position(|o| o.phase == phase).unwrap();
        assert!(times[i].1 > times[i].0, "{phase:?}");
    }
}

#[test]
fn pipeline_bubble_end_to_end() {
    for schedule in ["gpipe", "1f1b"] {
        for (p, m) in [(4u64, 4u64), (4, 8), (2, 6)] {
            let (graph, times) = run_graph(&scenario(
                4,
                1,
                &format!(
                    r#"pp = {p}
                    micro_batches = {m}
                    layers = {p}
                    hidden = 16
                    seq_len = 16
                    forward = "100us"
                    schedule = "{schedule}""#
                ),
            ));
            let start = times.iter().map(|t| t.0).min().unwrap();
            let end = times.iter().map(|t| t.1).max().unwrap();
            let t = (end - start) as f64;
            let fb = 300e6; // ps
            let want = (m + p - 1) as f64 * fb;
            assert!(
                (t / want - 1.0).abs() < 0.02,
                "{schedule} p={p} m={m}: {t} vs {want}"
            );
            let bubble = 1.0 - m as f64 * fb / t;
            let want = (p - 1) as f64 / (m + p - 1) as f64;
            assert!(
                (bubble - want).abs() < 0.02,
                "{schedule} p={p} m={m}: bubble {bubble} vs {want}"
            );
            assert_eq!(graph.ranks.len() as u64, p);
        }
    }
}

#[test]
fn dp_all_reduce_hidden_or_exposed_by_the_analytic_difference() {
    let layers = 6u64;
    // 12 h^2 x 2 B = 1.5 MiB per layer: one bucket each.
    for (fwd_us, dominated) in [(500u64, true), (20, false)] {
        let (graph, times) = run_graph(&scenario(
            4,
            1,
            &format!(
                r#"dp = 4
                layers = {layers}
                hidden = 256
                seq_len = 16
                forward = "{fwd_us}us"
                dp_bucket = "1536KiB""#
            ),
        ));
        let buckets: Vec<usize> = (0..graph.ops.len())
            .filter(|&i| graph.ops[i].phase == OpPhase::DataParallel)
            .collect();
        // Each DP group's buckets (4 ranks, one group; one per layer).
        assert_eq!(buckets.len() as u64, layers);
        let c: Vec<f64> = buckets
            .iter()
            .map(|&i| (times[i].1 - times[i].0) as f64)
            .collect();
        let mean_c = c.iter().sum::<f64>() / c.len() as f64;
        let b = 2.0 * fwd_us as f64 * 1e6;
        let compute = layers as f64 * 3.0 * fwd_us as f64 * 1e6;
        let start = times.iter().map(|t| t.0).min().unwrap();
        let end = times.iter().map(|t| t.1).max().unwrap();
        let exposed = (end - start) as f64 - compute;
        let want = if dominated {
            assert!(mean_c < b);
            *c.last().unwrap()
        } else {
            assert!(mean_c > b);
            b + layers as f64 * (mean_c - b)
        };
        assert!(
            (exposed / want - 1.0).abs() < 0.05,
            "forward {fwd_us}us: exposed {exposed} vs {want} (c = {mean_c})"
        );
        if dominated {
            // Fully hidden but for the last bucket: a few percent of the iteration.
            assert!(exposed / (compute + exposed) < 0.05);
        }
    }
}

/// `noise` reaches the generated graph: a rank computing 1.5x slower lengthens a data-parallel
/// step (synchronised by its gradient all-reduce) by half its compute, exactly.
#[test]
fn a_slow_rank_lengthens_the_step_by_its_extra_compute() {
    let base = r#"dp = 2
        layers = 2
        hidden = 64
        seq_len = 16
        forward = "100us""#;
    let span = |times: &[(u64, u64)]| {
        times.iter().map(|t| t.1).max().unwrap() - times.iter().map(|t| t.0).min().unwrap()
    };
    let (_, quiet) = run_graph(&scenario(4, 1, base));
    let (_, slow) = run_graph(&scenario(
        4,
        1,
        &format!("{base}\n        noise = {{ slow_ranks = {{ \"1\" = 1.5 }} }}"),
    ));
    // Compute per rank: 2 layers x (100 + 200) us; half of it more on rank 1.
    assert_eq!(span(&slow) - span(&quiet), 300_000_000);
}
