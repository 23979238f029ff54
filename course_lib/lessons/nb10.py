"""Notebook 10 (torch.compile and the profiler): the exercise checks, and the words around its
measurements (each function returns the text a cell prints); section 4's, the roofline's, are
:mod:`course_lib.lessons.nb10_roofline`, the reference GPU's readings
:mod:`course_lib.lessons.nb10_reference`, 08's beside 10's :mod:`course_lib.lessons.nb10_beside08`, the timed
sections' summaries :mod:`course_lib.lessons.nb10_short` and the closing answer :mod:`course_lib.lessons.nb10_answer`,
all re-exported here."""

from __future__ import annotations

import subprocess
import warnings
from collections import Counter
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

import torch
from torch import nn

from course_lib import check, oom, published, report, verdicts
from course_lib.bench import Ratio, Timing, break_even, name_width, speedup
from course_lib.lessons.nb10_answer import COMPILING, FIX, _listed, answer, outside_model  # noqa: F401
from course_lib.lessons.nb10_account import account_in_08  # noqa: F401
from course_lib.lessons.nb10_beside08 import NOT_IN_08, beside_08, same_as_08  # noqa: F401
from course_lib.lessons.nb10_reference import (REGIONS, bound, own_gpt, reference_compile,  # noqa: F401
                                                reference_fix,
                                                reference_gpt, reference_kinds, reference_sync, regime_label,
                                                stale_fix_rows)
from course_lib.lessons.nb10_roofline import (ROWS, above_roof, attention_alone, attention_per_layer, cache_roof_note,  # noqa: F401
                                              gelu_compute_set, gelu_placed, gelu_side, kind_table, no_roofline, op_notes, op_table, placement, reference_ridge,
                                              step_readings,
                                              roof_short, roof_verdict, roofs_elsewhere, roofs_note)
from course_lib.lessons.nb10_short import (break_short, compile_again, compile_short, eager_readings, faults_words,  # noqa: F401
                                            ELSEWHERE, aside, in_short, kept, probe_clause, sync_short,
                                            unconfirmed, unsteady)
from course_lib.models import GPT, GPTConfig
from course_lib.profiling import StepSyncs, SyncCounter, dynamo_log
from course_lib.roofline import count_ops
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


@check.exercise()
def check_no_graph_break(fixed: Callable[[], nn.Module], given: Callable[[], nn.Module]) -> None:
    """Exercise (graph breaks): the module `fixed()` builds must compute what `given()`'s does, with the same
    weights, on inputs inside its clipping range and past it, and Dynamo must capture its forward with no graph
    break (``torch._dynamo.explain``)."""
    torch.manual_seed(0)
    want = given()
    mine = fixed()
    mine.load_state_dict(want.state_dict())
    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, next(want.parameters()).shape[-1], generator=g)
    for scale in (0.01, 100.0):  # every output inside the range, then outputs well past it
        check.close(mine(scale * x), want(scale * x), what=f"output on inputs × {scale:g}, fixed vs given",
                    atol=1e-6, rtol=1e-6)
    torch._dynamo.reset()
    with dynamo_log(graph_breaks=False):  # Dynamo's own warnings, kept out of the way
        out = torch._dynamo.explain(mine)(100.0 * x)
    torch._dynamo.reset()
    if out.graph_break_count:
        raise AssertionError(f"{out.graph_break_count} graph break(s) left; the first: "
                             f"{out.break_reasons[0].reason.splitlines()[0]}")
    print("graph breaks in the fixed module's forward: 0 (torch._dynamo.explain) ✓")


# ---- the words around the measurements: each function returns the text a cell prints ----

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


def fit_batch(new_run: Callable[..., tuple], train_step: Callable[..., torch.Tensor], tokens: torch.Tensor, batch: int,
              held: int, autocast: bool, amp_dtype: torch.dtype) -> int:
    """The batch, `batch` or the largest half of it that fits (:func:`course_lib.oom.fit_batch`), at which this
    notebook's largest moment fits: `held` GPTs alive at once (`new_run`: the first with the written-out attention, the
    others with SDPA), each with its AdamW state after two steps, and one step's activations kept (as a CUDA
    graph pool keeps them) while another step runs. Its GPTs are freed before it returns."""
    dev = tokens.device

    def fits(b: int) -> None:
        xb, yb = tokens[:b, :-1], tokens[:b, 1:]
        runs = [new_run(sdpa=i > 0) for i in range(held)]
        for _ in range(2):  # the first step creates AdamW's state
            for run in runs:
                train_step(*run, xb, yb)
        with torch.autocast(dev.type, dtype=amp_dtype, enabled=autocast):
            kept = torch.nn.functional.cross_entropy(runs[0][0](xb).flatten(0, 1), yb.flatten())  # noqa: F841  its graph
        train_step(*runs[1], xb, yb)  # the first GPT's activations kept while another step runs

    found = oom.fit_batch(fits, batch, dev)
    oom.free()  # the probe's GPTs are gone: hand their cached memory back
    return found


