//! The memory the README states per entity (`World::memory_footprint`: bytes per port, node,
//! host port, flow and packet in flight) accounts for the heap a simulation really holds: a
//! counting allocator measures the bytes live after building (and after running) fabrics of
//! growing size, and what the footprint does not explain stays a small, fixed remainder (no
//! array grows as switches x hosts unnoticed).
//!
//! Open-loop workloads: a flow's transport record is recycled once the flow is done (only its
//! output row stays), so the records a long run holds at once follow the flows in progress, not
//! the messages of the run; the rows equal those of a run that keeps every record.

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

/// The heap counter is process-wide and one dhat profiler runs at a time: the tests take turns.
static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn the_stated_footprint_accounts_for_the_heap_of_growing_fabrics() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
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

/// An open-loop run on 8 hosts (two leaves of four, one spine): `kind` traffic at `load` for
/// `window`. A message is one to a few packets; at this load a few dozen are in progress at once.
fn open_loop(workload: &str, window: &str, extra: &str) -> String {
    format!(
        "seed = 3\n{extra}\n[topology]\nkind = \"leaf_spine\"\nleaves = 2\nspines = 1\n\
         hosts_per_leaf = 4\nlink_delay = \"500ns\"\n[[workload]]\n{workload}\n",
    )
    .replace("WINDOW", window)
}

const SYNTHETIC: &str = "kind = \"synthetic\"\npattern = \"uniform_random\"\nload = 0.4\n\
                         size = \"8KiB\"\nprocess = \"poisson\"";
const POISSON: &str = "kind = \"poisson\"\ncdf = \"google_rpc\"\nload = 0.4\nduration = \"WINDOW\"";

/// (heap live after the run, footprint then, peak flow records, messages, flow rows, labels,
/// run.json's synthetic figures) of `toml`, retiring flows (or keeping every record: `keep`).
#[allow(clippy::type_complexity)]
fn run_open_loop(
    toml: &str,
    keep: bool,
) -> (
    isize,
    fabricemu_core::engine::MemoryFootprint,
    Vec<fabricemu_core::trace::flows::FlowRow>,
    Vec<fabricemu_core::trace::flows::FlowLabels>,
    String,
) {
    let (_, spec) = parse_toml(toml, "m.toml").unwrap_or_else(|e| panic!("{e}"));
    let before = live();
    let mut sim = Simulation::build(&spec).unwrap_or_else(|e| panic!("{e}"));
    if keep {
        sim.keep_all_flows();
    }
    assert_eq!(sim.world().retires_flows(), !keep);
    sim.run_to_end();
    let ran = live() - before;
    let f = sim.world().memory_footprint();
    let out = (
        ran,
        f,
        sim.flow_rows(),
        sim.flow_labels(),
        format!("{:?} {:?}", sim.synthetic_stats(), sim.stats()),
    );
    drop(sim);
    out
}

