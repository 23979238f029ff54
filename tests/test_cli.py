"""The `course` command as a user meets it: check, run, bad input, failing notebooks."""

import json
import os
import subprocess
import sys

import nbformat
import pytest

from conftest import needs_tool
from course_lib import bench, device, profiles, report, utilisation
from course_lib.workshop import catalog, cli, cohort, runner


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
    assert "utilisation  CPU time of this process" in out.stdout  # this test machine has no GPU
    measured = out.stdout.split("A short measurement")[1].splitlines()[1:]
    assert measured[0].startswith("matmul ") and "FLOP/s" in measured[0]
    assert measured[1].startswith("copy ") and "B/s" in measured[1]


def test_check_json_round_trips_through_the_cohort_reader(tmp_path):
    folder = tmp_path / "cohort"
    out = run_course("check", "--json", str(folder / "me.json"), "--name", "tester")
    assert out.returncode == 0, out.stderr
    (person,), notes = cohort.read(folder)
    assert notes == [] and person.name == "tester"
    data = person.check
    info = device.describe()
    assert data["hardware"]["cores"] >= 1 and len(data["hardware"]["gpus"]) == info.gpu_count
    assert data["versions"]["torch"] == info.torch and data["profile"] == profiles.resolve("auto")
    assert data["hardware"]["utilisation"] == utilisation.readable(device.pick(limit=False))
    assert [(n["stem"], n["status"]) for n in data["notebooks"]] == [
        (stem, status) for stem, status, _ in catalog.readiness(info)]
    matmul, copy = data["measurements"]["matmul"], data["measurements"]["copy"]
    assert (matmul["unit"], copy["unit"]) == ("GFLOP/s", "GB/s")
    for m in (matmul, copy):
        assert m["spread"][0] <= m["value"] <= m["spread"][1] and m["value"] > 0 and m["runs"] >= 3
    row = cohort.summary_row(person)
    assert row[0] == "tester" and row[2] == str(info.gpu_count) and row[7] == matmul["dtype"]


def fake_quick(dev):
    """A stand-in for the measurement: 100 GFLOP/s (90–125) and 10 GB/s (8–12.5)."""
    matmul = bench.Timing("matmul 8×8 float32", "cpu (2 threads)", 0.01, 0.0, 5, 1e9, "FLOP/s", 0.008, 0.0111111)
    copy = bench.Timing("copy 1 MiB", "cpu (2 threads)", 0.1, 0.0, 5, 1e9, "B/s", 0.08, 0.125)
    return cohort.QuickMeasure(matmul, "float32", copy)


