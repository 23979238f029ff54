"""Files written whole or not at all: the one home of atomic writes (checkpoints, reports,
reference results, notebooks).

A file is written to a temporary file in its destination folder, fsynced, then renamed
over the old one (``os.replace`` is atomic on POSIX and Windows), so a reader, or a crash
mid-write, sees the old file or the new one, never half of one. A write killed before
its rename (SIGKILL, power loss) leaves its temporary file behind: the next write of
that path removes it (:func:`remove_stale_temp_files`).
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import IO, Callable


def _temp_files(path: Path) -> list[Path]:
    """Temporary files of `path` (``.<name>.<random>.tmp``, mkstemp's names) in its folder."""
    pattern = re.compile(rf"\.{re.escape(path.name)}\.[a-z0-9_]+\.tmp")
    if not path.parent.is_dir():
        return []
    return [p for p in path.parent.iterdir() if pattern.fullmatch(p.name)]


def remove_stale_temp_files(path: str | os.PathLike) -> int:
    """Delete temporary files that killed writes of `path` left behind; returns how many.

    One writer per path is assumed: a write in flight elsewhere would lose its file.
    """
    stale = _temp_files(Path(path))
    for p in stale:
        p.unlink(missing_ok=True)
    return len(stale)


def atomic_write(path: str | os.PathLike, write: Callable[[IO[bytes]], object]) -> Path:
    """Call ``write(f)`` on a temporary binary file beside `path`, fsync it, rename it over
    `path`. The file keeps its permissions; a new one gets 0644 (not mkstemp's 0600)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temp_files(path)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, mode)
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)  # the atomic step
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write `text` (UTF-8) to `path` atomically (see :func:`atomic_write`)."""
    return atomic_write(path, lambda f: f.write(text.encode("utf-8")))
