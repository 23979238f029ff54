"""The course's notebooks and what each needs, for the readiness table."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from course_lib.device import DeviceInfo

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"


@dataclass(frozen=True)
class Entry:
    """One notebook: file stem, title, GPUs for the full demonstration, what CPU still shows."""

    stem: str
    title: str
    gpus: int  # GPUs needed to show everything (0: CPU shows it all)
    on_less: str  # what a machine with fewer GPUs still demonstrates


# `on_less` says what a machine with fewer GPUs CAN show (what is measured there, and what
# needs the GPU), never how a measurement will come out: the run says that.
NOTEBOOKS = (
    Entry("00_setup_check", "setup check", 0, "everything"),
    Entry("01_gpu_vs_cpu", "GPU vs CPU", 1,
          "CPU matmul rate vs size, bf16 vs fp32 measured; asynchronous timing, host↔device "
          "copies and TF32 need a GPU (datasheet figures shown instead)"),
    Entry("02_first_cnn", "first CNN on GPU", 1,
          "training, DataLoader workers, channels_last and bf16 measured on the CPU; pinned "
          "memory and non_blocking copies need a GPU"),
    Entry("03_mixed_precision", "mixed precision (AMP)", 1,
          "fp32, bf16 and fp16+GradScaler training measured on the CPU, fp16 range demo; "
          "tensor-core speed needs a GPU"),
    Entry("04_grad_accumulation", "gradient accumulation", 0, "everything (memory via profiler events)"),
    Entry("05_data_parallel", "DataParallel", 2,
          "the mechanics (scatter, replicate, gather); scaling needs 2 GPUs"),
    Entry("06_ddp", "DistributedDataParallel (+ FSDP)", 2,
          "2 gloo ranks on the CPU: equivalence, collectives; NCCL and scaling need 2 GPUs"),
    Entry("07_attention", "attention from scratch", 1,
          "naive attention against SDPA (time and memory) and the CPU's flash and math kernels "
          "measured; the flash, memory-efficient and cuDNN GPU kernels need a GPU"),
    Entry("08_transformer", "Transformer training", 1,
          "a small GPT trained on the CPU, eager and compiled, MFU against the CPU's measured "
          "peak; a larger GPT, tensor cores and datasheet MFU need a GPU"),
    Entry("09_memory", "memory monitoring", 1,
          "per-phase peaks, the estimate, out-of-memory and the largest batch, checkpointing and the "
          "timeline measured on the CPU (profiler memory events); the caching allocator, empty_cache, "
          "expandable segments and allocator snapshots need a GPU"),
    Entry("10_compile_and_profile", "torch.compile and the profiler", 1,
          "a step's profile by category, hidden syncs, torch.compile (default mode) with a graph "
          "break, and the roofline measured on the CPU; GPU kernel timelines, "
          "set_sync_debug_mode and CUDA graphs (reduce-overhead) need a GPU"),
)


def path_of(entry: Entry, folder: Path = NOTEBOOK_DIR) -> Path:
    """Where the notebook file of `entry` lives."""
    return folder / f"{entry.stem}.ipynb"


FULL, PARTIAL, MISSING = STATUSES = ("full", "partial", "not written yet")  # readiness's statuses


def readiness(info: DeviceInfo, folder: Path = NOTEBOOK_DIR) -> list[tuple[str, str, str]]:
    """(notebook, status, what this machine can demonstrate) for every notebook."""
    rows = []
    for e in NOTEBOOKS:
        if not path_of(e, folder).exists():
            rows.append((e.stem, MISSING, "-"))
        elif info.gpu_count >= e.gpus:
            rows.append((e.stem, FULL, "everything"))
        else:  # on_less names what this machine shows and what needs the GPUs
            rows.append((e.stem, PARTIAL, e.on_less))
    return rows
