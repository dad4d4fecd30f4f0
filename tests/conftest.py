"""Shared fixtures: the repository's scenarios, small scenario texts, the installed console script."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, List

import pyarrow as pa
import pytest

import fabricemu

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


# A run that takes tens of seconds (for Ctrl-C, SIGTERM and lock tests): a k=8 permutation of 1GB.
LONG = """\
name = "long"
stop = "50ms"

[topology]
kind = "fat_tree"
k = 8

[[workload]]
kind = "permutation"
size = "1GB"
"""


def staging_folders(out: Path) -> List[Path]:
    """The temporary folders a run on ``out`` writes into before it moves them into place."""
    return sorted(out.parent.glob(f".{out.name}.tmp-*"))


def wait_for_run_start(proc: subprocess.Popen, out: Path, settle: float = 1.5, timeout: float = 60) -> None:  # type: ignore[type-arg]
    """Wait (bounded) until the run on ``out`` writes into its temporary folder, then ``settle``
    seconds more, and check the process is still running."""
    deadline = time.monotonic() + timeout
    while not staging_folders(out) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(settle)
    assert proc.poll() is None, "the run ended too early"


# A small run that traces everything (queues, links, PFC, DCQCN rates) and pauses: two workloads,
# an incast of 8 and two background flows. The `traced` fixture runs it once per session.
TRACED = """\
name = "traced"
seed = 1

[topology]
kind = "fat_tree"
k = 4

[switch]
ecn = { kmin = "20KB", kmax = "100KB", pmax = 0.2 }
pfc = { enabled = true, xoff = "40KB" }

[transport]
cc = "dcqcn"

[[workload]]
kind = "incast"
receiver = 0
senders = 8
size = "256KiB"

[[workload]]
name = "background"
kind = "flows"
flows = [{src = 5, dst = 9, size = "64KiB"}, {src = 10, dst = 14, size = "16KiB", start = "3us"}]

[trace]
queues = { interval = "1us" }
links = { interval = "2us" }
pfc = true
rates = {}
"""


def read_arrow(path: Path) -> pa.Table:
    """An Arrow IPC file (a run's or a sweep's table), memory-mapped and read whole."""
    with pa.memory_map(str(path)) as source:
        return pa.ipc.open_file(source).read_all()


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


@pytest.fixture(scope="session")
def traced(tmp_path_factory: pytest.TempPathFactory) -> fabricemu.Result:
    """The run of :data:`TRACED` (once per session; read-only: tests must not change its folder)."""
    out = tmp_path_factory.mktemp("traced") / "run"
    return fabricemu.run(fabricemu.Scenario.from_toml(TRACED), out=out)
