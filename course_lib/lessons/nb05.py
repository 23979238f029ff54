"""Notebook 05 (DataParallel): what ``nn.DataParallel`` does, on any device.

DataParallel's forward is four calls from ``torch.nn.parallel``: ``scatter`` (split the batch
along dim 0 with ``Tensor.chunk``, one piece per GPU), ``replicate`` (copy the module to every
GPU; the copy on the first GPU shares the module's own tensors), ``parallel_apply`` (one Python
thread per replica runs its forward) and ``gather`` (concatenate the outputs on the output
device). The primitives need CUDA devices. This module does the same arithmetic on one device,
so that a machine without two GPUs can check the mathematics, and gives the exercise's check;
:func:`models.layer_stack`, :func:`replicas` and :func:`thread_apply` (one Python thread per replica, as
``parallel_apply``) are the replicas ``scripts/replica_procs.py`` times three ways, and
:func:`state_bytes` the bytes each GPU holds. The cells' printed lines (the snippet's lines run, the
bytes moved, the scaling table) are worded here from what the cells measured, and returned as text.
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

from course_lib import bench, check, published, report, units
from course_lib.bench import Ratio

NB = "05_data_parallel"


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


_UNDECIDED = {"too wide": "too wide to tell", "inconclusive": "inconclusive: the machine's speed drifted",
              "no verdict": "one run: no verdict"}


def _reading(r: Ratio) -> str:
    """'0.41× (slower)', '1.70× (faster)', '1.02× (no measurable difference)' or, where the
    repeats cannot tell, '1.61× (too wide to tell)': the ratio's grade (:attr:`Ratio.grade`)."""
    word = ("no measurable difference" if r.grade == "no difference" else
            "inconclusive: timed at two moments" if r.grade == "inconclusive" and r.apart else
            _UNDECIDED.get(r.grade) or ("slower" if r.value < 1 else "faster"))
    return f"{r.value:.2f}× ({word})"


def gil_verdict(threads: dict[str, Ratio], processes: dict[str, Ratio],
                over_threads: Ratio | None = None) -> str:
    """One verdict on section 6.1's measurement: `threads[model]` and `processes[model]` are the
    speed-ups of a thread each and a process each over one after another, for the models
    "small layers" and "large layers"; `over_threads`, when given, a process each over a thread
    each on the small layers (the GIL's case), paired. Says, from their ranges, where threads
    helped and whether processes did better than threads on the small layers."""
    for name in ("small layers", "large layers"):
        if name not in threads or name not in processes:
            raise ValueError(f"gil_verdict needs the ratios of {name!r} for threads and processes.")
    small, large = threads["small layers"], threads["large layers"]
    how = ("timed apart, unpaired" if any(r.apart for r in processes.values()) else "timed in the same turns")
    head = (f"a thread each vs one after another (timed in turns): small layers {_reading(small)}, large layers "
            f"{_reading(large)}; a process each ({how}): small layers "
            f"{_reading(processes['small layers'])}, large layers {_reading(processes['large layers'])}")
    helps = lambda r: r.clear and r.value > 1  # noqa: E731
    if helps(large) and not helps(small):
        why = ("threads paid off only on the large layers, whose ops run long in C++; on the small ones they did "
               "not, as expected if the threads spend their time waiting for the GIL (a guess: its waits, and the "
               "threads' start-up, are not timed apart here)")
    elif helps(large) and helps(small):
        why = "threads paid off for both models here"
    elif not helps(large) and not helps(small):
        open_ = [f"the {n}' {r.value:.2f}×" for n, r in (("small layers", small), ("large layers", large))
                 if r.grade in _UNDECIDED]
        why = ("threads paid off for neither model here, beyond the spread"
               + (f"; {' and '.join(open_)} {'is' if len(open_) == 1 else 'are'} undecided, not no gain: "
                  "more turns would tell" if open_ else ""))
    else:
        why = "threads paid off for the small layers but not the large ones here"
    if over_threads is not None:
        why += (f"; on the small layers, a process each vs a thread each (paired): {over_threads.value:.2f}× "
                f"({over_threads.lo:.2f}–{over_threads.hi:.2f}), "
                + ("a process per replica, each with its own GIL, beat the threads" if helps(over_threads) else
                   "the threads beat a process per replica" if over_threads.clear else
                   "no measurable difference" if over_threads.grade == "no difference" else
                   _UNDECIDED.get(over_threads.grade, over_threads.grade)))
        return f"{head}\n  {why}"
    p_small = processes["small layers"]
    if helps(p_small) and p_small.lo > small.hi:  # their ranges apart
        why += ("; a process per replica, each with its own GIL, beat the threads on the small layers (ranges "
                "apart; timed at another moment)")
    return f"{head}\n  {why}"


