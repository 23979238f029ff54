"""Tests for course_lib.lessons.nb02 (CPU, tiny models; GPU-only cases skipped without CUDA)."""

from __future__ import annotations

import ast
import json
import time

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import REPO
from fixtures_data import write_mnist_fixture

from course_lib import bench, data, models, report, train
from course_lib.lessons import nb02
from course_lib.lessons.nb02 import Throughput

def tiny_net(classes: int = 10) -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(4, classes))


TINY = dict(steps=2, repeats=2, warmup=1, batch_size=8, resolution=16, width=4, device="cpu")


def assert_sane(r: Throughput, runs: int) -> None:
    assert r.timing.rate > 0 and r.timing.median_s > 0 and r.timing.unit == "img/s"
    assert 0.0 <= r.data_wait_share <= 1.0
    assert r.timing.runs == runs
    assert "img/s" in str(r) and r.timing.name in str(r) and "data wait" in str(r)


# -- loaders ------------------------------------------------------------------------------

def test_shapes_loader_draws_the_dataset_images():
    loader = nb02.shapes_loader(12, resolution=16, batch_size=4, seed=3)
    xb, yb = next(iter(loader))
    ds = data.ShapesDataset(12, 16, "train", 3)
    i = next(k for k in range(12) if torch.equal(ds[k][0], xb[0]))
    assert yb[0].item() == ds[i][1]
    assert len(loader) == 3


def test_workers_change_the_speed_not_the_batches():
    serial = list(nb02.shapes_loader(12, resolution=16, batch_size=4, seed=3))
    parallel = list(nb02.shapes_loader(12, resolution=16, batch_size=4, num_workers=2, seed=3))
    assert len(serial) == len(parallel) == 3
    for (xa, ya), (xb, yb) in zip(serial, parallel):
        assert torch.equal(xa, xb) and torch.equal(ya, yb)


def test_loader_name():
    assert nb02.loader_name(0) == "workers=0"
    assert nb02.loader_name(2, True) == "workers=2 +pin"


# -- the loop and its timing --------------------------------------------------------------

def notebook_function(name: str, notebook: str = "02_first_cnn.ipynb") -> str:
    """The source of the function `name` as a code cell of `notebook` defines it."""
    cells = json.loads((REPO / "notebooks" / notebook).read_text())["cells"]
    for cell in cells:
        source = "".join(cell["source"])
        if cell["cell_type"] != "code" or f"def {name}(" not in source:
            continue
        tree = ast.parse("\n".join("" if ln.lstrip().startswith(("%", "!")) else ln for ln in source.splitlines()))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                return ast.get_source_segment(source, node)
    raise LookupError(f"{notebook} defines no function {name}")


def notebook_loop(model, opt, batches, steps, dev):
    """Notebook 02's inline loop: the `train_steps` its cell defines, run as written there."""
    namespace = {"time": time, "F": F, "dev": dev}
    exec(compile(notebook_function("train_steps"), "02_first_cnn.ipynb", "exec"), namespace)
    return namespace["train_steps"](model, opt, batches, steps)


@pytest.mark.parametrize("loop", [nb02.train_steps, notebook_loop], ids=["library", "notebook"])
def test_the_loop_trains_exactly_like_train_fit(loop):
    """Same initial weights and batches: the loop's losses and weights are train.fit's."""
    def fresh():
        torch.manual_seed(0)
        return models.SmallCNN(width=4, resolution=16)

    loader = lambda: nb02.shapes_loader(4 * 8, resolution=16, batch_size=8, seed=1)  # noqa: E731
    model, losses = fresh(), []
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    batches = iter(loader())
    for _ in range(4):
        losses.append(loop(model, opt, batches, 1, "cpu")[1].item())
    ref = fresh()
    h = train.fit(ref, loader(), train.TrainConfig(lr=3e-3, weight_decay=0.01, log_every=1,
                                                    device="cpu"))
    assert h.step[-1] == 4
    assert torch.allclose(torch.tensor(losses), torch.tensor(h.loss), rtol=1e-6, atol=0)
    for a, b in zip(model.state_dict().values(), ref.state_dict().values()):
        assert torch.allclose(a.float(), b.float(), rtol=1e-6, atol=1e-7)


