//! Live control: the telemetry-aware policy on the congested all-reduce scenario against every
//! fixed algorithm; a controller that does nothing leaves outputs byte-identical; same seed and
//! same controller, same outputs; actions re-plan calls and are recorded.

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};

use fabricemu_core::control::{Action, ControlStep};
use fabricemu_core::scenario::{parse_toml, to_json};
use fabricemu_core::{output, Simulation};

fn scenario_text() -> String {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/allreduce_congested.toml");
    fs::read_to_string(path).unwrap()
}

/// The scenario with `[control]` removed (a fixed algorithm: `algorithm`).
fn fixed(text: &str, algorithm: &str) -> String {
    let mut out = String::new();
    let mut skip = false;
    for line in text.lines() {
        if line.starts_with('[') {
            skip = line.trim() == "[control]";
        }
        if skip {
            continue;
        }
        if line.starts_with("algorithm = ") {
            out.push_str(&format!("algorithm = \"{algorithm}\"\n"));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The total time of the all-reduce's calls (sum of each call's duration), ps.
fn allreduce_time(sim: &Simulation) -> u64 {
    sim.collective_rows()
        .iter()
        .filter(|r| r.workload == 0)
        .map(|r| r.finish_ps.expect("every call finished") - r.start_ps.expect("started"))
        .sum()
}

/// Fixed runs of each of `algs` and the adaptive run of `text`: (the adaptive run, its all-reduce
/// time, the best and the worst fixed (algorithm, time)), with the comparison printed.
struct Comparison {
    adaptive: Simulation,
    t: u64,
    best: (&'static str, u64),
    worst: (&'static str, u64),
}

fn compare_with_fixed(text: &str, algs: &[&'static str]) -> Comparison {
    let mut times = Vec::new();
    for &alg in algs {
        let sim = common::run(&fixed(text, alg));
        assert!(sim.action_rows().is_empty());
        let calls: Vec<u64> = sim
            .collective_rows()
            .iter()
            .map(|r| (r.finish_ps.unwrap() - r.start_ps.unwrap()) / 1_000_000)
            .collect();
        println!("{alg}: calls (us) {calls:?}");
        times.push((alg, allreduce_time(&sim)));
    }
    let adaptive = common::run(text);
    let t = allreduce_time(&adaptive);
    let best = *times.iter().min_by_key(|x| x.1).unwrap();
    let worst = *times.iter().max_by_key(|x| x.1).unwrap();
    let chosen: Vec<&str> = adaptive
        .collective_rows()
        .iter()
        .map(|r| r.algorithm)
        .collect();
    println!("fixed: {times:?}; adaptive: {t} ps, calls {chosen:?}");
    println!(
        "adaptive vs best fixed ({}): {:+.2} %; vs worst fixed ({}): {:+.2} %",
        best.0,
        100.0 * (t as f64 / best.1 as f64 - 1.0),
        worst.0,
        100.0 * (t as f64 / worst.1 as f64 - 1.0)
    );
    for r in adaptive.action_rows() {
        println!(
            "{} {} {} {} {}",
            r.time_ps, r.action, r.target, r.value, r.detail
        );
    }
    Comparison {
        adaptive,
        t,
        best,
        worst,
    }
}

#[test]
fn adaptive_policy_is_within_5_percent_of_the_best_fixed_algorithm() {
    let Comparison {
        t,
        best: (best_alg, best),
        worst: (worst_alg, worst),
        ..
    } = compare_with_fixed(&scenario_text(), &["ring", "tree", "halving_doubling"]);
    assert!(
        t as f64 <= best as f64 * 1.05,
        "adaptive {t} ps is more than 5 % slower than fixed {best_alg} ({best} ps)"
    );
    assert!(
        t < worst,
        "adaptive {t} ps is not faster than fixed {worst_alg} ({worst} ps)"
    );
}

/// Every output file of a run written into `dir` as the Python API does (traces streamed), with
/// an attached control loop of `interval` (None: none) whose boundaries do nothing.
fn write_with_idle_control(
    text: &str,
    dir: &Path,
    interval: Option<u64>,
) -> Vec<(String, Vec<u8>)> {
    let (file, spec) = parse_toml(text, "t.toml").unwrap_or_else(|e| panic!("{e}"));
    let json = to_json(&file);
    let _ = fs::remove_dir_all(dir);
    fs::create_dir_all(dir).unwrap();
    let mut sim = Simulation::build(&spec).unwrap_or_else(|e| panic!("{e}"));
    sim.open_traces(dir, &output::metadata(&json, spec.seed))
        .unwrap();
    let mut boundaries = 0u64;
    match interval {
        None => {
            sim.run_to_end();
        }
        Some(i) => {
            sim.enable_control(Some(i));
            loop {
                match sim.step_control(1 << 16) {
                    ControlStep::Finished => break,
                    ControlStep::Running => {}
                    ControlStep::Boundary(t) => {
                        assert_eq!(t, boundaries * i, "boundaries at multiples of the interval");
                        assert_eq!(sim.world().now, t);
                        assert_eq!(sim.telemetry().unwrap().time_ps, t);
                        boundaries += 1;
                    }
                }
            }
            assert!(boundaries > 2, "the run crossed several boundaries");
        }
    }
    sim.check_conservation().unwrap();
    output::write_outputs(dir, &mut sim, &json, spec.seed, false, 0.0).unwrap();
    let mut files: Vec<(String, Vec<u8>)> = fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                fs::read(&p).unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

/// A controller that does nothing leaves every output file byte-identical: the boundaries are
/// not events. Scenarios with collectives, faults and a time stop, step graphs (barrier edges and
/// compute) and traces.
#[test]
fn an_idle_controller_leaves_every_output_byte_identical() {
    let congested = fixed(&scenario_text(), "ring")
        + "\n[trace]\nqueues = { interval = \"10us\" }\nlinks = { interval = \"10us\" }\n";
    for (name, text, interval) in [
        ("congested", congested, 7_000_000),
        (
            "flapping_link",
            common::repo_file("scenarios/flapping_link.toml"),
            50_000_000,
        ),
        (
            "step_graph",
            common::repo_file("scenarios/step_graph.toml"),
            20_000_000,
        ),
        (
            "incast_pfc",
            common::repo_file("scenarios/incast_pfc.toml"),
            20_000_000,
        ),
    ] {
        let base = common::scratch("control", &format!("idle-{name}-plain"));
        let ctl = common::scratch("control", &format!("idle-{name}-ctl"));
        let plain = write_with_idle_control(&text, &base, None);
        let controlled = write_with_idle_control(&text, &ctl, Some(interval));
        assert_eq!(
            plain.iter().map(|f| &f.0).collect::<Vec<_>>(),
            controlled.iter().map(|f| &f.0).collect::<Vec<_>>(),
            "{name}: the same files"
        );
        for (a, b) in plain.iter().zip(&controlled) {
            assert!(
                a.1 == b.1,
                "{name}: {} differs with an idle controller",
                a.0
            );
        }
        let _ = fs::remove_dir_all(base);
        let _ = fs::remove_dir_all(ctl);
    }
}

/// `[control] policy = "none"` runs exactly as without `[control]` (only the scenario echoed in
/// the metadata differs).
#[test]
fn policy_none_runs_as_without_control() {
    let plain = fixed(&scenario_text(), "ring");
    let none = format!("{plain}\n[control]\ninterval = \"20us\"\npolicy = \"none\"\n");
    let a = common::run(&plain);
    let b = common::run(&none);
    assert_eq!(a.stats(), b.stats());
    assert_eq!(a.flow_rows(), b.flow_rows());
    assert_eq!(a.collective_rows(), b.collective_rows());
    assert!(b.action_rows().is_empty());
}

/// The same seed and the same policy give the same outputs, file for file.
#[test]
fn the_adaptive_run_is_reproducible() {
    let text = scenario_text();
    let d1 = common::scratch("control", "repro-1");
    let d2 = common::scratch("control", "repro-2");
    let a = write_with_idle_control(&text, &d1, None);
    let b = write_with_idle_control(&text, &d2, None);
    assert!(a.iter().any(|f| f.0 == "actions.arrow"), "the policy acted");
    assert_eq!(a, b);
    let _ = fs::remove_dir_all(d1);
    let _ = fs::remove_dir_all(d2);
}

/// A `set_algorithm` action at time 0 re-plans the first call: its ring flows are cancelled (and
/// left out of flows.arrow), the tree's appended; collectives.arrow reports the call as a tree
/// with the tree's flows; the later calls stay rings and wait for it.
#[test]
fn set_algorithm_replans_the_next_call() {
    let text = fixed(&scenario_text(), "ring");
    let mut sim = common::build(&text);
    sim.enable_control(Some(20_000_000));
    let planned = sim.world().flows.len();
    assert_eq!(sim.step_control(1 << 20), ControlStep::Boundary(0));
    let t = sim.telemetry().unwrap();
    assert_eq!(t.collectives.len(), 1);
    assert_eq!(t.collectives[0].next_call, Some(0));
    assert_eq!(t.collectives[0].next_algorithm, Some("ring"));
    let row = sim
        .apply_action(
            "test",
            &Action::SetAlgorithm {
                collective: 0,
                algorithm: fabricemu_core::config::CollectiveAlgorithm::Tree,
            },
        )
        .unwrap()
        .expect("a change");
    assert_eq!(row.target, "collective 0 call 0");
    assert_eq!(row.value, "tree");
    // Again: nothing changes, nothing is recorded.
    let again = sim.apply_action(
        "test",
        &Action::SetAlgorithm {
            collective: 0,
            algorithm: fabricemu_core::config::CollectiveAlgorithm::Tree,
        },
    );
    assert_eq!(again, Ok(None));
    while sim.step_control(1 << 20) != ControlStep::Finished {}
    sim.check_conservation().unwrap();
    let ring_flows = 2 * 7 * 8; // 2(n-1) steps of n transfers
    assert_eq!(sim.stats().flows_cancelled, ring_flows);
    assert!(sim.world().flows.len() > planned);
    let rows = sim.collective_rows();
    for r in &rows {
        println!(
            "{} {} flows {} finished {} {:?} {:?}",
            r.iteration, r.algorithm, r.flows, r.flows_finished, r.start_ps, r.finish_ps
        );
    }
    println!("{:?}", sim.stats());
    assert_eq!(rows[0].algorithm, "tree");
    assert!(rows[1..6].iter().all(|r| r.algorithm == "ring"));
    let tree_flows = sim.world().flows.len() as u64 - planned as u64;
    assert_eq!(rows[0].flows, tree_flows);
    assert_eq!(rows[1].flows, ring_flows);
    assert!(rows.iter().all(|r| r.finish_ps.is_some()));
    // The second call started its compute gap after the tree's last flow.
    assert_eq!(
        rows[1].start_ps,
        Some(rows[0].finish_ps.unwrap() + 60_000_000)
    );
    let flows = sim.flow_rows();
    assert_eq!(
        flows.len() as u64,
        sim.world().flows.len() as u64 - ring_flows
    );
    assert!(flows.iter().all(|f| f.finish_ps.is_some()));
    assert_eq!(sim.action_rows().len(), 1);
}

/// Bad actions are refused with the action and field named, and change nothing.
#[test]
fn bad_actions_name_the_action_and_field() {
    use fabricemu_core::config::CollectiveAlgorithm as A;
    let mut sim = common::build(&fixed(&scenario_text(), "ring"));
    sim.enable_control(None);
    assert_eq!(sim.step_control(1 << 20), ControlStep::Boundary(0));
    let cases = [
        (
            Action::SetAlgorithm {
                collective: 9,
                algorithm: A::Tree,
            },
            "set_algorithm",
            "collective",
        ),
        (
            Action::SetAlgorithm {
                collective: 0,
                algorithm: A::Direct,
            },
            "set_algorithm",
            "algorithm",
        ),
        (
            Action::SetAlgorithm {
                collective: 0,
                algorithm: A::HierarchicalRing,
            },
            "set_algorithm",
            "algorithm",
        ),
        (
            // No [switch.reduction]: in-network cannot be chosen.
            Action::SetAlgorithm {
                collective: 0,
                algorithm: A::InNetwork,
            },
            "set_algorithm",
            "algorithm",
        ),
        (
            Action::Reroute {
                flow: 1_000_000,
                entropy: 1,
            },
            "reroute",
            "flow",
        ),
        (
            Action::SetCc {
                param: "nope".into(),
                value: 1.0,
            },
            "set_cc",
            "param",
        ),
        (
            Action::SetCc {
                param: "g".into(),
                value: 2.0,
            },
            "set_cc",
            "param",
        ),
        (
            Action::SetCc {
                param: "g".into(),
                value: f64::NAN,
            },
            "set_cc",
            "value",
        ),
        (
            Action::Fault {
                link: 100_000,
                kind: fabricemu_core::control::actions::LiveFault::Down,
                detection_ps: None,
            },
            "fault",
            "link",
        ),
        (Action::Restore { link: 100_000 }, "restore", "link"),
    ];
    let flows = sim.world().flows.len();
    for (action, name, field) in cases {
        let e = sim.apply_action("test", &action).unwrap_err();
        assert_eq!((e.action.as_str(), e.field.as_str()), (name, field), "{e}");
        assert!(
            e.to_string()
                .starts_with(&format!("action {name}: {field}: ")),
            "{e}"
        );
    }
    assert_eq!(sim.world().flows.len(), flows);
    assert!(sim.action_rows().is_empty());
}

/// set_cc, reroute, fault and restore act on the run and are recorded; a live fault is a row of
/// faults.arrow with source "control" and its end.
#[test]
fn live_actions_act_and_are_recorded() {
    use fabricemu_core::control::actions::LiveFault;
    let mut sim = common::build(&fixed(&scenario_text(), "ring"));
    sim.enable_control(Some(20_000_000));
    // Host 0's uplink: its first port.
    let link = sim
        .world()
        .fabric
        .host_port(fabricemu_core::ids::NodeId::new(0))
        .get();
    let mut faulted = false;
    let mut restored = false;
    loop {
        match sim.step_control(1 << 20) {
            ControlStep::Finished => break,
            ControlStep::Running => {}
            ControlStep::Boundary(t) => {
                if t == 0 {
                    let r = sim
                        .apply_action(
                            "test",
                            &Action::SetCc {
                                param: "g".into(),
                                value: 0.5,
                            },
                        )
                        .unwrap()
                        .unwrap();
                    assert_eq!(r.target, "dcqcn.g");
                    let r = sim
                        .apply_action(
                            "test",
                            &Action::Reroute {
                                flow: 0,
                                entropy: 77,
                            },
                        )
                        .unwrap()
                        .unwrap();
                    assert_eq!(r.target, "flow 0");
                }
                if t == 100_000_000 {
                    let kind = LiveFault::Degrade {
                        rate_bps: 25_000_000_000,
                    };
                    sim.apply_action(
                        "test",
                        &Action::Fault {
                            link,
                            kind,
                            detection_ps: None,
                        },
                    )
                    .unwrap()
                    .unwrap();
                    faulted = true;
                }
                if t == 300_000_000 {
                    let r = sim.apply_action("test", &Action::Restore { link }).unwrap();
                    assert!(r.is_some());
                    restored = true;
                }
                if t == 200_000_000 {
                    let p = sim.telemetry().unwrap().ports[link as usize];
                    assert_eq!(p.rate_bps, 25_000_000_000, "degraded in the telemetry");
                }
            }
        }
    }
    assert!(faulted && restored);
    sim.check_conservation().unwrap();
    let actions: Vec<&str> = sim.action_rows().iter().map(|r| r.action).collect();
    assert_eq!(actions, ["set_cc", "reroute", "fault", "restore"]);
    assert!(sim.has_faults());
    let faults = sim.fault_rows();
    assert_eq!(faults.len(), 1);
    assert_eq!(faults[0].source, "control");
    assert_eq!(faults[0].kind, "degrade");
    assert_eq!(
        (faults[0].time_ps, faults[0].end_ps),
        (100_000_000, Some(300_000_000))
    );
    assert!(sim.flow_rows().iter().all(|f| f.finish_ps.is_some()));
}

/// Telemetry: over an interval of the adaptive run the incast receivers' downlinks are busy,
/// bytes add up to the links' counters, and collective progress counts calls.
#[test]
fn telemetry_differences_the_counters() {
    let mut sim = common::build(&fixed(&scenario_text(), "ring"));
    sim.enable_control(Some(20_000_000));
    let mut sums = vec![0u64; sim.world().fabric.num_ports() as usize];
    let mut last_calls_done = 0;
    loop {
        match sim.step_control(1 << 20) {
            ControlStep::Finished => break,
            ControlStep::Running => {}
            ControlStep::Boundary(t) => {
                let tel = sim.telemetry().unwrap();
                for p in &tel.ports {
                    sums[p.port as usize] += p.tx_bytes;
                    assert!(p.utilisation <= 1.0 + 1e-9, "{p:?}");
                }
                let c = &tel.collectives[0];
                assert!(c.calls_done >= last_calls_done);
                last_calls_done = c.calls_done;
                if t == 60_000_000 {
                    // The incast receivers' downlinks are saturated.
                    for host in [1, 5] {
                        let down = tel.ports.iter().find(|p| p.peer == host).unwrap();
                        assert!(down.utilisation > 0.9, "{down:?}");
                    }
                }
            }
        }
    }
    assert!(
        last_calls_done >= 4,
        "calls counted as they finish: {last_calls_done}"
    );
    // The intervals' bytes add up to what each port sent by the last boundary, at most what it
    // sent by the end.
    for (p, &sum) in sums.iter().enumerate() {
        assert!(
            sum <= sim
                .world()
                .port_tx_bytes(fabricemu_core::ids::PortId::new(p as u32))
        );
    }
}

/// Issue 16, item 5 with in-network among the fixed choices: the congested scenario with
/// reduction engines on every switch (scenarios/allreduce_congested_in_network.toml), fixed ring, tree,
/// halving-doubling and in_network against the telemetry-aware policy (which also weighs
/// in_network). Source: issue 16's validation bound: the adaptive run within 5 % of the best
/// fixed algorithm and faster than the worst (the margin is printed and reported in
/// docs/control.md). The policy's in-network model charges a rank whose tree links mark (or
/// marked within the cost of a cut) DCQCN's cut and slow recovery (docs/control.md).
#[test]
fn adaptive_policy_with_in_network_candidates_on_the_congested_fabric() {
    let text = common::repo_file("scenarios/allreduce_congested_in_network.toml");
    let Comparison {
        adaptive,
        t,
        best: (best_alg, best),
        worst: (worst_alg, worst),
    } = compare_with_fixed(&text, &["ring", "tree", "halving_doubling", "in_network"]);
    let calls = |sim: &Simulation| -> Vec<u64> {
        sim.collective_rows()
            .iter()
            .filter(|r| r.workload == 0)
            .map(|r| (r.finish_ps.unwrap() - r.start_ps.unwrap()) / 1_000_000)
            .collect()
    };
    let inr_calls = calls(&common::run(&fixed(&text, "in_network")));
    println!("in_network calls (us): {inr_calls:?}");
    // The prediction follows the network: the in-network time the policy predicted for the
    // first call (under the incasts: DCQCN's cut and recovery) within 10 % of what a fixed
    // in-network run measures for it (measured: 9556 us against 10293 us, -7 %; before the
    // cut term: 2748 us).
    let first = &adaptive.action_rows()[0];
    let predicted: f64 = first
        .detail
        .split("in_network ")
        .nth(1)
        .and_then(|x| x.split("us").next())
        .and_then(|x| x.parse().ok())
        .expect("an in_network prediction in the first action's detail");
    let measured = inr_calls[0] as f64;
    assert!(
        (predicted / measured - 1.0).abs() <= 0.10,
        "predicted {predicted} us, measured {measured} us"
    );
    assert!(
        t as f64 <= best as f64 * 1.05,
        "adaptive {t} ps is more than 5 % slower than fixed {best_alg} ({best} ps)"
    );
    assert!(
        t < worst,
        "adaptive {t} ps vs fixed {worst_alg} ({worst} ps)"
    );
}
