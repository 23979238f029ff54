"""A workshop cohort side by side: each attendee's ``course check --json`` report and, after
the workshop, the notebook reports of their runs.

``course check --json FILE`` writes one machine's report (:func:`check_report`): the hardware,
the versions, what each notebook can show there, and a short matmul and copy measurement.
``course cohort DIR`` reads a folder of reports (:func:`read`), prints :func:`table` and draws
``plot.cohort(panels(attendees))``. The folder holds, at any depth::

    DIR/
      alice@laptop.json            a check report at the top: the attendee is its "name"
      bob/                         one folder per attendee: the attendee is the folder name
        check.json                 bob's check report (a *.json with "kind": "course-check")
        build/reports/*.json       bob's notebook reports, copied as `course run` wrote them
                                   (any folder named reports below bob/; other JSON is not read)

A check report at the top whose name is also a folder's joins that folder's reports. Where an
attendee has two reports of the same thing, the newest (by its date) is shown; on the same day,
one not run under smoke. A file that
cannot be read (not JSON, another kind, a missing name, a field of the wrong type) is named in
one sentence and left out; a report without a section (no GPU, no measurement) shows "—".
"""

from __future__ import annotations

import datetime as _dt
import getpass
import json
import os
import socket
from collections import Counter
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Sequence

import torch

from course_lib import bench, device, report, utilisation
from course_lib.workshop import catalog
from course_lib.device import DeviceInfo

KIND, SCHEMA = "course-check", 1  # the marker of a check report, and its layout's version
DASH = "—"  # a blank: the report does not say

# The short measurement of `course check`: <= ~10 s on 2 CPU cores, < 2 s on a GPU.
# n: square matmul size; copy_mib: buffer copied (beyond the CPU's caches, so main memory);
# min_run_s: time per measurement after warm-up (bench.time_fn / bench.time_in_rounds)
QUICK = {
    "cpu": dict(n=1024, copy_mib=256, min_run_s=0.2),
    "cuda": dict(n=4096, copy_mib=256, min_run_s=0.1),
}


# ---- one machine: what `course check --json` writes ------------------------------------

@dataclass
class QuickMeasure:
    """The short measurement: the best matmul rate (and its dtype) and a copy bandwidth."""

    matmul: bench.Timing
    dtype: str  # the fastest of the dtypes tried, e.g. 'bfloat16'
    copy: bench.Timing


def dtypes_to_try(dev: torch.device) -> list[torch.dtype]:
    """The dtypes whose matmul may be fastest on `dev` (the CPU's depends on its instructions):
    bf16 only where the hardware has it. A CPU without bf16 instructions runs a bf16 matmul on a
    generic path, which cannot be the fastest (on a 2-core AMD EPYC, one thread: 0.83 s per
    1024 × 1024 bf16 matmul against 27 ms in float32, 33 s of `course check`'s 36 s)."""
    if dev.type == "cuda":
        return [device.amp_dtype(dev)]  # bf16 only where native (a T4 emulates it)
    native = any(f.endswith("bf16") for f in device.cpu_16bit_flags())
    return [torch.float32, torch.bfloat16] if native else [torch.float32]


def quick_measure(dev: torch.device) -> QuickMeasure:
    """Matmul rate in the fastest dtype and copy bandwidth on `dev`, sized by :data:`QUICK`."""
    q = QUICK["cuda" if dev.type == "cuda" else "cpu"]
    tried = {str(dt).removeprefix("torch."): bench.time_matmul(q["n"], dev, dt, q["min_run_s"])
             for dt in dtypes_to_try(dev)}
    dtype = max(tried, key=lambda k: tried[k].rate)
    (copy,) = bench.bandwidth_curve([q["copy_mib"] * 2**20], dev, q["min_run_s"])
    return QuickMeasure(tried[dtype], dtype, copy)


def measured(t: bench.Timing) -> dict:
    """A timed rate as a check report holds it: in G<unit> (GFLOP/s, GB/s), median and quartiles."""
    where = t.device if not t.device.startswith("cpu") else f"{t.device} {device.cpu_name()}"
    return {"name": t.name, "device": where, "value": t.rate / 1e9, "unit": f"G{t.unit}",
            "spread": [t.rate_lo / 1e9, t.rate_hi / 1e9], "runs": t.runs}


def attendee_name() -> str:
    """'user@hostname', the default name of a check report."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no login name and no password entry (some containers)
        user = "someone"
    return f"{user}@{socket.gethostname()}"


def ram_gib() -> float | None:
    """This machine's memory in GiB (None where the OS does not say)."""
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (AttributeError, ValueError, OSError):
        return None


