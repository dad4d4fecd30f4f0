"""Scenarios: a TOML file or a dictionary, validated by the Rust core on every construction."""

from __future__ import annotations

import copy
import html
import json
import os
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Tuple, Union

from . import _core, _fmt
from . import topology as _topology
from .errors import ScenarioError

__all__ = ["Scenario", "as_scenario", "parse_value"]

PathLike = Union[str, "os.PathLike[str]"]


def _json_default(value: Any) -> Any:
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item):
        return item()
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"a value of type {type(value).__name__} cannot be part of a scenario")


def _graph_topology(data: Dict[str, Any]) -> Dict[str, Any]:
    """A networkx graph given as the ``topology`` becomes its ``kind = "graph"`` table."""
    t = data.get("topology")
    if t is not None and _topology.is_graph(t):
        try:
            data["topology"] = _topology.from_networkx(t)
        except (TypeError, ValueError) as e:
            raise ScenarioError(str(e), path="topology") from None
    return data


def _graph_file_from(data: Dict[str, Any], source: str) -> bool:
    """Make a graph topology's relative ``file`` absolute, from the folder of the scenario file
    ``source`` (where the Rust core looks for it when it reads the file itself); True if changed."""
    t = data.get("topology")
    if not isinstance(t, dict) or t.get("kind") != "graph" or not os.path.isfile(source):
        return False
    f = t.get("file")
    if not isinstance(f, str) or os.path.isabs(f):
        return False
    t["file"] = os.path.abspath(os.path.join(os.path.dirname(source), f))
    return True


def _dumps(data: Mapping[str, Any]) -> str:
    try:
        return json.dumps(data, default=_json_default)
    except (TypeError, ValueError) as e:
        raise ScenarioError(str(e)) from None


