//! GPU clusters (`[cluster]`, issue 13 item 1-2): the fabric built for GPU servers with a scale-up
//! domain and NICs on a scale-out topology (rail or ToR cabling, several planes, shared NICs), its
//! counts, its layout, the errors of bad keys and combinations, and that the engine runs it.

use crate::common;

use common::{run, scenario_error, spec};
use fabricemu_core::budget;
use fabricemu_core::ids::{NodeId, PortId};
use fabricemu_core::topology::{self, summary, Fabric, Role, Tier};

const WORKLOAD: &str = "[[workload]]\nkind = \"permutation\"\nsize = \"64KiB\"\n";

fn fabric(text: &str) -> Fabric {
    topology::build_scenario(&spec(text)).unwrap()
}

fn tier_links(f: &Fabric, tier: Tier) -> u32 {
    f.ports()
        .filter(|&p| f.tier[p] == tier && f.peer_port[p] > p)
        .count() as u32
}

/// The node numbered `n`.
fn node(n: u32) -> NodeId {
    NodeId::new(n)
}

/// Which of its node's ports the far end of port `p` is (the slot of a host link on its leaf).
fn far_slot(f: &Fabric, p: PortId) -> u32 {
    let far = f.peer_port[p];
    far.get() - f.ports_of(f.peer_node[p]).next().expect("a port").get()
}

fn count_role(f: &Fabric, role: Role) -> u32 {
    f.role.iter().filter(|&&r| r == role).count() as u32
}

/// A DGX-H100-SuperPOD-like scalable unit: 32 servers x 8 GPUs, 8 x 400G NICs each, rail-optimised
/// leaf-spine (8 rail leaves of 32 server ports, 4 spines).
const SUPERPOD: &str = r#"
[topology]
kind = "leaf_spine"
leaves = 8
spines = 4
hosts_per_leaf = 32
link_rate = "400Gbps"
fabric_link_rate = "800Gbps"
[cluster]
gpus_per_server = 8
"#;

#[test]
fn superpod_unit_counts_and_rails() {
    let f = fabric(&format!("{SUPERPOD}{WORKLOAD}"));
    let c = f.cluster.as_deref().expect("a cluster layout");
    assert_eq!((c.gpus, c.servers, c.domains), (256, 32, 32));
    assert_eq!(f.num_hosts, 256);
    assert_eq!(count_role(&f, Role::Gpu), 256);
    assert_eq!(count_role(&f, Role::Leaf), 8);
    assert_eq!(count_role(&f, Role::Spine), 4);
    assert_eq!(count_role(&f, Role::NvSwitch), 32);
    assert_eq!(count_role(&f, Role::Nic), 0);
    assert_eq!(tier_links(&f, Tier::Host), 256);
    assert_eq!(tier_links(&f, Tier::Fabric), 32);
    assert_eq!(tier_links(&f, Tier::ScaleUp), 256);
    assert_eq!(tier_links(&f, Tier::Pcie), 0);
    // Node ids: GPUs, then leaves and spines, then the scale-up switches.
    assert_eq!(f.role[node(256)], Role::Leaf);
    assert_eq!(f.role[node(264)], Role::Spine);
    assert_eq!(c.first_scaleup_switch, Some(node(268)));
    // GPU g of server s: NIC port first (on rail leaf g % 8, slot s), scale-up port last.
    for g in 0..256u32 {
        let (s, i, gpu) = (g / 8, g % 8, node(g));
        let ports: Vec<PortId> = f.ports_of(gpu).collect();
        assert_eq!(ports.len(), 2);
        assert_eq!(c.nic_ports(gpu), &ports[..1]);
        assert_eq!(c.scaleup_port(gpu), Some(ports[1]));
        let leaf = f.peer_node[ports[0]];
        assert_eq!(leaf, node(256 + i), "GPU {g}: NIC {i} on rail leaf {i}");
        assert_eq!(
            far_slot(&f, ports[0]),
            s,
            "server {s} on slot {s} of its rail leaf"
        );
        assert_eq!(f.peer_node[ports[1]], node(268 + s));
        assert_eq!(f.tier[ports[1]], Tier::ScaleUp);
        assert_eq!(f.rate_bps[ports[1]], 3_600_000_000_000);
        assert_eq!((c.server(gpu), c.rail(gpu), c.domain(gpu)), (s, i, Some(s)));
    }
    let sum = summary::summarize(&f);
    let cs = sum.cluster.expect("a cluster summary");
    assert_eq!(
        (cs.gpus, cs.servers, cs.nics, cs.rails, cs.planes),
        (256, 32, 256, 8, 1)
    );
    assert_eq!(cs.scaleup_domains, 32);
    assert_eq!(cs.scaleout_bps_per_gpu, 400_000_000_000);
    // 32 x 400G down per leaf, 4 x 800G up: 4:1 at the leaves.
    let leaf = sum.roles.iter().find(|r| r.role == "leaf").unwrap();
    assert_eq!(leaf.oversubscription, Some(4.0));
    // The scale-out bisection leaves the scale-up links out. Servers 0-15 against 16-31: every
    // rail leaf holds 16 NICs of each half, so the cut is crossed at the leaves, not the spines.
    assert_eq!(sum.bisection_demand_bps, 128 * 400_000_000_000);
    assert_eq!(sum.bisection_bps, sum.bisection_demand_bps);
}

