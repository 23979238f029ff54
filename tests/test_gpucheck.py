"""`course test-gpu` plumbing on a CPU: the parts, part selection, the refusal without CUDA, the
output folder and the summary that accumulates over parts. No notebook runs and no CUDA is
needed: the step runner, the CUDA check and runner.execute are replaced."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import NOTEBOOKS
from course_lib import report
from course_lib.workshop import cli, gpucheck, runner
from course_lib.device import MEMORY_CAP_ENV

STEMS = [p.stem for p in NOTEBOOKS]
GPU = "NVIDIA Test GPU"


def items_of(parts, step):
    return [i.name for p in parts for i in p.items if i.step == step]


def test_every_notebook_of_the_course_has_a_measured_time():
    assert sorted(s[:2] for s in STEMS) == sorted(gpucheck.ESTIMATE_MIN)


@pytest.mark.parametrize("budget", [gpucheck.BUDGET_MIN, 3.0, 5.5, 40.0])
def test_each_notebook_is_in_exactly_one_part_per_pass_and_parts_keep_the_budget(budget):
    parts = gpucheck.plan(STEMS, budget=budget)
    assert [p.number for p in parts] == list(range(1, len(parts) + 1))
    assert items_of(parts, gpucheck.PYTEST) == ["tests"] and parts[0].items[0].step == gpucheck.PYTEST
    assert items_of(parts, gpucheck.RECORD) == STEMS and items_of(parts, gpucheck.SMALL) == STEMS
    for part in parts:
        assert part.items and (part.minutes <= budget or len(part.items) == 1)
    flat = [i for p in parts for i in p.items]  # the recorded pass comes before the 8 GiB pass
    assert [i.step for i in flat] == sorted((i.step for i in flat), key=[gpucheck.PYTEST, gpucheck.RECORD,
                                                                          gpucheck.SMALL].index)


def test_packing_closes_a_part_only_when_the_next_item_would_not_fit():
    items = [gpucheck.Item(gpucheck.RECORD, f"{n:02d}_x", m) for n, m in enumerate([3, 4, 2, 9, 1, 1])]
    parts = gpucheck.pack(items, budget=8)
    assert [[i.name[:2] for i in p.items] for p in parts] == [["00", "01"], ["02"], ["03"], ["04", "05"]]
    for before, after in zip(parts, parts[1:]):
        assert before.minutes + after.items[0].minutes > 8
    assert gpucheck.estimate("99_new") == gpucheck.UNKNOWN_MIN  # a notebook missing from the table


def test_the_course_plan_fits_the_budget_with_pytest_in_part_one():
    parts = gpucheck.plan(STEMS)
    assert all(p.minutes <= gpucheck.BUDGET_MIN for p in parts)
    assert gpucheck.BUDGET_MIN < 9  # a part must finish in 9 minutes: the budget leaves a margin
    text = gpucheck.plan_text(parts)
    assert all(f"part {p.number} " in text for p in parts) and "measured" in text


def test_part_selection_and_bad_part_numbers():
    parts = gpucheck.plan(STEMS)
    assert gpucheck.select(parts, None) == parts
    assert gpucheck.select(parts, "2") == [parts[1]] and gpucheck.select(parts, 1) == [parts[0]]
    for bad in ("0", str(len(parts) + 1), "x", "", "-1", "1.5"):
        with pytest.raises(gpucheck.GpuCheckError) as caught:
            gpucheck.select(parts, bad)
        message = str(caught.value)
        assert "\n" not in message and message.endswith(".") and f"1 to {len(parts)}" in message


# ---- the command, with the CUDA check and the step runner replaced -------------------------

class FakeSteps:
    """Stands in for run_step: records what ran; items whose name is in `fail` fail."""

    def __init__(self, fail=(), interrupt=None):
        self.calls, self.fail, self.interrupt = [], set(fail), interrupt

    def __call__(self, item, out, notebooks=None, timeout_s=None):
        if item.name == self.interrupt:
            raise KeyboardInterrupt  # the command cut off mid-item
        self.calls.append((item.step, item.name))
        return item.name not in self.fail, "boom" if item.name in self.fail else ""


@pytest.fixture
def gpu_box(monkeypatch, tmp_path):
    """A machine that says it has CUDA; returns (output folder, run(fake, *args) -> exit code)."""
    monkeypatch.setattr(gpucheck, "cuda_available", lambda: True)
    monkeypatch.setattr(gpucheck, "gpu_description", lambda: (GPU, "2.99.0 (CUDA 12.8)"))
    out = tmp_path / "gpu-check"

    def run(fake, *args):
        monkeypatch.setattr(gpucheck, "run_step", fake)
        return cli.main(["test-gpu", "--out", str(out), *args])

    return out, run


def test_without_cuda_one_sentence_and_nothing_runs_or_is_written(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(gpucheck, "cuda_available", lambda: False)
    fake = FakeSteps()
    monkeypatch.setattr(gpucheck, "run_step", fake)
    for args in ([], ["--part", "2"]):
        assert cli.main(["test-gpu", "--out", str(tmp_path / "gpu-check"), *args]) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and captured.err == f"course: {gpucheck.REFUSAL_NO_CUDA}\n"
    assert fake.calls == [] and not (tmp_path / "gpu-check").exists()


def test_list_prints_the_plan_without_cuda_and_runs_nothing(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(gpucheck, "cuda_available", lambda: False)
    fake = FakeSteps()
    monkeypatch.setattr(gpucheck, "run_step", fake)
    assert cli.main(["test-gpu", "--list", "--out", str(tmp_path / "o")]) == 0
    assert capsys.readouterr().out.strip() == gpucheck.plan_text(gpucheck.plan(STEMS))
    assert fake.calls == [] and not (tmp_path / "o").exists()


def test_a_bad_part_is_one_sentence_before_anything_runs(gpu_box, capsys):
    out, run = gpu_box
    fake = FakeSteps()
    assert run(fake, "--part", "99") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("course: --part takes a part number")
    assert fake.calls == [] and not out.exists()


def test_a_part_runs_exactly_its_items_and_the_summary_accumulates_over_parts(gpu_box):
    out, run = gpu_box
    parts = gpucheck.plan(STEMS)
    fake = FakeSteps()
    assert run(fake, "--part", "1") == 0
    assert fake.calls == [(i.step, i.name) for i in parts[0].items]
    assert run(fake, "--part", "3") == 0
    rows = json.loads((out / "summary.json").read_text())["rows"]
    assert [(r["step"], r["name"]) for r in rows] == [(i.step, i.name) for p in (parts[0], parts[2])
                                                       for i in p.items]
    assert all(r["status"] == "OK" and r["device"] == GPU and r["torch"].startswith("2.99.0") for r in rows)
    assert all(isinstance(r["seconds"], float) for r in rows)
    md = (out / "summary.md").read_text()
    waiting = [str(p.number) for p in parts if p.number not in (1, 3)]
    assert f"parts not run (or not finished) yet: {', '.join(waiting)}." in md
    assert md.count(f"| {GPU} |") == len(rows)

    # part 1 again, with a failure: its rows are replaced, not added; the exit code says it
    assert run(FakeSteps(fail={STEMS[1]}), "--part", "1") == 1
    again = json.loads((out / "summary.json").read_text())["rows"]
    assert len(again) == len(rows)
    failed = [r for r in again if r["status"] == "FAILED"]
    assert [(r["step"], r["name"], r["note"]) for r in failed] == [(gpucheck.RECORD, STEMS[1], "boom")]
    assert f"{len(rows) - 1}/{len(rows)} steps OK" in (out / "summary.md").read_text()

    # no part: all of them in turn, and the summary says every part has run
    fake = FakeSteps()
    assert run(fake) == 0
    assert fake.calls == [(i.step, i.name) for p in parts for i in p.items]
    assert f"all {len(parts)} parts have run." in (out / "summary.md").read_text()


def test_an_item_cut_off_mid_run_is_marked_so_in_the_summary(gpu_box):
    out, run = gpu_box
    with pytest.raises(KeyboardInterrupt):
        run(FakeSteps(interrupt=STEMS[2]), "--part", "1")
    rows = json.loads((out / "summary.json").read_text())["rows"]
    assert [r["status"] for r in rows] == ["OK", "OK", "OK", "STARTED"]
    md = (out / "summary.md").read_text()
    assert f"| {STEMS[2]} | CUT OFF" in md and "parts not run (or not finished) yet: 1, " in md


def test_an_unreadable_summary_is_one_sentence(gpu_box, capsys):
    out, run = gpu_box
    out.mkdir()
    (out / "summary.json").write_text("not json")
    assert run(FakeSteps(), "--part", "1") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not a test-gpu summary" in err


# ---- the real steps, with runner.execute and pytest's folder replaced ----------------------

class FakeExecute:
    """Stands in for runner.execute: writes the executed copy and a GPU report as a notebook
    does, and notes the memory cap each notebook saw."""

    def __init__(self):
        self.caps = {}

    def __call__(self, nb, profile, out_dir, timeout_s=900):
        assert profile == "gpu"
        self.caps[(out_dir.name, nb.stem)] = os.environ.get(MEMORY_CAP_ENV)
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / nb.name).write_text("{}")
        rep = report.Report(nb.stem, profile, "cpu")
        rep.meta.update(device=GPU, device_type="cuda", cuda="12.8")
        rep.add("rate", 1.0, "GFLOP/s")
        rep.save(report.report_path(nb.stem, out_dir).parent)
        return runner.RunResult(nb.stem, True, 0.1, str(out_dir / nb.name))


def test_output_folder_layout_recording_merges_and_the_8_gib_pass_is_capped(monkeypatch, tmp_path):
    results = tmp_path / "results"
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(results))
    monkeypatch.setenv(MEMORY_CAP_ENV, "4")  # the caller's own cap must not reach the recorded pass
    fake = FakeExecute()
    monkeypatch.setattr(runner, "execute", fake)
    out, nbs = tmp_path / "gpu-check", tmp_path / "nbs"
    first, second = STEMS[0], STEMS[-1]
    for step, stem in [(gpucheck.RECORD, first), (gpucheck.RECORD, second), (gpucheck.SMALL, first)]:
        ok, note = gpucheck.run_step(gpucheck.Item(step, stem, 1.0), out, nbs)  # as separate parts do
        assert ok, note
    where = gpucheck.layout(out)
    assert (where[gpucheck.RECORD] / f"{first}.ipynb").exists() and (where[gpucheck.SMALL] / f"{first}.ipynb").exists()
    assert report.report_path(first, where[gpucheck.SMALL]).exists()
    assert fake.caps == {("record", first): None, ("record", second): None, ("gpu-8gib", first): "8"}
    assert os.environ[MEMORY_CAP_ENV] == "4"  # restored afterwards
    recorded = json.loads((results / "nvidia-test-gpu.json").read_text())
    assert list(recorded["notebooks"]) == [first, second]  # both recordings merged into one file
    assert (where["results"] / "nvidia-test-gpu.json").read_text() == (results / "nvidia-test-gpu.json").read_text()


def test_a_notebook_that_saves_no_report_fails_the_recorded_pass(monkeypatch, tmp_path):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setattr(runner, "execute", lambda nb, profile, out_dir, timeout_s=900:
                        runner.RunResult(nb.stem, True, 0.1, str(out_dir / nb.name)))
    ok, note = gpucheck.run_step(gpucheck.Item(gpucheck.RECORD, STEMS[0], 1.0), tmp_path / "o", tmp_path)
    assert not ok and "no report" in note and not (tmp_path / "results").exists()


def test_the_pytest_step_runs_only_gpu_marked_tests_into_its_log_and_junit(monkeypatch, tmp_path):
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "pytest.ini").write_text("[pytest]\nmarkers =\n    gpu: needs a GPU\n")
    (repo / "tests" / "test_x.py").write_text(textwrap.dedent("""
        import os
        import pytest

        @pytest.mark.gpu
        def test_marked():
            assert os.environ.get("COURSE_GPU_MEMORY_GIB") is None

        def test_unmarked():
            assert False, "not gpu-marked: must not run"
    """))
    monkeypatch.setattr(report, "REPO", repo)
    monkeypatch.setenv(MEMORY_CAP_ENV, "8")
    out = tmp_path / "gpu-check"
    ok, note = gpucheck.run_pytest(out)
    where = gpucheck.layout(out)
    junit = where["junit"].read_text()
    assert ok, where["pytest_log"].read_text()
    assert 'tests="1"' in junit and "test_marked" in junit and "test_unmarked" not in junit
    assert "test_x.py" in where["pytest_log"].read_text()


def test_python_m_course_lib_test_gpu_list_runs_as_printed():
    out = subprocess.run([sys.executable, "-m", "course_lib", "test-gpu", "--list"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "part 1 " in out.stdout and "pytest -m gpu" in out.stdout
