"""fabricemu: a packet-level network fabric emulator (Rust core, Python API).

>>> import fabricemu
>>> s = fabricemu.Scenario.load("scenarios/quickstart.toml")      # doctest: +SKIP
>>> result = fabricemu.run(s.with_({"topology.k": 8}), out="runs/k8")  # doctest: +SKIP
>>> result.flows                    # pyarrow.Table, one row per flow  # doctest: +SKIP
>>> result.summary()                # FCT and slowdown percentiles, events/s  # doctest: +SKIP
>>> table = fabricemu.sweep(s, grid={"topology.k": [4, 8]}, seeds=[1, 2], out="sweeps/k")  # doctest: +SKIP
>>> fabricemu.analysis.slowdown_by_size(result)  # doctest: +SKIP
"""

from . import analysis
from ._core import __version__
from .errors import MissingTableError, OutputFolderBusy, ScenarioError, SimulationError, Terminated
from .results import Result, run
from .results import open_result as open  # noqa: A004 - fabricemu.open(path) reads an output folder
from .scenario import Scenario
from .sweep import PointDone, open_sweep, sweep

__all__ = [
    "MissingTableError",
    "OutputFolderBusy",
    "PointDone",
    "Result",
    "Scenario",
    "ScenarioError",
    "SimulationError",
    "Terminated",
    "__version__",
    "analysis",
    "open",
    "open_sweep",
    "run",
    "sweep",
]
