"""Figures measured and published by others, with where each was read: what a GPU does, for the
learner who has none.

The course measures on the learner's machine. Where a section needs a GPU the machine lacks, it
shows first the recorded reference run from ``results/`` when one exists, then these: numbers
other people measured on named hardware and published, each quoted from its source (title, URL
and where in it: table, figure, section), with the date it was read. They are measurements, not
this machine's, so every line that prints one says "published by …, measured on …, not on this
machine". They are kept apart from :mod:`course_lib.datasheet`, whose figures are vendor peaks
and no measurement at all.

Rules for an entry: the figure exactly as the source prints it (a ratio the source does not print
is not added to `figure`); the hardware and, where given, the software it ran on; `quote`, the
source's own words or table row that carry the figure; no figure from memory. Sources read
through a copy (a transcript, a mirror) say so in `source` or `what`. Print entries by key
(:func:`show`), so a key that is missing fails the notebook that prints it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from course_lib import report

READ = "2026-11-27"  # when the entries below were read in their sources


@dataclass(frozen=True)
class Figure:
    """One published measurement: the `figure` as printed, in `unit`, measured by `by` on
    `hardware` (with `software` where given), read in `source` at `url`, `where` in it."""

    key: str
    by: str  # who published it, short: "NVIDIA DeepLearningExamples"
    figure: str  # as the source prints it
    unit: str
    hardware: str
    what: str  # what was measured: model, batch, setup, caveats
    source: str  # title of the document (and the copy it was read in, if not the original)
    url: str
    where: str  # table, figure or section of the source
    quote: str  # the source's words or table row that carry the figure
    software: str = ""  # versions, where the source gives them
    read: str = READ  # date read

    def cite(self) -> str:
        """The label and the figure: who published it, on what hardware, not on this machine."""
        on = f"hardware {self.hardware}" if self.hardware.startswith("not stated") else self.hardware
        return f"published by {self.by}, measured on {on}, not on this machine: {self.figure} [{self.unit}]"

    def __str__(self) -> str:
        software = f"\n    software: {self.software}" if self.software else ""
        return (f"{self.cite()}\n    what: {self.what}{software}\n"
                f"    source: {self.source}; {self.where}; {self.url} (read {self.read})")


FIGURES: tuple[Figure, ...] = (
    Figure(
        key='dle_resnet50_a100_1gpu_tf32_vs_amp',
        by='NVIDIA DeepLearningExamples',
        figure='938 img/s (TF32) vs 2470 img/s (mixed precision); 2.63 x',
        unit='images/second (training throughput); speedup factor',
        hardware='NVIDIA DGX A100 (8x A100 80GB), 1 GPU used for this row',
        what=('ResNet-50 v1.5 ImageNet training throughput on 1 GPU, TF32 vs AMP (mixed precision); per-GPU '
              'batch size not stated in the table (main.py default is 256 per GPU).'),
        software='pytorch-21.03 NGC container',
        source=('NVIDIA DeepLearningExamples: ResNet50 v1.5 For PyTorch (README, repo snapshot commit 729963dd, '
                '2024-04-04)'),
        url='https://github.com/NVIDIA/DeepLearningExamples/blob/master/PyTorch/Classification/ConvNets/resnet50v1.5/README.md',
        where=('Results > Training performance results > Training performance: NVIDIA DGX A100 (8x A100 80GB), '
               'row GPUs=1'),
        quote=('| 1 | 938 img/s | 2470 img/s | 2.63 x | 1.0 x | 1.0 x | ~14 hours | ~36 hours | [whitespace '
               'collapsed]')),
    Figure(
        key='dle_resnet50_v100_1gpu_fp32_vs_amp',
        by='NVIDIA DeepLearningExamples',
        figure='367 img/s (FP32) vs 1200 img/s (mixed precision); 3.26 x',
        unit='images/second (training throughput); speedup factor',
        hardware='NVIDIA DGX-1 16GB (8x V100 16GB), 1 GPU used for this row',
        what=('ResNet-50 v1.5 ImageNet training throughput on 1 GPU, plain FP32 vs AMP on a Volta GPU (no TF32 '
              'on V100); batch size not stated in the table.'),
        software='pytorch-21.03 NGC container',
        source=('NVIDIA DeepLearningExamples: ResNet50 v1.5 For PyTorch (README, repo snapshot commit 729963dd, '
                '2024-04-04)'),
        url='https://github.com/NVIDIA/DeepLearningExamples/blob/master/PyTorch/Classification/ConvNets/resnet50v1.5/README.md',
        where=('Results > Training performance results > Training performance: NVIDIA DGX-1 16GB (8x V100 16GB),'
               ' row GPUs=1'),
        quote=('| 1 | 367 img/s | 1200 img/s | 3.26 x | 1.0 x | 1.0 x | ~29 hours | ~92 hours | [whitespace '
               'collapsed]')),
    Figure(
        key='dle_resnet50_t4_inference_fp32_vs_amp_bs64',
        by='NVIDIA DeepLearningExamples',
        figure='428 img/s (FP32) vs 1165 img/s (mixed precision) at batch size 64',
        unit='images/second (INFERENCE throughput, not training)',
        hardware='NVIDIA T4 (1 GPU)',
        what=('ResNet-50 v1.5 inference throughput on a T4 at batch 64, FP32 vs mixed precision. NOTE: the '
              'README publishes no T4 TRAINING table; this is the only T4 precision comparison found there.'),
        software='pytorch-21.03 NGC container',
        source=('NVIDIA DeepLearningExamples: ResNet50 v1.5 For PyTorch (README, repo snapshot commit 729963dd, '
                '2024-04-04)'),
        url='https://github.com/NVIDIA/DeepLearningExamples/blob/master/PyTorch/Classification/ConvNets/resnet50v1.5/README.md',
        where=('Inference performance results > Inference performance: NVIDIA T4 > FP32 Inference Latency / '
               'Mixed Precision Inference Latency, row Batch Size 64'),
        quote=('FP32: | 64 | 428 img/s | 152.73 ms | 152.03 ms | 153.02 ms | | AMP: | 64 | 1165 img/s | 57.41 ms'
               ' | 55.67 ms | 56.11 ms | [whitespace collapsed]')),
    Figure(
        key='pytorch_blog_amp_v100_1p5x_to_5p5x',
        by='the PyTorch blog',
        figure='1.5x to 5.5x',
        unit='training speedup factor, AMP (FP16) vs FP32',
        hardware="NVIDIA 8xV100 (as printed: 'NVIDIA 8xV100 vs. FP32 training on 8xV100 GPU')",
        what=('Range of training speedups of AMP over FP32 across various DeepLearningExamples models '
              '(ResNet-50, BERT, Transformer, etc.; per-model values only in a bar-chart image) on 8 V100s.'),
        software='NVIDIA pytorch:20.06-py3 container (NGC)',
        source=('Introducing native PyTorch automatic mixed precision for faster training on NVIDIA GPUs (PyTorch'
                ' blog, Huang, Tekur, Carilli, 2020)'),
        url='https://pytorch.org/blog/accelerating-training-on-nvidia-gpus-with-pytorch-automatic-mixed-precision/',
        where=('Performance Benchmarks > Speedup Performance > FP16 on NVIDIA V100 vs. FP32 on V100 (Figure 2)'),
        quote=('In Table 1, we can observe that for various models, AMP on V100 provides a speedup of 1.5x to '
               '5.5x over FP32 on V100 while converging to the same final accuracy.')),
    Figure(
        key='karpathy_gpt2_124m_fp32_to_tf32_1000ms_to_333ms',
        by="Andrej Karpathy's lecture",
        figure='~1000 ms/iter (FP32) -> 333 ms/iter (TF32 matmuls); bfloat16 autocast -> 300 ms/iter',
        unit='milliseconds per training iteration',
        hardware=("1x NVIDIA A100 (transcript: 'my GPU is a100'; 'we're using 35 GB out of 80'), in an 8-GPU cloud "
                  'box'),
        what=("GPT-2 124M training step, batch 16 x 1024 tokens, single GPU, in the 'Let's reproduce GPT-2 "
              "(124M)' lecture; TF32 enabled via one line (torch.set_float32_matmul_precision('high'), "
              'build-nanogpt commit 5265b20). Speaker notes ~3x instead of the promised 8x because the workload'
              ' is memory-bound.'),
        source=("Andrej Karpathy, 'Let's reproduce GPT-2 (124M)' YouTube lecture: chapter list in the video "
                'description + auto-generated transcript'),
        url='https://youtu.be/l8pRSuU81PU',
        where=("Video description chapters 01:22:18, 01:28:14, 01:39:38 (transcript section 'Tensor Cores, "
               "timing the code, TF32 precision, 333ms')"),
        quote=('01:22:18 SECTION 2: Let’s make it fast. GPUs, mixed precision, 1000ms / 01:28:14 Tensor Cores, '
               'timing the code, TF32 precision, 333ms / 01:39:38 float16, gradient scalers, bfloat16, 300ms')),
    Figure(
        key='thirdparty_quadro_rtx6000_pinned_vs_pageable_h2d_1mib',
        by='a course assignment on GitHub (npho/cse554)',
        figure='H2D pageable 3.748 vs pinned 11.021 at 1,048,576 bytes; H2D speedup 2.941',
        unit='bandwidth: the column has no unit in the source; speedup: a ratio',
        hardware='Quadro RTX 6000 (1 GPU)',
        what=('cudaMemcpy host-to-device bandwidth, pageable vs pinned host buffer, sweep of transfer sizes 1 '
              'B..1 MiB; pinned is slower below ~16 KB and ~3x faster at 1 MiB.'),
        software='CUDA 12.9.86 (nvcc), GCC 8.5.0',
        source=('npho/cse554 assignment1/host_GPU README (student course assignment, third-party measurement)'),
        url='https://github.com/npho/cse554/blob/0e85c3cf5e001cdddfc8451f5b9d495fa291da91/assignment1/host_GPU/README.md',
        where="'Host-Device Memory Transfer Benchmarking' console output table, last row (Bytes = 1048576)",
        quote=('Bytes H2D Page D2H Page H2D Pinned D2H Pinned H2D Speedup D2H Speedup ... 1048576 3.748 3.405 '
               '11.021 12.030 2.941 3.533 [whitespace collapsed]')),
    Figure(
        key='thirdparty_gh200_pageable_vs_pinned_1gib',
        by='a vortex-data/vortex pull request',
        figure='pageable 92.989 GiB/s vs pinned (default flags) 97.423 GiB/s',
        unit='GiB/s (host-to-device memcpy throughput, median of criterion estimate)',
        hardware='NVIDIA GH200',
        what=('1 GiB cuMemcpyHtoD from pageable vs cuMemHostAlloc-pinned host memory (Rust criterion '
              'benchmark). Shows the pinned advantage almost vanishes on a Grace-Hopper (NVLink-C2C) system, '
              'unlike PCIe GPUs.'),
        source=("vortex-data/vortex PR #7815 'bench: CUDA host-to-device copy modes' (third-party measurement)"),
        url='https://github.com/vortex-data/vortex/pull/7815',
        where="PR description, 'Benchmark results on a GH200'",
        quote=('cuda/load_to_device/memcpy_htod/pageable/1GiB ... thrpt: [92.649 GiB/s 92.989 GiB/s 93.306 '
               'GiB/s] cuda/load_to_device/memcpy_htod/pinned_default/1GiB ... thrpt: [94.992 GiB/s 97.423 GiB/s'
               ' 99.159 GiB/s]')),
    Figure(
        key='pytorch_tutorial_nonblocking_d2h_erroneous',
        by="PyTorch's tutorials (Vincent Moens)",
        figure='will result in erroneous outputs',
        unit='outcome, in words: reading a device→host non_blocking copy before synchronising',
        hardware="not stated (the tutorial's build machine, one CUDA GPU)",
        what=('cuda_tensor.to("cpu", non_blocking=True).mean() read on the CPU without a synchronisation; '
              'the tutorial then runs 100 such reads against the expected mean, and the same reads after '
              'torch.cuda.synchronize(). The direction CPU→GPU is safe: CUDA orders the copy before the '
              'kernels that read it.'),
        source='A guide on good usage of non_blocking and pin_memory() in PyTorch (PyTorch tutorials)',
        url='https://docs.pytorch.org/tutorials/intermediate/pinmem_nonblock.html',
        where=("Introduction > Key Learnings; section 'Other copy directions (GPU -> CPU, CPU -> MPS etc.)' "
               '(read in the source, intermediate_source/pinmem_nonblock.py)'),
        quote=('While cpu_tensor.to("cuda", non_blocking=True).mean() executes correctly, attempting '
               'cuda_tensor.to("cpu", non_blocking=True).mean() will result in erroneous outputs.')),
    Figure(
        key='flashattention1_paper_end_to_end_speedups',
        by='Dao et al., FlashAttention',
        figure='15% (BERT-large, seq 512); 3x (GPT-2, seq 1K); 2.4x (long-range arena, seq 1K-4K)',
        unit='end-to-end training wall-clock speedup',
        hardware='not stated in the abstract',
        what=('End-to-end training speedups of FlashAttention vs existing baselines (BERT-large measured '
              'against the MLPerf 1.1 training speed record). Baselines for GPT-2/LRA and the hardware are not '
              'named in the abstract; the paper body was not reachable here.'),
        source=('Dao et al., FlashAttention: Fast and Memory-Efficient Exact Attention with IO-Awareness (arXiv '
                '2205.14135), abstract as shown on huggingface.co/papers/2205.14135'),
        url='https://arxiv.org/abs/2205.14135',
        where='Abstract',
        quote=('FlashAttention trains Transformers faster than existing baselines: 15% end-to-end wall-clock '
               'speedup on BERT-large (seq. length 512) compared to the MLPerf 1.1 training speed record, 3times'
               ' speedup on GPT-2 (seq. length 1K), and 2.4times speedup on long-range arena (seq. length '
               '1K-4K).')),
    Figure(
        key='flashattention1_readme_a100_speedup_2_to_4x',
        by='Dao-AILab/flash-attention',
        figure='2-4X (seq 128-4K); up to 4X at seq 512/1K with dropout+masking',
        unit='attention fwd+bwd speedup vs PyTorch standard attention',
        hardware="A100 (README section 'A100'; chart title 'FlashAttention Speedup, A100')",
        what=('FlashAttention (v1) vs PyTorch standard attention, combined forward+backward, batch size 8, head'
              ' dim 64, 12 heads (BERT-base-like), seq 128-4096 (standard attention OOMs beyond 4096).'),
        source=('Dao-AILab/flash-attention README, FlashAttention-1 era version (last version before the '
                "2023-07-17 'FlashAttention-2 release' commit)"),
        url='https://github.com/Dao-AILab/flash-attention/blob/6d48e14a6c2f551db96f0badc658a6279a929df3/README.md',
        where='Performance > A100 > Speedup (assets/flashattn_speedup.jpg)',
        quote=('We generally see 2-4X speedup at sequence lengths between 128 and 4K, and we see more speedup '
               'when using dropout and masking, since we fuse the kernels. At sequence lengths that are popular '
               'with language models like 512 and 1K, we see speedups up to 4X when using dropout and masking.')),
    Figure(
        key='flashattention_readme_memory_10x_at_2k_20x_at_4k',
        by='Dao-AILab/flash-attention',
        figure='10X at seq 2K; 20X at seq 4K',
        unit='attention memory-footprint reduction factor vs PyTorch standard attention',
        hardware="A100 (README 'A100' section)",
        what=('Memory saving of FlashAttention vs standard attention; linear vs quadratic in sequence length; '
              'same with or without dropout/masking. Same parameters as the A100 speedup chart of that README '
              'version (batch 8, head dim 64, 12 heads).'),
        source='Dao-AILab/flash-attention README (text present in both the FA1-era and the current README)',
        url='https://github.com/Dao-AILab/flash-attention#memory',
        where='Performance > A100 > Memory (assets/flashattn_memory.jpg)',
        quote=('Memory savings are proportional to sequence length -- since standard attention has memory '
               'quadratic in sequence length, whereas FlashAttention has memory linear in sequence length. We '
               'see 10X memory savings at sequence length 2K, and 20X at 4K.')),
    Figure(
        key='flashattention1_readme_t4_forward_speedup',
        by='Dao-AILab/flash-attention',
        figure='2.5x-4.5x (forward pass only); smaller speedup for fwd+bwd',
        unit='attention forward-pass speedup vs PyTorch standard attention',
        hardware='NVIDIA T4',
        what=('FlashAttention (v1) on T4, batch size 12 with 12 attention heads; forward-only speedup stated in'
              ' text; fwd+bwd chart (seq 128-2048) has no printed values and the text says speedup is lower '
              'than on newer GPUs because T4 SRAM is 64 KB. FlashAttention-2 does not support Turing GPUs (the T4).'),
        source='Dao-AILab/flash-attention README, FlashAttention-1 era version',
        url='https://github.com/Dao-AILab/flash-attention/blob/6d48e14a6c2f551db96f0badc658a6279a929df3/README.md',
        where='Performance > T4 (assets/flashattn_speedup_t4.jpg, assets/flashattn_speedup_t4_fwd.jpg)',
        quote=('T4 SRAM is smaller than the newer GPUs (64 KB), so we see less speedup (we need to make the '
               'block sizes smaller, so we end up doing more R/W). ... We see speedups between 2.5x-4.5x on the '
               'forward pass.')),
    Figure(
        key='flashattention2_a100_fwd_bwd_tflops_hdim64',
        by='Dao-AILab/flash-attention',
        figure=('seq 512: PyTorch 36 vs FlashAttention-2 132; seq 8k: 46 vs 175; seq 16k: PyTorch OOM vs 176'),
        unit='TFLOPs/s (attention forward+backward)',
        hardware='A100 80GB SXM4 (as printed in the chart title)',
        what=("Attention fwd+bwd speed; 'Pytorch' is the repository benchmark's baseline, 'PyTorch standard "
              "attention' in the README's words. No causal mask, head dim 64, hidden dim 2048, batch = 16k/seqlen, "
              'FP16/BF16; also FlashAttention(v1) 91 and xformers 68 at seq 512. Values transcribed from bar '
              'labels printed in the figure image.'),
        source='Dao-AILab/flash-attention README (current), FlashAttention-2 benchmark figure',
        url='https://github.com/Dao-AILab/flash-attention/blob/main/assets/flash2_a100_fwd_bwd_benchmark.png',
        where="Performance > A100 > Speedup, panel '(a) Without causal mask, head dimension 64'",
        quote=('Attention forward + backward speed (A100 80GB SXM4) | 512: Pytorch 36, FlashAttention 91, '
               'xformers 68, FlashAttention Triton 90, FlashAttention-2 132 | 8k: Pytorch 46, FlashAttention-2 '
               '175 | 16k: Pytorch OOM, FlashAttention-2 176 [bar labels]')),
    Figure(
        key='flashattention2_h100_fwd_bwd_tflops_hdim64',
        by='Dao-AILab/flash-attention',
        figure=('seq 512: PyTorch 62 vs FlashAttention-2 215; seq 8k: 87 vs 294; seq 16k: PyTorch OOM vs 296'),
        unit='TFLOPs/s (attention forward+backward)',
        hardware='H100 80GB SXM5 (as printed in the chart title)',
        what=("Same benchmark on H100 ('Pytorch': the benchmark's PyTorch standard attention), no causal mask, "
              'head dim 64 (README states the parameters only for the '
              'A100 section). Values transcribed from bar labels printed in the figure image.'),
        source='Dao-AILab/flash-attention README (current), FlashAttention-2 benchmark figure',
        url='https://github.com/Dao-AILab/flash-attention/blob/main/assets/flash2_h100_fwd_bwd_benchmark.png',
        where="Performance > H100, panel '(a) Without causal mask, head dimension 64'",
        quote=('Attention forward + backward speed (H100 80GB SXM5) | 512: Pytorch 62, FlashAttention 157, '
               'FlashAttention-2 215 | 8k: Pytorch 87, FlashAttention 166, FlashAttention-2 294 | 16k: Pytorch '
               'OOM, FlashAttention-2 296 [bar labels]')),
    Figure(
        key='karpathy_gpt2_124m_flash_attention_130ms_to_96ms',
        by="Andrej Karpathy's lecture",
        figure='130 ms/iter -> 96 ms/iter',
        unit='milliseconds per training iteration',
        hardware='1x NVIDIA A100 (per the lecture transcript)',
        what=('GPT-2 124M training step (batch 16 x 1024, bf16 autocast + torch.compile already on) after '
              'switching attention to F.scaled_dot_product_attention(q, k, v, is_causal=True) (build-nanogpt '
              'commit 7ee630c).'),
        source=("Andrej Karpathy, 'Let's reproduce GPT-2 (124M)' YouTube lecture, chapter list in the video "
                'description'),
        url='https://youtu.be/l8pRSuU81PU',
        where='Video description chapters 01:48:15 and 02:00:18',
        quote=('01:48:15 torch.compile, Python overhead, kernel fusion, 130ms / 02:00:18 flash attention, 96ms')),
    Figure(
        key='dle_resnet50_a100_8gpu_strong_scaling',
        by='NVIDIA DeepLearningExamples',
        figure='TF32 7.72 x; mixed precision 6.72 x, 8 GPUs against one',
        unit="NVIDIA's 'Strong Scaling' column: throughput on 8 GPUs over 1 GPU, per-GPU batch fixed",
        hardware='NVIDIA DGX A100 (8x A100 80GB)',
        what=('ResNet-50 v1.5 training, torch DistributedDataParallel (image_classification/training.py wraps '
              'the model in DDP), 1 vs 8 GPUs: 938->7248 img/s TF32, 2470->16621 img/s AMP. Faster (AMP) steps '
              'scale less well.'),
        software='pytorch-21.03 NGC container',
        source=('NVIDIA DeepLearningExamples: ResNet50 v1.5 For PyTorch (README, repo snapshot commit 729963dd, '
                '2024-04-04)'),
        url='https://github.com/NVIDIA/DeepLearningExamples/blob/master/PyTorch/Classification/ConvNets/resnet50v1.5/README.md',
        where=("Training performance: NVIDIA DGX A100 (8x A100 80GB), row GPUs=8, columns 'TF32 Strong Scaling' "
               "/ 'Mixed Precision Strong Scaling'"),
        quote=('| 8 | 7248 img/s | 16621 img/s | 2.29 x | 7.72 x | 6.72 x | ~3 hours | ~5 hours | [whitespace '
               'collapsed]')),
    Figure(
        key='dle_resnet50_v100_8gpu_strong_scaling',
        by='NVIDIA DeepLearningExamples',
        figure='FP32 7.76 x; mixed precision 6.93 x, 8 GPUs against one',
        unit="NVIDIA's 'Strong Scaling' column: throughput on 8 GPUs over 1 GPU, per-GPU batch fixed",
        hardware='NVIDIA DGX-1 16GB (8x V100 16GB)',
        what='ResNet-50 v1.5 training with DDP, 1 vs 8 GPUs: 367->2855 img/s FP32, 1200->8322 img/s AMP.',
        software='pytorch-21.03 NGC container',
        source=('NVIDIA DeepLearningExamples: ResNet50 v1.5 For PyTorch (README, repo snapshot commit 729963dd, '
                '2024-04-04)'),
        url='https://github.com/NVIDIA/DeepLearningExamples/blob/master/PyTorch/Classification/ConvNets/resnet50v1.5/README.md',
        where='Training performance: NVIDIA DGX-1 16GB (8x V100 16GB), row GPUs=8',
        quote=('| 8 | 2855 img/s | 8322 img/s | 2.91 x | 7.76 x | 6.93 x | ~5 hours | ~12 hours | [whitespace '
               'collapsed]')),
    Figure(
        key='mosaic_mpt7b_a100_40gb_8_to_128_gpu_mfu',
        by='MosaicML llm-foundry',
        figure='MFU 50.92 % on 8 GPUs vs 50.14 % on 128 GPUs (3679 vs 3623 tokens/s/GPU)',
        unit='% model FLOPs utilization; tokens/s per GPU',
        hardware='A100 40GB with 1600 Gbps node-node interconnect (RoCE); 8 and 128 GPUs',
        what=('MPT-7B, seq len 2048, bf16, data-parallel weak scaling from 8 to 128 GPUs with near-constant '
              'per-GPU throughput. NOTE: sharded data parallel (FSDP FULL_SHARD, activation checkpointing), not'
              ' plain DDP.'),
        source=('mosaicml/llm-foundry: MPT Training Benchmarks (scripts/train/benchmarking/README.md, stored '
                'commit 061f2c7c)'),
        url='https://github.com/mosaicml/llm-foundry/blob/main/scripts/train/benchmarking/README.md',
        where=('Results > A100 40GB with 1600 Gbps node-node interconnect (RoCE), rows 7b / 2048 / 8 and 7b / '
               '2048 / 128'),
        quote=('| 7b | 2048 | 128 | a100_40gb | 50.14 | 66.85 | 1.564368E+16 | 18 | 1 | 2304 | 226 | 463749 | '
               '3623 | ... | 7b | 2048 | 8 | a100_40gb | 50.92 | 67.89 | 1.588704E+16 | 12 | 4 | 384 | 14 | '
               '29436 | 3679 | [abridged, whitespace collapsed]')),
    Figure(
        key='cuda_graphs_mlperf_maskrcnn_1p70x',
        by='the PyTorch blog',
        figure='1.70×',
        unit='end-to-end training speedup from CUDA graphs',
        hardware='272 GPUs (NVIDIA MLPerf v1.0 submission; GPU model not named in the post)',
        what=('MLPerf training v1.0 Mask R-CNN, mostly the ResNet backbone graphed, per-GPU batch size 1 (CPU '
              'launch overhead dominated).'),
        software='PyTorch CUDA graphs API (beta from PyTorch v1.10)',
        source=('Accelerating PyTorch with CUDA Graphs (PyTorch blog, Nguyen, Carilli, Eryilmaz, et al., Oct '
                '2021)'),
        url='https://pytorch.org/blog/accelerating-pytorch-with-cuda-graphs/',
        where='Example use cases > MLPerf v1.0 training workloads, Table 1',
        quote=('| Mask R-CNN                  | 272             | 1.70×                    | (Table 1. MLPerf '
               'training v1.0 performance improvement with PyTorch CUDA graph.)')),
    Figure(
        key='cuda_graphs_maskrcnn_backbone_31ms_to_6ms',
        by='the PyTorch blog',
        figure='31 ms -> 6 ms (5x) for the graphed portion; ~1.7x overall',
        unit='milliseconds per iteration of the graphed section; speedup factor',
        hardware='NVIDIA MLPerf v1.0 system (GPU model not named)',
        what=('Mask R-CNN backbone with per-GPU batch size 1, before vs after CUDA-graph capture; Nsight shows '
              'CPU at 100% and GPU mostly idle before graphing.'),
        source=('Accelerating PyTorch with CUDA Graphs (PyTorch blog, Nguyen, Carilli, Eryilmaz, et al., Oct '
                '2021)'),
        url='https://pytorch.org/blog/accelerating-pytorch-with-cuda-graphs/',
        where='Example use cases > Mask R-CNN',
        quote=('The graphed portion now runs in 6 ms instead of 31ms, a speedup of 5x. We did not graph the '
               'entire model, mostly just the resnet backbone, which resulted in an overall speedup of ~1.7x.')),
    Figure(
        key='cuda_graphs_mlperf_bert_1p12x',
        by='the PyTorch blog',
        figure='1.12×',
        unit='end-to-end training speedup from CUDA graphs',
        hardware='4096 GPUs (NVIDIA MLPerf v1.0; GPU model not named)',
        what=('MLPerf training v1.0 BERT at max scale, full model captured after removing CPU-GPU syncs and '
              'making shapes static.'),
        source=('Accelerating PyTorch with CUDA Graphs (PyTorch blog, Nguyen, Carilli, Eryilmaz, et al., Oct '
                '2021)'),
        url='https://pytorch.org/blog/accelerating-pytorch-with-cuda-graphs/',
        where='Example use cases > MLPerf v1.0 training workloads, Table 1; section BERT',
        quote=('| BERT                        | 4096            | 1.12×                    | ... CUDA graphs '
               'implementation results in a 1.12x performance boost for our max-scale BERT configuration.')),
    Figure(
        key='pytorch2_paper_inductor_geomean_a100',
        by="Ansel et al., PyTorch 2 (ASPLOS '24)",
        figure='2.27× inference, 1.41× training (geometric mean)',
        unit='geometric-mean speedup over PyTorch eager',
        hardware='NVIDIA A100 GPU (+ Intel Xeon 8275CL CPU)',
        what=('TorchInductor vs eager across 180+ models from TorchBench, HuggingFace and TIMM; training = one '
              'forward+backward step, optimizer excluded; 100 repetitions, 3 warm-up; max-autotune, freezing '
              'and cudagraphs enabled. Per-suite numbers are in Table 3 (image; not transcribed).'),
        software='CUDA 11.6; PyTorch nightly 8/30/2023',
        source=('Ansel et al., PyTorch 2: Faster Machine Learning Through Dynamic Python Bytecode Transformation '
                "and Graph Compilation (ASPLOS '24) - read via a public text copy of the paper"),
        url='https://doi.org/10.1145/3620665.3640366',
        where='Abstract; Section 6 Experimental Results (setup paragraph)',
        quote=('TorchInductor is able to provide a 2.27× inference and 1.41× training geometric mean speedup on '
               'an NVIDIA A100 GPU across 180+ real-world models ... Experiments were run on an NVIDIA A100 GPU,'
               ' CUDA 11.6, and an Intel Xeon 8275CL CPU.')),
    Figure(
        key='pytorch2_paper_dynamo_capture_overhead_lt5pct',
        by="Ansel et al., PyTorch 2 (ASPLOS '24)",
        figure='< 5 %',
        unit='runtime overhead of graph capture (geomean slowdown - 1) vs eager',
        hardware='NVIDIA V100 GPU',
        what=('TorchDynamo graph-capture overhead using the same kernels as eager (so only capture cost is '
              'measured), float32 TorchBench; Lazy Tensors is much worse.'),
        source=('Ansel et al., PyTorch 2: Faster Machine Learning Through Dynamic Python Bytecode Transformation '
                "and Graph Compilation (ASPLOS '24) - read via a public text copy of the paper"),
        url='https://doi.org/10.1145/3620665.3640366',
        where='Section 6.2 Overheads of Graph Capture (Table 2 caption + text)',
        quote=('While the overheads of TorchDynamo are less than 5%, Lazy Tensors adds a large amount of '
               'overhead. [Table 2 caption: Measured using float32 TorchBench on an NVIDIA V100 GPU.]')),
    Figure(
        key='pytorch2_getstarted_163_models_43pct_training',
        by='pytorch.org',
        figure='works on 93%; 43% faster training (21% float32, 51% AMP)',
        unit=('% of models compiling; average training speedup (reported as 0.75*AMP + 0.25*float32 weighted '
              'average)'),
        hardware=('NVIDIA A100 GPU (caveat on the page: lower speedups on desktop-class GPUs such as NVIDIA 3090)'),
        what=('torch.compile (default TorchInductor) on 163 unmodified open-source models (46 HuggingFace, 61 '
              'TIMM, 56 TorchBench), training, PyTorch 2.0 announcement benchmarks.'),
        software=('PyTorch 2.0 nightly binaries (pre-release; page says first stable 2.0 expected early March 2023)'),
        source=("PyTorch 2.x 'Get Started' page (pytorch.org/get-started/pytorch-2.0; source "
                '_get_started/pytorch.md in pytorch/pytorch.github.io)'),
        url='https://pytorch.org/get-started/pytorch-2.0/',
        where="Overview > 'PyTorch 2.x: faster, more pythonic and as dynamic as ever'",
        quote=('Across these 163 open-source models `torch.compile` works 93% of time, and the model runs 43% '
               'faster in training on an NVIDIA A100 GPU. At Float32 precision, it runs 21% faster on average '
               'and at AMP Precision it runs 51% faster on average.')),
    Figure(
        key='nanogpt_torch_compile_250ms_to_135ms',
        by='karpathy/nanoGPT',
        figure='~250 ms/iter -> 135 ms/iter',
        unit='milliseconds per training iteration',
        hardware='not stated in the sentence',
        what=('nanoGPT train.py (GPT-2 124M config) with vs without torch.compile(); the sentence does not '
              "state GPU or batch size (the README's reproduction setup is 8X A100 40GB)."),
        software='PyTorch 2.0 nightly (as of Dec 29, 2022)',
        source='karpathy/nanoGPT README',
        url='https://github.com/karpathy/nanoGPT#efficiency-notes',
        where='README, efficiency notes paragraph',
        quote=('The improvement from the one line of code is noticeable, e.g. cutting down iteration time from '
               '~250ms / iter to 135ms / iter. Nice work PyTorch team!')),
    Figure(
        key='karpathy_gpt2_124m_torch_compile_300ms_to_130ms',
        by="Andrej Karpathy's lecture",
        figure='300 ms/iter -> 130 ms/iter',
        unit='milliseconds per training iteration',
        hardware='1x NVIDIA A100 (per the lecture transcript)',
        what=('GPT-2 124M, batch 16 x 1024, bf16 autocast already on, adding torch.compile (kernel fusion, less'
              ' Python overhead) in the lecture.'),
        source=("Andrej Karpathy, 'Let's reproduce GPT-2 (124M)' YouTube lecture, chapter list in the video "
                'description'),
        url='https://youtu.be/l8pRSuU81PU',
        where='Video description chapters 01:39:38 and 01:48:15',
        quote=('01:39:38 float16, gradient scalers, bfloat16, 300ms / 01:48:15 torch.compile, Python overhead, '
               'kernel fusion, 130ms')),
    Figure(
        key='torchtune_expandable_segments_a100_qlora',
        by='a torchtune issue',
        figure='16.39 GiB -> 10.831 GiB (expandable_segments); 21.6 -> 20.56 s/it',
        unit='GiB peak GPU memory; seconds per iteration',
        hardware='A100 80GB (1 GPU)',
        what=('torchtune lora_finetune_single_device, llama3/8B_qlora_single_device config, measured at 20 '
              'steps, with vs without PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.'),
        source=("meta-pytorch/torchtune issue #1185 'expandable_segments with PYTORCH_CUDA_ALLOC_CONF reduces "
                "VRAM' (maintainer-org repo, user measurement)"),
        url='https://github.com/meta-pytorch/torchtune/issues/1185',
        where='Issue description (winglian, 2024-07-16)',
        quote=('baseline: 16.39GiB @ 21.6sec/it / w/ compile: 16.63GiB @ 8.5sec/it / w/ expandable_segments: '
               '10.831GiB @ 20.56sec/it / w/ compile + expandable_segments: 10.919GiB @ 8.5sec/it')),
    Figure(
        key='cp2k_libtorch_expandable_segments_a40',
        by='a cp2k pull request',
        figure='22,686 MiB -> 16,320 MiB total peak (-6,366 MiB, 28.1%)',
        unit='MiB LibTorch CUDA process peak memory',
        hardware='Terok, 2 x NVIDIA A40',
        what=('CP2K (a chemistry code) running a LibTorch model in 2 processes (its H2O32 benchmark, 3 SCF '
              'steps), expandable segments disabled vs enabled; its tensor sizes vary from chunk to chunk.'),
        software='LibTorch (version not stated)',
        source=("cp2k/cp2k PR #5672 'Enable expandable LibTorch CUDA segments by default' (third-party "
                'measurement)'),
        url='https://github.com/cp2k/cp2k/pull/5672',
        where='PR description > Benchmark',
        quote=('| Explicitly disabled | 12,394 MiB | 10,292 MiB | 22,686 MiB | ... | Explicitly enabled | 8,926 '
               'MiB | 7,394 MiB | 16,320 MiB | The default therefore reduces the measured LibTorch CUDA process '
               'peak by 6,366 MiB, or 28.1%.')),
    Figure(
        key='nanogpt_gpt2_124m_4_days_8xa100_40gb',
        by='karpathy/nanoGPT',
        figure='about 4 days',
        unit='wall-clock training time',
        hardware='single 8XA100 40GB node',
        what=('nanoGPT train.py reproducing GPT-2 (124M) on OpenWebText with PyTorch DDP, to val loss ~2.85.'),
        software='PyTorch 2.0 (torch.compile) per README',
        source='karpathy/nanoGPT README',
        url='https://github.com/karpathy/nanoGPT',
        where="README intro and 'reproducing GPT-2' section",
        quote=('the file `train.py` reproduces GPT-2 (124M) on OpenWebText, running on a single 8XA100 40GB node'
               ' in about 4 days of training.')),
    Figure(
        key='llmc_gpt2_124m_90min_8xa100_80gb_60pct_mfu',
        by='karpathy/llm.c',
        figure='~90 minutes; up to ~60% MFU; ~$20',
        unit='wall-clock time; model FLOPs utilization; USD',
        hardware='one 8X A100 80GB SXM node',
        what=('llm.c (C/CUDA) GPT-2 124M on 10B FineWeb tokens. Text read as quoted verbatim from discussion '
              '#481 in a Reddit post mirror, not on GitHub directly.'),
        software='llm.c (CUDA, mixed precision)',
        source=("karpathy/llm.c Discussion #481 'Reproducing GPT-2 (124M) in llm.c in 90 minutes for $20' (read "
                'via r/mlscaling quote mirror)'),
        url='https://github.com/karpathy/llm.c/discussions/481',
        where='Discussion #481 opening text',
        quote=('With llm.c, which is quite efficient at up to ~60% model flops utilization, reproducing this '
               'model on one 8X A100 80GB SXM node takes ~90 minutes. For example, on Lambda this node goes for '
               '~$14/hr, so the total cost of reproducing this model today is about $20.')),
    Figure(
        key='llmc_gpt2_1p5b_24h_8xh100',
        by='karpathy/llm.c',
        figure='24 hours; $672',
        unit='wall-clock time; USD',
        hardware='a single 8XH100 node',
        what=('llm.c reproduction of the full GPT-2 1558M model (read via a github.com proxy mirror of the '
              'discussion).'),
        software='llm.c (CUDA, cuBLAS, cuDNN, FlashAttention)',
        source='karpathy/llm.c Discussion #677 (GPT-2 1.5B reproduction)',
        url='https://github.com/karpathy/llm.c/discussions/677',
        where='Discussion #677 opening paragraph',
        quote=('we can reproduce this model on a single 8XH100 node in 24 hours, and for $672, which is quite '
               'incredible.')),
    Figure(
        key='mosaic_mpt125m_a100_80gb_mfu',
        by='MosaicML llm-foundry',
        figure='MFU 44.79 %; 142,830 tokens/s/GPU (1,142,641 tokens/s on 8 GPUs)',
        unit='% MFU; tokens/second',
        hardware='8 x A100 80GB (1600 Gbps RoCE node-node interconnect)',
        what=('MPT-125M (GPT-style), seq len 2048, amp_bf16, FSDP FULL_SHARD, no activation checkpointing, '
              'global batch 640 sequences; MFU formula includes attention FLOPs (given in the README).'),
        software='llm-foundry / Composer (version not stated in the table)',
        source=('mosaicml/llm-foundry: MPT Training Benchmarks (scripts/train/benchmarking/README.md, stored '
                'commit 061f2c7c)'),
        url='https://github.com/mosaicml/llm-foundry/blob/main/scripts/train/benchmarking/README.md',
        where=('Results > A100 80GB with 1600 Gbps node-node interconnect (RoCE), row 125m / 2048 / 8 '
               '(GlobalBatchSize 640)'),
        quote=('| 125m | 2048 | 8 | a100_80gb | 44.79 | 44.79 | 1.397395E+14 | 40 | 2 | 640 | 557 | 1142641 | '
               '142830 | 1310720 | amp_bf16 | DEFAULT | FULL_SHARD | False | False | 125311488 | [whitespace '
               'collapsed]')),
    Figure(
        key='mosaic_mpt1b_h100_vs_a100_mfu',
        by='MosaicML llm-foundry',
        figure='A100 80GB: MFU 59.86 %, 20,513 tok/s/GPU; H100 80GB: MFU 41.82 %, 45,455 tok/s/GPU',
        unit='% MFU; tokens/s per GPU',
        hardware='8 x A100 80GB vs 8 x H100 80GB',
        what=('MPT-1B, seq 2048, 8 GPUs, bf16 AMP, FSDP: H100 gives ~2.2x the tokens/s (ratio derived here: '
              '45455/20513) but a much lower MFU, i.e. peak FLOPs grew faster than achieved FLOPs.'),
        source=('mosaicml/llm-foundry: MPT Training Benchmarks (scripts/train/benchmarking/README.md, stored '
                'commit 061f2c7c)'),
        url='https://github.com/mosaicml/llm-foundry/blob/main/scripts/train/benchmarking/README.md',
        where='Results > H100 80GB BF16 row 1b/2048/8; A100 80GB ... (RoCE) row 1b/2048/8',
        quote=('| 1b | 2048 | 8 | h100_80gb | 41.82 | 41.82 | 4.138134E+14 | 14 | 1 | 112 | 177 | 363645 | 45455'
               ' | ... | 1b | 2048 | 8 | a100_80gb | 59.86 | 59.86 | 1.867501E+14 | 14 | 4 | 448 | 80 | 164109 |'
               ' 20513 | [abridged]')),
    Figure(
        key='flashattention2_readme_gpt_training_225tflops_72pct_mfu',
        by='Dao-AILab/flash-attention',
        figure='up to 225 TFLOPs/sec per A100 = 72% MFU; 3-5x vs HuggingFace baseline',
        unit='TFLOPs/s per GPU; % model FLOPs utilization',
        hardware='A100 (per-GPU figure; training node is 8 x A100 80GB SXM4 per training/README)',
        what=("End-to-end GPT training with the repo's optimized GPT implementation (FlashAttention-2 + fused "
              'MLP/LayerNorm/cross-entropy/rotary), no activation checkpointing. Earlier (FA1-era) README '
              'printed 189 TFLOPs/sec, 60.6% MFU.'),
        source='Dao-AILab/flash-attention README (current)',
        url='https://github.com/Dao-AILab/flash-attention#full-model-code-and-training-script',
        where="'Full model code and training script' section",
        quote=('Overall this speeds up training by 3-5x compared to the baseline implementation from '
               'Huggingface, reaching up to 225 TFLOPs/sec per A100, equivalent to 72% model FLOPs utilization '
               "(we don't need any activation checkpointing).")),
    Figure(
        key='flashattention_training_gpt3_125m_tokens_per_sec',
        by='Dao-AILab/flash-attention',
        figure='1310k tokens/sec; 0.21 hours per billion tokens',
        unit='tokens/second (whole node)',
        hardware='one node with 8 x A100 80GB SXM4 80GB (400W) with NVLink',
        what=('GPT3-125M training (seq len 2048 per section heading), batch 0.5M tokens, with FlashAttention, '
              'bf16.'),
        source='Dao-AILab/flash-attention training/README.md',
        url='https://github.com/Dao-AILab/flash-attention/blob/main/training/README.md',
        where=("Training speed > table 'Model | Batch size (tokens) | Through put (tokens/sec) | Hours / 1B "
               "tokens'"),
        quote=('We measure the wallclock training speed on one node with 8 x A100 80GB SXM4 80GB (400W) with '
               'NVLink. ... | GPT3-125M | 0.5M | 1310k | 0.21 | [whitespace collapsed]')),
    Figure(
        key='meta_maiprof_sm_util_9pct_tensorcore_0',
        by='the PyTorch blog (Meta)',
        figure='SM utilization 9.1 %; Tensor Core utilization 0',
        unit='percent',
        hardware='not stated (Meta production GPU hosts)',
        what=("DCGM/NVML-derived metrics for a production 'protection' PyTorch model before optimization "
              '(fixes: num_worker_threads, 2x batch, AMP, multi-tensor optimizer). GPU model not stated.'),
        source=('Performance Debugging of Production PyTorch Models at Meta (PyTorch blog, CK Luk, Lei Tian)'),
        url='https://pytorch.org/blog/performance-debugging-of-production-pytorch-models-at-meta/',
        where='2.1 Performance Bottlenecks > Step 3 (Figure 4: GPU performance metrics in MAIProf)',
        quote=('The streaming multiprocessor (SM) runs the model’s CUDA kernels. Its utilization [1] is 9.1%, '
               'indicating that the parallel compute units on the GPU are not well utilized. - Tensor Core '
               'utilization is 0 ... - Max GPU memory utilization is 47.13%')),
    Figure(
        key='meta_maiprof_gpu_idle_more_than_half_data_loading',
        by='the PyTorch blog (Meta)',
        figure='the GPU is idle for more than half of the training time',
        unit='fraction of training wall-clock time',
        hardware='not stated (Meta production GPU hosts)',
        what=('Production PyTorch model whose dataset does not fit in CPU memory: a new sub-dataset is read '
              'from disk every 10 epochs and the GPU is totally idle meanwhile; first fix listed is tuning '
              'num_worker_threads.'),
        source=('Performance Debugging of Production PyTorch Models at Meta (PyTorch blog, CK Luk, Lei Tian)'),
        url='https://pytorch.org/blog/performance-debugging-of-production-pytorch-models-at-meta/',
        where='2.1 Performance Bottlenecks > Step 1 and Step 2 (Figures 2-3)',
        quote=('The first performance anomaly we noticed in Figure 2 is the pattern: “GPU-idle, GPU-active, '
               'GPU-idle, GPU-active …” throughout the training. Overall, the GPU is idle for more than half of '
               'the training time')),
)

_BY_KEY = {f.key: f for f in FIGURES}


def get(key: str) -> Figure:
    """The entry `key`; a missing key is one clear error naming the keys that exist."""
    try:
        return _BY_KEY[key]
    except KeyError:
        raise KeyError(f"No published figure has the key {key!r}; the keys are: {', '.join(_BY_KEY)}.") from None


def show(*keys: str) -> str:
    """The entries `keys`, each with what was measured and where it was read, for printing."""
    return "\n".join(str(get(k)) for k in keys)


def elsewhere(notebook: str, prefixes: tuple[str, ...] = (), keys: Sequence[str] = (), *,
              exclude: tuple[str, ...] = ()) -> str:
    """What a GPU does in a section this machine cannot run, for printing: first the rows of the
    recorded reference run of `notebook` (``results/``: this course's code on a GPU) whose names
    start with one of `prefixes` and contain none of `exclude`, then the published figures `keys`,
    each labelled as measured elsewhere; one line saying so when there is neither."""
    rows = report.reference_rows(notebook, prefixes, exclude) if prefixes else []
    lines = [report.reference_header(notebook), *rows] if rows else []
    if keys:
        lines += ["figures published elsewhere, not measured here:",
                  *("  " + str(get(k)).replace("\n", "\n  ") for k in keys)]
    return "\n".join(lines) or "(no reference GPU run in results/ and no published figure answers this yet)"
