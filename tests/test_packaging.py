"""Set-up files agree: pyproject, environment.yml, Makefile, README, CI."""

import re
import tomllib

import yaml
from packaging.version import Version

from conftest import REPO

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_environment_installs_the_pyproject_set():
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    assert "conda-forge" in env["channels"]
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert "python=3.11" in conda and "pip" in conda
    makefile = (REPO / "Makefile").read_text()
    extras = re.search(r"^EXTRAS\s*:?=\s*(\S+)", makefile, re.M).group(1)
    assert "pip install --progress-bar off -e '.[$(EXTRAS)]' ./jupyter-config $(2)" in makefile
    assert pip == [f"-e .[{extras}]", "./jupyter-config"], f"the pip section must install what make installs"
    declared = {_name(r) for r in PYPROJECT["project"]["dependencies"]}
    for extra in extras.split(","):
        declared |= {_name(r) for r in PYPROJECT["project"]["optional-dependencies"][extra]}
    extra = {_name(d) for d in conda + pip if not d.startswith(("-e", "./"))} - {"python", "pip"}
    assert extra <= declared, f"declared in environment.yml but not in pyproject: {extra - declared}"


def _floors() -> dict[str, str]:
    """Every floor make test-oldest installs: the dependencies, the test and instructor extras
    (the browser extra runs only with the newest releases, in make test-browser)."""
    extras = PYPROJECT["project"]["optional-dependencies"]
    reqs = PYPROJECT["project"]["dependencies"] + extras["test"] + extras["instructor"]
    return {_name(r): r.split(">=", 1)[1] for r in reqs}


def _oldest() -> dict[str, str]:
    lines = (REPO / "constraints" / "oldest.txt").read_text().splitlines()
    pins = [ln.split("#")[0].strip() for ln in lines if ln.split("#")[0].strip()]
    return {_name(p): p.split("==", 1)[1] for p in pins}


def test_dependencies_are_lower_bounds_not_pins():
    for req in PYPROJECT["project"]["dependencies"]:
        assert "==" not in req and ">=" in req, req
    assert _floors()["torch"] == "2.6"  # public FSDP2 (fully_shard) arrived in torch 2.6


def test_the_oldest_supported_set_pins_every_floor():
    """constraints/oldest.txt (make test-oldest, run by CI) tests exactly what pyproject promises."""
    floors, oldest = _floors(), _oldest()
    assert set(oldest) == set(floors), f"pinned but not declared, or declared but not pinned: {set(oldest) ^ set(floors)}"
    for name, floor in floors.items():
        assert Version(oldest[name]) == Version(floor), \
            f"{name}: pyproject promises >={floor}, constraints/oldest.txt tests {oldest[name]}"


def test_readme_quick_start_and_ci_agree():
    readme = (REPO / "README.md").read_text()
    assert "make course" in readme and "make test" in readme
    ci = (REPO / ".ci" / "run").read_text()
    commands = [ln.strip() for ln in ci.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    makes = [c for c in commands if "make " in c and "()" not in c]
    assert makes == ["flock build/ci-install.lock make .venv-oldest/.installed", "make .venv/.installed",
                     "make test-units", "make course PROFILE=smoke", "CI=true make test-browser",
                     "make test-oldest"], \
        "CI runs the README's commands, tests both ends of the range, and the notebooks in a browser"
    # the oldest set installs beside the newest (torch and torchvision first), the course itself
    # once the newest install has built it: one pip build of the course's folder at a time
    at = {c.split("#")[0].strip(): i for i, c in enumerate(commands)}
    assert at["flock 9"] < at["background oldest-install install_oldest"] < at["make .venv/.installed"]
    assert at["flock -u 9"] == at["make .venv/.installed"] + 1
    # make test's third part (nbval) runs at the oldest end only: make course executes the
    # notebooks at the newest, and test_executed compares their kept outputs as nbval does;
    # its second part (make test-commands: the knobs' extremes, the printed commands) runs in
    # make test, which a session runs before it lands a change
    assert "COURSE_EXECUTED=build" in ci, "CI checks make course's executed copies (tests/test_executed.py)"
    assert commands.index("finish oldest-install") < commands.index("make test-oldest")
    assert commands.index("finish chromium") < commands.index("CI=true make test-browser")


def test_make_test_is_its_three_parts_and_the_oldest_end_runs_the_versioned_ones():
    """make test is exactly make test-units + make test-commands + make test-notebooks, so that
    together they run every line of its recipe; CI runs test-units at the newest end and, at the
    oldest, the versioned unit tests and test-notebooks' recipe. The two unit-test selections
    split the unit tests between them: each test runs in one of them."""
    recipes = {}
    for block in re.split(r"\n(?=[\w.$()/-]+:)", (REPO / "Makefile").read_text()):
        target, _, body = block.partition(":")
        recipes[target.strip()] = [ln.strip() for ln in body.splitlines() if ln.startswith("\t")]
    assert recipes["test"] == recipes["test-units"] + recipes["test-commands"] + recipes["test-notebooks"]
    assert recipes["test"] == ["$(call units,$(VENV),$(FAST))", "$(call units,$(VENV),and (extremes or printed))",
                               "$(call notebooks,$(VENV))"]
    assert "FAST := and not extremes and not printed" in (REPO / "Makefile").read_text()
    assert recipes["test-oldest"] == ["$(call units,$(OLDEST),and versioned $(FAST))",
                                      "$(call notebooks,$(OLDEST))"]


def test_console_script_points_at_the_cli():
    assert PYPROJECT["project"]["scripts"]["course"] == "course_lib.workshop.cli:main"


def test_the_oldest_end_tests_every_version_dependent_api():
    """make test-oldest runs only the unit tests marked `versioned`: at least those of the APIs
    that change across the torch range (the lead's list), marked module by module."""
    must = {"distributed": "dist", "DDP": "ddp_comm", "FSDP2": "nb06", "pipelining": "nb11",
            "DTensor": "nb11_2d", "tensor parallel": "nb11_tp", "compile": "nb10", "the loop's compile and AMP": "train",
            "Triton": "nb12", "the memory history": "timeline", "the profiler": "profiling", "AMP numerics": "nb03"}
    for api, module in must.items():
        source = (REPO / "tests" / f"test_{module}.py").read_text()
        assert re.search(r"^pytestmark = pytest\.mark\.versioned\b", source, re.M), \
            f"tests/test_{module}.py ({api}) must be marked versioned: make test-oldest runs only those"
