"""How much of the notebooks' code is the technique, and how much is plumbing: the measure behind
issue 52's figures, run by ``make plumbing``.

    python -m course_lib.workshop.plumbing notebooks/*.ipynb

Each code statement is classified with Python's ``ast`` as ../shared/tools/plumbing.py does
(the same rules, so the figures compare): a statement whose calls are ``print``, ``display``
or ``rep``/``report``/``published``/``units`` functions, or that builds a string, is
printing/reporting; ``check.*`` and ``assert`` are checks; ``plot``/``plt``/``ax``/``fig`` are
plots; imports are setup; the rest is technique, measurement or control. ``%%writefile`` cells
are scripts, counted apart and left out of the share. Also printed: the checking conventions
the notebooks use, the largest module of ``course_lib``, and the targets missed (exit status 1
when one is; ``tests/test_plumbing.py`` holds the course's notebooks to them).
"""

from __future__ import annotations

import ast
import collections
import json
import re
import sys
from pathlib import Path

REPORT_ROOTS = {"rep", "report", "published", "units"}
ALL_SHARE, ONE_SHARE = 0.15, 0.20  # issue 52's targets: print/report over all notebooks, in any one
MAX_CONVENTIONS, MAX_MODULE_LINES = 3, 600
SCRIPT = "script (writefile)"
REPORT = "report"
OTHER = "technique/measure/control"
# How a notebook checks something: each pattern that matches somewhere counts as one convention
CONVENTIONS = {
    "a lesson's exercise check (nbNN.check_*)": r"\bnb\d\d\.check_\w+\(",
    "an inline exercise (with check.exercise())": r"with check\.exercise\(",
    "a claim checked (check.expect/close/between/...)": r"\bcheck\.(?!exercise)\w+\(",
    "a bare assert": r"^\s*assert\b",
    "a script's result row read as ['ok']": r"\[['\"]ok['\"]\]",
    "a script's result row read as ['passed']": r"\[['\"]passed['\"]\]",
    "a script's result row read as ['max_abs']": r"\[['\"]max_abs['\"]\]",
}


def _calls(node: ast.AST) -> list[str]:
    out = []
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            f = n.func
            if isinstance(f, ast.Name):
                out.append(f.id)
            elif isinstance(f, ast.Attribute):
                r = f
                while isinstance(r, ast.Attribute):
                    r = r.value
                out.append((r.id if isinstance(r, ast.Name) else "?") + "." + f.attr)
    return out


def _stringy(v: ast.AST) -> bool:
    if isinstance(v, ast.JoinedStr) or (isinstance(v, ast.Constant) and isinstance(v.value, str)):
        return True
    if isinstance(v, ast.BinOp):
        return _stringy(v.left) or _stringy(v.right)
    if isinstance(v, ast.IfExp):
        return _stringy(v.body) and _stringy(v.orelse)
    return False


def _leaf(s: ast.stmt) -> str:
    if isinstance(s, (ast.Import, ast.ImportFrom)):
        return "setup"
    if isinstance(s, ast.Raise):
        return "guard"
    if isinstance(s, ast.Assert):
        return "check"
    calls = _calls(s)
    roots = {c.split(".")[0] for c in calls}
    if isinstance(s, ast.Expr):
        if "print" in calls or roots & REPORT_ROOTS:
            return "check" if "check" in roots else REPORT
        if "check" in roots:
            return "check"
        if roots & {"plot", "plt", "ax", "fig"}:
            return "plot"
    if isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        if s.value is not None and _stringy(s.value):
            return REPORT
        if roots & {"plot", "plt"}:
            return "plot"
        if calls and all(c.split(".")[0] in REPORT_ROOTS for c in calls):
            return REPORT
    if isinstance(s, ast.Pass):
        return REPORT
    return OTHER


def classify(s: ast.stmt, lines: collections.Counter) -> str:
    """The kind of statement `s`; adds its lines, by kind, to `lines` (a compound statement's
    body counted statement by statement, its header as the kind of its body)."""
    body = []
    for name in ("body", "orelse", "finalbody"):
        part = getattr(s, name, None)
        if isinstance(part, list) and part and isinstance(part[0], ast.stmt):
            body += part
    for handler in getattr(s, "handlers", None) or []:
        body += handler.body
    if not body:
        kind = _leaf(s)
        lines[kind] += s.end_lineno - s.lineno + 1
        return kind
    inner: collections.Counter = collections.Counter()
    kinds = {classify(b, inner) for b in body}
    header = (s.end_lineno - s.lineno + 1) - sum(inner.values())
    if isinstance(s, (ast.FunctionDef, ast.ClassDef)):
        kind = OTHER if kinds - {REPORT} else REPORT
    else:
        kind = kinds.pop() if len(kinds) == 1 else OTHER
    lines.update(inner)
    lines[kind] += max(header, 0)
    return kind


