"""Notebook 08's MFU and utilisation in words (re-exported by :mod:`course_lib.lessons.nb08`): the
fastest step's MFU and its same-turns check, the answer as a range, the busy reading against MFU, and
what sets section 5's steps apart from section 4's, measured in the same turns."""

from __future__ import annotations

import math
import statistics
from typing import Mapping, Sequence

import numpy as np
import torch

from course_lib.bench import Ratio, Timing, median_interval
from course_lib.datasheet import Spec
from course_lib.units import fmt_rate, fmt_time
from course_lib.verdicts import AGREE  # the same step's readings this close agree (one home)


# A utilisation reading is a share of time the device was busy, read every 0.1 s: near 100 % it
# saturates, and a change under 1 % of it says nothing about the work (its verdict says so).
BUSY_NEGLIGIBLE = 1.01
# both steps clip and step AdamW once per micro-batch: the larger one pays for that update over more tokens
AMORTISED = ("one clip + AdamW step per micro-batch in both, so the ratio includes that update's cost spread over more "
             "tokens, not only the matmuls' efficiency")


def busy_ratio(busy: dict[str, list[float]], small: str, large: str) -> Ratio:
    """The utilisation of `large`'s turns over `small`'s, paired turn by turn (median and its
    interval, :func:`bench.median_interval`); `busy` holds each version's utilisation per turn, in %."""
    ratios = [b / max(a, 1e-9) for a, b in zip(busy[small], busy[large])]
    value, lo, hi, coverage = median_interval(ratios)
    return Ratio(f"utilisation, {large} vs {small}", value, lo, hi, "higher", "lower", rounds=len(ratios),
                 coverage=coverage, negligible=BUSY_NEGLIGIBLE)


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
        return (f"verdict: MFU rose {gain.value:.2f}× ({gain.lo:.2f}–{gain.hi:.2f}"
                + (f"; the median of the paired turns, the two medians' ratio {gain.medians:.2f}×" if gain.medians_apart
                   else "") + ") with the larger micro-batch "
                f"({AMORTISED}) while the utilisation reading {moved} ({seen}): a busy reading says the device was occupied, "
                "not how much of its peak the work used" + (
                    " (on a CPU this reading stayed near 100 % in both steps here: a core running torch's ops counts as "
                    "busy whatever their size, so only MFU shows the contrast on this device; a GPU's GPU-Util is "
                    "the reading this lesson is about)" if steady and
                    busy_pct[large] >= 99 else ""))
    return (f"verdict: here the utilisation reading rose about as much as MFU ({busy.value:.2f}× against "
            f"{gain.value:.2f}×, ranges overlapping: {seen}); in this run it did tell the two apart")


def busy_short(gain: Ratio, busy: Ratio, small: str, large: str, busy_pct: dict[str, float],
               mfu: dict[str, float], cpu: bool = False) -> str:
    """Section 5's finding in one line, for 'in short:': where MFU moved beyond the spread and the utilisation reading
    did not move as much, the two MFUs (medians), the paired ratio and the two readings; otherwise
    :func:`busy_verdict`'s line (which, with the reasons, stands in full in the appendix either way). `cpu`: the
    reading sits near 100 % by construction there, so the line says that only MFU could move."""
    if not (gain.clear and gain.value > 1 and (busy.within_noise or busy.hi < gain.lo)):
        return busy_verdict(gain, busy, small, large, busy_pct, mfu).removeprefix("verdict: ")
    steady = abs(busy_pct[large] - busy_pct[small]) < 1  # under a percentage point: unchanged to the eye
    moved = ("did not move beyond its spread" if busy.within_noise else
             "stayed within a point" if steady else "moved less than MFU, beyond both ranges")
    d = 1 if cpu else 0  # on a CPU the reading sits near 100 %: its decimal shows what was read
    return (f"with {large} a micro-batch instead of {small}, MFU {mfu[small]:.1%} → {mfu[large]:.1%} (the medians; "
            f"paired in turns, {gain.numbers} higher)\nwhile the utilisation reading {moved} ({busy_pct[small]:.{d}f} % → "
            f"{busy_pct[large]:.{d}f} %)" + (": on a CPU a core running torch's ops counts as busy whatever their size, so "
                                             "only MFU could move here (a GPU's contrast: under 'What GPUs measured')" if cpu
                                             else ": busy is not efficient"))


