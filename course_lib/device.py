"""Which device to use, what the hardware is, and what it is missing."""

from __future__ import annotations

import os
import platform
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator, Sequence

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
    memory_gib: float | None  # memory of the described GPU (capped as the course uses it); None on CPU
    capability: str | None  # "9.0" for Hopper; None on CPU
    bf16: bool  # GPU: bf16 tensor cores (capability >= 8.0; a T4 emulates it); CPU: True (runs, speed varies)
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


def pick(prefer: torch.device | str | None = None, *, limit: bool = True) -> torch.device:
    """The device to train on: `prefer` if given, else CUDA when available, else CPU. On a
    CUDA device it applies ``COURSE_GPU_MEMORY_GIB`` (:func:`limit_memory`) unless `limit` is
    False: library code that only names a device the notebook has picked passes False, so that
    it never loosens a tighter cap the notebook set since (09's out-of-memory demo).

    A CUDA device that is not there ('cuda' without a GPU, 'cuda:7' on a one-GPU
    machine) raises :class:`NotEnoughGPUs` naming the devices that do exist.
    """
    if not prefer:
        prefer = "cuda" if torch.cuda.is_available() else "cpu"  # and the memory cap, below
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
        if limit:
            limit_memory(dev)
    if limit:
        keep_freed_memory()  # host memory, on every device: the same step costs the same in every notebook
    return dev


KEEP_FREED_ENV = "COURSE_KEEP_FREED_MEMORY"  # 0: leave glibc's malloc as it starts (see keep_freed_memory)
MMAP_THRESHOLD = 32 * 2**20  # glibc's largest: blocks up to 32 MiB come from the heap, reused once freed
TRIM_THRESHOLD = 2**30  # free memory at the heap's top kept up to 1 GiB before it goes back to the system
_kept: str | None = None  # what keep_freed_memory set in this process, in words


def keep_freed_memory() -> str | None:
    """Have glibc's malloc keep the host memory a process frees for its next allocations: what
    jemalloc or TCMalloc do, which PyTorch's performance tuning guide recommends for CPU training
    ("reusing memory as much as possible"). By default glibc maps each block above 128 KiB fresh
    from the system and hands it back when freed (it raises that threshold as large blocks are
    freed, so the cost depends on the process's history), and every page of a fresh block costs
    a page fault at its first touch: on a 2-core CPU the same training step can run 1.5x slower
    in one process than in another. Sets ``mallopt``'s M_MMAP_THRESHOLD (32 MiB) and
    M_TRIM_THRESHOLD (1 GiB); allocations above 32 MiB are still mapped fresh. Returns what it
    set, in words, or None where it set nothing: not glibc (macOS, Windows, musl), or
    ``COURSE_KEEP_FREED_MEMORY=0``. GPU memory is untouched: PyTorch's CUDA caching allocator
    already keeps what tensors free."""
    if os.environ.get(KEEP_FREED_ENV, "1").strip() == "0" or platform.libc_ver()[0] != "glibc":
        return None
    import ctypes
    try:
        libc = ctypes.CDLL(None)  # this process's C library
        ok = libc.mallopt(-3, MMAP_THRESHOLD) == 1 and libc.mallopt(-1, TRIM_THRESHOLD) == 1  # M_MMAP_, M_TRIM_
    except (OSError, AttributeError):
        return None
    global _kept
    _kept = "freed host memory kept for reuse (glibc malloc; the glossary, page fault)" if ok else None
    return _kept


MEMORY_CAP_ENV = "COURSE_GPU_MEMORY_GIB"  # e.g. 8: behave as an 8 GiB card (make test-gpu uses it)


def memory_cap_gib() -> float | None:
    """The GPU memory cap asked for in ``COURSE_GPU_MEMORY_GIB`` (GiB), or None when unset.

    A value that is not a positive number raises ValueError in one sentence."""
    raw = os.environ.get(MEMORY_CAP_ENV, "").strip()
    if not raw:
        return None
    try:
        cap = float(raw)
    except ValueError:
        cap = -1.0
    if not cap > 0:
        raise ValueError(f"{MEMORY_CAP_ENV}={raw!r} is not a memory size: give GiB as a positive "
                         f"number, e.g. {MEMORY_CAP_ENV}=8.")
    return cap


def cpu_cache_bytes() -> int | None:
    """The size of this CPU's last-level cache as Linux reports it for core 0 (``/sys``), or None
    where it cannot be read (another OS, a container that hides it)."""
    caches = {}
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            level, size = int((index / "level").read_text()), (index / "size").read_text().strip()
        except (OSError, ValueError):
            continue
        units = {"K": 2**10, "M": 2**20, "G": 2**30}
        if size[-1:] in units and size[:-1].isdigit():
            caches[level] = int(size[:-1]) * units[size[-1]]
    return caches[max(caches)] if caches else None


