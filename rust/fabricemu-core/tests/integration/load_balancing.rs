//! Load balancing on Clos fabrics: ECMP hash collisions against balls-into-bins and max-min
//! expectations, spraying, flowlets, adaptive routing, and link failures.
//!
//! Sources: shared/reference/ecmp_collision_expectations.csv (balls-into-bins closed form and
//! Monte-Carlo max-min throughput of permutation traffic), shared/reference/README.md section 5.

use fabricemu_core::ids::PortId;
use fabricemu_core::scenario::parse_toml;
use fabricemu_core::Simulation;

use crate::common;
use common::run;

fn topology(kind: &str) -> &'static str {
    match kind {
        // 1:1 leaf-spine, L = S = hosts per leaf = 8 (64 hosts).
        "leaf_spine" => "kind = \"leaf_spine\"\nleaves = 8\nspines = 8\nhosts_per_leaf = 8",
        // k = 8 fat tree (128 hosts).
        _ => "kind = \"fat_tree\"\nk = 8",
    }
}

/// Permutation of 2 MB flows, no congestion control, deep buffers (nothing dropped).
fn permutation(kind: &str, routing: &str, seed: u64) -> String {
    format!(
        r#"
        seed = {seed}
        [topology]
        {topo}
        link_rate = "100Gbps"
        link_delay = "500ns"
        [switch]
        buffer = "256MiB"
        [routing]
        {routing}
        [[workload]]
        kind = "permutation"
        size = "2MB"
        "#,
        topo = topology(kind)
    )
}

/// Mean over flows of (ideal FCT / FCT): each flow's throughput as a fraction of line rate.
fn mean_normalised_throughput(sim: &Simulation) -> f64 {
    let rows = sim.flow_rows();
    rows.iter()
        .map(|r| r.ideal_fct_ps as f64 / (r.finish_ps.unwrap() - r.start_ps) as f64)
        .sum::<f64>()
        / rows.len() as f64
}

const SEEDS: [u64; 6] = [1, 2, 3, 4, 5, 6];

fn mean_over_seeds(kind: &str, routing: &str) -> f64 {
    SEEDS
        .iter()
        .map(|&s| mean_normalised_throughput(&run(&permutation(kind, routing, s))))
        .sum::<f64>()
        / SEEDS.len() as f64
}

/// ECMP collisions: mean normalised flow throughput of a permutation within 10 % of the max-min
/// Monte-Carlo expectation (leaf-spine L = S = 8: 0.6167; k = 8 fat tree: 0.4922), over 6 seeds.
#[test]
fn ecmp_collisions_match_the_max_min_expectation() {
    for (kind, expected) in [("leaf_spine", 0.6167), ("fat_tree", 0.4922)] {
        let got = mean_over_seeds(kind, "load_balancing = \"ecmp\"");
        let err = (got - expected) / expected;
        assert!(
            err.abs() < 0.10,
            "{kind}: {got:.4} vs {expected} ({:+.1} %)",
            err * 100.0
        );
    }
}

/// The fraction of a leaf's uplinks that carry at least one flow is balls-into-bins: m flows
/// hashed uniformly onto n uplinks use n (1 - (1 - 1/n)^m) of them on average. Summed over leaves
/// and seeds, the count of used uplinks is within 5 % of that expectation.
#[test]
fn used_uplinks_follow_balls_into_bins() {
    let (mut used, mut expected) = (0.0, 0.0);
    for seed in 1..=20u64 {
        let sim = run(&permutation(
            "leaf_spine",
            "load_balancing = \"ecmp\"",
            seed,
        ));
        let w = sim.world();
        let n = 8.0;
        // Per leaf: the uplinks its cross-leaf flows hash to (the second port of their path).
        let mut per_leaf: Vec<(u32, std::collections::BTreeSet<PortId>)> =
            vec![(0, Default::default()); 8];
        for fid in w.flows.ids() {
            let f = w.flow_record(fid); // the flow retired when done: its planned record
            if f.src.get() / 8 == f.dst.get() / 8 {
                continue; // stays under its leaf
            }
            let path = w.flow_path_ports(fid);
            let leaf = &mut per_leaf[f.src.index() / 8];
            leaf.0 += 1;
            leaf.1.insert(path[1]);
        }
        for (m, ports) in per_leaf {
            used += ports.len() as f64;
            expected += n * (1.0 - (1.0f64 - 1.0 / n).powi(m as i32));
        }
    }
    let err = (used - expected) / expected;
    assert!(
        err.abs() < 0.05,
        "used {used} uplinks, balls-into-bins expects {expected:.1} ({:+.1} %)",
        err * 100.0
    );
}

