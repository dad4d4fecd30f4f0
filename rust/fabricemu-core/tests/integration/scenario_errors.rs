//! A bad scenario file gets an error naming the key path, the line and column, and what was expected.

use fabricemu_core::scenario::{parse_json, parse_toml, to_json, to_toml, ScenarioError};

/// A valid scenario; each test breaks one thing in it. Line numbers are noted for the assertions.
const BASE: &str = r#"name = "base"
seed = 3
[topology]
kind = "fat_tree"
k = 4
link_rate = "100Gbps"
link_delay = "500ns"

[[workload]]
kind = "incast"
receiver = 0
senders = 3
size = "1MB"

[[workload]]
kind = "permutation"
size = "64KB"
"#;

fn err(text: &str) -> ScenarioError {
    match parse_toml(text, "bad.toml") {
        Ok(_) => panic!("expected an error for:\n{text}"),
        Err(e) => e,
    }
}

/// Replace exactly one occurrence of `from` in BASE.
fn base_with(from: &str, to: &str) -> String {
    assert_eq!(BASE.matches(from).count(), 1, "{from:?} must occur once");
    BASE.replace(from, to)
}

#[track_caller]
fn check(e: &ScenarioError, path: &str, line: usize, column: usize, fragment: &str) {
    assert_eq!(e.path, path, "path of {e}");
    assert_eq!(e.line, Some(line), "line of {e}");
    assert_eq!(e.column, Some(column), "column of {e}");
    assert!(
        e.message.contains(fragment),
        "message {:?} lacks {fragment:?}",
        e.message
    );
    assert!(
        !e.message.contains('\n'),
        "one-line message: {:?}",
        e.message
    );
    let shown = e.to_string();
    assert!(
        shown.starts_with(&format!("bad.toml:{line}:{column}: {path}: ")),
        "{shown}"
    );
}

#[test]
fn base_is_valid() {
    let (file, spec) = parse_toml(BASE, "base.toml").unwrap();
    assert_eq!(file.seed, 3);
    assert_eq!(spec.workloads.len(), 2);
}

#[test]
fn typo_in_key() {
    let e = err(&base_with("k = 4", "kk = 8"));
    check(&e, "topology.kk", 5, 1, "unknown field `kk`");
    assert!(e.message.contains("expected one of `kind`, `k`"), "{e}");
}

#[test]
fn typo_in_workload_key() {
    let e = err(&base_with("receiver = 0", "reciever = 0"));
    check(&e, "workload.0.reciever", 11, 1, "unknown field `reciever`");
}

#[test]
fn wrong_unit() {
    let e = err(&base_with("\"100Gbps\"", "\"100Gbs\""));
    check(
        &e,
        "topology.link_rate",
        6,
        13,
        r#"expected a rate like "100Gbps" or "400Gbps", found "100Gbs""#,
    );
}

#[test]
fn wrong_duration_unit() {
    let e = err(&base_with("\"500ns\"", "\"500\""));
    check(
        &e,
        "topology.link_delay",
        7,
        14,
        "expected a duration with a unit",
    );
}

