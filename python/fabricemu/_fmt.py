"""Human-readable numbers for the CLI and reprs."""

from __future__ import annotations

from typing import Optional


def duration_ps(ps: Optional[float]) -> str:
    """``1234567`` ps -> ``"1.235 us"``."""
    if ps is None:
        return "-"
    for scale, unit in ((1e12, "s"), (1e9, "ms"), (1e6, "us"), (1e3, "ns")):
        if abs(ps) >= scale:
            return f"{ps / scale:.4g} {unit}"
    return f"{ps:.4g} ps"


def micros(us: Optional[float]) -> str:
    """A time given in microseconds, in the unit that reads best (``"30.3 ms"``), ``"-"`` for none."""
    return "-" if us is None else duration_ps(us * 1e6)


def seconds(s: Optional[float]) -> str:
    if s is None:
        return "-"
    if s >= 100:
        return f"{s:.0f} s"
    if s >= 1:
        return f"{s:.2f} s"
    return f"{s * 1e3:.1f} ms"


def rate(per_second: Optional[float], unit: str = "/s") -> str:
    """``12345678.0`` -> ``"12.3 M/s"``."""
    if per_second is None:
        return "-"
    for scale, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if per_second >= scale:
            return f"{per_second / scale:.3g} {prefix}{unit}"
    return f"{per_second:.3g} {unit}"


def count(n: Optional[int]) -> str:
    return "-" if n is None else f"{n:,}"


def number(v: Optional[float], digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}g}"


def size(n: Optional[int]) -> str:
    """``128000000`` -> ``"128 MB"`` (decimal units, three significant digits)."""
    if n is None:
        return "-"
    for scale, unit in ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} B"


def bps(v: Optional[float]) -> str:
    """Bits per second: ``4.096e14`` -> ``"410 Tbps"``."""
    if v is None:
        return "-"
    for scale, unit in ((1e15, "Pbps"), (1e12, "Tbps"), (1e9, "Gbps"), (1e6, "Mbps"), (1e3, "Kbps")):
        if v >= scale:
            return f"{v / scale:.3g} {unit}"
    return f"{v:.3g} bps"
