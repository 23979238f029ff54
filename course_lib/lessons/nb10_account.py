"""Notebook 10's account of SDPA's extra time: 08's attention alone (forward + backward of one layer, SDPA's extra
time over the written-out attention) summed over the layers, beside the gap between this notebook's two eager steps,
and beside the same account notebook 08 gave of its own steps. Re-exported by :mod:`course_lib.lessons.nb10`."""

from __future__ import annotations

from typing import Mapping

import torch

from course_lib.bench import Ratio, Timing
from course_lib.lessons.nb08_attention import fits_words
from course_lib.lessons.nb10_beside08 import PACED, _step_s, _tokens_per_step, same_as_08
from course_lib.models import GPTConfig


def account_in_08(ran08: Mapping[str, dict] | None, sdpa: Timing, written: Timing, dtype: torch.dtype, batch: int,
                  gpt: GPTConfig, profile: str, paired: Ratio | None = None, in_step: float | None = None,
                  where: str = "section 1's profile", also: Mapping[str, float] | None = None) -> str:
    """Notebook 08's attention alone (forward + backward of one layer at this micro-batch, earlier in this run): SDPA's
    extra time per call times the layers, beside the gap between this notebook's two eager steps (`sdpa`, `written`,
    section 3's turns): by their paired ratio where given (`paired`, SDPA's time over the written-out step's, turn by
    turn, at the written-out step's median), else by their medians; an account from two sets of turns, not a
    measurement of the step. Beside it, 08's own account by the same method (:func:`_in_08`). `in_step`: SDPA per
    layer inside the profiled step (s; `where`: which profile), set beside 08's attention alone where the sum lies
    1.1× or more from the gap, either way; `also`: the same from another profile (where: s), which, 1.1× or more apart, leaves the scale open."""
    rows = {k: (ran08 or {}).get(f"attention alone: {k}, {dtype}") for k in ("SDPA", "written out")}
    if not all(rows.values()) or not same_as_08(gpt, profile, batch):
        return ""
    per_call = (rows["SDPA"]["value"] - rows["written out"]["value"]) / 1e3
    summed = per_call * gpt.n_layer
    gap = written.median_s * (paired.value - 1) if paired is not None else sdpa.median_s - written.median_s
    share = f": the account is {summed / gap:.2f}× that gap" if gap > 0 and summed > 0 else ""
    spreads = [r.get("spread") for r in (rows["SDPA"], rows["written out"])]
    ranges = None  # the sum by 08's quartiles, and the gap by the paired interval, where both are known
    if paired is not None and all(spreads):
        (s_lo, s_hi), (w_lo, w_hi) = spreads
        ranges = ((s_lo - w_hi) / 1e3 * gpt.n_layer, (s_hi - w_lo) / 1e3 * gpt.n_layer,
                  written.median_s * (paired.lo - 1), written.median_s * (paired.hi - 1))
    over = summed > 1.1 * gap  # the account beyond the gap by a tenth, at the medians
    off = over or 1.1 * summed < gap  # ... or short of it by as much: scaled either way (reader GB)
    alone = rows["SDPA"]["value"] / 1e3 / in_step if in_step else None  # SDPA alone over SDPA inside the step
    more = ((". T" + fits_words(ranges, summed / gap)[1:] if ranges else
             f". The {summed * 1e3:+.1f} ms summed from attention timed alone "
             + ("exceeds" if over else "falls short of") + f" the step's {gap * 1e3:+.1f} ms gap: "
             "the two come from different sets of turns, and attention alone runs without its neighbouring ops")
            + (_scaled(rows["SDPA"]["value"] / 1e3, summed, {where: in_step, **(also or {})})
               if alone and off else "" if ranges else "; what sets them apart is not measured")
            if share and (ranges or off) else "")
    return (f"notebook 08 timed attention alone at this shape earlier in this run ({dtype}, forward + backward): SDPA's "
            f"extra {per_call * 1e3:+.2f} ms per layer × {gpt.n_layer} layers = {summed * 1e3:+.1f} ms per step; here the "
            + (f"paired ratio, {paired.value:.2f}×, puts the two eager steps {gap * 1e3:+.1f} ms apart (SDPA minus written "
               "out, at the written-out step's median)" if paired is not None else
               f"two eager steps' medians differ by {gap * 1e3:+.1f} ms (SDPA minus written out)")
            + f"{share}. Two sets of turns: an account, not a measurement of the step{more}"
            + _in_08(ran08 or {}, per_call, gpt, batch, summed / gap if share else None))


def _scaled(alone: float, summed: float, inside: Mapping[str, float]) -> str:
    """08's SDPA alone (s a layer) beside SDPA inside this step (`inside`, where: s a layer, the first the one scaled
    by): the sum as it would read were the written-out attention alone as much slower (an assumption); where two
    readings inside the step lie 1.1× or more apart, both, and no scaled sum (which of them holds is not measured)."""
    (where, first), *rest = inside.items()
    far = [w for w, v in rest if max(v, first) / min(v, first) >= PACED]
    if far:
        return (f"; 08's SDPA alone took {alone * 1e3:.3g} ms a layer; inside this step SDPA took "
                + ", ".join(f"{v * 1e3:.3g} ms ({w})" for w, v in inside.items())
                + f", {max(inside.values()) / min(inside.values()):.2f}× apart at two moments: which one the step's gap "
                "goes with is not measured, so the sum is not scaled to the step")
    return (f"; 08's SDPA alone took {alone * 1e3:.3g} ms a layer, {alone / first:.2f}× the {first * 1e3:.3g} ms {where} "
            f"gives it inside this step: were the written-out attention alone as much slower, the sum would read "
            f"{summed * first / alone * 1e3:+.1f} ms (an assumption, not measured)")


def _in_08(ran08: Mapping[str, dict], per_call: float, gpt: GPTConfig, batch: int, here: float | None) -> str:
    """08's own account of its section 4 steps, by the same method (SDPA's extra per layer and micro-batch, summed,
    over the gap its paired ratio puts between the two steps at the written-out step's median), beside this one's
    (`here`: the account over this notebook's gap); '' where 08 did not record both rows."""
    ratio, step = ran08.get("SDPA vs written-out attention, eager"), ran08.get("eager, written-out attention")
    if not (ratio and step and ratio["value"] < 1 and here is not None):
        return ""
    tokens = _tokens_per_step(step)
    accum = max(1, tokens // (batch * gpt.block_size))  # the micro-batches of 08's step
    gap = _step_s(step, tokens) * (1 / ratio["value"] - 1)  # SDPA's step minus the written-out one's, per step
    summed = per_call * gpt.n_layer * accum
    return (f". Notebook 08's own account, the same sum over its section 4 steps ({accum} micro-batch"
            f"{'es' if accum > 1 else ''} a step, its paired ratio {ratio['value']:.2f}× putting them "
            f"{gap * 1e3:+.1f} ms apart): {summed / gap:.2f}× its gap, beside {here:.2f}× here; the two steps' gaps were "
            "timed at different moments, so the two accounts can differ that much")
