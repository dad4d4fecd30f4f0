//! Two-tier leaf-spine Clos: every leaf links to every spine; hosts numbered leaf by leaf.
//! Oversubscription = hosts_per_leaf x host rate / (spines x fabric rate).

use super::{Fabric, FabricBuilder, Role, Tier};
use crate::config::LinkSpec;

pub fn build(
    leaves: u32,
    spines: u32,
    hosts_per_leaf: u32,
    host: LinkSpec,
    fabric: LinkSpec,
) -> Fabric {
    let mut b = FabricBuilder::new(leaves * hosts_per_leaf);
    let leaf0 = b.add_switches(leaves, Role::Leaf);
    let spine0 = b.add_switches(spines, Role::Spine);
    for l in 0..leaves {
        for h in 0..hosts_per_leaf {
            b.link(l * hosts_per_leaf + h, leaf0 + l, host, Tier::Host);
        }
    }
    for l in 0..leaves {
        for s in 0..spines {
            b.link(leaf0 + l, spine0 + s, fabric, Tier::Fabric);
        }
    }
    b.build()
}