def test_train_steps_returns_the_wait_for_slow_batches():
    def slow():
        while True:
            time.sleep(0.02)
            yield torch.randn(2, 3, 8, 8), torch.tensor([0, 1])

    model = tiny_net(2)
    wait, loss = nb02.train_steps(model, torch.optim.SGD(model.parameters(), lr=0.1), slow(),
                                  3, "cpu")
    assert wait >= 3 * 0.02 and loss.dim() == 0


def test_time_steps_counts_only_the_timed_calls():
    calls = []
    r = nb02.time_steps(lambda: calls.append(1) or 0.0, name="x", device="cpu", images=10,
                        repeats=3, warmup=2)
    assert len(calls) == 5 and r.timing.runs == 3 and r.data_wait_share == 0.0
    assert r.timing.rate == pytest.approx(10 / r.timing.median_s)


def test_time_steps_in_turns_pairs_the_runs_and_keeps_the_timed_calls_waits():
    import time

    first = {"a": True}

    def run_a():  # waits 10 ms of the 15 it takes; its warm-up call reports a wait to be dropped
        time.sleep(0.015)
        if first["a"]:
            first["a"] = False
            return 99.0
        return 0.010

    rows = nb02.time_steps_in_turns({"a": run_a, "b": lambda: time.sleep(0.005) or 0.0},
                                    device="cpu", images=4, repeats=3, warmup=1)
    a, b = rows
    assert [r.timing.name for r in rows] == ["a", "b"] and a.timing.runs == b.timing.runs == 3
    assert a.waits == (0.010,) * 3 and a.wait_s == 0.010 and b.wait_s == 0.0
    assert a.timing.turns_id is not None and a.timing.turns_id == b.timing.turns_id
    assert 0.2 < a.data_wait_share <= 0.010 / 0.015 and "data wait" in str(a) and "(10 ms a call)" in str(a)
    rest = a.rest()
    assert rest.samples == tuple(s - 0.010 for s in a.timing.samples)
    assert rest.device == a.timing.device and rest.work == 4
    assert bench.speedup(rest, b.timing).rounds == 3  # paired with the rows of its turns
    with pytest.raises(ValueError, match="repeats"):
        nb02.time_steps_in_turns({"a": run_a}, device="cpu", images=1, repeats=0)


def test_beyond_chance_is_the_binomial_tail():
    assert nb02.beyond_chance(0, 2, 0.5) == pytest.approx(1.0)
    assert nb02.beyond_chance(1, 2, 0.5) == pytest.approx(0.75)
    assert nb02.beyond_chance(2, 2, 0.5) == pytest.approx(0.25)
    assert nb02.beyond_chance(3, 3, 1 / 6) == pytest.approx(1 / 216)
    assert 0.4 < nb02.beyond_chance(334, 2000, 1 / 6) < 0.6  # the mean of guessing: about even
    assert 1e-5 < nb02.beyond_chance(400, 2000, 1 / 6) < 1e-4  # 20 % of 2,000, 4 sd above the mean
    with pytest.raises(ValueError, match="correct"):
        nb02.beyond_chance(5, 4, 0.5)


def test_warmup_uses_up_the_batches_the_workers_prepared_ahead():
    assert nb02.warmup_calls(0, 4) == 1  # no workers: one call, nothing prepared ahead
    assert nb02.warmup_calls(8, 4) == 1 + 4  # 8 workers x 2 batches = 16 batches = 4 calls of 4
    assert nb02.warmup_calls(2, 4) == 1 + 1 and nb02.warmup_calls(3, 4) == 1 + 2  # rounded up
    assert nb02.warmup_calls(2, 4, prefetch_factor=4) == 1 + 2
    with pytest.raises(ValueError, match="steps"):
        nb02.warmup_calls(2, 0)


