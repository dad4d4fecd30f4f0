"""fabricemu.sweep: local process pool and a real Dask LocalCluster, failed points, resuming."""

from __future__ import annotations

import concurrent.futures as cf
import importlib
import json
import multiprocessing
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, Dict, List

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import fabricemu
from fabricemu.analysis import METRICS_SCHEMA, WALL_CLOCK_METRICS
from fabricemu.metrics import JOB_KEYS, STEP_KEYS
from fabricemu.results import SYNTHETIC_KEYS
from fabricemu.sweep import PointDone, deterministic_columns, expand, open_sweep, parameters, point_name

# fabricemu.sweep is the function; the module is fabricemu.sweep in sys.modules.
sweep_module = importlib.import_module("fabricemu.sweep")

# A small fat tree under a permutation: the seed picks the permutation, so seeds give different rows.
BASE: Dict[str, Any] = {
    "name": "perm",
    "topology": {"kind": "fat_tree", "k": 4},
    "workload": [{"kind": "permutation", "size": "64KiB"}],
}
GRID = {"workload.0.size": ["16KiB", "64KiB", "256KiB"]}
SEEDS = [1, 2]


def statuses(events: List[PointDone]) -> Dict[str, int]:
    out: Dict[str, int] = {}
    for e in events:
        out[e.status] = out.get(e.status, 0) + 1
    return out


def test_dask_local_cluster_and_local_pool_give_identical_tables(tmp_path: Path):
    distributed = pytest.importorskip("dask.distributed")
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        on_dask = fabricemu.sweep(
            BASE, GRID, seeds=SEEDS, executor=client.get_executor(), out=tmp_path / "dask"
        )
        workers = client.run(os.getpid)
    local = fabricemu.sweep(BASE, GRID, seeds=SEEDS, out=tmp_path / "local")
    assert len(set(workers.values())) == 2, "two worker processes"

    assert on_dask.num_rows == local.num_rows == 6
    keep = deterministic_columns(local)
    assert set(local.column_names) - set(keep) == set(WALL_CLOCK_METRICS)
    assert on_dask.select(keep).equals(local.select(keep))
    assert on_dask.schema.metadata == local.schema.metadata
    # The identity means something: the points differ from each other, and every run ran.
    assert local.column("error").null_count == 6
    assert len(set(local.column("slowdown_p99").to_pylist())) == 6
    assert local.column("seed").to_pylist() == [1, 2, 1, 2, 1, 2]
    assert local.column("workload.0.size").to_pylist() == [
        "16KiB",
        "16KiB",
        "64KiB",
        "64KiB",
        "256KiB",
        "256KiB",
    ]
    for out in (tmp_path / "dask", tmp_path / "local"):
        for run in local.column("run").to_pylist():
            info = json.loads((out / run / "run.json").read_text())
            assert info["interrupted"] is False
        assert open_sweep(out).select(keep).equals(local.select(keep))
    # Each row is the run's own metrics.
    first = fabricemu.open(tmp_path / "local" / local.column("run")[0].as_py())
    assert first.metrics()["slowdown_p99"] == local.column("slowdown_p99")[0].as_py()
    assert first.run_info["seed"] == 1
    assert first.run_info["scenario"]["workload"][0]["size"] == "16KiB"


