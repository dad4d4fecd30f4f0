//! In-network all-reduce (switch reduction engines) end to end.
//!
//! Validation source and tolerance (issue 16): on an idle non-blocking fabric an in-network
//! all-reduce of S bytes sends S per rank up and receives S down, so it takes S/B plus the tree's
//! round trip (`in_network::ideal_time`: 2 x depth store-and-forward hops); a ring all-reduce
//! sends 2(n-1)/n x S per rank, 2(n-1)/n x S/B plus 2(n-1) step latencies. Both within 5 %, so
//! in-network reaches ~2(n-1)/n x ring's algorithm bandwidth. With one reduction context per
//! switch, concurrent communicators beyond the first fall back to the ring (counted in run.json).

use crate::common;
use common::run;
use fabricemu_core::workload::collective::in_network::ideal_time;

/// k = 4 fat tree (16 hosts, non-blocking), 100 Gb/s links of 500 ns; switches reduce.
fn fat_tree(workload: &str, reduction: &str) -> String {
    format!(
        r#"
        seed = 1
        [topology]
        kind = "fat_tree"
        k = 4
        link_rate = "100Gbps"
        link_delay = "500ns"
        [switch.reduction]
        {reduction}
        [[workload]]
        kind = "collective"
        op = "all_reduce"
        {workload}
    "#
    )
}

fn duration(sim: &fabricemu_core::engine::Simulation, row: usize) -> f64 {
    let rows = sim.collective_rows();
    let r = &rows[row];
    assert_eq!(r.flows_finished, r.flows, "{r:?}");
    r.duration_ps().expect("finished") as f64
}

#[test]
fn in_network_matches_its_analytic_time_and_doubles_ring_bandwidth() {
    let size = 8u64 << 20;
    let sim = run(&fat_tree(
        r#"algorithm = "in_network"
        size = "8MiB""#,
        "",
    ));
    let rows = sim.collective_rows();
    assert_eq!(rows[0].algorithm, "in_network");
    // One flow per rank, each carrying S.
    assert_eq!(rows[0].flows, 16);
    let t_inr = duration(&sim, 0);
    // 16 hosts in 4 pods: the tree is edge -> agg -> core (depth 3); a hop is 500 ns of
    // propagation plus the switch latency, and a packet's serialisation.
    let latency = sim.scenario().switch.latency_ps;
    let ideal = ideal_time(size, 4096, 62, 100_000_000_000, 3, 500_000 + latency) as f64;
    let err = (t_inr - ideal).abs() / ideal;
    assert!(
        err < 0.05,
        "in-network {t_inr} ps vs analytic {ideal} ps ({err:.3})"
    );
    let stats = sim.stats();
    assert_eq!(stats.in_network_calls, Some(1));
    assert_eq!(stats.in_network_fallbacks, Some(0));
    // Each of the 13 tree switches (8 edges of 2 hosts, one agg per pod, 1 core) holds a context.
    assert_eq!(stats.reduction_contexts, Some(13));
    let packets = size.div_ceil(4096);
    // Per sequence, every switch absorbs one operand per child (16 hosts into the edges, 8 edges
    // into the aggs, 4 aggs into the core) and sends one combined packet.
    assert_eq!(stats.reduction_operands, Some(packets * (16 + 8 + 4)));
    assert_eq!(stats.reduction_combined, Some(packets * 13));
    assert_eq!(stats.reduction_duplicates, Some(0));
    assert_eq!(stats.reduction_repairs, Some(0));
    // Partial aggregates stay within one context's window (2 MiB default buffer).
    assert!(stats.reduction_buffer_peak_bytes.unwrap() <= 2 << 20);

    let ring = run(&fat_tree(
        r#"algorithm = "ring"
        size = "8MiB""#,
        "",
    ));
    let t_ring = duration(&ring, 0);
    let n = 16.0;
    let steps = 2.0 * (n - 1.0);
    // Longest path host-edge-agg-core-agg-edge-host: 6 links of 500 ns, 5 store-and-forward hops.
    let step_latency = 6.0 * (500_000.0 + latency as f64) + 5.0 * 4158.0 * 80.0;
    let wire = size as f64 + packets as f64 * 62.0;
    let ring_ideal = 2.0 * (n - 1.0) / n * wire * 80.0 + steps * step_latency;
    let err = (t_ring - ring_ideal).abs() / ring_ideal;
    assert!(
        err < 0.05,
        "ring {t_ring} ps vs analytic {ring_ideal} ps ({err:.3})"
    );
    let ratio = t_ring / t_inr;
    assert!(
        ratio > 1.7 && ratio < 2.0,
        "algorithm bandwidth in-network / ring = {ratio:.3}"
    );
}

