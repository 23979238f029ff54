"""Tests for course_lib.lessons.nb03 (CPU, tiny models)."""

from __future__ import annotations

import itertools
import math
from functools import partial

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from course_lib import bench, data, models, profiling, train, verdicts
from course_lib.lessons import nb03

pytestmark = pytest.mark.versioned  # AMP and float rounding: make test-oldest runs it


def tiny_cnn() -> nn.Module:
    return models.SmallCNN(num_classes=6, width=4, resolution=8)


def tiny_linear() -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(12, 3))


@pytest.fixture
def images():
    g = torch.Generator().manual_seed(0)
    return torch.randn(32, 3, 8, 8, generator=g), torch.arange(32) % 6


@pytest.fixture
def small_inputs():
    """Inputs ~1e-4: linear-layer weight gradients ~1e-5, below what fp16 Adam can hold."""
    g = torch.Generator().manual_seed(0)
    return 1e-4 * torch.randn(16, 3, 2, 2, generator=g), torch.arange(16) % 3


# -- gradients and loss scaling -----------------------------------------------------------

def test_underflow_rows_count_exactly():
    grads = torch.tensor([1e-9, -1e-6, 1e-3, 10.0, 0.0])
    one, big = nb03.underflow_rows(grads, [1.0, 2.0**16])
    assert (one.flushed, one.subnormal, one.overflowed, one.n) == (1, 1, 0, 5)
    assert (big.flushed, big.subnormal, big.overflowed) == (0, 0, 1)  # 10 * 65536 > 65504
    assert one.lost == 1 and big.lost == 1
    assert "2^16" in nb03.underflow_table([one, big])
    with pytest.raises(ValueError, match="positive"):
        nb03.underflow_rows(grads, [0.0])


def test_needed_scale_and_exercise_check(capsys):
    assert nb03.needed_scale(2**-14) == 1.0
    assert nb03.needed_scale(2**-20) == 2.0**6
    assert nb03.needed_scale(1e-3) == 1.0
    assert nb03.needed_scale(1e-7) * 1e-7 >= 2**-14 > nb03.needed_scale(1e-7) / 2 * 1e-7
    good = nb03.needed_scale
    nb03.check_loss_scale(good)
    assert "✓" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="still below"):
        nb03.check_loss_scale(lambda g: 2.0 ** math.floor(math.log2(2**-14 / g)))
    with pytest.raises(ValueError, match="positive"):
        nb03.needed_scale(0.0)


def test_check_survivors_uses_the_normal_range():
    values = [0.0, 1e-8, 6e-5, 2.0**-14, 1.0, 65504.0, 70000.0]
    within = lambda v: (math.isfinite(nb03.cast(v, "fp16"))  # noqa: E731
                        and abs(nb03.cast(v, "fp16") - v) <= 1e-3 * abs(v))
    # 6e-5 is subnormal in fp16 yet within 0.1% after the cast: it does not stay normal
    assert within(6e-5) and not nb03.stays_normal(6e-5)
    assert [nb03.stays_normal(v) for v in values] == [True, False, False, True, True, True, False]
    nb03.check_survivors(lambda v: v == 0 or 2**-14 <= abs(v) <= 65504, values)  # the limits
    with pytest.raises(AssertionError):
        nb03.check_survivors(within, values)  # within 0.1%: not the same
    with pytest.raises(AssertionError):
        nb03.check_survivors(lambda v: True, values)


def test_activation_grads_capture_every_layer_output(images):
    x, y = images[0][:2], images[1][:2]
    torch.manual_seed(0)
    model = tiny_cnn()
    grads = nb03.activation_grads(model, x, y)
    # in backward order: the logits (2,6), then conv outputs (2,16,2,2), (2,8,4,4), (2,4,8,8)
    assert grads.numel() == 12 + 128 + 256 + 512
    logits = model(x)
    expected = (F.softmax(logits, -1) - F.one_hot(y, 6)) / 2  # d(mean CE)/d logits
    torch.testing.assert_close(grads[:12], expected.detach().flatten(), rtol=1e-4, atol=1e-7)
    assert all(p.grad is None for p in model.parameters())
    with pytest.raises(ValueError, match="no Conv2d or Linear"):
        nb03.activation_grads(nn.Sequential(nn.Flatten()), x, y)


