//! PFC and shared-buffer accounting stay exact through a run: at every step, each switch's shared
//! pool and each PFC (ingress link, class) counter, with its headroom part, hold exactly the bytes
//! of the packets queued there (`check_conservation` verifies it per counter, not only in total).
//!
//! Regression: a packet admitted into one switch's headroom kept its HEADROOM mark at the next
//! switch, which admitted it to its shared pool; leaving, it was released from that switch's
//! headroom counter (which never counted it: u64 underflow, a debug panic, and in release a
//! (link, class) that could never resume) and never from the shared pool (which leaked).

use crate::common;

use fabricemu_core::StepOutcome;

/// Run `toml` a few hundred events at a time, checking the accounting after every step.
fn run_checked(toml: &str) -> fabricemu_core::RunStats {
    let mut sim = common::build(toml);
    let mut steps = 0u64;
    loop {
        let done = sim.step(500) == StepOutcome::Finished;
        steps += 1;
        sim.check_conservation()
            .unwrap_or_else(|e| panic!("after {steps} steps: {e}"));
        if done {
            return sim.stats();
        }
    }
}

const DF72: &str = "kind = \"dragonfly\"\np = 2\na = 4\nh = 2\ng = 9\nlink_rate = \"100Gbps\"\nlink_delay = \"100ns\"\nglobal_link_delay = \"1us\"";

/// Every host sends to the host at the same position of the next group, through random
/// intermediate groups, into small lossless buffers: headroom in use at many hops.
fn dragonfly(lb: &str, hop_classes: bool) -> String {
    let flows = (0..72)
        .map(|h| format!("{{src = {h}, dst = {}, size = \"200KB\"}}", (h + 8) % 72))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "[topology]\n{DF72}\n[switch]\nbuffer = \"300KB\"\npfc = {{ enabled = true }}\n[routing]\nload_balancing = \"{lb}\"\nhop_classes = {hop_classes}\n[[workload]]\nkind = \"flows\"\nflows = [{flows}]"
    )
}

#[test]
fn headroom_at_one_switch_is_not_released_at_the_next() {
    // One class (no hop classes): the run that first overflowed the headroom counter.
    let st = run_checked(&dragonfly("valiant", false));
    assert!(
        st.pfc_pause_frames > 0,
        "the test must exercise PFC: {st:?}"
    );
}

#[test]
fn hop_classes_keep_every_class_counter_exact() {
    // Packets change class at global hops (and PAR's diverted local hop): each is counted, and
    // released, in the class it arrived in at each switch.
    for lb in ["valiant", "par"] {
        let st = run_checked(&dragonfly(lb, true));
        assert!(st.pfc_pause_frames > 0, "{lb}: {st:?}");
        assert_eq!(st.flows_finished, 72, "{lb}: {st:?}");
    }
}

#[test]
fn a_link_fault_releases_queued_lossless_packets_where_they_were_counted() {
    // An incast into small lossless buffers on a fat tree; a spine-side link fails while queues
    // (and headrooms) are full, losing what was queued for it, and comes back later.
    let st = run_checked(
        "stop = \"600us\"\n[topology]\nkind = \"fat_tree\"\nk = 4\n[switch]\nbuffer = \"200KB\"\npfc = { enabled = true }\n[[workload]]\nkind = \"incast\"\nreceiver = 0\nsenders = 12\nsize = \"300KB\"\n[[workload]]\nkind = \"permutation\"\nsize = \"200KB\"\n[[fault]]\nlink = [\"agg:0\", \"core:0\"]\nkind = \"down\"\nat = \"30us\"\nuntil = \"200us\"\ndetection = \"5us\"\n[[fault]]\nlink = [\"edge:0\", \"agg:0\"]\nkind = \"down\"\nat = \"50us\"\nuntil = \"250us\"\ndetection = \"5us\"",
    );
    assert!(st.pfc_pause_frames > 0, "{st:?}");
    assert!(st.link_fault_drops > 0, "{st:?}");
}

#[test]
fn a_larger_lossless_buffer_no_longer_stalls_a_hop_class_run() {
    // With 600 KB buffers the leaked shared pool and a never-resumed class kept this run going
    // (before the fix: 35 of 72 flows done after 30 M events, lossless drops); it ends now.
    let flows = (0..72)
        .map(|h| format!("{{src = {h}, dst = {}, size = \"500KB\"}}", (h + 8) % 72))
        .collect::<Vec<_>>()
        .join(", ");
    let mut sim = common::build(&format!(
        "[topology]\n{DF72}\n[switch]\nbuffer = \"600KB\"\npfc = {{ enabled = true }}\n[routing]\nload_balancing = \"valiant\"\nhop_classes = true\n[[workload]]\nkind = \"flows\"\nflows = [{flows}]"
    ));
    let mut steps = 0;
    while sim.step(100_000) == StepOutcome::Running {
        steps += 1;
        assert!(steps < 100, "the run does not end: {:?}", sim.stats());
    }
    sim.check_conservation().unwrap();
    let st = sim.stats();
    assert_eq!(st.flows_finished, 72, "{st:?}");
    assert_eq!(st.lossless_drops, 0, "{st:?}");
    assert_eq!(st.pfc_deadlocks, 0, "{st:?}");
}

#[test]
fn a_pause_whose_resume_was_lost_with_its_link_does_not_outlive_the_failure() {
    // Links of a lossless fat tree fail and are repaired while an incast keeps pausing them.
    // A PAUSE or RESUME on a link when it fails is lost with it: before 2026-12-05 the
    // upstream port stayed paused for good where its RESUME was lost (its downstream switch
    // had resumed it), though nothing was queued for it downstream, and the flows through it
    // never finished: 10 of 28 by 3 ms here, with no deadlock found (a chain of pauses, not a
    // cycle; found by fuzzing). Now a link's PFC state resets in both directions when it fails.
    let st = run_checked(
        r#"
        seed = 4
        stop = "3ms"
        [topology]
        kind = "fat_tree"
        k = 4
        link_rate = "100Gbps"
        link_delay = "1us"
        [switch]
        buffer = "150KB"
        pfc = { enabled = true }
        [[workload]]
        kind = "incast"
        receiver = 0
        senders = 12
        size = "400KB"
        [[workload]]
        kind = "permutation"
        size = "300KB"
        [[failure_process]]
        components = "links"
        tier = "fabric"
        mtbf = "200us"
        mttr = "30us"
        until = "400us"
        "#,
    );
    assert!(st.pfc_pause_frames > 100, "{st:?}");
    assert!(st.faults_applied > 5, "{st:?}");
    assert_eq!(st.pfc_deadlocks, 0, "{st:?}");
    assert_eq!(st.flows_finished, st.flows_total, "{st:?}");
}
