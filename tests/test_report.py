"""The report's page without a browser (tests/test_browser_report.py renders it in one): numbers
without exponents, metrics that are zero left out, plots against the run's time laid out alike,
inline SVG with ids unique on the page, and the sweep's links to its runs' reports."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import fabricemu
from fabricemu import report

from conftest import TRACED

pytest.importorskip("matplotlib")


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_plain_numbers_never_have_an_exponent(v: float) -> None:
    text = report._plain(v)
    assert "e" not in text.replace("inf", ""), text
    if math.isfinite(v) and abs(v) >= 0.001:
        # Readable and close: 4 significant digits, or the whole number with separators.
        back = float(text.replace(",", ""))
        assert abs(back - v) <= max(abs(v) * 5e-4, 0.5), (v, text)


def test_cells_and_metric_values_read_well() -> None:
    assert report._cell(1.9e6) == "1,900,000"
    assert report._cell(1234567) == "1,234,567"
    assert report._cell(0.000012345) == "0.0000123"
    assert report._metric_value("fct_p99_us", 12590.0) == "12.59 ms"
    assert report._metric_value("max_queue_bytes", 894102) == "894 kB (894,102 B)"
    assert report._metric_value("max_queue_bytes", 894102, exact=False) == "894 kB"
    assert report._metric_value("goodput_gbps", 80.5) == "80.5 Gbps"
    assert report._metric_value("compute_fraction", 0.3142) == "31.42 %"


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> fabricemu.Result:
    folder = tmp_path_factory.mktemp("traced")
    (folder / "traced.toml").write_text(TRACED)
    return fabricemu.run(fabricemu.Scenario.load(folder / "traced.toml"), out=folder / "run")


def test_time_plots_share_their_layout(traced: fabricemu.Result) -> None:
    page = report.report_html(traced.out)
    timed = re.findall(r"<figure class='plot time' data-plot='([^']+)'[^>]*>(<svg.*?</svg>)", page, re.S)
    assert [k for k, _ in timed] == ["queues", "links", "pfc", "rates", "fairness"]
    widths = {re.search(r'width="([\d.]+)pt"', svg).group(1) for _, svg in timed}  # type: ignore[union-attr]
    assert len(widths) == 1, widths
    # The axes' background rectangle: the same left edge and width in every time plot.
    frames = set()
    for _, svg in timed:
        g = re.search(r'<g class="fx-time-axes">\s*<path d="M ([\d.]+) [\d.]+\s+L ([\d.]+) ', svg)
        assert g, svg[:500]
        frames.add((g.group(1), g.group(2)))
    assert len(frames) == 1, frames
    assert all("time (us)" in svg for _, svg in timed)


def test_ids_are_unique_and_nothing_is_fetched(traced: fabricemu.Result) -> None:
    page = report.report_html(traced.out)
    ids = re.findall(r'\sid="([^"]+)"', page)
    assert len(ids) == len(set(ids)), "every id once on the page"
    for ref in re.findall(r"url\(#([^)]+)\)", page) + re.findall(r'href="#([^"]+)"', page):
        assert ref in ids, ref
    assert "http://" not in page and "https://" not in page and "<script" not in page
    assert "<img" not in page


def test_zero_metrics_are_named_not_tabulated(traced: fabricemu.Result) -> None:
    page = report.report_html(traced.out)
    summary = page[page.index("<h2 id='summary'>") : page.index("Zero in this run")]
    m = traced.metrics()
    zero = [k for k, v in m.items() if isinstance(v, (int, float)) and not isinstance(v, bool) and v == 0]
    assert zero, "the traced run has metrics that are zero (drops, faults)"
    for k in zero:
        assert f"<td class='l'>{k}</td>" not in summary
    line = page[page.index("Zero in this run") :].split("</p>")[0]
    for k in zero:
        assert f"<code>{k}</code>" in line


def test_sweep_links_each_run_report(tmp_path: Path) -> None:
    (tmp_path / "s.toml").write_text(
        'name = "s"\n[topology]\nkind = "fat_tree"\nk = 4\n'
        '[[workload]]\nkind = "permutation"\nsize = "16KiB"\n'
    )
    out = tmp_path / "sweep dir"  # a space: the links are URL-escaped
    fabricemu.sweep(tmp_path / "s.toml", grid={"workload.0.size": ["16KiB", "32KiB"]}, out=out, jobs=1)
    # Without the run reports: no links (nothing to link to).
    page = report.write_report(out, run_reports=False).read_text()
    assert "class='run-report'" not in page
    assert not list(out.glob("runs/*/report.html"))
    # With them: written, and linked relative to wherever the page is.
    target = tmp_path / "elsewhere" / "deeper" / "s.html"
    page = report.write_report(out, target).read_text()
    hrefs = re.findall(r"<a class='run-report' href='([^']+)'>", page)
    assert len(hrefs) == 2
    from urllib.parse import unquote

    for href in hrefs:
        assert href.startswith("../../sweep%20dir/runs/")
        assert (target.parent / unquote(href)).resolve().is_file()
    # A second report does not rewrite run reports that are newer than their run.
    stamps = {p: p.stat().st_mtime_ns for p in out.glob("runs/*/report.html")}
    report.write_report(out)
    assert stamps == {p: p.stat().st_mtime_ns for p in out.glob("runs/*/report.html")}
