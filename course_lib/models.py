"""Models for the image notebooks: a widely copied tutorial CNN made correct, and torchvision ResNets.

:data:`TUTORIAL_CNN_SOURCE` is the tutorial snippet, with its three bugs;
:func:`show_tutorial_bugs` runs it so notebook 02 can show the real exceptions.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F  # the import the tutorial snippet forgot
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

    Global average pooling replaces the tutorial snippet's hard-coded flatten size, so the same
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


# A widely copied tutorial snippet: printed in notebook 02 and run by show_tutorial_bugs().
TUTORIAL_CNN_SOURCE = '''import torch
import torch.nn as nn

class TutorialCNN(nn.Module):
    def __init__(self, num_classes=6):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.conv3 = nn.Conv2d(64, 64, 3, padding=1)
        self.fc = nn.Linear(64 * 8 * 8, num_classes)

    def features(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return F.max_pool2d(F.relu(self.conv3(x)), 2)

    def forward(self, x):
        return self.fc(self.features(x).flatten(1))

def train_step(model, optimizer, x, y):
    features = model.features(x)
    loss = F.cross_entropy(features, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()
'''
SNIPPET_FILE = "<tutorial snippet>"  # the file name its tracebacks show


def numbered(source: str = TUTORIAL_CNN_SOURCE) -> str:
    """The snippet with line numbers, as the learner reads it next to the errors."""
    return "\n".join(f"{i:>2}  {line}" for i, line in enumerate(source.splitlines(), start=1))


@dataclass
class TutorialBug:
    """One bug of the tutorial snippet: the call that hits it, the snippet line that raises,
    the exception it really raises, and the fix."""

    bug: str
    call: str  # what was run, e.g. "model(x), x of shape (2, 3, 32, 32)"
    line: int  # 1-based line of the snippet that raised
    error: Exception  # the exception object itself: its type and shapes are the stable facts
    fix: str

    def __str__(self) -> str:
        text = str(self.error).strip()
        first = text.splitlines()[0] if text else ""
        code = TUTORIAL_CNN_SOURCE.splitlines()[self.line - 1].strip()
        return (f"bug:    {self.bug}\nrun:    {self.call}\nline {self.line:<2} {code}\n"
                f"raises {type(self.error).__name__}: {first}\nfix:    {self.fix}")


def _snippet(with_f: bool) -> dict:
    namespace: dict = {"__name__": "tutorial_snippet"}
    exec(compile(TUTORIAL_CNN_SOURCE, SNIPPET_FILE, "exec"), namespace)  # our constant, not input
    if with_f:
        namespace["F"] = F
    return namespace


def _snippet_line(exc: BaseException) -> int:
    """The last line of the snippet in the exception's traceback."""
    tb, line = exc.__traceback__, 0
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == SNIPPET_FILE:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def show_tutorial_bugs(batch: int = 2, resolution: int = 32) -> list[TutorialBug]:
    """Run the tutorial snippet and return each bug with the exception it raises and its fix.

    1. ``model(x)`` as printed: ``F`` was never imported.
    2. ``model(x)`` with ``F`` imported: the hard-coded flatten size.
    3. ``train_step(...)`` with ``F`` imported: the feature map goes to ``cross_entropy``.
    """
    x = torch.randn(batch, 3, resolution, resolution)
    y = torch.randint(0, 6, (batch,))
    shape = f"x of shape {tuple(x.shape)}"

    def step() -> None:
        ns = _snippet(True)
        model = ns["TutorialCNN"]()
        ns["train_step"](model, torch.optim.SGD(model.parameters(), lr=0.1), x, y)

    attempts = [
        ("no `import torch.nn.functional as F`", f"model(x), {shape}",
         lambda: _snippet(False)["TutorialCNN"]()(x), "add the import at the top"),
        ("hard-coded flatten size 64 * 8 * 8", f"model(x), {shape}, with F imported",
         lambda: _snippet(True)["TutorialCNN"]()(x),
         "global average pooling: the linear layer sees 64 numbers at any input size"),
        ("the conv feature map fed to cross_entropy",
         f"train_step(model, optimizer, x, y), {shape}, y of shape {tuple(y.shape)}", step,
         "the loss on the (B, classes) logits: model(x)"),
    ]
    rows = []
    for bug, call, run, fix in attempts:
        try:
            run()
        except Exception as exc:  # the point is to show what each bug raises
            rows.append(TutorialBug(bug, call, _snippet_line(exc), exc, fix))
        else:
            raise AssertionError(f"The snippet's bug {bug!r} raised nothing: the demonstration is broken.")
    return rows
