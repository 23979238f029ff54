"""The torchrun commands that the scripts' docstrings print run as printed, from the repository
root, with this environment's torchrun first on PATH (gloo ranks on the CPU). failure_lab.py's
commands demonstrate failures, and notebook 06 runs them (tests/test_dist.py checks how they
end); alloc_fragmentation.py needs a CUDA GPU (notebook 09)."""

import ast
import os
import re
import subprocess
import sys

import pytest

from conftest import REPO
from course_lib import fsdp

SCRIPTS = sorted((REPO / "scripts").glob("*.py"))
DEMONSTRATES_FAILURES = {"failure_lab.py"}


def printed_commands(path) -> list[str]:
    """The docstring's torchrun lines (continuations joined, trailing comments dropped)."""
    doc = (ast.get_docstring(ast.parse(path.read_text())) or "").replace("\\\n", " ")
    lines = [ln for ln in doc.splitlines() if re.match(r"\s*([A-Z_]+=\S+\s+)*torchrun\s", ln)]
    return [re.sub(r"\s+#.*$", "", " ".join(ln.split())) for ln in lines]


def test_the_pattern_finds_continued_and_prefixed_commands():
    found = printed_commands(REPO / "scripts" / "ddp_train.py")
    assert len(found) == 2 and found[1].startswith("TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 torchrun --standalone")
    assert found[1].endswith("--save-every 4 --crash-at 6")


@pytest.mark.notebook  # slow: about 40 s of torchrun jobs
def test_every_printed_torchrun_command_runs_as_printed():
    env = {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}"}
    (REPO / "build" / "ckpt.pt").unlink(missing_ok=True)  # ddp_train's restart example starts afresh
    failed, ran = [], 0
    for path in SCRIPTS:  # one after another: the commands without --standalone share port 29500
        if path.name in DEMONSTRATES_FAILURES or (path.name == "fsdp_vs_ddp.py" and not fsdp.trains_on_cpu()):
            continue
        for command in printed_commands(path):
            done = subprocess.run(["bash", "-c", command], cwd=REPO, env=env, capture_output=True,
                                  text=True, timeout=180)
            ran += 1
            if done.returncode:
                failed.append(f"{command}\n  exit {done.returncode}: {done.stderr.strip()[-600:]}")
    (REPO / "build" / "ckpt.pt").unlink(missing_ok=True)
    expected = 4 + fsdp.trains_on_cpu()  # ddp_train x2, ddp_comm, replica_procs (+ fsdp_vs_ddp)
    assert ran >= expected, f"only {ran} commands found, expected {expected}"
    assert not failed, "\n".join(failed)
