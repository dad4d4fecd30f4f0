//! Packet trimming (Ultra Ethernet, after NDP: Handley et al., "Re-architecting datacenter
//! networks and stacks for low latency and high performance", SIGCOMM 2017; the UEC 1.0
//! specification's optional trimming): when a data packet would be dropped at a switch, or its
//! class's queue is above the trimming threshold, the switch cuts its payload and forwards the
//! header (`size` bytes on the wire) in a high-priority class. The receiver then NACKs exactly that
//! packet and the sender resends it (selective recovery), long before a retransmission timeout.
//!
//! `[switch.trimming]`:
//!
//! | key | default | meaning |
//! | --- | --- | --- |
//! | `enabled` | true | trim at all |
//! | `threshold` | none | also trim when the data class's queue at the egress port holds more than this (none: trim only what would be dropped) |
//! | `size` | 64 B | wire bytes of a trimmed packet (UEC: the headers up to the transport header) |
//! | `priority` | `transport.control_priority` | class the trimmed header is forwarded in |
//!
//! A trimmed packet is trimmed once (later switches forward it as a header); a header that cannot
//! be admitted either is dropped (the retransmission timer recovers it).

use serde::{Deserialize, Serialize};

use crate::config::check::{positive_size, Res};
use crate::config::values::Size;
use crate::config::{LossRecovery, ScenarioError, TransportSpec};

/// `[switch.trimming]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrimmingFile {
    #[serde(default = "enabled")]
    pub enabled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
}

fn enabled() -> bool {
    true
}

/// Default wire size of a trimmed packet: Ethernet, IP, UDP and the UET/RoCE transport header
/// (the 62 B of `transport.header`, rounded up to the 64 B minimum frame).
pub const DEFAULT_TRIMMED_BYTES: u64 = 64;

/// Trimming, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrimmingSpec {
    /// Trim when the data class's queue holds more than this (None: only instead of a drop).
    pub threshold_bytes: Option<u64>,
    /// Wire bytes of a trimmed packet.
    pub trimmed_bytes: u32,
    /// Class of trimmed headers.
    pub priority: u8,
}

impl TrimmingFile {
    /// Whether the table turns trimming on.
    pub fn on(t: Option<&TrimmingFile>) -> bool {
        t.is_some_and(|t| t.enabled)
    }

    /// Trimming for packets of transport `t` (None if the table is absent or disabled).
    pub fn validate(t: Option<&TrimmingFile>, tr: &TransportSpec) -> Res<Option<TrimmingSpec>> {
        let Some(f) = t.filter(|f| f.enabled) else {
            return Ok(None);
        };
        if tr.loss_recovery == LossRecovery::GoBackN {
            return Err(ScenarioError::at(
                "transport.loss_recovery",
                "packet trimming (switch.trimming) needs selective loss recovery: the receiver \
                 NACKs each trimmed packet and the sender resends just that one (go_back_n would \
                 resend everything after it); use loss_recovery = \"selective\" or leave it unset",
            ));
        }
        let full = tr.mtu_bytes + tr.header_bytes;
        let size = f.size.map_or(DEFAULT_TRIMMED_BYTES, |s| s.0);
        positive_size("switch.trimming.size", size)?;
        if size >= full {
            return Err(ScenarioError::at(
                "switch.trimming.size",
                format!(
                    "a trimmed packet of {size} B is no smaller than a full data packet \
                     ({full} B: transport.mtu + transport.header)"
                ),
            ));
        }
        if let Some(th) = f.threshold {
            positive_size("switch.trimming.threshold", th.0)?;
        }
        let priority = match f.priority {
            None => tr.control_priority,
            Some(p) if (0..8).contains(&p) => p as u8,
            Some(p) => {
                return Err(ScenarioError::at(
                    "switch.trimming.priority",
                    format!("expected a priority in 0..=7, found {p}"),
                ))
            }
        };
        if priority == tr.data_priority {
            return Err(ScenarioError::at(
                "switch.trimming.priority",
                "trimmed headers need a class of their own, above the data (transport.priority)",
            ));
        }
        Ok(Some(TrimmingSpec {
            threshold_bytes: f.threshold.map(|s| s.0),
            trimmed_bytes: size as u32,
            priority,
        }))
    }
}

impl TrimmingSpec {
    /// Whether a data packet arriving at a queue whose data class holds `class_bytes` is trimmed
    /// instead of queued whole; `admitted`: the buffer would take it whole.
    #[inline(always)]
    pub fn trims(&self, admitted: bool, class_bytes: u64) -> bool {
        !admitted || self.threshold_bytes.is_some_and(|t| class_bytes > t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_what_would_drop_and_above_the_threshold() {
        let only_drops = TrimmingSpec {
            threshold_bytes: None,
            trimmed_bytes: 64,
            priority: 7,
        };
        assert!(only_drops.trims(false, 0));
        assert!(!only_drops.trims(true, u64::MAX));
        let at = TrimmingSpec {
            threshold_bytes: Some(10_000),
            ..only_drops
        };
        assert!(!at.trims(true, 10_000));
        assert!(at.trims(true, 10_001));
        assert!(at.trims(false, 0));
    }
}
