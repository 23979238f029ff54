"""Tests for course_lib.memory: CPU and CUDA tracking, estimator, fitting a batch."""

import os
import warnings

import pytest
import torch
from torch import nn

from course_lib import memory, oom

pytestmark = pytest.mark.versioned  # the profiler's memory events, activation checkpointing: make test-oldest runs it

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


def test_end_bytes_is_what_the_block_leaves_live():
    kept = []

    def pattern() -> None:  # 8 allocated and freed, 4 kept: peak 12, 4 live at the end
        a = torch.empty(8 * MiB, dtype=torch.uint8).fill_(1)
        kept.append(torch.empty(4 * MiB, dtype=torch.uint8).fill_(1))
        del a

    reading = memory.peak_memory(pattern, "cpu")
    assert reading.peak_bytes == pytest.approx(12 * MiB, abs=MiB // 4)
    assert reading.end_bytes == pytest.approx(4 * MiB, abs=MiB // 4)
    assert memory.peak_memory(lambda: None, "cpu").end_bytes == 0


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

    assert oom.fit_batch(try_fn, 128, device="cpu") == 32
    assert tried == [128, 64, 32]
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and out[0].startswith("Batch 128 ran out of memory on cpu") and "64" in out[0]
    tried.clear()
    assert oom.fit_batch(try_fn, 16, device="cpu") == 16 and tried == [16]  # one call
    assert capsys.readouterr().out == ""  # nothing to say when it fits


def test_fit_batch_survives_a_real_cpu_out_of_memory_error(capsys):
    def try_fn(batch: int) -> None:  # beyond batch 4 it asks the CPU allocator for 2**60 bytes
        torch.empty(2**60 if batch > 4 else batch, dtype=torch.uint8)

    with pytest.raises(RuntimeError) as err:
        try_fn(8)
    assert oom.is_oom(err.value) and not oom.is_oom(KeyError("x"))
    assert oom.fit_batch(try_fn, 16, device="cpu") == 4
    assert len(capsys.readouterr().out.splitlines()) == 2  # 16 -> 8 -> 4


def test_fit_batch_gives_up_at_one_and_reraises_other_errors():
    def runs_out(batch: int) -> None:
        raise torch.OutOfMemoryError("CUDA out of memory.")

    with pytest.raises(oom.NoBatchFits, match="Even batch size 1"):
        oom.fit_batch(runs_out, 4, device="cpu")
    with pytest.raises(KeyError):
        oom.fit_batch(lambda b: {}[b], 4, device="cpu")
    with pytest.raises(ValueError, match="batch >= 1"):
        oom.fit_batch(runs_out, 0, device="cpu")


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


# ---- per-phase tracking

def tiny_gpt_step_phases(device: str = "cpu", set_to_none: bool = True):
    """Model made inside the tracker, then two AdamW steps in named phases."""
    from course_lib.models import GPT, GPTConfig
    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=64, block_size=32, n_layer=2, n_head=2, n_embd=32)
    x = torch.randint(0, 64, (4, 32), device=device)
    with memory.PhaseTracker(device) as tracker:
        with tracker.phase("model"):
            model = GPT(cfg).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        for _ in range(2):
            with tracker.phase("forward"):
                loss = model(x).float().square().mean()
            with tracker.phase("backward"):
                loss.backward()
                del loss  # the scalar loss, 4 bytes: gone, so live bytes are exactly the gradients
            with tracker.phase("optimizer"):
                opt.step()
                opt.zero_grad(set_to_none=set_to_none)
    return tracker, model, opt


def test_phase_tracker_static_terms_are_exact_on_cpu():
    tracker, model, opt = tiny_gpt_step_phases()
    names = [p.name for p in tracker.phases]
    assert names == ["model"] + ["forward", "backward", "optimizer"] * 2
    model_p, fwd1, bwd1, opt1, fwd2, bwd2, opt2 = tracker.phases
    params = sum(p.nbytes for p in model.parameters())
    state = sum(t.nbytes for s in opt.state.values() for t in s.values() if torch.is_tensor(t))
    assert model_p.start == 0 and model_p.end == params
    assert bwd1.end - fwd1.start == params  # the gradients, same shapes as the parameters
    assert opt1.end - fwd1.start == state  # gradients freed (set_to_none), state created
    assert fwd2.start == params + state == opt2.end
    assert fwd1.peak >= fwd1.end > fwd1.start and bwd1.peak >= bwd1.start
    assert "optimizer" in tracker.table() and len(tracker.table().splitlines()) == 8


def test_zero_grad_without_set_to_none_keeps_the_gradients_live():
    tracker, model, _ = tiny_gpt_step_phases(set_to_none=False)
    params = sum(p.nbytes for p in model.parameters())
    keep = tracker.phases[4].start  # second forward starts with params + state + gradients
    tracker2, _, _ = tiny_gpt_step_phases(set_to_none=True)
    assert keep - tracker2.phases[4].start == params


def test_frees_of_tensors_made_under_an_earlier_profile_do_not_count():
    with memory.PhaseTracker("cpu"):
        old = torch.empty(8 * MiB, dtype=torch.uint8).fill_(1)  # allocated under the first profile
    with memory.PhaseTracker("cpu") as tracker:
        with tracker.phase("free the old, allocate 1 MiB"):
            del old
            new = torch.empty(MiB, dtype=torch.uint8).fill_(1)
    (p,) = tracker.phases
    assert (p.start, p.end) == (0, MiB)
    del new


def test_phases_of_reads_named_ranges_in_order():
    trace = memory.Trace(memory=[(1.0, 100), (2.0, 50), (3.0, -100), (5.0, 10), (6.0, -50)],
                         annotations=[("a", 0.5, 2.5), ("inner", 1.5, 1.6), ("a", 4.0, 6.0)])
    first, second = memory.phases_of(trace, ["a", "a"])
    assert (first.start, first.peak, first.end) == (0, 150, 150)
    assert (second.start, second.peak, second.end) == (50, 60, 10)
    with pytest.raises(ValueError, match="'b'"):
        memory.phases_of(trace, ["b"])


def test_phase_tracker_survives_an_exception():
    with pytest.raises(ZeroDivisionError):
        with memory.PhaseTracker("cpu") as tracker:
            with tracker.phase("boom"):
                1 / 0
    with memory.PhaseTracker("cpu") as tracker:  # the profiler was stopped: a new one works
        with tracker.phase("ok"):
            alloc_mib(2)
    assert tracker.phases[0].peak == pytest.approx(2 * MiB, rel=0.1)


# ---- the estimator: fused state, CUDA rounding, fake tensors, checkpointing

def test_optimizer_state_bytes_fused_and_per_device():
    layer = nn.Linear(100, 30)  # 3000 + 30 numbers
    assert memory.optimizer_state_bytes(list(layer.parameters()), "adam") == 2 * 3030 * 4 + 2 * 4
    assert memory.allocated_bytes(30 * 4, "cuda") == 512 and memory.allocated_bytes(3000 * 4, "cuda") == 12288
    assert memory.allocated_bytes(120, "cpu") == 120
    opt = torch.optim.AdamW(layer.parameters(), fused=True)
    layer(torch.randn(2, 100)).sum().backward()
    opt.step()
    real = sum(t.nbytes for s in opt.state.values() for t in s.values() if torch.is_tensor(t))
    assert memory.optimizer_state_bytes(list(layer.parameters()), "adamw", fused=True) == real


def test_estimate_under_fake_tensors_equals_the_real_one():
    from torch._subclasses.fake_tensor import FakeTensorMode

    from course_lib.models import GPT, GPTConfig
    cfg = GPTConfig(vocab_size=64, block_size=32, n_layer=2, n_head=2, n_embd=32)
    real = memory.estimate_training_memory(GPT(cfg), torch.randint(0, 64, (4, 32)), amp=torch.bfloat16)
    with FakeTensorMode():
        fake = memory.estimate_training_memory(GPT(cfg), torch.randint(0, 64, (4, 32)), amp=torch.bfloat16)
    assert fake == real


def test_loss_adds_what_it_saves():
    mlp = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 10))
    without = memory.activation_bytes(mlp, torch.randn(8, 16))
    with_loss = memory.activation_bytes(mlp, torch.randn(8, 16),
                                        loss=lambda out: out.log_softmax(-1).mean())
    assert with_loss - without == 8 * 10 * 4  # log_softmax keeps its (8, 10) float32 output


