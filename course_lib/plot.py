"""The few matplotlib figures the notebooks share. Each returns the figure, except
:func:`memory_timeline`, which draws on the axes it is given and returns them."""

from __future__ import annotations

import textwrap
from typing import Mapping, Sequence

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

from course_lib.bench import Timing
from course_lib.timeline import Timeline

_PLAIN = FuncFormatter(lambda v, _: f"{v:g}")
SHORT = 20  # a series of at most this many points gets a marker on each (one point is no line)
LOG_SPAN = 30  # bars whose largest value is more than this many times the smallest: log axis


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
                 ylabel: str = "GFLOP/s", title: str = "", peak_label: str = "measured peak") -> Figure:
    """Lines of a value against size (x on a log₂ axis), one per label, with dashed
    measured peaks (named '<label> <peak_label>' in the legend); ``errors[label]`` gives each
    point's (lo, hi) range, drawn as error bars. The y axis is linear unless `logy` (use it when the values span decades)."""
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for label, (xs, ys) in curves.items():
        err = (errors or {}).get(label)
        yerr = None if err is None else _yerr(ys, err)
        line = ax.errorbar(xs, ys, yerr=yerr, marker="o", capsize=3, label=label).lines[0]
        if peaks and label in peaks:
            ax.axhline(peaks[label], ls="--", color=line.get_color(), alpha=0.6,
                       label=f"{label} {peak_label}")
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
        tops = ys + [hi for err in (errors or {}).values() for _, hi in err]
        ax.set_ylim(bottom=0, top=1.08 * max(tops) if tops else None)  # room above a peak line at the top
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


def plain(value: float) -> str:
    """A bar's label as a plain number: '40,900', '512', '12.4', '0.731' (never '4.09e+04')."""
    size = abs(value)
    if size >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if size >= 10 else f"{value:.3g}"


BAR_LABEL_CHARS = 16  # a bar's name is wrapped to lines of this many characters, not slanted over its neighbours


def bars(values: Mapping[str, float], *, ylabel: str, title: str = "",
         fmt: str | None = None, errors: Mapping[str, tuple[float, float]] | None = None,
         errors_are: str = "the middle half of the repeats") -> Figure:
    """Labelled bars (throughput, time, memory…), each annotated with its value (:func:`plain`,
    or `fmt`); ``errors[label] = (lo, hi)`` draws the range of that bar's repeats (or whatever
    `errors_are` names: a ratio's interval), and the x axis says what the error bars are. Names are wrapped, not rotated, so none overlaps. Values
    spanning more than :data:`LOG_SPAN` times get a log axis, labels above the bars."""
    wrapped = [textwrap.fill(k, BAR_LABEL_CHARS) for k in values]
    fig, ax = plt.subplots(figsize=(max(4.0, 1.5 * len(values)), 3.5 + 0.15 * max(w.count("\n") for w in wrapped)))
    yerr = None
    if errors:
        yerr = _yerr(list(values.values()), [errors.get(k, (v, v)) for k, v in values.items()])
    rects = ax.bar(range(len(values)), list(values.values()), yerr=yerr, capsize=4, color="tab:blue")
    ax.set_xticks(range(len(values)), wrapped, fontsize=8)
    ys = list(values.values())
    log = min(ys) > 0 and max(ys) / min(ys) > LOG_SPAN  # a short bar would vanish beside a tall one
    texts = [fmt.format(v) if fmt else plain(v) for v in ys]
    short = [log or v < 0.12 * max(ys) for v in ys]  # too short to hold its label: the label goes above it
    ax.bar_label(rects, labels=[t if s else "" for t, s in zip(texts, short)], fontsize=8,
                 label_type="edge", color="black", padding=2)
    ax.bar_label(rects, labels=["" if s else t for t, s in zip(texts, short)], fontsize=8,
                 label_type="center", color="white")
    if log:
        ax.set_yscale("log")
        ylabel += " (log scale)"
    ax.set(ylabel=ylabel, title=title)
    if errors:
        ax.set_xlabel(f"error bars: {errors_are}", fontsize=8)
    fig.tight_layout()
    return fig


