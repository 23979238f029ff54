import json
import os

import pytest
import torch

from course_lib import report


def gpu_report(notebook: str, device: str = "NVIDIA Test GPU", **measurements) -> dict:
    """A report as a notebook run on GPU `device` under the gpu profile would save it."""
    rep = report.Report(notebook, "gpu", "cpu")
    rep.meta.update(device=device, device_type="cuda", cuda="12.8")
    for key, value in measurements.items():
        rep.add(key, value, "GFLOP/s")
    return rep.to_dict()


def fail_replace(monkeypatch):
    """Make every os.replace in course_lib.report fail, as a crash before the rename would."""
    def boom(src, dst):
        raise OSError("disk full (simulated)")
    monkeypatch.setattr(report.os, "replace", boom)


def test_report_saves_measurements_with_units(tmp_path):
    rep = report.Report("01_gpu_vs_cpu", "smoke", "cpu")
    rep.add("cpu matmul peak", 101.5, "GFLOP/s")
    rep.add("steps", torch.tensor(3))
    data = json.loads(rep.save(tmp_path).read_text())
    assert data["notebook"] == "01_gpu_vs_cpu" and data["profile"] == "smoke"
    assert data["device"].startswith("cpu") and data["torch"] == torch.__version__
    assert data["device_type"] == "cpu"
    assert data["measurements"]["cpu matmul peak"] == {"value": 101.5, "unit": "GFLOP/s", "note": ""}
    assert data["measurements"]["steps"]["value"] == 3


def test_table_without_reference_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    rep = report.Report("01_gpu_vs_cpu", "smoke", "cpu")
    rep.add("rate", 12.5, "GFLOP/s")
    table = rep.table()
    assert "rate" in table and "12.5" in table and "no reference GPU run" in table


def test_recorded_reference_appears_beside_this_run(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    path = report.record_reference({"01_gpu_vs_cpu": gpu_report("01_gpu_vs_cpu", rate=700.0)})
    assert path.name == "nvidia-test-gpu.json"
    mine = report.Report("01_gpu_vs_cpu", "smoke", "cpu")
    mine.add("rate", 12.5, "GFLOP/s")
    assert "reference (NVIDIA Test GPU)" in mine.table() and "700" in mine.table()


def test_record_reference_merges_notebooks_and_replaces_rerecorded_ones(tmp_path):
    report.record_reference({"00_setup_check": gpu_report("00_setup_check", rate=1.0),
                             "01_gpu_vs_cpu": gpu_report("01_gpu_vs_cpu", rate=2.0)}, tmp_path)
    again = gpu_report("01_gpu_vs_cpu", rate=3.0)
    again.update(torch="9.9.9", date="2031-01-02")
    path = report.record_reference({"01_gpu_vs_cpu": again}, tmp_path)
    data = json.loads(path.read_text())
    assert set(data["notebooks"]) == {"00_setup_check", "01_gpu_vs_cpu"}
    assert data["notebooks"]["00_setup_check"]["measurements"]["rate"]["value"] == 1.0
    assert data["notebooks"]["01_gpu_vs_cpu"]["measurements"]["rate"]["value"] == 3.0
    # each entry keeps the versions and date of its own run; the top names the latest
    assert data["notebooks"]["00_setup_check"]["torch"] == torch.__version__
    assert data["notebooks"]["01_gpu_vs_cpu"]["torch"] == "9.9.9"
    assert (data["device"], data["torch"], data["date"]) == ("NVIDIA Test GPU", "9.9.9", "2031-01-02")
    for entry in data["notebooks"].values():
        assert entry["device"] == "NVIDIA Test GPU" and entry["cuda"] == "12.8" and entry["date"]


def test_save_is_atomic_and_a_failed_save_keeps_the_old_report(tmp_path, monkeypatch):
    rep = report.Report("00_setup_check", "smoke", "cpu")
    rep.add("rate", 1.0)
    path = rep.save(tmp_path)
    before = path.read_bytes()
    assert os.listdir(tmp_path) == [path.name]  # no temporary file left behind
    assert path.stat().st_mode & 0o777 == 0o644  # readable by all, like a plain write
    path.chmod(0o640)
    rep.save(tmp_path)
    assert path.stat().st_mode & 0o777 == 0o640  # a rewrite keeps the file's permissions
    rep.add("rate", 2.0)
    fail_replace(monkeypatch)
    with pytest.raises(OSError):
        rep.save(tmp_path)
    assert path.read_bytes() == before and os.listdir(tmp_path) == [path.name]


@pytest.mark.parametrize("reports, names", [
    ({}, "no notebook of this run wrote a report"),
    ({"00_a": gpu_report("00_a", "NVIDIA A"), "01_b": gpu_report("01_b", "NVIDIA B")},
     "(NVIDIA A; NVIDIA B)"),
    ({"00_a": report.Report("00_a", "gpu", "cpu").to_dict()}, "must come from a GPU, but 00_a ran on cpu: "),
    ({"00_a": {**gpu_report("00_a"), "profile": "smoke"}}, "the reports of 00_a were made under another"),
], ids=["empty", "two-devices", "cpu", "smoke-profile"])
def test_record_reference_refuses_reports_that_are_not_one_gpu_run(tmp_path, reports, names):
    with pytest.raises(report.RecordError) as err:
        report.record_reference(reports, tmp_path)
    assert names in str(err.value) and "\n" not in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_record_reference_keeps_a_file_it_cannot_merge_into(tmp_path):
    other = tmp_path / "nvidia-test-gpu.json"
    for text in ("{not json", json.dumps({"device": "nvidia test gpu", "notebooks": {}})):
        other.write_text(text)
        with pytest.raises(report.RecordError, match="move it aside"):
            report.record_reference({"00_a": gpu_report("00_a")}, tmp_path)
        assert other.read_text() == text


def test_an_interrupted_record_leaves_the_previous_results_intact(tmp_path, monkeypatch):
    path = report.record_reference({"00_a": gpu_report("00_a", rate=1.0)}, tmp_path)
    before = path.read_bytes()
    fail_replace(monkeypatch)
    with pytest.raises(OSError):
        report.record_reference({"00_a": gpu_report("00_a", rate=2.0)}, tmp_path)
    assert path.read_bytes() == before and os.listdir(tmp_path) == [path.name]
