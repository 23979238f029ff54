"""Helpers for the GPU Training Workbook; each module is one concern.

Shared infrastructure, used by several notebooks and the `course` command:

profiles    run profiles (smoke/cpu/gpu/auto) and the per-notebook size table
device      pick the device, describe the hardware (cpuinfo), the TF32 switch, require_gpus
units       times, sizes and rates in human units ('41.3 ms', '12.4 GiB', '3.1 GB/s')
bench       honest timing (torch.utils.benchmark, CUDA events): median and quartiles of repeats,
            ratios with their range and a printed verdict, measured peak matmul rate and bandwidth
datasheet   NVIDIA datasheet peaks (dense, with sources) for common GPUs, lookup by device name,
            the denominator of MFU; shown as 'datasheet', never as a measurement
report      per-notebook measurements with units and ranges (JSON), the you-vs-reference table
plot        the shared figures
check       automatic checks for exercises and in-notebook claims
data        procedural shapes dataset, tensor and replayable loaders, CIFAR-10/MNIST
models      the fixed seed CNN, torchvision ResNets, the GPT (activation checkpointing)
train       the training loop (AMP, accumulation, clipping, LR schedule, exact resume)
files       atomic writes (checkpoints, reports, results, notebooks) and their leftovers
checkpoint  checkpoint files: a digest, clear errors, RNG states, fitting a run
memory      live and peak memory per phase (CUDA allocator / profiler events), the estimator,
            out-of-memory: fit_batch, largest_batch, a measured budget, advice
timeline    memory over time: the profiler's categories, the CUDA allocator's snapshot
runner, cli, catalog   the `course` command: check and run
cohort      a workshop's pre-flight: one machine's check report (JSON), many side by side
student     student copies: nbgrader replaces each solution with a stub

One notebook each (its scaffolding, tested like the rest):

loading     02 first CNN: data-loading throughput (workers, pinned memory, channels_last)
precision   03 mixed precision: formats, loss scaling, runs compared by precision
accumulate  04 gradient accumulation: micro-batches vs one big batch, what breaks it
profiling   10 compile and profile: a profiler trace's steps by category, its syncs, a sync
            counter, Dynamo's graph-break log collected
roofline    10 compile and profile: every op's FLOPs and bytes, timed by the profiler, and the roofline
"""
