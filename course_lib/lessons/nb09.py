"""Notebook 09 (memory): its largest moment, tried at a batch; the estimate held against what is live at
the peak; the exercise checks."""

from __future__ import annotations

from typing import Callable, Mapping

import torch
import torch.nn.functional as F
from torch import nn

from course_lib import check, memory
from course_lib.memory import MemoryEstimate, activation_bytes
from course_lib.models import GPT, GPTConfig
from course_lib.units import fmt_bytes

# Each term of memory.MemoryEstimate and the profiler's category that holds those bytes
# (course_lib.timeline names them as torch.profiler does)
TERM_CATEGORY = {"parameters": "parameter", "gradients": "gradient", "optimizer state": "optimizer state",
                 "activations": "activation"}


def largest_moment(cfg: GPTConfig, x: torch.Tensor, y: torch.Tensor, amp: torch.dtype | None,
                   scaler: torch.amp.GradScaler) -> None:
    """Notebook 09's largest moment at the batch of `x` (B, T) and targets `y`: two GPTs of `cfg`,
    each with its AdamW state after one step, held at once (section 2's GPT stays while sections 6
    and 7 train new ones), and one step's activations; `amp`: autocast's dtype, None for float32.
    Throwaway steps, which also make the kernels' workspaces and the GradScaler's scale."""
    held = []
    for _ in range(2):
        model = GPT(cfg).to(x.device)
        opt = torch.optim.AdamW(model.parameters())
        with torch.autocast(x.device.type, dtype=amp, enabled=amp is not None):
            loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        held.append((model, opt))  # kept until both have stepped


