import json

import torch

from course_lib import report


def test_report_saves_measurements_with_units(tmp_path):
    rep = report.Report("01_gpu_vs_cpu", "smoke", "cpu")
    rep.add("cpu matmul peak", 101.5, "GFLOP/s")
    rep.add("steps", torch.tensor(3))
    data = json.loads(rep.save(tmp_path).read_text())
    assert data["notebook"] == "01_gpu_vs_cpu" and data["profile"] == "smoke"
    assert data["device"].startswith("cpu") and data["torch"] == torch.__version__
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
    ref = report.Report("01_gpu_vs_cpu", "gpu", "cpu")
    ref.add("rate", 700.0, "GFLOP/s")
    ref.meta["device"] = "NVIDIA Test GPU"
    path = report.record_reference({"01_gpu_vs_cpu": ref.to_dict()})
    assert path.name == "nvidia-test-gpu.json"
    mine = report.Report("01_gpu_vs_cpu", "smoke", "cpu")
    mine.add("rate", 12.5, "GFLOP/s")
    assert "reference (NVIDIA Test GPU)" in mine.table() and "700" in mine.table()


def test_record_reference_merges_notebooks(tmp_path):
    a = report.Report("00_setup_check", "gpu", "cpu").to_dict()
    b = report.Report("01_gpu_vs_cpu", "gpu", "cpu").to_dict()
    report.record_reference({"00_setup_check": a}, tmp_path)
    path = report.record_reference({"01_gpu_vs_cpu": b}, tmp_path)
    assert set(json.loads(path.read_text())["notebooks"]) == {"00_setup_check", "01_gpu_vs_cpu"}
