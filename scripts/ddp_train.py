"""DistributedDataParallel training of a small MLP on the procedural shapes (notebook 06).

Run it by hand from the repository root:

    torchrun --nproc_per_node=2 scripts/ddp_train.py --epochs 2
    TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 torchrun --standalone --nproc_per_node=2 --max_restarts=1 \
        scripts/ddp_train.py --ckpt build/ckpt.pt --save-every 4 --crash-at 6

The second: rank 1 dies at step 6, torchrun starts every rank again, and each resumes from
the checkpoint of step 4. The variable keeps the restarted ranks off the failed attempt's
rendezvous store, which they could not rejoin here (pytorch/pytorch#135712; notebook 06).
Delete build/ckpt.pt to start afresh: a run that finds it resumes from it.

Every rank builds the same dataset; DistributedSampler hands each rank its own 1/W of it,
reshuffled every epoch by ``set_epoch``; DDP averages the gradients during ``backward()``.
Rank 0 writes the final weights (and checkpoints) to ``--out``; with ``--bench-steps`` every
rank also times training steps on a fixed batch (results.json).
"""

from __future__ import annotations

import itertools
import os
from argparse import Namespace
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from course_lib import checkpoint, data, models, ranks
from course_lib.lessons.nb06 import crash_if_asked, ddp_train_args, time_ddp_steps


@ranks.entry
def main() -> None:
    a = ddp_train_args()  # --epochs, --batch, --lr, --ckpt, ...: scripts/ddp_train.py --help
    out = Path(a.out)
    local_rank = int(os.environ["LOCAL_RANK"])  # torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, ...
    backend = ranks.backend_for(int(os.environ["LOCAL_WORLD_SIZE"]))  # nccl with a GPU per rank, else gloo
    device = torch.device("cuda", local_rank) if backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
        # the same bits from the same inputs (06's restart check): cuBLAS needs its workspace
        # setting before its first call; ops without a deterministic kernel only warn
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True, warn_only=True)
    dist.init_process_group(backend, timeout=timedelta(seconds=a.timeout),  # waits for all ranks
                            device_id=device if device.type == "cuda" else None)  # the rank's GPU
    rank, world_size = dist.get_rank(), dist.get_world_size()

    x, y = data.make_tensor_dataset(a.images, a.res, seed=a.seed)  # every rank: the same images
    dataset = TensorDataset(x, y)
    sampler = DistributedSampler(dataset, shuffle=True, seed=a.seed, drop_last=True)  # 1/W each
    loader = DataLoader(dataset, batch_size=a.batch, sampler=sampler, drop_last=True)

    torch.manual_seed(a.seed)  # the same initial weights everywhere (DDP also broadcasts rank 0's)
    model = models.mlp(a.res, a.hidden).to(device)  # 3 Linear layers, GELU between
    ddp = DDP(model, device_ids=[local_rank] if device.type == "cuda" else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=a.lr, momentum=0.9)
    ranks.print0(f"world size {world_size}, backend {backend}, device {device}, "
                 f"{torch.get_num_threads()} thread(s) per rank")

    step, first_epoch, skip = resume(a, model, opt, device, len(loader))  # 0, 0, 0 without --ckpt
    for epoch in range(first_epoch, a.epochs):
        sampler.set_epoch(epoch)  # a new shuffle each epoch, the same on every rank
        for xb, yb in itertools.islice(loader, skip, None):
            crash_if_asked(a, step, rank)
            xb, yb = xb.to(device), yb.to(device)
            loss = F.cross_entropy(ddp(xb), yb)  # mean over this rank's batch
            opt.zero_grad(set_to_none=True)
            loss.backward()  # DDP averages gradients over the ranks, bucket by bucket
            opt.step()  # the same update on every rank: the weights stay identical
            step += 1
            if a.ckpt and a.save_every and step % a.save_every == 0:  # rank 0 writes, all wait
                ranks.save0(a.ckpt, dict(model=model.state_dict(), opt=opt.state_dict(), step=step))
        skip = 0
        ranks.print0(f"epoch {epoch}: step {step}, last loss {loss.item():.4f} (rank 0's batch)")

    ranks.save0(out / "final.pt", dict(model=model.state_dict(), step=step))
    results = dict(world_size=world_size, backend=backend, device=str(device),
                   threads=torch.get_num_threads(), steps=step, steps_per_epoch=len(loader))
    if a.bench_steps:
        results.update(time_ddp_steps(a, model, ddp, opt, device))
    ranks.write_json0(out / "results.json", results)
    dist.barrier()  # no rank closes its connections while another is still finishing
    dist.destroy_process_group()


def resume(a: Namespace, model: nn.Module, opt: torch.optim.Optimizer,
           device: torch.device, steps_per_epoch: int) -> tuple[int, int, int]:
    """(step, epoch, batches to skip in that epoch): from the checkpoint when one exists, which
    every rank loads (rank 0 wrote it), else from the start."""
    if not (a.ckpt and Path(a.ckpt).exists()):
        return 0, 0, 0
    state = checkpoint.load_checkpoint(a.ckpt, map_location=device)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    step = state["step"]
    print(f"rank {dist.get_rank()}: resumed from {a.ckpt} at step {step}", flush=True)
    return step, step // steps_per_epoch, step % steps_per_epoch


if __name__ == "__main__":
    main()
