"""Notebook 02 (first CNN): how fast does data reach the model? Images/s and the data-wait
share of a training loop.

Notebook 02 writes its loop inline; :func:`train_steps` is the same loop here (a test ties
both to :func:`course_lib.train.fit`), and :func:`time_steps` times it the course's way:
one long pass of the loader, warm-up calls (workers start, first-call costs), then
repeated calls of a few steps each, with their median and quartiles:

    r = measure_loader(num_workers=2, steps=4, repeats=5)
    print(r)  # workers=2 | 103.7 ms ± 3% | 4,936 img/s | 5 runs | cpu (2 threads) | data wait 12%
"""

from __future__ import annotations

import dataclasses
import math
import re
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, Subset

from course_lib import bench, check, data, datasheet, device, models, profiles, published, report, train, units, verdicts
from course_lib.device import pick as pick_device

__all__ = ["Throughput", "shapes_loader", "loader_name", "train_steps", "time_steps",
           "time_steps_in_turns", "beyond_chance", "measure_loader", "real_data_run",
           "check_flatten_size"]


@dataclass
class Throughput:
    """One measured setup: the timing of its calls (rate in img/s) and the share of a call
    spent waiting for the next batch."""

    timing: bench.Timing
    data_wait_share: float  # 0..1: median wait per call / median time per call
    waits: tuple[float, ...] = ()  # seconds waited in each timed call, in the order of timing.samples

    @property
    def wait_s(self) -> float:
        """Median seconds per call spent waiting for batches (0 when no waits were recorded)."""
        return statistics.median(self.waits) if self.waits else 0.0

    def rest(self) -> bench.Timing:
        """The calls without their wait: each call's time minus what it waited, in the same
        turns as :attr:`timing` (so that :func:`course_lib.bench.speedup` pairs it with the
        rows timed in those turns); the rate is work per second of the rest."""
        t = self.timing
        if len(self.waits) != len(t.samples):
            raise ValueError(f"{t.name!r} has {len(self.waits)} waits for {len(t.samples)} calls.")
        rest = [max(s - w, 1e-12) for s, w in zip(t.samples, self.waits)]
        r = bench.timing_of(rest, name=f"{t.name} without its wait", device="cpu", work=t.work,
                            unit=t.unit, turns_id=t.turns_id)
        return dataclasses.replace(r, device=t.device)

    def __str__(self) -> str:
        line = f"{self.timing} | data wait {100 * self.data_wait_share:.0f}%"
        if self.waits and self.wait_s > 0:
            line += f" ({units.fmt_time(self.wait_s)} a call)"
        return line


def shapes_loader(n: int, resolution: int = 32, batch_size: int = 128, num_workers: int = 0,
                  pin_memory: bool = False, seed: int = 0) -> DataLoader:
    """A shuffled DataLoader (seeded order) that draws `n` ShapesDataset images on the fly."""
    ds = data.ShapesDataset(n, resolution, "train", seed)
    return DataLoader(ds, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                      pin_memory=pin_memory, persistent_workers=num_workers > 0,
                      generator=torch.Generator().manual_seed(seed))


def loader_name(num_workers: int, pin_memory: bool = False) -> str:
    """'workers=2 +pin': the label of one DataLoader setting."""
    return f"workers={num_workers}" + (" +pin" if pin_memory else "")


def train_steps(model: nn.Module, optimizer: torch.optim.Optimizer, batches: Iterator,
                steps: int, device: torch.device | str) -> tuple[float, torch.Tensor]:
    """Train `steps` steps on batches taken from the iterator `batches`; return the seconds
    spent waiting for them and the last step's loss (not synchronised).

    The loop notebook 02 writes inline: copies with ``non_blocking=True`` (asynchronous
    only from pinned memory), cross-entropy, ``zero_grad(set_to_none=True)``, backward, step.
    """
    wait, loss = 0.0, torch.zeros(())
    for _ in range(steps):
        t0 = time.perf_counter()
        x, y = next(batches)
        wait += time.perf_counter() - t0
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return wait, loss


PREFETCH_FACTOR = 2  # DataLoader's default: batches each worker prepares ahead of the loop


