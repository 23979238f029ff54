"""The `course` command as a user meets it: check, run, bad input, failing notebooks."""

import subprocess
import sys

import nbformat
import pytest

from course_lib import catalog, cli, device


def run_course(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "course_lib", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=300)


def write_notebook(path, *sources: str) -> None:
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('PROFILE = "auto"')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params] + [nbformat.v4.new_code_cell(s) for s in sources]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def test_check_prints_the_readiness_table():
    out = run_course("check")
    assert out.returncode == 0, out.stderr
    for entry in catalog.NOTEBOOKS:
        assert entry.stem in out.stdout
    assert "gpu_count" in out.stdout and "what this machine can demonstrate" in out.stdout


def test_readiness_marks_gpu_notebooks_partial_without_gpus(tmp_path):
    for entry in catalog.NOTEBOOKS:
        catalog.path_of(entry, tmp_path).write_text("{}")
    info = device.describe()
    info.gpu_count = 0
    rows = {stem: status for stem, status, _ in catalog.readiness(info, tmp_path)}
    assert rows["00_setup_check"] == "full" and rows["06_ddp"] == "partial"
    info.gpu_count = 2
    assert {s for _, s, _ in catalog.readiness(info, tmp_path)} == {"full"}


def test_bogus_profile_is_one_line_and_non_zero():
    out = run_course("run", "--profile", "bogus")
    assert out.returncode != 0
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert lines == ["course: Unknown profile 'bogus': choose one of smoke, cpu, gpu or auto."]


def test_unknown_notebook_name_is_one_line(tmp_path):
    with pytest.raises(SystemExit, match="no notebook matches '42'"):
        cli.main(["--dir", str(tmp_path), "run", "42", "--profile", "smoke"])


def test_failing_notebook_names_notebook_and_cell(tmp_path):
    write_notebook(tmp_path / "00_ok.ipynb", "x = 1")
    write_notebook(tmp_path / "01_broken.ipynb", "x = 1", "assert x == 2, 'x should be 2'")
    out = run_course("--dir", str(tmp_path), "run", "--profile", "smoke", "--no-html",
                     "--out", str(tmp_path / "out"))
    assert out.returncode == 1
    assert "FAILED 01_broken.ipynb, code cell 3" in out.stdout + out.stderr
    assert "AssertionError: x should be 2" in out.stdout + out.stderr
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "| 00_ok | ok |" in summary and "1/2 notebooks ok" in summary


def test_cell_timeout_is_reported(tmp_path):
    write_notebook(tmp_path / "00_slow.ipynb", "import time; time.sleep(30)")
    out = run_course("--dir", str(tmp_path), "run", "--profile", "smoke", "--no-html",
                     "--timeout", "2", "--out", str(tmp_path / "out"))
    assert out.returncode == 1
    assert "longer than 2 s" in out.stdout + out.stderr


def test_successful_run_writes_notebook_html_reports_and_summary(tmp_path):
    write_notebook(tmp_path / "00_ok.ipynb", "print(PROFILE)",
                   "from course_lib import report\n"
                   "rep = report.Report('00_ok', PROFILE, 'cpu'); rep.add('answer', 42); rep.save()",
                   "from course_lib import train\n"
                   "bar = train.progress(total=3, unit='step')\n"
                   "for _ in range(3):\n    bar.update(1)\nbar.close()")
    # a relative --out must land next to the caller, not in the notebook's folder
    out = run_course("--dir", str(tmp_path), "run", "00", "--profile", "smoke", "--out", "out",
                     cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "without encryption" not in out.stderr  # kernels run over IPC, not TCP
    executed = nbformat.read(tmp_path / "out" / "00_ok.ipynb", as_version=4)
    printed = [o for c in executed.cells for o in c.get("outputs", []) if o.get("name") == "stdout"]
    assert printed and printed[0]["text"].strip() == "smoke"  # the profile was injected
    bar = executed.cells[-1].outputs  # a text bar, its frames coalesced into the last one
    assert [o["output_type"] for o in bar] == ["stream"] and "\r" not in bar[0]["text"]
    assert "3/3" in bar[0]["text"] and "0/3" not in bar[0]["text"]
    assert (tmp_path / "out" / "00_ok.html").stat().st_size > 1000
    assert (tmp_path / "out" / "reports" / "00_ok.json").exists()
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "| 00_ok | ok |" in summary and "| 1 |" in summary and "1/1 notebooks ok" in summary
