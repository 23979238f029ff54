"""course_lib.lessons.nb08: notebook 08's exercise checks accept the answer and refuse wrong ones."""

import pytest
import torch

from course_lib.bench import Ratio
from course_lib.lessons import nb08

pytestmark = pytest.mark.versioned  # the GPT under AMP and torch.compile: make test-oldest runs it


def test_gpt_forward_flops_exercise_accepts_the_formula_and_refuses_training_and_2n_alone(capsys):
    nb08.check_gpt_forward_flops_per_token(lambda n, layers, t, c: 2 * n + 4 * layers * t * c)
    assert "✓" in capsys.readouterr().out
    with pytest.raises(AssertionError):
        nb08.check_gpt_forward_flops_per_token(lambda n, layers, t, c: 2 * n)  # attention's FLOPs left out
    with pytest.raises(AssertionError, match="a third"):  # the training count, printed earlier in 08
        nb08.check_gpt_forward_flops_per_token(lambda n, layers, t, c: 6 * n + 12 * layers * t * c)


def test_gpt_forward_flops_exercise_leaves_the_global_rng_alone():
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    nb08.check_gpt_forward_flops_per_token(lambda n, layers, t, c: 2 * n + 4 * layers * t * c)
    assert torch.equal(torch.rand(3), expected)


def test_accum_steps_exercise():
    import math

    nb08.check_accum_steps(lambda target, micro, t, world: math.ceil(target / (micro * t * world)))
    with pytest.raises(AssertionError):
        nb08.check_accum_steps(lambda target, micro, t, world: target // (micro * t * world))  # rounds down
    with pytest.raises(AssertionError):
        nb08.check_accum_steps(lambda target, micro, t, world: math.ceil(target / (micro * t)))  # one GPU


def _paired(value, medians, drift=0.03):
    from course_lib.bench import Ratio
    return Ratio("compiled vs eager", value, 0.89, 1.15, rounds=5, coverage=0.94, drift=drift, medians=medians)


def test_paired_vs_medians_explains_a_disagreement_and_stays_silent_otherwise():
    said = nb08.paired_vs_medians(_paired(1.08, 0.94))
    assert "1.08×" in said and "0.94×" in said and "point opposite ways" in said and "3%" in said
    assert "differ because" in nb08.paired_vs_medians(_paired(1.30, 1.10))  # both above 1, far apart
    assert nb08.paired_vs_medians(_paired(1.08, 1.06)) == ""  # within 5 %: nothing to explain
    from course_lib.bench import Ratio
    assert nb08.paired_vs_medians(Ratio("apart", 1.2, 1.1, 1.3)) == ""  # measured apart: no medians' ratio


def _in_turns(value, lo, hi, name="r"):
    return Ratio(name, value, lo, hi, "higher", "lower", rounds=5, coverage=0.94, drift=0.01)


BUSY = {"1 sequence": 95.0, "16 sequences": 97.0}
MFU = {"1 sequence": 0.004, "16 sequences": 0.05}


def test_busy_ratio_pairs_turn_by_turn():
    r = nb08.busy_ratio({"a": [50, 100, 80], "b": [100, 100, 40]}, "a", "b")
    assert (r.value, r.lo, r.hi, r.rounds) == (1.0, 0.5, 2.0, 3)


@pytest.mark.parametrize("gain, busy, says", [
    (_in_turns(12.0, 10.0, 14.0), _in_turns(1.02, 0.98, 1.05), "did not move beyond its spread"),
    (_in_turns(12.0, 10.0, 14.0), _in_turns(1.5, 1.3, 1.7), "rose 1.50×"),
    (_in_turns(12.0, 10.0, 14.0), _in_turns(0.8, 0.7, 0.9), "fell"),
    (_in_turns(1.4, 1.3, 1.5), _in_turns(1.4, 1.2, 1.6), "rose about as much as MFU"),
    (_in_turns(1.02, 0.95, 1.1), _in_turns(1.0, 0.9, 1.1), "not told apart"),
    (_in_turns(0.5, 0.45, 0.55), _in_turns(1.0, 0.9, 1.1), "2.00× lower than the small one's"),
])
def test_busy_verdict_follows_the_two_paired_ratios(gain, busy, says):
    text = nb08.busy_verdict(gain, busy, "1 sequence", "16 sequences", BUSY, MFU)
    assert text.startswith("verdict:") and says in text
    assert "95 %" in text and "0.40%" in text  # the medians printed above it, as printed
    assert ("not how much of its peak" in text) == (says in ("did not move beyond its spread", "rose 1.50×", "fell"))


def test_busy_verdict_calls_a_change_under_a_point_steady():
    text = nb08.busy_verdict(_in_turns(4.0, 3.5, 4.3), _in_turns(0.9995, 0.999, 0.9998), "1 sequence",
                             "16 sequences", {"1 sequence": 99.2, "16 sequences": 99.1}, MFU)
    assert "stayed at about 99 %" in text and "fell" not in text
