"""course_lib.plot: what each figure draws (bars, error bars, axes), not how it looks."""

import itertools

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from course_lib import bench, plot  # noqa: E402
from course_lib.timeline import Timeline  # noqa: E402


def _t(name, median_s, q1_s, q3_s, work=1e9):
    return bench.Timing(name, "cpu", median_s, q3_s - q1_s, 5, work, "FLOP/s", q1_s, q3_s)


def test_timing_bars_draw_rates_with_the_quartile_range():
    fig = plot.timing_bars([_t("a", 0.010, 0.009, 0.011), _t("b", 0.020, 0.018, 0.025)],
                           ylabel="GFLOP/s", scale=1e9)
    ax = fig.axes[0]
    assert [round(p.get_height(), 6) for p in ax.patches] == [100.0, 50.0]
    (bar_errors,) = [c for c in ax.containers if c.__class__.__name__ == "ErrorbarContainer"]
    segments = bar_errors.lines[2][0].get_segments()  # one vertical segment per bar
    lows, highs = [s[0][1] for s in segments], [s[1][1] for s in segments]
    assert lows == pytest.approx([1e9 / 0.011 / 1e9, 1e9 / 0.025 / 1e9])
    assert highs == pytest.approx([1e9 / 0.009 / 1e9, 1e9 / 0.018 / 1e9])


def test_bars_spanning_a_wide_range_get_a_log_axis():
    close = plot.bars({"fp32": 2600.0, "bf16": 2500.0}, ylabel="images/s")
    wide = plot.bars({"fp32": 2600.0, "fp16": 49.0}, ylabel="images/s")  # 53×: the fp16 bar would vanish
    assert close.axes[0].get_yscale() == "linear" and wide.axes[0].get_yscale() == "log"
    assert "log scale" in wide.axes[0].get_ylabel() and "log" not in close.axes[0].get_ylabel()
    ratio = plot.bars({"a": 1.2}, ylabel="×", errors={"a": (1.1, 1.3)}, errors_are="each ratio's interval")
    assert ratio.axes[0].get_xlabel() == "error bars: each ratio's interval"
    plt.close("all")


def test_timing_bars_need_work():
    with pytest.raises(ValueError, match="needs its work"):
        plot.timing_bars([_t("a", 0.01, 0.009, 0.011, work=None)], ylabel="x")


def test_errors_must_match_the_points():
    with pytest.raises(ValueError, match="one \\(lo, hi\\) per value"):
        plot.rate_vs_size({"cpu": ([64, 128], [1.0, 2.0])}, errors={"cpu": [(0.5, 1.5)]})


def test_rate_vs_size_is_linear_from_zero_unless_asked():
    ax = plot.rate_vs_size({"cpu": ([64, 128], [70.0, 90.0])}).axes[0]
    assert ax.get_yscale() == "linear" and ax.get_ylim()[0] == 0
    assert plot.rate_vs_size({"cpu": ([64, 128], [1.0, 900.0])}, logy=True).axes[0].get_yscale() == "log"


def _timeline():
    MiB = 2**20  # 1 ms apart, from one second after the epoch; optimizer state never held
    return Timeline("cpu", [1_000_000, 1_001_000, 1_003_000],
                    {"parameter": [MiB, MiB, MiB], "optimizer state": [0, 0, 0],
                     "activation": [0, 2 * MiB, 0]}, "test")


def test_memory_timeline_stacks_the_categories_that_hold_memory():
    _, ax = plt.subplots()
    marks = [("forward", 1_000_000, 1_001_000), ("backward", 1_001_000, 1_002_000),
             ("optimizer", 1_002_000, 1_003_000)]
    assert plot.memory_timeline(ax, _timeline(), marks) is ax
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["activation", "parameter"]  # top down
    assert len(ax.collections) == 2
    top = ax.collections[-1].get_paths()[0].vertices
    assert top[:, 1].max() == 3.0 and top[:, 0].max() == 3.0  # MiB stacked, ms from the start
    assert len(ax.patches) == 3  # every window shaded
    assert [t.get_text() for t in ax.texts] == ["forward", "backward", "optimizer"]
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("time (ms)", "live memory (MiB)")
    plt.close("all")


