"""The figures of one run, computed once: :func:`run_metrics` (a sweep's row,
``analysis.metrics``, ``Result.metrics()``) and :func:`summary_view` (``Result.summary()``, the CLI's
run summary) read the same numbers.

This module sits below ``results``, ``analysis``, ``sweep`` and ``report`` and imports none of them:
it works on tables (pyarrow) and run.json dictionaries.

Keys of :func:`run_metrics` (:data:`METRICS_SCHEMA`, a sweep table's metric columns; null when
unknown): ``flows``, ``flows_finished``, ``fct_p50_us``, ``fct_p99_us``, ``slowdown_p50``,
``slowdown_p95``, ``slowdown_p99``, ``goodput_gbps``, ``drops``, ``retransmits``, ``ecn_marks``,
``cnps``, ``pause_us``, ``max_queue_bytes``, ``simulated_us``, ``events``, ``packet_hops``,
``events_per_second``, ``packet_hops_per_second``, ``wall_seconds``, the :data:`SYNTHETIC_KEYS`, the
:data:`FAULT_KEYS` (``faults_applied``, ``link_seconds_down``, ``corrupted_drops``), the :data:`STEP_KEYS`,
the :data:`JOB_KEYS` and ``trimmed_packets`` (run.json; null unless switches trim).

Keys of :func:`summary_view` (:data:`SUMMARY_KEYS`; counters 0 rather than null when run.json
lacks them): ``flows``, ``finished`` (= ``flows_finished``), ``unfinished``, ``fct_p50_us``,
``fct_p99_us``, ``slowdown_p50``, ``slowdown_p95``, ``slowdown_p99``, ``simulated_us``, ``events``,
``events_per_second``, ``packet_hops``, ``packet_hops_per_second``, ``wall_seconds``, ``drops``,
``interrupted``; then every other metric key (``flows_finished``, ``goodput_gbps``,
``retransmits``, ``ecn_marks``, ``cnps``, ``pause_us``, ``max_queue_bytes``); the synthetic keys
only when the run had synthetic workloads; the step keys only when it had step workloads; the
:data:`ONE_WAY_KEYS` only when the run measured one-way latency (``[trace] latency``), and
``packet_trace_truncated`` only when it traced packets.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "FAULT_KEYS",
    "JOB_KEYS",
    "METRICS_SCHEMA",
    "ONE_WAY_KEYS",
    "STEP_KEYS",
    "SUMMARY_KEYS",
    "SYNTHETIC_KEYS",
    "WALL_CLOCK_METRICS",
    "job_metrics",
    "one_way_metrics",
    "pause_intervals",
    "run_metrics",
    "step_metrics",
    "summary_view",
    "synthetic_metrics",
]

#: The measurement of synthetic workloads in :meth:`Result.summary` and the sweep metrics.
SYNTHETIC_KEYS: Tuple[str, ...] = (
    "accepted_throughput",
    "offered_load",
    "latency_mean_us",
    "latency_p50_us",
    "latency_p99_us",
    "latency_max_us",
    "messages_measured",
    "messages_unfinished",
)


#: One-way packet latency (``[trace] latency``) in :meth:`Result.summary`, in us: percentiles of
#: the histogram, jitter = p99 - p50, and the exact mean and standard deviation.
ONE_WAY_KEYS: Tuple[str, ...] = (
    "one_way_p50_us",
    "one_way_p99_us",
    "one_way_p999_us",
    "one_way_jitter_us",
    "one_way_mean_us",
    "one_way_stddev_us",
)


def one_way_metrics(run_info: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """The :data:`ONE_WAY_KEYS` from a run.json's ``latency`` (ps there, us here), or None if the
    run did not measure one-way latency."""
    lat = run_info.get("latency")
    if not lat:
        return None

    def us(key: str) -> Optional[float]:
        v = lat.get(key)
        return None if v is None else float(v) / 1e6

    return {
        "one_way_p50_us": us("p50_ps"),
        "one_way_p99_us": us("p99_ps"),
        "one_way_p999_us": us("p999_ps"),
        "one_way_jitter_us": us("jitter_ps"),
        "one_way_mean_us": us("mean_ps"),
        "one_way_stddev_us": us("stddev_ps"),
    }


def synthetic_metrics(run_info: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """The synthetic workloads' measurement window from a run.json (``run_info["synthetic"]``) in
    the summary's units (latency in us), or None if the run had no synthetic workload."""
    s = run_info.get("synthetic")
    if not s:
        return None

    def us(key: str) -> Optional[float]:
        v = s.get(key)
        return None if v is None else float(v) / 1e6

    return {
        "accepted_throughput": float(s["accepted_throughput"]),
        "offered_load": float(s["offered_load"]),
        "latency_mean_us": us("latency_mean_ps"),
        "latency_p50_us": us("latency_p50_ps"),
        "latency_p99_us": us("latency_p99_ps"),
        "latency_max_us": us("latency_max_ps"),
        "messages_measured": int(s["messages_measured"]),
        "messages_unfinished": int(s["messages_unfinished"]),
    }


