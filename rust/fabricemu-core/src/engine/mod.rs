//! The engine: event queue, world state in flat arrays, run loop and run statistics.

mod nic;
mod ports;
mod queue;
mod sampling;
mod world;

pub use queue::{Event, EventQueue};
pub use world::World;

use crate::scenario::{Scenario, ScenarioError, StopAt};
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
    /// Packets of lossless classes dropped: the PFC headroom was too small.
    pub lossless_drops: u64,
    pub ecn_marks: u64,
    pub cnps_sent: u64,
    pub pfc_pause_frames: u64,
    pub pfc_resume_frames: u64,
    /// Time ports spent paused, summed over ports.
    pub paused_ps: u64,
    /// Cycles of PFC pauses that persisted across two checks (deadlocks), and when the first was seen.
    pub pfc_deadlocks: u64,
    pub first_deadlock_ps: Option<u64>,
    /// Data packets that arrived out of order at their receiver.
    pub out_of_order_packets: u64,
}

/// Whether `step` may be called again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepOutcome {
    Running,
    Finished,
}

/// A built fabric with its workload, ready to run.
pub struct Simulation {
    scenario: Scenario,
    world: World,
}

impl Simulation {
    pub fn new(scenario: &Scenario) -> Result<Self, ScenarioError> {
        Ok(Self {
            scenario: scenario.clone(),
            world: World::new(scenario),
        })
    }

    /// Process at most `max_events` events.
    pub fn step(&mut self, max_events: u64) -> StepOutcome {
        if self.world.run_events(max_events) {
            StepOutcome::Finished
        } else {
            StepOutcome::Running
        }
    }

    pub fn stats(&self) -> RunStats {
        self.world.stats()
    }

    /// The stop time, if the scenario stops at a time rather than when all flows are done.
    pub fn stop_time(&self) -> Option<u64> {
        match self.scenario.stop {
            StopAt::Time(t) => Some(t),
            StopAt::AllFlowsDone => None,
        }
    }

    /// One row per flow that started (and, if the scenario asks, those that have not).
    pub fn flow_rows(&self) -> Vec<FlowRow> {
        let keep_unfinished = self.scenario.trace.unfinished_flows;
        let w = &self.world;
        w.flows
            .iter()
            .enumerate()
            .filter(|(_, f)| f.finished() || keep_unfinished)
            .map(|(id, f)| FlowRow {
                flow_id: id as u64,
                src: f.src,
                dst: f.dst,
                size_bytes: f.size_bytes,
                start_ps: if f.started { f.start } else { 0 },
                finish_ps: f.finished().then_some(f.finish),
                ideal_fct_ps: w.ideal_fct(id as u32),
                workload: f.workload,
                packets_sent: f.packets_sent,
                retransmits: f.retransmits,
                drops: f.drops,
                ecn_marks: f.ecn_marks,
                cnps: f.cnps,
                out_of_order_packets: f.out_of_order,
                max_reorder_distance: f.max_reorder,
            })
            .collect()
    }

    /// Names of the workloads, indexed by `FlowRow::workload`.
    pub fn workload_names(&self) -> Vec<String> {
        self.scenario
            .workloads
            .iter()
            .map(|w| w.name.clone())
            .collect()
    }

    /// Run until the stop condition.
    pub fn run_to_end(&mut self) -> RunStats {
        while self.step(1 << 20) == StepOutcome::Running {}
        self.stats()
    }

    /// Check that every packet created was delivered, dropped, or is still in a queue or on a link.
    pub fn check_conservation(&self) -> Result<(), String> {
        self.world.check_conservation()
    }

    /// Stream the scenario's trace tables into `dir` from now on (temporary names until the run's
    /// outputs are written). Without this, trace rows are kept in memory until then.
    pub fn open_traces(
        &mut self,
        dir: &std::path::Path,
        metadata: &[(String, String)],
    ) -> std::io::Result<()> {
        self.world.open_traces(dir, metadata)
    }

    /// Finish the trace tables into `dir`.
    pub fn finish_traces(
        &mut self,
        dir: &std::path::Path,
        metadata: &[(String, String)],
    ) -> std::io::Result<()> {
        self.world.finish_traces(dir, metadata)
    }

    /// The trace tables (rows kept in memory when `open_traces` was not called).
    pub fn traces_mut(&mut self) -> &mut world::Traces {
        &mut self.world.traces
    }

    /// The engine state, for tests and tools that inspect it.
    pub fn world(&self) -> &World {
        &self.world
    }
}
