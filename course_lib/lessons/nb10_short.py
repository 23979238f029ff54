"""Notebook 10's timed sections in the layout of its answer: one line that says what the section found
('in short: …'), then the section's other lines under 'details:'. Each function returns text a cell
prints; :mod:`course_lib.lessons.nb10` re-exports them."""

from __future__ import annotations

import dataclasses
import math
from typing import Iterable, Mapping, Sequence

from course_lib import report, verdicts
from course_lib.bench import Ratio, Timing
from course_lib.lessons.nb08_compile import UNCONFIRMED_SHORT, unconfirmed as wants_confirming  # 08's rule, one home
from course_lib.lessons.nb08_mfu import FAULTS, faults_words  # noqa: F401  re-exported: one home, 08's run order too
from course_lib.lessons.nb10_reference import queue_drained
from course_lib.units import fmt_time
from course_lib.verdicts import ELSEWHERE, aside, in_short, kept  # noqa: F401  re-exported: one home, shared with 08

NB = "10_compile_and_profile"
SWING = verdicts.AGREE  # eager readings this far apart (they do not agree) get a line saying which is typical is not measured


def sync_short(gain: Ratio | None, waits: int, device_type: str, reads: float | None = None,
               plain: Ratio | None = None) -> list[str]:
    """Section 2's findings, one a line: the synchronising calls each logging step makes, what keeping the values
    on the device changed here (`gain`, None where not timed) and, off a GPU, whether any GPU run resolved what the
    reads cost (the reference's own figures stand apart, :func:`course_lib.verdicts.aside`). `reads`: off a GPU, the reads'
    share of the profiled step, said where the turns told no difference: more turns would not resolve it."""
    said = [f"a step reading its logged values makes {waits} synchronising calls, a step keeping them on the device none",
            "keeping them instead of reading them, in speed, timed in turns here: " + (gain.brief if gain is not None
                                                                                      else "not timed")
            + (f"; the profiler puts the reads at {100 * reads:.2g}% of the step, far less than turns can resolve"
               if reads is not None and device_type != "cuda" and gain is not None and not gain.clear else "")]
    if plain is not None and plain.clear:  # what the logging costs besides its reads: the norms themselves
        said.append(f"the plain step without logging, against the one keeping its values: {plain.brief} (the norms "
                    "computed each step, read or not)")
    ref = _recorded("keeping values vs reading values") if device_type != "cuda" else None
    if ref is not None and not ref.clear:
        said.append("no GPU run of this course has yet resolved what the reads cost a training step (the reference "
                    "GPU's reading, with its own GPT, apart: " + ("too wide to tell)" if ref.too_wide else "no cost shown)")
                    + ("; what one read waits for on a GPU, a queue of matmuls (notebook 01), stands there too"
                       if queue_drained() else ""))
    elif ref is not None:
        said.append("the reference GPU, with its own GPT, measured a difference (its reading stands apart)")
    return said


def compile_short(gain: Ratio | None, attention: Ratio | None, moved: float | None = None) -> list[str]:
    """Section 3's findings, one a line: compiling's speed-up in these turns, and the written-out attention's; where
    the eager SDPA step read :data:`SWING` or more apart from its section-2 time (`moved`, here over there), a line
    that says so, since a move that hits the versions unevenly stays in these turns' ratios."""
    said = [f"compiling (default mode) against eager, timed in turns: {gain.brief} (" + (
        f"{UNCONFIRMED_SHORT}; " if wants_confirming(gain) else "") + "section 3b times the gain again)"
            if gain is not None else "compiling: not timed here"]  # unconfirmed as 08 says it, where it is (GJ)
    if attention is not None:
        said.append(f"the written-out attention instead of SDPA, eager: {attention.brief}"
                    + (" (SDPA's kernel in this format on this device: not a verdict on SDPA elsewhere)"
                       if attention.clear and attention.value > 1 else ""))
    if moved is not None and max(moved, 1 / moved) >= SWING:
        said.append(f"the eager SDPA step read {moved:.2f}× its section-2 time in these turns (the pace probe's readings "
                    "beside it: appendix): a move that slows the versions unevenly stays in these ratios")
    return said


