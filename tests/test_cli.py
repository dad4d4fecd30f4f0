"""The `fabricemu` console script, run for real in a subprocess."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

import fabricemu

from conftest import ERROR_CASES, LONG, ROOT, SCENARIOS, broken, read_arrow, wait_for_run_start

QUICKSTART = str(SCENARIOS / "quickstart.toml")
ELASTIC = str(SCENARIOS / "training_elastic.toml")

# Runs for tens of seconds (128 hosts each sending 1GB, stopped at 50ms of simulated time).


def assert_one_line_error(proc: subprocess.CompletedProcess, *parts: str) -> None:  # type: ignore[type-arg]
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for part in parts:
        assert part in lines[0], (part, lines[0])


@pytest.mark.parametrize("command", [[], ["run"], ["validate"], ["bench"]])
def test_help_has_examples(cli, command):
    proc = cli(*command, "--help")
    assert proc.returncode == 0, proc.stderr
    assert "Example" in proc.stdout


def test_version(cli):
    import fabricemu

    proc = cli("--version")
    assert proc.returncode == 0
    assert fabricemu.__version__ in proc.stdout


def test_run_prints_summary_and_writes_outputs(cli, tmp_path):
    out = tmp_path / "out"
    proc = cli("run", QUICKSTART, "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    for word in ["flows finished", "FCT", "p99", "slowdown", "events", "packet-hops", "wall", "drops"]:
        assert word in text, word
    table = read_arrow(out / "flows.arrow")
    info = json.loads((out / "run.json").read_text())
    assert table.num_rows == info["stats"]["flows_total"] > 0, "needs the engine"
    assert f"{table.num_rows}/{table.num_rows} flows finished" in text


def test_run_prints_build_warnings(cli, tmp_path):
    # PFC's default headroom (a round trip and a few packets per ingress link) cannot fit in a 20KB
    # buffer: allowed, but the run says so (and run.json carries it).
    scenario = tmp_path / "w.toml"
    scenario.write_text(
        '[topology]\nkind = "fat_tree"\nk = 4\n[switch]\nbuffer = "20KB"\npfc = { enabled = true }\n'
        '[[workload]]\nkind = "flows"\nflows = [{src = 0, dst = 5, size = "10KB"}]\n'
    )
    out = tmp_path / "out"
    proc = cli("run", str(scenario), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    info = json.loads((out / "run.json").read_text())
    assert len(info["warnings"]) == 1
    assert f"warning: {info['warnings'][0]}" in proc.stdout


def test_run_default_output_folder(cli, tmp_path):
    proc = cli("run", QUICKSTART, "--quiet", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert (tmp_path / "runs" / "quickstart" / "flows.arrow").is_file()
    assert (tmp_path / "runs" / "quickstart" / "run.json").is_file()


def test_run_outputs_read_by_polars_and_duckdb(cli, tmp_path):
    pl = pytest.importorskip("polars")
    duckdb = pytest.importorskip("duckdb")
    import pyarrow.dataset as ds

    proc = cli("run", QUICKSTART, "-o", str(tmp_path / "o"), "--quiet")
    assert proc.returncode == 0, proc.stderr
    path = tmp_path / "o" / "flows.arrow"
    df = pl.read_ipc(path)
    con = duckdb.connect()
    con.register("flows", ds.dataset(str(path), format="arrow"))
    [(n,)] = con.sql("select count(*) from flows").fetchall()
    assert n == df.height


def test_run_with_set(cli, tmp_path):
    out = tmp_path / "k6"
    proc = cli(
        "run",
        QUICKSTART,
        "-o",
        str(out),
        "--set",
        "topology.k=6",
        "--set",
        "workload.1.size=64KiB",
        "--set",
        'name="k6"',
        "--quiet",
    )
    assert proc.returncode == 0, proc.stderr
    info = json.loads((out / "run.json").read_text())
    assert info["scenario"]["topology"]["k"] == 6
    assert info["scenario"]["workload"][1]["size"] == "64KiB"
    assert info["scenario"]["name"] == "k6"
    assert info["overrides"] == {"topology.k": 6, "workload.1.size": "64KiB", "name": "k6"}
    assert info["source"] == QUICKSTART


def test_run_record_reproduces_the_run(cli, tmp_path):
    """run.json is a complete record (issue 18.3): when, where, from what, every output with its
    rows; `fabricemu run OUT/run.json` runs the same scenario again, byte for byte."""
    first = tmp_path / "first"
    proc = cli("run", QUICKSTART, "-o", str(first), "--set", "seed=7", "--quiet")
    assert proc.returncode == 0, proc.stderr
    info = json.loads((first / "run.json").read_text())
    for key in ["started_utc", "finished_utc"]:
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", info[key]), info[key]
    assert info["started_utc"] <= info["finished_utc"]
    assert info["host"]["hostname"] and info["host"]["cpus"] >= 1 and info["host"]["python"]
    assert info["version"] == fabricemu.__version__
    files = {o["file"]: o for o in info["outputs"]}
    assert set(files) == {p.name for p in first.iterdir()} - {"run.json"}
    flows = read_arrow(first / "flows.arrow")
    assert files["flows.arrow"]["rows"] == flows.num_rows == info["stats"]["flows_total"]
    assert files["flows.arrow"]["bytes"] == (first / "flows.arrow").stat().st_size

    again = tmp_path / "again"
    proc = cli("run", str(first / "run.json"), "-o", str(again), "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert (again / "flows.arrow").read_bytes() == (first / "flows.arrow").read_bytes()
    replay = json.loads((again / "run.json").read_text())
    assert replay["scenario"] == info["scenario"] and replay["scenario"]["seed"] == 7
    assert replay["source"] == str(first / "run.json") and replay["overrides"] == {}


def test_validate_ok(cli):
    proc = cli("validate", QUICKSTART)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok: quickstart: fat_tree k=4 (16 hosts")
    proc = cli("validate", QUICKSTART, "--set", "topology.k=8")
    assert proc.returncode == 0, proc.stderr
    assert "fat_tree k=8 (128 hosts" in proc.stdout


@pytest.mark.parametrize("command", ["run", "validate"])
@pytest.mark.parametrize(("case", "old", "new", "path", "line"), ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_bad_scenario_is_one_line(cli, tmp_path, command, case, old, new, path, line):
    bad = tmp_path / f"{case}.toml"
    bad.write_text(broken(old, new))
    proc = cli(command, str(bad))
    assert_one_line_error(proc, f"{bad}:{line}:", path)
    assert not (tmp_path / "runs").exists()


def test_set_null_removes_a_key(cli):
    # The elastic scenario's keys of the elastic reaction are errors for a stalling job: null
    # removes them (the command in scenarios/training_elastic.toml's header).
    stall = ("--set", "workload.0.on_failure=stall")
    proc = cli("validate", ELASTIC, *stall)
    assert proc.returncode != 0
    assert "reformation_time" in proc.stderr
    nulls = ("--set", "workload.0.reformation_time=null", "--set", "workload.0.rejoin=null")
    proc = cli("validate", ELASTIC, *stall, *nulls)
    assert proc.returncode == 0, proc.stderr


def test_bad_set_is_one_line(cli):
    proc = cli("validate", QUICKSTART, "--set", "topology.k=5")
    assert_one_line_error(proc, "topology.k", "even")
    proc = cli("run", QUICKSTART, "--set", "workload.7.size=1MB")
    assert_one_line_error(proc, "workload.7", "out of range")
    proc = cli("run", QUICKSTART, "--set", "topology.k")
    assert_one_line_error(proc, "KEY=VALUE")


def test_ctrl_c_writes_partial_outputs(fabricemu_exe, tmp_path):
    scenario = tmp_path / "long.toml"
    scenario.write_text(LONG)
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [fabricemu_exe, "run", str(scenario), "-o", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for_run_start(proc, out)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert "partial outputs" in stderr
    info = json.loads((out / "run.json").read_text())
    assert info["interrupted"] is True
    assert 0 < info["simulated_ps"] < 50_000_000_000, "stopped part-way"
    table = read_arrow(out / "flows.arrow")
    assert table.num_rows == 128
    assert table.column("finish_ps").null_count == 128, "no 1GB flow finished"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs a named pipe")
@pytest.mark.parametrize(
    ("command", "sig", "code"), [("run", signal.SIGTERM, 143), ("sweep", signal.SIGINT, 130)]
)
def test_an_interrupt_while_loading_the_scenario_exits_as_interrupted(
    fabricemu_exe, tmp_path, command, sig, code
):
    # The scenario is a named pipe: the command blocks reading it, after its signal handling is
    # set up and before it has anything to save. Stopped there, it says so and exits 143 (SIGTERM)
    # or 130 (Ctrl-C), as a stopped run does; not click's "Aborted!" and 1.
    fifo = tmp_path / "scenario.toml"
    os.mkfifo(fifo)
    extra = ["--grid", "seed=1,2"] if command == "sweep" else []
    proc = subprocess.Popen(
        [fabricemu_exe, command, str(fifo), *extra, "-o", str(tmp_path / "out")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    writer = None
    try:
        # Opening the pipe to write succeeds once the command opened it to read (bounded, should
        # the command fail before it does).
        deadline = time.monotonic() + 60
        while writer is None and proc.poll() is None and time.monotonic() < deadline:
            try:
                writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # ENXIO: no reader yet
                time.sleep(0.02)
        assert writer is not None, "the command never opened its scenario"
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if writer is not None:
            os.close(writer)
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == code, stderr
    assert "Traceback" not in stderr
    assert "Aborted" not in stderr
    assert "interrupted" in stderr
    assert not (tmp_path / "out").exists()


def test_bench_quick(cli, tmp_path):
    report = tmp_path / "bench.json"
    proc = cli("bench", "--quick", "--json", str(report), timeout=600)
    assert proc.returncode == 0, proc.stderr
    for header in ["packet-hops", "events", "wall", "packet-hops/s", "events/s", "peak RSS MiB"]:
        assert header in proc.stdout, header
    rows = json.loads(report.read_text())
    names = [r["name"] for r in rows]
    assert names == [
        "quickstart",
        "fat_tree_k8_permutation",
        "fat_tree_k8_permutation_hpcc",
        "fat_tree_k8_permutation_trimming",
    ]
    for r in rows:
        assert r["peak_rss_mib"] > 0
        assert r["packet_hops"] > 0, "needs the engine"
        assert r["flows_finished"] == r["flows_total"]


def test_bench_repeats_a_run_once_case_only_when_min_time_is_given(cli):
    # `--quick` (like `--scale` and `--slow`) runs each case once; an explicit `--min-time`
    # repeats it until that much engine time has passed and reports the fastest run.
    once = cli("bench", "--quick", "--case", "quickstart", "--json", timeout=600)
    assert once.returncode == 0, once.stderr
    assert [r["runs"] for r in json.loads(once.stdout)] == [1]
    repeated = cli("bench", "--quick", "--case", "quickstart", "--min-time", "0.05", "--json", timeout=600)
    assert repeated.returncode == 0, repeated.stderr
    (row,) = json.loads(repeated.stdout)
    assert row["runs"] > 1
    assert row["packet_hops"] == json.loads(once.stdout)[0]["packet_hops"]


def test_bench_threads_sweep_runs_a_case_at_each_thread_count(cli):
    # `--case` picks one benchmark; `--threads 1,2` runs it on one thread and on two (the
    # parallel engine): the same work (identical outputs), the speed-up against the first.
    proc = cli(
        "bench", "--quick", "--case", "fat_tree_k8_permutation", "--threads", "1,2", "--json", timeout=600
    )
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [(r["name"], r["threads"]) for r in rows] == [
        ("fat_tree_k8_permutation", 1),
        ("fat_tree_k8_permutation", 2),
    ]
    assert rows[0]["packet_hops"] == rows[1]["packet_hops"] > 0
    assert rows[0]["events"] == rows[1]["events"]
    assert rows[0]["speedup"] == 1.0
    assert rows[1]["speedup"] == pytest.approx(rows[0]["wall_seconds"] / rows[1]["wall_seconds"])
    table = cli("bench", "--quick", "--case", "quickstart", "--threads", "1", timeout=600)
    assert table.returncode == 0, table.stderr
    assert "speed-up" in table.stdout and "1.00x" in table.stdout
    for bad, message in [
        (["--case", "nope"], "no such benchmark"),
        (["--threads", "0,2"], "from 1 to 256"),
        (["--threads", "two"], "from 1 to 256"),
    ]:
        err = cli("bench", "--quick", *bad)
        assert err.returncode == 2, err.stderr
        assert message in err.stderr


def test_bench_quickstart_is_the_repository_quickstart():
    import fabricemu.bench as bench

    packaged = (bench.HERE / "quickstart.toml").read_text()
    assert packaged == (ROOT / "scenarios" / "quickstart.toml").read_text()
    for b in bench.BENCHMARKS:
        assert b.path.is_file()


def test_module_entry_point_matches_console_script():
    proc = subprocess.run(
        [sys.executable, "-m", "fabricemu.cli", "validate", QUICKSTART],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok: ")


def test_missing_file(cli, tmp_path):
    proc = cli("run", str(tmp_path / "nope.toml"))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "does not exist" in proc.stderr


def test_seed_and_trace_shorthands(cli, tmp_path):
    out = tmp_path / "o"
    proc = cli(
        "run", QUICKSTART, "-o", str(out), "--seed", "5", "--trace", "queues=10us,links=20us", "--quiet"
    )
    assert proc.returncode == 0, proc.stderr
    info = json.loads((out / "run.json").read_text())
    assert info["scenario"]["seed"] == 5
    assert info["scenario"]["trace"]["queues"]["interval"] == "10us"
    assert info["scenario"]["trace"]["links"]["interval"] == "20us"
    assert info["overrides"] == {"seed": 5, "trace.queues.interval": "10us", "trace.links.interval": "20us"}
    assert (out / "queues.arrow").is_file() and (out / "links.arrow").is_file()
    same = tmp_path / "same"
    proc = cli("run", QUICKSTART, "-o", str(same), "--set", "seed=5", "--quiet")
    assert proc.returncode == 0, proc.stderr
    # The same run (flows.arrow's metadata holds the scenario, which differs in its traces).
    assert read_arrow(same / "flows.arrow").to_pylist() == read_arrow(out / "flows.arrow").to_pylist()
    for bad, says in [("queues", "needs an interval"), ("Queues=1us", "expected NAME or NAME=INTERVAL")]:
        proc = cli("validate", QUICKSTART, "--trace", bad)
        assert_one_line_error(proc, says)
    proc = cli("validate", QUICKSTART, "--trace", "queues=fast")
    assert_one_line_error(proc, "--trace queues=fast", "trace.queues.interval")


def test_json_is_the_same_flag_everywhere(cli, tmp_path):
    out = tmp_path / "o"
    proc = cli("run", QUICKSTART, "-o", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    ran = json.loads(proc.stdout)
    assert ran["out"] == str(out) and ran["finished"] == ran["flows"] == 32
    shown = cli("show", str(out), "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout) == ran
    proc = cli("validate", QUICKSTART, "--json")
    assert proc.returncode == 0, proc.stderr
    valid = json.loads(proc.stdout)
    assert valid["ok"] is True and valid["summary"].startswith("quickstart: fat_tree k=4")
    assert valid["estimate"]["flows"] == 32
    proc = cli("topo", QUICKSTART, "--json")
    assert json.loads(proc.stdout)["hosts"] == 16


def test_show_reprints_a_run_and_a_sweep(cli, tmp_path):
    out = tmp_path / "run"
    first = cli("run", QUICKSTART, "-o", str(out))
    assert first.returncode == 0, first.stderr
    shown = cli("show", str(out))
    assert shown.returncode == 0, shown.stderr
    # The same summary, but for the measured speed (not stored per line) the lines are equal.
    assert shown.stdout.splitlines()[:3] == first.stdout.splitlines()[:3]
    assert shown.stdout.splitlines()[-1] == first.stdout.splitlines()[-1]
    sweep = tmp_path / "sweep"
    proc = cli(
        "sweep", QUICKSTART, "--grid", "workload.1.senders=2,4", "-o", str(sweep), "-j", "1", "--quiet"
    )
    assert proc.returncode == 0, proc.stderr
    shown = cli("show", str(sweep))
    assert shown.returncode == 0, shown.stderr
    assert "workload.1.senders" in shown.stdout and "2 runs (0 failed)" in shown.stdout
    assert len(json.loads(cli("show", str(sweep), "--json").stdout)) == 2
    proc = cli("show", str(tmp_path))
    assert_one_line_error(proc, "not a run's or a sweep's output folder")


def test_report_out_option_and_bench_json_to_stdout(cli, tmp_path):
    pytest.importorskip("matplotlib")
    run_dir = tmp_path / "run"
    assert cli("run", QUICKSTART, "-o", str(run_dir), "--quiet").returncode == 0
    for option in ["-o", "--out", "--output"]:
        target = tmp_path / f"report{option.strip('-')}.html"
        proc = cli("report", str(run_dir), option, str(target))
        assert proc.returncode == 0, proc.stderr
        assert target.is_file()


def test_progress_lines_in_a_batch_log(fabricemu_exe, tmp_path):
    """Not a terminal: periodic one-line progress with the time left (interval from the env)."""
    scenario = tmp_path / "long.toml"
    scenario.write_text(LONG)
    proc = subprocess.run(
        [fabricemu_exe, "run", str(scenario), "-o", str(tmp_path / "o"), "--set", 'stop="3ms"'],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "FABRICEMU_PROGRESS_INTERVAL": "0"},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("progress: ")]
    assert lines, proc.stderr
    assert all(" left " in ln and "simulated" in ln for ln in lines)
    assert "\r" not in proc.stderr


def test_bench_gpu_cases_are_the_issue_case_at_two_sizes():
    """The 256-GPU hierarchical all-reduce: 16 MiB in the default set, 1 GiB (the issue's case)
    only with ``--slow``; the two scenarios differ only in name and size."""
    import fabricemu.bench as bench
    from fabricemu import Scenario

    cases = {b.name: b for b in bench.BENCHMARKS}
    small, big = cases["gpu256_hierarchical_allreduce"], cases["gpu256_hierarchical_allreduce_1gib"]
    assert (small.quick, small.slow) == (False, False)
    assert (big.quick, big.slow) == (False, True)
    a, b = Scenario.load(small.path).to_dict(), Scenario.load(big.path).to_dict()
    assert (a["workload"][0]["size"], b["workload"][0]["size"]) == ("16MiB", "1GiB")
    for d in (a, b):
        d.pop("name")
        d["workload"][0].pop("size")
    assert a == b
    fabric = Scenario.load(big.path).describe()["topology"]
    assert fabric["hosts"] == 256
    assert fabric["cluster"]["servers"] == 32


def test_bench_help_names_the_slow_option(cli):
    proc = cli("bench", "--help")
    assert proc.returncode == 0, proc.stderr
    assert "--slow" in proc.stdout and "1 GiB 256-GPU" in proc.stdout


def test_bench_scale_cases_are_the_large_fabrics_behind_the_scale_option(cli):
    """``--scale`` adds the k=16 htsim comparison setup, fat_tree k=24 and k=32 (the k=16 case at
    larger k), k=24 under link failures and the repository's 1,056-host dragonfly; no other set
    runs them."""
    import fabricemu.bench as bench
    from fabricemu import Scenario

    cases = {b.name: b for b in bench.BENCHMARKS}
    scale = [b.name for b in bench.BENCHMARKS if b.scale]
    assert scale == [
        "fat_tree_k16_htsim",
        "fat_tree_k24_permutation",
        "fat_tree_k24_permutation_2threads",
        "fat_tree_k24_failures",
        "fat_tree_k32_permutation",
        "dragonfly_ugal_1k",
    ]
    assert not any(cases[n].quick or cases[n].slow for n in scale)
    # The htsim comparison case is the issue's setup: 1us links, MTU 4000B, PFC, 2MB flows.
    htsim = Scenario.load(cases["fat_tree_k16_htsim"].path).to_dict()
    assert htsim["topology"]["link_delay"] == "1us" and htsim["transport"]["mtu"] == "4000B"
    assert htsim["switch"]["pfc"]["enabled"] and htsim["workload"][0]["size"] == "2MB"
    base = Scenario.load(cases["fat_tree_k16_permutation"].path).to_dict()
    for k, hosts in [(24, 3456), (32, 8192)]:
        s = Scenario.load(cases[f"fat_tree_k{k}_permutation"].path)
        d = s.to_dict()
        assert d["topology"]["k"] == k
        assert s.describe()["topology"]["hosts"] == hosts
        d["topology"]["k"] = 16
        d["name"] = base["name"]
        assert d == base
    # The threads cases are their one-thread case on 2 threads, nothing else.
    for k in (16, 24):
        one = Scenario.load(cases[f"fat_tree_k{k}_permutation"].path).to_dict()
        two = Scenario.load(cases[f"fat_tree_k{k}_permutation_2threads"].path).to_dict()
        assert (one.pop("threads", 1), two.pop("threads")) == (1, 2)
        two["name"] = one["name"]
        assert one == two
    # The failures case is the k=24 permutation plus a transport that recovers from losses
    # and a failure process, nothing else.
    failing = Scenario.load(cases["fat_tree_k24_failures"].path).to_dict()
    plain = Scenario.load(cases["fat_tree_k24_permutation"].path).to_dict()
    process = failing.pop("failure_process")
    assert [p["components"] for p in process] == ["links"]
    assert failing.pop("transport") == {"rto": "100us", "loss_recovery": "selective"}
    failing["name"] = plain["name"]
    assert failing == plain
    packaged = cases["dragonfly_ugal_1k"].path.read_text()
    assert packaged == (ROOT / "scenarios" / "dragonfly_ugal_1k.toml").read_text()
    proc = cli("bench", "--help")
    assert proc.returncode == 0, proc.stderr
    assert "--scale" in proc.stdout and "k=24" in proc.stdout


PARALLEL = """
name = "parallel"
[topology]
kind = "fat_tree"
k = 4
link_rate = "100Gbps"
link_delay = "500ns"
[switch]
buffer = "200KB"
ecn = { kmin = "20KB", kmax = "100KB", pmax = 0.2 }
[transport]
cc = "dcqcn"
[[workload]]
kind = "permutation"
size = "300KB"
[[workload]]
kind = "incast"
receiver = 3
senders = 8
size = "100KB"
"""


def test_run_threads_gives_the_same_outputs_as_one_thread(cli, tmp_path):
    scenario = tmp_path / "p.toml"
    scenario.write_text(PARALLEL)
    runs = {}
    for threads in (1, 3):
        out = tmp_path / f"t{threads}"
        proc = cli("run", str(scenario), "-o", str(out), "--threads", str(threads), "--quiet")
        assert proc.returncode == 0, proc.stderr
        info = json.loads((out / "run.json").read_text())
        assert info["scenario"]["threads"] == threads
        runs[threads] = (read_arrow(out / "flows.arrow"), info["stats"])
    (one, s1), (three, s3) = runs[1], runs[3]
    assert one.num_rows == 24 and s1["flows_finished"] == 24
    assert s1["packets_dropped"] > 0 and s1["ecn_marks"] > 0, s1
    assert one.equals(three)
    assert s1 == s3


def test_run_threads_summary_says_how_the_windows_ran(cli, tmp_path):
    scenario = tmp_path / "p.toml"
    scenario.write_text(PARALLEL)
    proc = cli("run", str(scenario), "-o", str(tmp_path / "out"), "--threads", "2")
    assert proc.returncode == 0, proc.stderr
    info = json.loads((tmp_path / "out" / "run.json").read_text())["parallel"]
    line = f"threads 2: {info['windows']:,} windows, {info['windows_on_one_thread']:,} of them"
    assert line in proc.stdout, proc.stdout


def test_run_threads_refuses_what_it_cannot_run_yet(cli, tmp_path):
    scenario = tmp_path / "p.toml"
    scenario.write_text(
        'seed = 1\n[topology]\nkind = "dragonfly"\np = 2\na = 4\nh = 2\ng = 9\n'
        '[routing]\nload_balancing = "ugal_g"\n'
        '[[workload]]\nkind = "permutation"\nsize = "10KB"\n'
    )
    proc = cli("run", str(scenario), "-o", str(tmp_path / "out"), "--threads", "2")
    assert_one_line_error(proc, "threads", "ugal_g", "threads = 1")
    proc = cli("run", str(scenario), "-o", str(tmp_path / "out"), "--threads", "0")
    assert proc.returncode == 2 and "--threads" in proc.stderr


def test_run_threads_applies_faults_as_one_thread_does(cli, tmp_path):
    # A core switch down for a while and random loss on the core links: the same losses, fault
    # periods and flows on two threads (every file's bytes: tests/integration/parallel.rs).
    scenario = tmp_path / "p.toml"
    faults = (
        '\n[transport]\nrto = "20us"\n'.join(PARALLEL.split("\n[transport]\n", 1))
        + '\n[[fault]]\ntarget = "core:1"\nat = "5us"\nuntil = "40us"\n'
        '[[fault]]\ntier = "core"\nkind = "loss"\nrate = 0.01\n'
    )
    scenario.write_text(faults)
    runs = {}
    for threads in (1, 2):
        out = tmp_path / f"t{threads}"
        proc = cli("run", str(scenario), "-o", str(out), "--threads", str(threads), "--quiet")
        assert proc.returncode == 0, proc.stderr
        info = json.loads((out / "run.json").read_text())
        runs[threads] = (
            read_arrow(out / "flows.arrow"),
            read_arrow(out / "faults.arrow"),
            info["stats"],
        )
    (flows1, faults1, s1), (flows2, faults2, s2) = runs[1], runs[2]
    assert s1["faults_applied"] == 2 and s1["link_fault_drops"] > 0, s1
    assert s1["corrupted_drops"] > 0 and s1["flows_finished"] == 24, s1
    assert faults1.num_rows == 2 and sum(faults1.column("packets_lost").to_pylist()) > 0
    assert flows1.equals(flows2) and faults1.equals(faults2)
    assert s1 == s2


def _on_one_and_two_threads(cli, tmp_path, scenario, tables, *options):
    """`fabricemu run` of the shipped `scenario` (with `options`) on one thread and on two: per
    thread count, the `tables` read back and run.json. Each table must be the same on both."""
    runs = {}
    for threads in (1, 2):
        out = tmp_path / f"t{threads}"
        args = ("run", str(ROOT / "scenarios" / scenario), "-o", str(out))
        proc = cli(*args, "--threads", str(threads), *options, "--quiet")
        assert proc.returncode == 0, proc.stderr
        info = json.loads((out / "run.json").read_text())
        runs[threads] = ([read_arrow(out / f"{t}.arrow") for t in tables], info)
    for a, b in zip(runs[1][0], runs[2][0]):
        assert a.equals(b)
    return runs[1], runs[2]


def test_run_threads_runs_step_graphs_as_one_thread_does(cli, tmp_path):
    # The shipped GPipe step graph (compute ops chained to pipeline sends across the two leaves,
    # three iterations back to back): the same ops, steps and flows on two threads.
    one, two = _on_one_and_two_threads(cli, tmp_path, "step_graph.toml", ("ops", "steps", "flows"))
    (tables1, info1), (_, info2) = one, two
    s1 = info1["stats"]
    assert tables1[0].num_rows > 0 and s1["flows_finished"] == s1["flows_total"], s1
    assert s1 == info2["stats"]


def test_run_threads_runs_elastic_jobs_as_one_thread_does(cli, tmp_path):
    # The shipped elastic job (a rank's link fails: the groups re-form without it, the
    # all-reduces under way re-planned over seven ranks; it rejoins after the repair): the same
    # ops, steps, flows and job outcome (re-formations, lost GPU-seconds) on two threads.
    tables = ("ops", "steps", "flows")
    one, two = _on_one_and_two_threads(cli, tmp_path, "training_elastic.toml", tables)
    (tables1, info1), (_, info2) = one, two
    jobs = info1["jobs"]
    assert jobs[0]["reformations"] == 2 and jobs[0]["group_size_min"] == 7, jobs
    assert 7 in tables1[1].column("group_size").to_pylist()
    assert (info1["stats"], jobs) == (info2["stats"], info2["jobs"])


def test_run_threads_runs_in_network_reduction_as_one_thread_does(cli, tmp_path):
    # The shipped example (all-reduces over every host back to back on switch reduction, a
    # pod's reduce-scatter, a permutation), with its pod's call waiting for the contexts: the
    # same collectives, flows and reduction counters on one thread and on two.
    waiting = ("--set", "switch.reduction.contexts=1", "--set", "switch.reduction.on_exhausted=wait")
    tables = ("collectives", "flows")
    one, two = _on_one_and_two_threads(cli, tmp_path, "parallel_in_network.toml", tables, *waiting)
    s1, s2 = one[1]["stats"], two[1]["stats"]
    assert s1["in_network_calls"] == 5 and s1["in_network_waits"] == 1, s1
    assert s1["reduction_combined"] > 0 and s1["flows_finished"] == s1["flows_total"], s1
    assert s1 == s2


def test_run_threads_writes_the_same_trace_files(cli, tmp_path):
    # Every streamed trace table, written by two partitions, holds the same rows as one world's
    # (the same bytes: tests/integration/parallel.rs).
    scenario = tmp_path / "p.toml"
    traces = (
        '\n[trace]\nqueues = { interval = "2us" }\nlinks = { interval = "2us" }\n'
        'rates = { interval = "1us" }\npackets = { max_rows = 20000 }\nlatency = true\n'
    )
    scenario.write_text(PARALLEL.replace("[topology]", traces + "[topology]", 1))
    outs = []
    for threads in ["1", "2"]:
        out = tmp_path / f"out{threads}"
        proc = cli("run", str(scenario), "-o", str(out), "--threads", threads, "--quiet")
        assert proc.returncode == 0, proc.stderr
        outs.append(out)
    for name in ["queues", "links", "rates", "packets", "latency"]:
        one, two = (read_arrow(o / f"{name}.arrow") for o in outs)
        assert one.num_rows > 0, name
        assert one.equals(two), name  # (the files' metadata echoes the scenario's threads)


def test_run_threads_runs_pfc_with_the_same_outputs(cli, tmp_path):
    # PFC (pause frames between partitions, the deadlock check across them) on 2 threads.
    scenario = tmp_path / "p.toml"
    scenario.write_text(PARALLEL.replace("[switch]\n", "[switch]\npfc = { enabled = true }\n"))
    runs = []
    for threads in ["1", "2"]:
        out = tmp_path / f"out{threads}"
        proc = cli("run", str(scenario), "-o", str(out), "--threads", threads, "--quiet")
        assert proc.returncode == 0, proc.stderr
        runs.append(fabricemu.open(out))
    assert runs[0].flows.equals(runs[1].flows)
    assert runs[0].stats == runs[1].stats
    assert runs[0].stats["pfc_pause_frames"] > 0


def test_run_json_says_how_the_parallel_engine_ran():
    one = fabricemu.run(fabricemu.Scenario.from_toml(PARALLEL))
    two = fabricemu.run(fabricemu.Scenario.from_toml(PARALLEL), threads=2)
    assert "parallel" not in one.run_info
    p = two.run_info["parallel"]
    assert p["threads"] == 2
    # The windows step on the grid of the shortest link's delay (500 ns); which of them ran on
    # one thread is the machine's doing, but they are some of them.
    assert p["grid_ps"] == 500_000 and p["lookahead_ps"] >= p["grid_ps"]
    assert p["windows"] > 0
    for key in ["windows_merged", "windows_long", "windows_on_one_thread"]:
        assert 0 <= p[key] <= p["windows"], key


def test_python_run_threads_matches_one_thread():
    one = fabricemu.run(fabricemu.Scenario.from_toml(PARALLEL))
    two = fabricemu.run(fabricemu.Scenario.from_toml(PARALLEL), threads=2)
    assert one.flows.equals(two.flows)
    assert two.run_info["scenario"]["threads"] == 2
    assert one.stats == two.stats
