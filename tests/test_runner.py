"""The notebook runner: which Python runs the kernel, which reports belong to a run."""

import asyncio
import json
import os
import shutil
import sys
import time
from queue import Empty

import nbformat
import pytest
from jupyter_client.channels import AsyncZMQSocketChannel
from jupyter_client.kernelspec import KernelSpecManager

from conftest import REPO
from course_lib import report
from course_lib.workshop import runner


def new_notebook(*sources: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('PROFILE = "auto"')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params] + [nbformat.v4.new_code_cell(s) for s in sources]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def test_kernel_runs_in_this_python_despite_a_user_python3_kernelspec(tmp_path, monkeypatch):
    decoy = tmp_path / "jupyter" / "kernels" / "python3"
    decoy.mkdir(parents=True)
    argv = ["/usr/bin/env", "false", "{connection_file}"]  # another "Python" that cannot start
    (decoy / "kernel.json").write_text(json.dumps(
        {"argv": argv, "display_name": "Python 3 (elsewhere)", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "jupyter"))
    assert KernelSpecManager().get_kernel_spec("python3").argv == argv  # Jupyter would pick it

    nb_dir, out = tmp_path / "nbs", tmp_path / "out"
    nb_dir.mkdir()
    nbformat.write(new_notebook("import sys\nprint(sys.executable)"), nb_dir / "00_which.ipynb")
    stale = report.report_path("00_which", out)
    stale.parent.mkdir(parents=True)
    stale.write_text(json.dumps(report.Report("00_which", "gpu", "cpu").to_dict()))

    monkeypatch.chdir(tmp_path)  # jupyter_client's own IPC default would put sockets here
    result = runner.execute(nb_dir / "00_which.ipynb", "smoke", out, timeout_s=120)
    assert result.ok, result.error
    assert not list(tmp_path.glob("kernel-ipc*")) and not list(nb_dir.glob("kernel-ipc*"))
    executed = nbformat.read(result.output, as_version=4)
    printed = [o["text"] for o in executed.cells[-1].outputs if o.get("name") == "stdout"]
    assert [p.strip() for p in printed] == [sys.executable]
    # the notebook saved no report this time: last run's report is gone, not taken for this one's
    assert not stale.exists() and runner.reports([result], out) == {}


def test_kernels_started_together_never_share_ipc_sockets(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    managers = [runner.CurrentEnvKernelManager(config=runner.KERNEL_CONFIG) for _ in range(3)]
    paths = [km.ip for km in managers]
    assert all(km.transport == "ipc" for km in managers)
    assert len(set(paths)) == 3 and all(os.path.isabs(p) and len(p) < 80 for p in paths)
    folder = os.path.dirname(paths[0])
    assert oct(os.stat(folder).st_mode & 0o777) == "0o700"
    managers[0].cleanup_ipc_files()
    assert not os.path.exists(folder)
    for km in managers[1:]:
        km.cleanup_ipc_files()


def test_reports_are_those_of_the_notebooks_run(tmp_path):
    for stem in ("00_a", "01_b"):
        report.Report(stem, "smoke", "cpu").save(tmp_path / "reports")
    results = [runner.RunResult("00_a", True, 1.0, str(tmp_path / "00_a.ipynb")),
               runner.RunResult("02_c", True, 1.0, str(tmp_path / "02_c.ipynb"))]
    found = runner.reports(results, tmp_path)
    assert list(found) == ["00_a"] and found["00_a"]["notebook"] == "00_a"
    summary = runner.summary(results, "smoke", tmp_path)
    assert "| 00_a | ok |" in summary and "| 02_c | ok |" in summary and "01_b" not in summary


@pytest.mark.parametrize("notebook", sorted(p.name for p in (REPO / "notebooks").glob("*.ipynb")))
def test_every_course_notebook_exports_to_html(tmp_path, notebook):
    """The markdown of the real notebooks goes through nbconvert's markdown parser (mistune);
    nbconvert < 7.16.5 fails there with mistune >= 3.1."""
    copy = tmp_path / notebook
    shutil.copy(REPO / "notebooks" / notebook, copy)
    html = runner.export_html(copy).read_text(encoding="utf-8")
    assert html.lstrip().lower().startswith("<!doctype html") and "<h1" in html


def test_a_lost_wake_up_costs_one_poll_not_the_cell_time_out(monkeypatch):
    """A reply already waiting is found by the next short poll (jupyter/nbclient#312)."""
    asked, answers = [], iter([Empty, Empty, {"msg_id": "reply"}])

    async def fake_get_msg(self, timeout=None):
        asked.append(timeout)
        answer = next(answers)
        if answer is Empty:
            raise Empty
        return answer

    monkeypatch.setattr(AsyncZMQSocketChannel, "get_msg", fake_get_msg)
    channel = runner.PollingChannel.__new__(runner.PollingChannel)  # no socket: get_msg is faked
    assert asyncio.run(channel.get_msg(timeout=120)) == {"msg_id": "reply"}
    assert len(asked) == 3 and all(0 < t <= runner.POLL_S for t in asked)


def test_polling_still_times_out_at_the_deadline(monkeypatch):
    async def never(self, timeout=None):
        await asyncio.sleep(timeout)
        raise Empty

    monkeypatch.setattr(AsyncZMQSocketChannel, "get_msg", never)
    monkeypatch.setattr(runner, "POLL_S", 0.01)
    channel = runner.PollingChannel.__new__(runner.PollingChannel)
    start = time.monotonic()
    with pytest.raises(Empty):
        asyncio.run(channel.get_msg(timeout=0.05))
    assert 0.05 <= time.monotonic() - start < 1.0


def test_the_course_kernel_client_polls_replies_and_outputs():
    km = runner.CurrentEnvKernelManager(config=runner.KERNEL_CONFIG)
    try:
        assert km.client_factory is runner.CurrentEnvKernelClient
        client = km.client()
        assert client.shell_channel_class is runner.PollingChannel
        assert client.iopub_channel_class is runner.PollingChannel
    finally:
        km.cleanup_ipc_files()
