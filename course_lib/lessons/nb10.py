"""Notebook 10 (torch.compile and the profiler): the exercise checks."""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from course_lib import check
from course_lib.models import GPT, GPTConfig
from course_lib.profiling import SyncCounter
from course_lib.roofline import count_ops


@check.exercise()
def check_arithmetic_intensity(add_fn: Callable[[int], float],
                         matmul_fn: Callable[[int, int, int, int], float]) -> None:
    """Exercise (roofline): `add_fn(n)` must give the FLOPs per byte of ``a + b`` for two
    float32 vectors of n elements, `matmul_fn(m, k, n, nbytes)` those of an (m, k) @ (k, n)
    matmul of `nbytes`-byte elements; both compared with what ``roofline.count_ops``
    counts for the real ops (PyTorch's FLOP formulas, each operand's bytes once)."""
    for n in (1000, 1 << 16):
        a, b = torch.randn(n), torch.randn(n)
        (op,) = count_ops(lambda: a + b)
        got = add_fn(n)
        if abs(got - op.intensity) > 1e-9 * op.intensity:
            raise AssertionError(f"a + b, {n:,} float32 elements: got {got:.6g} FLOP/B; the op does "
                                 f"{op.flops:,.0f} FLOPs and moves {op.bytes:,.0f} bytes: {op.intensity:.6g}")
    for m, k, n, dtype in ((64, 32, 16, torch.float32), (128, 128, 128, torch.bfloat16), (1, 256, 64, torch.float64)):
        a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
        (op,) = count_ops(lambda: a @ b)
        size = a.element_size()
        got = matmul_fn(m, k, n, size)
        if abs(got - op.intensity) > 1e-9 * op.intensity:
            raise AssertionError(f"({m}, {k}) @ ({k}, {n}), {size}-byte elements: got {got:.6g} FLOP/B; the op "
                                 f"does {op.flops:,.0f} FLOPs and moves {op.bytes:,.0f} bytes: {op.intensity:.6g}")
    check.passed("arithmetic intensity of a + b (2 sizes) and of matmuls (3 shapes, float32, bfloat16, float64)")


@check.exercise()
def check_no_sync_loop(fn: Callable, reference: Callable) -> None:
    """Exercise (profiler): `fn(model, opt, batches)` must train as `reference` does and
    return the losses as one tensor, with no call that makes the host wait for the device
    inside it (``profiling.SyncCounter``); run on a small GPT, 3 steps each."""
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 256, (3, 4, 17), generator=g)
    batches = [(t[:, :-1], t[:, 1:]) for t in tokens]  # 3 steps of (4, 16) tokens

    def fresh() -> tuple[nn.Module, torch.optim.Optimizer]:
        torch.manual_seed(0)
        model = GPT(GPTConfig(block_size=16, n_layer=1, n_head=2, n_embd=32))
        return model, torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)  # no host-side step count

    want = torch.tensor(reference(*fresh(), batches))
    with SyncCounter() as counter:
        got = fn(*fresh(), batches)
    if counter.count:
        raise AssertionError(f"{counter.count} synchronising calls in 3 steps: {sorted(set(counter.calls))} "
                             f"(a value read on the host: .item(), bool(), float(), an if on a tensor …)")
    if not isinstance(got, torch.Tensor):
        raise AssertionError(f"return the losses as one tensor (torch.stack), got {type(got).__name__}")
    check.close(got.reshape(-1), want, what="losses of 3 steps, without syncs vs the given loop", atol=1e-6, rtol=1e-5)
