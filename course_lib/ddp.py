"""06 DistributedDataParallel: the model, the single-process reference and the exercise checks.

The launcher and the helpers the scripts use live in :mod:`course_lib.dist`; this module holds
what notebook 06 and ``scripts/ddp_train.py`` share.

Why one process can reproduce W ranks: ``DistributedSampler`` shuffles the same permutation on
every rank (seeded by ``seed + epoch``) and gives rank r the positions r, r + W, r + 2W, ...
So the i-th batches of the W ranks (b images each) together hold positions
[i·W·b, (i+1)·W·b) of that permutation: the i-th batch of one process with batch W·b. DDP
averages the W ranks' gradients of their mean losses, which is the gradient of the mean loss
over those W·b images: the same step.
"""

from __future__ import annotations

from typing import Callable
from unittest import mock

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import BatchSampler, DistributedSampler, TensorDataset

from course_lib import check


def mlp(resolution: int, hidden: int, classes: int = 6) -> nn.Module:
    """The MLP of scripts/ddp_train.py: (B, 3, R, R) images -> (B, classes) logits. No BatchNorm
    and no dropout, so W ranks compute exactly what one process computes.

    GELU, not ReLU: a ReLU's gradient jumps at 0, so a rounding-level difference (the order of
    the all-reduce's sums) can switch a unit on or off for one image and move the weights by far
    more than rounding. With ReLU, 2 ranks and one process drifted from 5e-8 to 3e-3 apart
    between steps 66 and 96 here (cpu profile); with GELU they stay within 1e-7."""
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * resolution * resolution, hidden), nn.GELU(),
                         nn.Linear(hidden, hidden), nn.GELU(), nn.Linear(hidden, classes))


def deep_mlp(width: int, layers: int) -> nn.Sequential:
    """`layers` Linear(width, width) with ReLU between: (B, width) -> (B, width), the model of
    scripts/ddp_comm.py and fsdp_vs_ddp.py. No norm layer, no dropout: each sample's output
    depends on its own input only."""
    blocks: list[nn.Module] = []
    for i in range(layers):
        blocks += [nn.Linear(width, width)] + ([nn.ReLU()] if i < layers - 1 else [])
    return nn.Sequential(*blocks)


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
