"""Notebook 11's lesson module (course_lib.lessons.nb11) and scripts/pipeline.py under real torchrun
(gloo ranks on the CPU): the schedules, the bubble, the equality with one process, a dying stage."""

import json

import pytest
import torch
import torch.nn.functional as F

from conftest import REPO
from course_lib import bench, check, launcher, models
from course_lib.lessons import nb11

pytestmark = pytest.mark.versioned  # torch.distributed.pipelining: make test-oldest runs it

NB11 = REPO / "notebooks" / "11_model_parallel.ipynb"
SMALL = dict(width=32, layers=4, batch=16, repeats=2, seed=3)


def code_cells(path):
    return ["".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]


# ---- the pieces, on one process ---------------------------------------------------------------

def test_split_covers_every_block_once_and_shares_the_parameters():
    model = models.gelu_stack(8, 7)
    parts = nb11.split(model, 3)
    assert [len(p) for p in parts] == [3, 2, 2]
    assert [id(q) for p in parts for q in p.parameters()] == [id(q) for q in model.parameters()]
    x = torch.randn(4, 8)
    h = x
    for p in parts:
        h = p(h)
    torch.testing.assert_close(h, model(x), atol=0, rtol=0)
    with pytest.raises(ValueError, match="stages"):
        nb11.bounds(3, 4)
    with pytest.raises(ValueError, match="rise"):
        nb11.split(model, 2, [0, 5, 5])


@pytest.mark.parametrize("stages", [1, 2, 3, 4])
@pytest.mark.parametrize("micro", [1, 2, 3, 8])
def test_every_schedule_runs_each_pass_once_forward_before_backward(stages, micro):
    for kind in nb11.SCHEDULES:
        for s in range(stages):
            ops = nb11.schedule(kind, s, stages, micro)
            assert sorted(ops) == sorted([("F", i) for i in range(micro)] + [("B", i) for i in range(micro)])
            assert all(ops.index(("F", i)) < ops.index(("B", i)) for i in range(micro))
            assert [i for k, i in ops if k == "B"] == list(range(micro))  # backwards in order


def test_1f1b_holds_at_most_stages_minus_stage_micro_batches_and_gpipe_all():
    for stages in (2, 3, 4):
        for micro in (1, 4, 8):
            for s in range(stages):
                assert nb11.in_flight(nb11.schedule("gpipe", s, stages, micro)) == micro
                assert nb11.in_flight(nb11.schedule("1f1b", s, stages, micro)) == min(stages - s, micro)


def test_equal_passes_replay_to_the_formulas_bubble_for_both_schedules():
    for stages in (2, 3, 4):
        for micro in (1, 2, 5, 8):
            for kind in nb11.SCHEDULES:
                ops = [nb11.schedule(kind, s, stages, micro) for s in range(stages)]
                passes = nb11.simulate(ops, [1.0] * stages, [2.0] * stages)
                idle = nb11.idle_fractions(passes, stages)
                assert idle == pytest.approx([nb11.bubble(stages, micro)] * stages)
                assert max(p.end for p in passes) == pytest.approx((micro + stages - 1) * 3.0)


def test_a_slower_stage_sets_the_pace_in_the_replay():
    ops = [nb11.gpipe(4)] * 2
    passes = nb11.simulate(ops, [1.0, 2.0], [1.0, 2.0])  # stage 1 twice as slow
    idle = nb11.idle_fractions(passes, 2)
    assert idle[0] > idle[1]  # the fast stage waits more
    assert max(p.end for p in passes) == pytest.approx(1 + 4 * 2 + 4 * 2 + 1)


def test_the_replay_refuses_schedules_that_wait_for_each_other():
    with pytest.raises(ValueError, match="deadlock"):
        nb11.simulate([[("B", 0), ("F", 0)], [("F", 0), ("B", 0)]], [1, 1], [1, 1])


def test_micro_loss_shares_add_up_to_the_batch_gradient():
    model = models.gelu_stack(16, 3, seed=1)
    x, y = nb11.batch(12, 16, seed=1)
    _, ref = nb11.reference(model, x, y)
    model.zero_grad(set_to_none=True)
    for xb, yb in zip(x.chunk(4), y.chunk(4)):
        nb11.micro_loss(model(xb), yb, 4).backward()
    for p, g in zip(model.parameters(), ref):
        torch.testing.assert_close(p.grad, g, atol=1e-6, rtol=1e-5)


