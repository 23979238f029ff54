"""Notebook 10's steps beside notebook 08's readings of the same GPT earlier in the run (its cold compile,
its compile and attention speed-ups, its break-even, its section 4's and 5's steps), as one table read by the
course's rule for two moments, with what the table cannot say in the lines below it (the attention account:
:mod:`course_lib.lessons.nb10_account`). Each function returns the text a cell prints. :mod:`course_lib.lessons.nb10` re-exports them."""

from __future__ import annotations

import dataclasses
import re
from typing import Mapping, NamedTuple, Sequence

import torch

from course_lib import bench, profiles, report, verdicts
from course_lib.lessons.nb09_beside08 import SHARE_09, WHOLE_STEP  # 09's keys
from course_lib.lessons.nb10_paced import (PACED, PROBES, UNPACED, _and, _rate, _swing, _written_out,  # noqa: F401
                                           paced, paced_rows, paced_table, paced_vs_row, placed_in)  # re-exported: 08's step, paced
from course_lib.lessons.nb10_short import in_short
from course_lib.bench import Ratio, Timing, break_even
from course_lib.models import GPT, GPTConfig
from course_lib.units import fmt_count, fmt_rate, fmt_time, unit_scale


NOT_IN_08 = ("notebook 08 has not timed this GPT at this micro-batch earlier in this run (on this device, in this "
             "profile): nothing to set beside this notebook's readings")
COLUMNS = ("quantity", "notebook 08", "here", "here ÷ 08", "two moments")
STEP_08 = "08's step"
PART_09 = "forward + backward, no checkpointing"  # 09's forward + backward of this GPT (SDPA), no optimizer: a part of the step
PAYBACK = "compile pays back after, tokens (each from its own turns; here section 3's)"  # section 3b times the compile again


class Row(NamedTuple):
    """One line of the table: what was measured, 08's reading, this notebook's, their ratio (with the range
    the two spreads allow) and what the rule for two moments makes of it."""

    quantity: str
    in_08: str
    here: str
    ratio: str
    verdict: str
    value: float | None = None  # here ÷ 08 at the medians, where a number (not printed: the table shows `ratio`)
    then: float | None = None  # the earlier reading's median, where a rate (not printed: the table shows `in_08`)
    paced: tuple[float, float, float] | None = None  # here ÷ 08 with each set's pace out (:func:`paced_vs_row`)
    short: str = ""  # the row's name in the paced line ('before its compile')


def same_as_08(gpt: GPTConfig, profile: str, batch: int) -> bool:
    """Whether notebook 08 trains `gpt` under `profile` at micro-batches of `batch` sequences: where its
    readings and this notebook's can share a table (the `cpu` and `smoke` profiles; on a GPU 08 trains a
    larger GPT)."""
    c08 = profiles.sizes("08_transformer", profile)
    return (c08.block, c08.n_layer, c08.n_head, c08.n_embd, c08.micro) == (gpt.block_size, gpt.n_layer, gpt.n_head,
                                                                          gpt.n_embd, batch)


