//! The engine: event queue, world state in flat arrays, run loop and run statistics.

mod faults;
mod forwarding;
mod nic;
mod ports;
mod queue;
mod sampling;
mod synthetic;
mod world;

pub use queue::{Event, EventQueue};
pub use synthetic::SyntheticStats;
pub use world::World;

use crate::scenario::{Built, Scenario, ScenarioError, StopAt};
use crate::trace::collectives::CollectiveRow;
use crate::trace::flows::{FlowLabels, FlowRow};
use crate::workload::{collective, FlowPlan};

/// Counters of a run (all exact integers); `run.json` carries them.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
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
    /// Packets lost to link faults (on the wire, queued at, or routed to a failed link).
    pub link_fault_drops: u64,
    /// Of `link_fault_drops`, packets a switch dropped because no live path led to their
    /// destination any more (routing knew every path to be down).
    pub unreachable_drops: u64,
    /// Flows given up on: their destination was cut off for good (no fault ends or is noticed
    /// later) when their retransmission timer expired; and flows that waited on those.
    pub flows_unreachable: u64,
    /// Dragonflies: packets sent via an intermediate group (Valiant, or chosen by UGAL / PAR), data
    /// and control (ACK, NACK, CNP) alike: the sum of the next two.
    pub packets_nonminimal: u64,
    /// Of `packets_nonminimal`, the data packets (compare with `data_packets_sent`).
    pub data_packets_nonminimal: u64,
    /// Of `packets_nonminimal`, the control packets (ACK, NACK, CNP).
    pub control_packets_nonminimal: u64,
    /// Dragonflies: the most global links one packet crossed.
    pub max_global_hops: u64,
    /// Utilisation of the uplinks (switch to a higher tier) over the run: min, mean, max, and the
    /// coefficient of variation (path imbalance).
    pub uplink_utilisation_min: f64,
    pub uplink_utilisation_mean: f64,
    pub uplink_utilisation_max: f64,
    pub uplink_utilisation_cv: f64,
    /// Packet trimming: data packets whose payload a switch cut (absent without trimming).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trimmed_packets: Option<u64>,
    /// Receiver-driven credits: pulls (credits) the receivers granted (absent without credits).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pulls_sent: Option<u64>,
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
    /// The flow plan the world was made from (flow ids index it).
    plan: FlowPlan,
    /// What the build warned about (run.json `warnings`).
    warnings: Vec<String>,
    world: World,
}

impl Simulation {
    /// The simulation of a built scenario (`scenario::build`, `scenario::load_toml`); it checks
    /// nothing and cannot fail.
    pub fn new(built: Built) -> Self {
        let Built {
            scenario,
            fabric,
            plan,
            faults,
            pfc,
            reserved_headroom,
            warnings,
        } = built;
        let world = World::new(&scenario, fabric, &plan, &faults, pfc, &reserved_headroom);
        Self {
            scenario,
            plan,
            warnings,
            world,
        }
    }

    /// Packet trimming: (switch, egress port, data packets trimmed there) for every port that
    /// trimmed any, by port; None without trimming.
    pub fn trimmed_by_port(&self) -> Option<Vec<(u32, u32, u64)>> {
        let w = &self.world;
        w.switches.trimming?;
        Some(
            w.switches
                .trimmed
                .iter_enumerated()
                .filter(|&(_, &n)| n > 0)
                .map(|(p, &n)| (w.ports[p].node.index() as u32, p.index() as u32, n))
                .collect(),
        )
    }

