"""FSDP2 against DDP: scripts/fsdp_vs_ddp.py under torchrun (2 ranks); course_lib.lessons.nb06 and the
notebook's inline byte count against course_lib.sharding, in process; the text of 06's reports."""

import dataclasses
import json
import math
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

from conftest import REPO
from course_lib import bench, launcher, sharding, verdicts
from course_lib.launcher import Run
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
    row = r["agreement"]  # check.agreement's row: every weight within atol 1e-6 + rtol 1e-5·|w|
    assert row["ok"] and row["elements"] == r["n_params"] and (row["atol"], row["rtol"]) == (1e-6, 1e-5)
    assert row["max_abs"] < r["max_change"] / 100  # equal, and moved
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


# ---- the text of 06's reports: each function returns what a cell prints ----

def _timing(name, ms, turns="t", work=None):
    return bench.timing_of([ms / 1e3 * f for f in (0.98, 1.0, 1.02)], name=name, device="cpu",
                           turns_id=turns, work=work, unit="img/s" if work else "")


def test_jobs_note_names_the_ranks_and_why_the_cpu():
    assert nb06.ranks_label(4, "nccl") == "4 ranks on one GPU each (nccl)"
    note = nb06.jobs_note(2, "gloo", 1, "gpu", Path("/x"))
    assert note.startswith("Fewer than 2 GPUs") and "One GPU: NCCL cannot place 2 ranks" in note
    assert note.endswith("jobs: 2 ranks on the CPU (gloo), 1 thread per rank (OMP_NUM_THREADS=1); files in /x")
    assert nb06.jobs_note(2, "nccl", 2, "gpu", Path("/x")).count("\n") == 0  # GPUs enough: one line


def test_sampler_table_and_notes_say_what_padding_and_drop_last_do():
    padded = nb06.rank_orders(5, 2, 2, drop_last=False)
    table = nb06.fmt_orders({True: padded, False: padded})
    assert table.splitlines()[0] == "with set_epoch: True" and table.count("  epoch 1  rank 0: ") == 2
    perms = [e[0] for e in nb06.rank_orders(5, 1, 2)]
    repeat, drop = nb06.sampler_notes(5, 2, padded, perms).splitlines()
    first = perms[0][0]  # padding repeats the permutation's first index, on rank 0 and on the last rank
    assert repeat == f"2 ranks × 3 = 6 places for 5 indices: epoch 0 repeats {first} on ranks 0 and 1"
    assert drop == f"drop_last=True (the training script): 2 indices per rank; epoch 0 skips {perms[0][4:]}"
    assert nb06.sampler_notes(4, 2, nb06.rank_orders(4, 2, 1, drop_last=False), [[0, 1, 2, 3]]).startswith(
        "4 = 2 × 2: no padding")


def test_rig_and_launch_notes():
    assert nb06.rig_label(dict(world_size=2, backend="gloo", device="cpu", threads=1)) == \
        "2 ranks, gloo, cpu, 1 thread(s) per rank"
    run = Run(["torchrun", "x.py"], 0, 3.25)
    assert nb06.launch_note(run) == "$ torchrun x.py\nfinished in 3.2 s (wall clock, start-up included)"
    assert "1.5 s of it in the script (rank 0)" in nb06.launch_note(run, 1.5)
    assert nb06.fsdp_launched(run, 2) == nb06.launch_note(run)
    assert "so the launch is skipped" in nb06.fsdp_launched(None, 2)


def _comm():
    it = lambda: dict(compute_s=0.002, ddp_s=0.005, buckets=[dict(bytes=1024, params=2, ready_s=0.001),  # noqa: E731
                                                            dict(bytes=2048, params=2, ready_s=0.003)])
    return dict(layers=2, width=16, param_bytes=3072, param_tensors=4,
                buckets=[dict(label="0.1 MiB", iters=[it(), it()])])


def test_bucket_report_tables_each_cap_and_what_overlapped():
    span = lambda t: (t, t * 0.9, t * 1.1)  # noqa: E731
    timeline = {"0.1 MiB": (span(0.002), span(0.005), [span(0.001), span(0.003)])}
    text = nb06.bucket_report(_comm(), timeline, "rig")
    assert "model: 2 × Linear(16, 16), 3.0 KiB of fp32 gradients in 4 tensors | rig | 2 logged" in text
    assert "bucket_cap_mb 0.1 MiB: backward 5.00 ms with DDP, 2.00 ms compute only (no_sync)" in text
    assert "       1 |   2.0 KiB |       2 |      3.00 ms (2.70–3.30)" in text
    assert "1 of 2 buckets went to the all-reduce while backward was still computing (at 1.00 ms;" in text
    assert "backward returned 2.00 ms after the last hand-off" in text
    assert "the last gradient came later than in every compute-only pass" in text  # 2.7 ms > 2.2 ms
    one = {"default": (span(0.002), span(0.005), [span(0.003)])}
    assert "one bucket, handed over with the last gradient at 3.00 ms: nothing could overlap" in \
        nb06.bucket_report(dict(_comm(), buckets=[dict(label="default", iters=[
            {"buckets": [dict(bytes=3072, params=4)]}])]), one, "rig")


