"""course_lib.bench: behaviour only (what is measured, how it is reported), never speed."""

import re
import time

import pytest
import torch

from course_lib import bench
from course_lib.device import cpu_name

FAST = 0.01  # seconds per measurement: enough for behaviour, not for benchmarking


def _timing(name="t", device="cpu (2 threads)", median_s=0.5, work=None, unit="", iqr_s=0.1,
            runs=7):
    return bench.Timing(name, device, median_s, iqr_s, runs, work, unit)


def test_timing_fields_and_rate():
    t = _timing(median_s=0.5, work=10.0, unit="FLOP/s")
    assert (t.name, t.device, t.median_s, t.iqr_s, t.runs) == ("t", "cpu (2 threads)", 0.5, 0.1, 7)
    assert t.rate == pytest.approx(20.0)  # work / median
    assert _timing().rate is None


def test_timing_line_has_units_and_device():
    line = str(_timing(name="matmul", median_s=0.0413, work=4.13e12, unit="FLOP/s"))
    assert line.startswith("matmul") and "41.3 ms" in line
    assert "100.0 TFLOP/s" in line and line.endswith("cpu (2 threads)")
    assert "FLOP/s" not in str(_timing(median_s=0.0413))
    assert "± 121%" in line and "7 runs" in line  # half the interquartile range / median
    single = str(_timing(median_s=0.0413, iqr_s=0.0, runs=1))
    assert "(one run)" in single and "±" not in single  # one run has no spread to show


def test_a_lopsided_spread_shows_its_quartiles_and_a_tiny_one_a_decimal():
    lopsided = bench.timing_of([0.261, 0.30, 0.304, 0.304, 0.305, 0.2], name="step", device="cpu")
    q1, q3 = lopsided.lo_s * 1e3, lopsided.hi_s * 1e3  # in ms, the median's unit
    assert lopsided.spread_text == f"({q1:.3g}–{q3:.3g})" and "±" not in str(lopsided)
    tight = bench.timing_of([0.0100, 0.0101, 0.0102, 0.0099, 0.01005], name="mm", device="cpu")
    assert tight.spread_text == f"± {tight.spread:.1%}" and tight.spread < 0.01
    even = bench.timing_of([0.010, 0.011, 0.012, 0.009, 0.0105], name="mm", device="cpu")
    assert even.spread_text == f"± {even.spread:.0%}"
    # quartiles 5.3 below and 7.3 above the median (1.38 times): '± 6%' would hide which side lies farther
    uneven = bench.Timing("step", "cpu", 0.1008, 0.0126, 9, q1_s=0.0955, q3_s=0.1081)
    assert uneven.spread_text == "(95.5–108)"
    nearly = bench.Timing("step", "cpu", 0.1000, 0.0110, 9, q1_s=0.0950, q3_s=0.1060)  # 5 and 6: 1.2 times
    assert nearly.spread_text == "± 5%"  # half of 11 %, rounded


def test_time_fn_warms_up_then_measures():
    calls = []
    t = bench.time_fn(lambda: calls.append(1), name="append", device="cpu", work=3.0,
                      unit="things/s", warmup=4, min_run_s=FAST)
    assert len(calls) >= 4 + t.runs  # the warm-up calls, then at least one per measured block
    assert t.name == "append" and t.device.startswith("cpu") and t.unit == "things/s"
    assert t.median_s > 0 and t.iqr_s >= 0 and t.runs >= 1
    assert t.rate == pytest.approx(3.0 / t.median_s)


def test_time_without_sync_calls_once_more_than_repeats():
    calls = []
    seconds = bench.time_without_sync(lambda: calls.append(1), repeats=5)
    assert len(calls) == 6 and seconds > 0


def test_matmul_flops():
    assert bench.matmul_flops(1) == 2 and bench.matmul_flops(4096) == 2 * 4096**3


def test_time_matmul_reports_flops():
    t = bench.time_matmul(16, "cpu", min_run_s=FAST)
    assert t.name == "matmul 16×16 float32" and t.work == 2 * 16**3 and t.unit == "FLOP/s"
    assert t.device.startswith("cpu") and t.rate > 0
    assert bench.time_matmul(8, "cpu", torch.bfloat16, FAST).name == "matmul 8×8 bfloat16"


def _fake_time_matmul(rates):
    """A stand-in for time_matmul whose rate for size n is rates[n], recording its calls."""
    seen = []

    def fake(n, device, dtype=torch.float32, min_run_s=0.2):
        seen.append((n, min_run_s))
        return _timing(name=f"matmul {n}×{n}", median_s=bench.matmul_flops(n) / rates[n],
                       work=bench.matmul_flops(n), unit="FLOP/s")
    return fake, seen


