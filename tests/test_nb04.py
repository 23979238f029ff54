"""Tests for course_lib.lessons.nb04: k micro-batches vs one big batch, and what breaks it."""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from course_lib.lessons import nb04
from course_lib import memory, models

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def images(n: int = 12, res: int = 8, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 3, res, res, generator=g), torch.randint(0, 6, (n,), generator=g)


def bn_cnn() -> nn.Module:
    torch.manual_seed(0)
    return models.SmallCNN(width=4, resolution=8)


def gn_cnn() -> nn.Module:
    return nb04.without_batchnorm(bn_cnn())


def test_without_batchnorm_swaps_every_bn_and_keeps_the_rest():
    bn = bn_cnn()
    gn = nb04.without_batchnorm(bn)
    assert not any(isinstance(m, nn.BatchNorm2d) for m in gn.modules())
    norms = [m for m in gn.modules() if isinstance(m, nn.GroupNorm)]
    assert [(m.num_groups, m.num_channels) for m in norms] == [(4, 4), (8, 8), (16, 16)]
    assert [m.num_groups for m in nb04.without_batchnorm(bn, groups=3).modules()
            if isinstance(m, nn.GroupNorm)] == [2, 2, 2]  # largest divisor of 4, 8, 16 up to 3
    assert sum(p.numel() for p in gn.parameters()) == sum(p.numel() for p in bn.parameters())
    assert torch.equal(gn.head.weight, bn.head.weight)
    assert any(isinstance(m, nn.BatchNorm2d) for m in bn.modules())  # the original is untouched


def test_split_batch_sizes_and_bad_input():
    x, y = images(10)
    assert [len(a) for a, _ in nb04.split_batch(x, y, 3)] == [4, 3, 3]
    assert torch.equal(torch.cat([b for _, b in nb04.split_batch(x, y, 3)]), y)
    with pytest.raises(ValueError, match="1 <= k <= batch size"):
        nb04.split_batch(x, y, 11)
    with pytest.raises(ValueError, match="disagree"):
        nb04.split_batch(x, y[:5], 2)


def test_weighted_micro_batches_equal_one_big_batch_even_when_unequal():
    model, (x, y) = gn_cnn(), images(10)
    ref = nb04.gradients(model, [(x, y)])
    for k in (2, 3, 10):
        got = nb04.gradients(model, nb04.split_batch(x, y, k))
        assert torch.allclose(got, ref, atol=nb04.FP32_ATOL, rtol=nb04.FP32_RTOL)
    assert ref.numel() == sum(p.numel() for p in model.parameters())


def test_wrong_scalings_measured():
    model, (x, y) = gn_cnn(), images(12)
    ref = nb04.gradients(model, [(x, y)])
    summed = nb04.gradients(model, nb04.split_batch(x, y, 4), scaling="sum")
    assert torch.allclose(summed, 4 * ref, atol=4 * nb04.FP32_ATOL, rtol=nb04.FP32_RTOL)
    equal = nb04.gradients(model, nb04.split_batch(x, y, 4), scaling="mean")
    assert torch.allclose(equal, ref, atol=nb04.FP32_ATOL, rtol=nb04.FP32_RTOL)  # equal sizes: fine
    unequal = [(x[:2], y[:2]), (x[2:], y[2:])]
    assert nb04.rel_error(nb04.gradients(model, unequal, scaling="mean"), ref) > 1e-2
    with pytest.raises(ValueError, match="Unknown scaling"):
        nb04.gradients(model, unequal, scaling="max")


def test_batchnorm_breaks_equivalence_and_running_stats():
    big, small = bn_cnn(), bn_cnn()
    x, y = images(12)
    g_big = nb04.gradients(big, [(x, y)])
    g_small = nb04.gradients(small, nb04.split_batch(x, y, 4))
    assert nb04.rel_error(g_small, g_big) > 1e-2
    (s_big, n_big), (s_small, n_small) = nb04.batchnorm_state(big), nb04.batchnorm_state(small)
    assert (n_big, n_small) == (1, 4)
    assert (s_big - s_small).abs().max() > 1e-3
    with pytest.raises(ValueError, match="no BatchNorm"):
        nb04.batchnorm_state(gn_cnn())