def _join(words: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return " and ".join(filter(None, [", ".join(words[:-1]), words[-1]])) if words else ""


def estimate_at_peak(est: MemoryEstimate, at_peak: Mapping[str, int], phase: str | None,
                     close: float = 0.05) -> tuple[list[tuple[str, int | None, int]], str]:
    """The estimate's terms beside the bytes live in each category at the measured peak, and
    a sentence saying which terms match (within `close` of each other) and which stand in for
    which: a term counted but not live at the peak, bytes live there that no term counts.

    `at_peak`: category -> bytes at the peak (:meth:`course_lib.timeline.Timeline.at`);
    `phase`: the phase the peak falls in (None: none named). Rows: (term / category, estimated bytes or None for
    a category the estimate has no term for, live bytes), then the totals.
    """
    estimated = dict(zip(TERM_CATEGORY, (est.params, est.grads, est.optimizer, est.activations)))
    rows: list[tuple[str, int | None, int]] = [
        (f"{term} / {cat}" if term != cat else term, estimated[term], at_peak.get(cat, 0))
        for term, cat in TERM_CATEGORY.items()]
    left_out = {cat: n for cat, n in at_peak.items() if cat not in TERM_CATEGORY.values() and n}
    rows += [(f"(no term) / {cat}", None, n) for cat, n in left_out.items()]
    live_total = sum(at_peak.values())
    rows.append(("total", est.total, live_total))

    right: list[str] = []
    over: dict[str, tuple[int, int]] = {}  # term -> (estimated, live), estimated beyond what is live
    beyond: dict[str, int] = {}  # category -> bytes live beyond its term
    for term, cat in TERM_CATEGORY.items():
        guess, live = estimated[term], at_peak.get(cat, 0)
        if abs(guess - live) <= close * max(guess, live):
            right.append(term)
        elif guess > live:
            over[term] = (guess, live)
        else:
            beyond[cat] = live - guess
    parts = [f"the estimate's {_join(right)} match what is live (within {100 * close:g} %)" if right
             else "none of the estimate's terms matches what is live"]
    parts += [f"its {t} ({fmt_bytes(g)}) {'are' if t.endswith('s') else 'is'} not live at all" if not n
              else f"of its {t} ({fmt_bytes(g)}), {fmt_bytes(n)} {'are' if t.endswith('s') else 'is'} live"
              for t, (g, n) in over.items()]
    if left_out:
        one = len(left_out) == 1
        parts.append(f"{_join([f'{cat} ({fmt_bytes(n)})' for cat, n in left_out.items()])} "
                     f"{'is' if one else 'are'} live and {'has' if one else 'have'} no term in the estimate")
    parts += [f"{cat} {fmt_bytes(n)} beyond its term" for cat, n in beyond.items()]
    said = [f"At the peak{f', during {phase!r}' if phase else ''}: " + "; ".join(parts) + "."]
    missing = sum(g - n for g, n in over.values())  # estimated but not live
    extra = sum(left_out.values()) + sum(beyond.values())  # live but not estimated
    error = 100 * (est.total - live_total) / live_total if live_total else 0.0
    if missing and extra and abs(missing - extra) <= 0.5 * max(missing, extra):
        said.append(f"The {fmt_bytes(extra)} live but not estimated stand in for the {fmt_bytes(missing)} "
                    f"estimated but not live: the total's {error:+.1f} % comes from two errors "
                    "that nearly cancel, not from every term being right.")
    elif missing or extra:
        said.append(f"The total is off by {error:+.1f} %: {fmt_bytes(missing)} estimated but not live, "
                    f"{fmt_bytes(extra)} live but not estimated.")
    else:
        said.append(f"Every term is live at the peak as estimated: the total is off by {error:+.1f} %.")
    return rows, " ".join(said)


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


# ---- the estimate of any GPT's training memory, measured where it is small (section 9's explorer) ----

PRECISIONS = ("fp32", "bf16 autocast", "fp16 autocast", "bf16 weights")
_AUTOCAST = {"bf16 autocast": torch.bfloat16, "fp16 autocast": torch.float16}


def _gpt_step(model: nn.Module, idx: torch.Tensor, opt: torch.optim.Optimizer,
              amp: torch.dtype | None, tracker: memory.PhaseTracker, scaler: torch.amp.GradScaler) -> None:
    with tracker.phase("forward"), torch.autocast(idx.device.type, dtype=amp, enabled=amp is not None):
        loss = nn.functional.cross_entropy(model(idx).flatten(0, 1).float(), idx.flatten())
    with tracker.phase("backward"):
        scaler.scale(loss).backward()  # fp16: the loss × the scale; otherwise the loss itself
        del loss
    with tracker.phase("optimizer"):
        scaler.step(opt)  # fp16: unscales, skips the step if a gradient overflowed; otherwise opt.step()
        scaler.update()
        opt.zero_grad(set_to_none=True)


def estimate_table(cfg: object, batch: int, precision: str = "fp32", optimizer: str = "adamw",
            device: torch.device | str | None = None, measure_up_to: int = 0) -> str:
    """The training-memory estimate of a GPT shaped `cfg` (a ``models.GPTConfig``) at `batch`
    sequences, as a table; beside it the measured peak of two real steps when the estimate
    is at most `measure_up_to` bytes. The estimate uses fake tensors (nothing allocated),
    so any size can be asked for. `precision`: 'fp32', 'bf16 autocast' or 'fp16 autocast' (fp32
    weights; fp16 trains with a GradScaler, whose two 4-byte tensors are left out of the estimate)
    or 'bf16 weights' (the whole model and its optimizer state in bf16)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    if precision not in PRECISIONS:
        raise ValueError(f"Unknown precision {precision!r}; choose one of {PRECISIONS}.")
    device = memory.pick(device, limit=False)
    amp = _AUTOCAST.get(precision)
    dtype = torch.bfloat16 if precision == "bf16 weights" else torch.float32
    shape = (batch, cfg.block_size)  # type: ignore[attr-defined]

    def build() -> tuple[nn.Module, torch.Tensor]:
        """Made in place (device and default dtype), since fake tensors cannot be converted."""
        default = torch.get_default_dtype()
        torch.set_default_dtype(dtype)
        try:
            with torch.device(device):
                model = GPT(cfg)  # type: ignore[arg-type]
        finally:
            torch.set_default_dtype(default)
        return model, torch.randint(0, cfg.vocab_size, shape, device=device)  # type: ignore[attr-defined]

    def loss(logits: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(logits.flatten(0, 1).float(), torch.zeros(
            logits.shape[0] * logits.shape[1], dtype=torch.long, device=logits.device))

    with FakeTensorMode():
        model, idx = build()
        est = memory.estimate_training_memory(model, idx, optimizer, amp, loss=loss)
        n_params = sum(p.numel() for p in model.parameters())
    lines = [f"GPT, {n_params / 1e6:,.1f} M parameters, batch {batch} × {shape[1]} tokens, "
             f"{precision}, {optimizer}, on {memory.label(device)}", str(est)]
    if est.total > measure_up_to:
        lines.append(f"measured: not run (the estimate is over {fmt_bytes(measure_up_to)}, "
                     "this notebook's limit for measuring here)")
        return "\n".join(lines)
    model, idx = build()
    opt = {"sgd": lambda ps: torch.optim.SGD(ps, lr=1e-3),
           "sgd_momentum": lambda ps: torch.optim.SGD(ps, lr=1e-3, momentum=0.9),
           "adam": lambda ps: torch.optim.Adam(ps, lr=1e-3),
           "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-3)}[optimizer](model.parameters())
    scaler = torch.amp.GradScaler(device.type, enabled=amp == torch.float16)
    with memory.PhaseTracker(device) as tracker:
        for _ in range(2):  # the first step creates the optimizer state
            _gpt_step(model, idx, opt, amp, tracker, scaler)
    base = est.params  # the model was live before the tracker started
    peak = base + max(p.peak for p in tracker.phases)
    lines.append(f"{'measured peak (2 steps)':<34} {fmt_bytes(peak):>11}   "
                 f"estimate {100 * (est.total - peak) / peak:+.0f} %")
    del model, idx, opt, scaler
    memory.free()
    return "\n".join(lines)