def test_overlap_and_no_sync_verdicts_follow_the_paired_ratio():
    span = lambda t: (t, t, t)  # noqa: E731
    timeline = {"a": (span(1), span(2), [span(0.5), span(1)]), "b": (span(1), span(2), [span(1)])}
    after = _timing("compute, then one all-reduce", 10)
    steps = {"DDP a": _timing("DDP a", 5), "DDP b": _timing("DDP b", 10.1)}
    ratios = {"a": bench.speedup(after, steps["DDP a"]), "b": bench.speedup(after, steps["DDP b"])}
    text = nb06.overlap_verdicts(steps, after, ratios, timeline, "rig", 3)
    assert text.splitlines()[0].startswith("DDP a") and "here: rig," in text
    assert "bucket_cap_mb a (1 bucket(s) sent during backward): 2.00× as fast as compute-then-reduce" in text
    assert "about 5.0 ms less per step" in text
    assert "\nDDP a vs DDP b: 2.02×" in text  # the two caps against each other, DDP a the faster
    assert "bucket_cap_mb b (0 bucket(s) sent during backward): nothing overlapped" in text
    bucket_fig = nb06.published.get("pytorch_ddp_benchmark_bucket_cap_1_vs_25_mb")
    assert text.index("nothing overlapped") < text.index("published by") and bucket_fig.figure in text  # own block
    on_gpus = nb06.overlap_verdicts(steps, after, ratios, timeline, "2 ranks, nccl, NVIDIA H100", 3)
    assert "published by" not in on_gpus  # the learner's GPUs measured it: nothing stands in for them
    each, once = _timing("each", 20), _timing("once", 10)
    saving = nb06.no_sync_saving(each, once, bench.speedup(each, once), 3, 4, "rig")
    ratio = bench.speedup(each, once)
    lo, hi = (20 * (1 - 1 / r) for r in (ratio.lo, ratio.hi))
    assert saving.endswith(f"here (rig): 3 fewer bucket all-reduces per step saved about 10 ms ({lo:.0f}–{hi:.0f} "
                           "over the ratio's interval, applied to the 20 ms step), 3 ms per micro-batch that skipped "
                           "its all-reduce")
    same = nb06.no_sync_saving(each, each, bench.speedup(each, each), 3, 4, "rig")
    assert same.endswith("3 fewer all-reduces per step saved nothing these repeats resolve")


def _fres():
    ddp = dict(params=800, grads=800, optim=1600)
    fsdp = dict(params=400, grads=400, optim=800)
    return dict(world_size=2, total_param_bytes=800, layers=1, width=10, n_params=200, shapes=[[10, 10], [10], 0],
                backend="gloo", per_rank=dict(DDP=[ddp, ddp], FSDP2=[fsdp, fsdp]), max_change=1e-3,
                agreement=dict(max_abs=0.0))


def test_fsdp_texts():
    table = nb06.fsdp_table(_fres())
    assert "MLP: 1 × Linear(10, 10), 200 parameters in 3 tensors, fp32: 800 B (800 B); 2 ranks, gloo" in table
    assert table.count("0.5000") == 6 + 1  # six rows and rank 0 in all
    assert "every dim 0 here divides by W." in table
    assert nb06.fmt_b(6_303_744) == "6,303,744 B (6.0 MiB)"
    assert "bit-identical here" in nb06.fsdp_weights_note(_fres())
    assert "bit-identical" not in nb06.fsdp_weights_note(dict(_fres(), agreement=dict(max_abs=1e-9)))
    assert nb06.shards_note([("w", (8, 2), (1, 2))], 16, 8, 8).splitlines() == [
        "w                        full (8, 2)       rank 0 holds (1, 2)",
        "16 parameters: 64 B (64 B) in fp32; rank 0 of 8 holds 8 B (8 B)"]


def test_bytes_table_labels_and_pads():
    rows = sharding.fake_world_bytes(lambda: torch.nn.Linear(5, 3), [2])
    assert [nb06.world_label(r.world) for r in rows] == ["DDP", "FSDP2 W=2"]
    table = nb06.bytes_table(rows)
    pad = rows[1].params - rows[0].params / 2  # 3 rows of 5 on 2 ranks: rank 0 holds 2
    assert table.splitlines()[-1].startswith("FSDP2 W=2") and table.endswith(f"{pad:,.0f} B")


