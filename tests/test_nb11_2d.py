"""Notebook 11, sections 8 and 9: FSDP × tensor parallel on a 2 × 2 mesh under real torchrun, and
the which-parallelism-when table's formulas against PyTorch's own shards (fake process group)."""

import json

import pytest
import torch

from course_lib import launcher, models, parallelism, sharding
from course_lib.lessons import nb11

pytestmark = pytest.mark.versioned  # DTensor's 2D mesh: make test-oldest runs it

TINY = parallelism.Shape("tiny", dim=64, layers=8, heads=8, context=32, vocab=1024)  # every cut divides evenly


# ---- the table's formulas ----------------------------------------------------------------------

def test_the_shape_counts_the_parameters_pytorch_builds():
    for shape in (TINY, parallelism.GPT2_SMALL):
        with torch.device("meta"):
            model = shape.build()
        assert shape.params == sum(p.numel() for p in model.parameters())
    assert parallelism.GPT2_SMALL.params == 124_401_408 + (50304 - 50257) * 768  # GPT2SmallShapes', vocab padded


@pytest.mark.filterwarnings("ignore:DTensor random operators")  # torch 2.6 on a CPU mesh; none runs
def test_the_notebooks_table_agrees_with_pytorch_at_this_torch():
    rows = parallelism.decision_table([parallelism.GPT2_SMALL, parallelism.SIZE_7B], [8, 64])  # what notebook 11 prints
    assert sum(r.why_not is None for r in rows) == 15  # 20 plans; 5 cannot split the model
    assert all(r.agrees for r in rows if r.why_not is None)


@pytest.mark.parametrize("gpus", [4, 8])
def test_the_formulas_parameters_equal_pytorchs_shards(gpus):
    rows = parallelism.decision_table([TINY], [gpus])
    names = [r.plan.name for r in rows]
    assert names[:4] == ["DP", "FSDP", "TP", "PP"] and names[4].startswith("FSDP ")
    for r in rows:
        assert r.why_not is None, r.why_not
        assert r.fake_bytes == r.formula_param_bytes, r.plan  # no padding with these sizes
        assert r.state_bytes == r.formula_param_bytes / 4 * parallelism.BYTES_PER_PARAM


def test_a_formula_that_misses_pytorchs_shards_does_not_agree():
    row = parallelism.decision_table([TINY], [4])[2]  # TP
    wrong = parallelism.Row(row.shape, row.plan, row.tokens, None, int(row.formula_param_bytes * 1.05))
    assert row.agrees and not wrong.agrees


def test_the_communication_formulas():
    P, tokens, d = TINY.params, 4096, TINY.dim
    dp, fsdp, tp, pp, two_d = parallelism.plans(4, TINY.heads)
    assert parallelism.comm_bytes(TINY, dp, tokens) == pytest.approx(2 * 3 / 4 * P * 4)  # ring all-reduce
    assert parallelism.comm_bytes(TINY, fsdp, tokens) == pytest.approx(1.5 * parallelism.comm_bytes(TINY, dp, tokens))
    assert parallelism.comm_bytes(TINY, pp, tokens) == pytest.approx(2 * tokens * d * 4)
    assert parallelism.comm_bytes(TINY, tp, tokens) == pytest.approx(4 * TINY.layers * 2 * 3 / 4 * tokens * d * 4)
    assert (two_d.dp, two_d.tp) == (2, 2)
    tp_part = 4 * TINY.layers * 2 * 1 / 2 * tokens / 2 * d * 4  # each tp group: half the tokens
    fsdp_part = 3 * 1 / 2 * parallelism.rank_params(TINY, two_d, sharded=False) * 4
    assert parallelism.comm_bytes(TINY, two_d, tokens) == pytest.approx(tp_part + fsdp_part)


def test_only_the_groups_that_span_servers_count_across_them():
    tokens = 64 * 1024
    for plan in parallelism.plans(8, 12):  # one server: nothing crosses
        assert parallelism.across_servers(parallelism.GPT2_SMALL, plan, tokens) == 0
    dp, fsdp, _, _, two_d = parallelism.plans(64, 32)
    for plan in (dp, fsdp):  # data parallel over 8 servers: its bytes, spread over a server's 8 links
        sent = parallelism.comm_bytes(parallelism.SIZE_7B, plan, tokens)
        assert parallelism.across_servers(parallelism.SIZE_7B, plan, tokens) == pytest.approx(sent / 8)
    parts = parallelism.comm_parts(parallelism.SIZE_7B, two_d, tokens)  # 2D: FSDP's part only, tp stays inside
    per_server = parallelism.GPUS_PER_SERVER // two_d.tp  # the fsdp group's ranks in one server
    assert parallelism.across_servers(parallelism.SIZE_7B, two_d, tokens) == pytest.approx(parts["dp"] / per_server)
    assert parts["dp"] > 0 and parts["tp"] > parts["dp"]
    inside = parallelism.Plan("dp 2 × tp 4 × pp 8", 64, dp=2, tp=4, pp=8)  # each dp group fits in one server
    assert parallelism.across_servers(parallelism.SIZE_7B, inside, tokens) == parallelism.comm_parts(
        parallelism.SIZE_7B, inside, tokens)["pp"]


