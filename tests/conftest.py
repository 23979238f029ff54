"""Shared test fixtures and paths."""

import importlib.util
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def needs_tool(module: str) -> pytest.MarkDecorator:
    """Skip, with the reason, where an optional tool (an extra of pyproject.toml that make
    installs) is absent: `pip install -e '.[test]'` alone (the conda environment) still passes."""
    return pytest.mark.skipif(importlib.util.find_spec(module) is None,
                              reason=f"needs {module}: pip install -e '.[test,instructor]' (make installs it)")


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def pytest_collection_modifyitems(config, items):
    """Skip tests marked gpu when no CUDA device is visible."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
