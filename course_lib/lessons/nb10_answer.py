"""Notebook 10's answer to its question, from the run's numbers: a few short lines (where the time went, what
this run names as possibly avoidable, each taught fix's verdict, what paid), then the details behind each.
Re-exported by :mod:`course_lib.lessons.nb10`."""

from __future__ import annotations

import dataclasses
from typing import Iterable, Mapping, Sequence

from course_lib import datasheet, profiles, report
from course_lib.bench import Ratio
from course_lib.lessons.nb08_compile import NOT_ESTABLISHED, control_explains, unconfirmed as wants_confirming  # 08's rules, one home
from course_lib.lessons.nb10_beside08 import _and, printed_inverse
from course_lib.lessons.nb10_reference import reference_answer
from course_lib.lessons.nb10_roofline import (FUSIBLE, at_least, bounded, fusible_share, gelu_compute_set, roof_share,
                                              unbounded)
from course_lib.lessons.nb10_short import (break_control, break_cost_only, break_unbacked, compile_in_08, control_in_08,
                                           is_gain, other_sets, points, unconfirmed)
from course_lib.roofline import OpTime
from course_lib.units import fmt_count
from course_lib.verdicts import CONFIRM

COMPILING = "compiling (default mode)"  # the answer's name for section 3's compile, in `fixes`
FIX = "a tensor instead of .item()"  # the answer's name for section 3b's graph-break fix, in `fixes`
OUTSIDE = ("adam", "_foreach", "log_softmax", "nll_loss")  # the optimizer's and the loss's ops: torch.compile(model) leaves them


def outside_model(ops: Iterable[OpTime]) -> float:
    """The seconds a step spends in fusible ops that compiling the model does not reach: the loss's and the
    optimizer's (by op name, :data:`OUTSIDE`), which the training step runs outside the model."""
    return sum(o.seconds for o in ops if o.kind in FUSIBLE and any(k in o.name.lower() for k in OUTSIDE))


