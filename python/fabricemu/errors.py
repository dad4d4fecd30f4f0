"""The exceptions fabricemu raises, as classes you can catch by name.

``ScenarioError`` is raised for a scenario that does not parse or validate, from a file, a TOML string,
a dictionary or ``Scenario.with_``; ``SimulationError`` for a failure inside the engine (a bug: please
report it with the scenario); ``MissingTableError`` when an analysis needs a trace table (or a column)
that the run did not write; ``OutputFolderBusy`` when another run holds the output folder's lock;
``Terminated`` (a ``KeyboardInterrupt``) when SIGTERM stops a run; ``ControlError`` for a bad action
returned by a live controller (``fabricemu.run(..., controller=...)``).
"""

from __future__ import annotations

from typing import Optional

__all__ = [
    "ControlError",
    "MissingTableError",
    "OutputFolderBusy",
    "ScenarioError",
    "SimulationError",
    "Terminated",
]


class Terminated(KeyboardInterrupt):
    """SIGTERM (what ``kill``, Slurm and ``docker stop`` send) received during a run or a sweep.

    A ``KeyboardInterrupt``, so it is handled exactly like Ctrl-C: the run stops, writes its partial
    outputs (``run.json`` has ``interrupted: true``) and the exception propagates; the CLI exits with
    143 (130 for Ctrl-C).
    """


class ControlError(ValueError):
    """A live controller returned a bad action; the run stopped with its partial outputs.

    Attributes:
        action: the action's name (``set_algorithm``, ``reroute``, ``set_cc``, ``fault``,
            ``restore``), or ``#<index>`` when the action itself could not be read.
        field: the field that was wrong (``collective``, ``algorithm``, ...), or "".

    ``str(error)`` is ``action <action>: <field>: <message>``.
    """

    def __init__(self, message: str, *, action: str = "", field: str = "") -> None:
        self.action = action
        self.field = field
        super().__init__(message)

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (_rebuild_control, (str(self), self.action, self.field))


def _rebuild_control(message: str, action: str, field: str) -> ControlError:
    return ControlError(message, action=action, field=field)


class OutputFolderBusy(OSError):
    """Another run or sweep is writing into the same output folder (it holds the folder's lock)."""


class ScenarioError(ValueError):
    """A scenario that failed to parse or validate.

    Attributes:
        message: what was wrong, e.g. ``expected an even integer, found 5``.
        path: the dotted key path, e.g. ``topology.k`` or ``workload.0.size`` ("" for the whole file).
        line, column: 1-based position in the TOML text, or ``None`` (dictionaries have none).
        source_name: the file name, or "".

    ``str(error)`` is the one-line message ``file:line:col: path: message``.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str = "",
        line: Optional[int] = None,
        column: Optional[int] = None,
        source_name: str = "",
        full: Optional[str] = None,
    ) -> None:
        self.message = message
        self.path = path
        self.line = line
        self.column = column
        self.source_name = source_name
        self._full = full if full is not None else _format(message, path, line, column, source_name)
        super().__init__(self._full)

    def __str__(self) -> str:
        return self._full

    def __reduce__(self):  # type: ignore[no-untyped-def]
        kwargs = {
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "source_name": self.source_name,
            "full": self._full,
        }
        return (_rebuild, (self.message, kwargs))


def _rebuild(message: str, kwargs: dict) -> ScenarioError:  # type: ignore[type-arg]
    return ScenarioError(message, **kwargs)


def _format(message: str, path: str, line: Optional[int], column: Optional[int], source_name: str) -> str:
    # The same layout as the Rust core's Display of its ScenarioError.
    out = ""
    if source_name:
        out = source_name
        if line is not None:
            out += f":{line}"
            if column is not None:
                out += f":{column}"
        out += ": "
    elif line is not None:
        out = f"line {line}"
        if column is not None:
            out += f", column {column}"
        out += ": "
    if path:
        out += f"{path}: "
    return out + message


class SimulationError(RuntimeError):
    """The engine failed while running a valid scenario (an internal error, caught before it could
    crash the interpreter)."""


class MissingTableError(FileNotFoundError):
    """A trace table (or a column of one) that an analysis needs is not in the run's output.

    Attributes:
        table: the table's name (``"queues"``, ``"links"``, ...).
        column: the missing column, or ``None`` when the whole table is missing.
        where: the output folder (or a description of the tables given).
        hint: how to get it, e.g. ``add [trace] queues = { interval = "1us" } to the scenario``.
    """

    def __init__(
        self,
        table: str,
        where: str,
        hint: str = "",
        *,
        column: Optional[str] = None,
    ) -> None:
        self.table = table
        self.column = column
        self.where = where
        self.hint = hint
        if column is None:
            text = f"{where} has no {table} table ({table}.arrow)"
        else:
            text = f"the {table} table of {where} has no column {column!r}"
        if hint:
            text += f": {hint}"
        super().__init__(text)
        self.filename = where

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (_rebuild_missing, (self.table, self.where, self.hint, self.column))


def _rebuild_missing(table: str, where: str, hint: str, column: Optional[str]) -> MissingTableError:
    return MissingTableError(table, where, hint, column=column)
