"""One training loop for the course: AMP, accumulation, clipping, schedule, compile,
progress bar, metrics history, atomic checkpoints and exact resume.

    loader = make_loader(dataset, batch_size=64)           # resumable shuffling
    history = fit(model, loader, TrainConfig(epochs=2, amp="bf16"), val_loader=val)
    print(history.summary())

Batches are ``(inputs, targets)``; ``loss_fn(model(inputs), targets)`` defaults to
cross-entropy with classes in the last dimension, so (B, C) image logits and
(B, T, V) language-model logits both work.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import torch
import torch.nn as nn
import torch.nn.functional as F
from tqdm.auto import tqdm
from tqdm.std import tqdm as text_tqdm

from .checkpoint import (CheckpointError, EpochBatchSampler, capture_rng, epoch_seed,
                         load_checkpoint, make_loader, restore_rng, save_checkpoint,
                         seed_everything)

__all__ = ["TrainConfig", "History", "Trainer", "fit", "evaluate", "forward_backward",
           "make_loader", "EpochBatchSampler", "warmup_cosine", "cross_entropy",
           "save_checkpoint", "load_checkpoint", "CheckpointError", "IGNORE_INDEX", "progress"]

FORMAT = "course_lib.train/1"  # written into every checkpoint; checked on resume
AMP_DTYPES = {"off": None, "fp16": torch.float16, "bf16": torch.bfloat16}
LossFn = Callable[[Any, torch.Tensor], torch.Tensor]


def progress(**kwargs: Any) -> tqdm:
    """A tqdm.auto bar; a text bar on stdout when ``$COURSE_HEADLESS`` is set (``course run``
    sets it), because a widget bar saved in an executed notebook keeps only its first frame."""
    if os.environ.get("COURSE_HEADLESS"):
        return text_tqdm(file=sys.stdout, mininterval=1.0, **kwargs)
    return tqdm(**kwargs)


def cross_entropy(output: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy with classes in the last dim: (B, C) vs (B,) or (B, T, V) vs (B, T)."""
    if output.dim() > 2 and output.dim() == targets.dim() + 1:
        return F.cross_entropy(output.flatten(0, -2), targets.flatten())
    return F.cross_entropy(output, targets)


