"""GPU clusters (issue 13): `fabricemu topo` on a `[cluster]` scenario (the real CLI), the
fabric figures from Python, and errors naming the cluster's keys."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import fabricemu
from fabricemu import Scenario, ScenarioError

# A DGX-H100-SuperPOD-like scalable unit: 32 servers x 8 GPUs, 8 x 400G NICs, 8 rail leaves, 4 spines.
SUPERPOD = """\
name = "superpod-unit"
[topology]
kind = "leaf_spine"
leaves = 8
spines = 4
hosts_per_leaf = 32
link_rate = "400Gbps"
fabric_link_rate = "800Gbps"
[cluster]
gpus_per_server = 8
[[workload]]
kind = "permutation"
size = "1MB"
"""


@pytest.fixture
def superpod(tmp_path: Path) -> Path:
    p = tmp_path / "superpod.toml"
    p.write_text(SUPERPOD)
    return p


def test_topo_counts_gpus_servers_domains_nics_and_tiers(cli, superpod):
    proc = cli("topo", str(superpod))
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    first = text.splitlines()[0]
    assert first == (
        "superpod-unit: leaf_spine 8 leaves x 4 spines, 32 hosts per leaf; 32 servers x 8 GPUs, rail cabling"
    )
    assert re.search(r"hosts\s+256 \(GPUs\)\n", text)
    assert "GPUs              256 (32 servers x 8, 32 scale-up domains of 8, 32 racks)" in text
    assert "NICs              256 (8 per server; 8 rails, 1 plane, rail cabling, cross-rail pxn)" in text
    assert "per GPU           scale-up 3.6 Tbps, scale-out 400 Gbps" in text
    assert "44 (8 leaf, 4 spine, 32 nvswitch)" in text
    assert "544 (256 host at 400 Gbps, 32 fabric at 800 Gbps, 256 scaleup at 3.6 Tbps)" in text
    assert "leaf 4:1" in text

    js = cli("topo", str(superpod), "--json")
    assert js.returncode == 0, js.stderr
    f = json.loads(js.stdout)
    c = f["cluster"]
    assert (c["gpus"], c["servers"], c["nics"], c["rails"], c["planes"]) == (256, 32, 256, 8, 1)
    assert (c["scaleup_domains"], c["gpus_per_domain"]) == (32, 8)
    assert (c["cabling"], c["cross_rail"]) == ("rail", "pxn")
    assert {t["tier"]: t["links"] for t in f["tiers"]} == {"host": 256, "fabric": 32, "scaleup": 256}


def test_topo_shared_nics_planes_and_tor(cli, superpod):
    proc = cli(
        "topo",
        str(superpod),
        "--set",
        "cluster.nics_per_server=4",
        "--set",
        "cluster.planes=2",
        "--set",
        "cluster.cabling=tor",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    f = json.loads(proc.stdout)
    c = f["cluster"]
    # 256 slots / 4 NICs = 64 servers of 8 GPUs; 2 GPUs per NIC.
    assert (c["gpus"], c["servers"], c["nics"], c["shared_nics"], c["planes"]) == (512, 64, 256, True, 2)
    tiers = {t["tier"]: t["links"] for t in f["tiers"]}
    assert tiers == {"host": 512, "fabric": 64, "scaleup": 512, "pcie": 512}
    roles = {r["role"]: r["switches"] for r in f["roles"]}
    assert roles == {"leaf": 16, "spine": 8, "nic": 256, "nvswitch": 64}
    # Each GPU demands its share of its NIC (2 planes x 400G / 2 GPUs); the spines carry a quarter.
    assert f["bisection_demand_bps"] == 256 * 400_000_000_000
    assert f["oversubscription"] == 4.0
    # A NIC: 2 x 512G PCIe down, 2 planes x 400G up.
    nic = next(r for r in f["roles"] if r["role"] == "nic")
    assert nic["oversubscription"] == pytest.approx(1024 / 800)
    sets = ("--set", "cluster.nics_per_server=4", "--set", "cluster.planes=2")
    text = cli("topo", str(superpod), *sets).stdout
    assert "NICs              256 (4 per server, shared by GPUs; 4 rails, 2 planes, rail cabling" in text
    assert "2 planes" in text.splitlines()[0]


def test_topo_reports_a_bad_cluster_key_with_its_path(cli, superpod):
    bad = cli("topo", str(superpod), "--set", "cluster.nics_per_server=3")
    assert bad.returncode == 2
    assert "cluster.nics_per_server" in bad.stderr and "divide" in bad.stderr
    typo = superpod.parent / "typo.toml"
    typo.write_text(SUPERPOD.replace("gpus_per_server = 8", "gpus_per_sever = 8"))
    proc = cli("topo", str(typo))
    assert proc.returncode == 2
    assert f"{typo.name}:10:1: cluster.gpus_per_sever" in proc.stderr


def test_workloads_address_gpus_and_a_cluster_runs(tmp_path: Path):
    s = Scenario.from_toml(
        SUPERPOD.replace("leaves = 8", "leaves = 2")
        .replace("hosts_per_leaf = 32", "hosts_per_leaf = 2")
        .replace("gpus_per_server = 8", "gpus_per_server = 2")
        .replace('size = "1MB"', 'size = "16KiB"')
    )
    assert s.fabric_summary()["hosts"] == 4
    with pytest.raises(ScenarioError, match=r"workload\.0\.receiver"):
        s.with_({"workload.0": {"kind": "incast", "receiver": 4, "senders": 2, "size": "1KB"}})
    r = fabricemu.run(s, out=tmp_path / "run")
    flows = r.table("flows")
    assert flows.num_rows == 4
    assert sorted(flows.column("src").to_pylist()) == [0, 1, 2, 3]
    assert r.run_info["fabric"]["cluster"]["gpus"] == 4


def _small_cluster() -> Scenario:
    """4 servers x 4 GPUs (2 NICs each: GPUs 0-1 of a server on rail 0, 2-3 on rail 1), 2 servers
    per rack, as a scenario dictionary."""
    return Scenario.from_dict(
        {
            "topology": {
                "kind": "leaf_spine",
                "leaves": 2,
                "spines": 1,
                "hosts_per_leaf": 4,
                "link_rate": "100Gbps",
            },
            "cluster": {"gpus_per_server": 4, "nics_per_server": 2, "servers_per_rack": 2},
            "workload": [{"kind": "permutation", "hosts": "server:1", "size": "16KiB"}],
        }
    )


def test_workloads_take_server_rack_and_rail_selectors(tmp_path: Path):
    s = _small_cluster()
    r = fabricemu.run(s, out=tmp_path / "server")
    assert sorted(r.table("flows").column("src").to_pylist()) == [4, 5, 6, 7]
    rail = s.with_({"workload.0.hosts": "rail:1"})
    r = fabricemu.run(rail, out=tmp_path / "rail")
    assert sorted(r.table("flows").column("src").to_pylist()) == [2, 3, 6, 7, 10, 11, 14, 15]
    mixed = s.with_({"workload.0.hosts": ["rack:1", 0]})
    r = fabricemu.run(mixed, out=tmp_path / "mixed")
    assert sorted(r.table("flows").column("src").to_pylist()) == [0, *range(8, 16)]
    # Collectives: one group per server, per rail index or per rack.
    for layout, groups in [("servers", 4), ("rails", 2), ("racks", 2)]:
        c = s.with_(
            {"workload.0": {"kind": "collective", "op": "all_reduce", "groups": layout, "size": "64KiB"}}
        )
        r = fabricemu.run(c, out=tmp_path / layout)
        rows = r.table("collectives")
        assert rows.num_rows == groups, layout
    explicit = {"kind": "collective", "op": "all_gather", "groups": ["server:0", [8, 12]], "size": "4KiB"}
    g = s.with_({"workload.0": explicit})
    r = fabricemu.run(g, out=tmp_path / "explicit")
    assert r.table("collectives").num_rows == 2


def test_selectors_without_a_cluster_or_out_of_range_name_the_key():
    s = _small_cluster()
    with pytest.raises(ScenarioError, match=r"workload\.0\.hosts: server 4 is out of range"):
        s.with_({"workload.0.hosts": "server:4"})
    with pytest.raises(ScenarioError, match=r"workload\.0\.hosts\.1: host 5 is listed twice"):
        s.with_({"workload.0.hosts": ["server:1", 5]})
    plain = s.to_dict()
    del plain["cluster"]
    with pytest.raises(ScenarioError, match=r'workload\.0\.hosts: "server:1" needs a \[cluster\] section'):
        Scenario.from_dict(plain)
    plain["workload"][0] = {"kind": "collective", "op": "all_reduce", "groups": "servers", "size": "1MiB"}
    with pytest.raises(ScenarioError, match=r'workload\.0\.groups: groups = "servers" needs a \[cluster\]'):
        Scenario.from_dict(plain)