def break_short(fix: Ratio, item_cost: Ratio | None = None) -> list[str]:
    """Section 3b's findings, one a line: the graph break's fix; the break's own cost, the fix's control
    (`item_cost`: the .item() GPT's speed over the plain compiled GPT's, :func:`break_unbacked`), where it was
    timed. Compiling's gain timed again in these turns stands under 'details:' (:func:`compile_again`)."""
    said = [f"removing the graph break (a tensor instead of .item()): {fix.brief} against the .item() GPT"]
    if item_cost is not None:
        said.append("the .item() GPT against the plain compiled GPT (the break's cost with Dynamo's giving up): " + (
            f"{item_cost.brief}: not resolved in these turns, so how much of the fix's gain is the break's is not "
            "established" if break_unbacked(fix, item_cost) else
            f"{item_cost.brief}, though the fix itself read no "
            "speed-up beyond its spread: the break's cost shows in one pairing, not in the other"
            if break_cost_only(fix, item_cost) else item_cost.brief))
    return said


def compile_again(again: Ratio, first: Ratio | None, item_cost: Ratio | None = None) -> str:
    """Under compiling's verdict in section 3b's turns (`again`): the share of that gain the break took back, where
    the .item() GPT ran measurably slower, and whether section 3's turns (`first`) agree; '' where neither applies."""
    said = []
    if item_cost is not None and item_cost.clear and item_cost.value < 1 and is_gain(again):
        d = lambda r: max(3, r.decimals)  # noqa: E731  three decimals at least: near 1, two would move the share by points
        shown = lambda r, v: float(f"{v:.{d(r)}f}")  # noqa: E731  as printed, so that the share follows from the page
        share = lambda cost, gain: math.log(1 / cost) / math.log(gain)  # noqa: E731  the break's cost over the gain, in logs
        took, least, most = (share(shown(item_cost, c), shown(again, g)) for c, g in
                             ((item_cost.value, again.value), (item_cost.hi, again.hi), (item_cost.lo, again.lo)))
        said.append(f"by the two paired ratios' medians (the break's cost, {item_cost.value:.{d(item_cost)}f}×, "
                    f"against the compile's gain, {again.value:.{d(again)}f}×, in logs) the break took back "
                    f"{_share(took)} of that gain; their intervals allow {_share(least)} to {_share(most)}; the medians "
                    "of the times above are each setting's own, not these ratios")
    if first is not None and gain_unsettled(first, again):
        said.append(f"section 3's turns read {first.brief}: " + ("not confirmed here" if is_gain(first) else
                                                                  "the gain read here did not show there")
                    + " (the answer weighs the sets of turns)")
    elif first is not None and is_gain(first) and not is_gain(again):  # too wide or inconclusive: no check either way
        said.append(f"section 3's turns read {first.brief}: these turns could not check it ({again.grade})")
    return f"  {'; '.join(said)}" if said else ""


def break_control(fix: Ratio, item_cost: Ratio | None) -> str:
    """What the fix's control says where it and the fix disagree (:func:`break_unbacked`, :func:`break_cost_only`),
    as a clause ('' where they agree): one wording for section 3b's line and the answer."""
    if break_unbacked(fix, item_cost):
        return (f"the .item() GPT is not told slower than the plain compiled GPT ({item_cost.brief}): what the break "
                "costs a step is not established")
    if break_cost_only(fix, item_cost):
        return (f"the .item() GPT against the plain compiled GPT, in the same turns: {item_cost.brief}: the break's "
                "cost shows in one pairing, not in the other")
    return ""


def _share(v: float) -> str:
    """A share of a gain: 'about 53%', or 'more than all' past 100 %."""
    return "more than all" if v > 1 else f"about {v:.0%}"


def break_unbacked(fix: Ratio, item_cost: Ratio | None) -> bool:
    """Whether the fix's gain (the fixed GPT over the .item() GPT) lacks its control: the .item() GPT, timed in the
    same turns against the plain compiled GPT (`item_cost`, its speed over the plain one's), not measurably slower.
    Then the gain may be the turns' order or the two monitored GPTs' own difference, not the break's cost."""
    return is_gain(fix) and item_cost is not None and not (item_cost.clear and item_cost.value < 1)


def break_cost_only(fix: Ratio, item_cost: Ratio | None) -> bool:
    """Whether the break's cost shows only against the plain compiled GPT: the .item() GPT measurably slower than
    it (`item_cost`), while the fix against the .item() GPT reads no speed-up beyond its spread."""
    return not is_gain(fix) and item_cost is not None and item_cost.clear and item_cost.value < 1


def gain_unsettled(first: Ratio, again: Ratio) -> bool:
    """Whether two sets of turns leave a gain unsettled: one reads a speed-up beyond its spread, the other no
    measurable difference (a range too wide, or a drifting machine, checks nothing either way)."""
    return (is_gain(first) and again.grade == "no difference") or (is_gain(again) and first.grade == "no difference")


