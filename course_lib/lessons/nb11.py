"""Notebook 11 (model parallelism): the model every script splits, the pipeline schedules, the
bubble they leave, and what the notebook compares the distributed runs with.

The model is a stack of ``Linear(width, width) → GELU`` blocks (GELU, not ReLU: its gradient is
smooth, so a rounding-level difference cannot switch a unit off and move the weights by more
than rounding; notebook 06 says why). Built from one seed, it is the same on every rank, so
each pipeline stage keeps its own contiguous slice of blocks (:func:`split`) and one process can
run the whole model as the reference.

A pipeline of p stages runs a batch as m micro-batches. A schedule is each stage's order of
forward (``"F"``) and backward (``"B"``) passes over the micro-batches (:func:`gpipe`,
:func:`one_f_one_b`). Where every pass takes the same time on every stage, a stage is idle for
the fraction ``(p - 1) / (m + p - 1)`` of the step (:func:`bubble`): the pipeline's *bubble*.
:func:`idle_fractions` reads it from measured timelines.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Callable, Literal, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_lib import check
from course_lib.bench import median_interval

Op = tuple[Literal["F", "B"], int]  # a forward or backward pass of micro-batch i


def make_model(width: int, layers: int, seed: int = 0) -> nn.Sequential:
    """`layers` blocks ``Linear(width, width) → GELU``, initialised from `seed` (the same on
    every rank and in the one-process reference)."""
    if width < 1 or layers < 1:
        raise ValueError(f"width and layers must be at least 1, got width={width}, layers={layers}.")
    torch.manual_seed(seed)
    return nn.Sequential(*(nn.Sequential(nn.Linear(width, width), nn.GELU()) for _ in range(layers)))


def bounds(layers: int, stages: int) -> list[int]:
    """Where each stage's blocks begin, and the end: stage s holds blocks [b[s], b[s+1]). The
    blocks are dealt out as evenly as they go, the first stages taking one more.

    >>> bounds(8, 2), bounds(7, 3)
    ([0, 4, 8], [0, 3, 5, 7])
    """
    if not 1 <= stages <= layers:
        raise ValueError(f"Cannot split {layers} blocks into {stages} stages: need 1 <= stages <= blocks.")
    per, extra = divmod(layers, stages)
    out = [0]
    for s in range(stages):
        out.append(out[-1] + per + (s < extra))
    return out


def split(model: nn.Sequential, stages: int, at: Sequence[int] | None = None) -> list[nn.Sequential]:
    """`model`'s blocks cut into `stages` contiguous slices (sharing the model's parameters), at
    the block indices `at` (``[0, …, len(model)]``; default :func:`bounds`)."""
    at = list(at) if at is not None else bounds(len(model), stages)
    if len(at) != stages + 1 or at[0] != 0 or at[-1] != len(model) or any(a >= b for a, b in zip(at, at[1:])):
        raise ValueError(f"Stage bounds {at} must rise from 0 to {len(model)} in {stages} steps.")
    return [model[a:b] for a, b in zip(at, at[1:])]


def batch(rows: int, width: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and regression targets, (rows, width) each, from `seed`."""
    g = torch.Generator().manual_seed(seed + 1)  # not the model's stream: the weights stay put
    return torch.randn(rows, width, generator=g), torch.randn(rows, width, generator=g)


def micro_loss(out: torch.Tensor, target: torch.Tensor, micro: int) -> torch.Tensor:
    """One micro-batch's share of the batch loss: its mean squared error divided by the number of
    micro-batches `micro`, so that the shares' gradients add up to the whole batch's (equal
    micro-batches)."""
    return F.mse_loss(out, target) / micro


