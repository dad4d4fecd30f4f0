//! Open-loop synthetic traffic (`kind = "synthetic"`): patterns, injection rate, the measurement
//! window's statistics, FIFO NIC arbitration, determinism and scenario errors.
//!
//! Validation sources and tolerances (each test says which it checks):
//! - Injection: a Bernoulli source generates Binomial(slots, load) messages, a Poisson source
//!   Poisson(slots x load); the realised offered load is checked within 4 standard deviations.
//! - M/D/1: one sender to one receiver over an otherwise idle path, Poisson messages of a fixed
//!   size, FIFO NIC: the NIC is an M/D/1 queue with service time S = the message's wire time at the
//!   host link rate, so latency - ideal FCT is the queueing delay, whose mean is the
//!   Pollaczek-Khinchine value rho x S / (2 (1 - rho)) (Kleinrock, Queueing Systems vol. 1, 1975,
//!   eq. 5.73 with C_b^2 = 0). Tolerance 5 %: the batch-means standard error of the measured mean
//!   is about 1.1 % at rho = 0.8 and 0.7 % at rho = 0.5 for the ~220 000 and ~360 000 messages of a
//!   300 ms run (printed by the test), so 5 % is more than 4 standard errors, while a missing or
//!   doubled queueing term (or round-robin service, which delays every message of several packets
//!   behind its successors) fails.

use fabricemu_core::engine::SyntheticStats;
use fabricemu_core::ids::FlowId;
use fabricemu_core::scenario::{parse_toml, ScenarioError};
use fabricemu_core::workload::{self, Start};
use fabricemu_core::Simulation;

use crate::common;
use common::{run, scenario_error as err, spec};

fn stats(sim: &Simulation) -> SyntheticStats {
    sim.synthetic_stats().expect("a synthetic workload")
}

fn start_of(s: Start) -> u64 {
    match s {
        Start::At(t) => t,
        Start::After { .. } => panic!("synthetic flows start at a time"),
    }
}

// ---- patterns on real topologies ------------------------------------------------------------

/// (src, dst) of every message the scenario's first workload generates.
fn pairs(toml: &str) -> Vec<(u32, u32)> {
    let s = spec(toml);
    let plan = workload::plan(&s.workloads, s.seed).unwrap();
    plan.flows
        .iter()
        .map(|f| (f.src.get(), f.dst.get()))
        .collect()
}

const DRAGONFLY: &str = r#"
stop = "20us"
[topology]
kind = "dragonfly"
p = 2
a = 4
h = 2
g = 9
[[workload]]
kind = "synthetic"
load = 0.5
size = "4KiB"
"#;

#[test]
fn worst_case_sends_to_the_next_group_of_each_topology() {
    // Group sizes: dragonfly p*a = 8 (9 groups), fat tree k=4 pods of 4, leaf-spine leaves of 3.
    let cases = [
        (format!("{DRAGONFLY}pattern = \"worst_case\"\n"), 8, 72),
        (
            "stop = \"50us\"\n[topology]\nkind = \"fat_tree\"\nk = 4\n[[workload]]\nkind = \
             \"synthetic\"\npattern = \"worst_case\"\nload = 0.5\nsize = \"4KiB\"\n"
                .to_string(),
            4,
            16,
        ),
        (
            "stop = \"50us\"\n[topology]\nkind = \"leaf_spine\"\nleaves = 5\nspines = 2\n\
             hosts_per_leaf = 3\n[[workload]]\nkind = \"synthetic\"\npattern = \"worst_case\"\n\
             load = 0.5\nsize = \"4KiB\"\n"
                .to_string(),
            3,
            15,
        ),
    ];
    for (toml, gs, n) in cases {
        let p = pairs(&toml);
        assert!(p.len() > 100, "{} messages", p.len());
        let groups = n / gs;
        for &(s, d) in &p {
            assert_eq!(d / gs, (s / gs + 1) % groups, "{s} -> {d} (groups of {gs})");
        }
    }
}