# -- pure fp16 optimizer steps and GradScaler ------------------------------------------------

def test_half_adam_divides_by_zero_eps(small_inputs):
    x, y = small_inputs
    step = nb03.half_step(tiny_linear, x, y, "adamw", lr=1e-3)
    assert step.elements == 12 * 3 + 3
    assert step.state_zero > 0 and step.nonfinite > 0  # v == 0 and eps == 0 -> m / 0


def test_half_sgd_loses_small_updates(small_inputs):
    x, y = small_inputs
    step = nb03.half_step(tiny_linear, x, y, "sgd", lr=1e-3)
    assert step.state_zero is None and step.nonfinite == 0
    assert 0 < step.unchanged <= step.nonzero_grads  # lr * g below half an fp16 step of w
    with pytest.raises(ValueError, match="sgd or adamw"):
        nb03.half_step(tiny_linear, x, y, "lion")


def test_scaler_table_marks_the_skipped_steps():
    rows = [nb03.ScalerRow(1, 2.0**16, False, True, 2.0**16), nb03.ScalerRow(2, 2.0**16, True, False, 2.0**15)]
    table = nb03.scaler_table(rows).splitlines()
    assert len(table) == 4 and "next scale" in table[0]
    assert table[2].split("|")[3].strip() == "yes" and table[3].split("|")[2:4] == ["       inf ", "       SKIPPED "]
    assert table[3].split("|")[-1].strip() == "32768"


# -- runs by precision -----------------------------------------------------------------------


def test_train_run_fp32_learns_and_reports(images):
    x, y = images
    r = nb03.train_run("fp32", tiny_cnn, data.TensorLoader(x, y, 16), steps=20,
                       lr=1e-2, device="cpu")
    assert len(r.history.loss) == 20 and r.step_s > 0
    assert min(r.history.loss[-5:]) < r.history.loss[0]
    assert r.first_nan_step is None and r.line("fp32 adamw", 20).startswith("fp32 adamw          | loss at step 1 ")
    assert f"at step 20 (final) {r.final_loss:.4f} | cpu" in r.line("fp32 adamw", 20)


def test_control_runs_are_the_fp32_run_from_nudged_weights(images):
    x, y = images
    batches = data.TensorLoader(x, y, 16)
    run = dict(steps=4, lr=1e-2, device="cpu", seed=3)
    base = nb03.train_run("fp32", tiny_cnn, batches, **run).history.loss
    controls = nb03.control_runs(tiny_cnn, batches, 2, base=base, **run)
    curves = [c.history.loss for c in controls]
    assert len(curves) == 2 and all(len(c) == 4 for c in curves)
    assert all(c != base for c in curves) and curves[0] != curves[1]  # real, and two different changes
    assert controls[0].ulps > 0 > controls[1].ulps  # one nudged up, one down (grown where 1 step did nothing)
    assert all(abs(a - b) < 1e-4 for c in curves for a, b in zip(c[:1], base[:1]))  # from the same start
    again = nb03.train_run("fp32", lambda: verdicts.nudge(tiny_cnn(), controls[1].ulps), batches, **run)
    assert again.history.loss == curves[1]  # the fp32 run from weights nudged by the steps it reports


