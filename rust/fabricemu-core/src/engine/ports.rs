//! Ports, links and switches: egress scheduling, serialisation, arrival at the far end, and a
//! switch's admission (shared buffer, PFC headroom), ECN marking and PAUSE/RESUME frames.

use super::queue::Event;
use super::world::{PortHot, World, DEADLOCK_CHECK_PS};
use crate::cc::IntRecord;
use crate::ids::{NodeId, PortId};
use crate::packet::{flags, Packet, PacketId, PacketKind};
use crate::scenario::Scheduler;
use crate::switch::buffer::Admission;
use crate::switch::pfc::{PfcAction, PFC_FRAME_BYTES};
use crate::switch::trim::TrimmingSpec;
use crate::switch::MAC_CONTROL_CLASS;
use crate::trace::packets::{PacketEvent, PacketRow};
use crate::transport::NEVER;
use crate::units::Time;

impl World {
    /// packets.arrow: event `ev` of `pkt` at egress port `p`, if packets are traced (one
    /// predictable branch when they are not).
    #[inline(always)]
    pub(super) fn trace_packet(&mut self, ev: PacketEvent, p: PortId, pkt: PacketId) {
        if self.tracer.packets_on {
            self.record_packet(ev, p, pkt);
        }
    }

    /// Packet trimming: `pkt`, queued or about to be at port `p`, lost its payload (its
    /// `wire_bytes` are the trimmed size). The hook the trimming switch calls.
    #[inline(always)]
    pub(super) fn trace_trim(&mut self, p: PortId, pkt: PacketId) {
        self.trace_packet(PacketEvent::Trim, p, pkt);
    }

    #[inline(never)]
    fn record_packet(&mut self, event: PacketEvent, p: PortId, pkt: PacketId) {
        let packet = *self.packets.get(pkt);
        let node = self.ports[p].node;
        let flow = packet.flow_id();
        let (src, dst) = match flow {
            Some(f) => {
                let f = &self.flows[f];
                if packet.kind == PacketKind::Data {
                    (f.src, f.dst)
                } else {
                    (f.dst, f.src)
                }
            }
            None => (node, packet.dst),
        };
        let row = PacketRow {
            time_ps: self.now,
            event,
            node,
            port: p,
            port_index: self.fabric.ports_of(node).offset_of(p) as u32,
            packet,
            src,
            dst,
            queue_bytes: self.queues[p].bytes,
        };
        self.tracer.packet_event(|| row, flow.map(|f| f.get()));
    }

    /// packets.arrow: `pkt` was just queued at `p`; if its class is paused there and it is the
    /// class's head, it is blocked by PFC.
    #[inline(always)]
    fn trace_queued(&mut self, p: PortId, pkt: PacketId, class: u8) {
        if self.tracer.packets_on {
            self.record_packet(PacketEvent::Enqueue, p, pkt);
            if self.ports[p].paused & (1 << class) != 0
                && self.queues[p].class_packets(class as usize) == 1
            {
                self.record_packet(PacketEvent::PauseBlocked, p, pkt);
            }
        }
    }

    /// Nothing being sent, no wake-up pending, nothing sendable queued.
    #[inline]
    pub(super) fn port_idle(&self, p: PortId) -> bool {
        let port = &self.ports[p];
        port.wake_at == NEVER
            && port.busy_until <= self.now
            && !self.queues[p].has_sendable(port.paused)
    }

    /// Wake port `p` at `t` (moving an existing wake-up earlier, never later). For wake-ups at
    /// arbitrary times (the end of a transmission under way when a packet arrives, a flow's
    /// pacing): straight into the event queue's general heap, since their delays do not recur.
    #[inline]
    pub(super) fn wake_port(&mut self, p: PortId, t: Time) {
        let port = &mut self.ports[p];
        if t < port.wake_at {
            port.wake_at = t;
            if t >= self.now && t - self.now < Time::MAX / 2 {
                self.events.push(t, Event::PortFree(p));
            }
        }
    }

