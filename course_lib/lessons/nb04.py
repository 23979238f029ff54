"""Notebook 04 (gradient accumulation), checked: k micro-batches against one big batch.

The accumulation itself is :func:`course_lib.train.forward_backward`: each micro-batch's
mean loss is weighted by its share of the step's targets, so the summed gradient is the
gradient of one batch holding them all. This module adds what notebook 04 compares it
with, and the ways it goes wrong:

    group = split_batch(x, y, k=4)                      # 4 micro-batches
    g_big = gradients(model, [(x, y)])                  # one big batch
    g_acc = gradients(model, group)                     # k backward passes, weighted
    g_sum = gradients(model, group, scaling="sum")      # un-divided losses: k x too large

Also: BatchNorm swapped for GroupNorm (per-sample, so accumulation is exact), a tiny
language model for token-weighted losses, one optimizer step under AMP with the
GradScaler stepped only after the k-th micro-batch, peak memory against the effective
batch, the widget's work (:func:`compare_micro_batches`) and the exercise check.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Callable, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_lib import check, memory, profiles, published, verdicts
from course_lib.device import tf32
from course_lib.train import IGNORE_INDEX, autocast, cross_entropy, forward_backward
from course_lib.units import fmt_bytes

__all__ = ["FP32_ATOL", "FP32_RTOL", "BF16_REL_TOL", "FP16_REL_TOL", "SCALINGS", "without_batchnorm",
           "split_batch", "flat_grad", "gradients", "rel_error", "batchnorm_state",
           "accumulation_step", "TinyLM", "token_micro_batches", "pad_to_one_batch",
           "MemoryRow", "step_memory", "memory_sweep", "memory_table", "compare_micro_batches",
           "check_accumulation"]

FP32_ATOL, FP32_RTOL = 2e-6, 1e-5  # fp32: only the summation order differs
BF16_REL_TOL = 0.06  # ‖g_bf16 − g_fp32‖ / ‖g_fp32‖: bf16 keeps 8 significant bits
# fp16 keeps 11 significant bits (stored + 1), 3 more than bf16; a missed unscale (×scale) or a
# missing 1/k (×k) lands orders of magnitude above this; measured about 1e-2 on the notebook's model
FP16_REL_TOL = 0.02
SCALINGS = {
    "share": "loss × (its targets / all targets): train.forward_backward",
    "mean": "loss / k: the mean of micro-batch means",
    "sum": "loss un-divided: the sum of micro-batch means",
}


def without_batchnorm(model: nn.Module, groups: int | None = None) -> nn.Module:
    """A deep copy of `model` with every BatchNorm replaced by GroupNorm (same weights elsewhere).

    BatchNorm normalises each channel over the batch and the pixels; the default here,
    one group per channel, normalises each channel over one image's pixels only (otherwise
    `groups` groups of channels, rounded down to a divisor of the channel count). A sample's output then does not
    depend on the other samples in its batch, so micro-batching cannot change the gradient.
    The copy has the same parameter count (both have a weight and a bias per channel).
    """
    model = copy.deepcopy(model)
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.modules.batchnorm._BatchNorm):
                c = child.num_features
                setattr(parent, name, nn.GroupNorm(_largest_divisor(c, groups or c), c))
    return model


def _largest_divisor(channels: int, at_most: int) -> int:
    return max(g for g in range(1, min(at_most, channels) + 1) if channels % g == 0)


def split_batch(x: torch.Tensor, y: torch.Tensor, k: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """`k` micro-batches of (x, y) along the first dim; sizes differ by at most one."""
    if not 1 <= k <= len(x):
        raise ValueError(f"Need 1 <= k <= batch size ({len(x)}) micro-batches, got k={k}.")
    if len(x) != len(y):
        raise ValueError(f"Inputs and targets disagree: {len(x)} inputs, {len(y)} targets.")
    return list(zip(x.tensor_split(k), y.tensor_split(k)))


def flat_grad(model: nn.Module) -> torch.Tensor:
    """Every parameter's gradient in one fp32 vector (zeros where a parameter has none)."""
    grads = [p.grad if p.grad is not None else torch.zeros_like(p)
             for p in model.parameters() if p.requires_grad]
    return torch.cat([g.detach().float().flatten() for g in grads])