def answer(step: Mapping[str, float], device_type: str, fixes: Mapping[str, Ratio | None],
           kinds: Mapping[str, Mapping[str, float]] | None, slowest: str, slowest_of_roof: float | None,
           ran08: Mapping[str, dict] | None = None, attention: Ratio | None = None,
           ops_unprofiled: float | None = None, outside: float = 0.0,
           again: Ratio | None = None, device: str = "", item_cost: Ratio | None = None,
           gelu: tuple | None = None, small: tuple[Ratio, ...] | None = None,
           pays_back: Mapping[str, float | None] | None = None, profiled: Mapping[str, float] | None = None,
           eager_ms: Sequence[float] = ()) -> str:
    """The notebook's question answered from this run's numbers, a few short lines first: where the op time
    went (`kinds`, as section 4 sums them; the costliest op with FLOPs, `slowest`, at `slowest_of_roof` of its
    roof), which timed change paid (`fixes`: a name -> its ratio, None where not timed; `attention`, the
    written-out attention in section 3's turns), each fix's verdict and, off a GPU, the reference GPU's; then
    the details: the profiled step's split (`step`: seconds per category), on a CPU compiling's room
    (:func:`_room`), notebook 08's readings of the same changes (`ran08`), and why a fix did not show. `again`:
    the compile's gain timed once more, in section 3b's turns, quoted beside section 3's wherever that is;
    `item_cost`: the .item() GPT's speed over the plain compiled GPT's, the graph-break fix's control; `gelu`: GELU's
    time over a copy of its bytes' (section 4's pair), GELU's share of the op time and, where timed, GELU compiled
    alone against eager; `small`: the graph-break fix
    and its control timed again in a small step (section 3b's one short sequence), and there the fixed GPT against
    the plain one, where timed (a third ratio); `pays_back`: the steps after which the cold compile pays for itself,
    by the set of turns ('section 3's', 'section 3b's') whose gain it rests on; `profiled`: seconds by kind in
    section 1's profile (each op's own time), whose shares stand beside section 4's; `eager_ms`: the plain eager
    step's medians in this notebook's sets of turns, whose span is said under the fixes where it reaches 1.1×."""
    total = sum(step.values())
    share = {cat: s / total for cat, s in step.items()}
    ops = share.get("compute", 0.0) + share.get("copies", 0.0)
    unbacked = (fix := fixes.get(FIX)) is not None and break_unbacked(fix, item_cost)
    cost_only = fix is not None and break_cost_only(fix, item_cost)
    in_08 = [r for r in [compile_in_08(ran08)] if r is not None]  # 08's compile of the same GPT, its own turns
    slowed = control_in_08(ran08) if in_08 else None  # 08's eager control moved after its compile: its own caveat
    sets = [(w, r) for w, r in (("section 3's", fixes.get(COMPILING)), ("section 3b's", again),
                                *(("notebook 08's", r) for r in in_08)) if r is not None]  # compiling, each set of turns
    refuted = {"notebook 08's"} if slowed and control_explains(*slowed) else set()  # 08 calls it not established
    gained = [(w, r) for w, r in sets if is_gain(r) and w not in refuted] if fixes.get(COMPILING) is not None else []
    flat = [w for w, r in sets if r.grade == "no difference"]  # where compiling read no difference, beside its gains
    fits = bool(sets) and 1 < max(r.lo for _, r in sets) <= min(r.hi for _, r in sets)  # one gain fits every set
    replicated = len(gained) >= 2 and fits  # resolved in two sets of turns or more, and no set rules that gain out
    unsettled = again is not None and bool(gained) and bool(flat) and not replicated  # a gain some set did not see
    alone = len(gained) == 1 < len(sets) and wants_confirming(gained[0][1])  # one set's gain, its interval below 1.1x
    compiled = ({(COMPILING if gained[0][0] == sets[0][0] else f"{COMPILING[:-1]}, {gained[0][0]} turns)"): gained[0][1]}
                if gained and (replicated or not flat) and not alone else {})  # counted where no set contradicts it,
    # and a gain under 10 % only where a second set of turns confirms it (08's 'On your own GPU' asks the same)
    restored = _listed({n: r for n, r in ({"the full batch": fixes.get(FIX)} if not unbacked else {}).items()
                        if r is not None and is_gain(r)}
                       | ({SMALL: small[0]} if small and is_gain(small[0]) and not break_unbacked(*small[:2]) else {}))
    paid = _listed({n: r for n, r in (dict(fixes) | {"the written-out attention": attention}).items()
                    if r is not None and is_gain(r) and n not in (COMPILING, FIX)} | compiled)
    kernel = (ran08 or {}).get("SDPA vs written-out attention, eager")  # 08's step: the attention's gain again
    if kernel and kernel.get("spread") and attention is not None and is_gain(attention):
        again08 = _recorded(kernel, inverse=True)  # written out over SDPA, as section 3's ratio reads
        paid = paid.replace(f"the written-out attention at {attention.value:.{attention.decimals}f}×",
                            f"the written-out attention at {attention.value:.{attention.decimals}f}× (notebook 08's "
                            "turns: " + (f"{again08.value:.2f}×" if is_gain(again08) else again08.brief) + ")", 1)
    others = other_sets(fixes.get(COMPILING), again, in_08) if not unsettled else ""

    reference = [ln.removeprefix("  ") for ln in reference_answer()] if device_type != "cuda" else []
    head = [f"answer, from this run's numbers{f' ({device})' if device else ''}:"]
    if kinds:
        op_time = sum(k["seconds"] for k in kinds.values())
        whole = sum(profiled.values()) if profiled else 0.0
        larger = lambda k: max((profiled or {}).get(k, 0.0) / whole, kinds[k]["seconds"] / op_time if k in kinds else 0.0)  # noqa: E731
        shares = ([(kind, (profiled or {})[kind] / whole, kinds[kind]["seconds"] / op_time if kind in kinds else None)
                   for kind in sorted(profiled or {}, key=lambda k: -larger(k))[:3]] if whole else  # by the larger of the two
                  [(kind, k["seconds"] / op_time, None) for kind, k in list(kinds.items())[:3]])
        head.append("  where the time went: " + ", ".join(  # section 1's profile first: the lighter instrument
            f"{kind} {first:.0%}" + (f" ({then:.0%})" if then is not None else "") for kind, first, then in shares)
                    + (" of the op time (section 1's profile; in brackets section 4's op timings)" if whole
                       else " of the op time (under the profiler, section 4)"))
        also = ([f"the costliest op, {slowest}, at {roof_share(slowest_of_roof)} of its roof"]
                if slowest_of_roof is not None else []) + (
            [f"outside any op, at least {at_least(1 - ops_unprofiled)} of the step without the profiler (a lower bound, "
             "if the op records hold every op)"]
            if device_type != "cuda" and ops_unprofiled and bounded(ops_unprofiled) else [])
        if also:
            head.append("  " + "; ".join(also))
    if kinds and device_type != "cuda":
        head.append(_waste(kinds, outside, attention, gelu))
    if fixes:
        head += ["  the fixes taught here, each timed in turns:"] + [
            f"    {_fix_status(name, r, sets=sets, unsettled=unsettled or alone, unbacked=unbacked, cost_only=cost_only, slowed=slowed)}"
            + (f"; {SMALL}: {_break_words(*small[:2])}" if small and name == FIX else "")
            for name, r in fixes.items()]
    if len(eager_ms) >= 2 and max(eager_ms) / min(eager_ms) >= CONFIRM:  # the control itself moved between sets
        head.append(f"    (the plain eager step itself read {min(eager_ms):.0f}–{max(eager_ms):.0f} ms across this "
                    f"notebook's sets of turns, {max(eager_ms) / min(eager_ms):.2f}× apart: each fix is judged by its "
                    "paired ratio, in its own turns; the appendix sets the pace probe beside each reading)")
    together = (ran08 or {}).get("compiled vs eager, written-out attention")  # 08 compiled the written-out GPT
    both = (" (each against the eager SDPA step; compiling on top of the written-out attention: " + (
        f"notebook 08 timed the written-out GPT compiled against it eager, in its own turns: {_recorded(together).brief}; "
        "the two changes at once against eager SDPA: not timed)"
        if together and together.get("spread") else "not timed)")) * (bool(compiled) and "the written-out attention" in paid)
    unresolved = [w for w, r in sets if not is_gain(r) or w in refuted]  # no difference, too wide, inconclusive
    steps = {w: (pays_back or {}).get(w) for w, _ in gained} if compiled else {}  # each set's break-even, where a gain
    steps = {w: n for w, n in steps.items() if n}
    held = (f"\n    compiling, faster in {_and([w for w, _ in gained])} turns, read no measurable difference in "
            f"{_and(flat)}, so it is not counted here (details)" if gained and flat and not compiled else
            f"\n    compiling is not counted: {gained[0][1].brief} in {_and([w for w, _ in gained])} turns, its interval "
            f"reaching below {CONFIRM:g}× (such a gain counts once a second set of turns confirms it); "
            + _unresolved(sets, refuted) + " (details)" if alone else
            f"\n    compiling in {len(gained)} of {len(sets)} sets of turns ({_and([w for w, _ in gained])}; "
            + _unresolved(sets, refuted) + ")" if compiled and unresolved else "")
    held += (f"\n    its cold compile pays back after about {fmt_count(min(steps.values()))}"
             + (f"–{fmt_count(max(steps.values()))}" if len(steps) > 1 else "")
             + f" steps ({_and(list(steps))} turns)" if steps else "")
    head.append(f"  so what paid: {paid} made the step measurably faster, in turns{both}{held}" if paid else
                f"  so what paid: no change timed here made the step measurably faster{held}")
    if restored:  # the fix removes a cost the monitoring added: it gives back speed, it does not add any
        head.append(f"  removing the graph break sped the .item() GPT back up: {restored} (the break was added on "
                    "purpose; section 3b times its cost against the plain GPT)"
                    + (f"; whether the fixed GPT fully returns to the plain GPT's speed is not settled: at {SMALL} "
                       f"they read {small[2].brief}" if SMALL in restored and len(small) > 2
                       and small[2].grade != "no difference" else ""))
    first = []  # under details, first: what the short lines above left out of each verdict
    if others:  # the compile's gain as the other sets of turns read it
        first.append(f"compiling in the other sets of turns: {others}")
    if unsettled:
        first.append(f"not replicated: {COMPILING}, {fixes[COMPILING].brief} in section 3's turns, {again.brief} in "
                     f"section 3b's" + "".join(f", {r.brief} in notebook 08's" for r in in_08)
                     + f": {unconfirmed(fixes[COMPILING], again, *in_08)}"
                     + (" (section 3's 'pays for itself after' rests on that gain)" if is_gain(fixes[COMPILING]) else ""))
    if unbacked or cost_only:  # the fix and its control disagree: what each pairing established, apart
        first.append(f"{FIX}: {fixes[FIX].brief} against the .item() GPT in section 3b's turns, but "
                     f"{break_control(fix, item_cost)}")
    first += reference
    details = [f"the profiled step: the GPU waited {share.get('waiting', 0.0):.0%} of it, ran kernels and copies {ops:.0%}"
               if device_type == "cuda" else
               f"the profiled step (section 1): ops {ops:.0%} of it, time outside any op (Python, autograd's bookkeeping, the "
               f"profiler's own) {share.get('framework', 0.0):.1%}"]
    if kinds and device_type != "cuda":
        details += _room(kinds, share.get("framework", 0.0), ops_unprofiled, outside, ran08, gelu)
    details += _beside_08_answer(ran08, attention, fixes.get(COMPILING))  # the attention's gain, 08's beside it
    kept = fixes.get("keeping values on the device")
    if device_type != "cuda" and kept is not None and not kept.clear:
        details.append(f"keeping the values on the device read {kept.brief}: on a CPU nothing is queued, so a read "
                       "waits for nothing but itself (section 2)")
    if device_type != "cuda" and fix is not None and not fix.clear and not cost_only:
        details.append(f"the graph break's fix showed no gain these turns can measure ({fix.value:.2f}×; {fix.doubt}; "
                       "section 3b). The break both splits the block's graph and leaves the GPT's forward's other ops eager; "
                       "the two costs are not timed apart")
    return Answer("\n".join(head + ["  details:"] + [f"    {d}" for d in first + details]))


