"""Tests for course_lib.models (CPU, tiny inputs)."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from course_lib import models

pytestmark = pytest.mark.versioned  # torchvision's models: make test-oldest runs it


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


# ---- GPT ------------------------------------------------------------------------------

from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

from course_lib import roofline  # noqa: E402

TINY = models.GPTConfig(vocab_size=61, block_size=16, n_layer=2, n_head=4, n_embd=32)


def tiny_gpt(**changes) -> models.GPT:
    torch.manual_seed(0)
    return models.GPT(models.GPTConfig(**{**TINY.__dict__, **changes}))


def test_gpt_maps_ids_to_logits_and_every_parameter_gets_a_gradient():
    model = tiny_gpt()
    idx = torch.randint(0, TINY.vocab_size, (3, 11))
    logits = model(idx)
    assert logits.shape == (3, 11, TINY.vocab_size) and logits.dtype == torch.float32
    torch.nn.functional.cross_entropy(logits.flatten(0, 1), idx.flatten()).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, name


def test_gpt2_small_has_gpt2s_parameter_count():
    with torch.device("meta"):  # shapes only: no 0.5 GB of weights
        model = models.GPT(models.GPT2_SMALL)
    assert model.num_params(non_embedding=False) == 124_439_808  # GPT-2 small, tied embeddings
    assert model.num_params() == 124_439_808 - 1024 * 768  # less the position embedding


def test_gpt_ties_the_output_layer_to_the_token_embedding():
    model = tiny_gpt()
    assert model.lm_head.weight is model.wte.weight
    c = TINY
    per_block = 12 * c.n_embd**2 + 13 * c.n_embd  # qkv, proj, fc, fc proj (+ biases), 2 LayerNorms
    expected = c.n_layer * per_block + c.vocab_size * c.n_embd + 2 * c.n_embd + c.block_size * c.n_embd
    assert models.count_params(model) == model.num_params(non_embedding=False) == expected


def test_gpt_is_causal_a_token_changes_no_earlier_logit():
    model = tiny_gpt().eval()
    idx = torch.randint(0, TINY.vocab_size, (2, 12))
    changed = idx.clone()
    changed[:, 7] = (changed[:, 7] + 1) % TINY.vocab_size
    a, b = model(idx), model(changed)
    torch.testing.assert_close(a[:, :7], b[:, :7], rtol=0, atol=0)
    assert not torch.allclose(a[:, 7:], b[:, 7:])


def test_gpt_with_written_out_attention_equals_sdpa():
    fused, written = tiny_gpt(), tiny_gpt(sdpa=False)
    written.load_state_dict(fused.state_dict())
    idx = torch.randint(0, TINY.vocab_size, (2, 16))
    torch.testing.assert_close(written(idx), fused(idx), atol=1e-5, rtol=1e-4)


def test_gpt_dropout_acts_only_in_training():
    model = tiny_gpt(dropout=0.2)
    idx = torch.randint(0, TINY.vocab_size, (2, 10))
    assert not torch.equal(model(idx), model(idx))  # training: a new mask each call
    model.eval()
    torch.testing.assert_close(model(idx), model(idx), rtol=0, atol=0)
    plain = tiny_gpt()  # dropout 0: training and evaluation compute the same
    torch.testing.assert_close(plain(idx), plain.eval()(idx), rtol=0, atol=0)


def test_gpt_refuses_too_long_inputs_and_bad_shapes():
    with pytest.raises(ValueError):
        tiny_gpt()(torch.zeros(1, TINY.block_size + 1, dtype=torch.long))
    with pytest.raises(ValueError):
        models.GPTConfig(n_embd=30, n_head=4)
    with pytest.raises(ValueError):
        models.GPTConfig(n_layer=0)
    with pytest.raises(ValueError):
        models.GPTConfig(dropout=1.0)


@pytest.mark.parametrize("bias", [True, False])
def test_flops_per_token_against_flop_counter(bias):
    """FlopCounterMode counts every matmul of forward + backward: 6 FLOPs per matrix weight and
    token plus attention's 12·L·T·C. 6N counts biases and LayerNorms too: within 2 %."""
    model = tiny_gpt(bias=bias, n_embd=64)  # wide enough that biases and LayerNorms are < 2 %
    B, c = 3, model.cfg
    idx = torch.randint(0, c.vocab_size, (B, c.block_size))

    def step():
        model(idx).sum().backward()

    with sdpa_kernel(SDPBackend.MATH):  # torch 2.6 does not count the CPU flash kernel
        counted = roofline.counted_flops(step)
    matrices = sum(p.numel() for n, p in model.named_parameters() if p.dim() == 2 and n != "wpe.weight")
    tokens = B * c.block_size
    assert counted == (6 * matrices + 12 * c.n_layer * c.block_size * c.n_embd) * tokens
    assert counted / tokens == pytest.approx(model.flops_per_token(), rel=0.02)
    assert model.flops_per_token() == 6 * model.num_params() + 12 * c.n_layer * c.block_size * c.n_embd


def test_generate_greedy_top_k_and_reproducible_sampling():
    model = tiny_gpt()
    prompt = torch.randint(0, TINY.vocab_size, (2, 5))
    greedy = model.generate(prompt, 6, temperature=0)
    assert greedy.shape == (2, 11) and torch.equal(greedy[:, :5], prompt)
    g = torch.Generator().manual_seed(1)
    torch.testing.assert_close(model.generate(prompt, 6, top_k=1, generator=g), greedy, rtol=0, atol=0)
    a = model.generate(prompt, 8, temperature=0.8, generator=torch.Generator().manual_seed(3))
    b = model.generate(prompt, 8, temperature=0.8, generator=torch.Generator().manual_seed(3))
    assert torch.equal(a, b)
    assert model.training  # generate restores the mode it found
    grad_modes = []
    model.register_forward_hook(lambda *_: grad_modes.append(torch.is_grad_enabled()))
    model.generate(prompt, 3)
    assert grad_modes == [False] * 3  # sampling records no autograd graph


def test_generate_samples_only_from_the_top_k_and_crops_long_contexts():
    model = tiny_gpt()
    long_prompt = torch.randint(0, TINY.vocab_size, (1, TINY.block_size + 5))  # longer than the context
    with torch.no_grad():
        top3 = set(model.eval()(long_prompt[:, -TINY.block_size:])[0, -1].topk(3).indices.tolist())
    g = torch.Generator().manual_seed(0)
    drawn = {model.generate(long_prompt, 1, top_k=3, generator=g)[0, -1].item() for _ in range(60)}
    assert drawn <= top3 and len(drawn) > 1
    with pytest.raises(ValueError):
        model.generate(long_prompt, 1, top_k=0)


def test_a_tiny_gpt_learns_a_repeating_text():
    model = tiny_gpt()
    text = torch.tensor(list(b"def add(a, b):\n    return a + b\n" * 8))[:-1] % TINY.vocab_size
    x = text[:-1].unfold(0, 16, 8)  # (N, 16) overlapping windows
    y = text[1:].unfold(0, 16, 8)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(60):
        loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[0] > 3.5  # about log(61) = 4.1 at initialisation
    assert losses[-1] < 0.5 * losses[0]


@pytest.mark.gpu
def test_gpt_bf16_autocast_on_cuda_agrees_with_float32():
    model = tiny_gpt().cuda()
    idx = torch.randint(0, TINY.vocab_size, (4, 16), device="cuda")
    ref = model(idx)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        low = model(idx)
    assert low.dtype == torch.bfloat16
    torch.testing.assert_close(low.float(), ref, atol=5e-2, rtol=5e-2)
