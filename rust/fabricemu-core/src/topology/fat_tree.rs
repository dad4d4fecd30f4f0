//! k-ary fat tree (Al-Fares et al.): k pods of k/2 edge and k/2 aggregation switches, (k/2)^2 core
//! switches, k/2 hosts per edge switch, k^3/4 hosts numbered pod by pod, edge by edge.

#[cfg(test)]
use super::Fabric;
use super::{FabricBuilder, Role, Tier};
use crate::config::LinkSpec;

#[cfg(test)]
pub fn build(k: u32, host: LinkSpec, fabric: LinkSpec, core: LinkSpec) -> Fabric {
    super::hosts_only(k * k * k / 4, |b| lay_out(b, k, host, fabric, Some(core)))
}

/// `core`: None leaves the cores out (an OCS replaces them).
pub fn lay_out(
    b: &mut FabricBuilder,
    k: u32,
    host: LinkSpec,
    fabric: LinkSpec,
    core: Option<LinkSpec>,
) {
    let half = k / 2;
    let edge0 = b.add_switches(k * half, Role::Edge);
    let agg0 = b.add_switches(k * half, Role::Agg);
    let core0 = match core {
        Some(_) => b.add_switches(half * half, Role::Core),
        None => 0,
    };
    for pod in 0..k {
        for e in 0..half {
            let edge = edge0 + pod * half + e;
            for _ in 0..half {
                b.slot(edge, host);
            }
        }
    }
    for pod in 0..k {
        for e in 0..half {
            for a in 0..half {
                b.link(
                    edge0 + pod * half + e,
                    agg0 + pod * half + a,
                    fabric,
                    Tier::Fabric,
                );
            }
        }
    }
    let Some(core) = core else {
        return;
    };
    // Aggregation switch a of every pod connects to cores a*k/2 .. (a+1)*k/2.
    for pod in 0..k {
        for a in 0..half {
            for c in 0..half {
                b.link(
                    agg0 + pod * half + a,
                    core0 + a * half + c,
                    core,
                    Tier::Core,
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        let l = LinkSpec {
            rate_bps: 100_000_000_000,
            delay_ps: 1,
        };
        for k in [2u32, 4, 8] {
            let f = build(k, l, l, l);
            assert_eq!(f.num_hosts, k * k * k / 4);
            assert_eq!(f.num_nodes - f.num_hosts, k * k + k * k / 4);
            // Every switch has k ports; every host one.
            for n in f.nodes() {
                let d = f.ports_of(n).len() as u32;
                assert_eq!(d, if f.is_host(n) { 1 } else { k }, "node {n}");
            }
            for p in f.ports() {
                assert_eq!(f.peer_port[f.peer_port[p]], p);
            }
        }
    }
}
