"""How a run's tables are stored: the scenario's ``[output]`` table (``format = "arrow" | "parquet"``,
``compression = "none" | "zstd" | "lz4"``).

The engine writes uncompressed Arrow IPC files (no compression library is built into it: a cold
build stays fast); when ``[output]`` asks for something else, :func:`convert` rewrites each table of
the run's folder after the run, batch by batch (memory stays bounded by one record batch), each
under a temporary name in the same folder, renamed over its final name, the Arrow file removed only
after its replacement is in place. :func:`fabricemu.run` does it in the run's staging folder, before
the folder is moved into place, so a reader never sees a mix of two runs or of two formats of one.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pyarrow as pa

FORMATS = ("arrow", "parquet")
COMPRESSIONS = ("none", "zstd", "lz4")

#: Suffix of a table's file per format.
SUFFIX = {"arrow": ".arrow", "parquet": ".parquet"}


def options(scenario: Dict[str, Any]) -> Tuple[str, str]:
    """``(format, compression)`` of a scenario dictionary's ``[output]`` (defaults: arrow, none)."""
    out = scenario.get("output") or {}
    return str(out.get("format") or "arrow"), str(out.get("compression") or "none")


def convert(folder: Path, fmt: str, compression: str) -> List[str]:
    """Rewrite every ``*.arrow`` table of ``folder`` as ``fmt`` with ``compression``; returns the
    names of the files written. Nothing to do for uncompressed Arrow."""
    if fmt not in FORMATS:
        raise ValueError(f"output.format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    if compression not in COMPRESSIONS:
        raise ValueError(f"output.compression must be one of {', '.join(COMPRESSIONS)}, not {compression!r}")
    if fmt == "arrow" and compression == "none":
        return []
    written = []
    for src in sorted(folder.glob("*.arrow")):
        dest = src.with_suffix(SUFFIX[fmt])
        tmp = folder / f".{dest.name}.tmp-{os.getpid()}"
        try:
            if fmt == "parquet":
                _to_parquet(src, tmp, compression)
            else:
                _to_arrow(src, tmp, compression)
            os.replace(tmp, dest)
        finally:
            if tmp.exists():
                tmp.unlink()
        if dest != src:
            src.unlink()
        written.append(dest.name)
    return written


def _batches(src: Path) -> Tuple[pa.Schema, Any]:
    source = pa.memory_map(os.fspath(src), "r")
    reader = pa.ipc.open_file(source)
    return reader.schema, (reader.get_batch(i) for i in range(reader.num_record_batches))


def _to_arrow(src: Path, dest: Path, compression: str) -> None:
    schema, batches = _batches(src)
    opts = pa.ipc.IpcWriteOptions(compression=None if compression == "none" else compression)
    with pa.OSFile(os.fspath(dest), "wb") as sink, pa.ipc.new_file(sink, schema, options=opts) as w:
        for b in batches:
            w.write_batch(b)


def _to_parquet(src: Path, dest: Path, compression: str) -> None:
    import pyarrow.parquet as pq

    schema, batches = _batches(src)
    codec = "NONE" if compression == "none" else compression.upper()
    # The schema metadata (scenario, seed, version) is kept; dictionary-encoded columns stay so.
    with pq.ParquetWriter(os.fspath(dest), schema, compression=codec, store_schema=True) as w:
        for b in batches:
            w.write_batch(b)


def find(folder: Path, name: str) -> Optional[Path]:
    """The file of table ``name`` in ``folder``: ``<name>.arrow`` or ``<name>.parquet``."""
    for suffix in (".arrow", ".parquet"):
        p = folder / f"{name}{suffix}"
        if p.is_file():
            return p
    return None


def read(path: Path) -> pa.Table:
    """A whole table: Arrow IPC (compressed or not; memory-mapped) or Parquet."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(os.fspath(path))
    source = pa.memory_map(os.fspath(path), "r")
    return pa.ipc.open_file(source).read_all()


def rows(path: Path) -> int:
    """A table's row count, from its metadata (nothing is decompressed)."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return int(pq.ParquetFile(os.fspath(path)).metadata.num_rows)
    with pa.memory_map(os.fspath(path), "r") as source:
        reader = pa.ipc.open_file(source)
        return sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))


def plain_strings(table: pa.Table) -> pa.Table:
    """``table`` with its dictionary-encoded string columns decoded (the files keep them encoded
    for the tools that read them; the Python API gives plain strings, as it always has)."""
    fields = []
    changed = False
    for f in table.schema:
        if pa.types.is_dictionary(f.type) and (
            pa.types.is_string(f.type.value_type) or pa.types.is_large_string(f.type.value_type)
        ):
            fields.append(pa.field(f.name, f.type.value_type, f.nullable, f.metadata))
            changed = True
        else:
            fields.append(f)
    if not changed:
        return table
    return table.cast(pa.schema(fields, metadata=table.schema.metadata))
