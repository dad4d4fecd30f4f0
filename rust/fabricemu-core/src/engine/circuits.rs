//! Optical circuit switching in the run: the OCS's circuits (`[ocs]`, see
//! [`crate::topology::ocs`]) change on a schedule (`[[ocs.reconfigure]]`) or when a controller
//! calls [`World::reconfigure_circuits`]; the scheduled changes use the same function.
//!
//! A change from configuration A to B at time t, taking R:
//! - The OCS ports whose peer differs between A and B *change*; the others (circuits A and B
//!   share) keep carrying traffic throughout.
//! - At t every circuit of A between changing ports goes dark: the packets on it are lost (light
//!   stops mid-fibre) and so are the packets queued at its two switch ports (the ports go down, as
//!   a failed link's do). PFC frames on a dark circuit are lost too, and a pause it had carried is
//!   lifted (the upstream port is down anyway). Packets routed to a dark port are dropped.
//! - At t + R the circuits of B between changing ports come up: their switch ports are wired to
//!   their new peers and start sending.
//! - Routing follows `ocs.detection` after each step (default 0: the OCS controller tells routing
//!   as it acts, so routes avoid dark circuits from t and use the new ones from t + R), through
//!   the fault machinery's route recomputation.
//!
//! circuits.arrow has a row per circuit that comes up or goes dark; run.json's stats count the
//! reconfigurations and the circuit time lost (circuits taken dark x the time until the change
//! ended).

use super::queue::Event;
use super::world::World;
use crate::config::check::Res;
use crate::ids::PortId;
use crate::topology::ocs::{self, CircuitsSpec, OcsLayout};
use crate::units::Time;

/// Who asked for a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CircuitSource {
    /// The initial configuration (rows at time 0).
    Initial,
    /// `[[ocs.reconfigure]]` entry i.
    Schedule(u32),
    /// A controller, through [`World::reconfigure_circuits`].
    Control,
}

impl CircuitSource {
    pub fn name(self) -> &'static str {
        match self {
            CircuitSource::Initial => "initial",
            CircuitSource::Schedule(_) => "schedule",
            CircuitSource::Control => "control",
        }
    }
}

/// One circuit coming up or going dark (a row of circuits.arrow).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CircuitEvent {
    pub time_ps: Time,
    /// True: the circuit came up; false: it went dark.
    pub up: bool,
    pub source: CircuitSource,
    /// The reconfiguration (0, 1, ... in the order they started); None: the initial one.
    pub reconfiguration: Option<u32>,
    /// The two OCS ports, lower first.
    pub ocs_ports: [u32; 2],
}

/// A reconfiguration in progress.
#[derive(Debug, Clone)]
struct Pending {
    index: u32,
    source: CircuitSource,
    start: Time,
    end: Time,
    /// The configuration it moves to.
    target: Vec<Option<u32>>,
    /// Circuits taken dark at the start.
    darkened: u64,
}

/// The circuits part of the World.
#[derive(Clone)]
pub(super) struct Circuits {
    /// The OCS ports' switch ports and the scheduled changes.
    layout: Box<OcsLayout>,
    /// Per OCS port: its peer now (None: dark).
    peer: Vec<Option<u32>>,
    /// Per OCS port: the forwarding latency of its switch (added to a circuit's arrival delay).
    latency: Vec<Time>,
    pending: Option<Pending>,
    /// Reconfigurations started so far.
    started: u32,
    /// Circuit-ps lost by reconfigurations that ended.
    lost_ps: u64,
    pub events: Vec<CircuitEvent>,
}

impl Circuits {
    /// The OCS of a fabric, with each OCS port's switch latency.
    pub fn new(layout: Box<OcsLayout>, latency: Vec<Time>) -> Self {
        let peer = layout.initial.clone();
        let events = OcsLayout::circuits(&peer)
            .map(|(a, b)| CircuitEvent {
                time_ps: 0,
                up: true,
                source: CircuitSource::Initial,
                reconfiguration: None,
                ocs_ports: [a, b],
            })
            .collect();
        Self {
            layout,
            peer,
            latency,
            pending: None,
            started: 0,
            lost_ps: 0,
            events,
        }
    }

    pub fn layout(&self) -> &OcsLayout {
        &self.layout
    }

    /// The configuration now (the OCS peer of each port; None: dark).
    pub fn peers(&self) -> &[Option<u32>] {
        &self.peer
    }

    /// Circuit-ps lost by `now`: each circuit taken dark by a reconfiguration, for the time until
    /// the reconfiguration ended (or until now).
    pub fn circuit_ps_lost(&self, now: Time) -> u64 {
        self.lost_ps
            + self
                .pending
                .as_ref()
                .map_or(0, |p| p.darkened * (now.min(p.end) - p.start))
    }
}

