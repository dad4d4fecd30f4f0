"""Running scenarios and reading their output folders."""

from __future__ import annotations

import html
import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Union

import pyarrow as pa
import pyarrow.compute as pc

from . import _fmt, _storage
from ._run import ProgressCallback, run
from .errors import MissingTableError
from .metrics import SYNTHETIC_KEYS, run_metrics, summary_view, synthetic_metrics
from .scenario import PathLike, Scenario

if TYPE_CHECKING:
    import pyarrow.dataset

__all__ = [
    "SYNTHETIC_KEYS",
    "TABLES",
    "FabricNames",
    "ProgressCallback",
    "Result",
    "attach_names",
    "open_result",
    "run",
    "synthetic_metrics",
]

#: The tables a run's folder may hold (``<name>.arrow``) and how to get each one.
TABLES: Dict[str, str] = {
    "flows": "every run writes it",
    "queues": 'add queues = { interval = "1us" } to the scenario\'s [trace] table',
    "links": 'add links = { interval = "10us" } to the scenario\'s [trace] table',
    "pfc": "add pfc = true to the scenario's [trace] table (with [switch] pfc = { enabled = true })",
    "rates": 'add rates = { interval = "1us" } to the [trace] table '
    '(with [transport] cc = "dcqcn", "dctcp", "swift", "hpcc" or "nscc")',
    "packets": "add packets = {} to the scenario's [trace] table (filters: flows, nodes, ports, start, "
    "end, max_rows; CLI: --trace packets)",
    "latency": "add latency = true to the scenario's [trace] table (CLI: --trace latency)",
    "collectives": "runs with collective workloads write it",
    "faults": "runs with [[fault]] or [[failure_process]] tables write it",
    "circuits": "runs with an [ocs] table (an optical circuit switch) write it",
    "nodes": "every run writes it (runs of fabricemu 0.1 before nodes.arrow existed do not)",
    "ports": "every run writes it (runs of fabricemu 0.1 before ports.arrow existed do not)",
    "ops": 'runs with step workloads (kind = "graph", "training" or "inference") write it',
    "steps": 'runs with step workloads (kind = "graph", "training" or "inference") write it',
}

#: Columns holding node ids, in the tables fabricemu writes (flows' ``src``/``dst`` are hosts,
#: whose node ids are their host ids).
NODE_COLUMNS = ("node", "switch", "src", "dst", "upstream", "peer_node")
#: Columns holding port ids (a port is one direction of a link: links.arrow's ``link`` is its
#: egress port).
PORT_COLUMNS = ("port", "paused_port", "link", "peer_port")


def open_result(path: PathLike) -> Result:
    """The :class:`Result` of an earlier run, from its output folder.

    Nothing is read but run.json; each table is memory-mapped when first used, so a large trace is
    never read whole (``result.dataset("packets")`` scans one with a filter).
    A sweep's folder (with ``sweep.arrow``) is read by :func:`fabricemu.open_sweep` instead.
    """
    p = Path(path)
    if not (p / "run.json").is_file():
        if (p / "sweep.arrow").is_file():
            raise FileNotFoundError(
                2,
                "this is a sweep's folder: fabricemu.open_sweep(path) reads its table, and "
                "fabricemu.open(path / row['run']) one of its runs",
                str(p),
            )
        raise FileNotFoundError(2, "not a fabricemu output folder (no run.json)", str(p))
    return Result(p)


