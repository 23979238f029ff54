"""Notebook 10 (torch.compile and the profiler): the exercise checks, and the words around its
measurements (each function returns the text a cell prints); section 4's, the roofline's, are
:mod:`course_lib.lessons.nb10_roofline`, the reference GPU's readings
:mod:`course_lib.lessons.nb10_reference` and 08's beside 10's :mod:`course_lib.lessons.nb10_beside08`, all
re-exported here."""

from __future__ import annotations

import dataclasses
import subprocess
import warnings
from collections import Counter
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

import torch
from torch import nn

from course_lib import check, datasheet, profiles, published, report, verdicts
from course_lib.bench import Ratio, Timing, break_even, name_width, speedup
from course_lib.lessons.nb10_roofline import (OfRoof, RidgeOf, above_roof, attention_alone, eager_then_now,  # noqa: F401
                                              kind_table, no_roofline, op_notes, op_table, placement, reference_ridge,
                                              roof_verdict, roofs_note)
from course_lib.lessons.nb10_reference import (REGIONS, bound, graphs_bound, own_gpt, queue_drained,  # noqa: F401
                                                reference_answer, reference_fix, reference_gpt, reference_sizes,
                                                reference_sync, regime_label, stale_fix_rows)
from course_lib.lessons.nb10_beside08 import NOT_IN_08, account_in_08, beside_08, same_as_08  # noqa: F401
from course_lib.lessons.nb10_roofline import at_least, bounded, roof_share, unbounded
from course_lib.lessons.nb10_short import (break_short, compile_short, gain_unsettled, in_short,  # noqa: F401
                                            sync_short, unconfirmed)
from course_lib.lessons.nb10_short import (break_control, break_cost_only, break_unbacked, compile_in_08, is_gain,
                                            other_sets, points)
from course_lib.models import GPT, GPTConfig
from course_lib.profiling import StepSyncs, SyncCounter
from course_lib.roofline import OpTime, count_ops
from course_lib.units import fmt_bytes, fmt_count, fmt_time


@check.exercise()
def check_arithmetic_intensity(add_fn: Callable[[int], float],
                         matmul_fn: Callable[[int, int, int, int], float]) -> None:
    """Exercise (roofline): `add_fn(n)` must give the FLOPs per byte of ``a + b`` for two
    float32 vectors of n elements, `matmul_fn(m, k, n, nbytes)` those of an (m, k) @ (k, n)
    matmul of `nbytes`-byte elements; both compared with what ``roofline.count_ops``
    counts for the real ops (PyTorch's FLOP formulas, each operand's bytes once)."""
    for n in (1000, 1 << 16):
        a, b = torch.randn(n), torch.randn(n)
        (op,) = count_ops(lambda: a + b)
        got = add_fn(n)
        if abs(got - op.intensity) > 1e-9 * op.intensity:
            raise AssertionError(f"a + b, {n:,} float32 elements: got {got:.6g} FLOP/B; the op does "
                                 f"{op.flops:,.0f} FLOPs and moves {op.bytes:,.0f} bytes: {op.intensity:.6g}")
    for m, k, n, dtype in ((64, 32, 16, torch.float32), (128, 128, 128, torch.bfloat16), (1, 256, 64, torch.float64)):
        a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
        (op,) = count_ops(lambda: a @ b)
        size = a.element_size()
        got = matmul_fn(m, k, n, size)
        if abs(got - op.intensity) > 1e-9 * op.intensity:
            raise AssertionError(f"({m}, {k}) @ ({k}, {n}), {size}-byte elements: got {got:.6g} FLOP/B; the op "
                                 f"does {op.flops:,.0f} FLOPs and moves {op.bytes:,.0f} bytes: {op.intensity:.6g}")
    check.passed("arithmetic intensity of a + b (2 sizes) and of matmuls (3 shapes, float32, bfloat16, float64)")


@check.exercise()
def check_no_sync_loop(fn: Callable, reference: Callable) -> None:
    """Exercise (profiler): `fn(model, opt, batches)` must train as `reference` does and
    return the losses as one tensor, with no call that makes the host wait for the device
    inside it (``profiling.SyncCounter``); run on a small GPT, 3 steps each."""
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 256, (3, 4, 17), generator=g)
    batches = [(t[:, :-1], t[:, 1:]) for t in tokens]  # 3 steps of (4, 16) tokens

    def fresh() -> tuple[nn.Module, torch.optim.Optimizer]:
        torch.manual_seed(0)
        model = GPT(GPTConfig(block_size=16, n_layer=1, n_head=2, n_embd=32))
        return model, torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)  # no host-side step count

    want = torch.tensor(reference(*fresh(), batches))
    with SyncCounter() as counter:
        got = fn(*fresh(), batches)
    if counter.count:
        raise AssertionError(f"{counter.count} synchronising calls in 3 steps: {sorted(set(counter.calls))} "
                             f"(a value read on the host: .item(), bool(), float(), an if on a tensor …)")
    if not isinstance(got, torch.Tensor):
        raise AssertionError(f"return the losses as one tensor (torch.stack), got {type(got).__name__}")
    print("synchronising calls in 3 steps: 0 (SyncCounter) ✓")
    check.close(got.reshape(-1), want, what="losses of 3 steps, without syncs vs the given loop", atol=1e-6, rtol=1e-5)