impl World {
    /// The OCS configuration now: the peer of each OCS port (None: dark, or changing); None
    /// without an OCS.
    pub fn ocs_peers(&self) -> Option<&[Option<u32>]> {
        self.circuits.as_ref().map(|c| c.peers())
    }

    /// Schedule the `[[ocs.reconfigure]]` changes; the initial circuits' ports are already wired
    /// (the build did it) and the dark ones go down.
    pub(super) fn schedule_circuits(&mut self) {
        let Some(c) = &self.circuits else {
            return;
        };
        let dark: Vec<PortId> = c
            .peer
            .iter()
            .zip(&c.layout.ports)
            .filter(|(peer, _)| peer.is_none())
            .map(|(_, &p)| p)
            .collect();
        let at: Vec<Time> = c.layout.changes.iter().map(|ch| ch.at_ps).collect();
        for p in dark {
            self.ports[p].down = true;
            self.faults.exclude(p, true);
        }
        for (i, t) in at.into_iter().enumerate() {
            self.events.push(t, Event::CircuitsChange(i as u32));
            self.faults.expect_event_at(t);
        }
    }

    /// `[[ocs.reconfigure]]` entry `i` starts.
    pub(super) fn scheduled_change(&mut self, i: u32) {
        self.faults.event_done();
        let c = self
            .circuits
            .as_ref()
            .expect("scheduled changes have an OCS");
        let change = &c.layout.changes[i as usize];
        let (target, r) = (change.peers.clone(), change.reconfiguration_ps);
        // Validation keeps scheduled changes apart, but a controller's change may be running:
        // this one then starts when that one ends.
        if let Some(end) = c.pending.as_ref().map(|p| p.end) {
            self.events.push(end, Event::CircuitsChange(i));
            self.faults.expect_event_at(end);
            return;
        }
        self.start_reconfiguration(target, r, CircuitSource::Schedule(i))
            .expect("no reconfiguration is in progress");
    }

    /// Move the OCS to configuration `spec` (a pattern or a list of circuits, resolved against the
    /// configuration now: circuits it keeps keep their ports) from now, taking
    /// `reconfiguration_ps` (None: `ocs.reconfiguration_time`). The live control API applies a
    /// controller's OCS change with this; `path` names the action in errors. Returns the
    /// reconfiguration's number. Fails (changing nothing) without an OCS, for a configuration
    /// that does not fit the OCS, or while another reconfiguration is in progress.
    pub fn reconfigure_circuits(
        &mut self,
        path: &str,
        spec: &CircuitsSpec,
        reconfiguration_ps: Option<Time>,
    ) -> Res<u32> {
        let err = |m: String| crate::config::ScenarioError::at(path, m);
        let Some(c) = &self.circuits else {
            return Err(err("this fabric has no OCS ([ocs])".into()));
        };
        let target = ocs::assign(&self.fabric, &c.layout, path, spec, &c.peer)?;
        let r = reconfiguration_ps.unwrap_or(c.layout.reconfiguration_ps);
        if r == 0 {
            return Err(err("a reconfiguration takes longer than 0".into()));
        }
        self.start_reconfiguration(target, r, CircuitSource::Control)
            .map_err(err)
    }

    /// Start moving to configuration `target` (the OCS peer of every port), taking `r`.
    fn start_reconfiguration(
        &mut self,
        target: Vec<Option<u32>>,
        r: Time,
        source: CircuitSource,
    ) -> Result<u32, String> {
        let now = self.now;
        let c = self.circuits.as_mut().expect("an OCS");
        if let Some(p) = &c.pending {
            return Err(format!(
                "reconfiguration {} is in progress until {}",
                p.index,
                crate::units::format_time(p.end)
            ));
        }
        if target.len() != c.peer.len() {
            return Err(format!(
                "expected a configuration of {} OCS ports, found {}",
                c.peer.len(),
                target.len()
            ));
        }
        let index = c.started;
        c.started += 1;
        // Circuits of the configuration now that change: dark from now.
        let mut dark: Vec<PortId> = Vec::new();
        let mut darkened = 0;
        for (a, b) in OcsLayout::circuits(&c.peer).collect::<Vec<_>>() {
            if target[a as usize] == Some(b) {
                continue;
            }
            darkened += 1;
            c.events.push(CircuitEvent {
                time_ps: now,
                up: false,
                source,
                reconfiguration: Some(index),
                ocs_ports: [a, b],
            });
            c.peer[a as usize] = None;
            c.peer[b as usize] = None;
            dark.push(c.layout.ports[a as usize]);
            dark.push(c.layout.ports[b as usize]);
        }
        c.pending = Some(Pending {
            index,
            source,
            start: now,
            end: now.saturating_add(r),
            target,
            darkened,
        });
        let detection = c.layout.detection_ps;
        for (k, &p) in dark.iter().enumerate() {
            self.circuit_dark(p, k as u32);
        }
        // Every partition of the parallel engine reconfigures its copy: counted once.
        if self.partition.as_ref().is_none_or(|p| p.is_first()) {
            self.stats.ocs_reconfigurations += 1;
        }
        self.events
            .push(now.saturating_add(r), Event::CircuitsUp(index));
        self.faults.expect_event_at(now.saturating_add(r));
        self.reroute_after(detection);
        Ok(index)
    }

