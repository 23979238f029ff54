"""Notebook 03 (mixed precision), up close: what 16-bit formats keep and lose, loss scaling, and
training runs compared by precision.

    print(format_table())                       # fp32 / fp16 / bf16 limits
    print(cast_table([1e-8, 1.0, 70000.0]))     # what survives a cast
    rows = underflow_rows(activation_grads(model, x, y), [1, 2**16])
    result = train_run("bf16", make_model, TensorLoader(x, y, 64), steps=20, lr=3e-3)
    print(compare_losses("bf16", result.history.loss, fp32_result.history.loss))  # a verdict
    print(device.cpu_support("fp16"))           # does this CPU have fp16 instructions? (core)
    fc, feats = classifier_input(model, x)      # the last Linear and the fp32 features it gets
    with torch.autocast("cuda", dtype=torch.float16):
        out = fc(feats)
    check_layer(layer_check("fp16+GradScaler", fc, feats, out, "cuda"), "cuda")  # fp16 really ran

Every number here is computed, never assumed: casts are real casts, gradients come
from a real backward pass, runs are real training runs through `course_lib.train`, and the
error a format must leave in a layer is worked out in fp64 on that layer's own numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_lib import check, memory, train, verdicts
from course_lib.bench import timing_of
from course_lib.data import TensorLoader
from course_lib.device import tf32
from course_lib.device import label as device_label
from course_lib.units import fmt_bytes, fmt_time

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
# Training precisions: label -> (TrainConfig.amp, TF32 for fp32 matmuls/convs on CUDA).
PRECISIONS = {
    "fp32": ("off", False),
    "fp32+TF32": ("off", True),
    "fp16+GradScaler": ("fp16", False),
    "bf16": ("bf16", False),
    "pure .half()": ("off", False),  # model.half() and fp16 inputs: no fp32 anywhere
}
ModelFn = Callable[[], nn.Module]


def _dtype(name: str | torch.dtype) -> torch.dtype:
    if isinstance(name, torch.dtype):
        return name
    if name not in DTYPES:
        raise ValueError(f"Unknown format {name!r}: choose one of {', '.join(DTYPES)}.")
    return DTYPES[name]


# ---- the formats --------------------------------------------------------------------

@dataclass
class FormatFacts:
    """The limits of one floating-point format (from ``torch.finfo``)."""

    name: str
    bits: int
    mantissa_bits: int  # stored fraction bits (precision is one more)
    max: float  # largest finite value
    smallest_normal: float  # below this, values lose bits (subnormal)
    smallest_subnormal: float  # below half of this, values flush to 0
    eps: float  # gap between 1.0 and the next value


def format_facts(name: str) -> FormatFacts:
    """Limits of `name` (fp32, fp16 or bf16)."""
    dt = _dtype(name)
    fi = torch.finfo(dt)
    mantissa = -round(math.log2(fi.eps))
    return FormatFacts(name, fi.bits, mantissa, fi.max, fi.smallest_normal,
                       fi.smallest_normal * fi.eps, fi.eps)


def format_table(names: Sequence[str] = ("fp32", "fp16", "bf16")) -> str:
    """The limits of each format, one row each."""
    head = f"{'format':<6} | {'bits':>4} | {'mantissa':>8} | {'max':>10} | {'smallest normal':>15} | " \
           f"{'smallest subnormal':>18} | {'eps':>9}"
    lines = [head, "-" * len(head)]
    for f in map(format_facts, names):
        lines.append(f"{f.name:<6} | {f.bits:>4} | {f.mantissa_bits:>8} | {f.max:>10.5g} | "
                     f"{f.smallest_normal:>15.3g} | {f.smallest_subnormal:>18.3g} | {f.eps:>9.3g}")
    return "\n".join(lines)


def cast(value: float, name: str | torch.dtype) -> float:
    """`value` rounded to the format `name` and read back as a Python float."""
    return torch.tensor(value, dtype=torch.float64).to(_dtype(name)).item()


def fate(value: float, name: str | torch.dtype) -> str:
    """What a cast to `name` does to `value`: exact, rounded, subnormal, → 0 or → inf."""
    got, fi = cast(value, name), torch.finfo(_dtype(name))
    if got == value:
        return "exact"
    if math.isinf(got):
        return "overflow → inf"
    if got == 0:
        return "underflow → 0"
    rel = f"{abs(got - value) / abs(value):.0e} off"
    return f"subnormal, {rel}" if abs(value) < fi.smallest_normal else f"rounded, {rel}"


def survives(value: float, name: str | torch.dtype = "fp16", rtol: float = 1e-3) -> bool:
    """True when `value` comes back from a cast finite and within `rtol` of itself."""
    got = cast(value, name)
    return math.isfinite(got) and abs(got - value) <= rtol * abs(value)


def cast_table(values: Sequence[float], names: Sequence[str] = ("fp16", "bf16")) -> str:
    """Each value, its cast to each format, and what happened to it."""
    head = f"{'value':>10} | " + " | ".join(f"{n:>11} {'(what happened)':<22}" for n in names)
    lines = [head.rstrip(), "-" * len(head)]
    for v in values:
        cells = [f"{cast(v, n):>11.5g} {'(' + fate(v, n) + ')':<22}" for n in names]
        lines.append((f"{v:>10.6g} | " + " | ".join(cells)).rstrip())
    return "\n".join(lines)


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
    dt, nonzero = _dtype(name), grads != 0
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


def needed_scale(g_min: float, name: str | torch.dtype = "fp16") -> float:
    """The smallest power of two S with ``g_min * S`` >= the format's smallest normal."""
    if g_min <= 0:
        raise ValueError(f"The gradient magnitude must be positive, got {g_min}.")
    return 2.0 ** max(0, math.ceil(math.log2(torch.finfo(_dtype(name)).smallest_normal / g_min)))


