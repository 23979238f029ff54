"""Notebook 12 (inside the kernel): softmax over blocks with a running maximum and sum (the
*online softmax*), and FlashAttention's forward and backward computed tile by tile in plain
PyTorch, as the notebook writes them out; the notebook's cells are tied to these by tests.

Attention over T keys for one query row is ``softmax(q · Kᵀ · scale) · V``. Written out, it
stores the T × T score matrix. FlashAttention (Dao et al., 2022; FlashAttention-2, Dao, 2023)
walks the keys in blocks of ``block_k`` and keeps, per query row, three running values: the
largest score so far ``m``, the sum ``l`` of ``exp(score - m)`` and the weighted sum ``acc``
of value rows. A new block with a larger maximum rescales the old ``l`` and ``acc`` by
``exp(m_old - m_new)`` (:func:`merge`). At the end ``o = acc / l`` and the log-sum-exp of the
row's scores is ``lse = m + log(l)``: the backward pass recomputes each block's probabilities
from it, ``p = exp(score - lse)``, instead of storing them. Memory: blocks of
``block_q × block_k`` scores, never T × T.

Shapes: ``q`` is (..., T_q, D), ``k`` and ``v`` (..., T_k, D); the leading dimensions (batch,
heads) broadcast as in ``torch.nn.functional.scaled_dot_product_attention``, which is the
reference. ``causal=True`` masks as SDPA's ``is_causal`` does (query i sees keys 0..i).
"""

from __future__ import annotations

import math
import os
import re
import types
from typing import Callable, Sequence

import torch

from course_lib import check, roofline, units
from course_lib.bench import Ratio
from course_lib.lessons.nb07 import growth_exponent, growth_words as growth_word  # noqa: F401 (notebook 12 calls it)

# float32 against SDPA: |Δ| of outputs and log-sum-exp stayed below 1e-6 for T up to 1024 here
ATOL, RTOL = 1e-5, 1e-4


# ---- online softmax ----------------------------------------------------------------------------

