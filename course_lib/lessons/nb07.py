"""Notebook 07 (attention from scratch): which SDPA kernel runs and what each one costs as the
sequence grows, the toy task's data, the snippet tutorials teach, and the exercise checks.

The attention itself (masks, :func:`~course_lib.attention.attention`,
:class:`~course_lib.attention.MultiHeadAttention`) and how closely two correct attentions agree
(:func:`~course_lib.attention.agreement`) are core: :mod:`course_lib.attention`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

from course_lib import bench, check, memory, units
from course_lib.attention import attention, causal_mask, padding_mask
from course_lib.bench import Timing
from course_lib.roofline import counted_flops

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# The snippet this topic is usually taught from (tutorials, blog posts, answers): it forgets
# `import math`, and its -1e9 does not fit in float16. Run by the attention notebook.
SNIPPET_SOURCE = '''import torch
import torch.nn.functional as F

def scaled_dot_product_attention(q, k, v, mask=None):
    d_k = q.size(-1)
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    attn = F.softmax(scores, dim=-1)
    return torch.matmul(attn, v), attn
'''


@check.exercise()
def check_flops(fn: Callable[[int, int, int, int], float]) -> None:
    """Exercise check: `fn(B, H, T, d)` against the FLOPs PyTorch's counter finds in the
    written-out attention on tensors of those shapes."""
    g = torch.Generator().manual_seed(0)  # the learner's random stream is left alone
    for b, h, t, d in [(1, 1, 8, 4), (2, 4, 16, 8), (3, 2, 32, 16), (1, 12, 64, 64)]:
        q = torch.randn(b, h, t, d, generator=g)
        want = counted_flops(lambda: attention(q, q, q))
        got = fn(b, h, t, d)
        if got != want:
            raise AssertionError(f"attention FLOPs for B={b}, H={h}, T={t}, d={d}: got {got:,}, "
                                 f"PyTorch's FlopCounterMode counts {want:,}")
    print(f"attention FLOPs agree with FlopCounterMode on 4 shapes (last: B={b}, H={h}, T={t}, "
          f"d={d}: {want:,}) ✓")


@check.exercise()
def check_cached_causal_mask(fn: Callable[[int, int], torch.Tensor]) -> None:
    """Exercise check: `fn(Tq, Tk)` is the (Tq, Tk) boolean mask of Tq new queries, the last
    Tq of Tk positions, each seeing the keys up to its own position. Compared through SDPA
    with PyTorch's ``torch.nn.attention.bias.causal_lower_right`` for several (Tq, Tk)."""
    from torch.nn.attention.bias import causal_lower_right

    g = torch.Generator().manual_seed(0)  # the learner's random stream is left alone
    for t_q, t_k in [(1, 1), (1, 5), (3, 7), (4, 4), (6, 16)]:
        mask = fn(t_q, t_k)
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or mask.shape != (t_q, t_k):
            got = (f"{mask.dtype} of shape {tuple(mask.shape)}" if isinstance(mask, torch.Tensor)
                   else type(mask).__name__)
            raise AssertionError(f"mask for Tq={t_q}, Tk={t_k}: got {got}, expected torch.bool of "
                                 f"shape ({t_q}, {t_k})")
        q = torch.randn(1, 2, t_q, 8, dtype=torch.float64, generator=g)
        k, v = torch.randn(2, 1, 2, t_k, 8, dtype=torch.float64, generator=g)
        got = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        want = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(t_q, t_k))
        if not torch.allclose(got, want, atol=1e-12, rtol=0):
            row = int((got - want).abs().amax(dim=(0, 1, 3)).argmax())
            raise AssertionError(f"mask for Tq={t_q}, Tk={t_k}: new query {row} (position "
                                 f"{t_k - t_q + row}) sees a different set of keys than "
                                 "causal_lower_right gives it")
    print("your mask gives what causal_lower_right gives, for 5 (Tq, Tk) pairs up to (6, 16) ✓")


