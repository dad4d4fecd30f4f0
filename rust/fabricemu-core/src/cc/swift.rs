//! Swift's sender (Kumar et al., "Swift: Delay is Simple and Effective for Congestion Control in
//! the Datacenter", SIGCOMM 2020), window-based over the NIC:
//!
//! - target = base_target + hops x hop_scale + flow scaling, where flow scaling adds
//!   a/sqrt(cwnd) + b, clamped to [0, fs_range], with a and b chosen so it is fs_range at
//!   fs_min_cwnd and 0 at fs_max_cwnd (smaller windows, i.e. more competing flows, get more
//!   queueing allowance). Hops are the switches on the flow's path, known from the fabric when
//!   the flow starts (not counted from packets).
//! - delay < target: additive increase, cwnd += ai x acked / cwnd (cwnd >= 1) or ai x acked
//!   (cwnd < 1); otherwise, at most once per RTT, cwnd *= max(1 - beta (delay - target) / delay,
//!   1 - max_mdf).
//! - A loss report cuts by max_mdf (once per RTT); timeouts cut by max_mdf, five in a row reset
//!   to the minimum window.
//! - cwnd < 1 packet: one packet in flight, paced at one per RTT / cwnd.
//!
//! The delay is the fabric delay: the RTT of the flow's timed packet (one per round trip) minus
//! the endpoint delay, which is zero here (the NIC acknowledges at once; fabricemu models no
//! host or NIC processing delay).

use super::dctcp::window_rate;
use super::{Ack, Controller, FlowPath, RateSample, Reaction, SignalStats};
use crate::cc::swift_config::SwiftSpec;
use crate::units::Time;

/// Consecutive timeouts after which the window drops to its minimum (the paper's
/// RETX_RESET_THRESHOLD).
const RETX_RESET_THRESHOLD: u32 = 5;

/// Swift as a [`Controller`].
#[derive(Debug, Clone, Copy)]
pub struct SwiftCc(pub SwiftSpec);

#[derive(Debug, Clone, Copy, Default)]
pub struct Swift {
    line: u64,
    /// Congestion window, packets (may be below 1).
    pub cwnd: f64,
    max_cwnd: f64,
    hops: u32,
    /// Latest fabric delay sample, if any yet.
    pub delay: Option<Time>,
    /// Latest RTT (the base RTT before the first sample).
    rtt: Time,
    last_decrease: Time,
    retransmits: u32,
    /// The pacing rate last given to the NIC.
    rate: u64,
    /// The delay samples since the flow's previous rates row.
    stats: SignalStats,
}

impl SwiftCc {
    /// The target delay at window `cwnd` for a path of `hops` switches.
    pub fn target(&self, cwnd: f64, hops: u32) -> Time {
        let s = &self.0;
        let a = s.fs_range_ps / (1.0 / s.fs_min_cwnd.sqrt() - 1.0 / s.fs_max_cwnd.sqrt());
        let b = -a / s.fs_max_cwnd.sqrt();
        let fs = (a / cwnd.max(1e-9).sqrt() + b).clamp(0.0, s.fs_range_ps);
        s.base_target_ps + hops as Time * s.hop_scale_ps + fs as Time
    }

    fn clamp_and_react(&self, s: &mut Swift) -> Reaction {
        let spec = &self.0;
        s.cwnd = s.cwnd.clamp(spec.min_cwnd, s.max_cwnd);
        // Below one packet: one packet per RTT / cwnd.
        let rate = if s.cwnd >= 1.0 {
            s.line
        } else {
            let gap = s.rtt as f64 / s.cwnd;
            ((spec.wire_bytes as f64 * 8.0 * 1e12 / gap) as u64).clamp(1, s.line)
        };
        let rate_bps = (rate != s.rate).then_some(rate);
        s.rate = rate;
        Reaction {
            rate_bps,
            window_bytes: Some((s.cwnd.max(1.0) * spec.mss_bytes as f64) as u64),
            ..Reaction::default()
        }
    }
}

impl Controller for SwiftCc {
    type Sender = Swift;
    type Receiver = ();
    const REPORTS_RATES: bool = true;
    const SEES_ACKS: bool = true;
    const NEEDS_PATH: bool = true;

    fn sender(&self, line_bps: u64, _now: Time) -> Swift {
        Swift {
            line: line_bps,
            rate: line_bps,
            ..Swift::default()
        }
    }

    fn receiver(&self) {}

    fn on_start(&self, s: &mut Swift, now: Time, path: &FlowPath) -> Reaction {
        let spec = &self.0;
        let bdp = s.line as f64 * path.base_rtt_ps as f64 / 8e12 / spec.wire_bytes as f64;
        s.hops = path.switch_hops;
        s.rtt = path.base_rtt_ps.max(1);
        s.max_cwnd = spec.max_cwnd.unwrap_or(4.0 * bdp.max(1.0));
        s.cwnd = spec.initial_cwnd.unwrap_or(bdp.max(1.0));
        s.last_decrease = now;
        self.clamp_and_react(s)
    }