def test_peak_matmul_returns_the_best_measured_size(monkeypatch):
    fake, seen = _fake_time_matmul({64: 5e9, 128: 9e9, 256: 7e9})
    monkeypatch.setattr(bench, "time_matmul", fake)
    peak = bench.peak_matmul("cpu", sizes=[64, 128, 256], min_run_s=0.03)
    assert seen == [(64, 0.03), (128, 0.03), (256, 0.03)]
    assert peak.name == "peak: matmul 128×128" and peak.rate == pytest.approx(9e9)


def test_peak_matmul_needs_a_size():
    with pytest.raises(ValueError, match="at least one matrix size"):
        bench.peak_matmul("cpu", sizes=[])


def test_peak_matmul_really_measures():
    peak = bench.peak_matmul("cpu", sizes=(8, 16), min_run_s=FAST)
    assert peak.name in ("peak: matmul 8×8 float32", "peak: matmul 16×16 float32")
    assert peak.rate > 0


def test_fmt_vs_peak_names_fraction_and_device():
    t = _timing(name="matmul 512×512 float32", median_s=1.0, work=98.1e9, unit="FLOP/s")
    peak = _timing(name="peak: matmul 1024×1024 float32", median_s=1.0, work=103e9, unit="FLOP/s")
    line = bench.fmt_vs_peak(t, peak)
    assert line == (f"matmul 512×512 float32 | 98.1 GFLOP/s | 95% of 103.0 GFLOP/s measured peak"
                    f" | cpu (2 threads) {cpu_name()}")
    gpu = _timing(name="matmul 8192×8192 float32", device="NVIDIA H100 80GB HBM3", median_s=1.0,
                  work=51e12, unit="FLOP/s")
    assert bench.fmt_vs_peak(gpu, gpu).endswith("| 100% of 51.0 TFLOP/s measured peak | NVIDIA H100 80GB HBM3")


def test_fmt_vs_peak_refuses_unlike_timings():
    flops = _timing(work=1e9, unit="FLOP/s")
    with pytest.raises(ValueError, match="same unit"):
        bench.fmt_vs_peak(flops, _timing(work=1e9, unit="B/s"))
    with pytest.raises(ValueError, match="same unit"):
        bench.fmt_vs_peak(_timing(), flops)


@pytest.mark.gpu
def test_cuda_timings():
    t = bench.time_matmul(256, "cuda", min_run_s=FAST)
    assert t.device == torch.cuda.get_device_name(0) and t.rate > 0


def test_time_fn_repeats_times_exactly_that_many_calls():
    calls = []
    t = bench.time_fn(lambda: calls.append(1), name="step", device="cpu", warmup=3, repeats=6)
    assert len(calls) == 3 + 6 and t.runs == 6
    assert t.lo_s <= t.median_s <= t.hi_s and t.iqr_s == pytest.approx(t.hi_s - t.lo_s)
    with pytest.raises(ValueError, match="positive number of calls"):
        bench.time_fn(lambda: None, name="x", device="cpu", repeats=0)


def test_time_fn_blocks_give_several_runs():
    t = bench.time_fn(lambda: sum(range(100)), name="sum", device="cpu", min_run_s=FAST)
    assert 3 <= t.runs <= 10 and t.q1_s <= t.median_s <= t.q3_s


def test_speedup_range_comes_from_the_quartiles():
    base = bench.Timing("fp32", "cpu", 0.10, 0.02, 5, q1_s=0.09, q3_s=0.11)
    new = bench.Timing("bf16", "cpu", 0.025, 0.005, 5, q1_s=0.0225, q3_s=0.0275)
    r = bench.speedup(base, new)
    assert r.name == "bf16 vs fp32" and r.value == pytest.approx(4.0)
    assert (r.lo, r.hi) == (pytest.approx(0.09 / 0.0275), pytest.approx(0.11 / 0.0225))
    assert not r.within_noise and "4.00× faster, far beyond the spread" in str(r)  # 3.27 at least: past 2.5x apart
    slower = bench.speedup(new, base)
    assert slower.value == pytest.approx(0.25) and "| 4.00× slower (3.27–4.89×), far beyond the spread" in str(slower)


def test_speedup_inside_the_spread_is_called_noise():
    a = bench.Timing("a", "cpu", 0.100, 0.02, 5, q1_s=0.09, q3_s=0.11)
    b = bench.Timing("b", "cpu", 0.097, 0.02, 5, q1_s=0.088, q3_s=0.108)
    r = bench.speedup(a, b)
    assert r.value > 1 and r.within_noise and "inconclusive: timed at two moments: within their spreads" in str(r)  # 0.83–1.25, apart
    one = bench.speedup(_timing(iqr_s=0.0, runs=1), _timing(median_s=0.25, iqr_s=0.0, runs=1))
    assert "no spread to judge it by" in str(one)


def test_ratio_of_needs_its_value_inside_its_range():
    r = bench.ratio_of("memory", 0.5, 0.5, 0.5, more="more", less="less")
    assert r.value == 0.5 and not r.within_noise
    with pytest.raises(ValueError, match="must contain its value"):
        bench.ratio_of("memory", 2.0, 0.5, 1.5)