# ---- which SDPA kernel runs, and each one timed

# The ATen op each backend runs (a profile of one call shows which one ran).
BACKEND_OPS = {
    "aten::_scaled_dot_product_flash_attention": "FLASH_ATTENTION",
    "aten::_scaled_dot_product_flash_attention_for_cpu": "FLASH_ATTENTION",
    "aten::_scaled_dot_product_efficient_attention": "EFFICIENT_ATTENTION",
    "aten::_scaled_dot_product_cudnn_attention": "CUDNN_ATTENTION",
    "aten::_scaled_dot_product_attention_math": "MATH",
    "aten::_scaled_dot_product_attention_math_for_mps": "MATH",
    "aten::_scaled_dot_product_fused_attention_overrideable": "OVERRIDEABLE",
}


def backend_used(fn: Callable[[], object]) -> str:
    """The SDPA backend `fn()` ran, read from the ATen ops a profile of one call records:
    'FLASH_ATTENTION', 'EFFICIENT_ATTENTION', 'CUDNN_ATTENTION', 'MATH' (or 'none')."""
    with memory.quiet_stderr(), profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    found = [BACKEND_OPS[e.name] for e in prof.events() if e.name in BACKEND_OPS]
    return found[0] if found else "none"


def backends_for(device: torch.device | str) -> list[SDPBackend]:
    """The SDPA backends PyTorch has for `device`'s type (CUDA: four; CPU: flash and math)."""
    if torch.device(device).type == "cuda":
        return [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
                SDPBackend.CUDNN_ATTENTION, SDPBackend.MATH]
    return [SDPBackend.FLASH_ATTENTION, SDPBackend.MATH]


@dataclass
class BackendRow:
    """One SDPA backend on given inputs: its timing, or why it cannot run them."""

    backend: str
    timing: Timing | None
    reason: str = ""  # why PyTorch refused the inputs (its warning), when timing is None


def refusal(exc: RuntimeError, caught: Sequence[warnings.WarningMessage]) -> str:
    """Why an SDPA call under a forced backend raised: 'out of memory', else the first line of
    the first warning PyTorch gave (its reason for refusing the inputs), else a plain sentence."""
    if memory.is_oom(exc):
        return "out of memory"
    return next((str(w.message).strip().splitlines()[0] for w in caught), "no kernel for these inputs")


def time_backends(step: Callable[[], object], device: torch.device | str, *,
                  backends: Sequence[SDPBackend] | None = None, repeats: int = 5,
                  also: dict[str, Callable[[], object]] | None = None) -> list[BackendRow]:
    """Time `step()` (calls SDPA) with each backend forced by ``sdpa_kernel``, the backends
    timed in turns as the sweep's versions are (a slow spell falls on all alike; their ratios
    are paired). The steps of `also` (name: step, e.g. the written-out attention) are timed in
    the same turns, each in a row of its own name after the backends' rows.

    Each backend is called once first. One that cannot take these inputs raises RuntimeError
    ("no available kernel") and warns why: its row keeps the first warning instead of a timing.
    One that runs out of memory says so, and the memory is freed before the next backend.
    """
    rows: dict[str, BackendRow] = {}
    forced: dict[str, Callable[[], object]] = {}
    candidates: dict[str, Callable[[], object]] = {}
    for backend in backends or backends_for(device):
        def run(backend: SDPBackend = backend) -> None:
            with sdpa_kernel(backend):
                step()

        candidates[backend.name] = run
    candidates.update(also or {})
    for name, run in candidates.items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                run()
                forced[name] = run
                rows[name] = BackendRow(name, None)
            except RuntimeError as exc:  # torch.OutOfMemoryError is a RuntimeError too
                rows[name] = BackendRow(name, None, refusal(exc, caught))
        if rows[name].reason == "out of memory":
            memory.free()  # after the except block, which held the failed call's frames
    for name, timing in (_time_in_turns(forced, device, repeats) if forced else {}).items():
        rows[name].timing = timing
        rows[name].reason = "" if timing is not None else "out of memory"
    return list(rows.values())


