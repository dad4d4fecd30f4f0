//! The engine: event queue, world state in flat arrays, run loop and run statistics.

use crate::scenario::{Scenario, ScenarioError};
use crate::trace::flows::FlowRow;

/// Counters of a run (all exact integers); `run.json` carries them.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct RunStats {
    /// Simulated time reached, ps.
    pub simulated_ps: u64,
    pub events: u64,
    /// Packets (data or control) that crossed one link.
    pub packet_hops: u64,
    pub packets_created: u64,
    pub packets_delivered: u64,
    pub packets_dropped: u64,
    pub packets_in_flight: u64,
    pub data_packets_sent: u64,
    pub retransmitted_packets: u64,
    pub control_packets_sent: u64,
    pub timeouts: u64,
    pub flows_total: u64,
    pub flows_started: u64,
    pub flows_finished: u64,
    pub max_queue_bytes: u64,
}

/// Whether `step` may be called again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepOutcome {
    Running,
    Finished,
}

/// A built fabric with its workload, ready to run.
pub struct Simulation {
    _scenario: Scenario,
}

impl Simulation {
    pub fn new(scenario: &Scenario) -> Result<Self, ScenarioError> {
        Ok(Self {
            _scenario: scenario.clone(),
        })
    }

    /// Process at most `max_events` events.
    pub fn step(&mut self, _max_events: u64) -> StepOutcome {
        StepOutcome::Finished
    }

    pub fn stats(&self) -> RunStats {
        RunStats::default()
    }

    /// The stop time, if the scenario stops at a time rather than when all flows are done.
    pub fn stop_time(&self) -> Option<u64> {
        None
    }

    /// One row per flow that started (and, if the scenario asks, those that have not).
    pub fn flow_rows(&self) -> Vec<FlowRow> {
        Vec::new()
    }

    /// Names of the workloads, indexed by `FlowRow::workload`.
    pub fn workload_names(&self) -> Vec<String> {
        Vec::new()
    }

    /// Run until the stop condition.
    pub fn run_to_end(&mut self) -> RunStats {
        while self.step(1 << 20) == StepOutcome::Running {}
        self.stats()
    }
}
