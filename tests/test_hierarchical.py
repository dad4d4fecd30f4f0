"""Hierarchical collectives and the per-tier columns of collectives.arrow (docs/collectives.md):
the example scenario's tiers, the columns' definitions recomputed from flows.arrow, and the
errors of bad input."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

import fabricemu

from conftest import SCENARIOS

TIER_COLUMNS = [
    "scaleup_flow_bytes",
    "scaleout_flow_bytes",
    "scaleup_time_ps",
    "scaleout_time_ps",
    "scaleup_busbw_bps",
    "scaleout_busbw_bps",
]
MIB = 2**20


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> fabricemu.Result:
    out = tmp_path_factory.mktemp("hier") / "run"
    return fabricemu.run(fabricemu.Scenario.load(SCENARIOS / "allreduce_hierarchical.toml"), out=out)


def rows_by_workload(result: fabricemu.Result) -> dict:
    out = defaultdict(list)
    for r in result.collectives.to_pylist():
        out[r["workload"]].append(r)
    return out


def test_tier_columns_follow_the_busbw_columns(example: fabricemu.Result) -> None:
    names = example.collectives.column_names
    assert names[names.index("busbw_bps") + 1 :] == TIER_COLUMNS


def test_tier_bytes_and_times_are_those_of_the_flows(example: fabricemu.Result) -> None:
    """Scale-up bytes: flows between two hosts under one leaf (domain_size = 8); each tier's time
    is the sum over the algorithm's phases of first start to last arrival: at least the span of
    the longest phase, at most the span of all of the tier's flows times the phases (3)."""
    flows = example.flows.to_pylist()
    per = defaultdict(lambda: [0, 0])
    span: dict = {}
    for f in flows:
        key = (f["collective"], f["collective_iteration"])
        tier = 0 if f["src"] // 8 == f["dst"] // 8 else 1
        per[key][tier] += f["size_bytes"]
        lo, hi = span.get((*key, tier), (f["start_ps"], f["finish_ps"]))
        span[(*key, tier)] = (min(lo, f["start_ps"]), max(hi, f["finish_ps"]))
    for r in example.collectives.to_pylist():
        key = (r["collective"], r["iteration"])
        assert [r["scaleup_flow_bytes"], r["scaleout_flow_bytes"]] == per[key]
        assert r["scaleup_flow_bytes"] + r["scaleout_flow_bytes"] == r["flow_bytes"]
        for tier, col in enumerate(["scaleup_time_ps", "scaleout_time_ps"]):
            if (*key, tier) not in span:
                assert r[col] is None
                continue
            lo, hi = span[(*key, tier)]
            if r["algorithm"] in ("ring", "pxn") or tier == 1:
                # One phase on this tier: exactly the span of its flows.
                assert r[col] == hi - lo, (r["workload"], col)
            else:
                # Two scale-up phases (reduce-scatter, all-gather), overlapping the scale-out one.
                assert 0 < r[col] <= 2 * (hi - lo), (r["workload"], col)


