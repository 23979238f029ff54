"""Tests for course_lib.lessons.nb03 (CPU, tiny models)."""

from __future__ import annotations

import itertools
import math
from functools import partial

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from course_lib import data, models, verdicts
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


# -- formats and casts ----------------------------------------------------------------

def test_format_facts_match_ieee_half_and_bfloat16():
    fp16, bf16, fp32 = (nb03.format_facts(n) for n in ("fp16", "bf16", "fp32"))
    assert (fp16.max, fp16.smallest_normal, fp16.smallest_subnormal, fp16.eps) == (65504.0, 2**-14, 2**-24, 2**-10)
    assert (fp16.mantissa_bits, bf16.mantissa_bits, fp32.mantissa_bits) == (10, 7, 23)
    assert bf16.smallest_normal == fp32.smallest_normal  # same 8-bit exponent
    assert "65504" in nb03.format_table().replace(",", "") or "6.55e+04" in nb03.format_table()


def test_fate_names_what_a_cast_does():
    assert nb03.fate(1e-8, "fp16") == "underflow → 0"
    assert nb03.fate(70000.0, "fp16") == "overflow → inf"
    assert nb03.fate(1.0, "fp16") == "exact"
    assert nb03.fate(1e-6, "fp16").startswith("subnormal")
    assert nb03.fate(0.1, "fp16").startswith("rounded")
    assert nb03.fate(1e-8, "bf16").startswith("rounded")  # bf16 has fp32's range
    assert nb03.cast(65519.0, "fp16") == 65504.0


def test_survives_and_table():
    assert [nb03.survives(v) for v in (1e-8, 1e-6, 1e-4, 1.0, 65504.0, 70000.0)] == \
        [False, False, True, True, True, False]
    assert nb03.survives(1e-8, "bf16", rtol=1e-2)  # in range, 8 bits of precision
    table = nb03.cast_table([1e-8, 70000.0])
    assert "underflow → 0" in table and "overflow → inf" in table


def test_unknown_format_is_one_sentence():
    with pytest.raises(ValueError, match="Unknown format 'fp8'"):
        nb03.format_facts("fp8")


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
    # 6e-5 is subnormal in fp16 yet within 0.1% after the cast: it does not stay normal
    assert nb03.survives(6e-5) and not nb03.stays_normal(6e-5)
    assert [nb03.stays_normal(v) for v in values] == [True, False, False, True, True, True, False]
    nb03.check_survivors(lambda v: v == 0 or 2**-14 <= abs(v) <= 65504, values)  # the limits
    with pytest.raises(AssertionError):
        nb03.check_survivors(lambda v: nb03.survives(v), values)  # within 0.1%: not the same
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


def test_scaler_demo_skips_exactly_the_injected_steps():
    rows = nb03.scaler_demo(steps=6, inject=(2, 3), growth_interval=2)
    assert [r.stepped for r in rows] == [True, False, False, True, True, True]
    assert [r.scale for r in rows] == [2.0**16, 2.0**16, 2.0**15, 2.0**14, 2.0**14, 2.0**15]
    assert "SKIPPED" in nb03.scaler_table(rows)
    with pytest.raises(ValueError, match="within 1..3"):
        nb03.scaler_demo(steps=3, inject=(4,))


# -- runs by precision -----------------------------------------------------------------------


def test_train_run_fp32_learns_and_reports(images):
    x, y = images
    r = nb03.train_run("fp32", tiny_cnn, data.TensorLoader(x, y, 16), steps=20,
                       lr=1e-2, device="cpu")
    assert len(r.history.loss) == 20 and r.step_s > 0 and r.images_per_s > 0
    assert min(r.history.loss[-5:]) < r.history.loss[0]
    assert r.first_nan_step is None and "img/s" in str(r)


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
    assert "within what rounding alone does (2 control runs" in same and "(gap +0.0040)" in same
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


# -- did the format really run? one layer against its fp64 emulation --------------------------

def test_round_to_tf32_keeps_ten_mantissa_bits_rounding_or_truncating():
    step = 2.0**-10  # TF32's gap above 1.0
    x = torch.tensor([1 + step / 2, 1 + 0.75 * step, 1 + 1.5 * step, -(1 + 0.75 * step), 3.0])
    nearest = nb03.round_to(x, "tf32", "nearest")
    zero = nb03.round_to(x, "tf32", "zero")
    assert nearest.dtype == torch.float64
    assert nearest.tolist() == [1.0, 1 + step, 1 + 2 * step, -(1 + step), 3.0]  # ties to even
    assert zero.tolist() == [1.0, 1.0, 1 + step, -1.0, 3.0]  # toward zero
    assert nb03.round_to(torch.tensor([0.1]), "fp16").item() == torch.tensor(0.1).half().item()
    with pytest.raises(ValueError, match="Unknown format"):
        nb03.round_to(x, "fp8")
    with pytest.raises(ValueError):
        nb03.round_to(x, "fp16", "zero")  # a cast rounds to nearest


