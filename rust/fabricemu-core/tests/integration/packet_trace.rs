//! packets.arrow (per-packet events at egress queues: filters, bounds, consistency with the run's
//! counters) and latency.arrow (one-way latency histograms, exact on an idle path).

use std::collections::HashMap;
use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, UInt32Type, UInt8Type};
use arrow_array::RecordBatch;

use crate::common;

/// The record batches of packets.arrow (or latency.arrow) of `dir`.
struct Table(Vec<RecordBatch>);

impl Table {
    fn num_rows(&self) -> usize {
        self.0.iter().map(|b| b.num_rows()).sum()
    }
    fn schema(&self) -> arrow_schema::SchemaRef {
        self.0[0].schema()
    }
    fn cols(&self, name: &str) -> impl Iterator<Item = &arrow_array::ArrayRef> {
        let i = self.schema().index_of(name).unwrap();
        self.0.iter().map(move |b| b.column(i))
    }
}

fn table(dir: &Path, file: &str) -> Table {
    Table(common::read_arrow(&dir.join(file)))
}

fn i64s(t: &Table, name: &str) -> Vec<Option<i64>> {
    t.cols(name)
        .flat_map(|c| c.as_primitive::<Int64Type>().iter().collect::<Vec<_>>())
        .collect()
}

fn u32s(t: &Table, name: &str) -> Vec<Option<u32>> {
    t.cols(name)
        .flat_map(|c| c.as_primitive::<UInt32Type>().iter().collect::<Vec<_>>())
        .collect()
}

fn u8s(t: &Table, name: &str) -> Vec<u8> {
    t.cols(name)
        .flat_map(|c| c.as_primitive::<UInt8Type>().values().to_vec())
        .collect()
}

fn bools(t: &Table, name: &str) -> Vec<Option<bool>> {
    t.cols(name)
        .flat_map(|c| c.as_boolean().iter().collect::<Vec<_>>())
        .collect()
}

