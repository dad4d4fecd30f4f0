"""packets.arrow, latency.arrow and `fabricemu pcap`: the trace from a scenario and the Python API,
the pcapng file read back by real readers (dpkt, scapy; tshark when installed) with its headers,
timestamps and ECN bits checked against the trace."""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any, Dict, List

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import fabricemu
from fabricemu.pcap import QPN_BASE, ROCE_PORT, ip, mac, write_pcap

# Eight senders into host 0 over small lossy buffers with ECN (marks and drops), and PFC off.
INCAST = """\
name = "pcap-incast"
seed = 5
[topology]
kind = "leaf_spine"
leaves = 3
spines = 2
hosts_per_leaf = 4
link_rate = "100Gbps"
link_delay = "1us"
[switch]
port_buffer = "40KB"
ecn = { kmin = "5KB", kmax = "30KB", pmax = 0.5 }
[transport]
mtu = "1000B"
cc = "dcqcn"
[trace]
packets = { nodes = ["leaf:0", "host:0"] }
latency = true
[[workload]]
kind = "incast"
name = "incast"
receiver = 0
senders = 8
size = "60KB"
"""

# Lossless: PFC frames on the wire.
PFC = """\
name = "pcap-pfc"
seed = 1
[topology]
kind = "leaf_spine"
leaves = 2
spines = 1
hosts_per_leaf = 4
link_rate = "40Gbps"
link_delay = "1us"
[switch]
buffer = "400KB"
pfc = { enabled = true }
[transport]
cc = "none"
mtu = "1000B"
[trace]
packets = {}
[[workload]]
kind = "incast"
receiver = 0
senders = [1, 2, 3, 4, 5, 6, 7]
size = "400KB"
"""


@pytest.fixture(scope="module")
def incast(tmp_path_factory: pytest.TempPathFactory) -> Any:
    out = tmp_path_factory.mktemp("pcap") / "incast"
    return fabricemu.run(fabricemu.Scenario.from_toml(INCAST), out)


def _rows_at(packets: pa.Table, node: int, index: int) -> List[Dict[str, Any]]:
    t = packets.filter(
        pc.and_(
            pc.and_(pc.equal(packets["event"], "dequeue"), pc.equal(packets["node"], node)),
            pc.equal(packets["port_index"], index),
        )
    )
    return t.to_pylist()


def test_packets_and_latency_tables_from_the_python_api(incast: Any) -> None:
    p = incast.packets
    assert p.num_rows > 0
    assert set(p.column("node").to_pylist()) <= {0, 12}  # host:0 and leaf:0
    events = set(p.column("event").to_pylist())
    assert {"enqueue", "dequeue", "ecn_mark"} <= events
    kinds = set(p.column("kind").to_pylist())
    assert {"data", "ack"} <= kinds
    s = incast.summary()
    assert s["packet_trace_truncated"] is False
    assert s["one_way_p50_us"] > 0 and s["one_way_p99_us"] >= s["one_way_p50_us"]
    assert s["one_way_jitter_us"] == pytest.approx(s["one_way_p99_us"] - s["one_way_p50_us"])
    lat = incast.latency
    assert lat.column_names == [
        "workload",
        "workload_index",
        "size_min_bytes",
        "size_max_bytes",
        "lower_ps",
        "upper_ps",
        "count",
    ]
    # 60 KB flows: all in the [10 KB, 100 KB) flow-size bucket.
    assert set(lat.column("size_min_bytes").to_pylist()) == {10_000}
    assert incast.run_info["latency"]["sizes"][0]["packets"] == incast.run_info["latency"]["packets"]
    assert sum(lat.column("count").to_pylist()) == incast.run_info["latency"]["packets"]
    assert set(lat.column("workload").to_pylist()) == {"incast"}
    assert "latency" in incast.tables() and "packets" in incast.tables()


