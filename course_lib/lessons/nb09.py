"""Notebook 09 (memory): its largest moment, tried at a batch; the estimate held against what is live at the peak;
the exercise checks; the words around its measurements (each function returns the text a cell prints)."""

from __future__ import annotations

import mmap
import statistics
from typing import Callable, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from course_lib import bench, check, memory, oom, profiles, published, report, verdicts
from course_lib.bench import Ratio, Timing
from course_lib.device import label, pick
from course_lib.lessons import nb08
from course_lib.lessons.nb09_answer import answer, at_peak_report  # noqa: F401  re-exported
from course_lib.lessons.nb09_beside08 import (PACED, UNPACED, WHOLE_STEP, as_in_08, part_share,  # noqa: F401
                                              row_of_08, step_in_08, whole_and_part)  # re-exported: the appendix's
from course_lib.memory import MemoryEstimate, activation_bytes
from course_lib.models import GPT, GPTConfig
from course_lib.units import fmt_bytes, fmt_time

# Each term of memory.MemoryEstimate and the profiler's category that holds those bytes
# (course_lib.timeline names them as torch.profiler does)
TERM_CATEGORY = {"parameters": "parameter", "gradients": "gradient", "optimizer state": "optimizer state",
                 "activations": "activation"}


def largest_moment(cfg: GPTConfig, x: torch.Tensor, y: torch.Tensor, amp: torch.dtype | None,
                   scaler: torch.amp.GradScaler) -> None:
    """Notebook 09's largest moment at the batch of `x` (B, T) and targets `y`: two GPTs of `cfg`,
    each with its AdamW state after one step, held at once (section 2's GPT stays while sections 6
    and 7 train new ones), and one step's activations; `amp`: autocast's dtype, None for float32.
    Throwaway steps, which also make the kernels' workspaces and the GradScaler's scale."""
    held = []
    for _ in range(2):
        model = GPT(cfg).to(x.device)
        opt = torch.optim.AdamW(model.parameters())
        with torch.autocast(x.device.type, dtype=amp, enabled=amp is not None):
            loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        held.append((model, opt))  # kept until both have stepped


