"""course_lib.workshop.cohort and `course cohort`: a folder of attendees' reports becomes one table and
one plot; a bad file is named in one sentence and the rest still shown."""

import json
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from course_lib import device, report  # noqa: E402
from course_lib.workshop import catalog, cli, cohort

PNG = b"\x89PNG\r\n\x1a\n"


def check(name: str, *, gpus: int = 0, matmul: float = 100.0, copy: float = 10.0,
          partial: int = 0, torch: str = "2.7.0", cuda: str | None = None) -> dict:
    """A check report as `course check --json` writes it: `gpus` GPUs, `partial` notebooks
    partial (the rest full), a matmul of `matmul` GFLOP/s (±10 %) and a copy of `copy` GB/s."""
    stems = [e.stem for e in catalog.NOTEBOOKS]
    return {
        "kind": "course-check", "schema": 1, "name": name, "date": "2026-05-01T09:00:00+00:00",
        "course": "0.1.0", "profile": "gpu" if gpus else "cpu",
        "hardware": {"cpu": "Test CPU", "cores": 2, "threads": 2, "ram_gib": 16.0, "bf16": True,
                     "tf32": bool(gpus), "nccl": bool(gpus), "gloo": True,
                     "gpus": [{"name": "NVIDIA Test GPU", "memory_gib": 80.0, "capability": "9.0"}] * gpus},
        "versions": {"python": "3.11.9", "torch": torch, "torchvision": "0.22.0", "cuda": cuda,
                     "cudnn": None},
        "notebooks": [{"stem": s, "status": "partial" if i < partial else "full", "what": "…"}
                      for i, s in enumerate(stems)],
        "measurements": {
            "matmul": {"name": "matmul 1024×1024 float32", "device": "cpu (2 threads) Test CPU",
                       "value": matmul, "unit": "GFLOP/s", "spread": [0.9 * matmul, 1.1 * matmul],
                       "runs": 5, "dtype": "float32"},
            "copy": {"name": "copy 256.0 MiB", "device": "cpu (2 threads) Test CPU", "value": copy,
                     "unit": "GB/s", "spread": [0.95 * copy, 1.05 * copy], "runs": 5}},
    }


def write(path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))


def notebook_report(folder, notebook: str, profile: str = "cpu", **values) -> None:
    """A notebook report saved by report.Report, as `course run` leaves it in build/reports."""
    rep = report.Report(notebook, profile, "cpu")
    for key, value in values.items():
        rep.add(key.replace("_", " "), value, "GFLOP/s", spread=(0.9 * value, 1.1 * value))
    rep.save(folder)


def run_cohort(folder, capsys, *extra: str) -> tuple[int, str, list[str]]:
    code = cli.main(["cohort", str(folder), *extra])
    out, err = capsys.readouterr()
    return code, out, [ln for ln in err.splitlines() if ln.strip()]


def cells(line: str) -> list[str]:
    """A table line's cells (columns are two or more spaces apart)."""
    return re.split(r"\s{2,}", line.strip())


def first_block(out: str) -> dict[str, list[str]]:
    """The summary table's rows by attendee."""
    lines = out.split("\n(measurements")[0].splitlines()[2:]
    return {row[0]: row for row in map(cells, lines)}


def is_png(path) -> bool:
    return path.read_bytes()[:8] == PNG and plt.imread(path).shape[0] > 100


def test_ten_reports_two_malformed(tmp_path, capsys):
    names = [f"attendee{i}" for i in range(8)]
    for i, name in enumerate(names[:4]):  # four at the top, four in attendee folders
        write(tmp_path / f"{name}.json", check(name, matmul=100.0 * (i + 1)))
    for i, name in enumerate(names[4:]):
        write(tmp_path / name / "check.json", check(f"{name}@laptop", gpus=i % 3, cuda="12.6"))
    write(tmp_path / "broken.json", '{"kind": "course-check", "schema": 1, "name": ')
    wrong = check("future")
    wrong["schema"] = 2
    write(tmp_path / "future" / "check.json", wrong)

    code, out, err = run_cohort(tmp_path, capsys)
    assert code == 0
    rows = first_block(out)
    assert sorted(rows) == names
    assert [r[1:3] for n, r in sorted(rows.items())][4:] == [["cpu: Test CPU", "0"], ["NVIDIA Test GPU", "1"],
                                                            ["NVIDIA Test GPU", "2"], ["cpu: Test CPU", "0"]]
    assert rows["attendee2"][-3:] == ["300 ±10%", "float32", "10 ±5%"]
    assert rows["attendee0"][5] == f"{len(catalog.NOTEBOOKS)}/0/0"  # full/partial/not written yet
    assert len(err) == 2  # one sentence per bad file, each naming it
    assert str(tmp_path / "broken.json") in err[0] and "not JSON" in err[0]
    assert str(tmp_path / "future" / "check.json") in err[1] and "schema 2" in err[1]
    plot = tmp_path / "cohort.png"
    assert f"plot: {plot}" in out and is_png(plot)


