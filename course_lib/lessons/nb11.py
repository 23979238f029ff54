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

Sections 6 to 9 add: which of PyTorch's own pipeline schedules can run here (:func:`api_skip`),
the MLP stack that tensor parallelism and FSDP split together on a 2D mesh (:func:`models.mlp_stack`,
:func:`mlp_2d_elements`), and the which-parallelism-when table: each plan's model state and
traffic per GPU by formula, checked against what PyTorch's own sharding gives a rank in a fake
process group (:mod:`course_lib.parallelism`: ``rank_params``, ``comm_bytes``, ``fake_rank_bytes``,
``decision_table``). The notebook's tables and sentences from the scripts' results are text
functions here (:func:`memory_lines`, :func:`shards_lines`, :func:`table_lines`…; the verdicts are :func:`course_lib.parallelism.plan_verdicts`).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Callable, Literal, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_lib import check, launcher, parallelism, units, verdicts
from course_lib.bench import Ratio, median_interval
from course_lib.lessons.nb11_memory import memory_lines, miss_line  # noqa: F401  section 5's, re-exported
from course_lib.parallelism import Row

Op = tuple[Literal["F", "B"], int]  # a forward or backward pass of micro-batch i


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
    """One micro-batch's share of the batch loss: its mean squared error over the number of micro-batches
    `micro`, so that the shares' gradients add up to the whole batch's (equal micro-batches)."""
    return F.mse_loss(out, target) / micro


def require(row: dict) -> dict:
    """A :func:`check.agreement` row as it is, or its line raised when it is not close: a script
    stops at the first comparison that fails (the launcher names the rank)."""
    if not row["ok"]:
        raise AssertionError(check.fmt_agreement(row))
    return row


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
# The releases whose schedule refuses fewer micro-batches than stages (a ValueError when it is
# built), as read in the wheels' schedules.py: 2.6.0 has no such check; 2.7.1 to 2.10.0 check in
# PipelineScheduleSingle (GPipe too); 2.11.0 and 2.14.1 in Schedule1F1B only.
API_REFUSES_FEW_MICRO = {"gpipe": ("2.7", "2.11"), "1f1b": ("2.7", None)}  # [from, until)


def api_skip(kind: str, micro: int, stages: int, backend: str, version: str | None = None) -> str | None:
    """Why PyTorch's own schedule for `kind` (:data:`API_SCHEDULES`) is not run here, in one
    sentence; None when it runs. `version` defaults to this torch's."""
    name = API_SCHEDULES[kind]
    version = torch.torch_version.TorchVersion(version or torch.__version__)
    since, until = API_REFUSES_FEW_MICRO[kind]
    if micro < stages and version >= since and (until is None or version < until):
        return f"{name} in torch {version} wants at least as many micro-batches as stages ({micro} < {stages})."
    if kind == "1f1b" and backend == "gloo" and version < API_1F1B_GLOO:
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
        """Where the formula and the replay fall against the measured interval, and what the gap is made of."""
        med, lo, hi = self.spread(self.measured)
        sim = self.spread(self.simulated)[0]
        if lo <= self.formula <= hi:
            return "the formula: within the measured interval"
        side = "above" if lo > self.formula else "below"
        if lo <= sim <= hi:
            return f"{side} the formula; the replay within: these stages' passes were not equal"
        if lo > sim:
            return f"{side} the formula and the replay: {med - sim:+.1%} of the step beyond the median passes{OUTSIDE_MARK}"
        return f"{side} the formula and below that too: these steps' passes varied about the replay's medians"


OUTSIDE_MARK = " (*)"
OUTSIDE = ("(*) idle beyond a replay of the median passes, not split here; guesses: passes that vary from one to the "
           "next (the replay runs each at its median), a message in flight, Python between passes, the OS")


def footnoted(text: str) -> str:
    """`text`, and below it what (*) may be where a line of it ends with the mark."""
    return "\n".join([text] + [OUTSIDE] * any(ln.endswith(OUTSIDE_MARK) for ln in text.splitlines()))


def bubble_lines(bubbles: Sequence[Bubble]) -> str:
    """One table: each schedule and m, its idle share (measured: median, interval over the steps; by the
    formula; replayed from each step's own pass times), its verdict; below, once, what (*) may be."""
    lines = [f"{'schedule':<8} {'m':>3} | {'idle, measured':>24} | formula | replay | verdict"]
    for b in bubbles:
        med, lo, hi = b.spread(b.measured)
        lines.append(f"{b.schedule:<8} {b.micro:>3} | {med:>7.1%} ({lo:.1%}–{hi:.1%}) | {b.formula:>7.1%} | "
                     f"{b.spread(b.simulated)[0]:>6.1%} | {b.verdict()}")
    return footnoted("\n".join(lines))


