"""Distributed runs launched from a notebook with PyTorch's own ``torchrun``.

:func:`launch` runs ``python -m torch.distributed.run … scripts/NAME.py`` (the kernel's Python,
so the kernel's packages), streams every rank's lines as they come, stops the job after a
wall-clock timeout, and on failure raises :class:`LaunchError`: one sentence that names the
failing rank and why, then that rank's last lines. :func:`launch_together` runs several
``torchrun`` commands at once (two "nodes" on one machine). The rendezvous binds to 127.0.0.1
unless you name another host. :func:`source` shows the lines of a script that a notebook runs.
What runs inside each rank (its process group, its status record) is :mod:`course_lib.ranks`.

Why files and ``torchrun``: ``mp.spawn`` of a function defined in a notebook fails (the
workers cannot import ``__main__``), and a script that runs under ``torchrun`` here runs
unchanged on a cluster.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import torch

from course_lib.ranks import STATUS_ENV

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
HOST = "127.0.0.1"  # rendezvous on the loopback interface: nothing outside this machine can join


class LaunchError(RuntimeError):
    """A distributed job failed or timed out; the message names the rank and why."""


# ---- launching (notebook side) ---------------------------------------------------------------

def script(name: str | Path) -> Path:
    """The path of ``scripts/NAME`` (``.py`` optional), or one sentence if it is not there. A
    `Path` is a script of your own (notebook 06 writes one from a cell): used as it is."""
    if isinstance(name, Path):
        if not name.is_file():
            raise FileNotFoundError(f"No script {name}: run the cell that writes it first.")
        return name
    path = SCRIPTS / (name if name.endswith(".py") else f"{name}.py")
    if not path.is_file():
        have = ", ".join(sorted(p.name for p in SCRIPTS.glob("*.py"))) or "none"
        raise FileNotFoundError(f"No distributed script {path.name} in {SCRIPTS} (there: {have}).")
    return path


def free_port(host: str = HOST) -> int:
    """A TCP port free on `host` now (the OS picks it; another program could take it later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def torchrun_command(path: str | Path, args: Sequence[str] = (), *, nproc: int = 2,
                     nnodes: int = 1, node_rank: int = 0, host: str = HOST, port: int | None = None,
                     max_restarts: int = 0, run_id: str = "course") -> list[str]:
    """The ``torchrun`` command line (as ``python -m torch.distributed.run``) for a script.

    c10d rendezvous at ``host:port`` (a free port on 127.0.0.1 by default); ``--tee=3`` prefixes
    every line a worker prints with ``[default<local rank>]:``.
    """
    if nproc < 1 or nnodes < 1 or not 0 <= node_rank < nnodes:
        raise ValueError(f"Need nproc >= 1, nnodes >= 1 and 0 <= node_rank < nnodes, got "
                         f"nproc={nproc}, nnodes={nnodes}, node_rank={node_rank}.")
    port = port or free_port(host)
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nnodes={nnodes}",
           f"--nproc_per_node={nproc}", f"--node_rank={node_rank}", "--rdzv_backend=c10d",
           f"--rdzv_endpoint={host}:{port}", f"--rdzv_id={run_id}",
           f"--max_restarts={max_restarts}", "--tee=3"]
    if host in ("127.0.0.1", "localhost"):
        cmd.append(f"--local_addr={host}")
    return cmd + [str(path), *map(str, args)]


def shell(cmd: Sequence[str]) -> str:
    """`cmd` as you would type it: ``torchrun`` instead of ``python -m torch.distributed.run``."""
    words = list(cmd)
    if words[1:3] == ["-m", "torch.distributed.run"]:
        words = ["torchrun"] + words[3:]
    return " ".join(words)