def merge(m_a: torch.Tensor, l_a: torch.Tensor, m_b: torch.Tensor,
          l_b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Two partial softmax sums of one row, each as (its maximum m, its sum of exp(x - m)),
    merged into the pair for both parts together: the larger maximum, each sum rescaled to it.

    >>> m, l = merge(torch.tensor(1.0), torch.tensor(1.0), torch.tensor(3.0), torch.tensor(1.0))
    >>> round(float(m), 3), round(float(l), 4)  # exp(1 - 3) + exp(3 - 3)
    (3.0, 1.1353)
    """
    m = torch.maximum(m_a, m_b)
    return m, l_a * torch.exp(m_a - _finite(m)) + l_b * torch.exp(m_b - _finite(m))


def _finite(m: torch.Tensor) -> torch.Tensor:
    """m where finite, else 0: exp(-inf - (-inf)) would be nan; exp(-inf - 0) is the 0 wanted
    for a part that has seen no value yet."""
    return torch.where(torch.isfinite(m), m, torch.zeros_like(m))


def online_softmax(x: torch.Tensor, block: int) -> torch.Tensor:
    """Softmax over the last dimension, reading `x` in blocks of `block` columns: the first
    pass keeps each row's running maximum and sum (:func:`merge`), the second writes
    ``exp(x - m) / l``. Any `block` from 1 up, dividing the length or not."""
    if block < 1:
        raise ValueError(f"block must be at least 1, got {block}.")
    m = torch.full(x.shape[:-1], -math.inf, dtype=x.dtype, device=x.device)
    l = torch.zeros_like(m)
    for j in range(0, x.shape[-1], block):
        xb = x[..., j:j + block]
        mb = xb.amax(dim=-1)
        m, l = merge(m, l, mb, torch.exp(xb - mb.unsqueeze(-1)).sum(dim=-1))
    return torch.exp(x - m.unsqueeze(-1)) / l.unsqueeze(-1)


# ---- FlashAttention, tile by tile ------------------------------------------------------------

def _scores(qb: torch.Tensor, kb: torch.Tensor, scale: float, causal: bool, i0: int,
            j0: int) -> torch.Tensor:
    """(..., bq, bk) scores of a query block starting at row i0 against a key block starting
    at column j0; causal: -inf where the key comes after the query."""
    s = qb @ kb.transpose(-2, -1) * scale
    if causal:
        rows = torch.arange(i0, i0 + qb.shape[-2], device=qb.device).unsqueeze(-1)
        cols = torch.arange(j0, j0 + kb.shape[-2], device=qb.device)
        s = s.masked_fill(cols > rows, -math.inf)
    return s


def _check_shapes(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_q: int, block_k: int,
                  causal: bool) -> None:
    if block_q < 1 or block_k < 1:
        raise ValueError(f"block_q and block_k must be at least 1, got {block_q} and {block_k}.")
    if k.shape[-2] != v.shape[-2] or q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q {tuple(q.shape)}, k {tuple(k.shape)} and v {tuple(v.shape)} do not fit: "
                         "k and v need as many rows, q and k as many columns.")
    if causal and q.shape[-2] != k.shape[-2]:
        raise ValueError("causal attention here needs as many queries as keys.")


def flash_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, block_q: int = 64,
                  block_k: int = 64, causal: bool = False, scale: float | None = None,
                  rescale: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention's output (..., T_q, D_v) and each query row's log-sum-exp (..., T_q), one
    query block at a time, walking its key blocks with a running maximum, sum and weighted sum
    of value rows. Causal: key blocks wholly after the query block are skipped.
    ``rescale=False`` is a control: it leaves out the rescaling by exp(m_old - m_new), the bug
    the comparison with SDPA must catch (it changes nothing when one key block covers T)."""
    _check_shapes(q, k, v, block_q, block_k, causal)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    t_q, t_k = q.shape[-2], k.shape[-2]
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    o = q.new_empty(*lead, t_q, v.shape[-1])
    lse = q.new_empty(*lead, t_q)
    for i0 in range(0, t_q, block_q):
        qb = q[..., i0:i0 + block_q, :]  # (..., bq, D)
        m = torch.full((*lead, qb.shape[-2]), -math.inf, dtype=q.dtype, device=q.device)
        l = torch.zeros_like(m)
        acc = q.new_zeros(*lead, qb.shape[-2], v.shape[-1])  # (..., bq, D_v)
        last = min(t_k, i0 + qb.shape[-2]) if causal else t_k
        for j0 in range(0, last, block_k):
            s = _scores(qb, k[..., j0:j0 + block_k, :], scale, causal, i0, j0)  # (..., bq, bk)
            m_new = torch.maximum(m, s.amax(dim=-1))
            p = torch.exp(s - _finite(m_new).unsqueeze(-1))
            factor = torch.exp(m - _finite(m_new))  # 0 on the first block, ≤ 1 after
            if not rescale:  # the control: what was summed against the old maximum kept as it is
                factor = torch.where(torch.isfinite(m), torch.ones_like(factor), factor)
            l = l * factor + p.sum(dim=-1)
            acc = acc * factor.unsqueeze(-1) + p @ v[..., j0:j0 + block_k, :]
            m = m_new
        o[..., i0:i0 + block_q, :] = acc / l.unsqueeze(-1)
        lse[..., i0:i0 + block_q] = m + torch.log(l)
    return o, lse


def flash_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
                   lse: torch.Tensor, do: torch.Tensor, *, block_q: int = 64, block_k: int = 64,
                   causal: bool = False,
                   scale: float | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients (dq, dk, dv) of attention from the output's gradient `do`, recomputing each
    tile's probabilities from the saved log-sum-exp (FlashAttention-2's backward): with
    ``delta = rowsum(do ∘ o)``, per tile ``p = exp(s - lse)``, ``dv += pᵀ·do``,
    ``ds = p ∘ (do·vᵀ - delta)``, ``dq += ds·k·scale``, ``dk += dsᵀ·q·scale``.
    Leading dimensions must be the same for all inputs (no broadcasting here)."""
    _check_shapes(q, k, v, block_q, block_k, causal)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    t_q, t_k = q.shape[-2], k.shape[-2]
    delta = (do * o).sum(dim=-1)  # (..., T_q)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    for j0 in range(0, t_k, block_k):
        kb, vb = k[..., j0:j0 + block_k, :], v[..., j0:j0 + block_k, :]
        first = (j0 // block_q) * block_q if causal else 0  # query blocks that see this key block
        for i0 in range(first, t_q, block_q):
            qb, dob = q[..., i0:i0 + block_q, :], do[..., i0:i0 + block_q, :]
            s = _scores(qb, kb, scale, causal, i0, j0)
            p = torch.exp(s - lse[..., i0:i0 + block_q].unsqueeze(-1))  # (..., bq, bk)
            dv[..., j0:j0 + block_k, :] += p.transpose(-2, -1) @ dob
            ds = p * (dob @ vb.transpose(-2, -1) - delta[..., i0:i0 + block_q].unsqueeze(-1))
            dq[..., i0:i0 + block_q, :] += ds @ kb * scale
            dk[..., j0:j0 + block_k, :] += ds.transpose(-2, -1) @ qb * scale
    return dq, dk, dv


class FlashAttention(torch.autograd.Function):
    """:func:`flash_forward` and :func:`flash_backward` as one autograd function: it saves q,
    k, v, the output and the log-sum-exp (O(T·D) memory), never the probabilities."""

    @staticmethod
    def forward(ctx, q, k, v, block_q: int, block_k: int, causal: bool):  # type: ignore[override]
        o, lse = flash_forward(q, k, v, block_q=block_q, block_k=block_k, causal=causal)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.blocks = (block_q, block_k, causal)
        return o

    @staticmethod
    def backward(ctx, do):  # type: ignore[override]
        q, k, v, o, lse = ctx.saved_tensors
        block_q, block_k, causal = ctx.blocks
        dq, dk, dv = flash_backward(q, k, v, o, lse, do, block_q=block_q, block_k=block_k, causal=causal)
        return dq, dk, dv, None, None, None


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, block_q: int = 64,
                    block_k: int = 64, causal: bool = False) -> torch.Tensor:
    """Attention's output through :class:`FlashAttention` (differentiable)."""
    return FlashAttention.apply(q, k, v, block_q, block_k, causal)


