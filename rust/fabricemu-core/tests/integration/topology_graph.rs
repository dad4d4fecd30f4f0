//! Topologies from a graph (`kind = "graph"`) and the general three-tier Clos (`kind = "clos"`):
//! a built-in fabric written out as a graph loads back into the same fabric and the same outputs;
//! shortest-path ECMP on irregular graphs against hand-computed next-hop counts; every load
//! balancing mode that applies runs; bad graphs and keys fail with located errors; the HPCC paper's
//! 320-host fabric is built exactly (shared/reference/hpcc_simulation_setup.csv).

use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use fabricemu_core::ids::NodeId;
use fabricemu_core::routing::RouteTable;
use fabricemu_core::scenario::parse_toml;
use fabricemu_core::topology::{self, summary, Fabric};

use crate::common;
use common::{read_arrow, run, scratch, spec, write_run};

/// The fabric of a scenario.
fn fabric(text: &str) -> Fabric {
    topology::build_scenario(&spec(text)).expect("the fabric builds")
}

/// `fabric` as an edge list with every node's role and every link's rate, delay, tier and port
/// ids (what `fabricemu topo --export` carries).
fn edge_list(f: &Fabric) -> String {
    let indices = topology::nodes::role_indices(f);
    let name = |n: NodeId| topology::nodes::node_name(f, n, indices[n]);
    let mut out = String::from("# written by the test from a built fabric\n");
    for n in f.nodes() {
        writeln!(out, "node {} {}", name(n), f.role[n]).unwrap();
    }
    for p in f.ports() {
        let q = f.peer_port[p];
        if p > q {
            continue;
        }
        writeln!(
            out,
            "{} {} rate_bps={} delay_ps={} tier={} source_port={} target_port={}",
            name(f.port_node[p]),
            name(f.peer_node[p]),
            f.rate_bps[p],
            f.delay_ps[p],
            summary::tier_name(f.tier[p]),
            p.get(),
            q.get()
        )
        .unwrap();
    }
    out
}

const BODY: &str = r#"
[routing]
load_balancing = "LB"
[[workload]]
kind = "permutation"
size = "200KB"
[[workload]]
kind = "incast"
receiver = 3
senders = 4
size = "100KB"
start = "5us"
[trace]
queues = { interval = "2us" }
links = { interval = "2us" }
"#;

fn with_body(topology: &str, lb: &str) -> String {
    format!(
        "seed = 3\n[topology]\n{topology}\n{}",
        BODY.replace("LB", lb)
    )
}

/// The Arrow tables of a run's output folder, without the schema metadata (which carries the
/// scenario text and so differs between the two spellings of one fabric).
fn tables(dir: &Path, file: &str) -> Vec<(Vec<String>, Vec<arrow_array::ArrayRef>)> {
    read_arrow(&dir.join(file))
        .into_iter()
        .map(|b| {
            let names = b
                .schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect();
            (names, b.columns().to_vec())
        })
        .collect()
}

#[test]
fn a_fat_tree_written_as_a_graph_runs_identically() {
    let dir = scratch("topology_graph", "roundtrip");
    let tree = "kind = \"fat_tree\"\nk = 4\nhost_link_rate = \"100Gbps\"\nfabric_link_rate = \"200Gbps\"\nlink_delay = \"1us\"";
    for lb in ["ecmp", "spray", "flowlet", "adaptive"] {
        let original = with_body(tree, lb);
        let f = fabric(&original);
        let graph_file = dir.join("fat_tree.edges");
        fs::write(&graph_file, edge_list(&f)).unwrap();
        let as_graph = with_body(
            &format!(
                "kind = \"graph\"\nfile = {:?}",
                graph_file.display().to_string()
            ),
            lb,
        );
        let g = fabric(&as_graph);
        assert_eq!(g.port_start, f.port_start);
        assert_eq!(g.peer_port, f.peer_port);
        assert_eq!(g.peer_node, f.peer_node);
        assert_eq!(g.rate_bps, f.rate_bps);
        assert_eq!(g.delay_ps, f.delay_ps);
        assert_eq!(g.tier, f.tier);
        assert_eq!(g.role, f.role);

        let (a, b) = (
            dir.join(format!("tree-{lb}")),
            dir.join(format!("graph-{lb}")),
        );
        fs::create_dir_all(&a).unwrap();
        fs::create_dir_all(&b).unwrap();
        write_run(&original, &a);
        write_run(&as_graph, &b);
        for file in ["flows.arrow", "links.arrow", "queues.arrow", "ports.arrow"] {
            let (ta, tb) = (tables(&a, file), tables(&b, file));
            assert_eq!(ta.len(), tb.len(), "{lb}: {file}");
            for ((na, ca), (nb, cb)) in ta.iter().zip(&tb) {
                assert_eq!(na, nb, "{lb}: {file}");
                for (x, y) in ca.iter().zip(cb) {
                    assert!(x.as_ref() == y.as_ref(), "{lb}: {file}");
                }
            }
        }
        // nodes.arrow: the same names and roles; pods are the graph's attributes (none here).
        let (na, nb) = (tables(&a, "nodes.arrow"), tables(&b, "nodes.arrow"));
        for col in ["node", "name", "role", "index", "host"] {
            let at = |t: &[(Vec<String>, Vec<arrow_array::ArrayRef>)]| {
                let i = t[0].0.iter().position(|n| n == col).unwrap();
                t[0].1[i].clone()
            };
            let (ca, cb) = (at(&na), at(&nb));
            assert!(ca.as_ref() == cb.as_ref(), "nodes.arrow {col}");
        }
    }
}

