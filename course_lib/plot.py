"""The few matplotlib figures the notebooks share. Each returns the figure."""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
from matplotlib.axis import Axis
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

from course_lib.bench import Timing

_PLAIN = FuncFormatter(lambda v, _: f"{v:g}")


def plain_log_ticks(axis: Axis, lo: float, hi: float) -> None:
    """Label a log axis with plain numbers ('200', not '2×10²').

    Minor ticks get labels too when the axis spans less than a decade (all of them) or two
    decades (the 2s and 5s), so a narrow range still shows numbers.
    """
    span = hi / lo if lo > 0 else float("inf")
    keep = "123456789" if span < 10 else "25" if span < 100 else ""
    axis.set_major_formatter(_PLAIN)
    axis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}" if f"{v:.0e}"[0] in keep else ""))


def rate_vs_size(curves: Mapping[str, tuple[Sequence[float], Sequence[float]]], *,
                 peaks: Mapping[str, float] | None = None,
                 errors: Mapping[str, Sequence[tuple[float, float]]] | None = None,
                 logy: bool = False, xlabel: str = "matrix size n",
                 ylabel: str = "GFLOP/s", title: str = "") -> Figure:
    """Lines of a value against size (x on a log₂ axis), one per label, with dashed
    measured peaks; ``errors[label]`` gives each point's (lo, hi) range, drawn as error
    bars. The y axis is linear unless `logy` (use it when the values span decades)."""
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for label, (xs, ys) in curves.items():
        err = (errors or {}).get(label)
        yerr = None if err is None else _yerr(ys, err)
        line = ax.errorbar(xs, ys, yerr=yerr, marker="o", capsize=3, label=label).lines[0]
        if peaks and label in peaks:
            ax.axhline(peaks[label], ls="--", color=line.get_color(), alpha=0.6,
                       label=f"{label} measured peak")
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted({x for xs, _ in curves.values() for x in xs}))
    ax.xaxis.set_major_formatter(_PLAIN)
    ax.xaxis.set_minor_formatter(NullFormatter())
    ys = [y for _, yv in curves.values() for y in yv] + list((peaks or {}).values())
    if logy:
        ax.set_yscale("log")
        if ys:
            plain_log_ticks(ax.yaxis, min(ys), max(ys))
    else:
        ax.set_ylim(bottom=0)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _yerr(values: Sequence[float], ranges: Sequence[tuple[float, float]]) -> list[list[float]]:
    """Matplotlib's asymmetric error bars (distances below, above) from (lo, hi) ranges."""
    if len(values) != len(ranges):
        raise ValueError(f"{len(values)} values but {len(ranges)} ranges: give one (lo, hi) per value.")
    return [[max(0.0, v - lo) for v, (lo, _) in zip(values, ranges)],
            [max(0.0, hi - v) for v, (_, hi) in zip(values, ranges)]]


def bars(values: Mapping[str, float], *, ylabel: str, title: str = "",
         fmt: str = "{:.3g}", errors: Mapping[str, tuple[float, float]] | None = None) -> Figure:
    """Labelled bars (throughput, time, memory…), each annotated with its value;
    ``errors[label] = (lo, hi)`` draws the range of that bar's repeats."""
    fig, ax = plt.subplots(figsize=(max(4.0, 1.2 * len(values)), 3.5))
    yerr = None
    if errors:
        yerr = _yerr(list(values.values()), [errors.get(k, (v, v)) for k, v in values.items()])
    rects = ax.bar(list(values), list(values.values()), yerr=yerr, capsize=4, color="tab:blue")
    ax.bar_label(rects, labels=[fmt.format(v) for v in values.values()], fontsize=8,
                 label_type="center", color="white")
    ax.set(ylabel=ylabel, title=title)
    ax.tick_params(axis="x", labelrotation=20)
    fig.tight_layout()
    return fig


def timing_bars(timings: Sequence[Timing], *, ylabel: str, title: str = "", scale: float = 1.0,
                fmt: str = "{:.3g}") -> Figure:
    """Bars of the rates of `timings` (divided by `scale`: 1e9 for GFLOP/s) with the range
    of their repeats (rate at the quartiles) as error bars."""
    if any(t.rate is None for t in timings):
        raise ValueError("timing_bars draws rates: every Timing needs its work (FLOPs, bytes, images).")
    return bars({t.name: t.rate / scale for t in timings}, ylabel=ylabel, title=title, fmt=fmt,
                errors={t.name: (t.rate_lo / scale, t.rate_hi / scale) for t in timings})


def curves(series: Mapping[str, Sequence[float]], *, xlabel: str = "step",
           ylabel: str = "loss", title: str = "", logy: bool = False) -> Figure:
    """One line per series against its index (loss or accuracy curves side by side)."""
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for label, ys in series.items():
        ax.plot(range(1, len(ys) + 1), list(ys), label=label)
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    if logy:
        ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
