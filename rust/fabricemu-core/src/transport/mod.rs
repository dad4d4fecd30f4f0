//! Queue pairs on NICs: a flow is segmented into MTU packets; the receiver acknowledges cumulatively
//! and asks for a go-back-N retransmission when it sees a gap (as RoCE NICs do); a timer recovers a
//! lost tail. Congestion control plugs in through the flow's sending rate (line rate with `cc = none`).

pub mod ideal;

use crate::units::Time;

/// No time set.
pub const NEVER: Time = Time::MAX;
/// No barrier.
pub const NO_BARRIER: u32 = u32::MAX;

/// Sender and receiver state of one flow.
#[derive(Debug, Clone)]
pub struct Flow {
    pub src: u32,
    pub dst: u32,
    pub size_bytes: u64,
    /// When the flow starts (NEVER until a dependency releases it).
    pub start: Time,
    pub num_packets: u32,
    /// Payload of the last packet (the others carry a full MTU).
    pub last_payload: u32,
    pub header_fwd: u64,
    pub header_rev: u64,
    pub workload: u32,
    /// Barrier this flow counts toward when it finishes.
    pub completes: u32,

    // Sender.
    pub next_seq: u32,
    /// Highest sequence ever sent + 1 (anything below it sent again is a retransmission).
    pub high_seq: u32,
    pub acked: u32,
    pub in_nic_ring: bool,
    pub rto_deadline: Time,
    pub rto_armed: bool,
    pub started: bool,

    // Receiver.
    pub expected: u32,
    /// `expected` value a NACK was last sent for (one NACK per gap).
    pub nacked_at: u32,
    pub finish: Time,

    // Counters.
    pub packets_sent: u64,
    pub retransmits: u64,
    pub drops: u64,
}

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

    #[inline]
    pub fn finished(&self) -> bool {
        self.finish != NEVER
    }

    /// Packets the sender still has to put on the wire (before any loss is known).
    #[inline]
    pub fn has_data_to_send(&self) -> bool {
        self.next_seq < self.num_packets
    }
}

/// Split `size` bytes into MTU packets: (count, payload of the last).
pub fn segment(size: u64, mtu: u64) -> (u32, u32) {
    let n = size.div_ceil(mtu);
    let last = size - (n - 1) * mtu;
    (n as u32, last as u32)
}
