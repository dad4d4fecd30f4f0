//! Resource guard: the memory and trace-volume estimates of `budget`, made from the validated
//! scenario before anything is allocated. Every shipped scenario fits; the issue's cases (fat tree
//! k=64 all-to-all, k=28 all-to-all, dragonfly_ugal_1k over 20 ms, a 100 Tbps host link, a 1 ps
//! link trace) are refused quickly, with the estimate and the limit in the message.

use std::path::PathBuf;
use std::time::Instant;

use fabricemu_core::budget::{self, Limits};
use fabricemu_core::scenario::{self, Scenario, WorkloadSpec};
use fabricemu_core::workload;

const GIB: u64 = 1 << 30;

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn shipped() -> Vec<(String, Scenario)> {
    let mut out = Vec::new();
    for dir in ["../../scenarios", "tests/golden"] {
        let dir = crate_dir().join(dir);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        files.sort();
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            // Replay files are named relative to the crate (as the golden test runs).
            std::env::set_current_dir(crate_dir()).unwrap();
            let (_, s) = scenario::parse_toml(&text, &f.display().to_string())
                .unwrap_or_else(|e| panic!("{e}"));
            out.push((f.display().to_string(), s));
        }
    }
    out
}

fn parse(text: &str) -> Scenario {
    scenario::parse_toml(text, "t.toml")
        .unwrap_or_else(|e| panic!("{e}"))
        .1
}

/// A fixed limit like this machine's default (80 % of ~20 GB available), so the test does not
/// depend on the machine it runs on.
fn limits() -> Limits {
    Limits {
        memory: 16 * GIB,
        memory_is_default: false,
        trace: budget::DEFAULT_TRACE_BYTES,
        trace_is_default: true,
    }
}

#[test]
fn every_shipped_scenario_fits_and_flow_counts_bound_the_plan() {
    for (name, s) in shipped() {
        let e = budget::check(&s, &limits()).unwrap_or_else(|err| panic!("{name}: {err}"));
        assert!(e.memory < 2 * GIB, "{name}: {} bytes", e.memory);
        // The build's plan: in-network collectives are placed on the fabric's switches.
        let plan = fabricemu_core::scenario::build(&s)
            .unwrap_or_else(|e| panic!("{e}"))
            .plan;
        for (i, w) in s.workloads.iter().enumerate() {
            let made = plan.reports[i].flows;
            let counted = e.workload_flows[i];
            match &w.spec {
                // Random arrivals: the estimate is the mean plus a margin.
                WorkloadSpec::Poisson(_) | WorkloadSpec::Synthetic(_) => assert!(
                    made <= counted && counted as f64 <= made as f64 * 1.5 + 100.0,
                    "{name}: workload {i}: made {made}, estimated {counted}"
                ),
                // Replay: the file is read by the build; its size bounds the rows.
                WorkloadSpec::Replay(_) => assert!(
                    made <= counted,
                    "{name}: workload {i}: made {made}, estimated {counted}"
                ),
                // Collectives: an upper bound (in-network: the flat ring's count, which a
                // communicator without a free reduction context falls back to).
                WorkloadSpec::Collective(c) => assert!(
                    made <= counted && (counted <= 4 * made + 16 || c.algorithm.is_in_network()),
                    "{name}: workload {i}: made {made}, estimated {counted}"
                ),
                _ => assert_eq!(made, counted, "{name}: workload {i}"),
            }
        }
    }
}

fn refused(text: &str) -> String {
    let t0 = Instant::now();
    let s = parse(text);
    let err = budget::check(&s, &limits()).expect_err("refused");
    // Refused from the parameters, without making the flows (seconds would be spent otherwise).
    assert!(t0.elapsed().as_secs() < 5, "took {:?}", t0.elapsed());
    err.to_string()
}

const FAT_TREE_A2A: &str = r#"
name = "big"
stop = "all_flows_done"
[topology]
kind = "fat_tree"
k = K
link_rate = "100Gbps"
link_delay = "500ns"
[[workload]]
kind = "all_to_all"
size = "1GB"
"#;

