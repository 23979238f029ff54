"""What each rank holds when a model is replicated (DDP) or sharded (FSDP2, DTensor): the bytes
of its parameters, gradients and optimizer state, counted exactly from the tensors or, for any
size, from a fake process group in this one process (nothing launched, nothing allocated).

    with fake_group(8) as mesh:                       # this process as rank 0 of 8
        with torch.device("meta"):
            model = GPT2SmallShapes()                 # shapes only
        shard(model, mesh, units=(Block,))           # fully_shard each block, then the root
        local_bytes(model)                            # rank 0's shards: about 1/8 of the whole

Notebooks 06 (DDP against FSDP2) and 11 (2D parallelism) count with it, and so do the scripts
that train for real (``scripts/fsdp_vs_ddp.py``, ``scripts/fsdp_tp.py``: :func:`held_bytes`).
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Sequence

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

STEP_BYTES = 4  # AdamW's step counter: one float32 scalar per parameter tensor
CPU_MIN_TORCH = "2.7"  # FSDP2 on CPU tensors from this torch on (pytorch#145935)


def trains_on_cpu() -> bool:
    """Whether this torch's FSDP2 can train on CPU tensors (a gloo CPU mesh). Tried here: torch
    2.6 fails in the first forward (its FSDP2 calls stream methods that the CPU stream gained in
    2.7, pytorch#145935; with them added, backward fails next); torch 2.15 trains. Versions in
    between were not tried."""
    return torch.torch_version.TorchVersion(torch.__version__) >= CPU_MIN_TORCH


def _local(t: torch.Tensor) -> torch.Tensor:
    """The part of `t` this rank holds: ``to_local()`` of a DTensor, else `t` itself."""
    return t.to_local() if hasattr(t, "to_local") else t


def tensor_bytes(t: torch.Tensor) -> int:
    """Bytes of this rank's local part of `t` (exact: elements × element size)."""
    local = _local(t)
    return local.numel() * local.element_size()


def local_bytes(obj: nn.Module | Iterable[torch.Tensor]) -> int:
    """Bytes of the local parameters of a module, or of the local parts of some tensors."""
    tensors = obj.parameters() if isinstance(obj, nn.Module) else obj
    return sum(tensor_bytes(t) for t in tensors)


def grad_bytes(module: nn.Module) -> int:
    """Bytes of the local gradients (``p.grad``) of `module`'s parameters that have one."""
    return sum(tensor_bytes(p.grad) for p in module.parameters() if p.grad is not None)


def optimizer_bytes(opt: torch.optim.Optimizer) -> int:
    """Bytes of every tensor in ``opt.state`` (local shards for DTensors; AdamW: exp_avg,
    exp_avg_sq and the step scalar of each parameter)."""
    return sum(tensor_bytes(v) for state in opt.state.values() for v in state.values()
               if isinstance(v, torch.Tensor))


def held_bytes(model: nn.Module, opt: torch.optim.Optimizer) -> dict[str, int]:
    """Bytes of this rank's local parameters, gradients and optimizer state (the scripts of 06
    and 11 count what each rank holds with it)."""
    return dict(params=local_bytes(model), grads=grad_bytes(model), optim=optimizer_bytes(opt))


def adamw_state_bytes(param_bytes: int, n_tensors: int) -> int:
    """AdamW's state from the parameters alone: exp_avg and exp_avg_sq of the parameters' shapes
    and dtype, plus one float32 step per parameter tensor (not fused, not capturable)."""
    return 2 * param_bytes + STEP_BYTES * n_tensors


def shard_bytes(shapes: Iterable[Sequence[int]], world: int, itemsize: int = 4) -> int:
    """Bytes rank 0 holds when each tensor of `shapes` is split on dim 0 over `world` ranks:
    Σ ceil(dim0 / W) · (other dims) · itemsize; also the padded shard every rank allocates."""
    return sum(math.ceil(s[0] / world) * math.prod(s[1:]) * itemsize for s in shapes)


@dataclass(frozen=True)
class RankBytes:
    """What one rank holds between steps, in bytes: parameters, gradients, optimizer state."""

    name: str  # "DDP" or "FSDP2"
    world: int | None  # ranks the model is sharded over; None for DDP (every rank: everything)
    params: int
    grads: int
    optim: int

    @property
    def total(self) -> int:
        return self.params + self.grads + self.optim


@contextlib.contextmanager
def fake_group(world: int, shape: tuple[int, ...] | None = None,
               names: tuple[str, ...] | None = None) -> Iterator[DeviceMesh]:
    """This process as rank 0 of a fake group of `world` ranks, with a CPU mesh over them (of
    `shape`, dims called `names`, when given; default one row); the group is destroyed on
    leaving, also on an error. Collectives compute nothing."""
    from torch.testing._internal.distributed.fake_pg import FakeStore  # registers "fake"

    if dist.is_initialized():
        raise RuntimeError("A process group is already initialised in this process; the fake "
                           "group needs its own (call it outside a distributed run).")
    dist.init_process_group("fake", rank=0, world_size=world, store=FakeStore())
    try:
        yield init_device_mesh("cpu", shape or (world,), mesh_dim_names=names)
    finally:
        dist.destroy_process_group()


def shard(model: nn.Module, mesh: DeviceMesh,
          units: tuple[type[nn.Module], ...] = (nn.Linear, nn.Embedding)) -> nn.Module:
    """``fully_shard`` every submodule of a type in `units` (each its own all-gather group),
    then the root (whatever parameters are left); returns the model."""
    from torch.distributed.fsdp import fully_shard

    for m in list(model.modules())[1:]:
        if isinstance(m, units):
            fully_shard(m, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def ddp_bytes(model: nn.Module) -> RankBytes:
    """What each DDP rank holds: all parameters, their gradients, AdamW's state for all."""
    params = local_bytes(model)
    n = sum(1 for _ in model.parameters())
    return RankBytes("DDP", None, params, params, adamw_state_bytes(params, n))


def fake_world_bytes(build_model: Callable[[], nn.Module], world_sizes: Iterable[int],
                     units: tuple[type[nn.Module], ...] = (nn.Linear, nn.Embedding),
                     ) -> list[RankBytes]:
    """Bytes per rank of `build_model()`'s model trained with AdamW: DDP first, then FSDP2 on
    each world size, rank 0's shards (the largest), from a fake group in this process.

    The model is built on the meta device: shapes only, no memory, no values. Gradients have
    the parameters' local shapes; AdamW's state is :func:`adamw_state_bytes` of them.
    """
    with torch.device("meta"):
        rows = [ddp_bytes(build_model())]
    for world in world_sizes:
        with fake_group(world) as mesh:
            with torch.device("meta"):
                model = build_model()
            shard(model, mesh, units)  # outside the meta context: torch 2.6 fails inside it
            params = local_bytes(model)
            n = sum(1 for _ in model.parameters())
            rows.append(RankBytes("FSDP2", world, params, params, adamw_state_bytes(params, n)))
    return rows


class Block(nn.Module):
    """The weight shapes of one GPT-2 block: attention in-projection (q, k, v in one Linear)
    and out-projection, MLP dim → 4·dim → dim. LayerNorms left out; shapes only, no forward."""

    def __init__(self, dim: int = 768, hidden: int = 3072):
        super().__init__()
        self.attn_in = nn.Linear(dim, 3 * dim)  # (3·dim, dim): q, k, v
        self.attn_out = nn.Linear(dim, dim)
        self.mlp_up = nn.Linear(dim, hidden)
        self.mlp_down = nn.Linear(hidden, dim)


class GPT2SmallShapes(nn.Module):
    """A GPT-2-small-shaped stack of plain layers: token embeddings 50257 × 768, positions
    1024 × 768, 12 :class:`Block`; the output head is tied to the token embeddings (no extra
    weights). 124,401,408 parameters (GPT-2 small: 124,439,808 with its LayerNorms).
    Parameter shapes for counting bytes, not a model to run (no forward)."""

    def __init__(self, vocab: int = 50257, context: int = 1024, dim: int = 768,
                 layers: int = 12, hidden: int = 3072):
        super().__init__()
        self.tokens = nn.Embedding(vocab, dim)
        self.positions = nn.Embedding(context, dim)
        self.blocks = nn.ModuleList(Block(dim, hidden) for _ in range(layers))
