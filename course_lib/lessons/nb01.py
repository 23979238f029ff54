"""Notebook 01 (GPU vs CPU): the exercise checks, what its curve says about the stored peak, and
its measurements' lines as text (the cells measure; these functions word what they measured)."""

from __future__ import annotations

import dataclasses

import re
from typing import Callable, Mapping, Sequence

from course_lib import bench, check, datasheet, device, peaks, profiles, published, report, units

NB = "01_gpu_vs_cpu"
COPY_KEYS = ["thirdparty_quadro_rtx6000_pinned_vs_pageable_h2d_1mib", "thirdparty_gh200_pageable_vs_pinned_1gib"]
D2H_KEY = "pytorch_tutorial_nonblocking_d2h_erroneous"
STEPS_NOT_MATMULS = ("whole training steps of other models, not one matmul: a step also runs element-wise work and "
                     "the optimizer, which a matmul format speeds up less or not at all")
FORMAT_KEYS = ["karpathy_gpt2_124m_fp32_to_tf32_1000ms_to_333ms", "dle_resnet50_a100_1gpu_tf32_vs_amp"]


def cpu_16bit_verdict(fmt: str, ratio: bench.Ratio, flags: Sequence[str],
                      profiled: str = "nor does any notebook for a matmul; the cells below time the formats "
                                      "again at other sizes, where the ratio can differ") -> str:
    """One sentence on `ratio`, a CPU's speed in `fmt` ("bf16" or "fp16") over fp32 (a matmul,
    or a training step as in 03), read with the 16-bit instructions the CPU reports (`flags`,
    :func:`device.cpu_16bit_flags`); `profiled`: what measures where the time goes."""
    has = [f for f in flags if f.endswith(fmt)]
    reports = f"this CPU reports {', '.join(has)}" if has else f"this CPU reports no {fmt} instructions"
    if not ratio.clear:
        return f"{fmt} and fp32 cannot be told apart here ({ratio.doubt}); {reports}"
    if ratio.value > 1:
        return (f"{fmt} ran {ratio.phrase} than fp32, and {reports}: instructions that do {fmt} arithmetic "
                "(whether its kernels used them, this run does not measure)" if has
                else f"{fmt} ran {ratio.phrase} than fp32 although {reports}: PyTorch's {fmt} path ran faster here "
                "all the same")
    where = f"where that time goes, this cell does not measure, {profiled}"
    return (f"{fmt} ran {ratio.phrase} than fp32 although {reports}: PyTorch's {fmt} path did not gain from them "
            f"here ({where})" if has else
            f"{fmt} ran {ratio.phrase} than fp32, and {reports}: PyTorch's {fmt} path runs without them here "
            f"({where})")


def point_at_peak_size(curve: Sequence[bench.Timing], peak: bench.Timing) -> bench.Timing:
    """The point of a rate `curve` at the size of the stored `peak` (its name without 'peak: '):
    the same matmul measured at another moment; the curve's best point when that size is not in it."""
    return next((t for t in curve if t.name == peak.name.removeprefix("peak: ")), None) or bench.best_rate(curve)


def same_peak_verdict(same: bench.Ratio, peak: bench.Timing, sizes: Sequence[int]) -> str:
    """One sentence on `same`, a rate curve's point over this run's stored `peak`
    (:mod:`course_lib.peaks`): the same size where the curve has it, else its best point.
    Agreement, or what a difference means; "" where the ratio's own line already says it was
    timed at two moments (inconclusive). `sizes` are the curve's."""
    peak_n = bench.matmul_n(peak.work)
    if same.too_wide:
        return (f"the spreads are too wide ({same.lo:.2f}–{same.hi:.2f}×) to say whether the machine ran as fast "
                "as when the peak was measured")
    if same.within_noise or same.single:
        return (f"the two measurements of the {peak_n}×{peak_n} matmul agree within their spreads: the "
                "machine ran as fast during this curve as when the peak was measured")
    if peak_n not in sizes:
        if same.value < 1 and peak_n > max(sizes):
            return (f"the curve stops at n={max(sizes)}, the peak came from n={peak_n}: a larger "
                    f"matmul, timed at another moment, ran {1 / same.value - 1:.0%} faster by the medians")
        return (f"the curve's best point and the peak (n={peak_n}, not in this curve) differ by "
                f"{abs(same.value - 1):.0%} by the medians: other sizes, measured at other moments")
    if same.inconclusive:  # the ratio's own line says it was timed at two moments
        return ""
    return "timed apart: the machine's pace at each moment is part of that gap"


