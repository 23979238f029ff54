"""Notebook 08 (Transformer training): why a paired ratio and its medians' ratio differ; utilisation
against MFU; the words around each measurement, returned as text for the cells to print; the checks
of its claims and exercises."""

from __future__ import annotations

import inspect
import math
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from course_lib import check, datasheet, profiles, published, report, verdicts
from course_lib.bench import Ratio, Timing, rate_ratio, speedup
from course_lib.lessons.nb08_attention import attention_sum, kernel_verdict  # noqa: F401  re-exported
from course_lib.lessons.nb08_compile import (UNCONFIRMED, before_after_compile, break_even_before,  # noqa: F401
                                           break_even_text, compile_caveat, pays_clause, unconfirmed, NOT_ESTABLISHED)
from course_lib.lessons.nb08_mfu import (AGREE, BUSY_NEGLIGIBLE, answer_with_long_run, busy_short, run_order, busy_line, busy_parts,  # noqa: F401
                                        busy_ratio, busy_verdict, fastest_seen, mfu_answer, mfu_span, mfu_text,
                                        paired_mfu_text, usable)
from course_lib.models import GPT, GPTConfig
from course_lib.roofline import counted_flops
from course_lib.units import fmt_bytes, fmt_count, fmt_rate
from course_lib.verdicts import ELSEWHERE, aside, in_short, kept  # noqa: F401  re-exported: a section's findings,
# its verdicts kept, another machine's figures set apart

if TYPE_CHECKING:
    from course_lib.textdata import Corpus
    from course_lib.train import History, TrainConfig


def paired_vs_medians(r: Ratio, apart: float = 1.05) -> str:
    """One sentence on why `r`, the median of per-turn ratios of two timings taken in turns, and
    the ratio of the two timings' medians differ, when they are more than `apart` times apart
    (else '', and '' for timings not taken in turns, which have no medians' ratio)."""
    if not r.rounds or r.medians is None or abs(math.log(r.medians / r.value)) <= math.log(apart):
        return ""
    opposite = (r.value - 1) * (r.medians - 1) < 0  # one above 1, the other below
    drift = (f" (here its median change from one turn to the next was {r.drift:.0%}; single turns can move more)"
             if r.drift is not None else "")
    return (f"{r.name}: the paired ratio, {r.value:.2f}×, is the comparison: each turn ran the two back to back, "
            f"so the machine's pace cancels in it. The medians' ratio, {r.medians:.2f}×, "
            f"{'points the other way' if opposite else 'differs'}: it divides medians taken from different turns, "
            f"so the change of pace between turns stays in it{drift}.")


@check.exercise()
def check_gpt_forward_flops_per_token(fn: Callable[[int, int, int, int], float]) -> None:
    """Exercise (GPT training): `fn(n_params, n_layer, block_size, n_embd)` must give the FLOPs
    per token of a GPT's forward pass over a full context (inference without a KV cache) to
    within 3 % of what FlopCounterMode counts in a forward pass of small GPTs (biases and
    LayerNorms are the difference)."""
    g = torch.Generator().manual_seed(0)  # the learner's random stream is left alone
    for layers, heads, width, t in [(2, 4, 64, 32), (3, 2, 128, 64), (1, 4, 64, 256)]:
        with torch.random.fork_rng():
            model = GPT(GPTConfig(vocab_size=128, block_size=t, n_layer=layers, n_head=heads,
                                  n_embd=width))
        idx = torch.randint(0, 128, (2, t), generator=g)
        with sdpa_kernel(SDPBackend.MATH), torch.no_grad():  # a kernel every PyTorch's counter counts
            counted = counted_flops(lambda: model(idx)) / idx.numel()
        got = fn(model.num_params(), layers, t, width)
        if not abs(got - counted) <= 0.03 * counted:
            hint = (" (that is forward + backward, training's count: the forward pass is a third of it)"
                    if abs(got - 3 * counted) <= 0.09 * counted else "")
            raise AssertionError(f"forward FLOPs per token, {layers} layers of width {width}, T={t}: got "
                                 f"{got:,.0f}, FlopCounterMode counts {counted:,.0f} (allowed: ±3 %){hint}")
    check.passed(f"forward FLOPs per token within 3 % of FlopCounterMode on 3 GPTs (last: {got:,.0f} vs {counted:,.0f})")


