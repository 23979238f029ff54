"""course_lib.lessons.nb00: notebook 00's tables and sentences follow what they are given, and its
exercise check accepts the answer and refuses wrong ones."""

from types import SimpleNamespace

import pytest
import torch

from course_lib import bench, peaks
from course_lib.device import DeviceInfo
from course_lib.lessons import nb00


def _info(**kw) -> DeviceInfo:
    base = dict(name="AMD EPYC", kind="cpu", gpu_count=0, memory_gib=None, capability=None, bf16=True,
                tf32=False, cpu_threads=2, torch="2.9", cuda=None, nccl=False, gloo=True, python="3.11.7")
    return DeviceInfo(**{**base, **kw})


def _rate(n: int, flops_per_s: float, name: str = "", spread: float = 0.02) -> bench.Timing:
    work = bench.matmul_flops(n)
    return bench.timing_of([work / flops_per_s * f for f in (1 - spread, 1.0, 1 + spread)],
                           name=name or f"matmul {n}×{n} float32", device="cpu", work=work, unit="FLOP/s")


def test_cudnn_version_is_dotted():
    assert nb00.fmt_cudnn(92400) == "9.24.0" and nb00.fmt_cudnn(90101) == "9.1.1"
    assert nb00.fmt_cudnn(None) == "-"


def test_two_columns_pads_names():
    assert nb00.two_columns([("torch", "2.9"), ("python", "3.11")], 8) == "torch    2.9\npython   3.11"


def test_devices_text_on_a_cpu_and_on_an_old_gpu():
    cpu = nb00.devices_text(_info(), [], ["avx512_bf16"])
    assert "No CUDA GPU visible" in cpu and "avx512_bf16" in cpu
    assert "\ntorch " not in cpu and "gloo         True" in cpu  # versions are section 1's
    assert "none reported" in nb00.devices_text(_info(), [], [])
    assert "runs, with bf16 instructions: avx512_bf16" in cpu.splitlines()[5]  # the bf16 row says why
    assert "emulated" in nb00.devices_text(_info(), [], ["avx512_fp16"])  # an fp16 flag is not bf16
    t4 = SimpleNamespace(name="Tesla T4", total_memory=15 * 2**30, major=7, minor=5, multi_processor_count=40)
    gpu = nb00.devices_text(_info(kind="cuda", gpu_count=1, capability="7.5", bf16=False), [t4], [])
    assert "cuda:0  Tesla T4 | 15.0 GiB | sm 7.5 | 40 SMs" in gpu and "fp16 + GradScaler" in gpu
    assert "No CUDA GPU" not in gpu


def test_profile_text_says_how_the_profile_was_chosen():
    cfg = SimpleNamespace(why=None, check_n=64, cpu_n=512, gpu_n=4096)
    auto = nb00.profile_text("auto", "cpu", cfg, cuda=False, env=None)
    assert "auto picks cpu: PyTorch sees no CUDA GPU" in auto and "on the GPU" not in auto
    given = nb00.profile_text("smoke", "smoke", cfg, cuda=True, env="smoke")
    assert "used as given" in given and "4096×4096 on the GPU" in given and "'smoke'" in given
    gpu_cfg = SimpleNamespace(**cfg.__dict__ | {"why": "large sizes"})
    sized = nb00.profile_text("auto", "gpu", gpu_cfg, cuda=True, env=None)
    assert "auto picks gpu" in sized and "sizes: large sizes" in sized


def test_readiness_text_leaves_out_the_unwritten_and_counts_them():
    rows = [("00_setup_check", "full", "everything"), ("01_gpu_vs_cpu", "partial", "CPU only"),
            ("99_future", "not written yet", "-"), ("98_later", "not written yet", "-")]
    text = nb00.readiness_text(rows)
    assert "99_future" not in text and text.endswith("2 more notebooks are being written.")
    assert text.splitlines()[2] == "01_gpu_vs_cpu   partial          CPU only"  # padded to the longest name
    assert "being written" not in nb00.readiness_text(rows[:2])


