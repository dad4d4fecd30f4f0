//! A Python controller at a control boundary: the telemetry as a dict of columns, the actions it
//! returns parsed (every field checked, errors naming the action and field) and applied.

use fabricemu_core::config::CollectiveAlgorithm;
use fabricemu_core::control::actions::LiveFault;
use fabricemu_core::control::config::MIN_INTERVAL_PS;
use fabricemu_core::control::{Action, ActionError, Telemetry};
use fabricemu_core::Simulation;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

pyo3::import_exception!(fabricemu.errors, ControlError);

/// `control_interval` must be at least the shortest interval.
pub fn check_interval(ps: u64) -> PyResult<()> {
    if ps < MIN_INTERVAL_PS {
        return Err(PyValueError::new_err(format!(
            "control_interval: must be at least {MIN_INTERVAL_PS} ps (100ns), found {ps}"
        )));
    }
    Ok(())
}

/// `fabricemu.errors.ControlError` with `action` and `field`.
fn control_error(py: Python<'_>, e: &ActionError) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let kwargs = PyDict::new(py);
        kwargs.set_item("action", &e.action)?;
        kwargs.set_item("field", &e.field)?;
        let value = py
            .get_type::<ControlError>()
            .call((e.to_string(),), Some(&kwargs))?;
        Ok(PyErr::from_value(value))
    };
    build().unwrap_or_else(|err| err)
}

/// The telemetry snapshot as a dict: `time_ps`, `interval_ps`, `ports` (a dict of equal-length
/// lists, one entry per port) and `collectives` (a list of dicts).
fn telemetry_dict<'py>(py: Python<'py>, t: &Telemetry) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("time_ps", t.time_ps)?;
    d.set_item("interval_ps", t.interval_ps)?;
    let ports = PyDict::new(py);
    let p = &t.ports;
    ports.set_item("port", p.iter().map(|x| x.port).collect::<Vec<_>>())?;
    ports.set_item("node", p.iter().map(|x| x.node).collect::<Vec<_>>())?;
    ports.set_item("peer", p.iter().map(|x| x.peer).collect::<Vec<_>>())?;
    ports.set_item("rate_bps", p.iter().map(|x| x.rate_bps).collect::<Vec<_>>())?;
    ports.set_item("tx_bytes", p.iter().map(|x| x.tx_bytes).collect::<Vec<_>>())?;
    ports.set_item(
        "utilisation",
        p.iter().map(|x| x.utilisation).collect::<Vec<_>>(),
    )?;
    ports.set_item(
        "queue_bytes",
        p.iter().map(|x| x.queue_bytes).collect::<Vec<_>>(),
    )?;
    ports.set_item(
        "ecn_marks",
        p.iter().map(|x| x.ecn_marks).collect::<Vec<_>>(),
    )?;
    ports.set_item(
        "pause_frames",
        p.iter().map(|x| x.pause_frames).collect::<Vec<_>>(),
    )?;
    ports.set_item(
        "paused_ps",
        p.iter().map(|x| x.paused_ps).collect::<Vec<_>>(),
    )?;
    ports.set_item("down", p.iter().map(|x| x.down).collect::<Vec<_>>())?;
    d.set_item("ports", ports)?;
    let list = PyList::empty(py);
    for c in &t.collectives {
        let e = PyDict::new(py);
        e.set_item("collective", c.collective)?;
        e.set_item("workload", c.workload)?;
        e.set_item("group", c.group)?;
        e.set_item("op", c.op)?;
        e.set_item("ranks", c.ranks)?;
        e.set_item("hosts", c.hosts.clone())?;
        e.set_item("size_bytes", c.size_bytes)?;
        e.set_item("calls", c.calls)?;
        e.set_item("calls_done", c.calls_done)?;
        e.set_item("current_call", c.current_call)?;
        e.set_item("current_algorithm", c.current_algorithm)?;
        e.set_item("current_started", c.current_started)?;
        e.set_item("current_flows", c.current_flows)?;
        e.set_item("current_flows_done", c.current_flows_done)?;
        e.set_item("current_bytes", c.current_bytes)?;
        e.set_item("current_bytes_done", c.current_bytes_done)?;
        e.set_item("next_call", c.next_call)?;
        e.set_item("next_algorithm", c.next_algorithm)?;
        list.append(e)?;
    }
    d.set_item("collectives", list)?;
    Ok(d)
}

