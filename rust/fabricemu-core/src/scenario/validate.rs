//! From what the user wrote (`ScenarioFile`) to what the engine runs (`Scenario`): defaults, ranges,
//! kind-specific keys and host ids, each failure naming its key path.

use super::error::ScenarioError;
use super::schema::{
    DcqcnFile, FaultFile, NodeRef, RoutingFile, ScenarioFile, Senders, SwitchFile, TopologyFile,
    TraceFile, WorkloadFile,
};
use super::spec::*;
use crate::rng::{self, Purpose};
use crate::units::parse_time;
use crate::workload::cdf::{self, Cdf};
use std::sync::Arc;

type Res<T> = Result<T, ScenarioError>;

const DEFAULT_RATE: u64 = 100_000_000_000;
const DEFAULT_DELAY: u64 = 500_000;

pub fn validate(file: &ScenarioFile) -> Res<Scenario> {
    let stop = match file.stop.as_deref() {
        None | Some("all_flows_done") => StopAt::AllFlowsDone,
        Some(s) => StopAt::Time(parse_time(s).map_err(|_| {
            ScenarioError::at(
                "stop",
                format!("expected \"all_flows_done\" or a duration like \"5ms\", found {s:?}"),
            )
        })?),
    };
    let topology = topology(&file.topology)?;
    let n_hosts = topology.num_hosts();
    let warmup_ps = warmup(file.warmup.map(|d| d.0), stop)?;
    let nic_arbitration = nic_arbitration(file.nic.as_ref())?;

    let dragonfly = matches!(
        topology,
        TopologySpec::Dragonfly { .. } | TopologySpec::DragonflyPlus { .. }
    );
    let mut routing = routing(&file.routing, dragonfly)?;
    let faults = faults(&file.fault)?;

    let t = &file.transport;
    if t.mtu.0 == 0 {
        return Err(ScenarioError::at(
            "transport.mtu",
            "expected a positive size",
        ));
    }
    if t.mtu.0 > u32::MAX as u64 / 2 || t.header.0 > 65_535 || t.ack_size.0 > 65_535 {
        let key = if t.mtu.0 > u32::MAX as u64 / 2 {
            "transport.mtu"
        } else {
            "transport.header"
        };
        return Err(ScenarioError::at(key, "value is too large for a packet"));
    }
    if t.ack_size.0 == 0 {
        return Err(ScenarioError::at(
            "transport.ack_size",
            "expected a positive size",
        ));
    }
    if t.mtu.0 + t.header.0 == 0 {
        return Err(ScenarioError::at(
            "transport.header",
            "packets must have a positive size",
        ));
    }
    if t.ack_every < 1 || t.ack_every > 1 << 20 {
        return Err(ScenarioError::at(
            "transport.ack_every",
            format!("expected an integer >= 1, found {}", t.ack_every),
        ));
    }
    if t.rto.0 == 0 {
        return Err(ScenarioError::at(
            "transport.rto",
            "expected a positive duration",
        ));
    }
    let priority = |key: &str, v: Option<i64>, default: u8| -> Res<u8> {
        match v {
            None => Ok(default),
            Some(p) if (0..8).contains(&p) => Ok(p as u8),
            Some(p) => Err(ScenarioError::at(
                format!("transport.{key}"),
                format!("expected a priority in 0..=7, found {p}"),
            )),
        }
    };
    let data_priority = priority("priority", t.priority, crate::switch::DATA_PRIORITY)?;
    let control_priority = priority(
        "control_priority",
        t.control_priority,
        crate::switch::CONTROL_PRIORITY,
    )?;
    if data_priority == control_priority {
        return Err(ScenarioError::at(
            "transport.control_priority",
            "must differ from transport.priority",
        ));
    }
    let host_rate = topology.host_link().rate_bps;
    let cc = match t.cc.as_str() {
        "none" => {
            if t.dcqcn.is_some() {
                return Err(ScenarioError::at(
                    "transport.dcqcn",
                    "DCQCN parameters need cc = \"dcqcn\"",
                ));
            }
            CongestionControl::None
        }
        "dcqcn" => CongestionControl::Dcqcn(dcqcn(t.dcqcn.as_ref(), host_rate)?),
        other => {
            return Err(ScenarioError::at(
                "transport.cc",
                format!("expected one of \"none\", \"dcqcn\", found {other:?}"),
            ))
        }
    };
    let per_packet = matches!(
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
    );
    let loss_recovery = match t.loss_recovery.as_deref() {
        None if per_packet => LossRecovery::Selective,
        None | Some("go_back_n") => LossRecovery::GoBackN,
        Some("selective") => LossRecovery::Selective,
        Some(other) => {
            return Err(ScenarioError::at(
                "transport.loss_recovery",
                format!("expected one of \"go_back_n\", \"selective\", found {other:?}"),
            ))
        }
    };
    let transport = TransportSpec {
        mtu_bytes: t.mtu.0,
        header_bytes: t.header.0,
        ack_bytes: t.ack_size.0,
        ack_every: t.ack_every as u32,
        rto_ps: t.rto.0,
        cc,
        loss_recovery,
        reorder_threshold: match t.reorder_threshold {
            None => 8,
            Some(r) if (1..=1_000_000).contains(&r) => r as u32,
            Some(r) => {
                return Err(ScenarioError::at(
                    "transport.reorder_threshold",
                    format!("expected an integer in 1..=1000000, found {r}"),
                ))
            }
        },
        data_priority,
        control_priority,
    };
    if let LoadBalancing::NonMinimal(nm) = &mut routing.load_balancing {
        if file.routing.ugal_threshold.is_none() {
            nm.threshold_bytes = 2 * (transport.mtu_bytes + transport.header_bytes);
        }
    }
    let mut switch = switch(&file.switch, &transport)?;
    hop_classes(&routing, &transport, &mut switch)?;
    let trace = trace(&file.trace)?;

    let mut workloads = Vec::with_capacity(file.workload.len());
    for (i, w) in file.workload.iter().enumerate() {
        let ctx = WorkloadContext {
            n_hosts,
            seed: file.seed,
            stop,
            host_rate_bps: host_rate,
            mtu_bytes: transport.mtu_bytes,
            header_bytes: transport.header_bytes,
            group_size: host_group_size(&topology),
        };
        let spec = workload(i, w, &ctx)?;
        let name = w.name.clone().unwrap_or_else(|| spec.kind().to_string());
        workloads.push(NamedWorkload { name, spec });
    }

    Ok(Scenario {
        name: file.name.clone().unwrap_or_else(|| "scenario".into()),
        seed: file.seed,
        stop,
        topology,
        switch,
        routing,
        faults,
        transport,
        workloads,
        trace,
        warmup_ps,
        nic_arbitration,
    })
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

/// `[nic] arbitration`.
fn nic_arbitration(nic: Option<&super::schema::NicFile>) -> Res<NicArbitration> {
    match nic.and_then(|n| n.arbitration.as_deref()) {
        None | Some("round_robin") => Ok(NicArbitration::RoundRobin),
        Some("fifo") => Ok(NicArbitration::Fifo),
        Some(other) => Err(ScenarioError::at(
            "nic.arbitration",
            format!("expected one of \"round_robin\", \"fifo\", found {other:?}"),
        )),
    }
}

/// Hosts per group for the synthetic patterns: a dragonfly group (p*a), a Dragonfly+ group
/// (leaves*hosts_per_leaf), a fat-tree pod (k*k/4) or a leaf (hosts_per_leaf). Hosts are numbered
/// group by group.
fn host_group_size(t: &TopologySpec) -> u32 {
    match *t {
        TopologySpec::Dragonfly { p, a, .. } => p * a,
        TopologySpec::DragonflyPlus {
            leaves,
            hosts_per_leaf,
            ..
        } => leaves * hosts_per_leaf,
        TopologySpec::FatTree { k, .. } => k * k / 4,
        TopologySpec::LeafSpine { hosts_per_leaf, .. } => hosts_per_leaf,
    }
}

fn count(path: &str, v: Option<i64>, min: i64, max: i64, what: &str) -> Res<u32> {
    match v {
        None => Err(ScenarioError::at(path, format!("missing: expected {what}"))),
        Some(x) if x < min || x > max => Err(ScenarioError::at(
            path,
            format!("expected {what} in {min}..={max}, found {x}"),
        )),
        Some(x) => Ok(x as u32),
    }
}

/// Reject keys that belong to another topology kind, so a typo'd kind cannot silently ignore them.
fn forbid(kind: &str, keys: &[(&str, bool)]) -> Res<()> {
    for &(key, present) in keys {
        if present {
            return Err(ScenarioError::at(
                format!("topology.{key}"),
                format!("unknown key for kind = \"{kind}\""),
            ));
        }
    }
    Ok(())
}

fn topology(t: &TopologyFile) -> Res<TopologySpec> {
    let rate = t.link_rate.map(|r| r.0).unwrap_or(DEFAULT_RATE);
    let delay = t.link_delay.map(|d| d.0).unwrap_or(DEFAULT_DELAY);
    let host = LinkSpec {
        rate_bps: t.host_link_rate.map(|r| r.0).unwrap_or(rate),
        delay_ps: t.host_link_delay.map(|d| d.0).unwrap_or(delay),
    };
    let fabric = LinkSpec {
        rate_bps: t.fabric_link_rate.map(|r| r.0).unwrap_or(rate),
        delay_ps: t.fabric_link_delay.map(|d| d.0).unwrap_or(delay),
    };
    match t.kind.as_str() {
        "fat_tree" => {
            forbid(
                "fat_tree",
                &[
                    ("leaves", t.leaves.is_some()),
                    ("spines", t.spines.is_some()),
                    ("hosts_per_leaf", t.hosts_per_leaf.is_some()),
                    ("p", t.p.is_some()),
                    ("a", t.a.is_some()),
                    ("h", t.h.is_some()),
                    ("g", t.g.is_some()),
                    ("arrangement", t.arrangement.is_some()),
                    ("global_link_rate", t.global_link_rate.is_some()),
                    ("global_link_delay", t.global_link_delay.is_some()),
                ],
            )?;
            let k = count(
                "topology.k",
                t.k,
                2,
                64,
                "an even integer (ports per switch)",
            )?;
            if k % 2 != 0 {
                return Err(ScenarioError::at(
                    "topology.k",
                    format!("expected an even integer, found {k}"),
                ));
            }
            let core = LinkSpec {
                rate_bps: t.core_link_rate.map(|r| r.0).unwrap_or(fabric.rate_bps),
                delay_ps: t.core_link_delay.map(|d| d.0).unwrap_or(fabric.delay_ps),
            };
            Ok(TopologySpec::FatTree {
                k,
                host,
                fabric,
                core,
            })
        }
        "leaf_spine" => {
            forbid(
                "leaf_spine",
                &[
                    ("k", t.k.is_some()),
                    ("core_link_rate", t.core_link_rate.is_some()),
                    ("core_link_delay", t.core_link_delay.is_some()),
                    ("p", t.p.is_some()),
                    ("a", t.a.is_some()),
                    ("h", t.h.is_some()),
                    ("g", t.g.is_some()),
                    ("arrangement", t.arrangement.is_some()),
                    ("global_link_rate", t.global_link_rate.is_some()),
                    ("global_link_delay", t.global_link_delay.is_some()),
                ],
            )?;
            let leaves = count(
                "topology.leaves",
                t.leaves,
                1,
                4096,
                "an integer number of leaf switches",
            )?;
            let spines = count(
                "topology.spines",
                t.spines,
                1,
                4096,
                "an integer number of spine switches",
            )?;
            let hosts_per_leaf = count(
                "topology.hosts_per_leaf",
                t.hosts_per_leaf,
                1,
                4096,
                "an integer number of hosts per leaf",
            )?;
            if leaves as u64 * hosts_per_leaf as u64 > 1 << 20 {
                return Err(ScenarioError::at(
                    "topology.hosts_per_leaf",
                    "more than 2^20 hosts",
                ));
            }
            Ok(TopologySpec::LeafSpine {
                leaves,
                spines,
                hosts_per_leaf,
                host,
                fabric,
            })
        }
        "dragonfly" | "dragonfly_plus" => dragonfly(t, host, fabric),
        other => Err(ScenarioError::at(
            "topology.kind",
            format!(
                "expected one of \"fat_tree\", \"leaf_spine\", \"dragonfly\", \"dragonfly_plus\", found {other:?}"
            ),
        )),
    }
}

fn host_id(path: String, v: i64, n_hosts: u32) -> Res<u32> {
    if v < 0 || v >= n_hosts as i64 {
        return Err(ScenarioError::at(
            path,
            format!(
                "host id {v} is out of range: this topology has hosts 0..={}",
                n_hosts - 1
            ),
        ));
    }
    Ok(v as u32)
}

/// What validating a workload needs to know of the rest of the scenario.
struct WorkloadContext {
    n_hosts: u32,
    seed: u64,
    stop: StopAt,
    host_rate_bps: u64,
    mtu_bytes: u64,
    header_bytes: u64,
    /// Hosts per group (synthetic patterns).
    group_size: u32,
}

/// The most flows one workload may generate (a guard against a typo'd duration or load).
const MAX_WORKLOAD_FLOWS: f64 = 50e6;

/// A list of distinct host ids (`path.j` names a bad entry).
fn host_list(path: &str, list: &[i64], n_hosts: u32) -> Res<Vec<u32>> {
    let mut out = Vec::with_capacity(list.len());
    let mut seen = vec![false; n_hosts as usize];
    for (j, &h) in list.iter().enumerate() {
        let id = host_id(format!("{path}.{j}"), h, n_hosts)?;
        if std::mem::replace(&mut seen[id as usize], true) {
            return Err(ScenarioError::at(
                format!("{path}.{j}"),
                format!("host {id} is listed twice"),
            ));
        }
        out.push(id);
    }
    Ok(out)
}

/// `hosts` if given (distinct ids, at least two), else every host.
fn hosts_or_all(i: usize, w: &WorkloadFile, n_hosts: u32, what: &str) -> Res<Vec<u32>> {
    let path = format!("workload.{i}.hosts");
    let hosts = match &w.hosts {
        None => (0..n_hosts).collect(),
        Some(list) => host_list(&path, list, n_hosts)?,
    };
    if hosts.len() < 2 {
        return Err(ScenarioError::at(
            path,
            format!("{what} needs at least two hosts"),
        ));
    }
    Ok(hosts)
}

/// A file path of the scenario, relative paths taken from the current directory.
fn scenario_file_path(s: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(s)
}

fn workload(i: usize, w: &WorkloadFile, ctx: &WorkloadContext) -> Res<WorkloadSpec> {
    let n_hosts = ctx.n_hosts;
    let p = |key: &str| format!("workload.{i}.{key}");
    const KINDS: &str = "\"flows\", \"incast\", \"permutation\", \"all_to_all\", \"poisson\", \
                         \"collective\", \"replay\", \"synthetic\"";
    let allowed: &[&str] = match w.kind.as_str() {
        "flows" => &["flows", "start"],
        "incast" => &[
            "receiver",
            "senders",
            "size",
            "start",
            "rounds",
            "round_gap",
        ],
        "permutation" => &["hosts", "size", "start"],
        "all_to_all" => &["hosts", "size", "start", "stagger"],
        "poisson" => &[
            "cdf", "load", "hosts", "pairs", "start", "duration", "count",
        ],
        "collective" => &[
            "op",
            "algorithm",
            "hosts",
            "groups",
            "group_size",
            "group_layout",
            "rank_order",
            "size",
            "start",
            "iterations",
            "compute_gap",
            "chunk_size",
        ],
        "replay" => &["file", "start"],
        "synthetic" => &[
            "pattern",
            "load",
            "size",
            "process",
            "shift",
            "hot_spot",
            "hot_fraction",
            "start",
        ],
        other => {
            return Err(ScenarioError::at(
                p("kind"),
                format!("expected one of {KINDS}, found {other:?}"),
            ))
        }
    };
    let present = [
        ("start", w.start.is_some()),
        ("size", w.size.is_some()),
        ("flows", w.flows.is_some()),
        ("receiver", w.receiver.is_some()),
        ("senders", w.senders.is_some()),
        ("rounds", w.rounds.is_some()),
        ("round_gap", w.round_gap.is_some()),
        ("hosts", w.hosts.is_some()),
        ("stagger", w.stagger.is_some()),
        ("cdf", w.cdf.is_some()),
        ("load", w.load.is_some()),
        ("duration", w.duration.is_some()),
        ("count", w.count.is_some()),
        ("pairs", w.pairs.is_some()),
        ("op", w.op.is_some()),
        ("algorithm", w.algorithm.is_some()),
        ("groups", w.groups.is_some()),
        ("group_size", w.group_size.is_some()),
        ("group_layout", w.group_layout.is_some()),
        ("rank_order", w.rank_order.is_some()),
        ("iterations", w.iterations.is_some()),
        ("compute_gap", w.compute_gap.is_some()),
        ("chunk_size", w.chunk_size.is_some()),
        ("file", w.file.is_some()),
        ("pattern", w.pattern.is_some()),
        ("process", w.process.is_some()),
        ("shift", w.shift.is_some()),
        ("hot_spot", w.hot_spot.is_some()),
        ("hot_fraction", w.hot_fraction.is_some()),
    ];
    for (key, is_set) in present {
        if is_set && !allowed.contains(&key) {
            return Err(ScenarioError::at(
                p(key),
                format!("unknown key for kind = \"{}\"", w.kind),
            ));
        }
    }
    let start_ps = w.start.map(|d| d.0).unwrap_or(0);
    let size = |key: &str| -> Res<u64> {
        match w.size {
            None => Err(ScenarioError::at(
                p(key),
                "missing: expected a flow size like \"1MB\"",
            )),
            Some(s) => positive_size(&p(key), s.0),
        }
    };
    match w.kind.as_str() {
        "flows" => {
            let entries = w.flows.as_ref().ok_or_else(|| {
                ScenarioError::at(
                    p("flows"),
                    "missing: expected a list of {src, dst, size, start}",
                )
            })?;
            let mut flows = Vec::with_capacity(entries.len());
            for (j, f) in entries.iter().enumerate() {
                let fp = |key: &str| format!("workload.{i}.flows.{j}.{key}");
                let src = host_id(fp("src"), f.src, n_hosts)?;
                let dst = host_id(fp("dst"), f.dst, n_hosts)?;
                if src == dst {
                    return Err(ScenarioError::at(
                        fp("dst"),
                        "a flow's dst must differ from its src",
                    ));
                }
                if f.size.0 == 0 {
                    return Err(ScenarioError::at(fp("size"), "expected a positive size"));
                }
                flows.push(FlowSpec {
                    src,
                    dst,
                    size_bytes: f.size.0,
                    start_ps: f.start.map(|d| d.0).unwrap_or(start_ps),
                });
            }
            Ok(WorkloadSpec::Flows { flows })
        }
        "incast" => {
            let receiver = match w.receiver {
                None => {
                    return Err(ScenarioError::at(
                        p("receiver"),
                        "missing: expected a host id",
                    ))
                }
                Some(r) => host_id(p("receiver"), r, n_hosts)?,
            };
            let senders = match &w.senders {
                None => {
                    return Err(ScenarioError::at(
                        p("senders"),
                        "missing: expected a count or a list of host ids",
                    ))
                }
                Some(Senders::Count(c)) => {
                    let n = count(
                        &p("senders"),
                        Some(*c),
                        1,
                        n_hosts as i64 - 1,
                        "a number of senders",
                    )?;
                    let mut others: Vec<u32> = (0..n_hosts).filter(|&h| h != receiver).collect();
                    let mut r = rng::stream(ctx.seed, Purpose::Workload, i as u64);
                    r.shuffle(&mut others);
                    others.truncate(n as usize);
                    others.sort_unstable();
                    others
                }
                Some(Senders::List(list)) => {
                    if list.is_empty() {
                        return Err(ScenarioError::at(
                            p("senders"),
                            "expected at least one sender",
                        ));
                    }
                    let mut out = Vec::with_capacity(list.len());
                    for (j, &h) in list.iter().enumerate() {
                        let id = host_id(format!("workload.{i}.senders.{j}"), h, n_hosts)?;
                        if id == receiver {
                            return Err(ScenarioError::at(
                                format!("workload.{i}.senders.{j}"),
                                "the receiver cannot be one of the senders",
                            ));
                        }
                        out.push(id);
                    }
                    out
                }
            };
            let rounds = count(
                &p("rounds"),
                Some(w.rounds.unwrap_or(1)),
                1,
                1_000_000,
                "a number of rounds",
            )?;
            Ok(WorkloadSpec::Incast {
                receiver,
                senders,
                size_bytes: size("size")?,
                start_ps,
                rounds,
                round_gap_ps: w.round_gap.map(|d| d.0).unwrap_or(0),
            })
        }
        "permutation" => {
            let hosts = hosts_or_all(i, w, n_hosts, "a permutation")?;
            Ok(WorkloadSpec::Permutation {
                hosts,
                size_bytes: size("size")?,
                start_ps,
            })
        }
        "all_to_all" => {
            let hosts = hosts_or_all(i, w, n_hosts, "an all-to-all")?;
            Ok(WorkloadSpec::AllToAll {
                hosts,
                size_bytes: size("size")?,
                start_ps,
                stagger_ps: w.stagger.map(|d| d.0).unwrap_or(0),
            })
        }
        "poisson" => poisson(i, w, ctx, start_ps).map(WorkloadSpec::Poisson),
        "collective" => collective(i, w, ctx, start_ps).map(WorkloadSpec::Collective),
        "synthetic" => synthetic(i, w, ctx, start_ps).map(WorkloadSpec::Synthetic),
        "replay" => {
            let file = w.file.as_ref().ok_or_else(|| {
                ScenarioError::at(
                    p("file"),
                    "missing: expected the path of a CSV or Arrow file of flows",
                )
            })?;
            let data = crate::workload::replay::read_flow_file(&scenario_file_path(file), n_hosts)
                .map_err(|e| ScenarioError::at(p("file"), format!("{file}: {e}")))?;
            Ok(WorkloadSpec::Replay(ReplaySpec {
                file: file.clone(),
                flows: Arc::new(data.flows),
                tags: Arc::new(data.tags),
                tag_names: Arc::new(data.tag_names),
                offset_ps: start_ps,
            }))
        }
        _ => unreachable!("kind checked above"),
    }
}

fn poisson(i: usize, w: &WorkloadFile, ctx: &WorkloadContext, start_ps: u64) -> Res<PoissonSpec> {
    let p = |key: &str| format!("workload.{i}.{key}");
    let n_hosts = ctx.n_hosts;
    let cdf_name = w.cdf.as_ref().ok_or_else(|| {
        ScenarioError::at(
            p("cdf"),
            format!(
                "missing: expected a flow-size distribution: one of {} or the path of a CSV file",
                quoted_list(&cdf::builtin_names())
            ),
        )
    })?;
    let cdf = match Cdf::builtin(cdf_name) {
        Some(c) => c,
        None => {
            let path = scenario_file_path(cdf_name);
            let looks_like_path = cdf_name.contains('/')
                || cdf_name.contains('\\')
                || cdf_name.contains('.')
                || path.is_file();
            if !looks_like_path {
                return Err(ScenarioError::at(
                    p("cdf"),
                    format!(
                        "expected one of {} or the path of a CSV file (size_bytes,cdf), found {cdf_name:?}",
                        quoted_list(&cdf::builtin_names())
                    ),
                ));
            }
            Cdf::read_file(&path)
                .map_err(|e| ScenarioError::at(p("cdf"), format!("{cdf_name}: {e}")))?
        }
    };
    const LOAD: &str = "the offered load as a fraction of the host link rate";
    let load = match w.load {
        None => {
            return Err(ScenarioError::at(
                p("load"),
                format!("missing: expected {LOAD}, like 0.5"),
            ))
        }
        Some(l) if !(l.is_finite() && l > 0.0 && l <= 10.0) => {
            return Err(ScenarioError::at(
                p("load"),
                format!("expected {LOAD} in (0, 10], like 0.5, found {l}"),
            ))
        }
        Some(l) => l,
    };
    let (senders, peers) = match (&w.pairs, &w.hosts) {
        (Some(_), Some(_)) => {
            return Err(ScenarioError::at(
                p("pairs"),
                "give either hosts (random pairs among them) or pairs, not both",
            ))
        }
        (Some(pairs), None) => {
            if pairs.is_empty() {
                return Err(ScenarioError::at(p("pairs"), "expected at least one pair"));
            }
            let mut senders: Vec<u32> = Vec::new();
            let mut dsts: Vec<Vec<u32>> = Vec::new();
            let mut index_of = vec![u32::MAX; n_hosts as usize];
            for (j, pair) in pairs.iter().enumerate() {
                let pp = format!("workload.{i}.pairs.{j}");
                if pair.len() != 2 {
                    return Err(ScenarioError::at(
                        pp,
                        format!("expected a pair [src, dst], found {} values", pair.len()),
                    ));
                }
                let src = host_id(format!("{pp}.0"), pair[0], n_hosts)?;
                let dst = host_id(format!("{pp}.1"), pair[1], n_hosts)?;
                if src == dst {
                    return Err(ScenarioError::at(
                        format!("{pp}.1"),
                        "a pair's dst must differ from its src",
                    ));
                }
                let k = &mut index_of[src as usize];
                if *k == u32::MAX {
                    *k = senders.len() as u32;
                    senders.push(src);
                    dsts.push(Vec::new());
                }
                let list = &mut dsts[*k as usize];
                if list.contains(&dst) {
                    return Err(ScenarioError::at(pp, "pair listed twice"));
                }
                list.push(dst);
            }
            (senders, PoissonPeers::Pairs(dsts))
        }
        (None, _) => {
            let hosts = hosts_or_all(i, w, n_hosts, "a poisson workload")?;
            (hosts.clone(), PoissonPeers::Among(hosts))
        }
    };
    let end_ps = match (w.duration, ctx.stop) {
        (Some(d), _) => {
            if d.0 == 0 {
                return Err(ScenarioError::at(
                    p("duration"),
                    "expected a positive duration",
                ));
            }
            // No flow is generated at or after the stop time: it could never start.
            let end = start_ps.saturating_add(d.0);
            match ctx.stop {
                StopAt::Time(t) if t <= start_ps => {
                    return Err(ScenarioError::at(
                        p("start"),
                        "the workload starts after the scenario's stop time",
                    ))
                }
                StopAt::Time(t) => Some(end.min(t)),
                StopAt::AllFlowsDone => Some(end),
            }
        }
        (None, StopAt::Time(t)) => {
            if t <= start_ps {
                return Err(ScenarioError::at(
                    p("start"),
                    "the workload starts after the scenario's stop time",
                ));
            }
            Some(t)
        }
        (None, StopAt::AllFlowsDone) => None,
    };
    let count = match w.count {
        None => None,
        Some(c) => Some(count_u64(&p("count"), c)?),
    };
    if end_ps.is_none() && count.is_none() {
        return Err(ScenarioError::at(
            p("duration"),
            "missing: with stop = \"all_flows_done\", give the arrival window (duration = \"5ms\") \
             or a number of flows (count = 10000)",
        ));
    }
    // Expected number of flows: senders x window / mean gap.
    let mean_gap_ps = cdf.mean_bytes() * 8.0 * crate::units::PS_PER_SEC as f64
        / (load * ctx.host_rate_bps as f64);
    let expected = match end_ps {
        Some(end) => senders.len() as f64 * (end - start_ps) as f64 / mean_gap_ps,
        None => f64::INFINITY,
    }
    .min(count.map_or(f64::INFINITY, |c| c as f64));
    if expected > MAX_WORKLOAD_FLOWS {
        return Err(ScenarioError::at(
            p(if count.is_some() && end_ps.is_none() {
                "count"
            } else {
                "duration"
            }),
            format!(
                "this would generate about {expected:.3e} flows (at most {MAX_WORKLOAD_FLOWS:.0e}): \
                 shorten the window or lower the count"
            ),
        ));
    }
    Ok(PoissonSpec {
        cdf_name: cdf_name.clone(),
        cdf: Arc::new(cdf),
        load,
        senders,
        peers,
        start_ps,
        end_ps,
        count,
        host_rate_bps: ctx.host_rate_bps,
        mtu_bytes: ctx.mtu_bytes,
        header_bytes: ctx.header_bytes,
    })
}

fn synthetic(
    i: usize,
    w: &WorkloadFile,
    ctx: &WorkloadContext,
    start_ps: u64,
) -> Res<SyntheticSpec> {
    let p = |key: &str| format!("workload.{i}.{key}");
    let n_hosts = ctx.n_hosts;
    let end_ps = match ctx.stop {
        StopAt::Time(t) => t,
        StopAt::AllFlowsDone => return Err(ScenarioError::at(
            p("kind"),
            "a synthetic workload needs the top-level key stop = a time (e.g. stop = \"300us\"): \
                 its hosts inject until then",
        )),
    };
    if start_ps >= end_ps {
        return Err(ScenarioError::at(
            p("start"),
            "the workload starts at or after the scenario's stop time",
        ));
    }
    const PATTERNS: &str = "\"uniform_random\", \"worst_case\", \"permutation\", \"tornado\", \
                            \"shift\", \"hot_spot\"";
    let pattern_name = w.pattern.as_deref().ok_or_else(|| {
        ScenarioError::at(p("pattern"), format!("missing: expected one of {PATTERNS}"))
    })?;
    if !matches!(
        pattern_name,
        "uniform_random" | "worst_case" | "permutation" | "tornado" | "shift" | "hot_spot"
    ) {
        return Err(ScenarioError::at(
            p("pattern"),
            format!("expected one of {PATTERNS}, found {pattern_name:?}"),
        ));
    }
    for (key, is_set, only) in [
        ("shift", w.shift.is_some(), "shift"),
        ("hot_spot", w.hot_spot.is_some(), "hot_spot"),
        ("hot_fraction", w.hot_fraction.is_some(), "hot_spot"),
    ] {
        if is_set && pattern_name != only {
            return Err(ScenarioError::at(
                p(key),
                format!("only for pattern = \"{only}\", not \"{pattern_name}\""),
            ));
        }
    }
    const LOAD: &str = "the offered load per host as a fraction of its host link rate";
    let load = match w.load {
        None => {
            return Err(ScenarioError::at(
                p("load"),
                format!("missing: expected {LOAD}, like 0.5"),
            ))
        }
        Some(l) if !(l.is_finite() && l > 0.0 && l <= 1.0) => {
            return Err(ScenarioError::at(
                p("load"),
                format!("expected {LOAD} in (0, 1], found {l}"),
            ))
        }
        Some(l) => l,
    };
    let size_bytes = match w.size {
        None => {
            return Err(ScenarioError::at(
                p("size"),
                "missing: expected a message size like \"4KiB\"",
            ))
        }
        Some(s) => positive_size(&p("size"), s.0)?,
    };
    let process = match w.process.as_deref() {
        None | Some("bernoulli") => ArrivalProcess::Bernoulli,
        Some("poisson") => ArrivalProcess::Poisson,
        Some(other) => {
            return Err(ScenarioError::at(
                p("process"),
                format!("expected one of \"bernoulli\", \"poisson\", found {other:?}"),
            ))
        }
    };
    let group_size = ctx.group_size.max(1);
    let groups = n_hosts / group_size;
    let two_groups = |what: &str| -> Res<()> {
        if groups < 2 {
            return Err(ScenarioError::at(
                p("pattern"),
                format!("{what} needs at least two groups; this topology has one group of {group_size} hosts"),
            ));
        }
        Ok(())
    };
    let pattern = match pattern_name {
        "uniform_random" => SyntheticPattern::UniformRandom,
        "permutation" => SyntheticPattern::Permutation,
        "worst_case" => {
            two_groups("worst_case")?;
            SyntheticPattern::WorstCase
        }
        "tornado" => {
            two_groups("tornado")?;
            SyntheticPattern::Tornado
        }
        "shift" => {
            let shift = w.shift.unwrap_or(group_size as i64);
            let s = shift.rem_euclid(n_hosts as i64);
            if s == 0 {
                return Err(ScenarioError::at(
                    if w.shift.is_some() { p("shift") } else { p("pattern") },
                    format!(
                        "a shift of {shift} sends every host to itself (it is a multiple of the {n_hosts} hosts)"
                    ),
                ));
            }
            SyntheticPattern::Shift(s as u32)
        }
        "hot_spot" => {
            let list = w.hot_spot.as_ref().ok_or_else(|| {
                ScenarioError::at(p("hot_spot"), "missing: expected a list of hot host ids")
            })?;
            if list.is_empty() {
                return Err(ScenarioError::at(
                    p("hot_spot"),
                    "expected at least one hot host",
                ));
            }
            let hosts = host_list(&p("hot_spot"), list, n_hosts)?;
            let fraction =
                match w.hot_fraction {
                    None => return Err(ScenarioError::at(
                        p("hot_fraction"),
                        "missing: expected the fraction of messages sent to a hot host, like 0.5",
                    )),
                    Some(f) => fraction(&p("hot_fraction"), f, 0.0, 1.0)?,
                };
            SyntheticPattern::HotSpot { hosts, fraction }
        }
        _ => unreachable!("pattern checked above"),
    };
    let packets = size_bytes.div_ceil(ctx.mtu_bytes);
    let wire_bytes = size_bytes.saturating_add(packets.saturating_mul(ctx.header_bytes));
    let slot_ps = crate::units::serialisation_ps(wire_bytes, ctx.host_rate_bps).max(1);
    let expected = n_hosts as f64 * load * (end_ps - start_ps) as f64 / slot_ps as f64;
    if expected > MAX_WORKLOAD_FLOWS {
        return Err(ScenarioError::at(
            p("load"),
            format!(
                "this would generate about {expected:.3e} messages (at most {MAX_WORKLOAD_FLOWS:.0e}): \
                 shorten the run, lower the load or send larger messages"
            ),
        ));
    }
    Ok(SyntheticSpec {
        pattern,
        process,
        load,
        size_bytes,
        n_hosts,
        group_size,
        start_ps,
        end_ps,
        host_rate_bps: ctx.host_rate_bps,
        wire_bytes,
        slot_ps,
    })
}

fn count_u64(path: &str, v: i64) -> Res<u64> {
    if v < 1 {
        return Err(ScenarioError::at(
            path,
            format!("expected a positive number of flows, found {v}"),
        ));
    }
    Ok(v as u64)
}

fn quoted_list(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

fn collective(
    i: usize,
    w: &WorkloadFile,
    ctx: &WorkloadContext,
    start_ps: u64,
) -> Res<CollectiveSpec> {
    let p = |key: &str| format!("workload.{i}.{key}");
    let n_hosts = ctx.n_hosts;
    let op = match w.op.as_deref() {
        None => {
            return Err(ScenarioError::at(
                p("op"),
                "missing: expected one of \"all_reduce\", \"all_gather\", \"reduce_scatter\", \"all_to_all\"",
            ))
        }
        Some("all_reduce") => CollectiveOp::AllReduce,
        Some("all_gather") => CollectiveOp::AllGather,
        Some("reduce_scatter") => CollectiveOp::ReduceScatter,
        Some("all_to_all") => CollectiveOp::AllToAll,
        Some(other) => {
            return Err(ScenarioError::at(
                p("op"),
                format!(
                    "expected one of \"all_reduce\", \"all_gather\", \"reduce_scatter\", \
                     \"all_to_all\", found {other:?}"
                ),
            ))
        }
    };
    let choices: &[&str] = match op {
        CollectiveOp::AllReduce => &["ring", "tree", "halving_doubling"],
        CollectiveOp::AllGather | CollectiveOp::ReduceScatter => &["ring", "halving_doubling"],
        CollectiveOp::AllToAll => &["direct", "pairwise"],
    };
    let algorithm_name = w.algorithm.as_deref().unwrap_or(choices[0]);
    if !choices.contains(&algorithm_name) {
        return Err(ScenarioError::at(
            p("algorithm"),
            format!(
                "expected one of {} for op = \"{}\", found {algorithm_name:?}",
                quoted_list(choices),
                op.name()
            ),
        ));
    }
    let algorithm = match algorithm_name {
        "ring" => CollectiveAlgorithm::Ring,
        "tree" => CollectiveAlgorithm::Tree,
        "halving_doubling" => CollectiveAlgorithm::HalvingDoubling,
        "direct" => CollectiveAlgorithm::Direct,
        _ => CollectiveAlgorithm::Pairwise,
    };

    let groups: Vec<Vec<u32>> = match &w.groups {
        Some(list) => {
            for (key, set) in [
                ("hosts", w.hosts.is_some()),
                ("group_size", w.group_size.is_some()),
                ("group_layout", w.group_layout.is_some()),
                ("rank_order", w.rank_order.is_some()),
            ] {
                if set {
                    return Err(ScenarioError::at(
                        p(key),
                        "explicit groups give every group's hosts in rank order: leave out this key",
                    ));
                }
            }
            if list.is_empty() {
                return Err(ScenarioError::at(
                    p("groups"),
                    "expected at least one group",
                ));
            }
            let mut groups = Vec::with_capacity(list.len());
            for (g, hosts) in list.iter().enumerate() {
                let gp = format!("workload.{i}.groups.{g}");
                let hosts = host_list(&gp, hosts, n_hosts)?;
                if hosts.len() < 2 {
                    return Err(ScenarioError::at(gp, "a group needs at least two ranks"));
                }
                groups.push(hosts);
            }
            groups
        }
        None => {
            let mut hosts = hosts_or_all(i, w, n_hosts, "a collective")?;
            match w.rank_order.as_deref() {
                None | Some("hosts") => {}
                Some("shuffled") => {
                    let mut r = rng::stream(ctx.seed, Purpose::Workload, 2_000_000 + i as u64);
                    r.shuffle(&mut hosts);
                }
                Some(other) => {
                    return Err(ScenarioError::at(
                        p("rank_order"),
                        format!("expected \"hosts\" or \"shuffled\", found {other:?}"),
                    ))
                }
            }
            let len = hosts.len();
            let group_size = match w.group_size {
                None => {
                    if w.group_layout.is_some() {
                        return Err(ScenarioError::at(
                            p("group_layout"),
                            "a group layout needs group_size",
                        ));
                    }
                    len
                }
                Some(g) => {
                    let g = count(
                        &p("group_size"),
                        Some(g),
                        2,
                        len as i64,
                        "a number of ranks per group",
                    )? as usize;
                    if len % g != 0 {
                        return Err(ScenarioError::at(
                            p("group_size"),
                            format!("{len} hosts do not split into groups of {g}"),
                        ));
                    }
                    g
                }
            };
            let m = len / group_size;
            match w.group_layout.as_deref() {
                None | Some("block") => hosts.chunks(group_size).map(<[u32]>::to_vec).collect(),
                Some("strided") => (0..m)
                    .map(|j| (0..group_size).map(|r| hosts[j + r * m]).collect())
                    .collect(),
                Some(other) => {
                    return Err(ScenarioError::at(
                        p("group_layout"),
                        format!("expected \"block\" or \"strided\", found {other:?}"),
                    ))
                }
            }
        }
    };

    let size_bytes = match w.size {
        None => {
            return Err(ScenarioError::at(
                p("size"),
                "missing: expected the collective's size like \"64MiB\"",
            ))
        }
        Some(s) => s.0,
    };
    let max_ranks = groups.iter().map(Vec::len).max().unwrap_or(0) as u64;
    if size_bytes < max_ranks {
        return Err(ScenarioError::at(
            p("size"),
            format!("expected at least one byte per rank ({max_ranks} B), found {size_bytes} B"),
        ));
    }
    if algorithm == CollectiveAlgorithm::HalvingDoubling && op != CollectiveOp::AllReduce {
        if let Some(g) = groups.iter().position(|g| !g.len().is_power_of_two()) {
            return Err(ScenarioError::at(
                p("algorithm"),
                format!(
                    "halving_doubling {} needs a power-of-two group; group {g} has {} ranks (use ring)",
                    op.name(),
                    groups[g].len()
                ),
            ));
        }
    }
    let iterations = count(
        &p("iterations"),
        Some(w.iterations.unwrap_or(1)),
        1,
        1_000_000,
        "a number of iterations",
    )?;
    let chunk_bytes = match (w.chunk_size, algorithm) {
        (Some(_), a) if a != CollectiveAlgorithm::Tree => {
            return Err(ScenarioError::at(
                p("chunk_size"),
                "only algorithm = \"tree\" is pipelined in chunks",
            ))
        }
        (Some(c), _) if c.0 == 0 => {
            return Err(ScenarioError::at(
                p("chunk_size"),
                "expected a positive size",
            ))
        }
        (Some(c), _) => c.0,
        (None, _) => crate::workload::collective::DEFAULT_TREE_CHUNK,
    };
    let spec = CollectiveSpec {
        op,
        algorithm,
        groups,
        size_bytes,
        iterations,
        compute_gap_ps: w.compute_gap.map(|d| d.0).unwrap_or(0),
        start_ps,
        chunk_bytes,
        chunk_interval_ps: crate::workload::collective::chunk_interval(
            chunk_bytes,
            ctx.mtu_bytes,
            ctx.header_bytes,
            ctx.host_rate_bps,
        ),
    };
    let flows = crate::workload::collective::flows_per_iteration(&spec) as f64 * iterations as f64;
    if flows > MAX_WORKLOAD_FLOWS {
        return Err(ScenarioError::at(
            p(if iterations > 1 { "iterations" } else { "size" }),
            format!(
                "this would generate {flows:.3e} flows (at most {MAX_WORKLOAD_FLOWS:.0e}): fewer \
                 iterations{}",
                if algorithm == CollectiveAlgorithm::Tree {
                    " or a larger chunk_size"
                } else {
                    ""
                }
            ),
        ));
    }
    Ok(spec)
}

fn positive_size(path: &str, v: u64) -> Res<u64> {
    if v == 0 {
        return Err(ScenarioError::at(path, "expected a positive size"));
    }
    Ok(v)
}

fn fraction(path: &str, v: f64, lo: f64, hi: f64) -> Res<f64> {
    if !(v.is_finite() && v >= lo && v <= hi) {
        return Err(ScenarioError::at(
            path,
            format!("expected a number in {lo}..={hi}, found {v}"),
        ));
    }
    Ok(v)
}

fn priority_mask(path: &str, list: Option<&Vec<i64>>, default: u8) -> Res<u8> {
    let Some(list) = list else {
        return Ok(1 << default);
    };
    let mut mask = 0u8;
    for (i, &p) in list.iter().enumerate() {
        if !(0..8).contains(&p) {
            return Err(ScenarioError::at(
                format!("{path}.{i}"),
                format!("expected a priority in 0..=7, found {p}"),
            ));
        }
        mask |= 1 << p;
    }
    Ok(mask)
}

fn switch(sw: &SwitchFile, t: &TransportSpec) -> Res<SwitchSpec> {
    positive_size("switch.buffer", sw.buffer.0)?;
    if let Some(b) = sw.port_buffer {
        positive_size("switch.port_buffer", b.0)?;
    }
    if let Some(b) = sw.queue_limit {
        positive_size("switch.queue_limit", b.0)?;
    }
    if let Some(a) = sw.alpha {
        fraction("switch.alpha", a, 1.0 / 1024.0, 1024.0)?;
    }
    let scheduler = match sw.scheduler.as_deref() {
        None | Some("strict") => {
            if sw.weights.is_some() {
                return Err(ScenarioError::at(
                    "switch.weights",
                    "weights need scheduler = \"dwrr\"",
                ));
            }
            Scheduler::Strict
        }
        Some("dwrr") => {
            let w = sw.weights.as_ref().ok_or_else(|| {
                ScenarioError::at(
                    "switch.weights",
                    "missing: expected eight weights, one per priority",
                )
            })?;
            if w.len() != 8 {
                return Err(ScenarioError::at(
                    "switch.weights",
                    format!("expected eight weights, found {}", w.len()),
                ));
            }
            let mut weights = [0u32; 8];
            for (i, &x) in w.iter().enumerate() {
                if !(1..=1_000_000).contains(&x) {
                    return Err(ScenarioError::at(
                        format!("switch.weights.{i}"),
                        format!("expected a weight in 1..=1000000, found {x}"),
                    ));
                }
                weights[i] = x as u32;
            }
            Scheduler::Dwrr(weights)
        }
        Some(other) => {
            return Err(ScenarioError::at(
                "switch.scheduler",
                format!("expected one of \"strict\", \"dwrr\", found {other:?}"),
            ))
        }
    };
    let ecn = match &sw.ecn {
        Some(e) if e.enabled => {
            let kmin = e.kmin.map(|s| s.0).unwrap_or(5_000);
            let kmax = e.kmax.map(|s| s.0).unwrap_or(200_000);
            if kmax < kmin {
                return Err(ScenarioError::at(
                    "switch.ecn.kmax",
                    "expected kmax >= kmin",
                ));
            }
            let pmax = fraction("switch.ecn.pmax", e.pmax.unwrap_or(0.01), 0.0, 1.0)?;
            let on_dequeue = match e.mark.as_deref() {
                None | Some("dequeue") => true,
                Some("enqueue") => false,
                Some(other) => {
                    return Err(ScenarioError::at(
                        "switch.ecn.mark",
                        format!("expected \"dequeue\" or \"enqueue\", found {other:?}"),
                    ))
                }
            };
            let priorities = priority_mask(
                "switch.ecn.priorities",
                e.priorities.as_ref(),
                t.data_priority,
            )?;
            Some(EcnSpec {
                kmin_bytes: kmin,
                kmax_bytes: kmax,
                pmax,
                on_dequeue,
                priorities,
            })
        }
        _ => None,
    };
    let pfc = match &sw.pfc {
        Some(p) if p.enabled => {
            let priorities = priority_mask(
                "switch.pfc.priorities",
                p.priorities.as_ref(),
                t.data_priority,
            )?;
            if priorities & (1 << t.control_priority) != 0 {
                return Err(ScenarioError::at(
                    "switch.pfc.priorities",
                    "the control priority (ACK, CNP) cannot be lossless: pausing it can deadlock the transport",
                ));
            }
            let xoff = match (p.xoff, p.beta) {
                (Some(_), Some(_)) => {
                    return Err(ScenarioError::at(
                        "switch.pfc.beta",
                        "give either a static xoff or a dynamic beta, not both",
                    ))
                }
                (Some(x), None) => PfcThreshold::Static(positive_size("switch.pfc.xoff", x.0)?),
                (None, b) => PfcThreshold::Dynamic(fraction(
                    "switch.pfc.beta",
                    b.unwrap_or(1.0),
                    1.0 / 1024.0,
                    1024.0,
                )?),
            };
            let xon_offset_bytes = p
                .xon_offset
                .map(|s| s.0)
                .unwrap_or(2 * (t.mtu_bytes + t.header_bytes));
            if let Some(h) = p.headroom {
                positive_size("switch.pfc.headroom", h.0)?;
            }
            Some(PfcSpec {
                priorities,
                xoff,
                xon_offset_bytes,
                headroom_bytes: p.headroom.map(|s| s.0),
            })
        }
        _ => None,
    };
    Ok(SwitchSpec {
        buffer_bytes: sw.buffer.0,
        port_buffer_bytes: sw.port_buffer.map(|b| b.0),
        latency_ps: sw.latency.0,
        alpha: sw.alpha,
        queue_limit_bytes: sw.queue_limit.map(|b| b.0),
        scheduler,
        ecn,
        pfc,
    })
}

/// DCQCN parameters: the variant's defaults, then every key the user set.
fn dcqcn(d: Option<&DcqcnFile>, host_rate_bps: u64) -> Res<DcqcnSpec> {
    let default = DcqcnFile::default();
    let d = d.unwrap_or(&default);
    const US: u64 = 1_000_000;
    let mut s = match d.variant.as_deref() {
        None | Some("paper") => DcqcnSpec {
            // Zhu et al., SIGCOMM 2015 (R_HAI from the author's ns3-rdma config; min rate its code default).
            mellanox: false,
            g: 1.0 / 256.0,
            alpha_init: 1.0,
            cnp_interval_ps: 50 * US,
            alpha_interval_ps: 55 * US,
            rate_timer_ps: 55 * US,
            byte_counter_bytes: 10_000_000,
            fast_recovery: 5,
            rate_ai_bps: 40_000_000,
            rate_hai_bps: 200_000_000,
            min_rate_bps: 100_000_000,
            rate_decrease_interval_ps: 0,
            clamp_target_rate: true,
        },
        Some("mellanox") => {
            // HPCC repository's "Mellanox CX4+" DCQCN: steps scale with the NIC rate (per 25G).
            let scale = |bps: u64| (bps as u128 * host_rate_bps as u128 / 25_000_000_000) as u64;
            DcqcnSpec {
                mellanox: true,
                g: 1.0 / 256.0,
                alpha_init: 1.0,
                cnp_interval_ps: 0,
                alpha_interval_ps: US,
                rate_timer_ps: 300 * US,
                byte_counter_bytes: 0,
                fast_recovery: 1,
                rate_ai_bps: scale(5_000_000).max(1),
                rate_hai_bps: scale(50_000_000).max(1),
                min_rate_bps: 1_000_000_000,
                rate_decrease_interval_ps: 4 * US,
                clamp_target_rate: false,
            }
        }
        Some(other) => {
            return Err(ScenarioError::at(
                "transport.dcqcn.variant",
                format!("expected \"paper\" or \"mellanox\", found {other:?}"),
            ))
        }
    };
    if let Some(g) = d.g {
        s.g = fraction("transport.dcqcn.g", g, 1e-9, 1.0)?;
    }
    if let Some(a) = d.alpha_init {
        s.alpha_init = fraction("transport.dcqcn.alpha_init", a, 0.0, 1.0)?;
    }
    if let Some(v) = d.cnp_interval {
        s.cnp_interval_ps = v.0;
    }
    let positive_time = |key: &str, v: u64| -> Res<u64> {
        if v == 0 {
            return Err(ScenarioError::at(
                format!("transport.dcqcn.{key}"),
                "expected a positive duration",
            ));
        }
        Ok(v)
    };
    if let Some(v) = d.alpha_interval {
        s.alpha_interval_ps = positive_time("alpha_interval", v.0)?;
    }
    if let Some(v) = d.rate_timer {
        s.rate_timer_ps = positive_time("rate_timer", v.0)?;
    }
    if let Some(v) = d.byte_counter {
        s.byte_counter_bytes = v.0;
    }
    if let Some(f) = d.fast_recovery {
        if !(0..=1000).contains(&f) {
            return Err(ScenarioError::at(
                "transport.dcqcn.fast_recovery",
                format!("expected 0..=1000, found {f}"),
            ));
        }
        s.fast_recovery = f as u32;
    }
    if let Some(r) = d.rate_ai {
        s.rate_ai_bps = r.0;
    }
    if let Some(r) = d.rate_hai {
        s.rate_hai_bps = r.0;
    }
    if let Some(r) = d.min_rate {
        s.min_rate_bps = r.0;
    }
    if s.min_rate_bps > host_rate_bps {
        return Err(ScenarioError::at(
            "transport.dcqcn.min_rate",
            "exceeds the host link rate",
        ));
    }
    if let Some(v) = d.rate_decrease_interval {
        s.rate_decrease_interval_ps = v.0;
    }
    if let Some(c) = d.clamp_target_rate {
        s.clamp_target_rate = c;
    }
    Ok(s)
}

fn trace(t: &TraceFile) -> Res<TraceSpec> {
    let queues = match &t.queues {
        None => None,
        Some(q) => {
            if q.interval.0 == 0 {
                return Err(ScenarioError::at(
                    "trace.queues.interval",
                    "expected a positive duration",
                ));
            }
            Some(QueuesTraceSpec {
                interval_ps: q.interval.0,
                hosts: q.hosts.unwrap_or(false),
                empty: q.empty.unwrap_or(false),
            })
        }
    };
    let links_interval_ps = match &t.links {
        None => None,
        Some(l) if l.interval.0 == 0 => {
            return Err(ScenarioError::at(
                "trace.links.interval",
                "expected a positive duration",
            ))
        }
        Some(l) => Some(l.interval.0),
    };
    let rates = match &t.rates {
        None => None,
        Some(r) => {
            let flows = match &r.flows {
                None => None,
                Some(list) => {
                    let mut out = Vec::with_capacity(list.len());
                    for (i, &f) in list.iter().enumerate() {
                        if !(0..=u32::MAX as i64).contains(&f) {
                            return Err(ScenarioError::at(
                                format!("trace.rates.flows.{i}"),
                                format!("expected a flow id, found {f}"),
                            ));
                        }
                        out.push(f as u32);
                    }
                    out.sort_unstable();
                    Some(out)
                }
            };
            Some(RatesTraceSpec {
                flows,
                interval_ps: r.interval.map(|d| d.0).unwrap_or(0),
            })
        }
    };
    Ok(TraceSpec {
        unfinished_flows: t.unfinished_flows.unwrap_or(true),
        queues,
        pfc: t.pfc.unwrap_or(false),
        links_interval_ps,
        rates,
    })
}

fn pick(path: &str, v: Option<&str>, default: Pick, allow_rr: bool) -> Res<Pick> {
    match v {
        None => Ok(default),
        Some("random") => Ok(Pick::Random),
        Some("least_loaded") => Ok(Pick::LeastLoaded),
        Some("round_robin") if allow_rr => Ok(Pick::RoundRobin),
        Some(other) => Err(ScenarioError::at(
            path,
            if allow_rr {
                format!("expected one of \"random\", \"round_robin\", \"least_loaded\", found {other:?}")
            } else {
                format!("expected \"random\" or \"least_loaded\", found {other:?}")
            },
        )),
    }
}

/// With hop classes on and PFC on, the classes lossless packets climb into are lossless (and ECN
/// marked) too; they must stay below 8 and clear of the control priority.
fn hop_classes(routing: &RoutingSpec, t: &TransportSpec, sw: &mut SwitchSpec) -> Res<()> {
    if !routing.hop_classes {
        return Ok(());
    }
    let Some(pfc) = &mut sw.pfc else {
        return Ok(());
    };
    let rise = routing.max_class_rise();
    let mut extra = 0u8;
    for c in 0..8u8 {
        if pfc.priorities & (1 << c) == 0 {
            continue;
        }
        for k in 1..=rise {
            let up = c + k;
            if up > 7 || up == t.control_priority {
                return Err(ScenarioError::at(
                    "routing.hop_classes",
                    format!(
                        "lossless priority {c} climbs {rise} classes on this route (one per \
                         global hop{}), into {}; lower transport.priority or the lossless \
                         priorities, or set hop_classes = false",
                        if rise == 3 {
                            ", one per PAR diversion"
                        } else {
                            ""
                        },
                        if up > 7 {
                            "priority 8, which does not exist".to_string()
                        } else {
                            format!("the control priority {up}")
                        }
                    ),
                ));
            }
            extra |= 1 << up;
        }
    }
    let marked = sw.ecn.as_ref().map(|e| e.priorities & pfc.priorities != 0);
    pfc.priorities |= extra;
    if let (Some(ecn), Some(true)) = (&mut sw.ecn, marked) {
        ecn.priorities |= extra;
    }
    Ok(())
}

fn routing(r: &RoutingFile, dragonfly: bool) -> Res<RoutingSpec> {
    let gap = r.flowlet_gap.map(|d| d.0).unwrap_or(50_000_000);
    let lb = r.load_balancing.as_str();
    let non_minimal = matches!(lb, "valiant" | "ugal_l" | "ugal_g" | "par");
    if (non_minimal || lb == "min") && !dragonfly {
        return Err(ScenarioError::at(
            "routing.load_balancing",
            format!("{lb:?} routes through dragonfly groups: it needs topology.kind = \"dragonfly\" or \"dragonfly_plus\" (Clos fabrics use \"ecmp\", \"spray\", \"flowlet\" or \"adaptive\")"),
        ));
    }
    if r.hop_classes == Some(true) && !dragonfly {
        return Err(ScenarioError::at(
            "routing.hop_classes",
            "hop classes are for dragonfly fabrics (up/down Clos routes cannot deadlock)",
        ));
    }
    // Keys that belong to another scheme are errors, so a typo'd scheme cannot ignore them.
    let used: &[(&str, bool)] = &[
        ("spray", r.spray.is_some()),
        ("flowlet_gap", r.flowlet_gap.is_some()),
        ("flowlet_pick", r.flowlet_pick.is_some()),
        ("flowlet_table", r.flowlet_table.is_some()),
        ("adaptive", r.adaptive.is_some()),
        ("adaptive_bias", r.adaptive_bias.is_some()),
        ("ugal_candidates", r.ugal_candidates.is_some()),
        ("ugal_threshold", r.ugal_threshold.is_some()),
    ];
    let allowed: &[&str] = match lb {
        "ecmp" => &[],
        "spray" => &["spray"],
        "flowlet" => &["flowlet_gap", "flowlet_pick", "flowlet_table"],
        "adaptive" => &["flowlet_gap", "flowlet_table", "adaptive", "adaptive_bias"],
        "min" => &[],
        "valiant" => &["adaptive", "flowlet_gap", "flowlet_table"],
        "ugal_l" | "ugal_g" | "par" => &[
            "ugal_candidates",
            "ugal_threshold",
            "adaptive",
            "flowlet_gap",
            "flowlet_table",
        ],
        other => {
            return Err(ScenarioError::at(
                "routing.load_balancing",
                format!(
                "expected one of \"ecmp\", \"spray\", \"flowlet\", \"adaptive\" (any fabric), \"min\", \"valiant\", \"ugal_l\", \"ugal_g\", \"par\" (dragonflies), found {other:?}"
            ),
            ))
        }
    };
    // On dragonflies the UGAL keys may stay while a sweep varies the routing (min and valiant
    // ignore them).
    let ugal_key = |k: &str| dragonfly && k.starts_with("ugal_");
    for &(key, set) in used {
        if set && !allowed.contains(&key) && !ugal_key(key) {
            return Err(ScenarioError::at(
                format!("routing.{key}"),
                format!("not used with load_balancing = {lb:?}"),
            ));
        }
    }
    if gap == 0 {
        return Err(ScenarioError::at(
            "routing.flowlet_gap",
            "expected a positive duration",
        ));
    }
    let candidates = match r.ugal_candidates {
        None => 1,
        Some(n) if (1..=64).contains(&n) => n as u32,
        Some(n) => {
            return Err(ScenarioError::at(
                "routing.ugal_candidates",
                format!("expected 1..=64 intermediate groups, found {n}"),
            ))
        }
    };
    let per_flowlet = match r.adaptive.as_deref() {
        None | Some("packet") => false,
        Some("flowlet") => true,
        Some(other) => {
            return Err(ScenarioError::at(
                "routing.adaptive",
                format!("expected \"packet\" or \"flowlet\", found {other:?}"),
            ))
        }
    };
    let non_minimal = |mode| {
        LoadBalancing::NonMinimal(NonMinimal {
            mode,
            candidates,
            // The default (two packets) is filled in once the transport's MTU is known.
            threshold_bytes: r.ugal_threshold.map(|t| t.0).unwrap_or(0),
            per_flowlet,
            gap_ps: gap,
        })
    };
    let load_balancing = match lb {
        "ecmp" | "min" => LoadBalancing::Ecmp,
        "valiant" => non_minimal(NonMinimalMode::Valiant),
        "ugal_l" => non_minimal(NonMinimalMode::UgalL),
        "ugal_g" => non_minimal(NonMinimalMode::UgalG),
        "par" => non_minimal(NonMinimalMode::Par),
        "spray" => LoadBalancing::Spray(pick(
            "routing.spray",
            r.spray.as_deref(),
            Pick::Random,
            true,
        )?),
        "flowlet" => LoadBalancing::Flowlet {
            gap_ps: gap,
            pick: pick(
                "routing.flowlet_pick",
                r.flowlet_pick.as_deref(),
                Pick::Random,
                false,
            )?,
        },
        _ => LoadBalancing::Adaptive {
            per_packet: match r.adaptive.as_deref() {
                None | Some("packet") => true,
                Some("flowlet") => false,
                Some(other) => {
                    return Err(ScenarioError::at(
                        "routing.adaptive",
                        format!("expected \"packet\" or \"flowlet\", found {other:?}"),
                    ))
                }
            },
            gap_ps: gap,
            bias_bytes: r.adaptive_bias.map(|b| b.0).unwrap_or(4096),
        },
    };
    let hash_fields = match &r.hash_fields {
        None => hash_field::SRC | hash_field::DST | hash_field::SPORT | hash_field::DPORT,
        Some(list) => {
            let mut mask = 0;
            for (i, f) in list.iter().enumerate() {
                mask |= match f.as_str() {
                    "src" => hash_field::SRC,
                    "dst" => hash_field::DST,
                    "sport" => hash_field::SPORT,
                    "dport" => hash_field::DPORT,
                    "flow_label" => hash_field::FLOW_LABEL,
                    other => {
                        return Err(ScenarioError::at(
                            format!("routing.hash_fields.{i}"),
                            format!("expected one of \"src\", \"dst\", \"sport\", \"dport\", \"flow_label\", found {other:?}"),
                        ))
                    }
                };
            }
            if mask == 0 {
                return Err(ScenarioError::at(
                    "routing.hash_fields",
                    "expected at least one field",
                ));
            }
            mask
        }
    };
    let hash = match r.hash.as_deref() {
        None | Some("mix") => HashFunction::Mix,
        Some("crc32") => HashFunction::Crc32,
        Some("xor") => HashFunction::Xor,
        Some(other) => {
            return Err(ScenarioError::at(
                "routing.hash",
                format!("expected one of \"mix\", \"crc32\", \"xor\", found {other:?}"),
            ))
        }
    };
    let flowlet_table = match r.flowlet_table {
        None => 4096,
        Some(n) if (1..=1 << 24).contains(&n) => n as u32,
        Some(n) => {
            return Err(ScenarioError::at(
                "routing.flowlet_table",
                format!("expected 1..=16777216 entries, found {n}"),
            ))
        }
    };
    Ok(RoutingSpec {
        load_balancing,
        hash_fields,
        hash,
        per_switch_seed: r.per_switch_seed.unwrap_or(true),
        flowlet_table,
        hop_classes: r.hop_classes.unwrap_or(dragonfly),
    })
}

fn node_name(path: String, n: &NodeRef) -> Res<NodeName> {
    match n {
        NodeRef::Id(id) if (0..=u32::MAX as i64).contains(id) => Ok(NodeName::Id(*id as u32)),
        NodeRef::Id(id) => Err(ScenarioError::at(
            path,
            format!("expected a node id, found {id}"),
        )),
        NodeRef::Name(s) => {
            let parsed = s
                .split_once(':')
                .and_then(|(role, idx)| Some((role, idx.trim().parse::<u32>().ok()?)));
            match parsed {
                Some((role, index)) if !role.is_empty() => Ok(NodeName::Role {
                    role: role.trim().to_string(),
                    index,
                }),
                _ => Err(ScenarioError::at(
                    path,
                    format!("expected a node id or \"role:index\" like \"spine:0\", found {s:?}"),
                )),
            }
        }
    }
}

fn faults(list: &[FaultFile]) -> Res<Vec<FaultSpec>> {
    let mut out = Vec::with_capacity(list.len());
    for (i, f) in list.iter().enumerate() {
        let p = |key: &str| format!("fault.{i}.{key}");
        if f.link.len() != 2 {
            return Err(ScenarioError::at(
                p("link"),
                format!(
                    "expected the two ends of a link, found {} nodes",
                    f.link.len()
                ),
            ));
        }
        let ends = [
            node_name(format!("fault.{i}.link.0"), &f.link[0])?,
            node_name(format!("fault.{i}.link.1"), &f.link[1])?,
        ];
        let kind = match f.kind.as_deref() {
            None | Some("down") => {
                if f.rate.is_some() {
                    return Err(ScenarioError::at(
                        p("rate"),
                        "a rate needs kind = \"degrade\"",
                    ));
                }
                FaultKind::Down
            }
            Some("degrade") => match f.rate {
                Some(r) => FaultKind::Degrade { rate_bps: r.0 },
                None => {
                    return Err(ScenarioError::at(
                        p("rate"),
                        "missing: the degraded link's rate, like \"50Gbps\"",
                    ))
                }
            },
            Some(other) => {
                return Err(ScenarioError::at(
                    p("kind"),
                    format!("expected \"down\" or \"degrade\", found {other:?}"),
                ))
            }
        };
        if let Some(u) = f.until {
            if u.0 <= f.at.0 {
                return Err(ScenarioError::at(p("until"), "must be after `at`"));
            }
        }
        out.push(FaultSpec {
            ends,
            kind,
            at_ps: f.at.0,
            until_ps: f.until.map(|d| d.0),
            detection_ps: f.detection.map(|d| d.0).unwrap_or(10_000_000),
        });
    }
    Ok(out)
}

/// `dragonfly` (p, a, h, g) and `dragonfly_plus` (leaves, spines, hosts_per_leaf, h, g).
fn dragonfly(t: &TopologyFile, host: LinkSpec, local: LinkSpec) -> Res<TopologySpec> {
    let plus = t.kind == "dragonfly_plus";
    let kind = t.kind.as_str();
    let common = [
        ("k", t.k.is_some()),
        ("core_link_rate", t.core_link_rate.is_some()),
        ("core_link_delay", t.core_link_delay.is_some()),
    ];
    forbid(kind, &common)?;
    if plus {
        forbid(kind, &[("p", t.p.is_some()), ("a", t.a.is_some())])?;
    } else {
        forbid(
            kind,
            &[
                ("leaves", t.leaves.is_some()),
                ("spines", t.spines.is_some()),
                ("hosts_per_leaf", t.hosts_per_leaf.is_some()),
            ],
        )?;
    }
    let global = LinkSpec {
        rate_bps: t.global_link_rate.map(|r| r.0).unwrap_or(local.rate_bps),
        delay_ps: t.global_link_delay.map(|d| d.0).unwrap_or(local.delay_ps),
    };
    let arrangement = match t.arrangement.as_deref() {
        None | Some("absolute") | Some("consecutive") => Arrangement::Absolute,
        Some("relative") | Some("circulant") => Arrangement::Relative,
        Some(other) => {
            return Err(ScenarioError::at(
                "topology.arrangement",
                format!("expected \"absolute\" or \"relative\", found {other:?}"),
            ))
        }
    };
    let h = count(
        "topology.h",
        t.h,
        1,
        256,
        "an integer number of global links per router",
    )?;
    let (global_ports, spec) = if plus {
        let leaves = count(
            "topology.leaves",
            t.leaves,
            1,
            1024,
            "an integer number of leaves per group",
        )?;
        let spines = count(
            "topology.spines",
            t.spines,
            1,
            1024,
            "an integer number of spines per group",
        )?;
        let hosts_per_leaf = count(
            "topology.hosts_per_leaf",
            t.hosts_per_leaf,
            1,
            1024,
            "an integer number of hosts per leaf",
        )?;
        (spines * h, (leaves, spines, hosts_per_leaf))
    } else {
        let p = count(
            "topology.p",
            t.p,
            1,
            1024,
            "an integer number of hosts per router",
        )?;
        let a = count(
            "topology.a",
            t.a,
            1,
            1024,
            "an integer number of routers per group",
        )?;
        (a * h, (p, a, 0))
    };
    let g = count(
        "topology.g",
        t.g,
        2,
        global_ports as i64 + 1,
        "an integer number of groups (at most the global links per group + 1)",
    )?;
    let hosts = if plus {
        spec.0 * spec.2 * g
    } else {
        spec.0 * spec.1 * g
    };
    if hosts > 1 << 20 {
        return Err(ScenarioError::at("topology.g", "more than 2^20 hosts"));
    }
    Ok(if plus {
        TopologySpec::DragonflyPlus {
            leaves: spec.0,
            spines: spec.1,
            hosts_per_leaf: spec.2,
            h,
            g,
            arrangement,
            host,
            local,
            global,
        }
    } else {
        TopologySpec::Dragonfly {
            p: spec.0,
            a: spec.1,
            h,
            g,
            arrangement,
            host,
            local,
            global,
        }
    })
}