@pytest.mark.parametrize("shuffle", [False, True])
def test_train_run_keeps_the_callers_batch_order(shuffle):
    x = torch.arange(12.0).view(12, 1, 1, 1).expand(12, 3, 2, 2).contiguous()  # row i is all i
    y = torch.arange(12) % 3
    seen: list[torch.Tensor] = []

    def recording_linear() -> nn.Module:
        model = tiny_linear()
        model.register_forward_pre_hook(lambda _m, args: seen.append(args[0][:, 0, 0, 0].clone()))
        return model

    loader = data.TensorLoader(x, y, 4, shuffle=shuffle)
    nb03.train_run("fp32", recording_linear, loader, steps=3, lr=1e-3, device="cpu")
    rows = torch.cat(seen).long()  # which rows were trained on, in order
    assert sorted(rows.tolist()) == list(range(12))  # one epoch: every row once
    assert (rows.tolist() == list(range(12))) is (not shuffle)  # in order exactly when not shuffled
    assert loader.batch_sampler.epoch == 0 and loader.batch_sampler.shuffle is shuffle  # untouched


@pytest.mark.parametrize("name", ["fp16+GradScaler", "bf16"])
def test_train_run_amp_starts_where_fp32_starts(images, name):
    x, y = images
    batches = data.TensorLoader(x, y, 16)
    base = nb03.train_run("fp32", tiny_cnn, batches, steps=3, lr=1e-3, device="cpu")
    amp = nb03.train_run(name, tiny_cnn, batches, steps=3, lr=1e-3, device="cpu")
    assert all(math.isfinite(v) for v in amp.history.loss)
    gap = abs(amp.history.loss[0] - base.history.loss[0]) / base.history.loss[0]  # same weights, batch
    assert 0 < gap < 1e-2  # 16-bit rounding only; 0 would mean autocast did nothing


def test_pure_half_adam_run_goes_nan(small_inputs):
    x, y = small_inputs
    r = nb03.train_run("pure .half()", tiny_linear, data.TensorLoader(x, y, 8), steps=3,
                       lr=1e-3, device="cpu")
    assert r.first_nan_step == 2  # step 1's update wrote inf into the weights
    assert r.history.step == [1, 2]  # and the run ended there, its weights NaN for good
    assert "NaN from step 2: stopped at step 2 of 3 |" in r.line("pure .half() adamw", 3)
    with pytest.raises(ValueError, match="Unknown precision"):
        nb03.train_run("fp8", tiny_linear, data.TensorLoader(x, y, 8), steps=1, lr=1e-3,
                       device="cpu")


def test_bf16_step_needs_less_memory_than_fp32():
    make = partial(models.SmallCNN, num_classes=6, width=8, resolution=16)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(32, 3, 16, 16, generator=g), torch.arange(32) % 6
    fp32 = nb03.step_peak_bytes("fp32", make, x, y, device="cpu")
    bf16 = nb03.step_peak_bytes("bf16", make, x, y, device="cpu")
    assert 0 < bf16 < fp32  # activations saved for backward in 2 bytes, not 4


def test_quick_run_summarises(images):
    x, y = images
    line = nb03.quick_run("bf16", tiny_cnn, data.TensorLoader(x, y, 16), steps=3)
    assert line.startswith("bf16: 3 steps") and "→" in line
    assert "of 2 steps after the first" in line  # the spread of the steps after the warm-up one


# -- the notebook's inline training step is the library's ------------------------------------

def _step_fp32(model, opt, x, y):  # as written in notebook 03, section 5
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def _step_bf16(model, opt, x, y):
    opt.zero_grad(set_to_none=True)
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def _step_fp16(model, opt, x, y, scaler):
    opt.zero_grad(set_to_none=True)
    with torch.autocast(device_type="cpu", dtype=torch.float16):
        loss = F.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    return loss


def _inline_losses(name: str, batches: data.TensorLoader, steps: int, lr: float) -> torch.Tensor:
    torch.manual_seed(0)
    model = tiny_cnn()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    if name == "fp16+GradScaler":
        scaler = torch.amp.GradScaler("cpu")
        return torch.stack([_step_fp16(model, opt, x, y, scaler).detach() for x, y in
                            itertools.islice(batches, steps)])
    step = {"fp32": _step_fp32, "bf16": _step_bf16}[name]
    return torch.stack([step(model, opt, x, y).detach() for x, y in itertools.islice(batches, steps)])