    /// Wake port `p` when the packet it just started sending is out (`t`, a serialisation time
    /// from now: a recurring delay, which has a lane in the event queue).
    #[inline]
    fn wake_port_after_send(&mut self, p: PortId, t: Time) {
        let port = &mut self.ports[p];
        if t < port.wake_at {
            port.wake_at = t;
            if t >= self.now && t - self.now < Time::MAX / 2 {
                self.events.push_after(t - self.now, Event::PortFree(p));
            }
        }
    }

    /// The port is free: send the next packet, if any, and wake up again when it is out.
    pub(super) fn start_next(&mut self, p: PortId) {
        let PortHot {
            node,
            from_host,
            paused,
            busy_until,
            down,
            ..
        } = self.ports[p];
        if down {
            return; // a failed link sends nothing; its restore restarts the port
        }
        if busy_until > self.now {
            // Still serialising (a wake-up moved earlier by a new arrival): come back then.
            self.wake_port(p, busy_until);
            return;
        }
        let popped = match self.switches.scheduler {
            Scheduler::Strict => self.queues[p].pop_strict(&self.packets, paused),
            Scheduler::Dwrr(weights) => self.queues[p].pop_dwrr(
                &self.packets,
                paused,
                &mut self.switches.dwrr[p],
                &weights,
                self.transport.mtu + self.transport.header,
            ),
        };
        let pkt = match popped {
            Some(pkt) => {
                if !from_host {
                    self.leave_switch(node, p, pkt);
                } else if self.relays.is_some() {
                    self.relay_release(node, pkt);
                }
                pkt
            }
            None if from_host => match self.nic_next_data(node, p) {
                Ok(pkt) => pkt,
                Err(wake) => {
                    if wake != NEVER {
                        self.wake_port(p, wake);
                    }
                    return;
                }
            },
            None => return,
        };
        self.transmit(p, pkt);
        if self.port_has_work(p) {
            let t = self.ports[p].busy_until;
            self.wake_port_after_send(p, t);
        }
    }

    /// More to send after the current packet?
    #[inline]
    fn port_has_work(&self, p: PortId) -> bool {
        let port = &self.ports[p];
        if self.queues[p].has_sendable(port.paused) {
            return true;
        }
        port.from_host && !self.nics.ring[p].is_empty()
    }

    /// A packet leaves a switch's buffer (it starts its transmission): release its bytes, let PFC
    /// resume the upstream if its ingress queue drained, and mark ECN at dequeue.
    #[inline]
    fn leave_switch(&mut self, node: NodeId, p: PortId, pkt: PacketId) {
        let &Packet {
            wire_bytes,
            priority,
            flags: f,
            kind,
            ..
        } = self.packets.get(pkt);
        if priority == MAC_CONTROL_CLASS {
            return; // PFC frames are not in the packet buffer
        }
        self.release_from_switch(node, pkt);
        if let Some(ecn) = &self.switches.ecn {
            if ecn.on_dequeue
                && kind == PacketKind::Data
                && ecn.priorities & (1 << priority) != 0
                && f & flags::ECT != 0
            {
                // The queue the packet leaves, itself included.
                let depth =
                    self.queues[p].class_bytes(priority as usize) as u64 + wire_bytes as u64;
                self.maybe_mark(p, pkt, depth);
            }
        }
    }

