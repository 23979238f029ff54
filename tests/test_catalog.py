"""course_lib.workshop.catalog: every notebook has one entry, and the readiness table says what a
machine can show without predicting how a measurement comes out."""

import pytest

from course_lib import device
from course_lib.workshop import catalog


def test_every_notebook_file_has_one_entry_in_course_order():
    stems = [e.stem for e in catalog.NOTEBOOKS]
    assert stems == sorted(stems) and len(set(stems)) == len(stems)
    on_disk = {p.stem for p in catalog.NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb")}
    assert on_disk and on_disk <= set(stems), f"notebooks without a catalog entry: {on_disk - set(stems)}"


@pytest.mark.parametrize("entry", catalog.NOTEBOOKS, ids=lambda e: e.stem)
def test_a_gpu_notebook_says_what_needs_the_gpu(entry):
    if entry.gpus:
        assert "GPU" in entry.on_less, "say what the GPU adds"
    assert entry.on_less and entry.title


def _info(gpus: int) -> device.DeviceInfo:
    info = device.describe()
    info.gpu_count = gpus
    return info


def test_readiness_rows(tmp_path):
    written = [e for e in catalog.NOTEBOOKS if e.stem in ("00_setup_check", "01_gpu_vs_cpu", "06_ddp")]
    for e in written:
        catalog.path_of(e, tmp_path).write_text("{}")
    rows = {stem: (status, what) for stem, status, what in catalog.readiness(_info(0), tmp_path)}
    assert rows["00_setup_check"] == ("full", "everything")
    entry01 = next(e for e in catalog.NOTEBOOKS if e.stem == "01_gpu_vs_cpu")
    assert rows["01_gpu_vs_cpu"] == ("partial", entry01.on_less)
    assert rows["08_transformer"] == ("not written yet", "-")
    one_gpu = {stem: status for stem, status, _ in catalog.readiness(_info(1), tmp_path)}
    assert one_gpu["01_gpu_vs_cpu"] == "full" and one_gpu["06_ddp"] == "partial"  # 06 needs 2
