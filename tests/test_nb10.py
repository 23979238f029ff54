"""course_lib.lessons.nb10: notebook 10's exercise checks accept the answer and refuse wrong ones; the
texts its cells print say what their numbers and branches say."""

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from course_lib.bench import Ratio, Timing
from course_lib import bench, roofline
from course_lib.lessons import nb10
from course_lib.lessons.nb08_compile import NOT_ESTABLISHED
from course_lib.models import GPT, GPTConfig
from course_lib.lessons.nb09_beside08 import WHOLE_STEP as WHOLE_STEP_09
from course_lib.profiling import StepSyncs, SyncCounter
from course_lib.roofline import OpTime, StepOps

pytestmark = pytest.mark.versioned  # torch.compile: make test-oldest runs it


def test_arithmetic_intensity_exercise():
    add = lambda n: n / (12 * n)  # noqa: E731
    matmul = lambda m, k, n, s: 2 * m * k * n / (s * (m * k + k * n + m * n))  # noqa: E731
    nb10.check_arithmetic_intensity(add, matmul)
    with pytest.raises(AssertionError):  # the result's write forgotten
        nb10.check_arithmetic_intensity(lambda n: n / (8 * n), matmul)
    with pytest.raises(AssertionError):  # a multiply-add counted as one FLOP
        nb10.check_arithmetic_intensity(add, lambda m, k, n, s: m * k * n / (s * (m * k + k * n + m * n)))


def _loop(model, opt, batches, read):
    losses = []
    for xb, yb in batches:
        loss = F.cross_entropy(model(xb).flatten(0, 1), yb.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item() if read else loss.detach())
    return losses if read else torch.stack(losses)


def test_no_sync_loop_exercise():
    reference = lambda m, o, b: _loop(m, o, b, read=True)  # noqa: E731
    nb10.check_no_sync_loop(lambda m, o, b: _loop(m, o, b, read=False), reference)
    with pytest.raises(AssertionError, match="synchronising"):  # .item() left in
        nb10.check_no_sync_loop(lambda m, o, b: torch.tensor(_loop(m, o, b, read=True)), reference)
    with pytest.raises(AssertionError):  # no training step: other losses
        nb10.check_no_sync_loop(lambda m, o, b: torch.stack([F.cross_entropy(m(xb).flatten(0, 1), yb.flatten()).detach()
                                                             for xb, yb in b]), reference)


