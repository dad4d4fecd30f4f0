//! Trace tables written as Arrow IPC files (one module per table) and the run's run.json.
//! Every file is written under a temporary name and renamed when complete ([`atomic`]).
//! During a run, the streamed tables belong to the World's tracing part, [`Tracer`] (`tracer.rs`).

pub mod actions;
pub mod atomic;
pub mod circuits;
pub mod collectives;
pub mod config;
pub mod fabric;
pub mod faults;
pub mod flows;
pub mod latency;
pub mod ops;
pub mod packets;
pub mod rows;
pub mod run_json;

pub use atomic::{write_atomic, AtomicFile};
pub use flows::{write_flows, FlowRow};
pub use run_json::write_run_json;
pub mod stream;
pub mod tables;
pub mod tracer;

pub use tracer::{LinkSample, Tracer, Traces};
