//! Exactness: single flows and a shared link finish at the analytic time, to the picosecond.
//! Source of the expectations: store-and-forward timing, computed by hand below (no tolerance).

use fabricemu_core::transport::ideal::{ideal_fct_by_recurrence, Hop};

use crate::common;
use common::run;

/// Serialisation of `bytes` at 100 Gbps: 80 ps per byte.
fn ser100(bytes: u64) -> u64 {
    bytes * 80
}

#[test]
fn single_flow_across_pods_is_exact() {
    // k = 4 fat tree: hosts 0 (pod 0) and 15 (pod 3) are 6 links apart.
    let sim = run(r#"
        [topology]
        kind = "fat_tree"
        k = 4
        link_rate = "100Gbps"
        link_delay = "500ns"
        [[workload]]
        kind = "flows"
        flows = [{ src = 0, dst = 15, size = "1MB", start = "3us" }]
    "#);
    let rows = sim.flow_rows();
    assert_eq!(rows.len(), 1);
    let r = &rows[0];
    // 1 MB = 244 full packets of 4096 B payload + one of 576 B; 62 B of header each.
    let (n, full, last) = (245u64, ser100(4096 + 62), ser100(576 + 62));
    let hops = 6;
    // Store-and-forward pipelining: the last packet leaves the NIC after n - 1 full packets and
    // itself; each of the 5 later hops adds the serialisation of a full packet ahead of it (the
    // bottleneck of the lattice path) -- in all (h + n - 2) full packets, one last packet, and h
    // propagation delays.
    let expect = (hops + n - 2) * full + last + hops * 500_000;
    assert_eq!(expect, 85_878_400);
    assert_eq!(r.start_ps, 3_000_000);
    assert_eq!(r.finish_ps, Some(3_000_000 + expect));
    assert_eq!(r.ideal_fct_ps, expect);
    assert_eq!(r.retransmits + r.drops, 0);
}

#[test]
fn single_flow_with_mixed_rates_and_switch_latency_is_exact() {
    // Hosts at 100G, fabric at 400G, core at 200G, a 300 ns forwarding latency per switch.
    let sim = run(r#"
        [topology]
        kind = "fat_tree"
        k = 4
        host_link_rate = "100Gbps"
        fabric_link_rate = "400Gbps"
        core_link_rate = "200Gbps"
        link_delay = "1us"
        core_link_delay = "2us"
        [switch]
        latency = "300ns"
        [transport]
        mtu = "1KiB"
        header = "48B"
        [[workload]]
        kind = "flows"
        flows = [{ src = 1, dst = 12, size = "100000B" }]
    "#);
    let r = &sim.flow_rows()[0];
    let hop = |gbps: u64, delay_ns: u64, into_switch: bool| Hop {
        rate_bps: gbps * 1_000_000_000,
        delay_ps: delay_ns * 1000 + if into_switch { 300_000 } else { 0 },
    };
    let path = [
        hop(100, 1000, true),
        hop(400, 1000, true),
        hop(200, 2000, true),
        hop(200, 2000, true),
        hop(400, 1000, true),
        hop(100, 1000, false),
    ];
    // 100000 B = 97 packets of 1024 B + one of 672 B.
    let expect = ideal_fct_by_recurrence(&path, 98, 1024 + 48, 672 + 48);
    assert_eq!(r.finish_ps, Some(expect));
    assert_eq!(r.ideal_fct_ps, expect);
}

#[test]
fn two_flows_share_one_link_half_each() {
    // Both flows leave host 0: its NIC link is shared and served round robin. Host 1 is under the
    // same edge switch (2 hops), host 15 in another pod (6 hops); nothing else is shared.
    let sim = run(r#"
        [topology]
        kind = "fat_tree"
        k = 4
        link_rate = "100Gbps"
        link_delay = "500ns"
        [[workload]]
        kind = "flows"
        flows = [{ src = 0, dst = 15, size = "400KiB" }, { src = 0, dst = 1, size = "400KiB" }]
    "#);
    let rows = sim.flow_rows();
    let n = 100u64; // 400 KiB / 4 KiB, all full packets
    let s = ser100(4096 + 62);
    // Round robin: flow 0 sends packets at slots 0, 2, 4, ...; flow 1 at 1, 3, 5, ...
    // Flow 0's last packet leaves the NIC at (2n - 1) s, then crosses 5 more hops unqueued.
    let f0 = (2 * n - 1) * s + 500_000 + 5 * (s + 500_000);
    let f1 = 2 * n * s + 500_000 + (s + 500_000);
    assert_eq!(rows[0].finish_ps, Some(f0));
    assert_eq!(rows[1].finish_ps, Some(f1));
    // Each got half the link: throughput within one packet time of line rate / 2.
    let first_packet_latency = s + 500_000;
    let t1 = f1 - 2 * first_packet_latency + s;
    assert!(
        (t1 as i64 - (2 * n * s) as i64).abs() <= s as i64,
        "{t1} vs {}",
        2 * n * s
    );
}