def test_pcap_opens_with_dpkt_and_matches_the_trace(incast: Any, tmp_path: Path) -> None:
    dpkt = pytest.importorskip("dpkt")
    path = tmp_path / "leaf0.pcapng"
    # leaf:0's port 0 goes down to host 0: the incast's data arrives there.
    n = write_pcap(incast, ["leaf:0/0"], path)
    rows = _rows_at(incast.packets, 12, 0)
    assert n == len(rows) > 0
    with open(path, "rb") as f:
        reader = dpkt.pcapng.Reader(f)
        got = list(reader)
    assert len(got) == n
    marked = 0
    for (ts, buf), row in zip(got, rows):
        # ns resolution: the timestamp is the row's time, in seconds.
        assert round(ts * 1e9) == row["time_ps"] // 1000
        eth = dpkt.ethernet.Ethernet(buf)
        assert eth.src == mac(row["src"]) and eth.dst == mac(row["dst"])
        ip4 = eth.data
        assert isinstance(ip4, dpkt.ip.IP)
        assert ip4.src == ip(row["src"]) and ip4.dst == ip(row["dst"])
        assert ip4.tos & 3 == row["ecn"]
        headers = 14 + 20 + 8 + 12 + 4 + (4 if row["kind"] in ("ack", "nack") else 0)
        assert ip4.len == max(row["size"], headers) - 14
        udp = ip4.data
        assert udp.dport == ROCE_PORT
        bth = bytes(udp.data)[:12]
        opcode, _, _, _, qpn_hi, qpn_lo, _, psn_hi, psn_lo = struct.unpack("!BBHBBHBBH", bth)
        assert (qpn_hi << 16 | qpn_lo) == row["flow_id"] + QPN_BASE
        psn = psn_hi << 16 | psn_lo
        if row["kind"] == "data":
            assert opcode in (0x00, 0x01) and psn == row["seq"]
        elif row["kind"] == "ack":
            assert opcode == 0x11 and psn == row["seq"] - 1
        marked += row["ecn"] == 3
    assert marked > 0, "the incast's packets are CE-marked on the way to host 0"


