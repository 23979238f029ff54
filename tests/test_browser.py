"""Every notebook run in a real browser, as a learner runs it in a workshop: the student copy
(`course student`: each solution replaced by nbgrader's stub) opened in JupyterLab started the
way `make lab` starts it, driven by headless Chromium through Playwright, under smoke.

For each notebook: open it (in one JupyterLab page that every notebook shares, as a learner's
browser tab does: the app loads once, not once per notebook), wait for its kernel, Run ▸ Run All
Cells, wait until every code cell has run, then check what the page shows: no error output, every figure rendered, every
widget rendered (not a placeholder), and under each exercise one "not done yet" sentence, the
notebook running on. In 01 a slider is moved and in 02 an `interact_manual` button pressed;
the widget's output must change. A failure leaves a full-page screenshot in build/browser/.
(The committed notebooks, solutions included, run under nbval in `make test` and under papermill
in `make course`, which CI runs.)

The committed notebooks/ is never written: JupyterLab serves temporary copies, autosave is
off, nothing is saved, and the run's files (reports, checkpoints, launched jobs) go to a
temporary COURSE_BUILD_DIR; each test ends by checking that `git status` of notebooks/ is
what it was. `make test-browser` runs this file (`make test` leaves it out: -m "not browser").
"""

import json
import os
import re
import secrets
import shutil
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from conftest import NOTEBOOKS, REPO
from course_lib.workshop import student
from test_lab import free_port, lab_command, status, stop
from test_executed import smoke_copy  # make course PROFILE=smoke's executed copies (CI: just before)