#[test]
fn nvl72_domain_spans_servers() {
    // GB200 NVL72-like: 18 servers of 4 GPUs in one 72-GPU domain (NVLink 5: 1.8 TB/s per GPU
    // both ways = 7200 Gbps each way), 800G NICs on 4 rail leaves.
    let f = fabric(&format!(
        r#"
[topology]
kind = "leaf_spine"
leaves = 4
spines = 2
hosts_per_leaf = 18
link_rate = "800Gbps"
[cluster]
gpus_per_server = 4
scaleup = {{ gpus = 72, rate = "7200Gbps" }}
{WORKLOAD}"#
    ));
    let c = f.cluster.as_deref().unwrap();
    assert_eq!(
        (c.gpus, c.servers, c.domains, c.gpus_per_domain),
        (72, 18, 1, 72)
    );
    assert_eq!(count_role(&f, Role::NvSwitch), 1);
    let sw = c.domain_switch(0).unwrap();
    assert_eq!(f.ports_of(sw).len(), 72);
    assert!(c.domain_gpus(0).eq((0..72).map(node)));
    assert_eq!(c.spec.servers_per_rack, 18, "a rack is a domain by default");
    assert_eq!(c.racks(), 1);
    for gpu in (0..72).map(node) {
        assert_eq!(f.rate_bps[c.scaleup_port(gpu).unwrap()], 7_200_000_000_000);
        assert_eq!(f.rate_bps[c.nic_ports(gpu)[0]], 800_000_000_000);
    }
    let cs = summary::summarize(&f).cluster.unwrap();
    assert_eq!(
        (cs.scaleup_domains, cs.gpus_per_domain, cs.racks),
        (1, 72, 1)
    );
}

#[test]
fn rail_and_tor_cabling() {
    // 2 units of 4 rail leaves, 4 servers per unit (4 slots per leaf): 8 servers of 4 GPUs.
    let topo = "[topology]\nkind = \"leaf_spine\"\nleaves = 8\nspines = 2\nhosts_per_leaf = 4\n";
    let rail = fabric(&format!("{topo}[cluster]\ngpus_per_server = 4\n{WORKLOAD}"));
    let tor = fabric(&format!(
        "{topo}[cluster]\ngpus_per_server = 4\ncabling = \"tor\"\n{WORKLOAD}"
    ));
    let leaf_of = |f: &Fabric, gpu: u32| f.peer_node[f.host_port(node(gpu))].get() - 32;
    for s in 0..8u32 {
        for i in 0..4u32 {
            let gpu = s * 4 + i;
            // Rail: NIC i of every server of unit u on leaf 4u + i.
            assert_eq!(leaf_of(&rail, gpu), (s / 4) * 4 + i, "rail: GPU {gpu}");
            // ToR: all NICs of server s on one leaf (4 slots: one server per leaf).
            assert_eq!(leaf_of(&tor, gpu), s, "tor: GPU {gpu}");
        }
    }
    // Same counts either way.
    for f in [&rail, &tor] {
        assert_eq!(tier_links(f, Tier::Host), 32);
        assert_eq!(tier_links(f, Tier::Fabric), 16);
    }
}