    /// A packet's bytes leave switch `node`'s buffer (sent or lost): from the shared pool or the
    /// headroom, and from its PFC ingress counter (which may resume the upstream). The HEADROOM
    /// mark says where the bytes are at *this* switch: it goes with them, so that the next switch
    /// (which may admit the packet to its shared pool, or send it straight through) does not
    /// release it from a headroom that never counted it.
    #[inline]
    pub(super) fn release_from_switch(&mut self, node: NodeId, pkt: PacketId) {
        let packet = self.packets.get_mut(pkt);
        let ingress = packet.ingress_port();
        let &mut Packet {
            wire_bytes,
            priority,
            flags: f,
            ..
        } = packet;
        if priority == MAC_CONTROL_CLASS {
            return;
        }
        packet.flags &= !flags::HEADROOM;
        let w = wire_bytes as u64;
        let in_headroom = f & flags::HEADROOM != 0;
        if !in_headroom {
            self.switches.buffer.used[node] -= w;
        }
        if let Some(pfc) = &mut self.switches.pfc {
            let in_class = priority - (f & flags::CLASS_UP != 0) as u8;
            if let Some(ingress) = ingress.filter(|_| pfc.is_lossless(in_class)) {
                let free = self.switches.buffer.free(node);
                if pfc.on_dequeue(ingress, in_class, w, in_headroom, free) == PfcAction::Resume {
                    self.send_pfc_frame(ingress, in_class, false);
                }
            }
        }
    }

    #[inline]
    fn maybe_mark(&mut self, p: PortId, pkt: PacketId, depth: u64) {
        if self.packets.get(pkt).flags & flags::CE != 0 {
            return; // already marked upstream
        }
        if self.switches.ecn_marks(self.ports[p].node, depth) {
            self.packets.get_mut(pkt).flags |= flags::CE;
            self.stats.ecn_marks += 1;
            self.live.ecn_marks[p] += 1;
            self.trace_packet(PacketEvent::EcnMark, p, pkt);
        }
    }

    /// Serialise `pkt` on `p` from now; it reaches the far end after serialisation and delay.
    #[inline(always)]
    pub(super) fn transmit(&mut self, p: PortId, pkt: PacketId) {
        self.trace_packet(PacketEvent::Dequeue, p, pkt);
        let pu = p;
        let packet = self.packets.get_mut(pkt);
        if let Some(int) = &mut self.int {
            let port = &self.ports[pu];
            if !port.from_host && packet.kind == PacketKind::Data {
                // INT (HPCC): the switch appends its egress record, and the bytes it takes.
                let hop = int.bytes_per_hop;
                let stack = int.slot_mut(pkt.index());
                let added = stack.push(IntRecord {
                    node: port.node,
                    port: p,
                    time_ps: self.now,
                    queue_bytes: self.queues[pu].bytes,
                    tx_bytes: port.tx_bytes + packet.wire_bytes as u64 + hop as u64,
                    rate_bps: self.port_rate[pu],
                });
                if added {
                    packet.wire_bytes += hop;
                }
            }
        }
        let w = packet.wire_bytes as u64;
        let port = &mut self.ports[pu];
        // Exact: a whole number of ps per byte when the rate divides 8e12 bit-ps (all usual rates).
        let ser = if port.ps_per_byte != 0 {
            w * port.ps_per_byte
        } else {
            crate::units::serialisation_ps(w, self.port_rate[pu])
        };
        port.busy_until = self.now.saturating_add(ser);
        port.tx_bytes += w;
        let arrive = self
            .now
            .saturating_add(ser)
            .saturating_add(port.arrival_delay);
        packet.arrive = arrive;
        if port.remote {
            self.send_remote(p, pkt); // to another partition (the parallel engine)
            return;
        }
        // One arrival event per packet on the wire. Its delay (serialisation + propagation) takes
        // only a few distinct values, so it lands in an O(1) FIFO lane of the event queue;
        // scheduling only the link's head instead would need the gap to the next packet, an
        // arbitrary delay that costs a heap operation (measured: 15% of the run).
        self.events
            .push_after(arrive - self.now, Event::LinkArrival(p));
        port.pipe.push_back(&mut self.packets, pkt);
    }

