"""Each notebook records its key measurements, so the runner, tests and learners can
compare runs: ``build/reports/<notebook>.json`` for this run, ``results/<device>.json``
for reference runs recorded on real hardware."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import math
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import torch

from course_lib import bench, datasheet, files, profiles, units, verdicts
from course_lib.device import cpu_name, describe, gpu_memory_gib

REPO = Path(__file__).resolve().parent.parent


def build_dir() -> Path:
    """Where executed notebooks and reports go: ``$COURSE_BUILD_DIR`` or ``<repo>/build``."""
    return Path(os.environ.get("COURSE_BUILD_DIR") or REPO / "build")


def results_dir() -> Path:
    """Reference measurements recorded on real hardware: ``<repo>/results``."""
    return Path(os.environ.get("COURSE_RESULTS_DIR") or REPO / "results")


def this_run(notebook: str, like: "Report", max_age_s: float = 3600.0) -> dict[str, dict] | None:
    """The measurements `notebook` recorded in this run: its report in the build folder, when
    it has the profile and device of `like` (the calling notebook's report) and was written in
    the last `max_age_s` seconds; None where that notebook has not run so (a stale report, from
    another day or machine, is not this run's)."""
    path = report_path(notebook)
    try:
        fresh = time.time() - path.stat().st_mtime <= max_age_s
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    same = (data.get("profile"), data.get("device")) == (like.meta["profile"], like.meta["device"])
    return data.get("measurements") if fresh and same else None


# What closes every closing table (:meth:`Report.table`), each a function returning text or '': the
# full references of the published figures a notebook printed register here when course_lib.published
# is imported (published.sources), so that this module does not import it.
TABLE_FOOTERS: list[Callable[[], str]] = []


class RecordError(ValueError):
    """Reports that must not become reference results (wrong profile, device or file)."""


def report_path(notebook: str, build: Path | None = None) -> Path:
    """Where a run whose build folder is `build` (default :func:`build_dir`) keeps the report
    of `notebook` (the notebook file's stem): ``<build>/reports/<notebook>.json``."""
    return Path(build or build_dir()) / "reports" / f"{notebook}.json"


def fmt_value(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
    return str(value)


SPREAD = ("spread: for a time or a rate, its quartiles (the middle half of its repeats); for a ratio (×), "
          "its interval: from paired turns where the notebook timed the two in turns, else the range the two "
          "timings' quartiles allow")


class Report:
    """Key measurements of one notebook run, with units and the device that made them."""

    def __init__(self, notebook: str, profile: str, device: torch.device | str):
        self.notebook = notebook
        info = describe()
        dev = torch.device(device)
        self.meta = {
            "notebook": notebook,
            "profile": profile,
            "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else f"cpu: {info.name}",
            "device_type": dev.type,  # "cuda" for a GPU run: only those become reference results
            "torch": info.torch,
            "cuda": info.cuda,
            # the host too: a GPU step bound by launching runs at the speed of the CPU that launches it
            "host": f"{cpu_name()}, {os.cpu_count()} cores",
            "date": _dt.date.today().isoformat(),
        }
        if profile == "gpu":  # the gpu profile's sizes depend on the GPU's memory: its class is part of the setup
            self.meta["sizes"] = f"gpu/{profiles.gpu_class(gpu_memory_gib(dev) if dev.type == 'cuda' else None)}"
        self.rows: dict[str, dict] = {}

    def ran_sizes_of(self, profile: str) -> None:
        """Record that this run took `profile`'s sizes, not its own profile's: 06 and 11 under
        the gpu profile with fewer GPUs than ranks run the cpu profile's jobs on the CPU (gloo), and
        their rows then compare with a cpu run's (:func:`size_class`)."""
        self.meta["sizes"] = profile

    def add(self, key: str, value: float | int | str, unit: str, note: str = "",
            spread: tuple[float, float] | None = None, setup: str = "", apart: bool = False) -> None:
        """Record one measurement (`value` in `unit`, optionally the range `spread` = (lo, hi)
        its repeats gave), replacing an earlier one of the same key.

        `setup` names what was measured where it does not follow from the profile (model and
        its size, batch, sequence, precision, what is timed: "matmul 4096², bf16"): a reference
        row with the same setup shares this row's line in :meth:`table` whatever profile either
        run had. `apart`: a ratio of two timings taken at two moments, read by that rule wherever
        the row is shown again (:func:`ratio_grade`). The report holds measurements only: a unit
        is required, and a bool (a fact such as "NCCL available") is refused.
        """
        if isinstance(value, torch.Tensor):
            value = value.item()
        if isinstance(value, bool):
            raise ValueError(f"{key!r}: the report holds measurements, not yes/no facts; print those instead.")
        if not unit:
            raise ValueError(f"{key!r}: every measurement needs its unit ('ms', 'GFLOP/s', '%', '×', 'nats'…).")
        row = {"value": value, "unit": unit, "note": note}
        if spread is not None:
            row["spread"] = [float(spread[0]), float(spread[1])]
        if setup:
            row["setup"] = setup
        if apart:
            row["apart"] = True
        self.rows[key] = row

    def record(self, *items: "bench.Timing | bench.Ratio", note: str = "", show: bool = False,
               setup: str = "") -> None:
        """Record Timings and Ratios in one line, each under its own name, with its spread;
        with `show`, also print each one's line (a Ratio's is its graded verdict), so that a
        cell does not print and record the same thing by hand.

        A Timing with work is recorded as its rate (e.g. GFLOP/s, img/s; the quartiles as the
        range), one without as milliseconds per call; a Ratio as '×' with its range, noted with
        the device of the Timings recorded with it when they share one (so that a ratio of two
        host-CPU timings says where it was measured too). `setup` as in :meth:`add`, for every item.
        """
        devices = {item.device for item in items if isinstance(item, bench.Timing)}
        width = bench.name_width(items)  # the rows' names in one column
        ratio_note = note or (devices.pop() if len(devices) == 1 else "")
        for item in items:
            if isinstance(item, bench.Ratio):
                self.add(item.name, item.value, "×", ratio_note, spread=(item.lo, item.hi), setup=setup,
                         apart=item.apart)
                if item.rounds:  # a paired interval: a later reader need not guess where the range came from
                    self.rows[item.name].update(rounds=item.rounds, coverage=item.coverage, drift=item.drift)
            elif isinstance(item, bench.Timing) and item.rate is not None:
                scale, unit = units.rate_scale(item.rate, item.unit)
                self.add(item.name, item.rate / scale, unit, note or item.device,
                         spread=(item.rate_lo / scale, item.rate_hi / scale), setup=setup)
            elif isinstance(item, bench.Timing):
                self.add(item.name, item.median_s * 1e3, "ms", note or item.device,
                         spread=(item.lo_s * 1e3, item.hi_s * 1e3), setup=setup)
            else:
                raise TypeError(f"record() takes bench.Timing and bench.Ratio, not {type(item).__name__}.")
            if isinstance(item, bench.Timing) and item.faults is not None:  # page faults per call, where counted,
                self.rows[item.name].update(faults=item.faults, work=item.work)  # and the work of a call beside them
            if show:
                print(item.line(width) if isinstance(item, bench.Timing) else item)

    def to_dict(self) -> dict:
        return {**self.meta, "measurements": self.rows}

    def save(self, folder: Path | None = None) -> Path:
        """Write ``<folder>/<notebook>.json`` (default :func:`report_path`) atomically and
        return its path."""
        path = Path(folder) / f"{self.notebook}.json" if folder else report_path(self.notebook)
        return files.write_text_atomic(path, json.dumps(self.to_dict(), indent=1))

    def table(self, leave_out: Sequence[str] = (), why: str = "") -> str:
        """This run's measurements, with their spread (:data:`SPREAD`) and unit, and the recorded
        reference run (a GPU machine's, from ``results/``) when there is one, less its rows named in
        `leave_out` (rows a notebook no longer takes as evidence), which one line counts and says `why`.

        A reference row shares a line with this run's only when it measured the same thing
        (:func:`comparable`); the others stand apart below, each with its note (what it
        measured), under a line naming the reference's machine and profile. A reference row
        measured on that machine's CPU (its note names the CPU or gloo) says "host CPU"."""
        ref_device, ref = reference(self.notebook)
        left = [k for k in leave_out if k in ref]
        ref = {k: row for k, row in ref.items() if k not in left}
        ref_sizes, my_sizes = size_class({"device": ref_device, **reference_meta(self.notebook)}), size_class(self.meta)
        same_profile = ref_sizes == my_sizes
        # a gpu-profile run that took the cpu profile's sizes (Report.ran_sizes_of) ran its jobs on the host's CPU
        ref_on_cpu = reference_meta(self.notebook).get("profile") == "gpu" and ref_sizes == "cpu"
        beside = {k for k, row in self.rows.items() if k in ref and comparable(row, ref[k], same_profile)}
        apart = [k for k in self.rows if k in ref and k not in beside]
        w = max([36, *map(len, self.rows)])  # the name column fits the longest name
        head = f"{'measurement':<{w}} | {'this run':>10} | {'spread (below)':>19} | {'unit':<8}"
        if beside:
            cores = re.search(r"(\d+) cores", reference_meta(self.notebook).get("host", ""))  # host-CPU rows
            head += f" | reference run ({ref_device} machine{f', {cores[1]}-core host' if cores else ''}), the same setup"
        lines = [f"{self.meta['device']}, profile {self.meta['profile']}", head, "-" * len(head)]
        for key, row in self.rows.items():
            lo_hi = row.get("spread")
            rng = f"{fmt_value(lo_hi[0])}–{fmt_value(lo_hi[1])}" if lo_hi else "-"
            line = f"{key:<{w}} | {fmt_value(row['value']):>10} | {rng:>19} | {row['unit']:<8}"
            if beside:
                line += f" | {_ref_cell(ref[key], row, ref_on_cpu) if key in beside else '-'}"
            lines.append(line)
        lines.append(SPREAD)
        footers = [footer() for footer in TABLE_FOOTERS]  # the published figures' full references, where printed
        if not ref:
            lines.append(f"(the reference run's {len(left)} row{'s' * (len(left) != 1)} left out: {why})" if left else
                         "(no reference GPU run recorded in results/ for this notebook yet)")
            return "\n".join([*lines, *footers]).rstrip("\n")
        if not set(ref) & set(self.rows):
            lines.append(f"No row of this run has a row of the same name in the reference run, which recorded {len(ref)} "
                         f"row{'s' * (len(ref) != 1)} of its own (the cells above show those they compare with; all "
                         f"in results/{device_slug(ref_device or '')}.json).")
        if apart:
            setup = (f"{_sizes_words(ref_sizes)}; this run has {_sizes_words(my_sizes)}"
                     + _sizes_differ(self.notebook, ref_sizes, my_sizes) if not same_profile
                     else "another setup than this run's")
            lines.append(f"Reference run on {ref_device} ({setup}), apart: a row's note names what it measured.")
            lines += [f"  {fmt_row(k, ref[k])}" + ("  [host CPU]" if ref_on_cpu or _ON_CPU.search(ref[k].get("note", ""))
                                                   else "") for k in apart]
        if left:
            lines.append(f"  ({len(left)} reference row{'s' * (len(left) != 1)} left out: {why})")
        alone = [k for k in ref if k not in self.rows]  # measured on the reference machine only
        if alone and set(ref) & set(self.rows):
            lines.append(f"  ({len(alone)} more reference row{'s' * (len(alone) != 1)}, with no row of the same name in "
                         f"this run: {'; '.join(alone[:4])}{'; …' if len(alone) > 4 else ''}; all in "
                         f"results/{device_slug(ref_device or '')}.json)")
        return "\n".join([*lines, *footers]).rstrip("\n")


def _sizes_differ(notebook: str, ref_class: str, my_class: str, most: int = 5) -> str:
    """', which differ in batch_size 256 (here 128), n_train 50000 (here 12000) …': the notebook's profile sizes
    that two size classes set apart (profiles.SIZES), so a reader sees which rows could share a setup."""
    table = profiles.SIZES.get(notebook, {})

    def of(size_class: str) -> dict:
        profile, _, cls = size_class.partition("/")
        return {**table.get(profile, {}), **(table.get(f"{profile}/{cls}", {}) if cls else {})}
    ref, mine = of(ref_class), of(my_class)
    keys = [k for k in dict.fromkeys([*ref, *mine]) if ref.get(k) != mine.get(k)]
    if not keys:
        return ", the same sizes"
    shown = ", ".join(f"{k} {ref.get(k)} (here {mine.get(k)})" for k in keys[:most])
    return f", which differ in {shown}" + (f" and {len(keys) - most} more" if len(keys) > most else "")


def _sizes_words(size_class: str) -> str:
    """'gpu/large' -> "the 'gpu' profile's large models and sizes"."""
    profile, _, cls = size_class.partition("/")
    return f"the {profile!r} profile's {cls + ' ' if cls else ''}models and sizes"


def size_class(meta: dict) -> str:
    """The sizes a run's profile gave it: the profile's name, and under ``gpu`` its class by the
    GPU's memory ("gpu/large"). A run recorded before the class was (no "sizes") takes the class
    of its device's datasheet memory; one with no datasheet entry, "gpu" alone."""
    profile = str(meta.get("profile") or "")
    if profile != "gpu" or meta.get("sizes"):
        return str(meta.get("sizes") or profile)
    spec = datasheet.lookup(str(meta.get("device") or ""))
    return f"gpu/{profiles.gpu_class(spec.memory_gib)}" if spec else "gpu"


def comparable(row: dict, ref_row: dict, same_profile: bool) -> bool:
    """Whether a reference row measured what this run's row of the same name measured, so that
    the two may share a line: where either names its setup (:meth:`Report.add`), the two setups
    are equal; where neither does, both runs ran one profile (every size in a notebook comes
    from its profile). Anything else (another profile, another or an unnamed setup) is unlike."""
    mine, theirs = row.get("setup", ""), ref_row.get("setup", "")
    if mine or theirs:
        return mine == theirs
    return same_profile


def _reference_runs(notebook: str) -> list[tuple[str | None, dict]]:
    """(device, entry) of every recorded run that has `notebook`, the most recent first (ties
    in file name order)."""
    runs = []
    for path in sorted(results_dir().glob("*.json")):
        data = json.loads(path.read_text())
        entry = data.get("notebooks", {}).get(notebook)
        if entry is not None:
            _mark_quartile_ranges(entry.get("measurements", {}))
            runs.append((str(entry.get("date") or ""), data.get("device"), entry))
    runs.sort(key=lambda run: run[0], reverse=True)  # stable: equal dates keep file name order
    return [(device, entry) for _, device, entry in runs]


def _mark_quartile_ranges(rows: dict) -> None:
    """Mark each recorded ratio whose range is not from paired turns (its row names no `rounds`, as records
    before them did not) but the range two other rows' quartiles allow, their lower over the other's upper
    and back (`quartiles`: the two keys), so it is not read as a paired interval (:func:`ratio_grade`)."""
    spread = {k: r["spread"] for k, r in rows.items() if r.get("spread") and r.get("unit") != "×"}
    for key, row in rows.items():
        if row.get("unit") != "×" or not row.get("spread") or "rounds" in row:
            continue
        lo, hi = row["spread"]
        row["quartiles"] = next(([a, b] for a, (a_lo, a_hi) in spread.items() for b, (b_lo, b_hi) in spread.items()
                                 if a != b and math.isclose(a_lo / b_hi, lo, rel_tol=1e-6)
                                 and math.isclose(a_hi / b_lo, hi, rel_tol=1e-6)), None)
        if row["quartiles"] is None:
            del row["quartiles"]


def references(notebook: str) -> list[tuple[str | None, dict]]:
    """(device, measurements) of every recorded reference run that has `notebook` (one file
    per device in ``results/``), the most recently recorded first (ties in file name order):
    a notebook changed since an older device's run is shown from the run of its current code."""
    return [(device, entry["measurements"]) for device, entry in _reference_runs(notebook)]


def reference(notebook: str) -> tuple[str | None, dict]:
    """(device, measurements) of the most recent recorded reference run that has `notebook`."""
    runs = references(notebook)
    return runs[0] if runs else (None, {})


def reference_meta(notebook: str) -> dict:
    """What the most recent reference run of `notebook` recorded about itself (profile, host,
    torch, date …), without its measurements; {} when none is recorded."""
    runs = _reference_runs(notebook)
    return {k: v for k, v in runs[0][1].items() if k != "measurements"} if runs else {}


_ON_CPU = re.compile(r"\b(cpu|gloo)\b", re.I)  # a GPU machine's row measured on its host CPU


def _ref_cell(ref_row: dict | None, row: dict, on_cpu: bool = False) -> str:
    """The reference column of :meth:`Report.table`: the reference's value and unit, "host CPU"
    where the GPU machine measured it on its CPU (every row, `on_cpu`, where its run took the cpu
    profile's sizes on the CPU), and its note (model, batch, device) where that differs from this
    run's, so unlike runs do not pass for alike."""
    if ref_row is None:
        return "-"
    cell = f"{fmt_row_value(ref_row)} {ref_row['unit']}"  # with its spread, as this run's columns
    note = ref_row.get("note", "")
    tags = (["host CPU"] if on_cpu or _ON_CPU.search(note) else []) + ([note] if note and note != row.get("note", "") else [])
    return cell + (f" ({'; '.join(tags)})" if tags else "")


def fmt_row(key: str, row: dict) -> str:
    """One recorded measurement as a line: 'key: value (lo–hi) unit  note', and its setup
    in brackets where it names one; a ratio with its interval also says what the interval
    allows (:func:`ratio_grade`)."""
    if row.get("unit") in ("tok/s", "img/s") and row["value"] >= 1e4:  # recorded before the prefix: 485,186 tok/s
        scale, prefixed = units.rate_scale(row["value"], row["unit"])
        row = {**row, "value": row["value"] / scale, "unit": prefixed,
               "spread": [v / scale for v in row["spread"]] if row.get("spread") else None}
    setup = f" [{row['setup']}]" if row.get("setup") else ""
    grade = f": {ratio_grade(row, key)}" if row.get("unit") == "×" and row.get("spread") else ""
    return f"{key}: {fmt_row_value(row)} {row['unit']}{grade}  {row.get('note', '')}".rstrip() + setup


def rate_vs_row(t: "bench.Timing", row: dict) -> tuple[float, float, float] | None:
    """`t`'s rate over a recorded rate `row`'s (another notebook's, another moment): the ratio of the
    medians and the range the two quartiles allow, (value, lo, hi); None where the row has no
    spread or is not `t`'s unit with an SI prefix (GFLOP/s for FLOP/s, ktok/s for tok/s)."""
    scale = units.unit_scale(str(row.get("unit", "")), t.unit) if t.rate is not None else None
    if scale is None or not row.get("spread"):
        return None
    lo, hi = row["spread"]
    return t.rate / scale / row["value"], t.rate_lo / scale / hi, t.rate_hi / scale / lo


def apart_words(vs: tuple[float, float, float]) -> str:
    """A :func:`rate_vs_row` comparison (two moments) in words: the two quartile ranges overlapping, or how far apart
    beyond them and whether that is past what two moments can differ by (:func:`verdicts.moments_words`)."""
    value, lo, hi = vs
    if lo <= 1 <= hi:  # the range the two quartiles allow holds 1: the ranges overlap (a median may lie outside the other's)
        return (f"not told apart: {value:.2f}×, their quartile ranges overlapping, within the {verdicts.APART:g}× that two "
                "moments can differ by")
    under = min(max(lo, 1 / lo), max(hi, 1 / hi)) < verdicts.APART  # the range's end nearest 1, as a factor
    return (f"{value:.2f}× apart, more than either timing's own quartiles allow{', but' if under else ';'} "
            f"{verdicts.moments_words(lo, hi)}")


def recorded_ratio(key: str, row: dict) -> bench.Ratio:
    """A recorded ratio row ('×', its interval in `spread`) as a :class:`bench.Ratio`, to be read
    by the same rules as one measured in this run (its value kept inside its range)."""
    lo, hi = row.get("spread") or (row["value"], row["value"])
    ratio = bench.ratio_of(key, row["value"], min(lo, row["value"]), max(hi, row["value"]))
    if row.get("rounds"):  # recorded from paired turns, with the machine's drift over them
        ratio = dataclasses.replace(ratio, rounds=row["rounds"], coverage=row.get("coverage"), drift=row.get("drift"))
    return ratio


def ratio_grade(row: dict, key: str = "") -> str:
    """What a recorded ratio's interval allows, in the words of :class:`bench.Ratio`'s verdicts:
    a difference (1 outside it; a small one nearer 1 than :data:`verdicts.SMALL`), no measurable
    difference (1 inside it) or too wide to tell; a ratio of two timings taken at two moments (its
    row's `apart`, or 'timed apart' / 'unpaired' in its `key`, as older records name it) by the
    rule this run's are read by (:func:`verdicts.moments_words`)."""
    lo, hi = row["spread"]
    if lo == hi:
        return "one run, no interval"
    if row.get("apart") or "timed apart" in key or "unpaired" in key:
        return f"timed apart: {verdicts.moments_words(min(lo, row['value']), max(hi, row['value']))}"
    ratio = recorded_ratio("", row)
    if row.get("quartiles"):  # recorded before paired turns: the range its two timings' quartiles allow
        what = "the range its two timings' quartiles allow, as recorded: not a paired interval"
        return (f"too wide to tell ({what})" if ratio.too_wide else f"no measurable difference ({what} holds 1)"
                if ratio.within_noise else f"a difference beyond {what}")
    if ratio.too_wide:
        return "too wide to tell"
    if ratio.inconclusive:  # paired, with its drift recorded: the same rule as this run's verdicts
        return f"inconclusive: {ratio.doubt}"
    if ratio.within_noise:
        return "no measurable difference (its interval holds 1)"
    small = max(ratio.value, 1 / ratio.value) < verdicts.SMALL  # the learner's verdicts' word for it, too
    if ratio.drift is not None:
        return f"a {'small ' if small else ''}difference beyond its interval (1 lies outside it, and the drift is smaller)"
    # a recorded interval holds no drift between turns: this run's verdicts also ask the drift (inconclusive where the
    # machine's pace moved more than the difference); a record's cannot, and says so
    return (f"a {'small ' if small else ''}difference beyond its interval (1 lies outside it; drift not recorded, so "
            "not checked against it)")


def reference_header(notebook: str) -> str:
    """The line above a recorded reference run's rows: which machine, code, profile and date, and
    that it is not this machine."""
    runs = _reference_runs(notebook)  # one read of results/: the most recent run's device and record
    ref_device, meta = runs[0] if runs else (None, {})
    profile = meta.get("profile", "gpu")
    sizes = size_class({"profile": profile, "device": ref_device, **meta})
    cls = sizes.partition("/")[2]
    took = f", {cls} sizes" if cls else f", the {sizes!r} profile's sizes" if sizes != profile else ""
    host = f", host {meta['host']}" if meta.get("host") else ""
    return (f"recorded reference run on {ref_device} (this course's code, {profile} profile{took}, "
            f"torch {meta.get('torch', '?')}, {meta.get('date', 'date not recorded')}{host}), not on this machine:")


def reference_rows(notebook: str, prefixes: tuple[str, ...] = (), exclude: tuple[str, ...] = ()) -> list[str]:
    """The most recent recorded reference run's measurements of `notebook` whose keys start with one
    of `prefixes` (all when empty) and contain none of `exclude`, one printable line each; a row the
    reference machine measured on its CPU (its note names the CPU or gloo) says so."""
    _, ref = reference(notebook)
    return [f"  {fmt_row(k, row)}" + ("  [the reference machine's CPU, not its GPU]" if _ON_CPU.search(row.get("note", ""))
                                      else "")
            for k, row in ref.items()
            if (not prefixes or k.startswith(prefixes)) and not any(x in k for x in exclude)]


def reference_text(notebook: str, prefixes: tuple[str, ...] = ()) -> str:
    """The most recent recorded reference run of `notebook`, one line per measurement whose key
    starts with one of `prefixes` (all when empty), or one line saying none is recorded."""
    rows = reference_rows(notebook, prefixes)
    if not rows:
        return ("(no reference GPU run is recorded in results/ for this notebook yet)" if not reference(notebook)[1]
                else "(the recorded reference GPU run has no row for this yet)")
    return "\n".join([reference_header(notebook)] + rows)


def device_slug(device: str) -> str:
    """File name stem of a device's reference results: 'NVIDIA H100 80GB' -> 'nvidia-h100-80gb'."""
    return re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-")


def check_reference(reports: dict[str, dict]) -> str:
    """The one GPU that made every report in `reports` (notebook -> report dict), or a
    :class:`RecordError` if they are empty, from a profile other than gpu, from several
    devices, or from a CPU."""
    if not reports:
        raise RecordError("Nothing to record: no notebook of this run wrote a report.")
    not_gpu_profile = sorted(nb for nb, r in reports.items() if r.get("profile") != "gpu")
    if not_gpu_profile:
        raise RecordError(f"Reference results come from the gpu profile only, but the reports of "
                          f"{', '.join(not_gpu_profile)} were made under another profile.")
    devices = sorted({str(r.get("device")) for r in reports.values()})
    if len(devices) > 1:
        raise RecordError(f"The reports name {len(devices)} devices ({'; '.join(devices)}): "
                          f"a reference run must come from one GPU.")
    on_cpu = sorted(nb for nb, r in reports.items() if r.get("device_type") != "cuda")
    if on_cpu:
        raise RecordError(f"Reference results must come from a GPU, but {', '.join(on_cpu)} ran "
                          f"on {devices[0]}.")
    return devices[0]


def record_reference(reports: dict[str, dict], folder: Path | None = None) -> Path:
    """Merge this run's reports (notebook -> report dict) into ``results/<device>.json``.

    Every report must come from the same GPU under the gpu profile (else
    :class:`RecordError`, nothing written). Each notebook entry keeps its own device,
    torch/CUDA versions and date; the top level names the device and the latest recording.
    Notebooks recorded again replace their old entry; the file is written atomically.
    """
    dev = check_reference(reports)
    path = Path(folder or results_dir()) / f"{device_slug(dev)}.json"
    data: dict = {"notebooks": {}}
    if path.exists():
        try:
            data = json.loads(path.read_text())
        except ValueError:
            data = None
        if not isinstance(data, dict) or not isinstance(data.get("notebooks"), dict):
            raise RecordError(f"{path} is not a reference results file (JSON with a 'notebooks' "
                              f"object); move it aside to record a new one.")
        if data.get("device") != dev:
            raise RecordError(f"{path} holds results of {data.get('device')!r}, not {dev!r}; move "
                              f"it aside to record this device.")
    latest = max(reports.values(), key=lambda r: str(r.get("date")))
    data.update({k: latest.get(k) for k in ("device", "torch", "cuda", "date")})
    data["notebooks"].update(reports)
    data["notebooks"] = dict(sorted(data["notebooks"].items()))
    return files.write_text_atomic(path, json.dumps(data, indent=1))


# ---- one run, one set of numbers: the same quantity in several notebooks --------------------

# Two notebooks' measurements of one quantity agree when their ranges, each widened by this
# factor either way, overlap. Repeats of one notebook miss the drift between notebooks minutes
# apart, hence some slack; smoke measurements last 0.05 s each, hence more there.
AGREE_SLACK = {"smoke": 2.0, "cpu": 1.25, "gpu": 1.25}


@dataclass
class Shared:
    """One quantity (a report key, in one unit) measured by several notebooks of a run."""

    key: str
    unit: str
    rows: dict[str, dict]  # notebook -> its report row (value, spread)
    slack: float

    @property
    def same(self) -> bool:
        """True when every notebook recorded the very same value and range: one measurement
        shared (a stored peak, course_lib.peaks), not several that happen to agree."""
        firsts = [(row["value"], tuple(row.get("spread") or ())) for row in self.rows.values()]
        return len(set(firsts)) == 1

    @property
    def agree(self) -> bool:
        """True when the ranges (the value where no spread was recorded), each widened by
        `slack` either way, all overlap."""
        ranges = [row.get("spread") or (row["value"], row["value"]) for row in self.rows.values()]
        return max(lo for lo, _ in ranges) / self.slack <= min(hi for _, hi in ranges) * self.slack

    def __str__(self) -> str:
        each = ", ".join(f"{nb[:2]} {fmt_row_value(row)}" for nb, row in self.rows.items())
        verdict = ("one measurement, shared by these notebooks" if self.same
                   else f"agree (within {self.slack:g}× of each other's range)" if self.agree
                   else f"DISAGREE (more than {self.slack:g}× apart beyond their ranges)")
        return f"{self.key} [{self.unit}]: {each} | {verdict}"


def fmt_row_value(row: dict) -> str:
    """'213.6 (210.5–215.6)': a report row's value and the range of its repeats; a ratio's range
    with the digits it needs to show on which side of 1 its ends lie ('1.003 (1.0004–1.006)')."""
    lo_hi = row.get("spread")
    if not lo_hi:
        return fmt_value(row["value"])
    lo, hi = (fmt_value(v) for v in lo_hi)
    if row.get("unit") == "×":
        lo, hi = (_off_one(v, text) for v, text in zip(lo_hi, (lo, hi)))
    return f"{fmt_value(row['value'])} ({lo}–{hi})"


def _off_one(value: float, text: str) -> str:
    """`value` as `text`, or with more digits where `text` reads 1 and `value` is not 1."""
    digits = 4
    while float(text.replace(",", "")) == 1 and value != 1 and digits < 9:
        digits += 1
        text = f"{value:.{digits}g}"
    return text


def shared(reports: dict[str, dict]) -> list[Shared]:
    """Every numeric quantity that two or more of `reports` (notebook -> report, one run, one
    profile) recorded under the same key and unit, with the slack of that profile
    (:data:`AGREE_SLACK`)."""
    profiles_seen = {r["profile"] for r in reports.values()}
    if len(profiles_seen) > 1:
        raise ValueError(f"These reports come from several profiles ({', '.join(sorted(profiles_seen))}): "
                         "compare the reports of one run.")
    slack = AGREE_SLACK.get(next(iter(profiles_seen), "cpu"), 1.25)
    by_key: dict[tuple[str, str], dict[str, dict]] = {}
    for nb in sorted(reports):
        for key, row in reports[nb]["measurements"].items():
            if isinstance(row["value"], (int, float)):
                by_key.setdefault((key, row["unit"]), {})[nb] = row
    return [Shared(key, unit, rows, slack) for (key, unit), rows in by_key.items() if len(rows) > 1]
