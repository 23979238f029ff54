"""course_lib.lessons.nb08: notebook 08's exercise and claim checks accept the answer and refuse wrong ones;
the words it prints around its measurements follow their numbers."""

import math

import pytest
import torch

from course_lib import report
from course_lib.bench import Ratio
from course_lib.lessons import nb08

pytestmark = pytest.mark.versioned  # the GPT under AMP and torch.compile: make test-oldest runs it


def test_gpt_forward_flops_exercise_accepts_the_formula_and_refuses_training_and_2n_alone(capsys):
    nb08.check_gpt_forward_flops_per_token(lambda n, layers, t, c: 2 * n + 4 * layers * t * c)
    assert "✓" in capsys.readouterr().out
    with pytest.raises(AssertionError):
        nb08.check_gpt_forward_flops_per_token(lambda n, layers, t, c: 2 * n)  # attention's FLOPs left out
    with pytest.raises(AssertionError, match="a third"):  # the training count, printed earlier in 08
        nb08.check_gpt_forward_flops_per_token(lambda n, layers, t, c: 6 * n + 12 * layers * t * c)


def test_gpt_forward_flops_exercise_leaves_the_global_rng_alone():
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    nb08.check_gpt_forward_flops_per_token(lambda n, layers, t, c: 2 * n + 4 * layers * t * c)
    assert torch.equal(torch.rand(3), expected)