def _loader_call(made: dict):
    """A loader's call of 2 steps, as the notebook's: its batches come from a buffer of `made["ready"]`
    batches prepared ahead, then take 10 ms each to make; returns the seconds it waited."""
    import time

    def batches():
        while True:
            if made["ready"]:
                made["ready"] -= 1
            else:
                time.sleep(0.01)  # a batch made now
            yield torch.zeros(1), torch.zeros(1)

    it = batches()

    def call():
        t0 = time.perf_counter()
        for _ in range(2):
            next(it)
        return time.perf_counter() - t0
    return call


def test_a_full_prefetch_buffer_is_not_timed(monkeypatch):
    """Calls served from batches prepared during the warm-up would be fast: with the warm-up of
    warmup_calls, every timed call waits for batches made while it runs."""
    call = _loader_call({"ready": 2 * 2})  # 2 workers x prefetch_factor 2, ready before the loop starts
    r = nb02.time_steps(call, name="x", device="cpu", images=2, repeats=3,
                        warmup=nb02.warmup_calls(2, 2))
    assert r.timing.lo_s >= 2 * 0.01 * 0.9 and r.data_wait_share > 0.9


def test_a_loader_in_turns_is_drained_before_each_timed_call():
    """Workers fill their buffer again while the other runs have their turns: drain_calls untimed
    calls before each timed one use it up, so that no timed call is served from it."""
    made = {"ready": 0}
    loader_call = _loader_call(made)

    def other():  # meanwhile 2 workers x prefetch_factor 2 batches are made ready
        made["ready"] = 2 * 2
        return 0.0

    assert nb02.drain_calls(2, 2) == 2 and nb02.drain_calls(0, 4) == 0 and nb02.warmup_calls(3, 4) == 1 + 2
    loader, _ = nb02.time_steps_in_turns({"loader": loader_call, "other": other}, device="cpu", images=2,
                                         repeats=3, untimed={"loader": nb02.drain_calls(2, 2)})
    assert loader.timing.lo_s >= 2 * 0.01 * 0.9 and len(loader.waits) == 3 and min(loader.waits) >= 0.018
    made["ready"] = 0
    served, _ = nb02.time_steps_in_turns({"loader": loader_call, "other": other}, device="cpu", images=2, repeats=3)
    assert served.timing.lo_s < 0.01  # without the drain, a timed call takes the batches made ready


@pytest.mark.parametrize("workers", [0, 1])
def test_measure_loader_reports_images_per_s_and_data_wait(workers):
    r = nb02.measure_loader(workers, **TINY)
    assert_sane(r, runs=2)
    assert r.timing.name == f"workers={workers}" and r.timing.device.startswith("cpu")


def test_measure_loader_rejects_bad_settings():
    with pytest.raises(ValueError, match="num_workers"):
        nb02.measure_loader(-1, **TINY)
    with pytest.raises(ValueError, match="steps"):
        nb02.measure_loader(0, **{**TINY, "steps": 0})


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_measure_loader_pinned_on_gpu():
    r = nb02.measure_loader(1, True, **{**TINY, "device": "cuda"})
    assert_sane(r, runs=2)
    assert "+pin" in r.timing.name and not r.timing.device.startswith("cpu")


# -- real datasets ------------------------------------------------------------------------

def test_real_data_run_trains_on_files_that_exist(tmp_path):
    write_mnist_fixture(tmp_path, n=48)
    assert data.available("mnist", tmp_path)
    h = nb02.real_data_run("mnist", steps=3, batch_size=8, n_val=16, device="cpu", root=tmp_path)
    assert h.step[-1] == 3 and h.samples == 24
    assert 0.0 <= h.val_accuracy[-1] <= 1.0
    small = nb02.real_data_run("mnist", steps=10, batch_size=8, n_val=16, device="cpu",
                               root=tmp_path)  # 48 images: 6 batches, so two passes
    assert small.step[-1] == 10 and small.samples == 80


def test_real_data_run_missing_files_is_one_sentence(tmp_path):
    with pytest.raises(data.DatasetMissing, match="not found: put") as info:
        nb02.real_data_run("cifar10", steps=1, root=tmp_path)
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="Unknown dataset"):
        nb02.real_data_run("imagenet", root=tmp_path)


