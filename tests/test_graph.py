"""Step graphs from Python: the StepGraph builder, its JSON file, Chakra traces, result.ops and
result.steps, the step summary keys, sweeps over noise, and the report's timeline."""

from __future__ import annotations

import json
from typing import Any, Dict, List

import pyarrow.compute as pc
import pytest

import fabricemu
from fabricemu.graph import StepGraph, from_chakra_json
from fabricemu.metrics import METRICS_SCHEMA, STEP_KEYS

FABRIC = {
    "kind": "leaf_spine",
    "leaves": 1,
    "spines": 1,
    "hosts_per_leaf": 4,
    "link_rate": "100Gbps",
    "link_delay": "500ns",
}


def scenario(workload: Dict[str, Any], **top: Any) -> fabricemu.Scenario:
    data = {"name": "g", "seed": 1, "topology": FABRIC, "workload": [workload], **top}
    return fabricemu.Scenario.from_dict(data)


def sync_step() -> StepGraph:
    """compute (20 us) -> all-reduce (1 MiB) -> compute (10 us) on 4 ranks."""
    g = StepGraph(ranks=[0, 1, 2, 3])
    fwd = [g.compute(r, "20us", phase="forward") for r in range(4)]
    ar = g.collective([0, 1, 2, 3], "all_reduce", "1MiB", deps=fwd, phase="dp", name="grads")
    for r in range(4):
        g.compute(r, 10_000_000, deps=[ar], phase="backward")
    return g


def test_builder_runs_and_exposes_ops_steps_and_summary(tmp_path: Any) -> None:
    g = sync_step()
    result = fabricemu.run(scenario(g.to_workload(iterations=3)), out=tmp_path / "run")
    ops = result.ops
    assert ops.num_rows == 3 * (4 + 4 + 4)
    assert set(ops.column("kind").to_pylist()) == {"compute", "collective"}
    grads = ops.filter(pc.equal(ops.column("name"), "grads"))
    assert grads.num_rows == 3 * 4
    assert set(grads.column("collective_op").to_pylist()) == {"all_reduce"}
    # Every rank of one collective starts and ends it together, 20 us into its iteration.
    first = grads.filter(pc.equal(grads.column("iteration"), 0))
    assert set(first.column("start_ps").to_pylist()) == {20_000_000}
    assert len(set(first.column("end_ps").to_pylist())) == 1
    steps = result.steps
    assert steps.num_rows == 3
    time = steps.column("time_ps").to_pylist()
    assert len(set(time)) == 1, "one leaf: every iteration meets the same network"
    ar = first.column("end_ps")[0].as_py() - 20_000_000
    assert time[0] == 30_000_000 + ar
    s = result.summary()
    assert s["iterations"] == 3
    assert s["iteration_time_mean_us"] == pytest.approx(time[0] / 1e6)
    assert s["iteration_time_p99_us"] == pytest.approx(time[0] / 1e6)
    assert s["exposed_comm_fraction"] == pytest.approx(ar / time[0])
    assert s["bubble_fraction"] == pytest.approx(0.0)
    assert s["compute_fraction"] + s["exposed_comm_fraction"] + s["bubble_fraction"] == pytest.approx(1.0)
    assert set(STEP_KEYS) <= set(METRICS_SCHEMA.names)
    assert {k: result.metrics()[k] for k in STEP_KEYS} == {k: s[k] for k in STEP_KEYS}


def test_runs_without_steps_keep_their_summary_keys(tmp_path: Any) -> None:
    w = {"kind": "flows", "flows": [{"src": 0, "dst": 1, "size": "64KiB"}]}
    result = fabricemu.run(scenario(w), out=tmp_path / "run")
    s = result.summary()
    assert not set(STEP_KEYS) & set(s)
    assert all(result.metrics()[k] is None for k in STEP_KEYS)
    with pytest.raises(fabricemu.MissingTableError):
        result.ops  # noqa: B018


def test_saved_json_file_runs_the_same_graph(tmp_path: Any) -> None:
    g = sync_step()
    path = g.save(tmp_path / "step.json")
    assert StepGraph.load(path).to_dict() == g.to_dict()
    inline = fabricemu.run(scenario(g.to_workload()), out=tmp_path / "a")
    from_file = fabricemu.run(scenario({"kind": "graph", "file": str(path)}), out=tmp_path / "b")
    cols = ["op", "rank", "node", "kind", "phase", "start_ps", "end_ps"]
    assert inline.ops.select(cols).equals(from_file.ops.select(cols))