def mfu_text(peak: Timing, peak_note: object, best: Timing | None, flops_per_token: int,
             best_mfu: Sequence[float] | None, spec: Spec | None, sheet_tflops: float | None,
             sheet_mfu: float | None, precision: str, dev: torch.device, device_label: str) -> str:
    """Section 5's lines: the measured peak; the fastest step's tokens/s, its model FLOP/s and `best_mfu`
    (its MFU against that peak, then the ends of its quartiles' range); its MFU against the datasheet's
    dense figure of `precision`, `sheet_mfu` (`sheet_tflops` from `spec`, the datasheet's entry for this GPU),
    or why there is none (no such figure, the GPU not in the table, a CPU: `dev` says which)."""
    on_gpu = dev.type == "cuda"
    lines = [f"{peak.name}: {fmt_rate(peak.rate, 'FLOP/s')} on {device_label}, {peak_note}"]
    if best is None or best_mfu is None:
        lines.append("No version of the step was timed in section 4 (out of memory): no MFU from that section.")
    else:
        lines += [f"fastest of section 4's versions by its median: {best.name}, {fmt_rate(best.rate, 'tok/s')} "
                  f"-> {fmt_rate(flops_per_token * best.rate, 'FLOP/s')} of model FLOPs",
                  f"MFU: {best_mfu[0]:.1%} of the measured peak (the step's quartiles: {best_mfu[1]:.1%}–"
                  f"{best_mfu[2]:.1%}; with the peak's too, {best_mfu[1] * peak.rate / peak.rate_hi:.1%}–"
                  f"{best_mfu[2] * peak.rate / peak.rate_lo:.1%}): section 4's reading (section 6 sets it beside the "
                  "others; notebook 10 divides by the same peak)"]
    if spec and sheet_tflops and sheet_mfu is not None:
        lines.append(f"MFU against NVIDIA's datasheet ({spec.name}, dense {precision}: {sheet_tflops:g} TFLOP/s, "
                     f"not a measurement): {sheet_mfu:.1%}")
    elif spec and not sheet_tflops:
        lines.append(f"The course's datasheet table has no dense {precision} figure for {spec.name}: MFU against "
                     "the measured peak only.")
    elif not spec and on_gpu:
        lines.append("This GPU is not in the course's datasheet table: MFU against the measured peak only.")
    elif not spec:
        lines.append("A CPU has no entry in the course's datasheet table (NVIDIA GPUs only): MFU against "
                     "the measured peak only.")
    return "\n".join(lines)


def usable(mfu: Ratio) -> bool:
    """Whether a paired MFU can check the MFU over the stored peak: its interval within 1.5x end to end
    (a wider one, or one past 100 %, says the machine's pace moved within the turns, not the MFU)."""
    return mfu.hi <= 1.0 and mfu.hi <= 1.5 * mfu.lo


def _mfu_check(mfu: Ratio, stored: float, matmul: Ratio, step: Ratio | None) -> tuple[str, list[float]]:
    """What the same-turns check says of section 5's MFU (:func:`paired_mfu_text` has the arguments):
    'too wide' (it checks nothing), 'matmul too wide', 'stands' (the matmul and the step kept their
    pace), or 'range', with the MFU readings whose range is then this step's MFU."""
    if not usable(mfu):
        return "too wide", []
    if matmul.too_wide:
        return "matmul too wide", []
    if step is None:  # the check timed another version than the MFU's step: its reading is not that step's
        return ("stands" if matmul.within_noise else "other"), []
    if matmul.within_noise and step.within_noise and not _moved(step):
        return "stands", []
    return "range", [stored, stored / step.value]  # over the stored peak; last: section 4's


def _moved(step: Ratio) -> bool:
    """Whether the step's median rate moved from section 4's by more than :data:`BOUND`, whatever the range
    the two timings' quartiles allow (a wide spread can hold 1 while the medians lie 20 % apart)."""
    return abs(math.log(step.value)) > math.log(1 + BOUND)


