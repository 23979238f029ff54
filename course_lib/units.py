"""Numbers in the units a human reads: '41.3 ms', '12.4 GiB', '198.4 TFLOP/s'."""

from __future__ import annotations


def time_scale(seconds: float) -> tuple[float, str]:
    """(seconds per unit, unit) that :func:`fmt_time` writes `seconds` in: (1e-3, 'ms') for 0.0413."""
    if abs(seconds) >= 1000:
        return 60.0, "min"
    return next(((scale, unit) for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"))
                 if abs(seconds) >= scale), (1e-9, "ns"))


def fmt_time(seconds: float) -> str:
    """Seconds in the unit a human reads: '41.3 ms', '12.0 µs', '2.51 s', '125 s', '20.8 min'."""
    scale, unit = time_scale(seconds)
    if unit == "min":
        return f"{seconds / 60:.1f} min"
    if abs(seconds) >= 100:
        return f"{seconds:.0f} s"
    return f"{seconds / scale:.3g} {unit}"


def fmt_bytes(n: float) -> str:
    """Bytes in binary units: '12.4 GiB', '163.2 MiB', '512 B'."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))  # SI, largest first


def rate_scale(rate: float, unit: str) -> tuple[float, str]:
    """The SI scale that reads well for `rate`, with the prefixed unit: (1e9, 'GFLOP/s')."""
    for scale, prefix in _PREFIXES:
        if rate >= scale:
            return scale, prefix + unit
    return 1.0, unit


def unit_scale(prefixed: str, unit: str) -> float | None:
    """The scale of `prefixed`, `unit` with an SI prefix or none: ('GFLOP/s', 'FLOP/s') -> 1e9,
    ('tok/s', 'tok/s') -> 1.0; None where `prefixed` is not `unit` so written."""
    if not unit or not prefixed.endswith(unit):
        return None
    return {"": 1.0, **{prefix: scale for scale, prefix in _PREFIXES}}.get(prefixed.removesuffix(unit))


def fmt_rate(rate: float, unit: str) -> str:
    """A rate with an SI prefix, to three digits at least: '198.4 TFLOP/s', '3.10 GB/s', '12.3 kimg/s'
    (so that two rates printed beside a ratio give that ratio: 2.34 / 1.65, not 2.3 / 1.7)."""
    scale, prefixed = rate_scale(rate, unit)
    v = rate / scale
    return f"{v:.{2 if abs(v) < 10 else 1}f} {prefixed}"


def fmt_count(n: float, digits: int = 2) -> str:
    """A count to `digits` significant digits, with thousands separators: 1388 -> '1,400'."""
    return format(float(format(n, f".{digits}g")), ",.0f")
