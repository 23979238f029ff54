"""course_lib.plot: what each figure draws (bars, error bars, axes), not how it looks."""

import matplotlib

matplotlib.use("Agg")
import pytest  # noqa: E402

from course_lib import bench, plot  # noqa: E402


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
