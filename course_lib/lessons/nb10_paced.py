"""Notebook 10 beside notebook 08: the readings of 08's step in several sets of turns (08's, 09's, this notebook's),
each set's pace probe (a fixed matmul and copy timed in the same turns) taken out, read by one rule (the medians and
the quartiles' ends, :func:`course_lib.lessons.nb09_beside08.pace_rule`). Each function returns the text a cell
prints; :mod:`course_lib.lessons.nb10_beside08` re-exports them."""

from __future__ import annotations

from typing import Mapping, Sequence

from course_lib.bench import Timing
from course_lib.lessons.nb09_beside08 import (PACED, UNPACED, WHOLE_STEP, near_far, open_words,  # 09's key, rule, words
                                              pace_rule)
from course_lib.lessons.nb10_short import faults_words
from course_lib.units import unit_scale


PROBES = {"08": "pace probe, section 4's turns", "09": "pace probe, beside 08's step",
          "08's section 5": "pace probe, section 5's turns"}  # each set's fixed matmul and copy
SHORT_SETS = {"08's section 4 (2 micro-batches)": "08's section 4", "09's": "09's turns",
              "08's section 5 (1 micro-batch)": "08's section 5",
              "this notebook's section 3": "section 3 here"}  # the sets of turns, named in an 'in short' line


def placed_in(rate: float, lo: float, hi: float, within: str = "", whose: str = "its") -> str:
    """A rate against a range of rates `lo`..`hi`: 'within' (`within`: of what), or how far beyond its nearest end,
    '1.26× faster than its fastest'."""
    if lo <= rate <= hi:
        return f"within {within}".rstrip()
    return (f"{rate / hi:.2f}× faster than {whose} fastest" if rate > hi else f"{lo / rate:.2f}× slower than {whose} slowest")


def _swing(ran08: Mapping[str, dict] | None, ran09: Mapping[str, dict] | None, as_08: Timing | None,
           readings: Mapping[str, Timing | None], short: bool = False, own08: Sequence[float] = ()) -> str:
    """Beside a gap between the notebooks' rates of 08's step that the probe does not explain: where 08 read its step
    two or more times (`own08`, rates), how far apart those readings lie in one process and where 09's and this
    notebook's readings fall against them (within their range, or how far beyond its nearest end); else the swing of
    this notebook's own eager step across its sets of turns (`readings`, where: Timing) beside the notebooks' gap.
    `short`: one clause, the sets unnamed. '' where neither has two readings."""
    others = {w: r for w, r in (("09's", _rate(ran09, WHOLE_STEP)),
                                ("this notebook's", as_08.rate if as_08 is not None else None)) if r}
    if len(own08) >= 2 and others:
        lo, hi = min(own08), max(own08)

        placed = ", ".join(f"{w} {placed_in(r, lo, hi, 'their range', 'the')}" for w, r in others.items())
        return (f"; 08's own readings of this step lie {hi / lo:.2f}× apart in one process; against them, {placed}"
                + ("; the cause of these moves is not measured" if short else
                   f" (a reading within {PACED:g}× of their nearest end falls within the moves one process shows); what "
                   "moves the same step between sets of turns is not measured"))
    got = {w: t for w, t in readings.items() if t is not None}
    rates = [r for r in (_rate(ran08, "eager, written-out attention"), *others.values()) if r]
    if len(got) < 2 or len(rates) < 2:
        return ""
    swing = max(t.median_s for t in got.values()) / min(t.median_s for t in got.values())
    gap = max(rates) / min(rates)
    if short:
        return (f"; in rate, {gap:.2f}× lies {'within' if gap <= swing else 'beyond'} the {swing:.2f}× this notebook's own "
                "eager step swung in one process; the cause is not measured")
    return (f"; this notebook's own eager step, in one process, read {swing:.2f}× apart across {_and(list(got))}: the "
            "notebooks' gap " + ("lies within" if gap <= swing else "exceeds") + " the widest swing one process shows")


def _rate(rows: Mapping[str, dict] | None, key: str) -> float | None:
    """A recorded rate in tok/s (`rows[key]`), None where not recorded in a rate's unit, or where it is 09's reading
    of 08's step with the other attention (09 times 08's step as 08's long run ran it: SDPA, where 08 chose it)."""
    row = (rows or {}).get(key)
    scale = unit_scale(row["unit"], "tok/s") if row else None
    return row["value"] * scale if row and scale and (key != WHOLE_STEP or _written_out(row)) else None


def _written_out(row: Mapping[str, str]) -> bool:
    """Whether a recorded reading of 08's step ran the written-out attention, as its setup or note names it."""
    return "written-out" in row.get("setup", "") + row.get("note", "")


