"""course_lib.lessons.nb07: notebook 07's agreement, kernels, sweep, toy task and exercise checks."""

import dataclasses
import math

import matplotlib
import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from course_lib import attention as A
from course_lib import bench
from course_lib.lessons import nb07, nb07_seqlen as seqlen
from test_attention import qkv  # the same inputs as the core tests

pytestmark = pytest.mark.versioned  # SDPA's kernels: make test-oldest runs it

matplotlib.use("Agg")


def test_exercise_checks_accept_the_answer_and_refuse_wrong_ones(capsys):
    nb07.check_flops(lambda b, h, t, d: 4 * b * h * t * t * d)
    nb07.check_cached_causal_mask(lambda tq, tk: torch.ones(tq, tk, dtype=torch.bool).tril(tk - tq))
    assert "✓" in capsys.readouterr().out
    for wrong in (lambda b, h, t, d: 2 * b * h * t * t * d, lambda b, h, t, d: 4 * b * t * t * d,
                  lambda b, h, t, d: 4 * b * h * t * d * d):
        with pytest.raises(AssertionError):
            nb07.check_flops(wrong)
    for wrong in (lambda tq, tk: torch.ones(tq, tk, dtype=torch.bool).tril(),  # top left: SDPA's is_causal
                  lambda tq, tk: torch.ones(tq, tk, dtype=torch.bool).triu(tk - tq),  # the future
                  lambda tq, tk: torch.ones(tq, tk).tril(tk - tq),  # float: an additive bias, not a mask
                  lambda tq, tk: torch.ones(tq, tk, dtype=torch.bool).tril(tk - tq - 1),  # forgets itself
                  lambda tq, tk: [[True]]):
        with pytest.raises(AssertionError):
            nb07.check_cached_causal_mask(wrong)


def test_backend_used_names_the_kernel_forced():
    q, k, v = qkv(1, 2, 16, 16, 8)
    for backend in (SDPBackend.MATH, SDPBackend.FLASH_ATTENTION):
        with sdpa_kernel(backend):
            assert nb07.backend_used(lambda: F.scaled_dot_product_attention(q, k, v)) == backend.name
    assert nb07.backend_used(lambda: q + 1) == "none"


def test_time_backends_times_cpu_kernels_and_reports_a_missing_one():
    q, k, v = qkv(1, 2, 32, 32, 8)
    rows = nb07.time_backends(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), "cpu",
                              backends=[SDPBackend.MATH, SDPBackend.EFFICIENT_ATTENTION], repeats=2)
    assert [r.backend for r in rows] == ["MATH", "EFFICIENT_ATTENTION"]
    assert rows[0].timing is not None and rows[0].timing.runs == 2 and rows[0].timing.median_s > 0
    assert rows[1].timing is None and rows[1].reason
    oom = nb07.time_backends(lambda: (_ for _ in ()).throw(torch.OutOfMemoryError("injected")), "cpu",
                             backends=[SDPBackend.MATH], repeats=1)
    assert oom[0].timing is None and oom[0].reason == "out of memory"
    assert [b.name for b in nb07.backends_for("cpu")] == ["FLASH_ATTENTION", "MATH"]
    assert len(nb07.backends_for("cuda")) == 4


def test_fwd_bwd_step_runs_backward_and_frees_gradients():
    seen = []

    def fn(q, k, v):
        seen.append((q.shape, q.requires_grad))
        return F.scaled_dot_product_attention(q, k, v)

    step = nb07.fwd_bwd(fn, (2, 3, 8, 4), "cpu")
    step()
    step()
    assert seen == [(torch.Size([2, 3, 8, 4]), True)] * 2


def test_plot_sweep_draws_time_and_memory_and_names_out_of_memory():
    t = bench.timing_of([0.001, 0.002, 0.003], name="x", device="cpu")
    points = [nb07.Point("naive", 16, t, 1000), nb07.Point("naive", 32, oom=True),
              nb07.Point("naive", 64, skipped=True),
              nb07.Point("sdpa", 16, t, 500), nb07.Point("sdpa", 32, t, 900), nb07.Point("sdpa", 64, t, 1800)]
    fig = nb07.plot_sweep(points, title="test")
    ax_t, ax_m = fig.axes
    assert sorted(text.get_text() for text in ax_t.get_legend().get_texts()) == [
        "naive (out of memory at T=32)", "sdpa", "∝ T (guide)", "∝ T² (guide)"]
    naive, sdpa, linear, square = ax_m.get_lines()
    assert list(naive.get_ydata()) == [1000 / 2**20]
    assert list(sdpa.get_ydata()) == [500 / 2**20, 900 / 2**20, 1800 / 2**20]
    assert list(square.get_ydata()) == pytest.approx([1000 / 2**20 * r for r in (1, 4, 16)])
    assert list(linear.get_ydata()) == pytest.approx([1000 / 2**20 * r for r in (1, 2, 4)])
    import matplotlib.pyplot as plt
    plt.close("all")