def test_checkpointed_gpt_matches_and_saves_less():
    from course_lib.models import GPT, GPTConfig
    cfg = GPTConfig(vocab_size=64, block_size=32, n_layer=3, n_head=2, n_embd=32, dropout=0.1)
    torch.manual_seed(0)
    plain = GPT(cfg)
    ckpt = GPT(GPTConfig(**{**cfg.__dict__, "checkpoint": True}))
    ckpt.load_state_dict(plain.state_dict())
    x = torch.randint(0, 64, (4, 32))
    grads = []
    for model in (plain, ckpt):
        torch.manual_seed(1)  # the same dropout masks: checkpoint replays the RNG state
        model(x).square().mean().backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    torch.testing.assert_close(grads[1], grads[0])
    saved = [memory.activation_bytes(m, x) for m in (plain, ckpt)]
    assert saved[1] < saved[0] / 2


# ---- out of memory: the largest batch, a budget, advice

@pytest.mark.parametrize("threshold", [1, 2, 3, 37, 64, 65, 100])
def test_largest_batch_finds_the_threshold_exactly(threshold):
    calls = []

    def try_fn(batch: int) -> None:
        calls.append(batch)
        if batch > threshold:
            raise torch.OutOfMemoryError("injected")

    search = oom.largest_batch(try_fn, device="cpu")
    assert search.largest == threshold and [b for b, _ in search.tried] == calls
    assert all(ok == (b <= threshold) for b, ok in search.tried)
    assert len(calls) <= 2 * threshold.bit_length() + 1
    assert f"largest batch that fits: {threshold}" in str(search)


