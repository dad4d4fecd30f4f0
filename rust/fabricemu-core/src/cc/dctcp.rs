//! DCTCP's sender (Alizadeh et al., "Data Center TCP (DCTCP)", SIGCOMM 2010), window-based over
//! the NIC (packets leave at line rate while the window allows):
//!
//! - Switches mark CE when the queue exceeds K (ECN with Kmin = Kmax = K, Pmax = 1); the receiver
//!   echoes CE on its ACKs (every ACK says whether a marked packet arrived since the previous one,
//!   so with an ACK per packet the echo is per packet, as DCTCP's receiver state machine gives).
//! - alpha := (1 - g) alpha + g F once per window of data, F the fraction of the window's
//!   acknowledged bytes that were echoed as marked.
//! - On an echo, at most once per window: cwnd := cwnd (1 - alpha/2) (and ssthresh := cwnd); no
//!   growth until that window is acknowledged (TCP's CWR state).
//! - Otherwise additive increase by one MSS per RTT (cwnd += MSS x acked / cwnd), or slow start
//!   (cwnd += acked) below ssthresh when `slow_start` is on.
//! - A loss report (NACK) halves the window; a timeout sets the minimum window.
//!
//! The window is bytes of payload; the NIC counts packets in flight x MTU against it.

use super::{Ack, Controller, FlowPath, RateSample, Reaction, SignalStats};
use crate::cc::dctcp_config::DctcpSpec;
use crate::units::Time;

/// DCTCP as a [`Controller`].
#[derive(Debug, Clone, Copy)]
pub struct DctcpCc(pub DctcpSpec);

#[derive(Debug, Clone, Copy, Default)]
pub struct Dctcp {
    line: u64,
    /// Congestion window, bytes (fractional: additive increase adds fractions of an MSS).
    pub cwnd: f64,
    ssthresh: f64,
    pub alpha: f64,
    /// The current observation window ends when this packet index is acknowledged.
    window_end: u32,
    acked_bytes: u64,
    marked_bytes: u64,
    /// No further cut (and no growth) until this packet index is acknowledged.
    cut_end: u32,
    /// Latest RTT sample (or the base RTT), for the rates trace.
    rtt: Time,
    /// The marks since the flow's previous rates row.
    stats: SignalStats,
}

impl DctcpCc {
    fn window(&self, s: &Dctcp) -> Reaction {
        Reaction {
            window_bytes: Some(s.cwnd as u64),
            ..Reaction::default()
        }
    }
}

impl Controller for DctcpCc {
    type Sender = Dctcp;
    type Receiver = ();
    const REPORTS_RATES: bool = true;
    const SEES_ACKS: bool = true;
    const NEEDS_PATH: bool = true;

    fn sender(&self, line_bps: u64, _now: Time) -> Dctcp {
        Dctcp {
            line: line_bps,
            ..Dctcp::default()
        }
    }

    fn receiver(&self) {}

    fn on_start(&self, s: &mut Dctcp, _now: Time, path: &FlowPath) -> Reaction {
        let spec = &self.0;
        let bdp = (s.line as u128 * path.base_rtt_ps as u128 / 8_000_000_000_000) as f64;
        let initial = match (spec.initial_window_bytes, spec.slow_start) {
            (Some(w), _) => w as f64,
            (None, true) => 10.0 * spec.mss_bytes as f64,
            (None, false) => bdp,
        };
        s.cwnd = initial.max(spec.min_window_bytes as f64);
        s.ssthresh = if spec.slow_start { f64::INFINITY } else { 0.0 };
        s.alpha = spec.alpha_init;
        s.rtt = path.base_rtt_ps.max(1);
        self.window(s)
    }

    fn on_ack(&self, s: &mut Dctcp, ack: &Ack<'_>) -> Reaction {
        if let Some(rtt) = ack.rtt {
            s.rtt = rtt.max(1);
        }
        if ack.newly_acked == 0 {
            return Reaction::default();
        }
        let spec = &self.0;
        let bytes = ack.newly_acked as u64 * spec.mss_bytes;
        s.stats.acked(ack.newly_acked, ack.ecn_echo);
        s.acked_bytes += bytes;
        if ack.ecn_echo {
            s.marked_bytes += bytes;
        }
        if ack.acked >= s.window_end {
            // One window of data acknowledged: fold its marked fraction into alpha.
            let f = s.marked_bytes as f64 / s.acked_bytes.max(1) as f64;
            s.alpha = (1.0 - spec.g) * s.alpha + spec.g * f;
            s.acked_bytes = 0;
            s.marked_bytes = 0;
            s.window_end = ack.next_seq;
        }
        let min = spec.min_window_bytes as f64;
        if ack.ecn_echo {
            if ack.acked >= s.cut_end {
                s.cwnd = (s.cwnd * (1.0 - s.alpha / 2.0)).max(min);
                s.ssthresh = s.cwnd;
                s.cut_end = ack.next_seq;
            }
        } else if ack.acked >= s.cut_end {
            if s.cwnd < s.ssthresh {
                s.cwnd += bytes as f64;
            } else {
                s.cwnd += spec.mss_bytes as f64 * bytes as f64 / s.cwnd;
            }
        }
        self.window(s)
    }

