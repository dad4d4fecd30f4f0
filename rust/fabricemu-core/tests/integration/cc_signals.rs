//! Each controller's own signal in rates.arrow (issue 15, item 4): the per-interval columns
//! `delay_mean_ps`, `delay_max_ps`, `delay_samples` (Swift, NSCC), `ecn_fraction` (DCTCP, NSCC)
//! and `utilisation_max` (HPCC), checked on cases whose answer is known without the simulator:
//!
//! - one flow alone on a path of equal-rate links has no queue anywhere, so every RTT sample is
//!   the path's base RTT: 4 link delays plus, per hop and direction, one data packet's and one
//!   ACK's serialisation (docs/congestion-control.md, "Base RTT and hops"); mean = max = that,
//!   NSCC's queueing delay is 0, and no packet is marked (fraction 0);
//! - DCTCP: the marks the rows report (fraction x acked packets) are the marks the switch made;
//! - HPCC: a flow starting at line rate sends back to back, so its first utilisation samples
//!   are txRate / B = 1 (the HPCC paper's u with an empty queue), exactly up to rounding;
//! - one timed packet per round trip: the samples of a run number its duration / RTT.

use arrow_array::{Array, Float64Array, Int64Array, RecordBatch};

use crate::common;

const US: f64 = 1e6;

fn scenario(senders: usize, stop: &str, extra: &str) -> String {
    let extra = format!("[trace]\nrates = {{ interval = \"2us\" }}\n{extra}");
    common::one_switch(senders, "100Gbps", "1us", stop, &extra, "1GB")
}

/// rates.arrow's batches of a finished run of `text`.
fn rates(text: &str) -> Vec<RecordBatch> {
    let mut sim = common::run(text);
    sim.traces_mut().rates.as_mut().unwrap().batches().unwrap()
}

fn ints(b: &RecordBatch, name: &str) -> Int64Array {
    b.column_by_name(name)
        .unwrap_or_else(|| panic!("rates.arrow has no {name}"))
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap()
        .clone()
}

fn floats(b: &RecordBatch, name: &str) -> Float64Array {
    b.column_by_name(name)
        .unwrap_or_else(|| panic!("rates.arrow has no {name}"))
        .as_any()
        .downcast_ref::<Float64Array>()
        .unwrap()
        .clone()
}

/// The base RTT of a host-switch-host path at 100G with 1 us links, the default 4096 B MTU, 62 B
/// header and 66 B ACK, ps (switch latency is added once per switch and direction).
fn base_rtt_ps(switch_latency_ps: f64) -> f64 {
    let ser = |bytes: f64| bytes * 8.0 / 100e9 * 1e12;
    4.0 * US + 2.0 * (ser(4096.0 + 62.0) + ser(66.0)) + 2.0 * switch_latency_ps
}

