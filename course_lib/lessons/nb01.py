"""Notebook 01 (GPU vs CPU): the exercise checks, and what its curve says about the stored peak."""

from __future__ import annotations

from typing import Callable, Sequence

from course_lib import bench, check


def cpu_16bit_verdict(fmt: str, ratio: bench.Ratio, flags: Sequence[str]) -> str:
    """One sentence on `ratio`, a CPU's speed in `fmt` ("bf16" or "fp16") over fp32 (a matmul,
    or a training step as in 03), read with the 16-bit instructions the CPU reports (`flags`,
    :func:`device.cpu_16bit_flags`)."""
    has = [f for f in flags if f.endswith(fmt)]
    reports = f"this CPU reports {', '.join(has)}" if has else f"this CPU reports no {fmt} instructions"
    if not ratio.clear:
        return f"{fmt} and fp32 cannot be told apart here ({ratio.doubt}); {reports}"
    if ratio.value > 1:
        return (f"{fmt} ran {ratio.phrase} than fp32, and {reports}: the instructions that make {fmt} pay"
                if has else f"{fmt} ran {ratio.phrase} than fp32 although {reports}: the library's {fmt} path "
                "is faster here all the same")
    return (f"{fmt} ran {ratio.phrase} than fp32 although {reports}: the library did not use them here, "
            "or not to advantage at this size" if has else
            f"{fmt} ran {ratio.phrase} than fp32, and {reports}: the library converts {fmt} to fp32 and back, "
            "which costs more here than the halved bytes save")


def point_at_peak_size(curve: Sequence[bench.Timing], peak: bench.Timing) -> bench.Timing:
    """The point of a rate `curve` at the size of the stored `peak` (its name without 'peak: '):
    the same matmul measured at another moment; the curve's best point when that size is not in it."""
    return next((t for t in curve if t.name == peak.name.removeprefix("peak: ")), None) or bench.best_rate(curve)


def same_peak_verdict(same: bench.Ratio, peak: bench.Timing, sizes: Sequence[int]) -> str:
    """One sentence on `same`, a rate curve's point over this run's stored `peak`
    (:mod:`course_lib.peaks`): the same size where the curve has it, else its best point.
    Agreement, or what a difference means. `sizes` are the curve's."""
    peak_n = round((peak.work / 2) ** (1 / 3))  # a square n×n matmul does 2·n³ FLOPs
    if same.too_wide:
        return (f"the spreads are too wide ({same.lo:.2f}–{same.hi:.2f}×) to say whether the machine ran as fast "
                f"as when the peak was measured; the % column divides by the run's peak as it stands below")
    if same.within_noise or same.single:
        return (f"the two measurements of the {peak_n}×{peak_n} matmul agree within their spreads: the "
                "machine ran as fast during this curve as when the peak was measured")
    if peak_n not in sizes:
        if same.value < 1 and peak_n > max(sizes):
            return (f"the curve stops at n={max(sizes)}, the peak came from n={peak_n}: a larger "
                    f"matmul ran {1 / same.value - 1:.0%} faster than any size of this curve")
        return (f"the curve's best point and the peak (n={peak_n}, not in this curve) differ by "
                f"{abs(same.value - 1):.0%}, beyond both spreads: other sizes, measured at other moments")
    way = f"{same.value - 1:.0%} faster" if same.value > 1 else f"{1 / same.value:.2f}× slower"
    return (f"the same {peak_n}×{peak_n} matmul ran {way} during this curve than "
            f"when the peak was measured, beyond both spreads; the two were timed apart (unpaired), so this mixes "
            f"the machine's speed at two moments (another program, the clock) with two ways of timing (the "
            f"peak's runs, the curve's rounds in turns); the % column divides by the run's peak as it stands below")


def gain_by_size_verdict(gain: bench.Ratio, other: bench.Ratio, n: int, other_n: int) -> str:
    """Whether a 16-bit format's gain over fp32 differs between two sizes: `gain` at `n` and
    `other` at `other_n`, both timed in the same rounds (so drift hits them alike)."""
    if gain.too_wide or other.too_wide:
        return (f"the intervals ({gain.lo:.2f}–{gain.hi:.2f}× at n={n}, {other.lo:.2f}–{other.hi:.2f}× at "
                f"n={other_n}) are too wide to say whether the gain depends on the size")
    if gain.lo <= other.hi and other.lo <= gain.hi:
        if max(gain.hi / gain.lo, other.hi / other.lo) > 1.5:
            return (f"the gains at n={n} ({gain.value:.2f}×) and n={other_n} ({other.value:.2f}×), timed in the same "
                    f"rounds: their intervals ({gain.lo:.2f}–{gain.hi:.2f}×, {other.lo:.2f}–{other.hi:.2f}×) overlap "
                    "and are too wide to tell whether the gain depends on the size")
        return (f"the same gain at n={n} and n={other_n}, within their intervals (timed in the same rounds): "
                "here it does not depend on the size")
    return (f"the gain is {other.value:.2f}× at n={other_n} and {gain.value:.2f}× at n={n}, intervals apart, "
            "timed in the same rounds: it depends on the size, not only on the format")


@check.exercise()
def check_flop_count(fn: Callable[[int, int, int], float]) -> None:
    """Exercise (01): `fn(m, k, n)` must return the FLOPs of an (m×k) @ (k×n) matmul."""
    for m, k, n in [(1, 1, 1), (2, 3, 4), (128, 64, 32), (4096, 4096, 4096)]:
        got, want = fn(m, k, n), 2 * m * k * n
        if got != want:
            hint = " (a multiply-add is 2 FLOPs)" if got * 2 == want else ""
            raise AssertionError(f"flops({m}, {k}, {n}) = {got:,}, expected {want:,}{hint}")
    check.passed("flop count for (m×k) @ (k×n): 2·m·k·n on 4 shapes")


@check.exercise()
def check_transfer_time(fn: Callable[[int, float], float]) -> None:
    """Exercise (01): `fn(nbytes, gb_per_s)` must return seconds to copy `nbytes` at that rate."""
    for nbytes, rate in [(10**9, 10.0), (256 * 2**20, 25.0), (1, 1.0)]:
        got, want = fn(nbytes, rate), nbytes / (rate * 1e9)
        if abs(got - want) > 1e-9 + 1e-6 * want:
            raise AssertionError(f"transfer({nbytes:,} B, {rate} GB/s) = {got:.3g} s, expected {want:.3g} s")
    check.passed("transfer time = bytes / (GB/s · 1e9) on 3 cases")