def test_check_json_without_file_writes_only_json_to_stdout(capsys, monkeypatch):
    monkeypatch.setattr(cohort, "quick_measure", fake_quick)
    assert cli.main(["check", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kind"] == "course-check" and data["schema"] == 1
    assert data["name"] == cohort.attendee_name() and "@" in data["name"]
    assert data["measurements"]["matmul"]["value"] == pytest.approx(100.0)
    assert data["measurements"]["matmul"]["spread"] == pytest.approx([90.0, 125.0], rel=1e-4)
    assert data["measurements"]["copy"]["spread"] == pytest.approx([8.0, 12.5])
    assert data["measurements"]["matmul"]["dtype"] == "float32"


def test_check_json_names_the_attendee_after_the_file_or_writes_into_a_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cohort, "quick_measure", fake_quick)
    assert cli.main(["check", "--json", str(tmp_path / "alice.json")]) == 0
    assert json.loads((tmp_path / "alice.json").read_text())["name"] == "alice"
    assert cli.main(["check", "--json", str(tmp_path), "--name", "bob"]) == 0  # a folder: <name>.json in it
    assert json.loads((tmp_path / "bob.json").read_text())["name"] == "bob"
    capsys.readouterr()
    assert cli.main(["check", "--json", str(tmp_path / "alice.json" / "x.json")]) == 2  # a file is no folder
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("course check: cannot write")


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
                   "rep = report.Report('00_ok', PROFILE, 'cpu'); rep.add('answer', 42, 'units'); rep.save()",
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


# ---- course run --record (no real notebook runs: runner.execute is replaced) ------------

GPU = "NVIDIA Test GPU"


class FakeRuns:
    """Stands in for runner.execute: each notebook saves a report the way a notebook does
    (report.Report(...).save()), made on `devices[stem]`, and fails if its stem is in `fail`."""

    def __init__(self, devices: dict[str, str] | None = None, fail: tuple[str, ...] = ()):
        self.devices, self.fail, self.calls, self.profiles = devices or {}, fail, [], []

    def __call__(self, nb, profile, out_dir, timeout_s=900, parameters=None):
        self.calls.append(nb.stem)
        self.parameters = parameters
        self.profiles.append(profile)
        if nb.stem in self.fail:
            return runner.RunResult(nb.stem, False, 0.5, str(out_dir / nb.name), "code cell 2: boom")
        device_name = self.devices.get(nb.stem, GPU)
        rep = report.Report(nb.stem, profile, "cpu")
        if not device_name.startswith("cpu"):
            rep.meta.update(device=device_name, device_type="cuda", cuda="12.8")
        rep.add("rate", float(len(self.calls)), "GFLOP/s")
        rep.save(report.report_path(nb.stem, out_dir).parent)
        return runner.RunResult(nb.stem, True, 0.5, str(out_dir / nb.name))


@pytest.fixture
def course(tmp_path, monkeypatch):
    """(notebook folder with 00_a, 01_b, 02_c, output folder, results folder, run)."""
    nbs, out, results = tmp_path / "nbs", tmp_path / "out", tmp_path / "results"
    nbs.mkdir()
    for stem in ("00_a", "01_b", "02_c"):
        (nbs / f"{stem}.ipynb").write_text("{}")
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(results))

    def run(fake: FakeRuns, *args: str) -> int:
        monkeypatch.setattr(runner, "execute", fake)
        monkeypatch.setattr(cli.device, "gpu_count", lambda: 1)  # the runs are FakeRuns' GPU runs
        return cli.main(["--dir", str(nbs), "run", "--no-html", "--out", str(out), *args])

    return nbs, out, results, run


def stderr_lines(capsys) -> list[str]:
    """What `course` said on stderr, less the progress bar's frames."""
    err = capsys.readouterr().err.replace("\r", "\n")
    return [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("course run (")]


@pytest.mark.parametrize("profile", ["smoke", "cpu", "auto"])
def test_record_refuses_other_profiles_before_running_anything(course, capsys, monkeypatch, profile):
    nbs, out, results, run = course
    monkeypatch.setattr(profiles.torch.cuda, "is_available", lambda: False)  # auto -> cpu
    fake = FakeRuns()
    assert run(fake, "--profile", profile, "--record") == 2
    resolved = "cpu" if profile == "auto" else profile
    assert stderr_lines(capsys) == [f"course: --record takes only the gpu profile, not {resolved!r}: "
                                    "reference results come from full runs on a GPU."]
    assert fake.calls == [] and not out.exists() and not results.exists()


def test_record_takes_only_reports_of_notebooks_that_ran_ok_now(course, capsys):
    nbs, out, results, run = course
    for stale in ("01_b", "09_old"):  # an earlier run's GPU reports, still in the output folder
        rep = report.Report(stale, "gpu", "cpu")
        rep.meta.update(device=GPU, device_type="cuda")
        rep.save(out / "reports")
    fake = FakeRuns(fail=("01_b",))
    assert run(fake, "--profile", "gpu", "--record") == 1  # a failure is still a failed run
    assert fake.calls == ["00_a", "01_b", "02_c"]
    data = json.loads((results / "nvidia-test-gpu.json").read_text())
    assert set(data["notebooks"]) == {"00_a", "02_c"}
    assert "not recorded, failed in this run: 01_b." in capsys.readouterr().err