class Result:
    """The outputs of one run: ``flows`` and the other trace tables (pyarrow Tables, memory-mapped
    on first use), ``run_info`` (run.json), ``summary()``.

    ``tables()`` lists the tables the run wrote; ``table(name, columns=..., filter=...)`` reads one
    (or a part of one), ``dataset(name)`` gives a ``pyarrow.dataset.Dataset`` for filtered scans of a
    large trace. Every table works with polars (``pl.from_arrow``) and DuckDB.
    """

    def __init__(
        self,
        out: PathLike,
        *,
        run_info: Optional[Dict[str, Any]] = None,
        _keep: Any = None,
    ) -> None:
        self.out = Path(out)
        self._run_info = run_info
        self._tables: Dict[str, pa.Table] = {}
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

    # -- tables -------------------------------------------------------------------------------

    def path_of(self, name: str) -> Path:
        """The file of table ``name``: ``<out>/<name>.arrow``, or ``<name>.parquet`` for a run with
        ``[output] format = "parquet"`` (the ``.arrow`` path when neither exists)."""
        return _storage.find(self.out, name) or self.out / f"{name}.arrow"

    def has_table(self, name: str) -> bool:
        return _storage.find(self.out, name) is not None

    def tables(self) -> List[str]:
        """The names of the tables in the output folder (``flows`` first, then by name)."""
        names = sorted(
            {p.stem for p in self.out.iterdir() if p.is_file() and p.suffix in (".arrow", ".parquet")}
        )
        return sorted(names, key=lambda n: (n != "flows", n))

    def table(
        self,
        name: str,
        columns: Optional[Sequence[str]] = None,
        filter: Optional[Any] = None,  # noqa: A002 - the name pyarrow.dataset uses
    ) -> pa.Table:
        """Table ``name`` (``"flows"``, ``"queues"``, ``"links"``, ``"pfc"``, ``"rates"``, ``"nodes"``,
        ``"ports"``, ...).

        Without ``columns`` and ``filter`` the whole table, memory-mapped (its pages are read when
        used) and cached; with them, only those columns and the rows matching ``filter`` (a
        ``pyarrow.compute`` expression such as ``pc.field("flow_id") == 3``), scanned batch by batch.
        The files store string columns dictionary-encoded; tables read here have them as plain
        strings. Arrow files (compressed or not) and Parquet files (``[output]``) read alike.
        Raises :class:`fabricemu.MissingTableError` (a ``FileNotFoundError``) if the run did not write
        the table, saying how to turn it on.
        """
        if columns is None and filter is None:
            cached = self._tables.get(name)
            if cached is None:
                cached = self._read(name)
                self._tables[name] = cached
            return cached
        scanned = self.dataset(name).to_table(columns=list(columns) if columns else None, filter=filter)
        return _storage.plain_strings(scanned)

    def dataset(self, name: str) -> pyarrow.dataset.Dataset:
        """A ``pyarrow.dataset.Dataset`` over table ``name``, for filtered or batched scans of a
        trace too large to read whole (``ds.to_batches(filter=...)``, ``ds.scanner(...)``); its
        string columns are dictionary-encoded, as in the file."""
        import pyarrow.dataset as pads

        self._require(name)
        path = self.path_of(name)
        return pads.dataset(os.fspath(path), format="parquet" if path.suffix == ".parquet" else "ipc")

    def _require(self, name: str) -> None:
        if not self.has_table(name):
            raise MissingTableError(name, str(self.out), TABLES.get(name, ""))

    def _read(self, name: str) -> pa.Table:
        self._require(name)
        return _storage.plain_strings(_storage.read(self.path_of(name)))

    @property
    def nodes(self) -> pa.Table:
        """The fabric's nodes (nodes.arrow): ``node`` (id), ``name`` (``"leaf:3"``, ``"gpu:17"``: the
        names ``[[fault]]`` accepts), ``role``, ``index`` (position among its role), ``host``,
        ``ports``, and ``pod``, ``group``, ``plane``, ``server``, ``rack``, ``rail``, ``domain`` (null
        where they do not apply). Row ``i`` is node ``i``."""
        return self.table("nodes")

    @property
    def ports(self) -> pa.Table:
        """The fabric's ports (ports.arrow), one per direction of every link: ``port`` (id; links.arrow's
        ``link`` and queues.arrow's ``port``), ``node``, ``node_name``, ``index`` (position on its
        node), ``peer_node``, ``peer_name``, ``peer_port`` (the reverse direction), ``rate_bps``,
        ``delay_ps``, ``tier``. Row ``i`` is port ``i``."""
        return self.table("ports")

    def names(self) -> FabricNames:
        """Names of this run's nodes and ports (:class:`FabricNames`), from nodes.arrow and
        ports.arrow; a run written before those tables existed gets ``"node 5"``, ``"port 12"``."""
        if self.has_table("nodes") and self.has_table("ports"):
            return FabricNames(self.nodes, self.ports)
        return FabricNames(None, None)

    def with_names(self, table: Union[str, pa.Table]) -> pa.Table:
        """``table`` (a table or its name) with a ``<column>_name`` column after every node or
        port column (``switch`` -> ``switch_name`` ``"agg:3"``, ``port`` -> ``port_name``
        ``"agg:3 -> core:1"``, ``link`` -> ``link_name``, ``src``, ``dst``, ``upstream``, ...):
        :func:`attach_names` with this run's nodes and ports."""
        t = self.table(table) if isinstance(table, str) else table
        return attach_names(t, self.nodes, self.ports)

    @property
    def flows(self) -> pa.Table:
        """One row per flow (read from flows.arrow, memory-mapped, on first use)."""
        return self.table("flows")

    @property
    def queues(self) -> pa.Table:
        """Queue depth samples per switch port and priority (queues.arrow)."""
        return self.table("queues")

    @property
    def links(self) -> pa.Table:
        """Bytes, utilisation and paused time per link and interval (links.arrow)."""
        return self.table("links")

    @property
    def pfc(self) -> pa.Table:
        """Every PFC PAUSE and RESUME (pfc.arrow)."""
        return self.table("pfc")

    @property
    def rates(self) -> pa.Table:
        """Congestion-control rate changes per flow (rates.arrow)."""
        return self.table("rates")

    @property
    def packets(self) -> pa.Table:
        """Per-packet events at egress queues (packets.arrow, when ``[trace] packets`` is on):
        ``time_ps``, ``event`` (enqueue, dequeue, drop, ecn_mark, trim, pause_blocked), ``node``,
        ``port``, ``port_index``, ``prio``, ``flow_id``, ``seq``, ``size``, ``queue_bytes``, ``ecn``,
        ``kind`` (data, ack, nack, cnp, pfc), ``src``, ``dst``, ``retx``, ``pfc_class``,
        ``pfc_action`` (docs/packet-traces.md). :func:`fabricemu.pcap.write_pcap` turns the rows of
        chosen ports into a pcapng file."""
        return self.table("packets")

    @property
    def latency(self) -> pa.Table:
        """One-way packet latency histograms per workload (latency.arrow, when ``[trace] latency``
        is on): ``workload``, ``workload_index``, ``size_min_bytes``, ``size_max_bytes`` (the flow-size
        bucket), ``lower_ps``, ``upper_ps``, ``count`` (non-empty buckets); ``run_info["latency"]``
        holds the exact min, max, mean, stddev and the percentiles and jitter, in all, per workload
        and per flow-size bucket."""
        return self.table("latency")

    @property
    def collectives(self) -> pa.Table:
        """One row per collective (a group of ranks of a ``kind = "collective"`` workload) and
        iteration (collectives.arrow, read on first use): ``op``, ``algorithm``, ``group``, ``ranks``,
        ``hosts``, ``start_ps``, ``finish_ps``, ``duration_ps``, ``algbw_bps``, ``busbw_bps``, and per
        tier (scale-up: both hosts in one domain; scale-out: the others) ``scaleup_flow_bytes``,
        ``scaleout_flow_bytes``, ``scaleup_time_ps``, ``scaleout_time_ps``, ``scaleup_busbw_bps``,
        ``scaleout_busbw_bps`` (docs/collectives.md defines them). The flows of each carry its
        ``collective`` id and ``collective_iteration`` in ``flows``."""
        return self.table("collectives")

    @property
    def actions(self) -> pa.Table:
        """One row per action a live controller applied (actions.arrow): ``time_ps``, ``source``
        (``"python"`` or ``"policy:telemetry_aware"``), ``action``, ``target``, ``value``, ``detail``
        (docs/control.md defines them). A run whose controller (or policy) applied nothing writes no
        actions.arrow: then an empty table with these columns."""
        if not any(self.out.glob("actions.*")):
            return pa.table(
                {
                    "time_ps": pa.array([], pa.int64()),
                    **{
                        c: pa.array([], pa.string())
                        for c in ("source", "action", "target", "value", "detail")
                    },
                }
            )
        return self.table("actions")

    @property
    def faults(self) -> pa.Table:
        """One row per fault period applied (faults.arrow, runs with ``[[fault]]`` or
        ``[[failure_process]]`` tables): ``source``, ``index``, ``kind``, ``target``, ``time_ps``,
        ``end_ps``, ``duration_ps``, ``links``, ``num_links``, ``detection_ps``, ``packets_lost``
        (docs/failures.md defines them)."""
        return self.table("faults")

    @property
    def circuits(self) -> pa.Table:
        """One row per optical circuit that came up or went dark (circuits.arrow, runs with an
        ``[ocs]`` table): ``time_ps``, ``event`` ("up", "down"), ``source`` ("initial", "schedule",
        "control"), ``reconfiguration``, ``ocs_port_a``, ``ocs_port_b``, ``switch_a``, ``switch_b``,
        ``name_a``, ``name_b``, ``port_a``, ``port_b`` (docs/ocs.md defines them)."""
        return self.table("circuits")

    @property
    def ops(self) -> pa.Table:
        """One row per step-graph op and rank it occupies (ops.arrow, read on first use):
        ``workload``, ``op``, ``iteration``, ``rank``, ``node``, ``kind`` (compute, send,
        collective), ``phase``, ``name``, ``collective_op``, ``algorithm``, ``start_ps``, ``end_ps``,
        ``duration_ps``, ``bytes``, ``is_compute`` (docs/step-workloads.md)."""
        return self.table("ops")

    @property
    def steps(self) -> pa.Table:
        """One row per step workload and iteration (steps.arrow): ``start_ps``, ``end_ps``,
        ``time_ps``, per-rank mean and max of compute, communication, exposed communication and
        bubble time (``compute_ps_mean``, ``exposed_comm_ps_max``, ...), and the fractions
        ``compute_fraction``, ``exposed_comm_fraction``, ``bubble_fraction``
        (docs/step-workloads.md defines them)."""
        return self.table("steps")

    def metrics(self) -> Dict[str, Any]:
        """The run's metrics as a sweep row has them (:func:`fabricemu.metrics.run_metrics`: the
        keys of :data:`fabricemu.metrics.METRICS_SCHEMA`)."""
        return run_metrics(
            self.flows,
            self.run_info,
            links=self.links if self.has_table("links") else None,
            pfc=self.pfc if self.has_table("pfc") else None,
        )

    def summary(self) -> Dict[str, Any]:
        """Headline figures, a view of :meth:`metrics` (:func:`fabricemu.metrics.summary_view`):
        ``flows``, ``finished``, ``unfinished``, FCT (us) and slowdown percentiles of finished flows
        (``fct_p50_us``, ``fct_p99_us``, ``slowdown_p50``, ``slowdown_p95``, ``slowdown_p99``),
        ``simulated_us``, ``events``, ``packet_hops``, their rates per wall-clock second,
        ``wall_seconds``, ``drops``, ``interrupted`` (counters 0 when unknown); then the other
        metrics (``flows_finished``, ``goodput_gbps``, ``retransmits``, ``ecn_marks``, ``cnps``,
        ``pause_us``, ``max_queue_bytes``); with synthetic workloads also the measurement window's
        :data:`SYNTHETIC_KEYS` (``accepted_throughput``, ``offered_load``, ``latency_mean_us``,
        ``latency_p50_us``, ``latency_p99_us``, ``latency_max_us``, ``messages_measured``,
        ``messages_unfinished``)."""
        return summary_view(self.metrics(), self.run_info)

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

    def _repr_html_(self) -> str:
        try:
            s = self.summary()
            info = self.run_info
        except (OSError, ValueError, KeyError, pa.ArrowException) as e:
            where = html.escape(str(self.out))
            return f"<div><b>fabricemu.Result</b> {where}: unreadable ({html.escape(str(e))})</div>"
        name = str(info.get("scenario", {}).get("name") or self.out.name)
        rows = [
            ("flows finished", f"{s['finished']:,} / {s['flows']:,}"),
            ("FCT p50 / p99", f"{_fmt.micros(s['fct_p50_us'])} / {_fmt.micros(s['fct_p99_us'])}"),
            (
                "slowdown p50 / p95 / p99",
                " / ".join(_fmt.number(s[k]) for k in ("slowdown_p50", "slowdown_p95", "slowdown_p99")),
            ),
            ("simulated", _fmt.duration_ps(s["simulated_us"] * 1e6)),
            ("events", f"{_fmt.count(s['events'])} ({_fmt.rate(s['events_per_second'])})"),
            ("packet-hops", f"{_fmt.count(s['packet_hops'])} ({_fmt.rate(s['packet_hops_per_second'])})"),
            ("wall", _fmt.seconds(s["wall_seconds"])),
            ("drops", _fmt.count(s["drops"])),
            ("seed", str(info.get("seed", ""))),
            ("version", str(info.get("version", ""))),
        ]
        body = "".join(
            f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
            f"<td style='text-align:left'>{html.escape(v)}</td></tr>"
            for k, v in rows
        )
        tables = []
        for t in self.tables():
            try:
                n = _count_rows(self.path_of(t))
                size = self.path_of(t).stat().st_size
                tables.append(f"<li><code>{html.escape(t)}</code>: {n:,} rows, {_fmt.size(size)}</li>")
            except (OSError, pa.ArrowException) as e:
                tables.append(f"<li><code>{html.escape(t)}</code>: unreadable ({html.escape(str(e))})</li>")
        state = " <b style='color:#b00'>interrupted</b>" if s["interrupted"] else ""
        return (
            f"<div><b>fabricemu.Result</b> {html.escape(name)}{state} "
            f"<code>{html.escape(str(self.out))}</code><table>{body}</table>"
            f"<details><summary>tables</summary><ul>{''.join(tables)}</ul></details></div>"
        )


