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
    """Assert two tensors agree within tolerance and print the largest differences."""
    if got.shape != expected.shape:
        raise AssertionError(f"{what}: shape {tuple(got.shape)} != {tuple(expected.shape)}")
    diff = (got.double() - expected.double()).abs()
    max_abs = diff.max().item() if diff.numel() else 0.0
    max_rel = (diff / expected.double().abs().clamp_min(1e-12)).max().item() if diff.numel() else 0.0
    msg = f"{what}: max abs diff {max_abs:.2e}, max rel diff {max_rel:.2e} (atol {atol:g}, rtol {rtol:g})"
    if not torch.allclose(got.double(), expected.double(), atol=atol, rtol=rtol):
        raise AssertionError(msg + " — not close")
    _ok(msg)


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