@pytest.mark.parametrize("name", ["fp32", "fp16+GradScaler", "bf16"])
def test_inline_step_matches_train_run(images, name):
    x, y = images
    batches = data.TensorLoader(x, y, 8, seed=0)
    lib = nb03.train_run(name, tiny_cnn, batches, steps=4, lr=1e-2, device="cpu", seed=0)
    inline = _inline_losses(name, batches, 4, lr=1e-2)
    torch.testing.assert_close(inline.float(), torch.tensor(lib.history.loss), rtol=1e-6, atol=0)
    if name != "fp32":  # autocast really ran in 16 bits: not fp32's losses
        assert not torch.equal(inline, _inline_losses("fp32", batches, 4, lr=1e-2))


def test_inline_step_check_catches_a_different_optimizer(images):
    x, y = images
    batches = data.TensorLoader(x, y, 8, seed=0)
    lib = nb03.train_run("fp32", tiny_cnn, batches, steps=3, lr=1e-2, device="cpu", seed=0)
    torch.manual_seed(0)
    model = tiny_cnn()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)  # PyTorch's default weight decay 0.01
    inline = torch.stack([_step_fp32(model, opt, a, b).detach() for a, b in itertools.islice(batches, 3)])
    assert inline[0] == lib.history.loss[0]  # same weights, same first batch
    assert not torch.allclose(inline, torch.tensor(lib.history.loss), rtol=1e-6, atol=0)


# -- verdicts and figures ----------------------------------------------------------------------


def test_compare_losses_judges_a_gap_against_control_runs():
    base = [2.0, 1.9, 1.8, 1.7, 1.6, 1.5, 1.55, 1.45, 1.5, 1.4]
    ctrl = [[v + d for v, d in zip(base, [0.0] * 6 + [0.01, -0.02, 0.03, -0.01])],
            [v + d for v, d in zip(base, [0.0] * 6 + [-0.03, 0.02, -0.01, 0.0])]]  # tail gaps +0.0025, -0.005
    assert "NaN/inf from step 3" in nb03.compare_losses("x", [2.0, 1.9, float("nan"), 1.0], base, controls=ctrl)
    same = nb03.compare_losses("bf16", [v + 0.004 for v in base], base, last=4, controls=ctrl)
    assert "within what a last-bit nudge does (2 control runs" in same and "(gap +0.0040)" in same
    worse = nb03.compare_losses("fp16", [v + 0.02 for v in base], base, last=4, controls=ctrl)
    assert "higher than fp32, beyond all 2 control runs" in worse and "1 time in 3" in worse
    better = nb03.compare_losses("fp16", [v - 0.5 for v in base], base, last=4, controls=ctrl)
    assert "lower than fp32, far beyond all 2" in better and "hint" not in better  # 100× the largest control
    # no control, no verdict: a gap alone cannot say whether rounding would do as much
    alone = nb03.compare_losses("fp16", [v + 0.02 for v in base], base, last=4)
    assert "no verdict" in alone and "beyond" not in alone
    # a baseline that has not learned (late losses near chance, ln 6 = 1.79): no verdict at all
    near_chance = [1.85, 1.83, 1.84, 1.82]
    line = nb03.compare_losses("bf16", [v + 0.5 for v in near_chance], near_chance, chance=math.log(6),
                               controls=[near_chance])
    assert "has not learned yet" in line and "beyond" not in line and "no measurable" not in line
    assert "beyond all 2" in nb03.compare_losses("bf16", [v - 0.5 for v in base], base, last=4,
                                                 chance=math.log(6), controls=ctrl)