def mfu_span(best_mfu: Sequence[float], mfu: Ratio | None, stored: float, matmul: Ratio | None,
             step: Ratio | None = None) -> tuple[float, float]:
    """The MFU section 5 answers with, as a range: the readings' where the same-turns check moved them,
    else the fastest step's quartiles (`mfu` None: no check ran)."""
    if mfu is not None and matmul is not None:
        status, readings = _mfu_check(mfu, stored, matmul, step)
        if status == "range":
            return min(readings), max(readings)
    return best_mfu[1], best_mfu[2]


def answer_with_long_run(section5: tuple[float, float], long_mfu: Sequence[float],
                         more: Mapping[str, tuple[float, float]] | None = None, first: str = "sections 4 and 5") -> str:
    """Section 5's answer (`section5`, its range over the stored peak, named `first`) widened by `more` (a name ->
    another reading's range of the same bench step, a median as (m, m)): every reading of this step over one peak, each
    one moment's; then the long run's median (`long_mfu`: median, then its quartiles' ends) on a line of its own, since
    the training loop adds fresh batches, a progress bar and a sampler to the step (reader GI)."""
    parts = {first: section5, **(more or {})}
    lo, hi = min(r[0] for r in parts.values()), max(r[1] for r in parts.values())
    def span(a: float, b: float) -> str:  # '34.1%', not '34.1%–34.1%', where the two ends round alike
        return f"{a:.1%}" if f"{a:.1%}" == f"{b:.1%}" else f"{a:.1%}–{b:.1%}"
    top = next(k for k, (_, b) in parts.items() if b == hi)  # where the fastest reading was taken
    mid = statistics.median([x for a, b in parts.values() for x in dict.fromkeys((a, b))])  # each reading once
    loop = long_mfu[0] / mid  # the training loop's MFU over the step's
    return (f"answer: this step's MFU across this notebook's readings of it, each at one moment: median "
            f"{mid:.1%} of the measured peak, spanning {span(lo, hi)} (the fastest reading, {hi:.1%}: {top}):\n  "
            + "; ".join(f"{k}: {span(a, b)}" for k, (a, b) in parts.items())
            + ("\n  the slower readings are the same step at other moments of this process (the appendix's run-order table "
               "says whether the pace probe moved with them)" if hi / lo >= AGREE else "")
            + f"\nthrough the training loop (train.fit: fresh batches, a progress bar, a sampler), the long run's median: "
              f"{long_mfu[0]:.1%}, {loop:.2f}× the step's median"
            + (" (the loop's extra work and the moment are not told apart: no pace probe in the long run)"
               if max(loop, 1 / loop) >= AGREE else ""))


FAULTS = 1000  # minor page faults per step: a count below this, a millisecond or so of a step, weighs little


def faults_words(named: Mapping[str, tuple[float, float | None]], per: str = "step", of: str = "",
                 listed: bool = True) -> str:
    """Where the same step's readings (where -> (its time, minor page faults per `per` or None)) were counted: the
    faults beside each, and whether the slower readings (:data:`AGREE` or more the fastest's time) are the ones that
    faulted, every one of them ('' with fewer than two counted). A fault maps in a page the allocator took fresh from
    the system: a candidate for a step's move, set beside its time, not tested as its cause. `of`: whose faults, where
    a cell counts two steps' ("08's step's "). `listed`: False where a table above shows each count already."""
    got = {w: (s, f) for w, (s, f) in named.items() if f is not None}
    if len(got) < 2:
        return ""
    fastest = min(s for s, _ in got.values())
    slow = {w: f for w, (s, f) in got.items() if s >= AGREE * fastest}
    fast = [f for s, f in got.values() if s < AGREE * fastest]
    counts = ", ".join(f"{w} {f:,.0f}" for w, (_, f) in got.items())
    least = FAULTS if per == "step" else FAULTS / 2  # per 1,000 tokens: a 2,048-token step's count, halved
    if max(f for _, f in got.values()) < least:
        said = f"under {least:,.0f} in every reading, too few to weigh in a step's time"
    elif not slow:
        said = (f"the readings with a count ran within {AGREE:g}× of each other's time"
                + " (the others were not counted)" * (len(got) < len(named)) + ": no slower reading to set the faults beside")
    elif min(slow.values()) - max(fast) >= least:
        which = (f"every slower reading ({AGREE:g}× or more the fastest's time)" if len(slow) > 1 else
                 f"the one slower reading with a count ({AGREE:g}× or more the fastest's time)")  # readers GB, GC
        said = (f"{which} faulted at least {min(slow.values()) - max(fast):,.0f} more than the faster ones: memory taken "
                "fresh from the system each step goes with the slower time here" + (" (a candidate cause, not tested)"
                                                                                    if len(slow) > 1 else
                                                                                    ", in one reading (a candidate cause, "
                                                                                    "not tested)"))
    else:
        clean = [w for w, f in slow.items() if f - max(fast) < least]
        said = (f"{', '.join(clean)} ran {AGREE:g}× or more slower than the fastest without faulting more: the faults "
                "do not go with the step's move here")
    if not listed:
        return f"{of}page faults (pages the system maps in at first touch): {said}"
    return f"{of}page faults per {per} (pages the system maps in at first touch): {counts}: {said}"