def bubbles(results: dict) -> list[Bubble]:
    """A :class:`Bubble` per schedule and micro-batch count of `results`."""
    p = results["stages"]
    out = []
    for (kind, m), steps in timelines(results).items():
        sims = [idle_fractions(simulate([schedule(kind, s, p, m) for s in range(p)], *pass_times(ps, p)), p)
                for ps in steps]
        out.append(Bubble(kind, p, m, [sum(idle_fractions(ps, p)) / p for ps in steps], [sum(f) / p for f in sims]))
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


# ---- the notebook's lines from the jobs' results ------------------------------------------------

def orders(stages: int, micro: int) -> str:
    """Each stage's order of passes in GPipe's schedule and 1F1B's, as 'F0 F1 B0 B1'."""
    def text(ops: Sequence[Op]) -> str:
        return " ".join(f"{k}{i}" for k, i in ops)
    return "\n".join(f"stage {s}, m = {micro}:  GPipe {text(gpipe(micro))}\n{'':>17}1F1B  "
                     f"{text(one_f_one_b(s, stages, micro))}" for s in range(stages))


def jobs_line(stages: int, backend: str, folder: object, profile: str) -> str:
    """The setup cell's line: the processes each job starts, where, and the folder of their files;
    in the gpu profile with fewer GPUs than stages, that the jobs take the cpu profile's sizes."""
    where = "one GPU each" if backend == "nccl" else "the CPU"
    fewer = (f"Fewer than {stages} GPUs: the {stages} stages run on the CPU with the cpu profile's sizes.\n"
             if profile == "gpu" and backend == "gloo" else "")
    return (f"{fewer}jobs: {stages} processes (pipeline stages; tensor-parallel ranks in section 7; section 8 uses "
            f"4) on {where} ({backend}), 1 thread each (OMP_NUM_THREADS=1); files in {folder}")


def rig(n: int, unit: str, results: dict) -> str:
    """A job's processes, backend and device from its results: '2 stages, gloo, cpu, 1 thread per stage'."""
    where = (torch.cuda.get_device_name() if results["device"].startswith("cuda")
             else f"cpu, {results.get('threads', 1)} thread per {unit}")
    return f"{n} {unit}s, {results['backend']}, {where}"


def job_line(run: launcher.Run, rig: str) -> str:
    """The command a job ran, as you would type it, and its wall-clock time on `rig`."""
    return f"\n$ {launcher.shell(run.command)}\nfinished in {run.seconds:.1f} s (wall clock, start-up included) | {rig}"


def idle_lines(idle: Sequence[Sequence[float]]) -> list[str]:
    """Each stage's idle fraction of the step (`idle[step][stage]`): median and spread over the steps."""
    lines = []
    for s in range(len(idle[0])):
        med, lo, hi, _ = median_interval([row[s] for row in idle])
        lines.append(f"stage {s}: idle {med:.1%} of the step ({lo:.1%}–{hi:.1%} over {len(idle)} steps)")
    return lines