def gain_between(fp32: bench.Timing, half: bench.Timing, fp32_other: bench.Timing, half_other: bench.Timing,
                 name: str) -> bench.Ratio:
    """The 16-bit gain over fp32 at one size (`half` against `fp32`) over the gain at another
    (`half_other` against `fp32_other`), round by round: the four timed in the same rounds, paired."""
    def per_fp32(h: bench.Timing, f: bench.Timing) -> bench.Timing:  # the 16-bit time as a share of fp32's, per round
        t = bench.timing_of([th / tf for th, tf in zip(h.samples, f.samples)], name=h.name, device="cpu",
                            turns_id=h.turns_id)
        return dataclasses.replace(t, device=h.device)  # the label it was timed on
    return bench.speedup(per_fp32(half_other, fp32_other), per_fp32(half, fp32), name)


def gain_by_size_verdict(gain: bench.Ratio, other: bench.Ratio, n: int, other_n: int,
                         between: bench.Ratio | None = None) -> str:
    """Whether a 16-bit format's gain over fp32 differs between two sizes: `gain` at `n` and
    `other` at `other_n`, both timed in the same rounds (so drift hits them alike); `between`,
    their ratio round by round (:func:`gain_between`), decides where it is given."""
    if between is not None:
        head = (f"the 16-bit rate over fp32's is {gain.value:.3g}× at n={n} and {other.value:.3g}× at n={other_n}; "
                f"round by round, the first over the second: {between.value:.3g}× ({between.lo:.3g}–{between.hi:.3g})")
        if between.clear:
            by = max(between.value, 1 / between.value) - 1
            return (f"{head}, beyond the spread: the gain differs by {by:.1%} between the two sizes, so it depends on "
                    "the size, not only on the format")
        return head + (": too wide to tell whether it depends on the size" if between.too_wide else
                       ": inconclusive (the machine's drift as large)" if between.inconclusive else
                       ": at these two sizes, no measurable difference")
    if gain.too_wide or other.too_wide:
        return (f"the intervals ({gain.lo:.3g}–{gain.hi:.3g}× at n={n}, {other.lo:.3g}–{other.hi:.3g}× at "
                f"n={other_n}) are too wide to say whether the 16-bit rate over fp32's depends on the size")
    if gain.lo <= other.hi and other.lo <= gain.hi:
        if max(gain.hi / gain.lo, other.hi / other.lo) > 1.5:
            return (f"the 16-bit rate over fp32's at n={n} ({gain.value:.3g}×) and n={other_n} ({other.value:.3g}×), "
                    f"timed in the same rounds: their intervals ({gain.lo:.3g}–{gain.hi:.3g}×, {other.lo:.3g}–"
                    f"{other.hi:.3g}×) overlap and are too wide to tell whether it depends on the size")
        return (f"the 16-bit rate over fp32's at n={n} ({gain.value:.3g}×) and n={other_n} ({other.value:.3g}×) agree "
                "within their intervals (timed in the same rounds): at these two sizes, no measurable difference")
    return (f"the 16-bit rate over fp32's is {other.value:.3g}× at n={other_n} and {gain.value:.3g}× at n={n}, intervals apart, "
            "timed in the same rounds: it depends on the size, not only on the format")


NAIVE, SYNCED = "no synchronize (wall clock)", "synchronize + wall clock"  # section 2's ways of timing


def async_text(times: Mapping[str, float], what: str, where: str) -> str:
    """Section 2's table, seconds per matmul `what` by way of timing (`times`, with :data:`NAIVE`
    and :data:`SYNCED`), and how much faster it looked without synchronize on `where`; without
    `times` (no GPU), :func:`async_elsewhere`."""
    if not times:
        return async_elsewhere()
    lines = [f"{how:<30} | {units.fmt_time(sec):>9} per matmul" for how, sec in times.items()]
    lines.append(f"without synchronize, {what} fp32 looked {times[SYNCED] / times[NAIVE]:.0f}× faster than it is "
                 f"| {where}")
    return "\n".join(lines)