def _rated(n, rate, spread=0.02):
    """A matmul timing of size n at `rate` FLOP/s whose quartiles are ±`spread` of the median."""
    median = bench.matmul_flops(n) / rate
    return bench.Timing(f"matmul {n}×{n} float32", "cpu (2 threads)", median, 2 * spread * median,
                        5, bench.matmul_flops(n), "FLOP/s", median * (1 - spread), median * (1 + spread))


def test_rate_curve_times_each_size_in_order(monkeypatch):
    fake, seen = _fake_time_matmul({64: 5e9, 128: 9e9})
    monkeypatch.setattr(bench, "time_matmul", fake)
    curve = bench.rate_curve([128, 64], "cpu", min_run_s=0.03)
    assert seen == [(128, 0.03), (64, 0.03)] and [t.name for t in curve] == ["matmul 128×128", "matmul 64×64"]
    with pytest.raises(ValueError, match="at least one matrix size"):
        bench.rate_curve([], "cpu")


def test_best_rate_is_the_highest_median_rate():
    curve = [_rated(64, 5e9), _rated(128, 9e9), _rated(256, 8.9e9)]
    assert bench.best_rate(curve) is curve[1]
    with pytest.raises(ValueError, match="have a rate"):
        bench.best_rate([_timing()])


def test_rate_ratio_compares_rates_of_different_work():
    small, big = _rated(64, 2e9), _rated(512, 6e9)
    r = bench.rate_ratio(big, small, "n=512 vs n=64")
    assert r.value == pytest.approx(3.0) and r.lo == pytest.approx(3.0 * 0.98 / 1.02)
    assert r.hi == pytest.approx(3.0 * 1.02 / 0.98) and "3.00× higher, far beyond the spread" in str(r)
    noisy = bench.rate_ratio(_rated(512, 6.1e9, spread=0.1), _rated(1024, 6e9, spread=0.1))
    assert noisy.within_noise and "inconclusive: timed at two moments: within their spreads" in str(noisy)
    with pytest.raises(ValueError, match="same unit"):
        bench.rate_ratio(big, _timing(work=1.0, unit="B/s"))


def test_first_reaching_takes_the_first_size_within_the_fraction():
    curve = [_rated(64, 5e9), _rated(128, 8.9e9), _rated(256, 10e9), _rated(512, 9.5e9)]
    assert bench.first_reaching(curve, curve[2], 0.9) is curve[2]  # 8.9 < 9.0
    assert bench.first_reaching(curve, curve[2], 0.85) is curve[1]
    assert bench.first_reaching(curve[:2], _rated(1024, 100e9), 0.9) is None
    with pytest.raises(ValueError, match="fraction"):
        bench.first_reaching(curve, curve[2], 1.5)


def test_curve_verdicts_follow_the_numbers():
    rising = [_rated(64, 2e9), _rated(128, 5e9), _rated(256, 9.5e9), _rated(512, 10e9)]
    lines = bench.curve_verdicts(rising, [64, 128, 256, 512])
    assert lines[0].startswith("fastest point of this curve: n=512, 10.0 GFLOP/s")
    assert lines[1] == "smallest n at >= 90% of the fastest point: n=256 (95.0%)"
    assert lines[2].startswith("rate at n=512 vs n=64: 5.00×") and "higher, far beyond" in lines[2]
    assert len(lines) == 3  # the peak is the last size: nothing after it to compare
    # a flat curve: the smallest size is already the peak, a later drop inside the noise
    flat = [_rated(64, 10e9, 0.1), _rated(128, 9.8e9, 0.1)]
    lines = bench.curve_verdicts(flat, [64, 128])
    assert "n=64 (100.0%)" in lines[1] and "the smallest size, n=64, is the peak" in lines[2]
    assert lines[3].startswith("rate at n=128 vs the fastest point (n=64): 0.98×") and "within their spreads" in lines[3]
    falling = [_rated(64, 2e9), _rated(512, 10e9), _rated(2048, 3e9)]
    assert "lower (3.20–3.47×), far beyond the spread" in bench.curve_verdicts(falling, [64, 512, 2048])[-1]
    with pytest.raises(ValueError, match="one size per timing"):
        bench.curve_verdicts(falling, [64])


def test_time_fn_measures_with_torch_s_thread_count():
    """torch.utils.benchmark.Timer runs on 1 thread unless told otherwise: a CPU rate
    labelled 'cpu (2 threads)' must come from 2 threads."""
    seen, before = [], torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        bench.time_fn(lambda: seen.append(torch.get_num_threads()), name="threads", device="cpu",
                      warmup=0, min_run_s=FAST)
    finally:
        torch.set_num_threads(before)
    assert seen and set(seen) == {2}