    fn on_loss(&self, s: &mut Dctcp, timeout: bool, _now: Time) -> Reaction {
        let min = self.0.min_window_bytes as f64;
        if timeout {
            s.ssthresh = (s.cwnd / 2.0).max(min);
            s.cwnd = min;
        } else {
            s.cwnd = (s.cwnd / 2.0).max(min);
            s.ssthresh = s.cwnd;
        }
        self.window(s)
    }

    fn rate_sample(&self, s: &mut Dctcp, _now: Time) -> Option<RateSample> {
        let mut r = RateSample {
            rate_bps: window_rate(s.cwnd, s.rtt, s.line),
            alpha: Some(s.alpha),
            window_bytes: Some(s.cwnd as u64),
            ..RateSample::default()
        };
        s.stats.take_ecn(&mut r);
        Some(r)
    }
}

/// The rate a window of `window_bytes` sustains over `rtt_ps`, at most `line_bps`.
pub(crate) fn window_rate(window_bytes: f64, rtt_ps: Time, line_bps: u64) -> u64 {
    let r = window_bytes * 8.0 * 1e12 / rtt_ps.max(1) as f64;
    if r >= line_bps as f64 {
        line_bps
    } else {
        r as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::dctcp_config::DctcpFile;

    fn cc() -> DctcpCc {
        DctcpCc(DctcpFile::validate(None, 1000).unwrap())
    }

    fn ack(acked: u32, next_seq: u32, ecn: bool) -> Ack<'static> {
        Ack {
            now: 0,
            newly_acked: 1,
            acked,
            next_seq,
            rtt: None,
            ecn_echo: ecn,
            int: &[],
        }
    }

    #[test]
    fn starts_at_the_bdp_and_grows_one_mss_per_window() {
        let c = cc();
        let mut s = c.sender(100_000_000_000, 0);
        // 10us at 100G: 125000 bytes.
        let r = c.on_start(
            &mut s,
            0,
            &FlowPath {
                base_rtt_ps: 10_000_000,
                switch_hops: 1,
            },
        );
        assert_eq!(r.window_bytes, Some(125_000));
        let w0 = s.cwnd;
        // One window's worth of unmarked ACKs (125 packets) adds about one MSS.
        for i in 1..=125 {
            c.on_ack(&mut s, &ack(i, 125 + i, false));
        }
        assert!((s.cwnd - w0 - 1000.0).abs() < 5.0, "cwnd {}", s.cwnd);
        // alpha decays by (1 - g) per window without marks.
        assert!((s.alpha - 15.0 / 16.0).abs() < 1e-12, "alpha {}", s.alpha);
    }

    #[test]
    fn alpha_tracks_the_marked_fraction_and_cuts_once_per_window() {
        let c = cc();
        let mut s = c.sender(100_000_000_000, 0);
        c.on_start(
            &mut s,
            0,
            &FlowPath {
                base_rtt_ps: 8_000_000,
                switch_hops: 1,
            },
        );
        // 100 packets per window, every other marked: F = 1/2, the fixed point of alpha.
        s.alpha = 0.5;
        let mut seq = 0;
        for _ in 0..50 {
            for j in 0..100 {
                seq += 1;
                c.on_ack(&mut s, &ack(seq, seq + 100, j % 2 == 0));
            }
        }
        assert!((s.alpha - 0.5).abs() < 5e-3, "alpha {}", s.alpha);
        // One cut per window: a window of marks cuts by alpha/2 once.
        let w = s.cwnd;
        let end = s.cut_end;
        let mut cuts = 0;
        for i in 1..=10 {
            let before = s.cwnd;
            c.on_ack(&mut s, &ack(end + i - 1, end + 200, true));
            cuts += (s.cwnd < before) as u32;
        }
        assert!(
            cuts <= 1 && s.cwnd >= w * 0.75 - 1.0,
            "cwnd {} from {w}",
            s.cwnd
        );
    }
}
