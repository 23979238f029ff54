"""course_lib.timeline: memory over time by category (profiler) and from CUDA's allocator."""

import pickle
import time
import types
import warnings

import pytest
import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function

from course_lib import timeline
from course_lib.memory import quiet_stderr, trace_of

pytestmark = pytest.mark.versioned  # the profiler's memory events and the memory history: make test-oldest runs it

MiB = 2**20
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
FLAGS = dict(profile_memory=True, record_shapes=True, with_stack=True)


def test_category_names_follow_the_column_order_torch_writes():
    from torch.profiler._memory_profiler import _CATEGORY_TO_INDEX

    assert timeline._category_names() == ["parameter", "optimizer state", "input", "temporary",
                                          "activation", "gradient", "autograd detail", "unknown"]
    assert list(_CATEGORY_TO_INDEX.values()) == list(range(8))  # the column of each, after column 0


def test_timeline_total_peak_and_point():
    tl = timeline.Timeline("cpu", [10, 20, 30, 40], {"a": [1, 5, 2, 5], "b": [0, 3, 0, 3]}, "test")
    assert tl.total == [1, 8, 2, 8]
    assert tl.peak() == (20, 8)  # the first of two equal peaks
    assert tl.at(2) == {"a": 2, "b": 0}


# ---- profiler memory timeline (CPU)

@pytest.fixture(scope="module")
def profiled():
    """Two steps of a Linear layer with Adam, profiled with named phases; its timeline."""
    torch.manual_seed(0)
    model = nn.Linear(256, 256)
    opt = torch.optim.Adam(model.parameters())
    x = torch.randn(32, 256)
    with quiet_stderr():  # the profiler's C++ noise on a CUDA build without a GPU
        with profile(activities=[ProfilerActivity.CPU], **FLAGS) as prof:
            for _ in range(2):
                with record_function("forward"):
                    loss = model(x).square().mean()
                with record_function("backward"):
                    loss.backward()
                with record_function("optimizer"):
                    opt.step()
                    opt.zero_grad()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tl = timeline.profiler_timeline(prof)
    return types.SimpleNamespace(prof=prof, tl=tl, model=model, opt=opt, trace=trace_of(prof),
                                 warnings=caught)


def test_profiler_timeline_counts_parameters_and_optimizer_state_exactly(profiled):
    tl, model, opt = profiled.tl, profiled.model, profiled.opt
    assert (tl.device, tl.source) == ("cpu", "profiler memory timeline")
    assert list(tl.by_category) == timeline._category_names()
    assert all(len(sizes) == len(tl.times_us) for sizes in tl.by_category.values())
    param_bytes = sum(p.nbytes for p in model.parameters())
    state_bytes = sum(t.nbytes for state in opt.state.values() for t in state.values())
    assert state_bytes > 2 * param_bytes  # exp_avg, exp_avg_sq and a step count per parameter
    end = tl.at(len(tl.times_us) - 1)
    assert end["parameter"] == param_bytes
    assert end["optimizer state"] == state_bytes
    assert max(tl.by_category["gradient"]) >= param_bytes  # a gradient per parameter, in backward
    assert all(isinstance(t, int) for t in tl.times_us)
    assert tl.times_us == sorted(tl.times_us)


def _first_nonzero_time(tl, name):
    return next(t for t, n in zip(tl.times_us, tl.by_category[name]) if n)


def test_profiler_timeline_is_on_the_clock_of_the_record_function_ranges(profiled):
    spans = {name: (t0, t1) for name, t0, t1 in reversed(profiled.trace.annotations)}  # first of each
    for category, phase in (("gradient", "backward"), ("optimizer state", "optimizer")):
        t0, t1 = spans[phase]
        assert t0 - 1 <= _first_nonzero_time(profiled.tl, category) <= t1  # whole µs, truncated


def test_profiler_timeline_hides_its_deprecation_warning(profiled):
    assert not [w for w in profiled.warnings if issubclass(w.category, FutureWarning)]


def test_profiler_timeline_of_a_device_the_profile_did_not_use(profiled):
    with pytest.raises(ValueError, match="no memory on cuda:0"):  # "cuda" without CUDA: GPU 0
        timeline.profiler_timeline(profiled.prof, "cuda:0" if torch.cuda.is_available() else "cuda")


def test_profiler_timeline_needs_the_three_flags_and_a_finished_profile():
    with pytest.raises(ValueError, match="needs a profile made with"):
        timeline.profiler_timeline(profile(activities=[ProfilerActivity.CPU], profile_memory=True))
    with quiet_stderr(), profile(activities=[ProfilerActivity.CPU], **FLAGS) as prof:
        torch.ones(8)
        with pytest.raises(ValueError, match="not finished"):
            timeline.profiler_timeline(prof)


