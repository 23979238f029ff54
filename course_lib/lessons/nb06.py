"""Notebook 06 (DistributedDataParallel, FSDP2): the single-process reference, the exercise checks,
the training script's scaffolding (its flags, the failure lab's crash, its step timing), so that
the script the notebook writes is its core alone, and the text of the notebook's reports.

The launcher and the helpers every distributed script uses live in the core (:mod:`course_lib.launcher`,
:mod:`course_lib.ranks`, :mod:`course_lib.sharding`). Why one process can reproduce W ranks:
notebook 06's section 4 and :func:`train_single`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence
from unittest import mock

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.benchmark import Timer
from torch.utils.data import BatchSampler, DistributedSampler, TensorDataset

from course_lib import bench, check, data, launcher, published, report, sharding, units, verdicts
from course_lib.models import mlp


def train_single(x: torch.Tensor, y: torch.Tensor, *, world_size: int, batch: int, epochs: int,
                 lr: float, hidden: int, seed: int = 0) -> nn.Module:
    """One process, no process group: the training W ranks of `batch` images each do in
    scripts/ddp_train.py (SGD, momentum 0.9), on the same global batches of W·batch images."""
    dataset = TensorDataset(x, y)
    torch.manual_seed(seed)
    model = mlp(x.shape[-1], hidden).to(x.device)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    sampler = DistributedSampler(dataset, num_replicas=1, rank=0, shuffle=True, seed=seed,
                                 drop_last=True)  # the permutation every rank draws
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for idx in BatchSampler(sampler, world_size * batch, drop_last=True):
            loss = F.cross_entropy(model(x[idx]), y[idx])  # mean over W·batch images
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    return model


def rank_orders(n: int, world_size: int, epochs: int, *, seed: int = 0,
                set_epoch: bool = True, drop_last: bool = True) -> list[list[list[int]]]:
    """orders[epoch][rank]: the indices DistributedSampler gives each rank in each epoch,
    with or without ``sampler.set_epoch(epoch)``.

    When `world_size` does not divide `n`, ``drop_last=True`` (scripts/ddp_train.py's setting)
    leaves out the permutation's last ``n % world_size`` indices; ``drop_last=False`` (the
    sampler's default) pads the permutation with its own first indices up to a multiple of
    `world_size`, so those appear more than once in that epoch."""
    dataset = range(n)
    orders = []
    for epoch in range(epochs):
        row = []
        for rank in range(world_size):
            sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True,
                                         seed=seed, drop_last=drop_last)  # type: ignore[arg-type]
            if set_epoch:
                sampler.set_epoch(epoch)
            row.append(list(sampler))
        orders.append(row)
    return orders


# ---- exercise checks ---------------------------------------------------------------------------

@check.exercise()
def check_epoch_orders(fn: Callable[[int, int, int, int], list[list[int]]], n: int = 12,
                       world_size: int = 2, epochs: int = 3) -> None:
    """Exercise: ``fn(n, world_size, rank, epochs)`` returns rank `rank`'s index order for each
    epoch. Checked: every epoch is a fresh shuffle, ranks split the data without overlap, and the
    orders are DistributedSampler's with ``set_epoch``."""
    got = [fn(n, world_size, rank, epochs) for rank in range(world_size)]  # got[rank][epoch]
    want = rank_orders(n, world_size, epochs)
    if any(len(g) != epochs for g in got):
        raise AssertionError(f"Return one order per epoch ({epochs} lists), got {[len(g) for g in got]}.")
    for rank in range(world_size):
        if all(got[rank][e] == got[rank][0] for e in range(1, epochs)):
            raise AssertionError(f"Rank {rank} sees the same order in every epoch: "
                                 "call sampler.set_epoch(epoch) before each epoch.")
    for epoch in range(epochs):
        seen = [i for rank in range(world_size) for i in got[rank][epoch]]
        if len(seen) != len(set(seen)):
            raise AssertionError(f"In epoch {epoch} two ranks share images: give each rank its "
                                 "own rank number.")
        for rank in range(world_size):
            if got[rank][epoch] != want[epoch][rank]:
                raise AssertionError(f"Rank {rank}, epoch {epoch}: {got[rank][epoch]} is not "
                                     f"DistributedSampler's order {want[epoch][rank]}.")
    print(f"✓ {world_size} ranks × {epochs} epochs: a new shuffle every epoch, no image on two ranks")


_COLLECTIVES = ("all_reduce", "broadcast", "all_gather", "all_gather_into_tensor",
                "reduce_scatter_tensor", "reduce", "barrier", "all_gather_object")


_IN_PLACE = "(changed the caller's loss in place)"


def collective_calls(fn: Callable[[torch.Tensor], object], world_size: int = 2) -> list[list[str]]:
    """calls[rank]: the collectives ``fn(loss)`` calls when run as each rank, in order (and a
    note when `fn` changed `loss` in place).

    Simulated in this process: ``torch.distributed``'s rank queries answer as rank r, and its
    collectives are recorded (an all-reduce multiplies by the world size, as if every rank held
    the same value) instead of communicating.
    """
    calls: list[list[str]] = []
    for rank in range(world_size):
        seen: list[str] = []

        def record(name: str) -> Callable[..., None]:
            def collective(tensor: object = None, *args: object, **kwargs: object) -> None:
                seen.append(name)
                if name == "all_reduce" and isinstance(tensor, torch.Tensor):
                    tensor.mul_(world_size)
            return collective

        patches = [mock.patch.object(dist, name, record(name)) for name in _COLLECTIVES]
        patches += [mock.patch.object(dist, "get_rank", lambda *a, r=rank, **k: r),
                    mock.patch.object(dist, "get_world_size", lambda *a, **k: world_size),
                    mock.patch.object(dist, "is_initialized", lambda: True)]
        for p in patches:
            p.start()
        loss = torch.tensor(1.0)
        try:
            fn(loss)
        finally:
            for p in patches:
                p.stop()
        if loss.item() != 1.0:
            seen.append(_IN_PLACE)
        calls.append(seen)
    return calls


@check.exercise()
def check_same_collectives(fn: Callable[[torch.Tensor], object], world_size: int = 2) -> None:
    """Exercise: every rank must call the same collectives in the same order, or the ranks that
    called one wait for the others until the process group's timeout."""
    noted = collective_calls(fn, world_size)
    calls = [[c for c in row if c != _IN_PLACE] for row in noted]
    if not calls[0]:
        raise AssertionError("No rank calls a collective: the loss is never averaged over ranks.")
    for rank in range(1, world_size):
        if calls[rank] != calls[0]:
            raise AssertionError(f"Rank 0 calls {calls[0] or 'nothing'}, rank {rank} calls "
                                 f"{calls[rank] or 'nothing'}: the ranks would wait for each other "
                                 "until the timeout. Call collectives on every rank.")
    if any(_IN_PLACE in row for row in noted):
        raise AssertionError("Every rank calls the same collectives, but the function changed the "
                             "loss it was given (all_reduce works in place): reduce a copy, "
                             "`loss.detach().clone()`.")
    print(f"✓ all {world_size} ranks call {', '.join(calls[0])} in the same order")


# ---- scripts/ddp_train.py's scaffolding: its flags, the failure lab's crash, its timing ----

def ddp_train_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The flags of scripts/ddp_train.py (`argv`: None reads the command line)."""
    p = argparse.ArgumentParser(description="DistributedDataParallel training of a small MLP on the "
                                            "procedural shapes (notebook 06).")
    p.add_argument("--images", type=int, default=1024, help="images in the dataset")
    p.add_argument("--res", type=int, default=16, help="image resolution (pixels)")
    p.add_argument("--hidden", type=int, default=128, help="MLP width")
    p.add_argument("--batch", type=int, default=32, help="images per rank per step")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="build/dist/ddp_train", help="folder for final.pt, results.json")
    p.add_argument("--ckpt", default="", help="checkpoint file: saved every --save-every steps, "
                                               "resumed from when it exists")
    p.add_argument("--save-every", type=int, default=0)
    p.add_argument("--crash-at", type=int, default=-1, help="rank --crash-rank raises at this "
                                                             "step on the first attempt")
    p.add_argument("--crash-rank", type=int, default=1)
    p.add_argument("--bench-steps", type=int, default=0, help="steps per timed call (0: no timing)")
    p.add_argument("--bench-repeats", type=int, default=5)
    p.add_argument("--timeout", type=float, default=60, help="process-group timeout (s)")
    return p.parse_args(argv)


def crash_if_asked(a: argparse.Namespace, step: int, rank: int) -> None:
    """The failure lab's crash: on the first attempt only, so the restart gets past it."""
    first_attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", 0)) == 0
    if first_attempt and step == a.crash_at and rank == a.crash_rank:
        raise RuntimeError(f"simulated crash of rank {a.crash_rank} at step {step}")


def time_ddp_steps(a: argparse.Namespace, model: nn.Module, ddp: nn.Module, opt: torch.optim.Optimizer,
                   device: torch.device) -> dict:
    """Seconds per training step on a fixed batch, `bench_repeats` calls of `bench_steps` steps
    after one warm-up call, the variants in turns: ``"ddp"``; ``"no_sync"``, the same step with
    its forward and backward under ``ddp.no_sync()`` (DDP communicates nothing: what is left is
    the ranks' compute); and at world size 1 ``"plain"``, the model without DDP (DDP's own
    overhead). Every rank runs the same number of steps (a collective per DDP step), rank 0
    reports, with every rank's peak allocated GPU memory during the timed steps (bytes; 0 on
    the CPU)."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    xb, yb = data.make_tensor_dataset(a.batch, a.res, seed=a.seed + 1)
    xb, yb = xb.to(device), yb.to(device)

    def step(net: nn.Module, sync: bool) -> None:
        with contextlib.nullcontext() if sync else ddp.no_sync():  # no_sync: no all-reduce
            loss = F.cross_entropy(net(xb), yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
        opt.step()

    nets = {"no_sync": (ddp, False), "ddp": (ddp, True)}
    if dist.get_world_size() == 1:
        nets = {"plain": (model, True), **nets}
    timers = {k: Timer("step(net, sync)", globals=dict(step=step, net=net, sync=sync),
                       num_threads=torch.get_num_threads())
              for k, (net, sync) in nets.items()}
    times: dict[str, list[float]] = {k: [] for k in nets}
    for t in timers.values():
        t.timeit(a.bench_steps)  # warm-up
    for _ in range(a.bench_repeats):  # in turns, so drift hits both alike
        for k, t in timers.items():
            times[k].append(t.timeit(a.bench_steps).mean)  # seconds per step
    peaks: list[int] = [0] * dist.get_world_size()  # no GPU memory on the CPU: nothing to gather
    if device.type == "cuda":
        # rank r's peak in peaks[r]. Not on gloo, where the gathered object's tensors, freed by
        # gloo's thread as the rank exits, could deadlock it (ranks.GLOO_EXIT_DEADLOCK)
        dist.all_gather_object(peaks, torch.cuda.max_memory_allocated(device))
    return dict(step_s=times, batch_per_rank=a.batch, samples_per_step=a.batch * dist.get_world_size(),
                peak_bytes=peaks)


_WAITED = re.compile(r"waited ([0-9.]+) s in the all-reduce")


def waited_s(lines: Iterable[str]) -> float | None:
    """Seconds a rank of scripts/failure_lab.py says it waited in an all-reduce before the wait
    ended in an error: the process group's timeout, or a peer that left (its line 'waited 5.0 s
    in the all-reduce of step 2', printed with gloo; NCCL's all-reduce returns at once); None
    when no line says so."""
    found = [float(m.group(1)) for m in map(_WAITED.search, lines) if m]
    return found[-1] if found else None


# ---- what the notebook prints: each function returns the text of one cell's report ------------

def ranks_label(world: int, backend: str) -> str:
    """Where the jobs' ranks run: '2 ranks on the CPU (gloo)'."""
    return f"{world} ranks on {'one GPU each' if backend == 'nccl' else 'the CPU'} ({backend})"


