"""course_lib.lessons.nb09: notebook 09's exercise checks accept the answer and refuse wrong ones; the
texts its cells print say what their numbers and branches say."""

import statistics

import pytest
import torch

from course_lib.bench import Ratio, Timing
from course_lib.lessons import nb09
from course_lib import memory
from course_lib.memory import MemoryEstimate

pytestmark = pytest.mark.versioned  # activation checkpointing, saved tensors: make test-oldest runs it


def test_adamw_state_bytes_exercise():
    nb09.check_adamw_state_bytes(lambda m: sum(2 * p.nbytes + 4 for p in m.parameters() if p.requires_grad))
    with pytest.raises(AssertionError, match="step count"):  # the 4-byte step forgotten
        nb09.check_adamw_state_bytes(lambda m: sum(2 * p.nbytes for p in m.parameters() if p.requires_grad))
    with pytest.raises(AssertionError):  # frozen parameters counted
        nb09.check_adamw_state_bytes(lambda m: sum(2 * p.nbytes + 4 for p in m.parameters()))


def test_saved_bytes_linear_gelu_exercise():
    size = lambda dtype: torch.empty(0, dtype=dtype).element_size()  # noqa: E731
    nb09.check_saved_bytes_linear_gelu(lambda b, i, o, d: b * (i + o) * size(d))
    with pytest.raises(AssertionError):  # the linear's input forgotten
        nb09.check_saved_bytes_linear_gelu(lambda b, i, o, d: b * o * size(d))
    with pytest.raises(AssertionError):  # float32 assumed
        nb09.check_saved_bytes_linear_gelu(lambda b, i, o, d: b * (i + o) * 4)


MiB = 2**20


def test_estimate_at_peak_names_the_terms_that_stand_in_for_each_other():
    est = MemoryEstimate(params=3 * MiB, grads=3 * MiB, optimizer=6 * MiB, activations=40 * MiB)
    at_peak = {"parameter": 3 * MiB, "optimizer state": 6 * MiB, "input": 0, "activation": 40 * MiB,
               "gradient": 0, "autograd detail": 4 * MiB, "unknown": 0}
    rows, said = nb09.estimate_at_peak(est, at_peak, "backward 2")
    assert rows[-1] == ("total", 52 * MiB, 53 * MiB)
    assert ("gradients / gradient", 3 * MiB, 0) in rows
    assert ("(no term) / autograd detail", None, 4 * MiB) in rows
    assert not any("unknown" in name or "input" in name for name, _, _ in rows)  # nothing live: no row
    assert "parameters, optimizer state and activations match" in said
    assert "gradients (3.0 MiB) are not live at all" in said
    assert "nearly cancel" in said and "-1.9 %" in said


def test_estimate_at_peak_when_every_term_is_live():
    est = MemoryEstimate(params=MiB, grads=MiB, optimizer=2 * MiB, activations=10 * MiB)
    at_peak = {"parameter": MiB, "gradient": MiB, "optimizer state": 2 * MiB, "activation": 10 * MiB}
    rows, said = nb09.estimate_at_peak(est, at_peak, "backward 1")
    assert rows[-1] == ("total", 14 * MiB, 14 * MiB)
    assert "Every term is live at the peak as estimated" in said and "cancel" not in said


