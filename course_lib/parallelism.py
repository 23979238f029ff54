"""Which parallelism when: for a GPT-2-style Transformer, what each rank holds and sends under
each plan (data, tensor, pipeline parallel, FSDP, and their products) on a given number of GPUs,
the bytes of model state checked against PyTorch's own split on a fake process group, and the
decision table notebook 11 prints (section 9):

    rows = decision_table([GPT2_SMALL, SIZE_7B], gpu_counts=[8, 64])
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Sequence

import torch
import torch.nn as nn

from course_lib import datasheet, published, sharding


BYTES_PER_PARAM = 16  # fp32 training with AdamW: weight 4, gradient 4, two moments 8 (notebook 06)


@dataclass(frozen=True)
class Shape:
    """A GPT-2-style Transformer's sizes (the MLP 4·dim wide, the output head tied to the token
    embedding, LayerNorms left out): what the decision table's formulas need."""

    name: str
    dim: int
    layers: int
    heads: int
    context: int = 1024
    # GPT-2's 50,257 tokens padded to 50,304, a multiple of 64, as nanoGPT's model.py does: every
    # cut here then divides the embeddings evenly, which torch 2.6's FSDP requires of a
    # tensor-parallel shard ("FSDP+TP sharding does not support uneven sharding").
    vocab: int = 50304

    @property
    def embed(self) -> int:
        """Token and position embeddings' parameters."""
        return (self.vocab + self.context) * self.dim

    @property
    def split(self) -> int:
        """Parameters of one block that tensor parallelism cuts over its ranks: the q, k, v
        projection (weight and bias), the attention output's weight, the MLP's first Linear
        (weight and bias) and its second's weight."""
        d, h = self.dim, 4 * self.dim
        return 3 * d * d + 3 * d + d * d + h * d + h + d * h

    @property
    def whole(self) -> int:
        """Parameters of one block tensor parallelism keeps whole on every rank: the biases of
        the two row-parallel Linears, added once after the sum."""
        return 2 * self.dim

    @property
    def params(self) -> int:
        return self.embed + self.layers * (self.split + self.whole)

    def build(self, layers: int | None = None) -> nn.Module:
        """The parameter shapes as modules (:class:`sharding.GPT2SmallShapes`), `layers` blocks."""
        return sharding.GPT2SmallShapes(self.vocab, self.context, self.dim, layers or self.layers, 4 * self.dim)


GPT2_SMALL = Shape("GPT-2 small", dim=768, layers=12, heads=12)
SIZE_7B = Shape("6.7B", dim=4096, layers=32, heads=32, context=2048)  # GPT-2's layout, wider and deeper


@dataclass(frozen=True)
class Plan:
    """How `gpus` ranks share the work: dp copies of the model (FSDP-sharded over them when
    `fsdp`), each cut into tp tensor-parallel shards and pp pipeline stages."""

    name: str
    gpus: int
    dp: int = 1
    tp: int = 1
    pp: int = 1
    fsdp: bool = False