def test_sweep_lets_other_errors_through():
    def broken(q, k, v):
        raise TypeError("a bug, not a measurement")

    with pytest.raises(TypeError):
        nb07.sweep({"broken": broken}, [8], batch=1, heads=1, head_dim=4, device="cpu")


def test_growth_exponent_recovers_powers():
    t = [128, 256, 512, 1024]
    assert nb07.growth_exponent(t, [3 * x**2 for x in t]) == pytest.approx(2.0)
    assert nb07.growth_exponent(t, [0.5 * x for x in t]) == pytest.approx(1.0)
    for bad in (([128], [1.0]), ([1, 2], [1.0, 0.0]), ([1, 2], [1.0])):
        with pytest.raises(ValueError):
            nb07.growth_exponent(*bad)


def test_running_max_batch():
    g = torch.Generator().manual_seed(0)
    tokens, keep, targets = nb07.running_max_batch(200, 9, 7, min_len=2, generator=g)
    assert tokens.shape == keep.shape == targets.shape == (200, 9)
    lengths = keep.sum(1)
    assert lengths.min() >= 2 and lengths.max() <= 9
    assert (tokens[~keep] == nb07.PAD).all() and (tokens[keep] >= 1).all() and (tokens[keep] < 7).all()
    assert (targets[~keep] == -100).all()
    for row in range(5):
        real = tokens[row][keep[row]].tolist()
        assert targets[row][keep[row]].tolist() == [max(real[:i + 1]) for i in range(len(real))]
    assert keep[:, -1].all()  # left padding: the last position is always real
    with pytest.raises(ValueError):
        nb07.running_max_batch(2, 4, 7, min_len=0)


def test_plot_weights_draws_the_chosen_head_and_example():
    tokens, keep, _ = nb07.running_max_batch(3, 6, 5, generator=torch.Generator().manual_seed(0))
    weights = torch.rand(3, 2, 6, 6)
    fig = nb07.plot_weights(weights, tokens, head=1, example=2)
    image = fig.axes[0].images[0].get_array()
    assert torch.allclose(torch.as_tensor(image.data), weights[2, 1])
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert labels == ["·" if int(t) == nb07.PAD else str(int(t)) for t in tokens[2]]
    for head, example in ((2, 0), (0, 3), (-1, 0)):
        with pytest.raises(ValueError):
            nb07.plot_weights(weights, tokens, head=head, example=example)
    import matplotlib.pyplot as plt
    plt.close("all")


