"""Out of memory: what fits, and what to do when it does not.

- :func:`headroom`: what the GPU in hand can still take.
- :func:`fit_batch` (a profile's batch, halved until a step fits) and :func:`largest_batch`
  (double, then bisect); :func:`within_budget`, a CPU's measured stand-in for a GPU's limit.
- :func:`oom_advice` (what the error means, with its numbers, and what to try) and
  :func:`guard` around work that may not fit (a timed configuration on a small GPU): out of
  memory becomes one sentence and the notebook runs on; :func:`free` after it.
"""

from __future__ import annotations

import gc
import traceback
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

import torch

from course_lib.device import allocator_limit, bf16_supported, label, memory_cap_gib, pick, sync
from course_lib.memory import MemoryReading, peak_memory
from course_lib.units import fmt_bytes


class NoBatchFits(RuntimeError):
    """Even the smallest batch tried does not fit in memory."""


def is_oom(exc: BaseException) -> bool:
    """True for an out-of-memory error (CUDA, or a CPU allocator that could not allocate)."""
    if isinstance(exc, torch.OutOfMemoryError):  # the same class as torch.cuda.OutOfMemoryError
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and ("out of memory" in text or "can't allocate" in text)


def _fits(try_fn: Callable[[int], object], batch: int, device: torch.device) -> bool:
    """Run `try_fn(batch)`; False if it ran out of memory. Other errors propagate."""
    try:
        try_fn(batch)
        sync(device)
        return True
    except Exception as exc:  # only OOM is swallowed; anything else is re-raised
        if not is_oom(exc):
            raise
    free()  # outside the except block, so the traceback's tensors are already released
    return False


def free() -> None:
    """Collect garbage and hand CUDA's cached blocks back, after an out-of-memory error.

    Call it outside the ``except`` block: the exception's traceback holds the frames (and
    their tensors) of the failed call until the block ends.
    """
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def headroom(device: torch.device | str | None = None) -> int:
    """Bytes that new tensors on the CUDA `device` can still take: what the driver has free plus
    the blocks PyTorch has cached but not allocated; under ``COURSE_GPU_MEMORY_GIB`` at most
    what the allocator may reserve there (:func:`device.allocator_limit`) less what is allocated.
    ``torch.cuda.mem_get_info`` alone ignores the cap and the cache. Size a demo from it, not
    from the card's total. Raises ValueError for a device that is not a CUDA GPU."""
    device = torch.device("cuda" if device is None else device)
    if device.type != "cuda":
        raise ValueError(f"headroom() measures a CUDA GPU's memory, not {device.type!r}.")
    free_bytes, _ = torch.cuda.mem_get_info(device)
    allocated = torch.cuda.memory_allocated(device)
    cached = torch.cuda.memory_reserved(device) - allocated
    limit = allocator_limit(device)  # None without COURSE_GPU_MEMORY_GIB
    usable = free_bytes + cached if limit is None else min(free_bytes + cached, limit - allocated)
    return max(0, usable)


def fit_batch(try_fn: Callable[[int], object], batch: int,
              device: torch.device | str | None = None) -> int:
    """`batch`, or the first of batch/2, batch/4, ... for which `try_fn(batch)` does not run
    out of memory: a profile's batch made to fit a smaller GPU, said in one sentence per
    halving. A batch that fits costs one call; errors other than out-of-memory propagate."""
    if batch < 1:
        raise ValueError(f"Need batch >= 1, got {batch}.")
    device = pick(device, limit=False)
    while not _fits(try_fn, batch, device):
        if batch == 1:
            raise NoBatchFits(f"Even batch size 1 does not fit on {device}; shrink the model "
                              "or input, or use bf16 autocast or activation checkpointing.")
        print(f"Batch {batch} ran out of memory on {label(device)}: using {batch // 2} instead "
              "(the same measurement at a smaller batch).")
        batch //= 2
    return batch


@dataclass
class BatchSearch:
    """The largest batch that fit, and every batch tried on the way (batch, fitted)."""

    largest: int
    tried: list[tuple[int, bool]]
    limit: int | None = None

    def __str__(self) -> str:
        steps = " ".join(f"{b}{'✓' if ok else '✗'}" for b, ok in self.tried)
        capped = f" (the search stops at {self.limit})" if self.limit and self.largest == self.limit else ""
        return f"largest batch that fits: {self.largest}{capped}; tried {steps}"


def largest_batch(try_fn: Callable[[int], object], start: int = 1, *, limit: int | None = None,
                  device: torch.device | str | None = None) -> BatchSearch:
    """The largest batch for which `try_fn(batch)` does not run out of memory.

    Doubles from `start` until a batch fails (or reaches `limit`), then bisects between the
    last batch that fit and the first that did not: about 2·log2(answer) calls. Each
    failure is caught (``torch.OutOfMemoryError`` or a CPU allocation failure) and its
    memory freed before the next try; other errors propagate.
    """
    if start < 1 or (limit is not None and limit < start):
        raise ValueError(f"Need 1 <= start <= limit, got start={start}, limit={limit}.")
    device = pick(device, limit=False)
    tried: list[tuple[int, bool]] = []

    def fits(batch: int) -> bool:
        tried.append((batch, _fits(try_fn, batch, device)))
        return tried[-1][1]

    good, bad, batch = 0, None, start
    while bad is None:
        if fits(batch):
            good = batch
            if batch == limit:
                break
            batch = batch * 2 if limit is None else min(batch * 2, limit)
        else:
            bad = batch
    while bad is not None and bad - good > 1:
        mid = (good + bad) // 2
        good, bad = (mid, bad) if fits(mid) else (good, mid)
    if good == 0:
        raise NoBatchFits(f"Even batch size 1 does not fit on {device}; shrink the model "
                          "or input, or use bf16 autocast or activation checkpointing.")
    return BatchSearch(good, tried, limit)


