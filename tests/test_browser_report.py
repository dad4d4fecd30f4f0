"""The HTML report in a real headless browser (Chromium, from Qt WebEngine's PyPI wheels: see
tests/headless_browser.py): reports of real runs -- collectives, a step workload, a Poisson
web-search load with many flow sizes, a sweep of synthetic load with its runs' reports -- are loaded,
left to render, screenshotted (under pytest's tmp dir) and checked through the browser's DOM: the
sections and a plot in each, no console error, names instead of ids, no exponent in any table, the
time axes of the time plots lined up, the y = x line of offered against accepted load, and the
links from the sweep report to the run reports working.

Without the browser (``pip install 'fabricemu[browser]'``) the tests skip, saying why; with
FABRICEMU_BROWSER_REQUIRED=1 (.ci/run sets it once the browser installed and started) they fail
instead.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

import fabricemu
import fabricemu.report

pytest.importorskip("matplotlib")

HARNESS = Path(__file__).with_name("headless_browser.py")
REQUIRED = os.environ.get("FABRICEMU_BROWSER_REQUIRED") == "1"


@pytest.fixture(scope="module")
def browser() -> None:
    try:
        proc = subprocess.run(
            [sys.executable, str(HARNESS), "--check"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        ok, why = proc.returncode == 0, (proc.stdout.strip().splitlines() or [proc.stderr.strip()])[-1]
    except subprocess.TimeoutExpired:
        ok, why = False, "the browser did not start within 120 s"
    if not ok:
        message = (
            f"no headless browser ({why}); pip install 'fabricemu[browser]' (PyQt6-WebEngine) to run this"
        )
        if REQUIRED:
            pytest.fail(message + " [FABRICEMU_BROWSER_REQUIRED=1]")
        pytest.skip(message)


def render(page: Path, shots: Path, follow: int = 0) -> Dict[str, Any]:
    """Load ``page`` in the browser; the facts it reports (tests/headless_browser.py), with the
    screenshot written to ``shots/<page name>.png``."""
    shots.mkdir(parents=True, exist_ok=True)
    shot = shots / f"{page.parent.name}-{page.stem}.png"
    cmd = [sys.executable, str(HARNESS), str(page), str(shot)] + (["--follow", str(follow)] if follow else [])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    facts = json.loads(proc.stdout.strip().splitlines()[-1])
    assert facts["loaded"] and facts["ready"], facts.get("url")
    check_png(shot, facts["screenshot"])
    return facts


def check_png(path: Path, size: List[int]) -> None:
    """A real screenshot: a PNG of the page's size that is not one flat colour."""
    image = pytest.importorskip("matplotlib.image")
    pixels = image.imread(str(path), format="png")
    assert pixels.shape[0] == size[1] and pixels.shape[1] == size[0] and size[0] >= 1000
    assert pixels.std() > 0.01, f"{path} is blank"


def check_page(facts: Dict[str, Any], sections: List[str]) -> None:
    """The generic checks: no console message at all (errors or otherwise: the page runs no
    script), the sections present with a plot each, numbers without exponents, aligned time axes."""
    assert facts["console"] == [], facts["console"]
    assert facts["scripts"] == 0
    titles = [s["title"] for s in facts["sections"]]
    for want in sections:
        section = next((s for s in facts["sections"] if s["title"] == want), None)
        assert section is not None, f"no section {want!r} in {titles}"
        assert section["plots"] >= 1, f"section {want!r} has no plot: {section}"
    for figure in facts["figures"]:
        box = figure["svg"]
        assert box and box["width"] > 300 and box["height"] > 100, figure
        assert figure["paths"] > 5, figure  # drawn, not an empty frame
        assert figure["caption"]
    for table in facts["tables"]:
        for row in table:
            for cell in row:
                assert not re.search(r"\de[+-]?\d", cell), f"an exponent in a table: {cell!r}"
    axes = [a for f in facts["figures"] if f["time"] for a in f["time_axes"]]
    if len(axes) > 1:
        for a in axes[1:]:
            assert abs(a["left"] - axes[0]["left"]) < 1.5, (a, axes[0])
            assert abs(a["width"] - axes[0]["width"]) < 1.5, (a, axes[0])


def cells(facts: Dict[str, Any]) -> List[str]:
    return [c for t in facts["tables"] for row in t for c in row]


COLLECTIVES = """\
name = "collectives_browser"
seed = 1

[topology]
kind = "leaf_spine"
leaves = 2
spines = 2
hosts_per_leaf = 4
link_rate = "100Gbps"
link_delay = "500ns"

[routing]
load_balancing = "spray"

[[workload]]
name = "hier"
kind = "collective"
op = "all_reduce"
algorithm = "hierarchical_ring"
hosts = [0, 1, 2, 3, 4, 5, 6, 7]
domain_size = 4
size = "256KiB"
iterations = 3
compute_gap = "5us"

[trace]
queues = { interval = "1us" }
links = { interval = "2us" }
"""

WEBSEARCH = """\
name = "websearch_browser"
seed = 3
stop = "all_flows_done"

[topology]
kind = "fat_tree"
k = 4
link_rate = "100Gbps"
link_delay = "1us"

[switch]
ecn = { kmin = "100KB", kmax = "400KB", pmax = 0.2 }
pfc = { enabled = true }

[transport]
cc = "dcqcn"

[[workload]]
kind = "poisson"
cdf = "websearch"
load = 0.5
duration = "1ms"

[trace]
queues = { interval = "2us" }
links = { interval = "5us" }
pfc = true
rates = {}
"""

SYNTHETIC = """\
name = "synthetic_browser"
seed = 1
stop = "30us"
warmup = "5us"

[topology]
kind = "fat_tree"
k = 4
link_rate = "100Gbps"
link_delay = "500ns"

[nic]
arbitration = "fifo"

[[workload]]
kind = "synthetic"
pattern = "uniform_random"
load = 0.3
size = "4KiB"
"""