class _Clipped(torch.nn.Module):
    """Exercise 3's given module: clips its output to ±10 only where it ran past it (a read: a graph break)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(16, 16)

    def forward(self, x):
        x = self.linear(x)
        return x.clamp(-10, 10) if x.abs().max() > 10 else x


def test_no_graph_break_exercise():
    class Fixed(_Clipped):
        def forward(self, x):
            return self.linear(x).clamp(-10, 10)

    class Narrow(_Clipped):  # no break, but another output past ±1
        def forward(self, x):
            return self.linear(x).clamp(-1, 1)

    nb10.check_no_graph_break(Fixed, _Clipped)
    with pytest.raises(AssertionError, match="graph break"):  # the given module: its `if` reads a value
        nb10.check_no_graph_break(_Clipped, _Clipped)
    with pytest.raises(AssertionError):  # outputs that differ from the given module's
        nb10.check_no_graph_break(Narrow, _Clipped)


# ---- the words around the measurements ----

CLEAR = Ratio("b vs a", 2.0, 1.8, 2.2, rounds=5, coverage=0.9, drift=0.01)  # beyond the spread
NONE = Ratio("b vs a", 1.01, 0.97, 1.05, rounds=5, coverage=0.9, drift=0.01)  # within it


def _t(name, median, iqr=0.0, **kw):
    return Timing(name, "cpu", median, iqr, 5, **kw)


def test_precision_line_says_fp16_stands_in_and_off_is_float32(tmp_path):
    fp16 = nb10.precision_line("fp16", torch.float16, "a T4", tmp_path)
    assert fp16.splitlines()[0].startswith("a T4 has no bf16 tensor cores") and "GradScaler: True" in fp16
    off = nb10.precision_line("off", torch.bfloat16, "cpu", tmp_path)
    assert len(off.splitlines()) == 1 and "autocast: off (float32) | GradScaler: False" in off and str(tmp_path) in off


def test_gpt_line_counts_the_parameters():
    cfg = GPTConfig(vocab_size=16, block_size=8, n_layer=1, n_head=2, n_embd=8)
    assert f"| {GPT(cfg).num_params():,} parameters" in nb10.gpt_line(cfg, 3)
    assert "batch 3 sequences" in nb10.gpt_line(cfg, 3)


def test_trace_note_names_the_file_and_a_viewer(tmp_path):
    path = tmp_path / "t.json"
    path.write_bytes(b"x" * 2048)
    note = nb10.trace_note(path, 2)
    assert note.startswith(f"trace of 2 steps: {path} (") and "perfetto" in note


def test_shares_are_of_the_sum_of_the_medians():
    lines = nb10.shares([_t("a", 1.0), _t("b", 3.0)]).splitlines()
    assert lines[0].endswith(" 25.0% of the step") and lines[1].endswith(" 75.0% of the step")


def test_sync_line_lists_each_step_and_the_mean_time():
    found = [StepSyncs({"aten::item": 3}, 0.002), StepSyncs({"aten::item": 1}, 0.004)]
    line = nb10.sync_line("reading", found)
    assert "per profiled step: [3, 1] {'aten::item': 3}" in line and line.endswith("3.00 ms/step (the mean over the profiled steps)")


def test_warning_sites_count_each_line():
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            warnings.warn("sync")
        warnings.warn("sync")
    said = nb10.warning_sites(caught)
    assert said.startswith("  where they came from: test_nb10.py:") and "×3, test_nb10.py:" in said and said.endswith("×1")


def test_counter_line_counts_the_first_call():
    t = torch.ones(2)
    with SyncCounter() as counter:
        t.sum().item()
        t.max().item()
    line = nb10.counter_line(counter, "two reads")
    assert line.startswith("SyncCounter, two reads: 2 synchronising calls (") and line.endswith("×2)")
    with SyncCounter() as nothing:
        t + t
    assert nb10.counter_line(nothing, "none") == "SyncCounter, none: 0 synchronising calls"


def test_sync_verdict_adds_the_cpu_note_and_the_reference_off_a_gpu():
    gpu = nb10.sync_verdict(CLEAR, 7, "H100", "cuda")
    head, second, details, verdict = gpu.splitlines()
    assert head == "in short: a step reading its logged values makes 7 synchronising calls, a step keeping them on the " \
        "device none"
    assert second == f"          keeping them instead of reading them, in speed, timed in turns here: {CLEAR.brief}" and details == "  details:"
    assert verdict.startswith("    verdict on H100: keeping the 7 values per step on the device: 2.00×")
    cpu = nb10.sync_verdict(CLEAR, 7, "EPYC", "cpu")
    assert "(on a CPU, ops run as they are called" in cpu
    assert nb10.sync_verdict(None, 7, "H100", "cuda") == ""


def test_answer_sums_the_step_the_kinds_and_the_fixes(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))  # no reference run: this run's lines only
    kinds = {"attention": {"seconds": 0.05}, "matmul": {"seconds": 0.03}, "element-wise": {"seconds": 0.01},
             "copy": {"seconds": 0.01}}
    fixes = {"keeping values": Ratio("k", 0.99, 0.93, 1.02, rounds=5, coverage=0.94, drift=0.01),
             "compiling": Ratio("c", 1.04, 1.02, 1.05, rounds=9, coverage=0.96, drift=0.01), "the graph break": None}
    cpu_step = {"compute": 0.09, "copies": 0.004, "waiting": 0.0, "framework": 0.006}
    said = nb10.answer(cpu_step, "cpu", fixes, kinds, "sdpa bwd", 0.04).splitlines()
    whole = nb10.answer(cpu_step, "cpu", fixes, kinds, "sdpa bwd", 0.04)  # the short lines end the lesson, details go below
    cut = said.index("  details:")
    assert whole.short.splitlines() == said[:cut] and whole.details.splitlines()[0] == "details behind the answer:"
    both = nb10.answer(cpu_step, "cpu", fixes, kinds, "sdpa bwd", 0.04,  # section 1's profile beside section 4's shares
                       profiled={"attention": 0.45, "matmul": 0.35, "element-wise": 0.1, "copy": 0.1}).splitlines()
    assert both[1] == ("  where the time went: attention 45% (50%), matmul 35% (30%), element-wise 10% (10%) of "
                       "the op time (section 1's profile; in brackets section 4's op timings)")
    assert whole.details.splitlines()[1:] == [ln[2:] for ln in said[cut + 1:]] and len(said[cut + 1:]) > 3
    assert said[:9] == [  # the short lines first
        "answer, from this run's numbers:",
        "  where the time went: attention 50%, matmul 30%, element-wise 10% of the op time (under the profiler, section 4)",
        "  the costliest op, sdpa bwd, at 4.0% of its roof",
        "  possibly avoidable (details in the appendix): the model's fusible ops (element-wise, "
        "reduction, copy), 20.0% of the op time",
        "  the fixes taught here, each timed in turns:",
        "    keeping values: 0.99× (0.93–1.02) no measurable difference",
        "    compiling: 1.04× (1.02–1.05) faster",
        "    the graph break: not timed here",
        "  so what paid: compiling at 1.04× made the step measurably faster, in turns"]
    said = said[4:]  # the three fixes' lines and the costliest op's: the details start 4 lines further on
    assert said[5] == "  details:"
    assert said[6] == ("    the profiled step (section 1): ops 94% of it, time outside any op (Python, autograd's bookkeeping, "
                       "the profiler's own) 6.0%")
    # element-wise and copies: 20 % of the op time: the ops at most 1 / (1 - 0.2) = 1.25x faster; Python 6 % besides
    assert said[7].startswith("    compiling's room: the model's element-wise, reduction and copy ops (the kinds "
                              "Inductor fuses) took 20.0% of section 4's op time; if their time went to zero, the ops would "
                              "run at most 1.25× faster (if matmuls and attention stay library calls: assumed, not "
                              "measured); fusing removes their memory round trips, so ops far below their memory roof "
                              "would keep part of their time (reasoning, not measured)")
    assert said[8] == "      the loss's and the optimizer's such ops, 0.0% more, stay outside torch.compile(model)"
    assert said[9].endswith(": 6.0% of section 1's profiled step (part of the profiler's own time lands there)")
    apart = nb10.answer(cpu_step, "cpu", fixes, kinds, "sdpa bwd", 0.04, outside=0.005).splitlines()
    assert apart[3].endswith("fusible ops (element-wise, reduction, copy), 15.0% of the op time")
    assert "took 15.0% of section 4's op time" in apart[11] and "1.18× faster" in apart[11] and "ops, 5.0% more" in apart[12]
    bracket = nb10.answer(cpu_step, "cpu", fixes, kinds, "sdpa bwd", 0.04, ops_unprofiled=0.98).splitlines()[13]
    short = nb10.answer(cpu_step, "cpu", fixes, kinds, "sdpa bwd", 0.04, ops_unprofiled=0.98).splitlines()
    assert short[2] == ("  the costliest op, sdpa bwd, at 4.0% of its roof; outside any op, at least 2.0% of the step "
                        "without the profiler (a lower bound, if the op records hold every op)")
    assert short[3].startswith("  possibly avoidable (details in the appendix): the model's fusible ops")
    assert bracket.endswith("at least 2.0% of the step without the profiler (section 4, if its op records hold every op); "
                            "section 1's profiled step reads "
                            "6.0%, which holds part of the profiler's own time")
    lower = nb10.answer(cpu_step, "cpu", fixes, kinds, "sdpa bwd", 0.04, ops_unprofiled=0.92).splitlines()[13]
    assert lower.endswith("at least 8.0% of the step without the profiler (section 4, if its op records hold every op); "
                          "section 1's profiled step reads 6.0%, "
                          "lower still: the profiler books part of its own cost inside the ops' records")
    over = nb10.answer(cpu_step, "cpu", fixes, kinds, "sdpa bwd", 0.04, ops_unprofiled=1.01).splitlines()
    assert over[3].startswith("  possibly avoidable (details in the appendix): the model's fusible ops")  # no 'at least 0.0%' as a finding
    assert over[13].endswith("section 4 sets no lower bound on it: the profiled ops add up to 101% of the unprofiled step's fast quartile "
                            "(part of the profiler's and the counting's cost is expected inside the ops' records: not "
                            "measured apart), so this run cannot bound from below the time "
                            "outside any op; section 1's profiled step reads 6.0%, which holds part of the profiler's own time")
    assert "at least 0.0%" not in "\n".join(over) and " 0.0% of the step" not in "\n".join(over)
    written = {"compiled vs eager, written-out attention": {"value": 1.24, "spread": [1.07, 1.37]}}
    assert "    with attention written out, its ops are fusible too: notebook 08 compiled that GPT at 1.24× " \
        "(1.07–1.37) faster in its own turns" in nb10.answer(cpu_step, "cpu", fixes, kinds, "sdpa bwd", 0.04, written)
    assert "not established" not in nb10.answer(cpu_step, "cpu", fixes, kinds, "sdpa bwd", 0.04, written)
    doubted = {k: {**v, "note": NOT_ESTABLISHED} for k, v in written.items()}  # 08 withdrew it (reader GG, GF)
    assert "faster in its own turns, a gain 08 calls not established (its eager control moved as much)" in \
        nb10.answer(cpu_step, "cpu", fixes, kinds, "sdpa bwd", 0.04, doubted)
    broken = {"a tensor instead of .item()": Ratio("t", 1.08, 0.94, 1.20, rounds=9, coverage=0.96, drift=0.01),
              "compiling (default mode)": Ratio("c", 1.03, 0.97, 1.07, rounds=9, coverage=0.96, drift=0.01)}
    ran08 = {"compiled vs eager, SDPA": {"value": 1.06, "spread": [1.02, 1.08]}}
    text = nb10.answer({"compute": 0.9, "framework": 0.1}, "cpu", broken, None, "", None, ran08)
    assert "the graph break's fix showed no gain these turns can measure (1.08×; the in-turns interval, 0.94–1.20×, is " \
        "too wide to tell; section 3b)" in text and "not measurable" not in text
    assert "notebook 08 timed compiling this GPT in its own turns: 1.06× (1.02–1.08) faster; here: the in-turns " \
        "interval, 0.97–1.07×, holds 1" in text
    ran08["compiled vs eager, SDPA"].update(rounds=5, coverage=0.94, drift=0.09)  # 08's own turns drifted 9 %
    assert "in its own turns: 1.06× (1.02–1.08) inconclusive;" in nb10.answer(
        {"compute": 0.9, "framework": 0.1}, "cpu", broken, None, "", None, ran08)
    gpu = nb10.answer({"compute": 0.2, "copies": 0.02, "waiting": 0.78}, "cuda", {}, None, "", None)
    assert "the GPU waited 78% of it, ran kernels and copies 22%" in gpu and "room" not in gpu
    assert "  so what paid: no change timed here made the step measurably faster" in gpu
    attention = Ratio("a", 1.30, 1.25, 1.36, rounds=9, coverage=0.96, drift=0.01)
    ran08 = {"SDPA vs written-out attention, eager": {"value": 0.74, "spread": [0.73, 0.78]}}
    both = nb10.answer({"compute": 0.9, "framework": 0.1}, "cpu", {}, None, "", None, ran08, attention).splitlines()
    assert both[1:3] == ["  so what paid: the written-out attention at 1.30× (notebook 08's turns: 1.35×) made the step measurably faster, in turns",
                         "  details:"]
    assert not any("a change of kernel" in ln for ln in both)  # said once, in the line with 08's reading beside it
    alone = nb10.answer({"compute": 0.9, "framework": 0.1}, "cpu", {}, None, "", None, None, attention).splitlines()
    assert "    the written-out attention instead of SDPA: in section 3's turns 1.30× (1.25–1.36) faster" in alone
    assert both[-1] == ("    the written-out attention instead of SDPA: in section 3's turns 1.30× (1.25–1.36) faster; "
                        "notebook 08's step (two micro-batches, with clipping), in its own turns: 1.35× (1.28–1.37)")
    assert "the written-out attention's gain" not in "\n".join(both)  # neither float32 nor a reference recorded
    ran08["attention alone, torch.float32: SDPA vs written out"] = {"value": 1.5, "spread": [1.4, 1.6]}
    caveat = nb10.answer({"compute": 0.9, "framework": 0.1}, "cpu", {}, None, "", None, ran08, attention)
    assert "SDPA lost to the written-out attention here in the step's 16-bit format; it won in other settings (each named):\n      SDPA " \
        "over the written-out attention, attention alone in float32 on this device (08): 1.50× (1.40–1.60)" in caveat
    three = {"a": Ratio("a", 1.2, 1.1, 1.3, rounds=9, coverage=0.96, drift=0.01),
             "b": Ratio("b", 1.1, 1.05, 1.15, rounds=9, coverage=0.96, drift=0.01)}
    listed = nb10.answer({"compute": 0.9, "framework": 0.1}, "cpu", three, None, "", None, None, attention)
    assert "what paid: a at 1.20×, b at 1.10× and the written-out attention at 1.30× made the step" in listed


def test_profiled_total_sums_the_categories_and_sets_no_time_beside_section_3():
    said = nb10.profiled_total({"compute": 0.0866, "copies": 0.0036, "waiting": 0.0, "framework": 0.0055})
    assert said.startswith("the profiled steps: 95.7 ms each (the sum of each category's median") and "so only the shares are read here, not " \
        "the length" in said


def test_profiled_note_sets_no_two_traces_side_by_side():
    cats = {"reading values": {"compute": 0.09, "waiting": 0.01}, "keeping values": {"compute": 0.05, "waiting": 0.0}}
    same = nb10.profiled_note(cats, CLEAR, "cuda")
    assert "too few, and at two moments, to set their times side by side; the verdict rests on the turns" in same
    assert "1.80" not in same and "too thin" not in same and len(same.splitlines()) == 3  # no ratio of the two
    cats["reading values"]["waiting"] = 0.0001
    thin = nb10.profiled_note(cats, None, "cpu")
    assert "no timed comparison" in thin and "(0.11% of it), 0 ns in the step keeping them (medians over the profiled steps; the mean above can differ): too " \
        "thin to draw" in thin and "on a CPU" in thin
    cats["plain step"] = {"compute": 0.1, "framework": 0.006}  # section 1's profiled step: 106 ms
    slower = _t("no logging", 0.118)  # the same step unprofiled, in section 2's turns (reader FL)
    assert nb10.profiled_note(cats, None, "cpu", plain=slower).endswith(
        "section 1's profiled step, 106 ms, read shorter than the same step without the profiler here (118 ms, quartiles "
        "118 ms–118 ms), though the profiler adds its own cost: there the steps ran back to back on one GPT, here in "
        "turns beside two other GPTs; which of the two costs the time is not measured")
    assert "read shorter" not in nb10.profiled_note(cats, None, "cpu", plain=_t("no logging", 0.100))


def test_first_call_line_says_whether_the_caches_were_cold():
    assert "cold caches" in nb10.first_call_line("default", 41.2, cold=True, device="cpu")
    assert "warm from the first" in nb10.first_call_line("reduce-overhead", 3.0, cold=False, device="cpu")


def test_texts_from_elsewhere_say_why_and_name_the_figures():
    assert nb10.gpus_measured("cpu", False).startswith("\nWhat GPUs measured")
    assert "(mode='reduce-overhead', CUDA graphs, needs a GPU, so it is not timed here):\n" in nb10.gpus_measured("cpu", False)
    assert "figures published elsewhere" in nb10.gpus_measured("cpu", False)
    assert nb10.not_compiled(("compile",)).startswith("This profile does not compile: a cold compile")
    assert nb10.gpus_measured("cuda", False).startswith("\nBeside section 3's timings, what GPUs measured:")
    assert len(nb10.gpus_measured("cuda", True)) > len(nb10.gpus_measured("cuda", False))  # CUDA graphs' figures
    assert nb10.no_break_timing(False) == ("This profile does not compile: the break above comes from Dynamo's "
                                           "tracing alone.")
    assert nb10.no_break_timing(True).startswith("This profile compiles the GPT above but not the monitored ones")


def test_payback_only_for_a_clear_speed_up():
    said = nb10.payback(CLEAR, 10.5, _t("eager", 1.0), _t("compiled", 0.5))
    assert "(10.0 s beyond one step) pays for itself after about 20 steps" in said  # 10 s ÷ 0.5 s saved a step
    sized = nb10.payback(CLEAR, 10.5, _t("eager", 1.0, work=2048, unit="tok/s"), _t("compiled", 0.5))
    assert "pays for itself after about 20 steps of 2,048 tokens (" in sized
    none = nb10.payback(NONE, 10.2, _t("eager", 1.0), _t("c", 1.0))
    assert none.startswith("  no gain these repeats can establish") and "better choice" not in none
    slower = Ratio("compiled vs eager", 0.8, 0.75, 0.85, "faster", "slower", rounds=5)
    assert "eager is the better choice" in nb10.payback(slower, 10.2, _t("eager", 1.0), _t("c", 1.25))


def test_first_break_gives_the_reason_and_where():
    frame = SimpleNamespace(filename="/x/model.py", lineno=12, line="  y = t.item()\n")
    expl = SimpleNamespace(break_reasons=[SimpleNamespace(reason="Tensor.item\nmore", user_stack=[frame])] * 2)
    assert nb10.first_break(expl) == ("torch._dynamo.explain: 2 break reason(s); the first: Tensor.item\n"
                                      "  at model.py:12  y = t.item()")


def test_captured_graphs_and_the_share_compiled():
    assert nb10.captured_line("GPT", [[10, 2], [5, 1]]).endswith("2 graph(s): 10 ops × 2 call(s), 5 ops × 1 call(s) "
                                                               "| 25 op calls in compiled graphs")
    assert nb10.gave_up([[7, 4]], 4) and not nb10.gave_up([[7, 4], [3, 1]], 4)
    gave_up = "with the .item(): only the 4 blocks run compiled (28 op calls"
    assert nb10.compiled_share([[7, 4]], [[40, 1]], 4).startswith(gave_up)
    assert nb10.compiled_share([[7, 4], [3, 1]], [[40, 1]], 4).startswith("op calls per forward in compiled graphs: 31")
    own = nb10.compiled_share([[27, 4]], [[119, 1]], 4, plain=103, block=24)  # the model's own ops apart
    assert "108 op calls, the blocks' own 96 of the plain GPT's 103 and the monitoring's 12" in own
    assert "its other 7 ops (embeddings, final norm, head) run eagerly" in own


def test_compile_log_note_explains_a_count_that_differs_from_explain():
    breaks = ["Graph break in user code\n  at model.py:12\n\n  reason", "second"]
    note = nb10.compile_log_note("compiled, .item()", 12.34, breaks, 1, True, "cpu")
    lines = note.splitlines()
    assert lines[0] == ("compiled, .item(): first step 12.3 s (one run, after section 3's compile filled the caches), "
                        "compilation included | cpu")
    assert lines[1] == "  graph_breaks log: 2 message(s); the first begins:" and lines[3] == "      at model.py:12"
    assert "one break, two log messages: one when Dynamo gave up on the GPT's forward, one when it compiled the block" in note
    other = nb10.compile_log_note("x", 1.0, breaks, 1, False, "cpu")  # Dynamo did not give up on GPT.forward
    assert "gave up" not in other and "the log wrote 2 messages, explain counted 1 break(s)" in other
    assert "against explain" not in nb10.compile_log_note("x", 1.0, breaks, 2, True, "cpu")
    assert nb10.compile_log_note("plain", 1.0, [], 1, True, "cpu").count("\n") == 0


def test_before_compile_says_whether_the_eager_step_moved_across_the_compile():
    plain, eager = _t("no logging", 0.099, 0.002), _t("eager", 0.116, 0.002)
    said = nb10.before_compile(plain, eager)
    assert said.startswith("the eager step read 99.0 ms (98.0–100.0) in section 2, before any compile, and 116.0 ms")
    assert said.endswith("1.17× its earlier time, two moments: not told apart (under 2.5×); what moved it is not measured "
                         "(candidates: each set of turns' pace, the machine's or set by the steps that share its turns, "
                         "four GPTs in section 3's; section 4 lists every reading of this step, with the pace probe's "
                         "where they moved)")  # no promise of a probe line that prints only where they moved 1.1x
    assert nb10.before_compile(plain, plain).endswith("after it: not told apart (two moments, under 2.5×; their quartile ranges overlap)")
    assert "compiled" not in said  # the paired verdict compares compiled with eager; no two-moments ratio of it


def test_compile_pair_and_turns_apart():
    said = nb10.compile_pair(26.0, 10.0)
    assert said.startswith("compilation: first step 26.00 s with the .item(), 10.00 s with the tensor (2.60×), one run each")
    assert said.endswith("in the caches section 3 filled: not a measure of what the break costs to compile")
    apart = nb10.turns_apart(_t("then", 1.0, 0.02), _t("now", 3.0, 0.06))
    assert apart == ("the plain compiled step: 1 s in section 3's turns, 3 s in these (3.00× its time), two moments: a "
                     "difference (2.5× or more)")
    assert nb10.turns_apart(_t("then", 1.0, 0.2), _t("now", 1.02, 0.2)).endswith("two moments: not told apart (under 2.5×)")
    beyond = nb10.turns_apart(_t("then", 1.0, 0.02), _t("now", 1.28, 0.02))  # the cpu run's 0.78x: beyond, under 1.5x
    assert "range holds 1" not in beyond and "two moments: not told apart (under 2.5×)" in beyond


def test_tlparse_note_each_case(tmp_path):
    log = tmp_path / "a.log"
    assert nb10.tlparse_note([], None, None, tmp_path).startswith("No compile logs")
    assert nb10.tlparse_note([log], None, None, tmp_path).startswith("tlparse is not installed (pip install tlparse)")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "index.html").write_text("")
    ok = SimpleNamespace(returncode=0, stderr="")
    assert nb10.tlparse_note([log], "tlparse", ok, tmp_path / "out").endswith("(1 pages, from a.log)")
    bad = SimpleNamespace(returncode=2, stderr="bad log\nmore")
    assert nb10.tlparse_note([log], "tlparse", bad, tmp_path).endswith("(exit 2): bad log")


def test_intensity_line_names_the_bound_where_measured():
    assert nb10.intensity_line("a + b", 0.0833, None, "cpu") == "a + b: 0.08 FLOP/B"
    assert nb10.intensity_line("mm", 1365.3, "compute-bound", "cpu") == "mm: 1,365.30 FLOP/B, compute-bound on cpu"


# a step of three op groups: a matmul above the ridge (1 FLOP/B here), an add below it, a copy
PEAK, BW = 1e12, 1e11  # the ridge at 10 FLOP/B
MM = OpTime("aten::mm", ((64, 64), (64, 64)), "matmul", 2, 1e9, 1e7, 0.004)  # 100 FLOP/B at 2.5e11 FLOP/s: 25 %
ADD = OpTime("aten::add", ((64,), (64,)), "elementwise", 4, 1e6, 1.2e7, 0.0001)  # 0.08 FLOP/B, 1e10 FLOP/s: 120 %
COPY = OpTime("aten::copy_", ((64,),), "copy", 1, 0.0, 1e6, 0.001)
STEP = StepOps([MM, COPY, ADD], _t("step", 0.004), _t("profiled", 0.008))


def of_roof(o):
    return o.rate / min(PEAK, o.intensity * BW)


def ridge_of(o):
    return PEAK / BW


def test_roofs_note_with_one_memory_roof_off_a_gpu():
    peak, bw = _t("peak: mm 4096²", 1e-3, work=1e9, unit="FLOP/s"), _t("copy", 1e-3, work=1e8, unit="B/s")
    note = nb10.roofs_note(peak, bw, bw, "timed here", "main memory", "fp32", None, "cpu").splitlines()
    assert note[0] == "compute peak: timed here; copies: main memory"
    assert note[1] == "ridge (main memory): 10.0 FLOP/B | no smaller copy ran faster: one memory roof | cpu"
    assert note[2].startswith("A CPU has no entry") and len(note) == 3  # a GPU's roofs stand apart
    assert nb10.roofs_elsewhere(None).startswith("A GPU's roofs, measured with this cell:")
    assert nb10.roofs_elsewhere("NVIDIA H100") == ""  # a GPU measured its own


def test_op_table_rows_footer_and_section_3():
    table = nb10.op_table(STEP, ridge_of, of_roof, "cpu", rows=2).splitlines()
    assert len(table) == 6 and table[1].startswith("mm 64×64 · 64×64") and table[1].endswith("25%  above its ridge")
    assert table[2].endswith("-  moves data")
    assert table[3] == "... 3 (op, shapes) groups: 5.1 ms per step in ops" and table[4].startswith("(time: the median of")
    assert table[5].startswith("the whole step, in the same turns: 4 ms ") and " without the profiler, 8 ms " in table[5]
    assert table[5].count("±") + table[5].count("(") >= 2  # each with its spread
    with_eager = nb10.op_table(STEP, ridge_of, of_roof, "cpu", eager={"section 2": _t("a", 0.004), "section 3": None})
    assert with_eager.splitlines()[-1].startswith("the plain eager step in this notebook's sets of turns: section 2 4 ms, "
                                                  "here ")
    from course_lib import bench
    turns = [bench.timing_of(s, name=n, device="cpu", turns_id="t") for n, s in
             (("step", [0.004, 0.0041, 0.0039]), ("profiled", [0.008, 0.0081, 0.0079]))]
    spread = dataclasses.replace(MM, spread=(0.0009, 0.0012))
    timed = nb10.op_table(StepOps([spread, COPY, ADD], *turns), ridge_of, of_roof, "cpu", rows=1).splitlines()
    assert "0.90–1.20" in timed[1] and timed[3].startswith("(time: the median of 3 steps, ms; least–most: its fastest and slowest step")
    assert timed[5].startswith("  verdict: the step without the profiler vs with every op counted and recorded: 2.00× (")
    assert "median of 3 paired turns" in timed[5]


def test_op_notes_read_the_op_times():
    notes = nb10.op_notes(STEP, ridge_of, of_roof, "peak: mm 4096²", "cpu")
    lines = notes.splitlines()
    assert f"with every op counted and recorded: ops {STEP.op_seconds / STEP.profiled.median_s:.0%} of the step" in lines[1]
    beside = nb10.op_notes(STEP, ridge_of, of_roof, "peak: mm 4096²", "cpu",
                           section1={"compute": 0.09, "copies": 0.001, "waiting": 0.0, "framework": 0.009})
    assert "  section 1's trace read 91 ms of ops a step, this table " in beside and "two quantities, not set beside " \
        "each other as a ratio" in beside  # 90 + 1 ms of ops; the framework's 9 ms is not op time
    assert lines[3].startswith("1 group below its ridge ran above its roof (up to 120%, add 64 · 64)")
    fast = StepOps(STEP.ops, _t("step", 0.99 * STEP.op_seconds), STEP.profiled)  # the ops outlast the unprofiled step
    assert "step: the profiled ops add up to 101% of the unprofiled step's fast quartile (part of the profiler's and the counting's " \
        "cost is expected inside the ops' records: not measured apart), " \
        "so this run cannot bound from below the time outside any op" in nb10.op_notes(fast, ridge_of, of_roof, "p", "cpu")
    gelu = OpTime("aten::gelu", ((16, 128, 512),), "element-wise", 4, 1e6, 8e6, 0.002)  # 1 FLOP per 8 bytes
    with_gelu = nb10.op_notes(StepOps([MM, gelu], _t("step", 0.004), _t("profiled", 0.008)), ridge_of, of_roof, "p", "cpu")
    assert "Counted at 80 (gelu) FLOPs per element or more, they would move to the compute side of the ridge" in with_gelu
    assert "which side they are on is uncertain" in with_gelu
    odd = OpTime("aten::gelu", ((16, 128, 512),), "element-wise", 4, 1e6, 4e6, 0.002)  # 0.25 FLOP/B
    ridge = ridge_of(odd)
    needed = nb10.op_notes(StepOps([MM, odd], _t("step", 0.004), _t("profiled", 0.008)), ridge_of, of_roof, "p", "cpu")
    k = int(needed.split("Counted at ")[1].split(" ")[0])
    assert k * 0.25 >= ridge > (k - 1) * 0.25  # the least whole count that crosses the ridge, rounded up
    peak = _t("peak: matmul 1024×1024 bfloat16", 0.005)
    assert nb10.above_roof(1.0e9, 1.0e9, peak) == "" and nb10.above_roof(0.9e9, 1.0e9, peak) == ""
    said = nb10.above_roof(1.04e9, 1.0e9, peak)
    assert "(matmul 1024×1024 bfloat16; a copy), not bounds" in said and "above its roof (1.04×)" in said
    fast = StepOps(STEP.ops, _t("step", 0.01), _t("profiled", 0.02))
    gpu = nb10.op_notes(fast, ridge_of, of_roof, "peak", "cuda")
    assert "51% of the whole step without the profiler, the rest the GPU idle" in gpu and "profiled step" not in gpu


def test_kind_table_and_the_verdicts():
    kinds = {"matmul": {"seconds": 0.004, "flops": 1e9, "bytes": 1e7}, "copy": {"seconds": 0.001, "flops": 0.0,
                                                                                  "bytes": 1e6}}
    table = nb10.kind_table(kinds, 0.005, 10.0).splitlines()
    assert table[1].endswith("above the ridge") and table[2].endswith("moves data only") and " 80.0% " in table[1]
    assert table[3].startswith("(a kind mixes ops of every size") and table[0].endswith("ridge, 10.0 FLOP/B")
    assert table[4].startswith("copy: ops the step calls that only move data") and "section 1's 'copies'" in table[4]
    assert len(nb10.kind_table({"matmul": kinds["matmul"]}, 0.004, 10.0).splitlines()) == 3  # no copy: no note
    both = nb10.kind_table(kinds, 0.005, 10.0, profiled={"matmul": 0.006, "copy": 0.001, "dispatch & views": 0.001})
    row = next(ln for ln in both.splitlines() if ln.startswith("dispatch & views"))  # reader FT: section 1's 9 % 'other'
    assert " 12.5% " in row and "dispatch, no arithmetic" in row  # 1 of section 1's 8 ms; not in this section's kinds
    def near(o):  # the notebook's rule: an op at half its roof or more (a copy: of the memory bandwidth)
        return (of_roof(o) if o.flops else o.bandwidth / BW) >= 0.5

    shares = {(n, m): sum(o.seconds for o in STEP.ops if near(o) == n and (not o.flops or o.intensity < 10.0) == m)
              / STEP.op_seconds for n in (True, False) for m in (True, False)}
    verdict = nb10.roof_verdict(shares, MM, of_roof(MM))
    # the add (memory side, 120 %) is near its roof; the copy moves 1 GB/s against 100 GB/s, the mm is at 25 %
    rows = verdict.splitlines()
    assert rows[2].split() == ["memory", "side", "2%", "20%"] and rows[3].split() == ["compute", "side", "0%", "78%"]
    assert "neither measured roof explains an op's time" in verdict and "fusing ops" in verdict  # 2 % near the roof
    empty = dict(shares) | {(True, True): 0.0}
    assert "fusing ops" not in nb10.roof_verdict(empty, MM, of_roof(MM))  # no time there: no advice for it
    assert "the launch" in verdict and "the launch" not in nb10.roof_verdict(shares, MM, of_roof(MM), "cpu")
    assert verdict.splitlines()[-1].endswith("far below it, held back by something other than the two peaks "
                                            "(candidates, not measured apart: the kernel itself, its size, its overheads)")
    assert "no roofline in this run" in nb10.no_roofline(False).lower() and "the peaks" in nb10.no_roofline(False)


def test_attention_alone_each_case():
    row = {"attention alone: written out, torch.bfloat16": {"value": 5.69, "unit": "ms"},  # 08's times come first
           "attention alone: SDPA, torch.bfloat16": {"value": 12.1, "unit": "ms"},
           "attention alone, torch.bfloat16: SDPA vs written out": {"value": 0.8, "unit": "×", "spread": [0.75, 0.85]}}
    said = nb10.attention_alone(row, torch.bfloat16)
    assert "SDPA vs written out = 0.80× (0.75–0.85) (SDPA 12.1 ms, written out 5.69 ms a call, forward + backward): " \
        "switching to the written-out attention gained 1.25× (1.18–1.33×) on attention alone, so this kernel is one " \
        "candidate here (08's timing, at another moment)" in said  # the inverse with its own range, as 08 prints it
    assert nb10.attention_alone(row, torch.float32).startswith("notebook 08 ran in this run without")
    assert nb10.attention_alone(None, torch.float32).startswith("notebook 08 (section 4) times attention alone")


def test_memory_roof_is_the_fastest_copy_of_as_many_bytes_or_more():
    copies = [_t(f"copy {n}", n / r, work=n, unit="B/s") for n, r in ((2e6, 1.2e11), (1.6e7, 1.45e11), (1.3e8, 3.3e10),
                                                                         (5.4e8, 3.7e10))]
    assert roofline.memory_roof(4e6, copies).name == "copy 16000000.0"  # fits where the 16 MB copy's buffers did
    assert roofline.memory_roof(1e6, copies).name == "copy 16000000.0"  # the 2 MB copy ran slower: too short
    assert roofline.memory_roof(2e8, copies).name == "copy 540000000.0"  # only main memory's copy moves as many
    assert roofline.memory_roof(1e10, copies).name == "copy 540000000.0"  # more than any copy: main memory's
    with pytest.raises(ValueError):
        roofline.memory_roof(1e6, [])
    used = roofline.roofs_used([MM, ADD, COPY], lambda o: copies[1] if o.bytes < 1.1e7 else copies[3], 0.0051)
    assert used.startswith("memory roof of each op, the fastest copy of as many bytes per call or more: 2 groups "
                           "(98% of op time) at copy 16000000.0's 145.0 GB/s, 1 group (2% of op time) at copy 54")


def test_placement_lists_far_above_and_unplaced():
    lines = nb10.placement(STEP.ops, STEP.op_seconds, of_roof).splitlines()
    assert lines[0] == "10× or more below their roofline: none"
    assert lines[1:3] == ["above it:", "  add at 120% of its roof (2.0% of op time)"]
    assert lines[3] == "not placed (no FLOPs to place, or no time): copy ops, 19.6% of op time"
    tiny = OpTime("aten::mul", ((8,),), "elementwise", 1, 1e3, 1e3, 0.00001)  # 1e8 FLOP/s against 1e11: far below
    far = nb10.placement([MM, tiny], 0.004 + 0.00001, of_roof).splitlines()
    assert far[0] == ("10× or more below their roofline (each against the memory roof of a copy its size, assumed to find "
                      "its data in the cache that copy ran from):")  # the roof named where ops are listed
    assert far[1] == "  1 op under 0.5% of op time each, 0.2% together: mul"
    twins = [OpTime(n, (s,), "element-wise", 1, 1e3, 1e3, 0.00001) for n, s in (("aten::add", (8,)), ("aten::mul", (8,)),
                                                                                ("aten::add_", (8,)),
                                                                                ("aten::_foreach_add_", (8,)))]
    listed = nb10.placement([MM, *twins], 0.004 + 0.00004, of_roof).splitlines()
    assert listed[1].startswith("  4 ops under 0.5% of op time each, 1.0% together: add ×2, mul, foreach_add (foreach_add: ")
    assert listed[2] == ("  the element-wise ones are counted at one FLOP per element, a lower bound (the note under the "
                         "op table)")
    gelu = OpTime("aten::gelu", ((8,),), "element-wise", 1, 1e3, 1e3, 0.00001)
    assert nb10.placement([MM, gelu], 0.004 + 0.00001, of_roof, gelu_apart=True).splitlines()[-2].endswith(
        "; gelu's forward, timed against a copy of its bytes, is set by neither roof (the verdict above)")
    assert "neither" not in nb10.placement([MM, *twins], 0.004 + 0.00004, of_roof, gelu_apart=True)  # no gelu listed


def test_regime_follows_the_share_the_gpu_waited(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    assert nb10.regime({"compute": 0.2, "copies": 0.02, "waiting": 0.78}, "cuda").startswith(
        "launch-bound: the GPU waited for the CPU to queue work 78% of the step")
    assert nb10.regime({"compute": 0.6, "copies": 0.1, "waiting": 0.3}, "cuda").startswith("partly launch-bound")
    assert nb10.regime({"compute": 0.9, "copies": 0.05, "waiting": 0.05}, "cuda").startswith("GPU-bound: kernels and "
                                                                                            "copies filled 95%")
    cpu = nb10.regime({"compute": 0.2, "copies": 0.0, "waiting": 0.0, "framework": 0.8}, "cpu")
    assert cpu.startswith("on this CPU the ops (compute + copies) ran 20.0% of the profiled step and the time outside any op (Python")
    assert "the time outside any op sets it" in cpu
    assert "the reference's GPU" not in cpu  # none recorded here
    from course_lib import report
    rep = report.Report("10_compile_and_profile", "gpu", "cpu")
    rep.meta.update(device="NVIDIA Test GPU", device_type="cuda")
    rep.add("plain step: waiting share", 30.0, "%")
    report.record_reference({"10_compile_and_profile": rep.to_dict()})
    assert "the reference" not in nb10.regime({"compute": 0.9, "framework": 0.1}, "cpu")  # it stands apart
    assert nb10.regime_elsewhere("cuda") == ""
    said = nb10.regime_elsewhere("cpu")
    assert "the reference's GPU waited 30% of its profiled step, probably high" in said and "By the glossary's rule the " \
        "profiled step reads partly launch-bound" in said and "the unprofiled step's waiting share is not known here" in said


def test_sync_elsewhere_says_when_the_reference_gpu_showed_no_cost_and_its_regime(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    from course_lib import report
    rep = report.Report("10_compile_and_profile", "gpu", "cpu")
    rep.meta.update(device="NVIDIA Test GPU", device_type="cuda")
    rep.add("keeping values vs reading values", 1.041, "×", spread=(0.842, 1.203))
    rep.add("plain step: waiting share", 78.0, "%")
    report.record_reference({"10_compile_and_profile": rep.to_dict()})
    assert nb10.sync_verdict(None, 53, "cpu", "cpu") == "" and nb10.sync_elsewhere("cuda") == ""  # apart; a GPU's own
    text = nb10.sync_elsewhere("cpu")
    assert text.startswith("On the reference NVIDIA Test GPU (not this machine): keeping the values on the device instead "
                           "of reading them, 1.04× (0.84–1.20, its two timings' quartiles, not paired): too wide to tell, a "
                           "cost of up to 20% fits in it\n  its plain step was launch-bound (profiled, a reading that is "
                           "probably high, section 1's line): if the logging step kept the GPU waiting as much, a read "
                           "found little queued to wait for (reasoning, not measured)")
    assert len(text.splitlines()) == 2  # the timings themselves stand in the summary's reference rows
    rep.add("plain step: waiting share", 5.0, "%")  # a GPU-bound reference: no launch-bound reasoning
    report.record_reference({"10_compile_and_profile": rep.to_dict()})
    gpu_bound = nb10.sync_elsewhere("cpu")
    assert "too wide to tell" in gpu_bound and "reasoning" not in gpu_bound and "bound" not in gpu_bound
    rep.add("plain step: waiting share", 78.0, "%")
    rep.add("keeping values vs reading values", 1.3, "×", spread=(1.2, 1.4))  # a cost the reference did show
    report.record_reference({"10_compile_and_profile": rep.to_dict()})
    assert "No measurable cost" not in nb10.sync_elsewhere("cpu")
    assert "What a read waits for" not in nb10.sync_elsewhere("cpu")  # 01 has no record here
    ran01 = report.Report("01_gpu_vs_cpu", "gpu", "cpu")
    ran01.meta.update(device="NVIDIA Test GPU", device_type="cuda")
    ran01.add("async: 10 queued matmuls, then .item()", 30.0, "ms")
    ran01.add("async: matmul 4096×4096 synchronized", 3.0, "ms")
    report.record_reference({"01_gpu_vs_cpu": ran01.to_dict()})
    assert nb10.sync_elsewhere("cpu").splitlines()[-1] == (
        "What a read waits for, measured by notebook 01 (section 2) on the reference NVIDIA Test GPU: after 10 queued "
        "4096² float32 matmuls, .item() returned after 30.00 ms, 10.0× one synchronised matmul's 3.00 ms: it waited for the "
        "whole queue")


def _ran08(micro: int = 16) -> dict:
    """Notebook 08's rows of a cpu run (the numbers of one on a 2-core EPYC, rounded)."""
    setup = f"micro-batch {micro} × 2, {micro * 2 * 128:,} tokens/step"
    rate = lambda v, lo, hi: {"value": v, "unit": "ktok/s", "spread": [lo, hi], "setup": setup}  # noqa: E731
    return {"compile + first step (cold)": {"value": 24.0, "unit": "s"},
            "eager, written-out attention": rate(31.6, 31.5, 31.7), "eager, SDPA": rate(22.4, 22.2, 22.5),
            "eager, SDPA (beside the compiled)": rate(18.4, 18.2, 18.5), "compiled, SDPA": rate(19.6, 19.5, 19.7),
            "SDPA vs written-out attention, eager": {"value": 0.71, "unit": "×", "spread": [0.68, 0.74]},
            "compiled vs eager, SDPA": {"value": 1.07, "unit": "×", "spread": [1.04, 1.08], "rounds": 5,
                                        "coverage": 0.94, "drift": 0.02},
            f"step, micro-batch of {micro} sequences": {**rate(27.4, 27.3, 27.9), "setup": "written-out attention"},
            f"step, micro-batch of {micro} sequences, no sampler": {**rate(27.3, 27.2, 27.8),
                                                                     "setup": "written-out attention"},
            "long run: tokens/s": {**rate(28.8, 28.6, 29.1), "note": "eager, written-out attention, median after step 12"}}


