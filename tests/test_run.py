"""Running from Python: outputs, Result, determinism, progress and interruption."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import fabricemu
from fabricemu import Scenario

from conftest import SCENARIOS, SMALL, read_arrow

FLOW_COLUMNS = [
    "flow_id",
    "src",
    "dst",
    "size_bytes",
    "start_ps",
    "finish_ps",
    "fct_ps",
    "ideal_fct_ps",
    "slowdown",
    "workload",
    "workload_index",
    "packets_sent",
    "retransmits",
    "drops",
]

# Four flows from pod 0 to pod 1 of a k=4 fat-tree, two per edge switch: whether they share uplinks
# depends on the seeded ECMP hashes, so the FCTs depend on the seed.
ECMP = {
    "name": "ecmp",
    "seed": 1,
    "topology": {"kind": "fat_tree", "k": 4, "link_rate": "100Gbps", "link_delay": "500ns"},
    "workload": [
        {
            "kind": "flows",
            "flows": [
                {"src": 0, "dst": 4, "size": "1MB"},
                {"src": 1, "dst": 5, "size": "1MB"},
                {"src": 2, "dst": 6, "size": "1MB"},
                {"src": 3, "dst": 7, "size": "1MB"},
            ],
        }
    ],
}


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory):
    out = tmp_path_factory.mktemp("quickstart")
    return fabricemu.run(SCENARIOS / "quickstart.toml", out=out)


def test_run_writes_readable_outputs(quickstart):
    out = quickstart.out
    assert (out / "flows.arrow").is_file()
    assert (out / "run.json").is_file()
    table = read_arrow(out / "flows.arrow")
    assert table.column_names[: len(FLOW_COLUMNS)] == FLOW_COLUMNS
    # The file's string columns are dictionary-encoded; the API gives them decoded.
    assert pa.types.is_dictionary(table.schema.field("workload").type)
    assert table.column("workload").cast(pa.string()).equals(quickstart.flows.column("workload"))
    plain = [c for c in table.column_names if c not in ("workload", "tag")]
    assert table.select(plain).equals(quickstart.flows.select(plain))
    info = json.loads((out / "run.json").read_text())
    assert info == quickstart.run_info
    for key in ["scenario", "seed", "version", "interrupted", "wall_seconds", "stats", "events"]:
        assert key in info, key
    assert info["interrupted"] is False
    assert info["version"] == fabricemu.__version__
    assert Scenario.from_dict(info["scenario"]) == Scenario.load(SCENARIOS / "quickstart.toml")


def test_quickstart_finishes_every_flow(quickstart):
    """Needs the engine: every flow of the quickstart finishes."""
    s = Scenario.load(SCENARIOS / "quickstart.toml")
    expected = s.describe()["flows"]
    flows = quickstart.flows
    assert flows.num_rows == expected
    assert flows.column("finish_ps").null_count == 0
    assert pc.all(pc.greater_equal(flows.column("slowdown"), 1.0)).as_py()
    stats = quickstart.stats
    assert stats["flows_finished"] == stats["flows_total"] == expected
    assert stats["events"] > 0 and stats["packet_hops"] > 0


def test_summary(quickstart):
    s = quickstart.summary()
    for key in [
        "flows",
        "finished",
        "unfinished",
        "fct_p50_us",
        "fct_p99_us",
        "slowdown_p50",
        "slowdown_p95",
        "slowdown_p99",
        "simulated_us",
        "events",
        "events_per_second",
        "packet_hops",
        "packet_hops_per_second",
        "wall_seconds",
        "drops",
    ]:
        assert key in s, key
    assert s["finished"] + s["unfinished"] == s["flows"]
    assert s["flows"] > 0, "needs the engine"
    assert s["slowdown_p50"] <= s["slowdown_p95"] <= s["slowdown_p99"]
    assert s["fct_p50_us"] <= s["fct_p99_us"]
    assert "flows finished" in repr(quickstart)


def test_open_existing_folder(quickstart):
    again = fabricemu.open(quickstart.out)
    assert again.flows.equals(quickstart.flows)
    assert again.summary() == quickstart.summary()
    with pytest.raises(FileNotFoundError):
        fabricemu.open(quickstart.out / "nowhere")


def test_polars_and_duckdb_read_flows(quickstart):
    pl = pytest.importorskip("polars")
    duckdb = pytest.importorskip("duckdb")
    import pyarrow.dataset as ds

    path = quickstart.out / "flows.arrow"
    df = pl.read_ipc(path)
    assert df.height == quickstart.flows.num_rows
    assert df.columns[: len(FLOW_COLUMNS)] == FLOW_COLUMNS
    # DuckDB scans the file through a pyarrow dataset (its own .arrow reader is an extension).
    con = duckdb.connect()
    con.register("flows", ds.dataset(str(path), format="arrow"))
    [(n, total)] = con.sql("select count(*), sum(size_bytes) from flows").fetchall()
    assert n == quickstart.flows.num_rows
    assert n == 0 or total == pc.sum(quickstart.flows.column("size_bytes")).as_py()


def test_run_accepts_dict_path_and_temporary_output():
    r = fabricemu.run(Scenario.from_toml(SMALL).to_dict())
    out = r.out
    assert (out / "flows.arrow").is_file()
    assert r.flows.num_rows == 3, "needs the engine"
    del r
    import gc

    gc.collect()
    assert not out.exists(), "the temporary output folder lives as long as the Result"


def test_same_seed_gives_identical_files(tmp_path):
    a = fabricemu.run(SCENARIOS / "quickstart.toml", out=tmp_path / "a")
    b = fabricemu.run(SCENARIOS / "quickstart.toml", out=tmp_path / "b")
    assert a.flows.num_rows > 0, "needs the engine"
    assert (a.out / "flows.arrow").read_bytes() == (b.out / "flows.arrow").read_bytes()
    ia, ib = a.run_info, b.run_info
    for info in (ia, ib):
        # Wall-clock facts differ between two runs (timestamps at one-second resolution may
        # straddle a second); everything else in the record must be identical.
        for key in [
            "wall_seconds",
            "events_per_second",
            "packet_hops_per_second",
            "started_utc",
            "finished_utc",
        ]:
            info.pop(key, None)
    assert ia == ib


def test_run_reuses_the_build_made_at_construction(tmp_path):
    """Constructing a Scenario builds it (to fail early); its next run uses that build instead of
    building again, and gives the same files as a run that builds afresh."""
    from fabricemu import _core

    s = Scenario.load(SCENARIOS / "quickstart.toml")
    assert _core.kept_build() == s.to_json()
    kept = fabricemu.run(s, out=tmp_path / "kept")
    assert _core.kept_build() is None, "the kept build is used once"
    fresh = fabricemu.run(s, out=tmp_path / "fresh")
    other = Scenario.from_toml(SMALL)
    assert _core.kept_build() == other.to_json(), "one slot: the last scenario constructed"
    after_other = fabricemu.run(s, out=tmp_path / "after_other")
    assert _core.kept_build() == other.to_json(), "a run of another scenario leaves it alone"
    arrows = sorted(p.name for p in fresh.out.glob("*.arrow"))
    assert "flows.arrow" in arrows
    for name in arrows:
        want = (fresh.out / name).read_bytes()
        assert (kept.out / name).read_bytes() == want, name
        assert (after_other.out / name).read_bytes() == want, name


def test_another_seed_changes_ecmp_choices(tmp_path):
    base = Scenario.from_dict(ECMP)
    first = fabricemu.run(base, out=tmp_path / "seed1").flows
    assert first.num_rows == 4, "needs the engine"
    fct = first.column("fct_ps").to_pylist()
    assert fct == fabricemu.run(base, out=tmp_path / "again").flows.column("fct_ps").to_pylist()
    for seed in range(2, 12):
        other = fabricemu.run(base.with_(seed=seed), out=tmp_path / f"seed{seed}").flows
        assert other.column("src").equals(first.column("src"))
        if other.column("fct_ps").to_pylist() != fct:
            return
    pytest.fail("ten other seeds all gave the same FCTs: ECMP ignores the seed")


def test_progress_callback(tmp_path):
    calls = []

    def progress(simulated_ps, stop_ps, events, finished, total):
        calls.append((simulated_ps, stop_ps, events, finished, total))

    r = fabricemu.run(SCENARIOS / "quickstart.toml", out=tmp_path, progress=progress, slice_events=2000)
    assert calls, "progress is called at least once"
    assert all(c[1] is None for c in calls)  # stops when all flows are done
    times = [c[0] for c in calls]
    events = [c[2] for c in calls]
    assert times == sorted(times) and events == sorted(events)
    last = calls[-1]
    assert last[3] == last[4] == r.stats["flows_total"]
    assert last[2] == r.stats["events"]
    assert len(calls) > 1, "needs the engine: several slices of 2000 events"


def test_stop_time_reaches_progress(tmp_path):
    s = Scenario.load(SCENARIOS / "quickstart.toml").with_(stop="50us")
    stops = set()
    r = fabricemu.run(s, out=tmp_path, progress=lambda *a: stops.add(a[1]), slice_events=1000)
    assert stops == {50_000_000}
    assert r.run_info["simulated_ps"] <= 50_000_000
    assert r.summary()["unfinished"] > 0, "needs the engine: 50us is too short for 1MB flows"


class Stop(Exception):
    pass


@pytest.mark.parametrize("exc", [Stop, KeyboardInterrupt])
def test_exception_in_progress_leaves_partial_outputs(tmp_path, exc):
    def progress(*args):
        raise exc("stop here")

    with pytest.raises(exc):
        fabricemu.run(SCENARIOS / "quickstart.toml", out=tmp_path, progress=progress, slice_events=500)
    partial = fabricemu.open(tmp_path)
    assert partial.interrupted
    assert partial.run_info["interrupted"] is True
    assert partial.flows.column_names[: len(FLOW_COLUMNS)] == FLOW_COLUMNS
    assert partial.summary()["interrupted"] is True
    # The record is completed for a partial run too.
    assert {o["file"] for o in partial.run_info["outputs"]} >= {"flows.arrow"}
    assert partial.run_info["started_utc"] <= partial.run_info["finished_utc"]


def test_output_path_that_is_a_file_raises_oserror(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(OSError) as info:
        fabricemu.run(Scenario.from_toml(SMALL), out=blocker)
    assert str(blocker) in str(info.value)


def test_engine_runs_without_the_gil(tmp_path):
    """Another Python thread keeps running while the engine works through one long slice."""
    import threading
    import time

    s = Scenario.from_dict(
        {
            "stop": "3ms",
            "topology": {"kind": "fat_tree", "k": 8},
            "workload": [{"kind": "permutation", "size": "1GB"}],
        }
    )
    done = threading.Event()
    box = {}

    def work():
        try:
            box["result"] = fabricemu.run(s, out=tmp_path, slice_events=10**12)
        finally:
            done.set()

    worker = threading.Thread(target=work)
    started = time.perf_counter()
    worker.start()
    last, gaps = time.perf_counter(), []
    while not done.is_set():
        time.sleep(0.001)
        now = time.perf_counter()
        gaps.append(now - last)
        last = now
    worker.join()
    elapsed = time.perf_counter() - started
    assert box["result"].stats["events"] > 0, "needs the engine"
    if elapsed < 0.3:
        pytest.skip(f"the run took only {elapsed:.3f}s: too short to tell")
    assert max(gaps) < min(0.2, elapsed / 2), f"this thread stalled for {max(gaps):.3f}s of {elapsed:.3f}s"


@pytest.mark.parametrize("threads", [1, 2])
def test_a_run_whose_packets_do_not_balance_raises_simulation_error(tmp_path, threads):
    # Every run that ends checks that its packets balance (each live one in one queue or on one
    # link; made = delivered + dropped + live; every switch's buffer counters what its queues
    # hold): an engine fault raises SimulationError, its outputs written for the report, rather
    # than ending with figures that look right. One packet is miscounted on purpose here.
    from fabricemu import SimulationError, _core

    data = ECMP | {"threads": threads}
    scenario = Scenario.from_dict(data)
    with pytest.raises(SimulationError, match="packets do not balance at its end"):
        _core.run(scenario.to_json(), str(tmp_path / "miscounted"), miscount_for_test=True)
    assert json.loads((tmp_path / "miscounted" / "run.json").read_text())["stats"]["flows_finished"] == 4
    # The same run, counted right, passes the check.
    info = json.loads(_core.run(scenario.to_json(), str(tmp_path / "counted")))
    assert info["stats"]["flows_finished"] == 4
