"""verdicts: a ratio's sentence graded by its size, and runs against their control runs."""

from __future__ import annotations

import pytest
import torch

from course_lib import train, verdicts
from course_lib.verdicts import Ratio, ratio_of


def test_a_verdict_is_graded_by_the_effect_against_its_spread():
    paired = dict(rounds=5, coverage=0.9375, drift=0.01)
    cases = {  # value, lo, hi -> grade
        (1.02, 1.01, 1.03): "small", (1.30, 1.21, 1.40): "clear", (3.0, 2.6, 3.3): "large",
        (0.25, 0.22, 0.30): "large", (1.01, 0.97, 1.04): "no difference", (1.1, 0.8, 1.4): "too wide",
    }
    for (v, lo, hi), grade in cases.items():
        assert Ratio("x", v, lo, hi, **paired).grade == grade
    assert Ratio("x", 1.02, 1.01, 1.03, rounds=5, coverage=0.94, drift=0.3).grade == "inconclusive"
    assert Ratio("x", 1.3, 1.3, 1.3, rounds=1, coverage=0.0, drift=0.0).grade == "no verdict"


def test_medians_on_the_other_side_of_1_from_the_paired_ratio_are_said():
    """The paired median favours one setting while the medians printed above favour the other: the line says both."""
    across = Ratio("x", 1.01, 0.99, 1.07, rounds=9, coverage=0.96, drift=0.02, medians=0.99)
    assert across.medians_apart and "the two medians' ratio, unpaired, is 0.99" in str(across)
    assert not Ratio("x", 1.01, 0.99, 1.07, rounds=9, coverage=0.96, drift=0.02, medians=0.998).medians_apart
    assert not Ratio("x", 1.01, 0.99, 1.07, rounds=9, coverage=0.96, drift=0.02, medians=1.03).medians_apart


def test_no_difference_needs_a_drift_under_what_it_allows():
    """"No measurable difference" allows up to 10 % (REACH); with the machine's pace moving 12 % from turn
    to turn, the turns cannot claim it: inconclusive, and the sentence gives both figures."""
    quiet = Ratio("x", 1.01, 0.98, 1.08, rounds=9, coverage=0.96, drift=0.03)
    busy = Ratio("x", 1.01, 0.98, 1.08, rounds=9, coverage=0.96, drift=0.12)
    assert quiet.grade == "no difference" and busy.grade == "inconclusive" and not busy.clear
    assert "12.0%" in str(busy) and "10% that a verdict of no difference allows" in str(busy)
    assert "within the spread, but inconclusive" in str(busy)
    tight = Ratio("x", 1.00, 0.99, 1.01, rounds=9, coverage=0.96, drift=0.015)  # a tight null on a steady machine
    assert tight.grade == "no difference"
    assert "no measurable difference" not in str(busy) and busy.brief.endswith("inconclusive")
    wide = Ratio("x", 1.01, 0.85, 1.19, rounds=9, coverage=0.96, drift=0.3)
    assert wide.grade == "inconclusive" and not wide.too_wide  # the drift is read first, as the glossary says
    assert "30.0%" in str(wide) and "too wide" not in str(wide) and wide.decimals == 2
    steady = Ratio("x", 1.01, 0.85, 1.19, rounds=9, coverage=0.96, drift=0.05)
    assert steady.grade == "too wide" and "too wide" in str(steady)


