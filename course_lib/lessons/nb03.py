"""Notebook 03 (mixed precision), up close: what 16-bit formats keep and lose, loss scaling, and
training runs compared by precision.

    print(format_table())                       # fp32 / fp16 / bf16 limits
    print(cast_table([1e-8, 1.0, 70000.0]))     # what survives a cast
    rows = underflow_rows(activation_grads(model, x, y), [1, 2**16])
    result = train_run("bf16", make_model, TensorLoader(x, y, 64), steps=20, lr=3e-3)
    print(compare_losses("bf16", result.history.loss, fp32_result.history.loss))  # a verdict

Every number here is computed, never assumed: casts are real casts, gradients come from a real
backward pass, runs are real training runs through `course_lib.train`. Whether a format really
ran in a layer is :mod:`course_lib.lessons.nb03_formats`'s check (re-exported here, as its tables are).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import torch
import torch.nn as nn

from course_lib import memory, models, profiles, published, report, train, verdicts
from course_lib.bench import Ratio, timing_of
from course_lib.data import TensorLoader
from course_lib.device import amp_note, cpu_16bit_flags, cpu_name, tf32
from course_lib.device import label as device_label
from course_lib.lessons import nb01
from course_lib.profiling import StepProfile, amdahl_bound, profile_verdict
from course_lib.lessons import nb03_formats as formats
from course_lib.lessons.nb03_formats import dtype_of
from course_lib.units import fmt_bytes, fmt_time

# what notebook 03 calls as nb03.*: the formats' limits and real casts; did a format really run in a layer?
format_table, cast_table = formats.format_table, formats.cast_table
check_layer, classifier_input, layer_check = formats.check_layer, formats.classifier_input, formats.layer_check
needed_scale, check_loss_scale = formats.needed_scale, formats.check_loss_scale  # loss scaling's exercise
stays_normal, check_survivors, cast = formats.stays_normal, formats.check_survivors, formats.cast  # real casts

# Training precisions: label -> (TrainConfig.amp, TF32 for fp32 matmuls/convs on CUDA).
PRECISIONS = {
    "fp32": ("off", False),
    "fp32+TF32": ("off", True),
    "fp16+GradScaler": ("fp16", False),
    "bf16": ("bf16", False),
    "pure .half()": ("off", False),  # model.half() and fp16 inputs: no fp32 anywhere
}
ModelFn = Callable[[], nn.Module]


# ---- gradients and loss scaling -------------------------------------------------------

def activation_grads(model: nn.Module, x: torch.Tensor, y: torch.Tensor,
                     layers: tuple[type, ...] = (nn.Conv2d, nn.Linear)) -> torch.Tensor:
    """fp32 gradients of the loss w.r.t. every conv/linear output, flattened into one tensor
    in backward order (last layer first).

    These are the tensors backward passes between layers; under fp16 autocast they are
    fp16, so these are the values that must fit fp16's range. Parameter grads are cleared.
    """
    grads: list[torch.Tensor] = []

    def on_output(_module: nn.Module, _inputs, output: torch.Tensor) -> None:
        if isinstance(output, torch.Tensor) and output.requires_grad:
            output.register_hook(lambda g: grads.append(g.detach().flatten().float()))

    handles = [m.register_forward_hook(on_output) for m in model.modules() if isinstance(m, layers)]
    if not handles:
        raise ValueError("The model has no Conv2d or Linear layer whose output gradients could be captured.")
    try:
        train.cross_entropy(model(x), y).backward()
    finally:
        for h in handles:
            h.remove()
    model.zero_grad(set_to_none=True)
    return torch.cat(grads)


@dataclass
class ScaleRow:
    """What a cast to a 16-bit format does to gradients multiplied by `scale`."""

    scale: float
    n: int  # elements
    flushed: int  # nonzero before, exactly 0 after the cast
    subnormal: int  # nonzero but below the smallest normal: fewer significant bits
    overflowed: int  # became ±inf

    @property
    def lost(self) -> int:
        """Elements gone: flushed to 0 or overflowed to inf."""
        return self.flushed + self.overflowed

    def __str__(self) -> str:
        pct = lambda k: f"{k:>11,} ({100 * k / max(1, self.n):5.2f}%)"  # noqa: E731
        return f"2^{math.log2(self.scale):<4.0f} | {pct(self.flushed)} | {pct(self.subnormal)} | {pct(self.overflowed)}"


def underflow_rows(grads: torch.Tensor, scales: Sequence[float],
                   name: str | torch.dtype = "fp16") -> list[ScaleRow]:
    """Cast `grads * scale` to `name` for each scale and count what is lost."""
    dt, nonzero = dtype_of(name), grads != 0
    tiny = torch.finfo(dt).smallest_normal
    rows = []
    for s in scales:
        if s <= 0:
            raise ValueError(f"Loss scales must be positive, got {s}.")
        h = (grads * s).to(dt)
        rows.append(ScaleRow(float(s), grads.numel(), int(((h == 0) & nonzero).sum()),
                             int(((h != 0) & (h.abs() < tiny)).sum()), int(h.isinf().sum())))
    return rows


def underflow_table(rows: Sequence[ScaleRow]) -> str:
    """The rows of :func:`underflow_rows` as a table (scales shown as powers of two)."""
    head = f"{'scale':<6} | {'flushed to 0':>20} | {'subnormal':>20} | {'overflow to inf':>20}"
    return "\n".join([head, "-" * len(head), *map(str, rows)])


def scaling_summary(rows: Sequence[ScaleRow]) -> str:
    """What the table of :func:`underflow_rows` shows as S grows, read from its rows: where the
    flushed and subnormal gradients went (the normal range, no column) and from which scale on
    the largest ones overflow. `rows` in increasing scale, the first one S = 1 or the smallest."""
    if not rows:
        raise ValueError("scaling_summary needs at least one row of underflow_rows.")
    pct = lambda k, r: f"{100 * k / max(1, r.n):.2f}%"  # noqa: E731
    s2 = lambda r: f"2^{math.log2(r.scale):.0f}"  # noqa: E731
    first = rows[0]
    clean = [r for r in rows if not r.overflowed]  # before any overflow: what scaling gained alone
    low = min(clean or rows, key=lambda r: (r.flushed + r.subnormal, r.scale))
    gained = first.flushed + first.subnormal - low.flushed - low.subnormal
    moved = (f"flushed {pct(first.flushed, first)} and subnormal {pct(first.subnormal, first)} at S = {s2(first)}, "
             f"{pct(low.flushed, low)} and {pct(low.subnormal, low)} at S = {s2(low)}: "
             + (f"{pct(gained, first)} of the gradients moved into fp16's normal range (no column: kept with all "
                "their bits)" if gained > 0 else "scaling moved none into fp16's normal range"))
    over = next((r for r in rows if r.overflowed), None)
    if over is None:
        return f"{moved}; none overflowed up to S = {s2(rows[-1])}"
    return (f"{moved}; the largest overflow to inf from S = {s2(over)} on ({pct(over.overflowed, over)}), "
            f"{pct(rows[-1].overflowed, rows[-1])} at S = {s2(rows[-1])}")


# ---- optimizers in pure fp16 ----------------------------------------------------------

@dataclass
class HalfStep:
    """One optimizer step taken with fp16 weights, gradients and optimizer state."""

    optimizer: str
    elements: int  # parameter elements
    nonzero_grads: int  # elements whose gradient is not 0: the step should move them
    unchanged: int  # ... of which the fp16 weight did not change (w - lr*g == w in fp16)
    nonfinite: int  # weights that became inf or NaN
    state_zero: int | None  # Adam: second-moment elements exactly 0 in fp16 (None for SGD)


def half_step(make_model: ModelFn, x: torch.Tensor, y: torch.Tensor, optimizer: str = "sgd",
              lr: float = 1e-3, seed: int = 0) -> HalfStep:
    """One step of `optimizer` on `make_model().half()` and fp16 inputs: what moved?"""
    if optimizer not in ("sgd", "adamw"):
        raise ValueError(f"optimizer must be sgd or adamw, got {optimizer!r}.")
    torch.manual_seed(seed)
    model = make_model().to(x.device, torch.float16)
    params = list(model.parameters())
    before = [p.detach().clone() for p in params]
    opt = (torch.optim.SGD(params, lr=lr) if optimizer == "sgd"
           else torch.optim.AdamW(params, lr=lr))
    train.cross_entropy(model(x.half()), y).backward()
    moving = [p.grad != 0 for p in params]
    opt.step()
    unchanged = sum(int((m & (p.detach() == b)).sum()) for p, b, m in zip(params, before, moving))
    zero = sum(int((opt.state[p]["exp_avg_sq"] == 0).sum()) for p in params) if optimizer == "adamw" else None
    return HalfStep(optimizer, sum(p.numel() for p in params), sum(int(m.sum()) for m in moving),
                    unchanged, sum(int((~p.detach().isfinite()).sum()) for p in params), zero)


# ---- GradScaler, step by step ---------------------------------------------------------

@dataclass
class ScalerRow:
    """One step of a training loop with a GradScaler (notebook 03 writes the loop)."""

    step: int
    scale: float  # loss scale used for this step's backward
    injected: bool  # an inf was put into a gradient
    stepped: bool  # the weights changed
    next_scale: float

    def __str__(self) -> str:
        return (f"{self.step:>4} | {self.scale:>9g} | {'inf' if self.injected else '-':>9} | "
                f"{'yes' if self.stepped else 'SKIPPED':>13} | {self.next_scale:>10g}")


def scaler_table(rows: Sequence[ScalerRow]) -> str:
    """:class:`ScalerRow` s as a table."""
    head = f"{'step':>4} | {'scale':>9} | {'grad':>9} | {'optimizer step':>13} | {'next scale':>10}"
    return "\n".join([head, "-" * len(head), *map(str, rows)])


# ---- training runs by precision -------------------------------------------------------

@dataclass
class RunResult:
    """One training run at one precision."""

    name: str
    history: train.History
    step_s: float  # median seconds per optimizer step, warm-up window excluded
    device: str

    @property
    def final_loss(self) -> float:
        return self.history.loss[-1]

    @property
    def first_nan_step(self) -> int | None:
        """The first step whose loss was NaN or inf, None if none was."""
        return next((s for s, v in zip(self.history.step, self.history.loss) if not math.isfinite(v)), None)

    def line(self, label: str, steps: int) -> str:
        """`label` | the first loss, then the last (or the first NaN/inf, of `steps`) | device."""
        end = (f"at step {self.history.step[-1]} (final) {self.final_loss:.4f}" if self.first_nan_step is None else
               f"NaN from step {self.first_nan_step}: stopped at step {self.history.step[-1]} of {steps}")
        return f"{label:<19} | loss at step 1 {self.history.loss[0]:.4f}, {end} | {self.device}"


def train_run(name: str, make_model: ModelFn, batches: TensorLoader, *, steps: int, lr: float,
              device: torch.device | str, channels_last: bool = False, log_every: int = 1,
              optimizer: str = "adamw", seed: int = 0) -> RunResult:
    """Train a fresh `make_model()` for `steps` optimizer steps at precision `name`.

    `name` is a key of PRECISIONS. "pure .half()" converts the model and the inputs to
    fp16 and trains them with no fp32 copy at all (a widely copied tip); such a run ends at
    its first NaN or inf loss (its weights are then NaN for good). This is the general
    loop for longer runs; notebook 03 writes the same step inline, and a test holds the two
    to the same losses.
    """
    if name not in PRECISIONS:
        raise ValueError(f"Unknown precision {name!r}: choose one of {', '.join(PRECISIONS)}.")
    amp, use_tf32 = PRECISIONS[name]
    torch.manual_seed(seed)
    model, x = make_model(), batches.x
    if name == "pure .half()":
        model, x = model.half(), x.half()
    order = batches.batch_sampler  # a copy keeps the caller's loader as it was; fit sets its epoch
    batches = TensorLoader(x, batches.y, order.batch_size, shuffle=order.shuffle, seed=order.seed,
                           drop_last=order.drop_last)
    cfg = train.TrainConfig(amp=amp, max_steps=steps, epochs=-(-steps // len(batches)), lr=lr,
                            optimizer=optimizer, device=device, channels_last=channels_last,
                            log_every=log_every, seed=seed, stop_on_nan=name == "pure .half()")
    with tf32(use_tf32):
        history = train.fit(model, batches, cfg)
    skip = log_every if len(history.step_time_s) > log_every else 0  # the warm-up window
    return RunResult(name, history, history.median_step_time_s(skip), device_label(device))


def control_runs(make_model: ModelFn, batches: TensorLoader, k: int, base: Sequence[float],
                 **run: object) -> list[verdicts.Control]:
    """`k` fp32 runs of :func:`train_run` (keywords `run`) whose loss records are `base`, each
    from starting weights nudged by a last bit or two (:func:`verdicts.control_runs`, which makes a
    nudge larger when rounding absorbed it): how far rounding alone moves this training run."""
    return verdicts.control_runs(
        lambda u: train_run("fp32", lambda: verdicts.nudge(make_model(), u), batches, **run).history, base, k)


LEARNED_BELOW = 0.9  # a baseline has learned when its late losses average under 0.9 × chance's loss


def compare_losses(name: str, losses: Sequence[float], base: Sequence[float], base_name: str = "fp32",
                   last: int = 10, chance: float | None = None,
                   controls: Sequence[Sequence[float]] = ()) -> str:
    """One-line verdict on a loss curve against a baseline curve trained on the same batches
    in the same order.

    NaN/inf anywhere is a failure (named with its step). Otherwise the gap: the mean per-record
    difference over the last `last` records (:func:`verdicts.tail_gap`), against the gaps of the
    `controls`: the baseline run again with its starting weights nudged by a last bit
    (:func:`verdicts.nudge`), which measures how far rounding alone moves this run
    (:func:`verdicts.gap_verdict`). Consecutive steps of one run are not independent samples, so
    no standard error of them is used. `chance`: the loss of a uniform guess (ln(classes)); a
    baseline whose last losses average above LEARNED_BELOW × chance has not learned yet, and
    two runs near chance say nothing about a format's effect on training: the line then gives
    the numbers and no verdict.
    """
    bad = next((i + 1 for i, v in enumerate(losses) if not math.isfinite(v)), None)
    if bad is not None:
        return f"{name}: loss NaN/inf from step {bad} on: training failed"
    k = max(1, min(last, len(losses), len(base)))
    mine, ref = sum(list(losses)[-k:]) / k, sum(list(base)[-k:]) / k
    gap = verdicts.tail_gap(base, losses, k)
    head = (f"{name} vs {base_name}, mean loss of the last {k} records (same batches): "
            f"{mine:.4f} vs {ref:.4f} (gap {gap:+.4f})")
    if chance is not None and ref >= LEARNED_BELOW * chance:
        return (f"{head} | {base_name} has not learned yet (chance: {chance:.4f}; learned means below "
                f"{LEARNED_BELOW:g}× that): no verdict on training from these runs")
    if not controls:
        return f"{head} | no control run to say how far rounding alone moves this run: no verdict"
    return f"{head} | " + verdicts.gap_verdict(gap, [verdicts.tail_gap(base, c, k) for c in controls], base_name)


def damage_figure(rows: Sequence[ScaleRow], title: str = ""):
    """Grouped bars per loss scale: % of elements flushed to 0, subnormal, overflowed to inf
    (three separate counts, each labelled; none added to another)."""
    import matplotlib.pyplot as plt  # only where a figure is drawn

    kinds = (("flushed to 0", "flushed", "tab:red"), ("subnormal (bits lost)", "subnormal", "tab:orange"),
             ("overflow to inf", "overflowed", "tab:purple"))
    fig, ax = plt.subplots(figsize=(max(5.0, 1.6 * len(rows)), 3.8))
    width = 0.8 / len(kinds)
    for k, (label, attr, color) in enumerate(kinds):
        pcts = [100 * getattr(r, attr) / max(1, r.n) for r in rows]
        xs = [i + (k - 1) * width for i in range(len(rows))]
        rects = ax.bar(xs, pcts, width, label=label, color=color)
        ax.bar_label(rects, labels=[f"{p:.2f}" for p in pcts], fontsize=7, rotation=90, padding=2)
    ax.set_xticks(range(len(rows)), [f"S = 2^{math.log2(r.scale):.0f}" for r in rows])
    ax.set(ylabel="% of gradient elements", title=title)
    ax.set_ylim(0, ax.get_ylim()[1] * 1.15)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _stepper(name: str, make_model: ModelFn, x: torch.Tensor, y: torch.Tensor, *,
             device: torch.device, channels_last: bool, lr: float) -> Callable[[], None]:
    """A fresh `make_model()` (seed 0) with its AdamW (and GradScaler for fp16) on `device`:
    one call trains one step on (x, y) at precision `name`, with its TF32 setting."""
    amp, use_tf32 = PRECISIONS[name]
    torch.manual_seed(0)
    model = make_model().to(device)
    if name == "pure .half()":
        model, x = model.half(), x.half()
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    scaler = torch.amp.GradScaler(device.type) if amp == "fp16" else None

    def step() -> None:
        with tf32(use_tf32):
            opt.zero_grad(set_to_none=True)
            train.forward_backward(model, [(x, y)], device=device, amp=amp, scaler=scaler,
                                   channels_last=channels_last)
            if scaler is None:
                opt.step()
            else:
                scaler.step(opt)
                scaler.update()

    return step


def step_peak_bytes(name: str, make_model: ModelFn, x: torch.Tensor, y: torch.Tensor, *,
                    device: torch.device | str, channels_last: bool = False, lr: float = 1e-3) -> int:
    """Peak memory one training step adds at precision `name` (after one warm-up step, so
    the optimizer state already exists). CUDA: allocator; CPU: profiler memory events."""
    if name not in PRECISIONS:
        raise ValueError(f"Unknown precision {name!r}: choose one of {', '.join(PRECISIONS)}.")
    device = torch.device(device)
    step = _stepper(name, make_model, x, y, device=device, channels_last=channels_last, lr=lr)
    step()  # warm-up: optimizer state, cuDNN algorithm choice
    return memory.peak_memory(step, device).peak_bytes


def steps_at_once(names: Sequence[str], make_model: ModelFn, x: torch.Tensor, y: torch.Tensor, *,
                  device: torch.device | str, channels_last: bool = False, lr: float = 1e-3) -> None:
    """One training step on (x, y) at each precision in `names`, every model with its AdamW
    state alive at once: the memory that timing those precisions in turns needs. Wrapped in
    :func:`course_lib.oom.fit_batch`, it finds a batch at which every timed configuration fits."""
    unknown = [n for n in names if n not in PRECISIONS]
    if unknown:
        raise ValueError(f"Unknown precision {unknown[0]!r}: choose from {', '.join(PRECISIONS)}.")
    device = torch.device(device)
    steps = [_stepper(n, make_model, x, y, device=device, channels_last=channels_last, lr=lr)
             for n in names]
    for step in steps:
        step()


def saved_bytes(model: nn.Module, x: torch.Tensor, y: torch.Tensor,
                amp: torch.dtype | None = None) -> dict[torch.dtype, int]:
    """Bytes of the distinct tensors the forward pass of `model` on (x, y) saves for backward,
    by dtype (a tensor saved by two ops counts once; a view counts its own elements, not the
    storage it views), under autocast to `amp` (None: fp32). What a 16-bit format can halve is
    the floating-point part; integer tensors (max-pool's indices, the labels) keep their size."""
    seen: dict[tuple, tuple[torch.dtype, int]] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        seen[(t.data_ptr(), t.dtype, tuple(t.shape))] = (t.dtype, t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with torch.autocast(x.device.type, dtype=amp or torch.bfloat16, enabled=amp is not None):
            train.cross_entropy(model(x), y)
    out: dict[torch.dtype, int] = {}
    for dtype, nbytes in seen.values():
        out[dtype] = out.get(dtype, 0) + nbytes
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def quick_run(name: str, make_model: ModelFn, batches: TensorLoader, steps: int = 5,
              lr: float = 3e-3, device: torch.device | str = "cpu", channels_last: bool = False) -> str:
    """A few steps at one precision, summarised in one line (the widget's work); `channels_last`
    as in :func:`train_run`, so that its step times match the notebook's timed steps."""
    r = train_run(name, make_model, batches, steps=steps, lr=lr, device=device, channels_last=channels_last)
    losses, times = r.history.loss, r.history.step_time_s[1:] or r.history.step_time_s  # after step 1
    t = timing_of(times, name=name, device=device)
    return (f"{name}: {steps} steps | {fmt_time(r.step_s)}/step (quartiles {fmt_time(t.lo_s)}–{fmt_time(t.hi_s)} "
            f"of {len(times)} steps after the first) | loss {losses[0]:.4f} → {losses[-1]:.4f} | "
            f"{len(r.history.skipped_steps)} skipped | {r.device}")


# ---- the words around the notebook's numbers --------------------------------------------

def setup_lines(model: str, n_params: int, x: torch.Tensor, batch: int, steps: int, device: torch.device | str,
                lr: float, sgd_lr: float) -> str:
    """The device's 16-bit caveat (if any), the learning rates, the model, its images and the batch."""
    return "\n".join(filter(None, [amp_note(device), f"learning rates: AdamW {lr:g} (LR), SGD with momentum "
                                    f"{sgd_lr:g} (SGD_LR)", f"{model}: {n_params:,} parameters | {len(x):,} images "
                                    f"{tuple(x.shape[1:])} on {x.device} ({fmt_bytes(x.nbytes)}) | batch {batch}, "
                                    f"{steps} steps per loss curve"]))


def _pct(k: int, n: int) -> str:
    return f"{k:,} of {n:,} ({100 * k / max(1, n):.2f}%)"


def gradient_lines(grads: torch.Tensor, rows: Sequence[ScaleRow], device: torch.device | str) -> str:
    """Section 2's gradients (how many, how small, how large) and the table of their scaled casts."""
    nonzero = grads[grads != 0].abs()
    return (f"{grads.numel():,} gradient elements, {nonzero.numel():,} nonzero | smallest {nonzero.min():.2e}, "
            f"median {nonzero.median():.2e}, largest {nonzero.max():.2e} | {device_label(device)}\n"
            + underflow_table(rows))


def underflow_facts(rows: Sequence[ScaleRow]) -> dict[str, float]:
    """Section 2's recorded shares (%) of the gradients: by name, for ``rep.add``."""
    by = {r.scale: r for r in rows}
    one, s16, s32 = by[1.0], by[2.0**16], by[2.0**32]
    return {"fp16 grads → 0, no scaling": 100 * one.flushed / one.n,
            "fp16 grads subnormal, no scaling": 100 * one.subnormal / one.n,
            "fp16 grads → 0, scale 2^16": 100 * s16.flushed / s16.n,
            "fp16 grads → inf, scale 2^32": 100 * s32.overflowed / s32.n}


def damage_lines(rows: Sequence[ScaleRow]) -> str:
    """What S = 1 does, the scale that loses fewest gradients, the largest's overflow, and
    :func:`scaling_summary`."""
    one, best, top = next(r for r in rows if r.scale == 1.0), min(rows, key=lambda r: r.lost), rows[-1]
    return (f"S = 1: flushed to 0 {_pct(one.flushed, one.n)}, subnormal {_pct(one.subnormal, one.n)}, "
            f"inf {_pct(one.overflowed, one.n)}\nfewest gradients gone (flushed + inf) at S = "
            f"2^{math.log2(best.scale):.0f}: {_pct(best.lost, best.n)}; at S = 2^{math.log2(top.scale):.0f}: "
            f"{_pct(top.overflowed, top.n)} overflow to inf\nas S grows: {scaling_summary(rows)}")


def half_lines(adam: HalfStep, sgd: HalfStep, sgd_lr: float, runs: dict[str, RunResult],
               controls: Sequence[Sequence[float]], chance: float) -> str:
    """One fp16 step of AdamW and of SGD, what it did; then each pure .half() run against fp32
    (:func:`compare_losses`; `controls`, fp32 SGD's control runs, judge the SGD gap)."""
    lines = [f"AdamW, one fp16 step: second moment exactly 0 in {_pct(adam.state_zero, adam.elements)} elements; "
             f"weights now inf/NaN: {_pct(adam.nonfinite, adam.elements)}",
             f"SGD lr {sgd_lr}, one fp16 step: weights with a nonzero gradient that did not change "
             f"(w - lr·g == w in fp16): {_pct(sgd.unchanged, sgd.nonzero_grads)}"]
    for opt in ("adamw", "sgd"):
        half, fp32 = runs.get(f"pure .half() {opt}"), runs.get(f"fp32 {opt}")
        if half and fp32:
            lines.append(compare_losses(f"pure .half() {opt}", half.history.loss, fp32.history.loss, f"fp32 {opt}",
                                        chance=chance, controls=controls if opt == "sgd" else []))
    return "\n".join(lines)


def half_facts(adam: HalfStep, sgd: HalfStep, runs: dict[str, RunResult], steps: int) -> dict[str, tuple]:
    """Section 3's recorded figures, name -> (value, unit), for ``rep.add``."""
    facts = {".half() AdamW: zero 2nd moments": (100 * adam.state_zero / adam.elements, "%"),
             ".half() AdamW: non-finite weights": (100 * adam.nonfinite / adam.elements, "%"),
             ".half() SGD: updates lost, 1 step": (100 * sgd.unchanged / max(1, sgd.nonzero_grads), "%")}
    for k, r in runs.items():
        facts.update({f"{k}: loss after {steps} steps": (r.final_loss, "nats")} if r.first_nan_step is None
                     else {f"{k}: first NaN loss": (r.first_nan_step, "step")})
    return facts


ELSEWHERE = ["dle_resnet50_a100_1gpu_tf32_vs_amp", "dle_resnet50_v100_1gpu_fp32_vs_amp"]  # published AMP speed-ups


def precision_lines(device: torch.device | str, names: Sequence[str], ratios: Sequence[Ratio]) -> str:
    """Beside section 5's ratios: on a CPU its 16-bit instructions and each 16-bit ratio read with
    them; without TF32 (not an Ampere-on GPU) what GPUs measured; on a GPU, published figures."""
    dev, lines = torch.device(device), []
    caveat = ("(images per second from other models, image sizes and batches are not comparable, and neither are "
              "the ratios between precisions: they depend on the model, the image size and the GPU)")
    if dev.type == "cpu":
        flags, vs = cpu_16bit_flags(), {r.name: r for r in ratios}
        lines += [f"{cpu_name()}: {nb01.cpu_16bit_verdict(fmt, vs[f'{n} vs fp32'], flags, 'but the profile below does')}"
                  for n, fmt in (("fp16+GradScaler", "fp16"), ("bf16", "bf16")) if f"{n} vs fp32" in vs]
    if "fp32+TF32" not in names:
        rows = ("fp32 step", "fp32+TF32 step", "fp32+TF32 vs", "bf16 step", "fp16+GradScaler step",
                "fp16+GradScaler vs", "bf16 vs")
        big = profiles.sizes("03_mixed_precision", "gpu", memory_gib=80)  # the reference's sizes
        lines += ["fp32+TF32 exists only on NVIDIA GPUs from Ampere on, not here (datasheet TF32 rates: notebook 01). "
                  f"What GPUs measured (the reference's {big.model} at {big.resolution}×{big.resolution} px, batch "
                  f"{big.batch_size}: notebook 02's ResNet rows ran at other sizes):",
                  published.elsewhere("03_mixed_precision", rows, ELSEWHERE), caveat]
    if dev.type == "cuda":  # the learner's own ratios are above; what others measured on other models and GPUs
        lines += ["For comparison, " + published.elsewhere("03_mixed_precision", keys=ELSEWHERE), caveat]
    return "\n".join(lines)


def disagreement(name: str, profiled: float, timed: float, margin: float = 1.1) -> str:
    """A line when the profile's op time against fp32's (`profiled`) and the timed steps' ratio
    (`timed`) point opposite ways, each by more than `margin`: the profile's milliseconds then
    describe another moment than the timing's; empty otherwise."""
    if not (profiled > margin and timed < 1 / margin or profiled < 1 / margin and timed > margin):
        return ""
    return (f"{name}: the profile's op time is {profiled:.2f}× fp32's but the timed step {timed:.2f}× fp32's: "
            "they disagree on which is faster, so read the profile's shares, not its milliseconds")


def profiled_vs_timed(p: StepProfile, timed_ms: float) -> str:
    """`p`'s profiled wall time beside the same step timed without the profiler (`timed_ms`), and,
    where the profiled step was slower by over 10 %, the likely causes, labelled as not measured
    apart (the profiler's cost and the machine's moment are not separated here); empty without a wall."""
    if p.wall_ms is None:
        return ""
    ratio = p.wall_ms / timed_ms
    line = (f"{p.name}: the profiled step took {p.wall_ms:.3g} ms of wall time, the timed step "
            f"{timed_ms:.3g} ms (median): {ratio:.2f}×")
    if ratio > 1.5:
        return line + (" — its shares describe the profiled step, and its milliseconds are not the timed step's "
                       "(a slower moment or the profiler's own cost: not measured apart)")
    if ratio > 1.1:
        return line + " (a slower moment or the profiler's own cost: not measured apart)"
    return line


def profile_lines(prof: dict[str, StepProfile], timed_ms: dict[str, float]) -> str:
    """The CPU profile of one step per precision: by kind, against the timed step, each against
    fp32, and what making fp32's convolutions and matmuls free could gain at most."""
    base = prof["fp32"]
    conv = base.by_kind["convolutions and matmuls"] / base.total
    return "\n".join(filter(None, [*map(str, prof.values()),
                      *(profiled_vs_timed(p, timed_ms[n]) for n, p in prof.items() if n in timed_ms),
                      *(profile_verdict(p, base) for n, p in prof.items() if n != "fp32"),
                      *(disagreement(n, p.total / base.total, timed_ms[n] / timed_ms["fp32"])
                        for n, p in prof.items() if n != "fp32" and n in timed_ms and "fp32" in timed_ms),
                      f"fp32: convolutions and matmuls are {conv:.0%} of the step's op time: were 16 bits to "
                      f"make them free, its op time would fall at most {amdahl_bound(base):.2f}× (op time, "
                      "not wall time)"]))


def memory_lines(peaks: dict[str, int], saved: dict[str, dict[torch.dtype, int]]) -> str:
    """Each precision's peak memory of one step (and against fp32's), then what its forward saves
    for backward, by dtype."""
    vs = lambda b: f" | {b / peaks['fp32']:.2f}× fp32's" if "fp32" in peaks else ""  # noqa: E731
    by_dtype = lambda s: ", ".join(f"{str(d).replace('torch.', '')} {fmt_bytes(b)}" for d, b in s.items())  # noqa: E731
    return "\n".join([*(f"{n:<16} | peak memory of one training step {fmt_bytes(b):>10}{vs(b)}"
                        for n, b in peaks.items()),
                      *(f"{n:<16} | saved for backward: {by_dtype(s)}" for n, s in saved.items())])


def loss_lines(runs: dict[str, RunResult], controls: Sequence[Sequence[float]], chance: float, steps: int) -> str:
    """Each precision's loss curve against fp32's (:func:`compare_losses`) and GradScaler's skipped steps."""
    lines = [compare_losses(n, r.history.loss, runs["fp32"].history.loss, chance=chance, controls=controls)
             for n, r in runs.items() if n != "fp32" and "fp32" in runs]
    if "fp16+GradScaler" in runs:
        skips = runs["fp16+GradScaler"].history.skipped_steps
        lines.append(f"GradScaler skipped {len(skips)} of {steps} steps in the fp16 run"
                     + (f" (steps {skips[:10]})" if skips else ""))
    return "\n".join(lines)


def loss_facts(runs: dict[str, RunResult], steps: int, batch: int) -> dict[str, tuple]:
    """Section 5's recorded figures, name -> (value, unit, note), for ``rep.add``."""
    facts = {f"{n}: loss after {steps} steps": (r.final_loss, "nats", f"{steps} steps of {batch}")
             for n, r in runs.items()}
    if "fp16+GradScaler" in runs:
        facts["fp16+GradScaler: skipped steps"] = (len(runs["fp16+GradScaler"].history.skipped_steps), "steps", "")
    return facts


def adamw_reference_setup() -> str:
    """The model the reference run timed AdamW on, named for its line: its step rows' model (their note,
    'resnet50, batch 256': section 6 builds the same `make_model`), with that model's parameter tensors
    counted on the meta device; '' without a reference run or a ResNet there."""
    name = report.reference("03_mixed_precision")[1].get("fp32 step", {}).get("note", "").split(",")[0].strip()
    if not name.startswith("resnet"):
        return ""
    with torch.device("meta"):
        tensors = len(list(models.resnet(name, num_classes=6).parameters()))
    return f"(the reference's model: {name}, {tensors} parameter tensors, as its step rows say; this run's: above)"