def test_largest_batch_limit_start_and_errors():
    def over_40(batch: int) -> None:
        if batch > 40:
            raise oom.OverBudget(batch, 40)

    capped = oom.largest_batch(over_40, 8, limit=20, device="cpu")
    assert capped.largest == 20 and capped.tried == [(8, True), (16, True), (20, True)]
    assert oom.largest_batch(over_40, 100, device="cpu").largest == 40  # bisects below start
    with pytest.raises(oom.NoBatchFits):
        oom.largest_batch(lambda b: over_40(b + 100), device="cpu")
    with pytest.raises(KeyError):
        oom.largest_batch(lambda b: {}[b], device="cpu")
    with pytest.raises(ValueError):
        oom.largest_batch(over_40, 0, device="cpu")


def test_within_budget_raises_an_out_of_memory_error_with_advice():
    assert oom.within_budget(lambda: alloc_mib(1), 4 * MiB, "cpu").peak_bytes <= 4 * MiB
    with pytest.raises(torch.OutOfMemoryError) as err:
        oom.within_budget(lambda: alloc_mib(8), 4 * MiB, "cpu")
    assert isinstance(err.value, oom.OverBudget) and oom.is_oom(err.value)
    assert err.value.budget == 4 * MiB and err.value.peak >= 8 * MiB
    advice = oom.oom_advice(err.value, "cpu", batch=256)
    assert "batch 256" in advice and "4.0 MiB" in advice and "accumulation" in advice
    assert "autocast" in advice and "checkpointing" in advice
    on = oom.oom_advice(err.value, "cpu", autocast=True, checkpointing=True)
    assert "autocast" not in on and "checkpointing" not in on and "accumulation" in on


@pytest.mark.gpu
@needs_cuda
def test_cuda_phase_tracker_static_terms_are_exact():
    # Warm-up: cuBLAS takes its workspace from the caching allocator at the first matmul on a
    # stream and keeps it, which would count as memory of the measured run's first forward.
    tiny_gpt_step_phases("cuda")
    tracker, model, opt = tiny_gpt_step_phases("cuda")
    params = list(model.parameters())
    est = memory.estimate_training_memory(model, torch.randint(0, 64, (4, 32), device="cuda"))
    assert tracker.phases[0].end == est.params
    fwd1, bwd1, opt1 = tracker.phases[1:4]
    assert bwd1.end - fwd1.start == est.grads
    assert opt1.end - fwd1.start == memory.optimizer_state_bytes(params, "adamw")


