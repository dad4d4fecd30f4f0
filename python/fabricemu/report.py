"""Self-contained HTML reports of a run or a sweep, with the plots embedded as inline SVG.

Needs matplotlib (``pip install 'fabricemu[plot]'``). ``fabricemu report OUT`` calls
:func:`write_report`. The page needs no network access and runs no script: every plot is an SVG
drawn by matplotlib, inlined into the page (text stays text, so the page can be searched).

A run's report (docs/report.md describes each section): the summary (metrics that are zero are
listed, not tabulated), the fabric, FCT slowdown per flow-size bucket (a table and one CDF per
bucket), the collectives (per call time and bus bandwidth, per tier), the step timeline of step
workloads, the queue depth over time of the busiest queues, a heat map of link utilisation, the
PFC pause timeline and the congestion-control rates of a few flows. Plots against the run's time
share one time axis (same range, same unit, same width), so they line up on the page; nodes, ports
and queues are named (``"leaf:0 -> spine:1 prio 3"``) from nodes.arrow and ports.arrow. Each plot
appears when the run traced what it needs, else a note says how to trace it.

A sweep's report: each metric against the swept parameter with one line per variant (the mean over
seeds, the seeds' range as error bars), accepted throughput against offered load with the y = x
line when the runs have synthetic traffic, and the table of runs, each linking to its own run
report (:func:`write_report` writes those next to the runs).
"""

from __future__ import annotations

import html
import io
import math
import os
import re
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import _core, _fmt, analysis
from ._core import __version__
from .errors import MissingTableError
from .results import FabricNames, Result, open_result
from .scenario import PathLike, fabric_links, fabric_shape
from .sweep import SWEEP_FILE, base_scenario, open_sweep, parameters

__all__ = ["PLOT_EXTRA", "report_html", "write_report"]

PLOT_EXTRA = "pip install 'fabricemu[plot]'"

#: The file a run's or a sweep's report is written to, in its folder.
REPORT_FILE = "report.html"

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
    ("iteration_time_mean_us", "iteration time mean (us)"),
)

#: The width of every plot against the run's time, and the place of its axes in it (fractions of
#: the width), so that those plots line up on the page; legends and colour bars go to the right.
_TIME_WIDTH = 10.0
_TIME_LEFT = 0.09
_TIME_RIGHT = 0.78

#: The most points one CDF line draws (an evenly spaced selection of the sorted values).
_CDF_POINTS = 400


def _matplotlib() -> Any:
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError(f"fabricemu reports need matplotlib: {PLOT_EXTRA}") from None
    del matplotlib
    return Figure


def write_report(
    path: PathLike,
    out: Optional[PathLike] = None,
    *,
    title: Optional[str] = None,
    run_reports: bool = True,
) -> Path:
    """Write the HTML report of the run or sweep in folder ``path`` to ``out`` (default
    ``<path>/report.html``); returns the file written.

    For a sweep, with ``run_reports`` (the default) each run's own report is written too, into
    its folder (``runs/<point>/report.html``), unless one newer than the run's run.json is there;
    the sweep's table of runs links to them (relative links, which work wherever ``out`` is)."""
    folder = Path(path)
    target = Path(out) if out is not None else folder / REPORT_FILE
    if _is_sweep(folder) and run_reports:
        table = open_sweep(folder)
        for run in table.column("run").to_pylist() if "run" in table.column_names else []:
            run_dir = folder / run if run else None
            if run_dir is None or not (run_dir / "run.json").is_file():
                continue
            page = run_dir / REPORT_FILE
            if page.is_file() and page.stat().st_mtime >= (run_dir / "run.json").stat().st_mtime:
                continue
            _write_text(page, report_html(run_dir))
    text = report_html(folder, title=title, link_from=target.parent)
    _write_text(target, text)
    return target


def _write_text(target: Path, text: str) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(target)


def report_html(path: PathLike, *, title: Optional[str] = None, link_from: Optional[PathLike] = None) -> str:
    """The HTML report of the run or sweep in folder ``path``, as text. A sweep's page links each
    run to the run's report.html where that file exists, relative to folder ``link_from`` (where
    the page will be; default ``path``)."""
    folder = Path(path)
    if _is_sweep(folder):
        return _sweep_report(folder, title, Path(link_from) if link_from is not None else folder)
    return _run_report(open_result(folder), title)