/// Q3, the 3-cube: 8 switches, one host each. From switch 000 a destination at distance d has d
/// shortest next hops (one per differing bit).
#[test]
fn shortest_path_ecmp_on_a_cube_and_a_ring() {
    let mut edges = String::from("link_rate = \"100Gbps\"\nlink_delay = \"1us\"\nedges = \"\"\"\n");
    for v in 0..8u32 {
        writeln!(edges, "node s{v} switch").unwrap();
    }
    for v in 0..8u32 {
        writeln!(edges, "h{v} s{v}").unwrap();
        for bit in 0..3 {
            let u = v ^ (1 << bit);
            if v < u {
                writeln!(edges, "s{v} s{u}").unwrap();
            }
        }
    }
    edges.push_str("\"\"\"");
    let f = fabric(&with_body(&format!("kind = \"graph\"\n{edges}"), "ecmp"));
    let table = RouteTable::build(&f);
    let s0 = NodeId::new(8); // switches follow the 8 hosts, in order s0..s7
    for dst in 0..8u32 {
        let ports = table.group(s0, NodeId::new(dst));
        let group = ports.as_slice();
        let expected = if dst == 0 {
            1
        } else {
            dst.count_ones() as usize
        };
        assert_eq!(group.len(), expected, "s0 -> h{dst}");
        if dst != 0 {
            // Each next hop is a neighbour one bit closer.
            for &p in group {
                let next = f.peer_node[p].get() - 8;
                assert_eq!(next.count_ones(), 1);
                assert_eq!((next & dst).count_ones(), 1, "s0 -> h{dst} via s{next}");
            }
        }
    }

    // A ring of 6: the opposite switch has two equal-cost next hops, the others one.
    let mut ring = String::from("link_rate = \"100Gbps\"\nlink_delay = \"1us\"\nedges = \"\"\"\n");
    for v in 0..6u32 {
        writeln!(ring, "h{v} s{v}\ns{v} s{}", (v + 1) % 6).unwrap();
    }
    ring.push_str("\"\"\"");
    let f = fabric(&with_body(&format!("kind = \"graph\"\n{ring}"), "ecmp"));
    let table = RouteTable::build(&f);
    let counts: Vec<usize> = (0..6)
        .map(|d| table.group(NodeId::new(6), NodeId::new(d)).as_slice().len())
        .collect();
    assert_eq!(counts, [1, 1, 1, 2, 1, 1]);
}

/// Every load-balancing mode that applies runs to completion on an irregular graph (a ring with
/// a chord), packets conserved; dragonfly modes are refused with the reason.
#[test]
fn load_balancing_modes_on_an_irregular_graph() {
    let mut g = String::from(
        "kind = \"graph\"\nhost_link_rate = \"100Gbps\"\nfabric_link_rate = \"50Gbps\"\nlink_delay = \"500ns\"\nedges = \"\"\"\n",
    );
    for v in 0..8u32 {
        writeln!(g, "h{v} s{}\ns{v} s{}", v % 8, (v + 1) % 8).unwrap();
    }
    g.push_str("s0 s4\ns2 s6\n\"\"\"");
    for lb in ["ecmp", "spray", "flowlet", "adaptive"] {
        let sim = run(&with_body(&g, lb));
        let rows = sim.flow_rows();
        assert!(!rows.is_empty());
        assert!(
            rows.iter().all(|r| r.finish_ps.is_some()),
            "{lb}: every flow finishes"
        );
    }
    for lb in ["ugal_l", "valiant"] {
        let e = parse_toml(&with_body(&g, lb), "g.toml").unwrap_err();
        assert_eq!(e.path, "routing.load_balancing", "{e}");
        assert!(e.message.contains("dragonfly"), "{e}");
    }
}

