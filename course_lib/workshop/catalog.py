"""The readiness table: what this machine can show of each notebook (declared in
:data:`course_lib.profiles.NOTEBOOKS`)."""

from __future__ import annotations

from pathlib import Path

from course_lib import profiles
from course_lib.device import DeviceInfo
from course_lib.report import REPO

NOTEBOOK_DIR = REPO / "notebooks"
NOTEBOOKS = profiles.NOTEBOOKS  # declared once, in course_lib/profiles.py


def path_of(entry: profiles.Notebook, folder: Path = NOTEBOOK_DIR) -> Path:
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
