"""The ring all-reduce claim of the README ("within 5 % of analytic") holds for contiguous
placement; with strided placement on a k=4 fat tree every ring step crosses the fabric, ECMP
collides flows on the uplinks and the ring takes about twice as long; spraying brings it back to
within about 10 %. The README quotes these figures: this test measures them."""

from __future__ import annotations

import re

import pytest

import fabricemu

from conftest import ROOT

N = 8  # ranks per group: hosts 0..15 split in two groups of 8
SIZE = 16 * 2**20
# 2(n-1)/n x S / 100 Gbps plus, per step, the latency of the longest path (6 links of 500 ns, 5
# store-and-forward hops of a full 4158-byte packet at 80 ps/byte): the README's analytic time.
ANALYTIC_PS = 2 * (N - 1) / N * SIZE * 8 / 100e9 * 1e12 + 2 * (N - 1) * (6 * 500_000 + 5 * 4158 * 80)


def ratio(layout: str, lb: str, seed: int) -> float:
    s = fabricemu.Scenario.from_dict(
        {
            "seed": seed,
            "topology": {"kind": "fat_tree", "k": 4},
            "routing": {"load_balancing": lb},
            "workload": [
                {
                    "kind": "collective",
                    "op": "all_reduce",
                    "algorithm": "ring",
                    "hosts": list(range(16)),
                    "group_size": N,
                    "group_layout": layout,
                    "size": "16MiB",
                }
            ],
        }
    )
    durations = fabricemu.run(s).collectives.column("duration_ps").to_pylist()
    return max(durations) / ANALYTIC_PS


@pytest.mark.parametrize("lb", ["ecmp", "spray"])
def test_contiguous_ring_is_within_5_percent_of_analytic(lb):
    for seed in (1, 2, 3):
        assert abs(ratio("block", lb, seed) - 1) < 0.05


def test_strided_ring_collides_under_ecmp_and_spraying_repairs_it():
    ecmp = [ratio("strided", "ecmp", seed) for seed in (1, 2, 3)]
    spray = [ratio("strided", "spray", seed) for seed in (1, 2, 3)]
    assert all(1.8 < r < 2.6 for r in ecmp), ecmp  # "about twice as long"
    assert all(1.0 < r < 1.12 for r in spray), spray  # "within about 10 %"


def test_the_readme_states_where_the_claim_holds():
    text = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    claim = re.search(r"within 5 %[^.]*contiguous[^.]*\.", text)
    assert claim, "the 5 % claim says it is for contiguous placement"
    assert "strided" in text[claim.start() : claim.end() + 400]
