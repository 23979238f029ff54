"""Attention written out against PyTorch's: SDPA, nn.MultiheadAttention, FLOPs, the sweep."""

import math

import matplotlib
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from course_lib import attention as A
from course_lib import bench

matplotlib.use("Agg")

# the notebook's agreement in each format (A.agreement): float64 to rounding, float32 to 1e-5 + 1e-4,
# bfloat16 to 8 units of its last place
TOL = {dt: (A.agreement(dt)["atol"], A.agreement(dt)["rtol"]) for dt in (torch.float64, torch.float32, torch.bfloat16)}
SHAPES = [(1, 1, 1, 1, 4), (2, 3, 7, 7, 8), (3, 4, 16, 16, 16), (2, 2, 5, 9, 8), (1, 8, 33, 33, 64)]


def qkv(b, h, tq, tk, d, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, h, tq, d, generator=g, dtype=torch.float64)
    k, v = (torch.randn(b, h, tk, d, generator=g, dtype=torch.float64) for _ in range(2))
    return q.to(dtype), k.to(dtype), v.to(dtype)


def masks(b, tq, tk):
    """Every kind of mask the notebook uses, for shapes (B, Tq, Tk), with no empty row."""
    lengths = [max(1, tk - 2 * i) for i in range(b)]
    out = {"none": None, "causal": A.causal_mask(tq, tk),
           "padding right": A.padding_mask(lengths, tk)[:, None, None, :]}
    if tq == tk:
        out["causal + padding right"] = A.combine(A.padding_mask(lengths, tk), causal=True)
    return out


@pytest.mark.parametrize("dtype", list(TOL), ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_attention_equals_sdpa(shape, dtype):
    b, h, tq, tk, d = shape
    q, k, v = qkv(*shape, dtype=dtype)
    atol, rtol = TOL[dtype]
    for name, mask in masks(b, tq, tk).items():
        got, weights = A.attention(q, k, v, mask)
        want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        assert got.shape == (b, h, tq, d) and weights.shape == (b, h, tq, tk)
        torch.testing.assert_close(got, want, atol=atol, rtol=rtol, msg=name)
        sums = weights.float().sum(-1)
        torch.testing.assert_close(sums, torch.ones_like(sums), atol=1e-2 if dtype == torch.bfloat16 else 1e-5,
                                   rtol=0)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
def test_attention_gradients_equal_sdpa(dtype):
    atol, rtol = TOL[dtype]
    mask = A.combine(A.padding_mask([9, 4], 9), causal=True)
    grads = []
    for fn in (lambda q, k, v: A.attention(q, k, v, mask)[0],
               lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)):
        q, k, v = (t.requires_grad_() for t in qkv(2, 3, 9, 9, 8, dtype=dtype))
        fn(q, k, v).square().sum().backward()
        grads.append([q.grad, k.grad, v.grad])
    for got, want in zip(*grads):
        torch.testing.assert_close(got, want, atol=atol, rtol=rtol)


def test_agreement_is_float32s_and_8_units_of_the_last_place_in_16_bits():
    assert A.agreement(torch.float32) == dict(atol=1e-5, rtol=1e-4)
    assert A.agreement(torch.bfloat16) == dict(atol=8 * 2**-7, rtol=8 * 2**-7)
    assert A.agreement(torch.float16) == dict(atol=8 * 2**-10, rtol=8 * 2**-10)
    with pytest.raises(ValueError):
        A.agreement(torch.int64)