def test_a_change_smaller_than_the_quantity_can_show_is_negligible_not_beyond_the_spread():
    """A utilisation reading saturated near 100 %: 0.05 % higher in every turn is beyond a tight
    spread, and means nothing; with the quantity's least meaningful change named, the verdict says so."""
    tight = dict(rounds=5, coverage=0.9375, drift=0.0)
    saturated = Ratio("busy", 1.0005, 1.0002, 1.0008, "higher", "lower", negligible=1.01, **tight)
    assert saturated.grade == "negligible"
    line = str(saturated)
    assert "no difference that matters" in line and "within 1% of no change" in line
    assert "| 0.05% higher, beyond the spread" in line  # a percentage, not "1.0005× higher"
    below = Ratio("busy", 0.9995, 0.9985, 0.9999, "higher", "lower", negligible=1.01, **tight)
    assert "| 0.05% lower, beyond the spread" in str(below)
    assert Ratio("busy", 1.0005, 1.0002, 1.0008, **tight).grade == "small"  # any change counts by default
    assert Ratio("busy", 1.03, 1.02, 1.04, negligible=1.01, **tight).grade == "small"  # beyond 1 %: it shows
    assert Ratio("busy", 1.008, 1.002, 1.012, negligible=1.01, **tight).grade == "small"  # the interval reaches past it


def test_a_verdict_sentence_names_what_changed_where_with_its_numbers():
    r = Ratio("compiled vs eager", 1.30, 1.21, 1.40, rounds=5, coverage=0.9375, drift=0.02)
    line = r.verdict("compiling the step", on="cpu")
    assert line.startswith("verdict on cpu: compiling the step: 1.30× (1.21–1.40) | 1.30× faster, beyond the spread (")
    assert "median of 5 paired turns" in line and str(r) == "compiled vs eager: " + line.split("compiling the step: ")[1]
    slow = Ratio("x", 0.25, 0.22, 0.30, rounds=5, coverage=0.9375, drift=0.01).verdict(on="cpu")
    assert slow.startswith("verdict on cpu: x: 0.25× (0.22–0.30) | 4.00× slower (3.33–4.55×), far beyond the spread")
    jumpy = str(Ratio("j", 1.10, 1.07, 1.10, rounds=3, coverage=0.75, drift=0.14))
    assert "1.10× faster in the median turn, but inconclusive: the whole interval lies above 1, yet the machine's " \
        "speed changed by 14.0%" in jumpy
    same = str(ratio_of("y", 1.0, 0.98, 1.03))
    assert "no measurable difference" in same and "beyond" not in same
    small = str(Ratio("z", 1.02, 1.01, 1.03, rounds=5, coverage=0.9375, drift=0.005))
    assert "1.02× faster: a small difference, beyond the spread (" in small


def test_nudge_moves_every_weight_by_last_bits_and_nothing_else():
    torch.manual_seed(0)
    net = torch.nn.Linear(4, 3)
    before = [p.detach().clone() for p in net.parameters()]
    verdicts.nudge(net, 2)
    for b, p in zip(before, net.parameters()):
        up1 = torch.nextafter(b, torch.full_like(b, float("inf")))
        assert torch.equal(p, torch.nextafter(up1, torch.full_like(b, float("inf"))))
    verdicts.nudge(net, -2)
    assert all(torch.equal(b, p) for b, p in zip(before, net.parameters()))
    with pytest.raises(ValueError, match="at least one step"):
        verdicts.nudge(net, 0)
    assert verdicts.control_ulps(5) == [1, -1, 2, -2, 3]


def test_a_control_that_rounding_absorbed_is_nudged_further():
    base = [2.0, 1.5, 1.2]
    tried = []

    def run(ulps: int) -> train.History:  # a run whose records move only once a nudge reaches 4 steps
        tried.append(ulps)
        return train.History(loss=base if abs(ulps) < 4 else [v + ulps * 1e-7 for v in base])

    controls = verdicts.control_runs(run, base, 3)
    assert [c.ulps for c in controls] == [4, -4, 8] and tried == [1, 4, -1, -4, 2, 8]
    assert all(c.history.loss != base for c in controls)
    with pytest.raises(ValueError, match="do not depend on its starting weights"):
        verdicts.control_runs(lambda u: train.History(loss=list(base)), base, 1)


