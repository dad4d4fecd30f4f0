//! Issue 17: a fabric that changes. Validation of random loss against the analytic goodput of
//! selective recovery and go-back-N, of a switch failure against the max-flow bound of the
//! degraded fabric, and of a failure process against its MTBF; and the behaviour of flaps,
//! delays, asymmetric faults, component targets and faults.arrow.

use crate::common;

use std::collections::HashSet;

use arrow_array::{Array, Int64Array, ListArray, StringArray, UInt32Array};
use common::{read_arrow, run, scenario_error, scratch, write_run};
use fabricemu_core::ids::NodeId;
use fabricemu_core::scenario::load_toml;
use fabricemu_core::topology::summary::max_flow_between;
use fabricemu_core::Simulation;

const G100: f64 = 100e9;

/// One flow of `packets` MTU packets between two hosts of one leaf, the host's uplink losing each
/// data packet with probability `p` (one direction only: ACKs and NACKs are not lost).
fn lossy_flow(p: f64, recovery: &str, packets: u64, seed: u64) -> String {
    format!(
        r#"
seed = {seed}
[topology]
kind = "leaf_spine"
leaves = 2
spines = 1
hosts_per_leaf = 2
link_rate = "100Gbps"
link_delay = "500ns"
[transport]
rto = "20us"
loss_recovery = "{recovery}"
[[workload]]
kind = "flows"
flows = [{{src = 0, dst = 1, size = "{size}B"}}]
[[fault]]
link = ["host:0", "leaf:0"]
direction = "a->b"
kind = "loss"
rate = {p}
"#,
        size = packets * 4096
    )
}

fn goodput(text: &str) -> (f64, fabricemu_core::RunStats) {
    let sim = run(text);
    let rows = sim.flow_rows();
    let fct = rows[0].finish_ps.expect("finished") - rows[0].start_ps;
    (
        rows[0].size_bytes as f64 * 8.0 / (fct as f64 * 1e-12),
        sim.stats(),
    )
}

/// Serialisation of a 4096 + 62 byte data packet at 100 Gbps, ps.
const T_PKT: f64 = 4158.0 * 8.0 / G100 * 1e12;
/// The payload rate of a saturated 100 Gbps link.
const LINE: f64 = G100 * 4096.0 / 4158.0;
const RTO_PS: f64 = 20e6;

/// Packets a sender puts on the wire between a lost packet and the NACK its successor triggers
/// (the round trip of `lossy_flow`'s path in packet times, the packet being serialised when the
/// NACK arrives included): from the start of packet k+1 the NACK arrives after its two
/// serialisations (host, leaf), four 500 ns propagations and two 66-byte NACK serialisations.
fn nack_window() -> f64 {
    let ack = 66.0 * 8.0 / G100 * 1e12;
    ((2.0 * T_PKT + 4.0 * 500e3 + 2.0 * ack) / T_PKT).ceil()
}

/// Expected link slots per delivered packet (goodput = LINE / slots), the model of
/// docs/failures.md. Each transmission is lost independently with probability p; W = the NACK
/// window above; R = (RTO + round trip) / T, the packets sent while a timeout is pending.
///
/// - go-back-N: a loss costs the lost slot and the W packets sent before its NACK arrives (the
///   receiver discards them); a lost retransmission is not NACKed again (one NACK per gap), so
///   it waits for the timeout, and everything sent meanwhile (R slots) is discarded:
///   S = 1 + pW + p S',  S' = (1 + pR) / (1 - p).
/// - selective: a loss costs only its retransmission (the NACK comes after `reorder_threshold`
///   packets overtook the hole, while the link keeps carrying new data the receiver keeps); a lost
///   retransmission waits for the timeout (the link still carries new data), which then resends
///   from the hole: W - 1 duplicates before the ACK moves the sender on, once for the hole and
///   once for each other hole the R packets of the wait hold (pR of them, not NACKed while the
///   first is open): S = 1 + p S',  S' = (1 + p (W - 1)(1 + pR)) / (1 - p).
fn model_slots(p: f64, selective: bool) -> f64 {
    let w = nack_window();
    let r = RTO_PS / T_PKT + w;
    if selective {
        1.0 + p * (1.0 + p * (w - 1.0) * (1.0 + p * r)) / (1.0 - p)
    } else {
        1.0 + p * w + p * (1.0 + p * r) / (1.0 - p)
    }
}

