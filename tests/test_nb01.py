"""course_lib.lessons.nb01: notebook 01's exercise checks accept the answer and refuse wrong ones; its peak verdict follows the numbers."""

import pytest

from course_lib import bench
from course_lib.device import DeviceInfo
from course_lib.lessons import nb01


def test_flop_count_exercise():
    nb01.check_flop_count(lambda m, k, n: 2 * m * k * n)
    with pytest.raises(AssertionError, match="multiply-add is 2 FLOPs"):
        nb01.check_flop_count(lambda m, k, n: m * k * n)


def test_transfer_time_exercise():
    nb01.check_transfer_time(lambda nbytes, gbps: nbytes / (gbps * 1e9))
    with pytest.raises(AssertionError, match="expected"):
        nb01.check_transfer_time(lambda nbytes, gbps: nbytes / gbps)


def _rate(n: int, flops_per_s: float, name: str = "") -> bench.Timing:
    work = bench.matmul_flops(n)
    return bench.timing_of([work / flops_per_s * f for f in (0.98, 1.0, 1.02)], name=name or f"matmul {n}×{n}",
                           device="cpu", work=work, unit="FLOP/s")


def test_same_peak_verdict_follows_the_ratio():
    peak = _rate(2048, 100e9, "peak: matmul 2048×2048")
    agree = bench.rate_ratio(_rate(2048, 101e9), peak)
    assert "agree" in nb01.same_peak_verdict(agree, peak, [512, 1024, 2048])
    wide = bench.ratio_of("best vs peak", 1.21, 0.96, 1.30)
    said = nb01.same_peak_verdict(wide, peak, [512, 1024, 2048])
    assert "too wide" in said and "agree" not in said
    faster = bench.rate_ratio(_rate(2048, 120e9), peak)  # 1.2x apart: inconclusive, and its line says why
    assert faster.inconclusive and nb01.same_peak_verdict(faster, peak, [512, 1024, 2048]) == ""
    far = bench.rate_ratio(_rate(2048, 300e9), peak)  # 3x: beyond what a change of pace explains
    said = nb01.same_peak_verdict(far, peak, [512, 1024, 2048])
    assert said.startswith("timed apart") and "agree" not in said
    short = bench.rate_ratio(_rate(1024, 80e9), peak)
    beyond = nb01.same_peak_verdict(short, peak, [512, 1024])  # the peak's size is not on the curve
    assert "stops at n=1024" in beyond and "n=2048" in beyond and "25% faster" in beyond  # 100 / 80
    other = nb01.same_peak_verdict(bench.rate_ratio(_rate(4096, 130e9), peak), peak, [1024, 4096])
    assert "not in this curve" in other and "30%" in other


def test_the_curve_is_compared_with_the_peak_at_the_peaks_own_size():
    peak = _rate(1024, 100e9, "peak: matmul 1024×1024")
    curve = [_rate(512, 90e9), _rate(1024, 101e9), _rate(2048, 120e9)]
    assert nb01.point_at_peak_size(curve, peak) is curve[1]  # not the curve's best point, n=2048
    assert nb01.point_at_peak_size(curve[::2], peak) is curve[2]  # no n=1024: the best point


def test_cpu_16bit_verdict_follows_the_ratio_and_the_flags():
    fp32 = _rate(1024, 100e9)
    fast, slow, same = (bench.rate_ratio(_rate(1024, r), fp32) for r in (170e9, 40e9, 100.5e9))
    fast, slow, same = (bench.Ratio(r.name, r.value, r.lo, r.hi, "faster", "slower") for r in (fast, slow, same))
    assert "1.70× faster" in nb01.cpu_16bit_verdict("bf16", fast, ["avx512_bf16", "amx_bf16", "avx512_fp16"])
    assert "amx_bf16" in nb01.cpu_16bit_verdict("bf16", fast, ["avx512_bf16", "amx_bf16"])
    assert "although this CPU reports no bf16" in nb01.cpu_16bit_verdict("bf16", fast, ["avx512_fp16"])
    assert "2.50× slower" in nb01.cpu_16bit_verdict("bf16", slow, []) and "runs without them" in nb01.cpu_16bit_verdict("bf16", slow, [])
    assert "converts" not in nb01.cpu_16bit_verdict("bf16", slow, [])  # a cause no measurement here supports
    assert "did not gain from them" in nb01.cpu_16bit_verdict("bf16", slow, ["avx512_bf16"])
    assert "cannot be told apart" in nb01.cpu_16bit_verdict("bf16", same, [])
    said = nb01.cpu_16bit_verdict("fp16", slow, ["avx512_bf16", "avx512_fp16"])
    assert said.startswith("fp16 ran 2.50× slower") and "reports avx512_fp16:" in said