def test_time_in_rounds_alternates_the_functions():
    import itertools

    calls = []
    fns = {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}
    rows = bench.time_in_rounds(fns, device="cpu", work={"a": 10.0, "b": 20.0}, unit="FLOP/s",
                                min_run_s=0.003, rounds=4)
    runs = "".join(k for k, _ in itertools.groupby(calls))  # a block of a's, then of b's, ...
    assert runs == "ab" + "ab" + "a" + "b" + "a"  # warm-up and sizing; rounds ab, ba, ab, ba (blocks merge)
    assert [r.name for r in rows] == ["a", "b"] and [r.work for r in rows] == [10.0, 20.0]
    assert all(r.runs == 4 and r.unit == "FLOP/s" and r.q1_s <= r.median_s <= r.q3_s for r in rows)


def test_a_call_that_fills_a_block_alone_is_not_warmed_up_again_each_round():
    import time

    calls = {"long": 0, "short": 0}

    def long():
        calls["long"] += 1
        time.sleep(0.02)  # longer than a block (0.01 s): one call per block, no Timer warm-up

    fns = {"long": long, "short": lambda: calls.__setitem__("short", calls["short"] + 1)}
    times = bench.turns(fns, rounds=3, block_s=0.01, warmup=2, device="cpu")
    # 2 warm-up calls, 1 timed single call after timeit()'s own 2 warm-ups, then 1 call per round
    assert calls["long"] == 2 + 3 + 3 and all(t >= 0.02 for t in times["long"])
    assert calls["short"] > 2 + 9 + 3 * 3  # short calls: sized from 3 singles, Timer warm-ups per block


def test_time_in_rounds_refuses_missing_work_or_rounds():
    with pytest.raises(ValueError):
        bench.time_in_rounds({"a": lambda: None}, device="cpu", work={"b": 1.0})
    with pytest.raises(ValueError):
        bench.time_in_rounds({"a": lambda: None}, device="cpu", rounds=0)


def test_rate_curve_in_rounds_times_real_matmuls():
    curve = bench.rate_curve([32, 16], "cpu", min_run_s=0.02, rounds=3)
    assert [t.name for t in curve] == ["matmul 32×32 float32", "matmul 16×16 float32"]
    assert [t.work for t in curve] == [bench.matmul_flops(32), bench.matmul_flops(16)]
    assert all(t.runs == 3 and t.q1_s <= t.median_s <= t.q3_s for t in curve)


def test_time_in_turns_runs_the_settings_in_rounds():
    order = []
    fns = {name: (lambda n=name: order.append(n)) for name in ("a", "b", "c")}
    rows = bench.time_in_turns(fns, device="cpu", work=4, unit="img/s", warmup=1, repeats=3)
    assert order == ["a", "b", "c"] + ["a", "b", "c", "b", "c", "a", "c", "a", "b"]  # warm-ups, then rounds,
    # each starting one place further along: every setting runs first once, and after each other one
    assert [r.name for r in rows] == ["a", "b", "c"]
    for r in rows:
        assert r.runs == 3 and r.lo_s <= r.median_s <= r.hi_s and r.rate == 4 / r.median_s
    with pytest.raises(ValueError, match="repeats"):
        bench.time_in_turns(fns, device="cpu", repeats=0)


def test_time_in_turns_spreads_a_slow_spell_over_every_setting():
    """A slow spell lasting one round slows one call of each setting, not all of one setting."""
    clock = {"calls": 0}

    def step():
        clock["calls"] += 1
        time.sleep(0.03 if 3 <= clock["calls"] <= 4 else 0.002)  # round 2 of 3 is slow

    rows = bench.time_in_turns({"x": step, "y": step}, device="cpu", warmup=0, repeats=3)
    assert all(r.median_s < 0.02 for r in rows)  # the median of each ignores the slow round


def test_time_in_turns_runs_a_short_call_several_times_per_turn():
    counts = {"short": 0, "long": 0}

    def short():
        counts["short"] += 1
        time.sleep(0.002)

    def long():
        counts["long"] += 1
        time.sleep(0.03)

    rows = bench.time_in_turns({"short": short, "long": long}, device="cpu", warmup=1, repeats=3,
                               min_turn_s=0.02)
    assert counts["long"] == 1 + 3  # longer than a turn: one call per turn, as without min_turn_s
    assert counts["short"] >= 1 + 3 * 2  # 0.02 s / its timed warm-up call (2 ms, up to 10 ms on a busy machine)
    by = {r.name: r for r in rows}
    assert 0.002 <= by["short"].median_s < 0.01 and by["long"].median_s >= 0.03  # per call, not per turn
    with pytest.raises(ValueError, match="min_turn_s"):
        bench.time_in_turns({"short": short}, device="cpu", min_turn_s=-1)


