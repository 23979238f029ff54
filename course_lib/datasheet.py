"""NVIDIA datasheet figures for common GPUs, with the document each row comes from.

These are the vendor's *peak* rates: the most the chip can do at its boost clock with
every unit busy, as printed in NVIDIA's datasheets and architecture whitepapers. They are
not measurements: no real program reaches them, and a card that runs hot or power-capped
runs below its boost clock. The course measures what this machine does; this table is
what a learner without that GPU can read instead, labelled "datasheet", never passed off
as a measurement.

Tensor-core rates here are DENSE. Since Ampere, datasheets headline the rate with 2:4
structured sparsity (marked "*" there, "one-half lower without sparsity"), twice the dense
rate; ordinary training uses dense matrices, so those starred figures are halved here.
Each row's comment quotes what the document prints. For GeForce cards the whitepaper lists
fp16 with fp16 accumulate and with fp32 accumulate; the fp32-accumulate rate is the one
PyTorch's autocast runs at, and is the one taken.

`memory_gib` (kept under that name for existing callers) holds the capacity in GB as the
document prints it ("80GB"); the table labels it "memory GB". The total torch.cuda reports,
in GiB, is lower (GiB are larger units, and the driver reserves some memory).
Compute capability is the one NVIDIA lists for the chip (developer.nvidia.com/cuda-gpus).

Model FLOPs utilisation: MFU = achieved FLOP/s / datasheet peak, for the precision the
model runs in (`peak_tflops(spec, "bf16")` for a bf16 autocast run).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PRECISIONS = ("fp32", "tf32", "bf16", "fp16")

_A100 = ("NVIDIA A100 Tensor Core GPU datasheet",
         "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
         "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf")
_H100 = ("NVIDIA H100 Tensor Core GPU datasheet",
         "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet")
_H200 = ("NVIDIA H200 Tensor Core GPU, specifications",
         "https://www.nvidia.com/en-us/data-center/h200/")
_L4 = ("NVIDIA L4 Tensor Core GPU, specifications",
       "https://www.nvidia.com/en-us/data-center/l4/")
_T4 = ("NVIDIA T4 Tensor Core GPU datasheet",
       "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/"
       "t4-tensor-core-datasheet-951643.pdf")
_ADA = ("NVIDIA Ada GPU Architecture whitepaper, Appendix A (GeForce RTX 4090)",
        "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf")


@dataclass(frozen=True)
class Spec:
    """One GPU's datasheet row: peak rates in TFLOP/s (dense), memory capacity in GB (as
    the datasheet prints it) and bandwidth in GB/s."""

    name: str
    architecture: str
    capability: str  # CUDA compute capability, "9.0" for Hopper
    memory_gib: float  # GB, as the datasheet prints it (the name is historical)
    fp32_tflops: float  # CUDA cores, no tensor cores
    tf32_tflops: float | None  # None: no TF32 tensor cores (before Ampere)
    bf16_tflops: float | None  # None: no bf16 tensor cores (before Ampere)
    fp16_tflops: float  # tensor cores, fp32 accumulate
    mem_bw_gbs: float
    source_title: str
    source_url: str
    aliases: tuple[str, ...]  # word sequences of torch.cuda.get_device_name() that mean this GPU

    @property
    def source(self) -> str:
        return f"{self.source_title}, {self.source_url}"


SPECS: tuple[Spec, ...] = (
    # Datasheet (40GB SXM column): FP32 19.5 | TF32 156 / 312* | BF16, FP16 312 / 624* | 1,555GB/s
    Spec("NVIDIA A100 SXM4 40GB", "Ampere", "8.0", 40, 19.5, 156, 312, 312, 1555, *_A100,
         aliases=("a100 sxm4 40gb", "a100 sxm 40gb")),
    # Datasheet (80GB SXM column): as the 40GB SXM, HBM2e at 2,039GB/s
    Spec("NVIDIA A100 SXM4 80GB", "Ampere", "8.0", 80, 19.5, 156, 312, 312, 2039, *_A100,
         aliases=("a100 sxm4 80gb", "a100 sxm 80gb")),
    # Datasheet (80GB PCIe column): same rates, HBM2e at 1,935GB/s
    Spec("NVIDIA A100 PCIe 80GB", "Ampere", "8.0", 80, 19.5, 156, 312, 312, 1935, *_A100,
         aliases=("a100 80gb pcie", "a100 pcie 80gb")),
    # Datasheet (H100 SXM): FP32 67 | TF32 989* | BF16, FP16 1,979* | 3.35TB/s; * = sparsity, halved
    Spec("NVIDIA H100 SXM5 80GB", "Hopper", "9.0", 80, 67, 989 / 2, 1979 / 2, 1979 / 2, 3350, *_H100,
         aliases=("h100 80gb hbm3", "h100 sxm5", "h100 sxm")),
    # Datasheet (H100 PCIe): FP32 51 | TF32 756* | BF16, FP16 1,513* | 2TB/s; * = sparsity, halved
    Spec("NVIDIA H100 PCIe 80GB", "Hopper", "9.0", 80, 51, 756 / 2, 1513 / 2, 1513 / 2, 2000, *_H100,
         aliases=("h100 pcie",)),
    # Specifications (H200 SXM): FP32 67 | TF32 989* | BF16, FP16 1,979* | 141GB, 4.8TB/s
    Spec("NVIDIA H200 SXM 141GB", "Hopper", "9.0", 141, 67, 989 / 2, 1979 / 2, 1979 / 2, 4800, *_H200,
         aliases=("h200", "h200 sxm")),
    # Specifications: FP32 30.3 | TF32 120* | BF16, FP16 242* | 24GB, 300GB/s; * = sparsity, halved
    Spec("NVIDIA L4", "Ada Lovelace", "8.9", 24, 30.3, 120 / 2, 242 / 2, 242 / 2, 300, *_L4,
         aliases=("l4",)),
    # Datasheet: Single-Precision 8.1 | Mixed-Precision (FP16/FP32) 65 | 16 GB GDDR6, 300 GB/sec.
    # Turing: no TF32, no bf16 tensor cores; no sparsity, so 65 is dense.
    Spec("NVIDIA T4", "Turing", "7.5", 16, 8.1, None, None, 65, 300, *_T4,
         aliases=("t4", "tesla t4")),
    # Whitepaper: FP32 82.6 | TF32 Tensor 82.6/165.2 | FP16 and BF16 Tensor with FP32 accumulate
    # 165.2/330.4 (dense/sparse) | 24 GB GDDR6X, 1008 GB/sec
    Spec("NVIDIA GeForce RTX 4090", "Ada Lovelace", "8.9", 24, 82.6, 82.6, 165.2, 165.2, 1008, *_ADA,
         aliases=("rtx 4090",)),
)

# Names that contain a listed GPU's words but are another part with other figures: a
# longer match here means "not in the table" (lookup gives None).
_OTHER_PARTS = ("h200 nvl", "rtx 4090 d", "rtx 4090 laptop")


def _words(name: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", name.lower())


def _contains(words: list[str], phrase: str) -> bool:
    p = phrase.split()
    return any(words[i:i + len(p)] == p for i in range(len(words) - len(p) + 1))


def lookup(device_name: str) -> Spec | None:
    """The row for a torch.cuda.get_device_name() string; None for GPUs not listed and CPUs.

    Matching is on whole words, case-insensitive; the longest matching alias wins, so
    'NVIDIA A100-SXM4-80GB' finds the 80GB SXM row, not the 40GB one.
    """
    words = _words(device_name)
    candidates = [(len(a.split()), s) for s in SPECS for a in s.aliases if _contains(words, a)]
    candidates += [(len(a.split()), None) for a in _OTHER_PARTS if _contains(words, a)]
    if not candidates:
        return None
    return max(candidates, key=lambda c: (c[0], c[1] is None))[1]


def peak_tflops(spec: Spec, precision: str) -> float | None:
    """Datasheet peak in TFLOP/s for 'fp32', 'tf32', 'bf16' or 'fp16'; None if the GPU lacks it."""
    if precision not in PRECISIONS:
        raise ValueError(f"Unknown precision {precision!r}: use one of {', '.join(PRECISIONS)}.")
    return getattr(spec, f"{precision}_tflops")


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:g}"


def table(rows: tuple[Spec, ...] = SPECS) -> str:
    """Plain-text table of `rows`, sources as numbered notes below it."""
    sources = list(dict.fromkeys(r.source for r in rows))
    head = ("GPU", "arch", "CC", "memory GB", "memory GB/s", "fp32 TFLOP/s", "tf32 TFLOP/s",
            "bf16 TFLOP/s", "fp16 TFLOP/s", "source")
    body = [(r.name, r.architecture, r.capability, _fmt(r.memory_gib), _fmt(r.mem_bw_gbs),
             _fmt(r.fp32_tflops), _fmt(r.tf32_tflops), _fmt(r.bf16_tflops), _fmt(r.fp16_tflops),
             f"[{sources.index(r.source) + 1}]") for r in rows]
    widths = [max(len(str(c)) for c in col) for col in zip(head, *body)]

    def line(cells):
        return "  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    out = ["NVIDIA datasheet figures, not measurements; dense tensor-core rates "
           "(sparsity figures halved), fp16/bf16 with fp32 accumulate, at boost clock",
           line(head), line(["-" * w for w in widths])]
    out += [line(b) for b in body]
    out += [f"[{i}] {s}" for i, s in enumerate(sources, 1)]
    return "\n".join(out)
