"""Notebook 10's section 4, the roofline's numbers in words, apart from its lesson module so that each
stays short (:mod:`course_lib.lessons.nb10` re-exports what its notebook calls): where the roofs come
from, the costliest ops against the roof of their own memory level, how to read the op times, the
op time by kind, the verdict by share of op time, and what the figure leaves out.

    print(op_table(measured, ridge_of, of_roof, "cpu"))  # of_roof(o): o's FLOP/s over its roofline's
"""

from __future__ import annotations

import math
from collections import Counter
import re
from typing import Callable, Iterable, Mapping, Sequence

import torch

from course_lib import published, report, verdicts
from course_lib.bench import Ratio, Timing, speedup
from course_lib.lessons.nb10_short import eager_readings, faults_words, probe_clause
from course_lib.roofline import OpTime, StepOps, intensity, ridge, vs_datasheet
from course_lib.units import fmt_rate, fmt_time

OfRoof = Callable[[OpTime], float]  # an op's achieved FLOP/s as a share of its roof at its intensity
RidgeOf = Callable[[OpTime], float]  # the ridge of an op's roofline, where its memory roof meets the peak
FUSIBLE = ("element-wise", "reduction & other", "copy")  # the op kinds Inductor generates code for; matmuls it calls


def roofs_note(peak: Timing, main_bw: Timing, fast_bw: Timing, peak_note: str, bw_note: str, precision: str,
               gpu_name: str | None, device: str) -> str:
    """Where the two roofs come from, the ridge of each memory roof, the datasheet's figures beside
    them (`gpu_name`: None off a GPU; the reference GPU run's roofs: :func:`roofs_elsewhere`)."""
    fast = (f"ridge ({fast_bw.name}): {ridge(peak.rate, fast_bw.rate):.1f} FLOP/B"
            if fast_bw is not main_bw else "no smaller copy ran faster: one memory roof")
    lines = [f"compute peak: {peak_note}; copies: {bw_note}",
             f"ridge (main memory): {ridge(peak.rate, main_bw.rate):.1f} FLOP/B | {fast} | {device}",
             vs_datasheet(gpu_name, precision, peak.rate, main_bw.rate)]
    return "\n".join(filter(None, lines))


def roofs_elsewhere(gpu_name: str | None) -> str:
    """Off a GPU (`gpu_name` None), a GPU's roofs measured with the same cell: the reference run's, and what its
    smallest copy says (:func:`small_copy_note`), a block for :func:`course_lib.verdicts.aside`; '' on a GPU."""
    if gpu_name is not None:
        return ""
    return "\n".join(filter(None, ["A GPU's roofs, measured with this cell: "
                                    + published.elsewhere("10_compile_and_profile", ("peak:", "copy")),
                                    small_copy_note(report.reference("10_compile_and_profile")[1])]))


def small_copy_note(rows: Mapping[str, dict]) -> str:
    """Where the reference GPU's smallest copy ran slower than its largest (a cache-sized copy slower than
    main memory's): how short that copy is, that the cause is not measured, and which roof ops get there."""
    copies = sorted(((float(re.match(r"copy ([\d.]+) (MiB|GiB)", k)[1]) * (1024 if "GiB" in k else 1), k, r)
                     for k, r in rows.items() if re.match(r"copy [\d.]+ (MiB|GiB)$", k) and r.get("unit") == "TB/s"))
    if len(copies) < 2 or copies[0][2]["value"] >= copies[-1][2]["value"]:
        return ""
    (mib, small, row), (_, large, big) = copies[0], copies[-1]
    took = 2 * mib * 2**20 / (row["value"] * 1e12)  # it reads and writes each byte
    return (f"  on that GPU the smallest copy ran slower than the largest ({small}: {row['value']:.2f} TB/s, {large}: "
            f"{big['value']:.2f} TB/s): it lasts about {took * 1e6:.0f} µs, short enough for a kernel's start and end to "
            "weigh in its time (not measured apart)" + (
                ". An op's memory roof is the fastest copy at least its size; there the largest copy is the fastest, so "
                "every op's memory roof is main memory's" if big["value"] >= max(c[2]["value"] for c in copies) else ""))