def test_beside_08_sets_08s_readings_of_this_gpt_in_one_table_read_by_the_two_moments_rule():
    from course_lib import bench
    gpt = GPTConfig(vocab_size=256, block_size=128, n_layer=4, n_head=4, n_embd=128)  # the cpu profile's, 08's and 10's
    t = lambda name, s: bench.timing_of([s * f for f in (0.99, 1.0, 1.0, 1.01, 1.02)], name=name, device="cpu",  # noqa: E731
                                        work=2048, unit="tok/s")
    eager, written, compiled = t("eager", 0.0927), t("written", 0.0664), t("compiled", 0.0889)
    before = bench.Timing("no logging", "cpu", 0.08, 0.001, 5, q1_s=0.0795, q3_s=0.0805)  # section 2's, in ms only
    gain = Ratio("compiled (default) vs eager", 1.05, 1.03, 1.09, rounds=9, coverage=0.96, drift=0.02)
    attention = Ratio("written-out attention vs SDPA, eager", 1.39, 1.35, 1.48, rounds=9, coverage=0.96, drift=0.03)
    kw = dict(cold_s=22.0, compile_gain=gain, attention_gain=attention, eager=eager, written=written, compiled=compiled,
              before=before)
    text = nb10.beside_08(_ran08(), gpt, "cpu", 16, **kw)
    lines = text.splitlines()
    table = [ln for ln in lines if " | " in ln]
    assert table[0].split(" | ")[3].strip() == "here ÷ 08" and len(table) == 12  # the header and eleven rows
    assert len({tuple(i for i, ch in enumerate(ln) if ch == "|") for ln in table}) == 1  # the columns line up
    row = {ln.split(" | ")[0].strip(): [c.strip() for c in ln.split(" | ")[1:]] for ln in lines if " | " in ln}
    # no row told apart: the two-moments column gives way to one line under the table
    assert row["cold compile + first step, s (one run)"] == ["24.0", "22.0", "0.92×"] and "two moments" not in table[0]
    assert "    (no row told apart: each reading under the 2.5× of two moments, each paired ratio's interval overlapping " \
        "08's)" in lines
    assert row["compile's speed-up, SDPA (paired)"] == [
        "1.07× (1.04–1.08)", "1.05× (1.03–1.09)", f"{1.05 / 1.07:.2f}× ({1.03 / 1.08:.2f}–{1.09 / 1.04:.2f})"]
    assert row["written-out over SDPA, eager (paired)"][0] == "1.41× (1.35–1.47)"  # 1 / 08's
    # 08: (24.0 s - its compiled step) / (its eager step after the compile × (1 - 1/1.07)) steps of 4,096 tokens
    step08, eager08 = 4096 / 19.6e3, 4096 / 18.4e3
    t08 = (24.0 - step08) / (eager08 * (1 - 1 / 1.07)) * 4096
    here = (22.0 - compiled.median_s) / (eager.median_s * (1 - 1 / 1.05)) * 2048
    assert row["compile pays back after, tokens (each from its own turns; here section 3's)"][:2] == [
        f"{t08 / 1e6:.2g} M ({(24.0 - step08) / (eager08 * (1 - 1 / 1.08)) * 4096 / 1e6:.2g}–"
        f"{(24.0 - step08) / (eager08 * (1 - 1 / 1.04)) * 4096 / 1e6:.2g} M)",
        f"{here / 1e6:.2g} M ({(22.0 - compiled.median_s) / (eager.median_s * (1 - 1 / 1.09)) * 2048 / 1e6:.2g}–"
        f"{(22.0 - compiled.median_s) / (eager.median_s * (1 - 1 / 1.03)) * 2048 / 1e6:.2g} M)"]
    assert row["compile pays back after, tokens (each from its own turns; here section 3's)"][2].startswith(f"{here / t08:.2f}× (")
    assert row["eager SDPA, ktok/s (each after its compile; 08: its step, 2 micro-batches)"][:2] == ["18.4 (18.2–18.5)", f"{eager.rate / 1e3:.3g} "
                                                                   f"({eager.rate_lo / 1e3:.3g}–{eager.rate_hi / 1e3:.3g})"]
    assert len(row["eager SDPA, ktok/s (each after its compile; 08: its step, 2 micro-batches)"]) == 3  # 1.20× apart: under 2.5×
    assert row["eager SDPA, ktok/s (each before its compile; here section 2's plain step; 08: its step, 2 micro-batches)"][1] == "25.6 (25.4–25.8)"  # 2048 tokens / 80 ms
    assert {"compiled SDPA, ktok/s (08: its step, 2 micro-batches)", "written-out, ktok/s (08: section 4, 2 micro-batches)", "written-out, ktok/s (08: section 5, "
            "no sampler)", "written-out, ktok/s (08: section 5, sampler on)"} <= row.keys()
    assert "08's eager and compiled steps after its compile both read slower than here (1.20×, " in text  # and 1.15×
    assert lines[0].startswith("in short: ") and lines[1] == "  details:"
    assert "one micro-batch a step, or more where a reading says so" in text
    assert "08's step (clipping" not in text  # 08's step not timed here: no line sets it beside this one
    assert "no reading of 08's (or 09's) is told apart from this notebook's" in text
    assert "written-out, ktok/s (08: its long run)" in text  # 08's long run ran the written-out attention
    clear = {**_ran08(), "compiled vs eager, SDPA": {"value": 1.01, "unit": "×", "spread": [0.97, 1.05], "rounds": 5,
                                                     "coverage": 0.94, "drift": 0.02}}
    flat08 = nb10.beside_08(clear, gpt, "cpu", 16, **kw)  # 08's break-even row: no gain; here's: one set's gain only
    assert "| no gain established" in flat08 and ", this gain not replicated in 08 |" in flat08  # reader FJ
    apart = nb10.beside_08(_ran08(), gpt, "cpu", 16, **{**kw, "cold_s": 61.0})  # 2.54x: told apart
    assert "differ on: cold compile + first step, s (one run)" in apart and "| two moments" in apart  # the column is back
    calm = _ran08()
    calm["compiled, SDPA"] = {**calm["compiled, SDPA"], "value": 23.0, "spread": [22.9, 23.2]}  # 08's compiled as here
    assert "08's eager and compiled steps" not in nb10.beside_08(calm, gpt, "cpu", 16, **kw)
    unclear = Ratio("compiled (default) vs eager", 1.01, 0.98, 1.05, rounds=9, coverage=0.96, drift=0.02)
    none = nb10.beside_08(_ran08(), gpt, "cpu", 16, **{**kw, "compile_gain": unclear})
    assert "compile pays back after, tokens (each from its own turns; here section 3's)" in none and "| no gain established" in none
    assert nb10.beside_08(_ran08(), gpt, "cpu", 8, **kw) == nb10.NOT_IN_08  # another micro-batch than 08's
    assert nb10.beside_08(None, gpt, "cpu", 16, **kw) == nb10.NOT_IN_08  # 08 did not run so
    wider = dataclasses.replace(gpt, n_embd=256)
    assert nb10.beside_08(_ran08(), wider, "cpu", 16, **kw) == nb10.NOT_IN_08  # another GPT
    probed08 = {**_ran08(), "pace probe, section 4's turns": {"value": 14.0, "unit": "ms", "spread": [13.8, 14.2]},
                "pace probe, section 4's turns after the compile": {"value": 14.0, "unit": "ms", "spread": [13.8, 14.2]}}
    paced = nb10.beside_08(probed08, gpt, "cpu", 16, **kw, probe=_t(bench.PROBE, 0.014), before_probe=_t(bench.PROBE, 0.014))
    assert "; paced " in paced and paced.splitlines()[0].startswith("in short: the notebooks side by side (paced: each "
                                                                     "rate times its own set's pace-probe time")
    assert "  eager SDPA after its compile, here ÷ 08 " in paced and "the SDPA rows, paced: " in paced  # a row each
    only = nb10.beside_08({"compile + first step (cold)": {"value": 24.0, "unit": "s"}}, gpt, "cpu", 16, cold_s=60.0)
    assert [c.strip() for c in only.splitlines()[-1].split(" | ")[2:]] == ["60.0", "2.50×", "a difference (2.5× or more)"]


def test_beside_08_sets_08s_step_timed_here_beside_08s_and_09s_readings_and_this_notebooks_step():
    from course_lib import bench
    gpt = GPTConfig(vocab_size=256, block_size=128, n_layer=4, n_head=4, n_embd=128)
    turns = object()  # timed in the same turns: their ratio is paired
    t = lambda name, s: bench.timing_of([s * f for f in (0.99, 1.0, 1.0, 1.01, 1.02)], name=name, device="cpu",  # noqa: E731
                                        work=2048, unit="tok/s", turns_id=turns)
    written, as_08 = t("eager, written-out attention", 0.0682), t("08's step, written-out attention", 0.0700)
    ran09 = {"08's whole step, timed in 09": {"value": 24.3, "unit": "ktok/s", "spread": [24.0, 24.4],
                                             "setup": "batch 16, written-out attention"}}
    text = nb10.beside_08(_ran08(), gpt, "cpu", 16, written=written, as_08=as_08, ran09=ran09, account="08's account")
    lines = text.splitlines()
    assert lines[0].startswith("in short: by the rule for two moments (2.5×, what a machine's pace can move), for readings "
                               "and for paired ratios from separate sets of turns alike, no "
                               "reading of 08's (or 09's) is told apart")  # whether the notebooks agree first
    assert lines[1].startswith("          timed in section 3's turns, 08's step (clipping, AdamW's two groups) over this "
                               "notebook's eager written-out step, in speed: 0.97× (")  # then the paired reading
    assert lines[1].endswith(": 1.03× slower")  # 70.0 ms against 68.2 ms, turn by turn
    assert lines[3] == "    08's account"  # the attention account, first under details
    assert not any(" | " in ln and "08's step" in ln and "verdict" not in ln for ln in lines)  # 08's step: one line, not table rows
    assert any(ln.strip().startswith("verdict: 08's step over this notebook's eager written-out step, in speed, in section 3's turns: ") for ln in lines)
    r = as_08.rate / 1e3  # the fastest of 08's readings is its section 4 (31.6), the slowest 09's (24.3)
    r = as_08.rate / 1e3
    table = [ln.strip() for ln in lines if " | here ÷ it: " in ln]
    assert [ln.split(" | ")[:2] for ln in table] == [["08, section 4, 2 micro-batches", " 31.6"],
                                                     ["08, section 5, no sampler     ", " 27.3"],
                                                     ["08, section 5, sampler on     ", " 27.4"],
                                                     ["09, in its turns              ", " 24.3"]]
    assert f"here ÷ it: {r / 31.6:.3f}×" in table[0]  # one row a reading, its ratio to the reading here (0.926× (0.914–0.929):
    # a third decimal, since at two the median would print as the range's end)
    said = next(ln.strip() for ln in lines if "not told apart; 08's own readings" in ln)
    assert said == ("each under the 2.5× that two moments can differ by: not told apart; 08's own readings span "
                    "27.3–31.6 (1.16×) within one process, in two groups 1.15× apart: 1 reading at 31.6, 2 readings at "
                    "27.3–27.4: readings at different moments; what sets them apart is not measured")
    assert any(ln.strip().startswith("08's long run, ktok/s (its training loop, train.fit: fresh batches, a progress "
                                     "bar; not the step timed above): 28.8, here ÷ it: ") for ln in lines)
    assert "09 timed" not in text  # 09's forward and backward not recorded here
    sec4 = {**_ran08(), "section 4's step, 2 micro-batches of 16, no sampler": {
        "value": 26.8, "unit": "ktok/s", "spread": [26.3, 26.9], "setup": "written-out attention"}}
    assert "08, section 5, 2 micro-batches, no sampler |  26.8 | here ÷ it" in nb10.beside_08(sec4, gpt, "cpu", 16, written=written,
                                                                                 as_08=as_08)
    again = {**_ran08(), "written-out step, torch.bfloat16 autocast": {  # 08 re-timed section 4's step beside fp32
        "value": 36.0, "unit": "ktok/s", "spread": [35.5, 36.1],
        "setup": "micro-batch 16 × 2, 4,096 tokens/step, written-out attention"}}
    again["eager, written-out attention, in turns with the peak's matmul"] = {  # 08's section 5, beside a matmul
        "value": 29.6, "unit": "ktok/s", "spread": [29.0, 30.0],
        "setup": "micro-batch 16 × 2, 4,096 tokens/step, written-out attention"}
    listed = nb10.beside_08(again, gpt, "cpu", 16, written=written, as_08=as_08)
    assert "08, section 5, beside the peak's matmul, 2 micro-batches |  29.6 | here ÷ it" in listed
    assert "08, section 4, again, 2 micro-batches " in listed and "|    36 | here ÷ it" in listed and "08's readings of its step of several " \
        "micro-batches span 29.6–36 (1.22×) within one process" in listed  # like with like: not 27.3 (one micro-batch)
    part = {**ran09, "forward + backward, no checkpointing": {"value": 116.7, "unit": "ms", "spread": [114.9, 144.1]}}
    assert "09 timed" not in nb10.beside_08(_ran08(), gpt, "cpu", 16, written=written, as_08=as_08, ran09=part)  # a part
    alike = {k: {**v, "value": as_08.rate / 1e3, "spread": [as_08.rate_lo / 1e3, as_08.rate_hi / 1e3]}
             for k, v in _ran08().items() if "ktok" in v.get("unit", "")}
    same = nb10.beside_08({**_ran08(), **alike}, gpt, "cpu", 16, written=written, as_08=as_08)
    assert "not told apart" in same and "08's own readings span" not in same  # one speed: no spread to name
    fast = {k: {**v, "value": 40.0, "spread": [39.5, 40.5]} for k, v in _ran08().items() if "ktok" in v.get("unit", "")}
    assert "; every earlier reading is faster than the one here" in nb10.beside_08({**_ran08(), **fast}, gpt, "cpu", 16,
                                                                              written=written, as_08=as_08)
    assert "every earlier reading is" not in same


