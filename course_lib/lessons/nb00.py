"""Notebook 00 (setup check): its tables and sentences as text, and the exercise check (a
matrix's bytes). The cells read the machine; these functions only word what they read."""

from __future__ import annotations

from typing import Callable, Iterable, Sequence

import torch

from course_lib import bench, check, datasheet, device, peaks, profiles, published, units, verdicts


def fmt_cudnn(version: int | None) -> str:
    """cuDNN's version number as PyTorch reports it (92400) in dotted form ('9.24.0'); '-' for none."""
    return "-" if version is None else f"{version // 10000}.{version % 10000 // 100}.{version % 100}"


def two_columns(pairs: Iterable[tuple[str, object]], width: int) -> str:
    """(name, value) pairs as lines, the names padded to `width` characters."""
    return "\n".join(f"{name:<{width}} {value}" for name, value in pairs)


def bf16_words(value: str, cpu_flags: Sequence[str]) -> str:
    """The CPU's bf16 row: 'True' means bf16 runs, not that this CPU has bf16 instructions
    (which of `cpu_flags` name bf16), and without them it runs emulated."""
    native = [f for f in cpu_flags if "bf16" in f]
    if native:
        return f"{value} (runs, with bf16 instructions: {', '.join(native)})"
    return f"{value} (runs, emulated: no bf16 instructions reported; notebook 01 measures how slow)"


def devices_text(info: device.DeviceInfo, gpus: Sequence[object], cpu_flags: Sequence[str]) -> str:
    """What :func:`device.describe` read (less the versions section 1 printed), one line per GPU
    in `gpus` (``torch.cuda.get_device_properties``), and what 16-bit training will use here."""
    rows = [(k, bf16_words(v, cpu_flags) if k == "bf16" and info.kind == "cpu" else v)
            for k, v in info.rows() if k not in ("torch", "python")]
    lines = [two_columns(rows, 12)]
    lines += [f"cuda:{i}  {p.name} | {p.total_memory / 2**30:.1f} GiB | sm {p.major}.{p.minor} "
              f"| {p.multi_processor_count} SMs" for i, p in enumerate(gpus)]
    if info.kind == "cuda" and not info.bf16:
        lines.append(f"bf16 False: sm {info.capability} has no bf16 tensor cores (PyTorch would emulate it, "
                     "slowly); 16-bit training here uses fp16 + GradScaler.")
    if info.gpu_count == 0:
        lines += ["No CUDA GPU visible: the course runs on the CPU and says where a GPU would show more.",
                  f"CPU 16-bit instructions: {', '.join(cpu_flags) or 'none reported'} (bf16 and fp16 run on "
                  "any CPU; whether these instructions make them faster than fp32 here, notebooks 01 and 03 measure)"]
    return "\n".join(lines)


def profile_text(asked: str, profile: str, cfg: object, *, cuda: bool, env: str | None) -> str:
    """How the PROFILE `asked` for became `profile` (given, or picked by 'auto' from `cuda`), the
    COURSE_PROFILE `env`, the profile's budget, and the sizes this notebook uses under `cfg`."""
    if asked.strip().lower() == "auto":
        why = "auto picks " + ("gpu: PyTorch sees a CUDA GPU" if cuda else "cpu: PyTorch sees no CUDA GPU")
    else:
        why = "a profile name, used as given"
    lines = [f"PROFILE asked: {asked!r} → profile {profile!r} ({why}); COURSE_PROFILE in the environment: {env!r}",
             f"budget: {profiles.BUDGETS[profile]}"]
    if cfg.why:  # gpu: the size class comes from the GPU's memory
        lines.append(f"sizes: {cfg.why}")
    lines.append(f"this notebook's sizes: the accuracy check multiplies {cfg.check_n}×{cfg.check_n} matrices; "
                 f"the rate is measured at {cfg.cpu_n}×{cfg.cpu_n} on the CPU"
                 + (f" and {cfg.gpu_n}×{cfg.gpu_n} on the GPU" if cuda else ""))
    return "\n".join(lines)


def readiness_text(rows: Sequence[tuple[str, str, str]]) -> str:
    """The readiness table (:func:`course_lib.workshop.catalog.readiness`'s rows) for the
    notebooks that exist, and how many more are being written."""
    written = [row for row in rows if row[1] != "not written yet"]
    width = max(len(stem) for stem, _, _ in written)
    lines = [f"{'notebook':<{width}}  {'status':<15}  what this machine can demonstrate"]
    lines += [f"{stem:<{width}}  {status:<15}  {what}" for stem, status, what in written]
    if len(written) < len(rows):
        lines.append(f"{len(rows) - len(written)} more notebooks are being written.")
    return "\n".join(lines)


def rates_text(hand: bench.Timing, timings: Sequence[bench.Timing], apart: bench.Ratio) -> str:
    """The matmul rates of section 6: the `hand`-timed loop's, `timings` (``bench.time_matmul``
    on the CPU, and on the GPU where there is one), what a GPU did with the cell where there is
    none (the recorded reference run), and `apart`, the CPU's two rates compared."""
    lines = [str(hand), *map(str, timings)]
    if len(timings) == 1:
        lines.append("No GPU here. What the reference machine did with this cell (each row names the device it ran on): "
                     + published.elsewhere("00_setup_check", ("matmul",)))
    return "\n".join(lines + [str(apart)])