def gpt_line(cfg: GPTConfig, batch: int) -> str:
    """The GPT's shape, the batch and the parameter count (the position embedding left out)."""
    return (f"GPT: {cfg.n_layer} layers, width {cfg.n_embd}, T = {cfg.block_size} | batch {batch} sequences "
            f"| {GPT(cfg).num_params():,} parameters (the position embedding left out)")


def trace_note(path: Path, steps: int) -> str:
    """Where the trace file of `steps` profiled steps is, its size, and how to open it."""
    return (f"trace of {steps} steps: {path} ({fmt_bytes(path.stat().st_size)})\n"
            "  open https://ui.perfetto.dev and drop the file in (it is read in your browser, not uploaded), "
            "or chrome://tracing in Chrome")


def profiled_total(plain: Mapping[str, float]) -> str:
    """The profiled step's length by its categories (`plain`, seconds each), and why it is not set beside
    section 3's timing of the same step."""
    return (f"the profiled steps: {fmt_time(sum(plain.values()))} each (the sum of each category's median over the "
            "profiled steps; the table above gives the mean). "
            "That holds the profiler's own cost, so only the shares are read here, not the length")


def regime(plain: Mapping[str, float], device_type: str) -> str:
    """The plain step's regime, from its categories' seconds (`plain`): on a GPU, launch-bound
    where the GPU waited for the CPU half the step or more, partly so from a fifth, else bound by
    its kernels; on a CPU, the ops' share against Python's (the reference run's shares: :func:`regime_elsewhere`)."""
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
    return (f"on this CPU the ops (compute + copies) ran {ops:.1%} of the profiled step and the time outside any op (Python, autograd's "
            f"bookkeeping, the profiler's own) {python:.1%}: "
            + ("the ops set its time" if ops >= 0.5 else "the time outside any op sets it"))


def regime_elsewhere(device_type: str) -> str:
    """Off a GPU, the reference run's profiled shares, its GPT named first (another model and size: a block of its
    own, for :func:`aside`); '' on a GPU, which measured its own."""
    if device_type == "cuda":
        return ""
    label = regime_label(report.reference("10_compile_and_profile")[1])
    named = f"{gpt}\n" if label and (gpt := reference_gpt(short=True)) else ""  # before the reference's first row
    return named + (f"{label}\n" if label else "") + published.elsewhere("10_compile_and_profile", ("plain step:",))


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


def sync_verdict(gain: Ratio | None, waits: int, device: str, device_type: str, also: Sequence[str] = (),
                 reads: float | None = None, keep: dict[str, list[str]] | None = None,
                 plain: Ratio | None = None) -> str:
    """This run's block first: what section 2 found in one line (:func:`sync_short`), then under 'details:' the
    verdict on keeping the logged values on the device, the lines `also` gives (the cell's other verdicts and
    notes), on a CPU why the reads cost little (none of it when the steps were not timed; `reads`: their share of
    the profiled step); the reference GPU's timings: :func:`sync_elsewhere`. `keep`: the
    details go there, for the appendix (:func:`in_short`). `plain`: the plain step against the one keeping its
    values, in the same turns: where clear, what the logging costs besides its reads, in short too."""
    lines = [gain.verdict(f"keeping the {waits} values per step on the device", on=device)] if gain is not None else []
    lines += also
    if gain is not None and device_type == "cpu":
        lines.append("(on a CPU, ops run as they are called, so a value is ready when it is read)")
    return in_short(sync_short(gain, waits, device_type, reads, plain), lines, keep, "section 2") if gain is not None else ""


def sync_elsewhere(device_type: str) -> str:
    """Off a GPU, what the reference GPU measured of the same two steps (:func:`reference_sync`), a block for
    :func:`aside`; '' on a GPU."""
    return "" if device_type == "cuda" else "\n".join(filter(None, reference_sync()))


