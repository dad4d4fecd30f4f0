"""Scenario fuzzing (issue 11): no input may crash, hang, exhaust memory or corrupt outputs.

A mutator starts from every shipped scenario (scenarios/) and every coverage scenario of the golden
test (rust/fabricemu-core/tests/golden/), takes its key paths from the *normalised* scenario
(``to_dict(normalised=True)``, so every key a new feature adds is fuzzed without touching this file)
and mutates values: wrong types, huge, negative and zero numbers, unit strings, removed keys,
unknown keys, lists. Hypothesis drives it, derandomised (the same inputs on every run) and bounded:
a few thousand validations and a few hundred short runs.

Asserted of every input: only ``ScenarioError`` (bad input, including a run refused by the memory
or trace guard) leaves the API, never a ``PanicException`` or another ``BaseException``, and a
scenario the validation took runs: ``SimulationError`` (the engine's own fault, a panic caught or,
since 2026-12-05, packets that do not balance at the run's end) fails the test; nothing hangs
(each run has a wall-clock alarm); a run's outputs are readable Arrow files and its run.json
conserves packets (created = delivered + dropped + in flight).

tests/fuzz_corpus/*.toml are past crashers (the issue's cases among them), run on every test run;
each file's first line says what is expected: ``# expect: error`` (a ScenarioError, and the text
it must contain with ``# message: ...``) or ``# expect: ok``.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import os
import signal
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings  # in the test extras: never skipped
from hypothesis import strategies as st

import fabricemu
from fabricemu import Scenario, ScenarioError, SimulationError

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "rust" / "fabricemu-core"
CORPUS = Path(__file__).resolve().parent / "fuzz_corpus"

#: Limits for every fuzzed run: small enough that a mutated scenario cannot take the machine.
MAX_MEMORY = 1 << 30
MAX_TRACE = 64 << 20
#: A mutated run is cut to this much simulated time, and must end within this wall time.
FUZZ_STOP = "20us"
RUN_SECONDS = 30
#: Beyond these a fuzzed run is skipped (it is still validated and estimated).
MAX_RUN_FLOWS = 20_000
MAX_RUN_HOSTS = 1_100

PanicException: type = type(None)
try:  # the class pyo3 raises for a Rust panic that crossed into Python
    from pyo3_runtime import PanicException as _P  # type: ignore[import-not-found]

    PanicException = _P
except ImportError:  # pragma: no cover - only importable after a panic on some versions
    pass


class Hang(Exception):
    """A run that did not end in time."""


def _absolute_files(data: Any, base: Path) -> Any:
    """Replay and CDF file names made absolute (they are relative to the directory the scenario was
    run from), so that a mutated scenario still finds them."""
    if isinstance(data, dict):
        out = {}
        for k, v in data.items():
            if k in ("file", "cdf") and isinstance(v, str) and ("/" in v or v.endswith((".csv", ".arrow"))):
                out[k] = str((base / v).resolve())
            else:
                out[k] = _absolute_files(v, base)
        return out
    if isinstance(data, list):
        return [_absolute_files(v, base) for v in data]
    return data


def _bases() -> List[Tuple[str, Dict[str, Any], Dict[str, Any]]]:
    """(name, the scenario as written, normalised) for every shipped and golden scenario."""
    out = []
    cwd = os.getcwd()
    for directory, run_from in ((ROOT / "scenarios", ROOT), (CORE / "tests" / "golden", CORE)):
        for path in sorted(directory.glob("*.toml")):
            os.chdir(run_from)
            try:
                s = Scenario.load(path)
            finally:
                os.chdir(cwd)
            out.append(
                (
                    path.name,
                    _absolute_files(s.to_dict(), run_from),
                    _absolute_files(s.to_dict(normalised=True), run_from),
                )
            )
    return out


BASES = _bases()


def _paths(data: Any, prefix: Tuple[Any, ...] = ()) -> Iterator[Tuple[Any, ...]]:
    """Every key path of a scenario dictionary (list indices included), parents first."""
    if isinstance(data, dict):
        for k, v in data.items():
            yield (*prefix, k)
            yield from _paths(v, (*prefix, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield (*prefix, i)
            yield from _paths(v, (*prefix, i))


UNIT_STRINGS = [
    "",
    "0",
    "-1",
    "0ps",
    "1ps",
    "0ns",
    "-5us",
    "1.5us",
    "1e30s",
    "18446744073709551615ps",
    "18446744073709551616ps",
    "100Tbps",
    "0bps",
    "1bps",
    "100Gbps",
    "4KiB",
    "0B",
    "1e30GB",
    "32MiB",
    "abc",
    "nan",
    "inf",
    "all_flows_done",
    "/proc/self/environ",
    "/dev/zero",
    "websearch",
    "ecmp",
    "spray",
    "dcqcn",
    "dctcp",
    "swift",
    "hpcc",
    "nscc",
    "receiver",
    "sender",
    "fat_tree",
    "dragonfly",
    "rail",
    "tor",
    "pxn",
    "nvswitch",
    "none",
    "hierarchical_ring",
    "hierarchical_tree",
    "telemetry_aware",
    "in_network",
    "nvls",
]

SCALARS = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, 2, 3, 7, 64, 255, 256, 65535, 2**31, 2**32, 2**53, 2**63, 2**64 - 1]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(UNIT_STRINGS),
    st.text(max_size=12),
)
RATES_ANY = ["512Gbps", "3600Gbps", "1bps", "100Tbps", "0bps", "fast"]
DURATIONS_ANY = ["0ns", "1ns", "2us", "1ms", "-1ns", "1e30s", "abc"]
VALUES = st.one_of(
    SCALARS,
    st.lists(SCALARS, max_size=4),
    st.dictionaries(
        st.sampled_from(["kind", "interval", "x", "enabled", "size", "gpus", "rate", "latency", "buffer"]),
        SCALARS,
        max_size=3,
    ),
)


#: A `[cluster]` table (issue 13) to put on any scenario: GPU servers on its topology.
CLUSTER = st.fixed_dictionaries(
    {},
    optional={
        "gpus_per_server": st.one_of(st.sampled_from([1, 2, 4, 8, 72]), SCALARS),
        "nics_per_server": st.one_of(st.sampled_from([1, 2, 4, 8]), SCALARS),
        "cabling": st.one_of(st.sampled_from(["rail", "tor"]), SCALARS),
        "planes": st.one_of(st.sampled_from([1, 2, 4]), SCALARS),
        "cross_rail": st.one_of(st.sampled_from(["pxn", "spine"]), SCALARS),
        "servers_per_rack": st.one_of(st.sampled_from([1, 4]), SCALARS),
        "scaleup": st.one_of(
            st.fixed_dictionaries(
                {},
                optional={
                    "kind": st.sampled_from(["nvswitch", "none", "x"]),
                    "gpus": st.sampled_from([1, 4, 8, 16, 72, 0, -8]),
                    "rate": st.sampled_from(RATES_ANY),
                    "latency": st.sampled_from(["0ns", "250ns", "1ms", "-1ns"]),
                    "link_delay": st.sampled_from(["0ns", "5ns", "abc"]),
                    "buffer": st.sampled_from(["1B", "4KiB", "32MiB", "0B"]),
                },
            ),
            VALUES,
        ),
        "nic": st.one_of(
            st.fixed_dictionaries(
                {},
                optional={
                    "rate": st.sampled_from(RATES_ANY),
                    "latency": st.sampled_from(["0ns", "100ns", "1e30s"]),
                    "buffer": st.sampled_from(["1B", "4KiB", "32MiB"]),
                },
            ),
            VALUES,
        ),
    },
)


#: Host selectors and group layouts (issue 13): valid, out of range and malformed, alone or in lists.
HOST_SELECTORS = [
    "server:0",
    "server:1",
    "rack:0",
    "rail:1",
    "server:99999",
    "rail:-1",
    "rack:x",
    "gpu:0",
    "servers",
    "rails",
    "racks",
]
HOSTS = st.one_of(
    st.sampled_from(HOST_SELECTORS),
    st.lists(st.one_of(st.sampled_from(HOST_SELECTORS), st.integers(min_value=-2, max_value=40)), max_size=4),
    st.lists(st.lists(st.integers(min_value=0, max_value=20), max_size=3), max_size=3),
)


#: `[trace] packets` (issue 18): filters by flow, node, port and time window, and a row bound.
PACKETS = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "flows": st.lists(st.one_of(st.integers(min_value=-2, max_value=2**33), SCALARS), max_size=3),
            "nodes": st.lists(
                st.one_of(
                    st.sampled_from(["leaf:0", "spine:1", "host:3", "edge:0", "core:99", "x", "leaf:-1"]),
                    SCALARS,
                ),
                max_size=3,
            ),
            "ports": st.lists(
                st.one_of(st.sampled_from(["leaf:0/0", "0/0", "edge:1/99", "/", "leaf:0/", "x/1"]), SCALARS),
                max_size=3,
            ),
            "start": st.sampled_from(DURATIONS_ANY),
            "end": st.sampled_from(DURATIONS_ANY),
            "max_rows": st.one_of(st.sampled_from([1, 100, 10**6, 0, -1, 2**63 - 1, 2**64]), SCALARS),
        },
    ),
    VALUES,
)


SMALL_INTS = st.one_of(st.integers(min_value=-1, max_value=9), st.sampled_from([2**31, 2**32, 2**64]))

#: Ends of an OCS circuit (issue 17): switches by name or id, OCS ports, and malformed ones.
OCS_ENDS = st.one_of(
    st.sampled_from(
        ["agg:0", "agg:3", "leaf:0", "leaf:1", "edge:2", "ocs:0", "ocs:5", "ocs:99999", "ocs:x", "x"]
    ),
    SMALL_INTS,
)
OCS_CIRCUITS = st.one_of(
    st.sampled_from(["uniform", "none", "mesh"]),
    st.lists(st.lists(OCS_ENDS, min_size=0, max_size=3), max_size=5),
    SCALARS,
)
#: An `[ocs]` table (issue 17): an optical circuit switch on any scenario's topology.
OCS = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "switches": st.one_of(
                st.sampled_from(["agg", "leaf", "edge", "spine", "router", "core", "gpu"]), SCALARS
            ),
            "uplinks": st.one_of(st.sampled_from([1, 2, 3, 0, -1, 1024, 1025]), SCALARS),
            "ports": st.one_of(st.sampled_from([2, 16, 1, 0, 2**16, 2**16 + 1]), SCALARS),
            "replace": st.one_of(st.booleans(), SCALARS),
            "link_rate": st.sampled_from(RATES_ANY),
            "link_delay": st.sampled_from(DURATIONS_ANY),
            "reconfiguration_time": st.sampled_from(DURATIONS_ANY),
            "detection": st.sampled_from(DURATIONS_ANY),
            "circuits": OCS_CIRCUITS,
            "reconfigure": st.lists(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "at": st.sampled_from(["0ns", "1us", "5us", "5us", "1e30s", "-1us", "x"]),
                        "circuits": OCS_CIRCUITS,
                        "reconfiguration_time": st.sampled_from(DURATIONS_ANY),
                    },
                ),
                max_size=3,
            ),
        },
    ),
    VALUES,
)

#: A `kind = "graph"` workload (issue 14): ops of every kind with deps, groups, noise, a file.
GRAPH_OP = st.fixed_dictionaries(
    {"kind": st.sampled_from(["compute", "send", "collective", "x"])},
    optional={
        "rank": SMALL_INTS,
        "src": SMALL_INTS,
        "dst": SMALL_INTS,
        "duration": st.one_of(st.sampled_from(["0ps", "1ns", "10us", "1ms", "-1us", "1e30s"]), SCALARS),
        "flops": st.one_of(st.sampled_from([0.0, 1e9, 1e15, -1.0, math.nan, math.inf]), SCALARS),
        "size": st.one_of(st.sampled_from(["1B", "4KiB", "1MiB", "0B"]), SCALARS),
        "op": st.sampled_from(["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "x"]),
        "algorithm": st.sampled_from(
            [
                "ring",
                "tree",
                "halving_doubling",
                "direct",
                "pairwise",
                "pxn",
                "hierarchical_ring",
                "in_network",
                "nvls",
                "x",
            ]
        ),
        "group": SMALL_INTS,
        "ranks": st.lists(SMALL_INTS, max_size=5),
        "domain_size": SMALL_INTS,
        "deps": st.lists(SMALL_INTS, max_size=3),
        "phase": st.sampled_from(["forward", "backward", "compute", "tp", "pp", "dp", "ep", "comm", "x"]),
        "name": st.text(max_size=5),
    },
)
GRAPH = st.fixed_dictionaries(
    {"kind": st.just("graph"), "ops": st.lists(GRAPH_OP, max_size=6)},
    optional={
        "ranks": st.lists(SMALL_INTS, max_size=5),
        "groups": st.lists(st.lists(SMALL_INTS, max_size=4), max_size=2),
        "iterations": st.one_of(st.sampled_from([1, 2, 3, 0, -1, 10**7]), SCALARS),
        "gpu_flops": st.one_of(st.sampled_from([1e15, 0.0, -1.0]), SCALARS),
        "start": st.sampled_from(["0ns", "1us", "-1us", "x"]),
        "domain_size": SMALL_INTS,
        "noise": st.one_of(
            st.fixed_dictionaries(
                {},
                optional={
                    "jitter": st.sampled_from(["uniform", "half_normal", "exponential", "x"]),
                    "max": st.one_of(st.sampled_from([0.0, 0.1, 1e9, -1.0]), SCALARS),
                    "sigma": st.one_of(st.sampled_from([0.0, 0.1, math.nan]), SCALARS),
                    "mean": st.one_of(st.sampled_from([0.0, 0.1, math.inf]), SCALARS),
                    "slow_ranks": st.dictionaries(
                        st.sampled_from(["0", "1", "3", "9", "x", "-1"]),
                        st.one_of(st.sampled_from([1.0, 1.5, 0.5, 1e9]), SCALARS),
                        max_size=2,
                    ),
                },
            ),
            VALUES,
        ),
    },
)


def _get(data: Any, path: Tuple[Any, ...]) -> Any:
    for p in path:
        data = data[p]
    return data


@st.composite
def mutated(draw: Any) -> Tuple[str, Dict[str, Any]]:
    """A shipped scenario with one to three of its values mutated."""
    name, written, normalised = draw(st.sampled_from(BASES))
    data = copy.deepcopy(normalised if draw(st.booleans()) else written)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        paths = list(_paths(data))
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = _get(data, path[:-1])
        key = path[-1]
        op = draw(
            st.sampled_from(
                [
                    "replace",
                    "replace",
                    "scale",
                    "remove",
                    "unknown",
                    "wrap",
                    "negate",
                    "cluster",
                    "hosts",
                    "packets",
                    "graph",
                    "ocs",
                    "threads",
                ]
            )
        )
        old = parent[key]
        listed = data.get("workload")
        workloads = [w for w in listed if isinstance(w, dict)] if isinstance(listed, list) else []
        if op == "cluster":
            data["cluster"] = draw(CLUSTER)
        elif op == "hosts" and workloads:
            # A host list or group layout where workloads take them (with or without a cluster).
            w = draw(st.sampled_from(workloads))
            w[draw(st.sampled_from(["hosts", "groups", "senders", "hot_spot"]))] = draw(HOSTS)
        elif op == "packets":
            trace = data.setdefault("trace", {})
            if isinstance(trace, dict):
                trace["packets"] = draw(PACKETS)
                trace["latency"] = draw(st.one_of(st.booleans(), SCALARS))
        elif op == "graph":
            data["workload"] = [draw(GRAPH)]
        elif op == "ocs":
            data["ocs"] = draw(OCS)
        elif op == "threads":
            # The parallel engine: runs, or refuses (naming `threads`) what it cannot run yet.
            data["threads"] = draw(st.one_of(st.sampled_from([2, 3, 0, 257, -1, 2.5]), SCALARS))
        elif op == "remove":
            if isinstance(parent, dict):
                del parent[key]
            elif parent:
                parent.pop(key)
        elif op == "unknown" and isinstance(parent, dict):
            parent[draw(st.sampled_from(["bogus", "Kind", "k ", "stop_", "seed2"]))] = draw(SCALARS)
        elif op == "wrap":
            parent[key] = [old]
        elif op == "scale" and isinstance(old, (int, float)) and not isinstance(old, bool):
            factor = draw(st.sampled_from([0, 2, 10, 1000, 10**6, 10**12, -1]))
            parent[key] = old * factor
        elif op == "negate" and isinstance(old, (int, float)) and not isinstance(old, bool):
            parent[key] = -old
        else:
            parent[key] = draw(VALUES)
    return name, data


DURATIONS = ["0ns", "1ns", "500ns", "2us", "10us", "1ms"]
RATES = ["1Gbps", "10Gbps", "40Gbps", "400Gbps", "100Tbps"]
SIZES = ["1B", "1500B", "4KiB", "64KiB", "1MB", "32MiB"]


@st.composite
def nudged(draw: Any) -> Tuple[str, Dict[str, Any]]:
    """A shipped scenario with at most one value changed within its kind (a number scaled, a
    duration, rate or size replaced by another, a flag flipped, a key removed): mostly valid
    scenarios, to be run."""
    name, written, normalised = draw(st.sampled_from(BASES))
    data = copy.deepcopy(normalised if draw(st.booleans()) else written)
    if draw(st.integers(min_value=0, max_value=4)) == 0:
        return name, data
    path = draw(st.sampled_from(list(_paths(data))))
    parent = _get(data, path[:-1])
    key = path[-1]
    old = parent[key]
    if isinstance(old, bool):
        parent[key] = not old
    elif isinstance(old, (int, float)):
        parent[key] = type(old)(old * draw(st.sampled_from([0, 2, 3, 10, 0.5])))
    elif isinstance(old, str) and old[:1].isdigit():
        if old.endswith("bps"):
            parent[key] = draw(st.sampled_from(RATES))
        elif old.endswith("s"):
            parent[key] = draw(st.sampled_from(DURATIONS))
        elif old.endswith("B"):
            parent[key] = draw(st.sampled_from(SIZES))
    elif isinstance(parent, dict) and draw(st.booleans()):
        del parent[key]
    return name, data


def _alarm(seconds: float) -> Any:
    def on_alarm(signum: int, frame: Any) -> None:
        raise Hang(f"no result after {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    return previous


def _disarm(previous: Any) -> None:
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)


def _check_outputs(out: Path, info: Dict[str, Any]) -> None:
    """Every Arrow (or Parquet) file in the folder reads, and run.json conserves packets."""
    for f in sorted(out.glob("*.arrow")):
        with pa.memory_map(str(f)) as source:
            pa.ipc.open_file(source).read_all()
    for f in sorted(out.glob("*.parquet")):
        import pyarrow.parquet as pq

        pq.read_table(f)
    stats = info["stats"]
    assert stats["packets_created"] == (
        stats["packets_delivered"] + stats["packets_dropped"] + stats["packets_in_flight"]
    ), stats
    on_disk = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert on_disk["stats"] == stats


def _exercise(data: Dict[str, Any], tmp: Path, *, run: bool) -> str:
    """Validate, describe, estimate and (if small) run one scenario; returns what happened. Any
    exception but ScenarioError and SimulationError propagates and fails the test."""
    started = time.monotonic()
    previous = _alarm(RUN_SECONDS)
    try:
        try:
            s = Scenario.from_dict(data)
            s.to_toml()
            est = s.estimate(MAX_MEMORY, MAX_TRACE)
            described = s.describe(MAX_MEMORY)
            if described["topology"].get("hosts", 0) <= 256:
                s.fabric_summary(MAX_MEMORY)
        except ScenarioError as e:
            assert str(e), "an empty error message"
            return "invalid"
        if not run or est["flows"] > MAX_RUN_FLOWS or described["topology"].get("hosts", 0) > MAX_RUN_HOSTS:
            return "valid"
        short = s.to_dict()
        stop = short.get("stop")
        if not isinstance(stop, str) or stop == "all_flows_done" or _longer_than(stop, FUZZ_STOP):
            short["stop"] = FUZZ_STOP
            short.pop("warmup", None)
        try:
            s = Scenario.from_dict(short)
        except ScenarioError:
            return "invalid when cut short"
        out = tmp / f"run{time.monotonic_ns()}"
        try:
            result = fabricemu.run(s, out=out, max_memory=MAX_MEMORY, max_trace_size=MAX_TRACE)
        except ScenarioError as e:
            assert str(e)
            return "refused: ScenarioError"
        except SimulationError as e:
            # A scenario the validation took that the engine then fails on (a panic caught, or
            # packets that do not balance at the end) is a fault of the engine, not of the input.
            raise AssertionError(f"the engine failed on a valid scenario: {e}") from e
        _check_outputs(out, result.run_info)
        return "ran"
    finally:
        _disarm(previous)
        assert time.monotonic() - started < RUN_SECONDS + 5


def _longer_than(a: str, b: str) -> bool:
    try:
        return int(fabricemu._core.parse_duration(a)) > int(fabricemu._core.parse_duration(b))
    except ValueError:
        return True


FUZZ = settings(
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    print_blob=True,
)


@settings(FUZZ, max_examples=2500)
@given(mutated())
def test_mutated_scenarios_validate_or_raise_scenario_error(case: Tuple[str, Dict[str, Any]]) -> None:
    name, data = case
    try:
        _exercise(data, Path("/nonexistent"), run=False)
    except BaseException as e:
        if isinstance(e, (PanicException, Hang)) or not isinstance(e, Exception):
            raise AssertionError(f"{name}: {type(e).__name__}: {e}") from e
        raise


@settings(FUZZ, max_examples=150)
@given(mutated())
def test_mutated_scenarios_run_or_raise_scenario_error(
    tmp_path_factory: Any, case: Tuple[str, Dict[str, Any]]
) -> None:
    _name, data = case
    tmp = tmp_path_factory.mktemp("fuzz")
    _exercise(data, tmp, run=True)


@settings(FUZZ, max_examples=250)
@given(nudged())
def test_nudged_scenarios_run_with_valid_outputs(
    tmp_path_factory: Any, case: Tuple[str, Dict[str, Any]]
) -> None:
    _name, data = case
    tmp = tmp_path_factory.mktemp("fuzz")
    _exercise(data, tmp, run=True)


#: Features a differential case may switch on or change (on top of a nudge): PFC, a small
#: shared buffer, another congestion control, another load balancing, a trace table.
FEATURES = st.sampled_from(
    [
        ("switch", "pfc", {"enabled": True}),
        ("switch", "buffer", "256KiB"),
        ("switch", "buffer", "1MiB"),
        ("transport", "cc", "dcqcn"),
        ("transport", "cc", "hpcc"),
        ("transport", "cc", "dctcp"),
        ("transport", "cc", "swift"),
        ("transport", "cc", "none"),
        ("routing", "load_balancing", "spray"),
        ("routing", "load_balancing", "adaptive"),
        ("routing", "load_balancing", "flowlet"),
        ("trace", "latency", True),
        ("trace", "queues", {"interval": "2us"}),
        ("trace", "links", {"interval": "5us"}),
        ("trace", "packets", {"max_rows": 2000}),
    ]
)


@st.composite
def differential(draw: Any) -> Tuple[str, Dict[str, Any], int]:
    """A nudged shipped scenario with up to three features changed, and a number of threads."""
    name, data = draw(nudged())
    for table, key, value in draw(st.lists(FEATURES, max_size=3)):
        section = data.setdefault(table, {})
        if isinstance(section, dict):
            section[key] = value
    jobs = [w for w in data.get("workload", []) if isinstance(w, dict) and w.get("kind") == "training"]
    if jobs and draw(st.booleans()):
        # The training jobs go on elastically while GPU (or host) links fail within the cut:
        # each re-formation re-plans them from every partition's flows (docs/parallel.md).
        for w in jobs:
            for key in ("restart_time", "checkpoint_interval", "checkpoint_time", "rejoin"):
                w.pop(key, None)
            w.update(on_failure="elastic", detection="1us", reformation_time="1us")
        failures = {"components": "links", "tier": "host", "mtbf": "100us", "mttr": "4us"}
        data.setdefault("failure_process", []).append({**failures, "until": "15us"})
    return name, data, draw(st.sampled_from([2, 2, 3]))


@st.composite
def elastic_differential(draw: Any) -> Tuple[str, Dict[str, Any], int]:
    """A nudged shipped scenario with training jobs, made elastic (a drawn detection,
    re-formation time and rejoin) while host links fail within the cut, with up to two
    features changed, and a number of threads."""
    name, data = draw(nudged())
    jobs = [w for w in data.get("workload", []) if isinstance(w, dict) and w.get("kind") == "training"]
    assume(jobs)
    for table, key, value in draw(st.lists(FEATURES, max_size=2)):
        section = data.setdefault(table, {})
        if isinstance(section, dict):
            section[key] = value
    for w in jobs:
        for key in ("restart_time", "checkpoint_interval", "checkpoint_time"):
            w.pop(key, None)
        w.update(
            on_failure="elastic",
            detection=draw(st.sampled_from(["500ns", "1us", "2us"])),
            reformation_time=draw(st.sampled_from(["200ns", "1us", "3us"])),
            rejoin=draw(st.sampled_from(["next_step", "never"])),
        )
    failures = {
        "components": "links",
        "tier": "host",
        "mtbf": draw(st.sampled_from(["50us", "100us", "300us"])),
        "mttr": draw(st.sampled_from(["2us", "4us", "8us"])),
    }
    data.setdefault("failure_process", []).append({**failures, "until": "15us"})
    return name, data, draw(st.sampled_from([2, 2, 3]))


#: Open-loop workloads a differential case may stream beside a scenario's own (made as the run
#: goes, their flows take the ids after the planned ones and start at drawn times).
STREAMED = st.sampled_from(
    [
        {"kind": "poisson", "cdf": "websearch", "load": 0.3, "duration": "15us"},
        {"kind": "poisson", "cdf": "google_rpc", "load": 0.5, "duration": "15us"},
        {"kind": "synthetic", "pattern": "uniform_random", "load": 0.3, "size": "4KiB"},
        {"kind": "synthetic", "pattern": "permutation", "load": 0.4, "size": "64KiB", "process": "poisson"},
    ]
)


@st.composite
def streamed_differential(draw: Any) -> Tuple[str, Dict[str, Any], int]:
    """A differential case (above) with an open-loop workload streamed before or after the
    scenario's own workloads."""
    name, data, threads = draw(differential())
    workloads = data.setdefault("workload", [])
    assume(isinstance(workloads, list))
    beside = {**draw(STREAMED), "name": "beside"}
    workloads.insert(draw(st.sampled_from([0, len(workloads)])), beside)
    return name, data, threads


