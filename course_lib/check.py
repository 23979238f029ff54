"""Automatic checks for exercises and in-notebook claims, with friendly messages.

Each check prints one line with what was expected and what was seen, and raises
``AssertionError`` on failure, so the notebook run (papermill, the tests) stops on it.

Exercise checks are wrapped in :func:`exercise`: in a student copy (``course student``) the
solutions are nbgrader's stubs, ``raise NotImplementedError()``, and a check on one prints
``not done yet: …`` instead of stopping the notebook.
"""

from __future__ import annotations

import contextlib
from types import TracebackType
from typing import Callable, Iterator

import torch
from torch import nn


def _ok(msg: str) -> None:
    print(f"{msg} ✓")


def unsolved(exc: BaseException) -> str | None:
    """The name of the notebook function whose stub raised `exc`, or None when `exc` is not a
    stub's: a bare ``NotImplementedError()`` (no message, as nbgrader writes it) raised by code
    defined in the notebook (module ``__main__``). PyTorch's own NotImplementedErrors carry a
    message and are raised in its modules: they are real errors."""
    if type(exc) is not NotImplementedError or exc.args:
        return None
    tb: TracebackType | None = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None or tb.tb_frame.f_globals.get("__name__") != "__main__":
        return None
    return tb.tb_frame.f_code.co_name


@contextlib.contextmanager
def exercise() -> Iterator[None]:
    """Run an exercise's check; an exercise not done yet prints one sentence and the notebook
    runs on. As a block, ``with check.exercise(): ...``, or on a check function, ``@exercise()``.
    Any other error, a failed check included, propagates."""
    try:
        yield
    except NotImplementedError as exc:
        name = unsolved(exc)
        if name is None:
            raise
        where = "this cell" if name == "<module>" else f"`{name}`"
        print(f"not done yet: {where} still raises NotImplementedError; write your code in its "
              "place and run the cell again.")


def expect(what: str, got: object, expected: object) -> None:
    """Assert equality: ``trainable parameters: 1,234 expected 1,234 ✓``."""
    g = f"{got:,}" if isinstance(got, int) and not isinstance(got, bool) else got
    e = f"{expected:,}" if isinstance(expected, int) and not isinstance(expected, bool) else expected
    if got != expected:
        raise AssertionError(f"{what}: got {g}, expected {e}")
    _ok(f"{what}: {g} expected {e}")


def close(got: torch.Tensor, expected: torch.Tensor, *, what: str,
          atol: float = 1e-6, rtol: float = 1e-5) -> None:
    """Assert ``|got - expected| <= atol + rtol·|expected|`` on every element (``torch.allclose``).

    The line printed names what the tolerance bounds: the largest difference, and the worst
    element's difference as a share of the error it is allowed there, e.g.
    ``gradients, 4 micro-batches vs one batch: max |Δ| 2.2e-07; |Δ| ≤ atol 2e-06 + rtol
    1e-05·|expected| on all 1,234 elements, worst at 11% of its allowance ✓``.
    """
    if got.shape != expected.shape:
        raise AssertionError(f"{what}: shape {tuple(got.shape)} != {tuple(expected.shape)}")
    g, e = got.detach().cpu().double(), expected.detach().cpu().double()  # no fp64 copy on the GPU
    diff = (g - e).abs()
    allowed = atol + rtol * e.abs()
    n = diff.numel()
    max_abs = diff.max().item() if n else 0.0
    share = (diff / allowed.clamp_min(1e-300)).nan_to_num(nan=float("inf"))
    share = share.masked_fill(g == e, 0.0)  # equal, infinities included, as allclose has it
    worst = share.max().item() if n else 0.0
    bound = f"|Δ| ≤ atol {atol:g} + rtol {rtol:g}·|expected|"
    if not torch.allclose(g, e, atol=atol, rtol=rtol):
        over = int((share > 1).sum())
        raise AssertionError(f"{what}: max |Δ| {max_abs:.2e}; {bound} fails on {over:,} of {n:,} "
                             f"elements, worst at {worst:.3g}× its allowance — not close")
    _ok(f"{what}: max |Δ| {max_abs:.2e}; {bound} on all {n:,} elements, "
        f"worst at {worst:.0%} of its allowance")


