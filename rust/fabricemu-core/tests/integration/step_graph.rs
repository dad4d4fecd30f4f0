//! Step graphs (`kind = "graph"`): the engine runs ops when their dependencies ended.
//! Sources of the expectations (no tolerance unless stated):
//! - a graph of one collective against `kind = "collective"` on the same fabric: the same flows
//!   released at the same time, so the same end to the picosecond;
//! - chains of compute and sends: the sum of the compute durations and each message's
//!   store-and-forward time (as in tests/exactness.rs, computed by hand);
//! - a straggler: its extra compute adds to a synchronous step exactly (no jitter), and within
//!   the jitter's bound otherwise;
//! - dependency semantics: an op starts when its last predecessor ended (collectives: on every
//!   member), read from ops.arrow.

use std::collections::HashMap;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type, UInt32Type};
use fabricemu_core::trace::ops::OpRow;

use crate::common;
use common::{read_arrow, run, scenario_error, scratch, write_run};

/// Serialisation of `bytes` at 100 Gbps: 80 ps per byte.
fn ser100(bytes: u64) -> u64 {
    bytes * 80
}

/// A leaf-spine of `leaves` leaves with 4 hosts each, 100 Gbps, 500 ns links.
fn fabric(leaves: u32) -> String {
    format!(
        "[topology]\nkind = \"leaf_spine\"\nleaves = {leaves}\nspines = 2\nhosts_per_leaf = 4\n\
         link_rate = \"100Gbps\"\nlink_delay = \"500ns\"\n"
    )
}

/// Start and end of op `op` (iteration `it`) of workload 0, checking every rank's row agrees.
fn span(rows: &[OpRow], op: u32, it: u32) -> (u64, u64) {
    let mine: Vec<&OpRow> = rows
        .iter()
        .filter(|r| r.op == op && r.iteration == it)
        .collect();
    assert!(!mine.is_empty(), "op {op} iteration {it} has no rows");
    let s = (mine[0].start_ps.unwrap(), mine[0].end_ps.unwrap());
    assert!(mine
        .iter()
        .all(|r| (r.start_ps.unwrap(), r.end_ps.unwrap()) == s));
    s
}

