"""course_lib.attention (core): attention written out against PyTorch's SDPA and nn.MultiheadAttention, FLOPs."""

import matplotlib
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from course_lib import attention as A
from course_lib import roofline

pytestmark = pytest.mark.versioned  # SDPA: make test-oldest runs it

matplotlib.use("Agg")

# the agreement asked in each format (A.agreement): float64 to rounding, float32 to 1e-5 + 1e-4,
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
        out["causal + padding right"] = A.sdpa_mask(A.padding_mask(lengths, tk), causal=True)
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
    mask = A.sdpa_mask(A.padding_mask([9, 4], 9), causal=True)
    grads = []
    for fn in (lambda q, k, v: A.attention(q, k, v, mask)[0],
               lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)):
        q, k, v = (t.requires_grad_() for t in qkv(2, 3, 9, 9, 8, dtype=dtype))
        fn(q, k, v).square().sum().backward()
        grads.append([q.grad, k.grad, v.grad])
    for got, want in zip(*grads):
        torch.testing.assert_close(got, want, atol=atol, rtol=rtol)


def _share(got: torch.Tensor, want: torch.Tensor, tol: dict) -> float:
    """The worst element's |Δ| as a share of what the agreement allows it (above 1: not close)."""
    got, want = got.double(), want.double()
    return ((got - want).abs() / (tol["atol"] + tol["rtol"] * want.abs())).max().item()


def test_agreement_is_float32s_and_8_units_of_the_last_place_in_16_bits():
    assert A.agreement(torch.float32) == dict(atol=1e-5, rtol=1e-4)
    assert A.agreement(torch.bfloat16) == dict(atol=8 * 2**-7, rtol=8 * 2**-7)
    assert A.agreement(torch.float16) == dict(atol=8 * 2**-10, rtol=8 * 2**-10)
    with pytest.raises(ValueError):
        A.agreement(torch.int64)


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
    mask = A.sdpa_mask(A.padding_mask([2, 5], 5, left=True), causal=True)
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
    """Attention's two matmuls, q kᵀ and weights·v: 2 · 2·B·H·Tq·Tk·d FLOPs (07's exercise)."""
    def formula(t_q: int, t_k: int) -> int:
        return 4 * b * h * t_q * t_k * d

    q, k, v = qkv(b, h, t, t, d)
    assert formula(t, t) == roofline.counted_flops(lambda: A.attention(q, k, v))
    with sdpa_kernel(SDPBackend.MATH):  # the math kernel's matmuls are counted by every torch >= 2.6
        assert formula(t, t) == roofline.counted_flops(lambda: F.scaled_dot_product_attention(q, k, v))
    q2 = qkv(b, h, 3, t, d)[0]
    assert formula(3, t) == roofline.counted_flops(lambda: A.attention(q2, k, v))


@pytest.mark.gpu
def test_cuda_float32_checks_hold_at_the_notebooks_tolerance():
    """The notebook's float32 equivalence checks, on the GPU (SDPA picks a CUDA kernel there)."""
    fp32 = dict(atol=1e-5, rtol=1e-4)
    q, k, v = (t.cuda().requires_grad_() for t in qkv(2, 4, 16, 16, 8))
    mask = A.sdpa_mask(A.padding_mask([16, 8], 16, device="cuda"), causal=True)
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