def profiled_note(categories: Mapping[str, Mapping[str, float]], gain: Ratio | None, device_type: str,
                  plain: Timing | None = None) -> str:
    """What the profiled steps say beside the timed verdict (`gain`, None where the steps were not timed), in
    two lines: why their two times are not set side by side (two traces of a few steps, one after the other),
    and the time in the 'waiting' category, which holds the reads (and, where its bar is too thin, that no
    figure follows); where section 1's profiled plain step read shorter than the same step unprofiled in these
    turns (`plain`, below its quartiles), a line that says so."""
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
            + (": too thin to draw as a bar, so no figure is drawn" if thin else "")
            + ("; on a CPU a read costs only itself" if thin and device_type == "cpu" else "")
            + ".\n(the profiler counts here only each value's copy to Python; the timed turns count the whole step)"
            + _profiled_shorter(sum(categories.get("plain step", {}).values()), plain))


def _profiled_shorter(profiled_s: float, plain: Timing | None) -> str:
    """Where the profiled step (`profiled_s`, section 1's median) read shorter than the same step unprofiled (`plain`,
    section 2's turns) below its quartiles: the two ran differently, and which setting costs the time is not measured."""
    if plain is None or not profiled_s or profiled_s >= plain.lo_s:
        return ""
    return (f"\nsection 1's profiled step, {fmt_time(profiled_s)}, read shorter than the same step without the profiler "
            f"here ({fmt_time(plain.median_s)}, quartiles {fmt_time(plain.lo_s)}–{fmt_time(plain.hi_s)}), though the "
            "profiler adds its own cost: there the steps ran back to back on one GPT, here in turns beside two other "
            "GPTs; which of the two costs the time is not measured")


def first_call_line(mode: str, seconds: float, cold: bool, device: str) -> str:
    """The first compiled step's time, compilation included, and whether the caches were cold."""
    return (f"compile, mode={mode!r}: first step {seconds:.1f} s (one run), compilation included, "
            f"{'cold caches' if cold else 'caches warm from the first'} | {device}")


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
        steps, few, many = _cold_even(speed, first_call_s, eager, compiled)  # extra ÷ the seconds each step saves
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


def steps_to_pay(speed: Ratio | None, cold_s: float | None, eager: Timing | None, compiled: Timing | None) -> float | None:
    """The steps after which a cold compile (`cold_s`, its first step, less one `compiled` step) is paid back by
    the gain `speed` over `eager`, at the medians; None where there is no gain beyond the spread to pay it back."""
    if None in (speed, cold_s, eager, compiled) or not (speed.clear and speed.value > 1 and speed.lo > 1):
        return None
    return _cold_even(speed, cold_s, eager, compiled)[0]


def _cold_even(speed: Ratio, cold_s: float, eager: Timing, compiled: Timing) -> tuple[float, float, float]:
    """:func:`course_lib.bench.break_even` of a cold compile: its first step (`cold_s`) less one `compiled` step."""
    return break_even(cold_s - compiled.median_s, eager, speed)


def gpus_measured(device_type: str, reduce_overhead: bool) -> str:
    """What GPUs measured of torch.compile, under one heading: on a GPU, the published figures (CUDA graphs' where
    reduce-overhead ran); off it, the reference run's compiled steps in two lines (:func:`reference_compile`; its rows
    stand in the summary), then the published figures (CUDA graphs' other models only where the reference timed no
    reduce-overhead step; what the reference's CUDA graphs removed is in the answer's details)."""
    if device_type == "cuda":
        return "\nBeside section 3's timings, what GPUs measured:\n" + published.elsewhere(
            "10_compile_and_profile", (), COMPILE_FIGURES + (GRAPH_FIGURES if reduce_overhead else []))
    graphed = "compiled, reduce-overhead" in report.reference("10_compile_and_profile")[1]  # the reference timed them
    return ("\nWhat GPUs measured, not on this machine (mode='reduce-overhead', CUDA graphs, needs a GPU, so it is not "
            "timed here):\n" + "\n".join(filter(None, (reference_compile(), published.elsewhere(
                "10_compile_and_profile", (), COMPILE_FIGURES + ([] if graphed else GRAPH_FIGURES))))))


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
        return (f"with the .item(): Dynamo gave up on the GPT's forward, so its other {eager} ops (embeddings, final norm, "
                f"head) run eagerly; only the {n_layer} blocks run compiled, one graph called once per block: {broken} op "
                f"calls, the blocks' own {own} of the plain GPT's {plain} and the monitoring's {broken - own}\n"
                f"with the tensor: one graph of all {whole} op calls, the monitoring's included")
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
                                               "measured (candidates: each set of turns' pace, the machine's or set by "
                                               "the steps that share its turns, four GPTs in section 3's; section 4 "
                                               "lists every reading of this step, with the pace probe's where they moved)"))