def reference_ridge(intensities: Mapping[str, float]) -> str:
    """Off a GPU: the reference GPU's ridge from its recorded roofs (its matmul peak over its largest copy)
    and which side of it each op of `intensities` (name: FLOP/B) falls, one a line; '' without those rows."""
    device, rows = report.reference("10_compile_and_profile")
    name, peak = next(((k, r) for k, r in rows.items() if k.startswith("peak: matmul") and r.get("unit") == "TFLOP/s"),
                      ("", None))
    copies = [(float(m[1]) * (1024 if m[2] == "GiB" else 1), r) for k, r in rows.items()
              if (m := re.match(r"copy ([\d.]+) (MiB|GiB)$", k)) and r.get("unit") == "TB/s"]
    if peak is None or not copies:
        return ""
    mib, main = max(copies, key=lambda c: c[0])
    ridge_ = ridge(peak["value"] * 1e12, main["value"] * 1e12)
    sides = "".join(f"\n  {name}: {'memory' if i < ridge_ else 'compute'}-bound" for name, i in intensities.items())
    size = f"{mib / 1024:g} GiB" if mib >= 1024 else f"{mib:g} MiB"
    return (f"on the reference {device}, by its recorded roofs ({name.removeprefix('peak: ')}: {peak['value']:.1f} TFLOP/s; "
            f"a copy of {size}: {main['value']:.2f} TB/s): ridge {ridge_:.0f} FLOP/B; by the roofline model, not measured "
            f"there, one op a line:{sides}")


def at_least(v: float) -> str:
    """A lower bound on a share, rounded down to one decimal (2.79 %: '2.7%'), never above what was measured."""
    return f"{math.floor(round(1000 * max(0.0, v), 6)) / 10:.1f}%"  # round(): 1 - 0.92 is 0.07999… in floats


def bounded(ops_share: float) -> bool:
    """Whether the profiled ops' share of the unprofiled step (`ops_share`) leaves a lower bound on the time
    outside any op: under 1 by 0.1 % or more. The profiler's cost inside its records can push the share past 1;
    then 'at least 0.0%' would read as a finding, and the run says it cannot bound that time instead."""
    return at_least(1 - ops_share) != at_least(0.0)


def unbounded(ops_share: float) -> str:
    """Why the time outside any op has no lower bound here (:func:`bounded` false; `ops_share`: the profiled ops over
    the unprofiled step's fast quartile, the bound's base)."""
    return (f"the profiled ops add up to {ops_share:.0%} of the unprofiled step's fast quartile (part of the profiler's and the "
            "counting's cost is expected inside the ops' records: not measured apart), so this run cannot bound from "
            "below the time outside any op")


def roof_share(v: float) -> str:
    """A share of a roof, as every line of this section prints it: below 20 %, one decimal, rounded down (9.96 %:
    9.9 %, under a decade's line); above, whole percent."""
    return f"{int(1000 * v) / 10:.1f}%" if v < 0.2 else f"{v:.0%}"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


ROWS = 14  # the op table's rows: the costliest (op, shapes) groups, which section 4's short lines read


def op_table(measured: StepOps, ridge_of: RidgeOf, of_roof: OfRoof, device: str,
             eager: Mapping[str, Timing | None] | None = None, rows: int = ROWS,
             probes: Mapping[str, Timing | None] | None = None) -> str:
    """The `rows` costliest (op, shapes) groups of a step: calls, intensity, time and share of op
    time, achieved rate and share of its roof, side of its ridge; under them the groups' count and
    the whole step's time with and without the profiler; and, given the earlier sets of turns' `eager` timings
    of the same step (where: Timing), every reading beside this one (:func:`eager_readings`), with the pace probe's
    in the same sets (`probes`, by the same names; this one's in `measured`) where the readings moved."""
    op_time = measured.op_seconds
    lines = [f"{'op':<48} {'kind':<17} {'calls':>5} {'FLOP/B':>7} {'time':>9} {'least–most':>13} {'share':>6} {'FLOP/s':>13} "
             f"{'% roof':>7}  side of its ridge"]
    for o in measured.ops[:rows]:
        lo, hi = o.spread
        lines.append(f"{_cut(o.label, 48):<48} {o.kind:<17} {o.calls:>5} {o.intensity:>7.2f} {1e3 * o.seconds:>7.2f}ms "
                     f"{f'{1e3 * lo:.2f}–{1e3 * hi:.2f}':>13} {o.seconds / op_time:>6.1%} {fmt_rate(o.rate, 'FLOP/s'):>13} "
                     + (f"{roof_share(of_roof(o)):>7}  {'below' if o.intensity < ridge_of(o) else 'above'} its ridge" if o.flops
                        else f"{'-':>7}  moves data"))
    n, steps = len(measured.ops), len(measured.step.samples)
    lines.append(f"... {n} (op, shapes) group{'s' if n != 1 else ''}: {fmt_time(op_time)} per step in ops\n"
                 f"(time: the median of {steps} steps, ms; least–most: its fastest and slowest step; % roof: its rate "
                 "over its roof, below 20 % to one decimal rounded down, above it in whole percent; the compute roof is "
                 "the stored peak)\nthe whole step, in the same turns: "
                 f"{fmt_time(measured.step.median_s)} {measured.step.spread_text} without the profiler, "
                 f"{fmt_time(measured.profiled.median_s)} {measured.profiled.spread_text} with every op counted and "
                 f"recorded | {device}")
    cost = speedup(measured.profiled, measured.step, "without the profiler vs with it, same turns")
    if cost.clear and cost.value < 1:  # the profiled step faster: not the profiler's doing
        lines.append(f"  {cost}: the profiled step ran faster, which the profiler's cost cannot do; what did is "
                     "not measured")
    elif not cost.single:  # what counting and recording every op cost the step, in the same turns
        lines.append(f"  {cost.verdict('the step without the profiler vs with every op counted and recorded')}")
    if eager:
        lines.append(step_readings(measured, eager, probes))
    return "\n".join(lines)