def _model_device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def gradients(model: nn.Module, group: list, *, scaling: str = "share",
              loss_fn: Callable = cross_entropy, amp: str = "off") -> torch.Tensor:
    """Zero the grads, run backward over the micro-batches in `group`, return :func:`flat_grad`.

    `scaling` is how each micro-batch's mean loss is scaled before its backward pass:
    "share" (right: weight = its targets / all targets, via train.forward_backward),
    "mean" (loss / k: right only when every micro-batch holds as many targets) or
    "sum" (no scaling: the gradient comes out about k times too large).
    """
    if scaling not in SCALINGS:
        raise ValueError(f"Unknown scaling {scaling!r}: choose one of {', '.join(SCALINGS)}.")
    device = _model_device(model)
    model.zero_grad(set_to_none=True)
    if scaling == "share":
        forward_backward(model, group, loss_fn, device=device, amp=amp)
        return flat_grad(model)
    divide_by = len(group) if scaling == "mean" else 1
    for x, y in group:  # the hand-written loop, as people first write it
        with autocast(device, amp):
            loss = loss_fn(model(x.to(device)), y.to(device))
        (loss / divide_by).backward()
    return flat_grad(model)


def rel_error(got: torch.Tensor, ref: torch.Tensor) -> float:
    """‖got − ref‖ / ‖ref‖ over the whole vector."""
    return ((got.double() - ref.double()).norm() / ref.double().norm().clamp_min(1e-30)).item()


def batchnorm_state(model: nn.Module) -> tuple[torch.Tensor, int]:
    """(running means and variances of every BatchNorm as one vector, updates counted)."""
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        raise ValueError("This model has no BatchNorm layers.")
    stats = torch.cat([torch.cat([m.running_mean, m.running_var]) for m in bns])
    return stats.detach().clone(), int(bns[0].num_batches_tracked)


def accumulation_step(model: nn.Module, optimizer: torch.optim.Optimizer, group: list, *,
                      amp: str = "off", scaler: torch.amp.GradScaler | None = None,
                      loss_fn: Callable = cross_entropy) -> torch.Tensor:
    """One optimizer step over the micro-batches in `group`; returns the gradient it used.

    k backward passes accumulate into ``.grad`` (each loss scaled by the GradScaler when
    one is given); only after the k-th: unscale once, read the gradient, ``scaler.step``
    (skipped if it holds inf/NaN) and ``scaler.update``, so the scale changes once per step.
    """
    device = _model_device(model)
    optimizer.zero_grad(set_to_none=True)
    forward_backward(model, group, loss_fn, device=device, amp=amp, scaler=scaler)
    if scaler is None:
        grad = flat_grad(model)
        optimizer.step()
        return grad
    scaler.unscale_(optimizer)  # true-scale gradients, once, after the k-th micro-batch
    grad = flat_grad(model)
    scaler.step(optimizer)
    scaler.update()
    return grad


# -- token-weighted losses -------------------------------------------------------------

class TinyLM(nn.Module):
    """Next-token logits from the current token alone: (B, T) ids -> (B, T, vocab)."""

    def __init__(self, vocab: int = 64, dim: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(ids))


