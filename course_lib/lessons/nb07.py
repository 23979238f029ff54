"""Notebook 07 (attention from scratch): which SDPA kernel runs and what each one costs, the toy task's
data, the snippet tutorials teach, the exercise checks, and the words around each measurement, returned
as text for the cells to print.

The sweep over sequence lengths (each version's time and peak memory at each length, its plot, the
growth exponents, the cache step) is :mod:`course_lib.lessons.nb07_seqlen`, re-exported here. The attention
itself (masks, :func:`~course_lib.attention.attention`, :class:`~course_lib.attention.MultiHeadAttention`)
and how closely two correct attentions agree (:func:`~course_lib.attention.agreement`) are core:
:mod:`course_lib.attention`.
"""

from __future__ import annotations

import math
import re
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

from course_lib import bench, check, memory, oom, published, report, units, verdicts
from course_lib.attention import attention, causal_mask, padding_mask
from course_lib.bench import Timing
from course_lib.lessons import nb07_seqlen as seqlen
from course_lib.lessons.nb07_seqlen import Point, cache_step, rising, time_in_turns_or_alone
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
    if oom.is_oom(exc):
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
            oom.free()  # after the except block, which held the failed call's frames
    for name, timing in (time_in_turns_or_alone(forced, device, repeats) if forced else {}).items():
        rows[name].timing = timing
        rows[name].reason = "" if timing is not None else "out of memory"
    return list(rows.values())


def two_moments(before: bench.Ratio, here: bench.Ratio) -> str:
    """One sentence on one comparison (the same two steps) timed in turns at two moments of a
    run: `before` in section 5's sweep, `here` in section 6. Each ratio is paired, but only within its
    own moment (the machine's pace can move its two steps unevenly): two moments' ratios are read by the
    course's rule for two moments (:func:`verdicts.moments_words`), after their intervals."""
    ranges = f"section 5: {before.lo:.2f}–{before.hi:.2f}×, here: {here.lo:.2f}–{here.hi:.2f}×"
    if before.single or here.single:
        return f"one round at a moment: no interval to say whether the two moments agree ({ranges})"
    if before.lo <= here.hi and here.lo <= before.hi:
        return f"the two moments agree within their intervals ({ranges})"
    lo, hi = here.lo / before.hi, here.hi / before.lo  # here's ratio over section 5's, from their intervals
    return (f"the two moments' intervals do not overlap ({ranges}):\n  here over section 5, "
            f"{verdicts.moments_words(lo, hi)};\n  a paired ratio holds its own moment only (what moved it is not "
            "measured here): quote each with its section")


SAME_STEP = ("  both sections time the same step (inputs of one shape, forward + backward, causal), in turns, "
             "by the same code;\n  they differ only in what runs next to the timed step (one more untimed call here; "
             "a memory measurement first in section 5):\n  this run does not measure what changed its time")


def sections_text(at: Mapping[tuple[str, int], Point], mine: Mapping[str, Timing], names: Sequence[str],
                  t: int, default_kernel: str) -> str:
    """Section 6's one set of turns at length `t` (`mine`: kernel or "written out" -> Timing) beside section 5's
    (`at[(name, T)]`; `names`: written out, SDPA's math kernel, SDPA). SDPA against the written-out version was
    timed in turns at both moments: both ratios, whether they agree (:func:`two_moments`) and each step's time at
    both. SDPA against its math kernel is quoted from this section only (its ratio is printed above): the math
    kernel's time at both moments, and what of their difference is not measured (:data:`SAME_STEP`)."""
    def both(five: str, six: str) -> tuple[Timing | None, Timing | None]:
        p = at.get((five, t))
        return (p.timing if p else None), mine.get(six)

    lines = []
    (w5, w6), (s5, s6), (m5, m6) = both(names[0], "written out"), both(names[2], default_kernel), both(names[1], "MATH")
    if w5 and w6 and s5 and s6:
        then, now = bench.speedup(w5, s5), bench.speedup(w6, s6)
        lines += [f"\nSDPA vs written out, T={t}: section 5 {then.value:.2f}×, here ({default_kernel} vs written out) "
                  f"{now.value:.2f}×", f"  {two_moments(then, now)}", apart_line(w6, w5), apart_line(s6, s5)]
    if m5 and m6 and default_kernel != "MATH":
        lines += [f"\nSDPA vs its math kernel, T={t}: this section's ratio only ({default_kernel} vs MATH, above); "
                  "section 5 timed the math kernel in turns of its own", apart_line(m6, m5), SAME_STEP]
    return "\n".join(lines)


# what notebook 07 calls as nb07.*: the sweep over lengths, its plot and growth exponents, the largest cache
sweep, fwd_bwd, plot_sweep = seqlen.sweep, seqlen.fwd_bwd, seqlen.plot_sweep
growth_exponent, largest_cache = seqlen.growth_exponent, seqlen.largest_cache


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