def jobs_note(world: int, backend: str, gpus: int, profile: str, out: Path) -> str:
    """The setup cell's lines: where the W-rank jobs run, and why on the CPU when GPUs are short."""
    lines = []
    if profile == "gpu" and backend == "gloo":
        lines.append(f"Fewer than {world} GPUs: the {world}-rank jobs run on the CPU with the cpu profile's sizes.")
    if backend == "gloo" and gpus == 1:
        lines.append(f"One GPU: NCCL cannot place {world} ranks on it, so the {world}-rank jobs use gloo on the "
                     "CPU, and so does section 10's one-rank job, so that the two compare.")
    lines.append(f"jobs: {ranks_label(world, backend)}, 1 thread per rank (OMP_NUM_THREADS=1); files in {out}")
    return "\n".join(lines)


def fmt_orders(orders: Mapping[bool, Sequence[Sequence[Sequence[int]]]]) -> str:
    """orders[set_epoch][epoch][rank] as a table: one line per epoch, the ranks side by side."""
    lines = []
    for set_epoch, epochs in orders.items():
        lines.append(f"with set_epoch: {set_epoch}")
        lines += [f"  epoch {e}  " + "   ".join(f"rank {r}: {list(o)}" for r, o in enumerate(row))
                  for e, row in enumerate(epochs)]
    return "\n".join(lines)