def async_elsewhere() -> str:
    """Section 2 on a machine without a GPU: the recorded reference run's rows, and how much
    faster its matmul looked without synchronize."""
    lines = [published.elsewhere(NB, ("async: time", "async: matmul"))]
    ref_device, ref = report.reference(NB)
    naive, events = ref.get("async: time without sync"), ref.get("async: time with CUDA events")
    if naive and events:  # the one number the section is about, from the recorded run
        lines.append(f"on the {ref_device}, the matmul looked {events['value'] / naive['value']:.0f}× faster than "
                     "it is when timed without synchronize")
    return "\n".join(lines)


def reads_text(reads: Mapping[str, tuple[float, float, float]]) -> str:
    """Whether each read (name: '.item()', 'print') after queueing 10 matmuls waited for them, from
    (seconds queueing, seconds queueing and reading, the matmuls' seconds on the GPU); without
    `reads` (no GPU), the recorded reference run's."""
    if not reads:
        return published.elsewhere(NB, ("async: 10 queued",)) + _reads_read(report.reference(NB)[1])
    lines = []
    for name, (queued_s, read_s, gpu_s) in reads.items():
        waited = read_s >= 0.5 * gpu_s  # at least half of the matmuls' GPU time?
        lines.append(f"{name:<8} queueing 10 matmuls took {units.fmt_time(queued_s)}; with the read, "
                     f"{units.fmt_time(read_s)} (the 10 matmuls take {units.fmt_time(gpu_s)} on the GPU) → "
                     f"{'it waited for the queue' if waited else 'it did not wait for the whole queue'}")
    return "\n".join(lines)


def _reads_read(ref: Mapping[str, dict]) -> str:
    """The reference's two reads read against its 10 matmuls' time on the GPU (CUDA events): whether
    each waited for the whole queue, and what is left beyond it; '' without those rows."""
    events = ref.get("async: time with CUDA events")
    rows = {name: ref.get(f"async: 10 queued matmuls, then {name}") for name in (".item()", "print")}
    if not events or not all(rows.values()):
        return ""
    queue_ms = 10 * events["value"]  # the 10 matmuls on the GPU, by its own clock
    said = [f"{name} returned after {units.fmt_time(row['value'] / 1e3)}"
            + (f" ({units.fmt_time((row['value'] - queue_ms) / 1e3)} beyond the queue: what print does after the wait, which this one run does not time)"
               if row["value"] > 1.5 * queue_ms else "") for name, row in rows.items()]
    waited = all(row["value"] >= 0.5 * queue_ms for row in rows.values())
    return (f"\nreading them: the 10 matmuls took {units.fmt_time(queue_ms / 1e3)} on that GPU (10 × its CUDA-events "
            f"time); {' and '.join(said)}: " + ("each read waited for the whole queue" if waited else
                                               "not every read waited for the whole queue"))


def sizes_in_00(ran00: Mapping[str, dict] | None, curve: Sequence[bench.Timing]) -> str:
    """The curve's points that notebook 00 timed earlier in this run (the same matmul, by name, on
    the same device), each beside 00's: within both quartiles or how far apart, and why two notebooks'
    timings are not paired; '' where 00 did not run so or timed none of these sizes."""
    lines = []
    for t in curve:
        row = (ran00 or {}).get(t.name)
        vs = report.rate_vs_row(t, row) if row and row.get("note") == t.device else None
        if vs is not None:
            lines.append(f"{t.name}: notebook 00 timed it earlier in this run at {report.fmt_row_value(row)} "
                         f"{row['unit']}, this curve at {units.fmt_rate(t.rate, t.unit)}: {report.apart_words(vs)}")
    if not lines:
        return ""
    return "\n".join(lines) + (" (another moment, in another notebook: the machine's speed at each moment is part "
                               "of any gap, so only timings of one set of rounds are compared)")


