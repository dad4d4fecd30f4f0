//! DCQCN's reaction point (RP, the sender NIC), after Zhu et al., SIGCOMM 2015, with the
//! Mellanox/HPCC-repo variant (see shared/reference/README.md section 1):
//!
//! - On a CNP: Rt := Rc, Rc := Rc (1 - alpha/2), alpha := (1 - g) alpha + g; both increase stages
//!   and the byte counter restart. (Mellanox: the first CNP only sets alpha := 1; cuts happen at
//!   most once per `rate_decrease_interval`, when a CNP arrived since the last; Rt := Rc only if
//!   the rate grew since the last cut unless `clamp_target_rate`.)
//! - Alpha decays: paper, alpha := (1 - g) alpha every K without a CNP; Mellanox, every interval
//!   alpha := (1 - g) alpha + g if a CNP arrived in it, else (1 - g) alpha. Both are applied
//!   lazily, exactly, when alpha is next needed.
//! - Increase events come from a timer T and a byte counter B. Paper (QCN style): fast recovery
//!   Rc := (Rt + Rc)/2 while both stages are <= F; additive (Rt += R_AI) once one passed F; hyper
//!   (Rt += i R_HAI, i = min stage - F) once both did. Mellanox (timer only): stage < F fast
//!   recovery, = F additive, > F hyper with i = stage - F. Rt and Rc never exceed line rate; Rc
//!   never goes below the minimum rate.
//!
//! Rates are integer bits per second; alpha is a float (it only scales rates).
//!
//! The notification point (NP, the receiver NIC) sends a CNP for a marked packet at most once per
//! `cnp_interval` per flow. [`DcqcnCc`] puts both behind the [`Controller`] interface.

use super::{Controller, RateSample, Reaction as CcReaction};
use crate::config::DcqcnSpec;
use crate::units::Time;

/// DCQCN's timer numbers in [`CcReaction::timers`].
pub const TIMER_INCREASE: u8 = 0;
pub const TIMER_DECREASE_CHECK: u8 = 1;

/// DCQCN as a [`Controller`]: the RP per flow at the sender, the NP per flow at the receiver.
#[derive(Debug, Clone, Copy)]
pub struct DcqcnCc(pub DcqcnSpec);

/// The NP's state of one flow: when it last sent a CNP.
#[derive(Debug, Clone, Copy, Default)]
pub struct Notifier {
    last_cnp: Option<Time>,
}

impl DcqcnCc {
    /// The engine's reaction to an RP step: the new rate, a decrease check to schedule, and the
    /// increase timer to (re)start unless it is pending.
    #[inline]
    fn reaction(s: &mut Dcqcn, r: Reaction) -> CcReaction {
        let increase = match r.timer_at {
            Some(t) if !s.timer_pending => {
                s.timer_pending = true;
                Some((TIMER_INCREASE, t))
            }
            _ => None,
        };
        CcReaction {
            rate_bps: r.rate_changed.then_some(s.rc),
            window_bytes: None,
            timers: [
                r.decrease_check_at.map(|t| (TIMER_DECREASE_CHECK, t)),
                increase,
            ],
        }
    }
}

impl Controller for DcqcnCc {
    type Sender = Dcqcn;
    type Receiver = Notifier;
    const REPORTS_RATES: bool = true;

    fn sender(&self, line_bps: u64, now: Time) -> Dcqcn {
        Dcqcn::new(&self.0, line_bps, now)
    }

    fn receiver(&self) -> Notifier {
        Notifier::default()
    }

    #[inline(always)]
    fn on_sent(&self, s: &mut Dcqcn, bytes: u64, _now: Time) -> CcReaction {
        CcReaction {
            rate_bps: s.on_sent(&self.0, bytes).then_some(s.rc),
            ..CcReaction::default()
        }
    }

    fn on_cnp(&self, s: &mut Dcqcn, now: Time) -> CcReaction {
        let r = s.on_cnp(&self.0, now);
        Self::reaction(s, r)
    }

