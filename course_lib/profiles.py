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
        "smoke": dict(matmul_n=256),
        "cpu": dict(matmul_n=512),
        "gpu": dict(matmul_n=4096),
    },
    "01_gpu_vs_cpu": {
        # matmul sizes for the rate-vs-size curve; the largest also serves as the peak probe
        "smoke": dict(sizes=[64, 128, 256, 512], copy_mib=16, async_n=256, min_run_s=0.05),
        "cpu": dict(sizes=[64, 128, 256, 512, 1024, 2048], copy_mib=64, async_n=1024,
                    min_run_s=0.2),
        "gpu": dict(sizes=[128, 256, 512, 1024, 2048, 4096, 8192], copy_mib=256,
                    async_n=4096, min_run_s=0.2),
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
