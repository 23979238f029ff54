"""This machine's measured peaks, measured once per run and shared by the notebooks.

MFU (notebook 08), the roofline (10) and every "x % of the peak" divide by the fastest matmul
and the fastest copy measured on this device. Measured in each notebook apart, the same peak
moved by 9 % between two notebooks of one run (a busy spell of the machine, a cold cache), and
the two notebooks then disagreed about the same step. So the first notebook of a run that needs
a peak measures it (:func:`bench.peak_matmul`, :func:`bench.bandwidth_curve`, with their
spreads) and stores it under the build folder (``build/peaks.json``); later notebooks read it
back and say where it came from. A stored peak is measured again when it is older than
:data:`MAX_AGE_S`, or was measured with another torch, another CPU, another number of threads,
dtype (fp32 with or without TF32) or set of sizes. Notebooks that share a peak declare the same
sizes in :mod:`course_lib.profiles` (a test holds them to it): 00 and 01 for the fp32 peak, 08 and
10 for the step's precision (fp32 too where autocast is off).

>>> # peak, note = peaks.matmul(dev, torch.bfloat16, [512, 1024, 2048], by="08_transformer")
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import torch

from course_lib import bench, files, report
from course_lib.device import cpu_name
from course_lib.device import label as device_label

MAX_AGE_S = 3600.0  # a course run takes well under an hour; a day-old peak may be another machine state


@dataclass
class Note:
    """Where a peak came from: measured by this call, or stored by an earlier notebook."""

    by: str  # the notebook (or script) that measured it
    age_s: float  # seconds since it was measured
    fresh: bool  # measured by this call

    def __str__(self) -> str:
        if self.fresh:
            return f"measured now, stored in {path().name} for the other notebooks"
        minutes = self.age_s / 60
        when = f"{minutes:.0f} min ago" if minutes >= 1 else f"{self.age_s:.0f} s ago"
        return (f"measured {when} by {self.by} and read from {path().name}: "
                "the notebooks divide by the same peak")


def path(build: Path | None = None) -> Path:
    """The store: ``<build>/peaks.json`` (default build folder: :func:`report.build_dir`)."""
    return Path(build or report.build_dir()) / "peaks.json"


def forget(build: Path | None = None) -> None:
    """Delete the store of `build`: ``course run`` starts so, and each run measures its own peaks."""
    path(build).unlink(missing_ok=True)


def _key(what: str, device: torch.device | str, dtype: torch.dtype | None, sizes: Sequence[int]) -> str:
    """What must match for a stored peak to count: the measurement, device and threads, CPU, torch,
    dtype (fp32 on a GPU: with or without TF32, which the caller's switch decides) and sizes."""
    dt = str(dtype).removeprefix("torch.") if dtype is not None else "-"
    if dtype == torch.float32 and torch.device(device).type == "cuda" and torch.backends.cuda.matmul.allow_tf32:
        dt += "+tf32"  # TF32 tensor cores: another peak than plain fp32
    return (f"{what} | {device_label(device)} | {cpu_name()} | torch {torch.__version__} | {dt} | "
            f"{','.join(str(n) for n in sizes)}")


def _timing(d: dict) -> bench.Timing:
    """A Timing back from its stored fields (its turns do not pair with this process's)."""
    d = {**d, "samples": tuple(d.get("samples", ())), "turns_id": None}
    return bench.Timing(**d)


def _stored(key: str, by: str, measure: Callable[[], list[bench.Timing]]) -> tuple[list[bench.Timing], Note]:
    """The timings stored under `key` when fresh, else `measure()`d now and stored."""
    store = path()
    try:
        entries = json.loads(store.read_text())
    except (OSError, ValueError):
        entries = {}  # no store yet, or one a crash left unreadable: measure again
    entry = entries.get(key)
    now = time.time()
    if entry and 0 <= now - entry["at"] <= MAX_AGE_S:
        return [_timing(t) for t in entry["timings"]], Note(entry["by"], now - entry["at"], False)
    timings = measure()
    entries[key] = {"by": by, "at": now, "timings": [
        {**dataclasses.asdict(t), "samples": list(t.samples), "turns_id": None} for t in timings]}
    files.write_text_atomic(store, json.dumps(entries, indent=1))
    return timings, Note(by, 0.0, True)


def matmul(device: torch.device | str, dtype: torch.dtype, sizes: Sequence[int], *, by: str,
           min_run_s: float = 0.2) -> tuple[bench.Timing, Note]:
    """This run's compute peak in `dtype`: the fastest of square matmuls of `sizes`
    (:func:`bench.peak_matmul`), measured once and shared; with a :class:`Note` of its origin.
    `by` names the caller (the notebook) in that note."""
    timings, note = _stored(_key(f"matmul peak, {min_run_s:g} s", device, dtype, sizes), by,
                            lambda: [bench.peak_matmul(device, dtype, sizes=sizes, min_run_s=min_run_s)])
    return timings[0], note


def bandwidth(device: torch.device | str, sizes: Sequence[int], *, by: str,
              min_run_s: float = 0.2) -> tuple[list[bench.Timing], Note]:
    """This run's copy bandwidth curve over buffers of `sizes` bytes (:func:`bench.bandwidth_curve`),
    measured once and shared; with a :class:`Note` of its origin."""
    return _stored(_key(f"copy bandwidth, {min_run_s:g} s", device, None, sizes), by,
                   lambda: bench.bandwidth_curve(sizes, device, min_run_s=min_run_s))