#[test]
fn without_free_contexts_communicators_fall_back_to_the_ring() {
    // Four groups of four hosts, one per pod... no: across pods (strided), so every tree needs a
    // core switch; 4 cores with one context each, but the aggs are shared: agg j of each pod
    // serves the trees rooted at cores 2j and 2j+1, so only two trees fit.
    let text = fat_tree(
        r#"algorithm = "in_network"
        size = "1MiB"
        group_size = 4
        group_layout = "strided""#,
        "contexts = 1",
    );
    let sim = run(&text);
    let rows = sim.collective_rows();
    let algs: Vec<&str> = rows.iter().map(|r| r.algorithm).collect();
    let inr = algs.iter().filter(|&&a| a == "in_network").count();
    let fell = algs.iter().filter(|&&a| a == "ring").count();
    assert_eq!((inr, fell), (2, 2), "{algs:?}");
    let stats = sim.stats();
    assert_eq!(stats.in_network_fallbacks, Some(2));
    assert_eq!(stats.in_network_calls, Some(2));
    assert!(sim
        .warnings()
        .iter()
        .any(|w| w.contains("no free reduction context")));
    // The fallbacks take the ring's time, longer than the in-network calls'.
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r.flows_finished, r.flows, "{r:?}");
        let d = duration(&sim, i);
        let t_inr = rows
            .iter()
            .enumerate()
            .filter(|(_, r)| r.algorithm == "in_network")
            .map(|(j, _)| duration(&sim, j))
            .fold(0.0, f64::max);
        if r.algorithm == "ring" {
            assert!(d > 1.3 * t_inr, "ring {d} vs in-network {t_inr}");
        }
    }
    // With two contexts per switch every communicator gets a tree.
    let sim = run(&fat_tree(
        r#"algorithm = "in_network"
        size = "1MiB"
        group_size = 4
        group_layout = "strided""#,
        "contexts = 2",
    ));
    assert_eq!(sim.stats().in_network_fallbacks, Some(0));
    assert!(sim
        .collective_rows()
        .iter()
        .all(|r| r.algorithm == "in_network"));
}

#[test]
fn repeated_calls_share_the_tree_in_turn() {
    let sim = run(&fat_tree(
        r#"algorithm = "in_network"
        size = "256KiB"
        iterations = 3"#,
        "",
    ));
    let rows = sim.collective_rows();
    assert_eq!(rows.len(), 3);
    assert!(rows.iter().all(|r| r.flows_finished == r.flows));
    assert_eq!(sim.stats().in_network_calls, Some(3));
}