def allocated(what: str, measured: int, expected: int, tensors: int, device: torch.device | str) -> None:
    """Assert that memory measured for `tensors` tensors matches the bytes `expected` of them
    (already rounded to the CUDA allocator's 512-byte blocks). A CPU allocates exactly what is
    asked. The CUDA caching allocator may hand a tensor over 1 MiB a cached block up to 1 MiB
    larger (it splits a block only when the rest is over 1 MiB), so there `measured` may
    exceed `expected` by at most 1 MiB per tensor, never fall short."""
    if torch.device(device).type != "cuda":
        expect(what, measured, expected)
        return
    slack = measured - expected
    if not 0 <= slack <= tensors * 2**20:
        raise AssertionError(f"{what}: measured {measured:,} bytes, expected {expected:,} plus at most "
                             f"1 MiB of block tail for each of {tensors} tensors")
    _ok(f"{what}: {measured:,} bytes, {expected:,} expected + {slack:,} of the allocator's block tails")


def between(what: str, got: float, low: float, high: float, unit: str = "") -> None:
    """Assert ``low <= got <= high``."""
    if not low <= got <= high:
        raise AssertionError(f"{what}: {got:.4g} {unit} is outside [{low:g}, {high:g}]")
    _ok(f"{what}: {got:.4g} {unit} in [{low:g}, {high:g}]")


@exercise()
def flop_count(fn: Callable[[int, int, int], float]) -> None:
    """Exercise (01): `fn(m, k, n)` must return the FLOPs of an (m×k) @ (k×n) matmul."""
    for m, k, n in [(1, 1, 1), (2, 3, 4), (128, 64, 32), (4096, 4096, 4096)]:
        got, want = fn(m, k, n), 2 * m * k * n
        if got != want:
            hint = " (a multiply-add is 2 FLOPs)" if got * 2 == want else ""
            raise AssertionError(f"flops({m}, {k}, {n}) = {got:,}, expected {want:,}{hint}")
    _ok("flop count for (m×k) @ (k×n): 2·m·k·n on 4 shapes")


@exercise()
def transfer_time(fn: Callable[[int, float], float]) -> None:
    """Exercise (01): `fn(nbytes, gb_per_s)` must return seconds to copy `nbytes` at that rate."""
    for nbytes, rate in [(10**9, 10.0), (256 * 2**20, 25.0), (1, 1.0)]:
        got, want = fn(nbytes, rate), nbytes / (rate * 1e9)
        if abs(got - want) > 1e-9 + 1e-6 * want:
            raise AssertionError(f"transfer({nbytes:,} B, {rate} GB/s) = {got:.3g} s, expected {want:.3g} s")
    _ok("transfer time = bytes / (GB/s · 1e9) on 3 cases")