#[test]
fn swift_alone_samples_its_base_rtt_once_per_round_trip() {
    let batches = rates(&scenario(1, "200us", "[transport]\ncc = \"swift\""));
    let (mut samples, mut rows, mut last_t) = (0i64, 0, 0i64);
    let mut delay = None;
    for b in &batches {
        let (t, d, mean, max, n) = (
            ints(b, "time_ps"),
            ints(b, "delay_ps"),
            ints(b, "delay_mean_ps"),
            ints(b, "delay_max_ps"),
            ints(b, "delay_samples"),
        );
        assert!(
            floats(b, "ecn_fraction").null_count() == b.num_rows(),
            "Swift has no ECN"
        );
        for i in 0..b.num_rows() {
            samples += n.value(i);
            last_t = t.value(i);
            if n.value(i) == 0 {
                assert!(mean.is_null(i) && max.is_null(i));
                continue;
            }
            rows += 1;
            // No queue: every sample is the same, the latest one too.
            assert_eq!(mean.value(i), max.value(i), "row {i}");
            assert_eq!(mean.value(i), d.value(i), "row {i}");
            delay = Some(d.value(i) as f64);
        }
    }
    let delay = delay.expect("delay samples");
    // The switch's default forwarding latency is what remains; it is the same every sample.
    let latency = (delay - base_rtt_ps(0.0)) / 2.0;
    eprintln!(
        "Swift alone: delay {:.4} us (base RTT without switch latency {:.4} us), {samples} \
         samples in {:.1} us over {rows} rows",
        delay / US,
        base_rtt_ps(0.0) / US,
        last_t as f64 / US
    );
    assert!(
        (0.0..=1.0 * US).contains(&latency),
        "delay {delay} ps against a base RTT of {} ps",
        base_rtt_ps(0.0)
    );
    assert!(rows > 10, "{rows} rows with samples");
    // One timed packet per round trip: the next one timed is the next to leave after the ACK,
    // which waits for the packet on the wire (up to one data packet's serialisation) and then
    // serialises itself. So a sample every RTT to RTT + 2 packet times.
    let pkt_ps = (4096.0 + 62.0) * 8.0 / 100e9 * 1e12;
    let (lo, hi) = (
        last_t as f64 / (delay + 2.0 * pkt_ps) - 1.0,
        last_t as f64 / delay + 1.0,
    );
    assert!(
        (lo..=hi).contains(&(samples as f64)),
        "{samples} samples, expected {lo:.1} to {hi:.1}"
    );
}

#[test]
fn swift_incast_rows_hold_their_interval_mean_and_max() {
    let batches = rates(&scenario(4, "300us", "[transport]\ncc = \"swift\""));
    let mut queued = false;
    for b in &batches {
        let (d, mean, max, n) = (
            ints(b, "delay_ps"),
            ints(b, "delay_mean_ps"),
            ints(b, "delay_max_ps"),
            ints(b, "delay_samples"),
        );
        for i in 0..b.num_rows() {
            if n.value(i) == 0 {
                continue;
            }
            // The latest sample is one of the interval's: between nothing and the max.
            assert!(mean.value(i) <= max.value(i));
            assert!(d.value(i) <= max.value(i));
            assert!(mean.value(i) as f64 >= base_rtt_ps(0.0));
            queued |= max.value(i) > mean.value(i);
        }
    }
    assert!(queued, "4-to-1: samples within an interval differ");
}

#[test]
fn nscc_alone_sees_no_queue_and_no_mark() {
    let extra = "[switch]\necn = { kmin = \"100KB\", kmax = \"400KB\", pmax = 0.2 }\n\
                 [transport]\ncc = \"nscc\"";
    let (mut delays, mut fractions) = (0, 0);
    for b in &rates(&scenario(1, "100us", extra)) {
        let (mean, max, n, f) = (
            ints(b, "delay_mean_ps"),
            ints(b, "delay_max_ps"),
            ints(b, "delay_samples"),
            floats(b, "ecn_fraction"),
        );
        for i in 0..b.num_rows() {
            if n.value(i) > 0 {
                assert_eq!((mean.value(i), max.value(i)), (0, 0), "row {i}");
                delays += 1;
            }
            if !f.is_null(i) {
                assert_eq!(f.value(i), 0.0, "row {i}");
                fractions += 1;
            }
        }
    }
    // Alone the window grows to its cap and stays: few rows, but at least one with samples.
    assert!(delays >= 1 && fractions >= 1, "{delays} / {fractions} rows");
}

