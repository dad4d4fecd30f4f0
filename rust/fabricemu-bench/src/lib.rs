//! Criterion benchmarks of the fabricemu engine: see `benches/engine.rs`
//! (`cargo bench -p fabricemu-bench`). The library is empty; the crate exists to keep criterion
//! out of the core's dev-dependencies.
