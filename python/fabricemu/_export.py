"""The fabric for drawing tools: ``fabricemu topo SCENARIO --export graphml|json -o FILE``.

One node per fabric node, identified by its name (``"leaf:3"``, the name ``[[fault]]`` takes), with
its id (``node``), ``role``, ``index``, ``host`` and, where they apply, ``pod``, ``group``,
``plane``, ``server``, ``rack``, ``rail``, ``domain``. One edge per link (a cable: both directions),
with ``rate_bps``, ``delay_ps``, ``tier`` and the port id of each end (``source_port``,
``target_port``: the ids of ports.arrow, links.arrow's ``link``). The JSON form is the node-link
layout of ``networkx.node_link_graph`` (``edges="links"``) and d3.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Tuple
from xml.sax.saxutils import escape, quoteattr

import pyarrow as pa

#: Node attributes that are null where they do not apply.
OPTIONAL = ("pod", "group", "plane", "server", "rack", "rail", "domain")


def graph(nodes: pa.Table, ports: pa.Table) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    """``(nodes, links)`` as dictionaries: nodes by id order, one link per cable (from its
    lower-numbered port)."""
    out_nodes = []
    for r in nodes.to_pylist():
        n: Dict[str, Any] = {
            "id": r["name"],
            "node": r["node"],
            "role": r["role"],
            "index": r["index"],
            "host": r["host"],
        }
        n.update({k: r[k] for k in OPTIONAL if r.get(k) is not None})
        out_nodes.append(n)
    links = []
    for r in ports.to_pylist():
        if r["port"] > r["peer_port"]:
            continue
        links.append(
            {
                "source": r["node_name"],
                "target": r["peer_name"],
                "source_port": r["port"],
                "target_port": r["peer_port"],
                "rate_bps": r["rate_bps"],
                "delay_ps": r["delay_ps"],
                "tier": r["tier"],
            }
        )
    return out_nodes, links


def to_json(nodes: pa.Table, ports: pa.Table, name: str) -> str:
    n, links = graph(nodes, ports)
    doc = {
        "directed": False,
        "multigraph": True,
        "graph": {"name": name, "links_are": "cables (both directions)"},
        "nodes": n,
        "links": links,
    }
    return json.dumps(doc, indent=1) + "\n"


_NODE_KEYS = [
    ("node", "long"),
    ("role", "string"),
    ("index", "long"),
    ("host", "boolean"),
    *((k, "long") for k in OPTIONAL),
]
_EDGE_KEYS = [
    ("source_port", "long"),
    ("target_port", "long"),
    ("rate_bps", "long"),
    ("delay_ps", "long"),
    ("tier", "string"),
]


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return escape(str(v))


def to_graphml(nodes: pa.Table, ports: pa.Table, name: str) -> str:
    n, links = graph(nodes, ports)
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        '<graphml xmlns="http://graphml.graphdrawing.org/xmlns" '
        'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
        'xsi:schemaLocation="http://graphml.graphdrawing.org/xmlns '
        'http://graphml.graphdrawing.org/xmlns/1.0/graphml.xsd">',
    ]
    for key, kind in _NODE_KEYS:
        lines.append(f'  <key id="{key}" for="node" attr.name="{key}" attr.type="{kind}"/>')
    for key, kind in _EDGE_KEYS:
        lines.append(f'  <key id="{key}" for="edge" attr.name="{key}" attr.type="{kind}"/>')
    lines.append(f'  <graph id={quoteattr(name)} edgedefault="undirected">')
    for node in n:
        lines.append(f"    <node id={quoteattr(node['id'])}>")
        for key, _ in _NODE_KEYS:
            if key in node:
                lines.append(f'      <data key="{key}">{_value(node[key])}</data>')
        lines.append("    </node>")
    for i, e in enumerate(links):
        ends = f"source={quoteattr(e['source'])} target={quoteattr(e['target'])}"
        lines.append(f'    <edge id="e{i}" {ends}>')
        for key, _ in _EDGE_KEYS:
            lines.append(f'      <data key="{key}">{_value(e[key])}</data>')
        lines.append("    </edge>")
    lines += ["  </graph>", "</graphml>", ""]
    return "\n".join(lines)


def write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (a temporary file beside it, then a rename)."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
