//! From what the user wrote (`ScenarioFile`) to what the engine runs (`Scenario`): defaults, ranges,
//! kind-specific keys and host ids, each failure naming its key path.

use super::error::ScenarioError;
use super::schema::{
    DcqcnFile, ScenarioFile, Senders, SwitchFile, TopologyFile, TraceFile, WorkloadFile,
};
use super::spec::*;
use crate::rng::{self, Purpose};
use crate::units::parse_time;

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

    let load_balancing = match file.routing.load_balancing.as_str() {
        "ecmp" => LoadBalancing::Ecmp,
        other => {
            return Err(ScenarioError::at(
                "routing.load_balancing",
                format!("expected one of \"ecmp\", found {other:?}"),
            ))
        }
    };

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
    let loss_recovery = match t.loss_recovery.as_deref() {
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
        data_priority,
        control_priority,
    };
    let switch = switch(&file.switch, &transport)?;
    let trace = trace(&file.trace)?;

    let mut workloads = Vec::with_capacity(file.workload.len());
    for (i, w) in file.workload.iter().enumerate() {
        let spec = workload(i, w, n_hosts, file.seed)?;
        let name = w.name.clone().unwrap_or_else(|| spec.kind().to_string());
        workloads.push(NamedWorkload { name, spec });
    }

    Ok(Scenario {
        name: file.name.clone().unwrap_or_else(|| "scenario".into()),
        seed: file.seed,
        stop,
        topology,
        switch,
        routing: RoutingSpec { load_balancing },
        transport,
        workloads,
        trace,
    })
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
        other => Err(ScenarioError::at(
            "topology.kind",
            format!("expected one of \"fat_tree\", \"leaf_spine\", found {other:?}"),
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

fn workload(i: usize, w: &WorkloadFile, n_hosts: u32, seed: u64) -> Res<WorkloadSpec> {
    let p = |key: &str| format!("workload.{i}.{key}");
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
        other => {
            return Err(ScenarioError::at(
                p("kind"),
                format!("expected one of \"flows\", \"incast\", \"permutation\", found {other:?}"),
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
            Some(s) if s.0 == 0 => Err(ScenarioError::at(p(key), "expected a positive size")),
            Some(s) => Ok(s.0),
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
                    let mut r = rng::stream(seed, Purpose::Workload, i as u64);
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
            let hosts = match &w.hosts {
                None => (0..n_hosts).collect(),
                Some(list) => {
                    let mut out = Vec::with_capacity(list.len());
                    let mut seen = vec![false; n_hosts as usize];
                    for (j, &h) in list.iter().enumerate() {
                        let id = host_id(format!("workload.{i}.hosts.{j}"), h, n_hosts)?;
                        if std::mem::replace(&mut seen[id as usize], true) {
                            return Err(ScenarioError::at(
                                format!("workload.{i}.hosts.{j}"),
                                "host listed twice",
                            ));
                        }
                        out.push(id);
                    }
                    out
                }
            };
            if hosts.len() < 2 {
                return Err(ScenarioError::at(
                    p("hosts"),
                    "a permutation needs at least two hosts",
                ));
            }
            Ok(WorkloadSpec::Permutation {
                hosts,
                size_bytes: size("size")?,
                start_ps,
            })
        }
        _ => unreachable!("kind checked above"),
    }
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