#[test]
fn planes_copy_the_topology_and_each_nic_has_a_port_on_each() {
    let f = fabric(&format!(
        "[topology]\nkind = \"leaf_spine\"\nleaves = 2\nspines = 2\nhosts_per_leaf = 4\n\
         [cluster]\ngpus_per_server = 2\nplanes = 3\n{WORKLOAD}"
    ));
    let c = f.cluster.as_deref().unwrap();
    assert_eq!((c.gpus, c.servers), (8, 4));
    assert_eq!(count_role(&f, Role::Leaf), 6);
    assert_eq!(count_role(&f, Role::Spine), 6);
    assert_eq!(tier_links(&f, Tier::Host), 24);
    assert_eq!(tier_links(&f, Tier::Fabric), 12);
    // Plane p's switches are 8 + 4p .. 8 + 4p + 4 (2 leaves, 2 spines), counted across planes.
    for g in 0..8u32 {
        let gpu = node(g);
        let nic = c.nic_ports(gpu);
        assert_eq!(nic.len(), 3);
        let slot0 = far_slot(&f, nic[0]);
        for (p, &port) in nic.iter().enumerate() {
            let leaf = f.peer_node[port];
            assert_eq!(leaf, node(8 + 4 * p as u32 + (g % 2)), "GPU {g} plane {p}");
            assert_eq!(far_slot(&f, port), slot0, "same slot on every plane");
        }
        assert_eq!(f.ports_of(gpu).len(), 4, "3 planes + scale-up");
        assert_eq!(c.scaleup_port(gpu), f.ports_of(gpu).next_back());
    }
    let cs = summary::summarize(&f).cluster.unwrap();
    assert_eq!(cs.planes, 3);
    assert_eq!(cs.scaleout_bps_per_gpu, 300_000_000_000);
}

#[test]
fn shared_nics_are_switches_between_pcie_and_the_rails() {
    let f = fabric(&format!(
        "[topology]\nkind = \"leaf_spine\"\nleaves = 4\nspines = 2\nhosts_per_leaf = 2\n\
         [cluster]\ngpus_per_server = 8\nnics_per_server = 4\nplanes = 2\n\
         nic = {{ rate = \"256Gbps\", latency = \"200ns\", buffer = \"1MiB\" }}\n{WORKLOAD}"
    ));
    let c = f.cluster.as_deref().unwrap();
    assert_eq!((c.gpus, c.servers), (16, 2));
    assert_eq!(count_role(&f, Role::Nic), 8);
    assert_eq!(tier_links(&f, Tier::Pcie), 16);
    assert_eq!(tier_links(&f, Tier::Host), 16, "8 NICs x 2 planes");
    for g in 0..16u32 {
        let gpu = node(g);
        let nic = c.nic_node(c.server(gpu), c.rail(gpu)).unwrap();
        assert_eq!(c.rail(gpu), (g % 8) / 2, "GPUs 2k and 2k+1 share NIC k");
        assert_eq!(c.nic_ports(gpu).len(), 1);
        let p = c.nic_ports(gpu)[0];
        assert_eq!((f.tier[p], f.peer_node[p]), (Tier::Pcie, nic));
        assert_eq!((f.rate_bps[p], f.delay_ps[p]), (256_000_000_000, 200_000));
        assert_eq!(f.host_port(gpu), p, "the engine sends on the PCIe link");
        assert_eq!(f.switch_buffer(nic), Some(1 << 20));
        assert_eq!(f.switch_latency(nic), Some(0));
        // A NIC: one port per plane, then its two GPUs.
        let tiers: Vec<Tier> = f.ports_of(nic).map(|p| f.tier[p]).collect();
        assert_eq!(tiers, [Tier::Host, Tier::Host, Tier::Pcie, Tier::Pcie]);
    }
    let sum = summary::summarize(&f);
    // Each GPU demands its share of its NIC (100G), not its PCIe link.
    assert_eq!(sum.bisection_demand_bps, 8 * 100_000_000_000);
    assert_eq!(sum.bisection_bps, sum.bisection_demand_bps);
    let cs = sum.cluster.unwrap();
    assert!(cs.shared_nics);
    assert_eq!(cs.nics, 8);
    // Two GPUs share a NIC's 2 x 100G: 100G each (less than the 256G PCIe link).
    assert_eq!(cs.scaleout_bps_per_gpu, 100_000_000_000);
}