def _join(words: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return " and ".join(filter(None, [", ".join(words[:-1]), words[-1]])) if words else ""


def estimate_at_peak(est: MemoryEstimate, at_peak: Mapping[str, int], phase: str | None,
                     close: float = 0.05) -> tuple[list[tuple[str, int | None, int]], str]:
    """The estimate's terms beside the bytes live in each category at the measured peak, and
    a sentence saying which terms match (within `close` of each other) and which stand in for
    which: a term counted but not live at the peak, bytes live there that no term counts.

    `at_peak`: category -> bytes at the peak (:meth:`course_lib.timeline.Timeline.at`);
    `phase`: the phase the peak falls in (None: none named). Rows: (term / category, estimated bytes or None for
    a category the estimate has no term for, live bytes), then the totals.
    """
    estimated = dict(zip(TERM_CATEGORY, (est.params, est.grads, est.optimizer, est.activations)))
    rows: list[tuple[str, int | None, int]] = [
        (f"{term} / {cat}" if term != cat else term, estimated[term], at_peak.get(cat, 0))
        for term, cat in TERM_CATEGORY.items()]
    left_out = {cat: n for cat, n in at_peak.items() if cat not in TERM_CATEGORY.values() and n}
    rows += [(f"(no term) / {cat}", None, n) for cat, n in left_out.items()]
    live_total = sum(at_peak.values())
    rows.append(("total", est.total, live_total))

    right: list[str] = []
    over: dict[str, tuple[int, int]] = {}  # term -> (estimated, live), estimated beyond what is live
    beyond: dict[str, int] = {}  # category -> bytes live beyond its term
    for term, cat in TERM_CATEGORY.items():
        guess, live = estimated[term], at_peak.get(cat, 0)
        if abs(guess - live) <= close * max(guess, live):
            right.append(term)
        elif guess > live:
            over[term] = (guess, live)
        else:
            beyond[cat] = live - guess
    parts = [f"the estimate's {_join(right)} match what is live (within {100 * close:g} %)" if right
             else "none of the estimate's terms matches what is live"]
    parts += [f"its {t} ({fmt_bytes(g)}) {'are' if t.endswith('s') else 'is'} not live at all" if not n
              else f"of its {t} ({fmt_bytes(g)}), {fmt_bytes(n)} {'are' if t.endswith('s') else 'is'} live"
              for t, (g, n) in over.items()]
    if left_out:
        one = len(left_out) == 1
        parts.append(f"{_join([f'{cat} ({fmt_bytes(n)})' for cat, n in left_out.items()])} "
                     f"{'is' if one else 'are'} live and {'has' if one else 'have'} no term in the estimate")
    parts += [f"{cat} {fmt_bytes(n)} beyond its term" for cat, n in beyond.items()]
    said = [f"At the peak{f', during {phase!r}' if phase else ''}: " + "; ".join(parts) + "."]
    missing = sum(g - n for g, n in over.values())  # estimated but not live
    extra = sum(left_out.values()) + sum(beyond.values())  # live but not estimated
    error = 100 * (est.total - live_total) / live_total if live_total else 0.0
    if missing and extra and abs(missing - extra) <= 0.5 * max(missing, extra):
        said.append(f"The {fmt_bytes(extra)} live but not estimated stand in for the {fmt_bytes(missing)} "
                    f"estimated but not live: the total's {error:+.1f} % comes from two errors "
                    "that nearly cancel, not from every term being right.")
    elif missing or extra:
        said.append(f"The total is off by {error:+.1f} %: {fmt_bytes(missing)} estimated but not live, "
                    f"{fmt_bytes(extra)} live but not estimated.")
    else:
        said.append(f"Every term is live at the peak as estimated: the total is off by {error:+.1f} %.")
    return rows, " ".join(said)


@check.exercise()
def check_adamw_state_bytes(fn: Callable[[nn.Module], int]) -> None:
    """Exercise (memory): `fn(model)` must give the bytes of AdamW's state once it has
    stepped: compared with a real (non-fused) AdamW's state tensors on 3 models."""
    models = [nn.Linear(100, 10), nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)),
              nn.Sequential(nn.Embedding(50, 16), nn.LayerNorm(16)).to(torch.bfloat16)]
    models[1][0].bias.requires_grad_(False)  # a frozen parameter has no gradient and no state
    for model in models:
        opt = torch.optim.AdamW((p for p in model.parameters() if p.requires_grad), foreach=False)
        for p in model.parameters():
            if p.requires_grad:
                p.grad = torch.zeros_like(p)
        opt.step()
        want = sum(t.nbytes for s in opt.state.values() for t in s.values() if torch.is_tensor(t))
        got = fn(model)
        if got != want:
            hint = " (each parameter also has a 4-byte float32 step count)" if got + 4 * len(opt.state) == want else ""
            raise AssertionError(f"AdamW state of {model}: got {got:,} bytes, the optimizer holds {want:,}{hint}")
    check.passed(f"AdamW state bytes on {len(models)} models (a frozen bias and bf16 weights included)")


@check.exercise()
def check_saved_bytes_linear_gelu(fn: Callable[[int, int, int, torch.dtype], int]) -> None:
    """Exercise (memory): `fn(batch, in_features, out_features, dtype)` must give the bytes
    autograd saves for backward in ``gelu(linear(x))``, x of shape (batch, in_features) and
    requiring grad, the layer in `dtype`; compared with what saved_tensors_hooks sees."""
    for batch, n_in, n_out, dtype in [(8, 16, 32, torch.float32), (64, 100, 10, torch.float32),
                                      (32, 64, 256, torch.bfloat16), (1, 5, 7, torch.float64)]:
        net = nn.Sequential(nn.Linear(n_in, n_out, dtype=dtype), nn.GELU())
        x = torch.randn(batch, n_in, dtype=dtype, requires_grad=True)
        want, got = activation_bytes(net, x), fn(batch, n_in, n_out, dtype)
        if got != want:
            raise AssertionError(f"gelu(linear(x)), x {batch}×{n_in}, {n_out} outputs, {dtype}: got "
                                 f"{got:,} bytes, autograd saves {want:,}")
    check.passed("bytes saved by gelu(linear(x)) on 4 shapes and dtypes")


