"""The roofline: how fast can an op run on this device, given the FLOPs it does per byte
it moves?

An op that does F FLOPs and moves B bytes to and from memory has arithmetic intensity
I = F / B. On a device whose peak compute is P FLOP/s and memory bandwidth W B/s, it
can run at most at min(P, I·W) FLOP/s: below the ridge I = P / W it is *memory-bound*
(bandwidth limits it), above it *compute-bound*. Both peaks are measured in the same run
(``bench.peak_matmul``, ``bench.peak_bandwidth``).

- :func:`count_ops`: every ATen op a function runs, with its FLOPs (PyTorch's own
  formulas, ``torch.utils.flop_counter``, for matmuls and attention, of which a causal call
  counts the part of the square its kernel computes; one per element
  for the rest) and the bytes it reads and writes, each operand once (the ideal traffic).
- :func:`measure_ops`: the same ops timed by ``torch.profiler`` (on a CPU each op's own
  record, on a GPU the kernels it launched), grouped by op and shapes: what to place on the
  plot; and the whole step timed without the profiler in the same turns, to set their sum beside.
"""

from __future__ import annotations

import math
import os
import re
import statistics
import tempfile
import time
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch
from torch.profiler import ProfilerActivity, profile, record_function
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import FlopCounterMode, flop_registry, sdpa_backward_flop_count, sdpa_flop_count

from course_lib import bench, units
from course_lib.device import sync
from course_lib.memory import quiet_stderr
from course_lib.profiling import COPY_OPS, gpu_work, load_trace

KINDS = ("matmul", "attention", "element-wise", "reduction & other", "copy", "dispatch & views")
_COPIES = COPY_OPS | {"aten::embedding", "aten::embedding_dense_backward"}  # gathers move data too
_NO_TRAFFIC = {"aten::empty", "aten::empty_strided", "aten::empty_like", "aten::detach",
               "aten::lift_fresh", "aten::_unsafe_view", "aten::resize_"}
_RANGE = "roofline op #"


def _name(func: torch._ops.OpOverload) -> str:
    return str(func.overloadpacket).replace("aten.", "aten::", 1)


def short_name(name: str) -> str:
    """An op's name for a label: without ``aten::``, its leading and trailing underscores and
    ``native_``, any fused attention as "sdpa", "_backward" as " bwd":
    ``aten::_scaled_dot_product_flash_attention_for_cpu_backward`` -> "sdpa bwd",
    ``aten::native_layer_norm_backward`` -> "layer_norm bwd", ``aten::_fused_adamw_`` -> "fused_adamw"."""
    base = name.split("::")[-1]
    backward = base.endswith("_backward")
    base = base.removesuffix("_backward").strip("_")
    if "attention" in base:
        base = "sdpa"
    base = re.sub(r"^native_", "", base)
    return base + (" bwd" if backward else "")


def touched_bytes(t: torch.Tensor) -> int:
    """Bytes a tensor's elements occupy in memory, each once: a broadcast (stride 0)
    dimension is not repeated."""
    n = math.prod(s for s, st in zip(t.shape, t.stride()) if st != 0)
    return n * t.element_size()


def intensity(flops: float, nbytes: float) -> float:
    """Arithmetic intensity: FLOPs per byte moved (infinite when nothing moves)."""
    return flops / nbytes if nbytes else math.inf


