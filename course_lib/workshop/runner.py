"""Execute notebooks headless with papermill and summarise the run."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from unittest import mock

import nbformat
import papermill as pm
from queue import Empty

from jupyter_client import AsyncKernelManager
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.channels import AsyncZMQSocketChannel
from jupyter_client.kernelspec import NATIVE_KERNEL_NAME, KernelSpec, KernelSpecManager
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from papermill.exceptions import PapermillExecutionError
from traitlets import DottedObjectName, Type, default
from traitlets.config import Config

from course_lib import report
from course_lib.units import fmt_time

# Kernels talk to us over local sockets (IPC), not TCP: nothing listens on a port, and
# ipykernel has no reason to warn about unencrypted TCP in every learner's `make course`.
KERNEL_CONFIG = Config({"KernelManager": {"transport": "ipc"}})


class CurrentEnvKernelSpecManager(KernelSpecManager):
    """Kernelspecs as Jupyter finds them, except ``python3``: ipykernel in the interpreter
    running this code (``sys.executable``), whatever ``python3`` spec the user installed."""

    def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
        if kernel_name != NATIVE_KERNEL_NAME:
            return super().get_kernel_spec(kernel_name)
        # Imported here, not at the top: ipykernel 6 imports debugpy, whose check for
        # Python 3.11's frozen modules prints a warning; `course run --profile bogus` must
        # stay one line. The same switch keeps the warning out of every kernel's stderr.
        with mock.patch.dict(os.environ, PYDEVD_DISABLE_FILE_VALIDATION="1"):
            import ipykernel.kernelspec
        spec = self.kernel_spec_class(resource_dir=ipykernel.kernelspec.RESOURCES,
                                      **ipykernel.kernelspec.get_kernel_dict())
        spec.env = {**spec.env, "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
        return spec


POLL_S = 1.0  # longest single wait on a kernel socket; a long wait is a series of these


class PollingChannel(AsyncZMQSocketChannel):
    """A kernel channel whose long waits are a series of polls of at most :data:`POLL_S`.

    nbclient waits for a cell's reply with one poll as long as the cell's time-out. In fresh
    CI runs a widget cell's reply sometimes reached it only when that poll expired (the
    kernel had finished in a second; jupyter/nbclient#312 reports the same with ipywidgets),
    so one lost wake-up cost the whole time-out. A new poll sees a message that is already
    waiting, so the cost of a lost wake-up is at most POLL_S.
    """

    async def get_msg(self, timeout: float | None = None) -> dict:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = POLL_S if deadline is None else min(POLL_S, max(0.0, deadline - time.monotonic()))
            try:
                return await super().get_msg(timeout=left)
            except Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    raise


class CurrentEnvKernelClient(AsyncKernelClient):
    """nbclient's kernel client, with :class:`PollingChannel` for replies and outputs."""

    shell_channel_class = Type(PollingChannel)
    iopub_channel_class = Type(PollingChannel)


class CurrentEnvKernelManager(AsyncKernelManager):
    """nbclient's kernel manager, with ``python3`` meaning this interpreter (like nbval's
    ``--nbval-current-env``): notebooks run with the course's torch, not another Python's,
    and a client whose waits cannot stall on a lost wake-up (:class:`PollingChannel`)."""

    client_class = DottedObjectName("course_lib.workshop.runner.CurrentEnvKernelClient")
    client_factory = Type(klass=CurrentEnvKernelClient)

    @default("kernel_spec_manager")
    def _kernel_spec_manager_default(self) -> KernelSpecManager:
        return CurrentEnvKernelSpecManager(data_dir=self.data_dir)

    @default("ip")
    def _ip_default(self) -> str:
        """IPC sockets of this kernel alone, in a private (0700) temporary folder.

        jupyter_client's default is ``kernel-ipc-1``, ``-2``… relative to the current folder,
        numbered by the first free file: two kernels started at once from one folder (two
        ``course run``, or tests in parallel) can take the same sockets. The folder's path
        is short: a socket's path must stay under about 100 bytes.
        """
        if self.transport != "ipc":
            return super()._ip_default()
        return os.path.join(tempfile.mkdtemp(prefix="course-kernel-"), "ipc")

    def cleanup_ipc_files(self) -> None:
        """Remove the sockets, then their private folder."""
        super().cleanup_ipc_files()
        if self.transport == "ipc" and os.path.basename(os.path.dirname(self.ip)).startswith("course-kernel-"):
            shutil.rmtree(os.path.dirname(self.ip), ignore_errors=True)


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


