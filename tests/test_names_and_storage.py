"""Issue 18 items 1 and 4: nodes.arrow and ports.arrow (names as ``[[fault]]`` takes them), names in
the Results API, report and CLI, ``fabricemu topo`` link counting and export, dictionary-encoded
strings, ``[output]`` Parquet and compression, and DuckDB reading the outputs directly."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import fabricemu
from fabricemu import Scenario
from fabricemu.results import FabricNames

# A leaf-spine with PFC and an incast, every trace on (host queues too, empty ones included).
NAMED = """\
name = "named"
seed = 3

[topology]
kind = "leaf_spine"
leaves = 2
spines = 2
hosts_per_leaf = 4
link_rate = "100Gbps"
fabric_link_rate = "100Gbps"

[switch]
pfc = { enabled = true, xoff = "30KB" }

[[workload]]
kind = "incast"
receiver = 0
senders = 6
size = "128KiB"

[trace]
queues = { interval = "1us", hosts = true, empty = true }
links = { interval = "2us" }
pfc = true
"""


@pytest.fixture(scope="module")
def named(tmp_path_factory: pytest.TempPathFactory) -> fabricemu.Result:
    return fabricemu.run(Scenario.from_toml(NAMED), out=tmp_path_factory.mktemp("named") / "run")


def test_nodes_and_ports_name_every_node_and_port(named: fabricemu.Result) -> None:
    nodes, ports = named.nodes, named.ports
    # 8 hosts, 2 leaves, 2 spines; 8 host links + 4 leaf-spine links, two ports each.
    assert nodes.column("name").to_pylist() == [
        *(f"host:{i}" for i in range(8)),
        "leaf:0",
        "leaf:1",
        "spine:0",
        "spine:1",
    ]
    assert nodes.column("role").to_pylist() == ["host"] * 8 + ["leaf"] * 2 + ["spine"] * 2
    assert nodes.column("node").to_pylist() == list(range(12))
    assert ports.num_rows == 2 * (8 + 4)
    rows = ports.to_pylist()
    for r in rows:
        back = rows[r["peer_port"]]
        assert (back["node"], back["peer_node"], back["peer_port"]) == (r["peer_node"], r["node"], r["port"])
        assert r["rate_bps"] == 100_000_000_000
    host5 = next(r for r in rows if r["node_name"] == "host:5")
    assert (host5["peer_name"], host5["tier"]) == ("leaf:1", "host")
    # The files keep string columns dictionary-encoded; the API gives plain strings.
    raw = pa.ipc.open_file(pa.memory_map(str(named.out / "nodes.arrow"))).read_all()
    assert pa.types.is_dictionary(raw.schema.field("name").type)
    assert pa.types.is_string(nodes.schema.field("name").type)


def test_the_names_are_those_faults_take(named: fabricemu.Result) -> None:
    # Every link, named by the two ends ports.arrow gives, is a link [[fault]] accepts.
    base = Scenario.from_toml(NAMED)
    for r in named.ports.to_pylist():
        s = base.with_({"fault": [{"link": [r["node_name"], r["peer_name"]], "at": "1us"}]})
        s.describe()
    # A name that is not in nodes.arrow is refused, naming the key.
    with pytest.raises(fabricemu.ScenarioError, match=r"fault\.0\.link\.0.*leaf:2 does not exist"):
        base.with_({"fault": [{"link": ["leaf:2", "spine:0"], "at": "1us"}]}).describe()


def test_tables_join_to_names(named: fabricemu.Result) -> None:
    queues = named.with_names("queues")
    assert {"switch_name", "port_name", "node_name"} <= set(queues.column_names)
    assert queues.column_names.index("port_name") == queues.column_names.index("port") + 1
    ports = {r["port"]: r for r in named.ports.to_pylist()}
    for r in queues.slice(0, 50).to_pylist():
        p = ports[r["port"]]
        assert r["port_name"] == f"{p['node_name']} -> {p['peer_name']}"
        assert r["node_name"] == p["node_name"] == r["switch_name"]
    # Host NIC queues are in queues.arrow (hosts = true) and named as hosts under `node`.
    assert any(n.startswith("host:") for n in queues.column("node_name").to_pylist())
    links = fabricemu.attach_names(named.links, named.nodes, named.ports)
    first = links.slice(0, 1).to_pylist()[0]
    assert first["link_name"] == f"{first['src_name']} -> {first['dst_name']}"
    pfc = named.with_names("pfc")
    assert pfc.num_rows > 0 and {"upstream_name", "paused_port_name"} <= set(pfc.column_names)
    names = named.names()
    assert isinstance(names, FabricNames) and names
    leaf_up = next(r for r in named.ports.to_pylist() if r["node_name"] == "leaf:0" and r["tier"] == "fabric")
    assert names.queue(leaf_up["port"], 3) == f"leaf:0 -> {leaf_up['peer_name']} prio 3"
    assert FabricNames(None, None).queue(52, 3) == "port 52 prio 3"


def test_the_fabric_without_a_run_is_the_runs(named: fabricemu.Result) -> None:
    nodes, ports = Scenario.from_toml(NAMED).fabric_tables()
    assert nodes.equals(named.nodes.replace_schema_metadata(None))
    assert ports.equals(named.ports.replace_schema_metadata(None))


def test_cluster_places_in_nodes(tmp_path: Path) -> None:
    s = Scenario.load(Path(__file__).resolve().parent.parent / "scenarios" / "gpu_nvl72.toml")
    nodes, _ = s.fabric_tables()
    gpu = {r["name"]: r for r in nodes.to_pylist()}
    # 4 GPUs per server, 18 servers per rack, 72-GPU scale-up domains, one NIC per GPU (rail).
    g = gpu["gpu:77"]
    assert (g["server"], g["rack"], g["rail"], g["domain"]) == (19, 1, 1, 1)
    assert gpu["nvswitch:1"]["domain"] == 1 and gpu["leaf:3"]["plane"] == 0


def test_report_and_cli_print_names(named: fabricemu.Result, cli) -> None:
    pytest.importorskip("matplotlib")
    from fabricemu.report import report_html

    text = report_html(named.out)
    assert " -&gt; " in text and "prio" in text
    assert "switch 8 port" not in text
    proc = cli("show", str(named.out))
    assert proc.returncode == 0, proc.stderr
    assert "deepest queue" in proc.stdout and " -> " in proc.stdout
    assert "busiest link" in proc.stdout


def test_topo_counts_both_directions_and_exports(cli, tmp_path: Path) -> None:
    toml = tmp_path / "named.toml"
    toml.write_text(NAMED)
    proc = cli("topo", str(toml))
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.strip().startswith("links"))
    assert "12 (8 host at 100 Gbps, 4 fabric at 100 Gbps), each both directions" in line
    assert "24 one-direction links as links.arrow and ports.arrow count them" in line
    assert json.loads(cli("topo", str(toml), "--json").stdout)["directed_links"] == 24

    bad = cli("topo", str(toml), "--export", "graphml")
    assert bad.returncode == 2 and "-o" in bad.stderr

    graphml = tmp_path / "fabric.graphml"
    proc = cli("topo", str(toml), "--export", "graphml", "-o", str(graphml))
    assert proc.returncode == 0, proc.stderr
    assert "12 nodes, 12 links" in proc.stdout
    as_json = tmp_path / "fabric.json"
    assert cli("topo", str(toml), "--export", "json", "-o", str(as_json)).returncode == 0

    nx = pytest.importorskip("networkx")
    g = nx.read_graphml(graphml)
    assert g.number_of_nodes() == 12 and g.number_of_edges() == 12
    assert g.nodes["leaf:1"]["role"] == "leaf" and g.nodes["host:5"]["node"] == 5
    assert set(g.neighbors("host:5")) == {"leaf:1"}
    edge = g.get_edge_data("leaf:0", "spine:1")
    edge = edge.get(0, edge) if g.is_multigraph() else edge
    assert (edge["rate_bps"], edge["tier"]) == (100_000_000_000, "fabric")
    j = nx.node_link_graph(json.loads(as_json.read_text()), edges="links")
    assert j.number_of_nodes() == 12 and j.number_of_edges() == 12
    assert j.nodes["spine:0"]["role"] == "spine"


def test_parquet_and_compressed_outputs(cli, tmp_path: Path) -> None:
    toml = tmp_path / "named.toml"
    toml.write_text(NAMED)
    plain = tmp_path / "plain"
    assert cli("run", str(toml), "-o", str(plain), "-q").returncode == 0
    zstd = tmp_path / "zstd"
    assert cli("run", str(toml), "-o", str(zstd), "-q", "--compression", "zstd").returncode == 0
    parquet = tmp_path / "parquet"
    proc = cli("run", str(toml), "-o", str(parquet), "-q", "--format", "parquet", "--compression", "zstd")
    assert proc.returncode == 0, proc.stderr

    tables = ["flows", "links", "nodes", "pfc", "ports", "queues"]
    expected_files = sorted([*(f"{t}.parquet" for t in tables), "run.json"])
    assert sorted(p.name for p in parquet.iterdir()) == expected_files
    assert not list(parquet.glob(".*")), "no temporary file is left"
    # Compressed Arrow is smaller than the engine's plain Arrow, and reads the same.
    assert (zstd / "queues.arrow").stat().st_size < (plain / "queues.arrow").stat().st_size

    runs = [fabricemu.open(p) for p in (plain, zstd, parquet)]
    for name in tables:
        expected = runs[0].table(name).replace_schema_metadata(None)
        for r in runs[1:]:
            assert r.table(name).replace_schema_metadata(None).equals(expected), name
    assert runs[2].summary()["flows"] == runs[0].summary()["flows"]
    part = runs[2].table("queues", columns=["time_ps", "bytes"], filter=pc.field("port") == 0)
    assert part.num_rows == runs[0].table("queues", filter=pc.field("port") == 0).num_rows

    info = json.loads((parquet / "run.json").read_text())
    assert info["scenario"]["output"] == {"format": "parquet", "compression": "zstd"}
    assert info["overrides"] == {"output.format": "parquet", "output.compression": "zstd"}
    outputs = {o["file"]: o for o in info["outputs"]}
    assert outputs["flows.parquet"]["rows"] == info["stats"]["flows_total"]
    # The parquet keeps the run's metadata (scenario, seed).
    import pyarrow.parquet as pq

    meta = pq.read_schema(parquet / "flows.parquet").metadata
    assert meta[b"fabricemu.seed"] == b"3"
    # Run again from the run.json: the same storage.
    again = tmp_path / "again"
    assert cli("run", str(parquet / "run.json"), "-o", str(again), "-q").returncode == 0
    assert (again / "flows.parquet").is_file()

    bad = cli("run", str(toml), "-o", str(tmp_path / "bad"), "--set", 'output.compression="gzip"')
    assert bad.returncode == 2 and "output.compression" in bad.stderr
    # The report reads Parquet runs too, and names their files.
    pytest.importorskip("matplotlib")
    from fabricemu.report import report_html

    assert "<code>flows.parquet</code>" in report_html(parquet)


def test_duckdb_reads_the_outputs_directly(named: fabricemu.Result, tmp_path: Path) -> None:
    duckdb = pytest.importorskip("duckdb")
    import pyarrow.dataset as ds

    # Arrow IPC files: through a pyarrow dataset (DuckDB scans it, pushing filters down).
    queues = ds.dataset(str(named.out / "queues.arrow"), format="ipc")  # noqa: F841 - read by DuckDB
    ports = ds.dataset(str(named.out / "ports.arrow"), format="ipc")  # noqa: F841
    top = duckdb.sql(
        """
        SELECT p.node_name || ' -> ' || p.peer_name AS queue, q.priority, max(q.max_bytes) AS max_bytes
        FROM queues q JOIN ports p ON q.port = p.port
        GROUP BY ALL ORDER BY max_bytes DESC, queue LIMIT 1
        """
    ).fetchall()
    busiest = fabricemu.analysis.busiest_ports(named, n=1).to_pylist()[0]
    assert top[0][0] == named.names().port(busiest["port"])
    assert top[0][2] == busiest["max_bytes"]

    # Parquet files: read_parquet, no Python in between.
    out = tmp_path / "pq"
    fabricemu.run(Scenario.from_toml(NAMED).with_({"output.format": "parquet"}), out=out)
    n = duckdb.sql(f"SELECT count(*) FROM read_parquet('{out / 'flows.parquet'}')").fetchall()
    assert n == [(named.flows.num_rows,)]
    tier = duckdb.sql(
        f"SELECT tier, count(*) FROM read_parquet('{out / 'ports.parquet'}') GROUP BY tier ORDER BY tier"
    ).fetchall()
    assert tier == [("fabric", 8), ("host", 16)]
