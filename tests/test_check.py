import pytest
import torch

from course_lib import check


def test_expect_passes_and_prints(capsys):
    check.expect("trainable parameters", 1234, 1234)
    assert "1,234 expected 1,234 ✓" in capsys.readouterr().out


def test_expect_fails_loudly():
    with pytest.raises(AssertionError, match="got 3, expected 4"):
        check.expect("answer", 3, 4)


def test_close_reports_differences(capsys):
    a = torch.ones(3)
    check.close(a + 1e-7, a, what="sum", atol=1e-6)
    assert "max abs diff" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="not close"):
        check.close(a + 1e-2, a, what="sum", atol=1e-6)
    with pytest.raises(AssertionError, match="shape"):
        check.close(torch.ones(2), a, what="sum")


def test_between():
    check.between("accuracy", 0.95, 0.9, 1.0)
    with pytest.raises(AssertionError, match="outside"):
        check.between("accuracy", 0.5, 0.9, 1.0)


def test_flop_count_exercise():
    check.flop_count(lambda m, k, n: 2 * m * k * n)
    with pytest.raises(AssertionError, match="multiply-add is 2 FLOPs"):
        check.flop_count(lambda m, k, n: m * k * n)


def test_transfer_time_exercise():
    check.transfer_time(lambda nbytes, gbps: nbytes / (gbps * 1e9))
    with pytest.raises(AssertionError, match="expected"):
        check.transfer_time(lambda nbytes, gbps: nbytes / gbps)