def curve_text(curve: Sequence[bench.Timing], sizes: Sequence[int], *, stored: bench.Timing, note: peaks.Note,
               same: bench.Ratio, offered: peaks.Offered) -> str:
    """Section 3 for one device: the `stored` peak and its `note`, `same` (the curve's point at the
    peak's size over it) and what that says, what offering the curve's best point did
    (`offered`), then the `curve`'s rows as % of its own fastest point, timed in the same rounds
    (one yardstick that a slow spell moves with every row), and its verdicts."""
    lines = [str(stored), f"  {note}", str(same)]
    if not (same.within_noise and not same.too_wide):  # agreement needs no second sentence
        lines += ["  " + said for said in [same_peak_verdict(same, stored, sizes)] if said]
    if offered and offered.raised:  # a point that did not raise the peak changes nothing below
        lines.append(f"  {bench.best_rate(curve).name}: {offered}")
    fastest = bench.best_rate(curve)
    lines.append(f"% of fastest below: of {units.fmt_rate(fastest.rate, 'FLOP/s')}, {fastest.name}, the fastest "
                 "point of these same rounds")
    lines += [f"{t} | {t.rate / fastest.rate:6.1%} of fastest" for t in curve]
    return "\n".join(lines + bench.curve_verdicts(curve, sizes)) + "\n"


def best_name(device_type: str) -> str:
    """The report's key for the best point of device `device_type`'s rate curve ('cuda' → 'gpu …')."""
    return f"{'cpu' if device_type == 'cpu' else 'gpu'} fp32 matmul, best of the rate curve"


def vs_datasheet(cpu_peak: bench.Timing, gpu_peak: bench.Timing | None = None, gpu_name: str = "") -> str:
    """The run's fp32 peaks against NVIDIA's datasheet: with a GPU, its peak against the CPU's
    and against its datasheet figure; without, the datasheet table, how many times the CPU's
    peak its slowest and fastest GPUs are rated at, and the recorded GPU run's peak."""
    if gpu_peak is not None:
        lines = [str(bench.rate_ratio(gpu_peak, cpu_peak, "GPU fp32 peak vs CPU fp32 peak"))]
        spec = datasheet.lookup(gpu_name)
        lines.append(f"{gpu_name} is not in the datasheet table." if spec is None else
                     f"measured fp32 peak {units.fmt_rate(gpu_peak.rate, 'FLOP/s')} = "
                     f"{gpu_peak.rate / (spec.fp32_tflops * 1e12):.0%} of the {spec.name} fp32 peak, "
                     f"{spec.fp32_tflops:g} TFLOP/s (datasheet)")
        return "\n".join(lines)
    ref_device, ref = report.reference(NB)
    row = ref.get("gpu fp32 matmul peak")
    vs = report.rate_vs_row(cpu_peak, row) if row else None  # this CPU's peak over the reference GPU's: both measured
    measured = (f"\nboth measured, both the fastest fp32 matmul each found: the reference {ref_device}'s peak is "
                f"{1 / vs[0]:,.0f}× this CPU's ({1 / vs[2]:,.0f}–{1 / vs[1]:,.0f}× from their quartiles; its matmul "
                "larger, as a GPU needs to reach its peak; two machines, at two moments)" if vs else "")
    host = ref.get("cpu fp32 matmul peak")
    if vs and host and host.get("unit") == row.get("unit"):  # one machine: its GPU's peak over its own CPU's
        measured += (f"\non that one machine, its GPU's peak is {row['value'] / host['value']:,.0f}× its own CPU's "
                     f"({report.fmt_row_value(host)} {host['unit']}, {host.get('note', '')}, its host's threads): "
                     "how much a GPU adds depends on the CPU it is set against")
    return "\n".join([
        datasheet.table(),  # the course prints the full datasheet table here only
        f"this CPU's measured fp32 peak: {units.fmt_rate(cpu_peak.rate, 'FLOP/s')}; the table's column is NVIDIA's "
        "ratings, not measurements, so it is not set against it: a GPU's measured figure is, below",
        "What a GPU measured with this notebook's code: " + published.elsewhere(NB, ("gpu fp32 matmul peak",))
        + measured])


def early_read_text(read: tuple[float, float] | None) -> str:
    """What reading a pinned host buffer before and after synchronize saw, `read` = (early, late),
    2 expected; then (also without a GPU, `read` None) what PyTorch's tutorial found."""
    tutorial = "What PyTorch's own tutorial found on a GPU: " + published.elsewhere(NB, keys=[D2H_KEY])
    if read is None:
        return tutorial
    early, late = read
    return "\n".join([f"mean of the host buffer: {early:g} read before synchronize, {late:g} after (2 expected)",
                      "the early read saw stale data" if early != 2.0 else
                      "this time the copy had landed before the early read; the read was still unsafe", tutorial])


