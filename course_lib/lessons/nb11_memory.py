"""Notebook 11's section 5 in words (re-exported by :mod:`course_lib.lessons.nb11`): each stage's peak memory
against the prediction held × live + backward, for GPipe and 1F1B, and how far the prediction misses."""

from __future__ import annotations

from course_lib import units


def memory_lines(held: dict, predicted: dict, peak: dict, one: dict, rig: str) -> str:
    """Section 5's table, each m and stage: what one micro-batch holds (`one[(m, stage)]`: live after
    its forward, the peak its backward adds) and per schedule the micro-batches `held` at once, the
    `predicted` peak and the measured `peak` (keyed (schedule, m, stage)); then stage 0's peak at
    the largest m against the smallest, and GPipe's against 1F1B's."""
    fb, kinds = units.fmt_bytes, ("gpipe", "1f1b")
    lines = [f"peak memory of one step, predicted → measured | {rig}",
             f"{'m':>3} {'stage':>5} | {'one micro-batch: live, backward':>32} | "
             f"{'GPipe: held, predicted → measured':>36} | {'1F1B: held, predicted → measured':>36}"]
    for k, s in sorted(one):
        live, back = one[(k, s)]
        keys = [(c, k, s) for c in kinds]
        cols = [f"{held[key]:>2} × → {fb(predicted[key]):>9} → {fb(peak[key]):>9}" for key in keys]
        lines.append(f"{k:>3} {s:>5} | {fb(live):>15}, {fb(back):>15} | {cols[0]:>36} | {cols[1]:>36}")
    lo, hi = min(one)[0], max(one)[0]
    for c in kinds:
        lines.append(f"{c}: stage 0's peak at m = {hi} is {peak[(c, hi, 0)] / peak[(c, lo, 0)]:.2f}× its peak at "
                     f"m = {lo} ({fb(peak[(c, lo, 0)])} → {fb(peak[(c, hi, 0)])}); predicted "
                     f"{predicted[(c, hi, 0)] / predicted[(c, lo, 0)]:.2f}×")
    g, o = ("gpipe", hi, 0), ("1f1b", hi, 0)
    lines.append(f"at m = {hi}, stage 0: GPipe's peak is {peak[g] / peak[o]:.2f}× 1F1B's (predicted "
                 f"{predicted[g] / predicted[o]:.2f}×; it holds {held[g]} micro-batches against {held[o]})")
    lines += [miss_line(s, peak, predicted) for s in sorted({s for _, _, s in peak})]
    return "\n".join(lines)


def miss_line(stage: int, peak: dict, predicted: dict) -> str:
    """Stage `stage`'s largest misses of the prediction over every schedule and m, as measured: within a
    tenth of the measured peak, or how far and where, the largest above it and the largest below it."""
    keys = sorted((k for k in peak if k[2] == stage), key=lambda k: peak[k] - predicted[k])  # most under first
    where = {k: f"{'GPipe' if k[0] == 'gpipe' else '1F1B'}, m = {k[1]}" for k in keys}
    ends = [k for k, sign in ((keys[-1], 1), (keys[0], -1)) if sign * (peak[k] - predicted[k]) > 0]  # most over, under
    big = [k for k in ends if abs(peak[k] - predicted[k]) > 0.1 * peak[k]]
    if not big:
        worst = max(keys, key=lambda k: abs(peak[k] - predicted[k]))
        return (f"stage {stage}: every prediction within 10 % of the measured peak (the largest miss "
                f"{units.fmt_bytes(abs(peak[worst] - predicted[worst]))}, {where[worst]})")
    return f"stage {stage}: the prediction misses by " + "; and by ".join(
        f"{'+' if peak[k] > predicted[k] else '-'}{units.fmt_bytes(abs(peak[k] - predicted[k]))} ({where[k]}: measured "
        f"{units.fmt_bytes(peak[k])}, predicted {units.fmt_bytes(predicted[k])}): " + (
            "held × live + backward is not all this stage holds there" if peak[k] > predicted[k] else
            "this stage keeps less at once there than held × live + backward counts") for k in big) + (
        ", and this run does not measure the differences apart")
