//! The build phase: from a validated [`Scenario`] to what the engine runs. Builds the fabric,
//! resolves fault links against it, sizes PFC headroom (and checks it fits the buffer), reads
//! replay and CDF files and expands every workload into the flow plan, drawing each random choice
//! from its named stream ([`crate::rng::Stream`]). Done once per run; anything that can fail
//! before the first event fails here, naming its key.

use crate::config::check::Res;
use crate::config::spec::Scenario;
use crate::ids::{IdVec, NodeId};
use crate::switch::config::check_headroom;
use crate::switch::pfc::Pfc;
use crate::topology::faults::{self, LinkFault};
use crate::topology::{self, Fabric};
use crate::workload::{self, FlowPlan};

/// A scenario built and ready to run: the engine takes it as it is and checks nothing.
#[derive(Debug)]
pub struct Built {
    pub scenario: Scenario,
    pub fabric: Fabric,
    /// Every flow, in flow-id order, with the collectives, replay tags and per-workload reports.
    pub plan: FlowPlan,
    /// The `[[fault]]` entries with their links resolved, in order (a flap as its down periods),
    /// then the failures the `[[failure_process]]` entries drew.
    pub faults: Vec<LinkFault>,
    /// PFC state (when enabled) and the headroom each node reserves out of its buffer.
    pub pfc: Option<Pfc>,
    pub reserved_headroom: IdVec<NodeId, u64>,
    /// `trace.packets` resolved against the fabric (None: packets are not traced).
    pub packet_filter: Option<crate::trace::packets::PacketFilter>,
    /// Settings that are allowed but probably not meant (each "key.path: message"); run.json
    /// carries them as `warnings`.
    pub warnings: Vec<String>,
}

impl Built {
    /// Data plus header bytes of the largest packet.
    pub fn max_packet_wire(&self) -> u64 {
        let t = &self.scenario.transport;
        t.mtu_bytes + t.header_bytes
    }
}

pub fn build(scenario: &Scenario) -> Res<Built> {
    let s = scenario;
    let fabric = topology::build_scenario(s)?;
    let faults = faults::resolve(&fabric, &s.faults, &s.failure_processes, s.seed)?;
    let packet_filter = match &s.trace.packets {
        Some(p) => Some(crate::trace::packets::resolve(&fabric, p)?),
        None => None,
    };
    let max_wire = s.transport.mtu_bytes + s.transport.header_bytes;
    let mut warnings = Vec::new();
    let (pfc, reserved_headroom) = match s.switch.pfc {
        Some(spec) => {
            let (pfc, reserved) = Pfc::new(spec, &fabric, max_wire, s.switch.latency_ps);
            warnings.extend(check_headroom(
                &s.switch,
                &reserved,
                |n| {
                    (!fabric.is_host(n))
                        .then(|| fabric.switch_buffer(n).unwrap_or(s.switch.buffer_bytes))
                },
                max_wire,
            )?);
            (Some(pfc), reserved)
        }
        None => (None, IdVec::new()),
    };
    let in_network = s.switch.reduction.as_ref().map(|r| {
        Box::new(workload::collective::in_network::InNetworkPlan::new(
            &fabric, r,
        ))
    });
    // The trailing open-loop workloads stream (`workload::stream`): a run that cannot make their
    // flows as it goes plans them at its start (`Simulation::new`).
    let mut plan = workload::plan_streamed(&s.workloads, s.seed, in_network)?;
    if let Some(inr) = &plan.in_network {
        warnings.extend(inr.warnings.iter().cloned());
    }
    let t = &s.transport;
    let rtt_parts = crate::transport::rto::RttParts {
        min_data: t.header_bytes + 1,
        full_data: t.mtu_bytes + t.header_bytes,
        ack: t.ack_bytes,
        switch_latency: s.switch.latency_ps,
        in_network: plan.in_network.is_some(),
    };
    warnings.extend(crate::transport::rto::check(t.rto_ps, &fabric, &rtt_parts)?);
    for job in &mut plan.jobs {
        job.episodes = workload::graph::reaction::episodes(&fabric, &faults, &job.endpoints);
    }
    if s.threads > 1 {
        if let Some(why) = crate::engine::parallel::unsupported(s) {
            return Err(crate::config::ScenarioError::at(
                "threads",
                format!(
                    "{} threads: the parallel engine does not run this scenario's {why} yet; \
                     use threads = 1",
                    s.threads
                ),
            ));
        }
    }
    Ok(Built {
        scenario: scenario.clone(),
        fabric,
        plan,
        faults,
        pfc,
        reserved_headroom,
        packet_filter,
        warnings,
    })
}
