"""Tests for course_lib.memory: CPU and CUDA tracking, estimator, fitting a batch."""

import os

import pytest
import torch
from torch import nn

from course_lib import memory

MiB = 2**20
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def conv_net() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
                         nn.Flatten(), nn.Linear(64 * 32 * 32, 10))


def train_step(model: nn.Module, batch: int, device: str = "cpu") -> None:
    x = torch.randn(batch, 3, 32, 32, device=device)
    model(x).sum().backward()


def alloc_mib(n: int, device: str = "cpu") -> None:
    x = torch.empty(n * MiB, dtype=torch.uint8, device=device)
    x.fill_(1)


def test_cpu_peak_grows_with_batch():
    model = conv_net()
    small = memory.peak_memory(lambda: train_step(model, 16), "cpu")
    large = memory.peak_memory(lambda: train_step(model, 64), "cpu")
    assert small.method == "profiler memory events" and small.reserved_bytes is None
    assert 4 * MiB < small.peak_bytes < large.peak_bytes
    assert large.peak_bytes > 2 * small.peak_bytes  # activations scale with the batch


def test_known_allocation_measured_within_10_percent():
    reading = memory.peak_memory(lambda: alloc_mib(64), "cpu")
    assert reading.peak_bytes == pytest.approx(64 * MiB, rel=0.10)
    assert str(reading) == "64.0 MiB peak (profiler memory events, cpu)"