def beside_08(ran08: Mapping[str, dict] | None, gpt: GPTConfig, profile: str, batch: int, *, cold_s: float | None = None,
              compile_gain: Ratio | None = None, attention_gain: Ratio | None = None, eager: Timing | None = None,
              written: Timing | None = None, compiled: Timing | None = None, before: Timing | None = None,
              as_08: Timing | None = None, ran09: Mapping[str, dict] | None = None, account: str = "",
              later: Mapping[str, Timing | None] | None = None, probe: Timing | None = None,
              peak: float | None = None, before_probe: Timing | None = None) -> str:
    """Notebook 08's readings of this GPT at this micro-batch (`ran08`, its rows of this run) beside this
    section's: its cold compile (`cold_s`), paired speed-ups (`compile_gain`, `attention_gain`), break-even
    in tokens, and step rates (`eager`, `written`, `compiled`; `before`: the eager step timed before any
    compile here), one table; :data:`NOT_IN_08` where 08 did not time this GPT at this micro-batch.
    `as_08`: 08's own step (gradient clipping, AdamW's two groups) timed in this section's turns; it then
    stands beside 08's and 09's readings of that step (`ran09`: 09's rows of this run), in one line, and
    beside this notebook's step in the same turns, in the line that says what the table found ('in short:';
    the rest under 'details:', `account` first: :func:`account_in_08`'s line). `later`: the eager step's readings
    after section 3 (where: Timing), set with section 2's and 3's beside 09's part of the step.
    `probe`: the pace probe timed in section 3's turns, which :func:`paced` sets beside 08's and 09's (`before_probe`:
    section 2's; with them each SDPA rate row is also read paced, :func:`paced_rows`). `peak`: the stored compute
    peak (FLOP/s), by which 08's step timed here reads as MFU beside 08's own (:func:`_mfu`).
    """
    ran08 = ran08 or {}
    if before is not None and eager is not None and before.rate is None:  # section 2 timed it without its tokens
        before = dataclasses.replace(before, work=eager.work, unit=eager.unit)
    if not ran08 or not same_as_08(gpt, profile, batch):
        return NOT_IN_08
    rows = [r for r in (_cold(ran08, cold_s),
                        _paired("compile's speed-up, SDPA", ran08.get("compiled vs eager, SDPA"), compile_gain),
                        _payback(ran08, cold_s, compile_gain, eager, compiled),
                        _paired("written-out over SDPA, eager", ran08.get("SDPA vs written-out attention, eager"),
                                attention_gain, inverted=True),
                        _inferred(ran08, compiled, written),
                        *_rates(ran08, batch, eager, written, compiled, before, as_08, ran09, (before_probe, probe))) if r]
    if not rows:
        return NOT_IN_08
    mine = [r for r in rows if r.quantity.startswith(STEP_08)]  # 08's step: one line, not one row per reading
    in_08 = [r for r in mine if "(08" in r.quantity]  # 08's own readings of it, its long run's included
    table = [r for r in rows if r not in mine]
    differ = [r.quantity for r in rows if r.verdict.startswith("a difference")]
    swung = {"section 2": before, "section 3": eager, **(later or {})}  # this notebook's plain eager SDPA step
    others, told = _elsewhere(ran08, ran09, batch, swung, batch * gpt.block_size)
    differ += ["08's step with SDPA at another moment"] * told
    short = []
    cost = _cost(as_08, written)
    step = paced(ran08, ran09, as_08, probe, batch=batch, as_row=True)  # the same step's readings, each set's pace out
    full = paced(ran08, ran09, as_08, probe, batch=batch)  # the same, with the sets named and the arithmetic, in details
    unexplained = bool(full and UNPACED in full)  # paced, 08's step disagrees: the short line leads with it
    if unexplained:  # a gap the probe does not explain: set beside the swing one process shows
        own = [1e3 * r.then for r in in_08 if "long run" not in r.quantity and r.then]  # 08's readings, ktok/s -> tok/s
        step = (*step[:3], step[3] + _swing(ran08, ran09, as_08, swung, short=True, own08=own))
        full += _swing(ran08, ran09, as_08, swung, own08=own)
    moments = ("by the rule for two moments (2.5×, what a machine's pace can move), for readings and for paired ratios "
               "from separate sets of turns alike, "
               + (f"the notebooks differ on: {'; '.join(differ)}" if differ else
                  "no reading of 08's (or 09's) is told apart from this notebook's"
                  + (" by that rule alone; with each set's pace taken out, 08's step disagrees (above), a gap that rule "
                     "is too loose to see" if unexplained else "")))
    side = paced_table(step, {r.short: (r.value, r.paced) for r in table if r.paced})  # raw and paced, a row each
    up_front = bool(differ) or not side  # the probe's lines, where there are, say more than the 2.5x rule
    short += [side, moments if up_front else ""]  # whether the notebooks agree first, then the steps' own gap
    if cost is not None:  # the one comparison of the two notebooks' steps timed in the same turns
        short.append(f"timed in section 3's turns, 08's step (clipping, AdamW's two groups) over this notebook's eager "
                     f"written-out step, in speed: {cost.brief}{' to tell' if cost.grade == 'too wide' else ''}")
    details = [full, account, "" if up_front else moments,  # the probe's arithmetic first
               "here ÷ 08: the figure here over 08's (for a rate, the speed here over 08's), its range from the "
               f"two spreads; told apart only at {verdicts.APART:g}× or more (the rule for two moments, in the glossary)"
               if table else "", _table(table) if table else "", others,
               _attention_split(ran08, eager, written) if any(r.quantity.startswith("written-out over SDPA") and
                                                               not r.verdict.startswith("not told apart") for r in table)
               else "",
               _after_compile(ran08, eager, compiled),
               _part_in_09(ran09, gpt, profile, batch, swung, as_08),
               *_same_step(mine, as_08 is not None),
               _mfu([r.then for r in in_08 if "2 micro-batches" in r.quantity],  # 08's answer's (not its long run)
                    as_08, gpt, peak, like=[r.then for r in in_08 if "section 5" in r.quantity and "micro-batches" not in
                                            r.quantity]),  # and its one-micro-batch readings: the step timed here
               cost.verdict("08's step over this notebook's eager written-out step, in speed, in section 3's turns")
               if cost is not None else "",
               "08's step: gradient clipping, AdamW's two parameter groups, its learning-rate schedule; one micro-batch a "
               "step, or more where a reading says so"
               if mine or any(r.quantity.startswith("written-out,") for r in table) else ""]
    return in_short(short, details)


