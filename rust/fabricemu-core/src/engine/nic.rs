//! NICs: flows start, are segmented and paced onto the wire round robin; receivers acknowledge,
//! report gaps (go-back-N or selective) and run congestion control's receiver hook (DCQCN's NP
//! sends CNPs); senders recover losses and feed their controller (`cc::Cc`) its events: the flow
//! starts, packets leave, ACKs (with RTT samples and the ECN echo), CNPs, losses, its timers. The
//! controller answers with a rate (paced here) and/or a window (honoured here).

use super::queue::Event;
use super::world::World;
use crate::cc::{Ack, FlowPath, IntRecord, Reaction};
use crate::ids::{FlowId, NodeId, PortId};
use crate::packet::{flags, Packet, PacketId, PacketKind};
use crate::transport::{window, NEVER};
use crate::units::{serialisation_ps, Time};

impl World {
    /// The next data packet of host `h`'s port `p`, round robin over the flows it sends on `p`
    /// that have data and whose pacing allows a packet now. The flow served last stays at the front until the next
    /// choice, so a flow that became active meanwhile is served before it again. `Err(t)`: nothing
    /// to send now; try again at `t` (NEVER: when something changes).
    pub(super) fn nic_next_data(&mut self, _h: NodeId, p: PortId) -> Result<PacketId, Time> {
        if self.ports[p].paused & (1 << self.transport.data_priority) != 0 {
            return Err(NEVER); // PFC: the RESUME will wake the port
        }
        let now = self.now;
        let ring = &mut self.nics.ring[p];
        if std::mem::take(&mut ring.rotate) {
            ring.rotate_one();
        }
        let mut earliest = NEVER;
        for _ in 0..ring.len() {
            let fid = ring.front().expect("non-empty");
            let f = &mut self.flows[fid];
            if !f.has_data_to_send() {
                f.in_nic_ring = false;
                ring.pop_front();
                continue;
            }
            if f.next_send > now {
                earliest = earliest.min(f.next_send);
                if self.nics.fifo {
                    break; // FIFO: the oldest flow waits for its pacing; no one overtakes it
                }
                ring.rotate_one();
                continue;
            }
            if f.window_full(self.transport.mtu) {
                // Its window is full: an ACK that opens it kicks the NIC.
                if self.nics.fifo {
                    break;
                }
                ring.rotate_one();
                continue;
            }
            if let Some(c) = &mut self.credits {
                // Receiver credits: no credit, no packet (a pull kicks the NIC).
                let credit = &mut c.credit[fid];
                if *credit == 0 {
                    if self.nics.fifo {
                        break;
                    }
                    ring.rotate_one();
                    continue;
                }
                *credit -= 1;
            }
            let seq = match f.resend.pop() {
                Some(seq) => seq,
                None => {
                    f.next_seq += 1;
                    f.next_seq - 1
                }
            };
            let retx = seq < f.high_seq;
            if retx {
                f.retransmits += 1;
                self.stats.retransmitted_packets += 1;
                f.rtt_probe = None; // Karn: an ACK after a retransmission times nothing
            } else {
                let was_long = super::world::sends_long(&self.long_packets, f);
                f.high_seq = seq + 1;
                if was_long && !super::world::sends_long(&self.long_packets, f) {
                    self.long_flows -= 1;
                }
                if f.rtt_probe.is_none() && self.cc.sees_acks() {
                    f.rtt_probe = Some((seq, now));
                }
            }
            f.packets_sent += 1;
            f.packets_alive = f.packets_alive.wrapping_add(1);
            ring.rotate = !self.nics.fifo;
            let mut payload = f.payload_of(seq, self.transport.mtu);
            if let Some(inr) = &self.in_network {
                // An all-gather rank sends the other ranks' shards as headers.
                payload = inr.operand_payload(fid, seq, f.num_packets, payload);
            }
            let wire = payload + self.transport.header;
            // Pacing at the flow's rate (at line rate this is when the port is free anyway).
            let per_byte = self.ports[p].ps_per_byte;
            f.next_send = now
                + if f.rate_bps == self.port_rate[p] && per_byte != 0 {
                    wire as u64 * per_byte // at line rate: no division
                } else {
                    serialisation_ps(wire as u64, f.rate_bps)
                };
            let mut pkt = Packet::data(
                fid,
                seq,
                f.dst,
                f.header_fwd,
                wire,
                self.transport.data_priority,
                retx,
            );
            if self.in_network.as_ref().is_some_and(|i| i.is_member(fid)) {
                pkt.flags |= flags::INR;
                pkt.pfc_class = self.inr_epoch(fid);
            }
            self.stats.data_packets_sent += 1;
            let r = self.cc.on_sent(self.flows.slot(fid), wire as u64, now);
            if !r.is_none() {
                self.react(fid, r);
            }
            let id = self.packets.alloc(pkt);
            if let Some(int) = &mut self.int {
                int.slot_mut(id.index()).clear(); // switches stamp it hop by hop
            }
            if let Some(l) = &mut self.tracer.latency {
                l.sent(id.index(), now); // its transmission starts now (see `start_next`)
            }
            return Ok(id);
        }
        Err(earliest)
    }

