//! The engine: event queue, world state in flat arrays, run loop and run statistics.

pub mod amend;
mod barriers;
pub mod circuits;
mod faults;
pub mod flows;
mod flows_out;
mod forwarding;
mod in_network;
mod jobs;
pub mod live;
mod nic;
mod pace;
pub mod parallel;
mod ports;
mod prefetch;
mod queue;
mod relay;
mod sampling;
mod shadow;
mod synthetic;
mod tight;
mod world;

pub use flows::{FlowBrief, FlowState, FlowTable};
pub use jobs::{EpisodeOutcome, EpisodeSummary, Job, JobSummary, Jobs};
pub use queue::{Event, EventQueue};
pub use relay::Relays;
pub use synthetic::SyntheticStats;
pub use world::MemoryFootprint;
pub use world::World;

use crate::scenario::{Built, Scenario, ScenarioError, StopAt};
use crate::trace::collectives::CollectiveRow;
use crate::trace::flows::{FlowLabels, FlowRow};
use crate::trace::ops::OpRow;
use crate::transport::NEVER;
use crate::units::Time;
use crate::workload::graph::PlannedKind;
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
    /// Packets lost to random loss (`[[fault]] kind = "loss"`: corrupted on a link, dropped by
    /// the receiver). Written only when not 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub corrupted_drops: u64,
    /// Fault periods applied (rows of faults.arrow: a flap's down periods and a failure
    /// process's failures each count). Written only when not 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub faults_applied: u64,
    /// Time links spent down, summed over links (each direction of a cable counts: a cable down
    /// for 1 ms is 2 link-ms), in ps. Written only when not 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub link_down_ps: u64,
    /// Reconfigurations of the optical circuit switch (`[ocs]`) started. Written only when not 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub ocs_reconfigurations: u64,
    /// Circuit time lost to OCS reconfigurations: each circuit a reconfiguration took dark, for
    /// the time until it ended (a circuit is both directions), in ps. Written only when not 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub ocs_circuit_ps_lost: u64,
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
    /// Flows cancelled before they started by a plan amendment (a controller's action, see
    /// `engine::amend`). Written only when not 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub flows_cancelled: u64,
    /// In-network collectives (absent without `[switch.reduction]` calls): calls run in the
    /// network, calls that fell back to the ring, switch contexts allocated, operand packets the
    /// engines absorbed, combined packets they sent, duplicates and stale packets dropped,
    /// results the root resent to one rank (repairs), and the most bytes of partial aggregates
    /// one switch held.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_network_calls: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_network_fallbacks: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reduction_contexts: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reduction_operands: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reduction_combined: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reduction_duplicates: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reduction_repairs: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reduction_buffer_peak_bytes: Option<u64>,
    /// In-network calls that waited for a free reduction context (`[switch.reduction]
    /// on_exhausted = "wait"`; absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_network_waits: Option<u64>,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
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
    /// The live control loop (`[control]`, or a controller attached from Python).
    control: Option<crate::control::Control>,
    /// `threads > 1`: the partitions that run (`world` is then their view, see `parallel`).
    parallel: Option<parallel::Parallel>,
    /// The rows of finished flows spilled to disk during the run (`flows_out`).
    flows_out: Option<flows_out::FlowsOut>,
    /// Whether a core is spare for the failure-free shadow run ([`Simulation::shadow_alongside`]),
    /// and the shadow running there.
    shadow_alongside: bool,
    shadow: Option<shadow::ShadowThread>,
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
            packet_filter,
            warnings,
        } = built;
        let mut plan = plan;
        // Streamed workloads (`workload::stream`) need a run that makes records as flows start
        // (on threads too: each partition runs the streams, `World::start_static_flows`); any
        // other makes their flows now.
        if !world::retires_flows(&scenario, &plan) {
            plan.materialise_streams();
        }
        // The plan is kept for the whole run: no slack left from growing it.
        plan.flows.shrink_to_fit();
        // A parallel run's partitions are worlds of the same build (which refused what they
        // cannot run), each with every fault.
        let mut fabric = fabric;
        if scenario.threads > 1 {
            // One route table for the view and every partition (the fabric's clones share it).
            let table = crate::routing::RouteTable::build(&fabric);
            fabric.routes = Some(std::sync::Arc::new(table));
        }
        // Made once: the view and every partition share it.
        let derived = world::PlanDerived::of(&scenario, &fabric, &plan);
        let parallel = (scenario.threads > 1).then(|| {
            let make = || {
                let mut w = World::new(
                    &scenario,
                    fabric.clone(),
                    &plan,
                    &faults,
                    pfc.clone(),
                    &reserved_headroom,
                    &derived,
                );
                if let Some(f) = &packet_filter {
                    w.tracer.trace_packets(f.clone());
                }
                w
            };
            // Windows longer than the shortest link where the plan changes only by elastic
            // re-plans (the grid step that may hold one runs merged, and the bounds take in what
            // it changed: `Parallel::lookahead`) and the fabric changes only by scheduled faults (each partition applies each, and they
            // only slow flows down; a give-up, which may settle the last flows at once, ends a
            // window: `World::earliest_give_up`). Jobs that stall or restart keep their plan: a
            // freeze only delays what they start, and every partition keeps their state alike.
            let fixed =
                scenario.control.is_none() && fabric.ocs.is_none() && plan.in_network.is_none();
            let long = fixed.then_some(parallel::LongWindows {
                cap: match scenario.switch.pfc {
                    Some(_) => world::DEADLOCK_CHECK_PS,
                    None => crate::transport::NEVER,
                },
                mtu: scenario.transport.mtu_bytes,
            });
            parallel::Parallel::new(&fabric, &plan, scenario.threads as u16, long, make)
        });
        // A parallel run's view makes the records of flows as the partitions' first come in,
        // and retires them as one world would (`Parallel::fold_into`).
        let mut world = World::new(
            &scenario,
            fabric,
            &plan,
            &faults,
            pfc,
            &reserved_headroom,
            &derived,
        );
        drop(derived); // frees what no world keeps (the entropy, where every record is made now)
        if let Some(f) = packet_filter {
            world.tracer.trace_packets(f);
        }
        let mut parallel = parallel;
        if let (Some(par), Some(_)) = (&mut parallel, &scenario.control) {
            par.track_wires(); // a controller may fail links
        }
        let control = scenario.control.map(|spec| {
            crate::control::Control::new(
                spec,
                crate::control::calls::Calls::new(&plan, &scenario.workloads),
            )
        });
        Self {
            scenario,
            plan,
            warnings,
            world,
            control,
            parallel,
            flows_out: None,
            shadow_alongside: false,
            shadow: None,
        }
    }

    /// Keep every flow's transport record for the whole run (see [`World::keep_all_flows`]):
    /// what a run that retires flows does when a controller or an amendment may look at any.
    pub fn keep_all_flows(&mut self) {
        self.world.keep_all_flows();
        if let Some(par) = &mut self.parallel {
            par.keep_all_flows();
        }
    }

    /// Attach a control loop (for a controller outside the scenario, e.g. a Python callable):
    /// boundaries every `interval_ps` (None: the scenario's `[control] interval`, or 20us). The
    /// scenario's built-in policy, if any, keeps running at the same boundaries.
    pub fn enable_control(&mut self, interval_ps: Option<Time>) {
        // A controller may look at any flow at any time: every flow keeps its record.
        self.keep_all_flows();
        if let Some(par) = &mut self.parallel {
            par.track_wires(); // it may fail links
            par.keep_the_grid(); // and re-plan: the long windows' bounds no longer hold
        }
        match &mut self.control {
            Some(c) => {
                if let Some(i) = interval_ps {
                    c.spec.interval_ps = i;
                }
            }
            None => {
                let mut spec = crate::control::ControlSpec::default();
                if let Some(i) = interval_ps {
                    spec.interval_ps = i;
                }
                self.control = Some(crate::control::Control::new(
                    spec,
                    crate::control::calls::Calls::new(&self.plan, &self.scenario.workloads),
                ));
            }
        }
    }

    /// The control loop, if the run has one.
    pub fn control(&self) -> Option<&crate::control::Control> {
        self.control.as_ref()
    }

    pub(crate) fn control_mut(&mut self) -> Option<&mut crate::control::Control> {
        self.control.as_mut()
    }

    /// Apply a controller's change `f` to the world now, at a control boundary: on threads to
    /// the view and then, if it took it, to every partition alike (each makes the same change
    /// to its copy; the view's answer is the run's).
    pub(crate) fn live<T, E>(&mut self, f: impl Fn(&mut World) -> Result<T, E>) -> Result<T, E> {
        let out = f(&mut self.world)?;
        if let Some(par) = &mut self.parallel {
            for w in &mut par.parts {
                // A partition's copy may refuse what the view took (a flow finished at its
                // receiver's partition, not at its sender's): nothing to change there then.
                let _ = f(w);
            }
        }
        Ok(out)
    }

    /// Every port's counters now (live telemetry), across the partitions on threads.
    pub fn port_counters(&self) -> Vec<live::PortCounters> {
        match &self.parallel {
            Some(par) => par.port_counters(),
            None => self.world.port_counters().collect(),
        }
    }

    /// The telemetry of the latest control boundary.
    pub fn telemetry(&self) -> Option<&crate::control::Telemetry> {
        self.control.as_ref()?.telemetry.as_ref()
    }

    /// The actions applied so far (actions.arrow).
    pub fn action_rows(&self) -> &[crate::control::ActionRow] {
        self.control.as_ref().map_or(&[], |c| &c.log)
    }

    /// Amend the flow plan now (see [`amend`]): the world and the plan the outputs are made
    /// from change together.
    pub fn amend(&mut self, a: &amend::Amendment) -> Result<amend::AmendReport, amend::AmendError> {
        // The amendment's flows take the ids after every flow's, streamed ones included: the
        // plan holds them all from now on (the world goes on making streamed flows itself).
        self.plan.materialise_streams();
        if self.parallel.is_none() {
            let report = self.world.amend(a)?;
            self.extend_plan(a);
            return Ok(report);
        }
        // On threads: the barriers' homes under the amended plan first (nothing changed on an
        // error), then the view (which checks the amendment), then every partition alike.
        let before = self.extend_plan(a);
        let par = self.parallel.as_mut().expect("checked above");
        let report = par
            .homes_after(&self.plan)
            .map_err(amend::AmendError)
            .and_then(|homes| Ok((self.world.amend(a)?, homes)));
        let (report, homes) = match report {
            Ok(r) => r,
            Err(e) => {
                self.take_back_plan(before);
                return Err(e);
            }
        };
        par.amend(
            a,
            &report.not_cancelled,
            &self.plan,
            homes,
            &self.world,
            None,
        );
        Ok(report)
    }

    /// Append what amendment `a` adds to the flow plan the outputs are made from; returns the
    /// plan's flows, barriers and edges before, for [`Simulation::take_back_plan`].
    fn extend_plan(&mut self, a: &amend::Amendment) -> (usize, usize, usize) {
        let before = (
            self.plan.flows.len(),
            self.plan.barrier_sizes.len(),
            self.plan.barrier_edges.len(),
        );
        self.plan.flows.extend_from_slice(&a.flows);
        self.plan.barrier_sizes.extend_from_slice(&a.barriers);
        self.plan.barrier_edges.extend_from_slice(&a.edges);
        before
    }

    /// Take back what [`Simulation::extend_plan`] appended (an amendment refused).
    fn take_back_plan(&mut self, (flows, barriers, edges): (usize, usize, usize)) {
        self.plan.flows.truncate(flows);
        self.plan.barrier_sizes.truncate(barriers);
        self.plan.barrier_edges.truncate(edges);
    }

    /// Apply `a`, whose appended flows are one in-network call (`algorithm` in_network or nvls,
    /// one flow per rank of `hosts` in order) of collective workload `workload`: the
    /// communicator's tree is placed first (its contexts held from now on). Err: the run has no
    /// reduction engines, no tree has free contexts now, or the hosts cannot form a tree.
    pub(crate) fn amend_in_network(
        &mut self,
        a: &amend::Amendment,
        workload: u32,
        hosts: &[u32],
        algorithm: crate::config::CollectiveAlgorithm,
        op: crate::config::CollectiveOp,
    ) -> Result<amend::AmendReport, String> {
        let Some(inr) = self.plan.in_network.as_deref_mut() else {
            return Err(format!(
                "{} needs switches with reduction engines: the scenario has no [switch.reduction]",
                algorithm.name()
            ));
        };
        if self.parallel.is_some() {
            return self.amend_in_network_on_threads(a, workload, hosts, algorithm, op);
        }
        let Some(tree) = inr.place_live(workload, hosts, algorithm)? else {
            return Err(format!(
                "{}: no free reduction context on a tree over hosts {hosts:?} now (the contexts \
                 are held by other communicators for the run)",
                algorithm.name()
            ));
        };
        let inr = self.plan.in_network.as_deref().expect("checked above");
        let report = self
            .world
            .amend_with(a, Some((inr, tree, op)))
            .map_err(|e| e.to_string())?;
        self.extend_plan(a);
        let first = report.first_flow;
        collective::in_network::add_call(&mut self.plan, tree, first, hosts, op);
        Ok(report)
    }

    /// [`Simulation::amend_in_network`] on threads: the barriers' homes under the amended plan
    /// first (the call's flows make the barriers they wait for counted everywhere: refused if
    /// one was a single partition's), then the tree, the view, and every partition alike.
    fn amend_in_network_on_threads(
        &mut self,
        a: &amend::Amendment,
        workload: u32,
        hosts: &[u32],
        algorithm: crate::config::CollectiveAlgorithm,
        op: crate::config::CollectiveOp,
    ) -> Result<amend::AmendReport, String> {
        self.plan.materialise_streams();
        let before = self.extend_plan(a);
        let first = before.0 as u32;
        let inr = self
            .plan
            .in_network
            .as_deref_mut()
            .expect("checked by the caller");
        // The call's flows, in any order, for the barriers' homes (its tree is placed after).
        inr.add_call(
            u32::MAX,
            (first..first + a.flows.len() as u32).collect(),
            op,
        );
        let par = self.parallel.as_ref().expect("on threads");
        let homes = par.homes_after(&self.plan);
        self.plan
            .in_network
            .as_deref_mut()
            .expect("placed")
            .pop_call();
        let homes = match homes {
            Ok(h) => h,
            Err(e) => {
                self.take_back_plan(before);
                return Err(e);
            }
        };
        let inr = self
            .plan
            .in_network
            .as_deref_mut()
            .expect("checked by the caller");
        let tree = match inr.place_live(workload, hosts, algorithm) {
            Ok(Some(t)) => t,
            Ok(None) => {
                self.take_back_plan(before);
                return Err(format!(
                    "{}: no free reduction context on a tree over hosts {hosts:?} now (the \
                     contexts are held by other communicators for the run)",
                    algorithm.name()
                ));
            }
            Err(e) => {
                self.take_back_plan(before);
                return Err(e);
            }
        };
        let inr = self.plan.in_network.as_deref().expect("placed");
        let report = match self.world.amend_with(a, Some((inr, tree, op))) {
            Ok(r) => r,
            Err(e) => {
                self.take_back_plan(before);
                return Err(e.to_string());
            }
        };
        collective::in_network::add_call(&mut self.plan, tree, first, hosts, op);
        let par = self.parallel.as_mut().expect("on threads");
        let not_cancelled = report.not_cancelled.clone();
        par.amend(
            a,
            &not_cancelled,
            &self.plan,
            homes,
            &self.world,
            Some((tree, op)),
        );
        Ok(report)
    }

    /// Process at most `max_events` events, stopping at the next control boundary if the run
    /// has a control loop: there the telemetry is taken and the built-in policy (if any) acts;
    /// then the caller's controller may read [`Simulation::telemetry`] and apply actions
    /// ([`Simulation::apply_action`]) before the next call. Without a control loop, the same as
    /// [`Simulation::step`].
    pub fn step_control(&mut self, max_events: u64) -> crate::control::ControlStep {
        let step = self.step_control_events(max_events);
        self.tend_shadow();
        step
    }

    fn step_control_events(&mut self, max_events: u64) -> crate::control::ControlStep {
        use crate::control::{ControlStep, PolicyName, Telemetry};
        let limit = self.control.as_ref().map_or(NEVER, |c| c.next_ps);
        let finished = if self.parallel.is_some() {
            // The partitions stop together at the boundary (a window's end).
            let finished = self.run_parallel(max_events, limit);
            self.spill_retired_rows();
            finished
        } else {
            let finished = self.world.run_events_until(max_events, limit);
            self.sync_job_plan();
            self.spill_retired_rows();
            finished
        };
        if limit == NEVER {
            return match finished {
                true => ControlStep::Finished,
                false => ControlStep::Running,
            };
        }
        if finished {
            return ControlStep::Finished;
        }
        if !self.world.reached_limit() {
            return ControlStep::Running;
        }
        let now = self.world.now;
        let c = self.control.as_mut().expect("checked above");
        c.note_done_calls(&self.world);
        let mut last = std::mem::take(&mut c.last_ports);
        let last_ps = c.last_ps;
        let telemetry = Telemetry::take(self, &mut last, last_ps);
        let c = self.control.as_mut().expect("checked above");
        c.last_ports = last;
        c.last_ps = now;
        c.last_marked_ps.resize(telemetry.ports.len(), None);
        for (m, p) in c.last_marked_ps.iter_mut().zip(&telemetry.ports) {
            if p.ecn_marks > 0 {
                *m = Some(now);
            }
        }
        c.next_ps = now.saturating_add(c.spec.interval_ps);
        let (policy, interval) = (c.spec.policy, c.spec.interval_ps);
        if policy == PolicyName::TelemetryAware {
            let source = format!("policy:{}", policy.name());
            for (action, why) in crate::control::policy::decide(self, &telemetry, interval) {
                // The policy's own choices are always valid; a failure would be a bug.
                match self.apply_action(&source, &action) {
                    Ok(Some(_)) => {
                        if let Some(row) = self.control_mut().and_then(|c| c.log.last_mut()) {
                            row.detail = format!("{}; {why}", row.detail);
                        }
                    }
                    Ok(None) => {}
                    // On threads an amendment may be refused (`Parallel::homes_after`).
                    Err(e) if self.parallel.is_some() => {
                        self.warnings
                            .push(format!("control.policy: not applied: {e}"));
                    }
                    Err(e) => panic!("the built-in policy made a bad action: {e}"),
                }
            }
        }
        self.control.as_mut().expect("checked above").telemetry = Some(telemetry);
        ControlStep::Boundary(now)
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

    /// Process at most `max_events` events. With a built-in control policy (`[control] policy`)
    /// the policy acts at every boundary on the way.
    pub fn step(&mut self, max_events: u64) -> StepOutcome {
        let outcome = self.step_events(max_events);
        self.tend_shadow();
        outcome
    }

    fn step_events(&mut self, max_events: u64) -> StepOutcome {
        if self
            .control
            .as_ref()
            .is_some_and(|c| c.spec.policy != crate::control::PolicyName::None)
        {
            let target = self.world.stats.events.saturating_add(max_events);
            loop {
                let left = target.saturating_sub(self.world.stats.events).max(1);
                match self.step_control(left) {
                    crate::control::ControlStep::Finished => return StepOutcome::Finished,
                    crate::control::ControlStep::Running => return StepOutcome::Running,
                    crate::control::ControlStep::Boundary(_) => {
                        if self.world.stats.events >= target {
                            return StepOutcome::Running;
                        }
                    }
                }
            }
        }
        if self.parallel.is_some() {
            let finished = self.run_parallel(max_events, NEVER);
            self.spill_retired_rows();
            return if finished {
                StepOutcome::Finished
            } else {
                StepOutcome::Running
            };
        }
        let finished = self.world.run_events(max_events);
        self.sync_job_plan();
        self.spill_retired_rows();
        if finished {
            StepOutcome::Finished
        } else {
            StepOutcome::Running
        }
    }

    /// Run the partitions for at most `max_events` events before `limit` (NEVER: none; see
    /// [`parallel::Parallel::run`]) and fold them into the view; true when the run ended.
    fn run_parallel(&mut self, max_events: u64, limit: Time) -> bool {
        let par = self.parallel.as_mut().expect("a parallel run");
        // The partitions hold their trace rows until the view takes them: in slices short
        // enough that they hold few.
        let slice = if self.world.tracer.any_table() {
            max_events.min(parallel::TRACED_SLICE_EVENTS)
        } else {
            max_events
        };
        let mut left = max_events;
        let finished = loop {
            let finished = par.run(self.scenario.stop, slice.min(left), limit);
            par.merge_traces(&mut self.world);
            left = left.saturating_sub(slice);
            if finished || par.reached_limit || left == 0 {
                break finished;
            }
        };
        par.fold_into(&mut self.world);
        self.world.reached_limit = par.reached_limit;
        self.sync_job_plan();
        finished
    }

    /// Append to the flow plan what elastic jobs re-planned during the run (as
    /// [`Simulation::amend`] does for a controller's amendments), so every output sees it.
    fn sync_job_plan(&mut self) {
        let appended = std::mem::take(&mut self.world.jobs.appended);
        if appended.is_empty() {
            return;
        }
        // The worlds that make records as flows start share the plan's flows: they let go of
        // them while the plan grows (in place, not into a copy), then share them again.
        self.world.share_plan(None);
        if let Some(par) = &mut self.parallel {
            par.share_plan(None);
        }
        // The appended flows take the ids after every flow's, streamed ones included (the world
        // goes on making streamed flows itself).
        self.plan.materialise_streams();
        let flows: usize = appended.iter().map(|a| a.flows.len()).sum();
        self.plan.flows.reserve(flows);
        for mut a in appended {
            self.plan.flows.append(&mut a.flows);
            self.plan.barrier_sizes.append(&mut a.barriers);
        }
        self.world.share_plan(Some(&self.plan.flows));
        if let Some(par) = &mut self.parallel {
            par.share_plan(Some(&self.plan.flows));
        }
    }

    /// Tests of the checks that a run's packets balance: count one packet delivered that was
    /// not (in the first partition on threads), so that [`Simulation::check_conservation`]
    /// fails.
    #[doc(hidden)]
    pub fn miscount_for_test(&mut self) {
        match &mut self.parallel {
            Some(par) => par.parts[0].stats.packets_delivered += 1,
            None => self.world.stats.packets_delivered += 1,
        }
    }

    /// Tests of the parallel engine: switch between running the windows on threads and on
    /// one thread every `every` windows, whatever they cost (a run chooses by measuring them,
    /// `engine::pace`; the outputs are the same either way). No effect on one thread.
    #[doc(hidden)]
    pub fn alternate_parallel_pace(&mut self, every: u32) {
        if let Some(par) = &mut self.parallel {
            par.alternate(every);
        }
    }

    /// A parallel run's windows so far: how many, how many of them ran merged, and how long
    /// they may be while the run cannot end within one (`Parallel::lookahead`) against the
    /// shortest link's grid (`World::window_ps`). None on one thread.
    #[doc(hidden)]
    pub fn parallel_windows(&self) -> Option<parallel::Windows> {
        self.parallel.as_ref().map(|p| p.windows())
    }

    /// Per partition of a parallel run, the most flow records it held at once (its records are
    /// made as its flows start or their packets come in, and forgotten once the view retired
    /// them); empty on one thread (see `world().flows.peak_live()`).
    pub fn partition_peak_records(&self) -> Vec<usize> {
        self.parallel
            .as_ref()
            .map_or_else(Vec::new, |p| p.peak_records())
    }

    pub fn stats(&self) -> RunStats {
        let mut s = self.world.stats();
        if let Some(par) = &self.parallel {
            (s.packets_created, s.packets_in_flight) = par.packet_counts();
        }
        s
    }

    /// The stop time, if the scenario stops at a time rather than when all flows are done.
    pub fn stop_time(&self) -> Option<u64> {
        match self.scenario.stop {
            StopAt::Time(t) => Some(t),
            StopAt::AllFlowsDone => None,
        }
    }

    /// One row per flow that finished or was given up on (its destination cut off), and, if the
    /// scenario asks, every other flow (rows spilled during the run are read back: for tests
    /// and tools; the outputs write them batch by batch).
    pub fn flow_rows(&self) -> Vec<FlowRow> {
        let mut spill = self.spill_reader().expect("the spilled rows read back");
        self.world
            .flows
            .ids()
            .filter_map(|id| {
                self.flow_row_of(id, &mut spill)
                    .expect("the spilled rows read back")
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
        let w = &self.world;
        // Every flow id: the plan's flows and any streamed ones after them.
        w.flows
            .ids()
            .take(plan.total_flows())
            .filter(|&id| !w.is_cancelled(id))
            .filter(|&id| match w.flows.state(id) {
                FlowState::Live(f) => self.keeps_row(f),
                FlowState::Retired(_) | FlowState::Spilled { .. } => true,
                FlowState::Unborn => self.scenario.trace.unfinished_flows,
            })
            .map(|id| flows_out::flow_labels(plan, w, id))
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
        for (id, init) in self.world.flows.ids().zip(&plan.flows) {
            let Some(tag) = init.collective else {
                continue;
            };
            if self.world.is_cancelled(id) {
                continue; // a call re-planned by a controller: its new flows count instead
            }
            // (From its record, or its row: a parallel run's view retires flows.)
            let f = self.world.flow_brief(id);
            let a = &mut agg[first_row[tag.instance as usize] + tag.iteration as usize];
            a.flows += 1;
            a.bytes = a.bytes.saturating_add(f.size_bytes);
            if let Some(t) = f.finish {
                a.finished += 1;
                a.last = a.last.max(t);
            }
            a.tiers.add(&tag, f.size_bytes, f.start, f.finish);
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
                    algorithm: self
                        .control
                        .as_ref()
                        .and_then(|k| k.calls.of(ci as u32))
                        .and_then(|calls| calls.get(it as usize))
                        .map_or(c.algorithm, |call| call.algorithm)
                        .name(),
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

    /// Whether the scenario has faults (`[[fault]]` or `[[failure_process]]`), or a controller
    /// applied one: its run writes faults.arrow.
    pub fn has_faults(&self) -> bool {
        !self.scenario.faults.is_empty()
            || !self.scenario.failure_processes.is_empty()
            || self.action_rows().iter().any(|r| r.action == "fault")
    }

    /// One row per fault period applied so far (faults.arrow).
    pub fn fault_rows(&self) -> Vec<crate::trace::faults::FaultRow> {
        self.world
            .faults
            .applied()
            .into_iter()
            .map(|(a, f)| crate::trace::faults::FaultRow {
                source: f.source.name(),
                index: f.source.index(),
                kind: f.kind_name,
                target: f.target.to_string(),
                time_ps: a.start_ps,
                end_ps: a.end_ps,
                links: f.links.iter().map(|l| l.egress().get()).collect(),
                detection_ps: f.detection_ps,
                packets_lost: a.packets_lost,
            })
            .collect()
    }

    /// Whether the fabric has an optical circuit switch (`[ocs]`): its run writes circuits.arrow.
    pub fn has_ocs(&self) -> bool {
        self.world.circuits.is_some()
    }

    /// One row per circuit that came up or went dark so far (circuits.arrow), in time order.
    pub fn circuit_rows(&self) -> Vec<crate::trace::circuits::CircuitRow> {
        let w = &self.world;
        let Some(c) = &w.circuits else {
            return Vec::new();
        };
        let label = crate::topology::faults::labels(&w.fabric);
        let layout = c.layout();
        c.events
            .iter()
            .map(|e| {
                let [a, b] = e.ocs_ports;
                let (sa, sb) = (layout.switch_of(a), layout.switch_of(b));
                crate::trace::circuits::CircuitRow {
                    time_ps: e.time_ps,
                    event: if e.up { "up" } else { "down" },
                    source: e.source.name(),
                    reconfiguration: e.reconfiguration,
                    ocs_port_a: a,
                    ocs_port_b: b,
                    switch_a: sa.get(),
                    switch_b: sb.get(),
                    name_a: label[sa].clone(),
                    name_b: label[sb].clone(),
                    port_a: layout.ports[a as usize].get(),
                    port_b: layout.ports[b as usize].get(),
                }
            })
            .collect()
    }

    /// Move the optical circuit switch to configuration `spec` from now (see
    /// [`World::reconfigure_circuits`]): the live control API's OCS action.
    pub fn reconfigure_circuits(
        &mut self,
        path: &str,
        spec: &crate::topology::ocs::CircuitsSpec,
        reconfiguration_ps: Option<u64>,
    ) -> Result<u32, ScenarioError> {
        self.live(|w| w.reconfigure_circuits(path, spec, reconfiguration_ps))
    }

    /// One row per step-graph op and rank it occupies (see `trace::ops`).
    pub fn op_rows(&self) -> Vec<OpRow> {
        self.op_rows_of(&self.plan)
    }

    /// [`Simulation::op_rows`] from a plan already made.
    pub fn op_rows_of(&self, plan: &FlowPlan) -> Vec<OpRow> {
        let w = &self.world;
        let mut rows = Vec::new();
        for (i, op) in plan.ops.iter().enumerate() {
            // An elastic job's excluded ranks have no rows for the ops they sat out.
            let job = w.jobs.list.iter().find(|j| j.plan.ops.contains(&i));
            let part = job.and_then(|j| j.op_row_nodes(i - j.plan.ops.start));
            let late = job.and_then(|j| j.op_row_start(i - j.plan.ops.start));
            let (collective_op, algorithm) = match op.kind {
                PlannedKind::Collective { op, algorithm } => {
                    (Some(op.name()), Some(algorithm.name()))
                }
                _ => (None, None),
            };
            let start_ps = late.or(w.barrier_released(op.ready));
            let end_ps = w.barrier_released(op.done);
            for (&rank, &node) in op.ranks.iter().zip(&op.nodes) {
                if part.is_some_and(|p| !p.contains(&node)) {
                    continue;
                }
                rows.push(OpRow {
                    workload: op.workload,
                    op: op.op,
                    iteration: op.iteration,
                    rank,
                    node,
                    kind: op.kind.name(),
                    phase: op.phase.name(),
                    is_compute: op.phase.is_compute(),
                    name: op.name.clone(),
                    collective_op,
                    algorithm,
                    start_ps,
                    end_ps,
                    bytes: op.bytes,
                });
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
        if let Some(par) = &self.parallel {
            return par.check_conservation();
        }
        self.world.check_conservation()
    }

    /// Stream the scenario's trace tables into `dir` from now on (temporary names until the run's
    /// outputs are written), and, in a run that retires flows (on any threads), spill the rows of
    /// finished flows to a file there (`flows_out`). Without this, trace and flow rows are kept
    /// in memory until the outputs are written.
    pub fn open_traces(
        &mut self,
        dir: &std::path::Path,
        metadata: &[(String, String)],
    ) -> std::io::Result<()> {
        self.world.open_traces(dir, metadata)?;
        self.open_flow_spill(dir)
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

    /// The one-way latency histograms, when `trace.latency` is on.
    pub fn latency(&self) -> Option<&crate::trace::latency::Latency> {
        self.world.tracer.latency.as_ref()
    }

    /// packets.arrow, when traced: rows written and whether `max_rows` cut it short.
    pub fn packet_trace(&self) -> Option<(u64, bool)> {
        let t = &self.world.tracer;
        t.traces
            .packets
            .as_ref()
            .map(|_| (t.packet_rows(), t.packets_truncated))
    }

    /// The engine state, mutable, for the engine's own tests.
    #[cfg(test)]
    pub(crate) fn world_mut(&mut self) -> &mut World {
        &mut self.world
    }

    /// The step workloads that react to failures, in the run.
    pub fn jobs(&self) -> &[Job] {
        &self.world.jobs.list
    }

    /// Fill in steps.arrow's failure columns (workloads with `on_failure`).
    pub fn annotate_steps(&self, steps: &mut [crate::trace::ops::StepRow]) {
        for j in self.jobs() {
            j.annotate(steps, self.world.now);
        }
    }

    /// run.json's `jobs`: one summary per reacting workload, from the steps of the run.
    pub fn job_summaries(&mut self, steps: &[crate::trace::ops::StepRow]) -> Vec<JobSummary> {
        let names = self.workload_names();
        // Jobs every iteration of which a failure touched take their failure-free rate from a
        // shadow run (docs/failures.md, "Relative throughput").
        let need: Vec<usize> = (0..self.jobs().len())
            .filter(|&j| self.jobs()[j].untouched_periods().is_none())
            .collect();
        let mut shadow = vec![None; self.jobs().len()];
        if !need.is_empty() {
            for (j, b) in need.iter().zip(self.shadow_periods(&need)) {
                shadow[*j] = b;
            }
        }
        self.jobs()
            .iter()
            .zip(shadow)
            .map(|(j, shadow)| {
                let rows: Vec<&crate::trace::ops::StepRow> = steps
                    .iter()
                    .filter(|s| s.workload == j.plan.workload)
                    .collect();
                j.summary(
                    names[j.plan.workload as usize].clone(),
                    self.world.now,
                    &rows,
                    |i| match self.world.faults.spec(i as usize) {
                        Some(f) => (f.source.name(), f.source.index(), f.target.to_string()),
                        None => ("fault", i, String::new()),
                    },
                    shadow,
                )
            })
            .collect()
    }

    /// A failure-free shadow of this run: the same scenario without its faults and failure
    /// processes, run only until each of `jobs` (indices into `jobs()`) has ended its first
    /// (up to) two iterations; their count and period (`Job::first_periods`) each, None if the
    /// shadow cannot tell (it stops first). Deterministic: the same scenario and seed. Taken
    /// from the shadow running alongside, if one is (`engine::shadow`), else run now.
    fn shadow_periods(&mut self, jobs: &[usize]) -> Vec<Option<(u32, u64)>> {
        let periods = self.shadow.take().and_then(|t| t.finish(jobs)).or_else(|| {
            let s = shadow::shadow_scenario(&self.scenario);
            shadow::run_shadow(&s, || Some(jobs.to_vec()))
        });
        match periods {
            Some(p) => jobs.iter().map(|&j| p.get(j).copied().flatten()).collect(),
            None => vec![None; jobs.len()],
        }
    }

    /// Let the failure-free shadow run on a spare core while this run goes on, once failures
    /// make it likely to be needed (`engine::shadow`), where the machine has a core beside the
    /// run's threads and `limits` hold twice the run's memory `estimate`. True if it may.
    pub fn shadow_alongside(
        &mut self,
        estimate: &crate::budget::Estimate,
        limits: &crate::budget::Limits,
    ) -> bool {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        self.shadow_alongside = cores > self.scenario.threads as usize
            && estimate.memory.saturating_mul(2) <= limits.memory;
        self.shadow_alongside
    }

    /// Whether a shadow runs alongside now.
    pub fn shadow_running(&self) -> bool {
        self.shadow.is_some()
    }

    /// Start the shadow alongside once a failure has touched a job while some job has no
    /// untouched iteration; stop it for good if every job gets one.
    fn tend_shadow(&mut self) {
        if !self.shadow_alongside {
            return;
        }
        let jobs = self.jobs();
        // (Touched first: a run whose failures touch no job never counts its periods here.)
        let needed = || jobs.iter().any(|j| j.untouched_periods().is_none());
        if self.shadow.is_none() {
            if jobs.iter().any(Job::touched) && needed() {
                match shadow::ShadowThread::start(&self.scenario) {
                    Ok(t) => self.shadow = Some(t),
                    Err(_) => self.shadow_alongside = false, // no thread: run it after
                }
            }
        } else if !needed() {
            self.shadow = None; // stops it
            self.shadow_alongside = false;
        }
    }

    /// The engine state, for tests and tools that inspect it.
    pub fn world(&self) -> &World {
        &self.world
    }

    /// Threads the run uses (`threads`; 1: one world).
    pub fn threads(&self) -> u32 {
        self.scenario.threads
    }

    /// The validated scenario this simulation runs.
    pub fn scenario(&self) -> &Scenario {
        &self.scenario
    }
}