/// Spraying the same traffic reaches at least 90 % of line rate per flow on average; flowlet
/// switching falls between ECMP and spraying, and adaptive routing beats ECMP on the same seeds.
#[test]
fn spraying_flowlets_and_adaptive_rank_as_expected() {
    for kind in ["leaf_spine", "fat_tree"] {
        let ecmp = mean_over_seeds(kind, "load_balancing = \"ecmp\"");
        let spray = mean_over_seeds(kind, "load_balancing = \"spray\"");
        let flowlet = mean_over_seeds(kind, "load_balancing = \"flowlet\"\nflowlet_gap = \"2us\"");
        let adaptive = mean_over_seeds(kind, "load_balancing = \"adaptive\"");
        eprintln!(
            "{kind}: ecmp {ecmp:.3} flowlet {flowlet:.3} adaptive {adaptive:.3} spray {spray:.3}"
        );
        assert!(spray >= 0.90, "{kind}: spraying {spray:.3}");
        assert!(
            flowlet >= ecmp - 0.01 && flowlet <= spray + 0.01,
            "{kind}: flowlet {flowlet:.3}"
        );
        assert!(
            adaptive > ecmp + 0.01,
            "{kind}: adaptive {adaptive:.3} vs ECMP {ecmp:.3}"
        );
        assert!(
            adaptive <= spray + 0.05,
            "{kind}: adaptive {adaptive:.3} vs spray {spray:.3}"
        );
    }
}

/// Spraying reorders packets; the selective receiver tracks it without treating it as loss.
#[test]
fn spraying_reorders_without_retransmitting() {
    let sim = run(&permutation(
        "leaf_spine",
        "load_balancing = \"spray\"\nspray = \"random\"",
        1,
    ));
    let rows = sim.flow_rows();
    let ooo: u64 = rows.iter().map(|r| r.out_of_order_packets).sum();
    let retx: u64 = rows.iter().map(|r| r.retransmits).sum();
    let sent: u64 = rows.iter().map(|r| r.packets_sent).sum();
    assert!(ooo > 0, "random spraying reorders");
    assert!(rows.iter().any(|r| r.max_reorder_distance > 1));
    assert!(
        (retx as f64) < 0.01 * sent as f64,
        "{retx} retransmissions of {sent} packets"
    );
}

/// One leaf-spine link fails 20 us in (detected 10 us later) and never comes back. Every flow
/// still completes, with ECMP and with spraying; the aggregate throughput drops by no more than
/// the capacity lost (1 of leaf 0's 4 uplinks: 25 %) plus what the detection window lost.
#[test]
fn a_failed_spine_link_costs_no_more_than_its_capacity() {
    let scenario = |routing: &str, fault: bool| {
        format!(
            r#"
            [topology]
            kind = "leaf_spine"
            leaves = 4
            spines = 4
            hosts_per_leaf = 4
            [switch]
            buffer = "64MiB"
            [routing]
            {routing}
            [transport]
            rto = "100us"
            [[workload]]
            kind = "permutation"
            size = "4MB"
            {fault}
            "#,
            fault = if fault {
                "[[fault]]\nlink = [\"leaf:0\", \"spine:0\"]\nat = \"20us\"\ndetection = \"10us\""
            } else {
                ""
            }
        )
    };
    for routing in ["load_balancing = \"ecmp\"", "load_balancing = \"spray\""] {
        let ok = run(&scenario(routing, false));
        let failed = run(&scenario(routing, true));
        let s = failed.stats();
        assert_eq!(s.flows_finished, 16, "{routing}");
        let makespan = |sim: &Simulation| {
            sim.flow_rows()
                .iter()
                .map(|r| r.finish_ps.unwrap())
                .max()
                .unwrap()
        };
        let ratio = makespan(&ok) as f64 / makespan(&failed) as f64;
        assert!(
            ratio >= 0.70,
            "{routing}: throughput fell to {ratio:.3} of the healthy fabric's"
        );
        if routing.contains("spray") {
            assert!(
                s.link_fault_drops > 0,
                "sprayed packets were on the failed link"
            );
        }
    }
}

