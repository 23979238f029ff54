"""Tests for course_lib.lessons.nb03_formats, notebook 03's formats up close: limits, real casts, rounding
to a format, and the check that a format really ran in a layer (CPU, tiny models)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from course_lib import models
from course_lib.lessons import nb03, nb03_formats as formats

pytestmark = pytest.mark.versioned  # float rounding: make test-oldest runs it


# -- formats and casts ----------------------------------------------------------------

def test_format_facts_match_ieee_half_and_bfloat16():
    fp16, bf16, fp32 = (formats.format_facts(n) for n in ("fp16", "bf16", "fp32"))
    assert (fp16.max, fp16.smallest_normal, fp16.smallest_subnormal, fp16.eps) == (65504.0, 2**-14, 2**-24, 2**-10)
    assert (fp16.mantissa_bits, bf16.mantissa_bits, fp32.mantissa_bits) == (10, 7, 23)
    assert bf16.smallest_normal == fp32.smallest_normal  # same 8-bit exponent
    assert "65504" in formats.format_table().replace(",", "") or "6.55e+04" in formats.format_table()


def test_fate_names_what_a_cast_does():
    assert formats.fate(1e-8, "fp16") == "underflow → 0"
    assert formats.fate(70000.0, "fp16") == "overflow → inf"
    assert formats.fate(1.0, "fp16") == "exact"
    assert formats.fate(1e-6, "fp16").startswith("subnormal")
    assert formats.fate(0.1, "fp16").startswith("rounded")
    assert formats.fate(1e-8, "bf16").startswith("rounded")  # bf16 has fp32's range
    assert formats.cast(65519.0, "fp16") == 65504.0


def test_cast_table_names_what_happened():
    table = formats.cast_table([1e-8, 70000.0])
    assert "underflow → 0" in table and "overflow → inf" in table


def test_unknown_format_is_one_sentence():
    with pytest.raises(ValueError, match="Unknown format 'fp8'"):
        formats.format_facts("fp8")


# -- did the format really run? one layer against its fp64 emulation --------------------------

def test_round_to_tf32_keeps_ten_mantissa_bits_rounding_or_truncating():
    step = 2.0**-10  # TF32's gap above 1.0
    x = torch.tensor([1 + step / 2, 1 + 0.75 * step, 1 + 1.5 * step, -(1 + 0.75 * step), 3.0])
    nearest = formats.round_to(x, "tf32", "nearest")
    zero = formats.round_to(x, "tf32", "zero")
    assert nearest.dtype == torch.float64
    assert nearest.tolist() == [1.0, 1 + step, 1 + 2 * step, -(1 + step), 3.0]  # ties to even
    assert zero.tolist() == [1.0, 1.0, 1 + step, -1.0, 3.0]  # toward zero
    assert formats.round_to(torch.tensor([0.1]), "fp16").item() == torch.tensor(0.1).half().item()
    with pytest.raises(ValueError, match="Unknown format"):
        formats.round_to(x, "fp8")
    with pytest.raises(ValueError):
        formats.round_to(x, "fp16", "zero")  # a cast rounds to nearest


def _probe(make, x):
    torch.manual_seed(0)
    model = make().train()  # as notebook 03 probes it: training mode (BatchNorm on batch statistics)
    return formats.classifier_input(model, x)


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
            c = formats.layer_check(claimed, fc, feats, _autocast_out(fc, feats, dtype))
            assert c.telling and c.ok is (name == claimed), str(c)
        honest = formats.layer_check(claimed, fc, feats, _autocast_out(fc, feats, ran[claimed]))
        assert math.isclose(honest.measured, honest.nearest, rel_tol=0.05)  # the same casts as the emulation
        assert "in [" in str(honest)


@pytest.mark.parametrize("model", PROBE_MODELS)
def test_layer_check_of_tf32_accepts_either_rounding_and_nothing_else(model):
    make, shape = PROBE_MODELS[model]
    fc, feats = _probe(make, torch.rand(*shape, generator=torch.Generator().manual_seed(1)))

    def tf32_out(mode):  # what TF32 tensor cores compute: 10-bit operands, fp32 sums, fp32 bias
        w = formats.round_to(fc.weight, "tf32", mode).float()
        return F.linear(formats.round_to(feats, "tf32", mode).float(), w, fc.bias)

    for mode in ("nearest", "zero"):
        c = formats.layer_check("fp32+TF32", fc, feats, tf32_out(mode))
        assert c.ok and c.truncated >= c.nearest, str(c)
    with torch.no_grad():
        assert formats.layer_check("fp32+TF32", fc, feats, fc(feats)).measured < c.low  # full fp32
    assert not formats.layer_check("fp32+TF32", fc, feats, _autocast_out(fc, feats, torch.bfloat16)).ok


def test_check_layer_raises_on_a_wrong_format_and_tf32_falls_back_to_a_large_matmul(capsys):
    fc, feats = _probe(PROBE_MODELS["smallcnn"][0], torch.rand(16, 3, 16, 16))
    good = formats.layer_check("bf16", fc, feats, _autocast_out(fc, feats, torch.bfloat16))
    assert formats.check_layer(good, "cpu") is good
    with pytest.raises(AssertionError, match="not bf16"):
        formats.check_layer(formats.layer_check("bf16", fc, feats, _autocast_out(fc, feats, torch.float16)), "cpu")
    # TF32 below its band: a 1024² matmul under the same switch decides; a CPU has no TF32, so it fails
    with torch.no_grad():
        fp32 = formats.layer_check("fp32+TF32", fc, feats, fc(feats))
    with pytest.raises(AssertionError, match="not tf32"):
        formats.check_layer(fp32, "cpu")
    assert "ran in full fp32" in capsys.readouterr().out
    with pytest.raises(ValueError, match="No format to probe"):
        formats.layer_check("fp32", fc, feats, fc(feats))


def test_emulate_a_convolution_agrees_with_cpu_autocast():
    conv = nn.Conv2d(8, 16, 1)
    x = torch.rand(4, 8, 6, 6, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        for claimed, dtype in (("bf16", torch.bfloat16), ("fp16+GradScaler", torch.float16)):
            with torch.autocast("cpu", dtype=dtype):
                out = conv(x)
            assert formats.layer_check(claimed, conv, x, out).ok
    assert formats.emulate(conv, x).shape == (4, 16, 6, 6)


def test_nb03_reexports_what_its_notebook_calls():
    assert nb03.format_table is formats.format_table and nb03.cast_table is formats.cast_table
    assert nb03.layer_check is formats.layer_check and nb03.check_layer is formats.check_layer
    assert nb03.classifier_input is formats.classifier_input and nb03.cast is formats.cast
