//! Forwarding at switches: the engine's side of a routing decision. The router part
//! (`routing::Router::choose`) decides; the World lends it the fabric, the time and the queue
//! depths, and applies what belongs to other parts (the hop-class climb needs the switch's PFC).

use super::world::World;
use crate::ids::{IdVec, NodeId, PortId};
use crate::packet::{flags, PacketId};
use crate::routing::PortLoad;
use crate::switch::PortQueue;

/// The router reads the bytes waiting at each egress port straight from the queues.
impl PortLoad for IdVec<PortId, PortQueue> {
    #[inline]
    fn load(&self, p: PortId) -> u64 {
        self[p].bytes
    }
}

impl World {
    /// The egress port of switch `node` for `pkt`, or None if every candidate is known to be down.
    #[inline]
    pub(super) fn route(&mut self, node: NodeId, pkt: PacketId) -> Option<PortId> {
        let pk = self.packets.get_mut(pkt);
        if self.look_ahead {
            if let Some(port) = self.router.foreseen(pkt, node, pk.dst, pk.header_key) {
                return Some(port); // worked out ahead (prefetch.rs): a minimal route, no climb
            }
        }
        let choice = self
            .router
            .choose(node, pk, self.now, &self.fabric, &self.queues)?;
        // Hop classes: up one lossless class per global hop, and when PAR diverts a packet over
        // a local link (its extra hop inside the source group), so no cycle of pauses can close
        // within a class. Never past the classes validation made lossless.
        if choice.climb
            && pk.priority < 7
            && self
                .switches
                .pfc
                .as_ref()
                .is_some_and(|pfc| pfc.is_lossless(pk.priority) && pfc.is_lossless(pk.priority + 1))
        {
            pk.priority += 1;
            pk.flags |= flags::CLASS_UP;
        }
        Some(choice.port)
    }
}
