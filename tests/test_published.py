"""course_lib.published: every entry is complete and carries its figure in its source's words;
the keys notebooks print exist."""

import datetime
import json
import re
from pathlib import Path

import pytest

from course_lib import published, report

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
_NUMBER = re.compile(r"(?<![A-Za-z\d.,])\d[\d,]*(?:\.\d+)?")  # 2,470 or 2.63, not the 32 of "TF32"


@pytest.mark.parametrize("fig", published.FIGURES, ids=lambda f: f.key)
def test_every_entry_names_its_figure_unit_hardware_and_source(fig):
    for field in ("by", "figure", "unit", "hardware", "what", "source", "where", "quote"):
        assert getattr(fig, field).strip(), f"{fig.key}: {field} is empty"
    assert fig.url.startswith("https://") and " " not in fig.url
    assert datetime.date.fromisoformat(fig.read) <= datetime.date.today()
    assert re.fullmatch(r"[a-z][a-z0-9_]*", fig.key)


@pytest.mark.parametrize("fig", published.FIGURES, ids=lambda f: f.key)
def test_every_number_of_a_figure_is_in_the_source_words_quoted(fig):
    """A figure is copied, not computed or remembered: each of its numbers appears in the quote
    (thousands separators aside); a figure in words ("more than half") is quoted word for word."""
    quoted = fig.quote.replace(",", "")
    numbers = [n.replace(",", "") for n in _NUMBER.findall(fig.figure)]
    if not numbers:
        assert fig.figure.lower() in fig.quote.lower(), f"{fig.key}: a figure in words is not quoted"
    missing = [n for n in numbers if not re.search(rf"(?<![\d.]){re.escape(n)}(?![\d])", quoted)]
    assert not missing, f"{fig.key}: {missing} not in the quote"


def test_keys_are_unique_and_a_missing_key_is_one_clear_error():
    keys = [f.key for f in published.FIGURES]
    assert len(keys) == len(set(keys))
    with pytest.raises(KeyError, match="no_such_key"):
        published.get("no_such_key")


def test_a_printed_entry_is_labelled_as_published_elsewhere_with_its_hardware_and_source():
    fig = published.FIGURES[0]
    text = published.show(fig.key)
    assert text.startswith(f"published by {fig.by}, measured on {fig.hardware}, not on this machine")
    assert fig.figure in text and fig.url in text and len(text.splitlines()) == 2
    number = int(text.rsplit("[", 1)[1].split(":")[0])  # its full reference, by number, in sources()
    listed = published.sources().splitlines()
    assert listed[0] == "Sources of the published figures printed above:"
    assert f"  [{number}] {fig.source}; {fig.where}; {fig.url} (read {fig.read})" in listed[number]
    assert published.show(fig.key) == text  # shown again: the same number, listed once
    assert published.sources().count(fig.where) == 1


def test_a_closing_table_ends_with_the_sources_of_the_figures_printed(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    monkeypatch.setattr(published, "_CITED", {})
    rep = report.Report("01_gpu_vs_cpu", "cpu", "cpu")
    rep.add("rate", 1.0, "GFLOP/s")
    assert "Sources of the published" not in rep.table()  # none printed yet
    fig = published.FIGURES[1]
    published.show(fig.key)
    assert rep.table().endswith(f"  [1] {fig.reference()}")


def _printed_keys() -> set[str]:
    keys = set()
    for nb in NOTEBOOKS.glob("*.ipynb"):
        for cell in json.loads(nb.read_text())["cells"]:
            if cell["cell_type"] == "code":
                src = "".join(cell["source"])
                for call in re.findall(r"published\.(?:show|get)\(([^)]*)\)", src):
                    keys |= set(re.findall(r"[\"']([a-z0-9_]+)[\"']", call))
    return keys


def test_every_key_a_notebook_prints_is_in_the_table():
    assert _printed_keys() <= {f.key for f in published.FIGURES}


def test_elsewhere_shows_the_recorded_reference_first_then_the_published_figures(tmp_path, monkeypatch):
    from course_lib import report
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    key = published.FIGURES[0].key
    assert "no reference GPU run" in published.elsewhere("01_gpu_vs_cpu", ("H→D",))  # neither: said
    only_published = published.elsewhere("01_gpu_vs_cpu", ("H→D",), [key])
    assert "recorded reference" not in only_published and published.get(key).figure in only_published
    rep = report.Report("01_gpu_vs_cpu", "gpu", "cpu")
    rep.meta.update(device="NVIDIA Test GPU", device_type="cuda")
    rep.add("H→D pinned", 55.0, "GB/s")
    rep.add("async: time without sync", 0.05, "ms")
    report.record_reference({"01_gpu_vs_cpu": rep.to_dict()})
    both = published.elsewhere("01_gpu_vs_cpu", ("H→D",), [key])
    assert both.index("NVIDIA Test GPU") < both.index("published by")
    assert "H→D pinned: 55" in both and "async" not in both  # only the rows of the prefixes asked for
    with pytest.raises(KeyError):
        published.elsewhere("01_gpu_vs_cpu", ("H→D",), ["no_such_key"])


def test_elsewhere_leaves_out_the_rows_asked_to(tmp_path, monkeypatch):
    from course_lib import report
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    rep = report.Report("02_first_cnn", "gpu", "cpu")
    rep.meta.update(device="NVIDIA Test GPU", device_type="cuda")
    for name in ("loader w=8", "loader w=8 +pin", "data wait loader w=8 +pin"):
        rep.add(name, 1.0, "kimg/s")
    report.record_reference({"02_first_cnn": rep.to_dict()})
    text = published.elsewhere("02_first_cnn", ("loader", "data wait"), exclude=("loader w=8 +pin",))
    assert "loader w=8: 1" in text and "+pin" not in text


def test_entries_ship_with_the_package():
    """The entries are a data file beside the module: a non-editable install must carry it."""
    import tomllib
    from pathlib import Path
    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert published.ENTRIES.name in pyproject["tool"]["setuptools"]["package-data"]["course_lib"]
    assert len(published._load()) == len(published.FIGURES) and published.FIGURES


def test_figures_of_other_work_say_what_they_measured_instead(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    key = published.FIGURES[0].key
    text = published.elsewhere("01_gpu_vs_cpu", keys=[key], unlike="whole training steps, not one matmul")
    assert text.startswith("figures published elsewhere, not measured here (whole training steps, not one matmul):")
    assert published.elsewhere("01_gpu_vs_cpu", keys=[key]).startswith("figures published elsewhere, not measured here:")


def test_an_entry_with_a_setup_prints_on_one_line_and_its_source_once_below(monkeypatch):
    monkeypatch.setattr(published, "_CITED", {})
    fig = next(f for f in published.FIGURES if f.setup)
    text = published.show(fig.key)
    assert text == f"{fig.cite()} | {fig.setup} [1]" and fig.url not in text
    assert published.sources().splitlines()[1] == f"  [1] {fig.reference()}"  # one line a source
    assert all(len(f.setup) <= 80 for f in published.FIGURES)  # a few words, not a second description
