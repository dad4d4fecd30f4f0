"""fabricemu.analysis: each function against a hand computation, on small hand-made tables (exact
expected numbers) and on the tables of a real traced run (plain-Python reference computations over
the same rows)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import fabricemu
from fabricemu import MissingTableError, analysis

from conftest import TRACED

# A fat tree with ECN, PFC and DCQCN, every trace on: an 8-to-1 incast that pauses and marks.


@pytest.fixture(scope="module")
def untraced(tmp_path_factory: pytest.TempPathFactory) -> fabricemu.Result:
    out = tmp_path_factory.mktemp("untraced") / "run"
    s = fabricemu.Scenario.from_toml(TRACED).with_({"trace": None, "switch": None, "transport": None})
    return fabricemu.run(s, out=out)


# -- plain-Python references -----------------------------------------------------------------------


def pct(values: Sequence[float], q: float) -> Optional[float]:
    """Linear-interpolation percentile, by hand."""
    v = sorted(values)
    if not v:
        return None
    pos = q * (len(v) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def mean(values: Sequence[float]) -> Optional[float]:
    return sum(values) / len(values) if values else None


def jain(values: Sequence[float]) -> Optional[float]:
    if not values or sum(x * x for x in values) == 0:
        return None
    return sum(values) ** 2 / (len(values) * sum(x * x for x in values))


def approx(x: Any) -> Any:
    return pytest.approx(x, rel=1e-12, abs=1e-12)


def assert_values(got: Sequence[Optional[float]], expected: Sequence[Optional[float]]) -> None:
    """Equal lengths; None where expected is None, else equal to 12 digits."""
    assert len(got) == len(expected), (got, expected)
    for g, e in zip(got, expected):
        assert (g is None) if e is None else (g == approx(e)), (got, expected)


def flows_table(rows: List[Dict[str, Any]], **extra: List[Any]) -> pa.Table:
    cols: Dict[str, Any] = {
        "flow_id": pa.array([r["id"] for r in rows], pa.uint64()),
        "src": pa.array([r["src"] for r in rows], pa.uint32()),
        "dst": pa.array([r["dst"] for r in rows], pa.uint32()),
        "size_bytes": pa.array([r["size"] for r in rows], pa.uint64()),
        "start_ps": pa.array([r["start"] for r in rows], pa.uint64()),
        "finish_ps": pa.array([r.get("finish") for r in rows], pa.uint64()),
        "fct_ps": pa.array(
            [None if r.get("finish") is None else r["finish"] - r["start"] for r in rows], pa.uint64()
        ),
        "ideal_fct_ps": pa.array([r["ideal"] for r in rows], pa.uint64()),
        "slowdown": pa.array(
            [None if r.get("finish") is None else (r["finish"] - r["start"]) / r["ideal"] for r in rows],
            pa.float64(),
        ),
        "workload": pa.array([r["workload"] for r in rows], pa.string()),
        "packets_sent": pa.array([r.get("packets", 10) for r in rows], pa.uint64()),
        "retransmits": pa.array([r.get("retx", 0) for r in rows], pa.uint64()),
        "drops": pa.array([r.get("drops", 0) for r in rows], pa.uint64()),
    }
    for name, values in extra.items():
        cols[name] = pa.array(values, pa.uint64())
    return pa.table(cols)


# Ten flows of sizes 1 kB .. 5 MB; flows 2 and 8 unfinished.
FLOWS = [
    {
        "id": 0,
        "src": 1,
        "dst": 0,
        "size": 1000,
        "start": 0,
        "finish": 2_000_000,
        "ideal": 1_000_000,
        "workload": "a",
    },
    {
        "id": 1,
        "src": 2,
        "dst": 0,
        "size": 1000,
        "start": 0,
        "finish": 3_000_000,
        "ideal": 1_000_000,
        "workload": "a",
    },
    {"id": 2, "src": 3, "dst": 0, "size": 5000, "start": 100, "ideal": 1_000_000, "workload": "a"},
    {
        "id": 3,
        "src": 1,
        "dst": 2,
        "size": 20000,
        "start": 0,
        "finish": 4_000_000,
        "ideal": 2_000_000,
        "workload": "b",
    },
    {
        "id": 4,
        "src": 2,
        "dst": 3,
        "size": 20000,
        "start": 500,
        "finish": 10_500,
        "ideal": 1_000,
        "workload": "b",
    },
    {
        "id": 5,
        "src": 3,
        "dst": 1,
        "size": 20000,
        "start": 0,
        "finish": 2_000_000,
        "ideal": 2_000_000,
        "workload": "b",
    },
    {
        "id": 6,
        "src": 0,
        "dst": 1,
        "size": 150000,
        "start": 0,
        "finish": 30_000_000,
        "ideal": 12_000_000,
        "workload": "b",
    },
    {
        "id": 7,
        "src": 0,
        "dst": 2,
        "size": 800000,
        "start": 1_000_000,
        "finish": 81_000_000,
        "ideal": 64_000_000,
        "workload": "a",
    },
    {"id": 8, "src": 0, "dst": 3, "size": 2000000, "start": 0, "ideal": 160_000_000, "workload": "a"},
    {
        "id": 9,
        "src": 1,
        "dst": 3,
        "size": 5000000,
        "start": 0,
        "finish": 900_000_000,
        "ideal": 400_000_000,
        "workload": "b",
    },
]


def slowdowns(rows: List[Dict[str, Any]]) -> List[float]:
    return [(r["finish"] - r["start"]) / r["ideal"] for r in rows if r.get("finish") is not None]


# -- flows ------------------------------------------------------------------------------------------


def test_slowdown_by_size_fixed_edges():
    t = analysis.slowdown_by_size(flows_table(FLOWS), edges=["10KB", 1_000_000])
    assert t.column("label").to_pylist() == ["< 10 kB", "10 kB-1 MB", ">= 1 MB"]
    assert t.column("lower").to_pylist() == [0, 10_000, 1_000_000]
    assert t.column("upper").to_pylist() == [10_000, 1_000_000, None]
    members = [FLOWS[0:3], FLOWS[3:8], FLOWS[8:10]]
    assert t.column("flows").to_pylist() == [3, 5, 2]
    assert t.column("finished").to_pylist() == [2, 5, 1]
    assert t.column("size_min").to_pylist() == [1000, 20000, 2000000]
    assert t.column("size_max").to_pylist() == [5000, 800000, 5000000]
    for i, rows in enumerate(members):
        s = slowdowns(rows)
        assert t.column("slowdown_mean")[i].as_py() == approx(mean(s))
        for q in (0.5, 0.95, 0.99):
            assert t.column(f"slowdown_p{round(q * 100)}")[i].as_py() == approx(pct(s, q)), (i, q)


def test_slowdown_by_size_keeps_empty_buckets_and_custom_percentiles():
    t = analysis.slowdown_by_size(flows_table(FLOWS), edges=[100, 500], percentiles=[0.9, 0.999])
    assert t.column("flows").to_pylist() == [0, 0, 10]
    assert t.column("slowdown_p90").to_pylist()[:2] == [None, None]
    assert t.column("slowdown_p90")[2].as_py() == approx(pct(slowdowns(FLOWS), 0.9))
    assert t.column("slowdown_p99.9")[2].as_py() == approx(pct(slowdowns(FLOWS), 0.999))


def test_slowdown_by_size_equal_count():
    t = analysis.slowdown_by_size(flows_table(FLOWS), buckets=3)
    # Sizes sorted: 1000 1000 5000 | 20000 20000 20000 | 150000 800000 2e6 5e6 (cuts at 3 and 6).
    assert t.column("flows").to_pylist() == [3, 3, 4]
    assert t.column("lower").to_pylist() == [1000, 20000, 150000]
    assert t.column("upper").to_pylist() == [5001, 20001, 5000001]
    assert t.column("label").to_pylist() == ["1 kB-5 kB", "20 kB", "150 kB-5 MB"]
    by_size = sorted(FLOWS, key=lambda r: r["size"])
    for i, rows in enumerate([by_size[0:3], by_size[3:6], by_size[6:10]]):
        assert t.column("slowdown_p50")[i].as_py() == approx(pct(slowdowns(rows), 0.5))
    assert t.schema.metadata[b"fabricemu.buckets"] == b"equal_count"


def test_equal_count_buckets_never_split_a_size():
    rows = [dict(FLOWS[0], id=i, size=s) for i, s in enumerate([1, 1, 2, 2, 2, 2, 3, 3])]
    t = analysis.slowdown_by_size(flows_table(rows), buckets=2)
    # The cut for 4|4 falls inside the 2s: the changes of size at 2 and 6 are as near; the later wins.
    assert t.column("flows").to_pylist() == [6, 2]
    one = analysis.slowdown_by_size(flows_table([dict(FLOWS[0], id=i) for i in range(5)]), buckets=10)
    assert one.column("flows").to_pylist() == [5]


def test_slowdown_by_size_one_workload():
    t = analysis.slowdown_by_size(flows_table(FLOWS), edges=["10KB"], workload="b")
    assert t.column("flows").to_pylist() == [0, 5]


def test_fct_percentiles_by_workload():
    t = analysis.fct_percentiles(flows_table(FLOWS), by="workload")
    assert t.column("workload").to_pylist() == ["a", "b"]
    for i, w in enumerate(["a", "b"]):
        rows = [r for r in FLOWS if r["workload"] == w]
        fct = [(r["finish"] - r["start"]) / 1e6 for r in rows if r.get("finish") is not None]
        assert t.column("flows")[i].as_py() == len(rows)
        assert t.column("finished")[i].as_py() == len(fct)
        assert t.column("fct_mean_us")[i].as_py() == approx(mean(fct))
        assert t.column("fct_p99_us")[i].as_py() == approx(pct(fct, 0.99))
        assert t.column("slowdown_p50")[i].as_py() == approx(pct(slowdowns(rows), 0.5))
    overall = analysis.fct_percentiles(flows_table(FLOWS))
    assert overall.num_rows == 1
    assert overall.column("slowdown_p95")[0].as_py() == approx(pct(slowdowns(FLOWS), 0.95))


def test_goodput_per_flow_and_host():
    per_flow = analysis.goodput_per_flow(flows_table(FLOWS))
    expected = [
        None if r.get("finish") is None else r["size"] * 8 / ((r["finish"] - r["start"]) * 1e-12) / 1e9
        for r in FLOWS
    ]
    got = per_flow.column("goodput_gbps").to_pylist()
    assert got[0] == approx(4.0)  # 1000 B in 2 us = 4 Gbps
    assert_values(got, expected)
    per_host = analysis.goodput_per_host(flows_table(FLOWS), role="dst")
    assert per_host.column("host").to_pylist() == [0, 1, 2, 3]
    for row in per_host.to_pylist():
        mine = [r for r in FLOWS if r["dst"] == row["host"]]
        done = [r for r in mine if r.get("finish") is not None]
        assert row["flows"] == len(mine)
        assert row["finished"] == len(done)
        total = sum(r["size"] for r in done)
        assert row["bytes"] == total
        span = max(r["finish"] for r in done) - min(r["start"] for r in done)
        assert row["goodput_gbps"] == approx(total * 8 / (span * 1e-12) / 1e9)
    senders = analysis.goodput_per_host(flows_table(FLOWS), role="src")
    assert senders.column("flows").to_pylist() == [3, 3, 2, 2]
    with pytest.raises(ValueError, match="role"):
        analysis.goodput_per_host(flows_table(FLOWS), role="both")


def test_reordering():
    ooo = [0, 0, 3, 0, 1, 0, 0, 7, 0, 2]
    dist = [0, 0, 2, 0, 1, 0, 0, 9, 0, 4]
    t = analysis.reordering(
        flows_table(FLOWS, out_of_order_packets=ooo, max_reorder_distance=dist), by="workload"
    )
    for row in t.to_pylist():
        idx = [i for i, r in enumerate(FLOWS) if r["workload"] == row["workload"]]
        reordered = [i for i in idx if ooo[i] > 0]
        assert row["flows"] == len(idx)
        assert row["reordered_flows"] == len(reordered)
        assert row["out_of_order_packets"] == sum(ooo[i] for i in idx)
        assert row["out_of_order_fraction"] == approx(sum(ooo[i] for i in idx) / (10 * len(idx)))
        assert row["max_reorder_distance"] == max(dist[i] for i in idx)
        assert row["reorder_distance_p99"] == approx(pct([dist[i] for i in reordered], 0.99))
    with pytest.raises(MissingTableError, match="out_of_order_packets") as e:
        analysis.reordering(flows_table(FLOWS))
    assert e.value.column == "out_of_order_packets"


# -- links, queues, PFC, rates (hand-made tables) ----------------------------------------------------


def links_table() -> pa.Table:
    rows = [
        # time, link, src, dst, tier, tx, util, paused
        (10, 0, 0, 4, "host", 100, 0.1, 0),
        (20, 0, 0, 4, "host", 500, 0.5, 3),
        (30, 0, 0, 4, "host", 900, 0.9, 0),
        (10, 1, 4, 6, "fabric", 0, 0.0, 5),
        (20, 1, 4, 6, "fabric", 1000, 1.0, 0),
        (30, 1, 4, 6, "fabric", 200, 0.2, 0),
        (10, 2, 1, 4, "host", 300, 0.3, 7),
        (20, 2, 1, 4, "host", 300, 0.3, 0),
        (30, 2, 1, 4, "host", 600, 0.6, 1),
    ]
    names = ["time_ps", "link", "src", "dst", "tier", "tx_bytes", "utilisation", "paused_ps"]
    types = [
        pa.uint64(),
        pa.uint32(),
        pa.uint32(),
        pa.uint32(),
        pa.string(),
        pa.uint64(),
        pa.float64(),
        pa.uint64(),
    ]
    return pa.table({n: pa.array([r[i] for r in rows], t) for i, (n, t) in enumerate(zip(names, types))})


def test_link_utilisation_per_link_tier_and_overall():
    links = links_table()
    rows = links.to_pylist()
    per_link = analysis.link_utilisation(links)
    assert per_link.column("link").to_pylist() == [0, 1, 2]
    assert per_link.column("tier").to_pylist() == ["host", "fabric", "host"]
    for r in per_link.to_pylist():
        mine = [x for x in rows if x["link"] == r["link"]]
        u = [x["utilisation"] for x in mine]
        assert r["samples"] == 3
        assert r["tx_bytes"] == sum(x["tx_bytes"] for x in mine)
        assert r["utilisation_mean"] == approx(mean(u))
        assert r["utilisation_p50"] == approx(pct(u, 0.5))
        assert r["utilisation_p95"] == approx(pct(u, 0.95))
        assert r["utilisation_max"] == max(u)
        assert r["paused_ps"] == sum(x["paused_ps"] for x in mine)
    per_tier = analysis.link_utilisation(links, by="tier")
    assert per_tier.column("tier").to_pylist() == ["fabric", "host"]
    host = per_tier.to_pylist()[1]
    u = [x["utilisation"] for x in rows if x["tier"] == "host"]
    assert (host["links"], host["samples"]) == (2, 6)
    assert host["utilisation_p99"] == approx(pct(u, 0.99))
    overall = analysis.link_utilisation(links, by=None, tier="host")
    assert overall.num_rows == 1
    assert overall.column("utilisation_mean")[0].as_py() == approx(mean(u))


def queues_table() -> pa.Table:
    # Queue (5, 10, 3) sampled at every instant, queue (5, 11, 3) only at 2 and 4 (empty otherwise);
    # nothing at all at instant 5.
    rows = [
        (1, 5, 10, 3, 100, 1, 150),
        (2, 5, 10, 3, 300, 2, 400),
        (3, 5, 10, 3, 300, 2, 300),
        (4, 5, 10, 3, 0, 0, 50),
        (2, 5, 11, 3, 1000, 5, 1200),
        (4, 5, 11, 3, 200, 1, 1000),
    ]
    names = ["time_ps", "switch", "port", "priority", "bytes", "packets", "max_bytes"]
    types = [pa.uint64(), pa.uint32(), pa.uint32(), pa.uint8(), pa.uint64(), pa.uint32(), pa.uint64()]
    return pa.table({n: pa.array([r[i] for r in rows], t) for i, (n, t) in enumerate(zip(names, types))})


def test_queue_cdf_fills_in_empty_samples():
    t = analysis.queue_cdf(queues_table())
    # Four instants in the table: queue 11 counts 0 at instants 1 and 3.
    samples = [100, 300, 300, 0, 1000, 200, 0, 0]
    values = sorted(set(samples))
    assert t.column("bytes").to_pylist() == values
    assert t.column("samples").to_pylist() == [samples.count(v) for v in values]
    assert t.column("cdf").to_pylist() == approx([sum(s <= v for s in samples) / 8 for v in values])
    raw = analysis.queue_cdf(queues_table(), fill_empty=False)
    assert raw.column("samples").to_pylist() == [1, 1, 1, 2, 1]
    per_port = analysis.queue_cdf(queues_table(), by="port", port=11)
    assert per_port.column("port").to_pylist() == [11, 11, 11]
    assert per_port.column("bytes").to_pylist() == [0, 200, 1000]
    assert per_port.column("cdf").to_pylist() == approx([0.5, 0.75, 1.0])
    peaks = analysis.queue_cdf(queues_table(), column="max_bytes", port=10)
    assert peaks.column("bytes").to_pylist() == [50, 150, 300, 400]


def test_queue_timeseries_and_stats():
    ts = analysis.queue_timeseries(queues_table(), switch=5, port=11)
    assert ts.column("time_ps").to_pylist() == [1, 2, 3, 4]
    assert ts.column("bytes").to_pylist() == [0, 1000, 0, 200]
    assert ts.column("packets").to_pylist() == [0, 5, 0, 1]
    assert ts.column("max_bytes").to_pylist() == [0, 1200, 0, 1000]
    raw = analysis.queue_timeseries(queues_table(), port=11, fill_empty=False)
    assert raw.column("time_ps").to_pylist() == [2, 4]
    everything = analysis.queue_timeseries(queues_table())
    assert everything.num_rows == 8
    stats = analysis.queue_stats(queues_table())
    q10, q11 = stats.to_pylist()
    assert q10["mean_bytes"] == approx(700 / 4)
    assert q10["max_bytes"] == 400  # the largest max_bytes of the intervals
    assert q10["nonempty_fraction"] == approx(0.75)
    assert q11["mean_bytes"] == approx(1200 / 4)
    assert q11["p50_bytes"] == approx(pct([0, 0, 1000, 200], 0.5))
    assert q11["p99_bytes"] == approx(pct([0, 0, 1000, 200], 0.99))
    busiest = analysis.busiest_ports(queues_table(), n=1)
    assert busiest.column("port").to_pylist() == [11]
    assert analysis.busiest_ports(queues_table(), n=5, by="nonempty_fraction").column("port").to_pylist() == [
        10,
        11,
    ]
    with pytest.raises(ValueError, match="by is one of"):
        analysis.busiest_ports(queues_table(), by="port")


def pfc_table(rows: List[tuple]) -> pa.Table:  # type: ignore[type-arg]
    names = ["time_ps", "switch", "port", "upstream", "paused_port", "priority", "action"]
    types = [pa.uint64(), pa.uint32(), pa.uint32(), pa.uint32(), pa.uint32(), pa.uint8(), pa.string()]
    return pa.table({n: pa.array([r[i] for r in rows], t) for i, (n, t) in enumerate(zip(names, types))})


PFC_ROWS = [
    (10, 7, 1, 3, 30, 3, "pause"),
    (15, 7, 1, 3, 30, 3, "pause"),  # a refresh while paused
    (30, 7, 1, 3, 30, 3, "resume"),
    (35, 7, 1, 3, 30, 3, "resume"),  # a resume while not paused
    (50, 7, 1, 3, 30, 3, "pause"),  # never resumed
    (20, 8, 2, 4, 40, 3, "pause"),
    (25, 8, 2, 4, 40, 3, "resume"),
]


def test_pfc_intervals_and_pause_time():
    intervals = analysis.pfc_intervals(pfc_table(PFC_ROWS), end_ps=100)
    assert intervals.select(
        ["switch", "port", "start_ps", "end_ps", "duration_ps", "resumed"]
    ).to_pylist() == [
        {"switch": 7, "port": 1, "start_ps": 10, "end_ps": 30, "duration_ps": 20, "resumed": True},
        {"switch": 7, "port": 1, "start_ps": 50, "end_ps": 100, "duration_ps": 50, "resumed": False},
        {"switch": 8, "port": 2, "start_ps": 20, "end_ps": 25, "duration_ps": 5, "resumed": True},
    ]
    assert intervals.column("paused_port").to_pylist() == [30, 30, 40]
    per_port = analysis.pause_time(pfc_table(PFC_ROWS), end_ps="100ps").to_pylist()
    assert [(r["switch"], r["pauses"], r["resumes"], r["intervals"], r["paused_ps"]) for r in per_port] == [
        (7, 3, 2, 2, 70),
        (8, 1, 1, 1, 5),
    ]
    assert per_port[0]["paused_fraction"] == approx(0.7)
    assert per_port[0]["upstream"] == 3
    # Without an end: the last row's time.
    assert analysis.pfc_intervals(pfc_table(PFC_ROWS)).column("end_ps").to_pylist()[1] == 50
    with pytest.raises(ValueError, match="action"):
        analysis.pfc_intervals(pfc_table([(1, 1, 1, 1, 1, 3, "xoff")]))


def test_jain_index():
    assert analysis.jain_index([5, 5, 5, 5]) == approx(1.0)
    assert analysis.jain_index([1, 0, 0, 0]) == approx(0.25)
    assert analysis.jain_index([1, 2, 3]) == approx(36 / (3 * 14))
    assert analysis.jain_index(pa.array([2.0, None, 2.0])) == approx(1.0)
    assert analysis.jain_index([]) is None
    assert analysis.jain_index([0, 0]) is None


def test_jain_fairness_from_rates():
    flows = flows_table(
        [
            {
                "id": 0,
                "src": 1,
                "dst": 0,
                "size": 1000,
                "start": 0,
                "finish": 100,
                "ideal": 10,
                "workload": "x",
            },
            {
                "id": 1,
                "src": 2,
                "dst": 0,
                "size": 1000,
                "start": 0,
                "finish": 200,
                "ideal": 10,
                "workload": "x",
            },
            {
                "id": 2,
                "src": 3,
                "dst": 0,
                "size": 1000,
                "start": 130,
                "finish": 170,
                "ideal": 10,
                "workload": "y",
            },
        ]
    )
    rates = pa.table(
        {
            "time_ps": pa.array([0, 50, 0, 120], pa.uint64()),
            "flow_id": pa.array([0, 0, 1, 1], pa.uint64()),
            "rate_bps": pa.array([100e9, 50e9, 100e9, 20e9], pa.uint64()),
        }
    )
    t = analysis.jain_fairness({"flows": flows, "rates": rates}, interval=40)
    assert t.schema.metadata[b"fabricemu.basis"] == b"rates"
    assert t.column("time_ps").to_pylist() == [40, 80, 120, 160, 200]
    assert t.column("active_flows").to_pylist() == [2, 2, 1, 2, 0]
    # Flow 2 has no rate row: left out without an initial rate.
    assert t.column("measured_flows").to_pylist() == [2, 2, 1, 1, 0]
    assert_values(t.column("jain").to_pylist(), [1.0, jain([50, 100]), 1.0, 1.0, None])
    assert_values(t.column("total_gbps").to_pylist(), [200.0, 150.0, 20.0, 20.0, None])
    with_init = analysis.jain_fairness(
        {"flows": flows, "rates": rates}, interval="40ps", initial_rate="100Gbps"
    )
    assert with_init.column("jain")[3].as_py() == approx(jain([20, 100]))
    only_x = analysis.jain_fairness({"flows": flows, "rates": rates}, interval=40, workload="x")
    assert only_x.column("active_flows").to_pylist() == [2, 2, 1, 1, 0]


def test_jain_fairness_from_flows_without_rates():
    flows = flows_table(
        [
            {
                "id": 0,
                "src": 1,
                "dst": 0,
                "size": 1000,
                "start": 0,
                "finish": 100,
                "ideal": 10,
                "workload": "x",
            },
            {
                "id": 1,
                "src": 2,
                "dst": 0,
                "size": 1000,
                "start": 0,
                "finish": 200,
                "ideal": 10,
                "workload": "x",
            },
        ]
    )
    t = analysis.jain_fairness(flows, interval=50)
    assert t.schema.metadata[b"fabricemu.basis"] == b"flows"
    assert_values(t.column("jain").to_pylist(), [jain([10, 5]), jain([5]), jain([5]), None])
    with pytest.raises(MissingTableError, match="rates"):
        analysis.jain_fairness(flows, basis="rates")


def test_metrics_and_compare_from_tables():
    links = links_table()
    m = analysis.metrics({"flows": flows_table(FLOWS), "links": links})
    done = [r for r in FLOWS if r.get("finish") is not None]
    assert m["flows"] == 10
    assert m["flows_finished"] == 8
    assert m["slowdown_p99"] == approx(pct(slowdowns(FLOWS), 0.99))
    assert m["fct_p50_us"] == approx(pct([(r["finish"] - r["start"]) / 1e6 for r in done], 0.5))
    span = max(r["finish"] for r in done) - min(r["start"] for r in done)
    assert m["goodput_gbps"] == approx(sum(r["size"] for r in done) * 8 / (span * 1e-12) / 1e9)
    assert m["pause_us"] == approx(16 / 1e6)
    assert m["drops"] == 0
    assert m["ecn_marks"] is None, "no such column: not measured"
    assert m["events"] is None, "no run.json"
    # The same flows with PFC rows instead of links: pause time from the pause intervals.
    m2 = analysis.metrics({"flows": flows_table(FLOWS), "pfc": pfc_table(PFC_ROWS)})
    assert m2["pause_us"] == approx((20 + 0 + 5) / 1e6)
    assert analysis.metrics(flows_table(FLOWS))["pause_us"] == 0.0
    assert list(m) == analysis.METRICS_SCHEMA.names

    faster = [
        dict(r, finish=None if r.get("finish") is None else r["start"] + (r["finish"] - r["start"]) // 2)
        for r in FLOWS
    ]
    c = analysis.compare(flows_table(FLOWS), flows_table(faster), names=["base", "fast"])
    assert c.column_names == ["metric", "base", "fast", "change"]
    row = {r["metric"]: r for r in c.to_pylist()}
    assert row["flows"]["change"] == 0.0
    assert row["slowdown_p99"]["change"] == approx(
        row["slowdown_p99"]["fast"] / row["slowdown_p99"]["base"] - 1
    )
    assert row["drops"]["change"] is None, "from 0"
    three = analysis.compare(flows_table(FLOWS), flows_table(FLOWS), flows_table(faster))
    assert three.column_names == ["metric", "run 1", "run 2", "run 3"]
    with pytest.raises(ValueError, match="at least two"):
        analysis.compare(flows_table(FLOWS))


# -- sources and missing tables ---------------------------------------------------------------------


def test_every_kind_of_source(traced: fabricemu.Result):
    expected = analysis.fct_percentiles(traced, by="workload")
    assert analysis.fct_percentiles(traced.out, by="workload").equals(expected)
    assert analysis.fct_percentiles(str(traced.out), by="workload").equals(expected)
    assert analysis.fct_percentiles(traced.flows, by="workload").equals(expected)
    assert analysis.fct_percentiles({"flows": traced.flows}, by="workload").equals(expected)
    assert analysis.fct_percentiles(traced.flows.to_batches()[0], by="workload").equals(expected)
    pl = pytest.importorskip("polars")
    frame = pl.from_arrow(traced.flows)
    assert analysis.fct_percentiles(frame, by="workload").equals(expected)
    with pytest.raises(TypeError, match=r"expected a fabricemu\.Result"):
        analysis.fct_percentiles(42)


def test_missing_tables_say_how_to_get_them(untraced: fabricemu.Result):
    assert untraced.tables() == ["flows", "nodes", "ports"]
    cases = [
        (lambda: analysis.queue_cdf(untraced), "queues", "queues = { interval"),
        (lambda: analysis.queue_timeseries(untraced.out), "queues", "[trace]"),
        (lambda: analysis.link_utilisation(untraced), "links", "links = { interval"),
        (lambda: analysis.pause_time(untraced), "pfc", "pfc = true"),
        (lambda: analysis.jain_fairness(untraced, basis="rates"), "rates", "rates = "),
        (lambda: untraced.queues, "queues", "interval"),
    ]
    for call, table, hint in cases:
        with pytest.raises(MissingTableError) as e:
            call()
        assert e.value.table == table
        assert hint in str(e.value), str(e.value)
        assert str(untraced.out) in str(e.value)
        assert isinstance(e.value, FileNotFoundError)
    with pytest.raises(MissingTableError, match="needs the rates table too"):
        analysis.jain_fairness(untraced.flows, basis="rates")
    with pytest.raises(MissingTableError, match="no column 'slowdown'"):
        analysis.slowdown_by_size(untraced.flows.drop_columns(["slowdown"]))
    # Analyses that only need flows work; pause time without any PFC trace is 0.
    assert analysis.metrics(untraced)["pause_us"] == 0.0
    assert analysis.jain_fairness(untraced).schema.metadata[b"fabricemu.basis"] == b"flows"


# -- a real traced run: each function against a plain-Python computation on the same rows ----------


def test_traced_run_has_every_table(traced: fabricemu.Result):
    assert traced.tables() == ["flows", "links", "nodes", "pfc", "ports", "queues", "rates"]
    for name in traced.tables():
        assert traced.table(name).num_rows > 0, name
    assert traced.pfc.num_rows > 0, "the incast must pause"
    flt = traced.table("queues", columns=["time_ps", "bytes"], filter=pc.field("bytes") > 50_000)
    assert flt.column_names == ["time_ps", "bytes"]
    assert flt.num_rows == sum(1 for r in traced.queues.to_pylist() if r["bytes"] > 50_000)
    assert traced.dataset("links").count_rows() == traced.links.num_rows


def test_traced_metrics(traced: fabricemu.Result):
    m = traced.metrics()
    flows = traced.flows.to_pylist()
    info = traced.run_info
    assert m["flows"] == len(flows) == m["flows_finished"]
    assert m["slowdown_p50"] == approx(pct([f["slowdown"] for f in flows], 0.5))
    assert m["slowdown_p99"] == approx(pct([f["slowdown"] for f in flows], 0.99))
    span = max(f["finish_ps"] for f in flows) - min(f["start_ps"] for f in flows)
    assert m["goodput_gbps"] == approx(sum(f["size_bytes"] for f in flows) * 8 / (span * 1e-12) / 1e9)
    assert m["ecn_marks"] == sum(f["ecn_marks"] for f in flows) > 0
    assert m["cnps"] == sum(f["cnps"] for f in flows) > 0
    assert m["pause_us"] == approx(sum(r["paused_ps"] for r in traced.links.to_pylist()) / 1e6)
    assert m["pause_us"] > 0
    assert m["max_queue_bytes"] == info["stats"]["max_queue_bytes"]
    assert m["drops"] == info["stats"]["packets_dropped"]
    assert m["events"] == info["events"]
    assert m["simulated_us"] == info["simulated_ps"] / 1e6


def test_traced_slowdown_by_size_and_goodput(traced: fabricemu.Result):
    flows = traced.flows.to_pylist()
    t = analysis.slowdown_by_size(traced, edges=["32KiB", "128KiB"])
    edges = [(0, 32768), (32768, 131072), (131072, None)]
    for row, (lo, hi) in zip(t.to_pylist(), edges):
        mine = [f for f in flows if f["size_bytes"] >= lo and (hi is None or f["size_bytes"] < hi)]
        assert row["flows"] == len(mine)
        assert row["slowdown_p95"] == approx(pct([f["slowdown"] for f in mine], 0.95))
    assert t.column("flows").to_pylist() == [1, 1, 8]
    hosts = analysis.goodput_per_host(traced)
    receiver = hosts.filter(pc.equal(hosts.column("host"), 0)).to_pylist()[0]
    incast = [f for f in flows if f["dst"] == 0]
    span = max(f["finish_ps"] for f in incast) - min(f["start_ps"] for f in incast)
    assert receiver["goodput_gbps"] == approx(sum(f["size_bytes"] for f in incast) * 8e3 / span)
    assert 50 < receiver["goodput_gbps"] <= 100, "the incast receiver's link is the bottleneck"


def test_traced_links(traced: fabricemu.Result):
    rows = traced.links.to_pylist()
    per_tier = {r["tier"]: r for r in analysis.link_utilisation(traced, by="tier").to_pylist()}
    assert set(per_tier) == {"host", "fabric", "core"}
    for tier, r in per_tier.items():
        u = [x["utilisation"] for x in rows if x["tier"] == tier]
        assert r["samples"] == len(u)
        assert r["links"] == len({x["link"] for x in rows if x["tier"] == tier})
        assert r["utilisation_mean"] == approx(mean(u))
        assert r["utilisation_p99"] == approx(pct(u, 0.99))
        assert r["tx_bytes"] == sum(x["tx_bytes"] for x in rows if x["tier"] == tier)


def test_traced_queues(traced: fabricemu.Result):
    rows = traced.queues.to_pylist()
    interval = 1_000_000
    instants = set(range(interval, traced.run_info["simulated_ps"] + 1, interval)) | {
        r["time_ps"] for r in rows
    }
    queues: Dict[tuple, Dict[int, int]] = {}  # type: ignore[type-arg]
    for r in rows:
        queues.setdefault((r["switch"], r["port"], r["priority"]), {})[r["time_ps"]] = r["bytes"]
    samples = [series.get(t, 0) for series in queues.values() for t in instants]
    cdf = analysis.queue_cdf(traced)
    assert sum(cdf.column("samples").to_pylist()) == len(samples)
    for row in cdf.to_pylist():
        assert row["samples"] == samples.count(row["bytes"])
        assert row["cdf"] == approx(sum(s <= row["bytes"] for s in samples) / len(samples))
    top = analysis.busiest_ports(traced, n=3, by="mean_bytes").to_pylist()
    means = sorted(
        ((sum(series.get(t, 0) for t in instants) / len(instants), k) for k, series in queues.items()),
        reverse=True,
    )
    assert [r["mean_bytes"] for r in top] == approx([m for m, _ in means[:3]])
    key = (top[0]["switch"], top[0]["port"], top[0]["priority"])
    ts = analysis.queue_timeseries(traced, switch=key[0], port=key[1], priority=key[2])
    assert ts.column("time_ps").to_pylist() == sorted(instants)
    assert ts.column("bytes").to_pylist() == [queues[key].get(t, 0) for t in sorted(instants)]


def test_traced_pfc(traced: fabricemu.Result):
    rows = sorted(traced.pfc.to_pylist(), key=lambda r: r["time_ps"])
    end = traced.run_info["simulated_ps"]
    paused: Dict[tuple, int] = {}  # type: ignore[type-arg]
    since: Dict[tuple, Optional[int]] = {}  # type: ignore[type-arg]
    for r in rows:
        k = (r["switch"], r["port"], r["priority"])
        if r["action"] == "pause" and since.get(k) is None:
            since[k] = r["time_ps"]
        elif r["action"] == "resume" and since.get(k) is not None:
            paused[k] = paused.get(k, 0) + r["time_ps"] - since[k]  # type: ignore[operator]
            since[k] = None
    for k, s in since.items():
        if s is not None:
            paused[k] = paused.get(k, 0) + end - s
    got = {
        (r["switch"], r["port"], r["priority"]): r["paused_ps"]
        for r in analysis.pause_time(traced).to_pylist()
    }
    assert got == {k: paused.get(k, 0) for k in got}
    assert set(got) == {(r["switch"], r["port"], r["priority"]) for r in rows}
    # PFC's pause intervals and the links' paused time are two views of the same pauses.
    total_links = sum(r["paused_ps"] for r in traced.links.to_pylist())
    assert sum(got.values()) == pytest.approx(total_links, rel=0.02)


def test_traced_fairness(traced: fabricemu.Result):
    flows = traced.flows.to_pylist()
    rates = sorted(traced.rates.to_pylist(), key=lambda r: (r["flow_id"], r["time_ps"]))
    t = analysis.jain_fairness(traced, interval="10us", workload="incast")
    assert t.schema.metadata[b"fabricemu.basis"] == b"rates"
    start = min(f["start_ps"] for f in flows if f["workload"] == "incast")
    for row in t.to_pylist():
        now = row["time_ps"]
        assert (now - start) % 10_000_000 == 0
        active = [
            f
            for f in flows
            if f["workload"] == "incast"
            and f["start_ps"] <= now
            and (f["finish_ps"] is None or f["finish_ps"] > now)
        ]
        measured = []
        for f in active:
            known = [r["rate_bps"] for r in rates if r["flow_id"] == f["flow_id"] and r["time_ps"] <= now]
            measured.append(known[-1] if known else 100e9)  # before the first row: the host link rate
        assert row["active_flows"] == len(active)
        assert_values([row["jain"]], [jain(measured)])


def test_analysis_results_work_with_polars_and_duckdb(traced: fabricemu.Result):
    pl = pytest.importorskip("polars")
    duckdb = pytest.importorskip("duckdb")
    t = analysis.slowdown_by_size(traced, buckets=4)
    frame = pl.from_arrow(t)
    assert frame.height == t.num_rows
    con = duckdb.connect()
    con.register("buckets", t)
    [(n,)] = con.sql("select sum(flows) from buckets").fetchall()
    assert n == traced.flows.num_rows


def test_result_reprs(traced: fabricemu.Result, tmp_path: Path):
    text = repr(traced)
    assert "10/10 flows finished" in text
    page = traced._repr_html_()
    assert "fabricemu.Result" in page
    for name in ("flows", "queues", "links", "pfc", "rates"):
        assert f"<code>{name}</code>" in page
    assert "slowdown p50 / p95 / p99" in page
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "run.json").write_text("{not json")
    assert "unreadable" in fabricemu.Result(broken)._repr_html_()


def test_tables_are_memory_mapped_not_read(traced: fabricemu.Result):
    run = fabricemu.open(traced.out)
    assert run._tables == {}, "opening reads only run.json"
    before = pa.total_allocated_bytes()
    links = run.links
    assert links.nbytes > 100_000
    # String columns are stored dictionary-encoded and decoded on reading (the API gives plain
    # strings); every other buffer is the mapped file.
    decoded = sum(links.column(f.name).nbytes for f in links.schema if pa.types.is_string(f.type))
    assert 0 < decoded < links.nbytes / 4
    allocated = pa.total_allocated_bytes() - before
    assert allocated < decoded + links.nbytes / 10, "the buffers are the mapped file"
    assert run.links is links, "read once"
    part = run.table("links", columns=["time_ps", "utilisation"], filter=pc.field("link") == 3)
    assert part.column_names == ["time_ps", "utilisation"]
    assert part.num_rows == sum(1 for r in links.to_pylist() if r["link"] == 3) > 0
    batches = list(run.dataset("links").to_batches(columns=["tx_bytes"]))
    assert sum(b.num_rows for b in batches) == links.num_rows