# ---- the estimate of any GPT's training memory, measured where it is small (section 9's explorer) ----

PRECISIONS = ("fp32", "bf16 autocast", "fp16 autocast", "bf16 weights")
NEAR = 0.02  # a checkpointed step this close to its prediction (plain + forward) agrees with it: no residual named
_AUTOCAST = {"bf16 autocast": torch.bfloat16, "fp16 autocast": torch.float16}


def _gpt_step(model: nn.Module, idx: torch.Tensor, opt: torch.optim.Optimizer,
              amp: torch.dtype | None, tracker: memory.PhaseTracker, scaler: torch.amp.GradScaler) -> None:
    with tracker.phase("forward"), torch.autocast(idx.device.type, dtype=amp, enabled=amp is not None):
        loss = nn.functional.cross_entropy(model(idx).flatten(0, 1).float(), idx.flatten())
    with tracker.phase("backward"):
        scaler.scale(loss).backward()  # fp16: the loss × the scale; otherwise the loss itself
        del loss
    with tracker.phase("optimizer"):
        scaler.step(opt)  # fp16: unscales, skips the step if a gradient overflowed; otherwise opt.step()
        scaler.update()
        opt.zero_grad(set_to_none=True)


def estimate_table(cfg: object, batch: int, precision: str = "fp32", optimizer: str = "adamw",
            device: torch.device | str | None = None, measure_up_to: int = 0) -> str:
    """The training-memory estimate of a GPT shaped `cfg` (a ``models.GPTConfig``) at `batch`
    sequences, as a table; beside it the measured peak of two real steps when the estimate
    is at most `measure_up_to` bytes. The estimate uses fake tensors (nothing allocated),
    so any size can be asked for. `precision`: 'fp32', 'bf16 autocast' or 'fp16 autocast' (fp32
    weights; fp16 trains with a GradScaler, whose two 4-byte tensors are left out of the estimate)
    or 'bf16 weights' (the whole model and its optimizer state in bf16)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    if precision not in PRECISIONS:
        raise ValueError(f"Unknown precision {precision!r}; choose one of {PRECISIONS}.")
    device = pick(device, limit=False)
    amp = _AUTOCAST.get(precision)
    dtype = torch.bfloat16 if precision == "bf16 weights" else torch.float32
    shape = (batch, cfg.block_size)  # type: ignore[attr-defined]

    def build() -> tuple[nn.Module, torch.Tensor]:
        """Made in place (device and default dtype), since fake tensors cannot be converted."""
        default = torch.get_default_dtype()
        torch.set_default_dtype(dtype)
        try:
            with torch.device(device):
                model = GPT(cfg)  # type: ignore[arg-type]
        finally:
            torch.set_default_dtype(default)
        return model, torch.randint(0, cfg.vocab_size, shape, device=device)  # type: ignore[attr-defined]

    def loss(logits: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(logits.flatten(0, 1).float(), torch.zeros(
            logits.shape[0] * logits.shape[1], dtype=torch.long, device=logits.device))

    with FakeTensorMode():
        model, idx = build()
        est = memory.estimate_training_memory(model, idx, optimizer, amp, loss=loss)
        n_params = sum(p.numel() for p in model.parameters())
    lines = [f"GPT, {n_params / 1e6:,.1f} M parameters, batch {batch} × {shape[1]} tokens, "
             f"{precision}, {optimizer}, on {label(device)}", str(est)]
    if est.total > measure_up_to:
        lines.append(f"measured: not run (the estimate is over {fmt_bytes(measure_up_to)}, "
                     "this notebook's limit for measuring here)")
        return "\n".join(lines)
    model, idx = build()
    opt = {"sgd": lambda ps: torch.optim.SGD(ps, lr=1e-3),
           "sgd_momentum": lambda ps: torch.optim.SGD(ps, lr=1e-3, momentum=0.9),
           "adam": lambda ps: torch.optim.Adam(ps, lr=1e-3),
           "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-3)}[optimizer](model.parameters())
    scaler = torch.amp.GradScaler(device.type, enabled=amp == torch.float16)
    with memory.PhaseTracker(device) as tracker:
        for _ in range(2):  # the first step creates the optimizer state
            _gpt_step(model, idx, opt, amp, tracker, scaler)
    base = est.params  # the model was live before the tracker started
    peak = base + max(p.peak for p in tracker.phases)
    lines.append(f"{'measured peak (2 steps)':<34} {fmt_bytes(peak):>11}   "
                 f"estimate {100 * (est.total - peak) / peak:+.0f} %")
    del model, idx, opt, scaler
    oom.free()
    return "\n".join(lines)


# ---- the words around the measurements: each function returns the text a cell prints ----

FRAG_FIGURES = ["torchtune_expandable_segments_a100_qlora", "cp2k_libtorch_expandable_segments_a40"]  # published


def autocast_line(amp: torch.dtype | None, scaler: bool) -> str:
    """The step's autocast dtype (or 'off (float32)') and whether a GradScaler runs."""
    return f"autocast: {str(amp).removeprefix('torch.') if amp is not None else 'off (float32)'} | GradScaler: {scaler}"