/// A leaf-spine (2 leaves of 4 hosts, one spine) with random loss on the tree's links: the
/// operands up leaf 0 -> spine, the results down spine -> leaf 1, and host 1's operands.
fn lossy(recovery: &str, p: f64) -> String {
    format!(
        r#"
        seed = 3
        [topology]
        kind = "leaf_spine"
        leaves = 2
        spines = 1
        hosts_per_leaf = 4
        link_rate = "100Gbps"
        link_delay = "500ns"
        [transport]
        rto = "20us"
        loss_recovery = "{recovery}"
        [switch.reduction]
        [[workload]]
        kind = "collective"
        op = "all_reduce"
        algorithm = "in_network"
        size = "2MiB"
        [[fault]]
        link = ["leaf:0", "spine:0"]
        direction = "a->b"
        kind = "loss"
        rate = {p}
        [[fault]]
        link = ["leaf:1", "spine:0"]
        direction = "b->a"
        kind = "loss"
        rate = {p}
        [[fault]]
        link = ["host:1", "leaf:0"]
        direction = "a->b"
        kind = "loss"
        rate = {p}
    "#
    )
}

#[test]
fn losses_are_recovered_and_every_rank_gets_the_whole_result() {
    let clean = run(&lossy("selective", 0.0));
    let t_clean = duration(&clean, 0);
    for recovery in ["selective", "go_back_n"] {
        let sim = run(&lossy(recovery, 0.01));
        let stats = sim.stats();
        assert!(stats.corrupted_drops > 0, "{recovery}: no loss happened");
        let rows = sim.collective_rows();
        assert_eq!(rows[0].algorithm, "in_network");
        let t = duration(&sim, 0);
        assert!(t > t_clean, "{recovery}: {t} vs {t_clean} without loss");
        // Every rank received all S bytes of the result (its flow finished: every packet
        // arrived), and retransmitted something (its own lost operands, or the gaps it saw).
        let flows = sim.flow_rows();
        assert_eq!(flows.len(), 8);
        for f in &flows {
            assert_eq!(f.size_bytes, 2 << 20);
            assert!(f.finish_ps.is_some(), "{recovery}: {f:?}");
        }
        assert!(stats.retransmitted_packets > 0);
        // Some retransmissions met sequences the switches had combined already: the root
        // answered them (a repair) or a switch dropped a copy it had counted.
        assert!(
            stats.reduction_repairs.unwrap() + stats.reduction_duplicates.unwrap() > 0,
            "{recovery}: {stats:?}"
        );
    }
}

#[test]
fn nvls_reduces_in_the_nvswitch_at_its_analytic_time() {
    let text = r#"
        seed = 1
        [topology]
        kind = "leaf_spine"
        leaves = 8
        hosts_per_leaf = 1
        spines = 1
        link_rate = "400Gbps"
        link_delay = "500ns"
        [cluster]
        gpus_per_server = 8
        cabling = "rail"
        scaleup = { kind = "nvswitch", gpus = 8, rate = "3600Gbps", latency = "250ns" }
        [switch.reduction]
        [[workload]]
        kind = "collective"
        op = "all_reduce"
        algorithm = "nvls"
        size = "16MiB"
    "#;
    let sim = run(text);
    let rows = sim.collective_rows();
    assert_eq!(rows[0].algorithm, "nvls");
    let t = duration(&sim, 0);
    let stats = sim.stats();
    assert_eq!(stats.reduction_contexts, Some(1)); // the NVSwitch alone
                                                   // Source: S/B at the NVLink rate plus one store-and-forward hop up and one down.
    let w = sim.world();
    let gpu = fabricemu_core::ids::NodeId::new(0);
    let up = w
        .fabric
        .ports_of(gpu)
        .find(|&p| w.fabric.role[w.fabric.peer_node[p]] == fabricemu_core::topology::Role::NvSwitch)
        .expect("a scale-up port");
    let nvswitch = w.fabric.peer_node[up];
    let hop = w.fabric.delay_ps[up] + w.fabric.switch_latency(nvswitch).unwrap_or(0);
    let ideal = ideal_time(16 << 20, 4096, 62, w.fabric.rate_bps[up], 1, hop) as f64;
    let err = (t - ideal).abs() / ideal;
    assert!(err < 0.05, "nvls {t} ps vs analytic {ideal} ps ({err:.3})");
    // Asking for NVLS across servers is an error naming the key.
    let e = fabricemu_core::engine::Simulation::build(&common::spec(
        &text
            .replace("hosts_per_leaf = 1", "hosts_per_leaf = 2")
            .replace(
                "size = \"16MiB\"",
                "size = \"16MiB\"\n        hosts = [0, 8]",
            ),
    ));
    let e = e.err().expect("nvls across two domains");
    assert!(e.to_string().contains("switch.reduction"), "{e}");
}

