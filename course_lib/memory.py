"""How much memory does training take? Measure it, estimate it, fit the batch to it.

- :func:`track` / :func:`peak_memory`: the peak a piece of work *adds* to what was live
  when it started. CUDA: the caching allocator's counters. CPU: the profiler's memory
  events (every tensor allocation and free, replayed in time order).
- :class:`PhaseTracker`: bytes live at the start, peak and end of each phase of a step
  (forward, backward, optimizer), by the same counters.
- :func:`estimate_training_memory`: parameters + gradients + optimizer state + activations
  (exact static terms, activations from saved_tensors_hooks, fake tensors welcome).
- Out of memory, what fits and what to do then: :mod:`course_lib.oom`.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import warnings
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Sequence

import torch
from torch import nn
from torch.multiprocessing.reductions import StorageWeakRef
from torch.profiler import ProfilerActivity, profile, record_function

from course_lib.device import pick, sync
from course_lib.units import fmt_bytes

# The start of the profiler's note on its first cycle (torch.profiler.profile.prepare_trace), a regex
PROFILER_CYCLE_NOTE = r"Warning: Profiler clears events"


@dataclass
class MemoryReading:
    """Peak memory that a piece of work added on top of what was live when it started, and what
    it left live at its end (``end_bytes``: its tensors still held, such as an autograd graph)."""

    device: str
    peak_bytes: int = 0
    end_bytes: int = 0
    reserved_bytes: int | None = None  # CUDA: peak reserved by the caching allocator (absolute)
    method: str = ""  # "cuda allocator" or "profiler memory events"

    def __str__(self) -> str:
        reserved = "" if self.reserved_bytes is None else f", {fmt_bytes(self.reserved_bytes)} reserved"
        return f"{fmt_bytes(self.peak_bytes)} peak{reserved} ({self.method}, {self.device})"


@contextmanager
def quiet_stderr() -> Iterator[None]:
    """Point file descriptor 2 at /dev/null inside the block; always restore it after.

    A CUDA build of torch without a GPU makes the profiler print 'USDT: profiler_start'
    and 'gpuGetDeviceCount failed' lines from C++: noise for learners, not errors. Some
    releases (2.11 on a GPU) also warn, from Python, on a profile's first cycle that each
    cycle's events are cleared: true of every profile, and the course's profiles have one
    cycle. That warning is left out too; every other warning still shows.
    """
    if sys.stderr is not None:
        sys.stderr.flush()  # Python's buffered text goes out before the redirect
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=PROFILER_CYCLE_NOTE, category=UserWarning)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


@dataclass
class Trace:
    """What a CPU profile saw, on one clock (µs since the Unix epoch, as ``start_ns() / 1000``).

    ``memory``: (time, ±bytes) of every CPU tensor allocation and free, in time order; a free
    counts only if the allocation was in this profile.
    ``annotations``: (name, start, end) of every ``record_function`` range, in start order.
    """

    memory: list[tuple[float, int]]
    annotations: list[tuple[str, float, float]]

    @property
    def peak(self) -> int:
        """The most bytes live at any moment, counted from 0 at the profile's start."""
        return max([0, *(b for _, b in self.live())])

    def live(self) -> list[tuple[float, int]]:
        """(time, bytes live) after each event: the running sum from 0 at the profile's start."""
        out, live = [], 0
        for t, n in self.memory:
            live += n
            out.append((t, live))
        return out


def trace_of(prof: profile) -> Trace:
    """The memory events and ``record_function`` ranges of a finished CPU profile.

    ``prof.events()`` folds allocations made inside an op into that op's total, without
    their times; the Chrome trace keeps each allocation and free with its own timestamp.
    The trace's times are offset by its ``baseTimeNanoseconds``; adding it back puts them on
    the Unix clock of the profiler's memory timeline.
    """
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as f:
            trace = json.load(f)
    base = trace.get("baseTimeNanoseconds", 0) / 1000
    events = trace.get("traceEvents", [])
    mem = sorted((e["ts"] + base, int(e["args"]["Bytes"]), e["args"].get("Addr")) for e in events
                 if e.get("name") == "[memory]" and int(e.get("args", {}).get("Device Type", 0)) == 0)
    spans = [(e["name"], e["ts"] + base, e["ts"] + base + e.get("dur", 0)) for e in events
             if e.get("cat") == "user_annotation" and e.get("ph") == "X"]
    return Trace(_own_frees(mem), sorted(spans, key=lambda a: a[1]))


def _own_frees(events: Iterable[tuple[float, int, int | None]]) -> list[tuple[float, int]]:
    """(time, ±bytes) in time order, keeping a free only if its address was allocated in these
    events: the profiler also reports frees of tensors allocated under an earlier profile."""
    live: set[int | None] = set()
    out = []
    for t, n, addr in events:
        if n > 0:
            live.add(addr)
        elif addr in live:
            live.discard(addr)
        else:
            continue
        out.append((t, n))
    return out