def _count_rows(path: Path) -> int:
    return _storage.rows(path)


def _string_column(table: pa.Table, name: str) -> pa.Array:
    col = table.column(name).combine_chunks()
    if pa.types.is_dictionary(col.type):
        col = col.cast(col.type.value_type)
    return col


class FabricNames:
    """Names of a run's nodes (``"agg:3"``) and ports (``"agg:3 -> core:1"``: the port's node, then
    the node at the far end), from its nodes and ports tables (``None``: ids only)."""

    def __init__(self, nodes: Optional[pa.Table], ports: Optional[pa.Table]) -> None:
        self._nodes: List[str] = []
        self._ports: List[str] = []
        if nodes is not None and nodes.num_rows:
            ids = nodes.column("node").to_pylist()
            names = _string_column(nodes, "name").to_pylist()
            self._nodes = [""] * (max(ids) + 1)
            for i, n in zip(ids, names):
                self._nodes[i] = n
        if ports is not None and ports.num_rows:
            ids = ports.column("port").to_pylist()
            a = _string_column(ports, "node_name").to_pylist()
            b = _string_column(ports, "peer_name").to_pylist()
            self._ports = [""] * (max(ids) + 1)
            for i, x, y in zip(ids, a, b):
                self._ports[i] = f"{x} -> {y}"

    def __bool__(self) -> bool:
        return bool(self._nodes)

    def node(self, node: Optional[int]) -> str:
        """``"leaf:3"`` for node id 3's name, ``"node 3"`` without names."""
        if node is None:
            return "-"
        n = int(node)
        return self._nodes[n] if 0 <= n < len(self._nodes) and self._nodes[n] else f"node {n}"

    def port(self, port: Optional[int]) -> str:
        """``"agg:3 -> core:1"`` for a port (one direction of a link), ``"port 52"`` without names."""
        if port is None:
            return "-"
        p = int(port)
        return self._ports[p] if 0 <= p < len(self._ports) and self._ports[p] else f"port {p}"

    def queue(self, port: Optional[int], priority: Optional[int]) -> str:
        """``"agg:3 -> core:1 prio 3"``: an egress queue."""
        return f"{self.port(port)} prio {priority}"


