"""The `sweep`, `report`, `compare` and `topo` commands, run for real through the console script."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import time
from typing import List

import pytest

from conftest import SCENARIOS, TRACED, read_arrow

QUICKSTART = str(SCENARIOS / "quickstart.toml")

SMALL_PERM = """\
name = "perm"

[topology]
kind = "fat_tree"
k = 4

[[workload]]
kind = "permutation"
size = "64KiB"
"""


def png_images(html_text: str) -> List[bytes]:
    return [base64.b64decode(m) for m in re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", html_text)]


def svg_figures(html_text: str) -> List[str]:
    """The plots of a report: inline SVG elements inside <figure class='plot ...'>."""
    return re.findall(r"<figure class='plot[^']*'[^>]*>(<svg.*?</svg>)", html_text, flags=re.S)


def assert_valid_svg(svg: str) -> None:
    """Well-formed XML (once given the namespaces HTML implies), with a size and drawn paths."""
    import xml.etree.ElementTree as ET

    root = ET.fromstring(
        svg.replace(
            "<svg ", '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" ', 1
        )
    )
    assert float(root.get("width", "0").rstrip("pt")) > 100
    assert float(root.get("height", "0").rstrip("pt")) > 50
    assert len(root.findall(".//{http://www.w3.org/2000/svg}path")) > 5


@pytest.mark.parametrize("command", ["sweep", "report", "compare", "topo"])
def test_help_has_examples(cli, command):
    proc = cli(command, "--help")
    assert proc.returncode == 0, proc.stderr
    assert "Example" in proc.stdout
    assert f"fabricemu {command} " in proc.stdout


def test_sweep_command(cli, tmp_path):
    scenario = tmp_path / "perm.toml"
    scenario.write_text(SMALL_PERM)
    out = tmp_path / "sw"
    args = [
        "sweep",
        str(scenario),
        "--grid",
        "workload.0.size=16KiB,-1MB,64KiB",
        "--seeds",
        "1..2",
        "-o",
        str(out),
        "-j",
        "2",
    ]
    proc = cli(*args)
    assert proc.returncode == 1, "a point failed: " + proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split()[:5] == ["workload.0.size", "seed", "slowdown", "p50", "p99"]
    assert "6 runs (4 ran, 0 already done, 2 failed)" in lines[-1]
    assert "expected a size" in proc.stdout or "workload.0.size" in proc.stdout
    # Not a terminal: one line per point on stderr.
    assert proc.stderr.count("[") >= 6 and "FAILED" in proc.stderr
    table = read_arrow(out / "sweep.arrow")
    assert table.num_rows == 6
    assert table.column("seed").to_pylist() == [1, 2, 1, 2, 1, 2]
    assert table.column("error").null_count == 4
    for run in table.column("run").to_pylist():
        if run is not None:
            assert (out / run / "flows.arrow").is_file()
            assert (out / run / "run.json").is_file()
    assert sorted(p.name for p in (out / "runs").iterdir()) == [
        "size=16KiB,seed=1",
        "size=16KiB,seed=2",
        "size=64KiB,seed=1",
        "size=64KiB,seed=2",
    ]
    again = cli(*args, "--quiet")
    assert again.returncode == 1
    assert again.stdout.strip().endswith("s") and "(0 ran, 4 already done, 2 failed)" in again.stdout
    assert again.stderr == ""
    rerun = cli("sweep", str(scenario), "--grid", "workload.0.size=16KiB", "-o", str(out), "--rerun", "-q")
    assert rerun.returncode == 0, rerun.stderr
    assert "(1 ran, 0 already done, 0 failed)" in rerun.stdout


def test_sweep_values_with_commas_and_default_out(cli, tmp_path):
    scenario = tmp_path / "inc.toml"
    scenario.write_text(
        SMALL_PERM.replace(
            'kind = "permutation"\nsize = "64KiB"',
            'kind = "incast"\nreceiver = 0\nsenders = 2\nsize = "16KiB"',
        )
    )
    proc = cli("sweep", str(scenario), "--grid", "workload.0.senders=[1, 2],[3, 4],2", "-q", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    table = read_arrow(tmp_path / "sweeps" / "perm" / "sweep.arrow")  # the scenario's name
    assert table.column("workload.0.senders").to_pylist() == ["[1,2]", "[3,4]", "2"]
    assert table.column("flows").to_pylist() == [2, 2, 2]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--grid", "topology.k"], "KEY=V1,V2"),
        (["--grid", "topology.k=4,"], "empty value"),
        (["--grid", "topology.k=4", "--grid", "topology.k=8"], "twice"),
        (["--grid", "seed=1,2"], "--seeds"),
        (["--seeds", "3..1"], "--seeds"),
        (["--seeds", "1,x"], "--seeds"),
        (["--set", "topology.k=5"], "topology.k"),
    ],
)
def test_sweep_usage_errors_are_one_line(cli, tmp_path, args, message):
    scenario = tmp_path / "perm.toml"
    scenario.write_text(SMALL_PERM)
    proc = cli("sweep", str(scenario), *args, "-o", str(tmp_path / "o"))
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "o").exists()


def test_sweep_on_a_dask_scheduler_matches_the_local_pool(cli, fabricemu_exe, tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    scenario = tmp_path / "perm.toml"
    scenario.write_text(SMALL_PERM)
    grid = ["--grid", "workload.0.size=16KiB,64KiB", "--seeds", "1,2,3", "-q"]
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        proc = cli(
            "sweep",
            str(scenario),
            *grid,
            "-o",
            str(tmp_path / "dask"),
            "--scheduler",
            cluster.scheduler_address,
        )
    assert proc.returncode == 0, proc.stderr
    local = cli("sweep", str(scenario), *grid, "-o", str(tmp_path / "local"))
    assert local.returncode == 0, local.stderr
    a = read_arrow(tmp_path / "dask" / "sweep.arrow")
    b = read_arrow(tmp_path / "local" / "sweep.arrow")
    keep = [
        c for c in a.column_names if c not in ("wall_seconds", "events_per_second", "packet_hops_per_second")
    ]
    assert a.num_rows == 6
    assert a.select(keep).equals(b.select(keep))
    bad = subprocess.run(
        [
            fabricemu_exe,
            "sweep",
            str(scenario),
            *grid,
            "-o",
            str(tmp_path / "x"),
            "--scheduler",
            "tcp://127.0.0.1:9",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "1s"},
        timeout=120,
        check=False,
    )
    assert bad.returncode == 1, bad.stderr
    assert "cannot connect" in bad.stderr


def test_report_on_a_run_and_on_a_sweep(cli, tmp_path):
    pytest.importorskip("matplotlib")
    scenario = tmp_path / "traced.toml"
    scenario.write_text(TRACED)
    run_dir = tmp_path / "run"
    assert cli("run", str(scenario), "-o", str(run_dir), "-q").returncode == 0
    proc = cli("report", str(run_dir))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"wrote {run_dir / 'report.html'}"
    page = (run_dir / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert "http://" not in page and "https://" not in page and "<script" not in page, "self-contained"
    for section in [
        "Summary",
        "FCT slowdown by flow size",
        "Queue depth",
        "Link utilisation",
        "PFC pauses",
        "rates",
    ]:
        assert section in page, section
    assert "Not in this run" not in page, "every table was traced"
    assert png_images(page) == [], "plots are inline SVG"
    figures = svg_figures(page)
    # slowdown CDF per size bucket, CDF per workload, queues, heat map, PFC, rates, fairness
    assert len(figures) == 7
    for svg in figures:
        assert_valid_svg(svg)

    plain = tmp_path / "plain"
    assert cli("run", QUICKSTART, "-o", str(plain), "-q").returncode == 0
    assert cli("report", str(plain), "-o", str(tmp_path / "plain.html")).returncode == 0
    page = (tmp_path / "plain.html").read_text()
    assert page.count("Not in this run") == 4
    assert 'queues = { interval = "1us" }' in page.replace("&quot;", '"')
    for svg in svg_figures(page):
        assert_valid_svg(svg)

    sweep_scenario = tmp_path / "perm.toml"
    sweep_scenario.write_text(SMALL_PERM)
    sw = tmp_path / "sw"
    proc = cli(
        "sweep",
        str(sweep_scenario),
        "--grid",
        "workload.0.size=16KiB,64KiB,256KiB",
        "--grid",
        "topology.k=4,6",
        "--seeds",
        "1,2",
        "-o",
        str(sw),
        "-q",
    )
    assert proc.returncode == 0, proc.stderr
    proc = cli("report", str(sw), "-o", str(tmp_path / "sweep.html"), "--title", "My sweep")
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "sweep.html").read_text()
    assert "<title>My sweep</title>" in page
    assert "FCT slowdown p99 against workload.0.size, one line per topology.k" in page
    figures = svg_figures(page)
    assert len(figures) >= 5
    for svg in figures:
        assert_valid_svg(svg)
    # Each run links to its own report, written next to it.
    links = re.findall(r"<a class='run-report' href='([^']+)'>", page)
    assert len(links) == 12
    for href in links:
        assert (tmp_path / href).is_file(), href


def test_report_without_matplotlib_says_how_to_install_it(fabricemu_exe, tmp_path):
    blocker = tmp_path / "blocker" / "matplotlib"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('no matplotlib here')\n")
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "blocker")}
    subprocess.run([fabricemu_exe, "run", QUICKSTART, "-o", str(out), "-q"], check=True, env=env)
    proc = subprocess.run(
        [fabricemu_exe, "report", str(out)], capture_output=True, text=True, env=env, check=False
    )
    assert proc.returncode == 1
    assert "pip install 'fabricemu[plot]'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_report_and_compare_refuse_other_folders(cli, tmp_path):
    proc = cli("report", str(tmp_path))
    assert proc.returncode == 2
    assert "not a run's or a sweep's output folder" in proc.stderr
    proc = cli("compare", str(tmp_path), str(tmp_path))
    assert proc.returncode == 2
    assert "no run.json" in proc.stderr


def test_compare(cli, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert cli("run", QUICKSTART, "-o", str(a), "-q").returncode == 0
    assert cli("run", QUICKSTART, "-o", str(b), "-q", "--set", "workload.0.size=2MB").returncode == 0
    proc = cli("compare", str(a), str(b))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["metric", "a", "b", "change"]
    rows = {
        line.split()[0]: line.split()[1:] for line in lines[2:] if line.strip() and not line.startswith(" ")
    }
    assert rows["flows"][0] == rows["flows"][1] and rows["flows"][2] == "+0.0%"
    assert rows["slowdown_p99"][2].startswith(("+", "-"))
    data = json.loads(cli("compare", str(a), str(b), "--json").stdout)
    by_metric = {r["metric"]: r for r in data}
    info_a = json.loads((a / "run.json").read_text())
    assert by_metric["events"]["a"] == info_a["events"]
    assert by_metric["goodput_gbps"]["b"] > 0
    three = cli("compare", str(a), str(b), str(a))
    assert three.returncode == 0
    assert three.stdout.splitlines()[0].split() == ["metric", "a", "b", "a", "(2)"]


def test_topo(cli, tmp_path):
    proc = cli("topo", QUICKSTART)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert text.splitlines()[0] == "quickstart: fat_tree k=4"
    assert re.search(r"hosts\s+16\n", text)
    assert "20 (8 edge, 8 agg, 4 core)" in text
    assert "48 (16 host at 100 Gbps, 16 fabric at 100 Gbps, 16 core at 100 Gbps)" in text
    assert "800 Gbps (demand 800 Gbps: full bisection)" in text
    assert "1:1 overall" in text
    assert "6 links (5 switches)" in text
    slow = cli("topo", QUICKSTART, "--set", "topology.core_link_rate=25Gbps", "--json")
    f = json.loads(slow.stdout)
    assert f["bisection_bps"] == 8 * 25_000_000_000
    assert f["oversubscription"] == 4.0
    assert [r["oversubscription"] for r in f["roles"]] == [1.0, 4.0, None]
    leaf = tmp_path / "leaf.toml"
    leaf.write_text(
        '[topology]\nkind = "leaf_spine"\nleaves = 4\nspines = 2\nhosts_per_leaf = 6\n'
        '[[workload]]\nkind = "permutation"\nsize = "1MB"\n'
    )
    proc = cli("topo", str(leaf))
    assert proc.returncode == 0, proc.stderr
    assert "leaf_spine 4 leaves x 2 spines, 6 hosts per leaf" in proc.stdout
    assert "3:1 overall; leaf 3:1" in proc.stdout
    assert "4 links (3 switches)" in proc.stdout
    bad = cli("topo", QUICKSTART, "--set", "topology.k=5")
    assert bad.returncode == 2 and "topology.k" in bad.stderr


def test_sweep_ctrl_c_stops_the_workers_and_writes_the_table(fabricemu_exe, tmp_path):
    scenario = tmp_path / "long.toml"
    scenario.write_text(
        'name = "long"\nstop = "50ms"\n[topology]\nkind = "fat_tree"\nk = 8\n'
        '[[workload]]\nkind = "permutation"\nsize = "1GB"\n'
    )  # tens of seconds per run
    out = tmp_path / "sw"
    proc = subprocess.Popen(
        [
            fabricemu_exe,
            "sweep",
            str(scenario),
            "--grid",
            "workload.0.size=1GB,2GB,3GB",
            "-j",
            "2",
            "-o",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # Ctrl-C in a terminal signals the whole process group
    )
    try:
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            if (out / "runs").is_dir() and len(list((out / "runs").iterdir())) >= 2:
                break
            time.sleep(0.05)
        time.sleep(1.0)
        assert proc.poll() is None, "the sweep finished too early: " + proc.stderr.read()
        os.killpg(proc.pid, signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert "run the same command to resume" in stderr
    table = read_arrow(out / "sweep.arrow")
    assert table.column("error").to_pylist() == ["interrupted"] * 3
    for run in (out / "runs").iterdir():
        assert not (run / "run.json").exists(), "a stopped point leaves no complete run"