def test_account_in_08_sums_attention_alone_over_the_layers_beside_this_gap():
    gpt = GPTConfig(block_size=128, n_layer=4, n_head=4, n_embd=128)  # the cpu profile's, 08's and 10's
    ran08 = {"attention alone: SDPA, torch.bfloat16": {"value": 11.4, "unit": "ms"},
             "attention alone: written out, torch.bfloat16": {"value": 4.7, "unit": "ms"}}
    sdpa, written = _t("eager", 0.0969), _t("eager, written-out attention", 0.0694)
    said = nb10.account_in_08(ran08, sdpa, written, torch.bfloat16, 16, gpt, "cpu")
    assert "SDPA's extra +6.70 ms per layer × 4 layers = +26.8 ms per step" in said
    assert "differ by +27.5 ms (SDPA minus written out): the account is 0.97× that gap" in said
    assert "exceeds the step's" not in said  # the account is within the gap
    ran08["attention alone: SDPA, torch.bfloat16"]["value"] = 13.6  # 08's cpu run: 1.28× the gap
    assert said != (more := nb10.account_in_08(ran08, sdpa, written, torch.bfloat16, 16, gpt, "cpu"))
    assert "the account is 1.29× that gap" in more and "The +35.6 ms summed from attention timed alone exceeds the step's +27.5 ms gap" in more
    assert more.endswith("; what sets them apart is not measured")  # no in-step reading to set beside it
    inside = nb10.account_in_08(ran08, sdpa, written, torch.bfloat16, 16, gpt, "cpu", in_step=0.0106)  # reader FJ
    assert inside.endswith("; 08's SDPA alone took 13.6 ms a layer, 1.28× the 10.6 ms section 1's profile gives it inside "
                           "this step: were the written-out attention alone as much slower, the sum would read +27.7 ms "
                           "(an assumption, not measured)")  # 35.6 ms / (13.6 / 10.6), 10.6 rounded from 0.0106 s
    short_of = {**ran08, "attention alone: SDPA, torch.bfloat16": {"value": 9.7, "unit": "ms"}}  # +20.0 ms: 0.73x
    under = nb10.account_in_08(short_of, sdpa, written, torch.bfloat16, 16, gpt, "cpu", in_step=0.0146)  # reader GB
    assert "The +20.0 ms summed from attention timed alone falls short of the step's +27.5 ms gap" in under
    assert under.endswith("the sum would read +30.1 ms (an assumption, not measured)")  # scaled up too: 20.0 × 14.6 / 9.7
    two = nb10.account_in_08(ran08, sdpa, written, torch.bfloat16, 16, gpt, "cpu", in_step=0.0112,  # readers FV, FW
                             where="section 4's op timings", also={"section 1's profile": 0.0191})
    assert two.endswith("; 08's SDPA alone took 13.6 ms a layer; inside this step SDPA took 11.2 ms (section 4's op "
                        "timings), 19.1 ms (section 1's profile), 1.71× apart at two moments: which one the step's gap "
                        "goes with is not measured, so the sum is not scaled to the step")
    near = nb10.account_in_08(ran08, sdpa, written, torch.bfloat16, 16, gpt, "cpu", in_step=0.0106,
                              where="section 4's op timings", also={"section 1's profile": 0.0110})  # within 1.1x
    assert "the 10.6 ms section 4's op timings gives it inside this step" in near and "+27.7 ms" in near
    paired = Ratio("written-out attention vs SDPA, eager", 1.25, 1.2, 1.3, rounds=9, coverage=0.96, drift=0.01)
    by_pairs = nb10.account_in_08(ran08, sdpa, written, torch.bfloat16, 16, gpt, "cpu", paired=paired)
    assert "here the paired ratio, 1.25×, puts the two eager steps +17.4 ms apart (SDPA minus written out, at the " \
        "written-out step's median): the account is 2.05× that gap" in by_pairs  # 69.4 ms × 0.25, not the medians' 27.5
    ran08["attention alone: SDPA, torch.bfloat16"].update(value=11.4, spread=[10.4, 13.9])  # 08's quartiles
    ran08["attention alone: written out, torch.bfloat16"].update(spread=[4.5, 4.9])
    wide = nb10.account_in_08(ran08, sdpa, written, torch.bfloat16, 16, gpt, "cpu", paired=paired)
    assert wide.endswith("attention timed alone adding more, but by 1.06×, under the 2.5× two moments can make: "
                         "inconclusive")  # +22.0 ms at its least against +20.8 at the gap's most: apart, at two moments
    far = nb10.account_in_08({**ran08, "attention alone: SDPA, torch.bfloat16": {"value": 30.0, "unit": "ms",
                                                                                 "spread": [29.0, 31.0]}},
                             sdpa, written, torch.bfloat16, 16, gpt, "cpu", paired=paired)
    assert "Their ranges lie 4." in far and "× apart (" in far and "attention timed alone adds more than the gap" in far
    ran08["attention alone: SDPA, torch.bfloat16"].update(spread=[9.0, 13.9])  # quartiles reaching down into the gap
    fits = nb10.account_in_08(ran08, sdpa, written, torch.bfloat16, 16, gpt, "cpu", paired=paired)
    assert "exceeds" not in fits and "Their ranges overlap only toward their ends (the sum by the attention timings' " \
        "quartiles +16.4 to +37.6 ms, the gap by the paired interval +13.9 to +20.8 ms), the medians 1.54× apart: whether " \
        "attention alone accounts for the gap is left open" in fits  # reader FO: 1.7x called 'fits' on a 0.9 ms overlap
    near = Ratio("written-out attention vs SDPA, eager", 1.386, 1.3, 1.45, rounds=9, coverage=0.96, drift=0.01)
    assert "the account is 1.00× that gap" in (close := nb10.account_in_08(ran08, sdpa, written, torch.bfloat16, 16, gpt,
                                                                          "cpu", paired=near))
    assert "Their ranges overlap (the sum by the attention timings' quartiles +16.4 to +37.6 ms, the gap by the paired " \
        "interval +20.8 to +31.2 ms): the account fits the gap" in close
    own = {**ran08, "SDPA vs written-out attention, eager": {"value": 0.8, "unit": "×"},  # 08's section 4, 2 micro-batches
           "eager, written-out attention": {"value": 25.0, "unit": "ktok/s", "setup": "micro-batch 16 × 2, 4,096 tokens/step"}}
    both = nb10.account_in_08(own, sdpa, written, torch.bfloat16, 16, gpt, "cpu", paired=paired)  # reader FL: 1.58 vs 0.93
    assert both.endswith(". Notebook 08's own account, the same sum over its section 4 steps (2 micro-batches a step, its "
                         "paired ratio 0.80× putting them +41.0 ms apart): 1.31× its gap, beside 1.54× here; the two "
                         "steps' gaps were timed at different moments, so the two accounts can differ that much")
    assert nb10.account_in_08(ran08, sdpa, written, torch.float32, 16, gpt, "cpu") == ""  # another format
    assert nb10.account_in_08(ran08, sdpa, written, torch.bfloat16, 8, gpt, "cpu") == ""  # another micro-batch