def _part_in_09(ran09: Mapping[str, dict] | None, gpt: GPTConfig, profile: str, batch: int,
                readings: Mapping[str, Timing | None], as_08: Timing | None = None) -> str:
    """Where 09 ran this GPT at this batch: its forward and backward's share of 08's whole step, paired (:data:`SHARE_09`);
    else 09's section-5 reading of it beside this notebook's whole-step readings (where: Timing; two moments), and how
    09's reading of 08's step compares with this notebook's (`as_08`). '' where 09 did not."""
    row, c09 = (ran09 or {}).get(PART_09), profiles.sizes("09_memory", profile)
    got = {where: t for where, t in readings.items() if t is not None}
    if not (row and got and row.get("unit") == "ms" and row.get("setup") == f"batch {batch}" and
            (c09.block, c09.n_layer, c09.n_head, c09.n_embd) == (gpt.block_size, gpt.n_layer, gpt.n_head, gpt.n_embd)):
        return ""
    if (paired := (ran09 or {}).get(SHARE_09)) and paired.get("unit") == "×":  # the part inside the whole, same turns
        share = report.recorded_ratio(SHARE_09, paired)
        return (f"09 timed the whole GPT's forward + backward inside 08's whole step, in the same turns: {share.value:.0%} "
                f"({share.lo:.0%}–{share.hi:.0%}) of the step's time, paired: " + (
                    "clipping and AdamW's update take the rest" if share.clear and share.value < 1 else
                    f"the part not told from the whole ({share.grade}): clipping and AdamW take less than these turns resolve"))
    part = row["value"] / 1e3
    lo = (row.get("spread") or [row["value"]])[0] / 1e3  # its lower quartile, printed beside its median
    longer = [where for where, t in got.items()  # by the medians as the line prints them: 95.1 ms is not longer than 95.1
              if part > t.median_s and fmt_time(part) != fmt_time(t.median_s)]
    shares = [part / t.median_s for t in got.values()]  # the part over each whole-step reading, two moments each
    said = (f"09 timed a part of this step, the whole GPT's forward + backward (SDPA attention) without the optimizer: "
            f"{fmt_time(part)}" + (f" (quartiles {fmt_time(lo)}–{fmt_time(row['spread'][1] / 1e3)})"
                                  if row.get("spread") else "")
            + f", {min(shares):.0%}" + (f"–{max(shares):.0%}" if f"{min(shares):.0%}" != f"{max(shares):.0%}" else "")
            + " of this notebook's whole eager SDPA step as read in " + _and([w for w in got])
            + " (" + ", ".join(fmt_time(t.median_s) for t in got.values()) + "; two moments each, so a share, not a "
            "measurement: 09 times the part inside the whole in the same turns)"
            + (f": the part read longer than the whole in {_and(longer)}" if longer else ""))
    whole09 = (ran09 or {}).get(WHOLE_STEP)
    if whole09 and _written_out(whole09) and as_08 is not None and as_08.rate and whole09.get("unit") == "ktok/s":
        lag = as_08.rate / (whole09["value"] * 1e3)  # 09's time for 08's step over this notebook's
        said += (f"; 09's reading of 08's step took {lag:.2f}× this notebook's time for that step too: both of 09's "
                 "readings ran slower than this notebook's, by a cause not measured (the pace probe's line above says "
                 "whether the machine's pace, as a fixed matmul and copy read it, accounts for it)"
                 if lag >= 1.1 and longer else "; which reading is typical is not measured")
    else:
        said += "; which reading is typical is not measured"
    return said


def _cost(as_08: Timing | None, written: Timing | None) -> Ratio | None:
    """08's step's speed over this notebook's written-out step's, timed in the same turns (None unless both ran)."""
    if as_08 is None or written is None:
        return None
    return bench.speedup(written, as_08, "08's step vs this notebook's written-out step, speed")