def reference_lse(q: torch.Tensor, k: torch.Tensor, *, causal: bool = False) -> torch.Tensor:
    """Each query row's log-sum-exp of its scaled scores, from the whole score matrix."""
    return torch.logsumexp(_scores(q, k, q.shape[-1] ** -0.5, causal, 0, 0), dim=-1)


# ---- memory against length ------------------------------------------------------------------

def added_growth_exponent(lengths: list[int], peaks: list[int]) -> float:
    """p in ``peak = a + b·Tᵖ``: the growth exponent (notebook 07's) of what each length adds
    to the peak of the one before, for lengths in a geometric progression (each twice the one
    before, say). A fixed part ``a`` (tiles, buffers) drops out: the peak of the tiled
    attention is such a fixed part plus the output, ∝ T (p = 1), the written-out one's ∝ T².

    >>> added_growth_exponent([100, 200, 400, 800], [7 + 3 * t for t in (100, 200, 400, 800)])
    1.0
    """
    ratios = {round(b / a, 9) for a, b in zip(lengths, lengths[1:])}
    if len(lengths) < 3 or len(ratios) != 1 or ratios == {1.0}:
        raise ValueError(f"Need three lengths or more in a geometric progression, got {lengths}.")
    added = [b - a for a, b in zip(peaks, peaks[1:])]
    return round(growth_exponent(lengths[1:], added), 9)


_KERNEL = re.compile(r"async_compile\.\w+\(.*?'{3}(.*?)'{3}", re.S)


def kernel_source(generated: str) -> str:
    """The first kernel in the code torch.compile generated (``run_and_get_code``): the Triton
    or C++ source Inductor hands to ``async_compile`` in triple quotes, without the Python
    around it."""
    found = _KERNEL.search(generated)
    if found is None:
        raise ValueError("No kernel found in the generated code: it holds no async_compile call.")
    return found.group(1).strip("\n")


# the lines that show a generated kernel's structure: its signature, its loops, its loads and stores
_OUTLINE = {"C++": re.compile(r"void\s+kernel\(|#pragma omp|\bfor\(|loadu\(|out_ptr\d+\[.*\]\s*=|\.store\("),
            "Triton": re.compile(r"^\s*def |\bfor |tl\.load\(|tl\.store\(|tl\.(max|sum)\(|exp\(")}


def kernel_head(kernel: str, language: str, lines: int = 20) -> str:
    """An outline of `kernel` (:func:`kernel_source`): of its lines, the first `lines` that show its
    structure (signature, loops, loads, stores and, in Triton, the reductions and the exp), under a
    line that says what they are and how to print the whole kernel."""
    rows = kernel.splitlines()
    pattern = _OUTLINE.get(language)
    shown = [r for r in rows if pattern is None or pattern.search(r)][:lines]
    indent = min((len(r) - len(r.lstrip()) for r in shown), default=0)
    return (f"torch.compile's kernel for the written-out softmax ({language}): {len(rows)} lines, of which the "
            f"{len(shown)} that show its structure (loops, loads, stores); print(kernel) prints them all:\n\n"
            + "\n".join(r[indent:] for r in shown))


# ---- bytes and time of the softmax -------------------------------------------------------------