class Scenario:
    """A validated scenario.

    Build one with :meth:`load` (a TOML file), :meth:`from_toml` or :meth:`from_dict`; derive variants
    with :meth:`with_`. A scenario keeps the dictionary as the user wrote it (``to_dict()``) and is
    immutable: ``with_`` returns a new, validated scenario.

    >>> s = Scenario.from_toml('''
    ... [topology]
    ... kind = "fat_tree"
    ... k = 4
    ... [[workload]]
    ... kind = "permutation"
    ... size = "1MB"
    ... ''')
    >>> s.with_({"topology.k": 8, "workload.0.size": "2MB"}).to_dict()["topology"]["k"]
    8
    """

    __slots__ = ("_data", "_json", "_overrides", "_source")

    def __init__(self, data: Mapping[str, Any]) -> None:
        """The same as :meth:`from_dict`."""
        if not isinstance(data, Mapping):
            raise TypeError(f"a scenario is a mapping, not {type(data).__name__}")
        self._data: Dict[str, Any] = _graph_topology(copy.deepcopy(dict(data)))
        self._json: str = _core.parse_json(_dumps(self._data))
        self._source: Optional[str] = None
        self._overrides: Dict[str, Any] = {}

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Scenario:
        """A scenario from a dictionary shaped like the TOML file (``{"topology": {"kind": ...}}``).

        Units are strings as in the file (``"100Gbps"``, ``"1MB"``); sizes may also be integers
        (bytes). The ``topology`` may be a networkx graph: it becomes the ``kind = "graph"`` table
        :func:`fabricemu.topology.from_networkx` makes of it. Raises :class:`ScenarioError` naming
        the key path of the first problem.
        """
        return cls(data)

    @classmethod
    def from_toml(cls, text: str, source: str = "<string>") -> Scenario:
        """A scenario from TOML text; errors name ``source``, the key path, line and column."""
        normalised = _core.parse_toml(text, source)
        data = json.loads(_core.toml_to_json(text))
        if _graph_file_from(data, source):
            # The graph file is relative to the scenario file: keep it found from anywhere.
            normalised = _core.parse_json(_dumps(data))
        return cls._make(data, normalised, source)

    @classmethod
    def load(cls, path: PathLike) -> Scenario:
        """A scenario from a TOML file, or from a JSON file: a scenario dictionary, or the
        ``run.json`` of an earlier run (its ``scenario``, with every default written out and the
        seed, so the run is reproduced; the overrides it was run with are already applied)."""
        p = Path(path)
        text = p.read_text(encoding="utf-8")
        if p.suffix.lower() != ".json":
            return cls.from_toml(text, source=str(path))
        try:
            data = json.loads(text)
        except ValueError as e:
            raise ScenarioError(f"{path}: not valid JSON: {e}") from None
        if not isinstance(data, dict):
            raise ScenarioError(f"{path}: a JSON scenario is an object, not {type(data).__name__}")
        if isinstance(data.get("scenario"), dict) and "version" in data:
            data = data["scenario"]  # a run record (run.json)
        return cls._make(data, _core.parse_json(_dumps(data)), str(path))

    @classmethod
    def _make(
        cls,
        data: Dict[str, Any],
        normalised: str,
        source: Optional[str],
        overrides: Optional[Dict[str, Any]] = None,
    ) -> Scenario:
        self = cls.__new__(cls)
        self._data = data
        self._json = normalised
        self._source = source
        self._overrides = dict(overrides or {})
        return self

    # -- derivation ---------------------------------------------------------------------------

    def with_(self, changes: Optional[Mapping[str, Any]] = None, /, **top_level: Any) -> Scenario:
        """A new scenario with some values changed, validated.

        ``changes`` maps dotted key paths to values: ``{"topology.k": 8, "workload.0.size": "2MB"}``.
        List items are addressed by number, missing tables are created, and ``None`` removes a key.
        Keyword arguments set top-level keys: ``s.with_(seed=2)``.
        """
        data = copy.deepcopy(self._data)
        updates: Dict[str, Any] = dict(changes or {})
        updates.update(top_level)
        for key, value in updates.items():
            _set_path(data, key, value)
        _graph_topology(data)
        overrides = {**self._overrides, **copy.deepcopy(updates)}
        return Scenario._make(data, _core.parse_json(_dumps(data)), self._source, overrides)

    # -- views --------------------------------------------------------------------------------

    def to_dict(self, *, normalised: bool = False) -> Dict[str, Any]:
        """The scenario as the user wrote it (a deep copy); ``normalised=True`` gives it with every
        default written out and units in their canonical form."""
        if normalised:
            return dict(json.loads(self._json))
        return copy.deepcopy(self._data)

    def to_toml(self) -> str:
        """The scenario as TOML text (every default written out); ``from_toml`` reads it back."""
        return _core.to_toml(self._json)

    def to_json(self) -> str:
        """The normalised scenario as JSON text (what run.json records)."""
        return self._json

    def describe(self, max_memory: Optional[int] = None) -> Dict[str, Any]:
        """Size of the fabric (hosts, switches, links) and of each workload (flows, bytes).

        A scenario whose run would need more memory than ``max_memory`` bytes (default: 80 % of
        the memory available) raises :class:`ScenarioError` with the estimate, before any flow is
        made."""
        return dict(json.loads(_core.describe(self._json, max_memory)))

    def estimate(
        self, max_memory: Optional[int] = None, max_trace_size: Optional[int] = None
    ) -> Dict[str, Any]:
        """What a run is estimated to need, without allocating it: ``flows``, ``ops`` (of step
        graphs), ``packets_in_flight``, ``memory`` (and ``flow_memory``, ``op_memory``,
        ``fabric_memory``, ``packet_memory``), ``trace_bytes`` (and per table), in bytes, with the
        limits checked (``max_memory``, ``max_trace_size``). Over a limit raises
        :class:`ScenarioError` stating the estimate and the limit."""
        return dict(json.loads(_core.estimate(self._json, max_memory, max_trace_size)))

    def fabric_summary(self, max_memory: Optional[int] = None) -> Dict[str, Any]:
        """The fabric this scenario builds, measured: ``hosts``, ``switches``, ``links``, per-role
        switch figures (``roles``: ports, down/up capacity, oversubscription), per-tier link figures
        (``tiers``), ``bisection_bps`` (maximum flow between the two halves of the hosts, split by
        id), ``bisection_demand_bps``, ``bisection_ratio`` (1 = full bisection),
        ``oversubscription`` and ``diameter_links`` (longest shortest host-to-host path).
        ``fabricemu topo`` prints it."""
        return dict(json.loads(_core.topology_summary(self._json, max_memory)))

    def fabric_tables(self, max_memory: Optional[int] = None) -> Tuple[Any, Any]:
        """The fabric this scenario builds, by name, without running it: ``(nodes, ports)`` as
        pyarrow Tables, the same as a run's nodes.arrow and ports.arrow (:attr:`Result.nodes`,
        :attr:`Result.ports`; string columns as plain strings). ``fabricemu topo --export`` writes
        them as GraphML or JSON."""
        import pyarrow as pa

        from ._storage import plain_strings

        nodes, ports = _core.fabric_tables(self._json, max_memory)
        return (
            plain_strings(pa.ipc.open_file(pa.py_buffer(nodes)).read_all()),
            plain_strings(pa.ipc.open_file(pa.py_buffer(ports)).read_all()),
        )

    def summary_line(self, max_memory: Optional[int] = None) -> str:
        """One line describing the fabric and the workloads."""
        return _summary_line(self.describe(max_memory))

    @property
    def name(self) -> str:
        """The scenario's ``name`` ("scenario" if it has none)."""
        return str(json.loads(self._json).get("name") or "scenario")

    @property
    def seed(self) -> int:
        return int(json.loads(self._json)["seed"])

    @property
    def source(self) -> Optional[str]:
        """The file or source name it was read from, if any."""
        return self._source

    @property
    def overrides(self) -> Dict[str, Any]:
        """The changes :meth:`with_` made since the scenario was read (dotted key paths to values,
        later changes of a key replacing earlier ones): ``fabricemu run --set`` records them in
        run.json."""
        return copy.deepcopy(self._overrides)

    # -- protocol -----------------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Scenario):
            return NotImplemented
        return bool(json.loads(self._json) == json.loads(other._json))

    def __hash__(self) -> int:
        return hash(self._json)

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (_restore, (self._data, self._source, self._overrides))

    def __repr__(self) -> str:
        return f"<Scenario {self.name!r} seed={self.seed}: {_fabric_and_load(self.describe())}>"

    def _repr_html_(self) -> str:
        d = self.describe()
        rows = [
            ("name", d["name"]),
            ("seed", d["seed"]),
            ("topology", _topology_text(d["topology"])),
            ("stop", _stop_text(d["stop"])),
        ]
        try:
            f = self.fabric_summary()
            rows.append(
                (
                    "fabric",
                    f"bisection {_fmt.bps(f['bisection_bps'])} "
                    f"(oversubscription {_ratio(f['oversubscription'])}), "
                    f"diameter {f['diameter_links']} links",
                )
            )
        except (ValueError, KeyError):
            pass
        for i, w in enumerate(d["workloads"]):
            rows.append((f"workload {i}", _workload_text(w)))
        body = "".join(
            f"<tr><th style='text-align:left'>{html.escape(str(k))}</th>"
            f"<td style='text-align:left'>{html.escape(str(v))}</td></tr>"
            for k, v in rows
        )
        toml_text = html.escape(self.to_toml())
        return (
            f"<div><b>fabricemu.Scenario</b><table>{body}</table>"
            f"<details><summary>TOML</summary><pre>{toml_text}</pre></details></div>"
        )


