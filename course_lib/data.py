"""Datasets: procedural shapes drawn with torch ops, and the real CIFAR-10 / MNIST.

Shapes: every image is a function of (seed, split, index) alone, so DataLoader workers
draw it on the fly (real CPU work, like JPEG decoding) and always draw the same pixels.
`make_tensor_dataset` renders the same images in batches once and keeps them on the
device (`TensorLoader` serves them without Python-side per-item work).

Batch order: `EpochBatchSampler` makes it a pure function of (seed, epoch), so
`train.fit` resumes with exactly the next batch; `make_loader` (a DataLoader) and
`TensorLoader` (tensors already on the device) both use it.

Real data never downloads unless asked (`download=True`); missing files raise
`DatasetMissing` naming the folder to fill. Default root: `<repo>/data`, or `$COURSE_DATA_DIR`.

Text for language models: :mod:`course_lib.textdata`.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
from pathlib import Path

from typing import Any, Iterable, Iterator

import torch
from torch.utils.data import DataLoader, Dataset, Sampler

# torchvision (about 1.5 s to import) loads only when images are tiled or a real dataset
# is read, so `train`, which imports this module for the batch order, starts fast.

SHAPE_CLASSES = ("circle", "square", "triangle", "cross", "ring", "star")
SPLITS = ("train", "val", "test")  # hashed by name into every image's seed
NOISE = 0.03  # std of per-pixel Gaussian noise on the 0..1 colour scale
SIZE = (0.4, 0.65)  # shape radius as a fraction of half the image side
CONTRAST = (0.2, 0.5)  # per-channel colour offset of the shape from the background
GRADIENT = 0.15  # largest brightness slope of the background across half the image
MEAN, STD = 0.5, 0.30  # maps the 0..1 pixels to roughly mean 0, std 1
N_PARAMS = 12  # cx, cy, radius, angle, background rgb, colour offset rgb, slope x, slope y


def _generator(seed: int, split: str, index: int) -> torch.Generator:
    """A CPU generator seeded by (seed, split, index) only: no global or worker state."""
    key = hashlib.blake2b(f"shapes/{seed}/{split}/{index}".encode(), digest_size=8).digest()
    return torch.Generator().manual_seed(int.from_bytes(key, "little") >> 1)


def _sample(seed: int, split: str, index: int, res: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Uniform parameters (N_PARAMS,) and unit noise (3, res, res) of one image."""
    g = _generator(seed, split, index)
    return torch.rand(N_PARAMS, generator=g), torch.randn(3, res, res, generator=g)


def _sd_box(x: torch.Tensor, y: torch.Tensor, bx: float, by: float) -> torch.Tensor:
    qx, qy = x.abs() - bx, y.abs() - by
    return torch.hypot(qx.clamp(min=0), qy.clamp(min=0)) + torch.maximum(qx, qy).clamp(max=0)


def _sd_triangle(x: torch.Tensor, y: torch.Tensor, r: float = 0.95) -> torch.Tensor:
    """Equilateral triangle, half side r (Inigo Quilez's exact SDF, vectorised)."""
    k = math.sqrt(3.0)
    px, py = x.abs() - r, y + r / k
    fold = px + k * py > 0
    px, py = torch.where(fold, (px - k * py) / 2, px), torch.where(fold, (-k * px - py) / 2, py)
    px = px - px.clamp(-2 * r, 0)
    return -torch.hypot(px, py) * torch.sign(py)


def _sd_star(x: torch.Tensor, y: torch.Tensor, r: float = 1.1, rf: float = 0.5) -> torch.Tensor:
    """Five-pointed star, outer radius r, inner radius rf * r (Quilez's sdStar5)."""
    k1x, k1y = 0.809016994375, -0.587785252292
    px, py = x.abs(), y
    for kx in (k1x, -k1x):  # reflect into one sector of the star
        d = (kx * px + k1y * py).clamp(min=0)
        px, py = px - 2 * d * kx, py - 2 * d * k1y
    px, py = px.abs(), py - r
    bax, bay = -rf * k1y, rf * k1x - 1
    h = ((px * bax + py * bay) / (bax * bax + bay * bay)).clamp(0, r)
    return torch.hypot(px - bax * h, py - bay * h) * torch.sign(py * bax - px * bay)


