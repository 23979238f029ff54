"""Notebook 10's steps beside notebook 08's readings of the same GPT earlier in the run (its section 4's and
5's eager steps, its compile and attention speed-ups, its cold compile, its attention alone), each read by the
course's rule for two moments; each function returns the text a cell prints, '' where 08 did not time that
GPT at this micro-batch. :mod:`course_lib.lessons.nb10` re-exports them."""

from __future__ import annotations

from typing import Mapping

import torch

from course_lib import profiles, report, verdicts
from course_lib.bench import Ratio, Timing
from course_lib.models import GPTConfig
from course_lib.units import rate_scale


NOT_IN_08 = ("notebook 08 has not timed this GPT at this micro-batch earlier in this run (on this device, in this "
             "profile): nothing to set beside this section's readings")


def step_in_08(ran08: Mapping[str, dict] | None, eager: Timing, batch: int, gpt: GPTConfig, profile: str,
               written: Timing | None = None) -> str:
    """Notebook 08's step of the same GPT at the same batch, recorded earlier in this run (its
    utilisation section), beside this notebook's eager step: how far apart the two are beyond
    their quartiles, and why timings of two notebooks are not paired; where 08 ran another attention
    (its row's setup), why the two are not compared. '' where 08 did not run so (another profile or
    device, or not yet) or its GPT (`profile`'s sizes) is not `gpt`."""
    same_gpt = _same_gpt(profile, gpt)
    row = (ran08 or {}).get(f"step, micro-batch of {batch} sequences")
    vs = report.rate_vs_row(eager, row) if same_gpt and row else None
    if vs is None:  # 08 did not run so, or recorded no spread or another unit: nothing to set side by side
        return ""
    if row.get("setup"):  # 08's section 5 ran the written-out attention: its section 4's SDPA row is this step
        sdpa = (ran08 or {}).get("eager, SDPA")
        vs = report.rate_vs_row(eager, sdpa) if sdpa else None
        if vs is None:
            return (f"notebook 08's section 5 timed a step of this GPT at this batch earlier in this run with the "
                    f"{row['setup']}: another step than the eager one here, which runs SDPA, so the two are not set "
                    "side by side")
        again = (ran08 or {}).get("eager, SDPA (beside the compiled)")  # 08 timed it again after its compile
        vs2 = report.rate_vs_row(eager, again) if again else None
        second = (f"\n  after its compile, {report.fmt_row_value(again)} {again['unit']}: {report.apart_words(vs2)}"
                  if vs2 else "")
        return (f"notebook 08 (section 4) timed this GPT's eager SDPA step at this micro-batch earlier in this run (two "
                f"micro-batches per step, with gradient clipping); each of its readings beside the eager step here, "
                f"{_rate_range(eager)}, by the rule for two moments:\n  {'before its compile' if vs2 else 'its section 4'}, "
                f"{report.fmt_row_value(sdpa)} "
                f"{sdpa['unit']}: {report.apart_words(vs)}{second}" + _written_in_08(ran08 or {}, row, written))
    return (f"notebook 08 timed this GPT at this batch earlier in this run, with gradient clipping as well: "
            f"{report.fmt_row_value(row)} {row['unit']}; eager here: {_rate_range(eager)}, "
            f"{report.apart_words(vs)}. Minutes apart, in two processes, the machine's speed at each moment is part of "
            "any gap: only timings of one set of turns are paired")


def _written_in_08(ran08: Mapping[str, dict], sec5: dict, written: Timing | None) -> str:
    """The written-out step here (`written`) beside 08's readings of it, its section 4's and its section 5's
    without the utilisation sampler and with it (`sec5`), each by the rule for two moments."""
    if written is None:
        return ""
    said = [f"  its {where}, {report.fmt_row_value(row)} {row['unit']}: {report.apart_words(vs)}"
            for where, row in (("section 4", ran08.get("eager, written-out attention")),
                               ("section 5 (one micro-batch a step, no utilisation sampler)",
                                next((r for k, r in ran08.items() if k.startswith("step, micro-batch of")
                                      and k.endswith(" sequences, no sampler")), None)),
                               ("section 5 (one micro-batch a step, its utilisation sampler running)", sec5))
            if row and (vs := report.rate_vs_row(written, row))]
    return "\n".join([f"\nthe written-out step here, {_rate_range(written)}, beside 08's readings of it:"] + said) if said else ""


def _same_gpt(profile: str, gpt: GPTConfig) -> bool:
    """Whether notebook 08 trains `gpt` under `profile`."""
    c08 = profiles.sizes("08_transformer", profile)
    return (c08.block, c08.n_layer, c08.n_head, c08.n_embd) == (gpt.block_size, gpt.n_layer, gpt.n_head, gpt.n_embd)


def compile_in_08(ran08: Mapping[str, dict] | None, gain: Ratio, batch: int, gpt: GPTConfig, profile: str) -> str:
    """Notebook 08's compile speed-up of this GPT with SDPA (its section 4, earlier in this run) beside
    this notebook's `gain`: each paired within its own turns, so the two are read by the course's rule
    for two moments. '' where 08 did not time it, or timed another GPT or micro-batch."""
    row = _row_08(ran08, "compiled vs eager, SDPA", batch, gpt, profile)
    if not row:
        return ""
    said = _beside_08("compiled this GPT with SDPA", row["value"], *row["spread"], gain)
    if gain.lo <= row["value"] <= gain.hi and gain.clear != report.recorded_ratio("", row).clear:  # one told, one not
        said += (f". 08's {row['value']:.2f}× lies inside this run's interval, so the two verdicts' words differ without "
                 f"the numbers disagreeing: these {gain.rounds} turns cannot resolve a gain that small")
    return said