def _tables(out: Path) -> Dict[str, pa.Table]:
    """Every Arrow table of a run's folder, without the metadata (which echoes the scenario)."""
    from conftest import read_arrow

    return {f.name: read_arrow(f).replace_schema_metadata(None) for f in sorted(out.glob("*.arrow"))}


@settings(FUZZ, max_examples=300)
@given(differential())
def test_nudged_scenarios_write_the_same_tables_on_threads(
    tmp_path_factory: Any, case: Tuple[str, Dict[str, Any], int]
) -> None:
    # The parallel engine's promise (docs/parallel.md): the outputs are byte-identical for any
    # number of threads. Checked here on scenarios no test wrote by hand: a shipped one nudged,
    # with PFC, small buffers, another congestion control, load balancing or a trace switched
    # on. (It found two faults on 2026-12-05: a time-stopped run's clock on threads, and the
    # latency of in-network results.)
    _same_tables_on_threads(tmp_path_factory, case)


@settings(FUZZ, max_examples=120)
@given(elastic_differential())
def test_elastic_jobs_write_the_same_tables_on_threads(
    tmp_path_factory: Any, case: Tuple[str, Dict[str, Any], int]
) -> None:
    # Elastic jobs re-plan at each re-formation from every partition's flows, retire their
    # finished flows, and keep long windows after re-plans (docs/parallel.md, "Elastic jobs").
    # Randomised, 2,000 such cases compared equal on 2026-12-05 (465 re-planned), after a NACK
    # that started a withdrawn flow again had made a threaded run end late.
    _same_tables_on_threads(tmp_path_factory, case)


