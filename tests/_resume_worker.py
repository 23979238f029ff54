"""Helper for tests/test_train.py: the resume cases, and a fresh-process resumer.

    python tests/_resume_worker.py JOBS.json   # JOBS: [[case, checkpoint, out], ...]

For each job it builds the case's model with *different* initial weights, resumes from
the checkpoint, trains to the end and saves the final state_dict and history to `out`.
"""

from __future__ import annotations

import json
import sys

import torch
import torch.nn as nn
from torch.utils.data import TensorDataset

from course_lib import data, models, train

N, BATCH, EPOCHS = 36, 4, 2  # 9 batches per epoch: an odd count leaves a partial group
CASES: dict[str, dict] = {  # case -> model kind, config overrides, split step
    "plain": dict(model="mlp", cfg=dict(optimizer="sgd", lr=0.05), split=12),
    "accum2": dict(model="mlp", cfg=dict(accum_steps=2), split=7),
    "schedule": dict(model="mlp", cfg=dict(schedule=("warmup_cosine", 4)), split=6),
    "dropout": dict(model="mlp_dropout", cfg=dict(), split=5),
    "fp16": dict(model="mlp_dropout", cfg=dict(amp="fp16", clip_grad_norm=0.5), split=11),
    "bf16": dict(model="mlp_dropout", cfg=dict(amp="bf16", accum_steps=2), split=4),
    "cnn_bn": dict(model="cnn", cfg=dict(channels_last=True, weight_decay=0.01), split=10),
    "epoch_end": dict(model="mlp_dropout", cfg=dict(), split=9),
    "workers": dict(model="mlp_dropout", cfg=dict(), split=13, loader=dict(num_workers=2)),
    "tensors": dict(model="mlp_dropout", cfg=dict(accum_steps=2), split=6, loader="tensors"),
    "gpt": dict(model="gpt", cfg=dict(fused=True, betas=(0.9, 0.95), decay_matrices_only=True,
                                      weight_decay=0.1, clip_grad_norm=1.0, accum_steps=2,
                                      amp="bf16", eval_every=3),
                split=5, loader="tensors"),
}
GPT = models.GPTConfig(vocab_size=23, block_size=8, n_layer=2, n_head=2, n_embd=16, dropout=0.1)


def dataset(model: str) -> TensorDataset:
    g = torch.Generator().manual_seed(7)
    if model == "gpt":  # next-token windows of a random token stream
        tokens = torch.randint(0, GPT.vocab_size, (N * GPT.block_size + 1,), generator=g)
        return TensorDataset(tokens[:-1].view(N, -1), tokens[1:].view(N, -1))
    x = torch.randn(N, 3, 8, 8, generator=g) if model == "cnn" else torch.randn(N, 8, generator=g)
    return TensorDataset(x, torch.randint(0, 3, (N,), generator=g))


def build(case: str, init_seed: int = 0) -> tuple[nn.Module, torch.utils.data.DataLoader]:
    """A fresh model (weights from `init_seed`) and the case's resumable loader."""
    torch.manual_seed(init_seed)
    kind = CASES[case]["model"]
    if kind == "cnn":
        model = models.SmallCNN(num_classes=3, width=4, resolution=8, dropout=0.2)
    elif kind == "gpt":
        model = models.GPT(GPT)
    else:
        p = 0.3 if kind == "mlp_dropout" else 0.0
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(p), nn.Linear(16, 3))
    loader = CASES[case].get("loader", {})
    if loader == "tensors":  # data.TensorLoader: batches gathered from resident tensors
        return model, data.TensorLoader(*dataset(kind).tensors, BATCH)
    return model, data.make_loader(dataset(kind), BATCH, **loader)


def val_loader(case: str) -> data.TensorLoader | None:
    """The case's validation batches when it validates during training (eval_every)."""
    if "eval_every" not in CASES[case]["cfg"]:
        return None
    return data.TensorLoader(*dataset(CASES[case]["model"]).tensors, BATCH, shuffle=False)


def config(case: str, **overrides) -> train.TrainConfig:
    kwargs = dict(CASES[case]["cfg"], epochs=EPOCHS, lr=0.01, seed=3, log_every=4, device="cpu")
    if "schedule" in kwargs:
        total = EPOCHS * -(-N // BATCH // kwargs.get("accum_steps", 1))
        kwargs["schedule"] = train.warmup_cosine(kwargs["schedule"][1], total)
    return train.TrainConfig(**{**kwargs, **overrides})


def main(jobs_file: str) -> None:
    for case, checkpoint, out in json.load(open(jobs_file)):
        model, loader = build(case, init_seed=999)  # wrong weights until the checkpoint loads
        history = train.fit(model, loader, config(case), val_loader=val_loader(case),
                            resume_from=checkpoint)
        torch.save({"state": model.state_dict(), "step": history.step, "loss": history.loss,
                    "skipped": history.skipped_steps, "val_loss": history.val_loss}, out)


if __name__ == "__main__":
    main(sys.argv[1])
