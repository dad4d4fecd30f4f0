"""The ``fabricemu`` command line: run, validate, bench."""

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
from .errors import ScenarioError, SimulationError
from .scenario import Scenario, parse_value

# Exit codes: 1 = the run failed, 2 = bad scenario or usage (as click), 130 = interrupted by Ctrl-C.
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

SET_HELP = (
    "Change one scenario value before running: KEY is a dotted path (topology.k, workload.0.size), "
    'VALUE a TOML value (8, "2MB", true, [1, 2]; bare words like 2MB are strings). Repeatable.'
)


def _die(message: str, code: int) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def _load(path: str, sets: Sequence[str]) -> Tuple[Scenario, Optional[str]]:
    """The scenario of ``path`` with the ``--set`` changes; the explicit ``name`` if it has one."""
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
        changes[key.strip()] = parse_value(value.strip())
    if changes:
        try:
            scenario = scenario.with_(changes)
        except ScenarioError as e:
            given = " ".join(f"--set {s}" for s in sets)
            _die(f"{path} with {given}: {e}", EXIT_USAGE)
    explicit = scenario.to_dict(normalised=True).get("name")
    return scenario, explicit


def _default_out(path: str, explicit_name: Optional[str]) -> Path:
    name = explicit_name or Path(path).stem
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "scenario"
    return Path("runs") / safe


class _Progress:
    """A one-line progress display on stderr, shown once a run has taken more than a second."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.start = time.monotonic()
        self.last = 0.0
        self.shown = False

    def __call__(
        self, simulated_ps: int, stop_ps: Optional[int], events: int, finished: int, total: int
    ) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.start < 1.0 or now - self.last < 0.2:
            return
        self.last = now
        fraction = min(simulated_ps / stop_ps, 1.0) if stop_ps else finished / max(total, 1)
        width = 28
        filled = int(fraction * width)
        bar = "#" * filled + "-" * (width - filled)
        rate = events / (now - self.start)
        line = (
            f"\r[{bar}] {fraction * 100:5.1f}%  {_fmt.duration_ps(simulated_ps)} simulated  "
            f"flows {finished}/{total}  {_fmt.rate(rate, ' events/s')}"
        )
        click.echo(line.ljust(100), err=True, nl=False)
        self.shown = True

    def close(self) -> None:
        if self.shown:
            click.echo("\r" + " " * 100 + "\r", err=True, nl=False)


def _print_summary(name: str, summary: Dict[str, Any], out: Path) -> None:
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
    click.echo(f"  output: {out}/flows.arrow, {out}/run.json")


@click.group(
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="""\b
Examples:
  fabricemu run scenarios/quickstart.toml
  fabricemu run scenarios/incast.toml --set workload.0.senders=63 -o runs/incast63
  fabricemu validate scenarios/permutation.toml --set topology.k=16
  fabricemu bench --quick
""",
)
@click.version_option(package_name="fabricemu", prog_name="fabricemu")
def main() -> None:
    """fabricemu: a packet-level network fabric emulator.

    Scenarios are TOML files (see scenarios/ and the README); each run writes flows.arrow (one row
    per flow) and run.json (scenario, seed, statistics) into its output folder.
    """


@main.command(
    epilog="""\b
Examples:
  fabricemu run scenarios/quickstart.toml
  fabricemu run scenarios/permutation.toml -o runs/perm-k16 --set topology.k=16 --set seed=2
  fabricemu run scenarios/incast.toml --set 'workload.0.size="2MB"' --quiet