# ---- the words around the measurements: each function returns the text a cell prints ----

COMPILING = "compiling (default mode)"  # the answer's name for section 3's compile, in `fixes`
FIX = "a tensor instead of .item()"  # the answer's name for section 3b's graph-break fix, in `fixes`
VISIBLE = 0.01  # a category's share of the step below which its bar is too thin to see
GRAPH_FIGURES = ["cuda_graphs_maskrcnn_backbone_31ms_to_6ms", "cuda_graphs_mlperf_bert_1p12x"]  # reduce-overhead's
COMPILE_FIGURES = ["pytorch2_paper_inductor_geomean_a100", "karpathy_gpt2_124m_torch_compile_300ms_to_130ms"]


def precision_line(amp: str, amp_dtype: torch.dtype, device: str, work: Path) -> str:
    """The training step's precision and GradScaler, and this run's folder; a line before them where
    fp16 stands in for bf16. `amp`: "bf16", "fp16" or "off"."""
    head = (f"{device} has no bf16 tensor cores: the training step runs float16 autocast with a GradScaler.\n"
            if amp == "fp16" else "")
    return (head + f"autocast: {amp_dtype if amp != 'off' else 'off (float32)'} | GradScaler: {amp == 'fp16'} "
            f"| files of this run: {work}")


def gpt_line(cfg: GPTConfig, batch: int) -> str:
    """The GPT's shape, the batch and the parameter count (the position embedding left out)."""
    return (f"GPT: {cfg.n_layer} layers, width {cfg.n_embd}, T = {cfg.block_size} | batch {batch} sequences "
            f"| {GPT(cfg).num_params():,} parameters (the position embedding left out)")


def trace_note(path: Path, steps: int) -> str:
    """Where the trace file of `steps` profiled steps is, its size, and how to open it."""
    return (f"trace of {steps} steps: {path} ({fmt_bytes(path.stat().st_size)})\n"
            "  open https://ui.perfetto.dev and drop the file in (it is read in your browser, not uploaded), "
            "or chrome://tracing in Chrome")


FUSIBLE = ("element-wise", "reduction & other", "copy")  # the op kinds Inductor generates code for; matmuls it calls
OUTSIDE = ("adam", "_foreach", "log_softmax", "nll_loss")  # the optimizer's and the loss's ops: torch.compile(model) leaves them


def outside_model(ops: Iterable[OpTime]) -> float:
    """The seconds a step spends in fusible ops that compiling the model does not reach: the loss's and the
    optimizer's (by op name, :data:`OUTSIDE`), which the training step runs outside the model."""
    return sum(o.seconds for o in ops if o.kind in FUSIBLE and any(k in o.name.lower() for k in OUTSIDE))


