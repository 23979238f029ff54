"""Checkpoint files you can trust: atomic writes, a digest, clear errors, RNG states.

A checkpoint is written to a temporary file in the destination folder, fsynced, then
renamed over the old one (``os.replace`` is atomic on POSIX and Windows), so a crash
mid-write leaves the previous checkpoint intact; temporary files that a killed save
left behind are removed by the next save or load of that path. The file holds
``{"format", "digest", "state"}``: the digest (SHA-256 over every key, number and
tensor byte of `state`) is checked on load, so a flipped bit is an error, never
different weights. Files are read back with ``torch.load(..., weights_only=True)``:
only tensors and plain containers, no code.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import random
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn as nn

from course_lib import files

FORMAT = "course_lib.checkpoint/2"  # the file layout; a file without it was not written here


class CheckpointError(RuntimeError):
    """A checkpoint file is missing, corrupt, foreign, or does not fit this run."""


# ---- files ----------------------------------------------------------------------------

def digest(state: Any) -> str:
    """SHA-256 of everything `state` holds: keys, numbers, strings and tensor bytes."""
    h = hashlib.sha256()
    _feed(h, state)
    return h.hexdigest()


def _feed(h: Any, obj: Any) -> None:
    """Add `obj` to hash `h`, its type and structure included (depth-first, in order)."""
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        h.update(f"T{t.dtype}{tuple(t.shape)};".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    elif isinstance(obj, dict):
        h.update(f"D{len(obj)};".encode())
        for key, value in obj.items():
            _feed(h, key)
            _feed(h, value)
    elif isinstance(obj, (list, tuple)):
        h.update(f"{type(obj).__name__[0]}{len(obj)};".encode())
        for value in obj:
            _feed(h, value)
    elif isinstance(obj, float):
        h.update(f"f{obj.hex()};".encode())
    elif isinstance(obj, bytes):
        h.update(f"b{len(obj)};".encode() + obj)
    else:  # None, bool, int, str, torch.dtype ...: their repr is their value
        text = repr(obj)
        h.update(f"{type(obj).__name__}{len(text)};{text}".encode())


def save_checkpoint(path: str | os.PathLike, state: dict[str, Any]) -> Path:
    """Write `state` and its digest to `path` atomically (:func:`files.atomic_write`: temp
    file in the same folder, fsync, rename; stale temporary files of killed saves removed)."""
    payload = {"format": FORMAT, "digest": digest(state), "state": state}
    return files.atomic_write(path, lambda f: torch.save(payload, f))


def load_checkpoint(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> dict:
    """The state saved by :func:`save_checkpoint` at `path`, after checking its digest.

    Also removes temporary files that killed saves of `path` left. Every failure is a
    :class:`CheckpointError` of one sentence, with the underlying exception as its cause.
    """
    path = Path(path)
    files.remove_stale_temp_files(path)
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except (FileNotFoundError, IsADirectoryError) as exc:
        raise CheckpointError(f"No checkpoint file at {path}.") from exc
    except pickle.UnpicklingError as exc:
        if not zipfile.is_zipfile(path):
            raise CheckpointError(f"{path} is not a PyTorch checkpoint: it is not the zip "
                                  "archive that torch.save writes.") from exc
        raise CheckpointError(f"{path} holds Python objects (classes or functions, not only "
                              "tensors and containers) that weights_only loading refuses, so it "
                              "was not written by save_checkpoint.") from exc
    except Exception as exc:  # truncated or garbled archive: the reader's type varies
        raise CheckpointError(f"{path} is corrupt or truncated: PyTorch could not read it "
                              f"back ({type(exc).__name__}).") from exc
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path} was not written by course_lib's save_checkpoint "
                              f"(no {FORMAT!r} format tag).")
    if digest(payload.get("state")) != payload.get("digest"):
        raise CheckpointError(f"{path} is corrupt: its contents do not match the digest "
                              "written when it was saved.")
    return payload["state"]


# ---- fitting a checkpoint to a run ----------------------------------------------------

def check_same(path: str | os.PathLike, saved: dict[str, Any], current: dict[str, Any]) -> None:
    """Raise CheckpointError naming the first field whose saved and current values differ.

    A list value (e.g. the learning rate of every step) is compared item by item, over
    the steps both lists hold, and the first differing step is named.
    """
    for name, now in current.items():
        then = saved.get(name, "<absent>")
        if isinstance(now, list) and isinstance(then, list):
            for step, (a, b) in enumerate(zip(then, now)):
                if a != b:
                    _differs(path, f"{name}={a!r} at step {step}", f"{name}={b!r} at step {step}")
        elif then != now:
            _differs(path, f"{name}={then!r}", f"{name}={now!r}")


def _differs(path: str | os.PathLike, then: str, now: str) -> None:
    raise CheckpointError(f"{path} was saved with {then}, this run has {now}: "
                          "resume with the same settings, or start a new run.")


def load_weights(path: str | os.PathLike, model: nn.Module, saved: dict[str, torch.Tensor]) -> None:
    """`model.load_state_dict(saved)`, after naming the first key that does not fit."""
    mine = model.state_dict()
    for key, tensor in mine.items():
        if key not in saved:
            _misfit(path, f"{key!r} is {_shape(tensor)} in the model and missing from the "
                          "checkpoint")
        if saved[key].shape != tensor.shape:
            _misfit(path, f"{key!r} is {_shape(saved[key])} in the checkpoint and "
                          f"{_shape(tensor)} in the model")
    for key, tensor in saved.items():
        if key not in mine:
            _misfit(path, f"{key!r} is {_shape(tensor)} in the checkpoint and missing from "
                          "the model")
    model.load_state_dict(saved)


def _shape(t: torch.Tensor) -> str:
    return str(tuple(t.shape))


def _misfit(path: str | os.PathLike, what: str) -> None:
    raise CheckpointError(f"{path} does not fit this model: {what}.")


# ---- a training run's checkpoint: what exact resume needs (train.fit writes and reads it) ------

RUN_FORMAT = "course_lib.train/3"  # written into every run's state; checked on resume


def save_run(path: str | os.PathLike, model: nn.Module, optimizer: torch.optim.Optimizer,
             scaler: torch.amp.GradScaler | None, position: tuple[int, int, int], history: dict,
             plan: dict[str, Any]) -> None:
    """Write, atomically, everything exact resume needs: weights, optimizer and scaler states,
    `position` (step, epoch, batch), the run's `history`, its `plan` (what must not change on
    resume) and every RNG state."""
    step, epoch, batch = position
    save_checkpoint(path, {
        "format": RUN_FORMAT, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
        "scaler": scaler.state_dict() if scaler else None, "step": step, "epoch": epoch, "batch": batch,
        "trajectory": plan, "rng": capture_rng(), "history": history,
    })


def load_run(path: str | os.PathLike, model: nn.Module, optimizer: torch.optim.Optimizer,
             scaler: torch.amp.GradScaler | None, plan: dict[str, Any]) -> dict[str, Any]:
    """Restore a checkpoint written by :func:`save_run` into this run, after checking that it ran
    with the same `plan`; RNG states are restored last. Returns ``{"position": (step, epoch,
    batch), "history": the saved history}``."""
    state = load_checkpoint(path)
    if state.get("format") != RUN_FORMAT:
        raise CheckpointError(f"{path} was not written by course_lib.train ({RUN_FORMAT}).")
    check_same(path, state["trajectory"], plan)
    load_weights(path, model, state["model"])
    try:
        optimizer.load_state_dict(state["optimizer"])
    except (ValueError, KeyError) as exc:
        raise CheckpointError(f"{path} does not fit this optimizer: its parameter groups "
                              "differ from this model's trainable parameters.") from exc
    if scaler is not None:
        scaler.load_state_dict(state["scaler"])
    restore_rng(state["rng"])
    return {"position": (state["step"], state["epoch"], state["batch"]), "history": state["history"]}


# ---- random number generators ---------------------------------------------------------

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