def _restore(data: Dict[str, Any], source: Optional[str], overrides: Dict[str, Any]) -> Scenario:
    """Unpickling: validate the dictionary again, keep where it came from."""
    return Scenario._make(data, _core.parse_json(_dumps(data)), source, overrides)


def as_scenario(scenario: Union[Scenario, PathLike, Mapping[str, Any]]) -> Scenario:
    """A Scenario from a Scenario, a path to a TOML file, or a dictionary."""
    if isinstance(scenario, Scenario):
        return scenario
    if isinstance(scenario, Mapping):
        return Scenario.from_dict(scenario)
    if isinstance(scenario, (str, os.PathLike)):
        return Scenario.load(scenario)
    raise TypeError(f"expected a Scenario, a path or a dict, not {type(scenario).__name__}")


def parse_value(text: str) -> Any:
    """A command-line value read as a TOML value: ``8``, ``"2MB"``, ``true``, ``[1, 2]``,
    ``{kmin = "100KB"}``; anything that is not valid TOML (``2MB``, ``fat_tree``) is a string."""
    try:
        return json.loads(_core.toml_to_json(f"v = {text}"))["v"]
    except ScenarioError:
        return text


# -- dotted paths ---------------------------------------------------------------------------------


def _set_path(data: Dict[str, Any], key: str, value: Any) -> None:
    if not isinstance(key, str) or not key or any(p == "" for p in key.split(".")):
        raise ScenarioError(f"invalid key path {key!r}", path=str(key))
    parts = key.split(".")
    node: Any = data
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        here = ".".join(parts[: depth + 1])
        if isinstance(node, list):
            if not part.isdigit():
                raise ScenarioError(
                    f"{'.'.join(parts[:depth]) or 'the scenario'} is a list: expected an index",
                    path=here,
                )
            index = int(part)
            if index >= len(node):
                raise ScenarioError(
                    f"index {index} is out of range: "
                    f"{'.'.join(parts[:depth])} has {len(node)} entr{'y' if len(node) == 1 else 'ies'}",
                    path=here,
                )
            if last:
                if value is None:
                    del node[index]
                else:
                    node[index] = copy.deepcopy(value)
                return
            node = node[index]
        elif isinstance(node, dict):
            if last:
                if value is None:
                    node.pop(part, None)
                else:
                    node[part] = copy.deepcopy(value)
                return
            if part not in node or node[part] is None:
                node[part] = {}
            node = node[part]
        else:
            raise ScenarioError(
                f"cannot set {key}: {'.'.join(parts[:depth])} is a value, not a table or a list",
                path=here,
            )


