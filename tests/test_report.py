import json
import os
import time

import pytest
import torch

from course_lib import bench, device, report


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
    rep.add("steps", torch.tensor(3), "steps")
    data = json.loads(rep.save(tmp_path).read_text())
    assert data["notebook"] == "01_gpu_vs_cpu" and data["profile"] == "smoke"
    assert data["device"].startswith("cpu") and data["torch"] == torch.__version__
    assert data["device_type"] == "cpu"
    assert data["host"] == f"{device.cpu_name()}, {os.cpu_count()} cores"  # a GPU's speed can depend on it
    assert data["measurements"]["cpu matmul peak"] == {"value": 101.5, "unit": "GFLOP/s", "note": ""}
    assert data["measurements"]["steps"]["value"] == 3


def test_table_without_reference_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    rep = report.Report("01_gpu_vs_cpu", "smoke", "cpu")
    rep.add("rate", 12.5, "GFLOP/s")
    table = rep.table()
    assert "rate" in table and "12.5" in table and "no reference GPU run" in table


def test_table_leaves_out_the_reference_rows_named_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    gpu = gpu_report("01_gpu_vs_cpu", rate=700.0)
    gpu["measurements"]["old rate"] = {"value": 5.0, "unit": "GFLOP/s"}
    report.record_reference({"01_gpu_vs_cpu": gpu})
    mine = report.Report("01_gpu_vs_cpu", "smoke", "cpu")
    mine.add("rate", 12.5, "GFLOP/s")
    mine.add("old rate", 1.0, "GFLOP/s")
    full, less = mine.table(), mine.table(["old rate", "not recorded"], "recorded by an earlier cell")
    assert "old rate: 5 GFLOP/s" in full and "old rate: 5" not in less and "rate: 700 GFLOP/s" in less
    assert "  (1 reference row left out: recorded by an earlier cell)" in less.splitlines()
    gpu["measurements"]["gpu only"] = {"value": 2.0, "unit": "s"}  # a row this run has no counterpart for
    report.record_reference({"01_gpu_vs_cpu": gpu})
    assert any(ln.startswith("  (1 more reference row, with no row of the same name in this run: gpu only; all in "
                             "results/") for ln in mine.table().splitlines())


