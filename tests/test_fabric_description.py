"""One description of the fabric, computed by the core from the fabric it builds, for every topology
kind: through ``fabricemu validate``, ``repr``, ``_repr_html_``, ``fabricemu topo`` (the real
console script), run.json and the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import fabricemu
import fabricemu.report

from conftest import SCENARIOS

# (kind, scenario text with a small fabric, hosts, switches, links per tier)
KINDS = [
    (
        "fat_tree",
        'kind = "fat_tree"\nk = 4',
        16,
        20,
        {"host": 16, "fabric": 16, "core": 16},
        "fat_tree k=4",
    ),
    (
        "leaf_spine",
        'kind = "leaf_spine"\nleaves = 4\nspines = 2\nhosts_per_leaf = 4\nhost_link_rate = "25Gbps"',
        16,
        6,
        {"host": 16, "fabric": 8},
        "leaf_spine 4 leaves x 2 spines, 4 hosts per leaf",
    ),
    (
        "dragonfly",
        'kind = "dragonfly"\np = 2\na = 4\nh = 2\ng = 9',
        72,
        36,
        {"host": 72, "fabric": 54, "global": 36},
        "dragonfly p=2 a=4 h=2 g=9",
    ),
    (
        "dragonfly_plus",
        'kind = "dragonfly_plus"\nleaves = 2\nspines = 2\nhosts_per_leaf = 2\nh = 2\ng = 5',
        20,
        20,
        {"host": 20, "fabric": 20, "global": 10},
        "dragonfly_plus 5 groups of 2 leaves x 2 spines, 2 hosts per leaf, h=2",
    ),
]

WORKLOAD = """
[[workload]]
kind = "permutation"
size = "8KiB"
"""


def scenario_text(kind: str, topology: str) -> str:
    return f'name = "{kind}-small"\nseed = 1\n\n[topology]\n{topology}\n{WORKLOAD}'


@pytest.fixture(params=KINDS, ids=[k[0] for k in KINDS])
def kind_case(request, tmp_path: Path):
    kind, topology, hosts, switches, tiers, shape = request.param
    path = tmp_path / f"{kind}.toml"
    path.write_text(scenario_text(kind, topology))
    return path, kind, hosts, switches, tiers, shape


def test_describe_is_the_built_fabric(kind_case):
    path, kind, hosts, switches, tiers, shape = kind_case
    t = fabricemu.Scenario.load(path).describe()["topology"]
    assert t["kind"] == kind
    assert (t["hosts"], t["switches"], t["links"]) == (hosts, switches, sum(tiers.values()))
    assert {x["tier"]: x["links"] for x in t["tiers"]} == tiers
    assert sum(r["switches"] for r in t["roles"]) == switches
    assert fabricemu.scenario.fabric_shape(t) == shape


def test_repr_and_html(kind_case):
    path, kind, hosts, switches, tiers, shape = kind_case
    s = fabricemu.Scenario.load(path)
    r = repr(s)
    assert f"{shape} ({hosts} hosts, {switches} switches, {sum(tiers.values())} links" in r
    page = s._repr_html_()
    assert shape in page and f"{hosts} hosts" in page
    assert "bisection" in page  # the measured figures too
    if kind == "leaf_spine":
        assert "25Gbps host / 100Gbps fabric" in r


def test_validate_command(kind_case, cli):
    path, kind, hosts, switches, _tiers, shape = kind_case
    proc = cli("validate", str(path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"ok: {kind}-small: {shape} ({hosts} hosts, {switches} switches")
    assert proc.stderr == ""


def test_topo_command(kind_case, cli):
    path, kind, _hosts, _switches, tiers, shape = kind_case
    proc = cli("topo", str(path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == f"{kind}-small: {shape}"
    links_line = next(line for line in proc.stdout.splitlines() if line.strip().startswith("links"))
    for tier, n in tiers.items():
        assert f"{n:,} {tier} at" in links_line
    as_json = json.loads(cli("topo", str(path), "--json").stdout)
    assert {x["tier"]: x["links"] for x in as_json["tiers"]} == tiers
    assert as_json["links"] == sum(tiers.values())


def test_topo_counts_the_global_links_of_the_1k_dragonfly(cli):
    proc = cli("topo", str(SCENARIOS / "dragonfly_ugal_1k.toml"))
    assert proc.returncode == 0, proc.stderr
    assert "links             2,508 (1,056 host at 100 Gbps, 924 fabric at 100 Gbps, 528 global at" in (
        proc.stdout
    )


@pytest.mark.parametrize(
    "name", ["dragonfly.toml", "dragonfly_plus.toml", "dragonfly_ugal.toml", "dragonfly_ugal_1k.toml"]
)
def test_shipped_dragonflies_validate_and_repr(name, cli):
    proc = cli("validate", str(SCENARIOS / name))
    assert proc.returncode == 0, proc.stderr
    s = fabricemu.Scenario.load(SCENARIOS / name)
    assert repr(s).startswith(f"<Scenario {s.name!r}") and "dragonfly" in repr(s)
    assert "<table>" in s._repr_html_()


def test_run_json_and_report_carry_the_description(kind_case, tmp_path):
    pytest.importorskip("matplotlib")
    path, _kind, _hosts, _switches, tiers, shape = kind_case
    s = fabricemu.Scenario.load(path)
    result = fabricemu.run(s, out=tmp_path / "out")
    fabric = result.run_info["fabric"]
    assert fabric == s.describe()["topology"]
    assert {x["tier"]: x["links"] for x in fabric["tiers"]} == tiers
    page = fabricemu.report.write_report(result.out).read_text()
    assert shape in page
    assert f"{sum(tiers.values())} (" in page
    assert "scenario unavailable" not in page
