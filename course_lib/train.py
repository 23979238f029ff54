"""One training loop for the course: AMP, accumulation, clipping, schedule, compile,
progress bar, metrics history, atomic checkpoints and exact resume.

    loader = data.make_loader(dataset, batch_size=64)      # resumable shuffling
    history = fit(model, loader, TrainConfig(epochs=2, amp="bf16"), val_loader=val)
    print(history.summary())

Batches are ``(inputs, targets)``; ``loss_fn(model(inputs), targets)`` defaults to
cross-entropy with classes in the last dimension, so (B, C) image logits and
(B, T, V) language-model logits both work.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import sys
import time
import warnings
from dataclasses import asdict, astuple, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import torch
import torch.nn as nn
import torch.nn.functional as F
from tqdm.auto import tqdm
from tqdm.std import tqdm as text_tqdm

from course_lib import checkpoint, data, device, units, utilisation

__all__ = ["TrainConfig", "History", "fit", "evaluate", "forward_backward", "warmup_cosine", "param_groups",
           "cross_entropy", "lr_at", "IGNORE_INDEX", "progress", "amp_for"]

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
    betas: tuple[float, float] = (0.9, 0.999)  # AdamW only: decay rates of its two moment averages
    fused: bool = False  # AdamW's fused implementation: one kernel updates every parameter
    decay_matrices_only: bool = False  # weight decay on weights of 2+ dims only, not biases or norms
    amp: str = "off"  # off | fp16 (autocast + GradScaler) | bf16 (autocast, no scaler)
    accum_steps: int = 1  # micro-batches per optimizer step
    clip_grad_norm: float | None = None  # max total grad norm, None = no clipping
    channels_last: bool = False  # NHWC layout for model and 4-D inputs
    compile: bool = False  # torch.compile the model (slow to start on CPU)
    compile_mode: str | None = None  # e.g. "reduce-overhead" (CUDA graphs)
    schedule: Callable[[int], float] | None = None  # step -> LR multiplier
    progress: bool = False  # tqdm bar
    log_every: int = 20  # sync + record losses and timings every N steps
    stop_on_nan: bool = False  # end the run at the first recorded loss that is NaN or inf (weights that
    # went NaN stay NaN: a pure 16-bit run's later steps would only cost time)
    eval_every: int | None = None  # optimizer steps between validation passes (None: each epoch's end)
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
            (self.eval_every is None or self.eval_every >= 1,
             f"eval_every must be >= 1 or None, got {self.eval_every}."),
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

    def add_validation(self, step: int, epoch: float, loss: float, accuracy: float) -> None:
        """Record one validation pass."""
        self.val_step.append(step)
        self.val_epoch.append(epoch)
        self.val_loss.append(loss)
        self.val_accuracy.append(accuracy)

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


def lr_at(cfg: TrainConfig, step: int) -> float:
    """The learning rate of optimizer step `step` (0-based): ``cfg.lr * cfg.schedule(step)``."""
    return cfg.lr * (cfg.schedule(step) if cfg.schedule else 1.0)


def fit(model: nn.Module, loader: Iterable, cfg: TrainConfig | None = None, *,
        val_loader: Iterable | None = None, loss_fn: LossFn = cross_entropy,
        resume_from: str | Path | None = None, monitor: utilisation.Sampler | None = None) -> History:
    """Train `model` on `loader` under `cfg`; see :class:`TrainConfig` and :class:`History`.

    The loop reads top to bottom: epoch -> accumulation group -> optimizer step -> log ->
    checkpoint. `resume_from` continues a run saved by an earlier `fit` (in any process)
    exactly where it stopped, after checking that it ran with the same settings. A running
    `monitor` (:class:`utilisation.Sampler`) adds its latest utilisation and memory reading to
    the progress bar at each log, beside the loss and the throughput: a live view of the run.
    """
    cfg = cfg or TrainConfig()
    n_batches = len(loader)
    if n_batches == 0:
        raise ValueError("The training loader is empty.")
    dev = device.pick(cfg.device)
    model.to(dev)
    if cfg.channels_last:
        model.to(memory_format=torch.channels_last)  # NHWC weights for 4-D convolutions
    forward = torch.compile(model, mode=cfg.compile_mode) if cfg.compile else model
    optimizer, scaler = make_optimizer(model, cfg), make_scaler(cfg.amp, dev)
    plan = trajectory(cfg, loader)  # what a resumed run must share with the saved one
    total = min(len(plan["lr"]), cfg.max_steps or len(plan["lr"]))  # optimizer steps in all

    pos, history = Position(), History()
    if resume_from is not None:
        state = checkpoint.load_run(resume_from, model, optimizer, scaler, plan)  # RNG states too
        pos, history = Position(*state["position"]), History(**state["history"])
    else:
        checkpoint.seed_everything(cfg.seed)
    bar = progress(total=total, initial=pos.step, unit="step", disable=not cfg.progress)
    window, saved_at = LogWindow(dev, scaler.get_scale() if scaler else None), pos.step

    def validate_now(epoch: float) -> None:
        """Validate once at this step (not again where it already was), outside training time."""
        if val_loader is None or (history.val_step and history.val_step[-1] == pos.step):
            return
        window.flush(history)
        history.add_validation(pos.step, epoch, *validate(forward, val_loader, dev, cfg, loss_fn))
        window.restart()  # evaluation is not training time

    model.train()
    while pos.epoch < cfg.epochs and pos.step < total:
        batches = epoch_batches(loader, pos.epoch, pos.batch, cfg.seed)
        for group in accumulation_groups(batches, cfg.accum_steps, n_batches - pos.batch, window):
            lr = lr_at(cfg, pos.step)
            for g in optimizer.param_groups:
                g["lr"] = lr
            optimizer.zero_grad(set_to_none=True)
            loss = forward_backward(forward, group, loss_fn, device=dev, amp=cfg.amp,
                                    scaler=scaler, channels_last=cfg.channels_last,
                                    non_blocking=cfg.non_blocking)
            norm = optimizer_step(model, optimizer, scaler, cfg.clip_grad_norm)
            pos.step, pos.batch = pos.step + 1, pos.batch + len(group)
            if scaler is not None:  # the scale drops after a step with inf/NaN gradients (skipped)
                window.add_scale(pos.step, scaler)  # read at the window's sync, not here
            history.step.append(pos.step)
            history.lr.append(lr)
            history.samples += sum(len(y) for _, y in group)
            window.add(loss, norm, sum(_count(y) for _, y in group))  # no sync here
            bar.update(1)

            if pos.step % cfg.log_every == 0:
                window.flush(history)  # the window's one sync
                show(bar, history, monitor)
                if cfg.stop_on_nan and not math.isfinite(history.loss[-1]):
                    total = pos.step  # ends the run here: both loops stop at `total`
            if cfg.eval_every and pos.step % cfg.eval_every == 0:
                validate_now(pos.epoch + pos.batch / n_batches)
            if cfg.checkpoint_every and pos.step % cfg.checkpoint_every == 0:
                window.flush(history)
                saved_at = save(cfg.checkpoint_path, model, optimizer, scaler, pos, history, plan)
                window.restart()  # saving is not training time
            if pos.step >= total:
                break
        if pos.step < total or pos.batch >= n_batches:  # the epoch is over
            pos.epoch, pos.batch = pos.epoch + 1, 0
            validate_now(pos.epoch)

    window.flush(history)
    show(bar, history, monitor)  # the window may have been flushed at the epoch's end, without the bar
    bar.close()
    if cfg.checkpoint_path and saved_at != pos.step:
        save(cfg.checkpoint_path, model, optimizer, scaler, pos, history, plan)
    validate_now(pos.epoch + pos.batch / n_batches)
    return history


# ---- the pieces of the loop ---------------------------------------------------------------

@dataclass
class Position:
    """Where a run is: optimizer steps done, the epoch, micro-batches done in that epoch."""

    step: int = 0
    epoch: int = 0
    batch: int = 0


def param_groups(model: nn.Module, weight_decay: float, matrices_only: bool = False) -> list[dict]:
    """The trainable parameters as optimizer groups. `matrices_only`: weight decay on weights
    of 2 or more dims (linear and embedding matrices, conv kernels) and none on biases and
    normalisation scales, which decay would only pull towards zero."""
    params = [p for p in model.parameters() if p.requires_grad]
    if not matrices_only:
        return [{"params": params, "weight_decay": weight_decay}]
    return [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]


def make_optimizer(model: nn.Module, cfg: TrainConfig) -> torch.optim.Optimizer:
    """AdamW or SGD over the trainable parameters, as `cfg` says."""
    groups = param_groups(model, cfg.weight_decay, cfg.decay_matrices_only)
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=cfg.lr, momentum=cfg.momentum)
    try:
        return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas, fused=cfg.fused or None)
    except RuntimeError as exc:
        raise ValueError(f"fused=True: this PyTorch has no fused AdamW for these parameters "
                         f"({type(exc).__name__}); use fused=False.") from exc


def amp_for(dev: torch.device | str, cpu_flags: Iterable[str] | None = None) -> str:
    """The 16-bit training precision worth using on `dev`, as :attr:`TrainConfig.amp` names it.

    A CUDA GPU: "bf16" where it has bf16 tensor cores (:func:`device.bf16_supported`), else
    "fp16" (autocast with a GradScaler: a T4 or a V100 would emulate bf16, slowly). A CPU: "bf16"
    when it reports bf16 instructions (avx512_bf16 or amx_bf16, :data:`device.CPU_16BIT_FLAGS`;
    `cpu_flags` defaults to /proc/cpuinfo's), else "off", float32: without them bf16 takes slow
    generic paths (01 and 03 time how slow on such a CPU). Any other device: "off".
    """
    dev = torch.device(dev)
    if dev.type == "cuda":
        return "bf16" if device.bf16_supported(dev) else "fp16"
    if dev.type != "cpu":
        return "off"
    flags = device.cpu_flags() if cpu_flags is None else cpu_flags
    native = [f for f in flags if f in device.CPU_16BIT_FLAGS and f.endswith("bf16")]
    return "bf16" if native else "off"


def make_scaler(amp: str, dev: torch.device) -> torch.amp.GradScaler | None:
    """A GradScaler for fp16 (None otherwise); bf16 on a GPU without it is one clear error."""
    if amp == "bf16" and not device.bf16_supported(dev):
        raise ValueError(f"amp='bf16' needs bf16 tensor cores (compute capability 8.0 or newer; "
                         f"{device.label(dev)} emulates bf16, slowly): use amp='fp16' here.")
    if amp != "fp16":
        return None
    try:
        return torch.amp.GradScaler(dev.type)
    except Exception:
        raise ValueError(f"amp='fp16' needs a GradScaler for {dev.type}, which this PyTorch "
                         "lacks; use amp='bf16' or 'off'.") from None


def epoch_batches(loader: Iterable, epoch: int, start: int, seed: int) -> Iterator:
    """Iterator over `epoch`'s batches from micro-batch `start` on, in the epoch's fixed order."""
    if start >= len(loader):
        return iter(())
    sampler = getattr(loader, "batch_sampler", None)
    if isinstance(sampler, data.EpochBatchSampler):
        sampler.set_epoch(epoch, start, seed=seed)
        generator = getattr(loader, "generator", None)  # a DataLoader's, for worker seeds
        if generator is not None:  # worker seeds depend on (seed, epoch) only
            generator.manual_seed(data.epoch_seed(seed, epoch))
        return iter(loader)
    if hasattr(getattr(loader, "sampler", None), "set_epoch"):
        loader.sampler.set_epoch(epoch)  # e.g. DistributedSampler
    batches = iter(loader)
    if start:
        warnings.warn("This loader is not from data.make_loader: resuming skips batches by "
                      "loading them, and the order may differ from the interrupted run.")
        for _ in itertools.islice(batches, start):
            pass
    return batches


def accumulation_groups(batches: Iterator, accum_steps: int, remaining: int,
                        window: LogWindow) -> Iterator[list]:
    """The epoch's groups of up to `accum_steps` micro-batches (the last may be partial);
    stops after `remaining` batches or when the loader runs dry."""
    while remaining > 0:
        group = window.fetch(batches, min(accum_steps, remaining))
        if not group:
            return
        remaining -= len(group)
        yield group


def optimizer_step(model: nn.Module, optimizer: torch.optim.Optimizer,
                   scaler: torch.amp.GradScaler | None, clip: float | None) -> torch.Tensor | None:
    """Clip (after unscaling), step, update the scaler; returns the pre-clip grad norm."""
    norm = None
    if clip:
        if scaler is not None:
            scaler.unscale_(optimizer)  # clip the true gradients, not the scaled ones
        norm = nn.utils.clip_grad_norm_(model.parameters(), clip)
    if scaler is None:
        optimizer.step()
    else:
        scaler.step(optimizer)  # skipped when the gradients hold inf/NaN
        scaler.update()
    return norm


class LogWindow:
    """The steps since the last sync: losses, grad norms and target counts stay on the
    device until :meth:`flush` syncs once and records them (no .item() per step)."""

    def __init__(self, dev: torch.device, scale: float | None = None) -> None:
        self.dev = dev
        self.steps: list[tuple] = []  # (loss, grad norm or None, targets) per step
        self.scale = scale  # GradScaler's scale before the window's first step (None: no scaler)
        self.scales: list[tuple[int, torch.Tensor]] = []  # (step, the scale after its update)
        self.restart()

    def restart(self) -> None:
        """Start the clock again (after evaluation or saving, which are not training time)."""
        device.sync(self.dev)
        self.t0, self.wait = time.perf_counter(), 0.0

    def fetch(self, batches: Iterator, k: int) -> list:
        """Up to k batches; the time spent here is the data wait."""
        t = time.perf_counter()
        group = list(itertools.islice(batches, k))
        self.wait += time.perf_counter() - t
        return group

    def add(self, loss: torch.Tensor, norm: torch.Tensor | None, targets: Any) -> None:
        self.steps.append((loss, norm, targets))

    def add_scale(self, step: int, scaler: torch.amp.GradScaler) -> None:
        """GradScaler's scale after `step`'s update, a copy left on the device: get_scale()
        would sync every step (a fused optimizer's scaler.step does not sync on its own)."""
        if scaler.is_enabled():  # a disabled scaler (bf16, fp32) has no scale and skips nothing
            self.scales.append((step, scaler._scale.detach().clone()))  # update() rewrites it in place

    def flush(self, h: History) -> None:
        """Sync once, then record the window's losses and timings into `h`."""
        if not self.steps:
            return
        device.sync(self.dev)
        now, n = time.perf_counter(), len(self.steps)
        h.loss += torch.stack([loss for loss, _, _ in self.steps]).tolist()
        norms = [norm for _, norm, _ in self.steps if norm is not None]
        h.grad_norm += torch.stack(norms).float().tolist() if norms else []
        h.targets += int(sum(targets for _, _, targets in self.steps))
        h.step_time_s += [(now - self.t0) / n] * n
        h.train_time_s += now - self.t0
        h.data_wait_s += self.wait
        if self.scales:  # a step whose scale dropped found inf/NaN gradients and was skipped
            for (step, _), scale in zip(self.scales, torch.stack([t for _, t in self.scales]).flatten().tolist()):
                if self.scale is not None and scale < self.scale:
                    h.skipped_steps.append(step)
                self.scale = scale
        self.steps, self.scales, self.wait, self.t0 = [], [], 0.0, now


def show(bar: tqdm, h: History, monitor: utilisation.Sampler | None = None) -> None:
    """The latest recorded loss and learning rate on the progress bar, the throughput so far
    (targets per second: tokens for a language model) and, with a `monitor`, its latest
    utilisation and memory reading."""
    if not h.loss:
        return
    shown = {"loss": f"{h.loss[-1]:.4f}", "lr": f"{h.lr[-1]:.2e}", "targets/s": f"{h.targets_per_s:,.0f}"}
    if monitor is not None and (now := monitor.latest()) is not None:
        shown["busy"] = f"{now.busy_pct:.0f}%"
        if now.memory_bytes is not None:
            shown["memory"] = units.fmt_bytes(now.memory_bytes)
    bar.set_postfix(shown, refresh=False)


def validate(model: nn.Module, loader: Iterable, dev: torch.device, cfg: TrainConfig,
             loss_fn: LossFn) -> tuple[float, float]:
    """(loss, accuracy) on `loader`, without touching the training RNG streams."""
    cuda = dev.type == "cuda"
    index = dev.index if dev.index is not None else (torch.cuda.current_device() if cuda else 0)
    with torch.random.fork_rng(devices=[index] if cuda else []):
        return evaluate(model, loader, dev, amp=cfg.amp, loss_fn=loss_fn,
                        channels_last=cfg.channels_last)


# ---- checkpoints ----------------------------------------------------------------------

def trajectory(cfg: TrainConfig, loader: Iterable) -> dict[str, Any]:
    """What decides a run's path: resuming with any of it changed would silently diverge.

    ``lr`` is the learning rate of every step the epochs hold (``max_steps`` aside, so a
    run stopped early and resumed without it compares its whole schedule).
    """
    sampler = getattr(loader, "batch_sampler", None)
    steps = cfg.epochs * -(-len(loader) // cfg.accum_steps)
    return {
        "seed": cfg.seed,
        "optimizer": cfg.optimizer,
        "weight_decay": cfg.weight_decay,
        "momentum": cfg.momentum if cfg.optimizer == "sgd" else None,
        "betas": list(cfg.betas) if cfg.optimizer == "adamw" else None,
        "fused": cfg.fused if cfg.optimizer == "adamw" else None,
        "decay_matrices_only": cfg.decay_matrices_only,
        "amp": cfg.amp,
        "clip_grad_norm": cfg.clip_grad_norm,
        "accum_steps": cfg.accum_steps,
        "batch_size": getattr(sampler, "batch_size", None) or getattr(loader, "batch_size", None),
        "dataset_size": data.dataset_size(loader),
        "batches_per_epoch": len(loader),
        "lr": [lr_at(cfg, step) for step in range(steps)],
    }


def save(path: str | Path, model: nn.Module, optimizer: torch.optim.Optimizer,
         scaler: torch.amp.GradScaler | None, pos: Position, history: History, plan: dict[str, Any]) -> int:
    """Write everything exact resume needs (:func:`checkpoint.save_run`); returns the step saved."""
    checkpoint.save_run(path, model, optimizer, scaler, astuple(pos), asdict(history), plan)
    return pos.step
