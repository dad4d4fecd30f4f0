//! Paths between GPUs (issue 13 item 3): the scale-up domain inside a domain, the source's rail
//! between domains, PXN or the spine across rails; and that what held for hosts (exact timing,
//! conservation, determinism) holds with GPUs. Each test names its source and tolerance.

use crate::common;

use common::{leaf_spine, role_bytes, run, tier_bytes};
use fabricemu_core::ids::{FlowId, NodeId};
use fabricemu_core::topology::{Role, Tier};
use fabricemu_core::transport::ideal::{ideal_fct_by_recurrence, Hop};
use fabricemu_core::Simulation;

/// One server of 8 GPUs on 8 rail leaves (one slot each), NVLink at 4000 Gbps (2 ps per byte, so
/// serialisation is exact), 100 ns through the NVSwitch, 10 ns links; then `workload`.
fn one_server(workload: &str) -> String {
    format!(
        "{}[cluster]\ngpus_per_server = 8\n\
         scaleup = {{ gpus = 8, rate = \"4000Gbps\", latency = \"100ns\", link_delay = \"10ns\" }}\n\
         [[workload]]\n{workload}",
        leaf_spine(8, 1, 1, "400Gbps", None, "500ns")
    )
}

#[test]
fn a_transfer_inside_a_domain_is_exact() {
    // Source: store-and-forward timing, as tests/exactness.rs (no tolerance). GPU 0 -> GPU 3:
    // GPU 0's scale-up link (4000 Gbps, 10 ns, then the NVSwitch's 100 ns), the switch's link to
    // GPU 3 (4000 Gbps, 10 ns). 1 MB = 244 packets of 4096 B payload + one of 576 B, 62 B header.
    let sim = run(&one_server(
        "kind = \"flows\"\nflows = [{ src = 0, dst = 3, size = \"1MB\", start = \"1us\" }]\n",
    ));
    let r = &sim.flow_rows()[0];
    let hop = |delay_ps| Hop {
        rate_bps: 4_000_000_000_000,
        delay_ps,
    };
    let expect = ideal_fct_by_recurrence(&[hop(110_000), hop(10_000)], 245, 4096 + 62, 576 + 62);
    // By hand: (2 + 245 - 2) full packets of 4158 B at 2 ps/B, the last one of 638 B, 120 ns.
    assert_eq!(expect, 245 * 4158 * 2 + 638 * 2 + 120_000);
    assert_eq!(r.finish_ps, Some(1_000_000 + expect));
    assert_eq!(r.ideal_fct_ps, expect);
    // Scale-up only: nothing on a NIC.
    assert_eq!(tier_bytes(&sim, Tier::Host), 0);
    assert!(tier_bytes(&sim, Tier::ScaleUp) > 1_000_000);
}

#[test]
fn ring_all_reduce_inside_a_domain_takes_the_bandwidth_term_plus_latency() {
    // Source: the ring all-reduce cost 2(n-1)/n x S / B (Patarasuk and Yuan, JPDC 2009; NCCL's
    // bus bandwidth, nccl-tests PERFORMANCE.md) plus, per step, the latency of the first packet
    // (two link delays, the switch latency, one packet's serialisation) and the ACK-free
    // pipeline; packets carry 62 B of header per 4096 B. Tolerance: 5 %.
    let (n, size) = (8u64, 32u64 << 20);
    let sim = run(&one_server(
        "kind = \"collective\"\nop = \"all_reduce\"\nalgorithm = \"ring\"\nsize = \"32MiB\"\n",
    ));
    let rows = sim.collective_rows();
    assert_eq!(rows.len(), 1);
    let t = rows[0].duration_ps().expect("finished") as f64;
    let b = 4e12 / 8.0 * 1e-12; // bytes per ps
    let wire = (4096.0 + 62.0) / 4096.0;
    let bandwidth = 2.0 * (n - 1) as f64 / n as f64 * size as f64 * wire / b;
    let per_step_latency = 2.0 * 10_000.0 + 100_000.0 + 4158.0 / b;
    let predicted = bandwidth + 2.0 * (n - 1) as f64 * per_step_latency;
    let err = (t - predicted).abs() / predicted;
    assert!(
        err < 0.05,
        "ring all-reduce took {t} ps, predicted {predicted} ps ({err:.3})"
    );
    // And the issue's bandwidth term alone is within 5 % at this size.
    let bare = 2.0 * (n - 1) as f64 / n as f64 * size as f64 / b;
    assert!((t - bare).abs() / bare < 0.05, "{t} vs {bare}");
    assert_eq!(tier_bytes(&sim, Tier::Host), 0, "inside the domain: no NIC");
}