def warmup_calls(num_workers: int, steps: int, prefetch_factor: int = PREFETCH_FACTOR) -> int:
    """Untimed calls of `steps` batches before a loader is timed: one (the workers start), and
    enough more to use up the batches its workers prepared in advance (num_workers ×
    prefetch_factor), so that the timed calls see the rate at which the workers make batches,
    not a full buffer. On the H100, 8 workers timed after one warm-up call reported 11.2 kimg/s
    (±100 %) while one worker made 1.1 kimg/s."""
    if num_workers < 0 or steps < 1 or prefetch_factor < 1:
        raise ValueError(f"Need num_workers >= 0, steps >= 1 and prefetch_factor >= 1, got "
                         f"{num_workers}, {steps} and {prefetch_factor}.")
    return 1 + drain_calls(num_workers, steps, prefetch_factor)


def drain_calls(num_workers: int, steps: int, prefetch_factor: int = PREFETCH_FACTOR) -> int:
    """Untimed calls of `steps` batches before each timed call of a loader timed in turns: enough
    to use up the batches its workers prepared (num_workers × prefetch_factor) while the other
    runs had their turns; 0 without workers."""
    if num_workers < 0 or steps < 1 or prefetch_factor < 1:
        raise ValueError(f"Need num_workers >= 0, steps >= 1 and prefetch_factor >= 1, got "
                         f"{num_workers}, {steps} and {prefetch_factor}.")
    return math.ceil(num_workers * prefetch_factor / steps)


def time_steps(run: Callable[[], float], *, name: str, device: torch.device | str,
               images: int, repeats: int = 5, warmup: int = 1) -> Throughput:
    """Time `run()`, which trains a few steps on `images` images in all and returns the
    seconds it waited for batches: `warmup` calls, then `repeats` timed calls
    (:func:`course_lib.bench.time_fn`); the rate is in img/s."""
    waits: list[float] = []
    timing = bench.time_fn(lambda: waits.append(run()), name=name, device=device, work=images,
                           unit="img/s", warmup=warmup, repeats=repeats)
    return _throughput(timing, waits[warmup:])


def _throughput(timing: bench.Timing, waits: list[float]) -> Throughput:
    wait = statistics.median(waits)
    return Throughput(timing, min(1.0, wait / timing.median_s), tuple(waits))


def time_steps_in_turns(runs: dict[str, Callable[[], float]], *, device: torch.device | str,
                        images: int, repeats: int = 5, warmup: int = 1,
                        untimed: dict[str, int] | None = None) -> list[Throughput]:
    """Time several `run()`s as :func:`time_steps` does, but in turns
    (:func:`course_lib.bench.time_in_turns`: `warmup` calls of each, then `repeats` rounds of
    one call each), so that their comparisons are paired round by round. One Throughput per
    run, in the order given. A DataLoader's workers prepare batches during the other runs'
    turns: a run on one makes `untimed[name]` calls (:func:`drain_calls`) just before each timed
    one, which use those up, so that the timed call sees the rate at which the workers make them."""
    if repeats < 1 or warmup < 0 or not runs:
        raise ValueError(f"Need at least one run, repeats >= 1 and warmup >= 0, got {len(runs)}, "
                         f"{repeats} and {warmup}.")
    untimed = untimed or {}
    waits: dict[str, list[float]] = {name: [] for name in runs}
    fns = {name: (lambda name=name, run=run: waits[name].append(run())) for name, run in runs.items()}
    timings = bench.time_in_turns(fns, device=device, work=images, unit="img/s", warmup=warmup,
                                  repeats=repeats, untimed=untimed)
    every = {name: untimed.get(name, 0) + 1 for name in runs}  # per round: the untimed calls, then the timed one
    return [_throughput(t, waits[t.name][warmup:][every[t.name] - 1::every[t.name]]) for t in timings]


