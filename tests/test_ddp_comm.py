"""scripts/ddp_comm.py: one real torchrun launch (2 gloo ranks), then the facts its results.json
must hold; and its pure helpers, imported in-process."""

import importlib.util
import json
import sys

import pytest
import torch
import torch.nn as nn

from conftest import REPO
from course_lib import launcher, models

pytestmark = pytest.mark.versioned  # DDP's buckets, hooks and no_sync: make test-oldest runs it

SMALL = dict(width=64, layers=3, batch=8, k=2, iters=2, repeats=2)
TINY_CAP_MB = 0.01  # 10 KiB: below one 64×64 weight (16 KiB), above a bias (256 B)


def _script():
    """scripts/ddp_comm.py as a module (its main() only runs under torchrun)."""
    spec = importlib.util.spec_from_file_location("ddp_comm", REPO / "scripts" / "ddp_comm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---- the launch: every fact from one run -----------------------------------------------------

def _check_collectives(res: dict) -> None:
    ranks = res["collectives"]
    assert [r["rank"] for r in ranks] == [0, 1]
    before = [r["ops"]["all_reduce"]["before"] for r in ranks]
    assert before == [[0, 1, 2, 3], [10, 11, 12, 13]]  # arange(2W) + 10·rank
    total = [a + b for a, b in zip(*before)]
    for r, row in enumerate(ranks):
        ops = row["ops"]
        assert all(ops[name]["before"] == before[r] for name in ops)
        assert ops["all_reduce"]["after"] == total
        assert ops["broadcast"]["after"] == before[0]
        assert ops["all_gather"]["after"] == before[0] + before[1]
        assert ops["reduce_scatter"]["after"] == total[2 * r:2 * r + 2]


def _check_buckets(res: dict) -> int:
    """Returns the default bucket count."""
    tiny, default = res["buckets"]
    assert tiny["cap_mb"] == TINY_CAP_MB and default["cap_mb"] is None
    for run in (tiny, default):
        assert len(run["iters"]) == SMALL["iters"]
        for it in run["iters"]:
            sizes = [b["bytes"] for b in it["buckets"]]
            assert sum(sizes) == res["param_bytes"]  # every gradient in exactly one bucket
            assert [b["index"] for b in it["buckets"]] == list(range(len(sizes)))
            ready = [b["ready_s"] for b in it["buckets"]]
            assert ready == sorted(ready) and 0 < ready[0] and ready[-1] <= it["ddp_s"]
            assert it["compute_s"] > 0
        assert [b["bytes"] for b in run["iters"][-1]["buckets"]] == run["reported_sizes"]
    n_tiny = len(tiny["iters"][-1]["buckets"])
    n_default = len(default["iters"][-1]["buckets"])
    assert n_tiny == SMALL["layers"] > n_default == 1  # one per layer; all 50 KiB in one
    assert res["param_bytes"] == SMALL["layers"] * (SMALL["width"] + 1) * SMALL["width"] * 4
    return n_default


def _check_gradients(row: dict) -> None:
    """A check.agreement row: every element within atol = 1e-5·max|g|, rtol 1e-5."""
    assert row["ok"] and row["over"] == 0 and row["worst_share"] <= 1
    assert row["max_abs"] <= row["atol"] and row["atol"] > 0 and row["rtol"] == 1e-5
    assert row["elements"] == sum((w + 1) * w for w in [SMALL["width"]] * SMALL["layers"])


def test_one_launch_collectives_buckets_overlap_and_no_sync(tmp_path):
    caps = ["--caps", str(TINY_CAP_MB)]
    args = [f"--{k}={v}" for k, v in SMALL.items()] + caps + [f"--out={tmp_path}"]
    run = launcher.launch("ddp_comm", args, timeout_s=120, echo=False)
    assert run.ok
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["world_size"] == 2 and res["backend"] == "gloo"

    _check_collectives(res)
    lines = run.rank_lines(1)  # each rank prints its own before/after
    assert any("all_reduce" in ln and "[10, 11, 12, 13] -> [10, 12, 14, 16]" in ln for ln in lines)

    n_default = _check_buckets(res)

    overlap = res["overlap"]
    assert len(overlap["checks"]) == 2  # each DDP against compute-then-communicate
    for row in overlap["checks"]:
        _check_gradients(row)
    assert set(overlap["step_s"]) == {f"DDP, bucket_cap_mb {TINY_CAP_MB:g} MiB",
                                      "DDP, bucket_cap_mb default", "compute, then one all-reduce"}
    for times in overlap["step_s"].values():
        assert len(times) == SMALL["repeats"] and all(t > 0 for t in times)

    ns = res["no_sync"]
    assert ns["buckets"] == n_default
    assert ns["calls_without"] == SMALL["k"] * n_default  # an all-reduce per micro-batch
    assert ns["calls_with"] == n_default  # only the last micro-batch's backward
    _check_gradients(ns["check"])
    assert len(ns["step_s"]) == 2
    assert all(len(ts) == SMALL["repeats"] for ts in ns["step_s"].values())


# ---- pure helpers ----------------------------------------------------------------------------

def test_deep_mlp_is_linear_layers_only():
    mlp = models.deep_mlp(width=16, layers=3)
    assert sum(isinstance(m, nn.Linear) for m in mlp) == 3
    assert not any(isinstance(m, (nn.BatchNorm1d, nn.LayerNorm, nn.Dropout)) for m in mlp)
    assert mlp(torch.randn(5, 16)).shape == (5, 16)


def test_compare_passes_rounding_and_fails_beyond_the_tolerance():
    mod = _script()
    g = torch.linspace(-1, 1, 101)
    ok = mod.compare("same", g * (1 + 1e-7), g)
    assert ok["ok"] and ok["elements"] == 101 and ok["atol"] == pytest.approx(1e-5)  # 1e-5·max|g|
    assert set(ok) == {"what", "max_abs", "worst_share", "over", "elements", "atol", "rtol", "ok"}
    with pytest.raises(AssertionError, match="off: max"):  # the row's own line
        mod.compare("off", g + 1e-3, g)


def test_clock_counts_seconds_from_its_first_mark_on_the_cpu():
    clock = _script().Clock(torch.device("cpu"))
    for _ in range(3):
        clock.mark()
    secs = clock.seconds()
    assert secs[0] == 0 and secs == sorted(secs) and len(secs) == 3


def test_parse_refuses_k_that_does_not_divide_the_batch(monkeypatch):
    mod = _script()
    monkeypatch.setattr(sys, "argv", ["ddp_comm.py", "--batch", "10", "--k", "4"])
    with pytest.raises(ValueError):
        mod.parse()
