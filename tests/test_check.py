import pytest
import torch

from course_lib import check
from course_lib.lessons import nb01, nb03, nb04, nb05, nb06, nb07, nb08, nb09, nb10


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


# ---- student copies: an unsolved exercise is reported, not raised -------------------------

def _notebook_function(source: str):
    """A function defined as in a notebook (module __main__), e.g. nbgrader's stub."""
    namespace = {"__name__": "__main__"}
    exec(source, namespace)
    return next(v for k, v in namespace.items() if callable(v) and not k.startswith("__"))


STUB = "def flops(m, k, n):\n    # YOUR CODE HERE\n    raise NotImplementedError()\n"


def test_a_stub_in_an_exercise_check_prints_one_sentence_naming_it(capsys):
    nb01.check_flop_count(_notebook_function(STUB))  # returns: the notebook runs on
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith("not done yet: `flops`")


def test_every_exercise_check_reports_a_stub(capsys):
    stub = _notebook_function("def answer(*args):\n    raise NotImplementedError()\n")
    checks = [lambda: nb01.check_flop_count(stub), lambda: nb01.check_transfer_time(stub),
              lambda: nb08.check_gpt_forward_flops_per_token(stub), lambda: nb08.check_accum_steps(stub),
              lambda: nb09.check_adamw_state_bytes(stub), lambda: nb09.check_saved_bytes_linear_gelu(stub),
              lambda: nb10.check_arithmetic_intensity(stub, stub), lambda: nb10.check_no_sync_loop(stub, lambda *a: [0.0] * 3),
              lambda: nb10.check_no_graph_break(stub, lambda: torch.nn.Linear(4, 4)),
              lambda: nb03.check_loss_scale(stub), lambda: nb03.check_survivors(stub, [1.0]),
              lambda: nb04.check_accumulation(stub), lambda: nb07.check_flops(stub),
              lambda: nb07.check_cached_causal_mask(stub), lambda: nb06.check_epoch_orders(stub),
              lambda: nb06.check_same_collectives(stub), lambda: nb05.check_chunk_sizes(stub)]
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


def test_agreement_is_allclose_over_pairs_and_merges_over_ranks(capsys):
    """One row format for every comparison with one process: ok exactly when torch.allclose
    holds on every pair; merged rows take the worst rank."""
    a, b = torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0 + 2e-5])
    row = check.agreement("pair", [a, a], [a, b], atol=1e-5, rtol=1e-5)
    assert row["ok"] == torch.allclose(a, b, atol=1e-5, rtol=1e-5) == True  # noqa: E712
    assert row["elements"] == 4 and row["over"] == 0 and 0.5 < row["worst_share"] < 0.9
    bad = check.agreement("pair", b, a, atol=1e-6, rtol=1e-6)
    assert not bad["ok"] and bad["over"] == 1 and not torch.allclose(b, a, atol=1e-6, rtol=1e-6)
    merged = check.merge([[row], [bad]])
    assert merged[0]["over"] == 1 and not merged[0]["ok"] and merged[0]["elements"] == 6
    assert merged[0]["worst_share"] == bad["worst_share"]
    check.agreements([row])
    assert "pair: max |Δ| 2.00e-05" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="fails on 1 of 6 elements"):
        check.agreements(merged)
    with pytest.raises(AssertionError, match="shape"):
        check.agreement("shapes", a, torch.ones(3), atol=0, rtol=0)
