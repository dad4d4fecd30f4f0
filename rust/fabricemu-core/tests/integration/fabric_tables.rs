//! nodes.arrow and ports.arrow: every node by name and place, every port with its peer, rate,
//! delay and tier; the other tables join to them (queues and links by port, queues by node).

use std::collections::HashMap;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type, UInt32Type};
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType;

use crate::common;

fn col<'a>(b: &'a RecordBatch, name: &str) -> &'a dyn Array {
    b.column_by_name(name)
        .unwrap_or_else(|| panic!("no column {name}"))
        .as_ref()
}

fn u32s(b: &RecordBatch, name: &str) -> Vec<Option<u32>> {
    col(b, name).as_primitive::<UInt32Type>().iter().collect()
}

fn i64s(b: &RecordBatch, name: &str) -> Vec<i64> {
    col(b, name).as_primitive::<Int64Type>().values().to_vec()
}

/// A dictionary-encoded string column, decoded.
fn strings(b: &RecordBatch, name: &str) -> Vec<String> {
    let a = col(b, name);
    assert_eq!(
        a.data_type(),
        &DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
        "{name} is dictionary-encoded"
    );
    let d = a.as_dictionary::<Int32Type>();
    let values = d.values().as_string::<i32>();
    d.keys()
        .values()
        .iter()
        .map(|&k| values.value(k as usize).to_string())
        .collect()
}

fn one(path: &std::path::Path) -> RecordBatch {
    let batches = common::read_arrow(path);
    arrow_select_concat(&batches)
}

fn arrow_select_concat(batches: &[RecordBatch]) -> RecordBatch {
    assert!(!batches.is_empty());
    if batches.len() == 1 {
        return batches[0].clone();
    }
    // The streamed tables of these small runs fit in one batch.
    panic!("expected one batch, found {}", batches.len())
}

