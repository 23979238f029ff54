"""`make lab` starts JupyterLab on localhost only, behind a token, also as root."""

import os
import re
import shlex
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

from conftest import REPO, needs_tool


def lab_command() -> list[str]:
    """The `jupyter lab` line of `make lab`, as make would run it (dry run), in the
    virtual environment running these tests (.venv, or .venv-oldest under `make test-oldest`)."""
    plan = subprocess.run(["make", "-n", "-s", "lab", f"VENV={sys.prefix}"], cwd=REPO,
                          capture_output=True, text=True, check=True).stdout
    line = next(ln for ln in plan.splitlines() if " lab " in f"{ln} " and "jupyter" in ln)
    return shlex.split(line)


def status(url: str, token: str | None) -> int | None:
    headers = {"Authorization": f"token {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except urllib.error.URLError:  # not listening (yet)
        return None


def stop(proc: subprocess.Popen, timeout_s: float = 10) -> None:
    """Terminate a server, killed if it has not stopped after `timeout_s`."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_lab_binds_localhost_with_a_token():
    cmd = lab_command()
    assert "--ServerApp.ip=127.0.0.1" in cmd
    assert not any("token=" in c.lower() and c.endswith("=") for c in cmd), "empty token"
    port = free_port()
    proc = subprocess.Popen([*cmd, f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
                             "--ServerApp.open_browser=False"], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        token, log, deadline = None, [], time.monotonic() + 60
        while token is None and time.monotonic() < deadline and proc.poll() is None:
            log.append(proc.stdout.readline())
            m = re.search(rf"http://127\.0\.0\.1:{port}/lab\?token=(\w+)", log[-1])
            token = m and m.group(1)
        assert token, "JupyterLab did not start:\n" + "".join(log[-20:])
        url = f"http://127.0.0.1:{port}/api/status"
        while (code := status(url, token)) is None and time.monotonic() < deadline:
            time.sleep(0.2)  # the URL is printed just before the socket accepts connections
        assert code == 200
        assert status(url, None) == 403  # nothing without the token
    finally:
        stop(proc)


def test_lab_allows_root_only_for_root():
    assert ("--allow-root" in lab_command()) == (os.getuid() == 0)


KERNEL_CMD = ("from jupyter_client import KernelManager; "
              "print(KernelManager(kernel_name='python3').format_kernel_cmd()[0])")


def test_the_notebooks_kernel_is_this_environment_even_with_another_python3_installed(tmp_path):
    """The notebooks name `python3`; in this environment's JupyterLab that kernel runs this
    environment's interpreter, also when the user has a `python3` kernelspec of another Python."""
    import nbformat
    from conftest import NOTEBOOKS
    names = {nbformat.read(p, as_version=4).metadata["kernelspec"]["name"] for p in NOTEBOOKS}
    assert names == {"python3"}
    foreign = tmp_path / "kernels" / "python3"
    foreign.mkdir(parents=True)
    (foreign / "kernel.json").write_text('{"argv": ["/usr/bin/false", "-f", "{connection_file}"], '
                                         '"display_name": "another Python", "language": "python"}')
    env = {**os.environ, "JUPYTER_DATA_DIR": str(tmp_path)}
    env.pop("JUPYTER_PATH", None)
    ran = subprocess.run([sys.executable, "-c", KERNEL_CMD], env=env, capture_output=True, text=True, check=True)
    assert os.path.realpath(ran.stdout.strip()) == os.path.realpath(sys.executable)


@needs_tool("nbgrader")
def test_nbgrader_stays_out_of_the_learners_jupyterlab():
    """The course's install (make's venv or the conda environment) leaves nbgrader's server and
    JupyterLab extensions off, as JupyterLab reads its settings: the course uses only its
    generate_assignment command (course student)."""
    from jupyter_core.paths import jupyter_config_path
    from jupyter_server.extension.config import ExtensionConfigManager
    from jupyterlab_server.config import get_static_page_config
    enabled = ExtensionConfigManager(read_config_path=jupyter_config_path()).get_jpserver_extensions()
    nbgrader = {name: on for name, on in enabled.items() if name.startswith("nbgrader")}
    assert nbgrader and not any(nbgrader.values()), nbgrader
    assert get_static_page_config(level="all")["disabledExtensions"].get("@jupyter/nbgrader") is True
