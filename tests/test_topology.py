"""Scenario.fabric_summary (the core's topology statistics) against formulas."""

from __future__ import annotations

import pytest

import fabricemu

G = 1_000_000_000


def fat_tree(k: int, **links: str) -> fabricemu.Scenario:
    return fabricemu.Scenario.from_dict(
        {
            "topology": {"kind": "fat_tree", "k": k, **links},
            "workload": [{"kind": "permutation", "size": "1MB"}],
        }
    )


def leaf_spine(leaves: int, spines: int, hosts_per_leaf: int, **links: str) -> fabricemu.Scenario:
    topology = {
        "kind": "leaf_spine",
        "leaves": leaves,
        "spines": spines,
        "hosts_per_leaf": hosts_per_leaf,
        **links,
    }
    return fabricemu.Scenario.from_dict(
        {"topology": topology, "workload": [{"kind": "permutation", "size": "1MB"}]}
    )


@pytest.mark.parametrize("k", [4, 6, 8, 16])
def test_fat_tree(k: int):
    f = fat_tree(k).fabric_summary()
    hosts = k**3 // 4
    assert (f["hosts"], f["switches"], f["links"]) == (hosts, 5 * k * k // 4, 3 * k**3 // 4)
    assert [(r["role"], r["switches"], r["ports_min"], r["ports_max"]) for r in f["roles"]] == [
        ("edge", k * k // 2, k, k),
        ("agg", k * k // 2, k, k),
        ("core", k * k // 4, k, k),
    ]
    assert [(t["tier"], t["links"], t["capacity_bps"]) for t in f["tiers"]] == [
        ("host", hosts, hosts * 100 * G),
        ("fabric", hosts, hosts * 100 * G),
        ("core", hosts, hosts * 100 * G),
    ]
    assert f["bisection_bps"] == f["bisection_demand_bps"] == hosts // 2 * 100 * G
    assert (f["bisection_ratio"], f["oversubscription"]) == (1.0, 1.0)
    assert (f["diameter_links"], f["diameter_switches"]) == (6, 5)


def test_fat_tree_with_slower_tiers():
    f = fat_tree(8, fabric_link_rate="50Gbps", core_link_rate="25Gbps").fabric_summary()
    # Each pod's hosts leave the edge at 4 x 50G per edge switch, the pod at 16 x 25G.
    assert f["roles"][0]["oversubscription"] == 2.0
    assert f["roles"][1]["oversubscription"] == 2.0
    assert f["bisection_bps"] == 4 * 16 * 25 * G  # four pods' core uplinks
    assert f["bisection_demand_bps"] == 64 * 100 * G
    assert f["oversubscription"] == 4.0
    assert f["tiers"][2]["rate_min_bps"] == f["tiers"][2]["rate_max_bps"] == 25 * G


@pytest.mark.parametrize(("leaves", "spines", "per_leaf"), [(2, 2, 2), (4, 2, 8), (6, 4, 4), (1, 3, 5)])
def test_leaf_spine(leaves: int, spines: int, per_leaf: int):
    f = leaf_spine(leaves, spines, per_leaf).fabric_summary()
    hosts = leaves * per_leaf
    assert (f["hosts"], f["switches"], f["links"]) == (hosts, leaves + spines, hosts + leaves * spines)
    leaf = f["roles"][0]
    assert leaf["role"] == "leaf" and leaf["oversubscription"] == per_leaf / spines
    assert f["diameter_links"] == (2 if leaves == 1 else 4)
    a = hosts // 2
    # Hosts 0..a-1 fill whole leaves first: the flow out of them is limited by their leaves' uplinks.
    full, rest = divmod(a, per_leaf)
    uplinks = full * min(per_leaf, spines) * 100 * G + min(rest, spines) * 100 * G
    if leaves == 1:
        uplinks = a * 100 * G  # one leaf: hosts meet there
    assert f["bisection_bps"] == min(uplinks, a * 100 * G, (hosts - a) * 100 * G)


def test_scenario_html_shows_the_fabric():
    page = fat_tree(4)._repr_html_()
    assert "bisection 800 Gbps (oversubscription 1:1), diameter 6 links" in page
