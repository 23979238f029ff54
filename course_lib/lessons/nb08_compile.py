"""Notebook 08's compile in words (re-exported by :mod:`course_lib.lessons.nb08`): after how many steps a compile pays
for itself, what a paired gain leaves open where its eager control moved or one set of turns found it, and the same
eager step before and after the compile, read by the rule for two moments."""

from __future__ import annotations

import math

from course_lib import verdicts
from course_lib.bench import Ratio, Timing, break_even, speedup
from course_lib.units import fmt_count


NOT_ESTABLISHED = "not established: its eager control moved as much between two sets of turns"  # a recorded row's note


def break_even_text(speed: Ratio, extra_s: float, eager: Timing, tokens_per_step: int, established: bool = True) -> str:
    """After how many steps compiling pays for itself: `extra_s`, the cold first call's seconds beyond one
    step's work, over what each compiled step saves against `eager` (:func:`bench.break_even`), with the range
    the speed-up's spread gives; one sentence saying there is none where `speed` is no clear gain, or where the gain
    is not `established` (:func:`compile_caveat`). A gain to confirm (:func:`unconfirmed`) gives it 'if the gain holds'."""
    if not (speed.clear and speed.value > 1):
        return ("no gain these repeats can establish: no break-even to state" if speed.value > 1 or speed.within_noise
                else "compiling made the step slower here: no break-even to state")
    if not established:
        return f"the gain is {NOT_ESTABLISHED} (the short line above): no break-even to state"
    steps, few, many = break_even(extra_s, eager, speed)
    return (f"the compilation ({extra_s:.1f} s beyond that step's work) pays for itself against {eager.name} after "
            f"about {fmt_count(steps)} steps of {tokens_per_step:,} tokens "
            f"({fmt_count(few)} to {fmt_count(many)} over the spread of the speed-up)"
            + (", if the gain holds (unconfirmed: one set of turns)" if unconfirmed(speed) else "")
            + "; the saving is reckoned from that reading of the eager step, the one timed beside the compiled GPT")


UNCONFIRMED_SHORT = f"unconfirmed: one set of turns, its interval reaching below {verdicts.CONFIRM:g}×"  # as a clause
UNCONFIRMED = f"{UNCONFIRMED_SHORT} (notebook 10 counts such a gain once a second set confirms it)"


def unconfirmed(r: Ratio) -> bool:
    """Whether `r` is a gain beyond its interval from one set of turns that reaches below :data:`verdicts.CONFIRM`:
    counted once a second set of turns confirms it, as notebook 10 counts (:data:`UNCONFIRMED` says so)."""
    return r.clear and r.value > 1 and r.lo < verdicts.CONFIRM


def pays_clause(steps: float, extra_s: float, cold: bool = True, unconfirmed: bool = False) -> str:
    """The compile's break-even for a short finding, a line of its own (it starts with a newline); '' where there is
    none (`steps` infinite). `cold`: False for a compile after another had filled the caches. `unconfirmed`: the gain
    comes from one set of turns whose interval reaches below :data:`verdicts.CONFIRM`, so the break-even holds only if
    the gain does."""
    if not math.isfinite(steps):
        return ""
    which, warm = ("cold compile", "") if cold else ("compile", ", the caches warm from section 4's")
    return (f"\nits {which} ({extra_s:.1f} s beyond a step's work{warm}) pays for itself after about "
            f"{fmt_count(steps)} steps" + (", if the gain holds" if unconfirmed else ""))


def control_explains(moved: float, earlier: float | None) -> bool:
    """Whether a compile's paired gain may be its eager control's own move: the control, timed beside the compiled
    step, read 1.1× or more its time before the compile (`moved`), and against that earlier reading the compiled step
    is not :data:`verdicts.CONFIRM` faster (`earlier`, its speed over it). One rule for 08 and for 10's quote of 08."""
    return earlier is not None and moved >= 1.1 and earlier < verdicts.CONFIRM