def test_bubble_verdict_follows_the_numbers():
    inside = nb11.Bubble("gpipe", 2, 4, measured=[0.18, 0.2, 0.22], simulated=[0.2] * 3)
    assert "within the measured interval" in inside.verdict()
    unequal = nb11.Bubble("gpipe", 2, 4, measured=[0.26, 0.27, 0.28], simulated=[0.27] * 3)
    assert "were not equal" in unequal.verdict() and "above" in unequal.verdict()
    messages = nb11.Bubble("gpipe", 2, 4, measured=[0.4, 0.41, 0.42], simulated=[0.25] * 3)
    assert "beyond the median passes" in messages.verdict() and "+16.0%" in messages.verdict()
    assert messages.verdict().endswith("beyond the median passes (*)")
    both = nb11.bubble_lines([messages, inside]).splitlines()  # a header, a row each, the note once
    assert len(both) == 4 and both[-1].startswith("(*) idle beyond a replay of the median passes, not split here; guesses: passes that vary")
    assert both[1].startswith("gpipe      4 |   41.0% (40.0%–42.0%) |   20.0% |  25.0% | above the formula")
    assert "(*)" not in nb11.bubble_lines([unequal])
    alone = nb11.footnoted(messages.verdict()).splitlines()  # a verdict printed on its own keeps its footnote
    assert alone[0] == messages.verdict() and alone[1] == nb11.OUTSIDE
    assert nb11.footnoted(unequal.verdict()) == unequal.verdict()
    below = nb11.Bubble("1f1b", 2, 4, measured=[0.17, 0.18, 0.185], simulated=[0.21] * 3)
    assert "below the formula" in below.verdict() and "below that too" in below.verdict()
    assert "beyond the median passes" not in below.verdict()


def test_pytorchs_schedules_are_skipped_only_where_they_cannot_run():
    assert nb11.api_skip("gpipe", 4, 4, "gloo", "2.6.0") is None
    assert nb11.api_skip("1f1b", 8, 2, "gloo", "2.8.0") is None
    assert nb11.api_skip("1f1b", 8, 2, "nccl", "2.6.0") is None  # NCCL returns one work: no hang
    old = nb11.api_skip("1f1b", 8, 2, "gloo", "2.7.1")
    assert old is not None and "2.7.1" in old and "#132644" in old
    few = nb11.api_skip("gpipe", 2, 4, "nccl", "2.9.0")  # 2.7 to 2.10: every schedule refuses m < stages
    assert few is not None and "(2 < 4)" in few
    assert nb11.api_skip("gpipe", 2, 4, "nccl", "2.14.1") is None  # 2.11 on: 1F1B only
    assert nb11.api_skip("gpipe", 2, 4, "nccl", "2.6.0") is None  # 2.6: no such check
    assert "(2 < 4)" in nb11.api_skip("1f1b", 2, 4, "nccl", "2.14.1")


def _solved(fn_source: str, name: str):
    namespace: dict = {}
    exec(fn_source, namespace)
    return namespace[name]