#[test]
fn open_loop_flow_records_follow_the_flows_in_progress_not_the_messages() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let _profiler = dhat::Profiler::builder().testing().build();
    for (name, workload, extra, stop, windows) in [
        ("synthetic", SYNTHETIC, "", true, ["1ms", "8ms"]),
        (
            "poisson, DCQCN, PFC",
            POISSON,
            "[switch]\necn = { kmin = \"40KB\", kmax = \"160KB\", pmax = 0.2 }\n\
             pfc = { enabled = true }\n[transport]\ncc = \"dcqcn\"",
            false,
            ["0.25ms", "2ms"],
        ),
    ] {
        let scenario = |window: &str| {
            let stop = if stop {
                format!("stop = \"{window}\"\n")
            } else {
                String::new()
            };
            open_loop(workload, window, &format!("{stop}{extra}"))
        };
        let (short, long) = (scenario(windows[0]), scenario(windows[1]));
        let (heap_s, fs, rows_s, _, _) = run_open_loop(&short, false);
        let (heap_l, fl, rows_l, labels_l, stats_l) = run_open_loop(&long, false);
        // The same outputs as runs that keep every flow's record.
        let (heap_ks, fks, _, _, _) = run_open_loop(&short, true);
        let (heap_k, fk, rows_k, labels_k, stats_k) = run_open_loop(&long, true);
        assert_eq!(rows_l, rows_k, "{name}: flow rows");
        assert_eq!(labels_l, labels_k, "{name}: flow labels");
        assert_eq!(stats_l, stats_k, "{name}: run statistics");
        assert!(
            rows_s.len() > 200 && rows_l.len() > 6 * rows_s.len(),
            "{name}: {} and {} rows",
            rows_s.len(),
            rows_l.len()
        );
        let extra = (fl.messages - fs.messages) as f64;
        let per_extra = (heap_l - heap_s) as f64 / extra;
        let per_extra_kept = (heap_k - heap_ks) as f64 / extra;
        println!(
            "{name}: {} and {} messages; flow records at most {} and {} at once ({} kept); \
             heap per extra message {per_extra:.0} B ({per_extra_kept:.0} B keeping every \
             record); per record {} B, per message {} B, per retired flow {} B",
            fs.messages,
            fl.messages,
            fs.flows,
            fl.flows,
            fk.flows,
            fl.per_flow,
            fl.per_message,
            fl.per_retired
        );
        // Bounded by the flows in progress: 8x the messages, about as many records at once (a
        // margin for the randomness of arrivals: the largest burst grows with the run), and a
        // small fraction of the messages.
        assert_eq!(
            (fk.flows, fks.flows),
            (fk.messages, fks.messages),
            "{name}: all kept"
        );
        assert!(
            fl.flows <= 4 * fs.flows + 16,
            "{name}: {} then {} records",
            fs.flows,
            fl.flows
        );
        assert!(
            fl.flows * 20 < fl.messages,
            "{name}: {} records, {} messages",
            fl.flows,
            fl.messages
        );
        // Every finished flow retired but those still waiting at the stop for their last ACK.
        assert!(
            fl.retired <= rows_l.len() && rows_l.len() - fl.retired <= fl.flows,
            "{name}: {} retired, {} rows",
            fl.retired,
            rows_l.len()
        );
        // The footprint states the heap the run holds (never more) ...
        assert!(
            fl.total() as isize <= heap_l && fk.total() as isize <= heap_k,
            "{name}: footprints {} and {}, heaps {heap_l} and {heap_k}",
            fl.total(),
            fk.total()
        );
        // An open-loop workload streams (`workload::stream`): no message holds a plan entry.
        assert_eq!((fl.planned, fk.planned), (0, 0), "{name}: planned entries");
        // ... and what a message costs is what it states: its per-message state and its row
        // (the row store grows by chunks of 1,024 rows: a margin of 32 bytes per message) ...
        let stated = (fl.per_message + fl.per_retired) as f64;
        assert!(
            per_extra <= stated + 32.0,
            "{name}: {per_extra:.0} B per extra message, stated {stated}"
        );
        // ... where a run that keeps every record pays a record per message on top.
        let record = (fl.per_flow - fl.per_retired) as f64;
        assert!(
            per_extra_kept - per_extra > record - 32.0,
            "{name}: {per_extra_kept:.0} B per message keeping records, {per_extra:.0} retiring"
        );
    }
}

/// The README's memory table: `cargo test --profile ci --test memory -- --ignored --nocapture`
/// prints the footprint per entity and the heap (dhat) of fabrics of growing size, built, and of
/// the 1,056-host dragonfly run (scenarios/dragonfly_ugal_1k.toml, about 1.1 M messages).
#[test]
#[ignore = "slow: measures the README's memory table (a dragonfly run of ~1 M messages); .ci/run skips it"]
fn memory_table() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let _profiler = dhat::Profiler::builder().testing().build();
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let show = |label: &str, heap: isize, f: &fabricemu_core::engine::MemoryFootprint| {
        println!(
            "{label}: heap {:.1} MiB, footprint {:.1} MiB; per port {} B x {}, per node {} B x {}, \
             per host port {} B x {}, per flow record {} B x {}, per message {} B x {}, \
             per retired flow {} B x {}, per packet {} B x {}, route map {:.1} MiB",
            heap as f64 / 1048576.0,
            f.total() as f64 / 1048576.0,
            f.per_port,
            f.ports,
            f.per_node,
            f.nodes,
            f.per_host_port,
            f.host_ports,
            f.per_flow,
            f.flows,
            f.per_message,
            f.messages,
            f.per_retired,
            f.retired,
            f.per_packet,
            f.packets,
            f.route_map as f64 / 1048576.0
        );
    };
    for k in [8, 16, 24, 32] {
        let toml = fat_tree(k, "");
        let (_, spec) = parse_toml(&toml, "m.toml").unwrap_or_else(|e| panic!("{e}"));
        let before = live();
        let sim = Simulation::build(&spec).unwrap_or_else(|e| panic!("{e}"));
        show(
            &format!("fat_tree k={k} built"),
            live() - before,
            &sim.world().memory_footprint(),
        );
    }
    for file in [
        "scenarios/dragonfly_ugal_1k.toml",
        "scenarios/websearch_load.toml",
    ] {
        let path = format!("{root}/{file}");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let (_, spec) = parse_toml(&text, &path).unwrap_or_else(|e| panic!("{e}"));
        let before = live();
        let mut sim = Simulation::build(&spec).unwrap_or_else(|e| panic!("{e}"));
        show(
            &format!("{file} built"),
            live() - before,
            &sim.world().memory_footprint(),
        );
        let t = std::time::Instant::now();
        sim.run_to_end();
        let heap = live() - before;
        let peak = dhat::HeapStats::get().max_bytes;
        show(
            &format!("{file} ran"),
            heap,
            &sim.world().memory_footprint(),
        );
        let s = sim.stats();
        println!(
            "  {} events, {} packet-hops in {:.1} s; heap peak so far {:.1} MiB; records in use at most {}",
            s.events,
            s.packet_hops,
            t.elapsed().as_secs_f64(),
            peak as f64 / 1048576.0,
            sim.world().flows.peak_live()
        );
    }
}

