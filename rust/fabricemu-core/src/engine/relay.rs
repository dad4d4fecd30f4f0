//! GPU clusters, PXN: the relay GPU's transit buffer and its back-pressure.
//!
//! A PXN transfer crosses the scale-up domain to the GPU on the destination's rail, which sends it
//! on its NIC (ahead of its own data, as a NIC's control packets). What waits at the relay's NIC
//! port is held in the relay GPU's memory: NCCL's proxy stages PXN data in a bounded buffer
//! (`NCCL_BUFFSIZE`, 4 MiB by default) and the sender writes into it only when a slot is free
//! (credits), and NVLink itself is credit-based, so the scale-up domain never loses a packet for a
//! full relay. Modelled as PFC on the GPU's scale-up link: when the relay's transit bytes pass
//! `xoff` (the buffer `cluster.pxn_buffer` less what can still arrive after the pause is sent) it
//! pauses the packet's class on the scale-up switch's port toward it (a real frame over its
//! scale-up link, counted and traced like a switch's pause, with the GPU as the pausing node);
//! when they fall to `xon` it resumes. The scale-up switch then holds the packets in its own
//! buffer (`cluster.scaleup.buffer`), and with `[switch] pfc` pauses its own senders in turn.
//! Packets sent on at once (the NIC port idle) never occupy the buffer.

use super::world::World;
use crate::ids::{IdVec, NodeId, PortId};
use crate::packet::{flags, Packet, PacketId};
use crate::topology::Fabric;

/// The relays' transit buffers (one per GPU; only GPUs of a PXN cluster relay).
#[derive(Debug, Clone)]
pub struct Relays {
    /// Transit bytes (wire bytes) queued at each GPU's NIC port(s).
    bytes: IdVec<NodeId, u64>,
    /// The most each GPU held.
    peak: IdVec<NodeId, u64>,
    /// The classes each GPU has paused on its scale-up link.
    paused: IdVec<NodeId, u8>,
    /// Pause above this many transit bytes; resume at or below `xon`.
    xoff: u64,
    xon: u64,
}

impl Relays {
    /// The relays of a PXN cluster, its buffer `buffer` bytes; `packet` the largest packet.
    pub fn new(fabric: &Fabric, buffer: u64, packet: u64) -> Option<Relays> {
        let c = fabric.cluster.as_deref()?;
        let up = c.spec.scaleup?;
        let gpus = c.gpus as usize;
        let headroom = crate::topology::cluster::config::relay_headroom(&up, packet);
        let xoff = buffer.saturating_sub(headroom).max(packet);
        Some(Relays {
            bytes: IdVec::from_elem(0, gpus),
            peak: IdVec::from_elem(0, gpus),
            paused: IdVec::from_elem(0, gpus),
            xoff,
            xon: xoff.saturating_sub(2 * packet),
        })
    }

    /// The most transit bytes GPU `gpu` held.
    /// Each GPU's buffer as `from(gpu)` (the copy of the partition that runs it) has it.
    pub(super) fn take_each_gpu<'a>(&mut self, from: impl Fn(NodeId) -> &'a Relays) {
        for gpu in self.bytes.ids() {
            let r = from(gpu);
            self.bytes[gpu] = r.bytes[gpu];
            self.peak[gpu] = r.peak[gpu];
            self.paused[gpu] = r.paused[gpu];
        }
    }

    pub fn peak(&self, gpu: NodeId) -> u64 {
        self.peak.get(gpu).copied().unwrap_or(0)
    }

    /// The pause threshold (transit bytes).
    pub fn xoff(&self) -> u64 {
        self.xoff
    }
}

impl World {
    /// Relay GPU `node` queued `pkt` at its NIC port; `arrived` is the scale-up switch's port the
    /// packet came over. Counts it, and pauses that port's class past `xoff`.
    pub(super) fn relay_hold(&mut self, node: NodeId, arrived: PortId, pkt: PacketId) {
        let Some(r) = self.relays.as_mut() else {
            return;
        };
        let packet = self.packets.get_mut(pkt);
        packet.flags |= flags::RELAYED;
        let &mut Packet {
            wire_bytes,
            priority,
            ..
        } = packet;
        let held = r.bytes[node] + wire_bytes as u64;
        r.bytes[node] = held;
        r.peak[node] = r.peak[node].max(held);
        let bit = 1u8 << priority;
        if held > r.xoff && r.paused[node] & bit == 0 {
            r.paused[node] |= bit;
            self.send_pfc_frame(arrived, priority, true);
        }
    }

    /// A relayed packet leaves relay GPU `node` (sent on its NIC, or lost with a failed link):
    /// release its bytes, and resume the scale-up switch at `xon`.
    pub(super) fn relay_release(&mut self, node: NodeId, pkt: PacketId) {
        let packet = self.packets.get_mut(pkt);
        if packet.flags & flags::RELAYED == 0 {
            return;
        }
        packet.flags &= !flags::RELAYED;
        let w = packet.wire_bytes as u64;
        let Some(r) = self.relays.as_mut() else {
            return;
        };
        r.bytes[node] -= w;
        let paused = r.paused[node];
        if paused == 0 || r.bytes[node] > r.xon {
            return;
        }
        r.paused[node] = 0;
        let Some(arrived) = self
            .fabric
            .cluster
            .as_deref()
            .and_then(|c| c.scaleup_port(node))
            .map(|p| self.fabric.peer_port[p])
        else {
            return;
        };
        for class in 0..8u8 {
            if paused & (1 << class) != 0 {
                self.send_pfc_frame(arrived, class, false);
            }
        }
    }

    /// GPU clusters, PXN: the relay buffers (None without PXN relays).
    pub fn relays(&self) -> Option<&Relays> {
        self.relays.as_ref()
    }
}