@settings(FUZZ, max_examples=150)
@given(streamed_differential())
def test_streamed_workloads_beside_any_scenario_write_the_same_tables_on_threads(
    tmp_path_factory: Any, case: Tuple[str, Dict[str, Any], int]
) -> None:
    # Streamed flows beside planned ones, elastic jobs and GPU clusters: two faults hid there
    # until 2026-12-05 (2158dcc): a streamed flow on a PXN cluster had no relay hops (dropped
    # at the scale-up switch), and an elastic job's re-planned flows read another flow's (a
    # switch counted its buffer below zero). Every run now checks that its packets balance.
    # Randomised, 4,500 such cases compared equal that day. Cut later than the others, so that
    # the streamed flows (arriving within 15 us) run.
    _same_tables_on_threads(tmp_path_factory, case, stop="50us")


def _same_tables_on_threads(
    tmp_path_factory: Any, case: Tuple[str, Dict[str, Any], int], stop: str = FUZZ_STOP
) -> None:
    """Run `case`, cut at `stop`, on one thread and on its number: the same tables and run
    statistics."""
    name, data, threads = case
    try:
        s = Scenario.from_dict(data)
        est = s.estimate(MAX_MEMORY, MAX_TRACE)
        hosts = s.describe(MAX_MEMORY)["topology"].get("hosts", 0)
    except ScenarioError:
        return  # invalid: the other fuzz tests check the error
    if est["flows"] > MAX_RUN_FLOWS or hosts > MAX_RUN_HOSTS:
        return
    cut = s.to_dict()
    own = cut.get("stop")
    if not isinstance(own, str) or own == "all_flows_done" or _longer_than(own, stop):
        cut["stop"] = stop
        cut.pop("warmup", None)
    tmp = tmp_path_factory.mktemp("diff")
    runs = {}
    previous = _alarm(2 * RUN_SECONDS)
    try:
        for n in (1, threads):
            cut["threads"] = n
            try:
                runs[n] = fabricemu.run(
                    Scenario.from_dict(cut),
                    out=tmp / f"t{n}",
                    max_memory=MAX_MEMORY,
                    max_trace_size=MAX_TRACE,
                )
            except SimulationError as e:
                raise AssertionError(f"{name}: the engine failed on {n} thread(s): {e}") from e
            except ScenarioError as e:
                # Refused on one thread (cut short, or over a guard): nothing to compare. On
                # threads only what the parallel engine does not run yet, naming `threads`, or
                # over the memory guard, whose estimate grows with the partitions (each holds
                # its packets in flight and flow records: a randomised campaign met one on
                # 2026-12-05: under 1 GiB on one thread, 1.3 GiB on two).
                over = "max_memory=" in str(e)
                assert n == 1 or "threads" in str(e) or over, f"{name}: refused on {n}: {e}"
                return
    finally:
        _disarm(previous)
    a, b = _tables(tmp / "t1"), _tables(tmp / f"t{threads}")
    assert sorted(a) == sorted(b), f"{name}: tables {sorted(a)} on one thread, {sorted(b)} on {threads}"
    for t in a:
        assert a[t].equals(b[t]), f"{name}: {t} differs on {threads} threads"
    for part in ("stats", "workloads", "packet_hops", "events", "simulated_ps"):
        one, many = runs[1].run_info[part], runs[threads].run_info[part]
        assert one == many, f"{name}: run.json {part} is {one} on one thread, {many} on {threads}"


