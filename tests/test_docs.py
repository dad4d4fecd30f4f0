"""The docs' code runs: every ```python and ```bash block of docs/*.md, in order, in a fresh folder
(```toml blocks whose first line is ``# <file>`` are written to that file first)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

import fabricemu
from fabricemu.sweep import deterministic_columns

from conftest import ROOT, read_arrow

DOCS = ROOT / "docs"

Block = Tuple[str, str, List[str]]  # (language, code, features it requires)


def blocks(page: Path) -> List[Block]:
    text = page.read_text(encoding="utf-8")
    out: List[Block] = []
    pattern = r"(?:<!-- requires: ([^>]*?) -->\n)?```(\w+)[^\n]*\n(.*?)```"
    for m in re.finditer(pattern, text, flags=re.S):
        requires = m.group(1).split() if m.group(1) else []
        out.append((m.group(2), m.group(3), requires))
    return out


def run_blocks(page: Path, folder: Path, *, with_required: bool) -> Dict[str, Any]:
    """Run the page's blocks in ``folder``; the Python blocks share one namespace."""
    namespace: Dict[str, Any] = {"__name__": "__main__"}
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    for lang, code, requires in blocks(page):
        if requires and not with_required:
            continue
        if lang == "toml":
            first = code.splitlines()[0]
            if first.startswith("# "):
                (folder / first[2:].strip()).write_text(code, encoding="utf-8")
        elif lang == "python":
            exec(compile(code, str(page), "exec"), namespace)
        elif lang == "bash":
            proc = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", code],
                cwd=folder,
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            assert proc.returncode == 0, f"{code}\n{proc.stdout}\n{proc.stderr}"
    return namespace


def is_png(path: Path) -> bool:
    return path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_every_docs_page_has_code():
    pages = sorted(DOCS.glob("*.md"))
    assert pages
    for page in pages:
        assert any(lang == "python" for lang, _, _ in blocks(page)), page