SDFS = {  # signed distance in shape units (negative inside); the radius is 1
    "circle": lambda x, y: torch.hypot(x, y) - 1.0,
    "square": lambda x, y: _sd_box(x, y, 0.85, 0.85),
    "triangle": _sd_triangle,
    "cross": lambda x, y: torch.minimum(_sd_box(x, y, 1.0, 0.33), _sd_box(x, y, 0.33, 1.0)),
    "ring": lambda x, y: (torch.hypot(x, y) - 0.72).abs() - 0.28,
    "star": _sd_star,
}


def render(labels: torch.Tensor, params: torch.Tensor, noise_unit: torch.Tensor,
           noise: float = NOISE) -> torch.Tensor:
    """Draw a batch: labels (B,), uniform params (B, N_PARAMS), unit noise (B, 3, H, W).

    Returns normalised images (B, 3, H, W) on the device of `params`.
    """
    H, W = noise_unit.shape[-2:]
    p = params  # (B, N_PARAMS) uniform in [0, 1): see N_PARAMS for the layout
    r = SIZE[0] + (SIZE[1] - SIZE[0]) * p[:, 2]  # (B,) radius, half-side units
    cx, cy = [(2 * p[:, i] - 1) * (1 - 1.1 * r) for i in (0, 1)]  # shapes reach 1.1 r: stay inside
    cos, sin = torch.cos(2 * math.pi * p[:, 3]), torch.sin(2 * math.pi * p[:, 3])
    gy, gx = torch.meshgrid(*[(torch.arange(n, device=p.device) + 0.5) / n * 2 - 1 for n in (H, W)],
                            indexing="ij")  # (H, W) pixel centres in [-1, 1]
    dx, dy = gx - cx[:, None, None], gy - cy[:, None, None]  # (B, H, W)
    c, s, rr = cos[:, None, None], sin[:, None, None], r[:, None, None]
    u, v = (c * dx + s * dy) / rr, (c * dy - s * dx) / rr  # shape-local, radius 1
    sd = torch.empty_like(u)
    for k, name in enumerate(SHAPE_CLASSES):  # each image evaluates only its own shape
        m = labels == k
        if m.any():
            sd[m] = SDFS[name](u[m], v[m])
    alpha = (0.5 - sd * rr * min(H, W) / 2).clamp(0, 1)[:, None]  # (B, 1, H, W) anti-aliased
    slope = GRADIENT * (2 * p[:, 10:12] - 1)  # (B, 2)
    bg = p[:, 4:7, None, None] + (slope[:, 0, None, None] * gx + slope[:, 1, None, None] * gy)[:, None]
    offset = CONTRAST[0] + (CONTRAST[1] - CONTRAST[0]) * p[:, 7:10]  # (B, 3)
    lighter = torch.where(p[:, 4:7].mean(1, keepdim=True) < 0.5, 1.0, -1.0)  # (B, 1)
    fg = (p[:, 4:7] + lighter * offset).clamp(0, 1)[:, :, None, None]  # lighter on dark, darker on light
    img = (bg * (1 - alpha) + fg * alpha + noise * noise_unit).clamp(0, 1)
    return (img - MEAN) / STD


class ShapesDataset(Dataset):
    """`n` procedural shape images of SHAPE_CLASSES, drawn on the fly in `__getitem__`.

    Item i is a function of (seed, split, i) only; labels cycle through the classes
    (i % 6), so every class is present and balanced. Returns (float (3, R, R), int).
    """

    def __init__(self, n: int, resolution: int = 32, split: str = "train", seed: int = 0,
                 noise: float = NOISE) -> None:
        _check_args(n, resolution, split)
        self.n, self.resolution, self.split, self.seed, self.noise = n, resolution, split, seed, noise
        self.classes = SHAPE_CLASSES

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        if not 0 <= index < self.n:
            raise IndexError(f"Index {index} is outside this dataset of {self.n} images.")
        params, unit = _sample(self.seed, self.split, index, self.resolution)
        label = index % len(SHAPE_CLASSES)
        return render(torch.tensor([label]), params[None], unit[None], self.noise)[0], label