def reports(results: list[RunResult], out_dir: Path) -> dict[str, dict]:
    """The reports that the notebooks of `results` saved in this run, keyed by notebook.

    :func:`execute` deletes a notebook's old report before running it, so a report found
    here was written by this run; reports of notebooks not in `results` are ignored.
    """
    found = {}
    for r in results:
        path = report.report_path(r.notebook, out_dir)
        if path.exists():
            found[r.notebook] = json.loads(path.read_text())
    return found


class ParameterError(ValueError):
    """A parameter that a notebook's parameters cell does not have, in one sentence."""


def typed(value: str) -> object:
    """A value given on the command line, typed as papermill's own ``-p`` types it: True,
    False, None, an int, a float, else the text itself ('my_corpus/' stays a string)."""
    if value in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[value]
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value


def parameters(notebook: Path, given: list[tuple[str, str]] | None) -> dict[str, object]:
    """`given` (NAME, VALUE) pairs as typed parameters for `notebook`, checked against its
    parameters cell (``papermill.inspect_notebook``): a name it does not have, or PROFILE (which
    ``--profile`` sets), raises :class:`ParameterError` naming the parameters it has. A value
    that names a file or folder existing here becomes its absolute path, since the notebook
    runs in its own folder (``-p TEXT_PATH my_corpus/`` from the repository root)."""
    values = {name: typed(value) for name, value in given or []}
    if not values:
        return {}
    known = list(pm.inspect_notebook(str(notebook)))
    settable = [k for k in known if k != "PROFILE"]
    wrong = [name for name in values if name not in settable]
    if wrong:
        extra = " (the profile comes from --profile)" if "PROFILE" in wrong else ""
        raise ParameterError(f"{notebook.stem} has no parameter {', '.join(map(repr, wrong))}{extra}; "
                             f"its parameters: {', '.join(settable) or 'none'}.")
    return {k: str(Path(v).resolve()) if isinstance(v, str) and v and Path(v).exists() else v
            for k, v in values.items()}


def execute(notebook: Path, profile: str, out_dir: Path, timeout_s: int = 900,
            parameters: dict[str, object] | None = None) -> RunResult:
    """Run `notebook` with ``PROFILE=profile`` (and `parameters`, see :func:`parameters`) in its
    own folder, in a kernel of this Python (``sys.executable``); write the executed copy. Its
    report from an earlier run is deleted first, so the report left afterwards (if any) is this
    run's."""
    out_dir = out_dir.resolve()  # the kernel runs in the notebook's folder, not ours
    out_dir.mkdir(parents=True, exist_ok=True)
    report.report_path(notebook.stem, out_dir).unlink(missing_ok=True)
    output = out_dir / notebook.name
    start = time.perf_counter()
    error = None
    try:
        with mock.patch.dict(os.environ, COURSE_BUILD_DIR=str(out_dir),  # reports land here
                             COURSE_HEADLESS="1"):  # text bars, which a saved notebook keeps
            pm.execute_notebook(str(notebook), str(output),
                                parameters={**(parameters or {}), "PROFILE": profile},
                                cwd=str(notebook.parent), kernel_name=NATIVE_KERNEL_NAME,
                                kernel_manager_class=CurrentEnvKernelManager,
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
    found = reports(results, out_dir)
    lines = [f"profile {profile}", "", "| notebook | status | wall time | measurements |",
             "|---|---|---|---|"]
    for r in results:
        n = len(found.get(r.notebook, {}).get("measurements", {}))
        status = "ok" if r.ok else f"FAILED: {r.error}"
        lines.append(f"| {r.notebook} | {status} | {fmt_time(r.seconds)} | {n} |")
    total = sum(r.seconds for r in results)
    lines.append(f"\n{sum(r.ok for r in results)}/{len(results)} notebooks ok in {fmt_time(total)}")
    both = report.shared(found) if found else []
    if both:
        lines += ["", "The same quantity measured by several notebooks of this run:"]
        lines += [f"- {s}" for s in both]
    return "\n".join(lines)


def write_summary(results: list[RunResult], profile: str, out_dir: Path) -> str:
    """Write ``summary.md`` and ``summary.json`` to `out_dir`; return the Markdown."""
    text = summary(results, profile, out_dir)
    (out_dir / "summary.md").write_text(text + "\n")
    (out_dir / "summary.json").write_text(json.dumps([asdict(r) for r in results], indent=1))
    return text