def test_sweep_measures_every_point_and_skips_after_out_of_memory():
    def naive(q, k, v):
        if q.shape[2] >= 32:
            raise torch.OutOfMemoryError("injected: pretend the scores do not fit")
        return A.attention(q, k, v, A.causal_mask(q.shape[2]))[0]

    def sdpa(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    seen = []
    points = nb07.sweep({"naive": naive, "sdpa": sdpa}, [64, 16, 32], batch=1, heads=2, head_dim=8,
                        device="cpu", repeats=2, on_point=seen.append)
    assert [(p.name, p.length, p.oom, p.skipped) for p in points] == [
        ("naive", 16, False, False), ("sdpa", 16, False, False), ("naive", 32, True, False),
        ("sdpa", 32, False, False), ("naive", 64, False, True), ("sdpa", 64, False, False)]
    assert seen == points
    for p in points:
        assert (p.timing is None) == (p.oom or p.skipped) and (p.peak_bytes is None) == (p.oom or p.skipped)
        assert p.timing is None or (p.timing.runs == 2 and p.timing.name == f"{p.name}, T={p.length}")
    naive16 = points[0]
    # the (1, 2, 16, 16) float32 scores are allocated inside the step at least once
    assert naive16.peak_bytes >= 1 * 2 * 16 * 16 * 4


def test_sweep_catches_out_of_memory_while_timing_and_times_the_others_alone():
    calls = {"n": 0}

    def grows(q, k, v):  # fits once (the memory measurement), then runs out while timed
        calls["n"] += 1
        if calls["n"] > 1:
            raise torch.OutOfMemoryError("injected: fragmentation")
        return A.attention(q, k, v)[0]

    points = nb07.sweep({"grows": grows, "sdpa": lambda q, k, v: F.scaled_dot_product_attention(q, k, v)},
                        [8, 16], batch=1, heads=1, head_dim=4, device="cpu", repeats=2)
    assert [(p.name, p.length, p.oom, p.skipped) for p in points] == [
        ("grows", 8, True, False), ("sdpa", 8, False, False),
        ("grows", 16, False, True), ("sdpa", 16, False, False)]
    assert points[0].timing is None and points[0].peak_bytes is not None
    assert all(p.timing is not None for p in points if p.name == "sdpa")


def test_share_on_max_is_one_for_the_perfect_answer_and_lower_for_uniform():
    tokens, keep, targets = nb07.running_max_batch(16, 8, 9, generator=torch.Generator().manual_seed(3))
    best = tokens.cummax(1).values
    target = (tokens[:, None, :] == best[:, :, None]) & keep[:, None, :] & A.causal_mask(8)
    perfect = (target / target.sum(-1, keepdim=True).clamp_min(1))[:, None]  # (B, 1, T, T)
    uniform = A.sdpa_mask(keep, causal=True).float()
    uniform = uniform / uniform.sum(-1, keepdim=True).clamp_min(1)
    share = nb07.share_on_max(torch.cat([perfect, uniform], dim=1), tokens, keep)
    assert share.shape == (2,)
    assert share[0].item() == pytest.approx(1.0)
    assert 0 < share[1].item() < 0.9


def test_snippet_needs_math_and_overflows_float16():
    ns: dict = {}
    exec(nb07.SNIPPET_SOURCE, ns)
    q, k, v = qkv(1, 1, 4, 4, 8)
    with pytest.raises(NameError):
        ns["scaled_dot_product_attention"](q, k, v)
    ns["math"] = math
    out, _ = ns["scaled_dot_product_attention"](q, k, v, A.causal_mask(4))
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True))
    with pytest.raises(RuntimeError):
        ns["scaled_dot_product_attention"](q.half(), k.half(), v.half(), A.causal_mask(4))


@pytest.mark.gpu
def test_cuda_backends_and_module_agree_with_the_written_out_attention():
    q, k, v = (t.cuda() for t in qkv(2, 4, 256, 256, 64, dtype=torch.bfloat16))
    want = A.attention(q.float(), k.float(), v.float(), A.causal_mask(256, device="cuda"))[0]
    rows = nb07.time_backends(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), "cuda",
                              repeats=2)
    assert {r.backend for r in rows} == {"FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH"}
    assert any(r.timing is not None for r in rows)
    for r in rows:
        if r.timing is not None:
            with sdpa_kernel(getattr(SDPBackend, r.backend)):
                got = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            torch.testing.assert_close(got.float(), want, **A.agreement(torch.bfloat16))
    assert nb07.backend_used(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)) in (
        "FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION")
    m = A.MultiHeadAttention(256, 4).cuda()
    x = torch.randn(2, 64, 256, device="cuda")
    y_sdpa = m(x, causal=True)
    m.sdpa = False
    torch.testing.assert_close(y_sdpa, m(x, causal=True), atol=1e-4, rtol=1e-3)