@check.exercise()
def check_loss_scale(fn: Callable[[float], float]) -> None:
    """Exercise: `fn(g_min)` must return the smallest power-of-two loss scale that lifts
    `g_min` to fp16's smallest normal (6.1e-5), and 1 when no scaling is needed."""
    for g in (1e-7, 3e-6, 2.0**-20, 1e-3):
        got, want = fn(g), needed_scale(g)
        if got != want and got * 2 == want:
            raise AssertionError(f"loss_scale({g:g}) = {got:g}: {g:g} × {got:g} = {g * got:.3g} "
                                 f"is still below 6.1e-5; expected {want:g}")
        check.expect(f"loss scale for g = {g:g}", got, want)


def stays_normal(value: float, name: str | torch.dtype = "fp16") -> bool:
    """True when a real cast of `value` to `name` is 0 from 0, or finite and in the normal
    range (rounded by at most eps/2, all significant bits kept; not subnormal, not 0, not inf)."""
    got = cast(value, name)
    return value == 0 or (math.isfinite(got) and abs(got) >= torch.finfo(_dtype(name)).smallest_normal)


@check.exercise()
def check_survivors(fn: Callable[[float], bool], values: Sequence[float]) -> None:
    """Exercise: `fn(v)` must say whether v stays a normal fp16 number (see :func:`stays_normal`);
    compared with real casts of every value in `values`."""
    got = [v for v in values if fn(v)]
    want = [v for v in values if stays_normal(v, "fp16")]
    check.expect("values a cast leaves normal in fp16 (finite, not subnormal, not 0)", got, want)


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
    """One step of :func:`scaler_demo`."""

    step: int
    scale: float  # loss scale used for this step's backward
    injected: bool  # an inf was put into a gradient
    stepped: bool  # the weights changed
    next_scale: float

    def __str__(self) -> str:
        return (f"{self.step:>4} | {self.scale:>9g} | {'inf' if self.injected else '-':>9} | "
                f"{'yes' if self.stepped else 'SKIPPED':>13} | {self.next_scale:>10g}")


