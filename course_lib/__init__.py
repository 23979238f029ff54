"""Helpers for the GPU Training Workbook, in three layers; imports run one way only,
core ← lessons ← workshop (``tests/test_layout.py`` fails on any other import, and on a circle).

**Core** (``course_lib.<module>``): shared by several notebooks, the scripts and the tools;
imports only core.

profiles    run profiles (smoke/cpu/gpu/auto), GPU classes, and every notebook's declaration:
            title, GPUs it needs, what a smaller machine shows, its sizes per profile
device      pick the device, describe the hardware (cpuinfo), the TF32 switch, which 16-bit
            precisions it runs natively, the simulated small card
units       times, sizes and rates in human units ('41.3 ms', '12.4 GiB', '3.1 GB/s')
bench       honest timing (torch.utils.benchmark, synchronised clocks): median and quartiles of repeats,
            comparisons timed in turns, ratios with their range and a printed verdict, measured
            peak matmul rate and bandwidth
datasheet   NVIDIA datasheet peaks (dense, with sources) for common GPUs, lookup by device name,
            the denominator of MFU; shown as 'datasheet', never as a measurement
report      per-notebook measurements with units and ranges (JSON), the you-vs-reference table
peaks       this run's measured matmul peak and copy bandwidth, measured once and shared by the notebooks
plot        the shared figures
check       the mechanism of automatic checks (expect, close, between, allocated, exercise):
            each lesson's exercise checks are built from it
data        procedural shapes dataset, tensor and replayable loaders, CIFAR-10/MNIST, text corpus
attention   attention written out: masks, scaled dot-product and multi-head attention (the GPT's)
models      the seed CNN, torchvision ResNets, the GPT, the MLP of 05/06
train       the training loop (AMP, accumulation, clipping, LR schedule, exact resume)
files       atomic writes (checkpoints, reports, results, notebooks) and their leftovers
checkpoint  checkpoint files: a digest, clear errors, RNG states, fitting a run
memory      live and peak memory per phase (CUDA allocator / profiler events), the estimator,
            out-of-memory: fit_batch, largest_batch, a measured budget, advice
timeline    memory over time: the profiler's categories, the CUDA allocator's snapshot
profiling   a profiler trace's steps by category, its syncs, a sync counter, Dynamo's log
roofline    every op's FLOPs and bytes, timed by the profiler, against the roofline
launcher    torchrun launched from a notebook: a failing rank named in one sentence, a script's lines
ranks       inside each rank of a torchrun job: process group, status record, rank-0 output

**Lessons** (``course_lib.lessons.nbNN``): one module per notebook ``NN_*.ipynb`` that needs
scaffolding, holding it and that notebook's exercise checks (``check_<exercise>``); a lesson
imports core and earlier lessons only, and has its tests.

**Workshop** (``course_lib.workshop``): the ``course`` command and the tools around the course
(run, check, cohort reports, student copies, test-gpu); it may import anything above.
"""