def paced(ran08: Mapping[str, dict] | None, ran09: Mapping[str, dict] | None, as_08: Timing | None,
          probe: Timing | None, batch: int | None = None, as_row: bool = False
          ) -> str | tuple[str, float, float, str] | None:
    """08's written-out step with each set of turns' pace taken out: its rate times the pace probe's time in the same
    turns (the tokens it trains in one probe's time), in 08's section 5 (one micro-batch of `batch`, as 09 and this
    notebook time it; else section 4's, two micro-batches), in 09's turns and here (`as_08` and `probe`, section 3's);
    '' where fewer than two readings have their probe. `as_row`: the same, short, as a row of :func:`paced_table`
    (the sets, the rates' spread, the spread with each set's pace taken out, the words), None in place of ''."""
    got, spans, rates, faults = {}, {}, [], {}  # tokens per probe: the medians', and the far ends the quartiles allow
    one = f"step, micro-batch of {batch} sequences, no sampler"  # 08's section 5: the step as 09 and 10 time it
    like = batch and _written_out((ran08 or {}).get(one, {})) and (ran08 or {}).get(PROBES["08's section 5"])
    sets = ((("08's section 5 (1 micro-batch)", ran08, one, PROBES["08's section 5"]) if like else
             ("08's section 4 (2 micro-batches)", ran08, "eager, written-out attention", PROBES["08"])),
            ("09's", ran09, WHOLE_STEP, PROBES["09"]))
    for who, rows, key, probe_key in sets:
        rate, timed = _rate(rows, key), (rows or {}).get(probe_key)
        if rate and timed and timed["unit"] == "ms":
            got[who] = rate * timed["value"] / 1e3
            rates.append(rate)
            r_lo, r_hi = (rate * v / rows[key]["value"] for v in rows[key].get("spread") or [rows[key]["value"]] * 2)
            p_lo, p_hi = timed.get("spread") or [timed["value"]] * 2
            spans[who] = (r_lo * p_lo / 1e3, r_hi * p_hi / 1e3)
            row = rows[key]  # page faults per 1,000 tokens, where counted: a step of 2 micro-batches has twice the work
            faults[SHORT_SETS.get(who, who)] = (1 / rate, 1e3 * row["faults"] / row["work"]
                                                if row.get("faults") is not None and row.get("work") else None)
    if as_08 is not None and as_08.rate and probe is not None:
        got["this notebook's section 3"] = as_08.rate * probe.median_s
        spans["this notebook's section 3"] = (as_08.rate_lo * probe.lo_s, as_08.rate_hi * probe.hi_s)
        rates.append(as_08.rate)
        faults[SHORT_SETS.get("this notebook's section 3", "here")] = (
            1 / as_08.rate, 1e3 * as_08.faults / as_08.work if as_08.faults is not None and as_08.work else None)
    if len(got) < 2:
        return None if as_row else ""
    r, raw = max(got.values()) / min(got.values()), max(rates) / min(rates)
    far = max(spans[a][1] / spans[b][0] for a in spans for b in spans if a != b)  # two readings' quartiles' far ends
    d = 2 if all((round(x, 2) < PACED) == (x < PACED) for x in (r, raw)) else 3  # 1.096x, not 1.10x, 'within 1.1x'
    top, low = max(got, key=got.get), min(got, key=got.get)  # the two readings furthest apart, by their medians
    near = max(1.0, spans[top][0] / spans[low][1])  # ... and by their quartiles' nearest ends
    rule = pace_rule(r, near, far)  # 09's rule: the medians on one side of 1.1x, the quartiles' ends on the other: open
    faulted = faults_words(faults, per="1,000 tokens", of="08's step's ")  # beside each reading, where counted
    if as_row:  # a row for 'in short': the sets named; the arithmetic and the probe's words stand in the details
        said = ("they agree" if raw < PACED else "the probe takes the gap away") if rule == "agree" else (
            f"they disagree beyond {PACED:g}×, and the machine's pace as the probe reads it does not explain it"
            if rule == "apart" else open_words(rule, near, far))
        moved = "goes with the slower time" in faulted and rule != "agree"  # a measured candidate, where open or apart
        return (f"08's step ({_and([SHORT_SETS.get(w, w) for w in got])})", raw, r,
                said + ("; the slower readings faulted more pages a step (details)" if moved else ""))
    said = {"far ends": f"within {PACED:g}× at the medians, but the steps' and the probes' quartiles allow up to "
                        f"{far:.2f}×: whether the probe accounts for the gap is not settled",
            "near ends": f"beyond {PACED:g}× at the medians, but the steps' and the probes' quartiles allow as little as "
                         f"{near:.2f}×: whether the gap outlasts the pace is not settled",
            "agree": ("they agree, in rate and with the pace taken out" if raw < PACED else
                      "the pace probe takes the gap away") + f" (within {PACED:g}×, where the spreads lie furthest apart too)",
            "apart": f"{UNPACED}; what sets these readings apart is not measured"}[rule]
    sums = (" (its rate × the probe's time in the same turns, tokens per probe: "
            + ", ".join(f"{v:,.0f}" for v in got.values()) + ")")
    return (f"08's step in the turns of {_and(list(got))}: {raw:.{d}f}× apart in rate, {r:.{d}f}× once each set's pace "
            f"probe is taken out{sums}: {said}" + (f"; {faulted}" if faulted else ""))


