"""The course's models: a widely copied tutorial CNN made correct, torchvision ResNets, and a
GPT built from the attention of :mod:`course_lib.attention`.

:data:`TUTORIAL_CNN_SOURCE` is the tutorial snippet, with its three bugs;
:func:`show_tutorial_bugs` runs it so the first-CNN notebook can show the real exceptions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F  # the import the tutorial snippet forgot
from torch.utils.checkpoint import checkpoint

from course_lib.attention import MultiHeadAttention

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


RESNETS = ("resnet18", "resnet34", "resnet50")  # torchvision's builders of these names


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
    import torchvision  # here, not at the top: 2 s of imports that only the ResNets need

    model = getattr(torchvision.models, name)(weights=None, num_classes=num_classes)
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


# ---- GPT: a decoder-only Transformer ---------------------------------------------------

@dataclass(frozen=True)
class GPTConfig:
    """The shape of a GPT. Defaults: a small byte-level model; :data:`GPT2_SMALL` is GPT-2's."""

    vocab_size: int = 256  # token ids 0..vocab_size-1 (256: bytes)
    block_size: int = 256  # context length T: the longest sequence the model reads
    n_layer: int = 4  # Transformer blocks L
    n_head: int = 4  # attention heads H per block
    n_embd: int = 128  # width C; each head has C/H numbers
    dropout: float = 0.0  # on embeddings, attention weights and residual branches (training only)
    bias: bool = True  # biases in the linear layers and LayerNorms, as GPT-2
    sdpa: bool = True  # PyTorch's fused attention; False: the written-out attention
    checkpoint: bool = False  # activation checkpointing: keep each block's input, recompute the rest

    def __post_init__(self) -> None:
        sizes = dict(vocab_size=self.vocab_size, block_size=self.block_size, n_layer=self.n_layer,
                     n_head=self.n_head, n_embd=self.n_embd)
        for name, value in sizes.items():
            if value < 1:
                raise ValueError(f"GPTConfig.{name} must be at least 1, got {value}.")
        if self.n_embd % self.n_head:
            raise ValueError(f"GPTConfig: the width n_embd={self.n_embd} must split evenly into "
                             f"n_head={self.n_head} heads.")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"GPTConfig.dropout must be in [0, 1), got {self.dropout}.")


GPT2_SMALL = GPTConfig(vocab_size=50257, block_size=1024, n_layer=12, n_head=12, n_embd=768)


