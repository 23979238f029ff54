"""Notebook 06 (DistributedDataParallel, FSDP2): the single-process reference, the exercise checks,
and the training script's scaffolding (its flags, the failure lab's crash, its step timing), so
that the script the notebook writes is its core alone.

The launcher and the helpers every distributed script uses live in the core:
:mod:`course_lib.launcher`, :mod:`course_lib.ranks`, and :mod:`course_lib.sharding` (the bytes
each rank holds under DDP, FSDP2 or DTensor, counted for real or from a fake group); the MLP of
``scripts/ddp_comm.py`` and ``fsdp_vs_ddp.py`` is :func:`course_lib.models.deep_mlp`. This module
holds what notebook 06 and ``scripts/ddp_train.py`` share.

Why one process can reproduce W ranks: ``DistributedSampler`` shuffles the same permutation on
every rank (seeded by ``seed + epoch``) and gives rank r the positions r, r + W, r + 2W, ...
So the i-th batches of the W ranks (b images each) together hold positions
[i·W·b, (i+1)·W·b) of that permutation: the i-th batch of one process with batch W·b. DDP
averages the W ranks' gradients of their mean losses, which is the gradient of the mean loss
over those W·b images: the same step.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
from typing import Callable, Iterable, Sequence
from unittest import mock

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.benchmark import Timer
from torch.utils.data import BatchSampler, DistributedSampler, TensorDataset

from course_lib import check, data
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


# ---- FSDP2: bytes per rank ----------------------------------------------------------------
# Bytes per rank under FSDP2 (``fully_shard``) and DDP: counted on real tensors, and projected to
# any world size in one process with PyTorch's fake process group (notebook 06).
# 
# FSDP2 shards every parameter on dim 0 across the W ranks (``torch.chunk``: rank r holds rows
# ``r·c … r·c + c − 1`` with ``c = ceil(dim0 / W)``; rank 0 always holds ``c`` rows, the padded size
# every rank allocates), so the gradients and the optimizer state that follow the parameters are
# sharded too. DDP replicates all three on every rank.
# 
# :func:`fake_world_bytes` builds a model on the ``meta`` device (shapes, no storage), shards it
# under ``init_process_group("fake", …)`` (one process plays rank 0 of W; collectives return
# without computing anything, so values are meaningless, while shapes and bytes are those of a
# real run) and reads rank 0's local shards. The fake group lives in
# ``torch.testing._internal``: an internal PyTorch module, used by PyTorch's own tests.


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
