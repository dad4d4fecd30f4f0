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