def test_record_writes_exactly_the_executed_notebooks_and_merges(course, capsys):
    nbs, out, results, run = course
    assert run(FakeRuns(), "00", "01", "--profile", "gpu", "--record") == 0
    assert run(FakeRuns(), "01", "02", "--profile", "gpu", "--record") == 0
    files = list(results.iterdir())
    assert [f.name for f in files] == ["nvidia-test-gpu.json"]
    data = json.loads(files[0].read_text())
    assert list(data["notebooks"]) == ["00_a", "01_b", "02_c"]
    # 01_b was recorded again (as the second run's first notebook): its new entry replaced the old
    assert [data["notebooks"][nb]["measurements"]["rate"]["value"] for nb in data["notebooks"]] == [1, 1, 2]
    assert data["device"] == GPU and data["torch"] and data["date"]
    for entry in data["notebooks"].values():
        assert entry["device"] == GPU and entry["profile"] == "gpu" and entry["cuda"] == "12.8"
    assert "recorded in" in capsys.readouterr().out


def test_record_without_a_gpu_refuses_before_running_anything(course, capsys, monkeypatch):
    nbs, out, results, run = course
    fake = FakeRuns()
    monkeypatch.setattr(runner, "execute", fake)
    monkeypatch.setattr(cli.device, "gpu_count", lambda: 0)
    assert cli.main(["--dir", str(nbs), "run", "--out", str(out), "--profile", "gpu", "--record"]) == 2
    [line] = stderr_lines(capsys)
    assert line.startswith("course: --record needs a CUDA GPU")
    assert fake.calls == [] and not out.exists() and not results.exists()


@pytest.mark.parametrize("devices, named", [
    ({"01_b": "NVIDIA Other GPU"}, f"(NVIDIA Other GPU; {GPU})"),
    ({stem: "cpu" for stem in ("00_a", "01_b", "02_c")}, "must come from a GPU"),
], ids=["mixed-devices", "cpu"])
def test_record_refuses_reports_not_from_one_gpu(course, capsys, devices, named):
    nbs, out, results, run = course
    old = results / "nvidia-test-gpu.json"
    results.mkdir()
    old.write_text('{"device": "NVIDIA Test GPU", "notebooks": {}}')
    assert run(FakeRuns(devices), "--profile", "gpu", "--record") == 2
    lines = stderr_lines(capsys)
    assert len(lines) == 1 and lines[0].startswith("course: ") and named in lines[0]
    assert [f.name for f in results.iterdir()] == [old.name]
    assert old.read_text() == '{"device": "NVIDIA Test GPU", "notebooks": {}}'


def test_an_interrupted_record_leaves_the_previous_results_file(course, monkeypatch):
    nbs, out, results, run = course
    assert run(FakeRuns(), "00", "--profile", "gpu", "--record") == 0
    path = results / "nvidia-test-gpu.json"
    before = path.read_bytes()
    real_replace = os.replace

    def replace(src, dst):  # reports still save; the results file's rename fails
        if os.path.dirname(dst) == str(results):
            raise OSError("disk full (simulated)")
        real_replace(src, dst)

    monkeypatch.setattr(report.os, "replace", replace)
    with pytest.raises(OSError):
        run(FakeRuns(), "--profile", "gpu", "--record")
    assert path.read_bytes() == before and [f.name for f in results.iterdir()] == [path.name]


@pytest.mark.parametrize("flag, env, asked, resolved", [
    (["--profile", "auto"], None, "auto", "cpu"),
    ([], None, "auto", "cpu"),
    ([], "Smoke ", "smoke", "smoke"),
    (["--profile", "cpu"], "smoke", "cpu", "cpu"),
], ids=["auto", "default", "environment", "flag-beats-environment"])
def test_notebooks_get_the_profile_as_asked(course, monkeypatch, flag, env, asked, resolved):
    nbs, out, results, run = course
    monkeypatch.setattr(profiles.torch.cuda, "is_available", lambda: False)  # auto -> cpu
    if env is None:
        monkeypatch.delenv("COURSE_PROFILE", raising=False)
    else:
        monkeypatch.setenv("COURSE_PROFILE", env)
    fake = FakeRuns()
    assert run(fake, *flag) == 0
    assert fake.profiles == [asked] * 3  # 'auto' is passed on, for the notebook to resolve
    head = (out / "summary.md").read_text().splitlines()[0]
    assert head == (f"profile {resolved}" if asked == resolved else f"profile {resolved} (asked: {asked})")


