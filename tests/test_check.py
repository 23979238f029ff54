import pytest
import torch
import torch.nn.functional as F

from course_lib import check


def test_expect_passes_and_prints(capsys):
    check.expect("trainable parameters", 1234, 1234)
    assert "1,234 expected 1,234 ✓" in capsys.readouterr().out


def test_expect_fails_loudly():
    with pytest.raises(AssertionError, match="got 3, expected 4"):
        check.expect("answer", 3, 4)


def test_close_prints_what_the_tolerance_bounds(capsys):
    a = torch.tensor([1.0, 100.0, -2.0], dtype=torch.float64)
    check.close(a + torch.tensor([5.5e-6, 1e-5, 0.0], dtype=torch.float64), a, what="sum",
                atol=1e-6, rtol=1e-5)
    out = capsys.readouterr().out
    assert "max |Δ| 1.00e-05" in out  # the largest difference, not a relative one
    assert "atol 1e-06 + rtol 1e-05·|expected|" in out and "all 3 elements" in out
    assert "worst at 50% of its allowance" in out  # 5.5e-6 of 1e-6 + 1e-5·1; 1e-5 of 1.001e-3 is 1%
    assert "rel diff" not in out  # no unbounded relative figure beside a passing check


def test_close_fails_with_count_and_worst_share():
    a = torch.ones(4)
    with pytest.raises(AssertionError, match=r"fails on 2 of 4 elements, worst at 909× its allowance"):
        check.close(a + torch.tensor([1e-2, 1e-3, 0.0, 0.0]), a, what="sum", atol=1e-6, rtol=1e-5)
    with pytest.raises(AssertionError, match="not close"):
        check.close(a * float("nan"), a, what="nan")
    with pytest.raises(AssertionError, match="shape"):
        check.close(torch.ones(2), a, what="sum")


def test_close_treats_equal_values_as_zero_error(capsys):
    a = torch.tensor([0.0, float("inf"), 3.0])
    check.close(a.clone(), a, what="exact", atol=0.0, rtol=0.0)
    assert "worst at 0% of its allowance ✓" in capsys.readouterr().out


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


def test_gpt_forward_flops_exercise_accepts_the_formula_and_refuses_training_and_2n_alone(capsys):
    check.gpt_forward_flops_per_token(lambda n, layers, t, c: 2 * n + 4 * layers * t * c)
    assert "✓" in capsys.readouterr().out
    with pytest.raises(AssertionError):
        check.gpt_forward_flops_per_token(lambda n, layers, t, c: 2 * n)  # attention's FLOPs left out
    with pytest.raises(AssertionError, match="a third"):  # the training count, printed earlier in 08
        check.gpt_forward_flops_per_token(lambda n, layers, t, c: 6 * n + 12 * layers * t * c)


def test_gpt_forward_flops_exercise_leaves_the_global_rng_alone():
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    check.gpt_forward_flops_per_token(lambda n, layers, t, c: 2 * n + 4 * layers * t * c)
    assert torch.equal(torch.rand(3), expected)