def _check_args(n: int, resolution: int, split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"Unknown split {split!r}: choose one of {', '.join(SPLITS)}.")
    if n < 1 or not 8 <= resolution <= 1024:
        raise ValueError(f"Need n >= 1 and 8 <= resolution <= 1024, got n={n}, resolution={resolution}.")


def make_tensor_dataset(n: int, resolution: int = 32, seed: int = 0, split: str = "train",
                        device: str | torch.device = "cpu", noise: float = NOISE,
                        chunk: int = 2048) -> tuple[torch.Tensor, torch.Tensor]:
    """The same images as ShapesDataset(n, resolution, split, seed, noise), rendered in
    batches of `chunk` on `device`: returns x (n, 3, R, R) float32 and y (n,) int64 there.

    Memory: n * 3 * R * R * 4 bytes (12,000 images at 32x32: 141 MiB; at 224x224: 6.7 GiB).
    """
    _check_args(n, resolution, split)
    y = torch.arange(n) % len(SHAPE_CLASSES)
    x = torch.empty(n, 3, resolution, resolution, device=device)
    for lo in range(0, n, chunk):
        idx = range(lo, min(n, lo + chunk))
        params, units = zip(*(_sample(seed, split, i, resolution) for i in idx))
        x[lo:lo + len(idx)] = render(y[lo:lo + len(idx)].to(device), torch.stack(params).to(device),
                                     torch.stack(units).to(device), noise)
    return x, y.to(device)


def loaders(n_train: int = 12_000, n_val: int = 2_000, resolution: int = 32, batch_size: int = 128,
            num_workers: int = 0, pin_memory: bool = False, seed: int = 0, noise: float = NOISE,
            **loader_kwargs) -> tuple[DataLoader, DataLoader]:
    """Train (shuffled with a seeded generator) and val DataLoaders over ShapesDataset.

    Extra keyword arguments (persistent_workers, prefetch_factor, ...) go to both loaders.
    """
    train = ShapesDataset(n_train, resolution, "train", seed, noise)
    val = ShapesDataset(n_val, resolution, "val", seed, noise)
    common = dict(batch_size=batch_size, num_workers=num_workers, pin_memory=pin_memory, **loader_kwargs)
    return (DataLoader(train, shuffle=True, generator=torch.Generator().manual_seed(seed), **common),
            DataLoader(val, shuffle=False, **common))


def grid(images: torch.Tensor, nrow: int = 8, mean: float = MEAN, std: float = STD) -> torch.Tensor:
    """Un-normalise (B, C, H, W) images and tile them: a (3, H', W') tensor in [0, 1] for imshow."""
    import torchvision

    images = (images.detach().cpu() * std + mean).clamp(0, 1)
    return torchvision.utils.make_grid(images, nrow=nrow, padding=1)


# ---- batch order: a function of (seed, epoch), so a resumed run continues exactly ------

def epoch_seed(seed: int, epoch: int) -> int:
    """The seed of one epoch's shuffle (and of its DataLoader worker seeds)."""
    return seed * 1_000_003 + epoch


class EpochBatchSampler(Sampler[list[int]]):
    """Batches of indices whose order is a pure function of (seed, epoch).

    ``set_epoch(epoch, start_batch)`` picks the permutation and where to begin, so a
    resumed run skips finished batches without loading them.
    """

    def __init__(self, n: int, batch_size: int, shuffle: bool = True, drop_last: bool = False,
                 seed: int = 0) -> None:
        if batch_size < 1 or n < 1:
            raise ValueError(f"Need n >= 1 samples and batch_size >= 1, got {n} and {batch_size}.")
        self.n, self.batch_size, self.shuffle, self.drop_last = n, batch_size, shuffle, drop_last
        self.seed, self.epoch, self.start_batch = seed, 0, 0

    def set_epoch(self, epoch: int, start_batch: int = 0, seed: int | None = None) -> None:
        """Serve `epoch`'s order from batch `start_batch` on (and switch to `seed` if given)."""
        self.epoch, self.start_batch = epoch, start_batch
        self.seed = self.seed if seed is None else seed

    def __len__(self) -> int:
        return self.n // self.batch_size if self.drop_last else -(-self.n // self.batch_size)

    def order(self) -> torch.Tensor:
        """This epoch's permutation of range(n) (the identity without shuffle)."""
        if not self.shuffle:
            return torch.arange(self.n)
        return torch.randperm(self.n, generator=torch.Generator().manual_seed(
            epoch_seed(self.seed, self.epoch)))

    def __iter__(self) -> Iterator[list[int]]:
        order = self.order()
        for b in range(self.start_batch, len(self)):
            yield order[b * self.batch_size:(b + 1) * self.batch_size].tolist()


