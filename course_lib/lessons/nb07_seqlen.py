"""Attention's cost against sequence length, apart from notebook 07's lesson module so that it stays its
notebook's scaffolding (:mod:`course_lib.lessons.nb07` re-exports what its notebook calls): each version of
attention stepped forward and backward at each length, timed in turns with its peak memory; the plot; the
growth exponents; and whether SDPA's lead grows faster where the written-out version's T×T matrices outgrow
the largest cache:

    points = sweep({"written out": written_out, "SDPA": sdpa}, [256, 512, 1024], batch=4, heads=8,
                   head_dim=64, device="cpu")
    plot_sweep(points)
    growth_exponent([p.length for p in points[::2]], [p.timing.median_s for p in points[::2]])  # ≈ 2
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

import torch

from course_lib import bench, memory, oom, units
from course_lib.bench import Timing

if TYPE_CHECKING:
    from matplotlib.figure import Figure


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


# ---- each version timed, and its peak memory, at each length

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
    if not oom.is_oom(exc):
        raise exc


SWEEP_TURN_S = 0.02  # a step shorter than this runs several times per turn (bench.time_in_turns)


def time_in_turns_or_alone(steps: dict[str, Callable[[], None]], device: torch.device | str,
                           repeats: int) -> dict[str, Timing | None]:
    """Timings of the steps in turns; if that runs out of memory, each alone (None: OOM).

    A step shorter than SWEEP_TURN_S runs back to back within its turn: on the H100, SDPA at
    T=4096 (1.41 ms alone, many calls) took 2.09 ms timed as one call between synchronisations."""
    try:
        return {t.name: t for t in bench.time_in_turns(steps, device=device, warmup=1, repeats=repeats,
                                                       min_turn_s=SWEEP_TURN_S)}
    except Exception as exc:
        _reraise_unless_oom(exc)
    oom.free()
    out: dict[str, Timing | None] = {}
    for name, step in steps.items():
        try:
            out[name] = bench.time_fn(step, name=name, device=device, warmup=1, repeats=repeats)
        except Exception as exc:
            _reraise_unless_oom(exc)
            out[name] = None
        oom.free()
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
                oom.free()  # after the except block, which held the failed step's frames
        timings = time_in_turns_or_alone(steps, device, repeats) if steps else {}
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
        ran_out = [p.length for p in points if p.name == name and p.oom]
        label = name + (f" (out of memory at T={min(ran_out)})" if ran_out else "")
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
