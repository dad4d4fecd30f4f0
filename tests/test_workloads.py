"""Workloads from Python and the command line: poisson load, collectives (result.collectives),
replay, mixes, the summary's slowdown by flow size, and the shipped workload scenarios."""

from __future__ import annotations

import json

import pyarrow.compute as pc
import pytest

import fabricemu

from conftest import SCENARIOS, read_arrow

FABRIC = {"kind": "leaf_spine", "leaves": 8, "spines": 1, "hosts_per_leaf": 1}

COLLECTIVE_COLUMNS = [
    "collective",
    "workload",
    "workload_index",
    "group",
    "op",
    "algorithm",
    "ranks",
    "hosts",
    "iteration",
    "size_bytes",
    "flows",
    "flow_bytes",
    "flows_finished",
    "start_ps",
    "finish_ps",
    "duration_ps",
    "algbw_bps",
    "busbw_bps",
    "scaleup_flow_bytes",
    "scaleout_flow_bytes",
    "scaleup_time_ps",
    "scaleout_time_ps",
    "scaleup_busbw_bps",
    "scaleout_busbw_bps",
]


def test_collectives_table_and_flow_labels(tmp_path):
    result = fabricemu.run(
        {
            "topology": FABRIC,
            "workload": [
                {
                    "name": "ar",
                    "kind": "collective",
                    "op": "all_reduce",
                    "algorithm": "ring",
                    "size": "8MiB",
                    "group_size": 4,
                    "iterations": 2,
                    "compute_gap": "10us",
                }
            ],
        },
        out=tmp_path / "run",
    )
    table = result.collectives
    assert table.column_names == COLLECTIVE_COLUMNS
    rows = table.to_pylist()
    assert [(r["group"], r["iteration"]) for r in rows] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert [r["hosts"] for r in rows[::2]] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    for r in rows:
        assert r["workload"] == "ar" and r["op"] == "all_reduce" and r["ranks"] == 4
        assert r["flows"] == r["flows_finished"] == 2 * 3 * 4
        assert r["duration_ps"] == r["finish_ps"] - r["start_ps"]
        assert r["busbw_bps"] == pytest.approx(r["algbw_bps"] * 2 * 3 / 4)
        # 4 ranks on a non-blocking star at 100 Gbps: bus bandwidth near the link rate.
        assert 0.85e11 < r["busbw_bps"] < 1e11
    assert rows[1]["start_ps"] == rows[0]["finish_ps"] + 10_000_000

    flows = result.flows
    assert flows.column("collective").null_count == 0
    assert set(flows.column("collective_iteration").to_pylist()) == {0, 1}
    assert set(flows.column("collective_step").to_pylist()) == set(range(6))
    assert flows.column("tag").null_count == flows.num_rows
    # The table's finish is the last arrival of the iteration's flows.
    first = flows.filter(
        pc.and_(pc.equal(flows["collective"], 0), pc.equal(flows["collective_iteration"], 0))
    )
    assert pc.max(first["finish_ps"]).as_py() == rows[0]["finish_ps"]

    info = result.run_info["workloads"]
    assert info[0]["kind"] == "collective" and info[0]["collectives"] == 2
    assert info[0]["iterations_finished"] == 4

    again = fabricemu.open(tmp_path / "run")
    assert again.collectives.equals(table)


def test_runs_without_collectives_have_no_collectives_table():
    result = fabricemu.run(
        {"topology": FABRIC, "workload": [{"kind": "permutation", "size": "10KB"}]},
    )
    assert "collectives" not in result.tables()
    with pytest.raises(fabricemu.MissingTableError, match="collective"):
        result.collectives  # noqa: B018


def test_poisson_load_is_reported_and_close_to_target():
    # fb_hadoop (mean 120 KB) at 40 % on 8 hosts for 20 ms: ~6600 flows; the generated load's
    # standard error is ~3 %, so a 10 % band cannot fail by chance.
    s = fabricemu.Scenario.from_dict(
        {
            "seed": 2,
            "stop": "20ms",
            "topology": FABRIC,
            "workload": [{"kind": "poisson", "cdf": "fb_hadoop", "load": 0.4}],
        }
    )
    result = fabricemu.run(s)
    w = result.run_info["workloads"][0]
    assert w["kind"] == "poisson" and w["target_load"] == 0.4
    assert w["window_ps"] == 20_000_000_000
    assert w["offered_load"] == pytest.approx(0.4, rel=0.1)
    assert w["offered_load_wire"] > w["offered_load"]
    flows = result.flows
    assert w["flows"] == flows.num_rows
    assert w["bytes"] == pc.sum(flows["size_bytes"]).as_py()
    assert pc.max(flows["start_ps"]).as_py() < 20_000_000_000
    assert set(flows.column("workload").to_pylist()) == {"poisson"}