def make_loader(dataset: Dataset, batch_size: int, *, shuffle: bool = True,
                drop_last: bool = False, seed: int = 0, **loader_kwargs: Any) -> DataLoader:
    """A DataLoader whose batch order `train.fit` can replay exactly when it resumes.

    Other kwargs (num_workers, pin_memory, ...) go to DataLoader. Inside `fit` the
    shuffle follows ``TrainConfig.seed``; `seed` here only matters outside `fit`.
    """
    sampler = EpochBatchSampler(len(dataset), batch_size, shuffle, drop_last, seed)
    generator = torch.Generator().manual_seed(seed)  # worker seeds, not the global RNG
    return DataLoader(dataset, batch_sampler=sampler, generator=generator, **loader_kwargs)


def dataset_size(loader: Iterable) -> int | None:
    """How many samples one epoch of `loader` draws from (None when the loader does not say)."""
    sampler = getattr(loader, "batch_sampler", None)
    if isinstance(sampler, EpochBatchSampler):
        return sampler.n
    try:
        return len(loader.dataset)
    except (AttributeError, TypeError):
        return None


class TensorLoader:
    """Batches of tensors that already live on the device, re-iterable with a length.

    The order is a pure function of (seed, epoch), as with `make_loader`: `train.fit`
    sets both through ``batch_sampler.set_epoch``, so a resumed run continues with exactly
    the next batch. Each pass copies one permutation to the device; a batch is a gather there.
    """

    def __init__(self, x: torch.Tensor, y: torch.Tensor, batch_size: int, shuffle: bool = True,
                 seed: int = 0, drop_last: bool = False) -> None:
        if batch_size < 1 or len(x) != len(y) or len(x) == 0:
            raise ValueError(f"Need matching non-empty x and y and batch_size >= 1, got "
                             f"{len(x)} inputs, {len(y)} targets, batch_size {batch_size}.")
        self.x, self.y = x, y
        self.batch_sampler = EpochBatchSampler(len(x), batch_size, shuffle, drop_last, seed)

    @property
    def batch_size(self) -> int:
        return self.batch_sampler.batch_size

    def __len__(self) -> int:
        return len(self.batch_sampler)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        s, bs = self.batch_sampler, self.batch_size
        order = s.order().to(self.x.device)  # one small copy per pass, no sync per batch
        for b in range(s.start_batch, len(s)):
            idx = order[b * bs:(b + 1) * bs]
            yield self.x[idx], self.y[idx]


# ---- real datasets -------------------------------------------------------------------

class DatasetMissing(FileNotFoundError):
    """A real dataset is not where the loader looks for it (or its files are not the official ones)."""