"""
)
@click.argument("scenario", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "-o",
    "--out",
    type=click.Path(file_okay=False),
    default=None,
    help="Output folder (created; files in it are replaced). "
    "Default: runs/<name>, the scenario's name or else the file's stem.",
)
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help=SET_HELP)
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors.")
def run(scenario: str, out: Optional[str], sets: Tuple[str, ...], quiet: bool) -> None:
    """Run SCENARIO (a TOML file) and print a summary.

    Writes OUT/flows.arrow and OUT/run.json. A bad scenario prints one line naming the key, line and
    column, and exits with 2. Ctrl-C stops the run, writes the partial outputs (run.json has
    "interrupted": true) and exits with 130.
    """
    from .results import run as run_scenario

    s, explicit = _load(scenario, sets)
    out_dir = Path(out) if out else _default_out(scenario, explicit)
    progress = _Progress(enabled=not quiet and sys.stderr.isatty())
    try:
        result = run_scenario(s, out=out_dir, progress=progress)
    except KeyboardInterrupt:
        progress.close()
        if _interrupted_outputs(out_dir):
            click.echo(
                f"interrupted: partial outputs written to {out_dir} (run.json has interrupted=true)",
                err=True,
            )
        else:
            click.echo("interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except ScenarioError as e:
        progress.close()
        _die(str(e), EXIT_USAGE)
    except SimulationError as e:
        progress.close()
        _die(str(e), EXIT_FAILED)
    except OSError as e:
        progress.close()
        _die(str(e), EXIT_FAILED)
    progress.close()
    if not quiet:
        _print_summary(s.name, result.summary(), out_dir)


def _interrupted_outputs(out: Path) -> bool:
    try:
        info = json.loads((out / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return bool(info.get("interrupted")) and (out / "flows.arrow").is_file()


@main.command(
    epilog="""\b
Examples:
  fabricemu validate scenarios/quickstart.toml
  fabricemu validate scenarios/incast.toml --set topology.k=16 --set workload.0.senders=127
"""
)
@click.argument("scenario", type=click.Path(exists=True, dir_okay=False))
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help=SET_HELP)
def validate(scenario: str, sets: Tuple[str, ...]) -> None:
    """Check SCENARIO without running it: prints "ok: <fabric and workloads>" or the error
    (one line naming the key, line and column; exit code 2)."""
    s, _ = _load(scenario, sets)
    click.echo(f"ok: {s.summary_line()}")


@main.command(
    epilog="""\b
Examples:
  fabricemu bench
  fabricemu bench --quick --json bench.json
"""
)
@click.option("--quick", is_flag=True, help="Only the small scenarios (skips fat_tree k=16), each run once.")
@click.option(
    "--min-time",
    type=float,
    default=1.0,
    show_default=True,
    help="Repeat a scenario until this many seconds of engine time have passed; report the fastest run.",
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    help="Also write the figures as JSON to this file.",
)
def bench(quick: bool, min_time: float, json_path: Optional[str]) -> None:
    """Run the fixed benchmark scenarios, each in its own process, and print per scenario:
    packet-hops, events, simulated time, wall seconds, packet-hops/s, events/s and peak memory.

    Wall time is the engine's (building the fabric and running it, not writing outputs), from the
    fastest of the repeated runs. Peak RSS is the process's maximum resident set; "base" is the same
    measure after imports, before the first run."""
    from .bench import BENCHMARKS

    rows: List[Dict[str, Any]] = []
    for b in BENCHMARKS:
        if quick and not b.quick:
            continue
        click.echo(f"running {b.name} ({b.description}) ...", err=True)
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "fabricemu.bench",
                str(b.path),
                "--min-time",
                str(0.0 if quick else min_time),
            ],
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            check=False,
        )
        if proc.returncode != 0:
            _die(f"benchmark {b.name} failed with exit code {proc.returncode}", EXIT_FAILED)
        row = json.loads(proc.stdout.decode().strip().splitlines()[-1])
        row["name"] = b.name
        rows.append(row)
    _print_bench(rows)
    if json_path:
        Path(json_path).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


def _print_bench(rows: List[Dict[str, Any]]) -> None:
    header = (
        "scenario",
        "packet-hops",
        "events",
        "simulated",
        "wall",
        "packet-hops/s",
        "events/s",
        "runs",
        "peak RSS MiB",
        "base MiB",
    )
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
                _fmt.rate(r["events_per_second"]),
                str(r["runs"]),
                f"{r['peak_rss_mib']:.1f}",
                f"{r['base_rss_mib']:.1f}",
            )
        )
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for n, row in enumerate(table):
        cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:])]
        click.echo("  ".join(cells))
        if n == 0:
            click.echo("  ".join("-" * w for w in widths))


if __name__ == "__main__":  # pragma: no cover
    main()