def two_moments(before: bench.Ratio, here: bench.Ratio) -> str:
    """One sentence on one comparison (the same two steps) timed in turns at two moments of a
    run: `before` in section 5's sweep, `here` in section 6. Each ratio is paired; whether the
    two agree is read from their intervals."""
    ranges = f"section 5: {before.lo:.2f}–{before.hi:.2f}×, here: {here.lo:.2f}–{here.hi:.2f}×"
    if before.single or here.single:
        return f"one round at a moment: no interval to say whether the two moments agree ({ranges})"
    if before.lo <= here.hi and here.lo <= before.hi:
        return f"the two moments agree within their intervals ({ranges})"
    return (f"the two moments disagree beyond their intervals ({ranges}): the ratio itself changed "
            "between them. Timing in turns cancels a slow spell that slows both steps alike; on this "
            "shared machine a slow spell need not slow two different kernels by the same factor, so "
            "quote each ratio with its interval and the section that measured it")


def rising(slopes: Sequence[float]) -> bool:
    """Whether each slope is at least the one before (the growth exponent between neighbouring
    lengths climbing toward its large-T value, as fixed costs fade)."""
    return all(b >= a for a, b in zip(slopes, slopes[1:]))


def lead_growth(lead: Mapping[int, bench.Ratio], t0: int, t1: int) -> tuple[float, float, float]:
    """How much SDPA's lead over the written-out version (`lead[t]`: their paired ratio at length
    t) grows from length `t0` to `t1`: (low, value, high), the ends from the two intervals."""
    a, b = lead[t0], lead[t1]
    return b.lo / a.hi, b.value / a.value, b.hi / a.lo


def cache_step(lead: Mapping[int, bench.Ratio], lengths: Sequence[int], size: Mapping[int, int],
               cache_bytes: int, what: str) -> str:
    """One sentence: between which lengths `what` (`size[t]` bytes at length t) outgrows a cache of
    `cache_bytes`, and whether SDPA's lead grows faster across that point than over the step
    before it, beyond both ranges. SDPA builds no T×T matrix, and each lead is timed in turns
    at its length, so a change of the machine's speed between lengths cancels in it; a cache
    step of the written-out version would show as the lead growing faster across the point."""
    lengths = sorted(lengths)
    past = [t for t in lengths if size[t] > cache_bytes]
    if not past:
        return f"{what} fits the cache at every length (up to {units.fmt_bytes(size[lengths[-1]])})"
    i = lengths.index(past[0])
    if i == 0:
        return f"{what} outgrows the cache already at T={lengths[0]} ({units.fmt_bytes(size[lengths[0]])})"
    t0, t1 = lengths[i - 1], lengths[i]
    head = (f"{what} outgrows it between T={t0} ({units.fmt_bytes(size[t0])}) and T={t1} "
            f"({units.fmt_bytes(size[t1])})")
    if i < 2 or any(t not in lead for t in (lengths[i - 2], t0, t1)):
        return head + ": too few lengths measured on both sides to compare"
    tb = lengths[i - 2]
    lo_b, before, hi_b = lead_growth(lead, tb, t0)
    lo_a, across, hi_a = lead_growth(lead, t0, t1)
    grew = (f"SDPA's lead grew {before:.2f}× ({lo_b:.2f}–{hi_b:.2f}) from T={tb} to T={t0} and "
            f"{across:.2f}× ({lo_a:.2f}–{hi_a:.2f}) from T={t0} to T={t1}")
    if lo_a > hi_b:
        verdict = ("faster across it, beyond both ranges: consistent with the step a cache limit would make, "
                   "though a lead cannot say which version's time moved (the written-out one slowing, or SDPA "
                   "speeding up)")
    elif hi_a < lo_b:
        verdict = "slower across it, beyond both ranges: no cache step shows there"
    else:
        verdict = "the ranges overlap: this run cannot tell a step there from the spread of its turns"
    return f"{head}: {grew}; {verdict}"


