"""Live control from Python (issue 16): ``fabricemu.run(..., controller=f)`` calls ``f`` with the
telemetry at every control boundary and applies the actions it returns; a controller that does
nothing leaves every output byte-identical; bad actions and controller exceptions stop the run
with valid partial outputs; the CLI's ``--controller module:function``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

import fabricemu
from fabricemu import Scenario
from fabricemu.control import Fault, Reroute, Restore, SetAlgorithm, SetCc, Telemetry
from fabricemu.errors import ControlError

ROOT = Path(__file__).resolve().parent.parent
CONGESTED = ROOT / "scenarios" / "allreduce_congested.toml"

#: run.json keys that differ between any two runs (wall clock, host, where the run was written).
VOLATILE = {
    "wall_seconds",
    "events_per_second",
    "packet_hops_per_second",
    "started_utc",
    "finished_utc",
    "host",
    "outputs",
    "source",
}


def small(policy: bool = False) -> Scenario:
    """The congested all-reduce cut to 2 calls and 2 incast rounds (a second's run), planned as
    rings; without ``[control]`` unless ``policy``."""
    data = Scenario.load(CONGESTED).to_dict()
    if not policy:
        del data["control"]
    data["workload"][0]["algorithm"] = "ring"
    data["workload"][0]["iterations"] = 2
    data["workload"][1]["rounds"] = 2
    data["workload"][2]["rounds"] = 2
    return Scenario.from_dict(data)


def files(out: Path) -> Dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.is_file() and p.name != "run.json"}


def run_json(out: Path) -> Dict[str, Any]:
    info = json.loads((out / "run.json").read_text())
    return {k: v for k, v in info.items() if k not in VOLATILE}


def test_a_controller_that_does_nothing_leaves_every_output_byte_identical(tmp_path: Path) -> None:
    seen: List[Telemetry] = []

    def idle(t: Telemetry) -> None:
        seen.append(t)

    s = small()
    plain = fabricemu.run(s, out=tmp_path / "plain")
    controlled = fabricemu.run(s, out=tmp_path / "ctl", controller=idle, control_interval="10us")
    assert len(seen) > 5
    assert [t.time_ps for t in seen] == [10_000_000 * k for k in range(len(seen))]
    assert files(plain.out) == files(controlled.out)
    assert "actions.arrow" not in files(controlled.out)
    assert run_json(plain.out) == run_json(controlled.out)
    assert controlled.actions.num_rows == 0


def test_policy_none_runs_as_without_control(tmp_path: Path) -> None:
    s = small()
    none = s.with_({"control": {"interval": "20us", "policy": "none"}})
    a = fabricemu.run(s, out=tmp_path / "a")
    b = fabricemu.run(none, out=tmp_path / "b")
    assert sorted(files(a.out)) == sorted(files(b.out))
    for name in files(a.out):
        ta = ipc.open_file(a.out / name).read_all()
        tb = ipc.open_file(b.out / name).read_all()
        assert ta.equals(tb), name  # the data; only the scenario in the metadata differs
    ra, rb = run_json(a.out), run_json(b.out)
    for key in ("scenario", "overrides"):  # what was asked for, not what happened
        ra.pop(key)
        rb.pop(key)
    assert ra == rb


def test_telemetry_fields(tmp_path: Path) -> None:
    snapshots: List[Telemetry] = []
    fabricemu.run(small(), controller=snapshots.append, control_interval=20_000_000)
    first, later = snapshots[0], snapshots[3]
    assert (first.time_ps, first.interval_ps) == (0, 0)
    assert later.interval_ps == 20_000_000
    ports = later.ports
    assert isinstance(ports, pa.Table)
    assert ports.column_names == list(fabricemu.control.PORT_COLUMNS)
    assert ports.num_rows == len(later.columns["port"]) > 0
    busiest = later.busiest(1)[0]
    assert 0.9 < busiest.utilisation <= 1.0 + 1e-9
    peers = later.columns["peer"]
    for host in (1, 5):  # the incast receivers' downlinks are saturated
        assert later.port(peers.index(host)).utilisation > 0.9
    (c,) = later.collectives
    assert (c.collective, c.op, c.ranks, c.calls) == (0, "all_reduce", 8, 2)
    assert c.current_algorithm == "ring"
    assert 0 <= c.current_bytes_done <= c.current_bytes


def test_set_algorithm_from_python_replans_and_is_recorded(tmp_path: Path) -> None:
    def tree_everywhere(t: Telemetry) -> List[Any]:
        return [SetAlgorithm(c.collective, "tree") for c in t.collectives if c.next_call is not None]

    r = fabricemu.run(small(), out=tmp_path / "out", controller=tree_everywhere)
    assert r.collectives.column("algorithm").to_pylist() == ["tree", "tree"]
    actions = r.actions.to_pylist()
    assert [a["action"] for a in actions] == ["set_algorithm", "set_algorithm"]
    assert [a["target"] for a in actions] == ["collective 0 call 0", "collective 0 call 1"]
    assert all(a["source"] == "python" and a["value"] == "tree" for a in actions)
    assert "ring -> tree" in actions[0]["detail"]
    assert r.run_info["stats"]["flows_cancelled"] == 2 * 2 * 7 * 8
    flows = r.flows
    assert flows.num_rows == r.run_info["stats"]["flows_total"] - r.run_info["stats"]["flows_cancelled"]


def test_same_seed_same_controller_same_outputs(tmp_path: Path) -> None:
    def alternate(t: Telemetry) -> List[Dict[str, Any]]:
        out: List[Dict[str, Any]] = []
        for c in t.collectives:
            if c.next_call is not None:
                algorithm = "tree" if c.next_call % 2 else "halving_doubling"
                out.append({"action": "set_algorithm", "collective": c.collective, "algorithm": algorithm})
        if t.time_ps == 40_000_000:
            out.append(SetCc("g", 0.25).to_dict())
            out.append(Reroute(flow=3, entropy=99))
        return out

    a = fabricemu.run(small(), out=tmp_path / "a", controller=alternate)
    b = fabricemu.run(small(), out=tmp_path / "b", controller=alternate)
    assert files(a.out) == files(b.out)
    assert "actions.arrow" in files(a.out)
    assert a.collectives.column("algorithm").to_pylist() == ["halving_doubling", "tree"]


def test_a_controller_on_two_threads_acts_as_on_one(tmp_path: Path) -> None:
    """The parallel engine stops every partition at each boundary: the controller sees the same
    telemetry and its actions (re-planned calls, a fault and its restoration, a congestion-control
    parameter) change the run alike, so every output is byte-identical to one thread's."""
    seen: Dict[int, List[str]] = {1: [], 2: []}

    def script(threads: int):
        def act(t: Telemetry) -> List[Any]:
            seen[threads].append(repr((t.time_ps, t.ports.to_pydict(), t.collectives)))
            out: List[Any] = []
            for c in t.collectives:
                if c.next_call is not None:
                    algorithm = "tree" if c.next_call % 2 else "halving_doubling"
                    out.append(SetAlgorithm(c.collective, algorithm))
            if t.time_ps == 40_000_000:
                out.append(SetCc("g", 0.25))
                out.append(Fault(link=40, kind="down"))
            if t.time_ps == 80_000_000:
                out.append(Restore(link=40))
            return out

        return act

    outs = {}
    for threads in (1, 2):
        data = small().to_dict()
        data["threads"] = threads
        scenario = Scenario.from_dict(data)
        outs[threads] = fabricemu.run(scenario, out=tmp_path / f"t{threads}", controller=script(threads))
    assert len(seen[1]) > 10 and seen[1] == seen[2]

    def tables(out: Path) -> Dict[str, pa.Table]:
        # (Each file's metadata echoes the scenario, whose `threads` differs.)
        read = {p.name: ipc.open_file(p).read_all() for p in sorted(out.glob("*.arrow"))}
        return {name: t.replace_schema_metadata(None) for name, t in read.items()}

    one, two = tables(outs[1].out), tables(outs[2].out)
    assert one.keys() == two.keys() and {"flows.arrow", "actions.arrow", "faults.arrow"} <= one.keys()
    for name, table in one.items():
        assert table.equals(two[name]), name
    actions = outs[1].actions.column("action").to_pylist()
    assert {"set_algorithm", "set_cc", "fault", "restore"} <= set(actions), actions


def test_the_builtin_policy_runs_from_the_scenario(tmp_path: Path) -> None:
    # Planned as halving-doubling, the slowest here: the policy re-plans both calls as rings.
    s = small(policy=True).with_({"workload.0.algorithm": "halving_doubling"})
    r = fabricemu.run(s, out=tmp_path / "out")
    rows = r.actions.to_pylist()
    assert [row["source"] for row in rows] == ["policy:telemetry_aware"] * 2
    for row in rows:
        assert row["action"] == "set_algorithm" and row["value"] == "ring"
        assert "predicted ring" in row["detail"] and "tree" in row["detail"]
    assert r.collectives.column("algorithm").to_pylist() == ["ring", "ring"]


@pytest.mark.parametrize(
    "action, name, field",
    [
        ({"action": "set_algorithm", "collective": 7, "algorithm": "tree"}, "set_algorithm", "collective"),
        ({"action": "set_algorithm", "collective": 0, "algorithm": "bogus"}, "set_algorithm", "algorithm"),
        ({"action": "set_algorithm", "collective": 0}, "set_algorithm", "algorithm"),
        ({"action": "set_algorithm", "collective": -1, "algorithm": "tree"}, "set_algorithm", "collective"),
        ({"action": "reroute", "flow": 0, "entropy": 1, "colour": "red"}, "reroute", "colour"),
        ({"action": "set_cc", "param": "g", "value": "high"}, "set_cc", "value"),
        ({"action": "set_cc", "param": "nonsense", "value": 1.0}, "set_cc", "param"),
        ({"action": "fault", "link": 10**6}, "fault", "link"),
        ({"action": "fault", "link": 0, "kind": "degrade"}, "fault", "rate_bps"),
        ({"action": "fault", "link": 0, "kind": "melt"}, "fault", "kind"),
        ({"action": "explode"}, "#0", "action"),
        ("set_algorithm", "#0", ""),
    ],
)
def test_bad_actions_raise_control_error_and_leave_valid_outputs(
    tmp_path: Path, action: Any, name: str, field: str
) -> None:
    def bad(t: Telemetry) -> List[Any]:
        return [action] if t.time_ps == 20_000_000 else []

    with pytest.raises(ControlError) as e:
        fabricemu.run(small(), out=tmp_path / "out", controller=bad)
    assert (e.value.action, e.value.field) == (name, field)
    assert str(e.value).startswith(f"action {name}: {field}: ")
    info = json.loads((tmp_path / "out" / "run.json").read_text())
    assert info["interrupted"] is True
    assert info["simulated_ps"] == 20_000_000
    assert fabricemu.open(tmp_path / "out").flows.num_rows >= 0  # readable


def test_an_exception_in_the_controller_stops_the_run_cleanly(tmp_path: Path) -> None:
    class Boom(RuntimeError):
        pass

    def boom(t: Telemetry) -> None:
        if t.time_ps == 40_000_000:
            raise Boom("controller failed")

    with pytest.raises(Boom):
        fabricemu.run(small(), out=tmp_path / "out", controller=boom)
    info = json.loads((tmp_path / "out" / "run.json").read_text())
    assert info["interrupted"] is True
    assert info["simulated_ps"] == 40_000_000
    assert fabricemu.open(tmp_path / "out").flows.num_rows >= 0


def test_live_fault_and_restore_are_faults_rows(tmp_path: Path) -> None:
    def flap(t: Telemetry) -> List[Any]:
        if t.time_ps == 60_000_000:
            return [Fault(link=0, kind="degrade", rate_bps=10_000_000_000)]
        if t.time_ps == 100_000_000:
            return [Restore(link=0)]
        return []

    r = fabricemu.run(small(), out=tmp_path / "out", controller=flap)
    (row,) = r.faults.to_pylist()
    assert (row["source"], row["kind"], row["time_ps"], row["end_ps"]) == (
        "control",
        "degrade",
        60_000_000,
        100_000_000,
    )
    assert r.actions.column("action").to_pylist() == ["fault", "restore"]


def test_controller_arguments_are_checked() -> None:
    with pytest.raises(TypeError):
        fabricemu.run(small(), controller=42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="control_interval needs a controller"):
        fabricemu.run(small(), control_interval="10us")
    with pytest.raises(ValueError, match="control_interval"):
        fabricemu.run(small(), controller=lambda t: None, control_interval=5)


def test_cli_controller(tmp_path: Path) -> None:
    (tmp_path / "my_ctl.py").write_text(
        "def decide(t):\n"
        "    return [{'action': 'set_algorithm', 'collective': c.collective, 'algorithm': 'tree'}\n"
        "            for c in t.collectives if c.next_call is not None]\n"
        "def bad(t):\n"
        "    return [{'action': 'set_algorithm', 'collective': 0, 'algorithm': 'nope'}]\n"
    )
    scenario = tmp_path / "s.toml"
    scenario.write_text(small().to_toml())
    ok = subprocess.run(
        [
            sys.executable,
            "-m",
            "fabricemu.cli",
            "run",
            str(scenario),
            "-o",
            "out",
            "-q",
            "--controller",
            "my_ctl:decide",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0, ok.stderr
    assert fabricemu.open(tmp_path / "out").collectives.column("algorithm").to_pylist() == ["tree", "tree"]
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "fabricemu.cli",
            "run",
            str(scenario),
            "-o",
            "bad",
            "-q",
            "--controller",
            "my_ctl:bad",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 1
    assert "action set_algorithm: algorithm: unknown algorithm" in bad.stderr
    missing = subprocess.run(
        [sys.executable, "-m", "fabricemu.cli", "run", str(scenario), "-q", "--controller", "nowhere:f"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert missing.returncode == 2
    assert "--controller" in missing.stderr


@pytest.mark.parametrize(
    "cc, param, value, message",
    [
        ("hpcc", "g", 0.5, 'hpcc has no parameter "g"'),
        ("hpcc", "eta", 2.0, "eta must be in [0.01, 1]"),
        ("hpcc", "max_stage", 1.5, "whole number"),
        ("nscc", "eta", 0.9, 'nscc has no parameter "eta"'),
        ("nscc", "md", 0.0, "md must be in (0, 1]"),
    ],
)
def test_set_cc_hpcc_and_nscc_bad_names_and_values_are_control_errors(
    tmp_path: Path, cc: str, param: str, value: float, message: str
) -> None:
    s = small().with_({"transport.cc": cc})

    def bad(t: Telemetry) -> List[Any]:
        return [SetCc(param, value)] if t.time_ps == 20_000_000 else []

    with pytest.raises(ControlError) as e:
        fabricemu.run(s, out=tmp_path / "out", controller=bad)
    assert (e.value.action, e.value.field) == ("set_cc", "param")
    assert message in str(e.value)


def test_set_cc_hpcc_and_nscc_are_recorded(tmp_path: Path) -> None:
    for cc, param, value, old in [("hpcc", "eta", 0.8, "0.95"), ("nscc", "max_md", 0.25, "0.5")]:

        def once(t: Telemetry, param: str = param, value: float = value) -> List[Any]:
            return [SetCc(param, value)] if t.time_ps == 20_000_000 else []

        r = fabricemu.run(small().with_({"transport.cc": cc}), out=tmp_path / cc, controller=once)
        rows = r.actions.to_pylist()
        assert [(a["action"], a["target"]) for a in rows] == [("set_cc", f"{cc}.{param}")]
        assert f"was {old}" in rows[0]["detail"]
