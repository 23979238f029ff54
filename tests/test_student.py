"""Student copies (course student, nbgrader): no solution left, every check kept, and each copy
runs under smoke with every unsolved exercise reported in one sentence and no other error."""

import re

import nbformat
import pytest
import torch

from conftest import NOTEBOOKS, REPO
from course_lib import runner, student

OUT = REPO / "build" / f"test-student-torch-{torch.__version__.split('+')[0]}"
NOT_DONE = re.compile(r"^not done yet: .+$", re.M)
ids = [p.stem for p in NOTEBOOKS]


@pytest.fixture(scope="module")
def copies(tmp_path_factory):
    folder = tmp_path_factory.mktemp("student")
    written = student.write_copies(NOTEBOOKS, folder)
    return {p.stem: p for p in written}


def test_every_notebook_has_an_exercise_and_a_copy(copies):
    assert sorted(copies) == ids
    for path in NOTEBOOKS:
        assert student.exercise_cells(nbformat.read(path, as_version=4)), f"{path.name} has no exercise"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_copy_has_no_solution_and_keeps_every_other_line(path, copies):
    source = nbformat.read(path, as_version=4)
    copy = nbformat.read(copies[path.stem], as_version=4)
    assert student.verify(source, copy) == []
    text = "\n".join(c.source for c in copy.cells)
    assert student.BEGIN not in text and student.END not in text
    for i in student.exercise_cells(source):
        check_lines = [ln for ln in student._outside(source.cells[i].source) if ln.strip()]
        assert [ln for ln in copy.cells[i].source.splitlines() if ln in check_lines] == check_lines


def _cell(code: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# x"), nbformat.v4.new_code_cell(code)]
    return nb


def test_verify_catches_a_leaked_solution_and_a_changed_check():
    src = _cell("def f(n):\n    ### BEGIN SOLUTION\n    return 2 * n\n    ### END SOLUTION\n\n\ncheck(f)")
    good = _cell("def f(n):\n    # YOUR CODE HERE\n    raise NotImplementedError()\n\n\ncheck(f)")
    leaked = _cell("def f(n):\n    raise NotImplementedError()\n    return 2 * n\n\n\ncheck(f)")
    changed = _cell("x = 1")
    assert student.verify(src, good) == []
    assert any("solution" in p for p in student.verify(src, leaked))
    assert student.verify(_cell("x = 2"), changed) == ["cell 1 differs from the source but holds no exercise"]


def test_nested_markers_get_one_sentence(tmp_path):
    bad = _cell("def f():\n    ### BEGIN SOLUTION\n    ### BEGIN SOLUTION\n    pass\n    ### END SOLUTION\n")
    path = tmp_path / "99_bad.ipynb"
    nbformat.write(bad, path)
    with pytest.raises(student.StudentError, match="99_bad.ipynb, cell 1"):
        student.write_copies([path], tmp_path / "out")


def _printed(nb: nbformat.NotebookNode) -> str:
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                   for o in c.get("outputs", []) if o.output_type == "stream" and o.name == "stdout")


@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_student_copy_runs_under_smoke_reporting_each_unsolved_exercise(path, copies):
    result = runner.execute(copies[path.stem], "smoke", OUT, timeout_s=120)
    assert result.ok, f"student copy of {path.name}: {result.error}"
    ran = nbformat.read(result.output, as_version=4)
    errors = [o for c in ran.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors
    lines = NOT_DONE.findall(_printed(ran))
    source = nbformat.read(path, as_version=4)
    exercises = student.exercise_cells(source)
    assert len(lines) == len(exercises), lines
    by_id = {c.get("id"): c for c in ran.cells}  # papermill adds a cell: match by id, not index
    for i in exercises:  # the sentence sits under its own exercise, naming the learner's function
        cell = by_id[source.cells[i].get("id")]
        said = NOT_DONE.findall(_printed(nbformat.v4.new_notebook(cells=[cell])))
        defined = re.findall(r"^def (\w+)", cell.source, re.M)
        assert len(said) == 1 and any(f"`{name}` still raises" in said[0] for name in defined), said
