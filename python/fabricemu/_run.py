"""Running a scenario (:func:`fabricemu.run`): the engine runs while the analysis modules load.

Reading a run's outputs needs pyarrow, pyarrow.compute and numpy (:mod:`fabricemu.results`,
about 0.2 s to import), and the engine runs without the GIL: so a run imports them on a thread
of its own while the engine runs, and a ``fabricemu run`` costs the simulation, not the imports
(issue 19, item 3), unless the engine's threads take every core (see ``_spare_core``). Nothing
here imports pyarrow before the engine starts.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Tuple, Union

from . import _core, _record
from ._outdir import OutputFolder, sigterm_as_interrupt
from .scenario import PathLike, Scenario, as_scenario

if TYPE_CHECKING:
    from .results import Result

#: The module a run's result needs, loaded on a thread while the engine runs.
RESULTS_MODULE = "fabricemu.results"

#: ``progress(simulated_ps, stop_ps, events, flows_finished, flows_total)``; ``stop_ps`` is None
#: when the run ends with its last flow.
ProgressCallback = Callable[[int, Optional[int], int, int, int], Any]


def run(
    scenario: Union[Scenario, PathLike, Mapping[str, Any]],
    out: Optional[PathLike] = None,
    progress: Optional[ProgressCallback] = None,
    *,
    slice_events: int = 2_000_000,
    overwrite: bool = False,
    max_memory: Optional[Union[int, str]] = None,
    max_trace_size: Optional[Union[int, str]] = None,
    controller: Optional[Callable[..., Any]] = None,
    control_interval: Optional[Union[int, str]] = None,
    threads: Optional[int] = None,
) -> Result:
    """Run a scenario (a :class:`Scenario`, a TOML file path or a dictionary) to its stop condition.

    ``threads`` (the scenario's ``threads`` key) splits the fabric into that many partitions run on
    as many threads, with byte-identical outputs; what the parallel engine cannot run yet raises
    :class:`ScenarioError` naming ``threads`` (docs/parallel.md).

    With ``controller`` (a callable: :class:`fabricemu.control.Telemetry` in, a list of actions or
    None out; see :mod:`fabricemu.control`), the engine stops at every control boundary (every
    ``control_interval``: picoseconds or a duration such as ``"20us"``; default the scenario's
    ``[control] interval``, or 20us) and applies the returned actions at that simulated time; they
    are recorded in ``actions.arrow``. A bad action raises :class:`fabricemu.ControlError`; it, or
    an exception raised by the controller, stops the run like Ctrl-C (partial outputs written,
    ``run.json`` has ``interrupted: true``) and propagates.

    Writes ``flows.arrow``, ``run.json`` and the traces into ``out``; with ``out=None`` into a
    temporary folder that lives as long as the returned :class:`Result`. The run is written into a
    fresh temporary folder beside ``out`` and moved into place when it ends, replacing an earlier
    run's folder whole (no old trace survives beside the new run); ``out`` is locked meanwhile, so a
    second run on it raises :class:`fabricemu.OutputFolderBusy`. A folder that is not empty and holds
    no run (no run.json) is refused unless ``overwrite=True``.

    The engine runs without the GIL; Ctrl-C, or SIGTERM (``kill``, Slurm, ``docker stop``; as
    :class:`fabricemu.Terminated`), stops it and raises ``KeyboardInterrupt`` after the partial
    outputs are in ``out`` (``run.json`` has ``interrupted: true``). A run that fails leaves ``out``
    as it was.

    Before anything is allocated, the run's memory and trace volume are estimated: a scenario whose
    estimate exceeds ``max_memory`` (bytes, or a size such as ``"64GiB"``; default: 80 % of the
    memory available) or ``max_trace_size`` (default ``"20GiB"``) raises :class:`ScenarioError`
    stating the estimate and the limit.

    >>> import fabricemu
    >>> result = fabricemu.run("scenarios/quickstart.toml")  # doctest: +SKIP
    >>> result.summary()["slowdown_p99"]  # doctest: +SKIP
    """
    s = as_scenario(scenario)
    if threads is not None:
        s = s.with_({"threads": threads})
    limits = (
        byte_limit(max_memory, "max_memory"),
        byte_limit(max_trace_size, "max_trace_size"),
    )
    started = _record.now_utc()
    control: Tuple[Any, ...] = ()
    if controller is not None:
        from .control import _Bridge

        if not callable(controller):
            raise TypeError(f"controller must be callable, found {controller!r}")
        interval = control_interval
        if isinstance(interval, str):
            interval = _core.parse_duration(interval)
        control = (_Bridge(controller), interval)
    elif control_interval is not None:
        raise ValueError("control_interval needs a controller")
    loading = _load_results() if _spare_core(s) else None
    try:
        return _run(s, out, progress, slice_events, overwrite, limits, control, started)
    finally:
        if loading is not None:
            loading.join()


def _run(
    s: Scenario,
    out: Optional[PathLike],
    progress: Optional[ProgressCallback],
    slice_events: int,
    overwrite: bool,
    limits: Tuple[Optional[int], Optional[int]],
    control: Tuple[Any, ...],
    started: str,
) -> Result:
    if out is None:
        tmp = tempfile.TemporaryDirectory(prefix="fabricemu-")
        with sigterm_as_interrupt():
            try:
                info = _run_core(s, tmp.name, progress, slice_events, limits, control)
            except KeyboardInterrupt as e:
                _complete_partial(Path(tmp.name), s, started)
                _note(e, "a temporary folder (pass out= to keep it)")
                raise
            _convert(Path(tmp.name), s)
            record = _record.complete(Path(tmp.name), json.loads(info), s, started)
        return _result(Path(tmp.name), record, tmp)
    folder = OutputFolder(out, overwrite=overwrite)
    with sigterm_as_interrupt(), folder as staging:
        try:
            info = _run_core(s, os.fspath(staging), progress, slice_events, limits, control)
            _convert(Path(staging), s)
            record = _record.complete(Path(staging), json.loads(info), s, started)
        except BaseException as e:
            # Ctrl-C, SIGTERM or an exception from ``progress``: the core wrote the partial outputs
            # (run.json has interrupted: true); they go into place like a complete run.
            if folder.has_outputs():
                _complete_partial(Path(staging), s, started)
                folder.commit()
                _note(e, str(folder.target))
            raise
        folder.commit()
    return _result(folder.target, record, None)


def _result(folder: Path, record: Any, keep: Optional[tempfile.TemporaryDirectory[str]]) -> Result:
    """The run's :class:`Result` (its module was loaded while the engine ran; if that thread is
    still at it, the import waits for it)."""
    from .results import Result

    return Result(folder, run_info=record, _keep=keep)


def _run_core(
    s: Scenario,
    folder: str,
    progress: Optional[ProgressCallback],
    slice_events: int,
    limits: Tuple[Optional[int], Optional[int]],
    control: Tuple[Any, ...],
) -> str:
    controller, interval = control if control else (None, None)
    return _core.run(
        s.to_json(),
        folder,
        progress,
        slice_events,
        max_memory=limits[0],
        max_trace_size=limits[1],
        controller=controller,
        control_interval=interval,
        shadow_alongside=_shadow_alongside.get(),
    )


#: Whether a run may put its failure-free shadow run (docs/failures.md, "Relative throughput") on a
#: spare core while it goes on; the engine checks for the core and the memory. Off in a sweep's
#: points, which use every core already (:func:`no_shadow_alongside`).
_shadow_alongside: contextvars.ContextVar[bool] = contextvars.ContextVar("shadow_alongside", default=True)


@contextlib.contextmanager
def no_shadow_alongside() -> Any:
    """Runs inside leave their shadow runs until they end (a sweep's points)."""
    token = _shadow_alongside.set(False)
    try:
        yield
    finally:
        _shadow_alongside.reset(token)


def _spare_core(s: Scenario) -> bool:
    """Whether a core is left beside the engine's threads for loading the results module. The
    parallel engine's threads meet at a barrier every window: a thread that loses its core to the
    loading holds up the others, and the engine's time (run.json's ``wall_seconds``, events/s)
    says threads are slow when the loading was. Measured on this 2-core machine (2026-12-05, 5
    runs each): the quickstart on two threads 65 ms of engine time with the loading beside it,
    8 ms with it after (0.22 s of whole process either way); the 1,024-host htsim case 0.72 s
    against 0.63 s (whole process 0.82 against 0.86 s: the overlap saved more than it cost, but
    the engine's figures were wrong). Without a spare core the module loads once the engine is
    done. One engine thread never waits for another: the loading may share its core."""
    threads = int(s.to_dict(normalised=True).get("threads", 1))
    return threads == 1 or threads < available_cores()


def available_cores() -> int:
    """The cores this process may run on."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else (os.cpu_count() or 1)


def _load_results() -> threading.Thread:
    """Import :mod:`fabricemu.results` (pyarrow, pyarrow.compute, numpy) on a thread of its own:
    the engine, which runs without the GIL, goes on meanwhile. Joined when the run returns."""
    loading = threading.Thread(
        target=importlib.import_module, args=(RESULTS_MODULE,), name="fabricemu-load", daemon=True
    )
    loading.start()
    return loading


def _convert(folder: Path, s: Scenario) -> None:
    """Store the tables as the scenario's ``[output]`` asks (format, compression)."""
    from . import _storage

    fmt, compression = _storage.options(s.to_dict(normalised=True))
    _storage.convert(folder, fmt, compression)


def _complete_partial(folder: Path, s: Scenario, started: str) -> None:
    """The record of an interrupted run, when the core wrote its run.json (best effort: the
    interruption is what propagates)."""
    from pyarrow import ArrowException

    try:
        info = json.loads((folder / _record.RUN_FILE).read_text(encoding="utf-8"))
        _convert(folder, s)
        _record.complete(folder, info, s, started)
    except (OSError, ValueError, ArrowException):
        pass


def _note(e: BaseException, where: str) -> None:
    if hasattr(e, "add_note"):
        e.add_note(f"fabricemu: partial outputs were written to {where}")


def byte_limit(value: Optional[Union[int, str]], name: str) -> Optional[int]:
    """A resource limit given as bytes or a size string (``"64GiB"``); None keeps the default."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f'{name} must be a number of bytes or a size such as "64GiB", not {value!r}')
    n = _core.parse_size(value) if isinstance(value, str) else value
    if n <= 0:
        raise ValueError(f"{name} must be positive, not {value!r}")
    return int(n)