def _same_step(mine: list[Row], timed_here: bool) -> list[str]:
    """The readings of 08's written-out step (`mine`: the table's rows of it), one row each with its ratio to the
    one here, then what the rule for two moments and 08's own spread of readings say; 08's long run (its training
    loop, not the bench step) on a line of its own."""
    if not mine:
        return []
    label = lambda r: r.quantity.split("(", 1)[1].rstrip(")").replace(": ", ", ")  # noqa: E731  '08, section 4'
    steps = [r for r in mine if "long run" not in label(r)] or mine
    loop = [r for r in mine if r not in steps]  # train.fit's loop: fresh batches, a progress bar, a sampler
    width = max(len(label(r)) for r in steps)
    lines = [f"{STEP_08 if timed_here else 'the written-out step'}, every earlier reading (ktok/s; here "
             f"{mine[0].here}):", *(f"  {label(r):<{width}} | {r.then:>5.3g} | here ÷ it: {r.ratio}" for r in steps)]
    lo, hi = min(r.value for r in steps), max(r.value for r in steps)
    told = ("by the rule for two moments, a difference" if any(r.verdict.startswith("a difference") for r in steps) else
            f"each under the {verdicts.APART:g}× that two moments can differ by: not told apart")
    if len(steps) > 1 and (hi < 0.995 or lo > 1.005):  # every earlier reading on one side of this one: a pattern
        told += f"; every earlier reading is {'faster' if hi < 1 else 'slower'} than the one here"
    whole = [r.then for r in steps if label(r).startswith("08") and "micro-batches" in label(r)]  # 08's own step
    own = whole if len(whole) > 1 else [r.then for r in steps if label(r).startswith("08")]  # like with like first
    which = "08's readings of its step of several micro-batches" if own is whole else "08's own readings"
    spread = (f"; {which} span {min(own):.3g}–{max(own):.3g} ({max(own) / min(own):.2f}×) within one "
              f"process{_groups(own)}" if len(own) > 1 and max(own) / min(own) > 1.1 else "")
    lines.append(f"  {told}{spread}: readings at different moments; what sets them apart is not measured")
    lines += [f"08's long run, ktok/s (its training loop, train.fit: fresh batches, a progress bar; not the step timed "
              f"above): {r.then:.3g}, here ÷ it: {r.ratio}" for r in loop]
    return lines


def _mfu(own: list[float], as_08: Timing | None, gpt: GPTConfig, peak: float | None, like: Sequence[float] = ()) -> str:
    """08's step timed here (`as_08`) as MFU, by 08's count of FLOPs a token (6N + 12·L·T·C) over the stored peak
    (`peak`, FLOP/s, the one 08's MFU divides by), beside 08's readings of the same one-micro-batch step (`like`,
    ktok/s: its section 5) and its answer's readings (`own`, 2 micro-batches) over the same peak ('' where the step or
    the peak is missing). 08's answer leaves its long run (the training loop) out of that span, and so does this."""
    if as_08 is None or as_08.rate is None or not peak:
        return ""
    with torch.device("meta"):  # the count needs the parameters' shapes, not their values
        per_token = GPT(gpt).flops_per_token()
    mfu = lambda rate: f"{rate * per_token / peak:.1%}"  # noqa: E731
    span = lambda ktok: "–".join(dict.fromkeys([mfu(1e3 * min(ktok)), mfu(1e3 * max(ktok))]))  # noqa: E731  one or a range
    return (f"08's step as MFU (08's count, 6N + 12·L·T·C = {per_token:,} FLOPs a token, over the stored peak, "
            f"{fmt_rate(peak, 'FLOP/s')}, that 08 divides by): here {mfu(as_08.rate)} ({mfu(as_08.rate_lo)}–"
            f"{mfu(as_08.rate_hi)})" + (f"; 08's readings of the same step, one micro-batch (its section 5): {span(like)}"
                                          if like else "")
            + (f"; 08's answer's readings (its step of 2 micro-batches), over the same "
               f"peak: {span(own)}, each at its moment" if own else ""))


def _groups(own: list[float]) -> str:
    """Where 08's readings of its step fall into two groups, a gap of 10 % or more between the slowest of the
    fast and the fastest of the slow: ', in two groups 1.19× apart: 5 readings at 26.9–30, 1 at 22.6' ('' else)."""
    ranked = sorted(own, reverse=True)
    gap, at = max(((a / b, i + 1) for i, (a, b) in enumerate(zip(ranked, ranked[1:]))), default=(1.0, 0))
    if gap < 1.1 or any(max(g) / min(g) >= gap for g in (ranked[:at], ranked[at:])):  # apart more than within
        return ""
    said = [f"{len(g)} reading{'s' * (len(g) > 1)} at " + (f"{min(g):.3g}–{max(g):.3g}" if len(g) > 1 else f"{g[0]:.3g}")
            for g in (ranked[:at], ranked[at:])]
    return f", in two groups {gap:.2f}× apart: {said[0]}, {said[1]}"


