"""course_lib.roofline: FLOPs and bytes of ATen ops, their timing, the roofline itself;
bench.bandwidth_curve and plot.roofline."""

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode, flop_registry  # noqa: E402

from course_lib import bench, plot, units  # noqa: E402
from course_lib.models import GPT, GPTConfig  # noqa: E402
from course_lib.roofline import (KINDS, OpCost, OpTime, StepOps, _grouped, _range_seconds, attainable,  # noqa: E402
                                 bound, causal_share, count_ops, measure_ops, ridge, short_name, total_flops,
                                 touched_bytes)

pytestmark = pytest.mark.versioned  # the profiler's op events: make test-oldest runs it

# ---- count_ops --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype, size", [(torch.float32, 4), (torch.bfloat16, 2)])
def test_matmul_flops_and_bytes(dtype, size):
    m, k, n = 3, 5, 7
    a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
    (op,) = count_ops(lambda: a @ b)
    assert op.name == "aten::mm" and op.kind == "matmul"
    assert op.shapes == ((m, k), (k, n))
    assert op.flops == 2 * m * k * n
    assert op.bytes == size * (m * k + k * n + m * n)
    assert op.intensity == op.flops / op.bytes


def test_elementwise_add():
    n = 1000
    a, b = torch.randn(n), torch.randn(n)
    (op,) = count_ops(lambda: a + b)
    assert op.name == "aten::add" and op.kind == "element-wise"
    assert op.flops == n and op.bytes == 12 * n


def test_an_operand_given_twice_is_read_once():
    a = torch.randn(100)
    (op,) = count_ops(lambda: a + a)
    assert op.bytes == 8 * 100


def test_touched_bytes_counts_broadcast_dims_once():
    assert touched_bytes(torch.randn(3).expand(4, 3)) == 12
    assert touched_bytes(torch.randn(4, 3)) == 48
    assert touched_bytes(torch.randn(4, 3).t()) == 48  # transposed, not broadcast
    assert touched_bytes(torch.zeros(5, dtype=torch.float16)) == 10


def test_broadcast_operand_counted_once():
    m, n = 6, 10
    a, b = torch.randn(m, n), torch.randn(1, n)
    (op,) = count_ops(lambda: a + b)
    assert op.flops == m * n
    assert op.bytes == 4 * (m * n + n + m * n)
    ops = count_ops(lambda: a + b.expand(m, n))  # the expand is a view: not an op here
    assert [o.name for o in ops] == ["aten::add"]
    assert ops[0].bytes == 4 * (m * n + n + m * n)


def test_views_and_empty_are_not_counted():
    x = torch.randn(4, 6)
    assert count_ops(lambda: x.view(6, 4)) == []
    assert count_ops(lambda: x.t()) == []
    assert count_ops(lambda: x[1:, ::2]) == []
    assert count_ops(lambda: torch.empty(8, 8)) == []


def test_copies_do_no_flops():
    x = torch.randn(4, 6)
    (op,) = count_ops(lambda: x.clone())
    assert op.kind == "copy" and op.flops == 0 and op.bytes == 2 * 4 * 24


def test_kinds_are_known():
    x = torch.randn(8, 8)
    ops = count_ops(lambda: (x @ x).relu().sum(dim=0).clone())
    assert [o.kind for o in ops] == ["matmul", "element-wise", "reduction & other", "copy"]
    assert all(o.kind in KINDS for o in ops)


def test_sdpa_counted_as_pytorch_counts_it():
    b, h, t, d = 2, 3, 16, 8
    q, k, v = (torch.randn(b, h, t, d) for _ in range(3))
    ops = count_ops(lambda: F.scaled_dot_product_attention(q, k, v))
    attn = [o for o in ops if o.kind == "attention"]
    assert len(attn) == 1
    assert attn[0].flops == total_flops(ops) == 4 * b * h * t * t * d
    if torch.ops.aten._scaled_dot_product_flash_attention_for_cpu in flop_registry:  # not in torch 2.6
        with FlopCounterMode(display=False) as fc:
            F.scaled_dot_product_attention(q, k, v)
        assert attn[0].flops == fc.get_total_flops()


def test_sdpa_backward_counted_with_its_recomputation():
    b, h, t, d = 2, 3, 16, 8
    q, k, v = (torch.randn(b, h, t, d, requires_grad=True) for _ in range(3))
    out = F.scaled_dot_product_attention(q, k, v)
    ops = count_ops(lambda: out.sum().backward())
    attn = [o for o in ops if o.kind == "attention"]
    assert len(attn) == 1
    assert attn[0].flops == 10 * b * h * t * t * d  # scores again, then 4 matmuls for 3 gradients