    /// Put flow `fid` in its NIC's round robin if it has data, and wake the NIC if it is idle.
    pub(super) fn activate(&mut self, fid: FlowId) {
        let f = &mut self.flows[fid];
        if f.in_nic_ring || !f.has_data_to_send() {
            return;
        }
        f.in_nic_ring = true;
        let p = f.src_port;
        let ready = f.next_send.max(self.now);
        self.nics.ring[p].push_back(fid);
        let port = &self.ports[p];
        let at = port.busy_until.max(ready);
        if at == self.now && port.wake_at > self.now {
            // Free now (or only waiting for another flow's pacing): send at once.
            self.ports[p].wake_at = NEVER;
            self.start_next(p);
        } else {
            self.wake_port(p, at);
        }
    }

    /// Start the flows with a fixed start due now, in (start, id) order: the planned ones'
    /// order and the streamed workloads' flows (`workload::stream`) merged.
    pub(super) fn start_static_flows(&mut self) {
        loop {
            let planned = (self.static_order.get(self.next_static)).map(|&f| (self.start_of(f), f));
            let streamed = self.next_streamed();
            let (start, fid, stream) = match (planned, streamed) {
                (Some((t, f)), Some(s)) if (t, f) < (s.0, s.1) => (t, f, None),
                (_, Some((t, f, k))) => (t, f, Some(k)),
                (Some((t, f)), None) => (t, f, None),
                (None, None) => return,
            };
            if start > self.now {
                self.events.push(start, Event::NextFlowStarts);
                self.latest_pending = self.latest_pending.max(start);
                return;
            }
            if let Some(k) = stream {
                if !self.take_streamed(k) {
                    continue; // every partition runs every stream: another's flow starts there
                }
            } else {
                self.next_static += 1;
            }
            // Every partition runs this event: its rows are placed by flow, as one world
            // starts the flows of one instant in id order.
            self.tracer.place.within = fid.get();
            if self.partition.is_some()
                && self.in_network.as_ref().is_some_and(|i| i.is_member(fid))
            {
                self.forget_in_network_start();
            }
            self.start_flow(fid);
        }
    }

    /// Flow `fid` was cancelled by a plan amendment before it started: a barrier's release
    /// schedules no start for it ([`World::start_flow`] would drop it). Not in a run with
    /// in-network calls, whose partitions count every scheduled start of a call's flow.
    #[inline]
    fn never_starts(&self, fid: FlowId) -> bool {
        self.in_network.is_none() && self.amends.is_cancelled(fid)
    }

    /// Whether a barrier's release starts waiting flow `fid` here: in a partition only its
    /// sender's flows start, and a flow cancelled before it started never does.
    #[inline]
    pub(super) fn starts_here(&self, fid: FlowId) -> bool {
        let part = self.partition.as_ref();
        part.is_none_or(|p| p.starts_flow(self.flow_src(fid))) && !self.never_starts(fid)
    }

    pub(super) fn start_flow(&mut self, fid: FlowId) {
        if self.amends.is_cancelled(fid) {
            return; // cancelled by a plan amendment before it started
        }
        if self.in_network.is_some() && !self.inr_may_start(fid) {
            return; // its tree runs an earlier call: it starts when that one ends
        }
        let now = self.now;
        self.materialise(fid);
        if let Some(part) = &mut self.partition {
            part.tight.flow_started(fid); // the others learn of it at the window's end
        }
        if crate::transport::window::clear(&mut self.unstarted_long, fid.index() as u32) {
            self.long_flows -= 1; // counted as one that cannot finish within a window
        }
        let f = &mut self.flows[fid];
        f.start = now;
        f.started = true;
        if super::world::sends_long(&self.long_packets, f) {
            self.long_flows += 1;
        }
        f.next_send = now;
        f.rto_deadline = now.saturating_add(self.transport.rto);
        f.rto_armed = true;
        self.stats.flows_started += 1;
        self.events
            .push_after_recurring(self.transport.rto, Event::Retransmit(fid));
        let line = f.rate_bps;
        if self.partition.as_ref().is_some_and(|p| p.notes_cut_offs()) {
            self.note_if_cut_off(fid); // a timeout may give up on it (`earliest_give_up`)
        }
        let path = if self.cc.needs_path() {
            self.flow_base_path(fid)
        } else {
            FlowPath::default()
        };
        let bdp_path = match (&self.credits, self.cc.needs_path()) {
            (None, _) => None,
            (Some(_), true) => Some(path),
            (Some(_), false) => Some(self.flow_base_path(fid)),
        };
        if let (Some(c), Some(p)) = (&mut self.credits, bdp_path) {
            let bdp = (line as u128 * p.base_rtt_ps as u128 / 8_000_000_000_000) as u64;
            let mtu = self.transport.mtu as u64;
            let n = self.flows[fid].num_packets;
            let first = c.unsolicited_packets(bdp, mtu).min(n);
            c.credit[fid] = first;
            // What the receiver will owe once it sees the flow (its size is in the first packet).
            c.owed[fid] = n - first;
            c.unsolicited_left[fid] = first;
            if let Some(part) = &mut self.partition {
                if !part.owns(self.flows[fid].dst) {
                    part.outbox.credits.push((fid, n - first, first));
                }
            }
        }
        let r = self.cc.start(self.flows.slot(fid), line, now, &path);
        if self.cc.reports_rates() {
            self.record_rate(fid);
        }
        self.react(fid, r);
        self.activate(fid);
    }

