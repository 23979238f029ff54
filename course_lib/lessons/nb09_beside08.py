"""Notebook 09's appendix: notebook 08's whole training step of the same GPT, timed here in turns with its forward
and backward alone (the part's share of the whole, paired), and set beside 08's own readings of it, each set's pace
probe taken out; notebook 10 reads what it records (:data:`WHOLE_STEP`, :data:`SHARE_09`). Each function returns the
text a cell prints or what it times; :mod:`course_lib.lessons.nb09` re-exports the appendix's."""

from __future__ import annotations

import copy
import dataclasses
from typing import Callable, Mapping, Sequence

import torch
from torch import nn

from course_lib import bench, profiles, report, verdicts
from course_lib.attention import MultiHeadAttention
from course_lib.bench import Ratio, Timing
from course_lib.lessons import nb08
from course_lib.models import GPT, GPTConfig
from course_lib.units import fmt_time, rate_scale


def row_of_08(ran08: Mapping[str, dict] | None, batch: int, gpt: GPTConfig, profile: str) -> dict | None:
    """Notebook 08's recorded whole training step of this GPT at this batch earlier in this run
    (:func:`course_lib.report.this_run`): its reading without the utilisation sampler where it recorded one
    (marked `sampler` False), else the one with it; None where 08 did not run so (another profile or device,
    or not yet) or its GPT (`profile`'s sizes) is not `gpt`."""
    c08 = profiles.sizes("08_transformer", profile)
    same_gpt = (c08.block, c08.n_layer, c08.n_head, c08.n_embd) == (gpt.block_size, gpt.n_layer, gpt.n_head,
                                                                     gpt.n_embd)
    key = f"step, micro-batch of {batch} sequences"
    quiet, row = ((ran08 or {}).get(k) for k in (f"{key}, no sampler", key))
    if not same_gpt:
        return None
    if quiet and quiet.get("spread"):
        return {**quiet, "sampler": False}
    return row if row and row.get("spread") else None


def as_in_08(model: GPT, row: dict) -> GPT:
    """The GPT whose step 08's `row` timed: `model` itself where 08 ran SDPA, as this notebook does;
    where 08 ran the written-out attention (its row's setup, :func:`nb08.attention_setup`: faster
    than SDPA on that machine), a copy of `model`, the same weights, that runs it."""
    if row.get("setup", "") != nb08.attention_setup(False):
        return model
    twin = copy.deepcopy(model)
    for m in twin.modules():
        if isinstance(m, MultiHeadAttention):
            m.sdpa = False
    return twin


WHOLE_STEP = "08's whole step, timed in 09"  # the key notebook 10 reads (nb10_beside08)
SHARE_09 = "forward + backward over 08's whole step, time, in 09"  # the part's share, paired: notebook 10 reads it


def part_share(pair: Sequence[Timing]) -> Ratio:
    """The part's time over the whole's, turn by turn (`pair`: :func:`whole_and_part`'s (whole, part)), recorded under
    :data:`SHARE_09`: 0.98 where forward and backward take 98 % of 08's whole step."""
    whole, part = pair
    return bench.speedup(part, whole, SHARE_09, more="longer", less="shorter")