TOML_NOISE = st.sampled_from(
    ['"', "[", "]", "=", "\n", "{", "}", ",", "\x00", "\\", "#", "'''", "1e999", "-"]
)


@settings(FUZZ, max_examples=400)
@given(st.sampled_from(sorted((ROOT / "scenarios").glob("*.toml"))), st.data())
def test_garbled_toml_text_is_a_scenario_error(path: Path, data: Any) -> None:
    text = path.read_text(encoding="utf-8")
    for _ in range(data.draw(st.integers(min_value=1, max_value=4))):
        at = data.draw(st.integers(min_value=0, max_value=len(text)))
        cut = data.draw(st.integers(min_value=0, max_value=8))
        text = text[:at] + data.draw(TOML_NOISE) + text[at + cut :]
    try:
        s = Scenario.from_toml(text, path.name)
    except ScenarioError as e:
        assert str(e)
        return
    s.to_toml()


def _corpus() -> List[Path]:
    return sorted(CORPUS.glob("*.toml"))


@pytest.mark.parametrize("path", _corpus(), ids=lambda p: p.stem)
def test_crasher_corpus(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # file names in the corpus are relative to the repository
    header = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("# "):
            break
        key, _, value = line[2:].partition(":")
        header[key.strip()] = value.strip()
    expect = header.get("expect")
    assert expect in ("error", "ok"), f"{path.name}: first line must be '# expect: error' or '# expect: ok'"
    previous = _alarm(RUN_SECONDS)
    try:
        try:
            s = Scenario.load(path)
            s.estimate(16 << 30)
            s.describe(16 << 30)
            result = fabricemu.run(s, out=tmp_path / "out", max_memory=16 << 30)
        except ScenarioError as e:
            assert expect == "error", f"{path.name}: {e}"
            for needle in header.get("message", "").split(" && "):
                assert needle in str(e), f"{path.name}: {needle!r} not in {e}"
            for secret in header.get("not-in-message", "").split(" && "):
                if secret:
                    assert secret not in str(e), f"{path.name}: {e}"
            return
    finally:
        _disarm(previous)
    assert expect == "ok", f"{path.name} ran but an error was expected"
    _check_outputs(tmp_path / "out", result.run_info)
    if "max-flow-start-ps" in header:
        starts = result.table("flows").column("start_ps").to_pylist()
        assert starts and max(v for v in starts if v is not None) < int(header["max-flow-start-ps"])


def test_a_rust_panic_never_reaches_python_as_panic_exception() -> None:
    # Every entry point turns a panic into SimulationError/ScenarioError: feed each the most hostile
    # input it accepts and check what comes out is an Exception of ours (or a plain ValueError for
    # the unit parsers).
    for f in (fabricemu._core.parse_duration, fabricemu._core.parse_size, fabricemu._core.parse_rate):
        for text in ["", "1" * 5000, "\x00", "99999999999999999999999Tbps", "-0", "1e309s", "ps"]:
            with contextlib.suppress(ValueError):
                f(text)
    for text in ["", "{", "null", "[]", '{"topology": 5}', json.dumps({"x": math.inf})]:
        for g in (fabricemu._core.parse_json, fabricemu._core.describe, fabricemu._core.topology_summary):
            with pytest.raises(ScenarioError):
                g(text)


# -- resource guards and Ctrl-C (issue 11 items 5 and 6) ---------------------------------------------


def test_memory_guard_states_the_estimate_and_the_limit_and_can_be_raised(tmp_path: Path) -> None:
    s = Scenario.load(ROOT / "scenarios" / "quickstart.toml")
    est = s.estimate()
    assert est["flows"] == 32 and est["memory"] > 0 and est["max_memory"] > est["memory"]
    with pytest.raises(ScenarioError) as e:
        fabricemu.run(s, out=tmp_path / "a", max_memory="1MiB")
    assert "of memory" in str(e.value) and "more than the limit of 1.0 MiB" in str(e.value)
    assert not (tmp_path / "a" / "run.json").exists()
    with pytest.raises(ScenarioError):
        s.describe(max_memory=1 << 20)
    with pytest.raises(ScenarioError):
        s.fabric_summary(max_memory=1 << 10)
    # Raised: it runs.
    assert fabricemu.run(s, out=tmp_path / "b", max_memory="64GiB").stats["flows_finished"] == 32
    with pytest.raises(ValueError):
        fabricemu.run(s, out=tmp_path / "c", max_memory=0)


def test_the_memory_estimate_counts_step_graph_ops() -> None:
    """A training job's ops are in the estimate (512 bytes each), by workload; other kinds have
    none; a limit its ops exceed names them."""
    s = Scenario.load(ROOT / "scenarios" / "gpt_training.toml")
    est = s.estimate()
    assert est["ops"] > 0 and est["op_memory"] == 512 * est["ops"]
    assert est["ops"] == sum(est["workload_ops"])
    parts = ("flow_memory", "op_memory", "fabric_memory", "packet_memory")
    assert est["memory"] == (64 << 20) + sum(est[k] for k in parts)
    assert Scenario.load(ROOT / "scenarios" / "quickstart.toml").estimate()["ops"] == 0
    with pytest.raises(ScenarioError) as e:
        s.estimate(max_memory=(64 << 20) + est["op_memory"] // 2)
    assert f"{est['ops']} step-graph ops" in str(e.value)


def test_cli_validate_refuses_what_run_would_refuse() -> None:
    import subprocess

    from conftest import fabricemu_executable

    exe = fabricemu_executable()

    def validate(*args: str) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
        return subprocess.run([exe, "validate", *args], capture_output=True, text=True, timeout=60)

    big = CORPUS / "fat_tree_k64_all_to_all.toml"
    r = validate(str(big))
    assert r.returncode == 2, r.stderr
    assert "workload.0" in r.stderr and "flows" in r.stderr and "more than the limit" in r.stderr
    trace = CORPUS / "links_trace_1ps.toml"
    r = validate(str(trace))
    assert r.returncode == 2 and "trace.links" in r.stderr, r.stderr
    r = subprocess.run(
        [exe, "validate", str(trace), "--max-trace-size", "1000TiB"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0 and r.stdout.startswith("ok:"), r.stderr
    quick = ROOT / "scenarios" / "quickstart.toml"
    r = validate(str(quick), "--max-memory", "1KiB")
    assert r.returncode == 2 and "more than the limit of 1.0 KiB" in r.stderr, r.stderr
    r = validate(str(quick), "--max-memory", "lots")
    assert r.returncode == 2 and "--max-memory" in r.stderr, r.stderr


def test_ctrl_c_stops_the_build(tmp_path: Path) -> None:
    # Generating 5 M Poisson flows and building the engine's state for them takes a fraction of a
    # second to seconds (the CI machine built them in under 0.2 s); Ctrl-C 0.05 s in must stop it
    # there: KeyboardInterrupt before the run begins, so no outputs are written (were the build
    # not interruptible, the interrupt would be seen only after it, at the first slice of the run,
    # which writes partial outputs). An interrupt during the validation before the build counts
    # too: it is seen when the build ends, before the run.
    import threading

    s = Scenario.from_dict(
        {
            "name": "slow-build",
            "stop": "all_flows_done",
            "topology": {"kind": "fat_tree", "k": 8},
            # The incast after it keeps the Poisson flows planned at the build: a trailing open-loop
            # workload streams (its flows made as the run goes), and the build is then too quick
            # for a Ctrl-C 0.05 s in to land in it.
            "workload": [
                {"kind": "poisson", "cdf": "google_rpc", "load": 0.5, "count": 5_000_000},
                {"kind": "incast", "receiver": 0, "senders": 2, "size": "4KB"},
            ],
        }
    )
    timer = threading.Timer(0.05, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            fabricemu.run(s, out=tmp_path / "out", max_memory="64GiB")
    finally:
        timer.cancel()
    assert not (tmp_path / "out" / "run.json").exists()


def test_sweep_points_over_the_memory_limit_fail_with_the_estimate(tmp_path: Path) -> None:
    base = ROOT / "scenarios" / "quickstart.toml"
    table = fabricemu.sweep(base, {"seed": [1, 2]}, jobs=1, max_memory="1MiB", out=tmp_path)
    errors = table.column("error").to_pylist()
    assert all(e and e.startswith("ScenarioError") and "of memory" in e for e in errors), errors
    table = fabricemu.sweep(base, {"seed": [1]}, jobs=1, max_memory="64GiB", max_trace_size="1GiB")
    assert table.column("error").to_pylist() == [None]