    /// Flow `fid`'s path as its controller sees it when it starts: the switches on it and its base
    /// RTT (each hop's delay and serialisation of a full data packet, with the INT bytes its
    /// switches add, out; of an ACK, with the echoed records, back over the same hops).
    fn flow_base_path(&self, fid: FlowId) -> FlowPath {
        let hops = self.flow_path(fid);
        let switches = hops.len().saturating_sub(1) as u64;
        let int_bytes = self.int.as_ref().map_or(0, |i| i.bytes_per_hop as u64) * switches;
        let data = (self.transport.mtu + self.transport.header) as u64;
        let ack = self.transport.ack_bytes as u64;
        let mut rtt: Time = 0;
        for (i, h) in hops.iter().enumerate() {
            // The data packet carries the records of the switches before this hop.
            let data_here =
                data + self.int.as_ref().map_or(0, |s| s.bytes_per_hop as u64) * i as u64;
            rtt += 2 * h.delay_ps
                + serialisation_ps(data_here, h.rate_bps)
                + serialisation_ps(ack + int_bytes, h.rate_bps);
        }
        FlowPath {
            base_rtt_ps: rtt,
            switch_hops: switches as u32,
        }
    }

    pub(super) fn retransmit_timer(&mut self, fid: FlowId) {
        let now = self.now;
        let Some(f) = self.flows.get_mut(fid) else {
            return; // retired: it finished and nothing of it is left
        };
        if f.sender_stopped() {
            f.rto_armed = false;
            self.maybe_retire(fid);
            return;
        }
        if f.rto_deadline > now {
            self.events.push(f.rto_deadline, Event::Retransmit(fid));
            return;
        }
        // No acknowledged progress for a whole timeout. If the destination is cut off for good
        // (no path either way, and no fault will end or be noticed later), give up on the flow.
        if self.faults.settled() && !(self.reachable(fid, true) && self.reachable(fid, false)) {
            self.abandon(fid);
            return;
        }
        // Otherwise go back to the first unacknowledged packet (a selective receiver ignores
        // what it already holds).
        if let Some(c) = &mut self.credits {
            // A credit may have been lost: the timer grants what it resends, and one packet when
            // nothing is outstanding but packets are left (the pulls that would have let them go
            // were lost: without it the flow would wait for ever).
            let f = &self.flows[fid];
            let left = (f.next_seq < f.num_packets) as u32;
            c.credit[fid] = c.credit[fid].max((f.high_seq - f.acked).max(left));
        }
        let f = &mut self.flows[fid];
        self.stats.timeouts += 1;
        f.next_seq = f.acked;
        f.resend.clear();
        f.rto_deadline = now.saturating_add(self.transport.rto);
        self.events
            .push_after_recurring(self.transport.rto, Event::Retransmit(fid));
        let r = self.cc.on_loss(self.flows.slot(fid), true, now);
        self.react(fid, r);
        self.resume(fid);
    }

    /// Flow `fid` may send again (a rewind, a resend or a credit): put it in its NIC's round
    /// robin, or, if it is already there, wake the port. A flow blocked by its window (or a
    /// credit) stays in the ring with the port asleep, and `activate` does not wake the port for
    /// a flow already in the ring; without the kick a sender whose whole window was lost would
    /// never send again after its retransmission timeout.
    fn resume(&mut self, fid: FlowId) {
        let f = &self.flows[fid];
        if f.in_nic_ring {
            let p = f.src_port;
            self.kick(p);
        } else {
            self.activate(fid);
        }
    }

    // ---- receiving ---------------------------------------------------------------------------

