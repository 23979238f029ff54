"""2D parallelism: FSDP2 over one dimension of a 2 × 2 mesh of ranks, tensor parallelism over
the other, trained for a few steps and checked against one process (notebook 11).

Run it by hand from the repository root (4 ranks):

    torchrun --nproc_per_node=4 scripts/fsdp_tp.py --width 256 --layers 2 --steps 3

The four ranks form a 2 × 2 mesh, ``init_device_mesh(..., (dp, tp))``: ranks 0, 1 and ranks
2, 3 are the two tensor-parallel groups (the mesh's rows, dimension ``tp``); ranks 0, 2 and
ranks 1, 3 are the two FSDP groups (its columns, dimension ``dp``). Each MLP block
``Linear(d, 4d) → GELU → Linear(4d, d)`` is first split over the ``tp`` ranks as in section 7
(column- then row-parallel), then every tensor-parallel shard is cut again over the ``dp`` ranks
by FSDP2. The two ranks of a ``tp`` group see the same samples of each batch; the two ``tp``
groups see different halves of it.

Every rank builds the whole model from one seed and also trains it in one process on the whole
batch of each step: at every step the 2D model's gradients, before the update, and its weights
after the AdamW step (``full_tensor``, gathered) must equal that reference within fp32 rounding.
The gradients are the sharp test: AdamW divides each update by the gradient's own size, so a
gradient off by a constant factor would still move the weights almost as the reference does. Each rank counts the bytes of its local
parameters, gradients and AdamW state; rank 0 writes everything to ``--out/results.json``.
"""

from __future__ import annotations

import argparse
import copy
import logging
import warnings
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

from course_lib import check, models, ranks, sharding

# The gradients are summed in another order (over the tp ranks, then the dp ranks): fp32
# rounding. AdamW divides by their root-mean-square, so the weights' rounding can grow a little
# at every step.
GRAD_ATOL, GRAD_RTOL = 1e-6, 1e-5
ATOL, RTOL = 1e-5, 1e-4


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--width", type=int, default=256, help="d: every block is Linear(d, 4d) → GELU → Linear(4d, d)")
    p.add_argument("--layers", type=int, default=2, help="MLP blocks")
    p.add_argument("--batch", type=int, default=32, help="rows of each step's global batch (dp must divide it)")
    p.add_argument("--steps", type=int, default=3, help="AdamW steps")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--tp", type=int, default=2, help="ranks of each tensor-parallel group (the rest: dp)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="build/dist/fsdp_tp", help="folder for results.json")
    p.add_argument("--timeout", type=float, default=60, help="process-group timeout (s)")
    return p.parse_args()


# >>> 2D (notebook 11 shows these lines)
def parallelize_2d(model: nn.Sequential, mesh) -> nn.Sequential:
    """Tensor parallel over mesh["tp"] inside each block, then FSDP2 over mesh["dp"]."""
    for block in model:
        parallelize_module(block, mesh["tp"], {
            "0": ColwiseParallel(),  # weight (4d, d) → (4d/tp, d) on each tp rank
            "2": RowwiseParallel(),  # weight (d, 4d) → (d, 4d/tp); its output summed over tp
        })
        fully_shard(block, mesh=mesh["dp"])  # every tp shard cut again on dim 0 over dp
    fully_shard(model, mesh=mesh["dp"])  # the root
    return model
# <<< 2D