try:
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright
except ImportError:  # the `browser` extra is not installed: the tests skip (fail in CI)
    sync_playwright, PlaywrightError = None, Exception

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else shutil.which("chromium")
# Headless Chromium on a machine without a display or a network beyond localhost: no sandbox
# (Playwright's default; needed as root), no GPU, and no background calls to Google's hosts.
CHROMIUM_ARGS = ["--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]
SHOTS = REPO / "build" / "browser"  # build/ is git-ignored
VIEWPORT = {"width": 1400, "height": 1000}
KERNEL_READY_S = 120
RUN_ALL_S = 180  # Run All of a smoke notebook took 10-55 s here (06, with torchrun, the longest)
WIDGET_S = 90
# User settings for the served JupyterLab: no autosave (it would write outputs into the served
# files), every cell in the DOM (the default windowing leaves cells out of view unrendered,
# so they could not be counted), and no news/update requests to the internet.
LAB_SETTINGS = {
    "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
}


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


@dataclass
class Lab:
    url: str
    token: str
    root: Path  # the temporary folder: served notebooks, settings, build output, server log
    log: Path

    def api(self, path: str, method: str = "GET"):
        req = urllib.request.Request(f"{self.url}{path}", method=method,
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=30) as r:
            body = r.read()
        return json.loads(body) if body else None

    def shut_down_kernels(self) -> None:
        for session in self.api("/api/sessions"):
            self.api(f"/api/sessions/{session['id']}", method="DELETE")

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def _notebooks_status() -> str:
    """What git sees in notebooks/, ignored files (.ipynb_checkpoints/, __pycache__/) included."""
    return subprocess.run(["git", "status", "--porcelain", "--ignored", "--", "notebooks"], cwd=REPO,
                          capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab, started with `make lab`'s command line, serving the student copies."""
    root = tmp_path_factory.mktemp("browser")
    served = root / "notebooks"
    student.write_copies(NOTEBOOKS, served)
    for plugin, values in LAB_SETTINGS.items():
        file = root / "settings" / f"{plugin.replace(':', '/')}.jupyterlab-settings"
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(json.dumps(values))
    token, port = secrets.token_hex(16), free_port()
    # `make lab` serves notebooks/ itself: its root folder is replaced by the copy.
    cmd = [c for c in lab_command() if not c.startswith(("--ServerApp.root_dir", "--notebook-dir"))]
    cmd += [f"--ServerApp.root_dir={served}", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
            "--ServerApp.open_browser=False", f"--IdentityProvider.token={token}",
            f"--LabApp.user_settings_dir={root / 'settings'}", f"--LabApp.workspaces_dir={root / 'workspaces'}",
            "--LabApp.expose_app_in_browser=True"]  # window.jupyterapp: the notebook model, to read outputs
    env = dict(os.environ, COURSE_PROFILE="smoke",  # the kernels run the smoke profile
               COURSE_BUILD_DIR=str(root / "build"),  # reports, checkpoints, launched jobs' files
               JUPYTER_RUNTIME_DIR=str(root / "runtime"))  # connection files
    env.pop("COURSE_HEADLESS", None)  # progress bars as learners see them: widgets
    log = root / "lab.log"
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    server = Lab(url, token, root, log)
    try:
        deadline = time.monotonic() + 60
        while status(f"{url}/api/status", token) != 200:
            assert proc.poll() is None and time.monotonic() < deadline, \
                f"JupyterLab did not start:\n{server.log_tail()}"
            time.sleep(0.3)
        yield server
    finally:
        stop(proc, timeout_s=30)


@pytest.fixture(scope="module")
def browser():
    missing = ("the Python package playwright (pip install -e '.[browser]')" if sync_playwright is None else
               None if CHROMIUM else
               "Chromium (sudo apt-get install -y --no-install-recommends chromium)")
    if missing:
        message = f"the browser tests need {missing}; `make test-browser` installs the one and checks for the other."
        if _in_ci():  # in CI a skipped browser test would pass silently
            pytest.fail(message)
        pytest.skip(message)
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


class Tab:
    """JupyterLab in one browser page, loaded once and shared by the notebooks in turn (the app's
    start took about 4 s of each notebook's 7 s to its kernel here). A test that fails leaves the
    page as it was (a dialog, a stuck cell): the next test gets a new one."""

    def __init__(self, browser, lab: Lab):
        self.browser, self.lab, self.context, self.page = browser, lab, None, None
        self.console: list[str] = []  # the browser's console errors since the notebook opened

    def fresh(self):
        """The shared page, JupyterLab started in it with an empty workspace of its own."""
        if self.page is None:
            self.context = self.browser.new_context(viewport=VIEWPORT)
            self.context.set_default_timeout(60_000)  # clicks and page loads on a busy 2-core machine
            self.page = self.context.new_page()
            self.page.on("console", lambda m: self.console.append(m.text) if m.type == "error" else None)
            self.page.goto(f"{self.lab.url}/lab/workspaces/browser-test?reset&token={self.lab.token}")
            self.page.wait_for_function(APP_READY, timeout=KERNEL_READY_S * 1000, polling=250)
        self.console.clear()
        return self.page

    def discard(self) -> None:
        if self.context is not None:
            self.context.close()
        self.context = self.page = None


@pytest.fixture(scope="module")
def tab(browser, lab):
    shared = Tab(browser, lab)
    yield shared
    shared.discard()


@pytest.fixture(scope="module")
def notebooks_status():
    return _notebooks_status()


# --- what the page holds, read in the browser ---------------------------------------------------
# The panel of one notebook (by path) in JupyterLab's main area.
_PANEL = "const panel = [...window.jupyterapp.shell.widgets('main')].find(w => w.context && w.context.path === path);"
# A cell's own outputs, one node per output of its model, in order (not those nested in widgets).
_OUTPUT_NODES = ("cell.node.querySelectorAll("
                 "':scope .jp-Cell-outputArea > .jp-OutputArea-child > .jp-OutputArea-output')")

# JupyterLab has started and restored its (empty) layout: documents can be opened.
APP_READY = "() => !!window.jupyterapp && !!window.jupyterapp.shell && document.querySelector('#jp-main-dock-panel') !== null"

# Close the notebook without saving (autosave is off; nothing is written) and without the
# "unsaved changes" dialog: its outputs are this run's, not the file's.
CLOSE = f"""(path) => {{
  {_PANEL}
  if (!panel) return false;
  panel.context.model.dirty = false;
  panel.dispose();
  return true;
}}"""

KERNEL_IDLE = f"""(path) => {{
  if (!window.jupyterapp) return false;
  {_PANEL}
  const kernel = panel && panel.context.isReady && panel.sessionContext.session?.kernel;
  return !!kernel && kernel.status === 'idle' && kernel.connectionStatus === 'connected';
}}"""

# Run All has finished: the kernel is idle, no cell is queued or running ([*]), and every
# non-empty code cell has an execution count, or a cell failed (Run All stops there).
RUN_DONE = f"""(path) => {{
  {_PANEL}
  const kernel = panel.sessionContext.session?.kernel;
  if (!kernel || kernel.status !== 'idle') return false;
  if ([...panel.node.querySelectorAll('.jp-InputPrompt')].some(p => p.textContent.includes('*'))) return false;
  let failed = false, waiting = false;
  for (const cell of panel.content.model.cells) {{
    if (cell.type !== 'code') continue;
    for (let i = 0; i < cell.outputs.length; i++) failed ||= cell.outputs.get(i).type === 'error';
    waiting ||= cell.sharedModel.getSource().trim() !== '' && cell.executionCount == null;
  }}
  return failed || !waiting;
}}"""

# Rendering has caught up: every image decoded, every widget view in place of its placeholder.
RENDERED = f"""(path) => {{
  {_PANEL}
  const imgs = [...panel.node.querySelectorAll('.jp-OutputArea-output[data-mime-type="image/png"] img')];
  const widgetOutputs = [];
  for (const cell of panel.content.widgets) {{
    if (cell.model.type !== 'code') continue;
    const nodes = {_OUTPUT_NODES};
    for (let i = 0; i < cell.model.outputs.length; i++)
      if ('application/vnd.jupyter.widget-view+json' in cell.model.outputs.get(i).data) widgetOutputs.push(nodes[i]);
  }}
  return imgs.every(i => i.complete && i.naturalWidth > 0)
    && widgetOutputs.every(n => n && n.querySelector('.jupyter-widgets'));
}}"""

# Per code cell: its id and source, execution count, outputs (type, MIME types, error), and
# what the page rendered: decoded PNG images, and for each widget output whether a widget view
# (ipywidgets' .jupyter-widgets) stands in its place.
STATE = f"""(path) => {{
  {_PANEL}
  const cells = [];
  for (const cell of panel.content.widgets) {{
    const m = cell.model;
    if (m.type !== 'code') continue;
    const nodes = {_OUTPUT_NODES};
    const outputs = [];
    for (let i = 0; i < m.outputs.length; i++) {{
      const o = m.outputs.get(i), json = o.toJSON();
      outputs.push({{type: o.type, mimes: Object.keys(o.data),
                     error: o.type === 'error' ? `${{json.ename}}: ${{json.evalue}}` : null,
                     widget: !!nodes[i]?.querySelector('.jupyter-widgets'),
                     text: (nodes[i]?.textContent || '').slice(0, 300)}});
    }}
    const imgs = [...cell.node.querySelectorAll('.jp-OutputArea-output[data-mime-type="image/png"] img')];
    cells.push({{id: m.sharedModel.getId(), source: m.sharedModel.getSource(), count: m.executionCount ?? null,
                 outputs, images: imgs.filter(i => i.complete && i.naturalWidth > 0).length,
                 widgetText: [...cell.node.querySelectorAll('.widget-output')].map(n => n.textContent).join('\\n'),
                 text: cell.node.querySelector('.jp-Cell-outputWrapper')?.textContent || ''}});
  }}
  return cells;
}}"""


# --- what the notebook should show ---------------------------------------------------------------
_INTERACT_CALL = re.compile(r"\binteract(?:_manual|ive)?\s*[.(]")
_PLOT_CALL = re.compile(r"\b(?:plot|plt)\.\w+\(")


def _code_lines(source: str) -> str:
    return "\n".join(ln for ln in source.splitlines() if not ln.lstrip().startswith(("#", "import ", "from ")))


def expectations(path: Path) -> tuple[dict[str, int], set[str], int]:
    """Figures per cell, the cells that show a widget, and the least number of figures in all.

    A stable fact, not a guess from the source: the papermill-executed copy of this notebook
    that `make course PROFILE=smoke` leaves in build/ (CI runs it just before), taken only for
    cells whose id *and* source are unchanged since. A cell drew there, under
    the same smoke profile, so it must draw here; whether a cell draws cannot be read off its
    source (a figure may come from a helper, a loop, or a branch the CPU does not take).
    Without such a copy: a widget for every cell that calls `interact(...)`, and at least one
    figure for a notebook that calls plot/plt (every notebook of the course draws).
    """
    cells = [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    copy, _ = smoke_copy(path)
    ran = {c.get("id"): c for c in copy.cells} if copy is not None else {}
    figures, widgets = {}, set()
    for cell in cells:
        copy = ran.get(cell.get("id"))
        if copy is not None and copy.source == cell.source:
            data = [o.get("data", {}) for o in copy.get("outputs", [])]
            figures[cell.id] = sum("image/png" in d for d in data)
            if any("application/vnd.jupyter.widget-view+json" in d for d in data):
                widgets.add(cell.id)
        elif _INTERACT_CALL.search(_code_lines(cell.source)):
            widgets.add(cell.id)
    draws = any(_PLOT_CALL.search(_code_lines(c.source)) for c in cells)
    return figures, widgets, max(sum(figures.values()), int(draws))


def _first_line(source: str) -> str:
    return (source.strip().splitlines() or [""])[0][:70]


def check_page(cells: list[dict], path: Path) -> list[str]:
    """What is wrong with the executed student copy as the page shows it: one line per problem."""
    problems, failed = [], False
    # Each exercise left undone says so once, under itself; no other cell does.
    source = nbformat.read(path, as_version=4)
    exercises = {source.cells[i].get("id") for i in student.exercise_cells(source)}
    for i, cell in enumerate(cells):
        said = cell["text"].count("not done yet:")
        if said != (cell["id"] in exercises):
            problems.append(f"code cell {i} ({_first_line(cell['source'])!r}) says 'not done yet' {said} "
                            f"time(s), expected {int(cell['id'] in exercises)}")
    # Errors: an `error` output in a cell (stderr text is fine), or a traceback that a widget's
    # callback printed into its output.
    for i, cell in enumerate(cells):
        for out in cell["outputs"]:
            if out["type"] == "error":
                failed = True
                problems.append(f"code cell {i} ({_first_line(cell['source'])!r}) failed: {out['error']}")
        if "Traceback (most recent call last)" in cell["widgetText"]:
            problems.append(f"code cell {i}: a widget's output shows a traceback:\n{cell['widgetText'][-800:]}")
        for placeholder in ("Loading widget", "Error displaying widget"):
            if placeholder in cell["text"]:
                problems.append(f"code cell {i} ({_first_line(cell['source'])!r}) shows {placeholder!r}")
    if failed:
        return problems  # Run All stopped at the failing cell: the rest did not run
    # Every non-empty code cell ran, once, in order, in this session's kernel.
    counts = [c["count"] for c in cells if c["source"].strip()]
    if counts != list(range(1, len(counts) + 1)):
        problems.append(f"execution counts {counts}: not every code cell ran once, in order")
    # Figures: every PNG the kernel sent is rendered, and each cell draws what it drew under papermill.
    figures, widget_cells, least = expectations(path)
    for i, cell in enumerate(cells):
        sent = sum("image/png" in o["mimes"] for o in cell["outputs"])
        want = max(sent, figures.get(cell["id"], 0))
        if cell["images"] < want:
            problems.append(f"code cell {i} ({_first_line(cell['source'])!r}): {cell['images']} figure(s) "
                            f"rendered, expected {want} (the kernel sent {sent})")
    if sum(c["images"] for c in cells) < least:
        problems.append(f"{sum(c['images'] for c in cells)} figure(s) rendered in all, expected at least {least}")
    # Widgets: every widget output is a rendered view, and each widget cell shows one.
    for i, cell in enumerate(cells):
        views = [o for o in cell["outputs"] if "application/vnd.jupyter.widget-view+json" in o["mimes"]]
        if any(not o["widget"] for o in views):
            problems.append(f"code cell {i} ({_first_line(cell['source'])!r}): a widget output is not rendered: "
                            f"{[o['text'][:100] for o in views if not o['widget']]}")
        if cell["id"] in widget_cells and not views:
            problems.append(f"code cell {i} ({_first_line(cell['source'])!r}) shows no widget")
    return problems


# --- driving the page ----------------------------------------------------------------------------
def open_notebook(page, name: str) -> None:
    """Open `name` in the page's JupyterLab (File ▸ Open's command), alone in the main area, and
    wait for its kernel (the notebook's own, python3, started as JupyterLab starts it)."""
    page.evaluate("(path) => { window.jupyterapp.commands.execute('docmanager:open', {path}); }", name)
    page.wait_for_function(KERNEL_IDLE, arg=name, timeout=KERNEL_READY_S * 1000, polling=250)


def run_all(page, name: str) -> None:
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs')")
    page.locator(".lm-MenuBar-itemLabel").filter(has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-itemLabel").filter(has_text=re.compile(r"^Run All Cells$")).click()
    page.wait_for_function(RUN_DONE, arg=name, timeout=RUN_ALL_S * 1000, polling=500)


def wait_for_widget_output(page, name: str, output, before: str) -> str:
    """The widget's output once its callback has finished: changed, not empty, kernel idle."""
    deadline = time.monotonic() + WIDGET_S
    while time.monotonic() < deadline:
        text = output.inner_text()
        if text.strip() and text != before and page.evaluate(KERNEL_IDLE, name):
            return text
        page.wait_for_timeout(250)
    raise AssertionError(f"the widget's output did not change within {WIDGET_S} s: {output.inner_text()!r}")


def move_slider(page, name: str) -> None:
    """01: one step of the first `interact` slider; its output must show the new size."""
    box = page.locator(".widget-interact").filter(has=page.locator(".widget-slider")).first
    handle, output = box.locator(".noUi-handle").first, box.locator(".widget-output").first
    before = output.inner_text()
    value, top = (float(handle.get_attribute(a)) for a in ("aria-valuenow", "aria-valuemax"))
    handle.focus()
    page.keyboard.press("ArrowRight" if value < top else "ArrowLeft")
    new = int(float(handle.get_attribute("aria-valuenow")))
    assert new != value, "the slider did not move"
    after = wait_for_widget_output(page, name, output, before)
    assert str(new) in after, f"the output does not show the new value {new}: {after!r}"
    assert "Traceback" not in after, after


def press_interact_manual(page, name: str) -> None:
    """02: the `interact_manual` button runs the measurement; its output must appear."""
    box = page.locator(".widget-interact").filter(has=page.locator("button.widget-button")).first
    output = box.locator(".widget-output").first
    before = output.inner_text()
    box.locator("button.widget-button").first.click()
    after = wait_for_widget_output(page, name, output, before)
    assert "Traceback" not in after, after


INTERACTIONS = {"01_gpu_vs_cpu": move_slider, "02_first_cnn": press_interact_manual}


def progress(page, name: str) -> str:
    """Where Run All stands: the code cells that ran, and the one running or next."""
    try:
        cells = [c for c in page.evaluate(STATE, name) if c["source"].strip()]
    except Exception:
        return ""
    ran = sum(c["count"] is not None for c in cells)
    stuck = next((c for c in cells if c["count"] is None), None)
    return f"{ran} of {len(cells)} code cells ran" + (f"; stopped at {_first_line(stuck['source'])!r}" if stuck else "")


def screenshot(page, stem: str) -> Path | None:
    """The whole notebook in one picture: the viewport grown to the notebook's height."""
    shot = SHOTS / f"{stem}.png"
    try:
        SHOTS.mkdir(parents=True, exist_ok=True)
        height = page.evaluate("() => Math.max(0, ...[...document.querySelectorAll("
                               "'.jp-WindowedPanel-outer, .jp-NotebookPanel-notebook')].map(e => e.scrollHeight))")
        height = min(max(height + 200, VIEWPORT["height"]), 16000)  # Chromium's limit: 16384 px
        page.set_viewport_size({"width": VIEWPORT["width"], "height": height})
        page.wait_for_timeout(500)
        page.screenshot(path=str(shot), full_page=True)
        return shot
    except Exception:  # the screenshot only helps; never hide the real failure
        return None


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_in_jupyterlab(path, notebooks_status, tab, lab):
    page = tab.fresh()
    passed = False
    try:
        open_notebook(page, path.name)
        run_all(page, path.name)
        try:  # let rendering catch up; what is still missing is reported below
            page.wait_for_function(RENDERED, arg=path.name, timeout=30_000, polling=250)
        except PlaywrightError:
            pass
        problems = check_page(page.evaluate(STATE, path.name), path)
        assert not problems, f"{path.name}:\n" + "\n".join(problems)
        if path.stem in INTERACTIONS:
            INTERACTIONS[path.stem](page, path.name)
        passed = page.evaluate(CLOSE, path.name)  # the next notebook opens alone
    except BaseException as exc:
        shot = screenshot(page, path.stem)
        notes = [progress(page, path.name) if isinstance(exc, PlaywrightError) else "",
                 f"screenshot: {shot}" if shot else "no screenshot",
                 "browser console errors:\n" + "\n".join(tab.console[-10:]) if tab.console else "",
                 f"JupyterLab log (last lines):\n{lab.log_tail()}" if isinstance(exc, PlaywrightError) else ""]
        exc.add_note("\n".join(n for n in notes if n))
        raise
    finally:
        if not passed:  # whatever this notebook left in the page, the next one starts without it
            tab.discard()
        try:  # free the CPU for the next notebook; a server that died is reported above
            lab.shut_down_kernels()
        except OSError:
            pass
    assert _notebooks_status() == notebooks_status, "the browser run changed notebooks/"
