"""The normalised scenario (every default written out): what ``Scenario.to_dict(normalised=True)``,
``to_toml()``, ``fabricemu validate --normalised`` and run.json's ``scenario`` hold, and that it
reproduces a run byte for byte (the core's tests/golden.rs runs every shipped scenario so)."""

from __future__ import annotations

import json
from pathlib import Path

import fabricemu

from conftest import SCENARIOS

PLAIN = """
[topology]
kind = "fat_tree"
k = 4
[[workload]]
kind = "incast"
receiver = 0
senders = 3
size = "64KB"
"""


def test_every_default_is_written_out() -> None:
    full = fabricemu.Scenario.from_toml(PLAIN).to_dict(normalised=True)
    assert full["name"] == "scenario" and full["seed"] == 1 and full["stop"] == "all_flows_done"
    sw = full["switch"]
    assert sw["buffer"] == "32MiB" and sw["latency"] == "0ps" and sw["scheduler"] == "strict"
    # Tables that are off: their off switch only.
    assert sw["ecn"] == {"enabled": False}
    assert sw["pfc"] == {"enabled": False}
    assert sw["trimming"] == {"enabled": False}
    t = full["transport"]
    assert (t["mtu"], t["header"], t["ack_size"], t["rto"]) == ("4KiB", "62B", "66B", "1ms")
    assert (t["cc"], t["loss_recovery"], t["priority"], t["control_priority"]) == ("none", "go_back_n", 3, 7)
    assert t["credits"] == {"mode": "sender"}
    # Keys that do not apply stay absent: no controller table with cc = "none", no reorder window
    # with go-back-N.
    assert not {"dcqcn", "dctcp", "swift", "hpcc", "nscc", "reorder_threshold"} & set(t)
    r = full["routing"]
    assert r == {
        "load_balancing": "ecmp",
        "hash_fields": ["src", "dst", "sport", "dport"],
        "hash": "mix",
        "per_switch_seed": True,
    }
    topo = full["topology"]
    for tier in ["host", "fabric", "core"]:
        assert topo[f"{tier}_link_rate"] == "100Gbps" and topo[f"{tier}_link_delay"] == "500ns"
    assert full["trace"] == {"unfinished_flows": True, "pfc": False, "latency": False}
    assert full["nic"] == {"arbitration": "round_robin"}
    assert full["output"] == {"format": "arrow", "compression": "none"}
    w = full["workload"][0]
    got = (w["name"], w["start"], w["rounds"], w["round_gap"], w["senders"])
    assert got == ("incast", "0ps", 1, "0ps", 3)


def test_the_effective_values_of_derived_defaults() -> None:
    s = fabricemu.Scenario.from_toml(
        PLAIN.replace("k = 4", 'k = 4\nlink_rate = "400Gbps"')
        + '[transport]\ncc = "dcqcn"\nmtu = "1KiB"\n[transport.dcqcn]\nvariant = "mellanox"\n'
        + '[switch]\npfc = { enabled = true }\necn = { kmin = "10KB" }\n'
    )
    full = s.to_dict(normalised=True)
    d = full["transport"]["dcqcn"]
    # The Mellanox steps scale with the NIC rate (per 25G): 5Mbps and 50Mbps x 16.
    assert (d["rate_ai"], d["rate_hai"], d["variant"]) == ("80Mbps", "800Mbps", "mellanox")
    assert d["alpha_interval"] == "1us" and d["byte_counter"] == "0B"
    ecn = full["switch"]["ecn"]
    assert ecn == {
        "enabled": True,
        "kmin": "10KB",
        "kmax": "200KB",
        "pmax": 0.01,
        "mark": "dequeue",
        "priorities": [3],
    }
    pfc = full["switch"]["pfc"]
    # Two packets of this MTU (1024 + 62 B each).
    assert pfc == {"enabled": True, "priorities": [3], "beta": 1.0, "xon_offset": "2172B"}


def test_normalising_is_idempotent_and_to_toml_reads_back() -> None:
    for path in sorted(SCENARIOS.glob("*.toml")):
        s = fabricemu.Scenario.load(path)
        full = s.to_dict(normalised=True)
        again = fabricemu.Scenario.from_toml(s.to_toml())
        assert again.to_dict(normalised=True) == full, path.name
        assert fabricemu.Scenario.from_dict(full).to_dict(normalised=True) == full, path.name
        assert again == s


def test_run_json_holds_the_normalised_scenario_and_reproduces_the_run(cli, tmp_path: Path) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text(PLAIN + '[trace]\nqueues = { interval = "1us" }\n')
    first = tmp_path / "first"
    proc = cli("run", str(scenario), "-o", str(first), "--set", "seed=3", "--quiet")
    assert proc.returncode == 0, proc.stderr
    record = json.loads((first / "run.json").read_text())
    expected = fabricemu.Scenario.load(scenario).with_({"seed": 3}).to_dict(normalised=True)
    assert record["scenario"] == expected
    assert record["scenario"]["switch"]["buffer"] == "32MiB"
    assert record["overrides"] == {"seed": 3}

    again = tmp_path / "again"
    proc = cli("run", str(first / "run.json"), "-o", str(again), "--quiet")
    assert proc.returncode == 0, proc.stderr
    tables = sorted(p.name for p in first.glob("*.arrow"))
    assert "queues.arrow" in tables and "flows.arrow" in tables
    assert tables == sorted(p.name for p in again.glob("*.arrow"))
    for name in tables:
        assert (first / name).read_bytes() == (again / name).read_bytes(), name
    assert json.loads((again / "run.json").read_text())["scenario"] == record["scenario"]


def test_validate_normalised_prints_toml_that_runs_the_same(cli, tmp_path: Path) -> None:
    src = SCENARIOS / "quickstart.toml"
    proc = cli("validate", str(src), "--normalised")
    assert proc.returncode == 0, proc.stderr
    full = tmp_path / "full.toml"
    full.write_text(proc.stdout)
    assert "[switch.ecn]" in proc.stdout or "ecn" in proc.stdout
    written = fabricemu.Scenario.load(full)
    assert written.to_dict(normalised=True) == fabricemu.Scenario.load(src).to_dict(normalised=True)
    proc = cli("validate", str(full))
    assert proc.returncode == 0 and proc.stdout.startswith("ok: "), proc.stderr

    proc = cli("validate", str(src), "--normalised", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["ok"] and out["normalised"] == written.to_dict(normalised=True)


def test_an_unnamed_scenario_still_runs_into_its_file_stem(cli, tmp_path: Path) -> None:
    # The normalised scenario always has a name ("scenario" by default): the default output
    # folder is still named after the file when the scenario names none.
    (tmp_path / "mine.toml").write_text(PLAIN)
    proc = cli("run", "mine.toml", "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "runs" / "mine" / "run.json").is_file()
