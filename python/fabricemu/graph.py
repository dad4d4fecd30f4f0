"""Step graphs from Python: a builder for ``kind = "graph"`` workloads and an importer of Chakra
execution traces (their JSON form).

>>> from fabricemu.graph import StepGraph
>>> g = StepGraph(ranks=[0, 1, 2, 3])
>>> fwd = [g.compute(r, "20us", phase="forward") for r in range(4)]
>>> ar = g.collective([0, 1, 2, 3], "all_reduce", "1MiB", deps=fwd, phase="dp")
>>> bwd = [g.compute(r, "10us", deps=[ar], phase="backward") for r in range(4)]
>>> w = g.to_workload(iterations=2)
>>> w["kind"], len(w["ops"]), w["ops"][4]["deps"]
('graph', 9, [0, 1, 2, 3])

``to_workload()`` is the ``[[workload]]`` table as a dictionary (``Scenario.from_dict({...,
"workload": [w]})``); ``save(path)`` writes the JSON file ``file = "..."`` reads. The format is
documented in docs/step-workloads.md. Times are strings with a unit (``"10us"``) or integer
picoseconds; sizes strings (``"1MiB"``) or integer bytes.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

__all__ = ["Op", "StepGraph", "from_chakra_json"]

PathLike = Union[str, "os.PathLike[str]"]
Time = Union[str, int]
Size = Union[str, int]

#: The ``phase`` names an op may carry (compute ops: the first three).
PHASES = ("forward", "backward", "compute", "tp", "pp", "dp", "ep", "comm")


@dataclass(frozen=True)
class Op:
    """A handle to an op of a :class:`StepGraph` (its index in the graph's ``ops``)."""

    index: int


OpRef = Union[Op, int]


def _time(value: Time) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TypeError(f"a time is a string with a unit like '10us' or integer picoseconds, not {value!r}")
    return value if isinstance(value, str) else f"{value}ps"


def _size(value: Size) -> Union[str, int]:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TypeError(f"a size is a string like '1MiB' or integer bytes, not {value!r}")
    return value


class StepGraph:
    """A step graph: compute on a rank, sends between two ranks, collectives over a group; each op
    starts when all its ``deps`` ended (a collective: on every member).

    ``ranks``: the endpoint (host or GPU id) of each rank (default: rank r on endpoint r);
    ``gpu_flops``: FLOP/s of one GPU, for compute ops given as ``flops``.
    """

    def __init__(self, ranks: Optional[Sequence[int]] = None, *, gpu_flops: Optional[float] = None) -> None:
        self.ranks: Optional[List[int]] = None if ranks is None else [int(r) for r in ranks]
        self.gpu_flops = gpu_flops
        self.ops: List[Dict[str, Any]] = []
        self.groups: List[List[int]] = []

    def __len__(self) -> int:
        return len(self.ops)

    def _add(
        self, op: Dict[str, Any], deps: Iterable[OpRef], phase: Optional[str], name: Optional[str]
    ) -> Op:
        refs = []
        for d in deps:
            i = d.index if isinstance(d, Op) else int(d)
            if not 0 <= i < len(self.ops):
                raise ValueError(f"dependency {i} is not an op of this graph (ops 0..{len(self.ops) - 1})")
            refs.append(i)
        if refs:
            op["deps"] = refs
        if phase is not None:
            if phase not in PHASES:
                raise ValueError(f"phase is one of {', '.join(PHASES)}, not {phase!r}")
            op["phase"] = phase
        if name is not None:
            op["name"] = str(name)
        self.ops.append(op)
        return Op(len(self.ops) - 1)

    def compute(
        self,
        rank: int,
        duration: Optional[Time] = None,
        *,
        flops: Optional[float] = None,
        deps: Iterable[OpRef] = (),
        phase: Optional[str] = None,
        name: Optional[str] = None,
    ) -> Op:
        """Compute on ``rank`` for ``duration`` (or ``flops`` at the graph's ``gpu_flops``)."""
        if (duration is None) == (flops is None):
            raise ValueError("give a compute op either a duration or flops")
        op: Dict[str, Any] = {"kind": "compute", "rank": int(rank)}
        if duration is not None:
            op["duration"] = _time(duration)
        else:
            op["flops"] = float(flops)  # type: ignore[arg-type]
        return self._add(op, deps, phase, name)

    def send(
        self,
        src: int,
        dst: int,
        bytes: Size,  # noqa: A002 - the op's key
        *,
        deps: Iterable[OpRef] = (),
        phase: Optional[str] = None,
        name: Optional[str] = None,
    ) -> Op:
        """A message from rank ``src`` to rank ``dst`` (the send and its matching receive): ops
        that depend on it wait for its last byte to arrive."""
        op = {"kind": "send", "src": int(src), "dst": int(dst), "size": _size(bytes)}
        return self._add(op, deps, phase, name)

    def collective(
        self,
        ranks: Sequence[int],
        op: str,
        bytes: Size,  # noqa: A002 - the op's key
        *,
        algorithm: Optional[str] = None,
        deps: Iterable[OpRef] = (),
        phase: Optional[str] = None,
        name: Optional[str] = None,
        domain_size: Optional[int] = None,
    ) -> Op:
        """A collective (``all_reduce``, ``all_gather``, ``reduce_scatter``, ``all_to_all``) of
        ``bytes`` (nccl-tests' size) over ``ranks`` in rank order, by ``algorithm`` (any of
        ``kind = "collective"``'s; default as there)."""
        group = [int(r) for r in ranks]
        try:
            g = self.groups.index(group)
        except ValueError:
            self.groups.append(group)
            g = len(self.groups) - 1
        entry: Dict[str, Any] = {"kind": "collective", "op": op, "group": g, "size": _size(bytes)}
        if algorithm is not None:
            entry["algorithm"] = algorithm
        if domain_size is not None:
            entry["domain_size"] = int(domain_size)
        return self._add(entry, deps, phase, name)

    def to_dict(self) -> Dict[str, Any]:
        """The graph's keys (``ranks``, ``groups``, ``ops``, ``gpu_flops``): the JSON file's content."""
        body: Dict[str, Any] = {}
        if self.ranks is not None:
            body["ranks"] = list(self.ranks)
        if self.groups:
            body["groups"] = [list(g) for g in self.groups]
        body["ops"] = [dict(o) for o in self.ops]
        if self.gpu_flops is not None:
            body["gpu_flops"] = float(self.gpu_flops)
        return body

    def to_workload(
        self,
        *,
        iterations: Optional[int] = None,
        start: Optional[Time] = None,
        noise: Optional[Mapping[str, Any]] = None,
        name: Optional[str] = None,
        **keys: Any,
    ) -> Dict[str, Any]:
        """The ``kind = "graph"`` workload table with the ops inline, plus ``iterations``,
        ``start``, ``noise`` (e.g. ``{"jitter": "uniform", "max": 0.05, "slow_ranks": {"3":
        1.25}}``), ``name`` and any other workload key."""
        w: Dict[str, Any] = {"kind": "graph"}
        if name is not None:
            w["name"] = name
        w.update(self.to_dict())
        if iterations is not None:
            w["iterations"] = int(iterations)
        if start is not None:
            w["start"] = _time(start)
        if noise is not None:
            w["noise"] = dict(noise)
        w.update(keys)
        return w

    def save(self, path: PathLike) -> Path:
        """Write the graph as the JSON file a workload's ``file = "..."`` reads."""
        p = Path(path)
        p.write_text(json.dumps(self.to_dict(), indent=1) + "\n")
        return p

    @classmethod
    def load(cls, path: PathLike) -> StepGraph:
        """A graph from a JSON file written by :meth:`save` (or by hand)."""
        return cls.from_dict(json.loads(Path(path).read_text()))

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> StepGraph:
        """A graph from its keys (``ranks``, ``groups``, ``ops``, ``gpu_flops``)."""
        g = cls(body.get("ranks"), gpu_flops=body.get("gpu_flops"))
        g.groups = [list(x) for x in body.get("groups", [])]
        g.ops = [dict(o) for o in body.get("ops", [])]
        return g


# -- Chakra -----------------------------------------------------------------------------------------

#: Chakra's ``CollectiveCommType`` values and names -> fabricemu's collective ops.
_CHAKRA_COLLECTIVES = {
    0: "all_reduce",
    2: "all_gather",
    6: "all_to_all",
    7: "reduce_scatter",
    "ALL_REDUCE": "all_reduce",
    "ALL_GATHER": "all_gather",
    "ALL_TO_ALL": "all_to_all",
    "REDUCE_SCATTER": "reduce_scatter",
}

#: Chakra's ``NodeType`` values -> names.
_CHAKRA_NODE_TYPES = {
    0: "INVALID_NODE",
    1: "METADATA_NODE",
    2: "MEM_LOAD_NODE",
    3: "MEM_STORE_NODE",
    4: "COMP_NODE",
    5: "COMM_SEND_NODE",
    6: "COMM_RECV_NODE",
    7: "COMM_COLL_NODE",
}


def _attrs(node: Mapping[str, Any]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for a in node.get("attr", node.get("attrs", [])) or []:
        value = None
        for k, v in a.items():
            if k.endswith("Val") or k.endswith("_val"):
                value = v
        if isinstance(value, str) and value.lstrip("-").isdigit():
            value = int(value)  # protobuf JSON writes 64-bit integers as strings
        out[a.get("name", "")] = value
    return out


def _int(node: Mapping[str, Any], *keys: str, default: int = 0) -> int:
    for k in keys:
        if k in node and node[k] is not None:
            return int(node[k])
    return default


def _deps(node: Mapping[str, Any]) -> List[int]:
    out: List[int] = []
    for k in ("ctrlDeps", "ctrl_deps", "dataDeps", "data_deps", "parent", "parents"):
        v = node.get(k)
        if v is None:
            continue
        out.extend(int(x) for x in (v if isinstance(v, list) else [v]))
    return out


def from_chakra_json(
    files_per_rank: Sequence[Union[PathLike, Mapping[str, Any]]],
    *,
    ranks: Optional[Sequence[int]] = None,
    gpu_flops: Optional[float] = None,
    algorithm: Optional[str] = None,
) -> StepGraph:
    """A step graph from Chakra execution traces in their JSON form (one file, or parsed
    dictionary, per rank: rank r is ``files_per_rank[r]``). The mapping (docs/step-workloads.md):

    - ``COMP_NODE`` -> compute on its rank for ``duration_micros`` (or its ``num_ops`` FLOPs at
      ``gpu_flops`` when it has no duration);
    - a ``COMM_SEND_NODE`` on rank s to ``comm_dst`` d and the ``COMM_RECV_NODE`` on d from
      ``comm_src`` s with the same ``comm_tag`` (paired in order) -> one send of ``comm_size``
      bytes, after the deps of both;
    - ``COMM_COLL_NODE`` -> a collective (``comm_type``: all-reduce, all-gather, reduce-scatter,
      all-to-all) of ``comm_size`` bytes; the k-th collective of each process group (``pg_name``,
      else all ranks) on every rank that has one is the same op, after the deps of every member;
    - ctrl and data deps -> deps; other nodes (metadata, memory) -> zero-time compute.
    """
    traces: List[Mapping[str, Any]] = []
    for f in files_per_rank:
        if isinstance(f, Mapping):
            traces.append(f)
        else:
            traces.append(json.loads(Path(f).read_text()))
    g = StepGraph(ranks, gpu_flops=gpu_flops)
    # (rank, node id) -> op index; ops built in two passes (indices first, then deps).
    index: Dict[Tuple[int, int], int] = {}
    members: List[List[Tuple[int, Mapping[str, Any]]]] = []  # per op: the (rank, node) it merges
    entries: List[Dict[str, Any]] = []
    sends: Dict[Tuple[int, int, int], List[int]] = {}  # (src, dst, tag) -> send ops awaiting a recv
    recvs: Dict[Tuple[int, int, int], List[Tuple[int, Mapping[str, Any]]]] = {}
    collectives: Dict[Tuple[str, int], int] = {}  # (group, k) -> op
    seen_coll: Dict[Tuple[int, str], int] = {}  # (rank, group) -> collectives so far

    def new_op(entry: Dict[str, Any], rank: int, node: Mapping[str, Any]) -> int:
        entries.append(entry)
        members.append([(rank, node)])
        return len(entries) - 1

    for rank, trace in enumerate(traces):
        nodes = trace.get("nodes", trace.get("node", []))
        for node in nodes:
            nid = _int(node, "id")
            kind = node.get("type", "COMP_NODE")
            kind = _CHAKRA_NODE_TYPES.get(kind, kind) if isinstance(kind, int) else str(kind)
            a = _attrs(node)
            size = int(a.get("comm_size") or 0)
            if kind == "COMM_SEND_NODE" or kind == "COMM_RECV_NODE":
                sending = kind == "COMM_SEND_NODE"
                peer_key = "comm_dst" if sending else "comm_src"
                peer = int(a.get(peer_key, -1))
                if peer < 0:
                    raise ValueError(f"rank {rank} node {nid}: a {kind} needs {peer_key}")
                tag = int(a.get("comm_tag") or 0)
                key = (rank, peer, tag) if sending else (peer, rank, tag)
                src, dst = key[0], key[1]
                if sending:
                    waiting = recvs.get(key)
                    if waiting:
                        r_rank, r_node = waiting.pop(0)
                        i = index[(r_rank, _int(r_node, "id"))]
                        members[i].append((rank, node))
                        entries[i]["size"] = max(size, 1)
                    else:
                        i = new_op({"kind": "send", "src": src, "dst": dst, "size": max(size, 1)}, rank, node)
                        sends.setdefault(key, []).append(i)
                else:
                    pending = sends.get(key)
                    if pending:
                        i = pending.pop(0)
                        members[i].append((rank, node))
                    else:
                        i = new_op({"kind": "send", "src": src, "dst": dst, "size": max(size, 1)}, rank, node)
                        recvs.setdefault(key, []).append((rank, node))
                index[(rank, nid)] = i
            elif kind == "COMM_COLL_NODE":
                ctype = a.get("comm_type")
                op = _CHAKRA_COLLECTIVES.get(ctype)  # type: ignore[arg-type]
                if op is None:
                    raise ValueError(
                        f"rank {rank} node {nid}: collective comm_type {ctype!r} has no fabricemu equivalent"
                    )
                group = str(a.get("pg_name") or a.get("comm_group") or "all")
                k = seen_coll.get((rank, group), 0)
                seen_coll[(rank, group)] = k + 1
                known = collectives.get((group, k))
                if known is None:
                    entry: Dict[str, Any] = {"kind": "collective", "op": op, "ranks": []}
                    entry["size"] = max(size, 1)
                    if algorithm is not None:
                        entry["algorithm"] = algorithm
                    i = new_op(entry, rank, node)
                    collectives[(group, k)] = i
                else:
                    i = known
                    members[i].append((rank, node))
                entries[i]["ranks"].append(rank)
                index[(rank, nid)] = i
            else:
                dur = node.get("durationMicros", node.get("duration_micros"))
                entry = {"kind": "compute", "rank": rank}
                if kind == "COMP_NODE" and not dur and a.get("num_ops") and gpu_flops:
                    entry["flops"] = float(a["num_ops"])
                else:
                    entry["duration"] = f"{round(float(dur or 0) * 1e6)}ps"
                index[(rank, nid)] = new_op(entry, rank, node)
            name = node.get("name")
            if name and "name" not in entries[index[(rank, nid)]]:
                entries[index[(rank, nid)]]["name"] = str(name)
    for i, entry in enumerate(entries):
        deps = set()
        for rank, node in members[i]:
            for d in _deps(node):
                j = index.get((rank, d))
                if j is None:
                    raise ValueError(f"rank {rank} node {_int(node, 'id')}: unknown dependency {d}")
                if j != i:
                    deps.add(j)
        if deps:
            entry["deps"] = sorted(deps)
        if entry["kind"] == "collective":
            entry["ranks"] = sorted(entry["ranks"])
    # Collectives by their group of ranks (the builder's form).
    for entry in entries:
        if entry["kind"] == "collective":
            group = entry.pop("ranks")
            try:
                entry["group"] = g.groups.index(group)
            except ValueError:
                g.groups.append(group)
                entry["group"] = len(g.groups) - 1
    g.ops = entries
    return g