def answer(step: Mapping[str, float], device_type: str, fixes: Mapping[str, Ratio | None],
           kinds: Mapping[str, Mapping[str, float]] | None, slowest: str, slowest_of_roof: float | None,
           ran08: Mapping[str, dict] | None = None, attention: Ratio | None = None,
           ops_unprofiled: float | None = None, outside: float = 0.0,
           again: Ratio | None = None, device: str = "", item_cost: Ratio | None = None) -> str:
    """The notebook's question answered from this run's numbers, a few short lines first: where the op time
    went (`kinds`, as section 4 sums them; the costliest op with FLOPs, `slowest`, at `slowest_of_roof` of its
    roof), which timed change paid (`fixes`: a name -> its ratio, None where not timed; `attention`, the
    written-out attention in section 3's turns), each fix's verdict and, off a GPU, the reference GPU's; then
    the details: the profiled step's split (`step`: seconds per category), on a CPU compiling's room
    (:func:`_room`), notebook 08's readings of the same changes (`ran08`), and why a fix did not show. `again`:
    the compile's gain timed once more, in section 3b's turns, quoted beside section 3's wherever that is;
    `item_cost`: the .item() GPT's speed over the plain compiled GPT's, the graph-break fix's control."""
    total = sum(step.values())
    share = {cat: s / total for cat, s in step.items()}
    ops = share.get("compute", 0.0) + share.get("copies", 0.0)
    unsettled = again is not None and (r := fixes.get(COMPILING)) is not None and gain_unsettled(r, again)
    unbacked = (fix := fixes.get(FIX)) is not None and break_unbacked(fix, item_cost)
    cost_only = fix is not None and break_cost_only(fix, item_cost)
    in_08 = [r for r in [compile_in_08(ran08)] if r is not None]  # 08's compile of the same GPT, its own turns
    paid = _listed({n: r for n, r in (dict(fixes) | {"the written-out attention": attention}).items()
                    if r is not None and is_gain(r) and not (n == COMPILING and unsettled) and not (n == FIX and unbacked)})
    others = other_sets(fixes.get(COMPILING), again, in_08) if not unsettled else ""
    tried = (f"  beside them, a change of kernel: the written-out attention instead of SDPA, {attention.brief}"
             if attention is not None else "")
    reference = reference_answer() if device_type != "cuda" else []
    head = [f"answer, from this run's numbers{f' ({device})' if device else ''}:"]
    if kinds:
        op_time = sum(k["seconds"] for k in kinds.values())
        head.append("  where the time went: " + ", ".join(f"{kind} {k['seconds'] / op_time:.0%}" for kind, k in
                                                          list(kinds.items())[:3])
                    + " of the op time (under the profiler, section 4)"
                    + (f"; the costliest op, {slowest}, at {roof_share(slowest_of_roof)} of its roof"
                       if slowest_of_roof is not None else ""))
    if fixes:
        head.append("  the fixes taught here, each timed in turns: " + "; ".join(
            (f"{name} {r.brief}" + (f" (in section 3b's turns: {again.brief})" if again and name == COMPILING else "")
             if r is not None else f"{name} not timed here") for name, r in fixes.items()))
    head += [tried] if tried else []
    both = " (each against the eager SDPA step; the two together are not timed here)" * (
        COMPILING in paid and "the written-out attention" in paid)
    head.append(f"  so what paid: {paid} made the step measurably faster, in turns{both}" if paid else
                "  so what paid: no change timed here made the step measurably faster")
    if others:  # the compile's gain as the other sets of turns read it
        head.append(f"  compiling in the other sets of turns: {others}")
    if unsettled:
        head.append(f"  not replicated: {COMPILING}, {fixes[COMPILING].brief} in section 3's turns, {again.brief} in "
                    f"section 3b's" + "".join(f", {r.brief} in notebook 08's" for r in in_08)
                    + f": {unconfirmed(fixes[COMPILING], again, *in_08)} (section 3's 'pays for itself after' rests on "
                    "that gain)")
    if unbacked or cost_only:  # the fix and its control disagree: what each pairing established, apart
        head.append(f"  {FIX}: {fixes[FIX].brief} against the .item() GPT in section 3b's turns, but "
                    f"{break_control(fix, item_cost)}")
    if kinds and device_type != "cuda":
        head.append(_waste(kinds, ops_unprofiled, outside, attention))
    details = [f"the profiled step: the GPU waited {share.get('waiting', 0.0):.0%} of it, ran kernels and copies {ops:.0%}"
               if device_type == "cuda" else
               f"the profiled step (section 1): ops {ops:.0%} of it, time outside any op (Python, autograd's bookkeeping, the "
               f"profiler's own) {share.get('framework', 0.0):.0%}"]
    if kinds and device_type != "cuda":
        details += _room(kinds, share.get("framework", 0.0), ops_unprofiled, outside, ran08)
    details += _beside_08_answer(ran08, attention, fixes.get(COMPILING))
    kept = fixes.get("keeping values on the device")
    if device_type != "cuda" and kept is not None and not kept.clear:
        details.append("keeping the values on the device showed no gain: on a CPU nothing is queued, so a read waits "
                       "for nothing but itself (section 2)")
    if device_type != "cuda" and fix is not None and not fix.clear and not cost_only:
        details.append(f"the graph break's fix showed no gain these turns can measure ({fix.value:.2f}×; {fix.doubt}; "
                       "section 3b). The break both splits the block's graph and leaves the GPT's forward's other ops eager; "
                       "the two costs are not timed apart")
    return "\n".join(head + reference + ["  details:"] + [f"    {d}" for d in details])


def _fusible(kinds: Mapping[str, Mapping[str, float]], outside: float) -> float:
    """The model's fusible ops' share of section 4's op time (the loss's and optimizer's, `outside` s, left out)."""
    op_time = sum(k["seconds"] for k in kinds.values())
    return (sum(k["seconds"] for kind, k in kinds.items() if kind in FUSIBLE) - outside) / op_time


