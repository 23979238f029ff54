"""Verdicts: a measured effect against its spread, and a training run against its controls.

One home for the sentences a notebook prints about a comparison:

    speed = bench.speedup(eager, compiled)          # a Ratio: value, interval, drift
    print(speed.verdict("compiling the step", on=DEVICE))
    # verdict on cpu: compiling the step: 1.32× (1.21–1.40) | 1.32× faster, beyond the spread (...)

:class:`Ratio` holds a ratio of two measurements with the range their spreads allow
(:func:`bench.speedup`, :func:`bench.rate_ratio` build it from timings; :func:`ratio_of` from
other numbers) and words it in one place, :meth:`Ratio.verdict`, graded by the effect's size:
no verdict (no spread), no measurable difference, too wide to tell, inconclusive (the machine
drifted more than the difference; or, for two timings taken at different moments, a gap smaller
than :data:`APART`, which a change of the machine's pace between the moments can make), a small
difference, a difference, a large one.

Two training runs on the same batches are compared by the gap of their loss curves
(:func:`tail_gap`) against **control runs**: the baseline again from starting weights nudged by
a last bit (:func:`nudge`, :func:`control_runs`), which measure how far rounding alone moves
the run (:func:`gap_verdict`).

A section's findings print in short, one a line (:func:`in_short`); the verdicts in full, with their notes,
can wait for the notebook's appendix (:func:`kept`).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, NamedTuple, Sequence

import torch
import torch.nn as nn

if TYPE_CHECKING:
    from course_lib.train import History

WIDE = 1.2  # a range holding 1 whose ends are further apart than this factor is too wide to call "no difference"
REACH = 1.1  # ... and so is one reaching further than this factor from 1 (0.99-1.19: 19 % faster is still possible)
SMALL = 1.05  # beyond the spread, a ratio nearer 1 than this is "a small difference"
LARGE = 1.5  # beyond the spread, an interval whose end nearest 1 is this far from it is "far beyond"
APART = 2.5  # two timings taken apart: a verdict only where the interval's end nearest 1 is this far from 1
# The pace of the course's 2-core machine (AMD EPYC) moved 1.12-1.33x between moments of one course run
# (01, 08, 10; 2026-11-29, quiet) and up to 2.2x (02's one-image draw, 834 us vs 1.85 ms) and 2.36x (10's
# eager step, 141 vs 333 ms) in another run of the same day, and 1.54x (00's one-call matmul seconds apart) in a
# later quiet one: quartiles of repeats at each moment hold none.


def _wide(lo: float, hi: float) -> bool:
    """Whether a range holding 1 is too wide to call "no difference": ends more than :data:`WIDE` apart, or
    one end more than :data:`REACH` from 1."""
    return hi > WIDE * lo or max(hi, 1 / max(lo, 1e-300)) > REACH


@dataclass
class Ratio:
    """A ratio of two measurements with the range their spreads allow.

    Of two timings measured apart, ``value`` is the ratio of the medians and ``lo``..``hi``
    the ratio of the quartiles taken the unfavourable and the favourable way round. Of two
    timed in turns (``rounds`` > 0), ``value`` is the median of the per-round ratios,
    ``lo``..``hi`` its interval of ``coverage`` (:func:`median_interval`), and ``drift`` how
    much the machine's speed changed from one round to the next. A range that contains 1 means the two
    cannot be told apart by these repeats (:attr:`within_noise`); a drift larger than the
    difference makes it :attr:`inconclusive`, and so does, for two timings measured ``apart``,
    a gap whose end nearest 1 is under :data:`APART`; :attr:`clear` is neither.
    """

    name: str
    value: float
    lo: float
    hi: float
    more: str = "faster"  # the word for value > 1
    less: str = "slower"  # the word for value < 1
    rounds: int = 0  # paired rounds behind value, lo and hi (0: two timings measured apart)
    coverage: float | None = None  # of the interval lo..hi, when paired
    drift: float | None = None  # the machine's change of speed from round to round (0.12: 12 %), when paired
    medians: float | None = None  # the ratio of the two medians, when paired (it can differ from value)
    # the least change the quantity can show, as a factor (1.01: 1 %; 1.0: any): a reading that
    # saturates, such as utilisation near 100 %, gives ratios beyond a tight spread that mean nothing
    negligible: float = 1.0
    apart: bool = False  # two timings measured at different moments (bench.speedup/rate_ratio, not in turns)

    @property
    def within_noise(self) -> bool:
        """True when the range of the ratio contains 1 (no difference beyond the spread)."""
        return self.lo <= 1.0 <= self.hi

    @property
    def too_wide(self) -> bool:
        """True when the range holds 1 but its ends are more than :data:`WIDE` apart, or one end lies
        more than :data:`REACH` from 1: these repeats cannot tell a difference of that size from none.
        A machine that drifted more than REACH makes it :attr:`inconclusive` instead, whatever the width
        (the drift is the reason the repeats cannot tell, and the glossary's rule reads it first)."""
        return self.within_noise and _wide(self.lo, self.hi) and not self._drifted

    @property
    def _drifted(self) -> bool:
        """True when the pair was timed in turns and the machine's speed changed from one turn to the next
        by more than a verdict of no difference allows (:data:`REACH`, 10 %)."""
        return self.drift is not None and self.drift > REACH - 1

    @property
    def near(self) -> float:
        """The end of the interval nearest 1, as a factor of 1 or more (1.2 for 0.70–0.83 or 1.2–1.4)."""
        return self.lo if self.value > 1 else 1 / self.hi

    @property
    def inconclusive(self) -> bool:
        """True when the ratio is beyond its spread but the machine's speed changed by more than
        the difference (the ratio's distance from 1) during the rounds; within it and narrow enough
        for "no difference", when the speed changed by more than that verdict allows (:data:`REACH`,
        10 %); or, two timings measured
        apart, when the interval's end nearest 1 is under :data:`APART`: a change of the machine's
        pace between the two moments can make such a gap, and their quartiles do not hold it."""
        if self.within_noise:  # "no difference" allows up to REACH: a machine drifting more cannot claim it
            return self._drifted
        drifted = self.drift is not None and self.drift > max(self.value, 1 / self.value) - 1
        return drifted or (self.apart and not self.single and self.near < APART)

    @property
    def single(self) -> bool:
        """True when there is no spread to judge by: one run each, or one paired round."""
        return self.rounds == 1 if self.rounds else self.lo == self.hi

    @property
    def clear(self) -> bool:
        """True when the repeats tell the two apart: a spread to judge by, 1 outside the range,
        and no drift larger than the difference. Code branches on it to decide what to compute next
        (a break-even, a saving); what a notebook prints about the comparison is :meth:`verdict`'s."""
        return not self.single and not self.within_noise and not self.inconclusive

    @property
    def decimals(self) -> int:
        """2, or up to 4 where a difference beyond the spread is so small that 2 would print
        its range's bound nearest 1 as 1.00 (0.996× (0.993–0.998), not 1.00× (0.99–1.00))."""
        if self.lo == self.hi:
            return 2
        if self.within_noise:  # enough digits that the printed ends show the WIDE rule as applied (0.905–1.087), and
            # that a median inside its range does not print as one of its ends (1.006× (1.004–1.012), not 1.01× (1.00–1.01))
            shows = [d for d in (2, 3, 4) if _wide(round(self.lo, d), round(self.hi, d)) == _wide(self.lo, self.hi)
                     and self._off_one(d)]  # and an end off 1 does not print as 1.00 (0.996–1.06, not 1.00–1.06)
            return next((d for d in shows if self._apart_from_ends(d)), shows[0] if shows else 4)
        if self.inconclusive and abs(self.value - 1) < 0.01:  # 1.006× (1.006–1.024), not 1.01× (1.01–1.02)
            d = 3
        elif 0 < self.lo < 0.1:  # far below 1: enough digits that the range does not collapse (0.033, not 0.03)
            return min(4, 1 + math.ceil(-math.log10(self.lo)))
        else:
            nearest = self.lo if self.value > 1 else self.hi
            d = next((d for d in (2, 3, 4) if f"{nearest:.{d}f}" != f"{1:.{d}f}"), 2)  # closer than 4 digits show: 1.00
        # and a median that prints as one of its range's ends would seem to lie outside the range, or the range to
        # reach 1 when it does not: 1.034× (1.026–1.051), not 1.03× (1.03–1.05); 0.986× (0.933–0.991), not 0.99× (0.93–0.99)
        return next((e for e in range(d, 5) if self._apart_from_ends(e)), d)

    @property
    def inverse(self) -> float:
        """1 over the ratio as printed (at :attr:`decimals`), so that '0.83×: 1.20× slower' agrees on the page; the
        phrase uses it from 0.5 up, where the inverse is no more precise than the ratio (below, 1 / :attr:`value`
        with its own range: 0.40× would make 2.50× of a measured 2.52×)."""
        shown = float(f"{self.value:.{self.decimals}f}")
        return 1 / shown if shown else math.inf

    def _off_one(self, d: int) -> bool:
        """Whether, at `d` decimals, each end of the range that lies off 1 prints off 1 too."""
        return all(e == 1 or f"{e:.{d}f}" != f"{1:.{d}f}" for e in (self.lo, self.hi))

    def _apart_from_ends(self, d: int) -> bool:
        """Whether, at `d` decimals, the median prints apart from each end of the range it differs from."""
        v = f"{self.value:.{d}f}"
        return all(v != f"{end:.{d}f}" or self.value == end for end in (self.lo, self.hi))

    @property
    def phrase(self) -> str:
        """How a verdict says it: '1.10× faster', or below 1 the inverse, '1.08× slower'; far below 1
        with the inverse's range, '29.9× slower (27.0–33.3×)'."""
        d = self.decimals
        if self.value >= 1:
            return f"{self.value:.{d}f}× {self.more}"
        if self.value >= 0.5 or self.within_noise or self.lo <= 0:
            return f"{self.inverse:.{d}f}× {self.less}"
        inv = 1 / self.value  # far below 1: the inverse with its own range, at its own digits
        di = 1 if inv >= 10 else 2
        return f"{inv:.{di}f}× {self.less} ({1 / self.hi:.{di}f}–{1 / self.lo:.{di}f}×)"

    @property
    def doubt(self) -> str:
        """Why the repeats do not tell the two apart, for a verdict's sentence ('' when :attr:`clear`)."""
        if self.single:
            return "one run each, no spread to judge it by"
        if self.within_noise and self.apart:  # the rule for two moments: within their spreads, inconclusive
            return f"timed at two moments: {moments_words(self.lo, self.hi, word=False)}"
        if self.within_noise and not self.inconclusive:  # timed in turns: the interval of the paired ratios; apart: the quartiles' range
            what = "the in-turns interval" if self.rounds else "the repeats' range"
            d = self.decimals
            if self.too_wide:
                return f"{what}, {self.lo:.{d}f}–{self.hi:.{d}f}×, is too wide to tell"
            return (f"{what}, {self.lo:.{d}f}–{self.hi:.{d}f}×, holds 1: no difference beyond it" if self.rounds
                    else "no difference beyond the spread of the repeats")
        if self.inconclusive and self.drift is not None and self.within_noise:
            return (f"the machine's speed changed by {self.drift:.1%} from one turn to the next, more than the "
                    f"{REACH - 1:.0%} that a verdict of no difference allows")
        if self.inconclusive and self.drift is not None:
            gap, d = self._gap_digits(1)  # two figures that print alike would read as an error
            return (f"the whole interval lies {'above' if self.value > 1 else 'below'} 1, yet the machine's speed "
                    f"changed by {self.drift:.{d}%} from one turn to the next, more than the {gap:.{d}%} difference")
        if self.inconclusive:
            return f"timed at two moments: {moments_words(self.lo, self.hi, word=False)}"
        return ""

    def _gap_digits(self, d: int) -> tuple[float, int]:
        """The difference (the ratio's distance from 1, as a share) and the decimals, `d` or one more, at which
        it and the turns' drift print apart (where they differ at all)."""
        gap = max(self.value, 1 / self.value) - 1
        alike = self.drift is not None and self.drift != gap and f"{self.drift:.{d}%}" == f"{gap:.{d}%}"
        return gap, d + alike

    @property
    def medians_apart(self) -> bool:
        """True when the two medians' ratio, unpaired, lies 2 % or more from the paired median, or on the
        other side of 1 from it (by 0.5 % or more): then a line gives it too (:attr:`statistic`, 07's sweep
        table), so that medians printed above a verdict do not seem to contradict it."""
        if self.medians is None:
            return False
        return self._medians_other_side or abs(math.log(self.medians / self.value)) > math.log(1.02)  # or 2 % or more apart

    @property
    def statistic(self) -> str:
        """What the range is: 'the spread of the repeats' or, timed in turns, 'median of 5
        paired turns, 94 % interval'."""
        if not self.rounds:
            return "the spread of the repeats"
        apart = self.medians_apart
        # under 10 %, one decimal: a 0.8 % effect beside 'drift 1%' would read as no larger than the drift
        drift = ""
        if self.drift is not None and self.rounds > 1:
            base = 1 if self.drift < 0.1 else 0
            gap, d = self._gap_digits(base)  # a difference that prints as large as the drift: one more digit
            near = self.clear and not self.within_noise and gap < 2 * self.drift  # a difference the drift nearly covers:
            drift = f", this pair's drift {self.drift:.{d}%}" + (  # both printed, so the rule can be checked (reader GB)
                f", the difference {gap:.{d}%}" if d > base or near else "")
        return (f"median of {self.rounds} paired turns, {self.coverage:.0%} interval{drift}"
                + (f"; the two medians' ratio, unpaired, is {self.medians:.{self.decimals}f}×" if apart else ""))

    @property
    def grade(self) -> str:
        """The verdict's word for this ratio: 'no verdict' (no spread), 'too wide', 'no difference',
        'inconclusive' (also two timings taken apart whose range holds 1: the rule for two moments), or,
        beyond the spread, 'negligible' (the whole interval closer to 1 than
        :attr:`negligible`: less than the quantity can show), 'small' (under 5 %), 'large' (even
        the interval's end nearest 1 is 1.5× or more away from it) or 'clear'."""
        if self.single:
            return "no verdict"
        if self.apart and self.within_noise:  # two moments can move a pace by up to APART: neither alike nor unlike
            return "inconclusive"
        if self.too_wide:
            return "too wide"
        if self.inconclusive:  # beyond the spread, or within it, by less than the machine drifted
            return "inconclusive"
        if self.within_noise:
            return "no difference"
        if 1 / self.negligible <= self.lo and self.hi <= self.negligible:
            return "negligible"
        if max(self.value, 1 / self.value) < SMALL:
            return "small"
        return "large" if self.near >= LARGE else "clear"

    @property
    def brief(self) -> str:
        """The ratio, its range and the verdict in a few words, for a table's cell or a breakdown's line
        that says the statistic once beside it: '1.50× (1.40–1.60) faster', '0.69× (0.60–0.80): 1.45×
        slower', '1.03× (0.80–1.30) too wide' (:attr:`grade`'s word where the repeats do not tell). Where the two
        medians' ratio lies on the other side of 1 (the medians printed above would seem to point the other way),
        it is given too: '1.04× (0.96–1.05) no measurable difference (paired; the medians' ratio: 0.96×)'."""
        if not self.clear:
            said = f"{self.numbers} {'no measurable difference' if self.grade == 'no difference' else self.grade}"
        else:
            said = f"{self.numbers} {self.more}" if self.value > 1 else f"{self.numbers}: {self.phrase}"
        return said + (f" (paired; the medians' ratio: {self.medians:.{self.decimals}f}×)" if self.medians_across else "")

    @property
    def fits(self) -> str:
        """Beside 'no measurable difference', what its interval still holds, so that it does not read as 'no effect':
        ' (anything from -1% to +9% fits)'; '' for another verdict, or where both ends lie within 2 % of 1."""
        if self.grade != "no difference" or max(self.hi - 1, 1 - self.lo) < 0.02:
            return ""
        return f" (anything from {self.lo - 1:+.0%} to {self.hi - 1:+.0%} fits)"

    @property
    def medians_across(self) -> bool:
        """True when the two medians' ratio, unpaired, lies on the other side of 1 from the paired median (each by
        0.5 % or more): read alone, the medians would put the two the other way round."""
        return self.medians is not None and self._medians_other_side and abs(math.log(self.value)) > math.log(1.005)

    @property
    def _medians_other_side(self) -> bool:
        """The two medians' ratio lies on the other side of 1 from the paired median, 0.5 % or more from 1 (with
        :attr:`medians` set): the one test behind :attr:`medians_apart` and :attr:`medians_across`."""
        return (self.medians - 1) * (self.value - 1) < 0 and abs(math.log(self.medians)) > math.log(1.005)

    def verdict(self, what: str = "", on: str = "") -> str:
        """The one line that says what this comparison shows, graded by :attr:`grade` (``str()``
        of a Ratio is the same line without the 'verdict: ' and the subject): 'verdict on cpu:
        compiling the step: 1.32× (1.21–1.40) | 1.32× faster, beyond the spread (median of 5
        paired turns, 94% interval, drift 2%)'. `what` names the change (default: the
        ratio's name), `on` the device, after 'verdict'. Notebooks print this instead of
        testing :attr:`clear`."""
        head = ("verdict" + (f" on {on}" if on else "") + ": ") if what or on else ""
        return f"{head}{what or self.name}: {self.numbers} | {self._body}"

    @property
    def numbers(self) -> str:
        """The ratio and its range at :attr:`decimals`: '1.034× (1.026–1.051)'."""
        d = self.decimals
        return f"{self.value:.{d}f}× ({self.lo:.{d}f}–{self.hi:.{d}f})"

    @property
    def _body(self) -> str:
        """The graded words and what the range is (:attr:`statistic`)."""
        paired = f" ({self.statistic})" if self.rounds else ""
        where = paired or " of the repeats"
        return {
            "no verdict": self.doubt,
            "too wide": (f"within the spread: a range too wide to tell; "
                         + (f"the machine's pace moved {self.drift:.0%} from one turn to the next: rerun on a quieter "
                            "machine" if self.drift and self.drift > (self.hi / self.lo - 1) / 2
                            else "more repeats would narrow it") + paired
                         if self.rounds else
                         "within the spread of the repeats: a range too wide to tell; more repeats would narrow it"),
            "no difference": (f"within the spread: no measurable difference{paired}" if self.rounds
                              else "within the spread of the repeats: no measurable difference"),
            "inconclusive": (f"within the spread, but inconclusive: {self.doubt}{paired}" if self.within_noise and
                             not self.apart else
                             ("equal" if f"{self.value:.{self.decimals}f}" == f"{1:.{self.decimals}f}" else self.phrase)
                             + f" {'by the medians' if self.apart else 'in the median turn'}, but "
                             f"inconclusive: {self.doubt}{paired}"),
            "negligible": (f"{abs(self.value - 1):.2%} {self.more if self.value > 1 else self.less}, beyond the spread "
                           f"but within {self.negligible - 1:.0%} of no change, less than this reading can show: no "
                           f"difference that matters{paired}"),
            "small": f"{self.phrase}: a small difference, beyond the spread{where}",
            "clear": f"{self.phrase}, beyond the spread{where}",
            "large": f"{self.phrase}, far beyond the spread{where}",
        }[self.grade]

    def __str__(self) -> str:
        return self.verdict()


def median_interval(values: Sequence[float], confidence: float = 0.9) -> tuple[float, float, float, float]:
    """(median, lo, hi, coverage) of `values`: a distribution-free interval for the median.

    lo and hi are the k-th smallest and k-th largest value, k the largest with
    P(Binomial(n, ½) < k) <= (1 - confidence) / 2, at least 1 (then the minimum and maximum);
    coverage = 1 - 2·P(Binomial(n, ½) < k) is the chance that the interval holds the median of
    the distribution the values come from (independent rounds assumed). 5 values: min–max,
    94 %; 10: 2nd to 9th, 98 %; 3: min–max, 75 %.
    """
    xs = sorted(values)
    n = len(xs)
    if not n:
        raise ValueError("median_interval needs at least one value.")
    tail = lambda k: sum(math.comb(n, i) for i in range(k)) / 2**n  # noqa: E731  P(B < k)
    k = max([1] + [k for k in range(1, (n + 1) // 2 + 1) if tail(k) <= (1 - confidence) / 2])
    return statistics.median(xs), xs[k - 1], xs[n - k], 1 - 2 * tail(k)


def brief_legend(ratios: Sequence[Ratio]) -> str:
    """What the :attr:`Ratio.brief` cells of a table or breakdown rest on, said once: 'median of 7
    paired turns, 98% interval; the machine's drift from turn to turn up to 15%; ...' ('' without
    paired ones)."""
    paired = [r for r in ratios if r.rounds]
    if not paired:
        return ""
    said = lambda values: " or ".join(dict.fromkeys(values))  # noqa: E731  one figure where all agree
    return (f"median of {said(str(r.rounds) for r in paired)} paired turns, {said(f'{r.coverage:.0%}' for r in paired)} "
            f"interval; the machine's drift from turn to turn up to {max(r.drift or 0 for r in paired):.0%}; "
            f"'no measurable difference': the interval holds 1 within {REACH - 1:.0%} of it, and the pair's drift is "
            f"under {REACH - 1:.0%}; 'too wide': it holds 1 but reaches further (or its ends lie over {WIDE:g}× apart), "
            "and these turns cannot tell; 'inconclusive': the drift is larger than the difference (or than 10 %)")


def moments_words(lo: float, hi: float, *, word: bool = True, short: bool = False) -> str:
    """What a range `lo`..`hi` of ratios between two timings taken at two moments says, in the course's
    one wording: within the spreads; beyond them but under :data:`APART` (inconclusive); or beyond it (a
    difference). The last word is said unless not `word` (a verdict that says it already); `short`: the
    verdict alone, for a table's column under a footnote that states the rule."""
    if short and lo <= 1 <= hi:  # the same reason as any gap under APART: one wording for the rule
        return ("not told apart (its range holds 1)" if max(1 / lo, hi) >= APART else  # too wide to be 'under' it
                f"not told apart (under {APART:g}×)")
    if lo <= 1 <= hi:
        return "within their spreads"
    if short:
        near = min(max(lo, 1 / lo), max(hi, 1 / hi))  # the range's end nearest 1, as a factor
        return f"not told apart (under {APART:g}×)" if near < APART else f"a difference ({APART:g}× or more)"
    if min(max(lo, 1 / lo), max(hi, 1 / hi)) < APART:  # its end nearest 1, as a factor, is under APART
        return (f"its range, {lo:.2f}–{hi:.2f}×, is within {APART:g}× of 1, a gap the pace of two moments can make"
                + (": inconclusive" if word else ""))
    return (f"its whole range, {lo:.2f}–{hi:.2f}×, lies {APART:g}× or more from 1, beyond what two moments can differ "
            "by" + (": a difference" if word else ""))


def ratio_of(name: str, value: float, lo: float, hi: float, *, more: str = "higher",
             less: str = "lower", apart: bool = False) -> Ratio:
    """A :class:`Ratio` from numbers measured some other way (lo <= value <= hi); `apart` when
    they come from timings taken at different moments (:attr:`Ratio.apart`)."""
    if not lo <= value <= hi:
        raise ValueError(f"A ratio's range must contain its value, got {value} outside {lo}–{hi}.")
    return Ratio(name, value, lo, hi, more, less, apart=apart)



# ---- two training runs on the same batches: how far apart they end, against rounding alone ------


def nudge(model: nn.Module, ulps: int = 1) -> nn.Module:
    """Move every parameter of `model` by `ulps` representable steps (up if positive, down if
    negative; ``torch.nextafter``), nothing else changed: the smallest change a run can start
    from. Returns `model`."""
    if ulps == 0:
        raise ValueError("nudge by at least one step (ulps = 1, -1, 2, ...): 0 changes nothing.")
    with torch.no_grad():
        for p in model.parameters():
            toward = torch.full_like(p, math.inf if ulps > 0 else -math.inf)
            for _ in range(abs(ulps)):
                p.copy_(torch.nextafter(p, toward))
    return model


def control_ulps(k: int) -> list[int]:
    """The nudges of `k` control runs, each a different smallest change: +1, -1, +2, -2, ... steps."""
    return [(i // 2 + 1) * (1 if i % 2 == 0 else -1) for i in range(k)]


class Control(NamedTuple):
    """A control run: the baseline trained again from starting weights nudged by `ulps` steps."""

    ulps: int
    history: History


CONTROL_GROWTH = 4  # a nudge that changed no loss record is made this many times larger ...
CONTROL_MOST = 4**5  # ... up to this many steps (a relative change of about 1e-4 in float32)


def control_runs(run: Callable[[int], History], base: Sequence[float], k: int) -> list[Control]:
    """`k` control runs of a training run whose loss records are `base`: ``run(ulps)`` trains it
    again, the same batches in the same order, with every starting weight nudged by `ulps`
    steps (:func:`nudge`), for the nudges of :func:`control_ulps`.

    A control whose loss records come out bit-identical to `base` is no control: rounding
    absorbed the nudge (seen with one step at torch 2.6 on one thread, where AdamW's first update
    is nearly the sign of the gradient). Its nudge is then made CONTROL_GROWTH times larger until
    the records differ; a run that still matches `base` at CONTROL_MOST steps raises, since its
    losses do not depend on its starting weights. The nudges stay distinct (1·4^a ≠ 2·4^b)."""
    base = list(base)
    controls = []
    for ulps in control_ulps(k):
        while True:
            history = run(ulps)
            if list(history.loss) != base:
                break
            if abs(ulps) * CONTROL_GROWTH > CONTROL_MOST:
                raise ValueError(f"a control run nudged by {ulps:+d} steps gave the baseline's loss records "
                                 "exactly: its losses do not depend on its starting weights, so no control can "
                                 "measure what rounding does (is the learning rate 0?).")
            ulps *= CONTROL_GROWTH
        controls.append(Control(ulps, history))
    return controls


def tail_gap(base: Iterable[float], other: Iterable[float], last: int) -> float:
    """Mean of other - base over the last `last` records of two loss curves taken on the same
    batches in the same order (a paired difference: each record of one run against the same
    record of the other)."""
    a, b = list(base), list(other)
    n = min(last, len(a), len(b))
    if n < 1:
        raise ValueError("tail_gap needs at least one record in each curve.")
    return sum(y - x for x, y in zip(a[-n:], b[-n:])) / n


FAR_BEYOND = 5.0  # a gap this many times the largest control's is a difference, whatever k


def gap_verdict(gap: float, controls: Iterable[float], base_name: str) -> str:
    """How a run's gap from the baseline (:func:`tail_gap`) compares with the gaps of control runs:
    the baseline again, its starting weights nudged by a last bit or two (:func:`nudge`), which
    measures how far rounding alone moves this training run. Graded by the gap's size: within
    the largest control's gap, no measurable difference; beyond it, if the run were just another
    rounding change, that would happen 1 time in k + 1 (the k + 1 gaps are then alike, and any of
    them is the largest), so with few controls a gap just beyond them is a hint; one FAR_BEYOND
    times the largest control's gap or more is more than such a nudge moves the run."""
    gaps = [abs(c) for c in controls]
    if not gaps:
        raise ValueError("gap_verdict needs at least one control run to compare against.")
    k, largest = len(gaps), max(gaps)
    runs = f"all {k} control runs" if k > 1 else "the control run"
    if abs(gap) <= largest:
        return (f"within what a last-bit nudge does ({k} control run{'s' * (k > 1)}, the {base_name} run with its starting "
                f"weights nudged by a few last bits, ended up to {largest:.4f} from it): no measurable difference")
    way = "higher" if gap > 0 else "lower"
    if largest < 5e-5 or abs(gap) >= FAR_BEYOND * largest:
        times = (f"the controls moved by less than 0.0001, {largest:.1g}" if largest < 5e-5 else
                 f"{abs(gap) / largest:.1f}× the largest control's gap: {abs(gap):#.3g} against {largest:#.3g}")
        return (f"{way} than {base_name}, far beyond {runs} ({times}): more than a last-bit nudge of {base_name}'s "
                "starting weights moves it")
    return (f"{way} than {base_name}, beyond {runs} ({abs(gap) / largest:.1f}× the largest control's gap: "
            f"{abs(gap):#.3g} against {largest:#.3g}); a nudge alone would land beyond them 1 time in {k + 1}"
            + (", so read it as a hint, not a proof" if k + 1 < 10 else ""))


def in_short(short: str | Sequence[str], details: Iterable[str], keep: dict[str, list[str]] | None = None,
             under: str = "") -> str:
    """'in short: `short`' (a sequence: one finding a line, aligned under the first; a finding of several lines, each
    aligned so), then every non-empty line of `details` indented under 'details:'. With `keep`, the details are kept
    there under `under` (a section's name) for the appendix (:func:`kept`), and one line says where they are."""
    found = [ln for s in ([short] if isinstance(short, str) else short) if s for ln in s.splitlines() if ln.strip()]
    lines = [ln for d in details if d for ln in d.splitlines() if ln.strip()]
    head = [f"in short: {found[0]}", *(f"{' ' * len('in short: ')}{s}" for s in found[1:])]
    if keep is not None and lines:
        keep[under] = lines
        return "\n".join(head + [f"  (every verdict in full, with its notes: the appendix, {under})"])
    return "\n".join(head + (["  details:", *(f"    {ln}" for ln in lines)] if lines else []))


AGREE = 1.1  # readings of the same step (or with each set's pace taken out) this close agree: 08's, 09's and 10's rule


CONFIRM = 1.1  # a gain whose interval reaches below this, from one set of turns, wants a second set to confirm it
ELSEWHERE = "What GPUs measured"  # a notebook's section holding every reference GPU's and published block, apart


def aside(text: str, keep: dict[str, list[str]], under: str) -> str:
    """A reference GPU's or published block (`text`: another machine's figures, often another model's) kept in `keep`
    under `under` (a section's name) for a section of their own (:data:`ELSEWHERE`, printed with :func:`kept`), so
    that the lesson's own lines read without them; one line says where it went, in full the first time, then short
    ('' where `text` has none)."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return ""
    first = not keep
    keep[under] = [*keep.get(under, []), *lines]
    return (f"(what GPUs measured here: under '{ELSEWHERE}', after the answer)" if first else
            f"(GPUs: under '{ELSEWHERE}')")


def kept(details: Mapping[str, Sequence[str]]) -> str:
    """The details :func:`in_short` kept, section by section in the order they ran ('' where none were)."""
    return "\n".join(ln for under, lines in details.items() if lines
                     for ln in [f"{under}:", *(f"  {ln}" for ln in lines)])
