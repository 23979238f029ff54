"""The package's floor plan holds: core ← lessons ← workshop, lessons in notebook order, no circle.

Every ``course_lib`` import counts, also one inside a function (a circle through a deferred import
is still a circle: the two modules cannot be read, tested or moved apart).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "course_lib"
NOTEBOOKS = PKG.parent / "notebooks"
LESSON = re.compile(r"course_lib\.lessons\.nb(\d\d)(_[a-z0-9]+)?$")


def module_name(path: Path, root: Path = PKG) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(source: str) -> set[str]:
    """The course_lib names that `source` imports, anywhere in it (modules, and for
    ``from course_lib.m import name`` also ``course_lib.m.name``: :func:`graph` keeps modules)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("course_lib")}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("course_lib"):
            # `from course_lib import device` names a module; `from course_lib.device import sync` a name
            found |= {f"{node.module}.{a.name}" for a in node.names} | {node.module}
    return found


def graph(root: Path = PKG) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (names that are not modules dropped)."""
    sources = {module_name(p, root): p.read_text() for p in root.rglob("*.py")}
    packages = {module_name(p, root) for p in root.rglob("__init__.py")}  # `from pkg import mod`
    return {mod: {m for m in imports_of(src) if m in sources and m not in packages | {mod}}
            for mod, src in sources.items()}


def layer(mod: str) -> str:
    if mod.startswith("course_lib.workshop") or mod == "course_lib.__main__":
        return "workshop"
    return "lessons" if mod.startswith("course_lib.lessons") else "core"


RANK = {"core": 0, "lessons": 1, "workshop": 2}


def wrong_direction(g: dict[str, set[str]]) -> list[str]:
    """Each import that goes against core ← lessons ← workshop, or from a lesson to a later one."""
    bad = []
    for mod, deps in sorted(g.items()):
        for dep in sorted(deps):
            if RANK[layer(dep)] > RANK[layer(mod)]:
                bad.append(f"{mod} ({layer(mod)}) imports {dep} ({layer(dep)})")
            elif LESSON.match(mod) and LESSON.match(dep) and LESSON.match(dep)[1] > LESSON.match(mod)[1]:
                bad.append(f"{mod} imports the later lesson {dep}")
    return bad


def circles(g: dict[str, set[str]]) -> list[list[str]]:
    """Every import circle, each once, as a list of modules (depth-first search, colours)."""
    found, state, stack = [], {}, []

    def visit(mod: str) -> None:
        state[mod] = "open"
        stack.append(mod)
        for dep in sorted(g.get(mod, ())):
            if state.get(dep) == "open":
                found.append(stack[stack.index(dep):] + [dep])
            elif dep not in state:
                visit(dep)
        stack.pop()
        state[mod] = "done"

    for mod in sorted(g):
        if mod not in state:
            visit(mod)
    return found


def test_imports_run_core_lessons_workshop_and_lessons_in_order():
    g = graph()
    assert "course_lib.lessons.nb07" in g and "course_lib.workshop.cli" in g  # the layout was read
    assert wrong_direction(g) == []


def test_no_import_circle():
    assert circles(graph()) == []


def test_every_lesson_belongs_to_a_notebook():
    lessons = sorted(p.stem for p in (PKG / "lessons").glob("*.py") if not p.stem.startswith("_"))
    assert lessons, "no lesson module found"
    for stem in lessons:
        assert re.fullmatch(r"nb\d\d(_[a-z0-9]+)?", stem), \
            f"lessons/{stem}.py: a lesson is named nbNN (or nbNN_topic) after its notebook"
        assert list(NOTEBOOKS.glob(f"{stem[2:4]}_*.ipynb")), f"lessons/{stem}.py has no notebook {stem[2:4]}_*.ipynb"


# ---- the checks themselves can fail: a planted package --------------------------------------

@pytest.fixture
def planted(tmp_path: Path) -> Path:
    """A small package laid out as course_lib is, in which each test plants one wrong import."""
    root = tmp_path / "course_lib"
    for rel in ("__init__.py", "device.py", "memory.py", "lessons/__init__.py", "lessons/nb03.py",
                "lessons/nb07.py", "workshop/__init__.py", "workshop/cli.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("")
    (root / "memory.py").write_text("from course_lib.device import sync\n")
    (root / "lessons/nb07.py").write_text("from course_lib import memory\nfrom course_lib.lessons import nb03\n")
    (root / "workshop/cli.py").write_text("from course_lib.lessons import nb07\n")
    return root


def test_the_planted_package_passes_as_laid_out(planted):
    g = graph(planted)
    assert g["course_lib.lessons.nb07"] == {"course_lib.memory", "course_lib.lessons.nb03"}
    assert wrong_direction(g) == [] and circles(g) == []


def test_a_planted_circle_through_a_deferred_import_is_found(planted):
    (planted / "device.py").write_text("def f():\n    from course_lib import memory\n")
    assert circles(graph(planted)) == [["course_lib.device", "course_lib.memory", "course_lib.device"]]


def test_a_core_module_importing_a_lesson_or_the_workshop_is_found(planted):
    (planted / "device.py").write_text("from course_lib.lessons.nb03 import x\nimport course_lib.workshop.cli\n")
    assert wrong_direction(graph(planted)) == [
        "course_lib.device (core) imports course_lib.lessons.nb03 (lessons)",
        "course_lib.device (core) imports course_lib.workshop.cli (workshop)"]


def test_a_lesson_importing_a_later_lesson_is_found(planted):
    (planted / "lessons/nb03.py").write_text("from course_lib.lessons import nb07\n")
    g = graph(planted)
    assert wrong_direction(g) == ["course_lib.lessons.nb03 imports the later lesson course_lib.lessons.nb07"]
    assert circles(g) == [["course_lib.lessons.nb03", "course_lib.lessons.nb07", "course_lib.lessons.nb03"]]


def listed(doc: str) -> list[str]:
    """The module names a package map lists: the first word of each line that starts one."""
    return [m[1] for m in re.finditer(r"^([a-z_0-9]+)\s{2,}\S", doc, re.M)]


def test_the_maps_list_every_module_once():
    import course_lib
    import course_lib.lessons

    core = sorted(p.stem for p in PKG.glob("*.py") if not p.stem.startswith("_"))
    lessons = sorted(p.stem for p in (PKG / "lessons").glob("*.py") if not p.stem.startswith("_"))
    for doc, modules in ((course_lib.__doc__, core), (course_lib.lessons.__doc__, lessons)):
        names = listed(doc)
        assert sorted(names) == modules, f"listed {sorted(names)}, on disk {modules}"  # each once, none missing
