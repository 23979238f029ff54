"""Notebook 05 (DataParallel): what ``nn.DataParallel`` does, on any device.

DataParallel's forward is four calls from ``torch.nn.parallel``: ``scatter`` (split the batch
along dim 0 with ``Tensor.chunk``, one piece per GPU), ``replicate`` (copy the module to every
GPU; the copy on the first GPU shares the module's own tensors), ``parallel_apply`` (one Python
thread per replica runs its forward) and ``gather`` (concatenate the outputs on the output
device). The primitives need CUDA devices. This module does the same arithmetic on one device,
so that a machine without two GPUs can check the mathematics, and gives the exercise's check;
:func:`models.layer_stack`, :func:`replicas` and :func:`thread_apply` (one Python thread per replica, as
``parallel_apply``) are the replicas ``scripts/replica_procs.py`` times three ways, and
:func:`state_bytes` the bytes each GPU holds.
"""

from __future__ import annotations

import ast
import copy
import inspect
import textwrap
import threading
from typing import Any, Callable, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_lib import check
from course_lib.bench import Ratio


def scatter_sizes(n: int, k: int) -> list[int]:
    """Rows per device when DataParallel scatters a batch of `n` over `k` devices, from PyTorch
    itself: ``torch.nn.parallel.scatter`` on the first `k` GPUs when there are that many, else
    ``Tensor.chunk``, the call scatter makes. Every piece holds ceil(n / k) rows except the
    last, so there can be fewer than k pieces, and DataParallel then uses fewer devices:

    >>> scatter_sizes(10, 4), scatter_sizes(9, 4)
    ([3, 3, 3, 1], [3, 3, 3])
    """
    if n < 1 or k < 1:
        raise ValueError(f"A batch of n >= 1 rows over k >= 1 devices, got n={n}, k={k}.")
    rows = torch.arange(n)
    if torch.cuda.is_available() and torch.cuda.device_count() >= k:
        from torch.nn.parallel import scatter

        return [len(c) for c in scatter(rows.cuda(), list(range(k)))]
    return [len(c) for c in rows.chunk(k)]


def replicas(model: nn.Module, k: int) -> list[nn.Module]:
    """`k` copies of `model`: the first is the model itself, as ``replicate``'s copy on
    device_ids[0] shares the module's parameters and buffers; the others are deep copies."""
    return [model] + [copy.deepcopy(model) for _ in range(k - 1)]


def thread_apply(modules: Sequence[nn.Module], inputs: Sequence[torch.Tensor]) -> list[Any]:
    """Run ``modules[i](inputs[i])`` on one Python thread each, as ``parallel_apply`` does,
    and return the outputs in order. Grad mode is per thread, so each thread takes the caller's;
    an exception in a thread is raised again here."""
    if len(modules) != len(inputs):
        raise ValueError(f"One input per module: {len(modules)} modules, {len(inputs)} inputs.")
    grad = torch.is_grad_enabled()
    results: list[Any] = [None] * len(modules)

    def work(i: int) -> None:
        try:
            with torch.set_grad_enabled(grad):
                results[i] = modules[i](inputs[i])
        except Exception as exc:  # handed back to the caller's thread below
            results[i] = exc

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(modules))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        if isinstance(r, Exception):
            raise r
    return results