    pub(super) fn host_receive(&mut self, pkt: PacketId) {
        let p = *self.packets.get(pkt);
        self.packets.release(pkt);
        self.packet_gone(p.flow);
        self.stats.packets_delivered += 1;
        if self.synth.is_some() && p.kind == PacketKind::Data {
            self.meter_data(&p);
        }
        match p.kind {
            // An elastic job's re-formation withdrew its flow and tore the connection down at
            // both ends: the receiving NIC drops what still comes, answering nothing (as an RDMA
            // NIC drops packets for a queue pair destroyed), and the flow counts for nothing.
            PacketKind::Data if self.flows[p.flow].withdrawn => {}
            PacketKind::Data if p.flags & flags::TRIMMED != 0 => {
                self.receive_trimmed(p.flow, p.seq)
            }
            PacketKind::Data => {
                if let Some(l) = &mut self.tracer.latency {
                    let f = &self.flows[p.flow];
                    l.received(pkt.index(), f.workload, f.size_bytes, self.now);
                }
                if let Some(int) = &mut self.int {
                    // Its ACK echoes the records (the slot is free; the store keeps them until
                    // the slot is written again).
                    int.take_echo(pkt.index());
                }
                self.receive_data(p.flow, p.seq, p.flags);
                if !self.long_receive.is_empty() {
                    self.count_long_receive(p.flow);
                }
            }
            PacketKind::Ack => {
                let ece = p.flags & flags::ECE != 0;
                // Its INT records (if any) are read in place by the controller, before anything
                // can reuse the slot.
                self.receive_ack(p.flow, p.seq, ece, Some(pkt.index()))
            }
            PacketKind::Nack if p.flags & flags::TRIMMED != 0 => {
                self.receive_trim_nack(p.flow, p.seq)
            }
            PacketKind::Nack => self.receive_nack(p.flow, p.seq),
            PacketKind::Cnp => self.receive_cnp(p.flow),
            PacketKind::Pull => self.receive_pull(p.flow),
            PacketKind::Pause | PacketKind::Resume => {
                unreachable!("PFC frames are handled per link")
            }
        }
        self.maybe_retire(p.flow);
    }

    /// Parallel runs with long windows: whether flow `fid` still misses enough packets at its
    /// receiver that it cannot finish within one (`World::long_receive`), kept in the count.
    /// What it misses only shrinks, so a flow counts from its first packet until the count
    /// falls below the bound (at the latest when it finishes).
    fn count_long_receive(&mut self, fid: FlowId) {
        let elsewhere = (self.partition.as_ref()).is_some_and(|p| p.given_up_elsewhere(fid));
        let f = &mut self.flows[fid];
        if f.abandoned || elsewhere {
            return; // its sender gave up on it: it misses nothing that may come
        }
        let outside = super::tight::from_outside(&self.fabric, f.src, f.dst);
        let bound = self.long_receive[f.dst.index()][outside as usize];
        let long = super::tight::packets_missing(f) >= bound as u64;
        if long != f.long_at_receiver {
            f.long_at_receiver = long;
            if long {
                self.long_flows += 1;
            } else {
                self.long_flows -= 1;
            }
        }
    }

    fn receive_data(&mut self, fid: FlowId, seq: u32, pkt_flags: u16) {
        if self.credits.is_some() {
            self.owe_credits(fid, 0);
        }
        let now = self.now;
        let slot = self.flows.slot(fid);
        let f = &mut self.flows[fid];
        let ce = pkt_flags & flags::CE != 0;
        if ce {
            f.ecn_marks += 1;
            f.ce_unechoed = true;
        }
        // The receiver's congestion-control hook (DCQCN's NP: a CNP at most once per interval).
        if self.cc.on_data(slot, ce, now) {
            f.cnps += 1;
            self.stats.cnps_sent += 1;
            self.send_control(fid, PacketKind::Cnp);
        }
        let f = &mut self.flows[fid];
        if seq > f.expected {
            f.out_of_order += 1;
            f.max_reorder = f.max_reorder.max((seq - f.expected) as u64);
            self.stats.out_of_order_packets += 1;
        }
        if self.transport.selective {
            self.receive_data_selective(fid, seq, pkt_flags);
            return;
        }
        let f = &mut self.flows[fid];
        if seq == f.expected {
            f.expected += 1;
            if f.expected == f.num_packets {
                self.flow_finished(fid);
            } else if f.expected.is_multiple_of(self.transport.ack_every) {
                self.send_control(fid, PacketKind::Ack);
            }
        } else if seq > f.expected {
            // A gap: go-back-N receivers discard out-of-order packets and NACK once per gap.
            if f.nacked_at != Some(f.expected) {
                f.nacked_at = Some(f.expected);
                self.send_control(fid, PacketKind::Nack);
            }
        } else {
            // A duplicate (after a retransmission): re-acknowledge so the sender moves on.
            self.send_control(fid, PacketKind::Ack);
        }
    }