def _waste(kinds: Mapping[str, Mapping[str, float]], ops_unprofiled: float | None, outside: float,
           attention: Ratio | None) -> str:
    """Cell 1's 'which of that time is waste', on a CPU: the time outside any op, the fusible ops' share and what
    their vanishing would give at most, and the attention kernel where the written-out one beat it."""
    fusible = _fusible(kinds, outside)
    said = ([f"at least {at_least(1 - ops_unprofiled)} of the step outside any op (section 4, if its op records hold "
              "every op)"] if ops_unprofiled and bounded(ops_unprofiled) else [])
    said.append(f"the model's fusible ops (element-wise, reduction, copy), {fusible:.0%} of the op time (the op time at "
                f"most {1 / (1 - fusible):.2f}× shorter if they vanished; fusing removes their memory round trips, so ops "
                "far below their memory roof would keep part of their time: reasoning, not measured)")
    if attention is not None and is_gain(attention):
        said.append(f"SDPA's kernel in this format (the written-out attention ran the step {attention.value:.2f}× as fast)")
    return "  what this run can name as possibly avoidable: " + "; ".join(said)


def _listed(paid: Mapping[str, Ratio]) -> str:
    """'a at 1.20×, b at 1.10× and c at 1.30×': the changes that paid, each with its ratio ('' for none)."""
    named = [f"{name} at {r.value:.{r.decimals}f}×" + (f" (clear of its turns' drift, {r.drift:.1%}, by only "
                                            f"{points(100 * (r.value - 1 - r.drift))} points)"
                                            if r.drift is not None and r.value - 1 < 1.25 * r.drift else "")
             for name, r in paid.items()]
    return ", ".join(named[:-1]) + f" and {named[-1]}" if len(named) > 1 else "".join(named)


def _room(kinds: Mapping[str, Mapping[str, float]], no_op: float, ops_unprofiled: float | None, outside: float,
          ran08: Mapping[str, dict] | None) -> list[str]:
    """On a CPU, where ops run one after another: the most compiling the model could save, from the share
    of its fusible ops (the loss's and optimizer's, `outside` seconds, left out) and the time outside any op
    (`no_op`, section 1's share; `ops_unprofiled`, section 4's op time over its unprofiled step); and 08's
    compile of the GPT whose attention is fusible ops too."""
    op_time = sum(k["seconds"] for k in kinds.values())
    fusible = _fusible(kinds, outside)
    unprofiled = max(0.0, 1 - ops_unprofiled) if ops_unprofiled is not None else None
    least = (f"{no_op:.0%} of section 1's profiled step (part of the profiler's own time lands there)" if unprofiled is None
             else f"section 4 sets no lower bound on it: {unbounded(ops_unprofiled)}; section 1's profiled step reads "
                  f"{no_op:.0%}, which holds part of the profiler's own time" if not bounded(ops_unprofiled)
             else f"at least {at_least(unprofiled)} of the step without the profiler (section 4)" + (
                 f"; section 1's profiled step reads {no_op:.0%}, lower still: the profiler books part of its own cost "
                 "inside the ops' records" if no_op < unprofiled else
                 f"; section 1's profiled step reads {no_op:.0%}, which holds part of the profiler's own time"))
    lines = [f"compiling's room: the model's element-wise, reduction and copy ops (the kinds Inductor fuses) took "
             f"{fusible:.0%} of section 4's op time; if their time went to zero, the ops would run at most "
             f"{1 / (1 - fusible):.2f}× faster (if matmuls and attention stay library calls: assumed, not measured)",
             f"  the loss's and the optimizer's such ops, {outside / op_time:.0%} more, stay outside torch.compile(model)",
             f"  the time outside any op (Python, autograd's bookkeeping), which compiling can also cut some of: {least}"]
    written = (ran08 or {}).get("compiled vs eager, written-out attention")
    if written and written.get("spread"):  # attention as fusible ops: the room the bound above leaves out
        r = dataclasses.replace(report.recorded_ratio("", written), more="faster", less="slower")
        lines.append(f"with attention written out, its ops are fusible too: notebook 08 compiled that GPT at {r.brief} "
                     "in its own turns")
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
    in_08 = (f"notebook 08's step (two micro-batches, with clipping), in its own turns: {1 / kernel['value']:.2f}× "
             f"({1 / kernel['spread'][1]:.2f}–{1 / kernel['spread'][0]:.2f})" if kernel and kernel.get("spread") else "")
    if attention is not None or in_08:
        lines.append("the written-out attention instead of SDPA: "
                     + "; ".join(filter(None, [f"in section 3's turns {attention.brief}" if attention else "", in_08])))
    if attention is not None and attention.clear and attention.value > 1:  # where the written-out one won
        lines += _attention_elsewhere(ran08)
    r08 = compile_in_08(ran08)
    if gain is not None and not gain.clear and r08 is not None:
        lines.append(f"notebook 08 timed compiling this GPT in its own turns: {r08.brief}; here: {gain.doubt}")
    return lines


