//! Trace tables written as Arrow IPC files (one module per table) and the run's run.json.
//! Every file is written under a temporary name and renamed when complete ([`atomic`]).

pub mod atomic;
pub mod collectives;
pub mod config;
pub mod flows;
pub mod run_json;

pub use atomic::{write_atomic, AtomicFile};
pub use flows::{write_flows, FlowRow};
pub use run_json::write_run_json;
pub mod stream;
pub mod tables;