#[test]
fn a_graph_of_one_collective_takes_what_the_collective_workload_takes() {
    for (op, algorithm, extra) in [
        ("all_reduce", "ring", ""),
        ("all_reduce", "tree", ""),
        ("all_reduce", "halving_doubling", ""),
        ("all_gather", "ring", ""),
        ("reduce_scatter", "halving_doubling", ""),
        ("all_to_all", "pairwise", ""),
        ("all_reduce", "hierarchical_ring", "domain_size = 4\n"),
        ("all_gather", "hierarchical_ring", "domain_size = 4\n"),
    ] {
        let hosts = "[0, 1, 2, 3, 4, 5, 6, 7]";
        let coll = run(&format!(
            "{}[[workload]]\nkind = \"collective\"\nop = \"{op}\"\nalgorithm = \"{algorithm}\"\n\
             hosts = {hosts}\nsize = \"1MiB\"\nstart = \"2us\"\n{extra}",
            fabric(2)
        ));
        let rows = coll.collective_rows();
        let expect = rows[0].finish_ps.unwrap();
        let graph = run(&format!(
            "{}[[workload]]\nkind = \"graph\"\nstart = \"2us\"\n{extra}ops = [{{ kind = \"collective\", \
             op = \"{op}\", algorithm = \"{algorithm}\", ranks = {hosts}, size = \"1MiB\" }}]\n",
            fabric(2)
        ));
        let ops = graph.op_rows();
        assert_eq!(ops.len(), 8);
        // The same flows.
        let key = |r: &fabricemu_core::trace::flows::FlowRow| (r.src, r.dst, r.size_bytes);
        let (mut a, mut b): (Vec<_>, Vec<_>) = (
            coll.flow_rows().iter().map(key).collect(),
            graph.flow_rows().iter().map(key).collect(),
        );
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b, "{op} {algorithm}");
        let (start, end) = span(&ops, 0, 0);
        assert_eq!(start, 2_000_000);
        if algorithm == "hierarchical_ring" {
            // Simultaneous events are ordered by kind, then entity (`engine::queue::tie_break`),
            // and the two forms start the phases' flows by other kinds of events (fixed starts
            // in one, barrier releases in the other): the overlapping phases resolve their ties
            // at shared ports apart. Measured 2.2 % apart; tolerance 4 %.
            let (d, e) = ((end - start) as f64, (expect - start) as f64);
            assert!((d / e - 1.0).abs() < 0.04, "{op} {algorithm}: {d} vs {e}");
            continue;
        }
        assert_eq!(end, expect, "{op} {algorithm}");
        // With negligible compute around it (1 ps each side), it takes what the collective
        // workload takes when started 1 ps later, and ends 1 ps after that. (Not simply 1 ps
        // later than `expect`: simultaneous events are ordered by a tie-break that changes with
        // the time, see `engine::queue`, so a run shifted in time may resolve its ties apart.)
        let shifted = run(&format!(
            "{}[[workload]]\nkind = \"collective\"\nop = \"{op}\"\nalgorithm = \"{algorithm}\"\n\
             hosts = {hosts}\nsize = \"1MiB\"\nstart = \"2000001ps\"\n{extra}",
            fabric(2)
        ));
        let expect = shifted.collective_rows()[0].finish_ps.unwrap() - 1;
        let graph = run(&format!(
            "{}[[workload]]\nkind = \"graph\"\nstart = \"2us\"\n{extra}ops = [\
             {{ kind = \"compute\", rank = 0, duration = \"1ps\" }},\
             {{ kind = \"collective\", op = \"{op}\", algorithm = \"{algorithm}\", ranks = {hosts}, \
             size = \"1MiB\", deps = [0] }},\
             {{ kind = \"compute\", rank = 0, duration = \"1ps\", deps = [1] }}]\n",
            fabric(2)
        ));
        let ops = graph.op_rows();
        assert_eq!(
            span(&ops, 1, 0),
            (2_000_001, expect + 1),
            "{op} {algorithm}"
        );
        assert_eq!(span(&ops, 2, 0).1, expect + 2);
    }
}

#[test]
fn a_chain_of_compute_and_sends_is_the_analytic_sum() {
    // Host 0 and 1 are on one leaf: 2 hops; host 0 and 4 on two leaves: 4 hops.
    let sim = run(&format!(
        "{}[[workload]]\nkind = \"graph\"\nstart = \"1us\"\nranks = [0, 1, 4]\nops = [\n\
         {{ kind = \"compute\", rank = 0, duration = \"10us\" }},\n\
         {{ kind = \"send\", src = 0, dst = 1, size = \"1MB\", deps = [0] }},\n\
         {{ kind = \"compute\", rank = 1, duration = \"3us\", deps = [1] }},\n\
         {{ kind = \"send\", src = 1, dst = 2, size = \"40960B\", deps = [2] }},\n\
         {{ kind = \"compute\", rank = 2, flops = 5e9, deps = [3] }},\n]\ngpu_flops = 1e15\n",
        fabric(2)
    ));
    // 1 MB: 244 full packets + one of 576 B; 62 B of header each (tests/exactness.rs).
    let send = |hops: u64, n: u64, last: u64| {
        (hops + n - 2) * ser100(4096 + 62) + ser100(last + 62) + hops * 500_000
    };
    let s1 = send(2, 245, 576);
    let s2 = send(4, 10, 4096);
    let ops = sim.op_rows();
    let mut t = 1_000_000;
    let expect = [10_000_000, s1, 3_000_000, s2, 5_000_000];
    for (i, d) in expect.iter().enumerate() {
        assert_eq!(span(&ops, i as u32, 0), (t, t + d), "op {i}");
        t += d;
    }
    assert_eq!(
        sim.stats().simulated_ps,
        t,
        "the run ends with the last compute"
    );
}

