//! NSCC, Ultra Ethernet's network-signalled congestion control (UEC 1.0 specification, the
//! sender-side "NSCC" of the Ultra Ethernet Transport; the control law follows the SMaRTT/FASTFLOW
//! design its authors published), window-based over the NIC. The model implemented here:
//!
//! - Signals, per ACK: the ECN echo (a CE-marked packet arrived since the previous ACK) and the
//!   queueing delay, the latest RTT sample (one timed packet per round trip) minus the path's
//!   base RTT (known from the fabric when the flow starts).
//! - The four quadrants of (ECN, delay vs `target_qdelay`), with `acked` the newly acknowledged
//!   bytes:
//!   - no mark, delay below target: proportional increase, cwnd += pi x (target - delay) /
//!     target x acked, plus the fair increase;
//!   - no mark, delay at or above target (the queue is not ours, or it drains): fair increase
//!     only, cwnd += fi x MTU x acked / cwnd (fi packets per RTT);
//!   - marked, delay at or above target: multiplicative decrease, at most once per RTT, cwnd *=
//!     max(1 - md x (delay - target) / delay, 1 - max_md);
//!   - marked, delay below target (a transient mark, or a path that spraying leaves): no change.
//! - A trimmed packet's NACK cuts by max_md, at most once per RTT; a timeout sets the minimum
//!   window.
//! - The window stays within [min_window, max_window]; the NIC sends at line rate while it
//!   allows.
//!
//! Not modelled: NSCC's entropy (path) changes on marks (fabricemu sprays per packet instead),
//! the receiver's `rcv_cwnd_pend` pushback, and batching of the adjustments.

use super::dctcp::window_rate;
use super::{Ack, Controller, FlowPath, RateSample, Reaction, SignalStats};
use crate::cc::nscc_config::NsccSpec;
use crate::units::Time;

/// NSCC as a [`Controller`].
#[derive(Debug, Clone, Copy)]
pub struct NsccCc(pub NsccSpec);

#[derive(Debug, Clone, Copy, Default)]
pub struct Nscc {
    line: u64,
    /// Congestion window, payload bytes.
    pub cwnd: f64,
    min_cwnd: f64,
    max_cwnd: f64,
    base_rtt: Time,
    /// The queueing-delay target.
    pub target: Time,
    /// Latest queueing-delay sample, if any yet.
    pub delay: Option<Time>,
    /// Latest RTT (the base RTT before the first sample).
    rtt: Time,
    last_decrease: Time,
    /// The delay samples and marks since the flow's previous rates row.
    stats: SignalStats,
}

impl NsccCc {
    fn window(&self, s: &mut Nscc) -> Reaction {
        s.cwnd = s.cwnd.clamp(s.min_cwnd, s.max_cwnd);
        Reaction {
            window_bytes: Some(s.cwnd as u64),
            ..Reaction::default()
        }
    }

    /// The queueing-delay target of a path with base RTT `base_rtt`.
    pub fn target(&self, base_rtt: Time) -> Time {
        self.0.target_qdelay_ps.unwrap_or(base_rtt * 3 / 4).max(1)
    }
}

impl Controller for NsccCc {
    type Sender = Nscc;
    type Receiver = ();
    const REPORTS_RATES: bool = true;
    const SEES_ACKS: bool = true;
    const NEEDS_PATH: bool = true;

    fn sender(&self, line_bps: u64, _now: Time) -> Nscc {
        Nscc {
            line: line_bps,
            ..Nscc::default()
        }
    }

    fn receiver(&self) {}

    fn on_start(&self, s: &mut Nscc, now: Time, path: &FlowPath) -> Reaction {
        let spec = &self.0;
        let bdp = (s.line as u128 * path.base_rtt_ps as u128 / 8_000_000_000_000) as f64;
        s.base_rtt = path.base_rtt_ps.max(1);
        s.rtt = s.base_rtt;
        s.target = self.target(s.base_rtt);
        s.min_cwnd = spec.min_window_bytes as f64;
        s.max_cwnd = spec
            .max_window_bytes
            .map_or(1.5 * bdp, |w| w as f64)
            .max(s.min_cwnd);
        s.cwnd = spec.initial_window_bytes.map_or(bdp, |w| w as f64);
        s.last_decrease = now;
        s.delay = None;
        self.window(s)
    }