def _table(rows: list[Row]) -> str:
    """The rows under :data:`COLUMNS`, each column as wide as its longest cell; where no row is told apart, the
    two-moments column gives way to one line under the table."""
    alike = all(r.verdict == "-" or r.verdict.startswith("not told apart") for r in rows)
    n = len(COLUMNS) - alike  # the last column, the verdict, only where some row differs
    widths = [max(len(r[i]) for r in [COLUMNS, *rows]) for i in range(n)]
    line = lambda cells: " | ".join(f"{c:<{w}}" for c, w in zip(cells[:n], widths)).rstrip()  # noqa: E731
    return "\n".join([line(COLUMNS), "-" * len(line(COLUMNS)), *map(line, rows)]
                     + ([f"(no row told apart: each reading under the {verdicts.APART:g}× of two moments, each paired "
                         "ratio's interval overlapping 08's)"] if alike else []))


def _pair(value: float, lo: float, hi: float) -> tuple[str, str]:
    """A ratio with its range, and the two-moments verdict on that range."""
    return verdicts.ratio_of("", value, lo, hi, apart=True).numbers, verdicts.moments_words(lo, hi, short=True)


def _cold(ran08: Mapping[str, dict], seconds: float | None) -> Row | None:
    """08's cold compile (its first step, compilation included) beside this notebook's: one run each."""
    row = ran08.get("compile + first step (cold)")
    if not row or seconds is None:
        return None
    r = seconds / row["value"]
    said = ("not told apart (one run each)" if max(r, 1 / r) < verdicts.APART else
            verdicts.moments_words(r, r, short=True))
    return Row("cold compile + first step, s (one run)", f"{row['value']:.1f}", f"{seconds:.1f}", f"{r:.2f}×", said)


def printed_inverse(row: dict) -> float:
    """1 over a recorded ratio row of 08's as 08's verdict printed it ('0.71×: 1.41× slower': :attr:`Ratio.inverse`), so
    that 10 quotes the figure 08 showed (readers GD, GG, GH, GI)."""
    return report.recorded_ratio("", row).inverse


def _paired(quantity: str, row: dict | None, gain: Ratio | None, inverted: bool = False) -> Row | None:
    """08's paired ratio (`row`; `inverted`: it records the other way round) beside this notebook's `gain`."""
    if not row or not row.get("spread") or gain is None:
        return None
    value, (lo, hi) = row["value"], row["spread"]
    if inverted:
        value, lo, hi = printed_inverse(row), 1 / hi, 1 / lo
    micro = _micro(row)  # 08's step, where it ran more than one micro-batch: another step than this one
    theirs = report.recorded_ratio("", {**row, "value": value, "spread": (lo, hi)})  # its value kept inside its range
    lo, hi = gain.lo / theirs.hi, gain.hi / theirs.lo  # here over 08, the far ends of the two intervals
    ratio, _ = _pair(gain.value / theirs.value, lo, hi)
    overlap = gain.lo <= theirs.hi and theirs.lo <= gain.hi
    near = lo if lo > 1 else 1 / hi  # the end of the range nearest 1, as a factor
    return Row(f"{quantity} (paired{f'; 08: its step{micro}' if micro else ''})", theirs.numbers, gain.numbers, ratio,
               "not told apart: the two paired intervals overlap" if overlap else
               f"inconclusive: the two paired intervals do not overlap, but two sets of turns can move a paired ratio by "
               f"up to {verdicts.APART:g}× (the rule for two moments: a pace that slows its two versions unevenly)"
               if near < verdicts.APART else
               f"a difference: {verdicts.APART:g}× or more apart beyond both intervals (cause not measured)")