def cpu_note(section: str) -> str:
    """What a section that needs a CUDA GPU says on a CPU, and what a GPU measured there: the
    reference run's rows, or published figures. `section`: 'allocator', 'settings' or 'snapshot'."""
    if section == "allocator":
        return ("On a CPU, PyTorch keeps no cache of its own: a freed tensor goes back to the C library's "
                "malloc, so there is no 'reserved' counter; this section needs a CUDA GPU (section 6 times what "
                "malloc keeping freed memory, or handing it back, does to a CPU step).\n"
                + report.reference_text("09_memory", prefixes=("allocate",)))
    if section == "settings":
        return ("empty_cache and expandable segments act on the CUDA caching allocator: they need a CUDA GPU. "
                "As of torch 2.9.1 only PYTORCH_CUDA_ALLOC_CONF turned expandable segments on "
                f"(pytorch/pytorch#183387); on a GPU this cell asks torch {torch.__version__} which name it reads.\n"
                + published.elsewhere("09_memory", ("empty_cache", "fragmentation"), FRAG_FIGURES))
    if section == "snapshot":
        return ("Allocator snapshots record CUDA memory: they need a CUDA GPU; the profiler's timeline above is "
                "the CPU's equivalent.\n" + report.reference_text("09_memory", prefixes=("snapshot",)))
    raise ValueError(f"Unknown section {section!r}: 'allocator', 'settings' or 'snapshot'.")


def malloc_line(back: Timing, kept: Timing, trim_s: Sequence[float] = ()) -> str:
    """The page faults per step of the same step with freed memory handed back first and kept (each Timing's
    median per call over its turns), as pages and the memory they map afresh; with `trim_s`, malloc_trim's own
    seconds a call (its median), which `back`'s times leave out (reader GK: the trim is not the faults)."""
    if back.faults is None or kept.faults is None:
        return "page faults: this system does not count them"
    return ("page faults per step (pages mapped in at their first touch; the turns' median): "
            + "; ".join(f"{t.name}: {t.faults:,.0f} ({fmt_bytes(t.faults * mmap.PAGESIZE)} mapped afresh)"
                        for t in (back, kept))
            + (f"\nmalloc_trim(0) itself took {fmt_time(statistics.median(trim_s))} a call (the median), taken out of "
               "each turn's time above: what is left is the step" if trim_s else ""))


def malloc_note(device_type: str) -> str:
    """Why the malloc comparison did not run here: a GPU's step (its tensors come from the caching allocator), or a
    C library other than glibc (no ``malloc_trim``)."""
    if device_type != "cpu":
        return ("This comparison times a CPU step's host memory: a GPU step takes its tensors from the caching "
                "allocator, which section 1 timed.")
    return ("malloc_trim and mallopt are glibc's (Linux): this system's C library is another (macOS, Windows), with "
            "its own policy, and the cell measures nothing here.")


def counter_table(rows: Sequence[tuple[str, int, int]]) -> str:
    """The allocator's two counters after each action: (what, allocated, reserved) bytes."""
    return "\n".join(f"{what:<24} allocated {fmt_bytes(allocated):>10}   reserved {fmt_bytes(reserved):>10}"
                     for what, allocated, reserved in rows)