    pub(super) fn link_arrival(&mut self, p: PortId) {
        let port = &mut self.ports[p];
        // An arrival event is stale if its packet was lost to a link fault.
        match port.pipe.front() {
            Some(head) if self.packets.get(head).arrive == self.now => {}
            _ => return,
        }
        let pkt = port.pipe.pop_front(&self.packets).expect("checked");
        self.stats.packet_hops += 1;
        // A flag on the port, not a draw per packet: only links a loss fault covers now draw.
        if self.ports[p].lossy && self.corrupted(p, pkt) {
            return;
        }
        let PortHot {
            peer_node: node,
            to_host,
            to_scaleup,
            to_relay,
            ..
        } = self.ports[p];
        let &Packet {
            kind,
            dst,
            flags: pf,
            ..
        } = self.packets.get(pkt);
        if kind.is_pfc() {
            self.receive_pfc_frame(p, pkt);
        } else if to_host {
            if to_relay && dst != node {
                self.pxn_transit(node, p, pkt);
            } else {
                self.host_receive(pkt);
            }
        } else {
            self.packets.get_mut(pkt).ingress = p;
            if pf & (flags::INR | flags::INR_DOWN) != 0 {
                // In-network reduction: the switch's engine takes it (one test per packet).
                self.inr_arrival(node, p, pkt);
                return;
            }
            let out = if to_scaleup {
                self.scaleup_route(node, pkt)
            } else {
                self.route(node, pkt)
            };
            match out {
                Some(out) => self.switch_enqueue(node, out, pkt),
                None => self.unreachable_drop(pkt), // every path is known to be down
            }
        }
    }

    /// GPU clusters: the egress port of scale-up switch `node` for `pkt` (see
    /// [`World::scaleup_out`]).
    fn scaleup_route(&self, node: NodeId, pkt: PacketId) -> Option<PortId> {
        let packet = self.packets.get(pkt);
        let flow = packet.flow_id()?;
        self.scaleup_out(node, packet.dst, flow, packet.kind == PacketKind::Data)
    }

    /// GPU clusters, PXN: a packet for another GPU reached relay GPU `node` over the scale-up
    /// domain (link `arrived`); it leaves on the relay's NIC port, queued like the NIC's control
    /// packets (ahead of its own data), in the relay's bounded transit buffer (see
    /// [`super::relay`]).
    fn pxn_transit(&mut self, node: NodeId, arrived: PortId, pkt: PacketId) {
        let packet = self.packets.get(pkt);
        let data = packet.kind == PacketKind::Data;
        let priority = packet.priority;
        let Some(out) = packet.flow_id().and_then(|flow| self.relay_out(flow, data)) else {
            self.unreachable_drop(pkt);
            return;
        };
        let straight = self.port_idle(out) && self.ports[out].paused & (1 << priority) == 0;
        self.host_enqueue(out, pkt);
        if !straight {
            self.relay_hold(node, arrived, pkt);
        }
    }

    /// Queue a packet generated at host port `p` (ACK, NACK, CNP): NICs do not drop.
    pub(super) fn host_enqueue(&mut self, p: PortId, pkt: PacketId) {
        let &Packet {
            wire_bytes,
            priority,
            ..
        } = self.packets.get(pkt);
        if self.port_idle(p) && self.ports[p].paused & (1 << priority) == 0 {
            self.trace_packet(PacketEvent::Enqueue, p, pkt);
            self.transmit(p, pkt);
            return;
        }
        self.queues[p].push(&mut self.packets, pkt, priority, wire_bytes);
        self.trace_queued(p, pkt, priority);
        self.kick(p);
    }

    /// After queueing at `p`, a resume or a restored link: make sure the port will send.
    #[inline]
    pub(super) fn kick(&mut self, p: PortId) {
        let port = &self.ports[p];
        if port.wake_at == NEVER && self.port_has_work(p) {
            let t = port.busy_until.max(self.now);
            if t == self.now {
                self.start_next(p);
            } else {
                self.wake_port(p, t);
            }
        }
    }