def gpu_memory_gib(device: torch.device | str | None = None) -> float | None:
    """Memory the course may use on a GPU, in GiB: the card's total, or less under
    ``COURSE_GPU_MEMORY_GIB``. None without CUDA. `device` defaults to the current GPU."""
    if not torch.cuda.is_available():
        return None
    total = torch.cuda.get_device_properties(_index(device)).total_memory / 2**30
    cap = memory_cap_gib()
    return total if cap is None else min(total, cap)


def allocator_limit(device: torch.device | str | None = None) -> int | None:
    """Under ``COURSE_GPU_MEMORY_GIB=N``, the bytes PyTorch's allocator may reserve on `device`
    so that the process behaves as on a card of N GiB in all: N GiB less what the GPU holds
    outside this allocator (the CUDA context, cuBLAS/cuDNN handles, other processes), which a
    real card of that size must hold too. None when no cap is set."""
    cap = memory_cap_gib()
    if cap is None:
        return None
    index = _index(device)
    free, total = torch.cuda.mem_get_info(index)
    outside = max(0, total - free - torch.cuda.memory_reserved(index))
    return max(0, min(total, int(cap * 2**30)) - outside)


def limit_memory(device: torch.device | str) -> None:
    """Under ``COURSE_GPU_MEMORY_GIB=N`` let this process use at most N GiB of `device`, as if the
    card were that small: the allocator may reserve :func:`allocator_limit` bytes
    (``torch.cuda.set_per_process_memory_fraction``, a fraction of the card's total that counts
    only the allocator's own reservations; an allocation over it raises
    ``torch.OutOfMemoryError`` like a real full card). No-op when unset or on CPU."""
    device = torch.device(device)
    if memory_cap_gib() is None or device.type != "cuda":
        return
    total = torch.cuda.get_device_properties(_index(device)).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, allocator_limit(device) / total), _index(device))


def _index(device: torch.device | str | int | None) -> int:
    """The CUDA index of `device` ('cuda' and None mean the current GPU)."""
    if isinstance(device, int):
        return device
    if device is None or torch.device(device).index is None:
        return torch.cuda.current_device()
    return torch.device(device).index


