"""The few matplotlib figures the notebooks share. Each returns the figure."""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
from matplotlib.axis import Axis
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

_PLAIN = FuncFormatter(lambda v, _: f"{v:g}")


def _plain_log_ticks(axis: Axis, lo: float, hi: float) -> None:
    """Label a log axis with plain numbers ('200', not '2×10²').

    Minor ticks get labels too when the axis spans less than a decade (all of them) or two
    decades (the 2s and 5s), so a narrow range still shows numbers.
    """
    span = hi / lo if lo > 0 else float("inf")
    keep = "123456789" if span < 10 else "25" if span < 100 else ""
    axis.set_major_formatter(_PLAIN)
    axis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}" if f"{v:.0e}"[0] in keep else ""))


def rate_vs_size(curves: Mapping[str, tuple[Sequence[float], Sequence[float]]], *,
                 peaks: Mapping[str, float] | None = None, xlabel: str = "matrix size n",
                 ylabel: str = "GFLOP/s", title: str = "") -> Figure:
    """Log-log lines of rate against size, one per label, with dashed measured peaks."""
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for label, (xs, ys) in curves.items():
        (line,) = ax.plot(xs, ys, marker="o", label=label)
        if peaks and label in peaks:
            ax.axhline(peaks[label], ls="--", color=line.get_color(), alpha=0.6,
                       label=f"{label} measured peak")
    ax.set(yscale="log", xlabel=xlabel, ylabel=ylabel, title=title)
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted({x for xs, _ in curves.values() for x in xs}))
    ax.xaxis.set_major_formatter(_PLAIN)
    ax.xaxis.set_minor_formatter(NullFormatter())
    ys = [y for _, yv in curves.values() for y in yv] + list((peaks or {}).values())
    if ys:
        _plain_log_ticks(ax.yaxis, min(ys), max(ys))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def bars(values: Mapping[str, float], *, ylabel: str, title: str = "",
         fmt: str = "{:.3g}") -> Figure:
    """Labelled bars (throughput, time, memory…), each annotated with its value."""
    fig, ax = plt.subplots(figsize=(max(4.0, 1.2 * len(values)), 3.5))
    rects = ax.bar(list(values), list(values.values()), color="tab:blue")
    ax.bar_label(rects, labels=[fmt.format(v) for v in values.values()], fontsize=8)
    ax.set(ylabel=ylabel, title=title)
    ax.tick_params(axis="x", labelrotation=20)
    fig.tight_layout()
    return fig


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