def test_peak_is_the_highest_running_total_not_the_sum_or_the_end():
    def pattern() -> None:  # 8, then 4 (12 live), free the 8 (4 live), then 2 (6 live)
        a = torch.empty(8 * MiB, dtype=torch.uint8).fill_(1)
        b = torch.empty(4 * MiB, dtype=torch.uint8).fill_(1)
        del a
        c = torch.empty(2 * MiB, dtype=torch.uint8).fill_(1)
        del b, c

    reading = memory.peak_memory(pattern, "cpu")
    assert reading.peak_bytes == pytest.approx(12 * MiB, abs=MiB // 4)  # not 14 (sum), not 6 (end)


def test_a_freed_block_does_not_count_towards_a_later_peak():
    def pattern() -> None:  # 16 allocated and freed, then 4 and 2: peak 16, not 22
        alloc_mib(16)
        a = torch.empty(4 * MiB, dtype=torch.uint8).fill_(1)
        b = torch.empty(2 * MiB, dtype=torch.uint8).fill_(1)
        del a, b

    assert memory.peak_memory(pattern, "cpu").peak_bytes == pytest.approx(16 * MiB, abs=MiB // 4)


def test_peak_is_relative_to_memory_live_at_start():
    already_live = torch.ones(32 * MiB // 4)  # 32 MiB that exists before the block
    with memory.track("cpu") as reading:
        y = already_live * 2  # +32 MiB
        del y
        alloc_mib(8)
    assert reading.peak_bytes == pytest.approx(32 * MiB, rel=0.10)
    assert memory.peak_memory(lambda: None, "cpu").peak_bytes == 0


def test_tracking_survives_an_exception_in_the_block():
    with pytest.raises(ZeroDivisionError):
        memory.peak_memory(lambda: 1 / 0, "cpu")
    # the profiler was stopped: a second measurement works
    assert memory.peak_memory(lambda: alloc_mib(4), "cpu").peak_bytes == pytest.approx(4 * MiB, rel=0.10)


def test_profiler_noise_stays_out_of_stderr_and_fd2_is_restored(capfd):
    memory.peak_memory(lambda: train_step(conv_net(), 2), "cpu")
    err = capfd.readouterr().err
    assert "USDT" not in err and "gpuGetDeviceCount" not in err and "profiler" not in err
    os.write(2, b"fd 2 works again\n")
    assert "fd 2 works again" in capfd.readouterr().err


def test_unsupported_device_is_one_clear_error():
    with pytest.raises(ValueError, match="'cuda' and 'cpu'"):
        memory.track("meta")


def test_estimator_is_exact_for_a_linear_layer():
    layer = nn.Linear(1000, 100)
    n_bytes = (1000 * 100 + 100) * 4
    est = memory.estimate_training_memory(layer, (8, 1000), optimizer="adamw")
    assert est.params == est.grads == n_bytes
    opt = torch.optim.AdamW(layer.parameters())
    layer(torch.randn(8, 1000)).sum().backward()
    opt.step()
    real_state = sum(t.nbytes for s in opt.state.values() for t in s.values() if torch.is_tensor(t))
    assert est.optimizer == real_state == 2 * n_bytes + 2 * 4  # exp_avg, exp_avg_sq, step
    assert est.activations == 8 * 1000 * 4  # the input, saved for the weight gradient
    assert est.total == 4 * n_bytes + 8 + 8 * 1000 * 4


def test_estimator_sgd_variants_and_frozen_params():
    layer = nn.Linear(10, 10)
    layer.bias.requires_grad_(False)
    assert memory.estimate_training_memory(layer, (2, 10), optimizer="sgd").optimizer == 0
    est = memory.estimate_training_memory(layer, (2, 10), optimizer="sgd_momentum")
    assert est.grads == est.optimizer == 100 * 4  # weight only: the bias is frozen
    assert est.params == 110 * 4


def test_estimator_activations_and_amp():
    mlp = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10))
    fp32 = memory.estimate_training_memory(mlp, (64, 256))
    assert fp32.activations == (64 * 256 + 64 * 512) * 4  # input + ReLU output (shared with Linear 2)
    bf16 = memory.estimate_training_memory(mlp, torch.randn(64, 256), amp=torch.bfloat16)
    assert bf16.activations < 0.6 * fp32.activations
    table = str(fp32)
    assert "activations" in table and "total" in table and "KiB" in table


def test_estimator_rejects_unknown_optimizer():
    with pytest.raises(ValueError, match="Unknown optimizer 'lion'"):
        memory.estimate_training_memory(nn.Linear(2, 2), (1, 2), optimizer="lion")


def test_fit_batch_halves_until_a_step_fits_and_says_so(capsys):
    tried = []

    def try_fn(batch: int) -> None:
        tried.append(batch)
        if batch > 40:
            raise torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {batch} MiB")

    assert memory.fit_batch(try_fn, 128, device="cpu") == 32
    assert tried == [128, 64, 32]
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and out[0].startswith("Batch 128 ran out of memory on cpu") and "64" in out[0]
    tried.clear()
    assert memory.fit_batch(try_fn, 16, device="cpu") == 16 and tried == [16]  # one call
    assert capsys.readouterr().out == ""  # nothing to say when it fits


def test_fit_batch_survives_a_real_cpu_out_of_memory_error(capsys):
    def try_fn(batch: int) -> None:  # beyond batch 4 it asks the CPU allocator for 2**60 bytes
        torch.empty(2**60 if batch > 4 else batch, dtype=torch.uint8)

    with pytest.raises(RuntimeError) as err:
        try_fn(8)
    assert memory.is_oom(err.value) and not memory.is_oom(KeyError("x"))
    assert memory.fit_batch(try_fn, 16, device="cpu") == 4
    assert len(capsys.readouterr().out.splitlines()) == 2  # 16 -> 8 -> 4


def test_fit_batch_gives_up_at_one_and_reraises_other_errors():
    def oom(batch: int) -> None:
        raise torch.OutOfMemoryError("CUDA out of memory.")

    with pytest.raises(memory.NoBatchFits, match="Even batch size 1"):
        memory.fit_batch(oom, 4, device="cpu")
    with pytest.raises(KeyError):
        memory.fit_batch(lambda b: {}[b], 4, device="cpu")
    with pytest.raises(ValueError, match="batch >= 1"):
        memory.fit_batch(oom, 0, device="cpu")


@pytest.mark.gpu
@needs_cuda
def test_cuda_peak_of_known_allocation():
    reading = memory.peak_memory(lambda: alloc_mib(64, "cuda"), "cuda")
    assert reading.method == "cuda allocator"
    assert reading.peak_bytes == pytest.approx(64 * MiB, rel=0.10)
    assert reading.reserved_bytes >= reading.peak_bytes


@pytest.mark.gpu
@needs_cuda
def test_cuda_peak_grows_with_batch():
    model = conv_net().cuda()
    small = memory.peak_memory(lambda: train_step(model, 16, "cuda"), "cuda")
    large = memory.peak_memory(lambda: train_step(model, 64, "cuda"), "cuda")
    assert large.peak_bytes > 2 * small.peak_bytes > 0
