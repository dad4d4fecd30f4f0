//! Trace tables written as Arrow IPC files (one module per table) and the run's run.json.

pub mod atomic;
pub mod flows;
pub mod run_json;