def step_readings(measured: StepOps, eager: Mapping[str, Timing | None],
                  probes: Mapping[str, Timing | None] | None = None) -> str:
    """The plain eager step's reading in these turns beside the earlier sets of turns' (`eager`, where: Timing)
    (:func:`eager_readings`), with the pace probe's in the same sets (`probes`, by the same names; this one's in
    `measured`) where the readings moved."""
    readings = {**eager, "here": measured.step}
    clause = probe_clause(readings, {**(probes or {}), "here": measured.probe})
    tokens = next((t.work for t in readings.values() if t is not None and t.work), None)  # the same step in every set
    faults = faults_words({w: (t.median_s, 1e3 * t.faults / tokens if t.faults is not None and tokens else None)
                           for w, t in readings.items() if t is not None}, per="1,000 tokens",
                         of="the plain eager step's ")  # as beside 08, which counts 08's step's
    return eager_readings(readings) + "".join(f"\n  {c}" for c in (clause, faults) if c)


def op_notes(measured: StepOps, ridge_of: RidgeOf, of_roof: OfRoof, peak_name: str, device_type: str,
             section1: Mapping[str, float] | None = None) -> str:
    """How to read the op times: how they were timed and what share of the step they fill, like with like
    (off a GPU the profiler's record of each op, over the profiled step and over the step without it; on a GPU the
    kernels' time, over the step without the profiler), off a GPU beside section 1's op time (`section1`: seconds
    per category), which adds up another quantity; and, on each side of the ridge, the groups that ran above their
    roof."""
    op_time, step, profiled = measured.op_seconds, measured.step.median_s, measured.profiled.median_s
    fast = measured.step.lo_s  # the unprofiled step's fast quartile: a lower bound on time outside ops rests on it
    if device_type == "cuda":
        lines = [f"op times: the GPU kernels and copies each op launched; their sum is {op_time / step:.0%} of the "
                 "whole step without the profiler, the rest the GPU idle, waiting for the CPU to queue work. "
                 "The shares below are of op time"]
    else:  # the profiler's records carry its own cost: set them against the step that paid it
        lines = ["op times: the profiler's record of each op (the ops it calls included); the shares below are of op time",
                 f"  with every op counted and recorded: ops {op_time / profiled:.0%} of the step, "
                 f"{fmt_time(profiled - op_time)} a step outside any op (Python, autograd's bookkeeping, the profiler's and the "
                 "counting's own)",
                 f"  without the profiler, in the same turns: the profiled op time is {op_time / step:.0%} of the unprofiled "
                 + (f"step ({fmt_time(op_time)} of ops under the profiler, a {fmt_time(step)} step without it, "
                    f"{fmt_time(fast)} at its fast quartile): if these records hold every op, at least "
                    f"{at_least(1 - op_time / fast)} of the step runs outside any op, against the fast quartile so that a "
                    "slow spell does not make the bound (more, since the profiler's cost inside the records makes the ops "
                    "read long)" if bounded(op_time / fast) else f"step: {unbounded(op_time / fast)}")]
        if section1:  # section 1's trace sums another quantity: said once, so that the two totals do not seem to clash
            ops1 = sum(v for k, v in section1.items() if k != "framework")
            lines.append(f"  section 1's trace read {fmt_time(ops1)} of ops a step, this table {fmt_time(op_time)}: section 1 "
                         "adds up each op's own time within a step under the profiler alone, this table each op group's "
                         f"median over {len(measured.step.samples)} steps under the profiler and the FLOP counting, at "
                         "another moment: two quantities, not set beside each other as a ratio")
    over = [o for o in measured.ops if o.flops and of_roof(o) > 1]
    for side, group in (("below", [o for o in over if o.intensity < ridge_of(o)]),
                        ("above", [o for o in over if o.intensity >= ridge_of(o)])):
        if group:  # the roofs are measured rates, not bounds
            top = max(group, key=of_roof)
            why = ("the count assumes every operand is read whole, at the speed of a copy as large; candidates, not "
                   "measured apart: some operands not read whole, data from a faster memory level, or a copy timed at "
                   "a slower moment"
                   if side == "below" else
                   f"the compute roof is the median rate of {peak_name.split(': ')[-1]} timed as whole calls at "
                   f"another moment, the ops are the profiler's record of each: a measured rate, not a bound")
            many = len(group) != 1
            lines.append(f"{len(group)} group{'s' if many else ''} {side} {'their' if many else 'its'} ridge ran above "
                         f"{'their' if many else 'its'} roof (up to {of_roof(top):.0%}, {top.label}): {why}")
    pointwise = sorted((o for o in measured.ops if o.kind == "element-wise" and o.flops and o.intensity < ridge_of(o)),
                       key=lambda o: -o.seconds)[:2]  # counted at one FLOP per element: how far that count matters
    if pointwise:
        lines.append("element-wise ops are counted at one FLOP per element, a lower bound (GPT-2's GELU takes about eight multiplies and adds and a tanh an element). While they "
                     "stay left of the ridge, their share of the roof is their share of the memory bandwidth. Counted at " + " or ".join(
                         f"{math.ceil(ridge_of(o) / o.intensity)} ({o.short})" for o in pointwise)
                     + " FLOPs per element or more, they would move to the compute side of the ridge. There the roof "
                     "is the matmul's peak, which element-wise code is not expected to reach (not measured). So which side they are on is "
                     "uncertain from the counts alone: the cell after the op table times GELU against a copy of its bytes")
    return "\n".join(lines)