def _is_sweep(folder: Path) -> bool:
    return (folder / SWEEP_FILE).is_file() and not (folder / "run.json").is_file()


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
figure svg { display: block; max-width: 100%; height: auto; }
figure.time svg { width: 100%; }
code { background: #f4f4f4; padding: 0 0.2em; }
.meta { color: #666; font-size: 0.9em; }
"""


class _Html(str):
    """A table cell that is already HTML (a link), not text to escape."""


class _Page:
    def __init__(self, title: str) -> None:
        self.title = title
        self.parts: List[str] = []
        self.figures = 0

    def h2(self, text: str) -> None:
        anchor = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
        self.parts.append(f"<h2 id='{anchor}'>{html.escape(text)}</h2>")

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
                text = v if isinstance(v, _Html) else html.escape(_cell(v))
                cells.append(f"<td class='{cls}'>{text}</td>")
            body.append("<tr>" + "".join(cells) + "</tr>")
        self.parts.append(f"<table><tr>{head}</tr>{''.join(body)}</table>")

    def figure(self, fig: Any, caption: str, kind: str, *, time_axis: bool = False) -> None:
        """Figure ``fig`` inlined as SVG. ``kind`` names the plot (``data-plot``); a plot against
        the run's time (``time_axis``) keeps its fixed layout, so that such plots line up."""
        import matplotlib

        self.figures += 1
        buf = io.StringIO()
        with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "fabricemu"}):
            fig.savefig(
                buf,
                format="svg",
                dpi=100,
                bbox_inches=None if time_axis else "tight",
                metadata={"Date": None, "Creator": None},
            )
        svg = _inline_svg(buf.getvalue(), f"f{self.figures}-")
        cls = "plot time" if time_axis else "plot"
        self.parts.append(
            f"<figure class='{cls}' data-plot='{html.escape(kind)}' role='img' "
            f"aria-label='{html.escape(caption)}'>{svg}<figcaption>{html.escape(caption)}</figcaption>"
            "</figure>"
        )

    def html(self) -> str:
        return (
            "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<title>{html.escape(self.title)}</title><style>{_CSS}</style></head><body>"
            f"<h1>{html.escape(self.title)}</h1>" + "\n".join(self.parts) + "</body></html>\n"
        )


_ID = re.compile(r'id="([^"]+)"')


def _inline_svg(svg: str, prefix: str) -> str:
    """matplotlib's SVG document as an element of the page: without the XML prologue, its ids
    made unique on the page (``prefix``), and the group ids given with ``gid="fx-..."`` turned into
    classes (several plots may carry the same one, e.g. ``fx-time-axes``)."""
    svg = svg[svg.index("<svg") :]
    # Namespaces are implied in HTML, and the RDF metadata block is of no use on a page.
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, count=1, flags=re.S)
    svg = re.sub(r'\s+xmlns(:xlink)?="[^"]*"', "", svg)
    ids = set(_ID.findall(svg))
    marked = {i for i in ids if i.startswith("fx-")}

    def rename(m: re.Match[str]) -> str:
        name = m.group(1)
        return f'class="{name}"' if name in marked else f'id="{prefix}{name}"'

    svg = _ID.sub(rename, svg)
    svg = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{prefix}{m.group(1)})", svg)
    svg = re.sub(r'href="#([^"]+)"', lambda m: f'href="#{prefix}{m.group(1)}"', svg)
    return svg


def _plain(v: float) -> str:
    """A number as people write it: ``1,900,000``, ``12.35``, ``0.000012`` (never ``1.9e+06``)."""
    if math.isnan(v):
        return "-"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 0.001:
        return f"{v:.4g}"
    return np.format_float_positional(v, precision=3, unique=False, fractional=False, trim="-")


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return _plain(v)
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _percent(v: Optional[float]) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{_plain(100.0 * v)} %"