def test_gain_by_size_verdict_follows_the_two_intervals():
    big, small = bench.ratio_of("at 1024", 3.8, 3.5, 4.1), bench.ratio_of("at 1032", 1.5, 1.4, 1.6)
    assert "depends on the size" in nb01.gain_by_size_verdict(small, big, 1032, 1024)
    assert "3.8× at n=1024" in nb01.gain_by_size_verdict(small, big, 1032, 1024)
    same = bench.ratio_of("at 1032", 3.6, 3.3, 3.9)
    agree = nb01.gain_by_size_verdict(same, big, 1032, 1024)  # two sizes only: no claim beyond them
    assert "(3.6×) and n=1024 (3.8×) agree" in agree and "at these two sizes, no measurable difference" in agree
    broad = nb01.gain_by_size_verdict(bench.ratio_of("at 1032", 3.0, 1.8, 9.8), big, 1032, 1024)
    assert "overlap" in broad and "too wide to tell whether it depends" in broad and "no measurable" not in broad
    wide = bench.ratio_of("at 1032", 1.5, 0.9, 4.0)
    said = nb01.gain_by_size_verdict(wide, big, 1032, 1024)
    assert "too wide" in said or "no measurable difference" in said


def test_gain_between_pairs_the_two_gains_round_by_round():
    def t(name, times):
        return bench.timing_of(times, name=name, device="cpu", work=1.0, unit="FLOP/s", turns_id="r")

    drift = [1.0, 1.5, 0.8, 1.2, 1.1]  # the machine's pace moves all four alike, round by round
    f32, half = t("f32 n", [2 * d for d in drift]), t("bf16 n", [1 * d for d in drift])  # a gain of 2x at n
    f32_o, half_o = t("f32 o", [2 * d for d in drift]), t("bf16 o", [0.5 * d for d in drift])  # of 4x at the other
    between = nb01.gain_between(f32, half, f32_o, half_o, "bf16 gain, n vs o")
    assert between.rounds == 5 and between.value == pytest.approx(0.5) and between.hi == pytest.approx(0.5)
    said = nb01.gain_by_size_verdict(bench.ratio_of("n", 2.0, 2.0, 2.0), bench.ratio_of("o", 4.0, 4.0, 4.0), 8, 9,
                                     between)
    assert said.endswith("beyond the spread: the gain differs by 100.0% between the two sizes, so it depends on the size, "
                         "not only on the format")
    assert "round by round, the first over the second: 0.5× (0.5–0.5)" in said
    same = nb01.gain_between(f32, half, f32, half, "the same gain")
    assert nb01.gain_by_size_verdict(bench.ratio_of("n", 2.0, 1.9, 2.1), bench.ratio_of("o", 2.0, 1.9, 2.1), 8, 9,
                                     same).endswith("at these two sizes, no measurable difference")


def test_gain_by_size_verdict_tells_small_gains_apart():
    """0.0066× and 0.012× are not both "0.01×" (two decimals would print the same number twice)."""
    said = nb01.gain_by_size_verdict(bench.ratio_of("a", 0.012, 0.0118, 0.0135),
                                     bench.ratio_of("b", 0.0066, 0.0053, 0.0070), 1032, 1024)
    assert "0.0066× at n=1024 and 0.012× at n=1032" in said