def scaler_demo(steps: int = 6, inject: Sequence[int] = (2, 3), init_scale: float = 2.0**16,
                growth_interval: int = 2) -> list[ScalerRow]:
    """Train a tiny linear model on CPU with GradScaler; put an inf into a gradient at
    the steps in `inject` (1-based) and record what the scaler does."""
    if steps < 1 or any(not 1 <= s <= steps for s in inject):
        raise ValueError(f"Need steps >= 1 and injected steps within 1..{steps}, got {list(inject)}.")
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(16, 4, generator=g), torch.randn(16, 1, generator=g)
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu", init_scale=init_scale, growth_interval=growth_interval)
    rows = []
    for step in range(1, steps + 1):
        opt.zero_grad(set_to_none=True)
        scaler.scale(F.mse_loss(model(x), y)).backward()
        if step in inject:
            model.weight.grad[0, 0] = float("inf")  # what an overflow in backward leaves behind
        before, scale = model.weight.detach().clone(), scaler.get_scale()
        scaler.step(opt)  # skipped when any grad is inf/NaN
        scaler.update()  # halves the scale after an overflow, doubles it after a clean run
        stepped = not torch.equal(before, model.weight.detach())
        rows.append(ScalerRow(step, scale, step in inject, stepped, scaler.get_scale()))
    return rows


def scaler_table(rows: Sequence[ScalerRow]) -> str:
    """The rows of :func:`scaler_demo` as a table."""
    head = f"{'step':>4} | {'scale':>9} | {'grad':>9} | {'optimizer step':>13} | {'next scale':>10}"
    return "\n".join([head, "-" * len(head), *map(str, rows)])


# ---- training runs by precision -------------------------------------------------------

# ---- did the format really run? one layer against its fp64 emulation -------------------

# The format each precision rounds the inputs of a matmul to (autocast casts them; TF32 tensor
# cores read 10 of fp32's 23 stored mantissa bits).
PROBED = {"fp32+TF32": "tf32", "fp16+GradScaler": "fp16", "bf16": "bf16"}
_ROUND_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
BAND = 2.0  # measured / emulated error must lie in [1/BAND, BAND]; the next format is 8x away


def round_to(t: torch.Tensor, fmt: str, mode: str = "nearest") -> torch.Tensor:
    """`t` rounded to the precision of `fmt`, returned as fp64 on the CPU.

    fp16 / bf16: a real cast (round to nearest, ties to even), as autocast casts. tf32: fp32's
    mantissa cut to 10 stored bits, either rounded to nearest (``mode="nearest"``) or truncated
    (``mode="zero"``): which one a GPU's TF32 kernels use is theirs to choose. fp64: unchanged.
    """
    if fmt == "fp64":
        return t.detach().cpu().double()
    if fmt in _ROUND_DTYPES:
        if mode != "nearest":
            raise ValueError(f"{fmt} is reached by a cast, which rounds to nearest; got mode {mode!r}.")
        return t.detach().cpu().to(_ROUND_DTYPES[fmt]).double()
    if fmt != "tf32":
        raise ValueError(f"Unknown format {fmt!r}: choose fp64, tf32, fp16 or bf16.")
    if mode not in ("nearest", "zero"):
        raise ValueError(f"mode must be 'nearest' or 'zero', got {mode!r}.")
    bits = t.detach().cpu().float().contiguous().view(torch.int32)  # sign | exponent | 23 mantissa bits
    drop = 23 - 10
    if mode == "nearest":  # add half a TF32 step (ties to even), then cut
        bits = bits + ((1 << (drop - 1)) - 1) + ((bits >> drop) & 1)
    return (bits & ~((1 << drop) - 1)).view(torch.float32).double()


