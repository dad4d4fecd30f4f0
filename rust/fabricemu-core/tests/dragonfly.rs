//! Dragonfly and Dragonfly+ fabrics with minimal routing.
//! Source: Kim, Dally, Scott, Abts, "Technology-Driven, Highly-Scalable Dragonfly Topology",
//! ISCA 2008 (and shared/reference/README.md section 4): a minimal path is at most
//! local -> global -> local, i.e. at most one global hop and three router-to-router hops.

use fabricemu_core::scenario::parse_toml;
use fabricemu_core::topology::Tier;
use fabricemu_core::Simulation;

fn all_pairs_flows(hosts: u32, stride: u32) -> String {
    let mut v = Vec::new();
    for s in (0..hosts).step_by(stride as usize) {
        for d in 0..hosts {
            if d != s {
                v.push(format!("{{src = {s}, dst = {d}, size = \"1KB\"}}"));
            }
        }
    }
    v.join(", ")
}

fn check_min_paths(topology: &str, hosts: u32, stride: u32) {
    let toml = format!(
        "[topology]\n{topology}\nglobal_link_delay = \"1us\"\n[[workload]]\nkind = \"flows\"\nflows = [{}]",
        all_pairs_flows(hosts, stride)
    );
    let (_, spec) = parse_toml(&toml, "df.toml").unwrap_or_else(|e| panic!("{e}"));
    let mut sim = Simulation::new(&spec).unwrap();
    let st = sim.run_to_end();
    assert_eq!(st.flows_finished, st.flows_total);
    sim.check_conservation().unwrap();
    let w = sim.world();
    let mut max_global = 0;
    let mut max_router_hops = 0;
    for fid in 0..w.flows.len() as u32 {
        let path = w.flow_path_ports(fid);
        let global = path
            .iter()
            .filter(|&&p| w.fabric.tier[p as usize] == Tier::Global)
            .count();
        let router_hops = path
            .iter()
            .filter(|&&p| w.fabric.tier[p as usize] != Tier::Host)
            .count();
        max_global = max_global.max(global);
        max_router_hops = max_router_hops.max(router_hops);
        assert!(global <= 1, "flow {fid}: {global} global hops");
        assert!(
            router_hops <= 3,
            "flow {fid}: {router_hops} router-to-router hops"
        );
    }
    assert_eq!(
        (max_global, max_router_hops),
        (1, 3),
        "some pairs need the full minimal path"
    );
}

#[test]
fn minimal_paths_on_the_72_node_dragonfly() {
    for arrangement in ["absolute", "relative"] {
        check_min_paths(
            &format!(
                "kind = \"dragonfly\"\np = 2\na = 4\nh = 2\ng = 9\narrangement = \"{arrangement}\""
            ),
            72,
            1,
        );
    }
}

#[test]
fn minimal_paths_on_the_1056_node_dragonfly() {
    check_min_paths(
        "kind = \"dragonfly\"\np = 4\na = 8\nh = 4\ng = 33",
        1056,
        97,
    );
}

#[test]
fn dragonfly_plus_minimal_paths_cross_one_global_link() {
    // Leaf -> spine -> global -> spine -> leaf: at most one global hop, four switch hops.
    let toml = format!(
        "[topology]\nkind = \"dragonfly_plus\"\nleaves = 2\nspines = 2\nhosts_per_leaf = 2\nh = 2\ng = 5\n[[workload]]\nkind = \"flows\"\nflows = [{}]",
        all_pairs_flows(20, 1)
    );
    let (_, spec) = parse_toml(&toml, "dfp.toml").unwrap_or_else(|e| panic!("{e}"));
    let mut sim = Simulation::new(&spec).unwrap();
    let st = sim.run_to_end();
    assert_eq!(st.flows_finished, st.flows_total);
    let w = sim.world();
    for fid in 0..w.flows.len() as u32 {
        let path = w.flow_path_ports(fid);
        let global = path
            .iter()
            .filter(|&&p| w.fabric.tier[p as usize] == Tier::Global)
            .count();
        assert!(global <= 1 && path.len() - 2 <= 4, "flow {fid}: {path:?}");
    }
}

#[test]
fn dragonfly_errors_name_the_key() {
    let err = |t: &str| parse_toml(&format!("[topology]\n{t}"), "t.toml").unwrap_err();
    let e = err("kind = \"dragonfly\"\np = 2\na = 4\nh = 2\ng = 10");
    assert_eq!(e.path, "topology.g");
    assert!(
        e.message.contains("1..=9") || e.message.contains("2..=9"),
        "{e}"
    );
    let e = err("kind = \"dragonfly\"\np = 2\na = 4\nh = 2\ng = 9\nleaves = 3");
    assert_eq!(e.path, "topology.leaves");
    let e = err("kind = \"fat_tree\"\nk = 4\ng = 9");
    assert_eq!(e.path, "topology.g");
}
