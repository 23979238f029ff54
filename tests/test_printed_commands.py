"""The torchrun commands that the scripts' docstrings and the notebooks' markdown print run as
printed, from the repository root, with this environment's torchrun first on PATH (gloo ranks
on the CPU); a restart example must show its crash. failure_lab.py's commands demonstrate
failures, and notebook 06 runs them (tests/test_dist.py checks how they end);
alloc_fragmentation.py needs a CUDA GPU (notebook 09). The README's commands:
test_readme_commands.py."""

import ast
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import NOTEBOOKS, REPO
from course_lib import sharding

SCRIPTS = sorted((REPO / "scripts").glob("*.py"))
DEMONSTRATES_FAILURES = {"failure_lab.py"}
FSDP_ON_CPU = {"fsdp_vs_ddp.py", "fsdp_tp.py"}  # FSDP2 on gloo CPU ranks: from torch 2.7 (sharding.trains_on_cpu)


def printed_commands(path) -> list[str]:
    """The docstring's torchrun lines (continuations joined, trailing comments dropped)."""
    doc = (ast.get_docstring(ast.parse(path.read_text())) or "").replace("\\\n", " ")
    lines = [ln for ln in doc.splitlines() if re.match(r"\s*([A-Z_]+=\S+\s+)*torchrun\s", ln)]
    return [re.sub(r"\s+#.*$", "", " ".join(ln.split())) for ln in lines]


def notebook_commands(path) -> list[str]:
    """The torchrun commands that a notebook's markdown shows (code blocks and inline code)
    for a script of scripts/; schematic ones (`torchrun ... script.py`) name no such file."""
    cells = json.loads(path.read_text())["cells"]
    text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    spans = re.findall(r"```(?:bash)?\n(.*?)```", text, re.S) + re.findall(r"`([^`\n]+)`", text)
    lines = [" ".join(ln.split()) for span in spans for ln in span.splitlines()]
    return [ln for ln in lines if re.match(r"([A-Z_]+=\S+\s+)*torchrun\s.*\bscripts/\w+\.py", ln)
            and all((REPO / f).exists() for f in re.findall(r"scripts/\w+\.py", ln))]


def test_the_pattern_finds_the_notebooks_commands():
    found = notebook_commands(REPO / "notebooks" / "06_ddp.ipynb")
    assert "torchrun --standalone --nproc_per_node=2 scripts/ddp_train.py --epochs=2" in found
    assert any(c.startswith("TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 torchrun") for c in found)
    assert not any("script.py" in c for c in found)


def test_the_pattern_finds_continued_and_prefixed_commands():
    found = printed_commands(REPO / "scripts" / "ddp_train.py")
    assert len(found) == 2 and found[1].startswith("TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 torchrun --standalone")
    assert found[1].endswith("--save-every 4 --crash-at 6")


@pytest.mark.notebook  # slow: about 60 s of torchrun jobs
@pytest.mark.printed
def test_every_printed_torchrun_command_runs_as_printed():
    env = {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}"}
    commands = [c for path in SCRIPTS  # one after another: those without --standalone share port 29500
                if path.name not in DEMONSTRATES_FAILURES
                and not (path.name in FSDP_ON_CPU and not sharding.trains_on_cpu())
                for c in printed_commands(path)]
    commands += [c for path in NOTEBOOKS for c in notebook_commands(path)]
    expected = 6 + 2 * sharding.trains_on_cpu()  # ddp_train x2, ddp_comm, replica_procs (+ fsdp_vs_ddp, fsdp_tp), 06 x2
    assert len(commands) >= expected, f"only {len(commands)} commands found, expected {expected}"
    failed = []
    for command in commands:
        (REPO / "build" / "ckpt.pt").unlink(missing_ok=True)  # a restart example starts afresh
        done = subprocess.run(["bash", "-c", command], cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=180)
        if done.returncode:
            failed.append(f"{command}\n  exit {done.returncode}: {done.stderr.strip()[-600:]}")
        elif "--crash-at" in command and "simulated crash" not in done.stdout + done.stderr:
            failed.append(f"{command}\n  never crashed: the restart it shows does not happen")
    (REPO / "build" / "ckpt.pt").unlink(missing_ok=True)
    assert not failed, "\n".join(failed)
