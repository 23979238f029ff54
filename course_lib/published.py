"""Figures measured and published by others, with where each was read: what a GPU does, for the
learner who has none.

The course measures on the learner's machine. Where a section needs a GPU the machine lacks, it
shows first the recorded reference run from ``results/`` when one exists, then these: numbers
other people measured on named hardware and published, each quoted from its source (title, URL
and where in it: table, figure, section), with the date it was read. They are measurements, not
this machine's, so every line that prints one says "published by …, measured on …, not on this
machine". They are kept apart from :mod:`course_lib.datasheet`, whose figures are vendor peaks
and no measurement at all.

Rules for an entry: the figure exactly as the source prints it (a ratio the source does not print
is not added to `figure`); the hardware and, where given, the software it ran on; `quote`, the
source's own words or table row that carry the figure; no figure from memory. Sources read
through a copy (a transcript, a mirror) say so in `source` or `what`. The entries are data, in
``published.toml`` beside this module. Print entries by key (:func:`show`), so a key that is
missing fails the notebook that prints it.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from course_lib import report

@dataclass(frozen=True)
class Figure:
    """One published measurement: the `figure` as printed, in `unit`, measured by `by` on
    `hardware` (with `software` where given), read in `source` at `url`, `where` in it."""

    key: str
    by: str  # who published it, short: "NVIDIA DeepLearningExamples"
    figure: str  # as the source prints it
    unit: str
    hardware: str
    what: str  # what was measured: model, batch, setup, caveats
    source: str  # title of the document (and the copy it was read in, if not the original)
    url: str
    where: str  # table, figure or section of the source
    quote: str  # the source's words or table row that carry the figure
    software: str = ""  # versions, where the source gives them
    read: str = ""  # the date it was read in its source
    setup: str = ""  # where set: the configuration in a few words, so the entry prints on one line

    def cite(self) -> str:
        """The label and the figure: who published it, on what hardware, not on this machine."""
        on = f"hardware {self.hardware}" if self.hardware.startswith("not stated") else self.hardware
        return f"published by {self.by}, measured on {on}, not on this machine: {self.figure} [{self.unit}]"

    def __str__(self) -> str:
        software = f"\n    software: {self.software}" if self.software else ""
        return (f"{self.cite()}\n    what: {self.what}{software}\n"
                f"    source: {self.source}; {self.where}; {self.url} (read {self.read})")

    def reference(self) -> str:
        """Where it was read, in full: the source's title, where in it, its address, the date, the software."""
        software = f"; software: {self.software}" if self.software else ""
        return f"{self.source}; {self.where}; {self.url} (read {self.read}){software}"

    def short(self, number: int) -> str:
        """A notebook's output: the label, the figure and the number of its full reference in
        :func:`sources`; one line with its `setup` where the entry has one (the whole `what` stays
        in published.toml), else two, the second what was measured and its address."""
        if self.setup:
            return f"{self.cite()} | {self.setup} [{number}]"
        return f"{self.cite()}\n    {self.what} [{number}: {self.url}]"


ENTRIES = Path(__file__).with_name("published.toml")  # the entries, as data


def _load(path: Path = ENTRIES) -> tuple[Figure, ...]:
    """Every entry of `path`; an entry without its own `read` date takes the file's."""
    table = tomllib.loads(path.read_text(encoding="utf-8"))
    return tuple(Figure(**{"read": table["read"], **entry}) for entry in table["figure"])


FIGURES = _load()
_BY_KEY = {f.key: f for f in FIGURES}


def get(key: str) -> Figure:
    """The entry `key`; a missing key is one clear error naming the keys that exist."""
    try:
        return _BY_KEY[key]
    except KeyError:
        raise KeyError(f"No published figure has the key {key!r}; the keys are: {', '.join(_BY_KEY)}.") from None


_CITED: dict[str, int] = {}  # key -> its number in this process's list of sources, in the order first shown


def _shown(key: str) -> str:
    """The entry `key` in two lines, numbered for :func:`sources` (the first time it is shown)."""
    fig = get(key)
    return fig.short(_CITED.setdefault(key, len(_CITED) + 1))


def show(*keys: str) -> str:
    """The entries `keys`, each with what was measured and its address, for printing; the full
    reference of each (title, where in it, date read, software) waits in :func:`sources`."""
    return "\n".join(_shown(k) for k in keys)


def sources() -> str:
    """The full reference of every entry shown so far in this process, by its number: a notebook's
    closing table ends with it (:meth:`course_lib.report.Report.table`); '' when none was shown."""
    if not _CITED:
        return ""
    return "\n".join(["Sources of the published figures printed above:",
                      *(f"  [{n}] {get(key).reference()}" for key, n in _CITED.items())])


def elsewhere(notebook: str, prefixes: tuple[str, ...] = (), keys: Sequence[str] = (), *,
              exclude: tuple[str, ...] = (), unlike: str = "") -> str:
    """What a GPU does in a section this machine cannot run, for printing: first the rows of the
    recorded reference run of `notebook` (``results/``: this course's code on a GPU) whose names
    start with one of `prefixes` and contain none of `exclude`, then the published figures `keys`,
    each labelled as measured elsewhere, under `unlike` where they measured other work than the
    section (what they measured instead); one line saying so when there is neither."""
    rows = report.reference_rows(notebook, prefixes, exclude) if prefixes else []
    lines = [report.reference_header(notebook), *rows] if rows else []
    if keys:
        lines += [f"figures published elsewhere, not measured here{f' ({unlike})' if unlike else ''}:",
                  *("  " + _shown(k).replace("\n", "\n  ") for k in keys)]
    return "\n".join(lines) or "(no reference GPU run in results/ and no published figure answers this yet)"


report.TABLE_FOOTERS.append(sources)  # every closing table ends with the references of the figures printed