def test_token_weighting_matches_the_global_token_mean():
    torch.manual_seed(0)
    model = nb04.TinyLM(vocab=16, dim=8)
    group = nb04.token_micro_batches(((2, 12), (1, 3)), vocab=16)
    x, y = nb04.pad_to_one_batch(group)
    assert x.shape == y.shape == (3, 12) and (y == -100).sum() == 9
    ref = nb04.gradients(model, [(x, y)])
    assert torch.allclose(nb04.gradients(model, group), ref, atol=nb04.FP32_ATOL, rtol=nb04.FP32_RTOL)
    assert nb04.rel_error(nb04.gradients(model, group, scaling="mean"), ref) > 1e-2
    tokens = torch.cat([F.cross_entropy(model(a).flatten(0, 1), b.flatten(), reduction="none")
                        for a, b in group])
    logits = model(x)
    assert torch.allclose(F.cross_entropy(logits.flatten(0, 1), y.flatten()), tokens.mean())


def test_bf16_accumulation_step_close_to_fp32():
    x, y = images(16)
    ref_model = gn_cnn()
    ref = nb04.gradients(ref_model, [(x, y)])
    model = gn_cnn()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    grad = nb04.accumulation_step(model, opt, nb04.split_batch(x, y, 4), amp="bf16")
    one_batch = nb04.gradients(gn_cnn(), [(x, y)], amp="bf16")
    # bf16 rounds the forward and backward; accumulating in fp32 .grad adds nothing to that
    assert 0 < nb04.rel_error(grad, ref) < 1.1 * nb04.rel_error(one_batch, ref) + 1e-3
    assert nb04.rel_error(grad, ref) < 0.2  # a tiny random model: looser than the notebook's
    assert not torch.equal(model.head.weight, ref_model.head.weight)  # it stepped


def _fp16_step_updates_scale_once(device: str):
    x, y = (t.to(device) for t in images(16))
    model = gn_cnn().to(device)
    ref = nb04.gradients(model, [(x, y)])
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(device, init_scale=1024.0, growth_interval=1)
    grad = nb04.accumulation_step(model, opt, nb04.split_batch(x, y, 4), amp="fp16", scaler=scaler)
    assert scaler.get_scale() == 2048.0  # one update per optimizer step, not per micro-batch
    assert nb04.rel_error(grad, ref) < nb04.FP16_REL_TOL  # unscaled before it was read


def test_fp16_gradscaler_step_on_cpu():
    try:
        torch.amp.GradScaler("cpu")
    except Exception:
        pytest.skip("this PyTorch has no CPU GradScaler")
    _fp16_step_updates_scale_once("cpu")


@needs_cuda
@pytest.mark.gpu
def test_fp16_gradscaler_step_on_cuda():
    _fp16_step_updates_scale_once("cuda")


def test_accumulation_step_skips_an_overflowed_step_through_the_scaler():
    torch.manual_seed(0)
    model = nn.Linear(4, 3)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(8, 4, generator=g), torch.randint(0, 3, (8,), generator=g)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=1)
    before = [p.detach().clone() for p in model.parameters()]

    bad_x = x.clone()
    bad_x[5, 0] = float("inf")  # an overflow in the second micro-batch
    nb04.accumulation_step(model, opt, nb04.split_batch(bad_x, y, 2), scaler=scaler)
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before))  # step skipped
    assert scaler.get_scale() == 512.0  # and the scale halved

    ref = nb04.gradients(copy.deepcopy(model), [(x, y)])  # the true gradient, unscaled
    grad = nb04.accumulation_step(model, opt, nb04.split_batch(x, y, 2), scaler=scaler)
    assert torch.allclose(grad, ref, atol=nb04.FP32_ATOL, rtol=nb04.FP32_RTOL)  # read unscaled
    moved = torch.cat([(b - p.detach()).flatten() for p, b in zip(model.parameters(), before)])
    assert torch.allclose(moved, 0.1 * ref, atol=1e-6, rtol=1e-5)  # the step used the true gradient
    assert scaler.get_scale() == 1024.0  # a clean step grows it again (growth_interval=1)