    /// A packet arrived at switch `node` for egress port `p`: admission, PFC, ECN, then queue it or
    /// send it at once.
    pub(super) fn switch_enqueue(&mut self, node: NodeId, p: PortId, pkt: PacketId) {
        let &Packet {
            wire_bytes,
            priority,
            ingress,
            kind,
            flags: f,
            ..
        } = self.packets.get(pkt);
        let w = wire_bytes as u64;
        if self.ports[p].down {
            self.trace_packet(PacketEvent::Drop, p, pkt);
            self.fault_drop(pkt); // routed into a failed link before routing noticed
            return;
        }
        let paused = self.ports[p].paused;
        // Straight through: nothing queued ahead, port free, class not paused. The packet never
        // occupies the buffer (and a dequeue-time mark would see an empty queue).
        if paused & (1 << priority) == 0 && self.port_idle(p) {
            self.trace_packet(PacketEvent::Enqueue, p, pkt);
            self.transmit(p, pkt);
            return;
        }
        debug_assert!(
            f & flags::HEADROOM == 0,
            "a packet arrives at a switch still marked in a headroom"
        );
        // PFC counts the packet in the class it arrived in (a dragonfly hop class may have moved
        // it up one for its egress queue).
        let in_class = priority - (f & flags::CLASS_UP != 0) as u8;
        let lossless = self
            .switches
            .pfc
            .as_ref()
            .is_some_and(|pfc| pfc.is_lossless(in_class));
        let q = &self.queues[p];
        let admission = if lossless {
            let pfc = self.switches.pfc.as_ref().expect("lossless implies PFC");
            self.switches.buffer.admit_lossless(
                node,
                w,
                pfc.headroom_used(ingress, in_class),
                pfc.headroom_of(ingress),
            )
        } else {
            let class_bytes = q.class_bytes(priority as usize) as u64;
            let admitted = self
                .switches
                .buffer
                .admit_lossy(node, q.bytes, class_bytes, w);
            // Packet trimming: a branch at admission, for data packets not trimmed yet.
            if let Some(trim) = self.switches.trimming {
                if kind == PacketKind::Data
                    && f & flags::TRIMMED == 0
                    && trim.trims(admitted, class_bytes)
                {
                    self.trim_packet(node, p, pkt, trim);
                    return;
                }
            }
            if admitted {
                Admission::Shared
            } else {
                Admission::Dropped
            }
        };
        match admission {
            Admission::Dropped => {
                if lossless {
                    self.stats.lossless_drops += 1;
                }
                self.trace_packet(PacketEvent::Drop, p, pkt);
                self.drop_packet(pkt);
                return;
            }
            Admission::Shared => self.switches.buffer.used[node] += w,
            Admission::Headroom => self.packets.get_mut(pkt).flags |= flags::HEADROOM,
        }
        if lossless {
            let free = self.switches.buffer.free(node);
            let pfc = self.switches.pfc.as_mut().expect("lossless implies PFC");
            if pfc.on_enqueue(ingress, in_class, w, admission == Admission::Headroom, free)
                == PfcAction::Pause
            {
                self.send_pfc_frame(ingress, in_class, true);
            }
        }
        if let Some(ecn) = &self.switches.ecn {
            if !ecn.on_dequeue
                && kind == PacketKind::Data
                && ecn.priorities & (1 << priority) != 0
                && f & flags::ECT != 0
            {
                let depth = self.queues[p].class_bytes(priority as usize) as u64 + w;
                self.maybe_mark(p, pkt, depth);
            }
        }
        let q = &mut self.queues[p];
        q.push(&mut self.packets, pkt, priority, wire_bytes);
        let depth = q.bytes;
        self.stats.max_queue_bytes = self.stats.max_queue_bytes.max(depth);
        self.trace_queued(p, pkt, priority);
        self.kick(p);
    }