/// Two servers of 4 GPUs, 4 rail leaves of 2 slots, 2 spines.
fn two_servers(cross_rail: &str, flows: &str) -> String {
    format!(
        r#"
{}
[cluster]
gpus_per_server = 4
cross_rail = "{cross_rail}"
[[workload]]
kind = "flows"
flows = [{flows}]
"#,
        leaf_spine(4, 2, 2, "100Gbps", None, "500ns")
    )
}

#[test]
fn pxn_crosses_no_spine_and_the_spine_path_does() {
    // Source: the path rules of NCCL's PXN (NCCL 2.12 release notes: "PXN: PCI x NVLink", a
    // transfer to a GPU on another rail first moves over NVLink to the GPU on the destination's
    // rail). GPU 0 (server 0, rail 0) -> GPU 5 (server 1, rail 1). Exact byte counts.
    let flow = r#"{ src = 0, dst = 5, size = "1MB" }"#;
    let pxn = run(&two_servers("pxn", flow));
    let spine = run(&two_servers("spine", flow));
    for sim in [&pxn, &spine] {
        let st = sim.stats();
        assert_eq!(st.flows_finished, 1);
    }
    // PXN: GPU 0 -> NVSwitch -> GPU 1 (rail 1) -> leaf 1 -> GPU 5. No spine, both ways.
    assert_eq!(role_bytes(&pxn, Role::Spine), 0);
    let w = pxn.world();
    let c = w.fabric.cluster.as_deref().unwrap();
    assert!(w.port_tx_bytes(c.scaleup_port(NodeId::new(0)).unwrap()) >= 1_000_000);
    assert!(
        w.port_tx_bytes(c.nic_ports(NodeId::new(1))[0]) >= 1_000_000,
        "GPU 1 relays onto rail 1"
    );
    assert_eq!(
        w.port_tx_bytes(c.nic_ports(NodeId::new(0))[0]),
        0,
        "GPU 0's own NIC is idle"
    );
    let path = w.flow_path_ports(FlowId::new(0));
    let nodes: Vec<u32> = path.iter().map(|&p| w.fabric.peer_node[p].get()).collect();
    let nvswitch = c.domain_switch(0).unwrap();
    let leaf1 = w.fabric.peer_node[c.nic_ports(NodeId::new(1))[0]];
    assert_eq!(nodes, [nvswitch.get(), 1, leaf1.get(), 5]);
    // Without PXN: GPU 0's NIC on rail 0, a spine to rail 1; the scale-up domain stays idle.
    assert!(role_bytes(&spine, Role::Spine) >= 1_000_000);
    assert_eq!(tier_bytes(&spine, Tier::ScaleUp), 0);
    assert_eq!(spine.world().flow_path_ports(FlowId::new(0)).len(), 4);
}

#[test]
fn rail_aligned_transfers_use_their_nic_and_a_pxn_flow_is_paced_at_its_relay_nic() {
    // GPU 0 -> GPU 4 (same rail, other server): NIC only. Exact byte counts, and the PXN flow's
    // line rate is the relay NIC's 100 Gbps (not NVLink's 3600 Gbps): its rate at start.
    let sim = run(&two_servers(
        "pxn",
        r#"{ src = 0, dst = 4, size = "256KiB" }, { src = 2, dst = 7, size = "256KiB" }"#,
    ));
    assert_eq!(sim.stats().flows_finished, 2);
    assert_eq!(role_bytes(&sim, Role::Spine), 0);
    let w = sim.world();
    let c = w.fabric.cluster.as_deref().unwrap();
    assert!(w.port_tx_bytes(c.nic_ports(NodeId::new(0))[0]) >= 256 << 10);
    // Flow 1 (GPU 2 -> GPU 7, rail 2 -> rail 3) relays through GPU 3.
    assert!(w.port_tx_bytes(c.nic_ports(NodeId::new(3))[0]) >= 256 << 10);
    assert_eq!(
        w.flows[FlowId::new(1)].src_port,
        c.scaleup_port(NodeId::new(2)).unwrap()
    );
    assert_eq!(w.flows[FlowId::new(1)].rate_bps, 100_000_000_000);
    assert_eq!(
        w.flows[FlowId::new(0)].src_port,
        c.nic_ports(NodeId::new(0))[0]
    );
}

