//! Run-time plan amendment (`engine::amend`): cancelled flows never start and leave no row;
//! appended barriers, flows and edges run like planned ones; bad amendments change nothing.

use crate::common;

use fabricemu_core::control::ControlStep;
use fabricemu_core::engine::amend::Amendment;
use fabricemu_core::ids::{FlowId, NodeId};
use fabricemu_core::workload::{BarrierEdge, FlowInit, Start};
use fabricemu_core::Simulation;

fn text() -> String {
    format!(
        r#"seed = 3
{}
[[workload]]
kind = "flows"
flows = [{{ src = 0, dst = 4, size = "1MB" }}, {{ src = 1, dst = 5, size = "1MB", start = "50us" }}]
"#,
        common::leaf_spine(2, 2, 4, "100Gbps", None, "500ns")
    )
}

fn flow(src: u32, dst: u32, size: u64, start: Start, completes: Option<u32>) -> FlowInit {
    FlowInit {
        src: NodeId::new(src),
        dst: NodeId::new(dst),
        size_bytes: size,
        start,
        workload: 0,
        completes,
        collective: None,
        tag: None,
    }
}

/// Run to the first boundary (time 0), amend, run to the end.
fn amended() -> Simulation {
    let mut sim = common::build(&text());
    sim.enable_control(Some(10_000_000));
    assert_eq!(sim.step_control(1000), ControlStep::Boundary(0));
    let b = sim.world().num_barriers();
    let report = sim
        .amend(&Amendment {
            cancel: vec![FlowId::new(1)],
            barriers: vec![1, 1],
            flows: vec![
                flow(2, 6, 100_000, Start::At(0), Some(b)),
                flow(
                    3,
                    7,
                    100_000,
                    Start::After {
                        barrier: b,
                        gap: 5_000_000,
                    },
                    None,
                ),
                flow(
                    6,
                    2,
                    50_000,
                    Start::After {
                        barrier: b + 1,
                        gap: 0,
                    },
                    None,
                ),
            ],
            edges: vec![BarrierEdge {
                from: b,
                to: b + 1,
                delay: 20_000_000,
            }],
        })
        .unwrap();
    assert_eq!(
        (report.first_flow, report.first_barrier, report.cancelled),
        (2, b, 1)
    );
    assert!(report.not_cancelled.is_empty());
    while sim.step_control(1 << 20) != ControlStep::Finished {}
    sim.check_conservation().unwrap();
    sim
}

#[test]
fn cancelled_flows_never_start_and_appended_ones_run() {
    let sim = amended();
    let s = sim.stats();
    assert_eq!(
        (s.flows_total, s.flows_cancelled, s.flows_finished),
        (5, 1, 4)
    );
    let rows = sim.flow_rows();
    let ids: Vec<u64> = rows.iter().map(|r| r.flow_id).collect();
    assert_eq!(ids, [0, 2, 3, 4], "the cancelled flow has no row");
    let by_id = |i: u64| rows.iter().find(|r| r.flow_id == i).unwrap();
    let a = by_id(2);
    assert_eq!(a.start_ps, 0);
    // B waits for A's barrier and its gap; C for the edge's delay after the same release.
    assert_eq!(by_id(3).start_ps, a.finish_ps.unwrap() + 5_000_000);
    assert_eq!(by_id(4).start_ps, a.finish_ps.unwrap() + 20_000_000);
    assert!(!sim.world().flows[FlowId::new(1)].started);
    assert!(sim.world().is_cancelled(FlowId::new(1)));
    // The labels line up row for row.
    assert_eq!(sim.flow_labels().len(), rows.len());
}

/// Cancelling a chain of flows that wait on each other's barriers schedules no start for any:
/// each barrier the cancellations release finds its waiting flows cancelled too. (One at a
/// time, until 2026-12-05, the first cancellation's release scheduled the next flow's start,
/// to be dropped when it came: an elastic job's re-plans scheduled 470,000 such.)
#[test]
fn cancelling_a_chain_schedules_no_start_for_its_flows() {
    let mut sim = common::build(&text());
    sim.enable_control(Some(10_000_000));
    assert_eq!(sim.step_control(1000), ControlStep::Boundary(0));
    let b = sim.world().num_barriers();
    let after = |barrier| Start::After { barrier, gap: 0 };
    let report = sim
        .amend(&Amendment {
            barriers: vec![1, 1],
            flows: vec![
                flow(2, 6, 100_000, Start::At(30_000_000_000), Some(b)),
                flow(3, 7, 100_000, after(b), Some(b + 1)),
                flow(6, 2, 50_000, after(b + 1), None),
            ],
            ..Amendment::default()
        })
        .unwrap();
    let chain: Vec<FlowId> = (0..3).map(|i| FlowId::new(report.first_flow + i)).collect();
    let pending = sim.world().pending_events();
    let report = sim
        .amend(&Amendment {
            cancel: chain.clone(),
            ..Amendment::default()
        })
        .unwrap();
    assert_eq!(report.cancelled, 3);
    assert_eq!(sim.world().pending_events(), pending, "no start scheduled");
    while sim.step_control(1 << 20) != ControlStep::Finished {}
    sim.check_conservation().unwrap();
    let s = sim.stats();
    assert_eq!(
        (s.flows_total, s.flows_cancelled, s.flows_finished),
        (5, 3, 2)
    );
    assert!(chain.iter().all(|&f| !sim.world().flows[f].started));
}

#[test]
fn amendments_are_deterministic() {
    let (a, b) = (amended(), amended());
    assert_eq!(a.flow_rows(), b.flow_rows());
    assert_eq!(a.stats(), b.stats());
}

#[test]
fn a_flow_that_started_is_not_cancelled_and_bad_amendments_change_nothing() {
    let mut sim = common::build(&text());
    sim.enable_control(Some(10_000_000));
    assert_eq!(sim.step_control(1000), ControlStep::Boundary(0));
    assert_eq!(sim.step_control(1 << 20), ControlStep::Boundary(10_000_000));
    let before = sim.world().flows.len();
    let r = sim
        .amend(&Amendment {
            cancel: vec![FlowId::new(0)],
            ..Amendment::default()
        })
        .unwrap();
    assert_eq!(
        (r.cancelled, r.not_cancelled.clone()),
        (0, vec![FlowId::new(0)])
    );
    let bad = [
        Amendment {
            flows: vec![flow(0, 0, 10, Start::At(0), None)],
            ..Amendment::default()
        },
        Amendment {
            flows: vec![flow(0, 99, 10, Start::At(0), None)],
            ..Amendment::default()
        },
        Amendment {
            flows: vec![flow(0, 1, 10, Start::After { barrier: 7, gap: 0 }, None)],
            ..Amendment::default()
        },
        Amendment {
            cancel: vec![FlowId::new(50)],
            ..Amendment::default()
        },
    ];
    for a in bad {
        assert!(sim.amend(&a).is_err(), "{a:?}");
        assert_eq!(sim.world().flows.len(), before);
    }
    while sim.step_control(1 << 20) != ControlStep::Finished {}
    assert_eq!(sim.stats().flows_finished, 2);
}