@exercise()
def gpt_forward_flops_per_token(fn: Callable[[int, int, int, int], float]) -> None:
    """Exercise (GPT training): `fn(n_params, n_layer, block_size, n_embd)` must give the FLOPs
    per token of a GPT's forward pass over a full context (inference without a KV cache) to
    within 3 % of what FlopCounterMode counts in a forward pass of small GPTs (biases and
    LayerNorms are the difference)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from course_lib.attention import counted_flops
    from course_lib.models import GPT, GPTConfig

    g = torch.Generator().manual_seed(0)  # the learner's random stream is left alone
    for layers, heads, width, t in [(2, 4, 64, 32), (3, 2, 128, 64), (1, 4, 64, 256)]:
        with torch.random.fork_rng():
            model = GPT(GPTConfig(vocab_size=128, block_size=t, n_layer=layers, n_head=heads,
                                  n_embd=width))
        idx = torch.randint(0, 128, (2, t), generator=g)
        with sdpa_kernel(SDPBackend.MATH), torch.no_grad():  # a kernel every PyTorch's counter counts
            counted = counted_flops(lambda: model(idx)) / idx.numel()
        got = fn(model.num_params(), layers, t, width)
        if not abs(got - counted) <= 0.03 * counted:
            hint = (" (that is forward + backward, training's count: the forward pass is a third of it)"
                    if abs(got - 3 * counted) <= 0.09 * counted else "")
            raise AssertionError(f"forward FLOPs per token, {layers} layers of width {width}, T={t}: got "
                                 f"{got:,.0f}, FlopCounterMode counts {counted:,.0f} (allowed: ±3 %){hint}")
    _ok(f"forward FLOPs per token within 3 % of FlopCounterMode on 3 GPTs (last: {got:,.0f} vs {counted:,.0f})")


@exercise()
def accum_steps(fn: Callable[[int, int, int, int], int]) -> None:
    """Exercise (GPT training): `fn(target_tokens, micro_batch, block_size, world_size)` must
    give the fewest micro-batches per optimizer step that reach `target_tokens` per step."""
    cases = [(524_288, 16, 1024, 1), (524_288, 16, 1024, 8), (500_000, 12, 1024, 1),
             (4096, 16, 128, 1), (1000, 64, 128, 1), (524_288, 64, 1024, 16)]
    for target, micro, t, world in cases:
        want = -(-target // (micro * t * world))  # ceiling division
        got = fn(target, micro, t, world)
        if got != want:
            raise AssertionError(f"target {target:,} tokens, micro-batch {micro} × {t} tokens on "
                                 f"{world} GPU(s): got {got}, expected {want} micro-batches "
                                 f"({want * micro * t * world:,} tokens per step)")
    _ok(f"accumulation steps on {len(cases)} cases (GPT-2's 524,288 tokens: 32 micro-batches of 16 × 1024 on 1 GPU)")


@exercise()
def adamw_state_bytes(fn: Callable[[nn.Module], int]) -> None:
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
    _ok(f"AdamW state bytes on {len(models)} models (a frozen bias and bf16 weights included)")


@exercise()
def saved_bytes_linear_gelu(fn: Callable[[int, int, int, torch.dtype], int]) -> None:
    """Exercise (memory): `fn(batch, in_features, out_features, dtype)` must give the bytes
    autograd saves for backward in ``gelu(linear(x))``, x of shape (batch, in_features) and
    requiring grad, the layer in `dtype`; compared with what saved_tensors_hooks sees."""
    from course_lib.memory import activation_bytes

    for batch, n_in, n_out, dtype in [(8, 16, 32, torch.float32), (64, 100, 10, torch.float32),
                                      (32, 64, 256, torch.bfloat16), (1, 5, 7, torch.float64)]:
        net = nn.Sequential(nn.Linear(n_in, n_out, dtype=dtype), nn.GELU())
        x = torch.randn(batch, n_in, dtype=dtype, requires_grad=True)
        want, got = activation_bytes(net, x), fn(batch, n_in, n_out, dtype)
        if got != want:
            raise AssertionError(f"gelu(linear(x)), x {batch}×{n_in}, {n_out} outputs, {dtype}: got "
                                 f"{got:,} bytes, autograd saves {want:,}")
    _ok("bytes saved by gelu(linear(x)) on 4 shapes and dtypes")


@exercise()
def arithmetic_intensity(add_fn: Callable[[int], float],
                         matmul_fn: Callable[[int, int, int, int], float]) -> None:
    """Exercise (roofline): `add_fn(n)` must give the FLOPs per byte of ``a + b`` for two
    float32 vectors of n elements, `matmul_fn(m, k, n, nbytes)` those of an (m, k) @ (k, n)
    matmul of `nbytes`-byte elements; both compared with what ``roofline.count_ops``
    counts for the real ops (PyTorch's FLOP formulas, each operand's bytes once)."""
    from course_lib.roofline import count_ops
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
    _ok("arithmetic intensity of a + b (2 sizes) and of matmuls (3 shapes, float32, bfloat16, float64)")


@exercise()
def no_sync_loop(fn: Callable, reference: Callable) -> None:
    """Exercise (profiler): `fn(model, opt, batches)` must train as `reference` does and
    return the losses as one tensor, with no call that makes the host wait for the device
    inside it (``profiling.SyncCounter``); run on a small GPT, 3 steps each."""
    from course_lib.models import GPT, GPTConfig
    from course_lib.profiling import SyncCounter
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
    close(got.reshape(-1), want, what="losses of 3 steps, without syncs vs the given loop", atol=1e-6, rtol=1e-5)