def test_guard_turns_out_of_memory_into_advice_and_runs_on(capsys):
    with oom.guard("a step at batch 64", torch.device("cpu"), batch=64) as run:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    assert not run.ok and "at batch 64" in run.advice
    out = capsys.readouterr().out
    assert out.startswith("a step at batch 64: Out of memory") and "Try, in this order" in out
    with oom.guard("fits", torch.device("cpu")) as run:
        x = torch.ones(4).sum()
    assert run.ok and run.advice is None and x.item() == 4
    with pytest.raises(KeyError):  # anything but out-of-memory propagates
        with oom.guard("broken", torch.device("cpu")):
            raise KeyError("not memory")


def test_headroom_counts_the_cache_and_honours_the_cap(monkeypatch):
    """Free on the card plus PyTorch's cached blocks; under COURSE_GPU_MEMORY_GIB, the cap less what
    is allocated (a fake 16 GiB GPU: 10 GiB free, 3 GiB allocated, 5 GiB reserved)."""
    import types

    GiB = 2**30
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: types.SimpleNamespace(total_memory=16 * GiB))
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (10 * GiB, 16 * GiB))
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 3 * GiB)
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 5 * GiB)
    monkeypatch.delenv("COURSE_GPU_MEMORY_GIB", raising=False)
    assert oom.headroom("cuda") == 12 * GiB  # 10 free + 2 cached
    monkeypatch.setenv("COURSE_GPU_MEMORY_GIB", "8")  # 16 - 10 free - 5 reserved: 1 GiB outside the allocator
    assert oom.headroom("cuda") == 4 * GiB  # an 8 GiB card: 1 GiB context, 3 GiB allocated
    monkeypatch.setenv("COURSE_GPU_MEMORY_GIB", "20")
    assert oom.headroom() == 12 * GiB  # a cap above the card's size changes nothing
    monkeypatch.setenv("COURSE_GPU_MEMORY_GIB", "15.5")
    assert oom.headroom() == int(11.5 * GiB)  # 15.5 - 1 outside - 3 allocated
    monkeypatch.setenv("COURSE_GPU_MEMORY_GIB", "2")
    assert oom.headroom("cuda") == 0  # already over the cap
    with pytest.raises(ValueError, match="CUDA"):
        oom.headroom("cpu")


@pytest.mark.gpu
def test_oom_advice_names_the_simulated_card(monkeypatch):
    """Under COURSE_GPU_MEMORY_GIB the advice names the cap, not the card's full size."""
    monkeypatch.setenv("COURSE_GPU_MEMORY_GIB", "8")
    advice = oom.oom_advice(torch.OutOfMemoryError("x"), torch.device("cuda"))
    assert "a cap of 8.0 GiB" in advice or "a cap of 8 GiB" in advice


def test_oom_advice_suggests_the_16_bit_format_the_device_runs(monkeypatch):
    exc = oom.OverBudget(8 * MiB, 4 * MiB)
    assert "bf16 autocast" in oom.oom_advice(exc, "cpu")
    monkeypatch.setattr(oom, "bf16_supported", lambda device: False)  # a T4: bf16 only emulated
    advice = oom.oom_advice(exc, "cpu")
    assert "fp16 autocast" in advice and "GradScaler" in advice and "bf16" not in advice


