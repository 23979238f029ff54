"""Tests for course_lib.train and course_lib.checkpoint (CPU, tiny models)."""

from __future__ import annotations

import copy
import importlib.util
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from course_lib import checkpoint, data, device, models, train
from course_lib.checkpoint import CheckpointError
from course_lib.data import make_loader
from course_lib.train import TrainConfig

pytestmark = pytest.mark.versioned  # AMP, torch.compile, RNG state on resume: make test-oldest runs it

HERE = Path(__file__).parent
_spec = importlib.util.spec_from_file_location("_resume_worker", HERE / "_resume_worker.py")
worker = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(worker)


def mlp(seed: int = 0, d_in: int = 8, classes: int = 3) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(d_in, 16), nn.Tanh(), nn.Linear(16, classes))


def separable(n: int = 64, d: int = 8, seed: int = 0) -> TensorDataset:
    """Labels from a fixed linear rule: learnable in a few dozen steps."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    return TensorDataset(x, (x @ torch.randn(d, 3, generator=g)).argmax(1))


def cpu(**kwargs) -> TrainConfig:
    return TrainConfig(device="cpu", **kwargs)


# -- exact resume in a fresh process ---------------------------------------------------

@pytest.fixture(scope="module")
def resume_runs(tmp_path_factory):
    """Straight runs in this process; k steps here, the rest in ONE fresh process."""
    tmp = tmp_path_factory.mktemp("resume")
    straight, jobs = {}, []
    for case, spec in worker.CASES.items():
        model, loader = worker.build(case)
        val = worker.val_loader(case)
        history = train.fit(model, loader, worker.config(case), val_loader=val)
        straight[case] = (model.state_dict(), history)
        model, loader = worker.build(case)
        ckpt = tmp / f"{case}.pt"
        train.fit(model, loader, worker.config(case, max_steps=spec["split"], checkpoint_path=ckpt),
                  val_loader=val)
        jobs.append([case, str(ckpt), str(tmp / f"{case}.out.pt")])
    (tmp / "jobs.json").write_text(json.dumps(jobs))
    proc = subprocess.run([sys.executable, str(HERE / "_resume_worker.py"), str(tmp / "jobs.json")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    resumed = {case: torch.load(out, weights_only=True) for case, _, out in jobs}
    return straight, resumed


@pytest.mark.parametrize("case", list(worker.CASES))
def test_resume_in_fresh_process_is_bitwise_identical(resume_runs, case):
    straight, resumed = resume_runs
    state, history = straight[case]
    again = resumed[case]
    assert 0 < worker.CASES[case]["split"] < len(history.step)
    assert state.keys() == again["state"].keys()
    for name, tensor in state.items():
        assert torch.equal(tensor, again["state"][name]), f"{case}: {name} differs"
    assert again["step"] == history.step == list(range(1, len(history.step) + 1))  # none lost/repeated
    assert again["loss"] == history.loss  # the same batches, dropout masks and updates
    assert again["skipped"] == history.skipped_steps
    assert again["val_loss"] == history.val_loss


def test_resumed_weights_differ_from_fresh_init():
    """Guard for the test above: the worker's initial weights really are different."""
    a, _ = worker.build("plain", init_seed=0)
    b, _ = worker.build("plain", init_seed=999)
    assert not torch.equal(a[0].weight, b[0].weight)


# -- learning, accumulation, clipping, AMP ---------------------------------------------

def test_loss_decreases_and_history_is_complete():
    data = separable()
    val = DataLoader(data, batch_size=32)
    history = train.fit(mlp(), make_loader(data, 8), cpu(epochs=6, lr=0.02, log_every=5),
                        val_loader=val)
    n = len(history.step)
    assert n == 6 * 8
    assert sum(history.loss[-5:]) / 5 < 0.5 * sum(history.loss[:5]) / 5
    assert len(history.loss) == len(history.lr) == len(history.step_time_s) == n
    assert history.samples == 6 * 64 and history.targets == 6 * 64
    assert history.val_step == [8 * e for e in range(1, 7)] and history.val_epoch[-1] == 6
    assert history.val_accuracy[-1] > 0.8
    assert 0 <= history.data_wait_share < 1 and history.samples_per_s > 0
    assert "samples/s" in history.summary()