    fn on_timer(&self, s: &mut Dcqcn, timer: u8, now: Time, sender_done: bool) -> CcReaction {
        if timer == TIMER_DECREASE_CHECK {
            if sender_done {
                s.check_pending = false;
                return CcReaction::default();
            }
            let r = s.on_decrease_check(&self.0, now);
            return Self::reaction(s, r);
        }
        s.timer_pending = false;
        if sender_done {
            return CcReaction::default();
        }
        if s.next_increase > now {
            // A cut restarted the timer after this one was armed: fire at the new time.
            s.timer_pending = true;
            return CcReaction {
                timers: [None, Some((TIMER_INCREASE, s.next_increase))],
                ..CcReaction::default()
            };
        }
        let r = s.on_timer(&self.0, now);
        Self::reaction(s, r)
    }

    #[inline(always)]
    fn on_data(&self, n: &mut Notifier, ce: bool, now: Time) -> bool {
        if !ce {
            return false;
        }
        match n.last_cnp {
            Some(t) if now - t < self.0.cnp_interval_ps => false,
            _ => {
                n.last_cnp = Some(now);
                true
            }
        }
    }

    fn rate_sample(&self, s: &mut Dcqcn, now: Time) -> Option<RateSample> {
        let alpha = s.alpha(&self.0, now);
        Some(RateSample {
            rate_bps: s.rc,
            target_bps: Some(s.rt),
            alpha: Some(alpha),
            ..RateSample::default()
        })
    }
}

/// What a call of the RP changed (the [`DcqcnCc`] turns it into the controller's reaction).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reaction {
    /// The sending rate changed.
    pub rate_changed: bool,
    /// Schedule a rate-decrease check at this time (Mellanox gating).
    pub decrease_check_at: Option<Time>,
    /// (Re)start the increase timer: it should fire at this time.
    pub timer_at: Option<Time>,
}

#[derive(Debug, Clone, Copy)]
pub struct Dcqcn {
    /// Current rate Rc and target rate Rt, bits per second.
    pub rc: u64,
    pub rt: u64,
    alpha: f64,
    line: u64,
    timer_stage: u32,
    byte_stage: u32,
    bytes_since: u64,
    /// When the increase timer next expires.
    pub next_increase: Time,
    /// Paper: time alpha was last updated. Mellanox: start of the current alpha period.
    alpha_ref: Time,
    cnp_in_period: bool,
    seen_cnp: bool,
    cnp_since_check: bool,
    increased_since_cut: bool,
    pub check_pending: bool,
    pub timer_pending: bool,
}

impl Dcqcn {
    /// A flow starting at line rate at `now`.
    pub fn new(spec: &DcqcnSpec, line_bps: u64, now: Time) -> Self {
        Self {
            rc: line_bps,
            rt: line_bps,
            alpha: spec.alpha_init,
            line: line_bps,
            timer_stage: 0,
            byte_stage: 0,
            bytes_since: 0,
            next_increase: Time::MAX,
            alpha_ref: if spec.mellanox {
                now - now % spec.alpha_interval_ps
            } else {
                now
            },
            cnp_in_period: false,
            seen_cnp: false,
            cnp_since_check: false,
            increased_since_cut: false,
            check_pending: false,
            timer_pending: false,
        }
    }

    /// Alpha at `now`, with the decay since the last update applied.
    pub fn alpha(&mut self, spec: &DcqcnSpec, now: Time) -> f64 {
        let k = spec.alpha_interval_ps;
        let periods = (now.saturating_sub(self.alpha_ref)) / k;
        if periods > 0 {
            let keep = 1.0 - spec.g;
            if spec.mellanox {
                // The first elapsed period saw the CNPs flagged so far; the rest saw none.
                self.alpha = keep * self.alpha + if self.cnp_in_period { spec.g } else { 0.0 };
                self.alpha *= keep.powi((periods - 1).min(i32::MAX as u64) as i32);
                self.cnp_in_period = false;
            } else {
                self.alpha *= keep.powi(periods.min(i32::MAX as u64) as i32);
            }
            self.alpha_ref += periods * k;
        }
        self.alpha
    }

