//! Where every node of a built fabric is: its name (`"leaf:3"`, `"gpu:17"`, `"host:5"`, exactly
//! the names `[[fault]]` resolves: the role and the node's position among the nodes of that role, in
//! id order) and its place in the structure (pod, group, plane, server, rack, rail, scale-up
//! domain) where the fabric has one. nodes.arrow and ports.arrow are written from it, and
//! `fabricemu topo --export` draws from it.
//!
//! - **pod** (fat tree): edge and aggregation switches of pod p, and the endpoints under them.
//! - **group** (dragonfly, dragonfly+): the routers (leaves and spines) of group g, and their
//!   endpoints.
//! - **plane** (with a `[cluster]`): which copy of the scale-out topology a switch belongs to.
//! - **server, rack, rail** (with a `[cluster]`): for GPUs and shared NICs; **domain** for GPUs and
//!   scale-up switches.
//!
//! Endpoints (hosts, GPUs, shared NICs) take the pod or group of the switch their first scale-out
//! port (plane 0) attaches to.

use super::{Fabric, IdVec, NodeId, Role, Tier};
use crate::config::TopologySpec;

/// One node's name and place (see the module documentation; `None` where it does not apply).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodePlace {
    /// Position among the nodes of the same role: the node is named `"<role>:<index>"`.
    pub index: u32,
    pub pod: Option<u32>,
    pub group: Option<u32>,
    pub plane: Option<u32>,
    pub server: Option<u32>,
    pub rack: Option<u32>,
    pub rail: Option<u32>,
    pub domain: Option<u32>,
}

/// Every node's position among the nodes of its role (its name's index).
pub fn role_indices(fabric: &Fabric) -> IdVec<NodeId, u32> {
    // Per role (by its `repr(u8)`), the nodes of that role seen so far.
    let mut next: Vec<u32> = Vec::new();
    let mut out = IdVec::with_capacity(fabric.num_nodes as usize);
    for r in fabric.role.iter() {
        let k = *r as usize;
        if next.len() <= k {
            next.resize(k + 1, 0);
        }
        out.push(next[k]);
        next[k] += 1;
    }
    out
}

/// The name of node `n` given its role index: `"<role>:<index>"`.
pub fn node_name(fabric: &Fabric, n: NodeId, index: u32) -> String {
    format!("{}:{index}", fabric.role[n].as_str())
}

/// Switches of each role in one copy (plane) of the topology, and the switches per pod or group
/// (the role's `(per_plane, per_unit)`); `per_unit` 0: the role has no pod or group.
fn role_layout(topology: &TopologySpec, role: Role) -> Option<(u32, u32)> {
    match (topology, role) {
        (&TopologySpec::FatTree { k, .. }, Role::Edge | Role::Agg) => Some((k * (k / 2), k / 2)),
        (&TopologySpec::FatTree { k, .. }, Role::Core) => Some(((k / 2) * (k / 2), 0)),
        (&TopologySpec::LeafSpine { leaves, .. }, Role::Leaf) => Some((leaves, 0)),
        (&TopologySpec::LeafSpine { spines, .. }, Role::Spine) => Some((spines, 0)),
        (&TopologySpec::Dragonfly { a, g, .. }, Role::Router) => Some((a * g, a)),
        (&TopologySpec::DragonflyPlus { leaves, g, .. }, Role::Leaf) => Some((leaves * g, leaves)),
        (&TopologySpec::DragonflyPlus { spines, g, .. }, Role::Spine) => Some((spines * g, spines)),
        (&TopologySpec::Clos { shape, .. }, Role::Edge) => Some((shape.tors(), shape.tors_per_pod)),
        (&TopologySpec::Clos { shape, .. }, Role::Agg) => {
            Some((shape.pods * shape.aggs_per_pod, shape.aggs_per_pod))
        }
        (&TopologySpec::Clos { shape, .. }, Role::Core) => Some((shape.cores, 0)),
        _ => None,
    }
}

/// Whether the topology's units are pods (fat tree) or groups (dragonflies).
fn unit_is_pod(topology: &TopologySpec) -> bool {
    matches!(
        topology,
        TopologySpec::FatTree { .. } | TopologySpec::Clos { .. }
    )
}

