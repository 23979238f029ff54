"""Run profiles: one table of sizes per notebook, and how a profile is chosen.

Resolution order: an explicit name > the ``COURSE_PROFILE`` environment variable >
``auto`` (``gpu`` when CUDA is available, else ``cpu``).
"""

from __future__ import annotations

import os
from types import SimpleNamespace

import torch

PROFILES = ("smoke", "cpu", "gpu")
BUDGETS = {
    "smoke": "CI and quick checks: <= 30 s per notebook on 2 CPU cores",
    "cpu": "a laptop without a GPU: <= 3 min per notebook on 2 CPU cores",
    "gpu": "any CUDA machine: sizes that saturate the GPU",
}


class ProfileError(ValueError):
    """An unknown profile or notebook name."""


# Sizes per notebook and profile; every literal is a knob a reviewer can see here.
SIZES: dict[str, dict[str, dict]] = {
    "00_setup_check": {
        # check_n: tiny matmul checked against CPU; cpu_n / gpu_n: quick rate probe per device
        "smoke": dict(check_n=64, cpu_n=256, gpu_n=1024, min_run_s=0.05),
        "cpu": dict(check_n=64, cpu_n=512, gpu_n=2048, min_run_s=0.2),
        "gpu": dict(check_n=64, cpu_n=1024, gpu_n=4096, min_run_s=0.2),
    },
    "01_gpu_vs_cpu": {
        # sizes / gpu_sizes: matmul n for the CPU / GPU rate-vs-size curves; cpu_peak /
        # gpu_peak: sizes probed for each device's measured peak; async_n: matmul of the sync
        # demo; copy_mib: H→D buffer; dtype_n: fp32/TF32/bf16 matmul; check_n: accuracy check
        # against fp64; widget_n / widget_max: slider default and maximum
        "smoke": dict(sizes=[64, 128, 256, 512], cpu_peak=[256, 512],
                      gpu_sizes=[128, 256, 512, 1024], gpu_peak=[1024],
                      async_n=256, copy_mib=16, dtype_n=256, check_n=128,
                      widget_n=256, widget_max=1024, min_run_s=0.05),
        "cpu": dict(sizes=[64, 128, 256, 512, 1024, 2048], cpu_peak=[512, 1024, 2048],
                    gpu_sizes=[128, 256, 512, 1024, 2048], gpu_peak=[2048],
                    async_n=1024, copy_mib=64, dtype_n=1024, check_n=256,
                    widget_n=512, widget_max=2048, min_run_s=0.5),
        "gpu": dict(sizes=[64, 128, 256, 512, 1024, 2048], cpu_peak=[512, 1024, 2048],
                    gpu_sizes=[128, 256, 512, 1024, 2048, 4096, 8192], gpu_peak=[4096, 8192],
                    async_n=4096, copy_mib=256, dtype_n=8192, check_n=512,
                    widget_n=2048, widget_max=4096, min_run_s=0.2),
    },
}


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


def sizes(notebook: str, profile: str | None = None) -> SimpleNamespace:
    """The size dial of `notebook` under `profile`, as attributes (``cfg.batch_size``)."""
    if notebook not in SIZES:
        raise ProfileError(f"No sizes for notebook {notebook!r}; known: {', '.join(SIZES)}.")
    profile = resolve(profile)
    return SimpleNamespace(profile=profile, **SIZES[notebook][profile])
