"""course_lib.profiling: reading a torch.profiler trace (steps, breakdown, syncs) and SyncCounter."""

import json
import math
import random
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.profiler import ProfilerActivity, profile, schedule  # noqa: E402

from course_lib import plot, profiling  # noqa: E402
from course_lib.profiling import CPU_CATEGORIES, GPU_CATEGORIES  # noqa: E402

pytestmark = pytest.mark.versioned  # torch.profiler and Dynamo's log: make test-oldest runs it

# ---- real traces: a tiny CPU training step under torch.profiler --------------------------


def _trainer(items: int, nonzero: bool):
    model = nn.Linear(8, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(16, 8), torch.randn(16, 4)

    def step():
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        for _ in range(items):
            loss.item()
        if nonzero:
            x.nonzero()

    return step


def _profile_trace(path, step):
    """3 profiled steps (1 warm-up) written with export_chrome_trace, read back."""
    with profile(activities=[ProfilerActivity.CPU],
                 schedule=schedule(wait=0, warmup=1, active=3, repeat=1)) as prof:
        for _ in range(4):
            step()
            prof.step()
    prof.export_chrome_trace(str(path))
    return profiling.load_trace(path)


K_ITEMS = 3


@pytest.fixture(scope="module")
def synced_events(tmp_path_factory):
    """A step that calls loss.item() K_ITEMS times and x.nonzero() once."""
    return _profile_trace(tmp_path_factory.mktemp("trace") / "synced.json", _trainer(K_ITEMS, True))


@pytest.fixture(scope="module")
def plain_events(tmp_path_factory):
    return _profile_trace(tmp_path_factory.mktemp("trace") / "plain.json", _trainer(0, False))


def test_load_trace_keeps_complete_events_in_time_order(synced_events):
    assert synced_events
    assert all(e["ph"] == "X" and "dur" in e for e in synced_events)
    ts = [e["ts"] for e in synced_events]
    assert ts == sorted(ts)
    assert any(e.get("cat") == "cpu_op" for e in synced_events)


def test_steps_finds_the_three_active_steps(synced_events):
    ranges = profiling.steps(synced_events)
    assert len(ranges) == 3
    assert all(s < e for s, e in ranges)
    assert all(e1 <= s2 for (_, e1), (s2, _) in zip(ranges, ranges[1:]))  # in order, disjoint


def test_load_trace_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        profiling.load_trace(tmp_path / "missing.json")


def test_trace_without_profiler_steps(tmp_path):
    model = nn.Linear(8, 4)
    with profile(activities=[ProfilerActivity.CPU]) as prof:  # no schedule, no prof.step()
        model(torch.randn(2, 8)).sum().backward()
    prof.export_chrome_trace(str(tmp_path / "nosteps.json"))
    events = profiling.load_trace(tmp_path / "nosteps.json")
    assert events
    with pytest.raises(ValueError):
        profiling.steps(events)
    with pytest.raises(ValueError):
        profiling.breakdown(events, "cpu")
    with pytest.raises(ValueError):
        profiling.syncs(events)


def test_load_trace_filters_and_sorts_a_written_file(tmp_path):
    complete = [{"ph": "X", "name": f"op{i}", "cat": "cpu_op", "ts": float(t), "dur": 1.0}
                for i, t in enumerate([30, 10, 20, 5])]
    other = [{"ph": "M", "name": "process_name", "args": {}},
             {"ph": "i", "name": "instant", "ts": 1.0},
             {"ph": "X", "name": "no duration", "ts": 2.0}]
    doc = complete + other
    random.Random(0).shuffle(doc)
    (tmp_path / "obj.json").write_text(json.dumps({"traceEvents": doc}))
    (tmp_path / "list.json").write_text(json.dumps(doc))  # the JSON-array form
    for name in ("obj.json", "list.json"):
        events = profiling.load_trace(tmp_path / name)
        assert [e["name"] for e in events] == ["op3", "op1", "op2", "op0"]


def test_cpu_breakdown_adds_up_to_each_step(synced_events):
    ranges = profiling.steps(synced_events)
    rows = profiling.breakdown(synced_events, "cpu")
    assert len(rows) == len(ranges) == 3
    for row, (s, e) in zip(rows, ranges):
        assert set(row) == set(CPU_CATEGORIES)
        assert all(v >= 0 for v in row.values())
        assert sum(row.values()) == pytest.approx((e - s) / 1e6, abs=1e-6)
        assert row["compute"] > 0  # the matmuls and the loss are ops


def test_cpu_breakdown_accepts_a_torch_device(plain_events):
    assert profiling.breakdown(plain_events, torch.device("cpu")) == profiling.breakdown(plain_events, "cpu")


def test_syncs_counts_item_and_nonzero_in_every_step(synced_events):
    per_step = profiling.syncs(synced_events)
    assert len(per_step) == 3
    for s in per_step:
        assert s.counts == {"aten::_local_scalar_dense": K_ITEMS, "aten::nonzero": 1}
        assert s.total == K_ITEMS + 1
        assert s.seconds >= 0
    for row in profiling.breakdown(synced_events, "cpu"):
        assert row["waiting"] >= 0


def test_syncs_of_a_step_without_them(plain_events):
    per_step = profiling.syncs(plain_events)
    assert len(per_step) == 3
    assert [s.total for s in per_step] == [0, 0, 0]
    assert [s.seconds for s in per_step] == [0.0, 0.0, 0.0]
    assert [row["waiting"] for row in profiling.breakdown(plain_events, "cpu")] == [0.0, 0.0, 0.0]


# ---- synthetic Chrome-trace events ------------------------------------------------------


def _ev(name, cat, ts, dur, tid=1, **args):
    e = {"ph": "X", "name": name, "cat": cat, "ts": float(ts), "dur": float(dur), "pid": 1, "tid": tid}
    if args:
        e["args"] = args
    return e


def _gpu(name, cat, ts, dur, correlation):
    return {"ph": "X", "name": name, "cat": cat, "ts": float(ts), "dur": float(dur), "pid": 0,
            "tid": 7, "args": {"correlation": correlation}}


def _gpu_trace():
    """Two CPU steps, [0, 100) and [100, 200) µs, launching work onto a GPU timeline.

    Step 1 on the GPU: kernel [1000, 1100), memcpy [1050, 1150) (half under the kernel),
    kernel [1200, 1250), memset [1300, 1320); it ends where step 2's first GPU work starts,
    1400. Step 2: kernel [1400, 1500), memcpy [1550, 1580); it ends at 1580. Work launched
    after the last step (kernel at 1600) and a kernel with no launch are ignored."""
    cpu = [_ev("ProfilerStep#1", "user_annotation", 0, 100),
           _ev("ProfilerStep#2", "user_annotation", 100, 100),
           _ev("cudaLaunchKernel", "cuda_runtime", 10, 2, correlation=1),
           _ev("cudaLaunchKernel", "cuda_runtime", 20, 2, correlation=2),
           _ev("cudaMemcpyAsync", "cuda_runtime", 30, 2, correlation=3),
           _ev("cudaMemsetAsync", "cuda_runtime", 40, 2, correlation=4),
           _ev("cudaLaunchKernel", "cuda_runtime", 110, 2, correlation=5),
           _ev("cudaMemcpyAsync", "cuda_runtime", 120, 2, correlation=6),
           _ev("cudaLaunchKernel", "cuda_runtime", 250, 2, correlation=7)]  # after the last step
    gpu = [_gpu("gemm", "kernel", 1000, 100, 1),
           _gpu("Memcpy HtoD", "gpu_memcpy", 1050, 100, 3),
           _gpu("relu", "kernel", 1200, 50, 2),
           _gpu("Memset", "gpu_memset", 1300, 20, 4),
           _gpu("gemm", "kernel", 1400, 100, 5),
           _gpu("Memcpy DtoH", "gpu_memcpy", 1550, 30, 6),
           _gpu("late", "kernel", 1600, 100, 7),
           _gpu("orphan", "kernel", 1340, 10, 99)]  # no launch with this correlation
    return sorted(cpu + gpu, key=lambda e: e["ts"])


def test_gpu_breakdown_by_hand():
    rows = profiling.breakdown(_gpu_trace(), "cuda")
    assert len(rows) == 2 and all(set(r) == set(GPU_CATEGORIES) for r in rows)
    # step 1: 1000..1400 µs; kernels 100 + 50; the copies outside kernels 50 + 20; idle 50 + 50 + 80
    assert rows[0]["compute"] == pytest.approx(150e-6, abs=1e-12)
    assert rows[0]["copies"] == pytest.approx(70e-6, abs=1e-12)
    assert rows[0]["waiting"] == pytest.approx(180e-6, abs=1e-12)
    # step 2: 1400..1580 µs, its last GPU event's end
    assert rows[1]["compute"] == pytest.approx(100e-6, abs=1e-12)
    assert rows[1]["copies"] == pytest.approx(30e-6, abs=1e-12)
    assert rows[1]["waiting"] == pytest.approx(50e-6, abs=1e-12)
    assert sum(rows[0].values()) == pytest.approx(400e-6, abs=1e-12)
    assert sum(rows[1].values()) == pytest.approx(180e-6, abs=1e-12)


def test_gpu_copy_under_a_kernel_is_compute_only():
    events = [_ev("ProfilerStep#1", "user_annotation", 0, 100),
              _ev("cudaLaunchKernel", "cuda_runtime", 10, 1, correlation=1),
              _ev("cudaMemcpyAsync", "cuda_runtime", 20, 1, correlation=2),
              _gpu("gemm", "kernel", 500, 100, 1),
              _gpu("Memcpy HtoD", "gpu_memcpy", 520, 40, 2)]  # wholly inside the kernel
    (row,) = profiling.breakdown(events, torch.device("cuda"))
    assert row == pytest.approx({"compute": 100e-6, "copies": 0.0, "waiting": 0.0}, abs=1e-12)


def test_gpu_kernels_launched_through_the_driver_count():
    events = [_ev("ProfilerStep#1", "user_annotation", 0, 100),
              _ev("cuLaunchKernel", "cuda_driver", 10, 1, correlation=1),  # a Triton kernel
              _ev("cudaLaunchKernel", "cuda_runtime", 20, 1, correlation=2),
              _gpu("triton_fused", "kernel", 500, 30, 1),
              _gpu("gemm", "kernel", 540, 60, 2)]
    (row,) = profiling.breakdown(events, "cuda")
    assert row == pytest.approx({"compute": 90e-6, "copies": 0.0, "waiting": 10e-6}, abs=1e-12)


def test_gpu_breakdown_needs_kernels():
    events = [_ev("ProfilerStep#1", "user_annotation", 0, 100),
              _ev("cudaLaunchKernel", "cuda_runtime", 10, 2, correlation=1),
              _ev("aten::mm", "cpu_op", 5, 20)]
    with pytest.raises(ValueError):
        profiling.breakdown(events, "cuda")


def test_self_times_subtract_direct_children():
    ops = [_ev("aten::linear", "cpu_op", 0, 100),
           _ev("aten::t", "cpu_op", 10, 20),
           _ev("aten::addmm", "cpu_op", 40, 30),
           _ev("aten::copy_", "cpu_op", 45, 10),  # inside addmm: a grandchild of linear
           _ev("aten::relu", "cpu_op", 20, 50, tid=2)]  # another thread, overlapping in time
    assert profiling._self_times(ops) == [50.0, 20.0, 20.0, 10.0, 50.0]


def test_cpu_breakdown_of_synthetic_ops():
    events = [_ev("ProfilerStep#1", "user_annotation", 0, 100),
              _ev("aten::linear", "cpu_op", 10, 50),
              _ev("aten::addmm", "cpu_op", 15, 30),
              _ev("aten::copy_", "cpu_op", 20, 10),
              _ev("aten::item", "cpu_op", 70, 10),
              _ev("aten::_local_scalar_dense", "cpu_op", 72, 6),
              _ev("autograd::engine::evaluate_function: AddmmBackward0", "cpu_op", 85, 5),
              _ev("aten::mm", "cpu_op", 150, 10)]  # outside every step
    (row,) = profiling.breakdown(events, "cpu")
    # self times: compute linear 20 + addmm 20 + item 4; copies 10; waiting 6; the rest is framework
    assert row == pytest.approx({"compute": 44e-6, "copies": 10e-6, "waiting": 6e-6,
                                 "framework": 40e-6}, abs=1e-12)


def test_syncs_count_a_runtime_call_inside_a_sync_op_once():
    events = [_ev("ProfilerStep#1", "user_annotation", 0, 100),
              _ev("ProfilerStep#2", "user_annotation", 100, 100),
              _ev("aten::_local_scalar_dense", "cpu_op", 10, 20),
              _ev("cudaMemcpyAsync", "cuda_runtime", 12, 2),
              _ev("cudaStreamSynchronize", "cuda_runtime", 15, 10),  # inside the op: not again
              _ev("cudaDeviceSynchronize", "cuda_runtime", 50, 5),  # on its own: counted
              _ev("cudaStreamSynchronize", "cuda_runtime", 150, 7),
              _ev("cudaDeviceSynchronize", "cuda_runtime", 300, 5)]  # after the last step
    first, second = profiling.syncs(events)
    assert first.counts == {"aten::_local_scalar_dense": 1, "cudaDeviceSynchronize": 1}
    assert first.seconds == pytest.approx(25e-6, abs=1e-12)
    assert second.counts == {"cudaStreamSynchronize": 1} and second.total == 1
    assert second.seconds == pytest.approx(7e-6, abs=1e-12)


def test_syncs_leave_out_reads_inside_an_op_and_reads_that_waited_for_nothing():
    events = [_ev("ProfilerStep#1", "user_annotation", 0, 100),
              _ev("aten::_fused_adamw_", "cpu_op", 5, 20),  # reads its step counts itself
              _ev("aten::_local_scalar_dense", "cpu_op", 6, 1),
              _ev("aten::item", "cpu_op", 30, 10),  # a CPU tensor's value: nothing to wait for
              _ev("aten::_local_scalar_dense", "cpu_op", 31, 8),
              _ev("aten::is_nonzero", "cpu_op", 50, 20),  # `if t:` on a GPU tensor
              _ev("aten::item", "cpu_op", 51, 18),
              _ev("aten::_local_scalar_dense", "cpu_op", 52, 16),
              _ev("cudaMemcpyAsync", "cuda_runtime", 53, 2),
              _ev("cudaStreamSynchronize", "cuda_runtime", 56, 10)]
    (step,) = profiling.syncs(events)
    assert step.counts == {"aten::_local_scalar_dense": 1}
    assert step.seconds == pytest.approx(16e-6, abs=1e-12)


def test_syncs_of_a_cpu_step_with_a_fused_optimizer(tmp_path):
    model = nn.Linear(8, 8)
    opt = torch.optim.AdamW(model.parameters(), fused=True)  # on a CPU it reads its step counts
    with profile(activities=[ProfilerActivity.CPU],
                 schedule=schedule(wait=0, warmup=1, active=2, repeat=1)) as prof:
        for _ in range(3):
            loss = model(torch.randn(4, 8)).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            loss.item()
            prof.step()
    prof.export_chrome_trace(str(tmp_path / "t.json"))
    events = profiling.load_trace(tmp_path / "t.json")
    found = profiling.syncs(events)
    assert [s.counts for s in found] == [{"aten::_local_scalar_dense": 1}] * 2
    for s, row in zip(found, profiling.breakdown(events, "cpu")):  # "waiting": the reads syncs counts, no others
        assert row["waiting"] == pytest.approx(s.seconds, abs=1e-9)


def test_cpu_breakdown_waits_where_syncs_counts_a_read_and_nowhere_else():
    events = [_ev("ProfilerStep#1", "user_annotation", 0, 100),
              _ev("aten::_fused_adamw_", "cpu_op", 5, 20),  # reads its step counts itself: its compute
              _ev("aten::_local_scalar_dense", "cpu_op", 6, 1),
              _ev("aten::item", "cpu_op", 30, 10),  # loss.item(): the user's read
              _ev("aten::_local_scalar_dense", "cpu_op", 31, 8)]
    (row,) = profiling.breakdown(events, "cpu")
    (step,) = profiling.syncs(events)
    assert step.counts == {"aten::_local_scalar_dense": 1}
    assert row["waiting"] == pytest.approx(step.seconds) == pytest.approx(8e-6, abs=1e-12)
    assert row["compute"] == pytest.approx(19e-6 + 1e-6 + 2e-6, abs=1e-12)  # adamw, its read, item's own


# ---- SyncCounter and is_sync -----------------------------------------------------------


@pytest.mark.parametrize("case", ["item", "bool", "float", "format", "nonzero", "mask"])
def test_sync_counter_finds_host_reads(case):
    t = torch.randn(6)
    calls = {"item": lambda: t.sum().item(),
             "bool": lambda: bool(t.sum() > 0),
             "float": lambda: float(t.sum()),
             "format": lambda: f"{t.sum():.3f}",
             "nonzero": lambda: t.nonzero(),
             "mask": lambda: t[t > 0]}
    with profiling.SyncCounter() as sc:
        calls[case]()
    assert sc.count >= 1 and sc.count == len(sc.calls)
    assert all(isinstance(c, str) and c.startswith("aten::") for c in sc.calls)


def test_sync_counter_names_the_op():
    t = torch.randn(6)
    with profiling.SyncCounter() as sc:
        t.sum().item()
        t.nonzero()
    assert sc.calls == ["aten::_local_scalar_dense", "aten::nonzero"]


def test_sync_counter_ignores_arithmetic_and_cpu_copies():
    a = torch.randn(4, 4, requires_grad=True)
    b = torch.randn(4, 4)
    dst = torch.empty(4, 4)
    with profiling.SyncCounter() as sc:
        y = (a @ b + 1).sum()
        y.backward()
        a.detach()
        b.to(torch.float64)
        b.clone()
        dst.copy_(b)
    assert sc.count == 0 and sc.calls == []


def test_is_sync_device_to_host_copies():
    cpu = torch.empty(3)
    meta = torch.empty(3, device="meta")  # stands for any non-CPU device
    to_copy, copy_ = torch.ops.aten._to_copy.default, torch.ops.aten.copy_.default
    assert profiling.is_sync(to_copy, (meta,), cpu)
    assert profiling.is_sync(copy_, (cpu, meta), cpu)
    assert not profiling.is_sync(to_copy, (cpu,), meta)  # host to device
    assert not profiling.is_sync(copy_, (meta, cpu), meta)
    assert not profiling.is_sync(to_copy, (cpu,), cpu.double())
    assert not profiling.is_sync(torch.ops.aten.add.Tensor, (cpu, cpu), cpu)
    assert profiling.is_sync(torch.ops.aten._local_scalar_dense.default, (torch.tensor(1.0),), 1.0)


# ---- plot.breakdown ---------------------------------------------------------------------


def test_plot_breakdown_stacks_one_bar_per_variant_and_category():
    rows = {"eager": {"compute": 2e-3, "copies": 1e-3, "waiting": 0.5e-3, "framework": 1.5e-3},
            "no sync": {"compute": 2e-3, "copies": 1e-3, "waiting": 0.0, "framework": 1e-3},
            "bigger batch": {"compute": 4e-3, "copies": 1e-3, "waiting": 0.0, "framework": 1e-3}}
    fig, ax = plt.subplots()
    try:
        assert plot.breakdown(ax, rows) is ax
        assert len(ax.patches) == 3 * 4
        ends = {}
        for p in ax.patches:  # each variant's bar ends at its total, in ms
            y = round(p.get_y() + p.get_height() / 2)
            ends[y] = max(ends.get(y, 0.0), p.get_x() + p.get_width())
        assert sorted(ends.values()) == pytest.approx([4.0, 5.0, 6.0])
        assert [t.get_text() for t in ax.get_legend().get_texts()] == list(CPU_CATEGORIES)
        assert "ms" in ax.get_xlabel()
    finally:
        plt.close(fig)


def test_plot_breakdown_takes_the_union_of_categories():
    rows = {"a": {"compute": 1.0, "copies": 2.0}, "b": {"compute": 1.0, "waiting": 3.0}}
    fig, ax = plt.subplots()
    try:
        plot.breakdown(ax, rows, unit=1.0, unit_name="s")
        assert len(ax.patches) == 2 * 3
        assert sorted(p.get_width() for p in ax.patches) == [0.0, 0.0, 1.0, 1.0, 2.0, 3.0]
    finally:
        plt.close(fig)


def test_sync_counter_on_a_gpu_ignores_reads_of_cpu_tensors():
    step = torch.tensor(3.0)  # like a non-fused optimizer's step count, kept on the host
    with profiling.SyncCounter("cuda") as on_gpu:
        step.item()
    with profiling.SyncCounter("cpu") as on_cpu:
        step.item()
    assert (on_gpu.count, on_cpu.count) == (0, 1)


# ---- a training step's ops by kind, profiled in turns (notebook 03) ----------------------------

def test_op_kind_and_profile_verdict_name_the_op_that_costs():
    assert profiling.op_kind("aten::convolution_backward") == profiling.op_kind("aten::addmm") == "convolutions and matmuls"
    assert profiling.op_kind("aten::_to_copy") == "dtype conversions"
    assert profiling.op_kind("aten::_amp_update_scale_") == "GradScaler"
    assert profiling.op_kind("aten::max_pool2d_with_indices") == "everything else"
    base = profiling.StepProfile("fp32", 3, {"aten::convolution_backward": 2.0, "aten::relu": 6.0})
    slow = profiling.StepProfile("fp16", 3, {"aten::convolution_backward": 200.0, "aten::relu": 6.0,
                                             "aten::_to_copy": 1.0, "aten::_amp_update_scale_": 0.1})
    line = profiling.profile_verdict(slow, base)
    assert "convolutions and matmuls account for 99% of the +199 ms difference" in line
    assert "aten::convolution_backward, took 200 ms (97% of its op time) against 2 ms in fp32" in line
    assert profiling.amdahl_bound(base) == pytest.approx(1 / 0.75)
    same = profiling.profile_verdict(profiling.StepProfile("bf16", 3, {"aten::convolution_backward": 2.1, "aten::relu": 6.0}), base)
    assert "within 10% of each other" in same and "never called" not in line + same
    other = profiling.profile_verdict(profiling.StepProfile("bf16", 3, {"aten::_slow_conv2d_backward": 90.0}), base)
    assert "against 0 ms in fp32: an op the fp32 step never called" in other


def test_profile_in_turns_profiles_every_step_every_round():
    calls = {"a": 0, "b": 0}

    def step(name):
        def run():
            calls[name] += 1
            torch.ones(8, 8) @ torch.ones(8, 8)
        return run

    prof = profiling.profile_in_turns({"a": step("a"), "b": step("b")}, rounds=2)
    assert calls == {"a": 4, "b": 4}  # a warm-up unprofiled, one profiled, and two rounds each
    assert prof["a"].by_kind["convolutions and matmuls"] > 0 and prof["a"].steps == 2
    assert prof["a"].threads == torch.get_num_threads()


def test_profile_in_turns_keeps_the_median_round_with_its_own_wall_time():
    """One round whose ops took far longer (a slow moment, the profiler's own start-up booked to an
    op) neither inflates the op time nor is set beside another round's wall: the kept round's op
    time fits in the wall time it is shown with."""
    repeats = iter([1, 1, 20, 1, 1])  # the unprofiled and profiled warm-up, then 3 rounds: the first slow
    a = torch.ones(512, 512)

    def step():
        for _ in range(next(repeats)):
            a @ a
    prof = profiling.profile_in_turns({"a": step}, rounds=3)["a"]
    assert 0 < prof.occupancy <= 1.2
    slow = profiling.profile_in_turns({"a": lambda: [a @ a for _ in range(20)]}, rounds=1)["a"]
    assert prof.by_op["aten::mm"] < slow.by_op["aten::mm"] / 4  # the kept round is one of the 1-matmul rounds


def test_occupancy_is_op_time_over_wall_time_times_threads():
    p = profiling.StepProfile("fp32", 3, {"aten::relu": 12.0, "aten::mm": 6.0}, wall_ms=10.0, threads=2)
    assert p.occupancy == pytest.approx(0.9)
    assert math.isnan(profiling.StepProfile("fp32", 3, {"aten::relu": 1.0}).occupancy)


def test_profile_in_turns_records_each_steps_wall_time():
    calls = []
    prof = profiling.profile_in_turns({"a": lambda: calls.append(torch.ones(8).sum())}, rounds=2)
    assert len(calls) == 4 and prof["a"].wall_ms is not None and prof["a"].wall_ms > 0