# -- human descriptions ---------------------------------------------------------------------------


#: Keys of the core's fabric description that are sizes, not shape parameters.
_MEASURED_KEYS = frozenset({"kind", "hosts", "switches", "links", "roles", "tiers"})


def fabric_shape(t: Mapping[str, Any]) -> str:
    """The shape of a fabric from its description (``Scenario.describe()["topology"]`` or a run's
    ``run_info["fabric"]``): ``"fat_tree k=4"``, ``"leaf_spine 4 leaves x 2 spines, 6 hosts per
    leaf"``, ``"dragonfly p=2 a=4 h=2 g=9"``, ... Every topology kind has one. A ``[cluster]`` adds
    its servers: ``"leaf_spine 8 leaves x 4 spines, 32 hosts per leaf; 32 servers x 8 GPUs, rail
    cabling"``."""
    shape = _topology_shape(t)
    c = t.get("cluster")
    if isinstance(c, Mapping) and "servers" in c:
        planes = f", {c['planes']} planes" if c.get("planes", 1) != 1 else ""
        shape += f"; {c['servers']} servers x {c['gpus_per_server']} GPUs, {c['cabling']} cabling{planes}"
    return shape


def _topology_shape(t: Mapping[str, Any]) -> str:
    """The topology part of :func:`fabric_shape`."""
    kind = str(t.get("kind", "fabric"))
    try:
        if kind == "fat_tree":
            return f"fat_tree k={t['k']}"
        if kind == "leaf_spine":
            return (
                f"leaf_spine {t['leaves']} leaves x {t['spines']} spines, "
                f"{t['hosts_per_leaf']} hosts per leaf"
            )
        if kind == "dragonfly":
            return f"dragonfly p={t['p']} a={t['a']} h={t['h']} g={t['g']}"
        if kind == "dragonfly_plus":
            return (
                f"dragonfly_plus {t['g']} groups of {t['leaves']} leaves x {t['spines']} spines, "
                f"{t['hosts_per_leaf']} hosts per leaf, h={t['h']}"
            )
        if kind == "clos":
            return (
                f"clos {t['pods']} pods x {t['tors_per_pod']} ToRs x {t['hosts_per_tor']} hosts, "
                f"{t['aggs_per_pod']} aggs per pod, {t['cores']} cores"
            )
        if kind == "graph":
            where = f" from {t['file']}" if "file" in t else " (inline edges)"
            return f"graph{where}: {t['hosts']} hosts, {t['switches']} switches, {t['links']} links"
    except KeyError:
        pass
    params = " ".join(
        f"{k}={v}"
        for k, v in t.items()
        if k not in _MEASURED_KEYS and not k.endswith("_link") and not isinstance(v, (dict, list))
    )
    return f"{kind} {params}".strip()