def test_beyond_workers_leaves_out_pinned_rows_faster_than_the_workers_can_draw():
    row = lambda v, hi: {"value": v, "unit": "kimg/s", "spread": [v * 0.9, hi]}  # noqa: E731
    ref = {"draw one image (ds[i])": row(2.0, 2.1), "SmallCNN workers=8": row(8.0, 13.0),
           "SmallCNN workers=8 +pin": row(10.0, 33.0), "SmallCNN workers=8 +pin +copy ahead": row(80.0, 89.0)}
    over, why = nb02.beyond_workers(ref, 8)  # 8 × 2.1 = 16.8 kimg/s at most
    assert over == ["SmallCNN workers=8 +pin", "SmallCNN workers=8 +pin +copy ahead"]
    assert "8 × 2.1 kimg/s (the upper quartile of its draw row)" in why
    assert nb02.beyond_workers(ref, 32) == ([], "")  # 32 workers could draw that fast
    assert nb02.beyond_workers({}, 8) == ([], "")


# -- the exercise and the words around the notebook's numbers ------------------------------

def _in_notebook(source: str):
    """A function defined as in a notebook (module __main__), e.g. nbgrader's stub."""
    namespace = {"__name__": "__main__"}
    exec(source, namespace)
    return next(v for k, v in namespace.items() if callable(v) and not k.startswith("__"))