def test_rates_text_points_at_a_gpu_only_without_one():
    hand, cpu = _rate(512, 100e9, "hand-timed matmul 512×512"), _rate(512, 120e9)
    apart = bench.rate_ratio(cpu, hand, "time_matmul vs hand")
    lines = nb00.rates_text(hand, [cpu], apart).splitlines()
    assert lines[0].startswith("hand-timed") and "No GPU here" in lines[2] and lines[-1] == str(apart)
    with_gpu = nb00.rates_text(hand, [cpu, _rate(4096, 50e12)], apart)
    assert "No GPU here" not in with_gpu and len(with_gpu.splitlines()) == 4


def test_timing_split_follows_the_two_ratios():
    same = bench.ratio_of("in turns", 1.0, 0.99, 1.01)
    said = nb00.timing_split(bench.ratio_of("apart", 1.0, 0.98, 1.02), same)  # what the run did establish
    assert said.startswith("timed apart 1.00×, in turns 1.00×: in turns the two ways of timing agree (0.99–1.01×)")
    assert "the ratio timed apart (1.00×) lies within its timings' spreads" in nb00.timing_split(
        bench.ratio_of("apart", 1.0, 0.98, 1.02, apart=True), same)  # the reason its own verdict gave (reader Q)
    assert "so the 1.30× timed apart is not the way of timing: it came with the two moments, by less than the 2.5×" \
        in nb00.timing_split(bench.ratio_of("apart", 1.3, 1.2, 1.4, apart=True), same)
    both_wide = nb00.timing_split(bench.ratio_of("apart", 1.0, 0.98, 1.02), bench.ratio_of("t", 1.0, 0.82, 1.16))
    assert "in turns, the interval (0.82–1.16×) is too wide to tell the two ways of timing apart" in both_wide
    assert both_wide.endswith("lies within its timings' spreads: this run shows no effect of either")
    wide = bench.ratio_of("in turns", 1.1, 0.95, 1.3)
    assert "cannot split" in nb00.timing_split(bench.ratio_of("apart", 1.2, 1.15, 1.25), wide)
    paired = bench.ratio_of("in turns", 1.1, 1.08, 1.12)
    rest = nb00.timing_split(bench.ratio_of("apart", 1.32, 1.3, 1.34), paired)
    assert "the way of timing differs" in rest and "the rest, 1.16–1.24× (both intervals carried through), came with when each was timed" in rest


def test_peak_text_says_whether_the_row_is_the_peaks_own_matmul():
    peak, note = _rate(512, 130e9, "peak: matmul 512×512 float32"), peaks.Note("00_setup_check", 0.0, True)
    own = nb00.peak_text(peak, note, _rate(512, 120e9), peaks.Offered())
    assert "they are the same matmul" in own and "92% of" in own and len(own.splitlines()) == 4
    other = nb00.peak_text(peak, note, _rate(256, 120e9), peaks.Offered("stands: by 00"))
    assert "also holds the machine's change" in other and other.endswith("matmul 256×256 float32: stands: by 00")
    raised = nb00.peak_text(peak, note, _rate(512, 140e9), peaks.Offered("raised: by 00", raised=True))
    assert "% of" not in raised and "raised: by 00" not in raised  # no fraction of a peak it replaces
    assert "its slow quartile, 1" in raised and "lies above the peak measurement's fast one, 13" in raised
    assert raised.endswith("The later notebooks divide by 140.0 GFLOP/s")


def test_datasheet_text_names_the_gpu_or_points_to_notebook_01():
    peak = _rate(4096, 51e12, "peak: matmul 4096×4096 float32")
    assert nb00.datasheet_text(peak, None) == "datasheet figures for common GPUs: notebook 01, section 3"
    assert "is not in the datasheet table" in nb00.datasheet_text(peak, "Some Card 9000")
    h100 = nb00.datasheet_text(peak, "NVIDIA H100 80GB HBM3")
    assert "of the" in h100 and "datasheet fp32 peak" in h100


def test_matrix_bytes_exercise():
    nb00.check_matrix_bytes(lambda n, dtype: n * n * torch.empty((), dtype=dtype).element_size())
    with pytest.raises(AssertionError, match="expected"):
        nb00.check_matrix_bytes(lambda n, dtype: n * n * 4)  # every dtype as fp32
    with pytest.raises(AssertionError, match="expected"):
        nb00.check_matrix_bytes(lambda n, dtype: n * torch.empty((), dtype=dtype).element_size())