def test_replay_reproduces_an_earlier_run(tmp_path):
    first = fabricemu.run(
        {
            "seed": 4,
            "topology": {"kind": "fat_tree", "k": 4},
            "workload": [
                {"kind": "poisson", "cdf": "alistorage", "load": 0.3, "duration": "100us"},
                {"kind": "incast", "receiver": 3, "senders": 4, "size": "50KB", "start": "20us"},
            ],
        },
        out=tmp_path / "a",
    )
    csv = tmp_path / "flows.csv"
    f = first.flows
    lines = ["src,dst,size_bytes,start_ps,tag"]
    for r in f.select(["src", "dst", "size_bytes", "start_ps", "workload"]).to_pylist():
        lines.append(f"{r['src']},{r['dst']},{r['size_bytes']},{r['start_ps']},{r['workload']}")
    csv.write_text("\n".join(lines) + "\n")
    for source in [tmp_path / "a" / "flows.arrow", csv]:
        again = fabricemu.run(
            {
                "seed": 4,
                "topology": {"kind": "fat_tree", "k": 4},
                "workload": [{"kind": "replay", "file": str(source)}],
            }
        )
        g = again.flows
        cols = ["src", "dst", "size_bytes", "start_ps"]
        assert g.select(cols).equals(f.select(cols)), source
        assert g.column("tag").to_pylist() == f.column("workload").to_pylist()
        assert set(g.column("workload").to_pylist()) == {"replay"}


def test_workload_errors_are_scenario_errors(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("src,dst,size,start\n0,1,1MB,0us\n0,1,1MB,soon\n")
    cases = [
        ({"kind": "poisson", "cdf": "websurch", "load": 0.5, "count": 10}, "workload.0.cdf", "websearch"),
        (
            {"kind": "collective", "op": "all_gather", "algorithm": "tree", "size": "1MB"},
            "workload.0.algorithm",
            "ring",
        ),
        ({"kind": "replay", "file": str(bad)}, "workload.0.file", "line 3, column start"),
    ]
    for workload, path, fragment in cases:
        with pytest.raises(fabricemu.ScenarioError) as e:
            fabricemu.Scenario.from_dict({"topology": FABRIC, "workload": [workload]})
        assert e.value.path == path
        assert fragment in e.value.message


def test_cli_summary_prints_slowdown_by_size_load_and_collectives(cli, tmp_path):
    scenario = tmp_path / "mix.toml"
    scenario.write_text(
        """\
name = "mix"
[topology]
kind = "fat_tree"
k = 4
[[workload]]
name = "bg"
kind = "poisson"
cdf = "websearch"
load = 0.3
duration = "300us"
[[workload]]
name = "allreduce"
kind = "collective"
op = "all_reduce"
algorithm = "tree"
hosts = [0, 5, 10, 15]
size = "2MiB"
iterations = 2
"""
    )
    proc = cli("run", str(scenario), "-o", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "slowdown by flow size (p50 / p95 / p99" in out
    assert "< 10 kB" in out or "10 kB-100 kB" in out
    assert "bg: offered load" in out and "(target 30%;" in out
    assert "allreduce: all_reduce tree, 1 x 4 ranks, 2/2 finished" in out and "busbw" in out
    info = json.loads((tmp_path / "out" / "run.json").read_text())
    assert [w["name"] for w in info["workloads"]] == ["bg", "allreduce"]
    table = read_arrow(tmp_path / "out" / "collectives.arrow")
    assert table.num_rows == 2


@pytest.mark.parametrize(
    "name", ["websearch_load", "allreduce_ring_vs_tree", "moe_all_to_all", "allreduce_hierarchical"]
)
def test_workload_scenarios_validate(cli, name):
    proc = cli("validate", str(SCENARIOS / f"{name}.toml"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok: ")


def test_moe_scenario_runs(cli, tmp_path):
    # The shipped scenario, fewer iterations to keep the test short.
    proc = cli(
        "run",
        str(SCENARIOS / "moe_all_to_all.toml"),
        "-o",
        str(tmp_path / "moe"),
        "--set",
        "workload.0.iterations=2",
        "--set",
        "workload.1.iterations=1",
    )
    assert proc.returncode == 0, proc.stderr
    result = fabricemu.open(tmp_path / "moe")
    rows = result.collectives.to_pylist()
    assert len(rows) == 4 * 2 + 8 * 1
    assert all(r["finish_ps"] is not None for r in rows)
    a2a = [r for r in rows if r["workload"] == "moe-a2a"]
    assert {r["op"] for r in a2a} == {"all_to_all"}
    # Strided groups: rank i of group g on host g + 4i.
    assert sorted(r["hosts"] for r in a2a if r["iteration"] == 0)[1] == [1 + 4 * i for i in range(16)]