#[test]
fn ops_wait_for_all_their_predecessors_and_collectives_for_every_member() {
    let sim = run(&format!(
        "{}[[workload]]\nkind = \"graph\"\ngroups = [[0, 1, 2, 3]]\nops = [\n\
         {{ kind = \"compute\", rank = 0, duration = \"10us\" }},\n\
         {{ kind = \"compute\", rank = 1, duration = \"30us\" }},\n\
         {{ kind = \"send\", src = 0, dst = 1, size = \"4KiB\", deps = [0, 1] }},\n\
         {{ kind = \"compute\", rank = 2, duration = \"50us\" }},\n\
         {{ kind = \"compute\", rank = 3, duration = \"5us\" }},\n\
         {{ kind = \"collective\", op = \"all_reduce\", group = 0, size = \"64KiB\", deps = [2, 3, 4] }},\n]\n",
        fabric(1)
    ));
    let ops = sim.op_rows();
    let send = span(&ops, 2, 0);
    assert_eq!(
        send.0, 30_000_000,
        "the send waits for the later of its two deps"
    );
    let coll = span(&ops, 5, 0);
    assert_eq!(coll.0, 50_000_000.max(send.1));
    // No flow of the collective (16 KiB pieces) starts before it is ready; the send (4 KiB)
    // at 30 us.
    let flows = sim.flow_rows();
    let (send_flows, ring): (Vec<_>, Vec<_>) = flows.iter().partition(|f| f.size_bytes == 4096);
    assert_eq!(send_flows.len(), 1);
    assert_eq!(send_flows[0].start_ps, 30_000_000);
    assert_eq!(
        ring.len(),
        24,
        "ring all-reduce over 4 ranks: 2 x 3 steps x 4 flows"
    );
    assert!(ring.iter().all(|f| f.start_ps >= 50_000_000));
    assert_eq!(ring.iter().map(|f| f.start_ps).min(), Some(coll.0));
}

/// compute -> all-reduce -> compute on 4 ranks under one leaf (one path between any two, so
/// every iteration meets the same network), `noise` for the workload, `iterations`.
fn sync_step(noise: &str, iterations: u32) -> String {
    format!(
        "seed = 3\n{}[[workload]]\nkind = \"graph\"\niterations = {iterations}\n{noise}\
         ranks = [0, 1, 3, 2]\ngroups = [[0, 1, 2, 3]]\nops = [\n\
         {{ kind = \"compute\", rank = 0, duration = \"20us\", phase = \"forward\" }},\n\
         {{ kind = \"compute\", rank = 1, duration = \"20us\", phase = \"forward\" }},\n\
         {{ kind = \"compute\", rank = 2, duration = \"20us\", phase = \"forward\" }},\n\
         {{ kind = \"compute\", rank = 3, duration = \"20us\", phase = \"forward\" }},\n\
         {{ kind = \"collective\", op = \"all_reduce\", group = 0, size = \"1MiB\", deps = [0, 1, 2, 3], phase = \"dp\" }},\n\
         {{ kind = \"compute\", rank = 0, duration = \"10us\", deps = [4], phase = \"backward\" }},\n\
         {{ kind = \"compute\", rank = 1, duration = \"10us\", deps = [4], phase = \"backward\" }},\n\
         {{ kind = \"compute\", rank = 2, duration = \"10us\", deps = [4], phase = \"backward\" }},\n\
         {{ kind = \"compute\", rank = 3, duration = \"10us\", deps = [4], phase = \"backward\" }},\n]\n",
        fabric(1)
    )
}

fn step_end(sim: &fabricemu_core::Simulation) -> u64 {
    sim.op_rows().iter().filter_map(|r| r.end_ps).max().unwrap()
}