def profiled_total(plain: Mapping[str, float]) -> str:
    """The profiled step's length by its categories (`plain`, seconds each), and why it is not set beside
    section 3's timing of the same step."""
    return (f"the profiled steps: {fmt_time(sum(plain.values()))} each (the median over the trace's steps; the table "
            "above gives their mean). This length holds the profiler's cost: it is not set beside section 3's "
            "unprofiled times; only its shares are read here")


def regime(plain: Mapping[str, float], device_type: str) -> str:
    """The plain step's regime, from its categories' seconds (`plain`): on a GPU, launch-bound
    where the GPU waited for the CPU half the step or more, partly so from a fifth, else bound by
    its kernels; on a CPU, the ops' share against Python's; then, off a GPU, the reference run's
    shares (another model and size: its own block)."""
    total = sum(plain.values())
    share = {cat: seconds / total for cat, seconds in plain.items()}
    if device_type == "cuda":
        waited, busy = share.get("waiting", 0.0), share.get("compute", 0.0) + share.get("copies", 0.0)
        kind = bound(waited)
        if kind == "launch-bound":
            return (f"launch-bound: the GPU waited for the CPU to queue work {waited:.0%} of the step. Faster kernels "
                    "cannot shorten those waits; fewer launches can (section 3's CUDA graphs, fused kernels), or more "
                    "work per launch (a larger batch)")
        if kind == "partly launch-bound":
            return (f"partly launch-bound: the GPU waited for the CPU {waited:.0%} of the step and ran kernels and "
                    f"copies {busy:.0%}: both fewer launches and faster kernels shorten it")
        return (f"GPU-bound: kernels and copies filled {busy:.0%} of the step, waits {waited:.0%}: faster kernels "
                "shorten it (section 4 says which ops are far from their roof)")
    ops, python = share.get("compute", 0.0) + share.get("copies", 0.0), share.get("framework", 0.0)
    line = (f"on this CPU the ops (compute + copies) ran {ops:.0%} of the profiled step and the time outside any op (Python, autograd's "
            f"bookkeeping, the profiler's own) {python:.0%}: "
            + ("the ops set its time" if ops >= 0.5 else "the time outside any op sets it"))
    label = regime_label(report.reference("10_compile_and_profile")[1])
    named = f"\n{gpt}" if label and (gpt := reference_gpt()) else ""  # before the reference's first row
    return (line + named + (f"\n{label}" if label else "") + "\n"  # the reading without the profiler first
            + published.elsewhere("10_compile_and_profile", ("plain step:",)))


def shares(timings: Iterable[Timing]) -> str:
    """One line per category: its Timing and its share of the sum of the medians."""
    timings = list(timings)
    total, width = sum(t.median_s for t in timings), name_width(timings)
    return "\n".join(f"{t.line(width)} | {t.median_s / total:5.1%} of the step" for t in timings)


def sync_line(name: str, found: Sequence[StepSyncs]) -> str:
    """The synchronising calls the trace found in each profiled step, and the CPU time in them."""
    return (f"{name}: synchronising calls per profiled step: {[s.total for s in found]} "
            f"{dict(found[0].counts) or ''} | CPU time in them: "
            f"{1e3 * sum(s.seconds for s in found) / len(found):.2f} ms/step (the mean over the profiled steps)")


def warning_sites(caught: Sequence[warnings.WarningMessage]) -> str:
    """Where the warnings `caught` came from (file:line, most frequent first, with counts), so that a count
    above the reads the code makes names its extra calls."""
    sites = Counter(f"{Path(w.filename).name}:{w.lineno}" for w in caught)
    return "  where they came from: " + ", ".join(f"{site} ×{n}" for site, n in sites.most_common())


def counter_line(counter: SyncCounter, what: str) -> str:
    """What a SyncCounter saw: the count and its first call, with how often that call came."""
    first = f" ({counter.calls[0]} ×{counter.calls.count(counter.calls[0])})" if counter.calls else ""
    return f"SyncCounter, {what}: {counter.count} synchronising calls{first}"


def sync_verdict(gain: Ratio | None, waits: int, device: str, device_type: str, also: Sequence[str] = ()) -> str:
    """This run's block first: what section 2 found in one line (:func:`sync_short`), then under 'details:' the
    verdict on keeping the logged values on the device, the lines `also` gives (the cell's other verdicts and
    notes), on a CPU why the reads cost little (none of it when the steps were not timed); then, off a GPU, the
    reference GPU's timings under a heading of their own."""
    lines = [gain.verdict(f"keeping the {waits} values per step on the device", on=device)] if gain is not None else []
    lines += also
    if gain is not None and device_type == "cpu":
        lines.append("(on a CPU, ops run as they are called, so a value is ready when it is read)")
    blocks = [in_short(sync_short(gain, waits, device_type), lines) if gain is not None else ""]
    if device_type != "cuda":  # what the reference GPU measured of the same two steps, a block of its own
        blocks.append("\n".join(["On the reference GPU (not this machine):", *filter(None, reference_sync())]))
    return "\n\n".join(filter(None, blocks))


