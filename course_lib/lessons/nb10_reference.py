"""Notebook 10's reference GPU, read off a GPU: the GPT its run profiled (another than a cpu run's), how
long its GPU waited for the host (without the profiler first, profiled as a reading that is probably high), what its
logging, compiled and CUDA-graph steps measured, and what a read waits for there (notebook 01's record).
Each function returns the text a cell prints; :mod:`course_lib.lessons.nb10` re-exports them."""

from __future__ import annotations

from typing import Mapping

import torch

from course_lib import datasheet, profiles, report
from course_lib.lessons.nb08 import reference_gpts
from course_lib.models import GPT, GPTConfig

NB = "10_compile_and_profile"
REGIONS = "compiled regions per forward, tensor in the model"  # recorded since the .item() copy has its own forward
UPPER = "probably high: the profiler's CPU time per op makes the GPU wait more (reasoning, not measured)"


def bound(waited: float) -> str:
    """A GPU step's regime by the share of it the GPU waited for the CPU: launch-bound from half the
    step, partly so from a fifth, else GPU-bound (the glossary's rule)."""
    return "launch-bound" if waited >= 0.5 else "partly launch-bound" if waited >= 0.2 else "GPU-bound"


def reference_sizes(device: str | None):
    """The gpu profile's sizes of this notebook for the reference GPU's memory (its GPT), or None where
    the device is not in the datasheet table (or no reference run is recorded)."""
    spec = datasheet.lookup(device or "")
    return None if spec is None else profiles.sizes(NB, "gpu", memory_gib=spec.memory_gib)


def reference_gpt(short: bool = False) -> str:
    """The GPT the reference run profiled, said once where its rows first appear: its `gpu` sizes for
    the reference GPU's memory, which are not this run's ('' without a reference run); `short`: without the note
    on the other notebooks' reference GPTs."""
    device = report.reference_meta(NB).get("device")
    g = reference_sizes(device)
    if g is None:
        return ""
    return (f"the reference ({device}) profiled the gpu profile's GPT: {g.n_layer} layers, width {g.n_embd}, "
            f"T = {g.block}, batch {g.batch} ({g.batch * g.block:,} tokens a step), not this run's; its rows below are "
            f"that GPT's" + ("" if short else f" {reference_gpts()}"))


def own_gpt() -> str:
    """'the reference run's own GPT: 6 layers, width 768, T = 1024, batch 8', or '' without a reference run."""
    g = reference_sizes(report.reference(NB)[0])
    return f"the reference run's own GPT: {g.n_layer} layers, width {g.n_embd}, T = {g.block}, batch {g.batch}" if g else ""


def reference_kinds() -> str:
    """Off a GPU, the reference GPU's shares of its op time (its kernels' time) by kind, with its GPT named; ''
    where it recorded none."""
    device, rows = report.reference(NB)
    shares = {k.removeprefix("op time share: "): r["value"] for k, r in rows.items() if k.startswith("op time share: ")}
    if not shares or not own_gpt():
        return ""
    return (f"on the reference {device}, with {own_gpt()} (another model than this run's), its kernels' time by kind: "
            + ", ".join(f"{kind} {v:.0f}%" for kind, v in sorted(shares.items(), key=lambda kv: -kv[1])))


def reference_fix() -> str:
    """Off a GPU, the graph break's fix as the reference GPU measured it, with the GPT it ran named."""
    named = own_gpt()
    text = report.reference_text(NB, ("compiled, tensor vs .item()",))
    if text and REGIONS not in report.reference(NB)[1]:  # recorded before the .item() GPT ran a forward of its own
        return ("The reference GPU's record of this fix is not shown: it was recorded with older code, in which the .item() "
                "GPT shared GPT.forward with the fixed one, and Dynamo's skip of that function probably left the fixed GPT "
                "compiled block by block too (its rate sits near the eager step's; reasoning, not measured). No GPU "
                "measurement of the fix as written here exists yet.")
    return (f"The same fix on the reference GPU, with {named}:\n" if named else "") + text


def stale_fix_rows() -> tuple[list[str], str]:
    """The reference's rows of the graph-break fix where its record has no region count (:data:`REGIONS`: recorded
    before the .item() GPT ran a forward of its own, :func:`reference_fix`), and why, for
    :meth:`course_lib.report.Report.table`'s `leave_out`; none otherwise."""
    ref = report.reference(NB)[1]
    if REGIONS in ref:
        return [], ""
    rows = [k for k in ref if ".item() in the model" in k or k.startswith("compiled, tensor in the model")]
    return rows, "the graph-break fix's rows, recorded before the .item() GPT ran a forward of its own (section 3b)"