def test_memory_stays_flat_with_accumulation():
    model = gn_cnn()
    x, y = images(64, res=16)
    rows = nb04.memory_sweep(model, x, y, micro=8, batches=[8, 64])
    assert rows[0].one_batch.method == "profiler memory events"
    assert rows[1].one_batch.peak_bytes > 3 * rows[0].one_batch.peak_bytes  # grows with the batch
    assert rows[1].accumulated.peak_bytes < 0.5 * rows[1].one_batch.peak_bytes  # stays down
    assert rows[1].k == 8 and "8 × 8" in nb04.memory_table(rows)
    with pytest.raises(ValueError, match="multiples of the micro-batch"):
        nb04.memory_sweep(model, x, y, micro=8, batches=[12])


def test_explore_reports_difference_and_memory():
    x, y = images(12)
    line = nb04.compare_micro_batches(gn_cnn(), x, y, 3)
    assert line.startswith("k=3: micro-batches of 4") and "peak" in line and "max |Δgrad|" in line


def test_exercise_check_accepts_right_and_explains_wrong(capsys):
    def right(model, micro_batches):
        n_real = sum((y != -100).sum() for _, y in micro_batches)
        for x, y in micro_batches:
            (F.cross_entropy(model(x), y) * (y != -100).sum() / n_real).backward()

    def by_samples(model, micro_batches):  # right without padding, wrong with it
        n = sum(len(y) for _, y in micro_batches)
        for x, y in micro_batches:
            (F.cross_entropy(model(x), y) * len(y) / n).backward()

    def summed(model, micro_batches):
        for x, y in micro_batches:
            F.cross_entropy(model(x), y).backward()

    def divided_by_k(model, micro_batches):
        for x, y in micro_batches:
            (F.cross_entropy(model(x), y) / len(micro_batches)).backward()

    rng = torch.get_rng_state()
    nb04.check_accumulation(right)
    assert capsys.readouterr().out.count("✓") == 3
    assert torch.equal(torch.get_rng_state(), rng)  # the learner's random stream is untouched
    with pytest.raises(AssertionError, match="4.00× the big-batch"):
        nb04.check_accumulation(summed)
    with pytest.raises(AssertionError, match=r"len\(y\) / \(all samples\)"):
        nb04.check_accumulation(divided_by_k)
    capsys.readouterr()
    with pytest.raises(AssertionError, match=r"Padding targets \(-100\)"):
        nb04.check_accumulation(by_samples)
    assert capsys.readouterr().out.count("✓") == 2  # by_samples passed the cases without padding


def _inline_step(model, opt, micro_batches, dtype=None, scaler=None):
    """Notebook 04's loop, in plain PyTorch: each loss × its share, one step after the k-th."""
    opt.zero_grad(set_to_none=True)
    n_total = sum(len(yb) for _, yb in micro_batches)
    for xb, yb in micro_batches:
        with torch.autocast("cpu", dtype=dtype, enabled=dtype is not None):
            loss = F.cross_entropy(model(xb), yb) * len(yb) / n_total
        (loss if scaler is None else scaler.scale(loss)).backward()
    if scaler is not None:
        scaler.unscale_(opt)
    grad = nb04.flat_grad(model)
    if scaler is None:
        opt.step()
    else:
        scaler.step(opt)
        scaler.update()
    return grad


def test_inline_loop_equals_the_library_loop_fp32_and_steps_like_one_batch():
    x, y = images(12)
    ref = gn_cnn()
    for k in (3, 5):  # 5 gives unequal micro-batches 3+3+2+2+2
        group = nb04.split_batch(x, y, k)
        model = gn_cnn()
        grad = _inline_step(model, torch.optim.SGD(model.parameters(), lr=0.1), group)
        assert torch.allclose(grad, nb04.gradients(gn_cnn(), group), atol=nb04.FP32_ATOL, rtol=nb04.FP32_RTOL)
        big = gn_cnn()
        big_grad = _inline_step(big, torch.optim.SGD(big.parameters(), lr=0.1), [(x, y)])
        assert torch.allclose(grad, big_grad, atol=nb04.FP32_ATOL, rtol=nb04.FP32_RTOL)
        assert all(torch.allclose(p, q, atol=1e-7, rtol=1e-5) for p, q in zip(model.parameters(), big.parameters()))
        assert not torch.equal(model.head.weight, ref.head.weight)  # it stepped


