"""course_lib.data: procedural shapes (determinism, splits, learnability) and real loaders."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from fixtures_data import CIFAR10_CLASSES, cifar_labels, write_cifar10_fixture, write_mnist_fixture
from torch.utils.data import DataLoader
from torchvision import transforms as T

from course_lib import data

pytestmark = pytest.mark.versioned  # torchvision's datasets: make test-oldest runs it

# ---- procedural shapes ----------------------------------------------------------------


def test_same_index_gives_same_image_whatever_the_global_rng():
    ds = data.ShapesDataset(20, resolution=32, seed=3)
    torch.manual_seed(1)
    x1, y1 = ds[7]
    torch.manual_seed(2)
    torch.rand(100)  # move the global generator: must not matter
    x2, y2 = ds[7]
    assert torch.equal(x1, x2) and y1 == y2
    assert not torch.equal(ds[7][0], ds[8][0])


def test_worker_processes_yield_the_same_batches_as_the_main_process():
    ds = data.ShapesDataset(24, resolution=32)
    main = list(DataLoader(ds, batch_size=8, num_workers=0))
    workers = list(DataLoader(ds, batch_size=8, num_workers=2))
    assert len(main) == len(workers) == 3
    for (xa, ya), (xb, yb) in zip(main, workers):
        assert torch.equal(xa, xb) and torch.equal(ya, yb)


@pytest.mark.parametrize("resolution", [32, 224])
def test_item_shape_dtype_and_label(resolution):
    x, y = data.ShapesDataset(6, resolution=resolution)[5]
    assert x.shape == (3, resolution, resolution) and x.dtype == torch.float32
    assert isinstance(y, int) and y == 5
    assert torch.isfinite(x).all()


def test_all_classes_present_and_balanced():
    assert len(data.SHAPE_CLASSES) >= 6
    labels = [data.ShapesDataset(60)[i][1] for i in range(60)]
    assert sorted(set(labels)) == list(range(len(data.SHAPE_CLASSES)))
    assert torch.bincount(torch.tensor(labels)).tolist() == [10] * 6
    _, y = data.make_tensor_dataset(60)
    assert y.tolist() == labels


def test_train_val_and_seeds_give_different_images():
    train, val = data.ShapesDataset(10, split="train"), data.ShapesDataset(10, split="val")
    other_seed = data.ShapesDataset(10, split="train", seed=1)
    for i in range(10):
        assert not torch.allclose(train[i][0], val[i][0])
        assert not torch.allclose(train[i][0], other_seed[i][0])


def test_tensor_variant_matches_the_per_index_dataset():
    ds = data.ShapesDataset(40, resolution=32, split="val", seed=5)
    x, y = data.make_tensor_dataset(40, resolution=32, seed=5, split="val", chunk=16)
    expected = torch.stack([ds[i][0] for i in range(40)])
    assert x.shape == (40, 3, 32, 32) and y.dtype == torch.int64
    torch.testing.assert_close(x, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.gpu
def test_tensor_variant_on_cuda_matches_cpu_and_batches_stay_there():
    x, y = data.make_tensor_dataset(64, device="cuda")
    x_cpu, y_cpu = data.make_tensor_dataset(64)
    assert x.is_cuda and y.is_cuda and torch.equal(y.cpu(), y_cpu)
    torch.testing.assert_close(x.cpu(), x_cpu, atol=1e-4, rtol=1e-4)
    batches = list(data.TensorLoader(x, y, 16))
    assert all(xb.is_cuda for xb, _ in batches) and sum(len(yb) for _, yb in batches) == 64


def test_pixels_are_roughly_normalised():
    x, _ = data.make_tensor_dataset(600)
    assert abs(x.mean().item()) < 0.3
    assert 0.7 < x.std().item() < 1.3


def test_loaders_give_train_and_val_batches():
    train, val = data.loaders(n_train=48, n_val=20, batch_size=16, num_workers=0)
    xb, yb = next(iter(train))
    assert xb.shape == (16, 3, 32, 32) and yb.shape == (16,)
    assert len(train.dataset) == 48 and len(val) == 2 and val.dataset.split == "val"


def test_grid_is_an_image_in_unit_range():
    g = data.grid(data.make_tensor_dataset(8)[0], nrow=4)
    assert g.shape[0] == 3 and g.min() >= 0 and g.max() <= 1


def test_bad_arguments_are_one_clear_error():
    with pytest.raises(ValueError, match="Unknown split 'valid'"):
        data.ShapesDataset(10, split="valid")
    with pytest.raises(ValueError, match="resolution"):
        data.ShapesDataset(10, resolution=4)
    with pytest.raises(IndexError, match="outside"):
        data.ShapesDataset(10)[10]


# ---- batch order: a function of (seed, epoch) ----------------------------------------


def test_sampler_order_is_a_function_of_seed_and_epoch():
    s = data.EpochBatchSampler(10, 3, seed=1)
    s.set_epoch(0)
    epoch0 = list(s)
    assert sorted(i for b in epoch0 for i in b) == list(range(10)) and len(s) == len(epoch0) == 4
    s.set_epoch(0, start_batch=2)
    assert list(s) == epoch0[2:]
    s.set_epoch(1)
    assert list(s) != epoch0
    s.set_epoch(0, seed=2)
    assert list(s) != epoch0


def test_tensor_loader_order_is_a_function_of_seed_and_epoch():
    x, y = torch.arange(10.0)[:, None], torch.arange(10)
    loader = data.TensorLoader(x, y, batch_size=4, seed=1)
    assert len(loader) == 3 and loader.batch_size == 4

    def one_pass(epoch: int, start_batch: int = 0) -> list[int]:
        loader.batch_sampler.set_epoch(epoch, start_batch)
        return torch.cat([yb for _, yb in loader]).tolist()

    first, second = one_pass(0), one_pass(1)
    assert sorted(first) == sorted(second) == list(range(10))  # every item once per pass
    assert first != second and first != list(range(10))  # shuffled, anew each epoch
    assert one_pass(0) == first  # the same epoch gives the same order
    assert one_pass(1, start_batch=2) == second[8:]  # resuming skips finished batches
    again = data.TensorLoader(x, y, batch_size=4, seed=1)
    assert torch.cat([yb for _, yb in again]).tolist() == first  # seeded
    for xb, yb in data.TensorLoader(x, y, 4, shuffle=False):
        assert torch.equal(xb[:, 0].long(), yb)  # pairs stay together


def test_tensor_loader_drop_last_and_bad_input():
    x, y = torch.zeros(10, 2), torch.zeros(10, dtype=torch.long)
    assert len(data.TensorLoader(x, y, 4, drop_last=True)) == 2
    assert [len(b) for b, _ in data.TensorLoader(x, y, 4, drop_last=True)] == [4, 4]
    with pytest.raises(ValueError, match="batch_size"):
        data.TensorLoader(x, y[:5], 4)
    with pytest.raises(ValueError, match="batch_size"):
        data.TensorLoader(x, y, 0)


# ---- learnable, but not by a linear model -------------------------------------------


@pytest.fixture(scope="module")
def small_set():
    xt, yt = data.make_tensor_dataset(4000, 32, split="train")
    xv, yv = data.make_tensor_dataset(600, 32, split="val")
    return xt, yt, xv, yv


def _fit(model: nn.Module, xt, yt, epochs: int, lr: float = 3e-3) -> nn.Module:
    opt = torch.optim.AdamW(model.parameters(), lr)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, lr, total_steps=epochs * math.ceil(len(xt) / 64))
    batches = data.TensorLoader(xt, yt, 64)
    for epoch in range(epochs):
        batches.batch_sampler.set_epoch(epoch)
        for xb, yb in batches:
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
    return model.eval()


def _accuracy(model: nn.Module, x, y) -> float:
    with torch.no_grad():
        return (model(x).argmax(1) == y).float().mean().item()


def tiny_cnn(width: int = 8) -> nn.Module:
    """3 x (conv3x3 -> BN -> ReLU -> maxpool 2), global average pool, linear: 6.3k parameters."""
    def block(c_in: int, c_out: int) -> nn.Sequential:
        return nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out),
                             nn.ReLU(), nn.MaxPool2d(2))
    return nn.Sequential(block(3, width), block(width, 2 * width), block(2 * width, 4 * width),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4 * width, 6))


def test_linear_classifier_stays_low(small_set):
    xt, yt, xv, yv = small_set
    linear = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 6))
    acc = _accuracy(_fit(linear, xt, yt, epochs=5, lr=1e-3), xv, yv)
    assert acc < 0.6, f"a linear model reached {acc:.1%}: the shapes are too easy"


def test_small_cnn_clearly_beats_linear(small_set):
    xt, yt, xv, yv = small_set
    linear = _fit(nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 6)), xt, yt, epochs=5, lr=1e-3)
    cnn_acc = _accuracy(_fit(tiny_cnn(), xt, yt, epochs=8), xv, yv)
    assert cnn_acc > 0.7 and cnn_acc > _accuracy(linear, xv, yv) + 0.3, f"tiny CNN: {cnn_acc:.1%}"


# ---- real datasets on fixtures in torchvision's formats -----------------------------


def test_cifar10_fixture_loads_through_torchvision(tmp_path):
    write_cifar10_fixture(tmp_path, n_per_batch=4)
    assert data.available("cifar10", tmp_path)
    train = data.cifar10(tmp_path, train=True, verify=False, transform=T.ToTensor())
    test = data.cifar10(tmp_path, train=False, verify=False, transform=T.ToTensor())
    assert len(train) == 20 and len(test) == 4 and train.classes == CIFAR10_CLASSES
    assert train.targets == cifar_labels(4) * 5
    x, y = train[3]
    assert x.shape == (3, 32, 32) and y == 3
    channel_means = [round(v) for v in (x.mean((1, 2)) * 255).tolist()]
    assert channel_means == [20 * y, 100, 200]  # R, G, B planes kept apart, label paired


def test_cifar10_default_transform_normalises(tmp_path):
    write_cifar10_fixture(tmp_path, n_per_batch=2)
    x, _ = data.cifar10(tmp_path, verify=False)[0]  # label 0: red 0, green 100, blue 200
    mean, std = data.CIFAR10_STATS
    assert torch.allclose(x[1, 0, 0], torch.tensor((100 / 255 - mean[1]) / std[1]))


def test_cifar10_fixture_fails_the_official_checksum(tmp_path):
    folder = write_cifar10_fixture(tmp_path, n_per_batch=2)
    with pytest.raises(data.DatasetMissing, match="verify=False") as err:
        data.cifar10(tmp_path)
    assert str(folder) in str(err.value)


def test_mnist_fixture_loads_through_torchvision(tmp_path):
    write_mnist_fixture(tmp_path, n=12)
    assert data.available("mnist", tmp_path)
    train = data.mnist(tmp_path, train=True, transform=T.ToTensor())
    test = data.mnist(tmp_path, train=False)
    assert len(train) == 12 and len(test) == 12
    x, y = train[7]
    assert x.shape == (1, 28, 28) and y == 7 and round(x.max().item() * 255) == 140
    assert test[0][0].shape == (1, 28, 28)


@pytest.mark.parametrize("name, folder", [("cifar10", "cifar-10-batches-py"), ("mnist", "MNIST/raw")])
def test_missing_dataset_names_the_folder(tmp_path, name, folder):
    loader = getattr(data, name)
    assert not data.available(name, tmp_path)
    with pytest.raises(data.DatasetMissing) as err:
        loader(tmp_path)
    message = str(err.value)
    assert isinstance(err.value, FileNotFoundError)
    assert str(tmp_path / folder) in message and "download=True" in message
    assert message.count(". ") == 0 and "\n" not in message  # one sentence


def test_data_root_defaults_to_repo_data_and_obeys_env(monkeypatch, tmp_path):
    monkeypatch.delenv("COURSE_DATA_DIR", raising=False)
    root = data.data_root()
    assert root.name == "data" and (root.parent / "course_lib" / "data.py").is_file()
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path))
    assert data.data_root() == tmp_path
    write_mnist_fixture(tmp_path, n=2)
    assert data.available("mnist") and len(data.mnist()) == 2


def test_unknown_dataset_name_is_one_clear_error():
    with pytest.raises(ValueError, match="Unknown dataset 'imagenet'"):
        data.available("imagenet")
