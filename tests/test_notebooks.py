"""Every notebook runs once, end to end, under papermill (smoke), exactly as `course run`
runs it: the executed copy stays in build/, its report must hold measurements, and the
cells tagged `nbval-check-output` (deterministic facts) must print what they print in the
committed notebook. Committed notebooks carry no other output."""

import json
import re
import subprocess
import sys

import nbformat
import pytest
import torch

from conftest import NOTEBOOKS, REPO, needs_tool
from course_lib import runner

# One folder per torch release, so the newest and the oldest-supported runs sit side by side.
OUT = REPO / "build" / f"test-smoke-torch-{torch.__version__.split('+')[0]}"
SANITIZE = REPO / "tests" / "nbval_sanitize.cfg"  # nbval's format: `regex:` / `replace:` pairs
CHECKED = "nbval-check-output"  # the tag nbval --nbval-lax compares; always with keep_output
ids = [p.stem for p in NOTEBOOKS]


def _sanitize(text: str) -> str:
    for pattern, replacement in re.findall(r"^regex: (.*)\nreplace: (.*)$", SANITIZE.read_text(), re.M):
        text = re.sub(pattern, replacement, text)
    return text


def _printed(cell: nbformat.NotebookNode) -> str:
    """What a cell showed as text (streams joined, so chunking does not matter), sanitized."""
    parts = []
    for out in cell.get("outputs", []):
        if out.output_type == "stream":
            parts.append(out.text)
        elif out.output_type in ("execute_result", "display_data"):
            parts.append(out.data.get("text/plain", ""))
        elif out.output_type == "error":
            parts.append(f"{out.ename}: {out.evalue}\n")
    return _sanitize("".join(parts))


def kept_output_mismatches(committed: nbformat.NotebookNode, executed: nbformat.NotebookNode) -> list[str]:
    """One line per checked cell whose executed text differs from the committed text."""
    ran = {c.get("id"): c for c in executed.cells}
    problems = []
    for cell in committed.cells:
        if CHECKED not in cell.metadata.get("tags", []):
            continue
        first = cell.source.splitlines()[0][:60] if cell.source else ""
        if cell.get("id") not in ran:
            problems.append(f"cell {first!r} is missing from the executed notebook")
            continue
        want, got = _printed(cell), _printed(ran[cell.get("id")])
        if want != got:
            problems.append(f"cell {first!r} printed:\n{got}\ninstead of the committed:\n{want}")
    return problems


@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_notebook_runs_once_under_smoke(path):
    # A smoke cell takes seconds; 120 s bounds a stall: in fresh CI runs one widget cell's
    # reply reached nbclient only when its time-out expired (the cell then passed).
    result = runner.execute(path, "smoke", OUT, timeout_s=120)
    assert result.ok, f"{path.name}: {result.error}"
    report = json.loads((OUT / "reports" / f"{path.stem}.json").read_text())
    assert report["profile"] == "smoke" and report["measurements"], "the notebook recorded nothing"
    executed = nbformat.read(result.output, as_version=4)
    problems = kept_output_mismatches(nbformat.read(path, as_version=4), executed)
    assert not problems, f"{path.name}: " + "\n".join(problems)
    unsolved = [c.source.splitlines()[0] for c in executed.cells
                if "not done yet:" in "".join(o.get("text", "") for o in c.get("outputs", []))]
    assert not unsolved, f"{path.name}: the committed solutions must pass their checks: {unsolved}"


def _nb(*cells: tuple[str, list[str], str]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    for i, (source, tags, printed) in enumerate(cells):
        cell = nbformat.v4.new_code_cell(source, id=f"c{i}")
        cell.metadata["tags"] = tags
        if printed:
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=printed)]
        nb.cells.append(cell)
    return nb


