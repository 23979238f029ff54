"""Authoring tools for the course notebooks (for course authors, not learners).

    python tools/nb.py new  SRC.py notebooks/NN_name.ipynb   # percent-format source -> notebook
    python tools/nb.py freeze notebooks/NN_name.ipynb [...]   # run under smoke, keep only keep_output outputs

Percent format: cells start with ``# %%`` (code) or ``# %% [markdown]``; tags go on the
marker line as ``# %% tags=["parameters"]``. Markdown lines drop their leading ``# ``.

``freeze`` executes the notebook in its folder with ``COURSE_PROFILE=smoke`` (as nbval
will), in a kernel of this Python (as ``course run`` does), then strips every output and
execution count except in cells tagged ``keep_output``, whose deterministic output nbval
compares (``nbval-check-output``). The notebook is rewritten atomically: a failed run or
write leaves it as it was.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from unittest import mock

import nbformat
from nbclient import NotebookClient

from course_lib.files import write_text_atomic
from course_lib.runner import CurrentEnvKernelManager

MARKER = re.compile(r"^# %%(?P<md> \[markdown\])?(?: tags=(?P<tags>\[.*\]))?\s*$")


def from_percent(text: str) -> nbformat.NotebookNode:
    """Build a notebook from percent-format source."""
    nb = nbformat.v4.new_notebook()
    nb.metadata = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                   "language_info": {"name": "python"}}
    cell = None
    for line in text.splitlines():
        m = MARKER.match(line)
        if m:
            tags = json.loads(m["tags"]) if m["tags"] else []
            cell = nbformat.v4.new_markdown_cell() if m["md"] else nbformat.v4.new_code_cell()
            if tags:
                cell.metadata["tags"] = tags
            cell._lines = []
            nb.cells.append(cell)
        elif cell is not None:
            if cell.cell_type == "markdown":
                line = line[2:] if line.startswith("# ") else line.lstrip("#")
            cell._lines.append(line)
    for c in nb.cells:
        c.source = "\n".join(c.pop("_lines")).strip("\n")
    nb.cells = [c for c in nb.cells if c.source]
    return nb


def strip(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Drop outputs, counts and run metadata, except outputs of cells tagged keep_output."""
    for c in nb.cells:
        c.metadata.pop("execution", None)
        c.metadata.pop("papermill", None)
        if c.cell_type != "code":
            continue
        if "keep_output" not in c.metadata.get("tags", []):
            c.outputs, c.execution_count = [], None
    nb.metadata.pop("papermill", None)
    nb.metadata.pop("widgets", None)
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def write_notebook(nb: nbformat.NotebookNode, path: Path) -> Path:
    """Validate `nb` and write it to `path` atomically (temp file in the folder + os.replace)."""
    nbformat.validate(nb)
    return write_text_atomic(Path(path), nbformat.writes(nb))


def freeze(path: Path) -> None:
    """Execute `path` under the smoke profile and strip it in place."""
    nb = nbformat.read(path, as_version=4)
    with mock.patch.dict(os.environ, COURSE_PROFILE="smoke"):
        NotebookClient(nb, timeout=600, kernel_name="python3",
                       kernel_manager_class=CurrentEnvKernelManager,
                       resources={"metadata": {"path": str(path.parent)}}).execute()
    write_notebook(strip(nb), path)
    print(f"froze {path}")


def main(argv: list[str]) -> None:
    if argv[:1] == ["new"] and len(argv) == 3:
        write_notebook(from_percent(Path(argv[1]).read_text()), Path(argv[2]))
        print(f"wrote {argv[2]}")
    elif argv[:1] == ["freeze"] and len(argv) > 1:
        for p in argv[1:]:
            freeze(Path(p))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
