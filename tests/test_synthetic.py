"""Open-loop synthetic traffic through the Python API, the CLI and sweeps; the saturation helper.

Tolerances: at 10 % load on a non-blocking k=4 fat tree everything offered is accepted; the two
differ only by the messages in flight at the window's edges (a few us of a 100 us window), so
within 5 %. The realised offered load of ~4800 Bernoulli slots per point has a standard deviation
of sqrt(load (1 - load) / slots) < 1 %; 4 sd is 3 %.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

import fabricemu
from fabricemu import analysis
from fabricemu.results import SYNTHETIC_KEYS

from conftest import SCENARIOS

SYNTH = """\
name = "synth"
seed = 2
stop = "120us"
warmup = "20us"

[topology]
kind = "fat_tree"
k = 4

[nic]
arbitration = "fifo"

[[workload]]
kind = "synthetic"
pattern = "uniform_random"
load = 0.1
size = "4KiB"
"""


def test_summary_has_the_measurement(tmp_path):
    result = fabricemu.run(fabricemu.Scenario.from_toml(SYNTH), out=tmp_path / "run")
    s = result.summary()
    for key in SYNTHETIC_KEYS:
        assert key in s, key
    assert s["offered_load"] == pytest.approx(0.1, abs=0.03)
    assert s["accepted_throughput"] == pytest.approx(s["offered_load"], rel=0.05)
    # The latency of a 4 KiB message is at least its ideal FCT (>= 2 hops: 1.67 us) and, at 10 %
    # load, not far above the longest ideal (6 hops of 333 ns + 500 ns: 5 us).
    assert 1.6 < s["latency_p50_us"] <= s["latency_p99_us"] <= s["latency_max_us"] < 8
    assert s["messages_measured"] > 400
    assert s["messages_unfinished"] >= 0
    info = result.run_info
    assert info["synthetic"]["window_ps"] == 100_000_000
    assert info["synthetic"]["senders"] == 16
    assert info["workloads"][0]["kind"] == "synthetic"
    # flows.arrow: one row per message, `measured` for those generated in the window.
    flows = result.flows
    measured = flows.filter(flows.column("measured"))
    starts = measured.column("start_ps").to_pylist()
    assert all(20_000_000 <= t < 120_000_000 for t in starts)
    finished = measured.filter(measured.column("finish_ps").is_valid())
    assert finished.num_rows == s["messages_measured"]
    # Without synthetic workloads the keys are absent and the column is null.
    assert "accepted_throughput" not in fabricemu.run(SCENARIOS / "quickstart.toml").summary()


def test_same_seed_same_messages(tmp_path):
    a = fabricemu.run(fabricemu.Scenario.from_toml(SYNTH), out=tmp_path / "a").flows
    b = fabricemu.run(fabricemu.Scenario.from_toml(SYNTH), out=tmp_path / "b").flows
    assert a.equals(b)


def test_errors_name_the_key():
    with pytest.raises(fabricemu.ScenarioError) as e:
        fabricemu.Scenario.from_toml(SYNTH.replace("load = 0.1", "load = 1.2"))
    assert e.value.path == "workload.0.load" and e.value.line == 16
    with pytest.raises(fabricemu.ScenarioError) as e:
        fabricemu.Scenario.from_toml(SYNTH.replace('stop = "120us"\nwarmup = "20us"\n', ""))
    assert "stop" in e.value.message and e.value.path == "workload.0.kind"
    with pytest.raises(fabricemu.ScenarioError) as e:
        fabricemu.Scenario.from_toml(SYNTH.replace('"uniform_random"', '"random"'))
    assert e.value.path == "workload.0.pattern" and "tornado" in e.value.message
    with pytest.raises(fabricemu.ScenarioError) as e:
        fabricemu.Scenario.from_toml(SYNTH.replace('warmup = "20us"', 'warmup = "1ms"'))
    assert e.value.path == "warmup" and e.value.line == 4


def test_cli_run_prints_accepted_throughput(cli, tmp_path):
    (tmp_path / "s.toml").write_text(SYNTH)
    proc = cli("run", "s.toml", "-o", "out")
    assert proc.returncode == 0, proc.stderr
    assert "accepted throughput" in proc.stdout and "offered load" in proc.stdout
    assert "message latency" in proc.stdout and "measured" in proc.stdout
    info = json.loads((tmp_path / "out" / "run.json").read_text())
    accepted = info["synthetic"]["accepted_throughput"]
    assert f"accepted throughput {accepted:.3f}" in proc.stdout


def test_example_scenario_validates(cli):
    proc = cli("validate", str(SCENARIOS / "synthetic_load.toml"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok: ") and "synthetic" in proc.stdout


def test_load_sweep_gives_throughput_per_load(tmp_path):
    table = fabricemu.sweep(
        fabricemu.Scenario.from_toml(SYNTH), {"workload.0.load": [0.1, 0.4]}, out=tmp_path, jobs=2
    )
    assert table.column("error").null_count == table.num_rows
    rows = {r["workload.0.load"]: r for r in table.to_pylist()}
    for load, r in rows.items():
        # Below saturation (a non-blocking fat tree): accepted ~ offered ~ load.
        assert r["offered_load"] == pytest.approx(load, abs=0.03)
        assert r["accepted_throughput"] == pytest.approx(r["offered_load"], rel=0.05)
        assert r["latency_mean_us"] > 0 and r["messages_measured"] > 0
    assert rows[0.4]["latency_mean_us"] > rows[0.1]["latency_mean_us"]
    sat = analysis.saturation(table)
    assert sat.num_rows == 1
    assert sat.column("saturation_throughput")[0].as_py() == pytest.approx(rows[0.4]["accepted_throughput"])
    assert sat.column("at_load")[0].as_py() == 0.4
    assert sat.column("saturation_load")[0].as_py() is None  # not saturated
    assert (
        fabricemu.open_sweep(tmp_path)
        .column("accepted_throughput")
        .equals(table.column("accepted_throughput"))
    )


def test_saturation_helper_on_a_table():
    # Two routings; "a" saturates at 0.6 (accepted 0.5 < 0.95 x 0.6), "b" never. Two seeds at
    # one load are averaged.
    t = pa.table(
        {
            "workload.0.load": [0.2, 0.4, 0.6, 0.8, 0.2, 0.4, 0.4, 0.6],
            "routing.load_balancing": ["a", "a", "a", "a", "b", "b", "b", "b"],
            "accepted_throughput": [0.2, 0.4, 0.5, 0.52, 0.2, 0.38, 0.42, 0.6],
            "offered_load": [0.2, 0.4, 0.6, 0.8, 0.2, 0.4, 0.4, 0.6],
            "error": [None] * 8,
        }
    )
    sat = analysis.saturation(t, by="routing.load_balancing").to_pylist()
    assert sat[0] == {
        "routing.load_balancing": "a",
        "saturation_throughput": 0.52,
        "at_load": 0.8,
        "saturation_load": 0.6,
        "loads": 4,
    }
    assert sat[1]["saturation_throughput"] == 0.6 and sat[1]["saturation_load"] is None
    assert sat[1]["loads"] == 3
    # A failed point is ignored; a looser tolerance finds saturation later.
    bad = t.set_column(4, "error", pa.array([None, None, "boom", None, None, None, None, None]))
    assert analysis.saturation(bad, by="routing.load_balancing").to_pylist()[0]["loads"] == 3
    loose = analysis.saturation(t, by="routing.load_balancing", tolerance=0.3).to_pylist()
    assert loose[0]["saturation_load"] == 0.8  # 0.5 >= 0.7 x 0.6, but 0.52 < 0.7 x 0.8
    with pytest.raises(KeyError):
        analysis.saturation(t, load="workload.1.load")
