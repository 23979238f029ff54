"""How fast does data reach the model? Images/s and data-wait share of a training setup.

Every measurement trains for a few steps with :func:`course_lib.train.fit` and reads the
throughput and the time blocked on the loader from its History, after a short warm-up
run on the same model and loader (worker start-up and first-call costs such as kernel
selection and allocator growth are not counted):

    r = measure_loader(num_workers=2, steps=20)
    print(r)  # workers=2 | 1,234 img/s | data wait 12% | 103.7 ms/step | cpu (2 threads)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset, Subset

from course_lib import data, models, train
from course_lib.device import label as device_label
from course_lib.device import pick as pick_device

__all__ = ["Throughput", "SyntheticBatches", "shapes_loader", "loader_name",
           "measure", "measure_loader", "measure_model", "table", "real_data_run"]


@dataclass
class Throughput:
    """One measured setup: images per second and the share of step time spent waiting for data."""

    name: str
    images_per_s: float
    data_wait_share: float  # 0..1 of training time blocked on the loader
    step_s: float  # mean seconds per optimizer step
    steps: int  # steps measured (after the warm-up)
    device: str

    def __str__(self) -> str:
        return (f"{self.name:<30} | {self.images_per_s:>9,.0f} img/s | data wait "
                f"{100 * self.data_wait_share:>3.0f}% | {1e3 * self.step_s:>7.1f} ms/step | "
                f"{self.device}")


class SyntheticBatches:
    """The same random batch `steps` times, on `device`: model speed without any loading."""

    def __init__(self, batch_size: int, resolution: int, steps: int, num_classes: int = 10,
                 device: str | torch.device = "cpu", in_channels: int = 3) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(batch_size, in_channels, resolution, resolution, generator=g).to(device)
        self.y = torch.randint(0, num_classes, (batch_size,), generator=g).to(device)
        self.steps = steps

    def __len__(self) -> int:
        return self.steps

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        return ((self.x, self.y) for _ in range(self.steps))


def shapes_loader(n: int, resolution: int = 32, batch_size: int = 128, num_workers: int = 0,
                  pin_memory: bool = False, seed: int = 0) -> DataLoader:
    """A shuffled DataLoader that draws `n` ShapesDataset images on the fly.

    Workers persist between passes, so a warm-up pass pays their start-up once.
    """
    extra = {"persistent_workers": True} if num_workers > 0 else {}
    train_loader, _ = data.loaders(n_train=n, n_val=1, resolution=resolution,
                                   batch_size=batch_size, num_workers=num_workers,
                                   pin_memory=pin_memory, seed=seed, **extra)
    return train_loader


def loader_name(num_workers: int, pin_memory: bool = False, non_blocking: bool = False) -> str:
    """'workers=2 +pin +non_blocking': the label of one DataLoader setting."""
    return (f"workers={num_workers}" + (" +pin" if pin_memory else "")
            + (" +non_blocking" if non_blocking else ""))


def measure(model: nn.Module, loader, cfg: train.TrainConfig, name: str,
            warmup_steps: int = 2) -> Throughput:
    """Train `warmup_steps` steps (not counted), then `cfg.max_steps` steps; report the latter.

    Both runs use the same model and loader; the numbers come from the measured run's
    History (``samples_per_s``, ``data_wait_share``).
    """
    if cfg.max_steps is None:
        raise ValueError("measure needs cfg.max_steps: how many steps to time.")
    if warmup_steps > 0:
        train.fit(model, loader, dataclasses.replace(cfg, max_steps=warmup_steps, progress=False,
                                                     checkpoint_path=None, checkpoint_every=None))
    h = train.fit(model, loader, cfg)
    step_s = h.train_time_s / max(1, len(h.step))
    return Throughput(name, h.samples_per_s, h.data_wait_share, step_s, len(h.step),
                      device_label(pick_device(cfg.device)))


def measure_loader(num_workers: int = 0, pin_memory: bool = False, non_blocking: bool = False, *,
                   steps: int = 10, batch_size: int = 128, resolution: int = 32, width: int = 32,
                   warmup_steps: int = 2, channels_last: bool = False, amp: str = "off",
                   device: str | torch.device | None = None, seed: int = 0) -> Throughput:
    """Images/s of a fresh SmallCNN trained on shapes drawn by a DataLoader with these settings.

    `pin_memory` and `non_blocking` only act when training on a GPU (PyTorch warns and
    ignores pinning without one).
    """
    if num_workers < 0 or steps < 1:
        raise ValueError(f"Need num_workers >= 0 and steps >= 1, got {num_workers} and {steps}.")
    loader = shapes_loader(batch_size * max(steps, warmup_steps), resolution, batch_size,
                           num_workers, pin_memory, seed)
    torch.manual_seed(seed)
    model = models.SmallCNN(width=width, resolution=resolution)
    cfg = train.TrainConfig(max_steps=steps, log_every=steps, non_blocking=non_blocking,
                            channels_last=channels_last, amp=amp, device=device, seed=seed)
    return measure(model, loader, cfg, loader_name(num_workers, pin_memory, non_blocking),
                   warmup_steps)


def measure_model(model: nn.Module, *, batch_size: int, resolution: int, steps: int = 10,
                  num_classes: int = 10, amp: str = "off", channels_last: bool = False,
                  device: str | torch.device | None = None, name: str = "",
                  warmup_steps: int = 2) -> Throughput:
    """Training images/s of `model` on one synthetic batch already on the device (no loading)."""
    dev = pick_device(device)
    batches = SyntheticBatches(batch_size, resolution, max(steps, warmup_steps), num_classes, dev)
    cfg = train.TrainConfig(max_steps=steps, log_every=steps, amp=amp, channels_last=channels_last,
                            device=dev)
    name = name or f"{type(model).__name__} {amp if amp != 'off' else 'fp32'} " + (
        "channels_last" if channels_last else "NCHW")
    return measure(model, batches, cfg, name, warmup_steps)


def table(rows: list[Throughput], baseline: Throughput | None = None) -> str:
    """Rows as a text table with each one's images/s relative to `baseline` (default: the first)."""
    if not rows:
        raise ValueError("table needs at least one measured row.")
    base = baseline or rows[0]
    head = (f"{'setup':<30} | {'images/s':>9} | {'speed-up':>8} | {'data wait':>9} | "
            f"{'ms/step':>7} | device")
    lines = [head, "-" * len(head)]
    for r in rows:
        speedup = r.images_per_s / base.images_per_s
        lines.append(f"{r.name:<30} | {r.images_per_s:>9,.0f} | {speedup:>7.2f}× | "
                     f"{100 * r.data_wait_share:>8.0f}% | {1e3 * r.step_s:>7.1f} | {r.device}")
    return "\n".join(lines)


