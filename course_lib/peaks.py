"""This machine's measured peaks, measured once per run and shared by the notebooks.

MFU (notebook 08), the roofline (10) and every "x % of the peak" divide by the fastest matmul
and the fastest copy measured on this device. Measured in each notebook apart, the same peak
moved by 9 % between two notebooks of one run (a busy spell of the machine, a cold cache), and
the two notebooks then disagreed about the same step. So the first notebook of a run that needs
a peak measures it (:func:`bench.peak_matmul`, :func:`bench.bandwidth_curve`, with their
spreads) and stores it under the build folder (``build/peaks.json``); later notebooks read it
back and say where it came from. The peak is the fastest matmul of its precision measured in
the run: a notebook that times a matmul of that precision (01's rows) offers it
(:func:`offer`), and a row faster than the stored peak replaces it, with a note that says so.
On a shared machine whose speed moves by tens of per cent within seconds, a peak measured at
one moment is otherwise beaten by the same matmul timed at another, and "x % of the peak"
then reads above 100 %. A stored peak is measured again when it is older than
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

from course_lib import bench, files, report, units
from course_lib.device import cpu_name
from course_lib.device import label as device_label

MAX_AGE_S = 3600.0  # a course run takes well under an hour; a day-old peak may be another machine state


@dataclass
class Note:
    """Where a peak came from: measured by this call, or stored by an earlier notebook."""

    by: str  # the notebook (or script) that measured it
    age_s: float  # seconds since it was measured
    fresh: bool  # measured by this call
    raised: str = ""  # where a faster row of the run replaced the measured peak: what and by whom

    def __str__(self) -> str:
        if self.raised:  # the raise names both measurements and who made them
            return self.raised
        if self.fresh:
            return "measured now, stored for the later notebooks of this run"
        return f"measured {_ago(self.age_s)} by {self.by}, stored for every notebook of this run"


@dataclass(frozen=True)
class Offered:
    """What :func:`offer` did with a row: `raised` when it replaced the stored peak; `text`, one
    printable sentence ('' when there is nothing to say: a stored or kept row is faster)."""

    text: str = ""
    raised: bool = False

    def __str__(self) -> str:
        return self.text

    def __bool__(self) -> bool:
        return bool(self.text)


def _ago(seconds: float) -> str:
    return f"{seconds / 60:.0f} min ago" if seconds >= 60 else f"{seconds:.0f} s ago"


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


def _same_kind(key: str) -> str:
    """A key without its sizes and run length: the device and precision a matmul row shares with a peak."""
    what, *rest = key.split(" | ")
    return " | ".join([what.split(",")[0], *rest[:-1]])


def _timing(d: dict) -> bench.Timing:
    """A Timing back from its stored fields (its turns do not pair with this process's)."""
    d = {**d, "samples": tuple(d.get("samples", ())), "turns_id": None}
    return bench.Timing(**d)


def _read() -> dict:
    try:
        return json.loads(path().read_text())
    except (OSError, ValueError):
        return {}  # no store yet, or one a crash left unreadable: measure again


def _fresh(entry: dict | None, now: float) -> bool:
    return bool(entry) and 0 <= now - entry["at"] <= MAX_AGE_S


def _stored_dict(t: bench.Timing) -> dict:
    return {**dataclasses.asdict(t), "samples": list(t.samples), "turns_id": None}


def _stored(key: str, by: str, measure: Callable[[], list[bench.Timing]]) -> tuple[list[bench.Timing], Note]:
    """The timings stored under `key` when fresh, else `measure()`d now and stored."""
    entries = _read()
    entry = entries.get(key)
    now = time.time()
    if _fresh(entry, now):
        raised = entry.get("raised", "")  # said where it was raised: another notebook reads it as stored before it
        if raised and entry["by"] != by:
            raised = f"stored earlier in this run, {raised}"
        return [_timing(t) for t in entry["timings"]], Note(entry["by"], now - entry["at"], False, raised)
    timings = measure()
    entries[key] = {"by": by, "at": now, "timings": [_stored_dict(t) for t in timings]}
    files.write_text_atomic(path(), json.dumps(entries, indent=1))
    return timings, Note(by, 0.0, True)


def _raise(entries: dict, key: str, row: bench.Timing, by: str, *, used: bool = True) -> str:
    """Replace the peak stored under `key` by the faster `row` (measured by `by`); the note's words.
    `used`: the old peak was stored before this call, so earlier cells may have divided by it."""
    old = _timing(entries[key]["timings"][0])
    peak = dataclasses.replace(row, name=f"peak: {row.name}", samples=tuple(row.samples), turns_id=None)
    said = (f"taken from {by}'s {row.name}, the run's fastest reading ({entries[key]['by']}'s "
            f"{old.name.removeprefix('peak: ')} read {units.fmt_rate(old.rate, old.unit)}; a maximum over two moments, "
            "not a verdict that one ran faster)")
    entries[key]["timings"] = [_stored_dict(peak)]
    entries[key]["by"], entries[key]["at"] = by, time.time()  # the peak is now this notebook's row
    entries[key]["raised"] = said
    return said + ("; cells before this divided by the old one" if used else "")


def offer(row: bench.Timing, device: torch.device | str, dtype: torch.dtype, *, by: str) -> Offered:
    """Offer a matmul `row` this notebook timed in `dtype` on `device` to the run's peaks: a
    fresh stored peak of that device and precision that `row` outruns beyond both spreads (the
    row's slow quartile above the peak's fast one)
    is replaced by it, and later notebooks read the faster one; a peak measured later starts from
    the fastest row offered. Returns an :class:`Offered` whose sentence says what happened: the
    peak raised (then `.raised`), the row kept for a peak not measured yet, the peak left standing
    because `row` is faster than its median but their spreads overlap, or nothing ('') when a
    stored or kept row is faster."""
    if row.rate is None or row.unit != "FLOP/s":
        raise ValueError(f"offer needs a matmul timing with a FLOP/s rate, got {row.name!r}.")
    entries, now = _read(), time.time()
    kind = _same_kind(_key("matmul peak", device, dtype, []))
    offers = [o for o in entries.get("offers", []) if _fresh(o, now)]
    offers.append({"kind": kind, "by": by, "at": now, "timing": _stored_dict(row)})
    entries["offers"] = offers
    stored = {key: _timing(entry["timings"][0]) for key, entry in entries.items()
              if key != "offers" and _same_kind(key) == kind and _fresh(entry, now)}
    said = [_raise(entries, key, row, by) for key, old in stored.items()
            if row.rate_lo > old.rate_hi]  # faster beyond both spreads (quartiles)
    files.write_text_atomic(path(), json.dumps(entries, indent=1))
    if said:
        return Offered(said[0], raised=True)
    standing = [old for old in stored.values() if row.rate > old.rate]
    if standing:  # above the peak's median, the two spreads overlapping
        old = standing[0]
        return Offered(f"{units.fmt_rate(row.rate, row.unit)} is above the stored peak's "
                f"{units.fmt_rate(old.rate, old.unit)}, but the middle halves of their repeats overlap "
                f"({units.fmt_rate(row.rate_lo, row.unit)}–{units.fmt_rate(row.rate_hi, row.unit)} and "
                f"{units.fmt_rate(old.rate_lo, old.unit)}–{units.fmt_rate(old.rate_hi, old.unit)}): "
                "not faster beyond both spreads, so the peak stands")
    if not stored:
        if any(_timing(o["timing"]).rate >= row.rate for o in offers[:-1] if o["kind"] == kind):
            return Offered()  # a faster row of this precision is kept already
        return Offered("kept: no peak of this precision is stored yet; the first notebook that measures one will use "
                       "the faster of its own and this")
    return Offered()


def matmul(device: torch.device | str, dtype: torch.dtype, sizes: Sequence[int], *, by: str,
           min_run_s: float = 0.2) -> tuple[bench.Timing, Note]:
    """This run's compute peak in `dtype`: the fastest of square matmuls of `sizes`
    (:func:`bench.peak_matmul`), or a row :func:`offer`ed earlier in the run that beat it beyond
    both spreads; measured once and shared, with a :class:`Note` of its origin.
    `by` names the caller (the notebook) in that note."""
    key = _key(f"matmul peak, {min_run_s:g} s", device, dtype, sizes)
    timings, note = _stored(key, by, lambda: [bench.peak_matmul(device, dtype, sizes=sizes, min_run_s=min_run_s)])
    if note.fresh:  # a faster row offered earlier in the run (01's) is the peak
        entries, now = _read(), time.time()
        offered = [o for o in entries.get("offers", []) if o["kind"] == _same_kind(key) and _fresh(o, now)]
        best = max(offered, key=lambda o: _timing(o["timing"]).rate, default=None)
        if best and _timing(best["timing"]).rate_lo > timings[0].rate_hi:  # faster beyond both spreads
            note.raised = _raise(entries, key, _timing(best["timing"]), best["by"], used=False)  # measured just now
            files.write_text_atomic(path(), json.dumps(entries, indent=1))
            return _timing(entries[key]["timings"][0]), note
    return timings[0], note


def bandwidth(device: torch.device | str, sizes: Sequence[int], *, by: str,
              min_run_s: float = 0.2) -> tuple[list[bench.Timing], Note]:
    """This run's copy bandwidth curve over buffers of `sizes` bytes (:func:`bench.bandwidth_curve`),
    measured once and shared; with a :class:`Note` of its origin."""
    return _stored(_key(f"copy bandwidth, {min_run_s:g} s", device, None, sizes), by,
                   lambda: bench.bandwidth_curve(sizes, device, min_run_s=min_run_s))
