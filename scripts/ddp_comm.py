"""What DDP communicates, and when (notebook 06): collectives rank by rank, gradient buckets
and their overlap with the backward pass, and ``no_sync`` for gradient accumulation.

Run it by hand from the repository root:

    torchrun --nproc_per_node=2 scripts/ddp_comm.py --width 256 --layers 4 --caps 0.1

1. Collectives: rank r holds ``arange(2W) + 10·r``; all_reduce (sum), broadcast (from rank 0),
   all_gather and reduce_scatter; every rank prints its tensor before and after.
2. Buckets: a deep MLP in DDP once per ``--caps`` value (``bucket_cap_mb``, MiB) and once with
   DDP's default; a communication hook notes each bucket DDP hands to the all-reduce (its bytes,
   the time since ``backward()`` began) before running DDP's own all-reduce.
3. Overlap: training steps of each DDP against "compute, then communicate" (backward under
   ``no_sync()``, then one all-reduce of all gradients), timed in turns; gradients asserted equal.
4. no_sync: k micro-batches per optimizer step, all-reduces counted with and without
   ``no_sync()`` on the first k-1; accumulated gradients asserted equal; steps timed in turns.

Rank 0 writes every measurement to ``--out/results.json``.
"""

# No `from __future__ import annotations`: register_comm_hook checks the hook's annotations
# against dist.GradBucket and Future[Tensor], which strings would fail.
import argparse
import contextlib
import copy
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

from course_lib import bench, check, models, ranks

GRAD_RTOL = 1e-5  # fp32 gradients, the same sums in another order: |Δ| <= 1e-5·(|g| + max|g|)


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--width", type=int, default=256, help="features of every Linear layer")
    p.add_argument("--layers", type=int, default=4, help="Linear layers in the MLP")
    p.add_argument("--batch", type=int, default=32, help="rows per rank per step (split into "
                                                          "--k micro-batches in part 4)")
    p.add_argument("--k", type=int, default=4, help="micro-batches per optimizer step")
    p.add_argument("--caps", type=float, nargs="*", default=[0.1],
                   help="bucket_cap_mb values (MiB) to compare with DDP's default")
    p.add_argument("--iters", type=int, default=5, help="backward passes logged per bucket cap")
    p.add_argument("--repeats", type=int, default=3, help="timed rounds (after one warm-up round)")
    p.add_argument("--number", type=int, default=1, help="steps per timed call")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="build/dist/ddp_comm", help="folder for results.json")
    p.add_argument("--timeout", type=float, default=60, help="process-group timeout (s)")
    a = p.parse_args()
    if a.k < 2 or a.batch % a.k:
        raise ValueError(f"--k must be >= 2 and divide --batch, got k={a.k}, batch={a.batch}.")
    return a


# ---- 1. collectives ----------------------------------------------------------------------------