/// Issue 17 validation: goodput of a long flow (20,000 packets) under Bernoulli loss p, against
/// the model above, within 5 %. Source: the model (derived in docs/failures.md); the
/// classic go-back-N efficiency (1 - p) / (1 + pW) of Bertsekas & Gallager, Data Networks, 2.4
/// is its first-order form. At p = 0.05 the loss-free goodput and the naive (1 - p) x line rate
/// are both outside the tolerance for selective recovery (14 % and 9 % off), and go-back-N falls
/// to about 60 % of the line rate, so the test tells the models apart.
#[test]
fn goodput_under_random_loss_matches_the_recovery_models() {
    for (recovery, selective, p) in [
        ("selective", true, 0.01),
        ("selective", true, 0.05),
        ("go_back_n", false, 0.01),
        ("go_back_n", false, 0.05),
    ] {
        let (g, st) = goodput(&lossy_flow(p, recovery, 20_000, 1));
        let expected = LINE / model_slots(p, selective);
        let err = (g / expected - 1.0).abs();
        assert!(
            err < 0.05,
            "{recovery} p={p}: goodput {:.2} Gbps, model {:.2} Gbps ({:.1} % off); {st:?}",
            g / 1e9,
            expected / 1e9,
            err * 100.0
        );
        assert!(st.corrupted_drops > 0);
    }
    // Without the fault, the flow runs at the line rate.
    let (g, st) = goodput(&lossy_flow(0.0, "selective", 20_000, 1));
    assert!((g / LINE - 1.0).abs() < 0.001, "{g}");
    assert_eq!(st.corrupted_drops, 0);
}

/// The loss draws: corrupted packets / transmissions on the lossy link match the configured
/// probability (a binomial test at 3.29 sigma, two-sided 0.1 %), for `rate` and for `ber`
/// (per-packet loss 1 - (1 - ber)^(8 x 4158 bits)), with a deterministic seed.
#[test]
fn loss_rate_and_ber_lose_the_stated_fraction() {
    let ber: f64 = 1e-6;
    let per_packet_ber = 1.0 - (1.0 - ber).powf(8.0 * 4158.0);
    for (text, p) in [
        (lossy_flow(0.02, "selective", 20_000, 7), 0.02),
        (
            lossy_flow(0.0, "selective", 20_000, 7).replace("rate = 0", &format!("ber = {ber}")),
            per_packet_ber,
        ),
    ] {
        let sim = run(&text);
        let st = sim.stats();
        let n = st.data_packets_sent as f64; // every data packet crosses the lossy link once
        let lost = st.corrupted_drops as f64;
        let sigma = (n * p * (1.0 - p)).sqrt();
        assert!(
            (lost - n * p).abs() < 3.29 * sigma,
            "lost {lost} of {n}, expected {} +- {}",
            n * p,
            3.29 * sigma
        );
        // Dropped packets are the flow's drops too, and the run conserves packets.
        assert_eq!(sim.flow_rows()[0].drops, st.corrupted_drops);
    }
}

