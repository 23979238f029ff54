"""Three ways a distributed job fails, and how it ends instead of hanging (notebook 06).

    torchrun --nproc_per_node=2 scripts/failure_lab.py --mode raise   # a rank raises
    torchrun --nproc_per_node=2 scripts/failure_lab.py --mode skip --timeout 5
    torchrun --nproc_per_node=2 scripts/failure_lab.py --mode kill    # a rank is killed

Every rank runs a few "training steps", each ending in an all-reduce of its loss. At step
--at, rank --rank misbehaves:

raise  it raises an exception; torchrun sees it exit and stops the other ranks.
skip   it skips the all-reduce (the bug ``if rank == 0: dist.all_reduce(...)``, seen from
       rank 1) and goes on with work that holds no collective; the ranks waiting in the all-reduce
       raise when their process group's timeout (--timeout seconds) expires.
kill   it is killed by SIGKILL (out of host memory, a preempted node): no Python exception.
sleep  every rank sleeps without a collective (for the launcher's own wall-clock timeout).
"""

from __future__ import annotations

import argparse
import os
import signal
import time
from datetime import timedelta

import torch
import torch.distributed as dist

from course_lib import ranks


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mode", choices=("raise", "skip", "kill", "sleep"), required=True)
    p.add_argument("--rank", type=int, default=1, help="the rank that misbehaves")
    p.add_argument("--at", type=int, default=2, help="the step where it does")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--timeout", type=float, default=10, help="process-group timeout (s)")
    return p.parse_args()


@ranks.entry
def main() -> None:
    a = parse()
    ctx = ranks.setup()  # joining keeps setup's 60 s: W ranks starting on a busy machine can be slow
    # The steps' collectives run in a group of their own whose timeout is --timeout seconds.
    steps = dist.new_group(timeout=timedelta(seconds=a.timeout))
    for step in range(a.steps):
        loss = torch.tensor([float(ctx.rank + step)], device=ctx.device)  # this rank's loss
        culprit = ctx.rank == a.rank and step == a.at
        if culprit and a.mode == "raise":
            raise ValueError(f"rank {ctx.rank} found a corrupt batch at step {step}")
        if culprit and a.mode == "kill":
            print(f"rank {ctx.rank}: killed at step {step}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        if a.mode == "sleep":
            time.sleep(3600)
        # >>> skip
        # culprit: rank --rank at step --at. The bug `if rank == 0: dist.all_reduce(...)`, from rank 1:
        if culprit and a.mode == "skip":
            print(f"rank {ctx.rank}: skips the all-reduce of step {step}, works on alone",
                  flush=True)
            time.sleep(60 * a.timeout)  # work with no collective, long past the timeout: this rank must
            continue  # not reach the next step's all-reduce, which would pair with the one rank 0 waits in
        print(f"rank {ctx.rank}: step {step}, all-reduce", flush=True)
        start = time.monotonic()
        try:
            dist.all_reduce(loss, group=steps)  # the group with --timeout; every rank must call it, in order
        except RuntimeError:  # the group's timeout (skip) or a peer that left (raise): how long it waited
            print(f"rank {ctx.rank}: waited {time.monotonic() - start:.1f} s in the all-reduce of "
                  f"step {step}", flush=True)
            raise
        # <<< skip
    ranks.print0(f"all {a.steps} steps done")
    ranks.teardown()


if __name__ == "__main__":
    main()
