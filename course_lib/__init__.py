"""Helpers for the GPU Training Workbook; each module is one concern.

profiles  run profiles (smoke/cpu/gpu/auto) and the per-notebook size table
device    pick the device, describe the hardware, require_gpus
bench     honest timing (torch.utils.benchmark, CUDA events), measured peak matmul rate
report    per-notebook measurements (JSON) and the you-vs-reference table
plot      the shared figures
check     automatic checks for exercises and in-notebook claims
data      procedural shapes dataset, CIFAR-10/MNIST loaders
models    the fixed seed CNN, torchvision ResNets
train     the training loop (AMP, accumulation, clipping, checkpoints, exact resume)
memory    peak memory (CUDA allocator / profiler events), estimator, largest batch
catalog, runner, cli   the `course` command: check and run
"""