fn strs(t: &Table, name: &str) -> Vec<Option<String>> {
    t.cols(name)
        .flat_map(|c| {
            c.as_string::<i32>()
                .iter()
                .map(|s| s.map(str::to_string))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// A packet copy at a port: port, flow, seq, kind, retransmission.
type PacketKey = (u32, Option<i64>, Option<u32>, String, Option<bool>);

fn run_json(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap()
}

/// Two leaves, one spine, two hosts per leaf: host 0 -> host 2 crosses four links and three
/// switches.
const IDLE: &str = r#"
seed = 3
[topology]
kind = "leaf_spine"
leaves = 2
spines = 1
hosts_per_leaf = 2
link_rate = "100Gbps"
link_delay = "1us"
[switch]
latency = "300ns"
[transport]
mtu = "1000B"
[trace]
latency = true
[[workload]]
kind = "flows"
name = "one"
flows = [{ src = 0, dst = 2, size = "20000B" }]
"#;

#[test]
fn one_way_latency_on_an_idle_path_is_the_analytic_sum() {
    let dir = common::scratch("packet-trace", "idle");
    common::write_run(IDLE, &dir);
    // Four hops of (serialisation of 1000 + 62 header bytes at 100 Gb/s + 1us of propagation),
    // plus the forwarding latency of the three switches; store and forward, nothing queued.
    let ser = 1062 * 8 * 1_000_000_000_000u64 / 100_000_000_000;
    let analytic = 4 * (ser + 1_000_000) + 3 * 300_000;
    assert_eq!(analytic, 5_239_840);
    let t = table(&dir, "latency.arrow");
    assert_eq!(t.num_rows(), 1, "one bucket holds every packet");
    let (lo, hi) = (
        i64s(&t, "lower_ps")[0].unwrap(),
        i64s(&t, "upper_ps")[0].unwrap(),
    );
    assert!(
        lo <= analytic as i64 && (analytic as i64) < hi,
        "[{lo}, {hi})"
    );
    assert_eq!(i64s(&t, "count")[0], Some(20));
    // A 20 kB flow: the [10 kB, 100 kB) flow-size bucket.
    assert_eq!(i64s(&t, "size_min_bytes")[0], Some(10_000));
    assert_eq!(i64s(&t, "size_max_bytes")[0], Some(100_000));
    assert_eq!(strs(&t, "workload")[0].as_deref(), Some("one"));
    let l = &run_json(&dir)["latency"];
    for key in ["min_ps", "p50_ps", "p99_ps", "p999_ps", "max_ps"] {
        assert_eq!(l[key].as_u64(), Some(analytic), "{key}: {l}");
    }
    assert_eq!(l["jitter_ps"].as_u64(), Some(0));
    assert_eq!(l["packets"].as_u64(), Some(20));
    assert_eq!(l["workloads"]["one"]["p50_ps"].as_u64(), Some(analytic));
    assert_eq!(l["sizes"][0]["size_min_bytes"].as_u64(), Some(10_000));
    assert_eq!(l["sizes"][0]["max_ps"].as_u64(), Some(analytic));
}

#[test]
fn latency_is_off_unless_asked_and_packets_trace_is_off_by_default() {
    let dir = common::scratch("packet-trace", "off");
    common::write_run(&IDLE.replace("latency = true", "latency = false"), &dir);
    assert!(!dir.join("latency.arrow").exists());
    assert!(!dir.join("packets.arrow").exists());
    let r = run_json(&dir);
    assert!(r.get("latency").is_none() && r.get("packet_trace_truncated").is_none());
}

/// Eight senders into one receiver over small lossy buffers with ECN: drops and marks.
const INCAST: &str = r#"
seed = 5
[topology]
kind = "leaf_spine"
leaves = 3
spines = 2
hosts_per_leaf = 4
link_rate = "100Gbps"
link_delay = "1us"
[switch]
port_buffer = "40KB"
ecn = { kmin = "5KB", kmax = "30KB", pmax = 0.5 }
[transport]
mtu = "1000B"
cc = "none"
[[workload]]
kind = "incast"
receiver = 0
senders = 8
size = "60KB"
"#;

#[test]
fn packet_events_add_up_to_the_run_counters() {
    let dir = common::scratch("packet-trace", "incast");
    let text = format!("{INCAST}\n[trace]\npackets = {{ max_rows = 10000000 }}\nlatency = true\n");
    let sim = common::write_run(&text, &dir);
    let stats = sim.stats();
    assert!(
        stats.packets_dropped > 0 && stats.ecn_marks > 0,
        "{stats:?}"
    );
    let t = table(&dir, "packets.arrow");
    let ev = strs(&t, "event");
    let kind = strs(&t, "kind");
    let count = |e: &str| ev.iter().filter(|x| x.as_deref() == Some(e)).count() as u64;
    assert_eq!(count("drop"), stats.packets_dropped);
    assert_eq!(count("ecn_mark"), stats.ecn_marks);
    let node = u32s(&t, "node");
    let hosts = 12;
    let data_from_hosts = (0..t.num_rows())
        .filter(|&i| {
            ev[i].as_deref() == Some("dequeue")
                && kind[i].as_deref() == Some("data")
                && node[i].unwrap() < hosts
        })
        .count() as u64;
    assert_eq!(data_from_hosts, stats.data_packets_sent);
    // Every transmission at a switch follows the packet's enqueue there; marked rows carry CE.
    let (time, port, flow, seq, ecn) = (
        i64s(&t, "time_ps"),
        u32s(&t, "port"),
        i64s(&t, "flow_id"),
        u32s(&t, "seq"),
        u8s(&t, "ecn"),
    );
    let retx = bools(&t, "retx");
    let mut waiting: HashMap<PacketKey, u32> = HashMap::new();
    let mut last = 0;
    for i in 0..t.num_rows() {
        assert!(time[i].unwrap() >= last, "rows in time order");
        last = time[i].unwrap();
        let key = (
            port[i].unwrap(),
            flow[i],
            seq[i],
            kind[i].clone().unwrap(),
            retx[i],
        );
        match ev[i].as_deref().unwrap() {
            "enqueue" => *waiting.entry(key).or_default() += 1,
            "dequeue" if node[i].unwrap() >= hosts || kind[i].as_deref() != Some("data") => {
                let n = waiting
                    .get_mut(&key)
                    .unwrap_or_else(|| panic!("row {i}: no enqueue"));
                assert!(*n > 0, "row {i}: dequeued twice");
                *n -= 1;
            }
            // Admission drops: the packet was never queued (no enqueue row).
            "ecn_mark" => assert_eq!(ecn[i], 3, "row {i}"),
            _ => {}
        }
    }
    // Queue bytes after an enqueue include the packet (unless it went straight through).
    let qb = i64s(&t, "queue_bytes");
    let size = u32s(&t, "size");
    let queued = (0..t.num_rows())
        .filter(|&i| ev[i].as_deref() == Some("enqueue") && node[i].unwrap() >= hosts)
        .filter(|&i| qb[i].unwrap() >= size[i].unwrap() as i64)
        .count();
    assert!(queued > 0, "some packets queue behind others");
    let r = run_json(&dir);
    assert_eq!(r["packet_trace_truncated"], false);
    assert_eq!(r["packet_trace_rows"].as_u64(), Some(t.num_rows() as u64));
    // Incast packets queue: latency spreads over many buckets.
    let l = table(&dir, "latency.arrow");
    assert!(l.num_rows() > 5);
    let total: i64 = i64s(&l, "count").iter().map(|c| c.unwrap()).sum();
    assert_eq!(r["latency"]["packets"].as_i64(), Some(total));
    assert!(r["latency"]["jitter_ps"].as_u64().unwrap() > 0);
}

#[test]
fn filters_keep_only_their_rows_and_max_rows_bounds_the_table() {
    let dir = common::scratch("packet-trace", "filters");
    let text = format!(
        "{INCAST}\n[trace]\npackets = {{ nodes = [\"leaf:0\"], flows = [1, 2], start = \"2us\", end = \"40us\", max_rows = 100 }}\n"
    );
    common::write_run(&text, &dir);
    let t = table(&dir, "packets.arrow");
    assert_eq!(t.num_rows(), 100, "stopped at max_rows");
    // leaf:0 is the first leaf: node 12 (hosts 0..12 come first).
    assert!(u32s(&t, "node").iter().all(|n| *n == Some(12)));
    assert!(i64s(&t, "flow_id")
        .iter()
        .all(|f| matches!(f, Some(1) | Some(2))));
    assert!(i64s(&t, "time_ps")
        .iter()
        .all(|x| (2_000_000..40_000_000).contains(&x.unwrap())));
    let r = run_json(&dir);
    assert_eq!(r["packet_trace_truncated"], true);
    assert_eq!(r["packet_trace_rows"].as_u64(), Some(100));
    let meta = t.schema().metadata().clone();
    let roles: serde_json::Value = serde_json::from_str(&meta["fabricemu.node_roles"]).unwrap();
    assert_eq!(roles[0], serde_json::json!(["host", 0, 12]));
    assert_eq!(roles[1], serde_json::json!(["leaf", 12, 3]));

    // A port filter ("node/index"): only that egress port.
    let dir = common::scratch("packet-trace", "port");
    let text = format!("{INCAST}\n[trace]\npackets = {{ ports = [\"leaf:0/0\"] }}\n");
    common::write_run(&text, &dir);
    let t = table(&dir, "packets.arrow");
    assert!(t.num_rows() > 0);
    let ports = u32s(&t, "port");
    assert!(ports.iter().all(|p| *p == ports[0]));
    assert!(u32s(&t, "port_index").iter().all(|p| *p == Some(0)));
    assert!(u32s(&t, "node").iter().all(|n| *n == Some(12)));
}

#[test]
fn pfc_frames_and_pause_blocked_heads_are_traced() {
    let dir = common::scratch("packet-trace", "pfc");
    let text = r#"
seed = 1
[topology]
kind = "leaf_spine"
leaves = 2
spines = 1
hosts_per_leaf = 4
link_rate = "40Gbps"
link_delay = "1us"
[switch]
buffer = "400KB"
pfc = { enabled = true }
[transport]
cc = "none"
mtu = "1000B"
[trace]
packets = {}
[[workload]]
kind = "incast"
receiver = 0
senders = [1, 2, 3, 4, 5, 6, 7]
size = "400KB"
"#;
    let sim = common::write_run(text, &dir);
    let stats = sim.stats();
    assert!(stats.pfc_pause_frames > 0, "{stats:?}");
    let t = table(&dir, "packets.arrow");
    let (ev, kind, action) = (strs(&t, "event"), strs(&t, "kind"), strs(&t, "pfc_action"));
    let sent = |a: &str| {
        (0..t.num_rows())
            .filter(|&i| {
                ev[i].as_deref() == Some("dequeue")
                    && kind[i].as_deref() == Some("pfc")
                    && action[i].as_deref() == Some(a)
            })
            .count() as u64
    };
    assert_eq!(sent("pause"), stats.pfc_pause_frames);
    assert_eq!(sent("resume"), stats.pfc_resume_frames);
    let blocked: Vec<usize> = (0..t.num_rows())
        .filter(|&i| ev[i].as_deref() == Some("pause_blocked"))
        .collect();
    assert!(!blocked.is_empty());
    // A PFC frame has no flow; a blocked packet does.
    let flow = i64s(&t, "flow_id");
    assert!(blocked.iter().all(|&i| flow[i].is_some()));
    assert!((0..t.num_rows())
        .filter(|&i| kind[i].as_deref() == Some("pfc"))
        .all(|i| flow[i].is_none()));
}

#[test]
fn bad_packet_filters_name_their_key() {
    let base = INCAST.to_string();
    let err = |trace: &str| {
        let text = format!("{base}\n[trace]\npackets = {trace}\n");
        match fabricemu_core::scenario::parse_toml(&text, "t.toml") {
            Err(e) => e.to_string(),
            Ok((_, s)) => match fabricemu_core::Simulation::build(&s) {
                Err(e) => e.to_string(),
                Ok(_) => panic!("{trace} should fail"),
            },
        }
    };
    let e = err("{ nodes = [\"leaf:9\"] }");
    assert!(
        e.contains("trace.packets.nodes.0") && e.contains("leaf:9 does not exist"),
        "{e}"
    );
    let e = err("{ nodes = [\"nosuch\"] }");
    assert!(e.contains("trace.packets.nodes.0"), "{e}");
    let e = err("{ ports = [\"leaf:0/99\"] }");
    assert!(
        e.contains("trace.packets.ports.0") && e.contains("not port 99"),
        "{e}"
    );
    let e = err("{ ports = [\"leaf:0\"] }");
    assert!(
        e.contains("trace.packets.ports.0") && e.contains("node/index"),
        "{e}"
    );
    let e = err("{ ports = [100000] }");
    assert!(
        e.contains("trace.packets.ports.0") && e.contains("does not exist"),
        "{e}"
    );
    let e = err("{ max_rows = 0 }");
    assert!(e.contains("trace.packets.max_rows"), "{e}");
    let e = err("{ start = \"5us\", end = \"5us\" }");
    assert!(e.contains("trace.packets.end"), "{e}");
    let e = err("{ flows = [-1] }");
    assert!(e.contains("trace.packets.flows.0"), "{e}");
    let e = err("{ bogus = 1 }");
    assert!(e.contains("trace.packets"), "{e}");
}

/// A trimming switch (issue 15) records each trimmed packet as a `trim` row at the port that cut
/// it, with the trimmed size: as many rows as the run counted.
#[test]
fn trimmed_packets_are_traced_as_trim_events() {
    let dir = common::scratch("packet-trace", "trim");
    let text = r#"
        stop = "all_flows_done"
        [topology]
        kind = "leaf_spine"
        leaves = 1
        spines = 1
        hosts_per_leaf = 9
        link_rate = "100Gbps"
        link_delay = "1us"
        [switch]
        trimming = { threshold = "32KB", size = "64B" }
        [[workload]]
        kind = "incast"
        receiver = 0
        senders = 8
        size = "256KB"
        [trace]
        packets = { max_rows = 10000000 }
    "#;
    let sim = common::write_run(text, &dir);
    let trimmed = sim.stats().trimmed_packets.expect("trimming on");
    assert!(trimmed > 0, "the incast trims");
    let t = table(&dir, "packets.arrow");
    let events = strs(&t, "event");
    let sizes = u32s(&t, "size");
    let trims: Vec<usize> = (0..events.len())
        .filter(|&i| events[i].as_deref() == Some("trim"))
        .collect();
    assert_eq!(trims.len() as u64, trimmed);
    assert!(
        trims.iter().all(|&i| sizes[i] == Some(64)),
        "trimmed to the header"
    );
}

#[test]
fn in_network_results_count_their_latency_from_their_operands_sending() {
    // A switch multicasts a reduced result as copies of one operand packet: each copy's one-way
    // latency counts from when that operand left its NIC. Before 2026-12-05 a copy took the
    // send time of its arena slot's last occupant (here a packet of the ring all-reduce that
    // ended before the in-network one started): latencies longer than the gap between them,
    // and different on threads, where the slots are other packets' (a fuzzed case).
    let dir = common::scratch("packet-trace", "in-network");
    common::write_run(
        r#"
        seed = 1
        [topology]
        kind = "fat_tree"
        k = 4
        link_rate = "100Gbps"
        link_delay = "500ns"
        [switch]
        buffer = "16MiB"
        [switch.reduction]
        contexts = 1
        buffer = "2MiB"
        [trace]
        latency = true
        [[workload]]
        name = "ring"
        kind = "collective"
        op = "all_reduce"
        algorithm = "ring"
        size = "1MiB"
        [[workload]]
        name = "inr"
        kind = "collective"
        op = "all_reduce"
        algorithm = "in_network"
        size = "1MiB"
        iterations = 2
        start = "2ms"
        "#,
        &dir,
    );
    let run = run_json(&dir);
    assert_eq!(run["stats"]["in_network_calls"].as_u64(), Some(2), "{run}");
    assert!(run["stats"]["simulated_ps"].as_u64().unwrap() > 2_000_000_000);
    let inr = &run["latency"]["workloads"]["inr"];
    let (min, max) = (
        inr["min_ps"].as_u64().unwrap(),
        inr["max_ps"].as_u64().unwrap(),
    );
    // Up to the tree's root and down again: at least six links' propagation (500 ns each),
    // and a few packet times more at most (the operands come in together), far below the
    // gap of over 1 ms between the collectives (5.65 to 5.72 us here; 2.0 ms at most before).
    assert!(min >= 6 * 500_000, "{inr}");
    assert!(max < 20_000_000, "{inr}");
    assert!(inr["packets"].as_u64().unwrap() > 1000, "{inr}");
}
