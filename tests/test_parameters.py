"""Every notebook's parameters cell: papermill reads every knob, and each comment states its range.

A knob's comment is its help (``papermill --help-notebook``); a comment papermill cannot parse
(an ``=`` inside it, say) drops the knob from what papermill reports.
"""

import json
import re
from pathlib import Path

import papermill as pm
import pytest

NOTEBOOKS = sorted((Path(__file__).parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))
# A range is stated as "a to b", "a, b or c", "a | b", "from a up", or "None: ..." (what None does)
RANGE = re.compile(r"\bto\b|\bor\b|\||\bfrom\b|\bNone:")


def assigned_names(path: Path) -> list[str]:
    """The names the parameters cell assigns at the start of a line, in order."""
    cell = next(c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code")
    return re.findall(r"^([A-Z][A-Z0-9_]*) *=", "".join(cell["source"]), flags=re.M)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_papermill_reads_every_knob_and_its_stated_range(path):
    params = pm.inspect_notebook(str(path))
    assert list(params) == assigned_names(path)
    for name, param in params.items():
        assert RANGE.search(param["help"]), f"{path.stem}: {name}'s comment states no range"


def test_the_range_pattern_tells_a_range_from_a_plain_description():
    assert RANGE.search("ranks per job: 2 to 4") and RANGE.search("smoke | cpu | gpu | auto")
    assert RANGE.search("any integer from 0 up") and RANGE.search("None: the standard library")
    assert not RANGE.search("data and initial weights")
