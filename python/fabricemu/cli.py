"""The ``fabricemu`` command line: run, validate, sweep, report, compare, show, topo, bench.

Conventions: ``-o/--out`` is where a command writes (a run's or a sweep's folder, the report's
file); ``--json`` prints the command's result as JSON on stdout instead of text; every command that
reads a scenario takes ``--set KEY=VALUE``, ``--seed N`` and ``--trace LIST`` (sweep: ``--seeds``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, NoReturn, Optional, Sequence, Tuple

import click

from . import _fmt
from ._outdir import treat_sigterm_as_interrupt
from .errors import OutputFolderBusy, ScenarioError, SimulationError, Terminated
from .scenario import Scenario, fabric_shape, parse_value

# Exit codes: 1 = the run failed, 2 = bad scenario or usage (as click), 130 = interrupted by Ctrl-C,
# 143 = stopped by SIGTERM (kill, Slurm, docker stop), as a shell reports a process a signal ended.
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143

OVERWRITE_HELP = (
    "Use OUT even if it is a non-empty folder that holds no fabricemu output "
    "(an earlier run's folder is always replaced whole)."
)


def _interrupt_code(e: BaseException) -> int:
    return EXIT_TERMINATED if isinstance(e, Terminated) else EXIT_INTERRUPTED


SET_HELP = (
    "Change one scenario value before running: KEY is a dotted path (topology.k, workload.0.size), "
    'VALUE a TOML value (8, "2MB", true, [1, 2]; bare words like 2MB are strings); VALUE null '
    "removes the key (back to its default). Repeatable."
)


SEED_HELP = "The seed (the same as --set seed=N)."
TRACE_HELP = (
    "Traces to write, e.g. queues=1us,links=10us,pfc,rates,packets,latency: NAME=INTERVAL sets "
    "[trace] NAME = { interval = INTERVAL }; pfc, rates, packets and latency alone turn the table on "
    "(rates: every change; packets: every packet event, at most 1000000 rows). Adds to the "
    "scenario's [trace] table. Repeatable."
)
#: ``--trace NAME`` without an interval: the value it sets.
TRACE_FLAGS: Dict[str, Any] = {"pfc": True, "rates": {}, "packets": {"max_rows": 1_000_000}, "latency": True}


def scenario_options(command: Any) -> Any:
    """The options every command reading a scenario takes: --set, --seed and --trace."""
    command = click.option("--trace", "traces", multiple=True, metavar="LIST", help=TRACE_HELP)(command)
    command = click.option("--seed", type=int, default=None, help=SEED_HELP)(command)
    return click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help=SET_HELP)(command)


def _trace_changes(traces: Sequence[str]) -> Dict[str, Any]:
    """``--trace queues=1us,pfc`` as dotted changes: ``{"trace.queues.interval": "1us",
    "trace.pfc": True}``."""
    changes: Dict[str, Any] = {}
    for item in traces:
        for part in filter(None, (p.strip() for p in item.split(","))):
            name, sep, interval = part.partition("=")
            name = name.strip()
            if not re.fullmatch(r"[a-z_]+", name):
                _die(f"--trace {item!r}: expected NAME or NAME=INTERVAL, e.g. queues=1us", EXIT_USAGE)
            if sep:
                changes[f"trace.{name}.interval"] = interval.strip()
            elif name in TRACE_FLAGS:
                changes[f"trace.{name}"] = TRACE_FLAGS[name]
            else:
                _die(f"--trace {name}: needs an interval, e.g. --trace {name}=1us", EXIT_USAGE)
    return changes


def _die(message: str, code: int) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def _load(
    path: str, sets: Sequence[str], seed: Optional[int] = None, traces: Sequence[str] = ()
) -> Tuple[Scenario, Optional[str]]:
    """The scenario of ``path`` with the ``--set``, ``--seed`` and ``--trace`` changes; the explicit
    ``name`` if it has one."""
    try:
        scenario = Scenario.load(path)
    except ScenarioError as e:
        _die(str(e), EXIT_USAGE)
    except (OSError, UnicodeDecodeError) as e:
        _die(f"{path}: {e}", EXIT_USAGE)
    changes: Dict[str, Any] = {}
    for item in sets:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            _die(f"--set {item!r}: expected KEY=VALUE, e.g. --set topology.k=8", EXIT_USAGE)
        # TOML has no null: the word removes the key, as None does in Scenario.with_.
        value = value.strip()
        changes[key.strip()] = None if value == "null" else parse_value(value)
    if seed is not None:
        changes["seed"] = seed
    changes.update(_trace_changes(traces))
    if changes:
        try:
            scenario = scenario.with_(changes)
        except ScenarioError as e:
            given = " ".join(
                [*(f"--set {s}" for s in sets)]
                + ([f"--seed {seed}"] if seed is not None else [])
                + [f"--trace {t}" for t in traces]
            )
            _die(f"{path} with {given}: {e}", EXIT_USAGE)
    explicit = scenario.to_dict().get("name")  # as written (the normalised one always has a name)
    return scenario, explicit


def _default_out(path: str, explicit_name: Optional[str]) -> Path:
    name = explicit_name or Path(path).stem
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "scenario"
    return Path("runs") / safe


class _Progress:
    """Progress of a run on stderr, once it has taken more than a second: on a terminal a bar
    redrawn in place; elsewhere (a batch job's log) one line every ``every`` seconds. Both show an
    estimate of the time left."""

    def __init__(self, enabled: bool, terminal: Optional[bool] = None) -> None:
        self.enabled = enabled
        self.terminal = sys.stderr.isatty() if terminal is None else terminal
        # FABRICEMU_PROGRESS_INTERVAL (seconds) sets the log lines' spacing and bounds the delay.
        try:
            every = float(os.environ.get("FABRICEMU_PROGRESS_INTERVAL", "10"))
        except ValueError:
            every = 10.0
        self.every = 0.2 if self.terminal else max(every, 0.0)
        self.delay = min(1.0, self.every)
        self.start = time.monotonic()
        self.last = 0.0
        self.shown = False

    def __call__(
        self, simulated_ps: int, stop_ps: Optional[int], events: int, finished: int, total: int
    ) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.start < self.delay or now - self.last < self.every:
            return
        self.last = now
        elapsed = now - self.start
        fraction = min(simulated_ps / stop_ps, 1.0) if stop_ps else finished / max(total, 1)
        rate = events / elapsed
        left = _eta(elapsed, fraction)
        if not self.terminal:
            click.echo(
                f"progress: {fraction * 100:.1f}%  {_fmt.duration_ps(simulated_ps)} simulated  "
                f"flows {finished}/{total}  {_fmt.rate(rate, ' events/s')}  "
                f"elapsed {_fmt.seconds(elapsed)}  left {left}",
                err=True,
            )
            return
        width = 28
        filled = int(fraction * width)
        bar = "#" * filled + "-" * (width - filled)
        line = (
            f"\r[{bar}] {fraction * 100:5.1f}%  {_fmt.duration_ps(simulated_ps)} simulated  "
            f"flows {finished}/{total}  {_fmt.rate(rate, ' events/s')}  left {left}"
        )
        click.echo(line.ljust(110), err=True, nl=False)
        self.shown = True

    def close(self) -> None:
        if self.shown:
            click.echo("\r" + " " * 110 + "\r", err=True, nl=False)


def _eta(elapsed: float, fraction: float) -> str:
    """Time left at the pace so far ("?" before any progress). With a stop time the fraction is of
    simulated time; without one, of flows finished (a rough guide: flows do not all cost alike)."""
    if fraction <= 0.0:
        return "?"
    return _fmt.seconds(elapsed * (1.0 - fraction) / fraction)


def _print_summary(name: str, summary: Dict[str, Any], out: Path, result: Any = None) -> None:
    s = summary
    state = " (interrupted)" if s["interrupted"] else ""
    click.echo(
        f"{name}{state}: {s['finished']}/{s['flows']} flows finished, "
        f"{_fmt.duration_ps(s['simulated_us'] * 1e6)} simulated"
    )
    click.echo(f"  FCT       p50 {_fmt.micros(s['fct_p50_us'])}   p99 {_fmt.micros(s['fct_p99_us'])}")
    click.echo(
        f"  slowdown  p50 {_fmt.number(s['slowdown_p50'])}   p95 {_fmt.number(s['slowdown_p95'])}"
        f"   p99 {_fmt.number(s['slowdown_p99'])}"
    )
    click.echo(
        f"  events {_fmt.count(s['events'])} ({_fmt.rate(s['events_per_second'])})   "
        f"packet-hops {_fmt.count(s['packet_hops'])} ({_fmt.rate(s['packet_hops_per_second'])})   "
        f"wall {_fmt.seconds(s['wall_seconds'])}   drops {_fmt.count(s['drops'])}"
    )
    parallel = (getattr(result, "run_info", None) or {}).get("parallel")
    if parallel:
        click.echo(
            f"  threads {parallel['threads']}: {_fmt.count(parallel['windows'])} windows, "
            f"{_fmt.count(parallel['windows_on_one_thread'])} of them on one thread (measured faster there)"
        )
    if s.get("accepted_throughput") is not None:
        _print_synthetic(s, result)
    if s.get("one_way_p50_us") is not None:
        click.echo(
            f"  one-way   p50 {_fmt.micros(s['one_way_p50_us'])}   p99 {_fmt.micros(s['one_way_p99_us'])}"
            f"   p999 {_fmt.micros(s['one_way_p999_us'])}"
            f"   jitter (p99 - p50) {_fmt.micros(s['one_way_jitter_us'])}"
        )
    if s.get("packet_trace_truncated"):
        click.echo("  packets.arrow stopped at [trace] packets.max_rows (packet_trace_truncated)")
    if s.get("iteration_time_mean_us") is not None:
        click.echo(
            f"  steps: {s['iterations']} iterations, time mean {_fmt.micros(s['iteration_time_mean_us'])}"
            f"   p50 {_fmt.micros(s['iteration_time_p50_us'])}"
            f"   p99 {_fmt.micros(s['iteration_time_p99_us'])}"
            f"   exposed comm {_fmt.number(s['exposed_comm_fraction'])}"
            f"   bubble {_fmt.number(s['bubble_fraction'])}"
        )
    if s.get("lost_gpu_seconds") is not None:
        click.echo(
            f"  jobs: {s['job_failures']} failure episodes, lost {_fmt.number(s['lost_gpu_seconds'])} GPU-s,"
            f" {s['useful_iterations']} useful and {s['lost_iterations']} lost iterations (run.json jobs)"
        )
        relative = s.get("relative_throughput")
        reformations = s.get("job_reformations")
        if reformations or relative is not None:
            click.echo(
                "  throughput over failure-free "
                + (_fmt.number(relative) if relative is not None else "n/a (no failure-free iteration)")
                + (f", {reformations} elastic group re-formations" if reformations else "")
            )
    if result is not None:
        _print_fabric(result)
        _print_workloads(result)
        for warning in result.run_info.get("warnings", []):
            click.echo(f"  warning: {warning}")
    flows = result.path_of("flows").name if result is not None else "flows.arrow"
    click.echo(f"  output: {out}/{flows}, {out}/run.json")


def _print_synthetic(s: Dict[str, Any], result: Any) -> None:
    """Synthetic workloads: the measurement window's offered load, accepted throughput and latency."""
    window = ""
    info = result.run_info.get("synthetic", {}) if result is not None else {}
    if info:
        window = (
            f" (window {_fmt.duration_ps(info['warmup_ps'])}..{_fmt.duration_ps(info['stop_ps'])}, "
            f"{info['senders']:,} hosts)"
        )
    click.echo(
        f"  synthetic: offered load {s['offered_load']:.3f}, accepted throughput "
        f"{s['accepted_throughput']:.3f} of injection bandwidth{window}"
    )
    click.echo(
        f"  message latency  mean {_fmt.micros(s['latency_mean_us'])}   "
        f"p50 {_fmt.micros(s['latency_p50_us'])}   p99 {_fmt.micros(s['latency_p99_us'])}   "
        f"max {_fmt.micros(s['latency_max_us'])}   "
        f"({s['messages_measured']:,} measured, {s['messages_unfinished']:,} unfinished)"
    )


def _print_fabric(result: Any) -> None:
    """What the fabric did: the spread of uplink utilisation (path imbalance), ECN, PFC, faults."""
    st = result.run_info.get("stats", {})
    if st.get("uplink_utilisation_mean", 0.0) > 0.0:
        click.echo(
            "  uplink utilisation  "
            f"min {st['uplink_utilisation_min']:.2f}   mean {st['uplink_utilisation_mean']:.2f}   "
            f"max {st['uplink_utilisation_max']:.2f}   cv {st['uplink_utilisation_cv']:.2f}"
        )
    parts = []
    if st.get("ecn_marks"):
        parts.append(f"ECN marks {_fmt.count(st['ecn_marks'])}")
    if st.get("cnps_sent"):
        parts.append(f"CNPs {_fmt.count(st['cnps_sent'])}")
    if st.get("pfc_pause_frames"):
        parts.append(
            f"PFC pauses {_fmt.count(st['pfc_pause_frames'])} "
            f"(paused {_fmt.duration_ps(st.get('paused_ps', 0))} over all ports)"
        )
    if st.get("pfc_deadlocks"):
        parts.append(f"PFC DEADLOCKS {st['pfc_deadlocks']}")
    if st.get("max_global_hops"):
        parts.append(
            f"non-minimal data packets {_fmt.count(st.get('data_packets_nonminimal', 0))} "
            f"(control {_fmt.count(st.get('control_packets_nonminimal', 0))})   "
            f"most global hops {st['max_global_hops']}"
        )
    if st.get("faults_applied"):
        parts.append(
            f"faults {_fmt.count(st['faults_applied'])} "
            f"(links down {st.get('link_down_ps', 0) / 1e12:.3g} link-s)"
        )
    if st.get("ocs_reconfigurations"):
        parts.append(
            f"OCS reconfigurations {_fmt.count(st['ocs_reconfigurations'])} "
            f"(circuits dark {st.get('ocs_circuit_ps_lost', 0) / 1e12:.3g} circuit-s)"
        )
    if st.get("link_fault_drops"):
        parts.append(f"lost to link faults {_fmt.count(st['link_fault_drops'])}")
    if st.get("corrupted_drops"):
        parts.append(f"corrupted {_fmt.count(st['corrupted_drops'])}")
    if st.get("flows_unreachable"):
        parts.append(f"flows cut off by faults {_fmt.count(st['flows_unreachable'])}")
    if st.get("timeouts"):
        parts.append(f"timeouts {_fmt.count(st['timeouts'])}")
    if st.get("trimmed_packets"):
        parts.append(f"trimmed {_fmt.count(st['trimmed_packets'])}")
    if st.get("pulls_sent"):
        parts.append(f"credits granted {_fmt.count(st['pulls_sent'])}")
    if st.get("in_network_calls") is not None:
        parts.append(
            f"in-network calls {_fmt.count(st['in_network_calls'])} "
            f"(fell back to ring {_fmt.count(st.get('in_network_fallbacks', 0))}"
            + (
                f", waited for a context {_fmt.count(st['in_network_waits'])})"
                if st.get("in_network_waits") is not None
                else ")"
            )
        )
    if parts:
        click.echo("  " + "   ".join(parts))
    _print_busiest(result)


def _print_busiest(result: Any) -> None:
    """The deepest queue and the busiest link, by name ("agg:3 -> core:1 prio 3"), when traced."""
    from .analysis import busiest_ports, link_utilisation

    names = result.names()
    if result.has_table("queues"):
        top = busiest_ports(result, n=1).to_pylist()
        if top:
            q = top[0]
            click.echo(
                f"  deepest queue       {names.queue(q['port'], q['priority'])}: "
                f"max {_fmt.size(q['max_bytes'])}, mean {_fmt.size(q['mean_bytes'])}"
            )
    if result.has_table("links"):
        per_link = link_utilisation(result, by="link")
        if per_link.num_rows and "utilisation_mean" in per_link.column_names:
            rows = sorted(per_link.to_pylist(), key=lambda r: -(r["utilisation_mean"] or 0.0))
            r = rows[0]
            click.echo(
                f"  busiest link        {names.port(r['link'])}: mean utilisation "
                f"{(r['utilisation_mean'] or 0.0):.2f}, max {(r['utilisation_max'] or 0.0):.2f}"
            )


#: Flow-size bucket edges of the run summary's slowdown lines.
SIZE_BUCKET_EDGES = ("10KB", "100KB", "1MB", "10MB")


def _print_workloads(result: Any) -> None:
    """Slowdown p50/p95/p99 by flow-size bucket, each poisson workload's offered load and each
    collective workload's completion and bus bandwidth."""
    from .analysis import slowdown_by_size

    buckets = [b for b in slowdown_by_size(result, edges=SIZE_BUCKET_EDGES).to_pylist() if b["flows"]]
    if buckets:
        click.echo("  slowdown by flow size (p50 / p95 / p99 of the finished flows):")
        for b in buckets:
            click.echo(
                f"    {b['label']:<13} {b['flows']:>9,} flows  {_fmt.number(b['slowdown_p50']):>7} / "
                f"{_fmt.number(b['slowdown_p95'])} / {_fmt.number(b['slowdown_p99'])}"
            )
    for w in result.run_info.get("workloads", []):
        if w.get("kind") == "poisson" and w.get("offered_load") is not None:
            click.echo(
                f"  {w['name']}: offered load {w['offered_load'] * 100:.1f}% of the host links "
                f"(target {w['target_load'] * 100:g}%; {w['offered_load_wire'] * 100:.1f}% with headers)"
            )
    if result.has_table("collectives"):
        rows = result.collectives.to_pylist()
        for name in dict.fromkeys(r["workload"] for r in rows):
            mine = [r for r in rows if r["workload"] == name]
            done = [r for r in mine if r["duration_ps"] is not None]
            first = mine[0]
            groups = len({r["group"] for r in mine})
            line = (
                f"  {name}: {first['op']} {first['algorithm']}, {groups} x {first['ranks']} ranks, "
                f"{len(done)}/{len(mine)} finished"
            )
            if done:
                mean_ps = sum(r["duration_ps"] for r in done) / len(done)
                busbw = sum(r["busbw_bps"] for r in done) / len(done)
                line += f", mean {_fmt.duration_ps(mean_ps)}, busbw {busbw / 1e9:.1f} Gbps"
            click.echo(line)


class _Commands(click.Group):
    """The command group. Ctrl-C or SIGTERM that comes before a command has anything to save (while
    it loads its scenario, say) exits as an interrupted command does, 130 or 143, not with click's
    "Aborted!" and 1: a script that stops fabricemu sees why it ended."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as e:
            click.echo("interrupted", err=True)
            sys.exit(_interrupt_code(e))


@click.group(
    cls=_Commands,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="""\b
Examples:
  fabricemu run scenarios/quickstart.toml
  fabricemu run scenarios/incast.toml --set workload.0.senders=63 -o runs/incast63
  fabricemu validate scenarios/permutation.toml --set topology.k=16
  fabricemu sweep scenarios/incast.toml --grid workload.0.senders=4,8,15 --seeds 1,2 -o sweeps/incast
  fabricemu report sweeps/incast
  fabricemu compare runs/a runs/b
  fabricemu show runs/quickstart
  fabricemu topo scenarios/permutation.toml --set topology.k=16
  fabricemu bench --quick
""",
)
@click.version_option(package_name="fabricemu", prog_name="fabricemu")
def main() -> None:
    """fabricemu: a packet-level network fabric emulator.

    Scenarios are TOML files (see scenarios/ and the README); each run writes flows.arrow (one row
    per flow) and run.json (scenario, seed, statistics) into its output folder; a sweep writes
    sweep.arrow (one row per run) and each run under runs/.
    """
    treat_sigterm_as_interrupt()  # SIGTERM stops a run like Ctrl-C (exit code 143)
    # A simulator process gains nothing from BLAS threads (numpy comes with pyarrow, imported by
    # the commands that read outputs, after this): one, unless the user chose otherwise.
    for variable in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ.setdefault(variable, "1")


def _size_option(text: Optional[str], option: str) -> Optional[int]:
    """A --max-memory / --max-trace-size value (``64GiB`` or bytes) as bytes; a bad one exits 2."""
    if text is None:
        return None
    from . import _core

    try:
        n = int(_core.parse_size(text))
    except ValueError as e:
        _die(f"{option}: {e}", EXIT_USAGE)
    if n <= 0:
        _die(f"{option}: expected a positive size, found {text!r}", EXIT_USAGE)
    return n


JSON_HELP = "Print the result as JSON (to stdout) instead of text."
MAX_MEMORY_HELP = (
    "Refuse a scenario whose run is estimated to need more memory than this, e.g. 64GiB "
    "(default: 80% of the memory available)."
)
MAX_TRACE_HELP = (
    "Refuse a scenario whose trace files are estimated to exceed this, e.g. 100GiB (default: 20GiB)."
)


@main.command(
    epilog="""\b
Examples:
  fabricemu run scenarios/quickstart.toml
  fabricemu run scenarios/permutation.toml -o runs/perm-k16 --set topology.k=16 --set seed=2
  fabricemu run scenarios/incast.toml --set 'workload.0.size="2MB"' --quiet
  fabricemu run scenarios/allreduce_congested.toml --controller my_controller:decide
"""
)
@click.argument("scenario", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "-o",
    "--out",
    type=click.Path(file_okay=False),
    default=None,
    help="Output folder (written whole when the run ends; an earlier run there is replaced). "
    "Default: runs/<name>, the scenario's name or else the file's stem.",
)
@scenario_options
@click.option("--overwrite", is_flag=True, help=OVERWRITE_HELP)
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors.")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@click.option("--max-memory", default=None, metavar="SIZE", help=MAX_MEMORY_HELP)
@click.option("--max-trace-size", default=None, metavar="SIZE", help=MAX_TRACE_HELP)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["arrow", "parquet"]),
    default=None,
    help="How to store the tables: Arrow IPC files (default) or Parquet (the same as "
    "--set output.format=...).",
)
@click.option(
    "--compression",
    type=click.Choice(["none", "zstd", "lz4"]),
    default=None,
    help="Compress the tables (the same as --set output.compression=...).",
)
@click.option(
    "--controller",
    default=None,
    metavar="MODULE:FUNCTION",
    help="A live controller: FUNCTION of MODULE (imported from the current folder or the Python "
    "path) is called with the telemetry every control interval and returns actions "
    "(docs/control.md).",
)
@click.option(
    "--control-interval",
    default=None,
    metavar="DURATION",
    help="Simulated time between controller calls, e.g. 20us (default: [control] interval, or 20us).",
)
@click.option(
    "--threads",
    type=click.IntRange(1, 256),
    default=None,
    help="Threads for this one run: the fabric is split into that many partitions run in "
    "parallel, with byte-identical outputs (the same as --set threads=N; docs/parallel.md).",
)
def run(
    scenario: str,
    out: Optional[str],
    sets: Tuple[str, ...],
    seed: Optional[int],
    traces: Tuple[str, ...],
    overwrite: bool,
    quiet: bool,
    as_json: bool,
    max_memory: Optional[str],
    max_trace_size: Optional[str],
    fmt: Optional[str],
    compression: Optional[str],
    controller: Optional[str],
    control_interval: Optional[str],
    threads: Optional[int],
) -> None:
    """Run SCENARIO (a TOML file, or an earlier run's run.json to run it again) and print a summary.

    Writes OUT/flows.arrow, OUT/nodes.arrow, OUT/ports.arrow (the fabric by name), the traces and
    OUT/run.json ([output] or --format/--compression store the tables as Parquet or compressed
    Arrow). A run shows its progress on stderr: a bar on a
    terminal, otherwise (a batch log) a line every 10 seconds (FABRICEMU_PROGRESS_INTERVAL changes
    it). A bad scenario prints one line naming the key, line and column, and exits with 2. Ctrl-C
    stops the run, writes the partial outputs (run.json has "interrupted": true) and exits with 130;
    SIGTERM does the same and exits with 143. The run is written into a temporary folder beside OUT
    and moved into place at the end; OUT is locked meanwhile (a second run on it fails with exit
    code 1). With --controller, a Python function acts on the run every control interval; a bad
    action it returns stops the run (partial outputs) and exits with 1.
    """
    from ._run import run as run_scenario
    from .errors import ControlError

    control: Dict[str, Any] = {}
    if controller is not None:
        from .control import load_controller

        if "" not in sys.path:
            sys.path.insert(0, "")
        try:
            control["controller"] = load_controller(controller)
        except (ImportError, ValueError) as e:
            _die(f"--controller: {e}" if not str(e).startswith("--controller") else str(e), EXIT_USAGE)
        if control_interval is not None:
            control["control_interval"] = control_interval
    elif control_interval is not None:
        _die("--control-interval needs --controller", EXIT_USAGE)

    storage = {
        **({"output.format": fmt} if fmt else {}),
        **({"output.compression": compression} if compression else {}),
    }
    storage_sets = [f"{k}={json.dumps(v)}" for k, v in storage.items()]
    if threads is not None:
        storage_sets.append(f"threads={threads}")
    s, explicit = _load(scenario, [*sets, *storage_sets], seed, traces)
    out_dir = Path(out) if out else _default_out(scenario, explicit)
    progress = _Progress(enabled=not quiet)
    try:
        result = run_scenario(
            s,
            out=out_dir,
            progress=progress,
            overwrite=overwrite,
            max_memory=_size_option(max_memory, "--max-memory"),
            max_trace_size=_size_option(max_trace_size, "--max-trace-size"),
            **control,
        )
    except KeyboardInterrupt as e:
        progress.close()
        if _interrupted_outputs(out_dir):
            click.echo(
                f"interrupted: partial outputs written to {out_dir} (run.json has interrupted=true)",
                err=True,
            )
        else:
            click.echo("interrupted", err=True)
        sys.exit(_interrupt_code(e))
    except ScenarioError as e:
        progress.close()
        _die(str(e), EXIT_USAGE)
    except ControlError as e:
        progress.close()
        _die(f"{e} (partial outputs in {out_dir})", EXIT_FAILED)
    except OutputFolderBusy as e:
        progress.close()
        _die(f"{e.filename}: {e.strerror}", EXIT_FAILED)
    except FileExistsError as e:
        progress.close()
        _die(f"{e.filename}: {e.strerror}", EXIT_USAGE)
    except SimulationError as e:
        progress.close()
        _die(str(e), EXIT_FAILED)
    except OSError as e:
        progress.close()
        _die(str(e), EXIT_FAILED)
    progress.close()
    if as_json:
        click.echo(json.dumps({"out": str(out_dir), **result.summary()}, indent=2))
    elif not quiet:
        _print_summary(s.name, result.summary(), out_dir, result)


def _interrupted_outputs(out: Path) -> bool:
    try:
        info = json.loads((out / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    flows = (out / "flows.arrow").is_file() or (out / "flows.parquet").is_file()
    return bool(info.get("interrupted")) and flows


@main.command(
    epilog="""\b
Examples:
  fabricemu validate scenarios/quickstart.toml
  fabricemu validate scenarios/incast.toml --set topology.k=16 --set workload.0.senders=127
  fabricemu validate scenarios/quickstart.toml --normalised > quickstart_full.toml
"""
)
@click.argument("scenario", type=click.Path(exists=True, dir_okay=False))
@scenario_options
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@click.option(
    "--normalised",
    is_flag=True,
    help="Print the scenario with every default written out (as run.json records it) as TOML "
    '(with --json: as the "normalised" object).',
)
@click.option("--max-memory", default=None, metavar="SIZE", help=MAX_MEMORY_HELP)
@click.option("--max-trace-size", default=None, metavar="SIZE", help=MAX_TRACE_HELP)
def validate(
    scenario: str,
    sets: Tuple[str, ...],
    seed: Optional[int],
    traces: Tuple[str, ...],
    as_json: bool,
    normalised: bool,
    max_memory: Optional[str],
    max_trace_size: Optional[str],
) -> None:
    """Check SCENARIO without running it: prints "ok: <fabric and workloads>" or the error
    (one line naming the key, line and column; exit code 2). A scenario whose run would need more
    memory or trace space than the limits is an error too, stating the estimate. With
    --normalised, prints the valid scenario with every default written out instead (TOML that
    runs exactly as SCENARIO does)."""
    s, _ = _load(scenario, sets, seed, traces)
    memory = _size_option(max_memory, "--max-memory")
    try:
        estimate = s.estimate(memory, _size_option(max_trace_size, "--max-trace-size"))
        line = s.summary_line(memory)
        described = s.describe(memory) if as_json else None
    except ScenarioError as e:
        _die(str(e), EXIT_USAGE)
    if as_json:
        record = {"ok": True, "summary": line, "scenario": described, "estimate": estimate}
        if normalised:
            record["normalised"] = s.to_dict(normalised=True)
        click.echo(json.dumps(record, indent=2))
        return
    if normalised:
        click.echo(s.to_toml(), nl=False)
        return
    click.echo(f"ok: {line}")


# -- sweep ------------------------------------------------------------------------------------------


def _split_values(text: str) -> List[str]:
    """``4,8,"a,b",[1, 2]`` -> ``["4", "8", '"a,b"', "[1, 2]"]``: commas inside quotes or brackets
    do not split."""
    parts: List[str] = []
    depth = 0
    quote: Optional[str] = None
    current = ""
    for ch in text:
        if quote:
            current += ch
            if ch == quote:
                quote = None
            continue
        if ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
            continue
        current += ch
    parts.append(current.strip())
    return parts


def _parse_grid(items: Sequence[str]) -> Dict[str, List[Any]]:
    grid: Dict[str, List[Any]] = {}
    for item in items:
        key, sep, values = item.partition("=")
        key = key.strip()
        if not sep or not key:
            _die(f"--grid {item!r}: expected KEY=V1,V2,..., e.g. --grid topology.k=4,8", EXIT_USAGE)
        if key in grid:
            _die(f"--grid {key} is given twice", EXIT_USAGE)
        parts = _split_values(values)
        if any(p == "" for p in parts):
            _die(f"--grid {item!r}: an empty value (expected KEY=V1,V2,...)", EXIT_USAGE)
        if key == "seed":
            _die("the seed is swept with --seeds 1,2,3, not --grid seed=...", EXIT_USAGE)
        grid[key] = [parse_value(p) for p in parts]
    return grid


def _parse_seeds(text: str) -> List[int]:
    seeds: List[int] = []
    for part in _split_values(text):
        a, sep, b = part.partition("..")
        try:
            if sep:
                lo, hi = int(a), int(b)
                if hi < lo:
                    raise ValueError
                seeds.extend(range(lo, hi + 1))
            else:
                seeds.append(int(part))
        except ValueError:
            _die(f"--seeds {text!r}: expected integers and ranges, e.g. 1,2,3 or 1..5", EXIT_USAGE)
    if any(s < 0 for s in seeds):
        _die(f"--seeds {text!r}: seeds are non-negative", EXIT_USAGE)
    if len(set(seeds)) != len(seeds):
        _die(f"--seeds {text!r}: a seed is repeated", EXIT_USAGE)
    return seeds


class _SweepProgress:
    """A progress bar over the points on a terminal; otherwise one line per point (unless quiet)."""

    def __init__(self, total: int, quiet: bool) -> None:
        self.total = total
        self.quiet = quiet
        self.tty = sys.stderr.isatty()
        self.start = time.monotonic()
        self.counts = {"ran": 0, "reused": 0, "failed": 0}

    def __call__(self, event: Any) -> None:
        self.counts[event.status] = self.counts.get(event.status, 0) + 1
        if self.quiet:
            return
        if self.tty:
            width = 28
            filled = int(event.done / max(event.total, 1) * width)
            bar = "#" * filled + "-" * (width - filled)
            elapsed = time.monotonic() - self.start
            failed = f", {self.counts['failed']} failed" if self.counts["failed"] else ""
            ran = self.counts["ran"] + self.counts["failed"]
            left = event.total - event.done
            eta = f", ~{_fmt.seconds(elapsed / ran * left)} left" if ran and left else ""
            line = (
                f"\r[{bar}] {event.done}/{event.total} points{failed}  "
                f"{_fmt.seconds(elapsed)}{eta}  {event.name}"
            )
            click.echo(line[:110].ljust(110), err=True, nl=False)
        else:
            if event.status == "failed":
                what = f"FAILED: {event.row['error']}"
            else:
                m = event.row["metrics"] or {}
                what = (
                    f"{event.status}: slowdown p99 {_fmt.number(m.get('slowdown_p99'))}, "
                    f"goodput {_fmt.number(m.get('goodput_gbps'))} Gbps"
                )
            click.echo(f"[{event.done}/{event.total}] {event.name}: {what}", err=True)

    def close(self) -> None:
        if self.tty and not self.quiet:
            click.echo("\r" + " " * 110 + "\r", err=True, nl=False)


@main.command(
    "sweep",
    epilog="""\b
Examples:
  fabricemu sweep scenarios/incast.toml --grid workload.0.senders=4,8,15 --seeds 1,2,3 -o sweeps/incast
  fabricemu sweep scenarios/permutation.toml --grid topology.k=4,8 --grid workload.0.size=64KiB,1MB -j 2
  fabricemu sweep scenarios/permutation.toml --grid 'workload.0.size="1MB","4MB"' \\
      --scheduler tcp://scheduler:8786 -o /shared/sweeps/perm
""",
)
@click.argument("scenario", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--grid",
    "grids",
    multiple=True,
    metavar="KEY=V1,V2,...",
    help="A swept parameter: a dotted key path and its values (TOML values, comma-separated; commas "
    "inside quotes or brackets do not split). Repeatable: the sweep runs every combination.",
)
@click.option("--seeds", default=None, metavar="LIST", help="Seeds to run each point with: 1,2,3 or 1..5.")
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    help="Worker processes (default: one per core); with --scheduler, the most points in flight.",
)
@click.option(
    "--scheduler",
    default=None,
    metavar="ADDRESS",
    help="Run the points on a Dask cluster (tcp://host:8786); OUT must be on a file system the "
    "workers share. Needs dask.distributed.",
)
@click.option(
    "-o",
    "--out",
    type=click.Path(file_okay=False),
    default=None,
    help="Output folder: OUT/sweep.arrow and each run in OUT/runs/<point>/. Default: sweeps/<name>.",
)
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help=SET_HELP)
@click.option("--trace", "traces", multiple=True, metavar="LIST", help=TRACE_HELP)
@click.option("--rerun", is_flag=True, help="Run every point again, even those OUT already holds.")
@click.option("--overwrite", is_flag=True, help=OVERWRITE_HELP)
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors and the final line.")
@click.option("--max-memory", default=None, metavar="SIZE", help=MAX_MEMORY_HELP + " Per run.")
@click.option("--max-trace-size", default=None, metavar="SIZE", help=MAX_TRACE_HELP + " Per run.")
def sweep_command(
    scenario: str,
    grids: Tuple[str, ...],
    seeds: Optional[str],
    jobs: Optional[int],
    scheduler: Optional[str],
    out: Optional[str],
    sets: Tuple[str, ...],
    traces: Tuple[str, ...],
    rerun: bool,
    overwrite: bool,
    quiet: bool,
    max_memory: Optional[str],
    max_trace_size: Optional[str],
) -> None:
    """Run SCENARIO at every combination of the --grid values and --seeds, each run in its own
    process, and write OUT/sweep.arrow: one row per run with the parameters (columns named by key
    path, and seed), the metrics (FCT slowdown p50/p95/p99, goodput, drops, pause time, max queue,
    events/s, ...) and an error column.

    A failed point (an invalid value, an engine error) is reported in its row and the others go on;
    the exit code is then 1. Running the same sweep again skips the points OUT already holds (an
    interrupted sweep resumes); --rerun runs them all.
    """
    from .sweep import expand
    from .sweep import sweep as run_sweep

    base, explicit = _load(scenario, sets, None, traces)
    grid = _parse_grid(grids)
    seed_list = _parse_seeds(seeds) if seeds else None
    try:
        total = len(expand(grid or None, seed_list))
    except (TypeError, ValueError) as e:
        _die(str(e), EXIT_USAGE)
    out_dir = Path(out) if out else Path("sweeps") / _default_out(scenario, explicit).name

    client = None
    executor = None
    if scheduler:
        try:
            from dask.distributed import Client
        except ImportError:
            _die("--scheduler needs dask.distributed: pip install 'dask[distributed]'", EXIT_USAGE)
        try:
            client = Client(scheduler)  # connect timeout: dask's distributed.comm.timeouts.connect
        except (OSError, TimeoutError, ValueError) as e:
            _die(f"cannot connect to the Dask scheduler {scheduler}: {e}", EXIT_FAILED)
        executor = client.get_executor()
    progress = _SweepProgress(total, quiet)
    started = time.monotonic()
    try:
        table = run_sweep(
            base,
            grid or None,
            seeds=seed_list,
            jobs=jobs,
            executor=executor,
            out=out_dir,
            resume=not rerun,
            progress=progress,
            overwrite=overwrite,
            max_memory=_size_option(max_memory, "--max-memory"),
            max_trace_size=_size_option(max_trace_size, "--max-trace-size"),
        )
    except KeyboardInterrupt as e:
        progress.close()
        click.echo(
            f"interrupted: the points done are in {out_dir / 'sweep.arrow'}; run the same command to resume",
            err=True,
        )
        sys.exit(_interrupt_code(e))
    except OutputFolderBusy as e:
        progress.close()
        _die(f"{e.filename}: {e.strerror}", EXIT_FAILED)
    except FileExistsError as e:
        progress.close()
        _die(f"{e.filename}: {e.strerror}", EXIT_USAGE)
    except OSError as e:
        progress.close()
        _die(str(e), EXIT_FAILED)
    finally:
        if client is not None:
            client.close()
    progress.close()
    if not quiet:
        _print_sweep(table)
    c = progress.counts
    click.echo(
        f"{out_dir / 'sweep.arrow'}: {table.num_rows} runs ({c['ran']} ran, {c['reused']} already done, "
        f"{c['failed']} failed) in {_fmt.seconds(time.monotonic() - started)}"
    )
    if c["failed"]:
        sys.exit(EXIT_FAILED)


def _print_sweep(table: Any) -> None:
    from .sweep import parameters

    params = parameters(table)
    metrics = [
        ("slowdown_p50", "slowdown p50"),
        ("slowdown_p99", "p99"),
        ("goodput_gbps", "goodput Gbps"),
        ("drops", "drops"),
    ]
    if "accepted_throughput" in table.column_names and table.column("accepted_throughput").null_count < len(
        table
    ):
        metrics = [
            ("offered_load", "offered"),
            ("accepted_throughput", "accepted"),
            ("latency_mean_us", "latency mean us"),
            ("latency_p99_us", "p99 us"),
            ("drops", "drops"),
        ]
    header = [*params, *(label for _, label in metrics), "error"]
    rows = []
    for r in table.to_pylist():
        cells = [_fmt_value(r[p]) for p in params]
        cells += [_fmt_value(r[m]) for m, _ in metrics]
        error = r["error"] or ""
        cells.append(error if len(error) <= 60 else error[:57] + "...")
        rows.append(cells)
    _print_table(header, rows, left=len(params))


def _fmt_value(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, int):
        return f"{v:,}" if abs(v) >= 10000 else str(v)
    return str(v)


def _print_table(header: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> None:
    table = [list(header), *[list(r) for r in rows]]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for n, row in enumerate(table):
        cells = [
            c.ljust(w) if i < left or i == len(row) - 1 else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths))
        ]
        click.echo("  ".join(cells).rstrip())
        if n == 0:
            click.echo("  ".join("-" * w for w in widths))


# -- report, compare, topo --------------------------------------------------------------------------


@main.command(
    epilog="""\b
Examples:
  fabricemu report runs/quickstart                 # writes runs/quickstart/report.html
  fabricemu report sweeps/incast -o incast.html
"""
)
@click.argument("out", type=click.Path(exists=True, file_okay=False))
@click.option(
    "-o",
    "--out",
    "--output",
    "output",
    type=click.Path(dir_okay=False),
    default=None,
    help="The HTML file to write (-o is where every command writes: a run's or sweep's folder, "
    "the report's file). Default: OUT/report.html.",
)
@click.option("--title", default=None, help="The page's title.")
@click.option(
    "--no-run-reports",
    is_flag=True,
    help="A sweep: do not write each run's own report (runs/<point>/report.html, which the "
    "sweep's table of runs links to).",
)
def report(out: str, output: Optional[str], title: Optional[str], no_run_reports: bool) -> None:
    """Write a self-contained HTML report (plots inlined as SVG, no script) of the run or sweep in OUT.

    A run: summary, fabric, FCT slowdown CDF per flow-size bucket, collectives (per call time and
    bus bandwidth, per tier), step timeline, queue depth of the busiest queues, link-utilisation
    heat map, PFC pause timeline, congestion-control rates (each when the run has or traced it),
    time plots on one shared time axis. A sweep: each metric against the swept parameter, one line
    per variant, accepted against offered load with the y = x line, and the table of runs, each
    linking to its own report (written too, unless --no-run-reports). Needs matplotlib:
    pip install 'fabricemu[plot]'.
    """
    from .report import PLOT_EXTRA, write_report

    folder = Path(out)
    if not (folder / "run.json").is_file() and not (folder / "sweep.arrow").is_file():
        _die(f"{out}: not a run's or a sweep's output folder (no run.json or sweep.arrow)", EXIT_USAGE)
    try:
        path = write_report(folder, output, title=title, run_reports=not no_run_reports)
    except ImportError as e:
        _die(f"{e}" if "matplotlib" in str(e) else f"{e} ({PLOT_EXTRA})", EXIT_FAILED)
    except (OSError, ValueError) as e:
        _die(str(e), EXIT_FAILED)
    click.echo(f"wrote {path}")


@main.command(
    epilog="""\b
Examples:
  fabricemu compare runs/ecmp runs/spray
  fabricemu compare sweeps/x/runs/load=0.3,seed=1 sweeps/x/runs/load=0.7,seed=1 --json
"""
)
@click.argument("outs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
def compare(outs: Tuple[str, ...], as_json: bool) -> None:
    """Print the metrics of two or more runs (output folders) side by side; with two, also the
    relative change from the first to the second."""
    from .analysis import compare as compare_runs
    from .results import open_result

    if len(outs) < 2:
        _die("compare needs at least two output folders", EXIT_USAGE)
    results = []
    for o in outs:
        try:
            results.append(open_result(o))
        except FileNotFoundError as e:
            _die(f"{o}: {e.strerror}", EXIT_USAGE)
    try:
        table = compare_runs(*results, names=[_short(o) for o in outs])
    except (OSError, ValueError) as e:
        _die(str(e), EXIT_FAILED)
    if as_json:
        click.echo(json.dumps(table.to_pylist(), indent=2))
        return
    runs = [c for c in table.column_names if c not in ("metric", "change")]
    header = ["metric", *runs] + (["change"] if "change" in table.column_names else [])
    rows = []
    for r in table.to_pylist():
        cells = [r["metric"], *[_fmt_metric(r["metric"], r[c]) for c in runs]]
        if "change" in r:
            cells.append("-" if r["change"] is None else f"{r['change'] * 100:+.1f}%")
        rows.append(cells)
    _print_table(header, rows)
    for name, o in zip(runs, outs):
        if name != o:
            click.echo(f"  {name}: {o}")


@main.command(
    epilog="""\b
Examples:
  fabricemu show runs/quickstart
  fabricemu show sweeps/incast
  fabricemu show runs/quickstart --json
"""
)
@click.argument("out", type=click.Path(exists=True, file_okay=False))
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
def show(out: str, as_json: bool) -> None:
    """Print the summary of the run or sweep in OUT again, as `fabricemu run` (or `sweep`) printed
    it when it ended, from its files alone."""
    from .results import open_result
    from .sweep import open_sweep

    folder = Path(out)
    if (folder / "sweep.arrow").is_file():
        try:
            table = open_sweep(folder)
        except (OSError, ValueError) as e:
            _die(f"{out}: {e}", EXIT_FAILED)
        if as_json:
            click.echo(json.dumps(table.to_pylist(), indent=2, default=str))
            return
        _print_sweep(table)
        failed = sum(1 for e in table.column("error").to_pylist() if e)
        click.echo(f"{folder / 'sweep.arrow'}: {table.num_rows} runs ({failed} failed)")
        return
    if not (folder / "run.json").is_file():
        _die(f"{out}: not a run's or a sweep's output folder (no run.json or sweep.arrow)", EXIT_USAGE)
    try:
        result = open_result(folder)
        summary = result.summary()
    except (OSError, ValueError) as e:
        _die(f"{out}: {e}", EXIT_FAILED)
    if as_json:
        click.echo(json.dumps({"out": str(folder), **summary}, indent=2))
        return
    name = result.run_info.get("scenario", {}).get("name") or folder.name
    _print_summary(name, summary, folder, result)


@main.command(
    epilog="""\b
Examples:
  fabricemu run scenarios/incast.toml --trace packets -o runs/incast
  fabricemu pcap runs/incast --port leaf:0/0 -o incast.pcapng
  fabricemu pcap runs/incast --port leaf:0/0 --port spine:1/2 -o two-ports.pcapng
  tshark -r incast.pcapng -V | less
"""
)
@click.argument("out", type=click.Path(exists=True, file_okay=False))
@click.option(
    "--port",
    "ports",
    multiple=True,
    required=True,
    metavar="NODE/INDEX",
    help="An egress port: a node as faults name it and the index of the port among the node's ports "
    '("leaf:3/2"), or a node id ("15/0"). Repeatable: one pcapng interface per port.',
)
@click.option(
    "-o",
    "--out",
    "--output",
    "output",
    type=click.Path(dir_okay=False),
    default=None,
    help="The pcapng file to write (-o is where every command writes). Default: OUT/packets.pcapng.",
)
@click.option(
    "--snaplen",
    type=int,
    default=None,
    help="Bytes captured per packet (default 128: every synthesised header; 0: whole packets, which "
    "Wireshark's RoCE dissector decodes without flagging the cut payload); the original length is kept.",
)
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
def pcap(
    out: str, ports: Tuple[str, ...], output: Optional[str], snaplen: Optional[int], as_json: bool
) -> None:
    """Write a pcapng file (Wireshark, tshark) of the packets that crossed the chosen ports of the
    run in OUT, with synthesised Ethernet/IPv4/UDP/RoCEv2 headers (ECN bits, QPN from the flow, PSN
    from the packet) and the simulated timestamps (ns). The run must have traced packets there:
    [trace] packets (or --trace packets)."""
    from .pcap import DEFAULT_SNAPLEN, write_pcap
    from .results import open_result

    folder = Path(out)
    try:
        result = open_result(folder)
    except FileNotFoundError as e:
        _die(f"{out}: {e.strerror}", EXIT_USAGE)
    if not result.has_table("packets"):
        _die(
            f"{out}: the run has no packet trace (packets.arrow): run it with --trace packets "
            "or [trace] packets = {} in the scenario",
            EXIT_USAGE,
        )
    path = Path(output) if output else folder / "packets.pcapng"
    try:
        n = write_pcap(result, list(ports), path, snaplen=DEFAULT_SNAPLEN if snaplen is None else snaplen)
    except ValueError as e:
        _die(str(e), EXIT_USAGE)
    except OSError as e:
        _die(str(e), EXIT_FAILED)
    if as_json:
        click.echo(json.dumps({"file": str(path), "packets": n, "ports": list(ports)}))
        return
    click.echo(f"wrote {path}: {n} packets on {len(ports)} port{'s' if len(ports) != 1 else ''}")


def _short(path: str) -> str:
    p = Path(path)
    return p.name or str(p)


def _fmt_metric(metric: str, v: Optional[float]) -> str:
    if v is None:
        return "-"
    if metric in (
        "flows",
        "flows_finished",
        "drops",
        "retransmits",
        "ecn_marks",
        "cnps",
        "max_queue_bytes",
        "events",
        "packet_hops",
    ):
        return f"{int(v):,}"
    return f"{v:.4g}"


@main.command(
    epilog="""\b
Examples:
  fabricemu topo scenarios/quickstart.toml
  fabricemu topo scenarios/permutation.toml --set topology.k=16
  fabricemu topo scenarios/incast.toml --json
  fabricemu topo scenarios/quickstart.toml --set cluster.gpus_per_server=2
  fabricemu topo scenarios/dragonfly.toml --export graphml -o dragonfly.graphml
"""
)
@click.argument("scenario", type=click.Path(exists=True, dir_okay=False))
@scenario_options
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@click.option(
    "--export",
    "export",
    type=click.Choice(["graphml", "json"]),
    default=None,
    help="Write the fabric for drawing tools (Gephi, yEd, networkx, d3): nodes by name with their "
    "role, pod, group, rack..., one edge per link with its rate, delay and tier. Needs -o.",
)
@click.option(
    "-o",
    "--out",
    "out",
    type=click.Path(dir_okay=False),
    default=None,
    help="The file --export writes.",
)
def topo(
    scenario: str,
    sets: Tuple[str, ...],
    seed: Optional[int],
    traces: Tuple[str, ...],
    as_json: bool,
    export: Optional[str],
    out: Optional[str],
) -> None:
    """Print the size of SCENARIO's fabric without running it: hosts, switches, links per tier,
    bisection bandwidth (maximum flow between the two halves of the hosts), oversubscription
    (overall and per switch role) and diameter (the longest shortest host-to-host path). With a
    [cluster]: GPUs, servers, scale-up domains, racks, NICs, rails, planes and the per-GPU
    scale-up and scale-out bandwidth (the bisection then leaves scale-up links out).

    Links are counted as cables, each carrying both directions; the traces count directions
    (links.arrow has a row per direction and interval, ports.arrow a row per direction): the line
    says both. --export writes the fabric as GraphML or JSON (node-link) to -o FILE."""
    if (export is None) != (out is None):
        _die("--export and -o go together: --export graphml -o fabric.graphml", EXIT_USAGE)
    s, _ = _load(scenario, sets, seed, traces)
    if export is not None and out is not None:
        from . import _export

        try:
            nodes, ports = s.fabric_tables()
        except ScenarioError as e:
            _die(str(e), EXIT_USAGE)
        text = (_export.to_graphml if export == "graphml" else _export.to_json)(nodes, ports, s.name)
        try:
            _export.write(Path(out), text)
        except OSError as e:
            _die(f"{out}: {e}", EXIT_FAILED)
        click.echo(f"{out}: {nodes.num_rows:,} nodes, {ports.num_rows // 2:,} links ({export})")
        return
    f = s.fabric_summary()
    if as_json:
        click.echo(json.dumps(f, indent=2))
        return
    shape = fabric_shape(s.describe()["topology"])
    click.echo(f"{s.name}: {shape}")
    roles = ", ".join(f"{r['switches']} {r['role']}" for r in f["roles"])
    click.echo(f"  hosts             {f['hosts']:,}" + (" (GPUs)" if f.get("cluster") else ""))
    if f.get("cluster"):
        _topo_cluster(f["cluster"])
    click.echo(f"  switches          {f['switches']:,} ({roles})")
    if f.get("ocs"):
        _topo_ocs(f["ocs"])
    tiers = ", ".join(
        f"{t['links']:,} {t['tier']} at {_rate_range(t['rate_min_bps'], t['rate_max_bps'])}"
        for t in f["tiers"]
    )
    directed = f.get("directed_links", 2 * f["links"])
    click.echo(
        f"  links             {f['links']:,} ({tiers}), each both directions: "
        f"{directed:,} one-direction links as links.arrow and ports.arrow count them"
    )
    ratio = f["bisection_ratio"]
    full = "full bisection" if ratio >= 1.0 else f"{ratio:.3g} of full"
    click.echo(
        f"  bisection         {_fmt.bps(f['bisection_bps'])} "
        f"(demand {_fmt.bps(f['bisection_demand_bps'])}: {full})"
    )
    per_role = ", ".join(
        f"{r['role']} {_ratio(r['oversubscription'])}"
        for r in f["roles"]
        if r["oversubscription"] is not None
    )
    click.echo(
        f"  oversubscription  {_ratio(f['oversubscription'])} overall" + (f"; {per_role}" if per_role else "")
    )
    if f["diameter_links"] is None:
        click.echo("  diameter          - (some hosts cannot reach each other)")
    else:
        click.echo(f"  diameter          {f['diameter_links']} links ({f['diameter_switches']} switches)")


def _topo_cluster(c: Dict[str, Any]) -> None:
    """The GPU-server lines of ``fabricemu topo`` (a scenario with a ``[cluster]``)."""
    plural = lambda n, word: f"{n:,} {word}" + ("" if n == 1 else "s")  # noqa: E731
    domains = (
        f"{plural(c['scaleup_domains'], 'scale-up domain')} of {c['gpus_per_domain']}"
        if c["scaleup_domains"]
        else "no scale-up domain"
    )
    click.echo(
        f"  GPUs              {c['gpus']:,} ({plural(c['servers'], 'server')} x {c['gpus_per_server']}, "
        f"{domains}, {plural(c['racks'], 'rack')})"
    )
    shared = ", shared by GPUs" if c["shared_nics"] else ""
    click.echo(
        f"  NICs              {c['nics']:,} ({c['nics_per_server']} per server{shared}; "
        f"{plural(c['rails'], 'rail')}, {plural(c['planes'], 'plane')}, {c['cabling']} cabling, "
        f"cross-rail {c['cross_rail']})"
    )
    up = _fmt.bps(c["scaleup_bps_per_gpu"]) if c["scaleup_bps_per_gpu"] else "-"
    click.echo(f"  per GPU           scale-up {up}, scale-out {_fmt.bps(c['scaleout_bps_per_gpu'])}")


def _topo_ocs(o: Dict[str, Any]) -> None:
    """The optical-circuit-switch line of ``fabricemu topo`` (a scenario with an ``[ocs]``)."""
    changes = o["reconfigurations"]
    click.echo(
        f"  OCS               {o['ports']:,} ports, {o['switches']:,} {o['role']} switches x "
        f"{o['uplinks']} uplinks; {o['circuits']:,} circuits at {_fmt.bps(o['link_rate_bps'])}"
        f" ({o['dark_ports']:,} ports dark); {changes:,} reconfiguration{'' if changes == 1 else 's'}"
        f" scheduled, {_fmt.duration_ps(o['reconfiguration_time_ps'])} each"
    )


def _rate_range(lo: int, hi: int) -> str:
    a = _fmt.bps(lo)
    return a if lo == hi else f"{a}-{_fmt.bps(hi)}"


def _ratio(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:.3g}:1"


@main.command(
    epilog="""\b
Examples:
  fabricemu bench
  fabricemu bench --quick --json bench.json
  fabricemu bench --slow
  fabricemu bench --case fat_tree_k16_permutation --threads 1,2,4
"""
)
@click.option(
    "--quick",
    is_flag=True,
    help="Only the small scenarios (skips fat_tree k=16 and the GPU cases), each run once "
    "(unless --min-time is given).",
)
@click.option(
    "--slow",
    is_flag=True,
    help="Also the slow cases: the 1 GiB 256-GPU hierarchical all-reduce (run once unless "
    "--min-time is given, minutes).",
)
@click.option(
    "--scale",
    is_flag=True,
    help="Also the large fabrics (fat_tree k=24 and k=32 permutations, k=24 under link failures, "
    "the 1,056-host dragonfly), each run once unless --min-time is given (a large case's one "
    "run moves with the machine's hour: --min-time 20 takes the fastest of several): cost per "
    "packet-hop as the fabric grows.",
)
@click.option(
    "--case",
    "cases",
    multiple=True,
    metavar="NAME",
    help="Only this benchmark (repeatable); it runs whatever --quick, --slow and --scale say.",
)
@click.option(
    "--threads",
    "threads_list",
    default=None,
    metavar="N[,N...]",
    help="A threads sweep: run each case at each of these thread counts (the parallel engine, "
    "identical outputs), with its speed-up over the first count.",
)
@click.option(
    "--min-time",
    type=float,
    default=None,
    help="Repeat a scenario until this many seconds of engine time have passed; report the fastest "
    "run. Default 1 (the cases of --quick, --slow and --scale run once unless it is given).",
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, writable=True, allow_dash=True),
    is_flag=False,
    flag_value="-",
    default=None,
    help="Print the figures as JSON (to stdout) instead of the table; --json FILE: also write them to FILE.",
)
def bench(
    quick: bool,
    slow: bool,
    scale: bool,
    cases: Tuple[str, ...],
    threads_list: Optional[str],
    min_time: Optional[float],
    json_path: Optional[str],
) -> None:
    """Run the fixed benchmark scenarios, each in its own process, and print per scenario:
    packet-hops, events, simulated time, wall seconds, packet-hops/s, ns per packet-hop, events/s
    and peak memory.

    Wall time is the engine's (building the fabric and running it, not writing outputs), from the
    fastest of the repeated runs. Peak RSS is the process's maximum resident set; "base" is the same
    measure after imports, before the first run."""
    from .bench import BENCHMARKS

    known = {b.name for b in BENCHMARKS}
    for c in cases:
        if c not in known:
            _die(f"--case {c}: no such benchmark (one of: {', '.join(sorted(known))})", EXIT_USAGE)
    sweep = _thread_counts(threads_list)
    rows: List[Dict[str, Any]] = []
    for b in BENCHMARKS:
        if cases and b.name not in cases:
            continue
        if not cases and ((quick and not b.quick) or (b.slow and not slow) or (b.scale and not scale)):
            continue
        once = min_time is None and (quick or b.slow or b.scale)
        first: Optional[float] = None
        counts: List[Optional[int]] = list(sweep) or [None]
        for threads in counts:
            label = b.name if threads is None else f"{b.name} ({threads} threads)"
            click.echo(f"running {label} ({b.description}) ...", err=True)
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "fabricemu.bench",
                    str(b.path),
                    "--min-time",
                    str(0.0 if once else (1.0 if min_time is None else min_time)),
                    *(["--no-warmup"] if b.slow or b.scale else []),
                    *(["--threads", str(threads)] if threads is not None else []),
                ],
                stdout=subprocess.PIPE,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                check=False,
            )
            if proc.returncode != 0:
                _die(f"benchmark {label} failed with exit code {proc.returncode}", EXIT_FAILED)
            row = json.loads(proc.stdout.decode().strip().splitlines()[-1])
            row["name"] = b.name
            if sweep:
                wall = float(row["wall_seconds"])
                first = wall if first is None else first
                row["speedup"] = first / wall if wall > 0 else None
            rows.append(row)
    if json_path == "-":
        click.echo(json.dumps(rows, indent=2))
        return
    _print_bench(rows)
    if json_path:
        Path(json_path).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


def _thread_counts(text: Optional[str]) -> List[int]:
    """``--threads 1,2,4``: the thread counts of a sweep (none without the option)."""
    if text is None:
        return []
    try:
        counts = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        counts = []
    if not counts or any(not 1 <= c <= 256 for c in counts):
        _die(
            f"--threads {text}: expected thread counts from 1 to 256 separated by commas, like 1,2,4",
            EXIT_USAGE,
        )
    return counts


def _print_bench(rows: List[Dict[str, Any]]) -> None:
    sweep = any("speedup" in r for r in rows)
    header = (
        "scenario",
        "packet-hops",
        "events",
        "simulated",
        "wall",
        "packet-hops/s",
        "ns/hop",
        "events/s",
        "runs",
        "peak RSS MiB",
        "base MiB",
    ) + (("threads", "speed-up") if sweep else ())
    table = [header]
    for r in rows:
        table.append(
            (
                r["name"],
                _fmt.count(r["packet_hops"]),
                _fmt.count(r["events"]),
                _fmt.duration_ps(r["simulated_ps"]),
                _fmt.seconds(r["wall_seconds"]),
                _fmt.rate(r["packet_hops_per_second"]),
                f"{1e9 / r['packet_hops_per_second']:.0f}" if r["packet_hops_per_second"] else "-",
                _fmt.rate(r["events_per_second"]),
                str(r["runs"]),
                f"{r['peak_rss_mib']:.1f}",
                f"{r['base_rss_mib']:.1f}",
            )
            + ((str(r.get("threads", 1)), _speedup(r.get("speedup"))) if sweep else ())
        )
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for n, row in enumerate(table):
        cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:])]
        click.echo("  ".join(cells))
        if n == 0:
            click.echo("  ".join("-" * w for w in widths))


def _speedup(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:.2f}x"


if __name__ == "__main__":  # pragma: no cover
    main()