def _cell(x: float | None, fmt: str, width: int) -> str:
    """`x` formatted right-aligned in `width`, or '-' where it was not measured."""
    return f"{'-' if x is None else format(x, fmt):>{width}}"


def run_order(readings: Mapping[str, Timing | None], probes: Mapping[str, Timing | None] | None = None,
              looped: Sequence[str] = ()) -> str:
    """The same step's readings (a name -> its Timing, None where it did not run), in the order they ran, as a table
    (ms per step; the pace probe's ms where `probes`, by the same names, timed one in the same turns; the minor page
    faults per 1,000 tokens, as notebook 10 counts them, where its set of turns counted them and the timing has its
    tokens), then how they moved, one finding a line: within :data:`AGREE` of each other they agree; else whether the step only read slower the later it ran, or moved both
    ways; where two or more sets timed the probe, whether the probe moved with it; where faults were counted,
    whether the slower readings are the ones that faulted. `looped`: the readings timed back to back for a while
    (the others one call a turn); where every one of them ran 1.1× or more slower than every other, a line says so,
    a candidate. Each reading is one moment's."""
    probes = probes or {}
    got = {name: t for name, t in readings.items() if t is not None}
    if len(got) < 2:
        return ""
    ms = [1e3 * t.median_s for t in got.values()]
    span = max(ms) / min(ms)
    probe_ms = {n: 1e3 * probes[n].median_s if probes.get(n) is not None else None for n in got}
    per_k = {n: 1e3 * t.faults / t.work if t.faults is not None and t.work else None for n, t in got.items()}
    probed, counted = any(probe_ms.values()), any(f is not None for f in per_k.values())
    w = max(len(n) for n in got)
    table = [f"  {'reading':<{w}}  ms a step" + "  probe, ms" * probed + "  page faults per 1,000 tokens" * counted]
    table += [f"  {n:<{w}}  {m:>9.0f}" + f"  {_cell(probe_ms[n], '.1f', 9)}" * probed
              + f"  {_cell(per_k[n], ',.0f', 28)}" * counted for (n, t), m in zip(got.items(), ms)]
    if span < AGREE:
        found = [f"within {span:.2f}× of each other: the readings agree"]
    elif all(later >= 0.98 * earlier for earlier, later in zip(ms, ms[1:])):  # never faster by more than 2 %
        found = [f"the step read slower the later it ran, {ms[-1] / ms[0]:.2f}× from the first reading to the last"]
    else:
        found = [f"{span:.2f}× apart, now slower, now faster, in no order"]
    paced = {n: (t.median_s, probes[n].median_s) for n, t in got.items() if probes.get(n) is not None}
    if len(paced) >= 2 and span >= AGREE:  # the fixed matmul and copy beside two or more of the readings
        step_span = max(s for s, _ in paced.values()) / min(s for s, _ in paced.values())
        probe_span = max(p for _, p in paced.values()) / min(p for _, p in paced.values())
        over = [st / pr for st, pr in paced.values()]  # the step's time over the probe's: the pace taken out
        left = max(over) / min(over)
        moved = f"the pace probe moved {probe_span:.2f}× where the step moved {step_span:.2f}× (the {len(paced)} sets that timed both)"
        found.append(
            f"the pace probe held within {probe_span:.2f}× where the step moved {step_span:.2f}× (the {len(paced)} sets "
            "that timed both): the machine's pace, as that fixed matmul and copy read it, does not account for the "
            "move; what does is not measured" if probe_span < AGREE <= step_span else
            f"{moved}; with each set's probe taken out, within {left:.2f}×: the probe moved with the step (what "
            "moved both, the machine's pace or other work in this process, is not told apart)" if left < AGREE else
            f"{moved}; with each set's probe taken out, within {left:.2f}×: the probe accounts for part of the move; "
            "the rest is not measured" if left <= step_span ** (2 / 3) else  # a third of the move or more, on a log scale
            f"{moved}; with each set's probe taken out, {left:.2f}× apart, little closer than the step alone: the "
            "probe accounts for little of the move; what moved the step is not measured" if left < step_span else
            f"{moved}; with each set's probe taken out, {left:.2f}× apart, wider than the step alone: the probe did "
            "not move with the step; what moved the step is not measured")
    elif span >= AGREE:
        found.append("what moved it is not measured here")
    faulted = faults_words({n: (t.median_s, per_k[n]) for n, t in got.items()}, per="1,000 tokens",
                           listed=False)  # the table lists them; one unit and one threshold with notebook 10's
    if faulted:
        found.append(faulted)
    back = {n: m for n, m in zip(got, ms) if n in looped}
    single = [m for n, m in zip(got, ms) if n not in looped]
    if back and single and min(back.values()) >= AGREE * max(single):  # every looped reading the slower
        found.append(f"the readings timed back to back ({', '.join(back)}) ran {min(back.values()) / max(single):.2f}× "
                     "or more slower than every reading timed one call a turn: how the step is timed is a candidate, "
                     "not tested")
    head = "the same step, in the order it ran" + (" (the pace probe: a fixed matmul and copy timed in the same turns)"
                                                   if probed else "")
    return "\n".join([f"{head}:", *table, *(f"  {ln}" for ln in found)])


