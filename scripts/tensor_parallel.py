"""Tensor parallelism as Megatron-LM does it: one layer's weights split over the ranks, written
out with ``torch.distributed`` collectives, then with PyTorch's DTensor; each equal to one process.

Run it by hand from the repository root:

    torchrun --nproc_per_node=2 scripts/tensor_parallel.py --out build/dist/tp

Every rank builds the same full layers from one seed (so every rank can also run the one-process
reference) and keeps its 1/W share of their weights:

1. MLP ``Linear(d, 4d) → GELU → Linear(4d, d)``: the first Linear split by output rows
   (column-parallel: rank r computes hidden units [r·4d/W, (r+1)·4d/W)), the second by input
   columns (row-parallel: rank r's partial output from its hidden units). Megatron's operator
   ``f`` (forward: identity; backward: all-reduce) comes before the first, ``g`` (forward:
   all-reduce; backward: identity) after the second, the second bias once after ``g``: one
   all-reduce forward and one backward per block.
2. Causal self-attention split by heads: rank r owns heads [r·H/W, (r+1)·H/W), the rows of q, k
   and v that make them (column-parallel), the columns of the output projection that read them
   (row-parallel), and the same ``f`` and ``g``.
3. The MLP again with DTensor: ``parallelize_module`` with ``ColwiseParallel`` and
   ``RowwiseParallel`` does what part 1 writes out.

Each part asserts the output, the input gradient and the parameter gradients (each rank's
shard against the same slice of the one-process gradient) equal to one process. Every
all-reduce that ``f`` and ``g`` run is logged (shape, bytes) beside the predicted count; one
forward + backward of the tensor-parallel MLP and of the full MLP in one process are timed in
turns. Rank 0 writes it all to ``--out/results.json``.
"""

from __future__ import annotations

import argparse
import copy
import warnings
from pathlib import Path
from typing import Iterable

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.debug import CommDebugMode
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

from course_lib import bench, check, models, ranks, units
from course_lib.lessons import nb11

# Tensor parallelism computes the same sums as one process, split and added in another order
# (a row-parallel output is W partial sums added by the all-reduce): fp32 rounding, no more.
# Per element |Δ| <= ATOL·(largest |value| compared) + RTOL·|reference| (see close).
ATOL, RTOL = 1e-5, 1e-4


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--width", type=int, default=256, help="d: features in and out of each layer")
    p.add_argument("--heads", type=int, default=8, help="attention heads (a multiple of the ranks)")
    p.add_argument("--batch", type=int, default=4, help="B: sequences per batch")
    p.add_argument("--seq", type=int, default=64, help="T: tokens per sequence")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=5, help="timed rounds (0: no timing)")
    p.add_argument("--out", default="build/dist/tp", help="folder for results.json")
    p.add_argument("--timeout", type=float, default=60, help="process-group timeout (s)")
    return p.parse_args()


# ---- Megatron's f and g ------------------------------------------------------------------------

# >>> f and g (notebook 11 shows these lines)
ALL_REDUCES: list[dict] = []  # every all-reduce f and g run on this rank: where, pass, shape, bytes


def all_reduce(t: torch.Tensor, where: str, pass_: str) -> torch.Tensor:
    """Sum `t` over the ranks (a new tensor) and note the call."""
    ALL_REDUCES.append(dict(where=where, pass_=pass_, shape=list(t.shape),
                            bytes=t.numel() * t.element_size()))
    t = t.clone()  # contiguous, and the caller's tensor stays this rank's own
    dist.all_reduce(t)  # op=SUM: every rank gets the elementwise sum over the ranks
    return t


class CopyToRanks(torch.autograd.Function):
    """Megatron's f, before a column-parallel layer: every rank already holds the whole input, so
    the forward passes it on; each rank's gradient for it covers only its own slice of the
    layer, so the backward sums them over the ranks."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, where: str) -> torch.Tensor:
        ctx.where = where
        return x

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return all_reduce(grad, ctx.where, "backward"), None


class SumOverRanks(torch.autograd.Function):
    """Megatron's g, after a row-parallel layer: the forward sums the ranks' partial outputs;
    a sum's gradient reaches each of its terms unchanged, and every rank already holds the
    output's gradient, so the backward passes it on."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, where: str) -> torch.Tensor:
        return all_reduce(x, where, "forward")

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad, None
# <<< f and g


