"""Every notebook's declaration (:data:`NOTEBOOKS`: title, GPUs, sizes per run profile), and how
a profile is chosen.

Resolution order: an explicit name > the ``COURSE_PROFILE`` environment variable >
``auto`` (``gpu`` when CUDA is available, else ``cpu``).

The ``gpu`` profile has three size classes, chosen from the memory of the GPU in hand
(:data:`GPU_CLASSES`): ``large`` is each notebook's ``"gpu"`` entry; ``"gpu/medium"`` and
``"gpu/small"`` list only the knobs they change from it. ``COURSE_GPU_MEMORY_GIB=8`` makes a
bigger card behave as an 8 GiB one (sizes and allocator limit: :func:`device.limit_memory`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from types import SimpleNamespace

import torch

from course_lib import device

PROFILES = ("smoke", "cpu", "gpu")
BUDGETS = {
    "smoke": "CI and quick checks: <= 30 s per notebook on 2 CPU cores",
    "cpu": "a laptop without a GPU: <= 3 min per notebook on 2 CPU cores",
    "gpu": "any CUDA machine: sizes chosen from its memory; <= 5 min per notebook on a T4, "
           "<= 15 min for the whole course on one H100",
}

# (class, the least GPU memory in GiB for it, the cards it is sized for). A card reports a
# little less than its label: a "16 GB" T4 has 14.6 GiB, a "12 GB" RTX 3060 11.8 GiB.
GPU_CLASSES = (
    ("large", 36, "A100 40/80 GB, H100, H200, A6000 48 GB"),
    ("medium", 12, "T4 16 GB (the slowest: its time budget sets these), A10G / L4 24 GB, V100"),
    ("small", 0, "6-12 GB cards: RTX 3060-4070, laptop GPUs"),
)


class ProfileError(ValueError):
    """An unknown profile or notebook name."""


@dataclass(frozen=True)
class Notebook:
    """One notebook, declared once: everything else (the readiness table, ``course run``, the
    tests) reads this. `gpus`: GPUs it needs to show everything (0: a CPU shows it all);
    `on_less`: what a machine with fewer GPUs can show (what is measured there, what needs the
    GPUs), never how a measurement comes out; `sizes`: its knobs per profile (``"gpu/medium"``
    and ``"gpu/small"`` list only what they change from ``"gpu"``)."""

    stem: str
    title: str
    gpus: int
    on_less: str
    sizes: dict[str, dict]


# Every notebook, in order; every literal in `sizes` is a knob a reviewer can see here.
NOTEBOOKS: tuple[Notebook, ...] = (
    Notebook(
        "00_setup_check", "setup check", gpus=0,
        on_less="everything",
        sizes={
            # check_n: tiny matmul checked against CPU; cpu_n / gpu_n: quick rate probe per device;
            # peak_sizes: per device type, the square matmuls of this run's fp32 peak (course_lib.peaks,
            # stored for 01, and for 08 and 10 where they run in fp32; on the device the run uses,
            # 08's peak_sizes in every profile and class, so that the stored peak is found again)
            "smoke": dict(check_n=64, cpu_n=256, gpu_n=1024, min_run_s=0.05,
                          peak_sizes={"cpu": [256, 512], "cuda": [256, 512]}),
            "cpu": dict(check_n=64, cpu_n=512, gpu_n=2048, min_run_s=0.2,
                        peak_sizes={"cpu": [512, 1024, 2048], "cuda": [512, 1024, 2048]}),
            "gpu": dict(check_n=64, cpu_n=1024, gpu_n=4096, min_run_s=0.2,
                        peak_sizes={"cpu": [512, 1024, 2048], "cuda": [4096, 8192, 16384]}),
            "gpu/medium": dict(peak_sizes={"cpu": [512, 1024, 2048], "cuda": [2048, 4096, 8192]}),
            "gpu/small": dict(peak_sizes={"cpu": [512, 1024, 2048], "cuda": [2048, 4096, 8192]}),
        }),
    Notebook(
        "01_gpu_vs_cpu", "GPU vs CPU", gpus=1,
        on_less=("CPU matmul rate vs size, bf16 vs fp32 measured; asynchronous timing, host↔device "
                 "copies and TF32 need a GPU (a recorded GPU run and published figures shown instead)"),
        sizes={
            # sizes / gpu_sizes: matmul n for the CPU / GPU rate-vs-size curves, each point also given
            # as a fraction of this run's fp32 peak (peak_sizes: 00's, read back from its store);
            # async_n: matmul of the sync demos; copy_mib: H→D buffer;
            # dtype_n: fp32/TF32/bf16 matmul; mult8_n: a multiple of 8 that is not a power of two,
            # timed against mult8_n - 1; rounds: rounds of the in-turn timings;
            # check_n: accuracy check against fp64; widget_n / widget_max: slider default and maximum
            "smoke": dict(sizes=[64, 128, 256, 512], gpu_sizes=[128, 256, 512, 1024],
                          async_n=256, copy_mib=16, dtype_n=256, mult8_n=264, check_n=128, rounds=3,
                          widget_n=256, widget_max=1024, min_run_s=0.05,
                          peak_sizes={"cpu": [256, 512], "cuda": [256, 512]}),
            "cpu": dict(sizes=[64, 128, 256, 512, 1024, 2048], gpu_sizes=[128, 256, 512, 1024, 2048],
                        async_n=1024, copy_mib=64, dtype_n=1024, mult8_n=1032, check_n=256, rounds=5,
                        widget_n=512, widget_max=2048, min_run_s=0.5,
                        peak_sizes={"cpu": [512, 1024, 2048], "cuda": [512, 1024, 2048]}),
            "gpu": dict(sizes=[64, 128, 256, 512, 1024, 2048],
                        gpu_sizes=[128, 256, 512, 1024, 2048, 4096, 8192],
                        async_n=4096, copy_mib=256, dtype_n=8192, mult8_n=4104, check_n=512, rounds=5,
                        widget_n=2048, widget_max=4096, min_run_s=0.2,
                        peak_sizes={"cpu": [512, 1024, 2048], "cuda": [4096, 8192, 16384]}),
            "gpu/medium": dict(peak_sizes={"cpu": [512, 1024, 2048], "cuda": [2048, 4096, 8192]}),
            "gpu/small": dict(peak_sizes={"cpu": [512, 1024, 2048], "cuda": [2048, 4096, 8192]}),
        }),
    Notebook(
        "02_first_cnn", "first CNN (CPU or GPU)", gpus=1,
        on_less=("training, DataLoader workers, channels_last and bf16 measured on the CPU; pinned "
                 "memory and non_blocking copies need a GPU"),
        sizes={
            # n_train / n_val: shapes images, tensor-resident, of resolution px; width: SmallCNN
            # channels; batch_size: every SmallCNN batch; epochs: the accuracy run, which must reach
            # acc_bar on the val split; workers: DataLoader settings timed; call_steps: training
            # steps per timed call; repeats: timed calls after one warm-up call (median, quartiles);
            # resnet*: the ResNet timed, with resnet_runs (amp, layout) pairs; real_steps: CIFAR-10 /
            # MNIST steps when the files exist; min_run_s: per-image draw timing
            "smoke": dict(n_train=6400, n_val=256, resolution=32, width=16, batch_size=64, epochs=1,
                          acc_bar=0.25, workers=[0, 1], call_steps=2, repeats=3,
                          resnet="resnet18", resnet_res=32, resnet_small=False, resnet_batch=4,
                          resnet_runs=[("off", "NCHW"), ("bf16", "channels_last")],
                          real_steps=5, min_run_s=0.05),
            # 3 epochs reached 96.6 % (4: 99.3 % in 63 s; 2-core EPYC, 2026-11-29). The ResNet: a bf16 step
            # at batch 16 took 8-11 s there (no bf16 instructions), its cell 111-125 s: batch 8, one layout
            "cpu": dict(n_train=12_000, n_val=2000, resolution=32, width=32, batch_size=128, epochs=3,
                        acc_bar=0.90, workers=[0, 1, 2], call_steps=4, repeats=8,
                        resnet="resnet18", resnet_res=32, resnet_small=True, resnet_batch=8,
                        resnet_runs=[("off", "NCHW"), ("off", "channels_last"), ("bf16", "channels_last")],
                        real_steps=30, min_run_s=0.2),
            "gpu": dict(n_train=50_000, n_val=5000, resolution=32, width=32, batch_size=256, epochs=4,
                        acc_bar=0.90, workers=[0, 1, 2, 4, 8], call_steps=4, repeats=6,
                        resnet="resnet50", resnet_res=224, resnet_small=False, resnet_batch=128,
                        resnet_runs=[("off", "NCHW"), ("off", "channels_last"), ("bf16", "NCHW"),
                                     ("bf16", "channels_last")],
                        real_steps=200, min_run_s=0.2),
            # H100, ~60 s with start-up: SmallCNN (~60 MFLOP/img to train), 784 launch-bound steps of a
            # few ms (~5 s, the linear baseline as many); loaders in turns: 7 + 6·drain_calls calls of 1,024
            # images at ~2,500 img/s per worker's core (<= 6 s a row, ~18 s for 7); ResNet-50 224 px 12.3 GFLOP/img:
            # 4 configurations × 9 steps (fit, 2 warm-up, 6 timed) of 128 ≈ 4,600 images at >= 700 img/s
            # (fp32) ≈ 5 s, + cudnn.benchmark's autotuning ≈ 10 s. Memory: fp32 saves ~85 MiB/img at
            # 224 px (memory.estimate_training_memory): 10.6 GiB at 128 + 4 ResNet-50s with AdamW held
            # at once (359 MiB each) ≈ 12 GiB. "bf16" rows: fp16 + GradScaler where bf16 is not native.
            "gpu/medium": dict(workers=[0, 1, 2, 4], resnet_batch=64),
            # T4 (ResNet-50 at 224 px: ~90 img/s fp32, ~250 img/s fp16; 2-4 host cores): 9 rounds of
            # the 4 configurations at batch 64 ≈ 20 s, autotuning ≈ 30 s, the rest ≈ 40 s: ~2 min;
            # batch 64 saves ≈ 5.3 GiB + 1.4 GiB of models < 14.6 GiB
            "gpu/small": dict(workers=[0, 1, 2, 4], resnet_batch=32),
            # 6-8 GB: batch 32 saves ≈ 2.7 GiB (fp32) + 1.4 GiB of models held at once < 7.6 GiB; where
            # it still does not fit (6 GB cards), oom.fit_batch halves it
        }),
    Notebook(
        "03_mixed_precision", "mixed precision (AMP)", gpus=1,
        on_less=("fp32, bf16 and fp16+GradScaler training measured on the CPU, fp16 range demo; "
                 "tensor-core speed needs a GPU"),
        sizes={
            # model: smallcnn (width = its channels) or a ResNet; n_train images of resolution px,
            # tensor-resident; steps: optimizer steps per precision (loss curves); half_steps: the
            # pure .half() runs of section 3, on a SmallCNN of half_width channels at half_resolution
            # px, batch half_batch; demo_batch: batch of the gradient/update demos; log_every: steps
            # per loss record in the curves; controls: fp32 runs with their starting weights nudged by a
            # last bit, against which a precision's gap from fp32 is judged (sections 3 and 5);
            # repeats: timed training steps per precision (after 2 warm-up steps); check_steps: steps of the inline-vs-library check; opt_run_s: seconds
            # of optimizer.step() timing per AdamW variant; lr, sgd_lr: the learning rates LR and
            # SGD_LR default to (AdamW; SGD with momentum in the pure .half() runs)
            "smoke": dict(model="smallcnn", width=8, resolution=16, n_train=256, batch_size=32,
                          steps=4, half_steps=3, half_width=8, half_resolution=16, half_batch=32, controls=1,
                          demo_batch=32, log_every=1, channels_last=False,
                          widget_steps=3, repeats=3, check_steps=2, opt_run_s=0.03, lr=3e-3, sgd_lr=0.05),
            "cpu": dict(model="smallcnn", width=16, resolution=16, n_train=2048, batch_size=64,
                        steps=90, half_steps=80, half_width=16, half_resolution=16, half_batch=64, controls=3,
                        demo_batch=64, log_every=1, channels_last=False,
                        widget_steps=5, repeats=10, check_steps=3, opt_run_s=0.3, lr=3e-3, sgd_lr=0.02),
            # cpu: with 20 .half() steps, or SGD at 0.05, fp32 SGD stayed near chance (1.90 and 1.82 after
            # 80); 80 steps at 0.02 reach 1.57 at 32 px (2-core EPYC, 2026-11-25): a comparison with a verdict.
            # 16 px, not 32: fp16 convolutions have no fast CPU kernel (convolution_backward took 99 % of
            # an fp16 step, 1.4 s against 27 ms in fp32 at 32 px), so at 32 px the fp16 runs alone took
            # ~5 min and the notebook 377 s; at 16 px it ran in 96 s and fp32 SGD reached 1.22 after
            # 80 steps (2-core Xeon, 2026-11-27).
            "gpu": dict(model="resnet50", width=0, resolution=128, n_train=4096, batch_size=256,
                        steps=150, half_steps=80, half_width=16, half_resolution=32, half_batch=64, controls=2,
                        demo_batch=32, log_every=2, channels_last=True,
                        widget_steps=20, repeats=10, check_steps=3, opt_run_s=0.3, lr=1e-3, sgd_lr=0.02),
            # gpu, section 3: the cpu profile's SmallCNN runs. ResNet-50 trained with plain SGD moved
            # little from chance in the steps a notebook affords (H200, batch 256, 60 steps: SGD at
            # 0.01/0.003/0.001 ended at 2.07/1.89/1.81, chance 1.79; 20 steps at 0.01 diverged to 3.2),
            # so fp32 vs pure .half() gave no verdict there.
            # gpu, section 5: AdamW at 1e-3, batch 256, 150 steps learned (H200: fp32 0.55, bf16 0.54;
            # 69 s for the notebook on an H100 at 60 steps). With the same 150 steps at batch 64,
            # fp32 stayed at 1.83 (H200): what counts is the images seen, so the smaller classes keep 150 × 256 of them (steps × batch).
            "gpu/medium": dict(batch_size=128, steps=300, controls=1),
            # T4 (128 px: fp32 ~270 img/s, fp16 ~750 img/s; 2 precisions): fp32 300 + fp16 300 steps
            # of 128 ≈ 195 s, ~4.5 min in all; batch 128 saves ≈ 3.4 GiB (fp32)
            "gpu/small": dict(batch_size=64, n_train=2048, steps=600, controls=1),
            # 6-8 GB: batch 64 saves ≈ 1.7 GiB (fp32) + 1.4 GiB of models + 0.4 GiB of images
        }),
    Notebook(
        "04_grad_accumulation", "gradient accumulation", gpus=1,
        on_less="accumulation's equivalence, memory and cost measured on the CPU; fp16's speed needs a GPU",
        sizes={
            # batch: images in the gradient checks (split into K micro-batches; the check model is
            # fixed: SmallCNN width 16 at 32 px); mem_width / mem_micro / mem_batches: model width,
            # micro-batch and effective batches of the memory sweep; train_*: the four fit runs
            # (images, resolution, width, effective batch, epochs, learning rate); widget_max_k:
            # slider maximum (at most `batch`); time_repeats: timed optimizer steps (after 2 warm-up
            # steps) of one batch vs K micro-batches, at each (width, batch) of time_sizes (the first:
            # the fit runs' model and batch; every batch a multiple of 32, K's largest value);
            # controls: one-batch fit runs per normalisation with their starting weights nudged by a
            # last bit or two, against which accumulation's gap is judged (section 8)
            "smoke": dict(batch=32, mem_width=8, mem_micro=8, mem_batches=[8, 16, 32],
                          train_n=256, train_res=16, train_width=8, train_batch=32, train_epochs=1,
                          lr=3e-3, widget_max_k=8, time_repeats=3, time_sizes=[(8, 32)], controls=1),
            "cpu": dict(batch=64, mem_width=32, mem_micro=32, mem_batches=[32, 64, 128, 256, 512],
                        train_n=8192, train_res=16, train_width=16, train_batch=64, train_epochs=2,
                        lr=3e-3, widget_max_k=16, time_repeats=15, time_sizes=[(16, 64)], controls=3),
            "gpu": dict(batch=256, mem_width=64, mem_micro=64,
                        mem_batches=[64, 128, 256, 512, 1024, 2048], train_n=16384, train_res=32,
                        train_width=32, train_batch=256, train_epochs=3, lr=3e-3, widget_max_k=64,
                        time_repeats=10, time_sizes=[(32, 256), (256, 2048)], controls=3),
            # the sweep's batch 2048 saves 2.4 GiB of activations (memory.estimate_training_memory,
            # width 64 at 32 px): 8 GB cards stop at 1024 (1.2 GiB), leaving room for the workspaces.
            # time_sizes: on the H100 (2026-11-25) one step of width 32 at batch 256 took 3.37 ms and
            # 4 × 64 took 13.3 ms: each pass cost its fixed overheads, not its work (76 kimg/s, about
            # 60 MFLOP per image). Width 256 does 2·9·(256·512·16² + 512·1024·8²) ≈ 1.2 GFLOP per image
            # forward, ~3.6 with backward: a pass of 512 images (2048 / K=4) ≈ 1.8 TFLOP, ~36 ms at the
            # H100's 51 TFLOP/s fp32 (01), fewer with cuDNN's default TF32 convolutions: several times
            # those overheads. Activations: 4.8 MiB per image (memory.estimate_training_memory), 9.6 GiB
            # at 2048 (T4: ~0.9 s per step at 8.1 TFLOP/s, its fp32 in datasheet.py); 2.4 GiB at 512 on 8 GB cards.
            "gpu/small": dict(mem_batches=[64, 128, 256, 512, 1024], time_sizes=[(32, 256), (256, 512)]),
        }),
    Notebook(
        "05_data_parallel", "DataParallel", gpus=2,
        on_less="the mechanics (scatter, replicate, gather), threads vs processes timed; scaling needs 2 GPUs",
        sizes={
            # batch: images of res px in the mechanism checks (the snippet's model, width channels;
            # SmallCNN of bn_width with BatchNorm); gil_*: replicas timed one after another and on one
            # thread each, (width, layers, batch) of a model of many small layers and of one of a few
            # large ones, gil_run_s seconds over gil_rounds rounds; with 2 GPUs or more: DataParallel
            # against DDP (scripts/ddp_train.py) on ddp.mlp(res, hidden), batch images per GPU,
            # bench_repeats calls of bench_steps steps, replicate timed for rep_run_s seconds
            "smoke": dict(batch=12, res=16, width=8, bn_width=4, gil_small=(32, 48, 8),
                          gil_large=(512, 3, 256), gil_run_s=0.3, gil_rounds=3,
                          hidden=256, dp_batch=64, bench_steps=2, bench_repeats=3, rep_run_s=0.05),
            "cpu": dict(batch=24, res=32, width=16, bn_width=8, gil_small=(32, 64, 8),
                        gil_large=(1024, 4, 256), gil_run_s=1.0, gil_rounds=5,
                        hidden=1024, dp_batch=128, bench_steps=5, bench_repeats=5, rep_run_s=0.2),
            "gpu": dict(batch=24, res=32, width=16, bn_width=8, gil_small=(32, 64, 8),
                        gil_large=(1024, 4, 256), gil_run_s=1.0, gil_rounds=5,
                        hidden=4096, dp_batch=512, bench_steps=20, bench_repeats=10, rep_run_s=0.5),
            # No gpu/medium or gpu/small entry: nothing here comes near 6 GiB. The largest model is
            # ddp.mlp(32, 4096): 3072·4096 + 4096² + 4096·6 ≈ 29 M parameters, 0.11 GiB in fp32, with
            # gradients, SGD momentum and DDP's bucket 0.45 GiB per GPU (DataParallel's replicas: 0.11
            # each); a batch of 512 takes 6 MiB of images and tens of MiB of activations (512 × 4096 × 4 B = 8 MiB per saved tensor).
        }),
    Notebook(
        "06_ddp", "DistributedDataParallel (+ FSDP)", gpus=2,
        on_less="2 gloo ranks on the CPU: equivalence, collectives, overlap, scaling of CPU ranks; NCCL and GPU scaling need 2 GPUs",
        sizes={
            # train: scripts/ddp_train.py (n images of res px, MLP width hidden, batch per rank,
            # epochs, lr); bench_steps x bench_repeats: timed steps per rank (scaling, DDP overhead);
            # save_every / crash_at: the restart demo's checkpoint interval and crash step;
            # pg_timeout_s: process-group timeout of the skipped-collective demo;
            # comm_*: scripts/ddp_comm.py: comm_layers Linear(comm_width, comm_width), comm_batch rows
            # per rank (comm_k micro-batches for no_sync), comm_bucket_caps: bucket_cap_mb values (MiB)
            # shown beside DDP's default, comm_repeats timed rounds; fsdp_*: scripts/fsdp_vs_ddp.py;
            # fake_worlds: world sizes simulated with the fake process group
            "smoke": dict(n=512, res=16, hidden=64, batch=32, epochs=2, lr=0.05, bench_steps=2,
                          bench_repeats=3, save_every=3, crash_at=5, pg_timeout_s=3,
                          comm_width=256, comm_layers=4, comm_batch=32, comm_k=4, comm_repeats=3,
                          comm_bucket_caps=[0.1],
                          fsdp_width=128, fsdp_layers=4, fsdp_steps=3, fake_worlds=[8, 64]),
            "cpu": dict(n=4096, res=16, hidden=256, batch=64, epochs=3, lr=0.05, bench_steps=5,
                        bench_repeats=7, save_every=10, crash_at=45, pg_timeout_s=5,
                        comm_width=1024, comm_layers=6, comm_batch=64, comm_k=4, comm_repeats=7,
                        comm_bucket_caps=[1],
                        fsdp_width=512, fsdp_layers=6, fsdp_steps=5, fake_worlds=[8, 64]),
            "gpu": dict(n=65536, res=32, hidden=4096, batch=512, epochs=2, lr=0.05, bench_steps=20,
                        bench_repeats=10, save_every=20, crash_at=50, pg_timeout_s=10,
                        comm_width=2048, comm_layers=16, comm_batch=1024, comm_k=4, comm_repeats=10,
                        comm_bucket_caps=[4, 64],
                        fsdp_width=4096, fsdp_layers=8, fsdp_steps=10, fake_worlds=[8, 64]),
            # No gpu/medium or gpu/small entry: per GPU the largest job is fsdp_vs_ddp.py's DDP copy,
            # 8 Linear(4096, 4096) = 134 M parameters: 0.5 GiB of fp32 weights, 0.5 of gradients, 1.0
            # of AdamW state and 0.5 of DDP's buckets: 2.5 GiB, and the FSDP2 copy's shards (2 GiB / W) beside it;
            # ddp_comm.py holds 1 + len(comm_bucket_caps) DDP copies of 16 Linear(2048, 2048) (67 M
            # parameters, 0.5 GiB with gradients, SGD without momentum, buckets 0.25 GiB each): about
            # 2.3 GiB; ddp_train.py's 65,536 images of 32 px are 0.75 GiB. All fit a 6 GiB card.
        }),
    Notebook(
        "07_attention", "attention from scratch", gpus=1,
        on_less=("naive attention against SDPA (time and memory) and the CPU's flash and math "
                 "kernels measured; the flash, memory-efficient and cuDNN GPU kernels need a GPU"),
        sizes={
            # check: (B, H, T, d) of the equivalence checks, width = H·d for multi-head attention;
            # lengths: the sweep's sequence lengths (forward+backward of batch x heads x T x head_dim
            # in dtype, repeats rounds in turns after one warm-up, peak memory from one call); compare_t:
            # the length whose speed-up and memory ratio are the verdict (one of lengths);
            # backend_t: the length at which each SDPA backend is timed; toy_*: the running-maximum
            # task (sequences of toy_t tokens from toy_vocab, model width toy_width, toy_heads
            # heads, toy_steps AdamW steps of toy_batch sequences)
            "smoke": dict(check=(2, 4, 16, 8), lengths=[64, 128, 256], batch=2, heads=4, head_dim=32,
                          dtype="float32", repeats=2, compare_t=256, backend_t=256, backend_repeats=2,
                          toy_t=10, toy_vocab=10, toy_width=32, toy_heads=2, toy_steps=80,
                          toy_batch=64),
            "cpu": dict(check=(2, 4, 16, 8), lengths=[128, 256, 512, 1024, 2048], batch=4, heads=8,
                        head_dim=64, dtype="float32", repeats=5, compare_t=1024, backend_t=1024,
                        backend_repeats=5, toy_t=12, toy_vocab=10, toy_width=32, toy_heads=2,
                        toy_steps=300, toy_batch=64),
            "gpu": dict(check=(2, 4, 16, 8),
                        lengths=[512, 1024, 2048, 4096, 8192, 16384, 32768, 65536], batch=4, heads=16,
                        head_dim=64, dtype="bfloat16", repeats=5, compare_t=4096, backend_t=4096,
                        backend_repeats=10, toy_t=12, toy_vocab=10, toy_width=32, toy_heads=2,
                        toy_steps=300, toy_batch=64),
            # dtype "bfloat16" runs as device.amp_dtype: float16 where bf16 is not native (a T4, a V100).
            # One (4, 16, T, T) 16-bit matrix of scores is 128·T² bytes: 2 GiB at 4096, 8 GiB at 8192,
            # 32 GiB at 16384, 512 GiB at 65536. The written-out step peaks at ~3.3 of them, the math
            # kernel at ~6.5 (it computes 16-bit inputs in float32), both measured on a CPU: on an H100
            # (79 GiB) the written-out version runs out of memory at 16384 and the sweep reports it in one
            # line, then skips the longer lengths; SDPA adds ~4 tensors the size of q (the output and 3
            # gradients, 64 MiB each at 8192). H100, ~1 min with start-up: SDPA's causal forward +
            # backward ≈ 7·B·H·d·T² FLOPs = 1.2e14 at 65536, ~0.4 s per call at an assumed 300 TFLOP/s,
            # 7 calls per length (memory, warm-up, 5 timed) ≈ 4 s for the whole sweep; the written-out
            # one reads or writes ~10 T×T matrices per call (80 GiB at 8192: ~30 ms at 3 TB/s).
            "gpu/medium": dict(lengths=[512, 1024, 2048, 4096, 8192, 16384], backend_t=2048),
            # T4 (14.6 GiB, float16, memory-efficient kernel): written-out fits to 4096 (~6.6 GiB) and runs
            # out of memory at 8192 (~26 GiB); the math kernel at 2048 needs ~3.3 GiB (backend_t). Time:
            # 7·B·H·d·T² = 7.7e12 FLOPs at 16384, ~0.6 s per call at an assumed 12 TFLOP/s, ~7 s for
            # the sweep; the written-out calls ~0.1 s at 4096; the whole notebook < 1.5 min
            "gpu/small": dict(lengths=[512, 1024, 2048, 4096, 8192], compare_t=2048, backend_t=2048),
            # 6-8 GB (5.8-7.6 GiB): written-out fits at 2048 (~1.7 GiB) and runs out at 4096 (~6.6 GiB,
            # on a 6 GB card at least); the math kernel at 2048 ~3.3 GiB. SDPA at 8192: 1.9e12 FLOPs,
            # ~0.2 s per call at an assumed 10 TFLOP/s
        }),
    Notebook(
        "08_transformer", "Transformer training", gpus=1,
        on_less=("a small GPT trained on the CPU, eager and compiled, MFU against the CPU's "
                 "measured peak; a larger GPT, tensor cores and datasheet MFU need a GPU"),
        sizes={
            # max_bytes: the corpus budget (None: all of it); block, n_layer, n_head, n_embd, dropout: the
            # GPT (vocabulary from the tokenizer); micro sequences per micro-batch, accum micro-batches
            # per optimizer step; steps optimizer steps in the run through train.fit (warmup of them,
            # peak lr, decaying to lr·min_lr_ratio), validated every eval_every steps on val_batches
            # micro-batches; check_steps: steps of the written-out loop compared with train.fit;
            # time_repeats: timed steps per variant, in turns, after one warm-up; compile: time
            # torch.compile against eager; fit_compile: compile the long run; peak_sizes: matmul sizes
            # of the measured peak; resume_steps: the checkpoint demo's run, saved halfway;
            # sample_tokens: tokens generated per prompt; busy_turn_s: seconds of one turn of the
            # utilisation comparison (time_repeats turns per micro-batch; on a GPU over 1 s, NVML's
            # longest sample period, which the first second of each turn is left for)
            "smoke": dict(max_bytes=300_000, block=64, n_layer=2, n_head=2, n_embd=64, dropout=0.0,
                          micro=8, accum=2, steps=30, warmup=5, lr=3e-3, min_lr_ratio=0.1,
                          eval_every=10, val_batches=4, check_steps=2, time_repeats=3, compile=False,
                          fit_compile=False, peak_sizes=[256, 512], resume_steps=6, sample_tokens=60,
                          busy_turn_s=0.3),
            "cpu": dict(max_bytes=4_000_000, block=128, n_layer=4, n_head=4, n_embd=128, dropout=0.0,
                        micro=16, accum=2, steps=240, warmup=24, lr=3e-3, min_lr_ratio=0.1,
                        eval_every=40, val_batches=16, check_steps=3, time_repeats=5, compile=True,
                        fit_compile=False, peak_sizes=[512, 1024, 2048], resume_steps=10,
                        sample_tokens=200, busy_turn_s=0.8),
            # cpu: 240 long-run steps, not 300: with the step timed bf16 vs fp32 and the plain checkpoint
            # cell, 08 took 180 s of its 3-min budget at 300 (2-core Xeon, 2026-11-27; the long run 95 s)
            "gpu": dict(max_bytes=None, block=512, n_layer=8, n_head=8, n_embd=512, dropout=0.0,
                        micro=32, accum=4, steps=300, warmup=30, lr=1e-3, min_lr_ratio=0.1,
                        eval_every=50, val_batches=20, check_steps=3, time_repeats=8, compile=True,
                        fit_compile=False, peak_sizes=[4096, 8192, 16384], resume_steps=6,
                        sample_tokens=300, busy_turn_s=2.5),
            # H100, ~2 min: N = 25.3 M, 6N + 12·L·T·C = 177 MFLOP/token; 32·4·512 = 65,536 tokens per step
            # = 11.6 TFLOP. The long run, 300 steps = 3.5 PFLOP (19.7 M tokens, < 1 pass over the 28.8 M
            # of the stdlib): ~25 s at an assumed 15 % MFU (150 of the datasheet's 989 TFLOP/s bf16); timed
            # steps 3 versions × 10 ≈ 4 s; fit probe, checks and resume (math attention) 60 micro-batches
            # (1 M tokens) ≈ 5 s; one cold torch.compile (~1 min, assumed); fit_compile off: a second
            # compile (training and evaluation graphs) would cost more than it saves in 300 steps.
            # Memory (memory.estimate_training_memory, bf16 autocast, micro 32): parameters + gradients +
            # AdamW 0.39 GiB per GPT, activations 2.4 GiB (SDPA) / 4.4 GiB (written-out attention, as the
            # math backend): the fit probe's 3 GPTs ≈ 6 GiB.
            # Regime (issue 50, no GPU: the H200 run's arithmetic): 13.4 % MFU, ~17 ms of FLOPs per 121 ms step;
            # GPT-2 small's shape is notebook 13's (issue 51): these sizes stay until a GPU run times both.
            "gpu/medium": dict(block=256, n_layer=6, n_head=6, n_embd=384, micro=32, accum=2, time_repeats=6,
                               peak_sizes=[2048, 4096, 8192], sample_tokens=200),
            # T4 (fp16 + GradScaler), ~3.5 min: N = 10.75 M, 71.6 MFLOP/token; 32·2·256 = 16,384 tokens per
            # step = 1.17 TFLOP; 300 steps = 0.35 PFLOP ≈ 35 s at an assumed 10 TFLOP/s (15 % of the
            # datasheet's 65 fp16; small matmuls); timed steps and checks ≈ 10 s; a cold torch.compile
            # on a 2-core host ~1.5 min (assumed), start-up and corpus ~30 s. Memory (16-bit, micro 32):
            # 0.16 GiB per GPT with AdamW, activations 0.7 GiB (SDPA) / 1.0 GiB (written-out): probe ≈ 1.5 GiB
            "gpu/small": dict(block=256, n_layer=6, n_head=6, n_embd=384, micro=32, accum=2, steps=200,
                              warmup=20, time_repeats=6, peak_sizes=[2048, 4096, 8192], sample_tokens=200),
            # 6-12 GB cards, often no faster than a T4: medium's GPT, 200 steps (3.3 M tokens) ≈ 25 s at
            # 10 TFLOP/s; the probe's ≈ 1.5 GiB leaves room on a 6 GB card beside a display; where it does
            # not fit, oom.fit_batch halves the micro-batch and the accumulation doubles
        }),
    Notebook(
        "09_memory", "memory monitoring", gpus=1,
        on_less=("per-phase peaks, the estimate, out-of-memory and the largest batch, "
                 "checkpointing and the timeline measured on the CPU (profiler memory events); the "
                 "caching allocator, empty_cache, expandable segments and memory snapshots need "
                 "a GPU"),
        sizes={
            # block, n_layer, n_head, n_embd: the GPT measured (byte vocabulary); batch: its sequences
            # per step; alloc_mib: the caching-allocator demo's tensor (GPU); budget_mib: the memory a
            # step may use in the out-of-memory demo and the largest-batch search (CPU: a measured
            # budget; GPU: set_per_process_memory_fraction, a smaller GPU), too_big: a batch over it;
            # repeats: timed steps per variant, in turns, after one warm-up (cpu 9: with 5, one slow
            # round on a busy 2-core box widened the interval to 0.72-1.33 around a 1.27x cost);
            # frag_steps: steps of the fragmentation script (GPU); measure_mib: the widget measures estimates up to this
            # (None: 80 % of what the GPU has left, oom.headroom). On a GPU alloc_mib and budget_mib are
            # at most a quarter and a half of what it has left
            "smoke": dict(block=64, n_layer=2, n_head=2, n_embd=64, batch=8, alloc_mib=64,
                          budget_mib=24, too_big=256, repeats=3, frag_steps=20, measure_mib=64),
            "cpu": dict(block=128, n_layer=4, n_head=4, n_embd=128, batch=16, alloc_mib=256,
                        budget_mib=192, too_big=128, repeats=9, frag_steps=50, measure_mib=512),
            "gpu": dict(block=1024, n_layer=12, n_head=12, n_embd=768, batch=8, alloc_mib=1024,
                        budget_mib=16384, too_big=256, repeats=5, frag_steps=200, measure_mib=None),
            # GPT-2 small's body on bytes: N = 86.0 M, fp32 weights 0.32 GiB, gradients 0.32, AdamW 0.64.
            # Activations (memory.estimate_training_memory on fake tensors, 16-bit autocast, T = 1024): 0.32 GiB
            # per sequence + 0.16 GiB of 16-bit weight copies; the notebook's largest moment (two GPTs with
            # AdamW, one step; oom.fit_batch probes it and halves the batch where it does not fit) at
            # batch 8 ≈ 2 × 0.96 + 0.32 + 2.74 = 5.0 GiB. The equivalence checks on the math backend run on
            # 2 × 256 tokens. ~40 steps of 8.2 k tokens, 6N + attention ≈ 5.2 TFLOP each: seconds on an H100.
            "gpu/medium": dict(budget_mib=6144),
            # T4 (14.6 GiB, fp16 + GradScaler): batch 8's 5.0 GiB fits; ~40 steps at an assumed 20 TFLOP/s
            # ≈ 0.26 s each, with the search and the two profiled runs ≈ 1.5 min in all (assumed). budget_mib
            # is under half of what is left beside the notebook's GPT (~13 GiB): a step adds 0.48 GiB + 0.32 GiB
            # per sequence, so about 17 sequences fit
            "gpu/small": dict(batch=4, budget_mib=2048, alloc_mib=512),
            # 6-8 GB (5.8-7.6 GiB; COURSE_GPU_MEMORY_GIB=8 simulates one): batch 4's largest moment
            # ≈ 1.92 + 0.32 + 0.16 + 4 × 0.32 = 3.7 GiB beside a CUDA context of ~0.4 GiB; the budget 2 GiB
            # (≈ 4 sequences) is under half of what is left; the allocator demo's tensor is 512 MiB
        }),
    Notebook(
        "10_compile_and_profile", "torch.compile and the profiler", gpus=1,
        on_less=("a step's profile by category, hidden syncs, torch.compile (default mode) with a "
                 "graph break, and the roofline measured on the CPU; GPU kernel timelines, "
                 "sync warnings and CUDA graphs (reduce-overhead) need a GPU"),
        sizes={
            # block, n_layer, n_head, n_embd: the GPT profiled (byte vocabulary); batch: sequences
            # per step (oom.fit_batch halves it where the notebook's peak does not fit); profiled:
            # steps in the profiler's active window (after one warm-up step); repeats: timed steps per
            # variant, in turns, after one warm-up; compile: torch.compile (cold) against eager;
            # compile_breaks: also compile the two monitored GPTs of the graph-break demo; peak_sizes:
            # matmul sizes of the measured compute peak (08's, in every profile and class: the two
            # share one stored peak, course_lib.peaks); bw_sizes: copy buffer sizes (bytes) of the
            # measured bandwidth, the largest beyond the caches; op_steps: steps whose every op is
            # timed for the roofline
            "smoke": dict(block=64, n_layer=2, n_head=2, n_embd=64, batch=8, profiled=3, repeats=3,
                          compile=False, compile_breaks=False, peak_sizes=[256, 512],
                          bw_sizes=[1 << 20, 256 << 20], op_steps=2),
            "cpu": dict(block=128, n_layer=4, n_head=4, n_embd=128, batch=16, profiled=3, repeats=9,
                        compile=True, compile_breaks=True, peak_sizes=[512, 1024, 2048],
                        bw_sizes=[1 << 20, 8 << 20, 16 << 20, 32 << 20, 64 << 20, 256 << 20], op_steps=5),
            "gpu": dict(block=1024, n_layer=6, n_head=12, n_embd=768, batch=8, profiled=5, repeats=10,
                        compile=True, compile_breaks=True, peak_sizes=[4096, 8192, 16384],
                        bw_sizes=[16 << 20, 256 << 20, 2 << 30], op_steps=5),
            # H100, ~2.5 min: half of GPT-2 small (6 of its 12 layers, width 768, context 1024), N = 43.5 M,
            # 6N + 12·L·T·C = 313 MFLOP/token, 8·1024 tokens = 2.6 TFLOP per step, ~10 ms at an assumed
            # 250 TFLOP/s: the ~120 steps run ≈ 2 s. Compilation sets the time: cold default ~40 s,
            # reduce-overhead ~20 s (warm Triton cache), the two monitored GPTs ~45 s, Dynamo's explain
            # and 3 counting traces ~10 s (all assumed, 16 host cores); 12 layers would double most of it.
            # Memory (memory.estimate_training_memory, 16-bit autocast, batch 8): parameters + gradients +
            # AdamW 0.65 GiB per GPT, activations 1.4 GiB; the fit probe (3 GPTs, one step's activations
            # kept as a CUDA graph pool keeps them, another step) ≈ 4.8 GiB.
            # Regime (issue 50, no GPU: the H200 run's arithmetic): 19.1 ms per step, 78 % waiting (~4.3 ms of
            # GPU work): launch-bound, where CUDA graphs win (2.28×); a roofline step needs batch 64 (~34 ms,
            # probe ~24 GiB, large only), not set until a GPU run checks 10's minutes with both batches.
            "gpu/medium": dict(block=512, n_layer=4, n_embd=768, compile_breaks=False,
                               peak_sizes=[2048, 4096, 8192], bw_sizes=[16 << 20, 256 << 20, 1 << 30]),
            # T4 (fp16 autocast + GradScaler), ~3 min: N = 28.9 M, 190 MFLOP/token, 8·512 tokens = 0.78 TFLOP
            # per step, ~60 ms at an assumed 13 TFLOP/s (20 % of the datasheet's 65): ~95 steps ≈ 6 s.
            # Compilation on a 2-core host (Colab): cold default ~70 s, reduce-overhead ~30 s, explain and
            # counting traces ~15 s (assumed); the monitored GPTs are not compiled (two more would pass the
            # 5-minute budget). Memory: 0.43 GiB per GPT with AdamW, activations 0.5 GiB: probe ≈ 2.3 GiB.
            "gpu/small": dict(block=512, n_layer=4, n_embd=768, compile_breaks=False,
                              peak_sizes=[2048, 4096, 8192], bw_sizes=[16 << 20, 256 << 20, 1 << 30]),
            # 6-12 GB cards: medium's GPT, probe ≈ 2.3 GiB; the largest buffers after the models are
            # freed: a copy of 1 GiB (2 GiB with its destination), matmuls of 8192² (3 × 128 MiB in 16-bit)
        }),
    Notebook(
        "11_model_parallel", "model parallelism: pipeline and tensor", gpus=2,
        on_less=("the stages and tensor-parallel ranks run as gloo ranks on the CPU: equivalence with "
                 "one process, timelines, bubble against micro-batches, memory per stage, all-reduce "
                 "bytes, 2D on 4 ranks; NCCL between GPUs needs 2 GPUs (4 for section 8's 2D mesh)"),
        sizes={
            # pipe_*: scripts/pipeline.py: pipe_layers blocks Linear(pipe_width, pipe_width) → GELU
            # split over the stages, pipe_batch rows per step cut into each of pipe_micro micro-batch
            # counts (every one divides pipe_batch), pipe_repeats timed steps of each schedule and count
            # after one warm-up; tp_*: scripts/tensor_parallel.py: an MLP Linear(tp_width, 4·tp_width) →
            # GELU → Linear(4·tp_width, tp_width) and causal attention with tp_heads heads (a multiple
            # of 2, 3 and 4: every STAGES), on tp_batch sequences of tp_seq tokens; tp_repeats timed rounds
            "smoke": dict(pipe_width=128, pipe_layers=4, pipe_batch=64, pipe_micro=[1, 2, 4],
                          pipe_repeats=3, tp_width=96, tp_heads=12, tp_batch=2, tp_seq=16, tp_repeats=3,
                          two_d_width=64, two_d_layers=2, two_d_batch=16, two_d_steps=2),
            "cpu": dict(pipe_width=1024, pipe_layers=8, pipe_batch=512, pipe_micro=[1, 2, 4, 8],
                        pipe_repeats=7, tp_width=768, tp_heads=12, tp_batch=4, tp_seq=128, tp_repeats=7,
                        two_d_width=256, two_d_layers=2, two_d_batch=32, two_d_steps=3),
            # cpu: a forward pass at m = 8 is 64 rows through 4 blocks of 1024², 0.5 GFLOP, about
            # 10 ms on one core (assumed ~50 GFLOP/s), against a 256 KiB message: the passes dominate
            # the step, as they do on GPUs, and the launch takes ~40 s. two_d_*: scripts/fsdp_tp.py on
            # 4 ranks (a 2 × 2 mesh): two_d_layers MLP blocks of width two_d_width, two_d_steps AdamW
            # steps of two_d_batch rows
            "gpu": dict(pipe_width=4096, pipe_layers=8, pipe_batch=4096, pipe_micro=[1, 2, 4, 8, 16],
                        pipe_repeats=10, tp_width=3072, tp_heads=24, tp_batch=8, tp_seq=1024, tp_repeats=10,
                        two_d_width=2048, two_d_layers=4, two_d_batch=64, two_d_steps=5),
            # No gpu/medium or gpu/small entry: per GPU the whole model (every rank builds it, for the
            # one-process check) is 8 Linear(4096, 4096) = 134 M parameters, 0.5 GiB of fp32 weights
            # and 0.5 of gradients; a stage's activations for the whole batch (GPipe's peak) are about
            # 2 tensors of 4096 × 4096 × 4 B = 64 MiB per block, 4 blocks: 0.5 GiB. tensor_parallel.py
            # holds the whole MLP and attention of width 3072 (113 M parameters: 0.9 GiB with gradients),
            # a DTensor copy of the MLP and the rank's shards beside them, and their hidden activations
            # (8 × 1024 × 12288 × 4 B = 0.4 GiB per tensor). fsdp_tp.py holds the whole stack of
            # two_d_layers MLPs of width 2048 (134 M parameters) with its AdamW state for the
            # one-process reference, 2.0 GiB, beside a quarter of it as the 2D shards. All fit a 6 GiB card.
        }),
    Notebook(
        "12_kernels", "inside the kernel: tiles and Triton", gpus=1,
        on_less=("the online softmax, tiled attention forward and backward against SDPA, peak memory "
                 "against T, the bytes of a fused softmax, and the Triton kernels checked under Triton's "
                 "interpreter; compiling and timing the kernels needs a CUDA GPU (compute capability 7.0+)"),
        sizes={
            # check: (B, H, T, d) of section 2's equivalences (T not a multiple of any BLOCK of 16-128
            # below it); softmax: (rows, cols) of sections 1 and 4's checks (cols not a power of two;
            # the interpreter runs one program per row); softmax_timed: the timed softmax, beyond the caches
            # in cpu (62.5 MiB; 12 prints the last-level cache) and gpu (125 MiB), not in smoke; mem_shape
            # (B, H, d) and mem_lengths: section 3's passes (from 2·BLOCK up), each length twice the last;
            # add_n: the vector add's elements (not a multiple of its 1024); attention: (B, H, T, d) of
            # the Triton attention (T not a multiple of BLOCK); compile: show torch.compile's kernel
            # (cold, ~30 s on 2 cores) and time it; repeats: rounds of the timings (softmax; attention on a GPU);
            # bw_sizes, peak_sizes: 10's copy sizes and matmul sizes on a GPU (peaks measured once a run)
            "smoke": dict(check=(2, 2, 100, 32), softmax=(16, 1000), softmax_timed=(64, 1000), mem_shape=(1, 2, 32),
                          mem_lengths=[128, 256, 512], add_n=10_000, attention=(1, 2, 80, 32),
                          compile=False, repeats=3, bw_sizes=[1 << 20, 256 << 20], peak_sizes=[256, 512]),
            "cpu": dict(check=(2, 4, 300, 64), softmax=(256, 1000), softmax_timed=(4096, 4000), mem_shape=(1, 4, 64),
                        mem_lengths=[256, 512, 1024, 2048], add_n=100_000, attention=(2, 2, 200, 32),
                        compile=True, repeats=5, bw_sizes=[1 << 20, 8 << 20, 16 << 20, 32 << 20, 64 << 20, 256 << 20],
                        peak_sizes=[512, 1024, 2048]),
            "gpu": dict(check=(4, 8, 1000, 64), softmax=(4096, 1000), softmax_timed=(8192, 4000), mem_shape=(1, 4, 64),
                        mem_lengths=[1024, 2048, 4096, 8192], add_n=(1 << 26) + 3, attention=(4, 16, 2000, 64),
                        compile=True, repeats=10, bw_sizes=[16 << 20, 256 << 20, 2 << 30],
                        peak_sizes=[4096, 8192, 16384]),
            # gpu: the largest moment is section 3's written-out attention at T = 8192: scores and
            # probabilities of (1, 4, 8192, 8192) float32, 1 GiB each; the copy of 2 GiB needs 4 GiB.
            # The smaller classes keep 10's copy and matmul sizes so that the stored peaks are shared.
            "gpu/medium": dict(bw_sizes=[16 << 20, 256 << 20, 1 << 30], peak_sizes=[2048, 4096, 8192]),
            "gpu/small": dict(bw_sizes=[16 << 20, 256 << 20, 1 << 30], peak_sizes=[2048, 4096, 8192]),
        }),
)
SIZES: dict[str, dict[str, dict]] = {nb.stem: nb.sizes for nb in NOTEBOOKS}  # stem -> sizes


def gpu_class(memory_gib: float | None) -> str:
    """The size class for a GPU with `memory_gib` usable GiB (None: no GPU here, so the sizes
    of the reference run, ``large``).

    >>> gpu_class(14.6), gpu_class(7.6), gpu_class(79.1)
    ('medium', 'small', 'large')
    """
    if memory_gib is None:
        return "large"
    return next(name for name, least, _ in GPU_CLASSES if memory_gib >= least)


def resolve(name: str | None = None) -> str:
    """Turn 'auto', None or a profile name into one of PROFILES.

    >>> resolve("smoke")
    'smoke'
    """
    name = (name or os.environ.get("COURSE_PROFILE") or "auto").strip().lower()
    if name == "auto":
        return "gpu" if torch.cuda.is_available() else "cpu"
    if name not in PROFILES:
        raise ProfileError(
            f"Unknown profile {name!r}: choose one of {', '.join(PROFILES)} or auto."
        )
    return name


def sizes(notebook: str, profile: str | None = None, *,
          memory_gib: float | None = None) -> SimpleNamespace:
    """The size dial of `notebook` under `profile`, as attributes (``cfg.batch_size``).

    Under ``gpu`` the class comes from `memory_gib` if given, else from the current GPU's
    memory (:func:`device.gpu_memory_gib`); ``cfg.gpu_class`` names it and ``cfg.why`` says
    why (both None outside ``gpu``).
    """
    if notebook not in SIZES:
        raise ProfileError(f"No sizes for notebook {notebook!r}; known: {', '.join(SIZES)}.")
    profile = resolve(profile)
    table = SIZES[notebook]
    values, cls, why = dict(table[profile]), None, None
    if profile == "gpu":
        gib = device.gpu_memory_gib() if memory_gib is None else memory_gib
        cls = gpu_class(gib)
        values.update(table.get(f"gpu/{cls}", {}))
        least = dict((c, lo) for c, lo, _ in GPU_CLASSES)[cls]
        why = (f"{cls} sizes for a GPU of {gib:.1f} GiB (>= {least} GiB)" if gib is not None
               else "large sizes, as in the reference run (no GPU here)")
    return SimpleNamespace(profile=profile, gpu_class=cls, why=why, **values)


def banner(cfg: SimpleNamespace, dev: torch.device) -> str:
    """The notebook's first line: profile, device and hardware, and under ``gpu`` the size
    class chosen and why."""
    line = device.banner(cfg.profile, dev)
    return line if cfg.why is None else f"{line}\n{cfg.why}"
