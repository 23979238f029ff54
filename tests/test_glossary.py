"""The glossary and the notebooks agree: every term is defined or linked where a learner first meets it.

`notebooks/GLOSSARY.md` has one `### term` heading per term. A heading may list aliases after
` / ` (`### fp16 / half precision`); each alias is searched for, and so is its short form before
a parenthesis (`MFU` for `MFU (model FLOPs utilisation)`). The notebooks' markdown cells are read
in course order; the first occurrence of a term must be emphasised (`**term**` or `*term*`, the
sentence defines it) or be the text of a link to `GLOSSARY.md#<anchor>`. Occurrences in code
(inline or fenced) and in link targets do not count. Cells are numbered from 0, all cell types
counted, as Jupyter lists them.

GLOSSARY_NOTEBOOKS=<folder> checks another copy of the notebooks (and its GLOSSARY.md).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = Path(os.environ.get("GLOSSARY_NOTEBOOKS", ROOT / "notebooks"))
GLOSSARY = NOTEBOOKS / "GLOSSARY.md"

LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]*)\)")  # [text](target)
EMPHASIS = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|(?<!\*)\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?!\*)", re.S)
CODE = re.compile(r"```.*?```|`[^`]+`", re.S)  # fenced blocks, then inline spans


# ---------------------------------------------------------------- the glossary

def glossary_entries() -> list[tuple[str, str]]:
    """(term, body) for every `### term` heading of GLOSSARY.md, in page order."""
    entries, term, body = [], None, []
    for line in GLOSSARY.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):  # any heading ends the entry before it
            if term is not None:
                entries.append((term, "\n".join(body).strip()))
            term = line[4:].strip() if line.startswith("### ") else None
            body = []
        elif term is not None:
            body.append(line)
    if term is not None:
        entries.append((term, "\n".join(body).strip()))
    return entries


def anchor(term: str) -> str:
    """GitHub's heading slug: lowercase, punctuation dropped (`-` and `_` kept), spaces to `-`."""
    return re.sub(r"[^\w\- ]", "", term.lower()).replace(" ", "-")


def term_forms(term: str) -> list[str]:
    """The texts that count as the term: each ` / ` alias and its short form before ` (`."""
    forms = []
    for alias in term.split(" / "):
        forms += [alias.strip(), alias.split(" (")[0].strip()]
    return list(dict.fromkeys(f for f in forms if f))


def form_pattern(form: str) -> re.Pattern:
    """Whole-word regex for a form, plural `s`/`es` allowed. A space or hyphen in the form
    matches a hyphen, whitespace (a line break too) or nothing: warm-up, warm up, warmup.
    Names with two or more capitals (MFU, DDP, ZeRO, cuDNN) match case-sensitively, others not."""
    body = "".join(r"(?:-|\s+)?" if c in " -" else re.escape(c) for c in form)
    flags = 0 if sum(c.isupper() for c in form) >= 2 and " " not in form else re.IGNORECASE
    return re.compile(rf"(?<![\w-]){body}(?:s|es)?(?![\w-])", flags)


# ---------------------------------------------------------------- the notebooks

def markdown_cells() -> list[tuple[str, int, str]]:
    """(notebook number "NN", cell index, source) of every markdown cell, in course order."""
    cells = []
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        for i, cell in enumerate(nb["cells"]):
            if cell["cell_type"] == "markdown":
                cells.append((path.name[:2], i, "".join(cell["source"])))
    return cells


def blank(text: str, spans) -> str:
    """`text` with each (start, end) span filled with "░" (positions kept): neither a word
    character nor whitespace, so `**`code`**` stays an emphasis and no term runs into it."""
    chars = list(text)
    for start, end in spans:
        chars[start:end] = "░" * (end - start)
    return "".join(chars)


def searchable(source: str) -> tuple[str, list[tuple[int, int, str]]]:
    """The source with code and link targets blanked out, and its links as (start, end, target),
    start..end being the link text."""
    text = blank(source, (m.span() for m in CODE.finditer(source)))
    links = [(m.start(1), m.end(1), m.group(2)) for m in LINK.finditer(text)]
    return blank(text, (m.span(2) for m in LINK.finditer(text))), links