def test_example_tiers_carry_the_analytic_bytes(example: fabricemu.Result) -> None:
    rows = rows_by_workload(example)
    s, n, n1, n2 = 4 * MIB, 16, 8, 2
    for r in rows["hierarchical_ring"] + rows["hierarchical_tree"]:
        # Per rank 2(n1-1)/n1 x S inside, 2(n2-1)/n2 x S/n1 across.
        assert r["scaleup_flow_bytes"] == n * 2 * (n1 - 1) * s // n1
        assert r["scaleout_flow_bytes"] == n * 2 * (n2 - 1) * s // n2 // n1
    for r in rows["pxn"]:
        assert r["scaleup_flow_bytes"] == n * (n1 - 1) * s // n1
        assert r["scaleout_flow_bytes"] == n * (n2 - 1) * s // n2
    for r in rows["ring"]:
        # The flat ring over two leaves: 2 of its 16 neighbour pairs cross.
        assert r["scaleout_flow_bytes"] == 2 * 2 * (n - 1) * (s // n)


def test_tier_busbw_is_nccl_tests_busbw_of_each_tier(example: fabricemu.Result) -> None:
    rows = rows_by_workload(example)
    for name in ("hierarchical_ring", "hierarchical_tree"):
        for r in rows[name]:
            s = r["size_bytes"]
            up = 8 * s / (r["scaleup_time_ps"] / 1e12) * 2 * 7 / 8
            out = 8 * (s / 8) / (r["scaleout_time_ps"] / 1e12) * 2 * 1 / 2
            assert r["scaleup_busbw_bps"] == pytest.approx(up, rel=1e-12)
            assert r["scaleout_busbw_bps"] == pytest.approx(out, rel=1e-12)
            assert 0 < r["scaleup_busbw_bps"] < 1e11 and 0 < r["scaleout_busbw_bps"] < 1e11
    for r in rows["pxn"]:
        s = r["size_bytes"]
        assert r["scaleout_busbw_bps"] == pytest.approx(8 * s / (r["scaleout_time_ps"] / 1e12) / 2, rel=1e-12)
    for r in rows["ring"]:
        # A flat ring over two domains runs no collective of its own on either tier.
        assert r["scaleup_busbw_bps"] is None and r["scaleout_busbw_bps"] is None
        assert r["scaleup_time_ps"] is not None and r["scaleout_time_ps"] is not None


def test_without_domains_every_flow_is_scale_out() -> None:
    result = fabricemu.run(
        {
            "topology": {"kind": "leaf_spine", "leaves": 4, "spines": 1, "hosts_per_leaf": 1},
            "workload": [{"kind": "collective", "op": "all_gather", "size": "1MiB"}],
        }
    )
    (r,) = result.collectives.to_pylist()
    assert r["scaleup_flow_bytes"] == 0 and r["scaleup_time_ps"] is None and r["scaleup_busbw_bps"] is None
    assert r["scaleout_flow_bytes"] == r["flow_bytes"]
    assert r["scaleout_time_ps"] == r["duration_ps"]
    assert r["scaleout_busbw_bps"] == pytest.approx(r["busbw_bps"], rel=1e-12)


@pytest.mark.parametrize(
    "extra, path, text",
    [
        (
            {},
            "workload.0.domain_size",
            'missing: algorithm = "hierarchical_ring" is built from scale-up domains',
        ),
        ({"domain_size": 4, "hosts": [0, 1, 2, 4]}, "workload.0.domain_size", "group 0 has 3 ranks"),
        ({"domain_size": 4, "rank_order": "shuffled"}, "workload.0.rank_order", "shuffled placement"),
        ({"domain_size": -1}, "workload.0.domain_size", ""),
    ],
)
def test_bad_hierarchical_input_names_the_key(tmp_path: Path, extra: dict, path: str, text: str) -> None:
    workload = {
        "kind": "collective",
        "op": "all_reduce",
        "algorithm": "hierarchical_ring",
        "size": "1MiB",
        **extra,
    }
    lines = [
        "[topology]",
        'kind = "leaf_spine"',
        "leaves = 2",
        "spines = 1",
        "hosts_per_leaf = 4",
        "",
        "[[workload]]",
    ]
    for k, v in workload.items():
        lines.append(f"{k} = {v!r}".replace("'", '"'))
    f = tmp_path / "bad.toml"
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(fabricemu.ScenarioError) as e:
        fabricemu.Scenario.load(f)
    message = str(e.value)
    assert f"{path}: " in message and text in message, message
    # "file:line:col: key.path: message", the line of the key (or of the table when it is missing).
    assert message.startswith(f"{f}:")


def test_unknown_algorithm_lists_the_new_ones() -> None:
    with pytest.raises(fabricemu.ScenarioError) as e:
        fabricemu.Scenario.from_dict(
            {
                "topology": {"kind": "leaf_spine", "leaves": 2, "spines": 1, "hosts_per_leaf": 4},
                "workload": [
                    {
                        "kind": "collective",
                        "op": "all_to_all",
                        "algorithm": "hierarchical_ring",
                        "size": "1MiB",
                    }
                ],
            }
        )
    assert '"direct", "pairwise", "pxn"' in str(e.value)
