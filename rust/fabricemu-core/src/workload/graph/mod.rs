//! Step workloads as a dependency graph of compute and communication per rank (`kind = "graph"`,
//! and what `kind = "training"` / `"inference"` expand into). [`spec`] is the graph itself.

pub mod ideal;
pub mod spec;

pub use spec::{Graph, GraphOp, Jitter, Noise, OpKind, OpPhase};
