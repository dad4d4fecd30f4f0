//! DCQCN and PFC validation against published results and the fluid model.
//!
//! Sources: Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015
//! (parameters, fair-share convergence, PFC victim flows); Zhu, Ghobadi, Misra, Padhye, "ECN or
//! Delay", CoNEXT 2016 (fluid-model fixed point, shared/reference/dcqcn_fluid_fixed_point.csv).

use arrow_array::{Array, Int64Array, UInt32Array, UInt8Array};
use fabricemu_core::ids::NodeId;
use fabricemu_core::Simulation;

use crate::common;
use common::build;

/// An int64 column (times, bytes, rates) as u64 values.
fn u64s(a: &dyn Array) -> Vec<u64> {
    a.as_any()
        .downcast_ref::<Int64Array>()
        .unwrap()
        .values()
        .iter()
        .map(|&v| v as u64)
        .collect()
}

/// N senders and one receiver on one 40G switch: the receiver's link is the bottleneck.
fn fairness_scenario(n: usize, stop: &str) -> String {
    let extra = r#"
        [switch]
        ecn = { kmin = "5KB", kmax = "200KB", pmax = 0.01 }
        pfc = { enabled = true }
        [transport]
        cc = "dcqcn"
        mtu = "952B"
        header = "48B"
        [trace]
        queues = { interval = "1us" }
        rates = { interval = "10us" }
    "#;
    common::one_switch(n, "40Gbps", "1us", stop, extra, "1GB")
}

struct Fairness {
    jain: f64,
    mean_queue_kb: f64,
    shares: Vec<f64>,
}

fn measure(n: usize, stop_ms: u64) -> Fairness {
    let mut sim = build(&fairness_scenario(n, &format!("{stop_ms}ms")));
    sim.run_to_end();
    sim.check_conservation().unwrap();
    let stop_ps = stop_ms * 1_000_000_000;
    let half = stop_ps / 2;
    let fabric = &sim.world().fabric;
    let bottleneck = fabric.peer_port[fabric.host_port(NodeId::new(0))].get();
    let traces = sim.traces_mut();
    // Mean depth of the bottleneck's data queue over the second half (samples every 1 us; absent
    // rows are empty queues).
    let mut total = 0u64;
    for b in traces.queues.as_mut().unwrap().batches().unwrap() {
        let t = u64s(b.column(0).as_ref());
        let port = b.column(2).as_any().downcast_ref::<UInt32Array>().unwrap();
        let prio = b.column(3).as_any().downcast_ref::<UInt8Array>().unwrap();
        let bytes = u64s(b.column(4).as_ref());
        for i in 0..b.num_rows() {
            if t[i] > half && port.value(i) == bottleneck && prio.value(i) == 3 {
                total += bytes[i];
            }
        }
    }
    let samples = (stop_ps - half) / 1_000_000;
    let mean_queue_kb = total as f64 / samples as f64 / 1000.0;
    // Time-weighted mean rate of each flow over the second half, from the DCQCN rate changes.
    let mut per_flow: Vec<Vec<(u64, f64)>> = vec![Vec::new(); n];
    for b in traces.rates.as_mut().unwrap().batches().unwrap() {
        let t = u64s(b.column(0).as_ref());
        let f = u64s(b.column(1).as_ref());
        let r = u64s(b.column(2).as_ref());
        for i in 0..b.num_rows() {
            per_flow[f[i] as usize].push((t[i], r[i] as f64));
        }
    }
    let shares: Vec<f64> = per_flow
        .iter()
        .map(|changes| {
            let mut area = 0.0;
            let mut rate = changes.first().map(|c| c.1).unwrap_or(0.0);
            let mut at = half;
            for &(t, r) in changes {
                if t > half {
                    area += rate * (t - at) as f64;
                    at = t;
                }
                rate = r;
            }
            area += rate * (stop_ps - at) as f64;
            area / (stop_ps - half) as f64 / 1e9
        })
        .collect();
    let sum: f64 = shares.iter().sum();
    let sq: f64 = shares.iter().map(|x| x * x).sum();
    Fairness {
        jain: sum * sum / (n as f64 * sq),
        mean_queue_kb,
        shares,
    }
}

