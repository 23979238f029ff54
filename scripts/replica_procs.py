"""The replicas of notebook 05's GIL measurement, one per process, as DDP runs them.

Run it by hand from the repository root:

    torchrun --nproc_per_node=2 scripts/replica_procs.py --model 32,64,8 --model 1024,4,256

For each ``--model WIDTH,LAYERS,BATCH`` every rank builds the same stack of Linear layers
(``course_lib.dp.layer_stack``) and runs its forward on its own (BATCH, WIDTH) input, without
autograd, with 1 thread per operation. The ranks start each of ``--rounds`` rounds together (a
barrier) and run the same number of calls; a round's time per call is the slowest rank's, since
a training step waits for the slowest. Rank 0 writes ``--out/results.json``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
import torch.distributed as dist

from course_lib import dist as cdist
from course_lib import dp


def triple(text: str) -> tuple[int, int, int]:
    width, layers, batch = (int(v) for v in text.split(","))
    return width, layers, batch


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=triple, action="append", required=True,
                   help="WIDTH,LAYERS,BATCH of one model (repeat for more)")
    p.add_argument("--seconds", type=float, default=1.0, help="seconds of calls per model")
    p.add_argument("--rounds", type=int, default=5, help="timed rounds per model")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="build/dist/replica_procs", help="folder for results.json")
    p.add_argument("--timeout", type=float, default=60, help="process-group timeout (s)")
    return p.parse_args()


def seconds_per_call(fn, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


@cdist.entry
def main() -> None:
    a = parse()
    ctx = cdist.setup("gloo", timeout_s=a.timeout)
    torch.set_num_threads(1)  # as the notebook's threads: one core per operation
    results = {}
    for width, layers, batch in a.model:
        torch.manual_seed(a.seed)
        net = dp.layer_stack(width, layers)
        x = torch.randn(batch, width)  # this rank's piece
        with torch.no_grad():
            seconds_per_call(lambda: net(x), 2)  # warm-up
            single = min(seconds_per_call(lambda: net(x), 1) for _ in range(3))
            calls = torch.tensor([max(1, round(a.seconds / a.rounds / single))])
            dist.broadcast(calls, src=0)  # rank 0's count, so every rank makes the same calls
            rounds = []
            for _ in range(a.rounds):
                dist.barrier()  # start together
                mine = seconds_per_call(lambda: net(x), int(calls))
                every = [0.0] * ctx.world_size
                dist.all_gather_object(every, mine)
                rounds.append(max(every))
        results[f"{width},{layers},{batch}"] = rounds
        cdist.print0(f"{layers} × Linear({width}, {width}) on {batch} rows: {int(calls)} calls "
                     f"per round, {a.rounds} rounds")
    cdist.write_json0(Path(a.out) / "results.json",
                      dict(world_size=ctx.world_size, threads=1, seconds_per_call=results))
    cdist.teardown()


if __name__ == "__main__":
    main()