def phase_table(rows: Sequence[tuple[str, int, int, int]], device: str) -> str:
    """Bytes live at each phase's start, its peak and its end: rows of (phase, start, peak, end)."""
    return "\n".join([f"{'phase':<12} {'start':>10} {'peak':>10} {'end':>10}   ({device})"]
                     + [f"{name:<12} {fmt_bytes(start):>10} {fmt_bytes(peak):>10} {fmt_bytes(end):>10}"
                        for name, start, peak, end in rows])


def terms_table(measured: Mapping[str, int], peak: int, where: str) -> str:
    """Each term of the step's memory read from the phases, and the step's peak with its phase."""
    return "\n".join([f"{term:<34} {fmt_bytes(nbytes):>11}" for term, nbytes in measured.items()]
                     + [f"peak of the step: {fmt_bytes(peak)}, during '{where}'"])


def estimate_vs_measured(est: MemoryEstimate, measured: Mapping[str, int], peak: int) -> str:
    """The estimate's terms beside the measured ones (in `measured`'s order, the estimate's rows'
    order), then the estimate's total beside the measured peak, each with its error."""
    names = [*(term for term, _ in est.rows()[:-1]), "total vs the measured peak"]
    return "\n".join([f"{'term':<34} {'estimate':>11} {'measured':>11} {'error':>8}"]
                     + [f"{term:<34} {fmt_bytes(guess):>11} {fmt_bytes(got):>11} {100 * (guess - got) / got:+7.2f} %"
                        for term, guess, got in zip(names, [n for _, n in est.rows()], [*measured.values(), peak])])


def peak_error_line(error_pct: float, where: str, within: float = 15.0) -> str:
    """The estimate's total taken as the peak: its error, whether within ±`within` %, and where the peak is."""
    return (f"The total, taken as the peak, is off by {error_pct:+.1f} % "
            f"({'within' if abs(error_pct) <= within else 'outside'} ±{within:g} %); the measured peak is during "
            f"'{where}' (section 7: which terms are live at that moment).")


def batch_guesses(found: int, from_estimate: int, per_seq: float, from_line: int, slope: float,
                  measured_at: tuple[int, int]) -> str:
    """The largest batch found by trying beside the two predictions, each with its error and the
    bytes per sequence it assumes; `measured_at`: the two batches the straight line goes through."""
    rows = [("from the estimate's activations", from_estimate, per_seq),
            (f"from measured steps at batch {measured_at[0]} and {measured_at[1]}", from_line, slope)]
    return "\n".join([f"{'found by trying':<41} {found}"]
                     + [f"{how:<41} {guess} ({100 * (guess - found) / found:+.0f} %; {fmt_bytes(per)} per sequence)"
                        for how, guess, per in rows])


def beyond_saved_note(beyond_saved: float, from_estimate: int, found: int) -> str:
    """What a step adds per sequence beyond the saved activations the estimate counts, and so
    whether the estimate's batch is above the one found by trying."""
    if beyond_saved <= 0:
        return "The measured steps add no more per sequence than the saved activations the estimate counts."
    return (f"A step adds {fmt_bytes(beyond_saved)} per sequence more than the saved activations the estimate counts: "
            "what the step allocates besides them, such as the buffers backward makes on its way (section 7 looks for "
            f"them at the peak, where the profiler names them 'autograd detail'), which the estimate has no term for; so the estimate's {from_estimate} is "
            f"{'above' if from_estimate > found else 'not above'} the {found} found by trying.")


def checkpoint_rows(times: Sequence[Timing], peaks: Mapping[str, int]) -> str:
    """Each variant's peak added by one forward + backward (where measured; :func:`memory.peak_memory`, over
    the memory held before it) and time with its quartiles and runs."""
    rows = []
    for t in times:
        peak = f"peak added {fmt_bytes(peaks[t.name]):>10}" if t.name in peaks else " " * 21
        rows.append(f"{t.name:<26} {peak} | {1e3 * t.median_s:6.1f} ms (quartiles {1e3 * t.lo_s:.1f}–"
                    f"{1e3 * t.hi_s:.1f}), {t.runs} runs")
    return "\n".join(rows)


