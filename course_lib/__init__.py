"""Helpers for the GPU Training Workbook, in three layers; imports run one way only,
core ← lessons ← workshop (``tests/test_layout.py`` fails on any other import, and on a circle).

**Core** (``course_lib.<module>``): shared by several notebooks, the scripts and the tools;
imports only core. Grouped by the question each answers (tests/test_layout.py checks that every
core module is listed here once):

*How fast, and is the difference real?*
bench       honest timing (torch.utils.benchmark, synchronised clocks): median and quartiles of repeats,
            comparisons timed in turns, measured peak matmul rate and bandwidth
verdicts    a ratio with its range and the one sentence that judges it (graded by the effect's
            size); two training runs against control runs from nudged weights
peaks       this run's measured matmul peak and copy bandwidth, measured once and shared by the notebooks
datasheet   NVIDIA datasheet peaks (dense, with sources) for common GPUs, lookup by device name,
            the denominator of MFU; shown as 'datasheet', never as a measurement
utilisation  how busy the device was while a loop ran (NVML on a GPU, the process's CPU time on a CPU)
profiling   a profiler trace's steps by category, its syncs, a sync counter, Dynamo's log
roofline    every op's FLOPs and bytes, timed by the profiler, against the roofline

*Where does the memory go?*
memory      live and peak memory per phase (CUDA allocator / profiler events), the estimator
oom         out of memory: headroom, fit_batch, largest_batch, a measured budget, advice, guard
timeline    memory over time: the profiler's categories, the CUDA allocator's snapshot

*Several processes*
launcher    torchrun launched from a notebook: a failing rank named in one sentence, a script's lines
ranks       inside each rank of a torchrun job: process group, status record, rank-0 output
sharding    what each rank holds under DDP, FSDP2 or DTensor: bytes counted from the tensors, or for
            any size from a fake process group in this process; whether FSDP2 trains on CPU here
parallelism  which parallelism when: each plan's (DP, TP, PP, FSDP) state and traffic per GPU for
            a GPT's shape, checked on a fake process group; the decision table

*Recording and showing*
report      per-notebook measurements with units and ranges (JSON), the you-vs-reference table
published   figures others measured and published, each with its source, for the learner without a GPU
plot        the shared figures
units       times, sizes and rates in human units ('41.3 ms', '12.4 GiB', '3.1 GB/s')

*Training pieces*
data        procedural shapes dataset, tensor and replayable loaders, CIFAR-10/MNIST
textdata    text for language models, offline: a corpus, the byte tokenizer, next-token windows
attention   attention written out: masks, scaled dot-product and multi-head attention (the GPT's)
models      the seed CNN, torchvision ResNets, the GPT, the MLPs of 05/06 (mlp, deep_mlp)
train       the training loop (AMP, accumulation, clipping, LR schedule, exact resume)
checkpoint  checkpoint files: a digest, clear errors, RNG states, fitting a run; a training run's resume state

*Course plumbing*
profiles    run profiles (smoke/cpu/gpu/auto), GPU classes, and every notebook's declaration:
            title, GPUs it needs, what a smaller machine shows, its sizes per profile
device      pick the device, describe the hardware (cpuinfo), the TF32 switch, which 16-bit
            precisions it runs natively, the simulated small card
check       the mechanism of automatic checks (expect, close, between, allocated, exercise) and
            the one row format of a comparison with one process (agreement, merge, agreements)
files       atomic writes (checkpoints, reports, results, notebooks) and their leftovers

**Lessons** (``course_lib.lessons.nbNN``): one module per notebook ``NN_*.ipynb`` that needs
scaffolding, holding it and that notebook's exercise checks (``check_<exercise>``); a lesson
imports core and earlier lessons only, and has its tests.

**Workshop** (``course_lib.workshop``): the ``course`` command and the tools around the course
(run, check, cohort reports, student copies, test-gpu); it may import anything above.
"""