    /// The switch port of a circuit that goes dark: it goes down (losing what is on its wire and
    /// queued, and lifting a pause it received: `World::link_down`), and it becomes its own peer. Its trace rows go at
    /// `rows` within the event (its place among the ports going dark).
    fn circuit_dark(&mut self, p: PortId, rows: u32) {
        self.link_down_now(p, rows);
        // The light stops: the rest of a packet being serialised never leaves.
        let now = self.now;
        let sent = super::sampling::bytes_serialised(&self.ports[p], self.port_rate[p], now);
        let port = &mut self.ports[p];
        port.tx_bytes = sent;
        port.busy_until = port.busy_until.min(now);
        self.wire_port(p, p, 0);
    }

    /// Switch port `p`'s link now leads to port `q` (p itself: dark), whose switch forwards after
    /// `far_latency`.
    fn wire_port(&mut self, p: PortId, q: PortId, far_latency: Time) {
        let far = self.fabric.port_node[q];
        self.faults.rewired();
        self.fabric.peer_port[p] = q;
        self.fabric.peer_node[p] = far;
        let port = &mut self.ports[p];
        port.peer_node = far;
        port.arrival_delay = self.fabric.delay_ps[p] + far_latency;
        // On the parallel engine the link may now lead to (or away from) another partition.
        if let Some(part) = &self.partition {
            port.remote = !part.owns(far);
        }
    }

    /// Reconfiguration `index` ends: the new circuits come up.
    pub(super) fn circuits_up(&mut self, index: u32) {
        self.faults.event_done();
        let now = self.now;
        let c = self.circuits.as_mut().expect("an OCS");
        let Some(p) = c.pending.take_if(|p| p.index == index) else {
            return;
        };
        c.lost_ps += p.darkened * (p.end - p.start);
        let mut up: Vec<(PortId, PortId, Time)> = Vec::new();
        for (a, b) in OcsLayout::circuits(&p.target).collect::<Vec<_>>() {
            if c.peer[a as usize] == Some(b) {
                continue; // unchanged
            }
            c.peer[a as usize] = Some(b);
            c.peer[b as usize] = Some(a);
            c.events.push(CircuitEvent {
                time_ps: now,
                up: true,
                source: p.source,
                reconfiguration: Some(index),
                ocs_ports: [a, b],
            });
            let (pa, pb) = (c.layout.ports[a as usize], c.layout.ports[b as usize]);
            up.push((pa, pb, c.latency[b as usize]));
            up.push((pb, pa, c.latency[a as usize]));
        }
        let detection = c.layout.detection_ps;
        for (p, q, far_latency) in up {
            self.wire_port(p, q, far_latency);
            // A fault may hold the link down still.
            self.ports[p].down = self.faults.fault_down(p);
            self.kick(p);
        }
        self.reroute_after(detection);
    }

    /// Routing follows the circuits now, or after `detection`.
    fn reroute_after(&mut self, detection: Time) {
        if detection == 0 {
            self.circuits_route();
        } else {
            self.events
                .push(self.now.saturating_add(detection), Event::CircuitsRoute);
            self.faults
                .expect_event_at(self.now.saturating_add(detection));
        }
    }

    /// Routing learns which OCS ports are dark (or down) now and recomputes its tables.
    pub(super) fn circuits_route(&mut self) {
        let Some(c) = &self.circuits else {
            return;
        };
        let mut changed = false;
        for &p in &c.layout.ports {
            changed |= self.faults.exclude(p, self.ports[p].down);
        }
        if changed {
            self.reroute();
        }
    }

    /// A `CircuitsRoute` event (after a detection delay).
    pub(super) fn circuits_route_event(&mut self) {
        self.faults.event_done();
        self.circuits_route();
    }
}