#[test]
fn a_straggler_lengthens_a_synchronous_step_by_its_extra_compute() {
    let base = step_end(&run(&sync_step("", 1)));
    // Rank 2 computes 1.5x: +10 us before the all-reduce, +5 us after.
    let slow = run(&sync_step("noise = { slow_ranks = { \"2\" = 1.5 } }\n", 1));
    assert_eq!(step_end(&slow), base + 15_000_000);
    // The others wait for it: the all-reduce starts at 30 us.
    assert_eq!(span(&slow.op_rows(), 4, 0).0, 30_000_000);
    // With jitter x ~ U[0, 0.1) on every compute op: at least the straggler's delay, at most
    // that plus 10 % of the critical path's compute (1.5 x 30 us).
    let jit = run(&sync_step(
        "noise = { jitter = \"uniform\", max = 0.1, slow_ranks = { \"2\" = 1.5 } }\n",
        1,
    ));
    let t = step_end(&jit);
    assert!(
        t >= base + 15_000_000 && t < base + 15_000_000 + 4_500_000,
        "{t} vs {base}"
    );
    // Seeded: the same run again gives the same time.
    assert_eq!(
        step_end(&run(&sync_step(
            "noise = { jitter = \"uniform\", max = 0.1, slow_ranks = { \"2\" = 1.5 } }\n",
            1,
        ))),
        t
    );
}

#[test]
fn iterations_repeat_the_graph_and_steps_arrow_breaks_them_down() {
    let dir = scratch("step_graph", "steps");
    let sim = write_run(&sync_step("", 3), &dir);
    let ops = sim.op_rows();
    assert_eq!(ops.len(), 3 * (8 + 4));
    let one = span(&ops, 8, 0).1 - span(&ops, 0, 0).0;
    // Iteration i + 1 starts on each rank when iteration i ended there: every rank is
    // synchronised by the all-reduce, so iterations follow back to back.
    for it in 1..3 {
        assert_eq!(span(&ops, 0, it).0, span(&ops, 8, it - 1).1);
        assert_eq!(span(&ops, 8, it).1 - span(&ops, 0, it).0, one);
    }
    let batches = read_arrow(&dir.join("steps.arrow"));
    let b = &batches[0];
    assert_eq!(b.num_rows(), 3);
    let col = |n: &str| b.column_by_name(n).unwrap().clone();
    let time = col("time_ps");
    let time = time.as_primitive::<Int64Type>();
    let ar = span(&ops, 4, 0);
    for i in 0..3 {
        assert_eq!(time.value(i) as u64, one);
    }
    let f = |n: &str| col(n).as_primitive::<Float64Type>().value(0);
    // Every rank computes 30 us; the all-reduce is fully exposed; no idle time.
    assert_eq!(f("compute_ps_mean"), 30_000_000.0);
    assert_eq!(f("exposed_comm_ps_mean"), (ar.1 - ar.0) as f64);
    assert_eq!(f("bubble_ps_mean"), 0.0);
    assert!(
        (f("compute_fraction") + f("exposed_comm_fraction") + f("bubble_fraction") - 1.0).abs()
            < 1e-12
    );
    let ranks = col("ranks");
    assert_eq!(ranks.as_primitive::<UInt32Type>().value(0), 4);
    // ops.arrow: one row per op and rank.
    let ob = read_arrow(&dir.join("ops.arrow"));
    assert_eq!(ob.iter().map(|b| b.num_rows()).sum::<usize>(), 36);
    let run_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(run_json["steps"]["iterations"], 3);
    assert_eq!(run_json["steps"]["time_ps_p99"], one);
}