@dataclass
class Run:
    """What one ``torchrun`` job did: its command, exit code, wall time and output lines."""

    command: list[str]
    returncode: int | None  # None: stopped by the timeout
    seconds: float
    lines: list[str] = field(default_factory=list)
    status_dir: Path | None = None
    failure: str | None = None  # the one-sentence diagnosis when it failed

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def rank_lines(self, local_rank: int) -> list[str]:
        """The lines local rank `local_rank` printed, without torchrun's prefix."""
        tag = f"[default{local_rank}]:"
        return [ln[len(tag):] for ln in self.lines if ln.startswith(tag)]

    def said(self, local_rank: int, n: int = 2) -> list[str]:
        """The last `n` lines the script itself printed on `local_rank` (no traceback lines,
        which torch prefixes with ``[rank<r>]:``, no log records)."""
        own = [ln for ln in self.rank_lines(local_rank)
               if not _RANK_PREFIX.match(ln) and not _LOG_RECORD.match(ln)]
        return own[-n:]


def _env(status_dir: Path, threads: int, extra: dict[str, str] | None) -> dict[str, str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS=str(threads))
    env[STATUS_ENV] = str(status_dir)
    env.update(extra or {})
    return env


def _reader(proc: subprocess.Popen, tag: str, q: queue.Queue) -> None:
    for line in proc.stdout:  # type: ignore[union-attr]
        q.put((tag, line.rstrip("\n")))
    q.put((tag, None))