def largest_cache(device: torch.device | str) -> tuple[str, int] | None:
    """(name, bytes) of the largest cache in front of `device`'s memory: a GPU's L2
    (``torch.cuda.get_device_properties``), the CPU's last-level cache from Linux's
    /sys/devices/system/cpu/cpu0/cache; None where neither can be read."""
    from pathlib import Path

    if torch.device(device).type == "cuda":
        return "L2", torch.cuda.get_device_properties(device).L2_cache_size
    sizes = []
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            kind = (index / "type").read_text().strip()
            level = (index / "level").read_text().strip()
            size = (index / "size").read_text().strip()  # "300M", "4096K"
        except OSError:
            continue
        if kind == "Instruction" or not size[:-1].isdigit():
            continue
        sizes.append((int(size[:-1]) * {"K": 2**10, "M": 2**20, "G": 2**30}.get(size[-1], 1), f"L{level}"))
    if not sizes:
        return None
    size, name = max(sizes)
    return name, size


# ---- time and peak memory against sequence length

@dataclass
class Point:
    """One implementation at one sequence length: time of forward+backward and peak memory."""

    name: str
    length: int
    timing: Timing | None = None  # None: ran out of memory, or skipped
    peak_bytes: int | None = None
    oom: bool = False  # ran out of memory at this length (measuring memory or timing)
    skipped: bool = False  # not tried: it ran out of memory at a shorter length


def fwd_bwd(fn: Callable[..., torch.Tensor], shape: tuple[int, int, int, int],
            device: torch.device | str, dtype: torch.dtype = torch.float32,
            seed: int = 0) -> Callable[[], None]:
    """A step that runs `fn(q, k, v)` forward and backward on random (B, H, T, d) inputs.

    The inputs and the output's gradient are made once, outside the step; the step frees
    the inputs' gradients it made, so each call starts from the same memory.
    """
    g = torch.Generator(device=device).manual_seed(seed)  # drawn where they are used: no copy
    q, k, v, grad = (torch.randn(shape, generator=g, dtype=dtype, device=device) for _ in range(4))
    for t in (q, k, v):
        t.requires_grad_(True)

    def step() -> None:
        fn(q, k, v).backward(grad)
        q.grad = k.grad = v.grad = None

    return step


def _reraise_unless_oom(exc: BaseException) -> None:
    """Out-of-memory is a result of the sweep; anything else is a bug: re-raised."""
    if not memory.is_oom(exc):
        raise exc


SWEEP_TURN_S = 0.02  # a step shorter than this runs several times per turn (bench.time_in_turns)


def _time_in_turns(steps: dict[str, Callable[[], None]], device: torch.device | str,
                   repeats: int) -> dict[str, Timing | None]:
    """Timings of the steps in turns; if that runs out of memory, each alone (None: OOM).

    A step shorter than SWEEP_TURN_S runs back to back within its turn: on the H100, SDPA at
    T=4096 (1.41 ms alone, many calls) took 2.09 ms timed as one call between synchronisations."""
    try:
        return {t.name: t for t in bench.time_in_turns(steps, device=device, warmup=1, repeats=repeats,
                                                       min_turn_s=SWEEP_TURN_S)}
    except Exception as exc:
        _reraise_unless_oom(exc)
    memory.free()
    out: dict[str, Timing | None] = {}
    for name, step in steps.items():
        try:
            out[name] = bench.time_fn(step, name=name, device=device, warmup=1, repeats=repeats)
        except Exception as exc:
            _reraise_unless_oom(exc)
            out[name] = None
        memory.free()
    return out