@pytest.mark.gpu
def test_cuda_bfloat16_sweep_check_and_out_of_memory_are_caught():
    """The notebook's bf16 agreement check at the sweep's shortest GPU length, and a real OOM."""
    shape = (4, 16, 512, 64)
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(shape, generator=g, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    naive = A.attention(q, k, v, A.causal_mask(512, device="cuda"))[0]
    fused = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(naive, fused, **A.agreement(torch.bfloat16))
    free = torch.cuda.mem_get_info()[0]
    t = int((free / (4 * 16 * 2)) ** 0.5) + 1024  # one (4, 16, T, T) bf16 matrix exceeds free memory
    points = nb07.sweep({"naive": lambda q, k, v: A.attention(q, k, v)[0]}, [t], batch=4, heads=16,
                        head_dim=64, device="cuda", dtype=torch.bfloat16, repeats=1)
    assert points[0].oom and points[0].timing is None


def test_two_moments_reads_the_two_intervals():
    sec5 = bench.ratio_of("SDPA vs math, section 5", 3.34, 2.54, 3.42)
    moved = nb07.two_moments(sec5, bench.ratio_of("here", 2.24, 2.21, 2.48))  # 0.65-0.98x of section 5's
    assert "intervals do not overlap" in moved and "its range, 0.65–0.98×, is within 2.5×" in moved
    assert "inconclusive" in moved and "changed" not in moved  # two moments under 2.5x: no verdict that it moved
    assert "agree within" in nb07.two_moments(sec5, bench.ratio_of("here", 2.9, 2.5, 3.1))
    assert "agree within" in nb07.two_moments(sec5, bench.ratio_of("here", 2.0, 0.8, 4.0))  # wide: overlaps
    assert "no interval" in nb07.two_moments(sec5, bench.ratio_of("here", 2.0, 2.0, 2.0))
    assert "not measured" in nb07.two_moments(sec5, bench.ratio_of("here", 2.24, 2.21, 2.48))  # no cause offered


def _turns(names, medians, run):  # timings of one set of turns (`run`), three rounds, constant per name
    return {n: bench.timing_of([m] * 3, name=n, device="cpu", turns_id=run) for n, m in zip(names, medians)}


def test_sections_text_quotes_the_math_kernel_ratio_from_section_6_only():
    five = _turns(["written out", "SDPA, math kernel", "SDPA"], [0.6, 0.5, 0.2], "section 5")
    at = {(n, 64): nb07.Point(n, 64, timing=t) for n, t in five.items()}
    mine = _turns(["FLASH_ATTENTION", "MATH", "written out"], [0.2, 0.33, 0.55], "section 6")
    text = nb07.sections_text(at, mine, list(five), 64, "FLASH_ATTENTION")
    assert "SDPA vs written out, T=64: section 5 3.00×, here (FLASH_ATTENTION vs written out) 2.75×" in text
    assert "SDPA vs its math kernel, T=64: this section's ratio only (FLASH_ATTENTION vs MATH, above)" in text
    assert "section 5 2.50×" not in text and "1.65×" not in text  # the math kernel's ratio: not printed twice
    assert text.count("timed apart") == 3 and text.endswith("this run does not measure what changed its time")
    assert max(map(len, text.splitlines())) < 160
    assert "math kernel" not in nb07.sections_text(at, mine, list(five), 64, "MATH")  # SDPA picked MATH itself
    assert nb07.sections_text({}, mine, list(five), 64, "FLASH_ATTENTION") == ""  # section 5 did not reach T


def test_rising_and_largest_cache():
    assert nb07.rising([1.5, 1.8, 1.9, 1.9]) and nb07.rising([2.0])
    assert not nb07.rising([1.53, 1.80, 1.62, 1.56])
    found = nb07.largest_cache("cpu")
    assert found is None or (found[0].startswith("L") and found[1] >= 2**16)


def test_time_backends_times_extra_steps_in_the_same_turns():
    q, k, v = qkv(1, 2, 32, 32, 8)
    calls = []
    rows = nb07.time_backends(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), "cpu",
                              backends=[SDPBackend.MATH], repeats=2,
                              also={"written out": lambda: calls.append(A.attention(q, k, v)[0])})
    assert [r.backend for r in rows] == ["MATH", "written out"]
    assert rows[1].timing is not None and rows[1].timing.runs == 2 and calls
    assert rows[0].timing.turns_id == rows[1].timing.turns_id is not None  # paired with the kernels


def _leads(*triples):
    """SDPA's paired lead over the written-out version at T = 128, 256, 512, ... (value, lo, hi)."""
    return {128 * 2**i: bench.ratio_of(f"T={128 * 2**i}", v, lo, hi) for i, (v, lo, hi) in enumerate(triples)}