def test_invalid_point_is_reported_and_a_rerun_runs_nothing(tmp_path: Path):
    grid = {"workload.0.size": ["16KiB", "-1MB", "64KiB"]}
    events: List[PointDone] = []
    table = fabricemu.sweep(BASE, grid, seeds=[1, 2], out=tmp_path, progress=events.append, jobs=2)
    assert table.num_rows == 6
    errors = table.column("error").to_pylist()
    assert [e is None for e in errors] == [True, True, False, False, True, True]
    assert "workload.0.size" in errors[2] and "-1MB" not in table.column("run").to_pylist()
    assert table.column("run").to_pylist()[2:4] == [None, None]
    assert table.column("slowdown_p99").to_pylist()[2:4] == [None, None]
    assert table.column("seed").to_pylist()[2:4] == [1, 2], "the failed row still names its seed"
    ok = table.filter(pc.is_null(table.column("error")))
    for f in METRICS_SCHEMA:
        # Null without the feature they measure: synthetic workloads, step workloads (with
        # on_failure), trimming.
        if f.name in (*SYNTHETIC_KEYS, *STEP_KEYS, *JOB_KEYS, "trimmed_packets"):
            assert ok.column(f.name).null_count == ok.num_rows, f.name
        elif f.name not in ("ecn_marks", "cnps"):
            assert ok.column(f.name).null_count == 0, f.name
    assert statuses(events) == {"ran": 4, "failed": 2}
    assert sorted(e.done for e in events) == [1, 2, 3, 4, 5, 6]
    assert {e.total for e in events} == {6}
    # The README's names work: parameters (= params), metrics and error (the row's entries).
    for e in events:
        assert e.parameters == e.params and e.params["seed"] == e.row["seed"]
        assert e.metrics == e.row["metrics"] and e.error == e.row["error"]
        assert (e.metrics is None) == (e.status == "failed") == (e.error is not None)
    ran = next(e for e in events if e.status == "ran")
    row = table.to_pylist()[ran.index]
    assert ran.metrics["slowdown_p99"] == row["slowdown_p99"]

    run_json = [tmp_path / r / "run.json" for r in ok.column("run").to_pylist()]
    before = [p.stat().st_mtime_ns for p in run_json]
    again: List[PointDone] = []
    table2 = fabricemu.sweep(BASE, grid, seeds=[1, 2], out=tmp_path, progress=again.append)
    assert statuses(again) == {"reused": 4, "failed": 2}, "nothing new ran"
    assert [p.stat().st_mtime_ns for p in run_json] == before
    assert table2.equals(table), "the same table, wall-clock columns included (read back from run.json)"


def test_resume_runs_interrupted_missing_and_changed_points_again(tmp_path: Path):
    table = fabricemu.sweep(BASE, GRID, seeds=[1], out=tmp_path)
    runs = [tmp_path / r for r in table.column("run").to_pylist()]
    info = json.loads((runs[0] / "run.json").read_text())
    info["interrupted"] = True
    (runs[0] / "run.json").write_text(json.dumps(info))
    (runs[1] / "run.json").unlink()
    (runs[1] / "stale.arrow").write_bytes(b"left over by an older run")
    events: List[PointDone] = []
    fabricemu.sweep(BASE, GRID, seeds=[1], out=tmp_path, progress=events.append)
    assert {e.index: e.status for e in events} == {0: "ran", 1: "ran", 2: "reused"}
    assert not (runs[1] / "stale.arrow").exists(), "an incomplete run's folder is cleared before running"
    # Another base scenario: the folders hold runs of a different scenario, so everything runs.
    events.clear()
    changed = {**BASE, "switch": {"buffer": "16MiB"}}
    fabricemu.sweep(changed, GRID, seeds=[1], out=tmp_path, progress=events.append)
    assert statuses(events) == {"ran": 3}
    events.clear()
    fabricemu.sweep(changed, GRID, seeds=[1], out=tmp_path, progress=events.append, resume=False)
    assert statuses(events) == {"ran": 3}