def test_estimate_at_peak_does_not_call_a_lopsided_error_a_cancellation():
    est = MemoryEstimate(params=MiB, grads=MiB, optimizer=2 * MiB, activations=10 * MiB)
    at_peak = {"parameter": MiB, "gradient": 0, "optimizer state": 2 * MiB, "activation": 4 * MiB,
               "temporary": MiB // 2}
    _, said = nb09.estimate_at_peak(est, at_peak, "forward 2")
    assert "of its activations (10.0 MiB), 4.0 MiB are live" in said
    assert "temporary (512.0 KiB) is live and has no term" in said
    assert "cancel" not in said and "7.0 MiB estimated but not live" in said


def test_largest_moment_holds_two_gpts_with_their_adamw_state_at_once():
    from course_lib import memory, models

    cfg = models.GPTConfig(vocab_size=256, block_size=8, n_layer=2, n_head=2, n_embd=32)
    x, y = torch.randint(0, 256, (2, 1, 8))
    weights = sum(p.nbytes for p in models.GPT(cfg).parameters())
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    peak = memory.peak_memory(lambda: nb09.largest_moment(cfg, x, y, None, scaler), "cpu").peak_bytes
    assert peak >= 6 * weights  # 2 GPTs × (weights + AdamW's 2 moments): one at a time would stay near 4.5×


def test_explore_estimates_any_size_and_measures_only_small_ones():
    from course_lib.models import GPT2_SMALL, GPTConfig
    big = nb09.estimate_table(GPT2_SMALL, 8, "bf16 weights", "sgd", "cpu", measure_up_to=64 * MiB)
    assert "124.4 M parameters" in big and "not run" in big  # nothing allocated for 124 M
    small = nb09.estimate_table(GPTConfig(vocab_size=64, block_size=32, n_layer=2, n_head=2, n_embd=32),
                                4, "fp32", "adamw", "cpu", measure_up_to=64 * MiB)
    assert "measured peak" in small and "estimate" in small
    with pytest.raises(ValueError, match="precision"):
        nb09.estimate_table(GPT2_SMALL, 1, "fp8", device="cpu")


def test_fp16_autocast_is_estimated_and_explored_like_bf16():
    """fp16 autocast (a T4's 16-bit format) saves the same bytes as bf16: both are 2-byte formats; estimate_table
    names it and measures it with a GradScaler."""
    from course_lib.models import GPT, GPTConfig
    cfg = GPTConfig(vocab_size=64, block_size=32, n_layer=2, n_head=2, n_embd=32)
    torch.manual_seed(0)
    model, idx = GPT(cfg), torch.randint(0, 64, (4, 32))
    bf16, fp16, fp32 = (memory.estimate_training_memory(model, idx, amp=amp)
                        for amp in (torch.bfloat16, torch.float16, None))
    assert fp16.activations == bf16.activations != fp32.activations
    assert "fp16 autocast" in nb09.PRECISIONS
    out = nb09.estimate_table(cfg, 4, "fp16 autocast", "adamw", "cpu", measure_up_to=64 * MiB)
    assert "fp16 autocast" in out and "measured peak" in out


# ---- the words around the measurements ----

def _t(name, median, iqr=0.0):
    return Timing(name, "cpu", median, iqr, 5)


def test_autocast_line_and_cpu_notes():
    assert nb09.autocast_line(torch.bfloat16, False) == "autocast: bfloat16 | GradScaler: False"
    assert nb09.autocast_line(None, False) == "autocast: off (float32) | GradScaler: False"
    assert nb09.cpu_note("allocator").startswith("On a CPU, PyTorch keeps no cache of its own")
    assert f"asks torch {torch.__version__} which name" in nb09.cpu_note("settings")
    assert "figures published elsewhere" in nb09.cpu_note("settings")
    assert nb09.cpu_note("snapshot").startswith("Allocator snapshots record CUDA memory")
    with pytest.raises(ValueError, match="section"):
        nb09.cpu_note("timeline")


def test_tables_of_counters_phases_and_terms():
    row = nb09.counter_table([("start", 0, 2 * MiB)])
    assert row == f"{'start':<24} allocated {'0 B':>10}   reserved {'2.0 MiB':>10}"
    phases = nb09.phase_table([("model", 0, MiB, MiB), ("forward 1", MiB, 3 * MiB, 2 * MiB)], "cpu").splitlines()
    assert phases[0].endswith("(cpu)")
    assert phases[2].split() == ["forward", "1", "1.0", "MiB", "3.0", "MiB", "2.0", "MiB"]
    terms = nb09.terms_table({"parameters": MiB, "gradients": MiB}, 5 * MiB, "backward 1").splitlines()
    assert len(terms) == 3 and terms[-1] == "peak of the step: 5.0 MiB, during 'backward 1'"


def test_estimate_vs_measured_gives_each_error():
    est = MemoryEstimate(params=MiB, grads=MiB, optimizer=2 * MiB, activations=10 * MiB)
    measured = {"parameters": MiB, "gradients": MiB, "optimizer state (adamw)": 2 * MiB, "activations": 8 * MiB}
    lines = nb09.estimate_vs_measured(est, measured, 16 * MiB).splitlines()
    assert len(lines) == 6 and lines[4].endswith("+25.00 %") and lines[5].startswith("total vs the measured peak")
    assert lines[5].endswith("-12.50 %")  # 14 MiB estimated, 16 measured
    assert "(within ±15 %)" in nb09.peak_error_line(-12.5, "backward 1")
    assert "(outside ±15 %); the measured peak is during 'forward 2'" in nb09.peak_error_line(20.0, "forward 2")


def test_batch_guesses_and_what_a_step_adds():
    lines = nb09.batch_guesses(40, 50, MiB, 42, 1.2 * MiB, (4, 8)).splitlines()
    assert lines[0].split() == ["found", "by", "trying", "40"]
    assert lines[1].endswith("50 (+25 %; 1.0 MiB per sequence)") and "batch 4 and 8" in lines[2]
    above = nb09.beyond_saved_note(0.2 * MiB, 50, 40)
    assert above.startswith("A step adds 204.8 KiB per sequence more") and "50 is above the 40 found" in above
    assert "is not above the 40" in nb09.beyond_saved_note(0.2 * MiB, 40, 40)
    assert nb09.beyond_saved_note(0, 50, 40).startswith("The measured steps add no more")


def test_checkpointing_rows_and_verdicts():
    rows = nb09.checkpoint_rows([_t("plain", 0.1, 0.01), _t("forward", 0.03, 0.002)], {"plain": 4 * MiB})
    assert "peak added    4.0 MiB |  100.0 ms (quartiles 95.0–105.0), 5 runs" in rows and " " * 21 + " |   30.0" in rows
    cost = Ratio("time", 1.3, 1.25, 1.35, more="longer", less="shorter")
    plain, fwd = _t("plain", 0.1, 0.01), _t("forward", 0.03, 0.002)  # the prediction: 129–141 ms
    beyond = nb09.recompute_verdict(0.4, cost, plain, _t("ck", 0.2, 0.01), fwd).splitlines()
    assert beyond[0].startswith("Checkpointing every block: peak added 40 % lower; ")
    assert beyond[2].startswith("verdict: checkpointing costs 70.0 ms beyond recomputing the forward")
    below = nb09.recompute_verdict(-0.1, cost, plain, _t("ck", 0.11, 0.002), fwd)
    assert "peak added 10 % higher" in below and "costs 10.0 ms here, less than the blocks' forward alone" in below
    within = nb09.recompute_verdict(0.4, cost, plain, _t("ck", 0.13, 0.01), fwd)  # quartiles 125–135 hold 130
    assert within.endswith("verdict: the checkpointed step's quartiles hold what a plain step plus the recomputed "
                           "forward predicts (medians against quartiles, not paired turns)")
    apart = nb09.recompute_verdict(0.4, cost, plain, _t("ck", 0.115, 0.02), fwd)  # 105–125 overlaps, misses 130.0
    assert "overlaps the measured quartiles: no difference these repeats can show, though its median lies outside" in apart
    close = nb09.recompute_verdict(0.4, cost, plain, _t("ck", 0.1315, 0.0005), fwd)  # 1.2 % over, quartiles miss 130
    assert close.endswith("verdict: the checkpointed step's median lies within 2% of the prediction (+1.5 ms): the two "
                          "agree; the prediction is a sum of two medians, not a paired reading, and cannot resolve a gap "
                          "that small")


def test_checkpointing_residual_is_paired_where_the_three_shared_turns():
    cost = Ratio("time", 1.3, 1.25, 1.35, more="longer", less="shorter")
    run = object()
    timed = lambda name, xs: Timing(name, "cpu", statistics.median(xs), 0.0, len(xs), samples=tuple(xs),  # noqa: E731
                                    turns_id=run, q1_s=sorted(xs)[1], q3_s=sorted(xs)[3])
    plain, fwd = timed("plain", [0.100, 0.104, 0.098, 0.101, 0.120]), timed("forward", [0.030, 0.031, 0.029, 0.030, 0.036])
    ck = timed("ck", [0.133, 0.138, 0.130, 0.134, 0.159])  # 3 ms more than plain + forward in every turn
    said = nb09.recompute_verdict(0.4, cost, plain, ck, fwd).splitlines()[2]
    assert said.startswith("verdict: checkpointing costs +3.0 ms a step (+3.0 to +3.0 ms: median of 5 paired turns' "
                           "residuals, not the medians' difference above; 94% interval) beyond recomputing the forward")
    same = timed("ck", [0.131, 0.134, 0.128, 0.130, 0.156])  # -1 to +1 ms
    assert nb09.recompute_verdict(0.4, cost, plain, same, fwd).endswith("holds 0, its ends within 0.8% of the prediction")
    crossed = timed("plain", [0.10, 0.20, 0.20, 0.10, 0.10]), timed("forward", [0.10, 0.01, 0.01, 0.01, 0.10])
    summed = timed("ck", [0.20, 0.21, 0.21, 0.11, 0.20])  # each turn's sum exactly: the medians' sum is 110 ms, not 200
    said = nb09.recompute_verdict(0.4, cost, crossed[0], summed, crossed[1]).splitlines()
    assert said[1].endswith(": the medians differ by +90.0 ms, but a sum of two medians need not be the median of the "
                            "turns' sums; the paired residual below compares the three turn by turn")  # readers GB, GC
    assert "agrees" in said[2] and "medians differ" not in nb09.recompute_verdict(0.4, cost, plain, same, fwd)
    loose = timed("ck", [0.131, 0.150, 0.112, 0.130, 0.156])  # -15 to +15 ms: holds 0, but reaches past 10 %
    assert "verdict: too wide to tell whether checkpointing costs more" in nb09.recompute_verdict(  # reader GA
        0.4, cost, plain, loose, fwd) and "agrees" not in nb09.recompute_verdict(0.4, cost, plain, loose, fwd)
    tiny = timed("ck", [0.1315, 0.1355, 0.1275, 0.1315, 0.1565])  # +0.5 ms in every turn: measurable, under 2 %
    small = nb09.recompute_verdict(0.4, cost, plain, tiny, fwd)
    assert "beyond recomputing the forward: measurable, but small: 0.4% of the prediction (0." in small
    assert small.endswith("), all of it under 2%")
    reach = timed("ck", [0.1315, 0.1435, 0.1275, 0.1315, 0.1615])  # +1.5 ms at the median, its interval past 2 %
    assert nb09.recompute_verdict(0.4, cost, plain, reach, fwd).endswith(": measurable: 1.1% of the prediction (0.4%–6.5%)")


def test_set_to_none_and_empty_cache_notes():
    note = nb09.set_to_none_note({True: MiB, False: 3 * MiB}, {True: 5 * MiB, False: 7 * MiB})
    assert "(+2.0 MiB)" in note and note.endswith("peak of step 2: 5.0 MiB vs 7.0 MiB")
    made = nb09.empty_cache_note((MiB, 300 * MiB), (MiB, 2 * MiB), 256 * MiB).splitlines()
    assert made[0].startswith("a 256.0 MiB temporary freed, then empty_cache(): allocated 1.0 MiB → 1.0 MiB")
    assert len(made) == 2 and made[1].startswith("still reserved beyond what is allocated: 1.0 MiB")
    assert "too little memory free" in nb09.empty_cache_note((MiB, 2 * MiB), (MiB, 2 * MiB), None)


def test_allocator_settings_notes():
    assert "reads both names" in nb09.alloc_conf_line({"PYTORCH_ALLOC_CONF": True, "PYTORCH_CUDA_ALLOC_CONF": True})
    only = nb09.alloc_conf_line({"PYTORCH_ALLOC_CONF": False, "PYTORCH_CUDA_ALLOC_CONF": True})
    assert "reads only PYTORCH_CUDA_ALLOC_CONF for CUDA: PYTORCH_ALLOC_CONF alone left" in only
    assert "neither name" in nb09.alloc_conf_line({"PYTORCH_ALLOC_CONF": False, "PYTORCH_CUDA_ALLOC_CONF": False})
    assert nb09.frag_line("", {"peak_allocated": MiB, "peak_reserved": 3 * MiB // 2}).endswith("(1.50×)")
    frag = {"default": {"peak_reserved": 4 * MiB}, "expandable_segments:True": {"peak_reserved": 3 * MiB,
                                                                                 "expandable": True}}
    assert nb09.expandable_note(frag) == "expandable segments reserve less here: 3.0 MiB vs 4.0 MiB"
    frag["expandable_segments:True"] = {"peak_reserved": 4 * MiB, "expandable": False}
    unused = nb09.expandable_note(frag).splitlines()
    assert unused[0].startswith("Expandable segments were asked for but not used")
    assert "do not reserve less" in unused[1]


def test_at_peak_report_and_the_profilers_cost():
    rows = [("parameters / parameter", MiB, MiB), ("(no term) / autograd detail", None, 2 * MiB)]
    report = nb09.at_peak_report(rows, "At the peak: ...", 2 * MiB, 4, 1 * MiB, measured_at=(2, 4)).splitlines()
    assert report[2].split()[-3] == "-" and report[3] == "At the peak: ..."
    assert report[4].startswith("autograd detail at the peak: 2.0 MiB in one profiled step at batch 4, 512.0 KiB per "
                                "sequence, 50% of the 1.0 MiB per sequence")
    assert "section 4's peaks at batch 2 and 4" in report[4]  # a slope between two other steps: said as such
    assert report[4].endswith("a consistency check between two different measurements, suggestive, not the same "
                              "bytes measured twice")
    assert len(nb09.at_peak_report(rows, "v", 2 * MiB, 4, 0, measured_at=(2, 4)).splitlines()) == 4  # no comparison
    plain = _t("plain", 0.1, 0.01)  # upper quartile 105 ms
    far = nb09.profiler_cost(300, plain)  # 300 ms against quartiles 95-105 ms: 2.86-3.16x, past what two moments make
    assert "3.00× as long (2.86–3.16× over section 5's quartiles), two moments: a difference (2.5× or more)" in far \
        and "the profiler" in far
    near = nb09.profiler_cost(150, plain)  # 1.43-1.58x: two moments can move that much
    assert "1.50× as long" in near and "not told apart (under 2.5×)" in near and "does not measure the profiler's cost" in near
    assert "within section 5's quartiles: two moments cannot show a cost under 2.5×" in nb09.profiler_cost(104, plain)
    assert "no cost" not in nb09.profiler_cost(104, plain)  # not measured: not said


def test_recompute_elsewhere_reads_the_reference_by_the_same_rule(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    from course_lib import report
    rep = report.Report("09_memory", "gpu", "cpu")
    rep.meta.update(device="NVIDIA Test GPU", device_type="cuda")
    assert nb09.recompute_elsewhere() == ""  # no reference recorded
    rep.add("forward + backward, no checkpointing", 49.3, "ms", spread=(47.9, 50.4))
    rep.add("the blocks' forward alone", 22.6, "ms", spread=(22.5, 23.0))
    rep.add("forward + backward, checkpointed", 90.3, "ms", spread=(90.1, 91.3))
    report.record_reference({"09_memory": rep.to_dict()})
    text = nb09.recompute_elsewhere()
    assert "a plain step plus the blocks' forward 71.9 ms (70.4–73.4), measured with checkpointing 90.3 ms" in text
    assert "18.4 ms beyond recomputing the forward, a difference of medians (the reference timed the three apart: no " \
        "paired residual, no interval)" in text and "not measured" in text  # reader GE: not worded as a paired residual
    rep.add("forward + backward, checkpointed", 72.0, "ms", spread=(71.0, 73.0))
    report.record_reference({"09_memory": rep.to_dict()})
    assert nb09.recompute_elsewhere().endswith("the recomputed forward there too")


def test_profiler_cost_says_when_the_profiled_step_ran_faster():
    from course_lib import bench
    plain = bench.timing_of([0.139, 0.140, 0.141, 0.144, 0.141], name="plain", device="cpu")
    faster = nb09.profiler_cost(126.0, plain)  # shorter than the lower quartile, at another moment
    assert "0.89× as long" in faster and "not told apart (under 2.5×)" in faster and "does not measure" in faster
    assert "within section 5's quartiles" in nb09.profiler_cost(141.0, plain)


def test_step_in_08_sets_08s_whole_step_beside_this_part_of_it():
    from course_lib import bench, profiles
    from course_lib.models import GPTConfig
    c = profiles.sizes("09_memory", "cpu")
    gpt = GPTConfig(vocab_size=256, block_size=c.block, n_layer=c.n_layer, n_head=c.n_head, n_embd=c.n_embd)
    row = {"value": 14.6, "unit": "ktok/s", "spread": [14.05, 14.7]}  # 08's whole step: about 140 ms
    ran08 = {f"step, micro-batch of {c.batch} sequences": row}
    assert nb09.row_of_08(ran08, c.batch, gpt, "cpu") is row
    assert nb09.row_of_08(None, c.batch, gpt, "cpu") is None  # 08 did not run so
    wider = GPTConfig(vocab_size=256, block_size=c.block, n_layer=c.n_layer, n_head=c.n_head, n_embd=2 * c.n_embd)
    assert nb09.row_of_08(ran08, c.batch, wider, "cpu") is None
    quiet = {**row, "value": 15.0}  # 08 also timed that step without its utilisation sampler: the cleaner reading
    ran08[f"step, micro-batch of {c.batch} sequences, no sampler"] = quiet
    assert nb09.row_of_08(ran08, c.batch, gpt, "cpu") == {**quiet, "sampler": False}
    assert nb09.row_of_08(ran08, c.batch, wider, "cpu") is None
    assert "(its section 5, no utilisation sampler)" in nb09.step_in_08({**quiet, "sampler": False}, (
        bench.timing_of([0.17, 0.171], name="w", device="cpu", turns_id="q"),
        bench.timing_of([0.15, 0.151], name="p", device="cpu", turns_id="q")), c.batch, gpt)
    # the whole step timed here in turns with its forward and backward: the part's share, paired, then 08's
    # record against the whole step here, two moments apart
    whole = bench.timing_of([0.170, 0.172, 0.175, 0.169, 0.180], name="08's whole step, here", device="cpu",
                            turns_id="t")
    part = bench.timing_of([0.150, 0.151, 0.155, 0.149, 0.158], name="its forward and backward, here", device="cpu",
                           turns_id="t")
    assert nb09.step_in_08(None, (whole, part), c.batch, gpt) == ""
    first, second = nb09.step_in_08(row, (whole, part), c.batch, gpt).splitlines()
    assert "the part is shorter than the whole, as it must be" in first and "alone took 88.2% of the whole step (the median of the paired turns' ratios; the whole step includes " \
        "clipping and AdamW), its paired range 87.8%–88.6%" in first
    # a digit more than whole percent, since at whole percent the median would print as an end (88%, 88%–89%)
    assert second.startswith("notebook 08 recorded a whole training step") and "the whole step here: 172.0 ms" in second
    assert "14.6 (14.05–14.7) ktok/s" in second and "the whole step here: 172.0 ms (170.0–175.0), 11.91 (11.7–12.05) ktok/s" in second
    tokens = c.batch * c.block
    lo, hi = (tokens / whole.hi_s) / 14.7e3, (tokens / whole.lo_s) / 14.05e3  # rate here over 08's fastest, slowest
    assert f"its range, {lo:.2f}–{hi:.2f}×" in second and "inconclusive" in second  # 0.79–0.86×: under 2.5×
    assert nb09.part_share((whole, part)).value == pytest.approx(0.882, abs=0.001)  # what 10 reads, recorded
    five = bench.timing_of([0.125, 0.126, 0.124, 0.127, 0.125], name="section 5's", device="cpu")  # reader FS
    moved = nb09.step_in_08(row, (whole, part), c.batch, gpt, part5=five).splitlines()
    assert moved[1] == ("the forward and backward read 151 ms here and 125 ms in section 5 (1.21× apart; two moments: "
                        "its range, 1.19–1.24×, is within 2.5× of 1, a gap the pace of two moments can make: "
                        "inconclusive): the share above is paired, part and "
                        "whole in the same turns, so it does not depend on which is typical")
    assert len(nb09.step_in_08(row, (whole, part), c.batch, gpt, part5=part).splitlines()) == 2  # no move: no line
    twin = {**row, "setup": "written-out attention"}  # reader FU: 08's written-out twin is not section 5's SDPA GPT
    assert "in section 5 (" not in nb09.step_in_08(twin, (whole, part), c.batch, gpt, part5=five)
    written = {**row, "setup": "written-out attention"}  # 08 ran the written-out attention: the pair names it
    assert "08's whole step (written-out attention, as 08 ran it; this notebook's own steps above run SDPA), timed " in \
        nb09.step_in_08(written, (whole, part), c.batch, gpt)
    sec4 = {"value": 11.9, "unit": "ktok/s", "spread": [11.8, 12.0]}  # 08's section 4 read it too
    both = nb09.step_in_08(written, (whole, part), c.batch, gpt, sec4).splitlines()
    assert "(its section 5, the utilisation sampler running)" in both[1]
    assert both[2].startswith("08's section 4 read the same GPT's step with two micro-batches at 11.9 (11.8–12) ktok/s: from "
                         "that reading, this one is not told apart: ") and both[2].endswith(
        "×, their quartile ranges overlapping, within the 2.5× that two moments can differ by")
    assert both[3] == ("08's own two readings of this GPT's step, its section 4 (two micro-batches a step) and its "
                       "section 5 (one), are 1.23× apart in rate: a reading here can sit near one and far from the other; "
                       "notebook 10 sets every reading of it side by side")  # readers GB, GC: two variants, named
    near = {**sec4, "value": 14.0}  # 08's two readings within 1.1× of each other: no such line
    assert len(nb09.step_in_08(written, (whole, part), c.batch, gpt, near).splitlines()) == 3
    probe = bench.timing_of([0.020] * 5, name="pace probe, beside 08's step", device="cpu", turns_id="t")
    paced = nb09.step_in_08(written, (whole, part), c.batch, gpt, sec4,
                            probes=({"value": 20.0, "unit": "ms"}, probe)).splitlines()[2]
    # the same probe time in both sets: the ratio of the rates is left as it is (11.91 / 11.9), within 1.1×
    assert paced.endswith("; the pace probe (a fixed matmul and copy) read 20.0 ms in 08's section 4 turns and 20.0 ms "
                          "here: with each set's pace taken out, this one is 1.00× 08's (its rate alone: 1.00×), "
                          "within 1.1× of 08's")
    slow = nb09.step_in_08(written, (whole, part), c.batch, gpt, sec4,
                           probes=({"value": 25.0, "unit": "ms"}, probe)).splitlines()[2]  # 08's set ran slower
    assert "this one is 0.80× 08's (its rate alone: 1.00×), a gap the probe does not take away" in slow
    reach = nb09.step_in_08(written, (whole, part), c.batch, gpt, sec4,  # 08's probe quartiles reach down to 21 ms
                            probes=({"value": 25.0, "unit": "ms", "spread": [21.0, 26.0]}, probe)).splitlines()[2]
    assert reach.endswith("this one is 0.80× 08's (its rate alone: 1.00×), beyond 1.1× of 08's at the medians, "
                          "1.03× where the two spreads come closest: inconclusive")  # reader FQ: not a gap on medians alone
    spread = nb09.step_in_08(written, (whole, part), c.batch, gpt, sec4,  # 08's probe ran 19-23 ms: the far ends
                             probes=({"value": 20.0, "unit": "ms", "spread": [19.0, 23.0]}, probe)).splitlines()[2]
    assert spread.endswith("this one is 1.00× 08's (its rate alone: 1.00×), within 1.1× of 08's at the medians, up to "
                           "1.18× where the two spreads lie furthest apart: inconclusive")  # as 10 reads it (reader FK)
    assert nb09.step_in_08(written, (whole, part), c.batch, gpt, sec4, probes=(None, probe)) == "\n".join(both)
    quiet = {**written, "sampler": False}  # 08's section 5 without the sampler, its probe timed in the same turns
    five = nb09.step_in_08(quiet, (whole, part), c.batch, gpt, sec4, probes=({"value": 25.0, "unit": "ms"}, probe),
                           probe5={"value": 20.0, "unit": "ms"}).splitlines()
    assert "the pace probe (a fixed matmul and copy) read 20.0 ms in 08's section 5 turns and 20.0 ms here" in five[1]
    assert "pace probe" not in five[2]  # section 4's step (2 micro-batches) is not the one the pace is taken out of
    assert "pace probe" not in nb09.step_in_08(written, (whole, part), c.batch, gpt, sec4,  # sampler on: not the same
                                               probe5={"value": 20.0, "unit": "ms"}, probes=(None, probe))
    longer = bench.timing_of([0.180, 0.182, 0.185, 0.179, 0.190], name="part", device="cpu", turns_id="t")
    assert "the part took longer than the whole in the same turns" in nb09.step_in_08(row, (whole, longer), c.batch,
                                                                                     gpt)


def test_as_in_08_runs_the_attention_08_timed_with_the_same_weights():
    from course_lib.attention import MultiHeadAttention
    from course_lib.lessons import nb08
    from course_lib.models import GPT, GPTConfig
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=32, block_size=16, n_layer=2, n_head=2, n_embd=16))
    assert nb09.as_in_08(model, {"value": 1.0}) is model  # 08 ran SDPA, as this notebook does
    twin = nb09.as_in_08(model, {"value": 1.0, "setup": nb08.attention_setup(False)})
    attns = [m for m in twin.modules() if isinstance(m, MultiHeadAttention)]
    assert twin is not model and len(attns) == 2 and not any(m.sdpa for m in attns)
    assert all(m.sdpa for m in model.modules() if isinstance(m, MultiHeadAttention))  # the original untouched
    idx = torch.randint(0, 32, (2, 16))
    torch.testing.assert_close(twin(idx), model(idx), atol=1e-5, rtol=1e-4)  # the same function, written out


def test_whole_and_part_times_08s_step_and_its_forward_and_backward_in_turns():
    from course_lib.models import GPT, GPTConfig
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=16, block_size=8, n_layer=1, n_head=2, n_embd=8))
    x = torch.randint(0, 16, (2, 8))
    before = [p.detach().clone() for p in model.parameters()]
    whole, part = nb09.whole_and_part(model, lambda: model(x).float().pow(2).mean().backward(), torch.device("cpu"), 2)
    assert (whole.runs, part.runs) == (2, 2) and whole.turns_id == part.turns_id  # paired, round by round
    assert any(not torch.equal(a, p) for a, p in zip(before, model.parameters()))  # AdamW's update ran