#[test]
fn huge_all_to_all_is_refused_with_the_estimate_and_the_limit() {
    let e = refused(&FAT_TREE_A2A.replace("K", "64"));
    assert!(e.contains("workload.0:"), "{e}");
    assert!(e.contains("4294901760 flows"), "{e}");
    assert!(e.contains("more than the limit of 16.0 GiB"), "{e}");
    assert!(e.contains("max_memory"), "{e}");
    // k = 28: 30 M flows, about 20 GB.
    let e = refused(&FAT_TREE_A2A.replace("K", "28"));
    assert!(e.contains("30112656 flows"), "{e}");
    // k = 16 fits.
    let s = parse(&FAT_TREE_A2A.replace("K", "16"));
    budget::check(&s, &limits()).unwrap();
    // A raised limit lets k = 28 through.
    let s = parse(&FAT_TREE_A2A.replace("K", "28"));
    let raised = Limits {
        memory: 64 * GIB,
        ..limits()
    };
    budget::check(&s, &raised).unwrap();
}

fn shipped_text(name: &str) -> String {
    std::fs::read_to_string(crate_dir().join("../../scenarios").join(name)).unwrap()
}

#[test]
fn long_synthetic_runs_and_rate_typos_are_refused() {
    let ugal_1k =
        shipped_text("dragonfly_ugal_1k.toml").replace("stop = \"600us\"", "stop = \"20ms\"");
    let e = refused(&ugal_1k);
    assert!(e.contains("workload.0:") && e.contains("flows"), "{e}");

    let typo = shipped_text("dragonfly_ugal.toml").replace(
        "link_rate = \"100Gbps\"",
        "link_rate = \"100Gbps\"\nhost_link_rate = \"100Tbps\"",
    );
    match scenario::parse_toml(&typo, "t.toml") {
        // Validation may already bound the workload; if not, the guard refuses it.
        Err(err) => assert!(err.to_string().contains("workload.0"), "{err}"),
        Ok((_, s)) => {
            let err = budget::check(&s, &limits()).expect_err("refused");
            assert!(err.to_string().contains("of memory"), "{err}");
        }
    }
}

#[test]
fn trace_volume_is_bounded_and_the_budget_can_be_raised() {
    let text = shipped_text("quickstart.toml") + "\n[trace]\nlinks = { interval = \"1ps\" }\n";
    let e = refused(&text);
    assert!(e.contains("trace.links:"), "{e}");
    assert!(e.contains("budget of 20.0 GiB (the default)"), "{e}");
    assert!(e.contains("max_trace_size"), "{e}");
    let s = parse(&text);
    let est = budget::estimate(&s);
    let raised = Limits {
        trace: est.trace_bytes,
        trace_is_default: false,
        ..limits()
    };
    budget::check(&s, &raised).unwrap();
    // A sensible interval fits the default budget.
    let ok = shipped_text("quickstart.toml") + "\n[trace]\nlinks = { interval = \"1us\" }\n";
    budget::check(&parse(&ok), &limits()).unwrap();
}

#[test]
fn poisson_generates_no_flows_after_stop() {
    let text = r#"
name = "p"
stop = "60us"
[topology]
kind = "fat_tree"
k = 4
link_rate = "100Gbps"
link_delay = "500ns"
[[workload]]
kind = "poisson"
cdf = "google_rpc"
load = 0.5
duration = "10s"
"#;
    let s = parse(text);
    let e = budget::estimate(&s);
    let plan = workload::plan(&s.workloads, s.seed).unwrap_or_else(|e| panic!("{e}"));
    assert!(!plan.flows.is_empty());
    for f in &plan.flows {
        match f.start {
            workload::Start::At(t) => assert!(t < 60_000_000, "a flow starts at {t} ps"),
            other => panic!("{other:?}"),
        }
    }
    // 16 senders at half of 100 Gbps, 2.9 KB flows: about 2,000 flows in 60 us, not a million.
    assert!(plan.flows.len() < 5_000, "{} flows", plan.flows.len());
    assert!(e.workload_flows[0] >= plan.flows.len() as u64);
    // Starting after the stop time is an error, as without a duration.
    let late = text.replace("duration = \"10s\"", "duration = \"10s\"\nstart = \"70us\"");
    let err = scenario::parse_toml(&late, "t.toml").unwrap_err();
    assert!(err.to_string().contains("workload.0.start"), "{err}");
}

