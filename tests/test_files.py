"""Atomic writes: the old file or the new one, never half; leftovers of killed writes go."""

import os
import stat

import pytest

from course_lib import files


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path):
    path = tmp_path / "results.json"
    files.write_text_atomic(path, "old")

    def half_then_crash(f):
        f.write(b"half of the new")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        files.atomic_write(path, half_then_crash)
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["results.json"]


def test_permissions_are_kept_and_new_files_are_readable(tmp_path):
    new = files.write_text_atomic(tmp_path / "sub" / "new.txt", "é")  # folders are created
    assert new.read_text(encoding="utf-8") == "é"
    assert stat.S_IMODE(new.stat().st_mode) == 0o644
    new.chmod(0o600)
    files.write_text_atomic(new, "again")
    assert stat.S_IMODE(new.stat().st_mode) == 0o600 and new.read_text() == "again"


def test_leftovers_of_killed_writes_are_removed_by_the_next_write_only_for_that_path(tmp_path):
    path = tmp_path / "run.pt"
    mine = [tmp_path / ".run.pt.k3j_x9.tmp", tmp_path / ".run.pt.a1b2c3.tmp"]
    other = tmp_path / ".other.pt.a1b2c3.tmp"
    for p in [*mine, other]:
        p.write_bytes(b"partial")
    files.atomic_write(path, lambda f: f.write(b"whole"))
    assert path.read_bytes() == b"whole"
    assert not any(p.exists() for p in mine) and other.exists()
    assert files.remove_stale_temp_files(tmp_path / "other.pt") == 1