def test_worked_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The whole page, once (its sweeps are the suite's longest docs run): the incast sweep from
    Python and from the command line, then ECMP against spraying."""
    pytest.importorskip("matplotlib")
    pytest.importorskip("polars")
    monkeypatch.chdir(tmp_path)
    ns = run_blocks(DOCS / "worked-example.md", tmp_path, with_required=True)
    sweep_dir = tmp_path / "sweeps" / "incast-pfc"
    table = ns["table"]
    assert table.num_rows == 16 and table.column("error").null_count == 16
    assert is_png(sweep_dir / "p99.png")
    assert (sweep_dir / "report.html").is_file()
    assert (tmp_path / "incast-pfc-15-senders.html").is_file()
    # The command-line sweep made the same table (but for the wall-clock columns).
    cli_dir = tmp_path / "sweeps" / "incast-pfc-cli"
    from_cli = read_arrow(cli_dir / "sweep.arrow")
    keep = deterministic_columns(table)
    assert from_cli.select(keep).equals(table.select(keep))
    assert (cli_dir / "report.html").is_file()
    # The last section: ECMP against spraying.
    lb = ns["lb"]
    assert lb.num_rows == 12 and lb.column("error").null_count == 12
    assert is_png(tmp_path / "sweeps" / "ecmp-vs-spray" / "p99.png")


def test_analysis_page_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    monkeypatch.chdir(tmp_path)
    ns = run_blocks(DOCS / "analysis.md", tmp_path, with_required=False)
    assert ns["run"].tables() == ["flows", "links", "nodes", "pfc", "ports", "queues", "rates"]
    printed = capsys.readouterr().out
    # What the page says `print(e)` shows is what the code prints.
    quoted = re.findall(r"print\(e\)\s+# (.*?)(?:: \.\.\.)?\n", (DOCS / "analysis.md").read_text())
    assert quoted
    for text in quoted:
        assert any(line.startswith(text) for line in printed.splitlines()), (
            f"docs/analysis.md quotes {text!r}; the code printed {printed!r}"
        )


def test_analysis_page_quotes_the_missing_table_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The MissingTableError text the page quotes is the one the code raises."""
    monkeypatch.chdir(tmp_path)
    page = " ".join((DOCS / "analysis.md").read_text(encoding="utf-8").split())
    quoted = re.search(r"`(runs/x has no queues table[^`]*)`", page)
    assert quoted
    s = fabricemu.Scenario.from_dict(
        {"topology": {"kind": "fat_tree", "k": 4}, "workload": [{"kind": "permutation", "size": "8KiB"}]}
    )
    fabricemu.run(s, out="runs/x")
    with pytest.raises(fabricemu.MissingTableError) as e:
        fabricemu.analysis.queue_cdf("runs/x")
    assert str(e.value) == quoted.group(1)


def test_valiant_bound_page_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    ns = run_blocks(DOCS / "valiant-bound.md", tmp_path, with_required=False)
    assert round(ns["valiant_uniform_bound"](2, 4, 9), 4) == 0.5547


def test_congestion_control_page_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "scenarios").mkdir()
    for name in ("hpcc_paper.toml", "uec_vs_roce.toml"):
        shipped = ROOT / "scenarios" / name
        (tmp_path / "scenarios" / name).write_text(shipped.read_text(encoding="utf-8"), encoding="utf-8")
    ns = run_blocks(DOCS / "congestion-control.md", tmp_path, with_required=False)
    last = ns["last"]
    assert last["dcqcn"]["target_bps"] is not None and last["dcqcn"]["window_bytes"] is None
    assert last["dctcp"]["alpha"] is not None and last["dctcp"]["window_bytes"] > 0
    assert last["swift"]["delay_ps"] > 0 and last["swift"]["target_delay_ps"] > 0
    assert 0 < last["hpcc"]["utilisation"] < 2 and last["hpcc"]["alpha"] is None
    sweep = read_arrow(tmp_path / "sweeps" / "cc" / "sweep.arrow")
    assert sorted(sweep.column("transport.cc").to_pylist()) == ["dcqcn", "hpcc", "swift"]
    assert sweep.column("error").null_count == 3
    for run in ("hpcc", "dctcp"):
        assert (tmp_path / "runs" / run / "run.json").is_file()
    # Ultra Ethernet against RoCE: RoCE pauses and trims nothing; UEC trims instead of pausing,
    # and recovers every trimmed packet without a timeout.
    uec = ns["uec_vs_roce"]
    assert uec["roce"]["pfc_pause_frames"] > 0 and uec["roce"]["trimmed_packets"] is None
    assert uec["uec"]["pfc_pause_frames"] == 0 and uec["uec"]["trimmed_packets"] > 0
    assert uec["uec"]["timeouts"] == 0
    parts = read_arrow(tmp_path / "sweeps" / "uec" / "sweep.arrow")
    assert parts.num_rows == 4 and parts.column("error").null_count == 4


def test_architecture_page_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    ns = run_blocks(DOCS / "architecture.md", tmp_path, with_required=False)
    assert ns["need"]["flows"] == 16
    assert ns["fabric"]["hosts"] == 16 and ns["fabric"]["switches"] == 20
    assert "would need about" in ns["refused"] and "more than the limit of 1.0 GiB" in ns["refused"]


