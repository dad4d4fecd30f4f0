"""Analysis of a run's tables: every function takes the run and returns a ``pyarrow.Table``.

The run can be given as a :class:`fabricemu.Result`, an output folder (a path), the table itself
(``result.flows``, a polars DataFrame or anything with ``__arrow_c_stream__``), or a dictionary of
tables (``{"flows": ..., "rates": ...}``). Only the tables a function needs are read, memory-mapped.
A table the run did not write raises :class:`fabricemu.MissingTableError` (a ``FileNotFoundError``)
saying how to turn it on.

Conventions: times are integer picoseconds (``*_ps``) unless a column says ``_us``; rates are
Gbps (``*_gbps``); percentiles are linear interpolations (as ``numpy.percentile``), named
``p50``, ``p95``, ``p99``...; groups come out sorted by their keys. Only pyarrow and numpy are
needed; ``pl.from_arrow(table)`` or ``table.to_pandas()`` hand the results on.

>>> import fabricemu
>>> from fabricemu import analysis
>>> result = fabricemu.open("runs/quickstart")           # doctest: +SKIP
>>> analysis.slowdown_by_size(result, buckets=5)         # doctest: +SKIP
>>> analysis.slowdown_by_size(result, edges=["10KB", "100KB", "1MB"])  # doctest: +SKIP
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import _core, _fmt
from .errors import MissingTableError
from .metrics import (
    FLOW_COLUMNS,
    METRICS_SCHEMA,
    PFC_KEYS,
    SYNTHETIC_KEYS,
    WALL_CLOCK_METRICS,
    _as_table,
    _groups,
    _key_types,
    _keys_list,
    _np,
    _percentile,
    _table,
    pause_intervals,
    run_metrics,
)
from .results import TABLES, Result, open_result
from .scenario import Scenario

# Sweep-level functions live in fabricemu.sweep; they stay importable from here.
from .sweep import compare, saturation

__all__ = [
    "METRICS_SCHEMA",
    "SYNTHETIC_KEYS",
    "WALL_CLOCK_METRICS",
    "Source",
    "busiest_ports",
    "compare",
    "fct_percentiles",
    "goodput_per_flow",
    "goodput_per_host",
    "jain_fairness",
    "jain_index",
    "link_utilisation",
    "metrics",
    "pause_time",
    "pfc_intervals",
    "queue_cdf",
    "queue_stats",
    "queue_timeseries",
    "reordering",
    "saturation",
    "slowdown_by_size",
]

#: What the functions accept as a run.
Source = Union[Result, str, "os.PathLike[str]", pa.Table, Mapping[str, Any], Any]

#: The percentiles computed when none are given.
DEFAULT_PERCENTILES: Tuple[float, ...] = (0.5, 0.95, 0.99)

# -- resolving the source ---------------------------------------------------------------------------


class _Run:
    """The tables of one run, from whatever the caller passed."""

    def __init__(self, source: Any, main: str) -> None:
        self.main = main
        self.result: Optional[Result] = None
        self.given: Dict[str, pa.Table] = {}
        if isinstance(source, Result):
            self.result = source
            self.where = str(source.out)
        elif isinstance(source, (str, os.PathLike)):
            self.result = open_result(source)
            self.where = str(Path(source))
        elif isinstance(source, pa.Table):
            self.given[main] = source
            self.where = "the table given"
        elif isinstance(source, Mapping):
            for name, table in source.items():
                self.given[str(name)] = _as_table(table)
            self.where = "the tables given"
        elif isinstance(source, (pa.RecordBatch, pa.RecordBatchReader)) or hasattr(
            source, "__arrow_c_stream__"
        ):
            self.given[main] = _as_table(source)
            self.where = "the table given"
        else:
            raise TypeError(
                "expected a fabricemu.Result, an output folder, a pyarrow Table or a dict of tables, "
                f"not {type(source).__name__}"
            )

    @property
    def run_info(self) -> Optional[Dict[str, Any]]:
        if self.result is None:
            return None
        return self.result.run_info

    def has(self, name: str) -> bool:
        if self.result is not None:
            return self.result.has_table(name)
        return name in self.given

    def table(self, name: str, columns: Sequence[str] = ()) -> pa.Table:
        """Table ``name``, checked to have ``columns``."""
        if self.result is not None:
            table = self.result.table(name)
        elif name in self.given:
            table = self.given[name]
        else:
            hint = TABLES.get(name, "")
            if self.where == "the table given":
                hint = (
                    f"this needs the {name} table too: pass a Result, an output folder or a dict "
                    f"{{'{self.main}': ..., '{name}': ...}}"
                )
            raise MissingTableError(name, self.where, hint)
        for column in columns:
            if column not in table.column_names:
                raise MissingTableError(
                    name,
                    self.where,
                    f"it has {', '.join(table.column_names)}",
                    column=column,
                )
        return table


# -- small helpers ----------------------------------------------------------------------------------


def _pname(q: float) -> str:
    """0.5 -> "p50", 0.999 -> "p99.9"."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"a percentile is a fraction in [0, 1], not {q}")
    return "p" + f"{q * 100:.6f}".rstrip("0").rstrip(".")


def _mean(values: np.ndarray) -> Optional[float]:
    values = values[~np.isnan(values)] if values.dtype.kind == "f" else values
    return float(values.mean()) if values.size else None


