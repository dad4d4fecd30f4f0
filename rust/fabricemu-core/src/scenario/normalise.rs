//! The normalised scenario: the file as the user wrote it with every default written out, each
//! value the one the run uses. It is what run.json, the Arrow metadata,
//! `Scenario.to_dict(normalised=True)`, `Scenario.to_toml()` and `fabricemu validate
//! --normalised` show, and it reproduces the run exactly.
//!
//! Each section's filler lives beside its checks (`SwitchFile::normalised` in switch/config.rs,
//! ...) and takes the values from the validated spec, so that what is written is what validation
//! produced (never a second copy of a default); where the spec no longer holds a value as the
//! user gives it (a scaled or summed one), the filler uses the same default constant or function
//! the check uses. Units are written exactly in their largest exact unit ("100Gbps", "1us",
//! "32MiB", "1500B").
//!
//! What is filled, and what stays absent:
//! - every key with a default gets its effective value;
//! - a table that is off is written with its off switch only (`[switch.ecn] enabled = false`,
//!   `[transport.credits] mode = "sender"`, `[cluster.scaleup] kind = "none"`): its other keys
//!   are absent ([`is_off`]);
//! - keys that do not apply to the chosen kind or mode stay absent (DCQCN's table with
//!   cc = "none", `weights` without DWRR, a flap's `down` on a `down` fault);
//! - keys whose absence is itself the setting stay absent: each is listed with its meaning in
//!   [`ABSENT_MEANS`] (an absent `switch.port_buffer` is no per-port cap, an absent
//!   `trace.queues` is no queues.arrow);
//! - what users write as lists, selectors, graphs and distributions (hosts, groups, senders,
//!   ops, flap periods) stays as written: the spec holds them expanded or drawn at build time.
//!
//! # Adding a scenario key
//! A new key needs its filler, or `tests/integration/normalise.rs` fails (it walks every normalised
//! scenario and requires each key of each table to be present or listed in [`ABSENT_MEANS`]):
//! 1. set it in the `normalised` function of its table (beside the table's `validate`), from the
//!    validated spec, or from the same default constant/function `validate` uses;
//! 2. if its absence means something (no cap, off, chosen later), add `("table.key", "meaning")`
//!    to the `ABSENT_MEANS` of its module instead, and leave it `None`;
//! 3. a new table (or a new kind of `[topology]`, `[[workload]]`, cc) also needs its struct in
//!    the walk of `tests/integration/normalise.rs` (`fields_of`).

use super::schema::{ScenarioFile, Stop};
use crate::config::spec::{Scenario, StopAt, TopologySpec};
use crate::config::values::Duration;
use crate::trace::config::OutputFile;
use crate::transport::config::NicFile;

/// The scenario file `file` with every default filled in from its validated `spec` (which must
/// be `validate(file)`).
pub fn normalise(file: &ScenarioFile, spec: &Scenario) -> ScenarioFile {
    let stop = match spec.stop {
        StopAt::AllFlowsDone => "all_flows_done".to_string(),
        StopAt::Time(t) => crate::units::format_time(t),
    };
    let dragonfly = matches!(
        spec.topology,
        TopologySpec::Dragonfly { .. } | TopologySpec::DragonflyPlus { .. }
    );
    ScenarioFile {
        name: Some(spec.name.clone()),
        seed: spec.seed,
        threads: Some(spec.threads as i64),
        stop: Some(Stop {
            text: stop,
            at: spec.stop,
        }),
        // A measurement window needs a time stop.
        warmup: matches!(spec.stop, StopAt::Time(_)).then_some(Duration(spec.warmup_ps)),
        topology: file.topology.normalised(&spec.topology),
        cluster: match (&file.cluster, &spec.cluster) {
            (Some(f), Some(c)) => Some(f.normalised(c)),
            _ => None,
        },
        ocs: match (&file.ocs, &spec.ocs) {
            (Some(f), Some(o)) => Some(f.normalised(o)),
            _ => None,
        },
        switch: file.switch.normalised(&spec.switch, &spec.transport),
        routing: file.routing.normalised(&spec.routing, dragonfly),
        fault: file
            .fault
            .iter()
            .zip(&spec.faults)
            .map(|(f, s)| f.normalised(s))
            .collect(),
        failure_process: file
            .failure_process
            .iter()
            .zip(&spec.failure_processes)
            .map(|(f, s)| f.normalised(s))
            .collect(),
        transport: file.transport.normalised(&spec.transport),
        nic: Some(NicFile::normalised(spec.nic_arbitration)),
        workload: file
            .workload
            .iter()
            .zip(&spec.workloads)
            .map(|(f, s)| f.normalised(s))
            .collect(),
        trace: file.trace.normalised(&spec.trace),
        control: spec
            .control
            .as_ref()
            .map(crate::control::config::ControlFile::normalised),
        output: Some(OutputFile::normalised(file.output.as_ref())),
    }
}