    /// Selective recovery: keep what arrives ahead of the cumulative point; report the hole only
    /// once the flow's reorder threshold of packets beyond it arrived, so reordering alone is not
    /// loss; a hole reported and then filled by its original raises the threshold.
    fn receive_data_selective(&mut self, fid: FlowId, seq: u32, pkt_flags: u16) {
        let f = &mut self.flows[fid];
        if seq < f.expected
            || (seq > f.expected && !window::set(&mut f.received_ahead, seq - f.expected))
        {
            self.send_control(fid, PacketKind::Ack); // duplicate
            return;
        }
        let now = self.now;
        if seq == f.expected {
            let overtaken_by = window::count(&f.received_ahead);
            if overtaken_by > 0 && pkt_flags & flags::RETX == 0 && f.hole_since != NEVER {
                // The original filled a hole: that was reordering, by `overtaken_by` packets and
                // for as long as the hole lasted. Tolerate at least as much from now on, in
                // packets (as Linux TCP adapts its reordering degree) and in time (as RACK's
                // reordering window); twice as long if the hole had been reported lost (a
                // spurious retransmission). The window stays under a quarter of the timeout.
                let spurious = f.nacked_at == Some(seq);
                f.reorder_threshold = f.reorder_threshold.max(overtaken_by + 1).min(1 << 16);
                let lasted = (now - f.hole_since) << spurious as u32;
                f.reorder_window = f.reorder_window.max(lasted).min(self.transport.rto / 4);
            }
            window::shift(&mut f.received_ahead, 1);
            let run = window::leading_ones(&f.received_ahead);
            window::shift(&mut f.received_ahead, run);
            f.expected += 1 + run;
            // The next hole (if packets wait beyond it) is front from now.
            f.hole_since = if f.received_ahead.is_empty() {
                NEVER
            } else {
                now
            };
            if f.expected == f.num_packets {
                self.flow_finished(fid);
                return;
            }
            if run > 0 || f.expected.is_multiple_of(self.transport.ack_every) {
                self.send_control(fid, PacketKind::Ack);
            }
        }
        let f = &mut self.flows[fid];
        if f.received_ahead.is_empty() {
            return;
        }
        if f.hole_since == NEVER {
            f.hole_since = now; // a packet overtook the expected one: a hole opens
        }
        // Report the hole once enough packets overtook it and it lasted longer than reordering
        // has been seen to last.
        if self.transport.gap_nacks
            && f.nacked_at != Some(f.expected)
            && window::count(&f.received_ahead) >= f.reorder_threshold
            && now - f.hole_since >= f.reorder_window
        {
            f.nacked_at = Some(f.expected);
            self.send_control(fid, PacketKind::Nack);
        }
    }

    /// A trimmed packet (its header) arrived: NACK exactly it, unless the receiver holds it
    /// already (a trimmed duplicate).
    fn receive_trimmed(&mut self, fid: FlowId, seq: u32) {
        if self.credits.is_some() {
            self.owe_credits(fid, 1); // the header earns the resend its credit
        }
        let f = &self.flows[fid];
        let held =
            f.finished() || seq < f.expected || window::get(&f.received_ahead, seq - f.expected);
        if !held {
            self.send_control_seq(fid, PacketKind::Nack, seq, flags::TRIMMED);
        }
    }

    fn flow_finished(&mut self, fid: FlowId) {
        let elsewhere = (self.partition.as_ref()).is_some_and(|p| p.given_up_elsewhere(fid));
        let f = &mut self.flows[fid];
        if f.withdrawn || f.abandoned || elsewhere {
            // An elastic job gave it up, or its sender did (its destination cut off for good)
            // before its last packet came in: it was settled then, and counts for nothing now.
            return;
        }
        f.finish = self.now;
        f.received_ahead = Vec::new();
        self.stats.flows_finished += 1;
        self.flows_settled += 1;
        let barrier = f.completes;
        self.send_control(fid, PacketKind::Ack);
        if self.in_network.is_some() {
            self.inr_flow_finished(fid);
        }
        if let Some(part) = &mut self.partition {
            part.tell(
                fid,
                self.flows[fid].src,
                super::parallel::FlowNews::Finished,
            );
        }
        if let Some(barrier) = barrier {
            self.barrier_arrive(barrier);
            if let Some(part) = &mut self.partition {
                part.tell_arrival(self.now, barrier); // a barrier other partitions count too
            }
        }
    }

    /// ACK, NACK or CNP from flow `fid`'s receiver to its sender.
    #[inline]
    fn send_control(&mut self, fid: FlowId, kind: PacketKind) {
        let expected = self.flows[fid].expected;
        self.send_control_seq(fid, kind, expected, 0);
    }

