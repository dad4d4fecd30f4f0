"""Topologies from graphs: a networkx graph as a ``[topology]`` table of ``kind = "graph"``.

``from_networkx(G)`` writes the graph as the inline edge list the scenario's ``edges`` key takes
(docs/topology.md), so a scenario built from it is an ordinary scenario dictionary: it validates,
prints, saves as TOML and runs like any other. :class:`fabricemu.Scenario` also accepts the graph
itself as its ``topology`` (``Scenario.from_dict({"topology": G, ...})``) and converts it with this
function.

Node attributes: ``role`` (``"host"``, ``"switch"``, or ``edge``/``tor``, ``agg``, ``core``,
``leaf``, ``spine``, ``router``; without one the role comes from the node's name, ``"h3"`` or
``"leaf:0"``), and optionally ``pod``, ``group``, ``rack``. Edge attributes: ``rate`` (``"100Gbps"``
or a number of bits per second), ``delay`` (``"1us"``; or ``delay_ps``, an integer), ``tier``
(``host``, ``fabric``, ``core``, ``global``), and ``source_port``/``target_port`` (the export's port
ids, which fix each node's port order). Links without a rate or delay take the ``link_rate`` /
``host_link_rate`` / ``fabric_link_rate`` (and ``*_delay``) given here.

networkx is an optional dependency: only this module's callers need it, and it is imported by
nobody else.
"""

from __future__ import annotations

import numbers
import re
from typing import Any, Dict, List, Optional

__all__ = ["from_networkx", "is_graph"]

_NODE_KEYS = ("role", "pod", "group", "rack")
_EDGE_KEYS = ("rate", "rate_bps", "delay", "delay_ps", "tier", "source_port", "target_port")
_NAME = re.compile(r"^[^\s,#=]+$")


def is_graph(value: Any) -> bool:
    """Whether ``value`` looks like a networkx graph (without importing networkx)."""
    return all(hasattr(value, a) for a in ("nodes", "edges", "is_directed", "adj"))


def _name(node: Any) -> str:
    name = str(node)
    if not _NAME.match(name) or name == "node":
        raise ValueError(
            f"node {node!r}: a graph topology's node names have no spaces, commas, '#' or '=' "
            "(relabel the graph, e.g. networkx.convert_node_labels_to_integers with a prefix)"
        )
    return name


def _value(key: str, value: Any, where: str) -> str:
    if isinstance(value, bool):
        raise TypeError(f"{where}: {key} = {value!r}: expected a number or a string")
    if key == "rate" and isinstance(value, numbers.Real):
        return f"rate_bps={value if isinstance(value, int) else int(float(value))}"
    if key == "delay" and isinstance(value, numbers.Real):
        raise TypeError(f'{where}: delay = {value!r}: give a duration with a unit ("1us") or delay_ps')
    text = str(value)
    if not text or not _NAME.match(text):
        raise ValueError(f"{where}: {key} = {value!r}: expected a value without spaces or commas")
    return f"{key}={text}"


def from_networkx(
    graph: Any,
    *,
    link_rate: Optional[str] = None,
    link_delay: Optional[str] = None,
    host_link_rate: Optional[str] = None,
    host_link_delay: Optional[str] = None,
    fabric_link_rate: Optional[str] = None,
    fabric_link_delay: Optional[str] = None,
) -> Dict[str, Any]:
    """The ``[topology]`` table (a dictionary) of networkx graph ``graph``.

    Every edge is a cable (both directions): a directed graph's edge ``a -> b`` is the cable
    ``a - b``, so ``b -> a`` is a second, refused, link. Nodes keep the graph's order (hosts get
    ids in it, then the switches), edges the graph's edge order.

    >>> import networkx as nx
    >>> g = nx.cycle_graph([f"s{i}" for i in range(4)])
    >>> g.add_edges_from((f"h{i}", f"s{i}") for i in range(4))
    >>> t = from_networkx(g, link_rate="100Gbps", link_delay="1us")
    >>> t["kind"], t["edges"].splitlines()[0]
    ('graph', 'node s0 switch')
    """
    if not is_graph(graph):
        raise TypeError(f"expected a networkx graph, not {type(graph).__name__}")
    if graph.is_multigraph() if hasattr(graph, "is_multigraph") else False:
        pairs = [(a, b) for a, b, *_ in graph.edges]
        if len(set(map(frozenset, pairs))) != len(pairs):
            raise ValueError("parallel edges between the same two nodes are not supported")
    lines: List[str] = []
    for node, attrs in graph.nodes(data=True):
        name = _name(node)
        role = attrs.get("role")
        if role is None and "host" in attrs:
            role = "host" if attrs["host"] else "switch"
        if role is None:
            continue  # the role comes from the name (or the check says it has none)
        extra = [_value(k, attrs[k], f"node {name}") for k in _NODE_KEYS[1:] if attrs.get(k) is not None]
        lines.append(" ".join(["node", name, str(role), *extra]))
    for a, b, attrs in graph.edges(data=True):
        where = f"edge {a} - {b}"
        fields = [_name(a), _name(b)]
        fields += [_value(k, attrs[k], where) for k in _EDGE_KEYS if attrs.get(k) is not None]
        lines.append(" ".join(fields))
    table: Dict[str, Any] = {"kind": "graph"}
    for key, value in (
        ("link_rate", link_rate),
        ("link_delay", link_delay),
        ("host_link_rate", host_link_rate),
        ("host_link_delay", host_link_delay),
        ("fabric_link_rate", fabric_link_rate),
        ("fabric_link_delay", fabric_link_delay),
    ):
        if value is not None:
            table[key] = value
    table["edges"] = "\n".join(lines) + "\n"
    return table
