"""pcapng files of the packets crossing chosen ports, from a run's packets.arrow.

Each packet that starts its transmission on a chosen egress port (a ``dequeue`` row) becomes one
Enhanced Packet Block on that port's interface, stamped with its simulated time (nanoseconds,
``if_tsresol`` = 9). The headers are synthesised from the row (docs/packet-traces.md):

* Ethernet II: source and destination MACs ``02:00:00:NN:NN:NN`` of the packet's source and
  destination hosts (the node ids), EtherType IPv4;
* IPv4: addresses ``10.a.b.c`` of the node ids, DSCP = CS<priority> and the row's ECN bits in the
  traffic class byte, total length from the row's ``size``, a valid header checksum;
* UDP to port 4791 (RoCEv2), source port ``49152 + flow_id % 16384``, checksum 0;
* InfiniBand BTH: data packets ``SEND_FIRST`` (opcode 0x00, packet 0 of a flow) or
  ``SEND_MIDDLE`` (0x01), ACKs and NACKs ``ACKNOWLEDGE`` (0x11) with an AETH (syndrome 0x1f: an
  ACK; 0x60: a NAK for a PSN sequence error), CNPs opcode 0x81 with the BECN bit;
  destination QP = ``flow_id + 16`` (QPs 0-15 are left to management), PSN = the row's ``seq``
  (an ACK's PSN is the last packet it acknowledges, a NAK's the one it asks for);
* PFC frames: MAC control (EtherType 0x8808, to 01:80:c2:00:00:01), opcode 0x0101, the class
  enable vector of the paused class, its quanta 0xffff (PAUSE) or 0 (RESUME).

The payload is zeros, cut at ``snaplen`` bytes (0: whole packets); the original length is the
packet's ``size``. Wireshark's InfiniBand dissector labels a RoCE packet whose payload was cut
"Invalid Packet Length from LRH! [Malformed Packet]" (it checks the payload's captured bytes) after
decoding its headers; ``snaplen=0`` writes whole packets, which it decodes without complaint.
"""

from __future__ import annotations

import json
import os
import re
import struct
from pathlib import Path
from typing import Any, BinaryIO, Dict, List, Sequence, Tuple, Union

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["DEFAULT_SNAPLEN", "ROCE_PORT", "frame", "resolve_port", "write_pcap"]

#: Captured bytes per packet by default: every synthesised header fits.
DEFAULT_SNAPLEN = 128
#: RoCEv2's UDP destination port.
ROCE_PORT = 4791
#: Destination QP of a flow: its id plus this (QPs 0 and 1 are the subnet management QPs).
QPN_BASE = 16

_OP_SEND_FIRST = 0x00
_OP_SEND_MIDDLE = 0x01
_OP_ACK = 0x11
_OP_CNP = 0x81
_PFC_DST = bytes.fromhex("0180c2000001")
_LINKTYPE_ETHERNET = 1

PathLike = Union[str, "os.PathLike[str]"]


def mac(node: int) -> bytes:
    """The synthesised MAC of node ``node``: locally administered, the id in the low 24 bits."""
    return b"\x02\x00\x00" + (node & 0xFFFFFF).to_bytes(3, "big")


def ip(node: int) -> bytes:
    """The synthesised IPv4 address of node ``node``: 10.a.b.c with the id in a, b, c."""
    return b"\x0a" + (node & 0xFFFFFF).to_bytes(3, "big")