@pytest.mark.parametrize("amp", ["bf16", "fp16"])
def test_inline_amp_loop_equals_accumulation_step(amp):
    if amp == "fp16":
        try:
            torch.amp.GradScaler("cpu")
        except Exception:
            pytest.skip("this PyTorch has no CPU GradScaler")
    x, y = images(16)
    group = nb04.split_batch(x, y, 4)
    dtype = torch.bfloat16 if amp == "bf16" else torch.float16

    def scaler():
        return torch.amp.GradScaler("cpu", init_scale=256.0, growth_interval=1) if amp == "fp16" else None

    s_inline, s_lib = scaler(), scaler()
    m_inline, m_lib = gn_cnn(), gn_cnn()
    g_inline = _inline_step(m_inline, torch.optim.SGD(m_inline.parameters(), lr=0.1), group, dtype, s_inline)
    g_lib = nb04.accumulation_step(m_lib, torch.optim.SGD(m_lib.parameters(), lr=0.1), group, amp=amp,
                                   scaler=s_lib)
    assert torch.allclose(g_inline, g_lib, atol=nb04.FP32_ATOL, rtol=nb04.FP32_RTOL)
    assert all(torch.allclose(p, q, atol=1e-7, rtol=1e-5) for p, q in zip(m_inline.parameters(), m_lib.parameters()))
    assert 0 < nb04.rel_error(g_inline, nb04.gradients(gn_cnn(), [(x, y)])) < 0.2  # rounded, not broken
    if amp == "fp16":
        assert s_inline.get_scale() == s_lib.get_scale() == 512.0  # one update per optimizer step


@pytest.mark.parametrize("profile", ["smoke", "cpu", "gpu"])
def test_memory_sweep_starts_at_one_micro_batch(profile):
    """Section 5 sets the accumulated peak beside the sweep's first one-batch peak: that batch
    must be one micro-batch, and every batch a multiple of it."""
    from course_lib import profiles
    cfg = profiles.sizes("04_grad_accumulation", profile)
    assert cfg.mem_batches[0] == cfg.mem_micro
    assert all(b % cfg.mem_micro == 0 for b in cfg.mem_batches)


# -- issue 52: the words around the notebook's numbers, from one place ------------------------

def _reading(peak: int) -> memory.MemoryReading:
    return memory.MemoryReading("cpu", peak, method="profiler")


def test_model_facts_and_batchnorm_lines_read_the_gradients():
    model = gn_cnn()
    g = torch.ones(5)
    facts = nb04.model_facts(model, g, g).splitlines()
    n_tensors = sum(1 for p in model.parameters() if p.requires_grad)
    assert facts == [f"model: SmallCNN(width=16), GroupNorm(8) for BatchNorm, 5 parameters in {n_tensors} tensors",
                     "values compared: 5", "gradients equal: True"]
    assert nb04.model_facts(model, g + 1, g).endswith("gradients equal: False")
    text = nb04.batchnorm_lines(g + 0.5, g, 1e-7, (torch.zeros(3), 4), (torch.ones(3), 1), 4)
    assert "max |Δ| 5.00e-01, relative 5.00e-01, where GroupNorm's was 1.00e-07" in text
    assert text.endswith("running mean/var: max |Δ| 1.00e+00; updates: 4 vs 1")


def test_token_lines_show_each_micro_batch_and_the_three_means():
    group = [(torch.zeros(4, 3), torch.zeros(4, 3)), (torch.zeros(1, 2), torch.zeros(1, 2))]  # 12 and 2 tokens
    text = nb04.token_lines(group, [12, 2], [1.0, 3.0], 1.25, (12 * 1.0 + 2 * 3.0) / 14)
    assert text.splitlines()[1] == "micro-batch (1, 2):    2 tokens, mean loss 3.0000"
    assert text.endswith("token-weighted 1.2857 | mean of means 2.0000 (off by +0.7500)")


def test_direction_line_tells_a_turned_gradient_from_a_longer_one():
    ref = torch.tensor([1.0, 0.0])
    assert "cosine 1.000 (0° apart), lengths 2 vs 1" in nb04.direction_line(2 * ref, ref)
    assert nb04.direction_line(2 * ref, ref).endswith("how far the step goes more than where it points")
    assert nb04.direction_line(torch.tensor([1.0, 1.0]), ref).endswith("where the step points, not only how far")