class Answer(str):
    """The answer's text, as printed whole; `short`: its lines above 'details:', for the end of the lesson;
    `details`: the lines under it, for the appendix."""

    @property
    def short(self) -> str:
        return self.split("\n  details:\n")[0]

    @property
    def details(self) -> str:
        head, _, rest = self.partition("\n  details:\n")
        return "details behind the answer:\n" + "\n".join(ln.removeprefix("  ") for ln in rest.splitlines())


def _waste(kinds: Mapping[str, Mapping[str, float]], outside: float,
           attention: Ratio | None, gelu: tuple | None = None) -> str:
    """Cell 1's 'which of that time is waste', on a CPU: the fusible ops' share and what their vanishing would give
    at most, and the attention kernel where the written-out one beat it (the time outside any op is said where the
    time went: nothing here shows how much of it a change could remove)."""
    fusible = fusible_share(kinds, outside)
    said = [f"the model's fusible ops (element-wise, reduction, copy), {fusible:.1%} of the op time"
            + (f" ({fusible - gelu[1]:.1%} without GELU's forward, whose time is mostly not memory traffic)"
               if _compute_set(gelu) else "")]
    if attention is not None and is_gain(attention):
        said.append(f"SDPA's kernel in this format (the written-out attention ran the step {attention.value:.2f}× as fast)")
    return "  possibly avoidable (details in the appendix): " + "; ".join(said)


