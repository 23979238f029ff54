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
from typing import Iterable, Iterator, Sequence

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


def agreement(what: str, got: torch.Tensor | Sequence[torch.Tensor],
              expected: torch.Tensor | Sequence[torch.Tensor], *, atol: float, rtol: float) -> dict:
    """How close `got` (a parallel or changed computation's result) is to `expected` (one
    process's), by ``torch.allclose``'s test ``|Δ| <= atol + rtol·|expected|`` on every element.

    The one row format of the course's comparisons: the scripts write these rows into their
    results, the notebooks read them with :func:`agreements`. `got` and `expected` are tensors or
    equal-length sequences of tensors (a layer's gradients), compared pair by pair. Returns
    ``{"what", "max_abs", "worst_share", "over", "elements", "atol", "rtol", "ok"}``:
    `worst_share` is the worst element's |Δ| as a share of what it is allowed, `over` the number
    of elements beyond it, so ``ok`` is ``over == 0``."""
    pairs = list(zip(got, expected)) if isinstance(got, (list, tuple)) else [(got, expected)]
    if isinstance(got, (list, tuple)) and len(got) != len(expected):
        raise AssertionError(f"{what}: {len(got)} tensors against {len(expected)}")
    max_abs, worst, n, over = 0.0, 0.0, 0, 0
    for g, e in pairs:
        if g.shape != e.shape:
            raise AssertionError(f"{what}: shape {tuple(g.shape)} != {tuple(e.shape)}")
        g, e = g.detach().cpu().double(), e.detach().cpu().double()  # no fp64 copy on the GPU
        if not g.numel():
            continue
        diff = (g - e).abs()
        share = (diff / (atol + rtol * e.abs()).clamp_min(1e-300)).nan_to_num(nan=float("inf"))
        share = share.masked_fill(g == e, 0.0)  # equal, infinities included, as allclose has it
        max_abs, worst = max(max_abs, diff.max().item()), max(worst, share.max().item())
        n, over = n + g.numel(), over + int((share > 1).sum())
    return dict(what=what, max_abs=max_abs, worst_share=worst, over=over, elements=n, atol=atol,
                rtol=rtol, ok=over == 0)


def merge(rows: Sequence[Sequence[dict]]) -> list[dict]:
    """Each rank's :func:`agreement` rows (the same comparisons, in the same order) as one row per
    comparison: the largest difference and share over the ranks, every element counted, ok only
    if every rank's is."""
    out = []
    for same in zip(*rows):
        out.append(dict(same[0], max_abs=max(r["max_abs"] for r in same),
                        worst_share=max(r["worst_share"] for r in same),
                        over=sum(r["over"] for r in same), elements=sum(r["elements"] for r in same),
                        ok=all(r["ok"] for r in same)))
    return out


def fmt_agreement(row: dict) -> str:
    """One :func:`agreement` row as a line: ``what: max |Δ| 2.2e-07; |Δ| ≤ atol 2e-06 + rtol
    1e-05·|expected| on all 1,234 elements, worst at 11% of its allowance``."""
    bound = f"|Δ| ≤ atol {row['atol']:.3g} + rtol {row['rtol']:g}·|expected|"
    head = f"{row['what']}: max |Δ| {row['max_abs']:.2e}; {bound}"
    if row["ok"]:
        return f"{head} on all {row['elements']:,} elements, worst at {row['worst_share']:.0%} of its allowance"
    return (f"{head} fails on {row['over']:,} of {row['elements']:,} elements, worst at "
            f"{row['worst_share']:.3g}× its allowance — not close")


def agreements(rows: Iterable[dict]) -> None:
    """Assert and print every :func:`agreement` row (from this process or a script's results):
    one line each, ✓ when close; the first row that is not raises its line."""
    for row in rows:
        if not row["ok"]:
            raise AssertionError(fmt_agreement(row))
        passed(fmt_agreement(row))


def close(got: torch.Tensor, expected: torch.Tensor, *, what: str,
          atol: float = 1e-6, rtol: float = 1e-5) -> None:
    """Assert ``|got - expected| <= atol + rtol·|expected|`` on every element (``torch.allclose``),
    printing the :func:`agreement` row's line, e.g. ``gradients, 4 micro-batches vs one batch: max
    |Δ| 2.2e-07; |Δ| ≤ atol 2e-06 + rtol 1e-05·|expected| on all 1,234 elements, worst at 11% of
    its allowance ✓``."""
    agreements([agreement(what, got, expected, atol=atol, rtol=rtol)])


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
