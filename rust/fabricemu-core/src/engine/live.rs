//! What a live controller (`crate::control`) reads from and changes in the World between events:
//! per-port counters for telemetry, and the actions that are not plan amendments (a flow's path
//! class, a congestion-control parameter, a link fault or its restoration).
//!
//! The counters are ones the engine keeps anyway (bytes sent, pause time, queue bytes) plus two
//! per-port counts incremented where the run-wide counts already are (an ECN mark, a PFC pause
//! frame): nothing per packet beyond that.

use std::sync::Arc;

use super::faults::Fault;
use super::queue::Event;
use super::world::World;
use crate::ids::{FlowId, IdVec, LinkId, PortId};
use crate::routing::{header_key, Header, ROCE_UDP_PORT};
use crate::scenario::{CongestionControl, FaultKind};
use crate::topology::faults::{FaultSource, LinkFault};

/// Per-port counts kept for live telemetry.
#[derive(Debug, Clone)]
pub(super) struct LiveCounters {
    /// ECN marks made at the egress port.
    pub ecn_marks: IdVec<PortId, u64>,
    /// PFC pause frames that paused the link leaving the port (sent by its downstream node).
    pub pause_frames: IdVec<PortId, u64>,
}

impl LiveCounters {
    pub fn new(num_ports: usize) -> Self {
        Self {
            ecn_marks: IdVec::from_elem(0, num_ports),
            pause_frames: IdVec::from_elem(0, num_ports),
        }
    }
}

/// One port's counters now (cumulative since the start, except `queue_bytes`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PortCounters {
    pub port: PortId,
    /// Its node and the node at the far end of its link.
    pub node: u32,
    pub peer: u32,
    /// The link's current rate (lower while a fault degrades it).
    pub rate_bps: u64,
    /// Bytes put on the wire so far.
    pub tx_bytes: u64,
    /// Time paused by PFC so far.
    pub paused_ps: u64,
    pub ecn_marks: u64,
    pub pause_frames: u64,
    /// Bytes queued at the port now (all priorities).
    pub queue_bytes: u64,
    /// The link is down (a fault).
    pub down: bool,
}

/// The congestion-control parameters a controller may change, per scheme (`set_cc` actions).
pub const CC_PARAMS: &[(&str, &[&str])] = &[
    (
        "dcqcn",
        &[
            "g",
            "rate_ai",
            "rate_hai",
            "min_rate",
            "rate_timer",
            "byte_counter",
        ],
    ),
    ("dctcp", &["g"]),
    ("swift", &["ai", "beta", "max_mdf", "base_target"]),
    ("hpcc", &["eta", "max_stage", "rate_ai", "min_rate"]),
    (
        "nscc",
        &[
            "fair_increase",
            "proportional_increase",
            "md",
            "max_md",
            "target_qdelay",
            "min_window",
            "max_window",
            "initial_window",
        ],
    ),
];