def _residual_verdict(plain: Timing, checkpointed: Timing, forward: Timing, predicted: float) -> str:
    """The checkpointed step against a plain step plus the blocks' forward, turn by turn (the three timed in the
    same turns): the residual's median and interval, and whether it is a cost beyond recomputing the forward."""
    res = [c - p - f for c, p, f in zip(checkpointed.samples, plain.samples, forward.samples)]  # seconds, per turn
    med, lo, hi, cov = verdicts.median_interval(res)
    said = (f"{1e3 * med:+.1f} ms a step ({1e3 * lo:+.1f} to {1e3 * hi:+.1f} ms: median of {len(res)} paired turns' "
            f"residuals, not the medians' difference above; {cov:.0%} interval)")
    share = f"{abs(med) / predicted:.1%} of the prediction ({abs(lo) / predicted:.1%}–{abs(hi) / predicted:.1%})"
    small = (f": measurable, but small: {share}, all of it under {NEAR:.0%}" if max(abs(lo), abs(hi)) <= NEAR * predicted
             else f": measurable: {share}" if abs(med) <= NEAR * predicted else "")  # a residual to weigh, or not
    if lo > 0:
        return (f"verdict: checkpointing costs {said} beyond recomputing the forward" + (small or (
            ", not explained by this run. Candidates, not timed apart here: per block, the random-number state saved and "
            "restored, and a hook in Python for every tensor autograd saves")))
    if hi < 0:
        return f"verdict: checkpointing costs {-1e3 * med:.1f} ms less than a plain step plus the blocks' forward ({said}){small}"
    reach = max(abs(lo), abs(hi)) / predicted  # the interval's far end, as a share of the prediction
    if reach > 0.1:  # as a ratio it would reach past 1.1x: the course's 'no measurable difference' does not allow it
        return (f"verdict: too wide to tell whether checkpointing costs more than a plain step plus the recomputed "
                f"forward: the residual, {said}, holds 0 but reaches {reach:.1%} of the prediction, past the 10% that "
                "'no measurable difference' allows")
    return (f"verdict: the checkpointed step agrees with a plain step plus the recomputed forward: the residual, {said}, "
            f"holds 0, its ends within {reach:.1%} of the prediction")


def recompute_verdict(saving: float, cost: Ratio, plain: Timing, checkpointed: Timing, forward: Timing) -> str:
    """Checkpointing's memory saved (`saving`: a share of the plain step's peak) and time cost; then a
    plain step plus the blocks' forward once more (the prediction) beside the checkpointed step:
    beyond the prediction's quartiles, below them, or within them."""
    lo, hi = plain.lo_s + forward.lo_s, plain.hi_s + forward.hi_s  # over the quartiles of both
    lines = [f"Checkpointing every block: peak added {100 * abs(saving):.0f} % {'lower' if saving > 0 else 'higher'}; "
             f"{cost}",
             f"a plain step plus the blocks' forward: {1e3 * (plain.median_s + forward.median_s):.1f} ms "
             f"({1e3 * lo:.1f}–{1e3 * hi:.1f}); measured with checkpointing: {1e3 * checkpointed.median_s:.1f} ms "
             f"({1e3 * checkpointed.lo_s:.1f}–{1e3 * checkpointed.hi_s:.1f})"]
    predicted = plain.median_s + forward.median_s
    if bench._paired(plain, checkpointed) and bench._paired(plain, forward):  # timed in the same turns: a paired residual
        gap = checkpointed.median_s - predicted  # the medians' difference, which slow turns can move (readers GB, GC)
        if abs(gap) > 0.1 * predicted:
            lines[-1] += (f": the medians differ by {1e3 * gap:+.1f} ms, but a sum of two medians need not be the median "
                          "of the turns' sums; the paired residual below compares the three turn by turn")
        lines.append(_residual_verdict(plain, checkpointed, forward, predicted))
    elif abs(checkpointed.median_s - predicted) <= NEAR * predicted and not checkpointed.lo_s <= predicted <= checkpointed.hi_s:
        lines.append(f"verdict: the checkpointed step's median lies within {NEAR:.0%} of the prediction "
                     f"({1e3 * (checkpointed.median_s - predicted):+.1f} ms): the two agree; the prediction is a sum of two "
                     "medians, not a paired reading, and cannot resolve a gap that small")
    elif checkpointed.lo_s > hi:
        lines.append(f"verdict: checkpointing costs "
                     f"{1e3 * (checkpointed.median_s - plain.median_s - forward.median_s):.1f} ms beyond recomputing "
                     "the forward, not explained by this run. Candidates, not timed apart here: per block, the "
                     "random-number state saved and restored, and a hook in Python for every tensor autograd saves")
    elif checkpointed.hi_s < lo:
        lines.append(f"verdict: checkpointing costs {1e3 * (checkpointed.median_s - plain.median_s):.1f} ms here, "
                     f"less than the blocks' forward alone ({1e3 * forward.median_s:.1f} ms)")
    elif checkpointed.lo_s <= plain.median_s + forward.median_s <= checkpointed.hi_s:
        lines.append("verdict: the checkpointed step's quartiles hold what a plain step plus the recomputed forward "
                     "predicts (medians against quartiles, not paired turns)")
    else:
        lines.append(f"verdict: the prediction's range ({1e3 * lo:.1f}–{1e3 * hi:.1f} ms) overlaps the measured "
                     "quartiles: no difference these repeats can show, though its median lies outside them (medians "
                     "against quartiles, not paired turns)")
    return "\n".join(lines)