def test_forward_backward_weights_unequal_micro_batches_like_one_batch():
    data = separable(n=8)
    x, y = data.tensors
    big, small = mlp(), mlp()
    train.forward_backward(big, [(x, y)])
    groups = [(x[:3], y[:3]), (x[3:6], y[3:6]), (x[6:], y[6:])]  # sizes 3, 3, 2
    loss = train.forward_backward(small, groups)
    assert torch.allclose(loss, F.cross_entropy(big(x), y), atol=1e-6)
    for p, q in zip(big.parameters(), small.parameters()):
        assert torch.allclose(p.grad, q.grad, atol=1e-6)


def test_accumulation_matches_big_batch_including_partial_last_group():
    data = separable(n=20)  # micro 4 x accum 2: groups of 2, 2, 1 micro-batches
    runs = {}
    for batch, accum in [(8, 1), (4, 2)]:
        model = mlp()
        train.fit(model, make_loader(data, batch),
                  cpu(optimizer="sgd", lr=0.5, momentum=0.0, accum_steps=accum))
        runs[accum] = model
    for p, q in zip(runs[1].parameters(), runs[2].parameters()):
        assert torch.allclose(p, q, atol=1e-6)
    assert not torch.equal(runs[1][0].weight, mlp()[0].weight)  # training happened


def test_clipping_bounds_the_gradient_norm():
    model = mlp()
    history = train.fit(model, make_loader(separable(), 64),
                        cpu(max_steps=1, clip_grad_norm=1e-3, optimizer="sgd"))
    norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in model.parameters()]))
    assert history.grad_norm[0] > 1e-3  # it needed clipping ...
    assert norm <= 1e-3 * (1 + 1e-4)  # ... and the step used the clipped gradient


def test_fp16_overflow_steps_are_skipped_and_counted():
    model = mlp()
    before = [p.detach().clone() for p in model.parameters()]
    huge = lambda out, y: F.cross_entropy(out, y) * 1e5  # scaled grads overflow fp16
    history = train.fit(model, make_loader(separable(), 16), cpu(max_steps=4, amp="fp16"),
                        loss_fn=huge)
    assert history.skipped_steps == [1, 2, 3, 4]
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_amp_for_picks_bf16_where_native_fp16_on_older_gpus_and_off_on_plain_cpus(monkeypatch):
    for capability, want in (((8, 0), "bf16"), ((7, 5), "fp16")):  # an A100; a T4
        monkeypatch.setattr(device, "bf16_supported", lambda dev, c=capability: device.bf16_native(c))
        assert train.amp_for("cuda") == want and train.amp_for("cuda:0") == want
    assert train.amp_for("cpu", ["avx2", "avx512_bf16"]) == "bf16"
    assert train.amp_for("cpu", ["avx2", "amx_bf16"]) == "bf16"
    assert train.amp_for("cpu", ["avx2", "avx512_fp16"]) == "off"  # fp16 instructions only
    assert train.amp_for("cpu", []) == "off"
    assert train.amp_for("meta") == "off"


