"""Notebook 01 (GPU vs CPU): the exercise checks."""

from __future__ import annotations

from typing import Callable

from course_lib import check


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
