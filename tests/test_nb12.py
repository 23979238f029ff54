"""course_lib.lessons.nb12: the online softmax, FlashAttention's tiled forward and backward
against SDPA and autograd, their memory against the written-out attention, and the exercise
checks."""

import doctest
import math

import pytest
import torch
import torch.nn.functional as F

from course_lib import memory
from course_lib.lessons import nb12


def test_the_docstring_examples_hold():
    assert doctest.testmod(nb12).failed == 0


@pytest.mark.parametrize("block", [1, 3, 8, 37, 100])
def test_online_softmax_equals_torch_for_any_block_and_large_values(block):
    x = torch.randn(4, 37) * 5
    assert torch.allclose(nb12.online_softmax(x, block), torch.softmax(x, -1), atol=1e-7, rtol=1e-6)
    big = x + 1000  # exp(1000) overflows: only a running maximum keeps it finite
    assert torch.allclose(nb12.online_softmax(big, block), torch.softmax(big, -1), atol=1e-7, rtol=1e-6)


def test_merge_is_the_pair_of_the_whole_row_in_either_order():
    a, b = torch.randn(5, 7), torch.randn(5, 4) + 30
    pair = [(x.amax(-1), torch.exp(x - x.amax(-1, keepdim=True)).sum(-1)) for x in (a, b)]
    whole = torch.cat([a, b], -1)
    m = whole.amax(-1)
    for first, second in (pair, pair[::-1]):
        got_m, got_l = nb12.merge(*first, *second)
        assert torch.equal(got_m, m)
        assert torch.allclose(got_l, torch.exp(whole - m.unsqueeze(-1)).sum(-1))
    empty = (torch.full((5,), -math.inf), torch.zeros(5))  # a part that has seen nothing yet
    got_m, got_l = nb12.merge(*empty, *pair[0])
    assert torch.equal(got_m, pair[0][0]) and torch.allclose(got_l, pair[0][1])


CASES = [(64, 64, 16, 16, False), (100, 100, 16, 24, False), (33, 70, 8, 32, False),
         (100, 100, 16, 24, True), (64, 64, 64, 64, True), (50, 50, 7, 13, True), (5, 9, 16, 16, False)]


@pytest.mark.parametrize("t_q,t_k,block_q,block_k,causal", CASES)
def test_flash_forward_equals_sdpa_outputs_and_log_sum_exp(t_q, t_k, block_q, block_k, causal):
    q, k, v = torch.randn(2, 3, t_q, 16), torch.randn(2, 3, t_k, 16), torch.randn(2, 3, t_k, 16)
    o, lse = nb12.flash_forward(q, k, v, block_q=block_q, block_k=block_k, causal=causal)
    want = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    assert torch.allclose(o, want, atol=nb12.ATOL, rtol=nb12.RTOL), (o - want).abs().max()
    assert torch.allclose(lse, nb12.reference_lse(q, k, causal=causal), atol=nb12.ATOL, rtol=nb12.RTOL)
    assert torch.allclose(nb12.naive_attention(q, k, v, causal=causal), want, atol=nb12.ATOL, rtol=nb12.RTOL)


@pytest.mark.parametrize("t_q,t_k,block_q,block_k,causal", CASES)
def test_flash_backward_equals_autograd_through_sdpa(t_q, t_k, block_q, block_k, causal):
    shapes = [(2, 3, t_q, 16), (2, 3, t_k, 16), (2, 3, t_k, 16)]
    ours = [torch.randn(s, dtype=torch.float64, requires_grad=True) for s in shapes]
    ref = [t.detach().clone().requires_grad_() for t in ours]
    out = nb12.flash_attention(*ours, block_q=block_q, block_k=block_k, causal=causal)
    grad = torch.randn_like(out)
    out.backward(grad)
    F.scaled_dot_product_attention(*ref, is_causal=causal).backward(grad)
    for name, a, b in zip("qkv", ours, ref):
        assert torch.allclose(a.grad, b.grad, atol=1e-10, rtol=1e-9), f"d{name}: {(a.grad - b.grad).abs().max()}"