/// DCTCP, 4 long flows through one 10G switch marking at K = 40 packets on enqueue (the setting
/// of cc_validation's DCTCP test): the marks the rows report (fraction x acked packets, summed
/// over every row) are the marks the switch made, less those on packets acknowledged after each
/// flow's last row or still in flight at the stop (at most a window and an interval's worth per
/// flow: tolerance 10 %); and alpha, the per-window EWMA of the same fraction, averages to it
/// within 0.1 over the second half.
#[test]
fn dctcp_rows_account_for_every_mark() {
    let n = 4usize;
    let text = format!(
        r#"
        stop = "10ms"
        [topology]
        kind = "leaf_spine"
        leaves = 1
        spines = 1
        hosts_per_leaf = {hosts}
        link_rate = "10Gbps"
        link_delay = "10us"
        [switch]
        ecn = {{ kmin = "60KB", kmax = "60KB", pmax = 1.0, mark = "enqueue" }}
        [transport]
        cc = "dctcp"
        mtu = "1460B"
        header = "40B"
        [trace]
        rates = {{ interval = "20us" }}
        [[workload]]
        kind = "incast"
        receiver = 0
        senders = {n}
        size = "1GB"
        "#,
        hosts = n + 1
    );
    let mut sim = common::run(&text);
    let switch_marks = sim.stats().ecn_marks as f64;
    let batches = sim.traces_mut().rates.as_mut().unwrap().batches().unwrap();
    let (mut marks, mut acked, mut late_marks, mut late_acked) = (0.0, 0.0, 0.0, 0.0);
    let (mut alpha_sum, mut alpha_rows) = (0.0, 0);
    for b in &batches {
        let (t, f, k, a) = (
            ints(b, "time_ps"),
            floats(b, "ecn_fraction"),
            ints(b, "acked_packets"),
            floats(b, "alpha"),
        );
        assert_eq!(ints(b, "delay_samples").null_count(), b.num_rows());
        for i in 0..b.num_rows() {
            let m = if f.is_null(i) {
                0.0
            } else {
                f.value(i) * k.value(i) as f64
            };
            marks += m;
            acked += k.value(i) as f64;
            if t.value(i) as f64 > 5_000.0 * US {
                late_marks += m;
                late_acked += k.value(i) as f64;
                alpha_sum += a.value(i);
                alpha_rows += 1;
            }
        }
    }
    let (frac, alpha) = (late_marks / late_acked, alpha_sum / alpha_rows as f64);
    eprintln!(
        "DCTCP N={n}: rows report {marks:.0} marks of {acked:.0} packets, the switch made \
         {switch_marks}; second half: marked fraction {frac:.3}, mean alpha {alpha:.3}"
    );
    assert!(switch_marks > 100.0, "{switch_marks} marks");
    assert!(marks <= switch_marks + 0.5, "{marks} > {switch_marks}");
    assert!(marks >= 0.9 * switch_marks, "{marks} of {switch_marks}");
    assert!(
        (frac - alpha).abs() <= 0.1,
        "fraction {frac} vs alpha {alpha}"
    );
}

#[test]
fn hpcc_first_samples_are_line_rate_then_settle_near_eta() {
    let batches = rates(&scenario(1, "300us", "[transport]\ncc = \"hpcc\""));
    let mut first = None;
    let mut late = Vec::new();
    for b in &batches {
        let (t, u, umax) = (
            ints(b, "time_ps"),
            floats(b, "utilisation"),
            floats(b, "utilisation_max"),
        );
        for i in 0..b.num_rows() {
            if umax.is_null(i) {
                continue;
            }
            first.get_or_insert(umax.value(i));
            if t.value(i) as f64 > 150.0 * US {
                late.push((umax.value(i), u.value(i)));
            }
        }
    }
    let first = first.expect("utilisation samples");
    let (lo, hi) = late.iter().fold((f64::MAX, f64::MIN), |(lo, hi), &(m, _)| {
        (lo.min(m), hi.max(m))
    });
    eprintln!(
        "HPCC alone: first u max {first:.4}; from 150 us on, u max in [{lo:.4}, {hi:.4}] over {} rows",
        late.len()
    );
    // Back-to-back packets at line rate, nothing queued: u = txRate / B = 1.
    assert!(
        (first - 1.0).abs() < 0.01,
        "first utilisation sample {first}"
    );
    // Settled, alone: U is held at eta = 0.95 (HPCC paper, Algorithm 1), and the samples with it.
    assert!(!late.is_empty());
    for (umax, u) in late {
        assert!((umax - 0.95).abs() < 0.03, "u max {umax} (U {u})");
    }
}
