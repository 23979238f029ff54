"""16-bit formats up close, apart from notebook 03's lesson module so that it stays its notebook's
scaffolding (:mod:`course_lib.lessons.nb03` re-exports what its notebook calls): each format's
limits, what a real cast does to a value, rounding to a format in fp64, and whether a format (or
TF32) really ran, one layer's output against its fp64 emulation; and the normal range that loss
scaling lifts gradients into (the loss-scale and survivors exercises):

    print(format_table())                       # fp32 / fp16 / bf16 limits
    print(cast_table([1e-8, 1.0, 70000.0]))     # what survives a cast
    fc, feats = classifier_input(model, x)      # the last Linear and the fp32 features it gets
    with torch.autocast("cuda", dtype=torch.float16):
        out = fc(feats)
    check_layer(layer_check("fp16+GradScaler", fc, feats, out, "cuda"), "cuda")  # fp16 really ran
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import torch
import torch.nn as nn

from course_lib import check
from course_lib.device import label as device_label
from course_lib.device import tf32

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def dtype_of(name: str | torch.dtype) -> torch.dtype:
    """The torch dtype of a format's name (fp32, fp16, bf16); a dtype is returned as it is."""
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
    dt = dtype_of(name)
    fi = torch.finfo(dt)
    mantissa = -round(math.log2(fi.eps))
    return FormatFacts(name, fi.bits, mantissa, fi.max, fi.smallest_normal,
                       fi.smallest_normal * fi.eps, fi.eps)


def format_table(names: Sequence[str] = ("fp32", "fp16", "bf16")) -> str:
    """The limits of each format, one row each."""
    head = f"{'format':<6} | {'bits':>4} | {'mantissa':>8} | {'max':>10} | {'smallest normal':>15} | " \
           f"{'smallest subnormal':>18} | {'ε: gap at 1':>11}"
    lines = [head, "-" * len(head)]
    for f in map(format_facts, names):
        lines.append(f"{f.name:<6} | {f.bits:>4} | {f.mantissa_bits:>8} | {f.max:>10.5g} | "
                     f"{f.smallest_normal:>15.3g} | {f.smallest_subnormal:>18.3g} | {f.eps:>11.3g}")
    return "\n".join(lines)


def cast(value: float, name: str | torch.dtype) -> float:
    """`value` rounded to the format `name` and read back as a Python float."""
    return torch.tensor(value, dtype=torch.float64).to(dtype_of(name)).item()


def fate(value: float, name: str | torch.dtype) -> str:
    """What a cast to `name` does to `value`: exact, rounded, subnormal, → 0 or → inf."""
    got, fi = cast(value, name), torch.finfo(dtype_of(name))
    if got == value:
        return "exact"
    if math.isinf(got):
        return "overflow → inf"
    if got == 0:
        return "underflow → 0"
    rel = f"{abs(got - value) / abs(value):.0e} off"
    return f"subnormal, {rel}" if abs(value) < fi.smallest_normal else f"rounded, {rel}"


def cast_table(values: Sequence[float], names: Sequence[str] = ("fp16", "bf16")) -> str:
    """Each value, its cast to each format, and what happened to it."""
    head = f"{'value':>10} | " + " | ".join(f"{n:>11} {'(what happened)':<22}" for n in names)
    lines = [head.rstrip(), "-" * len(head)]
    for v in values:
        cells = [f"{cast(v, n):>11.5g} {'(' + fate(v, n) + ')':<22}" for n in names]
        lines.append((f"{v:>10.6g} | " + " | ".join(cells)).rstrip())
    return "\n".join(lines)


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


# ---- the normal range: loss scaling and what a cast keeps (notebook 03's exercises) ----------------

def needed_scale(g_min: float, name: str | torch.dtype = "fp16") -> float:
    """The smallest power of two S with ``g_min * S`` >= the format's smallest normal."""
    if g_min <= 0:
        raise ValueError(f"The gradient magnitude must be positive, got {g_min}.")
    return 2.0 ** max(0, math.ceil(math.log2(torch.finfo(dtype_of(name)).smallest_normal / g_min)))


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
    return value == 0 or (math.isfinite(got) and abs(got) >= torch.finfo(dtype_of(name)).smallest_normal)


@check.exercise()
def check_survivors(fn: Callable[[float], bool], values: Sequence[float]) -> None:
    """Exercise: `fn(v)` must say whether v stays a normal fp16 number (see :func:`stays_normal`);
    compared with real casts of every value in `values`."""
    got = [v for v in values if fn(v)]
    want = [v for v in values if stays_normal(v, "fp16")]
    check.expect("values a cast leaves normal in fp16 (finite, not subnormal, not 0)", got, want)