def gpus() -> list[dict]:
    """Name, memory and compute capability of every CUDA GPU PyTorch sees."""
    props = [torch.cuda.get_device_properties(i) for i in range(device.gpu_count())]
    return [{"name": p.name, "memory_gib": round(p.total_memory / 2**30, 1),
             "capability": f"{p.major}.{p.minor}"} for p in props]


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def check_report(name: str, info: DeviceInfo, rows: Sequence[tuple[str, str, str]],
                 quick: QuickMeasure | None, profile: str) -> dict:
    """One machine's check report: `info` (device.describe()), `rows` (catalog.readiness),
    the short measurement `quick` and the profile 'auto' resolves to here."""
    cudnn = torch.backends.cudnn.version() if info.cuda else None
    return {
        "kind": KIND, "schema": SCHEMA, "name": name,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "course": _version("course-lib"),
        "hardware": {"cpu": device.cpu_name(), "cores": os.cpu_count(), "threads": info.cpu_threads,
                     "ram_gib": ram_gib(), "gpus": gpus(), "bf16": info.bf16, "tf32": info.tf32,
                     "nccl": info.nccl, "gloo": info.gloo,
                     "utilisation": utilisation.readable(device.pick(limit=False))},
        "versions": {"python": info.python, "torch": info.torch, "torchvision": _version("torchvision"),
                     "cuda": info.cuda, "cudnn": None if cudnn is None else str(cudnn)},
        "profile": profile,
        "notebooks": [{"stem": s, "status": st, "what": w} for s, st, w in rows],
        "measurements": {} if quick is None else
        {"matmul": {**measured(quick.matmul), "dtype": quick.dtype}, "copy": measured(quick.copy)},
    }


# ---- reading a cohort folder ----------------------------------------------------------

class BadReport(ValueError):
    """A file in a cohort folder that is not a report this module reads."""


NUM = (int, float)
_MEASURED = {"name": str, "device": str, "value": NUM, "unit": str, "spread": [NUM], "runs": int,
             "dtype": str}
# The shape of each kind of report: {key: type or nested shape}; [shape] is a list of such
# items; "*" stands for any key. Every field may be missing or null (a blank in the table).
CHECK_SHAPE = {
    "kind": str, "schema": int, "name": str, "date": str, "course": str, "profile": str,
    "hardware": {"cpu": str, "cores": int, "threads": int, "ram_gib": NUM, "bf16": bool,
                 "tf32": bool, "nccl": bool, "gloo": bool, "utilisation": str,
                 "gpus": [{"name": str, "memory_gib": NUM, "capability": str}]},
    "versions": {"python": str, "torch": str, "torchvision": str, "cuda": str, "cudnn": str},
    "notebooks": [{"stem": str, "status": str, "what": str}],
    "measurements": {"matmul": _MEASURED, "copy": _MEASURED},
}
NOTEBOOK_SHAPE = {  # as report.Report.save writes it
    "notebook": str, "profile": str, "device": str, "torch": str, "cuda": str, "date": str,
    "measurements": {"*": {"value": (int, float, str), "unit": str, "note": str, "spread": [NUM], "setup": str}},
}
_JSON_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false",
               dict: "an object", list: "a list", type(None): "null"}


def _expect(value: Any, types: type | tuple, where: str) -> None:
    """Raise BadReport unless `value` is one of `types` (a bool is no number here)."""
    types = types if isinstance(types, tuple) else (types,)
    if isinstance(value, types) and not (isinstance(value, bool) and bool not in types):
        return
    names = [_JSON_NAMES[t] for t in types if not (t is int and float in types)]
    found = _JSON_NAMES.get(type(value), type(value).__name__)
    raise BadReport(f"{where} should be {' or '.join(names)}, not {found}")


def conform(value: Any, shape: Any, where: str = "the report") -> None:
    """Raise BadReport naming the first field of `value` that does not have `shape`."""
    if value is None:
        return
    if isinstance(shape, list):
        _expect(value, list, where)
        for i, item in enumerate(value):
            if item is None:
                raise BadReport(f"{where}[{i}] is null")
            conform(item, shape[0], f"{where}[{i}]")
    elif isinstance(shape, dict):
        _expect(value, dict, where)
        for key, item in value.items() if "*" in shape else ():
            conform(item, shape["*"], f"{where}[{key!r}]")
        for key, sub in shape.items():
            conform(value.get(key), sub, key if where == "the report" else f"{where}.{key}")
    else:
        _expect(value, shape, where)