@pytest.mark.parametrize("backward", [False, True])
def test_causal_sdpa_counts_the_entries_at_or_below_the_diagonal(backward):
    b, h, t, d = 2, 3, 16, 8
    q, k, v = (torch.randn(b, h, t, d, requires_grad=backward) for _ in range(3))

    def attention_flops(is_causal: bool) -> float:
        if not backward:
            ops = count_ops(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=is_causal))
        else:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
            ops = count_ops(lambda: out.sum().backward())
        return total_flops(ops, kinds=("attention",))

    assert attention_flops(True) == attention_flops(False) * (t + 1) / (2 * t)


@pytest.mark.parametrize("t, s, kept", [(4, 4, 10), (3, 5, 6), (5, 3, 12), (1, 1, 1)])
def test_causal_share_of_a_top_left_mask(t, s, kept):
    q, k = torch.randn(1, 1, t, 8), torch.randn(1, 1, s, 8)
    op = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
    assert causal_share(op, (q, k, k, 0.0, True), {}) == kept / (t * s)  # query i sees keys 0…i
    assert causal_share(op, (q, k, k), {"is_causal": False}) == 1.0
    assert causal_share(torch.ops.aten.mm.default, (q[0, 0], k[0, 0].T), {}) == 1.0  # not attention


def test_profiler_marks_are_not_ops():
    opt = torch.optim.SGD(nn.Linear(4, 4).parameters(), lr=0.1)
    for p in opt.param_groups[0]["params"]:
        p.grad = torch.ones_like(p)
    assert all(o.name.startswith("aten::") for o in count_ops(opt.step))