def reference(model: nn.Sequential, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """One process, the whole batch at once: the output and every parameter's gradient of the
    mean squared error (the gradients in ``model.parameters()`` order)."""
    model.zero_grad(set_to_none=True)
    out = model(x)
    F.mse_loss(out, y).backward()
    return out.detach(), [p.grad.detach().clone() for p in model.parameters()]


# ---- schedules -------------------------------------------------------------------------------

def gpipe(micro: int) -> list[Op]:
    """GPipe's order, the same on every stage: every forward, then every backward.

    >>> gpipe(3)
    [('F', 0), ('F', 1), ('F', 2), ('B', 0), ('B', 1), ('B', 2)]
    """
    return [("F", i) for i in range(micro)] + [("B", i) for i in range(micro)]


def one_f_one_b(stage: int, stages: int, micro: int) -> list[Op]:
    """1F1B's order on `stage` of `stages`: ``stages - stage - 1`` forwards to fill the pipeline
    (warm-up), then one forward and one backward in turn, then the backwards left (cool-down).
    A stage holds at most ``stages - stage`` micro-batches' activations, not `micro`.

    >>> one_f_one_b(0, 2, 3), one_f_one_b(1, 2, 3)
    ([('F', 0), ('F', 1), ('B', 0), ('F', 2), ('B', 1), ('B', 2)], [('F', 0), ('B', 0), ('F', 1), ('B', 1), ('F', 2), ('B', 2)])
    """
    warm = min(stages - stage - 1, micro)
    ops: list[Op] = [("F", i) for i in range(warm)]
    for i in range(micro - warm):
        ops += [("F", warm + i), ("B", i)]
    return ops + [("B", i) for i in range(micro - warm, micro)]


SCHEDULES = {"gpipe": lambda stage, stages, micro: gpipe(micro), "1f1b": one_f_one_b}


def schedule(kind: str, stage: int, stages: int, micro: int) -> list[Op]:
    """The order of passes of `kind` ('gpipe' or '1f1b') on `stage`."""
    if kind not in SCHEDULES:
        raise ValueError(f"Unknown schedule {kind!r}; choose one of {', '.join(SCHEDULES)}.")
    if micro < 1 or not 0 <= stage < stages:
        raise ValueError(f"Need micro >= 1 and 0 <= stage < stages, got micro={micro}, stage={stage}, stages={stages}.")
    return SCHEDULES[kind](stage, stages, micro)


# torch.distributed.pipelining before 2.8 keeps one of the works that a fused send + receive
# returns and drops the rest (`.pop()`); gloo returns one per operation, so 1F1B, whose steady
# state fuses a send with a receive, waits forever there (pytorch/pytorch#132644, fixed for 2.8
# by PR #152938; read in 2.7.1's and 2.8.0's schedules.py). NCCL returns one work: unaffected.
API_1F1B_GLOO = "2.8"
API_SCHEDULES = {"gpipe": "ScheduleGPipe", "1f1b": "Schedule1F1B"}


def api_skip(kind: str, micro: int, stages: int, backend: str, version: str | None = None) -> str | None:
    """Why PyTorch's own schedule for `kind` (:data:`API_SCHEDULES`) is not run here, in one
    sentence; None when it runs. `version` defaults to this torch's."""
    name = API_SCHEDULES[kind]
    version = version or torch.__version__
    if micro < stages:  # Schedule1F1B refuses it in every release; ScheduleGPipe in 2.7 and 2.8
        return f"{name} wants at least as many micro-batches as stages ({micro} < {stages})."
    if kind == "1f1b" and backend == "gloo" and torch.torch_version.TorchVersion(version) < API_1F1B_GLOO:
        return (f"{name} hangs on gloo before torch {API_1F1B_GLOO} (pytorch/pytorch#132644) and this is "
                f"torch {version}: the written-out 1F1B above runs instead.")
    return None


def in_flight(ops: Sequence[Op]) -> int:
    """The most micro-batches whose forward has run and backward not yet: how many micro-batches'
    activations the stage holds at its peak.

    >>> in_flight(gpipe(4)), in_flight(one_f_one_b(0, 2, 4))
    (4, 2)
    """
    live = peak = 0
    for kind, _ in ops:
        live += 1 if kind == "F" else -1
        peak = max(peak, live)
    return peak


def bubble(stages: int, micro: int) -> float:
    """The idle fraction of each stage, (p − 1) / (m + p − 1), when every forward takes the same
    time on every stage, and every backward too (GPipe and 1F1B alike).

    >>> bubble(2, 1), round(bubble(4, 8), 3)
    (0.5, 0.273)
    """
    if stages < 1 or micro < 1:
        raise ValueError(f"Need stages >= 1 and micro >= 1, got {stages} and {micro}.")
    return (stages - 1) / (micro + stages - 1)


# ---- timelines -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Pass:
    """One pass measured on one stage: kind ('F' or 'B'), micro-batch, start and end in seconds
    on the clock every stage reads (only differences and the order matter)."""

    stage: int
    kind: str
    micro: int
    start: float
    end: float


def idle_fractions(passes: Sequence[Pass], stages: int) -> list[float]:
    """Each stage's idle fraction of the step: 1 − (its busy time) / (the step's span, from the
    first pass's start on any stage to the last pass's end on any stage)."""
    if not passes:
        raise ValueError("No passes measured.")
    span = max(p.end for p in passes) - min(p.start for p in passes)
    busy = [sum(p.end - p.start for p in passes if p.stage == s) for s in range(stages)]
    return [1 - b / span for b in busy]


def simulate(ops: Sequence[Sequence[Op]], forward_s: Sequence[float], backward_s: Sequence[float]) -> list[Pass]:
    """The timeline a schedule gives when nothing but the passes take time: stage s runs its
    `ops` in order, each forward taking ``forward_s[s]`` and each backward ``backward_s[s]``; a
    forward waits for the same micro-batch's forward on the stage before, a backward for its
    backward on the stage after (the last stage's, for its own forward). With equal times on
    every stage, each stage's idle fraction is :func:`bubble`'s.

    >>> [round(f, 3) for f in idle_fractions(simulate([gpipe(4)] * 2, [1, 1], [2, 2]), 2)]
    [0.2, 0.2]
    """
    stages = len(ops)
    done: dict[tuple[int, str, int], float] = {}  # (stage, kind, micro) -> end time
    nxt = [0] * stages  # each stage's next op
    free = [0.0] * stages  # when each stage finished its last op
    out: list[Pass] = []
    while any(nxt[s] < len(ops[s]) for s in range(stages)):
        moved = False
        for s in range(stages):
            if nxt[s] == len(ops[s]):
                continue
            kind, i = ops[s][nxt[s]]
            need = ((s - 1, "F", i) if kind == "F" and s > 0 else
                    (s + 1, "B", i) if kind == "B" and s < stages - 1 else
                    (s, "F", i) if kind == "B" else None)
            if need is not None and need not in done:
                continue
            start = max(free[s], done[need] if need else 0.0)
            end = start + (forward_s[s] if kind == "F" else backward_s[s])
            done[(s, kind, i)] = free[s] = end
            out.append(Pass(s, kind, i, start, end))
            nxt[s] += 1
            moved = True
        if not moved:
            raise ValueError("The schedules deadlock: every stage waits for a pass that never runs.")
    return out


# ---- reading scripts/pipeline.py's results ---------------------------------------------------

def timelines(results: dict) -> dict[tuple[str, int], list[list[Pass]]]:
    """(schedule, micro-batches) -> one list of passes (every stage's) per timed step."""
    steps: dict[tuple[str, int, int], list[Pass]] = {}
    for row in results["passes"]:
        key = (row["schedule"], row["micro"], row["repeat"])
        steps.setdefault(key, []).extend(Pass(row["stage"], op, i, a, b) for op, i, a, b in row["passes"])
    out: dict[tuple[str, int], list[list[Pass]]] = {}
    for (kind, m, _), passes in sorted(steps.items()):
        out.setdefault((kind, m), []).append(passes)
    return out


def pass_times(passes: Sequence[Pass], stages: int) -> tuple[list[float], list[float]]:
    """Each stage's median forward and median backward time in one step."""
    def times(s: int, kind: str) -> list[float]:
        return [p.end - p.start for p in passes if p.stage == s and p.kind == kind]
    return ([statistics.median(times(s, "F")) for s in range(stages)],
            [statistics.median(times(s, "B")) for s in range(stages)])


@dataclass(frozen=True)
class Bubble:
    """One schedule and micro-batch count: the measured idle fraction (mean over the stages) of
    each timed step, the formula's, and the one :func:`simulate` gives from each step's own pass
    times (unequal stages and all, but no time for messages)."""

    schedule: str
    stages: int
    micro: int
    measured: list[float]
    simulated: list[float]

    @property
    def formula(self) -> float:
        return bubble(self.stages, self.micro)

    def spread(self, values: Sequence[float]) -> tuple[float, float, float]:
        """(median, lo, hi): the median and the interval of :func:`bench.median_interval`."""
        med, lo, hi, _ = median_interval(values)
        return med, lo, hi

    def verdict(self) -> str:
        """One sentence from the numbers: where the formula and the replay fall against the
        measured interval, and what the gap is made of where the numbers say it."""
        med, lo, hi = self.spread(self.measured)
        sim = self.spread(self.simulated)[0]
        head = (f"{self.schedule}, m = {self.micro}: idle {med:.1%} ({lo:.1%}–{hi:.1%}) measured, "
                f"{self.formula:.1%} by the formula")
        if lo <= self.formula <= hi:
            return head + ": the formula falls within the measured spread"
        side = "above" if lo > self.formula else "below"
        head += f": measured {side} the formula, beyond the spread; the replay of each step's own pass times gives {sim:.1%}"
        if lo <= sim <= hi:
            return head + ", within the spread: these stages' passes were not equal, as the formula assumes"
        if lo > sim:
            return (head + f"; the remaining {med - sim:+.1%} of the step is time outside any pass: "
                    "message waits, the Python between passes, the operating system's scheduling")
        return (head + ", and the measured idle time is below that too: the replay takes each "
                "stage's median pass, and these steps' passes varied around it")


def bubbles(results: dict) -> list[Bubble]:
    """A :class:`Bubble` per schedule and micro-batch count of `results`."""
    p = results["stages"]
    out = []
    for (kind, m), steps in timelines(results).items():
        sims = [idle_fractions(simulate([schedule(kind, s, p, m) for s in range(p)], *pass_times(ps, p)), p)
                for ps in steps]
        out.append(Bubble(kind, p, m, [sum(idle_fractions(ps, p)) / p for ps in steps],
                          [sum(f) / p for f in sims]))
    return out


def plot_timeline(ax, passes: Sequence[Pass], stages: int, title: str = "") -> None:
    """Each stage's passes as bars on its own row (forward blue, backward orange, micro-batch
    number inside), in ms from the step's start."""
    t0 = min(p.start for p in passes)
    for p in passes:
        ax.barh(p.stage, (p.end - p.start) * 1e3, left=(p.start - t0) * 1e3, height=0.6,
                color="tab:blue" if p.kind == "F" else "tab:orange", edgecolor="white")
        ax.text((p.start + p.end) / 2 * 1e3 - t0 * 1e3, p.stage, str(p.micro), ha="center",
                va="center", fontsize=7, color="white")
    ax.set_yticks(range(stages), [f"stage {s}" for s in range(stages)])
    ax.invert_yaxis()
    ax.set_xlabel("ms since the step began")
    ax.set_title(title, fontsize=9)


# ---- exercise checks -------------------------------------------------------------------------

@check.exercise()
def check_micro_for(fn: Callable[[int, float], int]) -> None:
    """Exercise 1: ``fn(stages, target)`` is the smallest m with ``bubble(stages, m) <= target``."""
    cases = [(2, 0.5), (2, 0.2), (2, 0.1), (4, 0.25), (4, 0.1), (8, 0.05), (3, 0.3)]
    for stages, target in cases:
        want = next(m for m in range(1, 10_000) if bubble(stages, m) <= target + 1e-12)
        got = fn(stages, target)
        if not isinstance(got, int) or got < 1:
            raise AssertionError(f"micro_for({stages}, {target}) must be an integer from 1 up, got {got!r}.")
        if bubble(stages, got) > target + 1e-12:
            raise AssertionError(f"micro_for({stages}, {target}) = {got}: its bubble {bubble(stages, got):.3f} "
                                 f"is above {target}.")
        if got != want:
            raise AssertionError(f"micro_for({stages}, {target}) = {got}: {want} micro-batches already "
                                 f"reach {target} (bubble {bubble(stages, want):.3f}); return the smallest.")
    check.passed(f"micro_for: the smallest m for {len(cases)} (stages, target) pairs")


@check.exercise()
def check_balanced_cut(fn: Callable[[list[float]], int]) -> None:
    """Exercise 2: ``fn(costs)`` is a cut k (1 <= k < len(costs)) with the least slower stage."""
    g = torch.Generator().manual_seed(11)
    cases = [[1.0, 1.0], [1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0, 3.0, 3.0], [5.0, 1.0, 1.0, 1.0]]
    cases += [[float(c) for c in torch.randint(1, 10, (n,), generator=g)] for n in (3, 5, 7, 9)]
    for costs in cases:
        k = fn(list(costs))
        if not isinstance(k, int) or not 1 <= k < len(costs):
            raise AssertionError(f"balanced_cut({costs}) must be an integer from 1 to {len(costs) - 1}, got {k!r}.")
        best = min(max(sum(costs[:j]), sum(costs[j:])) for j in range(1, len(costs)))
        slower = max(sum(costs[:k]), sum(costs[k:]))
        if slower > best:
            raise AssertionError(f"balanced_cut({costs}) = {k}: the slower stage takes {slower:g}; "
                                 f"another cut gets it down to {best:g}.")
    check.passed(f"balanced_cut: the best cut of {len(cases)} cost lists")