def recompute_elsewhere() -> str:
    """Off a GPU, the recorded reference run's checkpointing read by the same rule as this run's
    (:func:`recompute_verdict`): its plain step plus the blocks' forward against its checkpointed
    step, with what it leaves unexplained ('' without those rows)."""
    device, ref = report.reference("09_memory")
    names = ("forward + backward, no checkpointing", "forward + backward, checkpointed", "the blocks' forward alone")
    rows = [ref.get(n) for n in names]
    if not all(r and r.get("spread") for r in rows):
        return ""
    (plain, checked, forward) = rows
    lo, hi = plain["spread"][0] + forward["spread"][0], plain["spread"][1] + forward["spread"][1]
    predicted = plain["value"] + forward["value"]
    big = profiles.sizes("09_memory", "gpu", memory_gib=80)  # the gpu profile's large sizes, the reference's
    text = (f"The reference {device}, at the gpu profile's GPT ({big.n_layer} layers, width {big.n_embd}, T = {big.block}, "
            f"batch {big.batch}; {nb08.reference_gpts()[1:-1]}): a plain step plus "
            f"the blocks' forward {predicted:.1f} ms ({lo:.1f}–{hi:.1f}), measured with checkpointing "
            f"{checked['value']:.1f} ms ({checked['spread'][0]:.1f}–{checked['spread'][1]:.1f})")
    if checked["spread"][0] > hi:
        return text + (f": {checked['value'] - predicted:.1f} ms beyond recomputing the forward, a difference of medians "
                       "(the reference timed the three apart: no paired residual, no interval); what makes it up the "
                       "reference did not time apart (checkpoint's own work per block is one candidate, not measured)")
    if checked["spread"][1] < lo:
        return text + ": less than the prediction there"
    return text + ": the recomputed forward there too"


def set_to_none_note(start: Mapping[bool, int], peak: Mapping[bool, int]) -> str:
    """Bytes live at the start of step 2 and step 2's peak, with set_to_none True and False."""
    return (f"live at the start of step 2: set_to_none=True {fmt_bytes(start[True])}, False {fmt_bytes(start[False])} "
            f"(+{fmt_bytes(start[False] - start[True])})\npeak of step 2: {fmt_bytes(peak[True])} vs "
            f"{fmt_bytes(peak[False])}")