def test_pcap_with_scapy_decodes_roce_and_two_interfaces(incast: Any, tmp_path: Path) -> None:
    pytest.importorskip("scapy")
    from scapy.all import IP, UDP, PcapNgReader  # type: ignore[attr-defined]

    path = tmp_path / "two.pcapng"
    n = write_pcap(incast.out, ["leaf:0/0", "host:0/0"], path)
    rows = _rows_at(incast.packets, 12, 0) + _rows_at(incast.packets, 0, 0)
    assert n == len(rows)
    with PcapNgReader(str(path)) as r:
        pkts = list(r)
    assert len(pkts) == n
    times = [int(p.time * 10**9) for p in pkts]
    assert times == sorted(times)
    assert sorted(times) == sorted(row["time_ps"] // 1000 for row in rows)
    for p in pkts:
        assert p[UDP].dport == ROCE_PORT
        assert p[IP].tos & 3 in (0, 2, 3)
    # The host's port sends the ACKs and CNPs back: both directions are in the file.
    assert {p[IP].src for p in pkts} >= {"10.0.0.0"}


def test_pcap_of_pfc_frames(tmp_path: Path) -> None:
    dpkt = pytest.importorskip("dpkt")
    r = fabricemu.run(fabricemu.Scenario.from_toml(PFC), tmp_path / "pfc")
    p = r.packets
    pfc = p.filter(pc.and_(pc.equal(p["kind"], "pfc"), pc.equal(p["event"], "dequeue"))).to_pylist()
    assert pfc, "the incast pauses"
    first = pfc[0]
    port = f"{first['node']}/{first['port_index']}"
    path = tmp_path / "pfc.pcapng"
    write_pcap(r, [port], path)
    with open(path, "rb") as f:
        frames = [bytes(buf) for _, buf in dpkt.pcapng.Reader(f)]
    control = [b for b in frames if b[12:14] == b"\x88\x08"]
    want = [x for x in pfc if (x["node"], x["port_index"]) == (first["node"], first["port_index"])]
    assert len(control) == len(want)
    for b, row in zip(control, want):
        opcode, enable = struct.unpack("!HH", b[14:18])
        quanta = struct.unpack("!8H", b[18:34])
        assert opcode == 0x0101 and enable == 1 << row["pfc_class"]
        assert quanta[row["pfc_class"]] == (0xFFFF if row["pfc_action"] == "pause" else 0)
        assert b[:6] == bytes.fromhex("0180c2000001")


def _int(text: str) -> int:
    """A tshark field: decimal, or hexadecimal with 0x."""
    return int(text, 16) if text.lower().startswith("0x") else int(text)


def test_tshark_reads_the_pcap(incast: Any, tmp_path: Path) -> None:
    tshark = shutil.which("tshark")
    if tshark is None:
        pytest.skip("tshark is not installed")
    path = tmp_path / "t.pcapng"
    write_pcap(incast, ["leaf:0/0"], path)
    rows = _rows_at(incast.packets, 12, 0)
    proc = subprocess.run(
        [
            tshark,
            "-r",
            str(path),
            "-T",
            "fields",
            "-e",
            "frame.time_epoch",
            "-e",
            "ip.dsfield.ecn",
            "-e",
            "udp.dstport",
            "-e",
            "infiniband.bth.psn",
            "-e",
            "infiniband.bth.destqp",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    lines = [line.split("\t") for line in proc.stdout.splitlines()]
    assert len(lines) == len(rows)
    for fields, row in zip(lines, rows):
        secs, frac = fields[0].split(".")
        assert int(secs) * 10**9 + int(frac.ljust(9, "0")[:9]) == row["time_ps"] // 1000
        assert _int(fields[1]) == row["ecn"]
        assert _int(fields[2]) == ROCE_PORT
        if row["kind"] == "data":
            assert _int(fields[3]) == row["seq"]
            assert _int(fields[4]) == row["flow_id"] + QPN_BASE
    # Whole packets: Wireshark's RoCE dissector finds nothing malformed.
    write_pcap(incast, ["leaf:0/0"], tmp_path / "full.pcapng", snaplen=0)
    cmd = [tshark, "-r", str(tmp_path / "full.pcapng")]
    full = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert full.returncode == 0 and len(full.stdout.splitlines()) == len(rows)
    assert "Malformed" not in full.stdout and "RC Send" in full.stdout


def test_pcap_cli(fabricemu_exe: str, incast: Any, tmp_path: Path) -> None:
    out = tmp_path / "cli.pcapng"
    proc = subprocess.run(
        [fabricemu_exe, "pcap", str(incast.out), "--port", "leaf:0/0", "-o", str(out), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["packets"] == len(_rows_at(incast.packets, 12, 0))
    assert out.read_bytes()[:4] == b"\x0a\x0d\x0d\x0a"
    # A port the trace does not hold, a bad name, a run without the trace: one-line errors.
    for port, words in [
        ("spine:0/0", "no row at spine:0 port 0"),
        ("leaf:9/0", "leaf:9 does not exist"),
        ("leaf:0", "node/index"),
    ]:
        bad = subprocess.run(
            [fabricemu_exe, "pcap", str(incast.out), "--port", port, "-o", str(tmp_path / "x.pcapng")],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert bad.returncode == 2 and words in bad.stderr, bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr
        assert not (tmp_path / "x.pcapng").exists()


def test_pcap_help_has_examples(fabricemu_exe: str) -> None:
    cmd = [fabricemu_exe, "pcap", "--help"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0 and "Example" in proc.stdout and "fabricemu pcap " in proc.stdout


def test_cli_trace_shorthands(fabricemu_exe: str, tmp_path: Path) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text(INCAST.replace('packets = { nodes = ["leaf:0", "host:0"] }\nlatency = true\n', ""))
    out = tmp_path / "o"
    proc = subprocess.run(
        [fabricemu_exe, "run", str(scenario), "-o", str(out), "--trace", "packets,latency", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    r = fabricemu.open(out)
    assert r.packets.num_rows == r.run_info["packet_trace_rows"] > 0
    # The normalised scenario: the shorthand's defaults written out.
    assert r.run_info["scenario"]["trace"]["packets"] == {"start": "0ps", "max_rows": 1_000_000}
    assert r.latency.num_rows > 0
    cmd = [fabricemu_exe, "show", str(out)]
    shown = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert shown.returncode == 0 and "one-way   p50" in shown.stdout and "jitter (p99 - p50)" in shown.stdout


def test_packet_trace_errors_name_their_key() -> None:
    bad = INCAST.replace('nodes = ["leaf:0", "host:0"]', 'nodes = ["leaf:7"]')
    with pytest.raises(fabricemu.ScenarioError) as e:
        fabricemu.run(fabricemu.Scenario.from_toml(bad, "bad.toml"))
    assert "trace.packets.nodes.0" in str(e.value) and "leaf:7 does not exist" in str(e.value)


def test_missing_tables_say_how_to_turn_them_on(tmp_path: Path) -> None:
    plain = INCAST.replace('packets = { nodes = ["leaf:0", "host:0"] }\nlatency = true\n', "")
    r = fabricemu.run(fabricemu.Scenario.from_toml(plain), tmp_path / "plain")
    with pytest.raises(fabricemu.MissingTableError, match=re.escape("packets = {}")):
        _ = r.packets
    with pytest.raises(fabricemu.MissingTableError, match="latency = true"):
        _ = r.latency
    assert "one_way_p50_us" not in r.summary() and "packet_trace_truncated" not in r.summary()


def test_an_interrupted_run_leaves_a_readable_packet_trace(tmp_path: Path) -> None:
    calls = []

    def progress(*args: Any) -> None:
        calls.append(args)
        if len(calls) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        s = fabricemu.Scenario.from_toml(INCAST)
        fabricemu.run(s, tmp_path / "cut", progress=progress, slice_events=300)
    partial = fabricemu.open(tmp_path / "cut")
    assert partial.interrupted
    p = partial.packets
    assert 0 < p.num_rows == partial.run_info["packet_trace_rows"]
    assert max(p.column("time_ps").to_pylist()) <= partial.run_info["simulated_ps"]
    assert partial.latency.num_rows > 0