def _metric_value(key: str, v: Any, exact: bool = True) -> str:
    """A metric of the summary in the unit that reads best (sizes with their exact bytes too
    when ``exact``)."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if key.endswith("_us"):
        return _fmt.micros(float(v))
    if key.endswith("_ps"):
        return _fmt.duration_ps(float(v))
    if key.endswith("_bytes"):
        if v < 1000:
            return f"{int(v):,} B"
        return f"{_fmt.size(int(v))} ({int(v):,} B)" if exact else _fmt.size(int(v))
    if key.endswith("_gbps"):
        return _fmt.bps(float(v) * 1e9)
    if key.endswith("_per_second"):
        return _fmt.rate(float(v))
    if key == "wall_seconds":
        return _fmt.seconds(float(v))
    if key.endswith("_fraction") or key in ("accepted_throughput", "offered_load"):
        return _percent(float(v))
    return _cell(v)


def _section(page: _Page, title: str, build: Callable[[], None]) -> None:
    """A section whose plot needs a table: a note instead when the run did not trace it."""
    page.h2(title)
    try:
        build()
    except MissingTableError as e:
        page.note(f"Not in this run: {e}")


def _zero(v: Any) -> bool:
    return v is not None and not isinstance(v, bool) and isinstance(v, (int, float)) and v == 0


class _TimeAxis:
    """The time axis every plot against the run's time shares: from 0 to the run's end, in
    microseconds or milliseconds."""

    def __init__(self, end_ps: float) -> None:
        self.end_ps = max(float(end_ps), 1.0)
        if self.end_ps >= 2e9:
            self.scale, self.unit = 1e9, "ms"
        else:
            self.scale, self.unit = 1e6, "us"

    def __call__(self, ps: Any) -> Any:
        return np.asarray(ps, dtype=np.float64) / self.scale

    def figure(self, Figure: Any, height: float) -> Tuple[Any, Any]:
        fig = Figure(figsize=(_TIME_WIDTH, height))
        fig.subplots_adjust(left=_TIME_LEFT, right=_TIME_RIGHT, bottom=min(0.45, 0.55 / height), top=0.95)
        ax = fig.add_subplot()
        ax.patch.set_gid("fx-time-axes")
        return fig, ax

    def finish(self, ax: Any) -> None:
        ax.set_xlim(0, self.end_ps / self.scale)
        ax.set_xlabel(f"time ({self.unit})")
        ax.grid(alpha=0.3)

    def legend(self, ax: Any, **kw: Any) -> None:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, borderaxespad=0.0, **kw)


def _run_end_ps(result: Result) -> float:
    """The run's simulated time (run.json), else the last finish of a flow."""
    info = result.run_info
    end = info.get("simulated_ps", info.get("stats", {}).get("simulated_ps"))
    if end:
        return float(end)
    flows = result.flows
    if "finish_ps" in flows.column_names and flows.num_rows:
        last = pc.max(flows.column("finish_ps")).as_py()
        if last:
            return float(last)
    return 1.0


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
    names = result.names()
    axis = _TimeAxis(_run_end_ps(result))

    _summary(page, result)
    _flow_sizes(page, result, Figure)
    if result.has_table("collectives"):
        _section(page, "Collectives", lambda: _collectives(page, result, names, axis, Figure))
    if result.has_table("steps") and result.has_table("ops"):
        _section(page, "Step timeline", lambda: _steps_section(page, result, names, Figure))
    _section(page, "Queue depth of the busiest ports", lambda: _queues(page, result, names, axis, Figure))
    _section(page, "Link utilisation", lambda: _links(page, result, names, axis, Figure))
    _section(page, "PFC pauses", lambda: _pfc(page, result, names, axis, Figure))
    _section(page, "Congestion-control rates", lambda: _rates(page, result, names, axis, Figure))
    return page.html()


def _summary(page: _Page, result: Result) -> None:
    info = result.run_info
    page.h2("Summary")
    m = analysis.metrics(result)
    rows = [(k, _metric_value(k, v)) for k, v in m.items() if v is not None and not _zero(v)]
    zero = [k for k, v in m.items() if _zero(v)]
    page.table(["metric", "value"], rows)
    if zero:
        page.p(
            "Zero in this run (left out above): " + ", ".join(f"<code>{html.escape(k)}</code>" for k in zero),
            "meta",
        )
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
    files = [result.path_of(t).name for t in present]
    page.p("Tables: " + ", ".join(f"<code>{html.escape(f)}</code>" for f in files), "meta")


def _cdf(ax: Any, values: np.ndarray, label: str) -> None:
    """The empirical CDF of ``values`` as a step line (at most _CDF_POINTS points)."""
    s = np.sort(values[~np.isnan(values)])
    if not s.size:
        return
    y = np.arange(1, s.size + 1) / s.size
    if s.size > _CDF_POINTS:
        keep = np.unique(np.linspace(0, s.size - 1, _CDF_POINTS).round().astype(np.int64))
        s, y = s[keep], y[keep]
    ax.step(np.concatenate(([s[0]], s)), np.concatenate(([0.0], y)), where="post", label=label)


def _flow_sizes(page: _Page, result: Result, Figure: Any) -> None:
    flows = result.flows
    page.h2("FCT slowdown by flow size")
    finished = int(pc.sum(pc.is_valid(flows.column("slowdown"))).as_py() or 0) if flows.num_rows else 0
    if finished == 0:
        page.note("No flow finished.")
        return
    by_size = analysis.slowdown_by_size(result, buckets=min(6, finished))
    size = _floats(flows.column("size_bytes"))
    slowdown = _floats(flows.column("slowdown"))
    fig = Figure(figsize=(9, 4))
    ax = fig.add_subplot()
    buckets = by_size.to_pylist()
    for b in buckets:
        mask = size >= b["lower"]
        if b["upper"] is not None:
            mask &= size < b["upper"]
        _cdf(ax, slowdown[mask], f"{b['label']} ({b['finished']:,} flow{'' if b['finished'] == 1 else 's'})")
    _log_x(ax)
    ax.set_xlabel("FCT slowdown (FCT / ideal FCT)")
    ax.set_ylabel("fraction of finished flows")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, title="flow size", title_fontsize=8, loc="lower right")
    page.figure(
        fig,
        "CDF of FCT slowdown per flow-size bucket (each bucket about an equal share of the flows)",
        "slowdown-cdf-by-size",
    )
    page.table(
        ["flow size", "flows", "finished", "mean", "p50", "p95", "p99"],
        [
            (
                b["label"],
                b["flows"],
                b["finished"],
                b["slowdown_mean"],
                b["slowdown_p50"],
                b["slowdown_p95"],
                b["slowdown_p99"],
            )
            for b in buckets
        ],
    )
    groups = flows.column("workload").to_pylist() if "workload" in flows.column_names else None
    labels = sorted({g for g in groups if g is not None}) if groups else []
    if len(labels) > 1 and groups is not None:
        fig = Figure(figsize=(9, 3.5))
        ax = fig.add_subplot()
        workload = np.array(groups, dtype=object)
        for label in labels:
            _cdf(ax, slowdown[workload == label], label)
        _log_x(ax)
        ax.set_xlabel("FCT slowdown (FCT / ideal FCT)")
        ax.set_ylabel("fraction of finished flows")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, title="workload", title_fontsize=8, loc="lower right")
        page.figure(fig, "CDF of FCT slowdown per workload", "slowdown-cdf-by-workload")