def _ps(value: Union[int, str, None], what: str) -> Optional[int]:
    """A duration: integer picoseconds or a string with a unit ("10us")."""
    if value is None:
        return None
    if isinstance(value, str):
        return int(_core.parse_duration(value))
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    raise TypeError(f"{what}: expected picoseconds (an integer) or a duration like '10us', not {value!r}")


def _size(value: Union[int, float, str], what: str) -> float:
    """A size: bytes or a string with a unit ("100KB")."""
    if isinstance(value, str):
        return float(_core.parse_size(value))
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        return float(value)
    raise TypeError(f"{what}: expected bytes (a number) or a size like '100KB', not {value!r}")


def _simulated_ps(run: _Run) -> Optional[int]:
    info = run.run_info
    if not info:
        return None
    value = info.get("simulated_ps", info.get("stats", {}).get("simulated_ps"))
    return int(value) if value is not None else None


# -- run metrics ------------------------------------------------------------------------------------


def metrics(source: Source) -> Dict[str, Any]:
    """The run's headline figures, as one sweep row has them: :func:`fabricemu.metrics.run_metrics`
    of the run's flows, run.json, links and pfc tables (the same figures as ``Result.metrics()``
    and, under their summary names, ``Result.summary()``)."""
    run = _Run(source, "flows")
    flows = run.table("flows", FLOW_COLUMNS)
    return run_metrics(
        flows,
        run.run_info,
        links=run.table("links") if run.has("links") else None,
        pfc=run.table("pfc", ("time_ps", *_PFC_KEYS, "action")) if run.has("pfc") else None,
    )


# -- flow completion ---------------------------------------------------------------------------------


def fct_percentiles(
    source: Source,
    by: Union[str, Sequence[str], None] = None,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
) -> pa.Table:
    """FCT and slowdown percentiles of finished flows, overall or per group of flows (``by``: a
    flows column or several, e.g. ``"workload"``).

    Columns: the ``by`` keys, ``flows``, ``finished``, ``fct_mean_us``, ``fct_p50_us``...,
    ``slowdown_mean``, ``slowdown_p50``...
    """
    keys = _keys_list(by)
    run = _Run(source, "flows")
    flows = run.table("flows", ("fct_ps", "slowdown", *keys))
    fct = _np(flows.column("fct_ps")) / 1e6
    slowdown = _np(flows.column("slowdown"))
    cols: Dict[str, List[Any]] = {k: [] for k in keys}
    cols.update({"flows": [], "finished": [], "fct_mean_us": []})
    for q in percentiles:
        cols[f"fct_{_pname(q)}_us"] = []
    cols["slowdown_mean"] = []
    for q in percentiles:
        cols[f"slowdown_{_pname(q)}"] = []
    groups = _groups(flows, keys) if flows.num_rows or keys else [((), np.arange(0))]
    for key, idx in groups:
        for k, v in zip(keys, key):
            cols[k].append(v)
        f = fct[idx]
        s = slowdown[idx]
        cols["flows"].append(len(idx))
        cols["finished"].append(int((~np.isnan(f)).sum()))
        cols["fct_mean_us"].append(_mean(f))
        for q in percentiles:
            cols[f"fct_{_pname(q)}_us"].append(_percentile(f, q))
        cols["slowdown_mean"].append(_mean(s))
        for q in percentiles:
            cols[f"slowdown_{_pname(q)}"].append(_percentile(s, q))
    types: Dict[str, pa.DataType] = {**_key_types(flows, keys), "flows": pa.int64(), "finished": pa.int64()}
    for name in cols:
        types.setdefault(name, pa.float64())
    return _table(cols, types)