def token_micro_batches(shapes: Sequence[tuple[int, int]] = ((4, 64), (4, 16), (2, 8)),
                        vocab: int = 64, seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Micro-batches of random token sequences, (rows, length) each: inputs and next tokens.

    Different lengths per micro-batch, as when batches are bucketed by length; the
    targets are the inputs shifted by one, so a micro-batch of (r, T) holds r·T targets.
    """
    g = torch.Generator().manual_seed(seed)
    batches = []
    for rows, length in shapes:
        ids = torch.randint(0, vocab, (rows, length + 1), generator=g)
        batches.append((ids[:, :-1], ids[:, 1:]))
    return batches


def pad_to_one_batch(group: list, pad_id: int = 0,
                     ignore_index: int = IGNORE_INDEX) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack micro-batches of different lengths into one padded batch.

    Padded targets are `ignore_index`, which cross-entropy skips, so the mean loss of this
    batch is the mean over every real target: the global token mean.
    """
    length = max(x.shape[1] for x, _ in group)
    xs = [F.pad(x, (0, length - x.shape[1]), value=pad_id) for x, _ in group]
    ys = [F.pad(y, (0, length - y.shape[1]), value=ignore_index) for _, y in group]
    return torch.cat(xs), torch.cat(ys)


# -- memory against the effective batch ------------------------------------------------

@dataclass
class MemoryRow:
    """Peak memory of one training step at one effective batch, without and with accumulation."""

    effective_batch: int
    micro_batch: int
    k: int
    one_batch: memory.MemoryReading  # one forward/backward of the whole effective batch
    accumulated: memory.MemoryReading  # k forward/backward passes of micro_batch each


def step_memory(model: nn.Module, x: torch.Tensor, y: torch.Tensor, k: int) -> memory.MemoryReading:
    """Peak memory that one accumulated step over `k` micro-batches of (x, y) adds.

    Gradients start unallocated (``zero_grad(set_to_none=True)``), so every reading
    includes allocating them. CUDA: the caching allocator; CPU: profiler memory events.
    """
    group = split_batch(x, y, k)
    device = _model_device(model)
    model.zero_grad(set_to_none=True)
    return memory.peak_memory(lambda: forward_backward(model, group, device=device), device)


def memory_sweep(model: nn.Module, x: torch.Tensor, y: torch.Tensor, micro: int,
                 batches: Sequence[int]) -> list[MemoryRow]:
    """For each effective batch B (first B of x, y): peak of one batch vs B/micro micro-batches."""
    bad = [b for b in batches if b % micro or b > len(x)]
    if bad:
        raise ValueError(f"Effective batches must be multiples of the micro-batch {micro} and at "
                         f"most {len(x)} (the data given); these are not: {bad}.")
    rows = []
    for b in batches:
        xb, yb = x[:b], y[:b]
        rows.append(MemoryRow(b, micro, b // micro, step_memory(model, xb, yb, 1),
                              step_memory(model, xb, yb, b // micro)))
    return rows


def memory_table(rows: Sequence[MemoryRow]) -> str:
    """The sweep as a text table, sizes in binary units, method and device named."""
    lines = [f"{'effective batch':>15} | {'one batch peak':>14} | {'micro × k':>9} | "
             f"{'accumulated peak':>16} | ratio"]
    for r in rows:
        ratio = r.accumulated.peak_bytes / max(1, r.one_batch.peak_bytes)
        lines.append(f"{r.effective_batch:>15} | {fmt_bytes(r.one_batch.peak_bytes):>14} | "
                     f"{f'{r.micro_batch} × {r.k}':>9} | {fmt_bytes(r.accumulated.peak_bytes):>16} | "
                     f"{ratio:.2f}")
    if rows:
        lines.append(f"({rows[0].one_batch.method}, {rows[0].one_batch.device})")
    return "\n".join(lines)


# -- widget and exercise ---------------------------------------------------------------

def compare_micro_batches(model: nn.Module, x: torch.Tensor, y: torch.Tensor, k: int) -> str:
    """Widget work: gradient difference and peak memory, one batch of x vs k micro-batches."""
    with tf32(False, deterministic=True):  # plain fp32 on GPUs too
        ref = gradients(model, [(x, y)])
        acc = gradients(model, split_batch(x, y, k))
    diff = (acc - ref).abs().max().item()
    one, many = step_memory(model, x, y, 1), step_memory(model, x, y, k)
    sizes = sorted({len(t) for t, _ in split_batch(x, y, k)})
    return (f"k={k}: micro-batches of {'/'.join(map(str, sizes))} | max |Δgrad| {diff:.2e}, "
            f"relative {rel_error(acc, ref):.2e} | peak {fmt_bytes(many.peak_bytes)} vs "
            f"{fmt_bytes(one.peak_bytes)} for one batch of {len(x)} ({one.method}, {one.device})")


def _exercise_model() -> nn.Module:
    with torch.random.fork_rng(devices=[]):  # the learner's random stream is left alone
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, 4))


@check.exercise()
def check_accumulation(fn: Callable[[nn.Module, list], object]) -> None:
    """Exercise (04): `fn(model, micro_batches)` must leave in ``.grad`` the gradient of
    the mean cross-entropy over all real targets, as if the micro-batches were one batch.

    Tried with equal micro-batches (4 × 6), unequal ones (5 + 3 + 8 + 8), and unequal ones
    whose targets include padding (IGNORE_INDEX, -100: F.cross_entropy leaves them out of
    its mean, so they must not count in the weights either).
    """
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(24, 10, generator=g), torch.randint(0, 4, (24,), generator=g)
    y_pad = y.clone()
    y_pad[[1, 2, 3, 9, 10, 17]] = IGNORE_INDEX  # 3 of the first 5, 2 of the next 3, 1 of 8, 0 of 8
    cases = [("4 equal micro-batches", [6, 6, 6, 6], y),
             ("unequal micro-batches 5+3+8+8", [5, 3, 8, 8], y),
             ("unequal micro-batches 5+3+8+8 with 6 padding targets", [5, 3, 8, 8], y_pad)]
    for name, sizes, targets in cases:
        model = _exercise_model()
        ref = gradients(model, [(x, targets)], loss_fn=F.cross_entropy)
        model.zero_grad(set_to_none=True)
        fn(model, list(zip(x.split(sizes), targets.split(sizes))))
        got = flat_grad(model)
        ratio = (got @ ref / (ref @ ref)).item()
        if abs(ratio - len(sizes)) < 0.05 * len(sizes):
            raise AssertionError(f"{name}: your gradient is {ratio:.2f}× the big-batch one: "
                                 "scale each micro-batch's loss before backward().")
        if not torch.allclose(got, ref, atol=FP32_ATOL, rtol=FP32_RTOL):
            if targets is y_pad:
                raise AssertionError(f"{name}: the gradients differ (relative {rel_error(got, ref):.1e}). "
                                     "Padding targets (-100) carry no loss: weight each micro-batch by "
                                     "its real targets, (y != -100).sum(), over all real targets.")
            if len(set(sizes)) > 1:
                raise AssertionError(f"{name}: the gradients differ (relative {rel_error(got, ref):.1e}). "
                                     "Dividing by k weights a sample in a small micro-batch more: "
                                     "weight each loss by len(y) / (all samples).")
        check.close(got, ref, what=f"exercise, {name}: your gradients vs one big batch",
                    atol=FP32_ATOL, rtol=FP32_RTOL)


# -- the words around the notebook's numbers ------------------------------------------------

def model_facts(model: nn.Module, g_acc: torch.Tensor, g_big: torch.Tensor) -> str:
    """Section 1's deterministic facts: the model's parameters and tensors, the values compared,
    and whether the two gradients are equal at fp32's tolerance."""
    n_tensors = sum(1 for p in model.parameters() if p.requires_grad)
    return (f"model: SmallCNN(width=16), GroupNorm(8) for BatchNorm, {g_big.numel():,} parameters in {n_tensors} "
            f"tensors\nvalues compared: {g_acc.numel():,}\ngradients equal: "
            f"{torch.allclose(g_acc, g_big, atol=FP32_ATOL, rtol=FP32_RTOL)}")


def batchnorm_lines(gb_acc: torch.Tensor, gb_big: torch.Tensor, gn_rel: float, state_acc: tuple[torch.Tensor, int],
                    state_big: tuple[torch.Tensor, int], k: int) -> str:
    """BatchNorm's gradients and running statistics, k micro-batches against one batch, beside
    GroupNorm's difference (`gn_rel`, fp32 rounding)."""
    (s_acc, n_acc), (s_big, n_big) = state_acc, state_big
    return (f"BatchNorm gradients, {k} micro-batches vs one batch: max |Δ| {(gb_acc - gb_big).abs().max():.2e}, "
            f"relative {rel_error(gb_acc, gb_big):.2e}, where GroupNorm's was {gn_rel:.2e} (section 1: fp32 "
            f"rounding)\nrunning mean/var: max |Δ| {(s_acc - s_big).abs().max():.2e}; updates: {n_acc} vs {n_big}")


def token_lines(group: list, counts: Sequence[int], means: Sequence[float], global_mean: float,
                weighted: float) -> str:
    """Each micro-batch's tokens (`counts`) and mean loss, then the global token mean against the
    token-weighted mean (`weighted`) and the mean of the means."""
    mean_of_means = sum(means) / len(means)
    return "\n".join([*(f"micro-batch {tuple(a.shape)}: {n:>4} tokens, mean loss {m:.4f}"
                        for (a, _), n, m in zip(group, counts, means)),
                      f"global token mean {global_mean:.4f} | token-weighted {weighted:.4f} | mean of means "
                      f"{mean_of_means:.4f} (off by {mean_of_means - global_mean:+.4f})"])


def direction_line(g_wrong: torch.Tensor, g_ref: torch.Tensor) -> str:
    """How far the mean-of-means gradient is from the token mean's: the angle between them and
    their lengths (whether the wrong weights change where the step points or only how far)."""
    cos = F.cosine_similarity(g_wrong, g_ref, dim=0).clamp(-1, 1)
    return (f"mean of micro-batch means vs the token mean: cosine {cos:.3f} ({torch.rad2deg(torch.arccos(cos)):.0f}° "
            f"apart), lengths {g_wrong.norm():.3g} vs {g_ref.norm():.3g}: the wrong weights change "
            + ("where the step points, not only how far" if cos < 0.99 else
               "how far the step goes more than where it points"))


def memory_lines(rows: Sequence[MemoryRow], state: memory.MemoryEstimate) -> str:
    """What the sweep says: the model's own state, how each peak grew with the effective batch,
    the accumulated peak against the one-batch peak at the largest, and against its floor."""
    first, last = rows[0], rows[-1]
    share = last.accumulated.peak_bytes / last.one_batch.peak_bytes
    how = "lower" if share < 0.9 else "about the same" if share <= 1.1 else "higher"
    floor, one = last.accumulated.peak_bytes, first.one_batch.peak_bytes  # first: one batch of one micro-batch's size
    return (f"model state, the same at every batch: parameters {fmt_bytes(state.params)} + gradients "
            f"{fmt_bytes(state.grads)} (this sweep runs no optimizer; an AdamW run would add "
            f"{fmt_bytes(state.optimizer)} for its two moments)\neffective batch {first.effective_batch} → "
            f"{last.effective_batch} ({last.effective_batch // first.effective_batch}×): one-batch peak "
            f"{last.one_batch.peak_bytes / first.one_batch.peak_bytes:.2f}×, accumulated peak "
            f"{floor / first.accumulated.peak_bytes:.2f}×\nat batch {last.effective_batch}: the accumulated peak "
            f"is {share:.2f}× the one-batch peak, {how} | {last.one_batch.method}, one reading each (allocation "
            f"sizes, not timings)\nthe accumulated peak at batch {last.effective_batch}, {fmt_bytes(floor)}, counts "
            f"what the step adds (the parameters, {fmt_bytes(state.params)}, were allocated before it): it is "
            f"{fmt_bytes(floor - one)} above one batch of {first.effective_batch} ({fmt_bytes(one)}), beside the "
            f"gradients' {fmt_bytes(state.grads)}, which the later micro-batches run on top of")


def memory_facts(rows: Sequence[MemoryRow]) -> dict[str, tuple]:
    """Section 5's recorded figures, name -> (value, unit, note), for ``rep.add``."""
    last, mib = rows[-1], 2**20
    return {"peak memory, one batch (largest)": (last.one_batch.peak_bytes / mib, "MiB",
                                                 f"batch {last.effective_batch}, {last.one_batch.method}"),
            "peak memory, accumulated (largest)": (last.accumulated.peak_bytes / mib, "MiB",
                                                   f"{last.micro_batch} × {last.k}"),
            "accumulated/one-batch peak, largest": (last.accumulated.peak_bytes / last.one_batch.peak_bytes, "×",
                                                    f"batch {last.effective_batch}")}


def fp16_here(flags: Sequence[str], looked_for: Sequence[str], timed: dict | None) -> str:
    """A CPU's fp16 instructions (`flags` found of `looked_for`), and, when notebook 03 timed it
    in this run (`timed`: its "fp16+GradScaler vs fp32" row), how fast its fp16 step ran."""
    fp16 = [f for f in flags if "fp16" in f]
    text = (f"CPU flags looked for: {', '.join(looked_for)}; fp16 ones found: {', '.join(fp16) if fp16 else 'none'}, "
            "so this CPU " + ("has fp16 instructions (whether PyTorch uses them for a given op is another matter: "
                              "notebook 03 times it)" if fp16 else "has no fp16 instructions: fp16 goes through "
                              "slower generic code") + ": the run below checks correctness, not speed.")
    if timed:
        v, (lo, hi) = timed["value"], timed.get("spread") or (timed["value"],) * 2
        speed = (f"{1 / v:.1f}× slower ({1 / hi:.1f}–{1 / lo:.1f}×)" if v < 1 else
                 f"{v:.2f}× faster ({lo:.2f}–{hi:.2f}×)")
        text += (f"\nnotebook 03, in this run: an fp16+GradScaler training step ran {speed} than fp32 on this CPU "
                 f"({timed['note']})")
    return text


def amp_lines(errors: dict[str, float], k: int, device: str) -> str:
    """Each 16-bit gradient's relative error against fp32's, then per format: K micro-batches
    against one batch (no more than 1.5× one batch's error: accumulating in fp32 adds none)."""
    lines = [f"{label:<34} | ‖g − g_fp32‖ / ‖g_fp32‖ = {err:.2e} | {device}" for label, err in errors.items()]
    for fmt in ("bf16", "fp16 + GradScaler"):
        if f"{fmt}, one batch" in errors:
            one, acc, name = errors[f"{fmt}, one batch"], errors[f"{fmt}, {k} micro-batches"], fmt.split()[0]
            lines.append(f"{fmt}: {k} micro-batches {acc:.2e} vs one batch {one:.2e} ({acc / one:.2f}×): "
                         + (f"accumulating in fp32 .grad adds no error beyond {name}'s own rounding here"
                            if acc <= 1.5 * one else f"more error than one batch: more than {name}'s rounding"))
    return "\n".join(lines)


def time_cost_lines(timed: dict[tuple[int, int], tuple], k: int, resolution: int, device: str,
                    reference: bool = False) -> str:
    """Per timed size on `device` (its label), what K micro-batches cost against one batch (the
    ratio's interval decides); with `reference` (off a GPU), what the reference GPU run measured."""
    lines = []
    for (width, batch), (_, _, ratio) in timed.items():
        at = f"{device}, width {width} at {resolution} px, batch {batch}"
        lines.append(f"{at}: " + (f"these repeats resolve no time cost of K = {k} micro-batches (the ratio above)"
                                  if not ratio.clear else
                                  f"K = {k} micro-batches take {1 / ratio.value:.2f}× the time of one batch here "
                                  "(what it costs depends on the size and the device: compare the sizes above, and "
                                  "the GPU's below)"
                                  if ratio.value < 1 else f"K = {k} micro-batches run {ratio.value:.2f}× faster: "
                                  "this device runs the smaller passes more efficiently"))
    if reference:  # on a GPU a small pass may leave most of it idle
        gpu_sizes = profiles.sizes("04_grad_accumulation", "gpu", memory_gib=80).time_sizes
        lines.append("\nOn a GPU: " + published.elsewhere("04_grad_accumulation",
                                                           tuple(f"w{w} " for w, _ in gpu_sizes)))
    return "\n".join(lines)


def run_lines(runs: dict[tuple[bool, int], object], batch: int) -> str:
    """Each training run of section 8: its norm layer, micro-batch × K, optimizer steps and last loss."""
    return "\n".join(f"{'BatchNorm' if bn else 'GroupNorm':<9} | micro-batch {batch // k:>4} × {k} | "
                     f"{h.step[-1]} optimizer steps | last loss {h.loss[-1]:.4f}" for (bn, k), h in runs.items())


def gap_line(name: str, gap: float, gaps: Sequence[float], controls: Sequence, tail: int,
             *, same_algorithm: bool = False) -> str:
    """The accumulated run's gap to the one-batch run over the last `tail` records, beside each
    control's (with its nudge), and :func:`course_lib.verdicts.gap_verdict`. Where accumulation
    runs the `same_algorithm` as one batch (no BatchNorm), a gap beyond the controls gets a caveat:
    they differ from one batch once, at the start, while accumulation sums each step's gradient in
    another order, so rounds differently at every step, and they may under-estimate that drift."""
    ctrl = ", ".join(f"{g:+.4f} (nudged {c.ulps:+d})" for g, c in zip(gaps, controls))
    line = (f"{name}: accumulated − one batch over the last {tail} records {gap:+.4f} nats; controls {ctrl} | "
            f"{verdicts.gap_verdict(gap, gaps, 'one batch')}")
    if same_algorithm and abs(gap) > max(abs(g) for g in gaps):
        line += ("\n  but the controls differ from one batch once (their starting weights), while accumulation "
                 "rounds its gradient sums differently at every step: the controls may under-estimate the drift "
                 "rounding alone causes here, so this run cannot tell rounding from another difference")
    return line
