"""Where a training step's time goes, read from a ``torch.profiler`` trace.

The notebook profiles in plain PyTorch (``torch.profiler.profile`` with a schedule, one
``prof.step()`` per training step) and writes the trace with ``export_chrome_trace``;
this module reads that file, the format trace viewers (Perfetto, ``chrome://tracing``)
and Holistic Trace Analysis read too:

- :func:`load_trace`: the complete events ("ph": "X"), timestamps in µs.
- :func:`breakdown`: each step's time by category. On a GPU, the GPU's timeline, as
  HTA's temporal breakdown: *compute* (kernels), *copies* (memcpy, memset), *waiting*
  (idle: the GPU waits for the CPU to queue work). On a CPU, where ops run as they are
  called: *compute* (ops), *copies* (copy, fill and concatenate ops), *waiting* (the reads
  of a tensor's value into Python that :func:`syncs` counts, ``.item()`` and the like: on a
  GPU the host would wait there for the device; on a CPU the value is ready, so only the
  read itself), *framework* (the rest: Python, dispatch, autograd).
- :func:`syncs`: per step, the calls that made the CPU wait for a device value.
- :class:`SyncCounter`: the same found while code runs, from the ops' own tags, on any
  device (on a GPU, ``torch.cuda.set_sync_debug_mode`` says it too).
"""

from __future__ import annotations

import json
import logging
import math
import time
import warnings
from contextlib import contextmanager
from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from course_lib.memory import quiet_stderr

STEP_PREFIX = "ProfilerStep#"  # the range prof.step() opens around each step
GPU_CATEGORIES = ("compute", "copies", "waiting")
CPU_CATEGORIES = ("compute", "copies", "waiting", "framework")
# ops that read a device value on the host: the CPU waits for the GPU to get there
SYNC_OPS = frozenset({"aten::_local_scalar_dense", "aten::nonzero", "aten::masked_select",
                      "aten::_unique2", "aten::unique_consecutive", "aten::unique_dim",
                      "aten::repeat_interleave"})
# ops through which user code reads a value: a read below them is the user's
SYNC_WRAPPERS = frozenset({"aten::item", "aten::is_nonzero", "aten::_is_all_true",
                           "aten::_is_any_true", "aten::equal"})
SYNC_RUNTIME = frozenset({"cudaStreamSynchronize", "cudaDeviceSynchronize",
                          "cudaEventSynchronize"})
# CPU ops that move or fill memory without arithmetic
COPY_OPS = frozenset({"aten::copy_", "aten::_to_copy", "aten::clone", "aten::cat",
                      "aten::stack", "aten::fill_", "aten::zero_", "aten::index_select",
                      "aten::_foreach_copy_", "aten::_foreach_zero_"})
GPU_COPY_CATS = frozenset({"gpu_memcpy", "gpu_memset"})
LAUNCH_CATS = frozenset({"cuda_runtime", "cuda_driver"})  # cudaLaunchKernel; cuLaunchKernel (Triton)


def load_trace(path: str | Path) -> list[dict[str, Any]]:
    """The complete events of a trace written by ``prof.export_chrome_trace(path)``, in
    time order; "ts" and "dur" in µs."""
    try:
        doc = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"No profiler trace at {path}: write it with "
                                f"prof.export_chrome_trace(path) first.") from None
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    return sorted((e for e in events if e.get("ph") == "X" and "dur" in e), key=lambda e: e["ts"])


def steps(events: Sequence[dict]) -> list[tuple[float, float]]:
    """(start, end) in µs of each ``ProfilerStep#N`` range, in order."""
    ranges = [(e["ts"], e["ts"] + e["dur"]) for e in events
              if e.get("cat") == "user_annotation" and e["name"].startswith(STEP_PREFIX)]
    if not ranges:
        raise ValueError("This trace has no ProfilerStep ranges: profile with a schedule and "
                         "call prof.step() after each training step.")
    return sorted(ranges)


def _union(intervals: Iterable[tuple[float, float]]) -> float:
    """Length of the union of (start, end) intervals."""
    total, end = 0.0, float("-inf")
    for s, e in sorted(intervals):
        if e <= end:
            continue
        total += e - max(s, end)
        end = e
    return total


def _clip(intervals: Iterable[tuple[float, float]], lo: float, hi: float) -> list[tuple[float, float]]:
    return [(max(s, lo), min(e, hi)) for s, e in intervals if e > lo and s < hi]


def _step_of(ranges: Sequence[tuple[float, float]], starts: Sequence[float], ts: float) -> int | None:
    """Index of the step range holding the time `ts` (µs), None outside every step."""
    i = bisect_right(starts, ts) - 1
    return i if i >= 0 and ts < ranges[i][1] else None