def bytes_lines(ops: Sequence[roofline.OpCost], fused: int) -> str:
    """Section 4's count: each eager operation of the written-out softmax and its bytes, then
    their total against the `fused` bytes (one read and one write of every element)."""
    written = sum(op.bytes for op in ops)
    return "\n".join([*(f"  {op.name:<10} {units.fmt_bytes(op.bytes):>10}" for op in ops),
                      f"written out: {len(ops)} kernels, {units.fmt_bytes(written)}; fused (torch.softmax, or the "
                      f"Triton kernel's one load and one store per element): {units.fmt_bytes(fused)}, "
                      f"{written / fused:.1f}× less"])


def against_bytes(ratio: Ratio, by_bytes: float | None, shares: tuple[float, float] | None = None) -> str:
    """`ratio`'s line (a fused softmax against another version) and, when it is clearly faster
    than the written-out one (`by_bytes` given: the speed-up the bytes predict), how the two
    compare; `shares`: the written-out one's and this one's memory traffic as shares of the
    run's copy bandwidth, which say whether the bytes set either time."""
    if by_bytes is None or not (ratio.clear and ratio.value > 1):
        return str(ratio)
    head = f"{ratio}; the bytes predict {by_bytes:.1f}×: "
    if ratio.lo <= by_bytes <= ratio.hi:
        return head + "as predicted"
    if ratio.lo > by_bytes:
        return head + "more than the bytes alone explain"
    if shares is None:
        return head + "less: time other than memory traffic counts here"
    written, fused = shares
    traffic = (f"this one moved its bytes at {fused:.0%} of the copy bandwidth, the written-out one at {written:.0%}")
    if fused < 0.8:
        return (head + f"less: {traffic}; were the bytes to set its time, it would run near 100 %, so something else "
                "sets it, which this cell does not measure apart (the exp's instructions are one candidate)")
    if written > 1.0:
        return (head + f"less: {traffic}, faster than a copy: part of its traffic stayed in the caches, which the "
                "bytes' prediction counts as memory traffic")
    return head + f"less: {traffic}; neither share explains the gap here"


# ---- Triton ------------------------------------------------------------------------------------

_LONG = re.compile(r"(?<![\w.])\d+\.\d{7,}(?![\d])")  # a float printed with 7 or more decimals


def short_digits(text: str, digits: int = 4) -> str:
    """`text` with every number of 7 or more decimals (a CSV's float noise, 0.04095999896526337)
    rounded to `digits` significant digits for display (0.04096), and a note saying so; text
    without such numbers comes back unchanged."""
    short, n = _LONG.subn(lambda m: f"{float(m.group()):.{digits}g}", text)
    return short + (f"\n(numbers of 7 or more decimals rounded here to {digits} significant digits)" if n else "")


NO_TRITON = ("Triton is not installed here: it comes with PyTorch's Linux wheels (`pip install torch` on "
             "Linux, or a Colab notebook), and has no official release for macOS or Windows; sections 1-3 "
             "and PyTorch's own kernels run without it.")