def fastest_seen(t: Timing, mfu: Sequence[float], vs: Ratio | None = None) -> str:
    """A version timed outside section 4's turns whose median rate is above the answer's step's (`t`, its MFU: median,
    then its quartiles' ends): said beside the answer, as another version's, with `vs`, its paired ratio over its own
    eager step in the same turns, where given (a higher median is not a verdict: the ratio says whether it was told
    apart)."""
    return (f"the highest median rate timed in this notebook: {t.name} (section 4's second turns), "
            f"{fmt_rate(t.rate, 'tok/s')} -> MFU {mfu[0]:.1%} (quartiles {mfu[1]:.1%}–{mfu[2]:.1%}): another version than "
            "the answer's step" + (f"; against its eager step in the same turns, {vs.brief}" if vs is not None else ""))


def mfu_answer(best: Timing | None, best_mfu: Sequence[float] | None, mfu: Ratio, stored: float, matmul: Ratio,
               step: Ratio | None = None, later: bool = False) -> str:
    """Section 5's answer in one line, after the figures it rests on: the fastest step's MFU against the
    measured peak where the same-turns check lets it stand, else the range of the readings; '' without
    a step (`best` None). `later`: the long run (section 6) times the same step and gives the final answer."""
    if best is None or best_mfu is None:
        return ""
    status, readings = _mfu_check(mfu, stored, matmul, step)
    more = "; section 6's long run reads this step again, and its answer includes that reading" if later else ""
    if status == "range" and later:  # the readings so far, each one moment's; section 6 answers with their range
        return (f"MFU of {best.name} so far: {best_mfu[0]:.1%} (section 4), {stored:.1%} (these turns); section 6 "
                "sets every reading of this step side by side")
    if status == "range":
        lo, hi = min(best_mfu[0], *readings), max(best_mfu[0], *readings)  # each over the stored peak
        return (f"answer so far: {best.name}, {lo:.1%}–{hi:.1%} MFU of the measured peak across its readings, each at one "
                f"moment: in section 4's turns (the recorded row) {best_mfu[0]:.1%} (quartiles {best_mfu[1]:.1%}–"
                f"{best_mfu[2]:.1%}); in the later turns printed above, {stored:.1%} over the stored peak "
                f"({mfu.value:.1%} over those turns' own matmul){more}")
    return (f"answer so far: {best.name} reaches {best_mfu[0]:.1%} MFU (quartiles {best_mfu[1]:.1%}–{best_mfu[2]:.1%}) "
            "of the measured peak; " + ("the same-turns check above agrees" if status == "stands" and step is not None
                                        else "the same-turns check above timed another version of the step, so it does "
                                        "not check this one" if status == "other"
                                        else "the peak's matmul held its stored pace in the same-turns check above, which "
                                        "timed another version of the step" if status == "stands" else
                                        "the same-turns check above could not check it: the matmul's pace in its turns was too "
                                        "wide to tell" if status == "matmul too wide" else
                                        "the same-turns check above was too wide to check it") + more)


