"""Every command in the README's bash blocks runs as printed, or a named test, CI, or a one-
sentence refusal covers it. A command added to the README without an entry in one of the
tables below fails. `.venv/bin/` means the environment under test (the oldest set runs its own),
and `make` runs with that environment as VENV (never reinstalled here)."""

import json
import os
import re
import shlex
import subprocess
import sys

import pytest
import torch

from conftest import MAKE, REPO, needs_tool

README = (REPO / "README.md").read_text()
BIN = os.path.dirname(sys.executable)

# Run here, from the repository root (COURSE_BUILD_DIR keeps `course run`'s copies out of build/).
RUN_HERE = {
    ".venv/bin/course run 00 01 --profile smoke",
    ".venv/bin/course run 08 --profile smoke -p SEED 1",
}
# The workshop round trip, run here in a scratch folder: an attendee's report, then the cohort.
WORKSHOP = [".venv/bin/course check --json alice.json", ".venv/bin/course cohort reports/"]
ELSEWHERE = {  # (`python -m course_lib` is the `course` script: test_packaging checks the entry point)
    ".venv/bin/course check": "tests/test_cli.py::test_check_prints_the_readiness_table",
    ".venv/bin/course agree build/": "CI runs it as printed after make course PROFILE=smoke; make test "
                                     "runs it on its notebooks' reports (build/nbval/<venv>); "
                                     "tests/test_report.py::test_course_agree_exits_1_when_two_notebooks_disagree",
    ".venv/bin/course test-gpu --list": "tests/test_gpucheck.py::test_python_m_course_lib_test_gpu_list_runs_as_printed",
    "make course": "CI: .ci/run runs make course PROFILE=smoke on a clean clone",
    "make test": "CI: .ci/run runs its first part (make test-units) and, at the oldest end, its third "
                 "part's recipe (make test-oldest); its second part, make test-commands, is these printed "
                 "tests and the extremes; tests/test_packaging.py: make test is those three parts",
    "make lab": "tests/test_lab.py: make lab's jupyter line started, reached with its token, stopped",
    "make lab LAB_DIR=build/student": "tests/test_lab.py (the same line, another folder)",
    "make student": "test_make_student_writes_the_student_copies below (STUDENT_OUT in a scratch folder)",
}
# Need a CUDA GPU: without one each says so in one sentence and exits 2 before running anything.
NEEDS_GPU = {
    ".venv/bin/course run --profile gpu --record",
    "make test-gpu PART=1",
    "make test-gpu",
}


def readme_commands() -> list[str]:
    """The commands of the README's bash blocks, comments dropped."""
    blocks = re.findall(r"```bash\n(.*?)```", README, re.S)
    lines = [re.sub(r"\s+#.*$", "", ln).strip() for block in blocks for ln in block.splitlines()]
    return [ln for ln in lines if ln]


def run(command: str, cwd=REPO, **env: str) -> subprocess.CompletedProcess:
    argv = shlex.split(command.replace(".venv/bin/", BIN + "/"))
    if argv[0] == "make":
        argv[:1] = MAKE
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COURSE_PROFILE": "smoke", **env})


def test_every_readme_command_has_an_entry():
    listed = RUN_HERE | set(WORKSHOP) | set(ELSEWHERE) | NEEDS_GPU
    commands = readme_commands()
    assert len(commands) >= 10, commands
    assert not set(commands) - listed, f"add these to a table here: {set(commands) - listed}"
    assert not listed - set(commands), f"no longer in the README: {listed - set(commands)}"


@pytest.mark.notebook  # slow: three notebooks run (about 30 s)
@pytest.mark.printed
@pytest.mark.parametrize("command", sorted(RUN_HERE))
def test_the_command_runs_as_printed(command, tmp_path):
    done = run(command, COURSE_BUILD_DIR=str(tmp_path))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


@pytest.mark.printed
def test_the_workshop_round_trip_runs_as_printed(tmp_path):
    check, cohort = WORKSHOP
    assert run(check, cwd=tmp_path).returncode == 0
    (tmp_path / "reports").mkdir()
    (tmp_path / "alice.json").rename(tmp_path / "reports" / "alice.json")
    done = run(cohort, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "alice" in done.stdout and (tmp_path / "reports" / "cohort.png").exists()
    assert json.loads((tmp_path / "reports" / "alice.json").read_text())["name"] == "alice"


@pytest.mark.printed
@needs_tool("nbgrader")
def test_make_student_writes_the_student_copies(tmp_path):
    done = run("make student", STUDENT_OUT=str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(list(tmp_path.glob("[0-9][0-9]_*.ipynb"))) == len(list((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb")))


@pytest.mark.skipif(torch.cuda.is_available(), reason="with CUDA these run for real (make test-gpu)")
@pytest.mark.parametrize("command", sorted(NEEDS_GPU))
def test_a_gpu_command_without_a_gpu_is_one_sentence(command, tmp_path):
    done = run(command, COURSE_BUILD_DIR=str(tmp_path), GPU_OUT=str(tmp_path / "gpu-check"))
    assert done.returncode == 2
    said = [ln for ln in done.stderr.splitlines() if ln.startswith("course: ")]
    assert len(said) == 1 and "GPU" in said[0], done.stderr
    assert not (tmp_path / "reports").exists(), "nothing may run before the refusal"