/// The shipped training scenario: every data-parallel bucket all-reduce runs in the rail leaves,
/// none falls back, and the iteration is shorter than with the ring (gpt_training.toml's).
#[test]
fn training_step_runs_its_dp_all_reduce_in_the_network() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let text = std::fs::read_to_string(root.join("training_in_network.toml")).unwrap();
    let sim = run(&text);
    let stats = sim.stats();
    assert_eq!(stats.in_network_fallbacks, Some(0));
    let ops = sim.op_rows();
    let dp: Vec<_> = ops.iter().filter(|o| o.phase == "dp").collect();
    assert!(!dp.is_empty());
    assert!(
        dp.iter().all(|o| o.algorithm == Some("in_network")),
        "{:?}",
        dp[0]
    );
    assert!(ops.iter().all(|o| o.end_ps.is_some()));
    assert_eq!(stats.in_network_calls.unwrap() as usize, dp.len() / 8); // 8 ranks per DP op
    let end = |s: &fabricemu_core::engine::Simulation| {
        s.op_rows().iter().filter_map(|o| o.end_ps).max().unwrap()
    };
    let ring = run(&text.replace("algorithms = { dp = \"in_network\" }", ""));
    assert_eq!(ring.stats().in_network_calls, None);
    assert!(
        end(&sim) < end(&ring),
        "{} vs ring {}",
        end(&sim),
        end(&ring)
    );
}

/// The sum of every call's duration (ps).
fn calls_time(sim: &fabricemu_core::engine::Simulation) -> f64 {
    (0..sim.collective_rows().len())
        .map(|i| duration(sim, i))
        .sum()
}

/// Live choice: on an idle fat tree with reduction engines, the telemetry-aware policy
/// (docs/control.md) predicts in-network fastest for every call of a ring-planned all-reduce
/// (S/B plus the tree's round trip against ring's 2(n-1)/n x S/B) and re-plans each call to
/// it; the calls then take a fixed in-network run's time within 5 % (tolerance of issue 16).
#[test]
fn the_adaptive_policy_chooses_in_network_when_it_predicts_it_fastest() {
    let workload = |alg: &str| {
        format!(
            r#"algorithm = "{alg}"
        hosts = [0, 1, 2, 3, 4, 5, 6, 7]
        size = "2MiB"
        iterations = 3
        compute_gap = "60us"
        start = "40us""#
        )
    };
    let control = "\n[control]\ninterval = \"20us\"\npolicy = \"telemetry_aware\"\n";
    let adaptive = run(&(fat_tree(&workload("ring"), "") + control));
    let rows = adaptive.collective_rows();
    assert_eq!(rows.len(), 3);
    assert!(
        rows.iter().all(|r| r.algorithm == "in_network"),
        "{:?}",
        rows.iter().map(|r| r.algorithm).collect::<Vec<_>>()
    );
    let actions = adaptive.action_rows();
    assert_eq!(actions.len(), 3);
    for a in actions {
        assert_eq!(
            (a.action, a.value.as_str()),
            ("set_algorithm", "in_network")
        );
        assert!(a.detail.contains("ring -> in_network"), "{}", a.detail);
    }
    let stats = adaptive.stats();
    assert_eq!(stats.in_network_calls, Some(3));
    // One tree for the communicator (its contexts placed once): 4 edges, 2 aggs, 1 core.
    assert_eq!(stats.reduction_contexts, Some(7));
    assert_eq!(stats.flows_cancelled, 3 * 2 * 7 * 8);
    adaptive.check_conservation().unwrap();
    let t_adaptive = calls_time(&adaptive);

    let fixed = run(&fat_tree(&workload("in_network"), ""));
    let t_fixed = calls_time(&fixed);
    let err = (t_adaptive - t_fixed).abs() / t_fixed;
    assert!(
        err < 0.05,
        "adaptive {t_adaptive} ps vs fixed in-network {t_fixed} ps ({err:.3})"
    );
    let ring = run(&fat_tree(&workload("ring"), ""));
    let t_ring = calls_time(&ring);
    println!("calls: adaptive {t_adaptive} ps, fixed in_network {t_fixed} ps, ring {t_ring} ps");
    assert!(t_adaptive < 0.8 * t_ring, "{t_adaptive} vs ring {t_ring}");
}