@contextmanager
def _track_cuda(device: torch.device) -> Iterator[MemoryReading]:
    reading = MemoryReading(str(device), method="cuda allocator")
    sync(device)
    torch.cuda.reset_peak_memory_stats(device)
    start = torch.cuda.memory_allocated(device)
    yield reading
    sync(device)
    reading.peak_bytes = torch.cuda.max_memory_allocated(device) - start
    reading.end_bytes = torch.cuda.memory_allocated(device) - start
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
        trace = trace_of(prof)
        reading.peak_bytes = trace.peak
        reading.end_bytes = trace.live()[-1][1] if trace.memory else 0


def _trackable(device: torch.device | str | None) -> torch.device:
    """`device` (or the default one) if its memory can be tracked here: CUDA or CPU."""
    device = pick(device, limit=False)
    if device.type not in ("cuda", "cpu"):
        raise ValueError(f"Memory tracking supports 'cuda' and 'cpu' devices, not {device.type!r}.")
    return device


def track(device: torch.device | str | None = None) -> AbstractContextManager[MemoryReading]:
    """Measure the peak memory the block adds on `device`; the reading is filled at exit.

    ``with memory.track("cpu") as r: step()`` then ``print(r)`` → '16.8 MiB peak (…, cpu)'.
    Peak (and ``end_bytes``, what is still live at the end) is relative to memory live at the
    start. CUDA: ``max_memory_allocated`` minus
    the allocated bytes at the start, synchronised; ``reserved_bytes`` is the absolute peak
    the caching allocator reserved. CPU: the profiler's tensor allocations and frees
    replayed in time order (frees of memory allocated before the block are invisible to
    it); the profiler slows the block and silences C-level stderr while it runs.
    """
    device = _trackable(device)
    return _track_cuda(device) if device.type == "cuda" else _track_cpu(device)


def peak_memory(fn: Callable[[], object], device: torch.device | str | None = None) -> MemoryReading:
    """Call `fn()` once and return the peak memory it added on `device` (see :func:`track`)."""
    with track(device) as reading:
        fn()
    return reading


@dataclass
class Phase:
    """Bytes live during one phase of a step, counted from the tracker's start."""

    name: str
    start: int  # live when the phase began
    peak: int  # the most live at any moment inside it
    end: int  # live when it ended


class PhaseTracker:
    """Live memory per phase of training steps: ``with tracker.phase("forward"): ...``.

    CUDA: before and after each phase, synchronise and read ``memory_allocated``; inside it,
    ``max_memory_allocated`` after ``reset_peak_memory_stats``. CPU: a profiler with memory
    events runs for the whole ``with`` block, each phase is a ``record_function`` range, and
    the ranges are read from its trace at exit. Bytes count from the tracker's start, so
    create the model inside the block to see everything (on a CPU, frees of tensors made
    before the block are invisible to the profiler).
    """

    def __init__(self, device: torch.device | str | None = None) -> None:
        self.device = _trackable(device)
        self.phases: list[Phase] = []
        self._names: list[str] = []
        self._base = 0
        self._prof: profile | None = None
        self._quiet: AbstractContextManager[None] | None = None

    def __enter__(self) -> PhaseTracker:
        if self.device.type == "cuda":
            sync(self.device)
            self._base = torch.cuda.memory_allocated(self.device)
        else:
            self._quiet = quiet_stderr()  # the profiler's C++ noise on a CUDA build without GPU
            self._quiet.__enter__()
            self._prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
            self._prof.start()
        return self

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Measure the block as one phase called `name`."""
        if self.device.type == "cpu":
            self._names.append(name)
            with record_function(name):
                yield
            return
        sync(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)
        start = torch.cuda.memory_allocated(self.device)
        yield
        sync(self.device)
        self.phases.append(Phase(name, start - self._base,
                                 torch.cuda.max_memory_allocated(self.device) - self._base,
                                 torch.cuda.memory_allocated(self.device) - self._base))

    def __exit__(self, *exc: object) -> None:
        if self._prof is None:
            return
        try:
            self._prof.stop()
        finally:
            assert self._quiet is not None
            self._quiet.__exit__(None, None, None)
        self.phases = phases_of(trace_of(self._prof), self._names)

    def table(self) -> str:
        """One line per phase: live at start, peak, live at end."""
        lines = [f"{'phase':<14} {'start':>11} {'peak':>11} {'end':>11}"]
        lines += [f"{p.name:<14} {fmt_bytes(p.start):>11} {fmt_bytes(p.peak):>11} {fmt_bytes(p.end):>11}"
                  for p in self.phases]
        return "\n".join(lines)


def phases_of(trace: Trace, names: Sequence[str]) -> list[Phase]:
    """Start, peak and end of live bytes inside each ``record_function`` range of `trace`
    named in `names` (in order; a name may repeat, one range each time)."""
    live = trace.live()
    spans = list(trace.annotations)
    phases = []
    for name in names:
        i = next((k for k, span in enumerate(spans) if span[0] == name), None)
        if i is None:
            raise ValueError(f"The profile has no record_function range called {name!r}.")
        _, t0, t1 = spans.pop(i)
        before = [b for t, b in live if t < t0]
        start = before[-1] if before else 0
        inside = [b for t, b in live if t0 <= t <= t1]
        phases.append(Phase(name, start, max([start, *inside]), inside[-1] if inside else start))
    return phases


# Optimizer state per trainable parameter, in parameter-sized tensors (PyTorch's optimizers).
_OPTIMIZER_STATES = {"sgd": 0, "sgd_momentum": 1, "adam": 2, "adamw": 2}
CUDA_BLOCK = 512  # bytes: the CUDA caching allocator rounds every allocation up to a multiple


def allocated_bytes(nbytes: int, device: torch.device | str) -> int:
    """What an allocation of `nbytes` takes on `device`: on CUDA, rounded up to 512 bytes."""
    if torch.device(device).type == "cuda":
        return -(-nbytes // CUDA_BLOCK) * CUDA_BLOCK
    return nbytes


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
        """All four at once: the estimate of a step's peak."""
        return self.params + self.grads + self.optimizer + self.activations

    def rows(self) -> list[tuple[str, int]]:
        return [("parameters", self.params), ("gradients", self.grads),
                (f"optimizer state ({self.optimizer_name})", self.optimizer),
                ("activations (saved for backward)", self.activations), ("total", self.total)]

    def __str__(self) -> str:
        return "\n".join(f"{name:<34} {fmt_bytes(n):>11}" for name, n in self.rows())