@dataclass(frozen=True)
class OpCost:
    """One call of an ATen op: its name as the profiler writes it, its tensor inputs'
    shapes, its kind (:data:`KINDS`), FLOPs and the bytes it reads and writes."""

    name: str
    shapes: tuple[tuple[int, ...], ...]
    kind: str
    flops: float
    bytes: float

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, FLOPs per byte."""
        return intensity(self.flops, self.bytes)


def _kind(name: str, func: torch._ops.OpOverload) -> str:
    if "attention" in name:
        return "attention"
    if func.overloadpacket in flop_registry:
        return "matmul"
    if name in _COPIES:
        return "copy"
    if torch.Tag.pointwise in func.tags or name.startswith("aten::_foreach_") or "adam" in name:
        return "element-wise"
    if func.is_view or _composite(func):  # a profiler's self time of aten::linear or aten::view: routing, no arithmetic
        return "dispatch & views"
    return "reduction & other"


def _composite(func: torch._ops.OpOverload) -> bool:
    """Whether `func` is written in other ATen ops (CompositeImplicitAutograd: aten::linear calls addmm), so that its
    own time under a profiler is its dispatch, its arithmetic counted in the ops it calls."""
    try:
        return func.has_kernel_for_dispatch_key(torch._C.DispatchKey.CompositeImplicitAutograd)
    except RuntimeError:  # an overload the dispatcher does not list under this name
        return False


def kind_of(name: str) -> str | None:
    """The kind (:data:`KINDS`) of an ATen op named as the profiler writes it ('aten::mm' -> 'matmul'); None
    for a record that is not an ATen op (the profiler's step ranges, autograd's and the optimizer's own)."""
    packet = getattr(torch.ops.aten, name.removeprefix("aten::"), None) if name.startswith("aten::") else None
    overloads = packet.overloads() if packet is not None else []
    if not overloads:
        return None
    pointwise = next((f for f in map(lambda o: getattr(packet, o), overloads) if torch.Tag.pointwise in f.tags), None)
    return _kind(name, pointwise or getattr(packet, "default" if "default" in overloads else overloads[0]))  # the
    # profiler names no overload: aten::add is add.Tensor (pointwise) as often as the scalar add.default (untagged)


def profiled_kinds(averages: Sequence[Any], device_type: str) -> dict[str, float]:
    """Seconds by kind (:func:`kind_of`) of the ATen ops in a profile (`averages`: ``prof.key_averages()``),
    each op's own (self) time: on a CPU its CPU time, on a GPU that of the kernels it launched itself; the
    costliest kind first."""
    out: dict[str, float] = {}
    for e in averages:
        if (kind := kind_of(e.key)) is not None:
            out[kind] = out.get(kind, 0.0) + (e.self_device_time_total if device_type == "cuda"
                                              else e.self_cpu_time_total) / 1e6
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def _attention_flops(name: str, args: Sequence) -> float:
    """FLOPs of a fused attention call by PyTorch's own formulas, the full T×S square."""
    t = [a.shape for a in args if isinstance(a, torch.Tensor)]
    if name.endswith("_backward"):  # (grad_out, query, key, value, …)
        return sdpa_backward_flop_count(t[0], t[1], t[2], t[3])
    return sdpa_flop_count(t[0], t[1], t[2])  # (query, key, value, …)


def causal_share(func: torch._ops.OpOverload, args: Sequence, kwargs: dict) -> float:
    """The share of the T×S score square a fused attention call computes: 1, or for a causal
    call (``is_causal=True``, the top-left mask: query i sees keys 0…i) the entries at or below
    the diagonal, (T + 1) / 2T when T = S. The fused kernels skip the blocks above it, and
    PyTorch's formulas count the whole square, so a causal call would seem to do twice the
    work it does (FlashAttention's benchmarks halve the count the same way)."""
    names = [a.name for a in func._schema.arguments]
    if "is_causal" not in names or "query" not in names or "key" not in names:
        return 1.0
    i = names.index("is_causal")
    if not (args[i] if i < len(args) else kwargs.get("is_causal", False)) or names.index("key") >= len(args):
        return 1.0
    T, S = (args[names.index(n)].shape[-2] for n in ("query", "key"))  # (B, heads, T or S, head size)
    kept = T * (T + 1) // 2 if T <= S else S * (S + 1) // 2 + (T - S) * S  # sum of min(i + 1, S)
    return kept / (T * S)


def _written(func: torch._ops.OpOverload, args: Sequence, kwargs: dict) -> list[torch.Tensor]:
    """The tensors an op writes in place (its schema marks them ``Tensor(a!)``)."""
    out = []
    for i, arg in enumerate(func._schema.arguments):
        if arg.alias_info is not None and arg.alias_info.is_write:
            value = args[i] if i < len(args) else kwargs.get(arg.name)
            out += [t for t in tree_flatten(value)[0] if isinstance(t, torch.Tensor)]
    return out


def op_cost(func: torch._ops.OpOverload, args: Sequence, kwargs: dict, out: Any) -> OpCost | None:
    """What one ATen call costs (None for views and ops that move no data)."""
    name = _name(func)
    if func.namespace != "aten" or func.is_view or name in _NO_TRAFFIC:  # profiler marks, views
        return None
    inputs = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
    outputs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
    returned = {id(t) for t in outputs}
    outputs += [t for t in _written(func, args, kwargs) if id(t) not in returned]  # in place, returning None
    unique = list({id(t): t for t in inputs}.values())
    nbytes = sum(touched_bytes(t) for t in unique) + sum(touched_bytes(t) for t in outputs)
    kind = _kind(name, func)
    if func.overloadpacket in flop_registry:
        flops = flop_registry[func.overloadpacket](*args, **kwargs, out_val=out)
    elif kind == "attention":  # a fused attention op without a registered formula (older torch)
        flops = _attention_flops(name, args)
    elif kind == "copy":
        flops = 0
    elif lists := [a for a in args if isinstance(a, (list, tuple)) and a and isinstance(a[0], torch.Tensor)]:
        flops = sum(t.numel() for t in lists[0])  # a foreach / fused op: one per element of each tensor
    else:  # one operation per element of the largest operand
        flops = max((t.numel() for t in inputs + outputs), default=0)
    if kind == "attention":
        flops *= causal_share(func, args, kwargs)  # what the kernel computes, not the whole square
    shapes = tuple(tuple(a.shape) for a in args if isinstance(a, torch.Tensor) and a.dim() > 0)
    return OpCost(name, shapes, kind, float(flops), float(nbytes))


class OpCostRecorder(TorchDispatchMode):
    """``with OpCostRecorder() as c: …`` records an :class:`OpCost` for every ATen call that
    moves data, in ``c.ops``. ``timed=True`` also opens a profiler range around every call,
    ``roofline op #k`` with k counted from `first`, and keeps ``c.ranges[k]`` for those
    counted, so that :func:`measure_ops` can time them."""

    def __init__(self, timed: bool = False, first: int = 0) -> None:
        super().__init__()
        self.ops: list[OpCost] = []
        self.timed = timed
        self.next = first  # the next range's number
        self.ranges: dict[int, OpCost] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        k = self.next
        if self.timed:
            self.next += 1
            with record_function(f"{_RANGE}{k}"):
                out = func(*args, **kwargs)
        else:
            out = func(*args, **kwargs)
        count = op_cost(func, args, kwargs, out)
        if count is not None:
            self.ops.append(count)
            if self.timed:
                self.ranges[k] = count
        return out


def count_ops(fn: Callable[[], object]) -> list[OpCost]:
    """The ops `fn` runs, in order, each with its FLOPs and bytes."""
    with OpCostRecorder() as c:
        fn()
    return c.ops


def total_flops(ops: Sequence[OpCost], kinds: Sequence[str] = ("matmul", "attention")) -> float:
    """FLOPs of the ops of the given kinds (by default those PyTorch's formulas count)."""
    return sum(o.flops for o in ops if o.kind in kinds)


@dataclass
class OpTime:
    """One op with given input shapes, over a step: its calls, FLOPs, bytes and seconds."""

    name: str
    shapes: tuple[tuple[int, ...], ...]
    kind: str
    calls: int
    flops: float
    bytes: float
    seconds: float
    spread: tuple[float, float] = (0.0, 0.0)  # its least and most seconds in one step, over the steps

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, FLOPs per byte."""
        return intensity(self.flops, self.bytes)

    @property
    def rate(self) -> float:
        """Achieved FLOP/s."""
        return self.flops / self.seconds if self.seconds > 0 else 0.0

    @property
    def bandwidth(self) -> float:
        """Achieved B/s."""
        return self.bytes / self.seconds if self.seconds > 0 else 0.0

    @property
    def short(self) -> str:
        """The op's short name (:func:`short_name`): "sdpa bwd", "mm"."""
        return short_name(self.name)

    @property
    def label(self) -> str:
        """Short name and the first three input shapes: "mm 512×2048 · 2048×128"."""
        dims = " · ".join("×".join(map(str, s)) for s in self.shapes[:3])
        return f"{self.short} {dims}".strip()


@dataclass
class StepOps:
    """What :func:`measure_ops` measured: `ops`, each (op, shapes) group's calls, FLOPs, bytes
    and seconds per step, the slowest first; `step`, the whole step timed without the profiler;
    `profiled`, the whole step as the profiled steps took it (every op counted and recorded),
    timed in the same turns."""

    ops: list[OpTime]
    step: bench.Timing
    profiled: bench.Timing
    probe: bench.Timing | None = None  # a fixed piece of work timed in the same turns, where one was given

    @property
    def op_seconds(self) -> float:
        """The ops' seconds per step, added up."""
        return sum(o.seconds for o in self.ops)


def measure_ops(fn: Callable[[], object], device: torch.device | str, steps: int = 3,
                probe: Callable[[], object] | None = None) -> StepOps:
    """Run `fn` (one training step) once to warm up, then `steps` turns of two steps each, each turn after
    one untimed step (the previous turn's trace export and parse do not fall on the timed step): one
    timed without the profiler, one under ``torch.profiler`` with every ATen op counted
    (:class:`OpCostRecorder`, a range around each call) and timed: on a CPU the profiler's own
    record of the op (its calls inside included; the range and the Python around it left out),
    on a GPU the kernels and copies launched inside its range. Ops with the same name and
    shapes are grouped; calls, FLOPs, bytes and seconds are per step (seconds: the median
    over the steps), the slowest first. `probe`: a fixed piece of work timed in each turn too, after the step
    without the profiler (the machine's pace at these turns)."""
    dev = torch.device(device)
    fn()
    sync(dev)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    timed: list[tuple[dict[int, OpCost], dict[int, float]]] = []  # each step's ops and their seconds
    plain, profiled, probed = [], [], []
    for _ in range(steps):
        fn()  # untimed: the caches and the allocator back in a step's state after the last turn's trace work
        sync(dev)
        start = time.perf_counter()
        fn()
        sync(dev)
        plain.append(time.perf_counter() - start)
        if probe is not None:
            start = time.perf_counter()
            probe()
            sync(dev)
            probed.append(time.perf_counter() - start)
        with quiet_stderr(), profile(activities=activities) as prof:
            start = time.perf_counter()
            with OpCostRecorder(timed=True) as c:
                fn()
            sync(dev)
            profiled.append(time.perf_counter() - start)
        fd, path = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        try:
            prof.export_chrome_trace(path)
            timed.append((c.ranges, _range_seconds(load_trace(path), dev)))
        finally:
            os.remove(path)
    turns = object()  # the two timings pair turn by turn (bench.speedup)
    return StepOps(_grouped(timed),
                   bench.timing_of(plain, name="step, no profiler", device=dev, turns_id=turns),
                   bench.timing_of(profiled, name="step, every op timed", device=dev, turns_id=turns),
                   bench.timing_of(probed, name="pace probe", device=dev, turns_id=turns) if probed else None)


def _range_seconds(events: Sequence[dict], dev: torch.device) -> dict[int, float]:
    """Seconds of the op inside each ``roofline op #k`` range, by k: on a CPU the first,
    outermost op record inside the range (same thread), on a GPU the GPU work launched
    inside it (same thread)."""
    spans = {int(e["name"][len(_RANGE):]): e for e in events
             if e.get("cat") == "user_annotation" and e["name"].startswith(_RANGE)}
    if dev.type != "cuda":
        ops: dict[Any, list[dict]] = {}
        for e in events:  # in time order
            if e.get("cat") == "cpu_op":
                ops.setdefault((e.get("pid"), e.get("tid")), []).append(e)
        starts = {key: [e["ts"] for e in mine] for key, mine in ops.items()}
        out = {}
        for k, s in spans.items():
            key = (s.get("pid"), s.get("tid"))
            mine, at = ops.get(key, []), starts.get(key, [])
            inside = mine[bisect_left(at, s["ts"]):bisect_left(at, s["ts"] + s["dur"])]
            first = min(inside, key=lambda e: (e["ts"], -e["dur"]), default=None)
            out[k] = (first["dur"] if first is not None else s["dur"]) / 1e6
        return out
    work = gpu_work(events)  # sorted by launch time
    times = [t for t, _, _ in work]
    out = {}
    for k, s in spans.items():
        lo, hi = bisect_left(times, s["ts"]), bisect_right(times, s["ts"] + s["dur"])
        out[k] = sum(e["dur"] for _, tid, e in work[lo:hi] if tid == s.get("tid")) / 1e6
    return out


def _grouped(steps: Sequence[tuple[dict[int, OpCost], dict[int, float]]]) -> list[OpTime]:
    """Calls, FLOPs, bytes and seconds per step of each (op, shapes), the slowest first, from
    each step's ops and their seconds (by range number). Calls, FLOPs and bytes are the mean
    over the steps, seconds the median of the group's seconds in each step (a step that
    the machine slowed, another program's turn on its cores, moves it less) and `spread` their range."""
    groups: dict[tuple, OpTime] = {}
    per_step: dict[tuple, list[float]] = {}
    for i, (ranges, seconds) in enumerate(steps):
        for k, op in ranges.items():
            key = (op.name, op.shapes)
            g = groups.setdefault(key, OpTime(op.name, op.shapes, op.kind, 0, 0.0, 0.0, 0.0))
            g.calls += 1
            g.flops += op.flops
            g.bytes += op.bytes
            times = per_step.setdefault(key, [0.0] * len(steps))
            times[i] += seconds.get(k, 0.0)
    for key, g in groups.items():
        g.calls = round(g.calls / len(steps))
        g.flops /= len(steps)
        g.bytes /= len(steps)
        g.seconds = statistics.median(per_step[key])
        g.spread = (min(per_step[key]), max(per_step[key]))
    return sorted(groups.values(), key=lambda g: -g.seconds)


def ridge(peak_flops: float, peak_bandwidth: float) -> float:
    """The intensity (FLOP/B) where the two roofs meet: below it an op is memory-bound."""
    return peak_flops / peak_bandwidth


def memory_roof(nbytes: float, copies: Sequence[bench.Timing]) -> bench.Timing:
    """The copy whose rate is the memory roof of an op that moves `nbytes` bytes per call: the
    fastest of the `copies` that move as many bytes per call or more. Their buffers need the
    op's memory level or a larger one, which is no faster, so each rate is one that level at
    least reaches: a cache's where the op's bytes fit in one, main memory's (the largest copy)
    where no copy moves as many."""
    if not copies or any(t.work is None or t.rate is None for t in copies):
        raise ValueError("memory_roof needs copy timings with their bytes per call and a rate.")
    fits = [t for t in copies if t.work >= nbytes]
    return max(fits, key=lambda t: t.rate) if fits else max(copies, key=lambda t: t.work)


def roofs_used(ops: Sequence[OpTime], roof_of: Callable[[OpTime], bench.Timing], op_time: float) -> str:
    """Which measured copy set each op's memory roof (`roof_of`: :func:`memory_roof`
    of its bytes per call): per copy, the op groups and their share of op time."""
    used: dict[str, list] = {}
    for o in ops:
        t = roof_of(o)
        used.setdefault(f"{t.name}'s {units.fmt_rate(t.rate, 'B/s')}", []).append(o.seconds)
    return ("memory roof of each op, the fastest copy of as many bytes per call or more: " + ", ".join(
        f"{len(v)} group{'s' if len(v) != 1 else ''} ({sum(v) / op_time:.0%} of op time) at {k}"
        for k, v in sorted(used.items(), key=lambda kv: -sum(kv[1]))))


def attainable(intensity: float, peak_flops: float, peak_bandwidth: float) -> float:
    """The most FLOP/s an op of this intensity can reach here: min(P, I·W)."""
    return min(peak_flops, intensity * peak_bandwidth)


def bound(intensity: float, peak_flops: float, peak_bandwidth: float) -> str:
    """'memory-bound' below the ridge, 'compute-bound' at or above it."""
    return "memory-bound" if intensity < ridge(peak_flops, peak_bandwidth) else "compute-bound"


def vs_datasheet(device_name: str | None, precision: str, peak_flops: float, bandwidth: float) -> str:
    """One line: NVIDIA's datasheet roofs for the GPU called `device_name` in `precision`
    ('fp32', 'tf32', 'bf16' or 'fp16', as :mod:`course_lib.datasheet` names them), labelled as
    the datasheet's, and the measured roofs (`peak_flops` FLOP/s, `bandwidth` B/s) as shares of
    them; or, when there is nothing to compare with, why (`device_name` None: a CPU)."""
    from course_lib import datasheet
    from course_lib.units import fmt_rate

    if device_name is None:
        return "A CPU has no entry in the course's datasheet table (NVIDIA GPUs only): the measured roofs only."
    spec = datasheet.lookup(device_name)
    if spec is None:
        return f"{device_name} is not in the course's datasheet table: the measured roofs only."
    tflops = datasheet.peak_tflops(spec, precision)
    if tflops is None:
        return (f"NVIDIA's datasheet gives {spec.name} no dense {precision} rate (no tensor cores for it): "
                "the measured roofs only.")
    flops, bw = tflops * 1e12, spec.mem_bw_gbs * 1e9
    return (f"datasheet, not measured: {spec.name}, dense {precision} {fmt_rate(flops, 'FLOP/s')}, memory "
            f"{fmt_rate(bw, 'B/s')}, ridge {ridge(flops, bw):.0f} FLOP/B ({spec.source_title}) | measured "
            f"here: {peak_flops / flops:.0%} of its compute and {bandwidth / bw:.0%} of its bandwidth")


def counted_flops(fn: Callable[[], object]) -> int:
    """FLOPs of `fn()` as ``torch.utils.flop_counter.FlopCounterMode`` counts them."""
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()
