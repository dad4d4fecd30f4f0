"""Issue 17 from Python: faults.arrow through ``Result.faults``, the fault metrics in summaries and
sweep rows, and the CLI's summary line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import fabricemu

BASE = {
    "name": "faults-py",
    "topology": {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2},
    "transport": {"loss_recovery": "selective", "rto": "20us"},
    "workload": [{"kind": "flows", "flows": [{"src": 0, "dst": 3, "size": "2MB"}]}],
}


def test_faults_table_and_summary(tmp_path: Path) -> None:
    s = fabricemu.Scenario.from_dict(
        {
            **BASE,
            "fault": [
                {"link": ["leaf:0", "spine:0"], "at": "10us", "until": "60us", "detection": "1us"},
                {"link": ["host:0", "leaf:0"], "direction": "a->b", "kind": "loss", "rate": 0.02},
            ],
        }
    )
    r = fabricemu.run(s, out=tmp_path / "run")
    assert "faults" in r.tables()
    rows = r.faults.to_pylist()
    assert [row["kind"] for row in rows] == ["loss", "down"]  # in start order
    down = rows[1]
    assert down["target"] == "leaf:0--spine:0" and down["num_links"] == 2
    assert (down["time_ps"], down["end_ps"], down["duration_ps"]) == (10_000_000, 60_000_000, 50_000_000)
    loss = rows[0]
    assert loss["target"] == "host:0->leaf:0" and loss["end_ps"] is None
    summary = r.summary()
    assert summary["faults_applied"] == 2
    assert summary["link_seconds_down"] == pytest.approx(2 * 50e-6)
    assert summary["corrupted_drops"] == loss["packets_lost"] > 0
    assert r.run_info["stats"]["corrupted_drops"] == summary["corrupted_drops"]


def test_no_faults_no_table_and_zero_metrics(tmp_path: Path) -> None:
    r = fabricemu.run(fabricemu.Scenario.from_dict(BASE), out=tmp_path / "run")
    assert "faults" not in r.tables()
    with pytest.raises(fabricemu.MissingTableError, match=r"\[\[fault\]\]"):
        r.faults  # noqa: B018 - the property raises
    summary = r.summary()
    assert summary["faults_applied"] == summary["corrupted_drops"] == 0
    assert summary["link_seconds_down"] == 0.0
    # run.json stays as before: the counters are written only when not 0.
    assert "faults_applied" not in r.run_info["stats"]


def test_sweep_over_loss_rates(tmp_path: Path) -> None:
    base = {**BASE, "fault": [{"link": ["host:0", "leaf:0"], "kind": "loss", "rate": 0.0}]}
    table = fabricemu.sweep(base, {"fault.0.rate": [0.0, 0.05]}, jobs=1, out=tmp_path / "sweep")
    rows = sorted(table.to_pylist(), key=lambda row: row["fault.0.rate"])
    assert rows[0]["corrupted_drops"] == 0 and rows[1]["corrupted_drops"] > 0
    assert rows[1]["goodput_gbps"] < rows[0]["goodput_gbps"]


def test_cli_prints_the_faults(tmp_path: Path) -> None:
    scenario = Path(__file__).resolve().parent.parent / "scenarios" / "flapping_link.toml"
    proc = subprocess.run(
        [sys.executable, "-m", "fabricemu.cli", "run", str(scenario), "-o", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert "faults " in proc.stdout and "corrupted " in proc.stdout, proc.stdout
    assert (tmp_path / "out" / "faults.arrow").is_file()


def _job(reaction: dict, faults: bool = True) -> fabricemu.Scenario:
    return fabricemu.Scenario.from_dict(
        {
            "name": "job",
            "topology": {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2},
            "workload": [
                {
                    "kind": "training",
                    "dp": 4,
                    "layers": 2,
                    "hidden": 64,
                    "seq_len": 64,
                    "forward": "20us",
                    "iterations": 4,
                    **reaction,
                }
            ],
            "fault": [{"link": ["host:1", "leaf:0"], "at": "100us", "until": "300us"}] if faults else [],
        }
    )


def test_a_stalling_job_reports_lost_gpu_time_in_the_summary_and_steps(tmp_path: Path) -> None:
    plain = fabricemu.run(_job({}), out=tmp_path / "plain")
    assert "lost_gpu_seconds" not in plain.summary()
    assert plain.metrics()["lost_gpu_seconds"] is None
    assert "useful" not in plain.steps.column_names and "jobs" not in plain.run_info
    r = fabricemu.run(_job({"on_failure": "stall", "detection": "5us"}), out=tmp_path / "stall")
    s = r.summary()
    # Down 200 us, routing notices the repair 10 us later, the job 5 us after that; 4 GPUs.
    assert s["lost_gpu_seconds"] == pytest.approx(4 * 215e-6)
    assert s["job_failures"] == 1 and s["useful_iterations"] == 4 and s["lost_iterations"] == 0
    assert sum(r.steps.column("stalled_ps").to_pylist()) == 215_000_000
    assert r.run_info["jobs"][0]["episodes"][0]["endpoints"] == [1]
    # Elastic goes on without the failed rank (docs/failures.md); restart keys are refused on it.
    with pytest.raises(fabricemu.ScenarioError, match=r"workload\.0\.restart_time"):
        _job({"on_failure": "elastic", "restart_time": "1us"})


def test_the_shadow_run_alongside_gives_the_baseline_the_shadow_after_the_run_gives(tmp_path: Path) -> None:
    # A rank lost for good in the first iteration: no iteration is untouched, so the failure-free
    # rate comes from a shadow run, on a spare core while the run goes on (by default) or after
    # it (in a sweep's points): the same figures either way (docs/failures.md).
    from fabricemu._run import no_shadow_alongside

    s = _job({"on_failure": "elastic", "reformation_time": "10us", "rejoin": "never"}).with_(
        {"fault": [{"link": ["host:1", "leaf:0"], "at": "10us"}]}
    )
    alongside = fabricemu.run(s, out=tmp_path / "alongside").run_info["jobs"]
    with no_shadow_alongside():
        after = fabricemu.run(s, out=tmp_path / "after").run_info["jobs"]
    assert alongside[0]["relative_throughput_baseline"] == "shadow"
    assert alongside == after


def test_an_elastic_job_reports_its_reformations_in_the_summary_and_sweep_rows(tmp_path: Path) -> None:
    r = fabricemu.run(_job({"on_failure": "elastic", "reformation_time": "10us"}), out=tmp_path / "el")
    jobs = r.run_info["jobs"]
    s = r.summary()
    # The figures are run.json's, summed (re-formations) or the worst job (relative throughput).
    assert s["job_reformations"] == sum(j["reformations"] for j in jobs) >= 1
    relative = [j["relative_throughput"] for j in jobs if j.get("relative_throughput") is not None]
    # Against the failure-free rate (measured, or from a shadow run when every iteration was
    # touched); the network-free comparison is network_efficiency.
    assert relative and s["relative_throughput"] == min(relative)
    for j in jobs:
        assert j["relative_throughput_baseline"] in ("measured", "shadow")
        assert 0 < j["relative_throughput"] == j["work_per_second"] / j["baseline_iterations_per_second"] < 1
        assert j["network_efficiency"] == j["work_per_second"] / j["ideal_iterations_per_second"]
    assert r.metrics()["job_reformations"] == s["job_reformations"]
    stall = fabricemu.run(_job({"on_failure": "stall"}), out=tmp_path / "stall").summary()
    assert stall["job_reformations"] == 0 and 0 < stall["relative_throughput"] < 1
    # Without a failure: 1 exactly.
    clean = fabricemu.run(_job({"on_failure": "stall"}, faults=False), out=tmp_path / "clean")
    assert clean.summary()["relative_throughput"] == 1.0
    assert clean.run_info["jobs"][0]["relative_throughput_baseline"] == "measured"
