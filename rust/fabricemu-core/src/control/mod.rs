//! Live control: a controller looks at a bounded telemetry snapshot every control interval of
//! simulated time and acts on the run (see docs/control.md).
//!
//! - [`telemetry`]: the snapshot (per port: bytes, utilisation, queue, ECN marks, PFC pauses over
//!   the last interval; per collective: calls done, the current call's progress).
//! - [`actions`]: what a controller may do (choose the algorithm of a collective's next call,
//!   move a flow to another path class, change a congestion-control parameter, apply or restore
//!   a link fault), applied at the boundary's simulated time and recorded in actions.arrow.
//! - [`policy`]: the built-in telemetry-aware policy (`[control] policy = "telemetry_aware"`).
//! - [`calls`]: every collective call's flows, so a call can be re-planned (through
//!   `engine::amend`) before it starts.
//!
//! The engine stops exactly at each boundary `k * interval` (k = 0, 1, ...) without an event of
//! its own (`World::run_events_until`), so a controller that does nothing leaves every output
//! byte-identical. Same seed and same controller: same outputs.

pub mod actions;
pub mod calls;
pub mod config;
pub mod policy;
pub mod telemetry;

use crate::engine::live::PortCounters;
use crate::units::Time;

pub use actions::{Action, ActionError, ActionRow};
pub use config::{ControlSpec, PolicyName};
pub use telemetry::{CollectiveProgress, PortTelemetry, Telemetry};

/// The control loop's state in a simulation.
pub struct Control {
    pub spec: ControlSpec,
    /// The next boundary (simulated time).
    pub next_ps: Time,
    /// The port counters at the previous boundary (empty before the first).
    pub(crate) last_ports: Vec<PortCounters>,
    pub(crate) last_ps: Time,
    /// The snapshot of the latest boundary.
    pub(crate) telemetry: Option<Telemetry>,
    /// Per port: the last boundary whose interval saw it mark packets (ECN), if any (the
    /// telemetry-aware policy's memory, `policy::LinkModel::marked_within`).
    pub last_marked_ps: Vec<Option<Time>>,
    /// Every collective call's flows (re-planned calls included).
    pub calls: calls::Calls,
    /// Per collective instance: how many of its first calls are known done (every flow
    /// finished), brought up to date at each boundary ([`Control::note_done_calls`]).
    pub(crate) done_calls: Vec<u32>,
    /// Actions applied so far (actions.arrow).
    pub log: Vec<ActionRow>,
}

impl Control {
    pub fn new(spec: ControlSpec, calls: calls::Calls) -> Self {
        Self {
            spec,
            next_ps: 0,
            last_ports: Vec::new(),
            last_ps: 0,
            telemetry: None,
            last_marked_ps: Vec::new(),
            done_calls: vec![0; calls.by_instance.len()],
            calls,
            log: Vec::new(),
        }
    }

    /// Advance [`Control::done_calls`] past the calls whose flows all finished in `world`.
    pub(crate) fn note_done_calls(&mut self, world: &crate::engine::World) {
        for (calls, done) in self.calls.by_instance.iter().zip(&mut self.done_calls) {
            let Some(calls) = calls else { continue };
            while let Some(call) = calls.get(*done as usize) {
                let finished = |&f: &crate::ids::FlowId| world.flows[f].finished();
                if call.flows.is_empty() || !call.flows.iter().all(finished) {
                    break;
                }
                *done += 1;
            }
        }
    }
}

/// What one controlled step ended with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlStep {
    /// The event budget ran out.
    Running,
    /// The run is over.
    Finished,
    /// The run stopped at a control boundary, at this simulated time: the telemetry is ready
    /// and actions apply now.
    Boundary(Time),
}