def sweep(fns: dict[str, Callable[..., torch.Tensor]], lengths: Sequence[int], *, batch: int,
          heads: int, head_dim: int, device: torch.device | str, dtype: torch.dtype = torch.float32,
          repeats: int = 3, on_point: Callable[[Point], None] | None = None) -> list[Point]:
    """Time and peak memory of forward+backward for each function and length.

    At each length: the peak memory one step of each function adds (``memory.peak_memory``),
    then the functions that fit timed in turns, `repeats` rounds after one warm-up
    (``bench.time_in_turns``: a slow spell of the machine falls on all alike; a short step
    runs several times per turn). A function
    that runs out of memory gets an ``oom`` point and ``skipped`` points at the longer
    lengths. `on_point` sees each point when its length is done (to print progress).
    """
    points, failed = [], set()
    for t in sorted(lengths):
        row = {name: Point(name, t, skipped=name in failed) for name in fns}
        steps = {}
        for name, fn in fns.items():
            if name in failed:
                continue
            try:
                step = fwd_bwd(fn, (batch, heads, t, head_dim), device, dtype)
                row[name].peak_bytes = memory.peak_memory(step, device).peak_bytes
                steps[f"{name}, T={t}"] = step
            except Exception as exc:
                _reraise_unless_oom(exc)
                row[name].oom = True
            step = None
            if row[name].oom:
                failed.add(name)
                memory.free()  # after the except block, which held the failed step's frames
        timings = _time_in_turns(steps, device, repeats) if steps else {}
        steps = {}
        for name, point in row.items():
            key = f"{name}, T={t}"
            if key in timings:
                point.timing = timings[key]
                if point.timing is None:
                    point.oom = True
                    failed.add(name)
            points.append(point)
            if on_point:
                on_point(point)
    return points


