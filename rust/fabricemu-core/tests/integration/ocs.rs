//! Optical circuit switching (`[ocs]`): circuits as links between electrical switches, changes
//! that take a reconfiguration time during which the changed circuits carry nothing, routing
//! that follows the new circuits, and errors for configurations that do not fit.
//!
//! Validation (issue 17): during a reconfiguration, the throughput lost equals the
//! reconfiguration time x the capacity of the circuits that changed, within 5 %. Source: the
//! model itself (a circuit that changes is dark for exactly the reconfiguration time; every other
//! circuit stays saturated), measured against an identical run without the change.

use crate::common;

use common::{read_arrow, run, scratch, write_run};
use fabricemu_core::scenario::load_toml;
use fabricemu_core::topology::Tier;

/// Two leaves joined only through the OCS (the spines replaced), `hosts` hosts per leaf, each
/// leaf with `hosts` uplinks into the OCS: every host on leaf 0 sends `size` to its partner on
/// leaf 1, so the circuits run full. `reconfigure`: the `[[ocs.reconfigure]]` tables.
fn two_leaves(hosts: u32, size: &str, circuits: &str, reconfigure: &str) -> String {
    let flows: Vec<String> = (0..hosts)
        .map(|h| format!("{{ src = {h}, dst = {}, size = \"{size}\" }}", h + hosts))
        .collect();
    format!(
        r#"
seed = 3
[topology]
kind = "leaf_spine"
leaves = 2
spines = 1
hosts_per_leaf = {hosts}
link_rate = "100Gbps"
link_delay = "500ns"
[ocs]
replace = true
uplinks = {hosts}
circuits = {circuits}
{reconfigure}
[switch]
pfc = {{ enabled = true, xoff = "40KB" }}
[routing]
load_balancing = "spray"
spray = "least_loaded"
[transport]
cc = "none"
[[workload]]
kind = "flows"
flows = [{}]
"#,
        flows.join(", ")
    )
}

/// Leaf 0's uplinks are OCS ports 0..3, leaf 1's 3..6: three parallel circuits.
const STRAIGHT: &str = r#"[["ocs:0", "ocs:3"], ["ocs:1", "ocs:4"], ["ocs:2", "ocs:5"]]"#;
/// Two of the three circuits swapped: the same capacity between the leaves, two circuits changed.
const SWAPPED: &str = r#"[["ocs:0", "ocs:4"], ["ocs:1", "ocs:3"], ["ocs:2", "ocs:5"]]"#;

/// Bytes leaf 0 put on its OCS circuits (the data direction) by the end of the run.
fn leaf0_circuit_bytes(sim: &fabricemu_core::Simulation) -> u64 {
    let w = sim.world();
    let ocs = w.fabric.ocs.as_deref().unwrap();
    let leaf0 = ocs.switches[0];
    ocs.ports
        .iter()
        .filter(|&&p| w.fabric.port_node[p] == leaf0)
        .map(|&p| w.port_tx_bytes(p))
        .sum()
}

#[test]
fn throughput_lost_equals_reconfiguration_time_times_changed_capacity() {
    // Both runs stop at 600us: after the change (200us to 250us) and its recovery, before the
    // first flow ends. What the circuits carried by then is the OCS layer's throughput; bytes
    // queued at the leaf (a standing queue after the change) are not yet lost throughput.
    let reconfiguration_ps: u64 = 50_000_000; // 50us
    let stop = "stop = \"600us\"\n";
    let base = run(&format!("{stop}{}", two_leaves(3, "30MB", STRAIGHT, "")));
    let changed = run(&format!(
        "{stop}{}",
        two_leaves(
            3,
            "30MB",
            STRAIGHT,
            &format!(
                "[[ocs.reconfigure]]\nat = \"200us\"\nreconfiguration_time = \"50us\"\ncircuits = {SWAPPED}\n"
            ),
        )
    ));
    let (b0, b1) = (leaf0_circuit_bytes(&base), leaf0_circuit_bytes(&changed));
    // The static run keeps the three circuits full (3 x 100 Gbps for 600us).
    let full = 3.0 * 100e9 / 8.0 * 600e-6;
    assert!(
        b0 as f64 / full > 0.98,
        "the circuits run full: {b0} of {full:.0} B"
    );
    let lost = b0 as f64 - b1 as f64;
    eprintln!("circuits carried {b0} B (static) and {b1} B (changed): lost {lost} B");
    // Two circuits of 100 Gbps (the data direction) dark for 50us.
    let expected = reconfiguration_ps as f64 * 1e-12 * 2.0 * 100e9 / 8.0;
    assert!(
        (lost / expected - 1.0).abs() < 0.05,
        "lost {lost:.0} B, expected {expected:.0} B: {:?}",
        changed.stats()
    );
    let s = changed.stats();
    assert_eq!(s.ocs_reconfigurations, 1);
    assert_eq!(s.ocs_circuit_ps_lost, 2 * reconfiguration_ps);
    assert_eq!(base.stats().ocs_reconfigurations, 0);
    // The OCS ports end as configured.
    let peers = changed.world().ocs_peers().unwrap().to_vec();
    assert_eq!(
        peers,
        vec![Some(4), Some(3), Some(5), Some(1), Some(0), Some(2)]
    );
}

