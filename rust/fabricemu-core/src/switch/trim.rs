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
                "trimmed headers need a class of their own, not the data's (transport.priority)",
            ));
        }
        Ok(Some(TrimmingSpec {
            threshold_bytes: f.threshold.map(|s| s.0),
            trimmed_bytes: size as u32,
            priority,
        }))
    }
}

impl TrimmingFile {
    /// `[switch.trimming]` with every default written out (`{ enabled = false }` when off); an
    /// absent `threshold` means: trim only what would be dropped.
    pub fn normalised(spec: Option<&TrimmingSpec>) -> TrimmingFile {
        match spec {
            None => TrimmingFile {
                enabled: false,
                threshold: None,
                size: None,
                priority: None,
            },
            Some(s) => TrimmingFile {
                enabled: true,
                threshold: s.threshold_bytes.map(Size),
                size: Some(Size(s.trimmed_bytes as u64)),
                priority: Some(s.priority as i64),
            },
        }
    }
}

/// Keys of `[switch.trimming]` whose absence from a normalised scenario is itself the setting.
pub const ABSENT_MEANS: &[(&str, &str)] = &[(
    "switch.trimming.threshold",
    "trim only what would be dropped",
)];

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

    /// The rest of a valid scenario, after the lines under test.
    const TAIL: &str = "[topology]\nkind = \"fat_tree\"\nk = 4\n\
        [[workload]]\nkind = \"incast\"\nreceiver = 0\nsenders = 2\nsize = \"1KB\"\n";

    fn parse(text: &str) -> Result<crate::scenario::Scenario, ScenarioError> {
        crate::scenario::parse_toml(&format!("{text}{TAIL}"), "s.toml").map(|(_, s)| s)
    }

    fn err(text: &str) -> String {
        match parse(text) {
            Ok(_) => panic!("expected an error for {text}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn trimming_defaults_to_selective_recovery_and_refuses_go_back_n() {
        let s = parse("[switch]\ntrimming = { threshold = \"16KB\" }\n").unwrap();
        assert_eq!(s.transport.loss_recovery, LossRecovery::Selective);
        let t = s.switch.trimming.unwrap();
        assert_eq!(
            (t.threshold_bytes, t.trimmed_bytes, t.priority),
            (Some(16_000), 64, 7)
        );
        let s = parse("[switch]\ntrimming = { enabled = false }\n").unwrap();
        assert!(s.switch.trimming.is_none());
        assert_eq!(s.transport.loss_recovery, LossRecovery::GoBackN);
        let e = err("[switch]\ntrimming = {}\n[transport]\nloss_recovery = \"go_back_n\"\n");
        assert!(
            e.starts_with("s.toml:4:") && e.contains("transport.loss_recovery"),
            "{e}"
        );
    }

    #[test]
    fn bad_trimming_settings_name_their_key() {
        let e = err("[switch]\npfc = { enabled = true }\ntrimming = {}\n");
        assert!(
            e.contains("switch.trimming") && e.contains("lossless"),
            "{e}"
        );
        let e = err("[switch]\ntrimming = { size = \"5000B\" }\n");
        assert!(e.contains("switch.trimming.size"), "{e}");
        let e = err("[switch]\ntrimming = { priority = 3 }\n");
        assert!(e.contains("switch.trimming.priority"), "{e}");
        let e = err("[switch]\ntrimming = { priority = 9 }\n");
        assert!(e.contains("switch.trimming.priority"), "{e}");
        let e = err("[switch]\ntrimming = { threshold = \"0B\" }\n");
        assert!(e.contains("switch.trimming.threshold"), "{e}");
    }

    #[test]
    fn nscc_needs_ecn_and_credits_check_their_values() {
        let e = err("[transport]\ncc = \"nscc\"\n");
        assert!(e.contains("switch.ecn") && e.contains("nscc"), "{e}");
        let ok = "[switch]\necn = { kmin = \"10KB\" }\n[transport]\ncc = \"nscc\"\n";
        assert!(parse(ok).is_ok());
        let e = err(&format!("{ok}nscc = {{ md = 2.0 }}\n"));
        assert!(e.contains("transport.nscc.md"), "{e}");
        let e = err("[transport]\ncredits = { rate = 0.0 }\n");
        assert!(e.contains("transport.credits.rate"), "{e}");
        let e = err("[transport]\ncredits = { mode = \"both\" }\n");
        assert!(e.contains("transport.credits.mode"), "{e}");
        let s = parse("[transport]\ncredits = { mode = \"sender\" }\n").unwrap();
        assert!(s.transport.credits.is_none());
        let s = parse("[transport.credits]\nunsolicited = \"8KiB\"\n").unwrap();
        assert_eq!(s.transport.credits.unwrap().unsolicited_bytes, Some(8192));
    }
}
