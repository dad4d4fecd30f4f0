//! Python bindings (module `fabricemu._core`): a thin layer over `fabricemu-core`.
//!
//! Scenarios cross the seam as JSON text (the Python layer keeps the user's dictionary and validates
//! it here on every construction); a run returns its `run.json` as JSON text. The exception classes
//! are defined in Python (`fabricemu.errors`) so that users can name and catch them.

mod control;
mod errors;
mod run;
mod scenario;
mod topology;
mod units;

use pyo3::prelude::*;

/// Large arrays on huge pages (`fabricemu_core::huge_pages`): the engine's Rust allocations.
#[global_allocator]
static ALLOC: fabricemu_core::huge_pages::HugePageAlloc = fabricemu_core::huge_pages::HugePageAlloc;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", fabricemu_core::VERSION)?;
    m.add_function(wrap_pyfunction!(scenario::parse_toml, m)?)?;
    m.add_function(wrap_pyfunction!(scenario::parse_json, m)?)?;
    m.add_function(wrap_pyfunction!(scenario::to_toml, m)?)?;
    m.add_function(wrap_pyfunction!(scenario::toml_to_json, m)?)?;
    m.add_function(wrap_pyfunction!(scenario::describe, m)?)?;
    m.add_function(wrap_pyfunction!(scenario::estimate, m)?)?;
    m.add_function(wrap_pyfunction!(scenario::kept_build, m)?)?;
    m.add_function(wrap_pyfunction!(run::run, m)?)?;
    m.add_function(wrap_pyfunction!(topology::topology_summary, m)?)?;
    m.add_function(wrap_pyfunction!(topology::fabric_tables, m)?)?;
    m.add_function(wrap_pyfunction!(units::parse_duration, m)?)?;
    m.add_function(wrap_pyfunction!(units::parse_size, m)?)?;
    m.add_function(wrap_pyfunction!(units::parse_rate, m)?)?;
    Ok(())
}
