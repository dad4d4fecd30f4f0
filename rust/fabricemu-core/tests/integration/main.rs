//! The integration tests, one module per concern, compiled as ONE test binary: each separate
//! binary links the whole engine and Arrow again, and on the 2-core CI machine those links cost
//! minutes of a cold `.ci/run`. `cargo test --workspace --profile ci --test integration ocs::`
//! runs one module. tests/golden.rs (the documented re-record command) and tests/memory.rs (its own
//! global allocator) stay separate binaries.

#[path = "../common/mod.rs"]
mod common;

mod budget;
mod cc_reference;
mod cc_signals;
mod cc_validation;
mod cluster_fabric;
mod cluster_paths;
mod control;
mod control_amend;
mod control_cc;
mod dcqcn_validation;
mod dragonfly;
mod dragonfly_saturation;
mod engine_behaviour;
mod exactness;
mod fabric_tables;
mod failures;
mod flows_spilled;
mod hierarchical;
mod in_network;
mod in_network_scatter;
mod inference;
mod job_failures;
mod load_balancing;
mod normalise;
mod ocs;
mod packet_trace;
mod parallel;
mod pfc_accounting;
mod scenario_errors;
mod step_graph;
mod synthetic;
mod topology_graph;
mod trace_files;
mod training;
mod uet_validation;
mod unreachable;
mod unstarted_flows;
mod valiant_bound;
mod workloads;
