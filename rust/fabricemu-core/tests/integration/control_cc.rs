//! `set_cc` for HPCC and NSCC (issue 16): a change acts on the run and is recorded; unknown
//! names and bad values are errors naming the field.

use crate::common;
use fabricemu_core::control::{Action, ControlStep};
use fabricemu_core::ids::NodeId;

/// A 4-to-1 incast of long flows at 100G (1 us links) under `cc`, with a 20 us control loop.
fn incast(cc: &str) -> String {
    // NSCC reacts to ECN marks: the switches mark (RED at 20 % and 80 % of the ~50 KB BDP).
    let ecn = match cc {
        "nscc" => "[switch]\n        ecn = { kmin = \"10KB\", kmax = \"40KB\", pmax = 0.2 }",
        _ => "",
    };
    format!(
        r#"
        stop = "1ms"
        [topology]
        kind = "leaf_spine"
        leaves = 1
        spines = 1
        hosts_per_leaf = 5
        link_rate = "100Gbps"
        link_delay = "1us"
        [transport]
        cc = "{cc}"
        {ecn}
        [[workload]]
        kind = "incast"
        receiver = 0
        senders = 4
        size = "1GB"
        "#
    )
}

/// Run the HPCC incast, setting `param` to `value` at the first boundary (if given); the
/// bottleneck's (the leaf's port to the receiver) wire utilisation from 500 us to 1 ms.
fn hpcc_utilisation(change: Option<(&str, f64)>) -> f64 {
    let mut sim = common::build(&incast("hpcc"));
    sim.enable_control(Some(20_000_000));
    let w = sim.world();
    let bottleneck = w.fabric.peer_port[w.fabric.host_port(NodeId::new(0))];
    let mut samples = Vec::new();
    loop {
        match sim.step_control(1 << 20) {
            ControlStep::Finished => break,
            ControlStep::Running => {}
            ControlStep::Boundary(t) => {
                if let (0, Some((param, value))) = (t, change) {
                    let row = sim
                        .apply_action(
                            "test",
                            &Action::SetCc {
                                param: param.into(),
                                value,
                            },
                        )
                        .unwrap()
                        .expect("a change");
                    assert_eq!(row.target, format!("hpcc.{param}"));
                }
                if t == 500_000_000 || t == 1_000_000_000 {
                    samples.push((t, sim.world().port_tx_bytes(bottleneck)));
                }
            }
        }
    }
    let [(t0, b0), (t1, b1)] = samples[..] else {
        panic!("samples {samples:?}")
    };
    (b1 - b0) as f64 * 8.0 / (100e9 * (t1 - t0) as f64 * 1e-12)
}

/// HPCC holds the bottleneck near its target utilisation eta (Li et al. 2019, section 5; the
/// tolerance of cc_validation's incast test, [eta - 0.05, eta + 0.03]): lowering eta from 0.95 to
/// 0.6 live brings the utilisation down to ~0.6, and the action is a row of actions.arrow.
#[test]
fn set_cc_hpcc_eta_moves_the_utilisation() {
    let base = hpcc_utilisation(None);
    let lowered = hpcc_utilisation(Some(("eta", 0.6)));
    println!("HPCC utilisation: eta 0.95 -> {base:.3}, eta set to 0.6 -> {lowered:.3}");
    assert!((0.90..=0.98).contains(&base), "{base}");
    assert!((0.55..=0.63).contains(&lowered), "{lowered}");
}

#[test]
fn set_cc_hpcc_and_nscc_refuse_unknown_names_and_bad_values() {
    for (cc, param, value, field, says) in [
        ("hpcc", "g", 0.5, "param", "hpcc has no parameter \"g\""),
        ("hpcc", "eta", 0.0, "param", "eta must be in [0.01, 1]"),
        ("hpcc", "eta", f64::NAN, "value", ""),
        ("hpcc", "max_stage", 2.5, "param", "whole number"),
        ("hpcc", "rate_ai", 0.0, "param", "positive rate"),
        (
            "hpcc",
            "int_bytes_per_hop",
            8.0,
            "param",
            "one of: eta, max_stage",
        ),
        ("nscc", "eta", 0.5, "param", "nscc has no parameter \"eta\""),
        ("nscc", "md", 1.5, "param", "md must be in (0, 1]"),
        ("nscc", "max_window", 10.0, "param", "at least min_window"),
        ("nscc", "target_qdelay", 0.0, "param", "positive time"),
    ] {
        let mut sim = common::build(&incast(cc));
        sim.enable_control(Some(20_000_000));
        assert_eq!(sim.step_control(1 << 20), ControlStep::Boundary(0));
        let e = sim
            .apply_action(
                "test",
                &Action::SetCc {
                    param: param.into(),
                    value,
                },
            )
            .unwrap_err();
        assert_eq!(
            (e.action.as_str(), e.field.as_str()),
            ("set_cc", field),
            "{e}"
        );
        assert!(e.to_string().contains(says), "{cc} {param}: {e}");
        assert!(sim.action_rows().is_empty());
    }
    // A good NSCC change is recorded with its previous value.
    let mut sim = common::build(&incast("nscc"));
    sim.enable_control(Some(20_000_000));
    assert_eq!(sim.step_control(1 << 20), ControlStep::Boundary(0));
    let row = sim
        .apply_action(
            "test",
            &Action::SetCc {
                param: "md".into(),
                value: 0.5,
            },
        )
        .unwrap()
        .expect("a change");
    assert_eq!(row.target, "nscc.md");
    assert!(row.detail.contains("was 0.8"), "{}", row.detail);
}