def beyond_chance(correct: int, n: int, p: float) -> float:
    """The chance that guessing, right with probability `p` on each of `n` items, gets at least
    `correct` of them right: P(Binomial(n, p) >= correct). Small (below 1 %): the accuracy is
    beyond what guessing gives."""
    if not 0 <= correct <= n or not 0 < p < 1:
        raise ValueError(f"Need 0 <= correct <= n and 0 < p < 1, got {correct}, {n} and {p}.")
    log = lambda i: (math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)  # noqa: E731
                     + i * math.log(p) + (n - i) * math.log1p(-p))
    return min(1.0, sum(math.exp(log(i)) for i in range(correct, n + 1)))


def measure_loader(num_workers: int = 0, pin_memory: bool = False, *, steps: int = 4,
                   repeats: int = 5, warmup: int | None = None, batch_size: int = 128, resolution: int = 32,
                   width: int = 32, lr: float = 3e-3, device: str | torch.device | None = None,
                   seed: int = 0) -> Throughput:
    """Images/s of a fresh SmallCNN trained with :func:`train_steps` on shapes drawn by a
    DataLoader with these settings, `steps` steps per timed call, over one pass of the loader,
    after `warmup` untimed calls (None: :func:`warmup_calls`).

    `pin_memory` only acts when training on a GPU (PyTorch warns and ignores it without one).
    """
    if num_workers < 0 or steps < 1 or repeats < 1 or (warmup is not None and warmup < 0):
        raise ValueError(f"Need num_workers >= 0, steps >= 1, repeats >= 1 and warmup >= 0, got "
                         f"{num_workers}, {steps}, {repeats} and {warmup}.")
    warmup = warmup_calls(num_workers, steps) if warmup is None else warmup
    dev = pick_device(device)
    loader = shapes_loader(batch_size * steps * (warmup + repeats), resolution, batch_size,
                           num_workers, pin_memory, seed)
    torch.manual_seed(seed)
    model = models.SmallCNN(width=width, resolution=resolution).to(dev)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    batches = iter(loader)  # one pass for all calls: no epoch restarts inside the timing
    return time_steps(lambda: train_steps(model, optimizer, batches, steps, dev)[0],
                      name=loader_name(num_workers, pin_memory), device=dev,
                      images=batch_size * steps, repeats=repeats, warmup=warmup)


REAL = {  # name -> (loader function, input channels, resolution)
    "cifar10": (data.cifar10, 3, 32),
    "mnist": (data.mnist, 1, 28),
}