def timing_split(apart: bench.Ratio, paired: bench.Ratio) -> str:
    """How much of `apart` (two ways of timing, timed at two moments) the way of timing explains,
    by `paired` (the same two ways timed in turns), and how much the moments."""
    way = f"differs ({paired.phrase})" if paired.clear else f"shows no difference to tell ({paired.doubt})"
    if not (apart.clear or paired.clear):
        within = apart.within_noise or apart.single  # the ratio timed apart within its timings' spreads
        head = f"timed apart {apart.value:.2f}×, in turns {paired.value:.2f}×: "
        if paired.within_noise and not paired.too_wide:
            return head + (f"in turns the two ways of timing agree ({paired.lo:.2f}–{paired.hi:.2f}×); " + (
                f"the ratio timed apart ({apart.value:.2f}×) lies within its timings' spreads" if within else
                f"so the {apart.value:.2f}× timed apart is not the way of timing: it came with the two moments, by "
                f"less than the {verdicts.APART:g}× two moments can differ by"))
        return head + (f"in turns, the interval ({paired.lo:.2f}–{paired.hi:.2f}×) is too wide to tell the two ways of "
                       f"timing apart, and the ratio timed apart ({apart.value:.2f}×) "
                       + ("lies within its timings' spreads" if within else "is closer to 1 than two moments can differ by")
                       + ": this run shows no effect of either")
    if paired.lo <= apart.value <= paired.hi:  # the way of timing alone could explain all of it, or none
        return (f"timed apart {apart.value:.2f}×, in turns {paired.value:.2f}× "
                f"({paired.lo:.2f}–{paired.hi:.2f}×): the way of timing {way}; its interval holds the whole {apart.value:.2f}×, so this run cannot split "
                "it between the way of timing and the moments the two were measured at")
    return (f"timed apart {apart.value:.2f}×, in turns {paired.value:.2f}× ({paired.lo:.2f}–{paired.hi:.2f}×): the way "
            f"of timing {way}; the rest, {apart.lo / paired.hi:.2f}–{apart.hi / paired.lo:.2f}× (both intervals "
            "carried through), came with when "
            "each was timed (the machine's speed then, or the first loop's colder start: this run does not split those)")


def peak_text(peak: bench.Timing, note: peaks.Note, row: bench.Timing, offered: peaks.Offered) -> str:
    """The run's stored `peak` and where it came from (`note`), `row` as a fraction of it, why
    that fraction can differ from 100 %, and what offering `row` to the peaks did (`offered`):
    where it raised the peak, the two quartiles the rule compared instead of the fraction."""
    if offered.raised:
        def fmt_rate(v: float, unit: str, digits: int = 1) -> str:  # the quartiles to 2 decimals: the rule's edge
            scale, prefixed = units.rate_scale(v, unit)
            return f"{v / scale:.{digits}f} {prefixed}"
        return "\n".join([
            f"{peak}\n  {note}",
            f"the row timed above, {row.name}, {fmt_rate(row.rate, row.unit)}: its slow quartile, "
            f"{fmt_rate(row.rate_lo, row.unit, 2)}, lies above the peak measurement's fast one, "
            f"{fmt_rate(peak.rate_hi, peak.unit, 2)}, so the stored peak is raised to it: the fastest reading so far "
            "(two moments: not a verdict that one ran faster). The later notebooks divide by "
            f"{fmt_rate(row.rate, row.unit)}"])
    same = row.name == peak.name.removeprefix("peak: ")  # the very matmul the peak was taken from
    lines = [str(peak), f"  {note}", bench.fmt_vs_peak(row, peak),
             "  (that row and the peak were timed apart, not in turns: " + (
                 "they are the same matmul, so the fraction is the machine's change of speed between the two and "
                 "each timing's own noise, not split here)"
                 if same else "the fraction also holds the machine's change of speed between the two)")]
    if offered:
        lines.append(f"  {row.name}: {offered}")
    return "\n".join(lines)


def datasheet_text(peak: bench.Timing, gpu_name: str | None) -> str:
    """This run's fp32 `peak` against the datasheet fp32 figure of the GPU `gpu_name` (None: no
    GPU here), or where the datasheet figures are."""
    where = "datasheet figures for common GPUs: notebook 01, section 3"
    spec = datasheet.lookup(gpu_name) if gpu_name else None
    if gpu_name is None:
        return where
    if spec is None:
        return f"{where}\n{gpu_name} is not in the datasheet table."
    return (f"{where}\nthis run's fp32 peak, {units.fmt_rate(peak.rate, 'FLOP/s')} ({peak.name}) = "
            f"{peak.rate / (spec.fp32_tflops * 1e12):.0%} of the {spec.name} datasheet fp32 peak "
            f"({spec.fp32_tflops:g} TFLOP/s, datasheet)")


@check.exercise()
def check_matrix_bytes(fn: Callable[[int, torch.dtype], int]) -> None:
    """Exercise (00): `fn(n, dtype)` must return the bytes of an n×n tensor of `dtype`, as
    PyTorch's ``nbytes`` reports them."""
    for n, dtype in [(3, torch.float32), (100, torch.bfloat16), (64, torch.float64), (5, torch.int8)]:
        check.expect(f"bytes of {n}×{n} {dtype}", fn(n, dtype), torch.empty(n, n, dtype=dtype).nbytes)
    check.expect("an 8192×8192 fp32 matrix", units.fmt_bytes(fn(8192, torch.float32)), units.fmt_bytes(8192**2 * 4))
