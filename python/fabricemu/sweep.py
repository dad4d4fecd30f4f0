"""Parameter sweeps: many runs of one scenario with some values changed, on local cores or a cluster.

>>> import fabricemu
>>> table = fabricemu.sweep(                                    # doctest: +SKIP
...     "scenarios/permutation.toml",
...     grid={"topology.k": [4, 8], "workload.0.size": ["64KiB", "1MB"]},
...     seeds=[1, 2, 3],
...     out="sweeps/perm",
... )
>>> table.select(["topology.k", "workload.0.size", "seed", "slowdown_p99"])  # doctest: +SKIP

Each point runs in its own process: a ``concurrent.futures.ProcessPoolExecutor`` with one worker per
core by default, or any ``concurrent.futures.Executor`` passed as ``executor=`` -- for a Dask cluster,
``dask.distributed.Client(address).get_executor()`` (the output folder must then be on a file system
the workers share). The function the workers run, :func:`run_point`, takes and returns plain data.

The local pool starts its workers the platform's default way (``fork`` on Linux up to Python 3.13;
``spawn`` on macOS and Windows, ``forkserver`` on Linux from 3.14): with the last two, a script that
sweeps must do so under ``if __name__ == "__main__":``, as for any ``multiprocessing`` program.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import functools
import hashlib
import itertools
import json
import multiprocessing.connection as mp_connection
import os
import queue
import re
import signal
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import pyarrow as pa

from ._core import __version__
from ._outdir import OutputFolder, sigterm_as_interrupt
from ._run import no_shadow_alongside
from .errors import MissingTableError, ScenarioError
from .metrics import (
    JOB_KEYS,
    METRICS_SCHEMA,
    STEP_KEYS,
    SYNTHETIC_KEYS,
    WALL_CLOCK_METRICS,
    _as_table,
    _key_types,
    _keys_list,
    _table,
    run_metrics,
)
from .results import Result, open_result, run
from .scenario import PathLike, Scenario, as_scenario

__all__ = [
    "SWEEP_FILE",
    "PointDone",
    "base_scenario",
    "compare",
    "deterministic_columns",
    "expand",
    "open_sweep",
    "parameters",
    "point_name",
    "run_point",
    "saturation",
    "sweep",
]

#: The table a sweep writes into its output folder.
SWEEP_FILE = "sweep.arrow"
#: Where each run goes, inside the sweep's output folder.
RUNS_DIR = "runs"

META_PARAMETERS = b"fabricemu.sweep.parameters"
META_BASE = b"fabricemu.sweep.base"
META_VERSION = b"fabricemu.version"

Grid = Union[Mapping[str, Sequence[Any]], Sequence[Mapping[str, Any]]]


@dataclass(frozen=True)
class PointDone:
    """What ``progress`` is told each time a point is done.

    Fields: ``index`` (the point's position in the sweep), ``name`` (its folder under ``runs/``),
    ``params`` (its parameters: key path -> value, and ``seed``; also readable as ``parameters``),
    ``status``, ``row``, ``done`` (points finished so far) and ``total``.

    ``status`` is ``"ran"``, ``"reused"`` (its run folder already held a complete run of the same
    scenario), or ``"failed"`` (``error`` says why). ``row`` is ``{"seed": ..., "run": ...,
    "metrics": {...} or None, "error": ... or None}``; ``metrics`` and ``error`` give its two last
    entries directly (``p.metrics["slowdown_p99"]``).
    """

    index: int
    name: str
    params: Dict[str, Any]
    status: str
    row: Dict[str, Any] = field(repr=False)
    done: int
    total: int

    @property
    def parameters(self) -> Dict[str, Any]:
        """The point's parameters (the same as ``params``)."""
        return self.params

    @property
    def metrics(self) -> Optional[Dict[str, Any]]:
        """The run's metrics (the sweep table's metric columns), None if the point failed."""
        return self.row.get("metrics")

    @property
    def error(self) -> Optional[str]:
        """Why the point failed, None if it ran."""
        return self.row.get("error")


# -- points -----------------------------------------------------------------------------------------


def expand(grid: Optional[Grid] = None, seeds: Optional[Sequence[int]] = None) -> List[Dict[str, Any]]:
    """The points of a sweep, in order: the cartesian product of ``grid`` (a mapping of dotted key
    paths to lists of values; the first key varies slowest) or the explicit points (a list of
    mappings), each repeated for every seed of ``seeds`` (innermost). A point's ``seed`` key is
    its seed; without ``seeds`` a point keeps the scenario's seed unless it sets one.

    >>> expand({"topology.k": [4, 8]}, seeds=[1, 2])  # doctest: +NORMALIZE_WHITESPACE
    [{'topology.k': 4, 'seed': 1}, {'topology.k': 4, 'seed': 2},
     {'topology.k': 8, 'seed': 1}, {'topology.k': 8, 'seed': 2}]
    """
    if grid is None:
        base_points: List[Dict[str, Any]] = [{}]
    elif isinstance(grid, Mapping):
        keys = list(grid)
        values = []
        for key in keys:
            v = grid[key]
            if isinstance(v, (str, bytes)) or not isinstance(v, Iterable):
                raise TypeError(f"grid[{key!r}] must be a list of values, not {type(v).__name__}")
            v = list(v)
            if not v:
                raise ValueError(f"grid[{key!r}] is empty")
            values.append(v)
        base_points = [dict(zip(keys, combo)) for combo in itertools.product(*values)]
    else:
        base_points = []
        for i, p in enumerate(grid):
            if not isinstance(p, Mapping):
                raise TypeError(f"point {i} must be a mapping of key paths to values, not {type(p).__name__}")
            base_points.append(dict(p))
    for p in base_points:
        for key in p:
            if not isinstance(key, str) or not key:
                raise TypeError(f"a sweep parameter is a dotted key path, not {key!r}")
    if seeds is None:
        return base_points
    seeds = list(seeds)
    if not seeds:
        raise ValueError("seeds is empty")
    out = []
    for p in base_points:
        if "seed" in p:
            raise ValueError("a point sets 'seed' and seeds= is given too: use one or the other")
        for s in seeds:
            out.append({**p, "seed": s})
    return out


def _render(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)


_SAFE = re.compile(r"[^A-Za-z0-9._+-]+")


def point_name(params: Mapping[str, Any]) -> str:
    """A readable folder name for a point: ``load_balancing=spray,load=0.5,seed=1`` (the last part
    of each key path, or the whole path when two keys share it). Characters that are awkward in
    file names, or a name longer than 120 characters, add a short hash of the parameters so that
    different points never share a folder."""
    keys = list(params)
    lasts = [k.split(".")[-1] for k in keys]
    parts = []
    exact = True
    for key, last in zip(keys, lasts):
        label = last if lasts.count(last) == 1 else key
        text = _render(params[key])
        safe = _SAFE.sub("_", text)
        exact &= safe == text and _SAFE.sub("_", label) == label
        parts.append(f"{_SAFE.sub('_', label)}={safe}")
    name = ",".join(parts) or "base"
    if not exact or len(name) > 120:
        digest = hashlib.sha1(_canonical(params).encode()).hexdigest()[:8]
        name = f"{name[:110]}-{digest}"
    return name


def _canonical(params: Mapping[str, Any]) -> str:
    return json.dumps([[k, params[k]] for k in params], sort_keys=True, default=str)


def _unique_names(points: Sequence[Mapping[str, Any]]) -> List[str]:
    names = [point_name(p) for p in points]
    seen: Dict[str, int] = {}
    for n in names:
        seen[n] = seen.get(n, 0) + 1
    out = []
    for p, n in zip(points, names):
        if seen[n] > 1:
            digest = hashlib.sha1(_canonical(p).encode()).hexdigest()[:8]
            n = f"{n[:110]}-{digest}"
        out.append(n)
    if len(set(out)) != len(out):
        raise ValueError("the sweep has the same point twice")
    return out


# -- the worker -------------------------------------------------------------------------------------


def run_point(
    scenario: Dict[str, Any],
    out: str,
    max_memory: Optional[Union[int, str]] = None,
    max_trace_size: Optional[Union[int, str]] = None,
) -> Dict[str, Any]:
    """Run one point (what each worker process executes; plain data in and out, so any executor,
    including a Dask cluster, can run it).

    ``scenario`` is a scenario dictionary (normalised or as written), ``out`` the run's folder
    (an earlier run there is replaced whole when this one ends). Returns
    ``{"metrics": {...}, "error": None}`` or, when the run fails,
    ``{"metrics": None, "error": "<ExceptionClass>: <message>"}``.
    """
    try:
        with no_shadow_alongside():  # the sweep's other points use the other cores
            result = run(
                Scenario.from_dict(scenario),
                out=out,
                overwrite=True,
                max_memory=max_memory,
                max_trace_size=max_trace_size,
            )
        if result.interrupted:
            return {"metrics": None, "error": "interrupted"}
        return {"metrics": result.metrics(), "error": None}
    except Exception as e:  # the point's row reports it; the sweep goes on
        return {"metrics": None, "error": f"{type(e).__name__}: {e}"}


def _complete_run(path: Path, scenario: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The metrics of the run in ``path`` if it is complete (not interrupted) and of this scenario."""
    try:
        info = json.loads((path / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict) or info.get("interrupted", True) or info.get("scenario") != scenario:
        return None
    try:
        return open_result(path).metrics()
    except (OSError, ValueError, KeyError, pa.ArrowException):
        return None


# -- the sweep --------------------------------------------------------------------------------------


def sweep(
    base: Union[Scenario, PathLike, Mapping[str, Any]],
    grid: Optional[Grid] = None,
    seeds: Optional[Sequence[int]] = None,
    jobs: Optional[int] = None,
    executor: Optional[cf.Executor] = None,
    out: Optional[PathLike] = None,
    *,
    resume: bool = True,
    progress: Optional[Callable[[PointDone], Any]] = None,
    overwrite: bool = False,
    max_memory: Optional[Union[int, str]] = None,
    max_trace_size: Optional[Union[int, str]] = None,
) -> pa.Table:
    """Run ``base`` (a :class:`Scenario`, a TOML path or a dictionary) at every point of ``grid``
    (see :func:`expand`) and every seed of ``seeds``; one row per run.

    Columns: every swept parameter, named by its key path, then ``seed``; ``run`` (the run's folder,
    relative to ``out``: ``runs/<point>``; null without ``out``); the metrics of
    :func:`fabricemu.analysis.metrics` (slowdown p50/p95/p99, goodput, drops, pause time, max queue,
    events/s, ...); and ``error``, null when the point ran, else why it failed (an invalid
    scenario, an engine error, a lost worker). A failed point never stops the others.

    - ``jobs``: the number of worker processes (default: one per core); with ``executor``, the most
      points in flight at once (default: all).
    - ``executor``: any ``concurrent.futures.Executor``, e.g. a Dask client's
      ``client.get_executor()``; it is not shut down.
    - ``out``: the sweep's folder: each run in ``out/runs/<point>/`` and the table in
      ``out/sweep.arrow``. Without it the runs go to a temporary folder removed afterwards.
    - ``resume``: a point whose folder holds a complete run of the same scenario is not run again,
      its row is read from the folder (so re-running an interrupted sweep finishes it). False runs
      every point.
    - ``progress``: called with a :class:`PointDone` as each point finishes.
    - ``overwrite``: use ``out`` even if it is a non-empty folder that holds no sweep (no
      sweep.arrow or runs/); otherwise such a folder is refused. ``out`` is locked while the sweep
      runs (a second sweep on it raises :class:`fabricemu.OutputFolderBusy`), and each point's run
      is written as :func:`fabricemu.run` writes one (moved into ``runs/<point>`` whole when done).
    - ``max_memory``, ``max_trace_size``: each run's resource limits, as in :func:`fabricemu.run`
      (a point over a limit fails with its ScenarioError).

    Ctrl-C, SIGTERM (as :class:`fabricemu.Terminated`) or an exception raised by ``progress``
    cancels the points not started and stops the running ones, writes the table of the points done
    (the others with error "interrupted") and raises it; running the sweep again resumes the sweep.
    A worker whose sweep process is killed outright exits within a second.
    """
    base_scenario = as_scenario(base)
    points = expand(grid, seeds)
    if not points:
        raise ValueError("the sweep has no points")
    if jobs is not None and jobs < 1:
        raise ValueError(f"jobs must be at least 1, not {jobs}")
    names = _unique_names(points)
    param_names = _parameter_names(points)

    tmp: Optional[tempfile.TemporaryDirectory[str]] = None
    if out is None:
        tmp = tempfile.TemporaryDirectory(prefix="fabricemu-sweep-")
        out_dir = Path(tmp.name)
    else:
        out_dir = Path(out)
    lock = (
        OutputFolder(out_dir, overwrite=overwrite, stage=False, markers=(SWEEP_FILE, RUNS_DIR), what="sweep")
        if tmp is None
        else None
    )
    try:
        if lock is not None:
            lock.__enter__()
        out_dir.mkdir(parents=True, exist_ok=True)
        with sigterm_as_interrupt():
            rows = _run_points(
                base_scenario,
                points,
                names,
                out_dir,
                keep_paths=tmp is None,
                jobs=jobs,
                executor=executor,
                resume=resume,
                progress=progress,
                point=(
                    None
                    if max_memory is None and max_trace_size is None
                    else functools.partial(run_point, max_memory=max_memory, max_trace_size=max_trace_size)
                ),
                on_interrupt=lambda rows: (
                    _write(out_dir, rows, points, param_names, base_scenario) if tmp is None else None
                ),
            )
        if tmp is None:
            return _write(out_dir, rows, points, param_names, base_scenario)
        return _build_table(rows, points, param_names, base_scenario)
    finally:
        if lock is not None:
            lock.__exit__(None, None, None)
        if tmp is not None:
            tmp.cleanup()


def _parameter_names(points: Sequence[Mapping[str, Any]]) -> List[str]:
    names: List[str] = []
    for p in points:
        for k in p:
            if k != "seed" and k not in names:
                names.append(k)
    return [*names, "seed"]


def _run_points(
    base: Scenario,
    points: List[Dict[str, Any]],
    names: List[str],
    out_dir: Path,
    *,
    keep_paths: bool,
    jobs: Optional[int],
    executor: Optional[cf.Executor],
    resume: bool,
    progress: Optional[Callable[[PointDone], Any]],
    point: Optional[Callable[..., Dict[str, Any]]] = None,
    on_interrupt: Callable[[List[Optional[Dict[str, Any]]]], Any],
) -> List[Optional[Dict[str, Any]]]:
    total = len(points)
    rows: List[Optional[Dict[str, Any]]] = [None] * total
    scenarios: List[Optional[Dict[str, Any]]] = [None] * total
    seeds: List[Optional[int]] = [None] * total
    done = 0

    def finish(i: int, row: Dict[str, Any], status: str) -> None:
        nonlocal done
        rows[i] = row
        done += 1
        if progress is not None:
            progress(PointDone(i, names[i], dict(points[i]), status, row, done, total))

    def row_of(i: int, result: Dict[str, Any]) -> Dict[str, Any]:
        return {
            "seed": seeds[i],
            "run": f"{RUNS_DIR}/{names[i]}" if keep_paths and result.get("ran", True) else None,
            "metrics": result.get("metrics"),
            "error": result.get("error"),
        }

    # Build and validate every point's scenario here: an invalid point fails at once.
    pending: List[int] = []
    for i, p in enumerate(points):
        try:
            s = base.with_(
                {k: v for k, v in p.items() if k != "seed"}, **({"seed": p["seed"]} if "seed" in p else {})
            )
            scenarios[i] = json.loads(s.to_json())
            seeds[i] = s.seed
        except (ScenarioError, TypeError, ValueError) as e:
            seed = p.get("seed", base.seed)
            seeds[i] = seed if isinstance(seed, int) and not isinstance(seed, bool) else None
            finish(i, row_of(i, {"error": str(e), "ran": False}), "failed")
            continue
        path = out_dir / RUNS_DIR / names[i]
        reused = _complete_run(path, scenarios[i]) if resume else None  # type: ignore[arg-type]
        if reused is not None:
            finish(i, row_of(i, {"metrics": reused}), "reused")
        else:
            pending.append(i)

    if not pending:
        return rows

    def status_of(result: Dict[str, Any]) -> str:
        return "failed" if result.get("error") else "ran"

    own = executor is None
    pool: Optional[cf.Executor] = None
    if own:
        workers = min(jobs or os.cpu_count() or 1, len(pending))
        limit = 2 * workers  # keep every worker busy; the rest wait here, cheap to cancel
    else:
        limit = jobs or len(pending)

    waiting = list(reversed(pending))
    in_flight: Dict[cf.Future[Dict[str, Any]], int] = {}
    completed: queue.SimpleQueue[cf.Future[Dict[str, Any]]] = queue.SimpleQueue()
    lost: List[int] = []
    # From the pool's creation to its shutdown, an interrupt anywhere (waiting for a point, or for
    # the pool to wind down once all are done) stops the workers and saves the table.
    try:
        pool = _local_pool(workers) if own else executor
        assert pool is not None
        while waiting or in_flight:
            while waiting and len(in_flight) < limit:
                i = waiting.pop()
                path = out_dir / RUNS_DIR / names[i]
                try:
                    with _interrupts_to_main_thread():
                        future = pool.submit(point or run_point, _given(scenarios[i]), os.fspath(path))
                        in_flight[future] = i
                        future.add_done_callback(completed.put)
                except (RuntimeError, cf.BrokenExecutor) as e:
                    if own and isinstance(e, cf.BrokenExecutor):
                        lost.append(i)
                        continue
                    finish(
                        i,
                        row_of(i, {"error": f"could not submit the point: {type(e).__name__}: {e}"}),
                        "failed",
                    )
                    continue
            if not in_flight:
                break
            try:
                future = completed.get(timeout=0.25)  # a timeout keeps Ctrl-C responsive
            except queue.Empty:
                continue
            i = in_flight.pop(future)
            try:
                result = future.result()
            except cf.BrokenExecutor:
                if own:
                    lost.append(i)  # a worker died: run again below, alone
                    continue
                result = {"error": "the worker process died (BrokenExecutor)"}
            except cf.CancelledError:
                result = {"error": "cancelled"}
            except Exception as e:  # a lost Dask worker, an unpicklable result, ...
                result = {"error": f"{type(e).__name__}: {e}"}
            if not isinstance(result, dict):
                result = {"error": f"the worker returned {type(result).__name__}, not a dict"}
            finish(i, row_of(i, result), status_of(result))
        # A worker process that died (out of memory, a crash) breaks the whole pool: run the points
        # that were in it again, each alone, so that only the culprit fails.
        for i in lost:
            if own:
                pool.shutdown(wait=True)
            pool = _local_pool(1)
            path = out_dir / RUNS_DIR / names[i]
            with _interrupts_to_main_thread():
                future = pool.submit(point or run_point, _given(scenarios[i]), os.fspath(path))
                in_flight[future] = i
            try:
                result = _result_of(future)
            except cf.BrokenExecutor:
                result = {"error": "the worker process died while running this point"}
            del in_flight[future]
            finish(i, row_of(i, result), status_of(result))
        if own:
            pool.shutdown(wait=True)
    except BaseException:  # Ctrl-C, or an exception from progress: stop, keep what is done
        try:
            for future in in_flight:
                future.cancel()
            if own and pool is not None:
                _stop_workers(pool)
        finally:
            for i in range(total):
                if rows[i] is None:
                    rows[i] = row_of(i, {"error": "interrupted", "ran": False})
            on_interrupt(rows)
        raise
    return rows


def _result_of(future: cf.Future[Dict[str, Any]]) -> Dict[str, Any]:
    """The future's result, waited for in short steps: a wait without a timeout would not wake
    for Ctrl-C."""
    while True:
        try:
            return future.result(timeout=0.25)
        except cf.TimeoutError:
            continue


@contextlib.contextmanager
def _interrupts_to_main_thread() -> Iterator[None]:
    """Inside the block SIGINT and SIGTERM are blocked in this thread, and so in every thread and
    process it starts: the pool's manager and queue feeder threads, and its workers (which unblock
    them, see :func:`_init_worker`). The kernel gives a process's signal to any thread that does
    not block it; one given to a helper thread does not wake the main thread where it waits, and
    the interrupt would come late, outside the code that saves the table. Signals that arrive
    meanwhile are delivered when the block ends."""
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _INTERRUPTS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


_INTERRUPTS = {signal.SIGINT, signal.SIGTERM}


def _local_pool(workers: int) -> cf.ProcessPoolExecutor:
    return cf.ProcessPoolExecutor(max_workers=workers, initializer=_init_worker, initargs=(os.getpid(),))


def _init_worker(parent: int) -> None:
    """In the local pool's workers: Ctrl-C is the parent's to handle (it stops the workers), so that
    idle workers do not print tracebacks; SIGTERM (the parent stopping a worker) ends the worker at
    once; and a worker whose parent is gone (killed, even with SIGKILL) exits within a second
    instead of living on as an orphan."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _exit_now)
    threading.Thread(target=_watch_parent, args=(parent,), name="fabricemu-parent-watch", daemon=True).start()
    if hasattr(signal, "pthread_sigmask"):  # forked with them blocked (see _interrupts_to_main_thread)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _INTERRUPTS)


def _exit_now(signum: int, frame: object) -> None:
    os._exit(128 + signum)


#: How often a worker checks that its parent is alive (seconds).
PARENT_CHECK_INTERVAL = 0.5


def _watch_parent(parent: int) -> None:
    while True:
        time.sleep(PARENT_CHECK_INTERVAL)
        if os.getppid() != parent:
            os._exit(1)


#: How long a stopped worker has to end after SIGTERM before it is killed (seconds).
WORKER_STOP_GRACE = 3.0


def _stop_workers(pool: cf.Executor) -> None:
    """Cancel the points not started and stop the running ones (their folders hold no complete
    run, so a resumed sweep runs them again)."""
    assert isinstance(pool, cf.ProcessPoolExecutor)
    terminate = getattr(pool, "terminate_workers", None)  # Python 3.14
    if callable(terminate):
        terminate()
        return
    processes = dict(getattr(pool, "_processes", None) or {})
    manager = getattr(pool, "_executor_manager_thread", None)
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes.values():
        if process.is_alive():
            process.terminate()
    # A worker acts on SIGTERM only when its main thread next runs Python (between the engine's
    # slices); one that does not within the grace time (stuck, or a very slow slice) is killed, as
    # the pool's manager thread, and so this process's exit, waits for every worker to end.
    alive = {process.sentinel: process for process in processes.values()}
    deadline = time.monotonic() + WORKER_STOP_GRACE
    while alive and time.monotonic() < deadline:
        for sentinel in mp_connection.wait(list(alive), timeout=deadline - time.monotonic()):
            del alive[sentinel]  # type: ignore[index]
    for process in alive.values():
        process.kill()
    # CPython < 3.14 races at exit: its atexit hook wakes the pool's manager thread through a pipe
    # that thread may already have closed ("OSError: Bad file descriptor" after Ctrl-C). The
    # thread ends once its workers are gone: wait for it, then forget its wake-up pipe.
    if isinstance(manager, threading.Thread):
        manager.join(timeout=5)
        wakeups = getattr(cf.process, "_threads_wakeups", None)
        if wakeups is not None and not manager.is_alive():
            wakeups.pop(manager, None)


def _given(scenario: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    assert scenario is not None, "only valid points are submitted"
    return scenario


def _build_table(
    rows: Sequence[Optional[Dict[str, Any]]],
    points: Sequence[Mapping[str, Any]],
    param_names: Sequence[str],
    base: Scenario,
) -> pa.Table:
    columns: Dict[str, pa.Array] = {}
    for name in param_names:
        if name == "seed":
            values = [r["seed"] if r else None for r in rows]
            columns["seed"] = pa.array(values, pa.uint64())
            continue
        columns[name] = _param_array([p.get(name) for p in points])
    columns["run"] = pa.array([r["run"] if r else None for r in rows], pa.string())
    for f in METRICS_SCHEMA:
        values = [(r["metrics"] or {}).get(f.name) if r else None for r in rows]
        columns[f.name] = pa.array(values, f.type)
    columns["error"] = pa.array([r["error"] if r else None for r in rows], pa.string())
    table = pa.table(columns)
    return table.replace_schema_metadata(
        {
            META_PARAMETERS: json.dumps(list(param_names)).encode(),
            META_BASE: base.to_json().encode(),
            META_VERSION: __version__.encode(),
        }
    )


def _param_array(values: List[Any]) -> pa.Array:
    """The values of one parameter as an Arrow column: their own type when they share one, else
    strings (as a ``--grid`` would write them)."""
    try:
        array = pa.array(values)
        if not pa.types.is_null(array.type):
            return array
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        pass
    return pa.array([None if v is None else _render(v) for v in values], pa.string())


def _write(
    out_dir: Path,
    rows: Sequence[Optional[Dict[str, Any]]],
    points: Sequence[Mapping[str, Any]],
    param_names: Sequence[str],
    base: Scenario,
) -> pa.Table:
    """Build the sweep's table and write it as an Arrow IPC file under a temporary name, then
    rename it: complete or absent. An interrupt (Ctrl-C, or SIGTERM as
    :class:`fabricemu.Terminated`) that comes meanwhile does not leave the sweep without it: the
    table is built and written again, whole, and the interrupt raised then (the rows are all known
    here; writing them takes a moment)."""
    try:
        return _write_once(out_dir / SWEEP_FILE, _build_table(rows, points, param_names, base))
    except KeyboardInterrupt:
        _write_once(out_dir / SWEEP_FILE, _build_table(rows, points, param_names, base))
        raise


def _write_once(path: Path, table: pa.Table) -> pa.Table:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with pa.OSFile(os.fspath(tmp), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return table


# -- comparing runs and sweeps ---------------------------------------------------------------------


def compare(*sources: Any, names: Optional[Sequence[str]] = None) -> pa.Table:
    """The metrics (:func:`fabricemu.metrics.run_metrics`) of several runs side by side (each a
    :class:`fabricemu.Result`, an output folder, a flows table or a dict of tables): a
    ``metric`` column, then one column per run
    (named by ``names``, default the output folders' names); with two runs also ``change``, the
    relative change from the first to the second (``b / a - 1``; null when ``a`` is 0 or null).
    The synthetic-traffic metrics are left out unless one of the runs has them."""
    if len(sources) < 2:
        raise ValueError("compare needs at least two runs")
    if names is None:
        names = [_source_name(s, i) for i, s in enumerate(sources)]
    names = list(names)
    if len(names) != len(sources):
        raise ValueError(f"{len(names)} names for {len(sources)} runs")
    seen: Dict[str, int] = {}
    unique = []
    for n in names:
        seen[n] = seen.get(n, 0) + 1
        unique.append(n if seen[n] == 1 else f"{n} ({seen[n]})")
    rows = [_metrics_of(s) for s in sources]
    names_shown = [
        m
        for m in METRICS_SCHEMA.names
        if (m not in SYNTHETIC_KEYS and m not in STEP_KEYS and m not in JOB_KEYS)
        or any(row[m] is not None for row in rows)
    ]
    columns: Dict[str, List[Any]] = {"metric": names_shown}
    types: Dict[str, pa.DataType] = {"metric": pa.string()}
    for name, row in zip(unique, rows):
        columns[name] = [None if row[m] is None else float(row[m]) for m in names_shown]
        types[name] = pa.float64()
    if len(rows) == 2:
        a, b = (columns[unique[0]], columns[unique[1]])
        columns["change"] = [None if x in (None, 0) or y is None else y / x - 1 for x, y in zip(a, b)]
        types["change"] = pa.float64()
    return _table(columns, types)


def _metrics_of(source: Any) -> Dict[str, Any]:
    """The metrics of one run given as a Result, an output folder, a flows table or a dict of
    tables (``{"flows": ..., "links": ..., "pfc": ...}``)."""
    if isinstance(source, Result):
        return source.metrics()
    if isinstance(source, (str, os.PathLike)):
        return open_result(source).metrics()
    if isinstance(source, Mapping):
        tables = {str(k): _as_table(v) for k, v in source.items()}
        if "flows" not in tables:
            raise MissingTableError("flows", "the tables given", "pass {'flows': ..., ...}")
        return run_metrics(tables["flows"], None, links=tables.get("links"), pfc=tables.get("pfc"))
    return run_metrics(_as_table(source), None)


def saturation(
    table: Any,
    load: str = "workload.0.load",
    *,
    by: Union[str, Sequence[str], None] = None,
    tolerance: float = 0.05,
    accepted: str = "accepted_throughput",
    offered: str = "offered_load",
) -> pa.Table:
    """Saturation of open-loop synthetic traffic from a sweep over the offered load (the table of
    :func:`fabricemu.sweep` or :func:`fabricemu.open_sweep`, or a folder holding one).

    Rows with an error or no accepted throughput are ignored; several seeds at one load are
    averaged. Per group of ``by`` (e.g. ``"routing.load_balancing"``; default: one group):

    - ``saturation_throughput``: the largest (mean) accepted throughput over the loads swept, and
      ``at_load``, the load where it was reached;
    - ``saturation_load``: the lowest swept load at which the accepted throughput falls below the
      offered load (the realised ``offered`` column, else the swept load) by more than
      ``tolerance`` (relative: accepted < (1 - tolerance) x offered); null if it never does;
    - ``loads``: how many loads the group has.

    >>> table = fabricemu.sweep("scenarios/synthetic_load.toml",
    ...                         grid={"workload.0.load": [0.2, 0.4, 0.6, 0.8, 1.0]})  # doctest: +SKIP
    >>> analysis.saturation(table)  # doctest: +SKIP
    """
    if isinstance(table, (str, os.PathLike)):
        table = open_sweep(table)
    table = _as_table(table)
    keys = _keys_list(by)
    for column in (load, accepted, *keys):
        if column not in table.column_names:
            raise KeyError(f"the table has no column {column!r} (columns: {', '.join(table.column_names)})")
    if not 0 <= tolerance < 1:
        raise ValueError(f"tolerance must be in [0, 1), found {tolerance}")
    rows = table.to_pylist()
    groups: Dict[Tuple[Any, ...], Dict[float, List[Tuple[float, float]]]] = {}
    for r in rows:
        if r.get("error") is not None or r.get(accepted) is None or r.get(load) is None:
            continue
        x = float(r[load])
        got = float(r[accepted])
        off = r.get(offered)
        groups.setdefault(tuple(r[k] for k in keys), {}).setdefault(x, []).append(
            (got, float(off) if off is not None else x)
        )
    cols: Dict[str, List[Any]] = {k: [] for k in keys}
    cols.update({"saturation_throughput": [], "at_load": [], "saturation_load": [], "loads": []})
    try:
        order = sorted(groups, key=lambda k: tuple((v is None, v) for v in k))
    except TypeError:  # keys of mixed types: keep the table's order
        order = list(groups)
    for key in order:
        by_load = groups[key]
        means = [
            (x, sum(a for a, _ in v) / len(v), sum(o for _, o in v) / len(v))
            for x, v in sorted(by_load.items())
        ]
        best = max(means, key=lambda m: m[1])
        saturated = next((x for x, a, o in means if a < (1 - tolerance) * o), None)
        for k, v in zip(keys, key):
            cols[k].append(v)
        cols["saturation_throughput"].append(best[1])
        cols["at_load"].append(best[0])
        cols["saturation_load"].append(saturated)
        cols["loads"].append(len(means))
    types: Dict[str, pa.DataType] = {
        "saturation_throughput": pa.float64(),
        "at_load": pa.float64(),
        "saturation_load": pa.float64(),
        "loads": pa.int64(),
    }
    types.update(_key_types(table, keys))
    return _table(cols, types)


def _source_name(source: Any, i: int) -> str:
    if isinstance(source, Result):
        return source.out.name or str(source.out)
    if isinstance(source, (str, os.PathLike)):
        p = Path(source)
        return p.name or str(p)
    return f"run {i + 1}"


# -- reading a sweep --------------------------------------------------------------------------------


def open_sweep(path: PathLike) -> pa.Table:
    """The table of a sweep's output folder (its ``sweep.arrow``); :func:`parameters` names its
    parameter columns, and ``fabricemu.open(Path(path) / row["run"])`` opens one of its runs."""
    p = Path(path)
    file = p / SWEEP_FILE if p.is_dir() else p
    if not file.is_file():
        raise FileNotFoundError(2, f"not a sweep's folder (no {SWEEP_FILE})", str(p))
    with pa.memory_map(os.fspath(file), "r") as source:
        return pa.ipc.open_file(source).read_all()


def parameters(table: pa.Table) -> List[str]:
    """The parameter columns of a sweep's table (the swept key paths, then ``seed``)."""
    meta = table.schema.metadata or {}
    if META_PARAMETERS in meta:
        return list(json.loads(meta[META_PARAMETERS]))
    known = {"run", "error", *METRICS_SCHEMA.names}
    return [c for c in table.column_names if c not in known]


def base_scenario(table: pa.Table) -> Optional[Scenario]:
    """The scenario the sweep varied (from the table's metadata), if recorded."""
    meta = table.schema.metadata or {}
    if META_BASE not in meta:
        return None
    return Scenario.from_dict(json.loads(meta[META_BASE]))


def deterministic_columns(table: pa.Table) -> List[str]:
    """The columns that do not depend on the machine: all but the wall-clock ones
    (``wall_seconds``, ``events_per_second``, ``packet_hops_per_second``)."""
    return [c for c in table.column_names if c not in WALL_CLOCK_METRICS]
