"""Live control: a Python controller called every control interval of simulated time.

``fabricemu.run(scenario, controller=f)`` stops the engine exactly at every boundary
(``0, interval, 2 * interval, ...``; the interval is ``control_interval=`` or the scenario's
``[control] interval``, default 20us), calls ``f(telemetry)`` with a :class:`Telemetry` and applies
the actions ``f`` returns at that simulated time. Actions are recorded in ``actions.arrow``
(``result.actions``). The same seed and the same controller give the same outputs; a controller
that returns nothing leaves every output byte-identical to a run without one.

>>> from fabricemu.control import SetAlgorithm
>>> def pick_tree(t):
...     return [SetAlgorithm(c.collective, "tree") for c in t.collectives
...             if c.next_call is not None and c.next_algorithm != "tree"]
>>> result = fabricemu.run("scenarios/allreduce_congested.toml", controller=pick_tree)  # doctest: +SKIP

See docs/control.md for the telemetry fields, the actions and the built-in policy.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Union

__all__ = [
    "Action",
    "CollectiveProgress",
    "Controller",
    "Fault",
    "PortTelemetry",
    "ReconfigureCircuits",
    "Reroute",
    "Restore",
    "SetAlgorithm",
    "SetCc",
    "Telemetry",
    "load_controller",
]

#: The per-port columns of :attr:`Telemetry.ports` (one entry per egress port = link id).
PORT_COLUMNS = (
    "port",
    "node",
    "peer",
    "rate_bps",
    "tx_bytes",
    "utilisation",
    "queue_bytes",
    "ecn_marks",
    "pause_frames",
    "paused_ps",
    "down",
)


@dataclass(frozen=True)
class CollectiveProgress:
    """One collective group's progress at a boundary (``kind = "collective"`` workloads).

    ``collective`` is the group's index (collectives.arrow's ``collective``); ``hosts`` the host
    of each rank; ``calls`` /
    ``calls_done`` count its calls (iterations); ``current_call`` is the first call not finished
    (None when all are) with its ``current_algorithm``, whether it started, and its flows and
    payload bytes done so far; ``next_call`` is the first call none of whose flows started, the
    call a :class:`SetAlgorithm` re-plans (None: every call started).
    """

    collective: int
    workload: int
    group: int
    op: str
    ranks: int
    hosts: List[int]
    size_bytes: int
    calls: int
    calls_done: int
    current_call: Optional[int]
    current_algorithm: Optional[str]
    current_started: bool
    current_flows: int
    current_flows_done: int
    current_bytes: int
    current_bytes_done: int
    next_call: Optional[int]
    next_algorithm: Optional[str]


@dataclass(frozen=True)
class PortTelemetry:
    """One port's figures over the last interval (see :data:`PORT_COLUMNS`)."""

    port: int
    node: int
    peer: int
    rate_bps: int
    tx_bytes: int
    utilisation: float
    queue_bytes: int
    ecn_marks: int
    pause_frames: int
    paused_ps: int
    down: bool


class Telemetry:
    """The snapshot of one control boundary.

    Attributes:
        time_ps: the boundary's simulated time (actions take effect then).
        interval_ps: time since the previous boundary (0 at the first, at time 0).
        columns: per port, a dict of equal-length lists (:data:`PORT_COLUMNS`): the link leaving
            each egress port; ``tx_bytes``, ``utilisation``, ``ecn_marks``, ``pause_frames`` and
            ``paused_ps`` over the last interval, ``queue_bytes`` at the boundary.
        collectives: a :class:`CollectiveProgress` per collective group.
    """

    __slots__ = ("collectives", "columns", "interval_ps", "time_ps")

    def __init__(self, raw: Mapping[str, Any]) -> None:
        self.time_ps: int = raw["time_ps"]
        self.interval_ps: int = raw["interval_ps"]
        self.columns: Dict[str, List[Any]] = dict(raw["ports"])
        self.collectives: List[CollectiveProgress] = [CollectiveProgress(**c) for c in raw["collectives"]]

    @property
    def ports(self) -> Any:
        """The per-port figures as a ``pyarrow.Table`` (one row per port)."""
        import pyarrow as pa

        return pa.table(self.columns)

    def port(self, p: int) -> PortTelemetry:
        """Port ``p``'s figures."""
        return PortTelemetry(**{k: self.columns[k][p] for k in PORT_COLUMNS})

    def busiest(self, n: int = 5) -> List[PortTelemetry]:
        """The ``n`` ports with the highest utilisation in the last interval."""
        util = self.columns["utilisation"]
        order = sorted(range(len(util)), key=lambda i: (-util[i], i))[:n]
        return [self.port(i) for i in order]

    def __repr__(self) -> str:
        return (
            f"Telemetry(time_ps={self.time_ps}, interval_ps={self.interval_ps}, "
            f"ports={len(self.columns['port'])}, collectives={len(self.collectives)})"
        )