    /// Trimming: cut data packet `pkt`'s payload at switch `node` and queue its header at egress
    /// `p` in the trimmed class (or drop it if even the header finds no room).
    #[cold]
    fn trim_packet(&mut self, node: NodeId, p: PortId, pkt: PacketId, trim: TrimmingSpec) {
        let packet = self.packets.get_mut(pkt);
        packet.wire_bytes = trim.trimmed_bytes;
        packet.priority = trim.priority;
        // Its class changed here, and a header carries no congestion signal of its own.
        packet.flags = (packet.flags | flags::TRIMMED) & !(flags::CLASS_UP | flags::ECT);
        let w = trim.trimmed_bytes as u64;
        let q = &self.queues[p];
        let class_bytes = q.class_bytes(trim.priority as usize) as u64;
        if !self
            .switches
            .buffer
            .admit_lossy(node, q.bytes, class_bytes, w)
        {
            self.drop_packet(pkt);
            return;
        }
        self.switches.buffer.used[node] += w;
        if let Some(n) = &mut self.stats.trimmed_packets {
            *n += 1;
        }
        self.switches.trimmed[p] += 1;
        self.trace_trim(p, pkt);
        let q = &mut self.queues[p];
        q.push(&mut self.packets, pkt, trim.priority, trim.trimmed_bytes);
        self.stats.max_queue_bytes = self.stats.max_queue_bytes.max(q.bytes);
        self.kick(p);
    }

    pub(super) fn drop_packet(&mut self, pkt: PacketId) {
        let p = *self.packets.get(pkt);
        if p.kind == PacketKind::Data {
            self.flows[p.flow].drops += 1;
        }
        self.stats.packets_dropped += 1;
        self.packets.release(pkt);
        if let Some(fid) = p.flow_id() {
            self.packet_gone(fid);
            self.maybe_retire(fid);
        }
    }

    // ---- PFC ---------------------------------------------------------------------------------

    /// The switch downstream of link `ingress` pauses (or resumes) `priority` on it: a real frame
    /// sent back over the reverse link, ahead of any queued packet.
    pub(super) fn send_pfc_frame(&mut self, ingress: PortId, priority: u8, pause: bool) {
        let back = self.fabric.peer_port[ingress];
        if self.circuits.is_some() && self.ports[back].down {
            // A dark OCS circuit (or a link down on a fabric with an OCS) carries no frame.
            if self.fabric.tier[back] == crate::topology::Tier::Ocs {
                return;
            }
        }
        let switch = self.ports[back].node;
        let upstream = self.ports[ingress].node;
        let frame = Packet::pfc(
            pause,
            priority,
            upstream,
            PFC_FRAME_BYTES,
            MAC_CONTROL_CLASS,
        );
        if pause {
            self.stats.pfc_pause_frames += 1;
            self.live.pause_frames[ingress] += 1;
        } else {
            self.stats.pfc_resume_frames += 1;
        }
        self.tracer
            .pfc_frame(self.now, switch, back, upstream, ingress, priority, pause);
        let id = self.packets.alloc(frame);
        if self.port_idle(back) {
            self.trace_packet(PacketEvent::Enqueue, back, id);
            self.transmit(back, id);
        } else {
            self.queues[back].push(&mut self.packets, id, MAC_CONTROL_CLASS, PFC_FRAME_BYTES);
            self.trace_packet(PacketEvent::Enqueue, back, id);
            self.kick(back);
        }
    }