def _attention_split(ran08: Mapping[str, dict], eager: Timing | None, written: Timing | None) -> str:
    """Where the written-out attention's lead over SDPA differs between 08 and here: each notebook's step split, per
    micro-batch, into the written-out step and SDPA's extra time over it (the two medians of each notebook's turns), so
    that the line says which part differs; '' without both notebooks' two readings."""
    w08, s08 = ran08.get("eager, written-out attention"), ran08.get("eager, SDPA")
    if not (w08 and s08 and eager is not None and written is not None) or w08.get("unit") != s08.get("unit"):
        return ""
    try:
        tokens = _tokens_per_step(w08)
    except ValueError:
        return ""
    micro = _micro_count(w08)
    base08, base = _step_s(w08, tokens) / micro, written.median_s  # the written-out step, per micro-batch
    extra08, extra = _step_s(s08, tokens) / micro - base08, eager.median_s - base  # SDPA's extra time over it
    if extra08 <= 0 or extra <= 0:
        return ""
    return (f"that ratio, split per micro-batch (each notebook's two medians, its own turns): SDPA's extra time over the "
            f"written-out step {fmt_time(extra08)} in 08, {fmt_time(extra)} here ({extra / extra08:.2f}×); the written-out "
            f"step itself {fmt_time(base08)} in 08{f' (one optimizer step per {micro} micro-batches)' if micro > 1 else ''}, "
            f"{fmt_time(base)} here ({base / base08:.2f}×): "
            + (f"the attention's extra time agrees within {PACED:g}×, so the ratios differ by the rest of the step, the same "
               "step's move between sets of turns"
               if max(extra / extra08, extra08 / extra) < PACED else "both parts differ"))


INFERRED = "written-out eager over compiled SDPA, inferred"  # 08's row: two paired ratios' quotient, two sets of turns


def _inferred(ran08: Mapping[str, dict], compiled: Timing | None, written: Timing | None) -> Row | None:
    """08's inference of the eager written-out step's lead over the compiled SDPA one (the quotient of its two paired
    ratios over eager SDPA, each in its own turns) beside that lead measured here, the two timed in the same turns."""
    row = ran08.get(INFERRED)
    if not row or compiled is None or written is None or compiled.turns_id is None \
            or compiled.turns_id != written.turns_id:
        return None
    here = bench.speedup(compiled, written, "")
    lo, hi = row.get("spread") or [row["value"]] * 2  # 08's range, from its two intervals' ends: both spreads, as the rows
    return Row(f"{INFERRED.split(',')[0]} (08: inferred from two sets of turns; here: paired)",
               f"{row['value']:.2f}×" + (f" ({lo:.2f}–{hi:.2f})" if row.get("spread") else ""),
               here.numbers, *_pair(here.value / row["value"], here.lo / hi, here.hi / lo))


def _tokens_to_pay(extra_s: float, eager: Timing, gain: Ratio, tokens: float) -> tuple[float, float, float] | None:
    """Tokens after which a compile of `extra_s` seconds pays for itself (:func:`bench.break_even`); None
    where `gain` is no speed-up beyond the spread."""
    if not (gain.clear and gain.value > 1):
        return None
    return tuple(steps * tokens for steps in break_even(extra_s, eager, gain))


def _payback(ran08: Mapping[str, dict], cold_s: float | None, gain: Ratio | None, eager: Timing | None,
             compiled: Timing | None) -> Row | None:
    """Both notebooks' break-evens in tokens (steps of different sizes), 08's reckoned as 08 reckons it:
    from its eager step timed beside the compiled one."""
    cold, after, comp08, ratio08 = (ran08.get(k) for k in ("compile + first step (cold)", "eager, SDPA (beside the compiled)",
                                                            "compiled, SDPA", "compiled vs eager, SDPA"))
    if not (cold and after and comp08 and ratio08 and cold_s and gain and eager and compiled and eager.work):
        return None
    per_step = _tokens_per_step(after)
    t08 = _tokens_to_pay(cold["value"] - _step_s(comp08, per_step), _timing(after, per_step),
                         report.recorded_ratio("compiled vs eager, SDPA", ratio08), per_step)
    here = _tokens_to_pay(cold_s - compiled.median_s, eager, gain, eager.work)
    if t08 is None or here is None:
        return Row(PAYBACK, _millions(t08) if t08 else "no gain established",  # where 08 showed no gain, the gain
                   (_millions(here) + (", this gain not replicated in 08" if t08 is None else "")) if here  # here is
                   else "no gain established", "-", "-")  # one set's (the answer counts one two sets resolve)
    return Row(PAYBACK, _millions(t08), _millions(here),
               *_pair(here[0] / t08[0], here[1] / t08[2], here[2] / t08[1]))