def slowdown_by_size(
    source: Source,
    buckets: int = 10,
    *,
    edges: Optional[Sequence[Union[int, float, str]]] = None,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    workload: Optional[str] = None,
) -> pa.Table:
    """FCT slowdown percentiles by flow-size bucket.

    Equal-count buckets (the default): all flows sorted by size and cut into ``buckets`` runs of
    equal count ("the smallest tenth of the flows"), each cut then moved to the nearest change of
    size (the later one on a tie) so that flows of one size share a bucket -- fewer buckets when
    there are fewer distinct sizes. Fixed edges: ``edges=[10_000, "100KB", "1MB"]`` are thresholds, giving the
    buckets ``< 10KB``, ``[10KB, 100KB)``, ``[100KB, 1MB)``, ``>= 1MB`` (empty buckets are kept).
    ``workload`` keeps only the flows of that workload.

    Columns: ``bucket``, ``label``, ``lower`` and ``upper`` (the bucket is ``lower <= size <
    upper``; ``upper`` is null for the last fixed-edge bucket), ``size_min``, ``size_max`` (of the
    flows in it), ``flows``, ``finished``, ``slowdown_mean``, ``slowdown_p50``, ...
    Slowdowns are of the finished flows in the bucket.
    """
    run = _Run(source, "flows")
    flows = run.table("flows", ("flow_id", "size_bytes", "slowdown"))
    if workload is not None:
        flows = run.table("flows", ("workload",))
        flows = flows.filter(pc.equal(flows.column("workload"), workload))
    size = _np(flows.column("size_bytes"))
    slowdown = _np(flows.column("slowdown"))
    groups: List[Tuple[float, Optional[float], np.ndarray]] = []
    if edges is None:
        if buckets < 1:
            raise ValueError(f"buckets must be at least 1, not {buckets}")
        order = np.lexsort((_np(flows.column("flow_id")), size))
        for lo_i, hi_i in _equal_count_cuts(size[order], buckets):
            idx = order[lo_i:hi_i]
            groups.append((float(size[idx].min()), float(size[idx].max()) + 1, idx))
    else:
        bounds = sorted({_size(e, "edges") for e in edges})
        if not bounds:
            raise ValueError("edges is empty")
        lows = [0.0, *bounds]
        highs: List[Optional[float]] = [*bounds, None]
        for lo, hi in zip(lows, highs):
            mask = size >= lo
            if hi is not None:
                mask &= size < hi
            groups.append((lo, hi, np.nonzero(mask)[0]))
    cols: Dict[str, List[Any]] = {
        "bucket": [],
        "label": [],
        "lower": [],
        "upper": [],
        "size_min": [],
        "size_max": [],
        "flows": [],
        "finished": [],
        "slowdown_mean": [],
    }
    for q in percentiles:
        cols[f"slowdown_{_pname(q)}"] = []
    for i, (lo, hi, idx) in enumerate(groups):
        s = slowdown[idx]
        cols["bucket"].append(i)
        cols["lower"].append(int(lo))
        cols["upper"].append(None if hi is None else int(hi))
        cols["size_min"].append(int(size[idx].min()) if len(idx) else None)
        cols["size_max"].append(int(size[idx].max()) if len(idx) else None)
        if edges is None:
            a, z = int(lo), int(hi or 0) - 1
            label = _fmt.size(a) if a == z else f"{_fmt.size(a)}-{_fmt.size(z)}"
        elif i == 0:
            label = f"< {_fmt.size(int(hi or 0))}"
        elif hi is None:
            label = f">= {_fmt.size(int(lo))}"
        else:
            label = f"{_fmt.size(int(lo))}-{_fmt.size(int(hi))}"
        cols["label"].append(label)
        cols["flows"].append(len(idx))
        cols["finished"].append(int((~np.isnan(s)).sum()))
        cols["slowdown_mean"].append(_mean(s))
        for q in percentiles:
            cols[f"slowdown_{_pname(q)}"].append(_percentile(s, q))
    types: Dict[str, pa.DataType] = {
        "bucket": pa.int32(),
        "label": pa.string(),
        "lower": pa.uint64(),
        "upper": pa.uint64(),
        "size_min": pa.uint64(),
        "size_max": pa.uint64(),
        "flows": pa.int64(),
        "finished": pa.int64(),
    }
    for name in cols:
        types.setdefault(name, pa.float64())
    return _table(cols, types, buckets="equal_count" if edges is None else "edges")