def test_damage_figure_keeps_the_three_counts_apart():
    import matplotlib
    matplotlib.use("Agg")
    rows = [nb03.ScaleRow(1.0, 100, 5, 80, 0), nb03.ScaleRow(2.0**32, 100, 0, 0, 40)]
    fig = nb03.damage_figure(rows, title="t")
    ax = fig.axes[0]
    heights = {c.get_label(): [round(b.get_height(), 6) for b in c] for c in ax.containers}
    assert heights == {"flushed to 0": [5.0, 0.0], "subnormal (bits lost)": [80.0, 0.0],
                       "overflow to inf": [0.0, 40.0]}
    assert [t.get_text() for t in ax.get_xticklabels()] == ["S = 2^0", "S = 2^32"]


def test_steps_at_once_builds_every_model_before_stepping_any():
    events: list[str] = []

    def recording_cnn() -> nn.Module:
        events.append("build")
        model = tiny_cnn()
        model.register_forward_pre_hook(lambda *_: events.append("step"))
        return model

    x, y = torch.randn(8, 3, 8, 8), torch.arange(8) % 6
    nb03.steps_at_once(["fp32", "fp16+GradScaler", "bf16"], recording_cnn, x, y, device="cpu")
    assert events == ["build"] * 3 + ["step"] * 3  # all held at once, as when timed in turns
    with pytest.raises(ValueError, match="Unknown precision"):
        nb03.steps_at_once(["fp8"], recording_cnn, x, y, device="cpu")




# -- issue 29: verdicts printed from the numbers ------------------------------------------

def test_scaling_summary_says_where_the_counts_went():
    rows = [nb03.ScaleRow(1.0, 1000, 12, 800, 0), nb03.ScaleRow(2.0**8, 1000, 0, 80, 0),
            nb03.ScaleRow(2.0**16, 1000, 0, 1, 0), nb03.ScaleRow(2.0**24, 1000, 0, 0, 3),
            nb03.ScaleRow(2.0**32, 1000, 0, 0, 230)]
    line = nb03.scaling_summary(rows)
    assert "1.20%" in line and "80.00% at S = 2^0" in line and "at S = 2^16" in line
    assert "81.10% of the gradients moved into fp16's normal range" in line
    assert "from S = 2^24 on (0.30%), 23.00% at S = 2^32" in line
    none = nb03.scaling_summary(rows[:3])
    assert "none overflowed up to S = 2^16" in none
    with pytest.raises(ValueError):
        nb03.scaling_summary([])


def test_saved_bytes_halves_floats_and_keeps_integers(images):
    x, y = images
    torch.manual_seed(0)
    model = tiny_cnn()
    fp32, bf16 = nb03.saved_bytes(model, x, y), nb03.saved_bytes(model, x, y, torch.bfloat16)
    assert fp32[torch.int64] == bf16[torch.int64] > 0  # max-pool indices and labels keep their size
    assert bf16[torch.bfloat16] * 2 == pytest.approx(fp32[torch.float32], rel=0.05)
    big = torch.cat([x, x])  # a batch that is a view of a larger tensor counts its own bytes
    assert nb03.saved_bytes(model, big[:32], y) == fp32


# -- issue 52: the words around the notebook's numbers, from one place ------------------------

def _run(name: str, losses: list[float], skipped: tuple[int, ...] = ()) -> nb03.RunResult:
    h = train.History(step=list(range(1, len(losses) + 1)), loss=losses, skipped_steps=list(skipped))
    return nb03.RunResult(name, h, 0.01, "cpu")


def test_setup_lines_name_the_rates_and_the_data():
    x = torch.zeros(10, 3, 8, 8)
    text = nb03.setup_lines("smallcnn", 1234, x, 4, 20, "cpu", 3e-3, 0.05)
    assert text.splitlines() == ["learning rates: AdamW 0.003 (LR), SGD with momentum 0.05 (SGD_LR)",
                                 "smallcnn: 1,234 parameters | 10 images (3, 8, 8) on cpu (7.5 KiB) | batch 4, "
                                 "20 steps per loss curve"]


