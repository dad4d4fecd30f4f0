//! Queue pairs on NICs: a flow is segmented into MTU packets; the receiver acknowledges cumulatively
//! and asks for a go-back-N retransmission when it sees a gap (as RoCE NICs do); a timer recovers a
//! lost tail. Congestion control plugs in through the flow's sending rate (line rate with `cc = none`).

pub mod config;
pub mod credits;
pub mod ideal;
pub mod ring;
pub mod rto;

use crate::ids::{IdVec, NodeId, PortId};
use crate::units::Time;

/// No time set.
pub const NEVER: Time = Time::MAX;

/// Transport settings every flow shares.
#[derive(Debug, Clone, Copy)]
pub struct TransportParams {
    pub mtu: u32,
    /// Header bytes of every packet.
    pub header: u32,
    /// Wire size of ACK, NACK and CNP packets.
    pub ack_bytes: u32,
    pub ack_every: u32,
    pub rto: Time,
    /// Selective recovery (false: go-back-N).
    pub selective: bool,
    /// Selective: report a hole once enough packets overtook it (false with packet trimming,
    /// where, as in NDP, a trimmed packet's header is the loss report and a gap is reordering).
    pub gap_nacks: bool,
    pub data_priority: u8,
    pub control_priority: u8,
}

/// The NICs: per host, the active flows served round robin (the front was served last if its
/// ring's `rotate`), or oldest first.
#[derive(Debug, Clone)]
pub struct Nics {
    /// Per host egress port (ports `0..` of the hosts, which come first; a host-only fabric's host
    /// h has port h): its flows' round robin. A GPU sends each flow on one of its ports (NIC,
    /// scale-up), so each port arbitrates among its own flows.
    pub ring: IdVec<PortId, ring::FlowRing>,
    /// `nic.arbitration = "fifo"`: serve the oldest active flow until it has nothing to send.
    pub fifo: bool,
}

impl Nics {
    /// `host_ports`: the ports of all hosts (`0..host_ports`).
    pub fn new(host_ports: u32, fifo: bool) -> Self {
        Self {
            ring: (0..host_ports).map(|_| ring::FlowRing::default()).collect(),
            fifo,
        }
    }
}

/// Sender and receiver state of one flow.
///
/// Laid out by use, in cache lines (`repr(C)` keeps the order): the first holds what every data
/// packet sent or received and every ACK reads or writes, the second the sender's recovery,
/// window and RTT sample, the third the pacing rate, timers and flags; the counters and what
/// only the flow's start and end read come last. Left to the compiler, which orders fields by
/// alignment, a packet's fields were spread over most of the record's lines.
#[derive(Debug, Clone)]
#[repr(C, align(64))]
pub struct Flow {
    // Line 0: per packet.
    pub next_seq: u32,
    pub num_packets: u32,
    pub acked: u32,
    /// Highest sequence ever sent + 1 (anything below it sent again is a retransmission).
    pub high_seq: u32,
    pub expected: u32,
    /// Its packets (data and control) in the fabric now: created and not yet delivered or
    /// dropped. A run that retires flows retires one only when none is left. Counted modulo
    /// 2^32: a partition of a parallel run counts what leaves it as well as what it sent, and
    /// the partitions' counts add up to the flow's.
    pub packets_alive: u32,
    pub dst: NodeId,
    /// Payload of the last packet (the others carry a full MTU).
    pub last_payload: u32,
    /// Pacing: when the next packet may start.
    pub next_send: Time,
    pub header_fwd: u64,
    pub header_rev: u64,
    pub packets_sent: u64,

    // Line 1: the sender's recovery, window and RTT sample.
    /// Selective recovery, sender: packets to resend before new data (lost holes).
    pub resend: Vec<u32>,
    /// Congestion control's window: at most this many bytes of new data unacknowledged (None:
    /// no window, the rate alone paces).
    pub window_bytes: Option<u64>,
    /// The packet timed for an RTT sample: (sequence, when it was sent). Retransmissions are never
    /// timed (Karn), and a retransmission cancels the sample.
    pub rtt_probe: Option<(u32, Time)>,