def paired_mfu_text(mfu: Ratio, what: str, device: str, stored: float, matmul: Ratio,
                    step: Ratio | None = None, later: bool = False, own: Ratio | None = None) -> str:
    """The check of section 5's MFU at one moment, a few short lines: the `what` step and the peak's own
    matmul timed in the same turns. `mfu` is the paired ratio of the step's model FLOP/s to the matmul's,
    `stored` the same turns' step over the stored peak, `matmul` the matmul's FLOP/s in these turns over
    the stored peak's, `step` the step's rate in these turns over section 4's timing of it (both timed
    apart; None where section 4's MFU came from another version of the step). Where the matmul kept
    within the spreads of its stored pace and the step of section 4's, the MFU above is this run's
    reading; otherwise this step's MFU is the range of the readings, each one moment's (`later`: said once, by
    section 6's long run, which adds its reading). `own`, where section 4's MFU is another version's (`step` None):
    this step's rate here over section 4's reading of the same version, said on a line of its own."""
    lines = [f"the same check at one moment: {mfu.rounds} turns of the {what} step and the peak's matmul | {device}",
             f"  over the same turns' matmul: {mfu.value:.1%} ({mfu.lo:.1%}–{mfu.hi:.1%}), the median of the turns' ratios",
             f"  over the stored peak: {stored:.1%}, from the step's median rate (a ratio of medians: it need not equal "
             "the median ratio)"]
    if step is None and own is not None:  # the step timed here is not the MFU's: its own pace, beside section 4's
        lines.append(f"  the {what} step here: " + ("within section 4's quartiles of it" if own.within_noise and not
                                                     _moved(own) else f"{own.value:.2f}× ({own.lo:.2f}–{own.hi:.2f}) "
                                                     "section 4's rate of it (two moments apart; what moved it is not "
                                                     "measured here)") + "; section 4's MFU is another version's")
    status, readings = _mfu_check(mfu, stored, matmul, step)
    if status == "too wide":
        return "\n".join(lines + [f"  the paired interval spans {mfu.hi / mfu.lo:.1f}× (the machine's pace moved within "
                                  "these turns): too wide to check the MFU above"])
    if status == "matmul too wide":
        return "\n".join(lines + [f"  the matmul's spreads ({matmul.lo:.2f}–{matmul.hi:.2f}×) are too wide to say "
                                  "whether it held its stored pace"])
    said = ["the matmul within the spreads of its stored pace" if matmul.within_noise else
            f"the matmul's median ran at {matmul.value:.2f}× its stored pace"]
    if step is not None:
        said.append("the step's rate within section 4's quartiles" if step.within_noise and not _moved(step) else
                    f"the step ran at {step.value:.2f}× ({step.lo:.2f}–{step.hi:.2f}) section 4's pace\n"
                    "  (two moments apart; what moved it is not measured here)")
    if status == "stands":
        return "\n".join(lines + [f"  {', and '.join(said)} (two moments: no change shown): the MFU above is this run's "
                                  "reading"])
    lines.append(f"  {'; '.join(said)}")
    if status == "other":  # section 4's MFU is another version's: these turns leave it as it was
        return "\n".join(lines + ["  the MFU above is another version's: these turns do not revise it"])
    if not later:  # else section 6's answer gives the range, with the long run's reading
        lines.append(f"  so this step's MFU in this process: {min(readings):.1%}–{max(readings):.1%} of the stored peak, "
                     "these readings' range" if len(readings) > 1 else
                     f"  so this step's MFU in this process: {readings[0]:.1%} of the stored peak in these turns, "
                     "beside section 4's reading above")
    return "\n".join(lines)