def first_use(term: str, cells) -> tuple[str, int, str, int, int] | None:
    """(notebook, cell index, cell source, start, end) of the term's first occurrence, or None."""
    patterns = [form_pattern(f) for f in term_forms(term)]
    for nb, index, source in cells:
        text, _ = searchable(source)
        hits = [m.span() for p in patterns for m in p.finditer(text)]
        if hits:
            start, end = min(hits, key=lambda h: (h[0], -h[1]))  # earliest, then longest
            return nb, index, source, start, end
    return None


def defined_or_linked(term: str, source: str, start: int, end: int) -> bool:
    """True when start..end lies inside an emphasis or inside a link to the term's anchor."""
    text, links = searchable(source)
    target = f"GLOSSARY.md#{anchor(term)}"
    linked = any(s <= start and end <= e and t == target for s, e, t in links)
    emphasised = any(m.start() < start and end < m.end() for m in EMPHASIS.finditer(text))
    return linked or emphasised


def sentences(body: str) -> int:
    """Sentences in an entry's body: ends of sentence outside inline code."""
    text = blank(body, (m.span() for m in CODE.finditer(body)))
    return len(re.findall(r"[.!?][\"')\]*]*(?=\s|$)", text))


# ---------------------------------------------------------------- the tests

def test_first_use_of_every_term_is_defined_or_linked():
    """Each term's first markdown occurrence in the course is **emphasised** or a glossary link."""
    entries, cells = glossary_entries(), markdown_cells()
    assert entries, f"no `### term` headings in {GLOSSARY}"
    assert cells, f"no notebooks in {NOTEBOOKS}"
    offenders = []
    for term, _ in entries:
        use = first_use(term, cells)
        if use and not defined_or_linked(term, *use[2:]):
            nb, index = use[:2]
            offenders.append(f"{term}: first used in {nb} cell {index}, neither defined there "
                             f"(**term** or *term*) nor linked to GLOSSARY.md#{anchor(term)}")
    assert not offenders, f"{len(offenders)} terms:\n" + "\n".join(offenders)


def test_glossary_links_point_to_headings():
    """Every `GLOSSARY.md#anchor` link in the notebooks' markdown names an existing heading."""
    anchors = {anchor(term) for term, _ in glossary_entries()}
    cells = markdown_cells()
    assert cells, f"no notebooks in {NOTEBOOKS}"
    broken = [f"{nb} cell {index}: GLOSSARY.md#{target.split('#', 1)[1]}"
              for nb, index, source in cells
              for _, _, target in searchable(source)[1]
              if target.startswith("GLOSSARY.md#") and target.split("#", 1)[1] not in anchors]
    assert not broken, "links to missing glossary headings:\n" + "\n".join(broken)


def test_each_entry_is_one_to_three_sentences():
    """Every entry has body text of 1 to 3 sentences."""
    entries = glossary_entries()
    assert entries, f"no `### term` headings in {GLOSSARY}"
    wrong = [f"{term}: {sentences(body)} sentences" for term, body in entries
             if not 1 <= sentences(body) <= 3]
    assert not wrong, "entries outside 1–3 sentences:\n" + "\n".join(wrong)


def test_terms_are_alphabetical_and_anchors_unique():
    """The page is in alphabetical order, and no two headings share an anchor."""
    terms = [term for term, _ in glossary_entries()]
    assert terms == sorted(terms, key=str.casefold), "headings are not in alphabetical order"
    anchors = [anchor(term) for term in terms]
    assert len(anchors) == len(set(anchors)), "two headings have the same anchor"


def test_the_allowance_for_two_moments_in_the_prose_is_the_verdict_engines():
    """The glossary and 00's markdown state the factor two timings taken apart must clear; the
    verdicts apply verdicts.APART: the prose must not drift from it when the constant moves."""
    from course_lib import verdicts
    factor = f"{verdicts.APART:g}×"
    assert f"unless they differ by {factor} or more" in GLOSSARY.read_text(encoding="utf-8")
    nb00 = json.loads((NOTEBOOKS / "00_setup_check.ipynb").read_text(encoding="utf-8"))
    prose = " ".join("".join(c["source"]) for c in nb00["cells"] if c["cell_type"] == "markdown").replace("\n", " ")
    assert prose.count(f"lies {factor} or more from 1") == 2 and f"move by up to {factor} between moments" in prose
