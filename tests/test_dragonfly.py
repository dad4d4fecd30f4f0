"""Dragonfly routing through the Python API and the CLI: the routing keys, their errors, and what a
run reports (non-minimal packets, global hops, PFC deadlocks)."""

from __future__ import annotations

from pathlib import Path

import pytest

import fabricemu

from conftest import SCENARIOS


def dragonfly(lb: str, **routing: object) -> dict:
    flows = [{"src": h, "dst": (h + 8) % 72, "size": "100KB"} for h in range(72)]
    return {
        "topology": {"kind": "dragonfly", "p": 2, "a": 4, "h": 2, "g": 9, "global_link_delay": "1us"},
        "switch": {"buffer": "4MB", "pfc": {"enabled": True}},
        "routing": {"load_balancing": lb, **routing},
        "workload": [{"kind": "flows", "flows": flows}],
    }


@pytest.mark.parametrize("lb", ["min", "valiant", "ugal_l", "ugal_g", "par"])
def test_every_dragonfly_routing_runs_from_python(lb: str, tmp_path: Path):
    result = fabricemu.run(dragonfly(lb), out=tmp_path / lb)
    stats = result.run_info["stats"]
    assert result.summary()["finished"] == 72
    assert stats["pfc_deadlocks"] == 0
    assert stats["max_global_hops"] == (1 if lb == "min" else 2)
    assert (stats["packets_nonminimal"] > 0) == (lb != "min")


def test_a_sweep_can_vary_the_dragonfly_routing():
    s = fabricemu.Scenario.from_dict(dragonfly("min"))
    for lb in ["valiant", "ugal_g"]:
        assert s.with_({"routing.load_balancing": lb}).to_dict()["routing"]["load_balancing"] == lb


@pytest.mark.parametrize(
    "change, path, words",
    [
        ({"routing.load_balancing": "ugal"}, "routing.load_balancing", "ugal_l"),
        (
            {"routing.ugal_candidates": 0, "routing.load_balancing": "ugal_l"},
            "routing.ugal_candidates",
            "1..=64",
        ),
        ({"transport.priority": 6}, "routing.hop_classes", "priority"),
    ],
)
def test_routing_errors_name_the_key(change: dict, path: str, words: str):
    base = fabricemu.Scenario.from_dict(dragonfly("valiant"))
    with pytest.raises(fabricemu.ScenarioError) as e:
        base.with_(change)
    assert e.value.path == path
    assert words in e.value.message


def test_valiant_on_a_fat_tree_is_an_error():
    with pytest.raises(fabricemu.ScenarioError) as e:
        fabricemu.Scenario.from_dict(
            {
                "topology": {"kind": "fat_tree", "k": 4},
                "routing": {"load_balancing": "valiant"},
                "workload": [{"kind": "permutation", "size": "1MB"}],
            }
        )
    assert e.value.path == "routing.load_balancing"
    assert "dragonfly" in e.value.message


def test_cli_reports_a_pfc_deadlock_without_hop_classes(cli, tmp_path: Path):
    # One class for every hop under Valiant with small buffers closes a cycle of pauses: the run
    # ends at the deadlock and says so.
    s = fabricemu.Scenario.from_dict(dragonfly("valiant", hop_classes=False)).with_(
        {
            "switch.buffer": "300KB",
            "workload.0.flows": [{"src": h, "dst": (h + 8) % 72, "size": "500KB"} for h in range(72)],
        }
    )
    path = tmp_path / "deadlock.toml"
    path.write_text(s.to_toml())
    out = cli("run", str(path), "-o", str(tmp_path / "out"))
    assert out.returncode == 0, out.stderr
    assert "PFC DEADLOCKS 1" in out.stdout
    assert "most global hops 2" in out.stdout


def test_dragonfly_load_sweep_in_one_call(tmp_path: Path):
    # The literature's comparison in one call: routing x offered load under the worst case, then
    # the saturation point of each routing. MIN saturates at 1/(a p) = 0.125 of injection
    # bandwidth (shared/reference/dragonfly_channel_load_bounds.csv), so at load 0.3 it already
    # accepts far less than offered; UGAL-G carries 0.3 (its saturation is near 0.55).
    from fabricemu import analysis

    s = fabricemu.Scenario.load(SCENARIOS / "dragonfly_ugal.toml").with_({"stop": "250us", "warmup": "100us"})
    table = fabricemu.sweep(
        s,
        grid={"routing.load_balancing": ["min", "ugal_g"], "workload.0.load": [0.1, 0.3]},
        out=tmp_path / "sweep",
    )
    assert table.num_rows == 4
    sat = {
        r["routing.load_balancing"]: r
        for r in analysis.saturation(table, by="routing.load_balancing").to_pylist()
    }
    assert sat["min"]["saturation_load"] == pytest.approx(0.3)
    assert sat["min"]["saturation_throughput"] < 0.2
    assert sat["ugal_g"]["saturation_load"] is None
    assert sat["ugal_g"]["saturation_throughput"] == pytest.approx(0.3, abs=0.03)


def test_dragonfly_scenarios_run_from_the_cli(cli, tmp_path: Path):
    for name in ["dragonfly_ugal", "dragonfly_plus"]:
        out = cli(
            "run",
            str(SCENARIOS / f"{name}.toml"),
            "-o",
            str(tmp_path / name),
            "--set",
            "stop=150us",
            "--set",
            "warmup=50us",
        )
        assert out.returncode == 0, out.stderr
        assert "accepted throughput" in out.stdout
        assert "most global hops 2" in out.stdout
