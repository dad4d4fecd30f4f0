"""The hand-written stubs of the compiled module match it (mypy.stubtest)."""

from __future__ import annotations

import subprocess
import sys

import pytest


def test_core_stubs_match_the_module():
    pytest.importorskip("mypy")
    proc = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "fabricemu._core"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