def test_accum_steps_exercise():
    import math

    check.accum_steps(lambda target, micro, t, world: math.ceil(target / (micro * t * world)))
    with pytest.raises(AssertionError):
        check.accum_steps(lambda target, micro, t, world: target // (micro * t * world))  # rounds down
    with pytest.raises(AssertionError):
        check.accum_steps(lambda target, micro, t, world: math.ceil(target / (micro * t)))  # one GPU


def test_adamw_state_bytes_exercise():
    check.adamw_state_bytes(lambda m: sum(2 * p.nbytes + 4 for p in m.parameters() if p.requires_grad))
    with pytest.raises(AssertionError, match="step count"):  # the 4-byte step forgotten
        check.adamw_state_bytes(lambda m: sum(2 * p.nbytes for p in m.parameters() if p.requires_grad))
    with pytest.raises(AssertionError):  # frozen parameters counted
        check.adamw_state_bytes(lambda m: sum(2 * p.nbytes + 4 for p in m.parameters()))


def test_saved_bytes_linear_gelu_exercise():
    size = lambda dtype: torch.empty(0, dtype=dtype).element_size()  # noqa: E731
    check.saved_bytes_linear_gelu(lambda b, i, o, d: b * (i + o) * size(d))
    with pytest.raises(AssertionError):  # the linear's input forgotten
        check.saved_bytes_linear_gelu(lambda b, i, o, d: b * o * size(d))
    with pytest.raises(AssertionError):  # float32 assumed
        check.saved_bytes_linear_gelu(lambda b, i, o, d: b * (i + o) * 4)


def test_allocated_is_exact_on_cpu_and_allows_block_tails_on_cuda(capsys):
    check.allocated("cpu bytes", 1024, 1024, 3, "cpu")
    with pytest.raises(AssertionError):
        check.allocated("cpu bytes", 1536, 1024, 3, "cpu")
    check.allocated("cuda bytes", 1024 + 2**20, 1024, 2, "cuda")  # a tail: allowed
    assert "block tails" in capsys.readouterr().out
    with pytest.raises(AssertionError):
        check.allocated("cuda bytes", 512, 1024, 2, "cuda")  # less than asked: impossible
    with pytest.raises(AssertionError):
        check.allocated("cuda bytes", 1024 + 3 * 2**20, 1024, 2, "cuda")  # more than 1 MiB each


def test_arithmetic_intensity_exercise():
    add = lambda n: n / (12 * n)  # noqa: E731
    matmul = lambda m, k, n, s: 2 * m * k * n / (s * (m * k + k * n + m * n))  # noqa: E731
    check.arithmetic_intensity(add, matmul)
    with pytest.raises(AssertionError):  # the result's write forgotten
        check.arithmetic_intensity(lambda n: n / (8 * n), matmul)
    with pytest.raises(AssertionError):  # a multiply-add counted as one FLOP
        check.arithmetic_intensity(add, lambda m, k, n, s: m * k * n / (s * (m * k + k * n + m * n)))


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
    check.no_sync_loop(lambda m, o, b: _loop(m, o, b, read=False), reference)
    with pytest.raises(AssertionError, match="synchronising"):  # .item() left in
        check.no_sync_loop(lambda m, o, b: torch.tensor(_loop(m, o, b, read=True)), reference)
    with pytest.raises(AssertionError):  # no training step: other losses
        check.no_sync_loop(lambda m, o, b: torch.stack([F.cross_entropy(m(xb).flatten(0, 1), yb.flatten()).detach()
                                                        for xb, yb in b]), reference)


# ---- student copies: an unsolved exercise is reported, not raised -------------------------

def _notebook_function(source: str):
    """A function defined as in a notebook (module __main__), e.g. nbgrader's stub."""
    namespace = {"__name__": "__main__"}
    exec(source, namespace)
    return next(v for k, v in namespace.items() if callable(v) and not k.startswith("__"))


STUB = "def flops(m, k, n):\n    # YOUR CODE HERE\n    raise NotImplementedError()\n"


def test_a_stub_in_an_exercise_check_prints_one_sentence_naming_it(capsys):
    check.flop_count(_notebook_function(STUB))  # returns: the notebook runs on
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith("not done yet: `flops`")


def test_every_exercise_check_reports_a_stub(capsys):
    from course_lib import accumulate, attention, ddp, dp, precision
    stub = _notebook_function("def answer(*args):\n    raise NotImplementedError()\n")
    checks = [lambda: check.flop_count(stub), lambda: check.transfer_time(stub),
              lambda: check.gpt_forward_flops_per_token(stub), lambda: check.accum_steps(stub),
              lambda: check.adamw_state_bytes(stub), lambda: check.saved_bytes_linear_gelu(stub),
              lambda: check.arithmetic_intensity(stub, stub), lambda: check.no_sync_loop(stub, lambda *a: [0.0] * 3),
              lambda: precision.check_loss_scale(stub), lambda: precision.check_survivors(stub, [1.0]),
              lambda: accumulate.check_accumulation(stub), lambda: attention.check_flops(stub),
              lambda: attention.check_cached_causal_mask(stub), lambda: ddp.check_epoch_orders(stub),
              lambda: ddp.check_same_collectives(stub), lambda: dp.check_chunk_sizes(stub)]
    for run in checks:
        run()
    out = capsys.readouterr().out
    assert out.count("not done yet: `answer`") == len(checks)


def test_the_exercise_block_reports_a_stub_and_lets_a_wrong_answer_fail(capsys):
    stub = _notebook_function(STUB)
    with check.exercise():
        check.expect("flops", stub(1, 2, 3), 12)
    assert capsys.readouterr().out.startswith("not done yet: `flops`")
    wrong = _notebook_function("def flops(m, k, n):\n    return m * k * n\n")
    with pytest.raises(AssertionError), check.exercise():
        check.expect("flops", wrong(1, 2, 3), 12)


@pytest.mark.parametrize("source", [
    "def f():\n    raise NotImplementedError('not for this dtype')\n",  # a message: a real error
    "def f():\n    raise TypeError()\n",
])
def test_other_errors_are_not_called_unsolved(source):
    with pytest.raises((NotImplementedError, TypeError)), check.exercise():
        _notebook_function(source)()


def test_a_bare_not_implemented_error_from_a_library_is_a_real_error():
    def library_function():  # defined in this test module, not in a notebook (__main__)
        raise NotImplementedError()
    with pytest.raises(NotImplementedError), check.exercise():
        library_function()
