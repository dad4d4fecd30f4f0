"""One benchmark in this process: ``python -m fabricemu.bench SCENARIO.toml [--min-time SECONDS]
[--threads N]``.

Runs the scenario once uncounted (a warm-up, which also uses up the build made when the scenario was
loaded, so every counted run builds the fabric and flow plan itself), then repeatedly until
``--min-time`` seconds of engine time have passed (at least once, at most 50 times) and prints one
JSON line: the figures of the fastest run plus the peak resident memory of this process. ``fabricemu
bench`` starts one such process per scenario, so the peak belongs to that scenario alone;
``base_rss_mib`` is the same measure after imports, before the first run. ``--no-warmup`` (the slow
cases, which take minutes) runs once, counted: the build made when the scenario was loaded may then
be reused, which is negligible next to such a run. ``--threads N`` runs it on the parallel engine
with N threads (identical outputs)."""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
from typing import Any, Dict, List, Optional

MAX_RUNS = 50


def _rss_mib() -> float:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports KiB, macOS bytes.
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fabricemu.bench")
    parser.add_argument("scenario")
    parser.add_argument("--min-time", type=float, default=1.0)
    parser.add_argument("--no-warmup", action="store_true")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)

    import fabricemu

    scenario = fabricemu.Scenario.load(args.scenario)
    base = _rss_mib()
    if not args.no_warmup:
        with tempfile.TemporaryDirectory(prefix="fabricemu-bench-") as out:
            fabricemu.run(scenario, out=out, threads=args.threads)
    runs: List[Dict[str, Any]] = []
    total = 0.0
    while not runs or (total < args.min_time and len(runs) < MAX_RUNS):
        with tempfile.TemporaryDirectory(prefix="fabricemu-bench-") as out:
            info = fabricemu.run(scenario, out=out, threads=args.threads).run_info
        runs.append(info)
        total += float(info.get("wall_seconds", 0.0))
    best = min(runs, key=lambda i: float(i.get("wall_seconds", 0.0)))
    stats = best.get("stats", {})
    row = {
        "scenario": scenario.name,
        "packet_hops": best["packet_hops"],
        "events": best["events"],
        "simulated_ps": best["simulated_ps"],
        "wall_seconds": best["wall_seconds"],
        "packet_hops_per_second": best["packet_hops_per_second"],
        "ns_per_packet_hop": (
            1e9 / best["packet_hops_per_second"] if best["packet_hops_per_second"] else None
        ),
        "events_per_second": best["events_per_second"],
        "runs": len(runs),
        "threads": args.threads or int(scenario.to_dict().get("threads", 1)),
        "flows_total": stats.get("flows_total"),
        "flows_finished": stats.get("flows_finished"),
        "peak_rss_mib": _rss_mib(),
        "base_rss_mib": base,
        "version": best.get("version"),
    }
    print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