def test_tail_gap_and_its_verdict_against_controls():
    base = [3.0, 2.0, 1.0, 1.0]
    assert verdicts.tail_gap(base, [3.0, 2.0, 1.1, 1.3], last=2) == pytest.approx(0.2)
    assert verdicts.tail_gap(base, [9.0], last=5) == pytest.approx(8.0)  # the shorter curve's records
    with pytest.raises(ValueError, match="at least one record"):
        verdicts.tail_gap([], base, last=3)
    assert "no measurable difference" in verdicts.gap_verdict(0.05, [0.01, -0.06], "fp32")
    far = verdicts.gap_verdict(-0.07, [0.01, -0.06, 0.02], "fp32")
    assert "lower than fp32, beyond all 3 control runs" in far and "1 time in 4" in far
    with pytest.raises(ValueError, match="at least one control"):
        verdicts.gap_verdict(0.1, [], "fp32")


def test_a_gap_beyond_few_controls_is_called_a_hint():
    few = verdicts.gap_verdict(0.03, [0.01, -0.01, 0.005], "fp32")
    assert "3.0× the largest control's gap: 0.0300 against 0.0100" in few and "a hint, not a proof" in few
    many = verdicts.gap_verdict(0.03, [0.01] * 9, "fp32")
    assert "1 time in 10" in many and "hint" not in many


def test_a_gap_far_beyond_the_controls_is_a_difference_whatever_their_number():
    far = verdicts.gap_verdict(0.09, [0.01, -0.01, 0.005], "fp32")  # 9× the largest control's gap
    assert "far beyond all 3 control runs (9.0× the largest" in far and "hint" not in far
    just = verdicts.gap_verdict(0.0499, [0.01, -0.01, 0.005], "fp32")  # under FAR_BEYOND: a hint
    assert "far" not in just and "hint" in just
    tiny = verdicts.gap_verdict(0.0156, [4e-8], "one batch")
    assert "the controls moved by less than 0.0001" in tiny and "far beyond" in tiny


def test_a_range_prints_with_the_digits_that_show_the_wide_rule_as_applied():
    wide = verdicts.ratio_of("x", 1.0, 0.905, 1.087)  # 1.201 apart: too wide, though 0.91-1.09 would not be
    assert wide.too_wide and "(0.905–1.087)" in str(wide) and "too wide" in str(wide)
    narrow = verdicts.ratio_of("x", 1.0, 0.95, 1.05)
    assert not narrow.too_wide and "(0.95–1.05)" in str(narrow)


def test_two_moments_are_worded_one_way_whatever_prints_them():
    assert verdicts.moments_words(0.9, 1.1) == "within their spreads"
    assert verdicts.moments_words(0.9, 1.1, short=True) == "not told apart (under 2.5×)"
    assert verdicts.moments_words(1.1, 1.3, short=True) == "not told apart (under 2.5×)"
    assert verdicts.moments_words(2.6, 3.0, short=True) == "a difference (2.5× or more)"
    assert verdicts.moments_words(0.12, 5.33, short=True) == "not told apart (its range holds 1)"  # not 'under 2.5×'
    assert verdicts.moments_words(0.74, 0.85) == ("its range, 0.74–0.85×, is within 2.5× of 1, a gap the pace of two "
                                                  "moments can make: inconclusive")
    assert verdicts.moments_words(0.3, 0.45).endswith("0.30–0.45×, is within 2.5× of 1, a gap the pace of two "
                                                      "moments can make: inconclusive")  # 0.45x is 2.2x from 1
    assert verdicts.moments_words(2.6, 2.9) == ("its whole range, 2.60–2.90×, lies 2.5× or more from 1, beyond what "
                                                 "two moments can differ by: a difference")
    r = verdicts.ratio_of("x", 1.68, 1.42, 1.80, apart=True)  # 05's 1.68x (1.42-1.80): its near end is 1.42x
    assert r.inconclusive and "its range, 1.42–1.80×, is within 2.5× of 1" in str(r)


