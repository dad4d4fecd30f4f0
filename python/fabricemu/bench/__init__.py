"""The fixed benchmark scenarios of ``fabricemu bench`` (TOML files beside this module)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Tuple

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Benchmark:
    name: str
    file: str
    description: str
    quick: bool  # part of `fabricemu bench --quick`
    slow: bool = False  # only with `fabricemu bench --slow`
    scale: bool = False  # only with `fabricemu bench --scale` (the large fabrics, run once)

    @property
    def path(self) -> Path:
        return HERE / self.file


BENCHMARKS: Tuple[Benchmark, ...] = (
    Benchmark("quickstart", "quickstart.toml", "the README's quickstart", True),
    Benchmark(
        "fat_tree_k8_permutation",
        "fat_tree_k8_permutation.toml",
        "fat_tree k=8, 128 hosts, 100Gbps, permutation of 1MB flows",
        True,
    ),
    Benchmark(
        "fat_tree_k8_permutation_hpcc",
        "fat_tree_k8_permutation_hpcc.toml",
        "fat_tree_k8_permutation under HPCC (INT stamping, per-ACK window and rate); compare "
        "its packet-hops/s with fat_tree_k8_permutation (no CC)",
        True,
    ),
    Benchmark(
        "fat_tree_k8_permutation_trimming",
        "fat_tree_k8_permutation_trimming.toml",
        "fat_tree_k8_permutation as Ultra Ethernet runs it (spraying, trimming above 8KB, NSCC); "
        "compare its packet-hops/s with fat_tree_k8_permutation (no CC)",
        True,
    ),
    Benchmark(
        "fat_tree_k16_permutation",
        "fat_tree_k16_permutation.toml",
        "fat_tree k=16, 1024 hosts, 100Gbps, permutation of 1MB flows",
        False,
    ),
    Benchmark(
        "fat_tree_k16_permutation_2threads",
        "fat_tree_k16_permutation_2threads.toml",
        "fat_tree_k16_permutation on 2 threads (the parallel engine; identical outputs)",
        False,
    ),
    Benchmark(
        "fat_tree_k16_htsim",
        "fat_tree_k16_htsim.toml",
        "issue 19's htsim comparison: fat_tree k=16, 1us links, MTU 4000B, PFC, permutation of "
        "2MB flows (--scale only)",
        False,
        scale=True,
    ),
    Benchmark(
        "fat_tree_k24_permutation",
        "fat_tree_k24_permutation.toml",
        "fat_tree k=24, 3456 hosts, 100Gbps, permutation of 1MB flows (--scale only)",
        False,
        scale=True,
    ),
    Benchmark(
        "fat_tree_k24_permutation_2threads",
        "fat_tree_k24_permutation_2threads.toml",
        "fat_tree_k24_permutation on 2 threads (--scale only)",
        False,
        scale=True,
    ),
    Benchmark(
        "fat_tree_k24_failures",
        "fat_tree_k24_failures.toml",
        "fat_tree_k24_permutation under a link failure process (about 1,700 failures in 250us, "
        "routing updating its tables after each; --scale only)",
        False,
        scale=True,
    ),
    Benchmark(
        "fat_tree_k32_permutation",
        "fat_tree_k32_permutation.toml",
        "fat_tree k=32, 8192 hosts, 100Gbps, permutation of 1MB flows (--scale only)",
        False,
        scale=True,
    ),
    Benchmark(
        "dragonfly_ugal_1k",
        "dragonfly_ugal_1k.toml",
        "scenarios/dragonfly_ugal_1k.toml: 1,056-host dragonfly, UGAL-L, open-loop synthetic "
        "worst-case traffic at load 0.6 for 600us (--scale only)",
        False,
        scale=True,
    ),
    Benchmark(
        "gpu256_hierarchical_allreduce",
        "gpu256_hierarchical_allreduce.toml",
        "256 GPUs (32 servers x 8, NVSwitch, rail-optimised 400G), hierarchical ring all-reduce of 16MiB",
        False,
    ),
    Benchmark(
        "gpu256_hierarchical_allreduce_1gib",
        "gpu256_hierarchical_allreduce_1gib.toml",
        "the same all-reduce of 1GiB (the issue's case; --slow only)",
        False,
        slow=True,
    ),
)