def gelu_side(r: Ratio, gelu: Timing, copy: Timing, device: str, in_step: OpTime | None = None,
              compiled: Ratio | None = None, main_s: float | None = None) -> str:
    """GELU alone against a copy of the same tensor (`copy`: as many bytes read and written, no arithmetic), timed
    in turns (`r`: GELU's time over the copy's): the share of GELU's time its bytes explain, and what fusing it
    could save (its memory round trip); beside it the op table's GELU (`in_step`, per call), which ran under the
    profiler among the step's ops. Where timed in the same rounds, GELU compiled alone against eager (`compiled`:
    its speed-up) says whether generated code computes it faster. `main_s`: GELU's bytes moved at main memory's copy
    rate, seconds (the copy timed here may have run from a cache, which a step's GELU need not find its input in)."""
    said = [r.verdict("GELU's time ÷ a copy's time, the same bytes", on=device)]
    if compiled is not None:
        said.append(compiled.verdict("GELU compiled alone (Inductor's kernel) instead of eager", on=device))
    share, digits = _pct_range(1 / r.hi, 1 / r.lo)
    part = f"{1 / r.value:.{digits}%}"  # the median share, with its range's digits
    if not r.clear:
        said.append("  GELU and a copy of its bytes are not told apart here: nothing measured says which side it is on")
    elif r.value < 1:
        said.append("  the copy took longer than GELU itself: memory sets GELU's time here, and fusing it away would "
                    "save most of it")
    elif r.lo >= 2:
        said.append(f"  GELU took {r.value:.1f}× a copy's time: moving its bytes accounts for about {part} of it ({share}), "
                    "so memory traffic does not set its time (what does is not measured apart)\n"
                    "  fusing GELU into a neighbour removes its memory round trip, about a copy's time "
                    f"({fmt_time(copy.median_s)} of its {fmt_time(gelu.median_s)}; reasoning, not measured)\n  "
                    + _computed(compiled))
        if main_s is not None and main_s > copy.median_s * 1.1:  # the copy ran faster than main memory moves them
            said.append(f"  the copy may have found its bytes in a cache: at main memory's copy rate they take "
                        f"{fmt_time(main_s)}, {main_s / gelu.median_s:.0%} of GELU's time"
                        + (", still under half" if main_s < gelu.median_s / 2 else
                           ": from main memory, its bytes could set much of its time"))
    else:
        said.append(f"  GELU took {r.value:.2f}× a copy's time: moving its bytes accounts for about {part} of it "
                    f"({share}), the rest its arithmetic or its kernel (not measured apart)")
    if in_step is not None and in_step.calls:
        per_call = in_step.seconds / in_step.calls
        ratio = per_call / gelu.median_s
        said.append(f"  in the op table, the step's GELU took {fmt_time(per_call)} a call, under the profiler and the FLOP "
                    "counting, among the step's other ops and at another moment: " + (
                        f"{ratio:.2f}× its time alone here, within 10 % of it" if 1 / 1.1 <= ratio <= 1.1 else
                        f"{ratio:.1f}× its time alone here; what makes up the difference is not measured apart"))
    return "\n".join(said)


