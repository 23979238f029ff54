"""Which device to use, what the hardware is, and what it is missing."""

from __future__ import annotations

import os
import platform
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Iterator

import torch
import torch.distributed as dist


class NotEnoughGPUs(RuntimeError):
    """A demonstration needs more CUDA GPUs than this machine has."""


@dataclass
class DeviceInfo:
    """What this machine offers to the course."""

    name: str
    kind: str  # "cuda" or "cpu"
    gpu_count: int
    memory_gib: float | None  # GPU memory of device 0; None on CPU
    capability: str | None  # "9.0" for Hopper; None on CPU
    bf16: bool  # bf16 matmuls supported natively (CPU: emulated, still True)
    tf32: bool  # TF32 tensor cores (Ampere, capability >= 8.0)
    cpu_threads: int
    torch: str
    cuda: str | None
    nccl: bool
    gloo: bool
    python: str

    def rows(self) -> list[tuple[str, str]]:
        """(field, value) pairs for printing as a table."""
        return [(k, "-" if v is None else str(v)) for k, v in asdict(self).items()]


def gpu_count() -> int:
    """CUDA GPUs PyTorch can use here (0 without CUDA)."""
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def pick(prefer: torch.device | str | None = None) -> torch.device:
    """The device to train on: `prefer` if given, else CUDA when available, else CPU.

    A CUDA device that is not there ('cuda' without a GPU, 'cuda:7' on a one-GPU
    machine) raises :class:`NotEnoughGPUs` naming the devices that do exist.
    """
    if not prefer:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(prefer)
    except RuntimeError:
        raise ValueError(f"Unknown device {str(prefer)!r}: use 'cpu', 'cuda' or 'cuda:N'.") from None
    if dev.type == "cuda":
        have = gpu_count()
        if have == 0:
            raise NotEnoughGPUs("You asked for CUDA but PyTorch sees no GPU here; use 'cpu'.")
        if dev.index is not None and dev.index >= have:
            names = "cuda:0" if have == 1 else f"cuda:0 to cuda:{have - 1}"
            raise NotEnoughGPUs(f"{dev} does not exist here: PyTorch sees {have} "
                                f"GPU{'s' if have > 1 else ''} ({names}).")
    return dev


def label(device: torch.device | str) -> str:
    """The hardware name for a device: 'NVIDIA H100 80GB HBM3' or 'cpu (2 threads)'."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu ({torch.get_num_threads()} threads)"


def sync(device: torch.device | str) -> None:
    """Wait until queued work on `device` has finished (no-op on CPU)."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def cpuinfo(path: str | os.PathLike = "/proc/cpuinfo") -> dict[str, str]:
    """The first processor's fields of a Linux ``/proc/cpuinfo`` ({} where it cannot be read).

    ``cpuinfo()["model name"]`` → 'AMD EPYC 9B14'; ``cpuinfo()["flags"]`` → 'fpu vme … avx512_bf16'.
    """
    fields: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    if fields:  # a blank line ends the first processor's block
                        break
                    continue
                key, sep, value = line.partition(":")
                if sep:
                    fields.setdefault(key.strip(), value.strip())
    except (OSError, UnicodeDecodeError):
        return {}
    return fields


def cpu_name(path: str | os.PathLike = "/proc/cpuinfo") -> str:
    """The CPU model, e.g. 'AMD EPYC 9B14' (Linux), else what the platform reports."""
    return cpuinfo(path).get("model name") or platform.processor() or platform.machine() or "cpu"


def cpu_flags(path: str | os.PathLike = "/proc/cpuinfo") -> list[str]:
    """The instruction-set flags the CPU reports ('flags' on x86, 'Features' on Arm; [] if unknown)."""
    info = cpuinfo(path)
    return (info.get("flags") or info.get("Features") or "").split()


NEW_TF32_API = hasattr(torch.backends.cuda.matmul, "fp32_precision")  # PyTorch >= 2.9


