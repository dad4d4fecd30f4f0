//! HPCC's sender (Li et al., "HPCC: High Precision Congestion Control", SIGCOMM 2019, Algorithm 1),
//! with the authors' ns-3 model's choices where the paper leaves them open:
//!
//! - Switches stamp an [`IntRecord`] per hop into each data packet at egress (queue bytes, bytes
//!   sent, time, rate); the receiver echoes the records on the ACK.
//! - Per ACK, for each hop whose record is newer than the previous one of this flow:
//!   u_i = min(qlen, qlen_prev) / (B_i T) + txRate_i / B_i with txRate_i = delta bytes / delta t;
//!   the hop with the largest u_i gives u and tau = its delta t. U := (1 - tau/T) U + (tau/T) u
//!   (tau capped at T), T the flow's base RTT.
//! - W := Wc / (U / eta) + W_AI if U >= eta or the increase stage reached max_stage, else
//!   Wc + W_AI. The reference window Wc takes W (and the stage restarts or counts up) only once
//!   per RTT: on the first ACK beyond the packet that was next to send at the previous update.
//!   Other ACKs set W from the unchanged Wc (fast reaction).
//! - The NIC keeps W bytes in flight and paces at R = W / T. W stays within
//!   [min_rate x T, line rate x T]. The first ACK only records the hops (no reference yet).

use super::dctcp::window_rate;
use super::int::MAX_INT_HOPS;
use super::{Ack, Controller, FlowPath, IntRecord, RateSample, Reaction};
use crate::cc::hpcc_config::HpccSpec;
use crate::units::Time;

/// HPCC as a [`Controller`].
#[derive(Debug, Clone, Copy)]
pub struct HpccCc(pub HpccSpec);

#[derive(Debug, Clone, Copy, Default)]
pub struct Hpcc {
    line: u64,
    /// Base RTT T, ps.
    t: Time,
    /// Current window W and reference window Wc, bytes.
    pub w: f64,
    wc: f64,
    w_ai: f64,
    w_min: f64,
    w_max: f64,
    inc_stage: u32,
    /// Normalised inflight (utilisation) estimate U.
    pub u: f64,
    last_update_seq: u32,
    have_ref: bool,
    prev: [IntRecord; MAX_INT_HOPS],
    prev_len: u8,
    rate: u64,
    /// The largest utilisation sample u since the flow's previous rates row (negative: none).
    u_max: f64,
}

impl HpccCc {
    fn react(&self, s: &mut Hpcc) -> Reaction {
        let rate = ((s.w * 8.0 * 1e12 / exact_f64(s.t)) as u64).clamp(1, s.line);
        let rate_bps = (rate != s.rate).then_some(rate);
        s.rate = rate;
        Reaction {
            rate_bps,
            window_bytes: Some(s.w as u64),
            ..Reaction::default()
        }
    }

    /// U's sample from one ACK's records: (max u_i, its tau); None if no hop is newer.
    fn measure(&self, s: &mut Hpcc, int: &[IntRecord]) -> Option<(f64, Time)> {
        let t_s = exact_f64(s.t) * 1e-12;
        let int = &int[..int.len().min(MAX_INT_HOPS)];
        let known = s.prev_len as usize;
        let mut best: Option<(f64, Time)> = None;
        for (i, (r, p)) in int.iter().zip(s.prev.iter_mut()).enumerate() {
            if i < known
                && p.node == r.node
                && p.port == r.port
                && r.time_ps > p.time_ps
                && r.rate_bps > 0
            {
                let tau = r.time_ps - p.time_ps;
                let b = exact_f64(r.rate_bps);
                let tx_rate = exact_f64(r.tx_bytes.saturating_sub(p.tx_bytes)) * 8.0
                    / (exact_f64(tau) * 1e-12);
                let q = exact_f64(r.queue_bytes.min(p.queue_bytes)) * 8.0;
                let u = q / (b * t_s) + tx_rate / b;
                if best.is_none_or(|(bu, _)| u > bu) {
                    best = Some((u, tau));
                }
            }
            *p = *r;
        }
        s.prev_len = int.len() as u8;
        best
    }
}

/// `x as f64` (the nearest double), by the one-instruction signed conversion where it gives the
/// same value (below 2^63: every count and time here).
#[inline(always)]
fn exact_f64(x: u64) -> f64 {
    match i64::try_from(x) {
        Ok(v) => v as f64,
        Err(_) => x as f64,
    }
}

impl Controller for HpccCc {
    type Sender = Hpcc;
    type Receiver = ();
    const REPORTS_RATES: bool = true;
    const SEES_ACKS: bool = true;
    const NEEDS_PATH: bool = true;

    fn int_bytes_per_hop(&self) -> Option<u32> {
        Some(self.0.int_bytes_per_hop)
    }

    fn sender(&self, line_bps: u64, _now: Time) -> Hpcc {
        Hpcc {
            line: line_bps,
            rate: line_bps,
            u_max: -1.0,
            ..Hpcc::default()
        }
    }

    fn receiver(&self) {}