def timing_bars(timings: Sequence[Timing], *, ylabel: str, title: str = "", scale: float = 1.0,
                fmt: str | None = None) -> Figure:
    """Bars of the rates of `timings` (divided by `scale`: 1e9 for GFLOP/s) with the range
    of their repeats (rate at the quartiles) as error bars."""
    if any(t.rate is None for t in timings):
        raise ValueError("timing_bars draws rates: every Timing needs its work (FLOPs, bytes, images).")
    return bars({t.name: t.rate / scale for t in timings}, ylabel=ylabel, title=title, fmt=fmt,
                errors={t.name: (t.rate_lo / scale, t.rate_hi / scale) for t in timings})


def curves(series: Mapping[str, Sequence[float]], *, xlabel: str = "step",
           ylabel: str = "loss", title: str = "", logy: bool = False) -> Figure:
    """One line per series against its index (loss or accuracy curves side by side); a short
    series (at most :data:`SHORT` points, e.g. one epoch's accuracy) gets a marker per point."""
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for label, ys in series.items():
        ax.plot(range(1, len(ys) + 1), list(ys), label=label, marker="o" if len(ys) <= SHORT else None)
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    if logy:
        ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def cohort(panels: Mapping[str, Mapping[str, tuple[float, float, float] | None]], *,
           title: str = "") -> Figure:
    """One panel per measurement (``panels[xlabel][row] = (value, lo, hi)``, None where a row
    has none): horizontal bars with the range of the repeats as error bars, the rows (one
    per attendee, e.g. 'alice — NVIDIA H100') in the same order in every panel, '—' where
    a row has no value. Each bar is annotated with its value (the median); a panel whose
    values span more than :data:`LOG_SPAN` times (a GPU beside CPUs) has a log axis."""
    rows = list(dict.fromkeys(r for p in panels.values() for r in p))
    fig, axes = plt.subplots(1, len(panels), sharey=True, squeeze=False,
                             figsize=(4.5 * len(panels) + 2.5, 1.2 + 0.45 * len(rows)))
    for ax, (xlabel, values) in zip(axes[0], panels.items()):
        _hbars(ax, rows, values)
        ax.set(xlabel=xlabel)
    axes[0][0].set_yticks(range(len(rows)), rows)
    axes[0][0].set_ylim(len(rows) - 0.5, -0.5)  # first row on top
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def _hbars(ax: Axes, rows: Sequence[str], values: Mapping[str, tuple[float, float, float] | None]) -> None:
    """Horizontal bars of `values` at the positions of `rows`; '—' for rows without a value."""
    shown = [(y, values[r]) for y, r in enumerate(rows) if values.get(r)]
    if shown:
        ys, bars_ = [y for y, _ in shown], [b for _, b in shown]
        xs = [v for v, _, _ in bars_]
        ax.barh(ys, xs, xerr=_yerr(xs, [(lo, hi) for _, lo, hi in bars_]), capsize=3, color="tab:blue")
        for y, (x, _, hi) in shown:
            label = f"{x:,.0f}" if x >= 100 else f"{x:.3g}"
            ax.text(max(x, hi), y, f"  {label}", va="center", fontsize=8)  # beyond the error bar
        if min(xs) > 0 and max(xs) / min(xs) > LOG_SPAN:  # GPUs and CPUs side by side
            ax.set_xscale("log")
            plain_log_ticks(ax.xaxis, min(xs), max(xs))
    for y, r in enumerate(rows):
        if not values.get(r):
            ax.text(0.01, y, "—", va="center", transform=ax.get_yaxis_transform())
    ax.margins(x=0.15)  # room for the labels beyond the longest bar
    ax.grid(True, axis="x", alpha=0.3)


_UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}


