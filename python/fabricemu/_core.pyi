"""Type stubs of the compiled module ``fabricemu._core`` (kept honest by ``mypy.stubtest``)."""

from os import PathLike
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

__all__ = [
    "__version__",
    "describe",
    "estimate",
    "fabric_tables",
    "kept_build",
    "parse_duration",
    "parse_json",
    "parse_rate",
    "parse_size",
    "parse_toml",
    "run",
    "to_toml",
    "toml_to_json",
    "topology_summary",
]

__version__: str

def parse_toml(text: str, source: str = "") -> str: ...
def parse_json(text: str) -> str: ...
def to_toml(scenario_json: str) -> str: ...
def toml_to_json(text: str) -> str: ...
def describe(scenario_json: str, max_memory: Optional[int] = None) -> str: ...
def estimate(
    scenario_json: str, max_memory: Optional[int] = None, max_trace_size: Optional[int] = None
) -> str: ...
def kept_build() -> Optional[str]: ...
def run(
    scenario_json: str,
    out_dir: Union[str, PathLike[str]],
    progress: Optional[Callable[[int, Optional[int], int, int, int], Any]] = None,
    slice_events: int = 2000000,
    max_memory: Optional[int] = None,
    max_trace_size: Optional[int] = None,
    controller: Optional[Callable[[Dict[str, Any]], Optional[Sequence[Any]]]] = None,
    control_interval: Optional[int] = None,
    miscount_for_test: bool = False,
    shadow_alongside: bool = True,
) -> str: ...
def topology_summary(scenario_json: str, max_memory: Optional[int] = None) -> str: ...
def fabric_tables(scenario_json: str, max_memory: Optional[int] = None) -> Tuple[bytes, bytes]: ...
def parse_duration(text: str) -> int: ...
def parse_size(text: str) -> int: ...
def parse_rate(text: str) -> int: ...