#[test]
fn permutation_tornado_and_shift_on_a_dragonfly() {
    let p = pairs(&format!("{DRAGONFLY}pattern = \"permutation\"\n"));
    let mut image = vec![u32::MAX; 72];
    for &(s, d) in &p {
        assert_ne!(s, d, "no fixed point");
        assert!(
            image[s as usize] == u32::MAX || image[s as usize] == d,
            "fixed for the run"
        );
        image[s as usize] = d;
    }
    let mut seen: Vec<u32> = image.iter().copied().filter(|&d| d != u32::MAX).collect();
    let len = seen.len();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(
        seen.len(),
        len,
        "a bijection: no two senders share a destination"
    );
    // Tornado: 9 groups of 8, offset floor(9/2) = 4.
    for (s, d) in pairs(&format!("{DRAGONFLY}pattern = \"tornado\"\n")) {
        assert_eq!(d, ((s / 8 + 4) % 9) * 8 + s % 8);
    }
    // Shift: default one group (8 hosts); explicit 5.
    for (s, d) in pairs(&format!("{DRAGONFLY}pattern = \"shift\"\n")) {
        assert_eq!(d, (s + 8) % 72);
    }
    for (s, d) in pairs(&format!("{DRAGONFLY}pattern = \"shift\"\nshift = 5\n")) {
        assert_eq!(d, (s + 5) % 72);
    }
}

#[test]
fn hot_spot_share_within_statistical_bounds() {
    // 72 hosts, hot {3, 40}, hot_fraction 0.25: a cold sender's message reaches a hot host with
    // probability 0.25 + 0.75 x 2/71; binomial sd over the n messages of cold senders; 4 sd.
    let toml = format!(
        "{}pattern = \"hot_spot\"\nhot_spot = [3, 40]\nhot_fraction = 0.25\n",
        DRAGONFLY.replace("\"20us\"", "\"200us\"")
    );
    let p = pairs(&toml);
    let cold: Vec<_> = p.iter().filter(|(s, _)| *s != 3 && *s != 40).collect();
    let n = cold.len() as f64;
    let hot = cold.iter().filter(|(_, d)| *d == 3 || *d == 40).count() as f64;
    let expect = 0.25 + 0.75 * 2.0 / 71.0;
    let sd = (expect * (1.0 - expect) / n).sqrt();
    assert!(
        (hot / n - expect).abs() < 4.0 * sd,
        "hot share {} over {n} messages, expected {expect} +- {sd}",
        hot / n
    );
    assert!(p.iter().all(|(s, d)| s != d));
}

// ---- injection rate and the measurement window ------------------------------------------------

#[test]
fn realised_offered_load_matches_the_target() {
    // k=4 fat tree (16 hosts), 4 KiB messages (4158 wire bytes, 332.64 ns slots at 100 Gbps),
    // 400 us window: about 19 240 slots. Bernoulli: sd of the load sqrt(load (1 - load) / slots);
    // Poisson: sqrt(load / slots). Within 4 sd.
    for process in ["bernoulli", "poisson"] {
        for load in [0.2f64, 0.6] {
            let sim = run(&format!(
                "stop = \"420us\"\nwarmup = \"20us\"\n[topology]\nkind = \"fat_tree\"\nk = 4\n\
                 [[workload]]\nkind = \"synthetic\"\npattern = \"uniform_random\"\nload = {load}\n\
                 size = \"4KiB\"\nprocess = \"{process}\"\n"
            ));
            let st = stats(&sim);
            let slots = 16.0 * 400e6 / 332_640.0;
            let sd = if process == "bernoulli" {
                (load * (1.0 - load) / slots).sqrt()
            } else {
                (load / slots).sqrt()
            };
            assert_eq!(st.window_ps, 400_000_000);
            assert!(
                (st.offered_load - load).abs() < 4.0 * sd,
                "{process} {load}: offered {} (sd {sd})",
                st.offered_load
            );
        }
    }
}