def test_kept_output_comparison_catches_a_changed_fact_and_ignores_the_rest():
    tags = ["keep_output", CHECKED]
    committed = _nb(("print(1 + 1)", tags, "2\n"), ("print(t)", [], ""))
    same = _nb(("print(1 + 1)", tags, "2\n"), ("print(t)", [], "41.3 ms\n"))
    chunked = _nb(("print(1 + 1)", tags, "2"), ("print(t)", [], ""))
    chunked.cells[0].outputs.append(nbformat.v4.new_output("stream", name="stdout", text="\n"))
    changed = _nb(("print(1 + 1)", tags, "3\n"), ("print(t)", [], ""))
    assert kept_output_mismatches(committed, same) == []
    assert kept_output_mismatches(committed, chunked) == []
    [problem] = kept_output_mismatches(committed, changed)
    assert "3" in problem and "2" in problem
    assert kept_output_mismatches(committed, _nb()) == ["cell 'print(1 + 1)' is missing from the executed notebook"]


def test_sanitizer_hides_addresses_and_bar_timings():
    assert _sanitize("<object at 0x7f3a2b>") == "<object at 0xADDRESS>"
    assert _sanitize("100%|####| 4/4 [00:01<00:00, 3.2it/s]") == "100%|####| 4/4 [TIME]"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_notebook_is_committed_clean(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    tags = [set(c.metadata.get("tags", [])) for c in code]
    assert code and "parameters" in tags[0], "the first code cell must be tagged 'parameters'"
    assert "PROFILE" in code[0].source and "COURSE_PROFILE" in code[0].source
    for cell, t in zip(code, tags):
        assert "NBVAL_" not in cell.source, f"nbval comment markers do nothing here: {cell.source[:60]!r}"
        if "keep_output" in t:
            assert cell.outputs, f"keep_output cell has no frozen output: {cell.source[:60]!r}"
            assert CHECKED in t
        else:
            assert not cell.outputs, f"stray output in {path.name}: {cell.source[:60]!r}"
    assert any(CHECKED in t for t in tags), "no cell for the kept-output comparison"


def test_course_has_its_first_notebooks():
    assert [p.stem[:2] for p in NOTEBOOKS][:2] == ["00", "01"]


# ---- authoring: `make freeze` (nbconvert + nbstripout) and `make check-stripped` ----------------

def make(*args: str) -> subprocess.CompletedProcess:
    """A Makefile target run with this test's environment as VENV (never reinstalled here)."""
    return subprocess.run(["make", "-s", "-o", f"{sys.prefix}/.installed", f"VENV={sys.prefix}", *args],
                          cwd=REPO, capture_output=True, text=True, timeout=300)


@needs_tool("nbstripout")
def test_committed_notebooks_are_what_nbstripout_leaves():
    done = make("check-stripped")
    assert done.returncode == 0, done.stdout + done.stderr


@needs_tool("nbstripout")
def test_freeze_runs_under_smoke_keeps_only_kept_outputs_and_a_failure_changes_nothing(tmp_path):
    nb = _nb(("import os\nPROFILE = os.environ.get('COURSE_PROFILE', 'auto')", ["parameters"], ""),
             ("print(PROFILE)", ["keep_output", CHECKED], ""), ("print('a timing')", [], ""))
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "00_x.ipynb"
    nbformat.write(nb, path)
    done = make("freeze", f"NB={path}")
    assert done.returncode == 0, done.stdout + done.stderr
    frozen = nbformat.read(path, as_version=4)
    assert [_printed(c) for c in frozen.cells] == ["", "smoke\n", ""]
    assert [c.get("id") for c in frozen.cells] == ["c0", "c1", "c2"]  # ids kept: the comparison needs them
    assert make("check-stripped", f"NB={path}").returncode == 0

    frozen.cells[2].source = "raise ValueError('a broken cell')"
    nbformat.write(frozen, path)
    before = path.read_bytes()
    assert make("freeze", f"NB={path}").returncode != 0
    assert path.read_bytes() == before