def fabric_links(t: Mapping[str, Any]) -> str:
    """The link rates of a fabric description: ``"100Gbps"`` when every tier has the same rate,
    else per tier (``"100Gbps host / 400Gbps fabric"``), then the host links' delay."""
    tiers = [str(x["tier"]) for x in t.get("tiers", [])]
    dragonfly = "global" in tiers
    named = []
    for tier in tiers:
        name = "local" if dragonfly and tier == "fabric" else tier
        link = t.get(f"{name}_link")
        if link:
            named.append((name, link))
    rates = {link["rate"] for _, link in named}
    if len(rates) == 1:
        text = next(iter(rates))
    else:
        text = " / ".join(f"{link['rate']} {name}" for name, link in named)
    delay = t.get("host_link", {}).get("delay")
    return f"{text}, {delay}" if delay else text


def _topology_text(t: Mapping[str, Any]) -> str:
    return (
        f"{fabric_shape(t)} ({t['hosts']} hosts, {t['switches']} switches, {t['links']} links, "
        f"{fabric_links(t)})"
    )


def _workload_text(w: Dict[str, Any]) -> str:
    label = w["kind"] if w["name"] == w["kind"] else f"{w['name']} ({w['kind']})"
    if w["kind"] == "incast":
        rounds = f" x {w['rounds']} rounds" if w["rounds"] != 1 else ""
        return f"{label} {w['senders']}->1 to host {w['receiver']} of {w['size']}{rounds}"
    if w["kind"] == "permutation":
        return f"{label} of {w['flows']} flows x {w['size']}"
    if w["kind"] == "synthetic":
        return (
            f"{label} {w['pattern']} at load {w['load']:g} ({w['process']}, {w['senders']} hosts): "
            f"{w['flows']} messages x {_fmt.size(w['size_bytes'])}"
        )
    if w["kind"] == "training" and "dp" in w:
        ideal = w.get("ideal_iteration_ps")
        free = f", network-free iteration {ideal / 1e6:.4g} us" if ideal is not None else ""
        return (
            f"{label} dp {w['dp']} x tp {w['tp']} x pp {w['pp']}"
            f"{' x ep ' + str(w['ep']) if w['ep'] > 1 else ''}, {w['schedule']}, "
            f"{w['micro_batches']} micro-batches x {w['iterations']} iterations{free}: "
            f"{w['flows']} flows, {_fmt.size(w['bytes'])}"
        )
    if w["kind"] == "inference" and "tp" in w:
        return (
            f"{label} tp {w['tp']} x pp {w['pp']}, batches of up to {w['max_batch']}, "
            f"{w['prompt_tokens']}-token prompts + {w['decode_steps']} decode steps: "
            f"{w['flows']} flows, {_fmt.size(w['bytes'])}"
        )
    return f"{label}: {w['flows']} flows, {_fmt.size(w['bytes'])}"


def _ratio(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:.3g}:1"


def _stop_text(stop: str) -> str:
    return "when all flows are done" if stop == "all_flows_done" else f"at {stop}"


def _fabric_and_load(d: Dict[str, Any]) -> str:
    workloads = ", ".join(_workload_text(w) for w in d["workloads"]) or "no workload"
    return f"{_topology_text(d['topology'])}; {workloads}"


def _summary_line(d: Dict[str, Any]) -> str:
    return (
        f"{d['name']}: {_fabric_and_load(d)}; {d['flows']} flows, {_fmt.size(d['bytes'])}; "
        f"stop {_stop_text(d['stop'])}"
    )
