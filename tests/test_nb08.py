"""course_lib.lessons.nb08: notebook 08's exercise checks accept the answer and refuse wrong ones."""

import pytest
import torch

from course_lib.lessons import nb08


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