def test_profiler_timeline_says_when_torch_cannot_export_one():
    with pytest.raises(timeline.NoMemoryTimeline):
        timeline.profiler_timeline(types.SimpleNamespace(**FLAGS))


# ---- CUDA allocator snapshot

def _block(size, state, requested=None):
    return {"address": 0, "size": size, "requested_size": size if requested is None else requested,
            "state": state, "frames": []}


def _segment(device, address, blocks):
    total = sum(b["size"] for b in blocks)
    active = sum(b["size"] for b in blocks if b["state"] != "inactive")
    return {"device": device, "address": address, "total_size": total, "allocated_size": active,
            "active_size": active, "requested_size": active, "stream": 0, "segment_type": "large",
            "segment_pool_id": (0, 0), "is_expandable": False, "frames": [], "blocks": blocks}


def _event(action, addr, size, time_us):
    return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": time_us, "frames": []}


def _snapshot():
    """A snapshot written from the documented format (``torch.cuda.memory._snapshot``'s
    docstring and the keys torch/csrc/cuda writes), as this session has no GPU.

    Before the history: segment S (2 MiB) holds one live 500-byte tensor. Then a 20 MiB
    segment, 4 MiB and 1 MiB allocated, the 4 MiB freed (requested, completed), an OOM,
    2 MiB mapped and unmapped, 2 MiB allocated and its free only requested (still pending
    at the end), and the snapshot's own entry.
    """
    oom = {"action": "oom", "device_free": 0, "size": 64 * MiB, "stream": 0, "time_us": 14, "frames": []}
    trace = [_event("segment_alloc", 0x200000, 20 * MiB, 10),
             _event("alloc", 0x200000, 4 * MiB, 11),
             _event("alloc", 0x600000, 1 * MiB, 12),
             _event("free_requested", 0x200000, 4 * MiB, 13),
             oom,
             _event("free_completed", 0x200000, 4 * MiB, 15),
             _event("segment_map", 0x4000000, 2 * MiB, 16),
             _event("segment_unmap", 0x4000000, 2 * MiB, 17),
             _event("alloc", 0x700000, 2 * MiB, 18),
             _event("free_requested", 0x700000, 2 * MiB, 19),
             _event("snapshot", 0, 0, 20)]
    segments = [_segment(0, 0x1000, [_block(512, "active_allocated", 500),
                                     _block(2 * MiB - 512, "inactive")]),
                _segment(0, 0x200000, [_block(4 * MiB, "inactive"), _block(1 * MiB, "active_allocated"),
                                       _block(2 * MiB, "active_pending_free"), _block(13 * MiB, "inactive")]),
                _segment(1, 0x9000000, [_block(2 * MiB, "active_allocated")])]
    return {"segments": segments, "device_traces": [trace, [_event("alloc", 0x9000000, 2 * MiB, 5)]]}


def test_snapshot_replays_allocated_and_reserved_from_the_state_before_the_history():
    tl = timeline.snapshot_timeline(_snapshot())
    assert (tl.device, tl.source) == ("cuda:0", "CUDA allocator snapshot")
    assert tl.times_us == [10, 11, 12, 15, 16, 17, 18]  # a point per event that changes a count
    pre = 500  # the tensor live before the history began
    assert tl.by_category["allocated"] == [pre, pre + 4 * MiB, pre + 5 * MiB, pre + MiB, pre + MiB,
                                           pre + MiB, pre + 3 * MiB]
    assert tl.total == [22 * MiB] * 4 + [24 * MiB] + [22 * MiB] * 2  # reserved
    assert list(tl.by_category) == ["allocated", "reserved, not allocated"]


def test_snapshot_ends_at_its_live_blocks_and_segments():
    snap = _snapshot()
    tl = timeline.snapshot_timeline(snap)
    mine = [s for s in snap["segments"] if s["device"] == 0]
    assert tl.total[-1] == sum(s["total_size"] for s in mine)
    assert tl.by_category["allocated"][-1] == sum(b["requested_size"] for s in mine for b in s["blocks"]
                                                  if b["state"] != "inactive")


def test_a_requested_free_frees_nothing_until_it_completes():
    tl = timeline.snapshot_timeline(_snapshot())
    allocated = dict(zip(tl.times_us, tl.by_category["allocated"]))
    assert 13 not in allocated  # the 4 MiB free requested at 13 ...
    assert allocated[15] == allocated[12] - 4 * MiB  # ... frees it when completed at 15
    assert allocated[18] == 500 + 3 * MiB  # the 2 MiB whose free is still pending at the end