def _stop(procs: list[subprocess.Popen], status_dir: Path) -> None:
    """Stop torchrun agents (SIGTERM, then SIGKILL) and any rank still alive."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 5
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        try:  # the agent's whole group, also after the agent exited: a worker it started a moment before
            os.killpg(p.pid, signal.SIGKILL)  # the SIGTERM (still importing torch) would outlive it
        except (ProcessLookupError, PermissionError):
            pass
    for st in _statuses(status_dir).values():  # ranks in their own sessions, if any are left
        try:
            os.kill(int(st["pid"]), signal.SIGKILL)
        except (ProcessLookupError, PermissionError, KeyError, ValueError):
            pass


def launch_together(commands: Sequence[Sequence[str]], *, timeout_s: float = 120,
                    threads: int = 1, env: dict[str, str] | None = None, echo: bool = True,
                    check: bool = True, envs: Sequence[dict[str, str]] | None = None) -> list[Run]:
    """Run the ``torchrun`` commands of one job at once (one per node), streaming their lines,
    within `timeout_s`.

    Each rank runs with `threads` intra-op threads (``OMP_NUM_THREADS``; torchrun's default is
    1); `envs` adds variables per command. With `check`, a failed or timed-out job raises
    :class:`LaunchError`.
    """
    status = Path(tempfile.mkdtemp(prefix="status-", dir=files_dir()))  # this job's rank files
    tags = [""] if len(commands) == 1 else [f"node{i}" for i in range(len(commands))]
    q: queue.Queue = queue.Queue()
    start = time.monotonic()
    procs = []
    for i, (cmd, tag) in enumerate(zip(commands, tags)):
        extra = {**(env or {}), **(envs[i] if envs else {})}
        p = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             bufsize=1, env=_env(status, threads, extra), start_new_session=True)
        procs.append(p)
        threading.Thread(target=_reader, args=(p, tag, q), daemon=True).start()
    lines: dict[str, list[str]] = {t: [] for t in tags}
    open_streams, timed_out = len(procs), False
    while open_streams:
        left = timeout_s - (time.monotonic() - start)
        if left <= 0:
            timed_out = True
            _stop(procs, status)
            break
        try:
            tag, line = q.get(timeout=min(left, 0.5))
        except queue.Empty:
            continue
        if line is None:
            open_streams -= 1
            continue
        lines[tag].append(line)
        if echo and not _noise(line):
            print(f"{tag} {line}" if tag else line, flush=True)
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            _stop([p], status)
    seconds = time.monotonic() - start
    runs = [Run(list(cmd), None if timed_out else p.returncode, seconds, lines[tag], status)
            for cmd, p, tag in zip(commands, procs, tags)]
    if timed_out or any(not r.ok for r in runs):
        message = diagnose(runs, timed_out, timeout_s)
        for r in runs:
            r.failure = message
    shutil.rmtree(status, ignore_errors=True)
    if check and runs[0].failure:
        raise LaunchError(runs[0].failure)
    return runs


def launch(name: str | Path, args: Sequence[str] = (), *, nproc: int = 2, timeout_s: float = 120,
           max_restarts: int = 0, threads: int = 1, env: dict[str, str] | None = None,
           echo: bool = True, check: bool = True) -> Run:
    """Run ``scripts/NAME`` (or a script of your own, a `Path`) under ``torchrun --nproc_per_node=nproc``
    on this machine.

    Lines stream as the ranks print them; the job is stopped after `timeout_s` seconds. With
    `check` (default), a failure raises :class:`LaunchError` naming the failing rank; without
    it, the returned :class:`Run` carries the diagnosis in ``failure``.
    """
    cmd = torchrun_command(script(name), args, nproc=nproc, max_restarts=max_restarts)
    if max_restarts:
        # Restarted ranks must not share the rendezvous store with the failed attempt: they
        # would read its stale addresses and fail to connect (pytorch/pytorch#135712).
        env = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1", **(env or {})}
    return launch_together([cmd], timeout_s=timeout_s, threads=threads, env=env, echo=echo,
                           check=check)[0]


def files_dir(*parts: str) -> Path:
    """A folder under ``<build>/dist/`` (:func:`report.build_dir`) for a run's files."""
    from course_lib.report import build_dir  # here: the scripts never need it

    path = build_dir().joinpath("dist", *parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


_NOISE = re.compile(r"^\*+$|OMP_NUM_THREADS environment variable|"
                    r"please further tune the variable|No CUDA runtime is found")


def _noise(line: str) -> bool:
    """torchrun's banner about OMP_NUM_THREADS (we set it, so it says nothing), and a CUDA build
    of torch warning on a machine without CUDA that it found no CUDA runtime."""
    return bool(_NOISE.search(line))


def _statuses(status_dir: Path | None) -> dict[int, dict]:
    out = {}
    for p in sorted(Path(status_dir).glob("rank*.json")) if status_dir else []:
        try:
            st = json.loads(p.read_text())
            out[int(st["rank"])] = st
        except (OSError, ValueError, KeyError):
            continue
    return out


_ROOT = re.compile(r"Root Cause.*?rank\s*:\s*(\d+).*?exitcode\s*:\s*(-?\d+)", re.S)


def diagnose(runs: Sequence[Run], timed_out: bool = False, timeout_s: float = 0) -> str:
    """One sentence on why a job failed (which rank, why), then that rank's last lines.

    The rank comes from the files each rank writes through :func:`entry` (a Python exception,
    with its time) and, for a rank that died without one (killed, ``os._exit``, a crash), from
    torchrun's own "root cause" summary.
    """
    statuses = _statuses(runs[0].status_dir)
    name = Path(runs[0].command[-1]).name
    for part in runs[0].command[::-1]:
        if part.endswith(".py"):
            name = Path(part).name
            break
    if timed_out:
        waiting = sorted(r for r, st in statuses.items() if st.get("state") == "started")
        who = f"; ranks still running: {', '.join(map(str, waiting))}" if waiting else ""
        return (f"{name} did not finish within {timeout_s:.0f} s and was stopped{who}."
                + _tail(runs, waiting[0] if waiting else None))
    errors = sorted((st["time"], r) for r, st in statuses.items() if st.get("state") == "error")
    root_rank, code = None, None
    for run in runs:
        m = _ROOT.search("\n".join(run.lines))
        if m:
            root_rank, code = int(m[1]), int(m[2])
            break
    if root_rank is None and errors:
        root_rank = errors[0][1]
    if root_rank is None:
        codes = ", ".join(str(r.returncode) for r in runs)
        return f"{name} failed (exit code {codes}) before any rank reported an error." + _tail(runs, None)
    st = statuses.get(root_rank, {})
    if st.get("state") == "error":
        why = f"raised {st['error']}: {st['message']}"
    elif code is not None and code < 0:
        why = f"was killed by signal {signal.Signals(-code).name} without a Python exception"
    else:
        why = f"exited (code {code}) without a Python exception"
    others = [f"rank {r} then {statuses[r]['error']}" for _, r in errors if r != root_rank]
    then = f" ({'; '.join(others)})" if others else ""
    return f"{name} failed: rank {root_rank} {why}{then}." + _tail(runs, root_rank)


_RANK_PREFIX = re.compile(r"^\[rank\d+\]:")  # torch prefixes a failing rank's traceback lines
_LOG_RECORD = re.compile(r"^[IWEF]\d{4} \d\d:\d\d")  # "W1123 09:29:16.204000 ..." from torch's logs


def _tail(runs: Sequence[Run], rank: int | None, n: int = 6) -> str:
    if rank is None:
        lines = [ln for r in runs for ln in r.lines if not _noise(ln)][-n:]
    else:
        lines = []
        for node, r in enumerate(runs):
            st = _statuses(r.status_dir).get(rank, {})
            local = st.get("local_rank", rank - node * _nproc(r))
            lines += r.rank_lines(int(local)) if node == st.get("node", node) else []
        lines = [_RANK_PREFIX.sub("", ln) for ln in lines][-n:]
    return ("\nLast lines:\n  " + "\n  ".join(lines)) if lines else ""


def _nproc(run: Run) -> int:
    for part in run.command:
        if part.startswith("--nproc_per_node="):
            return int(part.split("=")[1])
    return 1


def launch_nodes(name: str | Path, args: Sequence[str] = (), *, nnodes: int = 2, nproc: int = 1,
                 timeout_s: float = 120, threads: int = 1, echo: bool = True) -> list[Run]:
    """Rehearse a multi-node job on this machine: `nnodes` torchrun agents, each started as
    ``--nnodes=N --node_rank=i`` with the same c10d rendezvous endpoint on 127.0.0.1, as N
    machines would be. Lines are tagged ``node0``, ``node1``, ...

    Each "node" sees its own GPUs (``CUDA_VISIBLE_DEVICES``) when there are enough for one per
    rank, as separate machines would; otherwise none, and the ranks use gloo on the CPU."""
    path, port = script(name), free_port()
    cmds = [torchrun_command(path, args, nproc=nproc, nnodes=nnodes, node_rank=i, port=port)
            for i in range(nnodes)]
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    envs = [{"CUDA_VISIBLE_DEVICES": v} for v in node_gpus(nnodes, nproc, gpus)]
    return launch_together(cmds, timeout_s=timeout_s, threads=threads, echo=echo, envs=envs)


def node_gpus(nnodes: int, nproc: int, gpus: int, visible: str | None = None) -> list[str]:
    """``CUDA_VISIBLE_DEVICES`` for each rehearsed node: `nproc` of the `gpus` this process sees
    each, or '' for all (gloo on the CPU) when there are not enough. The GPUs are named as this
    process's own ``CUDA_VISIBLE_DEVICES`` (`visible`, default: the environment's) names them, so
    a notebook started on GPUs 4-7 keeps its nodes there.

    >>> node_gpus(2, 2, 4, visible="4,5,6,7"), node_gpus(2, 1, 4, visible=""), node_gpus(2, 2, 3)
    (['4,5', '6,7'], ['0', '1'], ['', ''])
    """
    if gpus < nnodes * nproc:
        return [""] * nnodes
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "") if visible is None else visible
    names = [v.strip() for v in visible.split(",") if v.strip()] or [str(i) for i in range(gpus)]
    return [",".join(names[i * nproc + j] for j in range(nproc)) for i in range(nnodes)]