#[test]
fn threads_multiply_what_every_partition_holds() {
    // Every partition and the view hold the fabric and may hold every flow's record (and a
    // few bytes per flow for the whole run); each partition adds 5 bytes per flow (its fold
    // bit and tight-barrier entry) and, where links may fail, a copy of the packets it sent to
    // the others. The plan's entries, the rows and the Arrow columns are the view's: once.
    let text = |threads: u32, fault: bool| {
        format!(
            "seed = 1\nthreads = {threads}\n[topology]\nkind = \"fat_tree\"\nk = 4\n{}\
             [[workload]]\nkind = \"permutation\"\nsize = \"100KB\"\n",
            if fault {
                "[[fault]]\nlink = [\"agg:0\", \"core:0\"]\nat = \"5us\"\n"
            } else {
                ""
            }
        )
    };
    for fault in [false, true] {
        let one = budget::estimate(&parse(&text(1, fault)));
        let three = budget::estimate(&parse(&text(3, fault)));
        let five = budget::estimate(&parse(&text(5, fault)));
        assert_eq!(three.fabric_memory, 4 * one.fabric_memory);
        // The same bytes per flow for each thread, fewer than one world's per flow.
        let (added3, added5) = (
            three.flow_memory - one.flow_memory,
            five.flow_memory - one.flow_memory,
        );
        assert_eq!(added3 * 5, added5 * 3);
        assert_eq!(added3 % (3 * one.flows), 0);
        assert!(
            added3 / 3 < one.flow_memory / 2,
            "{added3} {}",
            one.flow_memory
        );
        assert!(added3 / 3 > one.flows * 5);
        let copies = if fault { one.packets_in_flight * 48 } else { 0 };
        assert!(one.packets_in_flight > 0);
        assert_eq!(
            three.packet_memory,
            one.packet_memory + copies,
            "fault {fault}"
        );
    }
}

/// A step graph's ops count in the memory estimate (512 bytes each), its own workload's and
/// once however many threads run it (the plan is shared); a run whose ops dominate is refused
/// naming that workload and its ops.
#[test]
fn step_graph_ops_count_in_the_estimate() {
    let text = |layers: u32, threads: u32| {
        format!(
            "seed = 1\nthreads = {threads}\n[topology]\nkind = \"leaf_spine\"\nleaves = 2\n\
             hosts_per_leaf = 4\nspines = 2\n\
             [[workload]]\nkind = \"permutation\"\nsize = \"100KB\"\n\
             [[workload]]\nkind = \"training\"\ndp = 2\nlayers = {layers}\nhidden = 64\n\
             seq_len = 64\nforward = \"1us\"\ndp_bucket = \"1GiB\"\n"
        )
    };
    let s = parse(&text(100, 1));
    let WorkloadSpec::Training(t) = &s.workloads[1].spec else {
        panic!("a training workload")
    };
    let ops = workload::training::generate(t).ops.len() as u64;
    assert!(t.op_count() >= ops, "the validation's bound");
    let e = budget::estimate(&s);
    assert_eq!(e.workload_ops, vec![0, ops]);
    assert_eq!((e.ops, e.op_memory), (ops, ops * 512));
    assert_eq!(
        e.memory,
        (64 << 20) + e.flow_memory + e.op_memory + e.fabric_memory + e.packet_memory
    );
    assert_eq!(
        budget::estimate(&parse(&text(100, 2))).op_memory,
        e.op_memory
    );
    // 150,000 layers: 1.2 M ops (eight per layer), 614 MB of them, over a 512 MiB limit.
    let s = parse(&text(150_000, 1));
    let small = Limits {
        memory: 512 << 20,
        ..limits()
    };
    let err = budget::check(&s, &small).expect_err("refused").to_string();
    assert!(err.contains("workload.1:"), "{err}");
    assert!(err.contains("1200014 step-graph ops: 585.9 MiB"), "{err}");
}