def test_cache_step_reads_the_lead_across_the_crossing_against_the_step_before():
    lengths = [128, 256, 512, 1024]
    one = {t: 4 * 8 * t * t * 4 for t in lengths}  # 2, 8, 32, 128 MiB
    cache = 16 * 2**20  # crossed between 256 and 512
    step = nb07.cache_step(_leads((1.0, 0.95, 1.05), (1.2, 1.15, 1.25), (2.4, 2.3, 2.5), (3, 2.9, 3.1)),
                           lengths, one, cache, "one matrix")
    assert "between T=256" in step and "T=512" in step and "faster across it" in step
    flat = nb07.cache_step(_leads((1.0, 0.95, 1.05), (2.0, 1.9, 2.1), (2.2, 2.1, 2.3), (3, 2.9, 3.1)),
                           lengths, one, cache, "one matrix")
    assert "slower across it" in flat
    noisy = nb07.cache_step(_leads((1.0, 0.7, 1.4), (1.2, 0.9, 1.6), (1.5, 1.0, 2.0), (3, 2.9, 3.1)),
                            lengths, one, cache, "one matrix")
    assert "cannot tell" in noisy
    lo, value, hi = seqlen.lead_growth(_leads((1.0, 0.9, 1.1), (2.0, 1.8, 2.2)), 128, 256)
    assert lo == pytest.approx(1.8 / 1.1) and value == pytest.approx(2.0) and hi == pytest.approx(2.2 / 0.9)


def test_cache_step_when_nothing_or_everything_outgrows_the_cache_or_too_few_lengths():
    lengths = [128, 256, 512]
    one = {t: t * t for t in lengths}
    leads = _leads((1, 0.9, 1.1), (1, 0.9, 1.1), (1, 0.9, 1.1))
    assert "fits the cache at every length" in nb07.cache_step(leads, lengths, one, 10**9, "x")
    assert "already at T=128" in nb07.cache_step(leads, lengths, one, 10, "x")
    assert "too few lengths" in nb07.cache_step(leads, lengths, one, 128 * 128 + 1, "x")  # crossed at 256
    assert "too few lengths" in nb07.cache_step({128: leads[128], 512: leads[512]}, lengths, one,
                                                256 * 256 + 1, "x")  # 256 did not run


# ---- the words around the measurements: each function's text follows its numbers

def _t(name, median_s, q1_s, q3_s, runs=5):
    return bench.Timing(name, "cpu (2 threads)", median_s, q3_s - q1_s, runs, None, "", q1_s, q3_s)


def test_toy_text_reports_both_models_chance_and_the_best_head():
    lines = nb07.toy_text((0.3, [0.2, 0.25], None), (0.95, [0.4, 0.9], None), 200, 0.31, 1).splitlines()
    assert lines[0].startswith("untrained ") and "accuracy  30.0%" in lines[0] and lines[0].endswith("head 0 20%, head 1 25%")
    assert lines[1].startswith("after 200 steps") and "accuracy  95.0%" in lines[1]
    assert "would put 31% there" in lines[2] and lines[3].endswith("head 1, 90% of its weight (untrained: 25%)")


def test_point_line_for_a_timed_an_oom_and_a_skipped_point():
    timed = nb07.Point("SDPA", 256, _t("x", 0.002, 0.0019, 0.0021), 3 * 2**20)
    assert nb07.point_line(timed, 4, 8, torch.float32) == "T=256    SDPA                    2 ms ±  5.0% | peak 3.0 MiB"
    oom = nb07.point_line(nb07.Point("written out", 4096, oom=True), 4, 8, torch.bfloat16, 79.6)
    assert "one (4, 8, 4096, 4096) bfloat16 matrix is 1.0 GiB (79.6 GiB on this GPU)" in oom
    assert nb07.point_line(nb07.Point("written out", 8192, skipped=True), 4, 8, torch.float32).endswith(
        "skipped: out of memory at a shorter length")


def _sweep():
    lengths, names = [128, 256], ["written out", "SDPA, math kernel", "SDPA"]
    at = {(n, t): nb07.Point(n, t, _t(n, 1e-3 * t / 128 * (3 - i), 0.9e-3, 1.1e-3 * t / 128 * (3 - i)), 2**20 * (3 - i))
          for i, n in enumerate(names) for t in lengths}
    at[("SDPA, math kernel", 256)] = nb07.Point("SDPA, math kernel", 256, oom=True)
    return at, names, lengths


