"""What nbval cannot check, checked on the executed copies that the README's first command,
`make course PROFILE=smoke`, leaves in build/: each notebook's report holds measurements of
that smoke run, each exercise's committed solution passes its check, and each cell that draws a
figure shows it. CI runs it right after that command, naming the folder:

    COURSE_EXECUTED=build .venv/bin/python -m pytest tests/test_executed.py

Named so, a copy that is missing, stale or of another profile fails; unnamed, the tests look in
build/ and skip such a copy with the reason."""

import json
import os
import re
from datetime import datetime
from typing import NoReturn

import nbformat
import pytest

from conftest import NOTEBOOKS, REPO

NAMED = os.environ.get("COURSE_EXECUTED")
FOLDER = REPO / (NAMED or "build")
# A figure drawn at a cell's top level, not in a branch (a branch may be GPU-only): the inline
# backend shows it when the cell ends.
DRAWS = re.compile(r"^(\w+(, *\w+)* *= *)?(plt\.subplots|plot\.(timing_bars|bars|curves|rate_vs_size))\(", re.M)


def smoke_copy(path) -> tuple[nbformat.NotebookNode | None, str]:
    """The smoke run's executed copy of `path` in FOLDER, if it ran this commit's notebook;
    else None and why not."""
    copy = FOLDER / path.name
    if not copy.exists():
        return None, f"{copy} does not exist"
    ran = nbformat.read(copy, as_version=4)
    profile = ran.metadata.get("papermill", {}).get("parameters", {}).get("PROFILE")
    sources = [c.source for c in ran.cells if "injected-parameters" not in c.metadata.get("tags", [])]
    if profile != "smoke":
        return None, f"{copy} ran with PROFILE={profile!r}, not 'smoke'"
    if sources != [c.source for c in nbformat.read(path, as_version=4).cells]:
        return None, f"{copy} was executed from another version of {path.name}"
    return ran, ""


def report_of(path, ran: nbformat.NotebookNode) -> dict:
    """The report that the run which left `ran` saved (written between its start and its end);
    else fail (folder named) or skip (not named)."""
    saved = FOLDER / "reports" / f"{path.stem}.json"
    run = ran.metadata["papermill"]
    start, end = (datetime.fromisoformat(run[k]).timestamp() for k in ("start_time", "end_time"))
    if saved.exists() and start <= saved.stat().st_mtime <= end + 1:
        return json.loads(saved.read_text())
    unavailable(f"{saved} was not saved by the run that left {FOLDER / path.name}")


def executed_copy(path) -> nbformat.NotebookNode:
    """:func:`smoke_copy`, or fail (folder named) or skip (not named) with the reason."""
    ran, problem = smoke_copy(path)
    if ran is None:
        unavailable(problem)
    return ran


def unavailable(problem: str) -> NoReturn:
    if NAMED:
        pytest.fail(problem)
    pytest.skip(f"{problem}: run `make course PROFILE=smoke` first")


def _text(cell: nbformat.NotebookNode) -> str:
    return "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in cell.get("outputs", []))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_the_smoke_run_measured_solved_and_drew(path):
    ran = executed_copy(path)
    report = report_of(path, ran)
    assert report["profile"] == "smoke" and report["measurements"], "the notebook recorded nothing"
    code = [c for c in ran.cells if c.cell_type == "code"]
    unsolved = [c.source.splitlines()[0] for c in code if "not done yet:" in _text(c)]
    assert not unsolved, f"the committed solutions must pass their checks: {unsolved}"
    undrawn = [c.source.splitlines()[0] for c in code if DRAWS.search(c.source)
               and not any("image/png" in o.get("data", {}) for o in c.outputs)]
    assert not undrawn, f"cells that draw a figure but show none: {undrawn}"
    assert any("image/png" in o.get("data", {}) for c in code for o in c.outputs), "no figure at all"