def test_the_exercise_checks_pass_the_solutions_and_catch_wrong_answers():
    cells = code_cells(NB11)
    micro_for = _solved(next(c for c in cells if c.startswith("def micro_for")).split("\n\nnb11.")[0], "micro_for")
    cut = _solved(next(c for c in cells if c.startswith("def balanced_cut")).split("\n\nnb11.")[0], "balanced_cut")
    row = _solved("import torch.nn.functional as F\n" + next(c for c in cells if c.startswith("def row_parallel"))
                  .split("\n\nnb11.")[0], "row_parallel")
    nb11.check_micro_for(micro_for)
    nb11.check_balanced_cut(cut)
    nb11.check_row_parallel(row)
    with pytest.raises(AssertionError, match="once, after the sum"):  # the bias on every rank's partial sum
        nb11.check_row_parallel(lambda h, w, b, reduce: reduce([F.linear(x, y, b) for x, y in zip(h, w)]))
    def gathered(h, w, b, reduce):  # an all-gather done with an all-reduce, then the whole Linear
        world, width = len(h), h[0].shape[1]
        padded = [F.pad(x, (r * width, (world - 1 - r) * width)) for r, x in enumerate(h)]
        return [F.linear(full, torch.cat(w, dim=1), b) for full in reduce(padded)]
    with pytest.raises(AssertionError, match="partial sum"):
        nb11.check_row_parallel(gathered)
    with pytest.raises(AssertionError, match="exactly one"):  # no all-reduce: each rank its partial sum
        nb11.check_row_parallel(lambda h, w, b, reduce: [F.linear(x, y) + b for x, y in zip(h, w)])
    with pytest.raises(AssertionError, match="smallest"):
        nb11.check_micro_for(lambda stages, target: micro_for(stages, target) + 1)
    with pytest.raises(AssertionError):
        nb11.check_balanced_cut(lambda costs: len(costs) // 2)


def test_the_notebooks_schedules_are_the_librarys():
    cell = next(c for c in code_cells(NB11) if c.startswith("def gpipe"))
    namespace = {"nb11": nb11, "check": check, "cfg": type("C", (), {"pipe_micro": [1, 2]}), "STAGES": 2}
    exec(cell, namespace)  # the cell checks that its functions equal nb11.schedule's
    assert namespace["gpipe"](3) == nb11.gpipe(3)


@pytest.mark.parametrize("name, script", [("PIPE_SCRIPT", "pipeline.py"), ("TP_SCRIPT", "tensor_parallel.py")])
def test_the_script_cells_of_11_are_the_scripts(name, script):
    magic = f'%%writefile "{{{name}}}"\n'
    cells = [c for c in code_cells(NB11) if c.startswith(magic)]
    assert len(cells) == 1, f"11 writes {script} from one cell"
    assert cells[0][len(magic):].rstrip("\n") + "\n" == (REPO / "scripts" / script).read_text()


# ---- scripts/pipeline.py under torchrun ---------------------------------------------------------

def _args(out, **over):
    cfg = {**SMALL, **over}
    return [f"--{k}={v}" for k, v in cfg.items()] + ["--micro", "1", "2", "4", f"--out={out}"]


@pytest.mark.parametrize("stages", [2, 4])
def test_pipeline_stages_equal_one_process_and_time_every_pass(tmp_path, stages):
    run = launcher.launch("pipeline", _args(tmp_path), nproc=stages, timeout_s=180, echo=False)
    assert run.ok
    r = json.loads((tmp_path / "results.json").read_text())
    assert r["stages"] == stages and r["backend"] == "gloo"
    assert len(r["checks"]) == 2 * stages and all(c["ok"] and c["over"] == 0 for c in r["checks"])
    assert all(c["max_abs"] <= r["atol"] + r["rtol"] and (c["atol"], c["rtol"]) == (r["atol"], r["rtol"])
               for c in r["checks"])
    params, out = SMALL["layers"] * (SMALL["width"] + 1) * SMALL["width"], SMALL["batch"] * SMALL["width"]
    for kind in ("gpipe", "1f1b"):  # every stage its own gradients, the last its output too: each element once
        rows = [c for c in r["checks"] if c["what"].startswith(f"{kind}, 4 micro-batches, stage ")]
        assert len(rows) == stages and sum(c["elements"] for c in rows) == params + out
        assert "gradients and output" in rows[-1]["what"] and "output" not in rows[0]["what"]
    steps = nb11.timelines(r)
    assert set(steps) == {(k, m) for k in ("gpipe", "1f1b") for m in (1, 2, 4)}
    for (kind, m), taken in steps.items():
        assert len(taken) == SMALL["repeats"]
        for passes in taken:
            for s in range(stages):  # every stage ran every pass once, in its schedule's order
                mine = sorted((p for p in passes if p.stage == s), key=lambda p: p.start)
                assert [(p.kind, p.micro) for p in mine] == nb11.schedule(kind, s, stages, m)
                assert all(p.end >= p.start for p in mine)
            for p in passes:  # a stage after the first starts a forward only after the one before ended it
                if p.kind == "F" and p.stage > 0:
                    before = next(q for q in passes if q.stage == p.stage - 1 and q.kind == "F" and q.micro == p.micro)
                    assert p.start >= before.end
    peaks = {(p["schedule"], p["micro"], p["stage"]): p["peak"] for p in r["peak_bytes"]}
    assert set(peaks) == {(k, m, s) for k, m in steps for s in range(stages)} and min(peaks.values()) > 0
    held = {(h["micro"], h["stage"]): h for h in r["micro_bytes"]}
    assert set(held) == {(m, s) for m in (1, 2, 4) for s in range(stages)}
    for (m, s), h in held.items():  # a micro-batch of width-wide rows holds at least its input
        assert h["forward_live"] >= SMALL["batch"] // m * SMALL["width"] * 4 and h["backward_peak"] > 0
    ran = [k for k in ("gpipe", "1f1b") if nb11.api_skip(k, 4, stages, "gloo") is None]  # PyTorch's, m = 4
    assert "gpipe" in ran  # GPipe runs in every supported torch
    assert [c["what"].split(",")[0] for c in r["api"]] == [nb11.API_SCHEDULES[k] for k in ran]
    for c in r["api"]:  # one row per schedule, merged over the stages: every gradient and the output
        assert c["ok"] and c["max_abs"] <= r["atol"] + r["rtol"] and c["elements"] == params + out
    assert [line.split(":")[0] for line in r["api_skipped"]] == [nb11.API_SCHEDULES[k] for k in ("gpipe", "1f1b")
                                                                 if k not in ran]
    if stages == 2:  # stage 0 holds 4 micro-batches in GPipe, 2 in 1F1B (4 stages: 4 in both)
        assert peaks[("gpipe", 4, 0)] > peaks[("1f1b", 4, 0)]


def test_a_stage_that_dies_ends_the_job_within_its_timeout_naming_the_rank(tmp_path):
    run = launcher.launch("pipeline", _args(tmp_path, **{"fail-stage": 1, "timeout": 20}), nproc=2,
                          timeout_s=120, echo=False, check=False)
    assert not run.ok and run.seconds < 60
    assert "rank 1" in run.failure and "RuntimeError" in run.failure
    assert not (tmp_path / "results.json").exists()


def test_a_micro_batch_count_that_does_not_divide_the_batch_is_one_sentence(tmp_path):
    run = launcher.launch("pipeline", ["--batch=10", "--micro", "3", f"--out={tmp_path}"], nproc=2,
                          timeout_s=60, echo=False, check=False)
    assert not run.ok
    assert any("must divide --batch 10" in line for line in run.lines)


# ---- the notebook's lines, from results -------------------------------------------------------

def test_the_setup_and_job_lines_say_where_the_jobs_ran():
    assert nb11.orders(2, 2).splitlines() == ["stage 0, m = 2:  GPipe F0 F1 B0 B1", " " * 17 + "1F1B  F0 F1 B0 B1",
                                              "stage 1, m = 2:  GPipe F0 F1 B0 B1", " " * 17 + "1F1B  F0 B0 F1 B1"]
    cpu = nb11.jobs_line(2, "gloo", "/x", "cpu")
    assert cpu.startswith("jobs: 2 processes") and "on the CPU (gloo)" in cpu and cpu.endswith("files in /x")
    assert nb11.jobs_line(3, "gloo", "/x", "gpu").startswith("Fewer than 3 GPUs: the 3 stages run on the CPU")
    gpus = nb11.jobs_line(2, "nccl", "/x", "gpu")
    assert "on one GPU each (nccl)" in gpus and "Fewer" not in gpus
    stages = nb11.rig(2, "stage", dict(device="cpu", backend="gloo", threads=1))
    assert stages == "2 stages, gloo, cpu, 1 thread per stage"
    assert nb11.rig(4, "rank", dict(device="cpu", backend="gloo")) == "4 ranks, gloo, cpu, 1 thread per rank"
    run = launcher.Run(["python", "-m", "torch.distributed.run", "--nproc_per_node=2", "x.py"], 0, 3.21)
    assert nb11.job_line(run, "R").splitlines() == ["", "$ torchrun --nproc_per_node=2 x.py",
                                                    "finished in 3.2 s (wall clock, start-up included) | R"]


def test_the_idle_lines_and_the_span_verdict_follow_the_numbers():
    stage0, stage1 = nb11.idle_lines([[0.5, 0.4], [0.6, 0.4], [0.55, 0.4]])
    assert stage0 == "stage 0: idle 55.0% of the step (50.0%–60.0% over 3 steps)"
    assert stage1 == "stage 1: idle 40.0% of the step (40.0%–40.0% over 3 steps)"
    shorter = nb11.why_span(bench.ratio_of("m = 4 vs 1", 1.5, 1.3, 1.7), [0.5, 0.2], 1.1)
    assert shorter == "shorter: the idle time won back outweighed passes up to 1.10× as long"
    longer = nb11.why_span(bench.ratio_of("m = 4 vs 1", 0.5, 0.4, 0.6), [0.7, 0.5], 3.0)
    assert longer.startswith("longer, although the idle share went 70% → 50%") and "3.00× as long" in longer
    assert nb11.why_span(bench.ratio_of("", 0.5, 0.4, 0.6), [0.5, 0.6], 3.0).startswith("longer, and ")
    assert nb11.why_span(bench.ratio_of("", 1.5, 1.3, 1.7), [0.5, 0.2], 0.99).endswith("passes less than 5 % longer")


def test_span_table_sets_each_step_beside_its_paired_ratios_and_explains_only_the_clear_ones():
    def step(ms, kind, m):
        t = bench.timing_of([ms * f / 1e3 for f in (0.98, 1.0, 1.02)], name=f"{kind}, m = {m}: one step", device="cpu")
        return t
    steps = {("gpipe", 1): step(300, "gpipe", 1), ("gpipe", 4): step(200, "gpipe", 4),
             ("1f1b", 1): step(300, "1f1b", 1), ("1f1b", 4): step(290, "1f1b", 4)}
    busy = {("gpipe", 1): [0.15, 0.15], ("gpipe", 4): [0.16, 0.16], ("1f1b", 1): [0.15, 0.15], ("1f1b", 4): [0.2, 0.2]}
    idle = {("gpipe", 1): 0.5, ("gpipe", 4): 0.2, ("1f1b", 1): 0.5, ("1f1b", 4): 0.3}
    fast = bench.ratio_of("gpipe 4 vs 1", 1.5, 1.4, 1.6, more="faster", less="slower")
    wide = bench.ratio_of("1f1b 4 vs 1", 1.03, 0.8, 1.3, more="faster", less="slower")
    table = nb11.span_table(steps, busy, idle, {("gpipe", 4): fast, ("1f1b", 4): wide},
                            {1: bench.ratio_of("", 1.0, 0.99, 1.01),
                             4: bench.ratio_of("", 0.69, 0.6, 0.8, more="faster", less="slower")}, "2 stages")
    lines = table.splitlines()
    assert lines[0].endswith("| 2 stages") and "vs m = 1, paired" in lines[1]
    gpipe4 = next(ln for ln in lines if ln.startswith("gpipe      4"))
    assert "200 (198–202)" in gpipe4 and "20%" in gpipe4 and "1.50× (1.40–1.60) faster" in gpipe4
    f1b4 = next(ln for ln in lines if ln.startswith("1f1b       4"))
    assert "1.03× (0.80–1.30) too wide" in f1b4 and f1b4.endswith("0.69× (0.60–0.80): 1.45× slower")
    assert lines[-1] == "gpipe m = 4: shorter: the idle time won back outweighed passes up to 1.07× as long"
    assert not any("1f1b m = 4" in ln for ln in lines)  # not told apart: no cause offered
    assert ("1F1B vs GPipe at m = 4: 1.45× slower, beyond the spread, where the formula gives both one span; idle 30% "
            "against 20%, stage 0's passes 1.25× as long: what made the gap is not measured apart") in lines
    assert not any("at m = 1:" in ln for ln in lines)  # 1F1B and GPipe not told apart at m = 1: nothing said
    both = nb11.span_table(steps, busy, idle, {("gpipe", 4): fast, ("1f1b", 4): fast}, {}, "2 stages")
    assert both.splitlines()[-2].startswith("gpipe m = 4: shorter") and both.splitlines()[-1].startswith("1f1b m = 4: ")


def test_the_memory_lines_put_each_prediction_beside_its_measurement():
    held = {(kind, k, s): (k if kind == "gpipe" else min(2 - s, k)) for kind in ("gpipe", "1f1b")
            for k in (1, 4) for s in (0, 1)}
    one = {(k, s): (1024 * 8 // k, 512) for k in (1, 4) for s in (0, 1)}
    predicted = {key: n * one[key[1:]][0] + one[key[1:]][1] for key, n in held.items()}
    peak = {key: 2 * v for key, v in predicted.items()}  # measured twice the prediction
    lines = nb11.memory_lines(held, predicted, peak, one, "R").splitlines()
    assert lines[0] == "peak memory of one step, predicted → measured | R" and len(lines) == 2 + 4 + 3 + 2
    assert lines[2].split("|")[0].split() == ["1", "0"] and lines[5].split("|")[0].split() == ["4", "1"]
    assert " 4 × →   8.5 KiB →  17.0 KiB" in lines[4]  # m = 4, stage 0, GPipe: 4 × 2 KiB + 0.5 KiB, measured 2×
    assert lines[-3] == ("at m = 4, stage 0: GPipe's peak is 1.89× 1F1B's (predicted 1.89×; it holds 4 micro-batches "
                         "against 2)")
    assert lines[-5].startswith("gpipe: stage 0's peak at m = 4 is 1.00× its peak at m = 1")
    assert lines[-2].startswith("stage 0: the prediction misses by +") and lines[-1].startswith("stage 1:")


def test_require_passes_a_close_row_and_raises_the_line_of_one_that_is_not():
    row = check.agreement("ones", torch.ones(3), torch.ones(3), atol=0.0, rtol=0.0)
    assert nb11.require(row) is row
    with pytest.raises(AssertionError, match=r"^twos vs ones: max \|Δ\| 1.00e\+00;.*fails on 3 of 3 elements"):
        nb11.require(check.agreement("twos vs ones", 2 * torch.ones(3), torch.ones(3), atol=0.1, rtol=0.0))


def test_miss_line_says_how_far_a_stage_s_peak_is_from_the_prediction():
    M = 2**20
    peak = {("gpipe", 1, 1): 22 * M, ("1f1b", 8, 1): 9.8 * M, ("gpipe", 1, 0): 24 * M, ("1f1b", 8, 0): 8.6 * M}
    pred = {("gpipe", 1, 1): 26 * M, ("1f1b", 8, 1): 6.8 * M, ("gpipe", 1, 0): 24 * M, ("1f1b", 8, 0): 8.5 * M}
    assert nb11.miss_line(0, peak, pred).startswith("stage 0: every prediction within 10 % of the measured peak")
    one = nb11.miss_line(1, peak, pred)
    assert one.startswith("stage 1: the prediction misses by +3.0 MiB (1F1B, m = 8: measured 9.8 MiB, predicted 6.8 MiB)")
    assert "; and by -4.0 MiB (GPipe, m = 1: measured 22.0 MiB, predicted 26.0 MiB): this stage keeps less" in one
    pred[("gpipe", 1, 1)] = 22 * M
    assert "+3.0 MiB (1F1B, m = 8" in nb11.miss_line(1, peak, pred) and "and by" not in nb11.miss_line(1, peak, pred)


def test_link_thresholds_divide_the_datasheet_peak_by_the_published_link_rate():
    from course_lib import datasheet, parallelism, published
    assert f"{parallelism.NVLINK_RING_BUSBW / 1e9:.1f}GBps" in published.get("ml_engineering_h200_8gpu_allreduce_busbw_nvls_vs_ring").figure
    assert "400 Gb/s RDMA per GPU" in published.get("torchtitan_llama3_70b_256_h100_async_tp").hardware
    rows = parallelism.decision_table([parallelism.GPT2_SMALL, parallelism.SIZE_7B], [8, 64], seqs_per_gpu=8)
    text = parallelism.link_thresholds()
    peak = datasheet.peak_tflops(datasheet.lookup("H200"), "bf16") * 1e12
    assert f"within a server: {peak / 367.2e9:,.0f} FLOP/byte" in text.splitlines()[1]
    assert f"between servers: {peak / 50e9:,.0f} FLOP/byte" in text.splitlines()[2]
    mark = {(r.shape.name, r.plan.gpus, r.plan.name): line.split()
            for r, line in zip(rows, nb11.table_lines(rows).splitlines()[1:]) if not r.why_not}
    assert mark["GPT-2 small", 8, "FSDP 2 × TP 4"][-4] == "no"  # 823 FLOP/byte: below 2,695 within a server
    assert mark["GPT-2 small", 8, "DP"][-4] == "yes"  # 7,022, and nothing crosses servers
    crossing = next(r for r in rows if r.plan.gpus == 64 and r.plan.name == "DP" and r.shape is parallelism.GPT2_SMALL)
    assert crossing.across_bytes > 0 and crossing.flop_per_byte > peak / 367.2e9  # clears the link within a server...
    between = crossing.flop_per_byte * crossing.comm_bytes / crossing.across_bytes  # ... and the one between, on what crosses
    assert mark["GPT-2 small", 64, "DP"][-4] == ("yes" if between > peak / 50e9 else "no")
