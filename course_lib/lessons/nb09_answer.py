"""Notebook 09's answer to its question (how much memory a step needs, where it goes, whether the estimate
predicts it, what to do when it does not fit), in a few lines from this run's report rows and section 7's bytes
live at the peak; and section 7's table of those bytes beside the estimate's terms."""

from __future__ import annotations

from typing import Mapping, Sequence

from course_lib.units import fmt_bytes


def answer(rows: Mapping[str, dict], at_peak: Mapping[str, float] | None, batch: int, device: str) -> str:
    """The answer's lines, each from a measurement of this run named by its section: the step's peak (section 2),
    what was live at it by category (section 7, `at_peak`: bytes; None where not recorded), the estimate's error
    (section 3), the largest batch in the budget (section 4) and checkpointing's trade (section 5); a line is left
    out where its measurement did not run."""
    lines = [f"answer, from this run's numbers ({device}):"]
    if peak := rows.get("step peak, measured"):
        lines.append(f"  how much: one training step of this GPT at batch {batch} peaks at {peak['value']:.1f} MiB "
                     "(section 2)")
    if at_peak:
        live = sorted(((kind, b) for kind, b in at_peak.items() if b > 0), key=lambda kv: -kv[1])
        lines.append("  where it goes, live at the peak (section 7): " + ", ".join(f"{kind} {fmt_bytes(b)}"
                                                                              for kind, b in live)
                     + ("; no gradient is live there (zero_grad(set_to_none=True): section 7)" if not at_peak.get("gradient")
                        else ""))
    if est := rows.get("estimate vs measured peak"):
        lines.append(f"  predicted before running: the estimate is {est['value']:+.1f} % off the measured peak "
                     "(section 3; section 7 shows which terms differ)")
    fit = []
    if big := rows.get("largest batch in the budget"):
        fit.append(f"the largest batch whose forward + backward adds at most {big['note'].split(',')[0]} to what is in "
                   f"use: {big['value']:.0f} sequences (section 4)")
    saved = rows.get("checkpointing: forward + backward's added memory saved")
    cost = rows.get("time of forward + backward, checkpointed / not")
    if saved and cost:
        spread = f" ({cost['spread'][0]:.2f}–{cost['spread'][1]:.2f})" if cost.get("spread") else ""
        fit.append(f"checkpointing every block: {saved['value']:.0f} % less memory added by forward + backward (the "
                   f"weights already in place, no optimizer), for {cost['value']:.2f}×{spread} its time (section 5)")
    if fit:
        lines.append("  when it does not fit: " + "; ".join(fit))
    return "\n".join(lines)


def at_peak_report(by_term: Sequence[tuple[str, int | None, int]], verdict: str, detail: int, batch: int,
                   beyond_saved: float, measured_at: tuple[int, int]) -> str:
    """The estimate's terms beside what is live at the peak (:func:`nb09.estimate_at_peak`'s rows and
    sentence); then, where autograd detail is live there and section 4's steps (at the batches `measured_at`)
    added bytes beyond the saved activations, the detail per sequence as a share of those: two measurements
    of different things, set side by side as a consistency check."""
    lines = [f"{'estimate term / category at the peak':<40} {'estimate':>10} {'live at the peak':>17}"]
    lines += [f"{name:<40} {'-' if guess is None else fmt_bytes(guess):>10} {fmt_bytes(live):>17}"
              for name, guess, live in by_term]
    lines.append(verdict)
    if detail and beyond_saved > 0:
        lines.append(f"autograd detail at the peak: {fmt_bytes(detail)} in one profiled step at batch {batch}, "
                     f"{fmt_bytes(detail / batch)} per sequence, {detail / batch / beyond_saved:.0%} of the "
                     f"{fmt_bytes(beyond_saved)} per sequence beyond the estimate's activations in the slope between "
                     f"section 4's peaks at batch {measured_at[0]} and {measured_at[1]}: a consistency check between two "
                     "different measurements, suggestive, not the same bytes measured twice")
    return "\n".join(lines)
