"""Execute notebooks headless with papermill and summarise the run."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from unittest import mock

import nbformat
import papermill as pm
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from papermill.exceptions import PapermillExecutionError
from traitlets.config import Config

from course_lib import report
from course_lib.bench import fmt_time

# Kernels talk to us over local sockets (IPC), not TCP: nothing listens on a port, and
# ipykernel has no reason to warn about unencrypted TCP in every learner's `make course`.
KERNEL_CONFIG = Config({"KernelManager": {"transport": "ipc"}})


@dataclass
class RunResult:
    """How one notebook run went."""

    notebook: str
    ok: bool
    seconds: float
    output: str
    error: str | None = None  # one line: which cell failed and why


def _failing_cell(output: Path) -> str:
    """'cell 7: <first line of its source>' for the cell papermill marked as failed."""
    try:
        nb = nbformat.read(output, as_version=4)
    except Exception:  # the output may be missing if the kernel never started
        return "unknown cell"
    code = [c for c in nb.cells if c.cell_type == "code"
            and "injected-parameters" not in c.metadata.get("tags", [])]
    for i, cell in enumerate(code, start=1):
        if any(o.get("output_type") == "error" for o in cell.get("outputs", [])):
            first = next((ln for ln in cell.source.splitlines() if ln.strip()), "")
            return f"code cell {i} ({first.strip()[:60]!r})"
    return "unknown cell"


def execute(notebook: Path, profile: str, out_dir: Path, timeout_s: int = 900) -> RunResult:
    """Run `notebook` with ``PROFILE=profile`` in its own folder; write the executed copy."""
    out_dir = out_dir.resolve()  # the kernel runs in the notebook's folder, not ours
    out_dir.mkdir(parents=True, exist_ok=True)
    output = out_dir / notebook.name
    start = time.perf_counter()
    error = None
    try:
        with mock.patch.dict(os.environ, COURSE_BUILD_DIR=str(out_dir),  # reports land here
                             COURSE_HEADLESS="1"):  # text bars, which a saved notebook keeps
            pm.execute_notebook(str(notebook), str(output), parameters={"PROFILE": profile},
                                cwd=str(notebook.parent), kernel_name="python3",
                                progress_bar=False, execution_timeout=timeout_s,
                                config=KERNEL_CONFIG, coalesce_streams=True)  # bar: last frame
    except PapermillExecutionError as exc:
        error = f"{_failing_cell(output)}: {exc.ename}: {exc.evalue.splitlines()[0] if exc.evalue else ''}"
    except CellTimeoutError:
        error = f"a cell ran longer than {timeout_s} s (cell time-out)"
    except DeadKernelError as exc:
        error = f"the kernel died ({exc}); often out of memory: try a smaller profile"
    return RunResult(notebook.stem, error is None, time.perf_counter() - start, str(output), error)


def export_html(executed: Path) -> Path:
    """An HTML copy of an executed notebook, next to it."""
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter().from_filename(str(executed))
    html = executed.with_suffix(".html")
    html.write_text(body, encoding="utf-8")
    return html


def summary(results: list[RunResult], profile: str, out_dir: Path) -> str:
    """A Markdown table of the run: notebook, status, wall time, measurements recorded."""
    reports = report.load_reports(out_dir / "reports")
    lines = [f"profile {profile}", "", "| notebook | status | wall time | measurements |",
             "|---|---|---|---|"]
    for r in results:
        n = len(reports.get(r.notebook, {}).get("measurements", {}))
        status = "ok" if r.ok else f"FAILED: {r.error}"
        lines.append(f"| {r.notebook} | {status} | {fmt_time(r.seconds)} | {n} |")
    total = sum(r.seconds for r in results)
    lines.append(f"\n{sum(r.ok for r in results)}/{len(results)} notebooks ok in {fmt_time(total)}")
    return "\n".join(lines)


def write_summary(results: list[RunResult], profile: str, out_dir: Path) -> str:
    """Write ``summary.md`` and ``summary.json`` to `out_dir`; return the Markdown."""
    text = summary(results, profile, out_dir)
    (out_dir / "summary.md").write_text(text + "\n")
    (out_dir / "summary.json").write_text(json.dumps([asdict(r) for r in results], indent=1))
    return text