@check.exercise()
def check_accum_steps(fn: Callable[[int, int, int, int], int]) -> None:
    """Exercise (GPT training): `fn(target_tokens, micro_batch, block_size, world_size)` must
    give the fewest micro-batches per optimizer step that reach `target_tokens` per step."""
    cases = [(524_288, 16, 1024, 1), (524_288, 16, 1024, 8), (500_000, 12, 1024, 1),
             (4096, 16, 128, 1), (1000, 64, 128, 1), (524_288, 64, 1024, 16)]
    for target, micro, t, world in cases:
        want = -(-target // (micro * t * world))  # ceiling division
        got = fn(target, micro, t, world)
        if got != want:
            raise AssertionError(f"target {target:,} tokens, micro-batch {micro} × {t} tokens on "
                                 f"{world} GPU(s): got {got}, expected {want} micro-batches "
                                 f"({want * micro * t * world:,} tokens per step)")
    check.passed(f"accumulation steps on {len(cases)} cases (GPT-2's 524,288 tokens: 32 micro-batches of 16 × 1024 on 1 GPU)")


# ---- what the cells print: the words around the measurements, returned as text

NO_COMPILE = ("This profile does not compile: compiling costs seconds to minutes, depending on the model, "
              "the cores and the cache, more than this profile's budget. The cpu and gpu profiles measure it.")


def precision_lines(amp: str, amp_dtype: torch.dtype, fused: bool, device_label: str, device_type: str) -> str:
    """What the training step computes in: where autocast falls back (`amp` 'fp16' on a GPU without bf16
    tensor cores, 'off' without bf16 arithmetic) one sentence why, then autocast's format, whether a
    GradScaler runs and whether AdamW is fused."""
    lines = []
    if amp == "fp16":
        lines.append(f"{device_label} has no bf16 tensor cores: the training step runs float16 autocast with a "
                     "GradScaler.")
    elif amp == "off":
        lines.append(("bfloat16 runs here on slow generic paths, without bf16 instructions (notebooks 01 and 03 "
                      "time how slow)" if device_type == "cpu" else "No bfloat16 arithmetic here")
                     + ": the training step runs in float32.")
    lines.append(f"autocast: {amp_dtype if amp != 'off' else 'off'} | GradScaler: {amp == 'fp16'} | "
                 f"fused AdamW: {fused}")
    return "\n".join(lines)


def corpus_lines(corpus: Corpus, head: int = 300) -> str:
    """Where the corpus comes from, its two splits in tokens, and the first `head` bytes of its training text."""
    return "\n".join([corpus.describe(), f"train: {len(corpus.train):,} tokens | val: {len(corpus.val):,} tokens",
                      f"the first {head} bytes of the training text:", corpus.tokenizer.decode(corpus.train[:head])])


def windows_line(train_x: torch.Tensor, n_val: int, block: int) -> str:
    """The training windows (count, length, shape, dtype) and the validation windows scored."""
    return (f"train: {len(train_x):,} windows of {block} tokens, x {tuple(train_x.shape)} {train_x.dtype} | "
            f"validation: {n_val:,} windows ({n_val * block:,} tokens)")


def baseline_line(vocab_size: int, unigram: float) -> str:
    """The two losses a GPT must beat: uniform over the vocabulary, and the unigram baseline (also in bits per byte)."""
    return (f"uniform over {vocab_size} bytes: {math.log(vocab_size):.3f} nats/token | "
            f"unigram baseline: {unigram:.3f} nats/token ({unigram / math.log(2):.2f} bits per byte)")


def sources(*fns: Callable) -> str:
    """The source of each function under its name ('# Block.forward'), its def line(s) kept and its
    docstring left out."""
    out = []
    for f in fns:
        src = inspect.getsource(f)
        if f.__doc__:  # the def line(s), then the code after the docstring's closing quotes
            head, _, rest = src.partition('"""')
            src = head.rstrip() + rest.partition('"""')[2]
        out.append(f"# {f.__qualname__}\n{textwrap.dedent(src)}")
    return "\n".join(out)


def param_count(model: GPT) -> str:
    """N, the parameters without the position embedding, and the count with it."""
    return (f"{model.num_params():,} parameters without the position embedding "
            f"({model.num_params(non_embedding=False):,} in all)")


def flops_terms(six_n: int, attn_term: int, total: int) -> str:
    """The two terms of the training FLOPs per token, 6N and 12·L·T·C, their sum and attention's share of it."""
    return (f"6N = {six_n:,} + 12·L·T·C = {attn_term:,} -> {total:,} FLOPs per token "
            f"(attention's share: {attn_term / total:.0%})")


def steps_line(micro: int, accum: int, block: int, steps: int, loader_len: int) -> str:
    """Tokens per optimizer step, the passes over the training text the run takes, and, where a pass is not a
    whole number of steps and the run takes more than one, that its last step is short."""
    epochs = math.ceil(steps * accum / loader_len)
    line = (f"{accum} micro-batches of {micro} × {block} tokens per step: {micro * accum * block:,} tokens per step; "
            f"{steps} steps take {steps * accum / loader_len:.2f} passes over the training text")
    if loader_len % accum and epochs > 1:  # a step does not reach across two passes
        line += (f"\na pass has {loader_len} micro-batches, not a multiple of {accum}: its last step has "
                 f"{loader_len % accum}, so the run trains on a little fewer tokens than {steps} full steps")
    return line


def verdict_text(r: Ratio, what: str, on: str) -> str:
    """A paired ratio's verdict line, and below it why the ratio of the two medians differs, where it does
    (:func:`paired_vs_medians`)."""
    return "\n".join(filter(None, [r.verdict(what, on=on), paired_vs_medians(r)]))


def fastest_line(timings: Sequence[Timing], over_base: Mapping[str, float] | None = None, base: str = "") -> str:
    """The version with the highest median rate, and those its repeats do not tell it apart from; where a
    version timed in other turns has a paired speed-up over the same `base` in its own turns (`over_base`:
    name -> speed over `base`), the two ratios' quotient, said as an inference across the two sets of turns."""
    best = max(timings, key=lambda t: t.rate)
    over_base = over_base or {}

    def chained(t: Timing) -> str:  # the paired inference first, then what the two medians alone could tell
        b, o = over_base[best.name], over_base[t.name]
        first, second = (best.name, t.name) if b >= o else (t.name, best.name)  # the paired ratios may reverse the medians
        return (f"; the paired ratios over {base}, each in its own turns ({b:.2f}× and {o:.2f}×), put {first} ahead "
                f"of {second} by about {max(b, o) / min(b, o):.2f}× (an inference across two sets of turns, not a "
                "measurement" + ("; the medians alone put them the other way" if b < o else "") + ")")

    others = [t for t in timings if t is not best and not speedup(t, best).clear]
    paired = [t for t in others if speedup(t, best).apart and best.name in over_base and t.name in over_base]
    tied = [f"{t.name}, " + (f"timed in other turns, {speedup(t, best).value:.2f}× apart: under the "
                             f"{verdicts.APART:g}× two moments can differ by" if speedup(t, best).apart
                             else "by these repeats") for t in others if t not in paired]
    beaten = [t.name for t in timings if t.name.startswith("compiled") and t is not best
              and speedup(t, best).clear]
    return (f"fastest median of this section so far: {best.name}"
            + (f" (not told apart from {'; '.join(tied)})" if tied else "") + "".join(map(chained, paired))
            + (f". {', '.join(beaten)} ran slower than {best.name}, beyond the spread: compiling did not make up for "
               "the slower attention (two changes at once: the compiler and the attention)" if beaten else ""))


def versions_elsewhere() -> str:
    """Section 4's versions as the reference GPU timed them, on the gpu profile's GPT (another model than a
    cpu run's, named): a block apart, with the ratio of its SDPA to its written-out step; '' without them."""
    rows = report.reference_rows("08_transformer", ("eager,", "compiled,", "compiled vs eager"))
    if not rows:
        return ""
    big = profiles.sizes("08_transformer", "gpu", memory_gib=80)
    _, ref = report.reference("08_transformer")
    sdpa, written = ref.get("eager, SDPA"), ref.get("eager, written-out attention")
    ratio = ""
    if sdpa and written and sdpa.get("unit") == written.get("unit"):
        quartiles = ""
        if sdpa.get("spread") and written.get("spread"):  # the range the quartiles allow, the unfavourable way first
            (s_lo, s_hi), (w_lo, w_hi) = sdpa["spread"], written["spread"]
            quartiles = f"; {s_lo / w_hi:.2f}–{s_hi / w_lo:.2f}× from the quartiles"
        ratio = (f"\n  its eager SDPA over its eager written-out step: {sdpa['value'] / written['value']:.2f}× (the ratio "
                 f"of the medians{quartiles})")
    return (f"The same versions on the reference GPU, with the gpu profile's GPT ({big.n_layer} layers, width "
            f"{big.n_embd}, T = {big.block}, {big.micro * big.accum * big.block:,} tokens per step), another model than "
            "this run's:\n" + report.reference_text("08_transformer", ("eager,", "compiled,", "compiled vs eager"))
            + ratio + (f"\n  {two_h200()}" if two_h200() else "")  # beside the step rows (reader FY), and the MFU rows
            + "\n" + reference_gpts())  # (:func:`published_mfu`)


def two_h200(tail: str = "") -> str:
    """Where 08's reference is an H200's: two H200 machines ran its eager SDPA step 1.73× apart (the second session of
    results/nvidia-h200.test-gpu.md), said beside its step rows and (`tail`) its MFU rows; '' otherwise."""
    if "H200" not in (report.reference("08_transformer")[0] or ""):
        return ""
    return ("(two H200 machines ran the eager SDPA step of this record's code at 799.6 and 462.9 ktok/s, 1.73× apart, "
            f"cause not found{tail}; results/nvidia-h200.test-gpu.md)")


def reference_gpts() -> str:
    """One clause, said where a reference row of notebook 08, 09 or 10 is printed: the reference's GPT is another
    shape in each of the three (each names its own), so a reference step time does not carry to the next."""
    return "(the reference ran a different GPT in each of 08, 09 and 10, so its step times cannot be compared across them)"


def published_mfu(this_run: str) -> str:
    """The reference run's MFU and published MFU of GPT training on GPUs, each with its setup, apart
    from this run's (`this_run`: its model, context, precision and tokens per step): MFU divides
    out the FLOPs, not the setup."""
    big = profiles.sizes("08_transformer", "gpu", memory_gib=80)
    return (f"\nFor comparison, and not the same setup as this run ({this_run}): the reference run trained the gpu "
            f"profile's large GPT ({big.n_layer} layers, width {big.n_embd}, T = {big.block}, bf16, "
            f"{big.micro * big.accum * big.block:,} tokens per step; section 8), and the published runs trained models of "
            "125 M to 1 B parameters on 2,048-token sequences.\n"
            + published.elsewhere("08_transformer", ("MFU",), ["mosaic_mpt125m_a100_80gb_mfu",
                                                               "mosaic_mpt1b_h100_vs_a100_mfu"])
            + (f"\n{ref_peak}" if (ref_peak := reference_peak_text()) else "")
            + "\nWhy these MFUs are what they are is not measured here; notebook 10 profiles where a GPT step's time "
            "goes. Published MFUs divide by the datasheet's peak unless they say otherwise, so set them beside the "
            "reference's MFU against the datasheet, not against its measured peak.")


def reference_peak_text() -> str:
    """One line on the reference run's MFU rows: the measured peak they divided by, derived from its two
    recorded MFUs of one step (against its measured peak, against the datasheet's dense bf16), which 08's
    record does not hold; and that they are one of two H200s (results/nvidia-h200.test-gpu.md). '' where
    a row is missing."""
    ref_device, rows = report.reference("08_transformer")
    meas, sheet = rows.get("MFU vs measured matmul peak"), rows.get("MFU vs datasheet peak")
    spec = datasheet.lookup(report.reference_meta("08_transformer").get("device") or "")
    dense = datasheet.peak_tflops(spec, "bf16") if spec else None
    if not (meas and sheet and dense):
        return ""
    derived = dense * sheet["value"] / meas["value"]  # the same tokens/s over each peak: MFUs scale as 1/peak
    mfu_rows = (": the MFU row (fastest step, measured peak) read 24.0 % on the faster machine and 13.4 % on the slower, "
                "which this record comes from")
    two = f"\n{two_h200(mfu_rows)}" if two_h200() else ""
    _, rows10 = report.reference("10_compile_and_profile")
    peak10 = next((r for k, r in rows10.items() if k.startswith("peak: matmul") and "bfloat16" in k
                   and r.get("unit") == "TFLOP/s"), None)
    ten = (f". The reference's 10 measured {peak10['value']:.1f} TFLOP/s: they were recorded before the notebooks "
           "shared one stored peak"
           if peak10 and abs(peak10["value"] - derived) > 0.05 else "")
    return (f"(the reference's 08 record stores no peak; its two MFU rows imply it divided by {derived:.1f} TFLOP/s"
            f"{ten}.){two}")


def utilisation_elsewhere() -> str:
    """Whether the reference GPU run recorded the utilisation comparison, and a finer reading published elsewhere."""
    missing = ("" if report.reference_rows("08_transformer", ("utilisation",))
               else "\nNo reference GPU run has recorded this comparison yet.\n")
    return (missing + "\nA finer reading than GPU-Util, published elsewhere: SM utilisation, which the post reads "
            "as how well the GPU's parallel compute units were used (it gives no GPU-Util figure).\n"
            + published.elsewhere("08_transformer", ("utilisation",), ["meta_maiprof_sm_util_9pct_tensorcore_0"]))


def variant(compiled: bool, sdpa: bool) -> str:
    """The name section 4 gives the long run's version of the step: 'eager, SDPA', 'compiled, SDPA'..."""
    return f"{'compiled' if compiled else 'eager'}, {'SDPA' if sdpa or compiled else 'written-out attention'}"


def attention_setup(sdpa: bool) -> str:
    """The `setup` (:meth:`course_lib.report.Report.add`) of a row that times this GPT's step: '' with
    SDPA, the GPT's default and the reference runs' attention; 'written-out attention' otherwise
    (section 4 found it faster here), so that such a row neither shares a line with a reference row
    of the SDPA step nor passes for the SDPA step that notebooks 09 and 10 time."""
    return "" if sdpa else "written-out attention"


def long_attention(sdpa: bool, fit_compile: bool, steps: int | None = None, pays_after: float | None = None) -> str:
    """Which attention the long run uses, and why; where it runs eager and section 4 reckoned a break-even
    (`pays_after` steps) beyond the run's `steps`, that a compile would not pay for itself in it."""
    if fit_compile:
        return "the long run's attention: SDPA (the compiled long run, fit_compile, always uses it)"
    eager = "; eager: this profile's long run does not compile (its fit_compile is off)" + (
        ": section 4's compile showed no gain to pay for itself" if pays_after == float("inf") else
        f": its {steps:,} steps are fewer than the {fmt_count(pays_after)} after which section 4's compile pays for itself"
        if steps and pays_after and pays_after > steps else "")
    if sdpa:
        return ("the long run's attention: SDPA: section 4 did not find the written-out attention faster with a "
                "clear verdict (beyond the spread and the machine's drift)" + eager)
    return ("the long run's attention: written out: section 4 found it faster than SDPA, beyond the spread and the drift"
            + eager)


def long_run_lines(hist: History, name: str, quartiles: Sequence[float], skip: int, tokens_per_step: int,
                   mfu: Sequence[float], clip: float, device_label: str) -> str:
    """The long run's step: time (median and `quartiles` in s, after step `skip`), tokens/s and `mfu` (the
    median's, then the ends of the quartiles'); how many steps' gradient norms went above `clip`."""
    q1, med, q3 = quartiles
    clipped = sum(norm > clip for norm in hist.grad_norm)
    return "\n".join([
        f"{name}, {hist.step[-1]} steps: {med * 1e3:,.1f} ms per step, median after step {skip} "
        f"(quartiles {q1 * 1e3:,.1f}–{q3 * 1e3:,.1f} ms; each step timed as its logging window's mean)",
        f"{fmt_rate(tokens_per_step / med, 'tok/s')} ({fmt_rate(tokens_per_step / q3, 'tok/s')}–"
        f"{fmt_rate(tokens_per_step / q1, 'tok/s')}), MFU {mfu[0]:.1%} of the measured peak | {device_label}",
        f"gradient norm above {clip} before clipping: {clipped} of {len(hist.grad_norm)} steps "
        f"(largest {max(hist.grad_norm):.2f}, last {hist.grad_norm[-1]:.2f})"])


def long_vs_section4(vs: Ratio, hist: History, long_t: Timing, sec4: Timing, run: TrainConfig,
                     sampled: bool = False, later: Timing | None = None, split: bool = False) -> str | tuple[list, list]:
    """`vs`, section 4's time of a step over the long run's (`long_t`, timed by `train.fit` under `run`, which
    recorded `hist`; `sampled`: a utilisation sampler ran beside it); what differs between the two; and the
    verdict: the data wait's share of a longer step. `later`: section 5's reading of the same step (no sampler, another
    moment), set beside the long run's. `split`: (the verdict's lines, the ratio's and what differs) instead of text."""
    accum, log_every, checkpoints = run.accum_steps, run.log_every, bool(run.checkpoint_path)
    on_gpu = torch.device(run.device).type == "cuda" if run.device else torch.cuda.is_available()
    wait_ms = 1e3 * hist.data_wait_s / len(hist.step_time_s)  # fetching the batches, per step
    diff_ms = 1e3 * (long_t.median_s - sec4.median_s)
    syncs = ("syncs after every step, as section 4 does" if log_every == 1 else
             f"syncs once per {log_every} steps, where section 4 syncs after each")
    if not on_gpu:
        syncs += " (on a CPU a sync waits for nothing: every op has finished when it returns)"
    what = (f"A long-run step also fetches {accum} fresh shuffled micro-batches ({wait_ms:.2f} ms per step, the "
            f"loop's data wait; section 4 reuses one step's), updates the progress bar and records its loss; it "
            f"{syncs}" + ("; a sampler thread reads utilisation every 0.5 s (section 5 timed a 0.1 s one's cost)"
                          if sampled else "") + f". The {len(hist.val_step)} validation passes"
            + (" and the checkpoints" if checkpoints else " (this run saves no checkpoint)")
            + " are not in its step time: the clock restarts after them. The two were measured at different "
            "times, not in turns.")
    if vs.clear and diff_ms > 0:
        verdict = (f"verdict: the long run's step is {diff_ms:.1f} ms longer, beyond both spreads; the data wait "
                   f"accounts for {min(1.0, wait_ms / diff_ms):.0%} of it, the rest is the loop's other work or the "
                   "machine's speed changing between the two, which these numbers do not tell apart")
    elif vs.clear:
        verdict = (f"verdict: the long run's step is {-diff_ms:.1f} ms shorter, beyond both spreads: what its loop "
                   "adds is smaller than what else differs between the two, which is not measured here")
    else:
        same = f"{vs.value:.2f}" == "1.00"  # '1.00× faster' reads as a contradiction
        verdict = ("verdict: the long run's steps ran at the same median pace" if same else
                   f"verdict: the long run's steps ran {vs.phrase} by the medians"
                   + (" although its loop does more per step" if vs.value > 1 else ""))
        verdict += "; two moments apart, inconclusive: what moved them is not measured here"
    if later is not None:  # another reading of the same step, at a third moment
        r = rate_ratio(long_t, later, "")
        verdict += (f"\nsection 5 read the same step again (no sampler, another moment): the long run's rate is "
                    f"{r.numbers} of that reading" + (
                        ", a range too wide to tell" if r.too_wide else
                        ", within their quartiles, at two moments: what the loop's extra work costs is not measured "
                        "apart (only timing the two steps in turns would)" if r.within_noise else
                        f", two moments: {verdicts.moments_words(r.lo, r.hi, short=True)}"))
    return (verdict.splitlines(), [str(vs), what]) if split else "\n".join([str(vs), what, verdict])


LEVEL = 0.01  # nats/token: a validation loss this close to the unigram baseline is level with it


def val_vs_baseline(final: float, unigram: float, steps: int, tokens: int) -> str:
    """The validation loss after `steps` steps (`tokens` trained on) beside the unigram baseline, and what the
    margin says: context used (more than :data:`LEVEL` nats/token below), level with it, or above it."""
    margin = unigram - final
    head = (f"validation loss after {steps} steps ({tokens:,} tokens trained on): {final:.3f} nats/token "
            f"({final / math.log(2):.2f} bits per byte) | unigram baseline {unigram:.3f} nats/token "
            f"({unigram / math.log(2):.2f} bits per byte)")
    if margin > LEVEL:
        return (f"{head}\nthe GPT beats the unigram baseline by {margin:.3f} nats/token ({margin / unigram:.0%} "
                "lower): it uses the context, not only byte frequencies")
    if margin > -LEVEL:
        return (f"{head}\nthe GPT is level with the unigram baseline (within {LEVEL:g} nats/token): after {steps} steps "
                "it has learnt byte frequencies, not yet how they depend on the context")
    return (f"{head}\nthe GPT is {-margin:.3f} nats/token above the unigram baseline: after {steps} steps it has "
            "not yet learnt even the byte frequencies")


def answer(rows: Mapping[str, dict], fastest: str | None, mfu_range: Sequence[float] | None, peak: float,
           resumed: tuple[float, float] | None, device: str, faster: Timing | None = None, lone: bool = False) -> str:
    """The question at the top answered from this run's report `rows`, one line each: the fastest version's rate in
    section 4 (`fastest`, its row's name) and the long run's; the MFU of that step across every reading (`mfu_range`,
    against `peak`, the stored peak in FLOP/s); the validation loss against the unigram baseline; the resumed
    run against the straight one (`resumed`: its weight gap and two straight runs'). `faster`: a version timed after
    section 4's first turns that read faster, named beside it; `lone`: `mfu_range` is section 4's quartiles, that
    step's one reading. A line is left out where its measurement did not run."""
    def rate(row: dict) -> str:
        spread = f" ({row['spread'][0]:.1f}–{row['spread'][1]:.1f})" if row.get("spread") else ""
        return f"{row['value']:.1f}{spread} {row['unit']}"

    lines = [f"answer, from this run's numbers ({device}):"]
    if fastest and fastest in rows:
        said = [f"{fastest} (the highest median in section 4's first turns): {rate(rows[fastest])}"]
        if long := rows.get("long run: tokens/s"):  # its note: "<version>, median after step …"
            said.append(f"the long run through train.fit ({long.get('note', '').split(', median')[0]}, section 6): "
                        f"{rate(long)}")
        if faster is not None and faster.rate:  # a version timed later that read faster, with its own verdict
            gain = rows.get(f"compiled vs eager, {faster.name.split(', ', 1)[-1]}")
            one = report.recorded_ratio('', gain) if gain and gain.get("spread") else None
            said.append(f"{faster.name}, in later turns: {fmt_rate(faster.rate, 'tok/s')} (section 4"
                        + (f": {one.numbers} over eager there, "
                           + (UNCONFIRMED if unconfirmed(one) else report.ratio_grade(gain)) if one else "") + ")")
        lines += ["  tokens per second:", *(f"    {s}" for s in said)]
    if mfu_range:
        lines.append(f"  share of the peak: MFU {mfu_range[0]:.1%}–{mfu_range[1]:.1%} of the measured peak "
                     f"({fmt_rate(peak, 'FLOP/s')}) " + (f"in section 4's one reading of {fastest} (its quartiles)" if lone
                                                          else f"across this notebook's readings of {fastest or 'that step'} "
                                                          "(sections 4 and 5, each at one moment; the long run's, through "
                                                          "the training loop, is its own row)"))
    final, unigram = rows.get("validation loss, end of run"), rows.get("unigram baseline, val")
    if final and unigram:
        margin = unigram["value"] - final["value"]
        lines.append(f"  does it learn: validation loss {final['value']:.3f} nats/token at the end against the unigram "
                     f"baseline's {unigram['value']:.3f}: " + (
                         f"{margin:.3f} lower, so it uses the context, not only byte frequencies" if margin > LEVEL else
                         "level with it: byte frequencies, not yet the context" if margin > -LEVEL else
                         "above it: not yet even the byte frequencies"))
    if resumed:
        lines.append("  stopped and resumed (section 7): the weights equal the straight run's"
                     + (", bit for bit" if resumed[0] == 0 else ", within the run-to-run noise"))
    return "\n".join(lines)


def check_beats_baseline(final: float, unigram: float, by: float = LEVEL) -> None:
    """Assert that the validation loss `final` is more than `by` nats/token below the unigram baseline."""
    if not unigram - final > by:
        raise AssertionError(f"validation loss {final:.3f} is not {by} nats/token below the unigram baseline "
                             f"{unigram:.3f}: in this profile the GPT should beat it, so training is broken")
    check.passed(f"validation loss {final:.3f} more than {by} nats/token below the unigram baseline {unigram:.3f}")


def checkpoint_contents(path: Path, state: dict) -> str:
    """What a checkpoint file holds: its size, its entries, the step it was saved after and whose random
    generators' states it keeps."""
    gens = [f"cuda (one per GPU: {len(v)})" if k == "cuda" else k for k, v in state["rng"].items() if k != "cuda" or v]
    return (f"{path.name}, {fmt_bytes(path.stat().st_size)}, holds: {', '.join(state)}\n"
            f"  saved after step {state['step']} (epoch {state['epoch']}, micro-batch {state['batch']}); "
            f"random generators: {', '.join(gens)}"
            + ("" if state["rng"].get("cuda") else " (cuda: none on this machine)"))


def check_resumed(gap: float, noise: float) -> None:
    """Assert that a resumed run's largest weight difference from a straight run, `gap`, is no more than two
    straight runs differ from each other, `noise`."""
    seen = f"largest weight difference: two straight runs {noise:.1e}, straight vs resumed {gap:.1e}"
    if not gap <= noise:
        raise AssertionError(f"{seen}: the resumed run differs more than two straight runs do")
    check.passed(f"{seen}: resumed run == straight run" + (", bit for bit" if gap == 0 else
                                                             ", within the run-to-run noise"))


def big_run_text(big: SimpleNamespace, params: int, tokens: int, flops: float, *, this_run: bool,
                 device_label: str) -> str:
    """The gpu profile's large sizes (`params` without positions, `tokens` and `flops` per step); unless
    this run is that run, the fastest step the H100's and H200's datasheets allow at 100 % MFU, the
    reference run and published figures."""
    lines = [f"gpu profile, {big.why}: {big.n_layer} layers, width {big.n_embd}, context {big.block}, "
             f"{params / 1e6:.1f} M parameters, {tokens:,} tokens per step, {flops:.3g} FLOPs per step, "
             f"{big.steps} steps"]
    if this_run:
        return "\n".join(lines + [f"This run is that run, on {device_label}."])
    lines.append("This run is not the gpu profile on a large GPU. What the datasheets allow, from NVIDIA's dense bf16 "
                 "figures (not measurements): the time a step would take at 100 % MFU. MFU counts the whole attention "
                 "square; a causal kernel computes about half of it, so the hardware could take a little less.")
    h100, h200 = datasheet.lookup("H100 SXM5"), datasheet.lookup("H200")
    for spec in (h100, h200):
        floor = flops / (datasheet.peak_tflops(spec, "bf16") * 1e12)  # s per step
        lines.append(f"  {spec.name} ({datasheet.peak_tflops(spec, 'bf16'):g} TFLOP/s dense bf16): {floor * 1e3:.1f} "
                     f"ms per step, {tokens / floor / 1e6:.2f} M tok/s")
    if datasheet.peak_tflops(h100, "bf16") == datasheet.peak_tflops(h200, "bf16"):
        lines.append(f"  (the same floor: the H200 has the H100's tensor cores; it differs in memory, "
                     f"{h200.memory_gib:g} vs {h100.memory_gib:g} GB at {h200.mem_bw_gbs / 1e3:g} vs "
                     f"{h100.mem_bw_gbs / 1e3:g} TB/s, which a floor from FLOPs alone does not see)")
    lines += [report.reference_text("08_transformer"),
              published.elsewhere("08_transformer", keys=["flashattention_training_gpt3_125m_tokens_per_sec",
                                                          "llmc_gpt2_124m_90min_8xa100_80gb_60pct_mfu"],
                                  unlike=f"whole 8-GPU nodes training models of about 125 M parameters, against these "
                                         f"sizes' {params / 1e6:.1f} M on one GPU: a node's tokens/s is eight GPUs' "
                                         "work on a larger model; MFU is the closer unit, where a figure gives it, "
                                         "and even MFU can differ with the model's size and sequence length, "
                                         "which these figures do not measure")]
    return "\n".join(lines)


def check_same_groups(what: str, mine: Sequence[dict], lib: Sequence[dict]) -> None:
    """Assert that two optimizers' parameter groups hold the very same tensors with the same weight decay,
    group by group; prints each group's (tensors, decay)."""
    def groups(gs: Sequence[dict]) -> list[tuple[set[int], float]]:
        return [({id(p) for p in g["params"]}, g["weight_decay"]) for g in gs]

    counts = [(len(g["params"]), g["weight_decay"]) for g in mine]
    if groups(mine) != groups(lib):
        raise AssertionError(f"{what}: the groups hold other tensors or decays: (tensors, decay) {counts} against "
                             f"{[(len(g['params']), g['weight_decay']) for g in lib]}")
    check.passed(f"{what}: the same tensors, {counts}")