def state_bytes(model: nn.Module) -> int:
    """Bytes of the parameters and buffers: what ``replicate`` copies to each extra device on
    every forward."""
    return sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])


# ---- what the cells print, as text --------------------------------------------------------------

def attempt(line: str, fn: Callable[[], Any]) -> tuple[Any, str]:
    """Run one of the snippet's lines, `fn`: (its result, or the exception it raised; the
    `line` and what happened, its exception's type and first line, or that it ran)."""
    try:
        result = fn()
    except Exception as exc:
        return exc, f"{line}\n    raises {type(exc).__name__}: {str(exc).strip().splitlines()[0]}"
    return result, f"{line}\n    runs"


def kept_ids(wrapped: Any) -> str:
    """What a DataParallel `wrapped` without GPUs keeps ('' for anything else)."""
    if not isinstance(wrapped, nn.DataParallel):
        return ""
    return f"\n    it keeps device_ids = {wrapped.device_ids}" + (
        ": without CUDA its forward calls the module as it is, in one piece on one device"
        if not wrapped.device_ids else "")


def storage_promise(doc: str | None) -> str:
    """The sentence of DataParallel's documentation `doc` on replica 0 sharing storage with the
    module, or a line saying it has none."""
    doc = " ".join((doc or "").split())
    promise = next((part.strip() + "." for part in doc.split(". ") if "sharing storage" in part), "")
    return f"PyTorch's documentation: {promise}" if promise else "(no storage promise in this PyTorch's docs)"


def running_mean_text(missed: float, by_construction: bool, doc: str | None) -> str:
    """How far the split run's running mean is from the whole batch's (`missed`); whether the
    check before it passed `by_construction` (the arithmetic's replica 0 is the module); and
    PyTorch's promise from DataParallel's documentation `doc`."""
    lines = [f"it differs from the whole batch's running mean by up to {missed:.3g}"]
    if by_construction:
        lines.append("on this machine the split ran as arithmetic, whose replica 0 is the module itself: the "
                     "running-mean check passes by construction; PyTorch's guarantee for DataParallel is the "
                     "line below")
    return "\n".join(lines + [storage_promise(doc)])


def ways_text(name: str, shape: tuple[int, int, int], k: int, ways: dict[str, bench.Timing]) -> str:
    """Section 6.1 for one model `name` of `shape` (width, layers, batch) on `k` replicas: the
    time per layer one after another, then each way's row."""
    width, layers, batch = shape
    per_layer = ways["one after another"].median_s / (k * layers)
    head = (f"{name}: {layers} × Linear({width}, {width}) on {batch} rows, {k} replicas; "
            f"{units.fmt_time(per_layer)} per layer one after another")
    return "\n".join([head, *(f"  {t}" for t in ways.values())])


def bytes_moved_text(model: str, params: int, state: int, moved: dict[int, tuple[float, float, float]]) -> str:
    """Section 6.2: `model`'s parameter and buffer bytes (`state` holds both), and per number of
    GPUs the bytes `moved` per step: DataParallel's from GPU 0 to the others and back, over all links;
    DDP's from each GPU (its total: k times that)."""
    lines = [f"{model}: {units.fmt_bytes(params)} of parameters, {units.fmt_bytes(state - params)} of buffers; "
             "bytes moved per step (arithmetic):"]
    lines += [f"  {k} GPUs: DataParallel copies {units.fmt_bytes(out)} of weights and buffers from GPU 0 to the others "
              f"and reduces {units.fmt_bytes(back)} of gradients back onto it; DDP sends {units.fmt_bytes(ddp)} from "
              f"each GPU (ring all-reduce), {units.fmt_bytes(k * ddp)} in all"
              for k, (out, back, ddp) in moved.items()]
    lines.append("  (DataParallel's figures are totals over all links: NCCL's broadcast and reduce, which it uses "
                 "between GPUs, can relay along a ring as DDP's all-reduce does, so GPU 0's own link need not carry "
                 "them all; the bytes are of one order, and what differs is when they move: DataParallel copies the "
                 "weights before every forward and sums on one GPU)")
    return "\n".join(lines)