class OverBudget(torch.OutOfMemoryError):
    """A step's measured peak was over the budget it was given: a CPU's stand-in for a GPU's
    out-of-memory error (a CPU that runs out of memory swaps, then the OS kills the process)."""

    def __init__(self, peak: int, budget: int) -> None:
        super().__init__(f"The step's peak, {fmt_bytes(peak)}, is over its budget of {fmt_bytes(budget)}.")
        self.peak, self.budget = peak, budget


def within_budget(fn: Callable[[], object], budget: int,
                  device: torch.device | str | None = None) -> MemoryReading:
    """Call `fn()` once and measure its peak (:func:`track`); raise :class:`OverBudget` if the
    peak is over `budget` bytes. The work has run: the budget is checked after the fact."""
    reading = peak_memory(fn, device)
    if reading.peak_bytes > budget:
        raise OverBudget(reading.peak_bytes, budget)
    return reading


def oom_advice(exc: BaseException, device: torch.device | str | None = None,
               batch: int | None = None, *, limit: int | None = None, autocast: bool = False,
               checkpointing: bool = False) -> str:
    """What an out-of-memory error means on `device`, with its numbers, and what to try.

    `limit`: the bytes the process may use when a cap is set (``set_per_process_memory_fraction``),
    printed instead of the GPU's size. `autocast` and `checkpointing` say what is already on,
    so the advice leaves it out. Call it inside the ``except`` block (the allocator's counters
    then still hold the failed step), and :func:`free` after the block.
    """
    device = pick(device, limit=False)
    at = f" at batch {batch}" if batch is not None else ""
    if isinstance(exc, OverBudget):
        state = f"its peak, {fmt_bytes(exc.peak)}, is over its budget of {fmt_bytes(exc.budget)}"
    elif device.type == "cuda":
        allocated, reserved = torch.cuda.memory_allocated(device), torch.cuda.memory_reserved(device)
        cap = memory_cap_gib()
        if limit is None and cap is not None:  # COURSE_GPU_MEMORY_GIB: a smaller card simulated
            limit = min(int(cap * 2**30), torch.cuda.get_device_properties(device).total_memory)
        of = (f"a cap of {fmt_bytes(limit)}" if limit is not None
              else fmt_bytes(torch.cuda.get_device_properties(device).total_memory))
        state = f"{fmt_bytes(allocated)} allocated, {fmt_bytes(reserved)} reserved by PyTorch, of {of}"
        if reserved > 1.25 * allocated:
            state += (" (reserved but not allocated: fragmentation, which expandable_segments:True "
                      "in PYTORCH_CUDA_ALLOC_CONF and PYTORCH_ALLOC_CONF, set before the first CUDA "
                      "call, reduces)")
    else:
        state = "the allocator refused the request"
    tries = ["a smaller micro-batch with gradient accumulation (same effective batch)"]
    if not autocast:  # the 16-bit format this device runs natively: fp16 (+ GradScaler) on a T4 or a V100
        half = "bf16" if bf16_supported(device) else "fp16"
        tries.append(f"{half} autocast (matmul outputs kept in {half}"
                     f"{'; train with a GradScaler' if half == 'fp16' else ''})")
    if not checkpointing:
        tries.append("activation checkpointing (recompute in backward instead of storing)")
    tries.append("a smaller model or sequence")
    return f"Out of memory on {label(device)}{at}: {state}.\nTry, in this order: " + "; ".join(tries) + "."


@dataclass
class Outcome:
    """What :func:`guard` saw: ``ok`` unless the block ran out of memory, then ``advice``."""

    ok: bool = True
    advice: str | None = None


@contextmanager
def guard(what: str, device: torch.device | str | None = None, *, quiet: bool = False,
          **advice: object) -> Iterator[Outcome]:
    """Run a block that may not fit in memory; out of memory inside it is caught.

    ``with memory.guard("ResNet-50 at batch 256", dev) as run: time_it()`` then ``run.ok``.
    On out-of-memory the block stops, ``run.ok`` is False, ``run.advice`` holds
    :func:`oom_advice` (`advice` passes its keywords: batch, autocast, checkpointing), which
    is printed as ``what: <advice>`` unless `quiet`, and the cache is freed. Any other error
    propagates unchanged.
    """
    outcome = Outcome()
    try:
        yield outcome
    except Exception as exc:  # only out-of-memory is swallowed
        if not is_oom(exc):
            raise
        outcome.ok = False
        outcome.advice = oom_advice(exc, device, **advice)  # type: ignore[arg-type]
        # The exception's traceback keeps the frames of the failed block's functions, and with
        # them their tensors, alive until the with statement ends: drop their locals now, so
        # that free() below can hand that memory back
        traceback.clear_frames(exc.__traceback__)
    if not outcome.ok:
        free()
        if not quiet:
            print(f"{what}: {outcome.advice}")