    /// A CNP reached the sender.
    pub fn on_cnp(&mut self, spec: &DcqcnSpec, now: Time) -> Reaction {
        self.alpha(spec, now);
        if spec.mellanox {
            self.cnp_in_period = true;
            let mut r = Reaction::default();
            if !self.seen_cnp {
                self.seen_cnp = true;
                self.alpha = 1.0;
            }
            self.cnp_since_check = true;
            if !self.check_pending {
                self.check_pending = true;
                r.decrease_check_at = Some(now + spec.rate_decrease_interval_ps.max(1));
            }
            return r;
        }
        if spec.rate_decrease_interval_ps > 0 {
            // Gated cuts in the paper variant too, if asked for.
            self.cnp_since_check = true;
            if !self.check_pending {
                self.check_pending = true;
                return Reaction {
                    decrease_check_at: Some(now + spec.rate_decrease_interval_ps),
                    ..Reaction::default()
                };
            }
            return Reaction::default();
        }
        let r = self.cut(spec, now);
        // Paper: alpha moves toward 1 on every CNP, and its decay timer restarts.
        self.alpha = (1.0 - spec.g) * self.alpha + spec.g;
        self.alpha_ref = now;
        r
    }

    /// The gated decrease check (Mellanox): cut if a CNP arrived since the last check.
    pub fn on_decrease_check(&mut self, spec: &DcqcnSpec, now: Time) -> Reaction {
        self.check_pending = false;
        if !std::mem::take(&mut self.cnp_since_check) {
            return Reaction::default();
        }
        self.alpha(spec, now);
        let r = self.cut(spec, now);
        if !spec.mellanox {
            self.alpha = (1.0 - spec.g) * self.alpha + spec.g;
            self.alpha_ref = now;
        }
        r
    }

    fn cut(&mut self, spec: &DcqcnSpec, now: Time) -> Reaction {
        if spec.clamp_target_rate || self.increased_since_cut {
            self.rt = self.rc;
        }
        let before = self.rc;
        let cut = (self.rc as f64 * (1.0 - self.alpha / 2.0)) as u64;
        self.rc = cut.max(spec.min_rate_bps);
        self.timer_stage = 0;
        self.byte_stage = 0;
        self.bytes_since = 0;
        self.increased_since_cut = false;
        self.next_increase = now + spec.rate_timer_ps;
        Reaction {
            rate_changed: self.rc != before,
            decrease_check_at: None,
            timer_at: Some(self.next_increase),
        }
    }

    /// The increase timer fired at `now` (the engine only calls this at `next_increase`).
    pub fn on_timer(&mut self, spec: &DcqcnSpec, now: Time) -> Reaction {
        self.timer_stage += 1;
        let before = self.rc;
        self.increase(spec);
        self.next_increase = now + spec.rate_timer_ps;
        let more = self.rc < self.line || self.rt < self.line;
        Reaction {
            rate_changed: self.rc != before,
            decrease_check_at: None,
            timer_at: more.then_some(self.next_increase),
        }
    }

    /// `bytes` were sent: count toward the byte counter.
    #[inline]
    pub fn on_sent(&mut self, spec: &DcqcnSpec, bytes: u64) -> bool {
        if spec.byte_counter_bytes == 0 || (self.rc == self.line && self.rt == self.line) {
            return false;
        }
        self.bytes_since += bytes;
        if self.bytes_since < spec.byte_counter_bytes {
            return false;
        }
        self.bytes_since -= spec.byte_counter_bytes;
        self.byte_stage += 1;
        let before = self.rc;
        self.increase(spec);
        self.rc != before
    }