    /// A PFC frame reached the upstream end of link `p`'s reverse: pause or resume that port.
    fn receive_pfc_frame(&mut self, p: PortId, pkt: PacketId) {
        let Packet {
            kind, pfc_class, ..
        } = *self.packets.get(pkt);
        self.packets.release(pkt);
        self.stats.packets_delivered += 1;
        let target = self.fabric.peer_port[p];
        let t = target;
        let bit = 1u8 << pfc_class;
        let was = self.ports[t].paused;
        if kind == PacketKind::Pause {
            self.ports[t].paused |= bit;
            if self.tracer.packets_on && was & bit == 0 {
                // The packet at the head of the paused class now waits for the RESUME.
                if let Some(head) = self.queues[t].class_list(pfc_class as usize).front() {
                    self.record_packet(PacketEvent::PauseBlocked, t, head);
                }
            }
            if was == 0 {
                self.pause_since[t] = self.now;
            }
            if !self.deadlock_check_pending {
                self.deadlock_check_pending = true;
                // On the fabric-wide grid of checks, at least one period ahead: a check reads
                // every switch, so with partitions it must be known a lookahead window ahead.
                let at = (self.now / DEADLOCK_CHECK_PS + 2) * DEADLOCK_CHECK_PS;
                match &mut self.partition {
                    // A partition asks for it; the parallel engine runs it across all of them.
                    Some(part) => part.deadlock_check_at = part.deadlock_check_at.min(at),
                    None => self.events.push(at, Event::DeadlockCheck),
                }
            }
        } else {
            self.unpause(t, bit);
            // Resume sending what waited (queued packets, or a NIC's flows).
            self.kick(target);
        }
    }

    /// Port `p`'s classes `bits` are no longer paused; once none is, the pause's time counts in
    /// `paused_ps`.
    pub(super) fn unpause(&mut self, p: PortId, bits: u8) {
        let was = self.ports[p].paused;
        self.ports[p].paused &= !bits;
        if was != 0 && self.ports[p].paused == 0 {
            self.paused_ps[p] += self.now - self.pause_since[p];
            self.pause_since[p] = NEVER;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::World;
    use crate::ids::{FlowId, NodeId, PortId};
    use crate::packet::Packet;
    use crate::trace::packets::PacketEvent;
    use arrow_array::cast::AsArray;
    use arrow_array::types::UInt32Type;

    #[test]
    fn the_trim_hook_writes_a_trim_row_with_the_trimmed_size() {
        let (_, s) = crate::scenario::parse_toml(
            "[topology]\nkind = \"leaf_spine\"\nleaves = 2\nspines = 1\nhosts_per_leaf = 1\n\
             [trace]\npackets = { nodes = [\"leaf:0\"] }\n\
             [[workload]]\nkind = \"flows\"\nflows = [{src = 0, dst = 1, size = \"1KB\"}]",
            "t.toml",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let mut sim = crate::Simulation::build(&s).unwrap_or_else(|e| panic!("{e}"));
        // The flow's record must exist for the hook to name its ends (the run has not started it).
        sim.keep_all_flows();
        let w: &mut World = sim.world_mut();
        let leaf = NodeId::new(2);
        let p = w.fabric.ports_of(leaf).nth_id(1).unwrap();
        let mut pkt = Packet::data(FlowId::new(0), 7, NodeId::new(1), 0, 4158, 3, false);
        pkt.wire_bytes = 64; // trimmed to its header
        let id = w.packets.alloc(pkt);
        w.trace_trim(p, id);
        // A port of another node is filtered out.
        w.trace_packet(PacketEvent::Trim, PortId::new(0), id);
        let b = w.tracer.traces.packets.as_mut().unwrap().batches().unwrap();
        assert_eq!(b[0].num_rows(), 1);
        let col = |n: &str| b[0].column(b[0].schema().index_of(n).unwrap()).clone();
        assert_eq!(col("event").as_string::<i32>().value(0), "trim");
        assert_eq!(col("size").as_primitive::<UInt32Type>().value(0), 64);
        assert_eq!(col("seq").as_primitive::<UInt32Type>().value(0), 7);
        assert_eq!(col("port_index").as_primitive::<UInt32Type>().value(0), 1);
        assert_eq!(
            (
                col("src").as_primitive::<UInt32Type>().value(0),
                col("dst").as_primitive::<UInt32Type>().value(0)
            ),
            (0, 1)
        );
    }
}
