"""What exact resume needs: atomic checkpoint files, RNG states, a replayable batch order.

A checkpoint is written to a temporary file in the destination folder and then
renamed over the old one (``os.replace`` is atomic on POSIX and Windows), so a crash
mid-write leaves the previous checkpoint intact. Files are read back with
``torch.load(..., weights_only=True)``: only tensors and plain containers, no code.
"""

from __future__ import annotations

import os
import random
import tempfile
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler


class CheckpointError(RuntimeError):
    """A checkpoint file is missing, corrupt, foreign, or does not fit the model."""


def save_checkpoint(path: str | os.PathLike, state: dict[str, Any]) -> Path:
    """Write `state` to `path` atomically: temp file in the same folder, fsync, rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)  # the atomic step: readers see the old file or the new one
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load_checkpoint(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> dict:
    """Read a checkpoint written by :func:`save_checkpoint` (tensors and containers only)."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"No checkpoint file at {path}.")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception:  # truncated zip, pickled code, random bytes: all one answer
        raise CheckpointError(
            f"{path} is not a readable PyTorch checkpoint (corrupt, truncated, or not "
            "tensors-only)."
        ) from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{path} holds a {type(state).__name__}, not a checkpoint dict.")
    return state


def capture_rng() -> dict[str, Any]:
    """The state of every global random generator training may draw from."""
    np_state = np.random.get_state(legacy=False)
    np_state["state"]["key"] = np_state["state"]["key"].tolist()  # weights_only-safe
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "python": random.getstate(),
        "numpy": np_state,
    }


def restore_rng(state: dict[str, Any]) -> None:
    """Put back generator states captured by :func:`capture_rng`."""
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        n = min(len(state["cuda"]), torch.cuda.device_count())
        torch.cuda.set_rng_state_all(state["cuda"][:n])
    random.setstate(state["python"])
    np_state = dict(state["numpy"])
    np_state["state"] = dict(np_state["state"])
    np_state["state"]["key"] = np.asarray(np_state["state"]["key"], dtype=np.uint32)
    np.random.set_state(np_state)


def seed_everything(seed: int) -> None:
    """Seed torch (CPU and CUDA), Python's `random` and NumPy's global generator."""
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)


def epoch_seed(seed: int, epoch: int) -> int:
    """The seed of one epoch's shuffle (and of its DataLoader worker seeds)."""
    return seed * 1_000_003 + epoch


class EpochBatchSampler(Sampler[list[int]]):
    """Batches of indices whose order is a pure function of (seed, epoch).

    ``set_epoch(epoch, start_batch)`` picks the permutation and where to begin, so a
    resumed run skips finished batches without loading them.
    """

    def __init__(self, n: int, batch_size: int, shuffle: bool = True, drop_last: bool = False,
                 seed: int = 0) -> None:
        if batch_size < 1 or n < 1:
            raise ValueError(f"Need n >= 1 samples and batch_size >= 1, got {n} and {batch_size}.")
        self.n, self.batch_size, self.shuffle, self.drop_last = n, batch_size, shuffle, drop_last
        self.seed, self.epoch, self.start_batch = seed, 0, 0

    def set_epoch(self, epoch: int, start_batch: int = 0, seed: int | None = None) -> None:
        self.epoch, self.start_batch = epoch, start_batch
        self.seed = self.seed if seed is None else seed

    def __len__(self) -> int:
        return self.n // self.batch_size if self.drop_last else -(-self.n // self.batch_size)

    def order(self) -> torch.Tensor:
        """This epoch's permutation of range(n) (the identity without shuffle)."""
        if not self.shuffle:
            return torch.arange(self.n)
        return torch.randperm(self.n, generator=torch.Generator().manual_seed(
            epoch_seed(self.seed, self.epoch)))

    def __iter__(self) -> Iterator[list[int]]:
        order = self.order()
        for b in range(self.start_batch, len(self)):
            yield order[b * self.batch_size:(b + 1) * self.batch_size].tolist()


def make_loader(dataset: Dataset, batch_size: int, *, shuffle: bool = True,
                drop_last: bool = False, seed: int = 0, **loader_kwargs: Any) -> DataLoader:
    """A DataLoader whose batch order `fit` can replay exactly when it resumes.

    Other kwargs (num_workers, pin_memory, ...) go to DataLoader. Inside `fit` the
    shuffle follows ``TrainConfig.seed``; `seed` here only matters outside `fit`.
    """
    sampler = EpochBatchSampler(len(dataset), batch_size, shuffle, drop_last, seed)
    generator = torch.Generator().manual_seed(seed)  # worker seeds, not the global RNG
    return DataLoader(dataset, batch_sampler=sampler, generator=generator, **loader_kwargs)