def unprofiled_wait(rows: Mapping[str, dict], device: str | None) -> tuple[float, str] | None:
    """The reference GPU's waiting share of a step without the profiler (a fraction) and where it comes
    from: its row (section 4's kernel times over its step timed without the profiler); None where its
    record has none (records older than that row: a re-recording on a GPU adds it)."""
    row = rows.get("GPU busy share of the step, no profiler")
    if row is None:
        return None
    return 1 - row["value"] / 100, "section 4's kernel times over its step timed without the profiler"


def regime_label(rows: Mapping[str, dict]) -> str:
    """The reference's regime, off a GPU: by its waiting share without the profiler where its record has
    one, the profiled share (its section 1) beside it as a reading that is probably high; where only the profiled share
    is recorded, that reading and no regime of the plain step; '' where it recorded neither."""
    profiled = rows.get("plain step: waiting share")
    if profiled is None:
        return ""
    said = f"profiled (its section 1): {profiled['value']:.0f}% waiting, {UPPER}"
    unprofiled = unprofiled_wait(rows, report.reference(NB)[0])
    if unprofiled is None:
        return (f"the reference's GPU waited {profiled['value']:.0f}% of its profiled step, {UPPER}. By the glossary's "
                f"rule the profiled step reads {bound(profiled['value'] / 100)}; the reference recorded no share without the "
                "profiler, so the unprofiled step's waiting share is not known here")
    waited, source = unprofiled
    return (f"the reference's GPU, without the profiler, waited about {waited:.0%} of a step ({source}): "
            f"{bound(waited)} by the glossary's rule\n{said}")


def reference_answer() -> list[str]:
    """The reference GPU's bottom line, for notebook 10's answer details off a GPU: its own GPT (named) and the share
    its GPU waited (without the profiler where recorded, else profiled), then what its CUDA graphs removed
    (:func:`graphs_bound`; its compiled steps' rates and ratios stand in section 3). [] where it recorded neither."""
    device, rows = report.reference(NB)
    g = reference_sizes(device)
    waited = rows.get("plain step: waiting share")
    unprofiled = unprofiled_wait(rows, device)
    said = (f"its GPU waited about {unprofiled[0]:.0%} of a step without the profiler" if unprofiled else
            f"its GPU waited {waited['value']:.0f}% of its profiled step ({UPPER.split(':')[0]})" if waited else "")
    graphs = graphs_bound(rows)  # 'compiled with reduce-overhead, its step ran …'
    if not (said or graphs) or g is None:
        return []
    return [f"  on the reference {device}, with its own GPT ({g.n_layer} layers, width {g.n_embd}, T = {g.block}, batch "
            f"{g.batch}; another model than this run's): " + "; ".join(filter(None, (said, graphs)))]


def reference_compile() -> str:
    """Off a GPU, the reference run's compiled steps in two lines: its GPT named, eager's rate, each mode's rate and
    its ratio over eager (from the two timings' quartiles, not paired), then each mode's compile + first step; ''
    without a reference record of its eager step."""
    device, rows = report.reference(NB)
    eager = rows.get("eager")
    if not eager or not own_gpt():
        return ""
    parts = [f"eager {eager['value']:,.0f} {eager['unit']}"]
    for mode in ("default", "reduce-overhead"):
        rate, ratio = rows.get(f"compiled, {mode}"), rows.get(f"compiled ({mode}) vs eager")
        if rate:
            parts.append(f"compiled ({mode}) {rate['value']:,.0f} {rate['unit']}" + (
                f", {ratio['value']:.2f}× ({ratio['spread'][0]:.2f}–{ratio['spread'][1]:.2f})"
                if ratio and ratio.get("spread") else ""))
    cold = [f"{mode} {rows[key]['value']:.1f} s" + (" (cold caches)" if mode == "default" else
                                                    " (caches warm from the default one)")
            for mode in ("default", "reduce-overhead") if (key := f"compile + first step, {mode}") in rows]
    return (f"  the reference {device}, its own GPT ({own_gpt().split(': ', 1)[1]}): " + "; ".join(parts)
            + " (each ratio over eager, its range from the two timings' quartiles, not paired)"
            + (f"\n  its compile + first step: {', '.join(cold)}" if cold else ""))