@contextmanager
def tf32(enabled: bool, *, deterministic: bool = False) -> Iterator[None]:
    """TF32 on or off for CUDA matmuls *and* cuDNN convolutions inside the block.

    TF32 runs fp32 matmuls and convolutions on tensor cores (Ampere and newer) with a
    10-bit mantissa. The switches are ``torch.backends.cuda.matmul.fp32_precision`` and
    ``torch.backends.cudnn.conv.fp32_precision`` (``"tf32"`` or ``"ieee"``) where this
    PyTorch has them (2.9 on), else the legacy ``allow_tf32`` flags. ``deterministic=True``
    also makes cuDNN pick deterministic algorithms (``cudnn.deterministic=True,
    cudnn.benchmark=False``), for exact fp32 comparisons. Every switch is restored on exit,
    also after an exception. No effect on CPU results. (Do not mix the two APIs in one
    program: PyTorch then refuses to report the global matmul precision.)
    """
    b = torch.backends
    if NEW_TF32_API:
        saved = (b.cuda.matmul.fp32_precision, b.cudnn.conv.fp32_precision)
        b.cuda.matmul.fp32_precision = b.cudnn.conv.fp32_precision = "tf32" if enabled else "ieee"
    else:
        saved = (b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32)
        b.cuda.matmul.allow_tf32 = b.cudnn.allow_tf32 = enabled
    saved_cudnn = (b.cudnn.deterministic, b.cudnn.benchmark)
    if deterministic:
        b.cudnn.deterministic, b.cudnn.benchmark = True, False
    try:
        yield
    finally:
        if NEW_TF32_API:
            b.cuda.matmul.fp32_precision, b.cudnn.conv.fp32_precision = saved
        else:
            b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32 = saved
        b.cudnn.deterministic, b.cudnn.benchmark = saved_cudnn


@contextmanager
def deterministic() -> Iterator[None]:
    """Deterministic kernels inside the block (``torch.use_deterministic_algorithms(True,
    warn_only=True)``): CUDA ops that add with atomics in whatever order threads finish
    (embedding backward, index_add, flash attention's backward) take their deterministic
    variants, so two identical runs give identical bits; an op without one warns instead of
    failing. On CUDA, cuBLAS also needs ``CUBLAS_WORKSPACE_CONFIG=:4096:8`` set before its
    first matmul. The previous setting is restored on exit. No effect on CPU results."""
    saved = (torch.are_deterministic_algorithms_enabled(),
             torch.is_deterministic_algorithms_warn_only_enabled())
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(saved[0], warn_only=saved[1])


def tf32_state() -> str:
    """The TF32 switches as they are now, named as this PyTorch spells them."""
    b = torch.backends
    if NEW_TF32_API:
        return (f"torch.backends.cuda.matmul.fp32_precision = {b.cuda.matmul.fp32_precision!r}, "
                f"torch.backends.cudnn.conv.fp32_precision = {b.cudnn.conv.fp32_precision!r}")
    return (f"torch.backends.cuda.matmul.allow_tf32 = {b.cuda.matmul.allow_tf32}, "
            f"torch.backends.cudnn.allow_tf32 = {b.cudnn.allow_tf32}")


def describe() -> DeviceInfo:
    """Describe the hardware and software stack of this machine."""
    cuda = torch.cuda.is_available()
    props = torch.cuda.get_device_properties(0) if cuda else None
    major = props.major if props else 0
    return DeviceInfo(
        name=props.name if props else cpu_name(),
        kind="cuda" if cuda else "cpu",
        gpu_count=gpu_count(),
        memory_gib=round(props.total_memory / 2**30, 1) if props else None,
        capability=f"{props.major}.{props.minor}" if props else None,
        bf16=torch.cuda.is_bf16_supported() if cuda else True,
        tf32=cuda and major >= 8,
        cpu_threads=torch.get_num_threads(),
        torch=torch.__version__,
        cuda=torch.version.cuda if cuda else None,
        nccl=dist.is_available() and dist.is_nccl_available() and cuda,
        gloo=dist.is_available() and dist.is_gloo_available(),
        python=platform.python_version(),
    )


def gpu_shortfall(n: int) -> str | None:
    """None if at least `n` CUDA GPUs are visible, else one sentence saying what is missing."""
    have = gpu_count()
    if have >= n:
        return None
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    hint = "" if visible is None else f" (CUDA_VISIBLE_DEVICES={visible!r} limits what PyTorch sees)"
    if have == 0:
        return f"This needs {n} CUDA GPU(s) and PyTorch sees none{hint}."
    return f"This needs {n} CUDA GPUs and PyTorch sees {have}{hint}."


def require_gpus(n: int) -> None:
    """Raise :class:`NotEnoughGPUs` with a one-sentence explanation unless `n` GPUs exist."""
    missing = gpu_shortfall(n)
    if missing:
        raise NotEnoughGPUs(missing)


def banner(profile: str, device: torch.device) -> str:
    """One line naming the profile and the hardware, printed at the top of each notebook."""
    info = describe()
    if device.type == "cuda":
        hw = f"{torch.cuda.get_device_name(device)} ({info.memory_gib} GiB, sm {info.capability})"
        hw += f", {info.gpu_count} GPU(s)"
    else:
        hw = f"CPU {info.name}, {info.cpu_threads} threads"
    return f"profile {profile} | device {device} | {hw} | torch {info.torch}"