    fn increase(&mut self, spec: &DcqcnSpec) {
        let f = spec.fast_recovery;
        let step = if spec.mellanox {
            let s = self.timer_stage;
            if s < f {
                0
            } else if s == f {
                spec.rate_ai_bps
            } else {
                (s - f) as u64 * spec.rate_hai_bps
            }
        } else {
            let (hi, lo) = (
                self.timer_stage.max(self.byte_stage),
                self.timer_stage.min(self.byte_stage),
            );
            if hi <= f {
                0
            } else if lo > f {
                (lo - f) as u64 * spec.rate_hai_bps
            } else {
                spec.rate_ai_bps
            }
        };
        self.rt = (self.rt + step).min(self.line);
        self.rc = (self.rt / 2 + self.rc / 2 + (self.rt & self.rc & 1)).min(self.line);
        self.increased_since_cut = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1_000_000;

    /// The paper's published parameters (the ones `variant = "paper"` applies).
    fn paper() -> DcqcnSpec {
        crate::cc::dcqcn_config::DcqcnVariant::Paper.defaults(40_000_000_000)
    }

    #[test]
    fn cut_then_fast_recovery_then_additive() {
        let s = paper();
        let line = 40_000_000_000;
        let mut d = Dcqcn::new(&s, line, 0);
        let r = d.on_cnp(&s, 10 * US);
        assert!(r.rate_changed);
        assert_eq!(d.rt, line);
        assert_eq!(d.rc, line / 2, "alpha = 1 halves the rate");
        assert!(
            (d.alpha(&s, 10 * US) - 1.0).abs() < 1e-12,
            "(1-g) * 1 + g = 1"
        );
        assert_eq!(r.timer_at, Some(65 * US));
        // Five fast-recovery steps halve the gap to Rt each time.
        let mut t = 65 * US;
        for i in 1..=5 {
            d.on_timer(&s, t);
            let gap = (line - d.rc) as f64;
            assert!(
                (gap - line as f64 / 2f64.powi(i + 1)).abs() <= 2.0,
                "step {i}: rc {}",
                d.rc
            );
            assert_eq!(d.rt, line);
            t += 55 * US;
        }
        // Then additive increase: Rt is at line rate and stays there; Rc keeps converging.
        let before = d.rc;
        d.on_timer(&s, t);
        assert_eq!(d.rt, line);
        assert!(d.rc > before);
        // Alpha decays by (1 - g) per 55 us without CNP: 6 periods since the CNP at 10 us.
        let a = d.alpha(&s, 10 * US + 6 * 55 * US + 1);
        assert!((a - (1.0 - 1.0 / 256.0f64).powi(6)).abs() < 1e-12);
    }

    #[test]
    fn target_grows_additively_below_line_rate() {
        let s = paper();
        let line = 40_000_000_000;
        let mut d = Dcqcn::new(&s, line, 0);
        d.on_cnp(&s, 0);
        d.on_cnp(&s, 1); // second cut: Rt := Rc = line / 2
        let rt0 = d.rt;
        assert_eq!(rt0, line / 2);
        let mut t = 55 * US;
        for _ in 0..5 {
            d.on_timer(&s, t);
            t += 55 * US;
        }
        assert_eq!(d.rt, rt0);
        d.on_timer(&s, t);
        assert_eq!(d.rt, rt0 + 40_000_000);
    }

    #[test]
    fn minimum_rate_holds() {
        let s = paper();
        let mut d = Dcqcn::new(&s, 40_000_000_000, 0);
        for i in 0..200 {
            d.on_cnp(&s, i);
        }
        assert_eq!(d.rc, s.min_rate_bps);
    }

    #[test]
    fn mellanox_first_cnp_sets_alpha_and_defers_the_cut() {
        let s = DcqcnSpec {
            mellanox: true,
            alpha_interval_ps: US,
            rate_timer_ps: 300 * US,
            byte_counter_bytes: 0,
            fast_recovery: 1,
            rate_ai_bps: 20_000_000,
            rate_hai_bps: 200_000_000,
            min_rate_bps: 1_000_000_000,
            rate_decrease_interval_ps: 4 * US,
            clamp_target_rate: false,
            cnp_interval_ps: 0,
            ..paper()
        };
        let line = 100_000_000_000;
        let mut d = Dcqcn::new(&s, line, 0);
        let r = d.on_cnp(&s, 10 * US);
        assert!(!r.rate_changed);
        assert_eq!(d.rc, line);
        assert_eq!(r.decrease_check_at, Some(14 * US));
        let r = d.on_decrease_check(&s, 14 * US);
        assert!(r.rate_changed);
        // Alpha was set to 1 and then updated at the period boundaries in between (the first with
        // the CNP: (1-g) + g = 1, the others decaying).
        let expect_alpha = (1.0 - 1.0 / 256.0f64).powi(3);
        assert_eq!(d.rc, (line as f64 * (1.0 - expect_alpha / 2.0)) as u64);
        // No CNP since: the next check does nothing.
        assert!(!d.on_decrease_check(&s, 18 * US).rate_changed);
        // Timer: stage 1 == F is additive (20 Mbps on Rt), then hyper.
        let rt = d.rt;
        d.on_timer(&s, 314 * US);
        assert_eq!(d.rt, (rt + 20_000_000).min(line));
    }
}