def test_the_reference_gpt_is_named_where_its_rows_first_appear(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    from course_lib import profiles, report
    assert nb10.reference_gpt() == ""  # no reference run
    rep = report.Report("10_compile_and_profile", "gpu", "cpu")
    rep.meta.update(device="NVIDIA H100 80GB HBM3", device_type="cuda")
    rep.add("plain step: waiting share", 78.0, "%")
    report.record_reference({"10_compile_and_profile": rep.to_dict()})
    g = profiles.sizes("10_compile_and_profile", "gpu", memory_gib=80)
    said = nb10.reference_gpt()
    assert f"{g.n_layer} layers, width {g.n_embd}, T = {g.block}, batch {g.batch} ({g.batch * g.block:,} tokens" in said
    assert said.startswith("the reference (NVIDIA H100 80GB HBM3) profiled") and "not this run's" in said
    assert nb10.regime_elsewhere("cpu").startswith(nb10.reference_gpt(short=True))  # before its rows
    assert said.startswith(nb10.reference_gpt(short=True)) and "(the reference ran a different GPT" not in \
        nb10.reference_gpt(short=True)  # section 1: without the note on the other notebooks' GPTs


def test_regime_off_a_gpu_names_the_profilers_cost_and_the_graphs_evidence(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    from course_lib import report
    rep = report.Report("10_compile_and_profile", "gpu", "cpu")
    rep.meta.update(device="NVIDIA Test GPU", device_type="cuda")
    rep.add("plain step: waiting share", 78.0, "%")
    report.record_reference({"10_compile_and_profile": rep.to_dict()})
    cats = {"compute": 0.9, "copies": 0.02, "waiting": 0.0, "framework": 0.08}
    text = nb10.regime_elsewhere("cpu")
    assert "waited 78% of its profiled step, probably high" in text and "profiler's CPU time per op" in text
    assert "CUDA graphs" not in text and "recorded no share without the profiler" in text  # no unprofiled share for this GPU
    rep.add("GPU busy share of the step, no profiler", 40.0, "%")
    report.record_reference({"10_compile_and_profile": rep.to_dict()})
    said = nb10.regime_elsewhere("cpu")
    assert "the reference's GPU, without the profiler, waited about 60% of a step (section 4's kernel times over its " \
        "step timed without the profiler): launch-bound by the glossary's rule\nprofiled (its section 1): 78% waiting, " \
        "probably high" in said
    rep.meta.update(device="NVIDIA H200")
    rep.rows.pop("GPU busy share of the step, no profiler")
    report.record_reference({"10_compile_and_profile": rep.to_dict()})
    said = nb10.regime_elsewhere("cpu")  # an H200 record without the unprofiled row: no regime of the plain step
    assert "the reference's GPU waited 78% of its profiled step, probably high" in said and "56%" not in said
    assert "; the reference recorded no share without the profiler, so the unprofiled step's waiting share is not known " \
        "here" in said
    rep.add("eager", 428.2, "ktok/s", spread=(358.3, 453.7))
    rep.add("compiled, default", 534.4, "ktok/s", spread=(517.0, 545.5))
    rep.add("compiled, reduce-overhead", 975.1, "ktok/s", spread=(950.4, 1000.1))
    report.record_reference({"10_compile_and_profile": rep.to_dict()})
    text = nb10.gpus_measured("cpu", reduce_overhead=False)  # off a GPU: both modes' records, once
    assert "Mask R-CNN" not in text  # CUDA graphs' published figures stand in only where the reference has none
    assert "reduce-overhead" not in nb10.regime(cats, "cpu")
    assert "\n  the reference NVIDIA H200, its own GPT (6 layers, width 768, T = 1024, batch 8): eager " in text
    assert "compiled (default) 534 ktok/s; compiled (reduce-overhead) 975 ktok/s (each ratio over eager" in text
    assert "1.82×" not in text  # what CUDA graphs removed: in the answer's details
    graphs = nb10.answer({"compute": 0.9, "copies": 0.0, "waiting": 0.0, "framework": 0.1}, "cpu", {}, None, "", None)
    assert "compiled with reduce-overhead, its step ran 1.82× as fast as compiled with the default mode (the ratio of " \
        "the medians of the same turns; 1.74–1.93× from the quartiles): the reduce-overhead step took 55% (52–57% across " \
        "the quartiles' range) of the default-compiled step's time. Which part went away is not measured" in graphs


def test_op_table_remarks_a_profiled_step_that_ran_faster():
    from course_lib import bench
    step = bench.timing_of([0.33, 0.34, 0.32, 0.33, 0.35], name="step", device="cpu", turns_id="t")
    faster = bench.timing_of([0.23, 0.24, 0.235, 0.23, 0.24], name="profiled", device="cpu", turns_id="t")
    said = nb10.op_table(StepOps([MM, COPY, ADD], step, faster), ridge_of, of_roof, "cpu")
    assert "the profiled step ran faster, which the profiler's cost cannot do" in said
    assert "ran faster" not in nb10.op_table(STEP, ridge_of, of_roof, "cpu")  # slower with the profiler: no remark


def test_answer_adds_the_reference_gpus_bottom_line_off_a_gpu(tmp_path, monkeypatch):
    from course_lib import report
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    step = {"compute": 0.9, "copies": 0.0, "waiting": 0.0, "framework": 0.1}
    assert len(nb10.answer(step, "cpu", {}, None, "", None).splitlines()) == 4  # no reference recorded
    rep = report.Report("10_compile_and_profile", "gpu", "cpu")
    rep.meta.update(device="NVIDIA H100 80GB HBM3", device_type="cuda")
    rep.add("plain step: waiting share", 70.0, "%")
    rep.add("compiled (default) vs eager", 1.3, "×")
    report.record_reference({"10_compile_and_profile": rep.to_dict()})
    last = nb10.answer(step, "cpu", {}, None, "", None).splitlines()[3]  # the first line under details
    assert last.startswith("    on the reference NVIDIA H100 80GB HBM3, with its own GPT (") and "another model" in last
    assert last.endswith("its GPU waited 70% of its profiled step (probably high)")  # its ratios: in section 3
    rep.meta.update(device="NVIDIA H200")
    for old in tmp_path.glob("*.json"):  # the H100's record: this reference is the only one
        old.unlink()
    report.record_reference({"10_compile_and_profile": rep.to_dict()})
    said = nb10.answer(step, "cpu", {}, None, "", None)  # the unrecorded reading stays in section 1's lines
    assert "its GPU waited 70% of its profiled step (probably high)" in said and "56%" not in said
    rep.add("GPU busy share of the step, no profiler", 40.0, "%")
    report.record_reference({"10_compile_and_profile": rep.to_dict()})
    said = nb10.answer(step, "cpu", {}, None, "", None)
    assert "its GPU waited about 60% of a step without the profiler" in said and "earlier session" not in said
    assert len(nb10.answer(step, "cuda", {}, None, "", None).splitlines()) == 4  # on a GPU: this run's own


def test_small_copy_note_says_when_a_gpus_small_copy_ran_below_main_memory():
    from course_lib.lessons.nb10_roofline import small_copy_note
    rows = {"copy 16.0 MiB": {"value": 2.336, "unit": "TB/s"}, "copy 256.0 MiB": {"value": 4.142, "unit": "TB/s"},
            "copy 2.0 GiB": {"value": 4.236, "unit": "TB/s"}, "peak: matmul 8192×8192 bfloat16": {"value": 700, "unit": "TFLOP/s"}}
    said = small_copy_note(rows)
    assert said.startswith("  on that GPU the smallest copy ran slower than the largest (copy 16.0 MiB: 2.34 TB/s, copy "
                           "2.0 GiB: 4.24 TB/s): it lasts about 14 µs")  # 2 × 16 MiB at 2.336 TB/s
    assert said.endswith("so every op's memory roof is main memory's")  # the 2 GiB copy is the fastest of all
    rows["copy 256.0 MiB"]["value"] = 4.5  # a mid-size copy the fastest: no one roof for every op
    assert "every op's memory roof" not in small_copy_note(rows)
    rows["copy 16.0 MiB"]["value"] = 9.0  # a cache-sized copy faster than main memory's, as on a CPU
    assert small_copy_note(rows) == "" and small_copy_note({}) == ""


def test_reference_ridge_places_the_exercise_shapes_on_the_reference_gpus_roofs(tmp_path, monkeypatch):
    from course_lib import report
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    assert nb10.reference_ridge({"a + b": 0.08}) == ""  # no reference recorded
    rep = report.Report("10_compile_and_profile", "gpu", "cpu")
    rep.meta.update(device="NVIDIA Test GPU", device_type="cuda")
    rep.add("peak: matmul 8192×8192 bfloat16", 700.0, "TFLOP/s")
    rep.add("copy 16.0 MiB", 2.0, "TB/s")
    rep.add("copy 2.0 GiB", 4.0, "TB/s")
    report.record_reference({"10_compile_and_profile": rep.to_dict()})
    said = nb10.reference_ridge({"a + b": 0.08, "matmul": 366.8, "thin": 150.0})
    assert said == ("on the reference NVIDIA Test GPU, by its recorded roofs (matmul 8192×8192 bfloat16: 700.0 TFLOP/s; a "
                    "copy of 2 GiB: 4.00 TB/s): ridge 175 FLOP/B; by the roofline model, not measured there, one op a line:\n  a + b: "
                    "memory-bound\n  matmul: compute-bound\n  thin: memory-bound")


def test_what_paid_says_when_a_gain_only_just_clears_its_drift():
    close = Ratio("c", 1.054, 1.035, 1.12, rounds=9, coverage=0.96, drift=0.052)
    wide = Ratio("w", 1.39, 1.34, 1.62, rounds=9, coverage=0.96, drift=0.03)
    assert nb10._listed({"compiling": close, "the written-out attention": wide}) == (
        "compiling at 1.05× (clear of its turns' drift, 5.2%, by only 0.2 points) and the written-out attention at 1.39×")
    edge = Ratio("e", 1.0254, 1.021, 1.039, rounds=9, coverage=0.96, drift=0.025)
    assert nb10._listed({"a tensor": edge}) == "a tensor at 1.03× (clear of its turns' drift, 2.5%, by only 0.04 points)"


def test_compile_log_note_opens_every_message_of_the_graph_breaks_log():
    breaks = ["Graph break in user code at x.py:10\nGraph Break Reason: .item()\nmore", "Graph break in user code at y.py:3"]
    said = nb10.compile_log_note("monitored", 5.8, breaks, 1, True, "cpu").splitlines()
    assert said[2:4] == ["    Graph break in user code at x.py:10", "    Graph Break Reason: .item()"]
    assert said[5] == "  message 2 begins: Graph break in user code at y.py:3"


def test_answer_quotes_the_compile_gain_of_section_3b_beside_section_3s():
    gain = Ratio("c", 1.09, 1.06, 1.12, rounds=9, coverage=0.96, drift=0.01)
    flat = Ratio("c3b", 1.00, 0.97, 1.03, rounds=9, coverage=0.96, drift=0.01)
    text = nb10.answer({"compute": 0.9, "framework": 0.1}, "cpu", {nb10.COMPILING: gain}, None, "", None, again=flat)
    assert "    compiling (default mode), in each set of turns (not replicated: details):\n      section 3: 1.09× " \
        "(1.06–1.12) faster\n      section 3b: 1.00× (0.97–1.03) no measurable difference" in text  # a set a line
    assert "so what paid: no change timed here" in text and "    not replicated: compiling (default mode), 1.09× " \
        "(1.06–1.12) faster in section 3's turns, 1.00× (0.97–1.03) no measurable difference in section 3b's: the " \
        "interval 0.97–1.03× holds 1, so it cannot confirm the gain read in 1.06–1.12×; no one gain fits every set: a gain " \
        "resolved in one set of turns, not replicated in the others" in text
    near = Ratio("c3b", 1.02, 0.99, 1.07, rounds=9, coverage=0.96, drift=0.01)
    ran08 = {"compiled vs eager, SDPA": {"value": 1.08, "unit": "×", "spread": [1.06, 1.13], "rounds": 9,
                                         "coverage": 0.96, "drift": 0.01}}
    three = nb10.answer({"compute": 0.9, "framework": 0.1}, "cpu", {nb10.COMPILING: gain}, None, "", None, ran08,
                        again=near)
    # resolved in two sets of turns (section 3's, 08's), and a gain of 1.06-1.07x fits 3b's: replicated, counted
    assert "not replicated" not in three and "so what paid: compiling (default mode) at 1.09×" in three
    assert "\n    compiling in 2 of 3 sets of turns (section 3's and notebook 08's; section 3b's read no measurable " \
        "difference)" in three  # the set that did not resolve it, named beside the count
    paid = nb10.answer({"compute": 0.9, "framework": 0.1}, "cpu", {nb10.COMPILING: gain}, None, "", None, ran08,
                       again=near, pays_back={"section 3's": 5321.7, "section 3b's": None})
    assert "difference)\n    its cold compile pays back after about 5,300 steps (section 3's turns)" in paid
    both = nb10.answer({"compute": 0.9, "framework": 0.1}, "cpu", {nb10.COMPILING: gain}, None, "", None, ran08,
                       again=Ratio("c3b", 1.07, 1.06, 1.08, rounds=9, coverage=0.96, drift=0.01),
                       pays_back={"section 3's": 3470.0, "section 3b's": 7830.0})  # two sets, two break-evens
    assert "its cold compile pays back after about 3,500–7,800 steps (section 3's and section 3b's turns)" in both
    from course_lib import bench as bench_
    eager = bench_.Timing("eager", "cpu", 0.100, 0.001, 9)
    steps = nb10.steps_to_pay(gain, 21.0, eager, bench_.Timing("compiled", "cpu", 0.092, 0.001, 9))
    assert steps == pytest.approx((21.0 - 0.092) / (0.100 * (1 - 1 / 1.09)))  # the cold compile less one step, over each step's saving
    assert nb10.steps_to_pay(near, 21.0, eager, eager) is None and nb10.steps_to_pay(gain, None, eager, eager) is None
    assert "a gain of 1.06–1.07× fits every set" in three
    one = nb10.answer({"compute": 0.9, "framework": 0.1}, "cpu", {nb10.COMPILING: gain}, None, "", None,
                      {"compiled vs eager, SDPA": {**ran08["compiled vs eager, SDPA"], "spread": [1.0, 1.64]}}, again=near)
    # resolved in section 3's turns alone, 3b's read no difference, 08's too wide: a gain fits them all, but not replicated
    assert "(not replicated: details)" in one and "so what paid: no change timed here" in one
    wide = Ratio("c3b", 1.03, 1.00, 1.17, rounds=9, coverage=0.96, drift=0.01)  # too wide: it checks nothing
    assert "not replicated" not in nb10.answer({"compute": 0.9, "framework": 0.1}, "cpu", {nb10.COMPILING: gain}, None,
                                             "", None, ran08, again=wide)
    reversed_ = nb10.answer({"compute": 0.9, "framework": 0.1}, "cpu", {nb10.COMPILING: flat}, None, "", None,
                            again=gain)  # section 3 read no gain, 3b one: section 3 stated no payback to rest on it
    assert "not replicated" in reversed_ and "pays for itself after" not in reversed_
    late = nb10.answer({"compute": 0.9, "framework": 0.1}, "cpu", {nb10.COMPILING: wide}, None, "", None, ran08,
                       again=gain)  # section 3's turns too wide, 3b's and 08's a gain: no set contradicts it
    assert "so what paid: compiling (default mode, section 3b's turns) at 1.09× made the step measurably faster" in late
    both_late = nb10.answer({"compute": 0.9, "framework": 0.1}, "cpu", {nb10.COMPILING: wide}, None, "", None, ran08,
                            Ratio("a", 1.3, 1.25, 1.36, rounds=9, coverage=0.96, drift=0.01), again=gain)
    assert "compiling (default mode, section 3b's turns) at 1.09× made the step measurably faster, in turns " \
        "(each against the eager SDPA step" in both_late

    both = Ratio("c3b", 1.07, 1.04, 1.10, rounds=9, coverage=0.96, drift=0.01)
    assert "not replicated" not in nb10.answer({"compute": 0.9, "framework": 0.1}, "cpu", {nb10.COMPILING: gain}, None, "",
                                             None, again=both)


def test_eager_readings_lists_the_plain_steps_sets_of_turns():
    said = nb10.eager_readings({"section 2": _t("a", 0.0973, 0.002), "section 3": _t("b", 0.117, 0.006),
                                "here": _t("c", 0.0981, 0.002)})
    assert said.startswith("the plain eager step in this notebook's sets of turns: section 2 97.3 ms, section 3 117 ms, "
                           "here 98.1 ms: 1.20× from the fastest to the slowest, two moments each: not told apart (under "
                           "2.5×)")
    assert said.endswith("; which reading is typical is not measured, and each section's ratios are paired within its "
                         "own turns")  # 1.20×: not told apart by the rule, and no reading named as the odd one
    assert nb10.eager_readings({"section 2": _t("a", 0.1, 0.002), "section 3": None}) == ""
    near = nb10.eager_readings({"section 2": _t("a", 0.0973), "section 3": _t("b", 0.103), "here": _t("c", 0.0981)})
    assert "typical" not in near  # 1.06× from the fastest to the slowest: under SWING


def test_in_short_puts_one_line_first_and_every_other_line_under_details():
    said = nb10.in_short("compiling: 1.05×", ["verdict one", "", "  a note\nsecond line", None])
    assert said.splitlines() == ["in short: compiling: 1.05×", "  details:", "    verdict one", "      a note",
                                 "    second line"]
    assert nb10.in_short("nothing more", []) == "in short: nothing more"
    assert nb10.in_short(["one finding", "", "another"], ["a detail"]).splitlines() == [
        "in short: one finding", "          another", "  details:", "    a detail"]  # one finding a line, aligned
    assert nb10.in_short(["a finding\nits second line", "another"], []).splitlines() == [
        "in short: a finding", "          its second line", "          another"]  # a finding's lines aligned too
    kept = {}
    short = nb10.in_short("compiling: 1.05×", ["verdict one", "  a note"], keep=kept, under="section 3")
    assert short.splitlines() == ["in short: compiling: 1.05×",  # the details wait for the appendix, which says so
                                  "  (every verdict in full, with its notes: the appendix, section 3)"]
    nb10.in_short("nothing more", [], keep=kept, under="section 4")  # nothing kept where there is nothing
    assert kept == {"section 3": ["verdict one", "  a note"]}
    kept["section 4, the op table"] = ["a roof", "  its note"]
    assert nb10.kept(kept).splitlines() == ["section 3:", "  verdict one", "    a note",
                                           "section 4, the op table:", "  a roof", "    its note"]
    assert nb10.kept({}) == ""


def test_aside_keeps_another_machines_block_for_its_own_section_and_says_where():
    apart = {}
    said = nb10.aside("\nOn the reference GPU: 1.04×\n  its GPT: 6 layers\n", apart, "section 2")
    assert said == f"(what GPUs measured here: under '{nb10.ELSEWHERE}', after the answer)"
    assert nb10.aside("", apart, "section 3") == "" and "section 3" not in apart  # nothing to set apart: no line
    assert nb10.aside("published: 2.27×", apart, "section 2") == f"(GPUs: under '{nb10.ELSEWHERE}')"  # said once in full
    assert nb10.kept(apart).splitlines() == ["section 2:", "  On the reference GPU: 1.04×", "    its GPT: 6 layers",
                                            "  published: 2.27×"]


def test_attention_per_layer_sets_the_two_readings_of_the_step_beside_08s_kernel_alone():
    ran08 = {f"attention alone: SDPA, {torch.bfloat16}": {"value": 11.4, "unit": "ms"}}
    said = nb10.attention_per_layer(0.0448, 0.0676, 4, ran08, torch.bfloat16)  # 11.2 and 16.9 ms a layer
    assert said == ("attention (SDPA), forward + backward, per layer a step: 11.2 ms in section 1's profile, 16.9 ms "
                    "in section 4's op timings (1.51× it); notebook 08 timed the same call alone at 11.4 ms "
                    "(torch.bfloat16, forward + backward, another moment)")
    assert nb10.attention_per_layer(0.0448, 0.0676, 4, None, torch.bfloat16).endswith("(1.51× it)")  # 08 did not run


def test_kind_table_sets_section_1s_shares_beside_section_4s():
    kinds = {"attention": {"seconds": 0.055, "flops": 1e9, "bytes": 1e7},
             "matmul": {"seconds": 0.045, "flops": 1e10, "bytes": 1e8}}
    table = nb10.kind_table(kinds, 0.1, 12.6, "cpu", profiled={"attention": 0.45, "matmul": 0.40, "copy": 0.15})
    rows = table.splitlines()
    assert "section 1" in rows[0] and rows[1].split()[:3] == ["attention", "55.0%", "45.0%"]
    assert rows[2].split()[:3] == ["matmul", "45.0%", "40.0%"]
    assert rows[3].split()[:3] == ["copy", "-", "15.0%"]  # a kind only the profile shows keeps its row
    assert rows[4].startswith("share of op time: this section's op timings") and "section 1: the profile" in rows[4]
    assert "section 1" not in nb10.kind_table(kinds, 0.1, 12.6, "cpu")  # no profile: one column


def test_short_lines_say_what_each_section_found_and_where_two_sets_of_turns_disagree(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))  # no reference record
    faster = Ratio("compiled (default) vs eager", 1.05, 1.04, 1.06, rounds=9, coverage=0.96, drift=0.01)
    same = Ratio("compiled vs eager, section 3b's turns", 1.01, 0.98, 1.02, rounds=9, coverage=0.96, drift=0.02)
    attention = Ratio("written-out attention vs SDPA, eager", 1.37, 1.36, 1.40, rounds=9, coverage=0.96, drift=0.01)
    assert nb10.compile_short(faster, attention) == [
        f"compiling (default mode) against eager, timed in turns: {faster.brief} (unconfirmed: one set of turns, its "
        "interval reaching below 1.1×; section 3b times the gain again)",  # as 08 says it (reader GJ)
        f"the written-out attention instead of SDPA, eager: {attention.brief} (SDPA's kernel in this format on this "
        "device: not a verdict on SDPA elsewhere)"]
    slower = Ratio("written-out attention vs SDPA, eager", 0.8, 0.78, 0.82, rounds=9, coverage=0.96, drift=0.01)
    assert "elsewhere" not in nb10.compile_short(faster, slower)[1]  # SDPA won: nothing to qualify
    firm = Ratio("compiled (default) vs eager", 1.3, 1.2, 1.4, rounds=9, coverage=0.96, drift=0.01)
    assert nb10.compile_short(firm, None)[0].endswith(f"{firm.brief} (section 3b times the gain again)")  # past 1.1x
    assert nb10.compile_short(faster, slower, moved=1.17)[-1] == (
        "the eager SDPA step read 1.17× its section-2 time in these turns (the pace probe's readings beside it: appendix): "
        "a move that slows the versions unevenly stays in these ratios")
    assert len(nb10.compile_short(faster, slower, moved=1.05)) == 2  # within 1.1x: no line
    near = Ratio("compiled vs eager, section 3b's turns", 1.01, 0.98, 1.045, rounds=9, coverage=0.96, drift=0.02)
    assert nb10.compile_again(near, faster) == (f"  section 3's turns read {faster.brief}: not confirmed here (the "
                                                "answer weighs the sets of turns)")
    assert nb10.unconfirmed(faster, near) == ("the interval 0.98–1.04× holds 1, so it cannot confirm the gain read in "
                                              "1.04–1.06×; a gain of 1.04–1.04× would fit every set, as would none "
                                              "where an interval holds 1: a gain "
                                              "resolved in one set of turns, not replicated in the others")
    wide = Ratio("c3b", 1.03, 0.90, 1.17, rounds=9, coverage=0.96, drift=0.01)
    assert nb10.compile_again(wide, faster).endswith("these turns could not check it (too wide)")
    assert nb10.compile_again(faster, near) == (f"  section 3's turns read {near.brief}: the gain read here did not show "
                                                "there (the answer weighs the sets of turns)")
    assert "would fit" not in nb10.unconfirmed(faster, same)  # 0.98–1.02 and 1.04–1.06 share no value
    assert nb10.compile_again(faster, faster) == ""  # both sets of turns read a gain: nothing to add
    gained = Ratio("compiled, tensor vs .item() in the model", 1.036, 1.005, 1.059, rounds=9, coverage=0.96, drift=0.014)
    level = Ratio(".item() vs plain", 0.99, 0.96, 1.02, rounds=9, coverage=0.96, drift=0.017)  # the control: no cost shown
    unbacked = nb10.break_short(gained, level)
    assert unbacked == [f"removing the graph break (a tensor instead of .item()): {gained.brief} against the .item() GPT",
                        f"the .item() GPT against the plain compiled GPT (the break's cost with Dynamo's giving up): {level.brief}: not "
                        "resolved in these turns, so how much of the fix's gain is the break's is not established"]
    costly = Ratio(".item() vs plain", 0.95, 0.93, 0.97, rounds=9, coverage=0.96, drift=0.01)  # the break costs here
    backed = nb10.break_short(gained, costly)
    assert backed[1] == f"the .item() GPT against the plain compiled GPT (the break's cost with Dynamo's giving up): {costly.brief}"
    again = Ratio("c3b", 1.08, 1.06, 1.10, rounds=9, coverage=0.96, drift=0.01)
    assert nb10.compile_again(again, faster, costly) == (  # log(1/0.95) / log(1.08) = 0.67
        "  by the two paired ratios' medians (the break's cost, 0.950×, against the compile's gain, 1.080×, in logs) the "
        "break took back about 67% of that gain; their intervals allow about 32% to more than all; the medians of the "
        "times above are each setting's own, not these ratios")  # log(1/0.97) / log(1.10) = 0.32; log(1/0.93) / log(1.06) = 1.25
    assert "took back more than all" in nb10.compile_again(faster, faster, costly)  # 0.95 against 1.05
    near = Ratio(".item() vs plain", 0.9654, 0.948, 0.997, rounds=9, coverage=0.96, drift=0.01)  # run87's 3b: near 1
    assert "(the break's cost, 0.965×, against the compile's gain, 1.047×, in logs) the break took back about 78%" in \
        nb10.compile_again(Ratio("c3b", 1.047, 1.02, 1.06, rounds=9, coverage=0.96, drift=0.01), None, near)  # not 62 %
    fixes = {nb10.COMPILING: faster, nb10.FIX: gained}
    said = nb10.answer({"compute": 0.9, "framework": 0.1}, "cpu", fixes, None, "", None, item_cost=level)
    assert "so what paid: compiling (default mode) at 1.05× made" in said and "instead of .item() at" not in said
    assert f"a tensor instead of .item(): {gained.brief} against the .item() GPT; the break's own cost not resolved " \
        "(details)" in said
    assert (f"    a tensor instead of .item(): {gained.brief} against the .item() GPT in section 3b's turns, but the "
            f".item() GPT is not told slower than the plain compiled GPT ({level.brief}): what the break costs a step is "
            "not established") in said
    level_fix = Ratio("compiled, tensor vs .item() in the model", 1.05, 0.99, 1.08, rounds=9, coverage=0.96, drift=0.02)
    shown = nb10.break_short(level_fix, costly)  # the control shows the cost, the direct pair does not
    assert shown[1] == (f"the .item() GPT against the plain compiled GPT (the break's cost with Dynamo's giving up): {costly.brief}, "
                        f"though the fix itself read no speed-up beyond its spread: the break's cost "
                        "shows in one pairing, not in the other")
    mirror = nb10.answer({"compute": 0.9, "framework": 0.1}, "cpu", {nb10.COMPILING: faster, nb10.FIX: level_fix}, None,
                         "", None, item_cost=costly)
    assert "    a tensor instead of .item(): " in mirror and "the break's cost shows in one pairing" in mirror \
        and "showed no gain" not in mirror
    wide3b = Ratio("c3b", 1.03, 1.00, 1.11, rounds=9, coverage=0.96, drift=0.01)
    ran08 = {"compiled vs eager, SDPA": {"value": 1.023, "spread": [1.016, 1.144]}}
    other = nb10.answer({"compute": 0.9, "framework": 0.1}, "cpu", {nb10.COMPILING: faster}, None, "", None, ran08,
                        again=wide3b)
    assert "so what paid: compiling (default mode) at 1.05× made" in other
    assert f"\n    compiling in the other sets of turns: section 3b's turns {wide3b.brief}; notebook 08's 1.023× " \
        "(1.016–1.144) faster: a gain of 1.04–1.06× fits every set (where their intervals overlap)\n" in other
    assert "fits every set" not in nb10.answer({"compute": 0.9}, "cpu", {nb10.COMPILING: faster}, None, "", None, ran08,
                                               again=faster)  # every set read a gain
    backed = nb10.answer({"compute": 0.9, "framework": 0.1}, "cpu", fixes, None, "", None, item_cost=costly)
    assert f"removing the graph break sped the .item() GPT back up: the full batch at " \
        f"{gained.value:.{gained.decimals}f}×" in backed and "not established" not in backed
    assert nb10.sync_short(same, 53, "cpu")[-1] == f"keeping them instead of reading them, in speed, timed in turns here: {same.brief}"  # no reference recorded
    assert nb10.sync_short(same, 53, "cpu", reads=0.000163)[-1].endswith(  # two figures: GH read 0.01% for 0.017%
        "; the profiler puts the reads at 0.016% of the step, far less than turns can resolve")
    assert "profiler" not in nb10.sync_short(same, 53, "cuda", reads=0.3)[-1]
    costs = Ratio("no logging vs keeping values", 1.02, 1.01, 1.03, rounds=9, coverage=0.96, drift=0.005)
    assert nb10.sync_short(same, 53, "cpu", plain=costs)[-1] == (  # the norms' own cost, in short where it shows
        f"the plain step without logging, against the one keeping its values: {costs.brief} (the norms computed each "
        "step, read or not)")
    assert len(nb10.sync_short(same, 53, "cpu", plain=same)) == len(nb10.sync_short(same, 53, "cpu"))  # none: no line
    from course_lib import report
    rep = report.Report("10_compile_and_profile", "gpu", "cpu")
    rep.meta.update(device="NVIDIA Test GPU", device_type="cuda")
    rep.add("keeping values vs reading values", 1.041, "×", spread=(0.842, 1.203))
    report.record_reference({"10_compile_and_profile": rep.to_dict()})
    cpu = nb10.sync_short(same, 53, "cpu")
    assert cpu[-1] == ("no GPU run of this course has yet resolved what the reads cost a training step (the "
                       "reference GPU's reading, with its own GPT, apart: too wide to tell)")
    assert "1.04" not in "".join(cpu)  # the reference's figure stands under its own heading, not on this run's line
    r01 = report.Report("01_gpu_vs_cpu", "gpu", "cpu")  # 01's queued reads, on the same reference GPU
    r01.meta.update(device="NVIDIA Test GPU", device_type="cuda")
    r01.add("async: 10 queued matmuls, then .item()", 27.1, "ms")
    r01.add("async: matmul 4096×4096 synchronized", 2.7, "ms")
    report.record_reference({"01_gpu_vs_cpu": r01.to_dict()})
    assert nb10.sync_short(same, 53, "cpu")[-1].endswith(  # reader FJ: what a read waits for, pointed to
        "too wide to tell); what one read waits for on a GPU, a queue of matmuls (notebook 01), stands there too")
    assert "reference" not in "".join(nb10.sync_short(same, 53, "cuda"))
    rep.add("keeping values vs reading values", 1.3, "×", spread=(1.2, 1.4))
    report.record_reference({"10_compile_and_profile": rep.to_dict()})
    assert nb10.sync_short(same, 53, "cpu")[-1] == "the reference GPU, with its own GPT, measured a difference (its reading stands apart)"


def test_reference_fix_says_a_record_without_region_counts_does_not_measure_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    from course_lib import report
    rep = report.Report("10_compile_and_profile", "gpu", "cpu")
    rep.meta.update(device="NVIDIA Test GPU", device_type="cuda")
    rep.add("compiled, tensor vs .item() in the model", 1.052, "×", spread=(0.956, 1.186))
    report.record_reference({"10_compile_and_profile": rep.to_dict()})
    stale = nb10.reference_fix()
    assert stale.startswith("The reference GPU's record of this fix is not shown: it was recorded with older code") \
        and "1.052" not in stale and stale.endswith("No GPU measurement of the fix as written here exists yet.")
    rep.add("compiled, .item() in the model", 413.7, "ktok/s")
    report.record_reference({"10_compile_and_profile": rep.to_dict()})
    assert nb10.stale_fix_rows()[0] == ["compiled, tensor vs .item() in the model", "compiled, .item() in the model"]
    mine = report.Report("10_compile_and_profile", "cpu", "cpu")
    mine.add("compiled, .item() in the model", 21.8, "ktok/s")
    assert "(the reference run's 2 rows left out: the graph-break fix's rows" in mine.table(*nb10.stale_fix_rows())
    rep.add("compile + first step, default", 19.1, "s")  # a row that stays
    report.record_reference({"10_compile_and_profile": rep.to_dict()})
    closing = mine.table(*nb10.stale_fix_rows())
    assert "413.7" not in closing and "(2 reference rows left out: the graph-break fix's rows" in closing
    rep.add(nb10.REGIONS, 1, "regions")  # recorded by the current code: each model's regions were checked
    report.record_reference({"10_compile_and_profile": rep.to_dict()})
    assert "1.052" in nb10.reference_fix() and "not shown" not in nb10.reference_fix() and nb10.stale_fix_rows() == ([], "")


def _paired(name, times):
    """A Timing from per-turn times, marked as timed in one set of turns with the others built alike."""
    return bench.timing_of(times, name=name, device="cpu", turns_id=7)


def test_gelu_side_says_how_much_of_gelus_time_its_bytes_explain():
    gelu = _paired("F.gelu", [1.0e-3, 1.02e-3, 0.99e-3, 1.01e-3, 1.0e-3])
    copy = _paired("copy", [0.25e-3, 0.26e-3, 0.25e-3, 0.25e-3, 0.24e-3])
    g = lambda c: bench.speedup(gelu, c, "copy vs GELU", more="longer", less="shorter")  # noqa: E731  GELU's time over the copy's
    said = nb10.gelu_side(g(copy), gelu, copy, "cpu (2 threads)")
    assert said.startswith("verdict on cpu (2 threads): GELU's time ÷ a copy's time, the same bytes: 4.0")
    assert "GELU took 4.0× a copy's time: moving its bytes accounts for about 25% of it" in said
    assert "about a copy's time (250 µs of its 1 ms; reasoning, not measured)" in said and "in the op table" not in said
    step = roofline.OpTime("aten::gelu", ((16, 128, 512),), "element-wise", 4, 1.0e6, 4.0e6, 4.0e-3)
    assert "the step's GELU took 1 ms a call, under the profiler" in nb10.gelu_side(g(copy), gelu, copy, "cpu", step)
    assert "another moment: 1.00× its time alone here, within 10 % of it" in nb10.gelu_side(g(copy), gelu, copy, "cpu", step)
    slower = dataclasses.replace(step, seconds=8.0e-3)  # 2 ms a call in the step
    assert "2.0× its time alone here; what makes up the difference" in nb10.gelu_side(g(copy), gelu, copy, "cpu", slower)
    tiny = _paired("copy", [2.65e-5, 2.66e-5, 2.65e-5, 2.64e-5, 2.65e-5])
    cached = nb10.gelu_side(g(tiny), gelu, tiny, "cpu", main_s=1.2e-4)  # main memory moves them 4.5x slower
    assert "at main memory's copy rate they take 120 µs, 12% of GELU's time, still under half" in cached
    assert "its bytes could set" in nb10.gelu_side(g(tiny), gelu, tiny, "cpu", main_s=6e-4)
    assert "main memory" not in nb10.gelu_side(g(tiny), gelu, tiny, "cpu", main_s=2.7e-5)  # the copy ran at its rate
    narrow = nb10.gelu_side(g(tiny), gelu, tiny, "cpu")
    assert "accounts for about 2.6% of it (2.6%–2.7%)" in narrow or "accounts for about 2.7% of it (2.6%–2.7%)" in narrow
    from course_lib.lessons.nb10_roofline import _pct_range
    assert _pct_range(0.02631, 0.02639) == ("2.63%–2.64%", 2) and _pct_range(0.02631, 0.02632) == ("its range as narrow", 2)
    same = _paired("copy", [1.01e-3, 0.99e-3, 1.0e-3, 1.02e-3, 0.99e-3])
    alike = nb10.gelu_side(g(same), gelu, same, "cpu")
    assert "not told apart" in alike and "does not set" not in alike
    near = _paired("copy", [0.7e-3, 0.71e-3, 0.7e-3, 0.69e-3, 0.7e-3])
    close = nb10.gelu_side(g(near), gelu, near, "cpu")
    assert "GELU took 1.43× a copy's time" in close and "does not set" not in close
    assert "whether fused code also computes GELU faster is not measured here" in said  # not timed: said so
    quick = _paired("compiled", [0.5e-3, 0.51e-3, 0.5e-3, 0.49e-3, 0.5e-3])  # compiled alone, in the same rounds
    timed = nb10.gelu_side(g(copy), gelu, copy, "cpu", compiled=bench.speedup(gelu, quick, "compiled vs eager GELU"))
    assert "GELU compiled alone (Inductor's kernel) instead of eager: 2.0" in timed and "not measured here" not in timed
    assert "GELU ran 2.0" in timed and "generated code computes it faster" in timed
    flat = nb10.gelu_side(g(copy), gelu, copy, "cpu", compiled=bench.speedup(gelu, same, "compiled vs eager GELU"))
    assert "the compiled call was no faster" in flat and \
        "computes it faster," not in flat
    loose = bench.Ratio("compiled vs eager GELU", 0.97, 0.89, 1.03, rounds=9, coverage=0.96, drift=0.01)  # too wide
    assert "whether the compiled call is faster, these rounds cannot tell" in nb10.gelu_side(
        g(copy), gelu, copy, "cpu", compiled=loose) and "was no faster" not in nb10.gelu_side(g(copy), gelu, copy, "cpu",
                                                                                             compiled=loose)


def test_answer_carries_gelus_measured_share_into_fusions_room():
    kinds = {"attention": {"seconds": 0.05}, "matmul": {"seconds": 0.03}, "element-wise": {"seconds": 0.02}}
    gelu = _paired("GELU", [1.0e-3, 1.02e-3, 0.99e-3, 1.01e-3, 1.0e-3])
    copy = _paired("copy", [0.25e-3, 0.26e-3, 0.25e-3, 0.25e-3, 0.24e-3])
    said = nb10.answer({"compute": 0.9, "framework": 0.1}, "cpu", {}, kinds, "sdpa bwd", 0.04,
                       gelu=(bench.speedup(gelu, copy), 0.05))
    assert "20.0% of the op time (15.0% without GELU's forward, whose time is mostly not memory traffic)" in said
    assert "      of those, GELU's forward takes 5% of the op time, and a copy of its bytes took 25.0% of its time" in said
    assert said.count("unless the fused code also computes GELU faster (reasoning, not measured)") == 1
    quick = _paired("compiled", [0.5e-3, 0.51e-3, 0.5e-3, 0.49e-3, 0.5e-3])
    timed = nb10.answer({"compute": 0.9, "framework": 0.1}, "cpu", {}, kinds, "sdpa bwd", 0.04,
                        gelu=(bench.speedup(gelu, copy), 0.05, bench.speedup(gelu, quick)))
    assert "would leave most of GELU's time; compiled alone, GELU ran 2.0" in timed and "unless" not in timed
    level = _paired("copy", [1.01e-3, 0.99e-3, 1.0e-3, 1.02e-3, 0.99e-3])  # GELU at a copy's pace: nothing to add
    assert "GELU" not in nb10.answer({"compute": 0.9, "framework": 0.1}, "cpu", {}, kinds, "sdpa bwd", 0.04,
                                     gelu=(bench.speedup(gelu, level), 0.05))


def test_part_in_09_sets_09s_forward_and_backward_beside_the_whole_step():
    from course_lib import profiles
    from course_lib.lessons.nb10_beside08 import PART_09, _part_in_09
    c = profiles.sizes("09_memory", "cpu")
    gpt = GPTConfig(vocab_size=256, block_size=c.block, n_layer=c.n_layer, n_head=c.n_head, n_embd=c.n_embd)
    ran09 = {PART_09: {"value": 109.4, "unit": "ms", "spread": [108.1, 110.6], "setup": f"batch {c.batch}"}}
    said = _part_in_09(ran09, gpt, "cpu", c.batch, {"section 2": _t("a", 0.0931), "section 3": _t("b", 0.112)})
    assert said == ("09 timed a part of this step, the whole GPT's forward + backward (SDPA attention) without the "
                    "optimizer: 109 ms (quartiles 108 ms–111 ms), 98%–118% of this notebook's whole eager SDPA step "
                    "as read in section 2 and section 3 (93.1 ms, 112 ms; two moments each, so a share, not a "
                    "measurement: 09 times the part inside the whole in the same turns): the part read longer than the "
                    "whole in section 2; which reading is typical is not measured")  # 109.4 / 112 and 109.4 / 93.1
    from course_lib.lessons.nb09 import WHOLE_STEP
    ran09[WHOLE_STEP] = {"value": 24.2, "unit": "ktok/s",  # 09's reading of 08's step, 84.6 ms a step
                         "setup": f"batch {c.batch}, micro-batch 16 × 2, written-out attention"}
    slow = _part_in_09(ran09, gpt, "cpu", c.batch, {"section 2": _t("a", 0.0931)},
                       _t("08's step", 0.0684, work=2048, unit="tok/s"))  # the same step here: 68.4 ms
    assert slow.endswith("; 09's reading of 08's step took 1.24× this notebook's time for that step too: both of 09's "
                         "readings ran slower than this notebook's, by a cause not measured (the pace probe's line above "
                         "says whether the machine's pace, as a fixed matmul and copy read it, accounts for it)")
    sdpa = {**ran09, WHOLE_STEP: {**ran09[WHOLE_STEP], "setup": f"batch {c.batch}, SDPA"}}  # 09 ran 08's SDPA step
    assert "09's reading of 08's step" not in _part_in_09(sdpa, gpt, "cpu", c.batch, {"section 2": _t("a", 0.0931)},
                                                          _t("08's step", 0.0684, work=2048, unit="tok/s"))
    assert _part_in_09(ran09, gpt, "cpu", c.batch + 1, {"section 2": _t("a", 0.0931)}) == ""  # another batch
    assert _part_in_09(ran09, dataclasses.replace(gpt, n_layer=gpt.n_layer + 1), "cpu", c.batch,
                       {"section 2": _t("a", 0.0931)}) == ""  # another GPT
    assert "longer" not in _part_in_09(ran09, gpt, "cpu", c.batch, {"section 3": _t("b", 0.112)})
    assert "longer" not in _part_in_09(ran09, gpt, "cpu", c.batch, {"section 3": _t("b", 0.10938)})  # both print 109 ms


def test_answer_says_compiling_and_the_written_out_attention_were_not_timed_together():
    gain = Ratio("c", 1.05, 1.02, 1.10, rounds=9, coverage=0.96, drift=0.01)
    attention = Ratio("a", 1.38, 1.35, 1.47, rounds=9, coverage=0.96, drift=0.01)
    said = nb10.answer({"compute": 0.9, "framework": 0.1}, "cpu", {nb10.COMPILING: gain}, None, "", None,
                       attention=attention)
    assert "made the step measurably faster, in turns (each against the eager SDPA step; compiling on top of the written-out attention: not timed)" \
        "\n  details:" in said
    ran08 = {"compiled vs eager, written-out attention": {"value": 1.154, "unit": "×", "spread": [1.146, 1.210], "rounds": 9,
                                                          "coverage": 0.96, "drift": 0.01}}
    cited = nb10.answer({"compute": 0.9, "framework": 0.1}, "cpu", {nb10.COMPILING: gain}, None, "", None, ran08,
                        attention=attention)
    assert "(each against the eager SDPA step; compiling on top of the written-out attention: notebook 08 timed the written-out GPT compiled against " \
        "it eager, in its own turns: 1.154× (1.146–1.210) faster; the two changes at once against eager SDPA: not timed)" in cited


def test_cache_roof_note_says_how_a_cache_roof_colours_the_memory_side():
    main, cache = _t("copy 256 MiB", 0.01, work=3.26e8, unit="B/s"), _t("copy 8 MiB", 0.001, work=1.617e8, unit="B/s")
    ops = [OpTime("aten::gelu", ((8,),), "element-wise", 1, 1e6, 4e6, 0.004), MM]
    said = nb10.cache_roof_note(ops, lambda o: cache if o is ops[0] else main, main, 0.008)
    assert said == ("1 group (50% of op time) held to a cache's roof, up to 5.0× main memory's (32.6 GB/s): which "
                    "memory level holds each op's data is not measured; held to main memory's roof instead, an op left "
                    "of its ridge would read up to 5.0× closer to its roof")
    assert nb10.cache_roof_note(ops, lambda o: main, main, 0.008) == ""  # every op at main memory's roof


def _record_10(device: str, rows: dict) -> None:
    """Record a reference run of notebook 10 on `device` (a GPU) holding `rows` (name: (value, unit))."""
    from course_lib import report
    rep = report.Report("10_compile_and_profile", "gpu", "cpu")
    rep.meta.update(device=device, device_type="cuda")
    for name, (value, unit) in rows.items():
        rep.add(name, value, unit)
    report.record_reference({"10_compile_and_profile": rep.to_dict()})


def test_reference_kinds_names_the_reference_gpt(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    assert nb10.reference_kinds() == ""  # no reference recorded
    _record_10("NVIDIA H200", {"op time share: attention": (14.0, "%"), "op time share: matmul": (36.7, "%")})
    said = nb10.reference_kinds()
    assert said.startswith("on the reference NVIDIA H200, with the reference run's own GPT: ")
    assert said.endswith("(another model than this run's), its kernels' time by kind: matmul 37%, attention 14%")


def test_answer_adds_the_small_steps_fix_and_counts_it_paid_only_with_its_control():
    fix = Ratio("t", 1.04, 0.99, 1.08, rounds=9, coverage=0.96, drift=0.01)  # the full batch: no measurable gain
    small = Ratio("t1", 1.18, 1.17, 1.20, rounds=9, coverage=0.96, drift=0.01)
    costly = Ratio("c1", 0.86, 0.83, 0.90, rounds=9, coverage=0.96, drift=0.01)  # the .item() GPT slower: backed
    said = nb10.answer({"compute": 0.9, "framework": 0.1}, "cpu", {nb10.FIX: fix}, None, "", None, small=(small, costly))
    assert f"    a tensor instead of .item(): {fix.brief}; one sequence of 32 tokens: {small.brief}" in said
    assert "so what paid: no change timed here" in said  # the fix gives back what the break cost: not a gain
    assert "  removing the graph break sped the .item() GPT back up: one sequence of 32 tokens at 1.18× (the break " \
        "was added on purpose; section 3b times its cost against the plain GPT)" in said
    wide = Ratio("p1", 1.05, 0.90, 1.20, rounds=9, coverage=0.96, drift=0.01)  # the fixed GPT against the plain one
    noted = nb10.answer({"compute": 0.9, "framework": 0.1}, "cpu", {nb10.FIX: fix}, None, "", None,
                        small=(small, costly, wide))
    assert "; whether the fixed GPT fully returns to the plain GPT's speed is not settled: at one sequence of 32 tokens " \
        f"they read {wide.brief}" in noted  # the monitoring is in both GPTs of the fix's ratio: it cancels there
    level = Ratio("c1", 0.99, 0.96, 1.02, rounds=9, coverage=0.96, drift=0.01)  # the control shows no cost
    open_ = nb10.answer({"compute": 0.9, "framework": 0.1}, "cpu", {nb10.FIX: fix}, None, "", None, small=(small, level))
    assert "the break's own cost not resolved there" in open_ and "gave back" not in open_


def test_unsteady_names_the_setting_whose_quartiles_lie_far_from_its_median():
    calm, shaky = _t("compiled", 0.135, 0.004), _t("eager", 0.133, 0.037)  # ±1.5 % and ±14 %
    said = nb10.unsteady([calm, shaky])
    assert said.startswith("these turns ran unsteadily: eager's quartiles lie ±14% about its median (the others' within ±1%)")
    assert nb10.unsteady([calm, _t("eager", 0.133, 0.004)]) == ""
    lopsided = bench.Timing("eager", "cpu", 0.101, 0.0222, 9, q1_s=0.0998, q3_s=0.122)  # -1% and +21%
    assert "eager's quartiles lie 1% below and 21% above its median" in nb10.unsteady([calm, lopsided])



def test_roof_short_one_line_a_library_kind_then_the_fusible_bound():
    attn = OpTime("aten::_scaled_dot_product_flash_attention", ((8, 64),), "attention", 1, 1e8, 1e6, 0.004)  # 2.5 %
    ops = [MM, attn, COPY, dataclasses.replace(ADD, kind="element-wise")]
    kinds = {}
    for o in sorted(ops, key=lambda o: -o.seconds):
        k = kinds.setdefault(o.kind, {"seconds": 0.0, "flops": 0.0, "bytes": 0.0})
        k["seconds"], k["flops"], k["bytes"] = k["seconds"] + o.seconds, k["flops"] + o.flops, k["bytes"] + o.bytes
    lines = nb10.roof_short(ops, kinds, of_roof, outside=0.0)
    assert lines[0] == "matmul: 44% of op time; its op groups in the op table at 25% of their roof"
    assert lines[1] == "attention: 44% of op time; its op groups in the op table at 2.5% of their roof: a decade or more below it"
    # the copy and the add, 1.1 ms of 9.1: at most 1 / (1 - 0.121) faster were they gone; the loss's and optimizer's
    # ops (`outside`) do not count as the model's
    assert lines[2] == "the model's fusible ops (element-wise, reduction, copy): 12.1% of op time; were their time gone, " \
                       "the ops would run at most 1.14× faster"
    assert nb10.roof_short(ops, kinds, of_roof, outside=0.0011)[2].startswith(
        "the model's fusible ops (element-wise, reduction, copy; the loss's and optimizer's, 12.1% more, left out): 0.0% of "
        "op time")
    many = [dataclasses.replace(MM, shapes=((i,),)) for i in range(nb10.ROWS)] + [  # a slower-than-roof matmul past the
        dataclasses.replace(MM, shapes=((99,),), seconds=0.001, flops=1e7)]  # table's rows: not in the short line
    mm_kinds = {"matmul": {"seconds": sum(o.seconds for o in many), "flops": 1.0, "bytes": 1.0}}
    assert nb10.roof_short(many, mm_kinds, of_roof, 0.0)[0].endswith("at 25% of their roof")
    near = OpTime("aten::mm", ((8, 8), (8, 8)), "matmul", 1, 1e9, 1e7, 0.0016)  # 6.25e11 FLOP/s: 62 % of its roof
    mm_only = {"matmul": {"seconds": 0.0016, "flops": 1e9, "bytes": 1e7}}
    assert nb10.roof_short([near], mm_only, of_roof, 0.0)[0].endswith("at 62% of their roof: half of it or more")


def test_break_ratios_named_as_recorded_and_their_details():
    control, item, tensor, eager = (_t(n, s, 0.01 * s) for n, s in (("compiled, plain GPT", 1.0),
                                                                   ("compiled, .item() in the model", 1.25),
                                                                   ("compiled, tensor in the model", 1.0),
                                                                   ("eager, plain GPT", 1.2)))
    r = nb10.break_ratios(control, item, tensor, eager)
    assert [x.name for x in r.values()] == ["compiled, tensor vs .item() in the model",
                                           "compiled, tensor in the model vs compiled, plain GPT",
                                           "compiled, .item() in the model vs compiled, plain GPT",
                                           "compiled vs eager, section 3b's turns"]
    assert r["fix"].value == pytest.approx(1.25) and r["item_cost"].value == pytest.approx(0.8)
    first = {"compiled, .item() in the model": 6.0, "compiled, tensor in the model": 7.0}
    lines = nb10.break_details((control, item, tensor, eager), r, first, None, None, "cpu")
    assert lines[0].startswith("verdict on cpu: removing the graph break (a tensor instead of .item()): 1.25×")
    assert lines[1].startswith("compilation: first step 6.00 s with the .item(), 7.00 s with the tensor")
    assert "the step monitoring with .item(), its speed over the plain compiled GPT's" in lines[3]
    assert lines[6] == lines[7] == ""  # no cold compile given, and section 3's compiled step not timed: nothing beside it
    said = nb10.break_details((control, item, tensor, eager), r, first, None, _t("compiled, default", 1.0, 0.01), "cpu")
    assert said[7].startswith("the plain compiled step: 1 s in section 3's turns, 1 s in these (1.00× its time)")
    clear = {**r, "again": Ratio("compiled vs eager, section 3b's turns", 1.2, 1.15, 1.25, rounds=9, coverage=0.96,
                                 drift=0.01)}
    pays = nb10.break_details((control, item, tensor, eager), clear, first, None, None, "cpu", cold_s=20.0)
    # 19 s beyond one compiled step, each step saving 1.2 s × (1 − 1/1.2) = 0.2 s: 95 steps (1.25×: 79; 1.15×: 121)
    assert pays[6] == ("  by these turns' paired gain and eager median, section 3's compilation pays for itself after "
                       "about 95 steps (79 to 120); section 3 reckoned it from its own turns'")
    assert nb10.break_details((control, item, tensor, eager), clear, first, None, None, "cpu")[6] == ""  # no cold compile


def test_pace_probe_is_fixed_work_and_its_clause_takes_the_pace_out_of_the_step():
    probe = bench.pace_probe("cpu")
    out, copied = probe()
    assert out.shape == (1024, 1024) and copied.numel() * 4 == 32 * 2**20  # the same work in every process
    again_out, again_copied = probe()  # into the same buffers: no allocation whose cost the process's history sets
    assert again_out.data_ptr() == out.data_ptr() and again_copied.data_ptr() == copied.data_ptr()
    assert out.dtype == copied.dtype == torch.float32  # the probe's format, on every device
    steps = {"section 2": _t("a", 0.092), "section 3": _t("b", 0.108)}
    with_pace = {"section 2": _t(bench.PROBE, 0.020), "section 3": _t(bench.PROBE, 0.0235)}  # moved 1.175× too
    said = nb10.probe_clause(steps, with_pace)
    assert said.startswith("the pace probe (a fixed matmul and copy) in the same sets of turns: 20 ms, 23.5 ms (1.18× "
                           "from fastest to slowest); the step's time over the probe's: 4.60, 4.60 (1.00×)")
    assert said.endswith("the probe moved with the step: what moved it (the machine's pace, or other work in this "
                         "process or its turns; not told apart) slowed a fixed matmul and copy about as much")
    part = nb10.probe_clause(steps, {"section 2": _t(bench.PROBE, 0.020), "section 3": _t(bench.PROBE, 0.0218)})
    # the step moved 1.174×, the probe 1.09×: ln 1.09 / ln 1.174 = 0.54 of the move shows in the probe
    assert part.endswith("the step's spread is 1.17× alone, 1.08× over the probe: about 54% of the step's move (in "
                         "logs, its fastest set to its slowest) goes with a fixed matmul and copy's pace; the rest is "
                         "not measured")
    more = nb10.probe_clause(steps, {"section 2": _t(bench.PROBE, 0.020), "section 3": _t(bench.PROBE, 0.026)})
    # the probe moved 1.30×, the step 1.17×: its time over the probe's went down (4.60 to 4.15), not a share
    assert "4.60, 4.15" in more and more.endswith("the probe moved more than the step from the step's fastest set "
                                                  "to its slowest (1.30× against 1.17×): the machine's pace moved, "
                                                  "and the step followed it only in part (why, is not measured)")
    other = nb10.probe_clause(steps, {"section 2": _t(bench.PROBE, 0.023), "section 3": _t(bench.PROBE, 0.020)})
    assert other.endswith("the probe held while the step moved: whatever moved the step did not slow a fixed matmul "
                          "and copy (what it is, is not measured)")  # the probe sped up where the step slowed
    held = nb10.probe_clause(steps, {"section 2": _t(bench.PROBE, 0.020), "section 3": _t(bench.PROBE, 0.0201)})
    assert held.endswith("the probe held while the step moved: whatever moved the step did not slow a fixed matmul "
                         "and copy (what it is, is not measured)")
    assert nb10.probe_clause({"a": _t("a", 0.1), "b": _t("b", 0.102)}, with_pace | {"a": _t("p", 0.02),
                                                                                   "b": _t("p", 0.03)}) == ""  # no move
    assert nb10.probe_clause(steps, {"section 2": None, "section 3": _t(bench.PROBE, 0.02)}) == ""  # one set with both
    timings, got = bench.split_probe([_t("x", 1.0), _t(bench.PROBE, 0.02, work=2048, unit="tok/s")], "here")
    assert [t.name for t in timings] == ["x"] and got.name == "pace probe, here" and got.rate is None  # a time
    assert bench.split_probe([_t("x", 1.0)]) == ([_t("x", 1.0)], None)


def test_paced_takes_each_sets_pace_out_of_08s_step():
    from course_lib.lessons import nb09, nb10_beside08
    ran08 = {"eager, written-out attention": {"value": 25.0, "unit": "ktok/s"},
             "pace probe, section 4's turns": {"value": 24.0, "unit": "ms"}}
    ran09 = {nb09.WHOLE_STEP: {"value": 26.0, "unit": "ktok/s", "setup": "batch 16, written-out attention"},
             "pace probe, beside 08's step": {"value": 23.0, "unit": "ms"}}
    here = bench.timing_of([0.065, 0.066, 0.064], name="08's step", device="cpu", work=2048, unit="tok/s")
    probe = _t("pace probe, section 3's turns", 0.019)  # this set ran 1.25× faster, and so did its probe
    said = nb10_beside08.paced(ran08, ran09, here, probe)
    # 25,000 tok/s × 24 ms = 600; 26,000 × 23 ms = 598; 2048 / 65 ms × 19 ms = 599
    assert said == ("08's step in the turns of 08's section 4 (2 micro-batches), 09's and this notebook's section 3: "
                    "1.26× apart in rate, 1.00× once each set's pace probe is taken out (its rate × the probe's time in "
                    "the same turns, tokens per probe: 600, 598, 599): the pace probe takes the gap away (within 1.1×, "
                    "where the spreads lie furthest apart too)")
    spread = {**ran08, "pace probe, section 4's turns": {"value": 24.0, "unit": "ms", "spread": [22.0, 27.0]}}
    wide = nb10_beside08.paced(spread, ran09, here, probe, as_row=True)  # 08's probe read 22-27 ms: 550-675 tokens
    assert wide[2] == pytest.approx(1.0033, abs=1e-3) and wide[3] == (
        "within 1.1× at the medians, up to 1.14× where the two spreads lie furthest apart: inconclusive")  # 675/590
    apart = nb10_beside08.paced(ran08, ran09, here, _t("p", 0.025))  # the probe held, the step did not
    assert apart.endswith("1.26× apart in rate, 1.32× once each set's pace probe is taken out (its rate × the probe's "
                          "time in the same turns, tokens per probe: 600, 598, 788): a gap the probe does not take away, "
                          "so not the machine's pace as the probe reads it; what sets these readings apart is not measured")
    loose09 = {**ran09, "pace probe, beside 08's step": {"value": 23.0, "unit": "ms", "spread": [23.0, 30.0]}}
    near = nb10_beside08.paced(ran08, loose09, here, _t("p", 0.025), as_row=True)  # 09's probe reached 30 ms: 780 tokens
    assert f"{near[2]:.2f}" == "1.32" and near[3] == ("beyond 1.1× at the medians, 1.00× where the two spreads come "
                                                       "closest: inconclusive")
    assert "beyond 1.1× at the medians, but the steps' and the probes' quartiles allow as little as 1.00×: whether the " \
        "gap outlasts the " \
        "pace is not settled" in nb10_beside08.paced(ran08, loose09, here, _t("p", 0.025))  # reader FQ: not medians alone
    counted08 = {**ran08, "eager, written-out attention": {**ran08["eager, written-out attention"], "faults": 9600.0,
                                                            "work": 4096}}  # 08's slower step: 2 micro-batches, faulting
    fast = dataclasses.replace(here, faults=0.0)  # here, faster: none
    counted = nb10_beside08.paced(counted08, ran09, fast, _t("p", 0.025))
    assert counted.endswith("; 08's step's page faults per 1,000 tokens (pages the system maps in at first touch): 08's section 4 "
                            "2,344, section 3 here 0: the one slower reading with a count (1.1× or more the fastest's time) faulted at "
                            "least 2,344 more than the faster ones: memory taken fresh from the system each step goes with "
                            "the slower time here, in one reading (a candidate cause, not tested)")  # 9,600 faults a step of 4,096 tokens
    assert nb10_beside08.paced(counted08, ran09, fast, _t("p", 0.025), as_row=True)[3].endswith(
        "; the slower readings faulted more pages a step (details)")  # a gap the probe leaves: the candidate, in short
    sdpa09 = {**ran09, nb09.WHOLE_STEP: {**ran09[nb09.WHOLE_STEP], "setup": "batch 16, SDPA"}}  # 08's long run's attention
    assert "09's" not in nb10_beside08.paced(ran08, sdpa09, here, probe)  # another step: not set beside the written-out one
    assert nb10_beside08.paced(ran08, None, None, None) == ""  # one reading with its probe: nothing to set beside
    assert nb10_beside08.paced({"eager, written-out attention": ran08["eager, written-out attention"]}, ran09, here,
                               probe).startswith("08's step in the turns of 09's and this notebook's section 3: ")
    one = {**ran08, "step, micro-batch of 16 sequences, no sampler": {  # 08's section 5: one micro-batch, as here
        "value": 30.0, "unit": "ktok/s", "setup": "written-out attention"},
           "pace probe, section 5's turns": {"value": 20.0, "unit": "ms"}}
    like = nb10_beside08.paced(one, ran09, here, probe, batch=16)  # 30,000 tok/s × 20 ms = 600: section 5's, not 4's
    assert like.startswith("08's step in the turns of 08's section 5 (1 micro-batch), 09's and this notebook's section 3: "
                           "1.21× apart in rate, 1.00× once") and "(2 micro-batches)" not in like
    assert "section 4" in nb10_beside08.paced(one, ran09, here, probe)  # no batch given: section 4's, as before
    unprobed = {k: v for k, v in one.items() if k != "pace probe, section 5's turns"}
    assert "08's section 4 (2 micro-batches)" in nb10_beside08.paced(unprobed, ran09, here, probe, batch=16)
    sdpa5 = {**one, "step, micro-batch of 16 sequences, no sampler": {"value": 30.0, "unit": "ktok/s", "setup": "SDPA"}}
    assert "08's section 4" in nb10_beside08.paced(sdpa5, ran09, here, probe, batch=16)  # another step: not beside it


def test_gelu_placed_on_the_compute_side_only_where_its_timing_says_so():
    slow = Ratio("GELU vs a copy of its bytes", 37.8, 36.0, 39.0, rounds=9, coverage=0.96, drift=0.02)
    assert nb10.gelu_compute_set(slow) and not nb10.gelu_compute_set(None)
    assert not nb10.gelu_compute_set(Ratio("g", 1.5, 1.4, 1.6, rounds=9, coverage=0.96, drift=0.01))  # bytes weigh
    assert not nb10.gelu_compute_set(Ratio("g", 3.0, 1.0, 5.0, rounds=9, coverage=0.96, drift=0.01))  # not resolved
    assert nb10.gelu_placed(slow, 0.041) == ("  GELU's forward, 4% of op time, stands in neither row: its time is 37.8× a "
                                             "copy's of its bytes (the cell above), so memory traffic does not set it, and "
                                             "no measured roof does (its arithmetic or its kernel: not measured apart); "
                                             "GELU's backward, not timed so, stays where its count puts it")
    assert nb10.gelu_placed(None) == ""


def test_so_what_paid_says_why_compiling_is_not_counted():
    faster = Ratio("c", 1.05, 1.03, 1.06, rounds=9, coverage=0.96, drift=0.005)
    again = Ratio("c3b", 1.06, 1.03, 1.07, rounds=9, coverage=0.96, drift=0.005)
    ran08 = {"compiled vs eager, SDPA": {"value": 1.00, "spread": [0.95, 1.02], "rounds": 5, "coverage": 0.94,
                                         "drift": 0.01}}  # no measurable difference in 08's turns, and no gain fits all
    said = nb10.answer({"compute": 0.9, "framework": 0.1}, "cpu", {nb10.COMPILING: faster}, None, "", None, ran08,
                       again=again)
    assert ("  so what paid: no change timed here made the step measurably faster\n    compiling, faster in section 3's and "
            "section 3b's turns, read no measurable difference in notebook 08's, so it is not counted here (details)") in said
    counted = nb10.answer({"compute": 0.9, "framework": 0.1}, "cpu", {nb10.COMPILING: faster}, None, "", None, None,
                          again=again)  # no set reads no difference: counted, and nothing to explain
    assert "so what paid: compiling (default mode) at 1.05×" in counted and "not counted" not in counted
    fits = {"compiled vs eager, SDPA": {"value": 1.02, "spread": [0.97, 1.06], "rounds": 5, "coverage": 0.94,
                                        "drift": 0.01}}  # no difference in 08's turns, but 1.03-1.06x fits all three
    both = nb10.answer({"compute": 0.9, "framework": 0.1}, "cpu", {nb10.COMPILING: faster}, None, "", None, fits,
                       again=again)
    assert "so what paid: compiling (default mode) at 1.05×" in both and "not counted" not in both


def test_beside_08_says_when_the_probe_leaves_a_gap_the_two_moments_rule_allows():
    from course_lib import bench as b
    gpt = GPTConfig(vocab_size=256, block_size=128, n_layer=4, n_head=4, n_embd=128)
    turns = object()
    t = lambda name, s: b.timing_of([s * f for f in (0.99, 1.0, 1.0, 1.01, 1.02)], name=name, device="cpu",  # noqa: E731
                                    work=2048, unit="tok/s", turns_id=turns)
    written, as_08 = t("eager, written-out attention", 0.0682), t("08's step, written-out attention", 0.0700)
    ran08 = {**_ran08(), "pace probe, section 4's turns": {"value": 21.0, "unit": "ms"}}  # 31.6 ktok/s × 21 ms = 664
    probe = _t("pace probe, section 3's turns", 0.021)  # the same pace here: 2048 / 70 ms × 21 ms = 614
    lines = nb10.beside_08(ran08, gpt, "cpu", 16, written=written, as_08=as_08, probe=probe).splitlines()
    assert lines[0] == ("in short: the notebooks side by side (paced: each rate times its own set's pace-probe time, "
                        "the machine's pace taken out):")  # the notebooks agree: first, as a table (readers FX, FZ)
    assert lines[2:4] == ["            08's step (08's section 4 and section 3 here)  1.08× apart  1.08× apart",
                          "            08's step: they agree"]
    assert lines[4].startswith("          timed in section 3's turns, 08's step")
    assert lines[5] == "  details:"  # the 2.5x rule, which says less than the probe, stands under details
    assert "tokens per probe" not in "".join(lines[:5]) and any(ln.startswith("    08's step in the turns of") and
                                                      "tokens per probe: 664, 614)" in ln for ln in lines)  # its sums
    assert "    by the rule for two moments (2.5×, what a machine's pace can move), for readings and for paired ratios " \
        "from separate sets of turns alike, no reading of 08's (or 09's) is told apart from this notebook's" in lines
    slower = {**{k: v for k, v in ran08.items() if not k.startswith("step, micro-batch")},  # 08's one reading
              "eager, written-out attention": {**ran08["eager, written-out attention"], "value": 36.0,
                                               "spread": [35.9, 36.1]}}
    spans = nb10.beside_08({**ran08, **slower}, gpt, "cpu", 16, written=written, as_08=as_08, probe=probe).splitlines()
    assert spans[3].endswith("; 08's own readings of this step lie 1.32× apart in one process; against them, this "
                             "notebook's within their range; the cause of these moves is not measured")  # 36.0 / 27.3
    # a reading outside 08's own range: how far beyond its nearest end (reader FB: not a gap that holds 08's span)
    fast_here = t("08's step, written-out attention", 0.0500)  # 41 ktok/s, past 08's fastest 36.0
    beyond = nb10.beside_08({**ran08, **slower}, gpt, "cpu", 16, written=written, as_08=fast_here, probe=probe)
    assert "against them, this notebook's 1.14× faster than the fastest; the cause" in beyond.splitlines()[3]
    gap = nb10.beside_08(slower, gpt, "cpu", 16, written=written, as_08=as_08, probe=probe).splitlines()
    assert gap[3].endswith("they disagree beyond 1.1×, and the machine's pace as the probe reads it does not explain it") \
        and gap[5] == "  details:"  # 756/614: 1.23×
    assert any(ln.startswith("    08's step in the turns of") and "a gap the probe does not take away" in ln for ln in gap)
    assert "in one process" not in gap[3]  # no eager readings here to set the gap beside
    assert any(ln.endswith("no reading of 08's (or 09's) is told apart from this notebook's by that rule alone; with "
                           "each set's pace taken out, 08's step disagrees (above), a gap that rule is too loose to see")
               for ln in gap)  # one verdict, not two opposite ones (reader GH)
    assert "by that rule alone" not in "\n".join(lines)  # where they agree paced, the rule's line stands alone
    swung = nb10.beside_08(slower, gpt, "cpu", 16, written=written, as_08=as_08, probe=probe, eager=t("eager", 0.0900),
                           before=t("no logging", 0.1120)).splitlines()  # this notebook's eager step: 1.24x apart
    assert swung[3].endswith("; in rate, 1.23× lies within the 1.24× this notebook's own eager step swung in one process; "
                             "the cause is not measured")  # 36.0 / 29.3: 1.23x
    assert any(ln.endswith("; this notebook's own eager step, in one process, read 1.24× apart across section 2 and "
                           "section 3: the notebooks' gap lies within the widest swing one process shows") for ln in swung)
    less = nb10.beside_08(slower, gpt, "cpu", 16, written=written, as_08=as_08, probe=probe, eager=t("eager", 0.0900),
                          before=t("no logging", 0.1000)).splitlines()  # 1.11x: less than the notebooks' 1.23x
    assert "; in rate, 1.23× lies beyond the 1.11× this notebook's own eager step swung" in less[3]

    unprobed = nb10.beside_08(ran08, gpt, "cpu", 16, written=written, as_08=as_08).splitlines()  # no probe here
    assert unprobed[0].endswith("no reading of 08's (or 09's) is told apart from this notebook's")  # the rule, up front


def test_fit_batch_holds_its_gpts_and_halves_where_they_do_not_fit():
    made, stepped = [], []

    def new_run(sdpa: bool = True):
        made.append(sdpa)
        return (lambda x: torch.zeros(*x.shape, 8, requires_grad=True), None, None)

    def train_step(model, opt, scaler, x, y):
        stepped.append(x.shape[0])
        if x.shape[0] > 4:  # more than 4 sequences: out of memory, as a GPU would raise it
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return torch.zeros(())

    tokens = torch.zeros(16, 9, dtype=torch.long)
    assert nb10.fit_batch(new_run, train_step, tokens, 16, 3, False, torch.bfloat16) == 4  # 16, 8, then 4 fits
    assert made[-3:] == [False, True, True]  # the first GPT written out, the others SDPA
    assert stepped[-1] == 4 and stepped.count(4) == 2 * 3 + 1  # two steps each, then one more with activations kept


def test_answer_quotes_08s_attention_gain_with_its_verdict_where_08_could_not_tell():
    attention = Ratio("a", 1.42, 1.35, 1.47, rounds=9, coverage=0.96, drift=0.01)
    busy = {"SDPA vs written-out attention, eager": {"value": 0.11, "unit": "×", "spread": [0.05, 1.29], "rounds": 5,
                                                      "coverage": 0.94, "drift": 0.62}}  # run91: a turn 10x slow
    said = nb10.answer({"compute": 0.9, "framework": 0.1}, "cpu", {}, None, "", None, busy, attention=attention)
    assert "the written-out attention at 1.42× (notebook 08's turns: 9.09× (0.78–20.00) inconclusive) made" in said  # drift 62 %


def test_beside_08_reads_08s_step_timed_here_as_mfu_beside_08s_own():
    from course_lib.lessons.nb10_beside08 import _mfu
    gpt = GPTConfig(vocab_size=256, block_size=128, n_layer=4, n_head=4, n_embd=128)  # 5,743,104 FLOPs a token
    step = bench.timing_of([0.0700] * 5, name="08's step", device="cpu", work=2048, unit="tok/s")  # 29.26 ktok/s
    said = _mfu([28.5, 23.9, 25.8], step, gpt, 410e9)  # 08's readings, ktok/s: one peak for all
    assert "6N + 12·L·T·C = 5,743,104 FLOPs a token" in said and "here 41.0% (41.0%–41.0%)" in said  # 29.26e3 × 5.74e6 / 410e9
    assert said.endswith("08's answer's readings (its step of 2 micro-batches), over the same "
                         "peak: 33.5%–39.9%, each at its moment")  # not its long run, as 08's answer (reader GK)
    assert "peak: 39.9%, each" in _mfu([28.5], step, gpt, 410e9)  # where it ran this step; one reading, one figure
    like = _mfu([28.5, 23.9, 25.8], step, gpt, 410e9, like=[21.4, 20.9])  # 08's section 5: one micro-batch, as here
    assert "here 41.0% (41.0%–41.0%); 08's readings of the same step, one micro-batch (its section 5): 29.3%–30.0%; " \
        "08's answer's readings" in like  # reader FL: the like reading first
    assert "(its section 5): 30.0%;" in _mfu([28.5], step, gpt, 410e9, like=[21.4])  # one reading: one figure
    assert _mfu([], step, gpt, None) == "" and _mfu([28.5], None, gpt, 410e9) == ""


def test_faults_words_set_each_readings_page_faults_beside_its_time():
    said = nb10.faults_words({"section 2": (0.110, 9600.0), "section 3": (0.095, 0.0), "section 4": (0.097, None)})
    assert said == ("page faults per step (pages the system maps in at first touch): section 2 9,600, section 3 0: the one "
                    "slower reading with a count (1.1× or more the fastest's time) faulted at least 9,600 more than the faster ones: "
                    "memory taken fresh from the system each step goes with the slower time here, in one reading (a "
                    "candidate cause, not tested)")  # readers GB, GC: not 'every' for one
    assert "every slower reading (1.1× or more the fastest's time) faulted at least 5,000 more" in nb10.faults_words(
        {"a": (0.10, 0.0), "b": (0.12, 5000.0), "c": (0.13, 6000.0)})  # two slower readings, both faulting
    assert nb10.faults_words({"a": (0.1, 10.0), "b": (0.12, 20.0)}).endswith("too few to weigh in a step's time")
    assert nb10.faults_words({"a": (0.1, 9000.0), "b": (0.12, 100.0)}).endswith(
        "b ran 1.1× or more slower than the fastest without faulting more: the faults do not go with the step's move here")
    # two slow readings, one of them without faults: the faults do not go with the slower time (reader FB)
    assert nb10.faults_words({"08": (0.174, 6000.0), "09": (0.170, 0.0), "here": (0.134, 0.0)}).endswith(
        "09 ran 1.1× or more slower than the fastest without faulting more: the faults do not go with the step's move here")
    assert nb10.faults_words({"a": (0.1, 9000.0), "b": (0.105, 0.0)}).endswith("no slower reading to set the faults beside")
    assert "ran within 1.1× of each other's time (the others were not counted): no slower" in nb10.faults_words(
        {"a": (0.1, 9000.0), "b": (0.105, 0.0), "c": (0.15, None)})  # reader FV: the 1.48x reading had no count
    assert nb10.faults_words({"a": (0.1, 9000.0), "b": (0.12, None)}) == ""  # one reading counted: nothing to set beside


def test_op_notes_bound_the_time_outside_ops_by_the_steps_fast_quartile():
    slow_spell = StepOps(STEP.ops, _t("step", 0.0060, q1_s=0.0052, q3_s=0.0062), STEP.profiled)  # 5.1 ms of ops
    said = nb10.op_notes(slow_spell, lambda o: 1.0, of_roof, "p", "cpu")  # 1 - 5.1 / 5.2, not 1 - 5.1 / 6.0 (15 %)
    assert "at least 1.9% of the step runs outside any op, against the fast quartile" in said
    fast = StepOps(STEP.ops, _t("step", 0.0060, q1_s=0.0050, q3_s=0.0062), STEP.profiled)  # the ops outlast its quartile
    assert "so this run cannot bound from below the time outside any op" in nb10.op_notes(fast, lambda o: 1.0, of_roof,
                                                                                          "p", "cpu")


def test_beside_08_sets_08s_inferred_lead_beside_the_one_timed_here():
    from course_lib.lessons.nb10_beside08 import INFERRED, _inferred
    turns = object()
    t = lambda name, s: bench.timing_of([s * f for f in (0.99, 1.0, 1.0, 1.01, 1.02)], name=name, device="cpu",  # noqa: E731
                                        work=2048, unit="tok/s", turns_id=turns)
    compiled, written = t("compiled, default", 0.0990), t("eager, written-out attention", 0.0700)  # 1.41x ahead here
    row = _inferred({INFERRED: {"value": 1.19, "unit": "×", "spread": [1.19, 1.19]}}, compiled, written)
    assert row.quantity == "written-out eager over compiled SDPA (08: inferred from two sets of turns; here: paired)"
    assert row.in_08 == "1.19× (1.19–1.19)" and row.here.startswith("1.41× (") and row.ratio.startswith("1.19×")  # 1.41 / 1.19
    wide = _inferred({INFERRED: {"value": 1.34, "unit": "×", "spread": [0.88, 1.62]}}, compiled, written)  # reader FV
    here = bench.speedup(compiled, written, "")
    assert wide.in_08 == "1.34× (0.88–1.62)" and f"({here.lo / 1.62:.2f}–{here.hi / 0.88:.2f})" in wide.ratio  # both spreads
    apart = bench.timing_of([0.07] * 5, name="w", device="cpu", work=2048, unit="tok/s", turns_id=object())
    assert _inferred({INFERRED: {"value": 1.19}}, compiled, apart) is None  # not in the same turns: no paired lead here
    assert _inferred({}, compiled, written) is None  # 08 inferred nothing


def test_answer_counts_a_compile_gain_under_ten_percent_only_where_a_second_set_confirms_it(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))  # no reference run
    small = Ratio("c", 1.09, 1.04, 1.12, rounds=9, coverage=0.96, drift=0.01)  # one set: a gain that may be under 10 %
    open_ = Ratio("c3b", 1.03, 0.90, 1.20, rounds=9, coverage=0.96, drift=0.05)  # the second set: too wide to tell
    said = nb10.answer({"compute": 0.9, "framework": 0.1}, "cpu", {nb10.COMPILING: small}, None, "", None,
                       again=open_, pays_back={"section 3's": 2500.0})
    assert "so what paid: no change timed here made the step measurably faster\n    compiling is not counted: " \
        f"{small.brief} in section 3's turns, its interval reaching below 1.1× (such a gain counts once a second set of " \
        "turns confirms it); section 3b's could not tell (details)" in said and "pays back" not in said.short
    big = Ratio("c", 1.30, 1.20, 1.40, rounds=9, coverage=0.96, drift=0.01)  # its whole interval past 1.1x: it counts
    assert "so what paid: compiling (default mode) at 1.30×" in nb10.answer(
        {"compute": 0.9, "framework": 0.1}, "cpu", {nb10.COMPILING: big}, None, "", None, again=open_)


def test_beside_08_reads_two_paired_ratios_from_two_sets_of_turns_by_the_rule_for_two_moments():
    from course_lib.lessons.nb10_beside08 import _paired
    row = {"value": 1.43, "unit": "×", "spread": [1.38, 1.45], "rounds": 5, "coverage": 0.94, "drift": 0.02}
    apart = _paired("written-out over SDPA, eager", row, Ratio("a", 1.35, 1.26, 1.37, rounds=9, coverage=0.96,
                                                                drift=0.02))
    assert apart.verdict.startswith("inconclusive: the two paired intervals do not overlap, but two sets of turns can "
                                    "move a paired ratio by up to 2.5×")  # as the glossary's 'inconclusive' says
    far = _paired("written-out over SDPA, eager", row, Ratio("a", 4.0, 3.8, 4.2, rounds=9, coverage=0.96, drift=0.02))
    assert far.verdict == "a difference: 2.5× or more apart beyond both intervals (cause not measured)"  # 3.8/1.45
    near = _paired("written-out over SDPA, eager", row, Ratio("a", 1.40, 1.30, 1.50, rounds=9, coverage=0.96, drift=0.02))
    assert near.verdict == "not told apart: the two paired intervals overlap"
    slower = {"value": 0.7042, "unit": "×", "spread": [0.59, 0.73]}  # 08 printed '0.70× (0.59–0.73): 1.43× slower'
    quoted = _paired("written-out over SDPA, eager", slower, Ratio("a", 1.40, 1.30, 1.50, rounds=9, coverage=0.96,
                                                                  drift=0.02), inverted=True)
    assert quoted.in_08.startswith("1.43× (") and "1.42×" not in quoted.in_08  # as 08 printed it (readers GD, GG)


def test_attention_split_says_which_part_of_the_step_sets_the_two_notebooks_ratios_apart():
    from course_lib.lessons.nb10_beside08 import _attention_split
    setup = "micro-batch 16 × 2, 4,096 tokens/step"
    ran08 = {"eager, written-out attention": {"value": 23.5, "unit": "ktok/s", "setup": setup},  # 174.3 ms a step
             "eager, SDPA": {"value": 18.37, "unit": "ktok/s", "setup": setup}}  # 223.0 ms a step
    said = _attention_split(ran08, _t("eager", 0.0929), _t("eager, written-out attention", 0.0668))
    assert said.startswith("that ratio, split per micro-batch (each notebook's two medians, its own turns): SDPA's extra "
                           "time over the written-out step 24.3 ms in 08, 26.1 ms here (1.07×); the written-out step "
                           "itself 87.1 ms in 08 (one optimizer step per 2 micro-batches), 66.8 ms here (0.77×): the "
                           "attention's extra time agrees within 1.1×")
    assert _attention_split(ran08, _t("eager", 0.1200), _t("w", 0.0668)).endswith("both parts differ")  # 53 ms here
    assert _attention_split({}, _t("eager", 0.0929), _t("w", 0.0668)) == ""  # 08 did not time both


def test_groups_of_08s_readings_only_where_they_lie_further_apart_than_within():
    from course_lib.lessons.nb10_beside08 import _groups
    assert _groups([31.6, 27.4, 27.3]) == ", in two groups 1.15× apart: 1 reading at 31.6, 2 readings at 27.3–27.4"
    assert _groups([32.0, 30.1, 28.3, 25.7]) == ""  # reader FP: a group spanning 1.13x is no group beside a 1.10x gap


def test_08s_sdpa_readings_at_other_moments_stand_against_this_notebooks_range_not_one_reading():
    """Reader FR: every 'eager SDPA' row of 08's section 5 (and 09's, and the long run's) was set against section 3's
    reading alone, the slowest of four here, so every row read 0.63-0.81x; each is now placed against the range of
    this notebook's own readings of its eager SDPA step, and told apart only 2.5x beyond it."""
    from course_lib.lessons.nb10_beside08 import _elsewhere
    row = lambda v, setup="micro-batch 16 × 1, 2,048 tokens/step, SDPA": {  # noqa: E731
        "value": v, "unit": "ktok/s", "spread": [v * 0.98, v * 1.02], "setup": setup}
    ran08 = {"step, micro-batch of 16 sequences, no sampler": row(15.6), "step, micro-batch of 16 sequences": row(27.0),
             "eager, written-out attention, in turns with the peak's matmul": row(30.0, "written-out attention")}
    ran09 = {WHOLE_STEP_09: row(16.9, "batch 16, SDPA")}
    here = {"section 2": _t("a", 2048 / 16e3), "section 3": _t("b", 2048 / 12.6e3), "section 3b": _t("c", 2048 / 21.5e3)}
    said, told = _elsewhere(ran08, ran09, 16, here, 2048)
    assert not told and said == (
        "08's step with SDPA at other moments, ktok/s (it adds clipping and AdamW's two groups to this notebook's plain "
        "step): section 5, no sampler 15.6 (within), section 5, sampler on 27 (1.26× faster than its fastest), 09, in "
        "its turns 16.9 (within); against this notebook's plain eager SDPA step in its sets of turns: section 2 16, "
        "section 3 12.6, section 3b 21.5; none 2.5× beyond: not told apart (the rule for two moments)")
    far, told = _elsewhere({"step, micro-batch of 16 sequences": row(60.0)}, None, 16, here, 2048)  # 2.79x the fastest
    assert told and far.endswith("; by the rule for two moments (2.5×), told apart: section 5, sampler on")
    assert _elsewhere({"eager, written-out attention, in turns with the peak's matmul": row(30.0, "written-out")},
                      None, 16, here, 2048) == ("", False)  # 08's written-out step stands in the table, beside its own
    assert _elsewhere(ran08, ran09, 16, {"section 2": None}, 2048) == ("", False)  # nothing here to set it against


def test_part_in_09_quotes_09s_paired_share_where_09_timed_the_part_inside_the_whole():
    """Reader FR: 10 quoted 09's section-5 part against its own whole step (two moments, 61-104 %), where 09 had timed
    the part inside 08's whole step in the same turns (98 %, 94-99 %)."""
    from course_lib import profiles
    from course_lib.lessons.nb10_beside08 import PART_09, SHARE_09, _part_in_09
    c = profiles.sizes("09_memory", "cpu")
    gpt = GPTConfig(vocab_size=256, block_size=c.block, n_layer=c.n_layer, n_head=c.n_head, n_embd=c.n_embd)
    ran09 = {PART_09: {"value": 109.4, "unit": "ms", "spread": [108.1, 110.6], "setup": f"batch {c.batch}"},
             SHARE_09: {"value": 0.962, "unit": "×", "spread": [0.94, 0.99], "rounds": 9, "coverage": 0.96, "drift": 0.01}}
    said = _part_in_09(ran09, gpt, "cpu", c.batch, {"section 2": _t("a", 0.0931)})
    assert said == ("09 timed the whole GPT's forward + backward inside 08's whole step, in the same turns: 96% (94%–99%) "
                    "of the step's time, paired: clipping and AdamW's update take the rest")
    busy = {**ran09, SHARE_09: {**ran09[SHARE_09], "drift": 0.05}}  # the machine moved more than the 3.8 % gap
    assert _part_in_09(busy, gpt, "cpu", c.batch, {"section 2": _t("a", 0.0931)}).endswith(
        "paired: the part not told from the whole (inconclusive): clipping and AdamW take less than these turns resolve")


def test_each_sdpa_row_beside_08_is_also_read_with_each_sets_pace_taken_out():
    """Readers FT, FU: run110 printed 'eager SDPA ... 20.6 | 12.1 | 0.59x', 'not told apart' by the 2.5x rule, where
    section 2's probe read 24.2 ms against 08's 14.41 ms: paced, 0.99x. The rule for two moments cannot fail at these
    sizes; the paced reading can."""
    from course_lib.lessons.nb10_paced import paced_rows, paced_vs_row
    here = bench.timing_of([2048 / 12.1e3] * 5, name="no logging", device="cpu", work=2048, unit="tok/s")
    probe = _t(bench.PROBE, 0.0242)
    row = {"value": 20.6, "unit": "ktok/s", "spread": [20.4, 20.6]}
    vs = paced_vs_row(here, probe, row, {"value": 14.41, "unit": "ms", "spread": [13.69, 16.23]})
    assert vs[0] == pytest.approx(12.1 * 24.2 / (20.6 * 14.41)) and vs[1] < vs[0] < vs[2]  # 0.986x
    assert paced_vs_row(here, None, row, {"value": 14.41, "unit": "ms"}) is None  # no probe here
    assert paced_vs_row(here, probe, row, None) is None  # none in 08's turns
    agree = paced_rows({"before its compile": (0.99, 0.95, 1.04), "after it": (0.94, 0.93, 0.96)})
    assert agree == ("within 1.1× at the medians and where the spreads lie furthest apart: the notebooks agree once "
                     "the pace is out")
    apart = paced_rows({"before its compile": (0.99, 0.95, 1.04), "compiled SDPA": (0.78, 0.74, 0.82)})
    assert apart == ("beyond 1.1× for compiled SDPA: a gap the probe does not take away, so not the machine's "
                     "pace as the probe reads it")
    assert paced_rows({"after it": (0.94, 0.85, 1.02)}).endswith("inconclusive")  # a far end past 1.1x
    assert paced_rows({}) == ""


def test_the_sets_that_did_not_resolve_a_gain_are_grouped_by_what_they_read():
    from course_lib.lessons.nb10_answer import _unresolved
    gain = Ratio("c", 1.11, 1.03, 1.17, rounds=5, coverage=0.94, drift=0.01)
    wide = Ratio("w", 1.04, 0.97, 1.21, rounds=9, coverage=0.96, drift=0.05)
    flat = Ratio("f", 1.00, 0.98, 1.02, rounds=9, coverage=0.96, drift=0.01)
    assert _unresolved([("section 3's", wide), ("section 3b's", wide), ("notebook 08's", gain)]) == (
        "section 3's and section 3b's could not tell")  # run115: not 'could not tell and … could not tell'
    assert _unresolved([("section 3's", wide), ("section 3b's", flat)]) == (
        "section 3's could not tell; section 3b's read no measurable difference")


def test_the_answer_says_how_far_the_plain_eager_step_moved_between_sets_of_turns():
    gain = Ratio("c", 1.09, 1.06, 1.12, rounds=9, coverage=0.96, drift=0.01)
    moved = nb10.answer({"compute": 0.9, "framework": 0.1}, "cpu", {nb10.COMPILING: gain}, None, "", None,
                        eager_ms=[132.0, 120.0, 106.0, 94.1])  # reader FZ: run115's 10
    assert ("    (the plain eager step itself read 94–132 ms across this notebook's sets of turns, 1.40× apart: each fix "
            "is judged by its paired ratio, in its own turns") in moved.short
    still = nb10.answer({"compute": 0.9, "framework": 0.1}, "cpu", {nb10.COMPILING: gain}, None, "", None,
                        eager_ms=[100.0, 105.0])
    assert "the plain eager step itself" not in still  # within 1.1x: nothing to say


def test_the_answer_carries_08s_caveat_where_its_eager_control_slowed_after_its_compile():
    flat = Ratio("c", 1.04, 0.97, 1.21, rounds=9, coverage=0.96, drift=0.05)
    ran08 = {"compiled vs eager, SDPA": {"value": 1.11, "unit": "×", "spread": [1.03, 1.17], "rounds": 5,
                                         "coverage": 0.94, "drift": 0.02},
             "eager, SDPA": {"value": 20.2, "unit": "ktok/s"}, "eager, SDPA (beside the compiled)": {
                 "value": 18.0, "unit": "ktok/s"}, "compiled, SDPA": {"value": 20.4, "unit": "ktok/s"}}  # run115's 08
    said = nb10.answer({"compute": 0.9, "framework": 0.1}, "cpu", {nb10.COMPILING: flat}, None, "", None, ran08)
    assert ("notebook 08 (2 micro-batches): 1.11× (1.03–1.17) faster; its eager control read 1.12× its time before the "
            "compile, and against that earlier reading the compiled step ran at 1.01× its speed (two moments)") in said
    assert "compiling is not counted" not in said.short  # reader FZ: 08's gain is not counted as one here
    held = {**ran08, "eager, SDPA (beside the compiled)": {"value": 19.8, "unit": "ktok/s"}}  # moved 1.02x: no caveat
    assert "its eager control read" not in nb10.answer({"compute": 0.9, "framework": 0.1}, "cpu",
                                                       {nb10.COMPILING: flat}, None, "", None, held)


def test_unresolved_sets_name_a_gain_its_own_notebook_calls_not_established():
    from course_lib.lessons.nb10_answer import _unresolved
    gain = Ratio("c", 1.11, 1.03, 1.17, rounds=5, coverage=0.94, drift=0.01)
    wide = Ratio("w", 1.04, 0.97, 1.21, rounds=9, coverage=0.96, drift=0.05)
    assert _unresolved([("section 3's", wide), ("notebook 08's", gain)], refuted={"notebook 08's"}) == (
        "section 3's could not tell; notebook 08's gain is not established (its eager control slowed as much)")


def test_paced_table_sets_raw_and_paced_ratios_side_by_side_with_one_verdict_a_group():
    from course_lib.lessons.nb10_paced import paced_table
    assert paced_table(None, {}) == ""
    said = paced_table(("08's step (08's section 5, 09's turns and section 3 here)", 1.22, 1.22, "inconclusive"),
                       {"eager SDPA before its compile": (0.77, (0.86, 0.80, 0.93)),
                        "compiled SDPA": (1.17, (0.98, 0.90, 1.05))}).splitlines()
    assert said[2].split() == ["08's", "step", "(08's", "section", "5,", "09's", "turns", "and", "section", "3", "here)",
                               "1.22×", "apart", "1.22×", "apart"]
    assert said[3].split()[-2:] == ["0.77×", "0.86×"] and said[4].split()[-2:] == ["1.17×", "0.98×"]  # raw, then paced
    assert said[5] == "  08's step: inconclusive"
    assert said[6].startswith("  the SDPA rows, paced: ")


def test_10_quotes_08s_slower_ratio_by_the_inverse_08_printed():
    from course_lib.lessons.nb10_answer import _recorded
    row = {"value": 0.7119, "unit": "×", "spread": [0.66, 0.79], "rounds": 5, "coverage": 0.94, "drift": 0.03}
    assert f"{_recorded(row, inverse=True).value:.2f}" == "1.41"  # 08: '0.71× (0.66–0.79): 1.41× slower' (GH, GI: 1.40)