def busy_line(t: Timing, mfu: Sequence[float], busy: Sequence[float]) -> str:
    """One micro-batch's turns: its timing, its MFU (median, then the ends of its quartiles' range) and the
    median utilisation reading of its turns with their range, in %."""
    return (f"{t} | MFU {mfu[0]:.2%} ({mfu[1]:.2%}–{mfu[2]:.2%}) | busy {float(np.median(busy)):.0f} % "
            f"(turns: {min(busy):.0f}–{max(busy):.0f} %)")


BOUND = 0.10  # a change of the rate the busy turns must rule out to settle what sets section 5's MFUs apart


def busy_parts(sampler: Ratio, accum: Ratio | None, apart: Ratio | None, n_micro: int) -> str:
    """What sets section 5's steps apart from section 4's, each measured in the busy comparison's turns:
    `sampler`, the micro-batch's tokens/s with the sampler's thread running over without it; `accum`,
    section 4's step itself (`n_micro` micro-batches per optimizer step; None where it has one) over one
    micro-batch per step, per token; `apart`, section 4's step in these turns over section 4's own timing of
    it (two moments; None where section 4 timed another version). Ends with what the three say together."""
    lines = ["what sets these steps apart from section 4's, timed in these same turns without the sampler:",
             "  " + sampler.verdict("the sampler's thread, tokens/s with it vs without")]
    if accum is not None:
        lines.append("  " + accum.verdict(f"{n_micro} micro-batches per optimizer step (section 4's step) vs one, "
                                          "tokens/s"))
    if apart is not None:
        lines.append("  " + apart.verdict())
    named = [(r, what) for r, what in ((sampler, "the sampler"), (accum, f"accumulating {n_micro} micro-batches"))
             if r is not None]
    moved = [f"{what} ({r.phrase})" for r, what in named if r.clear and r.grade not in ("negligible", "small")]
    if moved:
        rest = ("; the other parts above are not settled, and section 4's step itself moved between the two moments"
                if apart is not None and not apart.within_noise else "; the other parts above are not settled")
        return "\n".join(lines + [f"verdict: {' and '.join(moved)} changed the step's rate here, beyond the spread"
                                  f"{rest}: so the gap between these MFUs and section 4's is not this part's alone"])
    bound = max(math.prod(max(r.hi, 1.0) for r, _ in named),  # their intervals' far ends together, one direction at a
                math.prod(max(1 / r.lo, 1.0) for r, _ in named)) - 1  # time: a slow end and a fast end do not add (GI)
    if bound > BOUND and apart is not None and not apart.within_noise and max(apart.value, 1 / apart.value) - 1 > bound:
        return "\n".join(lines + [  # wide, but the same step's own move is wider still: that move carries the gap
            f"verdict: {' and '.join(w for _, w in named)} could change the rate by up to {bound:.1%} (the far ends of "
            f"their intervals, together); section 4's step itself, timed again in these turns, read {apart.value:.2f}× "
            "the pace section 4 measured (two moments, so no verdict on that move): the same step running at another "
            "pace here sets these MFUs apart from section 4's more than the two parts can; what moved its pace is not "
            "measured"])
    if bound > BOUND:
        return "\n".join(lines + [f"verdict: too noisy to tell: {' or '.join(w for _, w in named)} could change the "
                                  f"rate by as much as {bound:.{1 if f'{bound:.1%}' != f'{BOUND:.1%}' else 2}%} (both at the "
                                  "far ends of their intervals together), more than "
                                  f"{BOUND:.0%}, the bound this check must reach to call them too small to matter; what "
                                  "sets these MFUs apart from section 4's is not settled here"])
    said = (f"verdict: {' and '.join(w for _, w in named)} change the rate by {bound:.1%} at most here (the far ends of "
            "their intervals, together)")
    if apart is None or apart.within_noise:
        return "\n".join(lines + [said + ("" if apart is None else
                                          "; section 4's step kept its section-4 pace here, within the spreads")])
    return "\n".join(lines + [
        f"{said}; section 4's step, timed again in these turns, ran at {apart.value:.2f}× the pace section 4 measured "
        f"(two moments): any gap "
        f"between the two sections' MFUs larger than {bound:.1%} is not explained by them"])