def _collectives(page: _Page, result: Result, names: FabricNames, axis: _TimeAxis, Figure: Any) -> None:
    """Per call (a group's collective in one iteration): time and bus bandwidth, and per tier
    (scale-up, scale-out) where the collective has them (docs/collectives.md)."""
    table = result.collectives
    if table.num_rows == 0:
        page.note("No collective ran.")
        return
    rows = table.to_pylist()
    has = set(table.column_names)
    workload_col = "workload" if "workload" in has else None

    def key(r: Dict[str, Any]) -> Tuple[str, str, str]:
        w = str(r[workload_col]) if workload_col else ""
        return (w, str(r.get("op") or ""), str(r.get("algorithm") or ""))

    groups: Dict[Tuple[str, str, str], List[Dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(key(r), []).append(r)

    def vals(rs: Sequence[Dict[str, Any]], c: str) -> np.ndarray:
        return np.array([float(r[c]) for r in rs if c in r and r[c] is not None], dtype=np.float64)

    def mean(v: np.ndarray) -> Optional[float]:
        return float(v.mean()) if v.size else None

    def pct(v: np.ndarray, q: float) -> Optional[float]:
        return float(np.percentile(v, q * 100)) if v.size else None

    def dur(v: Optional[float]) -> str:
        return _fmt.duration_ps(v) if v is not None else "-"

    def bw(v: Optional[float]) -> str:
        return _fmt.bps(v) if v is not None else "-"

    summary = []
    tiers = []
    for (w, op, algo), rs in groups.items():
        d = vals(rs, "duration_ps")
        label = " ".join(x for x in (w, op, algo) if x)
        ranks = sorted({int(r["ranks"]) for r in rs if r.get("ranks") is not None})
        summary.append(
            (
                label,
                ", ".join(f"{x:,}" for x in ranks) or "-",
                f"{d.size:,}/{len(rs):,}",
                dur(mean(d)),
                dur(pct(d, 0.5)),
                dur(float(d.max()) if d.size else None),
                bw(mean(vals(rs, "algbw_bps"))),
                bw(mean(vals(rs, "busbw_bps"))),
            )
        )
        tier = []
        for t in ("scaleup", "scaleout"):
            b = vals(rs, f"{t}_flow_bytes")
            tier += [
                _fmt.size(int(b.mean())) if b.size and b.mean() > 0 else "-",
                dur(mean(vals(rs, f"{t}_time_ps"))),
                bw(mean(vals(rs, f"{t}_busbw_bps"))),
            ]
        if any(x != "-" for x in tier):
            tiers.append((label, *tier))
    page.table(
        ["collective", "ranks", "calls done", "time mean", "p50", "max", "algbw mean", "busbw mean"],
        summary,
    )
    if tiers:
        page.p("Per tier (scale-up: both ends in one domain; scale-out: the others), mean per call:")
        page.table(
            [
                "collective",
                "scale-up bytes",
                "scale-up time",
                "scale-up busbw",
                "scale-out bytes",
                "scale-out time",
                "scale-out busbw",
            ],
            tiers,
        )
    fig, ax = axis.figure(Figure, 3.6)
    for (w, op, algo), rs in groups.items():
        done = [r for r in rs if r.get("start_ps") is not None and r.get("busbw_bps") is not None]
        if not done:
            continue
        label = " ".join(x for x in (w, op, algo) if x)
        start = axis([r["start_ps"] for r in done])
        length = axis([r["duration_ps"] or 0 for r in done])
        busbw = np.array([r["busbw_bps"] for r in done], dtype=np.float64) / 1e9
        (line,) = ax.plot(start, busbw, "o", markersize=4, label=label)
        ax.hlines(busbw, start, start + length, color=line.get_color(), alpha=0.6, lw=2)
    ax.set_ylabel("bus bandwidth (Gbps)")
    ax.set_ylim(bottom=0)
    axis.finish(ax)
    axis.legend(ax)
    page.figure(
        fig,
        "Bus bandwidth of each collective call, drawn from its start to its end",
        "collectives",
        time_axis=True,
    )


def _queues(page: _Page, result: Result, names: FabricNames, axis: _TimeAxis, Figure: Any) -> None:
    busiest = analysis.busiest_ports(result, n=5)
    if busiest.num_rows == 0:
        page.note("The queue trace is empty: no queue was ever non-empty at a sample.")
        return
    fig, ax = axis.figure(Figure, 3.8)
    for row in busiest.to_pylist():
        ts = analysis.queue_timeseries(
            result, switch=row["switch"], port=row["port"], priority=row["priority"]
        )
        ax.plot(
            axis(_floats(ts.column("time_ps"))),
            _floats(ts.column("bytes")) / 1e3,
            label=names.queue(row["port"], row["priority"]),
        )
    ax.set_ylabel("queue depth (KB)")
    axis.finish(ax)
    axis.legend(ax)
    page.figure(fig, "Queue depth over time of the five queues that grew largest", "queues", time_axis=True)
    page.table(
        ["queue (port: node -> peer)", "priority", "max", "mean", "p99", "non-empty"],
        [
            (
                names.port(r["port"]),
                r["priority"],
                _fmt.size(r["max_bytes"]),
                _fmt.size(round(r["mean_bytes"])) if r["mean_bytes"] is not None else "-",
                _fmt.size(round(r["p99_bytes"])) if r["p99_bytes"] is not None else "-",
                _percent(r["nonempty_fraction"]),
            )
            for r in busiest.to_pylist()
        ],
    )


def _links(page: _Page, result: Result, names: FabricNames, axis: _TimeAxis, Figure: Any) -> None:
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
    fig, ax = axis.figure(Figure, min(2 + len(shown) * 0.02, 9))
    interval = _step(times)
    image = ax.imshow(
        grid[shown],
        aspect="auto",
        interpolation="nearest",
        cmap="viridis",
        vmin=0.0,
        vmax=1.0,
        extent=(
            float(axis(times[0] - interval)),
            float(axis(times[-1])),
            len(shown),
            0,
        ),
    )
    # The colour bar in the right margin, so that the plot keeps the shared time axis's width.
    cax = fig.add_axes((_TIME_RIGHT + 0.02, 0.15, 0.015, 0.7))
    fig.colorbar(image, cax=cax, label="utilisation")
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
    axis.finish(ax)
    ax.grid(False)
    page.figure(fig, caption, "links", time_axis=True)
    by_tier = analysis.link_utilisation(result, by="tier") if tiers is not None else None
    if by_tier is not None:
        page.table(
            ["tier", "links", "mean", "p50", "p99", "max"],
            [
                (
                    r["tier"],
                    r["links"],
                    _percent(r["utilisation_mean"]),
                    _percent(r["utilisation_p50"]),
                    _percent(r["utilisation_p99"]),
                    _percent(r["utilisation_max"]),
                )
                for r in by_tier.to_pylist()
            ],
        )
    # The busiest links by name.
    mean_u = np.nanmean(np.where(np.isnan(grid), 0.0, grid), axis=1)
    top = np.argsort(-mean_u, kind="stable")[:5]
    if len(top) and mean_u[top[0]] > 0:
        page.table(
            ["busiest links (port: node -> peer)", "tier", "mean utilisation", "max"],
            [
                (
                    names.port(int(ids[i])),
                    tier_of.get(int(ids[i]), "-"),
                    _percent(float(mean_u[i])),
                    _percent(float(np.nanmax(grid[i]))),
                )
                for i in top
                if mean_u[i] > 0
            ],
        )


def _pfc(page: _Page, result: Result, names: FabricNames, axis: _TimeAxis, Figure: Any) -> None:
    intervals = analysis.pfc_intervals(result)
    if intervals.num_rows == 0:
        page.note("No PFC pause in this run.")
        return
    per_queue = analysis.pause_time(result)
    top = per_queue.take(pc.sort_indices(per_queue, sort_keys=[("paused_ps", "descending")])).slice(0, 30)
    keys = [(r["switch"], r["port"], r["priority"]) for r in top.to_pylist()]
    fig, ax = axis.figure(Figure, 1.5 + 0.25 * len(keys))
    rows = intervals.to_pylist()
    bars = 0
    for y, key in enumerate(keys):
        spans = [
            (float(axis(r["start_ps"])), float(axis(max(r["duration_ps"], 1))))
            for r in rows
            if (r["switch"], r["port"], r["priority"]) == key
        ]
        bars += len(spans)
        ax.broken_barh(spans, (y - 0.4, 0.8), color="#c0392b", rasterized=bars > 2000)
    ax.set_yticks(range(len(keys)))
    ax.set_yticklabels([names.queue(p, q) for _s, p, q in keys], fontsize=7)
    ax.invert_yaxis()
    axis.finish(ax)
    ax.grid(alpha=0.3, axis="x")
    page.figure(
        fig,
        f"PFC pauses over time (the {len(keys)} most paused of {per_queue.num_rows} queues)",
        "pfc",
        time_axis=True,
    )
    page.table(
        ["paused by (port: node -> peer)", "priority", "pauses", "paused time", "fraction of run"],
        [
            (
                names.port(r["port"]),
                r["priority"],
                r["pauses"],
                _fmt.duration_ps(r["paused_ps"]),
                _percent(r["paused_fraction"]),
            )
            for r in top.slice(0, 10).to_pylist()
        ],
    )


def _rates(page: _Page, result: Result, names: FabricNames, axis: _TimeAxis, Figure: Any) -> None:
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
    wanted = set(chosen)
    cols = [c for c in ("flow_id", "finish_ps", "src", "dst") if c in result.flows.column_names]
    about = {r["flow_id"]: r for r in result.flows.select(cols).to_pylist() if r["flow_id"] in wanted}
    fig, ax = axis.figure(Figure, 3.8)
    for f in chosen:
        rows = table.filter(pc.equal(table.column("flow_id"), f))
        rows = rows.take(pc.sort_indices(rows, sort_keys=[("time_ps", "ascending")]))
        t = _floats(rows.column("time_ps"))
        r = _floats(rows.column("rate_bps"))
        flow = about.get(f, {})
        end = flow.get("finish_ps") or result.run_info.get("simulated_ps")
        if end is not None and end > t[-1]:  # the last rate holds until the flow ends
            t, r = np.append(t, end), np.append(r, r[-1])
        label = f"flow {f}"
        if flow.get("src") is not None and flow.get("dst") is not None:
            label += f": {names.node(flow['src'])} -> {names.node(flow['dst'])}"
        ax.step(axis(t), r / 1e9, where="post", label=label)
    ax.set_ylabel("rate (Gbps)")
    axis.finish(ax)
    axis.legend(ax)
    page.figure(
        fig, "Congestion-control rate of the flows whose rate changed most often", "rates", time_axis=True
    )
    fairness = analysis.jain_fairness(result, basis="rates")
    if fairness.num_rows:
        fig, ax = axis.figure(Figure, 2.8)
        ax.plot(axis(_floats(fairness.column("time_ps"))), _floats(fairness.column("jain")))
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("Jain index")
        axis.finish(ax)
        page.figure(fig, "Jain fairness index of the active flows' rates", "fairness", time_axis=True)


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


def _steps_section(page: _Page, result: Result, names: FabricNames, Figure: Any) -> None:
    """Step workloads: the iteration-time breakdown per workload and a per-rank Gantt timeline
    of the median iteration of the first one (docs/step-workloads.md)."""
    steps = result.steps
    rows = []
    for name in dict.fromkeys(steps.column("workload").to_pylist()):
        t = steps.filter(pc.equal(steps.column("workload"), name))
        done = t.filter(pc.is_valid(t.column("time_ps")))
        times = np.sort(_floats(done.column("time_ps")))
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
                _fmt.duration_ps(mean(times)),
                _fmt.duration_ps(pct(0.5)),
                _fmt.duration_ps(pct(0.99)),
                _percent(mean(frac["compute_fraction"])),
                _percent(mean(frac["exposed_comm_fraction"])),
                _percent(mean(frac["bubble_fraction"])),
            )
        )
    page.table(
        ["workload", "iterations done", "time mean", "p50", "p99", "compute", "exposed comm", "bubble"],
        rows,
    )
    done = steps.filter(pc.is_valid(steps.column("time_ps")))
    if done.num_rows == 0:
        page.note("No iteration completed: no timeline to draw.")
        return
    workloads = list(dict.fromkeys(done.column("workload_index").to_pylist()))
    for index in workloads[:_TIMELINE_WORKLOADS]:
        _timeline(page, result, names, Figure, done, index)
    if len(workloads) > _TIMELINE_WORKLOADS:
        page.note(f"Timelines of the first {_TIMELINE_WORKLOADS} of {len(workloads)} step workloads.")