def test_ratio_phrase_says_slower_with_the_inverse():
    assert bench.Ratio("a vs b", 1.25, 1.2, 1.3).phrase == "1.25× faster"
    assert bench.Ratio("a vs b", 0.8, 0.7, 0.9).phrase == "1.25× slower"
    assert bench.ratio_of("x", 2.0, 1.5, 2.5).phrase == "2.00× higher"
    # the inverse of the ratio as printed: 0.8297 prints 0.83, so '1.20× slower' (not 1/0.8297 = 1.205, which would need
    # a third decimal on both to agree)
    slower = bench.Ratio("a vs b", 0.8297, 0.797, 0.884)
    assert slower.numbers == "0.83× (0.80–0.88)" and slower.phrase == "1.20× slower"


def test_a_ratio_far_below_one_keeps_its_range_and_says_the_slowdown_with_its_range():
    slow = bench.Ratio("fp16 vs fp32", 0.0334, 0.030, 0.037)
    assert str(slow) == "fp16 vs fp32: 0.033× (0.030–0.037) | 29.9× slower (27.0–33.3×), far beyond the spread of the repeats"
    assert bench.Ratio("a vs b", 0.41, 0.40, 0.42).phrase == "2.44× slower (2.38–2.50×)"
    assert bench.Ratio("a vs b", 0.78, 0.75, 0.80).phrase == "1.28× slower"


def test_a_small_difference_beyond_the_spread_gets_the_decimals_that_show_it():
    tiny = bench.Ratio("n=8192 vs the peak", 0.996, 0.993, 0.998, more="higher", less="lower")
    assert str(tiny) == "n=8192 vs the peak: 0.996× (0.993–0.998) | 1.004× lower: a small difference, beyond the spread of the repeats"
    assert tiny.phrase == "1.004× lower"
    assert bench.Ratio("a vs b", 1.0004, 1.0002, 1.0006).decimals == 4
    assert bench.Ratio("a vs b", 0.996, 0.98, 1.01).decimals == 2  # within the spread: nothing to show
    assert bench.Ratio("a vs b", 1.25, 1.2, 1.3).decimals == 2


def test_turns_takes_turns_and_calls_each_function_its_number_of_times():
    order = []
    fns = {"a": lambda: order.append("a"), "b": lambda: order.append("b")}
    times = bench.turns(fns, rounds=3, number={"a": 2, "b": 1}, warmup=1, device="cpu", block_warmup=False)
    assert order == ["a", "b"] + ["a", "a", "b"] + ["b", "a", "a"] + ["a", "a", "b"]  # warm-up, rounds rotated
    assert {k: len(v) for k, v in times.items()} == {"a": 3, "b": 3} and min(min(v) for v in times.values()) > 0
    with pytest.raises(ValueError):
        bench.turns(fns, rounds=3, number={"a": 2}, device="cpu")  # b's count missing
    with pytest.raises(ValueError):
        bench.turns(fns, rounds=3, number=2, block_s=0.1, device="cpu")  # one of the two, not both
    with pytest.raises(ValueError):
        bench.turns(fns, rounds=3, number=2, block_warmup=False)  # nothing to synchronise


def test_turns_make_the_untimed_calls_just_before_each_block_and_time_only_the_block():
    order = []
    fns = {"loader": lambda: order.append("loader") or time.sleep(0.05 if order[-2:-1] == ["b"] else 0.0),
           "b": lambda: order.append("b")}
    times = bench.turns(fns, rounds=2, number=1, warmup=0, device="cpu", block_warmup=False, untimed={"loader": 2})
    assert order == ["loader"] * 3 + ["b"] + ["b"] + ["loader"] * 3  # rotated; two untimed calls before each block
    assert max(times["loader"]) < 0.05  # the slow call, just after b's turn, was an untimed one (a 50 ms sleep: far
    # above what a busy 2-core machine adds to an empty call, which had read 4 ms once against a 2 ms bound)
    timings = bench.time_in_turns(fns, device="cpu", warmup=0, repeats=2, untimed={"loader": 1})
    assert [t.runs for t in timings] == [2, 2]
    with pytest.raises(ValueError):
        bench.turns(fns, rounds=2, number=1, device="cpu", block_warmup=False, untimed={"c": 1})  # no such function


def test_break_even_is_the_cost_over_the_seconds_each_step_saves():
    base = bench.timing_of([0.10, 0.10, 0.10], name="eager", device="cpu")
    steps, few, most = bench.break_even(5.0, base, bench.Ratio("c vs e", 2.0, 1.25, 4.0))
    assert steps == pytest.approx(100) and few == pytest.approx(5 / 0.075) and most == pytest.approx(250)
    with pytest.raises(ValueError):
        bench.break_even(5.0, base, bench.Ratio("c vs e", 1.1, 0.9, 1.3))  # within the spread


# Comparisons timed in turns: paired round by round (the statistic in bench's docstring)

def _in_turns(a_s, b_s, run="run 1"):
    """Two timings of one turn-taking run: `a_s` and `b_s` seconds per call in each round."""
    return (bench.timing_of(a_s, name="a", device="cpu", turns_id=run),
            bench.timing_of(b_s, name="b", device="cpu", turns_id=run))


