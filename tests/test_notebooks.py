"""Every notebook runs end-to-end under papermill (smoke) and is committed clean."""

import json

import nbformat
import pytest

from conftest import NOTEBOOKS, REPO
from course_lib import runner

OUT = REPO / "build" / "test-smoke"
ids = [p.stem for p in NOTEBOOKS]


@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_notebook_runs_under_smoke(path):
    result = runner.execute(path, "smoke", OUT, timeout_s=300)
    assert result.ok, f"{path.name}: {result.error}"
    report = json.loads((OUT / "reports" / f"{path.stem}.json").read_text())
    assert report["profile"] == "smoke" and report["measurements"], "the notebook recorded nothing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_notebook_is_committed_clean(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    tags = [set(c.metadata.get("tags", [])) for c in code]
    assert code and "parameters" in tags[0], "the first code cell must be tagged 'parameters'"
    assert "PROFILE" in code[0].source and "COURSE_PROFILE" in code[0].source
    for cell, t in zip(code, tags):
        if "keep_output" in t:
            assert cell.outputs, f"keep_output cell has no frozen output: {cell.source[:60]!r}"
            assert "nbval-check-output" in t
        else:
            assert not cell.outputs, f"stray output in {path.name}: {cell.source[:60]!r}"
    assert any("nbval-check-output" in t for t in tags), "no cell for nbval to compare"


def test_course_has_its_first_notebooks():
    assert [p.stem[:2] for p in NOTEBOOKS][:2] == ["00", "01"]
