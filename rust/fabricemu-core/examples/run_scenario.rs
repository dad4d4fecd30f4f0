//! Run a scenario file and print its statistics (for profiling the engine without Python):
//! `cargo run --release --example run_scenario -- scenarios/permutation.toml`

use std::time::Instant;

use fabricemu_core::scenario::parse_toml;
use fabricemu_core::Simulation;

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
    let text = std::fs::read_to_string(&path).expect("readable scenario");
    let (_, spec) = parse_toml(&text, &path).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    for _ in 0..repeat {
        let t0 = Instant::now();
        let mut sim = Simulation::build(&spec).expect("buildable");
        let built = t0.elapsed().as_secs_f64();
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
        if let Some(s) = sim.synthetic_stats() {
            println!("  synthetic: {s:?}");
        }
    }
}