def whole_and_part(model: GPT, step: Callable[[], None], device: torch.device, repeats: int,
                   tokens: int | None = None, probe: Callable[[], object] | None = None) -> list[Timing]:
    """08's whole training step of `model` (`step`, its forward and backward, then gradient clipping
    and fused AdamW's update, as 08 trains) and `step` alone, timed in turns: (whole, part); with
    `tokens` (the tokens of a step), as rates in tok/s; with `probe` (:func:`course_lib.bench.pace_probe`), the
    probe too, in the same turns, last (:func:`course_lib.bench.split_probe` takes it out)."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device.type in ("cuda", "cpu"))

    def whole() -> None:
        step()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    def part() -> None:
        model.zero_grad(set_to_none=True)  # as 08's step starts: no gradients to add to
        step()

    fns = {WHOLE_STEP: whole, "its forward and backward, timed in 09": part} | ({bench.PROBE: probe} if probe else {})
    return bench.time_in_turns(fns, device=device, repeats=repeats, work=tokens, unit="tok/s" if tokens else "")


def step_in_08(row: dict | None, pair: Sequence[Timing], batch: int, gpt: GPTConfig, sec4: dict | None = None,
               probes: tuple[dict | None, Timing | None] = (None, None), probe5: dict | None = None,
               part5: Timing | None = None) -> str:
    """Notebook 08's whole training step of this GPT at this batch (`row`: :func:`row_of_08`) beside this notebook's
    forward and backward of it, timed here in turns with that whole step (`pair`: :func:`whole_and_part`): the part's
    share of the whole, paired; then 08's record against the whole step timed here, two moments apart, and 08's section
    4 reading (`sec4`, two micro-batches a step) beside it too. Each set's pace is taken out of `row` where 08's section 5
    timed the probe (`probe5`), else out of `sec4` where `probes` (08's section-4 probe row, this notebook's probe Timing
    from the turns of `pair`) are given. `part5`: section 5's reading of the same forward and backward (SDPA), set beside
    the part timed here (two moments) where 08's step ran SDPA too (not the written-out twin). '' without `row`."""
    if row is None:
        return ""
    ms = lambda t: f"{1e3 * t.median_s:.1f} ms ({1e3 * t.lo_s:.1f}–{1e3 * t.hi_s:.1f})"  # noqa: E731
    head = (f"notebook 08 recorded a whole training step of this GPT at this batch earlier in this run (forward, "
            f"backward, gradient clipping and AdamW's update): {report.fmt_row_value(row)} {row['unit']}")
    whole, part = pair
    how = f" ({row['setup']}, as 08 ran it; this notebook's own steps above run SDPA)" if row.get("setup") else " (SDPA)"
    share = part_share(pair)
    said = ("the part is shorter than the whole, as it must be" if share.clear and share.value < 1 else
            "the part took longer than the whole in the same turns: the two steps' code differs by more than "
            "clipping and AdamW, not measured here" if share.clear else
            "no measurable difference: clipping and AdamW's update take less than these turns resolve"
            if share.grade == "no difference" else f"the turns cannot tell ({share.grade}: {share.doubt})")
    pct = max(0, share.decimals - 2)  # the ratio's digits, as a share: 97.6% (94.3%–98.1%), not 98% (94%–98%)
    as_rate = dataclasses.replace(whole, work=batch * gpt.block_size, unit="tok/s")
    k, unit = rate_scale(as_rate.rate, "tok/s")  # in 08's unit where it reads so: '24.5 (24.3–25.1) ktok/s'
    vs4, vs5 = report.rate_vs_row(as_rate, sec4) if sec4 else None, report.rate_vs_row(as_rate, row)
    on5 = bool(probe5) and row.get("sampler") is False and vs5 is not None  # like with like: one micro-batch each
    return "\n".join([
        f"08's whole step{how}, timed here in turns with its forward and backward: {ms(whole)} and {ms(part)}; forward "
        f"and backward alone took {share.value:.{pct}%} of the whole step (the median of the paired turns' ratios; the "
        f"whole step includes clipping and AdamW), its paired range {share.lo:.{pct}%}–{share.hi:.{pct}%}"
        + (f" (the two medians' ratio, unpaired: {share.medians:.{pct}%})" if share.medians_apart else "") + f": {said}" + _part_moved(part, None if row.get("setup") else part5),
        f"{head} (its section 5, {'no utilisation sampler' if row.get('sampler') is False else 'the utilisation sampler running'}); "
        f"the whole step here: {ms(whole)}, "
        f"{as_rate.rate / k:.4g} ({as_rate.rate_lo / k:.4g}–{as_rate.rate_hi / k:.4g}) {unit}, "
        f"{report.apart_words(vs5)}" + (_paced(vs5[0], probe5, probes[1], ends=vs5[1:], where="section 5") if on5 else "")
        + (f"\n08's section 4 read the same GPT's step with two micro-batches at {report.fmt_row_value(sec4)} "
           f"{sec4['unit']}: from that reading, this one is {report.apart_words(vs4)}"
           + ("" if on5 else _paced(vs4[0], *probes, ends=vs4[1:])) + _own_span(row, sec4) if vs4 else "")])


def _own_span(row: dict, sec4: dict) -> str:
    """Where 08's own two readings of its step (its section 5 `row` and its section 4 `sec4`, rates) lie 1.1× or more
    apart, one sentence: a reading here can then sit near one and far from the other; '' otherwise."""
    span = max(row["value"], sec4["value"]) / min(row["value"], sec4["value"])
    return (f"\n08's own two readings of this GPT's step, its section 4 (two micro-batches a step) and its section 5 (one), "
            f"are {span:.2f}× apart in rate: a reading here can sit near one and far from the other; notebook 10 sets "
            "every reading of it side by side" if span >= PACED else "")