def span_table(steps: dict, busy: dict, idle: dict, ratios: dict, vs: dict, rig: str) -> str:
    """Section 4's steps as one table, keyed (schedule, m): the step (`steps`, a Timing: median and
    quartiles), its idle share (`idle`), each stage's busy time (`busy`, s), its speed-up over the
    smallest m (`ratios`, paired) and 1F1B's over GPipe at the same m (`vs`, keyed m, paired);
    below it, why, for each speed-up over the smallest m that the turns tell apart."""
    lo, paired = min(k for _, k in steps), [r for r in [*ratios.values(), *vs.values()] if r.rounds]
    lines = [f"one step of each schedule and m, in turns | {rig}",
             f"{'schedule':<8} {'m':>3}  {'step, ms (quartiles)':<22} {'idle':>5}  {'busy per stage, ms':<18}  "
             f"{f'vs m = {lo}, paired':<28}  1F1B vs GPipe, paired"]
    def ms(s: float) -> str:  # 3 significant digits, trailing zeros kept: 5.00, 2.90, 323
        return f"{s * 1e3:#.3g}".rstrip(".")

    for kind, k in sorted(steps, key=lambda key: (key[0] != "gpipe", key[1])):  # GPipe first, then 1F1B
        t = steps[(kind, k)]
        step, stages = f"{ms(t.median_s)} ({ms(t.lo_s)}–{ms(t.hi_s)})", ", ".join(ms(b) for b in busy[(kind, k)])
        lines.append(f"{kind:<8} {k:>3}  {step:<22} {idle[(kind, k)]:>5.0%}  {stages:<18}  "
                     f"{getattr(ratios.get((kind, k)), 'brief', '-'):<28}  {getattr(vs.get(k), 'brief', '-') if kind == '1f1b' else ''}".rstrip())
    if paired:
        lines.append(f"ratios: {verdicts.brief_legend(paired)}")
    said: dict[str, list[str]] = {}  # one line per reason, naming the steps it holds for
    for (kind, k), r in ratios.items():
        if r.clear:
            why = why_span(r, [idle[(kind, lo)], idle[(kind, k)]], max(b / a for a, b in zip(busy[kind, lo], busy[kind, k])))
            said.setdefault(why, []).append(f"{kind} m = {k}")
    lines += [f"1F1B vs GPipe at m = {k}: {r.phrase}, beyond the spread, where the formula gives both one span; idle "
              f"{idle['1f1b', k]:.0%} against {idle['gpipe', k]:.0%}, stage 0's passes {busy['1f1b', k][0] / busy['gpipe', k][0]:.2f}"
              "× as long: what made the gap is not measured apart" for k, r in sorted(vs.items()) if r.clear]
    return "\n".join(lines + [f"{', '.join(steps)}: {why}" for why, steps in said.items()])


def why_span(ratio: Ratio, idle: Sequence[float], busy: float) -> str:
    """Why a step with more micro-batches took less or more time than one with fewer, where the turns
    tell them apart (the figures are in :func:`span_table`'s columns): `ratio` is its speed-up, `idle`
    the two idle shares (fewer, more), `busy` how many times as long the passes of the stage whose grew most took."""
    if ratio.value > 1:
        return "shorter: the idle time won back " + (
            f"outweighed passes up to {busy:.2f}× as long" if busy >= 1.05 else "with every stage's passes less than 5 % longer")
    return (f"longer, {'although' if idle[1] < idle[0] else 'and'} the idle share went "
            f"{' → '.join(f'{v:.0%}' for v in idle)}: a stage's passes took up to {busy:.2f}× as long in all")


# ---- 2D: FSDP over dp × tensor parallel over tp (section 8) ------------------------------------

def mlp_2d_elements(width: int, layers: int, dp: int, tp: int) -> float:
    """Parameters one rank of a dp × tp mesh holds of :func:`models.mlp_stack`: tensor parallelism
    cuts both weights and the first bias over tp, FSDP cuts what each tp rank has over dp; the
    second Linear's bias stays whole over tp (it is added once, after the sum) and is cut over dp."""
    d = width
    return layers * ((4 * d * d + 4 * d + 4 * d * d) / (dp * tp) + d / dp)


def shards_lines(two_d: dict, expected: dict[str, int]) -> str:
    """scripts/fsdp_tp.py's results as section 8 shows them: rank 0's groups and its shards of the
    first block with their DTensor placements, then each rank's bytes of parameters, gradients
    and AdamW state beside one process's and the formula's (`expected`), in KiB, and rank 0's
    share of one process's model state."""
    rank0, keys = two_d["per_rank"][0], ("params", "grads", "optim")
    lines = [f"rank 0: dp group {rank0['groups']['dp']}, tp group {rank0['groups']['tp']}"]
    for name, full, local, where in list(zip(two_d["names"], two_d["shapes"], rank0["local_shapes"],
                                             rank0["placements"]))[:4]:  # the first block
        lines.append(f"  {name:<11} whole {str(tuple(full)):<12} rank 0 {str(tuple(local)):<12} {where}")
    rows = [("one process", two_d["one_process"])]
    rows += [(f"rank {r['rank']} (dp {r['dp']}, tp {r['tp']})", r) for r in two_d["per_rank"]] + [("formula", expected)]
    lines.append(f"{'':>22}{'parameters':>12}{'gradients':>12}{'AdamW state':>13}  (KiB)")
    lines += [f"{name:>22}" + "".join(f"{b[k] / 2**10:>12.1f}" for k in keys) for name, b in rows]
    n, share = len(two_d["per_rank"]), sum(rank0[k] for k in keys) / sum(two_d["one_process"][k] for k in keys)
    lines.append(f"each rank holds {share:.2%} of one process's model state ({n} ranks: 1/{n} = {1 / n:.2%})")
    return "\n".join(lines)