def batch_copy_text(batch_bytes: int, copies: Sequence[bench.Timing]) -> str:
    """How long one batch of `batch_bytes` takes to reach the GPU at each measured bandwidth
    (`copies`, host→device); without them, at the recorded reference run's."""
    if copies:
        return "\n".join(f"one {units.fmt_bytes(batch_bytes)} batch, {t.name.split()[-1]:>8}: "
                         f"{units.fmt_time(batch_bytes / t.rate)} at {units.fmt_rate(t.rate, 'B/s')} | {t.device}"
                         for t in copies)
    lines = [f"On a GPU machine this converts the measured bandwidths into the time one "
             f"{units.fmt_bytes(batch_bytes)} batch takes to reach the GPU. With the recorded reference run's:"]
    ref_device, ref_rows = report.reference(NB)
    for key, row in ref_rows.items():
        if key.startswith("H→D") and row["unit"] == "GB/s":  # the reference machine's copies, not this one's
            lines.append(f"  one batch, {key.split()[-1]:>8}: {units.fmt_time(batch_bytes / (row['value'] * 1e9))} "
                         f"at {row['value']:.4g} GB/s | {ref_device}, recorded reference run, not on this machine")
    return "\n".join(lines)


def formats_text(info: device.DeviceInfo, ratios: Sequence[bench.Ratio], offered: Mapping[str, peaks.Offered],
                 flags: Sequence[str] = ()) -> str:
    """Section 5's notes on the formats' ratios to fp32 (`ratios`, bf16's first on a CPU): the
    CPU's bf16 verdict read with its 16-bit instructions (`flags`), or what this GPU lacks
    (`info`); then what offering each format's row to the run's peaks did (`offered`)."""
    lines = []
    if info.kind == "cpu":
        lines += [f"{device.cpu_name()}: {cpu_16bit_verdict('bf16', ratios[0], flags)}",
                  "(PyTorch's CPU fp32 and bf16 matmuls can run through different libraries, MKL or oneDNN; "
                  "TF32 is a GPU tensor-core format, so there is no TF32 row here)"]
    elif not info.tf32:
        lines.append(f"This GPU (sm {info.capability}) has no TF32 tensor cores: there is no TF32 row.")
    if info.kind == "cuda" and not info.bf16:
        lines.append(f"This GPU (sm {info.capability}) has no bf16 tensor cores: PyTorch emulates bf16 "
                     "there, which is why the float16 row is the one to use on it.")
    lines += [f"{name}: {said}" for name, said in offered.items() if said]
    return "\n".join(lines)


def formats_elsewhere(formats: Sequence[bench.Timing], fmts: Sequence[str], gpu_name: str | None) -> str:
    """Section 5 against others' figures: on a GPU (`gpu_name`), each format's rate as a share
    of its datasheet peak (`fmts`: the datasheet's name of each row's format) and the published
    training-step figures; without one, where the datasheet is, the recorded GPU run's formats
    and the published figures."""
    if gpu_name is None:
        gpu_n = profiles.sizes(NB, "gpu", memory_gib=80).dtype_n  # the gpu profile's size
        return ("What GPUs are rated at in TF32 and bf16 (datasheet, not measured here): the table in section 3.\n"
                "What GPUs measured: " + published.elsewhere(
                    NB, (f"matmul {gpu_n}×{gpu_n}", "float32+TF32 vs", "float16 vs", "bfloat16 vs"), FORMAT_KEYS,
                    unlike=STEPS_NOT_MATMULS))
    spec, lines = datasheet.lookup(gpu_name), []
    for t, fmt in zip(formats, fmts):
        peak_tf = datasheet.peak_tflops(spec, fmt) if spec else None
        if peak_tf:
            lines.append(f"{t.name}: {units.fmt_rate(t.rate, 'FLOP/s')} = {t.rate / (peak_tf * 1e12):.0%} of "
                         f"the {spec.name} {fmt} peak, {peak_tf:g} TFLOP/s (datasheet)")
    return "\n".join(lines + ["For comparison, " + published.elsewhere(NB, keys=FORMAT_KEYS, unlike=STEPS_NOT_MATMULS)])