def empty_cache_note(before: tuple[int, int], after: tuple[int, int], scratch: int | None) -> str:
    """Allocated and reserved bytes before and after empty_cache() (`scratch`: the bytes of the
    temporary freed first, None where the GPU had too little free for it), and what stays reserved."""
    made = f"a {fmt_bytes(scratch)} temporary freed, then " if scratch is not None else ""
    lines = [f"{made}empty_cache(): allocated {fmt_bytes(before[0])} → {fmt_bytes(after[0])}, reserved "
             f"{fmt_bytes(before[1])} → {fmt_bytes(after[1])}"]
    if scratch is None:
        lines.append("This GPU has too little memory free for the temporary: nothing was cached to hand back.")
    lines.append(f"still reserved beyond what is allocated: {fmt_bytes(after[1] - after[0])}, in segments that also "
                 "hold a live tensor: empty_cache releases only segments with nothing live in them")
    return "\n".join(lines)


def alloc_conf_line(reads: Mapping[str, bool]) -> str:
    """Which of the two variable names (name -> whether it alone turned expandable segments on) this torch reads."""
    read, ignored = [n for n, on in reads.items() if on], [n for n, on in reads.items() if not on]
    if len(read) == 2:
        return f"torch {torch.__version__} reads both names: either one turns expandable segments on"
    if read:
        return f"torch {torch.__version__} reads only {read[0]} for CUDA: {ignored[0]} alone left the segments fixed"
    return (f"torch {torch.__version__}: neither name turned expandable segments on here (this platform or "
            "driver may lack them)")


def frag_line(conf: str, result: Mapping[str, int]) -> str:
    """One run of the fragmentation script: its peak allocated and reserved bytes and their ratio."""
    return (f"{conf or 'default':<26} peak allocated {fmt_bytes(result['peak_allocated']):>10}  "
            f"peak reserved {fmt_bytes(result['peak_reserved']):>10}  "
            f"({result['peak_reserved'] / result['peak_allocated']:.2f}×)")


def expandable_note(frag: Mapping[str, Mapping]) -> str:
    """Whether expandable segments reserved less than the default in the two runs (`frag`: 'default'
    and 'expandable_segments:True' -> the script's result), and whether they were used at all."""
    d, e = (frag[k]["peak_reserved"] for k in ("default", "expandable_segments:True"))
    lines = [] if frag["expandable_segments:True"]["expandable"] else [  # e.g. Windows: PyTorch warns and ignores it
        "Expandable segments were asked for but not used here (this platform or driver lacks them): "
        "both runs used the default allocator."]
    lines.append(f"expandable segments {'reserve less' if e < d else 'do not reserve less'} here: "
                 f"{fmt_bytes(e)} vs {fmt_bytes(d)}")
    return "\n".join(lines)


def profiler_cost(profiled_ms: float, plain: Timing) -> str:
    """Step 2's forward + backward under the profiler beside section 5's plain step, timed at another
    moment, read by the course's rule for two moments (:func:`verdicts.moments_words`): within section
    5's quartiles, beyond them but under :data:`verdicts.APART` (this pair cannot tell), or past it."""
    plain_ms, lo_ms, hi_ms = 1e3 * plain.median_s, 1e3 * plain.lo_s, 1e3 * plain.hi_s
    head = (f"step 2's forward + backward: {profiled_ms:.0f} ms under the profiler (the plot's clock) vs "
            f"{plain_ms:.0f} ms (quartiles {lo_ms:.0f}–{hi_ms:.0f}) without it in section 5, measured at "
            "another moment, not in turns: ")
    lo, hi = profiled_ms / hi_ms, profiled_ms / lo_ms  # the profiled time over the ends of section 5's quartiles
    if lo <= 1 <= hi:
        return head + (f"within section 5's quartiles: two moments cannot show a cost under {verdicts.APART:g}×, so this "
                       "pair does not measure what this profiler (every allocation, with shapes and stacks) costs; notebook "
                       "10 times a step with the profiler recording and counting every op in turns with a plain one, "
                       "where a cost shows")
    said = (f"{profiled_ms / plain_ms:.2f}× as long ({lo:.2f}–{hi:.2f}× over section 5's quartiles), two moments: "
            f"{verdicts.moments_words(lo, hi, short=True)}")
    if lo > verdicts.APART:
        return head + (f"{said}; what differs between the two is the profiler recording every allocation with its "
                       "shapes and Python stack")
    return head + (f"{said}, so this pair does not measure the profiler's cost (notebook 10, section 4, times a step "
                   "with the profiler recording and counting every op in turns with a plain one)")