#[test]
fn low_load_uniform_random_is_accepted_with_near_ideal_latency() {
    // UR at 10 % on a k=4 fat tree (non-blocking): everything offered is delivered. Accepted and
    // offered differ only by the messages in flight at the window's edges (a few us of a 300 us
    // window), so within 3 %. Latency: each message alone would take its ideal FCT; at 10 % load
    // the source queue adds rho/(2(1 - rho)) ~ 6 % of a slot on average and the receivers' links
    // (each also at 10 %) a little more, so the mean latency is within 15 % of the mean ideal FCT
    // and above it.
    let sim = run(r#"
stop = "320us"
warmup = "20us"
[topology]
kind = "fat_tree"
k = 4
[[workload]]
kind = "synthetic"
pattern = "uniform_random"
load = 0.1
size = "4KiB"
"#);
    let st = stats(&sim);
    assert!(st.messages_measured > 1000, "{st:?}");
    let rel = (st.accepted_throughput - st.offered_load).abs() / st.offered_load;
    assert!(
        rel < 0.03,
        "accepted {} offered {}",
        st.accepted_throughput,
        st.offered_load
    );
    assert!((st.offered_load - 0.1).abs() < 0.02, "{st:?}");
    // In flight at the stop: the arrival rate (16 x 0.1 / 332.64 ns) x the latency (~5 us) ~ 24.
    assert!(st.messages_unfinished < 60, "{st:?}");
    let w = sim.world();
    let (mut sum, mut n) = (0f64, 0u64);
    for id in w.flows.ids() {
        let f = w.flow_brief(id);
        if f.start >= st.warmup_ps && f.start < st.stop_ps && f.finish.is_some() {
            sum += w.ideal_fct(id) as f64;
            n += 1;
        }
    }
    assert_eq!(n, st.messages_measured);
    let ideal = sum / n as f64;
    let mean = st.latency_mean_ps.unwrap();
    assert!(
        mean >= ideal && mean < 1.15 * ideal,
        "mean latency {mean} ps, ideal {ideal} ps"
    );
    assert!(st.latency_p50_ps.unwrap() <= st.latency_p99_ps.unwrap());
    assert!(st.latency_p99_ps.unwrap() <= st.latency_max_ps.unwrap() as f64);
}

#[test]
fn overload_saturates_below_the_offered_load() {
    // Hot spot at full load: the 15 senders' share to host 0 alone exceeds its link, so accepted
    // throughput must fall clearly below the offered load and messages stay unfinished.
    let sim = run(r#"
stop = "120us"
warmup = "20us"
[topology]
kind = "leaf_spine"
leaves = 4
spines = 2
hosts_per_leaf = 4
[[workload]]
kind = "synthetic"
pattern = "hot_spot"
hot_spot = [0]
hot_fraction = 0.5
load = 1.0
size = "4KiB"
"#);
    let st = stats(&sim);
    assert!(st.offered_load > 0.95, "{st:?}");
    assert!(st.accepted_throughput < 0.8 * st.offered_load, "{st:?}");
    assert!(st.messages_unfinished > 100, "{st:?}");
}

// ---- M/D/1 ----------------------------------------------------------------------------------

/// Two hosts on two leaves: each sends to the other, Poisson messages of 16 KiB (4 packets), FIFO
/// NICs. ACKs are 1 byte so the reverse traffic does not perturb the queue (0.08 ns per message).
fn md1(rho: f64) {
    let stop_us = 300_000;
    let sim = run(&format!(
        r#"
stop = "{stop_us}us"
warmup = "1ms"
seed = 7
[topology]
kind = "leaf_spine"
leaves = 2
spines = 1
hosts_per_leaf = 1
[transport]
ack_size = "1B"
[nic]
arbitration = "fifo"
[[workload]]
kind = "synthetic"
pattern = "uniform_random"
process = "poisson"
load = {rho}
size = "16KiB"
"#
    ));
    let st = stats(&sim);
    let w = sim.world();
    // S: 4 packets of 4096 + 62 bytes at 100 Gbps.
    let s_ps = 4.0 * 4158.0 * 8.0 / 100e9 * 1e12;
    let ideal = w.ideal_fct(FlowId::new(0)) as f64;
    let mut waits: Vec<f64> = Vec::new();
    for id in w.flows.ids() {
        let f = w.flow_brief(id);
        if let (true, Some(finish)) = (f.start >= st.warmup_ps, f.finish) {
            waits.push((finish - f.start) as f64 - ideal);
        }
    }
    assert_eq!(waits.len() as u64, st.messages_measured);
    assert!(
        waits.iter().all(|&x| x >= 0.0),
        "no message beats its ideal FCT"
    );
    let n = waits.len() as f64;
    let mean = waits.iter().sum::<f64>() / n;
    let expected = rho * s_ps / (2.0 * (1.0 - rho));
    // Batch-means standard error (100 batches of ~3000 messages, much longer than the queue's
    // correlation time; 100 batches, in generation order; both hosts interleaved).
    let b = waits.len() / 100;
    let batch: Vec<f64> = waits
        .chunks(b)
        .take(100)
        .map(|c| c.iter().sum::<f64>() / c.len() as f64)
        .collect();
    let bm = batch.iter().sum::<f64>() / 100.0;
    let se = (batch.iter().map(|x| (x - bm).powi(2)).sum::<f64>() / 99.0 / 100.0).sqrt();
    let rel = (mean - expected) / expected;
    println!(
        "M/D/1 rho {rho}: {} messages, mean wait {:.1} ns, P-K {:.1} ns, error {:+.2} %, \
         batch-means SE {:.2} %",
        waits.len(),
        mean / 1e3,
        expected / 1e3,
        rel * 100.0,
        se / expected * 100.0
    );
    assert!(
        rel.abs() < 0.05,
        "rho {rho}: mean wait {mean} ps vs Pollaczek-Khinchine {expected} ps (SE {se})"
    );
    // The latency the run reports is the same mean plus the ideal FCT.
    let reported = st.latency_mean_ps.unwrap() - ideal;
    assert!((reported - mean).abs() < 1.0, "{reported} vs {mean}");
}

#[test]
fn md1_waiting_time_rho_05() {
    md1(0.5);
}

#[test]
fn md1_waiting_time_rho_08() {
    md1(0.8);
}

#[test]
fn fifo_sends_a_message_whole_and_round_robin_interleaves() {
    // Two 8-packet messages from host 0 at once: FIFO finishes the first after 8 packet times,
    // round robin after about 15.
    let base = r#"
stop = "all_flows_done"
[topology]
kind = "leaf_spine"
leaves = 2
spines = 1
hosts_per_leaf = 1
[[workload]]
kind = "flows"
flows = [{src = 0, dst = 1, size = "32KiB"}, {src = 0, dst = 1, size = "32KiB"}]
"#;
    let fct = |toml: &str| -> Vec<u64> {
        let sim = run(toml);
        let w = sim.world();
        w.flows
            .ids()
            .map(|id| w.flow_brief(id))
            .map(|f| f.finish.unwrap() - f.start)
            .collect()
    };
    let rr = fct(base);
    let fifo = fct(&base.replace(
        "[[workload]]",
        "[nic]\narbitration = \"fifo\"\n[[workload]]",
    ));
    let pkt = 4158 * 8 * 10; // ps per packet at 100 Gbps
    assert_eq!(
        fifo[1] - fifo[0],
        8 * pkt,
        "FIFO: the second waits for the whole first"
    );
    assert_eq!(
        rr[1] - rr[0],
        pkt,
        "round robin: they finish one packet apart"
    );
}

// ---- determinism and outputs ------------------------------------------------------------------

const SMALL: &str = r#"
stop = "60us"
warmup = "10us"
seed = 5
[topology]
kind = "fat_tree"
k = 4
[[workload]]
kind = "synthetic"
pattern = "uniform_random"
load = 0.4
size = "8KiB"
"#;

#[test]
fn same_seed_same_flows() {
    let a = run(SMALL).flow_rows();
    let b = run(SMALL).flow_rows();
    assert!(a.len() > 100);
    assert_eq!(a, b);
    let c = run(&SMALL.replace("seed = 5", "seed = 6")).flow_rows();
    assert_ne!(a, c);
    // Flow ids follow generation time.
    let s = spec(SMALL);
    let plan = workload::plan(&s.workloads, s.seed).unwrap();
    assert!(plan
        .flows
        .windows(2)
        .all(|w| start_of(w[0].start) <= start_of(w[1].start)));
}

#[test]
fn run_json_and_flows_carry_the_measurement() {
    let dir = common::scratch("synthetic", "measurement");
    let (file, scenario) = parse_toml(SMALL, "small.toml").unwrap();
    let mut sim = Simulation::build(&scenario).unwrap();
    sim.run_to_end();
    let json = fabricemu_core::scenario::to_json(&file);
    let run = fabricemu_core::output::write_outputs(&dir, &mut sim, &json, 5, false, 0.0).unwrap();
    let s = &run["synthetic"];
    let st = stats(&sim);
    assert_eq!(
        s["accepted_throughput"].as_f64(),
        Some(st.accepted_throughput)
    );
    assert_eq!(s["messages_measured"].as_u64(), Some(st.messages_measured));
    assert_eq!(s["window_ps"].as_u64(), Some(50_000_000));
    assert_eq!(run["workloads"][0]["kind"], "synthetic");
    assert!(run["workloads"][0]["offered_load"].as_f64().unwrap() > 0.3);
    // flows.arrow: `measured` is true exactly for messages generated in [warmup, stop).
    let f = std::fs::File::open(dir.join("flows.arrow")).unwrap();
    let reader = arrow_ipc::reader::FileReader::try_new(f, None).unwrap();
    let (mut measured, mut outside) = (0u64, 0u64);
    for batch in reader {
        use arrow_array::cast::AsArray;
        use arrow_array::types::Int64Type;
        let batch = batch.unwrap();
        let m = batch.column_by_name("measured").unwrap().as_boolean();
        let start = batch
            .column_by_name("start_ps")
            .unwrap()
            .as_primitive::<Int64Type>();
        for i in 0..batch.num_rows() {
            let inside = start.value(i) >= 10_000_000;
            assert_eq!(m.value(i), inside);
            if inside {
                measured += 1;
            } else {
                outside += 1;
            }
        }
    }
    assert_eq!(measured, st.messages_generated);
    assert!(outside > 0);
    let _ = std::fs::remove_dir_all(&dir);
}

// ---- errors ---------------------------------------------------------------------------------

const BASE: &str = r#"stop = "100us"
warmup = "10us"
[topology]
kind = "fat_tree"
k = 4

[[workload]]
kind = "synthetic"
pattern = "uniform_random"
load = 0.5
size = "4KiB"
"#;

fn base_with(from: &str, to: &str) -> String {
    assert_eq!(BASE.matches(from).count(), 1, "{from:?} must occur once");
    BASE.replace(from, to)
}

#[track_caller]
fn check(e: &ScenarioError, path: &str, line: usize, fragment: &str) {
    assert_eq!(e.path, path, "path of {e}");
    assert_eq!(e.line, Some(line), "line of {e}");
    assert!(e.column.is_some(), "column of {e}");
    assert!(
        e.message.contains(fragment),
        "{:?} lacks {fragment:?}",
        e.message
    );
    assert!(
        e.to_string().starts_with(&format!("bad.toml:{line}:")),
        "{e}"
    );
}

#[test]
fn base_is_valid() {
    let s = spec(BASE);
    assert_eq!(s.warmup_ps, 10_000_000);
}

#[test]
fn errors_name_the_key() {
    check(
        &err(&base_with("load = 0.5", "load = 0")),
        "workload.0.load",
        10,
        "in (0, 1]",
    );
    check(
        &err(&base_with("load = 0.5", "load = 1.5")),
        "workload.0.load",
        10,
        "found 1.5",
    );
    check(
        &err(&base_with("\"uniform_random\"", "\"uniform\"")),
        "workload.0.pattern",
        9,
        "expected one of \"uniform_random\"",
    );
    check(
        &err(&base_with("size = \"4KiB\"", "size = \"4KiB\"\nshift = 3")),
        "workload.0.shift",
        12,
        "only for pattern = \"shift\"",
    );
    check(
        &err(&base_with(
            "\"uniform_random\"",
            "\"hot_spot\"\nhot_spot = [0, 16]\nhot_fraction = 0.5",
        )),
        "workload.0.hot_spot.1",
        10,
        "out of range",
    );
    check(
        &err(&base_with("warmup = \"10us\"", "warmup = \"100us\"")),
        "warmup",
        2,
        "must be before stop",
    );
    check(
        &err(&base_with(
            "size = \"4KiB\"",
            "size = \"4KiB\"\nprocess = \"uniform\"",
        )),
        "workload.0.process",
        12,
        "\"bernoulli\", \"poisson\"",
    );
    check(
        &err(&base_with("\"uniform_random\"", "\"shift\"\nshift = 16")),
        "workload.0.shift",
        10,
        "sends every host to itself",
    );
    check(
        &err(&format!("{BASE}[nic]\narbitration = \"lifo\"\n")),
        "nic.arbitration",
        13,
        "\"round_robin\", \"fifo\"",
    );
    // A synthetic workload needs a stop time (and a warmup needs one too).
    let e = err(&base_with("stop = \"100us\"\nwarmup = \"10us\"\n", ""));
    check(&e, "workload.0.kind", 6, "stop");
    let e = err(&base_with("warmup = \"10us\"\n", "").replace("\"100us\"", "\"all_flows_done\""));
    check(&e, "workload.0.kind", 7, "needs the top-level key stop");
    // Tornado on one group.
    let one_leaf = "stop = \"10us\"\n[topology]\nkind = \"leaf_spine\"\nleaves = 1\nspines = 1\n\
                    hosts_per_leaf = 4\n[[workload]]\nkind = \"synthetic\"\npattern = \"tornado\"\n\
                    load = 0.5\nsize = \"4KiB\"\n";
    check(
        &err(one_leaf),
        "workload.0.pattern",
        9,
        "at least two groups",
    );
}
