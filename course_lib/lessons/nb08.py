"""Notebook 08 (Transformer training): why a paired ratio and its medians' ratio differ; utilisation
against MFU; the exercise checks."""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from course_lib import check
from course_lib.bench import Ratio, median_interval
from course_lib.models import GPT, GPTConfig
from course_lib.roofline import counted_flops


def paired_vs_medians(r: Ratio, apart: float = 1.05) -> str:
    """One sentence on why `r`, the median of per-turn ratios of two timings taken in turns, and
    the ratio of the two timings' medians differ, when they are more than `apart` times apart
    (else '', and '' for timings not taken in turns, which have no medians' ratio)."""
    if not r.rounds or r.medians is None or abs(math.log(r.medians / r.value)) <= math.log(apart):
        return ""
    opposite = (r.value - 1) * (r.medians - 1) < 0  # one above 1, the other below
    drift = (f" (the median change from one turn to the next was {r.drift:.0%} here; single turns can move "
             "more, as the timings' quartiles show)" if r.drift is not None else "")
    return (f"{r.name}: the paired ratio, {r.value:.2f}×, and the medians' ratio, {r.medians:.2f}×, "
            f"{'point opposite ways' if opposite else 'differ'} because each turn ran the two back to back: the "
            f"paired ratio cancels the machine's speed changing between turns{drift}, the medians, taken from "
            "different turns, keep it; the paired ratio is the comparison.")


def busy_ratio(busy: dict[str, list[float]], small: str, large: str) -> Ratio:
    """The utilisation of `large`'s turns over `small`'s, paired turn by turn (median and its
    interval, :func:`bench.median_interval`); `busy` holds each version's utilisation per turn, in %."""
    ratios = [b / max(a, 1e-9) for a, b in zip(busy[small], busy[large])]
    value, lo, hi, coverage = median_interval(ratios)
    return Ratio(f"utilisation, {large} vs {small}", value, lo, hi, "higher", "lower", rounds=len(ratios),
                 coverage=coverage)


def busy_verdict(gain: Ratio, busy: Ratio, small: str, large: str, busy_pct: dict[str, float],
                 mfu: dict[str, float]) -> str:
    """The verdict of 'busy is not efficient': `gain`, the paired tokens/s ratio of `large` over
    `small` (:func:`bench.rate_ratio`; the same FLOPs per token and peak: MFU's ratio), against `busy`, the paired ratio of
    their utilisation readings; `busy_pct` and `mfu` the medians, as printed above it."""
    seen = (f"{small}: busy {busy_pct[small]:.0f} % of the time at {mfu[small]:.2%} MFU; "
            f"{large}: busy {busy_pct[large]:.0f} % at {mfu[large]:.2%} MFU")
    if not gain.clear:
        return (f"verdict: the two micro-batches' tokens/s are not told apart ({gain.doubt}), so this pair cannot "
                f"set utilisation against MFU here ({seen})")
    if gain.value < 1:
        return (f"verdict: the larger micro-batch's tokens/s is {gain.phrase} than the small one's here, beyond the "
                f"spread ({seen})")
    if busy.within_noise or busy.hi < gain.lo:  # the reading moved less than MFU, beyond both ranges
        d = busy.decimals  # enough digits that a small change does not print as 1.00
        steady = abs(busy_pct[large] - busy_pct[small]) < 1  # under a percentage point: unchanged to the eye
        moved = ("did not move beyond its spread" if busy.within_noise else
                 f"stayed at about {busy_pct[large]:.0f} % (a change of {busy.value:.{d}f}×)" if steady else
                 f"fell, {busy.value:.{d}f}× ({busy.lo:.{d}f}–{busy.hi:.{d}f})" if busy.value < 1 else
                 f"rose {busy.value:.{d}f}× ({busy.lo:.{d}f}–{busy.hi:.{d}f}), less than MFU beyond both ranges")
        return (f"verdict: MFU rose {gain.value:.2f}× ({gain.lo:.2f}–{gain.hi:.2f}) with the larger micro-batch while "
                f"the utilisation reading {moved} ({seen}): a busy reading says the device was occupied, "
                "not how much of its peak the work used")
    return (f"verdict: here the utilisation reading rose about as much as MFU ({busy.value:.2f}× against "
            f"{gain.value:.2f}×, ranges overlapping: {seen}); in this run it did tell the two apart")


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