def gpu_work(events: Sequence[dict]) -> list[tuple[float, Any, dict]]:
    """Each GPU kernel, copy and fill of a trace with the CPU call that launched it:
    (launch time µs, launching thread, the GPU event), matched by correlation id to the
    earliest runtime or driver call (cudaLaunchKernel, cuLaunchKernel…), by launch time."""
    launches: dict[Any, tuple[float, Any]] = {}
    for e in events:
        c = e.get("args", {}).get("correlation")
        if e.get("cat") in LAUNCH_CATS and c is not None and c not in launches:
            launches[c] = (e["ts"], e.get("tid"))
    out = []
    for e in events:
        if e.get("cat") == "kernel" or e.get("cat") in GPU_COPY_CATS:
            launch = launches.get(e.get("args", {}).get("correlation"))
            if launch is not None:
                out.append((launch[0], launch[1], e))
    return sorted(out, key=lambda w: w[0])


def _parents(ops: Sequence[dict]) -> list[int | None]:
    """Index of each op's direct caller among `ops` (same thread), None at the top."""
    parents: list[int | None] = [None] * len(ops)
    by_thread: dict[Any, list[int]] = {}
    for i, e in enumerate(ops):
        by_thread.setdefault((e.get("pid"), e.get("tid")), []).append(i)
    for idx in by_thread.values():
        stack: list[int] = []
        for i in sorted(idx, key=lambda i: (ops[i]["ts"], -ops[i]["dur"])):
            while stack and ops[stack[-1]]["ts"] + ops[stack[-1]]["dur"] <= ops[i]["ts"]:
                stack.pop()
            parents[i] = stack[-1] if stack else None
            stack.append(i)
    return parents


def _self_times(ops: Sequence[dict]) -> list[float]:
    """Self time (µs) of each op: its duration less its direct children's, on its thread."""
    selfs = [float(e["dur"]) for e in ops]
    for i, parent in enumerate(_parents(ops)):
        if parent is not None:
            selfs[parent] -= ops[i]["dur"]
    return [max(s, 0.0) for s in selfs]


def _host_reads(ops: Sequence[dict], parents: Sequence[int | None]) -> list[int]:
    """Indices of the ops among `ops` (a trace's CPU ops and CUDA calls, `parents` from
    :func:`_parents`) that read a value for the host and count as a sync (:func:`syncs`): a
    :data:`SYNC_OPS` op called by user code, directly or through :data:`SYNC_WRAPPERS`, not
    by another op; in a trace with CUDA calls, only one with a synchronize or a copy below it."""
    on_gpu = any(e.get("cat") in LAUNCH_CATS for e in ops)
    waited_in: set[int] = set()  # ops with a synchronize or copy somewhere below them
    for i, e in enumerate(ops):
        if e.get("cat") in LAUNCH_CATS and (e["name"] in SYNC_RUNTIME or e["name"].startswith("cudaMemcpy")):
            j = parents[i]
            while j is not None and j not in waited_in:
                waited_in.add(j)
                j = parents[j]
    reads = []
    for i, e in enumerate(ops):
        if e.get("cat") != "cpu_op" or e["name"] not in SYNC_OPS:
            continue
        j = parents[i]
        while j is not None and ops[j]["name"] in SYNC_WRAPPERS:  # called by user code (item, is_nonzero…)
            j = parents[j]
        if j is None and (not on_gpu or i in waited_in):  # … or by an op, whose own business it is
            reads.append(i)
    return reads


def _cpu_breakdown(events: Sequence[dict], ranges: Sequence[tuple[float, float]]) -> list[dict[str, float]]:
    ops = [e for e in events if e.get("cat") in ("cpu_op", *LAUNCH_CATS)]
    selfs = _self_times(ops)
    reads = set(_host_reads(ops, _parents(ops)))  # the reads syncs() counts, by the same rule
    starts = [s for s, _ in ranges]
    out = [dict.fromkeys(CPU_CATEGORIES, 0.0) for _ in ranges]
    for k, (e, self_us) in enumerate(zip(ops, selfs)):
        i = _step_of(ranges, starts, e["ts"])
        if i is None:
            continue  # outside every step
        name = e["name"]
        if k in reads or name in SYNC_RUNTIME:
            cat = "waiting"
        elif name in COPY_OPS:
            cat = "copies"
        elif name.startswith("aten::"):
            cat = "compute"
        else:
            continue  # autograd nodes, runtime calls: their self time is framework
        out[i][cat] += self_us
    for row, (s, e) in zip(out, ranges):
        row["framework"] = max(0.0, (e - s) - sum(row.values()))
    return [{k: v / 1e6 for k, v in row.items()} for row in out]