def compile_caveat(speed: Ratio, moved: float = 1.0, earlier: float | None = None,
                   probe: float | None = None) -> tuple[str, bool]:
    """What a compile's paired gain (`speed`) leaves open, as lines for a short finding (each starts with a newline),
    and whether the gain is established. `moved`: the eager step timed beside the compiled one, over the same step's
    time before the compile; `earlier`: the compiled step's speed over that earlier reading (two moments); `probe`: the
    pace probe's time in the later turns over the earlier. Where the eager control moved 1.1× or more and, against
    its earlier reading, the compiled step is not :data:`verdicts.CONFIRM` faster, the gain is not established: it may
    be the control's own move (reader GA). A gain from one set of turns whose interval reaches below CONFIRM is
    unconfirmed (:data:`UNCONFIRMED`)."""
    lines, established = "", True
    if abs(math.log(moved)) >= math.log(1.1):
        control = (f"its eager control read {moved:.2f}× its time before the compile"
                   + (f" (the pace probe: {probe:.2f}×)" if probe else ""))
        if speed.clear and speed.value > 1 and control_explains(moved, earlier):
            established = False
            lines += (f"\nnot established: {control}, and against that earlier reading the compiled step ran at "
                      f"{earlier:.2f}× its speed (two moments): the gain may be the control's own slowing")
        else:
            lines += (f"\n{control}" + (f"; against that earlier reading the compiled step ran at {earlier:.2f}× its "
                                         "speed (two moments)" if earlier is not None else ""))
    if established and unconfirmed(speed):
        lines += f"\n{UNCONFIRMED}"
    return lines, established


def break_even_before(extra_s: float, before: Timing, compiled: Timing, tokens_per_step: int,
                      again: Timing | None = None) -> str:
    """The break-even reckoned instead from the eager step timed before the compile (`before`, another set of
    turns than `compiled`'s): two moments, so a saving between them is read by the rule for two moments, and a
    break-even is stated only where the two are told apart (:data:`verdicts.APART`) and the same eager step timed
    again beside the compiled one (`again`) is not itself told apart from `before` (else that reading is no base)."""
    r = speedup(before, compiled)  # the compiled step's speed over the pre-compile eager step's, two moments
    near = min(max(r.lo, 1 / r.lo), max(r.hi, 1 / r.hi))
    head = (f"against {before.name} timed before the compile ({1e3 * before.median_s:.0f} ms), the compiled step "
            f"({1e3 * compiled.median_s:.0f} ms) ran at {r.value:.2f}× its speed, at two moments")
    moved = speedup(again, before) if again is not None else None  # the eager step against itself, two moments
    if moved is not None and min(max(moved.lo, 1 / moved.lo), max(moved.hi, 1 / moved.hi)) >= verdicts.APART:
        return (f"{head}; but the eager step itself read {max(moved.value, 1 / moved.value):.2f}× apart at those two "
                "moments, so that earlier reading is no base for a break-even")
    if r.lo > 1 and near >= verdicts.APART:  # told apart by the rule: a saving to reckon from
        saved = before.median_s - compiled.median_s
        return (f"{head}, told apart by the rule: the compilation pays for itself after about "
                f"{fmt_count(extra_s / saved)} steps of {tokens_per_step:,} tokens")
    return f"{head}: under {verdicts.APART:g}× apart, so no break-even can be reckoned from that reading"


def before_after_compile(before: Timing, after: Timing) -> str:
    """The same eager step timed in turns before a cold compile and in other turns after it: the two medians
    and their ratio, read by the rule for two moments (a cold compile in the process can slow eager steps
    for a while; which way this run went is what the line says)."""
    r = speedup(after, before)  # the time after over the time before, apart: the range the quartiles allow
    return (f"{before.name}, timed again after the compile beside the compiled GPT: {1e3 * after.median_s:.0f} ms, "
            f"against {1e3 * before.median_s:.0f} ms before it, {r.value:.2f}× its time; "
            + verdicts.moments_words(r.lo, r.hi) + ". The compile's paired ratio compares the two in the same turns: "
            "a change of pace cancels in it where it hit both alike")
