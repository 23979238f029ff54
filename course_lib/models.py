"""Models for the image notebooks: the seeds' CNN made correct, and torchvision ResNets.

The course seeds shipped a CNN with three bugs; :data:`SEED_CNN_SOURCE` keeps it and
:func:`show_seed_bugs` runs it so notebook 02 can show the real exceptions.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F  # the import the seeds forgot
import torchvision

MIN_RESOLUTION = 8  # three 2x2 max-pools need at least 8x8 input


def conv_block(c_in: int, c_out: int) -> nn.Sequential:
    """conv 3x3 -> BatchNorm -> ReLU -> 2x2 max-pool (halves H and W)."""
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, 3, padding=1, bias=False),  # BN supplies the bias
        nn.BatchNorm2d(c_out),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(2),
    )


class SmallCNN(nn.Module):
    """Three conv blocks, global average pooling, one linear layer -> logits (B, num_classes).

    Global average pooling replaces the seeds' hard-coded flatten size, so the same
    weights accept any input of at least 8x8; `resolution` is the size the model is
    built for and is only checked.
    """

    def __init__(
        self,
        num_classes: int = 6,
        in_channels: int = 3,
        width: int = 32,
        resolution: int = 32,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        if resolution < MIN_RESOLUTION:
            raise ValueError(f"SmallCNN needs inputs of at least 8x8 pixels, got {resolution}.")
        self.resolution = resolution
        self.features = nn.Sequential(
            conv_block(in_channels, width),  # (B, w, H/2, W/2)
            conv_block(width, 2 * width),  # (B, 2w, H/4, W/4)
            conv_block(2 * width, 4 * width),  # (B, 4w, H/8, W/8)
        )
        self.pool = nn.AdaptiveAvgPool2d(1)  # (B, 4w, 1, 1) whatever H, W are
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(4 * width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) images -> (B, num_classes) logits."""
        if min(x.shape[-2:]) < MIN_RESOLUTION:
            raise ValueError(f"SmallCNN needs inputs of at least 8x8 pixels, got {tuple(x.shape)}.")
        x = self.pool(self.features(x)).flatten(1)  # (B, 4w)
        return self.head(self.dropout(x))


RESNETS = {
    "resnet18": torchvision.models.resnet18,
    "resnet34": torchvision.models.resnet34,
    "resnet50": torchvision.models.resnet50,
}


def resnet(
    name: str = "resnet18", num_classes: int = 10, small_input: bool = False, in_channels: int = 3
) -> nn.Module:
    """A torchvision ResNet with random weights (never downloads).

    `small_input=True` swaps the ImageNet stem (7x7 stride-2 conv + max-pool, which
    shrinks 32x32 images to 8x8 before the first block) for a 3x3 stride-1 conv without
    pooling, the usual CIFAR-style stem.
    """
    if name not in RESNETS:
        raise ValueError(f"Unknown ResNet {name!r}: choose one of {', '.join(RESNETS)}.")
    model = RESNETS[name](weights=None, num_classes=num_classes)
    if small_input or in_channels != 3:
        k, s, p = (3, 1, 1) if small_input else (7, 2, 3)
        model.conv1 = nn.Conv2d(in_channels, 64, k, stride=s, padding=p, bias=False)
        nn.init.kaiming_normal_(model.conv1.weight, mode="fan_out", nonlinearity="relu")
    if small_input:
        model.maxpool = nn.Identity()
    return model


def count_params(model: nn.Module, trainable_only: bool = False) -> int:
    """Number of parameter elements (optionally only those with requires_grad)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


# The seeds' CNN, verbatim in spirit: run by show_seed_bugs(), never imported.
SEED_CNN_SOURCE = '''
import torch
import torch.nn as nn
# (missing) import torch.nn.functional as F

class SeedCNN(nn.Module):
    def __init__(self, num_classes=6):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.conv3 = nn.Conv2d(64, 64, 3, padding=1)
        self.fc = nn.Linear(64 * 8 * 8, num_classes)  # assumes 8x8 maps: wrong for 32x32 in

    def features(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return F.max_pool2d(F.relu(self.conv3(x)), 2)  # 32 -> 4: (B, 64, 4, 4)

    def forward(self, x):
        return self.fc(self.features(x).flatten(1))
'''


@dataclass
class SeedBug:
    """One bug of the seeds' CNN: what it is, the exception it really raises, the fix."""

    bug: str
    error: Exception  # the exception object itself: its type and shapes are the stable facts
    fix: str

    def __str__(self) -> str:
        first = str(self.error).strip().splitlines()[0] if str(self.error).strip() else ""
        return f"bug:   {self.bug}\nraises {type(self.error).__name__}: {first}\nfix:   {self.fix}"


def _seed_model(with_f: bool) -> nn.Module:
    namespace: dict = {"__name__": "seed_cnn"}
    exec(SEED_CNN_SOURCE, namespace)  # our own constant, not user input
    if with_f:
        namespace["F"] = F
    return namespace["SeedCNN"]()


def show_seed_bugs(batch: int = 2, resolution: int = 32) -> list[SeedBug]:
    """Run the seeds' CNN and return each bug with the exception it raises and its fix."""
    x = torch.randn(batch, 3, resolution, resolution)
    y = torch.randint(0, 6, (batch,))
    attempts = [
        ("forgot `import torch.nn.functional as F`", lambda: _seed_model(False)(x),
         "import it at the top of the module"),
        ("hard-coded flatten size 64*8*8", lambda: _seed_model(True)(x),
         "global average pooling: any input size works"),
        ("conv feature map fed to cross_entropy",
         lambda: F.cross_entropy(_seed_model(True).features(x), y),
         "loss on the (B, classes) logits"),
    ]
    rows = []
    for bug, run, fix in attempts:
        try:
            run()
        except Exception as exc:  # the point is to show what each bug raises
            rows.append(SeedBug(bug, exc, fix))
        else:
            raise AssertionError(f"The seeds' bug {bug!r} raised nothing: the demonstration is broken.")
    return rows