def _computed(compiled: Ratio | None) -> str:
    """Whether generated code computes GELU faster, from GELU compiled alone against eager (`compiled`, its
    speed-up in the same rounds; None where not timed)."""
    if compiled is None:
        return "whether fused code also computes GELU faster is not measured here"
    if compiled.clear and compiled.value > 1:
        return (f"compiled alone, with nothing to fuse it with, GELU ran {compiled.brief}: generated code computes it "
                "faster, by that much")
    if compiled.clear:
        return f"compiled alone, GELU ran {compiled.brief}: generated code does not compute it faster here"
    if compiled.too_wide:
        return f"compiled alone, GELU read {compiled.brief}: whether the compiled call is faster, these rounds cannot tell"
    if compiled.grade == "inconclusive":
        return f"compiled alone, GELU read {compiled.brief}: the turns' drift leaves it open whether the compiled call is faster"
    return f"compiled alone, GELU read {compiled.brief}: the compiled call was no faster"


def _pct_range(lo: float, hi: float) -> tuple[str, int]:
    """('11%–12%', 0), one decimal under 10 % ('2.6%–2.7%', 1), or up to two decimals where the two ends would print
    alike ('11.1%–11.4%', 1): the range and its decimals, for the value printed beside it; ('its range as narrow', 2)
    where even two print alike."""
    first = 1 if hi < 0.1 else 0  # two significant digits at least: 2.6%, not 3%
    digits = next((d for d in range(first, 3) if f"{lo:.{d}%}" != f"{hi:.{d}%}"), None)
    if digits is None:
        return "its range as narrow", 2
    return f"{lo:.{digits}%}–{hi:.{digits}%}", digits


def cache_roof_note(ops: Sequence[OpTime], roof_of: Callable[[OpTime], Timing], main: Timing, op_time: float) -> str:
    """Where 1 % of op time or more is held to a cache's roof, twice main memory's (`main`) or more: that which
    level holds each op's data is not measured, and how much closer to its roof an op left of its ridge would read
    against main memory's; '' otherwise."""
    held = [o for o in ops if o.bytes and roof_of(o).rate >= 2 * main.rate]
    cached = sum(o.seconds for o in held)
    if cached < 0.01 * op_time:
        return ""
    most = max(roof_of(o).rate for o in held) / main.rate
    return (f"{len(held)} group{'s' if len(held) != 1 else ''} ({cached / op_time:.0%} of op time) held to a cache's roof, "
            f"up to {most:.1f}× main memory's ({fmt_rate(main.rate, 'B/s')}): which memory level holds each op's data "
            f"is not measured; held to main memory's roof instead, an op left of its ridge would read up to {most:.1f}× "
            "closer to its roof")


def above_roof(rate: float, roof: float, peak: Timing) -> str:
    """Where an op timed by hand ran above its roof (`rate` over `roof`, FLOP/s): why a roof drawn from
    measured rates can be passed; '' at or below it."""
    if rate <= roof:
        return ""
    return (f"above its roof ({rate / roof:.2f}×): both roofs are rates measured at another moment ({peak.name.split(': ')[-1]}"
            "; a copy), not bounds, so another shape, or the same one at another moment, can pass them")


def no_roofline(roofs: bool) -> str:
    """Why this run draws no roofline: the peaks, or the step's ops, ran out of memory."""
    return (f"No roofline in this run: {'the peaks' if not roofs else 'the ops of the step'} could not be measured "
            "(out of memory, said above).")