/// N long DCQCN flows through one 40 Gbps bottleneck with the paper's parameters (Kmin 5 KB,
/// Kmax 200 KB, Pmax 1 %, g 1/256, 50/55/55 us timers, B 10 MB, F 5, R_AI 40 Mbps), 1000-byte
/// packets as in the fluid model, 150 ms.
///
/// Expectations and tolerances:
/// - rates converge to the fair share: Jain's index of the flows' mean rates over the last half
///   > 0.99 (SIGCOMM 2015, section 5: DCQCN converges to fair share);
/// - the mean bottleneck queue over the last half is within 30 % of the fluid model's fixed point
///   q* (CoNEXT 2016, shared/reference/dcqcn_fluid_fixed_point.csv: 40G, N = 2, 4, 8, 16 ->
///   20.15, 41.81, 93.77, 200.00 KB). The simulator sits above q* for small N (+17..25 % when
///   written): its NP sends a CNP as soon as a marked packet arrives once 50 us have passed since
///   the last (the paper's rule), which yields fewer CNPs than the fluid model's "any mark in the
///   window" approximation, so the queue settles a little higher.
#[test]
fn dcqcn_flows_converge_to_fair_share_near_the_fluid_fixed_point() {
    let fixed_point_kb = [(2, 20.15), (4, 41.81), (8, 93.77), (16, 200.00)];
    for (n, q_star) in fixed_point_kb {
        let f = measure(n, 150);
        assert!(
            f.jain > 0.99,
            "N={n}: Jain {:.4} (shares {:?})",
            f.jain,
            f.shares
        );
        let total: f64 = f.shares.iter().sum();
        assert!(
            (total - 40.0).abs() < 2.0,
            "N={n}: the flows use the bottleneck ({total:.2} Gbps)"
        );
        let err = (f.mean_queue_kb - q_star) / q_star;
        assert!(
            err.abs() < 0.30,
            "N={n}: mean queue {:.1} KB vs fixed point {q_star} KB ({:+.0} %)",
            f.mean_queue_kb,
            err * 100.0
        );
    }
}

#[test]
fn mellanox_variant_also_shares_fairly() {
    // The HPCC repository's DCQCN (alpha every 1 us, cuts gated to 4 us, 300 us timer, no byte
    // counter) with its own thresholds: it should still share the bottleneck (Jain > 0.95) and
    // keep it busy. (No published fixed point: a sanity check, not a validation.)
    let toml = fairness_scenario(4, "60ms")
        .replace(
            "cc = \"dcqcn\"",
            "cc = \"dcqcn\"\n        dcqcn = { variant = \"mellanox\" }",
        )
        .replace(
            "kmin = \"5KB\", kmax = \"200KB\", pmax = 0.01",
            "kmin = \"40KB\", kmax = \"160KB\", pmax = 0.2",
        );
    let mut sim = build(&toml);
    sim.run_to_end();
    let rows = sim.flow_rows();
    assert!(sim.stats().cnps_sent > 0);
    let sent: Vec<f64> = rows.iter().map(|r| r.packets_sent as f64).collect();
    let sum: f64 = sent.iter().sum();
    let jain = sum * sum / (4.0 * sent.iter().map(|x| x * x).sum::<f64>());
    assert!(jain > 0.95, "Jain {jain:.3} of packets sent {sent:?}");
    // 60 ms at 40 Gbps of 1000-byte packets is 300k packets.
    assert!(
        sum > 0.85 * 300_000.0,
        "the bottleneck stayed busy: {sum} packets"
    );
}

fn incast16(pfc: bool, cc: &str) -> Simulation {
    let mut sim = build(&format!(
        r#"
        [topology]
        kind = "leaf_spine"
        leaves = 2
        spines = 2
        hosts_per_leaf = 16
        link_rate = "100Gbps"
        link_delay = "1us"
        [switch]
        buffer = "4MB"
        ecn = {{ kmin = "20KB", kmax = "200KB", pmax = 0.01 }}
        pfc = {{ enabled = {pfc} }}
        [transport]
        cc = "{cc}"
        rto = "500us"
        [[workload]]
        kind = "incast"
        receiver = 0
        senders = 16
        size = "2MB"
        "#
    ));
    sim.run_to_end();
    sim.check_conservation().unwrap();
    sim
}

