"""Checkpoints that cannot silently diverge: digest, stale temp files, load errors by
cause, the trajectory guard on resume, GradScaler state and the LR of every step."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.optimizer import register_optimizer_step_pre_hook
from torch.utils.data import TensorDataset

from course_lib import checkpoint, train
from course_lib.checkpoint import CheckpointError
from course_lib.data import make_loader
from course_lib.train import TrainConfig

pytestmark = pytest.mark.versioned  # torch.save/torch.load (weights_only): make test-oldest runs it


def mlp(seed: int = 0, classes: int = 3) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, classes))


def dataset(n: int = 32, seed: int = 0) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    return TensorDataset(torch.randn(n, 8, generator=g), torch.randint(0, 3, (n,), generator=g))


def cpu(**kwargs) -> TrainConfig:
    return TrainConfig(device="cpu", **kwargs)


def one_sentence(err: pytest.ExceptionInfo) -> str:
    message = str(err.value)
    assert "\n" not in message and message.endswith(".") and message.count(". ") == 0
    return message


def assert_same(a, b) -> None:
    """Recursively equal: tensors with torch.equal (dtype and shape included), the rest ==."""
    assert type(a) is type(b)
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and torch.equal(a, b)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for key in a:
            assert_same(a[key], b[key])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for u, v in zip(a, b):
            assert_same(u, v)
    else:
        assert a == b


@pytest.fixture
def saved(tmp_path):
    """A real two-step training checkpoint and the state it holds."""
    path = tmp_path / "run.pt"
    train.fit(mlp(), make_loader(dataset(), 4), cpu(max_steps=2, checkpoint_path=path))
    return path, checkpoint.load_checkpoint(path)


# -- the file: digest, temp files, errors by cause -------------------------------------------

def test_single_byte_flips_never_load_different_tensors(saved):
    path, original = saved
    blob = path.read_bytes()
    flipped = path.with_name("flipped.pt")
    errors = 0
    for i in range(0, len(blob), max(1, len(blob) // 400)):  # ~400 positions, every region
        damaged = bytearray(blob)
        damaged[i] ^= 1 << (i % 8)
        flipped.write_bytes(bytes(damaged))
        try:
            state = checkpoint.load_checkpoint(flipped)
        except CheckpointError:
            errors += 1
            continue
        assert_same(state, original)  # a flip the reader never sees (padding, zip comments)
    assert errors > 0  # the flips did reach bytes that matter


def test_digest_mismatch_is_named_as_corruption(saved, monkeypatch):
    path, state = saved
    payload = torch.load(path, weights_only=True)
    payload["state"]["model"]["0.weight"][0, 0] += 1  # different tensors, same old digest
    torch.save(payload, path)
    with pytest.raises(CheckpointError) as err:
        checkpoint.load_checkpoint(path)
    assert one_sentence(err) == (f"{path} is corrupt: its contents do not match the digest "
                                 "written when it was saved.")


def test_foreign_pickle_truncated_file_and_missing_file_are_different_sentences(saved, tmp_path):
    path, _ = saved
    foreign, truncated = tmp_path / "module.pt", tmp_path / "truncated.pt"
    torch.save(nn.Linear(2, 2), foreign)  # Python objects: weights_only refuses them
    truncated.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
    messages = {}
    for name, p in [("foreign", foreign), ("truncated", truncated),
                    ("missing", tmp_path / "missing.pt")]:
        with pytest.raises(CheckpointError) as err:
            checkpoint.load_checkpoint(p)
        messages[name] = one_sentence(err).replace(str(p), "<path>")
        assert err.value.__cause__ is not None  # the reader's own exception is kept
    assert "weights_only" in messages["foreign"] and "corrupt" not in messages["foreign"]
    assert "corrupt or truncated" in messages["truncated"]
    assert messages["missing"] == "No checkpoint file at <path>."
    assert len(set(messages.values())) == 3


def test_stale_temp_files_are_removed_by_the_next_save_and_by_a_load(tmp_path):
    path = tmp_path / "run.pt"
    other = tmp_path / ".run.pt.x.abcd1234.tmp"  # a temp file of run.pt.x, not of run.pt
    other.write_bytes(b"keep")

    def leave_stale() -> list:
        stale = [tmp_path / f".run.pt.{k}_stale.tmp" for k in ("a1", "b2")]  # as mkstemp names
        for p in stale:
            p.write_bytes(b"partial")
        return stale

    stale = leave_stale()
    checkpoint.save_checkpoint(path, {"w": torch.ones(2)})
    assert not any(p.exists() for p in stale) and other.exists()
    stale = leave_stale()
    assert torch.equal(checkpoint.load_checkpoint(path)["w"], torch.ones(2))
    assert not any(p.exists() for p in stale) and other.exists()
    path.unlink()
    stale = leave_stale()
    with pytest.raises(CheckpointError):
        checkpoint.load_checkpoint(path)  # nothing to load, but the litter still goes
    assert not any(p.exists() for p in stale)


def test_checkpoint_that_does_not_fit_names_the_key_and_both_shapes(saved):
    path, _ = saved
    with pytest.raises(CheckpointError) as err:
        train.fit(mlp(classes=5), make_loader(dataset(), 4), cpu(), resume_from=path)
    assert one_sentence(err) == (f"{path} does not fit this model: '2.weight' is (3, 16) in the "
                                 "checkpoint and (5, 16) in the model.")
    wider = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3), nn.Linear(3, 3))
    with pytest.raises(CheckpointError) as err:
        train.fit(wider, make_loader(dataset(), 4), cpu(), resume_from=path)
    assert one_sentence(err).endswith("'3.weight' is (3, 3) in the model and missing from the "
                                      "checkpoint.")
    narrower = nn.Sequential(nn.Linear(8, 16), nn.Tanh())
    with pytest.raises(CheckpointError) as err:
        checkpoint.load_weights(path, narrower, torch.load(path)["state"]["model"])
    assert one_sentence(err).endswith("'2.weight' is (3, 16) in the checkpoint and missing "
                                      "from the model.")


# -- resume with different settings --------------------------------------------------------

def constant(step: int) -> float:
    return 1.0


def halved_from_5(step: int) -> float:
    return 1.0 if step < 5 else 0.5


BASE = dict(lr=0.01, schedule=constant, optimizer="sgd", momentum=0.9)
CHANGES = [  # field, config change, loader (n, batch size, drop_last), saved, resumed
    ("seed", dict(seed=1), None, "seed=0", "seed=1"),
    ("optimizer", dict(optimizer="adamw"), None, "optimizer='sgd'", "optimizer='adamw'"),
    ("weight_decay", dict(weight_decay=0.1), None, "weight_decay=0.0", "weight_decay=0.1"),
    ("momentum", dict(momentum=0.5), None, "momentum=0.9", "momentum=0.5"),
    ("amp", dict(amp="bf16"), None, "amp='off'", "amp='bf16'"),
    ("clip_grad_norm", dict(clip_grad_norm=1.0), None, "clip_grad_norm=None", "clip_grad_norm=1.0"),
    ("accum_steps", dict(accum_steps=2), None, "accum_steps=1", "accum_steps=2"),
    ("batch_size", {}, (30, 5, False), "batch_size=4", "batch_size=5"),
    ("dataset_size", {}, (31, 4, False), "dataset_size=30", "dataset_size=31"),
    ("batches_per_epoch", {}, (30, 4, True), "batches_per_epoch=8", "batches_per_epoch=7"),
    ("lr", dict(lr=0.02), None, "lr=0.01 at step 0", "lr=0.02 at step 0"),
    ("schedule", dict(schedule=halved_from_5), None, "lr=0.01 at step 5", "lr=0.005 at step 5"),
]


@pytest.mark.parametrize("field, change, loader, then, now", CHANGES, ids=[c[0] for c in CHANGES])
def test_resume_with_a_different_trajectory_is_refused(tmp_path, field, change, loader, then, now):
    path = tmp_path / "run.pt"
    train.fit(mlp(), make_loader(dataset(30), 4), cpu(**BASE, max_steps=2, checkpoint_path=path))
    n, batch, drop_last = loader or (30, 4, False)
    resumed = make_loader(dataset(n), batch, drop_last=drop_last)
    with pytest.raises(CheckpointError) as err:
        train.fit(mlp(), resumed, cpu(**{**BASE, **change}), resume_from=path)
    assert one_sentence(err) == (f"{path} was saved with {then}, this run has {now}: resume "
                                 "with the same settings, or start a new run.")


def test_resume_with_the_same_settings_is_accepted(tmp_path):
    """Guard for the test above: its base run does resume when nothing changed."""
    path = tmp_path / "run.pt"
    train.fit(mlp(), make_loader(dataset(30), 4), cpu(**BASE, max_steps=2, checkpoint_path=path))
    history = train.fit(mlp(), make_loader(dataset(30), 4), cpu(**BASE), resume_from=path)
    assert history.step == list(range(1, 9))


# -- exact resume of the GradScaler and of the schedule ------------------------------------

OVERFLOW_LABEL = 3  # one sample carries it; its loss is scaled until fp16 gradients overflow


def overflow_once_per_epoch(output: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    huge = torch.where((targets == OVERFLOW_LABEL).any(), 1e6, 1.0)
    return F.cross_entropy(output, targets) * huge


def test_fp16_resume_restores_the_grad_scaler(tmp_path):
    x, y = dataset(32).tensors
    y = y.clone()
    y[5] = OVERFLOW_LABEL
    loader = lambda: make_loader(TensorDataset(x, y), 4)  # noqa: E731
    cfg = dict(amp="fp16", epochs=3, lr=0.01)
    straight_path, split_path = tmp_path / "straight.pt", tmp_path / "split.pt"
    straight = mlp(classes=4)
    history = train.fit(straight, loader(), cpu(**cfg, checkpoint_path=straight_path),
                        loss_fn=overflow_once_per_epoch)
    assert len(history.skipped_steps) == 3  # one overflow per epoch
    split = history.skipped_steps[0] + 2  # resume after the first overflow
    train.fit(mlp(classes=4), loader(), cpu(**cfg, max_steps=split, checkpoint_path=split_path),
              loss_fn=overflow_once_per_epoch)
    initial = torch.amp.GradScaler("cpu").get_scale()
    assert checkpoint.load_checkpoint(split_path)["scaler"]["scale"] < initial  # premise
    resumed = mlp(seed=1, classes=4)
    again = train.fit(resumed, loader(), cpu(**cfg, checkpoint_path=split_path),
                      loss_fn=overflow_once_per_epoch, resume_from=split_path)
    assert again.skipped_steps == history.skipped_steps
    final = checkpoint.load_checkpoint(split_path)["scaler"]
    assert final == checkpoint.load_checkpoint(straight_path)["scaler"]  # scale and tracker
    for p, q in zip(straight.parameters(), resumed.parameters()):
        assert torch.equal(p, q)


def test_the_optimizer_steps_with_the_schedule_of_each_step_index(tmp_path):
    """Each optimizer.step() uses cfg.lr * schedule(i) for i = 0, 1, 2, ... (resumed too)."""
    schedule = lambda step: 1.0 / (step + 1)  # noqa: E731  every step different
    cfg = dict(lr=0.1, epochs=2, schedule=schedule, accum_steps=2)  # 8 batches: 4 steps/epoch
    used: list[float] = []
    hook = register_optimizer_step_pre_hook(
        lambda opt, args, kwargs: used.append(opt.param_groups[0]["lr"]))
    path = tmp_path / "run.pt"
    try:
        history = train.fit(mlp(), make_loader(dataset(), 4), cpu(**cfg))
        straight, used[:] = list(used), []
        train.fit(mlp(), make_loader(dataset(), 4), cpu(**cfg, max_steps=3, checkpoint_path=path))
        train.fit(mlp(), make_loader(dataset(), 4), cpu(**cfg), resume_from=path)
    finally:
        hook.remove()
    expected = [0.1 * schedule(i) for i in range(len(history.step))]
    assert len(expected) == 8
    assert straight == expected and used == expected
    assert history.lr == expected


def test_validate_passes_cuda_index_0_to_fork_rng(monkeypatch):
    """Index 0 is a real device index, not 'unset' (which would mean the current device)."""
    forked = []

    class Stop(Exception):
        pass

    def fork_rng(devices, **kwargs):
        forked.append(devices)
        raise Stop

    monkeypatch.setattr(torch.random, "fork_rng", fork_rng)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    for index, expected in [(0, [0]), (2, [2]), (None, [1])]:
        with pytest.raises(Stop):
            train.validate(mlp(), [], torch.device("cuda", index), cpu(), train.cross_entropy)
    assert forked == [[0], [2], [1]]
