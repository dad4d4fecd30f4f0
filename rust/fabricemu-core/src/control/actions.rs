//! What a controller may do at a boundary, applied at that simulated time and recorded (one row
//! each) in actions.arrow. An action that changes nothing (the algorithm a call already has, a
//! collective with no call left to start, a flow that already finished) is not recorded.
//!
//! | action | fields | effect |
//! | --- | --- | --- |
//! | `set_algorithm` | `collective`, `algorithm` | the collective's next call that has not started runs `algorithm` (its planned flows are cancelled, the algorithm's transfers appended: `engine::amend`) |
//! | `reroute` | `flow`, `entropy` | the flow's data takes the ECMP paths of a new header entropy from its next packet on |
//! | `set_cc` | `param`, `value` | a congestion-control parameter of every flow (`engine::live::CC_PARAMS`) |
//! | `fault` | `link`, `kind` (`"down"` / `"degrade"`), `rate_bps` (degrade), `detection_ps` | a link fault now, until restored (a faults.arrow row, source "control") |
//! | `restore` | `link` | ends every live fault on the link |

use crate::config::CollectiveAlgorithm;
use crate::config::WorkloadSpec;
use crate::engine::Simulation;
use crate::ids::{FlowId, PortId};
use crate::scenario::FaultKind;
use crate::units::Time;

/// The kind of a live link fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LiveFault {
    Down,
    /// The link runs at this rate.
    Degrade {
        rate_bps: u64,
    },
}

/// One action.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    SetAlgorithm {
        collective: u32,
        algorithm: CollectiveAlgorithm,
    },
    Reroute {
        flow: u32,
        entropy: u32,
    },
    SetCc {
        param: String,
        value: f64,
    },
    Fault {
        link: u32,
        kind: LiveFault,
        /// Routing notices a down link after this long (default 10us).
        detection_ps: Option<Time>,
    },
    Restore {
        link: u32,
    },
    /// Move the optical circuit switch (`[ocs]`) to a configuration from now, taking
    /// `reconfiguration_ps` (None: `ocs.reconfiguration_time`).
    ReconfigureCircuits {
        circuits: crate::topology::ocs::CircuitsSpec,
        reconfiguration_ps: Option<Time>,
    },
}

impl Action {
    /// The action's name (actions.arrow `action`).
    pub fn name(&self) -> &'static str {
        match self {
            Action::SetAlgorithm { .. } => "set_algorithm",
            Action::Reroute { .. } => "reroute",
            Action::SetCc { .. } => "set_cc",
            Action::Fault { .. } => "fault",
            Action::Restore { .. } => "restore",
            Action::ReconfigureCircuits { .. } => "reconfigure_circuits",
        }
    }
}

/// Every action name.
pub const ACTIONS: [&str; 6] = [
    "set_algorithm",
    "reroute",
    "set_cc",
    "fault",
    "restore",
    "reconfigure_circuits",
];

/// A bad action: which action and field, and why. Nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionError {
    pub action: String,
    pub field: String,
    pub message: String,
}

impl ActionError {
    pub fn new(action: &str, field: &str, message: impl Into<String>) -> Self {
        Self {
            action: action.into(),
            field: field.into(),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for ActionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "action {}: {}: {}",
            self.action, self.field, self.message
        )
    }
}

impl std::error::Error for ActionError {}

/// One applied action (a row of actions.arrow).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionRow {
    pub time_ps: Time,
    /// Who acted: `"policy:telemetry_aware"` or `"python"`.
    pub source: String,
    pub action: &'static str,
    /// What it acted on: `"collective 0 call 3"`, `"flow 12"`, `"dcqcn.g"`, `"link 40"`.
    pub target: String,
    /// The new value: an algorithm, an entropy, a number, a fault kind.
    pub value: String,
    /// What it did: `"ring -> tree: 56 flows cancelled, 28 appended"`, the old value, ...
    pub detail: String,
}

