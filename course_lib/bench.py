"""Timing that tells the truth: warm-up, synchronisation, median and spread.

Everything here goes through ``torch.utils.benchmark`` (which synchronises CUDA
around each measurement) or CUDA events.  The one exception is
:func:`time_without_sync`, which exists to *show* the pitfall of wall-clock timing
around asynchronous GPU work.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

# torch.utils.benchmark imports cpp_extension, which warns "No CUDA runtime is found" on
# CPU-only machines with a CUDA build of torch: noise for learners, not a problem.
logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
from torch.utils import benchmark  # noqa: E402

from course_lib import units
from course_lib.device import cpu_name
from course_lib.device import label as device_label
from course_lib.device import sync as synchronize


@dataclass
class Timing:
    """One measurement row: median seconds per call, interquartile range, throughput."""

    name: str
    device: str
    median_s: float
    iqr_s: float
    runs: int
    work: float | None = None  # units of work per call (FLOPs, bytes, images…)
    unit: str = ""  # unit of `work` per second, e.g. "FLOP/s", "B/s", "img/s"

    @property
    def rate(self) -> float | None:
        """Work per second, or None when no work was given."""
        return None if self.work is None else self.work / self.median_s

    def __str__(self) -> str:
        spread = f"± {units.fmt_time(self.iqr_s / 2)}" if self.runs > 1 else "(one run)"  # no spread
        line = f"{self.name:<28} | {units.fmt_time(self.median_s):>10} {spread:<12} | "
        if self.rate is not None:
            line += f"{units.fmt_rate(self.rate, self.unit):>14} | "
        return line + self.device


def time_fn(
    fn: Callable[[], object],
    *,
    name: str,
    device: torch.device | str,
    work: float | None = None,
    unit: str = "",
    warmup: int = 2,
    min_run_s: float = 0.2,
) -> Timing:
    """Median seconds per call of `fn`, with warm-up, via ``torch.utils.benchmark``.

    ``Timer.blocked_autorange`` repeats `fn` until `min_run_s` has passed and
    synchronises CUDA before reading the clock, so queued kernels are counted.
    """
    for _ in range(warmup):
        fn()
    synchronize(device)
    m = benchmark.Timer(stmt="fn()", globals={"fn": fn}, label=name).blocked_autorange(
        min_run_time=min_run_s
    )
    return Timing(name, device_label(device), m.median, m.iqr, len(m.times), work, unit)


def time_cuda_events(fn: Callable[[], object], *, repeats: int = 10) -> float:
    """Median seconds per call measured with CUDA events on the current stream."""
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return sorted(times)[len(times) // 2]


def time_without_sync(fn: Callable[[], object], repeats: int = 10) -> float:
    """The classic mistake, kept for demonstration: wall clock around async work.

    On a GPU this measures how long it takes to *queue* the kernels, not to run them.
    """
    fn()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats


def matmul_flops(n: int) -> float:
    """Floating-point operations of an n×n by n×n matrix multiply (2·n³)."""
    return 2.0 * n**3


def time_matmul(n: int, device: torch.device | str, dtype: torch.dtype = torch.float32,
                min_run_s: float = 0.2) -> Timing:
    """Time ``a @ b`` for square n×n matrices; the rate is in FLOP/s."""
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    name = f"matmul {n}×{n} {str(dtype).removeprefix('torch.')}"
    return time_fn(lambda: a @ b, name=name, device=device, work=matmul_flops(n),
                   unit="FLOP/s", min_run_s=min_run_s)


def peak_matmul(device: torch.device | str, dtype: torch.dtype = torch.float32,
                sizes: Sequence[int] = (1024, 2048, 4096, 8192),
                min_run_s: float = 0.2) -> Timing:
    """The best matmul rate measured here: our 'peak' for efficiency ratios.

    Measured in the same run on the same device, so "x % of peak" compares like
    with like (never a datasheet constant for someone else's GPU).
    """
    if not sizes:
        raise ValueError("peak_matmul needs at least one matrix size to measure.")
    best = max((time_matmul(n, device, dtype, min_run_s) for n in sizes),
               key=lambda t: t.rate or 0.0)
    best.name = f"peak: {best.name}"
    return best


def fmt_vs_peak(t: Timing, peak: Timing) -> str:
    """One line: the rate of `t` as a fraction of the measured `peak`, device named.

    'matmul 512×512 float32 | 98.1 GFLOP/s | 95% of 103.0 GFLOP/s measured peak | cpu (2 threads) AMD EPYC'
    """
    if t.rate is None or peak.rate is None or t.unit != peak.unit:
        raise ValueError(f"Cannot compare {t.name!r} with {peak.name!r}: both need work in the same unit.")
    hardware = f"{t.device} {cpu_name()}" if t.device.startswith("cpu") else t.device
    return (f"{t.name} | {units.fmt_rate(t.rate, t.unit)} | {t.rate / peak.rate:.0%} of "
            f"{units.fmt_rate(peak.rate, peak.unit)} measured peak | {hardware}")


def compare_devices(n: int, dtype: torch.dtype = torch.float32,
                    min_run_s: float = 0.1) -> list[Timing]:
    """Time an n×n matmul on the CPU and, when CUDA is available, on the current GPU."""
    if n < 1:
        raise ValueError(f"Matrix size must be a positive integer, got {n}.")
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    return [time_matmul(n, d, dtype, min_run_s) for d in devices]


def time_copy_to_device(nbytes: int, device: torch.device | str, pinned: bool) -> Timing:
    """Host→device copy rate (B/s) for a pageable or pinned host buffer."""
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=pinned)
    name = f"H→D {units.fmt_bytes(nbytes)} {'pinned' if pinned else 'pageable'}"
    return time_fn(lambda: host.to(device, non_blocking=pinned), name=name, device=device,
                   work=float(nbytes), unit="B/s")