def _equal_count_cuts(sorted_sizes: np.ndarray, buckets: int) -> List[Tuple[int, int]]:
    """``[start, end)`` row ranges of equal-count buckets over sorted sizes, cuts moved to the
    nearest change of size."""
    n = len(sorted_sizes)
    if n == 0:
        return []
    changes = np.nonzero(sorted_sizes[1:] != sorted_sizes[:-1])[0] + 1  # first row of a new size
    cuts = set()
    for i in range(1, buckets):
        target = i * n // buckets
        if len(changes) == 0:
            break
        j = int(np.searchsorted(changes, target))
        candidates = []
        if j < len(changes):
            candidates.append(int(changes[j]))
        if j > 0:
            candidates.append(int(changes[j - 1]))
        best = min(candidates, key=lambda c: (abs(c - target), -c))
        cuts.add(best)
    bounds = [0, *sorted(cuts), n]
    return [(a, b) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def goodput_per_flow(source: Source) -> pa.Table:
    """Each flow's goodput: ``size_bytes x 8 / fct`` in Gbps (null while unfinished).

    Columns: ``flow_id``, ``src``, ``dst``, ``workload`` (if present), ``size_bytes``, ``start_ps``,
    ``fct_ps``, ``goodput_gbps``.
    """
    run = _Run(source, "flows")
    flows = run.table("flows", ("flow_id", "src", "dst", "size_bytes", "start_ps", "fct_ps"))
    keep = [
        c
        for c in ("flow_id", "src", "dst", "workload", "size_bytes", "start_ps", "fct_ps")
        if c in flows.column_names
    ]
    out = flows.select(keep)
    bits = pc.multiply(pc.cast(flows.column("size_bytes"), pa.float64()), 8e3)
    goodput = pc.divide(bits, pc.cast(flows.column("fct_ps"), pa.float64()))
    goodput = pc.if_else(pc.greater(flows.column("fct_ps"), 0), goodput, pa.scalar(None, pa.float64()))
    return out.append_column("goodput_gbps", goodput)


def goodput_per_host(source: Source, role: str = "dst") -> pa.Table:
    """Goodput per host as receiver (``role="dst"``) or sender (``"src"``): the bytes of the host's
    finished flows x 8 over the span from their first start to their last finish, in Gbps.

    Columns: ``host``, ``flows``, ``finished``, ``bytes`` (of finished flows), ``first_start_ps``,
    ``last_finish_ps``, ``goodput_gbps`` (null without a finished flow). Hosts without flows are
    not listed.
    """
    if role not in ("src", "dst"):
        raise ValueError(f"role is 'src' or 'dst', not {role!r}")
    run = _Run(source, "flows")
    flows = run.table("flows", (role, "size_bytes", "start_ps", "finish_ps"))
    size = _np(flows.column("size_bytes"))
    start = _np(flows.column("start_ps"))
    finish = _np(flows.column("finish_ps"))
    done = ~np.isnan(finish)
    cols: Dict[str, List[Any]] = {
        "host": [],
        "flows": [],
        "finished": [],
        "bytes": [],
        "first_start_ps": [],
        "last_finish_ps": [],
        "goodput_gbps": [],
    }
    for (host,), idx in _groups(flows, [role]):
        d = idx[done[idx]]
        cols["host"].append(host)
        cols["flows"].append(len(idx))
        cols["finished"].append(len(d))
        total = int(size[d].sum()) if len(d) else 0
        cols["bytes"].append(total)
        first = int(start[d].min()) if len(d) else None
        last = int(finish[d].max()) if len(d) else None
        cols["first_start_ps"].append(first)
        cols["last_finish_ps"].append(last)
        span = (last - first) if first is not None and last is not None else 0
        cols["goodput_gbps"].append(total * 8e3 / span if span > 0 else None)
    types = {
        "host": pa.uint32(),
        "flows": pa.int64(),
        "finished": pa.int64(),
        "bytes": pa.uint64(),
        "first_start_ps": pa.uint64(),
        "last_finish_ps": pa.uint64(),
        "goodput_gbps": pa.float64(),
    }
    return _table(cols, types, role=role)


def reordering(source: Source, by: Union[str, Sequence[str], None] = None) -> pa.Table:
    """Packet reordering seen by the receivers (flows.arrow ``out_of_order_packets`` and
    ``max_reorder_distance``), overall or per group (``by="workload"``).

    Columns: the keys, ``flows``, ``reordered_flows`` (with at least one out-of-order packet),
    ``reordered_fraction``, ``packets_sent``, ``out_of_order_packets``, ``out_of_order_fraction``
    (of packets sent), ``max_reorder_distance`` (largest of any flow), and
    ``reorder_distance_p50`` / ``_p99`` over the reordered flows' maximum distances.
    """
    keys = _keys_list(by)
    run = _Run(source, "flows")
    flows = run.table("flows", ("packets_sent", "out_of_order_packets", "max_reorder_distance", *keys))
    sent = _np(flows.column("packets_sent"))
    ooo = _np(flows.column("out_of_order_packets"))
    dist = _np(flows.column("max_reorder_distance"))
    cols: Dict[str, List[Any]] = {k: [] for k in keys}
    for name in (
        "flows",
        "reordered_flows",
        "reordered_fraction",
        "packets_sent",
        "out_of_order_packets",
        "out_of_order_fraction",
        "max_reorder_distance",
        "reorder_distance_p50",
        "reorder_distance_p99",
    ):
        cols[name] = []
    for key, idx in _groups(flows, keys) if (flows.num_rows or keys) else [((), np.arange(0))]:
        for k, v in zip(keys, key):
            cols[k].append(v)
        o = np.nan_to_num(ooo[idx])
        s = np.nan_to_num(sent[idx])
        d = np.nan_to_num(dist[idx])
        reordered = o > 0
        cols["flows"].append(len(idx))
        cols["reordered_flows"].append(int(reordered.sum()))
        cols["reordered_fraction"].append(float(reordered.mean()) if len(idx) else None)
        cols["packets_sent"].append(int(s.sum()))
        cols["out_of_order_packets"].append(int(o.sum()))
        cols["out_of_order_fraction"].append(float(o.sum() / s.sum()) if s.sum() > 0 else None)
        cols["max_reorder_distance"].append(int(d.max()) if len(idx) else None)
        cols["reorder_distance_p50"].append(_percentile(d[reordered], 0.5))
        cols["reorder_distance_p99"].append(_percentile(d[reordered], 0.99))
    types: Dict[str, pa.DataType] = {
        **_key_types(flows, keys),
        "flows": pa.int64(),
        "reordered_flows": pa.int64(),
        "packets_sent": pa.int64(),
        "out_of_order_packets": pa.int64(),
        "max_reorder_distance": pa.int64(),
    }
    for name in cols:
        types.setdefault(name, pa.float64())
    return _table(cols, types)


# -- links ------------------------------------------------------------------------------------------


def link_utilisation(
    source: Source,
    by: Optional[str] = "link",
    *,
    tier: Union[str, Sequence[str], None] = None,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
) -> pa.Table:
    """The distribution of link utilisation over the sample intervals of links.arrow, per link
    (``by="link"``), per tier (``"tier"``: host, fabric, core) or over all links (``None``).
    ``tier`` keeps only links of that tier (or tiers).

    Columns: the keys (for links: ``link``, ``src``, ``dst``, ``tier`` when present),
    ``links``, ``samples``, ``tx_bytes``, ``utilisation_mean``, ``utilisation_p50``...,
    ``utilisation_max``, and ``paused_ps`` (summed) when the table has it.
    """
    if by not in ("link", "tier", None):
        raise ValueError(f"by is 'link', 'tier' or None, not {by!r}")
    run = _Run(source, "links")
    needed = ["link", "tx_bytes", "utilisation"]
    if by == "tier" or tier is not None:
        needed.append("tier")
    links = run.table("links", needed)
    if tier is not None:
        tiers = [tier] if isinstance(tier, str) else list(tier)
        links = links.filter(pc.is_in(links.column("tier"), pa.array(tiers, pa.string())))
    keys = {"link": ["link"], "tier": ["tier"], None: []}[by]
    extra = [c for c in ("src", "dst", "tier") if by == "link" and c in links.column_names]
    util = _np(links.column("utilisation"))
    tx = _np(links.column("tx_bytes"))
    paused = _np(links.column("paused_ps")) if "paused_ps" in links.column_names else None
    link_ids = _np(links.column("link"))
    cols: Dict[str, List[Any]] = {k: [] for k in keys + extra}
    cols.update({"links": [], "samples": [], "tx_bytes": [], "utilisation_mean": []})
    for q in percentiles:
        cols[f"utilisation_{_pname(q)}"] = []
    cols["utilisation_max"] = []
    if paused is not None:
        cols["paused_ps"] = []
    groups = _groups(links, keys) if (links.num_rows or keys) else [((), np.arange(0))]
    for key, idx in groups:
        for k, v in zip(keys, key):
            cols[k].append(v)
        for c in extra:
            cols[c].append(links.column(c)[int(idx[0])].as_py())
        u = util[idx]
        cols["links"].append(len(np.unique(link_ids[idx])))
        cols["samples"].append(len(idx))
        cols["tx_bytes"].append(int(np.nansum(tx[idx])))
        cols["utilisation_mean"].append(_mean(u))
        for q in percentiles:
            cols[f"utilisation_{_pname(q)}"].append(_percentile(u, q))
        cols["utilisation_max"].append(float(np.nanmax(u)) if len(u) else None)
        if paused is not None:
            cols["paused_ps"].append(int(np.nansum(paused[idx])))
    types: Dict[str, pa.DataType] = {
        **_key_types(links, keys + extra),
        "links": pa.int64(),
        "samples": pa.int64(),
        "tx_bytes": pa.uint64(),
        "paused_ps": pa.uint64(),
    }
    for name in cols:
        types.setdefault(name, pa.float64())
    return _table(cols, types)


# -- queues -----------------------------------------------------------------------------------------

_QUEUE_KEYS = ("switch", "port", "priority")


def _queue_interval(run: _Run) -> Optional[int]:
    info = run.run_info
    if not info:
        return None
    queues = (info.get("scenario", {}).get("trace") or {}).get("queues")
    interval = queues.get("interval") if isinstance(queues, Mapping) else None
    if interval is None:
        return None
    try:
        return _ps(interval, "trace.queues.interval")
    except (TypeError, ValueError):
        return None


def _sample_times(run: _Run, queues: pa.Table) -> np.ndarray:
    """The instants the queues were sampled at: those in the table, and when the run is known,
    every multiple of the trace interval up to the end of the run (instants at which every queue
    was empty leave no row)."""
    times = np.unique(_np(queues.column("time_ps"), np.int64).astype(np.int64))
    interval = _queue_interval(run)
    end = _simulated_ps(run)
    if interval and end:
        grid = np.arange(interval, end + 1, interval, dtype=np.int64)
        times = np.union1d(times, grid)
    return times


def _select_queues(
    queues: pa.Table,
    switch: Optional[int],
    port: Optional[int],
    priority: Optional[int],
) -> pa.Table:
    for name, value in (("switch", switch), ("port", port), ("priority", priority)):
        if value is not None:
            queues = queues.filter(pc.equal(queues.column(name), value))
    return queues


def queue_cdf(
    source: Source,
    *,
    by: Optional[str] = None,
    switch: Optional[int] = None,
    port: Optional[int] = None,
    priority: Optional[int] = None,
    column: str = "bytes",
    fill_empty: bool = True,
) -> pa.Table:
    """The empirical CDF of queue depth (queues.arrow ``bytes``, or ``max_bytes`` with
    ``column="max_bytes"``) over all sampled queues (``by=None``) or per queue (``by="port"``: one
    CDF per switch, port and priority); ``switch``, ``port``, ``priority`` select queues.

    The trace leaves out empty queues unless told otherwise; with ``fill_empty`` (the default) each
    queue that appears in the trace counts 0 bytes at every sample instant it has no row for. Queues
    that were never non-empty do not appear (trace them with ``empty = true``).

    Columns: the keys (``switch``, ``port``, ``priority``) with ``by="port"``, then ``bytes`` (each
    distinct depth, ascending), ``samples`` (how many samples had it) and ``cdf`` (fraction of
    samples at or below it).
    """
    if by not in (None, "port"):
        raise ValueError(f"by is None or 'port', not {by!r}")
    run = _Run(source, "queues")
    queues = run.table("queues", ("time_ps", *_QUEUE_KEYS, column))
    times = _sample_times(run, queues)
    queues = _select_queues(queues, switch, port, priority)
    values = _np(queues.column(column), np.int64).astype(np.int64)
    keys = list(_QUEUE_KEYS) if by == "port" else []
    per_queue = _groups(queues, list(_QUEUE_KEYS))
    zeros_of: Dict[Tuple[Any, ...], int] = {}
    if fill_empty:
        for key, idx in per_queue:
            present = len(np.unique(_np(queues.column("time_ps"), np.int64)[idx]))
            zeros_of[key] = max(len(times) - present, 0)
    cols: Dict[str, List[Any]] = {k: [] for k in keys}
    cols.update({"bytes": [], "samples": [], "cdf": []})
    groups = _groups(queues, keys) if (queues.num_rows or keys) else [((), np.arange(0))]
    for key, idx in groups:
        if not fill_empty:
            zeros = 0
        elif keys:
            zeros = zeros_of.get(key, 0)
        else:
            zeros = sum(zeros_of.values())
        v = values[idx]
        if zeros:
            v = np.concatenate((v, np.zeros(zeros, dtype=np.int64)))
        if v.size == 0:
            continue
        distinct, counts = np.unique(v, return_counts=True)
        cumulative = np.cumsum(counts) / v.size
        for d, c, f in zip(distinct, counts, cumulative):
            for k, kv in zip(keys, key):
                cols[k].append(kv)
            cols["bytes"].append(int(d))
            cols["samples"].append(int(c))
            cols["cdf"].append(float(f))
    types = {**_key_types(queues, keys), "bytes": pa.uint64(), "samples": pa.int64(), "cdf": pa.float64()}
    return _table(cols, types)


def queue_timeseries(
    source: Source,
    *,
    switch: Optional[int] = None,
    port: Optional[int] = None,
    priority: Optional[int] = None,
    fill_empty: bool = True,
) -> pa.Table:
    """Queue depth over time of the selected queues (``switch``, ``port``, ``priority``; all
    queues if none is given), one row per queue and sample instant, sorted by queue and time. With
    ``fill_empty`` the instants a queue has no row for (it was empty) get a row of zeros.

    Columns: ``switch``, ``port``, ``priority``, ``time_ps``, ``bytes``, and ``packets`` and
    ``max_bytes`` when the trace has them.
    """
    run = _Run(source, "queues")
    queues = run.table("queues", ("time_ps", *_QUEUE_KEYS, "bytes"))
    times = _sample_times(run, queues)
    queues = _select_queues(queues, switch, port, priority)
    extra = [c for c in ("packets", "max_bytes") if c in queues.column_names]
    t = _np(queues.column("time_ps"), np.int64).astype(np.int64)
    values = {c: _np(queues.column(c), np.int64).astype(np.int64) for c in ["bytes", *extra]}
    cols: Dict[str, List[Any]] = {k: [] for k in (*_QUEUE_KEYS, "time_ps", "bytes", *extra)}
    for key, idx in _groups(queues, list(_QUEUE_KEYS)):
        order = idx[np.argsort(t[idx], kind="stable")]
        qt = t[order]
        if fill_empty:
            all_t = np.union1d(times, qt)
            pos = np.searchsorted(qt, all_t)
            hit = (pos < len(qt)) & (qt[np.minimum(pos, len(qt) - 1)] == all_t)
            series_t = all_t
            series = {}
            for c, v in values.items():
                s = np.zeros(len(all_t), dtype=np.int64)
                s[hit] = v[order][pos[hit]]
                series[c] = s
        else:
            series_t = qt
            series = {c: v[order] for c, v in values.items()}
        for k, kv in zip(_QUEUE_KEYS, key):
            cols[k].extend([kv] * len(series_t))
        cols["time_ps"].extend(series_t.tolist())
        for c in ["bytes", *extra]:
            cols[c].extend(series[c].tolist())
    types = {
        **_key_types(queues, list(_QUEUE_KEYS)),
        "time_ps": pa.uint64(),
        "bytes": pa.uint64(),
        "packets": queues.schema.field("packets").type if "packets" in extra else pa.uint32(),
        "max_bytes": pa.uint64(),
    }
    return _table(cols, {k: v for k, v in types.items() if k in cols})


def queue_stats(source: Source, *, fill_empty: bool = True) -> pa.Table:
    """Per queue (switch, port, priority): ``samples``, ``mean_bytes``, ``p50_bytes``,
    ``p99_bytes``, ``max_bytes`` (the largest depth seen, from ``max_bytes`` when the trace has it)
    and ``nonempty_fraction``; empty samples filled in as in :func:`queue_cdf`. Sorted by queue."""
    run = _Run(source, "queues")
    queues = run.table("queues", ("time_ps", *_QUEUE_KEYS, "bytes"))
    times = _sample_times(run, queues)
    depth = _np(queues.column("bytes"), np.int64).astype(np.int64)
    peak = (
        _np(queues.column("max_bytes"), np.int64).astype(np.int64)
        if "max_bytes" in queues.column_names
        else depth
    )
    t = _np(queues.column("time_ps"), np.int64)
    cols: Dict[str, List[Any]] = {
        k: []
        for k in (
            *_QUEUE_KEYS,
            "samples",
            "mean_bytes",
            "p50_bytes",
            "p99_bytes",
            "max_bytes",
            "nonempty_fraction",
        )
    }
    for key, idx in _groups(queues, list(_QUEUE_KEYS)):
        v = depth[idx]
        if fill_empty:
            missing = max(len(times) - len(np.unique(t[idx])), 0)
            v = np.concatenate((v, np.zeros(missing, dtype=np.int64)))
        for k, kv in zip(_QUEUE_KEYS, key):
            cols[k].append(kv)
        cols["samples"].append(len(v))
        cols["mean_bytes"].append(float(v.mean()))
        cols["p50_bytes"].append(float(np.percentile(v, 50)))
        cols["p99_bytes"].append(float(np.percentile(v, 99)))
        cols["max_bytes"].append(int(max(peak[idx].max(), v.max())))
        cols["nonempty_fraction"].append(float((v > 0).mean()))
    types = {
        **_key_types(queues, list(_QUEUE_KEYS)),
        "samples": pa.int64(),
        "mean_bytes": pa.float64(),
        "p50_bytes": pa.float64(),
        "p99_bytes": pa.float64(),
        "max_bytes": pa.uint64(),
        "nonempty_fraction": pa.float64(),
    }
    return _table(cols, types)


def busiest_ports(source: Source, n: int = 5, *, by: str = "max_bytes", fill_empty: bool = True) -> pa.Table:
    """The ``n`` queues with the largest ``by`` (``"max_bytes"``, ``"mean_bytes"``, ``"p99_bytes"``
    or ``"nonempty_fraction"``) from :func:`queue_stats`, largest first (ties by queue)."""
    stats = queue_stats(source, fill_empty=fill_empty)
    if by not in stats.column_names or by in _QUEUE_KEYS or by == "samples":
        raise ValueError(f"by is one of max_bytes, mean_bytes, p99_bytes, nonempty_fraction, not {by!r}")
    order = pc.sort_indices(
        stats,
        sort_keys=[
            (by, "descending"),
            ("switch", "ascending"),
            ("port", "ascending"),
            ("priority", "ascending"),
        ],
    )
    return stats.take(order).slice(0, max(n, 0))


# -- PFC --------------------------------------------------------------------------------------------

_PFC_KEYS = PFC_KEYS


def pfc_intervals(source: Source, *, end_ps: Union[int, str, None] = None) -> pa.Table:
    """The intervals during which each PFC-paused (switch, port, priority) stayed paused, from
    the PAUSE and RESUME rows of pfc.arrow: a PAUSE starts an interval unless already paused (a
    repeated PAUSE refreshes it), a RESUME ends it. An interval still open at the end lasts until
    ``end_ps`` (default: the end of the run when known, else the last row's time).

    Columns: ``switch``, ``port``, ``priority`` (and ``paused_port``, ``upstream`` when present),
    ``start_ps``, ``end_ps``, ``duration_ps``, ``resumed`` (false for an interval cut by the end).
    Sorted by queue, then start.
    """
    run = _Run(source, "pfc")
    pfc = run.table("pfc", ("time_ps", *_PFC_KEYS, "action"))
    extra = [c for c in ("paused_port", "upstream") if c in pfc.column_names]
    end = _ps(end_ps, "end_ps")
    if end is None:
        end = _simulated_ps(run)
    if end is None:
        end = int(pc.max(pfc.column("time_ps")).as_py() or 0) if pfc.num_rows else 0
    cols = pause_intervals(pfc, end, extra)
    types = {
        **_key_types(pfc, [*_PFC_KEYS, *extra]),
        "start_ps": pa.uint64(),
        "end_ps": pa.uint64(),
        "duration_ps": pa.uint64(),
        "resumed": pa.bool_(),
    }
    return _table(cols, types)


def pause_time(source: Source, *, end_ps: Union[int, str, None] = None) -> pa.Table:
    """PFC pause time per paused (switch, port, priority): ``pauses`` (PAUSE frames, refreshes
    included), ``resumes``, ``intervals``, ``paused_ps`` (total time paused, from
    :func:`pfc_intervals`), ``paused_fraction`` (of the run, when its length is known) and, when
    present, ``paused_port`` and ``upstream``. Sorted by queue."""
    run = _Run(source, "pfc")
    pfc = run.table("pfc", ("time_ps", *_PFC_KEYS, "action"))
    extra = [c for c in ("paused_port", "upstream") if c in pfc.column_names]
    intervals = pfc_intervals(run.result if run.result is not None else run.given, end_ps=end_ps)
    length = _ps(end_ps, "end_ps") or _simulated_ps(run)
    actions = np.asarray(pc.equal(pfc.column("action"), "pause").to_numpy(zero_copy_only=False), dtype=bool)
    extra_values = {c: pfc.column(c).to_pylist() for c in extra}
    durations: Dict[Tuple[Any, ...], Tuple[int, int]] = {}
    for key, idx in _groups(intervals, list(_PFC_KEYS)):
        d = intervals.column("duration_ps").take(pa.array(idx)).to_pylist()
        durations[key] = (len(idx), int(sum(d)))
    cols: Dict[str, List[Any]] = {
        k: [] for k in (*_PFC_KEYS, *extra, "pauses", "resumes", "intervals", "paused_ps", "paused_fraction")
    }
    for key, idx in _groups(pfc, list(_PFC_KEYS)):
        for k, kv in zip(_PFC_KEYS, key):
            cols[k].append(kv)
        for c in extra:
            cols[c].append(extra_values[c][int(idx[0])])
        count, total = durations.get(key, (0, 0))
        cols["pauses"].append(int(actions[idx].sum()))
        cols["resumes"].append(int((~actions[idx]).sum()))
        cols["intervals"].append(count)
        cols["paused_ps"].append(total)
        cols["paused_fraction"].append(total / length if length else None)
    types = {
        **_key_types(pfc, [*_PFC_KEYS, *extra]),
        "pauses": pa.int64(),
        "resumes": pa.int64(),
        "intervals": pa.int64(),
        "paused_ps": pa.uint64(),
        "paused_fraction": pa.float64(),
    }
    return _table(cols, types)


# -- fairness ---------------------------------------------------------------------------------------


def jain_index(values: Any) -> Optional[float]:
    """Jain's fairness index ``(sum x)^2 / (n * sum x^2)`` of the values (nulls and NaN left out):
    1 when all are equal, ``1/n`` when one takes everything; None for no values or all zero."""
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        x = _np(values)
    else:
        x = np.asarray(values, dtype=np.float64)
    x = x[~np.isnan(x)]
    if x.size == 0:
        return None
    square = float(np.square(x).sum())
    if square == 0.0:
        return None
    return float(x.sum() ** 2 / (x.size * square))


def jain_fairness(
    source: Source,
    interval: Union[int, str, None] = None,
    *,
    basis: str = "auto",
    workload: Optional[str] = None,
    initial_rate: Union[int, str, None] = None,
) -> pa.Table:
    """Jain's fairness index of the active flows' rates over time.

    At each sample instant ``t`` (every ``interval`` from the first flow's start; default a
    hundredth of the span of the flows), the flows active then (started, not yet finished) are
    measured:

    - ``basis="rates"``: each flow's congestion-control rate at ``t`` (the last rates.arrow row at
      or before ``t``; before its first row, ``initial_rate``, by default the host link rate when
      the run is known, else the flow is left out);
    - ``basis="flows"``: each finished flow's mean rate over its life, size x 8 / FCT (unfinished
      flows are left out): the fairness of what the flows achieved, when there is no rate trace;
    - ``"auto"``: rates when the run has a rates table, else flows.

    ``workload`` keeps the flows of one workload. Columns: ``time_ps``, ``active_flows``,
    ``measured_flows``, ``jain`` (null with nothing measured), ``total_gbps`` (sum of the measured
    rates). The schema metadata ``fabricemu.basis`` says which basis was used.
    """
    if basis not in ("auto", "rates", "flows"):
        raise ValueError(f"basis is 'auto', 'rates' or 'flows', not {basis!r}")
    run = _Run(source, "flows")
    if basis == "auto":
        basis = "rates" if run.has("rates") else "flows"
    flows = run.table("flows", ("flow_id", "start_ps", "finish_ps", "size_bytes"))
    if workload is not None:
        flows = run.table("flows", ("workload",))
        flows = flows.filter(pc.equal(flows.column("workload"), workload))
    fid = _np(flows.column("flow_id"), np.int64).astype(np.int64)
    start = _np(flows.column("start_ps"))
    finish = _np(flows.column("finish_ps"))
    size = _np(flows.column("size_bytes"))
    step = _ps(interval, "interval")
    if step is not None and step <= 0:
        raise ValueError(f"interval must be positive, not {interval!r}")
    cols: Dict[str, List[Any]] = {
        "time_ps": [],
        "active_flows": [],
        "measured_flows": [],
        "jain": [],
        "total_gbps": [],
    }
    types = {
        "time_ps": pa.uint64(),
        "active_flows": pa.int64(),
        "measured_flows": pa.int64(),
        "jain": pa.float64(),
        "total_gbps": pa.float64(),
    }
    if len(fid) == 0:
        return _table(cols, types, basis=basis)
    t0 = int(np.nanmin(start))
    end = _simulated_ps(run)
    if end is None:
        end = int(np.nanmax(finish)) if not np.all(np.isnan(finish)) else int(np.nanmax(start))
    if step is None:
        step = max((end - t0 + 99) // 100, 1)
    grid = np.arange(t0 + step, end + 1, step, dtype=np.int64)
    if len(grid) == 0:
        grid = np.array([end], dtype=np.int64)

    if basis == "rates":
        rates = run.table("rates", ("time_ps", "flow_id", "rate_bps"))
        r_fid = _np(rates.column("flow_id"), np.int64).astype(np.int64)
        r_t = _np(rates.column("time_ps"), np.int64).astype(np.int64)
        r_v = _np(rates.column("rate_bps"))
        order = np.lexsort((r_t, r_fid))
        r_fid, r_t, r_v = r_fid[order], r_t[order], r_v[order]
        init = _initial_rate(run, initial_rate)
        value = np.full((len(fid), len(grid)), np.nan)
        for i, f in enumerate(fid):
            lo, hi = np.searchsorted(r_fid, [f, f + 1])
            times = r_t[lo:hi]
            pos = np.searchsorted(times, grid, side="right") - 1
            row = np.where(pos >= 0, r_v[lo:hi][np.maximum(pos, 0)] if hi > lo else np.nan, np.nan)
            if init is not None:
                row = np.where(pos < 0, init, row)
            value[i] = row
    else:
        mean_rate = np.where(finish > start, size * 8.0 / ((finish - start) * 1e-12), np.nan)
        value = np.repeat(mean_rate[:, None], len(grid), axis=1)

    active = (start[:, None] <= grid[None, :]) & (
        np.isnan(finish)[:, None] | (finish[:, None] > grid[None, :])
    )
    for j, t in enumerate(grid):
        x = value[active[:, j], j]
        x = x[~np.isnan(x)]
        cols["time_ps"].append(int(t))
        cols["active_flows"].append(int(active[:, j].sum()))
        cols["measured_flows"].append(int(x.size))
        cols["jain"].append(jain_index(x))
        cols["total_gbps"].append(float(x.sum() / 1e9) if x.size else None)
    return _table(cols, types, basis=basis)


def _initial_rate(run: _Run, given: Union[int, str, None]) -> Optional[float]:
    if isinstance(given, str):
        return float(_core.parse_rate(given))
    if given is not None:
        return float(given)
    info = run.run_info
    if not info:
        return None
    try:
        described = info.get("fabric") or Scenario.from_dict(info["scenario"]).describe()["topology"]
        return float(_core.parse_rate(described["host_link"]["rate"]))
    except (KeyError, TypeError, ValueError):
        return None