def test_asked_profile_is_not_resolved(monkeypatch):
    monkeypatch.delenv("COURSE_PROFILE", raising=False)
    assert cli.asked_profile(None) == "auto" and cli.asked_profile(" GPU") == "gpu"
    monkeypatch.setenv("COURSE_PROFILE", "cpu")
    assert cli.asked_profile(None) == "cpu" and cli.asked_profile("") == "cpu"


@needs_tool("nbgrader")
def test_student_writes_copies_without_solutions(tmp_path, capsys):
    assert cli.main(["student", "00", "05", "--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["00_setup_check.ipynb", "05_data_parallel.ipynb"]
    for path in tmp_path.iterdir():
        text = path.read_text()
        assert "BEGIN SOLUTION" not in text and "raise NotImplementedError()" in text
    assert capsys.readouterr().out.startswith("2 student copies with 2 exercises to do")


def test_student_without_nbgrader_is_one_sentence(tmp_path, capsys, monkeypatch):
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "nbgrader" else real(name, *a))
    assert cli.main(["student", "00", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "[instructor]" in err[0]
    assert list(tmp_path.iterdir()) == []


def _with_knobs(path) -> None:
    """A notebook whose parameters cell has PROFILE, SEED and TEXT_PATH; it prints what it got."""
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('PROFILE = "auto"\nSEED = 0  # any integer\nTEXT_PATH = None  # a file')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell("print(repr(SEED), repr(TEXT_PATH))")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


@pytest.mark.parametrize("text", ["True", "False", "None", "1", "-3", "0.5", "1e3", "my_corpus/", "1,2"])
def test_command_line_values_are_typed_as_papermill_types_them(text):
    papermill_cli = pytest.importorskip("papermill.cli")
    if not hasattr(papermill_cli, "_resolve_type"):
        pytest.skip("this papermill has no _resolve_type to compare with")
    assert runner.typed(text) == papermill_cli._resolve_type(text)
    assert type(runner.typed(text)) is type(papermill_cli._resolve_type(text))


def test_parameters_from_the_command_line_reach_the_notebook(tmp_path):
    nbs, here = tmp_path / "nbs", tmp_path / "here"  # the notebook runs in nbs/, the user types in here/
    nbs.mkdir(), (here / "my_corpus").mkdir(parents=True)
    _with_knobs(nbs / "00_knobs.ipynb")
    out = run_course("--dir", str(nbs), "run", "00", "--profile", "smoke", "--no-html",
                     "--out", str(tmp_path / "out"), "-p", "SEED", "7", "-p", "TEXT_PATH", "my_corpus/",
                     cwd=here)
    assert out.returncode == 0, out.stderr
    executed = nbformat.read(tmp_path / "out" / "00_knobs.ipynb", as_version=4)
    printed = "".join(o.get("text", "") for o in executed.cells[-1].outputs)
    assert printed.strip() == f"7 {str(here / 'my_corpus')!r}"  # a path that exists: made absolute


@pytest.mark.parametrize("name", ["FOO", "PROFILE"])
def test_an_unknown_parameter_is_one_sentence_naming_the_notebooks_parameters(course, capsys, name):
    nbs, out, results, run = course
    _with_knobs(nbs / "03_knobs.ipynb")
    fake = FakeRuns()
    assert run(fake, "03", "-p", name, "1") == 2
    assert fake.calls == []  # checked before anything runs
    lines = stderr_lines(capsys)
    assert len(lines) == 1 and lines[0].startswith(f"course: 03_knobs has no parameter '{name}'")
    assert lines[0].endswith("its parameters: SEED, TEXT_PATH.")


def test_parameters_are_passed_typed_to_each_notebook(course):
    nbs, out, results, run = course
    _with_knobs(nbs / "03_knobs.ipynb")
    fake = FakeRuns()
    assert run(fake, "03", "-p", "SEED", "7", "-p", "TEXT_PATH", "None") == 0
    assert fake.calls == ["03_knobs"] and fake.parameters == {"SEED": 7, "TEXT_PATH": None}
