"""SIGKILL a real training process again and again, many of the kills inside a save:
the checkpoint always loads, the next load leaves no temporary files, and the run,
resumed after every kill, ends bitwise-equal to an uninterrupted one."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from course_lib import checkpoint
from course_lib.checkpoint import CheckpointError

WORKER = Path(__file__).parent / "_kill_worker.py"
# Each kill: ("after", seconds after the worker is ready) or ("save", n-th save, seconds into it)
KILLS = [("after", 0.0), ("save", 2, 0.0), ("after", 1.2), ("save", 3, 0.005),
         ("after", 1.5), ("save", 2, 0.01), ("after", 1.0), ("save", 2, 0.02),
         ("after", 0.6), ("save", 1, 0.0)]

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX SIGKILL")


def start(ckpt: str, out: Path, log: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, str(WORKER), ckpt, str(out)], text=True,
                            stdout=subprocess.PIPE, stderr=open(log, "w"))
    line = proc.stdout.readline()
    assert line == "ready\n", log.read_text()[-3000:]
    return proc


def temp_files(ckpt: Path) -> list[Path]:
    return sorted(ckpt.parent.glob(f".{ckpt.name}.*.tmp"))


def wait_for_save(proc: subprocess.Popen, ckpt: Path, nth: int, timeout: float = 60) -> None:
    """Return once the worker's n-th save has created its temporary file (or it exited)."""
    seen: set[str] = set()
    deadline = time.monotonic() + timeout
    while len(seen) < nth and proc.poll() is None and time.monotonic() < deadline:
        seen.update(p.name for p in temp_files(ckpt))
        time.sleep(0.001)


def test_sigkill_at_many_moments_never_breaks_the_checkpoint_or_the_run(tmp_path):
    ckpt, log = tmp_path / "run.pt", tmp_path / "worker.log"
    reference = start("-", tmp_path / "reference.pt", log)
    assert reference.wait(timeout=120) == 0, log.read_text()[-3000:]

    saved_steps, killed_in_save = [], 0
    for kill in KILLS:
        proc = start(str(ckpt), tmp_path / "out.pt", log)
        if kill[0] == "after":
            time.sleep(kill[1])
        else:
            wait_for_save(proc, ckpt, kill[1])
            time.sleep(kill[2])
        proc.kill()  # SIGKILL (nothing if it has already finished)
        assert proc.wait(timeout=60) in (-signal.SIGKILL, 0), log.read_text()[-3000:]
        killed_in_save += bool(temp_files(ckpt))  # the save never reached its rename
        if ckpt.exists():
            saved_steps.append(checkpoint.load_checkpoint(ckpt)["step"])  # always loads
        else:  # killed before the first save: the next run starts from scratch
            with pytest.raises(CheckpointError, match="No checkpoint file"):
                checkpoint.load_checkpoint(ckpt)
        assert temp_files(ckpt) == []  # the load removed what the kill left

    final = start(str(ckpt), tmp_path / "out.pt", log)
    assert final.wait(timeout=120) == 0, log.read_text()[-3000:]
    assert temp_files(ckpt) == []
    assert killed_in_save >= 1 and saved_steps == sorted(saved_steps)  # premises of the test
    straight = torch.load(tmp_path / "reference.pt", weights_only=True)
    resumed = torch.load(tmp_path / "out.pt", weights_only=True)
    assert resumed["step"] == straight["step"] == list(range(1, 13))
    assert resumed["loss"] == straight["loss"]
    for name, tensor in straight["state"].items():
        assert torch.equal(tensor, resumed["state"][name]), name
    state = checkpoint.load_checkpoint(ckpt)  # the optimizer's moments too, not only the weights
    for name, tensor in state["model"].items():
        assert torch.equal(tensor, straight["state"][name]), name