def test_readiness_counts_follow_the_statuses():
    data = check("a", partial=3)
    data["notebooks"][-1]["status"] = "not written yet"
    n = len(catalog.NOTEBOOKS)
    assert cohort.readiness_counts(data) == f"{n - 4}/3/1"
    assert cohort.readiness_counts({}) == cohort.DASH


def test_a_partial_report_shows_blanks(tmp_path, capsys):
    bare = {"kind": "course-check", "schema": 1, "name": "bare"}
    no_gpu = check("nogpu")
    del no_gpu["hardware"]["gpus"], no_gpu["measurements"]["copy"]
    write(tmp_path / "bare.json", bare)
    write(tmp_path / "nogpu.json", no_gpu)
    code, out, err = run_cohort(tmp_path, capsys)
    assert code == 0 and err == []
    rows = first_block(out)
    assert rows["bare"][1:] == [cohort.DASH] * 8
    assert rows["nogpu"][2] == cohort.DASH and rows["nogpu"][-3:] == ["100 ±10%", "float32", cohort.DASH]
    panels = cohort.panels(cohort.read(tmp_path)[0])
    copies = list(panels.values())[1]
    assert copies == {"bare": None, "nogpu — cpu: Test CPU": None}  # no device known: the name alone
    assert is_png(tmp_path / "cohort.png")


@pytest.mark.parametrize("change, named", [
    (lambda d: d["hardware"].update(cores="two"), "hardware.cores should be an integer, not a string"),
    (lambda d: d["measurements"]["matmul"].update(value=True), "measurements.matmul.value should be a number"),
    (lambda d: d["hardware"].update(gpus={"name": "x"}), "hardware.gpus should be a list, not an object"),
    (lambda d: d["notebooks"].append(None), f"notebooks[{len(catalog.NOTEBOOKS)}] is null"),
    (lambda d: d.pop("name"), "no 'name'"),
    (lambda d: d.update(kind="something-else"), "kind 'something-else'"),
], ids=["string-for-int", "bool-for-number", "object-for-list", "null-item", "no-name", "kind"])
def test_a_malformed_check_report_is_one_sentence(tmp_path, capsys, change, named):
    bad = check("bad")
    change(bad)
    write(tmp_path / "bad.json", bad)
    write(tmp_path / "good.json", check("good"))
    code, out, err = run_cohort(tmp_path, capsys)
    assert code == 0 and list(first_block(out)) == ["good"]
    assert len(err) == 1 and str(tmp_path / "bad.json") in err[0] and named in err[0]
    assert err[0].count(". ") == 0 and err[0].endswith("left out.")


def test_notebook_reports_side_by_side(tmp_path, capsys):
    write(tmp_path / "alice" / "check.json", check("alice@laptop"))
    notebook_report(tmp_path / "alice" / "build" / "reports", "01_gpu_vs_cpu", cpu_peak=200.0, only_alice=1.0)
    notebook_report(tmp_path / "bob" / "reports", "01_gpu_vs_cpu", profile="smoke", cpu_peak=50.0)
    notebook_report(tmp_path / "bob" / "reports", "02_first_cnn", profile="smoke", images=3.0)
    write(tmp_path / "carol.json", check("carol"))  # a check report only: no column below
    code, out, err = run_cohort(tmp_path, capsys)
    assert code == 0 and err == []
    assert sorted(first_block(out)) == ["alice", "bob", "carol"]
    assert first_block(out)["bob"][1] == "cpu: " + report.describe().name  # from his notebook reports
    block = out.split("notebook reports")[1].splitlines()
    assert cells(block[1]) == ["notebook", "measurement", "unit", "alice (cpu)", "bob (smoke)"]
    rows = {cells(ln)[1]: cells(ln) for ln in block[3:] if ln.strip() and not ln.startswith("plot:")}
    assert rows["cpu peak"] == ["01_gpu_vs_cpu", "cpu peak", "GFLOP/s", "200 ±10%", "50 ±10%"]
    assert rows["only alice"][3:] == ["1 ±10%", cohort.DASH]
    assert rows["images"][0] == "02_first_cnn" and rows["images"][3:] == [cohort.DASH, "3 ±10%"]
    assert len(rows) == 3  # only keys that at least one attendee reported