    fn on_ack(&self, s: &mut Nscc, ack: &Ack<'_>) -> Reaction {
        if let Some(rtt) = ack.rtt {
            s.rtt = rtt.max(1);
            let d = rtt.saturating_sub(s.base_rtt);
            s.delay = Some(d);
            s.stats.delay(d);
        }
        if ack.newly_acked == 0 {
            return Reaction::default();
        }
        s.stats.acked(ack.newly_acked, ack.ecn_echo);
        let spec = &self.0;
        let acked = (ack.newly_acked as u64 * spec.mss_bytes) as f64;
        let delay = s.delay.unwrap_or(0);
        let fair = spec.fair_increase * spec.mss_bytes as f64 * acked / s.cwnd.max(1.0);
        match (ack.ecn_echo, delay >= s.target) {
            (false, false) => {
                let room = (s.target - delay) as f64 / s.target as f64;
                s.cwnd += spec.proportional_increase * room * acked + fair;
            }
            (false, true) => s.cwnd += fair,
            (true, true) => {
                if ack.now - s.last_decrease < s.rtt {
                    return Reaction::default();
                }
                let f = 1.0 - spec.md * (delay - s.target) as f64 / delay.max(1) as f64;
                s.cwnd *= f.max(1.0 - spec.max_md);
                s.last_decrease = ack.now;
            }
            (true, false) => return Reaction::default(),
        }
        self.window(s)
    }

    fn on_loss(&self, s: &mut Nscc, timeout: bool, now: Time) -> Reaction {
        if timeout {
            s.cwnd = s.min_cwnd;
        } else if now - s.last_decrease >= s.rtt {
            s.cwnd *= 1.0 - self.0.max_md;
            s.last_decrease = now;
        } else {
            return Reaction::default();
        }
        self.window(s)
    }

    fn rate_sample(&self, s: &mut Nscc, _now: Time) -> Option<RateSample> {
        let mut r = RateSample {
            rate_bps: window_rate(s.cwnd, s.rtt, s.line),
            window_bytes: Some(s.cwnd as u64),
            delay_ps: s.delay,
            target_delay_ps: Some(s.target),
            ..RateSample::default()
        };
        s.stats.take_delay(&mut r);
        s.stats.take_ecn(&mut r);
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::nscc_config::NsccFile;

    const US: u64 = 1_000_000;

    fn cc() -> NsccCc {
        NsccCc(NsccFile::validate(None, 1000).unwrap())
    }

    fn ack(now: Time, rtt: Option<Time>, ecn: bool) -> Ack<'static> {
        Ack {
            now,
            newly_acked: 1,
            acked: 1,
            next_seq: 2,
            rtt,
            ecn_echo: ecn,
            int: &[],
        }
    }

    /// A flow at 8 Gbps over a 10us base RTT: a BDP of 10 000 bytes, target 7.5us.
    fn started() -> (NsccCc, Nscc) {
        let c = cc();
        let mut s = c.sender(8_000_000_000, 0);
        c.on_start(
            &mut s,
            0,
            &FlowPath {
                base_rtt_ps: 10 * US,
                switch_hops: 1,
            },
        );
        (c, s)
    }

    #[test]
    fn the_four_quadrants() {
        let (c, mut s) = started();
        assert_eq!(s.cwnd, 10_000.0);
        assert_eq!(s.target, 7_500_000);
        // No mark, no queueing: proportional (0.5 x 1 x 1000) plus fair (1000 x 1000 / 10000).
        c.on_ack(&mut s, &ack(10 * US, Some(10 * US), false));
        assert!((s.cwnd - 10_600.0).abs() < 1e-9, "{}", s.cwnd);
        // No mark, delay above target: fair increase only.
        let w = s.cwnd;
        c.on_ack(&mut s, &ack(11 * US, Some(20 * US), false));
        assert!((s.cwnd - w - 1000.0 * 1000.0 / w).abs() < 1e-9);
        // Marked, below target: nothing.
        let w = s.cwnd;
        c.on_ack(&mut s, &ack(12 * US, Some(12 * US), true));
        assert_eq!(s.cwnd, w);
        // Marked, delay 15us above base (twice the target): x (1 - 0.8 x 1/2) = 0.6.
        c.on_ack(&mut s, &ack(30 * US, Some(25 * US), true));
        assert!((s.cwnd - w * 0.6).abs() < 1e-6, "{} vs {}", s.cwnd, w * 0.6);
        // Within an RTT of that cut: no second cut.
        let w = s.cwnd;
        c.on_ack(&mut s, &ack(31 * US, None, true));
        assert_eq!(s.cwnd, w);
    }

    #[test]
    fn trims_cut_once_per_rtt_and_a_timeout_resets_to_the_minimum() {
        let (c, mut s) = started();
        c.on_loss(&mut s, false, 20 * US);
        assert_eq!(s.cwnd, 5_000.0);
        c.on_loss(&mut s, false, 21 * US);
        assert_eq!(s.cwnd, 5_000.0);
        c.on_loss(&mut s, true, 22 * US);
        assert_eq!(s.cwnd, 1_000.0);
        // The window never exceeds 1.5 BDP.
        for i in 0..1000 {
            c.on_ack(&mut s, &ack(30 * US + i, Some(10 * US), false));
        }
        assert_eq!(s.cwnd, 15_000.0);
    }
}