# ---- 1. the MLP, column- then row-parallel -------------------------------------------------------

# >>> tensor-parallel MLP (notebook 11 shows these lines)
def shard(t: torch.Tensor, dim: int | None, rank: int, world: int) -> torch.Tensor:
    """Rank `rank`'s slice of `t`: chunk `rank` of `world` along `dim` (all of it for None)."""
    return t if dim is None else t.chunk(world, dim=dim)[rank]


def own(t: torch.Tensor, dim: int | None, rank: int, world: int) -> nn.Parameter:
    """A parameter of this rank's own: a copy of its slice of the full weight `t`."""
    return nn.Parameter(shard(t.detach(), dim, rank, world).clone())


class ParallelMLP(nn.Module):
    """This rank's share of `full` (``models.mlp_block``) out of `world`."""

    # local parameter: (the full model's parameter, the dim it is split along; None: whole)
    PLAN = {"w1": ("0.weight", 0),  # (4d/W, d): the first Linear's rows, this rank's hidden units
            "b1": ("0.bias", 0),  # (4d/W,)
            "w2": ("2.weight", 1),  # (d, 4d/W): the second Linear's columns that read those units
            "b2": ("2.bias", None)}  # (d,): whole on every rank, added once after g

    def __init__(self, full: nn.Sequential, rank: int, world: int):
        super().__init__()
        weights = dict(full.named_parameters())
        for name, (source, dim) in self.PLAN.items():
            setattr(self, name, own(weights[source], dim, rank, world))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (B, T, d), the same on every rank
        x = CopyToRanks.apply(x, "mlp")  # f
        h = F.gelu(F.linear(x, self.w1, self.b1))  # (B, T, 4d/W): this rank's hidden units
        y = F.linear(h, self.w2)  # (B, T, d): their share of the output, a partial sum
        y = SumOverRanks.apply(y, "mlp")  # g: (B, T, d), the whole sum on every rank
        return y + self.b2  # the bias once, after the sum (added on every rank it would count W times)
# <<< tensor-parallel MLP


# ---- 2. attention, split by heads ----------------------------------------------------------------