def test_collectives_page_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    ns = run_blocks(DOCS / "collectives.md", tmp_path, with_required=False)
    row = ns["row"]
    assert row["algorithm"] == "hierarchical_ring" and row["flows_finished"] == row["flows"]
    assert 0 < row["scaleout_busbw_bps"] < 100e9 and 0 < row["scaleup_busbw_bps"] < 100e9
    table = read_arrow(tmp_path / "runs" / "hier" / "collectives.arrow")
    # pxn on 2 leaves of 4: per rank 3/4 S inside a leaf and 1/2 S across, for 8 ranks.
    (r,) = table.to_pylist()
    assert (r["scaleup_flow_bytes"], r["scaleout_flow_bytes"]) == (8 * 3 * 2**18 // 4, 8 * 2**18 // 2)


def test_step_workloads_page_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    ns = run_blocks(DOCS / "step-workloads.md", tmp_path, with_required=False)
    assert (tmp_path / "runs" / "step" / "steps.arrow").is_file()
    assert (tmp_path / "runs" / "step" / "ops.arrow").is_file()
    assert json.loads((tmp_path / "step.json").read_text())["ops"][4]["deps"] == [0, 1, 2, 3]
    assert ns["slow"].steps.num_rows == 3
    assert ns["makespan_us"](ns["slow"]) > ns["makespan_us"](ns["fast"])


#: The pages of docs/ and the test that runs every code block of each.
PAGE_TESTS = {
    "parallel.md": "test_parallel_page_runs",
    "analysis.md": "test_analysis_page_runs",
    "architecture.md": "test_architecture_page_runs",
    "collectives.md": "test_collectives_page_runs",
    "control.md": "test_control_page_runs",
    "gpu-clusters.md": "test_gpu_clusters_page_runs",
    "in-network.md": "test_in_network_page_examples_validate",
    "ocs.md": "test_ocs_page_examples_validate",
    "topology.md": "test_topology_page_runs",
    "normalised-scenario.md": "test_normalised_scenario_page_runs",
    "packet-traces.md": "test_packet_traces_page_runs",
    "report.md": "test_report_page_runs",
    "congestion-control.md": "test_congestion_control_page_runs",
    "failures.md": "test_failures_page_runs",
    "synthetic-traffic.md": "test_synthetic_traffic_page_runs",
    "step-workloads.md": "test_step_workloads_page_runs",
    "training.md": "test_training_page_runs",
    "valiant-bound.md": "test_valiant_bound_page_runs",
    "worked-example.md": "test_worked_example_runs",  # and, with the required features, ..._spraying
}


def test_control_page_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    ns = run_blocks(DOCS / "control.md", tmp_path, with_required=False)
    policy = ns["policy_run"].actions.to_pylist()
    assert policy and all(a["source"] == "policy:telemetry_aware" for a in policy)
    assert ns["python_run"].collectives.num_rows == 2
    assert fabricemu.open(tmp_path / "runs" / "cli-controller").actions.num_rows == 2


def test_in_network_page_examples_validate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The page's configuration example is a valid scenario on a k=4 fat tree (with a hop-sized
    call: validating builds the trees and allocates the contexts)."""
    (block,) = [code for lang, code, _ in blocks(DOCS / "in-network.md") if lang == "toml"]
    text = '[topology]\nkind = "fat_tree"\nk = 4\n' + block.replace('"64MiB"', '"1MiB"')
    s = fabricemu.Scenario.from_toml(text, "in-network.md")
    reduction = s.to_dict(normalised=True)["switch"]["reduction"]
    assert reduction["core"]["contexts"] == 2 and reduction["edge"] == {"enabled": False}
    result = fabricemu.run(s, tmp_path / "in-network")
    assert result.summary()["flows_finished"] > 0
    monkeypatch.chdir(tmp_path)
    ns = run_blocks(DOCS / "in-network.md", tmp_path, with_required=False)
    assert ns["result"].run_info["stats"]["in_network_calls"] > 0


def test_ocs_page_examples_validate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The page's `[ocs]` example is a valid scenario and runs (with a small permutation)."""
    toml = [code for lang, code, _ in blocks(DOCS / "ocs.md") if lang == "toml"]
    text = toml[0] + '\n[[workload]]\nkind = "permutation"\nsize = "64KB"\n'
    s = fabricemu.Scenario.from_toml(text, "ocs.md")
    result = fabricemu.run(s, tmp_path / "ocs")
    assert (tmp_path / "ocs" / "circuits.arrow").is_file()
    assert result.summary()["flows_finished"] > 0
    monkeypatch.chdir(tmp_path)
    ns = run_blocks(DOCS / "ocs.md", tmp_path, with_required=False)
    assert ns["result"].circuits.num_rows > 0