#[test]
fn gpu_cluster_nodes_ports_and_the_tables_that_join_them() {
    let toml = r#"
seed = 3
stop = "30us"
[topology]
kind = "leaf_spine"
leaves = 2
hosts_per_leaf = 2
spines = 2
link_rate = "100Gbps"
fabric_link_rate = "200Gbps"
link_delay = "500ns"
[cluster]
gpus_per_server = 4
nics_per_server = 2
planes = 2
servers_per_rack = 1
scaleup = { gpus = 4, rate = "900Gbps" }
[[workload]]
kind = "permutation"
size = "64KB"
[trace]
queues = { interval = "2us", hosts = true, empty = true }
links = { interval = "5us" }
"#;
    let dir = common::scratch("fabric-tables", "gpu");
    let sim = common::write_run(toml, &dir);
    let f = &sim.world().fabric;

    let nodes = one(&dir.join("nodes.arrow"));
    assert_eq!(nodes.num_rows(), f.num_nodes as usize);
    let name = strings(&nodes, "name");
    let role = strings(&nodes, "role");
    // 2 servers x 4 GPUs, 2 planes of (2 leaves + 2 spines), 4 shared NICs, 2 NVSwitches.
    assert_eq!(name[0], "gpu:0");
    assert_eq!(name[7], "gpu:7");
    assert_eq!(name[8], "leaf:0");
    assert_eq!(name[10], "spine:0");
    assert_eq!(name[12], "leaf:2", "plane 1's leaves follow plane 0's");
    let nic0 = role.iter().position(|r| r == "nic").unwrap();
    assert_eq!(name[nic0], "nic:0");
    let nv0 = role.iter().position(|r| r == "nvswitch").unwrap();
    assert_eq!(name[nv0 + 1], "nvswitch:1");
    let (server, rack, rail, plane, domain) = (
        u32s(&nodes, "server"),
        u32s(&nodes, "rack"),
        u32s(&nodes, "rail"),
        u32s(&nodes, "plane"),
        u32s(&nodes, "domain"),
    );
    // GPU 6: server 1 (one per rack), its NIC's rail (2 GPUs per NIC: rail 1), domain 1.
    assert_eq!(
        (server[6], rack[6], rail[6], domain[6]),
        (Some(1), Some(1), Some(1), Some(1))
    );
    assert_eq!(plane[6], None);
    assert_eq!((plane[8], plane[12]), (Some(0), Some(1)));
    assert_eq!((server[nic0 + 3], rail[nic0 + 3]), (Some(1), Some(1)));
    assert_eq!((domain[nv0 + 1], server[nv0 + 1]), (Some(1), None));
    assert!(u32s(&nodes, "pod").iter().all(Option::is_none));

    let ports = one(&dir.join("ports.arrow"));
    assert_eq!(ports.num_rows(), f.num_ports() as usize);
    let port = u32s(&ports, "port");
    let pnode = u32s(&ports, "node");
    let peer = u32s(&ports, "peer_node");
    let peer_port = u32s(&ports, "peer_port");
    let pname = strings(&ports, "node_name");
    let peer_name = strings(&ports, "peer_name");
    let tier = strings(&ports, "tier");
    let rate = i64s(&ports, "rate_bps");
    for i in 0..ports.num_rows() {
        assert_eq!(port[i], Some(i as u32), "one row per port, in port order");
        let (n, m) = (pnode[i].unwrap() as usize, peer[i].unwrap() as usize);
        assert_eq!(pname[i], name[n]);
        assert_eq!(peer_name[i], name[m]);
        let back = peer_port[i].unwrap() as usize;
        assert_eq!(peer_port[back], Some(i as u32), "peer ports pair up");
        assert_eq!(pnode[back].unwrap() as usize, m);
    }
    let gpu_pcie = (0..ports.num_rows())
        .find(|&i| pname[i] == "gpu:0" && tier[i] == "pcie")
        .unwrap();
    assert_eq!(peer_name[gpu_pcie], "nic:0");
    let up = (0..ports.num_rows())
        .find(|&i| pname[i] == "leaf:0" && tier[i] == "fabric")
        .unwrap();
    assert_eq!(rate[up], 200_000_000_000);

    // links.arrow: `link` is the egress port; its ends and tier are the port's.
    let by_port: HashMap<u32, usize> = (0..ports.num_rows())
        .map(|i| (port[i].unwrap(), i))
        .collect();
    let links = one(&dir.join("links.arrow"));
    let (link, src, dst) = (
        u32s(&links, "link"),
        u32s(&links, "src"),
        u32s(&links, "dst"),
    );
    let ltier = strings(&links, "tier");
    for r in 0..links.num_rows() {
        let i = by_port[&link[r].unwrap()];
        assert_eq!((src[r], dst[r]), (pnode[i], peer[i]));
        assert_eq!(ltier[r], tier[i]);
    }

    // queues.arrow: with hosts = true, GPU ports are sampled too; `node` names the port's owner
    // whatever it is (`switch` keeps its old meaning and value).
    let queues = one(&dir.join("queues.arrow"));
    assert!(queues.num_rows() > 0);
    let (qnode, qswitch, qport) = (
        u32s(&queues, "node"),
        u32s(&queues, "switch"),
        u32s(&queues, "port"),
    );
    assert_eq!(qnode, qswitch);
    for r in 0..queues.num_rows() {
        assert_eq!(pnode[by_port[&qport[r].unwrap()]], qnode[r]);
    }
    assert!(
        qnode.iter().any(|n| role[n.unwrap() as usize] == "gpu"),
        "GPU NIC queues are in the table, under node"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn fat_tree_and_dragonfly_places() {
    let fat = r#"
[topology]
kind = "fat_tree"
k = 4
[[workload]]
kind = "flows"
flows = [{ src = 0, dst = 15, size = "4KB" }]
"#;
    let dir = common::scratch("fabric-tables", "fat");
    common::write_run(fat, &dir);
    let nodes = one(&dir.join("nodes.arrow"));
    let name = strings(&nodes, "name");
    let pod = u32s(&nodes, "pod");
    let at = |n: &str| name.iter().position(|x| x == n).unwrap();
    assert_eq!(pod[at("host:5")], Some(1));
    assert_eq!(pod[at("edge:7")], Some(3));
    assert_eq!(pod[at("agg:2")], Some(1));
    assert_eq!(pod[at("core:0")], None);
    assert!(u32s(&nodes, "group").iter().all(Option::is_none));
    std::fs::remove_dir_all(&dir).unwrap();

    let dfly = r#"
[topology]
kind = "dragonfly_plus"
leaves = 2
spines = 2
hosts_per_leaf = 2
h = 1
g = 3
[[workload]]
kind = "flows"
flows = [{ src = 0, dst = 11, size = "4KB" }]
"#;
    let dir = common::scratch("fabric-tables", "dfly");
    common::write_run(dfly, &dir);
    let nodes = one(&dir.join("nodes.arrow"));
    let name = strings(&nodes, "name");
    let group = u32s(&nodes, "group");
    let at = |n: &str| name.iter().position(|x| x == n).unwrap();
    assert_eq!(
        group[at("host:5")],
        Some(1),
        "hosts 4..8 are on group 1's leaves"
    );
    assert_eq!(group[at("leaf:3")], Some(1));
    assert_eq!(group[at("spine:5")], Some(2));
    std::fs::remove_dir_all(&dir).unwrap();
}
