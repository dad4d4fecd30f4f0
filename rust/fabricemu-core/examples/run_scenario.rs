//! Run a scenario file and print its statistics (for profiling the engine without Python):
//! `cargo run --release --example run_scenario -- scenarios/permutation.toml [repeat] [out_dir]`
//! (with `out_dir`, the run streams its traces there and writes its outputs, as `fabricemu run`;
//! with `ALTERNATE_PACE=N` in the environment, a parallel run switches between its threads and one
//! thread every N windows; with `SHADOW_ALONGSIDE=1`, a failure-free shadow run a job may need
//! runs on a spare core, as `fabricemu run` lets it).

use std::time::Instant;

use fabricemu_core::scenario::{parse_toml, to_json};
use fabricemu_core::{output, Simulation};

/// The allocator the Python extension uses (`fabricemu_core::huge_pages`).
#[global_allocator]
static ALLOC: fabricemu_core::huge_pages::HugePageAlloc = fabricemu_core::huge_pages::HugePageAlloc;

fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: run_scenario SCENARIO.toml [repeat]");
    let repeat: u32 = std::env::args()
        .nth(2)
        .map(|s| s.parse().expect("repeat count"))
        .unwrap_or(1);
    let out = std::env::args().nth(3).map(std::path::PathBuf::from);
    let text = std::fs::read_to_string(&path).expect("readable scenario");
    let (file, spec) = parse_toml(&text, &path).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    for _ in 0..repeat {
        let t0 = Instant::now();
        let mut sim = Simulation::build(&spec).expect("buildable");
        // (Tests of the parallel engine: switch between threads and one thread every N windows.)
        if let Some(n) = std::env::var("ALTERNATE_PACE")
            .ok()
            .and_then(|v| v.parse().ok())
        {
            sim.alternate_parallel_pace(n);
        }
        if std::env::var("SHADOW_ALONGSIDE").is_ok_and(|v| v == "1") {
            let limits = fabricemu_core::budget::Limits::new(None, None);
            let estimate = fabricemu_core::budget::estimate(&spec);
            sim.shadow_alongside(&estimate, &limits);
        }
        let built = t0.elapsed().as_secs_f64();
        let json = to_json(&file);
        if let Some(dir) = &out {
            std::fs::create_dir_all(dir).expect("an output folder");
            (sim.open_traces(dir, &output::metadata(&json, spec.seed))).expect("traces open");
        }
        let stats = sim.run_to_end();
        let wall = t0.elapsed().as_secs_f64();
        sim.check_conservation().expect("conservation");
        println!(
            "build {built:.3}s wall {wall:.3}s events {} packet_hops {} ({:.2} M hops/s, {:.2} M events/s) sim {:.3} us flows {}/{} drops {} retx {} timeouts {} max_q {} nonmin {} max_ghops {} pauses {} deadlocks {} lossless_drops {}",
            stats.events,
            stats.packet_hops,
            stats.packet_hops as f64 / (wall - built) / 1e6,
            stats.events as f64 / (wall - built) / 1e6,
            stats.simulated_ps as f64 / 1e6,
            stats.flows_finished,
            stats.flows_total,
            stats.packets_dropped,
            stats.retransmitted_packets,
            stats.timeouts,
            stats.max_queue_bytes,
            stats.packets_nonminimal,
            stats.max_global_hops,
            stats.pfc_pause_frames,
            stats.pfc_deadlocks,
            stats.lossless_drops,
        );
        if let Some(w) = sim.parallel_windows() {
            println!(
                "  windows {} ({} merged, {} long, {} on one thread), up to {} ps on a grid of {} ps",
                w.count, w.merged, w.long, w.on_one_thread, w.lookahead, w.grid
            );
            println!(
                "  flow records at most, per partition: {:?}",
                sim.partition_peak_records()
            );
        }
        if let Some(s) = sim.synthetic_stats() {
            println!("  synthetic: {s:?}");
        }
        if let Some(dir) = &out {
            let t1 = Instant::now();
            output::write_outputs(dir, &mut sim, &json, spec.seed, false, wall)
                .expect("outputs written");
            println!("  outputs written in {:.3}s", t1.elapsed().as_secs_f64());
        }
    }
}