impl World {
    /// Every port's counters now.
    pub fn port_counters(&self) -> impl Iterator<Item = PortCounters> + '_ {
        self.ports.ids().map(|p| self.port_counter(p))
    }

    /// Port `p`'s counters now (see [`World::port_counters`]).
    pub fn port_counter(&self, p: PortId) -> PortCounters {
        let port = &self.ports[p];
        PortCounters {
            port: p,
            node: port.node.get(),
            peer: port.peer_node.get(),
            rate_bps: self.port_rate[p],
            tx_bytes: super::sampling::bytes_serialised(port, self.port_rate[p], self.now),
            paused_ps: self.paused_time(p),
            ecn_marks: self.live.ecn_marks[p],
            pause_frames: self.live.pause_frames[p],
            queue_bytes: self.queues[p].bytes,
            down: port.down,
        }
    }

    /// Move flow `fid`'s data to another path class: its ECMP header gets new entropy (UDP
    /// source port `49152 + entropy % 16384` and flow label `entropy % 2^20`), so hashing
    /// switches pick its paths anew from its next packet on. Its first hop (the NIC) and its
    /// control packets' path stay. Returns the flow's new header key.
    pub fn reroute_flow(&mut self, fid: FlowId, entropy: u32) -> Result<u64, String> {
        if self.fabric.cluster.is_some() {
            return Err(
                "not supported with a [cluster] (its NIC and relay choice follow the header)"
                    .into(),
            );
        }
        let routing = *self.amends.routing();
        let Some(f) = self.flows.get_mut(fid) else {
            return Err(format!("flow {fid} does not exist"));
        };
        if f.finished() {
            return Err(format!("flow {fid} has already finished"));
        }
        let header = Header {
            src: f.src,
            dst: f.dst,
            sport: 49152 + (entropy % 16384) as u16,
            dport: ROCE_UDP_PORT,
            flow_label: entropy & ((1 << 20) - 1),
        };
        f.header_fwd = header_key(&routing, header);
        Ok(f.header_fwd)
    }

    /// Set congestion-control parameter `name` of every flow (see [`CC_PARAMS`]; rates in bits
    /// per second, times in picoseconds, the byte counter in bytes) to `value`. Flows use it
    /// from their next reaction on. Returns the previous value.
    pub fn set_cc_param(&mut self, name: &str, value: f64) -> Result<f64, String> {
        let mut spec = self.amends.transport().cc;
        let bad = |what: &str| Err(format!("{name} must be {what}, found {value}"));
        let old = match &mut spec {
            CongestionControl::Dcqcn(d) => {
                let int = |v: &mut u64| {
                    let old = *v as f64;
                    *v = value as u64;
                    old
                };
                match name {
                    "g" if value > 0.0 && value <= 1.0 => std::mem::replace(&mut d.g, value),
                    "g" => return bad("in (0, 1]"),
                    _ if !(1.0..1e18).contains(&value) => return bad("a positive number"),
                    "rate_ai" => int(&mut d.rate_ai_bps),
                    "rate_hai" => int(&mut d.rate_hai_bps),
                    "min_rate" => int(&mut d.min_rate_bps),
                    "rate_timer" => int(&mut d.rate_timer_ps),
                    "byte_counter" => int(&mut d.byte_counter_bytes),
                    _ => return Err(unknown_param("dcqcn", name)),
                }
            }
            CongestionControl::Dctcp(d) => match name {
                "g" if value > 0.0 && value <= 1.0 => std::mem::replace(&mut d.g, value),
                "g" => return bad("in (0, 1]"),
                _ => return Err(unknown_param("dctcp", name)),
            },
            CongestionControl::Swift(d) => match name {
                "ai" if value > 0.0 && value.is_finite() => std::mem::replace(&mut d.ai, value),
                "beta" if value > 0.0 && value < 1.0 => std::mem::replace(&mut d.beta, value),
                "max_mdf" if value > 0.0 && value < 1.0 => std::mem::replace(&mut d.max_mdf, value),
                "base_target" if (1.0..1e15).contains(&value) => {
                    let old = d.base_target_ps as f64;
                    d.base_target_ps = value as u64;
                    old
                }
                "ai" | "beta" | "max_mdf" | "base_target" => return bad("in range"),
                _ => return Err(unknown_param("swift", name)),
            },
            // HPCC: eta and max_stage act on every flow's next ACK; rate_ai and min_rate
            // (turned into windows from a flow's base RTT when it starts) on flows starting
            // from then on.
            CongestionControl::Hpcc(d) => match name {
                "eta" if (0.01..=1.0).contains(&value) => std::mem::replace(&mut d.eta, value),
                "eta" => return bad("in [0.01, 1]"),
                "max_stage" if (0.0..=1000.0).contains(&value) && value.fract() == 0.0 => {
                    let old = d.max_stage as f64;
                    d.max_stage = value as u32;
                    old
                }
                "max_stage" => return bad("a whole number in 0..=1000"),
                "rate_ai" | "min_rate" if !(1.0..1e18).contains(&value) => {
                    return bad("a positive rate in bits per second")
                }
                "rate_ai" => std::mem::replace(&mut d.rate_ai_bps, value as u64) as f64,
                "min_rate" => std::mem::replace(&mut d.min_rate_bps, value as u64) as f64,
                _ => return Err(unknown_param("hpcc", name)),
            },
            // NSCC: the increases and decreases act on every flow's next ACK; the target delay
            // and the windows (a flow's, set when it starts) on flows starting from then on.
            // A previous value of 0: derived from each flow's path.
            CongestionControl::Nscc(d) => match name {
                "fair_increase" if value > 0.0 && value <= 1e6 => {
                    std::mem::replace(&mut d.fair_increase, value)
                }
                "proportional_increase" if value > 0.0 && value <= 16.0 => {
                    std::mem::replace(&mut d.proportional_increase, value)
                }
                "md" if value > 0.0 && value <= 1.0 => std::mem::replace(&mut d.md, value),
                "max_md" if value > 0.0 && value <= 1.0 => std::mem::replace(&mut d.max_md, value),
                "fair_increase" => return bad("in (0, 1e6]"),
                "proportional_increase" => return bad("in (0, 16]"),
                "md" | "max_md" => return bad("in (0, 1]"),
                "target_qdelay" if (1.0..1e15).contains(&value) => d
                    .target_qdelay_ps
                    .replace(value as u64)
                    .map_or(0.0, |v| v as f64),
                "target_qdelay" => return bad("a positive time in picoseconds"),
                "min_window" | "max_window" | "initial_window" if !(1.0..1e15).contains(&value) => {
                    return bad("a positive size in bytes")
                }
                "min_window"
                    if d.max_window_bytes
                        .into_iter()
                        .chain(d.initial_window_bytes)
                        .any(|w| w < value as u64) =>
                {
                    return bad("at most max_window and initial_window")
                }
                "max_window" | "initial_window" if (value as u64) < d.min_window_bytes => {
                    return bad(&format!(
                        "at least min_window ({} bytes)",
                        d.min_window_bytes
                    ))
                }
                "min_window" => std::mem::replace(&mut d.min_window_bytes, value as u64) as f64,
                "max_window" => d
                    .max_window_bytes
                    .replace(value as u64)
                    .map_or(0.0, |v| v as f64),
                "initial_window" => d
                    .initial_window_bytes
                    .replace(value as u64)
                    .map_or(0.0, |v| v as f64),
                _ => return Err(unknown_param("nscc", name)),
            },
            other => {
                return Err(format!(
                    "transport.cc = {:?} has no parameters a controller can change (dcqcn, \
                     dctcp, swift, hpcc and nscc have)",
                    cc_name(other)
                ))
            }
        };
        self.cc.set_spec(&spec);
        self.amends.set_cc(spec);
        Ok(old)
    }

    /// Apply a fault (`Down` or `Degrade`) to the links leaving `ports` now, until restored;
    /// routing notices a down link after `detection_ps`. It is a row of faults.arrow (source
    /// "control"). Returns the fault's number (for [`World::restore_fault`]).
    pub fn add_fault(
        &mut self,
        ports: &[PortId],
        kind: FaultKind,
        target: &str,
        detection_ps: u64,
        index: u32,
    ) -> Result<u32, String> {
        if !matches!(kind, FaultKind::Down | FaultKind::Degrade { .. }) {
            return Err(format!("kind {:?} cannot be applied live", kind.name()));
        }
        if let Some(p) = ports.iter().find(|p| p.index() >= self.ports.len()) {
            return Err(format!("link {p} does not exist"));
        }
        let mut links: Vec<LinkId> = ports.iter().map(|&p| LinkId::of_egress(p)).collect();
        links.sort_unstable();
        links.dedup();
        let spec = LinkFault {
            source: FaultSource::Control(index),
            kind_name: kind.name(),
            kind,
            target: Arc::from(target),
            links: Arc::from(links),
            at_ps: self.now,
            until_ps: None,
            detection_ps,
        };
        let i = self.faults.add(Fault::new(spec), self.ports.len());
        self.events.push(self.now, Event::FaultStart(i));
        self.faults.expect_event_at(self.now);
        if matches!(kind, FaultKind::Down) {
            self.events
                .push(self.now + detection_ps, Event::FaultDetected(i));
            self.faults.expect_event_at(self.now + detection_ps);
        }
        Ok(i)
    }

    /// End every live fault (one a controller applied) on the link leaving `port` now; the
    /// faults ended.
    pub fn restore_link(&mut self, port: PortId) -> Vec<u32> {
        let link = LinkId::of_egress(port);
        let mut ended = Vec::new();
        for i in 0..self.faults.len() {
            let Some((spec, active)) = self.faults.get(i) else {
                continue;
            };
            if !active
                || !matches!(spec.source, FaultSource::Control(_))
                || !spec.links.contains(&link)
            {
                continue;
            }
            let (down, detection) = (matches!(spec.kind, FaultKind::Down), spec.detection_ps);
            self.faults.mark_ending(i);
            self.events.push(self.now, Event::FaultEnd(i));
            self.faults.expect_event_at(self.now);
            if down {
                self.events
                    .push(self.now + detection, Event::FaultDetected(i));
                self.faults.expect_event_at(self.now + detection);
            }
            ended.push(i);
        }
        ended
    }

    /// The egress ports a flow from `src` to `dst` with a fixed header (UDP source port 49152,
    /// flow label 0) takes by the current routes: the path a model of the fabric (the built-in
    /// policy) charges a transfer to. Empty with a `[cluster]` (GPUs reach the fabric through
    /// their server's NICs) or when `dst` is cut off.
    pub fn endpoint_path(&self, src: crate::ids::NodeId, dst: crate::ids::NodeId) -> Vec<PortId> {
        if self.fabric.cluster.is_some() || src == dst {
            return Vec::new();
        }
        let header = Header {
            src,
            dst,
            sport: 49152,
            dport: ROCE_UDP_PORT,
            flow_label: 0,
        };
        let key = header_key(self.amends.routing(), header);
        let mut ports = vec![self.fabric.host_port(src)];
        for _ in 0..=self.fabric.num_nodes {
            let last = *ports.last().expect("non-empty");
            let node = self.fabric.peer_node[last];
            if node == dst {
                return ports;
            }
            if self.fabric.is_host(node) {
                return Vec::new();
            }
            match self.router.ecmp_port(self.router.table(), node, dst, key) {
                Some(p) => ports.push(p),
                None => return Vec::new(),
            }
        }
        Vec::new()
    }

    /// The transport settings flows starting now get: the scenario's, with the congestion-control
    /// parameters a controller changed (`set_cc`).
    pub fn live_transport(&self) -> &crate::config::TransportSpec {
        self.amends.transport()
    }

    /// Propagation (plus the far switch's latency) of the link leaving `p`.
    pub fn port_delay(&self, p: PortId) -> crate::units::Time {
        self.ports[p].arrival_delay
    }

    /// Barriers so far (an amendment numbers its new ones from here).
    pub fn num_barriers(&self) -> u32 {
        self.barriers.len() as u32
    }
}

fn unknown_param(scheme: &str, name: &str) -> String {
    let list = CC_PARAMS
        .iter()
        .find(|(s, _)| *s == scheme)
        .map_or(&[][..], |(_, l)| l);
    format!(
        "{scheme} has no parameter {name:?} a controller can change (one of: {})",
        list.join(", ")
    )
}

/// The name of a congestion-control scheme (`transport.cc`).
pub fn cc_name(cc: &CongestionControl) -> &'static str {
    match cc {
        CongestionControl::None => "none",
        CongestionControl::Dcqcn(_) => "dcqcn",
        CongestionControl::Dctcp(_) => "dctcp",
        CongestionControl::Swift(_) => "swift",
        CongestionControl::Hpcc(_) => "hpcc",
        CongestionControl::Nscc(_) => "nscc",
    }
}
