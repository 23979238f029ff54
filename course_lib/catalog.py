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


NOTEBOOKS = (
    Entry("00_setup_check", "setup check", 0, "everything"),
    Entry("01_gpu_vs_cpu", "GPU vs CPU", 1, "CPU matmul rates vs measured peak; no async, H→D or TF32"),
    Entry("02_first_cnn", "first CNN on GPU", 1, "training + DataLoader workers; no pinned-memory/channels_last gains"),
    Entry("03_mixed_precision", "mixed precision (AMP)", 1, "bf16 autocast on CPU, fp16 range demo; no tensor-core speed-up"),
    Entry("04_grad_accumulation", "gradient accumulation", 0, "everything (memory via profiler events)"),
    Entry("05_data_parallel", "DataParallel", 2, "the mechanics, without scaling numbers"),
    Entry("06_ddp", "DistributedDataParallel (+ FSDP)", 2, "2 gloo ranks on CPU: equivalence, collectives; no scaling"),
    Entry("07_attention", "attention from scratch", 0, "everything except GPU-only SDPA backends"),
    Entry("08_transformer", "Transformer training", 1, "a small GPT on CPU; no MFU on tensor cores"),
    Entry("09_memory", "memory monitoring", 1, "profiler memory events; no CUDA snapshots"),
    Entry("10_compile_and_profile", "torch.compile and the profiler", 1, "CPU profiler traces; compile is slow and gives no speed-up on CPU"),
)


def path_of(entry: Entry, folder: Path = NOTEBOOK_DIR) -> Path:
    """Where the notebook file of `entry` lives."""
    return folder / f"{entry.stem}.ipynb"


def readiness(info: DeviceInfo, folder: Path = NOTEBOOK_DIR) -> list[tuple[str, str, str]]:
    """(notebook, status, what this machine can demonstrate) for every notebook."""
    rows = []
    for e in NOTEBOOKS:
        if not path_of(e, folder).exists():
            rows.append((e.stem, "not written yet", "-"))
        elif info.gpu_count >= e.gpus:
            rows.append((e.stem, "full", "everything"))
        else:
            need = f"needs {e.gpus} GPU{'s' if e.gpus > 1 else ''} for the rest"
            rows.append((e.stem, "partial", f"{e.on_less} ({need})"))
    return rows
