"""Self-contained HTML reports of a run or a sweep, with the plots embedded as PNG images.

Needs matplotlib (``pip install 'fabricemu[plot]'``). ``fabricemu report OUT`` calls
:func:`write_report`.

A run's report: the summary, the fabric, FCT slowdown by flow size and its CDF, the queue depth over
time of the busiest ports, a heat map of link utilisation, the PFC pause timeline and the
congestion-control rates of a few flows -- each plot when the run traced what it needs, else a note
saying how to trace it. A sweep's report: its table, and each metric against the swept parameter with
one line per variant (the mean over seeds, with the seeds' range as error bars).
"""

from __future__ import annotations

import base64
import html
import io
import math
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import _core, _fmt, analysis
from ._core import __version__
from .errors import MissingTableError
from .results import Result, open_result
from .scenario import PathLike, fabric_links, fabric_shape
from .sweep import SWEEP_FILE, base_scenario, open_sweep, parameters

__all__ = ["PLOT_EXTRA", "report_html", "write_report"]

PLOT_EXTRA = "pip install 'fabricemu[plot]'"

#: Sweep metrics plotted against the parameters, with their axis labels.
SWEEP_PLOTS: Tuple[Tuple[str, str], ...] = (
    ("slowdown_p99", "FCT slowdown p99"),
    ("slowdown_p50", "FCT slowdown p50"),
    ("fct_p99_us", "FCT p99 (us)"),
    ("goodput_gbps", "goodput (Gbps)"),
    ("drops", "packets dropped"),
    ("pause_us", "PFC pause time (us, summed over links)"),
    ("max_queue_bytes", "largest queue (bytes)"),
    ("ecn_marks", "ECN marks"),
    # Synthetic traffic: against workload.0.load these are the accepted-throughput and
    # latency-vs-offered-load curves.
    ("accepted_throughput", "accepted throughput (fraction of injection bandwidth)"),
    ("latency_mean_us", "message latency mean (us)"),
    ("latency_p99_us", "message latency p99 (us)"),
)


def _matplotlib() -> Any:
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError(f"fabricemu reports need matplotlib: {PLOT_EXTRA}") from None
    del matplotlib
    return Figure


def write_report(path: PathLike, out: Optional[PathLike] = None, *, title: Optional[str] = None) -> Path:
    """Write the HTML report of the run or sweep in folder ``path`` to ``out`` (default
    ``<path>/report.html``); returns the file written."""
    folder = Path(path)
    target = Path(out) if out is not None else folder / "report.html"
    text = report_html(folder, title=title)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(target)
    return target


def report_html(path: PathLike, *, title: Optional[str] = None) -> str:
    """The HTML report of the run or sweep in folder ``path``, as text."""
    folder = Path(path)
    if (folder / SWEEP_FILE).is_file() and not (folder / "run.json").is_file():
        return _sweep_report(folder, title)
    return _run_report(open_result(folder), title)


# -- building blocks --------------------------------------------------------------------------------

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1100px;
       color: #222; padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { font-size: 1.25em; margin-top: 1.8em;
     border-bottom: 1px solid #ddd; padding-bottom: 0.2em; }
