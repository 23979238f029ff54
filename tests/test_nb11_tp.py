"""scripts/tensor_parallel.py under real torchrun (gloo ranks on the CPU): Megatron's MLP and
attention heads written out with collectives, and DTensor's MLP, equal to one process at 2 and 4
ranks; one all-reduce of (B, T, d) per block forward and one backward; a broken f fails the run."""

import json
import os
import subprocess
import sys

import pytest

from conftest import REPO
from course_lib import launcher

pytestmark = pytest.mark.versioned  # DTensor tensor parallelism: make test-oldest runs it

SMALL = dict(width=32, heads=8, batch=2, seq=8, repeats=2)  # hs = 4; 4 or 2 heads per rank
SCRIPT = REPO / "scripts" / "tensor_parallel.py"
MLP_PARAMS = {"w1", "b1", "w2", "b2"}
ATTENTION_PARAMS = {"wq", "bq", "wk", "bk", "wv", "bv", "wo", "bo"}


def _args(out, **over) -> list[str]:
    return [f"--{k}={v}" for k, v in {**SMALL, **over}.items()] + [f"--out={out}"]


def _check_equal_to_one_process(r: dict) -> None:
    """check.agreement rows merged over the ranks: the written-out MLP's and attention's output,
    input gradient and parameter gradients, DTensor's MLP against both; all close, with an atol
    of 1e-5 times the largest value compared."""
    checks, W = r["checks"], r["world_size"]
    whats = [c["what"] for c in checks]
    assert len(whats) == len(set(whats)) == 11
    for block, params in (("MLP", MLP_PARAMS), ("attention", ATTENTION_PARAMS)):
        assert {f"{block}: output vs one process", f"{block}: input gradient vs one process"} <= set(whats)
        [grads] = [w for w in whats if w.startswith(f"{block}: gradients of ")]
        assert set(grads.removeprefix(f"{block}: gradients of ").split(", each")[0].split(", ")) == params
    assert sum(w.startswith("DTensor's MLP: ") for w in whats) == 5
    B, T, d = SMALL["batch"], SMALL["seq"], SMALL["width"]
    by = {c["what"]: c for c in checks}
    assert by["MLP: output vs one process"]["elements"] == W * B * T * d  # every rank's output counted
    mlp_grads = next(c for w, c in by.items() if w.startswith("MLP: gradients of "))
    assert mlp_grads["elements"] == 8 * d * d + 4 * d + W * d  # the shards add up; b2 whole on every rank
    for c in checks:
        assert c["ok"] and c["over"] == 0, c
        scale = c["atol"] / r["atol_per_scale"]  # the largest value compared
        assert scale > 0 and (r["atol_per_scale"], c["rtol"]) == (1e-5, 1e-4)
        assert c["max_abs"] <= c["atol"] + c["rtol"] * scale  # |reference| <= scale
        assert 0 <= c["worst_share"] <= 1


def _check_all_reduces(r: dict) -> None:
    """One all-reduce of the (B, T, d) fp32 activations per block in the forward (g) and one in
    the backward (f), nothing else; what the script predicts; the same count for DTensor."""
    B, T, d, W = SMALL["batch"], SMALL["seq"], SMALL["width"], r["world_size"]
    call = dict(shape=[B, T, d], bytes=B * T * d * 4)
    for block in ("mlp", "attention"):
        assert r["all_reduces"][block] == dict(forward=[call], backward=[call])
    assert r["predicted"]["forward"] == r["predicted"]["backward"]
    [predicted] = r["predicted"]["forward"]
    assert predicted == dict(call, ring_bytes_sent_per_rank=2 * (W - 1) * call["bytes"] // W)
    assert r["dtensor_collectives"] == dict(forward=dict(all_reduce=1), backward=dict(all_reduce=1))


@pytest.mark.parametrize("nproc", [2, 4])
def test_tensor_parallel_equals_one_process(tmp_path, nproc):
    run = launcher.launch("tensor_parallel", _args(tmp_path), nproc=nproc, timeout_s=180, echo=False)
    assert run.ok
    r = json.loads((tmp_path / "results.json").read_text())
    assert (r["world_size"], r["backend"]) == (nproc, "gloo")
    _check_equal_to_one_process(r)
    _check_all_reduces(r)
    assert set(r["step_s"]) == {"tensor parallel", "one process"}
    for times in r["step_s"].values():
        assert len(times) == SMALL["repeats"] and all(t > 0 for t in times)


def test_without_f_all_reduce_the_input_gradient_is_wrong_and_the_run_fails(tmp_path):
    """Megatron's f, its backward all-reduce left out: each rank's input gradient covers only its
    own slice of the layer. The parameter gradients stay right; the input-gradient check fails."""
    text = SCRIPT.read_text()
    line = 'return all_reduce(grad, ctx.where, "backward"), None'
    assert text.count(line) == 1
    broken = tmp_path / "tensor_parallel.py"
    broken.write_text(text.replace(line, "return grad, None"))
    run = launcher.launch(broken, _args(tmp_path, repeats=0), nproc=2, timeout_s=180, echo=False,
                          check=False)
    assert not run.ok
    assert "AssertionError" in run.failure and "MLP: input gradient vs one process" in run.failure
    assert not (tmp_path / "results.json").exists()


def test_without_torchrun_one_sentence_names_torchrun(tmp_path):
    torchrun_sets = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                     "MASTER_PORT")
    env = {k: v for k, v in os.environ.items() if k not in torchrun_sets}
    done = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("RuntimeError: ") and "torchrun" in last
    assert not (tmp_path / "results.json").exists()


@pytest.mark.parametrize("block, has", [("f and g", "dist.all_reduce("),
                                        ("tensor-parallel MLP", "SumOverRanks.apply("),
                                        ("tensor-parallel attention", "attend(q, k, v, self.heads)"),
                                        ("DTensor", "parallelize_module(")])
def test_the_blocks_notebook_11_shows_are_marked(block, has):
    shown = launcher.source("tensor_parallel", block)
    assert has in shown