REAL = {  # name -> (loader function, input channels, resolution)
    "cifar10": (data.cifar10, 3, 32),
    "mnist": (data.mnist, 1, 28),
}


def real_data_run(name: str, steps: int = 20, batch_size: int = 64, n_val: int = 512,
                  device: str | torch.device | None = None, root: str | Path | None = None,
                  seed: int = 0) -> train.History:
    """Train a fresh SmallCNN (10 classes) for `steps` steps on a real dataset, evaluate on
    the first `n_val` test images. Raises data.DatasetMissing (one sentence) without files."""
    if name not in REAL:
        raise ValueError(f"Unknown dataset {name!r}: choose one of {', '.join(REAL)}.")
    load, channels, resolution = REAL[name]
    train_set, test_set = load(root=root, train=True), load(root=root, train=False)
    loader = data.make_loader(_first(train_set, steps * batch_size), batch_size, seed=seed)
    val = DataLoader(_first(test_set, n_val), batch_size=256)
    torch.manual_seed(seed)
    model = models.SmallCNN(num_classes=10, in_channels=channels, resolution=resolution)
    epochs = -(-steps // len(loader))  # a subset smaller than steps batches is repeated
    cfg = train.TrainConfig(epochs=epochs, max_steps=steps, device=device, seed=seed)
    return train.fit(model, loader, cfg, val_loader=val)


def _first(dataset: Dataset, n: int) -> Dataset:
    return Subset(dataset, range(min(n, len(dataset))))