def logits_text(shape: tuple[int, int, int], rows: Sequence[int], pieces: Sequence[float], full: float) -> str:
    """Section 6.3: what each GPU holds of logits of `shape` (batch, tokens, vocab): its `rows`
    and `pieces` (bytes of its piece), and on GPU 0 also the gathered logits, their log-softmax,
    the loss's gradient with respect to the log-softmax and then to the logits, each `full` bytes."""
    batch, tokens, vocab = shape
    lines = [f"logits ({batch}, {tokens}, {vocab:,}) over {len(rows)} GPUs, arithmetic:",
             f"  GPU 0: piece {units.fmt_bytes(pieces[0])} + gathered {units.fmt_bytes(full)} + log-softmax "
             f"{units.fmt_bytes(full)} + its gradient {units.fmt_bytes(full)} + the logits' gradient "
             f"{units.fmt_bytes(full)} = {units.fmt_bytes(pieces[0] + 4 * full)} in fp32 while cross-entropy's "
             "backward runs, if all five are alive at once: an estimate, not measured here (what PyTorch frees "
             "earlier, or fuses, is not counted)"]
    lines += [f"  GPU {gpu}: piece of {rows[gpu]} sequence(s), {units.fmt_bytes(pieces[gpu])}"
              for gpu in range(1, len(rows))]
    return "\n".join(lines)


def reference_text() -> str:
    """The DataParallel/DDP rows of the first reference run recorded with 2 GPUs or more; else
    a line saying there is none, then the published DataParallel-against-DDP timing and DDP's
    published scaling."""
    for ref_device, ref in report.references(NB):
        if ref.get("GPUs", {}).get("value", 0) >= 2:
            rows = [f"  {report.fmt_row(key, row)}" for key, row in ref.items()
                    if key.startswith(("DataParallel", "DDP", "replicate to"))]
            return "\n".join([f"reference run on {ref['GPUs']['value']} × {ref_device}:", *rows])
    return ("(no reference run with 2 GPUs or more is recorded in results/ for this notebook yet); below, "
            "DataParallel against DDP on 2 GPUs (another model and other GPUs than this section's), then DDP "
            "from 1 to 8 GPUs.\n" + published.elsewhere(
                NB, keys=["hf_transformers_dp_vs_ddp_2x_titan_rtx_gpt2", "dle_resnet50_a100_8gpu_strong_scaling",
                          "dle_resnet50_v100_8gpu_strong_scaling"]))


def earlier_processes() -> str:
    """The reference host's rows of a process each timed apart, by an earlier version of section 6.1's
    script (its rows' names say so), read by the course's rule for two moments; '' where there are none."""
    rows = [(k, r) for k, r in report.reference(NB)[1].items() if "a process each" in k and "timed apart" in k]
    if not rows:
        return ""
    return ("the reference machine's host CPU timed a process each apart, with an earlier version of this script:\n"
            + "\n".join(f"  {report.fmt_row(k, r)}" for k, r in rows))


def without_gpus_text(gpus: int, gil: str) -> str:
    """Section 7 with fewer than 2 GPUs: why it measures nothing, the reference run, and section
    6.1's verdict `gil` (:func:`gil_verdict`) as this machine's answer."""
    return "\n".join([f"{gpus} GPU(s) here: DataParallel against DDP needs at least 2, so this section measures "
                      "nothing and shows the reference run when there is one.", reference_text(),
                      "On a CPU, section 6.1 is this machine's answer to one process per replica against threads: "
                      + gil.replace("\n ", ";")])


def scaling_text(runs: dict[int, dict], title: str) -> str:
    """Section 7's lines: per number of GPUs k in `runs`, DataParallel's and DDP's rows ("dp",
    "ddp"), DDP over DataParallel, replicate's time and share of a step ("rep", "rep_share",
    k > 1) and the peak MiB per GPU ("dp_peak", "ddp_peak", bytes); then each one's scaling
    over 1 GPU against the ideal k×. `title` names the model, batch and GPU."""
    lines = [title]
    for k, r in runs.items():
        vs = bench.rate_ratio(r["ddp"], r["dp"], f"DDP vs DataParallel, {k} GPU(s)")
        lines += [str(r["dp"]), str(r["ddp"]), f"  {vs}"]
        if k > 1:
            lines.append(f"  replicate: {units.fmt_time(r['rep'].median_s)} per step, "
                         f"{r['rep_share']:.0%} of a DataParallel step")
        lines.append(f"  peak MiB per GPU: DataParallel {[round(b / 2**20) for b in r['dp_peak']]}, "
                     f"DDP {[round(b / 2**20) for b in r['ddp_peak']]}")
    for kind in ("dp", "ddp"):
        for k in list(runs)[1:]:
            scale = bench.rate_ratio(runs[k][kind], runs[1][kind])
            lines.append(f"{runs[k][kind].name} vs 1 GPU: {scale.value:.2f}× ({scale.lo:.2f}–{scale.hi:.2f}), "
                         f"{scale.value / k:.0%} of the ideal {k}×")
    return "\n".join(lines)


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
