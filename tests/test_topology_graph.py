"""Topologies from graphs and the three-tier Clos (issue 18 item 8), end to end from scenario files,
the CLI and the Python API: an exported fabric loads back as ``kind = "graph"`` with identical
outputs, networkx graphs become scenarios, graph files are found relative to their scenario, bad
graphs fail with located errors, and the HPCC paper's fabric is built exactly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

import fabricemu
from fabricemu import ScenarioError
from fabricemu.topology import from_networkx

from conftest import ROOT, SCENARIOS, read_arrow

WORKLOAD = """
[[workload]]
kind = "permutation"
size = "150KB"
[[workload]]
kind = "incast"
receiver = 2
senders = 5
size = "80KB"
start = "3us"
[trace]
queues = { interval = "2us" }
links = { interval = "2us" }
"""


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fabricemu.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def plain(table: pa.Table) -> pa.Table:
    return table.replace_schema_metadata(None)


@pytest.mark.parametrize("lb", ["ecmp", "spray"])
def test_exported_fat_tree_loads_back_with_identical_outputs(tmp_path: Path, lb: str):
    tree = tmp_path / "tree.toml"
    tree.write_text(
        f'name = "tree"\n[topology]\nkind = "fat_tree"\nk = 4\nfabric_link_rate = "200Gbps"\n'
        f'link_delay = "1us"\n[routing]\nload_balancing = "{lb}"\n{WORKLOAD}'
    )
    (tmp_path / "fabrics").mkdir()
    p = cli("topo", str(tree), "--export", "graphml", "-o", "fabrics/tree.graphml", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    graph = tmp_path / "graph.toml"
    graph.write_text(
        f'name = "graph"\n[topology]\nkind = "graph"\nfile = "fabrics/tree.graphml"\n'
        f'[routing]\nload_balancing = "{lb}"\n{WORKLOAD}'
    )
    for name in ("tree", "graph"):
        p = cli("run", f"{name}.toml", "-o", f"runs/{name}", "--quiet", cwd=tmp_path)
        assert p.returncode == 0, p.stderr
    a, b = tmp_path / "runs" / "tree", tmp_path / "runs" / "graph"
    for table in ("flows", "links", "queues", "ports", "nodes"):
        ta, tb = plain(read_arrow(a / f"{table}.arrow")), plain(read_arrow(b / f"{table}.arrow"))
        assert ta.num_rows > 0, table
        assert ta.equals(tb), table
    # The same fabric by every measure `fabricemu topo` has.
    fa = json.loads(cli("topo", "tree.toml", "--json", cwd=tmp_path).stdout)
    fb = json.loads(cli("topo", "graph.toml", "--json", cwd=tmp_path).stdout)
    for key in ("hosts", "switches", "links", "roles", "tiers", "bisection_bps", "diameter_links"):
        assert fa[key] == fb[key], key


def test_graph_file_is_relative_to_the_scenario_from_any_folder(tmp_path: Path, monkeypatch):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "line.edges").write_text("h0 s0\nh1 s0\nh2 s1\ns0 s1 400Gbps\n")
    path = tmp_path / "sub" / "s.toml"
    path.write_text(
        '[topology]\nkind = "graph"\nfile = "line.edges"\nlink_rate = "100Gbps"\nlink_delay = "1us"\n'
        '[[workload]]\nkind = "incast"\nreceiver = 2\nsenders = [0, 1]\nsize = "50KB"\n'
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    s = fabricemu.Scenario.load(path)
    assert s.to_dict()["topology"]["file"] == str(tmp_path / "sub" / "line.edges")
    s2 = s.with_({"workload.0.size": "20KB"})
    r = fabricemu.run(s2, out=tmp_path / "run")
    assert r.flows.num_rows == 2
    nodes = r.table("nodes").to_pylist()
    assert [n["name"] for n in nodes] == ["host:0", "host:1", "host:2", "switch:0", "switch:1"]
    # The CLI too, run from another folder.
    p = cli("run", str(path), "-o", str(tmp_path / "cli-run"), "--quiet", cwd=elsewhere)
    assert p.returncode == 0, p.stderr


def test_bad_graph_files_name_file_line_and_what(tmp_path: Path):
    (tmp_path / "bad.edges").write_text("h0 s0\nh1 s0\nh0 s1\ns0 s1\n")
    (tmp_path / "bad.toml").write_text(
        '[topology]\nkind = "graph"\nfile = "bad.edges"\nlink_rate = "100Gbps"\nlink_delay = "1us"\n'
        '[[workload]]\nkind = "permutation"\nsize = "1KB"\n'
    )
    p = cli("validate", "bad.toml", cwd=tmp_path)
    assert p.returncode == 2
    assert 'bad.toml:3:8: topology.file: bad.edges: host "h0" has 2 links' in p.stderr, p.stderr
    (tmp_path / "bad.edges").write_text("h0 s0\nh1 s0 fast\n")
    p = cli("validate", "bad.toml", cwd=tmp_path)
    assert 'topology.file: bad.edges:2: rate: expected a rate like "100Gbps"' in p.stderr, p.stderr
    with pytest.raises(ScenarioError) as e:
        fabricemu.Scenario.from_dict(
            {
                "topology": {"kind": "graph", "edges": "h0 s0\nh1 s0\n"},
                "workload": [{"kind": "permutation", "size": "1KB"}],
            }
        )
    assert e.value.path == "topology.edges"
    assert "link h0 - s0 has no rate" in e.value.message


def test_from_networkx_makes_the_same_scenario_as_its_table():
    nx = pytest.importorskip("networkx")
    g = nx.hypercube_graph(3)
    g = nx.relabel_nodes(g, {n: "s" + "".join(map(str, n)) for n in g})
    nx.set_edge_attributes(g, "100Gbps", "rate")
    nx.set_edge_attributes(g, "1us", "delay")
    for n in list(g):
        g.add_node("h" + n[1:], role="host", rack=int(n[1:], 2))
        g.add_edge("h" + n[1:], n, rate=25_000_000_000, delay="2us")
    t = from_networkx(g)
    assert t["kind"] == "graph" and "rate_bps=25000000000" in t["edges"]
    base = {"workload": [{"kind": "permutation", "size": "50KB"}]}
    a = fabricemu.Scenario.from_dict({**base, "topology": t})
    b = fabricemu.Scenario.from_dict({**base, "topology": g})
    assert a.to_dict() == b.to_dict()
    c = a.with_({"topology": g})
    assert c.to_dict() == a.to_dict()
    f = b.fabric_summary()
    assert (f["hosts"], f["switches"], f["links"]) == (8, 8, 8 + 12)
    assert f["diameter_links"] == 5  # host, 3 cube hops, host
    nodes, _ = b.fabric_tables()
    racks = {r["name"]: r["rack"] for r in nodes.to_pylist() if r["host"]}
    assert racks["host:5"] == 5
    r = fabricemu.run(b.with_({"routing.load_balancing": "adaptive"}))
    assert r.flows.column("finish_ps").null_count == 0

    bad = nx.Graph()
    bad.add_edge("h 0", "s0")
    with pytest.raises(ScenarioError) as e:
        fabricemu.Scenario.from_dict({**base, "topology": bad})
    assert e.value.path == "topology" and "no spaces" in e.value.message
    bad = nx.Graph([("h0", "s0"), ("h1", "s0")])
    bad.add_node("s0", role="blob")
    with pytest.raises(ScenarioError) as e:
        t = from_networkx(bad, link_rate="1Gbps", link_delay="1us")
        fabricemu.Scenario.from_dict({**base, "topology": t})
    assert 'unknown role "blob"' in e.value.message


def test_hpcc_fabric_counts_and_bisection():
    """shared/reference/hpcc_simulation_setup.csv: 16 core + 20 agg + 20 ToR, 5 pods, 16 servers
    per ToR, 100G hosts / 400G fabric, 1 us links, no oversubscription."""
    p = cli("topo", str(SCENARIOS / "hpcc_fabric.toml"), "--json", cwd=ROOT)
    assert p.returncode == 0, p.stderr
    f = json.loads(p.stdout)
    assert (f["hosts"], f["switches"]) == (320, 56)
    assert [(r["role"], r["switches"]) for r in f["roles"]] == [("edge", 20), ("agg", 20), ("core", 16)]
    assert f["bisection_bps"] == 160 * 100_000_000_000
    assert f["oversubscription"] == 1.0
    assert all(r["oversubscription"] in (1.0, None) for r in f["roles"])
    text = cli("topo", str(SCENARIOS / "hpcc_fabric.toml"), cwd=ROOT).stdout
    assert "clos 5 pods x 4 ToRs x 16 hosts, 4 aggs per pod, 16 cores" in text


def test_docs_page_runs(tmp_path: Path, monkeypatch):
    pytest.importorskip("networkx")
    from test_docs import run_blocks

    monkeypatch.chdir(tmp_path)
    ns = run_blocks(ROOT / "docs" / "topology.md", tmp_path, with_required=True)
    assert (tmp_path / "clos.graphml").is_file()
    assert "topology" in ns
    assert os.path.isdir(tmp_path / "runs" / "from_graph")