#[test]
fn a_nic_attachment_on_a_gpu_of_its_own_adds_latency_and_caps_the_rate() {
    let f = fabric(&format!(
        "[topology]\nkind = \"fat_tree\"\nk = 4\nlink_rate = \"400Gbps\"\nlink_delay = \"1us\"\n\
         [cluster]\ngpus_per_server = 2\nnic = {{ rate = \"256Gbps\", latency = \"150ns\" }}\n{WORKLOAD}"
    ));
    let c = f.cluster.as_deref().unwrap();
    for gpu in (0..c.gpus).map(node) {
        let p = f.host_port(gpu);
        assert_eq!(f.tier[p], Tier::Host);
        assert_eq!((f.rate_bps[p], f.delay_ps[p]), (256_000_000_000, 1_150_000));
    }
    assert_eq!(count_role(&f, Role::Nic), 0);
}

#[test]
fn every_topology_kind_takes_a_cluster() {
    for topo in [
        "kind = \"fat_tree\"\nk = 4",
        "kind = \"leaf_spine\"\nleaves = 4\nspines = 2\nhosts_per_leaf = 4",
        "kind = \"dragonfly\"\np = 2\na = 4\nh = 2\ng = 9",
        "kind = \"dragonfly_plus\"\nleaves = 2\nspines = 2\nhosts_per_leaf = 2\nh = 2\ng = 5",
    ] {
        let s = spec(&format!(
            "[topology]\n{topo}\n[cluster]\ngpus_per_server = 2\n{WORKLOAD}"
        ));
        let slots = s.topology.num_hosts();
        let f = topology::build_scenario(&s).unwrap();
        assert_eq!(f.num_hosts, slots, "{topo}: 2 GPUs and 2 NICs per server");
        assert_eq!(s.num_endpoints(), slots);
        // The budget's estimate is the fabric as built.
        let e = budget::estimate(&s);
        assert_eq!(e.hosts, f.num_hosts as u64, "{topo}");
        assert_eq!(e.switches, (f.num_nodes - f.num_hosts) as u64, "{topo}");
        assert_eq!(e.ports, f.num_ports() as u64, "{topo}");
    }
}

#[test]
fn budget_counts_planes_shared_nics_and_domains() {
    let s = spec(&format!(
        "[topology]\nkind = \"leaf_spine\"\nleaves = 4\nspines = 2\nhosts_per_leaf = 4\n\
         [cluster]\ngpus_per_server = 8\nnics_per_server = 4\nplanes = 2\nscaleup = {{ gpus = 16 }}\n{WORKLOAD}"
    ));
    let f = topology::build_scenario(&s).unwrap();
    let e = budget::estimate(&s);
    assert_eq!((e.hosts, f.num_hosts), (32, 32));
    assert_eq!(e.switches, (f.num_nodes - f.num_hosts) as u64);
    assert_eq!(e.ports, f.num_ports() as u64);
}

#[test]
fn faults_name_gpus_scaleup_switches_and_nics() {
    let base = "[topology]\nkind = \"leaf_spine\"\nleaves = 4\nspines = 2\nhosts_per_leaf = 2\n\
                [cluster]\ngpus_per_server = 8\nnics_per_server = 4\n";
    for link in [
        r#"["gpu:9", "nvswitch:1"]"#,
        r#"["gpu:9", "nic:4"]"#,
        r#"["nic:3", "leaf:3"]"#,
    ] {
        let text = format!("{base}[[fault]]\nlink = {link}\nat = \"1us\"\n{WORKLOAD}");
        let sim = common::build(&text);
        assert_eq!(sim.world().fabric.num_hosts, 16, "{link}");
    }
    let text = format!("{base}[[fault]]\nlink = [\"gpu:9\", \"nic:0\"]\nat = \"1us\"\n{WORKLOAD}");
    let Err(e) = fabricemu_core::Simulation::build(&spec(&text)) else {
        panic!("gpu:9 and nic:0 are not linked");
    };
    assert_eq!(e.path, "fault.0.link", "{e}");
}