def test_snapshot_of_another_device_and_from_a_pickle(tmp_path):
    snap = _snapshot()
    path = tmp_path / "snapshot.pickle"
    with open(path, "wb") as f:
        pickle.dump(snap, f)
    assert timeline.snapshot_timeline(path) == timeline.snapshot_timeline(snap)
    assert timeline.snapshot_timeline(str(path), device=1).by_category["allocated"] == [2 * MiB]
    assert timeline.snapshot_timeline(snap, device=1).total == [2 * MiB]


def test_snapshot_of_the_gpu_the_work_ran_on(monkeypatch):
    """A learner on cuda:1 passes the device used: its trace, not GPU 0's (finding 6)."""
    snap = _snapshot()
    one = timeline.snapshot_timeline(snap, 1)
    assert one.device == "cuda:1" and one.by_category["allocated"] == [2 * MiB]
    assert timeline.snapshot_timeline(snap, torch.device("cuda:1")) == one
    assert timeline.snapshot_timeline(snap, "cuda:1") == one
    assert timeline.snapshot_timeline(snap, "cuda:0") == timeline.snapshot_timeline(snap, 0)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # 'cuda' means the current GPU
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    assert timeline.snapshot_timeline(snap, torch.device("cuda")) == one
    assert timeline.snapshot_timeline(snap) == one
    with pytest.raises(ValueError, match="per GPU"):
        timeline.snapshot_timeline(snap, "cpu")


def test_cuda_index_without_cuda_is_gpu_0(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert [timeline.cuda_index(d) for d in (None, "cuda", "cuda:3", 2)] == [0, 0, 3, 2]


def test_profiler_timeline_of_cuda_is_the_current_gpu(profiled, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    with pytest.raises(ValueError, match="no memory on cuda:1"):  # a CPU profile: nothing on any GPU
        timeline.profiler_timeline(profiled.prof, "cuda")


def test_snapshot_without_a_history_for_the_device():
    snap = _snapshot()
    with pytest.raises(ValueError, match="no allocator events for cuda:2"):
        timeline.snapshot_timeline(snap, device=2)
    snap["device_traces"][0] = [e for e in snap["device_traces"][0] if e["action"] == "snapshot"]
    with pytest.raises(ValueError, match="no allocator events for cuda:0"):
        timeline.snapshot_timeline(snap)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only error")
def test_recording_needs_cuda_and_starts_nothing_without_it(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(torch.cuda.memory, "_record_memory_history", lambda *a, **k: calls.append(k))
    with pytest.raises(timeline.NeedsCUDA):
        with timeline.record_history():
            pass
    with pytest.raises(timeline.NeedsCUDA):
        timeline.dump_snapshot(tmp_path / "s.pickle")
    assert calls == [] and not (tmp_path / "s.pickle").exists()


def test_recording_stops_even_when_the_block_fails(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda.memory, "_record_memory_history", lambda *a, **k: calls.append(k))
    with pytest.raises(KeyError):
        with timeline.record_history(max_entries=5):
            raise KeyError("inside")
    assert calls == [{"max_entries": 5, "stacks": "python"}, {"enabled": None}]


@pytest.mark.gpu
@needs_cuda
def test_a_recorded_history_replays_to_the_allocators_counters(tmp_path):
    device = torch.cuda.current_device()
    keep = torch.empty(3 * MiB, dtype=torch.uint8, device="cuda")  # live before: the baseline
    with timeline.record_history():
        a = torch.empty(4 * MiB, dtype=torch.uint8, device="cuda")
        during = torch.cuda.memory_stats()["requested_bytes.all.current"]
        b = torch.empty(8 * MiB, dtype=torch.uint8, device="cuda")
        del a
        torch.cuda.synchronize()
        path = timeline.dump_snapshot(tmp_path / "snapshot.pickle")
        now_us = time.time_ns() // 1000
        requested = torch.cuda.memory_stats()["requested_bytes.all.current"]
        allocated, reserved = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
    tl = timeline.snapshot_timeline(path, device)
    live = tl.by_category["allocated"]
    assert live[-1] == requested <= allocated  # sizes asked for; blocks round up to 512 bytes
    assert tl.total[-1] == reserved
    assert during in live  # the level right after `a`, replayed from before the history
    assert 0 <= now_us - tl.times_us[-1] < 60e6  # µs since the Unix epoch
    del keep, b