def test_an_interrupt_while_the_table_is_written_still_leaves_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # Every point ran; SIGTERM (or Ctrl-C) comes as sweep.arrow is being written: the table is
    # written whole before the interrupt goes on, not left half-written or missing.
    real = sweep_module._write_once
    calls: List[Path] = []

    def interrupted_once(path: Path, table: pa.Table) -> pa.Table:
        calls.append(path)
        if len(calls) == 1:
            raise fabricemu.Terminated("terminated by signal 15 (SIGTERM)")
        return real(path, table)

    monkeypatch.setattr(sweep_module, "_write_once", interrupted_once)
    with pytest.raises(fabricemu.Terminated):
        fabricemu.sweep(BASE, GRID, seeds=[1], out=tmp_path, jobs=1)
    assert len(calls) == 2
    table = open_sweep(tmp_path)
    assert table.num_rows == 3
    assert table.column("error").null_count == 3, "every point ran"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_an_interrupt_while_the_workers_wind_down_still_leaves_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # Every point ran; SIGTERM comes while the pool waits for its idle workers to exit (the last
    # wait of a sweep): the table of the points done is written before the interrupt goes on.
    waits: List[bool] = []

    class Pool(cf.ProcessPoolExecutor):
        def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
            super().shutdown(wait=wait, cancel_futures=cancel_futures)
            if wait and not waits:
                waits.append(wait)
                raise fabricemu.Terminated("terminated by signal 15 (SIGTERM)")

    def pool(workers: int) -> Pool:
        return Pool(max_workers=workers, initializer=sweep_module._init_worker, initargs=(os.getpid(),))

    monkeypatch.setattr(sweep_module, "_local_pool", pool)
    with pytest.raises(fabricemu.Terminated):
        fabricemu.sweep(BASE, GRID, seeds=[1], out=tmp_path, jobs=2)
    assert waits == [True]
    table = open_sweep(tmp_path)
    assert table.num_rows == 3
    assert table.column("error").null_count == 3, "every point ran"


def test_explicit_points_parameter_columns_and_metadata(tmp_path: Path):
    points = [
        {"workload.0.size": "16KiB", "topology.k": 4},
        {"workload.0.size": 65536, "seed": 7},
        {"topology.k": 6},
    ]
    table = fabricemu.sweep(BASE, points, out=tmp_path)
    assert parameters(table) == ["workload.0.size", "topology.k", "seed"]
    assert table.column_names[:4] == ["workload.0.size", "topology.k", "seed", "run"]
    # Mixed types become strings; missing values are null; the seed is always there.
    assert table.schema.field("workload.0.size").type == pa.string()
    assert table.column("workload.0.size").to_pylist() == ["16KiB", "65536", None]
    assert table.column("topology.k").to_pylist() == [4, None, 4 + 2]
    assert table.column("seed").to_pylist() == [1, 7, 1]
    assert table.column("flows").to_pylist() == [16, 16, 54]
    assert table.column("error").null_count == 3
    base = sweep_module.base_scenario(table)
    assert base == fabricemu.Scenario.from_dict(BASE)
    assert table.schema.metadata[b"fabricemu.version"] == fabricemu.__version__.encode()
    with pytest.raises(ValueError, match="seeds= is given too"):
        fabricemu.sweep(BASE, points, seeds=[1, 2])
    with pytest.raises(ValueError, match="no points"):
        fabricemu.sweep(BASE, [])


def test_expand_and_point_names():
    assert expand({"a.x": [1, 2], "b": ["p", "q"]}) == [
        {"a.x": 1, "b": "p"},
        {"a.x": 1, "b": "q"},
        {"a.x": 2, "b": "p"},
        {"a.x": 2, "b": "q"},
    ]
    assert expand(None, seeds=[3]) == [{"seed": 3}]
    with pytest.raises(TypeError, match="list of values"):
        expand({"topology.k": 4})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="empty"):
        expand({"topology.k": []})
    assert point_name({"routing.load_balancing": "spray", "workload.0.load": 0.5, "seed": 1}) == (
        "load_balancing=spray,load=0.5,seed=1"
    )
    # Two keys ending alike keep their whole path; awkward characters add a hash.
    assert point_name({"workload.0.size": "1MB", "workload.1.size": "2MB"}) == (
        "workload.0.size=1MB,workload.1.size=2MB"
    )
    odd = point_name({"workload.0.senders": [1, 2]})
    assert odd.startswith("senders=_1_2_-") and len(odd) == len("senders=_1_2_-") + 8
    assert point_name({"workload.0.senders": [1, 3]}) != odd
    assert point_name({}) == "base"
    long = point_name({f"k{i}": "x" * 20 for i in range(10)})
    assert len(long) <= 120
    names = sweep_module._unique_names([{"a": "1"}, {"a": 1}])
    assert names[0] != names[1], "a string and a number never share a folder"


