"""Tests for course_lib.models (CPU, tiny inputs)."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from course_lib import models


@pytest.mark.parametrize("resolution", [8, 32, 45])
def test_small_cnn_gives_logits_at_any_resolution(resolution):
    torch.manual_seed(0)
    model = models.SmallCNN(num_classes=6, width=8)
    assert model(torch.randn(3, 3, resolution, resolution)).shape == (3, 6)


def test_small_cnn_grayscale_and_too_small_inputs():
    gray = models.SmallCNN(num_classes=10, in_channels=1, width=4, resolution=28)
    assert gray(torch.randn(2, 1, 28, 28)).shape == (2, 10)
    with pytest.raises(ValueError, match="at least 8x8"):
        gray(torch.randn(2, 1, 7, 7))
    with pytest.raises(ValueError, match="at least 8x8"):
        models.SmallCNN(resolution=4)


def test_small_cnn_parameter_count_matches_hand_count():
    w, c = 32, 6
    convs = 3 * w * 9 + w * 2 * w * 9 + 2 * w * 4 * w * 9  # 3x3 kernels, no bias
    norms = 2 * (w + 2 * w + 4 * w)  # BN weight + bias
    head = 4 * w * c + c
    assert models.count_params(models.SmallCNN(num_classes=c, width=w)) == convs + norms + head == 94_246


def test_small_cnn_channels_last_matches_contiguous():
    torch.manual_seed(0)
    model = models.SmallCNN(width=8).eval()
    x = torch.randn(2, 3, 32, 32)
    expected = model(x)
    model.to(memory_format=torch.channels_last)
    assert torch.allclose(model(x.to(memory_format=torch.channels_last)), expected, atol=1e-5)


def test_small_cnn_dropout_only_in_training():
    torch.manual_seed(0)
    model = models.SmallCNN(width=4, dropout=0.5)
    x = torch.randn(4, 3, 16, 16)
    model.eval()
    assert torch.equal(model(x), model(x))
    model.train()
    assert not torch.equal(model(x), model(x))


def test_count_params_trainable_only():
    model = nn.Sequential(nn.Linear(4, 3), nn.Linear(3, 2))
    model[0].requires_grad_(False)
    assert models.count_params(model) == 15 + 8
    assert models.count_params(model, trainable_only=True) == 8


def test_resnet18_has_the_torchvision_parameter_count():
    assert models.count_params(models.resnet("resnet18", num_classes=1000)) == 11_689_512


@pytest.mark.parametrize("name", ["resnet18", "resnet50"])
def test_resnet_small_input_stem_keeps_resolution(name):
    model = models.resnet(name, num_classes=10, small_input=True).eval()
    assert model.conv1.kernel_size == (3, 3) and model.conv1.stride == (1, 1)
    assert isinstance(model.maxpool, nn.Identity)
    with torch.no_grad():
        assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)
        stem = model.relu(model.bn1(model.conv1(torch.randn(1, 3, 32, 32))))
    assert stem.shape[-2:] == (32, 32)  # the ImageNet stem would give 16x16 (then 8x8)


def test_resnet_other_channels_and_unknown_name():
    model = models.resnet("resnet18", num_classes=10, in_channels=1).eval()
    with torch.no_grad():
        assert model(torch.randn(1, 1, 64, 64)).shape == (1, 10)
    with pytest.raises(ValueError, match="resnet18"):
        models.resnet("resnet7")


def test_show_tutorial_bugs_runs_the_buggy_code():
    """Exception types, the snippet lines that raise and the shapes; never PyTorch's wording."""
    missing_f, flatten, loss_on_map = models.show_tutorial_bugs(batch=2, resolution=32)
    lines = models.TUTORIAL_CNN_SOURCE.splitlines()
    assert isinstance(missing_f.error, NameError) and missing_f.error.name == "F"
    assert "F.max_pool2d" in lines[missing_f.line - 1]  # the first use of F, in features()
    assert isinstance(flatten.error, RuntimeError) and "self.fc(" in lines[flatten.line - 1]
    # 32 px -> three 2x2 pools -> (2, 64, 4, 4) flattened to 2x1024; nn.Linear(4096, 6) needs 4096
    assert "2x1024" in str(flatten.error) and "4096x6" in str(flatten.error)
    assert isinstance(loss_on_map.error, RuntimeError)
    assert "cross_entropy(features" in lines[loss_on_map.line - 1]  # inside the printed train_step
    for row in (missing_f, flatten, loss_on_map):
        text = str(row)
        assert text.count("\n") == 4 and type(row.error).__name__ in text
        assert f"line {row.line}" in text


def test_tutorial_snippet_is_printed_whole_with_line_numbers():
    numbered = models.numbered().splitlines()
    source = models.TUTORIAL_CNN_SOURCE.splitlines()
    assert len(numbered) == len(source)
    assert all(n.endswith(s) and n.lstrip().startswith(str(i)) for i, (n, s) in
               enumerate(zip(numbered, source), start=1))
    assert any("def train_step" in line for line in source)  # the third bug's code is shown too


def test_show_tutorial_bugs_refuses_to_show_a_bug_that_did_not_fire():
    # At 64 px the three pools leave 8x8 maps: 64*8*8 = 4096 fits the snippet's Linear by luck.
    with pytest.raises(AssertionError, match="hard-coded flatten"):
        models.show_tutorial_bugs(batch=2, resolution=64)