def emulate(layer: nn.Module, x: torch.Tensor, fmt: str = "fp64", mode: str = "nearest") -> torch.Tensor:
    """The output of `layer` (a Linear or Conv2d) on `x`, computed in fp64 on the CPU with its
    input and weight rounded to `fmt` (:func:`round_to`). As on a GPU: fp16 / bf16 autocast also
    casts the bias and returns a 16-bit output (rounded here too); TF32 rounds only the two
    multiplied operands and returns fp32. ``fmt="fp64"``: the exact reference."""
    params = {}
    for name, p in layer.named_parameters():
        params[name] = round_to(p, fmt if (fmt != "tf32" or name == "weight") else "fp64", mode)
    out = torch.func.functional_call(layer, params, (round_to(x, fmt, mode),))
    return round_to(out, fmt) if fmt in _ROUND_DTYPES else out


def classifier_input(model: nn.Module, x: torch.Tensor) -> tuple[nn.Linear, torch.Tensor]:
    """The model's last ``nn.Linear`` (its classifier) and the fp32 input it receives in one
    forward pass of `x` (no gradients; train or eval mode as the model is)."""
    seen: list[tuple[nn.Linear, torch.Tensor]] = []
    hooks = [m.register_forward_hook(lambda m, args, _out: seen.append((m, args[0].detach())))
             for m in model.modules() if isinstance(m, nn.Linear)]
    if not hooks:
        raise ValueError("The model has no nn.Linear layer to probe.")
    try:
        with torch.no_grad():
            model(x)
    finally:
        for h in hooks:
            h.remove()
    return seen[-1]


def _rel(y: torch.Tensor, ref: torch.Tensor) -> float:
    return ((y.detach().cpu().double() - ref).norm() / ref.norm()).item()


@dataclass
class LayerCheck:
    """The error one precision left in one layer's output, against what its format must leave."""

    name: str  # the precision, a key of PROBED
    layer: str  # what was probed
    measured: float  # relative error (2-norm) of the device's output against fp64
    nearest: float  # the same for the fp64 emulation, operands rounded to nearest
    truncated: float | None = None  # tf32: the emulation with truncated operands
    device: str = ""

    @property
    def low(self) -> float:
        return self.nearest / BAND

    @property
    def high(self) -> float:
        return BAND * max(self.nearest, self.truncated or 0.0)

    @property
    def telling(self) -> bool:
        """False when the format leaves these numbers (nearly) as they are: nothing to tell."""
        return self.nearest > 1e-6

    @property
    def ok(self) -> bool:
        return not self.telling or self.low <= self.measured <= self.high

    def __str__(self) -> str:
        fmt = PROBED[self.name]
        expect = (f"{self.nearest:.2e} rounded to nearest, {self.truncated:.2e} truncated"
                  if self.truncated is not None else f"{self.nearest:.2e}")
        head = (f"{self.name}, {self.layer}: relative error {self.measured:.2e}; {fmt} operands "
                f"give {expect} on these numbers (fp64 emulation)")
        if not self.telling:
            return f"{head} | inconclusive: {fmt} leaves these numbers unchanged"
        where = "in" if self.ok else "OUTSIDE"
        return f"{head} | {where} [{self.low:.2e}, {self.high:.2e}]"


def layer_check(name: str, layer: nn.Module, x: torch.Tensor, out: torch.Tensor,
                device: torch.device | str = "cpu") -> LayerCheck:
    """How far `out`, the output of `layer` on `x` computed at precision `name` (a key of
    PROBED) on `device`, is from fp64, next to what the format must do to the same numbers
    (:func:`emulate`). Autocast casts the operands exactly as the emulation does; only the
    order of the fp32 additions differs (and cuBLAS may round partial sums to 16 bits), which
    stays well inside a factor of 2. One format coarser or finer is 8× (3 mantissa bits) away,
    and no rounding at all is orders of magnitude below."""
    if name not in PROBED:
        raise ValueError(f"No format to probe for {name!r}: choose one of {', '.join(PROBED)}.")
    fmt, ref = PROBED[name], emulate(layer, x)
    truncated = _rel(emulate(layer, x, fmt, "zero"), ref) if fmt == "tf32" else None
    what = f"{type(layer).__name__}({', '.join(str(s) for s in layer.weight.shape[1::-1])})"
    return LayerCheck(name, what, _rel(out, ref), _rel(emulate(layer, x, fmt), ref), truncated,
                      device_label(device))