#[test]
fn graph_files_are_relative_to_the_scenario_and_errors_name_them() {
    let dir = scratch("topology_graph", "relative");
    fs::create_dir_all(dir.join("fabrics")).unwrap();
    fs::write(
        dir.join("fabrics/line.graphml"),
        r#"<?xml version="1.0"?>
<graphml xmlns="http://graphml.graphdrawing.org/xmlns">
  <key id="r" for="node" attr.name="role" attr.type="string"/>
  <key id="rate" for="edge" attr.name="rate" attr.type="string"/>
  <graph edgedefault="undirected">
    <node id="a"><data key="r">host</data></node>
    <node id="b"><data key="r">host</data></node>
    <node id="t"><data key="r">tor</data></node>
    <edge source="a" target="t"><data key="rate">25Gbps</data></edge>
    <edge source="b" target="t"/>
  </graph>
</graphml>
"#,
    )
    .unwrap();
    let scenario = dir.join("s.toml");
    let text = "[topology]\nkind = \"graph\"\nfile = \"fabrics/line.graphml\"\nlink_rate = \"100Gbps\"\nlink_delay = \"1us\"\n[[workload]]\nkind = \"incast\"\nreceiver = 0\nsenders = [1]\nsize = \"10KB\"\n";
    fs::write(&scenario, text).unwrap();
    let (_, s) =
        parse_toml(text, &scenario.display().to_string()).unwrap_or_else(|e| panic!("{e}"));
    let f = topology::build_scenario(&s).expect("the fabric builds");
    assert_eq!((f.num_hosts, f.num_nodes), (2, 3));
    assert_eq!(f.rate_bps[f.host_port(NodeId::new(0))], 25_000_000_000);
    assert_eq!(f.rate_bps[f.host_port(NodeId::new(1))], 100_000_000_000);
    assert_eq!(f.role[NodeId::new(2)].as_str(), "edge");

    // Not found: the error names the key, line and column, and the file.
    let missing = text.replace("line.graphml", "nope.graphml");
    let e = parse_toml(&missing, &scenario.display().to_string()).unwrap_err();
    assert_eq!(
        (e.path.as_str(), e.line, e.column),
        ("topology.file", Some(3), Some(8))
    );
    assert!(
        e.message
            .starts_with("fabrics/nope.graphml: cannot read it"),
        "{e}"
    );
    // A bad element: file, line and column of the element, and what was expected.
    fs::write(
        dir.join("fabrics/line.graphml"),
        fs::read_to_string(dir.join("fabrics/line.graphml"))
            .unwrap()
            .replace(
                r#"<edge source="b" target="t"/>"#,
                r#"<edge source="b" target="b"/>"#,
            ),
    )
    .unwrap();
    let e = parse_toml(text, &scenario.display().to_string()).unwrap_err();
    assert!(
        e.to_string()
            .contains("topology.file: fabrics/line.graphml:10:5: link b - b: a self-loop"),
        "{e}"
    );
}

#[test]
fn graph_keys_are_checked() {
    let cases = [
        ("kind = \"graph\"", "topology.file", "missing: expected the path"),
        (
            "kind = \"graph\"\nfile = \"x.edges\"\nedges = \"h0 s0\"",
            "topology.edges",
            "not both",
        ),
        ("kind = \"graph\"\nfile = \"x.dot\"", "topology.file", "cannot tell the format"),
        (
            "kind = \"graph\"\nformat = \"graphml\"\nedges = \"h0 s0\"",
            "topology.format",
            "inline `edges` are an edge list",
        ),
        ("kind = \"graph\"\nedges = \"h0 s0\\nh1 s0\"\nk = 4", "topology.k", "unknown key for kind = \"graph\""),
        ("kind = \"graph\"\nformat = \"dot\"\nedges = \"h0 s0\"", "topology.format", "expected one of \"graphml\", \"edges\", \"csv\""),
        ("kind = \"clos\"\npods = 2\ntors_per_pod = 2\nhosts_per_tor = 2\naggs_per_pod = 2\ncores = 3", "topology.cores", "a multiple of aggs_per_pod (2)"),
        ("kind = \"clos\"\npods = 2\ntors_per_pod = 2\nhosts_per_tor = 2\ncores = 2", "topology.aggs_per_pod", "missing"),
        ("kind = \"clos\"\npods = 0\ntors_per_pod = 2\nhosts_per_tor = 2\naggs_per_pod = 2\ncores = 2", "topology.pods", "in 1..=4096"),
    ];
    for (topo, path, msg) in cases {
        let text =
            format!("[topology]\n{topo}\n[[workload]]\nkind = \"permutation\"\nsize = \"1KB\"\n");
        let e = parse_toml(&text, "t.toml").unwrap_err();
        assert_eq!(e.path, path, "{topo}: {e}");
        assert!(e.message.contains(msg), "{topo}: {e}");
        assert!(e.line.is_some(), "{topo}: located: {e}");
    }
    // A graph has no cluster layout.
    let text = "[topology]\nkind = \"graph\"\nlink_rate = \"100Gbps\"\nlink_delay = \"1us\"\nedges = \"h0 s0\\nh1 s0\"\n[cluster]\ngpus_per_server = 2\n[[workload]]\nkind = \"permutation\"\nsize = \"1KB\"\n";
    let e = parse_toml(text, "t.toml").unwrap_err();
    assert_eq!(e.path, "cluster", "{e}");
}