/// Loss draws come from the link's own stream: the same seed gives the same run, another seed
/// another one, and a loss fault on another link does not move this link's draws.
#[test]
fn loss_draws_are_reproducible_and_per_link() {
    let a = run(&lossy_flow(0.02, "selective", 5_000, 3)).stats();
    let b = run(&lossy_flow(0.02, "selective", 5_000, 3)).stats();
    assert_eq!(a, b);
    let c = run(&lossy_flow(0.02, "selective", 5_000, 4)).stats();
    assert_ne!(a.corrupted_drops, 0);
    assert_ne!(a, c);
    // A second loss fault on a link this flow never crosses (host 2's uplink, on leaf 1).
    let other = format!(
        "{}
[[fault]]
link = [\"host:2\", \"leaf:1\"]
kind = \"loss\"
rate = 0.5
",
        lossy_flow(0.02, "selective", 5_000, 3)
    );
    let d = run(&other).stats();
    assert_eq!(a.corrupted_drops, d.corrupted_drops);
    assert_eq!(a.retransmitted_packets, d.retransmitted_packets);
}

/// Issue 17 validation: after a switch fails (`target = "spine:0"`), the aggregate throughput of
/// a permutation across the bisection equals the max-flow bound of the degraded fabric within
/// 10 %. Source: the max-flow min-cut theorem, computed by `topology::summary`'s Dinic code on
/// the fabric without the failed switch's links. Each of the 16 hosts of leaves 0-1 sends 4 MB
/// to its partner on leaves 2-3 and back: 1,600 Gbps of demand each way into 3 live uplinks per
/// leaf (600 Gbps each way; 800 with the spine). Spraying (the even split max-flow assumes) and
/// PFC (no loss to oversubscription).
#[test]
fn a_failed_spine_leaves_the_max_flow_of_the_degraded_fabric() {
    let mut flows = Vec::new();
    for h in 0..16 {
        flows.push(format!("{{src = {h}, dst = {}, size = \"4MB\"}}", h + 16));
        flows.push(format!("{{src = {}, dst = {h}, size = \"4MB\"}}", h + 16));
    }
    let text = format!(
        r#"
[topology]
kind = "leaf_spine"
leaves = 4
spines = 4
hosts_per_leaf = 8
link_rate = "100Gbps"
[switch]
pfc = {{ enabled = true }}
[routing]
load_balancing = "spray"
[[workload]]
kind = "flows"
flows = [{}]
[[fault]]
target = "spine:0"
at = "0us"
detection = "0us"
"#,
        flows.join(", ")
    );
    let (_, built) = load_toml(&text, "t.toml").unwrap_or_else(|e| panic!("{e}"));
    let down: HashSet<u32> = built.faults[0]
        .links
        .iter()
        .map(|l| l.egress().get())
        .collect();
    assert_eq!(down.len(), 8, "spine:0's 4 cables, both directions");
    let left: Vec<NodeId> = (0..16).map(NodeId::new).collect();
    let right: Vec<NodeId> = (16..32).map(NodeId::new).collect();
    let fabric = &built.fabric;
    let each_way = max_flow_between(fabric, &left, &right, |p| down.contains(&p.get()));
    assert_eq!(
        max_flow_between(fabric, &right, &left, |p| down.contains(&p.get())),
        each_way
    );
    assert_eq!(each_way, 600_000_000_000);
    let intact = max_flow_between(fabric, &left, &right, |_| false);
    assert_eq!(intact, 800_000_000_000);

    let mut sim = Simulation::new(built);
    sim.run_to_end();
    sim.check_conservation().unwrap();
    let rows = sim.flow_rows();
    assert_eq!(rows.len(), 32);
    let start = rows.iter().map(|r| r.start_ps).min().unwrap();
    let end = rows
        .iter()
        .map(|r| r.finish_ps.expect("all finish"))
        .max()
        .unwrap();
    let wire_bits: f64 = rows
        .iter()
        .map(|r| r.size_bytes as f64 * 4158.0 / 4096.0 * 8.0)
        .sum();
    let throughput = wire_bits / ((end - start) as f64 * 1e-12);
    let bound = 2.0 * each_way as f64;
    let err = (throughput / bound - 1.0).abs();
    assert!(
        err < 0.10,
        "aggregate {:.0} Gbps vs max-flow {:.0} Gbps ({:.1} % off)",
        throughput / 1e9,
        bound / 1e9,
        err * 100.0
    );
    // Nothing was lost to the failure (down from the start, noticed at once) and the intact
    // fabric's bound would be a third higher: the run saw the degraded fabric.
    assert!(throughput < 0.9 * 2.0 * intact as f64);
    assert_eq!(sim.stats().faults_applied, 1);
}

/// Issue 17 validation: a failure process over a long run draws as many failures as its MTBF
/// predicts. 16 leaf-spine cables, MTBF 1 ms and MTTR 10 us (both exponential) over 200 ms: by
/// the renewal theorem each cable fails about T / (MTBF + MTTR) times, 3,168 in all; the count is
/// (nearly) Poisson, so it must lie within 3.29 standard deviations (two-sided significance
/// 0.1 %) for the fixed seed. faults.arrow has one row per failure, each ended by its repair
/// (or still open at the stop), and link_down_ps matches the rows.
#[test]
fn a_failure_process_fails_as_often_as_its_mtbf_says() {
    let text = r#"
seed = 11
stop = "200ms"
[topology]
kind = "leaf_spine"
leaves = 4
spines = 4
hosts_per_leaf = 4
[[workload]]
kind = "flows"
flows = [{src = 0, dst = 5, size = "64KB"}]
[[failure_process]]
components = "links"
tier = "fabric"
mtbf = "1ms"
mttr = "10us"
"#;
    let dir = scratch("failures", "mtbf");
    let sim = write_run(text, &dir);
    let st = sim.stats();
    let expected = 16.0 * 200e-3 / (1e-3 + 10e-6);
    let n = st.faults_applied as f64;
    assert!(
        (n - expected).abs() < 3.29 * expected.sqrt(),
        "{n} failures, expected {expected:.0} +- {:.0}",
        3.29 * expected.sqrt()
    );
    let batches = read_arrow(&dir.join("faults.arrow"));
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    assert_eq!(rows as u64, st.faults_applied);
    let mut down_ps = 0u64;
    for b in &batches {
        let col = |name: &str| b.column_by_name(name).unwrap().clone();
        let source = col("source");
        let source = source.as_any().downcast_ref::<StringArray>().unwrap();
        let kind = col("kind");
        let kind = kind.as_any().downcast_ref::<StringArray>().unwrap();
        let target = col("target");
        let target = target.as_any().downcast_ref::<StringArray>().unwrap();
        let time = col("time_ps");
        let time = time.as_any().downcast_ref::<Int64Array>().unwrap();
        let end = col("end_ps");
        let end = end.as_any().downcast_ref::<Int64Array>().unwrap();
        let num = col("num_links");
        let num = num.as_any().downcast_ref::<UInt32Array>().unwrap();
        for i in 0..b.num_rows() {
            assert_eq!(source.value(i), "failure_process");
            assert_eq!(kind.value(i), "down");
            assert!(target.value(i).contains("--"), "{}", target.value(i));
            assert_eq!(num.value(i), 2);
            assert!(time.value(i) < 200_000_000_000);
            let e = if end.is_null(i) {
                200_000_000_000
            } else {
                end.value(i)
            };
            down_ps += 2 * (e - time.value(i)) as u64;
        }
    }
    // Failures of one cable never overlap (a cable fails again only after its repair).
    assert_eq!(down_ps, st.link_down_ps);
    // Mean repair 10 us: about 1 % of the cable time is down.
    let fraction = st.link_down_ps as f64 / (32.0 * 200e9);
    assert!(
        (fraction - 10e-6 / (1e-3 + 10e-6)).abs() < 0.002,
        "{fraction}"
    );
}

/// A flapping link: `count` down periods of `down`, `up` apart, each a row of faults.arrow;
/// routing follows each change after the detection delay; the run conserves packets.
#[test]
fn a_flapping_link_goes_down_count_times() {
    let text = r#"
stop = "1ms"
[topology]
kind = "leaf_spine"
leaves = 2
spines = 2
hosts_per_leaf = 2
[[workload]]
kind = "flows"
flows = [{src = 0, dst = 2, size = "4MB"}, {src = 1, dst = 3, size = "4MB"}]
[[fault]]
link = ["leaf:0", "spine:0"]
kind = "flap"
at = "10us"
down = "20us"
up = "80us"
count = 3
detection = "5us"
"#;
    let dir = scratch("failures", "flap");
    let sim = write_run(text, &dir);
    let st = sim.stats();
    assert_eq!(st.faults_applied, 3);
    assert_eq!(st.link_down_ps, 3 * 20_000_000 * 2);
    let b = &read_arrow(&dir.join("faults.arrow"))[0];
    let time = b.column_by_name("time_ps").unwrap();
    let time = time.as_any().downcast_ref::<Int64Array>().unwrap();
    let end = b.column_by_name("end_ps").unwrap();
    let end = end.as_any().downcast_ref::<Int64Array>().unwrap();
    let kind = b.column_by_name("kind").unwrap();
    let kind = kind.as_any().downcast_ref::<StringArray>().unwrap();
    let target = b.column_by_name("target").unwrap();
    let target = target.as_any().downcast_ref::<StringArray>().unwrap();
    let links = b.column_by_name("links").unwrap();
    let links = links.as_any().downcast_ref::<ListArray>().unwrap();
    assert_eq!(b.num_rows(), 3);
    for i in 0..3 {
        assert_eq!(time.value(i), 10_000_000 + i as i64 * 100_000_000);
        assert_eq!(end.value(i), 30_000_000 + i as i64 * 100_000_000);
        assert_eq!(kind.value(i), "flap");
        assert_eq!(target.value(i), "leaf:0--spine:0");
        assert_eq!(links.value(i).len(), 2);
    }
    // Both flows finished despite the flaps.
    assert_eq!(st.flows_finished, 2, "{st:?}");

    // Random periods (exponential) until a time: each drawn from the fault's own stream.
    let random = text
        .replace(
            "down = \"20us\"",
            "down = { distribution = \"exponential\", mean = \"20us\" }",
        )
        .replace(
            "up = \"80us\"",
            "up = { distribution = \"uniform\", min = \"50us\", max = \"100us\" }",
        )
        .replace("count = 3", "until = \"600us\"");
    let a = run(&random).stats();
    let b2 = run(&random).stats();
    assert_eq!(a, b2);
    assert!(a.faults_applied >= 4 && a.faults_applied <= 9, "{a:?}");
}

/// Added latency delays exactly the packets that cross the delayed direction, and ends.
#[test]
fn added_delay_adds_to_the_one_way_latency() {
    let base = r#"
[topology]
kind = "leaf_spine"
leaves = 2
spines = 1
hosts_per_leaf = 2
[[workload]]
kind = "flows"
flows = [{src = 0, dst = 1, size = "1KB", start = "1us"}, {src = 1, dst = 0, size = "1KB", start = "100us"}]
"#;
    let fct = |text: &str| -> Vec<u64> {
        run(text)
            .flow_rows()
            .iter()
            .map(|r| r.finish_ps.unwrap() - r.start_ps)
            .collect()
    };
    let plain = fct(base);
    let delayed = fct(&format!(
        "{base}
[[fault]]
link = [\"host:0\", \"leaf:0\"]
direction = \"a->b\"
kind = \"delay\"
delay = \"5us\"
until = \"50us\"
"
    ));
    // Flow 0 crosses host:0 -> leaf:0 while the delay lasts (a delay applies to packets that
    // start crossing the link while it lasts): 5 us later.
    assert_eq!(delayed[0], plain[0] + 5_000_000);
    // Flow 1 (leaf:0 -> host:0, the other direction, after the delay ended) is unchanged.
    assert_eq!(delayed[1], plain[1]);
}

/// One direction down: the other keeps carrying, and only one link counts as down.
#[test]
fn an_asymmetric_failure_takes_down_one_direction() {
    let text = r#"
stop = "300us"
[topology]
kind = "leaf_spine"
leaves = 2
spines = 2
hosts_per_leaf = 1
[[workload]]
kind = "flows"
flows = [{src = 0, dst = 1, size = "256KB"}]
[[fault]]
link = ["leaf:0", "spine:0"]
direction = "b->a"
at = "0us"
until = "100us"
"#;
    let dir = scratch("failures", "asym");
    let sim = write_run(text, &dir);
    assert_eq!(sim.stats().link_down_ps, 100_000_000);
    let b = &read_arrow(&dir.join("faults.arrow"))[0];
    let target = b.column_by_name("target").unwrap();
    let target = target.as_any().downcast_ref::<StringArray>().unwrap();
    assert_eq!(target.value(0), "spine:0->leaf:0");
    assert_eq!(sim.stats().flows_finished, 1);
}

/// Component targets take down every link of the component: a spine's cables, a GPU server's
/// GPU, NIC and scale-up links; a tier target covers the tier.
#[test]
fn components_take_down_what_the_fabric_attaches_to_them() {
    let base = r#"
[topology]
kind = "leaf_spine"
leaves = 4
spines = 2
hosts_per_leaf = 2
[[workload]]
kind = "flows"
flows = [{src = 0, dst = 7, size = "64KB"}]
"#;
    let faults = |extra: &str| {
        load_toml(
            &format!(
                "{base}
[[fault]]
{extra}
"
            ),
            "t.toml",
        )
        .unwrap_or_else(|e| panic!("{e}"))
        .1
        .faults
    };
    let f = faults("target = \"spine:1\"\nat = \"1us\"");
    assert_eq!(f[0].links.len(), 8);
    assert_eq!(&*f[0].target, "spine:1");
    let f = faults("target = \"host:3\"\nat = \"1us\"");
    assert_eq!(f[0].links.len(), 2);
    let f = faults("tier = \"host\"\nkind = \"loss\"\nrate = 1e-3");
    assert_eq!(f[0].links.len(), 16);
    assert_eq!(&*f[0].target, "tier:host");

    let cluster = r#"
[topology]
kind = "leaf_spine"
leaves = 4
spines = 2
hosts_per_leaf = 4
[cluster]
gpus_per_server = 4
nics_per_server = 4
scaleup = { gpus = 4 }
[[workload]]
kind = "flows"
flows = [{src = 0, dst = 9, size = "64KB"}]
[[fault]]
target = "server:1"
at = "1us"
"#;
    let (_, built) = load_toml(cluster, "t.toml").unwrap_or_else(|e| panic!("{e}"));
    // Server 1: 4 GPUs, each with a NIC link and a scale-up link, both directions.
    assert_eq!(built.faults[0].links.len(), 4 * 2 * 2);
    let mut sim = Simulation::new(built);
    sim.run_to_end();
    sim.check_conservation().unwrap();
}

#[test]
fn bad_fault_targets_name_the_key_and_what_exists() {
    let base = r#"
[topology]
kind = "leaf_spine"
leaves = 4
spines = 8
hosts_per_leaf = 2
[[workload]]
kind = "flows"
flows = [{src = 0, dst = 7, size = "64KB"}]
"#;
    let built_err = |extra: &str| match load_toml(
        &format!(
            "{base}
{extra}
"
        ),
        "t.toml",
    ) {
        Ok(_) => panic!("expected an error for {extra}"),
        Err(e) => e,
    };
    let e = built_err(
        "[[fault]]
target = \"spine:9\"",
    );
    assert_eq!(e.path, "fault.0.target");
    assert!(
        e.message
            .contains("spine:9 does not exist: there are 8 (spine:0..=7)"),
        "{e}"
    );
    let e = built_err(
        "[[fault]]
target = \"server:1\"",
    );
    assert!(
        e.message.contains("servers exist only on a [cluster]"),
        "{e}"
    );
    let e = built_err(
        "[[fault]]
tier = \"core\"
kind = \"loss\"
rate = 0.1",
    );
    assert_eq!(e.path, "fault.0.tier");
    assert!(e.message.contains("its tiers are host, fabric"), "{e}");
    let e = built_err(
        "[[failure_process]]
components = \"router\"
mtbf = \"1ms\"
mttr = \"1us\"
until = \"1ms\"",
    );
    assert_eq!(e.path, "failure_process.0.components");
    assert!(e.message.contains("leaf, spine"), "{e}");

    let err = |extra: &str| {
        scenario_error(&format!(
            "{base}
{extra}
"
        ))
    };
    let e = err("[[fault]]
tier = \"fabrc\"");
    assert_eq!(e.path, "fault.0.tier");
    assert!(e.message.contains("expected one of host, fabric"), "{e}");
    let e = err("[[fault]]
target = \"spine:1\"
direction = \"a->b\"");
    assert_eq!(e.path, "fault.0.direction");
    let e = err("[[fault]]
link = [\"leaf:0\", \"spine:0\"]
direction = \"up\"");
    assert!(e.message.contains("\"a->b\""), "{e}");
    let e = err("[[fault]]
link = [\"leaf:0\", \"spine:0\"]
kind = \"loss\"
rate = 1.5");
    assert_eq!(e.path, "fault.0.rate");
    assert!(e.message.contains("probability in [0, 1)"), "{e}");
    let e = err("[[fault]]
link = [\"leaf:0\", \"spine:0\"]
kind = \"loss\"
rate = \"10Gbps\"");
    assert_eq!(e.path, "fault.0.rate");
    let e = err("[[fault]]
link = [\"leaf:0\", \"spine:0\"]
kind = \"flap\"
down = \"1us\"
up = \"1us\"");
    assert_eq!(e.path, "fault.0.until");
    let e = err("[[fault]]
link = [\"leaf:0\", \"spine:0\"]
kind = \"flap\"
down = { distribution = \"exponential\", max = \"1us\" }
up = \"1us\"
count = 2");
    assert_eq!(e.path, "fault.0.down.max");
    let e = err("[[fault]]
link = [\"leaf:0\", \"spine:0\"]
delay = \"1us\"");
    assert!(e.message.contains("needs kind = \"delay\""), "{e}");
    let e = err("[[fault]]
kind = \"down\"");
    assert_eq!(e.path, "fault.0.link");
    let e = err("[[failure_process]]
components = \"links\"
mtbf = \"1ms\"
mttr = \"1us\"");
    assert_eq!(e.path, "failure_process.0.until");
}

/// A flap or process that would expand into more periods than memory allows is refused.
#[test]
fn runaway_expansions_are_refused() {
    let text = r#"
[topology]
kind = "leaf_spine"
leaves = 2
spines = 2
hosts_per_leaf = 2
[[workload]]
kind = "flows"
flows = [{src = 0, dst = 3, size = "64KB"}]
[[fault]]
link = ["leaf:0", "spine:0"]
kind = "flap"
down = "1ns"
up = "1ns"
until = "100s"
"#;
    let e = load_toml(text, "t.toml").expect_err("refused");
    assert_eq!(e.path, "fault.0");
    assert!(e.message.contains("more than 1000000 down periods"), "{e}");
}

/// Limits: the periods of all entries together are capped, one delay adds at most 1 s, and
/// random periods near the end of the time range neither overflow nor apply after the stop.
#[test]
fn fault_times_and_counts_stay_bounded() {
    let base = r#"
stop = "1ms"
[topology]
kind = "leaf_spine"
leaves = 2
spines = 2
hosts_per_leaf = 2
[[workload]]
kind = "flows"
flows = [{src = 0, dst = 3, size = "64KB"}]
"#;
    let flap = "[[fault]]\nlink = [\"leaf:0\", \"spine:0\"]\nkind = \"flap\"\ndown = \"1ns\"\nup = \"1ns\"\ncount = 600000\n";
    let e = load_toml(&format!("{base}\n{flap}\n{flap}"), "t.toml").expect_err("capped");
    assert_eq!(e.path, "fault.1", "the second entry crosses the cap: {e}");
    let e = scenario_error(&format!(
        "{base}\n[[fault]]\nlink = [\"leaf:0\", \"spine:0\"]\nkind = \"delay\"\ndelay = \"2s\"\n"
    ));
    assert_eq!(e.path, "fault.0.delay");
    // Exponential periods with a mean of 10^6 s: draws may exceed the time range; they are
    // clamped, and nothing past the stop is applied.
    let huge = "[[fault]]\nlink = [\"leaf:0\", \"spine:0\"]\nkind = \"flap\"\nat = \"999999s\"\ndown = { distribution = \"exponential\", mean = \"1000000s\" }\nup = { distribution = \"exponential\", mean = \"1000000s\" }\ncount = 50\ndetection = \"1000000s\"\n";
    let sim = run(&format!("{base}\n{huge}"));
    assert_eq!(sim.stats().faults_applied, 0);
    assert_eq!(sim.fault_rows().len(), 0);
}