    fn on_ack(&self, s: &mut Swift, ack: &Ack<'_>) -> Reaction {
        if let Some(rtt) = ack.rtt {
            s.delay = Some(rtt);
            s.rtt = rtt.max(1);
            s.stats.delay(rtt);
        }
        if ack.newly_acked == 0 {
            return Reaction::default();
        }
        s.retransmits = 0;
        let Some(delay) = s.delay else {
            return Reaction::default();
        };
        let spec = &self.0;
        let target = self.target(s.cwnd, s.hops);
        let n = ack.newly_acked as f64;
        if delay < target {
            if s.cwnd >= 1.0 {
                s.cwnd += spec.ai / s.cwnd * n;
            } else {
                s.cwnd += spec.ai * n;
            }
        } else if ack.now - s.last_decrease >= s.rtt {
            let f = 1.0 - spec.beta * (delay - target) as f64 / delay as f64;
            s.cwnd *= f.max(1.0 - spec.max_mdf);
            s.last_decrease = ack.now;
        } else {
            return Reaction::default();
        }
        self.clamp_and_react(s)
    }

    fn on_loss(&self, s: &mut Swift, timeout: bool, now: Time) -> Reaction {
        let spec = &self.0;
        if timeout {
            s.retransmits += 1;
            if s.retransmits >= RETX_RESET_THRESHOLD {
                s.cwnd = spec.min_cwnd;
            } else {
                s.cwnd *= 1.0 - spec.max_mdf;
            }
            s.last_decrease = now;
        } else if now - s.last_decrease >= s.rtt {
            s.cwnd *= 1.0 - spec.max_mdf;
            s.last_decrease = now;
        }
        self.clamp_and_react(s)
    }

    fn rate_sample(&self, s: &mut Swift, _now: Time) -> Option<RateSample> {
        let w = s.cwnd * self.0.mss_bytes as f64;
        let mut r = RateSample {
            rate_bps: window_rate(w, s.rtt, s.line).min(s.rate),
            window_bytes: Some(w as u64),
            delay_ps: s.delay,
            target_delay_ps: Some(self.target(s.cwnd, s.hops)),
            ..RateSample::default()
        };
        s.stats.take_delay(&mut r);
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::swift_config::SwiftFile;

    const US: u64 = 1_000_000;

    fn cc() -> SwiftCc {
        SwiftCc(SwiftFile::validate(None, 1000, 1062).unwrap())
    }

    fn ack(now: Time, rtt: Option<Time>) -> Ack<'static> {
        Ack {
            now,
            newly_acked: 1,
            acked: 1,
            next_seq: 2,
            rtt,
            ecn_echo: false,
            int: &[],
        }
    }

    #[test]
    fn flow_scaling_spans_its_range_between_the_window_bounds() {
        let c = cc();
        // base 20us + 3 hops x 1us; flow scaling 5 x 20us at 0.1 packets, 0 at 100.
        assert_eq!(c.target(100.0, 3), 23 * US);
        assert_eq!(c.target(1000.0, 3), 23 * US);
        let at_min = c.target(0.1, 3);
        assert!((at_min as i64 - 123 * US as i64).abs() < 10, "{at_min}");
        assert_eq!(c.target(0.01, 3), at_min);
        assert!(c.target(10.0, 3) > 23 * US && c.target(10.0, 3) < at_min);
    }

    #[test]
    fn increases_below_target_cuts_once_per_rtt_above_and_paces_below_one_packet() {
        let c = cc();
        let mut s = c.sender(100_000_000_000, 0);
        c.on_start(
            &mut s,
            0,
            &FlowPath {
                base_rtt_ps: 10 * US,
                switch_hops: 3,
            },
        );
        let w0 = s.cwnd;
        c.on_ack(&mut s, &ack(10 * US, Some(10 * US)));
        assert!((s.cwnd - w0 - 1.0 / w0).abs() < 1e-9);
        // Delay twice the target: cut by beta x 1/2 = 0.4 (above max_mdf's floor of 0.5 x).
        let w1 = s.cwnd;
        let target = c.target(w1, 3);
        c.on_ack(&mut s, &ack(100 * US, Some(2 * target)));
        assert!(
            (s.cwnd - w1 * 0.6).abs() < 1e-6,
            "{} vs {}",
            s.cwnd,
            w1 * 0.6
        );
        // Within one RTT of that cut: no second cut.
        let w2 = s.cwnd;
        c.on_ack(&mut s, &ack(101 * US, None));
        assert_eq!(s.cwnd, w2);
        // Far above target: at most max_mdf per RTT, down to below one packet, then paced.
        let mut t = 101 * US;
        for _ in 0..20 {
            t += 1000 * US;
            c.on_ack(&mut s, &ack(t, Some(1000 * US)));
        }
        assert!(s.cwnd < 1.0);
        let r = c.clamp_and_react(&mut s);
        assert_eq!(r.window_bytes, Some(1000));
        assert!(s.rate < 100_000_000_000 / 10, "paced: {}", s.rate);
    }
}