def unconfirmed(first: Ratio, again: Ratio, *more: Ratio) -> str:
    """Why a compile gain read in some sets of turns (`first`, `again`, `more`) and not in others is not
    established: the sets whose interval holds 1 cannot confirm it; where every interval shares some values,
    the gain that would fit them all."""
    sets = [first, again, *more]
    gains, nones = [r for r in sets if is_gain(r)], [r for r in sets if not is_gain(r)]
    lo, hi = max(r.lo for r in sets), min(r.hi for r in sets)
    held = (f"the interval {_range(nones[0])} holds 1" if len(nones) == 1 else
            f"the intervals {', '.join(_range(r) for r in nones)} hold 1")
    fits = (f"; a gain of {lo:.2f}–{hi:.2f}× would fit every set, as would none where an interval holds 1" if lo <= hi
            else "; no one gain fits every set")
    return (f"{held}, so {'it' if len(nones) == 1 else 'they'} cannot confirm the gain read in "
            f"{', '.join(_range(r) for r in gains)}{fits}: a gain resolved in "
            f"{'one set' if len(gains) == 1 else 'some sets'} of turns, not replicated in the others")


def _range(r: Ratio) -> str:
    """'1.04–1.11×': a ratio's interval, with as many decimals as its verdict prints."""
    return f"{r.lo:.{r.decimals}f}–{r.hi:.{r.decimals}f}×"


def is_gain(r: Ratio) -> bool:
    """Whether a ratio is a speed-up beyond its spread (and its turns' drift)."""
    return r.clear and r.value > 1


def _recorded(key: str) -> Ratio | None:
    """The reference run's recorded ratio `key` as a :class:`Ratio` (None where it has none with a range)."""
    row = report.reference(NB)[1].get(key)
    return report.recorded_ratio(key, row) if row and row.get("spread") else None


def other_sets(first: Ratio | None, again: Ratio | None, in_08: Sequence[Ratio]) -> str:
    """Beside section 3's compile gain (`first`) in 'so what paid': where another set of turns (section 3b's,
    `again`; notebook 08's, `in_08`) read no gain beyond its spread, what each read and the gain that fits
    them all; '' where every set read a gain (or section 3's is none)."""
    others = [(w, r) for w, r in (("section 3b's turns", again), *(("notebook 08's", r) for r in in_08)) if r is not None]
    if first is None or not is_gain(first) or all(is_gain(r) for _, r in others):
        return ""
    lo, hi = max(r.lo for r in [first, *(r for _, r in others)]), min(r.hi for r in [first, *(r for _, r in others)])
    said = "; ".join(f"{w} {r.brief}" for w, r in others)
    if lo > hi:
        return said + ": no one gain fits every set"
    return said + (f": a gain of {lo:.2f}–{hi:.2f}× fits every set (where their intervals overlap)" if lo > 1 else
                   f": anything from no gain to {hi:.2f}× fits every set (where their intervals overlap)")


def points(p: float) -> str:
    """Percentage points with one decimal, or two where one would print 0.0 (0.04, not 0.0)."""
    return f"{p:.1f}" if round(p, 1) else f"{p:.2f}"


def compile_in_08(ran08: Mapping[str, dict] | None) -> Ratio | None:
    """Notebook 08's paired compile speed-up of this GPT (SDPA), read as a speed-up; None where it has none."""
    row = (ran08 or {}).get("compiled vs eager, SDPA")
    if not (row and row.get("spread")):
        return None
    return dataclasses.replace(report.recorded_ratio("compiled vs eager, SDPA", row), more="faster", less="slower")


def control_in_08(ran08: Mapping[str, dict] | None) -> tuple[float, float] | None:
    """Where notebook 08's eager SDPA step, timed again beside its compiled GPT, read 1.1× or more from its reading
    before the compile: (that move, as the later time over the earlier; the compiled step's speed over the earlier
    eager reading, two moments), so that a quote of 08's compile gain carries 08's own caveat; else None."""
    rows = ran08 or {}
    before, beside, compiled = (rows.get(k) for k in ("eager, SDPA", "eager, SDPA (beside the compiled)",
                                                      "compiled, SDPA"))
    if not (before and beside and compiled) or len({r.get("unit") for r in (before, beside, compiled)}) != 1:
        return None
    moved = before["value"] / beside["value"]  # rates: the later time over the earlier
    return (moved, compiled["value"] / before["value"]) if abs(math.log(moved)) >= math.log(1.1) else None


