"""Automatic checks for exercises and in-notebook claims, with friendly messages.

Each check prints one line with what was expected and what was seen, and raises
``AssertionError`` on failure, so the notebook run (papermill, the tests) stops on it.

This module is the mechanism; each notebook's exercise checks are ``check_<exercise>`` functions
in its lesson module (``course_lib.lessons.nbNN``), built from these. Exercise checks are wrapped
in :func:`exercise`: in a student copy (``course student``) the
solutions are nbgrader's stubs, ``raise NotImplementedError()``, and a check on one prints
``not done yet: …`` instead of stopping the notebook.
"""

from __future__ import annotations

import contextlib
from types import TracebackType
from typing import Iterator

import torch


def passed(msg: str) -> None:
    """Print a passed check's line: ``msg ✓``."""
    print(f"{msg} ✓")


def unsolved(exc: BaseException) -> str | None:
    """The name of the notebook function whose stub raised `exc`, or None when `exc` is not a
    stub's: a bare ``NotImplementedError()`` (no message, as nbgrader writes it) raised by code
    defined in the notebook (module ``__main__``). PyTorch's own NotImplementedErrors carry a
    message and are raised in its modules: they are real errors."""
    if type(exc) is not NotImplementedError or exc.args:
        return None
    tb: TracebackType | None = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None or tb.tb_frame.f_globals.get("__name__") != "__main__":
        return None
    return tb.tb_frame.f_code.co_name


@contextlib.contextmanager
def exercise() -> Iterator[None]:
    """Run an exercise's check; an exercise not done yet prints one sentence and the notebook
    runs on. As a block, ``with check.exercise(): ...``, or on a check function, ``@exercise()``.
    Any other error, a failed check included, propagates."""
    try:
        yield
    except NotImplementedError as exc:
        name = unsolved(exc)
        if name is None:
            raise
        where = "this cell" if name == "<module>" else f"`{name}`"
        print(f"not done yet: {where} still raises NotImplementedError; write your code in its "
              "place and run the cell again.")


def expect(what: str, got: object, expected: object) -> None:
    """Assert equality: ``trainable parameters: 1,234 expected 1,234 ✓``."""
    g = f"{got:,}" if isinstance(got, int) and not isinstance(got, bool) else got
    e = f"{expected:,}" if isinstance(expected, int) and not isinstance(expected, bool) else expected
    if got != expected:
        raise AssertionError(f"{what}: got {g}, expected {e}")
    passed(f"{what}: {g} expected {e}")


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
    g, e = got.detach().cpu().double(), expected.detach().cpu().double()  # no fp64 copy on the GPU
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
    passed(f"{what}: max |Δ| {max_abs:.2e}; {bound} on all {n:,} elements, "
        f"worst at {worst:.0%} of its allowance")


def allocated(what: str, measured: int, expected: int, tensors: int, device: torch.device | str) -> None:
    """Assert that memory measured for `tensors` tensors matches the bytes `expected` of them
    (already rounded to the CUDA allocator's 512-byte blocks). A CPU allocates exactly what is
    asked. The CUDA caching allocator may hand a tensor over 1 MiB a cached block up to 1 MiB
    larger (it splits a block only when the rest is over 1 MiB), so there `measured` may
    exceed `expected` by at most 1 MiB per tensor, never fall short."""
    if torch.device(device).type != "cuda":
        expect(what, measured, expected)
        return
    slack = measured - expected
    if not 0 <= slack <= tensors * 2**20:
        raise AssertionError(f"{what}: measured {measured:,} bytes, expected {expected:,} plus at most "
                             f"1 MiB of block tail for each of {tensors} tensors")
    passed(f"{what}: {measured:,} bytes, {expected:,} expected + {slack:,} of the allocator's block tails")


def between(what: str, got: float, low: float, high: float, unit: str = "") -> None:
    """Assert ``low <= got <= high``."""
    if not low <= got <= high:
        raise AssertionError(f"{what}: {got:.4g} {unit} is outside [{low:g}, {high:g}]")
    passed(f"{what}: {got:.4g} {unit} in [{low:g}, {high:g}]")
