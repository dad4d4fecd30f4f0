//! General three-tier Clos (`kind = "clos"`): `pods` pods of `tors_per_pod` ToR (edge) switches
//! and `aggs_per_pod` aggregation switches, every ToR of a pod linked to every aggregation switch of
//! its pod; `cores` core switches in `aggs_per_pod` planes of `cores / aggs_per_pod`: aggregation
//! switch a of every pod links to the cores of plane a (cores `a * c .. (a + 1) * c`). Hosts
//! (`hosts_per_tor` per ToR) are numbered pod by pod, ToR by ToR; switches are numbered ToRs, then
//! aggregation switches, then cores (named `edge:i`, `agg:i`, `core:i` as in a fat tree, which is
//! the Clos with `pods = k`, `tors_per_pod = aggs_per_pod = hosts_per_tor = k/2`, `cores = k²/4`).
//!
//! Oversubscription at a ToR is `hosts_per_tor x host rate / (aggs_per_pod x fabric rate)`, at an
//! aggregation switch `tors_per_pod x fabric rate / (cores/aggs_per_pod x core rate)`.

#[cfg(test)]
use super::Fabric;
use super::{FabricBuilder, Role, Tier};
use crate::config::{ClosShape, LinkSpec};

#[cfg(test)]
pub fn build(s: ClosShape, host: LinkSpec, fabric: LinkSpec, core: LinkSpec) -> Fabric {
    super::hosts_only(s.hosts(), |b| lay_out(b, s, host, fabric, core))
}

pub fn lay_out(
    b: &mut FabricBuilder,
    s: ClosShape,
    host: LinkSpec,
    fabric: LinkSpec,
    core: LinkSpec,
) {
    let tors = s.pods * s.tors_per_pod;
    let aggs = s.pods * s.aggs_per_pod;
    let tor0 = b.add_switches(tors, Role::Edge);
    let agg0 = b.add_switches(aggs, Role::Agg);
    let core0 = b.add_switches(s.cores, Role::Core);
    for t in 0..tors {
        for _ in 0..s.hosts_per_tor {
            b.slot(tor0 + t, host);
        }
    }
    for pod in 0..s.pods {
        for t in 0..s.tors_per_pod {
            for a in 0..s.aggs_per_pod {
                b.link(
                    tor0 + pod * s.tors_per_pod + t,
                    agg0 + pod * s.aggs_per_pod + a,
                    fabric,
                    Tier::Fabric,
                );
            }
        }
    }
    let per_plane = s.cores / s.aggs_per_pod;
    for pod in 0..s.pods {
        for a in 0..s.aggs_per_pod {
            for c in 0..per_plane {
                b.link(
                    agg0 + pod * s.aggs_per_pod + a,
                    core0 + a * per_plane + c,
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
    use crate::topology::summary;

    fn link(gbps: u64) -> LinkSpec {
        LinkSpec {
            rate_bps: gbps * 1_000_000_000,
            delay_ps: 1_000_000,
        }
    }

    /// The Clos shaped as a k-ary fat tree is the fat tree, port for port.
    #[test]
    fn fat_tree_is_a_clos() {
        let k = 4;
        let s = ClosShape {
            pods: k,
            tors_per_pod: k / 2,
            hosts_per_tor: k / 2,
            aggs_per_pod: k / 2,
            cores: k * k / 4,
        };
        let c = build(s, link(100), link(100), link(100));
        let f = super::super::fat_tree::build(k, link(100), link(100), link(100));
        assert_eq!(c.port_start, f.port_start);
        assert_eq!(c.peer_node, f.peer_node);
        assert_eq!(c.peer_port, f.peer_port);
        assert_eq!(c.role, f.role);
        assert_eq!(c.tier, f.tier);
    }

    /// The HPCC paper's fabric (shared/reference/hpcc_simulation_setup.csv).
    #[test]
    fn hpcc_counts_and_bisection() {
        let s = ClosShape {
            pods: 5,
            tors_per_pod: 4,
            hosts_per_tor: 16,
            aggs_per_pod: 4,
            cores: 16,
        };
        let f = build(s, link(100), link(400), link(400));
        let sum = summary::summarize(&f);
        assert_eq!(sum.hosts, 320);
        assert_eq!(sum.switches, 56);
        let count = |r: &str| sum.roles.iter().find(|x| x.role == r).unwrap().switches;
        assert_eq!((count("edge"), count("agg"), count("core")), (20, 20, 16));
        // Each agg: 4 ToR links down, 4 core links up; each core: one agg per pod.
        for n in f.switches() {
            let d = f.ports_of(n).len();
            match f.role[n] {
                Role::Edge => assert_eq!(d, 16 + 4),
                Role::Agg => assert_eq!(d, 8),
                _ => assert_eq!(d, 5),
            }
        }
        // Non-blocking: 16 x 100G down, 4 x 400G up; half the hosts (160 x 100G) cross.
        assert_eq!(sum.bisection_bps, 160 * 100_000_000_000);
        assert_eq!(sum.oversubscription, Some(1.0));
        assert_eq!(sum.links, 320 + 20 * 4 + 20 * 4);
        // Host to host across pods: host, ToR, agg, core, agg, ToR, host.
        assert_eq!(sum.diameter_links, Some(6));
    }

    #[test]
    fn oversubscribed_tors() {
        let s = ClosShape {
            pods: 2,
            tors_per_pod: 2,
            hosts_per_tor: 8,
            aggs_per_pod: 2,
            cores: 2,
        };
        let f = build(s, link(100), link(100), link(100));
        let sum = summary::summarize(&f);
        let edge = sum.roles.iter().find(|x| x.role == "edge").unwrap();
        assert_eq!(edge.oversubscription, Some(4.0));
        let agg = sum.roles.iter().find(|x| x.role == "agg").unwrap();
        assert_eq!(agg.oversubscription, Some(2.0));
    }
}
