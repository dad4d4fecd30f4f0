//! Congestion control: one interface, dispatched through an `enum` (no `dyn` on the hot path).
//!
//! A controller is a type implementing [`Controller`]: its parameters, a per-flow sender state
//! (the reaction point) and a per-flow receiver state (the notification point). It sees the events
//! of its flows (the flow starts, a data packet leaves, an ACK arrives with an RTT sample, the ECN
//! echo and any INT records, a CNP, a loss, one of its timers fires; at the receiver, a data
//! packet arrives) and answers with a [`Reaction`]: a new sending rate and/or window, and timers
//! to arm. The NIC paces each flow at its rate and keeps at most its window in flight.
//!
//! Adding a controller: one file with the type and its `Controller` impl, and one line in the
//! `controllers!` list below (the scenario's `transport.cc` builds it in [`Cc::new`]).

pub mod config;
pub mod dcqcn;
pub mod dcqcn_config;
pub mod dctcp;
pub mod dctcp_config;
pub mod hpcc;
pub mod hpcc_config;
pub mod int;
pub mod nscc;
pub mod nscc_config;
pub mod swift;
pub mod swift_config;

pub use dcqcn::Dcqcn;
pub use int::{IntStack, IntStore, MAX_INT_HOPS};

use crate::config::CongestionControl;
use crate::ids::{IdVec, NodeId, PortId, RecordSlot};
use crate::units::Time;

/// One hop's in-band telemetry, as a switch would stamp it on a data packet and the receiver
/// would echo it on the ACK (HPCC style). Switches stamp them at egress into the data packets of
/// runs whose controller asks for them ([`Controller::int_bytes_per_hop`]); controllers receive
/// them through [`Ack::int`], first hop first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IntRecord {
    /// The switch and its egress port.
    pub node: NodeId,
    pub port: PortId,
    /// When the packet left the port.
    pub time_ps: Time,
    /// Bytes queued at the port (the packet's class) when it left.
    pub queue_bytes: u64,
    /// Bytes the port had sent so far.
    pub tx_bytes: u64,
    /// The port's rate.
    pub rate_bps: u64,
}

/// What an ACK tells the sender's controller.
#[derive(Debug, Clone, Copy)]
pub struct Ack<'a> {
    pub now: Time,
    /// Packets newly acknowledged by it (0 for a duplicate).
    pub newly_acked: u32,
    /// The cumulative acknowledgement: packets before this index have arrived.
    pub acked: u32,
    /// The sender's next new packet index (one past the highest sent, "snd_nxt").
    pub next_seq: u32,
    /// Round-trip time of the flow's timed packet, when this ACK covers it (one sample per round
    /// trip at most; retransmitted packets are never timed).
    pub rtt: Option<Time>,
    /// The receiver saw a congestion-experienced mark since its previous ACK.
    pub ecn_echo: bool,
    /// In-band telemetry of the acknowledged packet's path (empty when no switch records it).
    pub int: &'a [IntRecord],
}

/// A controller's answer to an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reaction {
    /// Pace the flow at this rate from its next packet on.
    pub rate_bps: Option<u64>,
    /// Keep at most this many bytes in flight (unacknowledged) from now on.
    pub window_bytes: Option<u64>,
    /// Timers to arm, in this order: (the controller's timer number, when). A controller arms a
    /// timer only when it is not pending already.
    pub timers: [Option<(u8, Time)>; 2],
}

impl Reaction {
    /// Nothing to do (checked per packet: field by field, cheaper than comparing with default).
    #[inline(always)]
    pub fn is_none(&self) -> bool {
        self.rate_bps.is_none()
            && self.window_bytes.is_none()
            && self.timers[0].is_none()
            && self.timers[1].is_none()
    }
}

