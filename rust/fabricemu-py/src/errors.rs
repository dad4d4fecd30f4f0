//! Rust errors as the Python exception classes of `fabricemu.errors`.

use std::any::Any;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use fabricemu_core::ScenarioError as CoreScenarioError;
use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

pyo3::import_exception!(fabricemu.errors, ScenarioError);
pyo3::import_exception!(fabricemu.errors, SimulationError);

/// `fabricemu.errors.ScenarioError` with the key path, position and the core's one-line message.
pub fn scenario_error(py: Python<'_>, e: &CoreScenarioError) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let kwargs = PyDict::new(py);
        kwargs.set_item("path", &e.path)?;
        kwargs.set_item("line", e.line)?;
        kwargs.set_item("column", e.column)?;
        kwargs.set_item("source_name", &e.source_name)?;
        kwargs.set_item("full", e.to_string())?;
        let value = py
            .get_type::<ScenarioError>()
            .call((&e.message,), Some(&kwargs))?;
        Ok(PyErr::from_value(value))
    };
    // If the class cannot be built (say, fabricemu.errors failed to import), raise that error.
    build().unwrap_or_else(|err| err)
}

/// `OSError(errno, message, path)`; Python picks the subclass (`FileNotFoundError`, ...).
pub fn io_error(e: &io::Error, path: &Path) -> PyErr {
    let path = path.display().to_string();
    match e.raw_os_error() {
        Some(errno) => PyOSError::new_err((errno, e.to_string(), path)),
        None => PyOSError::new_err(format!("{path}: {e}")),
    }
}

/// The panic barrier of every entry point: run `f`, and turn a Rust panic inside it into
/// `fabricemu.SimulationError` (an internal error, never a `PanicException`, which is a
/// `BaseException` that `except Exception` misses). `what` says what was being done.
pub fn guard<T>(what: &str, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| Err(panic_error(what, p)))
}

/// [`guard`] for entry points that read the user's input (a scenario, a unit string, a flow
/// file): a panic there is raised as `fabricemu.ScenarioError`, since it was the input that the
/// engine could not take.
pub fn guard_input<T>(py: Python<'_>, what: &str, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| {
        let e = CoreScenarioError {
            source_name: String::new(),
            path: String::new(),
            line: None,
            column: None,
            message: format!(
                "internal error while {what}: {} (please report it with the scenario)",
                panic_text(&p)
            ),
        };
        Err(scenario_error(py, &e))
    })
}

fn panic_text(payload: &Box<dyn Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string())
}

/// A Rust panic, caught before it reaches Python.
pub fn panic_error(what: &str, payload: Box<dyn Any + Send>) -> PyErr {
    let detail = panic_text(&payload);
    SimulationError::new_err(format!(
        "internal error in the engine while {what}: {detail} (please report it with the scenario)"
    ))
}