table { border-collapse: collapse; font-size: 0.9em; margin: 0.5em 0; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.6em; text-align: right; }
th { background: #f4f4f4; } td.l, th.l { text-align: left; }
.note { color: #666; font-style: italic; } .err { color: #b00; }
figure { margin: 1em 0; } figcaption { color: #555; font-size: 0.9em; }
img { max-width: 100%; } code { background: #f4f4f4; padding: 0 0.2em; }
.meta { color: #666; font-size: 0.9em; }
"""


class _Page:
    def __init__(self, title: str) -> None:
        self.title = title
        self.parts: List[str] = []

    def h2(self, text: str) -> None:
        self.parts.append(f"<h2>{html.escape(text)}</h2>")

    def p(self, text: str, cls: str = "") -> None:
        c = f" class='{cls}'" if cls else ""
        self.parts.append(f"<p{c}>{text}</p>")

    def note(self, text: str) -> None:
        self.p(html.escape(text), "note")

    def table(self, header: Sequence[str], rows: Sequence[Sequence[Any]], left: int = 1) -> None:
        head = "".join(
            f"<th class='{'l' if i < left else ''}'>{html.escape(str(h))}</th>" for i, h in enumerate(header)
        )
        body = []
        for row in rows:
            cells = []
            for i, v in enumerate(row):
                cls = "l" if i < left else ""
                cells.append(f"<td class='{cls}'>{html.escape(_cell(v))}</td>")
            body.append("<tr>" + "".join(cells) + "</tr>")
        self.parts.append(f"<table><tr>{head}</tr>{''.join(body)}</table>")

    def figure(self, fig: Any, caption: str) -> None:
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
        data = base64.b64encode(buf.getvalue()).decode("ascii")
        self.parts.append(
            f"<figure><img alt='{html.escape(caption)}' src='data:image/png;base64,{data}'>"
            f"<figcaption>{html.escape(caption)}</figcaption></figure>"
        )

    def html(self) -> str:
        return (
            "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<title>{html.escape(self.title)}</title><style>{_CSS}</style></head><body>"
            f"<h1>{html.escape(self.title)}</h1>" + "\n".join(self.parts) + "</body></html>\n"
        )


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if math.isnan(v):
            return "-"
        return f"{v:.4g}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _section(page: _Page, title: str, build: Callable[[], None]) -> None:
    """A section whose plot needs a table: a note instead when the run did not trace it."""
    page.h2(title)
    try:
        build()
    except MissingTableError as e:
        page.note(f"Not in this run: {e}")


# -- a run ------------------------------------------------------------------------------------------


def _run_report(result: Result, title: Optional[str]) -> str:
    Figure = _matplotlib()
    info = result.run_info
    name = str(info.get("scenario", {}).get("name") or result.out.name)
    page = _Page(title or f"fabricemu run: {name}")
    page.p(
        html.escape(
            f"{result.out} - fabricemu {info.get('version', '?')} (report by {__version__}), seed "
            f"{info.get('seed', '?')}" + (" - INTERRUPTED, partial outputs" if result.interrupted else "")
        ),
        "meta",
    )

    page.h2("Summary")
    m = analysis.metrics(result)
    rows = [(k, v) for k, v in m.items() if v is not None]
    page.table(["metric", "value"], rows)
    try:
        scenario = result.scenario
        page.p(html.escape(scenario.summary_line()))
        # The fabric as the run built it (run.json's "fabric"), else as the scenario builds it.
        described = info.get("fabric") or scenario.describe()["topology"]
        rows = [
            ("shape", fabric_shape(described)),
            ("hosts", described["hosts"]),
            (
                "switches",
                f"{described['switches']} ("
                + ", ".join(f"{r['switches']} {r['role']}" for r in described.get("roles", []))
                + ")",
            ),
            (
                "links",
                f"{described['links']} ("
                + ", ".join(f"{t['links']} {t['tier']}" for t in described.get("tiers", []))
                + ")",
            ),
            ("link rates", fabric_links(described)),
        ]
        fabric = scenario.fabric_summary()
        rows += [
            ("bisection", _fmt.bps(fabric["bisection_bps"])),
            ("oversubscription", fabric["oversubscription"]),
            ("diameter (links)", fabric["diameter_links"]),
        ]
        page.table(["fabric", "value"], rows)
    except (ValueError, KeyError) as e:
        page.note(f"scenario unavailable: {e}")
    present = result.tables()
    page.p("Tables: " + ", ".join(f"<code>{html.escape(t)}.arrow</code>" for t in present), "meta")

    flows = result.flows
    page.h2("FCT slowdown by flow size")
    finished = int(pc.sum(pc.is_valid(flows.column("slowdown"))).as_py() or 0) if flows.num_rows else 0
    if finished == 0:
        page.note("No flow finished.")
    else:
        by_size = analysis.slowdown_by_size(result, buckets=min(10, finished))
        fig = Figure(figsize=(9, 4))
        ax = fig.add_subplot()
        x = np.arange(by_size.num_rows)
        for col, style in (("slowdown_p50", "o-"), ("slowdown_p95", "s--"), ("slowdown_p99", "^-")):
            ax.plot(x, _floats(by_size.column(col)), style, label=col.replace("slowdown_", ""))
        ax.set_xticks(x)
        ax.set_xticklabels(by_size.column("label").to_pylist(), rotation=30, ha="right", fontsize=8)
        ax.set_xlabel("flow size (equal-count buckets)")
        ax.set_ylabel("FCT slowdown")
        _log_if_wide(ax, _floats(by_size.column("slowdown_p99")))
        ax.grid(alpha=0.3)
        ax.legend()
        page.figure(
            fig, "FCT slowdown percentiles per flow-size bucket (each bucket an equal share of the flows)"
        )

        fig = Figure(figsize=(9, 3.5))
        ax = fig.add_subplot()
        groups = flows.column("workload").to_pylist() if "workload" in flows.column_names else None
        slowdown = _floats(flows.column("slowdown"))
        labels = sorted({g for g in groups if g is not None}) if groups else [None]
        for label in labels:
            mask = ~np.isnan(slowdown)
            if label is not None and groups is not None:
                mask &= np.array([g == label for g in groups])
            s = np.sort(slowdown[mask])
            if s.size:
                ax.step(s, np.arange(1, s.size + 1) / s.size, where="post", label=label or "all flows")
        ax.set_xscale("log")
        ax.set_xlabel("FCT slowdown")
        ax.set_ylabel("fraction of finished flows")
        ax.grid(alpha=0.3)
        ax.legend()
        page.figure(fig, "CDF of FCT slowdown per workload")

    if result.has_table("steps") and result.has_table("ops"):
        _section(page, "Step timeline", lambda: _steps_section(page, result, Figure))

    def queues() -> None:
        busiest = analysis.busiest_ports(result, n=5)
        if busiest.num_rows == 0:
            page.note("The queue trace is empty: no queue was ever non-empty at a sample.")
            return
        fig = Figure(figsize=(9, 3.8))
        ax = fig.add_subplot()
        for row in busiest.to_pylist():
            ts = analysis.queue_timeseries(
                result, switch=row["switch"], port=row["port"], priority=row["priority"]
            )
            ax.plot(
                _floats(ts.column("time_ps")) / 1e6,
                _floats(ts.column("bytes")) / 1e3,
                label=f"switch {row['switch']} port {row['port']} prio {row['priority']}",
            )
        ax.set_xlabel("time (us)")
        ax.set_ylabel("queue depth (KB)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        page.figure(fig, "Queue depth over time of the five queues that grew largest")
        page.table(
            ["switch", "port", "priority", "max bytes", "mean bytes", "p99 bytes", "non-empty"],
            [
                (
                    r["switch"],
                    r["port"],
                    r["priority"],
                    r["max_bytes"],
                    r["mean_bytes"],
                    r["p99_bytes"],
                    r["nonempty_fraction"],
                )
                for r in busiest.to_pylist()
            ],
            left=0,
        )

    _section(page, "Queue depth of the busiest ports", queues)

    def links() -> None:
        table = result.table("links")
        for c in ("time_ps", "link", "utilisation"):
            if c not in table.column_names:
                raise MissingTableError("links", str(result.out), column=c)
        if table.num_rows == 0:
            page.note("The link trace is empty.")
            return
        link = _floats(table.column("link")).astype(np.int64)
        t = _floats(table.column("time_ps")).astype(np.int64)
        u = _floats(table.column("utilisation"))
        tiers = table.column("tier").to_pylist() if "tier" in table.column_names else None
        ids = np.unique(link)
        times = np.unique(t)
        grid = np.full((len(ids), len(times)), np.nan)
        grid[np.searchsorted(ids, link), np.searchsorted(times, t)] = u
        order = np.arange(len(ids))
        tier_of: Dict[int, str] = {}
        if tiers is not None:
            for lk, tr in zip(link.tolist(), tiers):
                tier_of.setdefault(int(lk), str(tr))
            rank = {"host": 0, "fabric": 1, "core": 2}
            order = np.array(
                sorted(range(len(ids)), key=lambda i: (rank.get(tier_of.get(int(ids[i]), ""), 3), ids[i]))
            )
        shown = order
        limit = 400
        caption = "Link utilisation per interval (rows: links, grouped by tier; columns: time)"
        if len(ids) > limit:
            busiest = np.argsort(-np.nan_to_num(np.nanmean(grid, axis=1)), kind="stable")[:limit]
            keep = set(busiest.tolist())
            shown = np.array([i for i in order if i in keep])
            caption += f"; the {limit} busiest of {len(ids)} links"
        fig = Figure(figsize=(9, min(2 + len(shown) * 0.02, 9)))
        ax = fig.add_subplot()
        image = ax.imshow(
            grid[shown],
            aspect="auto",
            interpolation="nearest",
            cmap="viridis",
            vmin=0.0,
            vmax=1.0,
            extent=(times[0] / 1e6 - _step(times) / 1e6, times[-1] / 1e6, len(shown), 0),
        )
        fig.colorbar(image, ax=ax, label="utilisation")
        ax.set_xlabel("time (us)")
        ax.set_ylabel("link")
        if tier_of:
            previous = None
            for row, i in enumerate(shown):
                tr = tier_of.get(int(ids[i]))
                if tr != previous:
                    ax.axhline(row, color="white", lw=0.8)
                    ax.text(
                        0.002,
                        row,
                        f" {tr}",
                        color="white",
                        fontsize=8,
                        va="top",
                        transform=ax.get_yaxis_transform(),
                    )
                    previous = tr
        page.figure(fig, caption)
        by_tier = analysis.link_utilisation(result, by="tier") if tiers is not None else None
        if by_tier is not None:
            page.table(
                ["tier", "links", "mean", "p50", "p99", "max"],
                [
                    (
                        r["tier"],
                        r["links"],
                        r["utilisation_mean"],
                        r["utilisation_p50"],
                        r["utilisation_p99"],
                        r["utilisation_max"],
                    )
                    for r in by_tier.to_pylist()
                ],
            )

    _section(page, "Link utilisation", links)

    def pfc() -> None:
        intervals = analysis.pfc_intervals(result)
        if intervals.num_rows == 0:
            page.note("No PFC pause in this run.")
            return
        per_queue = analysis.pause_time(result)
        top = per_queue.take(pc.sort_indices(per_queue, sort_keys=[("paused_ps", "descending")])).slice(0, 30)
        keys = [(r["switch"], r["port"], r["priority"]) for r in top.to_pylist()]
        fig = Figure(figsize=(9, 1.5 + 0.25 * len(keys)))
        ax = fig.add_subplot()
        rows = intervals.to_pylist()
        for y, key in enumerate(keys):
            spans = [
                (r["start_ps"] / 1e6, max(r["duration_ps"], 1) / 1e6)
                for r in rows
                if (r["switch"], r["port"], r["priority"]) == key
            ]
            ax.broken_barh(spans, (y - 0.4, 0.8), color="#c0392b")
        ax.set_yticks(range(len(keys)))
        ax.set_yticklabels([f"sw {s} port {p} prio {q}" for s, p, q in keys], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("time (us)")
        ax.grid(alpha=0.3, axis="x")
        page.figure(fig, f"PFC pauses over time (the {len(keys)} most paused of {per_queue.num_rows} queues)")
        page.table(
            ["switch", "port", "priority", "pauses", "paused time", "fraction of run"],
            [
                (
                    r["switch"],
                    r["port"],
                    r["priority"],
                    r["pauses"],
                    _fmt.duration_ps(r["paused_ps"]),
                    r["paused_fraction"],
                )
                for r in top.slice(0, 10).to_pylist()
            ],
            left=0,
        )

    _section(page, "PFC pauses", pfc)

    def rates() -> None:
        table = result.table("rates")
        for c in ("time_ps", "flow_id", "rate_bps"):
            if c not in table.column_names:
                raise MissingTableError("rates", str(result.out), column=c)
        if table.num_rows == 0:
            page.note("The rate trace is empty.")
            return
        counts = table.group_by("flow_id").aggregate([("rate_bps", "count")])
        counts = counts.take(
            pc.sort_indices(counts, sort_keys=[("rate_bps_count", "descending"), ("flow_id", "ascending")])
        )
        chosen = counts.column("flow_id").to_pylist()[:8]
        finish = {
            r["flow_id"]: r["finish_ps"]
            for r in result.flows.select(["flow_id", "finish_ps"]).to_pylist()
            if r["flow_id"] in set(chosen)
        }
        fig = Figure(figsize=(9, 3.8))
        ax = fig.add_subplot()
        for f in chosen:
            rows = table.filter(pc.equal(table.column("flow_id"), f))
            rows = rows.take(pc.sort_indices(rows, sort_keys=[("time_ps", "ascending")]))
            t = _floats(rows.column("time_ps"))
            r = _floats(rows.column("rate_bps"))
            end = finish.get(f) or result.run_info.get("simulated_ps")
            if end is not None and end > t[-1]:  # the last rate holds until the flow ends
                t, r = np.append(t, end), np.append(r, r[-1])
            ax.step(t / 1e6, r / 1e9, where="post", label=f"flow {f}")
        ax.set_xlabel("time (us)")
        ax.set_ylabel("rate (Gbps)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        page.figure(fig, "Congestion-control rate of the flows whose rate changed most often")
        fairness = analysis.jain_fairness(result, basis="rates")
        if fairness.num_rows:
            fig = Figure(figsize=(9, 2.8))
            ax = fig.add_subplot()
            ax.plot(_floats(fairness.column("time_ps")) / 1e6, _floats(fairness.column("jain")))
            ax.set_ylim(0, 1.05)
            ax.set_xlabel("time (us)")
            ax.set_ylabel("Jain index")
            ax.grid(alpha=0.3)
            page.figure(fig, "Jain fairness index of the active flows' rates")

    _section(page, "Congestion-control rates", rates)
    return page.html()


#: Colours of the step phases in the timeline (compute phases solid, communication lighter).
_PHASE_COLOURS = {
    "forward": "#1f77b4",
    "backward": "#ff7f0e",
    "compute": "#2ca02c",
    "tp": "#9467bd",
    "pp": "#8c564b",
    "dp": "#d62728",
    "ep": "#e377c2",
    "comm": "#7f7f7f",
}

#: The most ranks the timeline draws (the first ones).
_TIMELINE_RANKS = 64


def _steps_section(page: _Page, result: Result, Figure: Any) -> None:
    """Step workloads: the iteration-time breakdown per workload and a per-rank Gantt timeline
    of the median iteration of the first one (docs/step-workloads.md)."""
    steps = result.steps
    rows = []
    for name in dict.fromkeys(steps.column("workload").to_pylist()):
        t = steps.filter(pc.equal(steps.column("workload"), name))
        done = t.filter(pc.is_valid(t.column("time_ps")))
        times = np.sort(_floats(done.column("time_ps"))) / 1e6
        parts = ("compute_fraction", "exposed_comm_fraction", "bubble_fraction")
        frac = {c: _floats(done.column(c)) for c in parts}

        def mean(v: np.ndarray) -> Optional[float]:
            v = v[~np.isnan(v)]
            return float(v.mean()) if v.size else None

        def pct(q: float, times: np.ndarray = times) -> Optional[float]:
            return float(times[max(1, math.ceil(q * times.size)) - 1]) if times.size else None

        rows.append(
            (
                name,
                f"{done.num_rows}/{t.num_rows}",
                mean(times),
                pct(0.5),
                pct(0.99),
                mean(frac["compute_fraction"]),
                mean(frac["exposed_comm_fraction"]),
                mean(frac["bubble_fraction"]),
            )
        )
    page.table(
        [
            "workload",
            "iterations done",
            "time mean (us)",
            "p50 (us)",
            "p99 (us)",
            "compute",
            "exposed comm",
            "bubble",
        ],
        rows,
    )
    done = steps.filter(pc.is_valid(steps.column("time_ps")))
    if done.num_rows == 0:
        page.note("No iteration completed: no timeline to draw.")
        return
    first = done.column("workload_index")[0].as_py()
    mine = done.filter(pc.equal(done.column("workload_index"), first))
    times = _floats(mine.column("time_ps"))
    pick = int(np.argsort(times, kind="stable")[(len(times) - 1) // 2])
    iteration = mine.column("iteration")[pick].as_py()
    start = mine.column("start_ps")[pick].as_py()
    ops = result.ops
    ops = ops.filter(
        pc.and_(pc.equal(ops.column("workload_index"), first), pc.equal(ops.column("iteration"), iteration))
    )
    ranks = sorted(set(ops.column("rank").to_pylist()))
    shown = ranks[:_TIMELINE_RANKS]
    row_of = {r: i for i, r in enumerate(shown)}
    fig = Figure(figsize=(10, max(2.5, 0.28 * len(shown) + 1.2)))
    ax = fig.add_subplot()
    used = set()
    for op in ops.to_pylist():
        if op["rank"] not in row_of or op["start_ps"] is None or op["end_ps"] is None:
            continue
        y = row_of[op["rank"]]
        x0 = (op["start_ps"] - start) / 1e6
        w = max((op["end_ps"] - op["start_ps"]) / 1e6, 1e-9)
        colour = _PHASE_COLOURS.get(op["phase"], "#7f7f7f")
        # Compute fills the row; communication a thinner band below it, so overlap shows.
        band = (y - 0.4, 0.5) if op["is_compute"] else (y + 0.15, 0.25)
        ax.broken_barh([(x0, w)], band, facecolors=colour, alpha=1.0 if op["is_compute"] else 0.7)
        used.add(op["phase"])
    ax.set_yticks(range(len(shown)))
    ax.set_yticklabels([f"rank {r}" for r in shown], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("time since the iteration started (us)")
    ax.grid(alpha=0.3, axis="x")
    from matplotlib.patches import Patch

    ax.legend(
        handles=[Patch(color=_PHASE_COLOURS[p], label=p) for p in _PHASE_COLOURS if p in used],
        fontsize=7,
        loc="upper right",
    )
    more = f" (first {len(shown)} of {len(ranks)} ranks)" if len(ranks) > len(shown) else ""
    page.figure(
        fig,
        f"Per-rank timeline of iteration {iteration} of workload {mine.column('workload')[0].as_py()} "
        f"(the median iteration time){more}: compute as full bars, communication as thin bars",
    )


# -- a sweep ----------------------------------------------------------------------------------------


def _sweep_report(folder: Path, title: Optional[str]) -> str:
    Figure = _matplotlib()
    table = open_sweep(folder)
    params = parameters(table)
    base = base_scenario(table)
    page = _Page(title or f"fabricemu sweep: {base.name if base else folder.name}")
    errors = [e for e in table.column("error").to_pylist() if e is not None]
    page.p(
        html.escape(
            f"{folder} - {table.num_rows} runs, {table.num_rows - len(errors)} ok, {len(errors)} failed; "
            f"parameters: {', '.join(params)}"
        ),
        "meta",
    )
    if base is not None:
        page.p(html.escape(f"Base scenario: {base.summary_line()}"))

    x_param, variants = _axes(table, params)
    ok = table.filter(pc.is_null(table.column("error")))
    page.h2("Metrics against the parameters")
    if x_param is None:
        page.note("Nothing varies but the seed.")
    plotted = 0
    for metric, label in SWEEP_PLOTS:
        if metric not in ok.column_names or ok.num_rows == 0:
            continue
        values = ok.column(metric)
        if values.null_count == len(values):
            continue
        fig = Figure(figsize=(7.5, 3.8))
        ax = fig.add_subplot()
        _plot_metric(ax, ok, x_param or "seed", variants, metric)
        ax.set_xlabel(x_param or "seed")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        if variants:
            ax.legend(fontsize=8, title=", ".join(variants), title_fontsize=8)
        seeds = (
            "; mean over seeds, bars from the lowest to the highest seed"
            if "seed" in params and x_param
            else ""
        )
        page.figure(
            fig,
            f"{label} against {x_param or 'seed'}"
            + (f", one line per {', '.join(variants)}" if variants else "")
            + seeds,
        )
        plotted += 1
    if plotted == 0:
        page.note("No run finished: nothing to plot.")

    page.h2("Runs")
    shown = [
        *params,
        "slowdown_p50",
        "slowdown_p99",
        "goodput_gbps",
        "drops",
        "pause_us",
        "max_queue_bytes",
        "wall_seconds",
        "run",
        "error",
    ]
    shown = [c for c in shown if c in table.column_names]
    page.table(shown, [[r[c] for c in shown] for r in table.select(shown).to_pylist()], left=len(params))
    if errors:
        page.h2("Failed points")
        for r in table.filter(pc.is_valid(table.column("error"))).to_pylist():
            where = ", ".join(f"{p}={r[p]}" for p in params)
            page.p(html.escape(f"{where}: {r['error']}"), "err")
    return page.html()


def _axes(table: pa.Table, params: Sequence[str]) -> Tuple[Optional[str], List[str]]:
    """The parameter for the x axis and the others that vary (one line per combination of them);
    the seed is averaged over. The x axis is the ordered parameter (numbers, or strings with units
    such as "64KiB") with the most distinct values, else the one with the most values."""
    varying = []
    for i, p in enumerate(params):
        if p == "seed":
            continue
        values = table.column(p).to_pylist()
        distinct = {repr(v) for v in values}
        if len(distinct) > 1:
            ordered = _order_keys(values) is not None
            varying.append((ordered, len(distinct), -i, p))
    if not varying:
        return None, []
    x = max(varying)[3]
    return x, [v[3] for v in varying if v[3] != x]


def _order_keys(values: Sequence[Any]) -> Optional[List[float]]:
    """Numeric sort keys of the values: numbers as they are, strings with one kind of unit
    ("16KiB", "1.5us", "100Gbps") by what they mean; None if they have no such order."""
    present = [v for v in values if v is not None]
    if not present:
        return None
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        return [float(v) for v in present]
    if not all(isinstance(v, str) for v in present):
        return None
    for parse in (_core.parse_size, _core.parse_duration, _core.parse_rate):
        try:
            return [float(parse(v)) for v in present]
        except ValueError:
            continue
    return None


def _plot_metric(ax: Any, table: pa.Table, x: str, variants: Sequence[str], metric: str) -> None:
    rows = table.to_pylist()
    numeric = _numeric(table.schema.field(x).type)
    present = [r[x] for r in rows if r[x] is not None]
    keys = _order_keys(present)
    rank: Dict[Any, Any] = {}
    for v, k in zip(present, keys if keys is not None else [str(v) for v in present]):
        rank.setdefault(v, k)
    xs_all = sorted(rank, key=lambda v: rank[v])
    position = {v: i for i, v in enumerate(xs_all)}
    lines: Dict[Tuple[Any, ...], Dict[Any, List[float]]] = {}
    for r in rows:
        if r[metric] is None or r[x] is None:
            continue
        key = tuple(r[v] for v in variants)
        lines.setdefault(key, {}).setdefault(r[x], []).append(float(r[metric]))
    for key in sorted(lines, key=lambda k: tuple(_sortable(v) for v in k)):
        points = lines[key]
        xs = sorted(points, key=lambda v: position[v])
        mean = np.array([np.mean(points[v]) for v in xs])
        low = mean - np.array([min(points[v]) for v in xs])
        high = np.array([max(points[v]) for v in xs]) - mean
        xv = np.array([float(v) if numeric else position[v] for v in xs])
        label = ", ".join(_cell(v) for v in key) if key else None
        ax.errorbar(xv, mean, yerr=[low, high], marker="o", capsize=3, label=label)
    if not numeric:
        ax.set_xticks(range(len(xs_all)))
        ax.set_xticklabels([_cell(v) for v in xs_all], rotation=20, ha="right")


def _numeric(t: pa.DataType) -> bool:
    return bool(pa.types.is_integer(t) or pa.types.is_floating(t))


def _sortable(v: Any) -> Tuple[int, Any]:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return (0, v)
    keys = _order_keys([v]) if isinstance(v, str) else None
    return (1, keys[0]) if keys else (2, str(v))


# -- helpers ----------------------------------------------------------------------------------------


def _floats(column: Any) -> np.ndarray:
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    return np.asarray(
        pc.cast(column, pa.float64()).fill_null(math.nan).to_numpy(zero_copy_only=False), dtype=np.float64
    )


def _log_if_wide(ax: Any, values: np.ndarray) -> None:
    v = values[~np.isnan(values)]
    if v.size and v.min() > 0 and v.max() / v.min() > 20:
        ax.set_yscale("log")


def _step(times: np.ndarray) -> float:
    return float(np.min(np.diff(times))) if len(times) > 1 else float(times[0] or 1)