#: Step workloads (``graph``, ``training``, ``inference``) in :meth:`Result.summary` and the sweep
#: metrics: over every complete iteration (steps.arrow's rows with an end), the iteration time's
#: mean, median and 99th percentile (nearest rank) in us, and the mean fractions of the iteration
#: a rank spends in exposed communication and idle (docs/step-workloads.md defines them).
STEP_KEYS: Tuple[str, ...] = (
    "iterations",
    "iteration_time_mean_us",
    "iteration_time_p50_us",
    "iteration_time_p99_us",
    "compute_fraction",
    "exposed_comm_fraction",
    "bubble_fraction",
)


def step_metrics(run_info: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """The step workloads' figures from a run.json (``run_info["steps"]``) in the summary's units
    (times in us), or None if the run had no step workload."""
    s = run_info.get("steps")
    if not s:
        return None

    def us(key: str) -> Optional[float]:
        v = s.get(key)
        return None if v is None else float(v) / 1e6

    def frac(key: str) -> Optional[float]:
        v = s.get(key)
        return None if v is None else float(v)

    return {
        "iterations": int(s.get("iterations", 0)),
        "iteration_time_mean_us": us("time_ps_mean"),
        "iteration_time_p50_us": us("time_ps_p50"),
        "iteration_time_p99_us": us("time_ps_p99"),
        "compute_fraction": frac("compute_fraction"),
        "exposed_comm_fraction": frac("exposed_comm_fraction"),
        "bubble_fraction": frac("bubble_fraction"),
    }


#: Step workloads that react to failures (``on_failure``; null without them), summed over them
#: (run.json's ``jobs``, docs/failures.md "Jobs that react"): GPU-seconds not doing useful work
#: because of failures, iterations whose work counts, iterations a restart threw away, and the
#: failure episodes that hit the jobs; for elastic jobs (``on_failure = "elastic"``) the group
#: re-formations (0 without elastic jobs); and the lowest ``relative_throughput`` of any job (its
#: achieved rate against its failure-free rate on the same fabric, 1 for a run without failures:
#: ``baseline_iterations_per_second``, measured or from a shadow run; null if none has one).
JOB_KEYS: Tuple[str, ...] = (
    "lost_gpu_seconds",
    "useful_iterations",
    "lost_iterations",
    "job_failures",
    "job_reformations",
    "relative_throughput",
)


def job_metrics(run_info: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """The reacting jobs' figures from a run.json (``run_info["jobs"]``, summed over the jobs), or
    None if no step workload has ``on_failure``."""
    jobs = run_info.get("jobs")
    if not jobs:
        return None
    relative = [float(j["relative_throughput"]) for j in jobs if j.get("relative_throughput") is not None]
    return {
        "lost_gpu_seconds": float(sum(float(j.get("lost_gpu_seconds", 0.0)) for j in jobs)),
        "useful_iterations": int(sum(int(j.get("useful_iterations", 0)) for j in jobs)),
        "lost_iterations": int(sum(int(j.get("lost_iterations", 0)) for j in jobs)),
        "job_failures": int(sum(int(j.get("failures", 0)) for j in jobs)),
        "job_reformations": int(sum(int(j.get("reformations", 0)) for j in jobs)),
        "relative_throughput": min(relative) if relative else None,
    }


#: The metric columns of :func:`metrics` (and of a sweep's table), in order, with their types.
METRICS_SCHEMA = pa.schema(
    [
        ("flows", pa.int64()),
        ("flows_finished", pa.int64()),
        ("fct_p50_us", pa.float64()),
        ("fct_p99_us", pa.float64()),
        ("slowdown_p50", pa.float64()),
        ("slowdown_p95", pa.float64()),
        ("slowdown_p99", pa.float64()),
        ("goodput_gbps", pa.float64()),
        ("drops", pa.int64()),
        ("retransmits", pa.int64()),
        ("ecn_marks", pa.int64()),
        ("cnps", pa.int64()),
        ("pause_us", pa.float64()),
        ("max_queue_bytes", pa.int64()),
        ("simulated_us", pa.float64()),
        ("events", pa.int64()),
        ("packet_hops", pa.int64()),
        ("events_per_second", pa.float64()),
        ("packet_hops_per_second", pa.float64()),
        ("wall_seconds", pa.float64()),
        # Synthetic workloads (null without them): the measurement window [warmup, stop).
        ("accepted_throughput", pa.float64()),
        ("offered_load", pa.float64()),
        ("latency_mean_us", pa.float64()),
        ("latency_p50_us", pa.float64()),
        ("latency_p99_us", pa.float64()),
        ("latency_max_us", pa.float64()),
        ("messages_measured", pa.int64()),
        ("messages_unfinished", pa.int64()),
        # Faults (docs/failures.md): 0 without them (null when run.json is missing).
        ("faults_applied", pa.int64()),
        ("link_seconds_down", pa.float64()),
        ("corrupted_drops", pa.int64()),
        # Step workloads (null without them): complete iterations (steps.arrow).
        ("iterations", pa.int64()),
        ("iteration_time_mean_us", pa.float64()),
        ("iteration_time_p50_us", pa.float64()),
        ("iteration_time_p99_us", pa.float64()),
        ("compute_fraction", pa.float64()),
        ("exposed_comm_fraction", pa.float64()),
        ("bubble_fraction", pa.float64()),
        # Step workloads with on_failure (null without them): run.json's jobs, summed.
        ("lost_gpu_seconds", pa.float64()),
        ("useful_iterations", pa.int64()),
        ("lost_iterations", pa.int64()),
        ("job_failures", pa.int64()),
        ("job_reformations", pa.int64()),
        ("relative_throughput", pa.float64()),
        # Ultra Ethernet packet trimming (null without it): data packets whose payload a switch cut.
        ("trimmed_packets", pa.int64()),
    ]
)

#: What the run's faults did: fault periods applied (rows of faults.arrow), time links spent down
#: (link-seconds, each direction of a cable counted) and packets lost to random loss.
FAULT_KEYS: Tuple[str, ...] = ("faults_applied", "link_seconds_down", "corrupted_drops")

#: Metric columns that depend on the machine and its load, not on the scenario.
WALL_CLOCK_METRICS: Tuple[str, ...] = ("events_per_second", "packet_hops_per_second", "wall_seconds")

#: The keys :func:`summary_view` has had from the start, in order.
SUMMARY_KEYS: Tuple[str, ...] = (
    "flows",
    "finished",
    "unfinished",
    "fct_p50_us",
    "fct_p99_us",
    "slowdown_p50",
    "slowdown_p95",
    "slowdown_p99",
    "simulated_us",
    "events",
    "events_per_second",
    "packet_hops",
    "packet_hops_per_second",
    "wall_seconds",
    "drops",
    "interrupted",
)

#: The flows columns :func:`run_metrics` needs.
FLOW_COLUMNS: Tuple[str, ...] = ("size_bytes", "start_ps", "finish_ps", "fct_ps", "slowdown")

#: The key columns of pfc.arrow: one paused queue.
PFC_KEYS: Tuple[str, ...] = ("switch", "port", "priority")


def _np(column: Union[pa.ChunkedArray, pa.Array], dtype: Any = np.float64) -> np.ndarray:
    """A column as a numpy array (nulls as NaN for floats)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if column.null_count:
        column = pc.cast(column, pa.float64()).fill_null(math.nan)
        return np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.float64)
    return np.asarray(column.to_numpy(zero_copy_only=False), dtype=dtype)


def _valid(column: Union[pa.ChunkedArray, pa.Array]) -> np.ndarray:
    """True where the column is not null."""
    return np.asarray(pc.is_valid(column).to_numpy(zero_copy_only=False), dtype=bool)


def _percentile(values: np.ndarray, q: float) -> Optional[float]:
    values = values[~np.isnan(values)] if values.dtype.kind == "f" else values
    if values.size == 0:
        return None
    return float(np.percentile(values, q * 100.0))


def _groups(table: pa.Table, keys: Sequence[str]) -> List[Tuple[Tuple[Any, ...], np.ndarray]]:
    """Row indices of each group of equal ``keys``, groups sorted by their keys (nulls last)."""
    n = table.num_rows
    if not keys:
        return [((), np.arange(n))] if n else []
    codes = []
    uniques: List[List[Any]] = []
    for key in keys:
        column = table.column(key)
        if column.null_count == 0 and (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)):
            present_np, inverse = np.unique(_np(column, None), return_inverse=True)
            codes.append(inverse.astype(np.int64).reshape(-1))
            uniques.append([v.item() for v in present_np])
            continue
        values = column.to_pylist()
        present = sorted({v for v in values if v is not None})
        index = {v: i for i, v in enumerate(present)}
        codes.append(np.fromiter((index.get(v, len(present)) for v in values), dtype=np.int64, count=n))
        uniques.append([*present, None])
    order = np.lexsort(tuple(reversed(codes)))
    stacked = np.stack([c[order] for c in codes], axis=1)
    if n == 0:
        return []
    change = np.any(stacked[1:] != stacked[:-1], axis=1)
    starts = np.concatenate(([0], np.nonzero(change)[0] + 1))
    ends = np.concatenate((starts[1:], [n]))
    out: List[Tuple[Tuple[Any, ...], np.ndarray]] = []
    for s, e in zip(starts, ends):
        group = tuple(uniques[k][stacked[s, k]] for k in range(len(keys)))
        out.append((group, order[s:e]))
    return out


def pause_intervals(pfc: pa.Table, end_ps: int, extra: Sequence[str] = ()) -> Dict[str, List[Any]]:
    """The paused intervals of each (switch, port, priority) of a pfc.arrow table, as columns:
    the :data:`PFC_KEYS`, ``extra`` columns (their value at the PAUSE), ``start_ps``, ``end_ps``,
    ``duration_ps``, ``resumed``. A PAUSE starts an interval unless already paused (a repeated
    PAUSE refreshes it), a RESUME ends it; one still open lasts until ``end_ps``."""
    t = _np(pfc.column("time_ps"), np.int64).astype(np.int64)
    actions = pfc.column("action").to_pylist()
    unknown = {a for a in actions if a not in ("pause", "resume")}
    if unknown:
        raise ValueError(f"pfc.arrow action is 'pause' or 'resume', found {sorted(map(str, unknown))}")
    is_pause = np.fromiter((a == "pause" for a in actions), dtype=bool, count=len(actions))
    end = end_ps
    cols: Dict[str, List[Any]] = {
        k: [] for k in (*PFC_KEYS, *extra, "start_ps", "end_ps", "duration_ps", "resumed")
    }
    extra_values = {c: pfc.column(c).to_pylist() for c in extra}
    for key, idx in _groups(pfc, list(PFC_KEYS)):
        order = idx[np.argsort(t[idx], kind="stable")]
        paused_before = np.concatenate(([False], is_pause[order][:-1]))
        starts = order[is_pause[order] & ~paused_before]
        ends = order[~is_pause[order] & paused_before]
        # Starts and ends alternate: start, end, start, end, ... [start].
        for i, s in enumerate(starts):
            start = int(t[s])
            if i < len(ends):
                stop, resumed = int(t[ends[i]]), True
            else:
                stop, resumed = max(end, start), False
            for k, kv in zip(PFC_KEYS, key):
                cols[k].append(kv)
            for c in extra:
                cols[c].append(extra_values[c][int(s)])
            cols["start_ps"].append(start)
            cols["end_ps"].append(stop)
            cols["duration_ps"].append(stop - start)
            cols["resumed"].append(resumed)
    return cols


def _total_pause_ps(links: Optional[pa.Table], pfc: Optional[pa.Table], simulated_ps: Optional[int]) -> float:
    """PFC pause time summed over links: links.arrow's ``paused_ps``, else pfc.arrow's intervals,
    else 0."""
    if links is not None and "paused_ps" in links.column_names:
        return float(pc.sum(links.column("paused_ps")).as_py() or 0)
    if pfc is not None:
        end = simulated_ps
        if end is None:
            end = int(pc.max(pfc.column("time_ps")).as_py() or 0) if pfc.num_rows else 0
        return float(sum(pause_intervals(pfc, end)["duration_ps"]))
    return 0.0


def run_metrics(
    flows: pa.Table,
    run_info: Optional[Mapping[str, Any]] = None,
    *,
    links: Optional[pa.Table] = None,
    pfc: Optional[pa.Table] = None,
) -> Dict[str, Any]:
    """The run's headline figures, as one sweep row has them (the keys of :data:`METRICS_SCHEMA`).

    - ``flows``, ``flows_finished``; ``fct_p50_us``, ``fct_p99_us`` and ``slowdown_p50/p95/p99``
      over finished flows;
    - ``goodput_gbps``: bytes of the finished flows x 8 over the makespan (first start to last
      finish of those flows);
    - ``drops`` (packets dropped, from run.json, else the flows' sum), ``retransmits``,
      ``ecn_marks`` and ``cnps`` (sums over flows; null when the flows table has no such column);
    - ``pause_us``: PFC pause time summed over links (``links`` ``paused_ps``; else the pause
      intervals of ``pfc``; else 0);
    - ``max_queue_bytes`` (run.json), ``simulated_us``, ``events``, ``packet_hops``;
    - ``events_per_second``, ``packet_hops_per_second``, ``wall_seconds``: these depend on the
      machine (:data:`WALL_CLOCK_METRICS`);
    - with synthetic workloads (null otherwise), over the measurement window ``[warmup, stop)``:
      ``accepted_throughput`` and ``offered_load`` (fractions of the injection bandwidth),
      ``latency_mean_us``, ``latency_p50_us``, ``latency_p99_us``, ``latency_max_us`` (message
      generation to last byte delivered), ``messages_measured``, ``messages_unfinished``
      (run.json's ``synthetic``);
    - ``faults_applied`` (fault periods: rows of faults.arrow), ``link_seconds_down`` (time links
      spent down, summed over directed links) and ``corrupted_drops`` (packets lost to random loss)
      from run.json: 0 when the run had none, null without run.json.
    - with step workloads (null otherwise): the :data:`STEP_KEYS` (run.json's ``steps``).
    - with step workloads that react to failures (null otherwise): the :data:`JOB_KEYS`
      (run.json's ``jobs``).
    - ``trimmed_packets`` (run.json): data packets trimmed at switches (null without trimming).
    """
    info = run_info or {}
    stats = info.get("stats", {})

    finished = _valid(flows.column("fct_ps"))
    fct_us = _np(flows.column("fct_ps"))[finished] / 1e6
    slowdown = _np(flows.column("slowdown"))[finished]
    size = _np(flows.column("size_bytes"))[finished]
    goodput = None
    if finished.any():
        start = _np(flows.column("start_ps"))[finished].min()
        finish = _np(flows.column("finish_ps"))[finished].max()
        if finish > start:
            goodput = float(size.sum() * 8e3 / (finish - start))

    def flow_sum(column: str) -> Optional[int]:
        if column not in flows.column_names:
            return None
        return int(pc.sum(flows.column(column)).as_py() or 0)

    drops = stats.get("packets_dropped")
    if drops is None:
        drops = flow_sum("drops")
    simulated = info.get("simulated_ps", stats.get("simulated_ps"))

    def counter(key: str) -> Optional[int]:
        value = info.get(key, stats.get(key))
        return int(value) if value is not None else None

    def rate(key: str) -> Optional[float]:
        value = info.get(key)
        return float(value) if value is not None else None

    return {
        "flows": flows.num_rows,
        "flows_finished": int(finished.sum()),
        "fct_p50_us": _percentile(fct_us, 0.5),
        "fct_p99_us": _percentile(fct_us, 0.99),
        "slowdown_p50": _percentile(slowdown, 0.5),
        "slowdown_p95": _percentile(slowdown, 0.95),
        "slowdown_p99": _percentile(slowdown, 0.99),
        "goodput_gbps": goodput,
        "drops": int(drops) if drops is not None else None,
        "retransmits": flow_sum("retransmits"),
        "ecn_marks": flow_sum("ecn_marks"),
        "cnps": flow_sum("cnps"),
        "pause_us": _total_pause_ps(links, pfc, None if simulated is None else int(simulated)) / 1e6,
        "max_queue_bytes": int(stats["max_queue_bytes"]) if "max_queue_bytes" in stats else None,
        "simulated_us": float(simulated) / 1e6 if simulated is not None else None,
        "events": counter("events"),
        "packet_hops": counter("packet_hops"),
        "events_per_second": rate("events_per_second"),
        "packet_hops_per_second": rate("packet_hops_per_second"),
        "wall_seconds": rate("wall_seconds"),
        **(synthetic_metrics(info) or dict.fromkeys(SYNTHETIC_KEYS)),
        # run.json writes these counters only when they are not 0.
        "faults_applied": int(stats.get("faults_applied", 0)) if stats else None,
        "link_seconds_down": float(stats.get("link_down_ps", 0)) / 1e12 if stats else None,
        "corrupted_drops": int(stats.get("corrupted_drops", 0)) if stats else None,
        **(step_metrics(info) or dict.fromkeys(STEP_KEYS)),
        **(job_metrics(info) or dict.fromkeys(JOB_KEYS)),
        "trimmed_packets": counter("trimmed_packets"),
    }


def summary_view(metrics: Mapping[str, Any], run_info: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """``Result.summary()`` from :func:`run_metrics`' figures: the :data:`SUMMARY_KEYS` first (with
    ``finished``/``unfinished`` and counters that are 0, not null, when run.json lacks them), then
    every other metric; the synthetic keys only when the run had synthetic workloads, the step keys
    only when it had step workloads."""
    info = run_info or {}
    m = metrics
    summary: Dict[str, Any] = {
        "flows": m["flows"],
        "finished": m["flows_finished"],
        "unfinished": m["flows"] - m["flows_finished"],
        "fct_p50_us": m["fct_p50_us"],
        "fct_p99_us": m["fct_p99_us"],
        "slowdown_p50": m["slowdown_p50"],
        "slowdown_p95": m["slowdown_p95"],
        "slowdown_p99": m["slowdown_p99"],
        "simulated_us": m["simulated_us"] if m["simulated_us"] is not None else 0.0,
        "events": m["events"] or 0,
        "events_per_second": m["events_per_second"] or 0.0,
        "packet_hops": m["packet_hops"] or 0,
        "packet_hops_per_second": m["packet_hops_per_second"] or 0.0,
        "wall_seconds": m["wall_seconds"] or 0.0,
        "drops": m["drops"] or 0,
        "interrupted": bool(info.get("interrupted", False)),
    }
    synthetic = info.get("synthetic")
    steps = info.get("steps")
    jobs = info.get("jobs")
    for key, value in m.items():
        if (
            key in summary
            or (key in SYNTHETIC_KEYS and not synthetic)
            or (key in STEP_KEYS and not steps)
            or (key in JOB_KEYS and not jobs)
        ):
            continue
        summary[key] = value
    summary.update(one_way_metrics(info) or {})
    if "packet_trace_truncated" in info:
        summary["packet_trace_truncated"] = bool(info["packet_trace_truncated"])
    return summary


def _as_table(obj: Any) -> pa.Table:
    if isinstance(obj, pa.Table):
        return obj
    if isinstance(obj, pa.RecordBatchReader):
        return obj.read_all()
    if isinstance(obj, pa.RecordBatch):
        return pa.Table.from_batches([obj])
    try:
        table = pa.table(obj)
    except (TypeError, ValueError, pa.ArrowException) as e:
        raise TypeError(f"cannot read a {type(obj).__name__} as an Arrow table: {e}") from None
    # Other libraries' string views and large strings (polars) read as the engine's plain strings.
    is_view = getattr(pa.types, "is_string_view", lambda t: False)
    fields = [
        pa.field(f.name, pa.string(), f.nullable)
        if is_view(f.type) or pa.types.is_large_string(f.type)
        else f
        for f in table.schema
    ]
    return table.cast(pa.schema(fields, table.schema.metadata))


def _keys_list(by: Union[str, Sequence[str], None]) -> List[str]:
    if by is None:
        return []
    if isinstance(by, str):
        return [by]
    return list(by)


def _table(columns: Dict[str, List[Any]], types: Mapping[str, pa.DataType], **meta: str) -> pa.Table:
    arrays = {}
    for name, values in columns.items():
        t = types.get(name)
        arrays[name] = pa.array(values, type=t) if t is not None else pa.array(values)
    table = pa.table(arrays)
    if meta:
        table = table.replace_schema_metadata({f"fabricemu.{k}": v for k, v in meta.items()})
    return table


def _key_types(table: pa.Table, keys: Sequence[str]) -> Dict[str, pa.DataType]:
    return {k: table.schema.field(k).type for k in keys}
