"""Notebook 08 (Transformer training): the exercise checks."""

from __future__ import annotations

from typing import Callable

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from course_lib import check
from course_lib.models import GPT, GPTConfig
from course_lib.roofline import counted_flops


@check.exercise()
def check_gpt_forward_flops_per_token(fn: Callable[[int, int, int, int], float]) -> None:
    """Exercise (GPT training): `fn(n_params, n_layer, block_size, n_embd)` must give the FLOPs
    per token of a GPT's forward pass over a full context (inference without a KV cache) to
    within 3 % of what FlopCounterMode counts in a forward pass of small GPTs (biases and
    LayerNorms are the difference)."""
    g = torch.Generator().manual_seed(0)  # the learner's random stream is left alone
    for layers, heads, width, t in [(2, 4, 64, 32), (3, 2, 128, 64), (1, 4, 64, 256)]:
        with torch.random.fork_rng():
            model = GPT(GPTConfig(vocab_size=128, block_size=t, n_layer=layers, n_head=heads,
                                  n_embd=width))
        idx = torch.randint(0, 128, (2, t), generator=g)
        with sdpa_kernel(SDPBackend.MATH), torch.no_grad():  # a kernel every PyTorch's counter counts
            counted = counted_flops(lambda: model(idx)) / idx.numel()
        got = fn(model.num_params(), layers, t, width)
        if not abs(got - counted) <= 0.03 * counted:
            hint = (" (that is forward + backward, training's count: the forward pass is a third of it)"
                    if abs(got - 3 * counted) <= 0.09 * counted else "")
            raise AssertionError(f"forward FLOPs per token, {layers} layers of width {width}, T={t}: got "
                                 f"{got:,.0f}, FlopCounterMode counts {counted:,.0f} (allowed: ±3 %){hint}")
    check.passed(f"forward FLOPs per token within 3 % of FlopCounterMode on 3 GPTs (last: {got:,.0f} vs {counted:,.0f})")


@check.exercise()
def check_accum_steps(fn: Callable[[int, int, int, int], int]) -> None:
    """Exercise (GPT training): `fn(target_tokens, micro_batch, block_size, world_size)` must
    give the fewest micro-batches per optimizer step that reach `target_tokens` per step."""
    cases = [(524_288, 16, 1024, 1), (524_288, 16, 1024, 8), (500_000, 12, 1024, 1),
             (4096, 16, 128, 1), (1000, 64, 128, 1), (524_288, 64, 1024, 16)]
    for target, micro, t, world in cases:
        want = -(-target // (micro * t * world))  # ceiling division
        got = fn(target, micro, t, world)
        if got != want:
            raise AssertionError(f"target {target:,} tokens, micro-batch {micro} × {t} tokens on "
                                 f"{world} GPU(s): got {got}, expected {want} micro-batches "
                                 f"({want * micro * t * world:,} tokens per step)")
    check.passed(f"accumulation steps on {len(cases)} cases (GPT-2's 524,288 tokens: 32 micro-batches of 16 × 1024 on 1 GPU)")