    /// A control packet carrying `seq` (the next expected packet; for a trimmed packet's NACK,
    /// that packet) and `extra` flags.
    fn send_control_seq(&mut self, fid: FlowId, kind: PacketKind, seq: u32, extra: u16) {
        let f = &mut self.flows[fid];
        f.packets_alive = f.packets_alive.wrapping_add(1);
        let echo = kind == PacketKind::Ack && std::mem::take(&mut f.ce_unechoed);
        let mut pkt = Packet::control(
            kind,
            fid,
            seq,
            f.src,
            f.header_rev,
            self.transport.ack_bytes,
            self.transport.control_priority,
        );
        pkt.flags |= extra;
        if echo {
            pkt.flags |= flags::ECE;
        }
        let port = f.dst_port;
        self.stats.control_packets_sent += 1;
        if let Some(int) = &self.int {
            if kind == PacketKind::Ack {
                pkt.wire_bytes += int.echo().len() as u32 * int.bytes_per_hop;
            }
        }
        let id = self.packets.alloc(pkt);
        if let Some(int) = &mut self.int {
            int.set_slot(id.index(), kind == PacketKind::Ack);
        }
        self.host_enqueue(port, id);
    }

    /// A cumulative acknowledgement (an ACK, or a NACK's cumulative part); tells the controller.
    /// `int_slot`: the released ACK's packet slot, whose INT records (if the run stamps INT) the
    /// controller reads in place (nothing writes a slot before the controller has run).
    #[inline]
    fn receive_ack(
        &mut self,
        fid: FlowId,
        cumulative: u32,
        ecn_echo: bool,
        int_slot: Option<usize>,
    ) {
        let now = self.now;
        let f = &mut self.flows[fid];
        let mut newly_acked = 0;
        let mut rtt = None;
        if cumulative > f.acked {
            newly_acked = cumulative - f.acked;
            f.acked = cumulative;
            f.rto_deadline = now.saturating_add(self.transport.rto);
            if f.next_seq < cumulative {
                f.next_seq = cumulative;
            }
            f.resend.retain(|&s| s >= cumulative);
            if let Some((seq, sent)) = f.rtt_probe {
                if seq < cumulative {
                    rtt = Some(now - sent);
                    f.rtt_probe = None;
                }
            }
        }
        let window = f.window_bytes.is_some() && f.in_nic_ring && newly_acked > 0;
        if self.cc.sees_acks() {
            let (acked, next_seq) = (f.acked, f.high_seq);
            let int: &[IntRecord] = match (&self.int, int_slot) {
                (Some(store), Some(i)) => store.records(i),
                _ => &[],
            };
            let r = self.cc.on_ack(
                self.flows.slot(fid),
                &Ack {
                    now,
                    newly_acked,
                    acked,
                    next_seq,
                    rtt,
                    ecn_echo,
                    int,
                },
            );
            self.react(fid, r);
        }
        if window {
            // The window opened: the NIC may send again.
            let p = self.flows[fid].src_port;
            self.kick(p);
        }
    }

    fn receive_nack(&mut self, fid: FlowId, expected: u32) {
        if self.flows[fid].abandoned {
            // Given up on, or withdrawn by an elastic job: a NACK of a packet still on its way
            // when it stopped must not start it again.
            return;
        }
        self.receive_ack(fid, expected, false, None);
        let r = self.cc.on_loss(self.flows.slot(fid), false, self.now);
        self.react(fid, r);
        let selective = self.transport.selective;
        let f = &mut self.flows[fid];
        if expected >= f.next_seq {
            return;
        }
        if selective {
            // Resend just the hole.
            if !f.resend.contains(&expected) {
                f.resend.push(expected);
                f.resend.sort_unstable_by(|a, b| b.cmp(a));
            }
        } else {
            f.next_seq = expected;
        }
        self.resume(fid);
    }

    /// The receiver NACKed packet `seq`, which a switch trimmed: resend it (selectively), before
    /// new data. The controller hears of a loss.
    fn receive_trim_nack(&mut self, fid: FlowId, seq: u32) {
        let f = &mut self.flows[fid];
        if f.sender_stopped() || seq < f.acked || seq >= f.high_seq {
            return;
        }
        f.trim_nacks += 1;
        if !f.resend.contains(&seq) {
            f.resend.push(seq);
            f.resend.sort_unstable_by(|a, b| b.cmp(a));
        }
        let r = self.cc.on_loss(self.flows.slot(fid), false, self.now);
        self.react(fid, r);
        // The resend goes first: wake the NIC even if the flow waits in its ring (for its window
        // or a credit) with the port asleep.
        self.resume(fid);
    }

    // ---- receiver-driven credits --------------------------------------------------------------