def test_collectives_report_in_a_browser(browser: None, tmp_path: Path) -> None:
    toml = tmp_path / "c.toml"
    toml.write_text(COLLECTIVES)
    result = fabricemu.run(fabricemu.Scenario.load(toml), out=tmp_path / "collectives")
    page = fabricemu.report.write_report(result.out)
    facts = render(page, tmp_path / "screenshots")
    check_page(
        facts,
        ["FCT slowdown by flow size", "Collectives", "Queue depth of the busiest ports", "Link utilisation"],
    )
    everything = cells(facts)
    assert any("hier all_reduce hierarchical_ring" in c for c in everything)
    assert any(c.endswith("Gbps") for c in everything), "bus bandwidth in Gbps"
    # Per tier: the header and values for both tiers.
    assert "scale-up busbw" in everything and "scale-out busbw" in everything
    # Names, not ids, in the queue and link tables.
    assert any(re.fullmatch(r"(leaf|spine|host):\d+ -> (leaf|spine|host):\d+", c) for c in everything)
    assert not any(re.fullmatch(r"(port|node|switch) \d+.*", c) for c in everything)
    # Three plots against the run's time: collectives, queues and links, lined up.
    timed = [f for f in facts["figures"] if f["time"]]
    assert {f["plot"] for f in timed} >= {"collectives", "queues", "links"}
    assert all(len(f["time_axes"]) == 1 for f in timed)


def test_step_workload_report_in_a_browser(browser: None, tmp_path: Path) -> None:
    result = fabricemu.run(
        fabricemu.Scenario.load(Path(__file__).parents[1] / "scenarios" / "step_graph.toml"),
        out=tmp_path / "steps",
    )
    page = fabricemu.report.write_report(result.out)
    facts = render(page, tmp_path / "screenshots")
    check_page(facts, ["Step timeline"])
    timeline = next(f for f in facts["figures"] if f["plot"] == "step-timeline")
    # Ranks named by their node.
    assert any(re.fullmatch(r"rank \d+ \(host:\d+\)", t) for t in timeline["texts"]), timeline["texts"]
    assert "forward" in timeline["texts"] and "backward" in timeline["texts"]
    everything = cells(facts)
    assert "gpipe_dp4_pp2" in everything
    assert any(c.endswith(" %") for c in everything), "fractions as percentages"
    # Zero-everywhere metrics are named, not tabulated.
    summary = facts["tables"][0]
    assert all(row[1] != "0" for row in summary[1:]), summary


def test_poisson_load_report_in_a_browser(browser: None, tmp_path: Path) -> None:
    toml = tmp_path / "w.toml"
    toml.write_text(WEBSEARCH)
    result = fabricemu.run(fabricemu.Scenario.load(toml), out=tmp_path / "websearch")
    page = fabricemu.report.write_report(result.out)
    facts = render(page, tmp_path / "screenshots")
    check_page(
        facts,
        [
            "FCT slowdown by flow size",
            "Queue depth of the busiest ports",
            "Link utilisation",
            "Congestion-control rates",
        ],
    )
    cdf = next(f for f in facts["figures"] if f["plot"] == "slowdown-cdf-by-size")
    # One CDF per flow-size bucket: several buckets, each named by its sizes in the legend.
    buckets = [t for t in cdf["texts"] if re.search(r"\d+ (B|kB|MB)", t) and "flows" in t]
    assert len(buckets) >= 3, cdf["texts"]
    size_table = next(t for t in facts["tables"] if t[0][0] == "flow size")
    assert len(size_table) - 1 == len(buckets)
    rates = next(f for f in facts["figures"] if f["plot"] == "rates")
    assert any(re.fullmatch(r"flow \d+: host:\d+ -> host:\d+", t) for t in rates["texts"]), rates["texts"]
    timed = [f for f in facts["figures"] if f["time"]]
    assert len(timed) >= 3


def test_sweep_report_links_its_runs_in_a_browser(browser: None, tmp_path: Path) -> None:
    toml = tmp_path / "s.toml"
    toml.write_text(SYNTHETIC)
    sweep_dir = tmp_path / "sweep"
    table = fabricemu.sweep(toml, grid={"workload.0.load": [0.2, 0.5, 0.9]}, out=sweep_dir, jobs=1)
    assert table.column("error").null_count == 3
    page = fabricemu.report.write_report(sweep_dir, tmp_path / "elsewhere" / "sweep.html")
    facts = render(page, tmp_path / "screenshots", follow=3)
    check_page(facts, ["Metrics against the parameters", "Offered and accepted load"])
    offered = next(f for f in facts["figures"] if f["plot"] == "offered-accepted")
    (line,) = offered["yx_lines"]
    (x0, y0), (x1, y1) = line["start"], line["end"]
    # y = x from (0, 0) up and to the right: equal rises on both axes (SVG y grows downwards,
    # the axes' aspect is equal).
    assert x1 > x0 and y1 < y0
    assert abs((x1 - x0) - (y0 - y1)) < 1.0, line
    # Every run is a working link to its own report.
    assert len(facts["links"]) == 3
    assert len(facts["followed"]) == 3
    for visit, link in zip(facts["followed"], facts["links"]):
        assert visit["loaded"] and visit["ready"], link
        assert visit["console"] == []
        assert visit["h1"].startswith("fabricemu run: synthetic_browser")
        assert link["text"] in visit["url"] or link["href"] == visit["url"]
        assert any(s["title"] == "Summary" for s in visit["sections"])
    for run in table.column("run").to_pylist():
        assert (sweep_dir / run / "report.html").is_file()