def test_memory_timeline_shades_by_kind_and_keeps_names_apart():
    _, ax = plt.subplots(figsize=(6, 3))
    t = 1_000_000  # µs; two steps, the optimizer windows far too narrow for their names
    marks = [("forward 1", t, t + 900), ("backward 1", t + 900, t + 1900), ("optimizer 1", t + 1900, t + 1910),
             ("forward 2", t + 1910, t + 2800), ("backward 2", t + 2800, t + 2990), ("optimizer 2", t + 2990, t + 3000)]
    plot.memory_timeline(ax, _timeline(), marks)
    colours = [tuple(p.get_facecolor()) for p in ax.patches]
    assert colours[0] == colours[3] and colours[1] == colours[4] and colours[2] == colours[5]  # one per kind
    assert len(set(colours)) == 3
    boxes = [(t.get_position()[1], t.get_window_extent()) for t in ax.texts]
    assert "forward 1" in [t.get_text() for t in ax.texts] and len(boxes) <= len(marks)
    for (y1, b1), (y2, b2) in itertools.combinations(boxes, 2):
        assert y1 != y2 or b1.x1 <= b2.x0 or b2.x1 <= b1.x0  # names in one row do not overlap
    for text in ax.texts:  # each name centred on its window
        start, end = next((s, e) for n, s, e in marks if n == text.get_text())
        assert text.get_position()[0] == pytest.approx(((start + end) / 2 - t) / 1e3)
    assert max(y for y, _ in boxes) > min(y for y, _ in boxes)  # crowded names took a second row
    plt.close("all")


def test_memory_timeline_units():
    _, ax = plt.subplots()
    plot.memory_timeline(ax, _timeline(), unit="KiB")
    assert ax.collections[-1].get_paths()[0].vertices[:, 1].max() == 3072.0
    assert ax.get_ylabel() == "live memory (KiB)"
    with pytest.raises(ValueError, match="Unknown unit"):
        plot.memory_timeline(ax, _timeline(), unit="MB")
    plt.close("all")


def test_short_curves_get_markers_long_ones_do_not():
    fig = plot.curves({"accuracy": [0.42], "loss": [1.0 / (k + 1) for k in range(100)]})
    one, many = fig.axes[0].get_lines()
    assert one.get_marker() == "o" and list(one.get_xdata()) == [1]  # one epoch: one visible dot
    assert many.get_marker() in (None, "None", "", " ")
    plt.close("all")


def test_cohort_bars_per_attendee_with_spread_and_blanks():
    panels = {"matmul GFLOP/s": {"alice — GPU": (900.0, 880.0, 950.0), "bob — CPU": (100.0, 90.0, 110.0)},
              "copy GB/s": {"alice — GPU": (2000.0, 1900.0, 2100.0), "bob — CPU": None}}
    fig = plot.cohort(panels)
    left, right = fig.axes
    assert [t.get_text() for t in left.get_yticklabels()] == ["alice — GPU", "bob — CPU"]
    assert [round(p.get_width()) for p in left.patches] == [900, 100]
    assert [round(p.get_width()) for p in right.patches] == [2000]  # bob has no copy: no bar
    (errors,) = [c for c in left.containers if c.__class__.__name__ == "ErrorbarContainer"]
    segments = errors.lines[2][0].get_segments()  # one horizontal segment per bar
    assert [(s[0][0], s[1][0]) for s in segments] == [(880.0, 950.0), (90.0, 110.0)]
    assert "—" in [t.get_text().strip() for t in right.texts]
    assert left.get_ylim()[0] > left.get_ylim()[1]  # the first attendee on top
    assert (left.get_xlabel(), right.get_xlabel()) == ("matmul GFLOP/s", "copy GB/s")
    plt.close("all")


def test_cohort_panel_spanning_decades_is_logarithmic():
    fig = plot.cohort({"matmul GFLOP/s": {"gpu": (600_000.0, 590_000.0, 610_000.0), "cpu": (200.0, 190.0, 210.0)},
                       "copy GB/s": {"gpu": (3000.0, 2900.0, 3100.0), "cpu": (20.0, 19.0, 21.0)}})
    assert [ax.get_xscale() for ax in fig.axes] == ["log", "log"]
    fig = plot.cohort({"copy GB/s": {"a": (20.0, 19.0, 21.0), "b": (40.0, 39.0, 41.0)}})
    assert fig.axes[0].get_xscale() == "linear"
    plt.close("all")


def test_bar_labels_are_plain_numbers_and_names_do_not_overlap():
    fig = plot.bars({"SmallCNN workers=1, 1 training thread": 40_900.0, "b": 12.44, "c": 0.7312},
                    ylabel="img/s", errors={"b": (12.0, 13.0)})
    ax = fig.axes[0]
    shown = sorted((t.xy[0], t.get_text()) for t in ax.texts if t.get_text())
    assert [text for _, text in shown] == ["40,900", "12.4", "0.731"]  # one label per bar, left to right
    linear = plot.bars({"fp32": 9000.0, "fp16": 314.0, "bf16": 8000.0}, ylabel="img/s").axes[0]
    colors = {t.get_text(): t.get_color() for t in linear.texts if t.get_text()}
    assert colors == {"9,000": "white", "314": "black", "8,000": "white"}  # a short bar's label sits above it
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks[0] == "SmallCNN\nworkers=1, 1\ntraining thread" and ticks[1:] == ["b", "c"]
    assert all(t.get_rotation() == 0 for t in ax.get_xticklabels())
    assert "error bars" in ax.get_xlabel()
    assert plot.plain(-1234.6) == "-1,235" and plot.plain(512.0) == "512"
