"""course_lib.lessons.nb10: notebook 10's exercise checks accept the answer and refuse wrong ones."""

import pytest
import torch
import torch.nn.functional as F

from course_lib.lessons import nb10

pytestmark = pytest.mark.versioned  # torch.compile: make test-oldest runs it


def test_arithmetic_intensity_exercise():
    add = lambda n: n / (12 * n)  # noqa: E731
    matmul = lambda m, k, n, s: 2 * m * k * n / (s * (m * k + k * n + m * n))  # noqa: E731
    nb10.check_arithmetic_intensity(add, matmul)
    with pytest.raises(AssertionError):  # the result's write forgotten
        nb10.check_arithmetic_intensity(lambda n: n / (8 * n), matmul)
    with pytest.raises(AssertionError):  # a multiply-add counted as one FLOP
        nb10.check_arithmetic_intensity(add, lambda m, k, n, s: m * k * n / (s * (m * k + k * n + m * n)))


def _loop(model, opt, batches, read):
    losses = []
    for xb, yb in batches:
        loss = F.cross_entropy(model(xb).flatten(0, 1), yb.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item() if read else loss.detach())
    return losses if read else torch.stack(losses)


def test_no_sync_loop_exercise():
    reference = lambda m, o, b: _loop(m, o, b, read=True)  # noqa: E731
    nb10.check_no_sync_loop(lambda m, o, b: _loop(m, o, b, read=False), reference)
    with pytest.raises(AssertionError, match="synchronising"):  # .item() left in
        nb10.check_no_sync_loop(lambda m, o, b: torch.tensor(_loop(m, o, b, read=True)), reference)
    with pytest.raises(AssertionError):  # no training step: other losses
        nb10.check_no_sync_loop(lambda m, o, b: torch.stack([F.cross_entropy(m(xb).flatten(0, 1), yb.flatten()).detach()
                                                             for xb, yb in b]), reference)