#[test]
fn planes_carry_flows_by_hash_and_every_flow_arrives() {
    // Two planes, no scale-up domain: each flow on one plane by a hash of its header; with 56
    // flows both planes carry some (a fixed seed: deterministic).
    let sim = run(r#"
        [topology]
        kind = "leaf_spine"
        leaves = 2
        spines = 2
        hosts_per_leaf = 4
        link_rate = "100Gbps"
        [cluster]
        gpus_per_server = 2
        planes = 2
        scaleup = { kind = "none" }
        [[workload]]
        kind = "all_to_all"
        size = "16KiB"
    "#);
    let st = sim.stats();
    assert_eq!(st.flows_finished, 56);
    let w = sim.world();
    let f = &w.fabric;
    let plane_bytes = |plane: u32| -> u64 {
        // Plane p's switches: 8 + 4p .. 8 + 4p + 4.
        f.ports()
            .filter(|&p| {
                let n = f.port_node[p].get();
                (8 + 4 * plane..12 + 4 * plane).contains(&n)
            })
            .map(|p| w.port_tx_bytes(p))
            .sum()
    };
    assert!(plane_bytes(0) > 0 && plane_bytes(1) > 0);
}

#[test]
fn conservation_and_determinism_hold_with_gpus() {
    // Source: the engine's invariants (tests/engine_behaviour.rs for hosts): every packet created
    // is delivered, dropped or in flight (common::run checks it), every switch's counters match
    // its queues, and a run is bit-for-bit the same for a seed.
    for cluster in [
        "gpus_per_server = 4",
        "gpus_per_server = 4\ncross_rail = \"spine\"",
        "gpus_per_server = 4\ncabling = \"tor\"\nplanes = 2",
        "gpus_per_server = 4\nnics_per_server = 2\nnic = { buffer = \"256KiB\" }",
        "gpus_per_server = 4\nscaleup = { gpus = 8, buffer = \"1MiB\" }",
    ] {
        let text = format!(
            r#"
[topology]
kind = "leaf_spine"
leaves = 4
spines = 2
hosts_per_leaf = 4
link_rate = "100Gbps"
[cluster]
{cluster}
[switch]
buffer = "2MiB"
pfc = {{ enabled = true }}
ecn = {{ enabled = true }}
[transport]
cc = "dcqcn"
[[workload]]
kind = "all_to_all"
size = "64KiB"
"#
        );
        let a = run(&text);
        let st = a.stats();
        assert_eq!(st.flows_finished, st.flows_total, "{cluster}");
        let b = run(&text);
        assert_eq!(a.stats(), b.stats(), "{cluster}");
        let (ra, rb) = (a.flow_rows(), b.flow_rows());
        assert!(
            ra.iter().zip(&rb).all(|(x, y)| x.finish_ps == y.finish_ps),
            "{cluster}"
        );
    }
}

#[test]
fn rail_cabling_keeps_the_spine_idle_where_tor_cabling_crosses_it() {
    // scenarios/gpu_rail_all_to_all.toml and gpu_tor_all_to_all.toml: the same servers and
    // workloads (a rail-aligned all-to-all, then a cross-rail all-to-all between two servers),
    // cabled by rail or by ToR. Source: the rail-optimised design's rationale (NVIDIA DGX
    // SuperPOD reference architecture: rail-aligned traffic stays on its leaf; PXN moves
    // cross-rail traffic onto the right rail over NVLink). Exact: zero spine bytes with rails.
    let read = |name: &str| {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../scenarios")
            .join(name);
        run(&std::fs::read_to_string(path).unwrap())
    };
    let rail = read("gpu_rail_all_to_all.toml");
    let tor = read("gpu_tor_all_to_all.toml");
    assert_eq!(role_bytes(&rail, Role::Spine), 0);
    assert!(role_bytes(&tor, Role::Spine) > 0);
    // The rail-aligned all-to-all (workload 0) finishes sooner on rails: no 2:1 spine.
    let last = |sim: &Simulation, w: u32| {
        sim.collective_rows()
            .iter()
            .filter(|r| r.workload == w)
            .map(|r| r.duration_ps().unwrap())
            .max()
            .unwrap()
    };
    assert!(
        last(&rail, 0) < last(&tor, 0),
        "{} vs {}",
        last(&rail, 0),
        last(&tor, 0)
    );
    // Bus bandwidths (nccl-tests' definition) ordered the same way: every rail-aligned group's
    // busbw on rails above the slowest group's on ToR cabling.
    let busbw = |sim: &Simulation| -> Vec<f64> {
        sim.collective_rows()
            .iter()
            .filter(|r| r.workload == 0)
            .map(|r| r.busbw_bps().expect("finished"))
            .collect()
    };
    let (rail_bw, tor_bw) = (busbw(&rail), busbw(&tor));
    let worst_tor = tor_bw.iter().copied().fold(f64::INFINITY, f64::min);
    assert!(
        rail_bw.iter().all(|&b| b > worst_tor),
        "rail {rail_bw:?} vs tor {tor_bw:?}"
    );
}

#[test]
fn a_pxn_relay_holds_a_bounded_transit_buffer_and_pauses_the_scale_up_switch() {
    // Three GPUs of server 0 (0, 2, 3) send 4 MiB each to GPU 5 (server 1, rail 1): all three
    // relay through GPU 1 (server 0, rail 1), each paced at the relay NIC's 100 Gbps, so 300 Gbps
    // arrive for a 100 Gbps NIC. Source: NCCL's PXN proxy stages the relayed data in a bounded
    // buffer (NCCL_BUFFSIZE) and NVLink is credit-based, so the relay never holds more than its
    // buffer and the scale-up domain loses nothing (engine/relay.rs). Exact: the relay's transit
    // bytes never pass `cluster.pxn_buffer`, every pause is resumed, no packet is dropped.
    let flows = r#"{ src = 0, dst = 5, size = "4MiB" }, { src = 2, dst = 5, size = "4MiB" }, { src = 3, dst = 5, size = "4MiB" }"#;
    let with_buffer = |buffer: &str| {
        run(&two_servers("pxn", flows).replace(
            "cross_rail = \"pxn\"",
            &format!("cross_rail = \"pxn\"\npxn_buffer = \"{buffer}\""),
        ))
    };
    let relay = NodeId::new(1);
    let mut finish = Vec::new();
    for (buffer, bytes) in [
        ("256KiB", 256u64 << 10),
        ("4MiB", 4 << 20),
        ("1GiB", 1 << 30),
    ] {
        let sim = with_buffer(buffer);
        let st = sim.stats();
        assert_eq!(st.flows_finished, 3, "{buffer}");
        assert_eq!(st.packets_dropped, 0, "{buffer}");
        assert_eq!(
            role_bytes(&sim, Role::Spine),
            0,
            "{buffer}: PXN, not the spine"
        );
        let relays = sim.world().relays().expect("a PXN cluster has relays");
        let peak = relays.peak(relay);
        assert!(peak <= bytes, "{buffer}: the relay held {peak} B");
        assert_eq!(st.pfc_pause_frames, st.pfc_resume_frames, "{buffer}");
        if bytes < 8 << 20 {
            // Bounded: it filled to its pause threshold and paused the NVSwitch.
            assert!(peak >= relays.xoff(), "{buffer}: {peak}");
            assert!(st.pfc_pause_frames > 0, "{buffer}");
        } else {
            // Unbounded, the relay would hold about 2/3 of the 12 MiB (300 Gbps in, 100 out).
            assert!(peak > 7 << 20, "{buffer}: {peak}");
            assert_eq!(st.pfc_pause_frames, 0);
        }
        finish.push(
            sim.flow_rows()
                .iter()
                .filter_map(|r| r.finish_ps)
                .max()
                .unwrap(),
        );
    }
    // The relay NIC is the bottleneck either way: back-pressure moves the queue into the
    // NVSwitch without slowing the transfers (within 1 %).
    for f in &finish[..2] {
        assert!(
            (*f as f64 / finish[2] as f64 - 1.0).abs() < 0.01,
            "{finish:?}"
        );
    }
}

/// [`two_servers`] with PXN, a streamed Poisson workload of small messages among the 8 GPUs
/// (made as the run goes: no plan entry) and one planned flow.
fn two_servers_streamed() -> String {
    format!(
        r#"
{}
[cluster]
gpus_per_server = 4
cross_rail = "pxn"
[[workload]]
kind = "flows"
flows = [{{ src = 0, dst = 5, size = "100KB" }}]
[[workload]]
kind = "poisson"
cdf = "google_rpc"
load = 0.3
duration = "40us"
"#,
        leaf_spine(4, 2, 2, "100Gbps", None, "500ns")
    )
}

#[test]
fn streamed_flows_cross_rails_through_their_relay_as_planned_ones_do() {
    // Until 2026-12-05 only planned flows had PXN hops: a streamed workload's flow to a GPU on
    // another rail went to the scale-up switch and was dropped there as unreachable (87 of 113
    // of a Poisson workload's flows on an 8-rail cluster never finished). Source: the path
    // rules of the test above; exact counts.
    let sim = run(&two_servers_streamed());
    let w = sim.world();
    assert!(w.streamed_flows() > 20, "{} streamed", w.streamed_flows());
    let st = sim.stats();
    assert_eq!(st.unreachable_drops, 0);
    assert_eq!(st.flows_finished, st.flows_total);
    // Cross-rail flows relay over NVLink: none crosses a spine, and the scale-up tier works.
    assert_eq!(role_bytes(&sim, Role::Spine), 0);
    assert!(tier_bytes(&sim, Tier::ScaleUp) > 0);
    sim.check_conservation().unwrap();
}

#[test]
fn a_flow_amended_after_streamed_ones_relays_on_its_own_hops() {
    // Until 2026-12-05 an amended flow's PXN hops went where the table ended (the planned
    // flows'), not at its id after the streamed ones: it read none, or another flow's (an
    // elastic MoE job beside a Poisson workload counted a switch's shared buffer below zero).
    use fabricemu_core::engine::amend::Amendment;
    use fabricemu_core::workload::{FlowInit, Start};
    let mut sim = common::build(&two_servers_streamed());
    sim.step(2_000);
    let first = sim.world().flows.len();
    assert!(sim.world().streamed_flows() > 0);
    let report = sim
        .amend(&Amendment {
            flows: vec![FlowInit {
                src: NodeId::new(2),
                dst: NodeId::new(7),
                size_bytes: 200_000,
                start: Start::At(0),
                workload: 0,
                completes: None,
                collective: None,
                tag: None,
            }],
            ..Amendment::default()
        })
        .unwrap();
    assert_eq!(report.first_flow as usize, first);
    sim.run_to_end();
    let st = sim.stats();
    assert_eq!(
        (st.unreachable_drops, st.flows_finished),
        (0, st.flows_total)
    );
    sim.check_conservation().unwrap();
    // GPU 2 (server 0, rail 2) -> NVSwitch -> GPU 3 (rail 3) -> leaf 3 -> GPU 7.
    let w = sim.world();
    let c = w.fabric.cluster.as_deref().unwrap();
    let path = w.flow_path_ports(FlowId::new(first as u32));
    let nodes: Vec<u32> = path.iter().map(|&p| w.fabric.peer_node[p].get()).collect();
    let leaf3 = w.fabric.peer_node[c.nic_ports(NodeId::new(3))[0]];
    let nvswitch = c.domain_switch(0).unwrap();
    assert_eq!(nodes, [nvswitch.get(), 3, leaf3.get(), 7]);
}