def test_a_forward_that_forgets_to_rescale_is_caught():
    """The check the tests make can fail: without the rescaling of the running sums by
    exp(m_old - m_new), the output differs from SDPA's far beyond the tolerance."""
    q, k, v = torch.randn(1, 64, 16) * 3, torch.randn(1, 64, 16) * 3, torch.randn(1, 64, 16)
    scale = 16 ** -0.5
    m = torch.full((1, 64), -math.inf)
    l, acc = torch.zeros(1, 64), torch.zeros(1, 64, 16)
    for j0 in range(0, 64, 16):
        s = q @ k[:, j0:j0 + 16].transpose(-2, -1) * scale
        m = torch.maximum(m, s.amax(-1))
        p = torch.exp(s - m.unsqueeze(-1))
        l, acc = l + p.sum(-1), acc + p @ v[:, j0:j0 + 16]  # the bug: old sums not rescaled
    wrong = acc / l.unsqueeze(-1)
    assert not torch.allclose(wrong, F.scaled_dot_product_attention(q, k, v), atol=nb12.ATOL, rtol=nb12.RTOL)


def test_bad_blocks_and_shapes_are_one_sentence():
    q = torch.randn(1, 8, 4)
    with pytest.raises(ValueError, match="block_q and block_k"):
        nb12.flash_forward(q, q, q, block_q=0)
    with pytest.raises(ValueError, match="do not fit"):
        nb12.flash_forward(q, q, torch.randn(1, 9, 4))
    with pytest.raises(ValueError, match="as many queries as keys"):
        nb12.flash_forward(q, torch.randn(1, 9, 4), torch.randn(1, 9, 4), causal=True)
    with pytest.raises(ValueError, match="block must be"):
        nb12.online_softmax(q, 0)


def test_tiled_memory_adds_a_linear_part_the_written_out_a_quadratic_one():
    """The written-out attention holds T × T scores: what doubling T adds to its peak grows as
    T²; the tiled one holds the output (T × D) and blocks of a fixed size: linear."""
    lengths, peaks = [128, 256, 512], {"naive": [], "tiled": []}
    for t in lengths:
        q, k, v = (torch.randn(1, 2, t, 32) for _ in range(3))
        peaks["naive"].append(memory.peak_memory(lambda: nb12.naive_attention(q, k, v), "cpu").peak_bytes)
        peaks["tiled"].append(memory.peak_memory(
            lambda: nb12.flash_forward(q, k, v, block_q=64, block_k=64), "cpu").peak_bytes)
    naive, tiled = (nb12.added_growth_exponent(lengths, peaks[n]) for n in ("naive", "tiled"))
    assert 1.9 < naive < 2.1 and 0.9 < tiled < 1.1, (naive, tiled, peaks)
    assert peaks["naive"][-1] > 2 * 512 * 512 * 4 * 2  # scores and probabilities of 2 heads, float32
    assert peaks["tiled"][-1] < peaks["naive"][-1] / 10


def test_the_added_growth_exponent_needs_a_geometric_progression():
    assert nb12.added_growth_exponent([1, 2, 4], [5 + t * t for t in (1, 2, 4)]) == pytest.approx(2)
    for lengths in ([1, 2], [1, 2, 3], [2, 2, 2]):
        with pytest.raises(ValueError, match="geometric progression"):
            nb12.added_growth_exponent(lengths, [1] * len(lengths))


def test_the_merge_check_accepts_the_answer_and_refuses_wrong_ones(capsys):
    nb12.check_merge(nb12.merge)
    assert "✓" in capsys.readouterr().out
    wrongs = [lambda ma, la, mb, lb: (torch.maximum(ma, mb), la + lb),  # sums not rescaled
              lambda ma, la, mb, lb: (ma, la + lb * torch.exp(mb - ma)),  # the first maximum kept
              lambda ma, la, mb, lb: (torch.maximum(ma, mb), (la * ma.exp() + lb * mb.exp())
                                      / torch.maximum(ma, mb).exp())]  # right in exact arithmetic, overflows
    for wrong in wrongs:
        with pytest.raises(AssertionError):
            nb12.check_merge(wrong)