/// The name and place of every node of `fabric`, built from `topology`.
pub fn places(fabric: &Fabric, topology: &TopologySpec) -> IdVec<NodeId, NodePlace> {
    let indices = role_indices(fabric);
    if let TopologySpec::Graph(g) = topology {
        // A graph's places are the file's own attributes.
        return fabric
            .nodes()
            .map(|n| {
                let node = &g.nodes[n.index()];
                NodePlace {
                    index: indices[n],
                    pod: node.pod,
                    group: node.group,
                    rack: node.rack,
                    ..NodePlace::default()
                }
            })
            .collect();
    }
    let cluster = fabric.cluster.as_deref();
    let pods = unit_is_pod(topology);
    let mut out: IdVec<NodeId, NodePlace> = IdVec::with_capacity(fabric.num_nodes as usize);
    // Switches of the scale-out topology first: their unit is arithmetic.
    for n in fabric.nodes() {
        let index = indices[n];
        let mut place = NodePlace {
            index,
            ..NodePlace::default()
        };
        if let Some((per_plane, per_unit)) = role_layout(topology, fabric.role[n]) {
            if per_plane > 0 {
                let unit = (index % per_plane).checked_div(per_unit);
                if pods {
                    place.pod = unit;
                } else {
                    place.group = unit;
                }
                if cluster.is_some() {
                    place.plane = Some(index / per_plane);
                }
            }
        }
        out.push(place);
    }
    if let Some(c) = cluster {
        for gpu in fabric.hosts() {
            let server = c.server(gpu);
            let p = &mut out[gpu];
            p.server = Some(server);
            p.rack = Some(c.rack(server));
            p.rail = Some(c.rail(gpu));
            p.domain = c.domain(gpu);
        }
        if let Some(first) = c.first_nic {
            let per_server = c.spec.nics_per_server;
            for k in 0..c.servers * per_server {
                let server = k / per_server;
                let p = &mut out[NodeId::new(first.get() + k)];
                p.server = Some(server);
                p.rack = Some(c.rack(server));
                p.rail = Some(k % per_server);
            }
        }
        for d in 0..c.domains {
            if let Some(sw) = c.domain_switch(d) {
                out[sw].domain = Some(d);
            }
        }
    }
    // Endpoints and shared NICs: the pod or group of the switch their first scale-out port
    // reaches (through a shared NIC for a GPU that has one).
    for n in fabric.nodes() {
        if !(fabric.is_host(n) || fabric.role[n] == Role::Nic) {
            continue;
        }
        let mut at = n;
        for _ in 0..2 {
            let Some(p) = fabric
                .ports_of(at)
                .find(|&p| matches!(fabric.tier[p], Tier::Host | Tier::Pcie))
            else {
                break;
            };
            let peer = fabric.peer_node[p];
            if fabric.tier[p] == Tier::Pcie {
                at = peer;
                continue;
            }
            let (pod, group) = (out[peer].pod, out[peer].group);
            out[n].pod = pod;
            out[n].group = group;
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LinkSpec;

    fn link() -> LinkSpec {
        LinkSpec {
            rate_bps: 100_000_000_000,
            delay_ps: 1_000,
        }
    }

    #[test]
    fn fat_tree_names_and_pods() {
        let topo = TopologySpec::FatTree {
            k: 4,
            host: link(),
            fabric: link(),
            core: link(),
        };
        let f = super::super::build_with(&topo, None);
        let places = places(&f, &topo);
        let name = |n: u32| node_name(&f, NodeId::new(n), places[NodeId::new(n)].index);
        // 16 hosts, then 8 edges, 8 aggs, 4 cores.
        assert_eq!(name(0), "host:0");
        assert_eq!(name(15), "host:15");
        assert_eq!(name(16), "edge:0");
        assert_eq!(name(24), "agg:0");
        assert_eq!(name(35), "core:3");
        // Host 5 is under edge 2 (two hosts per edge), in pod 1.
        assert_eq!(places[NodeId::new(5)].pod, Some(1));
        assert_eq!(places[NodeId::new(16 + 7)].pod, Some(3));
        assert_eq!(places[NodeId::new(24 + 2)].pod, Some(1));
        assert_eq!(places[NodeId::new(32)].pod, None, "cores have no pod");
        assert!(places
            .iter()
            .all(|p| p.group.is_none() && p.plane.is_none()));
    }

    #[test]
    fn names_are_the_ones_faults_resolve() {
        let topo = TopologySpec::Dragonfly {
            p: 2,
            a: 2,
            h: 1,
            g: 3,
            arrangement: crate::config::Arrangement::Absolute,
            host: link(),
            local: link(),
            global: link(),
        };
        let f = super::super::build_with(&topo, None);
        let places = places(&f, &topo);
        for n in f.nodes() {
            // A fault on the node's first link, naming the node as nodes.arrow does.
            let name = node_name(&f, n, places[n].index);
            let peer = f.peer_node[f.ports_of(n).next().unwrap()].get();
            let file: super::super::faults::FaultFile =
                serde_json::from_value(serde_json::json!({"link": [name, peer], "at": "1us"}))
                    .unwrap();
            let spec = file.validate(0).unwrap();
            let resolved = super::super::faults::resolve(&f, &[spec], &[], 0).unwrap();
            assert_eq!(f.port_node[resolved[0].links[0].egress()], n, "{name}");
        }
        // Routers of group 1 are routers 2 and 3; host 5 is on router 2.
        assert_eq!(places[NodeId::new(12 + 2)].group, Some(1));
        assert_eq!(places[NodeId::new(5)].group, Some(1));
    }
}
