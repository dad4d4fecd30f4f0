"""Shared fixtures: the repository's scenarios, small scenario texts, the installed console script."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable, List

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"

# A small valid scenario; the error cases below each break one line of it.
SMALL = """\
name = "small"
seed = 1

[topology]
kind = "fat_tree"
k = 4
link_rate = "100Gbps"
link_delay = "500ns"

[[workload]]
kind = "incast"
receiver = 0
senders = 3
size = "64KiB"
"""

# (id, replace this, with this, expected key path, expected line)
ERROR_CASES = [
    ("typo_key", 'link_rate = "100Gbps"', 'link_rat = "100Gbps"', "topology.link_rat", 7),
    ("wrong_unit", 'link_rate = "100Gbps"', 'link_rate = "100Gbs"', "topology.link_rate", 7),
    ("negative_size", 'size = "64KiB"', 'size = "-1MB"', "workload.0.size", 14),
    ("k_odd", "k = 4", "k = 5", "topology.k", 6),
    ("host_out_of_range", "receiver = 0", "receiver = 16", "workload.0.receiver", 12),
]


def broken(old: str, new: str) -> str:
    assert old in SMALL
    return SMALL.replace(old, new, 1)


def fabricemu_executable() -> str:
    """The console script installed beside this interpreter (or on PATH)."""
    beside = Path(sys.executable).parent / ("fabricemu.exe" if os.name == "nt" else "fabricemu")
    if beside.exists():
        return str(beside)
    found = shutil.which("fabricemu")
    if not found:
        pytest.fail("the fabricemu console script is not installed (pip install the package first)")
    return found


@pytest.fixture(scope="session")
def fabricemu_exe() -> str:
    return fabricemu_executable()


@pytest.fixture
def cli(fabricemu_exe: str, tmp_path: Path) -> Callable[..., subprocess.CompletedProcess]:  # type: ignore[type-arg]
    """Run the real `fabricemu` command in a subprocess (cwd = a fresh temporary folder)."""

    def run(*args: str, timeout: float = 300, cwd: Path = tmp_path) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
        cmd: List[str] = [fabricemu_exe, *args]
        return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)

    return run


@pytest.fixture
def small_toml(tmp_path: Path) -> Path:
    p = tmp_path / "small.toml"
    p.write_text(SMALL)
    return p