def test_gradient_lines_underflow_facts_and_damage_lines_read_the_rows():
    grads = torch.tensor([1e-9, -1e-6, 1e-3, 10.0, 0.0, 5.0, 2.0, 1e-2])
    rows = nb03.underflow_rows(grads, [2.0**k for k in (0, 8, 16, 24, 32)])
    text = nb03.gradient_lines(grads, rows, "cpu")
    assert text.startswith("8 gradient elements, 7 nonzero | smallest 1.00e-09") and "overflow to inf" in text
    facts = nb03.underflow_facts(rows)
    assert facts == {"fp16 grads → 0, no scaling": 12.5, "fp16 grads subnormal, no scaling": 12.5,
                     "fp16 grads → 0, scale 2^16": 0.0, "fp16 grads → inf, scale 2^32": 62.5}
    lines = nb03.damage_lines(rows).splitlines()
    assert lines[0] == "S = 1: flushed to 0 1 of 8 (12.50%), subnormal 1 of 8 (12.50%), inf 0 of 8 (0.00%)"
    assert lines[1] == ("fewest gradients gone (flushed + inf) at S = 2^8: 0 of 8 (0.00%); "
                        "at S = 2^32: 5 of 8 (62.50%) overflow to inf")
    assert lines[2].startswith("as S grows: ")


def test_half_lines_and_facts_give_each_run_its_verdict_and_its_figure():
    adam = nb03.HalfStep("adamw", 100, 90, 0, 7, 40)
    sgd = nb03.HalfStep("sgd", 100, 80, 20, 0, None)
    runs = {"fp32 adamw": _run("fp32", [2.0, 1.0]), "pure .half() adamw": _run("pure .half()", [2.0, math.nan]),
            "fp32 sgd": _run("fp32", [2.0, 1.5]), "pure .half() sgd": _run("pure .half()", [2.0, 1.6])}
    text = nb03.half_lines(adam, sgd, 0.05, runs, [], chance=math.log(6))
    assert "second moment exactly 0 in 40 of 100 (40.00%) elements; weights now inf/NaN: 7 of 100" in text
    assert "SGD lr 0.05, one fp16 step" in text and "20 of 80 (25.00%)" in text
    assert "pure .half() adamw: loss NaN/inf from step 2 on" in text and "pure .half() sgd vs fp32 sgd" in text
    facts = nb03.half_facts(adam, sgd, runs, 2)
    assert facts[".half() SGD: updates lost, 1 step"] == (25.0, "%")
    assert facts["pure .half() adamw: first NaN loss"] == (2, "step")
    assert facts["fp32 sgd: loss after 2 steps"] == (1.5, "nats") and len(facts) == 7


def test_precision_lines_read_a_cpus_ratios_and_say_what_gpus_measured():
    ratio = bench.Ratio("bf16 vs fp32", 0.5, 0.45, 0.55)
    text = nb03.precision_lines("cpu", ["fp32", "bf16"], [ratio])
    assert "bf16 ran" in text and "fp32+TF32 exists only on NVIDIA GPUs from Ampere on" in text
    assert "For comparison" not in text and "fp16 and fp32" not in text  # no fp16 ratio: no fp16 verdict
    assert "fp32+TF32 exists" not in nb03.precision_lines(torch.device("cuda"), ["fp32", "fp32+TF32"], [])


def test_profile_lines_compare_each_profile_with_fp32s():
    fp32 = profiling.StepProfile("fp32", 3, {"aten::convolution": 3.0, "aten::add": 1.0}, 4.4)
    bf16 = profiling.StepProfile("bf16", 3, {"aten::convolution": 2.0, "aten::to": 1.0, "aten::add": 1.0}, 4.5)
    lines = nb03.profile_lines({"fp32": fp32, "bf16": bf16}, {"fp32": 4.0})
    assert lines.splitlines()[0].startswith("fp32") and "the profiled step took 4.4 ms" in lines
    assert "bf16 vs fp32: 4 vs 4 ms of op time" in lines
    assert lines.endswith("fp32: convolutions and matmuls are 75% of the step's op time: were 16 bits to make them "
                          "free, its op time would fall at most 4.00× (op time, not wall time)")