class Action:
    """Base of the actions; :meth:`to_dict` is what the engine receives."""

    action = ""

    def to_dict(self) -> Dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if v is not None}
        d["action"] = self.action
        return d


@dataclass
class SetAlgorithm(Action):
    """Run the collective's next call that has not started with ``algorithm`` (``"ring"``,
    ``"tree"``, ``"halving_doubling"``; all-reduce with ``[switch.reduction]`` also
    ``"in_network"`` / ``"nvls"``, placing the group's reduction tree; ``"direct"`` /
    ``"pairwise"`` for all-to-all)."""

    collective: int
    algorithm: str
    action = "set_algorithm"


@dataclass
class Reroute(Action):
    """Move a flow's data to the ECMP paths of a new header ``entropy`` (from its next packet)."""

    flow: int
    entropy: int
    action = "reroute"


@dataclass
class SetCc(Action):
    """Set congestion-control parameter ``param`` of every flow (DCQCN: ``g``, ``rate_ai``,
    ``rate_hai``, ``min_rate`` in bit/s, ``rate_timer`` in ps, ``byte_counter`` in bytes; DCTCP:
    ``g``; Swift: ``ai``, ``beta``, ``max_mdf``, ``base_target`` in ps; HPCC: ``eta``,
    ``max_stage``, ``rate_ai``, ``min_rate`` in bit/s; NSCC: ``fair_increase``,
    ``proportional_increase``, ``md``, ``max_md``, ``target_qdelay`` in ps, ``min_window``,
    ``max_window``, ``initial_window`` in bytes; see docs/control.md)."""

    param: str
    value: float
    action = "set_cc"


@dataclass
class Fault(Action):
    """Fail (``kind="down"``) or slow (``kind="degrade"``, ``rate_bps``) the link leaving egress
    port ``link`` now, until :class:`Restore`; routing notices a down link after
    ``detection_ps`` (default 10us)."""

    link: int
    kind: str = "down"
    rate_bps: Optional[int] = None
    detection_ps: Optional[int] = None
    action = "fault"


@dataclass
class Restore(Action):
    """End every live fault on the link leaving egress port ``link``."""

    link: int
    action = "restore"


@dataclass
class ReconfigureCircuits(Action):
    """Move the optical circuit switch (``[ocs]``) to configuration ``circuits`` now: the same
    value as ``[ocs] circuits`` (``"uniform"``, ``"none"`` or a list of pairs like
    ``[["agg:0", "agg:2"], ["ocs:1", "ocs:6"]]``). The circuits that change carry nothing for
    ``reconfiguration_ps`` (default ``ocs.reconfiguration_time``); refused while another change
    is in progress. See docs/ocs.md."""

    circuits: Any
    reconfiguration_ps: Optional[int] = None
    action = "reconfigure_circuits"


ActionLike = Union[Action, Mapping[str, Any]]
#: A controller: telemetry in, actions (or None) out.
Controller = Callable[[Telemetry], Optional[Iterable[ActionLike]]]


def _as_dict(a: Any) -> Any:
    if isinstance(a, Action):
        return a.to_dict()
    return a  # a mapping (checked by the engine), or anything else (rejected there by index)


@dataclass
class _Bridge:
    """What the engine calls: the raw snapshot in, a list of action dicts out."""

    controller: Controller
    calls: int = field(default=0)

    def __call__(self, raw: Mapping[str, Any]) -> Optional[Sequence[Any]]:
        self.calls += 1
        out = self.controller(Telemetry(raw))
        if out is None:
            return None
        if isinstance(out, (Action, Mapping)):
            out = [out]
        return [_as_dict(a) for a in out]


def load_controller(spec: str) -> Controller:
    """The controller ``module:function`` (``fabricemu run --controller``); the module is imported
    from ``sys.path`` (the current folder first for the CLI)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"--controller: expected module:function, found {spec!r}")
    module = importlib.import_module(module_name)
    try:
        f = getattr(module, attr)
    except AttributeError:
        raise ValueError(f"--controller: module {module_name!r} has no attribute {attr!r}") from None
    if not callable(f):
        raise ValueError(f"--controller: {spec} is not callable")
    return f  # type: ignore[no-any-return]