def _after_compile(ran08: Mapping[str, dict], eager: Timing | None, compiled: Timing | None) -> str:
    """Where both of 08's readings after its compile sit below this section's beyond their quartiles: a pace
    that hit 08's eager and compiled steps alike cancels in 08's paired compile ratio; '' otherwise."""
    after, comp = ran08.get("eager, SDPA (beside the compiled)"), ran08.get("compiled, SDPA")
    vs = [report.rate_vs_row(t, row) for t, row in ((eager, after), (compiled, comp))] if after and comp and eager and compiled else []
    if not vs or not all(v and v[1] > 1 for v in vs):  # not both slower in 08 beyond their quartiles
        return ""
    uneven = max(vs[0][0], vs[1][0]) / min(vs[0][0], vs[1][0])  # how unevenly the two were slowed, by these readings
    return (f"08's eager and compiled steps after its compile both read slower than here ({vs[0][0]:.2f}×, {vs[1][0]:.2f}× "
            "as fast here): the part of a slowdown that hit both alike cancels in 08's paired compile ratio, which compares "
            "the two within its own turns" + (f"; these readings slowed them {uneven:.2f}× unevenly, a part that need not "
                                               "cancel (two moments: not measured apart)" if uneven >= 1.02 else ""))


def _rates(ran08: Mapping[str, dict], batch: int, eager: Timing | None, written: Timing | None,
           compiled: Timing | None, before: Timing | None = None, as_08: Timing | None = None,
           ran09: Mapping[str, dict] | None = None, probes: tuple[Timing | None, Timing | None] = (None, None)
           ) -> list[Row]:
    """08's step rates beside this section's, moment beside like moment: eager SDPA before its compile beside section 2's
    plain step (`before`), after it beside this section's (`eager`), compiled, and 08's written-out step (section 4, 5,
    09's turns) beside 08's step timed here (`as_08`; else `written`); its SDPA readings elsewhere: :func:`_elsewhere`.
    `probes`: the pace probe in section 2's and 3's turns, by which each SDPA row's ratio is also read paced."""
    out = as_08 or written  # the written-out step that 08's rows are set beside
    label = f"{STEP_08}, written-out" if as_08 else "written-out"
    first, after = ran08.get(PROBES["08"]), ran08.get(PROBES["08"] + " after the compile")  # 08's paces
    pairs = [("eager SDPA", "each before its compile; here section 2's plain step", before, ran08.get("eager, SDPA"),
              (probes[0], first, "eager SDPA before its compile")),
             ("eager SDPA", "each after its compile", eager, ran08.get("eager, SDPA (beside the compiled)"),
              (probes[1], after, "eager SDPA after its compile")),
             ("compiled SDPA", "", compiled, ran08.get("compiled, SDPA"), (probes[1], after, "compiled SDPA")),
             (label, f"08: section 4{_micro(ran08.get('eager, written-out attention'))}", out,
              ran08.get("eager, written-out attention"), (None, None, ""))]
    for which, row in _moments(ran08, ran09, batch):
        if _written_out(row):  # 08's own step, timed here too; its SDPA readings: :func:`_elsewhere`
            pairs.append((label, which, out, row, (None, None, "")))
    rows = []
    for what, which, t, row, (probe, probe08, short) in pairs:
        vs = report.rate_vs_row(t, row) if t is not None and row else None
        if vs is None:
            continue
        scale = unit_scale(row["unit"], t.unit)
        lo, hi = row["spread"]
        micro = _micro(row) if which.startswith("each") or not which else ""  # 08's step of more micro-batches
        which = "; ".join(filter(None, [which, f"08: its step{micro}" if micro else ""]))
        ratio, verdict = _pair(*vs)
        paced = paced_vs_row(t, probe, row, probe08)
        rows.append(Row(f"{what}, {row['unit']}" + (f" ({which})" if which else ""),
                        f"{row['value']:.3g} ({lo:.3g}–{hi:.3g})",
                        f"{t.rate / scale:.3g} ({t.rate_lo / scale:.3g}–{t.rate_hi / scale:.3g})",
                        ratio + (f"; paced {paced[0]:.2f}×" if paced else ""), verdict, vs[0], row["value"], paced, short))
    return rows