def eager_readings(readings: Mapping[str, Timing | None]) -> str:
    """The plain eager step's readings in this notebook's sets of turns (where: Timing), one line, with the
    fastest-to-slowest ratio read by the rule for two moments ('' with fewer than two): which reading is typical
    is not measured, and each set's ratios are paired within its own turns."""
    got = {where: t for where, t in readings.items() if t is not None}
    if len(got) < 2:
        return ""
    fast, slow = min(got.values(), key=lambda t: t.median_s), max(got.values(), key=lambda t: t.median_s)
    r = slow.median_s / fast.median_s
    return ("the plain eager step in this notebook's sets of turns: "
            + ", ".join(f"{where} {fmt_time(t.median_s)}" for where, t in got.items())
            + f": {r:.2f}× from the fastest to the slowest, two moments each: " + verdicts.moments_words(r, r, short=True)
            + ("; which reading is typical is not measured, and each section's ratios are paired within its own turns"
               if r >= SWING else ""))


def probe_clause(readings: Mapping[str, Timing | None], probes: Mapping[str, Timing | None]) -> str:
    """Where the step's readings (where: Timing) moved :data:`SWING` or more from one set of turns to another: the pace
    probe's readings in the same sets (`probes`, by the same names) and the step's time over the probe's, which
    takes the machine's pace, as the probe reads it, out of the step's move; '' where fewer than two sets have both.
    What the probe explains is its move, signed, from the step's fastest set to its slowest, as a share of the step's:
    held (a quarter or less, or the other way), a part, about all of it, or more than all (4/3 or more: the probe
    moved more than the step, so the step's time over the probe's moves the other way)."""
    both = {w: (t, probes[w]) for w, t in readings.items() if t is not None and probes.get(w) is not None}
    if len(both) < 2:
        return ""
    step = [t.median_s for t, _ in both.values()]
    probe = [p.median_s for _, p in both.values()]
    over = [s / p for s, p in zip(step, probe)]
    r_step, r_probe, r_over = (max(v) / min(v) for v in (step, probe, over))
    if r_step < SWING:
        return ""
    fast, slow = step.index(min(step)), step.index(max(step))
    share = math.log(probe[slow] / probe[fast]) / math.log(r_step)  # the probe's move, signed, as a share of the step's
    said = ("the probe held while the step moved: whatever moved the step did not slow a fixed matmul and copy (what "
            "it is, is not measured)" if share <= 0.25 else
            f"the step's spread is {r_step:.2f}× alone, {r_over:.2f}× over the probe: about {share:.0%} of the step's "
            "move (in logs, its fastest set to its slowest) goes with a fixed matmul and copy's pace; the rest is not "
            "measured" if share < 0.75 else
            "the probe moved with the step: what moved it (the machine's pace, or other work in this process or its "
            "turns; not told apart) slowed a fixed matmul and copy about as much" if share <= 1.33 else
            f"the probe moved more than the step from the step's fastest set to its slowest "
            f"({probe[slow] / probe[fast]:.2f}× against {r_step:.2f}×): the machine's pace moved, and the step "
            "followed it only in part (why, is not measured)")
    return (f"the pace probe (a fixed matmul and copy) in the same sets of turns: "
            + ", ".join(f"{fmt_time(p.median_s)}" for _, p in both.values())
            + f" ({r_probe:.2f}× from fastest to slowest); the step's time over the probe's: "
            + ", ".join(f"{v:.2f}" for v in over) + f" ({r_over:.2f}×): {said}")


UNSTEADY = 0.10  # a timing whose quartiles lie this far (half their distance) from its median ran unsteadily


def unsteady(timings: Iterable[Timing]) -> str:
    """Where a set of turns ran unsteadily (a setting whose quartiles lie :data:`UNSTEADY` or more from its
    median): which, and why its verdicts' paired ratios can differ from the ratio of the medians; '' otherwise."""
    timings = list(timings)
    wide = [t for t in timings if t.spread >= UNSTEADY]
    if not wide:
        return ""
    rest = [t for t in timings if t not in wide]
    def about(t: Timing) -> str:  # '±14%', or where the quartiles lie lopsided, each side's own distance
        below, above = 1 - t.lo_s / t.median_s, t.hi_s / t.median_s - 1
        return f"{below:.0%} below and {above:.0%} above" if t.lopsided else f"±{t.spread:.0%} about"
    return ("these turns ran unsteadily: " + ", ".join(f"{t.name}'s quartiles lie {about(t)} its median" for t in wide)
            + (f" (the others' within ±{max(t.spread for t in rest):.0%})" if rest else "")
            + "; a slow spell that hit one setting's turn and not its pair's moves that setting's median, so a paired "
            "ratio can differ from the medians' ratio (the verdicts print both where they differ)")