#: The most step workloads that get a timeline (the first ones).
_TIMELINE_WORKLOADS = 4


def _timeline(
    page: _Page, result: Result, names: FabricNames, Figure: Any, done: pa.Table, index: int
) -> None:
    """The per-rank Gantt chart of the median iteration of step workload ``index``."""
    mine = done.filter(pc.equal(done.column("workload_index"), index))
    times = _floats(mine.column("time_ps"))
    pick = int(np.argsort(times, kind="stable")[(len(times) - 1) // 2])
    iteration = mine.column("iteration")[pick].as_py()
    start = mine.column("start_ps")[pick].as_py()
    ops = result.ops
    ops = ops.filter(
        pc.and_(pc.equal(ops.column("workload_index"), index), pc.equal(ops.column("iteration"), iteration))
    )
    ops = ops.filter(pc.and_(pc.is_valid(ops.column("start_ps")), pc.is_valid(ops.column("end_ps"))))
    ranks = sorted(set(ops.column("rank").to_pylist()))
    shown = ranks[:_TIMELINE_RANKS]
    row_of = {r: i for i, r in enumerate(shown)}
    fig = Figure(figsize=(10, max(2.5, 0.28 * len(shown) + 1.2)))
    ax = fig.add_subplot()
    unit, scale = ("ms", 1e9) if times[pick] >= 2e9 else ("us", 1e6)
    rank = ops.column("rank").to_pylist()
    keep = np.array([r in row_of for r in rank], dtype=bool)
    y = np.array([row_of.get(r, 0) for r in rank], dtype=np.float64)[keep]
    x0 = (_floats(ops.column("start_ps"))[keep] - start) / scale
    width = np.maximum(
        (_floats(ops.column("end_ps"))[keep] - _floats(ops.column("start_ps"))[keep]) / scale, 1e-9
    )
    phase = np.array(ops.column("phase").to_pylist(), dtype=object)[keep]
    compute = np.array(ops.column("is_compute").to_pylist(), dtype=bool)[keep]
    rasterize = int(keep.sum()) > 2000
    used = set()
    for p in dict.fromkeys(phase.tolist()):
        for is_compute in (True, False):
            m = (phase == p) & (compute == is_compute)
            if not m.any():
                continue
            # Compute fills the row; communication a thinner band below it, so overlap shows.
            ax.barh(
                y[m] + (-0.15 if is_compute else 0.275),
                width[m],
                left=x0[m],
                height=0.5 if is_compute else 0.25,
                color=_PHASE_COLOURS.get(p, "#7f7f7f"),
                alpha=1.0 if is_compute else 0.7,
                rasterized=rasterize,
            )
            used.add(p)
    node_of: Dict[int, Any] = {}
    if "node" in ops.column_names:
        for r, n in zip(rank, ops.column("node").to_pylist()):
            node_of.setdefault(r, n)
    ax.set_yticks(range(len(shown)))
    ax.set_yticklabels(
        [
            f"rank {r} ({names.node(node_of[r])})" if node_of.get(r) is not None else f"rank {r}"
            for r in shown
        ],
        fontsize=7,
    )
    ax.set_ylim(len(shown) - 0.5, -0.5)
    ax.set_xlabel(f"time since the iteration started ({unit})")
    ax.grid(alpha=0.3, axis="x")
    from matplotlib.patches import Patch

    ax.legend(
        handles=[
            Patch(color=_PHASE_COLOURS.get(p, "#7f7f7f"), label=p) for p in sorted(used, key=_phase_order)
        ],
        fontsize=7,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
    )
    more = f" (first {len(shown)} of {len(ranks)} ranks)" if len(ranks) > len(shown) else ""
    page.figure(
        fig,
        f"Per-rank timeline of iteration {iteration} of workload {mine.column('workload')[0].as_py()} "
        f"(the median iteration time){more}: compute as full bars, communication as thin bars",
        "step-timeline",
    )


def _phase_order(phase: str) -> Tuple[int, str]:
    order = list(_PHASE_COLOURS)
    return (order.index(phase), phase) if phase in order else (len(order), phase)


# -- a sweep ----------------------------------------------------------------------------------------


def _all_zero(table: pa.Table, column: str) -> bool:
    """Whether every value of ``column`` is 0 or null (a metric that tells nothing here)."""
    values = [v for v in table.column(column).to_pylist() if v is not None]
    return all(_zero(v) for v in values)


def _sweep_report(folder: Path, title: Optional[str], link_from: Path) -> str:
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
    zero: List[str] = []
    for metric, label in SWEEP_PLOTS:
        if metric not in ok.column_names or ok.num_rows == 0:
            continue
        values = ok.column(metric)
        if values.null_count == len(values):
            continue
        if _all_zero(ok, metric):
            zero.append(metric)
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
            f"metric-{metric}",
        )
        plotted += 1
    if plotted == 0:
        page.note("No run finished: nothing to plot.")
    if zero:
        page.p(
            "Zero in every run (not plotted): " + ", ".join(f"<code>{html.escape(z)}</code>" for z in zero),
            "meta",
        )
    if _has_values(ok, "offered_load") and _has_values(ok, "accepted_throughput"):
        page.h2("Offered and accepted load")
        fig = Figure(figsize=(6, 5))
        ax = fig.add_subplot()
        others = [p for p in params if p not in ("seed", x_param)] if x_param else []
        _plot_offered_accepted(ax, ok, x_param or "seed", others)
        page.figure(
            fig,
            "Accepted throughput against the offered load (both fractions of the injection bandwidth; "
            "mean over seeds), with the y = x line: below saturation the points lie on it",
            "offered-accepted",
        )

    page.h2("Runs")
    metrics = [
        "slowdown_p50",
        "slowdown_p99",
        "goodput_gbps",
        "drops",
        "pause_us",
        "max_queue_bytes",
        "offered_load",
        "accepted_throughput",
        "iteration_time_mean_us",
    ]
    metrics = [m for m in metrics if m in table.column_names and _has_values(table, m)]
    metrics = [m for m in metrics if not _all_zero(table, m)]
    shown = [*params, *metrics, "wall_seconds"]
    shown = [c for c in shown if c in table.column_names]
    runs = table.column("run").to_pylist() if "run" in table.column_names else [None] * table.num_rows
    rows = []
    for r, run in zip(table.select(shown).to_pylist(), runs):
        row: List[Any] = [r[c] for c in shown[: len(params)]]
        row += [_metric_value(c, r[c], exact=False) for c in shown[len(params) :]]
        row.append(_run_link(folder, run, link_from))
        rows.append(row)
    page.table([*shown, "run"], rows, left=len(params))
    if errors:
        page.h2("Failed points")
        for r in table.filter(pc.is_valid(table.column("error"))).to_pylist():
            where = ", ".join(f"{p}={r[p]}" for p in params)
            page.p(html.escape(f"{where}: {r['error']}"), "err")
    return page.html()


def _has_values(table: pa.Table, column: str) -> bool:
    return (
        column in table.column_names
        and table.num_rows > 0
        and table.column(column).null_count < len(table.column(column))
    )


def _run_link(folder: Path, run: Optional[str], link_from: Path) -> Any:
    """The run's folder name, a link to its report.html when that exists."""
    if not run:
        return "-"
    page = folder / run / REPORT_FILE
    if not page.is_file():
        return run
    href = Path(os.path.relpath(page.resolve(), link_from.resolve())).as_posix()
    return _Html(f"<a class='run-report' href='{html.escape(_url_path(href))}'>{html.escape(run)}</a>")


def _url_path(path: str) -> str:
    """A relative file path as a URL path (characters such as ``%``, ``#``, ``?`` and spaces
    escaped; a sweep's point names hold ``=`` and ``,``, which stay)."""
    from urllib.parse import quote

    return quote(path, safe="/=,.-_~+:@")


def _plot_offered_accepted(ax: Any, table: pa.Table, load: str, variants: Sequence[str]) -> None:
    """Accepted throughput against the realised offered load, one line per variant, the runs of
    one swept ``load`` (the x parameter) averaged over their seeds; and the y = x line."""
    rows = [
        r for r in table.to_pylist() if r["offered_load"] is not None and r["accepted_throughput"] is not None
    ]
    lines: Dict[Tuple[Any, ...], Dict[float, List[Tuple[float, float]]]] = {}
    for r in rows:
        key = tuple(r[v] for v in variants)
        # The seeds of one point (same swept load) are averaged.
        lines.setdefault(key, {}).setdefault(r[load], []).append(
            (float(r["offered_load"]), float(r["accepted_throughput"]))
        )
    top = 0.0
    for key in sorted(lines, key=lambda k: tuple(_sortable(v) for v in k)):
        points = sorted(lines[key].items(), key=lambda kv: _sortable(kv[0]))
        x = np.array([np.mean([o for o, _ in v]) for _, v in points])
        y = np.array([np.mean([a for _, a in v]) for _, v in points])
        top = max(top, float(x.max()), float(y.max()))
        label = ", ".join(_cell(v) for v in key) if key else "runs"
        ax.plot(x, y, "o-", label=label)
    top = max(top * 1.05, 0.05)
    ax.plot([0, top], [0, top], "--", color="#777", lw=1, gid="fx-yx-line", label="y = x")
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    ax.set_aspect("equal")
    ax.set_xlabel("offered load (fraction of injection bandwidth)")
    ax.set_ylabel("accepted throughput")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, title=", ".join(variants) or None, title_fontsize=8, loc="upper left")


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


def _log_x(ax: Any) -> None:
    """A log-scale x axis labelled with plain numbers (``1``, ``10``, ``0.5``), not ``10^0``
    (mathtext, which is also slow to lay out)."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: _plain(float(v))))
    ax.xaxis.set_minor_formatter(NullFormatter())


def _floats(column: Any) -> np.ndarray:
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    return np.asarray(
        pc.cast(column, pa.float64()).fill_null(math.nan).to_numpy(zero_copy_only=False), dtype=np.float64
    )


def _step(times: np.ndarray) -> float:
    return float(np.min(np.diff(times))) if len(times) > 1 else float(times[0] or 1)