/// A controller's set_algorithm to in_network places the communicator's tree (contexts held
/// from then on); with every context held by another communicator it is refused, naming the
/// field, and nothing changes.
#[test]
fn set_algorithm_in_network_places_a_tree_or_is_refused_without_contexts() {
    use fabricemu_core::config::CollectiveAlgorithm as A;
    use fabricemu_core::control::{Action, ControlStep};
    // Two groups of 8 (pods 0-1 and pods 2-3), one context per switch: the first group's tree
    // takes its pods' edges, one agg per pod and a core; the second's its own pods and another
    // core.
    let text = fat_tree(
        r#"algorithm = "ring"
        size = "256KiB"
        groups = [[0, 1, 2, 3, 4, 5, 6, 7], [8, 9, 10, 11, 12, 13, 14, 15]]
        start = "10us""#,
        "contexts = 1",
    );
    let mut sim = common::build(&text);
    sim.enable_control(Some(5_000_000));
    assert_eq!(sim.step_control(1 << 20), ControlStep::Boundary(0));
    for c in 0..2 {
        let row = sim
            .apply_action(
                "test",
                &Action::SetAlgorithm {
                    collective: c,
                    algorithm: A::InNetwork,
                },
            )
            .unwrap()
            .expect("a change");
        assert_eq!(row.value, "in_network");
    }
    while sim.step_control(1 << 20) != ControlStep::Finished {}
    sim.check_conservation().unwrap();
    let rows = sim.collective_rows();
    assert!(rows
        .iter()
        .all(|r| r.algorithm == "in_network" && r.flows == 8));
    assert!(rows.iter().all(|r| r.flows_finished == r.flows));
    assert_eq!(sim.stats().in_network_calls, Some(2));

    // All 16 hosts in one group take every edge and agg context; a second workload's group
    // finds none.
    let text = fat_tree(
        r#"algorithm = "in_network"
        size = "256KiB"
        [[workload]]
        kind = "collective"
        op = "all_reduce"
        algorithm = "ring"
        hosts = [0, 4]
        size = "256KiB""#,
        "contexts = 1",
    );
    let mut sim = common::build(&text);
    sim.enable_control(Some(5_000_000));
    assert_eq!(sim.step_control(1 << 20), ControlStep::Boundary(0));
    let flows = sim.world().flows.len();
    let e = sim
        .apply_action(
            "test",
            &Action::SetAlgorithm {
                collective: 1,
                algorithm: A::InNetwork,
            },
        )
        .unwrap_err();
    assert_eq!(e.field, "algorithm");
    assert!(e.message.contains("no free reduction context"), "{e}");
    assert_eq!(sim.world().flows.len(), flows);
    while sim.step_control(1 << 20) != ControlStep::Finished {}
    let rows = sim.collective_rows();
    assert_eq!(
        (rows[0].algorithm, rows[1].algorithm),
        ("in_network", "ring")
    );
}