def _unresolved(sets: Sequence[tuple[str, Ratio]], refuted: Iterable[str] = ()) -> str:
    """The sets of turns that did not resolve a gain, grouped by what they read: "section 3's and section 3b's could
    not tell; notebook 08's read no measurable difference". `refuted`: sets whose gain their own notebook calls not
    established (08's, where its eager control slowed as much as the gain)."""
    flat = [w for w, r in sets if not is_gain(r) and r.grade == "no difference"]
    open_ = [w for w, r in sets if not is_gain(r) and r.grade != "no difference"]
    moved = [w for w, r in sets if is_gain(r) and w in refuted]
    return "; ".join(filter(None, [f"{_and(open_)} could not tell" if open_ else "",
                                   f"{_and(flat)} read no measurable difference" if flat else "",
                                   f"{_and(moved)} gain is not established (its eager control slowed as much)"
                                   if moved else ""]))


def _listed(paid: Mapping[str, Ratio]) -> str:
    """'a at 1.20×, b at 1.10× and c at 1.30×': the changes that paid, each with its ratio ('' for none)."""
    named = [f"{name} at {r.value:.{r.decimals}f}×" + (f" (clear of its turns' drift, {r.drift:.1%}, by only "
                                            f"{points(100 * (r.value - 1 - r.drift))} points)"
                                            if r.drift is not None and r.value - 1 < 1.25 * r.drift else "")
             for name, r in paid.items()]
    return _and(named)


def _compute_set(gelu: tuple | None) -> bool:
    """Whether section 4 measured GELU's time as mostly not its bytes': twice a copy's time or more, beyond the spread."""
    return gelu is not None and gelu_compute_set(gelu[0])