def memory_timeline(ax: Axes, tl: Timeline, marks: Sequence[tuple[str, float, float]] = (),
                    unit: str = "MiB") -> Axes:
    """Stacked areas of `tl`'s categories (those ever non-zero) against ms since its first
    point, each level held until the next event. ``marks`` are (name, start, end) windows
    on the timeline's clock (µs since the Unix epoch), each shaded in the light colour of
    its kind, the name less a trailing step number ('forward 2' is a 'forward': one colour
    for every step's forward), and named at the top above its centre. A name that would
    overlap one already placed goes a row lower (three rows at most); one that fits in no
    row is left out, its window still shaded. The legend sits right of the axes."""
    if unit not in _UNITS:
        raise ValueError(f"Unknown unit {unit!r}; choose one of {list(_UNITS)}.")
    pale = ("#e3ebf6", "#fbe9d7", "#e2f0dc", "#eee3f4", "#f5f0d5", "#e6e6e6")  # one per kind of window
    rows, row_step, pad_px = 3, 0.065, 4  # rows of names, their spacing (axes fraction), gap between names
    t0 = tl.times_us[0]
    xs = [(t - t0) / 1e3 for t in tl.times_us]
    base = [0.0] * len(xs)
    for name, sizes in tl.by_category.items():
        if any(sizes):
            top = [b + n / _UNITS[unit] for b, n in zip(base, sizes)]
            ax.fill_between(xs, base, top, step="post", label=name, linewidth=0)
            base = top
    kinds: dict[str, str] = {}  # kind of window -> its colour, in order of first appearance
    for name, start, end in marks:
        colour = kinds.setdefault(name.rstrip("0123456789 ") or name, pale[len(kinds) % len(pale)])
        ax.axvspan((start - t0) / 1e3, (end - t0) / 1e3, color=colour, zorder=0, linewidth=0)
    ax.autoscale_view()  # the x range is final before the names are measured against it
    placed: list[list[tuple[float, float]]] = [[] for _ in range(rows)]  # names' pixel extents, per row
    used = 0  # rows holding a name
    for name, start, end in sorted(marks, key=lambda m: m[1]):
        label = ax.text(((start + end) / 2 - t0) / 1e3, 0.98, name, transform=ax.get_xaxis_transform(),
                        ha="center", va="top", fontsize=8)
        box = label.get_window_extent()
        row = next((r for r in range(rows)
                    if all(box.x1 + pad_px < x0 or x1 + pad_px < box.x0 for x0, x1 in placed[r])), None)
        if row is None:
            label.remove()  # too narrow a window among its neighbours: its shade still shows it
            continue
        label.set_y(0.98 - row_step * row)
        placed[row].append((box.x0, box.x1))
        used = max(used, row + 1)
    ax.set(xlabel="time (ms)", ylabel=f"live memory ({unit})")
    room = 0.95 - row_step * used if used else 0.95  # the axes fraction below the lowest row of names
    ax.set_ylim(0, (max(base, default=0.0) or 1.0) / room)
    handles, labels = ax.get_legend_handles_labels()  # listed top down, as stacked
    ax.legend(handles[::-1], labels[::-1], fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    return ax


_KIND_COLOURS = {"matmul": "tab:blue", "attention": "tab:purple", "element-wise": "tab:orange",
                 "reduction & other": "tab:green", "copy": "tab:gray", "dispatch & views": "tab:olive"}


def roofline(ax: Axes, ops: Sequence, peak_flops: float, roofs: Mapping[str, float],
             title: str = "", labels: int = 5, far: float = 0.01) -> Axes:
    """The roofline on log-log axes: FLOP/s against arithmetic intensity (FLOP/B).

    `roofs` maps a name to a measured bandwidth (B/s), each drawn as min(peak, I·W); `ops`
    are :class:`course_lib.roofline.OpTime`, those with FLOPs, bytes and time placed, one dot
    each at (intensity, achieved FLOP/s), coloured by kind, its area proportional to its share
    of all the ops' time (copies included: they have no FLOPs and are not placed). The
    `labels` op names that took the most time are written beside their costliest point (short
    names: "sdpa bwd", "mm"), and so is every op below `far` × the lowest roof at its intensity
    (0.01: two decades), however little time it took. A label counts the unnamed dots of its kind
    within half a decade of it on both axes: "mm + 7 more matmul ops"."""
    placed = [o for o in ops if o.flops > 0 and o.seconds > 0 and o.bytes > 0]
    if not placed:
        raise ValueError("No op to place: each needs FLOPs, bytes and a measured time.")
    xs = [o.intensity for o in placed]
    lo, hi = min(xs + [peak_flops / max(roofs.values())]) / 4, max(xs + [peak_flops / min(roofs.values())]) * 4
    grid = [lo * (hi / lo) ** (k / 200) for k in range(201)]
    for (name, bw), style in zip(roofs.items(), ("-", "--", ":", "-.")):
        ax.plot(grid, [min(peak_flops, x * bw) for x in grid], style, color="black", lw=1.2,
                label=f"{name}: {bw / 1e9:,.3g} GB/s, peak {peak_flops / 1e9:,.4g} GFLOP/s")
    total = sum(o.seconds for o in ops if o.seconds > 0)
    for kind, colour in _KIND_COLOURS.items():
        mine = [o for o in placed if o.kind == kind]
        if mine:  # area ∝ share of the time: 1000 pt² for all of it, a dot at least
            ax.scatter([o.intensity for o in mine], [o.rate for o in mine], c=colour, alpha=0.7,
                       s=[max(2.0, 1000 * o.seconds / total) for o in mine], label=kind, edgecolors="none")
    named: dict = {}  # the costliest op of each short name, the costliest names first
    for o in sorted(placed, key=lambda o: -o.seconds):
        named.setdefault(o.short, o)
    marked = list(named.values())[:labels]
    low = min(roofs.values())  # and every op `far` or more below the lowest roof, however small its share
    taken = set(map(id, marked))
    marked += [o for o in placed if id(o) not in taken and o.rate < far * min(peak_flops, o.intensity * low)]
    taken = set(map(id, marked))
    near = lambda a, b: all(max(u / v, v / u) < 10 ** 0.5 for u, v in ((a.intensity, b.intensity), (a.rate, b.rate)))
    for k, o in enumerate(marked):  # above and below in turn: neighbours' labels apart
        cluster = [p for p in placed if id(p) not in taken and p.kind == o.kind and near(p, o)]
        taken.update(map(id, cluster))  # unnamed dots of its kind within half a decade: counted in its label
        text = o.short + (f" + {len(cluster)} more {o.kind} op{'s' if len(cluster) > 1 else ''}" if cluster else "")
        ax.annotate(text, (o.intensity, o.rate), xytext=(6, 4 if k % 2 == 0 else -10),
                    textcoords="offset points", fontsize=7)
    ax.set(xscale="log", yscale="log", xlabel="arithmetic intensity (FLOP / byte)",
           ylabel="achieved FLOP/s", title=title)
    ax.grid(True, which="both", alpha=0.25)
    legend = ax.legend(fontsize=7, loc="lower right", title="marker area ∝ share of op time", title_fontsize=7)
    for handle in legend.legend_handles:
        if hasattr(handle, "set_sizes"):  # the kinds' markers (the roofs are lines)
            handle.set_sizes([25.0])  # the same size for every kind, whatever its first op's share
    return ax


def breakdown(ax: Axes, rows: Mapping[str, Mapping[str, float]], unit: float = 1e-3,
              unit_name: str = "ms") -> Axes:
    """Horizontal stacked bars: one per variant (`rows` name -> {category: seconds}),
    each split by category, in `unit_name`."""
    names = list(rows)
    cats = list(dict.fromkeys(c for r in rows.values() for c in r))
    left = [0.0] * len(names)
    for cat in cats:
        widths = [rows[n].get(cat, 0.0) / unit for n in names]
        ax.barh(names, widths, left=left, label=cat)
        left = [a + b for a, b in zip(left, widths)]
    ax.invert_yaxis()
    ax.set(xlabel=f"time per step ({unit_name})")
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return ax