@pytest.mark.parametrize("cls, card_gib", [("large", 36.0), ("medium", 12.0), ("small", 5.8)])
def test_09_gpu_sizes_fit_the_smallest_card_of_their_class(cls, card_gib):
    """09's largest moment (two GPTs with fp32 weights and AdamW state, one 16-bit autocast step's
    gradients and activations), estimated on fake tensors, takes at most 75 % of the smallest card of
    each size class (a 6 GB card for small), leaving room for backward's temporaries and the CUDA
    context; the out-of-memory demo's budget is at most half of the card."""
    import torch.nn.functional as F
    from torch._subclasses.fake_tensor import FakeTensorMode

    from course_lib import models, profiles
    cfg = profiles.sizes("09_memory", "gpu", memory_gib=card_gib)
    assert cfg.gpu_class == cls
    gcfg = models.GPTConfig(vocab_size=256, block_size=cfg.block, n_layer=cfg.n_layer,
                            n_head=cfg.n_head, n_embd=cfg.n_embd)
    with FakeTensorMode():
        model = models.GPT(gcfg)
        x = torch.randint(0, 256, (cfg.batch, cfg.block))
        est = memory.estimate_training_memory(model, x, "adamw", amp=torch.float16,
                                              loss=lambda logits: F.cross_entropy(logits.flatten(0, 1), x.flatten()))
    largest = 2 * (est.params + est.optimizer) + est.grads + est.activations
    GiB = 2**30
    assert largest <= 0.75 * card_gib * GiB, f"{cls}: {largest / GiB:.2f} GiB on a {card_gib} GiB card"
    assert cfg.budget_mib * MiB <= card_gib * GiB / 2  # the notebook also caps it at half its headroom
    assert cfg.alloc_mib * MiB <= card_gib * GiB / 4


def test_memory_helpers_never_reapply_the_cap(monkeypatch):
    """09 tightens the allocator's cap for its out-of-memory demo, then calls fit_batch,
    largest_batch and oom_advice on that GPU: naming the device must not reset the cap to
    COURSE_GPU_MEMORY_GIB's (device.limit_memory), or the demo searches the whole card."""
    from course_lib import device as course_device

    def reapplied(dev):
        raise AssertionError(f"limit_memory({dev}) called by a memory helper")

    monkeypatch.setattr(course_device, "limit_memory", reapplied)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(oom, "_fits", lambda try_fn, batch, dev: True)  # no CUDA call here
    for dev in ("cuda", "cuda:0", None):
        assert oom.fit_batch(lambda b: None, 4, dev) == 4
    with pytest.raises(AssertionError, match="limit_memory"):  # the notebook's own pick does apply it
        course_device.pick("cuda")


def test_guard_frees_after_dropping_what_the_failed_block_held(monkeypatch):
    """The failed step's tensors (here a stand-in) are gone when guard calls free()."""
    import weakref

    class Activations:  # a stand-in for the step's tensors
        pass

    seen = []

    def step():
        acts = Activations()
        seen.append(weakref.ref(acts))
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    alive_at_free = []
    monkeypatch.setattr(oom, "free", lambda: alive_at_free.append(seen[0]() is not None))
    with oom.guard("a step", torch.device("cpu"), quiet=True) as run:
        step()
    assert not run.ok and alive_at_free == [False]


def test_activation_bytes_leaves_no_saved_tensor_alive():
    # Tanh and Softmax save their own outputs: a pack hook that returns its input as is ties each
    # forward's graph in a reference cycle that the garbage collector cannot free (two tensors
    # of shape (32, 48) per call here, measured before the fix).
    import gc

    def alive() -> int:
        gc.collect()
        return sum(1 for o in gc.get_objects() if torch.is_tensor(o) and tuple(o.shape) == (32, 48))

    model = nn.Sequential(nn.Linear(64, 48), nn.Tanh(), nn.Linear(48, 48), nn.Softmax(-1))
    x = torch.randn(32, 64)
    before = alive()
    sizes = [memory.activation_bytes(model, x) for _ in range(3)]
    assert sizes[0] > 0 and len(set(sizes)) == 1
    assert alive() == before


def test_quiet_stderr_leaves_out_the_profilers_cycle_note_and_nothing_else():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with memory.quiet_stderr():
            warnings.warn("Warning: Profiler clears events at the end of each cycle.", UserWarning)
            warnings.warn("a warning a learner must see", UserWarning)
    assert [str(w.message) for w in caught] == ["a warning a learner must see"]
