"""The committed notebooks: clean (no output but the kept cells', which nbval compares), each
with its parameters cell; nbval's comparison and sanitizing, shown on a small notebook; and the
authoring targets `make freeze` and `make check-stripped`. make test validates the notebooks
themselves with nbval (`--nbval-lax`, settings in pyproject.toml): every cell runs, and the cells
tagged `nbval-check-output` (deterministic facts) must print what they print in the committed
notebook. What nbval cannot check is checked on `make course`'s executed copies (test_executed.py)."""

import subprocess
import sys

import nbformat
import pytest

from conftest import CHECKED, MAKE, NOTEBOOKS, REPO, needs_tool

SANITIZE = REPO / "tests" / "nbval_sanitize.cfg"  # nbval's format: `regex:` / `replace:` pairs
ids = [p.stem for p in NOTEBOOKS]


def _nb(*cells: tuple[str, list[str], str]) -> nbformat.NotebookNode:
    """A notebook of code cells (source, tags, what it printed), numbered as a run numbers them."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    for i, (source, tags, printed) in enumerate(cells):
        cell = nbformat.v4.new_code_cell(source, id=f"c{i}", execution_count=i + 1)
        cell.metadata["tags"] = tags
        if printed:
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=printed)]
        nb.cells.append(cell)
    return nb


def nbval(path) -> subprocess.CompletedProcess:
    """nbval on one notebook with the course's settings, outside the repository's pytest config."""
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax",
                           "--nbval-current-env", "--nbval-sanitize-with", str(SANITIZE), path.name],
                          cwd=path.parent, capture_output=True, text=True, timeout=120)


@pytest.mark.notebook  # slow: three kernels, about 10 s
def test_nbval_fails_on_a_changed_kept_output_and_sanitizes_addresses_and_bar_timings(tmp_path):
    tags = ["keep_output", CHECKED]
    path = tmp_path / "kept.ipynb"
    nbformat.write(_nb(("print(1 + 1)", tags, "2\n"), ("print(object())", tags, "<object object at 0x7f3a2b>\n"),
                       ("print('[00:01<00:00, 3.2it/s]')", tags, "[00:09<00:02, 1.0it/s]\n"),
                       ("print('a timing', 41.3)", [], "")), path)
    done = nbval(path)
    assert done.returncode == 0, done.stdout + done.stderr
    changed = nbformat.read(path, as_version=4)
    changed.cells[0].outputs[0].text = "3\n"
    nbformat.write(changed, path)
    assert nbval(path).returncode == 1
    unnumbered = nbformat.read(path, as_version=4)
    unnumbered.cells[0].outputs[0].text, unnumbered.cells[0].execution_count = "2\n", None
    nbformat.write(unnumbered, path)
    assert nbval(path).returncode == 1, "a kept output without an execution count must fail nbval"


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
            assert cell.execution_count, f"nbval compares only a numbered cell: {cell.source[:60]!r}"
        else:
            assert not cell.outputs, f"stray output in {path.name}: {cell.source[:60]!r}"
    assert any(CHECKED in t for t in tags), "no cell for the kept-output comparison"


def test_course_has_its_first_notebooks():
    assert [p.stem[:2] for p in NOTEBOOKS][:2] == ["00", "01"]


# ---- authoring: `make freeze` (nbconvert + nbstripout) and `make check-stripped` ----------------

def make(*args: str) -> subprocess.CompletedProcess:
    """A Makefile target run with this test's environment as VENV (never reinstalled here)."""
    return subprocess.run([*MAKE, *args], cwd=REPO, capture_output=True, text=True, timeout=300)


@needs_tool("nbstripout")
def test_committed_notebooks_are_what_nbstripout_leaves():
    done = make("check-stripped")
    assert done.returncode == 0, done.stdout + done.stderr


@needs_tool("nbstripout")
def test_freeze_runs_under_smoke_keeps_only_kept_outputs_and_a_failure_changes_nothing(tmp_path):
    nb = _nb(("import os\nPROFILE = os.environ.get('COURSE_PROFILE', 'auto')", ["parameters"], ""),
             ("print(PROFILE)", ["keep_output", CHECKED], ""), ("print('a timing')", [], ""))
    path = tmp_path / "00_x.ipynb"
    nbformat.write(nb, path)
    done = make("freeze", f"NB={path}")
    assert done.returncode == 0, done.stdout + done.stderr
    frozen = nbformat.read(path, as_version=4)
    assert ["".join(o.text for o in c.outputs) for c in frozen.cells] == ["", "smoke\n", ""]
    assert [c.get("id") for c in frozen.cells] == ["c0", "c1", "c2"]  # ids kept
    assert [c.execution_count for c in frozen.cells] == [1, 2, 3]  # counts kept: nbval needs them
    assert make("check-stripped", f"NB={path}").returncode == 0

    frozen.cells[2].source = "raise ValueError('a broken cell')"
    nbformat.write(frozen, path)
    before = path.read_bytes()
    assert make("freeze", f"NB={path}").returncode != 0
    assert path.read_bytes() == before
