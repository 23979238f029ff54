"""course_lib.lessons.nb12: the online softmax, FlashAttention's tiled forward and backward
against SDPA and autograd, their memory against the written-out attention, and the exercise
checks."""

import doctest
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from course_lib import attention, bench, memory, roofline
from course_lib.lessons import nb12

pytestmark = pytest.mark.versioned  # Triton and SDPA: make test-oldest runs it


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
    mask = attention.causal_mask(t_q, t_k) if causal else None  # the written-out attention of notebook 07
    assert torch.allclose(attention.attention(q, k, v, mask)[0], want, atol=nb12.ATOL, rtol=nb12.RTOL)


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
        peaks["naive"].append(memory.peak_memory(lambda: attention.attention(q, k, v)[0], "cpu").peak_bytes)
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


# ---- the notebook's cells --------------------------------------------------------------------

NB12 = Path(__file__).resolve().parents[1] / "notebooks" / "12_kernels.ipynb"


def code_cells() -> list[str]:
    return ["".join(c["source"]) for c in json.loads(NB12.read_text())["cells"] if c["cell_type"] == "code"]


def cell(first: str) -> str:
    found = [c for c in code_cells() if c.startswith(first)]
    assert len(found) == 1, f"12 has one cell starting {first!r}"
    return found[0]


def solved(first: str, name: str, **extra):
    namespace = {"torch": torch, "math": math, **extra}
    exec(cell(first).split("\n\nnb12.")[0], namespace)
    return namespace[name]


def test_the_notebooks_online_softmax_and_tiled_attention_are_the_librarys():
    online = solved("def online_softmax", "online_softmax")
    tiled = solved("def tiled_attention", "tiled_attention")
    g = torch.Generator().manual_seed(5)
    x = torch.randn(3, 77, generator=g, dtype=torch.float64) * 30
    for block in (1, 7, 16, 77, 128):
        torch.testing.assert_close(online(x, block), nb12.online_softmax(x, block))
    q, k, v = (torch.randn(2, 3, 45, 16, generator=g, dtype=torch.float64) for _ in range(3))
    for block in (16, 32, 64):  # 45 rows: a short last tile for 16 and 32, one tile for 64
        o, lse = tiled(q, k, v, block)
        want_o, want_lse = nb12.flash_forward(q, k, v, block_q=block, block_k=block)
        torch.testing.assert_close(o, want_o)
        torch.testing.assert_close(lse, want_lse)
        torch.testing.assert_close(o, F.scaled_dot_product_attention(q, k, v))


def test_the_notebooks_autograd_function_is_flash_attentions():
    tiled = solved("def tiled_attention", "tiled_attention")
    function = solved("class FlashAttention", "FlashAttention", tiled_attention=tiled, BLOCK=16, nb12=nb12)
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(2, 2, 37, 16, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
    dy = torch.randn(2, 2, 37, 16, generator=g, dtype=torch.float64)
    ours = torch.autograd.grad(function.apply(q, k, v), (q, k, v), dy)
    want = torch.autograd.grad(nb12.flash_attention(q, k, v, block_q=16, block_k=16), (q, k, v), dy)
    for a, b in zip(ours, want):
        torch.testing.assert_close(a, b)


def test_the_rescaling_control_fails_only_where_the_maximum_moves():
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 2, 40, 16, generator=g) for _ in range(3))
    want = F.scaled_dot_product_attention(q, k, v)
    assert not torch.allclose(nb12.flash_forward(q, k, v, block_q=16, block_k=16, rescale=False)[0], want,
                              atol=nb12.ATOL, rtol=nb12.RTOL)
    torch.testing.assert_close(nb12.flash_forward(q, k, v, block_q=64, block_k=64, rescale=False)[0], want,
                               atol=nb12.ATOL, rtol=nb12.RTOL)  # one key block: nothing to rescale


def test_the_exercise_checks_pass_the_solutions_and_catch_wrong_answers():
    nb12.check_merge(solved("def merge", "merge"))
    mask = solved("def block_mask", "block_mask")
    nb12.check_block_mask(mask)
    nb12.check_written_out_bytes(solved("def written_out_bytes", "written_out_bytes"))
    with pytest.raises(AssertionError, match="once"):  # no mask: the last block runs past the end
        nb12.check_block_mask(lambda pid, block, n: torch.ones(block, dtype=torch.bool))
    with pytest.raises(AssertionError, match="once"):  # <= instead of <
        nb12.check_block_mask(lambda pid, block, n: pid * block + torch.arange(block) <= n)
    with pytest.raises(AssertionError, match="bool tensor"):
        nb12.check_block_mask(lambda pid, block, n: (pid * block + torch.arange(block) < n).int())
    with pytest.raises(AssertionError, match="rows, 1"):  # the (rows, 1) tensors left out
        nb12.check_written_out_bytes(lambda rows, cols, size: 8 * rows * cols * size)
    with pytest.raises(AssertionError):  # the fused count
        nb12.check_written_out_bytes(lambda rows, cols, size: 2 * rows * cols * size)