def collectives(ctx: ranks.RankInfo) -> dict[str, dict]:
    """Each collective on this rank's small tensor: {name: {"before": [...], "after": [...]}}."""
    W = ctx.world_size
    # >>> collectives (notebook 06 shows these lines)
    x = torch.arange(2 * W, device=ctx.device) + 10 * ctx.rank  # (2W,): [10, 11, 12, 13] on rank 1 of 2
    out = {}

    t = x.clone()
    dist.all_reduce(t, op=dist.ReduceOp.SUM)  # every rank: the elementwise sum over ranks
    out["all_reduce"] = t
    t = x.clone()
    dist.broadcast(t, src=0)  # every rank: rank 0's tensor
    out["broadcast"] = t
    t = torch.empty(W * x.numel(), dtype=x.dtype, device=ctx.device)  # (W·2W,)
    dist.all_gather_into_tensor(t, x)  # every rank: all ranks' tensors, end to end, in rank order
    out["all_gather"] = t
    t = torch.empty(x.numel() // W, dtype=x.dtype, device=ctx.device)  # (2,)
    dist.reduce_scatter_tensor(t, x)  # rank r: the sum over ranks of chunk r
    out["reduce_scatter"] = t
    # <<< collectives

    rows = {}
    for name, after in out.items():
        print(f"rank {ctx.rank}: {name:<14} {x.tolist()} -> {after.tolist()}", flush=True)
        rows[name] = dict(before=x.tolist(), after=after.tolist())
    return rows


# ---- 2. buckets: a communication hook that logs, then all-reduces ------------------------------

class Clock:
    """Points in time on the device's own timeline: ``perf_counter`` on the CPU; CUDA events on
    a GPU (recorded in stream order, so a mark says when the GPU got there, not when Python
    queued the work)."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.marks: list = []

    def mark(self) -> int:
        """Add a mark now; returns its index."""
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks.append(event)
        else:
            self.marks.append(time.perf_counter())
        return len(self.marks) - 1

    def seconds(self) -> list[float]:
        """Every mark, in seconds after the first one."""
        if self.cuda:
            torch.cuda.synchronize()
            return [self.marks[0].elapsed_time(e) / 1e3 for e in self.marks]
        return [t - self.marks[0] for t in self.marks]


@dataclass
class BucketLog:
    """What the hook saw: one (bucket index, bytes, parameters, clock mark) per bucket, while
    `on` (off while steps are timed)."""

    clock: Clock
    rows: list[tuple[int, int, int, int]] = field(default_factory=list)
    on: bool = True

    def clear(self) -> None:
        self.rows.clear()
        self.clock.marks.clear()


# >>> the hook (notebook 06 shows these lines)
def logging_hook(log: BucketLog, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP calls this once per bucket, as soon as every gradient in it is ready: note the bucket
    and the time, then all-reduce it as DDP's built-in hook does (divide by W, sum)."""
    buf = bucket.buffer()  # (n,) the bucket's gradients, flattened into one tensor
    if log.on:
        log.rows.append((bucket.index(), buf.numel() * buf.element_size(),
                         len(bucket.parameters()), log.clock.mark()))
    return default_hooks.allreduce_hook(None, bucket)  # None: the default process group
# <<< the hook


def timeline(ddp: DDP, log: BucketLog, x: torch.Tensor, y: torch.Tensor, iters: int) -> list[dict]:
    """`iters` backward passes with bucket hand-offs logged, each beside the same backward under
    no_sync() (compute only). Seconds are counted from the start of backward()."""
    out = []
    for _ in range(iters):
        row = {}
        for name, ctx_ in (("compute", ddp.no_sync()), ("ddp", contextlib.nullcontext())):
            ddp.zero_grad(set_to_none=True)
            with ctx_:
                loss = F.mse_loss(ddp(x), y)
                dist.barrier()  # both ranks start backward together: no waiting for a late peer
                log.clear()
                log.clock.mark()  # backward starts
                loss.backward()  # with DDP: returns once every bucket's all-reduce is done
                log.clock.mark()  # backward ends
            secs = log.clock.seconds()
            row[f"{name}_s"] = secs[-1]
            if name == "ddp":
                row["buckets"] = [dict(index=i, bytes=b, params=n, ready_s=secs[m])
                                  for i, b, n, m in log.rows]
        out.append(row)
    return out


def reported_bucket_sizes(ddp: DDP) -> list[int]:
    """Bucket sizes in bytes as DDP's own logging reports them, after it rebuilt its buckets in
    the order the gradients arrived (a private, prototype interface; [] if it changes)."""
    try:
        text = str(ddp._get_ddp_logging_data().get("rebuilt_bucket_sizes", ""))
        return [int(s) for s in text.replace(" ", "").split(",") if s]
    except (AttributeError, ValueError, RuntimeError):
        return []


# ---- 3. overlap: DDP against compute-then-communicate ------------------------------------------

def flat_grad(model: nn.Module) -> torch.Tensor:
    """Every parameter's .grad, flattened into one (P,) tensor on the CPU."""
    return torch.cat([p.grad.detach().flatten() for p in model.parameters()]).cpu()


# >>> compute then communicate (notebook 06 shows these lines)
def compute_then_communicate(ddp: DDP, x: torch.Tensor, y: torch.Tensor) -> None:
    """The whole backward first (no_sync: DDP communicates nothing), then one all-reduce of all
    gradients at once: what DDP would do without buckets."""
    with ddp.no_sync():
        F.mse_loss(ddp(x), y).backward()
    grads = [p.grad for p in ddp.module.parameters()]
    flat = torch.cat([g.flatten() for g in grads])  # (P,) every gradient in one buffer
    dist.all_reduce(flat)  # sum over ranks, after the backward has finished
    flat /= dist.get_world_size()  # the mean, as DDP computes
    for g, part in zip(grads, flat.split([g.numel() for g in grads])):
        g.copy_(part.view_as(g))
# <<< compute then communicate


def compare(what: str, got: torch.Tensor, want: torch.Tensor) -> dict:
    """The :func:`check.agreement` row of `got` against `want`, with atol = GRAD_RTOL·max|want| and
    rtol = GRAD_RTOL (rounding of fp32 sums, scaled to the gradients' size); raises with the row's
    line when an element is beyond it."""
    row = check.agreement(what, got, want, atol=GRAD_RTOL * want.abs().max().item(), rtol=GRAD_RTOL)
    if not row["ok"]:
        raise AssertionError(check.fmt_agreement(row))
    ranks.print0(f"{check.fmt_agreement(row)} ✓")
    return row


def time_in_turns(fns: dict[str, Callable[[], None]], repeats: int,
                  number: int) -> dict[str, list[float]]:
    """Seconds per call of each function (``bench.turns``): `number` warm-up calls, then `repeats`
    rounds that time every function in turn, `number` calls each (a fixed count on every rank, so
    the ranks' collectives stay paired); the median of each printed."""
    times = bench.turns(fns, rounds=repeats, number=number, warmup=number)
    for k, ts in times.items():
        median_ms = sorted(ts)[len(ts) // 2] * 1e3
        ranks.print0(f"{k:<36} {median_ms:8.2f} ms per step (median of {repeats})")
    return times


# ---- 4. no_sync: accumulate k micro-batches, communicate once ---------------------------------

# >>> no_sync (notebook 06 shows these lines)
def accumulate(ddp: DDP, micro: list[tuple[torch.Tensor, torch.Tensor]], use_no_sync: bool) -> None:
    """Backward over k micro-batches into .grad (each loss / k); with `use_no_sync`, DDP skips
    the all-reduce on the first k-1 and all-reduces the accumulated gradients on the last."""
    k = len(micro)
    for i, (xb, yb) in enumerate(micro):
        skip = use_no_sync and i < k - 1
        with ddp.no_sync() if skip else contextlib.nullcontext():  # forward and backward inside
            (F.mse_loss(ddp(xb), yb) / k).backward()
# <<< no_sync


def bucket_runs(a: argparse.Namespace, base: nn.Module, x: torch.Tensor, y: torch.Tensor,
                ids: list[int] | None) -> tuple[dict, dict, list[dict]]:
    """Section 2: one DDP copy of `base` per bucket cap, each with a logging comm hook; the
    buckets of each, as timelines of the last iterations. (DDPs, their logs, the runs)."""
    caps: list[float | None] = [*a.caps, None]  # None: DDP's default (25 MiB, first bucket 1 MiB)
    ddps, logs, runs = {}, {}, []
    for cap in caps:
        label = "default" if cap is None else f"{cap:g} MiB"
        # >>> registering the hook (notebook 06 shows these lines)
        ddp = DDP(copy.deepcopy(base), device_ids=ids, bucket_cap_mb=cap)
        log = BucketLog(Clock(x.device))
        ddp.register_comm_hook(log, logging_hook)  # once per DDP: state, hook
        # <<< registering the hook
        timeline(ddp, log, x, y, 2)  # pass 1: one bucket for all; then DDP rebuilds its buckets
        iters = timeline(ddp, log, x, y, a.iters)
        ddps[label], logs[label] = ddp, log
        runs.append(dict(cap_mb=cap, label=label, iters=iters,
                         reported_sizes=reported_bucket_sizes(ddp)))
        sizes = [b["bytes"] for b in iters[-1]["buckets"]]
        ranks.print0(f"bucket_cap_mb {label}: {len(sizes)} bucket(s) of "
                     f"{', '.join(f'{s / 2**20:.2f}' for s in sizes)} MiB; DDP reports "
                     f"{len(runs[-1]['reported_sizes'])}")
    return ddps, logs, runs


def overlap(a: argparse.Namespace, base: nn.Module, ids: list[int] | None, runs: list[dict],
            x: torch.Tensor, y: torch.Tensor) -> dict:
    """Section 3: one DDP per bucket cap again, without the logging hook (DDP's own all-reduce:
    a Python hook per bucket is work that compute-then-communicate does not do); every DDP's
    gradients equal those of backward-then-one-all-reduce; then the steps timed in turns."""
    ddps = {r["label"]: DDP(copy.deepcopy(base), device_ids=ids, bucket_cap_mb=r["cap_mb"]) for r in runs}
    opts = {label: torch.optim.SGD(ddp.parameters(), lr=1e-3) for label, ddp in ddps.items()}
    plain = ddps["default"]
    g_ddp = {}
    for label, ddp in ddps.items():  # no weights have changed yet: every copy equals `base`
        ddp.zero_grad(set_to_none=True)
        F.mse_loss(ddp(x), y).backward()
        g_ddp[label] = flat_grad(ddp.module)
    plain.zero_grad(set_to_none=True)
    compute_then_communicate(plain, x, y)
    g_manual = flat_grad(plain.module)
    checks = [compare(f"gradients, DDP (bucket_cap_mb {label}) vs compute-then-communicate", g,
                      g_manual) for label, g in g_ddp.items()]

    def ddp_step(label: str) -> Callable[[], None]:
        def step() -> None:
            opts[label].zero_grad(set_to_none=True)
            F.mse_loss(ddps[label](x), y).backward()  # all-reduce bucket by bucket, during backward
            opts[label].step()
        return step

    def manual_step() -> None:
        opts["default"].zero_grad(set_to_none=True)
        compute_then_communicate(plain, x, y)  # backward, then one all-reduce
        opts["default"].step()

    fns = {f"DDP, bucket_cap_mb {label}": ddp_step(label) for label in ddps}
    fns["compute, then one all-reduce"] = manual_step
    step_s = time_in_turns(fns, a.repeats, a.number)
    return dict(step_s=step_s, checks=checks, number=a.number, repeats=a.repeats)


def no_sync(a: argparse.Namespace, plain: DDP, log: BucketLog, opt: torch.optim.Optimizer,
            buckets: int, x: torch.Tensor, y: torch.Tensor) -> dict:
    """Section 4: k micro-batches with and without ``no_sync()``: all-reduces counted (the
    hook's calls), accumulated gradients compared, a step of each timed in turns."""
    micro = list(zip(x.chunk(a.k), y.chunk(a.k)))  # k × ((B/k, width), (B/k, width))
    log.on = True
    grads, calls = {}, {}
    for use in (False, True):
        plain.zero_grad(set_to_none=True)
        log.clear()
        accumulate(plain, micro, use)
        calls[use] = len(log.rows)  # hook calls: one per bucket per all-reduced backward
        grads[use] = flat_grad(plain.module)
    log.on = False
    if calls[False] != a.k * buckets or calls[True] != buckets:
        raise AssertionError(f"all-reduce calls: {calls[False]} without no_sync (expected "
                             f"{a.k} × {buckets}), {calls[True]} with it (expected {buckets})")
    ranks.print0(f"bucket all-reduces per optimizer step: {calls[False]} without no_sync, "
                 f"{calls[True]} with no_sync on the first {a.k - 1} micro-batches")
    row = compare("accumulated gradients, no_sync vs all-reduce every micro-batch",
                  grads[True], grads[False])

    def acc_step(use: bool) -> Callable[[], None]:
        def step() -> None:
            opt.zero_grad(set_to_none=True)
            accumulate(plain, micro, use)
            opt.step()
        return step

    acc_s = time_in_turns({f"{a.k} micro-batches, all-reduce each": acc_step(False),
                           f"{a.k} micro-batches, no_sync on {a.k - 1}": acc_step(True)},
                          a.repeats, a.number)
    return dict(buckets=buckets, calls_without=calls[False], calls_with=calls[True],
                check=row, step_s=acc_s)


@ranks.entry
def main() -> None:
    a = parse()
    start = time.perf_counter()
    ctx = ranks.setup(timeout_s=a.timeout)
    dev, W = ctx.device, ctx.world_size
    ranks.print0(f"world size {W}, backend {ctx.backend}, device {dev}, "
                 f"{torch.get_num_threads()} thread(s) per rank")
    results: dict = dict(world_size=W, backend=ctx.backend, device=str(dev),
                         threads=torch.get_num_threads(), width=a.width, layers=a.layers,
                         batch=a.batch, k=a.k)

    # ---- 1. collectives, rank by rank ----
    mine = collectives(ctx)
    every: list = [None] * W
    dist.all_gather_object(every, dict(rank=ctx.rank, ops=mine))  # rank order
    results["collectives"] = every

    # ---- 2. buckets: one DDP per bucket cap, same starting weights ----
    ranks.seed_all(a.seed)  # every rank: the same starting weights
    base = models.deep_mlp(a.width, a.layers).to(dev)
    params = list(base.parameters())
    results["param_bytes"] = sum(p.numel() * p.element_size() for p in params)
    results["param_tensors"] = len(params)
    torch.manual_seed(a.seed + 1 + ctx.rank)  # each rank its own rows, as with a DistributedSampler
    x = torch.randn(a.batch, a.width, device=dev)  # (B, width)
    y = torch.randn(a.batch, a.width, device=dev)  # (B, width) regression targets
    ids = [ctx.local_rank] if dev.type == "cuda" else None
    ddps, logs, runs = bucket_runs(a, base, x, y, ids)
    results["buckets"] = runs

    # ---- 3. overlap: the same gradients, then step times in turns ----
    results["overlap"] = overlap(a, base, ids, runs, x, y)

    # ---- 4. no_sync: count the all-reduces, compare the gradients, time a step ----
    buckets = len(runs[-1]["iters"][-1]["buckets"])
    opt = torch.optim.SGD(ddps["default"].parameters(), lr=1e-3)
    results["no_sync"] = no_sync(a, ddps["default"], logs["default"], opt, buckets, x, y)

    results["script_s"] = time.perf_counter() - start
    ranks.print0(f"done in {results['script_s']:.1f} s (rank 0, after start-up)")
    ranks.write_json0(Path(a.out) / "results.json", results)
    ranks.teardown()


if __name__ == "__main__":
    main()