def _gpu_breakdown(events: Sequence[dict], ranges: Sequence[tuple[float, float]]) -> list[dict[str, float]]:
    starts = [s for s, _ in ranges]
    work: list[list[dict]] = [[] for _ in ranges]  # the GPU work each step queued
    for launched, _, e in gpu_work(events):
        i = _step_of(ranges, starts, launched)
        if i is not None:
            work[i].append(e)
    if not any(work):
        raise ValueError("This trace has no GPU kernels inside its steps: profile with "
                         "ProfilerActivity.CUDA.")
    out = []
    for i, w in enumerate(work):
        if not w:
            out.append(dict.fromkeys(GPU_CATEGORIES, 0.0))
            continue
        begin = min(e["ts"] for e in w)  # the GPU's step: from its first kernel ...
        later = [min(e["ts"] for e in nxt) for nxt in work[i + 1:i + 2] if nxt]
        end = later[0] if later else max(e["ts"] + e["dur"] for e in w)  # ... to the next step's
        kernels = _clip([(e["ts"], e["ts"] + e["dur"]) for e in w if e["cat"] == "kernel"], begin, end)
        moves = _clip([(e["ts"], e["ts"] + e["dur"]) for e in w if e["cat"] != "kernel"], begin, end)
        compute = _union(kernels)
        copies = _union(kernels + moves) - compute  # copies that overlap no kernel
        out.append({"compute": compute / 1e6, "copies": copies / 1e6,
                    "waiting": max(0.0, (end - begin) - compute - copies) / 1e6})
    return out


def breakdown(events: Sequence[dict], device: torch.device | str) -> list[dict[str, float]]:
    """Each profiled step's time by category, in seconds: on a CUDA device the GPU's
    timeline (:data:`GPU_CATEGORIES`), on a CPU the ops' self times (:data:`CPU_CATEGORIES`);
    see the module's docstring. The categories of a step add up to its length."""
    ranges = steps(events)
    if torch.device(device).type == "cuda":
        return _gpu_breakdown(events, ranges)
    return _cpu_breakdown(events, ranges)


@dataclass
class StepSyncs:
    """The synchronising calls in one profiled step: op or runtime name -> count, and the
    seconds the CPU spent in them."""

    counts: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def syncs(events: Sequence[dict]) -> list[StepSyncs]:
    """Per profiled step, the calls that make the CPU wait for a device value: ops that
    read one (``.item()``, ``bool()``, ``nonzero``…, :data:`SYNC_OPS`) and CUDA's
    synchronize calls (:data:`SYNC_RUNTIME`), each counted once.

    A read made inside another op's implementation (a CPU optimizer reading its step
    count) is that op's business, not counted; in a trace with CUDA calls, a read that
    waited for nothing (no synchronize or copy inside it: a CPU tensor's value) is not
    counted either."""
    ranges = steps(events)
    starts = [s for s, _ in ranges]
    ops = [e for e in events if e.get("cat") in ("cpu_op", *LAUNCH_CATS)]
    out = [StepSyncs() for _ in ranges]
    counted_spans: list[tuple[float, float, Any]] = []

    def add(e: dict) -> None:
        i = _step_of(ranges, starts, e["ts"])
        if i is not None:
            out[i].counts[e["name"]] = out[i].counts.get(e["name"], 0) + 1
            out[i].seconds += e["dur"] / 1e6

    for i in _host_reads(ops, _parents(ops)):
        e = ops[i]
        add(e)
        counted_spans.append((e["ts"], e["ts"] + e["dur"], e.get("tid")))
    for e in ops:
        if e.get("cat") in LAUNCH_CATS and e["name"] in SYNC_RUNTIME and not any(
                s <= e["ts"] < t and tid == e.get("tid") for s, t, tid in counted_spans):
            add(e)
    return out