def test_bytes_moved_counts_each_operand_once_per_op():
    x = torch.zeros(8, 100)
    assert nb12.bytes_moved(lambda: torch.softmax(x, dim=-1)) == 2 * x.numel() * 4
    assert nb12.bytes_moved(lambda: x.view(800)) == 0  # a view moves nothing
    written = solved("def softmax_written_out", "softmax_written_out", triton=SimpleNamespace(jit=lambda f: f),
                     tl=SimpleNamespace(constexpr=int))
    torch.testing.assert_close(written(x + torch.arange(100.0)), nb12.softmax_written_out(x + torch.arange(100.0)))
    n, rows = x.numel() * 4, x.shape[0] * 4  # (5N + 2R) reads and (3N + 2R) writes, in bytes
    assert nb12.bytes_moved(lambda: written(x)) == nb12.bytes_moved(lambda: nb12.softmax_written_out(x)) == 8 * n + 4 * rows


def test_the_bytes_lines_list_each_op_and_the_total_against_the_fused_bytes():
    x = torch.zeros(8, 100)
    ops = roofline.count_ops(lambda: nb12.softmax_written_out(x))
    lines = nb12.bytes_lines(ops, 2 * x.numel() * 4).splitlines()
    assert len(lines) == len(ops) + 1 and [line.split()[0] for line in lines[:-1]] == [op.name for op in ops]
    assert lines[-1].startswith(f"written out: {len(ops)} kernels, 25.1 KiB; fused (torch.softmax") and \
        lines[-1].endswith(": 6.2 KiB, 4.0× less")  # 4-byte floats: 8N + 4R against 2N (N = 800, R = 8)


def test_a_speedup_is_set_against_the_bytes_prediction_only_when_clear_and_asked():
    faster = bench.ratio_of("torch.softmax vs written out", 3.0, 2.8, 3.2, more="faster", less="slower")
    assert nb12.against_bytes(faster, None) == str(faster)
    assert nb12.against_bytes(faster, 3.1).endswith("; the bytes predict 3.1×: as predicted")
    assert nb12.against_bytes(faster, 4.0).endswith("less: time other than memory traffic counts here")
    slow_fused = nb12.against_bytes(faster, 4.0, (0.5, 0.25))  # the cpu run: no version near the copy roof
    assert "this one moved its bytes at 25% of the copy bandwidth, the written-out one at 50%" in slow_fused
    assert "something else sets it, which this cell does not measure apart" in slow_fused
    cached = nb12.against_bytes(faster, 4.0, (1.3, 0.95))
    assert "faster than a copy: part of its traffic stayed in the caches" in cached
    assert nb12.against_bytes(faster, 4.0, (0.9, 0.9)).endswith("neither share explains the gap here")
    assert nb12.against_bytes(faster, 2.0).endswith("more than the bytes alone explain")
    unclear = bench.ratio_of("torch.softmax vs written out", 1.1, 0.9, 1.3)
    assert nb12.against_bytes(unclear, 3.0) == str(unclear)


def test_the_kernels_head_is_an_outline_that_says_how_much_of_it_is_shown():
    kernel = "\n".join(["#include <x.h>", 'extern "C" void kernel(const float* in_ptr0,', "    #pragma omp parallel",
                        *(f"    int filler{i};" for i in range(30)),
                        "        for(int64_t x0=0; x0<256L; x0+=1L)",
                        "            auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr0 + x0, 8);",
                        "            out_ptr0[static_cast<int64_t>(x0)] = static_cast<float>(tmp_acc0);"])
    head = nb12.kernel_head(kernel, "C++").splitlines()
    assert head[0] == ("torch.compile's kernel for the written-out softmax (C++): 36 lines, of which the 5 that show "
                       "its structure (loops, loads, stores); print(kernel) prints them all:")
    assert head[2].startswith('extern "C" void kernel(') and head[4].lstrip().startswith("for(") and len(head) == 7
    triton = "def triton_(in_ptr0, out_ptr2, xnumel):\n    x = 1\n    tmp0 = tl.load(in_ptr0 + r1)\n    tl.store(out_ptr2, tmp0)"
    assert nb12.kernel_head(triton, "Triton").splitlines()[2:] == ["def triton_(in_ptr0, out_ptr2, xnumel):",
                                                                    "    tmp0 = tl.load(in_ptr0 + r1)",
                                                                    "    tl.store(out_ptr2, tmp0)"]
    assert len(nb12.kernel_head(kernel * 9, "C++", lines=20).splitlines()) == 22  # at most 20 lines shown