def test_without_out_runs_in_a_temporary_folder():
    table = fabricemu.sweep(BASE, {"workload.0.size": ["16KiB"]}, jobs=1)
    assert table.column("run").to_pylist() == [None]
    assert table.column("error").to_pylist() == [None]
    assert table.column("flows_finished").to_pylist() == [16]


def test_a_failure_inside_the_worker_is_the_points_error(tmp_path: Path):
    # The run folder of the 64KiB point cannot be created: a file is in the way.
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "size=64KiB").write_text("not a folder")
    table = fabricemu.sweep(BASE, {"workload.0.size": ["16KiB", "64KiB"]}, out=tmp_path)
    errors = table.column("error").to_pylist()
    assert errors[0] is None
    assert errors[1] is not None and (
        "FileExistsError" in errors[1] or "NotADirectoryError" in errors[1] or "OSError" in errors[1]
    )


def test_any_executor_and_jobs_limits_points_in_flight(tmp_path: Path):
    lock = threading.Lock()
    running = [0]
    peak = [0]

    class Counting(cf.ThreadPoolExecutor):
        def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def,override]
            def wrapped() -> Any:
                with lock:
                    running[0] += 1
                    peak[0] = max(peak[0], running[0])
                try:
                    return fn(*args, **kwargs)
                finally:
                    with lock:
                        running[0] -= 1

            return super().submit(wrapped)

    with Counting(max_workers=4) as pool:
        table = fabricemu.sweep(BASE, GRID, seeds=SEEDS, executor=pool, jobs=2, out=tmp_path)
    assert table.column("error").null_count == 6
    assert peak[0] == 2
    local = fabricemu.sweep(BASE, GRID, seeds=SEEDS, out=tmp_path / "again", jobs=2)
    keep = deterministic_columns(local)
    assert local.select(keep).equals(table.select(keep))


def test_ctrl_c_writes_the_points_done_and_a_rerun_finishes(tmp_path: Path):
    seen: List[PointDone] = []

    def interrupt(event: PointDone) -> None:
        seen.append(event)
        if len(seen) == 2:
            raise KeyboardInterrupt

    grid = {"workload.0.size": ["16KiB", "32KiB", "4MB", "8MB"]}
    with pytest.raises(KeyboardInterrupt):
        fabricemu.sweep(BASE, grid, out=tmp_path, progress=interrupt, jobs=1)
    partial = open_sweep(tmp_path)
    assert partial.num_rows == 4
    done = [e.index for e in seen]
    for i, error in enumerate(partial.column("error").to_pylist()):
        assert (error is None) == (i in done), (i, error)
    assert partial.column("error").to_pylist().count("interrupted") == 4 - len(done)
    events: List[PointDone] = []
    fabricemu.sweep(BASE, grid, out=tmp_path, progress=events.append)
    counts = statuses(events)
    # The two points done are reused; the others run (unless one finished before it was stopped).
    assert counts.get("reused", 0) >= 2 and counts.get("ran", 0) >= 1, counts
    assert counts["reused"] + counts["ran"] == 4
    assert open_sweep(tmp_path).column("error").null_count == 4


def crash_on_32k(scenario: Dict[str, Any], out: str) -> Dict[str, Any]:
    """A worker function that kills its process for one point (as an out-of-memory kill would)."""
    if scenario["workload"][0]["size"] == "32KiB":
        os._exit(9)
    return sweep_module._real_run_point(scenario, out)  # type: ignore[attr-defined,no-any-return]