def _moments(ran08: Mapping[str, dict], ran09: Mapping[str, dict] | None, batch: int) -> list[tuple[str, dict]]:
    """08's readings of its step at moments this notebook has no like of, (where, row): its section 5's, its section
    4's step re-timed, 09's turns', its long run's (each runs whichever attention its row names)."""
    sec5 = {"no sampler": ran08.get(f"step, micro-batch of {batch} sequences, no sampler"),
            "sampler on": ran08.get(f"step, micro-batch of {batch} sequences")}
    at = [(f"08: section 5, {how}", row) for how, row in sec5.items() if row]
    at += [(f"08: section 5, {m[1]} micro-batches, no sampler", row) for key, row in ran08.items()
           if (m := re.match(r"section 4's step, (\d+) micro-batches of", key))]  # section 4's step, re-timed there
    at += [(f"08: section 4, again{_micro(row)}", row) for key, row in ran08.items()
           if re.fullmatch(r"written-out step, \S+ autocast", key)]  # section 4's step, timed beside float32
    at += [(f"08: section 5, beside the peak's matmul{_micro(row)}", row) for key, row in ran08.items()
           if key.endswith(", in turns with the peak's matmul")]  # section 4's step, in turns with a matmul
    at += [("09, in its turns", row) for row in [(ran09 or {}).get(WHOLE_STEP)] if row]
    return [(w, row) for w, row in at + [("08: its long run", ran08.get("long run: tokens/s"))] if row]


def _elsewhere(ran08: Mapping[str, dict], ran09: Mapping[str, dict] | None, batch: int,
               readings: Mapping[str, Timing | None], tokens: int) -> tuple[str, bool]:
    """08's (and 09's) readings of 08's eager SDPA step at other moments (:func:`_moments`) against the range of this
    notebook's plain eager SDPA step in its sets of turns (`readings`, where: Timing; `tokens` a step): within it, or
    how far beyond its nearest end (told apart at :data:`verdicts.APART`). One line, and whether any is told apart."""
    at = [(w.removeprefix("08: "), row["value"] * unit_scale(row["unit"], "tok/s"))
          for w, row in _moments(ran08, ran09, batch) if not _written_out(row) and unit_scale(row["unit"], "tok/s")]
    here = {w: tokens / t.median_s for w, t in readings.items() if t is not None}
    if not at or not here:
        return "", False
    lo, hi = min(here.values()), max(here.values())
    off = {w: max(lo / r, r / hi, 1.0) for w, r in at}  # 1: within this notebook's range
    told = any(f >= verdicts.APART for f in off.values())

    return (f"08's step with SDPA at other moments, ktok/s (it adds clipping and AdamW's two groups to this notebook's "
            "plain step): " + ", ".join(f"{w} {r / 1e3:.3g} ({placed_in(r, lo, hi)})" for w, r in at)
            + "; against this notebook's plain eager SDPA step in its sets of turns: "
            + ", ".join(f"{w} {r / 1e3:.3g}" for w, r in here.items())
            + (f"; by the rule for two moments ({verdicts.APART:g}×), told apart: "
               + _and([w for w, _ in at if off[w] >= verdicts.APART]) if told else
               f"; none {verdicts.APART:g}× beyond: not told apart (the rule for two moments)")), told


def _micro_count(row: dict | None) -> int:
    """The micro-batches of 08's step, from its row's setup ('micro-batch 16 × 2, …'); 1 where it names none."""
    found = re.search(r"micro-batch \d+ × (\d+)", (row or {}).get("setup", ""))
    return int(found[1]) if found else 1


def _micro(row: dict | None) -> str:
    """', 2 micro-batches': the micro-batches of 08's step (:func:`_micro_count`); '' for one."""
    n = _micro_count(row)
    return f", {n} micro-batches" if n > 1 else ""


def _tokens_per_step(row: dict) -> int:
    """The tokens of 08's step, from its row's setup ('micro-batch 16 × 2, 4,096 tokens/step')."""
    found = re.search(r"([\d,]+) tokens/step", row.get("setup", ""))
    if found is None:
        raise ValueError(f"Notebook 08's row has no tokens per step in its setup: {row.get('setup')!r}.")
    return int(found[1].replace(",", ""))


def _step_s(row: dict, tokens: int) -> float:
    """Seconds per step of a recorded rate row (tok/s with an SI prefix)."""
    return tokens / (row["value"] * unit_scale(row["unit"], "tok/s"))


def _timing(row: dict, tokens: int) -> Timing:
    """A recorded rate row as a :class:`Timing` of its median step (enough for :func:`bench.break_even`)."""
    return Timing(name="08's eager step", device="", median_s=_step_s(row, tokens), iqr_s=0.0, runs=0, work=tokens,
                  unit="tok/s")


def _millions(tokens: tuple[float, float, float]) -> str:
    """'6.8 M (4.5–9.8 M)': a break-even in tokens, at the medians and over the speed-up's range."""
    mid, few, many = (_m(t / 1e6) for t in tokens)
    return f"{mid} M ({few}–{many} M)"


def _m(x: float) -> str:
    """A count to two significant digits without an exponent: 7.5, 37, 700, 1,200."""
    return f"{x:.2g}" if x < 10 else fmt_count(x)
