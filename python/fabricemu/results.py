"""Running scenarios and reading their output folders."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Dict, Mapping, Optional, Union

import pyarrow as pa
import pyarrow.compute as pc

from . import _core
from .scenario import PathLike, Scenario, as_scenario

__all__ = ["ProgressCallback", "Result", "open_result", "run"]

#: ``progress(simulated_ps, stop_ps, events, flows_finished, flows_total)``; ``stop_ps`` is None
#: when the run ends with its last flow.
ProgressCallback = Callable[[int, Optional[int], int, int, int], Any]


def run(
    scenario: Union[Scenario, PathLike, Mapping[str, Any]],
    out: Optional[PathLike] = None,
    progress: Optional[ProgressCallback] = None,
    *,
    slice_events: int = 2_000_000,
) -> Result:
    """Run a scenario (a :class:`Scenario`, a TOML file path or a dictionary) to its stop condition.

    Writes ``flows.arrow`` and ``run.json`` into ``out``; with ``out=None`` into a temporary folder
    that lives as long as the returned :class:`Result`. The engine runs without the GIL; Ctrl-C raises
    ``KeyboardInterrupt`` after writing the partial outputs (``run.json`` has ``interrupted: true``).

    >>> import fabricemu
    >>> result = fabricemu.run("scenarios/quickstart.toml")  # doctest: +SKIP
    >>> result.summary()["slowdown_p99"]  # doctest: +SKIP
    """
    s = as_scenario(scenario)
    tmp: Optional[tempfile.TemporaryDirectory[str]] = None
    if out is None:
        tmp = tempfile.TemporaryDirectory(prefix="fabricemu-")
        out_dir = Path(tmp.name)
    else:
        out_dir = Path(out)
    try:
        info = _core.run(s.to_json(), os.fspath(out_dir), progress, slice_events)
    except KeyboardInterrupt as e:
        if hasattr(e, "add_note"):
            where = "a temporary folder (pass out= to keep it)" if tmp else str(out_dir)
            e.add_note(f"fabricemu: partial outputs were written to {where}")
        raise
    return Result(out_dir, run_info=json.loads(info), _keep=tmp)


def open_result(path: PathLike) -> Result:
    """The :class:`Result` of an earlier run, from its output folder."""
    p = Path(path)
    if not (p / "run.json").is_file():
        raise FileNotFoundError(2, "not a fabricemu output folder (no run.json)", str(p))
    return Result(p)


class Result:
    """The outputs of one run: ``flows`` (a pyarrow Table), ``run_info`` (run.json), ``summary()``."""

    def __init__(
        self,
        out: PathLike,
        *,
        run_info: Optional[Dict[str, Any]] = None,
        _keep: Any = None,
    ) -> None:
        self.out = Path(out)
        self._run_info = run_info
        self._flows: Optional[pa.Table] = None
        self._keep = _keep  # a TemporaryDirectory removed with this Result

    @property
    def run_info(self) -> Dict[str, Any]:
        """run.json: scenario, seed, version, interrupted, wall_seconds, stats and the rates."""
        if self._run_info is None:
            self._run_info = json.loads((self.out / "run.json").read_text(encoding="utf-8"))
        return self._run_info

    @property
    def stats(self) -> Dict[str, Any]:
        """The engine's counters (events, packet_hops, packets_dropped, flows_finished, ...)."""
        return dict(self.run_info.get("stats", {}))

    @property
    def interrupted(self) -> bool:
        return bool(self.run_info.get("interrupted", False))

    @property
    def scenario(self) -> Scenario:
        return Scenario.from_dict(self.run_info["scenario"])

    @property
    def flows(self) -> pa.Table:
        """One row per flow (read from flows.arrow, memory-mapped, on first use)."""
        if self._flows is None:
            source = pa.memory_map(os.fspath(self.out / "flows.arrow"), "r")
            self._flows = pa.ipc.open_file(source).read_all()
        return self._flows

    def summary(self) -> Dict[str, Any]:
        """Headline figures: flow counts, FCT (us) and slowdown percentiles of finished flows,
        simulated time, events, packet-hops, their rates per wall-clock second, drops."""
        flows = self.flows
        info = self.run_info
        stats = info.get("stats", {})
        fct = pc.drop_null(flows.column("fct_ps")) if flows.num_rows else pa.array([], pa.uint64())
        finished = len(fct)
        slowdown = pc.drop_null(flows.column("slowdown")) if flows.num_rows else pa.array([], pa.float64())
        fct_us = pc.divide(pc.cast(fct, pa.float64()), 1e6)
        drops = stats.get("packets_dropped")
        if drops is None and "drops" in flows.column_names:
            drops = pc.sum(flows.column("drops")).as_py() or 0
        simulated_ps = int(info.get("simulated_ps", stats.get("simulated_ps", 0)))
        return {
            "flows": flows.num_rows,
            "finished": finished,
            "unfinished": flows.num_rows - finished,
            "fct_p50_us": _quantile(fct_us, 0.5),
            "fct_p99_us": _quantile(fct_us, 0.99),
            "slowdown_p50": _quantile(slowdown, 0.5),
            "slowdown_p95": _quantile(slowdown, 0.95),
            "slowdown_p99": _quantile(slowdown, 0.99),
            "simulated_us": simulated_ps / 1e6,
            "events": int(info.get("events", stats.get("events", 0))),
            "events_per_second": float(info.get("events_per_second", 0.0)),
            "packet_hops": int(info.get("packet_hops", stats.get("packet_hops", 0))),
            "packet_hops_per_second": float(info.get("packet_hops_per_second", 0.0)),
            "wall_seconds": float(info.get("wall_seconds", 0.0)),
            "drops": int(drops or 0),
            "interrupted": bool(info.get("interrupted", False)),
        }

    def __repr__(self) -> str:
        try:
            s = self.summary()
        except (OSError, ValueError, KeyError, pa.ArrowException) as e:
            return f"<fabricemu.Result {str(self.out)!r} (unreadable: {e})>"
        state = " interrupted" if s["interrupted"] else ""
        return (
            f"<fabricemu.Result {str(self.out)!r}{state}: {s['finished']}/{s['flows']} flows finished, "
            f"slowdown p50 {_num(s['slowdown_p50'])} p99 {_num(s['slowdown_p99'])}, "
            f"{s['simulated_us']:g} us simulated>"
        )


def _quantile(values: pa.Array, q: float) -> Optional[float]:
    if len(values) == 0:
        return None
    v = pc.quantile(values, q=q, interpolation="linear")[0].as_py()
    return None if v is None or math.isnan(v) else float(v)


def _num(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:.3g}"