    /// Settings the build accepted but warned about ("key.path: message").
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Build a validated scenario and make its simulation: `Simulation::new(scenario::build(s)?)`.
    pub fn build(scenario: &Scenario) -> Result<Self, ScenarioError> {
        Ok(Self::new(crate::scenario::build(scenario)?))
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

    /// One row per flow that finished or was given up on (its destination cut off), and, if the
    /// scenario asks, every other flow.
    pub fn flow_rows(&self) -> Vec<FlowRow> {
        let w = &self.world;
        w.flows
            .iter_enumerated()
            .filter(|(_, f)| self.keeps_row(f))
            .map(|(id, f)| FlowRow {
                flow_id: id.get() as u64,
                src: f.src.get(),
                dst: f.dst.get(),
                size_bytes: f.size_bytes,
                // A flow that never started keeps its scheduled start (NEVER = not scheduled).
                start_ps: if f.start == crate::transport::NEVER {
                    crate::trace::flows::NOT_SCHEDULED
                } else {
                    f.start
                },
                started: f.started,
                finish_ps: f.finished().then_some(f.finish),
                ideal_fct_ps: w.ideal_fct(id),
                workload: f.workload,
                packets_sent: f.packets_sent,
                retransmits: f.retransmits,
                drops: f.drops,
                ecn_marks: f.ecn_marks,
                cnps: f.cnps,
                out_of_order_packets: f.out_of_order,
                max_reorder_distance: f.max_reorder,
                unreachable_drops: f.unreachable_drops,
            })
            .collect()
    }

    /// Whether flow `f` has a row in [`Simulation::flow_rows`].
    fn keeps_row(&self, f: &crate::transport::Flow) -> bool {
        f.finished() || (f.abandoned && f.started) || self.scenario.trace.unfinished_flows
    }

    /// The workloads' plan: every flow as its workload made it (in flow-id order), the collectives,
    /// replay tag names and what each workload generated (made once, when the scenario was built).
    pub fn workload_plan(&self) -> &FlowPlan {
        &self.plan
    }

    /// The labels of [`Simulation::flow_rows`], row for row.
    pub fn flow_labels(&self) -> Vec<FlowLabels> {
        self.flow_labels_of(&self.plan)
    }

    /// [`Simulation::flow_labels`] from a plan already made.
    pub fn flow_labels_of(&self, plan: &FlowPlan) -> Vec<FlowLabels> {
        self.world
            .flows
            .iter()
            .zip(&plan.flows)
            .filter(|(f, _)| self.keeps_row(f))
            .map(|(f, init)| FlowLabels {
                collective: init.collective.map(|c| c.instance),
                iteration: init.collective.map(|c| c.iteration),
                step: init.collective.map(|c| c.step),
                tag: init.tag,
                measured: self.synthetic_measured(f.workload, f.start),
            })
            .collect()
    }

    /// One row per collective and iteration (see `trace::collectives`).
    pub fn collective_rows(&self) -> Vec<CollectiveRow> {
        self.collective_rows_of(&self.plan)
    }

    /// [`Simulation::collective_rows`] from a plan already made.
    pub fn collective_rows_of(&self, plan: &FlowPlan) -> Vec<CollectiveRow> {
        #[derive(Clone, Copy, Default)]
        struct Agg {
            flows: u64,
            bytes: u64,
            finished: u64,
            last: u64,
            tiers: collective::TierSpans,
        }
        let mut first_row = Vec::with_capacity(plan.collectives.len());
        let mut total = 0usize;
        for c in &plan.collectives {
            first_row.push(total);
            total += c.iterations as usize;
        }
        let mut agg = vec![Agg::default(); total];
        for (f, init) in self.world.flows.iter().zip(&plan.flows) {
            let Some(tag) = init.collective else {
                continue;
            };
            let a = &mut agg[first_row[tag.instance as usize] + tag.iteration as usize];
            a.flows += 1;
            a.bytes = a.bytes.saturating_add(f.size_bytes);
            let finish = f.finished().then_some(f.finish);
            if let Some(t) = finish {
                a.finished += 1;
                a.last = a.last.max(t);
            }
            a.tiers.add(&tag, f.size_bytes, f.start, finish);
        }
        let mut rows = Vec::with_capacity(total);
        for (ci, c) in plan.collectives.iter().enumerate() {
            let mut start = Some(c.start_ps);
            let sizes = collective::tier_sizes(
                c.op,
                c.algorithm,
                c.size_bytes,
                c.hosts.len() as u32,
                c.ranks_per_domain,
            );
            for it in 0..c.iterations {
                let a = agg[first_row[ci] + it as usize];
                let finish = (a.flows > 0 && a.finished == a.flows).then_some(a.last);
                rows.push(CollectiveRow {
                    collective: ci as u32,
                    workload: c.workload,
                    group: c.group,
                    op: c.op.name(),
                    algorithm: c.algorithm.name(),
                    hosts: c.hosts.clone(),
                    iteration: it,
                    size_bytes: c.size_bytes,
                    flows: a.flows,
                    flow_bytes: a.bytes,
                    flows_finished: a.finished,
                    start_ps: start,
                    finish_ps: finish,
                    bus_factor: c.op.bus_factor(c.hosts.len() as u32),
                    tier_bytes: a.tiers.bytes(),
                    tier_time_ps: a.tiers.times(),
                    tier_bus: sizes.map(|s| s.map(|(size, n)| (size, c.op.bus_factor(n)))),
                });
                start = finish.map(|f| f.saturating_add(c.compute_gap_ps));
            }
        }
        rows
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
    pub fn traces_mut(&mut self) -> &mut crate::trace::Traces {
        &mut self.world.tracer.traces
    }

    /// The engine state, for tests and tools that inspect it.
    pub fn world(&self) -> &World {
        &self.world
    }
}
