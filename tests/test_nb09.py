"""course_lib.lessons.nb09: notebook 09's exercise checks accept the answer and refuse wrong ones."""

import pytest
import torch

from course_lib.lessons import nb09


def test_adamw_state_bytes_exercise():
    nb09.check_adamw_state_bytes(lambda m: sum(2 * p.nbytes + 4 for p in m.parameters() if p.requires_grad))
    with pytest.raises(AssertionError, match="step count"):  # the 4-byte step forgotten
        nb09.check_adamw_state_bytes(lambda m: sum(2 * p.nbytes for p in m.parameters() if p.requires_grad))
    with pytest.raises(AssertionError):  # frozen parameters counted
        nb09.check_adamw_state_bytes(lambda m: sum(2 * p.nbytes + 4 for p in m.parameters()))


def test_saved_bytes_linear_gelu_exercise():
    size = lambda dtype: torch.empty(0, dtype=dtype).element_size()  # noqa: E731
    nb09.check_saved_bytes_linear_gelu(lambda b, i, o, d: b * (i + o) * size(d))
    with pytest.raises(AssertionError):  # the linear's input forgotten
        nb09.check_saved_bytes_linear_gelu(lambda b, i, o, d: b * o * size(d))
    with pytest.raises(AssertionError):  # float32 assumed
        nb09.check_saved_bytes_linear_gelu(lambda b, i, o, d: b * (i + o) * 4)
