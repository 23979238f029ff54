"""Student copies (course student, nbgrader): no solution left, every check kept, bad selections
refused in one sentence. Each copy runs in JupyterLab under smoke, every unsolved exercise
reported once and no other error, in tests/test_browser.py (make test-browser, run by CI)."""

import nbformat
import pytest

from conftest import NOTEBOOKS, needs_tool
from course_lib.workshop import student

ids = [p.stem for p in NOTEBOOKS]


@pytest.fixture(scope="module")
def copies(tmp_path_factory):
    folder = tmp_path_factory.mktemp("student")
    written = student.write_copies(NOTEBOOKS, folder)
    return {p.stem: p for p in written}


@needs_tool("nbgrader")
def test_every_notebook_has_an_exercise_and_a_copy(copies):
    assert sorted(copies) == ids
    for path in NOTEBOOKS:
        assert student.exercise_cells(nbformat.read(path, as_version=4)), f"{path.name} has no exercise"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
@needs_tool("nbgrader")
def test_copy_has_no_solution_and_keeps_every_other_line(path, copies):
    source = nbformat.read(path, as_version=4)
    copy = nbformat.read(copies[path.stem], as_version=4)
    assert student.verify(source, copy) == []
    text = "\n".join(c.source for c in copy.cells)
    assert student.BEGIN not in text and student.END not in text
    for i in student.exercise_cells(source):
        check_lines = [ln for ln in student.split(source.cells[i].source)[1] if ln.strip()]
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


@needs_tool("nbgrader")
def test_refusals_are_one_sentence_and_write_nothing(tmp_path, copies):
    src = tmp_path / "src"
    src.mkdir()
    (src / "00_x.ipynb").write_bytes(NOTEBOOKS[0].read_bytes())
    before = (src / "00_x.ipynb").read_bytes()
    with pytest.raises(student.StudentError, match="overwrite their solutions"):
        student.write_copies([src / "00_x.ipynb"], src)  # out = the notebooks' own folder
    assert (src / "00_x.ipynb").read_bytes() == before
    with pytest.raises(student.StudentError, match="student copy already"):
        student.write_copies([copies[NOTEBOOKS[0].stem]], tmp_path / "again")
    with pytest.raises(student.StudentError, match="no notebook"):
        student.write_copies([], tmp_path / "none")
    assert not (tmp_path / "again").exists() and not (tmp_path / "none").exists()