# ---- what the cells print: the words around the measurements, returned as text

def toy_text(before: tuple, after: tuple, steps: int, chance: float, best_head: int) -> str:
    """The running-max layer untrained and after `steps` steps (`before`, `after`: held-out accuracy, each
    head's share of attention on the answer, weights), the share uniform attention would give, `chance`,
    and the head that looks most at the answer."""
    lines = [f"{name:<16} accuracy {acc:6.1%} on held-out positions | weight on the largest digit so far: "
             + ", ".join(f"head {h} {s:.0%}" for h, s in enumerate(share))
             for name, (acc, share, _) in (("untrained", before), (f"after {steps} steps", after))]
    return "\n".join(lines + [
        f"uniform attention over the visible keys would put {chance:.0%} there (early positions see few keys)",
        f"the head that looks most at the answer: head {best_head}, {after[1][best_head]:.0%} of its weight "
        f"(untrained: {before[1][best_head]:.0%})"])


def point_line(p: Point, batch: int, heads: int, dtype: torch.dtype, gpu_gib: float | None = None) -> str:
    """One point of the sweep as it is measured: its time ± spread and peak memory; or that it ran out of
    memory, with the size of one (`batch`, `heads`, T, T) matrix beside the GPU's `gpu_gib`; or was skipped."""
    if p.oom:
        room = f" ({gpu_gib:.1f} GiB on this GPU)" if gpu_gib else ""
        what = (f"out of memory: one ({batch}, {heads}, {p.length}, {p.length}) {str(dtype)[6:]} matrix is "
                f"{units.fmt_bytes(batch * heads * p.length**2 * dtype.itemsize)}{room}")
    elif p.skipped:
        what = "skipped: out of memory at a shorter length"
    else:
        what = (f"{units.fmt_time(p.timing.median_s):>9} ± {p.timing.spread:5.1%} | "
                f"peak {units.fmt_bytes(p.peak_bytes)}")
    return f"T={p.length:<6} {p.name:<18} {what}"


def sweep_tables(at: Mapping[tuple[str, int], Point], names: Sequence[str], lengths: Sequence[int],
                 lead: Mapping[int, bench.Ratio], one: Mapping[int, int]) -> str:
    """The sweep as two tables, a row per length, a column per version (`at[(name, T)]`; the first version
    written out, the last SDPA): times with SDPA's lead `lead[T]` (marked ? where the repeats do not tell it,
    and why, below; † where the two medians' ratio, unpaired, is 5 % or more from it, and that ratio),
    then peak memory with the written-out / SDPA ratio and `one[T]`, the bytes of one (B, H, T, T) matrix;
    last, the written-out version's peak at its longest length in such matrices."""
    def cell(p: Point, show: Callable[[Point], str]) -> str:
        return "skipped" if p.skipped else "out of memory" if p.oom else show(p)

    head = f"{'T':>6} | " + " | ".join(f"{n:>20}" for n in names)
    times = [head + " | SDPA vs written out"]
    mems = ["", "peak memory added by one call", head + " | written out / SDPA | one (B,H,T,T) matrix, computed"]
    for t in lengths:
        row, s = [at[(n, t)] for n in names], lead.get(t)
        d = s.decimals if s else 2
        ratio = (f"{s.value:.{d}f}× ({s.lo:.{d}f}–{s.hi:.{d}f})" + ("" if s.clear else " ?")
                 + (" †" if s.medians_apart else "") if s else "-")
        cells = [cell(p, lambda p: f"{units.fmt_time(p.timing.median_s)} {p.timing.spread_text}") for p in row]
        times.append(f"{t:>6} | " + " | ".join(f"{x:>20}" for x in cells) + f" | {ratio}")
        cells = [cell(p, lambda p: units.fmt_bytes(p.peak_bytes)) for p in row]
        mem_ratio = f"{row[0].peak_bytes / row[-1].peak_bytes:.1f}×" if row[0].timing and row[-1].timing else "-"
        mems.append(f"{t:>6} | " + " | ".join(f"{x:>20}" for x in cells) + f" | {mem_ratio:>18} | "
                    f"{units.fmt_bytes(one[t])}")
    apart = [f"{s.medians:.{s.decimals}f}× at T={t}" for t, s in lead.items() if s.medians_apart]
    if apart:  # as Ratio.statistic says it in a verdict's line
        times.append("†: the column gives the median of the paired turns' ratios; the two medians' ratio, unpaired, is "
                     + ", ".join(apart))
    unresolved = [f"T={t}: {s.doubt}" for t, s in lead.items() if not s.clear]
    if unresolved:
        times.append("?: these repeats do not tell SDPA from the written-out version at that length ("
                     + "; ".join(unresolved) + ")")
    ran = [at[(names[0], t)] for t in lengths if at[(names[0], t)].timing]
    if ran:
        p = max(ran, key=lambda p: p.length)
        mems.append(f"written out, T={p.length}: peak {units.fmt_bytes(p.peak_bytes)} = "
                    f"{p.peak_bytes / one[p.length]:.2f} × one (B, H, T, T) matrix")
    return "\n".join(times + mems)


