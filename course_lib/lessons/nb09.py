"""Notebook 09 (memory): the exercise checks."""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from course_lib import check
from course_lib.memory import activation_bytes


@check.exercise()
def check_adamw_state_bytes(fn: Callable[[nn.Module], int]) -> None:
    """Exercise (memory): `fn(model)` must give the bytes of AdamW's state once it has
    stepped: compared with a real (non-fused) AdamW's state tensors on 3 models."""
    models = [nn.Linear(100, 10), nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)),
              nn.Sequential(nn.Embedding(50, 16), nn.LayerNorm(16)).to(torch.bfloat16)]
    models[1][0].bias.requires_grad_(False)  # a frozen parameter has no gradient and no state
    for model in models:
        opt = torch.optim.AdamW((p for p in model.parameters() if p.requires_grad), foreach=False)
        for p in model.parameters():
            if p.requires_grad:
                p.grad = torch.zeros_like(p)
        opt.step()
        want = sum(t.nbytes for s in opt.state.values() for t in s.values() if torch.is_tensor(t))
        got = fn(model)
        if got != want:
            hint = " (each parameter also has a 4-byte float32 step count)" if got + 4 * len(opt.state) == want else ""
            raise AssertionError(f"AdamW state of {model}: got {got:,} bytes, the optimizer holds {want:,}{hint}")
    check.passed(f"AdamW state bytes on {len(models)} models (a frozen bias and bf16 weights included)")


@check.exercise()
def check_saved_bytes_linear_gelu(fn: Callable[[int, int, int, torch.dtype], int]) -> None:
    """Exercise (memory): `fn(batch, in_features, out_features, dtype)` must give the bytes
    autograd saves for backward in ``gelu(linear(x))``, x of shape (batch, in_features) and
    requiring grad, the layer in `dtype`; compared with what saved_tensors_hooks sees."""
    for batch, n_in, n_out, dtype in [(8, 16, 32, torch.float32), (64, 100, 10, torch.float32),
                                      (32, 64, 256, torch.bfloat16), (1, 5, 7, torch.float64)]:
        net = nn.Sequential(nn.Linear(n_in, n_out, dtype=dtype), nn.GELU())
        x = torch.randn(batch, n_in, dtype=dtype, requires_grad=True)
        want, got = activation_bytes(net, x), fn(batch, n_in, n_out, dtype)
        if got != want:
            raise AssertionError(f"gelu(linear(x)), x {batch}×{n_in}, {n_out} outputs, {dtype}: got "
                                 f"{got:,} bytes, autograd saves {want:,}")
    check.passed("bytes saved by gelu(linear(x)) on 4 shapes and dtypes")