def warmup_cosine(warmup: int, total: int, min_ratio: float = 0.0) -> Callable[[int], float]:
    """LR multiplier: linear warm-up over `warmup` steps, then cosine decay to `min_ratio`."""
    if warmup < 0 or total < max(warmup, 1):
        raise ValueError(f"warmup_cosine needs 0 <= warmup <= total, got {warmup} and {total}.")

    def multiplier(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    return multiplier


@dataclass
class TrainConfig:
    """Everything `fit` can switch; every default is the plain fp32 baseline."""

    epochs: int = 1  # passes over the loader
    max_steps: int | None = None  # stop after this many optimizer steps in total
    lr: float = 1e-3  # base learning rate (multiplied by `schedule(step)`)
    weight_decay: float = 0.0
    optimizer: str = "adamw"  # adamw | sgd
    momentum: float = 0.9  # SGD only
    amp: str = "off"  # off | fp16 (autocast + GradScaler) | bf16 (autocast, no scaler)
    accum_steps: int = 1  # micro-batches per optimizer step
    clip_grad_norm: float | None = None  # max total grad norm, None = no clipping
    channels_last: bool = False  # NHWC layout for model and 4-D inputs
    compile: bool = False  # torch.compile the model (slow to start on CPU)
    compile_mode: str | None = None  # e.g. "reduce-overhead" (CUDA graphs)
    schedule: Callable[[int], float] | None = None  # step -> LR multiplier
    progress: bool = False  # tqdm bar
    log_every: int = 20  # sync + record losses and timings every N steps
    checkpoint_path: str | Path | None = None  # saved every `checkpoint_every` and at the end
    checkpoint_every: int | None = None  # optimizer steps
    seed: int = 0  # seeds torch/random/numpy and the shuffle order
    non_blocking: bool = True  # async host->device copies (useful with pin_memory)
    device: str | torch.device | None = None  # None: CUDA when available, else CPU

    def __post_init__(self) -> None:
        checks = [
            (self.amp in AMP_DTYPES, f"amp must be off, fp16 or bf16, got {self.amp!r}."),
            (self.optimizer in ("adamw", "sgd"),
             f"optimizer must be adamw or sgd, got {self.optimizer!r}."),
            (self.epochs >= 1, f"epochs must be >= 1, got {self.epochs}."),
            (self.max_steps is None or self.max_steps >= 1,
             f"max_steps must be >= 1 or None, got {self.max_steps}."),
            (self.accum_steps >= 1, f"accum_steps must be >= 1, got {self.accum_steps}."),
            (self.clip_grad_norm is None or self.clip_grad_norm > 0,
             "clip_grad_norm must be positive or None."),
            (self.log_every >= 1, f"log_every must be >= 1, got {self.log_every}."),
            (self.checkpoint_every is None or self.checkpoint_path is not None,
             "checkpoint_every needs a checkpoint_path."),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)


@dataclass
class History:
    """What a run measured. Per-step lists share one index; timings are in seconds."""

    step: list[int] = field(default_factory=list)  # optimizer step number, 1-based
    loss: list[float] = field(default_factory=list)  # mean training loss of that step
    lr: list[float] = field(default_factory=list)
    step_time_s: list[float] = field(default_factory=list)  # mean over its log window
    grad_norm: list[float] = field(default_factory=list)  # before clipping (only when clipping)
    skipped_steps: list[int] = field(default_factory=list)  # GradScaler found inf/NaN
    val_step: list[int] = field(default_factory=list)
    val_epoch: list[float] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    val_accuracy: list[float] = field(default_factory=list)
    samples: int = 0  # inputs trained on (first dim of targets)
    targets: int = 0  # targets trained on, padding excluded (= tokens for a language model)
    train_time_s: float = 0.0  # wall time of training steps (eval and saving excluded)
    data_wait_s: float = 0.0  # part of train_time_s spent blocked on the loader

    @property
    def samples_per_s(self) -> float:
        """Throughput: images/s for image models."""
        return self.samples / self.train_time_s if self.train_time_s else 0.0

    @property
    def targets_per_s(self) -> float:
        """Target elements per second: tokens/s for a language model."""
        return self.targets / self.train_time_s if self.train_time_s else 0.0

    @property
    def data_wait_share(self) -> float:
        """Fraction of training time spent waiting for the next batch (0..1)."""
        return self.data_wait_s / self.train_time_s if self.train_time_s else 0.0

    def median_step_time_s(self, skip: int = 0) -> float:
        """Median step time after the first `skip` steps (skip the warm-up window)."""
        times = sorted(self.step_time_s[skip:])
        return times[len(times) // 2] if times else 0.0

    def summary(self) -> str:
        """One line with units."""
        ms = 1e3 * self.train_time_s / max(1, len(self.step))
        wait = 100 * self.data_wait_share
        line = (f"{len(self.step)} steps | loss {self.loss[-1]:.4f} | {ms:.1f} ms/step | "
                f"{self.samples_per_s:,.0f} samples/s | data wait {wait:.0f}%")
        if self.val_accuracy:
            line += f" | val acc {100 * self.val_accuracy[-1]:.1f}%"
        return line + (f" | {len(self.skipped_steps)} skipped" if self.skipped_steps else "")


def _to(x: Any, device: torch.device, non_blocking: bool, channels_last: bool) -> Any:
    if isinstance(x, torch.Tensor):
        fmt = torch.channels_last if channels_last and x.dim() == 4 else torch.preserve_format
        return x.to(device, non_blocking=non_blocking, memory_format=fmt)
    if isinstance(x, (list, tuple)):
        return type(x)(_to(v, device, non_blocking, channels_last) for v in x)
    if isinstance(x, dict):
        return {k: _to(v, device, non_blocking, channels_last) for k, v in x.items()}
    return x


IGNORE_INDEX = -100  # F.cross_entropy's default: padding targets, left out of every mean


def _count(targets: Any) -> int | torch.Tensor:
    """How many targets a mean loss averages over: class targets equal to IGNORE_INDEX
    (padding) do not count. A count of a device tensor stays there (no sync)."""
    if not isinstance(targets, torch.Tensor):
        return len(targets)
    if targets.is_floating_point():
        return targets.numel()
    return (targets != IGNORE_INDEX).sum()


def autocast(device: torch.device, amp: str) -> contextlib.AbstractContextManager:
    """The autocast context for `amp` ("off" gives a no-op)."""
    if amp == "off":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=AMP_DTYPES[amp])


def forward_backward(model: nn.Module, group: list, loss_fn: LossFn = cross_entropy, *,
                     device: torch.device | str = "cpu", amp: str = "off", scaler=None,
                     channels_last: bool = False, non_blocking: bool = False) -> torch.Tensor:
    """Accumulate gradients of one optimizer step's micro-batches; return the mean loss.

    Each micro-batch loss is weighted by its share of the group's targets (1/k for k
    equal batches; padding targets, IGNORE_INDEX, do not count), so the summed gradient
    equals that of one batch holding them all.
    """
    device = torch.device(device)
    if not all(isinstance(b, (tuple, list)) and len(b) == 2 for b in group):
        raise ValueError("Training batches must be (inputs, targets) pairs.")
    weights = [_count(y) for _, y in group]
    total = sum(weights)
    mean_loss = torch.zeros((), device=device)
    for (x, y), w in zip(group, weights):
        x, y = (_to(v, device, non_blocking, channels_last) for v in (x, y))
        with autocast(device, amp):
            loss = loss_fn(model(x), y) * (w / total)
        (scaler.scale(loss) if scaler is not None else loss).backward()
        mean_loss += loss.detach().float()
    return mean_loss


@torch.no_grad()
def evaluate(model: nn.Module, loader: Iterable, device: torch.device | str | None = None, *,
             amp: str = "off", loss_fn: LossFn = cross_entropy, channels_last: bool = False,
             non_blocking: bool = True) -> tuple[float, float]:
    """(mean loss, accuracy) over `loader`; accuracy = argmax of the last dim vs targets."""
    device = torch.device(device) if device else next(model.parameters()).device
    was_training = model.training
    model.eval()
    try:
        loss_sum, correct, count = _eval_sums(model, loader, device, amp, loss_fn,
                                              channels_last, non_blocking)
    finally:
        model.train(was_training)
    if count == 0:
        raise ValueError("The evaluation loader yielded no batches.")
    return (loss_sum / count).item(), (correct / count).item()  # one sync for the whole pass


def _eval_sums(model, loader, device, amp, loss_fn, channels_last, non_blocking):
    loss_sum, correct, count = torch.zeros((), device=device), torch.zeros((), device=device), 0
    for x, y in loader:
        x, y = (_to(v, device, non_blocking, channels_last) for v in (x, y))
        with autocast(device, amp):
            out = model(x)
        logits = out[0] if isinstance(out, (tuple, list)) else out
        n = _count(y)
        loss_sum += loss_fn(out, y).float() * n
        correct += (logits.argmax(-1) == y).sum()
        count += n
    return loss_sum, correct, count


def _pick_device(device: str | torch.device | None) -> torch.device:
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' was requested but PyTorch sees no GPU; use 'cpu' or None.")
    return device


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _make_optimizer(model: nn.Module, cfg: TrainConfig) -> torch.optim.Optimizer:
    params = [p for p in model.parameters() if p.requires_grad]
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum,
                               weight_decay=cfg.weight_decay)
    return torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)