def sampler_notes(n: int, world: int, padded: Sequence[Sequence[Sequence[int]]],
                  perms: Sequence[Sequence[int]]) -> str:
    """Epoch 0's repeats with ``drop_last=False`` (`padded[epoch][rank]`), its skips with ``drop_last=True``."""
    per_rank = -(-n // world)
    extra, kept = world * per_rank - n, n - n % world
    if extra:
        where = [f"{i} on ranks {' and '.join(str(r) for r, o in enumerate(padded[0]) if i in o)}"
                 for i in perms[0][:extra]]
        pad = (f"{world} ranks × {per_rank} = {world * per_rank} places for {n} indices: epoch 0 repeats "
               f"{', '.join(where)}")
    else:
        pad = f"{n} = {world} × {per_rank}: no padding, each index on exactly one rank"
    return (f"{pad}\ndrop_last=True (the training script): {kept // world} indices per rank; epoch 0 skips "
            f"{list(perms[0][kept:]) or 'none'}")


def rig_label(res: dict) -> str:
    """The ranks of a script's results and their device: '2 ranks, gloo, cpu, 1 thread(s) per rank'."""
    where = (torch.cuda.get_device_name() if res["device"].startswith("cuda")
             else f"cpu, {res['threads']} thread(s) per rank")
    return f"{res['world_size']} ranks, {res['backend']}, {where}"


def launch_note(run: launcher.Run, script_s: float | None = None) -> str:
    """A finished launch: its command, and its wall-clock seconds (with the script's own, if known)."""
    done = (f"of wall clock, {script_s:.1f} s of it in the script (rank 0); the rest is starting the processes"
            if script_s is not None else "(wall clock, start-up included)")
    return f"$ {launcher.shell(run.command)}\nfinished in {run.seconds:.1f} s {done}"


Span = tuple[float, float, float]  # (median, min, max) seconds


def bucket_report(comm: dict, timeline: Mapping[str, tuple[Span, Span, list[Span]]], rig: str) -> str:
    """Section 6's table: per bucket cap (`timeline[label]`: compute only, with DDP, [per bucket]) the
    backward with and without DDP, when each bucket left; whether the compute-only passes were ranges
    apart; then per cap, the buckets sent while backward computed and whether DDP delayed it."""
    passes, ms = len(comm["buckets"][0]["iters"]), 1e3
    lines = [f"model: {comm['layers']} × Linear({comm['width']}, {comm['width']}), "
             f"{units.fmt_bytes(comm['param_bytes'])} of fp32 gradients in {comm['param_tensors']} "
             f"tensors | {rig} | {passes} logged backward passes: median (min–max)"]
    for run in comm["buckets"]:
        compute, with_ddp, ready = timeline[run["label"]]
        lines += [f"\nbucket_cap_mb {run['label']}: backward {with_ddp[0] * ms:.2f} ms with DDP, "
                  f"{compute[0] * ms:.2f} ms compute only (no_sync)",
                  f"  {'bucket':>6} | {'size':>9} | {'tensors':>7} | {'handed to all-reduce at':>30}"]
        lines += [f"  {i:>6} | {units.fmt_bytes(b['bytes']):>9} | {b['params']:>7} | "
                  f"{t * ms:9.2f} ms ({lo * ms:.2f}–{hi * ms:.2f})"
                  for i, (b, (t, lo, hi)) in enumerate(zip(run["iters"][-1]["buckets"], ready))]
    fast = min(timeline, key=lambda k: timeline[k][0][0])
    slow = max(timeline, key=lambda k: timeline[k][0][0])
    if timeline[slow][0][1] > timeline[fast][0][2]:  # the same compute-only passes, min–max ranges apart
        lines.append(f"\ncompute only: {timeline[fast][0][0] * ms:.2f} ms with bucket_cap_mb {fast}, "
                     f"{timeline[slow][0][0] * ms:.2f} ms with {slow}: the same passes (no bucket is sent under "
                     "no_sync), ranges apart: two runs at two moments (unpaired), what moved them not measured; "
                     "compare each run's DDP backward with its own compute-only passes")
    lines.append("")
    for label, (compute, with_ddp, ready) in timeline.items():
        last = ready[-1][0]  # the last bucket is ready when the last gradient is computed
        early = [t for t, _, _ in ready[:-1]]
        if not early:
            lines.append(f"bucket_cap_mb {label}: one bucket, handed over with the last gradient at "
                         f"{last * ms:.2f} ms: nothing could overlap")
        else:
            when = (f"at {early[0] * ms:.2f} ms" if len(early) == 1
                    else f"from {early[0] * ms:.2f} ms to {early[-1] * ms:.2f} ms")
            lines.append(f"bucket_cap_mb {label}: {len(early)} of {len(ready)} buckets went to the all-reduce "
                         f"while backward was still computing ({when}; the last gradient at {last * ms:.2f} ms)")
        lines.append(f"  backward returned {(with_ddp[0] - last) * ms:.2f} ms after the last hand-off "
                     "(all-reduces still running, and the averaged gradients copied back to .grad)")
        if early:
            spans = (f"last gradient at {last * ms:.2f} ms ({ready[-1][1] * ms:.2f}–{ready[-1][2] * ms:.2f}), "
                     f"compute only {compute[0] * ms:.2f} ms ({compute[1] * ms:.2f}–{compute[2] * ms:.2f})")
            lines.append(f"  the last gradient came later than in every compute-only pass ({spans}): DDP's work "
                         "during backward delayed it (bucket copies and all-reduces on the same cores; not timed apart)"
                         if ready[-1][1] > compute[2]  # slower than every compute-only pass
                         else f"  {passes} passes cannot tell whether DDP's work during backward delayed the "
                              f"compute: {spans}")
    return "\n".join(lines)


def overlap_verdicts(steps: Mapping[str, bench.Timing], t_after: bench.Timing, ratios: Mapping[str, bench.Ratio],
                     timeline: Mapping[str, tuple[Span, Span, list[Span]]], rig: str, repeats: int) -> str:
    """The steps' timings, each bucket cap's ratio to compute-then-reduce and, with two caps, theirs
    to each other; then what that says
    about the overlap: nothing overlapped, not resolved, a saving (from the paired ratio) or a cost;
    when `rig` is not nccl, what the bucket size did on GPUs, as published."""
    caps = []  # the bucket caps against each other: the knob the section turns, paired in the same turns
    if len(steps) == 2:
        (name_a, a), (name_b, b) = steps.items()
        caps = [bench.speedup(b, a, f"{name_a.removeprefix('DDP, ')} vs {name_b.removeprefix('DDP, ')}")]
    lines = [*map(str, [*steps.values(), t_after, *ratios.values(), *caps]), "",
             f"here: {rig}, {os.cpu_count()} cores in this machine, {repeats} repeats"]
    for label, ratio in ratios.items():
        sent = len(timeline[label][2]) - 1  # buckets handed over before the last gradient
        head = f"bucket_cap_mb {label} ({sent} bucket(s) sent during backward): "
        if sent == 0:
            tail = ("nothing overlapped, so whatever difference the ratio above shows comes from something other "
                    "than overlap")
        elif not ratio.clear:
            tail = (f"cannot be told from compute-then-reduce ({ratio.doubt}): no saving from the overlap that "
                    "these repeats can resolve")
        elif ratio.value > 1:
            saved_ms = t_after.median_s * (1 - 1 / ratio.value) * 1e3  # the paired ratio, not the medians' gap
            tail = (f"{ratio.value:.2f}× as fast as compute-then-reduce, beyond the spread: about {saved_ms:.1f} ms "
                    f"less per step (the paired ratio applied to compute-then-reduce's "
                    f"{t_after.median_s * 1e3:.1f} ms)")
        else:
            tail = (f"{1 / ratio.value:.2f}× the time of compute-then-reduce, beyond the spread: communicating "
                    "during backward cost more than it hid")
        lines.append(head + tail)
    if ", nccl," not in rig:  # the ranks shared CPU cores: what the bucket size did on GPUs, measured elsewhere
        lines.append("\nOn GPUs (no published timing of DDP against compute-then-reduce was found; the bucket "
                     "size's effect was measured):\n" + published.elsewhere(
                         "06_ddp", keys=["pytorch_ddp_benchmark_bucket_cap_1_vs_25_mb"]))
    return "\n".join(lines)


def no_sync_saving(t_each: bench.Timing, t_once: bench.Timing, ratio: bench.Ratio, fewer: int, k: int,
                   rig: str) -> str:
    """The two steps' timings, their ratio, and what skipping `fewer` bucket all-reduces saved."""
    if ratio.clear and ratio.value > 1:
        saved, lo, hi = (t_each.median_s * (1 - 1 / r) * 1e3 for r in (ratio.value, ratio.lo, ratio.hi))  # paired
        tail = (f"{fewer} fewer bucket all-reduces per step saved about {saved:.0f} ms ({lo:.0f}–{hi:.0f} over the "
                f"ratio's interval, applied to the {t_each.median_s * 1e3:.0f} ms step), {saved / (k - 1):.0f} ms per "
                "micro-batch that skipped its all-reduce")
    else:
        tail = ("an outcome to investigate: the step with no_sync sends less" if ratio.clear
                else f"{fewer} fewer all-reduces per step saved nothing these repeats resolve")
    return f"{t_each}\n{t_once}\n{ratio}\nhere ({rig}): {tail}"


def fmt_b(n: float) -> str:
    """Exact bytes and the same in binary units: '6,303,744 B (6.0 MiB)'."""
    return f"{n:,.0f} B ({units.fmt_bytes(n)})"


def fsdp_launched(run: launcher.Run | None, world: int) -> str:
    """The FSDP2 launch's command and time, or why it was skipped (`run` None)."""
    skipped = (f"FSDP2 trains on CPU tensors from torch {sharding.CPU_MIN_TORCH} on; this kernel runs torch "
               f"{torch.__version__} without a GPU for each of the {world} ranks, so the launch is skipped. The "
               "simulated world sizes below still run.")
    return launch_note(run) if run is not None else skipped


KINDS = {"params": "parameters", "grads": "gradients", "optim": "AdamW state"}


def fsdp_table(fres: dict) -> str:
    """scripts/fsdp_vs_ddp.py's bytes per rank, DDP against FSDP2; rank 0's totals and padding."""
    W, total = fres["world_size"], fres["total_param_bytes"]
    lines = [f"MLP: {fres['layers']} × Linear({fres['width']}, {fres['width']}), {fres['n_params']:,} parameters "
             f"in {len(fres['shapes'])} tensors, fp32: {fmt_b(total)}; {W} ranks, {fres['backend']}",
             f"{'rank':<5} {'tensors':<12} {'DDP':>24} {'FSDP2':>24} {'FSDP2 / DDP':>12}"]
    for r in range(W):
        ddp_r, fsdp_r = fres["per_rank"]["DDP"][r], fres["per_rank"]["FSDP2"][r]
        lines += [f"{r:<5} {what:<12} {fmt_b(ddp_r[k]):>24} {fmt_b(fsdp_r[k]):>24} {fsdp_r[k] / ddp_r[k]:>12.4f}"
                  for k, what in KINDS.items()]
    ddp0, fsdp0 = (sum(fres["per_rank"][kind][0].values()) for kind in ("DDP", "FSDP2"))
    pad = fres["per_rank"]["FSDP2"][0]["params"] - total / W
    lines += [f"\nrank 0 in all: DDP {fmt_b(ddp0)}, FSDP2 {fmt_b(fsdp0)}: {fsdp0 / ddp0:.4f}× DDP's",
              f"FSDP2 parameters on rank 0 = total / W + {pad:,.1f} B of padding: rank 0 holds ceil(dim0 / W) "
              "rows of each parameter" + (" and every dim 0 here divides by W." if pad == 0 else ".")]
    return "\n".join(lines)


def fsdp_weights_note(fres: dict) -> str:
    """How far training moved the weights; why FSDP2's equal DDP's bit for bit, when they do with 2 ranks."""
    note = f"trained weights, FSDP2 vs DDP (checked below): training moved a weight by up to {fres['max_change']:.2e}"
    if fres["agreement"]["max_abs"] == 0 and fres["world_size"] == 2:
        note += ("\nbit-identical here: with 2 ranks each gradient sum has one order (a + b = b + a) "
                 "and halving is exact; more ranks or another backend may add in other orders.")
    return note


def shards_note(shards: Sequence[tuple[str, tuple, tuple]], n_params: int, rank0_bytes: int, world: int) -> str:
    """The fake group's first parameters (name, full shape, rank 0's) and rank 0's bytes."""
    lines = [f"{name:<24} full {str(full):<12} rank 0 holds {local}" for name, full, local in shards]
    lines.append(f"{n_params:,} parameters: {fmt_b(4 * n_params)} in fp32; rank 0 of {world} holds "
                 f"{fmt_b(rank0_bytes)}")
    return "\n".join(lines)


def world_label(world: int | None) -> str:
    """A fake_world_bytes row's name: 'DDP' (world None) or 'FSDP2 W=8'."""
    return "DDP" if world is None else f"FSDP2 W={world}"


def bytes_table(rows: Sequence) -> str:
    """sharding.fake_world_bytes rows as a table: bytes per rank, rank 0's padding over an even split."""
    full = next(row.params for row in rows if row.world is None)
    lines = ["\nGPT-2-small-shaped stack, fp32, AdamW; bytes per rank (rank 0, the largest slice)",
             f"{'':<12} {'parameters':>26} {'gradients':>26} {'AdamW state':>26} {'all':>26} {'padding':>9}"]
    for row in rows:
        pad = "" if row.world is None else f"{row.params - full / row.world:,.0f} B"
        lines.append(f"{world_label(row.world):<12} {fmt_b(row.params):>26} {fmt_b(row.grads):>26} "
                     f"{fmt_b(row.optim):>26} {fmt_b(row.total):>26} {pad:>9}")
    return "\n".join(lines)


def scaling_notes(eff: bench.Ratio | None, r: bench.Ratio | None, t_free1: bench.Timing,
                  t_free_w: bench.Timing, world: int, dev_1: str, dev_w: str) -> str:
    """Section 10's reading of the efficiency `eff` (None: the jobs ran on different devices) and of
    the rate ratio `r` (W ranks against 1); then what GPUs measured (reference run, published)."""
    if eff is None or r is None:
        lines = [f"No efficiency: the {world}-rank job ran on {dev_w} and the 1-rank job on {dev_1}; "
                 f"scaling needs {world} GPUs."]
    else:
        lines = ["(the efficiency above compares two jobs timed apart: unpaired; the next cell splits each job's step "
                 "into parts timed in turns within that job)"]
        if t_free_w.hi_s < t_free1.lo_s:  # a step without communication, faster beside other ranks than alone
            lines.append(f"the {world}-rank job's step without communication ({t_free_w.median_s * 1e3:.2f} ms) ran "
                         f"faster than the 1-rank job's ({t_free1.median_s * 1e3:.2f} ms), beyond both spreads: "
                         f"sharing the machine cannot do that, so the machine ran faster during the {world}-rank "
                         "job, and the efficiency above carries that change as well")
        lines.append(r.verdict(f"the same jobs' images/s in total ({world} × the efficiency), {world} ranks vs 1", on=dev_w))
        if dev_w.startswith("cpu") and world > (os.cpu_count() or 1):
            lines.append(f"{world} ranks on {os.cpu_count()} cores: the ranks take turns on the cores, which this "
                         "efficiency measures as much as DDP's communication")
    if not dev_w.startswith("cuda"):  # what DDP's scaling looks like across GPUs, measured elsewhere
        if not any("nccl" in k for k in report.reference("06_ddp")[1]):
            lines.append("The recorded reference run had one GPU: its ranks ran on its CPU too, so it holds no "
                         "GPU scaling.")
        lines.append("What GPUs measured:\n" + published.elsewhere(
            "06_ddp", keys=["pytorch_ddp_benchmark_resnet50_no_ddp_vs_ddp_1_to_16_gpus",
                            "dle_resnet50_a100_8gpu_strong_scaling", "mosaic_mpt7b_a100_40gb_8_to_128_gpu_mfu"]))
    else:  # the learner's own scaling is above; what others measured, for comparison
        lines.append("For comparison, " + published.elsewhere(
            "06_ddp", ("1 process, DDP", "DDP at world size 1"),
            ["pytorch_ddp_benchmark_resnet50_no_ddp_vs_ddp_1_to_16_gpus", "dle_resnet50_a100_8gpu_strong_scaling",
             "dle_resnet50_v100_8gpu_strong_scaling", "mosaic_mpt7b_a100_40gb_8_to_128_gpu_mfu"]))
    return "\n".join(lines)


def step_breakdown(t: Mapping[str, bench.Timing], ratios: Sequence[bench.Ratio], grad_bytes: int,
                   world: int) -> str:
    """Where a step's time goes: `t` holds "plain", "free1", "one", "free_w", "w" (the plain model,
    DDP under no_sync and DDP at world size 1; DDP under no_sync and DDP at world size W);
    `ratios`: the paired (wrapper, 1-rank all-reduce, W-rank all-reduce) ratios. Ranks not on GPUs:
    then what an all-reduce moves per second over NVLink, as published."""
    ms = {k: v.median_s * 1e3 for k, v in t.items()}
    wrapper, reduce1, reduce_w = ratios
    grads = units.fmt_bytes(grad_bytes)

    def part(after: str, before: str, ratio: bench.Ratio) -> str:  # a difference of medians, as far as the turns tell
        delta = f"{ms[after] - ms[before]:+.2f} ms"
        return f"{delta}:" if ratio.clear else f"{delta} by the medians, not told from 0:"

    lines = [
        f"1 process, per step: plain model {ms['plain']:.2f} ms",
        f"  {part('free1', 'plain', wrapper)} DDP with communication off (its forward wrapper, its gradient "
        f"hooks) | paired: {wrapper.brief}",
        f"  {part('one', 'free1', reduce1)} DDP's buckets (gradients copied in and out) and a 1-rank "
        f"all-reduce of {grads} | paired: {reduce1.brief}",
        f"{world} processes, per step: DDP {ms['w']:.2f} ms =",
        f"  {ms['free_w']:.2f} ms under no_sync: each rank's compute, the {world} ranks at once",
        f"  {part('w', 'free_w', reduce_w)} the all-reduce of {grads} of gradients and the wait for the "
        f"slower rank (a call's fixed cost and that wait are in it: not a bandwidth) | paired: {reduce_w.brief}",
        *([f"paired: rate ratios of each job's two steps, {said}"] if (said := verdicts.brief_legend(ratios)) else []),
        f"sharing the machine: the step under no_sync took {ms['free_w']:.2f} ms with {world} ranks at once, "
        f"{ms['free1']:.2f} ms with one rank alone ({ms['free_w'] / ms['free1']:.2f}×, "
        f"{t['free_w'].lo_s / t['free1'].hi_s:.2f}–{t['free_w'].hi_s / t['free1'].lo_s:.2f}× from their quartiles; "
        "two jobs at different moments, so unpaired)"]
    if not t["w"].device.startswith("cuda"):  # gloo on CPU cores: an all-reduce between GPUs, measured elsewhere
        lines.append("Between GPUs, NCCL's all-reduce: its bus bandwidth (nccl-tests: 2·(W−1)/W × the tensor's "
                     "bytes, what each rank sends, per second) for large messages:\n"
                     + published.elsewhere("06_ddp", keys=["ml_engineering_h200_8gpu_allreduce_busbw_nvls_vs_ring",
                                                           "ml_engineering_a100_node_allreduce_busbw_235gbps"]))
    return "\n".join(lines)


def restart_plan(crash_at: int, save_every: int, planned: tuple[int, int], steps: int) -> str:
    """When the restart job crashes and saves; why not as `planned`: section 3's run has `steps`."""
    why = f"section 3's run has {steps} steps: " if (crash_at, save_every) != planned else ""
    return f"{why}the restart job crashes at step {crash_at}, with a checkpoint every {save_every} steps\n"


def lab_summary(lab: Mapping[str, launcher.Run], seconds: float, procs: int, at_most: int, wall_s: int,
                world: int) -> str:
    """The failure lab's jobs: how they shared the machine, then each one's outcome (a failure's
    diagnosis and each rank's last lines; a success's crash, resumes and epochs, in order)."""
    together = ("all at once, sharing the cores: each job's seconds include the others' load" if at_most >= procs
                else f"at most {at_most} at a time: a job's seconds include waiting for its turn and the others' load")
    lines = [f"three jobs done in {seconds:.1f} s: {procs} processes on this machine's {os.cpu_count()} cores, "
             f"{together}\n"]
    for name, r in lab.items():
        lines.append(f"--- {name}: {'succeeded' if r.ok else 'failed'} after {r.seconds:.1f} s "
                     f"(wall-clock limit {wall_s} s)")
        if r.failure:
            lines.append(r.failure.split("\nLast lines:")[0])  # the diagnosis; the traceback is in r.lines
            lines += [f"  rank {local} printed last: {r.said(local)}" for local in range(world)] + [""]
        else:  # what happened, in order: the crash, the ranks resumed after torchrun's restart, the epochs
            keys = ("RuntimeError: simulated crash", "resumed", "epoch ")
            lines += [*dict.fromkeys(ln.split("]:")[-1].strip() for ln in r.lines if any(k in ln for k in keys)), ""]
    return "\n".join(lines)


def failure_times(lab: Mapping[str, launcher.Run], waited: float, waited_raise: float, timeout_s: float,
                  backend: str, bitwise: bool | None = None) -> str:
    """Whether the restart's weights are bit for bit the uninterrupted run's (`bitwise`, None: checked);
    where the skip and raise jobs' seconds went; the error rank 0 saw when it gave up before its timeout."""
    skip, fail = lab["skip"].seconds, lab["raise"].seconds
    head = [] if bitwise is None else [f"restart: bit for bit the same weights: {bitwise}"]
    if backend == "nccl":  # the all-reduce returned at once: no rank waited in the call
        lines = [f"skip: NCCL's all-reduce returned at once and the wait was on the GPU; the job ended after "
                 f"{skip:.1f} s, when the watchdog saw the {timeout_s} s timeout pass"]
    else:
        lines = [f"skip: the job's {skip:.1f} s = {waited:.1f} s of waiting in the all-reduce (timeout {timeout_s} s) "
                 f"+ {skip - waited:.1f} s of starting the processes, the steps before and stopping them",
                 f"raise: the job's {fail:.1f} s = {waited_raise:.1f} s of waiting in an all-reduce + "
                 f"{fail - waited_raise:.1f} s of the same starting, steps and stopping"]
    if 0 < waited_raise < timeout_s:  # not the timeout: gloo's all-reduce fails when a peer leaves
        error = [re.sub(r"^\[rank0\]:\s*|\[/[^\]]*\] ", "", ln).split(". ")[0]  # no prefix, no C++ file and line
                 for ln in lab["raise"].rank_lines(0) if ln.startswith("[rank0]") and "Error" in ln]
        said = f" Rank 0's error: {error[-1]}" if error else " (the job's log holds no error line of rank 0)"
        lines.append(f"raise: rank 0 gave up after {waited_raise:.1f} s, before its {timeout_s} s timeout: rank 1's "
                     f"process had ended and closed its connection.{said}")
    return "\n".join(head + lines)