#[test]
fn a_json_file_and_inline_ops_are_the_same_graph() {
    let dir = scratch("step_graph", "json");
    let path = dir.join("step.json");
    std::fs::write(
        &path,
        r#"{"ranks": [0, 1, 3, 2], "groups": [[0, 1, 2, 3]], "ops": [
            {"kind": "compute", "rank": 0, "duration": "20us", "phase": "forward"},
            {"kind": "compute", "rank": 1, "duration": "20us", "phase": "forward"},
            {"kind": "compute", "rank": 2, "duration": "20us", "phase": "forward"},
            {"kind": "compute", "rank": 3, "duration": "20us", "phase": "forward"},
            {"kind": "collective", "op": "all_reduce", "group": 0, "size": "1MiB", "deps": [0, 1, 2, 3], "phase": "dp"},
            {"kind": "compute", "rank": 0, "duration": "10us", "deps": [4], "phase": "backward"},
            {"kind": "compute", "rank": 1, "duration": "10us", "deps": [4], "phase": "backward"},
            {"kind": "compute", "rank": 2, "duration": "10us", "deps": [4], "phase": "backward"},
            {"kind": "compute", "rank": 3, "duration": "10us", "deps": [4], "phase": "backward"}
        ]}"#,
    )
    .unwrap();
    let from_file = run(&format!(
        "seed = 3\n{}[[workload]]\nkind = \"graph\"\niterations = 2\nfile = {:?}\n",
        fabric(1),
        path.display().to_string()
    ));
    let inline = run(&sync_step("", 2));
    assert_eq!(from_file.op_rows(), inline.op_rows());
    // A bad file names the workload's file key, the file, and the op.
    std::fs::write(
        &path,
        r#"{"ops": [{"kind": "compute", "rank": 0, "duration": "1us", "deps": [3]}]}"#,
    )
    .unwrap();
    let text = format!(
        "{}[[workload]]\nkind = \"graph\"\nfile = {:?}\n",
        fabric(1),
        path.display().to_string()
    );
    let e = fabricemu_core::Simulation::build(&common::spec(&text))
        .err()
        .expect("an error")
        .to_string();
    assert!(
        e.contains("workload.0.file") && e.contains("ops.0.deps"),
        "{e}"
    );
    assert!(e.contains("unknown op 3"), "{e}");
}

#[test]
fn graph_errors_name_the_op_and_key() {
    let bad = |ops: &str, extra: &str| {
        scenario_error(&format!(
            "{}[[workload]]\nkind = \"graph\"\n{extra}ops = [{ops}]\n",
            fabric(1)
        ))
        .to_string()
    };
    let cases: [(&str, &str, &str, &str); 9] = [
        (
            "{kind = \"compute\", rank = 0, duration = \"1us\", deps = [1]}, \
             {kind = \"compute\", rank = 0, duration = \"1us\", deps = [2]}, \
             {kind = \"compute\", rank = 0, duration = \"1us\", deps = [0]}",
            "",
            "workload.0.ops.0.deps",
            "dependency cycle: op 0 -> op 1 -> op 2 -> op 0",
        ),
        (
            "{kind = \"compute\", rank = 0, duration = \"1us\", deps = [7]}",
            "",
            "workload.0.ops.0.deps",
            "unknown op 7",
        ),
        (
            "{kind = \"compute\", rank = 9, duration = \"1us\"}",
            "",
            "workload.0.ops",
            "ranks 0..=9 but this topology has 4 endpoints",
        ),
        (
            "{kind = \"compute\", rank = 2, duration = \"1us\"}",
            "ranks = [0, 1]\n",
            "workload.0.ops.0.rank",
            "rank 2 is out of range",
        ),
        (
            "{kind = \"collective\", op = \"all_reduce\", group = 0, size = \"1MiB\"}",
            "groups = [[]]\n",
            "workload.0.groups.0",
            "at least two ranks",
        ),
        (
            "{kind = \"send\", src = 0, dst = 0, size = \"1MiB\"}",
            "",
            "workload.0.ops.0.dst",
            "two different ranks",
        ),
        (
            "{kind = \"compute\", rank = 0, flops = 1e9}",
            "",
            "workload.0.gpu_flops",
            "missing",
        ),
        (
            "{kind = \"compute\", rank = 0, duration = \"1us\", size = \"1MB\"}",
            "",
            "workload.0.ops.0.size",
            "not a key of a compute op",
        ),
        (
            "{kind = \"collective\", op = \"all_gather\", algorithm = \"tree\", ranks = [0, 1], size = \"1MiB\"}",
            "",
            "workload.0.ops.0.algorithm",
            "expected one of",
        ),
    ];
    for (ops, extra, path, msg) in cases {
        let e = bad(ops, extra);
        assert!(
            e.contains(path) && e.contains(msg),
            "{e}\n(expected {path}: {msg})"
        );
    }
    let e = bad(
        "{kind = \"compute\", rank = 0, duration = \"1us\"}",
        "noise = { jitter = \"half_normal\" }\n",
    );
    assert!(e.contains("workload.0.noise.sigma"), "{e}");
    // Five ops repeated a million times: refused before anything is built.
    let e = bad(
        &["{kind = \"compute\", rank = 0, duration = \"1ns\"}"; 5].join(", "),
        "iterations = 1000000\n",
    );
    assert!(
        e.contains("workload.0.iterations") && e.contains("5.000e6 ops (at most 4e6)"),
        "{e}"
    );
}