def test_sweep_tables_mark_an_unclear_lead_and_give_the_peak_in_matrices():
    at, names, lengths = _sweep()
    lead = {128: bench.ratio_of("T=128", 3.0, 2.8, 3.2), 256: bench.ratio_of("T=256", 1.0, 0.9, 1.1)}
    one = {128: 2**19, 256: 2**21}
    lines = nb07.sweep_tables(at, names, lengths, lead, one).splitlines()
    assert lines[1].endswith("| 3.00× (2.80–3.20)") and lines[2].endswith(" ?") and "out of memory" in lines[2]
    assert lines[3].startswith("?: these repeats do not tell") and "T=256" in lines[3]
    assert lines[5] == "peak memory added by one call"
    assert lines[7].endswith("|               3.0× | 512.0 KiB")
    assert lines[-1] == "written out, T=256: peak 3.0 MiB = 1.50 × one (B, H, T, T) matrix"
    assert "†" not in "\n".join(lines)  # no medians to set beside the paired ratios


def test_sweep_tables_give_the_medians_ratio_where_the_paired_median_sits_apart():
    at, names, lengths = _sweep()
    lead = {128: dataclasses.replace(bench.ratio_of("T=128", 1.14, 1.01, 1.15), rounds=5, medians=1.04),
            256: dataclasses.replace(bench.ratio_of("T=256", 3.0, 2.8, 3.2), rounds=5, medians=3.05)}
    lines = nb07.sweep_tables(at, names, lengths, lead, {128: 2**19, 256: 2**21}).splitlines()
    assert lines[1].endswith("| 1.14× (1.01–1.15) †")
    assert lines[2].endswith("| 3.00× (2.80–3.20)")  # its medians' ratio, 3.05, within 5 %: no mark
    assert lines[3] == ("†: the column gives the median of the paired turns' ratios; the two medians' ratio, "
                        "unpaired, is 1.04× at T=128")


def test_slopes_line_words_the_exponent_and_flags_slopes_that_do_not_climb():
    steady = nb07.slopes_line("SDPA", "time", [128, 256, 512], [1.0, 3.0, 12.0], 1.8)
    assert "∝ T^1.80 (about quadratic)" in steady and "between neighbours: 1.58, 2.00" in steady
    assert len(steady.splitlines()) == 1
    flat = nb07.slopes_line("SDPA", "time", [128, 256, 512], [1.0, 4.0, 8.0], 1.5)
    assert flat.endswith("(not climbing steadily: below)")
    assert "climbing" not in nb07.slopes_line("SDPA", "peak memory", [128, 256, 512], [1.0, 4.0, 8.0], 1.5)
    assert nb07.local_slopes([128, 256, 512], [1.0, 4.0, 8.0]) == pytest.approx([2.0, 1.0])
    assert nb07.slopes_caveat([]) == ""
    caveat = nb07.slopes_caveat(["written out", "SDPA, math kernel"])  # names with commas: ';' between them
    assert caveat.startswith("the time slopes marked above (written out; SDPA, math kernel) do not climb")
    assert [nb07.growth_words(p) for p in (0.5, 1.0, 1.5, 2.0, 2.5)] == [
        "less than linear: fixed costs dominate", "about linear", "between linear and quadratic",
        "about quadratic", "faster than quadratic"]


def test_cache_compare_and_oom_texts():
    assert "could not be read" in nb07.cache_text(None, {}, [128], {})
    lengths = [128, 256, 512, 1024]
    one = {t: 4 * 8 * t * t * 4 for t in lengths}
    leads = _leads((1.0, 0.95, 1.05), (1.2, 1.15, 1.25), (2.4, 2.3, 2.5), (3, 2.9, 3.1))
    text = nb07.cache_text(("L3", 16 * 2**20), leads, lengths, {"one matrix": one}).splitlines()
    assert text[1] == "the L3 cache holds 16.0 MiB; SDPA vs written out at each length, above:"
    assert text[2] == "  " + nb07.cache_step(leads, lengths, one, 16 * 2**20, "one matrix")
    speed = bench.ratio_of("SDPA vs written out, T=1024", 2.0, 1.9, 2.1)
    assert nb07.compare_text(speed, 1024, 4 * 2**20, 2**20).endswith("4.0× less with SDPA")
    assert nb07.compare_text(speed, 1024, 2**20, 2 * 2**20).endswith("2.0× more with SDPA")
    at, names, _ = _sweep()
    points = list(at.values())
    assert nb07.oom_text(points, names, "cpu", 256) == "SDPA, math kernel ran out of memory at T=256 on cpu"
    assert nb07.oom_text(points[:2], names, "cpu", 256) == "no length ran out of memory on cpu, up to T=256"


