import json

import pytest
import torch

from course_lib import bench, peaks


@pytest.fixture
def build(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_BUILD_DIR", str(tmp_path))
    return tmp_path


def _fake_peak(rate: float):
    """A stand-in for bench.peak_matmul that counts its calls and returns a peak of `rate` FLOP/s."""
    calls = []

    def fake(device, dtype=torch.float32, sizes=(64,), min_run_s=0.2):
        calls.append((str(dtype), tuple(sizes)))
        n = max(sizes)
        t = bench.timing_of([bench.matmul_flops(n) / rate * f for f in (0.98, 1.0, 1.03)],
                            name=f"matmul {n}×{n}", device=device, work=bench.matmul_flops(n), unit="FLOP/s")
        t.name = f"peak: {t.name}"
        return t
    return fake, calls


def test_a_second_notebook_reuses_the_first_ones_peak(build, monkeypatch):
    fake, calls = _fake_peak(1e11)
    monkeypatch.setattr(bench, "peak_matmul", fake)
    first, note1 = peaks.matmul("cpu", torch.float32, [64, 128], by="08_transformer")
    monkeypatch.setattr(bench, "peak_matmul", _fake_peak(3e11)[0])  # a later measurement would differ
    second, note2 = peaks.matmul("cpu", torch.float32, [64, 128], by="10_compile_and_profile")
    assert len(calls) == 1 and note1.fresh and not note2.fresh and note2.by == "08_transformer"
    assert (second.name, second.rate, second.rate_lo, second.rate_hi) == (first.name, first.rate, first.rate_lo,
                                                                         first.rate_hi)
    assert second.samples == first.samples and second.turns_id is None
    assert "by 08_transformer, stored for every notebook" in str(note2) and "measured now" in str(note1)
    peaks.forget(build)
    assert not peaks.path().exists()
    _, note3 = peaks.matmul("cpu", torch.float32, [64, 128], by="10_compile_and_profile")
    assert note3.fresh and len(calls) == 1  # the second fake measured it


def test_another_dtype_size_set_or_an_old_peak_is_measured_again(build, monkeypatch):
    fake, calls = _fake_peak(1e11)
    monkeypatch.setattr(bench, "peak_matmul", fake)
    peaks.matmul("cpu", torch.float32, [64], by="a")
    peaks.matmul("cpu", torch.bfloat16, [64], by="a")
    peaks.matmul("cpu", torch.float32, [64, 128], by="a")
    assert len(calls) == 3
    peaks.matmul("cpu", torch.float32, [64], by="a")
    assert len(calls) == 3  # all three stored side by side
    monkeypatch.setattr(peaks, "MAX_AGE_S", -1.0)  # every stored peak is stale
    _, note = peaks.matmul("cpu", torch.float32, [64], by="b")
    assert len(calls) == 4 and note.fresh and note.by == "b"


def test_an_unreadable_store_is_measured_again(build, monkeypatch):
    fake, calls = _fake_peak(1e11)
    monkeypatch.setattr(bench, "peak_matmul", fake)
    peaks.path().write_text("{ half a file")
    _, note = peaks.matmul("cpu", torch.float32, [64], by="a")
    assert note.fresh and len(calls) == 1
    assert len(json.loads(peaks.path().read_text())) == 1


def test_bandwidth_curves_are_measured_for_real_and_shared(build):
    curve, note = peaks.bandwidth("cpu", [1 << 12, 1 << 16], by="10_compile_and_profile", min_run_s=0.01)
    again, note2 = peaks.bandwidth("cpu", [1 << 12, 1 << 16], by="11", min_run_s=0.01)
    assert note.fresh and not note2.fresh and len(curve) == len(again) == 2
    assert [(t.name, t.rate, t.unit) for t in again] == [(t.name, t.rate, t.unit) for t in curve]
    assert all(t.unit == "B/s" and t.rate > 0 for t in again)


def test_a_gpu_fp32_peak_with_tf32_is_stored_apart_from_plain_fp32(monkeypatch):
    monkeypatch.setattr(peaks, "device_label", str)  # no GPU needed to build the key
    flag = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        plain = peaks._key("matmul peak", "cuda", torch.float32, [64])
        cpu_plain = peaks._key("matmul peak", "cpu", torch.float32, [64])
        torch.backends.cuda.matmul.allow_tf32 = True
        tf32 = peaks._key("matmul peak", "cuda", torch.float32, [64])
        bf16 = peaks._key("matmul peak", "cuda", torch.bfloat16, [64])
        cpu_tf32 = peaks._key("matmul peak", "cpu", torch.float32, [64])
    finally:
        torch.backends.cuda.matmul.allow_tf32 = flag
    assert plain != tf32 and "+tf32" in tf32 and "+tf32" not in bf16
    assert cpu_plain == cpu_tf32  # a CUDA switch: no effect on a CPU matmul


def _row(n: int, rate: float) -> bench.Timing:
    """A matmul row of `rate` FLOP/s, as a notebook's own timing would be."""
    return bench.timing_of([bench.matmul_flops(n) / rate * f for f in (0.97, 1.0, 1.02)],
                           name=f"matmul {n}×{n}", device="cpu", work=bench.matmul_flops(n), unit="FLOP/s")


def test_a_faster_row_offered_earlier_becomes_the_peak_a_later_notebook_measures(build, monkeypatch):
    monkeypatch.setattr(bench, "peak_matmul", _fake_peak(1e11)[0])
    kept = peaks.offer(_row(64, 3e11), "cpu", torch.bfloat16, by="01_gpu_vs_cpu")  # no peak stored yet
    assert "kept" in kept.text and not kept.raised
    again = peaks.offer(_row(64, 2e11), "cpu", torch.bfloat16, by="01_gpu_vs_cpu")  # a faster one is kept
    assert not again and again.text == "" and not again.raised
    peaks.offer(_row(64, 5e10), "cpu", torch.float32, by="01_gpu_vs_cpu")  # slower, and fp32: no effect
    peak, note = peaks.matmul("cpu", torch.bfloat16, [64, 128], by="08_transformer")
    assert peak.rate == pytest.approx(3e11) and peak.name == "peak: matmul 64×64"
    assert note.fresh and "01_gpu_vs_cpu" in note.raised and "08_transformer" in note.raised
    again, note2 = peaks.matmul("cpu", torch.bfloat16, [64, 128], by="10_compile_and_profile")
    assert again.rate == peak.rate and not note2.fresh and note2.raised.endswith(note.raised)
    assert note2.raised.startswith("stored earlier in this run, taken from 01_gpu_vs_cpu's")  # whose row it is
    fp32, note3 = peaks.matmul("cpu", torch.float32, [64, 128], by="08_transformer")
    assert fp32.rate == pytest.approx(1e11) and note3.raised == ""  # the slower fp32 row did not count


def test_a_row_faster_than_the_stored_peak_replaces_it_and_a_slower_one_does_not(build, monkeypatch):
    monkeypatch.setattr(bench, "peak_matmul", _fake_peak(2e11)[0])
    first, _ = peaks.matmul("cpu", torch.float32, [64, 128], by="00_setup_check")
    assert not peaks.offer(_row(128, 1.5e11), "cpu", torch.float32, by="01_gpu_vs_cpu")
    stands = peaks.offer(_row(128, 2.02e11), "cpu", torch.float32, by="01_gpu_vs_cpu")  # within its quartiles
    assert "stands" in stands.text and not stands.raised
    assert peaks.matmul("cpu", torch.float32, [64, 128], by="08")[0].rate == pytest.approx(first.rate)
    said = peaks.offer(_row(128, 2.4e11), "cpu", torch.float32, by="01_gpu_vs_cpu")
    assert said.raised and "01_gpu_vs_cpu" in str(said) and "00_setup_check" in str(said)
    later, note = peaks.matmul("cpu", torch.float32, [64, 128], by="08_transformer")
    assert later.rate == pytest.approx(2.4e11) and later.rate > first.rate and note.raised
    assert "kept" in peaks.offer(_row(64, 9e11), "cpu", torch.bfloat16, by="01").text  # no bf16 peak yet
    assert peaks.matmul("cpu", torch.float32, [64, 128], by="10")[0].rate == pytest.approx(2.4e11)
    with pytest.raises(ValueError, match="FLOP/s"):
        peaks.offer(bench.timing_of([0.1], name="copy", device="cpu", work=1e6, unit="B/s"), "cpu",
                    torch.float32, by="x")


def test_a_raise_says_earlier_cells_used_the_old_peak_only_when_they_could_have(build, monkeypatch):
    monkeypatch.setattr(bench, "peak_matmul", _fake_peak(1e11)[0])
    peaks.offer(_row(64, 3e11), "cpu", torch.bfloat16, by="01_gpu_vs_cpu")  # kept: no bf16 peak yet
    _, note = peaks.matmul("cpu", torch.bfloat16, [64, 128], by="08_transformer")  # measured now, then raised
    assert note.raised and "old peak" not in note.raised
    peaks.matmul("cpu", torch.float32, [64, 128], by="00_setup_check")  # stored: notebooks may divide by it
    said = peaks.offer(_row(128, 9e11), "cpu", torch.float32, by="01_gpu_vs_cpu")
    assert said.raised and "divided by the old one" in said.text
    _, later = peaks.matmul("cpu", torch.float32, [64, 128], by="08_transformer")  # read by a later notebook
    assert later.raised.startswith("stored earlier in this run, ") and "divided by the old one" not in later.raised
