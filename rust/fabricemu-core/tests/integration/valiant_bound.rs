//! The uniform-random throughput bound of fabricemu's Valiant route on a dragonfly, computed from
//! the fabric the builder makes, against the figure the README quotes (docs/valiant-bound.md
//! derives it by hand).
//!
//! The route: a packet to another group goes minimally to a uniformly random intermediate group
//! (neither its source's nor its destination's: `Router::random_group` in routing/choose.rs),
//! arriving at the router that owns that global link, then minimally to its destination; a packet
//! within its group goes minimally. Uniform random traffic: every host sends at rate 1 (a fraction of its
//! injection bandwidth) to every other host alike. The bound is 1 / (largest expected load on a
//! router-to-router channel); host links carry at most 1.

use crate::common;

use std::collections::HashMap;

use fabricemu_core::ids::{IdVec, PortId};
use fabricemu_core::topology::{self, Fabric, NodeId, Tier};

/// The router of `host`.
fn router_of(f: &Fabric, host: NodeId) -> NodeId {
    f.peer_node[f.host_port(host)]
}

struct Dragonfly<'f> {
    f: &'f Fabric,
    group: HashMap<NodeId, u32>,
    /// (router, group) -> the router's port of its global link to that group.
    global_port: HashMap<(NodeId, u32), PortId>,
    /// (group, group) -> the router of the first group that owns the link to the second.
    owner: HashMap<(u32, u32), NodeId>,
}

impl<'f> Dragonfly<'f> {
    fn new(f: &'f Fabric) -> Self {
        // Groups: the connected components of the local (fabric-tier) links between routers.
        let mut group = HashMap::new();
        let mut next = 0;
        for r in f.switches() {
            if group.contains_key(&r) {
                continue;
            }
            let mut stack = vec![r];
            group.insert(r, next);
            while let Some(x) = stack.pop() {
                for p in f.ports_of(x) {
                    let y = f.peer_node[p];
                    if f.tier[p] == Tier::Fabric && !group.contains_key(&y) {
                        group.insert(y, next);
                        stack.push(y);
                    }
                }
            }
            next += 1;
        }
        let mut global_port = HashMap::new();
        let mut owner = HashMap::new();
        for r in f.switches() {
            for p in f.ports_of(r) {
                if f.tier[p] == Tier::Global {
                    let to = group[&f.peer_node[p]];
                    assert!(
                        owner.insert((group[&r], to), r).is_none(),
                        "one global link per pair of groups"
                    );
                    global_port.insert((r, to), p);
                }
            }
        }
        Self {
            f,
            group,
            global_port,
            owner,
        }
    }

    /// The port from router `a` to router `b` of the same group.
    fn local(&self, a: NodeId, b: NodeId) -> PortId {
        self.f
            .ports_of(a)
            .find(|&p| self.f.peer_node[p] == b)
            .expect("routers of a group are fully connected")
    }

    /// Add `w` to every channel of the minimal path from router `from` to group `to`; the router
    /// reached in group `to`.
    fn to_group(&self, from: NodeId, to: u32, w: f64, load: &mut IdVec<PortId, f64>) -> NodeId {
        let g = self.group[&from];
        if g == to {
            return from;
        }
        let owner = self.owner[&(g, to)];
        if owner != from {
            load[self.local(from, owner)] += w;
        }
        let p = self.global_port[&(owner, to)];
        load[p] += w;
        self.f.peer_node[p]
    }

    /// Minimal from router `from` to router `dst`.
    fn to_router(&self, from: NodeId, dst: NodeId, w: f64, load: &mut IdVec<PortId, f64>) {
        let at = self.to_group(from, self.group[&dst], w, load);
        if at != dst {
            load[self.local(at, dst)] += w;
        }
    }

    /// 1 / the largest channel load under uniform random traffic with Valiant routing.
    fn valiant_uniform_bound(&self) -> f64 {
        let f = self.f;
        let n = f.num_hosts;
        let groups = self.group.values().max().unwrap() + 1;
        let mut load = IdVec::from_elem(0.0, f.num_ports() as usize);
        let w = 1.0 / f64::from(n - 1);
        for s in f.hosts() {
            let rs = router_of(f, s);
            for d in f.hosts().filter(|&d| d != s) {
                let rd = router_of(f, d);
                let (gs, gd) = (self.group[&rs], self.group[&rd]);
                if gs == gd {
                    self.to_router(rs, rd, w, &mut load);
                    continue;
                }
                let wi = w / f64::from(groups - 2);
                for i in (0..groups).filter(|&i| i != gs && i != gd) {
                    let at = self.to_group(rs, i, wi, &mut load);
                    self.to_router(at, rd, wi, &mut load);
                }
            }
        }
        let worst = f
            .ports()
            .filter(|&p| f.tier[p] != Tier::Host)
            .map(|p| load[p])
            .fold(0.0, f64::max);
        1.0 / worst
    }
}

fn bound(p: u32, a: u32, h: u32, g: u32) -> f64 {
    let spec = common::spec(&format!(
        "[topology]\nkind = \"dragonfly\"\np = {p}\na = {a}\nh = {h}\ng = {g}\n\
         arrangement = \"absolute\"\n[[workload]]\nkind = \"permutation\"\nsize = \"1MB\"\n"
    ));
    let fabric = topology::build(&spec.topology, &spec.switch);
    Dragonfly::new(&fabric).valiant_uniform_bound()
}

fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap()
}

/// docs/valiant-bound.md: every packet to another group crosses two global channels, which share
/// the load evenly, so a global channel carries 2 n_g (N - n_g) / ((N - 1)(g - 1)) (n_g hosts per
/// group, N hosts); the local channels carry less.
fn by_hand(p: u32, a: u32, g: u32) -> f64 {
    let (ng, n) = (f64::from(p * a), f64::from(p * a * g));
    (n - 1.0) * f64::from(g - 1) / (2.0 * ng * (n - ng))
}

fn check(p: u32, a: u32, h: u32, g: u32) {
    let b = bound(p, a, h, g);
    assert!(
        (b - by_hand(p, a, g)).abs() < 1e-9,
        "computed {b}, by hand {}",
        by_hand(p, a, g)
    );
    let quoted = format!("(bound {b:.3})");
    assert!(
        readme().contains(&quoted),
        "README quotes {quoted} (computed {b})"
    );
}

#[test]
fn valiant_uniform_bound_of_the_72_node_dragonfly_is_the_quoted_one() {
    check(2, 4, 2, 9); // 71 / 128 = 0.5547
}

#[test]
fn valiant_uniform_bound_of_the_1056_node_dragonfly_is_the_quoted_one() {
    check(4, 8, 4, 33); // 1055 / 2048 = 0.5151
}
