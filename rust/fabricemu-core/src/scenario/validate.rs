//! Validation: from what the user wrote ([`ScenarioFile`]) to what the build phase needs
//! ([`Scenario`]). A coordinator: each section's checks live with the domain that owns it
//! (`topology::config`, `switch::config`, `routing::config`, `transport::config`, `cc::config`,
//! `trace::config`, `topology::faults`, `workload::<kind>`); here are only the checks across
//! sections. Pure: no file is read and no random number drawn (the build does both).

use super::schema::ScenarioFile;
use crate::config::check::Res;
use crate::config::hosts::Groups;
use crate::config::spec::*;
use crate::config::ScenarioError;
use crate::routing::config::hop_classes;
use crate::transport::config::NicFile;
use crate::workload::config::Context;

pub fn validate(file: &ScenarioFile) -> Res<Scenario> {
    let stop = file.stop.as_ref().map_or(StopAt::AllFlowsDone, |s| s.at);
    let topology = file.topology.validate()?;
    let ocs = match &file.ocs {
        Some(o) => Some(o.validate(&topology)?),
        None => None,
    };
    let warmup_ps = warmup(file.warmup.map(|d| d.0), stop)?;
    let nic_arbitration = NicFile::arbitration(file.nic.as_ref());

    let dragonfly = matches!(
        topology,
        TopologySpec::Dragonfly { .. } | TopologySpec::DragonflyPlus { .. }
    );
    let t = &file.transport;
    let packet_bytes = t.mtu.0.saturating_add(t.header.0);
    let routing = file.routing.validate(dragonfly, packet_bytes)?;
    let faults = file
        .fault
        .iter()
        .enumerate()
        .map(|(i, f)| f.validate(i))
        .collect::<Res<Vec<_>>>()?;
    let stop_ps = match stop {
        StopAt::Time(t) => Some(t),
        StopAt::AllFlowsDone => None,
    };
    let failure_processes = file
        .failure_process
        .iter()
        .enumerate()
        .map(|(i, f)| f.validate(i, stop_ps))
        .collect::<Res<Vec<_>>>()?;
    // Trimming recovers selectively (the receiver NACKs each trimmed packet): the default then.
    let trimming = crate::switch::trim::TrimmingFile::on(file.switch.trimming.as_ref());
    let transport = t.validate(
        topology.host_link().rate_bps,
        per_packet(&routing) || trimming,
    )?;
    let mut switch = file.switch.validate(&transport)?;
    hop_classes(&routing, &transport, &mut switch)?;
    let trace = file.trace.validate()?;
    if file.cluster.is_some() && matches!(topology, TopologySpec::Graph(_)) {
        return Err(ScenarioError::at(
            "cluster",
            "a [cluster] is laid out on a built-in topology kind (fat_tree, leaf_spine, clos, \
             dragonfly, dragonfly_plus), not on kind = \"graph\"",
        ));
    }
    let cluster = match &file.cluster {
        Some(c) => Some(c.validate(
            &topology,
            switch.buffer_bytes,
            transport.mtu_bytes + transport.header_bytes,
        )?),
        None => None,
    };
    if let Some(c) = &cluster {
        // Each plane is a separate network: an intermediate dragonfly group must be on the
        // packet's plane, which non-minimal routing does not know yet.
        if c.planes > 1 && matches!(routing.load_balancing, LoadBalancing::NonMinimal(_)) {
            return Err(ScenarioError::at(
                "cluster.planes",
                format!(
                    "{} planes with non-minimal dragonfly routing are not supported: use one \
                     plane, or minimal routing (routing.load_balancing = \"ecmp\")",
                    c.planes
                ),
            ));
        }
    }
    let endpoints = endpoints(&topology, cluster.as_ref());

    if file.workload.is_empty() {
        return Err(ScenarioError::at(
            "workload",
            "missing: a scenario needs at least one [[workload]] table (nothing would be sent)",
        ));
    }
    let mut workloads = Vec::with_capacity(file.workload.len());
    for (i, w) in file.workload.iter().enumerate() {
        let ctx = Context::new(
            i,
            &topology,
            stop,
            transport.mtu_bytes,
            transport.header_bytes,
        );
        // With a cluster, workloads address GPUs.
        let ctx = Context {
            n_hosts: endpoints,
            scaleup_gpus: cluster
                .as_ref()
                .and_then(|c| c.scaleup.as_ref())
                .map(|u| u.gpus),
            groups: cluster.as_ref().map(|c| Groups::new(c, endpoints)),
            ..ctx
        };
        let spec = w.validate(&ctx)?;
        let reaction = w.reaction(&ctx)?;
        let name = w
            .name()
            .map_or_else(|| spec.kind().to_string(), str::to_string);
        workloads.push(NamedWorkload {
            name,
            spec,
            reaction,
        });
    }

    Ok(Scenario {
        name: file.name.clone().unwrap_or_else(|| "scenario".into()),
        seed: file.seed,
        threads: threads(file.threads)?,
        stop,
        topology,
        switch,
        routing,
        faults,
        failure_processes,
        transport,
        workloads,
        trace,
        warmup_ps,
        nic_arbitration,
        cluster,
        ocs,
        control: file.control.as_ref().map(|c| c.validate()).transpose()?,
    })
}

/// Whether routing spreads one flow's packets over several paths (then packets arrive out of
/// order, and selective loss recovery is the default).
fn per_packet(routing: &RoutingSpec) -> bool {
    matches!(
        routing.load_balancing,
        LoadBalancing::Spray(_)
            | LoadBalancing::NonMinimal(NonMinimal {
                per_flowlet: false,
                ..
            })
            | LoadBalancing::Adaptive {
                per_packet: true,
                ..
            }
    )
}

/// The most threads one run may ask for.
pub const MAX_THREADS: i64 = 256;

/// `threads`: 1 (the default) to `MAX_THREADS`.
fn threads(threads: Option<i64>) -> Res<u32> {
    match threads {
        None => Ok(1),
        Some(n) if (1..=MAX_THREADS).contains(&n) => Ok(n as u32),
        Some(n) => Err(ScenarioError::at(
            "threads",
            format!("must be a whole number from 1 to {MAX_THREADS}, found {n}"),
        )),
    }
}

/// `warmup`: the start of the measurement window, before a time `stop`.
fn warmup(warmup: Option<u64>, stop: StopAt) -> Res<u64> {
    match (warmup, stop) {
        (None, _) => Ok(0),
        (Some(_), StopAt::AllFlowsDone) => Err(ScenarioError::at(
            "warmup",
            "a measurement window needs a time stop (e.g. stop = \"300us\")",
        )),
        (Some(w), StopAt::Time(t)) if w >= t => Err(ScenarioError::at(
            "warmup",
            format!(
                "must be before stop ({}), found {}",
                crate::units::format_time(t),
                crate::units::format_time(w)
            ),
        )),
        (Some(w), StopAt::Time(_)) => Ok(w),
    }
}
