"""Optical circuit switching (issue 17 item 6) from Python: the shipped scenario, circuits.arrow,
run.json's counters, the topology summary and errors (the engine's own tests are
rust/fabricemu-core/tests/integration/ocs.rs)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Callable

import pytest

import fabricemu
from fabricemu import Scenario, ScenarioError

from conftest import SCENARIOS

OCS = SCENARIOS / "ocs_reconfigure.toml"


def _last_finish(result: fabricemu.Result) -> int:
    finish = result.flows.column("finish_ps").to_pylist()
    assert all(f is not None for f in finish)
    return max(finish)


def test_reconfiguring_between_phases_beats_a_static_mesh(tmp_path: Path) -> None:
    s = Scenario.load(OCS)
    result = fabricemu.run(s, out=tmp_path / "ocs")
    c = result.circuits
    rows = list(
        zip(c.column("time_ps").to_pylist(), c.column("event").to_pylist(), c.column("source").to_pylist())
    )
    assert rows.count((0, "up", "initial")) == 8
    assert rows.count((220_000_000, "down", "schedule")) == 8
    assert rows.count((230_000_000, "up", "schedule")) == 8
    assert set(c.column("reconfiguration").to_pylist()) == {None, 0}
    # Each circuit joins two aggregation switches of different pods (2 aggregation switches per pod).
    for a, b in zip(c.column("name_a").to_pylist(), c.column("name_b").to_pylist()):
        ia, ib = int(a.split(":")[1]), int(b.split(":")[1])
        assert a.startswith("agg:") and b.startswith("agg:") and ia // 2 != ib // 2
    stats = result.run_info["stats"]
    assert stats["ocs_reconfigurations"] == 1
    assert stats["ocs_circuit_ps_lost"] == 8 * 10_000_000
    assert stats["flows_finished"] == 32
    # The OCS ports are ports of tier "ocs" in ports.arrow.
    tiers = result.table("ports").column("tier").to_pylist()
    assert tiers.count("ocs") == 16

    static = fabricemu.run(
        s.with_({"ocs.circuits": "uniform", "ocs.reconfigure": []}), out=tmp_path / "static"
    )
    assert "ocs_reconfigurations" not in static.run_info["stats"]
    assert _last_finish(result) < 0.75 * _last_finish(static)


def test_topo_describes_the_ocs(cli: Callable[..., subprocess.CompletedProcess]) -> None:  # type: ignore[type-arg]
    proc = cli("topo", str(OCS))
    assert proc.returncode == 0, proc.stderr
    assert "OCS               16 ports, 8 agg switches x 2 uplinks; 8 circuits" in proc.stdout, proc.stdout
    assert "1 reconfiguration scheduled" in proc.stdout
    summary = Scenario.load(OCS).fabric_summary()
    assert summary["ocs"]["circuits"] == 8 and summary["ocs"]["dark_ports"] == 0
    assert "core" not in {r["role"] for r in summary["roles"]}


def test_bad_circuits_name_their_key_and_line() -> None:
    text = OCS.read_text(encoding="utf-8").replace(
        '["agg:0", "agg:2"], ["agg:0", "agg:2"]', '["agg:0", "agg:2"], ["agg:0", "agg:99"]'
    )
    with pytest.raises(ScenarioError) as e:
        fabricemu.run(Scenario.from_toml(text, "ocs.toml"))
    assert "ocs.circuits.1.1" in str(e.value) and "agg:99 does not exist" in str(e.value)
    assert str(e.value).startswith("ocs.toml:")
