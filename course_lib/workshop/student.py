"""Student copies of the notebooks, written by nbgrader from the committed (instructor) ones.

The committed notebooks are the instructor copies: each exercise's answer sits between
nbgrader's markers, ``### BEGIN SOLUTION`` and ``### END SOLUTION``, inside the function the
learner writes. ``course student`` (``make student``) runs nbgrader's ``generate_assignment``
(offline, no database, no cell metadata needed) on a temporary course folder and keeps its
release: each solution becomes nbgrader's stub, ``raise NotImplementedError()``, and every
other line, the checks included, stays. A check on a stub prints ``not done yet: …``
(``check.exercise``) and the notebook runs on: no later cell uses a learner's answer.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Sequence

import nbformat

from course_lib.files import write_text_atomic

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
STUB = "raise NotImplementedError()"  # nbgrader's stub for Python code
ASSIGNMENT = "course"  # the assignment name nbgrader needs; only the temporary folder sees it


class StudentError(RuntimeError):
    """Student copies could not be written; the message is one sentence for the instructor."""


def exercise_cells(nb: nbformat.NotebookNode) -> list[int]:
    """Indices of the code cells that hold one or more solution regions (one check each)."""
    return [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and BEGIN in c.source]


def split(source: str) -> tuple[list[str], list[str]]:
    """(lines inside solution regions, lines outside them) of a cell; marker lines in neither."""
    inside, parts = False, ([], [])
    for line in source.splitlines():
        if line.strip() in (BEGIN, END):
            inside = line.strip() == BEGIN
        else:
            parts[0 if inside else 1].append(line)
    return parts


def _check_markers(path: Path, nb: nbformat.NotebookNode) -> None:
    """One sentence for a notebook whose markers nbgrader would reject or misread."""
    for i in exercise_cells(nb):
        marks = [ln.strip() for ln in nb.cells[i].source.splitlines() if ln.strip() in (BEGIN, END)]
        if marks != [BEGIN, END] * (len(marks) // 2) or len(marks) % 2:
            raise StudentError(f"{path.name}, cell {i}: every `{BEGIN}` needs its own `{END}` "
                               f"after it, not nested.")


def generate(notebooks: Sequence[Path], root: Path) -> Path:
    """Run ``nbgrader generate_assignment`` on copies of `notebooks` in the course folder
    `root`; return the folder of the student copies."""
    if importlib.util.find_spec("nbgrader") is None:
        raise StudentError("student copies need nbgrader: install the instructor tools with "
                           "`pip install -e '.[instructor]'` (make student does it).")
    source = root / "source" / ASSIGNMENT
    source.mkdir(parents=True)
    for path in notebooks:
        shutil.copy2(path, source / path.name)
    cmd = [sys.executable, "-m", "nbgrader", "generate_assignment", ASSIGNMENT, "--no-db",
           "--no-metadata", "--force", f"--CourseDirectory.root={root}"]
    # nbgrader's defaults (stub, markers), not a user's ~/.jupyter/nbgrader_config.py
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(root / "config"), "JUPYTER_CONFIG_PATH": ""}
    done = subprocess.run(cmd, cwd=root, capture_output=True, text=True, env=env)
    if done.returncode:
        errors = [ln for ln in done.stderr.splitlines() if "ERROR" in ln or "Error" in ln]
        raise StudentError(f"nbgrader could not write the student copies: "
                           f"{(errors or done.stderr.splitlines() or ['no message'])[-1].strip()}")
    return root / "release" / ASSIGNMENT


def verify(source: nbformat.NotebookNode, copy: nbformat.NotebookNode) -> list[str]:
    """What is wrong with a student copy of `source`: one line per problem, [] when its cells
    are the source's cells with every solution replaced by the stub."""
    if len(copy.cells) != len(source.cells):
        return [f"{len(copy.cells)} cells, the source has {len(source.cells)}"]
    problems = []
    for i, (s, c) in enumerate(zip(source.cells, copy.cells)):
        answer, outside = split(s.source)
        answer = [ln.strip() for ln in answer if ln.strip()]
        if not answer:
            if c.source != s.source:
                problems.append(f"cell {i} differs from the source but holds no exercise")
            continue
        if BEGIN in c.source or END in c.source:
            problems.append(f"cell {i} still has solution markers")
        if c.source.count(STUB) != s.source.count(BEGIN):
            problems.append(f"cell {i} has {c.source.count(STUB)} stubs for {s.source.count(BEGIN)} exercises")
        kept = {ln.strip() for ln in c.source.splitlines()}
        leaked = [ln for ln in answer if ln in kept and ln not in {o.strip() for o in outside}]
        if leaked:
            problems.append(f"cell {i} still shows its solution: {leaked[0]!r}")
    return problems


def refuse(notebooks: Sequence[Path], out: Path) -> None:
    """One sentence for a selection that cannot give student copies in `out`: none, a notebook
    without solution markers (a student copy already?), bad markers, or `out` being a folder
    of the notebooks themselves (the copies would overwrite the solutions)."""
    if not notebooks:
        raise StudentError("no notebook to copy: choose notebooks named NN_name.ipynb.")
    for path in notebooks:
        if Path(out).resolve() == path.resolve().parent:
            raise StudentError(f"{out} holds the notebooks themselves: the student copies would "
                               f"overwrite their solutions; choose another folder.")
        nb = nbformat.read(path, as_version=4)
        if not exercise_cells(nb):
            raise StudentError(f"{path.name} has no `{BEGIN}` marker: it has no exercise, or it is "
                               f"a student copy already.")
        _check_markers(path, nb)


def write_copies(notebooks: Sequence[Path], out: Path) -> list[Path]:
    """Write a student copy of each notebook into `out` (same file names), checked with
    :func:`verify`; return their paths. Nothing is written unless every copy is right."""
    refuse(notebooks, out)
    with tempfile.TemporaryDirectory(prefix="course-student-") as tmp:
        release = generate(notebooks, Path(tmp))
        copies = []
        for path in notebooks:
            copy = nbformat.read(release / path.name, as_version=4)
            problems = verify(nbformat.read(path, as_version=4), copy)
            if problems:
                raise StudentError(f"the student copy of {path.name} is wrong: {problems[0]}.")
            copies.append((path.name, nbformat.writes(copy)))
    out.mkdir(parents=True, exist_ok=True)
    return [write_text_atomic(out / name, text) for name, text in copies]
