"""Inside a ``torchrun`` job, one process per rank: the helpers the scripts in ``scripts/`` use.

:func:`entry` wraps a script's ``main`` (each rank records whether it started, finished or raised,
so that :func:`course_lib.launcher.launch` can say which rank failed), :func:`setup` /
:func:`teardown` the process group with a timeout, :func:`print0`, :func:`seed_all`,
:func:`save0` (rank 0 writes a checkpoint atomically, every rank waits for it), :func:`write_json0`.
"""

from __future__ import annotations

import functools
import gc
import json
import os
import random
import re
import sys
import time
import traceback
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable

import torch
import torch.distributed as dist

from course_lib import checkpoint, files

STATUS_ENV = "COURSE_DIST_STATUS"  # folder where each rank records started / done / error
BACKEND_ENV = "COURSE_DIST_BACKEND"  # force "gloo" or "nccl" in the scripts
_CPP_PLACE = re.compile(r"^\[[^\]]+\.(?:cc|cpp|h|hpp):\d+\]\s*")  # "[.../unbound_buffer.cc:78] "


def backend_for(nproc_per_node: int) -> str:
    """'nccl' when every local rank can have its own GPU, else 'gloo' (CPU tensors); the
    backend named in ``COURSE_DIST_BACKEND`` when it is set (to compare jobs on one kind of device).

    NCCL refuses two ranks on one GPU, so two ranks on a one-GPU machine use gloo.
    """
    forced = os.environ.get(BACKEND_ENV)
    if forced:
        if forced not in ("gloo", "nccl"):
            raise ValueError(f"{BACKEND_ENV} is {forced!r}; use 'gloo' or 'nccl'.")
        return forced
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return "nccl" if dist.is_nccl_available() and 0 < nproc_per_node <= gpus else "gloo"


def _first_line(message: str) -> str:
    """The first line of an exception message, without a C++ source location in front."""
    first = message.splitlines()[0] if message else ""
    return _CPP_PLACE.sub("", first)[:300]


@dataclass(frozen=True)
class RankInfo:
    """This process's place in the job."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    backend: str


def _status(state: str, **extra: Any) -> None:
    folder = os.environ.get(STATUS_ENV)
    if not folder:
        return
    rank = int(os.environ.get("RANK", 0))
    local = int(os.environ.get("LOCAL_RANK", 0))
    node = int(os.environ.get("GROUP_RANK", 0))
    record = dict(rank=rank, local_rank=local, node=node, pid=os.getpid(), state=state,
                  time=time.time(), attempt=int(os.environ.get("TORCHELASTIC_RESTART_COUNT", 0)),
                  **extra)
    files.write_text_atomic(Path(folder) / f"rank{rank}.json", json.dumps(record))


def entry(main: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a script's ``main``: record 'started', then 'done' or the exception that ended
    it (type, message, time), for the launcher's diagnosis; the exception still propagates.

    After ``main`` returns, a garbage collection frees whatever still holds the process group
    (a DDP model's reducer keeps it alive after ``destroy_process_group``) while the interpreter
    is whole: freed during interpreter shutdown instead, gloo's threads can abort the process."""

    @functools.wraps(main)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        _status("started")
        try:
            result = main(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - recorded, then re-raised
            _status("error", error=type(exc).__name__, message=_first_line(str(exc)),
                    traceback=traceback.format_exc(limit=-3))
            raise
        gc.collect()
        _status("done")
        return result

    return wrapped


def setup(backend: str | None = None, timeout_s: float = 60) -> RankInfo:
    """Join the process group torchrun describes (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` …).

    `backend`: 'nccl' (one GPU per rank), 'gloo' (CPU), or None for ``COURSE_DIST_BACKEND`` or
    :func:`backend_for`. A collective that waits longer than `timeout_s` raises instead of
    hanging for ever.
    """
    if "RANK" not in os.environ:
        raise RuntimeError("This script is meant to run under torchrun, e.g. "
                           "`torchrun --nproc_per_node=2 scripts/ddp_train.py`.")
    local = int(os.environ["LOCAL_RANK"])
    backend = backend or backend_for(int(os.environ["LOCAL_WORLD_SIZE"]))  # COURSE_DIST_BACKEND first
    if backend == "nccl":
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend, timeout=timedelta(seconds=timeout_s),
                            device_id=device if device.type == "cuda" else None)  # barrier() needs it
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", 1)))
    return RankInfo(dist.get_rank(), dist.get_world_size(), local, device, backend)


# On torch < 2.8, freeing a gloo process group could deadlock the rank (seen here on 2.6, about
# 1 job in 20): Python's main thread frees the group while holding the interpreter lock and
# waits for gloo's worker threads to end, while one of them, freeing the tensors of the last
# collective, waits for that lock. pytorch/pytorch#154976 (June 2025, after 2.7) releases the
# lock there, and newer releases stop gloo's threads in destroy_process_group.
GLOO_EXIT_DEADLOCK = torch.torch_version.TorchVersion(torch.__version__) < "2.8"


def teardown() -> None:
    """Leave the process group (every rank, as the last statement of the script): a barrier
    first, so that no rank closes its connections while another is still finishing (rank 0
    writing results), then ``destroy_process_group``.

    On torch < 2.8 (:data:`GLOO_EXIT_DEADLOCK`) the rank ends here instead, after the barrier:
    it records 'done', flushes its output and leaves with ``os._exit(0)``, without freeing the
    group (the operating system closes its connections), so it cannot deadlock on the way out."""
    if not dist.is_initialized():
        return
    dist.barrier()
    if GLOO_EXIT_DEADLOCK:
        _status("done")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    dist.destroy_process_group()


def print0(*args: Any, **kwargs: Any) -> None:
    """print on rank 0 only (every rank when no process group is up)."""
    if not dist.is_initialized() or dist.get_rank() == 0:
        print(*args, **kwargs, flush=True)


def seed_all(seed: int) -> None:
    """Seed Python, NumPy and torch (every device) with `seed`."""
    random.seed(seed)
    try:
        import numpy as np
        np.random.seed(seed % 2**32)
    except ImportError:  # pragma: no cover - numpy comes with torch's wheels
        pass
    torch.manual_seed(seed)


def save0(path: str | Path, state: dict[str, Any]) -> None:
    """Rank 0 writes `state` atomically (:func:`checkpoint.save_checkpoint`); every rank waits
    at a barrier, so no rank reads the file before it is complete."""
    if not dist.is_initialized() or dist.get_rank() == 0:
        checkpoint.save_checkpoint(path, state)
    if dist.is_initialized():
        dist.barrier()


def write_json0(path: str | Path, obj: Any) -> None:
    """Rank 0 writes `obj` as JSON atomically (results the notebook reads)."""
    if not dist.is_initialized() or dist.get_rank() == 0:
        files.write_text_atomic(path, json.dumps(obj, indent=1))