#[test]
fn workloads_address_gpus() {
    let base = "[topology]\nkind = \"leaf_spine\"\nleaves = 2\nspines = 2\nhosts_per_leaf = 2\n\
                [cluster]\ngpus_per_server = 4\nnics_per_server = 2\n";
    // 4 slots / 2 NICs = 2 servers of 4 GPUs: GPUs 0..=7.
    let ok = spec(&format!(
        "{base}[[workload]]\nkind = \"incast\"\nreceiver = 7\nsenders = [0, 1, 2, 3, 4, 5, 6]\nsize = \"8KiB\"\n"
    ));
    assert_eq!(ok.num_endpoints(), 8);
    let e = scenario_error(&format!(
        "{base}[[workload]]\nkind = \"incast\"\nreceiver = 8\nsenders = 3\nsize = \"8KiB\"\n"
    ));
    assert_eq!(e.path, "workload.0.receiver");
    assert!(e.message.contains("0..=7"), "{e}");
}

#[test]
fn workloads_address_servers_racks_and_rails() {
    use fabricemu_core::config::{IncastSenders, WorkloadSpec};
    // 4 servers of 4 GPUs with 2 NICs each (GPUs 0-1 of a server on rail 0, 2-3 on rail 1), 2
    // servers per rack: 16 GPUs.
    let base = "[topology]\nkind = \"leaf_spine\"\nleaves = 2\nspines = 1\nhosts_per_leaf = 4\n\
                [cluster]\ngpus_per_server = 4\nnics_per_server = 2\nservers_per_rack = 2\n\
                [[workload]]\n";
    let w = |text: &str| spec(&format!("{base}{text}")).workloads[0].spec.clone();
    match w("kind = \"all_to_all\"\nhosts = \"server:2\"\nsize = \"1KiB\"") {
        WorkloadSpec::AllToAll { hosts, .. } => assert_eq!(hosts, [8, 9, 10, 11]),
        other => panic!("{other:?}"),
    }
    match w("kind = \"permutation\"\nhosts = [\"rail:1\", 0]\nsize = \"1KiB\"") {
        WorkloadSpec::Permutation { hosts, .. } => {
            assert_eq!(hosts, [2, 3, 6, 7, 10, 11, 14, 15, 0])
        }
        other => panic!("{other:?}"),
    }
    match w("kind = \"incast\"\nreceiver = 0\nsenders = \"rack:1\"\nsize = \"1KiB\"") {
        WorkloadSpec::Incast { senders, .. } => {
            assert_eq!(senders, IncastSenders::Listed((8..16).collect()))
        }
        other => panic!("{other:?}"),
    }
    let groups = |layout: &str| match w(&format!(
        "kind = \"collective\"\nop = \"all_reduce\"\ngroups = {layout}\nsize = \"1MiB\""
    )) {
        WorkloadSpec::Collective(c) => c.groups,
        other => panic!("{other:?}"),
    };
    assert_eq!(groups("\"servers\"").len(), 4);
    assert_eq!(groups("\"servers\"")[3], [12, 13, 14, 15]);
    assert_eq!(
        groups("\"rails\""),
        [
            vec![0, 1, 4, 5, 8, 9, 12, 13],
            vec![2, 3, 6, 7, 10, 11, 14, 15]
        ]
    );
    assert_eq!(groups("\"racks\"")[1], (8..16).collect::<Vec<u32>>());
    assert_eq!(
        groups("[\"server:1\", [0, 8]]"),
        [vec![4, 5, 6, 7], vec![0, 8]]
    );
    // A layout of some hosts: each server's GPUs among them.
    match w("kind = \"collective\"\nop = \"all_reduce\"\nhosts = \"rack:0\"\ngroups = \"rails\"\nsize = \"1MiB\"") {
        WorkloadSpec::Collective(c) => assert_eq!(c.groups, [vec![0, 1, 4, 5], vec![2, 3, 6, 7]]),
        other => panic!("{other:?}"),
    }

    // Errors name the key (and its line).
    let err = |text: &str| scenario_error(&format!("{base}{text}"));
    let e = err("kind = \"all_to_all\"\nhosts = \"server:4\"\nsize = \"1KiB\"");
    assert_eq!(e.path, "workload.0.hosts");
    assert_eq!(e.line, Some(12));
    assert_eq!(
        e.message,
        "server 4 is out of range: this cluster has servers 0..=3"
    );
    let e = err("kind = \"all_to_all\"\nhosts = [\"server:0\", \"rail:0\"]\nsize = \"1KiB\"");
    assert_eq!(e.path, "workload.0.hosts.1");
    assert_eq!(e.message, "host 0 is listed twice");
    let e = err("kind = \"all_to_all\"\nhosts = \"gpu:1\"\nsize = \"1KiB\"");
    assert!(e.message.contains("found \"gpu:1\""), "{e}");
    let e = err("kind = \"incast\"\nreceiver = 5\nsenders = \"server:1\"\nsize = \"1KiB\"");
    assert_eq!(e.path, "workload.0.senders");
    assert_eq!(e.message, "the receiver cannot be one of the senders");
    let e = err("kind = \"collective\"\nop = \"all_reduce\"\ngroups = \"planes\"\nsize = \"1MiB\"");
    assert_eq!(e.path, "workload.0.groups");
    assert!(
        e.message.contains("\"servers\", \"racks\", \"rails\""),
        "{e}"
    );
    let e = err("kind = \"collective\"\nop = \"all_reduce\"\ngroups = \"servers\"\ngroup_size = 2\nsize = \"1MiB\"");
    assert_eq!(e.path, "workload.0.group_size");
    let e = err("kind = \"collective\"\nop = \"all_reduce\"\nhosts = [0, 1, 4]\ngroups = \"servers\"\nsize = \"1MiB\"");
    assert_eq!(e.path, "workload.0.groups");
    assert!(
        e.message.contains("the group of host 4 has one rank"),
        "{e}"
    );

    // Without a [cluster]: hosts only.
    let plain = "[topology]\nkind = \"leaf_spine\"\nleaves = 2\nspines = 1\nhosts_per_leaf = 4\n[[workload]]\n";
    let e = scenario_error(&format!(
        "{plain}kind = \"all_to_all\"\nhosts = \"server:3\"\nsize = \"1KiB\""
    ));
    assert_eq!(e.path, "workload.0.hosts");
    assert!(
        e.message
            .starts_with("\"server:3\" needs a [cluster] section"),
        "{e}"
    );
    let e = scenario_error(&format!(
        "{plain}kind = \"collective\"\nop = \"all_reduce\"\ngroups = \"racks\"\nsize = \"1MiB\""
    ));
    assert_eq!(e.path, "workload.0.groups");
    assert!(
        e.message
            .starts_with("groups = \"racks\" needs a [cluster] section"),
        "{e}"
    );
}