def test_a_median_inside_its_range_does_not_print_as_one_of_its_ends():
    from course_lib.bench import Ratio
    near = Ratio("x", 1.006, 0.9665, 1.012, rounds=9, coverage=0.96, drift=0.01)  # 1.01× (0.97–1.01) at 2 decimals
    assert near.brief.startswith("1.006× (0.967–1.012)")
    plain = Ratio("x", 1.03, 0.98, 1.07, rounds=9, coverage=0.96, drift=0.01)
    assert plain.brief.startswith("1.03× (0.98–1.07)")  # two decimals where they keep the three apart
    held = Ratio("x", 1.03, 0.9956, 1.06, rounds=9, coverage=0.96, drift=0.01)  # holds 1, its low end just below
    assert held.brief.startswith("1.030× (0.996–1.060) no measurable difference")  # not (1.00–1.06), which reads as >= 1
    edge = Ratio("x", 1.02, 1.0, 1.04, rounds=9, coverage=0.96, drift=0.01)  # an end at 1 itself prints as 1.00
    assert edge.brief.startswith("1.02× (1.00–1.04)")
    gain = Ratio("x", 1.0341, 1.0262, 1.0508, rounds=9, coverage=0.96, drift=0.005)  # beyond the spread
    assert gain.clear and gain.brief.startswith("1.034× (1.026–1.051)")  # not 1.03× (1.03–1.05)
    drifted = Ratio("x", 0.9864, 0.9334, 0.9913, rounds=9, coverage=0.96, drift=0.05)  # inconclusive: drift
    assert drifted.grade == "inconclusive" and drifted.brief.startswith("0.986× (0.933–0.991)")


def test_a_difference_that_prints_as_large_as_its_drift_gets_a_digit_more():
    from course_lib.bench import Ratio
    edge = Ratio("c", 1.0391, 1.03, 1.21, rounds=5, coverage=0.94, drift=0.0388)  # both print 3.9 % at one decimal
    assert str(edge).endswith("this pair's drift 3.88%, the difference 3.91%)")
    assert "the difference" not in str(Ratio("c", 1.09, 1.03, 1.21, rounds=5, coverage=0.94, drift=0.0388))  # twice it
    near = Ratio("c", 1 / 1.0347, 0.91, 0.98, rounds=9, coverage=0.96, drift=0.032)  # reader GB: 10's GELU, 1.03x
    assert str(near).endswith("this pair's drift 3.2%, the difference 3.5%)")  # slower beyond a 3.2 % drift: shown


def test_brief_gives_the_medians_ratio_where_it_points_the_other_way():
    across = Ratio("c", 1.04, 0.96, 1.05, rounds=9, coverage=0.96, drift=0.06, medians=0.96)
    assert across.brief == "1.04× (0.96–1.05) no measurable difference (paired; the medians' ratio: 0.96×)"
    near = Ratio("c", 1.04, 0.96, 1.05, rounds=9, coverage=0.96, drift=0.06, medians=1.01)  # same side of 1
    assert near.brief == "1.04× (0.96–1.05) no measurable difference"
    assert not Ratio("c", 1.003, 0.96, 1.05, rounds=9, coverage=0.96, drift=0.06, medians=0.99).medians_across


def test_fits_says_what_no_measurable_difference_still_holds():
    flat = Ratio("c", 1.06, 0.99, 1.09, rounds=9, coverage=0.96, drift=0.01)  # reader FK: 'compiling does nothing'?
    assert flat.grade == "no difference" and flat.fits == " (anything from -1% to +9% fits)"
    assert Ratio("c", 1.0, 0.99, 1.01, rounds=9, coverage=0.96, drift=0.01).fits == ""  # within 2 %: nothing to add
    assert Ratio("c", 1.3, 1.2, 1.4, rounds=9, coverage=0.96, drift=0.01).fits == ""  # a difference: its own words
    assert Ratio("c", 1.05, 0.85, 1.3, rounds=9, coverage=0.96, drift=0.01).fits == ""  # too wide says so itself
