"""Shared test fixtures and paths."""

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
CHECKED = "nbval-check-output"  # the tag nbval --nbval-lax compares; always with keep_output
# `make …` with this test's environment as VENV, silent, never reinstalling it
MAKE = ["make", "-s", "-o", f"{sys.prefix}/.installed", f"VENV={sys.prefix}"]


def needs_tool(module: str) -> pytest.MarkDecorator:
    """Skip, with the reason, where an optional tool (an extra of pyproject.toml that make
    installs) is absent: `pip install -e '.[test]'` alone (the conda environment) still passes."""
    return pytest.mark.skipif(importlib.util.find_spec(module) is None,
                              reason=f"needs {module}: pip install -e '.[test,instructor]' (make installs it)")


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


# The slowest tests (measured in make test on 2 cores) start first, so that no worker is left
# with a long one at the end (xdist hands tests out in collection order).
SLOW_FIRST = ("test_notebook_runs_at_the_high_end_of_every_knob[06_ddp]", "test_param_ranges.py",
              "test_printed_commands.py", "test_checkpoint_kill.py", "test_train.py", "test_data.py", "test_dist.py")


def _slowness(item: pytest.Item) -> int:
    return next((i for i, part in enumerate(SLOW_FIRST) if part in item.nodeid), len(SLOW_FIRST))


def pytest_collection_modifyitems(config, items):
    """The slowest first; tests marked gpu are skipped when no CUDA device is visible."""
    items.sort(key=_slowness)  # stable: the rest keep their order
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