def profiled_note(categories: Mapping[str, Mapping[str, float]], gain: Ratio | None, device_type: str) -> str:
    """What the profiled steps say beside the timed verdict (`gain`, None where the steps were not timed), in
    two lines: why their two times are not set side by side (two traces of a few steps, one after the other),
    and the time in the 'waiting' category, which holds the reads (and, where its bar is too thin, that no
    figure follows)."""
    reading, keeping = categories["reading values"], categories["keeping values"]
    waited = reading["waiting"] / sum(reading.values())
    thin = waited < VISIBLE
    return ("profiled: two traces, one after the other, of a few steps each: too few, and at two moments, to set "
            "their times side by side; "
            + ("the verdict rests on the turns above" if gain is not None else "no timed comparison ran here")
            + f"\n{'waiting' if device_type == 'cuda' else 'reads into Python'}, the category that holds the reads: "
            f"{fmt_time(reading['waiting'])} a step in the step reading values ({waited:.2%} of it), "
            f"{fmt_time(keeping['waiting'])} in the step keeping them (medians over the profiled steps; the mean above "
            "can differ)"
            + (": too thin to draw" if thin else "")
            + ("; on a CPU a read costs only itself" if thin and device_type == "cpu" else "")
            + ".\n(the profiler counts here only each value's copy to Python; the timed turns count the whole step)")


def first_call_line(mode: str, seconds: float, cold: bool, device: str) -> str:
    """The first compiled step's time, compilation included, and whether the caches were cold."""
    return (f"compile, mode={mode!r}: first step {seconds:.1f} s (one run), compilation included, "
            f"{'cold caches' if cold else 'caches warm from the first'} | {device}")


def reduce_overhead_elsewhere() -> str:
    """Off a GPU: why mode='reduce-overhead' is not timed, and what the reference GPU run and
    published figures measured of it."""
    named = f"Beside it, what GPUs measured ({own_gpt()}):\n" if own_gpt() else ""
    return ("mode='reduce-overhead' is not timed here: CUDA graphs need a GPU.\n" + named
            + published.elsewhere("10_compile_and_profile", ("compile + first step, default",
                                                              "compile + first step, reduce", "compiled, reduce",
                                                              "compiled (reduce", "compiled, default"), GRAPH_FIGURES)
            + "\n(the reference's default compile ran first, with cold caches, as here; its reduce-overhead compile "
            "ran second, with the caches warm from the default one)"
            + graphs_bound(report.reference("10_compile_and_profile")[1]))


def not_compiled(prefixes: tuple[str, ...]) -> str:
    """A profile that does not compile: why, and the reference run's rows starting with `prefixes`."""
    return ("This profile does not compile: a cold compile takes tens of seconds on a small machine, more "
            "than its budget. The cpu and gpu profiles measure it.\n"
            + report.reference_text("10_compile_and_profile", prefixes=prefixes))


def payback(speed: Ratio, first_call_s: float, eager: Timing, compiled: Timing) -> str:
    """After how many steps (of `eager`'s work, tokens) a compilation pays for itself (a speed-up beyond the
    spread), or that there is no gain to pay it back."""
    if speed.clear and speed.value > 1:
        extra = first_call_s - compiled.median_s
        steps, few, many = break_even(extra, eager, speed)  # extra ÷ the seconds each step saves
        size = f" of {eager.work:,.0f} tokens" if eager.work else ""
        return (f"  the compilation ({extra:.1f} s beyond one step) pays for itself after about "
                f"{fmt_count(steps)} steps{size} ({fmt_count(few)} to {fmt_count(many)} over the spread of the speed-up), if "
                "this gain holds: section 3b times the compile again")
    if speed.value > 1 and not speed.within_noise:  # faster, but the drift is as large: not established
        return f"  no gain these repeats can establish ({speed.doubt}), so no break-even to state"
    if speed.within_noise:
        return (f"  no gain these repeats can establish ({speed.doubt}): the compilation ({first_call_s:.0f} s for "
                "the first step) has nothing measured to pay it back here")
    return (f"  compiled ran slower: nothing pays back the compilation ({first_call_s:.0f} s for the first step); "
            "eager is the better choice for this model here")