def import_triton() -> tuple[types.ModuleType | types.SimpleNamespace,
                             types.ModuleType | types.SimpleNamespace, str | None]:
    """``(triton, triton.language, None)``, or where Triton cannot run kernels here, stand-ins
    and one sentence why: stand-ins whose ``jit`` returns the function as it is and whose
    ``tl.constexpr`` is a plain annotation, so that the notebook's kernels can still be defined
    (and read) and only their launches are skipped. On a CUDA GPU Triton also needs compute
    capability 7.0 or newer (what PyTorch's own ``has_triton`` asks). Without a GPU, set
    ``TRITON_INTERPRET=1`` before the kernels are defined: Triton's interpreter then runs them
    on CPU tensors (through NumPy). Triton reads the variable when it is imported, and
    ``torch.utils.flop_counter`` (so ``course_lib.roofline``) and ``torch.compile`` import it:
    set it before those imports."""
    stand_in = (types.SimpleNamespace(jit=lambda fn: fn, cdiv=lambda a, b: -(-a // b),
                                      next_power_of_2=lambda n: 1 << max(0, n - 1).bit_length()),
                types.SimpleNamespace(constexpr=int))
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return (*stand_in, NO_TRITON)
    wanted = os.environ.get("TRITON_INTERPRET") == "1"
    if wanted != (type(tl.max).__name__ == "InterpretedFunction"):  # Triton's own helpers, made at its import
        return (*stand_in, "Triton was imported in this process before TRITON_INTERPRET was "
                           f"{'set' if wanted else 'unset'}, so its own functions and new kernels would not "
                           "match: restart the kernel and run the cells from the top.")
    if torch.cuda.is_available() and torch.cuda.get_device_capability() < (7, 0):
        major, minor = torch.cuda.get_device_capability()
        return (*stand_in, f"This GPU has compute capability {major}.{minor}; Triton needs 7.0 or newer "
                           "(a V100, T4 or later), so its kernels are skipped here.")
    return triton, tl, None


def softmax_written_out(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension as five eager operations (notebook 12's cell): the
    maximum, the subtraction, the exp, the sum and the division, each its own kernel."""
    m = x.amax(dim=-1, keepdim=True)  # (rows, 1)
    e = torch.exp(x - m)  # (rows, cols)
    return e / e.sum(dim=-1, keepdim=True)


def bytes_moved(fn: Callable[[], object]) -> int:
    """The bytes that the ATen ops `fn` runs read and write, each operand once per op
    (``roofline.count_ops``): an op's ideal traffic, what a kernel for it must move at least."""
    return int(sum(op.bytes for op in roofline.count_ops(fn)))


# ---- exercise checks -------------------------------------------------------------------------

@check.exercise()
def check_merge(fn: Callable[..., tuple[torch.Tensor, torch.Tensor]]) -> None:
    """Exercise 1: ``fn(m_a, l_a, m_b, l_b)`` merges two rows' partial softmax sums, each a
    maximum m and a sum of exp(x - m), into those of the two parts together."""
    g = torch.Generator().manual_seed(12)
    for shift in (0.0, 40.0, -40.0, 1000.0):  # a part far above or below: exp(1000) overflows float64
        a = torch.randn(6, 5, generator=g, dtype=torch.float64)
        b = torch.randn(6, 9, generator=g, dtype=torch.float64) + shift
        parts = [(x.amax(-1), torch.exp(x - x.amax(-1, keepdim=True)).sum(-1)) for x in (a, b)]
        m, l = fn(*parts[0], *parts[1])
        both = torch.cat([a, b], dim=-1)
        want_m = both.amax(-1)
        want_l = torch.exp(both - want_m.unsqueeze(-1)).sum(-1)
        if not (torch.allclose(m, want_m) and torch.allclose(l, want_l)):
            raise AssertionError(f"merge with a second part shifted by {shift:+g}: the maximum or "
                                 "the sum differs from those of both parts at once; rescale each "
                                 "sum to the larger maximum.")
        if not torch.isfinite(l).all():
            raise AssertionError("merge overflowed: exp of a large number; subtract the new maximum first.")
    check.passed("merge: equals the maximum and sum of both parts, parts 1000 apart included")


@check.exercise()
def check_block_mask(fn: Callable[[int, int, int], torch.Tensor]) -> None:
    """Exercise 2: ``fn(pid, block, n)`` is the (block,) bool mask of program `pid`'s positions that
    hold one of the n elements: over all programs the masks must pick every element once."""
    for n, block in ((1000, 256), (1024, 256), (5, 8), (1, 16), (4097, 1024)):
        picked = []
        for pid in range(-(-n // block)):  # triton.cdiv(n, block) programs
            mask = torch.as_tensor(fn(pid, block, n))
            if mask.shape != (block,) or mask.dtype != torch.bool:
                raise AssertionError(f"program {pid}: the mask must be a bool tensor of shape ({block},), "
                                     f"got {mask.dtype} {tuple(mask.shape)}.")
            picked += (pid * block + torch.arange(block))[mask].tolist()
        if picked != list(range(n)):
            missing = sorted(set(range(n)) - set(picked))[:3]
            extra = sorted(set(picked) - set(range(n)))[:3]
            raise AssertionError(f"n = {n}, blocks of {block}: the masks must pick elements 0..{n - 1} once "
                                 f"each; missing {missing}, beyond the end {extra}.")
    check.passed("block mask: every element picked once, none past the end, in every case")


@check.exercise()
def check_written_out_bytes(fn: Callable[[int, int, int], int]) -> None:
    """Exercise 3: ``fn(rows, cols, itemsize)``, the bytes the five operations of the
    written-out softmax (:func:`softmax_written_out`) read and write in all, against the bytes
    counted as they run (:func:`bytes_moved`) on such tensors."""
    for rows, cols, dtype in ((4, 1000, torch.float32), (3, 100, torch.float16), (2, 64, torch.float64)):
        x = torch.zeros(rows, cols, dtype=dtype)
        want = bytes_moved(lambda: softmax_written_out(x))
        got = fn(rows, cols, x.element_size())
        if got != want:
            raise AssertionError(f"{rows} × {cols} {str(dtype)[6:]}: {got} bytes, counted {want}. Each of the five "
                                 "operations reads its inputs and writes its output; the maximum and the sum are "
                                 "(rows, 1) tensors, written once and read once more.")
    check.passed("written-out softmax bytes: equal to those counted in every case")
