//! Two-tier leaf-spine Clos: every leaf links to every spine; hosts numbered leaf by leaf.
//! Oversubscription = hosts_per_leaf x host rate / (spines x fabric rate).

#[cfg(test)]
use super::Fabric;
use super::{FabricBuilder, Role, Tier};
use crate::config::LinkSpec;

#[cfg(test)]
pub fn build(
    leaves: u32,
    spines: u32,
    hosts_per_leaf: u32,
    host: LinkSpec,
    fabric: LinkSpec,
) -> Fabric {
    super::hosts_only(leaves * hosts_per_leaf, |b| {
        lay_out(b, leaves, spines, hosts_per_leaf, host, fabric)
    })
}

pub fn lay_out(
    b: &mut FabricBuilder,
    leaves: u32,
    spines: u32,
    hosts_per_leaf: u32,
    host: LinkSpec,
    fabric: LinkSpec,
) {
    let leaf0 = b.add_switches(leaves, Role::Leaf);
    let spine0 = b.add_switches(spines, Role::Spine);
    for l in 0..leaves {
        for _ in 0..hosts_per_leaf {
            b.slot(leaf0 + l, host);
        }
    }
    for l in 0..leaves {
        for s in 0..spines {
            b.link(leaf0 + l, spine0 + s, fabric, Tier::Fabric);
        }
    }
}
