"""K replicas run three ways: one after another, a Python thread each, a process each (notebook 05).

Run it by hand from the repository root (K = 2 processes):

    torchrun --nproc_per_node=2 scripts/replica_procs.py --model 32,64,8 --model 1024,4,256

For each ``--model WIDTH,LAYERS,BATCH`` every rank builds the same K replicas of a stack of
Linear layers (``course_lib.lessons.models.layer_stack``) and K (BATCH, WIDTH) pieces, and runs
the forward passes without autograd, with 1 thread per operation, so that the workers are the only
parallelism. Rank 0 alone times the K replicas one after another and on one Python thread each
(as DataParallel's ``parallel_apply`` runs them), in turns, while the other ranks wait; then
every rank runs its own replica at the same time, as DDP does, and a round takes as long as the
slowest rank. The first two are timed in turns by ``bench.turns``, the third in blocks of the
same number of calls (``bench.calls_per_block``) on every rank. Rank 0 writes ``--out/results.json``:
seconds per call of each way, one value per round.
"""

from __future__ import annotations

import argparse
import time
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


def seconds_per_call(fn: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def together(fn: Callable[[], object], seconds: float, rounds: int, world_size: int) -> list[float]:
    """Every rank runs `fn` the same number of times, starting together; per round, the slowest
    rank's seconds per call."""
    seconds_per_call(fn, 2)  # warm-up
    calls = torch.tensor([bench.calls_per_block(fn, seconds / rounds)])
    dist.broadcast(calls, src=0)  # rank 0's count, so that every rank makes the same calls
    times = []
    for _ in range(rounds):
        dist.barrier()  # start together
        every = [0.0] * world_size
        dist.all_gather_object(every, seconds_per_call(fn, int(calls)))
        times.append(max(every))
    return times


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
            times = {}
            if ctx.rank == 0:  # rank 0 alone, while the other ranks wait at the barrier
                times = bench.turns({
                    "one after another": lambda: [r(x) for r, x in zip(reps, ins)],
                    "a thread each": lambda: nb05.thread_apply(reps, ins),  # as parallel_apply
                }, rounds=a.rounds, block_s=a.seconds / a.rounds)
            dist.barrier()
            mine = lambda: reps[ctx.rank](ins[ctx.rank])  # noqa: E731 - this rank's replica
            times["a process each"] = together(mine, a.seconds, a.rounds, k)  # as DDP
        # <<< the three ways
        results[f"{width},{layers},{batch}"] = times
        ranks.print0(f"{layers} × Linear({width}, {width}) on {batch} rows: timed three ways")
    ranks.write_json0(Path(a.out) / "results.json",
                      dict(world_size=k, threads_per_op=1, seconds_per_call=results))
    ranks.teardown()


if __name__ == "__main__":
    main()