/// `on_exhausted = "wait"`: two communicators on the same hosts (two workloads), one context
/// per switch, both called at time 0. The first takes the tree's contexts; the second waits
/// (counted once) until the first's last call ends, then runs in the network: the calls are
/// serialised, so the second ends at twice the analytic in-network time (`ideal_time`, within
/// 5 %, issue 16's tolerance). With the default (`"ring"`) the second falls back instead.
#[test]
fn with_on_exhausted_wait_a_call_waits_for_a_free_context() {
    let size = 1u64 << 20;
    let text = |mode: &str| {
        fat_tree(
            r#"algorithm = "in_network"
        hosts = [0, 1, 2, 3]
        size = "1MiB"
        [[workload]]
        kind = "collective"
        op = "all_reduce"
        algorithm = "in_network"
        hosts = [0, 1, 2, 3]
        size = "1MiB""#,
            &format!("contexts = 1\non_exhausted = \"{mode}\""),
        )
    };
    let sim = run(&text("wait"));
    let stats = sim.stats();
    assert_eq!(stats.in_network_waits, Some(1));
    assert_eq!(stats.in_network_fallbacks, Some(0));
    assert_eq!(stats.in_network_calls, Some(2));
    let rows = sim.collective_rows();
    assert!(rows.iter().all(|r| r.algorithm == "in_network"));
    assert!(rows.iter().all(|r| r.flows_finished == r.flows));
    // Hosts 0-3 are pod 0: edges 0 and 1 under one agg, a tree of depth 2.
    let latency = sim.scenario().switch.latency_ps;
    let ideal = ideal_time(size, 4096, 62, 100_000_000_000, 2, 500_000 + latency) as f64;
    let first = rows[0].finish_ps.unwrap() as f64;
    let second = rows[1].finish_ps.unwrap() as f64;
    for (what, got, want) in [("first", first, ideal), ("second", second, 2.0 * ideal)] {
        let err = (got - want).abs() / want;
        assert!(
            err < 0.05,
            "{what} ends at {got} ps, analytic {want} ps ({err:.3})"
        );
    }
    // The default: the second communicator finds no context and runs the ring at once.
    let sim = run(&text("ring"));
    let stats = sim.stats();
    assert_eq!(
        (stats.in_network_fallbacks, stats.in_network_waits),
        (Some(1), None)
    );
    let rows = sim.collective_rows();
    assert_eq!(
        (rows[0].algorithm, rows[1].algorithm),
        ("in_network", "ring")
    );
}

/// `on_exhausted`: a bad value names the key and its choices (with "wait"); the fuzz corpus's
/// three communicators sharing one context per switch run to the end, serialised (two calls
/// wait, none falls back).
#[test]
fn on_exhausted_wait_is_validated_and_never_deadlocks_the_corpus_case() {
    let e = common::scenario_error(&fat_tree(
        r#"algorithm = "in_network"
        size = "64KiB""#,
        "on_exhausted = \"queue\"",
    ));
    let text = e.to_string();
    assert!(text.contains("switch.reduction.on_exhausted"), "{text}");
    assert!(text.contains("wait"), "{text}");
    let corpus = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fuzz_corpus/in_network_on_exhausted_wait.toml");
    let sim = run(&std::fs::read_to_string(corpus).unwrap());
    let stats = sim.stats();
    assert_eq!(stats.flows_finished, stats.flows_total);
    assert_eq!(stats.in_network_fallbacks, Some(0));
    assert_eq!(stats.in_network_calls, Some(4));
    assert_eq!(stats.in_network_waits, Some(2));
    assert!(sim
        .collective_rows()
        .iter()
        .all(|r| r.algorithm == "in_network"));
}

