"""Memory over time, stacked by what holds it: a profile's categories, or CUDA's allocator.

- :func:`profiler_timeline`: bytes live by category (parameters, optimizer state,
  activations, gradients…) from a ``torch.profiler`` profile, on a CPU or a GPU.
- :func:`record_history`, :func:`dump_snapshot`, :func:`snapshot_timeline`: the CUDA caching
  allocator's own record of every allocation, free and ``cudaMalloc``, as allocated and
  reserved bytes over time. The pickle :func:`dump_snapshot` writes opens in PyTorch's
  viewer at :data:`VIEWER_URL` (drag the file onto the page), block by block.
"""

from __future__ import annotations

import json
import os
import pickle
import tempfile
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import torch
from torch.profiler import profile

VIEWER_URL = "https://pytorch.org/memory_viz"  # PyTorch's snapshot viewer; it loads from the web

# Trace actions that change allocated or reserved bytes by the entry's size. 'free_requested'
# frees nothing yet: the block is reusable only at its 'free_completed' (after other streams).
_ALLOCATED = {"alloc": 1, "free_completed": -1}
_RESERVED = {"segment_alloc": 1, "segment_map": 1, "segment_free": -1, "segment_unmap": -1}
_LIVE_BLOCKS = ("active_allocated", "active_pending_free")  # in use, or freed but not yet reusable


class NeedsCUDA(RuntimeError):
    """The CUDA allocator's history was asked for where there is no CUDA GPU."""


class NoMemoryTimeline(RuntimeError):
    """This torch's profiler cannot export a memory timeline by category."""


@dataclass
class Timeline:
    """Bytes live over time, by category, on one device."""

    device: str
    times_us: list[int]  # µs since the Unix epoch (the profiler's clock: event start_ns() / 1000)
    by_category: dict[str, list[int]]  # name -> bytes at each time; insertion order = stacking order
    source: str  # "profiler memory timeline" or "CUDA allocator snapshot"

    @property
    def total(self) -> list[int]:
        """Bytes live in all categories together at each time."""
        return [sum(column) for column in zip(*self.by_category.values())]

    def peak(self) -> tuple[int, int]:
        """(time, bytes) of the highest total; the first one if several tie."""
        total = self.total
        i = max(range(len(total)), key=total.__getitem__)
        return self.times_us[i], total[i]

    def at(self, i: int) -> dict[str, int]:
        """Bytes in each category at the `i`-th time."""
        return {name: sizes[i] for name, sizes in self.by_category.items()}


def _category_names() -> list[str]:
    """The timeline's categories in its column order, named from torch's own list.

    ``_coalesce_timeline`` numbers the columns by this dict's order (after an unused column
    0), so reading the names from it keeps them in step with the file torch writes.
    """
    from torch.profiler._memory_profiler import _CATEGORY_TO_COLORS

    return ["unknown" if c is None else c.name.lower().replace("_", " ") for c in _CATEGORY_TO_COLORS]


def profiler_timeline(prof: profile, device: str | torch.device = "cpu") -> Timeline:
    """Bytes live on `device` by category over a finished profile's run.

    The profile needs ``profile_memory=True, record_shapes=True, with_stack=True``: torch
    replays every allocation and free, and tells parameters, gradients, optimizer state,
    activations, inputs and temporaries apart from the ops that made and used them. Tensors
    live before the profile started count from its first event.
    """
    if not hasattr(prof, "export_memory_timeline"):
        raise NoMemoryTimeline(f"torch {torch.__version__} has no profile.export_memory_timeline, "
                               "the only memory timeline by category on a CPU.")
    if not (prof.profile_memory and prof.record_shapes and prof.with_stack):
        raise ValueError("The memory timeline needs a profile made with profile_memory=True, "
                         "record_shapes=True and with_stack=True.")
    if prof.profiler is None or prof.profiler.kineto_results is None:
        raise ValueError("The profile has not finished: build the timeline after its with block "
                         "ends (or after prof.stop()).")
    device = torch.device(device)
    if device.type == "cuda":  # memory events name the device with its index: the current GPU's
        device = torch.device("cuda", cuda_index(device))
    elif device.type != "cpu" and device.index is None:
        device = torch.device(device.type, 0)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "timeline.json")
        # Newer torch deprecates this export (a FutureWarning) for the CUDA allocator's
        # history, which is CUDA only; on a CPU it is the only timeline by category.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*export_memory_timeline", category=FutureWarning)
            prof.export_memory_timeline(path, device=str(device))
        with open(path, encoding="utf-8") as f:
            times, sizes = json.load(f)
    if not times:
        raise ValueError(f"The profile saw no memory on {device}.")
    columns = list(zip(*sizes))[1:]  # column 0 is unused
    by_category = {name: list(col) for name, col in zip(_category_names(), columns, strict=True)}
    return Timeline(str(device), times, by_category, "profiler memory timeline")