def _room(kinds: Mapping[str, Mapping[str, float]], no_op: float, ops_unprofiled: float | None, outside: float,
          ran08: Mapping[str, dict] | None, gelu: tuple | None = None) -> list[str]:
    """On a CPU, where ops run one after another: the most compiling the model could save, from the share
    of its fusible ops (the loss's and optimizer's, `outside` seconds, left out) and the time outside any op
    (`no_op`, section 1's share; `ops_unprofiled`, section 4's op time over its unprofiled step); and 08's
    compile of the GPT whose attention is fusible ops too."""
    op_time = sum(k["seconds"] for k in kinds.values())
    fusible = fusible_share(kinds, outside)
    unprofiled = max(0.0, 1 - ops_unprofiled) if ops_unprofiled is not None else None
    least = (f"{no_op:.1%} of section 1's profiled step (part of the profiler's own time lands there)" if unprofiled is None
             else f"section 4 sets no lower bound on it: {unbounded(ops_unprofiled)}; section 1's profiled step reads "
                  f"{no_op:.1%}, which holds part of the profiler's own time" if not bounded(ops_unprofiled)
             else f"at least {at_least(unprofiled)} of the step without the profiler (section 4, if its op records "
                  "hold every op)" + (
                 f"; section 1's profiled step reads {no_op:.1%}, lower still: the profiler books part of its own cost "
                 "inside the ops' records" if no_op < unprofiled else
                 f"; section 1's profiled step reads {no_op:.1%}, which holds part of the profiler's own time"))
    lines = [f"compiling's room: the model's element-wise, reduction and copy ops (the kinds Inductor fuses) took "
             f"{fusible:.1%} of section 4's op time; if their time went to zero, the ops would run at most "
             f"{1 / (1 - fusible):.2f}× faster (if matmuls and attention stay library calls: assumed, not measured); "
             "fusing removes their memory round trips, so ops far below their memory roof would keep part of their "
             "time (reasoning, not measured)",
             f"  the loss's and the optimizer's such ops, {outside / op_time:.1%} more, stay outside torch.compile(model)",
             f"  the time outside any op (Python, autograd's bookkeeping), which compiling can also cut some of: {least}"]
    if _compute_set(gelu):  # the fusible ops' largest part, measured against a copy of its bytes
        r, part, *rest = gelu
        compiled = rest[0] if rest else None  # GELU compiled alone against eager, where timed
        lines.append(f"  of those, GELU's forward takes {part:.0%} of the op time, and a copy of its bytes took "
                     f"{1 / r.value:.1%} of its time (section 4): fusing, which removes memory round trips, would leave "
                     "most of GELU's time" + (
                         ", unless the fused code also computes GELU faster (reasoning, not measured)" if compiled is None
                         else f"; compiled alone, GELU ran {compiled.brief}" + (
                             ": generated code computes it faster" if compiled.clear and compiled.value > 1 else "")))
    written = (ran08 or {}).get("compiled vs eager, written-out attention")
    if written and written.get("spread"):  # attention as fusible ops: the room the bound above leaves out
        r = _recorded(written)
        lines.append(f"with attention written out, its ops are fusible too: notebook 08 compiled that GPT at {r.brief} "
                     "in its own turns" + (", a gain 08 calls not established (its eager control moved as much)"
                                           if str(written.get("note", "")).startswith(NOT_ESTABLISHED) else ""))
    return lines


def _attention_elsewhere(ran08: Mapping[str, dict] | None) -> list[str]:
    """Where SDPA was the faster attention after all: in float32 on this device (08's attention alone) and
    in the reference GPU's step (08's reference rows, its own GPT); [] where neither was recorded."""
    said = []
    fp32 = (ran08 or {}).get("attention alone, torch.float32: SDPA vs written out")
    if fp32 and fp32.get("spread") and fp32["spread"][0] > 1:
        said.append(f"SDPA over the written-out attention, attention alone in float32 on this device (08): "
                    f"{fp32['value']:.2f}× ({fp32['spread'][0]:.2f}–{fp32['spread'][1]:.2f})")
    device, ref = report.reference("08_transformer")
    sdpa, written = ref.get("eager, SDPA"), ref.get("eager, written-out attention")
    if sdpa and written and sdpa["value"] > written["value"]:
        spec = datasheet.lookup(device or "")
        g = profiles.sizes("08_transformer", "gpu", memory_gib=spec.memory_gib) if spec else None
        gpt = f" ({g.n_layer} layers, width {g.n_embd}, T = {g.block})" if g else ""
        quartiles = (f" ({sdpa['spread'][0] / written['spread'][1]:.2f}–{sdpa['spread'][1] / written['spread'][0]:.2f}, "
                     "the two timings' quartiles, not paired)" if sdpa.get("spread") and written.get("spread") else "")
        said.append(f"on the reference {device}, with the reference run's 08 GPT{gpt}, its eager SDPA step ran "
                    f"{sdpa['value'] / written['value']:.2f}×{quartiles} as fast as the written-out one (a record 08 "
                    "flags: its machine ran that step slower than another H200 did, cause not found)")
    return ["SDPA lost to the written-out attention here in the step's 16-bit format; it won in other settings (each named):"] + [
        f"  {line}" for line in said] if said else []