#[test]
fn bad_keys_and_combinations_name_their_key() {
    let topo = "[topology]\nkind = \"leaf_spine\"\nleaves = 6\nspines = 2\nhosts_per_leaf = 6\n";
    for (cluster, path, fragment, line) in [
        (
            "gpus_per_srever = 8",
            "cluster.gpus_per_srever",
            "unknown field",
            7,
        ),
        (
            "gpus_per_server = 8\nnics_per_server = 3",
            "cluster.nics_per_server",
            "divide",
            8,
        ),
        (
            "gpus_per_server = 0",
            "cluster.gpus_per_server",
            "1..=1024",
            7,
        ),
        (
            "gpus_per_server = 4",
            "cluster.cabling",
            "multiple of 4 leaves",
            0,
        ),
        (
            "gpus_per_server = 4\ncabling = \"tor\"",
            "cluster.cabling",
            "multiple of nics_per_server",
            8,
        ),
        (
            "gpus_per_server = 2\ncabling = \"star\"",
            "cluster.cabling",
            "rail",
            8,
        ),
        (
            "gpus_per_server = 2\nplanes = 0",
            "cluster.planes",
            "1..=16",
            8,
        ),
        (
            "gpus_per_server = 2\ncross_rail = \"pci\"",
            "cluster.cross_rail",
            "pxn",
            8,
        ),
        (
            "gpus_per_server = 2\npxn_buffer = \"64KiB\"",
            "cluster.pxn_buffer",
            "at least 133761 B",
            8,
        ),
        (
            "gpus_per_server = 2\ncross_rail = \"spine\"\npxn_buffer = \"1MiB\"",
            "cluster.pxn_buffer",
            "only PXN relays",
            9,
        ),
        (
            "gpus_per_server = 2\nscaleup = { gpus = 3 }",
            "cluster.scaleup.gpus",
            "multiple of gpus_per_server",
            8,
        ),
        (
            "gpus_per_server = 2\nscaleup = { gpus = 8 }",
            "cluster.scaleup.gpus",
            "do not split",
            8,
        ),
        (
            "gpus_per_server = 2\nscaleup = { kind = \"none\", rate = \"1Tbps\" }",
            "cluster.scaleup.kind",
            "no other",
            8,
        ),
        (
            "gpus_per_server = 2\nscaleup = { rate = \"fast\" }",
            "cluster.scaleup.rate",
            "rate",
            8,
        ),
        (
            "gpus_per_server = 2\nscaleup = { latency = \"1us\", colour = 1 }",
            "cluster.scaleup.colour",
            "unknown field",
            8,
        ),
        (
            "gpus_per_server = 2\nnic = { buffer = \"1MiB\" }",
            "cluster.nic.buffer",
            "shared",
            8,
        ),
        (
            "gpus_per_server = 2\nnics_per_server = 1\nnic = { buffer = \"100B\" }",
            "cluster.nic.buffer",
            "one packet",
            9,
        ),
    ] {
        let text = format!("{topo}[cluster]\n{cluster}\n{WORKLOAD}");
        let e = scenario_error(&text);
        assert_eq!(e.path, path, "{cluster}: {e}");
        assert!(e.message.contains(fragment), "{cluster}: {e}");
        if line > 0 {
            assert_eq!(e.line, Some(line), "{cluster}: {e}");
        }
        assert!(e.to_string().starts_with("bad.toml:"), "{e}");
    }
}