def process_budget() -> int:
    """How many processes :func:`launch_each` keeps running at once by default: twice this
    machine's cores, at least 8."""
    return max(8, 2 * (os.cpu_count() or 1))


def launch_each(jobs: Sequence[tuple[str | Path, Sequence[str], dict[str, Any]]], *,
                timeout_s: float = 120, max_procs: int | None = None) -> list[Run]:
    """Run independent jobs ``(script, args, launch keywords)`` side by side, without
    streaming (their lines would interleave) and without raising: each :class:`Run` carries
    its lines and, when it failed, its diagnosis. For demonstrations, never for timing.

    A job starts, in order, once the processes of the jobs running with it total at most
    ``max_procs`` (default: :func:`process_budget`); a larger job runs alone.
    Eight ranks on two cores take long enough to start that three such jobs at once would
    reach their wall-clock limit."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    budget = max_procs if max_procs is not None else process_budget()
    running = [0]  # processes of the jobs running now
    turn = [0]  # the index of the next job allowed to start: jobs start in order
    free = threading.Condition()

    def one(indexed: tuple[int, tuple[str | Path, Sequence[str], dict[str, Any]]]) -> Run:
        i, (name, args, kw) = indexed
        n = int(kw.get("nproc", 2))
        with free:
            free.wait_for(lambda: turn[0] == i and (running[0] == 0 or running[0] + n <= budget))
            running[0] += n
            turn[0] += 1
            free.notify_all()
        try:
            return launch(name, args, timeout_s=timeout_s, echo=False, check=False, **kw)
        finally:
            with free:
                running[0] -= n
                free.notify_all()

    with ThreadPoolExecutor(max(1, len(jobs))) as pool:
        return list(pool.map(one, enumerate(jobs)))


def node_commands(name: str, args: Sequence[str] = (), *, nnodes: int = 2, nproc: int = 8,
                  head: str = "10.0.0.1", port: int = 29500) -> list[str]:
    """The command to type on each of `nnodes` real machines (``head``: the address of the
    first machine, reachable from the others). With c10d rendezvous every machine types the
    same line (no ``--node_rank``): once all have joined, the agents number the nodes sorted by
    host address, then process id."""
    line = (f"torchrun --nnodes={nnodes} --nproc_per_node={nproc} --rdzv_backend=c10d "
            f"--rdzv_endpoint={head}:{port} --rdzv_id=course "
            f"scripts/{script(name).name} {' '.join(args)}").rstrip()
    return [line] * nnodes


def slurm_script(name: str, args: Sequence[str] = (), *, nodes: int = 2, gpus_per_node: int = 8,
                 cpus_per_node: int = 64, hours: int = 1) -> str:
    """A Slurm batch script: one torchrun per node (``srun``) with all of the node's CPU cores
    (Slurm's default is often one per task), the first node of the allocation as the
    rendezvous host, the job id as the rendezvous id."""
    return "\n".join([
        "#!/bin/bash",
        f"#SBATCH --job-name={script(name).stem}",
        f"#SBATCH --nodes={nodes}",
        "# one torchrun per node; each starts that node's ranks (one per GPU)",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --gpus-per-node={gpus_per_node}",
        f"#SBATCH --cpus-per-task={cpus_per_node}",
        f"#SBATCH --time={hours:02d}:00:00",
        "",
        'head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        "export SRUN_CPUS_PER_TASK=$SLURM_CPUS_PER_TASK  # srun does not inherit it (Slurm >= 22.05)",
        "srun torchrun --nnodes=\"$SLURM_NNODES\" --nproc_per_node=" + str(gpus_per_node) + " \\",
        '    --rdzv_backend=c10d --rdzv_endpoint="$head:29500" --rdzv_id="$SLURM_JOB_ID" \\',
        f"    scripts/{script(name).name} {' '.join(args)}".rstrip(),
        ""])


def source(name: str | Path, block: str) -> str:
    """The lines of ``scripts/NAME`` between ``# >>> BLOCK`` and ``# <<< BLOCK``, numbered as in
    the file and dedented, so a notebook shows the exact code its jobs run."""
    lines = script(name).read_text().splitlines()
    first = next((i for i, ln in enumerate(lines) if ln.strip().startswith(f"# >>> {block}")), None)
    last = next((i for i, ln in enumerate(lines) if ln.strip() == f"# <<< {block}"), None)
    if first is None or last is None or last <= first + 1:
        raise ValueError(f"{script(name).name} has no block marked '# >>> {block}' … '# <<< {block}'.")
    body = lines[first + 1:last]
    indent = min(len(ln) - len(ln.lstrip()) for ln in body if ln.strip())
    return "\n".join(f"{first + 2 + i:4d}  {ln[indent:]}" for i, ln in enumerate(body))