def gpus_measured(device_type: str, reduce_overhead: bool) -> str:
    """What GPUs measured of torch.compile: the reference run's speed-up off a GPU, the published
    figures (with CUDA graphs' where reduce-overhead ran; off a GPU they stand with
    :func:`reduce_overhead_elsewhere`, which says what the reference's graphs removed)."""
    named = f" ({own_gpt()})" if device_type != "cuda" and own_gpt() else ""
    return f"\nBeside it, what GPUs measured{named}:\n" + published.elsewhere(
        "10_compile_and_profile", ("compiled (default) vs eager",) if device_type != "cuda" else (),
        COMPILE_FIGURES + (GRAPH_FIGURES if reduce_overhead else []))


def intensity_line(what: str, intensity_: float, bound: str | None, device: str) -> str:
    """An op's arithmetic intensity and, where the roofs were measured, which roof bounds it here."""
    return f"{what}: {intensity_:,.2f} FLOP/B" + (f", {bound} on {device}" if bound else "")


def first_break(expl) -> str:
    """The number of break reasons torch._dynamo.explain gave, the first one and where it is."""
    reason = expl.break_reasons[0]
    frame = reason.user_stack[-1]
    return (f"torch._dynamo.explain: {len(expl.break_reasons)} break reason(s); the first: "
            f"{reason.reason.splitlines()[0]}\n  at {Path(frame.filename).name}:{frame.lineno}  {frame.line.strip()}")


def captured_line(name: str, graphs: Sequence[Sequence[int]]) -> str:
    """The graphs Dynamo captured for `name` ([ops, calls] each) and the op calls they hold."""
    in_graphs = sum(ops * calls for ops, calls in graphs)
    return (f"{name:<20} {len(graphs)} graph(s): " + ", ".join(f"{ops} ops × {calls} call(s)" for ops, calls in graphs)
            + f" | {in_graphs} op calls in compiled graphs")


def gave_up(graphs: Sequence[Sequence[int]], n_layer: int) -> bool:
    """True when Dynamo compiled only the blocks' code: every graph called once per block."""
    return all(calls == n_layer for _, calls in graphs)


def compiled_share(item_graphs: Sequence[Sequence[int]], tensor_graphs: Sequence[Sequence[int]], n_layer: int,
                   plain: int | None = None, block: int | None = None) -> str:
    """How much of the forward runs in compiled graphs with the .item() and with the tensor, and
    whether Dynamo gave up on GPT.forward (:func:`gave_up`); given the plain GPT's op calls per forward
    (`plain`) and one plain block's ops (`block`), the model's own ops apart from the monitoring's."""
    whole = sum(o * c for o, c in tensor_graphs)
    broken = sum(o * c for o, c in item_graphs)
    if gave_up(item_graphs, n_layer) and plain and block:
        own, eager = n_layer * block, plain - n_layer * block
        return (f"with the .item(): only the {n_layer} blocks run compiled, one graph of the block's code called once per "
                f"block: {broken} op calls, the blocks' own {own} of the plain GPT's {plain} ({own / plain:.0%}) and the "
                f"monitoring's {broken - own}. Dynamo gave up on the GPT's forward, so its other {eager} ops (the embeddings, "
                f"final norm and head) run eagerly. With the tensor: one graph of all {whole} op calls, the monitoring's "
                "included")
    if gave_up(item_graphs, n_layer):
        return (f"with the .item(): only the {n_layer} blocks run compiled ({broken} op calls, one graph of the block's "
                "code called once per block); Dynamo gave up on the GPT's forward, so the embeddings, final norm and head "
                f"run eagerly. With the tensor: one graph of all {whole} op calls")
    return (f"op calls per forward in compiled graphs: {broken} with the .item(), the rest of its forward running "
            f"eagerly; {whole} with the tensor, in one graph: the whole forward")


def compile_log_note(name: str, seconds: float, breaks: Sequence[str], explained: int, eager_forward: bool,
                     device: str) -> str:
    """The first compiled step's time, and what the graph_breaks log said: its message count, the
    first message's opening lines, and why that count differs from explain's (`explained`);
    `eager_forward`: Dynamo gave up on GPT.forward (:func:`gave_up`)."""
    lines = [f"{name}: first step {seconds:.1f} s (one run, after section 3's compile filled the caches), compilation "
             f"included | {device}"]
    if breaks:
        lines.append(f"  graph_breaks log: {len(breaks)} message(s); the first begins:")
        lines += ["    " + line for line in breaks[0].splitlines()[:3] if line.strip()]
        lines += [f"  message {i} begins: {m.splitlines()[0]}" for i, m in enumerate(breaks[1:4], 2) if m.strip()]
    if breaks and len(breaks) != explained:
        lines.append((f"  one break, two log messages: one when Dynamo gave up on the GPT's forward, one when it compiled the block "
                      "on its own and cut its graph at the .item()" if len(breaks) == 2 and eager_forward and explained == 1
                      else f"  the log wrote {len(breaks)} messages, explain counted {explained} break(s): the log writes "
                      "one per Python frame that reached the break")
                     + " (see 'frame (Python)' in the glossary); explain() lists the break's reason once")
    return "\n".join(lines)