/// One sample of a flow's rate state, for rates.arrow; each scheme fills what it has (None is a
/// null in the table).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RateSample {
    /// The sending rate (window schemes: the window's rate over the latest RTT, at most the
    /// pacing rate).
    pub rate_bps: u64,
    /// DCQCN's target rate.
    pub target_bps: Option<u64>,
    /// DCQCN's or DCTCP's alpha.
    pub alpha: Option<f64>,
    /// The congestion window.
    pub window_bytes: Option<u64>,
    /// Swift: the latest fabric delay sample and the target it is compared with.
    pub delay_ps: Option<u64>,
    pub target_delay_ps: Option<u64>,
    /// HPCC: the (EWMA) utilisation U of the most loaded hop.
    pub utilisation: Option<f64>,
    /// Swift and NSCC: the delay samples since the flow's previous row (each one the delay
    /// `delay_ps` holds when it is the latest): their mean (rounded down to the ps) and largest
    /// (None when there was none), and how many there were.
    pub delay_mean_ps: Option<u64>,
    pub delay_max_ps: Option<u64>,
    pub delay_samples: Option<u64>,
    /// DCTCP and NSCC: the fraction of the packets acknowledged since the flow's previous row
    /// whose ACK echoed a congestion mark (None when none was acknowledged).
    pub ecn_fraction: Option<f64>,
    /// DCTCP and NSCC: the packets acknowledged since the flow's previous row (the fraction's
    /// denominator, so fractions add up across rows).
    pub acked_packets: Option<u64>,
    /// HPCC: the largest per-ACK utilisation sample u (the most loaded hop's, before the EWMA)
    /// since the flow's previous row (None when there was none).
    pub utilisation_max: Option<f64>,
}

/// A controller's signal between two rates.arrow rows of a flow: its delay samples and the
/// acknowledged packets that came back marked. Updated per ACK (a few adds), read and restarted
/// when the flow's row is written.
#[derive(Debug, Clone, Copy, Default)]
pub struct SignalStats {
    delay_samples: u64,
    delay_sum: u64,
    delay_max: u64,
    acked: u64,
    marked: u64,
}

impl SignalStats {
    /// One delay sample.
    #[inline(always)]
    pub fn delay(&mut self, d: Time) {
        self.delay_samples += 1;
        self.delay_sum = self.delay_sum.saturating_add(d);
        self.delay_max = self.delay_max.max(d);
    }

    /// `n` packets acknowledged by an ACK that did (`marked`) or did not echo a mark.
    #[inline(always)]
    pub fn acked(&mut self, n: u32, marked: bool) {
        self.acked += n as u64;
        if marked {
            self.marked += n as u64;
        }
    }

    /// The delay columns of `r`, from the samples since the previous row; restarts them.
    pub fn take_delay(&mut self, r: &mut RateSample) {
        let n = self.delay_samples;
        r.delay_samples = Some(n);
        r.delay_mean_ps = self.delay_sum.checked_div(n);
        r.delay_max_ps = (n > 0).then_some(self.delay_max);
        self.delay_samples = 0;
        self.delay_sum = 0;
        self.delay_max = 0;
    }

    /// The `ecn_fraction` and `acked_packets` columns of `r`, from the ACKs since the previous row; restarts it.
    pub fn take_ecn(&mut self, r: &mut RateSample) {
        r.acked_packets = Some(self.acked);
        if self.acked > 0 {
            r.ecn_fraction = Some(self.marked as f64 / self.acked as f64);
        }
        self.acked = 0;
        self.marked = 0;
    }
}

/// What the fabric says of a flow's path when it starts (for schemes with
/// [`Controller::NEEDS_PATH`]): its base round-trip time (propagation, switch latency and one
/// full data packet's and one ACK's serialisation per hop, no queueing) and its switch count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlowPath {
    pub base_rtt_ps: Time,
    pub switch_hops: u32,
}

/// A congestion-control scheme: parameters (`self`) and per-flow state.
pub trait Controller {
    /// Per-flow sender state (the reaction point).
    type Sender: Clone + std::fmt::Debug;
    /// Per-flow receiver state (the notification point).
    type Receiver: Clone + std::fmt::Debug;