/// Keys of the top level whose absence from a normalised scenario is itself the setting.
const TOP_ABSENT: &[(&str, &str)] = &[
    ("warmup", "stop = \"all_flows_done\": no measurement window"),
    ("cluster", "no [cluster]: one host per topology slot"),
    ("ocs", "no optical circuit switch"),
    (
        "control",
        "no [control]: no built-in policy (a Python controller may still act)",
    ),
    ("fault", "no faults"),
    ("failure_process", "no failure processes"),
];

/// Every key a normalised scenario may leave out besides those of a table that is off
/// ([`is_off`]), with what its absence means (`*` stands for a list index, or last for every key
/// of a table). The list `tests/integration/normalise.rs` checks
/// normalised scenarios against, and the reference docs/scenario-reference.md quotes.
pub fn absent_means() -> Vec<(&'static str, &'static str)> {
    [
        TOP_ABSENT,
        crate::switch::config::ABSENT_MEANS,
        crate::switch::trim::ABSENT_MEANS,
        crate::switch::reduction::ABSENT_MEANS,
        crate::routing::config::ABSENT_MEANS,
        crate::transport::config::ABSENT_MEANS,
        crate::transport::credits::ABSENT_MEANS,
        crate::cc::dctcp_config::ABSENT_MEANS,
        crate::cc::swift_config::ABSENT_MEANS,
        crate::cc::nscc_config::ABSENT_MEANS,
        crate::trace::config::ABSENT_MEANS,
        crate::topology::cluster::config::ABSENT_MEANS,
        crate::topology::faults::ABSENT_MEANS,
        crate::topology::ocs::ABSENT_MEANS,
        crate::workload::config::ABSENT_MEANS,
        crate::workload::graph::reaction::ABSENT_MEANS,
    ]
    .concat()
}

/// Whether a normalised table is off (`enabled = false`, `mode = "sender"`, `kind = "none"`):
/// then only its off switch is written.
pub fn is_off(table: &serde_json::Map<String, serde_json::Value>) -> bool {
    use serde_json::Value;
    table.get("enabled") == Some(&Value::Bool(false))
        || table.get("mode").and_then(Value::as_str) == Some("sender")
        || table.get("kind").and_then(Value::as_str) == Some("none")
}

/// Whether `path` (dotted, list indices as numbers) may be absent from a normalised scenario.
pub fn may_be_absent(path: &str) -> bool {
    absent_means()
        .iter()
        .any(|(pattern, _)| matches(pattern, path))
}

/// `pattern` with `*` matching one segment, or (last) the rest of the path.
fn matches(pattern: &str, path: &str) -> bool {
    let pat: Vec<&str> = pattern.split('.').collect();
    let segs: Vec<&str> = path.split('.').collect();
    for (i, p) in pat.iter().enumerate() {
        if *p == "*" && i == pat.len() - 1 && segs.len() > i {
            return true;
        }
        match segs.get(i) {
            Some(s) if *p == "*" || p == s => {}
            _ => return false,
        }
    }
    pat.len() == segs.len()
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn patterns() {
        assert!(matches("switch.alpha", "switch.alpha"));
        assert!(!matches("switch.alpha", "switch.alphas"));
        assert!(matches("switch.ecn.*", "switch.ecn.kmin"));
        assert!(!matches("switch.ecn.*", "switch.ecn"));
        assert!(matches("workload.*.hosts", "workload.3.hosts"));
        assert!(!matches("workload.*.hosts", "workload.3.size"));
        assert!(matches("workload.*.noise.*", "workload.0.noise.max"));
    }
}
