"""``course test-gpu`` (``make test-gpu``): the whole course checked on a CUDA machine.

Three passes, in this order: the ``gpu``-marked tests (``pytest -m gpu``), every notebook
in the ``gpu`` profile with its report recorded in ``results/<device>.json`` (as ``course
run --profile gpu --record``), then every notebook again as on an 8 GiB card
(``COURSE_GPU_MEMORY_GIB=8``: the sizes of that class and PyTorch's allocator capped there),
not recorded. The work is packed into parts that each fit a ten-minute command on one
H100 (:func:`plan`); everything goes under one folder (:func:`layout`) with ``summary.md``,
which every part updates, so the parts may run in separate commands and in any order.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import torch

from course_lib import report

# Minutes per notebook on one H100 in the gpu profile: the longer of its two passes' wall times as
# measured by test-gpu on 2026-11-25 (H100 80GB HBM3, torch 2.11.0+cu130; the rows of
# results/nvidia-h100-80gb-hbm3.test-gpu.md), plus 10 %, rounded up to the next half minute.
# 09's 8 GiB pass stopped early (out of memory), so its recorded pass stands for both; 03 has
# run 90 more steps per precision since (~20 s more on the H100, from its measured step times).
# 11 and 12 have not run on a GPU yet (no GPU was lent when they were written): the table's
# largest figure stands for each until a test-gpu run measures it.
ESTIMATE_MIN = {"00": 0.5, "01": 1.0, "02": 1.5, "03": 2.0, "04": 1.0, "05": 1.0,
                "06": 3.0, "07": 1.0, "08": 3.0, "09": 1.5, "10": 2.0, "11": 3.0, "12": 3.0}
UNKNOWN_MIN = 3.0  # for a notebook missing from the table: the largest figure in it
PYTEST_MIN = 1.0  # `pytest -m gpu`: 29 s measured, collection (which imports the course) included
BUDGET_MIN = 8.0  # per part: a margin under the 9 minutes a part may take
SMALL_GIB = 8  # the simulated card of the third pass (device.allocator_limit: 8 GiB in all, the
# CUDA context included; a real 8 GB card reports a little less, so keep a margin in the sizes)
CELL_TIMEOUT_S = 480  # a hung cell fails inside its part instead of outliving the command

PYTEST, RECORD, SMALL = "pytest", "record", "small"
STEPS = {  # step -> (what the summary calls it, its folder under the output folder)
    PYTEST: ("pytest -m gpu", "pytest"),
    RECORD: ("gpu profile, --record", "record"),
    SMALL: (f"gpu profile, {SMALL_GIB} GiB card", f"gpu-{SMALL_GIB}gib"),
}
REFUSAL_NO_CUDA = ("PyTorch sees no CUDA GPU here, so test-gpu has nothing to check: run it on a "
                   "machine with an NVIDIA GPU and a CUDA build of PyTorch.")


class GpuCheckError(ValueError):
    """Bad input to ``course test-gpu`` (a part that does not exist, no CUDA), in one sentence."""


@dataclass(frozen=True)
class Item:
    """One unit of work: a step (pytest, record or small) on one thing ('tests' or a notebook)."""

    step: str
    name: str
    minutes: float  # expected on one H100 (ESTIMATE_MIN)

    @property
    def label(self) -> str:
        return f"{STEPS[self.step][0]}: {self.name}"


@dataclass(frozen=True)
class Part:
    """Items that run in one command, ``make test-gpu PART=number``."""

    number: int
    items: tuple[Item, ...]

    @property
    def minutes(self) -> float:
        return sum(i.minutes for i in self.items)

    def describe(self) -> str:
        """'part 2 (~7 min): gpu profile, --record: 06 07 08'."""
        groups: dict[str, list[str]] = {}
        for item in self.items:
            groups.setdefault(item.step, []).append(item.name if item.step == PYTEST else item.name[:2])
        what = "; ".join(STEPS[PYTEST][0] if step == PYTEST else f"{STEPS[step][0]}: {' '.join(names)}"
                         for step, names in groups.items())
        return f"part {self.number} (~{self.minutes:g} min): {what}"


def estimate(stem: str, table: dict[str, float] | None = None) -> float:
    """Estimated minutes of notebook `stem` ('08_transformer') on one H100, gpu profile."""
    return (ESTIMATE_MIN if table is None else table).get(stem[:2], UNKNOWN_MIN)


def pack(items: list[Item], budget: float = BUDGET_MIN) -> list[Part]:
    """Cut `items`, kept in order, into parts of at most `budget` estimated minutes: each
    part takes items until the next would exceed the budget (an item over the budget on its
    own gets a part to itself)."""
    parts: list[list[Item]] = []
    for item in items:
        if parts and sum(i.minutes for i in parts[-1]) + item.minutes <= budget:
            parts[-1].append(item)
        else:
            parts.append([item])
    return [Part(n, tuple(p)) for n, p in enumerate(parts, start=1)]


def plan(stems: list[str], table: dict[str, float] | None = None,
         budget: float = BUDGET_MIN) -> list[Part]:
    """The parts for the notebooks `stems`: pytest first, then the recorded pass, then the
    8 GiB pass, each notebook once per pass."""
    items = [Item(PYTEST, "tests", PYTEST_MIN)]
    for step in (RECORD, SMALL):
        items += [Item(step, s, estimate(s, table)) for s in stems]
    return pack(items, budget)


def select(parts: list[Part], part: str | int | None) -> list[Part]:
    """The parts to run: all when `part` is None, else the one numbered `part` (a
    :class:`GpuCheckError` for anything else)."""
    if part is None:
        return parts
    try:
        number = int(str(part).strip())
    except ValueError:
        number = 0
    if not 1 <= number <= len(parts):
        raise GpuCheckError(f"--part takes a part number from 1 to {len(parts)}, not {str(part)!r} "
                            f"(course test-gpu --list shows the parts).")
    return [parts[number - 1]]


def plan_text(parts: list[Part]) -> str:
    """The plan as ``course test-gpu --list`` prints it."""
    lines = [f"test-gpu runs in {len(parts)} parts of at most {BUDGET_MIN:g} min each on one H100 (the "
             f"wall times measured there, plus 10 %: a table in course_lib/workshop/gpucheck.py):"]
    lines += [f"  {p.describe()}" for p in parts]
    lines.append("Run one with `make test-gpu PART=N` or `python3 -m course_lib test-gpu --part N`; "
                 "without a part all run in turn.")
    return "\n".join(lines)


def layout(out: Path) -> dict[str, Path]:
    """Where everything goes under the output folder `out`."""
    return {
        "summary": out / "summary.md",  # the table of every step run so far, all parts
        "rows": out / "summary.json",  # the same rows, read back by the next part
        "pytest_log": out / STEPS[PYTEST][1] / "pytest.log",
        "junit": out / STEPS[PYTEST][1] / "junit.xml",
        RECORD: out / STEPS[RECORD][1],  # executed notebooks and reports/ of the recorded pass
        SMALL: out / STEPS[SMALL][1],  # the same for the 8 GiB pass
        "results": out / "results",  # a copy of results/<device>.json as recorded so far
    }


# ---- the summary, accumulated over parts ---------------------------------------------------

def load_rows(out: Path) -> list[dict]:
    """The rows that earlier parts wrote to ``summary.json`` (none when there is no file)."""
    path = layout(out)["rows"]
    if not path.exists():
        return []
    try:
        rows = json.loads(path.read_text()).get("rows", [])
    except (ValueError, AttributeError):
        raise GpuCheckError(f"{path} is not a test-gpu summary; move it aside or use another --out.") from None
    return [r for r in rows if isinstance(r, dict) and {"step", "name", "status"} <= set(r)]


def put_row(rows: list[dict], row: dict) -> list[dict]:
    """`rows` with `row` in place of an earlier row of the same step and name."""
    kept = [r for r in rows if (r["step"], r["name"]) != (row["step"], row["name"])]
    return sorted(kept + [row], key=lambda r: (r.get("part", 0), r.get("order", 0)))


def summary_text(rows: list[dict], parts: list[Part]) -> str:
    """``summary.md``: one line per step run so far, and which parts have not run yet."""
    done = {(r["step"], r["name"]) for r in rows if r["status"] != "STARTED"}
    waiting = [p.number for p in parts if not all((i.step, i.name) in done for i in p.items)]
    lines = ["# course test-gpu", "",
             "| part | step | what | status | wall s | device | torch | note |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        status = "CUT OFF (started, never finished)" if r["status"] == "STARTED" else r["status"]
        seconds = "" if r.get("seconds") is None else f"{r['seconds']:.0f}"
        note = str(r.get("note") or "").replace("|", "/").replace("\n", " ")
        lines.append(f"| {r.get('part', '')} | {STEPS.get(r['step'], (r['step'],))[0]} | {r['name']} "
                     f"| {status} | {seconds} | {r.get('device', '')} | {r.get('torch', '')} | {note} |")
    ok = sum(r["status"] == "OK" for r in rows)
    lines += ["", f"{ok}/{len(rows)} steps OK; "
              + (f"parts not run (or not finished) yet: {', '.join(map(str, waiting))}."
                 if waiting else f"all {len(parts)} parts have run.")]
    return "\n".join(lines)


def write_summary(out: Path, rows: list[dict], parts: list[Part]) -> None:
    """Write ``summary.json`` (the rows) and ``summary.md`` (their table)."""
    where = layout(out)
    where["rows"].write_text(json.dumps({"rows": rows}, indent=1))
    where["summary"].write_text(summary_text(rows, parts) + "\n")


# ---- running -------------------------------------------------------------------------------

StepFn = Callable[[Item, Path], tuple[bool, str]]  # (item, output folder) -> (ok, note)


def cuda_available() -> bool:
    return torch.cuda.is_available()


def gpu_description() -> tuple[str, str]:
    """(the current GPU's name, torch's version with its CUDA) for the summary."""
    name = torch.cuda.get_device_name(torch.cuda.current_device())
    return name, f"{torch.__version__} (CUDA {torch.version.cuda})"


def run_parts(parts: list[Part], all_parts: list[Part], out: Path, step: StepFn,
              device: str, torch_version: str, echo: Callable[[str], None] = print) -> bool:
    """Run the items of `parts` with `step`, updating the summary in `out` before and after
    each one (a part cut off mid-item leaves that item marked as cut off); True if all are OK."""
    out.mkdir(parents=True, exist_ok=True)
    rows = load_rows(out)
    order = {(i.step, i.name): n for n, i in enumerate(i for p in all_parts for i in p.items)}
    all_ok = True
    for part in parts:
        echo(part.describe())
        for item in part.items:
            row = {"part": part.number, "order": order[(item.step, item.name)], "step": item.step,
                   "name": item.name, "status": "STARTED", "seconds": None, "device": device,
                   "torch": torch_version, "note": "", "date": time.strftime("%Y-%m-%d %H:%M:%S")}
            rows = put_row(rows, row)
            write_summary(out, rows, all_parts)
            echo(f"  {item.label} ...")
            start = time.perf_counter()
            ok, note = step(item, out)
            row = {**row, "status": "OK" if ok else "FAILED", "note": note,
                   "seconds": round(time.perf_counter() - start, 1)}
            rows = put_row(rows, row)
            write_summary(out, rows, all_parts)
            echo(f"  {row['status']} {item.label} in {row['seconds']:.0f} s{': ' + note if note else ''}")
            all_ok &= ok
    return all_ok


@contextmanager
def memory_cap(gib: int | None) -> Iterator[None]:
    """``COURSE_GPU_MEMORY_GIB`` set to `gib` inside the block, or unset when `gib` is None
    (the recorded pass and the tests run on the whole card, whatever the caller's setting)."""
    from course_lib.device import MEMORY_CAP_ENV

    before = os.environ.get(MEMORY_CAP_ENV)
    if gib is None:
        os.environ.pop(MEMORY_CAP_ENV, None)
    else:
        os.environ[MEMORY_CAP_ENV] = str(gib)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(MEMORY_CAP_ENV, None)
        else:
            os.environ[MEMORY_CAP_ENV] = before


def run_pytest(out: Path) -> tuple[bool, str]:
    """``pytest -m gpu`` on the repository's tests, its output shown and kept in pytest.log."""
    where = layout(out)
    tests = report.REPO / "tests"
    if not tests.is_dir():
        return False, f"no tests/ folder in {report.REPO}: run test-gpu from a clone of the course"
    where["pytest_log"].parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pytest", "-m", "gpu", "-p", "no:cacheprovider",
           f"--junitxml={where['junit']}", str(tests)]
    last = ""
    with memory_cap(None), open(where["pytest_log"], "w") as log, subprocess.Popen(
            cmd, cwd=report.REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            log.write(line)
            last = line.strip(" =\n") or last
    if proc.returncode == 5:
        return False, "pytest collected no gpu-marked test"
    return proc.returncode == 0, last


def run_notebook(item: Item, out: Path, notebooks: Path, timeout_s: int) -> tuple[bool, str]:
    """Execute one notebook in the gpu profile into its pass's folder; in the recorded pass,
    merge its report into results/<device>.json and copy that file under `out`."""
    from course_lib.workshop import runner  # papermill and Jupyter: only when a notebook runs

    folder = layout(out)[item.step]
    with memory_cap(SMALL_GIB if item.step == SMALL else None):
        result = runner.execute(notebooks / f"{item.name}.ipynb", "gpu", folder, timeout_s=timeout_s)
    if not result.ok:
        return False, result.error or "failed"
    if item.step != RECORD:
        return True, ""
    found = runner.reports([result], folder)
    if not found:
        return False, "ran, but saved no report, so nothing was recorded"
    try:
        path = report.record_reference(found)
    except report.RecordError as exc:
        return False, str(exc)
    copy = layout(out)["results"] / path.name
    copy.parent.mkdir(parents=True, exist_ok=True)
    if copy.resolve() != path.resolve():
        shutil.copyfile(path, copy)
    return True, f"recorded in {path}"


def run_step(item: Item, out: Path, notebooks: Path, timeout_s: int = CELL_TIMEOUT_S) -> tuple[bool, str]:
    """Run one item for real: pytest, or a notebook."""
    if item.step == PYTEST:
        return run_pytest(out)
    return run_notebook(item, out, notebooks, timeout_s)


def command(notebooks: Path, out: Path, part: str | None = None, list_only: bool = False,
            timeout_s: int = CELL_TIMEOUT_S, step: StepFn | None = None,
            echo: Callable[[str], None] = print) -> int:
    """``course test-gpu``: 0 when every item run is OK, 1 otherwise. Without CUDA (and for a
    part that does not exist) a :class:`GpuCheckError` before anything runs or is written."""
    stems = [p.stem for p in sorted(Path(notebooks).glob("[0-9][0-9]_*.ipynb"))]
    if not stems:
        raise GpuCheckError(f"no notebook (NN_name.ipynb) in {notebooks}.")
    parts = plan(stems)
    chosen = select(parts, part)
    if list_only:
        echo(plan_text(parts))
        return 0
    if not cuda_available():
        raise GpuCheckError(REFUSAL_NO_CUDA)
    name, version = gpu_description()
    echo(f"course test-gpu on {name}, torch {version}, into {out}/")
    run = step or (lambda item, folder: run_step(item, folder, Path(notebooks), timeout_s))
    ok = run_parts(chosen, parts, Path(out), run, name, version, echo)
    echo("\n" + layout(Path(out))["summary"].read_text())
    return 0 if ok else 1