def kind_table(kinds: Mapping[str, Mapping[str, float]], op_time: float, ridge_: float, device: str = "",
               profiled: Mapping[str, float] | None = None) -> str:
    """Op time by kind (`kinds`: kind -> its seconds, FLOPs and bytes per step) on `device`: share of op
    time, intensity, achieved rate and side of the ridge `ridge_` (main memory's); with `profiled` (seconds by
    kind in section 1's profile, :func:`course_lib.roofline.profiled_kinds`), that profile's share beside it."""
    whole = sum(profiled.values()) if profiled else 0.0
    lines = [f"{'kind':<18} {'share of op time':>16}" + (f" {'section 1':>11}" if whole else "")
             + f" {'FLOP/B':>8} {'achieved':>14}  vs main memory's ridge, {ridge_:.1f} FLOP/B" + (f" | {device}" if device else "")]
    for kind, k in kinds.items():
        i = intensity(k["flops"], k["bytes"])
        rate = fmt_rate(k["flops"] / k["seconds"], "FLOP/s") if k["seconds"] else "-"
        where = "moves data only" if not k["flops"] else ("below the ridge" if i < ridge_ else "above the ridge")
        beside = f" {(profiled or {}).get(kind, 0.0) / whole:>11.1%}" if whole else ""
        lines.append(f"{kind:<18} {k['seconds'] / op_time:>16.1%}{beside} {i:>8.2f} {rate:>14}  {where}")
    for kind in [k for k in (profiled or {}) if k not in kinds and whole]:  # a kind only a profile shows
        lines.append(f"{kind:<18} {'-':>16} {profiled[kind] / whole:>11.1%} {'-':>8} {'-':>14}  " + (
            "a profile's own time of composite ops (aten::linear, which calls addmm) and views: dispatch, no "
            "arithmetic; this section counts each op with what it calls" if kind == "dispatch & views" else "").rstrip())
    if whole:
        lines.append("share of op time: this section's op timings (each op with what it calls, its FLOPs counted); "
                     "section 1: the profile (each op's own time). The two group and slow ops differently, so their "
                     "shares can differ")
    lines.append("(a kind mixes ops of every size, so each is set against main memory's ridge; the op table above "
                 "holds each op against the ridge of its own memory level)")
    if "copy" in kinds:  # another count than section 1's category of the same name
        lines.append("copy: ops the step calls that only move data (the embeddings' gathers among them); section 1's "
                     "'copies' counts another way: each copy op's own time, inside other ops too.")
    return "\n".join(lines)


def fusible_share(kinds: Mapping[str, Mapping[str, float]], outside: float) -> float:
    """The model's fusible ops' share of the op time (the loss's and optimizer's, `outside` s, left out)."""
    op_time = sum(k["seconds"] for k in kinds.values())
    return (sum(k["seconds"] for kind, k in kinds.items() if kind in FUSIBLE) - outside) / op_time


def gelu_compute_set(r: Ratio | None) -> bool:
    """Whether the GELU-vs-copy timing (`r`: GELU's time over a copy's of its bytes, None where not timed) shows
    GELU's time mostly not its bytes': twice a copy's or more, beyond the spread."""
    return r is not None and r.clear and r.lo >= 2


def gelu_placed(r: Ratio | None, share: float | None = None) -> str:
    """Under the verdict by share: where GELU's forward (`share` of op time) was left out of both rows, why: its timing
    against a copy of its bytes (`r`) says its bytes do not set its time; '' where it was not measured so."""
    if not gelu_compute_set(r):
        return ""
    return ("  GELU's forward" + (f", {share:.0%} of op time," if share is not None else "") + " stands in neither row: "
            f"its time is {r.value:.1f}× a copy's of its bytes (the cell above), so memory traffic does not set it, and no "
            "measured roof does (its arithmetic or its kernel: not measured apart); GELU's backward, not timed so, stays "
            "where its count puts it")


def roof_short(ops: Sequence[OpTime], kinds: Mapping[str, Mapping[str, float]], of_roof: OfRoof,
               outside: float) -> list[str]:
    """Section 4's findings, one a line: each library-call kind (matmul, attention) with 5 % of op time or more, its
    share and how close its ops in the op table (`ops`, the slowest first: its :data:`ROWS` costliest) come to their
    roof; then the model's fusible ops' share (the loss's and optimizer's, `outside` s, left out) and the most their
    vanishing would give (Amdahl)."""
    op_time = sum(k["seconds"] for k in kinds.values())
    lines = []
    for kind, k in kinds.items():  # the costliest first
        own = [o for o in ops if o.kind == kind and o.flops and o.bytes and o.seconds]
        if kind in FUSIBLE or not own or k["seconds"] < 0.05 * op_time:
            continue
        shown = [o for o in own if o in ops[:ROWS]]
        which = "its op groups in the op table" if shown else "its costliest op group"
        shown = shown or own[:1]
        lo, hi = min(map(of_roof, shown)), max(map(of_roof, shown))
        span = roof_share(lo) if roof_share(lo) == roof_share(hi) else f"{roof_share(lo)}–{roof_share(hi)}"
        where = (": a decade or more below it" if hi < 0.1 else ": half of it or more" if lo >= 0.5 else "")
        lines.append(f"{kind}: {k['seconds'] / op_time:.0%} of op time; {which} at {span} of their "
                     f"roof{where}")
    fusible = fusible_share(kinds, outside)
    left = f"; the loss's and optimizer's, {outside / op_time:.1%} more, left out" if outside else ""
    lines.append(f"the model's fusible ops (element-wise, reduction, copy{left}): {fusible:.1%} of op time; were their "
                 f"time gone, the ops would run at most {1 / (1 - fusible):.2f}× faster")
    return lines


