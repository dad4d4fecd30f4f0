//! Receiver-driven credits (Ultra Ethernet's receiver credit-based congestion control, after
//! EQDS: Olteanu et al., "An edge-queued datagram service for all datacenter traffic", NSDI 2022,
//! and NDP: Handley et al., SIGCOMM 2017). A sender may send an unsolicited first window (default
//! one bandwidth-delay product of its path), then one packet (new or resent) per credit its
//! receiver grants. The receiver learns of a flow, and of its size, from its first packet; it
//! then owes the flow a credit for every packet beyond the unsolicited ones, and one more for
//! every trimmed packet (the header re-credits its resend). Each receiving port has a credit
//! pacer that grants one credit (a PULL packet) per full data packet's serialisation time at
//! its link rate, round robin over the flows it owes: the port's senders share its rate, and the
//! data in the network after the first window is about one bandwidth-delay product however many
//! senders there are. An unsolicited packet that arrives takes one of the pacer's slots (as
//! EQDS's pacer counts them), so the first windows drain rather than stand in the queue. A lost
//! credit is recovered by the retransmission timer, which grants the
//! packets it resends.
//!
//! `[transport.credits]`:
//!
//! | key | default | meaning |
//! | --- | --- | --- |
//! | `mode` | `"receiver"` | `"receiver"`: credits as above; `"sender"`: none (the sender's congestion control alone) |
//! | `unsolicited` | one BDP | bytes a flow sends before its first credit (rounded up to whole packets, at least one) |
//! | `rate` | 1.0 | the pacer grants credits at this fraction of the receiving port's rate |

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::config::check::{fraction, positive_size, Res};
use crate::config::values::Size;
use crate::ids::{FlowId, IdVec, PortId};
use crate::units::{serialisation_ps, Time};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CreditMode {
    Sender,
    Receiver,
}

/// `[transport.credits]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreditsFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<CreditMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsolicited: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
}

/// Keys of `[transport.credits]` whose absence from a normalised scenario is itself the setting.
pub const ABSENT_MEANS: &[(&str, &str)] = &[(
    "transport.credits.unsolicited",
    "one bandwidth-delay product of each flow's path",
)];

/// Receiver credits, validated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CreditSpec {
    /// None: one BDP of the flow's path at its line rate.
    pub unsolicited_bytes: Option<u64>,
    /// Fraction of the receiving port's rate the pacer grants.
    pub rate: f64,
}

impl CreditsFile {
    /// `[transport.credits]` with every default written out: `mode = "sender"` alone when off;
    /// an absent `unsolicited` means one bandwidth-delay product of each flow's path.
    pub fn normalised(spec: Option<&CreditSpec>) -> CreditsFile {
        match spec {
            None => CreditsFile {
                mode: Some(CreditMode::Sender),
                unsolicited: None,
                rate: None,
            },
            Some(c) => CreditsFile {
                mode: Some(CreditMode::Receiver),
                unsolicited: c.unsolicited_bytes.map(Size),
                rate: Some(c.rate),
            },
        }
    }

    /// The credit mode of `[transport.credits]` (None: senders need no credits).
    pub fn validate(c: Option<&CreditsFile>) -> Res<Option<CreditSpec>> {
        let Some(c) = c else {
            return Ok(None);
        };
        let unsolicited_bytes = match c.unsolicited {
            Some(s) => Some(positive_size("transport.credits.unsolicited", s.0)?),
            None => None,
        };
        let rate = match c.rate {
            Some(r) => fraction("transport.credits.rate", r, 1e-6, 1.0)?,
            None => 1.0,
        };
        Ok(match c.mode.unwrap_or(CreditMode::Receiver) {
            CreditMode::Sender => None,
            CreditMode::Receiver => Some(CreditSpec {
                unsolicited_bytes,
                rate,
            }),
        })
    }
}

/// The credit state of a run: every flow's credits at its sender and what its receiver owes it,
/// and every receiving port's round robin of flows owed credits and its pacer.
#[derive(Debug, Clone)]
pub struct Credits {
    pub spec: CreditSpec,
    /// Per flow: packets the sender may still send.
    pub credit: IdVec<FlowId, u32>,
    /// Per flow: credits its receiver still owes it (counted from the flow's first arrival).
    pub owed: IdVec<FlowId, u32>,
    /// Per flow: its unsolicited packets the receiver has not seen yet. Each that arrives whole
    /// takes a slot of the receiving port's pacer (EQDS: the pacer grants line rate minus the
    /// unsolicited data already on its way), so the first windows drain instead of standing.
    pub unsolicited_left: IdVec<FlowId, u32>,
    /// Per flow: it is in its receiving port's round robin.
    pub in_ring: IdVec<FlowId, bool>,
    /// Per host port: flows owed credits, served round robin.
    pub ring: IdVec<PortId, VecDeque<FlowId>>,
    /// Per host port: when the pacer may grant next; whether its event is pending.
    pub next_pull: IdVec<PortId, Time>,
    pub armed: IdVec<PortId, bool>,
    /// Per host port: the time between credits.
    pub interval: IdVec<PortId, Time>,
}

impl Credits {
    /// Credits for `flows` flows over host ports with these rates; `packet_bytes`: wire bytes of a
    /// full data packet.
    pub fn new(
        spec: CreditSpec,
        flows: usize,
        host_port_rates: impl Iterator<Item = u64>,
        packet_bytes: u64,
    ) -> Self {
        let interval: IdVec<PortId, Time> = host_port_rates
            .map(|r| serialisation_ps(packet_bytes, ((r as f64 * spec.rate) as u64).max(1)))
            .collect();
        let n = interval.len();
        Self {
            spec,
            credit: IdVec::from_elem(0, flows),
            owed: IdVec::from_elem(0, flows),
            unsolicited_left: IdVec::from_elem(0, flows),
            in_ring: IdVec::from_elem(false, flows),
            ring: (0..n).map(|_| VecDeque::new()).collect(),
            next_pull: IdVec::from_elem(0, n),
            armed: IdVec::from_elem(false, n),
            interval,
        }
    }

    /// Per-flow state for `flows` flows in all (flows appended during the run).
    pub fn grow(&mut self, flows: usize) {
        let n = flows.saturating_sub(self.credit.len());
        for _ in 0..n {
            self.credit.push(0);
            self.owed.push(0);
            self.unsolicited_left.push(0);
            self.in_ring.push(false);
        }
    }

    /// The first window of a flow, in packets of `mtu`, over a path of `bdp_bytes`.
    pub fn unsolicited_packets(&self, bdp_bytes: u64, mtu: u64) -> u32 {
        let bytes = self.spec.unsolicited_bytes.unwrap_or(bdp_bytes);
        bytes.div_ceil(mtu).clamp(1, u32::MAX as u64) as u32
    }
}