def test_plans_that_cannot_split_the_model_say_why():
    assert "12 heads" in parallelism.impossible(parallelism.GPT2_SMALL, parallelism.Plan("TP", 8, tp=8))
    assert "12 blocks" in parallelism.impossible(parallelism.GPT2_SMALL, parallelism.Plan("PP", 64, pp=64))
    assert parallelism.impossible(parallelism.GPT2_SMALL, parallelism.Plan("TP", 4, tp=4)) is None
    assert parallelism.plans(64, 12)[-1].tp == 4 and parallelism.plans(64, 32)[-1].tp == 8  # tp divides the heads


def test_the_pipelines_idle_share_is_the_bubble_plus_the_uneven_stages_waits():
    row = parallelism.Row(TINY, parallelism.Plan("PP", 4, pp=4), tokens=16 * TINY.context)  # 8 blocks: 2 per stage
    assert row.idle == pytest.approx(nb11.bubble(4, 16))
    uneven = parallelism.Row(parallelism.GPT2_SMALL, parallelism.Plan("PP", 8, pp=8), tokens=64 * 1024)  # 12 blocks: 2 or 1
    busy = 64 * 1.5 / (12 + 63 * 2)  # the average stage's 1.5 blocks per micro-batch; fill, then pace 2
    assert uneven.idle == pytest.approx(1 - busy)
    ops = [nb11.gpipe(64)] * 8  # the same from the replay: stages of 2 blocks and of 1
    passes = nb11.simulate(ops, [2.0] * 4 + [1.0] * 4, [4.0] * 4 + [2.0] * 4)
    assert sum(nb11.idle_fractions(passes, 8)) / 8 == pytest.approx(uneven.idle)
    assert parallelism.Row(TINY, parallelism.Plan("DP", 4, dp=4), tokens=16).idle == 0


@pytest.mark.filterwarnings("ignore:DTensor random operators")  # torch 2.6 on a CPU mesh; none runs
def test_the_2d_formula_equals_pytorchs_shards_of_the_mlp_stack():
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    width, layers = 32, 2
    with sharding.fake_group(4, (2, 2), ("dp", "tp")) as mesh:
        with torch.device("meta"):
            model = models.mlp_stack(width, layers)
        for block in model:
            parallelize_module(block, mesh["tp"], {"0": ColwiseParallel(), "2": RowwiseParallel()})
            sharding.shard(block, mesh["dp"], units=())
        assert sharding.local_bytes(model) == nb11.mlp_2d_elements(width, layers, 2, 2) * 4


# ---- scripts/fsdp_tp.py under torchrun ----------------------------------------------------------

