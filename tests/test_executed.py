"""Checked on the executed copies that the README's first command, `make course PROFILE=smoke`,
leaves in build/: each notebook's report holds measurements of that smoke run, each exercise's
committed solution passes its check, each cell that draws a figure shows it, and each kept
output (cells tagged nbval-check-output) prints what the committed notebook shows, compared as
nbval compares it (its stream merging, its sanitizers, the keys it skips), so that CI executes
the notebooks once with the newest releases, not twice (nbval itself runs at the oldest end and
in `make test`). CI runs it right after that command, naming the folder:

    COURSE_EXECUTED=build .venv/bin/python -m pytest tests/test_executed.py

Named so, a copy that is missing, stale or of another profile fails; unnamed, the tests look in
build/ and skip such a copy with the reason."""

import copy
import difflib
import json
import os
import re
from collections import defaultdict
from datetime import datetime
from typing import NoReturn

import nbformat
import pytest
from nbval.plugin import coalesce_streams, get_sanitize_patterns, transform_streams_for_comparison

from conftest import CHECKED, NOTEBOOKS, REPO

NAMED = os.environ.get("COURSE_EXECUTED")
FOLDER = REPO / (NAMED or "build")
# A figure drawn at a cell's top level, not in a branch (a branch may be GPU-only): the inline
# backend shows it when the cell ends.
DRAWS = re.compile(r"^(\w+(, *\w+)* *= *)?(plt\.subplots|plot\.(timing_bars|bars|curves|rate_vs_size))\(", re.M)
# nbval's settings: its sanitizers (pyproject.toml's addopts) and the output keys it does not
# compare (nbval 0.11's skip_compare without --nbdime)
SANITIZE = get_sanitize_patterns((REPO / "tests" / "nbval_sanitize.cfg").read_text())
SKIPPED = {"metadata", "traceback", "prompt_number", "output_type", "name", "execution_count",
           "application/vnd.jupyter.widget-view+json", "image/png", "image/jpeg"}


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


def comparable(outputs: list) -> dict[str, list]:
    """A cell's outputs as nbval compares them: streams merged (\\r and \\b applied), each
    stream keyed by its name, the data's MIME types flattened out, skipped keys dropped, every
    string sanitized. Two cells agree for nbval when these are equal."""
    flat = defaultdict(list)
    for out in transform_streams_for_comparison(coalesce_streams(copy.deepcopy(outputs))):
        for key, value in out.items():
            for k, v in (value.items() if key == "data" else [(key, value)]):
                if k not in SKIPPED:
                    flat[k].append(_sanitized(v))
    return dict(flat)


def _sanitized(value):
    if isinstance(value, str):
        for regex, replace in SANITIZE:
            value = re.sub(regex, replace, value)
    return value


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


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_the_smoke_run_printed_every_kept_output(path):
    ran = executed_copy(path)
    cells = [c for c in ran.cells if "injected-parameters" not in c.metadata.get("tags", [])]
    kept = [(c, r) for c, r in zip(nbformat.read(path, as_version=4).cells, cells)
            if CHECKED in c.metadata.get("tags", []) and c.execution_count is not None]
    assert kept, "no kept output to compare"
    differ = [f"{c.source.splitlines()[0]}\n" + "\n".join(difflib.unified_diff(
        json.dumps(comparable(c.outputs), indent=1).splitlines(),
        json.dumps(comparable(r.outputs), indent=1).splitlines(), "committed", "this run", lineterm=""))
              for c, r in kept if comparable(c.outputs) != comparable(r.outputs)]
    assert not differ, "kept outputs that this run printed otherwise:\n" + "\n".join(differ)


def test_the_comparison_is_nbvals():
    def stream(text, name="stdout"):
        return nbformat.v4.new_output("stream", name=name, text=text)

    assert comparable([stream("2\n")]) != comparable([stream("3\n")])
    assert comparable([stream("<object object at 0x7f3a2b>\n")]) == comparable([stream("<object object at 0x55aa01>\n")])
    assert comparable([stream("[00:09<00:02, 1.0it/s]\n")]) == comparable([stream("[00:01<00:00, 3.2it/s]\n")])
    assert comparable([stream("10%\r100%\n")]) == comparable([stream("100%\n")])  # a bar's redraws
    assert comparable([stream("a\n"), stream("b\n")]) == comparable([stream("a\nb\n")])
    assert comparable([stream("a\n", "stderr")]) != comparable([stream("a\n")])
    figure = nbformat.v4.new_output("display_data", data={"image/png": "AAAA", "text/plain": "<Figure>"})
    redrawn = nbformat.v4.new_output("display_data", data={"image/png": "BBBB", "text/plain": "<Figure>"})
    assert comparable([figure]) == comparable([redrawn])  # nbval leaves the pixels out
    assert comparable([figure]) != comparable([])
