//! From what the user wrote (`ScenarioFile`) to what the engine runs (`Scenario`): defaults, ranges,
//! kind-specific keys and host ids, each failure naming its key path.

use super::error::ScenarioError;
use super::schema::{ScenarioFile, Senders, TopologyFile, WorkloadFile};
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

    let sw = &file.switch;
    if sw.buffer.0 == 0 {
        return Err(ScenarioError::at(
            "switch.buffer",
            "expected a positive size",
        ));
    }
    if sw.port_buffer.is_some_and(|b| b.0 == 0) {
        return Err(ScenarioError::at(
            "switch.port_buffer",
            "expected a positive size",
        ));
    }
    let switch = SwitchSpec {
        buffer_bytes: sw.buffer.0,
        port_buffer_bytes: sw.port_buffer.map(|b| b.0),
        latency_ps: sw.latency.0,
    };

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
    let cc = match t.cc.as_str() {
        "none" => CongestionControl::None,
        other => {
            return Err(ScenarioError::at(
                "transport.cc",
                format!("expected one of \"none\", found {other:?}"),
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
    };

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
        trace: TraceSpec {
            unfinished_flows: file.trace.unfinished_flows.unwrap_or(true),
        },
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