@pytest.mark.skipif(multiprocessing.get_start_method() != "fork", reason="patches the worker through fork")
def test_a_dying_worker_fails_only_its_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(sweep_module, "_real_run_point", sweep_module.run_point, raising=False)
    monkeypatch.setattr(sweep_module, "run_point", crash_on_32k)
    grid = {"workload.0.size": ["16KiB", "32KiB", "64KiB", "128KiB"]}
    table = fabricemu.sweep(BASE, grid, out=tmp_path, jobs=2)
    errors = table.column("error").to_pylist()
    assert errors[1] is not None and "died" in errors[1]
    assert [e is None for i, e in enumerate(errors) if i != 1] == [True, True, True]


def stuck_on_32k(scenario: Dict[str, Any], out: str) -> Dict[str, Any]:
    """A worker function that, for one point, ignores SIGTERM and blocks (as a worker stuck in
    native code does: its Python signal handler never runs)."""
    if scenario["workload"][0]["size"] == "32KiB":
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).with_suffix(".pid").write_text(str(os.getpid()))
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(120)
    return sweep_module._real_run_point(scenario, out)  # type: ignore[attr-defined,no-any-return]


@pytest.mark.skipif(multiprocessing.get_start_method() != "fork", reason="patches the worker through fork")
def test_a_stopped_sweep_kills_a_worker_that_ignores_sigterm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(sweep_module, "_real_run_point", sweep_module.run_point, raising=False)
    monkeypatch.setattr(sweep_module, "run_point", stuck_on_32k)
    monkeypatch.setattr(sweep_module, "WORKER_STOP_GRACE", 0.5)
    pid_file = tmp_path / "runs" / f"{point_name({'workload.0.size': '32KiB'})}.pid"

    def stop_once_stuck(event: PointDone) -> None:
        while not pid_file.exists():
            time.sleep(0.01)
        raise ValueError("stop here")

    with pytest.raises(ValueError, match="stop here"):
        fabricemu.sweep(
            BASE, {"workload.0.size": ["16KiB", "32KiB"]}, out=tmp_path, progress=stop_once_stuck, jobs=2
        )
    stuck = int(pid_file.read_text())
    # Killed, and reaped by the pool's manager thread (left alone it would sleep for two minutes).
    for _ in range(1000):
        if not Path(f"/proc/{stuck}").exists():
            break
        time.sleep(0.01)
    assert not Path(f"/proc/{stuck}").exists(), "the stuck worker outlived the sweep"
    assert open_sweep(tmp_path).column("error").to_pylist() == [None, "interrupted"]


def test_open_on_a_sweep_folder_points_to_open_sweep(tmp_path: Path):
    fabricemu.sweep(BASE, {"workload.0.size": ["16KiB"]}, out=tmp_path)
    with pytest.raises(FileNotFoundError, match="open_sweep"):
        fabricemu.open(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"sweep\.arrow"):
        open_sweep(tmp_path / "runs")
    assert open_sweep(tmp_path / "sweep.arrow").num_rows == 1


def test_an_exception_from_the_executor_is_the_points_error(tmp_path: Path):
    class Flaky(cf.ThreadPoolExecutor):
        def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def,override]
            if args[0]["workload"][0]["size"] == "64KiB":
                future: cf.Future[Any] = cf.Future()
                future.set_exception(RuntimeError("lost the worker"))
                return future
            return super().submit(fn, *args, **kwargs)

    with Flaky(max_workers=2) as pool:
        table = fabricemu.sweep(BASE, GRID, executor=pool, out=tmp_path)
    assert table.column("error").to_pylist() == [None, "RuntimeError: lost the worker", None]


def test_an_exception_from_progress_stops_the_sweep(tmp_path: Path):
    def fail(event: PointDone) -> None:
        raise ValueError("stop here")

    with pytest.raises(ValueError, match="stop here"):
        fabricemu.sweep(
            BASE, {"workload.0.size": ["16KiB", "32KiB", "4MB", "8MB"]}, out=tmp_path, progress=fail, jobs=1
        )
    assert open_sweep(tmp_path).column("error").to_pylist()[0] is None
