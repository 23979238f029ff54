"""course_lib.lessons.nb01: notebook 01's exercise checks accept the answer and refuse wrong ones."""

import pytest

from course_lib.lessons import nb01


def test_flop_count_exercise():
    nb01.check_flop_count(lambda m, k, n: 2 * m * k * n)
    with pytest.raises(AssertionError, match="multiply-add is 2 FLOPs"):
        nb01.check_flop_count(lambda m, k, n: m * k * n)


def test_transfer_time_exercise():
    nb01.check_transfer_time(lambda nbytes, gbps: nbytes / (gbps * 1e9))
    with pytest.raises(AssertionError, match="expected"):
        nb01.check_transfer_time(lambda nbytes, gbps: nbytes / gbps)