#[test]
fn negative_size_string() {
    let e = err(&base_with("\"1MB\"", "\"-1MB\""));
    check(&e, "workload.0.size", 13, 8, r#"found "-1MB""#);
    assert!(e.message.starts_with("expected a size like"), "{e}");
}

#[test]
fn negative_size_integer() {
    let e = err(&base_with("\"1MB\"", "-5"));
    check(&e, "workload.0.size", 13, 8, "found -5");
}

#[test]
fn size_in_second_workload() {
    let e = err(&base_with("\"64KB\"", "\"64 kilobytes\""));
    check(&e, "workload.1.size", 17, 8, "expected a size like");
}

#[test]
fn zero_size() {
    let e = err(&base_with("\"64KB\"", "0"));
    check(&e, "workload.1.size", 17, 8, "expected a positive size");
}

#[test]
fn wrong_type() {
    let e = err(&base_with("k = 4", "k = \"eight\""));
    check(
        &e,
        "topology.k",
        5,
        5,
        r#"expected an integer, found string "eight""#,
    );
}

#[test]
fn negative_seed() {
    let e = err(&base_with("seed = 3", "seed = -1"));
    check(&e, "seed", 2, 8, "expected a non-negative integer");
}

#[test]
fn k_odd() {
    let e = err(&base_with("k = 4", "k = 7"));
    check(&e, "topology.k", 5, 5, "expected an even integer, found 7");
}

#[test]
fn k_odd_with_dotted_keys() {
    let text = "topology.kind = \"fat_tree\"\ntopology.k =   7\n";
    let e = err(text);
    check(&e, "topology.k", 2, 16, "even");
}

#[test]
fn host_out_of_range() {
    let e = err(&base_with("receiver = 0", "receiver = 999"));
    check(
        &e,
        "workload.0.receiver",
        11,
        12,
        "host id 999 is out of range: this topology has hosts 0..=15",
    );
}

#[test]
fn host_out_of_range_in_inline_flow_list() {
    let text = base_with(
        "kind = \"permutation\"\nsize = \"64KB\"\n",
        "kind = \"flows\"\nflows = [{ src = 0, dst = 1, size = \"1MB\" },\n  { src = 2, dst = 16, size = \"1MB\" }]\n",
    );
    let e = err(&text);
    check(
        &e,
        "workload.1.flows.1.dst",
        18,
        20,
        "host id 16 is out of range",
    );
}

#[test]
fn missing_key_of_workload_points_at_its_header() {
    let e = err(&base_with("receiver = 0\n", ""));
    check(&e, "workload.0.receiver", 9, 1, "missing");
    let e = err(&base_with("size = \"64KB\"\n", ""));
    check(&e, "workload.1.size", 15, 1, "missing");
}

#[test]
fn missing_required_key() {
    let e = err(&base_with("kind = \"fat_tree\"\n", ""));
    check(&e, "topology.kind", 3, 1, "missing required key `kind`");
}

#[test]
fn missing_table_points_at_line_one() {
    let e = err("name = \"x\"\n\n[[workload]]\nkind = \"permutation\"\nsize = \"1MB\"\n");
    check(&e, "topology", 1, 1, "missing required key `topology`");
}

#[test]
fn missing_k() {
    let e = err(&base_with("k = 4\n", ""));
    check(&e, "topology.k", 3, 1, "missing: expected an even integer");
}

#[test]
fn unknown_topology_kind() {
    let e = err(&base_with("\"fat_tree\"", "\"fat_three\""));
    check(
        &e,
        "topology.kind",
        4,
        8,
        r#"expected one of "fat_tree", "leaf_spine", "dragonfly", "dragonfly_plus", "clos", "graph", found "fat_three""#,
    );
}

#[test]
fn key_of_another_kind() {
    let e = err(&base_with("k = 4", "k = 4\nleaves = 2"));
    check(
        &e,
        "topology.leaves",
        6,
        1,
        r#"unknown key for kind = "fat_tree""#,
    );
}

#[test]
fn bad_stop() {
    let e = err(&base_with("seed = 3", "seed = 3\nstop = \"5 parsecs\""));
    check(
        &e,
        "stop",
        3,
        8,
        r#"expected "all_flows_done" or a duration like "5ms", found "5 parsecs""#,
    );
    let e = err(&base_with("seed = 3", "seed = 3\nstop = 5"));
    check(&e, "stop", 3, 8, "expected a string, found integer");
}

#[test]
fn bad_senders() {
    let e = err(&base_with("senders = 3", "senders = \"three\""));
    check(
        &e,
        "workload.0.senders",
        12,
        11,
        "expected a number of senders or a list of host ids",
    );
    let e = err(&base_with("senders = 3", "senders = [1, 2, 0]"));
    check(
        &e,
        "workload.0.senders.2",
        12,
        18,
        "the receiver cannot be one of the senders",
    );
}

#[test]
fn syntax_error() {
    let e = err(&base_with("k = 4", "k = = 4"));
    assert_eq!(e.path, "");
    assert_eq!(e.line, Some(5));
    assert!(e.column.is_some());
    assert!(!e.message.is_empty() && !e.message.contains('\n'), "{e}");
    assert!(e.to_string().starts_with("bad.toml:5:"), "{e}");
}

#[test]
fn duplicate_key_is_a_syntax_error() {
    let e = err(&base_with("k = 4", "k = 4\nk = 8"));
    assert_eq!(e.line, Some(6));
    assert!(e.message.contains("duplicate key"), "{e}");
}

#[test]
fn errors_without_source_name_show_line_and_column() {
    let e = parse_toml(&base_with("k = 4", "k = 7"), "").unwrap_err();
    assert_eq!(
        e.to_string(),
        "line 5, column 5: topology.k: expected an even integer, found 7"
    );
}

#[test]
fn round_trip_through_toml() {
    let rich = r#"name = "rich"
seed = 42
stop = "2ms"

[topology]
kind = "leaf_spine"
leaves = 4
spines = 2
hosts_per_leaf = 8
link_rate = "100Gbps"
link_delay = "1.5us"
host_link_rate = "25Gbps"
fabric_link_delay = "250ns"

[switch]
buffer = "16MiB"
port_buffer = "512KiB"
latency = "300ns"

[routing]
load_balancing = "ecmp"

[transport]
mtu = "1KiB"
header = 48
ack_size = "64B"
ack_every = 2
rto = "500us"
cc = "none"

[[workload]]
kind = "flows"
name = "explicit"
flows = [
  { src = 0, dst = 9, size = "1MB" },
  { src = 3, dst = 31, size = "1500B", start = "10us" },
]

[[workload]]
kind = "incast"
receiver = 5
senders = [1, 2, 3, 4]
size = "256KB"
rounds = 3
round_gap = "20us"
start = "1us"

[[workload]]
kind = "incast"
receiver = 7
senders = 6
size = "1MB"

[[workload]]
kind = "permutation"
hosts = [0, 1, 2, 3, 8, 9]
size = "2MiB"

[trace]
unfinished_flows = false
"#;
    let (file, spec) = parse_toml(rich, "rich.toml").unwrap();
    let text = to_toml(&file);
    let (again, spec_again) = parse_toml(&text, "again.toml")
        .unwrap_or_else(|e| panic!("to_toml output does not parse: {e}\n{text}"));
    assert_eq!(file, again, "\n{text}");
    assert_eq!(spec, spec_again);
    // And through JSON, the way Python passes dictionaries.
    let (from_json, spec_json) = parse_json(&to_json(&file)).unwrap();
    assert_eq!(file, from_json);
    assert_eq!(spec, spec_json);
}

#[test]
fn json_errors_carry_paths() {
    let good = to_json(&parse_toml(BASE, "").unwrap().0);
    let mut v: serde_json::Value = serde_json::from_str(&good).unwrap();

    // Serde stage: a bad unit inside a list.
    v["workload"][1]["size"] = "64 kilobytes".into();
    let e = parse_json(&v.to_string()).unwrap_err();
    assert_eq!(e.path, "workload.1.size", "{e}");
    assert!(e.message.contains("expected a size like"), "{e}");
    assert_eq!(e.line, None);

    // Serde stage: an unknown key.
    let mut v2: serde_json::Value = serde_json::from_str(&good).unwrap();
    v2["topology"]["kk"] = 8.into();
    let e = parse_json(&v2.to_string()).unwrap_err();
    assert!(e.path.starts_with("topology"), "{e}");
    assert!(e.message.contains("unknown field `kk`"), "{e}");

    // Validation stage.
    let mut v3: serde_json::Value = serde_json::from_str(&good).unwrap();
    v3["workload"][0]["receiver"] = 999.into();
    let e = parse_json(&v3.to_string()).unwrap_err();
    assert_eq!(e.path, "workload.0.receiver", "{e}");
    assert!(e.message.contains("out of range"), "{e}");
}

// ---- build-phase errors, impossible settings and hints (issue 11 items 4, 11, 12, 13) -----------

use fabricemu_core::scenario::{build, load_toml};
use fabricemu_core::Simulation;

fn load_err(text: &str) -> ScenarioError {
    match load_toml(text, "bad.toml") {
        Ok(_) => panic!("expected an error for:\n{text}"),
        Err(e) => e,
    }
}

/// BASE with a `[[fault]]` on `link` appended (its `link` line is line 20).
fn with_fault(link: &str) -> String {
    format!("{BASE}\n[[fault]]\nlink = {link}\nat = \"1us\"\n")
}

#[test]
fn fault_link_with_a_misspelled_role_lists_the_roles() {
    let e = load_err(&with_fault(r#"["agregation:0", "agg:0"]"#));
    check(
        &e,
        "fault.0.link.0",
        20,
        9,
        r#"no node has role "agregation""#,
    );
    assert!(e.message.contains("host, edge, agg, core"), "{e}");
}

#[test]
fn fault_link_index_out_of_range_states_the_range() {
    let e = load_err(&with_fault(r#"["edge:0", "agg:12"]"#));
    check(
        &e,
        "fault.0.link.1",
        20,
        19,
        "agg:12 does not exist: there are 8 (agg:0..=7)",
    );
}

#[test]
fn fault_link_between_nodes_not_adjacent() {
    let e = load_err(&with_fault(r#"["edge:0", "core:0"]"#));
    check(
        &e,
        "fault.0.link",
        20,
        8,
        "edge:0 (node 16) and core:0 (node 32) are not linked",
    );
    let e = load_err(&with_fault("[0, 1]"));
    check(
        &e,
        "fault.0.link",
        20,
        8,
        "node 0 (host) and node 1 (host) are not linked",
    );
}

#[test]
fn validation_is_pure_and_the_build_reads_files() {
    // Validation reads no file: a missing replay file passes parse_toml and fails in the build,
    // located at its key.
    let text = base_with(
        "kind = \"permutation\"\nsize = \"64KB\"\n",
        "kind = \"replay\"\nfile = \"/nonexistent/flows.csv\"\n",
    );
    let (_, spec) = parse_toml(&text, "bad.toml").unwrap();
    let e = build(&spec).unwrap_err();
    assert_eq!((e.path.as_str(), e.line), ("workload.1.file", None));
    let e = load_err(&text);
    check(&e, "workload.1.file", 17, 8, "cannot open");
}

#[test]
fn times_are_bounded() {
    let e = err(&with_fault(r#"["edge:0", "agg:0"]"#).replace("at = \"1us\"", "at = \"5000000s\""));
    check(
        &e,
        "fault.0.at",
        21,
        6,
        "expected a duration of at most 1000000s",
    );
    let e = err(&base_with("seed = 3", "seed = 3\nstop = \"2000000s\""));
    check(&e, "stop", 3, 8, "at most 1000000s");
}

#[test]
fn the_largest_times_do_not_wrap() {
    // A fault at the end of the time range, detected one range later: its events still order
    // after everything else and the run ends at stop.
    let text = format!(
        "{}\n[[fault]]\nlink = [\"edge:0\", \"agg:0\"]\nat = \"999999s\"\nuntil = \"1000000s\"\ndetection = \"1000000s\"\n",
        base_with("seed = 3", "seed = 3\nstop = \"1000000s\"")
    );
    let (_, built) = load_toml(&text, "t.toml").unwrap();
    let mut sim = Simulation::new(built);
    let st = sim.run_to_end();
    assert_eq!(st.flows_finished, st.flows_total);
    assert_eq!(st.simulated_ps, 1_000_000_000_000_000_000);
}

#[test]
fn duplicate_key_names_the_key() {
    let e = err(&base_with("k = 4", "k = 4\nk = 8"));
    assert_eq!(e.line, Some(6));
    assert!(e.message.contains("duplicate key `k`"), "{e}");
}

#[test]
fn a_single_workload_table_gets_a_hint() {
    let e = err("[topology]\nkind = \"fat_tree\"\nk = 4\n\n[workload]\nkind = \"permutation\"\nsize = \"1MB\"\n");
    check(&e, "workload", 5, 1, "write [[workload]] (double brackets)");
    let e = err(&format!("{BASE}\n[fault]\nlink = [0, 16]\nat = \"1us\"\n"));
    assert_eq!(e.path, "fault");
    assert!(e.message.contains("write [[fault]]"), "{e}");
}

#[test]
fn a_buffer_smaller_than_a_packet_is_an_error() {
    let e = err(&format!("{BASE}\n[switch]\nbuffer = \"4KB\"\n"));
    check(
        &e,
        "switch.buffer",
        20,
        10,
        "cannot hold one packet of 4158 B",
    );
}

#[test]
fn pfc_headroom_beyond_the_buffer_is_an_error() {
    // An edge switch of a k = 4 fat tree has four ingress links: 4 x 50 KB of headroom leave no
    // room in a 100 KB buffer.
    let text = format!(
        "{BASE}\n[switch]\nbuffer = \"100KB\"\npfc = {{ enabled = true, headroom = \"50KB\" }}\n"
    );
    let e = load_err(&text);
    check(
        &e,
        "switch.pfc.headroom",
        21,
        36,
        "exceeds the 100000 B buffer",
    );
    // The default headroom (a round trip plus two packets per link, not the user's choice) that
    // does not fit is a warning, carried into run.json.
    let text = format!("{BASE}\n[switch]\nbuffer = \"20KB\"\npfc = {{ enabled = true }}\n");
    let (_, built) = load_toml(&text, "w.toml").unwrap();
    assert_eq!(built.warnings.len(), 1);
    assert!(
        built.warnings[0].starts_with("switch.buffer: PFC headroom of the default headroom"),
        "{:?}",
        built.warnings
    );
    let sim = Simulation::new(built);
    assert_eq!(sim.warnings().len(), 1);
    // What fits builds.
    load_toml(
        &format!(
            "{BASE}\n[switch]\nbuffer = \"1MB\"\npfc = {{ enabled = true, headroom = \"50KB\" }}\n"
        ),
        "ok.toml",
    )
    .unwrap();
}

#[test]
fn a_scenario_without_workload_is_an_error() {
    let e = err("[topology]\nkind = \"fat_tree\"\nk = 4\n");
    check(&e, "workload", 1, 1, "at least one [[workload]]");
}

#[test]
fn enum_values_list_the_accepted_ones() {
    let e = err(&format!("{BASE}\n[routing]\nload_balancing = \"sprey\"\n"));
    check(
        &e,
        "routing.load_balancing",
        20,
        18,
        r#"expected one of "ecmp", "spray", "flowlet", "adaptive", "min", "valiant", "ugal_l", "ugal_g", "par", found "sprey""#,
    );
    let e = err(&format!("{BASE}\n[transport]\ncc = \"dcqnc\"\n"));
    check(
        &e,
        "transport.cc",
        20,
        6,
        r#"expected one of "none", "dcqcn", "dctcp", "swift", "hpcc", "nscc", found "dcqnc""#,
    );
    let e = err(&base_with("kind = \"incast\"", "kind = \"incasst\""));
    check(
        &e,
        "workload.0.kind",
        10,
        8,
        r#"expected one of "flows", "incast", "#,
    );
}

#[test]
fn spelling_of_aliases_is_kept() {
    // `arrangement = "circulant"` is `relative`; the scenario is written back as the user wrote it.
    let text = "[topology]\nkind = \"dragonfly\"\np = 1\na = 2\nh = 1\ng = 3\narrangement = \"circulant\"\n\n[[workload]]\nkind = \"permutation\"\nsize = \"1MB\"\n";
    let (file, spec) = parse_toml(text, "t.toml").unwrap();
    assert!(to_json(&file).contains(r#""arrangement":"circulant""#));
    assert!(to_toml(&file).contains("arrangement = \"circulant\""));
    let relative = text.replace("circulant", "relative");
    assert_eq!(
        spec.topology,
        parse_toml(&relative, "t.toml").unwrap().1.topology
    );
}

#[test]
fn repeated_gaps_stay_within_the_time_range() {
    let e = err(&base_with(
        "size = \"1MB\"",
        "size = \"1MB\"\nrounds = 20\nround_gap = \"1000000s\"",
    ));
    check(
        &e,
        "workload.0.round_gap",
        15,
        13,
        "exceeds the longest time a scenario may span (1000000s)",
    );
    let text = base_with(
        "kind = \"permutation\"\nsize = \"64KB\"\n",
        "kind = \"collective\"\nop = \"all_reduce\"\nsize = \"1MB\"\niterations = 3\ncompute_gap = \"600000s\"\n",
    );
    let e = err(&text);
    check(
        &e,
        "workload.1.compute_gap",
        20,
        15,
        "600000s x 2 more iterations",
    );
}

#[test]
fn the_engine_runs_the_built_plan_as_it_is() {
    // The plan is made once, by the build; the engine takes it as given (it no longer re-plans
    // from the scenario), so what the build made is exactly what runs.
    let (_, mut built) = load_toml(BASE, "base.toml").unwrap();
    assert_eq!(built.plan.flows.len(), 3 + 16);
    built.plan.flows.truncate(3);
    let mut sim = Simulation::new(built);
    assert_eq!(sim.workload_plan().flows.len(), 3);
    let st = sim.run_to_end();
    assert_eq!((st.flows_total, st.flows_finished), (3, 3));
}

#[test]
fn output_format_and_compression() {
    // Line 20: the key of the [output] table after the workloads.
    let ok = format!("{BASE}\n[output]\nformat = \"parquet\"\ncompression = \"zstd\"\n");
    let (file, _) = parse_toml(&ok, "ok.toml").unwrap();
    let json = to_json(&file);
    assert!(
        json.contains(r#""output":{"format":"parquet","compression":"zstd"}"#),
        "{json}"
    );
    assert_eq!(
        parse_json(&json).unwrap().0,
        file,
        "the JSON form reads back"
    );
    // Without [output] the scenario's JSON has no output key (unchanged from before it existed).
    let (plain, _) = parse_toml(BASE, "base.toml").unwrap();
    assert!(!to_json(&plain).contains("output"));

    let e = err(&format!("{BASE}\n[output]\ncompression = \"gzip\"\n"));
    check(
        &e,
        "output.compression",
        20,
        15,
        r#"expected one of "none", "zstd", "lz4", found "gzip""#,
    );
    let e = err(&format!("{BASE}\n[output]\nformat = \"csv\"\n"));
    check(
        &e,
        "output.format",
        20,
        10,
        r#"expected one of "arrow", "parquet""#,
    );
    let e = err(&format!("{BASE}\n[output]\nlevel = 3\n"));
    check(&e, "output.level", 20, 1, "unknown field `level`");
}

/// A retransmission timeout shorter than any round trip of the fabric would fire before any ACK
/// could return, for every packet: refused in the build, naming the key and the minimum (the k=4
/// fat tree at 100G with 500ns links: two hosts on one edge switch are 4 x 500ns of propagation
/// apart, plus serialisation and switch latency: 2.0xx us). Below the base round trip to the
/// farthest host it is a warning only.
#[test]
fn rto_below_the_shortest_round_trip_is_refused() {
    let e = load_err(&format!("{BASE}\n[transport]\nrto = \"1ns\"\n"));
    check(
        &e,
        "transport.rto",
        20,
        7,
        "0.001us is below the shortest round trip this fabric allows, 2.0",
    );
    assert!(e.message.contains("use at least 2.0"), "{}", e.message);
    let (_, built) = load_toml(&format!("{BASE}\n[transport]\nrto = \"3us\"\n"), "w.toml").unwrap();
    assert!(
        built
            .warnings
            .iter()
            .any(|w| w.starts_with("transport.rto: 3.000us is below the base round trip")),
        "{:?}",
        built.warnings
    );
    let (_, built) =
        load_toml(&format!("{BASE}\n[transport]\nrto = \"50us\"\n"), "w.toml").unwrap();
    assert!(built.warnings.is_empty(), "{:?}", built.warnings);
}
