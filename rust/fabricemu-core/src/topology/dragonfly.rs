//! Dragonfly (Kim, Dally, Scott, Abts, ISCA 2008) and Dragonfly+ (Shpiner et al., HiPINEB 2017).
//!
//! Dragonfly: g groups of a routers; routers of a group are fully connected by local links; each
//! router has p hosts and h global links. Dragonfly+: each group is a two-level leaf-spine (hosts on
//! leaves, every leaf to every spine); the spines carry h global links each. Host ids go group by
//! group, router (leaf) by router.
//!
//! Global links: a group has G = a*h (or spines*h) global ports, numbered router by router; port j
//! of group x connects to group t(x, j), with g <= G + 1 so each pair of groups has a link when
//! g = G + 1 (ports past g - 1 stay unused when g is smaller):
//! - absolute (consecutive): t = j if j < x, else j + 1;
//! - relative (circulant): t = x + j + 1 (mod g).

#[cfg(test)]
use super::Fabric;
use super::{FabricBuilder, Role, Tier};
use crate::config::{Arrangement, LinkSpec};

/// Target group of group `x`'s global port `j`, and the port index of the link at that group.
fn global_peer(x: u32, j: u32, g: u32, arrangement: Arrangement) -> (u32, u32) {
    match arrangement {
        Arrangement::Absolute => {
            let t = if j < x { j } else { j + 1 };
            let back = if x < t { x } else { x - 1 };
            (t, back)
        }
        Arrangement::Relative => {
            let t = (x + j + 1) % g;
            let back = (x + g - t - 1) % g;
            (t, back)
        }
    }
}

/// Connect the groups: `port_owner(group, j)` is the router holding group port j (h per router).
fn connect_groups(
    b: &mut FabricBuilder,
    g: u32,
    ports_per_group: u32,
    arrangement: Arrangement,
    global: LinkSpec,
    owner: impl Fn(u32, u32) -> u32,
) {
    let used = ports_per_group.min(g - 1);
    for x in 0..g {
        for j in 0..used {
            let (t, back) = global_peer(x, j, g, arrangement);
            if x < t {
                b.link(owner(x, j), owner(t, back), global, Tier::Global);
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::too_many_arguments)]
pub fn build(
    p: u32,
    a: u32,
    h: u32,
    g: u32,
    arrangement: Arrangement,
    host: LinkSpec,
    local: LinkSpec,
    global: LinkSpec,
) -> Fabric {
    super::hosts_only(p * a * g, |b| {
        lay_out(b, p, a, h, g, arrangement, host, local, global)
    })
}

#[allow(clippy::too_many_arguments)]
pub fn lay_out(
    b: &mut FabricBuilder,
    p: u32,
    a: u32,
    h: u32,
    g: u32,
    arrangement: Arrangement,
    host: LinkSpec,
    local: LinkSpec,
    global: LinkSpec,
) {
    let r0 = b.add_switches(a * g, Role::Router);
    for r in 0..a * g {
        for _ in 0..p {
            b.slot(r0 + r, host);
        }
    }
    for x in 0..g {
        for i in 0..a {
            for k in i + 1..a {
                b.link(r0 + x * a + i, r0 + x * a + k, local, Tier::Fabric);
            }
        }
    }
    connect_groups(b, g, a * h, arrangement, global, |x, j| r0 + x * a + j / h);
}

#[cfg(test)]
#[allow(clippy::too_many_arguments)]
pub fn build_plus(
    leaves: u32,
    spines: u32,
    hosts_per_leaf: u32,
    h: u32,
    g: u32,
    arrangement: Arrangement,
    host: LinkSpec,
    local: LinkSpec,
    global: LinkSpec,
) -> Fabric {
    super::hosts_only(leaves * hosts_per_leaf * g, |b| {
        lay_out_plus(
            b,
            leaves,
            spines,
            hosts_per_leaf,
            h,
            g,
            arrangement,
            host,
            local,
            global,
        )
    })
}

#[allow(clippy::too_many_arguments)]
pub fn lay_out_plus(
    b: &mut FabricBuilder,
    leaves: u32,
    spines: u32,
    hosts_per_leaf: u32,
    h: u32,
    g: u32,
    arrangement: Arrangement,
    host: LinkSpec,
    local: LinkSpec,
    global: LinkSpec,
) {
    let leaf0 = b.add_switches(leaves * g, Role::Leaf);
    let spine0 = b.add_switches(spines * g, Role::Spine);
    for l in 0..leaves * g {
        for _ in 0..hosts_per_leaf {
            b.slot(leaf0 + l, host);
        }
    }
    for x in 0..g {
        for l in 0..leaves {
            for s in 0..spines {
                b.link(
                    leaf0 + x * leaves + l,
                    spine0 + x * spines + s,
                    local,
                    Tier::Fabric,
                );
            }
        }
    }
    connect_groups(b, g, spines * h, arrangement, global, |x, j| {
        spine0 + x * spines + j / h
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: LinkSpec = LinkSpec {
        rate_bps: 100_000_000_000,
        delay_ps: 1,
    };

    #[test]
    fn balanced_dragonflies_have_their_published_sizes() {
        // Kim et al.: a = 2p = 2h; h = 2 -> 72 hosts, h = 4 -> 1056 hosts (radix 7 and 15).
        for (p, a, h, g, hosts) in [(2, 4, 2, 9, 72), (4, 8, 4, 33, 1056)] {
            for arr in [Arrangement::Absolute, Arrangement::Relative] {
                let f = build(p, a, h, g, arr, L, L, L);
                assert_eq!(f.num_hosts, hosts);
                for r in f.switches() {
                    assert_eq!(f.ports_of(r).len() as u32, p + a - 1 + h, "router radix");
                }
                // Exactly one global link between every pair of groups.
                let mut pairs = std::collections::BTreeSet::new();
                for port in f.ports() {
                    if f.tier[port] == Tier::Global {
                        let gx = f.switch_index(f.port_node[port]) as u32 / a;
                        let gy = f.switch_index(f.peer_node[port]) as u32 / a;
                        assert_ne!(gx, gy);
                        assert!(pairs.insert((gx, gy)), "{arr:?}: two links {gx}->{gy}");
                    }
                }
                assert_eq!(pairs.len() as u32, g * (g - 1));
            }
        }
    }

    #[test]
    fn dragonfly_plus_groups_are_leaf_spines() {
        let f = build_plus(4, 4, 4, 4, 17, Arrangement::Absolute, L, L, L);
        assert_eq!(f.num_hosts, 4 * 4 * 17);
        let spine = crate::ids::NodeId::new(f.num_hosts + 4 * 17);
        // A spine: 4 leaves + 4 global links.
        assert_eq!(f.ports_of(spine).len(), 8);
        let leaf = crate::ids::NodeId::new(f.num_hosts);
        assert_eq!(f.ports_of(leaf).len(), 8);
    }
}