def tf32_matmul_check(device: torch.device | str, n: int = 1024, seed: int = 0) -> LayerCheck:
    """An n×n fp32 matmul on `device` with TF32 on (:func:`course_lib.device.tf32`), checked as
    :func:`layer_check` checks a layer: shapes for which every TF32-capable GPU uses tensor cores."""
    g = torch.Generator().manual_seed(seed)
    layer = nn.Linear(n, n, bias=False)
    with torch.no_grad():
        layer.weight.copy_(torch.randn(n, n, generator=g))
    x = torch.randn(n, n, generator=g)
    layer_dev, x_dev = layer.to(device), x.to(device)
    with torch.no_grad(), tf32(True):
        out = layer_dev(x_dev)
    check_ = layer_check("fp32+TF32", layer_dev, x_dev, out, device)
    check_.layer = f"a {n}×{n} matmul"
    return check_


def check_layer(result: LayerCheck, device: torch.device | str) -> LayerCheck:
    """Print `result` and assert it: the measured error must lie in its format's band.

    TF32 is a permission, not an order: for a small layer cuBLAS may pick a kernel without
    tensor cores and compute in full fp32. When the TF32 error is below the band, an n×n matmul
    under the same switch (:func:`tf32_matmul_check`) decides: TF32 there passes, and the layer's
    line says it ran in fp32; fp32 there too fails (the switch did nothing). Returns the check
    that decided."""
    if result.name == "fp32+TF32" and result.telling and result.measured < result.low:
        print(result)
        probe = tf32_matmul_check(device)
        print(f"  this layer ran in full fp32 (its kernel does not use TF32 tensor cores); "
              f"the switch itself, on {probe.layer}: {probe.measured:.2e} "
              f"{'in' if probe.ok else 'OUTSIDE'} [{probe.low:.2e}, {probe.high:.2e}]"
              f"{' ✓' if probe.ok else ''}")
        result = probe
    else:
        print(f"{result} ✓" if result.ok else result)
    if not result.ok:
        raise AssertionError(f"{result.name}: the measured error {result.measured:.2e} is outside "
                             f"[{result.low:.2e}, {result.high:.2e}], what {PROBED[result.name]} "
                             f"gives these numbers: this is not {PROBED[result.name]} arithmetic")
    return result


@dataclass
class RunResult:
    """One training run at one precision."""

    name: str
    history: train.History
    step_s: float  # median seconds per optimizer step, warm-up window excluded
    batch_size: int
    device: str
    peak_bytes: int | None = None  # one training step, from course_lib.memory
    notes: list[str] = field(default_factory=list)

    @property
    def images_per_s(self) -> float:
        return self.batch_size / self.step_s if self.step_s else 0.0

    @property
    def final_loss(self) -> float:
        return self.history.loss[-1]

    @property
    def first_nan_step(self) -> int | None:
        """The first step whose loss was NaN or inf, None if none was."""
        return next((s for s, v in zip(self.history.step, self.history.loss) if not math.isfinite(v)), None)

    def __str__(self) -> str:
        peak = "-" if self.peak_bytes is None else fmt_bytes(self.peak_bytes)
        return (f"{self.name:<16} | {fmt_time(self.step_s):>9}/step | {self.images_per_s:>9,.0f} img/s | "
                f"peak {peak:>10} | loss {self.final_loss:>7.4f} | "
                f"{len(self.history.skipped_steps):>2} skipped | {self.device}")


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
    return RunResult(name, history, history.median_step_time_s(skip), batches.batch_size,
                     device_label(device))


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
    :func:`course_lib.memory.fit_batch`, it finds a batch at which every timed configuration fits."""
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