def load(path: Path) -> tuple[str, dict]:
    """('check' or 'notebook', the report) from a JSON file; BadReport says what is wrong."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise BadReport(f"not JSON ({exc.msg}, line {exc.lineno})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadReport(f"not readable as text ({exc})") from None
    _expect(data, dict, "the report")
    if data.get("kind") == KIND:
        _require(data, ("schema", "name"), CHECK_SHAPE)
        if data["schema"] != SCHEMA:
            raise BadReport(f"a {KIND} report of schema {data['schema']}, but this course "
                            f"reads schema {SCHEMA}")
        return "check", data
    if data.get("kind") is not None:
        raise BadReport(f"kind {data['kind']!r}, not {KIND!r}")
    if "notebook" in data and "measurements" in data:
        _require(data, ("notebook", "measurements"), NOTEBOOK_SHAPE)
        return "notebook", data
    raise BadReport(f"neither a {KIND} report (no \"kind\") nor a notebook report "
                    f"(no \"notebook\" and \"measurements\")")


def _require(data: dict, keys: Sequence[str], shape: dict) -> None:
    """BadReport unless every key of `keys` has a value and `data` has `shape`."""
    missing = [k for k in keys if data.get(k) in (None, "")]
    if missing:
        raise BadReport(f"no {' and no '.join(repr(k) for k in missing)}")
    conform(data, shape)


@dataclass
class Attendee:
    """One attendee's reports: the newest check report, and the newest report per notebook."""

    name: str
    check: dict | None = None
    notebooks: dict[str, dict] = field(default_factory=dict)  # notebook stem -> its report


def attendee_of(path: Path, folder: Path, kind: str, data: dict) -> str:
    """Whose report `path` is: its first folder below `folder`, else a check report's name."""
    parts = path.relative_to(folder).parts
    if len(parts) > 1:
        return parts[0]
    if kind == "check":
        return data["name"]
    raise BadReport(f"a notebook report outside an attendee's folder ({folder}/<attendee>/…)")


def _rank(data: dict) -> tuple[str, bool]:
    """What makes a report the one to show: its date, then a run under a profile other than
    smoke (a test run's numbers are the smallest sizes'); `course run` dates reports by day."""
    return str(data.get("date") or ""), data.get("profile") != "smoke"


def _keep(old: dict | None, new: dict) -> bool:
    """True when `new` replaces `old`: there is none, or `new` ranks higher (a tie keeps `old`)."""
    return old is None or _rank(new) > _rank(old)


def add(person: Attendee, kind: str, data: dict) -> str | None:
    """File `data` under `person`; a sentence when it meets another report of the same thing."""
    old = person.check if kind == "check" else person.notebooks.get(data["notebook"])
    if _keep(old, data):
        if kind == "check":
            person.check = data
        else:
            person.notebooks[data["notebook"]] = data
    if old is None:
        return None
    what = "check reports" if kind == "check" else f"reports of {data['notebook']}"
    return (f"{person.name} has two {what}; the table shows the newer one (on the same day, "
            f"one not run under smoke)")


def is_report_path(path: Path, folder: Path) -> bool:
    """Whether `path` is where a report lies: in `folder` or an attendee's folder itself (check
    reports), or in a ``reports`` folder (notebook reports). A copied build/ folder holds other
    JSON (profiler traces, job files), which is not read."""
    depth = len(path.relative_to(folder).parts)
    return depth <= 2 or path.parent.name == "reports"


def read(folder: Path) -> tuple[list[Attendee], list[str]]:
    """The attendees of a cohort folder, by name, and one sentence per file left out (or
    report replaced by a newer one)."""
    people: dict[str, Attendee] = {}
    notes = []
    for path in sorted(p for p in folder.rglob("*.json") if is_report_path(p, folder)):
        try:
            kind, data = load(path)
            name = attendee_of(path, folder, kind, data)
        except BadReport as exc:
            notes.append(f"{path}: {exc}; left out.")
            continue
        note = add(people.setdefault(name, Attendee(name)), kind, data)
        if note:
            notes.append(f"{path}: {note}.")
    return sorted(people.values(), key=lambda a: a.name.lower()), notes


# ---- the table and the plot's numbers -------------------------------------------------

def get(data: dict | None, *keys: str) -> Any:
    """data[k1][k2]…, None where a level is missing."""
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _from_notebooks(a: Attendee, key: str) -> str | None:
    """A field (device, torch, cuda) of the attendee's first notebook report that has it."""
    return next((r[key] for _, r in sorted(a.notebooks.items()) if r.get(key)), None)


