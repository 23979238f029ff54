"""Helper for tests/test_checkpoint_kill.py: a training run that checkpoints every step.

    python tests/_kill_worker.py CHECKPOINT OUT   # resume CHECKPOINT if it exists, save every step
    python tests/_kill_worker.py - OUT            # the same run, uninterrupted, no checkpoints

Prints "ready" once imported; at the end saves the final state_dict and history to OUT.
The model is large enough (about 21 MB of weights, 63 MB with AdamW's state) that a save
takes a noticeable share of each step, so a SIGKILL often lands inside one.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.nn as nn
from torch.utils.data import TensorDataset

from course_lib import train
from course_lib.data import make_loader

N, BATCH, EPOCHS = 48, 8, 2  # 6 steps per epoch, 12 in all


def build() -> tuple[nn.Module, torch.utils.data.DataLoader]:
    """The model (dropout: the RNG state matters on resume) and its resumable loader."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Dropout(0.1),
                          nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 4))
    g = torch.Generator().manual_seed(1)
    data = TensorDataset(torch.randn(N, 512, generator=g), torch.randint(0, 4, (N,), generator=g))
    return model, make_loader(data, BATCH)


def main(checkpoint: str, out: str) -> None:
    torch.set_num_threads(1)  # the same kernels in every process: bitwise-equal runs
    path = None if checkpoint == "-" else Path(checkpoint)
    model, loader = build()
    cfg = train.TrainConfig(device="cpu", epochs=EPOCHS, lr=1e-4, seed=0, log_every=1,
                            checkpoint_path=path, checkpoint_every=1 if path else None)
    print("ready", flush=True)
    resume = path if path is not None and path.exists() else None  # killed before any save
    history = train.fit(model, loader, cfg, resume_from=resume)
    torch.save({"state": model.state_dict(), "step": history.step, "loss": history.loss}, out)


if __name__ == "__main__":
    main(*sys.argv[1:3])