/// Faults name a graph's switches as nodes.arrow does (`"switch:1"`), and routes avoid the link.
#[test]
fn faults_name_graph_nodes() {
    let text = r#"
[topology]
kind = "graph"
link_rate = "100Gbps"
link_delay = "1us"
edges = """
node s0 switch
node s1 switch
node s2 switch
node s3 switch
h0 s0
h1 s2
s0 s1
s1 s2
s0 s3
s3 s2
"""
[[fault]]
link = ["switch:0", "switch:1"]
at = "0us"
[[workload]]
kind = "incast"
receiver = 1
senders = [0]
size = "100KB"
"#;
    let sim = run(text);
    assert!(sim.flow_rows()[0].finish_ps.is_some());
    let sent_on = |sw: u32| {
        let f = fabric(text);
        let s0 = NodeId::new(2);
        f.ports_of(s0)
            .find(|&p| f.peer_node[p] == NodeId::new(2 + sw))
            .unwrap()
    };
    let w = sim.world();
    assert_eq!(
        w.port_tx_bytes(sent_on(1)),
        0,
        "the failed link carries nothing"
    );
    assert!(
        w.port_tx_bytes(sent_on(3)) > 100_000,
        "the detour carries the flow"
    );
}

/// shared/reference/hpcc_simulation_setup.csv: 16 core + 20 agg + 20 ToR switches, 5 pods of 4
/// ToRs and 4 aggs, each agg to 4 cores, 16 servers per ToR, 100G hosts, 400G fabric, 1 us links.
#[test]
fn hpcc_fabric_scenario_is_the_papers() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/hpcc_fabric.toml");
    let text = fs::read_to_string(&path).unwrap();
    let (_, s) = parse_toml(&text, &path.display().to_string()).unwrap_or_else(|e| panic!("{e}"));
    let f = topology::build_scenario(&s).expect("the fabric builds");
    let sum = summary::summarize(&f);
    assert_eq!(sum.hosts, 320);
    let roles: Vec<(&str, u32)> = sum
        .roles
        .iter()
        .map(|r| (r.role.as_str(), r.switches))
        .collect();
    assert_eq!(roles, [("edge", 20), ("agg", 20), ("core", 16)]);
    for r in &sum.roles {
        if r.role == "core" {
            assert_eq!(
                (r.ports_min, r.ports_max),
                (5, 5),
                "a core links one agg per pod"
            );
        } else {
            assert_eq!(
                r.oversubscription,
                Some(1.0),
                "{}: no oversubscription",
                r.role
            );
        }
    }
    let rates: Vec<(&str, u64)> = f
        .ports()
        .map(|p| (summary::tier_name(f.tier[p]), f.rate_bps[p]))
        .collect();
    assert!(rates.iter().all(|&(t, r)| r
        == if t == "host" {
            100_000_000_000
        } else {
            400_000_000_000
        }));
    assert!(f.ports().all(|p| f.delay_ps[p] == 1_000_000));
    // Full bisection: 160 hosts x 100G cross the pod-aligned cut.
    assert_eq!(sum.bisection_bps, 16_000_000_000_000);
    assert_eq!(sum.oversubscription, Some(1.0));
    // The longest path: host, ToR, agg, core, agg, ToR, host (6 links, 12 us one way).
    assert_eq!(sum.diameter_links, Some(6));
}
