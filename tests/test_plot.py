"""course_lib.plot: what each figure draws (bars, error bars, axes), not how it looks."""

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
    assert len(ax.patches) == 2  # the first and third windows shaded
    assert [t.get_text() for t in ax.texts] == ["forward", "backward", "optimizer"]
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("time (ms)", "live memory (MiB)")
    plt.close("all")


def test_memory_timeline_units():
    _, ax = plt.subplots()
    plot.memory_timeline(ax, _timeline(), unit="KiB")
    assert ax.collections[-1].get_paths()[0].vertices[:, 1].max() == 3072.0
    assert ax.get_ylabel() == "live memory (KiB)"
    with pytest.raises(ValueError, match="Unknown unit"):
        plot.memory_timeline(ax, _timeline(), unit="MB")
    plt.close("all")