#[test]
fn op_rows_cover_every_rank_of_each_op() {
    let sim = run(&sync_step("", 1));
    let mut per_op: HashMap<u32, Vec<u32>> = HashMap::new();
    for r in sim.op_rows() {
        per_op.entry(r.op).or_default().push(r.rank);
    }
    assert_eq!(per_op[&4], vec![0, 1, 2, 3]);
    assert_eq!(per_op[&0], vec![0]);
    let r = sim.op_rows();
    let coll = r.iter().find(|r| r.op == 4).unwrap();
    assert_eq!(
        (
            coll.kind,
            coll.phase,
            coll.collective_op,
            coll.algorithm,
            coll.bytes
        ),
        (
            "collective",
            "dp",
            Some("all_reduce"),
            Some("ring"),
            1 << 20
        )
    );
    assert_eq!(r.iter().find(|r| r.op == 4 && r.rank == 2).unwrap().node, 3);
}

#[test]
fn an_arrow_file_of_ops_is_the_same_graph() {
    use arrow_array::builder::{Int64Builder, ListBuilder, StringBuilder};
    use arrow_array::{ArrayRef, RecordBatch};
    use std::sync::Arc;
    let dir = scratch("step_graph", "arrow");
    let path = dir.join("step.arrow");
    // compute on 0 -> send 0 -> 1 -> all-reduce over 0..4 -> compute on 3
    let kinds = ["compute", "send", "collective", "compute"];
    let mut kind = StringBuilder::new();
    let mut op = StringBuilder::new();
    let (mut rank, mut dur, mut src, mut dst, mut size) = (
        Int64Builder::new(),
        Int64Builder::new(),
        Int64Builder::new(),
        Int64Builder::new(),
        Int64Builder::new(),
    );
    let mut deps = ListBuilder::new(Int64Builder::new());
    let mut ranks = ListBuilder::new(Int64Builder::new());
    for (i, k) in kinds.iter().enumerate() {
        kind.append_value(k);
        rank.append_option(match i {
            0 => Some(0),
            3 => Some(3),
            _ => None,
        });
        dur.append_option((*k == "compute").then_some(2_000_000));
        src.append_option((i == 1).then_some(0));
        dst.append_option((i == 1).then_some(1));
        size.append_option(match i {
            1 => Some(8192),
            2 => Some(65536),
            _ => None,
        });
        op.append_option((i == 2).then_some("all_reduce"));
        if i > 0 {
            deps.values().append_value(i as i64 - 1);
        }
        deps.append(true);
        if i == 2 {
            ranks.values().append_slice(&[0, 1, 2, 3]);
            ranks.append(true);
        } else {
            ranks.append(false);
        }
    }
    let cols: Vec<(&str, ArrayRef)> = vec![
        ("kind", Arc::new(kind.finish())),
        ("rank", Arc::new(rank.finish())),
        ("duration_ps", Arc::new(dur.finish())),
        ("src", Arc::new(src.finish())),
        ("dst", Arc::new(dst.finish())),
        ("size_bytes", Arc::new(size.finish())),
        ("op", Arc::new(op.finish())),
        ("deps", Arc::new(deps.finish())),
        ("ranks", Arc::new(ranks.finish())),
        // Other columns are ignored.
        (
            "comment",
            Arc::new(arrow_array::StringArray::from(vec!["a", "b", "c", "d"])),
        ),
    ];
    let batch = RecordBatch::try_from_iter(cols).unwrap();
    let f = std::fs::File::create(&path).unwrap();
    let mut w = arrow_ipc::writer::FileWriter::try_new(f, &batch.schema()).unwrap();
    w.write(&batch).unwrap();
    w.finish().unwrap();
    let from_file = run(&format!(
        "{}[[workload]]\nkind = \"graph\"\nfile = {:?}\n",
        fabric(1),
        path.display().to_string()
    ));
    let inline = run(&format!(
        "{}[[workload]]\nkind = \"graph\"\nops = [\n\
         {{ kind = \"compute\", rank = 0, duration = \"2us\" }},\n\
         {{ kind = \"send\", src = 0, dst = 1, size = \"8KiB\", deps = [0] }},\n\
         {{ kind = \"collective\", op = \"all_reduce\", ranks = [0, 1, 2, 3], size = \"64KiB\", deps = [1] }},\n\
         {{ kind = \"compute\", rank = 3, duration = \"2us\", deps = [2] }},\n]\n",
        fabric(1)
    ));
    assert_eq!(from_file.op_rows(), inline.op_rows());
    assert_eq!(from_file.op_rows().len(), 1 + 2 + 4 + 1);
    // A corrupt file is an error naming the key, not a panic.
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let text = format!(
        "{}[[workload]]\nkind = \"graph\"\nfile = {:?}\n",
        fabric(1),
        path.display().to_string()
    );
    let e = fabricemu_core::Simulation::build(&common::spec(&text))
        .err()
        .expect("an error")
        .to_string();
    assert!(e.contains("workload.0.file") && e.contains("Arrow"), "{e}");
}