def _make_scaler(amp: str, device: torch.device) -> torch.amp.GradScaler | None:
    if amp == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise ValueError("amp='bf16' needs a GPU with bf16 support; use amp='fp16' here.")
    if amp != "fp16":
        return None
    try:
        return torch.amp.GradScaler(device.type)
    except Exception:
        raise ValueError(f"amp='fp16' needs a GradScaler for {device.type}, which this PyTorch "
                         "lacks; use amp='bf16' or 'off'.") from None


class Trainer:
    """Model, optimizer, scaler and the position in the data; :func:`fit` drives it.

    Position = (epoch, micro-batches done in this epoch, optimizer steps done); it is
    saved with the RNG states, so a resumed run continues with exactly the next batch.
    """

    def __init__(self, model: nn.Module, cfg: TrainConfig, loss_fn: LossFn = cross_entropy):
        self.cfg, self.loss_fn = cfg, loss_fn
        self.device = _pick_device(cfg.device)
        self.model = model.to(self.device)
        if cfg.channels_last:
            self.model.to(memory_format=torch.channels_last)
        self.forward = torch.compile(model, mode=cfg.compile_mode) if cfg.compile else model
        self.optimizer = _make_optimizer(self.model, cfg)
        self.scaler = _make_scaler(cfg.amp, self.device)
        self._scale = self.scaler.get_scale() if self.scaler else 0.0
        self.history = History()
        self.epoch = self.batch = self.step = self.n_batches = 0
        self._window: list[tuple] = []  # (loss, grad norm, targets) per step since the last sync
        self._wait, self._t0, self._saved_at, self._val_loader = 0.0, 0.0, -1, None

    # -- the loop -------------------------------------------------------------------
    def fit(self, loader: Iterable, val_loader: Iterable | None = None,
            resume_from: str | Path | None = None) -> History:
        """Train until `epochs` or `max_steps`; returns (and keeps) the History."""
        self.n_batches, self._val_loader = len(loader), val_loader
        if self.n_batches == 0:
            raise ValueError("The training loader is empty.")
        if resume_from is not None:
            self.load(resume_from)
        else:
            seed_everything(self.cfg.seed)
        bar = progress(total=self._total_steps(), initial=self.step, unit="step",
                       disable=not self.cfg.progress)
        self.model.train()
        batches = None
        self._restart_clock()
        while not self._finished():
            if batches is None:
                batches = self._epoch_batches(loader)
            group = self._fetch(batches, min(self.cfg.accum_steps, self.n_batches - self.batch))
            if group:
                self._train_step(group)
                bar.update(1)
            if not group or self.batch >= self.n_batches:
                self._end_epoch()
                batches = None
            if group:
                self._after_step(bar)
        self._finish(bar)
        return self.history

    def _total_steps(self) -> int:
        total = self.cfg.epochs * -(-self.n_batches // self.cfg.accum_steps)
        return min(total, self.cfg.max_steps or total)

    def _finished(self) -> bool:
        max_steps = self.cfg.max_steps
        return self.epoch >= self.cfg.epochs or (max_steps is not None and self.step >= max_steps)

    def _epoch_batches(self, loader: Iterable) -> Iterator:
        """Iterator over this epoch's remaining batches, in the epoch's fixed order."""
        sampler = getattr(loader, "batch_sampler", None)
        if isinstance(sampler, EpochBatchSampler):
            sampler.set_epoch(self.epoch, self.batch, seed=self.cfg.seed)
            generator = getattr(loader, "generator", None)  # a DataLoader's, for worker seeds
            if generator is not None:  # worker seeds depend on (seed, epoch) only
                generator.manual_seed(epoch_seed(self.cfg.seed, self.epoch))
            return iter(loader)
        if hasattr(getattr(loader, "sampler", None), "set_epoch"):
            loader.sampler.set_epoch(self.epoch)  # e.g. DistributedSampler
        batches = iter(loader)
        if self.batch:
            warnings.warn("This loader is not from train.make_loader: resuming skips batches by "
                          "loading them, and the order may differ from the interrupted run.")
            for _ in range(self.batch):
                next(batches, None)
        return batches

    def _fetch(self, batches: Iterator, k: int) -> list:
        """Up to k batches; the time spent here is the data wait."""
        t = time.perf_counter()
        group = [b for _, b in zip(range(k), batches)]
        self._wait += time.perf_counter() - t
        return group

    def _train_step(self, group: list) -> None:
        cfg, h = self.cfg, self.history
        lr = cfg.lr * (cfg.schedule(self.step) if cfg.schedule else 1.0)
        for g in self.optimizer.param_groups:
            g["lr"] = lr
        self.optimizer.zero_grad(set_to_none=True)
        loss = forward_backward(self.forward, group, self.loss_fn, device=self.device, amp=cfg.amp,
                                scaler=self.scaler, channels_last=cfg.channels_last,
                                non_blocking=cfg.non_blocking)
        targets = sum(_count(y) for _, y in group)  # on the device: read at the next sync
        self._window.append((loss, self._optimizer_step(), targets))
        self.step += 1
        self.batch += len(group)
        h.step.append(self.step)
        h.lr.append(lr)
        h.samples += sum(y.shape[0] if isinstance(y, torch.Tensor) else len(y) for _, y in group)

    def _optimizer_step(self) -> torch.Tensor | None:
        """Clip (after unscaling), step, update the scaler; returns the pre-clip norm."""
        norm, clip = None, self.cfg.clip_grad_norm
        if self.scaler is not None and clip:
            self.scaler.unscale_(self.optimizer)
        if clip:
            norm = nn.utils.clip_grad_norm_(self.model.parameters(), clip)
        if self.scaler is None:
            self.optimizer.step()
            return norm
        self.scaler.step(self.optimizer)  # skipped when grads hold inf/NaN
        self.scaler.update()
        scale = self.scaler.get_scale()  # a sync, but scaler.step has just synced anyway
        if scale < self._scale:  # the scale only shrinks after an overflow
            self.history.skipped_steps.append(self.step + 1)
        self._scale = scale
        return norm

    def _after_step(self, bar) -> None:
        if self.step % self.cfg.log_every == 0:
            self._flush()
            self._show(bar)
        every = self.cfg.checkpoint_every
        if every and self.step % every == 0:
            self.save()
            self._restart_clock()

    def _end_epoch(self) -> None:
        self.epoch, self.batch = self.epoch + 1, 0
        if self._val_loader is not None:
            self._flush()
            self.validate()
            self._restart_clock()

    def _finish(self, bar) -> None:
        self._flush()
        self._show(bar)  # the window may have been flushed at the epoch's end, without the bar
        bar.close()
        if self.cfg.checkpoint_path and self._saved_at != self.step:
            self.save()
        h = self.history
        if self._val_loader is not None and (not h.val_step or h.val_step[-1] != self.step):
            self.validate()

    # -- measurements ------------------------------------------------------------------
    def _restart_clock(self) -> None:
        _sync(self.device)
        self._t0, self._wait = time.perf_counter(), 0.0

    def _flush(self) -> None:
        """Sync once, then record the window's losses and timings (no per-step .item())."""
        if not self._window:
            return
        _sync(self.device)
        now, h, n = time.perf_counter(), self.history, len(self._window)
        h.loss += torch.stack([loss for loss, _, _ in self._window]).tolist()
        norms = [norm for _, norm, _ in self._window if norm is not None]
        h.grad_norm += torch.stack(norms).float().tolist() if norms else []
        h.targets += int(sum(targets for _, _, targets in self._window))
        h.step_time_s += [(now - self._t0) / n] * n
        h.train_time_s += now - self._t0
        h.data_wait_s += self._wait
        self._window, self._wait, self._t0 = [], 0.0, now

    def _show(self, bar) -> None:
        """The latest recorded loss and learning rate on the progress bar."""
        h = self.history
        if h.loss:
            bar.set_postfix(loss=f"{h.loss[-1]:.4f}", lr=f"{h.lr[-1]:.2e}", refresh=False)

    def validate(self) -> tuple[float, float]:
        """Evaluate on the validation loader without touching the training RNG streams."""
        cuda = self.device.type == "cuda"
        devices = [self.device.index or torch.cuda.current_device()] if cuda else []
        with torch.random.fork_rng(devices=devices):
            loss, acc = evaluate(self.forward, self._val_loader, self.device, amp=self.cfg.amp,
                                 loss_fn=self.loss_fn, channels_last=self.cfg.channels_last)
        h = self.history
        h.val_step.append(self.step)
        h.val_epoch.append(self.epoch + self.batch / max(1, self.n_batches))
        h.val_loss.append(loss)
        h.val_accuracy.append(acc)
        return loss, acc

    # -- checkpoints -------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything exact resume needs: weights, optimizer, scaler, position, RNG."""
        return {
            "format": FORMAT, "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scaler": self.scaler.state_dict() if self.scaler else None, "amp": self.cfg.amp,
            "step": self.step, "epoch": self.epoch, "batch": self.batch,
            "batches_per_epoch": self.n_batches, "seed": self.cfg.seed,
            "rng": capture_rng(), "history": asdict(self.history),
        }

    def save(self, path: str | Path | None = None) -> Path:
        """Flush pending metrics and write an atomic checkpoint (default: cfg.checkpoint_path)."""
        self._flush()
        self._saved_at = self.step
        return save_checkpoint(path or self.cfg.checkpoint_path, self.state_dict())

    def load(self, path: str | Path) -> None:
        """Restore a checkpoint written by :meth:`save`; RNG states are restored last."""
        state = load_checkpoint(path)
        if state.get("format") != FORMAT:
            raise CheckpointError(f"{path} was not written by course_lib.train.")
        if self.n_batches and state["batches_per_epoch"] != self.n_batches:
            raise CheckpointError(f"{path} has {state['batches_per_epoch']} batches per epoch, "
                                  f"this loader {self.n_batches}: resume with the same data.")
        if state["amp"] != self.cfg.amp:
            raise CheckpointError(f"{path} was saved with amp={state['amp']!r}; resume with it.")
        try:
            self.model.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
        except (RuntimeError, ValueError, KeyError) as exc:
            first = str(exc).strip().splitlines()[0]
            raise CheckpointError(f"{path} does not fit this model: {first}") from None
        if self.scaler is not None:
            self.scaler.load_state_dict(state["scaler"])
            self._scale = self.scaler.get_scale()
        self.step, self.epoch, self.batch = state["step"], state["epoch"], state["batch"]
        self.history = History(**state["history"])
        self._saved_at = self.step
        restore_rng(state["rng"])


def fit(model: nn.Module, loader: Iterable, cfg: TrainConfig | None = None, *,
        val_loader: Iterable | None = None, loss_fn: LossFn = cross_entropy,
        resume_from: str | Path | None = None) -> History:
    """Train `model` on `loader` under `cfg`; see :class:`TrainConfig` and :class:`History`."""
    return Trainer(model, cfg or TrainConfig(), loss_fn).fit(loader, val_loader, resume_from)