def test_median_interval_takes_order_statistics_from_the_binomial():
    assert bench.median_interval([5, 1, 4, 2, 3]) == (3, 1, 5, pytest.approx(1 - 2 / 32))  # min–max, 94 %
    med, lo, hi, cov = bench.median_interval(range(1, 11))
    assert (med, lo, hi) == (5.5, 2, 9) and cov == pytest.approx(1 - 2 * 11 / 1024)  # 2nd to 9th, 98 %
    assert bench.median_interval([1.0, 2.0, 3.0])[1:] == (1.0, 3.0, pytest.approx(0.75))  # too few: min–max
    with pytest.raises(ValueError, match="at least one value"):
        bench.median_interval([])


def test_turns_pair_a_real_effect_that_drift_hides_from_the_quartiles():
    # The machine slows by 5 % a round (1.0 -> 1.55); b takes 0.8 of a's time in every round
    speed = [1.05**i for i in range(10)]
    noise = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.01, 0.99, 1.0]
    a, b = _in_turns([0.1 * s for s in speed], [0.08 * s * e for s, e in zip(speed, noise)])
    r = bench.speedup(a, b)
    assert r.rounds == 10 and r.value == pytest.approx(1.25, rel=0.02) and r.clear
    assert r.drift == pytest.approx(0.05, abs=0.01) and not r.inconclusive
    assert "faster, beyond the spread (median of 10 paired turns, 98% interval, this pair's drift " in str(r)
    apart = bench.speedup(bench.timing_of(a.samples, name="a", device="cpu"),
                          bench.timing_of(b.samples, name="b", device="cpu"))
    assert apart.rounds == 0 and apart.within_noise  # the quartiles alone cannot see it


def test_turns_with_no_effect_find_none_however_the_machine_drifts():
    speed = [1.0, 1.3, 0.9, 1.5, 1.1, 1.2, 0.8]
    noise = [1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.01]
    a, b = _in_turns([0.1 * s for s in speed], [0.1 * s * e for s, e in zip(speed, noise)])
    r = bench.speedup(a, b)
    assert r.within_noise and not r.clear  # no difference found, however the pace moved
    # ... but with the pace moving 20-50 % from round to round, more than the interval's 2 % reach, the
    # turns cannot claim "no measurable difference" either (the glossary's drift rule): inconclusive
    assert r.grade == "inconclusive" and "no measurable difference" not in str(r)
    steady = [1.0, 1.01, 1.0, 0.99, 1.0, 1.01, 1.0]
    a, b = _in_turns([0.1 * s for s in steady], [0.1 * s * e for s, e in zip(steady, noise)])
    assert "no measurable difference" in str(bench.speedup(a, b))


def test_a_small_effect_on_a_jumpy_machine_is_inconclusive():
    # Every round b is 3-5 % faster, while the machine's speed jumps by 40 % from round to round
    speed = [1.0, 1.4, 1.0, 1.4, 1.0, 1.4]
    gain = [1.03, 1.05, 1.04, 1.03, 1.05, 1.04]
    a, b = _in_turns([0.1 * s for s in speed], [0.1 * s / g for s, g in zip(speed, gain)])
    r = bench.speedup(a, b)
    assert not r.within_noise and r.inconclusive and not r.clear
    assert r.drift == pytest.approx(0.4, rel=0.05)
    said = str(r)
    assert re.search(r"inconclusive: the whole interval lies above 1, yet the machine's speed changed by 3[89]\.\d% from one turn to the next, "
                     r"more than the 4\.\d% difference", said), said
    tiny = bench.Ratio("a vs b", 1.006, 1.0058, 1.024, rounds=10, coverage=0.98, drift=0.012)
    assert tiny.inconclusive and str(tiny).startswith("a vs b: 1.0060× (1.0058–1.0240) | 1.0060× faster in the median turn, but inconclusive")
    assert "changed by 1.2% from one turn to the next, more than the 0.6% difference" in str(tiny)


def test_identical_paired_ratios_still_give_a_verdict():
    a, b = _in_turns([0.2, 0.2, 0.2], [0.1, 0.1, 0.1])
    r = bench.speedup(a, b)
    assert (r.value, r.lo, r.hi) == (2.0, 2.0, 2.0) and r.clear and "one run" not in str(r)
    one = bench.speedup(*_in_turns([0.2], [0.1]))
    assert not one.clear and "no spread to judge it by" in str(one)


def test_timings_of_different_turns_are_compared_apart():
    a, _ = _in_turns([0.1, 0.11, 0.1], [0.1, 0.1, 0.1], run="run 1")
    _, b = _in_turns([0.1, 0.1, 0.1], [0.05, 0.05, 0.06], run="run 2")
    r = bench.speedup(a, b)
    assert r.rounds == 0 and r.drift is None and r.value == pytest.approx(2.0)