def real_data_run(name: str, steps: int = 20, batch_size: int = 64, n_val: int = 512,
                  device: str | torch.device | None = None, root: str | Path | None = None,
                  seed: int = 0) -> train.History:
    """Train a fresh SmallCNN (10 classes) for `steps` steps on a real dataset, evaluate on
    the first `n_val` test images. Raises data.DatasetMissing (one sentence) without files."""
    if name not in REAL:
        raise ValueError(f"Unknown dataset {name!r}: choose one of {', '.join(REAL)}.")
    load, channels, resolution = REAL[name]
    train_set, test_set = load(root=root, train=True), load(root=root, train=False)
    loader = data.make_loader(_first(train_set, steps * batch_size), batch_size, seed=seed)
    val = DataLoader(_first(test_set, n_val), batch_size=256)
    torch.manual_seed(seed)
    model = models.SmallCNN(num_classes=10, in_channels=channels, resolution=resolution)
    epochs = -(-steps // len(loader))  # a subset smaller than steps batches is repeated
    cfg = train.TrainConfig(epochs=epochs, max_steps=steps, device=device, seed=seed)
    return train.fit(model, loader, cfg, val_loader=val)


def _first(dataset: Dataset, n: int) -> Dataset:
    return Subset(dataset, range(min(n, len(dataset))))


def beyond_workers(ref: dict[str, dict], workers: int) -> tuple[list[str], str]:
    """The rows of a recorded reference run (`ref`: name -> row) for the pinned loaders of
    `workers` workers whose repeats ran faster than those workers can draw images (`workers` ×
    the upper quartile of its "draw one image (ds[i])" row): they timed batches already waiting,
    not the loader. Returns (their names, one sentence saying so, or '' when there are none)."""
    draw = ref.get("draw one image (ds[i])")
    if not draw or not draw.get("spread"):
        return [], ""
    limit = workers * draw["spread"][1]
    over = [k for k, row in ref.items() if k.startswith(f"SmallCNN workers={workers} +pin")
            and row["unit"] == draw["unit"] and row.get("spread", [0, 0])[1] > limit]
    if not over:
        return [], ""
    return over, (f"(left out: the reference's rows {', '.join(over)}: their repeats ran faster than its {workers} "
                  f"workers can draw images,\n {workers} × {draw['spread'][1]:.3g} {draw['unit']} (the upper quartile "
                  "of its draw row): they timed batches already waiting, not the loader)")


# ---- the exercise ---------------------------------------------------------------------

@check.exercise()
def check_flatten_size(fn: Callable[[int], int]) -> None:
    """Exercise: `fn(r)` must give the number of features the tutorial snippet's ``fc`` receives
    for an r×r input, checked against the real conv stack at several resolutions (SmallCNN's
    with width 16 ends in 64 channels, as the snippet's conv3 does)."""
    stack = models.SmallCNN(width=16).features.eval()
    for r in (32, 48, 64, 100):
        measured = stack(torch.zeros(1, 3, r, r)).flatten(1).shape[1]
        check.expect(f"flatten size for {r}×{r} input", fn(r), measured)


# ---- the words around the notebook's numbers ---------------------------------------------

STALL = "meta_maiprof_gpu_idle_more_than_half_data_loading"  # a published data-loading stall


def shape_lines(net: nn.Module, logits: dict[int, torch.Size], feats: torch.Tensor,
                name: str = "SmallCNN(width=32)") -> str:
    """Section 1's facts: `net`'s parameters, its `logits`' shape for a batch of 4 at each
    resolution, and the shape of the snippet-like feature map `feats` (at 32×32, 64 channels as
    the snippet's conv3) with its flatten size."""
    lines = [f"{name}: {models.count_params(net):,} parameters"]
    lines += [f"input (4, 3, {r}, {r}) -> logits {tuple(shape)}" for r, shape in logits.items()]
    lines.append(f"snippet-like features at 32×32: {tuple(feats.shape)} -> flatten size {feats[0].numel():,}, "
                 f"not 64·8·8 = {64 * 8 * 8:,}")
    return "\n".join(lines)


def training_lines(hist: train.History, n_train: int, dev: torch.device | str, ckpt: Path) -> str:
    """Section 3's run: validation accuracy after each epoch, what the run took (images, epochs,
    steps, seconds of training steps) and its checkpoint file."""
    epochs = len(hist.val_accuracy)
    return "\n".join([*(f"epoch {e}: val accuracy {100 * a:.1f}%" for e, a in enumerate(hist.val_accuracy, start=1)),
                      f"{n_train:,} training images × {epochs} epochs ({len(hist.step)} steps) in "
                      f"{hist.train_time_s:.1f} s of training steps on {device.label(dev)} (the progress bar's time "
                      "also counts the validation after each epoch and the checkpoint saving)",
                      f"checkpoint: {ckpt.name}, {units.fmt_bytes(ckpt.stat().st_size)}"])


def baseline_lines(acc: float, lin_acc: float, n_val: int, epochs: int, classes: int = 6) -> str:
    """SmallCNN's validation accuracy against the linear classifier's, and whether the linear one
    beats guessing: the chance that guessing gets as many of the `n_val` images right
    (:func:`beyond_chance`; under 1 % is beyond chance)."""
    right = round(lin_acc * n_val)  # validation images the linear classifier got right
    guess = beyond_chance(right, n_val, 1 / classes)
    cnn, lin = round(100 * acc, 1), round(100 * lin_acc, 1)  # the gap between the printed figures, as printed
    return (f"val accuracy after {epochs} epochs each: SmallCNN {cnn:.1f}% ({round(acc * n_val):,} of {n_val:,}), "
            f"linear classifier on pixels {lin:.1f}% ({right:,}): the CNN is {cnn - lin:+.1f} percentage points "
            f"{'ahead' if acc >= lin_acc else 'behind'} on {n_val:,} unseen images (a guess among {classes} classes: "
            f"{100 / classes:.1f}%)\nguessing gets {right:,} or more of {n_val:,} right with chance {guess:.2g}: "
            "the linear classifier is " + ("beyond chance (under the 1 % this course requires)" if guess < 0.01 else
                                            "not shown to beat guessing (this course requires a chance under 1 %)"))


def threads_line(cores: int, threads: int) -> str:
    """This machine's cores and the training process's torch threads (and when workers share them)."""
    return (f"this machine: {cores} cores; the training process runs {threads} torch threads"
            + (": every worker shares a core with them (no core of its own)" if cores <= threads else ""))


def draw_vs_wait(draw: bench.Timing, again: bench.Timing, base: Throughput, images: int) -> str:
    """Two short lines: workers=0's wait per image (it draws its `images` a call in the training
    process, as a worker would), then that wait beside one ds[i] timed `again` just after the
    loader's turns, and section 2's `draw` of the same, timed minutes earlier (another moment)."""
    per_image = base.wait_s / images
    lo, hi = min(base.waits) / images, max(base.waits) / images
    t = units.fmt_time
    return (f"{base.timing.name} waited {t(base.wait_s)} a call for its {images:,} images: {t(per_image)} an image "
            f"(fastest–slowest call: {t(lo)}–{t(hi)})\n"
            f"that is {per_image / again.median_s:.2f}× one image drawn alone just after these turns, "
            f"{t(again.median_s)} {again.spread_text}: two moments, so "
            + verdicts.moments_words(lo / again.hi_s, hi / again.lo_s)
            + f" (section 2 measured {t(draw.median_s)} at another moment)")


def loaders_elsewhere(dev: torch.device | str) -> str:
    """Beside the loader rows: on a CPU, why the pinned rows are missing and what the reference
    GPU run measured (less its pinned rows that outran their workers, :func:`beyond_workers`);
    on a GPU, a published data-loading stall for comparison."""
    if torch.device(dev).type == "cuda":
        return "For comparison, " + published.elsewhere("02_first_cnn", keys=[STALL])
    gpu = profiles.sizes("02_first_cnn", "gpu", memory_gib=80)  # the gpu profile's large sizes, the reference's
    gpu_w = gpu.workers[-1]  # the gpu profile's loader
    recorded = report.reference("02_first_cnn")[1]
    over, why = beyond_workers(recorded, gpu_w)
    rows: tuple[str, ...] = ("SmallCNN workers=0", f"SmallCNN workers={gpu_w}", "SmallCNN batch in memory",
                             "data wait SmallCNN workers=0", f"data wait SmallCNN workers={gpu_w}")
    if old_loaders(recorded):  # recorded before the turns
        rows = ("SmallCNN batch in memory",)  # no worker to drain: the one row the old method timed as this cell does
        over = [*over, "SmallCNN batch in memory vs"]  # its ratio to the old workers=0 row
        why = OLD_LOADERS
    ref = (published.elsewhere("02_first_cnn", rows, exclude=tuple(over))
           if report.reference_rows("02_first_cnn", rows, tuple(over)) else "(no reference GPU run in results/)")
    return "\n\n".join(filter(None, [  # three blocks: why no rows here, the reference run, published figures
        "pin_memory, non_blocking and copy_ahead act on the copy from host memory to a GPU: a CPU run has no "
        "such copy, so those rows are measured on a GPU only.",
        f"What GPUs measured (their SmallCNN: width {gpu.width}, {gpu.resolution}×{gpu.resolution} px, batch "
        f"{gpu.batch_size}, {gpu.call_steps} steps a call):\n" + ref + ("\n" + why if why else ""),
        published.elsewhere("02_first_cnn", keys=[STALL])]))


OLD_LOADERS = ("(its loader rows are left out: an earlier version of this cell recorded them, each timed alone without "
               "first using up the batches its workers had prepared, so they are not evidence of a loader's rate; "
               "a GPU run of this cell records them anew)")


def old_loaders(ref: dict[str, dict]) -> bool:
    """Whether a recorded reference run's loader rows come from an earlier version of section 4 (:data:`OLD_LOADERS`):
    it timed the rows apart, so its batch-in-memory ratio to workers=0 is marked `apart`."""
    return bool((ref.get("SmallCNN batch in memory vs workers=0") or {}).get("apart"))


def stale_rows() -> tuple[list[str], str]:
    """The reference's loader rows (rates, ratios, data waits) where an earlier version of section 4 recorded them
    (:data:`OLD_LOADERS`), and why, for :meth:`course_lib.report.Report.table`'s `leave_out`; none otherwise."""
    ref = report.reference("02_first_cnn")[1]
    if not old_loaders(ref):
        return [], ""
    rows = [k for k in ref if re.match(r"(data wait )?SmallCNN (workers=|batch in memory vs)", k)]
    return rows, "loader rows an earlier version of section 4 recorded without using up its workers' batches"


def reference_waits(ref: dict[str, dict] | None = None, device_name: str = "") -> str:
    """One line under the closing table, from the reference run's rows (`ref`: name -> row, by
    default the recorded reference run's, with its `device_name`) on its
    loaders of 0 and 1 worker: both fed images near its one-image draw rate and far below its rate
    on a batch in memory, so both wait on drawing (why one worker's data wait need not be the
    smaller there); '' when a row is missing or the rates are in different units."""
    if ref is None:
        device_name, ref = report.reference("02_first_cnn")
    if old_loaders(ref):  # loader rows of an earlier cell
        return ""
    names = ("SmallCNN workers=0", "SmallCNN workers=1", "draw one image (ds[i])", "SmallCNN batch in memory")
    if not all(n in ref for n in names) or len({ref[n]["unit"] for n in names}) != 1:
        return ""
    w0, w1, draw, mem = (ref[n]["value"] for n in names)
    unit = ref[names[0]]["unit"]
    waits = [ref.get(f"data wait SmallCNN workers={n}", {}).get("value") for n in (0, 1)]
    said = (f": their data-wait shares, {waits[0]:.0f}% and {waits[1]:.0f}%, say both waited on drawing"
            if None not in waits else "")
    return (f"reference ({device_name}, its own batch; timed apart): 0 and 1 worker fed {w0:.3g} and {w1:.3g} {unit}, "
            f"{w0 / draw:.2f}× and {w1 / draw:.2f}× its one-image draw rate ({draw:.3g}) and {mem / w0:.0f}× below a "
            f"batch in memory ({mem:.3g}){said}")


def loader_takeaway(base: Throughput, loaders: Sequence[Throughput], vs_base: Sequence[bench.Ratio],
                    cores: int) -> str:
    """Section 4 in one line: the data wait of workers=0 (`base`) against the `loaders` with workers, and
    whether their calls ran faster than workers=0's (`vs_base`, one ratio per loader, base over it),
    beyond the spread and beyond what two moments can differ by; '' without loaders."""
    if not loaders:
        return ""
    shares = [r.data_wait_share for r in loaders]
    lo, hi = f"{min(shares):.0%}", f"{max(shares):.0%}"
    waits = lo if lo == hi else f"{lo}–{hi}"
    faster = [r for r in vs_base if r.clear and r.value > 1]
    slower = [r for r in vs_base if r.clear and r.value < 1]
    def named(r: bench.Ratio, x: float) -> str:  # 'workers=1 1.09×'
        return (r.name.split(" vs ")[0].removeprefix("SmallCNN ") + f" {x:.2f}×"
                + (" (trained on 1 thread: read it against its own ceiling, below)" if "1 training thread" in r.name
                   else ""))
    speed = (f"and their calls ran faster: {'; '.join(named(r, r.value) for r in faster)}"
             if faster and not slower else "and some calls ran faster, some slower" if faster
             else f"and their calls ran slower: {'; '.join(named(r, 1 / r.value) for r in slower)}" if slower
             else "but whether their calls ran faster, these timings cannot tell")
    each = len(base.waits) == len(base.timing.samples) > 0  # each call's wait: the median of the calls less theirs
    bound = (base.timing.median_s / max(base.rest().median_s, 1e-9) if each  # workers=0's calls with no wait at all
             else 1 / max(1 - base.data_wait_share, 1e-9))
    how = ("its median call over the median of its calls less their wait" if each else
           "its median time over that time less its median wait")
    apart = any(r.apart for r in vs_base) and bound < verdicts.APART
    lead = ("\n  fastest loader setting here: workers=0, no worker at all" if slower and len(slower) == len(vs_base) else "")
    return (f"takeaway:{lead}\n  workers took the drawing out of the training process (data wait "
            f"{base.data_wait_share:.0%} of a call with workers=0, {waits} with workers), {speed}\n  {cores} cores here, "
            f"shared by the workers and the training threads\n  without its wait, workers=0's median call would be "
            f"{bound:.2f}× faster ({how})"
            + (f", under the {verdicts.APART:g}× by which two moments can differ, and loaders with workers were timed "
               "apart" if apart else ""))


def wait_lines(base: Throughput, ceilings: list[Throughput], loaders: list[Throughput], threads: int) -> str:
    """workers=0's calls split into waiting and the rest, the rest against the ceiling; on a CPU
    (a second ceiling, with 1 training thread) that ceiling against the first and the 1-thread
    loader against it (all timed in the same turns), with what a loader faster than its ceiling means."""
    rest = base.rest()  # workers=0 round by round, its wait taken out: the training part of its calls
    lines = [f"\nworkers=0, per call: {units.fmt_time(base.wait_s)} waiting for batches, "
             f"{units.fmt_time(rest.median_s)} the rest (medians of {len(base.waits)} calls)",
             bench.speedup(rest, ceilings[0].timing, "the ceiling (batch in memory) vs workers=0 without its wait")]
    if len(ceilings) > 1:
        lines.append(bench.speedup(ceilings[0].timing, ceilings[1].timing,
                                   f"batch in memory, 1 training thread vs {threads}"))
        one = next(r for r in loaders if "1 training thread" in r.timing.name)
        beyond = bench.speedup(ceilings[1].timing, one.timing, f"{one.timing.name} vs its ceiling (1 thread)")
        lines.append(beyond)
        two = lines[-2]  # 1 training thread over `threads`, on the batch in memory
        if two.clear and two.value < 1 and beyond.value <= 1 and beyond.grade in ("small", "negligible", "no difference"):
            lines.append(f"so on {threads} cores: one worker beside one training thread fed it at {beyond.value:.2f}× its "
                         f"1-thread ceiling, while the same core as a second training thread trains {1 / two.value:.2f}× "
                         "faster: here a core is worth more as a training thread than as a worker")
        if beyond.clear and beyond.value > 1:  # faster than training on a batch already in memory
            lines.append("  a loader cannot feed training faster than a batch already in memory: something else "
                         "differs between the two runs (a guess: the batches, drawn afresh or one batch again); "
                         "these numbers cannot tell what")
    return "\n".join(map(str, lines))


def resnet_lines(rows: list[bench.Timing], ratios: list[bench.Ratio], small: bench.Ratio, model: str,
                 batches: tuple[int, int], dev: torch.device | str) -> str:
    """The fastest ResNet configuration and channels_last's effect in fp32 on SmallCNN (`small`)
    against the ResNet's, when there are `rows`: each ratio is paired in its own turns, so two
    intervals that do not overlap say the effect differs between the models; then what 16 bits
    can do on `dev` (:func:`sixteen_bits_here`)."""
    return "\n".join(filter(None, [_resnet_rows(rows, ratios, small, model, batches), sixteen_bits_here(dev)]))


def _resnet_rows(rows: list[bench.Timing], ratios: list[bench.Ratio], small: bench.Ratio, model: str,
                 batches: tuple[int, int]) -> str:
    if not rows:
        return ""
    fastest = max(rows, key=lambda t: t.rate)
    pairs = [(r, r.name.split(" vs ")[0], f"{model} {r.name.split(' vs ')[1]}") for r in ratios if " vs " in r.name]
    tied = [b if a == fastest.name else a for r, a, b in pairs if not r.clear and fastest.name in (a, b)]
    line = (f"\nfastest here: {fastest.name} at {units.fmt_rate(fastest.rate, 'img/s')} "
            + (f"(not told apart from {', '.join(tied)} by the repeats)" if tied else
               "(the ratios above say which of the differences the repeats can tell)"))
    big = next((r for r in ratios if r.name.startswith(f"{model} fp32 channels_last vs fp32 NCHW")), None)
    if big is None:
        return line
    said = lambda r: r.phrase if r.clear else f"{r.grade} ({r.doubt})"  # noqa: E731
    sign = lambda r: (r.value > 1) - (r.value < 1) if r.clear else 0  # noqa: E731  faster, slower or neither
    both = f"({small.lo:.2f}–{small.hi:.2f}× and {big.lo:.2f}–{big.hi:.2f}×)"
    if small.inconclusive or big.inconclusive:  # the machine's drift was as large as the effect: nothing to compare
        end = ("\none of the two is inconclusive here, so whether the layout's effect differs between the models "
               "is not settled")
    elif small.hi < big.lo or big.hi < small.lo:  # two paired intervals that do not overlap, of two moments
        end = (f"\nthe layout's effect on the two models is not compared here: each ratio is paired within its own "
               f"turns, the two sets of turns ran minutes apart, and the models differ in more than the layout (their "
               f"convolutions; batches {batches[0]} and {batches[1]})")
    elif sign(small) == sign(big):
        end = ""
    else:
        end = (f"\nthe two intervals {both} overlap, so these repeats cannot tell whether the effect differs "
               "between the models")
    return (f"{line}\nchannels_last vs NCHW in fp32, each in its own turns: SmallCNN (batch {batches[0]}): {said(small)}; "
            f"{model} (batch {batches[1]}): {said(big)}{end}")


def sixteen_bits_here(dev: torch.device | str) -> str:
    """What 16 bits can do here: on a CPU whether it reports bf16 instructions, on a GPU its
    datasheet row; off CUDA, what the reference GPU run measured for the ResNet."""
    dev = torch.device(dev)
    if dev.type == "cpu":
        text = device.cpu_support("bf16")
    else:
        spec = datasheet.lookup(torch.cuda.get_device_name(dev))  # None for GPUs not in the table
        text = datasheet.table((spec,)) if spec else "This GPU is not in course_lib's datasheet table."
    if dev.type != "cuda":  # the same comparison at the gpu profile's size, on the reference GPU
        gpu_resnet = profiles.sizes("02_first_cnn", "gpu", memory_gib=80).resnet
        text += "\n\nOn a GPU: " + published.elsewhere("02_first_cnn", (f"{gpu_resnet} ",),
                                                       exclude=("cudnn.benchmark",))
        ref = report.reference("02_first_cnn")[1]
        cl, nchw = ref.get(f"{gpu_resnet} bf16 channels_last"), ref.get(f"{gpu_resnet} bf16 NCHW")
        if cl and nchw and f"{gpu_resnet} bf16 channels_last vs bf16 NCHW" not in ref:  # one change at a time
            text += (f"\n  {gpu_resnet} bf16 channels_last over bf16 NCHW: {cl['value'] / nchw['value']:.2f}×, the "
                     "ratio of the two rows' medians (derived here: this record, by an earlier version of this cell, "
                     "holds no such row)")
    return text


def cudnn_benchmark_absent(dev: torch.device | str) -> str:
    """Why cudnn.benchmark was not measured: the ResNet timing ran out of memory (CUDA), or it only
    acts on cuDNN (elsewhere: with the reference run's figure when there is one)."""
    if torch.device(dev).type == "cuda":
        return "cudnn.benchmark: not measured, the timing above ran out of memory."
    text = "cudnn.benchmark only affects cuDNN's convolutions on NVIDIA GPUs: a CPU run has nothing to measure."
    row = report.reference("02_first_cnn")[1].get("cudnn.benchmark on vs off")
    if row:
        text += "\n" + published.elsewhere("02_first_cnn", ("cudnn.benchmark on vs off",))
        if row.get("apart"):  # recorded before the two settings took turns
            text += ("\n(recorded by an earlier version of this cell, which timed the tuned step alone: its ratio "
                     "reads as timed apart; this cell times the two settings in turns)")
    return text