#[test]
fn the_changed_run_finishes_later_by_about_the_lost_time() {
    // Run to the end: every flow finishes; the change costs at least the circuit time lost at the
    // full rate, and (a standing queue aside) not much more.
    let base = run(&two_leaves(3, "10MB", STRAIGHT, ""));
    let changed = run(&two_leaves(
        3,
        "10MB",
        STRAIGHT,
        &format!("[[ocs.reconfigure]]\nat = \"200us\"\nreconfiguration_time = \"50us\"\ncircuits = {SWAPPED}\n"),
    ));
    let last = |sim: &fabricemu_core::Simulation| {
        let rows = sim.flow_rows();
        assert_eq!(rows.len(), 3);
        rows.iter()
            .map(|r| r.finish_ps.expect("every flow ends"))
            .max()
            .unwrap()
    };
    let later = (last(&changed) - last(&base)) as f64;
    // 2 of 3 circuits dark for 50us: 33.3us of the whole capacity.
    let lost_time = 50e6 * 2.0 / 3.0;
    assert!(
        later > 0.95 * lost_time && later < 1.25 * lost_time,
        "{later} ps later, {lost_time} ps of capacity lost"
    );
    assert_eq!(changed.stats().timeouts, 0);
}

/// Four leaves, one host each, two uplinks each: a ring 0-1-2-3-0 becomes the ring 0-2-1-3-0.
fn ring(reconfigure: bool, dir_trace: bool) -> String {
    let change = if reconfigure {
        r#"[[ocs.reconfigure]]
at = "100us"
circuits = [["leaf:0", "leaf:2"], ["leaf:2", "leaf:1"], ["leaf:1", "leaf:3"], ["leaf:3", "leaf:0"]]
"#
    } else {
        ""
    };
    let trace = if dir_trace {
        "[trace]\nlinks = { interval = \"10us\" }\n"
    } else {
        ""
    };
    format!(
        r#"
seed = 1
stop = "400us"
[topology]
kind = "leaf_spine"
leaves = 4
spines = 1
hosts_per_leaf = 1
link_rate = "100Gbps"
link_delay = "500ns"
[ocs]
replace = true
uplinks = 2
reconfiguration_time = "20us"
circuits = [["leaf:0", "leaf:1"], ["leaf:1", "leaf:2"], ["leaf:2", "leaf:3"], ["leaf:3", "leaf:0"]]
{change}
[transport]
cc = "none"
[[workload]]
kind = "flows"
flows = [{{ src = 0, dst = 2, size = "100MB" }}, {{ src = 0, dst = 1, size = "100MB" }}]
{trace}
"#
    )
}

