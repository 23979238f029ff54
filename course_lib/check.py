"""Automatic checks for exercises and in-notebook claims, with friendly messages.

Each check prints one line with what was expected and what was seen, and raises
``AssertionError`` on failure, so the notebook run (papermill, the tests) stops on it.
"""

from __future__ import annotations

from typing import Callable

import torch


def _ok(msg: str) -> None:
    print(f"{msg} ✓")


def expect(what: str, got: object, expected: object) -> None:
    """Assert equality: ``trainable parameters: 1,234 expected 1,234 ✓``."""
    g = f"{got:,}" if isinstance(got, int) and not isinstance(got, bool) else got
    e = f"{expected:,}" if isinstance(expected, int) and not isinstance(expected, bool) else expected
    if got != expected:
        raise AssertionError(f"{what}: got {g}, expected {e}")
    _ok(f"{what}: {g} expected {e}")


def close(got: torch.Tensor, expected: torch.Tensor, *, what: str,
          atol: float = 1e-6, rtol: float = 1e-5) -> None:
    """Assert ``|got - expected| <= atol + rtol·|expected|`` on every element (``torch.allclose``).

    The line printed names what the tolerance bounds: the largest difference, and the worst
    element's difference as a share of the error it is allowed there, e.g.
    ``gradients, 4 micro-batches vs one batch: max |Δ| 2.2e-07; |Δ| ≤ atol 2e-06 + rtol
    1e-05·|expected| on all 1,234 elements, worst at 11% of its allowance ✓``.
    """
    if got.shape != expected.shape:
        raise AssertionError(f"{what}: shape {tuple(got.shape)} != {tuple(expected.shape)}")
    g, e = got.detach().double().cpu(), expected.detach().double().cpu()
    diff = (g - e).abs()
    allowed = atol + rtol * e.abs()
    n = diff.numel()
    max_abs = diff.max().item() if n else 0.0
    share = (diff / allowed.clamp_min(1e-300)).nan_to_num(nan=float("inf"))
    share = share.masked_fill(g == e, 0.0)  # equal, infinities included, as allclose has it
    worst = share.max().item() if n else 0.0
    bound = f"|Δ| ≤ atol {atol:g} + rtol {rtol:g}·|expected|"
    if not torch.allclose(g, e, atol=atol, rtol=rtol):
        over = int((share > 1).sum())
        raise AssertionError(f"{what}: max |Δ| {max_abs:.2e}; {bound} fails on {over:,} of {n:,} "
                             f"elements, worst at {worst:.3g}× its allowance — not close")
    _ok(f"{what}: max |Δ| {max_abs:.2e}; {bound} on all {n:,} elements, "
        f"worst at {worst:.0%} of its allowance")


def between(what: str, got: float, low: float, high: float, unit: str = "") -> None:
    """Assert ``low <= got <= high``."""
    if not low <= got <= high:
        raise AssertionError(f"{what}: {got:.4g} {unit} is outside [{low:g}, {high:g}]")
    _ok(f"{what}: {got:.4g} {unit} in [{low:g}, {high:g}]")


def flop_count(fn: Callable[[int, int, int], float]) -> None:
    """Exercise (01): `fn(m, k, n)` must return the FLOPs of an (m×k) @ (k×n) matmul."""
    for m, k, n in [(1, 1, 1), (2, 3, 4), (128, 64, 32), (4096, 4096, 4096)]:
        got, want = fn(m, k, n), 2 * m * k * n
        if got != want:
            hint = " (a multiply-add is 2 FLOPs)" if got * 2 == want else ""
            raise AssertionError(f"flops({m}, {k}, {n}) = {got:,}, expected {want:,}{hint}")
    _ok("flop count for (m×k) @ (k×n): 2·m·k·n on 4 shapes")


def transfer_time(fn: Callable[[int, float], float]) -> None:
    """Exercise (01): `fn(nbytes, gb_per_s)` must return seconds to copy `nbytes` at that rate."""
    for nbytes, rate in [(10**9, 10.0), (256 * 2**20, 25.0), (1, 1.0)]:
        got, want = fn(nbytes, rate), nbytes / (rate * 1e9)
        if abs(got - want) > 1e-9 + 1e-6 * want:
            raise AssertionError(f"transfer({nbytes:,} B, {rate} GB/s) = {got:.3g} s, expected {want:.3g} s")
    _ok("transfer time = bytes / (GB/s · 1e9) on 3 cases")