def growth_words(p: float) -> str:
    """How a growth exponent p (value ∝ Tᵖ) reads: 'about linear', 'about quadratic'..."""
    if p < 0.7:
        return "less than linear: fixed costs dominate"
    if p < 1.3:
        return "about linear"
    if p < 1.8:
        return "between linear and quadratic"
    return "about quadratic" if p < 2.3 else "faster than quadratic"


def local_slopes(lengths: Sequence[int], values: Sequence[float]) -> list[float]:
    """The growth exponent between each pair of neighbouring `lengths`: log(v₂/v₁) / log(T₂/T₁)."""
    return [math.log(b / a) / math.log(tb / ta) for a, b, ta, tb in zip(values, values[1:], lengths, lengths[1:])]


def slopes_line(name: str, what: str, lengths: Sequence[int], values: Sequence[float], p_fit: float) -> str:
    """A version's growth with T: `p_fit` (fitted to all `lengths`), the slope between each pair of
    neighbouring lengths, and for time, where those slopes do not climb, a pointer to
    :func:`slopes_caveat` (printed once, below all the versions)."""
    local = local_slopes(lengths, values)
    line = (f"{name:<18} {what:<11} ∝ T^{p_fit:.2f} ({growth_words(p_fit)}) over T = {lengths[0]}..{lengths[-1]}; "
            f"between neighbours: {', '.join(f'{x:.2f}' for x in local)}")
    if what == "time" and not rising(local):  # fixed costs fading would make them climb
        line += " (not climbing steadily: below)"
    return line


def slopes_caveat(names: Sequence[str]) -> str:
    """Once, under the slope lines: why this run cannot say why the time slopes of the versions
    `names` do not climb steadily; '' when there are none."""
    if not names:
        return ""
    return (f"the time slopes marked above ({'; '.join(names)}) do not climb steadily, as fading fixed costs alone "
            "would make them: the lengths are timed one after another, not in turns, so changes of the machine's "
            "speed between lengths enter them, and so may cache effects; this run cannot tell which")


def cache_text(cache: tuple[str, int] | None, lead: Mapping[int, bench.Ratio], lengths: Sequence[int],
               sizes: Mapping[str, Mapping[int, int]]) -> str:
    """The largest cache (:func:`largest_cache`) and, for each of `sizes` (what: bytes at each length it
    ran), where it outgrows that cache and what SDPA's lead did across that point (:func:`cache_step`)."""
    if not cache:
        return "\nthe size of this device's largest cache could not be read: no cache line"
    steps = ["  " + cache_step(lead, [t for t in lengths if t in size], size, cache[1], what)
             for what, size in sizes.items()]
    return "\n".join([f"\nthe {cache[0]} cache holds {units.fmt_bytes(cache[1])}; SDPA vs written out at each "
                      "length, above:", *steps])


def compare_text(speed: bench.Ratio, t: int, written_bytes: int, sdpa_bytes: int) -> str:
    """SDPA against the written-out version at length `t`: the speed-up's verdict and the peaks' ratio."""
    r = written_bytes / sdpa_bytes
    return (f"\n{speed}\npeak memory at T={t}: written out {units.fmt_bytes(written_bytes)}, SDPA "
            f"{units.fmt_bytes(sdpa_bytes)}: "
            + (f"{r:.1f}× less with SDPA" if r >= 1 else f"{1 / r:.1f}× more with SDPA"))


def oom_text(points: Sequence[Point], names: Sequence[str], device_label: str, longest: int) -> str:
    """The first length at which each version ran out of memory, or that none did up to `longest`."""
    first = {n: min((p.length for p in points if p.name == n and p.oom), default=None) for n in names}
    return ("\n".join(f"{n} ran out of memory at T={t} on {device_label}" for n, t in first.items() if t)
            or f"no length ran out of memory on {device_label}, up to T={longest}")