@pytest.mark.parametrize("amp", ["off", "bf16", "fp16"])
def test_fit_steps_like_the_loop_a_learner_types(amp):
    """Notebook 08's check on a tiny GPT: autocast in `amp`'s format, a GradScaler enabled only
    for fp16, each micro-batch's loss / k, unscale_ before clipping, scaler.step, scaler.update,
    fused AdamW with decay on matrices only. fit must take the same steps."""
    cfg = models.GPTConfig(vocab_size=23, block_size=8, n_layer=2, n_head=2, n_embd=16)
    tokens = torch.randint(0, 23, (32 * 8 + 1,), generator=torch.Generator().manual_seed(0))
    loader = data.TensorLoader(tokens[:-1].view(32, 8), tokens[1:].view(32, 8), 4, seed=0, drop_last=True)
    steps, k, clip = 4, 2, 1.0
    torch.manual_seed(0)
    mine = models.GPT(cfg)
    opt = torch.optim.AdamW(train.param_groups(mine, 0.1, matrices_only=True), lr=0.01,
                            betas=(0.9, 0.95), fused=True)
    scaler = torch.amp.GradScaler("cpu", enabled=amp == "fp16")
    dtype = torch.float16 if amp == "fp16" else torch.bfloat16
    loader.batch_sampler.set_epoch(0)
    batches, losses = iter(loader), []
    for _ in range(steps):
        total = 0.0
        for x, y in [next(batches) for _ in range(k)]:
            with torch.autocast("cpu", dtype=dtype, enabled=amp != "off"):
                loss = F.cross_entropy(mine(x).flatten(0, 1), y.flatten()) / k
            scaler.scale(loss).backward()
            total += loss.detach()
        scaler.unscale_(opt)
        nn.utils.clip_grad_norm_(mine.parameters(), clip)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        losses.append(total.item())
    torch.manual_seed(0)
    theirs = models.GPT(cfg)
    history = train.fit(theirs, loader, cpu(amp=amp, max_steps=steps, accum_steps=k, lr=0.01,
                                            weight_decay=0.1, betas=(0.9, 0.95), fused=True,
                                            decay_matrices_only=True, clip_grad_norm=clip,
                                            log_every=1))
    assert history.loss == pytest.approx(losses, rel=1e-6, abs=1e-6)
    for p, q in zip(mine.parameters(), theirs.parameters()):
        torch.testing.assert_close(q, p, atol=1e-6, rtol=1e-5)
    assert scaler.is_enabled() == (amp == "fp16")
    assert not history.skipped_steps and scaler.get_scale() == (2.0**16 if amp == "fp16" else 1.0)


def test_bf16_trains_on_cpu():
    history = train.fit(mlp(), make_loader(separable(), 8), cpu(epochs=4, amp="bf16", lr=0.02))
    assert history.loss[-1] < history.loss[0] and not history.skipped_steps


def test_language_model_batches_and_loss():
    torch.manual_seed(0)
    tokens = torch.randint(0, 11, (16, 9))
    data = TensorDataset(tokens[:, :-1], tokens[:, 1:])  # (B, T) inputs and next-token targets
    model = nn.Sequential(nn.Embedding(11, 8), nn.Linear(8, 11))  # logits (B, T, V)
    history = train.fit(model, make_loader(data, 4), cpu(epochs=2))
    assert history.targets == 2 * 16 * 8 and history.samples == 2 * 16
    logits, targets = torch.randn(2, 5, 11), torch.randint(0, 11, (2, 5))
    expected = F.cross_entropy(logits.reshape(10, 11), targets.reshape(10))
    assert torch.allclose(train.cross_entropy(logits, targets), expected)