def _checksum(header: bytes) -> int:
    s = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def frame(row: Dict[str, Any], snaplen: int = DEFAULT_SNAPLEN) -> Tuple[bytes, int]:
    """The captured bytes (at most ``snaplen``) and original length of one packets.arrow row."""
    size = int(row["size"])
    kind = row["kind"]
    if kind == "pfc":
        cls = int(row["pfc_class"] or 0)
        quanta = [0] * 8
        if row["pfc_action"] == "pause":
            quanta[cls] = 0xFFFF
        body = struct.pack("!HH8H", 0x0101, 1 << cls, *quanta)
        data = _PFC_DST + mac(int(row["node"])) + struct.pack("!H", 0x8808) + body
        data = data.ljust(max(60, min(size, snaplen)), b"\x00")
        return data[:snaplen], max(size, len(data))
    flow = int(row["flow_id"])
    seq = int(row["seq"])
    qpn = (flow + QPN_BASE) & 0xFFFFFF
    if kind == "data":
        bth = struct.pack("!BBHB", _OP_SEND_FIRST if seq == 0 else _OP_SEND_MIDDLE, 0, 0xFFFF, 0)
        bth += qpn.to_bytes(3, "big") + struct.pack("!B", 0) + (seq & 0xFFFFFF).to_bytes(3, "big")
        extra = b""
    elif kind in ("ack", "nack", "pull"):
        # seq is the next packet the receiver expects: an ACK acknowledges the one before, a NAK
        # asks for it. RoCE has no credit pull (receiver-driven credits, docs/congestion-control.md):
        # it is written as an ACK for the packet it grants.
        psn = (seq if kind == "nack" else seq - 1) & 0xFFFFFF
        bth = struct.pack("!BBHB", _OP_ACK, 0, 0xFFFF, 0) + qpn.to_bytes(3, "big")
        bth += struct.pack("!B", 0) + psn.to_bytes(3, "big")
        syndrome = 0x60 if kind == "nack" else 0x1F
        extra = struct.pack("!B", syndrome) + (seq & 0xFFFFFF).to_bytes(3, "big")
    elif kind == "cnp":
        bth = struct.pack("!BBHB", _OP_CNP, 0, 0xFFFF, 0x40) + qpn.to_bytes(3, "big")
        bth += struct.pack("!B", 0) + (0).to_bytes(3, "big")
        extra = bytes(16)
    else:
        raise ValueError(f"packets.arrow row of unknown kind {kind!r}")
    src, dst = int(row["src"]), int(row["dst"])
    headers = 14 + 20 + 8 + len(bth) + len(extra)
    orig = max(size, headers + 4)  # + ICRC
    ip_len = orig - 14
    tos = ((int(row["prio"]) & 7) << 5) | (int(row["ecn"]) & 3)
    iph = struct.pack("!BBHHHBBH4s4s", 0x45, tos, ip_len, 0, 0x4000, 64, 17, 0, ip(src), ip(dst))
    iph = iph[:10] + struct.pack("!H", _checksum(iph)) + iph[12:]
    udp = struct.pack("!HHHH", 49152 + flow % 16384, ROCE_PORT, ip_len - 20, 0)
    eth = mac(dst) + mac(src) + struct.pack("!H", 0x0800)
    data = eth + iph + udp + bth + extra
    captured = min(orig, snaplen)
    data = data[:captured].ljust(captured, b"\x00")
    return data, orig


# -- pcapng blocks ------------------------------------------------------------------------------


def _block(kind: int, body: bytes) -> bytes:
    body = body + b"\x00" * (-len(body) % 4)
    n = 12 + len(body)
    return struct.pack("<II", kind, n) + body + struct.pack("<I", n)


def _option(code: int, value: bytes) -> bytes:
    return struct.pack("<HH", code, len(value)) + value + b"\x00" * (-len(value) % 4)


def _section_header() -> bytes:
    shb = struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1)
    shb += _option(4, b"fabricemu (simulated packets)") + _option(0, b"")
    return _block(0x0A0D0D0A, shb)


def _interface(name: str, description: str, snaplen: int) -> bytes:
    body = struct.pack("<HHI", _LINKTYPE_ETHERNET, 0, snaplen)
    body += _option(2, name.encode()) + _option(3, description.encode())
    body += _option(9, bytes([9])) + _option(0, b"")  # if_tsresol: 10^-9 s
    return _block(1, body)


def _packet(interface: int, time_ns: int, data: bytes, orig: int) -> bytes:
    body = struct.pack("<IIIII", interface, time_ns >> 32, time_ns & 0xFFFFFFFF, len(data), orig)
    return _block(6, body + data)


# -- names --------------------------------------------------------------------------------------


def _role_runs(schema: pa.Schema) -> List[Tuple[str, int, int]]:
    meta = schema.metadata or {}
    raw = meta.get(b"fabricemu.node_roles")
    return [tuple(r) for r in json.loads(raw)] if raw else []  # type: ignore[misc]


def node_name(runs: Sequence[Tuple[str, int, int]], node: int) -> str:
    """The name of node ``node`` as faults accept it (``"leaf:3"``), from packets.arrow's role runs."""
    seen: Dict[str, int] = {}
    for role, first, count in runs:
        if first <= node < first + count:
            return f"{role}:{seen.get(role, 0) + node - first}"
        seen[role] = seen.get(role, 0) + count
    return str(node)