impl Simulation {
    /// Apply `action` now on behalf of `source`; the row it adds to actions.arrow, or None if
    /// it changed nothing.
    pub fn apply_action(
        &mut self,
        source: &str,
        action: &Action,
    ) -> Result<Option<ActionRow>, ActionError> {
        let name = action.name();
        let err = |field: &str, m: String| ActionError::new(name, field, m);
        let (target, value, detail) = match action {
            Action::SetAlgorithm {
                collective,
                algorithm,
            } => match self.set_algorithm(*collective, *algorithm)? {
                None => return Ok(None),
                Some((call, detail)) => (
                    format!("collective {collective} call {call}"),
                    algorithm.name().to_string(),
                    detail,
                ),
            },
            Action::Reroute { flow, entropy } => {
                let fid = FlowId::new(*flow);
                let w = self.world();
                if *flow as usize >= w.flows.len() {
                    return Err(err(
                        "flow",
                        format!("flow {flow} does not exist (the run has {})", w.flows.len()),
                    ));
                }
                if w.flows[fid].finished() || w.is_cancelled(fid) {
                    return Ok(None);
                }
                self.live(|w| w.reroute_flow(fid, *entropy))
                    .map_err(|m| err("flow", m))?;
                (format!("flow {flow}"), entropy.to_string(), String::new())
            }
            Action::SetCc { param, value } => {
                if !value.is_finite() {
                    return Err(err(
                        "value",
                        format!("expected a finite number, found {value}"),
                    ));
                }
                let old = self
                    .live(|w| w.set_cc_param(param, *value))
                    .map_err(|m| err("param", m))?;
                if old == *value {
                    return Ok(None);
                }
                (
                    format!(
                        "{}.{param}",
                        crate::engine::live::cc_name(&self.scenario().transport.cc)
                    ),
                    value.to_string(),
                    format!("was {old}"),
                )
            }
            Action::Fault {
                link,
                kind,
                detection_ps,
            } => {
                let np = self.world().fabric.num_ports();
                if *link >= np {
                    return Err(err(
                        "link",
                        format!("link {link} does not exist (links 0..{np})"),
                    ));
                }
                let fault_kind = match *kind {
                    LiveFault::Down => FaultKind::Down,
                    LiveFault::Degrade { rate_bps } => {
                        if rate_bps == 0 {
                            return Err(err("rate_bps", "expected a positive rate".into()));
                        }
                        FaultKind::Degrade { rate_bps }
                    }
                };
                let row = self.control().map_or(0, |c| c.log.len()) as u32;
                let target = format!("link {link}");
                let detection =
                    detection_ps.unwrap_or(crate::topology::faults::DEFAULT_DETECTION_PS);
                let i = self
                    .live(|w| {
                        w.add_fault(&[PortId::new(*link)], fault_kind, &target, detection, row)
                    })
                    .map_err(|m| err("kind", m))?;
                (target, fault_kind.name().to_string(), format!("fault {i}"))
            }
            Action::Restore { link } => {
                let np = self.world().fabric.num_ports();
                if *link >= np {
                    return Err(err(
                        "link",
                        format!("link {link} does not exist (links 0..{np})"),
                    ));
                }
                let ended = self
                    .live(|w| Ok(w.restore_link(PortId::new(*link))))
                    .map_err(|m| err("link", m))?;
                if ended.is_empty() {
                    return Ok(None);
                }
                let list: Vec<String> = ended.iter().map(|i| format!("fault {i}")).collect();
                (format!("link {link}"), "up".into(), list.join(", "))
            }
            Action::ReconfigureCircuits {
                circuits,
                reconfiguration_ps,
            } => {
                let n = self
                    .reconfigure_circuits("circuits", circuits, *reconfiguration_ps)
                    .map_err(|e| err(&e.path, e.message))?;
                let value = match circuits {
                    crate::topology::ocs::CircuitsSpec::Uniform => "uniform".to_string(),
                    crate::topology::ocs::CircuitsSpec::None => "none".to_string(),
                    crate::topology::ocs::CircuitsSpec::List(l) => format!("{} circuits", l.len()),
                };
                ("ocs".to_string(), value, format!("reconfiguration {n}"))
            }
        };
        let row = ActionRow {
            time_ps: self.world().now,
            source: source.to_string(),
            action: name,
            target,
            value,
            detail,
        };
        if let Some(c) = self.control_mut() {
            c.log.push(row.clone());
        }
        Ok(Some(row))
    }

    /// Re-plan collective `c`'s next call that has not started with `algorithm`: (the call, a
    /// description), or None when nothing changed.
    fn set_algorithm(
        &mut self,
        c: u32,
        algorithm: CollectiveAlgorithm,
    ) -> Result<Option<(u32, String)>, ActionError> {
        let err = |field: &str, m: String| ActionError::new("set_algorithm", field, m);
        let Some(control) = self.control() else {
            return Err(err("collective", "the run has no control loop".into()));
        };
        let n = self.workload_plan().collectives.len();
        let Some(calls) = control.calls.of(c) else {
            return Err(err(
                "collective",
                if (c as usize) < n {
                    format!(
                        "collective {c} is part of a step workload: its calls cannot be re-planned"
                    )
                } else {
                    format!("collective {c} does not exist (the run has {n})")
                },
            ));
        };
        let inst = &self.workload_plan().collectives[c as usize];
        let WorkloadSpec::Collective(spec) =
            &self.scenario().workloads[inst.workload as usize].spec
        else {
            return Err(err(
                "collective",
                format!("collective {c} is not a collective workload"),
            ));
        };
        crate::control::calls::choosable(spec, algorithm, inst.hosts.len())
            .map_err(|m| err("algorithm", m))?;
        let w = self.world();
        let Some(k) = calls
            .iter()
            .position(|call| call.flows.iter().all(|&f| !w.flows[f].started))
        else {
            return Ok(None); // every call started
        };
        let call = &calls[k];
        if call.algorithm == algorithm {
            return Ok(None);
        }
        let amendment = crate::control::calls::replan(
            spec,
            algorithm,
            inst.workload,
            c,
            k as u32,
            &inst.hosts,
            call,
            self.world().num_barriers(),
        );
        let old = call.algorithm;
        let report = if algorithm.is_in_network() {
            let (workload, hosts, op) = (inst.workload, inst.hosts.clone(), spec.op);
            self.amend_in_network(&amendment, workload, &hosts, algorithm, op)
                .map_err(|m| err("algorithm", m))?
        } else {
            self.amend(&amendment)
                .map_err(|e| err("algorithm", e.to_string()))?
        };
        let first = report.first_flow;
        let added = amendment.flows.len() as u32;
        let control = self.control_mut().expect("checked above");
        let call = &mut control.calls.by_instance[c as usize]
            .as_mut()
            .expect("checked above")[k];
        call.algorithm = algorithm;
        call.flows = (first..first + added).map(FlowId::new).collect();
        Ok(Some((
            k as u32,
            format!(
                "{} -> {}: {} flows cancelled, {added} appended",
                old.name(),
                algorithm.name(),
                report.cancelled
            ),
        )))
    }
}