#[test]
fn routing_follows_the_new_circuits() {
    let dir = scratch("ocs", "ring");
    let sim = write_run(&ring(true, true), &dir);
    let w = sim.world();
    let f = &w.fabric;
    let ocs = f.ocs.as_deref().unwrap();
    // Leaf i's uplinks are OCS ports 2i, 2i+1. The ring 0-1, 1-2, 2-3, 3-0 takes the lowest free
    // uplink of each end: 0-2, 3-4, 5-6, 7-1. The change keeps 1-2 (3-4) and 3-0 (7-1), darkens
    // 0-2 and 5-6, and makes 0-2 (leaf 0's freed port 0 with leaf 2's freed port 5) and 1-3 (2-6).
    let peers = w.ocs_peers().unwrap();
    assert_eq!(
        peers,
        &[
            Some(5),
            Some(7),
            Some(6),
            Some(4),
            Some(3),
            Some(0),
            Some(2),
            Some(1)
        ]
    );
    let leaf = |i: usize| ocs.switches[i];
    // Port of OCS port 0 (leaf 0) now leads to leaf 2.
    let p0 = ocs.ports[0];
    assert_eq!(f.peer_node[p0], leaf(2));
    assert_eq!(f.peer_port[p0], ocs.ports[5]);
    assert_eq!(f.tier[p0], Tier::Ocs);

    // circuits.arrow: 4 initial circuits, 2 down at 100us, 2 up at 120us.
    let batches = read_arrow(&dir.join("circuits.arrow"));
    let b = &batches[0];
    assert_eq!(b.num_rows(), 8);
    let col = |name: &str| b.column_by_name(name).unwrap().clone();
    let time = col("time_ps");
    let time = time
        .as_any()
        .downcast_ref::<arrow_array::Int64Array>()
        .unwrap();
    let event = col("event");
    let event = event
        .as_any()
        .downcast_ref::<arrow_array::StringArray>()
        .unwrap();
    let rows: Vec<(i64, &str)> = (0..8).map(|i| (time.value(i), event.value(i))).collect();
    assert_eq!(
        rows,
        vec![
            (0, "up"),
            (0, "up"),
            (0, "up"),
            (0, "up"),
            (100_000_000, "down"),
            (100_000_000, "down"),
            (120_000_000, "up"),
            (120_000_000, "up"),
        ]
    );

    // links.arrow: leaf 0's port 0 is dark during the change, then carries leaf 0 -> leaf 2
    // traffic; no interval after the change has leaf 0 sending to leaf 1 directly.
    let links = read_arrow(&dir.join("links.arrow"));
    let mut before_to_leaf1 = 0u64;
    let mut dark = 0u64;
    let mut after_to_leaf2 = 0u64;
    let mut after_to_leaf1 = 0u64;
    for b in &links {
        let get = |n: &str| {
            b.column_by_name(n)
                .unwrap()
                .as_any()
                .downcast_ref::<arrow_array::Int64Array>()
                .cloned()
        };
        let get32 = |n: &str| {
            b.column_by_name(n)
                .unwrap()
                .as_any()
                .downcast_ref::<arrow_array::UInt32Array>()
                .unwrap()
                .clone()
        };
        let (t, tx) = (get("time_ps").unwrap(), get("tx_bytes").unwrap());
        let (link, src, dst) = (get32("link"), get32("src"), get32("dst"));
        for i in 0..b.num_rows() {
            let (t, tx) = (t.value(i) as u64, tx.value(i) as u64);
            if src.value(i) != leaf(0).get() {
                continue;
            }
            let to = dst.value(i);
            if t <= 100_000_000 && to == leaf(1).get() && link.value(i) == p0.get() {
                before_to_leaf1 += tx;
            }
            // The sample at 120us follows the circuits coming up at 120us.
            if t > 100_000_000 && t < 120_000_000 && link.value(i) == p0.get() {
                dark += tx;
            }
            if t > 130_000_000 {
                if to == leaf(2).get() && link.value(i) == p0.get() {
                    after_to_leaf2 += tx;
                }
                if to == leaf(1).get() {
                    after_to_leaf1 += tx;
                }
            }
        }
    }
    assert!(before_to_leaf1 > 0, "the first ring's circuit 0-1 carries");
    assert_eq!(dark, 0, "a changing circuit carries nothing");
    assert!(after_to_leaf2 > 0, "the new circuit 0-2 carries");
    assert_eq!(
        after_to_leaf1, 0,
        "no circuit joins leaf 0 and leaf 1 any more"
    );
    // The flow to leaf 2 takes one hop instead of two: it gets more than the static ring gives.
    let base = run(&ring(false, false));
    let tier_ocs = |s: &fabricemu_core::Simulation| common::tier_bytes(s, Tier::Ocs);
    assert!(tier_ocs(&sim) > 0 && tier_ocs(&base) > 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn uniform_mesh_between_pods() {
    // A fat tree k = 4 without cores: 4 pods of 2 aggregation switches; agg j of every pod is in
    // plane j. Three uplinks each: every pair of pods is joined in each plane (a full mesh).
    let text = r#"
[topology]
kind = "fat_tree"
k = 4
[ocs]
replace = true
uplinks = 3
[[workload]]
kind = "permutation"
size = "200KB"
"#;
    let sim = run(text);
    let f = &sim.world().fabric;
    let ocs = f.ocs.as_deref().unwrap();
    assert_eq!(ocs.switches.len(), 8);
    assert!(f.role.iter().all(|r| r.as_str() != "core"));
    let peers = &ocs.initial;
    assert!(
        peers.iter().all(|p| p.is_some()),
        "every uplink has a circuit"
    );
    let mut pairs = std::collections::BTreeSet::new();
    for (a, b) in fabricemu_core::topology::ocs::OcsLayout::circuits(peers) {
        let (sa, sb) = (a / 3, b / 3);
        // Same plane (agg position in its pod), different pods.
        assert_eq!(sa % 2, sb % 2);
        assert_ne!(sa / 2, sb / 2);
        pairs.insert((sa, sb));
    }
    assert_eq!(pairs.len(), 12, "each plane a full mesh of its 4 switches");
    assert_eq!(sim.stats().flows_finished, 16);
    let s = fabricemu_core::topology::summary::summarize(f);
    let o = s.ocs.unwrap();
    assert_eq!(
        (o.switches, o.uplinks, o.circuits, o.dark_ports),
        (8, 3, 12, 0)
    );
    assert!(s.tiers.iter().any(|t| t.tier == "ocs" && t.links == 12));
}

#[test]
fn live_control_reconfigures_from_now() {
    use fabricemu_core::topology::ocs::{CircuitEnd, CircuitsSpec};
    let mut sim = common::build(&ring(false, false));
    while sim.world().now < 50_000_000 {
        sim.step(1000);
    }
    let name = |role: &str, index: u32| {
        CircuitEnd::Switch(fabricemu_core::scenario::NodeName::Role {
            role: role.into(),
            index,
        })
    };
    let spec = CircuitsSpec::List(vec![
        [name("leaf", 0), name("leaf", 2)],
        [name("leaf", 2), name("leaf", 1)],
        [name("leaf", 1), name("leaf", 3)],
        [name("leaf", 3), name("leaf", 0)],
    ]);
    let n = sim
        .reconfigure_circuits("action.0", &spec, Some(10_000_000))
        .unwrap();
    assert_eq!(n, 0);
    // A second change while the first runs is refused, naming the action.
    let e = sim
        .reconfigure_circuits("action.1", &CircuitsSpec::None, None)
        .unwrap_err();
    assert!(
        e.to_string().contains("action.1") && e.to_string().contains("in progress"),
        "{e}"
    );
    // Too many circuits for a switch: the error names the entry.
    sim.run_to_end();
    let rows = sim.circuit_rows();
    assert!(rows
        .iter()
        .any(|r| r.source == "control" && r.event == "up"));
    let e = sim
        .reconfigure_circuits(
            "action.2",
            &CircuitsSpec::List(vec![
                [name("leaf", 0), name("leaf", 1)],
                [name("leaf", 0), name("leaf", 2)],
                [name("leaf", 0), name("leaf", 3)],
            ]),
            None,
        )
        .unwrap_err();
    // The circuits to leaf 2 and leaf 3 keep their ports; the one to leaf 1 finds none.
    assert!(
        e.to_string()
            .contains("action.2.0.0: leaf:0 has 2 uplinks into the OCS"),
        "{e}"
    );
    sim.check_conservation().unwrap();
}

fn build_error(text: &str) -> String {
    match load_toml(text, "bad.toml") {
        Ok(_) => panic!("expected an error for:\n{text}"),
        Err(e) => e.to_string(),
    }
}

const BASE: &str = r#"[topology]
kind = "leaf_spine"
leaves = 4
spines = 2
hosts_per_leaf = 1
[[workload]]
kind = "permutation"
size = "10KB"
"#;

#[test]
fn bad_configurations_name_their_key_and_line() {
    let cases: &[(&str, &str)] = &[
        (
            "[ocs]\nuplinks = 1\ncircuits = [[\"leaf:0\", \"leaf:1\"], [\"leaf:0\", \"leaf:2\"]]\n",
            "bad.toml:11:",
        ),
        (
            "[ocs]\ncircuits = [[\"leaf:0\", \"leaf:9\"]]\n",
            "ocs.circuits.0.1: leaf:9 does not exist",
        ),
        (
            "[ocs]\ncircuits = [[\"leaf:0\", \"spine:1\"]]\n",
            "has no uplink into the OCS",
        ),
        (
            "[ocs]\ncircuits = [[\"leaf:0\", \"ocs:40\"]]\n",
            "ocs:40 does not exist",
        ),
        (
            "[ocs]\nports = 2\n",
            "ocs.ports: the OCS needs at least 4 ports",
        ),
        (
            "[ocs]\ncircuits = [[\"ocs:0\", \"ocs:1\"], [\"ocs:1\", \"ocs:2\"]]\n",
            "ocs:1 is in two circuits",
        ),
        (
            "[ocs]\n[[ocs.reconfigure]]\nat = \"10us\"\ncircuits = \"none\"\n[[ocs.reconfigure]]\nat = \"15us\"\ncircuits = \"uniform\"\n",
            "ocs.reconfigure.1.at: overlaps reconfiguration 0",
        ),
        ("[ocs]\ncircuits = \"mesh\"\n", "unknown pattern \"mesh\""),
        (
            "[ocs]\nswitches = \"spine\"\nreplace = true\n",
            "ocs.replace",
        ),
        ("[ocs]\nswitches = \"gpu\"\n", "ocs.switches"),
        ("[ocs]\nuplinks = 0\n", "ocs.uplinks"),
        ("[ocs]\nreconfiguration_time = \"0ns\"\n", "must be longer than 0"),
        ("[ocs]\ncircuits = [[\"leaf:0\"]]\n", "ocs.circuits.0"),
        (
            "[ocs]\ncircuits = [[\"leaf:1\", \"leaf:1\"]]\n",
            "a circuit joins two different",
        ),
        ("[ocs]\ncolour = 1\n", "unknown field `colour`"),
    ];
    for (ocs, want) in cases {
        let text = format!("{BASE}{ocs}");
        let e = build_error(&text);
        assert!(e.contains(want), "{ocs}\n-> {e}\n(wanted {want:?})");
        assert!(e.starts_with("bad.toml:"), "located: {e}");
    }
    // Port counts: the second circuit of leaf 0 (one uplink) names its entry and line.
    let e = build_error(&format!(
        "{BASE}[ocs]\nuplinks = 1\ncircuits = [[\"leaf:0\", \"leaf:1\"], [\"leaf:0\", \"leaf:2\"]]\n"
    ));
    assert!(
        e.contains("ocs.circuits.1.0: leaf:0 has 1 uplink into the OCS"),
        "{e}"
    );
    // A switch-level configuration that fits leaves the rest dark.
    let (_, built) = load_toml(
        &format!("{BASE}[ocs]\nuplinks = 2\ncircuits = [[\"leaf:0\", \"leaf:1\"]]\n"),
        "ok.toml",
    )
    .unwrap();
    let o = built.fabric.ocs.as_deref().unwrap();
    assert_eq!(
        o.initial,
        vec![Some(2), None, Some(0), None, None, None, None, None]
    );
    let f = &built.fabric;
    let p = o.ports[1];
    assert_eq!(f.peer_port[p], p, "a dark OCS port is its own peer");
}

/// The live control API's `reconfigure_circuits` action moves the OCS like a scheduled change
/// (circuits.arrow rows with source "control"), returns its actions.arrow row, and a bad one
/// names the action's field.
#[test]
fn the_control_api_reconfigures_the_ocs() {
    use fabricemu_core::control::actions::Action;
    use fabricemu_core::topology::ocs::{CircuitEnd, CircuitsSpec};
    let mut sim = common::build(&ring(false, false));
    while sim.world().now < 50_000_000 {
        sim.step(1000);
    }
    let name = |index: u32| {
        CircuitEnd::Switch(fabricemu_core::scenario::NodeName::Role {
            role: "leaf".into(),
            index,
        })
    };
    let action = Action::ReconfigureCircuits {
        circuits: CircuitsSpec::List(vec![
            [name(0), name(2)],
            [name(2), name(1)],
            [name(1), name(3)],
            [name(3), name(0)],
        ]),
        reconfiguration_ps: Some(10_000_000),
    };
    let row = sim
        .apply_action("python", &action)
        .expect("a valid change")
        .expect("it changed something");
    assert_eq!(
        (row.action, row.target.as_str(), row.value.as_str()),
        ("reconfigure_circuits", "ocs", "4 circuits")
    );
    // A second one while the first runs: refused, naming the action.
    let e = sim.apply_action("python", &action).unwrap_err();
    assert_eq!(e.action, "reconfigure_circuits");
    assert!(e.message.contains("in progress"), "{e}");
    sim.run_to_end();
    let rows = sim.circuit_rows();
    let up = rows
        .iter()
        .filter(|r| r.source == "control" && r.event == "up")
        .count();
    assert!(up > 0, "the controller's circuits came up");
    sim.check_conservation().unwrap();
}