def _node_id(runs: Sequence[Tuple[str, int, int]], name: str) -> int:
    name = name.strip()
    if name.isdigit():
        return int(name)
    m = re.fullmatch(r"\s*([^:]+?)\s*:\s*(\d+)\s*", name)
    if not m:
        raise ValueError(f'expected a node id or "role:index" like "leaf:3", found {name!r}')
    role, index = m.group(1), int(m.group(2))
    seen = 0
    for r, first, count in runs:
        if r != role:
            continue
        if index < seen + count:
            return first + index - seen
        seen += count
    if not seen:
        roles = ", ".join(dict.fromkeys(r for r, _, _ in runs))
        raise ValueError(f"no node has role {role!r}; this fabric's roles are {roles}")
    raise ValueError(f"{role}:{index} does not exist: there are {seen} ({role}:0..={seen - 1})")


def resolve_port(schema: pa.Schema, spec: str) -> Tuple[int, int]:
    """``"leaf:3/2"`` (or ``"15/2"``: a node id) as (node id, index among the node's ports)."""
    node, sep, index = spec.rpartition("/")
    if not sep or not index.strip().isdigit() or not node.strip():
        raise ValueError(f'--port {spec!r}: expected "node/index" like "leaf:3/2" or "15/0"')
    return _node_id(_role_runs(schema), node), int(index)


# -- the file -----------------------------------------------------------------------------------


def _packets_table(source: Any) -> pa.Table:
    if isinstance(source, pa.Table):
        return source
    table = getattr(source, "packets", None)
    if isinstance(table, pa.Table):
        return table
    from .results import open_result

    return open_result(source).packets


def write_pcap(
    source: Any,
    ports: Sequence[str],
    path: PathLike,
    *,
    snaplen: int = DEFAULT_SNAPLEN,
) -> int:
    """Write ``path`` (pcapng) with the packets that started their transmission on each of
    ``ports`` (``"leaf:3/2"``: the third port of node leaf:3; ``"15/0"``: node 15's first port),
    one interface per port, in time order. ``source`` is a run's output folder, a
    :class:`fabricemu.Result` or its ``packets`` table (the run must have traced the ports:
    ``[trace] packets``). ``snaplen``: bytes captured per packet (0: whole packets). Returns the
    number of packets written. Raises ``ValueError`` for a port that does not parse or resolve, or
    that the trace has no row of."""
    if snaplen != 0 and snaplen < 60:
        raise ValueError(f"snaplen must be 0 (whole packets) or at least 60 bytes, not {snaplen}")
    if not ports:
        raise ValueError("no port chosen: name at least one, like leaf:3/2")
    table = _packets_table(source)
    runs = _role_runs(table.schema)
    chosen: List[Tuple[int, int]] = []
    for spec in ports:
        key = resolve_port(table.schema, spec)
        if key not in chosen:
            chosen.append(key)
    dequeued = table.filter(pc.equal(table["event"], "dequeue"))
    parts = []
    for i, (node, index) in enumerate(chosen):
        here = pc.and_(pc.equal(dequeued["node"], node), pc.equal(dequeued["port_index"], index))
        rows = dequeued.filter(here)
        at_port = table.filter(pc.and_(pc.equal(table["node"], node), pc.equal(table["port_index"], index)))
        if at_port.num_rows == 0:
            raise ValueError(
                f"{ports[i]}: the packet trace has no row at {node_name(runs, node)} port {index} "
                "(not traced there: see [trace] packets' nodes/ports filters, or no traffic)"
            )
        parts.append(rows.append_column("interface", pa.array([i] * rows.num_rows, pa.uint32())))
    merged = pa.concat_tables(parts) if parts else dequeued.slice(0, 0)
    if merged.num_rows:
        merged = merged.sort_by([("time_ps", "ascending"), ("interface", "ascending")])
    tmp = Path(f"{os.fspath(path)}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            _write(f, merged, chosen, runs, snaplen)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return merged.num_rows


def _write(
    f: BinaryIO,
    rows: pa.Table,
    chosen: Sequence[Tuple[int, int]],
    runs: Sequence[Tuple[str, int, int]],
    snaplen: int,
) -> None:
    f.write(_section_header())
    for node, index in chosen:
        name = f"{node_name(runs, node)}/{index}"
        f.write(_interface(name, f"fabricemu node {node} port {index}", snaplen))
    limit = snaplen or (1 << 31)
    for batch in rows.to_batches(max_chunksize=65536):
        for row in batch.to_pylist():
            data, orig = frame(row, limit)
            f.write(_packet(int(row["interface"]), int(row["time_ps"]) // 1000, data, orig))
