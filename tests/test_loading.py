"""Tests for course_lib.loading (CPU, tiny models; GPU-only cases skipped without CUDA)."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from fixtures_data import write_mnist_fixture

from course_lib import data, loading, train
from course_lib.loading import Throughput

TINY = dict(steps=2, batch_size=8, resolution=16, width=4, warmup_steps=1, device="cpu")


def tiny_net(classes: int = 10) -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(4, classes))


def assert_sane(r: Throughput, steps: int) -> None:
    assert r.images_per_s > 0 and r.step_s > 0
    assert 0.0 <= r.data_wait_share <= 1.0
    assert r.steps == steps
    assert "img/s" in str(r) and r.name in str(r)


# -- loaders ------------------------------------------------------------------------------

def test_synthetic_batches_repeat_one_batch():
    b = loading.SyntheticBatches(4, 16, steps=3, num_classes=5)
    items = list(b)
    assert len(b) == 3 and len(items) == 3
    assert items[0][0].shape == (4, 3, 16, 16) and int(items[0][1].max()) < 5
    assert all(x is items[0][0] for x, _ in items)


def test_shapes_loader_draws_the_dataset_images():
    loader = loading.shapes_loader(12, resolution=16, batch_size=4, seed=3)
    xb, yb = next(iter(loader))
    ds = data.ShapesDataset(12, 16, "train", 3)
    i = next(k for k in range(12) if torch.equal(ds[k][0], xb[0]))
    assert yb[0].item() == ds[i][1]
    assert len(loader) == 3


def test_loader_name():
    assert loading.loader_name(0) == "workers=0"
    assert loading.loader_name(2, True, True) == "workers=2 +pin +non_blocking"


# -- measurements -------------------------------------------------------------------------

@pytest.mark.parametrize("workers", [0, 1])
def test_measure_loader_reports_images_per_s_and_data_wait(workers):
    r = loading.measure_loader(workers, **TINY)
    assert_sane(r, steps=2)
    assert r.name == f"workers={workers}" and r.device.startswith("cpu")


def test_measure_loader_rejects_bad_settings():
    with pytest.raises(ValueError, match="num_workers"):
        loading.measure_loader(-1, **TINY)
    with pytest.raises(ValueError, match="steps"):
        loading.measure_loader(0, **{**TINY, "steps": 0})


def test_measure_needs_max_steps_and_trains_the_model():
    model = tiny_net()
    batches = loading.SyntheticBatches(8, 16, steps=4)
    with pytest.raises(ValueError, match="max_steps"):
        loading.measure(model, batches, train.TrainConfig(device="cpu"), "x")
    before = [p.detach().clone() for p in model.parameters()]
    r = loading.measure(model, batches, train.TrainConfig(max_steps=3, device="cpu"), "tiny", 1)
    assert_sane(r, steps=3)
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


@pytest.mark.parametrize("amp,channels_last", [("off", False), ("off", True), ("bf16", True)])
def test_measure_model_layouts_and_precisions(amp, channels_last):
    r = loading.measure_model(tiny_net(), batch_size=4, resolution=16, steps=2, amp=amp,
                              channels_last=channels_last, device="cpu", warmup_steps=1)
    assert_sane(r, steps=2)
    assert ("channels_last" in r.name) == channels_last
    assert ("bf16" in r.name) == (amp == "bf16")


def test_table_shows_speedups_against_the_first_row():
    rows = [Throughput("a", 100.0, 0.5, 0.1, 5, "cpu"), Throughput("b", 250.0, 0.1, 0.04, 5, "cpu")]
    text = loading.table(rows)
    assert "1.00×" in text and "2.50×" in text and "50%" in text and "10%" in text
    with pytest.raises(ValueError, match="at least one"):
        loading.table([])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_measure_loader_pinned_non_blocking_on_gpu():
    r = loading.measure_loader(1, True, True, **{**TINY, "device": "cuda"})
    assert_sane(r, steps=2)
    assert "+pin +non_blocking" in r.name and not r.device.startswith("cpu")


# -- real datasets ------------------------------------------------------------------------

def test_real_data_run_trains_on_files_that_exist(tmp_path):
    write_mnist_fixture(tmp_path, n=48)
    assert data.available("mnist", tmp_path)
    h = loading.real_data_run("mnist", steps=3, batch_size=8, n_val=16, device="cpu", root=tmp_path)
    assert h.step[-1] == 3 and h.samples == 24
    assert 0.0 <= h.val_accuracy[-1] <= 1.0
    small = loading.real_data_run("mnist", steps=10, batch_size=8, n_val=16, device="cpu",
                                  root=tmp_path)  # 48 images: 6 batches, so two passes
    assert small.step[-1] == 10 and small.samples == 80


def test_real_data_run_missing_files_is_one_sentence(tmp_path):
    with pytest.raises(data.DatasetMissing, match="not found: put") as info:
        loading.real_data_run("cifar10", steps=1, root=tmp_path)
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="Unknown dataset"):
        loading.real_data_run("imagenet", root=tmp_path)
