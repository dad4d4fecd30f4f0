//! fabricemu-core: a packet-level network fabric emulator.
//!
//! Exact integer-picosecond discrete-event engine (see DESIGN.md at the project root). This crate has
//! no Python dependency; `fabricemu-py` binds it.

pub mod budget;
pub mod cc;
pub mod config;
pub mod control;
pub mod engine;
pub mod huge_pages;
pub mod ids;
pub mod output;
pub mod packet;
pub mod rng;
pub mod routing;
pub mod scenario;
pub mod switch;
pub mod topology;
pub mod trace;
pub mod transport;
pub mod units;
pub mod workload;

pub use engine::{RunStats, Simulation, StepOutcome};
pub use scenario::{Scenario, ScenarioError};

/// The version written into run.json and trace metadata.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
