"""The reproducibility record a run adds to the core's run.json: when and where it ran, which file
and overrides the scenario came from, and every output file with its row count."""

from __future__ import annotations

import datetime
import json
import os
import platform
from pathlib import Path
from typing import Any, Dict, List

from .scenario import Scenario

RUN_FILE = "run.json"


def now_utc() -> str:
    """The current UTC time, ISO 8601 to the second (``2026-12-01T01:02:03Z``)."""
    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    return now.isoformat().replace("+00:00", "Z")


def host() -> Dict[str, Any]:
    """The machine and interpreter that ran it."""
    return {
        "hostname": platform.node(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }


def outputs(folder: Path) -> List[Dict[str, Any]]:
    """Every file of the run folder but run.json, by name: its size and, for Arrow IPC and Parquet
    files, its rows (from the record batches' headers through a memory map, or the Parquet
    footer)."""
    from . import _storage  # pyarrow: after the run (`fabricemu._run` loads it meanwhile)

    files = []
    for path in sorted(folder.iterdir(), key=lambda p: p.name):
        if not path.is_file() or path.name == RUN_FILE:
            continue
        entry: Dict[str, Any] = {"file": path.name, "bytes": path.stat().st_size}
        if path.suffix in (".arrow", ".parquet"):
            entry["rows"] = _storage.rows(path)
        files.append(entry)
    return files


def complete(folder: Path, info: Dict[str, Any], scenario: Scenario, started: str) -> Dict[str, Any]:
    """Add the record to ``info`` (the core's run.json) and rewrite run.json in ``folder`` (write
    then rename: a reader never sees half a file). Returns the completed dictionary."""
    info = dict(info)
    info["started_utc"] = started
    info["finished_utc"] = now_utc()
    info["host"] = host()
    info["source"] = scenario.source
    info["overrides"] = scenario.overrides
    info["outputs"] = outputs(folder)
    target = folder / RUN_FILE
    tmp = folder / f".{RUN_FILE}.tmp"
    tmp.write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, target)
    return info