def test_scaling_notes_and_step_breakdown():
    one, w = _timing("1", 1, "a", work=32), _timing("W", 1.5, "b", work=64)
    r = bench.rate_ratio(w, one)
    eff = bench.ratio_of("scaling efficiency, 2 vs 1 process", r.value / 2, r.lo / 2, r.hi / 2)
    text = nb06.scaling_notes(eff, r, one, w, 2, "cpu", "cpu")
    assert text.startswith("(the efficiency above compares two jobs timed apart: unpaired; the next cell splits")
    assert r.verdict("the same jobs' images/s in total (2 × the efficiency), 2 ranks vs 1", on="cpu") in text
    assert "What GPUs measured:" in text
    assert nb06.published.get("pytorch_ddp_benchmark_resnet50_no_ddp_vs_ddp_1_to_16_gpus").figure in text
    assert nb06.scaling_notes(None, None, one, w, 2, "cpu", "cuda:0").startswith("No efficiency: the 2-rank job")
    t = dict(plain=_timing("p", 1), free1=_timing("f", 1.2), one=_timing("o", 1.5), free_w=_timing("fw", 2),
             w=_timing("w", 3))
    rs = tuple(bench.speedup(t[a], t[b]) for a, b in (("plain", "free1"), ("free1", "one"), ("free_w", "w")))
    lines = nb06.step_breakdown(t, rs, 2048, 2).splitlines()
    assert lines[0] == "1 process, per step: plain model 1.00 ms" and lines[1].startswith("  +0.20 ms: DDP with")
    assert lines[3] == "2 processes, per step: DDP 3.00 ms =" and "all-reduce of 2.0 KiB" in lines[5]
    assert lines[1].endswith("| paired: 0.83× (0.83–0.83): 1.20× slower")  # the verdict in a few words
    assert lines[6] == f"paired: rate ratios of each job's two steps, {verdicts.brief_legend(rs)}"  # said once
    assert lines[7].endswith("(1.67×, 1.63–1.70× from their quartiles; two jobs at different moments, so unpaired)")
    assert lines[8].startswith("Between GPUs, NCCL's all-reduce: its bus bandwidth")  # ranks on a CPU: published
    assert "published by" in lines[10]
    busbw = nb06.published.get("ml_engineering_h200_8gpu_allreduce_busbw_nvls_vs_ring")
    assert busbw.figure in "\n".join(lines)
    unclear = (bench.ratio_of("wrapper", 1.19, 0.74, 1.99), *rs[1:])  # a wide interval: the medians' gap is not a finding
    assert "+0.20 ms by the medians, not told from 0: DDP with" in \
        nb06.step_breakdown(t, unclear, 2048, 2).splitlines()[1]
    on_gpus = {k: dataclasses.replace(v, device="cuda:0, 1 thread(s) per rank") for k, v in t.items()}
    assert len(nb06.step_breakdown(on_gpus, rs, 2048, 2).splitlines()) == 8  # the legend, and no published lines
    unpaired = tuple(bench.ratio_of(r.name, r.value, r.lo, r.hi) for r in rs)  # no turns: no legend to say
    assert not any("paired: rate ratios" in line for line in nb06.step_breakdown(t, unpaired, 2048, 2).splitlines())


def test_failure_lab_texts():
    assert nb06.restart_plan(5, 3, (5, 3), 16) == "the restart job crashes at step 5, with a checkpoint every 3 steps\n"
    assert nb06.restart_plan(4, 3, (5, 3), 5).startswith("section 3's run has 5 steps: the restart")
    lab = {"raise": Run(["x"], 1, 14.0, ["[default0]:rank 0: step 2, all-reduce",
                                        "[default0]:[rank0]: RuntimeError: Connection closed by peer [::1]:5. More"],
                        failure="x failed: rank 1 raised ValueError.\nLast lines: ..."),
           "skip": Run(["x"], 1, 16.0, ["[default0]:rank 0: waited 3.0 s in the all-reduce of step 2"],
                       failure="x failed: rank 0 raised RuntimeError."),
           "restart": Run(["x"], 0, 20.0, ["[default0]:resumed at step 3", "[default1]:resumed at step 3",
                                           "[default0]:epoch 0: step 8"])}
    summary = nb06.lab_summary(lab, 21.0, 6, 6, 120, 2)
    assert summary.startswith("three jobs done in 21.0 s: 6 processes") and "all at once" in summary
    assert "--- raise: failed after 14.0 s (wall-clock limit 120 s)\nx failed: rank 1 raised ValueError.\n" in summary
    assert "resumed at step 3\nepoch 0: step 8" in summary  # the restart's lines, each once, in order
    assert "at most 4 at a time" in nb06.lab_summary(lab, 21.0, 6, 4, 120, 2)
    times = nb06.failure_times(lab, 3.0, 1.2, 3, "gloo", bitwise=False).splitlines()
    assert times[0] == "restart: bit for bit the same weights: False"
    assert times[1].startswith("skip: the job's 16.0 s = 3.0 s of waiting in the all-reduce (timeout 3 s) + 13.0 s")
    assert times[3].endswith("closed its connection. Rank 0's error: RuntimeError: Connection closed by peer [::1]:5")
    assert nb06.failure_times(lab, 0.0, 0.0, 3, "nccl").startswith("skip: NCCL's all-reduce returned at once")