def test_newer_report_wins_and_is_mentioned(tmp_path, capsys):
    old, new = check("dana", matmul=1.0), check("dana", matmul=2.0)
    new["date"] = "2026-06-01T09:00:00+00:00"
    write(tmp_path / "dana" / "a.json", new)
    write(tmp_path / "dana" / "b.json", old)
    attendees, notes = cohort.read(tmp_path)
    assert [a.name for a in attendees] == ["dana"] and attendees[0].check["measurements"]["matmul"]["value"] == 2.0
    assert len(notes) == 1 and "dana has two check reports" in notes[0]


def test_a_notebook_report_needs_an_attendee_folder(tmp_path):
    notebook_report(tmp_path, "01_gpu_vs_cpu", rate=1.0)
    write(tmp_path / "erin.json", check("erin"))
    attendees, notes = cohort.read(tmp_path)
    assert [a.name for a in attendees] == ["erin"]
    assert len(notes) == 1 and "01_gpu_vs_cpu.json" in notes[0] and "attendee's folder" in notes[0]


@pytest.mark.parametrize("make", [lambda p: p.mkdir(), lambda p: None], ids=["empty", "missing"])
def test_empty_or_missing_folder_is_one_sentence_and_exit_2(tmp_path, capsys, make):
    folder = tmp_path / "cohort"
    make(folder)
    code, out, err = run_cohort(folder, capsys)
    assert code == 2 and out == "" and len(err) == 1 and str(folder) in err[0]
    assert not (folder / "cohort.png").exists()


def test_plot_goes_where_asked(tmp_path, capsys):
    write(tmp_path / "in" / "frank.json", check("frank"))
    target = tmp_path / "out" / "figure.png"
    code, out, _ = run_cohort(tmp_path / "in", capsys, "--plot", str(target))
    assert code == 0 and is_png(target) and not (tmp_path / "in" / "cohort.png").exists()


def test_a_copied_build_folder_other_json_is_not_read_and_a_smoke_run_loses_a_tie(tmp_path, capsys):
    write(tmp_path / "bob" / "check.json", check("bob"))
    build = tmp_path / "bob" / "build"
    notebook_report(build / "a-smoke-test" / "reports", "01_gpu_vs_cpu", profile="smoke", matmul_peak=3.0)
    notebook_report(build / "reports", "01_gpu_vs_cpu", profile="cpu", matmul_peak=90.0)
    write(build / "10_compile_and_profile" / "trace.json", {"traceEvents": []})  # a profiler trace
    code, out, err = run_cohort(tmp_path, capsys)
    assert code == 0
    assert "90 ±10%" in out and "3 ±10%" not in out  # same day: the run not under smoke
    assert len(err) == 1 and "two reports of 01_gpu_vs_cpu;" in err[0]


def test_check_measures_fp16_on_a_gpu_that_only_emulates_bf16(monkeypatch):
    """A T4 (sm 7.5): torch.cuda.is_bf16_supported() says True (emulation), the check times fp16."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.version, "hip", None)
    for capability, dtype in [((7, 5), torch.float16), ((8, 6), torch.bfloat16)]:
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i, c=capability: c)
        assert cohort.dtypes_to_try(torch.device("cuda")) == [dtype]
    assert torch.float32 in cohort.dtypes_to_try(torch.device("cpu"))
    for flags, tried in (([], [torch.float32]), (["avx512_bf16"], [torch.float32, torch.bfloat16])):
        monkeypatch.setattr(device, "cpu_16bit_flags", lambda flags=flags: flags)  # bf16 only where native
        assert cohort.dtypes_to_try(torch.device("cpu")) == tried
