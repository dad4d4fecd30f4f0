"""The README's commands: the quickstart command from a clean virtual environment, and the test
command being what CI runs."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

from conftest import ROOT

WHEEL = os.environ.get("FABRICEMU_WHEEL")


def readme_commands() -> List[str]:
    """The two commands at the top of the README (its first two bash blocks)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", text, flags=re.S)[:2]]


def test_readme_commands():
    install, test = readme_commands()
    assert "pip install ." in install
    assert "fabricemu run scenarios/quickstart.toml" in install
    assert test == "bash .ci/run"
    assert (ROOT / ".ci" / "run").is_file()


@pytest.mark.slow
@pytest.mark.skipif(not WHEEL, reason="set FABRICEMU_WHEEL to a built wheel (bash .ci/run does)")
def test_readme_quickstart_in_a_clean_venv(tmp_path: Path):
    assert WHEEL is not None
    install, _ = readme_commands()
    # The same command, installing the wheel CI built once instead of building the extension again.
    command = install.replace("pip install .", f"pip install {shlex.quote(WHEEL)}")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    clone = tmp_path / "clone"
    shutil.copytree(ROOT / "scenarios", clone / "scenarios")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", command],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "flows finished" in proc.stdout
    assert (clone / "runs" / "quickstart" / "flows.arrow").is_file()
    located = subprocess.run(
        ["bash", "-c", "command -v fabricemu"], env=env, capture_output=True, text=True, check=True
    )
    assert located.stdout.strip().startswith(str(venv)), "ran the clean venv's fabricemu"


def test_readme_python_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Every ```python block of the README runs, in order, in a folder holding the scenarios."""
    import fabricemu

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks
    shutil.copytree(ROOT / "scenarios", tmp_path / "scenarios")
    monkeypatch.chdir(tmp_path)
    fabricemu.run("scenarios/quickstart.toml", out="runs/quickstart")  # as `fabricemu run` would
    namespace: dict = {}  # type: ignore[type-arg]
    for block in blocks:
        exec(compile(block, "README.md", "exec"), namespace)