class ItemGPT(GPT):
    """The GPT with a forward of its own code (GPT.forward's computation), for section 3b's .item() copy: where Dynamo
    gives up on a function, it can skip that function's code for the rest of the process (until
    torch._dynamo.reset()), and the plain and the fixed GPTs compiled beside the copy run GPT.forward."""

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)  # (T,)
        h = self.drop(self.wte(idx) + self.wpe(pos))  # (B, T, C)
        for block in self.blocks:
            h = block(h)
        return self.lm_head(self.ln_f(h))  # (B, T, V)


def own_forward(model: GPT) -> GPT:
    """`model` (the same module, weights and optimizer) running :class:`ItemGPT`'s forward, a copy of its own code."""
    model.__class__ = ItemGPT
    return model


def break_ratios(control: Timing, item: Timing, tensor: Timing, eager: Timing) -> dict[str, Ratio]:
    """Section 3b's ratios, from its turns: the fix (the tensor GPT's speed over the .item() one's), its two controls
    (each monitored GPT's speed over the plain compiled one's: `item_cost` is the break's own cost) and the compile's
    gain once more (the plain GPT compiled over eager), named as the report records them."""
    return {"fix": speedup(item, tensor, "compiled, tensor vs .item() in the model"),
            "tensor_cost": speedup(control, tensor, f"{tensor.name} vs compiled, plain GPT"),
            "item_cost": speedup(control, item, f"{item.name} vs compiled, plain GPT"),
            "again": speedup(eager, control, "compiled vs eager, section 3b's turns")}


def break_details(timings: Sequence[Timing], r: Mapping[str, Ratio], first_step: Mapping[str, float],
                  compile_gain: Ratio | None, compiled_3: Timing | None, device: str,
                  cold_s: float | None = None) -> list[str]:
    """Section 3b's lines under 'details:': each verdict of :func:`break_ratios`' `r`, the two first steps of the
    monitored GPTs (compilation included, one pair), the compile's gain beside section 3's (`compile_gain`) and, from
    section 3's cold compile (`cold_s`, its first step), its break-even by these turns' times; the plain compiled step
    beside its reading there (`compiled_3`, None where not timed), and whether the turns (`timings`: the plain
    compiled GPT, the .item() one, the tensor one, the plain GPT eager) ran unsteadily."""
    control, item, tensor, eager = timings
    again = r["again"]
    pays = ""
    if cold_s is not None and again.clear and again.value > 1:  # section 3's break-even, from these turns' own times
        steps, few, many = _cold_even(again, cold_s, eager, control)
        pays = (f"  by these turns' paired gain and eager median, section 3's compilation pays for itself after about "
                f"{fmt_count(steps)} steps ({fmt_count(few)} to {fmt_count(many)}); section 3 reckoned it from its own turns'")
    return [r["fix"].verdict("removing the graph break (a tensor instead of .item())", on=device),
            compile_pair(first_step[item.name], first_step[tensor.name]),  # compilation included: one pair
            *(r[key].verdict(f"the step monitoring with {what}, its speed over the plain compiled GPT's", on=device)
              for key, what in (("tensor_cost", "a tensor"), ("item_cost", ".item()"))),
            r["again"].verdict("compiling (default), again in these turns", on=device),
            compile_again(r["again"], compile_gain, r["item_cost"]),  # beside section 3's gain; what the break took back
            pays,
            turns_apart(compiled_3, control) if compiled_3 is not None else "",  # the same GPT in section 3's turns
            unsteady(timings)]  # a set whose medians moved more than its pairs


def turns_apart(then: Timing, now: Timing) -> str:
    """The plain compiled step in section 3's turns (`then`) and in these (`now`), read by the rule for two moments
    (only timings of the same turns are compared)."""
    apart = speedup(then, now, "compiled, plain GPT: here vs section 3")
    return (f"the plain compiled step: {fmt_time(then.median_s)} in section 3's turns, {fmt_time(now.median_s)} in "
            f"these ({now.median_s / then.median_s:.2f}× its time), two moments: "
            f"{verdicts.moments_words(apart.lo, apart.hi, short=True)}")


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