def test_2d_training_equals_one_process_and_each_rank_holds_its_formula(tmp_path):
    args = ["--width=32", "--layers=2", "--batch=8", "--steps=2", f"--out={tmp_path}"]
    run = launcher.launch("fsdp_tp", args, nproc=4, timeout_s=180, echo=False, check=False)
    if not sharding.trains_on_cpu():  # torch 2.6: FSDP2 cannot train CPU tensors; one sentence says so
        assert not run.ok and any(f"from torch {sharding.CPU_MIN_TORCH} on" in line for line in run.lines)
        return
    assert run.ok, run.failure
    r = json.loads((tmp_path / "results.json").read_text())
    assert (r["dp"], r["tp"], r["backend"]) == (2, 2, "gloo")
    grads, weights = r["checks"][0::2], r["checks"][1::2]  # check.agreement rows, merged over the ranks
    assert [c["what"].split(":")[0] for c in r["checks"]] == ["step 1", "step 1", "step 2", "step 2"]
    assert all("gradients" in c["what"] and (c["atol"], c["rtol"]) == (1e-6, 1e-5) for c in grads)
    assert all("weights after AdamW" in c["what"] and (c["atol"], c["rtol"]) == (1e-5, 1e-4) for c in weights)
    params = sum(torch.Size(s).numel() for s in r["shapes"])
    for c in r["checks"]:  # every rank compared the whole (gathered) tensors
        assert c["ok"] and c["max_abs"] <= c["atol"] + c["rtol"] and c["elements"] == 4 * params
    first = r["per_rank"][0]
    assert first["groups"] == {"dp": [0, 2], "tp": [0, 1]}  # rows of the mesh are the tp groups
    assert first["local_shapes"][:2] == [[4 * 32 // 4, 32], [4 * 32 // 4]]  # w1, b1: cut 4 ways on dim 0
    assert first["local_shapes"][2:4] == [[32 // 2, 4 * 32 // 2], [32 // 2]]  # w2: dp on dim 0, tp on 1
    assert r["max_change"] > 10 * max(c["max_abs"] for c in weights)  # training moved the weights: a real check
    assert f"up to {r['max_change']:.1e} from where they started" in weights[-1]["what"]
    params = nb11.mlp_2d_elements(32, 2, 2, 2) * 4
    for row in r["per_rank"]:
        assert (row["params"], row["grads"]) == (params, params)
        assert row["optim"] == sharding.adamw_state_bytes(int(params), len(r["shapes"]))
    assert sorted((row["dp"], row["tp"]) for row in r["per_rank"]) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert r["one_process"]["params"] == sum(torch.Size(s).numel() for s in r["shapes"]) * 4


def test_a_tp_size_that_does_not_fit_the_ranks_is_one_sentence(tmp_path):
    run = launcher.launch("fsdp_tp", ["--tp=3", f"--out={tmp_path}"], nproc=2, timeout_s=60, echo=False, check=False)
    assert not run.ok and any("--tp 3 must divide the 2 ranks" in line for line in run.lines)


# ---- the notebook's lines -------------------------------------------------------------------------

def test_the_shards_lines_show_rank_0_each_ranks_bytes_and_the_share():
    held = dict(params=1024, grads=1024, optim=2048 + 16)  # AdamW: two moments and 2 step counters
    ranks = [dict(rank=r, dp=r // 2, tp=r % 2, groups=dict(dp=[0, 2], tp=[0, 1]), local_shapes=[[2, 4], [2]],
                  placements=["(Shard(dim=0), Shard(dim=0))"] * 2, **held) for r in range(4)]
    two_d = dict(names=["0.0.weight", "0.0.bias"], shapes=[[8, 4], [8]], per_rank=ranks,
                 one_process=dict(params=4096, grads=4096, optim=8192 + 64))  # 4 × a rank's 4,112 B
    lines = nb11.shards_lines(two_d, held).splitlines()
    assert lines[0] == "rank 0: dp group [0, 2], tp group [0, 1]"
    assert lines[1].split() == ["0.0.weight", "whole", "(8,", "4)", "rank", "0", "(2,", "4)", "(Shard(dim=0),",
                                "Shard(dim=0))"]
    assert lines[4].split() == ["one", "process", "4.0", "4.0", "8.1"]
    assert lines[6].split() == ["rank", "1", "(dp", "0,", "tp", "1)", "1.0", "1.0", "2.0"]
    assert lines[-2].split() == ["formula", "1.0", "1.0", "2.0"]
    assert lines[-1] == "each rank holds 25.00% of one process's model state (4 ranks: 1/4 = 25.00%)"


def test_the_decision_tables_lines_and_verdicts():
    rows = parallelism.decision_table([TINY], [4, 8])
    lines = nb11.table_lines(rows).splitlines()
    assert len(lines) == 1 + len(rows) + 1 and all(line.endswith("✓") for line in lines[1:-1])
    first = rows[0]
    wrong = parallelism.Row(first.shape, first.plan, first.tokens, None, int(first.formula_param_bytes * 1.05))
    assert nb11.table_lines([wrong]).splitlines()[1].endswith("+5.00% ✗")
    why = "3 tensor-parallel ranks cannot share 8 heads"
    assert f"cannot: {why}" in nb11.table_lines([parallelism.Row(TINY, parallelism.Plan("TP", 3, tp=3), 1, why)])
    assert parallelism.memory_budget(torch.device("cpu")) == (2**34, "16 GiB (a budget chosen here; on a GPU, its memory)")
    roomy = parallelism.plan_verdicts(rows, 2**40, "1 TiB").splitlines()  # every plan fits: DP sends least of DP and FSDP
    assert len(roomy) == 2 and roomy[0].startswith("tiny on 4 GPUs, 1 TiB per GPU: model state fits for DP, FSDP, TP")
    assert "DP: of the plans whose communication can run during the backward pass (DP, FSDP), the one that sends least" in roomy[0]
    tiny_dp = next(r for r in rows if r.plan.name == "DP" and r.plan.gpus == 4)
    assert tiny_dp.flop_per_byte < 0.4 * parallelism._thresholds()[2]  # a tiny model: far below the link's threshold
    assert "DP's 256 FLOP per byte sent within a server is below the threshold above: even at 40 % of the peak" in roomy[0]
    dp_state = next(r for r in rows if r.plan.name == "DP").state_bytes
    sharded = parallelism.plan_verdicts(rows[:5], 2 * dp_state - 1, "B")  # DP's model state no longer fits
    assert "fits for FSDP," in sharded and "FSDP: of the plans whose communication can run during" in sharded
    assert "no plan's model state leaves half of it free" in parallelism.plan_verdicts(rows, 1, "1 B")
