"""FSDP2 against DDP: scripts/fsdp_vs_ddp.py under torchrun (2 ranks); course_lib.lessons.nb06 and the
notebook's inline byte count against course_lib.sharding, in process."""

import json
import math
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

from conftest import REPO
from course_lib import launcher, sharding
from course_lib.lessons import nb06

pytestmark = pytest.mark.versioned  # DDP and FSDP2 (fully_shard): make test-oldest runs it


def rows_on(rank: int, dim0: int, world: int) -> int:
    """Rows of a dim-0 split (torch.chunk) that `rank` holds: ceil(dim0 / W) each, the rest last."""
    c = math.ceil(dim0 / world)
    return max(0, min(c, dim0 - rank * c))


def test_launch_fsdp_shards_what_ddp_replicates(tmp_path):
    """One launch: exact bytes per rank (odd width: uneven shards), equal trained weights."""
    args = ["--out", tmp_path, "--width", "25", "--layers", "3", "--steps", "2", "--batch", "8"]
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if gpus < 2 and not sharding.trains_on_cpu():  # torch 2.6 on CPU: refused in one sentence
        with pytest.raises(launcher.LaunchError, match="RuntimeError"):
            launcher.launch("fsdp_vs_ddp", args, nproc=2, timeout_s=120, echo=False)
        return
    launcher.launch("fsdp_vs_ddp", args, nproc=2, timeout_s=120, echo=False)
    r = json.loads((tmp_path / "results.json").read_text())
    W, shapes, total = r["world_size"], r["shapes"], r["total_param_bytes"]
    n = len(shapes)  # parameter tensors: 3 weights, 3 biases
    assert (W, n) == (2, 6)
    assert total == 4 * sum(math.prod(s) for s in shapes) == 4 * r["n_params"]
    for rank in range(W):
        shard = 4 * sum(rows_on(rank, s[0], W) * math.prod(s[1:]) for s in shapes)
        assert r["per_rank"]["DDP"][rank] == dict(params=total, grads=total, optim=2 * total + 4 * n)
        assert r["per_rank"]["FSDP2"][rank] == dict(params=shard, grads=shard, optim=2 * shard + 4 * n)
    fsdp_params = [row["params"] for row in r["per_rank"]["FSDP2"]]
    assert sum(fsdp_params) == total  # the shards add up to the model, no copy twice
    assert fsdp_params[0] == sharding.shard_bytes(shapes, W) > fsdp_params[1]  # 13 rows vs 12
    assert r["worst_share"] <= 1 and r["max_abs_diff"] < r["max_change"] / 100  # equal, and moved
    assert r["losses"]["DDP"] == pytest.approx(r["losses"]["FSDP2"], rel=1e-5)


def test_inline_fake_group_matches_library():
    """The notebook's inline cell (plain PyTorch) gives the library's bytes for W = 8."""
    from torch.testing._internal.distributed.fake_pg import FakeStore

    W = 8
    dist.init_process_group("fake", rank=0, world_size=W, store=FakeStore())
    try:
        mesh = init_device_mesh("cpu", (W,))
        with torch.device("meta"):
            model = sharding.GPT2SmallShapes()
        for block in model.blocks:
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)
        local = [p.to_local() for p in model.parameters()]
        inline = sum(t.numel() * t.element_size() for t in local)
    finally:
        dist.destroy_process_group()
    rows = sharding.fake_world_bytes(sharding.GPT2SmallShapes, [W], units=(sharding.Block,))
    assert rows[1].params == inline
    with torch.device("meta"):
        shapes = [p.shape for p in sharding.GPT2SmallShapes().parameters()]
    assert inline == sharding.shard_bytes(shapes, W)
    assert rows[0].params == 4 * 124_401_408  # the stack's parameter count, fp32


# ---- the code on the page: what 06 shows is what its jobs run ----

NB06 = REPO / "notebooks" / "06_ddp.ipynb"


def code_cells(path: Path) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]


def test_the_script_cell_of_06_is_scripts_ddp_train():
    magic = '%%writefile "{TRAIN_SCRIPT}"\n'
    cells = [c for c in code_cells(NB06) if c.startswith(magic)]
    assert len(cells) == 1, "06 writes its training script from one cell"
    assert cells[0][len(magic):].rstrip("\n") + "\n" == (REPO / "scripts" / "ddp_train.py").read_text()


def test_time_ddp_steps_times_no_sync_without_communicating(tmp_path):
    """World size 1 (gloo, this process): plain, no_sync and ddp are timed; only the ddp steps
    hand buckets to the all-reduce (counted by a comm hook), the no_sync ones none."""
    from argparse import Namespace

    from torch.nn.parallel import DistributedDataParallel as DDP

    from course_lib import models

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        model = models.mlp(8, 16)
        ddp = DDP(model)
        reduced = []

        def count(state, bucket):  # the default all-reduce, counted
            reduced.append(bucket.index())
            fut = torch.futures.Future()
            fut.set_result(bucket.buffer())
            return fut

        ddp.register_comm_hook(None, count)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
        a = Namespace(batch=4, res=8, seed=0, bench_steps=2, bench_repeats=3)
        out = nb06.time_ddp_steps(a, model, ddp, opt, torch.device("cpu"))
    finally:
        dist.destroy_process_group()
    assert set(out["step_s"]) == {"plain", "no_sync", "ddp"}
    assert all(len(v) == 3 and min(v) > 0 for v in out["step_s"].values())
    buckets = len(set(reduced))
    per_call = max(2 // 100, 2) + 2  # Timer.timeit(n) runs max(n // 100, 2) warm-up steps, then n
    assert len(reduced) == (1 + 3) * per_call * buckets  # warm-up call + 3 calls, the ddp steps only


def test_waited_s_reads_the_failure_labs_line():
    lines = ["rank 0: step 2, all-reduce", "rank 0: waited 5.0 s in the all-reduce of step 2"]
    assert nb06.waited_s(lines) == 5.0
    assert nb06.waited_s(lines[:1]) is None
