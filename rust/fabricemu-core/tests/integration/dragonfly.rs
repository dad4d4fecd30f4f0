//! Dragonfly and Dragonfly+ fabrics with minimal routing.
//! Source: Kim, Dally, Scott, Abts, "Technology-Driven, Highly-Scalable Dragonfly Topology",
//! ISCA 2008 (and shared/reference/README.md section 4): a minimal path is at most
//! local -> global -> local, i.e. at most one global hop and three router-to-router hops.

use fabricemu_core::scenario::parse_toml;
use fabricemu_core::topology::Tier;
use fabricemu_core::Simulation;

use crate::common;

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
    let mut sim = Simulation::build(&spec).unwrap();
    let st = sim.run_to_end();
    assert_eq!(st.flows_finished, st.flows_total);
    sim.check_conservation().unwrap();
    let w = sim.world();
    let mut max_global = 0;
    let mut max_router_hops = 0;
    for fid in w.flows.ids() {
        let path = w.flow_path_ports(fid);
        let global = path
            .iter()
            .filter(|&&p| w.fabric.tier[p] == Tier::Global)
            .count();
        let router_hops = path
            .iter()
            .filter(|&&p| w.fabric.tier[p] != Tier::Host)
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
    let mut sim = Simulation::build(&spec).unwrap();
    let st = sim.run_to_end();
    assert_eq!(st.flows_finished, st.flows_total);
    let w = sim.world();
    for fid in w.flows.ids() {
        let path = w.flow_path_ports(fid);
        let global = path
            .iter()
            .filter(|&&p| w.fabric.tier[p] == Tier::Global)
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

// ---- non-minimal routing and hop classes ------------------------------------------------------

const DF72: &str = "kind = \"dragonfly\"\np = 2\na = 4\nh = 2\ng = 9\nlink_rate = \"100Gbps\"\nlink_delay = \"100ns\"\nglobal_link_delay = \"1us\"";

/// Every host of group x sends `size` to the host at the same position of group x + 1: the
/// dragonfly's worst case for minimal routing (one global link carries a whole group's traffic).
fn worst_case_flows(size: &str) -> String {
    (0..72)
        .map(|h| format!("{{src = {h}, dst = {}, size = \"{size}\"}}", (h + 8) % 72))
        .collect::<Vec<_>>()
        .join(", ")
}

fn run(toml: &str) -> fabricemu_core::RunStats {
    common::run(toml).stats()
}

#[test]
fn valiant_paths_cross_at_most_two_global_links() {
    // Kim et al. 2008: Valiant routes minimally to a random intermediate group, then minimally to
    // the destination: at most two global hops. Minimal routing never needs a second one.
    for (lb, most) in [
        ("min", 1),
        ("valiant", 2),
        ("ugal_l", 2),
        ("ugal_g", 2),
        ("par", 2),
    ] {
        let st = run(&format!(
            "[topology]\n{DF72}\n[routing]\nload_balancing = \"{lb}\"\n[[workload]]\nkind = \"flows\"\nflows = [{}]",
            all_pairs_flows(72, 3)
        ));
        assert_eq!(st.flows_finished, st.flows_total, "{lb}");
        assert_eq!(st.max_global_hops, most, "{lb}");
        // Data and control packets are counted apart; the total is their sum.
        assert_eq!(
            st.packets_nonminimal,
            st.data_packets_nonminimal + st.control_packets_nonminimal,
            "{lb}"
        );
        assert!(st.data_packets_nonminimal <= st.data_packets_sent, "{lb}");
        assert!(
            st.control_packets_nonminimal <= st.control_packets_sent,
            "{lb}"
        );
        if lb == "valiant" {
            // Every packet between groups goes via a third group: most data packets (8 of 9
            // groups are elsewhere; pairs within a group stay minimal), and their ACKs too.
            assert!(st.packets_nonminimal > st.packet_hops / 10, "{st:?}");
            assert!(
                st.data_packets_nonminimal * 2 > st.data_packets_sent,
                "{st:?}"
            );
            assert!(st.control_packets_nonminimal > 0, "{st:?}");
        }
        if lb == "min" {
            assert_eq!(st.packets_nonminimal, 0);
        }
    }
}

#[test]
fn non_minimal_routing_relieves_the_worst_case() {
    // 8 flows of 500 KB per group toward the next group: minimally they share one 100 Gbps
    // global link (8 x 500 KB / 12.5 GB/s = 320 us); Valiant and UGAL spread them over the
    // group's other global links, so the last flow ends well before that.
    let t = |lb: &str| {
        let st = run(&format!(
            "[topology]\n{DF72}\n[switch]\nbuffer = \"4MB\"\npfc = {{ enabled = true }}\n[routing]\nload_balancing = \"{lb}\"\n[[workload]]\nkind = \"flows\"\nflows = [{}]",
            worst_case_flows("500KB")
        ));
        assert_eq!(st.flows_finished, 72, "{lb}");
        assert_eq!(st.lossless_drops, 0, "{lb}");
        st.simulated_ps as f64 / 1e6
    };
    let min = t("min");
    assert!((320.0..340.0).contains(&min), "MIN took {min} us");
    for lb in ["valiant", "ugal_l", "ugal_g", "par"] {
        let us = t(lb);
        assert!(us < 0.5 * min, "{lb} took {us} us, MIN {min} us");
    }
}

fn deadlock_prone(lb: &str, hop_classes: bool) -> String {
    // Small buffers, PFC, every group at once toward the next one through random intermediate
    // groups: pause dependencies between groups can close a cycle within one class.
    format!(
        "[topology]\n{DF72}\n[switch]\nbuffer = \"300KB\"\npfc = {{ enabled = true }}\n[routing]\nload_balancing = \"{lb}\"\nhop_classes = {hop_classes}\n[[workload]]\nkind = \"flows\"\nflows = [{}]",
        worst_case_flows("500KB")
    )
}

#[test]
fn hop_classes_keep_non_minimal_routing_deadlock_free_under_pfc() {
    // The virtual-channel argument (Kim et al. 2008; Dally & Towles): a packet moves up one
    // lossless class per global hop (and PAR once more for its extra local hop), so every pause
    // dependency points to the same or a higher class and, within a class, from local to global
    // links only: no cycle of pauses can form. The run's deadlock detector is the witness.
    for lb in ["valiant", "ugal_l", "ugal_g", "par"] {
        let st = run(&deadlock_prone(lb, true));
        assert_eq!(st.pfc_deadlocks, 0, "{lb}: {st:?}");
        assert_eq!(st.flows_finished, 72, "{lb}");
        assert_eq!(st.lossless_drops, 0, "{lb}");
        assert!(st.pfc_pause_frames > 0, "{lb}: the test must exercise PFC");
    }
}

#[test]
fn without_hop_classes_valiant_deadlocks_and_the_run_ends() {
    // The same traffic in one class closes a cycle of pauses; the detector reports it and a run
    // waiting for every flow ends there instead of spinning forever.
    let st = run(&deadlock_prone("valiant", false));
    assert!(st.pfc_deadlocks >= 1, "{st:?}");
    assert!(st.first_deadlock_ps.is_some());
    assert!(st.flows_finished < 72);
}

#[test]
fn non_minimal_routing_errors_name_the_key() {
    let err = |t: &str| parse_toml(t, "t.toml").unwrap_err();
    let e = err("[topology]\nkind = \"fat_tree\"\nk = 4\n[routing]\nload_balancing = \"valiant\"");
    assert_eq!(e.path, "routing.load_balancing");
    assert!(e.message.contains("dragonfly"), "{e}");
    let e = err("[topology]\nkind = \"fat_tree\"\nk = 4\n[routing]\nhop_classes = true");
    assert_eq!(e.path, "routing.hop_classes");
    let e = err("[topology]\nkind = \"fat_tree\"\nk = 4\n[routing]\nugal_candidates = 2");
    assert_eq!(e.path, "routing.ugal_candidates");
    // On a dragonfly they may stay while a sweep varies the routing.
    for lb in ["min", "valiant", "ecmp"] {
        parse_toml(
            &format!("[topology]\n{DF72}\n[routing]\nload_balancing = \"{lb}\"\nugal_candidates = 2\nugal_threshold = \"1KB\"\n[[workload]]\nkind = \"permutation\"\nsize = \"1MB\""),
            "t.toml",
        )
        .unwrap_or_else(|e| panic!("{lb}: {e}"));
    }
    let e = err(&format!(
        "[topology]\n{DF72}\n[routing]\nload_balancing = \"ugal_l\"\nugal_candidates = 0"
    ));
    assert_eq!(e.path, "routing.ugal_candidates");
    // Data in priority 5 would climb into 7, the control priority.
    let e = err(&format!(
        "[topology]\n{DF72}\n[switch]\npfc = {{ enabled = true }}\n[routing]\nload_balancing = \"valiant\"\n[transport]\npriority = 5"
    ));
    assert_eq!(e.path, "routing.hop_classes");
    assert!(e.message.contains("control priority"), "{e}");
    let e = err(&format!(
        "[topology]\n{DF72}\n[routing]\nload_balancing = \"ugal\""
    ));
    assert!(e.message.contains("ugal_l"), "{e}");
}

#[test]
fn per_flowlet_decisions_keep_each_flow_in_order() {
    // Per packet, Valiant and UGAL send a flow's packets over different intermediate groups, so
    // they arrive out of order (selective recovery copes, with spurious retransmissions). Per
    // flowlet the choice holds while the flow's packets keep coming (a line-rate flow has no
    // gaps): no reordering, yet the flows still go non-minimally.
    for lb in ["valiant", "ugal_l", "par"] {
        let scenario = |adaptive: &str| {
            format!(
                "[topology]\n{DF72}\n[switch]\npfc = {{ enabled = true }}\n[routing]\nload_balancing = \"{lb}\"\nadaptive = \"{adaptive}\"\nflowlet_gap = \"5us\"\n[[workload]]\nkind = \"flows\"\nflows = [{}]",
                worst_case_flows("300KB")
            )
        };
        let per_packet = run(&scenario("packet"));
        assert!(per_packet.out_of_order_packets > 0, "{lb}: {per_packet:?}");
        let per_flowlet = run(&scenario("flowlet"));
        assert_eq!(per_flowlet.flows_finished, 72, "{lb}");
        assert_eq!(per_flowlet.out_of_order_packets, 0, "{lb}: {per_flowlet:?}");
        assert_eq!(per_flowlet.retransmitted_packets, 0, "{lb}");
        assert!(per_flowlet.packets_nonminimal > 0, "{lb}");
    }
    let e = parse_toml(
        &format!(
            "[topology]\n{DF72}\n[routing]\nload_balancing = \"valiant\"\nadaptive = \"flow\""
        ),
        "t.toml",
    )
    .unwrap_err();
    assert_eq!(e.path, "routing.adaptive");
}