UNPACED = "a gap the probe does not take away, so not the machine's pace as the probe reads it"  # 09's and 10's words
PACED = verdicts.AGREE  # readings within this factor of each other once each set's pace is taken out agree


def near_far(lo: float, hi: float) -> tuple[float, float]:
    """A range of ratios' near and far ends from 1, each as a factor of 1 or more (near 1.0 where it holds 1)."""
    return (1.0 if lo <= 1 <= hi else lo if lo > 1 else 1 / hi), max(hi, 1 / lo)


def pace_rule(ratio: float, near: float, far: float) -> str:
    """How two readings of one step compare with each set's pace taken out, read by their medians (`ratio`, as a
    factor of 1 or more) and their quartiles' near and far ends (as factors): 'agree' (all within :data:`PACED`),
    'far ends' (the medians within it, the far ends past it), 'near ends' (the medians past it, the near ends within)
    or 'apart' (past it at the near ends too). Both open cases are inconclusive; 09 and 10 word them alike."""
    if ratio < PACED:
        return "agree" if far < PACED else "far ends"
    return "near ends" if near < PACED else "apart"


def open_words(rule: str, near: float, far: float, of: str = "") -> str:
    """The words for :func:`pace_rule`'s two open cases ('far ends', 'near ends'), one home for 09 and 10: where the
    medians and the spreads (the quartiles, probes' and steps' together) fall on the two sides of :data:`PACED`."""
    if rule == "far ends":
        return (f"within {PACED:g}×{of} at the medians, up to {far:.2f}× where the two spreads lie furthest apart: "
                "inconclusive")
    return (f"beyond {PACED:g}×{of} at the medians, {near:.2f}× where the two spreads come closest: inconclusive")


def _paced(ratio: float, probe08: dict | None, probe: Timing | None, ends: tuple[float, float] | None = None, where: str = "section 4") -> str:
    """`ratio` (this step's rate over 08's reading in its `where`) with each set's pace taken out: times this set's pace
    probe over 08's (the same fixed work); `ends`: the range the readings' (and probes') quartiles allow, so that
    medians within 1.1× whose far ends reach past it read inconclusive, as in 10. '' without both probes."""
    if not probe08 or probe is None or probe08.get("unit") != "ms":
        return ""
    paced, (lo08, hi08) = ratio * probe.median_s * 1e3 / probe08["value"], probe08.get("spread") or [probe08["value"]] * 2
    lo, hi = (ends[0] * 1e3 * probe.lo_s / hi08, ends[1] * 1e3 * probe.hi_s / lo08) if ends else (paced, paced)
    near, far = near_far(lo, hi)  # the quartiles' near and far ends
    rule = pace_rule(max(paced, 1 / paced), near, far)
    said = (f"within {PACED:g}× of 08's" if rule == "agree" else open_words(rule, near, far, " of 08's") if rule != "apart"
            else f"{UNPACED}; what else differs (the step's code, the process) is not measured")
    return (f"; the pace probe (a fixed matmul and copy) read {probe08['value']:.1f} ms in 08's {where} turns and "
            f"{1e3 * probe.median_s:.1f} ms here: with each set's pace taken out, this one is {paced:.2f}× 08's (its rate "
            f"alone: {ratio:.2f}×), {said}")


def _part_moved(part: Timing, part5: Timing | None) -> str:
    """The forward and backward timed here beside section 5's reading of it (two moments, :data:`PACED` or more apart:
    one sentence; the share above is paired, so it holds whichever reading is typical); '' otherwise."""
    if part5 is None or max(part.median_s, part5.median_s) / min(part.median_s, part5.median_s) < PACED:
        return ""
    ratio = bench.speedup(*sorted((part, part5), key=lambda t: -t.median_s))  # the slower's time over the faster's
    return (f"\nthe forward and backward read {fmt_time(part.median_s)} here and {fmt_time(part5.median_s)} in section 5 "
            f"({ratio.value:.2f}× apart; two moments: {verdicts.moments_words(ratio.lo, ratio.hi)}): "
            "the share above is paired, part and whole in the same turns, so it does not depend on which is typical")