def test_gpt_forward_flops():
    cfg = GPTConfig(block_size=16, n_layer=2, n_head=2, n_embd=32)
    model = GPT(cfg)
    B, T = 2, 16
    x = torch.randint(0, cfg.vocab_size, (B, T))
    # every 2-D weight but the position embedding is a matmul on every token (the tied token
    # embedding as the output layer): 2 FLOPs per weight and token; biases and LayerNorms
    # are not matmuls. Attention: q·kᵀ and weights·v over the T(T+1)/2 (query, key) pairs the
    # causal kernel computes, 4·C per pair and layer.
    weights = sum(p.numel() for name, p in model.named_parameters()
                  if p.dim() == 2 and name != "wpe.weight")
    expected = 2 * weights * B * T + 4 * cfg.n_layer * (T * (T + 1) // 2) * cfg.n_embd * B
    assert total_flops(count_ops(lambda: model(x))) == expected


def test_in_place_writes_are_counted_even_when_nothing_is_returned():
    ts = [torch.randn(10), torch.randn(30)]
    ops = count_ops(lambda: torch._foreach_add_(ts, 1.0))  # returns None, writes both lists' tensors
    (op,) = ops
    assert op.kind == "element-wise"
    assert op.flops == 40  # one per element of every tensor in the list
    assert op.bytes == 2 * 4 * 40  # each read once and written once


def test_total_flops_by_kind():
    x = torch.randn(8, 8)
    ops = count_ops(lambda: (x @ x + 1).sum())
    assert total_flops(ops) == 2 * 8**3
    assert total_flops(ops, kinds=("element-wise",)) == 64
    assert total_flops(ops, kinds=KINDS) == 2 * 8**3 + 64 + 64


# ---- measure_ops ------------------------------------------------------------------------


def test_measure_ops_on_a_cpu_training_step():
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(16, 32)

    def step():
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()

    measured = measure_ops(step, "cpu", steps=2)
    assert isinstance(measured, StepOps)
    rows = measured.ops
    assert rows and all(isinstance(r, OpTime) for r in rows)
    assert measured.op_seconds == pytest.approx(sum(r.seconds for r in rows))
    for t in (measured.step, measured.profiled):  # the whole step, both ways, once per turn
        assert isinstance(t, bench.Timing) and t.runs == 2 and t.median_s > 0
    assert bench.speedup(measured.step, measured.profiled).rounds == 2  # paired turn by turn
    assert measured.probe is None  # no probe given
    calls = []
    probed = measure_ops(step, "cpu", steps=2, probe=lambda: calls.append(1))
    assert len(calls) == 2 and probed.probe.runs == 2  # once a turn, beside the step
    assert bench.speedup(probed.step, probed.probe).rounds == 2  # in the same turns
    seconds = [r.seconds for r in rows]
    assert seconds == sorted(seconds, reverse=True)
    assert all(s >= 0 for s in seconds) and seconds[0] > 0
    assert any(r.kind == "matmul" and r.calls >= 1 for r in rows)

    one = count_ops(step)  # one step, grouped by op and shapes as measure_ops does
    groups = {}
    for o in one:
        calls, flops, nbytes = groups.get((o.name, o.shapes), (0, 0.0, 0.0))
        groups[(o.name, o.shapes)] = (calls + 1, flops + o.flops, nbytes + o.bytes)
    assert {(r.name, r.shapes): r.calls for r in rows} == {k: c for k, (c, _, _) in groups.items()}
    for r in rows:
        _, flops, nbytes = groups[(r.name, r.shapes)]
        assert r.flops == pytest.approx(flops, rel=1e-6) and r.bytes == pytest.approx(nbytes, rel=1e-6)
    assert sum(r.flops for r in rows) == pytest.approx(sum(o.flops for o in one), rel=1e-6)


def _event(name, cat, ts, dur, tid=1):
    return {"ph": "X", "name": name, "cat": cat, "ts": float(ts), "dur": float(dur), "pid": 1, "tid": tid}


def test_range_seconds_on_a_cpu_are_the_ops_own_record():
    events = [_event("aten::mm", "cpu_op", 0, 100),  # the call that entered the counting mode
              _event("roofline op #0", "user_annotation", 10, 80),  # the range the mode opened
              _event("aten::mm", "cpu_op", 30, 40),  # the op itself, run from the mode
              _event("aten::empty", "cpu_op", 35, 5),  # called by it: inside its record
              _event("roofline op #1", "user_annotation", 200, 50),
              _event("aten::add", "cpu_op", 210, 20),
              _event("aten::relu", "cpu_op", 205, 30, tid=2),  # another thread: not this range's
              _event("roofline op #2", "user_annotation", 300, 10)]  # no op recorded inside: the range
    out = _range_seconds(sorted(events, key=lambda e: e["ts"]), torch.device("cpu"))
    assert out == pytest.approx({0: 40e-6, 1: 20e-6, 2: 10e-6})


def test_grouped_takes_the_median_step_of_each_group():
    mm = OpCost("aten::mm", ((2, 2), (2, 2)), "matmul", 16.0, 48.0)
    add = OpCost("aten::add", ((2, 2), (2, 2)), "element-wise", 4.0, 48.0)
    steps = [({0: mm, 1: mm, 2: add}, {0: 1.0, 1: 1.0, 2: 0.5}),
             ({5: mm, 6: mm, 7: add}, {5: 9.0, 6: 9.0, 7: 0.25}),  # a step the machine slowed
             ({8: mm, 9: mm, 10: add}, {8: 2.0, 9: 2.0, 10: 1.0})]
    first, second = _grouped(steps)
    assert (first.name, first.calls, first.flops, first.bytes) == ("aten::mm", 2, 32.0, 96.0)
    assert first.seconds == 4.0  # the median of 2, 18 and 4
    assert (second.name, second.calls, second.seconds) == ("aten::add", 1, 0.5)


@pytest.mark.parametrize("name, short", [
    ("aten::_scaled_dot_product_flash_attention_for_cpu_backward", "sdpa bwd"),
    ("aten::_scaled_dot_product_flash_attention_for_cpu", "sdpa"),
    ("aten::_efficient_attention_backward", "sdpa bwd"),
    ("aten::native_layer_norm_backward", "layer_norm bwd"),
    ("aten::_fused_adamw_", "fused_adamw"),
    ("aten::mm", "mm"),
    ("aten::gelu_backward", "gelu bwd")])
def test_short_names(name, short):
    assert short_name(name) == short


# ---- the roofline -----------------------------------------------------------------------


def test_ridge_attainable_bound():
    P, W = 100.0, 10.0
    assert ridge(P, W) == 10.0
    assert attainable(1.0, P, W) == 10.0
    assert attainable(50.0, P, W) == 100.0
    assert attainable(10.0, P, W) == 100.0
    assert bound(5.0, P, W) == "memory-bound"
    assert bound(10.0, P, W) == "compute-bound"
    assert bound(1e3, P, W) == "compute-bound"


def test_optime_properties():
    t = OpTime("aten::mm", ((3, 5), (5, 7)), "matmul", 2, 420.0, 84.0, 2e-6)
    assert t.rate == pytest.approx(420.0 / 2e-6)
    assert t.bandwidth == pytest.approx(84.0 / 2e-6)
    assert t.intensity == 5.0
    assert t.short == "mm" and t.label.startswith("mm ") and "aten::" not in t.label
    assert "3×5" in t.label and "5×7" in t.label
    idle = OpTime("aten::empty_like", (), "reduction & other", 1, 0.0, 0.0, 0.0)
    assert idle.rate == 0.0 and idle.bandwidth == 0.0 and idle.intensity == math.inf
    assert idle.label == "empty_like"


# ---- bench.bandwidth_curve --------------------------------------------------------------


def test_copy_bytes():
    assert bench.copy_bytes(1) == 2.0
    assert bench.copy_bytes(1 << 20) == 2.0 * (1 << 20)


def test_bandwidth_curve_on_cpu():
    sizes = [1 << 16, 1 << 20]
    curve = bench.bandwidth_curve(sizes, "cpu", min_run_s=0.02, rounds=2)
    assert len(curve) == 2 and all(isinstance(t, bench.Timing) for t in curve)
    assert [t.name for t in curve] == [f"copy {units.fmt_bytes(n)}" for n in sizes]
    assert [t.work for t in curve] == [2.0 * n for n in sizes]
    assert all(t.unit == "B/s" and t.runs == 2 and t.median_s > 0 for t in curve)


def test_bandwidth_curve_needs_sizes():
    with pytest.raises(ValueError):
        bench.bandwidth_curve([], "cpu")


# ---- plot.roofline ----------------------------------------------------------------------


def _op(name, kind, flops, nbytes, seconds):
    return OpTime(name, ((8, 8),), kind, 1, flops, nbytes, seconds)


def test_plot_roofline_one_scatter_per_kind():
    ops = [_op("aten::mm", "matmul", 1e9, 1e6, 1e-3),
           _op("aten::addmm", "matmul", 2e9, 2e6, 2e-3),
           _op("aten::gelu", "element-wise", 1e6, 8e6, 1e-3),
           _op("aten::copy_", "copy", 0.0, 8e6, 1e-3),  # no FLOPs: not placed
           _op("aten::sum", "reduction & other", 1e6, 4e6, 0.0)]  # not timed: not placed
    roofs = {"DRAM": 20e9, "L2": 200e9}
    fig, ax = plt.subplots()
    try:
        assert plot.roofline(ax, ops, 1e12, roofs, title="t") is ax
        assert len(ax.collections) == 2  # matmul and element-wise
        assert sorted(len(c.get_offsets()) for c in ax.collections) == [1, 2]
        assert len(ax.lines) == len(roofs)
        assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
        for line, bw in zip(ax.lines, roofs.values()):  # each roof is min(P, I·W)
            xs, ys = line.get_data()
            assert list(ys) == pytest.approx([min(1e12, x * bw) for x in xs])
    finally:
        plt.close(fig)


def test_plot_roofline_areas_labels_and_legend():
    ops = [_op("aten::mm", "matmul", 1e9, 1e6, 4e-3),
           _op("aten::_scaled_dot_product_flash_attention_for_cpu_backward", "attention", 1e9, 1e7, 3e-3),
           _op("aten::gelu", "element-wise", 1e6, 8e6, 1e-3),
           _op("aten::copy_", "copy", 0.0, 8e6, 2e-3)]  # not placed, but in the total the shares are of
    fig, ax = plt.subplots()
    try:
        plot.roofline(ax, ops, 1e12, {"DRAM": 20e9}, labels=2)
        sizes = {c.get_label(): list(c.get_sizes()) for c in ax.collections}
        assert sizes == {"matmul": [pytest.approx(400.0)], "attention": [pytest.approx(300.0)],
                         "element-wise": [pytest.approx(100.0)]}  # area ∝ share of all the ops' time
        assert sorted(t.get_text() for t in ax.texts) == ["mm", "sdpa bwd"]  # the 2 costliest, short names
        legend = ax.get_legend()
        assert "share of op time" in legend.get_title().get_text()
        marks = [h for h in legend.legend_handles if hasattr(h, "get_sizes")]
        assert len(marks) == 3 and all(list(h.get_sizes()) == [marks[0].get_sizes()[0]] for h in marks)
    finally:
        plt.close(fig)


def test_plot_roofline_names_ops_far_below_and_counts_a_cluster():
    ops = [_op("aten::mm", "matmul", 1e9, 1e6, 4e-3),  # 2.5e11 FLOP/s at 1000 FLOP/B: labelled, the costliest
           _op("aten::addmm", "matmul", 1.2e9, 1.1e6, 3e-3),  # beside it: counted in its label
           _op("aten::bmm", "matmul", 1.1e9, 1.0e6, 3.5e-3),  # beside it too
           _op("aten::mm", "matmul", 1e8, 1e7, 1e-3),  # 10 FLOP/B, two decades away: not in the cluster
           _op("aten::gelu", "element-wise", 1e6, 8e6, 1e-3),  # at 40 % of its roof: no label
           _op("aten::arange", "reduction & other", 1.0, 8.0, 1e-5)]  # 1e5 FLOP/s, roof 2.5e9: far below, tiny
    fig, ax = plt.subplots()
    try:
        plot.roofline(ax, ops, 1e12, {"DRAM": 20e9, "L2": 200e9}, labels=1)
        assert sorted(t.get_text() for t in ax.texts) == ["arange", "mm + 2 more matmul ops"]
    finally:
        plt.close(fig)


def test_plot_roofline_needs_an_op_with_flops():
    fig, ax = plt.subplots()
    try:
        with pytest.raises(ValueError):
            plot.roofline(ax, [_op("aten::copy_", "copy", 0.0, 8e6, 1e-3)], 1e12, {"DRAM": 20e9})
    finally:
        plt.close(fig)


# ---- vs_datasheet --------------------------------------------------------------------------


def test_vs_datasheet_states_shares_of_the_vendors_roofs_and_labels_them():
    from course_lib import datasheet
    from course_lib.roofline import vs_datasheet

    spec = datasheet.lookup("NVIDIA H100 80GB HBM3")
    flops, bw = datasheet.peak_tflops(spec, "bf16") * 1e12, spec.mem_bw_gbs * 1e9
    line = vs_datasheet("NVIDIA H100 80GB HBM3", "bf16", flops / 2, bw / 4)
    assert line.startswith("datasheet, not measured") and spec.name in line
    assert "50% of its compute" in line and "25% of its bandwidth" in line
    assert f"ridge {ridge(flops, bw):.0f} FLOP/B" in line


def test_vs_datasheet_says_why_there_is_nothing_to_compare_with():
    from course_lib.roofline import vs_datasheet

    assert "CPU" in vs_datasheet(None, "fp32", 1e12, 1e11)
    assert "not in the course's datasheet table" in vs_datasheet("Some Future GPU", "bf16", 1e12, 1e11)
    t4 = vs_datasheet("Tesla T4", "bf16", 1e12, 1e11)  # Turing: no bf16 tensor cores
    assert "no dense bf16 rate" in t4 and "%" not in t4


def test_profiled_kinds_sums_each_aten_ops_own_time_by_kind():
    from torch.profiler import profile, record_function

    from course_lib.roofline import kind_of, profiled_kinds
    assert [kind_of(n) for n in ("aten::mm", "aten::_scaled_dot_product_flash_attention_for_cpu_backward",
                                 "aten::gelu", "aten::copy_", "ProfilerStep#1", "aten::no_such_op")] == [
        "matmul", "attention", "element-wise", "copy", None, None]
    # reader FT: a profiler's self time of a composite op (linear routes to addmm) or a view is no reduction
    assert [kind_of(n) for n in ("aten::linear", "aten::matmul", "aten::view", "aten::t", "aten::sum",
                                 "aten::_log_softmax")] == ["dispatch & views"] * 4 + ["reduction & other"] * 2
    assert kind_of("aten::add") == kind_of("aten::mul") == "element-wise"  # not add.default, the untagged int add
    a = torch.randn(64, 64)
    with profile() as prof, record_function("a range of my own"):
        F.gelu(a @ a)
    kinds = profiled_kinds(prof.key_averages(), "cpu")
    own = {e.key: e.self_cpu_time_total / 1e6 for e in prof.key_averages()}
    assert kinds["matmul"] > 0 and kinds["matmul"] == pytest.approx(sum(v for k, v in own.items() if kind_of(k) == "matmul"))
    assert kinds["element-wise"] > 0 and kinds["element-wise"] == pytest.approx(own["aten::gelu"])
    assert "a range of my own" in own  # a record that is not an ATen op: left out
    assert sum(kinds.values()) == pytest.approx(sum(v for k, v in own.items() if k.startswith("aten::")))