/// The fields each action takes (required first, then optional).
fn fields(action: &str) -> Option<(&'static [&'static str], &'static [&'static str])> {
    Some(match action {
        "set_algorithm" => (&["collective", "algorithm"], &[]),
        "reroute" => (&["flow", "entropy"], &[]),
        "set_cc" => (&["param", "value"], &[]),
        "fault" => (&["link"], &["kind", "rate_bps", "detection_ps"]),
        "restore" => (&["link"], &[]),
        "reconfigure_circuits" => (&["circuits"], &["reconfiguration_ps"]),
        _ => return None,
    })
}

/// One action dict as an [`Action`].
fn parse_action(d: &Bound<'_, PyAny>, index: usize) -> Result<Action, ActionError> {
    let at = |field: &str, m: String| ActionError::new(&format!("#{index}"), field, m);
    let Ok(d) = d.cast::<PyDict>() else {
        return Err(at(
            "",
            format!(
                "expected a dict (or a fabricemu.control action), found {}",
                d.get_type().name().map_or("?".into(), |n| n.to_string())
            ),
        ));
    };
    let name: String = match d.get_item("action").ok().flatten() {
        Some(v) => v
            .extract()
            .map_err(|_| at("action", "expected a string".into()))?,
        None => return Err(at("action", "missing".into())),
    };
    let Some((required, optional)) = fields(&name) else {
        return Err(at(
            "action",
            format!(
                "unknown action {name:?} (one of: {})",
                fabricemu_core::control::actions::ACTIONS.join(", ")
            ),
        ));
    };
    let err = |field: &str, m: String| ActionError::new(&name, field, m);
    for (k, _) in d.iter() {
        let k: String = k
            .extract()
            .map_err(|_| err("", "keys must be strings".into()))?;
        if k != "action" && !required.contains(&k.as_str()) && !optional.contains(&k.as_str()) {
            let all: Vec<&str> = required.iter().chain(optional).copied().collect();
            return Err(err(
                &k,
                format!("unknown field (fields: {})", all.join(", ")),
            ));
        }
    }
    let get = |field: &str| -> Result<Option<Bound<'_, PyAny>>, ActionError> {
        let v = d.get_item(field).ok().flatten().filter(|v| !v.is_none());
        if v.is_none() && required.contains(&field) {
            return Err(err(field, "missing".into()));
        }
        Ok(v)
    };
    let uint = |field: &str| -> Result<Option<u64>, ActionError> {
        match get(field)? {
            None => Ok(None),
            Some(v) => {
                if v.is_instance_of::<pyo3::types::PyBool>() {
                    return Err(err(
                        field,
                        "expected a non-negative integer, found a bool".into(),
                    ));
                }
                v.extract::<u64>().map(Some).map_err(|_| {
                    err(
                        field,
                        format!("expected a non-negative integer, found {}", repr(&v)),
                    )
                })
            }
        }
    };
    let u32_of = |field: &str| -> Result<u32, ActionError> {
        let v = uint(field)?.expect("required");
        u32::try_from(v).map_err(|_| err(field, format!("{v} is out of range")))
    };
    let string = |field: &str| -> Result<Option<String>, ActionError> {
        match get(field)? {
            None => Ok(None),
            Some(v) => v
                .extract::<String>()
                .map(Some)
                .map_err(|_| err(field, format!("expected a string, found {}", repr(&v)))),
        }
    };
    Ok(match name.as_str() {
        "set_algorithm" => {
            let a = string("algorithm")?.expect("required");
            let algorithm: CollectiveAlgorithm =
                serde_json::from_value(serde_json::Value::String(a.clone())).map_err(|_| {
                    err(
                        "algorithm",
                        format!(
                        "unknown algorithm {a:?} (ring, tree, halving_doubling, direct, pairwise)"
                    ),
                    )
                })?;
            Action::SetAlgorithm {
                collective: u32_of("collective")?,
                algorithm,
            }
        }
        "reroute" => Action::Reroute {
            flow: u32_of("flow")?,
            entropy: u32_of("entropy")?,
        },
        "set_cc" => {
            let v = get("value")?.expect("required");
            let value: f64 = v
                .extract()
                .map_err(|_| err("value", format!("expected a number, found {}", repr(&v))))?;
            Action::SetCc {
                param: string("param")?.expect("required"),
                value,
            }
        }
        "fault" => {
            let kind = string("kind")?.unwrap_or_else(|| "down".into());
            let rate = uint("rate_bps")?;
            let kind = match (kind.as_str(), rate) {
                ("down", None) => LiveFault::Down,
                ("down", Some(_)) => {
                    return Err(err(
                        "rate_bps",
                        "only a \"degrade\" fault has a rate".into(),
                    ))
                }
                ("degrade", Some(r)) => LiveFault::Degrade { rate_bps: r },
                ("degrade", None) => {
                    return Err(err(
                        "rate_bps",
                        "missing (a \"degrade\" fault needs it)".into(),
                    ))
                }
                (k, _) => {
                    return Err(err(
                        "kind",
                        format!("expected \"down\" or \"degrade\", found {k:?}"),
                    ))
                }
            };
            Action::Fault {
                link: u32_of("link")?,
                kind,
                detection_ps: uint("detection_ps")?,
            }
        }
        "restore" => Action::Restore {
            link: u32_of("link")?,
        },
        "reconfigure_circuits" => {
            // The same value as `[ocs] circuits`: "uniform", "none" or a list of pairs.
            let v = get("circuits")?.expect("required");
            let text: String = v
                .py()
                .import("json")
                .and_then(|j| j.call_method1("dumps", (&v,)))
                .and_then(|t| t.extract())
                .map_err(|_| err("circuits", format!("expected \"uniform\", \"none\" or a list of pairs of switch names, found {}", repr(&v))))?;
            let file: fabricemu_core::topology::ocs::CircuitsFile =
                serde_json::from_str(&text).map_err(|e| err("circuits", e.to_string()))?;
            let circuits = fabricemu_core::topology::ocs::circuits_spec("circuits", &file)
                .map_err(|e| err(&e.path, e.message))?;
            Action::ReconfigureCircuits {
                circuits,
                reconfiguration_ps: uint("reconfiguration_ps")?,
            }
        }
        _ => unreachable!("fields() knows every action"),
    })
}

fn repr(v: &Bound<'_, PyAny>) -> String {
    v.repr().map_or_else(|_| "?".into(), |r| r.to_string())
}

/// Call `controller` with the latest telemetry and apply the actions it returns (None or an
/// iterable of dicts) in order. The first bad action raises `ControlError`; actions before it
/// stay applied (and recorded).
pub fn call_controller(
    py: Python<'_>,
    sim: &mut Simulation,
    controller: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let telemetry = match sim.telemetry() {
        Some(t) => telemetry_dict(py, t)?,
        None => return Ok(()),
    };
    let returned = controller.call1((telemetry,))?;
    if returned.is_none() {
        return Ok(());
    }
    let iter = returned.try_iter().map_err(|_| {
        PyValueError::new_err(format!(
            "the controller must return None or a list of actions, found {}",
            repr(&returned)
        ))
    })?;
    for (i, item) in iter.enumerate() {
        let item = item?;
        let action = parse_action(&item, i).map_err(|e| control_error(py, &e))?;
        sim.apply_action("python", &action)
            .map_err(|e| control_error(py, &e))?;
    }
    Ok(())
}