    // Line 2: pacing, timers, flags.
    /// Pacing: the current sending rate.
    pub rate_bps: u64,
    pub rto_deadline: Time,
    pub finish: Time,
    /// `expected` value a NACK was last sent for (one NACK per gap; None: none yet).
    pub nacked_at: Option<u32>,
    /// The port the source sends data on, and the one the receiver sends its ACKs, NACKs and
    /// CNPs on (a host's only port; a GPU's NIC or scale-up port, see `topology::cluster`).
    pub src_port: PortId,
    pub dst_port: PortId,
    pub src: NodeId,
    // (Two colder u32s where the line would otherwise be padding.)
    pub workload: u32,
    /// Selective recovery, receiver: packets beyond a hole before it is reported (adapts upward
    /// when a report proves to have been reordering).
    pub reorder_threshold: u32,
    pub in_nic_ring: bool,
    pub rto_armed: bool,
    pub started: bool,
    /// Receiver: a congestion-experienced packet arrived since the last ACK (its ECN echo).
    pub ce_unechoed: bool,
    /// Given up on: its destination was cut off for good (or it waited on a flow that was).
    pub abandoned: bool,
    /// Withdrawn by an elastic job's re-formation (it was also `abandoned`: the sender stopped):
    /// its arrival at its barrier was taken back, and its finishing later counts for nothing.
    pub withdrawn: bool,
    /// Receiver: counted in `World::long_flows` (it misses more packets than come in within
    /// one of the parallel engine's long windows).
    pub long_at_receiver: bool,

    // Cold: set up and finish, selective-recovery receiver, counters.
    pub size_bytes: u64,
    /// When the flow starts (NEVER until a dependency releases it).
    pub start: Time,
    /// Barrier this flow counts toward when it finishes, if any.
    pub completes: Option<u32>,
    /// Selective recovery, receiver: packets received beyond `expected` (bit i: `expected + i`).
    pub received_ahead: Vec<u64>,
    /// Selective recovery, receiver: how long a hole must last before it is reported (0 until a
    /// report proves to have been reordering; then adapts upward, as RACK's reordering window).
    pub reorder_window: Time,
    /// Selective recovery, receiver: since when the current hole at `expected` has been the
    /// front one (NEVER: no packet waits beyond `expected`).
    pub hole_since: Time,
    pub retransmits: u64,
    pub drops: u64,
    pub ecn_marks: u64,
    pub cnps: u64,
    pub out_of_order: u64,
    pub max_reorder: u64,
    /// NACKs of trimmed packets the sender received (each resends one packet).
    pub trim_nacks: u64,
    /// Its packets (data or control) dropped because no live path led to their destination.
    pub unreachable_drops: u64,
}

// The per-packet fields fill the first line, the sender's second-tier state the second.
const _: () = assert!(std::mem::offset_of!(Flow, packets_sent) == 56);
const _: () = assert!(std::mem::offset_of!(Flow, rtt_probe) + 24 <= 128);
const _: () = assert!(std::mem::offset_of!(Flow, withdrawn) < 192);
// Five lines, as the compiler's own order packed it.
const _: () = assert!(std::mem::size_of::<Flow>() == 320);

impl Flow {
    #[inline]
    pub fn payload_of(&self, seq: u32, mtu: u32) -> u32 {
        if seq + 1 == self.num_packets {
            self.last_payload
        } else {
            mtu
        }
    }

    #[inline]
    pub fn sender_done(&self) -> bool {
        self.acked == self.num_packets
    }

    /// The sender has nothing more to do: everything acknowledged, or the flow was given up on.
    #[inline]
    pub fn sender_stopped(&self) -> bool {
        self.sender_done() || self.abandoned
    }

    #[inline]
    pub fn finished(&self) -> bool {
        self.finish != NEVER
    }