def roof_verdict(shares: Mapping[tuple[bool, bool], float], slowest: OpTime, slowest_of_roof: float,
                 device_type: str = "cuda") -> str:
    """The verdict by share of op time: `shares` maps (near its roof, on the memory side) to the
    share of op time in such ops; then how close the costliest op with FLOPs (`slowest`, at
    `slowest_of_roof` of its roof) comes to it. Off a GPU an op has no launch to name."""
    others = "the launch, the size, the kernel itself" if device_type == "cuda" else "the size, the kernel itself"
    far = ("far below it, held back by something other than the two peaks (candidates, not measured apart: the kernel "
           "itself, its size, its overheads)")
    return (f"verdict, by share of op time (copies included; each share rounded):\n"
            f"  {'':<14} {'at half its roof or more':>25} {'below half its roof':>20}\n"
            f"  {'memory side':<14} {shares[True, True]:>25.0%} {shares[False, True]:>20.0%}\n"
            f"  {'compute side':<14} {shares[True, False]:>25.0%} {shares[False, False]:>20.0%}\n"
            + ("  near the roof on the memory side, only moving fewer bytes (fusing ops) lifts an op; "
               if shares[True, True] >= 0.005 else "  ")
            + f"below half its roof, neither measured roof explains an op's time (candidates, not measured apart: "
            f"{others}, or a roof not measured here)\n"
            f"the costliest op, {slowest.label}, runs at {roof_share(slowest_of_roof)} of what the roofline allows at its "
            f"intensity: {'close to the roof' if slowest_of_roof >= 0.5 else far}")


def attention_alone(ran08: Mapping[str, dict] | None, dtype: torch.dtype) -> str:
    """Where attention is the costliest op and far below its roof: what notebook 08 (`ran08`, its
    rows in this run, None where it did not run) measured of attention alone in `dtype`."""
    key = f"attention alone, {dtype}: SDPA vs written out"  # the ratio row; 08 records each version's time too
    row = (ran08 or {}).get(key)
    if row and row.get("unit", "×") == "×":
        r = report.recorded_ratio(key, row)
        times = [(ran08 or {}).get(f"attention alone: {v}, {dtype}") for v in ("SDPA", "written out")]
        each = (f" (SDPA {times[0]['value']:.3g} ms, written out {times[1]['value']:.3g} ms a call, forward + backward)"
                if all(times) else "")
        return (f"notebook 08, in this run: {key} = {r.numbers}{each}"
                + (f": switching to the written-out attention gained {1 / r.value:.2f}× ({1 / r.hi:.2f}–{1 / r.lo:.2f}×) on "
                   "attention alone, "
                   "so this kernel is one candidate here (08's timing, at another moment); the rest of the gap to the "
                   "roof is not measured apart"
                   if r.hi < 1 else ""))
    if ran08 is not None:
        return ("notebook 08 ran in this run without timing attention alone in this precision (it does where "
                "its step found SDPA slower with a clear verdict, beyond the spread and the machine's drift): this run "
                "does not say whether the kernel itself is the slow part here")
    return ("notebook 08 (section 4) times attention alone in this precision, SDPA against the written-out "
            "version: run it in this profile to see whether the kernel itself is the slow part here")