    /// A packet of flow `fid` arrived (whole, or trimmed: `extra` = 1 credit for its resend):
    /// the receiver learns of the flow with its first packet, and serves the credits it owes
    /// the flow in its port's round robin.
    fn owe_credits(&mut self, fid: FlowId, extra: u32) {
        let f = &self.flows[fid];
        if f.finished() {
            return;
        }
        let p = f.dst_port;
        let now = self.now;
        let c = self.credits.as_mut().expect("credits on");
        c.owed[fid] += extra;
        if c.unsolicited_left[fid] > 0 {
            c.unsolicited_left[fid] -= 1;
            if extra == 0 {
                // An unsolicited packet took this much of the port's rate: grant that much later.
                c.next_pull[p] = c.next_pull[p].max(now).saturating_add(c.interval[p]);
            }
        }
        if c.owed[fid] == 0 || c.in_ring[fid] {
            return;
        }
        c.in_ring[fid] = true;
        c.ring[p].push_back(fid);
        if !c.armed[p] {
            c.armed[p] = true;
            let at = c.next_pull[p].max(now);
            self.events.push(at, Event::PullPacer(p));
        }
    }

    /// The credit pacer of receiving port `p`: one credit to the flow at the front of its round
    /// robin, then again one full packet's time later (at the credit rate) while flows are owed.
    pub(super) fn pull_pacer(&mut self, p: PortId) {
        let now = self.now;
        let c = self.credits.as_mut().expect("credits on");
        if now < c.next_pull[p] {
            // Unsolicited arrivals moved the next grant later.
            let at = c.next_pull[p];
            self.events.push(at, Event::PullPacer(p));
            return;
        }
        c.armed[p] = false;
        // Flows that completed meanwhile leave the round robin.
        let fid = loop {
            match c.ring[p].pop_front() {
                Some(fid) if self.flows[fid].finished() || c.owed[fid] == 0 => {
                    c.in_ring[fid] = false;
                }
                other => break other,
            }
        };
        let Some(fid) = fid else {
            return;
        };
        c.owed[fid] -= 1;
        if c.owed[fid] > 0 {
            c.ring[p].push_back(fid);
        } else {
            c.in_ring[fid] = false;
        }
        if let Some(n) = &mut self.stats.pulls_sent {
            *n += 1;
        }
        c.next_pull[p] = now.saturating_add(c.interval[p]);
        if !c.ring[p].is_empty() {
            c.armed[p] = true;
            let at = c.next_pull[p];
            self.events.push(at, Event::PullPacer(p));
        }
        let expected = self.flows[fid].expected;
        self.send_control_seq(fid, PacketKind::Pull, expected, 0);
    }

    /// A pull reached flow `fid`'s sender: one more packet may go.
    fn receive_pull(&mut self, fid: FlowId) {
        let f = &self.flows[fid];
        if f.sender_stopped() {
            return;
        }
        let c = self.credits.as_mut().expect("credits on");
        c.credit[fid] = c.credit[fid].saturating_add(1);
        self.resume(fid);
    }

    pub(super) fn barrier_arrive(&mut self, b: u32) {
        self.barrier_arrive_at(b, self.now);
    }

    /// One arrival at barrier `b`, which happened at `at` (now, but for an arrival another
    /// partition tells of). At its last it releases, at its latest arrival's time: its flows
    /// start and its chained barriers get their arrivals, here or in the partitions that run
    /// them (`Part::starts_flow`, `Part::runs_barrier`).
    pub(super) fn barrier_arrive_at(&mut self, b: u32, at: Time) {
        let barrier = &mut self.barriers[b as usize];
        barrier.remaining -= 1;
        barrier.latest = barrier.latest.max(at);
        let now = barrier.latest;
        if barrier.remaining == 0 {
            let job = if self.jobs.list.is_empty() {
                None
            } else {
                self.jobs.job_of(b)
            };
            if let Some(j) = job {
                if !self.job_release(j, b, now) {
                    return; // the job is frozen: it releases when it resumes
                }
                return self.job_barrier_released(j, b, now);
            }
            let barrier = &mut self.barriers[b as usize];
            barrier.released_at = now;
            if let Some(p) = self.partition.as_mut() {
                p.released.push(b); // for the view's next fold
            }
            for k in 0..self.links.waiting(b).len() {
                let (fid, gap) = self.links.waiting(b)[k];
                if self.starts_here(fid) {
                    self.push_flow_start(now.saturating_add(gap), fid);
                }
            }
            for k in 0..self.links.then(b).len() {
                let (next, delay) = self.links.then(b)[k];
                if self.partition.as_ref().is_none_or(|p| p.runs_barrier(next)) {
                    self.pending_arrivals += 1;
                    self.push_barrier_arrival(now.saturating_add(delay), next);
                }
            }
        }
    }

    // ---- congestion control ------------------------------------------------------------------