class MLP(nn.Module):
    """Position-wise feed-forward: C -> 4C -> GELU -> C. (B, T, C) -> (B, T, C)."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd, bias=cfg.bias)
        self.gelu = nn.GELU(approximate="tanh")  # GPT-2's GELU
        self.proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.proj(self.gelu(self.fc(x))))


class Block(nn.Module):
    """Pre-norm Transformer block: x + attention(LN(x)), then x + MLP(LN(x))."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.attn = MultiHeadAttention(cfg.n_embd, cfg.n_head, bias=cfg.bias, dropout=cfg.dropout,
                                       sdpa=cfg.sdpa)
        self.drop = nn.Dropout(cfg.dropout)  # on the attention branch, before the residual add
        self.ln2 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.drop(self.attn(self.ln1(x), causal=True))  # (B, T, C)
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """A decoder-only Transformer (GPT-2's layout): token and learned position embeddings,
    `n_layer` pre-norm blocks of causal self-attention and MLP, a final LayerNorm, and an
    output layer that shares its weights with the token embedding (weight tying).

    ``model(idx)`` maps token ids (B, T) to next-token logits (B, T, vocab_size);
    ``train.cross_entropy`` takes them as they are.
    """

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)  # token -> vector
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)  # position -> vector, learned
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # tied: one (V, C) matrix reads and writes tokens
        self.apply(self._init)
        for name, p in self.named_parameters():  # GPT-2: residual projections scaled by 1/√(2L)
            if name.endswith(("attn.proj.weight", "mlp.proj.weight")):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Token ids (B, T), T <= block_size -> logits (B, T, vocab_size)."""
        B, T = idx.shape
        if T > self.cfg.block_size:
            raise ValueError(f"This GPT reads at most block_size={self.cfg.block_size} tokens, "
                             f"got a sequence of {T}.")
        pos = torch.arange(T, device=idx.device)  # (T,)
        x = self.drop(self.wte(idx) + self.wpe(pos))  # (B, T, C)
        for block in self.blocks:
            if self.cfg.checkpoint and torch.is_grad_enabled():  # backward re-runs the block
                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        return self.lm_head(self.ln_f(x))  # (B, T, V)

    def num_params(self, non_embedding: bool = True) -> int:
        """Parameters, the tied embedding counted once. `non_embedding` leaves out the
        position embedding (no matmul uses it); the token embedding stays, since as the
        output layer it is a matmul on every token."""
        n = sum(p.numel() for p in self.parameters())  # parameters() yields a tied tensor once
        return n - self.wpe.weight.numel() if non_embedding else n

    def flops_per_token(self) -> int:
        """Training FLOPs per token, forward + backward: 6N + 12·L·T·C.

        6N: every weight does a multiply-add (2 FLOPs) per token forward and two backward
        (the gradients of its input and of itself). 12·L·T·C: attention's q·kᵀ and
        weights·v, 2·2·T·C per token and layer forward, times 3 with the backward, over the
        full T×T square (PaLM, appendix B; nanoGPT's estimate_mfu). N = num_params().
        """
        c = self.cfg
        return 6 * self.num_params() + 12 * c.n_layer * c.block_size * c.n_embd

    @torch.no_grad()
    @torch.no_grad()  # sampling needs no autograd graph: none is recorded
    def generate(self, idx: torch.Tensor, max_new_tokens: int, *, temperature: float = 1.0,
                 top_k: int | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
        """Continue token ids (B, T0) by `max_new_tokens` sampled tokens -> (B, T0 + new).

        Each step reads the last block_size tokens, divides the last position's logits by
        `temperature` (below 1: sharper; 0: always the most likely token), keeps the `top_k`
        most likely tokens (None: all), and samples from their softmax with `generator`.
        """
        if temperature < 0 or (top_k is not None and top_k < 1):
            raise ValueError(f"generate needs temperature >= 0 and top_k >= 1 or None, got "
                             f"{temperature} and {top_k}.")
        was_training = self.training
        self.eval()
        try:
            for _ in range(max_new_tokens):
                logits = self(idx[:, -self.cfg.block_size:])[:, -1, :].float()  # (B, V)
                if temperature == 0:
                    nxt = logits.argmax(-1, keepdim=True)  # (B, 1)
                else:
                    logits = logits / temperature
                    if top_k is not None and top_k < logits.size(-1):
                        kth = logits.topk(top_k, dim=-1).values[:, -1:]  # (B, 1)
                        logits = logits.masked_fill(logits < kth, float("-inf"))
                    nxt = torch.multinomial(logits.softmax(-1), 1, generator=generator)  # (B, 1)
                idx = torch.cat([idx, nxt], dim=1)
        finally:
            self.train(was_training)
        return idx


def mlp(resolution: int, hidden: int, classes: int = 6) -> nn.Module:
    """The MLP of notebooks 05 and 06 (scripts/ddp_train.py): (B, 3, R, R) images -> (B, classes) logits. No BatchNorm
    and no dropout, so W ranks compute exactly what one process computes.

    GELU, not ReLU: a ReLU's gradient jumps at 0, so a rounding-level difference (the order of
    the all-reduce's sums) can switch a unit on or off for one image and move the weights by far
    more than rounding. With ReLU, 2 ranks and one process drifted from 5e-8 to 3e-3 apart
    between steps 66 and 96 here (cpu profile); with GELU they stay within 1e-7."""
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * resolution * resolution, hidden), nn.GELU(),
                         nn.Linear(hidden, hidden), nn.GELU(), nn.Linear(hidden, classes))


def deep_mlp(width: int, layers: int) -> nn.Sequential:
    """`layers` Linear(width, width) with ReLU between: (B, width) -> (B, width), the model of
    scripts/ddp_comm.py and fsdp_vs_ddp.py (notebook 06). No norm layer, no dropout: each sample's output
    depends on its own input only."""
    blocks: list[nn.Module] = []
    for i in range(layers):
        blocks += [nn.Linear(width, width)] + ([nn.ReLU()] if i < layers - 1 else [])
    return nn.Sequential(*blocks)


def layer_stack(width: int, layers: int) -> nn.Sequential:
    """`layers` × Linear(width, width), the models of notebook 05's GIL measurement
    (scripts/replica_procs.py): many small layers, where per-layer overhead dominates, and a few
    large ones, where the matrix products dominate."""
    return nn.Sequential(*[nn.Linear(width, width) for _ in range(layers)])


def gelu_stack(width: int, layers: int, seed: int = 0) -> nn.Sequential:
    """`layers` blocks ``Linear(width, width) → GELU``, initialised from `seed` (the same on
    every rank and in the one-process reference): the model notebook 11's pipeline splits by layers."""
    if width < 1 or layers < 1:
        raise ValueError(f"width and layers must be at least 1, got width={width}, layers={layers}.")
    torch.manual_seed(seed)
    return nn.Sequential(*(nn.Sequential(nn.Linear(width, width), nn.GELU()) for _ in range(layers)))


def mlp_stack(width: int, layers: int, seed: int = 0) -> nn.Sequential:
    """`layers` Transformer-style MLP blocks ``Linear(d, 4d) → GELU → Linear(4d, d)`` (d =
    `width`), initialised from `seed`: the model that sections 7 and 8 split inside each layer."""
    if width < 1 or layers < 1:
        raise ValueError(f"width and layers must be at least 1, got width={width}, layers={layers}.")
    torch.manual_seed(seed)
    return nn.Sequential(*(mlp_block(width) for _ in range(layers)))


def mlp_block(d: int) -> nn.Sequential:
    """One Transformer MLP block: ``Linear(d, 4d) → GELU → Linear(4d, d)`` (section 7 splits it)."""
    return nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