def test_check_flatten_size_passes_the_answer_fails_the_snippets_and_reports_a_stub(capsys):
    nb02.check_flatten_size(lambda r: 64 * (r // 8) ** 2)
    assert capsys.readouterr().out.count("✓") == 4
    with pytest.raises(AssertionError, match="flatten size for 32×32"):
        nb02.check_flatten_size(lambda r: 64 * 8 * 8)  # the snippet's number
    with pytest.raises(AssertionError, match="100×100"):
        nb02.check_flatten_size(lambda r: round(64 * (r / 8) ** 2))  # pooling rounds down
    capsys.readouterr()
    nb02.check_flatten_size(_in_notebook("def flatten_size(r):\n    raise NotImplementedError()\n"))
    assert capsys.readouterr().out.startswith("not done yet: `flatten_size`")


def test_shape_lines_measure_the_models():
    torch.manual_seed(0)
    net = models.SmallCNN(num_classes=6, width=32)
    logits = {r: net(torch.zeros(4, 3, r, r)).shape for r in (32, 64)}
    text = nb02.shape_lines(net, logits, models.SmallCNN(width=16).features(torch.zeros(1, 3, 32, 32)))
    assert "SmallCNN(width=32): 94,246 parameters" in text
    assert "input (4, 3, 64, 64) -> logits (4, 6)" in text
    assert "(1, 64, 4, 4) -> flatten size 1,024, not 64·8·8 = 4,096" in text
    small = models.SmallCNN(width=4).features(torch.zeros(1, 3, 32, 32))
    assert "flatten size 256," in nb02.shape_lines(tiny_net(), {}, small)


def test_training_lines_give_each_epoch_the_time_and_the_checkpoint(tmp_path):
    ckpt = tmp_path / "m.pt"
    ckpt.write_bytes(b"x" * 2048)
    h = train.History(step=list(range(1, 11)), val_accuracy=[0.5, 0.75], train_time_s=3.21)
    text = nb02.training_lines(h, 640, "cpu", ckpt)
    assert text.splitlines()[:2] == ["epoch 1: val accuracy 50.0%", "epoch 2: val accuracy 75.0%"]
    assert "640 training images × 2 epochs (10 steps) in 3.2 s" in text
    assert text.splitlines()[-1] == "checkpoint: m.pt, 2.0 KiB"


def test_baseline_lines_say_ahead_or_behind_and_beyond_chance_or_not():
    ahead = nb02.baseline_lines(0.9, 0.4, 600, 3)
    assert "the CNN is +50.0 percentage points ahead on 600 unseen images" in ahead
    assert "guessing gets 240 or more of 600 right" in ahead
    assert ahead.endswith("beyond chance (under the 1 % this course requires)")
    behind = nb02.baseline_lines(0.15, 0.17, 60, 1)
    assert "behind" in behind
    assert behind.endswith("not shown to beat guessing (this course requires a chance under 1 %)")


def test_threads_line_says_when_workers_share_the_cores():
    assert nb02.threads_line(2, 2).endswith("(no core of its own)")
    assert nb02.threads_line(16, 8) == "this machine: 16 cores; the training process runs 8 torch threads"


def test_loaders_elsewhere_explains_a_cpu_run_and_compares_a_gpu_run():
    cpu = nb02.loaders_elsewhere("cpu")
    assert cpu.startswith("pin_memory, non_blocking and copy_ahead act on the copy") and "What GPUs measured" in cpu
    blocks = cpu.split("\n\n")  # read in blocks: why, the reference run, published figures
    assert len(blocks) == 3 and blocks[1].startswith("What GPUs") and blocks[2].startswith("figures published")
    assert nb02.loaders_elsewhere(torch.device("cuda")).startswith("For comparison, ")
    from course_lib import report
    apart = (report.reference("02_first_cnn")[1].get("SmallCNN batch in memory vs workers=0") or {}).get("apart")
    assert ("its loader rows are left out: an earlier version of this cell recorded them" in blocks[1]) == bool(apart)
    assert not apart or "SmallCNN workers=" not in blocks[1]  # an earlier record's loader rows: none printed
    rows, why = nb02.stale_rows()  # and none in the closing table either
    assert bool(rows) == bool(apart) and (not apart or ("SmallCNN workers=1" in rows and "SmallCNN batch in memory"
                                                        not in rows and "data wait SmallCNN workers=0" in rows))


def test_wait_lines_split_workers0_and_add_the_one_thread_rows():
    rows = nb02.time_steps_in_turns({"SmallCNN workers=0": lambda: time.sleep(0.004) or 0.003,
                                     "SmallCNN workers=1, 1 training thread": lambda: time.sleep(0.002) or 0.0,
                                     "ceiling": lambda: time.sleep(0.001) or 0.0,
                                     "ceiling 1 thread": lambda: time.sleep(0.002) or 0.0},
                                    device="cpu", images=4, repeats=3)
    base, one, ceilings = rows[0], rows[1], rows[2:]
    text = nb02.wait_lines(base, ceilings[:1], [one], 2)
    assert "waiting for batches" in text and "(medians of 3 calls)" in text and "1 training thread vs 2" not in text
    both = nb02.wait_lines(base, ceilings, [one], 2)
    assert "batch in memory, 1 training thread vs 2" in both and "vs its ceiling (1 thread): " in both
    assert "timed apart" not in both and "median of 3 paired turns" in both  # one set of turns


def test_resnet_lines_compare_the_layouts_intervals():
    def t(name, s):
        return bench.timing_of([s, s * 1.01, s * 0.99], name=name, device="cpu", work=8, unit="img/s")

    rows = [t("r fp32 NCHW", 0.2), t("r fp32 channels_last", 0.1)]
    small = bench.Ratio("SmallCNN channels_last vs NCHW", 1.0, 0.95, 1.05)
    big = bench.Ratio("r fp32 channels_last vs fp32 NCHW", 2.0, 1.9, 2.1)
    apart = nb02.resnet_lines(rows, [big], small, "r", (64, 32), "cpu")
    assert "fastest here: r fp32 channels_last" in apart and "64 and 32" in apart
    assert "the layout's effect on the two models is not compared here: each ratio is paired within its own turns" \
        in apart and "batches 64 and 32" in apart and "differs between the two models" not in apart
    assert "On a GPU" in apart  # and what 16 bits can do: here the reference GPU run
    close = bench.Ratio("r fp32 channels_last vs fp32 NCHW", 1.02, 0.9, 1.1)
    assert "overlap" not in nb02.resnet_lines(rows, [close], small, "r", (64, 32), "cpu")  # neither clear
    assert "fastest here: r fp32 channels_last at 80.0 img/s (not told apart from r fp32 NCHW by the repeats)" in \
        nb02.resnet_lines(rows, [close], small, "r", (64, 32), "cpu")
    assert "not told apart" not in apart  # 2.0× (1.9–2.1): told apart
    assert "fastest" not in nb02.resnet_lines([], [], small, "r", (64, 32), "cpu")
    drifted = bench.Ratio("r fp32 channels_last vs fp32 NCHW", 1.06, 1.01, 1.12, rounds=5, coverage=0.94, drift=0.114)
    unsettled = nb02.resnet_lines(rows, [drifted], bench.Ratio("s", 1.43, 1.36, 1.55), "r", (64, 32), "cpu")
    assert "is inconclusive here, so whether the layout's effect differs" in unsettled and "apart," not in unsettled


def test_cudnn_benchmark_absent_says_why():
    assert "nothing to measure" in nb02.cudnn_benchmark_absent("cpu")
    ref = report.reference("02_first_cnn")[1].get("cudnn.benchmark on vs off")
    if ref:  # the reference's figure with its interval and what it measured
        text = nb02.cudnn_benchmark_absent("cpu")
        assert report.fmt_row("cudnn.benchmark on vs off", ref) in text and "recorded reference run on" in text
    assert "ran out of memory" in nb02.cudnn_benchmark_absent(torch.device("cuda"))


def test_draw_vs_wait_sets_the_draw_beside_workers0s_wait_per_image():
    from course_lib import bench
    draw = bench.timing_of([0.0016] * 5, name="draw one image (ds[i])", device="cpu", work=1, unit="img/s")
    again = bench.timing_of([0.0007] * 5, name="draw one image, again", device="cpu", work=1, unit="img/s")
    calls = bench.timing_of([1.0, 1.02, 0.98, 1.1, 1.0], name="SmallCNN workers=0", device="cpu", work=512,
                            unit="img/s")
    base = nb02.Throughput(calls, 0.5, (0.5, 0.52, 0.48, 0.6, 0.5))
    text = nb02.draw_vs_wait(draw, again, base, 512)
    assert text.splitlines()[0] == ("SmallCNN workers=0 waited 500 ms a call for its 512 images: 977 µs an image "
                                    "(fastest–slowest call: 938 µs–1.17 ms)")
    assert text.splitlines()[1].startswith("that is 1.40× one image drawn alone just after these turns, 700 µs")
    assert text.endswith("(section 2 measured 1.6 ms at another moment)") and len(text.splitlines()) == 2
    assert "two moments, so its range, 1.34–1.67×, is within 2.5× of 1" in text  # the calls' fastest–slowest
    assert max(map(len, text.splitlines())) < 240


def test_reference_waits_reads_the_reference_rows():
    row = lambda v, unit="kimg/s": {"value": v, "unit": unit}  # noqa: E731
    ref = {"SmallCNN workers=0": row(1.66), "SmallCNN workers=1": row(1.87), "draw one image (ds[i])": row(2.07),
           "SmallCNN batch in memory": row(93.2)}
    line = nb02.reference_waits(ref, "GPU X")
    assert line == ("reference (GPU X, its own batch; timed apart): 0 and 1 worker fed 1.66 and 1.87 kimg/s, 0.80× and "
                    "0.90× its one-image draw rate (2.07) and 56× below a batch in memory (93.2)")
    waits = {**ref, "data wait SmallCNN workers=0": row(88.8, "%"), "data wait SmallCNN workers=1": row(94.3, "%")}
    assert nb02.reference_waits(waits, "GPU X").endswith(": their data-wait shares, 89% and 94%, say both waited on "
                                                         "drawing")
    assert nb02.reference_waits({**ref, "SmallCNN batch in memory": row(93.2, "img/s")}, "GPU X") == ""  # units differ
    assert nb02.reference_waits({k: v for k, v in ref.items() if "workers=1" not in k}, "GPU X") == ""
    recorded = nb02.reference_waits()  # the recorded reference run, when it has these rows
    assert recorded == "" or (recorded.startswith("reference (") and len(recorded) < 260)


def test_loader_takeaway_says_the_wait_moved_and_what_the_speed_did():
    def thr(name, s, share):
        return nb02.Throughput(bench.timing_of([s, s * 1.01, s * 0.99], name=name, device="cpu", work=8,
                                               unit="img/s"), share)

    base, one, two = thr("w0", 1.0, 0.49), thr("w1", 0.9, 0.01), thr("w2", 0.91, 0.02)
    unsure = [bench.ratio_of("w1 vs w0", 1.10, 0.96, 1.26, apart=True), bench.ratio_of("w2", 1.08, 1.01, 1.21, apart=True)]
    said = nb02.loader_takeaway(base, [one, two], unsure, 2)
    assert "data wait 49% of a call with workers=0, 1%–2% with workers" in said and "cannot tell" in said
    assert "would be 1.96× faster (its median time over that time less its median wait), under the 2.5× by which two " \
        "moments can differ" in said  # 1 / (1 - 0.49)
    waits = thr("w0", 1.0, 0.7)  # a wait of 70 %: 3.3x is within reach of timings taken apart
    assert "under the 2.5×" not in nb02.loader_takeaway(waits, [one, two], unsure, 2)
    paired = [bench.ratio_of("w1 vs w0", 1.02, 0.96, 1.08), bench.ratio_of("w2", 0.99, 0.95, 1.04)]
    in_turns = nb02.loader_takeaway(base, [one, two], paired, 2)  # in turns: the bound, not the moments' rule
    assert "cannot tell" in in_turns and in_turns.endswith("1.96× faster (its median time over that time less its median wait)")
    sure = [bench.ratio_of("w1 vs w0", 1.9, 1.7, 2.1), bench.ratio_of("w2", 1.8, 1.6, 2.0)]
    assert "their calls ran faster: w1 1.90×; w2 1.80×" in nb02.loader_takeaway(base, [one, two], sure, 8)
    slow = [bench.ratio_of("SmallCNN workers=1 vs workers=0", 0.9, 0.88, 0.92)]
    said = nb02.loader_takeaway(base, [one], slow, 2)
    assert "their calls ran slower: workers=1 1.11×" in said and said.startswith("takeaway:\n  fastest loader setting here: workers=0")
    assert nb02.loader_takeaway(base, [], [], 2) == ""


def test_an_earlier_records_gpu_rows_are_derived_or_noted(tmp_path, monkeypatch):
    from course_lib import report
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    rep = report.Report("02_first_cnn", "gpu", "cpu")
    rep.meta.update(device="NVIDIA Test GPU", device_type="cuda")
    gpu_resnet = nb02.profiles.sizes("02_first_cnn", "gpu", memory_gib=80).resnet
    rep.add(f"{gpu_resnet} bf16 NCHW", 2.0, "kimg/s")
    rep.add(f"{gpu_resnet} bf16 channels_last", 3.0, "kimg/s")
    rep.rows["cudnn.benchmark on vs off"] = {"value": 1.003, "unit": "×", "spread": [1.0004, 1.006], "apart": True}
    report.record_reference({"02_first_cnn": rep.to_dict()})
    assert f"{gpu_resnet} bf16 channels_last over bf16 NCHW: 1.50×, the ratio of the two rows' medians" in \
        nb02.sixteen_bits_here("cpu")
    assert "(recorded by an earlier version of this cell, which timed the tuned step alone" in \
        nb02.cudnn_benchmark_absent("cpu")


def test_loader_takeaway_bounds_workers_0_by_its_calls_less_their_waits():
    t = bench.timing_of([1.0, 1.01, 0.99], name="w0", device="cpu", work=8, unit="img/s")
    base = nb02.Throughput(t, 0.49, waits=(0.5, 0.48, 0.5))  # the rest: 0.5, 0.53, 0.49 s, median 0.5
    one = nb02.Throughput(bench.timing_of([0.9, 0.91, 0.89], name="w1", device="cpu", work=8, unit="img/s"), 0.01)
    said = nb02.loader_takeaway(base, [one], [bench.ratio_of("w1 vs w0", 1.02, 0.96, 1.08)], 2)
    assert said.endswith("would be 2.00× faster (its median call over the median of its calls less their wait)")