def plot_sweep(points: Sequence[Point], *, title: str = "") -> "Figure":
    """Two log-log panels against sequence length: time of forward+backward (median, bars
    from the quartiles) and peak memory, one line per implementation, with dashed guides
    ∝ T and ∝ T² through the first point; a legend entry says where one ran out of memory."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    from course_lib.plot import plain_log_ticks

    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(11, 4))
    first: dict = {}  # panel -> (T, value) of the first point drawn, where the guides start
    for name in dict.fromkeys(p.name for p in points):
        done = [p for p in points if p.name == name and p.timing is not None]
        oom = [p.length for p in points if p.name == name and p.oom]
        label = name + (f" (out of memory at T={min(oom)})" if oom else "")
        if not done:
            ax_t.plot([], [], label=label)
            continue
        lengths = [p.length for p in done]
        med = [p.timing.median_s * 1e3 for p in done]
        err = [[m - p.timing.lo_s * 1e3 for m, p in zip(med, done)],
               [p.timing.hi_s * 1e3 - m for m, p in zip(med, done)]]
        line = ax_t.errorbar(lengths, med, yerr=err, marker="o", capsize=3, label=label)
        mib = [p.peak_bytes / 2**20 for p in done]
        ax_m.plot(lengths, mib, marker="o", color=line[0].get_color(), label=label)
        first.setdefault(ax_t, (lengths[0], med[0]))
        first.setdefault(ax_m, (lengths[0], mib[0]))
    lengths = sorted({p.length for p in points})
    for ax, ylabel in ((ax_t, "forward + backward, ms"), (ax_m, "peak memory added, MiB")):
        ys = [y for line in ax.get_lines() for y in line.get_ydata()]
        if ax in first:
            t0, y0 = first[ax]
            for power, style in ((1, ":"), (2, "--")):
                ax.plot(lengths, [y0 * (t / t0) ** power for t in lengths], style, color="grey",
                        lw=1, label=f"∝ T{'²' if power == 2 else ''} (guide)")
        ax.set(xscale="log", yscale="log", xlabel="sequence length T", ylabel=ylabel)
        ax.set_xticks(lengths, [str(t) for t in lengths])
        ax.xaxis.set_minor_formatter(NullFormatter())
        if ys:
            ax.set_ylim(min(ys) / 1.5, max(ys) * 1.5)  # the data, not the guides, sets the range
            plain_log_ticks(ax.yaxis, min(ys), max(ys))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def growth_exponent(lengths: Sequence[float], values: Sequence[float]) -> float:
    """p in value ∝ lengthᵖ: the slope of a least-squares line through log(value) against
    log(length). Needs two lengths or more and positive values."""
    if len(lengths) != len(values) or len(set(lengths)) < 2 or min(values) <= 0:
        raise ValueError("A growth exponent needs positive values at two lengths or more.")
    x = torch.tensor(lengths, dtype=torch.float64).log()
    y = torch.tensor(values, dtype=torch.float64).log()
    x = x - x.mean()
    return float((x * (y - y.mean())).sum() / (x * x).sum())


# ---- a task whose attention can be read: the running maximum, left-padded

PAD = 0  # token 0 pads; real tokens are 1 .. vocab-1


def running_max_batch(n: int, t: int, vocab: int, *, min_len: int = 1,
                      generator: torch.Generator | None = None
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """n sequences of 1..vocab-1 of random lengths min_len..t, left-padded with :data:`PAD`.

    Returns tokens (n, T), key_mask (n, T) True at real tokens, and targets (n, T): at each
    real position the largest token so far, -100 at the padding (``cross_entropy`` skips it).
    Causal attention solves it in one layer: look at the largest token in the past.
    """
    if not 1 <= min_len <= t or vocab < 3:
        raise ValueError(f"Need 1 <= min_len <= t and vocab >= 3, got min_len={min_len}, t={t}, vocab={vocab}.")
    lengths = torch.randint(min_len, t + 1, (n,), generator=generator)
    key_mask = padding_mask(lengths, t, left=True)  # (n, T)
    tokens = torch.randint(1, vocab, (n, t), generator=generator).masked_fill(~key_mask, PAD)
    targets = tokens.cummax(dim=1).values.masked_fill(~key_mask, -100)  # PAD = 0 never wins
    return tokens, key_mask, targets


def share_on_max(weights: torch.Tensor, tokens: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
    """(H,) share of each head's attention, over the real queries, that falls on keys holding
    the largest token so far (the running-max task's answer). weights (B, H, T, T)."""
    T = tokens.shape[1]
    best = tokens.masked_fill(~key_mask, PAD).cummax(dim=1).values  # (B, T) running max
    target = (tokens[:, None, :] == best[:, :, None]) & key_mask[:, None, :]  # (B, Tq, Tk)
    target &= causal_mask(T, device=tokens.device)  # only keys in the past hold it
    on = (weights * target[:, None]).sum(dim=-1)  # (B, H, Tq)
    return (on * key_mask[:, None]).sum(dim=(0, 2)) / key_mask.sum()  # (H,)


def plot_weights(weights: torch.Tensor, tokens: torch.Tensor, *, head: int, example: int,
                 ax: "Axes | None" = None, title: str = "") -> "Figure":
    """Heatmap of one head's attention weights for one example: rows are queries, columns
    keys, each labelled with its token ('·' for padding). weights (B, H, T, T), tokens (B, T).
    """
    import matplotlib.pyplot as plt

    B, H, T, _ = weights.shape
    if not (0 <= head < H and 0 <= example < B):
        raise ValueError(f"Choose head 0..{H - 1} and example 0..{B - 1}, got head {head}, example {example}.")
    if ax is None:
        _, ax = plt.subplots(figsize=(4.6, 4))
    w = weights[example, head].detach().float().cpu()  # (T, T)
    image = ax.imshow(w.numpy(), vmin=0.0, vmax=1.0, cmap="viridis")
    labels = ["·" if int(tok) == PAD else str(int(tok)) for tok in tokens[example]]
    ax.set_xticks(range(T), labels)
    ax.set_yticks(range(T), labels)
    ax.set(xlabel="key (token it may look at)", ylabel="query (token looking)",
           title=title or f"example {example}, head {head}")
    ax.figure.colorbar(image, ax=ax, fraction=0.046, label="attention weight")
    return ax.figure
