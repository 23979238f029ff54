"""Fragmentation in PyTorch's CUDA caching allocator, with and without expandable segments
(the memory notebook). The allocator is configured once per process, before the first CUDA call, so
the notebook runs this script twice:

    python scripts/alloc_fragmentation.py --steps 200
    export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True PYTORCH_ALLOC_CONF=expandable_segments:True
    python scripts/alloc_fragmentation.py --steps 200

(Both names: older releases read only PYTORCH_CUDA_ALLOC_CONF; newer ones prefer PYTORCH_ALLOC_CONF
and call the old one deprecated, yet in 2.9.1 only the old one reached CUDA, pytorch/pytorch#183387.)

The workload is a training-like pattern with a changing sequence length: each step allocates
"activations" whose size grows with a random length, frees every other one while the next
ones are made (as a backward pass frees as it goes), then frees the rest. Blocks cached at one
length fit the next length badly, so reserved memory grows beyond what is ever allocated at
once; expandable segments grow one segment in place instead of adding new ones.

Prints one JSON line: the allocator setting, whether its segments are expandable (the
allocator's snapshot: a platform without them ignores the setting with a warning), the peak
bytes allocated and reserved, the segments it asked the driver for, and its retries after a
failed cudaMalloc (memory_stats). Under COURSE_GPU_MEMORY_GIB it keeps to that cap, as the
notebooks do (course_lib.device.limit_memory).
"""

import argparse
import json
import os
import sys

import torch

from course_lib import device as course_device

MiB = 2**20


def workload(steps: int, layers: int, mib_per_token: float, max_len: int, seed: int,
             dev: torch.device) -> None:
    """Steps of random length T: `layers` tensors of T·mib_per_token MiB, freed half-way
    through the next batch of allocations, then all."""
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        length = int(torch.randint(max_len // 8, max_len + 1, (1,), generator=g))
        n = int(length * mib_per_token * MiB)
        acts = [torch.empty(n, dtype=torch.uint8, device=dev) for _ in range(layers)]
        grads = []
        for i in reversed(range(layers)):  # backward: a gradient made, an activation freed
            grads.append(torch.empty(n // 2, dtype=torch.uint8, device=dev))
            acts[i] = None
        del acts, grads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--mib-per-token", type=float, default=0.25)
    parser.add_argument("--max-len", type=int, default=1024)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cuda", help="cuda or cuda:N")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("This script measures the CUDA caching allocator: it needs a CUDA GPU.")
    dev = course_device.pick(args.device)  # also applies COURSE_GPU_MEMORY_GIB's cap
    workload(args.steps, args.layers, args.mib_per_token, args.max_len, args.seed, dev)
    torch.cuda.synchronize(dev)
    stats = torch.cuda.memory_stats(dev)
    segments = torch.cuda.memory._snapshot()["segments"]  # the cached segments, each with "is_expandable"
    print(json.dumps({
        "alloc_conf": os.environ.get("PYTORCH_ALLOC_CONF", os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")),
        "expandable": any(s.get("is_expandable", False) for s in segments),
        "peak_allocated": torch.cuda.max_memory_allocated(dev),
        "peak_reserved": torch.cuda.max_memory_reserved(dev),
        "segments_allocated": stats.get("segment.all.allocated", 0),
        "alloc_retries": stats.get("num_alloc_retries", 0),
    }))


if __name__ == "__main__":
    main()
