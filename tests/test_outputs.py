"""Output folders: a run replaces an earlier run's folder whole, refuses a foreign folder, locks the
folder against a concurrent run; SIGTERM stops a run or a sweep like Ctrl-C; sweep workers never
outlive their sweep. Real subprocesses and real signals, with bounded waits."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

import psutil
import pytest

import fabricemu
from fabricemu._outdir import OutputFolder

from conftest import LONG, SMALL, TRACED, read_arrow, staging_folders, wait_for_run_start


def test_a_rerun_leaves_no_trace_of_the_earlier_run(tmp_path):
    out = tmp_path / "out"
    first = fabricemu.run(fabricemu.Scenario.from_toml(TRACED), out=out)
    assert set(first.tables()) == {"flows", "queues", "links", "pfc", "rates", "nodes", "ports"}
    (out / "notes.txt").write_text("an earlier run's folder, replaced whole")
    second = fabricemu.run(fabricemu.Scenario.from_toml(SMALL), out=out)
    assert second.tables() == ["flows", "nodes", "ports"]
    assert sorted(p.name for p in out.iterdir()) == ["flows.arrow", "nodes.arrow", "ports.arrow", "run.json"]
    assert fabricemu.open(out).tables() == ["flows", "nodes", "ports"]
    assert staging_folders(out) == [], "no temporary folder is left beside"


def test_a_folder_that_is_not_a_run_is_refused_unless_overwrite(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.tex").write_text("precious")
    with pytest.raises(FileExistsError, match="holds no fabricemu run"):
        fabricemu.run(fabricemu.Scenario.from_toml(SMALL), out=out)
    assert (out / "thesis.tex").read_text() == "precious"
    fabricemu.run(fabricemu.Scenario.from_toml(SMALL), out=out, overwrite=True)
    assert not (out / "thesis.tex").exists()
    # An empty folder is fine without overwrite.
    empty = tmp_path / "empty"
    empty.mkdir()
    tables = fabricemu.run(fabricemu.Scenario.from_toml(SMALL), out=empty).tables()
    assert tables == ["flows", "nodes", "ports"]


def test_cli_refuses_a_foreign_folder_with_a_usage_error(cli, small_toml, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "data.csv").write_text("1,2\n")
    proc = cli("run", str(small_toml), "-o", str(out))
    assert proc.returncode == 2
    assert "--overwrite" in proc.stderr and "Traceback" not in proc.stderr
    proc = cli("run", str(small_toml), "-o", str(out), "--overwrite", "-q")
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["flows.arrow", "nodes.arrow", "ports.arrow", "run.json"]


def test_a_locked_folder_is_refused(tmp_path):
    out = tmp_path / "out"
    with OutputFolder(out):
        with pytest.raises(fabricemu.OutputFolderBusy, match="another fabricemu run"):
            fabricemu.run(fabricemu.Scenario.from_toml(SMALL), out=out)
        with pytest.raises(fabricemu.OutputFolderBusy):
            fabricemu.sweep(SMALL_PATH(tmp_path), grid={"seed": [1]}, out=out, jobs=1)
    # Unlocked again: the run goes through.
    assert fabricemu.run(fabricemu.Scenario.from_toml(SMALL), out=out).tables() == ["flows", "nodes", "ports"]


def SMALL_PATH(tmp_path: Path) -> Path:
    p = tmp_path / "small.toml"
    p.write_text(SMALL)
    return p


def test_stale_temporary_folders_are_removed(tmp_path):
    out = tmp_path / "out"
    stale = tmp_path / ".out.tmp-killed"
    stale.mkdir()
    (stale / "flows.arrow").write_bytes(b"half a file")
    fabricemu.run(fabricemu.Scenario.from_toml(SMALL), out=out)
    assert not stale.exists()


def _popen(args: List[str], **kw) -> subprocess.Popen:  # type: ignore[type-arg]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def test_sigterm_stops_a_run_like_ctrl_c_and_a_concurrent_run_is_refused(fabricemu_exe, tmp_path):
    scenario = tmp_path / "long.toml"
    scenario.write_text(LONG)
    out = tmp_path / "out"
    proc = _popen([fabricemu_exe, "run", str(scenario), "-o", str(out)])
    try:
        wait_for_run_start(proc, out)
        second = subprocess.run(
            [fabricemu_exe, "run", str(scenario), "-o", str(out)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert second.returncode == 1, second.stderr
        assert "another fabricemu run is writing into this output folder" in second.stderr
        assert "Traceback" not in second.stderr
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 143, stderr
    assert "Traceback" not in stderr and "partial outputs" in stderr
    info = json.loads((out / "run.json").read_text())
    assert info["interrupted"] is True
    assert 0 < info["simulated_ps"] < 50_000_000_000
    assert read_arrow(out / "flows.arrow").num_rows == 128
    assert staging_folders(out) == []


def test_sigterm_in_the_python_api_raises_terminated(tmp_path):
    """A script (no CLI) under `kill`: fabricemu.run raises Terminated after writing the outputs."""
    out = tmp_path / "out"
    script = tmp_path / "script.py"
    script.write_text(
        "import sys, fabricemu\n"
        f"s = fabricemu.Scenario.from_toml({LONG!r})\n"
        "try:\n"
        f"    fabricemu.run(s, out={str(out)!r})\n"
        "except fabricemu.Terminated:\n"
        "    sys.exit(43)\n"
    )
    proc = _popen([sys.executable, str(script)])
    try:
        wait_for_run_start(proc, out)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 43, stderr
    assert json.loads((out / "run.json").read_text())["interrupted"] is True


def _sweep(fabricemu_exe: str, tmp_path: Path) -> tuple:  # type: ignore[type-arg]
    scenario = tmp_path / "long.toml"
    scenario.write_text(LONG)
    out = tmp_path / "sw"
    proc = _popen(
        [
            fabricemu_exe,
            "sweep",
            str(scenario),
            "--grid",
            "workload.0.size=1GB,2GB,3GB",
            "-j",
            "2",
            "-o",
            str(out),
        ],
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    workers: List[psutil.Process] = []
    while proc.poll() is None and time.monotonic() < deadline:
        runs = out / "runs"
        workers = psutil.Process(proc.pid).children(recursive=True)
        if runs.is_dir() and len(list(runs.glob(".*.tmp-*"))) >= 2 and len(workers) >= 2:
            break
        time.sleep(0.05)
    time.sleep(1.0)
    assert proc.poll() is None, "the sweep finished too early"
    assert len(workers) >= 2
    return proc, out, workers


def _all_gone(workers: List[psutil.Process], timeout: float) -> List[psutil.Process]:
    _, alive = psutil.wait_procs(workers, timeout=timeout)
    return alive


def _blocked_signals(pid: int) -> Dict[int, set]:  # type: ignore[type-arg]
    """Each thread of process ``pid`` (by thread id): the signals it blocks (Linux's /proc)."""
    blocked = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # a thread that just ended
            for line in (task / "status").read_text().splitlines():
                if line.startswith("SigBlk:"):
                    mask = int(line.split()[1], 16)
                    blocked[int(task.name)] = {n for n in range(1, 65) if mask >> (n - 1) & 1}
    return blocked


def test_sigterm_stops_a_sweep_and_its_workers(fabricemu_exe, tmp_path):
    proc, out, workers = _sweep(fabricemu_exe, tmp_path)
    try:
        if Path("/proc/self/task").is_dir():
            # The kernel gives a process's signal to any thread that does not block it, and one
            # given to a helper thread would not wake the sweep's main thread where it waits: the
            # pool's threads block SIGINT and SIGTERM; the main threads of the sweep and of its
            # workers take them.
            interrupts = {signal.SIGINT.value, signal.SIGTERM.value}
            threads = _blocked_signals(proc.pid)
            assert len(threads) >= 3, "the main thread and the pool's manager and feeder threads"
            assert not threads.pop(proc.pid) & interrupts
            assert all(interrupts <= b for b in threads.values()), threads
            for worker in workers:
                assert not _blocked_signals(worker.pid)[worker.pid] & interrupts
        proc.send_signal(signal.SIGTERM)  # the sweep process alone, as `kill` does
        proc.wait(timeout=60)
        alive = _all_gone(workers, timeout=15)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        _, stderr = proc.communicate()
    assert alive == [], "orphan workers"
    assert proc.returncode == 143, stderr
    assert "Traceback" not in stderr
    # This failed twice in cold CI runs (exit 143 but no sweep.arrow, and every point had run to
    # its end: the interrupt came late and outside the code that saves the table). Since then the
    # pool's threads block the signals (checked above) and an interrupt from the pool's start to
    # its shutdown saves the table; should it recur, say what the sweep printed and left.
    left = sorted(str(p.relative_to(out)) for p in out.rglob("*")) if out.is_dir() else None
    assert (out / "sweep.arrow").is_file(), f"no sweep.arrow; the folder holds {left}; stderr:\n{stderr}"
    table = read_arrow(out / "sweep.arrow")
    assert table.column("error").to_pylist() == ["interrupted"] * 3


def test_workers_of_a_killed_sweep_exit(fabricemu_exe, tmp_path):
    proc, _, workers = _sweep(fabricemu_exe, tmp_path)
    try:
        proc.send_signal(signal.SIGKILL)  # no chance to clean up: the workers notice alone
        proc.wait(timeout=30)  # not communicate(): orphans would hold the pipes open
        alive = _all_gone(workers, timeout=15)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # whatever is left of the sweep's process group
        proc.communicate()
    assert alive == [], "orphan workers after the sweep was killed"


def test_the_lock_file_goes_with_the_run(tmp_path):
    out = tmp_path / "out"
    fabricemu.run(fabricemu.Scenario.from_toml(SMALL), out=out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