def test_memory_lines_and_facts_read_the_sweep():
    rows = [nb04.MemoryRow(8, 8, 1, _reading(2**20), _reading(2**20)),
            nb04.MemoryRow(64, 8, 8, _reading(8 * 2**20), _reading(2 * 2**20))]
    state = memory.MemoryEstimate(2**10, 2**10, 2**11, 0, "adamw")
    text = nb04.memory_lines(rows, state).splitlines()
    assert text[1] == "effective batch 8 → 64 (8×): one-batch peak 8.00×, accumulated peak 2.00×"
    assert text[2].startswith("at batch 64: the accumulated peak is 0.25× the one-batch peak, lower | profiler")
    assert "it is 1.0 MiB above one batch of 8 (1.0 MiB)" in text[3]
    facts = nb04.memory_facts(rows)
    assert facts["accumulated/one-batch peak, largest"] == (0.25, "×", "batch 64")
    assert facts["peak memory, accumulated (largest)"] == (2.0, "MiB", "8 × 8")


def test_fp16_here_reads_the_flags_and_notebook_03s_timing():
    none = nb04.fp16_here([], ["avx512_fp16", "amx_fp16"], None)
    assert "fp16 ones found: none, so this CPU has no fp16 instructions" in none and "\n" not in none
    some = nb04.fp16_here(["amx_fp16"], ["amx_fp16"], {"value": 0.5, "spread": [0.4, 0.6], "note": "smallcnn"})
    assert "has fp16 instructions" in some and "ran 2.0× slower (1.7–2.5×) than fp32 on this CPU (smallcnn)" in some


def test_amp_lines_compare_micro_batches_with_one_batch():
    errs = {"bf16, one batch": 1e-3, "bf16, 4 micro-batches": 1.2e-3, "fp16 + GradScaler, one batch": 1e-4,
            "fp16 + GradScaler, 4 micro-batches": 2e-4}
    text = nb04.amp_lines(errs, 4, "cpu")
    assert "bf16: 4 micro-batches 1.20e-03 vs one batch 1.00e-03 (1.20×): accumulating in fp32 .grad adds no" in text
    assert "fp16 + GradScaler: 4 micro-batches 2.00e-04 vs one batch 1.00e-04 (2.00×): more error than" in text


def test_time_cost_lines_follow_the_ratio_and_add_the_reference_off_a_gpu():
    from course_lib import bench
    slow = bench.Ratio("x", 0.5, 0.45, 0.55)
    unclear = bench.Ratio("x", 0.99, 0.9, 1.1)
    text = nb04.time_cost_lines({(16, 64): (None, None, slow), (64, 256): (None, None, unclear)}, 4, 32, "cpu",
                                reference=True)
    assert "width 16 at 32 px, batch 64: K = 4 micro-batches take 2.00× the time of one batch" in text
    assert "batch 256: these repeats resolve no time cost of K = 4 micro-batches" in text and "On a GPU: " in text
    assert "On a GPU" not in nb04.time_cost_lines({(16, 64): (None, None, slow)}, 4, 32, "H100")


def test_run_lines_and_gap_line():
    from course_lib import train, verdicts
    h = train.History(step=[4, 8], loss=[1.0, 0.5])
    assert nb04.run_lines({(False, 1): h, (True, 4): h}, 64).splitlines() == [
        "GroupNorm | micro-batch   64 × 1 | 8 optimizer steps | last loss 0.5000",
        "BatchNorm | micro-batch   16 × 4 | 8 optimizer steps | last loss 0.5000"]
    controls = [verdicts.Control(1, h), verdicts.Control(-1, h)]
    line = nb04.gap_line("GroupNorm", 0.002, [0.001, -0.003], controls, 5)
    assert line.startswith("GroupNorm: accumulated − one batch over the last 5 records +0.0020 nats; controls "
                           "+0.0010 (nudged +1), -0.0030 (nudged -1) | ")
    assert line.endswith(verdicts.gap_verdict(0.002, [0.001, -0.003], "one batch"))
    assert "cannot tell rounding" not in nb04.gap_line("GroupNorm", 0.002, [0.001, -0.003], controls, 5,
                                                       same_algorithm=True)  # within the controls: no caveat
    beyond = nb04.gap_line("GroupNorm", 0.01, [0.001, -0.003], controls, 5, same_algorithm=True)
    assert "under-estimate" in beyond and "cannot tell rounding" in beyond.splitlines()[1]
    assert "\n" not in nb04.gap_line("BatchNorm", 0.01, [0.001, -0.003], controls, 5)  # another algorithm