def is_sync(func: torch._ops.OpOverload, args: Sequence, out: Any, host_reads: bool = True) -> bool:
    """Whether an ATen call makes the host wait for the device: its result is a value the
    host reads (tag ``data_dependent_output``: ``.item()``, ``bool()``, ``float()``), its
    output's shape depends on the data (``dynamic_output_shape``: ``nonzero``, boolean
    masks), or it copies a device tensor to the CPU (``.cpu()``, ``.tolist()`` on a GPU).

    A read of a CPU tensor waits for nothing; ``host_reads=True`` counts it all the same,
    for code run on a CPU in place of a GPU."""
    tags = set(func.tags)
    if torch.Tag.data_dependent_output in tags or torch.Tag.dynamic_output_shape in tags:
        first = next((a for a in args if isinstance(a, torch.Tensor)), None)
        return host_reads or (first is not None and first.device.type != "cpu")
    if func.overloadpacket in (torch.ops.aten._to_copy, torch.ops.aten.copy_):
        src = args[1] if func.overloadpacket is torch.ops.aten.copy_ else args[0]
        dst = args[0] if func.overloadpacket is torch.ops.aten.copy_ else out
        return (isinstance(src, torch.Tensor) and isinstance(dst, torch.Tensor)
                and src.device.type != "cpu" and dst.device.type == "cpu")
    return False


class SyncCounter(TorchDispatchMode):
    """Counts, while code runs, the ATen calls that make the host wait for a GPU
    (:func:`is_sync`): ``with SyncCounter(device) as sc: …; sc.calls`` lists them in order.

    On a CUDA `device`, only reads of GPU tensors count (an optimizer's step count kept on
    the CPU is read for free). On a CPU, every read counts: it would wait if the tensors
    were on a GPU, so keep host-side numbers (a non-fused optimizer's step) out of the code
    measured. It sees ops, so on a CPU it misses what is not an op there: ``.tolist()``,
    ``.numpy()`` and ``.cpu()`` of a CPU tensor read host memory directly; on a GPU each
    is a copy to the host and counted."""

    def __init__(self, device: torch.device | str = "cpu") -> None:
        super().__init__()
        self.host_reads = torch.device(device).type == "cpu"
        self.calls: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if is_sync(func, args, out, self.host_reads):
            self.calls.append(str(func.overloadpacket).replace("aten.", "aten::"))
        return out

    @property
    def count(self) -> int:
        return len(self.calls)


@contextmanager
def dynamo_log(graph_breaks: bool = True) -> Iterator[list[logging.LogRecord]]:
    """TorchDynamo's log while compiling, collected instead of printed: what
    ``TORCH_LOGS="graph_breaks"`` prints (``torch._logging.set_logs(graph_breaks=True)``),
    and Dynamo's warnings, as ``logging.LogRecord`` objects in the list yielded. Python
    warnings raised meanwhile (older Dynamo's "graph break" UserWarnings) are not shown."""
    records: list[logging.LogRecord] = []
    quiet = warnings.catch_warnings()  # and Dynamo's UserWarnings (older torch) unshown

    def keep(record: logging.LogRecord) -> bool:
        if record.name.startswith("torch._dynamo"):
            records.append(record)
            return False  # collected, not printed
        return True

    torch._logging.set_logs(graph_breaks=graph_breaks)  # re-creates torch's log handlers
    handlers = {h for name in ("torch", "torch._dynamo") for h in logging.getLogger(name).handlers}
    for h in handlers:
        h.addFilter(keep)
    try:
        with quiet:
            warnings.simplefilter("ignore")
            yield records
    finally:
        for h in handlers:
            h.removeFilter(keep)
        torch._logging.set_logs()


# ---- one training step's ops by kind, profiled in turns (CPU profiler; notebook 03) ------------

OP_KINDS = ("convolutions and matmuls", "dtype conversions", "GradScaler", "everything else")
_MATMULS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "aten::linear"}
_CONVERSIONS = {"aten::to", "aten::_to_copy", "aten::copy_"}


def op_kind(name: str) -> str:
    """The kind of a profiler op name (one of :data:`OP_KINDS`)."""
    if "conv" in name.lower() or name in _MATMULS:
        return OP_KINDS[0]
    if name in _CONVERSIONS:
        return OP_KINDS[1]
    if "_amp_" in name:  # _amp_foreach_non_finite_check_and_unscale_, _amp_update_scale_
        return OP_KINDS[2]
    return OP_KINDS[3]