/// 16-to-1 incast of 2 MB flows at 100 Gbps into a 4 MB switch buffer (DCQCN paper section 2
/// and Figs. 3-4; shared/reference/README.md section 6.2):
/// - with PFC, nothing is dropped and no queue exceeds the buffer;
/// - with drop-tail and no PFC, the buffer overflows and packets are dropped;
/// - with DCQCN on top of PFC, the total pause time falls sharply (here by more than 5x).
#[test]
fn pfc_makes_incast_lossless_and_dcqcn_cuts_pauses() {
    let pfc = incast16(true, "none");
    let s = pfc.stats();
    assert_eq!(s.packets_dropped, 0, "{s:?}");
    assert!(s.max_queue_bytes <= 4_000_000);
    assert!(s.pfc_pause_frames > 0 && s.pfc_resume_frames > 0);
    assert_eq!(s.pfc_deadlocks, 0);
    assert_eq!(s.flows_finished, 16);

    let lossy = incast16(false, "none");
    let l = lossy.stats();
    assert!(l.packets_dropped > 1000, "{l:?}");
    assert_eq!(l.pfc_pause_frames, 0);
    assert_eq!(l.flows_finished, 16);

    let dcqcn = incast16(true, "dcqcn");
    let d = dcqcn.stats();
    assert_eq!(d.packets_dropped, 0);
    assert!(d.cnps_sent > 0);
    assert!(
        d.paused_ps * 5 < s.paused_ps,
        "pause time {} ps with DCQCN vs {} ps without",
        d.paused_ps,
        s.paused_ps
    );
}

fn victim(cc: &str, incast: bool) -> (f64, u64) {
    let incast_wl = if incast {
        r#"
        [[workload]]
        kind = "incast"
        name = "incast"
        receiver = 8
        senders = [0, 1, 2, 3, 4, 5, 6, 16, 17, 18, 19, 20, 21, 22, 23]
        size = "20MB"
        "#
    } else {
        ""
    };
    let mut sim = build(&format!(
        r#"
        [topology]
        kind = "leaf_spine"
        leaves = 3
        spines = 1
        hosts_per_leaf = 8
        link_rate = "40Gbps"
        link_delay = "1us"
        [switch]
        buffer = "2MB"
        ecn = {{ kmin = "5KB", kmax = "200KB", pmax = 0.01 }}
        pfc = {{ enabled = true }}
        [transport]
        cc = "{cc}"
        [[workload]]
        kind = "flows"
        name = "victim"
        flows = [{{ src = 7, dst = 16, size = "20MB" }}]
        {incast_wl}
        "#
    ));
    sim.run_to_end();
    sim.check_conservation().unwrap();
    let r = &sim.flow_rows()[0];
    let fct = r.finish_ps.unwrap() - r.start_ps;
    (
        r.size_bytes as f64 * 8.0 / (fct as f64 * 1e-12) / 1e9,
        sim.stats().paused_ps,
    )
}

/// A victim flow that shares only an upstream link with a 15-to-1 incast (it goes from leaf 0 to
/// leaf 2; the incast's bottleneck is a host on leaf 1). PFC pauses propagate from leaf 1 through
/// the spine to leaf 0's uplink and stall the victim (head-of-line blocking, DCQCN paper Fig. 4);
/// with DCQCN the senders slow down, pauses mostly stop and the victim recovers much of its rate.
/// Tolerances: the victim keeps under half its solo rate under PFC alone, and DCQCN more than
/// doubles that.
#[test]
fn victim_flow_suffers_head_of_line_blocking_and_recovers_with_dcqcn() {
    let (alone, _) = victim("none", false);
    let (pfc_only, paused) = victim("none", true);
    let (with_dcqcn, paused_dcqcn) = victim("dcqcn", true);
    assert!(
        alone > 38.0,
        "alone the victim runs at line rate: {alone:.2} Gbps"
    );
    assert!(
        pfc_only < alone / 2.0,
        "PFC alone: {pfc_only:.2} Gbps of {alone:.2}"
    );
    assert!(
        with_dcqcn > 2.0 * pfc_only,
        "DCQCN: {with_dcqcn:.2} Gbps vs {pfc_only:.2} Gbps"
    );
    assert!(paused_dcqcn * 10 < paused);
}