def _and(items: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return ", ".join(items[:-1]) + f" and {items[-1]}" if len(items) > 1 else "".join(items)


def paced_vs_row(here: Timing, probe: Timing | None, row: Mapping, probe08: Mapping | None
                 ) -> tuple[float, float, float] | None:
    """`here`'s rate over 08's recorded rate `row` with each set's pace taken out: each rate times the pace probe's time
    in its own turns (`probe`; 08's `probe08` row, ms), here's over 08's, at the medians and at the two far ends the
    quartiles allow, (value, lo, hi); None without both probes or a rate."""
    scale = unit_scale(str(row.get("unit", "")), "tok/s")
    if probe is None or here.rate is None or not probe08 or probe08.get("unit") != "ms" or not scale:
        return None
    r_lo, r_hi = row.get("spread") or [row["value"]] * 2
    p_lo, p_hi = probe08.get("spread") or [probe08["value"]] * 2
    per = lambda rate, ms: rate * scale * ms / 1e3  # noqa: E731  08's tokens in one probe's time
    return (here.rate * probe.median_s / per(row["value"], probe08["value"]),
            here.rate_lo * probe.lo_s / per(r_hi, p_hi), here.rate_hi * probe.hi_s / per(r_lo, p_lo))


def paced_rows(got: Mapping[str, tuple[float, float, float]]) -> str:
    """The verdict on the table's rates with each set's pace taken out (`got`, row: :func:`paced_vs_row`'s triple), read
    by :func:`pace_rule`: whether the two notebooks agree once the machine's pace, as the probe reads it, is out of
    their readings (a test that can fail, where the rule for two moments cannot at these sizes): the verdict's words,
    for :func:`paced_table`. '' without any."""
    if not got:
        return ""
    rules = {w: pace_rule(max(v, 1 / v), *near_far(lo, hi)) for w, (v, lo, hi) in got.items()}
    apart = [w for w, r in rules.items() if r == "apart"]
    return (f"beyond {PACED:g}× for {_and(apart)}: {UNPACED}" if apart else
            f"within {PACED:g}× at the medians and where the spreads lie furthest apart: the notebooks agree once the "
            "pace is out"
            if all(r == "agree" for r in rules.values()) else
            f"near {PACED:g}× (the medians and the spreads' ends fall on its two sides): inconclusive")


def paced_table(step: tuple[str, float, float, str] | None,
                rows: Mapping[str, tuple[float, tuple[float, float, float]]]) -> str:
    """The notebooks side by side, for 'in short:' (readers FX, FZ: two lines of rules read as details): 08's step
    across its sets of turns (`step`, :func:`paced`'s row: its sets, the rates' spread, the spread with each set's pace
    taken out, the words), then each SDPA rate row of the table (`rows`: its short name -> (here over 08 in rate,
    :func:`paced_vs_row`'s triple)), raw and paced, and one verdict for each group. '' with neither."""
    if step is None and not rows:
        return ""
    lines = [("", "rates", "paced")] + ([(step[0], f"{step[1]:.2f}× apart", f"{step[2]:.2f}× apart")] if step else [])
    lines += [(f"{name}, here ÷ 08", f"{raw:.2f}×", f"{p[0]:.2f}×") for name, (raw, p) in rows.items()]
    w = max(len(a) for a, _, _ in lines)
    said = ([f"  08's step: {step[3]}"] if step else []) + (
        [f"  the SDPA rows, paced: {paced_rows({n: p for n, (_, p) in rows.items()})}"] if rows else [])
    return "\n".join(["the notebooks side by side (paced: each rate times its own set's pace-probe time, the machine's "
                      "pace taken out):", *(f"  {a:<{w}}  {b:>11}  {c:>11}" for a, b, c in lines), *said])