def kernels_text(rows: Sequence[BackendRow], default_kernel: str) -> str:
    """Section 6's table, a row per kernel (and the written-out version) timed in one set of turns, each
    against the fastest kernel (or why it was not timed), then which kernel is fastest and the default."""
    ran = sorted((r for r in rows if r.timing and r.backend != "written out"), key=lambda r: r.timing.median_s)
    lines = [f"{r.backend:<20} | not timed: {r.reason}" if r.timing is None else str(r.timing) + (
        "" if r is ran[0] else f" | {bench.speedup(r.timing, ran[0].timing, f'{ran[0].backend} vs {r.backend}')}")
        for r in rows]
    if len(ran) > 1 and not bench.speedup(ran[1].timing, ran[0].timing).clear:
        return "\n".join(lines + [f"fastest kernel here: {ran[0].backend} and {ran[1].backend} cannot be told apart "
                                  f"by these repeats; the default is {default_kernel}"])
    return "\n".join(lines + [f"fastest kernel here: {ran[0].backend}; the default is {default_kernel}"])


def parts_text(parts: Sequence[bench.Ratio]) -> str:
    """The speed-up from the written-out version to the default kernel in its parts (one set of turns):
    to MATH, the same formula in C++, then, where the default is another kernel, from MATH to it."""
    steps = ["from plain PyTorch to the same formula in C++", "from the unfused formula to the kernel PyTorch picks"]
    return "\n" + "\n".join(f"{step}: {r}" for step, r in zip(steps, parts))


def apart_line(here: Timing, before: Timing) -> str:
    """One step's time in section 6 against section 5's, measured at two moments, not in turns."""
    t = units.fmt_time
    return (f"  {here.name}: here {t(here.median_s)} ({t(here.lo_s)}–{t(here.hi_s)}), section 5 {t(before.median_s)} "
            f"({t(before.lo_s)}–{t(before.hi_s)}): {here.median_s / before.median_s:.2f}× its time, timed apart")


_KERNEL_NOTE = re.compile(r"fwd\+bwd \((\d+), (\d+), (\d+), (\d+)\) (\w+), (causal|not causal)")


def flash_benchmark_flops(b: int, h: int, t: int, d: int, causal: bool) -> float:
    """FLOPs of one attention forward + backward as FlashAttention's benchmark counts them
    (benchmarks/benchmark_flash_attention.py: 4·B·T²·H·d for the forward, halved with a causal
    mask, and 3.5× that for forward + backward), so that a time converts to its chart's TFLOP/s."""
    return 3.5 * 4 * b * t * t * h * d / (2 if causal else 1)


def kernels_in_flash_units() -> list[str]:
    """The reference run's section-6 kernels as TFLOP/s in FlashAttention's count, one line each,
    with their shape, dtype and mask; [] when none is recorded."""
    _, ref = report.reference("07_attention")
    lines = []
    for key, row in ref.items():
        if row.get("unit") == "ms" and (m := _KERNEL_NOTE.search(row.get("note", ""))):
            b, h, t, d = map(int, m.groups()[:4])
            tflops = flash_benchmark_flops(b, h, t, d, m[6] == "causal") / (row["value"] * 1e-3) / 1e12
            lines.append(f"  {key}: {tflops:.0f} TFLOP/s  ({b}, {h}, {t}, {d}) {m[5]}, {m[6]}")
    return lines


def gpu_elsewhere(on_gpu: bool) -> str:
    """What a GPU does that this run cannot show: without one, the reference GPU run's rows and published
    figures (and why their memory factors differ from this course's); with one, the published figures."""
    flash = ["flashattention2_h100_fwd_bwd_tflops_hdim64", "flashattention_readme_memory_10x_at_2k_20x_at_4k"]
    if on_gpu:  # the learner's own kernels are timed above; what others measured, for comparison
        return "For comparison, " + published.elsewhere("07_attention", keys=flash)
    rows = ("written out:", "SDPA:", "SDPA, math kernel:",  # the GPU sweep: growth exponents, first length out of memory
            "written out, T=", "SDPA, T=", "SDPA vs written out", "peak memory,", "SDPA FLASH", "SDPA EFFICIENT",
            "SDPA CUDNN", "SDPA MATH", "MATH vs", "CUDNN_ATTENTION vs", "FLASH_ATTENTION vs")
    return ("No CUDA GPU here: the flash, memory-efficient and cuDNN GPU kernels cannot run, so this cell shows the "
            "reference GPU run from results/ when there is one.\n"
            + published.elsewhere("07_attention", rows)
            + ("\nThe same kernels in FlashAttention's unit (its benchmark's FLOP count, 3.5 × 4·B·H·T²·d for forward "
               "+ backward, halved with a causal mask), to set beside its chart below, which measured other lengths, "
               "without a causal mask, on an H100:\n" + "\n".join(flash_units) if (flash_units := kernels_in_flash_units()) else "")
            + "\n" + published.elsewhere("07_attention", keys=flash + ["karpathy_gpt2_124m_flash_attention_130ms_to_96ms"])
            + "\n(the memory factors are not the same quantity: this course's peak covers its own forward + backward "
            "at its batch, heads and dtype; FlashAttention's README measured its own settings)")
