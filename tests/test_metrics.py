"""One metrics module: Result.summary(), Result.metrics(), analysis.metrics() and a sweep row read
the same figures; the modules import one another in one direction only."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import fabricemu
from fabricemu import analysis, metrics
from fabricemu.metrics import METRICS_SCHEMA, SUMMARY_KEYS

from conftest import SMALL

PACKAGE = Path(fabricemu.__file__).parent
sweep = importlib.import_module("fabricemu.sweep")  # the module (fabricemu.sweep is the function)
LAYERED = ["metrics", "results", "sweep", "analysis"]


@pytest.fixture(scope="module")
def result(traced):
    return traced


def test_summary_is_a_view_of_the_metrics(result):
    m = result.metrics()
    s = result.summary()
    assert list(m) == METRICS_SCHEMA.names
    assert list(s)[: len(SUMMARY_KEYS)] == list(SUMMARY_KEYS)
    assert s["finished"] == m["flows_finished"] and s["unfinished"] == m["flows"] - m["flows_finished"]
    for key in m:
        if key in s:
            assert s[key] == m[key], key
    # Every metric key is in the summary (synthetic ones only with synthetic workloads, step ones
    # only with step workloads, job ones only with on_failure).
    assert set(m) - set(s) == set(metrics.SYNTHETIC_KEYS) | set(metrics.STEP_KEYS) | set(metrics.JOB_KEYS)
    assert analysis.metrics(result) == m
    assert analysis.metrics(result.out) == m
    assert m["pause_us"] > 0, "the scenario pauses: the links trace carries it"


def test_pause_from_pfc_alone_matches_the_links_trace(result):
    """The two ways to the pause total agree when the links trace sums the same intervals."""
    from_pfc = metrics.run_metrics(result.flows, result.run_info, pfc=result.pfc)["pause_us"]
    intervals = analysis.pfc_intervals(result)
    assert from_pfc == pytest.approx(sum(intervals.column("duration_ps").to_pylist()) / 1e6)


def test_sweep_row_and_compare_use_the_same_figures(result, tmp_path):
    row = sweep.run_point(result.run_info["scenario"], str(tmp_path / "again"))
    assert row["error"] is None
    again = fabricemu.open(tmp_path / "again").metrics()
    assert row["metrics"] == again
    table = analysis.compare(result, tmp_path / "again")
    assert table.column("metric").to_pylist()[0] == "flows"
    assert analysis.compare is sweep.compare and analysis.saturation is sweep.saturation


def test_summary_counters_are_zero_not_null_without_run_json():
    m = metrics.run_metrics(fabricemu.run(fabricemu.Scenario.from_toml(SMALL)).flows, None)
    assert m["events"] is None and m["drops"] is not None
    s = metrics.summary_view(m, None)
    assert s["events"] == 0 and s["simulated_us"] == 0.0 and s["interrupted"] is False


def _imports(module: str):
    tree = ast.parse((PACKAGE / f"{module}.py").read_text())
    top, inner = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            names = [node.module] if node.module else [a.name for a in node.names]
            target = top if node.col_offset == 0 else inner
            target.update(n.split(".")[0] for n in names)
    return top, inner


def test_metrics_results_sweep_analysis_import_in_one_direction():
    for i, module in enumerate(LAYERED):
        top, inner = _imports(module)
        assert not (inner & set(LAYERED)), f"{module} imports {inner & set(LAYERED)} inside a function"
        assert not (top & set(LAYERED[i:])), f"{module} imports a module above it: {top & set(LAYERED[i:])}"


@pytest.mark.parametrize("module", LAYERED)
def test_each_module_imports_first(module):
    code = f"import fabricemu.{module}"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