def attach_names(table: pa.Table, nodes: pa.Table, ports: pa.Table) -> pa.Table:
    """``table`` with a ``<column>_name`` string column after each column of node ids (``node``,
    ``switch``, ``src``, ``dst``, ``upstream``, ``peer_node``: ``"leaf:3"``) and of port ids
    (``port``, ``paused_port``, ``link``, ``peer_port``: ``"leaf:3 -> spine:0"``, the port's node
    and the node at the far end). ``nodes`` and ``ports`` are a run's nodes and ports tables
    (``result.nodes``, ``result.ports``, or read from nodes.arrow / ports.arrow); a column whose
    ``<column>_name`` already exists is left alone. A null id gives a null name."""
    node_names = _string_column(nodes, "name")
    node_index = pc.sort_indices(nodes.column("node"))
    node_names = node_names.take(node_index)
    port_labels = pc.binary_join_element_wise(
        _string_column(ports, "node_name"), _string_column(ports, "peer_name"), " -> "
    ).take(pc.sort_indices(ports.column("port")))
    out = table
    for name in list(table.column_names):
        if f"{name}_name" in out.column_names:
            continue
        if name in NODE_COLUMNS:
            labels = node_names
        elif name in PORT_COLUMNS:
            labels = port_labels
        else:
            continue
        ids = out.column(name)
        if not pa.types.is_integer(ids.type):
            continue
        named = pc.take(labels, ids.cast(pa.int64()))
        out = out.add_column(out.column_names.index(name) + 1, f"{name}_name", named)
    return out


def _quantile(values: pa.Array, q: float) -> Optional[float]:
    if len(values) == 0:
        return None
    v = pc.quantile(values, q=q, interpolation="linear")[0].as_py()
    return None if v is None or math.isnan(v) else float(v)


def _num(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:.3g}"
