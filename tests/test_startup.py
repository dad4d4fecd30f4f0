"""Start-up: commands that do not read outputs start without pyarrow and numpy (issue 19.3)."""

from __future__ import annotations

import subprocess
import sys

from conftest import SCENARIOS

HEAVY = ("pyarrow", "numpy", "fabricemu.analysis", "fabricemu.results", "fabricemu.sweep")


def _imported_after(code: str) -> list:
    probe = f"{code}\nimport sys\nprint(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return [m for m in out.stdout.strip().split(",") if m]


def test_cli_and_scenario_import_light():
    assert _imported_after("import fabricemu.cli") == []
    quickstart = str(SCENARIOS / "quickstart.toml")
    assert _imported_after(f"import fabricemu; fabricemu.Scenario.load({quickstart!r})") == []


def test_validate_and_topo_never_import_pyarrow():
    for command in ["validate", "topo"]:
        proc = subprocess.run(
            [
                sys.executable,
                "-X",
                "importtime",
                "-m",
                "fabricemu.cli",
                command,
                str(SCENARIOS / "quickstart.toml"),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
        assert "fabricemu.scenario" in imported, "the probe sees fabricemu's imports"
        assert not {"pyarrow", "numpy"} & imported, command


def test_public_names_load_on_first_use():
    import fabricemu
    import fabricemu.analysis  # also imports the submodule fabricemu.sweep
    from fabricemu import PointDone, Result, open_sweep, run, sweep
    from fabricemu import open as open_result

    assert callable(sweep) and sweep.__module__ == "fabricemu.sweep", "the function, not the module"
    assert fabricemu.sweep is sweep
    assert (
        run.__name__ == "run"
        and open_result.__name__ == "open_result"
        and open_sweep.__name__ == "open_sweep"
    )
    assert Result.__name__ == "Result" and PointDone.__name__ == "PointDone"
    assert set(fabricemu.__all__) <= set(dir(fabricemu))
    try:
        fabricemu.no_such_name  # noqa: B018
    except AttributeError as e:
        assert "no_such_name" in str(e)
    else:
        raise AssertionError("unknown names raise AttributeError")


def test_cli_keeps_blas_single_threaded_unless_chosen():
    quickstart = str(SCENARIOS / "quickstart.toml")
    code = (
        "import os, sys\n"
        f"sys.argv = ['fabricemu', 'validate', {quickstart!r}]\n"
        "import fabricemu.cli\n"
        "try:\n    fabricemu.cli.main()\nexcept SystemExit:\n    pass\n"
        "print(os.environ['OPENBLAS_NUM_THREADS'])\n"
    )
    env_default = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert env_default.stdout.strip().endswith("1")
    import os

    chosen = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "OPENBLAS_NUM_THREADS": "4"},
    )
    assert chosen.stdout.strip().endswith("4")


def _loading_thread_of_a_run(tmp_path, run_args: str, report: str) -> str:
    """Run the quickstart in a fresh interpreter (`fabricemu.run(..., run_args)`), recording the
    thread that imports fabricemu.results in `seen`; returns what `report` prints."""
    quickstart = str(SCENARIOS / "quickstart.toml")
    code = (
        "import sys, threading\n"
        "seen = []\n"
        "class Recorder:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'fabricemu.results':\n"
        "            seen.append(threading.current_thread().name)\n"
        "sys.meta_path.insert(0, Recorder())\n"
        "import fabricemu\n"
        f"result = fabricemu.run({quickstart!r}, out={str(tmp_path / 'out')!r}{run_args})\n"
        "assert result.summary()['finished'] > 0\n"
        f"{report}\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_a_run_loads_the_analysis_modules_on_a_thread_while_the_engine_runs(tmp_path):
    # `fabricemu.run` itself imports nothing heavy; the run imports fabricemu.results (pyarrow,
    # pyarrow.compute, numpy) on its loading thread, not on the thread that runs the engine.
    assert _imported_after("from fabricemu import run") == []
    out = _loading_thread_of_a_run(
        tmp_path,
        "",
        "alive = [t.name for t in threading.enumerate() if t.name == 'fabricemu-load']\nprint(seen, alive)",
    )
    assert out == "['fabricemu-load'] []", out


def test_a_run_whose_threads_take_every_core_loads_the_analysis_modules_after_the_engine(tmp_path):
    # The parallel engine's threads meet every window: a loading thread beside them would take a
    # core from one and hold up the others (and the engine's time would say threads are slow).
    from fabricemu._run import available_cores

    threads = max(available_cores(), 2)
    out = _loading_thread_of_a_run(tmp_path, f", threads={threads}", "print(seen)")
    assert out == "['MainThread']", out