    /// Whether rates.arrow has rows for this scheme.
    const REPORTS_RATES: bool = false;
    /// Whether the scheme reacts to ACKs (`on_ack`): the NIC then times packets for RTT samples.
    /// Schemes that do not skip that work per packet.
    const SEES_ACKS: bool = false;
    /// Whether `on_start` needs the flow's [`FlowPath`] (computed per flow start only then).
    const NEEDS_PATH: bool = false;

    /// INT bytes a switch adds to each data packet at egress, if the scheme uses in-band
    /// telemetry (switches stamp [`IntRecord`]s only then).
    fn int_bytes_per_hop(&self) -> Option<u32> {
        None
    }

    /// A flow with line rate `line_bps` starting at `now`.
    fn sender(&self, line_bps: u64, now: Time) -> Self::Sender;
    fn receiver(&self) -> Self::Receiver;

    /// The flow starts sending (its state was just made by `sender`); `path` is the default
    /// unless the scheme `NEEDS_PATH`.
    fn on_start(&self, _s: &mut Self::Sender, _now: Time, _path: &FlowPath) -> Reaction {
        Reaction::default()
    }
    /// A data packet of `bytes` left the NIC.
    #[inline(always)]
    fn on_sent(&self, _s: &mut Self::Sender, _bytes: u64, _now: Time) -> Reaction {
        Reaction::default()
    }
    fn on_ack(&self, _s: &mut Self::Sender, _ack: &Ack<'_>) -> Reaction {
        Reaction::default()
    }
    fn on_cnp(&self, _s: &mut Self::Sender, _now: Time) -> Reaction {
        Reaction::default()
    }
    /// The receiver reported a loss (NACK), or the retransmission timer expired (`timeout`).
    fn on_loss(&self, _s: &mut Self::Sender, _timeout: bool, _now: Time) -> Reaction {
        Reaction::default()
    }
    /// Timer `timer` (a number the controller chose in a `Reaction`) fired. `sender_done`: the
    /// flow has nothing left to send (the timer should lapse).
    fn on_timer(
        &self,
        _s: &mut Self::Sender,
        _timer: u8,
        _now: Time,
        _sender_done: bool,
    ) -> Reaction {
        Reaction::default()
    }
    /// Receiver: a data packet arrived (`ce`: marked). True: send a CNP to the sender.
    #[inline(always)]
    fn on_data(&self, _r: &mut Self::Receiver, _ce: bool, _now: Time) -> bool {
        false
    }
    /// The flow's rate state, for rates.arrow (schemes with `REPORTS_RATES`).
    fn rate_sample(&self, _s: &mut Self::Sender, _now: Time) -> Option<RateSample> {
        None
    }
}

/// No congestion control: every flow sends at line rate.
#[derive(Debug, Clone, Copy)]
pub struct NoCc;

impl Controller for NoCc {
    type Sender = ();
    type Receiver = ();

    fn sender(&self, _line_bps: u64, _now: Time) {}
    fn receiver(&self) {}
}

/// A controller with the state of every flow record, by the record's slot (`FlowTable::slot`):
/// a flow's state lives as long as its record.
#[derive(Debug, Clone)]
pub struct Flows<C: Controller> {
    pub ctrl: C,
    pub senders: IdVec<RecordSlot, C::Sender>,
    pub receivers: IdVec<RecordSlot, C::Receiver>,
}

impl<C: Controller> Flows<C> {
    /// Fresh state for the record just made in `slot` (a new slot, or one a retired flow left)
    /// with line rate `line_bps`. Slots below it that never had state get some (a parallel
    /// run's view makes records as it folds the partitions, and never runs a controller).
    fn fresh(&mut self, slot: RecordSlot, line_bps: u64) {
        let (s, r) = (self.ctrl.sender(line_bps, 0), self.ctrl.receiver());
        if slot.index() < self.senders.len() {
            self.senders[slot] = s;
            self.receivers[slot] = r;
        } else {
            self.senders.resize(slot.index() + 1, s);
            self.receivers.resize(slot.index() + 1, r);
        }
    }