/// A data-parallel training job of `dp` GPUs (8 per server, rail-optimised): its step graph has
/// a barrier per op, and a flow per transfer waiting for one.
fn training(dp: u32) -> String {
    format!(
        "seed = 1\n[topology]\nkind = \"leaf_spine\"\nleaves = 8\nhosts_per_leaf = {}\n\
         spines = 4\n[cluster]\ngpus_per_server = 8\ncabling = \"rail\"\n\
         scaleup = {{ kind = \"nvswitch\", gpus = 8, rate = \"3600Gbps\", latency = \"250ns\" }}\n\
         [[workload]]\nkind = \"training\"\ndp = {dp}\nlayers = 2\nhidden = 64\nseq_len = 64\n\
         forward = \"20us\"\ndp_bucket = \"64MiB\"\nalgorithms = {{ dp = \"halving_doubling\" }}\n\
         iterations = 4",
        dp / 8
    )
}

#[test]
fn the_stated_footprint_accounts_for_the_barriers_of_a_step_graph() {
    // 32 B per barrier (its counters, where its lists start) and 16 B per link (two vectors
    // per barrier and their heap blocks before 2026-12-04): stated, and what the footprint does
    // not explain grows by less than that layout cost.
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let _profiler = dhat::Profiler::builder().testing().build();
    let mut rest = Vec::new();
    for dp in [64, 512] {
        let (_, spec) = parse_toml(&training(dp), "m.toml").unwrap_or_else(|e| panic!("{e}"));
        let before = live();
        let sim = Simulation::build(&spec).unwrap_or_else(|e| panic!("{e}"));
        let built = live() - before;
        let f = sim.world().memory_footprint();
        let stated = f.total() as isize;
        println!(
            "dp={dp}: heap {built} after build, footprint {stated}, {} barriers, {} links, {} flows",
            f.barriers, f.barrier_links, f.messages
        );
        assert!(f.barriers > 10 * dp as usize, "{f:?}");
        assert!(
            stated <= built,
            "dp={dp}: footprint {stated} > heap {built}"
        );
        rest.push((f.barriers, built - stated));
        drop(sim);
    }
    // What the footprint leaves out grows with the plan: the Simulation's plan beside the
    // world (its barrier sizes and edges, the ops ops.arrow describes, the jobs' op tables),
    // about 100 B per barrier here. Two vectors per barrier cost about 120 B more, all of it
    // unstated (scenarios/parallel_training.toml's build: 225 -> 195 MiB for 343k barriers).
    let ((b0, r0), (b1, r1)) = (rest[0], rest[1]);
    let per_barrier = (r1 - r0) / (b1 - b0) as isize;
    assert!(
        per_barrier < 120,
        "{per_barrier} B per barrier unexplained: {rest:?}"
    );
}

#[test]
fn the_estimate_bounds_the_heap_of_a_parallel_run() {
    // The memory guard refuses a run whose estimate (`budget::estimate`) exceeds the limit: on
    // threads it must still be an upper bound of what the run holds (every partition and the
    // view hold the fabric, and a record of each flow whose packets they see), without counting
    // what only the view holds (the plan's entries, the rows) once per world: that made it
    // 4.7x the peak of `scenarios/parallel_training.toml` on two threads.
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let permutation = fat_tree(8, "");
    let cases = [("training", training(256)), ("permutation", permutation)];
    for (name, text) in &cases {
        for threads in [1u32, 2, 4] {
            let text = format!("threads = {threads}\n{text}");
            let (_, spec) = parse_toml(&text, "m.toml").unwrap_or_else(|e| panic!("{e}"));
            let e = fabricemu_core::budget::estimate(&spec);
            let stated = (e.fabric_memory + e.flow_memory + e.packet_memory) as usize;
            let profiler = dhat::Profiler::builder().testing().build();
            let mut sim = Simulation::build(&spec).unwrap_or_else(|e| panic!("{e}"));
            sim.run_to_end();
            drop(sim);
            let peak = dhat::HeapStats::get().max_bytes;
            drop(profiler);
            println!(
                "{name} on {threads}: heap peak {peak}, estimate {stated} ({:.2}x)",
                stated as f64 / peak as f64
            );
            assert!(
                peak <= stated,
                "{name} on {threads} threads: {peak} > {stated}"
            );
            // Not several times what it needs either (a permutation's flows are all in
            // progress at once: there the estimate is close).
            assert!(
                stated < 4 * peak,
                "{name} on {threads} threads: {stated} vs {peak}"
            );
        }
    }
}