def test_answer_reads_each_line_from_its_section():
    from course_lib.lessons import nb09_answer
    rows = {"step peak, measured": {"value": 54.97, "unit": "MiB"}, "estimate vs measured peak": {"value": -1.373, "unit": "%"},
            "largest batch in the budget": {"value": 69, "unit": "sequences", "note": "256.0 MiB, cpu"},
            "checkpointing: forward + backward's added memory saved": {"value": 63.12, "unit": "%"},
            "time of forward + backward, checkpointed / not": {"value": 1.272, "unit": "×", "spread": [1.245, 1.314]}}
    said = nb09_answer.answer(rows, {"activation": 41.3 * MiB, "gradient": 0, "parameter": 3.2 * MiB}, 16, "cpu").splitlines()
    assert said[1] == "  how much: one training step of this GPT at batch 16 peaks at 55.0 MiB (section 2)"
    assert said[2].startswith("  where it goes, live at the peak (section 7): activation 41.3 MiB, parameter 3.2 MiB; no "
                              "gradient is live there")
    assert said[3].startswith("  predicted before running: the estimate is -1.4 % off the measured peak")
    assert said[4] == ("  when it does not fit: the largest batch whose forward + backward adds at most 256.0 MiB to what "
                       "is in use: 69 sequences (section 4); checkpointing every block: 63 % less memory added by forward "
                       "+ backward (the weights already in place, no optimizer), for 1.27× (1.25–1.31) its time (section 5)")
    assert nb09_answer.answer({}, None, 16, "cpu") == "answer, from this run's numbers (cpu):"  # nothing ran: no lines


