//! Criterion benchmarks of the engine: the event queue alone, and a whole small fabric run.
//! `cargo bench -p fabricemu-bench` (the packet-hops/s figures of the README come from
//! `fabricemu bench`, which runs larger scenarios end to end).

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use fabricemu_core::ids::PortId;

use fabricemu_core::engine::{Event, EventQueue};
use fabricemu_core::scenario::parse_toml;
use fabricemu_core::Simulation;

/// The allocator the Python extension uses (`fabricemu_core::huge_pages`).
#[global_allocator]
static ALLOC: fabricemu_core::huge_pages::HugePageAlloc = fabricemu_core::huge_pages::HugePageAlloc;

/// A steady state like the engine's: ~1000 pending events, each pop schedules one more, mostly at
/// a handful of recurring delays and sometimes at an arbitrary time.
fn event_queue(c: &mut Criterion) {
    const PENDING: u64 = 1000;
    const OPS: u64 = 100_000;
    let mut g = c.benchmark_group("event_queue");
    g.throughput(Throughput::Elements(OPS));
    g.bench_function("hold_1000_lanes", |b| {
        b.iter_batched(
            || {
                let mut q = EventQueue::new();
                for i in 0..PENDING {
                    q.push_after(1 + i * 97 % 5000, Event::PortFree(PortId::new(i as u32)));
                }
                q
            },
            |mut q| {
                let delays = [332_640u64, 5_280, 832_640, 505_280];
                for i in 0..OPS {
                    let (t, e) = q.pop().expect("non-empty");
                    if i % 16 == 0 {
                        q.push(t + (i * 7919) % 3_000_000, e);
                    } else {
                        q.push_after(delays[(i % 4) as usize], e);
                    }
                }
                q
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

fn small_fabric(c: &mut Criterion) {
    let (_, spec) = parse_toml(
        r#"
        [topology]
        kind = "fat_tree"
        k = 4
        link_rate = "100Gbps"
        [[workload]]
        kind = "permutation"
        size = "256KB"
        "#,
        "bench",
    )
    .expect("valid scenario");
    let hops = {
        let mut sim = Simulation::build(&spec).expect("builds");
        sim.run_to_end().packet_hops
    };
    let mut g = c.benchmark_group("fabric");
    g.throughput(Throughput::Elements(hops));
    g.bench_function("fat_tree_k4_permutation_256KB", |b| {
        b.iter(|| {
            let mut sim = Simulation::build(&spec).expect("builds");
            sim.run_to_end()
        })
    });
    g.finish();
}

criterion_group!(benches, event_queue, small_fabric);
criterion_main!(benches);