    fn receive_cnp(&mut self, fid: FlowId) {
        if self.flows[fid].sender_stopped() {
            return;
        }
        let r = self.cc.on_cnp(self.flows.slot(fid), self.now);
        self.react(fid, r);
    }

    pub(super) fn cc_timer(&mut self, fid: FlowId, timer: u8) {
        let Some(f) = self.flows.get(fid) else {
            return; // retired (a done sender's timers do nothing)
        };
        let done = f.sender_stopped();
        let r = self
            .cc
            .on_timer(self.flows.slot(fid), timer, self.now, done);
        self.react(fid, r);
    }

    /// Apply a controller's reaction: the new rate, the new window, then the timers it arms.
    #[inline]
    pub(super) fn react(&mut self, fid: FlowId, r: Reaction) {
        if let Some(rate) = r.rate_bps {
            self.rate_changed(fid, rate);
        }
        if let Some(w) = r.window_bytes {
            let f = &mut self.flows[fid];
            let opened = f.window_bytes.is_some_and(|old| w > old);
            let changed = f.window_bytes != Some(w);
            f.window_bytes = Some(w);
            if opened && f.in_nic_ring {
                let p = f.src_port;
                self.kick(p);
            }
            if changed && r.rate_bps.is_none() {
                self.record_rate(fid); // a window scheme's state changed
            }
        }
        for (timer, at) in r.timers.into_iter().flatten() {
            self.events.push(at, Event::CcTimer(fid, timer));
        }
    }

    /// The flow's rate changed: pace at it from the next packet on.
    fn rate_changed(&mut self, fid: FlowId, rc: u64) {
        let f = &mut self.flows[fid];
        let old = f.rate_bps;
        f.rate_bps = rc;
        if rc > old && f.next_send > self.now {
            // Faster now: the wait computed at the old rate shrinks in proportion.
            let left = f.next_send - self.now;
            // (In u64 when the product fits, as it does for any wait of a packet's time.)
            f.next_send = self.now
                + match left.checked_mul(old) {
                    Some(x) => x / rc,
                    None => (left as u128 * old as u128 / rc as u128) as Time,
                };
            if f.in_nic_ring {
                let p = f.src_port;
                let at = f.next_send.max(self.ports[p].busy_until);
                self.wake_port(p, at);
            }
        }
        self.record_rate(fid);
    }

    fn record_rate(&mut self, fid: FlowId) {
        let now = self.now;
        let (cc, slot) = (&mut self.cc, self.flows.slot(fid));
        self.tracer
            .rate_changed(fid, now, || cc.rate_sample(slot, now));
    }
}

#[cfg(test)]
mod tests {
    use super::World;
    use crate::ids::FlowId;
    use crate::scenario::parse_toml;

    /// One 40-packet flow across a k=4 fat tree; `window`: a congestion window of that many
    /// MTU-sized packets, set as a controller would.
    fn fct(window: Option<u64>) -> (u64, u64) {
        let (_, s) = parse_toml(
            "[topology]\nkind = \"fat_tree\"\nk = 4\nlink_delay = \"1us\"\n\
             [transport]\nmtu = \"1KB\"\n\
             [[workload]]\nkind = \"flows\"\nflows = [{src = 0, dst = 15, size = \"40KB\"}]",
            "t.toml",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let b = crate::scenario::build(&s).unwrap_or_else(|e| panic!("{e}"));
        let derived = crate::engine::world::PlanDerived::of(&b.scenario, &b.fabric, &b.plan);
        let mut w = World::new(
            &b.scenario,
            b.fabric,
            &b.plan,
            &b.faults,
            b.pfc,
            &b.reserved_headroom,
            &derived,
        );
        // Its record exists before it starts only when every record is kept.
        w.keep_all_flows();
        w.flows[FlowId::new(0)].window_bytes = window.map(|n| n * w.transport.mtu as u64);
        while !w.run_events(1 << 16) {}
        w.check_conservation().unwrap();
        let f = &w.flows[FlowId::new(0)];
        assert!(f.finished());
        (f.finish - f.start, w.stats.data_packets_sent)
    }

    #[test]
    fn the_nic_honours_a_window() {
        let (free, sent) = fct(None);
        assert_eq!(sent, 40);
        // Six links of 1us each way: one round trip is over 12us. A window of one packet sends one
        // packet per round trip; of four, four.
        let (one, sent_one) = fct(Some(1));
        let (four, _) = fct(Some(4));
        assert_eq!(sent_one, 40, "a window sends nothing twice");
        assert!(one >= 40 * 12_000_000, "window 1: {one} ps");
        assert!(
            four >= 9 * 12_000_000 && four < one / 3,
            "window 4: {four} ps vs {one}"
        );
        assert!(free < 2 * 12_000_000, "no window: {free} ps");
    }
}
