"""fabricemu: a packet-level network fabric emulator (Rust core, Python API).

>>> import fabricemu
>>> s = fabricemu.Scenario.load("scenarios/quickstart.toml")      # doctest: +SKIP
>>> result = fabricemu.run(s.with_({"topology.k": 8}), out="runs/k8")  # doctest: +SKIP
>>> result.flows                    # pyarrow.Table, one row per flow  # doctest: +SKIP
>>> result.summary()                # FCT and slowdown percentiles, events/s  # doctest: +SKIP
"""

from ._core import __version__
from .errors import ScenarioError, SimulationError
from .results import Result, run
from .results import open_result as open  # noqa: A004 - fabricemu.open(path) reads an output folder
from .scenario import Scenario

__all__ = [
    "Result",
    "Scenario",
    "ScenarioError",
    "SimulationError",
    "__version__",
    "open",
    "run",
]