def attention_in_08(ran08: Mapping[str, dict] | None, gain: Ratio, batch: int, gpt: GPTConfig, profile: str) -> str:
    """Notebook 08's whole step with the written-out attention instead of SDPA (its section 4 records SDPA
    over written out: inverted here) beside this notebook's `gain`, read as :func:`compile_in_08` reads its."""
    row = _row_08(ran08, "SDPA vs written-out attention, eager", batch, gpt, profile)
    if not row:
        return ""
    lo, hi = row["spread"]
    return _beside_08("ran this GPT's step with the written-out attention instead of SDPA", 1 / row["value"], 1 / hi,
                      1 / lo, gain)


def cold_in_08(ran08: Mapping[str, dict] | None, seconds: float, gpt: GPTConfig, profile: str) -> str:
    """Notebook 08's cold compile of this GPT (its first step, compilation included, earlier in this run)
    beside this notebook's (`seconds`): one run each, read by the rule for two moments; '' where 08
    recorded none or compiled another GPT."""
    row = (ran08 or {}).get("compile + first step (cold)")
    if not row or not _same_gpt(profile, gpt):
        return ""
    r = seconds / row["value"]
    return (f"notebook 08 compiled this GPT cold earlier in this run (its step: two micro-batches, with clipping; no "
            f"structured logs, which this notebook writes for tlparse): first "
            f"step {row['value']:.1f} s; here {seconds:.1f} s ({r:.2f}×), one run each: "
            + (f"within the {verdicts.APART:g}× by which two moments can differ" if max(r, 1 / r) <= verdicts.APART else
               f"more than {verdicts.APART:g}× apart, beyond what two moments can differ by"))


def account_in_08(ran08: Mapping[str, dict] | None, sdpa: Timing, written: Timing, dtype: torch.dtype, batch: int,
                  gpt: GPTConfig, profile: str) -> str:
    """Notebook 08's attention alone (forward + backward of one layer at this micro-batch, earlier in this run):
    SDPA's extra time per call times the layers, beside the gap between this notebook's two eager steps
    (`sdpa`, `written`, section 3's turns): an account from two sets of turns, not a measurement of the step."""
    rows = {k: (ran08 or {}).get(f"attention alone: {k}, {dtype}") for k in ("SDPA", "written out")}
    if not all(rows.values()) or not _same_gpt(profile, gpt) or profiles.sizes("08_transformer", profile).micro != batch:
        return ""
    per_call = (rows["SDPA"]["value"] - rows["written out"]["value"]) / 1e3
    summed, gap = per_call * gpt.n_layer, sdpa.median_s - written.median_s
    share = f": the account is {summed / gap:.2f}× that gap" if gap > 0 and summed > 0 else ""
    return (f"notebook 08 timed attention alone at this shape earlier in this run ({dtype}, forward + backward): SDPA's "
            f"extra {per_call * 1e3:+.2f} ms per layer × {gpt.n_layer} layers = {summed * 1e3:+.1f} ms per step; here the "
            f"two eager steps' medians differ by {gap * 1e3:+.1f} ms (SDPA minus written out){share}. Two sets of turns: "
            "an account, not a measurement of the step")


def _row_08(ran08: Mapping[str, dict] | None, key: str, batch: int, gpt: GPTConfig, profile: str) -> dict | None:
    """08's row `key` of this run, where it has a spread and timed this GPT at this micro-batch; else None."""
    row = (ran08 or {}).get(key)
    ok = (row and row.get("spread") and _same_gpt(profile, gpt) and profiles.sizes("08_transformer", profile).micro == batch)
    return row if ok else None


def _beside_08(did: str, value: float, lo: float, hi: float, gain: Ratio) -> str:
    """08's paired ratio (`value`, `lo`..`hi`: what it `did`) beside this notebook's `gain`, by the two-moments rule."""
    return (f"notebook 08 (section 4) {did} earlier in this run, at this micro-batch (two per "
            f"step, with gradient clipping), in its own turns: {value:.2f}× ({lo:.2f}–{hi:.2f}); here "
            f"{gain.value:.2f}× ({gain.lo:.2f}–{gain.hi:.2f}). The two come from separate sets of turns, minutes apart, "
            f"so they are compared by the rule for two moments: {verdicts.moments_words(gain.lo / hi, gain.hi / lo)}"
            + (", so they are not told apart" if gain.lo / hi <= 1 <= gain.hi / lo else ""))


def _rate_range(t: Timing) -> str:
    """'17.4 (17.1–17.8) ktok/s': a timing's rate and its quartiles' rates, with an SI prefix."""
    scale, unit = rate_scale(t.rate, t.unit)
    return f"{t.rate / scale:.4g} ({t.rate_lo / scale:.4g}–{t.rate_hi / scale:.4g}) {unit}"