@ranks.entry
def main() -> None:
    a = parse()
    ctx = ranks.setup(timeout_s=a.timeout)  # init_process_group("gloo" or "nccl", timeout=...)
    W, rank = ctx.world_size, ctx.rank
    if W % a.tp or W == a.tp:
        raise ValueError(f"--tp {a.tp} must divide the {W} ranks and leave at least 2 for dp.")
    dp, tp = W // a.tp, a.tp
    if a.batch % dp:
        raise ValueError(f"dp = {dp} must divide --batch {a.batch}.")
    if ctx.device.type == "cpu" and not sharding.trains_on_cpu():
        raise RuntimeError(f"FSDP2 trains on CPU tensors from torch {sharding.CPU_MIN_TORCH} on; this "
                           f"is torch {torch.__version__} (on GPUs with nccl it works).")
    ranks.print0(f"{W} ranks = {dp} (dp) × {tp} (tp), backend {ctx.backend}, device {ctx.device}")

    model = models.mlp_stack(a.width, a.layers, a.seed).to(ctx.device)  # the same on every rank
    start = copy.deepcopy(model)  # the initial weights, to tell how far training moved them
    g = torch.Generator().manual_seed(a.seed + 1)
    x = torch.randn(a.steps, a.batch, a.width, generator=g).to(ctx.device)  # (steps, batch, d)
    y = torch.randn(a.steps, a.batch, a.width, generator=g).to(ctx.device)

    # torch 2.6-2.7 warn that DTensor's random ops on a CPU mesh may be incomplete: none runs here.
    warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\.distributed\.tensor\._random")
    # FSDP2 warns that a block returns a view, which an in-place op would cut from its backward
    # hook: nothing here changes a block's output in place.
    warnings.filterwarnings("ignore", category=UserWarning, message=r"FSDP2-wrapped module .* view")
    # full_tensor() below gathers the 2D shards in two all-gathers, and DTensor logs that this is
    # slower than one: it is the check's cost, not the training's.
    logging.getLogger("torch.distributed.tensor._redistribute").setLevel(logging.ERROR)
    mesh = init_device_mesh(ctx.device.type, (dp, tp), mesh_dim_names=("dp", "tp"))
    two_d = parallelize_2d(copy.deepcopy(model), mesh)
    opt = torch.optim.AdamW(two_d.parameters(), lr=a.lr)  # each rank: its own shards only
    ref_opt = torch.optim.AdamW(model.parameters(), lr=a.lr)  # one process, the whole batch
    mine = mesh["dp"].get_local_rank()  # which rows of each batch this rank's dp group takes

    rows, losses = [], []  # check.agreement rows: each step's gradients, then its weights
    for step in range(a.steps):
        xb, yb = x[step].chunk(dp)[mine], y[step].chunk(dp)[mine]  # the same on both tp ranks
        loss = F.mse_loss(two_d(xb), yb)
        opt.zero_grad(set_to_none=True)
        loss.backward()  # tp: all-reduces inside the blocks; dp: reduce-scatter, mean over dp

        ref_loss = F.mse_loss(model(x[step]), y[step])  # the whole batch, in one process
        ref_opt.zero_grad(set_to_none=True)
        ref_loss.backward()

        grads = [p.grad.full_tensor() for p in two_d.parameters()]  # gathers
        rows.append(check.agreement(f"step {step + 1}: gradients vs one process on the whole batch", grads,
                                    [q.grad for q in model.parameters()], atol=GRAD_ATOL, rtol=GRAD_RTOL))
        if not rows[-1]["ok"]:
            raise AssertionError(f"rank {rank}: {check.fmt_agreement(rows[-1])}")
        opt.step()
        ref_opt.step()

        weights = [p.full_tensor() for p in two_d.parameters()]  # gathers
        moved = max((q - p).abs().max().item() for q, p in zip(model.parameters(), start.parameters()))
        rows.append(check.agreement(f"step {step + 1}: weights after AdamW (up to {moved:.1e} from where they "
                                    "started) vs one process", weights, [q.detach() for q in model.parameters()],
                                    atol=ATOL, rtol=RTOL))
        losses.append(dict(two_d=loss.item(), reference=ref_loss.item()))
        if not rows[-1]["ok"]:
            raise AssertionError(f"rank {rank}: {check.fmt_agreement(rows[-1])}")
    every: list[list[dict]] = [[] for _ in range(W)]
    dist.all_gather_object(every, rows)  # each rank compared the gathered weights: the worst rank's
    checks = check.merge(every)
    ranks.print0(f"{a.steps} AdamW steps: gradients and weights equal one process at each (max |Δ| "
                 f"{max(r['max_abs'] for r in checks[0::2]):.1e} and {max(r['max_abs'] for r in checks[1::2]):.1e}; "
                 f"largest change by training {moved:.1e})")

    per_rank: list[dict] = [{} for _ in range(W)]
    dist.all_gather_object(per_rank, dict(rank=rank, dp=mine, tp=mesh["tp"].get_local_rank(),
                                      local_shapes=[list(p.to_local().shape) for p in two_d.parameters()],
                                      placements=[str(p.placements) for p in two_d.parameters()],
                                      groups=dict(dp=dist.get_process_group_ranks(mesh["dp"].get_group()),
                                                  tp=dist.get_process_group_ranks(mesh["tp"].get_group())),
                                      **sharding.held_bytes(two_d, opt)))
    results = dict(world_size=W, dp=dp, tp=tp, backend=ctx.backend, device=str(ctx.device),
                   width=a.width, layers=a.layers, batch=a.batch, steps=a.steps, lr=a.lr,
                   names=[n for n, _ in model.named_parameters()],
                   shapes=[list(p.shape) for p in model.parameters()],
                   one_process=sharding.held_bytes(model, ref_opt), per_rank=per_rank,
                   checks=checks, max_change=moved, losses=losses)
    ranks.write_json0(Path(a.out) / "results.json", results)
    ranks.teardown()


if __name__ == "__main__":
    main()