def test_mult8_elsewhere_shows_the_reference_runs_own_sizes_apart(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    assert "no reference GPU run of this section" in nb01.mult8_elsewhere()
    rep = nb01.report.Report(nb01.NB, "gpu", "cpu")
    rep.meta.update(device="NVIDIA Test GPU", device_type="cuda")
    rep.add("matmul 4104×4104 bfloat16", 637.4, "TFLOP/s")
    rep.add("matmul 4103×4103 bfloat16", 117.8, "TFLOP/s")
    rep.add("matmul 1024×1024 bfloat16", 500.0, "TFLOP/s")  # another section's row: not this block's
    rep.add("bfloat16 rate, n=4104 vs n=4103", 5.41, "×")
    nb01.report.record_reference({nb01.NB: rep.to_dict()})
    text = nb01.mult8_elsewhere()
    assert "NVIDIA Test GPU" in text and "4104×4104" in text and "4103×4103" in text and "5.41" in text
    assert "1024×1024" not in text


# ---- the lines the cells print: each follows its numbers ------------------------------------

def _no_gpu_run(monkeypatch, rows: dict | None = None):
    """No recorded or published figure reaches these tests: nb01 prints what it is given."""
    monkeypatch.setattr(nb01.published, "elsewhere", lambda notebook, prefixes=(), keys=(), **kw: f"ELSEWHERE{prefixes}")
    monkeypatch.setattr(nb01.report, "reference", lambda notebook: ("GPU X", rows or {}))


def test_async_text_says_how_much_faster_the_unsynchronized_clock_looked(monkeypatch):
    times = {nb01.NAIVE: 0.05e-3, nb01.SYNCED: 2.5e-3, "CUDA events": 2.6e-3}
    text = nb01.async_text(times, "matmul 4096×4096", "H200")
    assert "matmul 4096×4096 fp32 looked 50× faster than it is | H200" in text and len(text.splitlines()) == 4
    _no_gpu_run(monkeypatch, {"async: time without sync": {"value": 0.05}, "async: time with CUDA events": {"value": 2.0}})
    cpu = nb01.async_text({}, "matmul 64×64", "cpu")
    assert cpu.startswith("ELSEWHERE") and "on the GPU X, the matmul looked 40× faster" in cpu
    _no_gpu_run(monkeypatch)
    assert "looked" not in nb01.async_text({}, "matmul 64×64", "cpu")  # no recorded run: no ratio


def test_reads_text_says_whether_the_read_waited(monkeypatch):
    text = nb01.reads_text({".item()": (1e-4, 25e-3, 27e-3), "print": (1e-4, 1e-3, 27e-3)})
    first, second = text.splitlines()
    assert first.endswith("it waited for the queue") and second.endswith("it did not wait for the whole queue")
    _no_gpu_run(monkeypatch)
    assert nb01.reads_text({}).startswith("ELSEWHERE")


def test_curve_text_divides_by_the_curves_fastest_point_whatever_the_stored_peak():
    stored = _rate(512, 100e9, "peak: matmul 512×512")
    curve = [_rate(256, 50e9, "matmul 256×256"), _rate(512, 100e9, "matmul 512×512")]
    same = bench.rate_ratio(curve[1], stored)
    note = nb01.peaks.Note("00_setup_check", 10.0, False)
    text = nb01.curve_text(curve, [256, 512], stored=stored, note=note, same=same, offered=nb01.peaks.Offered())
    assert "|  50.0% of fastest" in text and "| 100.0% of fastest" in text and "of 100.0 GFLOP/s" in text
    assert "inconclusive: timed at two moments: within their spreads" in text and ": raised" not in text and text.endswith("\n")
    assert "agree within their spreads" not in text  # the ratio's own verdict says it
    raised = nb01.curve_text(curve, [256, 512], stored=stored, note=note, same=same,
                             offered=nb01.peaks.Offered("raised: faster", raised=True))
    assert "  matmul 512×512: raised: faster" in raised
    # a slow spell (the curve 3x slower than the stored peak): the column's yardstick is still the curve's own
    slow = _rate(512, 300e9, "peak: matmul 512×512")
    text = nb01.curve_text(curve, [256, 512], stored=slow, note=note, same=bench.rate_ratio(curve[1], slow),
                           offered=nb01.peaks.Offered())
    assert "timed apart" in text and "of 100.0 GFLOP/s, matmul 512×512, the fastest point" in text
    assert "|  50.0% of fastest" in text and "% of peak" not in text
    assert "smallest n at >= 90% of the fastest point: n=512" in text


def test_best_name_keys_a_gpu_as_gpu():
    assert nb01.best_name("cpu") == "cpu fp32 matmul, best of the rate curve"
    assert nb01.best_name("cuda").startswith("gpu fp32")


def test_vs_datasheet_compares_a_gpu_with_its_datasheet_and_a_cpu_with_the_table(monkeypatch):
    _no_gpu_run(monkeypatch)
    cpu = _rate(512, 100e9, "peak: cpu")
    gpu = nb01.vs_datasheet(cpu, _rate(4096, 33.5e12, "peak: gpu"), "NVIDIA H100 80GB HBM3")
    assert "GPU fp32 peak vs CPU fp32 peak: 335" in gpu and "50% of the NVIDIA H100 SXM5 80GB fp32 peak" in gpu
    assert "is not in the datasheet table" in nb01.vs_datasheet(cpu, _rate(4096, 1e12), "Some Card")
    table = nb01.vs_datasheet(cpu)
    assert "this CPU's measured fp32 peak: 100.0 GFLOP/s" in table and "ELSEWHERE" in table
    assert "rated at" not in table and "× it" not in table  # a rating is not set against a measurement
    _no_gpu_run(monkeypatch, {"gpu fp32 matmul peak": {"value": 50.0, "unit": "TFLOP/s", "spread": [49.0, 51.0]}})
    measured = nb01.vs_datasheet(cpu)  # 50 TFLOP/s against 100 GFLOP/s (quartiles 99-101)
    assert "the reference GPU X's peak is 500× this CPU's" in measured and "both measured" in measured
    _no_gpu_run(monkeypatch, {"gpu fp32 matmul peak": {"value": 50.0, "unit": "TFLOP/s", "spread": [49.0, 51.0]},
                              "cpu fp32 matmul peak": {"value": 1.25, "unit": "TFLOP/s", "note": "matmul 8×8"}})
    assert "on that one machine, its GPU's peak is 40× its own CPU's (1.25 TFLOP/s, matmul 8×8" in nb01.vs_datasheet(cpu)


def test_early_read_text_says_what_the_early_read_saw(monkeypatch):
    _no_gpu_run(monkeypatch)
    assert "saw stale data" in nb01.early_read_text((0.0, 2.0))
    assert "had landed" in nb01.early_read_text((2.0, 2.0))
    assert nb01.early_read_text(None).startswith("What PyTorch's own tutorial found")


def test_batch_copy_text_uses_this_runs_bandwidths_or_the_reference_runs(monkeypatch):
    copy = bench.Timing("H→D 1 GiB pinned", "cuda:0", 0.1, 0.001, 5, work=2.5e9, unit="B/s")  # 25 GB/s
    assert "one 100 B batch,   pinned: 4 ns at 25.0 GB/s | cuda:0" in nb01.batch_copy_text(100, [copy])
    _no_gpu_run(monkeypatch, {"H→D 1 GiB pageable": {"value": 10.0, "unit": "GB/s"},
                              "H→D pinned vs pageable": {"value": 2.0, "unit": "×"}})
    ref = nb01.batch_copy_text(10**9, []).splitlines()
    assert len(ref) == 2 and "one batch, pageable: 100 ms at 10 GB/s | GPU X, recorded reference run" in ref[1]


def test_formats_text_follows_the_device(monkeypatch):
    fp32 = _rate(1024, 100e9)
    slow = bench.rate_ratio(_rate(1024, 1e9), fp32)
    cpu = DeviceInfo("x", "cpu", 0, None, None, True, False, 2, "2.9", None, False, True, "3.11")
    text = nb01.formats_text(cpu, [slow], {"matmul bf16": nb01.peaks.Offered("kept"), "matmul fp32": nb01.peaks.Offered()})
    assert "bf16 ran" in text and "no TF32 row here" in text and text.endswith("matmul bf16: kept")
    t4 = DeviceInfo("T4", "cuda", 1, 15.0, "7.5", False, False, 2, "2.9", "12", True, True, "3.11")
    old = nb01.formats_text(t4, [slow], {})
    assert "no TF32 tensor cores" in old and "emulates bf16" in old and "bf16 ran" not in old


def test_formats_elsewhere_gives_datasheet_shares_on_a_listed_gpu(monkeypatch):
    _no_gpu_run(monkeypatch)
    rows = [_rate(8192, 33.5e12, "matmul fp32"), _rate(8192, 494.75e12, "matmul bf16")]
    text = nb01.formats_elsewhere(rows, ["fp32", "bf16"], "NVIDIA H100 80GB HBM3")
    assert "matmul fp32: 33.5 TFLOP/s = 50% of the NVIDIA H100 SXM5 80GB fp32 peak" in text
    assert "= 50% of the NVIDIA H100 SXM5 80GB bf16 peak" in text and "For comparison, ELSEWHERE" in text
    cpu = nb01.formats_elsewhere(rows, ["fp32", "bf16"], None)
    assert "the table in section 3" in cpu and "matmul 8192×8192" in cpu  # the gpu profile's size, asked for


def test_sizes_text_compares_the_repeated_size_with_its_earlier_timings():
    even, odd, at_n = _rate(1032, 100e9), _rate(1031, 90e9), _rate(1024, 95e9)
    mult8 = bench.rate_ratio(even, odd, "n=1032 vs n=1031")
    text = nb01.sizes_text([even, odd, at_n], {"section 5": [_rate(1024, 95e9)], "the curve": [_rate(1024, 80e9)],
                                               "elsewhere": [_rate(512, 1e9)]}, mult8, nb01.peaks.Offered())
    lines = text.splitlines()  # the two earlier timings of n=1024 in one line; n=512 is another matmul
    assert len(lines) == 5 and lines[4] == str(mult8)
    assert lines[3].startswith("1024×1024 at other moments of this run: section 5 1.00× (") and "the curve 1.19×" in lines[3]
    said = nb01.sizes_text([even, odd, at_n], {}, mult8, nb01.peaks.Offered("raised: x", raised=True))
    assert said.endswith("matmul 1032×1032: raised: x")  # the fastest row is the one offered


def test_raised_text_names_both_peaks():
    text = nb01.raised_text("cpu", _rate(2048, 150e9, "peak: matmul 2048×2048"), _rate(512, 120e9))
    assert text.startswith("cpu: the run's fp32 peak is now 150.0 GFLOP/s (matmul 2048×2048)") and "120.0 GFLOP/s" in text


def test_reads_text_off_a_gpu_reads_the_references_reads_against_its_queue(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    from course_lib import report
    rep = report.Report("01_gpu_vs_cpu", "gpu", "cpu")
    rep.meta.update(device="NVIDIA Test GPU", device_type="cuda")
    rep.add("async: time with CUDA events", 2.7, "ms")
    rep.add("async: 10 queued matmuls, then .item()", 27.1, "ms")
    rep.add("async: 10 queued matmuls, then print", 138.4, "ms")
    report.record_reference({"01_gpu_vs_cpu": rep.to_dict()})
    text = nb01.reads_text({})
    assert "the 10 matmuls took 27 ms on that GPU" in text and "each read waited for the whole queue" in text
    assert ".item() returned after 27.1 ms and print returned after 138 ms (111 ms beyond the queue" in text
    rep.add("async: 10 queued matmuls, then .item()", 1.0, "ms")  # returned before the queue ran
    report.record_reference({"01_gpu_vs_cpu": rep.to_dict()})
    assert "not every read waited" in nb01.reads_text({})


def test_sizes_in_00_sets_00s_rows_beside_the_curves_points():
    t = bench.timing_of([0.00185, 0.00184, 0.00186, 0.00185], name="matmul 512×512 float32", device="cpu",
                        work=2 * 512**3, unit="FLOP/s")
    row = {"value": 135.25, "unit": "GFLOP/s", "note": t.device, "spread": [134.06, 136.54]}
    text = nb01.sizes_in_00({"matmul 512×512 float32": row}, [t])
    assert text.startswith("matmul 512×512 float32: notebook 00 timed it earlier in this run at 135.2 (134.1–136.5) "
                           "GFLOP/s, this curve at 145.1 GFLOP/s: 1.07× apart, more than either timing's own quartiles allow")
    assert "only timings of one set of rounds are compared" in text
    assert nb01.sizes_in_00({"matmul 512×512 float32": {**row, "note": "NVIDIA H200"}}, [t]) == ""  # another device
    assert nb01.sizes_in_00(None, [t]) == ""
