"""How busy the device was while a loop ran, sampled in a background thread.

On an NVIDIA GPU the readings are NVML's (the library `nvidia-smi` reads, through PyTorch's
``torch.cuda.utilization``, ``power_draw``, ``clock_rate`` and ``device_memory_used``, which need
the ``nvidia-ml-py`` package): utilisation is "percent of time over the past sample period
during which one or more kernels was executing on the GPU", the period lasting 1/6 s to 1 s
by product (NVML's nvmlUtilization_t). A kernel that keeps one of 132 SMs busy counts as 100 %:
utilisation says the GPU was *busy*, not that it was used *well*; MFU says that.

On a CPU: the process's CPU time (all its threads, ``os.times``) over the wall time, per
thread PyTorch computes with (``torch.get_num_threads()``); 100 % means those threads were on
a core all the time, whatever they did there, and the process's other threads (this sampler's,
a loader's) can take it a little above 100 %. Memory is the process's resident set (psutil).
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from dataclasses import dataclass

import torch

NVML_DOC = ("NVML's definition (nvmlUtilization_t, https://docs.nvidia.com/deploy/nvml-api/"
            "structnvmlUtilization__t.html): \"Percent of time over the past sample period during which "
            "one or more kernels was executing on the GPU\"; \"Each sample period may be between 1 second "
            "and 1/6 second, depending on the product being queried.\"")


@dataclass(frozen=True)
class Sample:
    """One reading, `t_s` seconds after the sampler started."""

    t_s: float
    busy_pct: float  # GPU: NVML utilisation; CPU: CPU time / (wall time × torch's threads)
    memory_bytes: int | None  # GPU: device memory used (NVML, all processes); CPU: resident set
    power_w: float | None = None  # GPU only
    sm_clock_mhz: float | None = None  # GPU only


def why_not(dev: torch.device | str) -> str:
    """'' when utilisation can be read on `dev`; otherwise one sentence saying why not and
    what to do."""
    dev = torch.device(dev)
    if dev.type == "cpu":
        return ""
    if dev.type != "cuda":
        return f"Utilisation is read on NVIDIA GPUs (NVML) and on the CPU, not on {dev.type}."
    try:
        torch.cuda.utilization(dev)
    except ModuleNotFoundError:
        return ("GPU utilisation is read through NVML, whose Python package is missing here: "
                "`pip install nvidia-ml-py` adds it.")
    except Exception as exc:  # NVML without a driver, or a GPU it does not report on
        return f"NVML could not read this GPU's utilisation ({type(exc).__name__}: {exc})."
    return ""


def readable(dev: torch.device | str) -> str:
    """What :class:`Sampler` reads on `dev`, in one line, or why it cannot (:func:`why_not`)."""
    if why := why_not(dev):
        return f"cannot be read: {why}"
    if torch.device(dev).type == "cuda":
        return "GPU-Util, memory used, power and SM clock, from NVML (nvidia-ml-py)"
    return (f"CPU time of this process per thread torch uses ({torch.get_num_threads()}), from os.times "
            "(its other threads can take it past 100 %); memory: its resident set (psutil)")


def _memory_bytes() -> int | None:
    try:
        import psutil
    except ModuleNotFoundError:
        return None
    return psutil.Process().memory_info().rss


class Sampler:
    """Read utilisation, memory (and on a GPU power and SM clock) every `interval_s` seconds in a
    daemon thread, between :meth:`start` and :meth:`stop` (or in a ``with`` block).

    ``with utilisation.Sampler(dev) as s: train()`` then ``s.samples``, ``s.busy()``. A sampler
    that cannot read (:func:`why_not`) raises on start; :meth:`stop` joins the thread."""

    def __init__(self, dev: torch.device | str, interval_s: float = 0.1) -> None:
        self.dev = torch.device(dev)
        self.interval_s = interval_s
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> Sampler:
        if why := why_not(self.dev):
            raise RuntimeError(why)
        if self._thread is not None:
            raise RuntimeError("This sampler is running or has run: make a new one.")
        self._t0 = time.perf_counter()
        self._last = (self._t0, self._cpu_s())
        self._thread = threading.Thread(target=self._run, name="utilisation-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> list[Sample]:
        """Stop sampling, take one last reading, and return the samples."""
        if self._thread is not None and self._thread.is_alive():
            self._stop.set()
            self._thread.join()
            self.samples.append(self.read())
        return self.samples

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.samples.append(self.read())

    @staticmethod
    def _cpu_s() -> float:
        t = os.times()
        return t.user + t.system

    def read(self) -> Sample:
        """One reading now (on a CPU: since the previous reading)."""
        now = time.perf_counter()
        if self.dev.type == "cuda":
            return Sample(now - self._t0, float(torch.cuda.utilization(self.dev)),
                          int(torch.cuda.device_memory_used(self.dev)),
                          torch.cuda.power_draw(self.dev) / 1000, float(torch.cuda.clock_rate(self.dev)))
        cpu = self._cpu_s()
        (t_prev, cpu_prev), self._last = self._last, (now, cpu)
        busy = 100 * (cpu - cpu_prev) / max(now - t_prev, 1e-9) / torch.get_num_threads()
        return Sample(now - self._t0, busy, _memory_bytes())

    def busy(self, after_s: float = 0.0) -> tuple[float, float, float]:
        """Median and quartiles of the utilisation samples taken `after_s` seconds or more after
        the start (a GPU's first reading can cover time before it)."""
        values = [s.busy_pct for s in self.samples if s.t_s >= after_s]
        if not values:
            raise ValueError(f"No sample {after_s:g} s or more after the start: sample for longer.")
        if len(values) < 3:
            return statistics.median(values), min(values), max(values)
        q1, med, q3 = statistics.quantiles(values, n=4, method="inclusive")
        return med, q1, q3

    def latest(self) -> Sample | None:
        """The newest reading, None before the first."""
        return self.samples[-1] if self.samples else None