def test_profiled_vs_timed_labels_its_causes_as_not_measured():
    p = profiling.StepProfile("fp32", 3, {"aten::relu": 300.0}, wall_ms=363.0)
    assert "33.93×" in nb03.profiled_vs_timed(p, 10.7) and "not measured apart" in nb03.profiled_vs_timed(p, 10.7)
    close = nb03.profiled_vs_timed(profiling.StepProfile("fp32", 3, {"aten::relu": 9.0}, wall_ms=10.7), 7.68)
    assert "1.39×" in close and "(a slower moment or the profiler's own cost: not measured apart)" in close
    near = profiling.StepProfile("fp32", 3, {"aten::relu": 9.0}, wall_ms=8.0)
    assert nb03.profiled_vs_timed(near, 7.68).endswith("1.04×")  # within 10 %: no cause offered
    assert nb03.profiled_vs_timed(profiling.StepProfile("fp32", 3, {"aten::relu": 1.0}), 10.7) == ""


def test_a_profile_and_a_timing_that_disagree_on_which_is_faster_say_so():
    fp32 = profiling.StepProfile("fp32", 3, {"aten::convolution": 99.3}, 110.0)
    bf16 = profiling.StepProfile("bf16", 3, {"aten::convolution": 4.3}, 6.0)
    lines = nb03.profile_lines({"fp32": fp32, "bf16": bf16}, {"fp32": 5.91, "bf16": 6.03})
    assert "disagree" not in lines  # the timed steps are within 10 % of each other
    lines = nb03.profile_lines({"fp32": fp32, "bf16": bf16}, {"fp32": 5.91, "bf16": 7.0})
    assert "bf16: the profile's op time is 0.04× fp32's but the timed step 1.18× fp32's" in lines
    assert nb03.disagreement("bf16", 0.95, 1.3) == nb03.disagreement("bf16", 1.5, 1.05) == ""


def test_memory_lines_set_each_peak_beside_fp32s_and_list_the_saved_bytes():
    text = nb03.memory_lines({"fp32": 2 * 2**20, "bf16": 2**20}, {"bf16": {torch.bfloat16: 1024, torch.int64: 64}})
    assert "bf16             | peak memory of one training step    1.0 MiB | 0.50× fp32's" in text
    assert text.splitlines()[-1] == "bf16             | saved for backward: bfloat16 1.0 KiB, int64 64 B"


def test_loss_lines_and_facts_report_the_skipped_steps():
    runs = {"fp32": _run("fp32", [2.0, 1.0, 0.5]), "fp16+GradScaler": _run("fp16+GradScaler", [2.0, 1.0, 0.6], (1,))}
    text = nb03.loss_lines(runs, [], math.log(6), 3)
    assert "fp16+GradScaler vs fp32" in text
    assert text.endswith("GradScaler skipped 1 of 3 steps in the fp16 run (steps [1])")
    facts = nb03.loss_facts(runs, 3, 64)
    assert facts["fp32: loss after 3 steps"] == (0.5, "nats", "3 steps of 64")
    assert facts["fp16+GradScaler: skipped steps"] == (1, "steps", "")


def test_the_reference_adamw_rows_name_their_model(tmp_path, monkeypatch):
    from course_lib import report
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    assert nb03.adamw_reference_setup() == ""  # no reference run
    monkeypatch.setattr(report, "reference", lambda nb: ("GPU", {"fp32 step": {"note": "resnet18, batch 256"}}))
    assert nb03.adamw_reference_setup().startswith("(the reference's model: resnet18, 62 parameter tensors")