def test_accum_steps_exercise():
    import math

    nb08.check_accum_steps(lambda target, micro, t, world: math.ceil(target / (micro * t * world)))
    with pytest.raises(AssertionError):
        nb08.check_accum_steps(lambda target, micro, t, world: target // (micro * t * world))  # rounds down
    with pytest.raises(AssertionError):
        nb08.check_accum_steps(lambda target, micro, t, world: math.ceil(target / (micro * t)))  # one GPU


def _paired(value, medians, drift=0.03):
    from course_lib.bench import Ratio
    return Ratio("compiled vs eager", value, 0.89, 1.15, rounds=5, coverage=0.94, drift=drift, medians=medians)


def test_paired_vs_medians_explains_a_disagreement_and_stays_silent_otherwise():
    said = nb08.paired_vs_medians(_paired(1.08, 0.94))
    assert "1.08×" in said and "0.94×" in said and "points the other way" in said and "3%" in said
    assert "1.10×, differs:" in nb08.paired_vs_medians(_paired(1.30, 1.10))  # both above 1, far apart
    assert nb08.paired_vs_medians(_paired(1.08, 1.06)) == ""  # within 5 %: nothing to explain
    from course_lib.bench import Ratio
    assert nb08.paired_vs_medians(Ratio("apart", 1.2, 1.1, 1.3)) == ""  # measured apart: no medians' ratio


def _in_turns(value, lo, hi, name="r"):
    return Ratio(name, value, lo, hi, "higher", "lower", rounds=5, coverage=0.94, drift=0.01)


BUSY = {"1 sequence": 95.0, "16 sequences": 97.0}
MFU = {"1 sequence": 0.004, "16 sequences": 0.05}


def test_busy_ratio_pairs_turn_by_turn():
    r = nb08.busy_ratio({"a": [50, 100, 80], "b": [100, 100, 40]}, "a", "b")
    assert (r.value, r.lo, r.hi, r.rounds) == (1.0, 0.5, 2.0, 3)
    saturated = nb08.busy_ratio({"a": [99.9, 99.9, 99.8, 99.9, 99.9], "b": [100.0] * 5}, "a", "b")
    assert saturated.grade == "negligible"  # 0.1 % higher in every turn: not a difference in the work


@pytest.mark.parametrize("gain, busy, says", [
    (_in_turns(12.0, 10.0, 14.0), _in_turns(1.02, 0.98, 1.05), "did not move beyond its spread"),
    (_in_turns(12.0, 10.0, 14.0), _in_turns(1.5, 1.3, 1.7), "rose 1.50×"),
    (_in_turns(12.0, 10.0, 14.0), _in_turns(0.8, 0.7, 0.9), "fell"),
    (_in_turns(1.4, 1.3, 1.5), _in_turns(1.4, 1.2, 1.6), "rose about as much as MFU"),
    (_in_turns(1.02, 0.95, 1.1), _in_turns(1.0, 0.9, 1.1), "not told apart"),
    (_in_turns(0.5, 0.45, 0.55), _in_turns(1.0, 0.9, 1.1), "2.00× lower than the small one's"),
])
def test_busy_verdict_follows_the_two_paired_ratios(gain, busy, says):
    text = nb08.busy_verdict(gain, busy, "1 sequence", "16 sequences", BUSY, MFU)
    assert text.startswith("verdict:") and says in text
    assert "95 %" in text and "0.40%" in text  # the medians printed above it, as printed
    contrast = says in ("did not move beyond its spread", "rose 1.50×", "fell")
    assert ("not how much of its peak" in text) == contrast
    assert ("one clip + AdamW step per micro-batch" in text) == contrast  # the MFU ratio names the optimizer's share


@pytest.mark.parametrize("gain, busy, short", [
    (_in_turns(12.0, 10.0, 14.0), _in_turns(1.02, 0.98, 1.05), True),  # MFU moved, the reading did not: one line
    (_in_turns(12.0, 10.0, 14.0), _in_turns(1.5, 1.3, 1.7), True),  # the reading moved, less than MFU
    (_in_turns(1.4, 1.3, 1.5), _in_turns(1.4, 1.2, 1.6), False),  # as much as MFU: the verdict's own words
    (_in_turns(1.02, 0.95, 1.1), _in_turns(1.0, 0.9, 1.1), False),
])
def test_busy_short_gives_the_two_mfus_and_readings_where_mfu_moved_more(gain, busy, short):
    said = nb08.busy_short(gain, busy, "1 sequence", "16 sequences", BUSY, MFU)
    full = nb08.busy_verdict(gain, busy, "1 sequence", "16 sequences", BUSY, MFU)
    if short:
        assert said.startswith("with 16 sequences a micro-batch instead of 1 sequence, MFU 0.4% → 5.0% (the medians; "
                               f"paired in turns, {gain.numbers} higher)\nwhile the utilisation reading ")
        assert said.endswith("(95 % → 97 %): busy is not efficient") and len(said) < len(full)
        assert nb08.busy_short(gain, busy, "1 sequence", "16 sequences", BUSY, MFU, cpu=True).endswith(
            "(95.0 % → 97.0 %): on a CPU a core running torch's ops counts as busy whatever their size, so only MFU "
            "could move here (a GPU's contrast: under 'What GPUs measured')")  # reader FO; reader GA: what was read
    else:
        assert said == full.removeprefix("verdict: ")


def test_busy_short_calls_a_reading_moved_under_a_point_steady():
    steady = nb08.busy_short(_in_turns(12.0, 10.0, 14.0), _in_turns(1.003, 1.001, 1.005), "1 sequence", "16 sequences",
                             {"1 sequence": 99.6, "16 sequences": 99.9}, MFU)
    assert "the utilisation reading stayed within a point (100 % → 100 %)" in steady  # beyond its spread, not to the eye


def test_busy_verdict_calls_a_change_under_a_point_steady():
    text = nb08.busy_verdict(_in_turns(4.0, 3.5, 4.3), _in_turns(0.9995, 0.999, 0.9998), "1 sequence",
                             "16 sequences", {"1 sequence": 99.2, "16 sequences": 99.1}, MFU)
    assert "stayed at about 99 %" in text and "fell" not in text


# ---- the words around the measurements: each function's sentence follows its numbers

def _timing(name, median_s, q1_s, q3_s, work=None, unit="", runs=5):
    from course_lib.bench import Timing
    return Timing(name, "cpu (2 threads)", median_s, q3_s - q1_s, runs, work, unit, q1_s, q3_s)


def test_precision_lines_say_why_autocast_falls_back():
    bf16 = nb08.precision_lines("bf16", torch.bfloat16, True, "NVIDIA H100", "cuda")
    assert bf16 == "autocast: torch.bfloat16 | GradScaler: False | fused AdamW: True"
    fp16 = nb08.precision_lines("fp16", torch.float16, True, "Tesla T4", "cuda").splitlines()
    assert fp16[0].startswith("Tesla T4 has no bf16 tensor cores") and fp16[1].endswith("GradScaler: True | fused AdamW: True")
    off = nb08.precision_lines("off", torch.bfloat16, False, "cpu", "cpu").splitlines()
    assert "without bf16 instructions" in off[0] and off[1].startswith("autocast: off")


def test_corpus_windows_and_baseline_lines_carry_their_numbers():
    from types import SimpleNamespace
    ids = lambda text: torch.tensor(list(text.encode()))  # noqa: E731  one token per byte
    tok = SimpleNamespace(decode=lambda t: bytes(t.tolist()).decode())
    corpus = SimpleNamespace(train=ids("def f(x):\n    return x\n" * 20), val=ids("pass\n" * 10), tokenizer=tok,
                             describe=lambda: "tiny: 1 file train, 1 file val, byte tokens")
    lines = nb08.corpus_lines(corpus, head=9).splitlines()
    assert lines[0] == "tiny: 1 file train, 1 file val, byte tokens" and lines[1] == "train: 460 tokens | val: 50 tokens"
    assert lines[2] == "the first 9 bytes of the training text:" and lines[3] == "def f(x):"
    x = torch.zeros(1000, 64, dtype=torch.long)
    assert nb08.windows_line(x, 12, 64) == ("train: 1,000 windows of 64 tokens, x (1000, 64) torch.int64 | "
                                            "validation: 12 windows (768 tokens)")
    line = nb08.baseline_line(256, 2 * math.log(2))  # 2 bits per byte
    assert "uniform over 256 bytes: 5.545 nats/token" in line and "(2.00 bits per byte)" in line


def test_sources_leave_out_docstrings_only():
    def plain(x):
        return x + 1

    def documented(x):
        """Adds two."""
        return x + 2

    text = nb08.sources(plain, documented)
    assert "def plain(x):" in text and "return x + 1" in text and "return x + 2" in text
    assert "Adds two" not in text and "def documented(x):" in text  # the signature stays
    assert "# test_sources_leave_out_docstrings_only.<locals>.plain\n" in text  # each under its name


def test_param_count_and_flops_terms():
    from course_lib.models import GPT, GPTConfig
    with torch.device("meta"):
        gpt = GPT(GPTConfig(vocab_size=256, block_size=32, n_layer=2, n_head=2, n_embd=32))
    line = nb08.param_count(gpt)
    assert line.startswith(f"{gpt.num_params():,} parameters") and f"({gpt.num_params(non_embedding=False):,} in all)" in line
    assert nb08.flops_terms(600, 200, 800) == "6N = 600 + 12·L·T·C = 200 -> 800 FLOPs per token (attention's share: 25%)"


def test_steps_line_says_when_a_pass_ends_in_a_short_step():
    whole = nb08.steps_line(micro=4, accum=2, block=64, steps=10, loader_len=8)  # 8 % 2 == 0
    assert whole == ("2 micro-batches of 4 × 64 tokens per step: 512 tokens per step; 10 steps take 2.50 passes "
                     "over the training text")
    short = nb08.steps_line(micro=4, accum=3, block=64, steps=10, loader_len=8).splitlines()
    assert len(short) == 2 and "its last step has 2" in short[1]
    assert len(nb08.steps_line(micro=4, accum=3, block=64, steps=2, loader_len=8).splitlines()) == 1  # one pass


def test_verdict_text_adds_the_medians_line_only_where_they_differ():
    agree = _paired(1.08, 1.07)
    assert nb08.verdict_text(agree, "compiling", "cpu") == agree.verdict("compiling", on="cpu")
    apart = _paired(1.08, 0.94)
    lines = nb08.verdict_text(apart, "compiling", "cpu").splitlines()
    assert lines == [apart.verdict("compiling", on="cpu"), nb08.paired_vs_medians(apart)]


def test_break_even_text_only_for_a_clear_gain():
    eager = _timing("eager", 0.1, 0.09, 0.11)
    assert nb08.break_even_text(_in_turns(1.02, 0.95, 1.1), 30.0, eager, 4096).startswith("no gain")
    text = nb08.break_even_text(_in_turns(2.0, 1.8, 2.2), 30.0, eager, 4096)
    assert "30.0 s" in text and "600 steps of 4,096 tokens" in text  # 30 s / (0.1 s × (1 − 1/2))
    assert "if the gain holds" not in text
    withdrawn = nb08.break_even_text(_in_turns(2.0, 1.8, 2.2), 30.0, eager, 4096, established=False)
    assert "no break-even to state" in withdrawn and "steps of" not in withdrawn  # reader GG: the appendix kept it
    assert withdrawn.startswith(f"the gain is {nb08.NOT_ESTABLISHED}")
    assert "if the gain holds (unconfirmed" in nb08.break_even_text(_in_turns(1.15, 1.05, 1.2), 30.0, eager, 4096)


def test_fastest_line_names_the_ties():
    a = _timing("a", 0.10, 0.099, 0.101, work=100, unit="tok/s")
    b = _timing("b", 0.101, 0.0995, 0.102, work=100, unit="tok/s")  # overlaps a
    c = _timing("c", 0.5, 0.49, 0.51, work=100, unit="tok/s")
    assert nb08.fastest_line([c, b, a]) == ("fastest median of this section so far: a (not told apart from b, timed "
                                            "in other turns, 1.01× apart: under the 2.5× two moments can differ "
                                            "by)")  # a and b were not timed in turns
    assert nb08.fastest_line([c, a]) == "fastest median of this section so far: a"
    from course_lib import bench  # section 4 times its versions in turns: paired
    won = bench.timing_of([0.150, 0.151, 0.149, 0.152, 0.150], name="a", device="cpu", work=100, unit="tok/s",
                          turns_id="s4")
    comp = bench.timing_of([0.186, 0.185, 0.189, 0.187, 0.186], name="compiled, SDPA", device="cpu", work=100,
                           unit="tok/s", turns_id="s4")  # slower than the eager winner in every turn
    said = nb08.fastest_line([comp, won])
    assert said.startswith("fastest median of this section so far: a. compiled, SDPA ran slower than a, beyond the "
                           "spread: compiling did not "
                           "make up for the slower attention (two changes at once")
    assert "never pays back" not in said and "compiled" not in nb08.fastest_line([a, b])
    chained = nb08.fastest_line([c, b, a], {"a": 1.41, "b": 1.07, "c": 0.5}, "eager SDPA")  # b timed in other turns
    assert chained == ("fastest median of this section so far: a; the paired ratios over eager SDPA, each in its own "
                       "turns (1.41× and 1.07×), put a ahead of b by about 1.32× (an inference across two sets of turns, "
                       "not a measurement)")  # the paired inference, not the two-moments rule's weaker word
    reversed_ = nb08.fastest_line([c, b, a], {"a": 1.07, "b": 1.26, "c": 0.5}, "eager SDPA")  # b's paired gain is larger
    assert "put b ahead of a by about 1.18× (an inference across two sets of turns, not a measurement; the medians alone " \
        "put them the other way)" in reversed_ and "by about 0.85×" not in reversed_
    assert nb08.fastest_line([comp, won], {"a": 1.4, "compiled, SDPA": 1.1}, "x") == said  # paired: told apart already


def test_break_even_before_reads_the_eager_step_timed_before_the_compile():
    before, compiled = _timing("eager, SDPA", 0.185, 0.18, 0.19), _timing("compiled", 0.208, 0.2, 0.21)
    assert nb08.break_even_before(22.0, before, compiled, 4096) == (
        "against eager, SDPA timed before the compile (185 ms), the compiled step (208 ms) ran at 0.89× its speed, at two "
        "moments: under 2.5× apart, so no break-even can be reckoned from that reading")
    faster = _timing("compiled", 0.175, 0.17, 0.18)  # 1.06×: two moments cannot tell it from no change
    assert nb08.break_even_before(22.0, before, faster, 4096).endswith("no break-even can be reckoned from that reading")
    far = _timing("compiled", 0.05, 0.049, 0.051)  # 3.7×: told apart by the rule
    slow_before = _timing("eager, SDPA", 1.45, 1.44, 2.39)  # run91: one set of turns read the step 7x slow
    assert nb08.break_even_before(25.0, slow_before, _timing("compiled", 0.178, 0.177, 0.179), 4096,
                                  again=_timing("eager", 0.188, 0.186, 0.19)).endswith(
        "; but the eager step itself read 7.71× apart at those two moments, so that earlier reading is no base for a "
        "break-even")
    assert nb08.break_even_before(22.0, before, far, 4096).endswith(
        "told apart by the rule: the compilation pays for itself after about 160 steps of 4,096 tokens")


def test_kernel_verdict_blames_the_16_bit_kernel_only_when_float32_does_not_lose():
    slower, faster, same = _in_turns(0.5, 0.45, 0.55), _in_turns(1.5, 1.4, 1.6), _in_turns(1.0, 0.9, 1.1)
    assert "attention alone, SDPA's torch.bfloat16 kernel is the slower one" in nb08.kernel_verdict(slower, faster, torch.bfloat16, "cpu")
    assert "not slower than" in nb08.kernel_verdict(slower, same, torch.bfloat16, "cpu")
    assert "not explained by one kernel" in nb08.kernel_verdict(slower, slower, torch.bfloat16, "cpu")
    assert "not explained by one kernel" in nb08.kernel_verdict(slower, slower, None, "cpu")  # float32 only


def test_mfu_text_without_a_step_and_without_a_datasheet_entry():
    peak = _timing("matmul peak, bf16", 0.01, 0.0099, 0.0101, work=1e10, unit="FLOP/s")
    best = _timing("eager, SDPA", 0.1, 0.09, 0.11, work=4096, unit="tok/s")
    cpu = nb08.mfu_text(peak, "measured now", best, 1000, [0.041, 0.037, 0.045], None, None, None, "bf16",
                        torch.device("cpu"), "cpu").splitlines()
    assert cpu[0] == "matmul peak, bf16: 1.00 TFLOP/s on cpu, measured now"
    assert cpu[2].startswith("MFU: 4.1% of the measured peak (the step's quartiles: 3.7%–4.5%; with the peak's too, "
                             "3.7%–4.5%)") and "notebook 10" in cpu[2] and cpu[3].startswith("A CPU has no entry")
    wide = _timing("matmul peak, bf16", 0.01, 0.008, 0.0125, work=1e10, unit="FLOP/s")  # the peak's spread widens it
    assert "with the peak's too, 3.0%–5.6%" in nb08.mfu_text(wide, "", best, 1000, [0.041, 0.037, 0.045], None, None,
                                                            None, "bf16", torch.device("cpu"), "cpu")
    none = nb08.mfu_text(peak, "", None, 1000, None, None, None, None, "bf16", torch.device("cuda"), "GPU")
    assert "no MFU from that section" in none and "This GPU is not in the course's datasheet table" in none
    from course_lib import datasheet
    h100 = datasheet.lookup("H100 SXM5")
    sheet = nb08.mfu_text(peak, "", best, 1000, [0.4, 0.3, 0.5], h100, 989.0, 0.12, "bf16", torch.device("cuda"), "H100")
    assert "dense bf16: 989 TFLOP/s, not a measurement): 12.0%" in sheet
    missing = nb08.mfu_text(peak, "", best, 1000, [0.4, 0.3, 0.5], h100, None, None, "fp8", torch.device("cuda"), "H100")
    assert "no dense fp8 figure" in missing


def test_published_and_reference_texts_are_labelled():
    said = nb08.published_mfu("0.84 M parameters, T = 128, fp32, 4,096 tokens per step")
    assert said.startswith("\nFor comparison, and not the same setup as this run (0.84 M parameters, T = 128, fp32")
    assert "the gpu profile's large GPT (8 layers, width 512, T = 512, bf16, 65,536 tokens per step" in said
    assert "not against its measured peak" in said and "so on a GPU more of each step is overhead" not in said
    if (peak := nb08.reference_peak_text()) and "two H200 machines" in peak:  # the figures it quotes are the log's
        log = (report.results_dir() / "nvidia-h200.test-gpu.md").read_text(encoding="utf-8")
        assert "at 799.6 and 462.9 ktok/s, 1.73× apart, cause not found: the MFU row (fastest step, measured peak) " \
            "read 24.0 % on the faster machine and 13.4 % on the slower, which this record comes from" in peak
        assert "eager SDPA at 82 ms per step (799.6 ktok/s)" in log and "142 ms (462.9 ktok/s)" in log
        assert "The cause is not" in log and 799.6 / 462.9 == pytest.approx(1.73, abs=0.005)
        assert "MFU against the measured peak 24.0 % vs 13.4 %" in log
    assert "A finer reading than GPU-Util" in nb08.utilisation_elsewhere()


def test_busy_line_gives_mfu_and_the_readings_range():
    t = _timing("step, micro-batch of 1 sequence", 0.01, 0.009, 0.011, work=128, unit="tok/s")
    line = nb08.busy_line(t, [0.0123, 0.011, 0.013], [90.0, 95.0, 99.0])
    assert line.startswith(str(t)) and "MFU 1.23% (1.10%–1.30%)" in line and "busy 95 % (turns: 90–99 %)" in line


def test_variant_and_long_attention():
    assert nb08.variant(False, True) == "eager, SDPA" and nb08.variant(True, False) == "compiled, SDPA"
    assert nb08.variant(False, False) == "eager, written-out attention"
    assert "fit_compile" in nb08.long_attention(False, True)
    assert "did not find the written-out attention faster" in nb08.long_attention(True, False)
    assert "written out: section 4 found it faster" in nb08.long_attention(False, False)
    assert nb08.long_attention(False, False, 240, 5400.0).endswith(
        "(its fit_compile is off): its 240 steps are fewer than the 5,400 after which section 4's compile pays for itself")
    assert nb08.long_attention(False, False, 240, 100.0).endswith("(its fit_compile is off)")  # it would pay: not said
    assert nb08.long_attention(False, False, 240, float("inf")).endswith("section 4's compile showed no gain to pay for "
                                                                         "itself")


def _history(**kw):
    from course_lib.train import History
    return History(step=[1, 2, 3, 4], grad_norm=[3.0, 0.5, 1.5, 0.8], step_time_s=[0.2, 0.1, 0.1, 0.1],
                   val_step=[2, 4], data_wait_s=0.004, **kw)


def test_long_run_lines_count_the_clipped_steps():
    lines = nb08.long_run_lines(_history(), "eager, SDPA", (0.09, 0.1, 0.11), 1, 1000, [0.05, 0.04, 0.06],
                                1.0, "cpu").splitlines()
    assert lines[0].startswith("eager, SDPA, 4 steps: 100.0 ms per step, median after step 1 (quartiles 90.0–110.0 ms")
    assert "MFU 5.0% of the measured peak | cpu" in lines[1]
    assert lines[2] == "gradient norm above 1.0 before clipping: 2 of 4 steps (largest 3.00, last 0.80)"


@pytest.mark.parametrize("vs, long_s, says", [
    (_in_turns(0.5, 0.45, 0.55), 0.2, "longer, beyond both spreads; the data wait accounts for 1% of it"),
    (_in_turns(2.0, 1.8, 2.2), 0.05, "ms shorter, beyond both spreads"),
    (_in_turns(1.0, 0.9, 1.1), 0.1, "two moments apart, inconclusive: what moved them is not measured here"),
])
def test_long_vs_section4_grades_the_difference(vs, long_s, says):
    from course_lib.train import TrainConfig
    run = TrainConfig(accum_steps=4, log_every=5, device="cpu")
    text = nb08.long_vs_section4(vs, _history(), _timing("long", long_s, long_s, long_s), _timing("s4", 0.1, 0.1, 0.1),
                                 run).splitlines()
    assert text[0] == str(vs) and "fetches 4 fresh shuffled micro-batches (1.00 ms per step" in text[1]
    assert "syncs once per 5 steps" in text[1] and "(this run saves no checkpoint)" in text[1]
    assert text[2].startswith("verdict:") and says in text[2] and "sampler" not in text[1]
    sampled = nb08.long_vs_section4(vs, _history(), _timing("long", long_s, long_s, long_s), _timing("s4", 0.1, 0.1, 0.1),
                                    run, sampled=True).splitlines()
    assert "a sampler thread reads utilisation every 0.5 s" in sampled[1]
    found, said = nb08.long_vs_section4(vs, _history(), _timing("long", long_s, long_s, long_s),
                                        _timing("s4", 0.1, 0.1, 0.1), run, split=True)  # the verdict apart, for in short
    assert found == [text[2]] and said == text[:2]
    long_t = _timing("long", long_s, long_s * 0.98, long_s * 1.02, work=1000, unit="tok/s")
    five = nb08.long_vs_section4(vs, _history(), long_t, _timing("s4", 0.1, 0.1, 0.1), run,
                                 later=_timing("s5", long_s, long_s * 0.99, long_s * 1.01, work=1000, unit="tok/s"))
    assert five.splitlines()[-1] == ("section 5 read the same step again (no sampler, another moment): the long run's rate "
                                     "is 1.00× (0.97–1.03) of that reading, within their quartiles, at two moments: what "
                                     "the loop's extra work costs is not measured apart (only timing the two steps in "
                                     "turns would)")  # a match at two moments is no evidence of no cost


@pytest.mark.parametrize("final, says", [(1.5, "beats the unigram baseline by 0.500"), (2.005, "level with"),
                                         (2.5, "0.500 nats/token above")])
def test_val_vs_baseline_reads_the_margin(final, says):
    text = nb08.val_vs_baseline(final, 2.0, 100, 12_800)
    assert text.startswith(f"validation loss after 100 steps (12,800 tokens trained on): {final:.3f}") and says in text


def test_check_beats_baseline_and_check_resumed_raise_one_sentence(capsys):
    nb08.check_beats_baseline(1.5, 2.0)
    nb08.check_resumed(0.0, 1e-7)
    out = capsys.readouterr().out
    assert out.count("✓") == 2 and "bit for bit" in out
    with pytest.raises(AssertionError, match="training is broken"):
        nb08.check_beats_baseline(1.995, 2.0)
    with pytest.raises(AssertionError, match="differs more than two straight runs"):
        nb08.check_resumed(2e-6, 1e-7)
    nb08.check_resumed(1e-8, 1e-7)
    assert "within the run-to-run noise" in capsys.readouterr().out


def test_check_same_groups_compares_the_tensors_not_their_counts(capsys):
    a, b, c = (torch.nn.Parameter(torch.zeros(2)) for _ in range(3))
    mine = [{"params": [a, b], "weight_decay": 0.1}, {"params": [c], "weight_decay": 0.0}]
    nb08.check_same_groups("groups", mine, [{"params": [b, a], "weight_decay": 0.1}, {"params": [c], "weight_decay": 0.0}])
    assert "[(2, 0.1), (1, 0.0)] ✓" in capsys.readouterr().out
    swapped = [{"params": [a, c], "weight_decay": 0.1}, {"params": [b], "weight_decay": 0.0}]  # same counts
    with pytest.raises(AssertionError, match="other tensors"):
        nb08.check_same_groups("groups", mine, swapped)


def test_checkpoint_contents_names_what_the_file_holds(tmp_path):
    path = tmp_path / "gpt.pt"
    path.write_bytes(b"x" * 2048)
    state = {"model": {}, "optimizer": {}, "step": 3, "epoch": 0, "batch": 6,
             "rng": {"torch": None, "python": None, "cuda": []}}
    lines = nb08.checkpoint_contents(path, state).splitlines()
    assert lines[0] == "gpt.pt, 2.0 KiB, holds: model, optimizer, step, epoch, batch, rng"
    assert lines[1] == "  saved after step 3 (epoch 0, micro-batch 6); random generators: torch, python (cuda: none on this machine)"


def test_big_run_text_gives_the_datasheet_floor_unless_this_is_that_run():
    from types import SimpleNamespace
    big = SimpleNamespace(why="80 GB class", n_layer=12, n_embd=768, block=1024, steps=100)
    that = nb08.big_run_text(big, 85_000_000, 524_288, 5e14, this_run=True, device_label="H100")
    assert that.endswith("This run is that run, on H100.") and "85.0 M parameters, 524,288 tokens per step" in that
    other = nb08.big_run_text(big, 85_000_000, 524_288, 5e14, this_run=False, device_label="cpu")
    from course_lib import datasheet
    floor_ms = 5e14 / (datasheet.peak_tflops(datasheet.lookup("H100 SXM5"), "bf16") * 1e12) * 1e3
    assert f"{floor_ms:.1f} ms per step" in other and "not measurements" in other
    assert "whole 8-GPU nodes training models of about 125 M parameters, against these sizes' 85.0 M" in other


def test_paired_mfu_text_names_the_turns_and_the_moment():
    from course_lib import bench
    import dataclasses
    step = bench.timing_of([0.10, 0.11, 0.10, 0.12, 0.10], name="eager, SDPA", device="cpu", work=1000, unit="tok/s")
    mm = bench.timing_of([0.01, 0.011, 0.01, 0.012, 0.01], name="peak's matmul", device="cpu")
    step, mm = (dataclasses.replace(t, turns_id=7) for t in (step, mm))  # timed in the same turns
    mfu = bench.rate_ratio(dataclasses.replace(step, work=1e9, unit="FLOP/s"), dataclasses.replace(mm, work=2e8, unit="FLOP/s"))
    assert mfu.rounds == 5 and abs(mfu.value - 0.5) < 1e-9  # 1e10 FLOP/s of model FLOPs over 2e10 of matmul
    held = bench.rate_ratio(dataclasses.replace(mm, work=2e8, unit="FLOP/s"),
                            bench.timing_of([0.01, 0.011, 0.01], name="peak", device="cpu", work=2e8, unit="FLOP/s"))
    text = nb08.paired_mfu_text(mfu, "eager, SDPA", "cpu", 0.45, held)
    assert text.startswith("the same check at one moment: 5 turns of the eager, SDPA step and the peak's matmul | cpu")
    assert "over the same turns' matmul: 50.0% (" in text and "over the stored peak: 45.0%" in text
    assert text.endswith("the matmul within the spreads of its stored pace (two moments: no change shown): the MFU above is "
                         "this run's reading") and len(text.splitlines()) == 4
    assert all(len(line) < 120 for line in text.splitlines())
    slow = bench.rate_ratio(dataclasses.replace(mm, work=2e8, unit="FLOP/s"),
                            bench.timing_of([0.008] * 3, name="peak", device="cpu", work=2e8, unit="FLOP/s"))
    moved = nb08.paired_mfu_text(mfu, "eager, SDPA", "cpu", 0.45, slow)
    assert "ran at 0.80× its stored pace" in moved and "stands" not in moved  # 0.010 s against a stored 0.008 s
    assert moved.endswith("the MFU above is another version's: these turns do not revise it")  # reader FS: not its range
    # the step itself ran faster in these turns than in section 4's: the MFU above does not stand either
    sec4 = bench.timing_of([0.14, 0.135, 0.15], name="eager, SDPA", device="cpu", work=1000, unit="tok/s")
    faster = bench.rate_ratio(step, sec4)  # 0.10 s here against section 4's 0.14 s: 1.4x its pace
    text = nb08.paired_mfu_text(mfu, "eager, SDPA", "cpu", 0.45, held, faster)
    assert "the matmul within the spreads of its stored pace; the step ran at 1.40× (" in text and "stands" not in text
    assert f"this process: {0.45 / faster.value:.1%}–45.0% of the stored peak, these readings' range" in text  # section 4's 32 %
    wide = bench.Ratio("step", 1.23, 0.95, 1.40, apart=True)  # the quartiles' range holds 1, the medians 23 % apart
    moved_step = nb08.paired_mfu_text(mfu, "eager, SDPA", "cpu", 0.45, held, wide)
    assert "the step ran at 1.23× (0.95–1.40) section 4's pace" in moved_step and "no change shown" not in moved_step
    assert all(len(line) < 120 for line in text.splitlines())
    same = bench.rate_ratio(step, bench.timing_of([0.10, 0.11, 0.105], name="eager, SDPA", device="cpu", work=1000,
                                                  unit="tok/s"))
    assert nb08.paired_mfu_text(mfu, "eager, SDPA", "cpu", 0.45, held, same).endswith(
        "the matmul within the spreads of its stored pace, and the step's rate within section 4's quartiles (two "
        "moments: no change shown): the MFU above is this run's reading")
    other = nb08.paired_mfu_text(mfu, "eager, SDPA", "cpu", 0.45, held, None, own=faster)  # section 4's MFU: another's
    assert "\n  the eager, SDPA step here: 1.40× (" in other and other.count("section 4's MFU is another version's") == 1
    assert "step ran at" not in other and "the MFU above is this run's reading" in other  # it does not move that MFU
    assert "within section 4's quartiles of it" in nb08.paired_mfu_text(mfu, "eager, SDPA", "cpu", 0.45, held, None,
                                                                         own=same)
    assert "the eager, SDPA step here" not in nb08.paired_mfu_text(mfu, "eager, SDPA", "cpu", 0.45, held, same, own=same)
    wide = bench.ratio_of("matmul", 1.37, 0.7, 1.9)
    assert "too wide to say whether it held" in nb08.paired_mfu_text(mfu, "eager, SDPA", "cpu", 0.45, wide)
    swung = bench.ratio_of("MFU, same turns", 0.746, 0.267, 2.148)  # the busy cpu run's: past 100 %, 8x wide
    said = nb08.paired_mfu_text(swung, "eager, SDPA", "cpu", 0.40, slow)
    assert not nb08.usable(swung) and nb08.usable(mfu) and "too wide to check the MFU above" in said
    assert "reads" not in said  # no MFU range concluded from it
    # the answer, printed after the figures, follows the same check
    best = dataclasses.replace(step, name="compiled, SDPA")
    assert nb08.mfu_answer(best, [0.377, 0.369, 0.382], mfu, 0.45, held) == (
        "answer so far: compiled, SDPA reaches 37.7% MFU (quartiles 36.9%–38.2%) of the measured peak; the peak's "
        "matmul held its stored pace in the same-turns check above, which timed another version of the step")
    same_step = bench.ratio_of("step", 1.0, 0.98, 1.02)  # the check timed this very step, which kept its pace
    assert nb08.mfu_answer(best, [0.377, 0.369, 0.382], mfu, 0.45, held, same_step).endswith(
        "; the same-turns check above agrees")
    assert nb08.mfu_answer(best, [0.377, 0.369, 0.382], mfu, 0.45, slow).endswith(  # reader FS: another version's
        "the same-turns check above timed another version of the step, so it does not check this one")  # not its range
    assert nb08.mfu_answer(best, [0.377, 0.369, 0.382], mfu, 0.45, slow, same_step).startswith(
        "answer so far: compiled, SDPA, 37.7%–45.0% MFU of the measured peak across its readings, each at one moment: in "
        f"section 4's turns (the recorded row) 37.7% (quartiles 36.9%–38.2%); in the later turns printed above, "
        f"45.0% over the stored peak ({mfu.value:.1%} over those turns' own matmul)")  # one peak for the range
    assert nb08.mfu_answer(best, [0.377, 0.369, 0.382], mfu, 0.45, held, later=True).endswith(
        "; section 6's long run reads this step again, and its answer includes that reading")
    # with the long run to come, the readings so far, and no range: section 6 answers once, with every reading
    later = nb08.mfu_answer(best, [0.377, 0.369, 0.382], mfu, 0.45, slow, same_step, later=True)
    assert later == "MFU of compiled, SDPA so far: 37.7% (section 4), 45.0% (these turns); section 6 sets every reading " \
        "of this step side by side"  # no range yet: section 6 answers once, with every reading
    assert "so this step's MFU" in nb08.paired_mfu_text(mfu, "eager, SDPA", "cpu", 0.45, slow, same_step)
    assert "so this step's MFU" not in nb08.paired_mfu_text(mfu, "eager, SDPA", "cpu", 0.45, slow, same_step, later=True)
    assert nb08.mfu_answer(best, [0.377, 0.369, 0.382], swung, 0.40, slow).endswith("was too wide to check it")  # the MFU itself
    assert nb08.mfu_answer(best, [0.377, 0.369, 0.382], mfu, 0.40, swung).endswith("the matmul's pace in its turns was too wide to tell")
    assert nb08.mfu_answer(None, None, mfu, 0.45, held) == ""
    assert nb08.mfu_span([0.377, 0.369, 0.382], mfu, 0.45, slow, same_step) == (0.45, 0.45 / same_step.value)  # readings
    assert nb08.mfu_span([0.377, 0.369, 0.382], mfu, 0.45, slow) == (0.369, 0.382)  # another version's: not this one's
    assert nb08.mfu_span([0.377, 0.369, 0.382], mfu, 0.45, held) == (0.369, 0.382)  # stands: the quartiles
    assert nb08.mfu_span([0.377, 0.369, 0.382], None, 0.45, None) == (0.369, 0.382)  # no check ran
    widened = nb08.answer_with_long_run((0.30, 0.34), [0.385, 0.321, 0.3905])
    assert widened.startswith("answer: this step's MFU across this notebook's readings of it, each at one "
                              "moment: median 32.0% of the measured peak, spanning 30.0%–34.0% (the fastest reading, "
                              "34.0%: sections 4 and 5):\n")  # reader FU: the median first, not the fastest
    assert "\n  the slower readings are the same step at other moments of this process (the appendix's " \
        "run-order table says whether the pace probe moved with them)" in widened  # 1.13x apart
    assert widened.endswith("\nthrough the training loop (train.fit: fresh batches, a progress bar, a sampler), the long "
                            "run's median: 38.5%, 1.20× the step's median (the loop's extra work and the moment are not "
                            "told apart: no pace probe in the long run)")  # reader GI: the loop apart from the step
    assert "\n  sections 4 and 5: 30.0%–34.0%\n" in widened  # medians, not a quartile's end
    more = nb08.answer_with_long_run((0.30, 0.34), [0.385, 0.321, 0.3905], {"section 4's second turns": (0.41, 0.41)},
                                     first="section 4 (its quartiles)")
    assert "(the fastest reading, 41.0%: section 4's second turns)" in more and "median 34.0%" in more and \
        "section 4 (its quartiles): 30.0%–34.0%; section 4's second turns: 41.0%\n" in more
    same = nb08.answer_with_long_run((0.30, 0.34), [0.33, 0.321, 0.3905], {"section 4's second turns": (0.3411, 0.3414)})
    assert "section 4's second turns: 34.1%" in same and same.endswith("0.97× the step's median")  # within 1.1x: no note
    fast = bench.timing_of([0.1] * 3, name="compiled, written-out attention", device="cpu", work=4096, unit="tok/s")
    assert nb08.fastest_seen(fast, [0.46, 0.45, 0.47]).startswith(
        "the highest median rate timed in this notebook: compiled, written-out attention (section 4's second turns), 41")
    wide = Ratio("c", 1.08, 0.87, 1.14, rounds=5, coverage=0.94, drift=0.02)
    assert nb08.fastest_seen(fast, [0.46, 0.45, 0.47], vs=wide).endswith(
        f"; against its eager step in the same turns, {wide.brief}")  # a higher median, not told apart (reader FK)
    assert "MFU 46.0% (quartiles 45.0%–47.0%): another version than the answer's step" in nb08.fastest_seen(
        fast, [0.46, 0.45, 0.47])


def test_reference_peak_is_derived_from_its_two_mfus(monkeypatch):
    from course_lib import report
    runs = {"08_transformer": {"MFU vs measured matmul peak": {"value": 10.0, "unit": "%"},
                               "MFU vs datasheet peak": {"value": 5.0, "unit": "%"}},
            "10_compile_and_profile": {"peak: matmul 8×8 bfloat16": {"value": 480.0, "unit": "TFLOP/s",
                                                                     "spread": [470.0, 490.0]}}}
    monkeypatch.setattr(report, "reference", lambda nb: ("NVIDIA H200", runs[nb]))
    monkeypatch.setattr(report, "reference_meta", lambda nb: {"device": "NVIDIA H100 SXM5"})
    text = nb08.reference_peak_text()  # 989.5 × 5 / 10
    assert "its two MFU rows imply it divided by 494.8 TFLOP/s" in text
    assert "The reference's 10 measured 480.0 TFLOP/s: they were recorded before the notebooks shared" in text
    assert "results/nvidia-h200.test-gpu.md" in text and text.count("\n") == 1  # two sentences, two lines
    del runs["08_transformer"]["MFU vs datasheet peak"]
    assert nb08.reference_peak_text() == ""


def test_a_step_timed_with_the_written_out_attention_never_shares_a_line_with_the_sdpa_step():
    sdpa_row = {"value": 541.0, "unit": "ktok/s", "setup": nb08.attention_setup(True)}  # the reference's step
    assert nb08.attention_setup(True) == "" and report.comparable(
        {"value": 28.5, "unit": "ktok/s", "setup": nb08.attention_setup(True)}, sdpa_row, same_profile=True)
    written = {"value": 28.5, "unit": "ktok/s", "setup": nb08.attention_setup(False)}
    assert "written-out" in written["setup"] and not report.comparable(written, sdpa_row, same_profile=True)


def test_versions_elsewhere_names_the_reference_gpt_and_stands_apart(tmp_path, monkeypatch):
    from course_lib import report
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    assert nb08.versions_elsewhere() == ""  # no reference run recorded
    rep = report.Report("08_transformer", "gpu", "cpu")
    rep.meta.update(device="NVIDIA Test GPU", device_type="cuda")
    rep.add("eager, written-out attention", 300.0, "ktok/s")
    rep.add("eager, SDPA", 450.0, "ktok/s")
    report.record_reference({"08_transformer": rep.to_dict()})
    text = nb08.versions_elsewhere()
    big = nb08.profiles.sizes("08_transformer", "gpu", memory_gib=80)
    assert text.startswith(f"The same versions on the reference GPU, with the gpu profile's GPT ({big.n_layer} layers")
    assert "another model than this run's" in text and "eager, SDPA: 450" in text
    assert "its eager SDPA over its eager written-out step: 1.50× (the ratio of the medians)\n" in text
    assert text.endswith(nb08.reference_gpts()) and "a different GPT in each of 08, 09 and 10" in nb08.reference_gpts()
    rep.add("eager, written-out attention", 300.0, "ktok/s", spread=(290.0, 310.0))
    rep.add("eager, SDPA", 450.0, "ktok/s", spread=(440.0, 460.0))
    report.record_reference({"08_transformer": rep.to_dict()})
    assert "1.50× (the ratio of the medians; 1.42–1.59× from the quartiles)" in nb08.versions_elsewhere()
    assert "two H200 machines" not in nb08.versions_elsewhere()  # a Test GPU's record: no H200 note
    rep.meta.update(device="NVIDIA H200")  # reader FY: the note stands beside the step rows, not only the MFU rows
    report.record_reference({"08_transformer": rep.to_dict()})
    assert "\n  (two H200 machines ran the eager SDPA step" in nb08.versions_elsewhere()


def _turns(name, seconds, turns_id="busy", work=100):
    from course_lib import bench
    return bench.timing_of(seconds, name=name, device="cpu", work=work, unit="tok/s", turns_id=turns_id)


def test_busy_parts_bounds_what_the_sampler_and_accumulation_change_and_names_the_moment():
    from course_lib import bench
    sampled = _turns("sampled", [0.100, 0.101, 0.099, 0.100, 0.102])
    plain = _turns("plain", [0.100, 0.100, 0.100, 0.101, 0.101])
    two = _turns("two", [0.200, 0.201, 0.199, 0.202, 0.200], work=200)  # the same rate per token
    sec4 = _turns("section 4", [0.16, 0.161, 0.162], turns_id="s4", work=200)  # faster, at another moment
    sampler, accum = bench.rate_ratio(sampled, plain, "the sampler"), bench.rate_ratio(two, plain, "accumulation")
    apart = bench.rate_ratio(two, sec4, "section 4's step here vs there")
    text = nb08.busy_parts(sampler, accum, apart, 2)
    assert text.splitlines()[1].startswith("  verdict: the sampler's thread, tokens/s with it vs without:")
    assert "2 micro-batches per optimizer step (section 4's step) vs one, tokens/s" in text
    bound = max(max(sampler.hi, 1) * max(accum.hi, 1), max(1 / sampler.lo, 1) * max(1 / accum.lo, 1)) - 1  # together,
    # one direction at a time
    assert text.splitlines()[-1].startswith(f"verdict: the sampler and accumulating 2 micro-batches change the rate by "
                                            f"{bound:.1%} at most here")
    assert "section 4's step, timed again in these turns, ran at 0.80× the pace section 4 measured (two moments): any " \
        "gap between the two " \
        f"sections' MFUs larger than {bound:.1%} is not explained by them" in text
    slow = bench.rate_ratio(_turns("sampled", [0.13, 0.131, 0.129, 0.13, 0.132]), plain, "the sampler")  # 1.3x slower
    assert nb08.busy_parts(slow, accum, apart, 2).splitlines()[-1].startswith(
        "verdict: the sampler (1.30× lower) changed the step's rate here, beyond the spread; the other parts above are "
        "not settled, and section 4's step itself moved between the two moments: so the gap")
    kept = bench.rate_ratio(two, _turns("section 4", [0.19, 0.2, 0.21], turns_id="s4", work=200))
    assert nb08.busy_parts(sampler, None, kept, 1).endswith("section 4's step kept its section-4 pace here, within the "
                                                            "spreads")
    from course_lib.bench import Ratio
    down, up = Ratio("s", 0.97, 0.76, 1.02, rounds=5, coverage=0.94), Ratio("a", 1.0, 0.99, 1.08, rounds=5, coverage=0.94)
    said = nb08.busy_parts(down, up, None, 2).splitlines()[-1]  # a slow end and a fast end do not add (reader GI)
    assert f"{1 / 0.76 / 0.99 - 1:.1%}" in said and f"{1.08 / 0.76 - 1:.1%}" not in said, said
    wide = bench.rate_ratio(_turns("sampled", [0.07, 0.13, 0.1, 0.08, 0.12]), plain, "the sampler")
    assert "too noisy to tell: the sampler or accumulating 2 micro-batches could change the rate by as much as" in (
        nb08.busy_parts(wide, accum, apart, 2))
    mid = bench.rate_ratio(_turns("sampled", [0.088, 0.112, 0.1, 0.092, 0.108]), plain, "the sampler")  # up to ~15 %
    far = bench.rate_ratio(two, _turns("section 4", [0.13, 0.131, 0.132], turns_id="s4", work=200))  # 0.66x its pace
    assert nb08.busy_parts(mid, accum, far, 2).splitlines()[-1].endswith(
        "read 0.66× the pace section 4 measured (two moments, so no verdict on that move): the same step running at "
        "another pace here sets these MFUs apart from section 4's more than the two parts can; what moved its pace is "
        "not measured")  # reader FM: the parts and the move multiply to the gap; only the move's cause is unmeasured


def test_attention_sum_multiplies_one_layer_by_the_layers_and_micro_batches():
    written, sdpa = _timing("w", 0.005, 0.005, 0.005), _timing("s", 0.012, 0.012, 0.012)
    text = nb08.attention_sum(written, sdpa, 4, 2, _timing("step w", 0.147, 0.147, 0.147),
                              _timing("step s", 0.198, 0.198, 0.198))
    assert "SDPA's extra +7.00 ms per layer and micro-batch (w) × 4 layers × 2 micro-batches = +56.0 ms per step" in text
    assert "the whole step's +51.0 ms between section 4's two medians" in text and "the account is 1.10× that gap" in text
    paired = Ratio("SDPA vs written-out attention, eager", 0.75, 0.7, 0.8, rounds=5, coverage=0.94, drift=0.01)
    by_pairs = nb08.attention_sum(written, sdpa, 4, 2, _timing("step w", 0.147, 0.147, 0.147),
                                  _timing("step s", 0.198, 0.198, 0.198), paired=paired)  # as notebook 10 reckons it
    assert "section 4's paired ratio, 0.75×, puts the two steps +49.0 ms apart (at the written-out step's median); the " \
        "account is 1.14× that gap" in by_pairs  # 147 ms × (1 / 0.75 - 1)


def test_before_after_compile_reads_the_two_timings_by_the_two_moments_rule():
    before, after = _timing("eager, SDPA", 0.10, 0.099, 0.101), _timing("eager, SDPA, after", 0.12, 0.119, 0.121)
    said = nb08.before_after_compile(before, after)
    assert said.startswith("eager, SDPA, timed again after the compile beside the compiled GPT: 120 ms, against 100 ms")
    assert "1.20× its time" in said and "inconclusive" in said
    assert "within their spreads" in nb08.before_after_compile(before, _timing("a", 0.1, 0.098, 0.102))


def test_answer_reads_each_line_from_its_section():
    rows = {"eager, written-out attention": {"value": 30.76, "unit": "ktok/s", "spread": [30.71, 30.96]},
            "long run: tokens/s": {"value": 25.5, "unit": "ktok/s", "spread": [21.72, 26.37],
                                   "note": "eager, written-out attention, median after step 12, cpu"},
            "validation loss, end of run": {"value": 2.188, "unit": "nats/token"},
            "unigram baseline, val": {"value": 3.166, "unit": "nats/token"}}
    said = nb08.answer(rows, "eager, written-out attention", (0.298, 0.422), 418.7e9, (0.0, 0.0), "cpu").splitlines()
    assert said[1:4] == ["  tokens per second:",
                         "    eager, written-out attention (the highest median in section 4's first turns): 30.8 (30.7–31.0) "
                         "ktok/s", "    the long run through train.fit (eager, written-out attention, section 6): 25.5 "
                         "(21.7–26.4) ktok/s"]
    said = said[:1] + said[3:]  # the lines below, as with one line of rates
    assert "in section 4's one reading of eager, written-out attention (its quartiles)" in nb08.answer(
        rows, "eager, written-out attention", (0.343, 0.374), 1e9, None, "cpu", lone=True)
    from course_lib import bench
    later = bench.timing_of([0.145] * 3, name="compiled, written-out attention", device="cpu", work=4096, unit="tok/s")
    gain = {"compiled vs eager, written-out attention": {"value": 1.188, "unit": "×", "spread": [0.997, 1.318]}}
    assert nb08.answer({**rows, **gain}, "eager, written-out attention", None, 1.0, None, "cpu",
                       faster=later).splitlines()[4] == (
        "    compiled, written-out attention, in later turns: 28.2 ktok/s (section 4: 1.188× (0.997–1.318) over eager there, "
        "too wide to tell)")
    clear = {"compiled vs eager, written-out attention": {"value": 1.12, "unit": "×", "spread": [1.05, 1.33]}}
    assert nb08.answer({**rows, **clear}, "eager, written-out attention", None, 1.0, None, "cpu",  # readers FX, FY
                       faster=later).splitlines()[4].endswith(
        "(section 4: 1.12× (1.05–1.33) over eager there, unconfirmed: one set of turns, its interval reaching below "
        "1.1× (notebook 10 counts such a gain once a second set confirms it))")
    assert said[2].startswith("  share of the peak: MFU 29.8%–42.2% of the measured peak (418.7 GFLOP/s)")
    assert said[3].endswith("0.978 lower, so it uses the context, not only byte frequencies")
    assert said[4].endswith("the weights equal the straight run's, bit for bit")
    level = {**rows, "validation loss, end of run": {"value": 3.16, "unit": "nats/token"}}
    assert "level with it" in nb08.answer(level, None, None, 1.0, None, "cpu")
    assert nb08.answer({}, None, None, 1.0, None, "cpu") == "answer, from this run's numbers (cpu):"


def test_pays_clause_gives_the_break_even_only_where_there_is_a_gain():
    assert nb08.pays_clause(1300.4, 22.4) == "\nits cold compile (22.4 s beyond a step's work) pays for itself after about 1,300 steps"
    assert nb08.pays_clause(float("inf"), 22.4) == ""
    assert nb08.pays_clause(310, 4.0, cold=False) == ("\nits compile (4.0 s beyond a step's work, the caches warm from "
                                                      "section 4's) pays for itself after about 310 steps")
    assert nb08.pays_clause(310, 4.0, unconfirmed=True).endswith("after about 310 steps, if the gain holds")


def test_compile_caveat_refuses_a_gain_the_eager_controls_own_move_can_make():
    gain = Ratio("c", 1.11, 1.03, 1.17, rounds=5, coverage=0.94, drift=0.02)
    said, established = nb08.compile_caveat(gain, moved=1.12, earlier=1.01, probe=1.04)  # reader GA: run115's 08
    assert not established and said == (
        "\nnot established: its eager control read 1.12× its time before the compile (the pace probe: 1.04×), and "
        "against that earlier reading the compiled step ran at 1.01× its speed (two moments): the gain may be the "
        "control's own slowing")
    held, established = nb08.compile_caveat(gain, moved=1.15, earlier=1.2)  # still faster than the earlier reading
    assert established and held.startswith("\nits eager control read 1.15× its time before the compile; against that "
                                            "earlier reading the compiled step ran at 1.20× its speed (two moments)")
    assert held.endswith(nb08.UNCONFIRMED)  # and its interval reaches below 1.1x: one set of turns does not confirm it
    assert nb08.compile_caveat(gain, moved=1.05, earlier=1.06) == (f"\n{nb08.UNCONFIRMED}", True)  # under 1.1x: no move
    big = Ratio("c", 1.4, 1.3, 1.5, rounds=5, coverage=0.94, drift=0.02)
    assert nb08.compile_caveat(big) == ("", True)

def test_busy_verdict_gives_the_medians_ratio_where_it_differs_from_the_paired_one():
    gain = Ratio("g", 2.86, 2.36, 3.07, rounds=5, coverage=0.94, drift=0.03, medians=2.67)
    busy = Ratio("b", 1.0, 0.999, 1.001, rounds=5, coverage=0.94, drift=0.001)
    said = nb08.busy_verdict(gain, busy, "1 sequence", "16 sequences", BUSY, MFU)
    assert said.startswith("verdict: MFU rose 2.86× (2.36–3.07; the median of the paired turns, the two medians' "
                           "ratio 2.67×) with the larger micro-batch")


def test_run_order_lists_the_same_steps_readings_as_they_ran_and_how_they_moved():
    import dataclasses
    from course_lib.bench import timing_of

    def t(ms):
        return timing_of([ms / 1e3] * 3, name="step", device="cpu")
    slowed = nb08.run_order({"section 4": t(132), "section 4, again": t(138), "section 5": None, "the long run": t(194)})
    assert slowed.splitlines() == ["the same step, in the order it ran:",  # a table, then one finding a line
                                   "  reading           ms a step",
                                   "  section 4               132",
                                   "  section 4, again        138",
                                   "  the long run            194",
                                   "  the step read slower the later it ran, 1.47× from the first reading to the last",
                                   "  what moved it is not measured here"]
    assert "within 1.05× of each other: the readings agree" in nb08.run_order({"a": t(100), "b": t(105)})
    assert "now slower, now faster, in no order" in nb08.run_order({"a": t(100), "b": t(130), "c": t(101)})
    assert nb08.run_order({"a": t(100), "b": None}) == ""  # one reading: nothing to order
    counted = nb08.run_order({"section 4": dataclasses.replace(t(132), faults=6000.0, work=4096.0), "the long run": t(194)})
    assert counted.splitlines()[1:4] == ["  reading       ms a step  page faults per 1,000 tokens",
                                         "  section 4           132                         1,465",
                                         "  the long run        194                             -"]  # its loop counts none
    probes = {"section 4": t(12.3), "section 4, again": t(12.5)}  # the probe held while the step moved (reader FI)
    held = nb08.run_order({"section 4": t(143), "section 4, again": t(173), "the long run": t(179)}, probes)
    assert held.splitlines()[:5] == [
        "the same step, in the order it ran (the pace probe: a fixed matmul and copy timed in the same turns):",
        "  reading           ms a step  probe, ms", "  section 4               143       12.3",
        "  section 4, again        173       12.5", "  the long run            179          -"]
    assert held.endswith("\n  the pace probe held within 1.02× where the step moved 1.21× (the 2 sets that timed both): "
                         "the machine's pace, as that fixed matmul and copy read it, does not account for the move; "
                         "what does is not measured")
    moved = nb08.run_order({"a": t(143), "b": t(173)}, {"a": t(12.0), "b": t(14.5)})
    assert moved.endswith("the pace probe moved 1.21× where the step moved 1.21× (the 2 sets that timed both); with "
                          "each set's probe taken out, within 1.00×: the probe moved with the step (what moved both, the "
                          "machine's pace or other work in this process, is not told apart)")  # reader FY
    part = nb08.run_order({"a": t(143), "b": t(186)}, {"a": t(12.0), "b": t(13.32)})  # the probe 1.11x, the step 1.30x
    assert part.endswith("with each set's probe taken out, within 1.17×: the probe accounts for part of the move; "
                         "the rest is not measured")
    faulted = nb08.run_order({"a": dataclasses.replace(t(137), faults=0.0, work=1000.0),  # reader FQ: printed, now read
                              "b": dataclasses.replace(t(171), faults=5377.0, work=1000.0),
                              "c": dataclasses.replace(t(145), faults=3712.0, work=1000.0)})
    assert faulted.endswith("\n  page faults (pages the system maps in at first touch): the one slower reading with a count "
                            "(1.1× or more the fastest's time) faulted at least 1,665 more than the faster ones: memory taken "
                            "fresh from the system each step goes with the slower time here, in one reading (a "
                            "candidate cause, not tested)")
    little = nb08.run_order({"a": t(143), "b": t(198)}, {"a": t(12.0), "b": t(13.3)})  # reader FO: little taken away
    assert little.endswith("with each set's probe taken out, 1.25× apart, little closer than the step alone: the probe "
                           "accounts for little of the move; what moved the step is not measured")
    looped = nb08.run_order({"section 4": t(143), "beside the matmul": t(145), "no sampler": t(198), "the long run": t(180)},
                            looped=("no sampler", "the long run"))  # reader FN: the slow ones ran back to back
    assert looped.endswith("\n  the readings timed back to back (no sampler, the long run) ran 1.24× or more slower than "
                           "every reading timed one call a turn: how the step is timed is a candidate, not tested")
    assert "back to back" not in nb08.run_order({"a": t(143), "b": t(198), "c": t(150)}, looped=("b", "c"))  # mixed
    against = nb08.run_order({"a": t(153), "b": t(150), "c": t(184)}, {"a": t(12.9), "b": t(18.2), "c": t(13.0)})
    assert against.endswith("with each set's probe taken out, 1.72× apart, wider than the step alone: the probe did "
                            "not move with the step; what moved the step is not measured")  # run106's 08