def data_parallel_step(model: nn.Module, x: torch.Tensor, y: torch.Tensor, k: int,
                       loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = F.cross_entropy,
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """DataParallel's forward and backward over `k` "devices" on x's device; returns (output,
    loss) and leaves in ``model``'s ``.grad`` what DataParallel leaves there.

    scatter: ``x.chunk(k)``; replicate: :func:`replicas`; parallel_apply: each replica on its
    chunk; gather: ``torch.cat``; the loss on the gathered output against the whole `y`; then
    the other replicas' gradients are added into the model's (Broadcast's backward, a
    reduce-add). Replica 0's buffer updates (BatchNorm running statistics) stay in the model;
    the others' are dropped with the replicas.
    """
    chunks = x.chunk(k)  # (ceil(B/k), ...) each, maybe fewer than k
    copies = replicas(model, len(chunks))
    out = torch.cat([r(c) for r, c in zip(copies, chunks)])  # (B, ...) on "device 0"
    loss = loss_fn(out, y)
    loss.backward()
    for r in copies[1:]:
        for p, q in zip(model.parameters(), r.parameters()):
            if q.grad is not None:
                p.grad = q.grad.clone() if p.grad is None else p.grad + q.grad
    return out.detach(), loss.detach()


def _reading(r: Ratio) -> str:
    """'0.41× (slower)', '1.70× (faster)' or '1.02× (no measurable difference)', from the ratio's range."""
    word = ("slower" if r.value < 1 else "faster") if r.clear else "no measurable difference"
    return f"{r.value:.2f}× ({word})"


def gil_verdict(threads: dict[str, Ratio], processes: dict[str, Ratio]) -> str:
    """One verdict on section 6.1's measurement: `threads[model]` and `processes[model]` are the
    speed-ups of a thread each and a process each over one after another, for the models
    "small layers" and "large layers". Says, from their ranges, where threads helped and whether
    processes did better than threads on the small layers (the GIL's case)."""
    for name in ("small layers", "large layers"):
        if name not in threads or name not in processes:
            raise ValueError(f"gil_verdict needs the ratios of {name!r} for threads and processes.")
    small, large = threads["small layers"], threads["large layers"]
    head = (f"a thread each vs one after another (timed in turns): small layers {_reading(small)}, large layers "
            f"{_reading(large)}; a process each (timed apart, unpaired): small layers "
            f"{_reading(processes['small layers'])}, large layers {_reading(processes['large layers'])}")
    helps = lambda r: r.clear and r.value > 1  # noqa: E731
    if helps(large) and not helps(small):
        why = ("threads paid off only where each operation's C++ work is long (large layers); with small "
               "layers the replicas' Python took turns under the GIL")
    elif helps(large) and helps(small):
        why = "threads paid off for both models here"
    elif not helps(large) and not helps(small):
        why = "threads paid off for neither model here"
    else:
        why = "threads paid off for the small layers but not the large ones here"
    p_small = processes["small layers"]
    if helps(p_small) and p_small.lo > small.hi:  # their ranges apart
        why += ("; one process per replica, each with its own GIL, did better on the small layers (the ranges "
                "apart, the processes timed at another moment)")
    return f"{head}\n  {why}"


def state_bytes(model: nn.Module) -> int:
    """Bytes of the parameters and buffers: what ``replicate`` copies to each extra device on
    every forward."""
    return sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])


# ---- exercise check ----------------------------------------------------------------------------

CHECK_CASES = ((8, 2), (10, 4), (9, 4), (3, 4), (1, 8), (128, 3), (100, 7), (64, 8), (7, 1))


SPLITTERS = {"chunk", "split", "tensor_split", "scatter", "scatter_kwargs", "array_split"}


def called_names(fn: Callable) -> set[str]:
    """Names of the functions and methods `fn`'s source calls (empty when the source cannot be
    read or parsed, e.g. a function typed at an interactive prompt)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            names.add(f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", ""))
    return names


@check.exercise()
def check_chunk_sizes(fn: Callable[[int, int], list[int]]) -> None:
    """Exercise: ``fn(n, k)`` returns the rows each device gets when DataParallel scatters a
    batch of n over k devices, worked out from n and k (no chunk, split or scatter call),
    checked against :func:`scatter_sizes` on several cases."""
    used = sorted(called_names(fn) & SPLITTERS)
    if used:
        raise AssertionError(f"Work the sizes out from n and k with arithmetic: calling "
                             f"{', '.join(used)} lets PyTorch answer for you.")
    for n, k in CHECK_CASES:
        got, want = list(fn(n, k)), scatter_sizes(n, k)
        if got == want:
            continue
        hint = ""
        if sum(got) != n:
            hint = f" (yours add up to {sum(got)} rows, not {n})"
        elif len(got) == k and len(want) < k:
            hint = (f": chunk gives every piece ceil(n / k) = {want[0]} rows, so {len(want)} "
                    f"pieces hold them all and {k - len(want)} device(s) get nothing")
        raise AssertionError(f"A batch of {n} over {k} devices: scatter makes {want}, "
                             f"yours {got}{hint}.")
    print(f"✓ chunk sizes agree with scatter's on {len(CHECK_CASES)} batches, "
          f"including ones that leave devices idle")