    fn new(ctrl: C, line_rates: impl Iterator<Item = u64>) -> Self {
        let senders: IdVec<RecordSlot, _> = line_rates.map(|r| ctrl.sender(r, 0)).collect();
        let receivers = (0..senders.len()).map(|_| ctrl.receiver()).collect();
        Self {
            ctrl,
            senders,
            receivers,
        }
    }
}

macro_rules! controllers {
    ($($(#[$doc:meta])* $arm:ident => $ty:ty,)*) => {
        /// The congestion control of a run: the scheme, with every flow's state.
        #[derive(Debug, Clone)]
        pub enum Cc {
            $($(#[$doc])* $arm(Flows<$ty>),)*
        }

        impl Cc {
            /// Whether rates.arrow has rows.
            pub fn reports_rates(&self) -> bool {
                match self {
                    $(Cc::$arm(_) => <$ty as Controller>::REPORTS_RATES,)*
                }
            }

            /// Whether `on_ack` does anything (see [`Controller::SEES_ACKS`]).
            #[inline(always)]
            pub fn sees_acks(&self) -> bool {
                match self {
                    $(Cc::$arm(_) => <$ty as Controller>::SEES_ACKS,)*
                }
            }

            /// Whether `start` needs the flow's path (see [`Controller::NEEDS_PATH`]).
            pub fn needs_path(&self) -> bool {
                match self {
                    $(Cc::$arm(_) => <$ty as Controller>::NEEDS_PATH,)*
                }
            }

            /// Bytes of one flow's state (its sender and its receiver).
            pub fn bytes_per_flow(&self) -> usize {
                match self {
                    $(Cc::$arm(_) => std::mem::size_of::<<$ty as Controller>::Sender>()
                        + std::mem::size_of::<<$ty as Controller>::Receiver>(),)*
                }
            }

            /// INT bytes per switch hop, if switches stamp INT for this scheme.
            pub fn int_bytes_per_hop(&self) -> Option<u32> {
                match self {
                    $(Cc::$arm(f) => f.ctrl.int_bytes_per_hop(),)*
                }
            }

            /// The flow of record `slot` starts at `now` with line rate `line_bps` over `path`:
            /// fresh state.
            pub fn start(
                &mut self,
                slot: RecordSlot,
                line_bps: u64,
                now: Time,
                path: &FlowPath,
            ) -> Reaction {
                match self {
                    $(Cc::$arm(f) => {
                        let s = &mut f.senders[slot];
                        *s = f.ctrl.sender(line_bps, now);
                        f.ctrl.on_start(s, now, path)
                    })*
                }
            }

            #[inline(always)]
            pub fn on_sent(&mut self, slot: RecordSlot, bytes: u64, now: Time) -> Reaction {
                match self {
                    $(Cc::$arm(f) => f.ctrl.on_sent(&mut f.senders[slot], bytes, now),)*
                }
            }

            pub fn on_ack(&mut self, slot: RecordSlot, ack: &Ack<'_>) -> Reaction {
                match self {
                    $(Cc::$arm(f) => f.ctrl.on_ack(&mut f.senders[slot], ack),)*
                }
            }

            pub fn on_cnp(&mut self, slot: RecordSlot, now: Time) -> Reaction {
                match self {
                    $(Cc::$arm(f) => f.ctrl.on_cnp(&mut f.senders[slot], now),)*
                }
            }

            pub fn on_loss(&mut self, slot: RecordSlot, timeout: bool, now: Time) -> Reaction {
                match self {
                    $(Cc::$arm(f) => {
                        f.ctrl.on_loss(&mut f.senders[slot], timeout, now)
                    })*
                }
            }

            pub fn on_timer(&mut self, slot: RecordSlot, timer: u8, now: Time, done: bool) -> Reaction {
                match self {
                    $(Cc::$arm(f) => {
                        f.ctrl.on_timer(&mut f.senders[slot], timer, now, done)
                    })*
                }
            }

            #[inline(always)]
            pub fn on_data(&mut self, slot: RecordSlot, ce: bool, now: Time) -> bool {
                match self {
                    $(Cc::$arm(f) => f.ctrl.on_data(&mut f.receivers[slot], ce, now),)*
                }
            }

            pub fn rate_sample(&mut self, slot: RecordSlot, now: Time) -> Option<RateSample> {
                match self {
                    $(Cc::$arm(f) => f.ctrl.rate_sample(&mut f.senders[slot], now),)*
                }
            }
        }
    };
}

controllers! {
    /// `cc = "none"`.
    None => NoCc,
    /// `cc = "dcqcn"`.
    Dcqcn => dcqcn::DcqcnCc,
    /// `cc = "dctcp"`.
    Dctcp => dctcp::DctcpCc,
    /// `cc = "swift"`.
    Swift => swift::SwiftCc,
    /// `cc = "hpcc"`.
    Hpcc => hpcc::HpccCc,
    /// `cc = "nscc"`.
    Nscc => nscc::NsccCc,
}

impl Cc {
    /// The scheme `transport.cc` names, for flows with these line rates.
    pub fn new(spec: &CongestionControl, line_rates: impl Iterator<Item = u64>) -> Self {
        match spec {
            CongestionControl::None => Cc::None(Flows::new(NoCc, line_rates)),
            CongestionControl::Dcqcn(d) => Cc::Dcqcn(Flows::new(dcqcn::DcqcnCc(*d), line_rates)),
            CongestionControl::Dctcp(d) => Cc::Dctcp(Flows::new(dctcp::DctcpCc(*d), line_rates)),
            CongestionControl::Swift(d) => Cc::Swift(Flows::new(swift::SwiftCc(*d), line_rates)),
            CongestionControl::Hpcc(d) => Cc::Hpcc(Flows::new(hpcc::HpccCc(*d), line_rates)),
            CongestionControl::Nscc(d) => Cc::Nscc(Flows::new(nscc::NsccCc(*d), line_rates)),
        }
    }

    /// New settings of the running scheme (a controller's change): flows use them from their
    /// next reaction on. A spec of another scheme is ignored.
    pub fn set_spec(&mut self, spec: &CongestionControl) {
        match (self, spec) {
            (Cc::Dcqcn(f), CongestionControl::Dcqcn(d)) => f.ctrl = dcqcn::DcqcnCc(*d),
            (Cc::Dctcp(f), CongestionControl::Dctcp(d)) => f.ctrl = dctcp::DctcpCc(*d),
            (Cc::Swift(f), CongestionControl::Swift(d)) => f.ctrl = swift::SwiftCc(*d),
            (Cc::Hpcc(f), CongestionControl::Hpcc(d)) => f.ctrl = hpcc::HpccCc(*d),
            (Cc::Nscc(f), CongestionControl::Nscc(d)) => f.ctrl = nscc::NsccCc(*d),
            _ => {}
        }
    }

    /// Fresh state for the flow record just made in `slot`, with line rate `line_bps`.
    pub fn fresh(&mut self, slot: RecordSlot, line_bps: u64) {
        match self {
            Cc::None(f) => f.fresh(slot, line_bps),
            Cc::Dcqcn(f) => f.fresh(slot, line_bps),
            Cc::Dctcp(f) => f.fresh(slot, line_bps),
            Cc::Swift(f) => f.fresh(slot, line_bps),
            Cc::Hpcc(f) => f.fresh(slot, line_bps),
            Cc::Nscc(f) => f.fresh(slot, line_bps),
        }
    }

    /// DCQCN's current and target rate of the flow of record `slot`, if DCQCN runs.
    pub fn dcqcn_rates(&self, slot: RecordSlot) -> Option<(u64, u64)> {
        match self {
            Cc::Dcqcn(f) => f.senders.get(slot).map(|d| (d.rc, d.rt)),
            _ => None,
        }
    }
}
