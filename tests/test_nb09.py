"""course_lib.lessons.nb09: notebook 09's exercise checks accept the answer and refuse wrong ones."""

import pytest
import torch

from course_lib.lessons import nb09
from course_lib import memory
from course_lib.memory import MemoryEstimate

pytestmark = pytest.mark.versioned  # activation checkpointing, saved tensors: make test-oldest runs it


def test_adamw_state_bytes_exercise():
    nb09.check_adamw_state_bytes(lambda m: sum(2 * p.nbytes + 4 for p in m.parameters() if p.requires_grad))
    with pytest.raises(AssertionError, match="step count"):  # the 4-byte step forgotten
        nb09.check_adamw_state_bytes(lambda m: sum(2 * p.nbytes for p in m.parameters() if p.requires_grad))
    with pytest.raises(AssertionError):  # frozen parameters counted
        nb09.check_adamw_state_bytes(lambda m: sum(2 * p.nbytes + 4 for p in m.parameters()))


def test_saved_bytes_linear_gelu_exercise():
    size = lambda dtype: torch.empty(0, dtype=dtype).element_size()  # noqa: E731
    nb09.check_saved_bytes_linear_gelu(lambda b, i, o, d: b * (i + o) * size(d))
    with pytest.raises(AssertionError):  # the linear's input forgotten
        nb09.check_saved_bytes_linear_gelu(lambda b, i, o, d: b * o * size(d))
    with pytest.raises(AssertionError):  # float32 assumed
        nb09.check_saved_bytes_linear_gelu(lambda b, i, o, d: b * (i + o) * 4)


MiB = 2**20


def test_estimate_at_peak_names_the_terms_that_stand_in_for_each_other():
    est = MemoryEstimate(params=3 * MiB, grads=3 * MiB, optimizer=6 * MiB, activations=40 * MiB)
    at_peak = {"parameter": 3 * MiB, "optimizer state": 6 * MiB, "input": 0, "activation": 40 * MiB,
               "gradient": 0, "autograd detail": 4 * MiB, "unknown": 0}
    rows, said = nb09.estimate_at_peak(est, at_peak, "backward 2")
    assert rows[-1] == ("total", 52 * MiB, 53 * MiB)
    assert ("gradients / gradient", 3 * MiB, 0) in rows
    assert ("(no term) / autograd detail", None, 4 * MiB) in rows
    assert not any("unknown" in name or "input" in name for name, _, _ in rows)  # nothing live: no row
    assert "parameters, optimizer state and activations match" in said
    assert "gradients (3.0 MiB) are not live at all" in said
    assert "nearly cancel" in said and "-1.9 %" in said


def test_estimate_at_peak_when_every_term_is_live():
    est = MemoryEstimate(params=MiB, grads=MiB, optimizer=2 * MiB, activations=10 * MiB)
    at_peak = {"parameter": MiB, "gradient": MiB, "optimizer state": 2 * MiB, "activation": 10 * MiB}
    rows, said = nb09.estimate_at_peak(est, at_peak, "backward 1")
    assert rows[-1] == ("total", 14 * MiB, 14 * MiB)
    assert "Every term is live at the peak as estimated" in said and "cancel" not in said


def test_estimate_at_peak_does_not_call_a_lopsided_error_a_cancellation():
    est = MemoryEstimate(params=MiB, grads=MiB, optimizer=2 * MiB, activations=10 * MiB)
    at_peak = {"parameter": MiB, "gradient": 0, "optimizer state": 2 * MiB, "activation": 4 * MiB,
               "temporary": MiB // 2}
    _, said = nb09.estimate_at_peak(est, at_peak, "forward 2")
    assert "of its activations (10.0 MiB), 4.0 MiB are live" in said
    assert "temporary (512.0 KiB) is live and has no term" in said
    assert "cancel" not in said and "7.0 MiB estimated but not live" in said


def test_largest_moment_holds_two_gpts_with_their_adamw_state_at_once():
    from course_lib import memory, models

    cfg = models.GPTConfig(vocab_size=256, block_size=8, n_layer=2, n_head=2, n_embd=32)
    x, y = torch.randint(0, 256, (2, 1, 8))
    weights = sum(p.nbytes for p in models.GPT(cfg).parameters())
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    peak = memory.peak_memory(lambda: nb09.largest_moment(cfg, x, y, None, scaler), "cpu").peak_bytes
    assert peak >= 6 * weights  # 2 GPTs × (weights + AdamW's 2 moments): one at a time would stay near 4.5×


def test_explore_estimates_any_size_and_measures_only_small_ones():
    from course_lib.models import GPT2_SMALL, GPTConfig
    big = nb09.estimate_table(GPT2_SMALL, 8, "bf16 weights", "sgd", "cpu", measure_up_to=64 * MiB)
    assert "124.4 M parameters" in big and "not run" in big  # nothing allocated for 124 M
    small = nb09.estimate_table(GPTConfig(vocab_size=64, block_size=32, n_layer=2, n_head=2, n_embd=32),
                                4, "fp32", "adamw", "cpu", measure_up_to=64 * MiB)
    assert "measured peak" in small and "estimate" in small
    with pytest.raises(ValueError, match="precision"):
        nb09.estimate_table(GPT2_SMALL, 1, "fp8", device="cpu")


def test_fp16_autocast_is_estimated_and_explored_like_bf16():
    """fp16 autocast (a T4's 16-bit format) saves the same bytes as bf16: both are 2-byte formats; estimate_table
    names it and measures it with a GradScaler."""
    from course_lib.models import GPT, GPTConfig
    cfg = GPTConfig(vocab_size=64, block_size=32, n_layer=2, n_head=2, n_embd=32)
    torch.manual_seed(0)
    model, idx = GPT(cfg), torch.randint(0, 64, (4, 32))
    bf16, fp16, fp32 = (memory.estimate_training_memory(model, idx, amp=amp)
                        for amp in (torch.bfloat16, torch.float16, None))
    assert fp16.activations == bf16.activations != fp32.activations
    assert "fp16 autocast" in nb09.PRECISIONS
    out = nb09.estimate_table(cfg, 4, "fp16 autocast", "adamw", "cpu", measure_up_to=64 * MiB)
    assert "fp16 autocast" in out and "measured peak" in out
