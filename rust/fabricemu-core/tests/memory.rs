//! The memory the README states per entity (`World::memory_footprint`: bytes per port, node,
//! host port, flow and packet in flight) accounts for the heap a simulation really holds: a
//! counting allocator measures the bytes live after building (and after running) fabrics of
//! growing size, and what the footprint does not explain stays a small, fixed remainder (no
//! array grows as switches x hosts unnoticed).

use fabricemu_core::scenario::parse_toml;
use fabricemu_core::Simulation;

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

fn live() -> isize {
    dhat::HeapStats::get().curr_bytes as isize
}

/// (bytes live after building, the footprint's total then, after running, the footprint then).
fn measure(toml: &str) -> (isize, isize, isize, isize) {
    let (_, spec) = parse_toml(toml, "m.toml").unwrap_or_else(|e| panic!("{e}"));
    let before = live();
    let mut sim = Simulation::build(&spec).unwrap_or_else(|e| panic!("{e}"));
    let built = live() - before;
    let f0 = sim.world().memory_footprint().total() as isize;
    sim.run_to_end();
    let ran = live() - before;
    let f1 = sim.world().memory_footprint().total() as isize;
    drop(sim);
    (built, f0, ran, f1)
}

fn fat_tree(k: u32, extra: &str) -> String {
    format!(
        "seed = 1\n[topology]\nkind = \"fat_tree\"\nk = {k}\n{extra}\n\
         [[workload]]\nkind = \"permutation\"\nsize = \"64KB\""
    )
}

#[test]
fn the_stated_footprint_accounts_for_the_heap_of_growing_fabrics() {
    // One test (one thread): the counter is process-wide.
    let _profiler = dhat::Profiler::builder().testing().build();
    let mut rest = Vec::new();
    for k in [8, 16, 24] {
        for extra in [
            "",
            "[switch]\npfc = { enabled = true }\n[transport]\ncc = \"hpcc\"",
        ] {
            let (built, f0, ran, f1) = measure(&fat_tree(k, extra));
            // The footprint never claims more than is there ...
            assert!(
                f0 <= built,
                "k={k} {extra}: footprint {f0} > heap {built} after build"
            );
            assert!(
                f1 <= ran,
                "k={k} {extra}: footprint {f1} > heap {ran} after run"
            );
            // ... and explains nearly all of it: the remainder is fixed-size state (event queue
            // tables, trace builders, the scenario), not per entity.
            rest.push((k, built - f0, ran - f1, built, ran));
            println!("k={k} {extra:?}: heap {built} after build (footprint {f0}), {ran} after run (footprint {f1})");
            assert!(
                built - f0 < built / 5 + (1 << 20),
                "k={k} {extra}: heap {built} after build, footprint {f0}"
            );
        }
    }
    // The unexplained remainder does not grow with the fabric (k=24 has 6.75x the ports of k=8).
    let r8 = rest.iter().filter(|r| r.0 == 8).map(|r| r.1).max().unwrap();
    let r24 = rest
        .iter()
        .filter(|r| r.0 == 24)
        .map(|r| r.1)
        .max()
        .unwrap();
    assert!(
        r24 < r8 + (1 << 20),
        "remainder k=8 {r8}, k=24 {r24}: {rest:?}"
    );
}