def cuda_index(device: torch.device | str | int | None = None) -> int:
    """The index of a CUDA device: 'cuda:1' → 1; 'cuda' or None → the current GPU
    (``torch.cuda.current_device()``), or 0 where this machine has no CUDA (a snapshot
    or profile read elsewhere). Raises ValueError for a device that is not CUDA."""
    if isinstance(device, int):
        return device
    device = torch.device("cuda" if device is None else device)
    if device.type != "cuda":
        raise ValueError(f"A CUDA allocator's record is per GPU: give 'cuda', 'cuda:N' or N, not {str(device)!r}.")
    if device.index is not None:
        return device.index
    return torch.cuda.current_device() if torch.cuda.is_available() else 0


def _needs_cuda(what: str) -> None:
    if not torch.cuda.is_available():
        raise NeedsCUDA(f"{what} needs a CUDA GPU, and torch.cuda.is_available() is False here.")


@contextmanager
def record_history(max_entries: int = 100_000) -> Iterator[None]:
    """Record the CUDA allocator's history (every alloc, free and segment) inside the block.

    Take the snapshot (:func:`dump_snapshot`, or ``torch.cuda.memory._snapshot()``) inside
    the block too: stopping the recording at its end drops the history. The history keeps
    the last `max_entries` events (with their Python stacks; C++ stacks make the dump slow);
    older ones fall out, and :func:`snapshot_timeline` starts from the earliest that is left.
    """
    _needs_cuda("Recording the allocator's history")
    torch.cuda.memory._record_memory_history(max_entries=max_entries, stacks="python")
    try:
        yield
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)


def dump_snapshot(path: str | Path) -> Path:
    """Write the CUDA allocator's state and history to the pickle `path` (open it at
    :data:`VIEWER_URL`, or read it with :func:`snapshot_timeline`)."""
    _needs_cuda("A CUDA memory snapshot")
    torch.cuda.memory._dump_snapshot(str(path))
    return Path(path)


def snapshot_timeline(snapshot: dict[str, Any] | str | Path,
                      device: torch.device | str | int | None = None) -> Timeline:
    """Allocated and reserved bytes on GPU `device` after each allocator event of a snapshot.

    `snapshot` is the dict ``torch.cuda.memory._snapshot()`` returns or the pickle
    :func:`dump_snapshot` wrote; it holds every GPU's history (``device_traces``, a list
    indexed by GPU). `device`: the GPU the work ran on, ``torch.device('cuda:1')``, 'cuda:1' or
    1; 'cuda' or None: the current GPU (:func:`cuda_index`). Its trace is replayed in order:
    'alloc' and 'free_completed' change allocated bytes, 'segment_alloc'/'segment_map' and
    'segment_free'/'segment_unmap' reserved bytes. The history may have lost its oldest
    events, so the start comes from the end: the snapshot's live blocks and segments, less
    what the events added. Allocated bytes are the sizes asked for, as PyTorch's viewer
    shows them (``memory_allocated()`` counts blocks rounded up to 512 bytes); the
    category "reserved, not allocated" is the rest of the reserved bytes, so the two stack
    up to the reserved total.
    """
    if not isinstance(snapshot, dict):
        with open(snapshot, "rb") as f:
            snapshot = pickle.load(f)
    device = cuda_index(device)
    traces = snapshot["device_traces"]
    events = [e for e in (traces[device] if device < len(traces) else [])
              if e["action"] in _ALLOCATED or e["action"] in _RESERVED]
    if not events:
        raise ValueError(f"The snapshot has no allocator events for cuda:{device}: take it inside "
                         "record_history(), around work that allocates on that GPU.")
    segments = [s for s in snapshot["segments"] if s["device"] == device]
    allocated = sum(b["requested_size"] for s in segments for b in s["blocks"] if b["state"] in _LIVE_BLOCKS)
    reserved = sum(s["total_size"] for s in segments)
    allocated -= sum(_ALLOCATED.get(e["action"], 0) * e["size"] for e in events)
    reserved -= sum(_RESERVED.get(e["action"], 0) * e["size"] for e in events)
    times, live, spare = [], [], []
    for e in events:
        allocated += _ALLOCATED.get(e["action"], 0) * e["size"]
        reserved += _RESERVED.get(e["action"], 0) * e["size"]
        times.append(e["time_us"])
        live.append(allocated)
        spare.append(reserved - allocated)
    return Timeline(f"cuda:{device}", times, {"allocated": live, "reserved, not allocated": spare},
                    "CUDA allocator snapshot")