def sizes_text(rows: Sequence[bench.Timing], earlier: Mapping[str, Sequence[bench.Timing]],
               mult8: bench.Ratio, offered: peaks.Offered) -> str:
    """One format of the multiple-of-8 section: its `rows` (n, n − 1, section 5's size), the last
    against the same matmul timed `earlier` (where: rows) in one line, the n vs n − 1 ratio `mult8`,
    and what offering the fastest row to the run's peaks did (`offered`)."""
    at_n = rows[-1]
    lines = [str(t) for t in rows]
    again = [(where, bench.rate_ratio(at_n, before)) for where, timed in earlier.items()  # the same matmul, before
             if (before := next((t for t in timed if t.name == at_n.name), None))]
    if again:  # one line: timed apart, each says only how the machine's pace moved (verdicts.moments_words)
        lines.append(f"{at_n.name.removeprefix('matmul ')} at other moments of this run: "
                     + "; ".join(f"{where} {r.value:.2f}× ({r.lo:.2f}–{r.hi:.2f})" for where, r in again)
                     + (": the same matmul, the same within their spreads" if all(r.lo <= 1 <= r.hi for _, r in again)
                        else ": the same matmul; what moved its pace between the moments is not measured here"))
    lines.append(str(mult8))
    if offered:  # the fastest of the rows is the one offered
        lines.append(f"{bench.best_rate(rows).name}: {offered}")
    return "\n".join(lines)


def mult8_elsewhere() -> str:
    """The multiple-of-8 section on a GPU: the recorded reference run's n vs n − 1 rows (its own
    sizes, named in each row) and the matmuls they compare, in a block of their own; one line
    saying so when none is recorded."""
    _, ref = report.reference(NB)
    ratios = {k: m.groups() for k in ref if (m := re.fullmatch(r"\w+ rate, n=(\d+) vs n=(\d+)", k))}
    if not ratios:
        return "(no reference GPU run of this section is recorded in results/ yet)"
    sizes = sorted({int(n) for pair in ratios.values() for n in pair}, reverse=True)
    prefixes = (*(f"matmul {n}×{n} " for n in sizes), *ratios)  # the matmuls compared, then the ratios
    return ("The same section on a GPU, at its own sizes (a tensor core's tiles, not a CPU's vectors):\n"
            + published.elsewhere(NB, prefixes))


def raised_text(where: str, final: bench.Timing, read: bench.Timing) -> str:
    """The fp32 peak of device `where` raised by a row of this notebook to `final` from `read` (the one
    this notebook read at its start, and the notebooks before it divided by)."""
    return (f"{where}: the run's fp32 peak is now {units.fmt_rate(final.rate, 'FLOP/s')} "
            f"({final.name.removeprefix('peak: ')}), raised by a row of this notebook; the notebooks before it "
            f"divided by {units.fmt_rate(read.rate, 'FLOP/s')}. The table below holds the raised one.")


@check.exercise()
def check_flop_count(fn: Callable[[int, int, int], float]) -> None:
    """Exercise (01): `fn(m, k, n)` must return the FLOPs of an (m×k) @ (k×n) matmul."""
    for m, k, n in [(1, 1, 1), (2, 3, 4), (128, 64, 32), (4096, 4096, 4096)]:
        got, want = fn(m, k, n), 2 * m * k * n
        if got != want:
            hint = " (a multiply-add is 2 FLOPs)" if got * 2 == want else ""
            raise AssertionError(f"flops({m}, {k}, {n}) = {got:,}, expected {want:,}{hint}")
    check.passed("flop count for (m×k) @ (k×n): 2·m·k·n on 4 shapes")


@check.exercise()
def check_transfer_time(fn: Callable[[int, float], float]) -> None:
    """Exercise (01): `fn(nbytes, gb_per_s)` must return seconds to copy `nbytes` at that rate."""
    for nbytes, rate in [(10**9, 10.0), (256 * 2**20, 25.0), (1, 1.0)]:
        got, want = fn(nbytes, rate), nbytes / (rate * 1e9)
        if abs(got - want) > 1e-9 + 1e-6 * want:
            raise AssertionError(f"transfer({nbytes:,} B, {rate} GB/s) = {got:.3g} s, expected {want:.3g} s")
    check.passed("transfer time = bytes / (GB/s · 1e9) on 3 cases")