def compile_pair(item_s: float, tensor_s: float) -> str:
    """The two first steps (compilation included), with and without the break: one run each, so no verdict,
    and why they say nothing of the break's cost to compile (what each found in the caches)."""
    r = item_s / tensor_s
    return (f"compilation: first step {item_s:.2f} s with the .item(), {tensor_s:.2f} s with the tensor ({r:.2f}×), one "
            "run each; each compile may have found a different share of its work already in the caches section 3 "
            "filled: not a measure of what the break costs to compile")


def before_compile(plain: Timing, eager: Timing) -> str:
    """Section 2's plain step (`plain`, timed before anything in the process was compiled) beside section 3's
    eager step (`eager`, after the compile): whether the eager step moved across the compile (two moments)."""
    e = speedup(eager, plain)  # the eager step's speed before the compile over after it
    ms = lambda t: f"{1e3 * t.median_s:.1f} ms ({1e3 * t.lo_s:.1f}–{1e3 * t.hi_s:.1f})"  # noqa: E731  not 110 ms (110 ms–110 ms)
    return (f"the eager step read {ms(plain)} in section 2, before any compile, and {ms(eager)} here, after it: "
            + ("not told apart (two moments, under 2.5×; their quartile ranges overlap)" if e.within_noise else f"{eager.median_s / plain.median_s:.2f}× its earlier time, two moments: "
                                               f"{verdicts.moments_words(e.lo, e.hi, short=True)}; what moved it is not "
                                               "measured"))


def turns_apart(then: Timing, now: Timing) -> str:
    """The plain compiled step in section 3's turns (`then`) and in these (`now`): whether the two
    sets of turns differ beyond their spreads (only timings of the same turns are compared)."""
    apart = speedup(then, now, "compiled, plain GPT: here vs section 3")
    return (f"the plain compiled step took {fmt_time(then.median_s)} in section 3's turns and {fmt_time(now.median_s)} "
            f"in these (here at {apart.value:.2f}× section 3's speed, {now.median_s / then.median_s:.2f}× its time; "
            f"{apart.lo:.2f}–{apart.hi:.2f}× from their spreads), two moments: "
            f"{verdicts.moments_words(apart.lo, apart.hi, short=True)}; the verdicts above use only these turns either way")


def eager_readings(readings: Mapping[str, Timing | None]) -> str:
    """The plain eager step's readings in this notebook's sets of turns (where: Timing), one line, with the
    fastest-to-slowest ratio read by the rule for two moments ('' with fewer than two)."""
    got = {where: t for where, t in readings.items() if t is not None}
    if len(got) < 2:
        return ""
    fast, slow = min(got.values(), key=lambda t: t.median_s), max(got.values(), key=lambda t: t.median_s)
    r = slow.median_s / fast.median_s
    return ("the plain eager step in this notebook's sets of turns: "
            + ", ".join(f"{where} {fmt_time(t.median_s)}" for where, t in got.items())
            + f": {r:.2f}× from the fastest to the slowest, two moments each: "
            + verdicts.moments_words(r, r, short=True))


def no_break_timing(compiles: bool) -> str:
    """Where the profile does not time the compiled monitored GPTs: why, and the reference's rows."""
    if not compiles:
        return "This profile does not compile: the break above comes from Dynamo's tracing alone."
    return ("This profile compiles the GPT above but not the monitored ones (three more compilations would pass its "
            "time budget): the break above comes from Dynamo's tracing alone.\n"
            + report.reference_text("10_compile_and_profile", prefixes=("compiled, .item()", "compiled, tensor")))


def tlparse_note(logs: Sequence[Path], tlparse: str | None, done: subprocess.CompletedProcess | None,
                 out: Path) -> str:
    """What became of the tlparse report: none (no logs, or tlparse missing: how to install and run
    it), where it is, or why tlparse could not read the log (`done`: its run)."""
    if not logs:
        return "No compile logs in this run (nothing was compiled): no tlparse report."
    if tlparse is None or done is None:
        return f"tlparse is not installed (pip install tlparse); then: tlparse {logs[-1]} -o report --no-browser"
    if done.returncode == 0:
        return f"tlparse report: {out / 'index.html'} ({len(list(out.rglob('*.html')))} pages, from {logs[-1].name})"
    return (f"tlparse could not read {logs[-1]} (exit {done.returncode}): "
            f"{(done.stderr.strip().splitlines() or [''])[0]}")