@dataclass
class StepProfile:
    """Milliseconds of one training step's CPU ops (self time), by kind and by op, and the wall
    time of the same profiled call."""

    name: str
    steps: int  # rounds profiled; `by_op` and `wall_ms` are the median round's
    by_op: dict[str, float]  # op name -> ms in that step
    wall_ms: float | None = None  # wall time of that profiled step, the profiler's overhead included
    threads: int = 1  # torch's intra-op threads when it was profiled

    @property
    def occupancy(self) -> float:
        """Op time over wall time × threads: at most 1 (ops on a thread do not overlap and self
        time excludes children), so a larger value means the profile mismeasured."""
        return self.total / (self.wall_ms * self.threads) if self.wall_ms else math.nan

    @property
    def by_kind(self) -> dict[str, float]:
        out = dict.fromkeys(OP_KINDS, 0.0)
        for op, ms in self.by_op.items():
            out[op_kind(op)] += ms
        return out

    @property
    def total(self) -> float:
        return sum(self.by_op.values())

    @property
    def top(self) -> tuple[str, float]:
        """The op with the most self time, and its ms per step."""
        return max(self.by_op.items(), key=lambda kv: kv[1])

    def __str__(self) -> str:
        kinds = ", ".join(f"{k} {ms:.3g} ms ({ms / max(self.total, 1e-12):.0%})" for k, ms in self.by_kind.items())
        wall = f" (wall {self.wall_ms:.3g} ms, the median of {self.steps} rounds)" if self.wall_ms is not None else ""
        return f"{self.name:<16} | {self.total:>7.3g} ms of op time per step{wall} | {kinds}"


def profile_in_turns(steps: dict[str, Callable[[], None]], rounds: int = 3) -> dict[str, StepProfile]:
    """Profile one call of each of `steps` per round, in turns (a slow spell hits all alike), on
    the CPU: self time of every op and the call's wall time. Each step runs once unprofiled and
    once profiled first, so that neither its own first call nor the profiler's start-up lands in
    a round. Of the rounds, the one with the median op time is kept, with its own wall time: the
    op time and the wall describe the same call (a mean would let one slow round pass for every
    round, and set it beside another round's wall)."""
    from torch.profiler import ProfilerActivity, profile

    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}.")

    def profiled(fn: Callable[[], None]) -> tuple[dict[str, float], float]:
        start = time.perf_counter()
        with quiet_stderr(), profile(activities=[ProfilerActivity.CPU]) as prof:
            fn()
        wall = (time.perf_counter() - start) * 1e3
        by_op: dict[str, float] = {}
        for e in prof.key_averages():
            by_op[e.key] = by_op.get(e.key, 0.0) + e.self_cpu_time_total / 1e3
        return by_op, wall

    for fn in steps.values():  # warm-up: first calls, and the profiler's own start-up
        fn()
        profiled(fn)
    runs: dict[str, list[tuple[dict[str, float], float]]] = {n: [] for n in steps}
    for _ in range(rounds):
        for name, fn in steps.items():
            runs[name].append(profiled(fn))
    threads = torch.get_num_threads()
    kept = {n: sorted(r, key=lambda run: sum(run[0].values()))[(len(r) - 1) // 2] for n, r in runs.items()}
    return {n: StepProfile(n, rounds, by_op, wall, threads) for n, (by_op, wall) in kept.items()}


def profile_verdict(p: StepProfile, base: StepProfile) -> str:
    """Where `p`'s op time differs from `base`'s, by kind, and its largest op set beside the same
    op in `base`: the measured reason one step is faster or slower than the other."""
    mine, ref = p.by_kind, base.by_kind
    diffs = {k: mine[k] - ref[k] for k in OP_KINDS}
    biggest = max(diffs, key=lambda k: abs(diffs[k]))
    op, ms = p.top
    total_diff = p.total - base.total
    share = diffs[biggest] / total_diff if total_diff else 0.0
    head = (f"{p.name} vs {base.name}: {p.total:.3g} vs {base.total:.3g} ms of op time per step; "
            + "; ".join(f"{k} {mine[k]:.3g} vs {ref[k]:.3g} ms" for k in OP_KINDS if mine[k] or ref[k]))
    largest = (f"the step's largest op, {op}, took {ms:.3g} ms ({ms / max(p.total, 1e-12):.0%} of its op time) "
               f"against {base.by_op.get(op, 0.0):.3g} ms in {base.name}")
    if op not in base.by_op:  # measured: the other step's profile has no such op at all
        largest += f": an op the {base.name} step never called, so another code path, not the same kernel slower"
    if abs(total_diff) < 0.1 * base.total:
        change = f"the two totals are within 10% of each other; the largest change by kind is {biggest}, {diffs[biggest]:+.3g} ms"
    else:
        change = (f"{biggest} account for {share:.0%} of the {total_diff:+.3g} ms difference" if 0 < share
                  else f"the largest change by kind is {biggest}, {diffs[biggest]:+.3g} ms")
    return f"{head}\n  {change}; {largest}"


def amdahl_bound(p: StepProfile, kind: str = OP_KINDS[0]) -> float:
    """How many times faster `p`'s step could get, at most, if the ops of `kind` took no time
    at all: 1 / (1 − their share of the op time)."""
    share = p.by_kind[kind] / max(p.total, 1e-12)
    return math.inf if share >= 1 else 1 / (1 - share)