def test_a_reference_of_another_profile_stands_apart_and_one_of_this_profile_beside(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    path = report.record_reference({"01_gpu_vs_cpu": gpu_report("01_gpu_vs_cpu", rate=700.0)})
    assert path.name == "nvidia-test-gpu.json"
    mine = report.Report("01_gpu_vs_cpu", "smoke", "cpu")
    mine.add("rate", 12.5, "GFLOP/s")
    lines = mine.table().splitlines()
    assert not any("12.5" in ln and "700" in ln for ln in lines)  # the gpu profile's sizes are not smoke's
    assert "reference run" not in lines[1]  # no column: nothing to set beside
    at = next(i for i, ln in enumerate(lines) if ln.startswith("Reference run on NVIDIA Test GPU"))
    assert "'gpu' profile" in lines[at] and lines[at + 1].strip() == "rate: 700 GFLOP/s"
    assert report.reference_meta("01_gpu_vs_cpu")["profile"] == "gpu"
    assert report.reference_meta("09_memory") == {}
    assert report.size_class({"profile": "gpu", "device": "NVIDIA H200"}) == "gpu/large"  # recorded before "sizes"
    assert report.size_class({"profile": "gpu", "device": "Tesla T4"}) == "gpu/medium"
    assert report.size_class({"profile": "cpu"}) == "cpu" and report.Report("01_gpu_vs_cpu", "gpu", "cpu").meta["sizes"] == "gpu/large"
    same = report.Report("01_gpu_vs_cpu", "gpu", "cpu")
    same.add("rate", 12.5, "GFLOP/s")
    table = same.table()
    assert f"reference run (NVIDIA Test GPU machine, {os.cpu_count()}-core host), the same setup" in table
    assert any("12.5" in ln and "700" in ln for ln in table.splitlines()) and "apart" not in table
    medium = report.Report("01_gpu_vs_cpu", "gpu", "cpu")
    medium.meta["sizes"] = "gpu/medium"  # the gpu profile on a 16 GB card: its own sizes
    medium.add("rate", 12.5, "GFLOP/s")
    table = medium.table()
    assert not any("12.5" in ln and "700" in ln for ln in table.splitlines())
    assert "(the 'gpu' profile's large models and sizes; this run has the 'gpu' profile's medium models" in table
    other = report.Report("01_gpu_vs_cpu", "gpu", "cpu")
    other.add("another rate", 3.0, "GFLOP/s")
    assert ("No row of this run has a row of the same name in the reference run, which recorded 1 row of its own "
            "(the cells above show those they compare with; all in results/nvidia-test-gpu.json)") in other.table()


def _with_reference(tmp_path, monkeypatch, ref_profile: str, ref_setup: str):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    ref = report.Report("03_mixed_precision", ref_profile, "cpu")
    ref.meta.update(device="NVIDIA Test GPU", device_type="cuda")
    ref.add("fp32 step", 2.466, "kimg/s", note="on the GPU", setup=ref_setup)
    # as results/ holds it (record_reference takes gpu-profile runs only; a file may hold another)
    (tmp_path / "nvidia-test-gpu.json").write_text(json.dumps(
        {"device": "NVIDIA Test GPU", "notebooks": {"03_mixed_precision": ref.to_dict()}}))


def test_a_gpu_run_that_took_the_cpu_sizes_compares_with_a_cpu_run(tmp_path, monkeypatch):
    """06 and 11 under the gpu profile with one GPU run their jobs on the CPU at the cpu profile's sizes."""
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    ref = report.Report("06_ddp", "gpu", "cpu")
    ref.ran_sizes_of("cpu")
    ref.meta.update(device="NVIDIA Test GPU", device_type="cuda", cuda="12.8")
    ref.add("step", 60.0, "ms", note="2 ranks on the CPU (gloo)")
    report.record_reference({"06_ddp": ref.to_dict()})
    assert "gpu profile, the 'cpu' profile's sizes" in report.reference_header("06_ddp")
    mine = report.Report("06_ddp", "cpu", "cpu")
    mine.add("step", 90.0, "ms")
    mine.add("efficiency", 0.5, "×", spread=(0.4, 0.6))
    ref.add("efficiency", 0.8, "×", spread=(0.7, 0.9))  # a ratio row: no note, measured on the host CPU all the same
    report.record_reference({"06_ddp": ref.to_dict()})
    lines = mine.table().splitlines()
    assert any("90" in ln and "60 ms (host CPU" in ln for ln in lines)  # one line: the same jobs
    assert any(ln.startswith("efficiency") and "0.8 (0.7–0.9) × (host CPU)" in ln for ln in lines)  # with its spread
    large = report.Report("06_ddp", "gpu", "cpu")  # the gpu profile's own sizes: apart
    large.add("step", 9.0, "ms")
    table = large.table()
    assert not any(" 9 " in ln and "60" in ln for ln in table.splitlines())
    assert "(the 'cpu' profile's models and sizes; this run has the 'gpu' profile's large models and sizes, which " \
        "differ in " in table  # the sizes that set the two apart, each named with both values
    said = report._sizes_differ("06_ddp", "cpu", "gpu/large")
    from course_lib import profiles
    cpu, gpu = profiles.SIZES["06_ddp"]["cpu"], profiles.SIZES["06_ddp"]["gpu"]
    first = next(k for k in dict.fromkeys([*cpu, *gpu]) if cpu.get(k) != gpu.get(k))
    assert said.startswith(f", which differ in {first} {cpu.get(first)} (here {gpu.get(first)})")
    assert report._sizes_differ("06_ddp", "cpu", "cpu") == ", the same sizes"


@pytest.mark.parametrize("ref_profile", ["cpu", "gpu"])
@pytest.mark.parametrize("ref_setup", ["", "smallcnn, batch 64, fp32", "resnet50, batch 256, fp32"])
@pytest.mark.parametrize("my_setup", ["", "smallcnn, batch 64, fp32"])
def test_unlike_rows_never_share_a_line(tmp_path, monkeypatch, ref_profile, ref_setup, my_setup):
    """The learner's row and the reference's share a line exactly when they measured the same
    thing: equal setups, or, with none named, the same profile."""
    _with_reference(tmp_path, monkeypatch, ref_profile, ref_setup)
    mine = report.Report("03_mixed_precision", "cpu", "cpu")
    mine.add("fp32 step", 20.01, "kimg/s", setup=my_setup)
    lines = mine.table().splitlines()
    alike = ref_setup == my_setup if (ref_setup or my_setup) else ref_profile == "cpu"
    together = [ln for ln in lines if "20.01" in ln and "2.466" in ln]
    assert bool(together) == alike, "\n".join(lines)
    shown = [ln for ln in lines if "2.466" in ln]
    assert len(shown) == 1  # the reference's row is shown once, beside or apart
    if not alike:
        assert shown[0].strip().startswith("fp32 step: 2.466 kimg/s  on the GPU")
        assert not ref_setup or shown[0].endswith(f"[{ref_setup}]")  # what it measured, named


def test_a_host_cpu_reference_row_says_so_apart_too(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    ref = report.Report("06_ddp", "gpu", "cpu")
    ref.meta.update(device="NVIDIA Test GPU", device_type="cuda")
    ref.add("step, 2 ranks", 63.3, "ms", note="2 ranks, gloo, 1 thread(s) per rank")
    report.record_reference({"06_ddp": ref.to_dict()})
    mine = report.Report("06_ddp", "cpu", "cpu")
    mine.add("step, 2 ranks", 4.85, "ms")
    assert any(ln.endswith("[host CPU]") and "63.3" in ln for ln in mine.table().splitlines())


def test_setup_is_recorded_only_where_named():
    rep = report.Report("03_mixed_precision", "cpu", "cpu")
    rep.add("a", 1.0, "ms")
    rep.record(bench.Ratio("b vs a", 1.2, 1.1, 1.3), setup="matmul 4096², bf16")
    assert "setup" not in rep.rows["a"] and rep.rows["b vs a"]["setup"] == "matmul 4096², bf16"
    assert report.comparable(rep.rows["a"], {"value": 2.0}, same_profile=True)
    assert not report.comparable(rep.rows["a"], {"value": 2.0}, same_profile=False)
    assert not report.comparable(rep.rows["a"], {"setup": "x"}, same_profile=True)
    assert report.comparable(rep.rows["b vs a"], {"setup": "matmul 4096², bf16"}, same_profile=False)


def test_references_lists_every_device_that_recorded_the_notebook(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    report.record_reference({"05_data_parallel": gpu_report("05_data_parallel", "GPU B", rate=2.0)})
    report.record_reference({"05_data_parallel": gpu_report("05_data_parallel", "GPU A", rate=1.0)})
    report.record_reference({"01_gpu_vs_cpu": gpu_report("01_gpu_vs_cpu", "GPU C", rate=3.0)})
    runs = report.references("05_data_parallel")
    assert [(dev, m["rate"]["value"]) for dev, m in runs] == [("GPU A", 1.0), ("GPU B", 2.0)]
    assert report.reference("05_data_parallel")[0] == "GPU A"
    assert report.references("09_memory") == [] and report.reference("09_memory") == (None, {})


def test_reference_is_the_most_recently_recorded_run(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    old, new = gpu_report("02_first_cnn", "GPU A", rate=1.0), gpu_report("02_first_cnn", "GPU B", rate=2.0)
    old["date"], new["date"] = "2026-01-01", "2026-02-01"
    report.record_reference({"02_first_cnn": old})
    report.record_reference({"02_first_cnn": new})
    assert [dev for dev, _ in report.references("02_first_cnn")] == ["GPU B", "GPU A"]
    assert report.reference("02_first_cnn")[1]["rate"]["value"] == 2.0


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
    rep.add("rate", 1.0, "GFLOP/s")
    path = rep.save(tmp_path)
    before = path.read_bytes()
    assert os.listdir(tmp_path) == [path.name]  # no temporary file left behind
    assert path.stat().st_mode & 0o777 == 0o644  # readable by all, like a plain write
    path.chmod(0o640)
    rep.save(tmp_path)
    assert path.stat().st_mode & 0o777 == 0o640  # a rewrite keeps the file's permissions
    rep.add("rate", 2.0, "GFLOP/s")
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


def test_add_refuses_facts_and_missing_units():
    rep = report.Report("00_setup_check", "smoke", "cpu")
    with pytest.raises(ValueError, match="measurements, not yes/no facts"):
        rep.add("nccl available", False, "")
    with pytest.raises(ValueError, match="needs its unit"):
        rep.add("gpu count", 0, "")
    assert rep.rows == {}


def test_record_takes_timings_and_ratios_with_their_spread():
    rep = report.Report("01_gpu_vs_cpu", "smoke", "cpu")
    fast = bench.Timing("fast", "cpu", 0.010, 0.002, 5, work=2e9, unit="FLOP/s", q1_s=0.009, q3_s=0.011)
    slow = bench.Timing("slow", "cpu", 0.020, 0.004, 5, q1_s=0.018, q3_s=0.022)
    rep.record(fast, slow, bench.speedup(slow, fast))
    rate = rep.rows["fast"]
    assert rate["unit"] == "GFLOP/s" and rate["value"] == pytest.approx(200.0)
    assert rate["spread"] == pytest.approx([2e9 / 0.011 / 1e9, 2e9 / 0.009 / 1e9])  # rate at q3, q1
    assert rep.rows["slow"]["unit"] == "ms" and rep.rows["slow"]["spread"] == pytest.approx([18.0, 22.0])
    ratio = rep.rows["fast vs slow"]
    assert ratio["unit"] == "×" and ratio["value"] == pytest.approx(2.0)
    assert ratio["spread"] == pytest.approx([0.018 / 0.011, 0.022 / 0.009])
    assert ratio["note"] == "cpu"  # the device of the timings it compares
    gpu = bench.Timing("on a GPU", "cuda", 0.001, 0.0001, 5)
    rep.record(gpu, slow, bench.speedup(slow, gpu))
    assert rep.rows["on a GPU vs slow"]["note"] == ""  # two devices: none of them alone
    rep.record(bench.speedup(slow, fast), note="2 ranks, gloo")
    assert rep.rows["fast vs slow"]["note"] == "2 ranks, gloo"
    table = rep.table()
    assert "spread (below)" in table and report.SPREAD in table and all(key in table for key in rep.rows)
    with pytest.raises(TypeError, match="takes bench.Timing and bench.Ratio"):
        rep.record(3.0)


def test_record_can_print_what_it_records(capsys):
    rep = report.Report("01_gpu_vs_cpu", "smoke", "cpu")
    fast = bench.Timing("fast", "cpu", 0.010, 0.002, 5, q1_s=0.009, q3_s=0.011)
    slow = bench.Timing("slow", "cpu", 0.020, 0.004, 5, q1_s=0.018, q3_s=0.022)
    rep.record(fast, note="quiet")
    assert capsys.readouterr().out == ""
    speed = bench.speedup(slow, fast)
    rep.record(slow, speed, show=True)
    assert capsys.readouterr().out.splitlines() == [str(slow), str(speed)]  # each line as recorded
    assert {"fast", "slow", speed.name} <= set(rep.rows)
    long = bench.Timing("a name longer than the column's 28", "cpu", 0.030, 0.004, 5, q1_s=0.028, q3_s=0.032)
    rep.record(fast, long, show=True)
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].index("|") == printed[1].index("|") == len(long.name) + 1  # the names in one column


def test_reference_text_shows_the_first_run_filtered_or_says_none(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    assert "no reference" in report.reference_text("08_transformer")
    rows = gpu_report("08_transformer", rate=700.0)
    rows["measurements"]["kernel"] = {"value": "FLASH_ATTENTION", "unit": "kernel", "note": ""}
    report.record_reference({"08_transformer": rows})
    text = report.reference_text("08_transformer")
    assert text.splitlines()[0].startswith("recorded reference run on NVIDIA Test GPU (this course's code, gpu profile")
    assert text.splitlines()[0].endswith("not on this machine:")
    assert "700" in text and "FLASH_ATTENTION" in text  # numbers and words alike
    assert "has no row" in report.reference_text("08_transformer", prefixes=("nothing like it",))
    only = report.reference_text("08_transformer", prefixes=("kern",))
    assert "FLASH_ATTENTION" in only and "700" not in only


def test_fmt_row_names_value_spread_unit_and_note():
    line = report.fmt_row("SDPA", {"value": 2.5, "unit": "×", "note": "T=1024", "spread": [2.0, 3.0]})
    assert line == "SDPA: 2.5 (2–3) ×: a difference beyond its interval (1 lies outside it; drift not recorded, so not checked against it)  T=1024"
    assert report.fmt_row("r", {"value": 1.041, "unit": "×", "spread": [0.842, 1.203]}) == "r: 1.041 (0.842–1.203) ×: too wide to tell"
    assert report.fmt_row("r", {"value": 1.003, "unit": "×", "spread": [1.0, 1.006]}).endswith("(its interval holds 1)")
    assert report.fmt_row("t", {"value": 2.5, "unit": "ms", "spread": [2.0, 3.0]}) == "t: 2.5 (2–3) ms"  # not a ratio


def _run_report(notebook: str, profile: str = "cpu", **rows) -> dict:
    """A report of one run: rows key=(value, lo, hi) in GFLOP/s."""
    rep = report.Report(notebook, profile, "cpu")
    for key, (value, lo, hi) in rows.items():
        rep.add(key.replace("_", " "), value, "GFLOP/s", spread=(lo, hi))
    return rep.to_dict()


def test_shared_quantities_agree_within_the_slack_of_their_ranges():
    both = report.shared({
        "00_setup_check": _run_report("00_setup_check", matmul_512=(18.0, 16.8, 32.8), only_here=(1, 1, 1)),
        "01_gpu_vs_cpu": _run_report("01_gpu_vs_cpu", matmul_512=(201.0, 200.7, 202.1)),
    })
    assert [s.key for s in both] == ["matmul 512"] and not both[0].agree  # 11× apart: the finding
    assert "DISAGREE" in str(both[0]) and "00 18 (16.8–32.8)" in str(both[0])
    near = report.shared({"a": _run_report("a", peak=(200.0, 195.0, 205.0)),
                          "b": _run_report("b", peak=(230.0, 225.0, 235.0)),
                          "c": _run_report("c", peak=(240.0, 240.0, 240.0))})
    assert near[0].agree and near[0].slack == report.AGREE_SLACK["cpu"]  # 225 / 1.25 <= 205 × 1.25
    far = report.shared({"a": _run_report("a", peak=(200.0, 195.0, 205.0)),
                         "b": _run_report("b", peak=(330.0, 325.0, 335.0))})
    assert not far[0].agree  # 325 / 1.25 = 260 > 205 × 1.25 = 256


def test_shared_compares_one_run_of_one_profile_only():
    with pytest.raises(ValueError, match="several profiles"):
        report.shared({"a": _run_report("a", "smoke", x=(1, 1, 1)), "b": _run_report("b", "cpu", x=(1, 1, 1))})
    smoke = report.shared({"a": _run_report("a", "smoke", x=(100.0, 99.0, 101.0)),
                           "b": _run_report("b", "smoke", x=(180.0, 179.0, 181.0))})
    assert smoke[0].agree and smoke[0].slack == 2.0  # smoke's 0.05 s measurements: more slack


def test_course_agree_exits_1_when_two_notebooks_disagree(tmp_path, capsys):
    from course_lib.workshop import cli
    assert cli.main(["agree", str(tmp_path)]) == 2
    for nb, value in (("00_setup_check", 18.0), ("01_gpu_vs_cpu", 201.0)):
        rep = report.Report(nb, "cpu", "cpu")
        rep.add("matmul 512×512 float32", value, "GFLOP/s", spread=(0.95 * value, 1.05 * value))
        rep.save(tmp_path / "reports")
    assert cli.main(["agree", str(tmp_path)]) == 1
    assert "1 disagree: matmul 512×512 float32" in capsys.readouterr().out
    rep = report.Report("01_gpu_vs_cpu", "cpu", "cpu")
    rep.add("matmul 512×512 float32", 20.0, "GFLOP/s", spread=(19.0, 21.0))
    rep.save(tmp_path / "reports")
    assert cli.main(["agree", str(tmp_path)]) == 0
    rep = report.Report("00_setup_check", "smoke", "cpu")  # a later run of another profile, same folder
    rep.add("matmul 512×512 float32", 20.0, "GFLOP/s")
    rep.save(tmp_path / "reports")
    assert cli.main(["agree", str(tmp_path)]) == 2 and "several profiles" in capsys.readouterr().err


def test_one_stored_measurement_read_by_two_notebooks_is_shared_not_agreeing():
    both = report.shared({"08": _run_report("08", peak=(1.7, 1.6, 1.8)), "10": _run_report("10", peak=(1.7, 1.6, 1.8))})
    assert both[0].same and "one measurement, shared" in str(both[0])
    apart = report.shared({"08": _run_report("08", peak=(1.7, 1.6, 1.8)), "10": _run_report("10", peak=(1.75, 1.6, 1.8))})
    assert not apart[0].same and "agree" in str(apart[0])


def test_the_reference_column_names_what_the_reference_measured_when_it_differs():
    assert report._ref_cell(None, {}) == "-"
    ref = {"value": 2.466, "unit": "kimg/s", "note": "resnet50, batch 256"}
    assert report._ref_cell(ref, {"note": "smallcnn, batch 64"}) == "2.466 kimg/s (resnet50, batch 256)"
    assert report._ref_cell(ref, {"note": "resnet50, batch 256"}) == "2.466 kimg/s"
    # a GPU machine's row measured on its CPU says so, also when this run's note is the same
    on_cpu = {"value": 37.19, "unit": "kimg/s", "note": "cpu, 1 thread(s) per rank"}
    assert report._ref_cell(on_cpu, {"note": "cpu, 1 thread(s) per rank"}) == "37.19 kimg/s (host CPU)"
    gloo = {"value": 63.3, "unit": "ms", "note": "2 ranks, gloo, 1 thread(s) per rank"}
    assert report._ref_cell(gloo, {"note": ""}) == "63.3 ms (host CPU; 2 ranks, gloo, 1 thread(s) per rank)"
    assert report._ref_cell({"value": 1.0, "unit": "ms", "note": "cpus=2"}, {}) == "1 ms (cpus=2)"


def test_this_run_reads_another_notebooks_fresh_report_of_the_same_profile_and_device(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_BUILD_DIR", str(tmp_path))
    other = report.Report("08_transformer", "cpu", torch.device("cpu"))
    other.add("attention alone: SDPA vs written out", 0.43, "×")
    other.save()
    me = report.Report("10_compile_and_profile", "cpu", torch.device("cpu"))
    assert report.this_run("08_transformer", me)["attention alone: SDPA vs written out"]["value"] == 0.43
    assert report.this_run("07_attention", me) is None  # has not run
    smoke = report.Report("10_compile_and_profile", "smoke", torch.device("cpu"))
    assert report.this_run("08_transformer", smoke) is None  # another profile: another run
    old = time.time() - 7200
    os.utime(report.report_path("08_transformer"), (old, old))
    assert report.this_run("08_transformer", me) is None  # two hours old: not this run's


def test_a_ratio_range_shows_on_which_side_of_1_its_ends_lie():
    row = {"value": 1.0029880263918143, "unit": "×", "spread": [1.000420900783998, 1.0057564941005073]}
    assert report.fmt_row_value(row) == "1.003 (1.0004–1.006)"  # not '(1–1.006)' beside 'a difference'
    assert report.fmt_row_value({**row, "unit": "ms"}) == "1.003 (1–1.006)"  # only ratios read against 1
    assert report.fmt_row_value({"value": 0.9998, "unit": "×", "spread": [0.99996, 1.0]}) == "0.9998 (0.99996–1)"
    assert report.ratio_grade(row) == "a small difference beyond its interval (1 lies outside it; drift not recorded, so not checked against it)"  # 0.3 %: the learner's word
    assert report.ratio_grade({"value": 1.8, "unit": "×", "spread": [1.7, 1.9]}) == "a difference beyond its interval (1 lies outside it; drift not recorded, so not checked against it)"
    # taken at two moments: the rule this run's ratios are read by, whether the row says so or its older name does
    apart = {"value": 2.3148848747497035, "unit": "×", "spread": [1.958589557578997, 2.4694767522864756]}  # 05's H200
    worded = "timed apart: its range, 1.96–2.47×, is within 2.5× of 1, a gap the pace of two moments can make"
    assert report.ratio_grade({**apart, "apart": True}).startswith(worded)
    assert report.ratio_grade(apart, "a process each vs one after another (timed apart, unpaired)").startswith(worded)
    far = report.ratio_grade({**apart, "spread": [2.6, 2.9], "value": 2.7}, "x, unpaired")
    assert far.startswith("timed apart: its whole range, 2.60–2.90×, lies 2.5× or more") and far.endswith(": a difference")  # which way: the value says
    rep = report.Report("05_data_parallel", "smoke", torch.device("cpu"))
    rep.record(bench.ratio_of("a vs b", 2.0, 1.9, 2.1, apart=True), bench.ratio_of("c vs d", 2.0, 1.9, 2.1))
    assert rep.rows["a vs b"]["apart"] is True and "apart" not in rep.rows["c vs d"]


def test_the_references_loader_ratios_are_read_as_timed_apart():
    """02's loader rows were each timed alone in the recorded runs (notebook 02 at 7aa4f09 and 013e117: one
    `timed(...)` per row), so their ratios carry 'apart' and read by the two-moments rule."""
    _, rows = report.reference("02_first_cnn")
    loaders = {k: r for k, r in rows.items() if k.endswith("vs workers=0") and r.get("spread")}
    assert loaders and all(report.ratio_grade(r, k).startswith("timed apart: ") for k, r in loaders.items())


def test_fmt_row_gives_an_unprefixed_rate_its_prefix():
    row = {"value": 485186.0, "unit": "tok/s", "spread": [460056.0, 522333.0], "note": "eager"}
    assert report.fmt_row("long run: tokens/s", row) == "long run: tokens/s: 485.2 (460.1–522.3) ktok/s  eager"
    assert report.fmt_row("x", {"value": 950.0, "unit": "tok/s"}) == "x: 950 tok/s"


def test_a_paired_ratio_keeps_its_rounds_and_drift_and_is_read_by_the_same_rules(tmp_path, monkeypatch):
    """A ratio timed in turns is recorded with its rounds, coverage and drift, so that a later reader grades
    it as this run's verdicts do (inconclusive where the drift exceeds the difference); an older record
    whose range is the two timings' quartiles says so instead of passing for a paired interval."""
    rep = report.Report("10_compile_and_profile", "gpu", "cpu")
    rep.record(bench.Ratio("drifted", 1.06, 1.04, 1.22, rounds=5, coverage=0.94, drift=0.09),
               bench.Ratio("steady", 1.06, 1.04, 1.08, rounds=5, coverage=0.94, drift=0.01))
    assert rep.rows["drifted"]["rounds"] == 5 and rep.rows["drifted"]["drift"] == 0.09
    assert report.ratio_grade(rep.rows["drifted"]).startswith("inconclusive: the whole interval lies above 1, yet the machine's speed changed by 9.0%")
    assert report.ratio_grade(rep.rows["steady"]) == ("a difference beyond its interval (1 lies outside it, and the "
                                                      "drift is smaller)")
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    old = report.Report("10_compile_and_profile", "gpu", "cpu")
    old.meta.update(device="NVIDIA Test GPU", device_type="cuda")
    old.add("eager", 400.0, "ktok/s", spread=(380.0, 410.0))
    old.add("compiled", 500.0, "ktok/s", spread=(480.0, 520.0))
    old.add("compiled vs eager", 1.25, "×", spread=(480.0 / 410.0, 520.0 / 380.0))  # as older records did
    report.record_reference({"10_compile_and_profile": old.to_dict()})
    said = report.reference_text("10_compile_and_profile", ("compiled vs",))
    assert "a difference beyond the range its two timings' quartiles allow, as recorded: not a paired interval" in said