/// Communication overlapped with compute is not exposed; what outlasts the compute is, exactly
/// (steps.arrow's definitions, docs/step-workloads.md).
#[test]
fn communication_hidden_behind_compute_is_not_exposed() {
    let overlap = |compute: &str| {
        let sim = run(&format!(
            "{}[[workload]]\nkind = \"graph\"\nops = [\n\
             {{ kind = \"collective\", op = \"all_reduce\", ranks = [0, 1, 2, 3], size = \"1MiB\", phase = \"dp\" }},\n\
             {{ kind = \"compute\", rank = 0, duration = \"{compute}\", phase = \"backward\" }},\n\
             {{ kind = \"compute\", rank = 1, duration = \"{compute}\", phase = \"backward\" }},\n\
             {{ kind = \"compute\", rank = 2, duration = \"{compute}\", phase = \"backward\" }},\n\
             {{ kind = \"compute\", rank = 3, duration = \"{compute}\", phase = \"backward\" }},\n]\n",
            fabric(1)
        ));
        let rows = sim.op_rows();
        let ar = span(&rows, 0, 0).1;
        let steps = fabricemu_core::trace::ops::steps(&rows);
        (ar, steps[0].clone())
    };
    // Compute dominates: the all-reduce is fully hidden.
    let (ar, s) = overlap("500us");
    assert!(ar < 500_000_000);
    let b = s.breakdown.unwrap();
    assert_eq!(s.time_ps(), Some(500_000_000));
    assert_eq!(b.exposed_comm, (0.0, 0));
    assert_eq!(b.comm, (ar as f64, ar));
    assert_eq!(b.bubble, (0.0, 0));
    // Communication dominates: exposed by exactly what outlasts the compute.
    let (ar, s) = overlap("10us");
    let b = s.breakdown.unwrap();
    assert_eq!(s.time_ps(), Some(ar));
    assert_eq!(b.exposed_comm, ((ar - 10_000_000) as f64, ar - 10_000_000));
    assert_eq!(b.compute, (10_000_000.0, 10_000_000));
}