def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, heads: int) -> torch.Tensor:
    """Causal attention of `heads` heads side by side in the last dim: (B, T, heads·hs) each."""
    B, T, C = q.shape
    q, k, v = (t.view(B, T, heads, C // heads).transpose(1, 2) for t in (q, k, v))  # (B, h, T, hs)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, h, T, hs)
    return o.transpose(1, 2).reshape(B, T, C)  # (B, T, h·hs)


class Attention(nn.Module):
    """Multi-head causal self-attention, the full layer: head i reads dims [i·hs, (i+1)·hs) of q,
    k and v."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.proj = (nn.Linear(d, d) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, d)
        o = attend(self.q(x), self.k(x), self.v(x), self.heads)  # (B, T, d)
        return self.proj(o)  # (B, T, d)


# >>> tensor-parallel attention (notebook 11 shows these lines)
class ParallelAttention(nn.Module):
    """This rank's heads of `full` (:class:`Attention`): H/W heads, the rows of q, k, v that make
    them and the columns of the output projection that read them."""

    PLAN = {"wq": ("q.weight", 0), "bq": ("q.bias", 0),  # (d/W, d), (d/W,): rows of this rank's heads
            "wk": ("k.weight", 0), "bk": ("k.bias", 0),
            "wv": ("v.weight", 0), "bv": ("v.bias", 0),
            "wo": ("proj.weight", 1),  # (d, d/W): the columns that read this rank's heads
            "bo": ("proj.bias", None)}  # (d,): whole, added once after g

    def __init__(self, full: Attention, rank: int, world: int):
        super().__init__()
        self.heads = full.heads // world
        weights = dict(full.named_parameters())
        for name, (source, dim) in self.PLAN.items():
            setattr(self, name, own(weights[source], dim, rank, world))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (B, T, d), the same on every rank
        x = CopyToRanks.apply(x, "attention")  # f: one all-reduce in backward for q, k and v together
        q = F.linear(x, self.wq, self.bq)  # (B, T, d/W): this rank's heads only
        k = F.linear(x, self.wk, self.bk)  # (B, T, d/W)
        v = F.linear(x, self.wv, self.bv)  # (B, T, d/W)
        o = attend(q, k, v, self.heads)  # (B, T, d/W): heads never look at each other
        y = F.linear(o, self.wo)  # (B, T, d): a partial sum
        y = SumOverRanks.apply(y, "attention")  # g: (B, T, d)
        return y + self.bo
# <<< tensor-parallel attention


# ---- checking against one process ----------------------------------------------------------------

def run(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Forward and backward of the mean squared error (from zero gradients); the output and the
    input's gradient."""
    model.zero_grad(set_to_none=True)
    x = x.detach().clone().requires_grad_()
    out = model(x)
    F.mse_loss(out, y).backward()
    return out.detach(), x.grad


def largest(ts: Iterable[torch.Tensor]) -> float:
    """The largest |entry| of any of `ts`."""
    return max(t.abs().max().item() for t in ts)


def close(rows: list[dict], what: str, got: torch.Tensor | list[torch.Tensor],
          want: torch.Tensor | list[torch.Tensor], scale: float | None = None) -> None:
    """Compare `got` with one process's `want` (tensors, or lists of them), append the
    ``check.agreement`` row to `rows`, and raise its line when it is not close.

    The allowance is ``ATOL·scale + RTOL·|reference|`` per element, `scale` the largest |entry|
    compared (for parameter gradients: of any of the layer's gradients). fp32 keeps about 7
    digits of the numbers added up, so a sum that cancels to nearly 0 (a gradient summed over
    B·T positions) still carries an error the size of its terms: the tolerance follows the size
    of the values, not an absolute 1e-5 that a smaller loss or a larger batch would make loose or
    tight."""
    scale = largest(want if isinstance(want, list) else [want]) if scale is None else scale
    rows.append(check.agreement(what, got, want, atol=ATOL * scale, rtol=RTOL))
    if not rows[-1]["ok"]:
        raise AssertionError(f"rank {dist.get_rank()}: {check.fmt_agreement(rows[-1])}")


def check_parallel(rows: list[dict], name: str, full: nn.Module, tp: nn.Module, x: torch.Tensor,
                   y: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    """`tp` (this rank's share of `full`) against `full` in one process: output, input gradient,
    each local parameter's gradient against its slice of the full one. Returns `tp`'s output."""
    ref_out, ref_dx = run(full, x, y)
    out, dx = run(tp, x, y)
    close(rows, f"{name}: output vs one process", out, ref_out)
    close(rows, f"{name}: input gradient vs one process", dx, ref_dx)
    ref = dict(full.named_parameters())
    got = [getattr(tp, local).grad for local in tp.PLAN]
    want = [shard(ref[source].grad, dim, rank, world) for source, dim in tp.PLAN.values()]
    close(rows, f"{name}: gradients of {', '.join(tp.PLAN)}, each rank's vs its slice of one process's", got, want,
          largest(p.grad for p in full.parameters()))
    return out


# ---- 3. the same MLP with DTensor ----------------------------------------------------------------

def dtensor_mlp(full: nn.Sequential, device_type: str, world: int) -> nn.Sequential:
    """A copy of `full` split by PyTorch as :class:`ParallelMLP` splits it by hand."""
    with warnings.catch_warnings():
        # torch 2.6 warns, for every tensor it shards on a CPU mesh, that DTensor's random
        # operators (dropout, initialising DTensors) may be incomplete there; none runs here.
        warnings.filterwarnings("ignore", category=UserWarning,
                                module=r"torch\.distributed\.tensor\._random")
        # >>> DTensor (notebook 11 shows these lines)
        mesh = init_device_mesh(device_type, (world,))  # the W ranks in a row; gloo: a CPU mesh
        mlp = copy.deepcopy(full)
        parallelize_module(mlp, mesh, {
            "0": ColwiseParallel(),  # weight, bias: Shard(0), this rank's rows; the input replicated
            "2": RowwiseParallel(),  # weight: Shard(1), its columns; bias whole; the output summed
        })
        # <<< DTensor
    return mlp


def check_dtensor(rows: list[dict], full: nn.Sequential, dt: nn.Sequential, tp: ParallelMLP,
                  tp_out: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> dict[str, dict[str, int]]:
    """`dt` against one process and against the written-out `tp` (its gradients and output
    `tp_out` from the same batch); the collectives DTensor ran in the forward and the backward."""
    comms = {}
    x = x.detach().clone().requires_grad_()
    with CommDebugMode() as forward:
        out = dt(x)  # a plain tensor: RowwiseParallel hands back the local (replicated) output
    with CommDebugMode() as backward:
        F.mse_loss(out, y).backward()
    for pass_, mode in (("forward", forward), ("backward", backward)):
        comms[pass_] = {str(op).split(".")[-1]: n for op, n in mode.get_comm_counts().items()}
    ref_out, ref_dx = run(full, x, y)
    close(rows, "DTensor's MLP: output vs one process", out.detach(), ref_out)
    close(rows, "DTensor's MLP: output vs the written-out MLP's", out.detach(), tp_out)
    close(rows, "DTensor's MLP: input gradient vs one process", x.grad, ref_dx)
    ref = dict(full.named_parameters())
    scale = largest(p.grad for p in full.parameters())
    mine = {source: local for local, (source, _) in ParallelMLP.PLAN.items()}
    names = [name for name, _ in dt.named_parameters()]
    grads = [p.grad for _, p in dt.named_parameters()]  # DTensors, like the parameters
    close(rows, f"DTensor's MLP: gradients of {', '.join(names)} (full_tensor) vs one process",
          [g.full_tensor() for g in grads],
          [ref[name].grad for name in names], scale)
    close(rows, f"DTensor's MLP: gradients of {', '.join(names)} (to_local) vs the written-out MLP's",
          [g.to_local() for g in grads],
          [getattr(tp, mine[name]).grad for name in names], scale)
    return comms


# ---- 4. what the all-reduces move, and 5. time -----------------------------------------------------

def predicted(B: int, T: int, d: int, world: int, itemsize: int = 4) -> dict:
    """Per block: one all-reduce of the (B, T, d) output in the forward (g), one of the (B, T, d)
    input gradient in the backward (f); a ring all-reduce sends 2(W−1)/W of it from each rank."""
    nbytes = B * T * d * itemsize
    call = dict(shape=[B, T, d], bytes=nbytes,
                ring_bytes_sent_per_rank=2 * (world - 1) * nbytes // world)
    return dict(forward=[call], backward=[call])


def logged(block: str) -> dict[str, list[dict]]:
    """The all-reduces `block` ran, forward and backward: shape and bytes of each."""
    rows = [r for r in ALL_REDUCES if r["where"] == block]
    return {p: [dict(shape=r["shape"], bytes=r["bytes"]) for r in rows if r["pass_"] == p]
            for p in ("forward", "backward")}


def describe(calls: dict[str, list[dict]]) -> str:
    """'forward 1× (4, 64, 256) 256.0 KiB; backward 1× …' from :func:`logged`."""
    def one(rows: list[dict]) -> str:
        return ", ".join(f"{tuple(r['shape'])} {units.fmt_bytes(r['bytes'])}" for r in rows)
    return "; ".join(f"{pass_} {len(rows)}× {one(rows)}" for pass_, rows in calls.items())


def time_steps(full: nn.Module, tp: nn.Module, x: torch.Tensor, y: torch.Tensor,
               repeats: int) -> dict[str, list[float]]:
    """Seconds of one forward + backward, the tensor-parallel MLP and the full MLP in one
    process (on every rank at once), timed in turns, the same count of calls on every rank."""
    x = x.detach().clone().requires_grad_()  # as inside a model: f's backward all-reduce runs

    def step(model: nn.Module) -> None:
        F.mse_loss(model(x), y).backward()  # gradients accumulate: the same work every call

    fns = {"tensor parallel": lambda: step(tp), "one process": lambda: step(full)}
    return bench.turns(fns, rounds=repeats, number=1, warmup=1)


@ranks.entry
def main() -> None:
    a = parse()
    ctx = ranks.setup(timeout_s=a.timeout)  # init_process_group("gloo" or "nccl", timeout=...)
    W, rank, dev = ctx.world_size, ctx.rank, ctx.device
    if a.heads % W or a.width % a.heads:
        raise ValueError(f"--heads must be a multiple of the {W} ranks and divide --width, "
                         f"got heads={a.heads}, width={a.width}.")
    ranks.print0(f"world size {W}, backend {ctx.backend}, device {dev}")
    B, T, d = a.batch, a.seq, a.width

    ranks.seed_all(a.seed)  # every rank: the same full layers and the same batch
    mlp = models.mlp_block(d).to(dev)
    attn = Attention(d, a.heads).to(dev)
    x, y = (t.view(B, T, d).to(dev) for t in nb11.batch(B * T, d, seed=a.seed))  # (B, T, d) each
    rows: list[dict] = []  # check.agreement rows, this rank's

    tp_mlp = ParallelMLP(mlp, rank, W)
    tp_out = check_parallel(rows, "MLP", mlp, tp_mlp, x, y, rank, W)
    tp_attn = ParallelAttention(attn, rank, W)
    check_parallel(rows, "attention", attn, tp_attn, x, y, rank, W)
    all_reduces = dict(mlp=logged("mlp"), attention=logged("attention"))
    dt_comms = check_dtensor(rows, mlp, dtensor_mlp(mlp, dev.type, W), tp_mlp, tp_out, x, y)
    every = [None] * W
    dist.all_gather_object(every, rows)  # each rank checked its own shards
    checks = check.merge(every)  # one row per comparison: the worst rank's
    ranks.print0(f"{len(checks)} comparisons with one process, every rank's close (atol {ATOL:g}·largest value, "
                 f"rtol {RTOL:g}): largest |Δ| {max(r['max_abs'] for r in checks):.2e}, the worst at "
                 f"{max(r['worst_share'] for r in checks):.1%} of its allowance")
    for block, calls in all_reduces.items():
        ranks.print0(f"{block}: all-reduces {describe(calls)}")
    ring = predicted(B, T, d, W)["forward"][0]
    ranks.print0(f"each moves the block's whole (batch, tokens, d) activations, {units.fmt_bytes(ring['bytes'])}, "
                 f"whatever W; a ring all-reduce sends {units.fmt_bytes(ring['ring_bytes_sent_per_rank'])} of it "
                 f"from each of the {W} ranks")
    ranks.print0(f"DTensor's MLP ran the collectives {dt_comms}")

    timings = time_steps(mlp, tp_mlp, x, y, a.repeats) if a.repeats else {}
    for name, ts in timings.items():
        ranks.print0(f"{name:<16} {sorted(ts)[len(ts) // 2] * 1e3:8.2f} ms per forward + backward "
                     f"(median of {a.repeats})")

    results = dict(world_size=W, backend=ctx.backend, device=str(dev), torch=torch.__version__,
                   width=d, heads=a.heads, batch=B, seq=T, seed=a.seed, checks=checks,
                   atol_per_scale=ATOL, rtol=RTOL,
                   all_reduces=all_reduces, predicted=predicted(B, T, d, W),
                   dtensor_collectives=dt_comms, repeats=a.repeats, step_s=timings)
    ranks.write_json0(Path(a.out) / "results.json", results)
    ranks.teardown()


if __name__ == "__main__":
    main()