def optimizer_state_bytes(params: Sequence[torch.Tensor], optimizer: str = "adamw", *,
                          fused: bool = False) -> int:
    """Bytes of optimizer state on the parameters' device once the first step has run.

    SGD keeps nothing, SGD with momentum one buffer per parameter, Adam and AdamW two
    (``exp_avg``, ``exp_avg_sq``, in the parameter's dtype) and a float32 ``step`` count
    per parameter, which lives on the CPU unless the step is fused (or on a CPU anyway).
    """
    if optimizer not in _OPTIMIZER_STATES:
        raise ValueError(f"Unknown optimizer {optimizer!r}; choose one of {sorted(_OPTIMIZER_STATES)}.")
    total = 0
    for p in params:
        total += _OPTIMIZER_STATES[optimizer] * allocated_bytes(p.nbytes, p.device)
        if optimizer.startswith("adam") and (fused or p.device.type == "cpu"):
            total += allocated_bytes(4, p.device)
    return total


def activation_bytes(model: nn.Module, x: torch.Tensor, amp: torch.dtype | None = None,
                     loss: Callable[[torch.Tensor], torch.Tensor] | None = None) -> int:
    """Bytes autograd saves for backward in one forward pass (and `loss` of its output), once
    per storage: what lives from the forward pass until ``backward()`` frees it.

    Parameters are left out; copies of them (bf16 weights under autocast) count.
    """
    weights = {StorageWeakRef(p.untyped_storage()) for p in model.parameters()}
    saved: dict[StorageWeakRef, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        key = StorageWeakRef(t.untyped_storage())
        if key not in weights:
            saved[key] = allocated_bytes(t.untyped_storage().nbytes(), t.device)
        return t.detach()  # t itself, when an op saves its own output, would tie the graph in a cycle

    autocast = torch.autocast(x.device.type, dtype=amp) if amp else nullcontext()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), autocast:
        out = model(x)
        if loss is not None:
            out = loss(out)
    del out  # frees the graph and what it saved (pack returned detached tensors: no cycle)
    return sum(saved.values())


def estimate_training_memory(model: nn.Module, example: torch.Tensor | Sequence[int],
                             optimizer: str = "adamw", amp: torch.dtype | None = None, *,
                             fused: bool = False,
                             loss: Callable[[torch.Tensor], torch.Tensor] | None = None,
                             ) -> MemoryEstimate:
    """Estimate the memory of one training step of `model` on a batch like `example`.

    Parameters, gradients (trainable only) and optimizer state are exact for the dtypes
    and device the parameters have now (convert the model first to estimate bf16 weights;
    on CUDA each tensor is rounded up to the allocator's 512-byte block).
    Activations come from one real forward pass (and `loss` of its output, when given):
    the bytes autograd saves for backward (``saved_tensors_hooks``). Op workspaces and the
    backward pass's temporaries are not counted. `example` is an input tensor or a shape
    (random float32 on the model's device); `amp` is an autocast dtype or None. A model
    made under ``FakeTensorMode`` gives the same estimate without allocating anything.
    """
    params = list(model.parameters())
    trainable = [p for p in params if p.requires_grad]
    if not isinstance(example, torch.Tensor):
        example = torch.randn(*example, device=params[0].device if params else "cpu")
    return MemoryEstimate(sum(allocated_bytes(p.nbytes, p.device) for p in params),
                          sum(allocated_bytes(p.nbytes, p.device) for p in trainable),
                          optimizer_state_bytes(trainable, optimizer, fused=fused),
                          activation_bytes(model, example, amp, loss), optimizer)