def test_topology_page_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Run by tests/test_topology_graph.py::test_docs_page_runs (it needs networkx)."""
    pytest.importorskip("networkx")
    monkeypatch.chdir(tmp_path)
    run_blocks(DOCS / "topology.md", tmp_path, with_required=True)
    assert (tmp_path / "clos.graphml").is_file()


def test_parallel_page_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    ns = run_blocks(DOCS / "parallel.md", tmp_path, with_required=True)
    assert ns["one"].stats["flows_finished"] == 24
    assert ns["one"].stats["packets_dropped"] > 0


def test_every_docs_page_is_run_by_a_test():
    assert sorted(p.name for p in DOCS.glob("*.md")) == sorted(PAGE_TESTS)
    for test in PAGE_TESTS.values():
        assert callable(globals()[test])


def test_report_page_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    run_blocks(DOCS / "report.md", tmp_path, with_required=False)
    assert (tmp_path / "runs" / "report_demo" / "report.html").is_file()
    runs = sorted((tmp_path / "sweeps" / "load" / "runs").iterdir())
    assert len(runs) == 2 and all((r / "report.html").is_file() for r in runs)
    page = (tmp_path / "load-sweep.html").read_text()
    assert page.count("class='run-report'") == 2


def test_normalised_scenario_page_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    ns = run_blocks(DOCS / "normalised-scenario.md", tmp_path, with_required=False)
    assert ns["record"]["scenario"] == ns["full"]
    assert (tmp_path / "runs" / "small-again" / "flows.arrow").is_file()


def test_packet_traces_page_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    ns = run_blocks(DOCS / "packet-traces.md", tmp_path, with_required=False)
    assert ns["r"].latency.num_rows > 1 and ns["drops"].num_rows > 0
    assert ns["n"] > 0 and (tmp_path / "leaf0-python.pcapng").read_bytes()[:4] == b"\x0a\x0d\x0d\x0a"
    assert (tmp_path / "leaf0.pcapng").is_file() and (tmp_path / "two.pcapng").is_file()


def test_gpu_clusters_page_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    ns = run_blocks(DOCS / "gpu-clusters.md", tmp_path, with_required=False)
    assert ns["c"]["gpus"] == 256
    assert ns["fct"]["pxn"] < ns["fct"]["spine"]  # two 100G hops instead of four
    f = json.loads((tmp_path / "superpod_unit.json").read_text())
    assert f["cluster"]["servers"] == 32


def test_failures_page_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    ns = run_blocks(DOCS / "failures.md", tmp_path, with_required=False)
    flaps = ns["flaps"]
    assert len(flaps) == 3 and flaps[0]["target"] == "leaf:0--spine:0"
    assert flaps[0]["time_ps"] == 20_000_000 and flaps[0]["duration_ps"] == 20_000_000
    summary = ns["summary"]
    assert summary["faults_applied"] == len(ns["faults"]) >= 4  # the flaps and the loss fault
    assert summary["link_seconds_down"] > 0
    assert (tmp_path / "runs" / "gray" / "faults.arrow").is_file()
    jobs = ns["jobs"]
    assert jobs[0]["failures"] == 1 and jobs[0]["episodes"][0]["endpoints"] == [1]
    assert ns["jr"].summary()["lost_gpu_seconds"] > 0
    # Stall, restart and elastic on one job: elastic re-forms twice (shrink, rejoin), runs a
    # 7-of-8 group for a while, loses the least GPU-time and ends first.
    c = ns["compared"]
    assert c["elastic"]["reformations"] == 2 and c["elastic"]["group_size_min"] == 7
    assert c["elastic"]["end_ps"] < min(c["stall"]["end_ps"], c["restart"]["end_ps"])
    assert c["elastic"]["lost_gpu_seconds"] < c["stall"]["lost_gpu_seconds"]
    assert "reformations" not in c["stall"]
    # Relative throughput against the failure-free rate measured on the untouched iterations:
    # the table's figures (3 decimals); the shrunk iterations keep about 7/8.
    for mode, want in {"stall": 0.950, "restart": 0.935, "elastic": 0.981}.items():
        assert c[mode]["relative_throughput_baseline"] == "measured"
        assert round(c[mode]["relative_throughput"], 3) == want, mode
    assert abs(c["elastic"]["relative_throughput_shrunk"] / (7 / 8) - 1) < 0.02


def test_training_page_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    ns = run_blocks(DOCS / "training.md", tmp_path, with_required=False)
    assert abs(ns["s"]["bubble_fraction"] - 3 / 7) < 0.02
    assert ns["steps"].num_rows == 1
    assert len(ns["step_times"]) >= 2 * 9


def test_synthetic_traffic_page_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    ns = run_blocks(DOCS / "synthetic-traffic.md", tmp_path, with_required=False)
    table = ns["table"]
    assert table.num_rows == 3 and table.column("error").null_count == 3
    assert ns["sat"].num_rows == 1
    assert (tmp_path / "runs" / "synthetic-cli" / "run.json").is_file()
    assert (tmp_path / "sweeps" / "synthetic-cli" / "sweep.arrow").is_file()