    fn on_start(&self, s: &mut Hpcc, _now: Time, path: &FlowPath) -> Reaction {
        let spec = &self.0;
        s.t = path.base_rtt_ps.max(1);
        let bytes_per = |bps: u64| bps as f64 * s.t as f64 / 8e12;
        s.w_max = bytes_per(s.line);
        s.w_min = bytes_per(spec.min_rate_bps);
        s.w_ai = bytes_per(spec.rate_ai_bps);
        s.w = s.w_max;
        s.wc = s.w_max;
        // A flow starting at line rate fills its path.
        s.u = 1.0;
        self.react(s)
    }

    fn on_ack(&self, s: &mut Hpcc, ack: &Ack<'_>) -> Reaction {
        if ack.int.is_empty() {
            return Reaction::default();
        }
        if !s.have_ref {
            s.have_ref = true;
            s.last_update_seq = ack.next_seq;
            self.measure(s, ack.int);
            return Reaction::default();
        }
        let Some((u, tau)) = self.measure(s, ack.int) else {
            return Reaction::default();
        };
        let spec = &self.0;
        s.u_max = s.u_max.max(u);
        let tau = tau.min(s.t);
        let k = exact_f64(tau) / exact_f64(s.t);
        s.u = (1.0 - k) * s.u + k * u;
        let update = ack.acked > s.last_update_seq;
        let w = if s.u >= spec.eta || s.inc_stage >= spec.max_stage {
            let w = s.wc / (s.u / spec.eta) + s.w_ai;
            if update {
                s.inc_stage = 0;
            }
            w
        } else {
            if update {
                s.inc_stage += 1;
            }
            s.wc + s.w_ai
        };
        s.w = w.clamp(s.w_min, s.w_max);
        if update {
            s.wc = s.w;
            s.last_update_seq = ack.next_seq;
        }
        self.react(s)
    }

    fn rate_sample(&self, s: &mut Hpcc, _now: Time) -> Option<RateSample> {
        let r = RateSample {
            rate_bps: window_rate(s.w, s.t, s.line).min(s.rate),
            window_bytes: Some(s.w as u64),
            utilisation: Some(s.u),
            utilisation_max: (s.u_max >= 0.0).then_some(s.u_max),
            ..RateSample::default()
        };
        s.u_max = -1.0;
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::hpcc_config::HpccFile;
    use crate::ids::{NodeId, PortId};

    const US: u64 = 1_000_000;
    const G100: u64 = 100_000_000_000;

    fn hop(t: Time, tx: u64, q: u64) -> IntRecord {
        IntRecord {
            node: NodeId::new(7),
            port: PortId::new(3),
            time_ps: t,
            queue_bytes: q,
            tx_bytes: tx,
            rate_bps: G100,
        }
    }

    fn ack<'a>(acked: u32, next: u32, int: &'a [IntRecord]) -> Ack<'a> {
        Ack {
            now: 0,
            newly_acked: 1,
            acked,
            next_seq: next,
            rtt: None,
            ecn_echo: false,
            int,
        }
    }

    fn start() -> (HpccCc, Hpcc) {
        let c = HpccCc(HpccFile::validate(None, G100).unwrap());
        let mut s = c.sender(G100, 0);
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
    fn a_full_link_with_a_queue_cuts_the_window_in_proportion() {
        let (c, mut s) = start();
        assert!((s.w - 125_000.0).abs() < 1e-6, "BDP at 100G x 10us");
        c.on_ack(&mut s, &ack(1, 100, &[hop(0, 0, 125_000)]));
        // A whole T later: the link sent at line rate (125 KB in 10us) and a BDP is queued, so
        // u = 1 + 1 = 2 and U becomes 2 (tau = T); W = Wc / (2 / 0.95) + W_AI.
        let r = c.on_ack(&mut s, &ack(101, 300, &[hop(10 * US, 125_000, 125_000)]));
        assert!((s.u - 2.0).abs() < 1e-9, "U {}", s.u);
        let w_ai = 40e6 * 10e-6 / 8.0;
        let expect = 125_000.0 * 0.95 / 2.0 + w_ai;
        assert!((s.w - expect).abs() < 1e-6, "W {} vs {expect}", s.w);
        assert!((r.window_bytes.unwrap() as f64 - expect).abs() <= 1.0);
        let rate = expect * 8.0 / 10e-6;
        assert!(
            (r.rate_bps.unwrap() as f64 - rate).abs() <= 1e3,
            "{:?}",
            r.rate_bps
        );
        // The reference moved (this ACK passed the last update point): Wc = W.
        assert!((s.wc - s.w).abs() < 1e-9);
    }

    #[test]
    fn within_an_rtt_the_reference_window_holds() {
        let (c, mut s) = start();
        c.on_ack(&mut s, &ack(1, 100, &[hop(0, 0, 0)]));
        // Half-loaded link, no queue, tau = T/10: U moves a tenth of the way to 0.5.
        c.on_ack(&mut s, &ack(50, 120, &[hop(US, 6_250, 0)]));
        assert!((s.u - (0.9 + 0.1 * 0.5)).abs() < 1e-9, "U {}", s.u);
        let wc = s.wc;
        assert_eq!(wc, 125_000.0, "ACK 50 is before the update point (100)");
        // max_stage 0: always the multiplicative form, W = Wc / (U / eta) + W_AI, capped at line.
        assert!((s.w - 125_000.0).abs() < 1e-9);
        // A record with the same timestamp as the previous one changes nothing.
        let r = c.on_ack(&mut s, &ack(51, 120, &[hop(US, 6_250, 0)]));
        assert!(r.is_none());
    }
}