CIFAR10_STATS = ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616))  # per-channel mean, std
MNIST_STATS = ((0.1307,), (0.3081,))
FOLDERS = {"cifar10": Path("cifar-10-batches-py"), "mnist": Path("MNIST") / "raw"}
FILES = {
    "cifar10": [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch", "batches.meta"],
    "mnist": [f"{s}-{k}" for s in ("train", "t10k") for k in ("images-idx3-ubyte", "labels-idx1-ubyte")],
}


def data_root() -> Path:
    """`$COURSE_DATA_DIR` if set, else the `data/` folder at the repository root."""
    env = os.environ.get("COURSE_DATA_DIR")
    return Path(env) if env else Path(__file__).resolve().parent.parent / "data"


def _folder(name: str, root: str | Path | None) -> Path:
    if name not in FOLDERS:
        raise ValueError(f"Unknown dataset {name!r}: choose one of {', '.join(FOLDERS)}.")
    return Path(root if root is not None else data_root()) / FOLDERS[name]


def available(name: str, root: str | Path | None = None) -> bool:
    """True when every file the loader needs exists (no checksum: that is for the loader)."""
    folder = _folder(name, root)
    return all((folder / f).is_file() for f in FILES[name])


@functools.cache
def _unverified_cifar10() -> type:
    import torchvision

    class UnverifiedCIFAR10(torchvision.datasets.CIFAR10):
        """torchvision's CIFAR10 with the md5 checks replaced by existence checks.

        torchvision compares every batch file with the md5 of the official archive, so a
        subset, a re-pickled copy or a test fixture can never load. Setting the md5 entries
        to None makes torchvision's own `check_integrity` test only that the file exists;
        all of its reading code (pickle batches, HWC uint8 array, label names) runs
        unchanged. Used only when the caller asks for it with `cifar10(..., verify=False)`.
        """

        train_list = [[name, None] for name, _ in torchvision.datasets.CIFAR10.train_list]
        test_list = [[name, None] for name, _ in torchvision.datasets.CIFAR10.test_list]
        meta = {**torchvision.datasets.CIFAR10.meta, "md5": None}

    return UnverifiedCIFAR10


def _load(name: str, label: str, cls: type, root: str | Path | None, train: bool, download: bool,
          transform, hint: str, checksums: bool = False) -> Dataset:
    """Build torchvision dataset `cls`, turning missing or rejected files into one sentence."""
    folder, root = _folder(name, root), Path(root if root is not None else data_root())
    if not download and not available(name, root):
        raise DatasetMissing(f"{label} not found: put {hint} in {folder}{os.sep}, "
                             f"or pass download=True to fetch it (needs internet).")
    try:
        return cls(str(root), train=train, download=download, transform=transform)
    except (RuntimeError, OSError) as exc:  # torchvision: failed download or checksum
        if download:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise DatasetMissing(f"Downloading {label} into {folder}{os.sep} failed ({reason}); "
                                 f"put {hint} there by hand.") from None
        if not checksums:  # the files exist and nothing was checked: a genuine read error
            raise
        raise DatasetMissing(f"{label} files in {folder}{os.sep} do not match the official checksums: "
                             f"replace them with {hint}, "
                             f"or pass verify=False to load them as they are.") from None


def cifar10(root: str | Path | None = None, train: bool = True, download: bool = False,
            transform=None, verify: bool = True) -> Dataset:
    """torchvision CIFAR-10 from `<root>/cifar-10-batches-py/` (root defaults to data_root()).

    Default transform: ToTensor + Normalize(CIFAR10_STATS). `verify=False` skips the
    official md5 checks (see :func:`_unverified_cifar10`); the default keeps them.
    """
    from torchvision import datasets, transforms as T

    transform = transform or T.Compose([T.ToTensor(), T.Normalize(*CIFAR10_STATS)])
    cls = datasets.CIFAR10 if verify else _unverified_cifar10()
    hint = "the extracted files of cifar-10-python.tar.gz (data_batch_1..5, test_batch, batches.meta)"
    return _load("cifar10", "CIFAR-10", cls, root, train, download, transform, hint, checksums=verify)


def mnist(root: str | Path | None = None, train: bool = True, download: bool = False,
          transform=None) -> Dataset:
    """torchvision MNIST from `<root>/MNIST/raw/` (uncompressed idx-ubyte files).

    Default transform: ToTensor + Normalize(MNIST_STATS). torchvision checks only that
    the four raw files exist (their checksums are those of the .gz downloads).
    """
    from torchvision import datasets, transforms as T

    transform = transform or T.Compose([T.ToTensor(), T.Normalize(*MNIST_STATS)])
    hint = "the four uncompressed files " + ", ".join(FILES["mnist"])
    return _load("mnist", "MNIST", datasets.MNIST, root, train, download, transform, hint)