def attention_per_layer(profiled_s: float, timed_s: float, layers: int, ran08: Mapping[str, dict] | None,
                        dtype: torch.dtype) -> str:
    """Attention's forward + backward per layer in a step, three ways: section 1's profile (`profiled_s`, seconds a
    step), section 4's op timings (`timed_s`) and, where it ran in this run, notebook 08's timing of attention alone
    (SDPA, a call, `dtype`): which of the step's two readings agrees with the kernel timed alone."""
    alone = (ran08 or {}).get(f"attention alone: SDPA, {dtype}")
    said = (f"attention (SDPA), forward + backward, per layer a step: {profiled_s / layers * 1e3:.3g} ms in section 1's "
            f"profile, {timed_s / layers * 1e3:.3g} ms in section 4's op timings ({timed_s / profiled_s:.2f}× it)")
    if alone:
        said += (f"; notebook 08 timed the same call alone at {alone['value']:.3g} ms ({dtype}, forward + backward, "
                 "another moment)")
    return said


def _pct(v: float) -> str:
    """A share as :func:`roof_share` prints it; 'under 0.1%' below that."""
    return roof_share(v) if v >= 0.001 else "under 0.1%"


def _listed(group: Sequence[OpTime], op_time: float, of_roof: OfRoof) -> list[str]:
    """The ops of a group (the slowest first) with 0.5 % of op time or more, one a line; the rest on one line,
    counted, by name (each name a learner has not met glossed)."""
    shown = [o for o in group if o.seconds >= 0.005 * op_time]
    rest = group[len(shown):]

    def named(o: OpTime) -> str:  # shapes where names repeat
        return o.short if sum(p.short == o.short for p in shown) == 1 else o.label

    lines = [f"{named(o)} at {_pct(of_roof(o))} of its roof ({o.seconds / op_time:.1%} of op time)" for o in shown]
    if rest:
        lines.append(f"{len(rest)} op{'s' if len(rest) != 1 else ''} under 0.5% of op time each, "
                     f"{sum(o.seconds for o in rest) / op_time:.1%} together: {_counted(o.short for o in rest)}"
                     f"{_glossed(o.short for o in rest)}")
    return lines


GLOSS = {"foreach_add": "foreach_add: one call that adds to a whole list of tensors; fused AdamW adds 1 to every "
                        "parameter's step count with it"}  # short op names a learner has not met in the course before


def _glossed(names: Iterable[str]) -> str:
    """' (foreach_add: …)': what each name in :data:`GLOSS` among `names` is ('' where none is)."""
    return "".join(f" ({GLOSS[n]})" for n in dict.fromkeys(names) if n in GLOSS)


def _counted(names: Iterable[str]) -> str:
    """'sum, add ×2, ones_like': each short name once, in order, with how many ops (by full name and input
    shapes: add and add_, or one at two shapes) share it, so that the names count as many ops as the line does."""
    return ", ".join(n if c == 1 else f"{n} ×{c}" for n, c in Counter(names).items())


def placement(ops: Sequence[OpTime], op_time: float, of_roof: OfRoof, gelu_apart: bool = False) -> str:
    """What the roofline figure leaves out or hides: the ops a decade or more below their roofline
    (`of_roof`: each op's memory level's), those above it, and the op time of those it cannot place. `gelu_apart`:
    GELU's forward was timed against a copy of its bytes and set by neither roof (:func:`gelu_placed`), said there."""
    placed = [o for o in ops if o.flops and o.bytes and o.seconds]  # the slowest first
    far = [o for o in placed if of_roof(o) < 0.1]  # a decade or more below its roof
    above = [o for o in placed if of_roof(o) > 1]
    unplaced: dict[str, float] = {}
    for o in ops:
        if not (o.flops and o.bytes and o.seconds):
            unplaced[o.kind] = unplaced.get(o.kind, 0.0) + o.seconds
    lines = []
    for head, group, note in (("10× or more below their roofline", far,
                               "each against the memory roof of a copy its size, assumed to find its data in the "
                               "cache that copy ran from"), ("above it", above, "")):
        listed = _listed(group, op_time, of_roof)
        lines += [f"{head}: none"] if not listed else [f"{head}{f' ({note})' if note else ''}:",
                                                        *(f"  {ln}" for ln in listed)]
        if group is far and any(o.kind == "element-wise" for o in far):
            lines.append("  the element-wise ones are counted at one FLOP per element, a lower bound (the note under the "
                         "op table)" + ("; gelu's forward, timed against a copy of its bytes, is set by neither roof (the "
                                        "verdict above)" if gelu_apart and any(o.short == "gelu" for o in far) else ""))
    if unplaced:
        lines.append("not placed (no FLOPs to place, or no time): " + ", ".join(
            f"{kind} ops, {s / op_time:.1%} of op time" for kind, s in sorted(unplaced.items(), key=lambda kv: -kv[1])))
    return "\n".join(lines)