def test_rate_ratio_pairs_rates_of_different_work():
    speed = [1.0, 1.2, 1.1, 1.3, 1.0]
    small = bench.timing_of([1e-3 * s for s in speed], name="n=64", device="cpu", work=1e6, unit="FLOP/s",
                            turns_id=7)
    big = bench.timing_of([4e-3 * s for s in speed], name="n=128", device="cpu", work=8e6, unit="FLOP/s",
                          turns_id=7)
    r = bench.rate_ratio(big, small)
    assert r.rounds == 5 and r.value == pytest.approx(2.0) and r.clear and "higher" in str(r)


def test_time_in_turns_and_rounds_give_paired_timings():
    a, b = bench.time_in_turns({"a": lambda: None, "b": lambda: None}, device="cpu", repeats=3, warmup=0)
    assert a.turns_id == b.turns_id is not None and len(a.samples) == len(b.samples) == 3
    c, d = bench.time_in_rounds({"c": lambda: None, "d": lambda: None}, device="cpu", min_run_s=FAST, rounds=3)
    assert c.turns_id == d.turns_id != a.turns_id and len(c.samples) == 3
    assert bench.speedup(a, b).rounds == 3 and bench.speedup(a, c).rounds == 0


def test_a_paired_ratio_names_the_medians_ratio_where_it_differs():
    # b is twice as fast in 4 of 5 rounds; taken apart, their medians say it is twice as slow
    odd = bench.speedup(*_in_turns([0.1, 0.1, 0.1, 0.4, 0.4], [0.05, 0.05, 0.3, 0.2, 0.2]))
    assert odd.value == pytest.approx(2.0) and odd.medians == pytest.approx(0.5)
    assert "the two medians' ratio, unpaired, is 0.50×" in str(odd)
    plain = bench.speedup(*_in_turns([0.2, 0.21, 0.2], [0.1, 0.1, 0.1]))
    assert "medians' ratio" not in str(plain)


def test_a_range_holding_1_is_no_difference_only_when_narrow():
    narrow = bench.ratio_of("a vs b", 1.01, 0.97, 1.05)
    wide = bench.ratio_of("a vs b", 0.95, 0.71, 1.09)
    assert "no measurable difference" in str(narrow)
    assert "too wide to tell" in str(wide) and "no measurable" not in str(wide)
    assert narrow.within_noise and wide.within_noise  # both: no verdict either way
    assert "0.71–1.09×, is too wide to tell" in wide.doubt and "no difference" in narrow.doubt
    assert wide.too_wide and not narrow.too_wide and not bench.ratio_of("x", 2.0, 1.5, 3.0).too_wide


def test_a_paired_doubt_names_the_in_turns_interval_and_an_unpaired_one_the_repeats():
    paired = bench.speedup(*_in_turns([0.1, 0.101, 0.099, 0.1, 0.1], [0.1, 0.1, 0.1, 0.101, 0.099]))
    apart = bench.ratio_of("a vs b", 1.01, 0.97, 1.05)
    assert paired.rounds and paired.within_noise and not paired.too_wide
    assert "in-turns interval" in paired.doubt and "repeats" not in paired.doubt
    assert "spread of the repeats" in apart.doubt and "in-turns" not in apart.doubt


def test_curve_verdicts_say_when_spreads_reach_across_the_threshold():
    curve = [_rated(64, 2e9), _rated(128, 8.8e9, spread=0.1), _rated(256, 9.3e9, spread=0.1), _rated(512, 10e9)]
    line = bench.curve_verdicts(curve, [64, 128, 256, 512])[1]
    assert line.startswith("smallest n at >= 90% of the fastest point: n=256 (93.0%), by the medians")
    assert "n=128, n=256 reach across 90%, so any of n=128, n=256 or a larger n may be the smallest" in line
    alone = bench.curve_verdicts([_rated(64, 2e9), _rated(256, 9.1e9, spread=0.1), _rated(512, 10e9)], [64, 256, 512])[1]
    assert "the middle half of n=256 reaches across 90%, so n=256 or a larger n may be the smallest" in alone  # 01's cpu run
    tight = bench.curve_verdicts([_rated(64, 2e9), _rated(128, 9.5e9), _rated(256, 10e9)], [64, 128, 256])[1]
    assert "by the medians" not in tight
    # a larger size whose spread reaches across cannot be the smallest: n=256 reached it by its median
    # first (01's cpu run said "n=2048 may be the smallest" after n=256 had reached 90 %)
    later = [_rated(64, 2e9), _rated(256, 9.5e9), _rated(512, 10e9), _rated(2048, 9.0e9, spread=0.2)]
    line = bench.curve_verdicts(later, [64, 256, 512, 2048])[1]
    assert line == "smallest n at >= 90% of the fastest point: n=256 (95.0%)"
    before = [_rated(64, 8.9e9, spread=0.1), _rated(256, 9.5e9), _rated(512, 10e9)]
    line = bench.curve_verdicts(before, [64, 256, 512])[1]
    assert "the middle half of n=64 reaches across 90%, so any of n=64, n=256 may be the smallest" in line