def test_pace_rule_reads_medians_and_quartile_ends_one_way_for_09_and_10():
    """One home for the rule 09's appendix and 10's beside-08 line both word: medians and the quartiles' ends."""
    from course_lib.lessons.nb09_beside08 import PACED, pace_rule
    assert PACED == pytest.approx(1.1)
    assert pace_rule(1.05, 1.0, 1.08) == "agree"
    assert pace_rule(1.05, 1.0, 1.19) == "far ends"  # the medians within 1.1x, the far ends past it
    assert pace_rule(1.15, 1.04, 1.3) == "near ends"  # past it at the medians, within it at the near ends
    assert pace_rule(1.32, 1.2, 1.5) == "apart"
    from course_lib.lessons.nb09_beside08 import near_far
    assert near_far(0.95, 1.2) == (1.0, 1.2) and near_far(1.2, 1.5) == (1.2, 1.5)
    assert near_far(0.5, 0.8) == pytest.approx((1.25, 2.0))  # below 1: each end as its inverse


def test_malloc_line_and_note_say_what_was_counted_and_why_not():
    back = Timing("handed back", "cpu", 0.17, 0.01, 9, faults=17_349.0)
    kept = Timing("kept", "cpu", 0.14, 0.01, 9, faults=86.0)
    line = nb09.malloc_line(back, kept)
    assert "handed back: 17,349 (67.8 MiB" in line and "kept: 86 (344.0 KiB" in line  # 4 KiB pages
    assert "does not count" in nb09.malloc_line(back, Timing("kept", "cpu", 0.14, 0.01, 9))
    assert "caching allocator" in nb09.malloc_note("cuda") and "glibc" in nb09.malloc_note("cpu")
    assert nb09.malloc_line(back, kept, [0.002, 0.003, 0.004]).endswith(
        "\nmalloc_trim(0) itself took 3 ms a call (the median), taken out of each turn's time above: what is left is "
        "the step")  # reader GK, GJ: the trim's own time is not the faults'
    assert "malloc_trim" not in nb09.malloc_line(back, kept)
