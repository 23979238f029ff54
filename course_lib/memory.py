"""How much memory does training take? Measure it, estimate it, fit the batch to it.

- :func:`track` / :func:`peak_memory`: the peak a piece of work *adds* to what was live
  when it started. CUDA: the caching allocator's counters. CPU: the profiler's memory
  events (every tensor allocation and free, replayed in time order).
- :func:`estimate_training_memory`: parameters + gradients + optimizer state + activations.
- :func:`fit_batch`: a profile's batch, halved until one step runs without out-of-memory.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import tempfile
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Sequence

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

from course_lib.device import label, pick, sync
from course_lib.units import fmt_bytes


@dataclass
class MemoryReading:
    """Peak memory that a piece of work added on top of what was live when it started."""

    device: str
    peak_bytes: int = 0
    reserved_bytes: int | None = None  # CUDA: peak reserved by the caching allocator (absolute)
    method: str = ""  # "cuda allocator" or "profiler memory events"

    def __str__(self) -> str:
        reserved = "" if self.reserved_bytes is None else f", {fmt_bytes(self.reserved_bytes)} reserved"
        return f"{fmt_bytes(self.peak_bytes)} peak{reserved} ({self.method}, {self.device})"


@contextmanager
def quiet_stderr() -> Iterator[None]:
    """Point file descriptor 2 at /dev/null inside the block; always restore it after.

    A CUDA build of torch without a GPU makes the profiler print 'USDT: profiler_start'
    and 'gpuGetDeviceCount failed' lines from C++: noise for learners, not errors.
    """
    if sys.stderr is not None:
        sys.stderr.flush()  # Python's buffered text goes out before the redirect
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def _peak_added(events: Iterable[tuple[float, int]]) -> int:
    """Highest running sum of (time, ±bytes) events applied in time order, starting from 0.

    Events at the same time keep their recorded order (the sort is stable).
    """
    live = peak = 0
    for _, n in sorted(events, key=lambda e: e[0]):
        live += n
        peak = max(peak, live)
    return peak


def _cpu_memory_events(trace: dict) -> list[tuple[float, int]]:
    """(time in µs, ±bytes) of every CPU allocation and free in a Chrome trace export."""
    return [(e["ts"], int(e["args"]["Bytes"])) for e in trace.get("traceEvents", [])
            if e.get("name") == "[memory]" and int(e.get("args", {}).get("Device Type", 0)) == 0]


def _profiler_peak(prof: profile) -> int:
    """Peak bytes added during `prof`, from the ``[memory]`` events of its Chrome trace.

    ``prof.events()`` folds allocations made inside an op into that op's total, without
    their times; the trace keeps each allocation and free with its own timestamp.
    """
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as f:
            return _peak_added(_cpu_memory_events(json.load(f)))


@contextmanager
def _track_cuda(device: torch.device) -> Iterator[MemoryReading]:
    reading = MemoryReading(str(device), method="cuda allocator")
    sync(device)
    torch.cuda.reset_peak_memory_stats(device)
    start = torch.cuda.memory_allocated(device)
    yield reading
    sync(device)
    reading.peak_bytes = torch.cuda.max_memory_allocated(device) - start
    reading.reserved_bytes = torch.cuda.max_memory_reserved(device)


@contextmanager
def _track_cpu(device: torch.device) -> Iterator[MemoryReading]:
    reading = MemoryReading(str(device), method="profiler memory events")
    prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
    with quiet_stderr():  # C++ writes only: exceptions, and Python output in Jupyter, still show
        prof.start()
        try:
            yield reading
        finally:
            prof.stop()
        reading.peak_bytes = _profiler_peak(prof)


def track(device: torch.device | str | None = None) -> AbstractContextManager[MemoryReading]:
    """Measure the peak memory the block adds on `device`; the reading is filled at exit.

    ``with memory.track("cpu") as r: step()`` then ``print(r)`` → '16.8 MiB peak (…, cpu)'.
    Peak is relative to memory live at the start. CUDA: ``max_memory_allocated`` minus
    the allocated bytes at the start, synchronised; ``reserved_bytes`` is the absolute peak
    the caching allocator reserved. CPU: the profiler's tensor allocations and frees
    replayed in time order (frees of memory allocated before the block are invisible to
    it); the profiler slows the block and silences C-level stderr while it runs.
    """
    device = pick(device) if device is not None else pick()
    if device.type == "cuda":
        return _track_cuda(device)
    if device.type == "cpu":
        return _track_cpu(device)
    raise ValueError(f"Memory tracking supports 'cuda' and 'cpu' devices, not {device.type!r}.")


def peak_memory(fn: Callable[[], object], device: torch.device | str | None = None) -> MemoryReading:
    """Call `fn()` once and return the peak memory it added on `device` (see :func:`track`)."""
    with track(device) as reading:
        fn()
    return reading


_OPTIMIZER_STATES = {"sgd": 0, "sgd_momentum": 1, "adam": 2, "adamw": 2}  # param-sized tensors each


@dataclass
class MemoryEstimate:
    """Training memory by part, in bytes; ``print()`` shows a small table."""

    params: int
    grads: int
    optimizer: int
    activations: int
    optimizer_name: str = "adamw"

    @property
    def total(self) -> int:
        return self.params + self.grads + self.optimizer + self.activations

    def rows(self) -> list[tuple[str, int]]:
        return [("parameters", self.params), ("gradients", self.grads),
                (f"optimizer state ({self.optimizer_name})", self.optimizer),
                ("activations (saved for backward)", self.activations), ("total", self.total)]

    def __str__(self) -> str:
        return "\n".join(f"{name:<34} {fmt_bytes(n):>11}" for name, n in self.rows())


def _optimizer_bytes(params: list[nn.Parameter], name: str) -> int:
    if name not in _OPTIMIZER_STATES:
        raise ValueError(f"Unknown optimizer {name!r}; choose one of {sorted(_OPTIMIZER_STATES)}.")
    steps = 4 * len(params) if name.startswith("adam") else 0  # a float32 step count per tensor
    return _OPTIMIZER_STATES[name] * sum(p.nbytes for p in params) + steps


def _activation_bytes(model: nn.Module, x: torch.Tensor, amp: torch.dtype | None) -> int:
    """Bytes autograd saves for backward in one forward pass, once per storage.

    Parameters are excluded; copies of them (bf16 weights under autocast) count.
    """
    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in weights:
            saved[storage.data_ptr()] = storage.nbytes()
        return t

    autocast = torch.autocast(x.device.type, dtype=amp) if amp else nullcontext()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), autocast:
        out = model(x)
    del out  # frees the graph and what it saved
    return sum(saved.values())


def estimate_training_memory(model: nn.Module, example: torch.Tensor | Sequence[int],
                             optimizer: str = "adamw",
                             amp: torch.dtype | None = None) -> MemoryEstimate:
    """Estimate the memory of one training step of `model` on a batch like `example`.

    Parameters, gradients (trainable only) and optimizer state are exact for the dtypes
    the parameters have now (convert the model first to estimate bf16 weights).
    Activations are approximate, from one real forward pass: the bytes autograd saves
    for backward (``saved_tensors_hooks``), which live until ``backward()``; op workspaces
    and the backward pass's temporaries are not counted. `example` is an input tensor or
    a shape (random float32 on the model's device); `amp` is an autocast dtype or None.
    """
    params = list(model.parameters())
    trainable = [p for p in params if p.requires_grad]
    if not isinstance(example, torch.Tensor):
        example = torch.randn(*example, device=params[0].device if params else "cpu")
    return MemoryEstimate(sum(p.nbytes for p in params), sum(p.nbytes for p in trainable),
                          _optimizer_bytes(trainable, optimizer),
                          _activation_bytes(model, example, amp), optimizer)


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


def fit_batch(try_fn: Callable[[int], object], batch: int,
              device: torch.device | str | None = None) -> int:
    """`batch`, or the first of batch/2, batch/4, ... for which `try_fn(batch)` does not run
    out of memory: a profile's batch made to fit a smaller GPU, said in one sentence per
    halving. A batch that fits costs one call; errors other than out-of-memory propagate."""
    if batch < 1:
        raise ValueError(f"Need batch >= 1, got {batch}.")
    device = pick(device) if device is not None else pick()
    while not _fits(try_fn, batch, device):
        if batch == 1:
            raise NoBatchFits(f"Even batch size 1 does not fit on {device}; shrink the model "
                              "or input, or use bf16 autocast or activation checkpointing.")
        print(f"Batch {batch} ran out of memory on {label(device)}: using {batch // 2} instead "
              "(the same measurement at a smaller batch).")
        batch //= 2
    return batch
