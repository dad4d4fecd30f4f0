//! The core's unit parsing, for Python code that takes `"10us"`, `"100KB"` or `"100Gbps"`: one parser
//! for scenario files and analysis arguments.

use fabricemu_core::units;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::errors::guard;

/// A duration such as `"500ns"`, `"1.5us"` or `"2ms"` as integer picoseconds (exact).
#[pyfunction]
pub fn parse_duration(text: &str) -> PyResult<u64> {
    guard("parsing a unit", || {
        units::parse_time(text).map_err(|e| PyValueError::new_err(e.to_string()))
    })
}

/// A size such as `"1500B"`, `"4KiB"` or `"1MB"` (a bare number is bytes) as integer bytes.
#[pyfunction]
pub fn parse_size(text: &str) -> PyResult<u64> {
    guard("parsing a unit", || {
        units::parse_bytes(text).map_err(|e| PyValueError::new_err(e.to_string()))
    })
}

/// A rate such as `"100Gbps"` or `"2.5Gbps"` as integer bits per second.
#[pyfunction]
pub fn parse_rate(text: &str) -> PyResult<u64> {
    guard("parsing a unit", || {
        units::parse_rate(text).map_err(|e| PyValueError::new_err(e.to_string()))
    })
}