def plans(gpus: int, heads: int) -> list[Plan]:
    """The table's five ways to use `gpus` GPUs. 2D keeps tensor parallelism within 8 GPUs (one
    server's fast links), on the most ranks that divide both `gpus` and the `heads`, and shards
    over the rest with FSDP."""
    tp = max(t for t in range(1, min(8, gpus // 2) + 1) if gpus % t == 0 and heads % t == 0)
    return [Plan("DP", gpus, dp=gpus), Plan("FSDP", gpus, dp=gpus, fsdp=True), Plan("TP", gpus, tp=gpus),
            Plan("PP", gpus, pp=gpus), Plan(f"FSDP {gpus // tp} × TP {tp}", gpus, dp=gpus // tp, tp=tp, fsdp=True)]


def impossible(shape: Shape, plan: Plan) -> str | None:
    """Why `plan` cannot split `shape`, in a few words; None when it can."""
    if shape.heads % plan.tp:
        return f"{plan.tp} tensor-parallel ranks cannot share {shape.heads} heads"
    if plan.pp > shape.layers:
        return f"{plan.pp} stages for {shape.layers} blocks"
    return None


def stage_blocks(shape: Shape, plan: Plan) -> int:
    """Blocks of the largest pipeline stage (the first): ceil(layers / pp)."""
    return math.ceil(shape.layers / plan.pp)


def rank_params(shape: Shape, plan: Plan, sharded: bool = True) -> float:
    """Parameters the largest rank holds (before FSDP's cut when not `sharded`): the first
    pipeline stage, ceil(layers / pp) blocks and the embeddings; tensor parallelism cuts the
    embeddings' rows (the vocabulary) and each block's split part over tp."""
    n = shape.embed / plan.tp + stage_blocks(shape, plan) * (shape.split / plan.tp + shape.whole)
    return n / plan.dp if plan.fsdp and sharded else n


def comm_bytes(shape: Shape, plan: Plan, tokens: int, itemsize: int = 4) -> float:
    """Bytes one rank sends per training step of `tokens` tokens (the global batch), with ring
    collectives (a ring all-reduce sends 2(n-1)/n of the data, an all-gather or reduce-scatter
    (n-1)/n):

    - over dp: DP all-reduces the gradients, 2(dp-1)/dp · P; FSDP all-gathers the parameters in
      the forward and again in the backward and reduce-scatters the gradients, 3(dp-1)/dp · P;
    - over tp: each block all-reduces its (tokens / dp, dim) activations twice forward and twice
      backward (section 7); the embeddings' and the output head's own collectives are left out;
    - over pp: a middle stage sends each token's activations forward and their gradients back.
    """
    return sum(comm_parts(shape, plan, tokens, itemsize).values())


GPUS_PER_SERVER = 8  # the table's servers: 8 GPUs joined by fast links, slower links between servers


def comm_parts(shape: Shape, plan: Plan, tokens: int, itemsize: int = 4) -> dict[str, float]:
    """:func:`comm_bytes` split by the dimension that sends them: ``dp``, ``tp``, ``pp``."""
    parts = dict(dp=0.0, tp=0.0, pp=0.0)
    if plan.dp > 1:
        parts["dp"] = (3 if plan.fsdp else 2) * (plan.dp - 1) / plan.dp * rank_params(shape, plan, sharded=False)
    if plan.tp > 1:
        parts["tp"] = 4 * stage_blocks(shape, plan) * 2 * (plan.tp - 1) / plan.tp * tokens / plan.dp * shape.dim
    if plan.pp > 1:
        parts["pp"] = 2 * tokens * shape.dim
    return {k: v * itemsize for k, v in parts.items()}


def across_servers(shape: Shape, plan: Plan, tokens: int, itemsize: int = 4) -> float:
    """The part of :func:`comm_bytes` that one GPU sends between servers of :data:`GPUS_PER_SERVER`,
    each GPU with its own network link. The ranks are numbered tensor-parallel first (each tp group
    within a server, as :func:`plans` keeps it), so a dp group spans servers once dp × tp exceeds
    a server, with GPUS_PER_SERVER / tp of its ranks in each: the bytes its collectives send out of a
    server are spread over those ranks' links (NCCL runs several rings, each crossing a server at
    another GPU; a hierarchical all-reduce sends about as much), so one GPU sends its dp bytes over
    that count. A pipeline's stage boundaries cross servers whole."""
    if plan.gpus <= GPUS_PER_SERVER:
        return 0.0
    parts = comm_parts(shape, plan, tokens, itemsize)
    per_server = GPUS_PER_SERVER // plan.tp  # the dp group's ranks in one server, each with its own link
    dp = parts["dp"] / per_server if plan.dp > per_server else 0.0
    return dp + parts["pp"] + (parts["tp"] if plan.tp > GPUS_PER_SERVER else 0.0)


def fake_rank_bytes(shape: Shape, plan: Plan) -> int:
    """Bytes of parameters rank 0 holds when PyTorch itself splits `shape` by `plan`, on the meta
    device in a fake process group (no memory, no values, no communication): the stage's blocks
    for pp, ``parallelize_module`` over tp, ``fully_shard`` over dp. Rank 0 has the largest FSDP
    shard, padded as every rank's is."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    with warnings.catch_warnings():  # torch 2.6-2.7 warn that DTensor's random ops on a CPU mesh
        warnings.filterwarnings("ignore", category=UserWarning,  # may be incomplete; none runs here
                                module=r"torch\.distributed\.tensor\._random")
        with sharding.fake_group(plan.dp * plan.tp, (plan.dp, plan.tp), ("dp", "tp")) as mesh:
            with torch.device("meta"):
                model = shape.build(stage_blocks(shape, plan))
            if plan.tp > 1:
                parallelize_module(model, mesh["tp"], {"tokens": RowwiseParallel(), "positions": RowwiseParallel()})
                for block in model.blocks:
                    parallelize_module(block, mesh["tp"], {"attn_in": ColwiseParallel(), "attn_out": RowwiseParallel(),
                                                           "mlp_up": ColwiseParallel(), "mlp_down": RowwiseParallel()})
            if plan.fsdp:
                sharding.shard(model, mesh["dp"], units=(sharding.Block, nn.Embedding))
            return sharding.local_bytes(model)


@dataclass(frozen=True)
class Row:
    """One line of the decision table: a model, a plan, a step of `tokens` tokens, and the
    numbers (None where the plan cannot split the model)."""

    shape: Shape
    plan: Plan
    tokens: int
    why_not: str | None = None
    fake_bytes: int | None = None  # the parameters' bytes PyTorch's own split gives rank 0

    @property
    def formula_param_bytes(self) -> float:
        return rank_params(self.shape, self.plan) * 4

    @property
    def state_bytes(self) -> float:
        """Weights, gradients and AdamW state of the largest rank, by formula."""
        return rank_params(self.shape, self.plan) * BYTES_PER_PARAM

    @property
    def comm_bytes(self) -> float:
        """Bytes one rank sends per step, by formula (:func:`comm_bytes`)."""
        return comm_bytes(self.shape, self.plan, self.tokens)

    @property
    def agrees(self) -> bool:
        """The formula's parameter bytes within 1 % of PyTorch's (FSDP pads each shard's dim 0)."""
        return self.fake_bytes is not None and abs(self.fake_bytes / self.formula_param_bytes - 1) < 0.01

    @property
    def across_bytes(self) -> float:
        """Of :attr:`comm_bytes`, what crosses between servers (:func:`across_servers`)."""
        return across_servers(self.shape, self.plan, self.tokens)

    @property
    def flop_per_byte(self) -> float:
        """Each rank's share of the step's arithmetic (6 FLOP per parameter and token: forward 2,
        backward 4) per byte it sends over links (not notebook 10's bytes to memory):
        communication can hide behind computing only while this is above the GPU's FLOP/s divided
        by its link's bytes/s."""
        return 6 * self.shape.params * self.tokens / self.plan.gpus / self.comm_bytes

    @property
    def idle(self) -> float:
        """The stages' average idle share of a step with one sequence per micro-batch, every pass
        taking time in proportion to its stage's blocks and messages taking none (a lower bound:
        :func:`simulate` gives the same). The first micro-batch crosses all L blocks, the other
        m - 1 follow at the pace of the largest stage, ceil(L / pp) blocks, while the average
        stage works m · L / pp: idle = 1 - m·(L/pp) / (L + (m-1)·ceil(L/pp)). With even stages
        this is the bubble (section 4); uneven ones add the waits of exercise 2. The output head
        (tied to the token embedding) is left out: on the last stage it would add work there,
        and an all-reduce of its gradient with the first. 0 without stages."""
        if self.plan.pp == 1:
            return 0.0
        m, L, p = self.tokens // self.shape.context, self.shape.layers, self.plan.pp
        return 1 - m * (L / p) / (L + (m - 1) * stage_blocks(self.shape, self.plan))


def decision_table(shapes: Sequence[Shape], gpu_counts: Sequence[int], seqs_per_gpu: int = 8) -> list[Row]:
    """Every plan of :func:`plans` for every model and GPU count: model state per rank and bytes
    sent per step by formula, the parameters checked against PyTorch's own split. The global
    batch is `seqs_per_gpu` full-context sequences per GPU."""
    rows = []
    for shape in shapes:
        for gpus in gpu_counts:
            tokens = gpus * seqs_per_gpu * shape.context
            for plan in plans(gpus, shape.heads):
                why = impossible(shape, plan)
                rows.append(Row(shape, plan, tokens, why, None if why else fake_rank_bytes(shape, plan)))
    return rows


# The link rates section 9's thresholds divide by: one 8-GPU H200 server's ring all-reduce bus
# bandwidth, measured and published (nccl-tests, 16 GiB), and between servers the 400 Gb/s per GPU
# that torchtitan's benchmark machines state (a network's rate, not a measurement).
NVLINK_RING_BUSBW = 367.2e9  # B/s, published.get("ml_engineering_h200_8gpu_allreduce_busbw_nvls_vs_ring")
BETWEEN_SERVERS = 400e9 / 8  # B/s, from "400 Gb/s RDMA per GPU" (torchtitan_llama3_70b_256_h100_async_tp's hardware)


def _thresholds() -> tuple[datasheet.Spec, float, float, float]:
    """The H200 datasheet entry, its dense bf16 FLOP/s, and the FLOP per byte sent above which it
    computes longer than a link sends: within a server (the measured ring bus bandwidth) and
    between servers (the stated network rate)."""
    spec = datasheet.lookup("H200")
    peak = datasheet.peak_tflops(spec, "bf16") * 1e12
    return spec, peak, peak / NVLINK_RING_BUSBW, peak / BETWEEN_SERVERS


def link_thresholds() -> str:
    """The FLOP per byte sent above which a GPU computes longer than its link sends (section 9's
    threshold, the decision table's `> link` column: :func:`above_links`), in short lines: an
    H200's datasheet bf16 peak over the published rate within a server and over the stated rate
    between servers, and the published figure the first comes from."""
    spec, peak, within, between = _thresholds()
    return "\n".join([
        f"> link: the plan's FLOP per byte sent is above the threshold of every link it sends over, a GPU's FLOP/s over "
        f"the link's bytes/s ({spec.name}: {peak / 1e12:g} TFLOP/s, dense bf16, datasheet):",
        f"  within a server: {within:,.0f} FLOP/byte ({NVLINK_RING_BUSBW / 1e9:g} GB/s, the ring all-reduce bus bandwidth "
        "measured on 8 H200s, published below)",
        f"  between servers: {between:,.0f} FLOP/byte (400 Gb/s = {BETWEEN_SERVERS / 1e9:g} GB/s per GPU, the network "
        "torchtitan's H100 benchmark machines state; counted on the bytes that cross)",
        "  at 40 % of the peak each threshold is 40 % as high; sent in 16 bits instead of fp32, each FLOP per byte doubles",
        published.show("ml_engineering_h200_8gpu_allreduce_busbw_nvls_vs_ring")])


def above_links(r: Row) -> bool:
    """Whether plan `r`'s FLOP per byte sent is above the threshold of every link it sends over
    (:func:`link_thresholds`): within a server, and, for the bytes that cross, between servers."""
    _, _, within, between = _thresholds()
    return _clears(r, within, between)


def memory_budget(device: torch.device) -> tuple[int, str]:
    """Bytes of memory per GPU for :func:`plan_verdicts`, and their label: a GPU's own, else 16 GiB."""
    if device.type != "cuda":
        return 16 * 2**30, "16 GiB (a budget chosen here; on a GPU, its memory)"
    total = torch.cuda.get_device_properties(device).total_memory
    return total, f"{total / 2**30:.0f} GiB ({torch.cuda.get_device_name(device)})"


def _clears(r: Row, within: float, between: float) -> bool:
    """Whether plan `r`'s FLOP per byte is above the threshold of every link it sends over."""
    return r.flop_per_byte > within and (not r.across_bytes or r.flop_per_byte * r.comm_bytes / r.across_bytes > between)


def plan_verdicts(rows: Sequence[Row], budget: float, label: str) -> str:
    """A verdict per model and GPU count of `rows`, on the model state alone: a plan fits when its
    model state leaves half of `budget` for activations. Of the plans that fit, those whose
    communication can run during the backward pass and that never idle come first (DP and FSDP);
    of those, the one that sends least; only when none fits, the least-sending of the others. A
    plan whose FLOP per byte sent is below its link's threshold (:func:`link_thresholds`) is said
    not to hide its communication behind the computing."""
    out = []
    for shape, gpus in dict.fromkeys((r.shape, r.plan.gpus) for r in rows):
        fit = [r for r in rows if (r.shape, r.plan.gpus) == (shape, gpus) and not r.why_not
               and r.state_bytes <= budget / 2]
        head = f"{shape.name} on {gpus} GPUs, {label} per GPU"
        if not fit:
            out.append(f"{head}: no plan's model state leaves half of it free; more GPUs, or fewer bytes per "
                       "parameter (optimizer state in lower precision, or kept on the CPU)")
            continue
        overlapping = [r for r in fit if r.plan.tp == 1 and r.plan.pp == 1]
        best = min(overlapping or fit, key=lambda r: r.comm_bytes)
        why = ("of the plans whose communication can run during the backward pass (DP, FSDP), the one that sends least"
               if overlapping
               else "no DP or FSDP plan fits; of the others, the one that sends least")
        across = min(fit, key=lambda r: r.across_bytes)
        _, _, within, between = _thresholds()
        crossing = best.flop_per_byte * best.comm_bytes / best.across_bytes if best.across_bytes else None
        fpb, where, limit = ((crossing, "between servers", between) if crossing is not None and crossing <= between
                             else (best.flop_per_byte, "within a server", within))
        instead = next((r for r in sorted(fit, key=lambda r: r.comm_bytes) if _clears(r, within, between)), None)
        hides = ("" if fpb > limit or not overlapping else  # only DP's and FSDP's communication can hide at all
                 f"; {best.plan.name}'s {fpb:,.0f} FLOP per byte sent {where} is below the threshold above"
                 + (f": even at 40 % of the peak, {best.plan.name}'s communication there would outlast the computing"
                    if fpb <= 0.4 * limit else ": it would hide behind the computing only well below the peak")
                 + (f"; {instead.plan.name} sends enough FLOP per byte to clear both thresholds"
                    + (" (its tensor-parallel all-reduces still stall every layer, section 7)" if instead.plan.tp > 1 else "")
                    if instead is not None and instead is not best else ""))
        out.append(f"{head}: model state fits for {', '.join(r.plan.name for r in fit)}. {best.plan.name}: {why} "
                   f"({best.comm_bytes / 2**30:.2f} GiB per step, {best.flop_per_byte:,.0f} FLOP/byte)"
                   + (f", idling at least {best.idle:.0%}" if best.idle else "")
                   + (f"; across servers {across.plan.name} sends least ({across.across_bytes / 2**30:.2f} GiB "
                      f"against {best.across_bytes / 2**30:.2f})" if across.across_bytes < best.across_bytes else "")
                   + hides)
    return "\n".join(out)
