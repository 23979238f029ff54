"""course_lib.lessons.nb05: DataParallel's arithmetic on one device, against full-batch training and
against PyTorch's own scatter and DataParallel where there are GPUs."""

import copy
import json
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from course_lib import models
from course_lib.lessons import nb05

pytestmark = pytest.mark.versioned  # DataParallel: make test-oldest runs it


def _batch(n: int, res: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(n, 3, res, res), torch.randint(0, 6, (n,))


def ceil_rule(n: int, k: int) -> list[int]:
    """The exercise's answer: ceil(n / k) rows per piece, the last one what is left."""
    size = math.ceil(n / k)
    return [size] * (n // size) + ([n % size] if n % size else [])


@pytest.mark.parametrize("k", range(1, 10))
def test_scatter_sizes_follow_the_ceil_rule(k):
    for n in range(1, 41):
        assert nb05.scatter_sizes(n, k) == ceil_rule(n, k), (n, k)


def test_scatter_can_leave_devices_idle():
    sizes = nb05.scatter_sizes(9, 4)
    assert len(sizes) < 4 and sum(sizes) == 9


@pytest.mark.parametrize("n, k", [(0, 2), (4, 0), (-1, 3)])
def test_scatter_sizes_refuses_empty_batches_and_no_devices(n, k):
    with pytest.raises(ValueError):
        nb05.scatter_sizes(n, k)


def test_scatter_sizes_without_enough_gpus_is_what_scatter_calls():
    k = torch.cuda.device_count() + 1  # always more devices than there are
    assert nb05.scatter_sizes(10, k) == [len(c) for c in torch.arange(10).chunk(k)]


@pytest.mark.parametrize("n, k", [(12, 2), (10, 4), (9, 4), (5, 8)])
def test_data_parallel_step_gives_the_full_batch_gradient(n, k):
    x, y = _batch(n)
    model = models.mlp(8, 32)
    full = copy.deepcopy(model)
    out, loss = nb05.data_parallel_step(model, x, y, k)
    full_out = full(x)
    F.cross_entropy(full_out, y).backward()
    torch.testing.assert_close(out, full_out.detach(), rtol=1e-5, atol=1e-6)
    for p, q in zip(model.parameters(), full.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-6)


def test_averaging_per_replica_gradients_is_not_the_full_batch_gradient_for_unequal_chunks():
    """The reason the loss goes after the gather: 10 rows over 4 replicas are 3+3+3+1, and the
    mean of the four chunk means weights the last row 3x too much."""
    x, y = _batch(10)
    model = models.mlp(8, 32)
    nb05.data_parallel_step(model, x, y, 4)
    averaged = copy.deepcopy(model)
    averaged.zero_grad(set_to_none=True)
    for xc, yc in zip(x.chunk(4), y.chunk(4)):
        (F.cross_entropy(averaged(xc), yc) / 4).backward()
    diff = max((p.grad - q.grad).abs().max().item()
               for p, q in zip(model.parameters(), averaged.parameters()))
    assert diff > 1e-4


def test_batchnorm_replicas_normalise_by_their_own_chunk_and_keep_replica_0_statistics():
    x, y = _batch(16, res=8)
    model = models.SmallCNN(width=4, resolution=8)
    start = copy.deepcopy(model)
    out, _ = nb05.data_parallel_step(model, x, y, 2)
    assert (out - copy.deepcopy(start)(x).detach()).abs().max() > 1e-3
    only_chunk_0 = copy.deepcopy(start)
    only_chunk_0(x.chunk(2)[0])
    for name, buf in model.named_buffers():
        torch.testing.assert_close(buf, dict(only_chunk_0.named_buffers())[name], rtol=0, atol=0)


def test_replicas_share_the_first_copy_and_copy_the_rest():
    model = nn.Linear(3, 4)
    r = nb05.replicas(model, 3)
    assert r[0] is model and len(r) == 3
    assert r[1].weight.data_ptr() != model.weight.data_ptr()
    torch.testing.assert_close(r[2].weight, model.weight)


def test_thread_apply_matches_a_loop_and_keeps_the_grad_mode():
    mods = [nn.Linear(4, 4) for _ in range(3)]
    xs = list(torch.randn(3, 2, 4))
    outs = nb05.thread_apply(mods, xs)
    for m, xi, o in zip(mods, xs, outs):
        torch.testing.assert_close(o, m(xi))
        assert o.requires_grad
    with torch.no_grad():
        assert not any(o.requires_grad for o in nb05.thread_apply(mods, xs))


def test_thread_apply_raises_a_threads_exception_in_the_caller():
    with pytest.raises(RuntimeError):  # a shape mismatch inside the second thread
        nb05.thread_apply([nn.Linear(4, 4), nn.Linear(5, 4)], [torch.randn(2, 4), torch.randn(2, 4)])
    with pytest.raises(ValueError):
        nb05.thread_apply([nn.Linear(4, 4)], [])


def test_state_bytes_counts_parameters_and_buffers():
    assert nb05.state_bytes(nn.Linear(3, 4)) == (12 + 4) * 4
    bn = nn.BatchNorm1d(5)  # weight, bias, running mean and var (fp32), num_batches_tracked (int64)
    assert nb05.state_bytes(bn) == 4 * 5 * 4 + 8


def test_check_chunk_sizes_accepts_scatters_rule():
    nb05.check_chunk_sizes(ceil_rule)


def test_called_names_reads_calls_not_docstrings():
    def sizes(n, k):
        """Not ``x.chunk(k)``."""
        return [len(p) for p in torch.arange(n).split(3)]

    assert {"split", "arange", "len"} <= nb05.called_names(sizes)
    assert "chunk" not in nb05.called_names(sizes)
    assert nb05.called_names(print) == set()  # a builtin has no Python source


@pytest.mark.parametrize("wrong", [
    lambda n, k: [n // k + (i < n % k) for i in range(k)],  # balanced split: not what chunk does
    lambda n, k: [n // k] * k,  # loses the remainder
    lambda n, k: [len(c) for c in torch.arange(n).chunk(k)],  # right, but PyTorch answers
])
def test_check_chunk_sizes_rejects_other_splits(wrong):
    with pytest.raises(AssertionError):
        nb05.check_chunk_sizes(wrong)


@pytest.mark.gpu
def test_on_two_gpus_data_parallel_matches_the_one_device_arithmetic():
    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs")
    assert nb05.scatter_sizes(10, 2) == ceil_rule(10, 2) == [5, 5]
    x, y = _batch(10)
    model = models.mlp(8, 32).cuda()
    ref = copy.deepcopy(model)
    F.cross_entropy(nn.DataParallel(model, device_ids=[0, 1])(x.cuda()), y.cuda()).backward()
    nb05.data_parallel_step(ref, x.cuda(), y.cuda(), 2)
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-6)


def test_replica_procs_times_every_model_in_every_round(tmp_path):
    from course_lib import launcher

    run = launcher.launch("replica_procs", ["--model=16,4,2", "--model=64,2,8", "--seconds=0.05",
                                            "--rounds=2", f"--out={tmp_path}"], nproc=2, timeout_s=120,
                      echo=False)
    assert run.returncode == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["world_size"] == 2
    assert set(results["seconds_per_call"]) == {"16,4,2", "64,2,8"}
    for ways in results["seconds_per_call"].values():
        assert set(ways) == {"one after another", "a thread each", "a process each"}
        assert all(len(rounds) == 2 and min(rounds) > 0 for rounds in ways.values())


def _ratio(value: float, lo: float, hi: float) -> "nb05.Ratio":
    return nb05.Ratio("r", value, lo, hi, rounds=5, coverage=0.94, drift=0.0)


def test_gil_verdict_reads_where_threads_helped_from_the_ranges():
    threads = {"small layers": _ratio(0.41, 0.39, 0.56), "large layers": _ratio(1.70, 1.37, 1.85)}
    procs = {"small layers": _ratio(1.85, 1.77, 1.97), "large layers": _ratio(1.89, 1.87, 1.97)}
    line = nb05.gil_verdict(threads, procs)
    assert "small layers 0.41× (slower)" in line and "large layers 1.70× (faster)" in line
    assert "only on the large layers, whose ops run long in C++" in line and "own GIL, beat the threads" in line
    threads["large layers"] = _ratio(1.02, 0.95, 1.10)  # within the spread: helped neither
    line = nb05.gil_verdict(threads, procs)
    assert "no measurable difference" in line and "neither model" in line and "undecided" not in line
    threads["large layers"] = _ratio(1.61, 0.80, 2.30)  # a gain the repeats cannot tell from none
    line = nb05.gil_verdict(threads, procs)
    assert "large layers 1.61× (too wide to tell)" in line and "no measurable difference" not in line
    assert "neither model here, beyond the spread; the large layers' 1.61× is undecided, not no gain" in line
    with pytest.raises(ValueError):
        nb05.gil_verdict({"small layers": threads["small layers"]}, procs)


def test_gil_verdict_reads_processes_against_threads_from_their_paired_ratio():
    threads = {"small layers": _ratio(0.41, 0.39, 0.56), "large layers": _ratio(1.70, 1.37, 1.85)}
    procs = {"small layers": _ratio(2.00, 1.98, 2.01), "large layers": _ratio(1.89, 1.87, 1.97)}
    line = nb05.gil_verdict(threads, procs, over_threads=_ratio(4.6, 3.5, 4.9))
    assert "a process each (timed in the same turns)" in line and "timed at another moment" not in line
    assert "a process each vs a thread each (paired): 4.60× (3.50–4.90), a process per replica" in line
    line = nb05.gil_verdict(threads, procs, over_threads=_ratio(0.5, 0.4, 0.6))
    assert "the threads beat a process per replica" in line and "own GIL, beat" not in line
    line = nb05.gil_verdict(threads, procs, over_threads=_ratio(1.01, 0.97, 1.05))
    assert line.endswith("(0.97–1.05), no measurable difference")


# ---- the lines the cells print follow what they are given --------------------------------------

def test_attempt_returns_the_result_or_the_exception_and_says_which():
    result, said = nb05.attempt("x = 1 + 1", lambda: 2)
    assert result == 2 and said == "x = 1 + 1\n    runs"
    err, said = nb05.attempt("x = 1 / 0", lambda: 1 / 0)
    assert isinstance(err, ZeroDivisionError) and said == "x = 1 / 0\n    raises ZeroDivisionError: division by zero"


def test_kept_ids_speaks_of_a_dataparallel_only():
    assert nb05.kept_ids(nn.Linear(2, 2)) == ""
    wrapped = nn.DataParallel(nn.Linear(2, 2), device_ids=[]) if not torch.cuda.is_available() else None
    if wrapped is not None:  # without CUDA, DataParallel keeps no device
        assert "device_ids = []" in nb05.kept_ids(wrapped) and "in one piece" in nb05.kept_ids(wrapped)


def test_running_mean_text_quotes_the_storage_promise():
    doc = "Implements data parallelism. The first replica shares storage. Sharing storage with the module."
    text = nb05.running_mean_text(0.0123, by_construction=True,
                                  doc="A. the replica on device[0] is sharing storage with x. B.")
    assert "up to 0.0123" in text and "by construction" in text
    assert text.endswith("PyTorch's documentation: the replica on device[0] is sharing storage with x.")
    plain = nb05.running_mean_text(0.5, by_construction=False, doc=doc[:20])
    assert "by construction" not in plain and plain.endswith("(no storage promise in this PyTorch's docs)")


def test_ways_text_gives_the_time_per_layer():
    ways = {w: nb05.bench.Timing(f"small: {w}", "cpu", t, 0.0, 5) for w, t in
            (("one after another", 0.08), ("a thread each", 0.05))}
    lines = nb05.ways_text("small layers", (64, 20, 8), 2, ways).splitlines()
    assert lines[0] == "small layers: 20 × Linear(64, 64) on 8 rows, 2 replicas; 2 ms per layer one after another"
    assert lines[1] == f"  {ways['one after another']}" and len(lines) == 3


def test_bytes_moved_text_and_logits_text_add_up():
    text = nb05.bytes_moved_text("mlp", 2**20, 2**20 + 1024, {2: (2**20 + 1024, 2**20, 2**20)})
    assert "mlp: 1.0 MiB of parameters, 1.0 KiB of buffers" in text and "DDP sends 1.0 MiB from each GPU" in text
    assert "2.0 MiB in all" in text and "totals over all links" in text  # DDP's total beside DataParallel's
    logits = nb05.logits_text((3, 2, 4), [2, 1, 0], [64.0, 32.0, 0.0], 96.0).splitlines()
    assert logits[0] == "logits (3, 2, 4) over 3 GPUs, arithmetic:" and "= 448 B" in logits[1]  # 64 + 4 × 96
    assert "an estimate, not measured here" in logits[1] and "bound" not in logits[1]
    assert logits[2] == "  GPU 1: piece of 1 sequence(s), 32 B" and logits[3].startswith("  GPU 2: piece of 0")


def test_earlier_processes_reads_the_references_apart_rows(monkeypatch):
    rows = {"small layers: a process each vs one after another (timed apart, unpaired)":
            {"value": 2.31, "unit": "×", "spread": [1.96, 2.47]},
            "small layers: a thread each vs one after another": {"value": 0.41, "unit": "×", "spread": [0.37, 0.63]}}
    monkeypatch.setattr(nb05.report, "reference", lambda notebook: ("NVIDIA H200", rows))
    text = nb05.earlier_processes().splitlines()
    assert text[0].startswith("the reference machine's host CPU timed a process each apart") and len(text) == 2
    assert "2.31" in text[1] and "inconclusive" in text[1]  # two moments, under 2.5x
    monkeypatch.setattr(nb05.report, "reference", lambda notebook: (None, {}))
    assert nb05.earlier_processes() == ""


def test_without_gpus_text_falls_back_to_published_scaling(monkeypatch):
    monkeypatch.setattr(nb05.report, "references", lambda notebook: [("NVIDIA H200", {"GPUs": {"value": 1}})])
    monkeypatch.setattr(nb05.published, "elsewhere", lambda notebook, prefixes=(), keys=(): "PUBLISHED")
    text = nb05.without_gpus_text(0, "threads: 1.0×\n  why")
    assert text.startswith("0 GPU(s) here") and "no reference run with 2 GPUs" in text and "PUBLISHED" in text
    assert "DataParallel against DDP on 2 GPUs" in text
    assert text.endswith("threads: 1.0×; why")  # the verdict on one line
    two = {"GPUs": {"value": 2, "unit": "GPUs"}, "DDP, 2 GPU(s)": {"value": 900.0, "unit": "img/s", "note": ""},
           "other": {"value": 1.0, "unit": "x"}}
    monkeypatch.setattr(nb05.report, "references", lambda notebook: [("NVIDIA H200", two)])
    ref = nb05.reference_text().splitlines()
    assert ref[0] == "reference run on 2 × NVIDIA H200:" and len(ref) == 2 and "DDP, 2 GPU(s)" in ref[1]


def test_reference_text_without_a_reference_shows_the_published_dataparallel_timing(monkeypatch):
    monkeypatch.setattr(nb05.report, "references", lambda notebook: [])
    text = nb05.reference_text()
    dp = nb05.published.get("hf_transformers_dp_vs_ddp_2x_titan_rtx_gpt2")
    assert text.index("no reference run") < text.index(f"published by {dp.by}") and dp.figure in text
    assert "no DataParallel figure" not in text


def _img_s(name: str, rate: float) -> "nb05.bench.Timing":
    return nb05.bench.timing_of([100 / rate * f for f in (0.99, 1.0, 1.01)], name=name, device="cpu",
                                work=100, unit="img/s")


def test_scaling_text_compares_ddp_with_dataparallel_and_each_with_one_gpu():
    runs = {1: dict(dp=_img_s("DataParallel, 1 GPU(s)", 1000), ddp=_img_s("DDP, 1 GPU(s)", 1000),
                    dp_peak=[2**20], ddp_peak=[2**20]),
            2: dict(dp=_img_s("DataParallel, 2 GPU(s)", 1500), ddp=_img_s("DDP, 2 GPU(s)", 1900),
                    rep=nb05.bench.Timing("replicate to 2 GPUs", "cuda:0", 0.002, 0.0, 5), rep_share=0.2,
                    dp_peak=[3 * 2**20, 2**20], ddp_peak=[2**20, 2**20])}
    text = nb05.scaling_text(runs, "mlp on H200")
    assert text.startswith("mlp on H200\n") and "DDP vs DataParallel, 2 GPU(s): 1.27×" in text
    assert "  replicate: 2 ms per step, 20% of a DataParallel step" in text
    assert "peak MiB per GPU: DataParallel [3, 1], DDP [1, 1]" in text
    assert "DataParallel, 2 GPU(s) vs 1 GPU: 1.50× " in text and "75% of the ideal 2×" in text
    assert text.endswith("95% of the ideal 2×") and text.count("replicate:") == 1


def test_gil_verdict_says_why_a_process_ratio_is_inconclusive():
    threads = {"small layers": _ratio(0.41, 0.39, 0.56), "large layers": _ratio(1.70, 1.37, 1.85)}
    apart = {n: nb05.Ratio(n, 1.94, 1.85, 2.04, apart=True) for n in ("small layers", "large layers")}
    line = nb05.gil_verdict(threads, apart)  # timed apart, under 2.5x: not the machine's drift in turns
    assert "1.94× (inconclusive: timed at two moments)" in line and "drifted" not in line