def graphs_bound(rows: Mapping[str, dict]) -> str:
    """Without the profiler, from the reference's compiled steps: the same kernels launched one by one
    (default) and replayed as CUDA graphs (reduce-overhead), one sentence for the answer's details (its subject,
    the reference's step, named by the caller); '' where either is not recorded with its quartiles."""
    default, graphs = rows.get("compiled, default"), rows.get("compiled, reduce-overhead")
    if not (default and graphs and default.get("spread") and graphs.get("spread")):
        return ""
    lo = 1 - default["spread"][1] / graphs["spread"][0]  # the share saved, from the quartiles' ends (rates)
    hi = 1 - default["spread"][0] / graphs["spread"][1]
    mid = 1 - default["value"] / graphs["value"]
    return (f"compiled with reduce-overhead, its step ran "
            f"{graphs['value'] / default['value']:.2f}× as fast as compiled with the default mode (the ratio of the "
            f"medians of the same turns; {graphs['spread'][0] / default['spread'][1]:.2f}–"
            f"{graphs['spread'][1] / default['spread'][0]:.2f}× from the quartiles): the reduce-overhead step took "
            f"{1 - mid:.0%} ({100 * (1 - hi):.0f}–{1 - lo:.0%} across the quartiles' range) of the default-compiled "
            "step's time. Which part went away is not measured. Candidates, not separated: launching each kernel, "
            "dispatch (PyTorch choosing the kernel for each op), the caching allocator's calls (a graph replays into memory it "
            "holds), and Python.")


def reference_sync() -> list[str]:
    """Off a GPU, what the reference GPU measured of the logging steps, in a line or two (its timings stand in the
    summary's reference rows): the GPT and the reads it made, its ratio and what its range allows, the regime of its
    plain step where that bears on it; then what a read waits for there (notebook 01's record)."""
    device, ref = report.reference(NB)
    kept, waited = ref.get("keeping values vs reading values"), ref.get("plain step: waiting share")
    lines = []
    if kept and kept.get("spread"):
        lo, hi = kept["spread"]
        said = report.recorded_ratio("", kept)
        paired = "" if kept.get("rounds") else ", its two timings' quartiles, not paired"
        grade = (f"too wide to tell, a cost of up to {hi - 1:.0%} fits in it" if said.too_wide else
                 "no measurable cost" if said.within_noise else report.ratio_grade(kept))
        line = (f"On the reference {device} (not this machine{reference_reads()}): keeping the values on the device "
                f"instead of reading them, {kept['value']:.2f}× ({lo:.2f}–{hi:.2f}{paired}): {grade}")
        if said.within_noise and waited:
            unprofiled = unprofiled_wait(ref, device)
            share = unprofiled[0] if unprofiled else waited["value"] / 100
            how = "without the profiler" if unprofiled else "profiled, a reading that is probably high"
            if bound(share) != "GPU-bound":
                line += (f"\n  its plain step was {bound(share)} ({how}, section 1's line): if the logging step kept the "
                         "GPU waiting as much, a read found little queued to wait for (reasoning, not measured)")
        lines.append(line)
    lines.append(queue_drained())
    return lines


def reference_reads() -> str:
    """'; its own GPT, 6 layers, width 768: 77 reads a step, 78 warnings counted': the reads the reference's logging
    step makes (its parameter tensors and the loss), and its warning count where it differs."""
    meta, rows = report.reference_meta(NB), report.reference(NB)[1]
    g = reference_sizes(meta.get("device"))
    if g is None:
        return ""
    with torch.device("meta"):
        n = len(list(GPT(GPTConfig(block_size=g.block, n_layer=g.n_layer, n_head=g.n_head, n_embd=g.n_embd)).parameters()))
    warned = next((r["value"] for k, r in rows.items() if k.startswith("set_sync_debug_mode warnings")), None)
    extra = warned is not None and round(warned) != n + 1
    return (f"; its own GPT, {g.n_layer} layers, width {g.n_embd}: {n + 1} reads a step"
            + (f", {warned:.0f} warnings counted, the difference not traced" if extra else ""))


def queue_drained() -> str:
    """What a read waits for, as notebook 01 (section 2) recorded it on the reference GPU: a read
    after 10 queued matmuls against one synchronised matmul; '' where 01's record lacks them."""
    ref_device, ref = report.reference("01_gpu_vs_cpu")
    read, one = ref.get("async: 10 queued matmuls, then .item()"), ref.get("async: matmul 4096×4096 synchronized")
    if not (read and one):
        return ""
    return (f"What a read waits for, measured by notebook 01 (section 2) on the reference {ref_device}: after 10 "
            f"queued 4096² float32 matmuls, .item() returned after {read['value']:.2f} ms, {read['value'] / one['value']:.1f}× "
            f"one synchronised matmul's {one['value']:.2f} ms: it waited for the whole queue")