def label(device: torch.device | str) -> str:
    """The hardware name for a device: 'NVIDIA H100 80GB HBM3' or 'cpu (2 threads)'."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    n = torch.get_num_threads()
    return f"cpu ({n} thread{'s' * (n != 1)})"


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


def bf16_native(capability: tuple[int, int]) -> bool:
    """Whether a CUDA GPU of this compute capability has bf16 tensor cores (Ampere, 8.0, on).

    A T4 (7.5) or V100 (7.0) *runs* bf16 tensors, but emulated: matmuls through fp32 units and
    convolutions outside cuDNN, many times slower than fp16, and
    ``torch.cuda.is_bf16_supported()`` still says True there (it counts emulation by default).
    """
    return capability[0] >= 8


def bf16_supported(device: torch.device | str) -> bool:
    """bf16 worth using on `device`: native tensor cores on a CUDA GPU (:func:`bf16_native`,
    asked of that GPU, not the current one; ROCm GPUs: True); on a CPU, True (bf16 runs
    everywhere; whether it is fast depends on the CPU's instructions, see precision)."""
    device = torch.device(device)
    if device.type != "cuda":
        return True
    if torch.version.hip:
        return True
    return bf16_native(torch.cuda.get_device_capability(_index(device)))


def amp_dtype(device: torch.device | str) -> torch.dtype:
    """The 16-bit autocast dtype for `device`: bf16 where native, else fp16 (which then needs a
    GradScaler in training)."""
    return torch.bfloat16 if bf16_supported(device) else torch.float16


NEW_TF32_API = hasattr(torch.backends.cuda.matmul, "fp32_precision")  # PyTorch >= 2.9


@contextmanager
def tf32(enabled: bool, *, deterministic: bool = False) -> Iterator[None]:
    """TF32 on or off for CUDA matmuls *and* every cuDNN op (convolutions, RNNs) inside the block.

    TF32 runs fp32 matmuls and convolutions on tensor cores (Ampere and newer) with a
    10-bit mantissa. The switches set are ``torch.backends.cuda.matmul.allow_tf32`` and
    ``torch.backends.cudnn.allow_tf32``: in every supported PyTorch (2.6 on) each of them sets
    its whole family, also the newer ``fp32_precision`` attributes (matmul; cuDNN conv *and*
    rnn) and the legacy state that PyTorch's own code still reads (inductor's autotuning
    does). Setting only some of the newer attributes (conv but not rnn, say) leaves the two
    out of step, and PyTorch then raises when anything reads the legacy flags.
    ``deterministic=True`` also makes cuDNN pick deterministic algorithms
    (``cudnn.deterministic=True, cudnn.benchmark=False``), for exact fp32 comparisons. Every
    switch is restored on exit, also after an exception. No effect on CPU results.
    """
    b = torch.backends
    saved = _tf32_flags()
    saved_cudnn = (b.cudnn.deterministic, b.cudnn.benchmark)
    _set_tf32_flags(enabled, enabled)
    if deterministic:
        b.cudnn.deterministic, b.cudnn.benchmark = True, False
    try:
        yield
    finally:
        _set_tf32_flags(*saved)
        b.cudnn.deterministic, b.cudnn.benchmark = saved_cudnn


def _tf32_flags() -> tuple[bool, bool]:
    """(matmul, cuDNN) TF32 on or off now; a state left inconsistent by a mix of the two APIs
    counts as on where any part of that family is on."""
    b = torch.backends
    try:
        matmul = bool(b.cuda.matmul.allow_tf32)
    except RuntimeError:  # the newer API set apart from the legacy one
        matmul = b.cuda.matmul.fp32_precision == "tf32"
    try:
        cudnn = bool(b.cudnn.allow_tf32)
    except RuntimeError:
        cudnn = "tf32" in (b.cudnn.conv.fp32_precision, b.cudnn.rnn.fp32_precision)
    return matmul, cudnn


def _set_tf32_flags(matmul: bool, cudnn: bool) -> None:
    torch.backends.cuda.matmul.allow_tf32 = matmul
    torch.backends.cudnn.allow_tf32 = cudnn


@contextmanager
def deterministic() -> Iterator[None]:
    """Deterministic kernels where PyTorch has them, inside the block
    (``torch.use_deterministic_algorithms(True, warn_only=True)``).

    CUDA ops that add with atomics in whatever order threads finish (embedding backward,
    index_add, scatter_add) take their deterministic variants. An op that has none only warns
    (``warn_only``) and stays nondeterministic: among them the backward of
    scaled_dot_product_attention's flash, memory-efficient and cuDNN kernels. So identical
    bits from two runs of a model with attention also need its math backend
    (``sdpa_kernel(SDPBackend.MATH)``), as :func:`exact` arranges. On CUDA, cuBLAS also needs
    ``CUBLAS_WORKSPACE_CONFIG=:4096:8`` set before its first matmul. The previous setting is
    restored on exit. No effect on CPU results."""
    saved = (torch.are_deterministic_algorithms_enabled(),
             torch.is_deterministic_algorithms_warn_only_enabled())
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(saved[0], warn_only=saved[1])


@contextmanager
def exact(allow_tf32: bool = False) -> Iterator[None]:
    """Everything that makes two identical CUDA runs give identical bits, for comparisons that
    claim equality: :func:`deterministic` kernels, attention on SDPA's math backend (its fused
    kernels' backward has no deterministic variant), TF32 off (on with `allow_tf32`: still the
    same bits run to run) and deterministic cuDNN algorithms, none picked by timing. On a CPU
    only the attention backend changes, and results are as before."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with deterministic(), sdpa_kernel(SDPBackend.MATH), tf32(allow_tf32, deterministic=True):
        yield


def tf32_state() -> str:
    """The TF32 switches as they are now: the legacy flags, and where this PyTorch has them
    (2.9 on) the per-op ``fp32_precision`` values ('none' means: not TF32, follow the parent)."""
    b = torch.backends
    matmul, cudnn = _tf32_flags()
    state = (f"torch.backends.cuda.matmul.allow_tf32 = {matmul}, "
             f"torch.backends.cudnn.allow_tf32 = {cudnn}")
    if NEW_TF32_API:
        state += (f" (fp32_precision: cuda.matmul {b.cuda.matmul.fp32_precision!r}, cudnn.conv "
                  f"{b.cudnn.conv.fp32_precision!r}, cudnn.rnn {b.cudnn.rnn.fp32_precision!r})")
    return state


def describe(device: torch.device | str | None = None) -> DeviceInfo:
    """Describe the hardware and software stack: of `device` when it is a GPU, else of the
    current GPU when there is one (memory as the course may use it: :func:`gpu_memory_gib`)."""
    cuda = torch.cuda.is_available() and (device is None or torch.device(device).type == "cuda")
    index = _index(device) if cuda else None
    props = torch.cuda.get_device_properties(index) if cuda else None
    major = props.major if props else 0
    return DeviceInfo(
        name=props.name if props else cpu_name(),
        kind="cuda" if cuda else "cpu",
        gpu_count=gpu_count(),
        memory_gib=round(gpu_memory_gib(index), 1) if props else None,
        capability=f"{props.major}.{props.minor}" if props else None,
        bf16=bf16_supported(torch.device("cuda", index)) if cuda else True,
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


def banner(profile: str, device: torch.device) -> str:
    """One line naming the profile and the hardware, printed at the top of each notebook."""
    info = describe(device)
    if device.type == "cuda":
        capped = " (capped by COURSE_GPU_MEMORY_GIB)" if memory_cap_gib() else ""
        hw = f"{info.name} ({info.memory_gib} GiB{capped}, sm {info.capability})"
        hw += f", {info.gpu_count} GPU(s)"
    else:
        hw = f"CPU {info.name}, {info.cpu_threads} threads"
    kept = f" | {_kept}" if _kept else ""  # what keep_freed_memory (device.pick) set in this process
    return f"profile {profile} | device {device} | {hw} | torch {info.torch}{kept}"


# ---- 16-bit precisions this device runs natively ----------------------------------------

CPU_16BIT_FLAGS = ("avx512_bf16", "amx_bf16", "avx512_fp16", "amx_fp16")  # native 16-bit math


def cpu_16bit_flags(path: str = "/proc/cpuinfo") -> list[str]:
    """Which of CPU_16BIT_FLAGS this CPU reports (Linux; empty where unknown)."""
    flags = set(cpu_flags(path))
    return [flag for flag in CPU_16BIT_FLAGS if flag in flags]


def cpu_support(fmt: str, flags: Sequence[str] | None = None) -> str:
    """One sentence: does this CPU report instructions for `fmt` ("fp16" or "bf16")?

    `flags` defaults to :func:`cpu_16bit_flags`. Without them, what the format costs here is
    not assumed: it is for a timing (and 03's profile) to say.
    """
    if fmt not in ("fp16", "bf16"):
        raise ValueError(f"fmt must be fp16 or bf16, got {fmt!r}.")
    flags = cpu_16bit_flags() if flags is None else list(flags)
    wanted = [f for f in CPU_16BIT_FLAGS if f.endswith(fmt)]
    have = [f for f in wanted if f in flags]
    if have:
        return (f"This CPU reports {', '.join(have)}: it has {fmt} instructions (whether PyTorch's kernels used "
                "them in the rows above, this run does not measure).")
    return (f"This CPU reports none of {', '.join(wanted)}, the instructions that do {fmt} arithmetic in hardware: "
            f"what their absence costs PyTorch's {fmt} kernels here is for a measurement to say (notebook 03 "
            "times and profiles a training step in each format)")


def available(device: torch.device | str) -> list[str]:
    """The precisions worth comparing on `device` (TF32 only on CUDA GPUs that have it)."""
    device = torch.device(device)
    if device.type != "cuda":
        return ["fp32", "fp16+GradScaler", "bf16"]
    names = ["fp32"]
    if torch.cuda.get_device_capability(device)[0] >= 8:
        names.append("fp32+TF32")
    names.append("fp16+GradScaler")
    if bf16_supported(device):  # native only: a T4 emulates bf16, many times slower
        names.append("bf16")
    return names


def amp_note(device: torch.device | str) -> str | None:
    """One sentence where bf16 is not native on `device` (a CUDA GPU before Ampere: a T4, a
    V100): its 16-bit rows use fp16 autocast with a GradScaler instead. None where bf16 is native
    (GPUs from Ampere on; CPUs run bf16 everywhere, at a speed that depends on their instructions)."""
    device = torch.device(device)
    if bf16_supported(device):
        return None
    major, minor = torch.cuda.get_device_capability(device)
    return (f"{label(device)} (sm {major}.{minor}) has no bf16 tensor cores and would emulate "
            f"bf16 many times slower, so the 16-bit rows here use fp16 autocast with a GradScaler.")


def amp_name(device: torch.device | str) -> str:
    """The 16-bit training precision for `device`: "bf16" where bf16 is native, else
    "fp16+GradScaler" (:func:`course_lib.device.bf16_supported`)."""
    return "bf16" if bf16_supported(device) else "fp16+GradScaler"


def minor_faults() -> int | None:
    """The process's minor page faults so far: pages the OS mapped in at their first touch, as when the memory
    allocator takes memory fresh from the system (None where Python cannot read the count: Windows)."""
    try:
        import resource  # Unix only
    except ImportError:
        return None
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