def test_kernels_text_compares_each_with_the_fastest_and_names_a_tie():
    flash, math_, written = _t("flash", 1e-3, 0.9e-3, 1.1e-3), _t("math", 3e-3, 2.9e-3, 3.1e-3), _t("w", 4e-3, 3.9e-3, 4.1e-3)
    rows = [nb07.BackendRow("FLASH_ATTENTION", flash), nb07.BackendRow("MATH", math_),
            nb07.BackendRow("EFFICIENT_ATTENTION", None, "no kernel for these inputs"),
            nb07.BackendRow("written out", written)]
    lines = nb07.kernels_text(rows, "FLASH_ATTENTION").splitlines()
    assert lines[0] == str(flash) and lines[1].startswith(f"{math_} | ") and "FLASH_ATTENTION vs MATH" in lines[1]
    assert lines[2] == "EFFICIENT_ATTENTION  | not timed: no kernel for these inputs"
    assert lines[4] == "fastest kernel here: FLASH_ATTENTION; the default is FLASH_ATTENTION"
    tie = [nb07.BackendRow("FLASH_ATTENTION", flash), nb07.BackendRow("MATH", _t("m", 1.01e-3, 0.9e-3, 1.1e-3))]
    assert "cannot be told apart" in nb07.kernels_text(tie, "MATH").splitlines()[-1]


def test_parts_apart_and_gpu_elsewhere():
    one = [bench.ratio_of("MATH vs written out", 1.5, 1.4, 1.6)]
    assert nb07.parts_text(one) == f"\nfrom plain PyTorch to the same formula in C++: {one[0]}"
    two = one + [bench.ratio_of("FLASH vs MATH", 3.0, 2.8, 3.2)]
    assert nb07.parts_text(two).splitlines()[2] == f"from the unfused formula to the kernel PyTorch picks: {two[1]}"
    line = nb07.apart_line(_t("SDPA, T=1024", 2e-3, 1.9e-3, 2.1e-3), _t("SDPA, T=1024", 1e-3, 0.9e-3, 1.1e-3))
    assert line.startswith("  SDPA, T=1024: here 2 ms (1.9 ms–2.1 ms), section 5 1 ms (900 µs–1.1 ms)") and "2.00× its time" in line
    assert nb07.gpu_elsewhere(False).startswith("No CUDA GPU here") and "not the same quantity" in nb07.gpu_elsewhere(False)
    assert nb07.gpu_elsewhere(True).startswith("For comparison, ")


def test_flash_benchmark_flops_and_the_reference_kernels_in_its_unit(tmp_path, monkeypatch):
    # FlashAttention's benchmark: 4·B·T²·H·d forward, /2 causal, ×3.5 forward + backward
    assert nb07.flash_benchmark_flops(2, 3, 8, 4, causal=False) == 3.5 * 4 * 2 * 64 * 3 * 4
    assert nb07.flash_benchmark_flops(2, 3, 8, 4, causal=True) == 3.5 * 2 * 2 * 64 * 3 * 4
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    assert nb07.kernels_in_flash_units() == []
    from course_lib import report
    rep = report.Report("07_attention", "gpu", "cpu")
    rep.meta.update(device="NVIDIA Test GPU", device_type="cuda")
    rep.add("SDPA FLASH_ATTENTION, T=4096, section 6", 2.0, "ms", "fwd+bwd (4, 16, 4096, 64) bfloat16, causal, GPU")
    rep.add("SDPA, T=4096", 1.3, "ms", "NVIDIA Test GPU")  # no shape in its note: not converted
    report.record_reference({"07_attention": rep.to_dict()})
    tflops = nb07.flash_benchmark_flops(4, 16, 4096, 64, causal=True) / 2e-3 / 1e12
    assert nb07.kernels_in_flash_units() == [
        f"  SDPA FLASH_ATTENTION, T=4096, section 6: {tflops:.0f} TFLOP/s  (4, 16, 4096, 64) bfloat16, causal"]
    assert "FlashAttention's unit" in nb07.gpu_elsewhere(False)
