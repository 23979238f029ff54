"""Attention written out: masks, scaled dot-product attention, multi-head attention, its cost.

Notebook 07 types each piece inline; this module is the same code, tested against PyTorch's
``scaled_dot_product_attention`` and ``nn.MultiheadAttention``; the course's GPT model
(:mod:`course_lib.models`) builds on :class:`MultiHeadAttention`. Notebook 07's sweeps, kernels
and exercise checks are in :mod:`course_lib.lessons.nb07`.

Masks follow SDPA's convention: a boolean mask is True where a query *may* attend to a key.
(``nn.MultiheadAttention``'s ``attn_mask`` and ``key_padding_mask`` are the opposite: True
means "ignore".) Shapes: B batch, H heads, T (or Tq, Tk) positions, d head size, C = H·d.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F


def causal_mask(t_q: int, t_k: int | None = None, device: torch.device | str | None = None) -> torch.Tensor:
    """(Tq, Tk) bool, True where key j <= query i: each position sees itself and the past.

    Aligned at the top left, as ``scaled_dot_product_attention(..., is_causal=True)`` is.
    """
    t_k = t_q if t_k is None else t_k
    return torch.ones(t_q, t_k, dtype=torch.bool, device=device).tril()


def padding_mask(lengths: Sequence[int] | torch.Tensor, t: int, *, left: bool = False,
                 device: torch.device | str | None = None) -> torch.Tensor:
    """(B, T) bool, True at the real tokens of sequences of `lengths` padded to `t`.

    Padding sits after the tokens (right), or before them with ``left=True``.
    """
    lengths = torch.as_tensor(lengths, device=device)
    if lengths.ndim != 1 or len(lengths) == 0 or bool((lengths < 0).any()) or bool((lengths > t).any()):
        raise ValueError(f"Need one length per sequence, each in 0..{t}, got {lengths.tolist()}.")
    pos = torch.arange(t, device=device)  # (T,)
    if left:
        return pos >= (t - lengths)[:, None]  # (B, T)
    return pos < lengths[:, None]  # (B, T)


def sdpa_mask(key_mask: torch.Tensor | None = None, causal: bool = False, t_q: int | None = None,
              device: torch.device | str | None = None) -> torch.Tensor | None:
    """One boolean mask for SDPA from a (B, Tk) key mask and/or the causal rule.

    Returns (B, 1, Tq, Tk) (broadcast over heads), (Tq, Tk) for the causal rule alone, or
    None when there is nothing to mask. The causal rule alone needs `t_q` (and `device`).
    """
    if key_mask is None:
        if not causal:
            return None
        if t_q is None:
            raise ValueError("A causal mask alone needs the sequence length t_q.")
        return causal_mask(t_q, device=device)
    t_k = key_mask.shape[-1]
    mask = key_mask[:, None, None, :]  # (B, 1, 1, Tk)
    if causal:
        mask = mask & causal_mask(t_q or t_k, t_k, device=key_mask.device)  # (B, 1, Tq, Tk)
    return mask


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None,
              dropout_p: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q kᵀ / √d) v, written out; returns (output, weights).

    q: (..., Tq, d), k and v: (..., Tk, d); `mask` broadcasts to (..., Tq, Tk), True = may
    attend. Output (..., Tq, d); weights (..., Tq, Tk), each row summing to 1, or all 0 for a
    query that may attend to nothing (as SDPA gives; a plain softmax over -inf would give NaN).
    """
    scale = 1.0 / math.sqrt(q.size(-1))
    scores = q @ k.transpose(-2, -1) * scale  # (..., Tq, Tk)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)  # (..., Tq, Tk)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)  # a fully masked row: NaN -> 0
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    return weights @ v, weights  # (..., Tq, d)