def test_kernel_source_is_the_first_kernel_between_triple_quotes():
    generated = ("from torch._inductor import async_compile\n"
                 "triton_poi_0 = async_compile.triton('triton_poi_0', '''\n"
                 "import triton\n@triton.jit\ndef triton_poi_0(in_ptr0):\n    pass\n''', device_str='cuda')\n"
                 "cpp_1 = async_compile.cpp_pybinding(['float*'], '''\nextern \"C\" void kernel() {}\n''')\n")
    assert nb12.kernel_source(generated) == "import triton\n@triton.jit\ndef triton_poi_0(in_ptr0):\n    pass"
    with pytest.raises(ValueError, match="No kernel"):
        nb12.kernel_source("def call(args):\n    return args\n")


def test_without_triton_the_kernels_still_define_and_one_sentence_says_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "triton", None)  # `import triton` raises ImportError
    monkeypatch.setitem(sys.modules, "triton.language", None)
    triton, tl, why = nb12.import_triton()
    assert why == nb12.NO_TRITON
    namespace = {"torch": torch, "triton": triton, "tl": tl, "BLOCK": 32}
    for first in ("@triton.jit\ndef add_kernel", "def softmax_written_out", "@triton.jit\ndef attention_kernel"):
        exec(cell(first), namespace)  # defined, never launched
    assert triton.cdiv(10, 4) == 3 and triton.next_power_of_2(1000) == 1024 and triton.next_power_of_2(1) == 1


KERNELS_UNDER_THE_INTERPRETER = r"""
import math, os, sys
os.environ["TRITON_INTERPRET"] = "1"
import torch
import torch.nn.functional as F
from course_lib.lessons import nb12
sys.path.insert(0, "tests")
from test_nb12 import cell
triton, tl, why = nb12.import_triton()
assert why is None, why
for BLOCK in (16, 64):
    ns = {"torch": torch, "triton": triton, "tl": tl, "BLOCK": BLOCK, "math": math}
    for first in ("@triton.jit\ndef add_kernel", "def softmax_written_out", "@triton.jit\ndef attention_kernel"):
        exec(cell(first), ns)
    g = torch.Generator().manual_seed(BLOCK)
    x, y = torch.randn(2, 3000, generator=g)
    assert torch.equal(ns["add"](x, y, block=BLOCK * 16), x + y)
    s = torch.randn(7, 300, generator=g) * 10
    torch.testing.assert_close(ns["softmax"](s), torch.softmax(s, -1), atol=nb12.ATOL, rtol=nb12.RTOL)
    q, k, v = (torch.randn(2, 2, 70, 16, generator=g) for _ in range(3))
    torch.testing.assert_close(ns["attention"](q, k, v), F.scaled_dot_product_attention(q, k, v),
                               atol=nb12.ATOL, rtol=nb12.RTOL)
    wrong = ns["attention"](q, k, v * 0)  # a control: the comparison can fail
    assert not torch.allclose(wrong, F.scaled_dot_product_attention(q, k, v), atol=nb12.ATOL, rtol=nb12.RTOL)
print("kernels equal PyTorch under the interpreter")
"""


def test_the_notebooks_triton_kernels_equal_pytorch_under_the_interpreter():
    pytest.importorskip("triton")
    done = subprocess.run([sys.executable, "-c", KERNELS_UNDER_THE_INTERPRETER], cwd=NB12.parents[1],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "kernels equal PyTorch" in done.stdout


def test_a_triton_imported_before_the_interpreter_was_asked_for_is_one_sentence():
    pytest.importorskip("triton")
    script = ("import os, triton.language\nos.environ['TRITON_INTERPRET'] = '1'\n"
              "from course_lib.lessons import nb12\nprint(nb12.import_triton()[2])")
    done = subprocess.run([sys.executable, "-c", script], cwd=NB12.parents[1], capture_output=True, text=True,
                          timeout=300, env={k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "restart the kernel" in done.stdout


def test_short_digits_rounds_only_float_noise_and_says_so():
    text = "Triton 0.04095999896526337 ms vs torch 0.057583998888731 ms; 2048 x 4096, 1.5 ms"
    short = nb12.short_digits(text)
    assert short.startswith("Triton 0.04096 ms vs torch 0.05758 ms; 2048 x 4096, 1.5 ms")
    assert short.endswith("rounded here to 4 significant digits)")
    assert nb12.short_digits("2048 x 4096, 1.5 ms, 0.123456 s") == "2048 x 4096, 1.5 ms, 0.123456 s"