def notebook_lines(path: Path) -> collections.Counter:
    """Lines of `path`'s code cells by kind (magics and shell lines blank)."""
    lines: collections.Counter = collections.Counter()
    for cell in json.loads(Path(path).read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        src = "".join(cell["source"])
        if src.lstrip().startswith("%%writefile"):
            lines[SCRIPT] += len(src.splitlines())
            continue
        src = "\n".join("" if ln.lstrip().startswith(("%", "!")) else ln for ln in src.splitlines())
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            lines["setup"] += len([ln for ln in src.splitlines() if ln.strip()])
            continue
        for s in ast.parse(src).body:
            classify(s, lines)
    return lines


def report_share(lines: collections.Counter) -> float:
    """Printing/reporting lines over all code lines but %%writefile scripts."""
    total = sum(v for k, v in lines.items() if k != SCRIPT)
    return lines[REPORT] / total if total else 0.0


def conventions(paths: list[Path]) -> dict[str, int]:
    """Each checking convention used in `paths`' code cells, with its number of uses; a
    ``%%writefile`` cell is a script, whose own checks are not the notebook's (as in :func:`notebook_lines`)."""
    code = "\n".join("".join(c["source"]) for p in paths for c in json.loads(Path(p).read_text())["cells"]
                     if c["cell_type"] == "code" and not "".join(c["source"]).lstrip().startswith("%%writefile"))
    used = {name: len(re.findall(pattern, code, re.M)) for name, pattern in CONVENTIONS.items()}
    return {name: n for name, n in used.items() if n}


def largest_module(package: Path) -> tuple[str, int]:
    """The package's longest module and its lines."""
    sizes = {str(p.relative_to(package.parent)): len(p.read_text().splitlines()) for p in package.rglob("*.py")}
    name = max(sizes, key=sizes.get)
    return name, sizes[name]


def unmet(paths: list[Path]) -> list[str]:
    """Issue 52's targets that `paths` (the notebooks) and the package miss, one sentence each:
    print/report at most 15 % of all notebook code and 20 % of any one notebook's, at most 3
    checking conventions, no module over 600 lines. Empty when every target is met."""
    missed, total = [], collections.Counter()
    for path in paths:
        lines = notebook_lines(path)
        total.update(lines)
        if report_share(lines) > ONE_SHARE:
            missed.append(f"{path.name} prints/reports {report_share(lines):.1%} of its code (at most {ONE_SHARE:.0%})")
    if report_share(total) > ALL_SHARE:
        missed.append(f"the notebooks print/report {report_share(total):.1%} of their code (at most {ALL_SHARE:.0%})")
    if len(used := conventions(paths)) > MAX_CONVENTIONS:
        missed.append(f"{len(used)} checking conventions (at most {MAX_CONVENTIONS}): {', '.join(used)}")
    name, n = largest_module(Path(__file__).resolve().parents[1])
    if n > MAX_MODULE_LINES:
        missed.append(f"{name} has {n} lines (at most {MAX_MODULE_LINES})")
    return missed


def main(argv: list[str] | None = None) -> int:
    paths = [Path(p) for p in (argv if argv is not None else sys.argv[1:])]
    if not paths:
        print("usage: python -m course_lib.workshop.plumbing notebooks/*.ipynb", file=sys.stderr)
        return 2
    total: collections.Counter = collections.Counter()
    for path in paths:
        lines = notebook_lines(path)
        total.update(lines)
        print(f"{path.name:<32} print/report {report_share(lines):5.1%} of {sum(lines.values()) - lines[SCRIPT]:>4} lines")
    print(f"{'all notebooks':<32} print/report {report_share(total):5.1%} of {sum(total.values()) - total[SCRIPT]:>4} lines "
          f"(targets: 15 % in all, 20 % in any one)")
    used = conventions(paths)
    print(f"checking conventions: {len(used)} (target: 3 at most)")
    for name, n in used.items():
        print(f"  {n:>4}  {name}")
    name, n = largest_module(Path(__file__).resolve().parents[1])
    print(f"largest module: {name}, {n} lines (target: 600 at most)")
    missed = unmet(paths)
    print("targets met" if not missed else "targets missed:\n" + "\n".join(f"  {m}" for m in missed))
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