def _beside_08_answer(ran08: Mapping[str, dict] | None, attention: Ratio | None, gain: Ratio | None) -> list[str]:
    """The written-out attention against SDPA here (`attention`) and in 08's step; 08's compile of this GPT
    where this run's (`gain`) told no gain."""
    lines = []
    kernel = (ran08 or {}).get("SDPA vs written-out attention, eager")  # 08's whole step, SDPA over written out
    in_08 = (f"notebook 08's step (two micro-batches, with clipping), in its own turns: "
             f"{_recorded(kernel, inverse=True).value:.2f}× ({1 / kernel['spread'][1]:.2f}–{1 / kernel['spread'][0]:.2f})"
             if kernel and kernel.get("spread") else "")  # as 08 printed it
    if attention is not None or in_08:
        lines.append("the written-out attention instead of SDPA: "
                     + "; ".join(filter(None, [f"in section 3's turns {attention.brief}" if attention else "", in_08])))
    if attention is not None and attention.clear and attention.value > 1:  # where the written-out one won
        lines += _attention_elsewhere(ran08)
    r08 = compile_in_08(ran08)
    if gain is not None and not gain.clear and r08 is not None:
        lines.append(f"notebook 08 timed compiling this GPT in its own turns: {r08.brief}; here: {gain.doubt}")
    return lines


SMALL = "one sequence of 32 tokens"  # section 3b's small step, where the time outside the ops weighs most


def _break_words(fix: Ratio, cost: Ratio) -> str:
    """The graph-break fix and its control in a few words: the fix's ratio, and where its control leaves it open."""
    return fix.brief + ("; the break's own cost not resolved there" if break_unbacked(fix, cost) else
                        ", though the .item() GPT ran measurably slower than the plain one there"
                        if break_cost_only(fix, cost) else "")




def _fix_status(name: str, r: Ratio | None, sets: Sequence[tuple[str, Ratio]], unsettled: bool, unbacked: bool,
                cost_only: bool, slowed: tuple[float, float] | None = None) -> str:
    """One taught fix in the answer's short lines: its ratio (compiling: in each set of turns that timed it, `sets`),
    and where the sets or its control leave it open, that in a few words (the whole stands under 'details:').
    `slowed`: 08's eager control's move after its compile and the compiled step over its earlier reading
    (:func:`control_in_08`), said beside 08's reading, as 08 says it."""
    if r is None:
        return f"{name}: not timed here"
    if name == COMPILING and len(sets) > 1:
        where = {w: w.removesuffix("'s") + " (2 micro-batches)" * (w == "notebook 08's") for w, _ in sets}
        caveat = (f"; its eager control read {slowed[0]:.2f}× its time before the compile, and against that earlier "
                  f"reading the compiled step ran at {slowed[1]:.2f}× its speed (two moments)" if slowed else "")
        return f"{name}, in each set of turns" + (" (not replicated: details)" if unsettled else "") + ":" + "".join(
            f"\n      {where[w]}: {s.brief}" + (caveat if w == "notebook 08's" else "") for w, s in sets)
    if name == FIX and unbacked:
        return f"{name}: {r.brief} against the .item() GPT; the break's own cost not resolved (details)"
    if name == FIX and cost_only:
        return f"{name}: {r.brief}, though the .item() GPT ran measurably slower than the plain one (details)"
    return f"{name}: {r.brief}"


def _recorded(row: dict, inverse: bool = False) -> Ratio:
    """A recorded speed-up row of 08's as a :class:`Ratio` worded faster / slower; `inverse`: 1 over it as 08's verdict
    printed it ('0.71×: 1.41× slower', :attr:`Ratio.inverse`), its interval's ends swapped."""
    if inverse:
        lo, hi = row["spread"]
        row = {**row, "value": printed_inverse(row), "spread": [1 / hi, 1 / lo]}
    return dataclasses.replace(report.recorded_ratio("", row), more="faster", less="slower")
