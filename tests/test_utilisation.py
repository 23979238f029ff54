"""course_lib.utilisation: the sampler starts, reads, stops without leaving its thread, and
says in one sentence when a GPU's utilisation cannot be read."""

import threading
import time

import pytest
import torch

from course_lib import utilisation


def _sampler_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "utilisation-sampler"]


def _work(seconds: float) -> None:
    a = torch.randn(256, 256)
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        a = (a @ a).clamp_(-1, 1)


def test_cpu_sampler_reads_busy_work_above_sleep_and_stops_its_thread():
    assert utilisation.why_not("cpu") == ""
    with utilisation.Sampler("cpu", interval_s=0.05) as idle:
        time.sleep(0.4)
    with utilisation.Sampler("cpu", interval_s=0.05) as busy:
        assert busy.running and len(_sampler_threads()) == 1
        _work(0.4)
    assert not busy.running and _sampler_threads() == []
    assert len(busy.samples) >= 3 and all(s.memory_bytes and s.memory_bytes > 0 for s in busy.samples)
    assert busy.busy()[0] > idle.busy()[0]  # a loop of matmuls keeps the threads busier than sleep
    med, lo, hi = busy.busy()
    assert lo <= med <= hi
    with pytest.raises(ValueError):
        busy.busy(after_s=1e6)
    with pytest.raises(RuntimeError):
        busy.start()  # one run per sampler


def test_stop_is_safe_twice_and_before_start():
    s = utilisation.Sampler("cpu", interval_s=0.05)
    assert s.stop() == [] and s.latest() is None
    s.start()
    deadline = time.monotonic() + 30  # one reading by the thread, however busy the machine
    while not s.samples and time.monotonic() < deadline:
        time.sleep(0.01)
    n = len(s.stop())
    assert n >= 2 and len(s.stop()) == n and s.latest() is s.samples[-1]


@pytest.mark.parametrize("error, says", [(ModuleNotFoundError("no pynvml"), "nvidia-ml-py"),
                                         (RuntimeError("driver"), "NVML")])
def test_gpu_without_nvml_is_one_sentence_and_no_thread(monkeypatch, error, says):
    def fail(dev=None):
        raise error
    monkeypatch.setattr(torch.cuda, "utilization", fail)
    why = utilisation.why_not("cuda:0")
    assert says in why and why.count("\n") == 0
    with pytest.raises(RuntimeError, match=says):
        utilisation.Sampler("cuda:0").start()
    assert _sampler_threads() == []


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_sampler_reads_nvml():
    if why := utilisation.why_not("cuda"):
        pytest.skip(why)
    with utilisation.Sampler("cuda", interval_s=0.05) as s:
        a = torch.randn(4096, 4096, device="cuda")
        for _ in range(200):
            a = (a @ a).clamp_(-1, 1)
        torch.cuda.synchronize()
    assert s.samples and all(0 <= x.busy_pct <= 100 and x.memory_bytes > 0 for x in s.samples)
    assert max(x.busy_pct for x in s.samples) > 0
