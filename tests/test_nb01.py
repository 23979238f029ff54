"""course_lib.lessons.nb01: notebook 01's exercise checks accept the answer and refuse wrong ones; its peak verdict follows the numbers."""

import pytest

from course_lib import bench
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
    faster = bench.rate_ratio(_rate(2048, 120e9), peak)
    said = nb01.same_peak_verdict(faster, peak, [512, 1024, 2048])
    assert "2048×2048 matmul ran 20% faster" in said and "unpaired" in said
    slower = bench.rate_ratio(_rate(2048, 80e9), peak)
    assert "1.25× slower" in nb01.same_peak_verdict(slower, peak, [512, 1024, 2048])
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
    assert "2.50× slower" in nb01.cpu_16bit_verdict("bf16", slow, []) and "converts" in nb01.cpu_16bit_verdict("bf16", slow, [])
    assert "did not use them" in nb01.cpu_16bit_verdict("bf16", slow, ["avx512_bf16"])
    assert "cannot be told apart" in nb01.cpu_16bit_verdict("bf16", same, [])
    said = nb01.cpu_16bit_verdict("fp16", slow, ["avx512_bf16", "avx512_fp16"])
    assert said.startswith("fp16 ran 2.50× slower") and "reports avx512_fp16:" in said


def test_gain_by_size_verdict_follows_the_two_intervals():
    big, small = bench.ratio_of("at 1024", 3.8, 3.5, 4.1), bench.ratio_of("at 1032", 1.5, 1.4, 1.6)
    assert "depends on the size" in nb01.gain_by_size_verdict(small, big, 1032, 1024)
    assert "3.80× at n=1024" in nb01.gain_by_size_verdict(small, big, 1032, 1024)
    same = bench.ratio_of("at 1032", 3.6, 3.3, 3.9)
    assert "does not depend" in nb01.gain_by_size_verdict(same, big, 1032, 1024)
    broad = nb01.gain_by_size_verdict(bench.ratio_of("at 1032", 3.0, 1.8, 9.8), big, 1032, 1024)
    assert "overlap" in broad and "too wide to tell whether the gain depends" in broad and "no measurable" not in broad
    wide = bench.ratio_of("at 1032", 1.5, 0.9, 4.0)
    said = nb01.gain_by_size_verdict(wide, big, 1032, 1024)
    assert "too wide" in said or "does not depend" in said