#[test]
fn several_planes_on_a_dragonfly_need_minimal_routing() {
    let topo = "[topology]\nkind = \"dragonfly\"\np = 2\na = 4\nh = 2\ng = 9\n";
    let cluster = "[cluster]\ngpus_per_server = 2\nplanes = 2\n";
    let e = scenario_error(&format!(
        "{topo}{cluster}[routing]\nload_balancing = \"valiant\"\n{WORKLOAD}"
    ));
    assert_eq!(e.path, "cluster.planes", "{e}");
    assert!(e.message.contains("minimal routing"), "{e}");
    // Minimal routing on two planes: every flow arrives.
    let sim = run(&format!("{topo}{cluster}{WORKLOAD}"));
    assert_eq!(sim.stats().flows_finished, 72);
}

#[test]
fn hosts_without_a_cluster_are_unchanged() {
    let text = format!("[topology]\nkind = \"fat_tree\"\nk = 4\n{WORKLOAD}");
    let s = spec(&text);
    let f = topology::build_scenario(&s).unwrap();
    assert!(f.cluster.is_none());
    assert!(f.hosts().all(|h| f.role[h] == Role::Host));
    assert_eq!(
        topology::build(&s.topology, &s.switch).port_node,
        f.port_node
    );
    assert!(summary::summarize(&f).cluster.is_none());
    let json = serde_json::to_value(summary::summarize(&f)).unwrap();
    assert!(json.get("cluster").is_none());
}

#[test]
fn the_engine_runs_gpu_fabrics() {
    // Rail and ToR cabling, planes, shared NICs, a domain of two servers: every flow arrives and
    // packets are conserved (common::run), the same on every run.
    for cluster in [
        "gpus_per_server = 4",
        "gpus_per_server = 4\ncabling = \"tor\"\nplanes = 2",
        "gpus_per_server = 4\nnics_per_server = 2\nnic = { buffer = \"256KiB\" }",
        "gpus_per_server = 4\nscaleup = { gpus = 8, buffer = \"4MiB\", latency = \"100ns\" }",
    ] {
        let text = format!(
            "[topology]\nkind = \"leaf_spine\"\nleaves = 4\nspines = 2\nhosts_per_leaf = 4\n\
             [cluster]\n{cluster}\n[switch]\npfc = {{ enabled = true }}\n{WORKLOAD}"
        );
        let sim = run(&text);
        let st = sim.stats();
        assert_eq!(st.flows_finished, st.flows_total, "{cluster}");
        assert_eq!(
            st.flows_total,
            sim.world().fabric.num_hosts as u64,
            "{cluster}"
        );
        let again = run(&text);
        assert_eq!(
            again.stats().simulated_ps,
            st.simulated_ps,
            "{cluster}: deterministic"
        );
    }
}