def _share(got: torch.Tensor, want: torch.Tensor, tol: dict) -> float:
    """The worst element's |Δ| as a share of what the agreement allows it (above 1: not close)."""
    got, want = got.double(), want.double()
    return ((got - want).abs() / (tol["atol"] + tol["rtol"] * want.abs())).max().item()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_16_bit_written_out_and_sdpa_agree_with_room_and_a_wrong_scale_does_not(dtype):
    """The notebook's 16-bit check (section 5) at the GPU sweep's head size and rows of up to 512 keys,
    on the CPU: 16-bit matmuls that add in float32 (as cuBLAS does) against SDPA's fused kernel."""
    tol = A.agreement(dtype)
    g = torch.Generator().manual_seed(0)
    q, k, v, dy = (torch.randn(1, 4, 512, 64, generator=g).to(dtype) for _ in range(4))
    future = torch.ones(512, 512, dtype=torch.bool).triu(1)

    def written_out(q, k, v, scale=64 ** -0.5):
        scores = ((q * scale) @ k.transpose(-2, -1)).masked_fill(future, float("-inf"))
        return scores.softmax(-1) @ v

    def out_and_grads(fn):
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        out = fn(*leaves)
        return out, torch.cat([t.flatten() for t in torch.autograd.grad(out, leaves, dy)])

    want, want_grads = out_and_grads(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    got, got_grads = out_and_grads(written_out)
    assert _share(got, want, tol) < 0.75 and _share(got_grads, want_grads, tol) < 0.75
    wrong, _ = out_and_grads(lambda q, k, v: written_out(q, k, v, scale=1.0))  # forgot the 1/√d
    assert _share(wrong, want, tol) > 1


def test_causal_mask_is_sdpa_is_causal_also_when_tq_differs_from_tk():
    for tq, tk in [(4, 4), (3, 6), (6, 3)]:
        q, k, v = qkv(1, 2, tq, tk, 8, dtype=torch.float64)
        torch.testing.assert_close(
            F.scaled_dot_product_attention(q, k, v, attn_mask=A.causal_mask(tq, tk)),
            F.scaled_dot_product_attention(q, k, v, is_causal=True))


def test_padding_masks():
    right = A.padding_mask([3, 1, 0], 4)
    left = A.padding_mask([3, 1, 0], 4, left=True)
    assert right.tolist() == [[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]]
    assert left.tolist() == [[0, 1, 1, 1], [0, 0, 0, 1], [0, 0, 0, 0]]
    assert right.dtype == torch.bool
    for bad in ([5], [-1], []):
        with pytest.raises(ValueError):
            A.padding_mask(bad, 4)


def test_fully_masked_query_gives_zeros_like_sdpa_and_finite_gradients():
    # left padding + causal: the padded queries may attend to nothing
    mask = A.combine(A.padding_mask([2, 5], 5, left=True), causal=True)
    q, k, v = (t.requires_grad_() for t in qkv(2, 2, 5, 5, 4, dtype=torch.float64))
    got, weights = A.attention(q, k, v, mask)
    assert (got[0, :, :3] == 0).all() and (weights[0, :, :3] == 0).all()
    torch.testing.assert_close(got, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    got.sum().backward()
    assert all(t.grad.isfinite().all() for t in (q, k, v))
    # what the guard is for: a plain softmax over a row of -inf is NaN
    assert q[0, 0, :1].new_full((1, 3), float("-inf")).softmax(-1).isnan().all()


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("padded", [False, True])
def test_module_equals_nn_multiheadattention(bias, causal, padded):
    torch.manual_seed(1)
    B, T, C, H = 3, 10, 32, 4
    ref = nn.MultiheadAttention(C, H, bias=bias, batch_first=True).double()
    ours = A.MultiHeadAttention(C, H, bias=bias).double().copy_from(ref)
    x = torch.randn(B, T, C, dtype=torch.float64)
    keep = A.padding_mask([10, 6, 1], T) if padded else None
    want, want_w = ref(x, x, x, need_weights=True, average_attn_weights=False,
                       attn_mask=~A.causal_mask(T) if causal else None,  # True = ignore, there
                       key_padding_mask=None if keep is None else ~keep)
    for sdpa in (True, False):
        ours.sdpa = sdpa
        got = ours(x, causal=causal, key_mask=keep)
        torch.testing.assert_close(got, want, atol=1e-12, rtol=1e-10)
    got, got_w = ours(x, causal=causal, key_mask=keep, need_weights=True)
    torch.testing.assert_close(got_w, want_w, atol=1e-12, rtol=1e-10)
    assert got_w.shape == (B, H, T, T)


def test_module_sdpa_and_written_out_agree_in_fp32_with_gradients():
    torch.manual_seed(2)
    a = A.MultiHeadAttention(48, 6, sdpa=True)
    b = A.MultiHeadAttention(48, 6, sdpa=False)
    b.load_state_dict(a.state_dict())
    x = torch.randn(2, 20, 48)
    ya, yb = a(x, causal=True), b(x, causal=True)
    torch.testing.assert_close(ya, yb, atol=1e-5, rtol=1e-4)
    ya.square().sum().backward()
    yb.square().sum().backward()
    for pa, pb in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(pa.grad, pb.grad, atol=1e-4, rtol=1e-4)


def test_module_dropout_only_in_training():
    m = A.MultiHeadAttention(16, 2, dropout=0.5, sdpa=False)
    x = torch.randn(2, 6, 16)
    m.eval()
    torch.testing.assert_close(m(x), m(x))
    m.train()
    assert not torch.equal(m(x), m(x))


def test_module_refuses_bad_shapes():
    with pytest.raises(ValueError):
        A.MultiHeadAttention(30, 4)
    with pytest.raises(ValueError):
        A.MultiHeadAttention(32, 4).copy_from(nn.MultiheadAttention(32, 2))
    with pytest.raises(ValueError):
        A.MultiHeadAttention(32, 4).copy_from(nn.MultiheadAttention(32, 4, bias=False))


@pytest.mark.parametrize("b,h,t,d", [(1, 1, 8, 4), (2, 4, 16, 8), (2, 2, 12, 32)])
def test_flops_formula_matches_pytorchs_counter(b, h, t, d):
    q, k, v = qkv(b, h, t, t, d)
    assert A.attention_flops(b, h, t, d) == A.counted_flops(lambda: A.attention(q, k, v))
    with sdpa_kernel(SDPBackend.MATH):  # the math kernel's matmuls are counted by every torch >= 2.6
        assert A.attention_flops(b, h, t, d) == A.counted_flops(lambda: F.scaled_dot_product_attention(q, k, v))
    q2 = qkv(b, h, 3, t, d)[0]
    assert A.attention_flops(b, h, 3, d, t) == A.counted_flops(lambda: A.attention(q2, k, v))


def test_exercise_checks_accept_the_answer_and_refuse_wrong_ones(capsys):
    A.check_flops(lambda b, h, t, d: 4 * b * h * t * t * d)
    A.check_cached_causal_mask(lambda tq, tk: torch.ones(tq, tk, dtype=torch.bool).tril(tk - tq))
    assert "✓" in capsys.readouterr().out
    for wrong in (lambda b, h, t, d: 2 * b * h * t * t * d, lambda b, h, t, d: 4 * b * t * t * d,
                  lambda b, h, t, d: 4 * b * h * t * d * d):
        with pytest.raises(AssertionError):
            A.check_flops(wrong)
    for wrong in (lambda tq, tk: torch.ones(tq, tk, dtype=torch.bool).tril(),  # top left: SDPA's is_causal
                  lambda tq, tk: torch.ones(tq, tk, dtype=torch.bool).triu(tk - tq),  # the future
                  lambda tq, tk: torch.ones(tq, tk).tril(tk - tq),  # float: an additive bias, not a mask
                  lambda tq, tk: torch.ones(tq, tk, dtype=torch.bool).tril(tk - tq - 1),  # forgets itself
                  lambda tq, tk: [[True]]):
        with pytest.raises(AssertionError):
            A.check_cached_causal_mask(wrong)


def test_backend_used_names_the_kernel_forced():
    q, k, v = qkv(1, 2, 16, 16, 8)
    for backend in (SDPBackend.MATH, SDPBackend.FLASH_ATTENTION):
        with sdpa_kernel(backend):
            assert A.backend_used(lambda: F.scaled_dot_product_attention(q, k, v)) == backend.name
    assert A.backend_used(lambda: q + 1) == "none"


def test_time_backends_times_cpu_kernels_and_reports_a_missing_one():
    q, k, v = qkv(1, 2, 32, 32, 8)
    rows = A.time_backends(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), "cpu",
                           backends=[SDPBackend.MATH, SDPBackend.EFFICIENT_ATTENTION], repeats=2)
    assert [r.backend for r in rows] == ["MATH", "EFFICIENT_ATTENTION"]
    assert rows[0].timing is not None and rows[0].timing.runs == 2 and rows[0].timing.median_s > 0
    assert rows[1].timing is None and rows[1].reason
    oom = A.time_backends(lambda: (_ for _ in ()).throw(torch.OutOfMemoryError("injected")), "cpu",
                          backends=[SDPBackend.MATH], repeats=1)
    assert oom[0].timing is None and oom[0].reason == "out of memory"
    assert [b.name for b in A.backends_for("cpu")] == ["FLASH_ATTENTION", "MATH"]
    assert len(A.backends_for("cuda")) == 4


def test_fwd_bwd_step_runs_backward_and_frees_gradients():
    seen = []

    def fn(q, k, v):
        seen.append((q.shape, q.requires_grad))
        return F.scaled_dot_product_attention(q, k, v)

    step = A.fwd_bwd(fn, (2, 3, 8, 4), "cpu")
    step()
    step()
    assert seen == [(torch.Size([2, 3, 8, 4]), True)] * 2


def test_sweep_measures_every_point_and_skips_after_out_of_memory():
    def naive(q, k, v):
        if q.shape[2] >= 32:
            raise torch.OutOfMemoryError("injected: pretend the scores do not fit")
        return A.attention(q, k, v, A.causal_mask(q.shape[2]))[0]

    def sdpa(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    seen = []
    points = A.sweep({"naive": naive, "sdpa": sdpa}, [64, 16, 32], batch=1, heads=2, head_dim=8,
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

    points = A.sweep({"grows": grows, "sdpa": lambda q, k, v: F.scaled_dot_product_attention(q, k, v)},
                     [8, 16], batch=1, heads=1, head_dim=4, device="cpu", repeats=2)
    assert [(p.name, p.length, p.oom, p.skipped) for p in points] == [
        ("grows", 8, True, False), ("sdpa", 8, False, False),
        ("grows", 16, False, True), ("sdpa", 16, False, False)]
    assert points[0].timing is None and points[0].peak_bytes is not None
    assert all(p.timing is not None for p in points if p.name == "sdpa")


def test_plot_sweep_draws_time_and_memory_and_names_out_of_memory():
    t = bench.timing_of([0.001, 0.002, 0.003], name="x", device="cpu")
    points = [A.Point("naive", 16, t, 1000), A.Point("naive", 32, oom=True),
              A.Point("naive", 64, skipped=True),
              A.Point("sdpa", 16, t, 500), A.Point("sdpa", 32, t, 900), A.Point("sdpa", 64, t, 1800)]
    fig = A.plot_sweep(points, title="test")
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
        A.sweep({"broken": broken}, [8], batch=1, heads=1, head_dim=4, device="cpu")


def test_growth_exponent_recovers_powers():
    t = [128, 256, 512, 1024]
    assert A.growth_exponent(t, [3 * x**2 for x in t]) == pytest.approx(2.0)
    assert A.growth_exponent(t, [0.5 * x for x in t]) == pytest.approx(1.0)
    for bad in (([128], [1.0]), ([1, 2], [1.0, 0.0]), ([1, 2], [1.0])):
        with pytest.raises(ValueError):
            A.growth_exponent(*bad)


def test_running_max_batch():
    g = torch.Generator().manual_seed(0)
    tokens, keep, targets = A.running_max_batch(200, 9, 7, min_len=2, generator=g)
    assert tokens.shape == keep.shape == targets.shape == (200, 9)
    lengths = keep.sum(1)
    assert lengths.min() >= 2 and lengths.max() <= 9
    assert (tokens[~keep] == A.PAD).all() and (tokens[keep] >= 1).all() and (tokens[keep] < 7).all()
    assert (targets[~keep] == -100).all()
    for row in range(5):
        real = tokens[row][keep[row]].tolist()
        assert targets[row][keep[row]].tolist() == [max(real[:i + 1]) for i in range(len(real))]
    assert keep[:, -1].all()  # left padding: the last position is always real
    with pytest.raises(ValueError):
        A.running_max_batch(2, 4, 7, min_len=0)


def test_share_on_max_is_one_for_the_perfect_answer_and_lower_for_uniform():
    tokens, keep, targets = A.running_max_batch(16, 8, 9, generator=torch.Generator().manual_seed(3))
    best = tokens.cummax(1).values
    target = (tokens[:, None, :] == best[:, :, None]) & keep[:, None, :] & A.causal_mask(8)
    perfect = (target / target.sum(-1, keepdim=True).clamp_min(1))[:, None]  # (B, 1, T, T)
    uniform = A.combine(keep, causal=True).float()
    uniform = uniform / uniform.sum(-1, keepdim=True).clamp_min(1)
    share = A.share_on_max(torch.cat([perfect, uniform], dim=1), tokens, keep)
    assert share.shape == (2,)
    assert share[0].item() == pytest.approx(1.0)
    assert 0 < share[1].item() < 0.9


def test_plot_weights_draws_the_chosen_head_and_example():
    tokens, keep, _ = A.running_max_batch(3, 6, 5, generator=torch.Generator().manual_seed(0))
    weights = torch.rand(3, 2, 6, 6)
    fig = A.plot_weights(weights, tokens, head=1, example=2)
    image = fig.axes[0].images[0].get_array()
    assert torch.allclose(torch.as_tensor(image.data), weights[2, 1])
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert labels == ["·" if int(t) == A.PAD else str(int(t)) for t in tokens[2]]
    for head, example in ((2, 0), (0, 3), (-1, 0)):
        with pytest.raises(ValueError):
            A.plot_weights(weights, tokens, head=head, example=example)
    import matplotlib.pyplot as plt
    plt.close("all")


def test_snippet_needs_math_and_overflows_float16():
    ns: dict = {}
    exec(A.SNIPPET_SOURCE, ns)
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
    rows = A.time_backends(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), "cuda",
                           repeats=2)
    assert {r.backend for r in rows} == {"FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH"}
    assert any(r.timing is not None for r in rows)
    for r in rows:
        if r.timing is not None:
            with sdpa_kernel(getattr(SDPBackend, r.backend)):
                got = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            torch.testing.assert_close(got.float(), want, **A.agreement(torch.bfloat16))
    assert A.backend_used(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)) in (
        "FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION")
    m = A.MultiHeadAttention(256, 4).cuda()
    x = torch.randn(2, 64, 256, device="cuda")
    y_sdpa = m(x, causal=True)
    m.sdpa = False
    torch.testing.assert_close(y_sdpa, m(x, causal=True), atol=1e-4, rtol=1e-3)


@pytest.mark.gpu
def test_cuda_float32_checks_hold_at_the_notebooks_tolerance():
    """The notebook's float32 equivalence checks, on the GPU (SDPA picks a CUDA kernel there)."""
    fp32 = dict(atol=1e-5, rtol=1e-4)
    q, k, v = (t.cuda().requires_grad_() for t in qkv(2, 4, 16, 16, 8))
    mask = A.combine(A.padding_mask([16, 8], 16, device="cuda"), causal=True)
    ours = A.attention(q, k, v, mask)[0]
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(ours, theirs, **fp32)
    for a, b in zip(torch.autograd.grad(ours.square().sum(), (q, k, v)),
                    torch.autograd.grad(theirs.square().sum(), (q, k, v))):
        torch.testing.assert_close(a, b, **fp32)
    ref = nn.MultiheadAttention(32, 4, batch_first=True).cuda()
    x = torch.randn(2, 16, 32, device="cuda")
    want = ref(x, x, x, attn_mask=~A.causal_mask(16, device="cuda"), need_weights=False)[0]
    torch.testing.assert_close(A.MultiHeadAttention(32, 4).cuda().copy_from(ref)(x, causal=True), want, **fp32)


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
    points = A.sweep({"naive": lambda q, k, v: A.attention(q, k, v)[0]}, [t], batch=4, heads=16,
                     head_dim=64, device="cuda", dtype=torch.bfloat16, repeats=1)
    assert points[0].oom and points[0].timing is None