def test_padding_targets_carry_no_weight_in_accumulation_or_counts():
    """Micro-batches padded to their own length (-100 targets) == one batch of every real target."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(11, 8), nn.Linear(8, 11))
    lengths = [[9, 3, 5], [2, 2]]  # real targets per row, in two micro-batches

    def micro(rows: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        T = max(rows)
        x = torch.randint(0, 11, (len(rows), T))
        y = torch.randint(0, 11, (len(rows), T))
        for r, n in enumerate(rows):
            y[r, n:] = train.IGNORE_INDEX
        return x, y

    group = [micro(rows) for rows in lengths]
    ref = copy.deepcopy(model)
    logits = torch.cat([ref(x).flatten(0, 1) for x, _ in group])
    targets = torch.cat([y.flatten() for _, y in group])
    F.cross_entropy(logits, targets).backward()  # the mean over all 21 real targets
    train.forward_backward(model, group)
    for p, q in zip(ref.parameters(), model.parameters()):
        assert torch.allclose(p.grad, q.grad, atol=1e-6)
    history = train.fit(model, group, cpu(max_steps=2, accum_steps=1, log_every=1))
    assert history.targets == 21  # padding is not counted as trained-on tokens
    loss, _ = train.evaluate(model, group, "cpu")
    mean = sum(F.cross_entropy(model(x).flatten(0, 1), y.flatten(), reduction="sum").item()
               for x, y in group) / 21
    assert abs(loss - mean) < 1e-5


def test_evaluate_reports_loss_and_accuracy_and_restores_mode():
    model = nn.Linear(2, 2, bias=False)
    with torch.no_grad():
        model.weight.copy_(torch.eye(2))
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    y = torch.tensor([0, 1, 1, 1])  # 3 of 4 correct
    model.train()
    loss, acc = train.evaluate(model, DataLoader(TensorDataset(x, y), batch_size=3))
    assert acc == pytest.approx(0.75) and loss == pytest.approx(F.cross_entropy(x, y).item())
    assert model.training


def test_warmup_cosine_shape():
    f = train.warmup_cosine(warmup=4, total=20, min_ratio=0.1)
    assert f(0) == pytest.approx(0.25) and f(3) == pytest.approx(1.0)
    assert f(12) == pytest.approx(0.55) and f(20) == pytest.approx(0.1) and f(99) == pytest.approx(0.1)
    with pytest.raises(ValueError, match="warmup"):
        train.warmup_cosine(10, 5)


@pytest.mark.parametrize("bad", [dict(amp="fp8"), dict(optimizer="lamb"), dict(accum_steps=0),
                                 dict(checkpoint_every=5), dict(clip_grad_norm=-1.0)])
def test_bad_config_is_one_clear_error(bad):
    with pytest.raises(ValueError) as err:
        TrainConfig(**bad)
    assert str(err.value).endswith(".") and "\n" not in str(err.value)


def test_param_groups_decay_matrices_only():
    model = nn.Sequential(nn.Embedding(10, 8), nn.Linear(8, 8), nn.LayerNorm(8))
    everything, split = train.param_groups(model, 0.1), train.param_groups(model, 0.1, True)
    assert len(everything) == 1 and everything[0]["weight_decay"] == 0.1
    decay, none = split
    assert {id(p) for p in decay["params"]} == {id(model[0].weight), id(model[1].weight)}
    assert {id(p) for p in none["params"]} == {id(model[1].bias), id(model[2].weight), id(model[2].bias)}
    assert (decay["weight_decay"], none["weight_decay"]) == (0.1, 0.0)


def test_adamw_settings_reach_the_optimizer():
    model = mlp()
    opt = train.make_optimizer(model, cpu(weight_decay=0.1, betas=(0.9, 0.95), fused=True,
                                          decay_matrices_only=True))
    assert [g["weight_decay"] for g in opt.param_groups] == [0.1, 0.0]
    assert all(g["betas"] == (0.9, 0.95) and g["fused"] for g in opt.param_groups)
    assert not train.make_optimizer(model, cpu()).defaults["fused"]


def test_fused_adamw_trains_like_the_default_implementation():
    runs = []
    for fused in (False, True):
        model = mlp()
        train.fit(model, make_loader(separable(), 8), cpu(max_steps=6, fused=fused, weight_decay=0.1))
        runs.append(model.state_dict())
    for name in runs[0]:
        torch.testing.assert_close(runs[1][name], runs[0][name], atol=1e-6, rtol=1e-5)


def test_validation_every_n_steps_and_at_the_end():
    ds = separable()
    h = train.fit(mlp(), make_loader(ds, 8), cpu(epochs=2, eval_every=3),
                  val_loader=make_loader(ds, 16, shuffle=False))
    assert h.val_step == [3, 6, 8, 9, 12, 15, 16]  # every 3 steps, each epoch's end (8, 16) once
    assert len(h.val_loss) == len(h.val_epoch) == 7 and h.val_epoch[2] == 1.0
    with pytest.raises(ValueError):
        TrainConfig(eval_every=0)


def test_compile_switch_goes_through_torch_compile(monkeypatch):
    calls = []
    monkeypatch.setattr(torch, "compile", lambda model, mode=None: calls.append(mode) or model)
    train.fit(mlp(), make_loader(separable(), 32), cpu(compile=True, compile_mode="default"))
    assert calls == ["default"]


# -- checkpoint files ----------------------------------------------------------------------

def test_checkpoints_every_n_steps_and_at_the_end(tmp_path, monkeypatch):
    saved = []
    real = checkpoint.save_checkpoint
    monkeypatch.setattr(checkpoint, "save_checkpoint", lambda p, s: saved.append(s["step"]) or real(p, s))
    path = tmp_path / "ckpt.pt"
    train.fit(mlp(), make_loader(separable(), 8),
              cpu(max_steps=7, checkpoint_path=path, checkpoint_every=3))
    assert saved == [3, 6, 7]
    state = checkpoint.load_checkpoint(path)
    assert state["step"] == 7 and state["epoch"] == 0 and state["batch"] == 7


def test_corrupt_or_foreign_checkpoint_raises_checkpoint_error(tmp_path):
    good = tmp_path / "good.pt"
    train.fit(mlp(), make_loader(separable(), 8), cpu(max_steps=2, checkpoint_path=good))
    truncated, garbage, foreign, code = (tmp_path / n for n in ("t.pt", "g.pt", "f.pt", "c.pt"))
    truncated.write_bytes(good.read_bytes()[:200])
    garbage.write_bytes(b"not a checkpoint at all")
    torch.save({"weights": torch.zeros(3)}, foreign)
    torch.save(nn.Linear(2, 2), code)  # a pickled module: refused by weights_only
    for path in (truncated, garbage, code, tmp_path / "missing.pt"):
        with pytest.raises(CheckpointError) as err:
            checkpoint.load_checkpoint(path)
        assert "\n" not in str(err.value)
    for path in (foreign, truncated):
        with pytest.raises(CheckpointError):
            train.fit(mlp(), make_loader(separable(), 8), cpu(), resume_from=path)
    with pytest.raises(CheckpointError, match="batch_size=8, this run has batch_size=16"):
        train.fit(mlp(), make_loader(separable(), 16), cpu(), resume_from=good)
    with pytest.raises(CheckpointError, match="does not fit"):
        train.fit(mlp(classes=5), make_loader(separable(), 8), cpu(), resume_from=good)


def test_interrupted_save_leaves_old_checkpoint_and_no_partial_file(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.pt"
    checkpoint.save_checkpoint(path, {"step": 1, "w": torch.ones(4)})
    real_save = torch.save

    def crash_after_writing(obj, f, *args, **kwargs):
        real_save(obj, f, *args, **kwargs)  # the temp file is fully written ...
        raise KeyboardInterrupt  # ... then the process is interrupted before the rename

    monkeypatch.setattr(torch, "save", crash_after_writing)
    with pytest.raises(KeyboardInterrupt):
        checkpoint.save_checkpoint(path, {"step": 2, "w": torch.zeros(4)})
    monkeypatch.undo()
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.pt"]
    state = checkpoint.load_checkpoint(path)
    assert state["step"] == 1 and torch.equal(state["w"], torch.ones(4))


def test_rng_capture_and_restore_round_trip(tmp_path):
    import random

    import numpy as np

    checkpoint.seed_everything(5)
    path = checkpoint.save_checkpoint(tmp_path / "rng.pt", {"rng": checkpoint.capture_rng()})
    first = (torch.rand(3), random.random(), np.random.rand())
    checkpoint.restore_rng(checkpoint.load_checkpoint(path)["rng"])
    second = (torch.rand(3), random.random(), np.random.rand())
    assert torch.equal(first[0], second[0]) and first[1:] == second[1:]


def test_plain_loader_resume_warns_and_keeps_step_count(tmp_path):
    data, path = separable(n=32), tmp_path / "plain.pt"
    loader = DataLoader(data, batch_size=4)  # not from make_loader, unshuffled
    straight = mlp()
    train.fit(straight, loader, cpu())
    train.fit(mlp(), loader, cpu(max_steps=3, checkpoint_path=path))
    resumed = mlp(seed=1)
    with pytest.warns(UserWarning, match="make_loader"):
        history = train.fit(resumed, loader, cpu(), resume_from=path)
    assert history.step == list(range(1, 9))
    assert all(torch.equal(p, q) for p, q in zip(straight.parameters(), resumed.parameters()))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("amp", ["off", "fp16", "bf16"])
def test_cuda_training_and_resume(tmp_path, amp):
    data, path = separable(), tmp_path / "cuda.pt"
    cfg = dict(device="cuda", amp=amp, epochs=2, lr=0.02, channels_last=True)
    straight = mlp()
    history = train.fit(straight, make_loader(data, 8, pin_memory=True), TrainConfig(**cfg))
    train.fit(mlp(), make_loader(data, 8), TrainConfig(**cfg, max_steps=5, checkpoint_path=path))
    resumed = mlp(seed=1)
    again = train.fit(resumed, make_loader(data, 8), TrainConfig(**cfg), resume_from=path)
    assert history.loss[-1] < history.loss[0] and again.step == history.step
    for p, q in zip(straight.parameters(), resumed.parameters()):
        assert torch.allclose(p, q, atol=1e-5)  # same kernels, so normally bitwise equal


def test_batches_must_be_pairs():
    data = [{"x": torch.randn(2, 8), "y": torch.zeros(2, dtype=torch.long)}]
    with pytest.raises(ValueError, match="pairs"):
        train.fit(mlp(), data, cpu())


@pytest.mark.parametrize("stop", [False, True])
def test_stop_on_nan_ends_a_run_at_its_first_nan_loss(stop):
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    with torch.no_grad():
        model.weight[0, 0] = float("nan")  # every loss NaN from the first step
    x, y = torch.randn(32, 4), torch.arange(32) % 2
    cfg = TrainConfig(epochs=1, max_steps=6, log_every=2, stop_on_nan=stop, device="cpu", optimizer="sgd")
    h = train.fit(model, data.TensorLoader(x, y, 4), cfg)
    assert not math.isfinite(h.loss[0])
    assert h.step == ([1, 2] if stop else [1, 2, 3, 4, 5, 6])  # stops at the first record, step log_every


def test_a_monitor_puts_utilisation_and_memory_beside_the_throughput_on_the_bar(monkeypatch):
    """The live view: each log shows the sampler's latest reading in the progress bar."""
    from course_lib import utilisation
    shown = []
    real_show = train.show
    monkeypatch.setattr(train, "show", lambda bar, h, monitor=None: (real_show(bar, h, monitor),
                                                                     shown.append(str(bar.postfix))))
    with utilisation.Sampler("cpu", interval_s=0.01) as watch:
        deadline = time.monotonic() + 30  # a reading before the first log, however busy the machine
        while not watch.samples and time.monotonic() < deadline:  # (CI once took no reading in 50 ms)
            time.sleep(0.01)
        history = train.fit(mlp(), make_loader(separable(), 8), cpu(epochs=1, log_every=2, progress=True),
                            monitor=watch)
    assert history.step and shown and watch.samples
    assert all(k in shown[-1] for k in ("loss=", "targets/s=", "busy=", "memory="))