def _probe(make, x):
    torch.manual_seed(0)
    model = make().train()  # as notebook 03 probes it: training mode (BatchNorm on batch statistics)
    return nb03.classifier_input(model, x)


def _autocast_out(layer, feats, dtype):
    with torch.no_grad(), torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
        return layer(feats)


PROBE_MODELS = {
    "smallcnn": (lambda: models.SmallCNN(num_classes=6, width=8, resolution=16), (16, 3, 16, 16)),
    "resnet50": (lambda: models.resnet("resnet50", num_classes=6), (4, 3, 64, 64)),  # the gpu profile's model
}


@pytest.mark.parametrize("model", PROBE_MODELS)
def test_layer_check_passes_the_format_that_ran_and_fails_the_others(model):
    make, shape = PROBE_MODELS[model]
    fc, feats = _probe(make, torch.rand(*shape, generator=torch.Generator().manual_seed(0)))
    assert isinstance(fc, nn.Linear) and feats.shape == (shape[0], fc.in_features)
    ran = {"fp16+GradScaler": torch.float16, "bf16": torch.bfloat16, "fp32": None}
    for claimed in ("fp16+GradScaler", "bf16"):
        for name, dtype in ran.items():
            c = nb03.layer_check(claimed, fc, feats, _autocast_out(fc, feats, dtype))
            assert c.telling and c.ok is (name == claimed), str(c)
        honest = nb03.layer_check(claimed, fc, feats, _autocast_out(fc, feats, ran[claimed]))
        assert math.isclose(honest.measured, honest.nearest, rel_tol=0.05)  # the same casts as the emulation
        assert "in [" in str(honest)


@pytest.mark.parametrize("model", PROBE_MODELS)
def test_layer_check_of_tf32_accepts_either_rounding_and_nothing_else(model):
    make, shape = PROBE_MODELS[model]
    fc, feats = _probe(make, torch.rand(*shape, generator=torch.Generator().manual_seed(1)))

    def tf32_out(mode):  # what TF32 tensor cores compute: 10-bit operands, fp32 sums, fp32 bias
        w = nb03.round_to(fc.weight, "tf32", mode).float()
        return F.linear(nb03.round_to(feats, "tf32", mode).float(), w, fc.bias)

    for mode in ("nearest", "zero"):
        c = nb03.layer_check("fp32+TF32", fc, feats, tf32_out(mode))
        assert c.ok and c.truncated >= c.nearest, str(c)
    with torch.no_grad():
        assert nb03.layer_check("fp32+TF32", fc, feats, fc(feats)).measured < c.low  # full fp32
    assert not nb03.layer_check("fp32+TF32", fc, feats, _autocast_out(fc, feats, torch.bfloat16)).ok


def test_check_layer_raises_on_a_wrong_format_and_tf32_falls_back_to_a_large_matmul(capsys):
    fc, feats = _probe(PROBE_MODELS["smallcnn"][0], torch.rand(16, 3, 16, 16))
    good = nb03.layer_check("bf16", fc, feats, _autocast_out(fc, feats, torch.bfloat16))
    assert nb03.check_layer(good, "cpu") is good
    with pytest.raises(AssertionError, match="not bf16"):
        nb03.check_layer(nb03.layer_check("bf16", fc, feats, _autocast_out(fc, feats, torch.float16)), "cpu")
    # TF32 below its band: a 1024² matmul under the same switch decides; a CPU has no TF32, so it fails
    with torch.no_grad():
        fp32 = nb03.layer_check("fp32+TF32", fc, feats, fc(feats))
    with pytest.raises(AssertionError, match="not tf32"):
        nb03.check_layer(fp32, "cpu")
    assert "ran in full fp32" in capsys.readouterr().out
    with pytest.raises(ValueError, match="No format to probe"):
        nb03.layer_check("fp32", fc, feats, fc(feats))


def test_emulate_a_convolution_agrees_with_cpu_autocast():
    conv = nn.Conv2d(8, 16, 1)
    x = torch.rand(4, 8, 6, 6, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        for claimed, dtype in (("bf16", torch.bfloat16), ("fp16+GradScaler", torch.float16)):
            with torch.autocast("cpu", dtype=dtype):
                out = conv(x)
            assert nb03.layer_check(claimed, conv, x, out).ok
    assert nb03.emulate(conv, x).shape == (4, 16, 6, 6)


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
