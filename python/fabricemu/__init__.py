"""fabricemu: a packet-level network fabric emulator (Rust core, Python API).

>>> import fabricemu
>>> s = fabricemu.Scenario.load("scenarios/quickstart.toml")      # doctest: +SKIP
>>> result = fabricemu.run(s.with_({"topology.k": 8}), out="runs/k8")  # doctest: +SKIP
>>> result.flows                    # pyarrow.Table, one row per flow  # doctest: +SKIP
>>> result.summary()                # FCT and slowdown percentiles, events/s  # doctest: +SKIP
>>> table = fabricemu.sweep(s, grid={"topology.k": [4, 8]}, seeds=[1, 2], out="sweeps/k")  # doctest: +SKIP
>>> fabricemu.analysis.slowdown_by_size(result)  # doctest: +SKIP
"""

import sys
import types
from typing import TYPE_CHECKING, Any

from . import topology
from ._core import __version__
from .errors import (
    ControlError,
    MissingTableError,
    OutputFolderBusy,
    ScenarioError,
    SimulationError,
    Terminated,
)
from .scenario import Scenario

if TYPE_CHECKING:
    from . import analysis, control, graph
    from ._run import run
    from .graph import StepGraph
    from .results import Result, attach_names
    from .results import open_result as open  # noqa: A004 - fabricemu.open(path) reads an output folder
    from .sweep import PointDone, open_sweep, sweep

#: Names whose modules import pyarrow and numpy, loaded on first use: a command that only
#: validates or describes a scenario (and `import fabricemu.cli`) starts without them, and
#: ``run`` loads them on a thread while the engine runs (`fabricemu._run`).
_LAZY = {
    "analysis": ("fabricemu.analysis", None),
    "control": ("fabricemu.control", None),
    "Result": ("fabricemu.results", "Result"),
    "attach_names": ("fabricemu.results", "attach_names"),
    "run": ("fabricemu._run", "run"),
    "open": ("fabricemu.results", "open_result"),
    "PointDone": ("fabricemu.sweep", "PointDone"),
    "open_sweep": ("fabricemu.sweep", "open_sweep"),
    "graph": ("fabricemu.graph", None),
    "StepGraph": ("fabricemu.graph", "StepGraph"),
}


def __getattr__(name: str) -> Any:
    import importlib

    try:
        module_name, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'fabricemu' has no attribute {name!r}") from None
    module = importlib.import_module(module_name)
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value
    return value


def __dir__() -> "list[str]":
    return sorted({*globals(), *_LAZY, "sweep"})


class _Package(types.ModuleType):
    """The package's module type: ``fabricemu.sweep`` stays the function when the submodule of the
    same name is first imported lazily (the import system then binds the submodule on the package;
    eager imports used to rebind the function after it)."""

    @property
    def sweep(self) -> Any:
        from .sweep import sweep

        return sweep

    @sweep.setter
    def sweep(self, _module: Any) -> None:
        pass


sys.modules[__name__].__class__ = _Package


__all__ = [
    "ControlError",
    "MissingTableError",
    "OutputFolderBusy",
    "PointDone",
    "Result",
    "Scenario",
    "ScenarioError",
    "SimulationError",
    "StepGraph",
    "Terminated",
    "__version__",
    "analysis",
    "attach_names",
    "control",
    "graph",
    "open",
    "open_sweep",
    "run",
    "sweep",
    "topology",
]