def test_a_small_drift_prints_with_the_digit_that_sets_it_beside_the_effect():
    small = bench.Ratio("a vs b", 0.992, 0.981, 0.998, rounds=5, coverage=0.94, drift=0.007)
    assert "drift 0.7%" in str(small) and small.grade == "small"  # 0.8 % effect, 0.7 % drift: not '1%' beside it
    assert "drift 12%" in str(bench.Ratio("a vs b", 1.5, 1.4, 1.6, rounds=5, coverage=0.94, drift=0.12))


def test_matmul_n_inverts_matmul_flops():
    assert [bench.matmul_n(bench.matmul_flops(n)) for n in (1, 64, 1031, 16384)] == [1, 64, 1031, 16384]
    assert bench.matmul_n(2.0 * 100**3 * 1.01) == 100  # a work figure near n³ still names n


def test_two_timings_taken_apart_give_a_verdict_only_beyond_what_a_moment_can_move():
    base, new = _timing(median_s=1.0, iqr_s=0.04), _timing(median_s=1 / 1.18, iqr_s=0.01)
    apart = bench.speedup(base, new)  # 1.18x, beyond the quartiles, measured at two moments
    assert apart.apart and apart.inconclusive and not apart.clear and apart.grade == "inconclusive"
    assert "by the medians, but inconclusive: timed at two moments" in str(apart)
    far = bench.speedup(base, _timing(median_s=1 / 3, iqr_s=0.01))  # 3x: beyond what a change of pace makes
    assert far.apart and far.clear and far.grade == "large"
    same = bench.ratio_of("numbers measured some other way", 1.18, 1.16, 1.20)
    assert same.clear and not same.apart  # the rule is for timings taken apart, not for every ratio
    paired = bench.speedup(*_in_turns([1.0, 1.01, 0.99, 1.0, 1.0], [0.85, 0.85, 0.84, 0.85, 0.85]))
    assert paired.clear and not paired.apart  # in turns: any difference beyond the interval and the drift
    # within the quartiles: more repeats would not narrow them (only turns would), so the line does not promise it
    # within their spreads, two moments apart: inconclusive too (a pace that moves up to 2.5x can hide a difference),
    # not "no measurable difference", and not "more repeats would narrow it" (quartiles do not narrow)
    for other in (_timing(median_s=1.0, iqr_s=0.4), _timing(median_s=1.0, iqr_s=0.04)):
        within = bench.speedup(base, other)
        assert within.apart and within.within_noise and within.grade == "inconclusive" and not within.clear
        assert "inconclusive: timed at two moments: within their spreads" in str(within)
        assert "no measurable difference" not in str(within) and "more repeats would narrow" not in str(within)


def test_a_place_in_the_round_that_costs_time_widens_the_spread_instead_of_passing_for_a_difference():
    import time

    calls = [0]

    def same_work():  # two identical settings; whichever runs first in a round pays 4 ms more
        time.sleep(0.008 if calls[0] % 2 == 0 else 0.004)
        calls[0] += 1

    times = bench.turns({"a": same_work, "b": same_work}, rounds=6, number=1, warmup=0, device="cpu",
                        block_warmup=False)
    a, b = (bench.timing_of(times[k], name=k, device="cpu", turns_id="aa") for k in "ab")
    assert not bench.speedup(a, b).clear  # fixed order: a always first, "2x slower" in every round


@pytest.mark.skipif(bench.minor_faults() is None, reason="page faults are not counted on this OS")
def test_time_in_turns_counts_each_calls_page_faults():
    kept = torch.ones(1 << 21, dtype=torch.float64)  # 16 MiB, touched once: no new page per call

    def fresh():  # 64 MiB through PyTorch's CPU allocator (glibc's malloc: above its largest threshold for reusing
        torch.empty(1 << 23, dtype=torch.float64).fill_(1.0)  # freed blocks, so mapped fresh and touched every call)

    touching, fresh_t = bench.time_in_turns({"touching kept memory": lambda: kept.fill_(2.0), "fresh memory": fresh},
                                            device="cpu", warmup=1, repeats=3)
    assert fresh_t.faults >= 16 and touching.faults < fresh_t.faults / 10  # 16,384 pages of 4 KiB; 32 where the
    # system maps 2 MiB pages (numpy asks for those on large arrays, which is why this test allocates with torch)
    from course_lib import report
    rep = report.Report("00_setup_check", "smoke", "cpu")
    rep.record(fresh_t)
    assert rep.rows["fresh memory"]["faults"] == fresh_t.faults  # recorded beside the time, with the call's work
    assert "faults" not in report.Report("00_setup_check", "smoke", "cpu").rows