class MultiHeadAttention(nn.Module):
    """Multi-head self-attention: one matmul for q, k and v, H heads of size C/H, an output
    projection. ``sdpa=True`` runs PyTorch's fused kernel, ``False`` the written-out
    :func:`attention`; both compute the same function (the tests assert it).

    The parameters have ``nn.MultiheadAttention``'s layout (``qkv.weight`` is its
    ``in_proj_weight``), so :meth:`copy_from` takes its weights as they are. `dropout` drops
    attention weights in training, as ``nn.MultiheadAttention`` does.
    """

    def __init__(self, d_model: int, n_heads: int, *, bias: bool = True, dropout: float = 0.0,
                 sdpa: bool = True) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"The width {d_model} must split evenly into {n_heads} heads.")
        self.n_heads, self.dropout, self.sdpa = n_heads, dropout, sdpa
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)  # q, k, v projections in one matmul
        self.proj = nn.Linear(d_model, d_model, bias=bias)  # mixes the heads' outputs

    def forward(self, x: torch.Tensor, *, causal: bool = False, key_mask: torch.Tensor | None = None,
                need_weights: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """(B, T, C) -> (B, T, C); with ``need_weights=True`` also the (B, H, T, T) weights.

        `key_mask`: (B, T) bool, True at real tokens (see :func:`padding_mask`). The weights
        need the written-out path, since SDPA does not return them.
        """
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)  # 3 × (B, T, C)
        q, k, v = (t.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2)
                   for t in (q, k, v))  # 3 × (B, H, T, d)
        p = self.dropout if self.training else 0.0
        weights = None
        if self.sdpa and not need_weights:
            if key_mask is None:  # is_causal lets the kernel skip the masked blocks
                y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=causal)
            else:
                y = F.scaled_dot_product_attention(q, k, v, attn_mask=sdpa_mask(key_mask, causal, T, x.device),
                                                   dropout_p=p)
        else:
            y, weights = attention(q, k, v, sdpa_mask(key_mask, causal, T, x.device), dropout_p=p)
        y = y.transpose(1, 2).reshape(B, T, C)  # (B, T, H, d) -> (B, T, C): heads side by side
        y = self.proj(y)
        return (y, weights) if need_weights else y

    @torch.no_grad()
    def copy_from(self, mha: nn.MultiheadAttention) -> "MultiHeadAttention":
        """Take the weights of an ``nn.MultiheadAttention`` of the same width and heads."""
        if mha.in_proj_weight is None or mha.num_heads != self.n_heads or \
                mha.embed_dim != self.proj.in_features or (mha.in_proj_bias is None) != (self.qkv.bias is None):
            raise ValueError("copy_from needs an nn.MultiheadAttention of the same width, heads and "
                             "bias, with equal query, key and value sizes.")
        self.qkv.weight.copy_(mha.in_proj_weight)  # (3C, C): rows of W_q, W_k, W_v
        self.proj.weight.copy_(mha.out_proj.weight)
        if self.qkv.bias is not None:
            self.qkv.bias.copy_(mha.in_proj_bias)
            self.proj.bias.copy_(mha.out_proj.bias)
        return self


AGREE_16BIT_ULPS = 8  # 16-bit agreement, in units of the format's last place (ε)


def agreement(dtype: torch.dtype) -> dict[str, float]:
    """The agreement asked of two correct attentions computed in `dtype`, on every element:
    |Δ| ≤ atol + rtol·|expected|, as keywords for ``check.close``.

    float32: atol 1e-5, rtol 1e-4: 7 significant digits, and two orders of the same additions
    differ in the last ones. float16 and bfloat16: atol = rtol = 8ε, ε = 2⁻¹⁰ and 2⁻⁷ the gap
    between 1 and the next number of the format (7.8e-3 and 6.3e-2): the written-out version
    rounds the scores, the weights and each gradient to 16 bits where a fused kernel keeps them
    in float32, so two correct results differ by a few ε (the tests see at most about half of
    this allowance). A wrong mask or scale differs by far more. float64: 1e-12 and 1e-10.
    """
    if dtype == torch.float64:
        return dict(atol=1e-12, rtol=1e-10)
    if dtype == torch.float32:
        return dict(atol=1e-5, rtol=1e-4)
    if dtype in (torch.float16, torch.bfloat16):
        eps = torch.finfo(dtype).eps
        return dict(atol=AGREE_16BIT_ULPS * eps, rtol=AGREE_16BIT_ULPS * eps)
    raise ValueError(f"No agreement is defined for {dtype}: use float64, float32, float16 or bfloat16.")
