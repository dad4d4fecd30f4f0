//! Step workloads as a dependency graph of compute and communication per rank (`kind = "graph"`,
//! and what `kind = "training"` / `"inference"` expand into). [`spec`] is the graph itself,
//! [`check`] its validity, [`noise`] compute jitter and stragglers, and [`plan`] the one function
//! that turns a graph into flows and barriers ([`plan_graph`]).

pub mod arrow_file;
pub mod check;
pub mod config;
pub mod ideal;
pub mod noise;
pub mod plan;
pub mod reaction;
mod repeat;
pub mod spec;

pub use check::GraphError;
pub use config::{GraphFile, GraphSpec};
pub use noise::NoiseFile;
pub use plan::{plan_graph, CollectiveParams, PlannedKind, PlannedOp};
pub use spec::{Graph, GraphOp, Jitter, Noise, OpKind, OpPhase};