/// A degraded link slows what crosses it and recovers after.
#[test]
fn a_degraded_link_slows_its_flow() {
    let base = r#"
        [topology]
        kind = "leaf_spine"
        leaves = 2
        spines = 1
        hosts_per_leaf = 1
        [[workload]]
        kind = "flows"
        flows = [{ src = 0, dst = 1, size = "4MB" }]
    "#;
    let healthy = run(base);
    let slow = run(&format!("{base}\n[[fault]]\nlink = [\"host:0\", \"leaf:0\"]\nkind = \"degrade\"\nrate = \"50Gbps\"\nat = \"0us\""));
    let fct = |s: &Simulation| s.flow_rows()[0].finish_ps.unwrap();
    let ratio = fct(&slow) as f64 / fct(&healthy) as f64;
    assert!(
        (1.9..2.1).contains(&ratio),
        "half the rate, twice the time: {ratio:.3}"
    );
}

#[test]
fn fault_errors_name_the_key() {
    let bad = |fault: &str| {
        let toml = format!("[topology]\nkind = \"leaf_spine\"\nleaves = 2\nspines = 2\nhosts_per_leaf = 2\n[[workload]]\nkind = \"permutation\"\nsize = \"1MB\"\n[[fault]]\n{fault}");
        let (_, spec) = parse_toml(&toml, "t.toml").unwrap();
        Simulation::build(&spec).err().unwrap()
    };
    let e = bad("link = [\"leaf:0\", \"spine:9\"]\nat = \"1us\"");
    assert_eq!(e.path, "fault.0.link.1");
    assert!(e.message.contains("spine:0..=1"), "{e}");
    let e = bad("link = [\"leaf:0\", \"leaf:1\"]\nat = \"1us\"");
    assert_eq!(e.path, "fault.0.link");
    let e = bad("link = [\"router:0\", \"leaf:1\"]\nat = \"1us\"");
    assert!(e.message.contains("leaf, spine"), "{e}");
}

/// Issue 11 item 15: a sprayed lossless fabric (PFC, nothing dropped) reorders packets but loses
/// none, so the receivers' adaptive reorder threshold must keep spurious retransmissions to
/// almost nothing: it was ~1,000 of ~64,000 packets on this k=8 permutation (1.7 %, up to 16 per
/// flow), when the threshold adapted only after a spurious retransmission and only in packets. Now
/// every reordered hole teaches the receiver (in packets and in time), so a flow retransmits
/// at most once or twice, early, before it has seen its paths' reordering.
#[test]
fn a_sprayed_lossless_fabric_retransmits_almost_nothing() {
    for seed in [1, 2] {
        let sim = run(&format!(
            r#"
            seed = {seed}
            [topology]
            kind = "fat_tree"
            k = 8
            [switch]
            pfc = {{ enabled = true }}
            [routing]
            load_balancing = "spray"
            [[workload]]
            kind = "permutation"
            size = "2MB"
            "#
        ));
        let st = sim.stats();
        let rows = sim.flow_rows();
        let flows_retx = rows.iter().filter(|r| r.retransmits > 0).count();
        let most = rows.iter().map(|r| r.retransmits).max().unwrap_or(0);
        assert_eq!(st.flows_finished, st.flows_total, "{st:?}");
        assert_eq!(st.packets_dropped, 0, "lossless: {st:?}");
        assert!(st.out_of_order_packets > 1000, "spraying reorders: {st:?}");
        assert!(
            st.retransmitted_packets * 1000 <= 3 * st.data_packets_sent && most <= 4,
            "seed {seed}: {} retransmissions of {} packets, none lost ({} timeouts); \
             {flows_retx} flows retransmitted, one at most {most} times",
            st.retransmitted_packets,
            st.data_packets_sent,
            st.timeouts
        );
    }
}
