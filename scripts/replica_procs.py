"""K replicas run three ways: one after another, a Python thread each, a process each (notebook 05).

Run it by hand from the repository root (K = 2 processes):

    torchrun --nproc_per_node=2 scripts/replica_procs.py --model 32,64,8 --model 1024,4,256

For each ``--model WIDTH,LAYERS,BATCH`` every rank builds the same K replicas of a stack of
Linear layers (``course_lib.lessons.models.layer_stack``) and K (BATCH, WIDTH) pieces, and runs
the forward passes without autograd, with 1 thread per operation, so that the workers are the only
parallelism. Three ways, timed in the same rounds by ``bench.turns`` (paired, in an order that
rotates from round to round): rank 0 alone runs the K replicas one after another, and on one
Python thread each (as DataParallel's ``parallel_apply`` runs them), while the other ranks wait at
a barrier; and every rank runs its own replica at the same time, as DDP does, a block lasting as
long as the slowest rank's. A block is the same number of calls on every rank
(``bench.calls_per_block`` on rank 0). Rank 0 writes ``--out/results.json``: seconds per call of
each way, one value per round, round r of every way from the same round.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Callable

import torch
import torch.distributed as dist

from course_lib import bench
from course_lib import models, ranks
from course_lib.lessons import nb05


def triple(text: str) -> tuple[int, int, int]:
    width, layers, batch = (int(v) for v in text.split(","))
    return width, layers, batch


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=triple, action="append", required=True,
                   help="WIDTH,LAYERS,BATCH of one model (repeat for more)")
    p.add_argument("--seconds", type=float, default=1.0, help="seconds of calls per way and model")
    p.add_argument("--rounds", type=int, default=5, help="timed rounds per way and model")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="build/dist/replica_procs", help="folder for results.json")
    p.add_argument("--timeout", type=float, default=60, help="process-group timeout (s)")
    return p.parse_args()


TOGETHER = "a process each"  # the way every rank runs; rank 0 alone runs the others


def blocks(ways: dict[str, Callable[[], object]], seconds: float,
           rank: int) -> tuple[dict[str, Callable[[], None]], dict[str, int]]:
    """One block of calls per way, for ``bench.turns``: every block starts at a barrier, so that
    the ranks take their turns together; rank 0 alone makes the calls of a way other than
    TOGETHER, and TOGETHER's block ends at a second barrier, so that rank 0's clock covers the
    slowest rank. Returns the blocks and their calls, the same number on every rank: rank 0's
    ``bench.calls_per_block``."""
    counts = torch.tensor([bench.calls_per_block(fn, seconds) if rank == 0 else 0 for fn in ways.values()])
    dist.broadcast(counts, src=0)
    calls = dict(zip(ways, counts.tolist()))

    def block(name: str, fn: Callable[[], object], n: int) -> Callable[[], None]:
        def run() -> None:
            dist.barrier()  # start together
            if rank == 0 or name == TOGETHER:
                for _ in range(n):
                    fn()
            if name == TOGETHER:
                dist.barrier()  # end with the slowest rank
        return run
    return {name: block(name, fn, calls[name]) for name, fn in ways.items()}, calls


@ranks.entry
def main() -> None:
    a = parse()
    ctx = ranks.setup("gloo", timeout_s=a.timeout)
    torch.set_num_threads(1)  # one core per operation: only the workers run in parallel
    k = ctx.world_size
    results = {}
    for width, layers, batch in a.model:
        torch.manual_seed(a.seed)
        # >>> the three ways (notebook 05 shows these lines)
        reps = nb05.replicas(models.layer_stack(width, layers), k)  # k copies of layers × Linear
        ins = [torch.randn(batch, width) for _ in reps]  # one (batch, width) piece per replica
        with torch.no_grad():
            ways = {"one after another": lambda: [r(x) for r, x in zip(reps, ins)],
                    "a thread each": lambda: nb05.thread_apply(reps, ins),  # as parallel_apply
                    "a process each": lambda: reps[ctx.rank](ins[ctx.rank])}  # this rank's replica, as DDP
            timed, calls = blocks(ways, a.seconds / a.rounds, ctx.rank)  # a block: calls[way] calls
            times = bench.turns(timed, rounds=a.rounds, number=1, warmup=1, device="cpu", block_warmup=False)
            times = {way: [t / calls[way] for t in ts] for way, ts in times.items()}  # seconds per call
        # <<< the three ways
        results[f"{width},{layers},{batch}"] = times
        ranks.print0(f"{layers} × Linear({width}, {width}) on {batch} rows: timed three ways")
    ranks.write_json0(Path(a.out) / "results.json",
                      dict(world_size=k, threads_per_op=1, seconds_per_call=results))
    ranks.teardown()


if __name__ == "__main__":
    main()