# ---- which parallelism when (section 9): the plans and their formulas are course_lib.parallelism -----

def table_lines(rows: Sequence[Row]) -> str:
    """The decision table: per model, GPU count and plan, the model state per GPU, the bytes sent
    per step and their part across servers (GiB), FLOP per byte sent, the idle share, and the
    formula's parameter bytes against PyTorch's own split (✓ within 1 %), or why the plan cannot;
    `> link`: whether the FLOP per byte clears every link's threshold (parallelism.link_thresholds)."""
    G = 2**30
    lines = [f"{'model':<12}{'GPUs':>5}  {'plan':<18}{'state/GPU':>10}{'sent/step':>11}{'across':>9}{'FLOP/byte':>11}"
             f"{'> link':>8}{'idle':>6}  PyTorch's bytes vs formula"]
    for r in rows:
        head = f"{r.shape.name:<12}{r.plan.gpus:>5}  {r.plan.name:<18}"
        lines.append(head + f"cannot: {r.why_not}" if r.why_not else
                     head + f"{r.state_bytes / G:>8.2f} G{r.comm_bytes / G:>9.2f} G{r.across_bytes / G:>7.2f} G"
                     f"{r.flop_per_byte:>11,.0f}{'yes' if parallelism.above_links(r) else 'no':>8}{r.idle:>6.0%}  "
                     f"{r.fake_bytes / r.formula_param_bytes - 1:+.2%} " + ("✓" if r.agrees else "✗"))
    lines.append("state/GPU, sent/step, across (one GPU's bytes between servers) in GiB; idle: a pipeline's lower "
                 "bound; tensor parallelism's all-reduces also stall every layer (section 7), not counted here")
    return "\n".join(lines)


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


@check.exercise()
def check_row_parallel(fn: Callable[..., list[torch.Tensor]]) -> None:
    """Exercise 3: ``fn(h_parts, w_parts, bias, all_reduce)`` is every rank's output of a
    row-parallel Linear: rank r holds ``h_parts[r]`` (its hidden units) and ``w_parts[r]`` (the
    weight's columns that read them); ``all_reduce(tensors)`` gives every rank the sum."""
    g = torch.Generator().manual_seed(12)
    for world in (2, 4):
        lin = nn.Linear(16, 6)
        with torch.no_grad():
            lin.bias.copy_(torch.randn(6, generator=g) + 1)  # far from 0: a bias added W times shows
        h = torch.randn(5, 16, generator=g)
        calls = []

        def all_reduce(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
            if len(tensors) != world:
                raise AssertionError(f"all_reduce takes one tensor per rank ({world}), got {len(tensors)}.")
            if any(tuple(t.shape) != (h.shape[0], lin.out_features) for t in tensors):
                raise AssertionError(f"all_reduce got shapes {[tuple(t.shape) for t in tensors]}: in a row-parallel "
                                     f"Linear each rank all-reduces its partial sum, (batch, out) = "
                                     f"{(h.shape[0], lin.out_features)}.")
            calls.append([tuple(t.shape) for t in tensors])
            total = sum(tensors)
            return [total.clone() for _ in tensors]

        outs = fn(list(h.chunk(world, dim=1)), list(lin.weight.detach().chunk(world, dim=1)),
                  lin.bias.detach(), all_reduce)
        if len(calls) != 1:
            raise AssertionError(f"{len(calls)} all-reduces for {world} ranks: a row-parallel Linear needs "
                                 "exactly one, of the partial sums.")
        want = lin(h).detach()
        for r, out in enumerate(outs):
            if out.shape != want.shape:
                raise AssertionError(f"rank {r}'s output has shape {tuple(out.shape)}, not {tuple(want.shape)}.")
            if torch.allclose(out, want - lin.bias.detach() + world * lin.bias.detach(), atol=1e-5):
                raise AssertionError(f"rank {r}: the bias counts {world} times: add it once, after the sum.")
            if not torch.allclose(out, want, atol=1e-5, rtol=1e-5):
                raise AssertionError(f"rank {r}'s output differs from the whole Linear's by "
                                     f"{(out - want).abs().max().item():.2e}.")
    check.passed("row_parallel: one all-reduce of the partial sums, the bias once, for 2 and 4 ranks")
