"""The same MLP trained with DDP and with FSDP2 on the same batches: bytes per rank, equal weights.

Run it by hand from the repository root:

    torchrun --nproc_per_node=2 scripts/fsdp_vs_ddp.py --width 512 --layers 6 --steps 5

Every rank builds the same model from one seed and the same data; rank r trains on its own
batch of each step. First DDP (every rank holds all parameters, gradients and AdamW state), then
FSDP2 (``fully_shard`` on each Linear, then the root: every rank holds a 1/W shard of each
parameter on dim 0, and the gradients and AdamW state that follow it). Each rank counts the
bytes of its local tensors; rank 0 writes them, with how close the trained weights are
(``check.agreement``'s row), to ``--out/results.json``. The script asserts the two trainings
give the same weights.
"""

from __future__ import annotations

import argparse
import copy
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel as DDP

from course_lib import check, models, ranks, sharding

# FSDP2 reduce-scatters the gradients where DDP all-reduces them: the same sums, possibly added
# in another order, so the weights may differ by fp32 rounding, carried through the AdamW steps.
ATOL, RTOL = 1e-6, 1e-5


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="build/dist/fsdp", help="folder for results.json")
    p.add_argument("--width", type=int, default=512, help="features in and out of every Linear")
    p.add_argument("--layers", type=int, default=6, help="Linear layers (ReLU between)")
    p.add_argument("--steps", type=int, default=5, help="AdamW steps of each training")
    p.add_argument("--batch", type=int, default=32, help="samples per rank and step")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=60, help="process-group timeout (s)")
    return p.parse_args()


def train(net: nn.Module, opt: torch.optim.Optimizer, xs: torch.Tensor, ys: torch.Tensor) -> list[float]:
    """One AdamW step per (B, width) batch of xs / ys (this rank's); the losses of this rank."""
    losses = []
    for xb, yb in zip(xs, ys):
        loss = F.mse_loss(net(xb), yb)
        opt.zero_grad(set_to_none=True)
        loss.backward()  # DDP: all-reduce of the gradients; FSDP2: reduce-scatter to the shards
        opt.step()  # DDP: every rank updates everything; FSDP2: each rank updates its shard
        losses.append(loss.item())
    return losses  # the gradients of the last step stay in .grad, to be counted


@ranks.entry
def main() -> None:
    a = parse()
    ctx = ranks.setup(timeout_s=a.timeout)  # init_process_group("gloo" or "nccl", timeout=...)
    W, rank = ctx.world_size, ctx.rank
    ranks.print0(f"world size {W}, backend {ctx.backend}, device {ctx.device}")
    if ctx.device.type == "cpu" and not sharding.trains_on_cpu():
        raise RuntimeError(f"FSDP2 trains on CPU tensors from torch {sharding.CPU_MIN_TORCH} on; this "
                           f"is torch {torch.__version__} (on GPUs with nccl it works).")

    ranks.seed_all(a.seed)  # every rank: the same initial weights and the same data
    model = models.deep_mlp(a.width, a.layers).to(ctx.device)
    x = torch.randn(a.steps, W, a.batch, a.width, device=ctx.device)  # (steps, W, B, width)
    y = torch.randn(a.steps, W, a.batch, a.width, device=ctx.device)
    xs, ys = x[:, rank], y[:, rank]  # this rank's batch of each step: (steps, B, width)

    # ---- DDP: every rank holds everything ----
    # >>> ddp (notebook 06 shows these lines)
    ddp_model = copy.deepcopy(model)
    ddp = DDP(ddp_model, device_ids=[ctx.local_rank] if ctx.device.type == "cuda" else None)
    ddp_opt = torch.optim.AdamW(ddp.parameters(), lr=a.lr)
    # <<< ddp
    ddp_losses = train(ddp, ddp_opt, xs, ys)
    ddp_held = sharding.held_bytes(ddp_model, ddp_opt)

    # ---- FSDP2: every rank holds a 1/W shard of each parameter ----
    # >>> fully_shard (notebook 06 shows these lines)
    mesh = init_device_mesh(ctx.device.type, (W,))  # gloo: a CPU mesh (pytorch#132471)
    sharded = copy.deepcopy(model)
    for layer in sharded:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)  # one all-gather / reduce-scatter group per layer
    fully_shard(sharded, mesh=mesh)  # the root: whatever is left, and the schedule
    fsdp_opt = torch.optim.AdamW(sharded.parameters(), lr=a.lr)  # sees only the local shards
    # <<< fully_shard
    fsdp_losses = train(sharded, fsdp_opt, xs, ys)
    fsdp_held = sharding.held_bytes(sharded, fsdp_opt)

    # ---- the same training: full weights equal within fp32 rounding ----
    full = torch.cat([p.full_tensor().flatten() for p in sharded.parameters()])  # all-gather
    ref = torch.cat([p.detach().flatten() for p in ddp_model.parameters()])
    start = torch.cat([p.detach().flatten() for p in model.parameters()])
    moved = (ref - start).abs().max().item()
    mine = check.agreement(f"trained weights after {a.steps} AdamW steps, FSDP2 (full_tensor) vs DDP",
                           full, ref, atol=ATOL, rtol=RTOL)  # torch.allclose's test, its numbers
    ranks.print0(f"{check.fmt_agreement(mine)} (largest change by training: {moved:.2e})")
    if not mine["ok"]:
        raise AssertionError(check.fmt_agreement(mine))  # the launcher names the rank

    rows: list[dict] = [{} for _ in range(W)]
    dist.all_gather_object(rows, dict(DDP=ddp_held, FSDP2=fsdp_held))  # every rank's counts
    for r, row in enumerate(rows):
        ranks.print0(f"rank {r}: DDP {row['DDP']} | FSDP2 {row['FSDP2']} (bytes)")
    shapes = [list(p.shape) for p in model.parameters()]
    results = dict(world_size=W, backend=ctx.backend, device=str(ctx.device), width=a.width,
                   layers=a.layers, steps=a.steps, batch_per_rank=a.batch, lr=a.lr,
                   shapes=shapes, n_params=sum(p.numel() for p in model.parameters()),
                   total_param_bytes=sharding.local_bytes(model),  # the unsharded model
                   per_rank={k: [row[k] for row in rows] for k in ("DDP", "FSDP2")},
                   agreement=mine,  # rank 0's: every rank compares the same full weights (and raised above)
                   max_change=moved,
                   losses=dict(DDP=ddp_losses, FSDP2=fsdp_losses))  # rank 0's batches
    ranks.write_json0(Path(a.out) / "results.json", results)
    ranks.teardown()


if __name__ == "__main__":
    main()