def device_of(a: Attendee) -> str:
    """The attendee's GPUs' names, else 'cpu: <its name>' (from the check report, else from a
    notebook report, which names its device so)."""
    names = dict.fromkeys(get(g, "name") or "GPU" for g in get(a.check, "hardware", "gpus") or [])
    cpu = get(a.check, "hardware", "cpu")
    return " + ".join(names) or (cpu and f"cpu: {cpu}") or _from_notebooks(a, "device") or DASH


def fmt_value(row: dict | None, unit: str | None = None) -> str:
    """'198.3 ±1%' (± half the interquartile range of the repeats, relative), the unit added
    when it is not `unit`; '—' when there is no value."""
    value = get(row, "value")
    if value is None:
        return DASH
    text = report.fmt_value(value)
    spread = get(row, "spread")
    if isinstance(value, (int, float)) and value and spread and len(spread) == 2:
        text += f" ±{(spread[1] - spread[0]) / 2 / abs(value):.0%}"
    return text if unit is None or row.get("unit") == unit else f"{text} {row.get('unit')}"


def readiness_counts(check: dict | None) -> str:
    """'7/4/0': how many notebooks are full / partial / not written yet here."""
    rows = get(check, "notebooks")
    if not rows:
        return DASH
    counts = Counter(r.get("status") for r in rows)
    return "/".join(str(counts[s]) for s in catalog.STATUSES)


def summary_row(a: Attendee) -> list[str]:
    """One attendee's line: who can run what, and the short measurement."""
    c = a.check
    n_gpus = get(c, "hardware", "gpus")
    return [a.name, device_of(a), DASH if n_gpus is None else str(len(n_gpus)),
            get(c, "versions", "torch") or _from_notebooks(a, "torch") or DASH,
            get(c, "versions", "cuda") or _from_notebooks(a, "cuda") or DASH,
            readiness_counts(c), fmt_value(get(c, "measurements", "matmul"), "GFLOP/s"),
            get(c, "measurements", "matmul", "dtype") or DASH,
            fmt_value(get(c, "measurements", "copy"), "GB/s")]


def notebook_rows(attendees: Sequence[Attendee]) -> list[list[str]]:
    """(notebook, key, unit, one value per attendee) for every key at least one reported."""
    keys = dict.fromkeys((nb, key, row.get("unit") or "")
                         for a in attendees for nb, rep in a.notebooks.items()
                         for key, row in (rep.get("measurements") or {}).items() if row)
    rows = []
    for nb, key, unit in sorted(keys, key=lambda k: k[0]):  # stable: keys in reported order
        cells = [get(a.notebooks.get(nb), "measurements", key) for a in attendees]
        rows.append([nb, key, unit] + [fmt_value(c) if c and (c.get("unit") or "") == unit
                                       else DASH for c in cells])
    return rows


def grid(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns under a header and a rule."""
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(f"{c:<{w}}" for c, w in zip(r, widths)).rstrip() for r in [head, *rows]]
    return "\n".join([lines[0], "-" * len(lines[0]), *lines[1:]])


def table(attendees: Sequence[Attendee]) -> str:
    """Who can run what and the short measurements; then the notebook reports side by side."""
    head = ["attendee", "device", "GPUs", "torch", "CUDA", "notebooks " + "/".join(catalog.STATUSES),
            "matmul GFLOP/s", "dtype", "copy GB/s"]
    text = grid(head, [summary_row(a) for a in attendees])
    text += "\n(measurements: median ± half the interquartile range of the repeats, relative)"
    ran = [a for a in attendees if a.notebooks]
    if ran:
        names = [f"{a.name} ({'/'.join(sorted({r.get('profile') or DASH for r in a.notebooks.values()}))})"
                 for a in ran]
        text += "\n\nnotebook reports (profile in brackets)\n"
        text += grid(["notebook", "measurement", "unit", *names], notebook_rows(ran))
    return text


def _bar(row: dict | None) -> tuple[float, float, float] | None:
    """(value, lo, hi) of a measurement, lo = hi = value without a spread; None without a value."""
    value, spread = get(row, "value"), get(row, "spread")
    if not isinstance(value, (int, float)):
        return None
    return (value, *spread) if spread and len(spread) == 2 else (value, value, value)


def panels(attendees: Sequence[Attendee]) -> dict[str, dict[str, tuple[float, float, float] | None]]:
    """What plot.cohort draws: per measurement, per 'attendee — device', (value, lo, hi)."""
    labels = {a.name: a.name if device_of(a) == DASH else f"{a.name} — {device_of(a)}" for a in attendees}
    return {title: {labels[a.name]: _bar(get(a.check, "measurements", key)) for a in attendees}
            for key, title in (("matmul", "matmul GFLOP/s (each machine's fastest dtype)"),
                               ("copy", "copy GB/s (GPU memory on a GPU, else main memory)"))}
