//! In-network reduce-scatter and all-gather (issue 16), and HPCC's INT on in-network results.
//!
//! Validation source and tolerance (issue 16's 5 %), model in docs/in-network.md: on an idle
//! non-blocking fabric an in-network reduce-scatter of S bytes sends S up per rank (every
//! operand) and receives S/n down (its shard; a header per other packet), an all-gather sends
//! S/n up (its shard; a header per other packet) and receives S by multicast; either takes the
//! loaded direction's S/B plus the tree's round trip, `in_network::ideal_time` (as the
//! all-reduce). Ring's counterparts send (n-1)/n x S per rank: (n-1)/n x S/B plus n-1 step
//! latencies. The bytes on a rank's links differ from the all-reduce's by exactly the payload of
//! the packets it does not own.

use crate::common;
use common::run;
use fabricemu_core::ids::NodeId;
use fabricemu_core::workload::collective::in_network::ideal_time;

/// k = 4 fat tree (16 hosts, non-blocking), 100 Gb/s links of 500 ns; switches reduce.
fn fat_tree(op: &str, algorithm: &str, size: &str) -> String {
    format!(
        r#"
        seed = 1
        [topology]
        kind = "fat_tree"
        k = 4
        link_rate = "100Gbps"
        link_delay = "500ns"
        [switch.reduction]
        [[workload]]
        kind = "collective"
        op = "{op}"
        algorithm = "{algorithm}"
        size = "{size}"
    "#
    )
}

fn duration(sim: &fabricemu_core::engine::Simulation) -> f64 {
    let rows = sim.collective_rows();
    let r = &rows[0];
    assert_eq!(r.flows_finished, r.flows, "{r:?}");
    r.duration_ps().expect("finished") as f64
}

/// Bytes host `h` sent up its link, and bytes its switch sent down to it.
fn host_bytes(sim: &fabricemu_core::engine::Simulation, h: u32) -> (u64, u64) {
    let w = sim.world();
    let up = w.fabric.ports_of(NodeId::new(h)).next().expect("a port");
    (w.port_tx_bytes(up), w.port_tx_bytes(w.fabric.peer_port[up]))
}

#[test]
fn in_network_reduce_scatter_and_all_gather_match_their_analytic_times() {
    let size = 4u64 << 20;
    let n = 16u64;
    let packets = size.div_ceil(4096);
    let ar = run(&fat_tree("all_reduce", "in_network", "4MiB"));
    let latency = ar.scenario().switch.latency_ps;
    // Depth 3 (edge -> agg -> core); a hop is 500 ns plus the switch latency.
    let ideal = ideal_time(size, 4096, 62, 100_000_000_000, 3, 500_000 + latency) as f64;
    let wire = size as f64 + packets as f64 * 62.0;
    // Ring: a rank's step waits only for its predecessor's, so the latency on the critical path
    // is that of n-1 consecutive ring edges. Hosts 0..15 in order, 2 per edge switch and 4 per
    // pod: per 4 edges, 2 + 4 + 2 + 6 links and 1 + 3 + 1 + 5 switches; 15 edges leave out one
    // edge-local pair: 54 links (500 ns and the switch latency each) and 39 store-and-forward
    // packet serialisations.
    let chain = 54.0 * (500_000.0 + latency as f64) + 39.0 * 4158.0 * 80.0;
    let ring_ideal = (n as f64 - 1.0) / n as f64 * wire * 80.0 + chain;
    let (ar_up, ar_down) = host_bytes(&ar, 5);
    for op in ["reduce_scatter", "all_gather"] {
        let sim = run(&fat_tree(op, "in_network", "4MiB"));
        let rows = sim.collective_rows();
        assert_eq!(rows[0].algorithm, "in_network", "{op}");
        assert_eq!(rows[0].flows, 16);
        let t = duration(&sim);
        let err = (t - ideal).abs() / ideal;
        println!("{op}: in-network {t} ps, analytic {ideal} ps");
        assert!(err < 0.05, "{op}: {t} ps vs analytic {ideal} ps ({err:.3})");
        let stats = sim.stats();
        assert_eq!(stats.in_network_calls, Some(1));
        assert_eq!(stats.reduction_combined, Some(packets * 13), "{op}");
        // Rank 5 owns packets [5P/n, 6P/n): the others' payload is missing from one direction.
        let owned = (6 * packets).div_ceil(n) - (5 * packets).div_ceil(n);
        let not_owned = (packets - owned) * 4096;
        let (up, down) = host_bytes(&sim, 5);
        println!("{op}: host 5 up {up} B, down {down} B (all-reduce: {ar_up}, {ar_down})");
        let (expect_up, expect_down) = match op {
            "reduce_scatter" => (ar_up, ar_down - not_owned),
            _ => (ar_up - not_owned, ar_down),
        };
        // The self-acknowledgements cross both links too; their count may differ by a few
        // (0.1 % of the shard's bytes).
        let slack = size / n / 1000;
        assert!(
            up.abs_diff(expect_up) <= slack,
            "{op}: up {up} vs {expect_up}"
        );
        assert!(
            down.abs_diff(expect_down) <= slack,
            "{op}: down {down} vs {expect_down}"
        );
        let ring = run(&fat_tree(op, "ring", "4MiB"));
        let t_ring = duration(&ring);
        let err = (t_ring - ring_ideal).abs() / ring_ideal;
        println!("{op}: ring {t_ring} ps, analytic {ring_ideal} ps");
        assert!(
            err < 0.05,
            "{op} ring {t_ring} ps vs analytic {ring_ideal} ps ({err:.3})"
        );
    }
}