    /// The window (if any) keeps new data back: `mtu`-sized packets in flight fill it.
    #[inline]
    pub fn window_full(&self, mtu: u32) -> bool {
        match self.window_bytes {
            Some(w) => {
                self.resend.is_empty()
                    && self.next_seq.saturating_sub(self.acked) as u64 * mtu as u64 >= w
            }
            None => false,
        }
    }

    /// Packets the sender still has to put on the wire.
    #[inline]
    pub fn has_data_to_send(&self) -> bool {
        self.next_seq < self.num_packets || !self.resend.is_empty()
    }
}

/// Split `size` bytes into MTU packets: (count, payload of the last).
pub fn segment(size: u64, mtu: u64) -> (u32, u32) {
    let n = size.div_ceil(mtu);
    let last = size - (n - 1) * mtu;
    (n as u32, last as u32)
}

/// A window of received-ahead packets as a bit set that slides with the cumulative point.
pub mod window {
    /// Mark `offset` (packets beyond the expected one) as received; true if it was new.
    pub fn set(bits: &mut Vec<u64>, offset: u32) -> bool {
        let (w, b) = ((offset / 64) as usize, offset % 64);
        if bits.len() <= w {
            bits.resize(w + 1, 0);
        }
        let new = bits[w] & (1 << b) == 0;
        bits[w] |= 1 << b;
        new
    }

    /// Whether `offset` is marked.
    pub fn get(bits: &[u64], offset: u32) -> bool {
        let (w, b) = ((offset / 64) as usize, offset % 64);
        bits.get(w).is_some_and(|x| x & (1 << b) != 0)
    }

    /// Unmark `offset`; true if it was marked.
    pub fn clear(bits: &mut [u64], offset: u32) -> bool {
        let (w, b) = ((offset / 64) as usize, offset % 64);
        bits.get_mut(w).is_some_and(|x| {
            let was = *x & (1 << b) != 0;
            *x &= !(1 << b);
            was
        })
    }

    /// Slide the window by `n` packets (the cumulative point advanced by n).
    pub fn shift(bits: &mut Vec<u64>, n: u32) {
        let words = (n / 64) as usize;
        let rest = n % 64;
        if words >= bits.len() {
            bits.clear();
            return;
        }
        bits.drain(..words);
        if rest > 0 {
            for i in 0..bits.len() {
                let hi = bits.get(i + 1).copied().unwrap_or(0);
                bits[i] = (bits[i] >> rest) | (hi << (64 - rest));
            }
        }
        while bits.last() == Some(&0) {
            bits.pop();
        }
    }

    /// Number of leading marked packets (how far the cumulative point can advance).
    pub fn leading_ones(bits: &[u64]) -> u32 {
        let mut n = 0;
        for &w in bits {
            if w == u64::MAX {
                n += 64;
            } else {
                return n + w.trailing_ones();
            }
        }
        n
    }

    /// Number of marked packets.
    pub fn count(bits: &[u64]) -> u32 {
        bits.iter().map(|w| w.count_ones()).sum()
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn window_slides() {
            let mut b = Vec::new();
            assert!(set(&mut b, 0));
            assert!(set(&mut b, 1));
            assert!(!set(&mut b, 1));
            assert!(set(&mut b, 70));
            assert_eq!(leading_ones(&b), 2);
            assert_eq!(count(&b), 3);
            shift(&mut b, 3);
            assert!(get(&b, 67) && !get(&b, 0));
            assert_eq!(count(&b), 1);
            shift(&mut b, 68);
            assert!(b.is_empty());
        }

        #[test]
        fn a_cleared_mark_says_whether_it_was_there() {
            let mut b = Vec::new();
            assert!(!clear(&mut b, 5), "beyond the words held");
            set(&mut b, 5);
            set(&mut b, 69);
            assert!(clear(&mut b, 69) && !get(&b, 69) && get(&b, 5));
            assert!(!clear(&mut b, 69));
        }
    }
}