def test_straggler_noise_lengthens_the_step_and_sweeps_report_it(tmp_path: Any) -> None:
    g = sync_step()
    base = scenario(g.to_workload(noise={"slow_ranks": {"2": 1.0}}))
    table = fabricemu.sweep(
        base,
        grid={"workload.0.noise.slow_ranks": [{"2": 1.0}, {"2": 1.5}]},
        jobs=1,
        out=tmp_path / "sweep",
    )
    assert table.column("error").null_count == table.num_rows
    t = table.column("iteration_time_mean_us").to_pylist()
    # Rank 2 computes 1.5x: +10 us before the all-reduce and +5 us after.
    assert t[1] - t[0] == pytest.approx(15.0, abs=1e-6)


def test_graph_errors_name_the_key() -> None:
    g = StepGraph()
    a = g.compute(0, "1us")
    g.compute(1, "1us", deps=[a])
    w = g.to_workload()
    w["ops"][0]["deps"] = [1]
    with pytest.raises(fabricemu.ScenarioError, match=r"workload\.0\.ops\.0\.deps.*dependency cycle"):
        scenario(w)
    with pytest.raises(ValueError, match="not an op of this graph"):
        g.compute(0, "1us", deps=[7])
    with pytest.raises(ValueError, match="either a duration or flops"):
        g.compute(0)


def chakra_node(nid: int, kind: str, deps: List[int], **attrs: Any) -> Dict[str, Any]:
    node: Dict[str, Any] = {"id": str(nid), "name": f"n{nid}", "type": kind}
    node["dataDeps"] = [str(d) for d in deps]
    if "dur" in attrs:
        node["durationMicros"] = str(attrs.pop("dur"))
    node["attr"] = [{"name": k, "int64Val": str(v)} for k, v in attrs.items()]
    return node


def test_chakra_json_maps_onto_a_step_graph(tmp_path: Any) -> None:
    # Rank 0: compute 5 us, send 64 KiB to rank 1, then an all-reduce of all ranks.
    # Rank 1: compute 30 us, receive from rank 0, all-reduce; rank 2: all-reduce only.
    traces = [
        {
            "nodes": [
                chakra_node(1, "COMP_NODE", [], dur=5),
                chakra_node(2, "COMM_SEND_NODE", [1], comm_dst=1, comm_tag=7, comm_size=65536),
                chakra_node(3, "COMM_COLL_NODE", [2], comm_type=0, comm_size=1 << 20),
            ]
        },
        {
            "nodes": [
                chakra_node(10, "COMP_NODE", [], dur=30),
                chakra_node(11, "COMM_RECV_NODE", [10], comm_src=0, comm_tag=7, comm_size=65536),
                chakra_node(12, "COMM_COLL_NODE", [11], comm_type=0, comm_size=1 << 20),
            ]
        },
        {"nodes": [chakra_node(5, "COMM_COLL_NODE", [], comm_type="ALL_REDUCE", comm_size=1 << 20)]},
    ]
    files = []
    for r, t in enumerate(traces):
        p = tmp_path / f"trace.{r}.json"
        p.write_text(json.dumps(t))
        files.append(p)
    g = from_chakra_json(files)
    kinds = [o["kind"] for o in g.ops]
    assert kinds.count("send") == 1 and kinds.count("collective") == 1 and kinds.count("compute") == 2
    send = next(o for o in g.ops if o["kind"] == "send")
    assert (send["src"], send["dst"], send["size"]) == (0, 1, 65536)
    # The send waits for both sides' deps: compute on rank 0 (5 us) and on rank 1 (30 us).
    assert sorted(g.ops[d]["rank"] for d in send["deps"]) == [0, 1]
    coll = next(o for o in g.ops if o["kind"] == "collective")
    assert g.groups[coll["group"]] == [0, 1, 2]
    result = fabricemu.run(scenario(g.to_workload()), out=tmp_path / "run")
    ops = result.ops
    sends = ops.filter(pc.equal(ops.column("kind"), "send"))
    assert set(sends.column("start_ps").to_pylist()) == {30_000_000}
    colls = ops.filter(pc.equal(ops.column("kind"), "collective"))
    assert colls.num_rows == 3
    assert set(colls.column("start_ps").to_pylist()) == set(sends.column("end_ps").to_pylist())


def test_report_has_the_step_timeline(tmp_path: Any) -> None:
    pytest.importorskip("matplotlib")
    from fabricemu.report import report_html

    g = sync_step()
    fabricemu.run(scenario(g.to_workload(iterations=2)), out=tmp_path / "run")
    page = report_html(tmp_path / "run")
    assert "Step timeline" in page
    assert "Per-rank timeline of iteration" in page