/// A call planned in the network can be re-planned to a flat algorithm: its in-network flows
/// are cancelled (and no longer counted as an in-network call), the next call still runs on the
/// tree.
#[test]
fn a_call_planned_in_network_can_be_replanned_to_the_ring() {
    use fabricemu_core::config::CollectiveAlgorithm as A;
    use fabricemu_core::control::{Action, ControlStep};
    let mut sim = common::build(&fat_tree(
        r#"algorithm = "in_network"
        hosts = [0, 1, 2, 3, 4, 5, 6, 7]
        size = "256KiB"
        iterations = 2
        start = "10us""#,
        "",
    ));
    sim.enable_control(Some(5_000_000));
    assert_eq!(sim.step_control(1 << 20), ControlStep::Boundary(0));
    let row = sim
        .apply_action(
            "test",
            &Action::SetAlgorithm {
                collective: 0,
                algorithm: A::Ring,
            },
        )
        .unwrap()
        .expect("a change");
    assert_eq!(
        row.detail,
        "in_network -> ring: 8 flows cancelled, 112 appended"
    );
    while sim.step_control(1 << 20) != ControlStep::Finished {}
    sim.check_conservation().unwrap();
    let rows = sim.collective_rows();
    assert_eq!(
        (rows[0].algorithm, rows[1].algorithm),
        ("ring", "in_network")
    );
    assert!(rows.iter().all(|r| r.flows_finished == r.flows));
    assert_eq!(sim.stats().in_network_calls, Some(1));
}

/// Reduce-scatter and all-gather under the same losses (their results and operands sized per
/// shard, docs/in-network.md): every rank's flow completes under both recoveries, packets are
/// conserved (`run` checks it), and the repairs keep the op's sizes.
#[test]
fn reduce_scatter_and_all_gather_recover_losses() {
    for op in ["reduce_scatter", "all_gather"] {
        for recovery in ["selective", "go_back_n"] {
            let text =
                lossy(recovery, 0.01).replace("op = \"all_reduce\"", &format!("op = \"{op}\""));
            let sim = run(&text);
            let stats = sim.stats();
            assert!(
                stats.corrupted_drops > 0,
                "{op} {recovery}: no loss happened"
            );
            assert_eq!(sim.collective_rows()[0].algorithm, "in_network");
            for f in &sim.flow_rows() {
                assert!(f.finish_ps.is_some(), "{op} {recovery}: {f:?}");
            }
            assert!(stats.retransmitted_packets > 0, "{op} {recovery}");
        }
    }
}

/// Two calls of one communicator that overlap (a step graph's ops with no dependency between
/// them): the later one waits for the tree, and its flows, which asked to start when their
/// op was ready, start when the first call ends (before, they were never started again: the
/// run stopped with half its flows unfinished).
#[test]
fn a_call_waiting_for_its_tree_starts_when_the_one_before_ends() {
    let sim = run(r#"
        seed = 1
        [topology]
        kind = "fat_tree"
        k = 4
        link_rate = "100Gbps"
        link_delay = "500ns"
        [switch.reduction]
        [[workload]]
        kind = "graph"
        groups = [[0, 1, 2, 3]]
        ops = [
          { kind = "collective", op = "all_reduce", group = 0, size = "4MiB", algorithm = "in_network" },
          { kind = "compute", rank = 0, duration = "1us" },
          { kind = "collective", op = "all_reduce", group = 0, size = "1MiB", algorithm = "in_network", deps = [1] },
        ]
    "#);
    let stats = sim.stats();
    assert_eq!(
        (stats.flows_finished, stats.flows_total),
        (8, 8),
        "{stats:?}"
    );
    assert_eq!(stats.in_network_calls, Some(2));
    let rows = sim.flow_rows();
    let first_end = (rows.iter())
        .filter(|r| r.size_bytes == 4 << 20)
        .filter_map(|r| r.finish_ps)
        .max()
        .expect("the first call's flows");
    for r in rows.iter().filter(|r| r.size_bytes == 1 << 20) {
        // Ready at 1 us, it waited for the first call's end (at its instant).
        assert_eq!(r.start_ps, first_end, "{r:?}");
    }
}
