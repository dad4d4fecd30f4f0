//! Python bindings (module `fabricemu._core`).
use pyo3::prelude::*;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", fabricemu_core::VERSION)?;
    Ok(())
}
