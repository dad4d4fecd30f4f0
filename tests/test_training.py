"""``kind = "training"`` and ``kind = "inference"`` from Python (issue 14 items 2, 3 and 6): Scenario
dicts of both kinds run, and their steps.arrow / ops.arrow / summary keys hold what the generators
promise (docs/training.md). Each shipped scenario of theirs runs in a few seconds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import fabricemu
from fabricemu import Scenario, ScenarioError

ROOT = Path(__file__).resolve().parent.parent
BASE = {
    "seed": 1,
    "topology": {
        "kind": "leaf_spine",
        "leaves": 1,
        "spines": 1,
        "hosts_per_leaf": 8,
        "link_rate": "100Gbps",
        "link_delay": "500ns",
    },
}


def training(**keys: object) -> Scenario:
    w = {"kind": "training", "layers": 4, "hidden": 16, "seq_len": 16, "forward": "100us", **keys}
    return Scenario.from_dict({**BASE, "workload": [w]})


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_pipeline_bubble_from_python(schedule: str) -> None:
    # Source: GPipe / 1F1B bubble (p-1)/(m+p-1) with negligible communication; within 2 %.
    r = fabricemu.run(training(pp=4, micro_batches=4, schedule=schedule))
    s = r.summary()
    assert s["iterations"] == 1
    assert s["bubble_fraction"] == pytest.approx(3 / 7, abs=0.02)
    assert s["iteration_time_mean_us"] == pytest.approx(7 * 300, rel=0.02)
    steps = r.steps
    assert steps.num_rows == 1
    ops = r.ops
    assert set(ops.column("phase").to_pylist()) == {"forward", "backward", "pp"}
    # 4 stages x 4 micro-batches x (forward + backward), two blocks per layer, one layer per stage.
    computes = [k for k in ops.column("kind").to_pylist() if k == "compute"]
    assert len(computes) == 4 * 4 * 2 * 2


def test_dp_and_tp_communication_from_python() -> None:
    r = fabricemu.run(training(dp=2, tp=2, pp=2, micro_batches=2, iterations=2, dp_bucket="1KiB"))
    ops = r.ops.to_pylist()  # one row per op and rank
    tp = {(o["iteration"], o["op"]) for o in ops if o["phase"] == "tp"}
    # 4 all-reduces per layer and micro-batch: 2 layers per stage, 2 micro-batches, 2 stages x
    # 2 replicas, 2 iterations.
    assert len(tp) == 4 * 2 * 2 * 4 * 2
    assert all(o["collective_op"] == "all_reduce" for o in ops if o["phase"] == "tp")
    assert {o["phase"] for o in ops} == {"forward", "backward", "tp", "pp", "dp"}
    assert r.summary()["iterations"] == 2


def test_training_errors_name_their_keys() -> None:
    with pytest.raises(ScenarioError, match=r"workload\.0\.dp.*ranks, but the fabric has 8"):
        training(dp=4, tp=4)
    with pytest.raises(ScenarioError, match=r"workload\.0\.layers"):
        training(pp=3)
    with pytest.raises(ScenarioError, match=r"workload\.0\.schedule"):
        training(schedule="zero_bubble")


def inference(**keys: object) -> Scenario:
    w = {
        "kind": "inference",
        "tp": 4,
        "pp": 2,
        "layers": 4,
        "hidden": 1024,
        "token_time": "100ns",
        "rate": 20000.0,
        "requests": 8,
        "prompt_tokens": 64,
        "decode_steps": 8,
        "max_batch": 4,
        **keys,
    }
    return Scenario.from_dict({**BASE, "workload": [w]})


def test_inference_steps_from_python() -> None:
    r = fabricemu.run(inference())
    steps = r.steps
    # 8 requests in batches of up to 4, each a prefill and 8 decode steps.
    assert steps.num_rows >= 2 * 9
    s = r.summary()
    assert s["iterations"] == steps.num_rows
    assert s["iteration_time_p99_us"] >= s["iteration_time_p50_us"] > 0
    assert set(r.ops.column("phase").to_pylist()) == {"forward", "tp", "pp"}


def test_inference_errors_name_their_keys() -> None:
    with pytest.raises(ScenarioError, match=r"workload\.0\.requests"):
        inference(requests=None)
    with pytest.raises(ScenarioError, match=r"workload\.0\.interval"):
        inference(arrivals="fixed", rate=None)


@pytest.mark.parametrize(
    "name", ["gpt_training", "moe_training", "inference_decode", "inference_decode_incast"]
)
def test_shipped_scenarios_run(name: str, tmp_path: Path) -> None:
    r = fabricemu.run(Scenario.load(ROOT / "scenarios" / f"{name}.toml"), out=tmp_path / name)
    s = r.summary()
    assert s["iterations"] >= 1
    assert (tmp_path / name / "steps.arrow").is_file()
    assert (tmp_path / name / "ops.arrow").is_file()
    if name == "moe_training":
        assert "ep" in set(r.ops.column("phase").to_pylist())


def test_background_incast_lengthens_the_decode_tail(tmp_path: Path) -> None:
    quiet = fabricemu.run(Scenario.load(ROOT / "scenarios" / "inference_decode.toml"))
    loud = fabricemu.run(Scenario.load(ROOT / "scenarios" / "inference_decode_incast.toml"))
    q, n = quiet.summary(), loud.summary()
    assert q["iterations"] == n["iterations"]
    # Deterministic for the seed: P99 +22 %, mean +18 %, P50 +11 % (decode steps queue behind it).
    assert n["iteration_time_p99_us"] > 1.1 * q["iteration_time_p99_us"]
    assert n["iteration_time_mean_us"] > 1.1 * q["iteration_time_mean_us"]


def test_cli_validate_describes_the_step_workloads(cli) -> None:  # type: ignore[no-untyped-def]
    proc = cli("validate", str(ROOT / "scenarios" / "gpt_training.toml"))
    assert proc.returncode == 0, proc.stderr
    # Network-free: 7 x (f + b) with f the FLOPs-derived forward of one layer (7.6 us).
    assert "gpt (training) dp 8 x tp 8 x pp 4, 1f1b, 4 micro-batches" in proc.stdout
    assert "network-free iteration 159.6 us" in proc.stdout
