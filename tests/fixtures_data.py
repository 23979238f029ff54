"""Tiny CIFAR-10 and MNIST folders in torchvision's own on-disk formats.

They let the real torchvision loading code run in CI without network. Instructors can
use them too, to rehearse the real-data path offline, in a folder of its own (never the
real data/ folder) that COURSE_DATA_DIR then points to:

    python -c "from tests.fixtures_data import *; write_mnist_fixture('/tmp/fake_data')"

CIFAR-10 fixtures load only with `cifar10(..., verify=False)`: they are not the official
files, so torchvision's md5 check rightly rejects them.

Image content encodes the label so a test can check that pixels and labels stay paired
through torchvision: every pixel's red value is 20 * label, green 100, blue 200
(CIFAR-10); MNIST pixels are 20 * label.
"""

from __future__ import annotations

import pickle
import struct
from pathlib import Path

import numpy as np

CIFAR10_CLASSES = ["airplane", "automobile", "bird", "cat", "deer",
                   "dog", "frog", "horse", "ship", "truck"]


def cifar_labels(n: int) -> list[int]:
    """Labels of a fixture batch of n images: 0, 1, ..., 9, 0, 1, ..."""
    return [i % 10 for i in range(n)]


def _cifar_batch(n: int, name: str) -> dict:
    """One batch dict with the keys and dtypes of the real archive (as torchvision reads it)."""
    labels = cifar_labels(n)
    data = np.empty((n, 3, 1024), dtype=np.uint8)  # (N, RGB planes, 32*32 row-major)
    data[:, 0] = 20 * np.array(labels, dtype=np.uint8)[:, None]
    data[:, 1], data[:, 2] = 100, 200
    return {"batch_label": name, "labels": labels, "data": data.reshape(n, 3072),
            "filenames": [f"fixture_{i:05d}.png" for i in range(n)]}


def write_cifar10_fixture(root: str | Path, n_per_batch: int = 4) -> Path:
    """Write `<root>/cifar-10-batches-py/` like the extracted cifar-10-python.tar.gz.

    data_batch_1..5 and test_batch hold `n_per_batch` images each (the real files: 10,000),
    batches.meta holds the ten label names. Python-3 pickles; the real archive's Python-2
    pickles load (latin1) to the same dicts with str keys. Returns the folder.
    """
    folder = Path(root) / "cifar-10-batches-py"
    folder.mkdir(parents=True, exist_ok=True)
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    for k, name in enumerate(names):
        label = f"training batch {k + 1} of 5" if k < 5 else "testing batch 1 of 1"
        with open(folder / name, "wb") as f:
            pickle.dump(_cifar_batch(n_per_batch, label), f, protocol=2)
    meta = {"label_names": CIFAR10_CLASSES, "num_cases_per_batch": n_per_batch, "num_vis": 3072}
    with open(folder / "batches.meta", "wb") as f:
        pickle.dump(meta, f, protocol=2)
    return folder


def _write_idx(path: Path, array: np.ndarray) -> None:
    """IDX file: big-endian magic (0, 0, type 0x08 = ubyte, ndim), then big-endian dims."""
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    path.write_bytes(header + array.astype(np.uint8).tobytes())


def write_mnist_fixture(root: str | Path, n: int = 10) -> Path:
    """Write `<root>/MNIST/raw/` with the four uncompressed idx-ubyte files torchvision reads.

    Train and test each hold n 28x28 images labelled 0..9 cyclically. Returns the folder.
    """
    folder = Path(root) / "MNIST" / "raw"
    folder.mkdir(parents=True, exist_ok=True)
    labels = np.arange(n) % 10
    images = np.broadcast_to((20 * labels)[:, None, None], (n, 28, 28))
    for split in ("train", "t10k"):
        _write_idx(folder / f"{split}-images-idx3-ubyte", images)
        _write_idx(folder / f"{split}-labels-idx1-ubyte", labels)
    return folder
