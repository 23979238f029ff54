"""Notebook 08's reading of SDPA against the written-out attention: whether one kernel explains the step's
difference, and the account of attention timed alone, summed over the step, beside the gap between the two whole
steps (notebook 10 gives the same account of its own steps, worded by :func:`fits_words`). Re-exported by
:mod:`course_lib.lessons.nb08`."""

from __future__ import annotations

import torch

from course_lib import verdicts
from course_lib.bench import Ratio, Timing


NEAR = 1.25  # an account within this factor of its gap, at the medians, fits it where the ranges overlap


def fits_words(ranges: tuple[float, float, float, float], ratio: float) -> str:
    """An account against its gap by their ranges (seconds: the sum's least and most by the attention timings'
    quartiles, the gap's by the paired interval) and their medians' `ratio`: where the ranges overlap and the
    medians lie within :data:`NEAR`, the account fits the gap; where the ranges overlap only with the medians
    further apart, it is left open; else which is larger, its cause not measured."""
    s_lo, s_hi, g_lo, g_hi = ranges
    span = (f"the sum by the attention timings' quartiles {s_lo * 1e3:+.1f} to {s_hi * 1e3:+.1f} ms, the gap by the "
            f"paired interval {g_lo * 1e3:+.1f} to {g_hi * 1e3:+.1f} ms")
    if s_lo <= g_hi and s_hi >= g_lo and 1 / NEAR <= ratio <= NEAR:
        return f"their ranges overlap ({span}): the account fits the gap"
    if s_lo <= g_hi and s_hi >= g_lo:
        return (f"their ranges overlap only toward their ends ({span}), the medians {ratio:.2f}× apart: whether "
                "attention alone accounts for the gap is left open")
    by = s_lo / g_hi if s_lo > g_hi else g_lo / s_hi  # how far apart their nearest ends lie
    return (f"their ranges lie apart ({span}), attention timed alone adding {'more' if s_lo > g_hi else 'less'}, but "
            f"by {by:.2f}×, under the {verdicts.APART:g}× two moments can make: inconclusive" if by < verdicts.APART else
            f"their ranges lie {by:.2f}× apart ({span}): attention timed alone adds {'more' if s_lo > g_hi else 'less'} "
            "than the gap between the two steps; attention alone runs without its neighbouring ops, at another moment")


def attention_sum(written: Timing, sdpa: Timing, n_layer: int, accum: int, step_written: Timing,
                  step_sdpa: Timing, paired: Ratio | None = None) -> str:
    """Whether attention alone accounts for the whole step's gap: SDPA's extra time over the written-out
    attention, forward + backward of one layer's micro-batch (`written`, `sdpa`), times the layers and the
    micro-batches per step, beside the gap between section 4's two steps: by their paired ratio where given
    (`paired`, SDPA's speed over the written-out step's, at the written-out step's median, as notebook 10 reckons
    it; then the two ranges too, :func:`fits_words`), else by their medians."""
    per_call = sdpa.median_s - written.median_s
    summed = per_call * n_layer * accum
    gap = (step_written.median_s * (1 / paired.value - 1) if paired is not None
           else step_sdpa.median_s - step_written.median_s)
    share = f"; the account is {summed / gap:.2f}× that gap" if gap > 0 and summed > 0 else ""
    how = (f"section 4's paired ratio, {paired.value:.2f}×, puts the two steps {gap * 1e3:+.1f} ms apart (at the "
           "written-out step's median)" if paired is not None else
           f"the whole step's {gap * 1e3:+.1f} ms between section 4's two medians (SDPA minus written out)")
    ranges = ((sdpa.lo_s - written.hi_s) * n_layer * accum, (sdpa.hi_s - written.lo_s) * n_layer * accum,
              step_written.median_s * (1 / paired.hi - 1), step_written.median_s * (1 / paired.lo - 1)
              ) if paired is not None and share else None
    return (f"attention alone, summed over the step: SDPA's extra {per_call * 1e3:+.2f} ms per layer and micro-batch "
            f"({written.name.split(', ')[-1]}) × {n_layer} layers × {accum} micro-batches = {summed * 1e3:+.1f} ms per step; "
            f"{how}{share}: two sets of turns, so an account, not a measurement of the step"
            + (f"; {fits_words(ranges, summed / gap)}" if ranges else ""))


def kernel_verdict(low: Ratio, fp32: Ratio, low_dtype: torch.dtype | None, device_label: str) -> str:
    """Whether SDPA's attention alone loses in the 16-bit format only (`low`, SDPA vs written out in
    `low_dtype`; None: no autocast) while not in float32 (`fp32`): then its 16-bit kernel explains the step's
    loss; otherwise one kernel does not."""
    if low_dtype is not None and low.clear and low.value < 1 and not (fp32.clear and fp32.value < 1):
        return (f"verdict: attention alone, SDPA's {low_dtype} kernel is the slower one on {device_label}; in float32 SDPA is "
                + (fp32.phrase if fp32.clear else "not slower") + " than the written-out attention")
    return (f"verdict: on {device_label} SDPA's attention alone is not slower in one format only: "
            "the step's difference is not explained by one kernel here")
