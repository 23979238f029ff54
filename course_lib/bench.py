"""Timing that tells the truth: warm-up, synchronisation, median and spread.

Everything here goes through ``torch.utils.benchmark`` (which synchronises CUDA around each
measurement) or synchronises itself before reading the clock. Comparisons are timed in turns
(:func:`turns`, :func:`time_in_rounds` for short calls, :func:`time_in_turns` for whole steps),
so that a slow spell of the machine falls on every setting alike. The one exception is
:func:`time_without_sync`, which exists to *show* the pitfall of wall-clock timing around
asynchronous GPU work.

**The statistic of a comparison.** Two timings from one turn-taking run are compared round
by round: in round i, A and B ran back to back, so their ratio r_i is free of whatever the
machine did between rounds. :func:`speedup` and :func:`rate_ratio` report the median of the
r_i and a distribution-free interval for it (:func:`median_interval`: two order statistics
chosen from the binomial distribution, 90 % or more where the rounds allow: 94 % for 5 rounds,
98 % for 10; with 4 rounds or fewer it is their minimum and maximum, and its coverage is
printed). An interval that holds 1 is "no measurable difference". A slow spell that spans
whole rounds cancels out of the r_i; one within a round does not, since A and B run one after
the other. The machine's **drift** measures that: the median change of its speed from one
round to the next (the speed of a round: the geometric mean of A's and B's times). Where the
drift exceeds the effect (the ratio's distance from 1), the verdict is "inconclusive: the
machine's speed changed by X % from one turn to the next". Timings measured apart (not in
turns) are compared by their quartiles, as the spread of the repeats allows.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import itertools
import logging
import math
import statistics
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

import torch

# torch.utils.benchmark imports cpp_extension, which says "No CUDA runtime is found" on
# CPU-only machines with a CUDA build of torch (a log warning from 2.7 on, a print to
# stderr before): noise for learners, not a problem.
logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
with contextlib.redirect_stderr(io.StringIO()):
    from torch.utils import benchmark  # noqa: E402

from course_lib import units
from course_lib.verdicts import Ratio, median_interval, ratio_of  # noqa: F401  bench.Ratio and bench.ratio_of, as notebooks say
from course_lib.device import cpu_name, minor_faults  # noqa: F401  bench.minor_faults, as tests say
from course_lib.device import label as device_label
from course_lib.device import sync as synchronize


LOPSIDED = 1.25  # quartiles printed as such, not '± x%', where one lies this many times farther off the median


@dataclass
class Timing:
    """One measurement row: median seconds per call, its quartiles, throughput.

    The spread is that of the repeats after warm-up: ``q1_s``..``q3_s`` hold the middle
    half of the per-call times (``iqr_s = q3_s - q1_s``). Rows built by hand may give
    only ``iqr_s``; the quartiles are then taken as ``median_s ± iqr_s / 2``.
    """

    name: str
    device: str
    median_s: float
    iqr_s: float
    runs: int
    work: float | None = None  # units of work per call (FLOPs, bytes, images…)
    unit: str = ""  # unit of `work` per second, e.g. "FLOP/s", "B/s", "img/s"
    q1_s: float | None = None  # first quartile of the per-call times
    q3_s: float | None = None  # third quartile
    samples: tuple[float, ...] = ()  # seconds per call in each round, in round order
    turns_id: object = None  # the turn-taking run the samples come from: equal ids pair round by round
    faults: float | None = None  # minor page faults per call, the median over the turns (None: not counted)

    @property
    def lo_s(self) -> float:
        """Fast end of the middle half of the repeats (first quartile), in seconds."""
        return self.q1_s if self.q1_s is not None else self.median_s - self.iqr_s / 2

    @property
    def hi_s(self) -> float:
        """Slow end of the middle half of the repeats (third quartile), in seconds."""
        return self.q3_s if self.q3_s is not None else self.median_s + self.iqr_s / 2

    @property
    def spread(self) -> float:
        """Half the interquartile range relative to the median (0.05: ±5 %); 0 for a
        median of 0 (a category that took no time in any step)."""
        return self.iqr_s / 2 / self.median_s if self.median_s else 0.0

    @property
    def rate(self) -> float | None:
        """Work per second at the median, or None when no work was given."""
        return None if self.work is None else self.work / self.median_s

    @property
    def rate_lo(self) -> float | None:
        """Work per second at the slow quartile."""
        return None if self.work is None else self.work / self.hi_s

    @property
    def rate_hi(self) -> float | None:
        """Work per second at the fast quartile."""
        return None if self.work is None else self.work / max(self.lo_s, 1e-12)

    @property
    def lopsided(self) -> bool:
        """Whether one quartile lies :data:`LOPSIDED` times farther from the median than the other (distances under
        0.5 % of the median count as 0.5 %)."""
        below, above = self.median_s - self.lo_s, self.hi_s - self.median_s
        return self.median_s > 0 and max(below, above) > LOPSIDED * max(min(below, above), 0.005 * self.median_s)

    @property
    def spread_text(self) -> str:
        """The spread as a line shows it: '± 3%' (half the interquartile range over the median,
        one decimal below 1 %, '± <0.1%' below 0.05 %, '(every run 0)' where all are 0), or the quartiles themselves, '(261–304)' in the median's unit,
        where they lie lopsided about the median (one side over 1.25× the other: '± 6%' would hide that one quartile
        lies 7 % off and the other 5 %); '(one run)'."""
        if self.runs <= 1:
            return "(one run)"
        if self.hi_s == 0:  # nothing to spread: '± <0.1%' would suggest a measured spread
            return "(every run 0)"
        if self.lopsided:
            scale, _ = units.time_scale(self.median_s)
            fmt = lambda x: f"{x:.3g}" if x < 1000 else f"{x:,.0f}"  # noqa: E731  no 3.07e+03
            return f"({fmt(self.lo_s / scale)}–{fmt(self.hi_s / scale)})"
        if self.spread < 0.0005:  # '± 0.0%' would read as no spread at all
            return "± <0.1%"
        return f"± {self.spread:.1%}" if self.spread < 0.01 else f"± {self.spread:.0%}"

    def __str__(self) -> str:
        return self.line()

    def line(self, width: int = 28) -> str:
        """The row :meth:`__str__` prints, its name padded to `width` (the longest of a table's names)."""
        spread = self.spread_text
        line = f"{self.name:<{width}} | {units.fmt_time(self.median_s):>10} {spread:<11} | "
        if self.rate is not None:
            line += f"{units.fmt_rate(self.rate, self.unit):>14} | "
        return line + f"{self.runs:>3} runs | {self.device}"


def name_width(timings: Iterable[object]) -> int:
    """The name column that fits the longest name among `timings` (others ignored), at least 28 wide."""
    return max([28, *(len(t.name) for t in timings if isinstance(t, Timing))])


def _paired(a: Timing, b: Timing) -> bool:
    """True when `a` and `b` were timed in the same turns, round by round."""
    return (a.turns_id is not None and a.turns_id == b.turns_id and len(a.samples) == len(b.samples) > 0)


def _paired_ratio(name: str, ratios: Sequence[float], a: Timing, b: Timing, more: str, less: str,
                  medians: float) -> Ratio:
    """A :class:`Ratio` from per-round ratios of two timings taken in turns, with the drift:
    the median of |s_(i+1) / s_i - 1| over consecutive rounds, s_i the geometric mean of both
    times in round i (0 with one round)."""
    value, lo, hi, coverage = median_interval(ratios)
    speed = [math.sqrt(x * y) for x, y in zip(a.samples, b.samples)]
    changes = [abs(s1 / max(s0, 1e-300) - 1) for s0, s1 in zip(speed, speed[1:])]
    return Ratio(name, value, lo, hi, more, less, rounds=len(ratios), coverage=coverage,
                 drift=statistics.median(changes) if changes else 0.0, medians=medians)


def speedup(base: Timing, new: Timing, name: str | None = None, *, more: str = "faster",
            less: str = "slower") -> Ratio:
    """How many times faster `new` runs than `base`: '{new} vs {base}: 1.21× (1.14–1.29) |
    faster, beyond …'. Timed in the same turns: the median of the per-round ratios, its
    interval and the machine's drift (see the module's docstring); measured apart: the ratio
    of the medians, with the range the quartiles of both allow. `more`/`less` name a ratio
    above/below 1 (a ratio of times read the other way: more="longer", less="shorter")."""
    name = name or f"{new.name} vs {base.name}"
    if _paired(base, new):
        return _paired_ratio(name, [b / max(n, 1e-300) for b, n in zip(base.samples, new.samples)],
                             base, new, more, less, base.median_s / new.median_s)
    return Ratio(name, base.median_s / new.median_s, base.lo_s / new.hi_s, base.hi_s / max(new.lo_s, 1e-12),
                 more, less, apart=True)


def break_even(extra_s: float, base: Timing, speed: Ratio) -> tuple[float, float, float]:
    """Steps after which a one-off cost of `extra_s` seconds (a compilation) is paid back by a
    step `speed` times faster than `base`: (at the medians, fewest, most over the speed-up's
    range). Each step saves base × (1 − 1/speed)."""
    if speed.lo <= 1:
        raise ValueError(f"A break-even needs a speed-up beyond the spread, got {speed.value:.2f}× "
                         f"({speed.lo:.2f}–{speed.hi:.2f}).")
    steps = [extra_s / (base.median_s * (1 - 1 / r)) for r in (speed.value, speed.hi, speed.lo)]
    return steps[0], steps[1], steps[2]


def time_fn(
    fn: Callable[[], object],
    *,
    name: str,
    device: torch.device | str,
    work: float | None = None,
    unit: str = "",
    warmup: int = 2,
    min_run_s: float = 0.2,
    repeats: int | None = None,
) -> Timing:
    """Median seconds per call of `fn` and its quartiles, after `warmup` calls, via
    ``torch.utils.benchmark.Timer`` (which synchronises CUDA before reading the clock).

    By default the calls are grouped in blocks of about ``min_run_s / 10`` each (a short
    call, a matmul, is repeated inside a block so the clock's overhead vanishes), and
    3 to 10 blocks fill about `min_run_s`: each block gives one time per call, and
    their median and quartiles are the result. ``repeats=R`` times exactly R single
    calls instead (a whole training step per call), each between two synchronisations,
    as the Timer does.
    """
    if repeats is not None and repeats < 1:
        raise ValueError(f"repeats must be a positive number of calls, got {repeats}.")
    for _ in range(warmup):
        fn()
    synchronize(device)
    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn}, label=name,
                            num_threads=torch.get_num_threads())  # its default is 1 thread
    if repeats is None:
        first = timer.timeit(number=1).times[0]  # one call, to size the blocks
        number = max(1, round(min_run_s / 10 / max(first, 1e-9)))
        blocks = max(3, min(10, math.ceil(min_run_s / (number * max(first, 1e-9)))))
        times = [timer.timeit(number=number).times[0] for _ in range(blocks)]
    else:  # what Timer does per block, one call at a time (Timer.timeit would add 2 warm-ups each)
        times = []
        for _ in range(repeats):
            synchronize(device)
            start = time.perf_counter()
            fn()
            synchronize(device)
            times.append(time.perf_counter() - start)
    return timing_of(times, name=name, device=device, work=work, unit=unit)


def timing_of(times: Sequence[float], *, name: str, device: torch.device | str,
              work: float | None = None, unit: str = "", turns_id: object = None) -> Timing:
    """A :class:`Timing` from per-call seconds measured elsewhere: median and quartiles. Give
    the timings of one turn-taking run (one time per round, in round order) the same
    `turns_id` (any value, e.g. the script's name), and comparisons pair them round by round."""
    if not times:
        raise ValueError(f"No times to summarise for {name!r}: measure at least one call.")
    q1, median, q3 = torch.tensor(list(times), dtype=torch.float64).quantile(
        torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64)).tolist()
    return Timing(name, device_label(device), median, q3 - q1, len(times), work, unit, q1, q3,
                  tuple(float(t) for t in times), turns_id)


def time_without_sync(fn: Callable[[], object], repeats: int = 10) -> float:
    """The classic mistake, kept for demonstration: wall clock around async work.

    On a GPU this measures how long it takes to *queue* the kernels, not to run them.
    """
    fn()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats


def matmul_flops(n: int) -> float:
    """Floating-point operations of an n×n by n×n matrix multiply (2·n³)."""
    return 2.0 * n**3


def matmul_n(flops: float) -> int:
    """The n of the square n×n matmul that does `flops` operations: :func:`matmul_flops` inverted."""
    return round((flops / 2) ** (1 / 3))


def time_matmul(n: int, device: torch.device | str, dtype: torch.dtype = torch.float32,
                min_run_s: float = 0.2) -> Timing:
    """Time ``a @ b`` for square n×n matrices; the rate is in FLOP/s."""
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    name = f"matmul {n}×{n} {str(dtype).removeprefix('torch.')}"
    return time_fn(lambda: a @ b, name=name, device=device, work=matmul_flops(n),
                   unit="FLOP/s", min_run_s=min_run_s)


def calls_per_block(fn: Callable[[], object], seconds: float) -> int:
    """Calls of `fn` that last about `seconds` back to back, from the fastest of 3 single calls
    (``torch.utils.benchmark.Timer``, which synchronises CUDA), or of 1 where that one already
    lasts `seconds`; at least 1."""
    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn},
                            num_threads=torch.get_num_threads())  # its default is 1 thread
    single = math.inf
    for _ in range(3):  # each timeit() also makes 2 warm-up calls of its own
        single = min(single, timer.timeit(number=1).times[0])
        if single >= seconds:  # one call fills a block already: no need for the fastest of 3
            break
    return max(1, round(seconds / max(single, 1e-9)))


_TURNS = itertools.count(1)  # ids of time_in_rounds / time_in_turns runs (Timing.turns_id)


def turns(fns: dict[str, Callable[[], object]], *, rounds: int, block_s: float | None = None,
          number: int | dict[str, int] | None = None, warmup: int = 2,
          device: torch.device | str | None = None, block_warmup: bool = True,
          untimed: Mapping[str, int] | None = None,
          faults: dict[str, list[float]] | None = None) -> dict[str, list[float]]:
    """Seconds per call of each function in each of `rounds` rounds; in every round each
    function runs one block of calls, so that a slow spell of the machine falls on all of them
    alike instead of on whichever ran during it. Round r starts at the r-th function (the order
    given, rotated), so no function always runs first: a bias tied to a place in the round
    widens the spread of paired ratios instead of passing for a difference. The one turn-taking loop
    under :func:`time_in_rounds` and :func:`time_in_turns`, and what the distributed scripts time with.

    A block is `number` calls (one count for all, the same on every rank so that their
    collectives stay paired, or one per function), or the calls that last about `block_s`
    (:func:`calls_per_block`, per function). Each function is first called `warmup` times. With
    `block_warmup` (short calls), ``torch.utils.benchmark.Timer`` times each block, after 2
    warm-up calls of its own, and synchronises CUDA; without it (long calls such as training
    steps, where 2 more calls per block would triple the cost) the block runs between two
    synchronisations of `device`, and so does a block of one call that about lasts `block_s` alone.

    `untimed[name]`: calls of that function made, untimed, just before each of its blocks; for a
    function with work in the background between its turns (a DataLoader's workers prepare batches
    while the others have theirs), enough calls to use up what that work left ready. `faults`: where given, the
    minor page faults per call of each block (:func:`minor_faults`), by function, in round order."""
    untimed = dict(untimed or {})
    if set(untimed) - set(fns) or any(n < 0 for n in untimed.values()):
        raise ValueError(f"untimed calls need functions of this run and counts >= 0, got {untimed}.")
    if rounds < 1 or not fns or (number is None) == (block_s is None):
        raise ValueError(f"Need at least one function, rounds >= 1 and either number or block_s, "
                         f"got {len(fns)}, {rounds}, {number} and {block_s}.")
    if not block_warmup and device is None:
        raise ValueError("Timing blocks without the Timer's warm-up needs the device to synchronise.")
    numbers: dict[str, int] = {}
    if number is not None:
        numbers = dict(number) if isinstance(number, dict) else {name: number for name in fns}
        if set(numbers) != set(fns) or min(numbers.values()) < 1:
            raise ValueError(f"Give every function a number of calls >= 1, got {numbers}.")
    timers = {}
    for name, fn in fns.items():
        for _ in range(warmup):
            fn()
        if device is not None:
            synchronize(device)
        if number is None:
            numbers[name] = calls_per_block(fn, block_s)
        # a call that about fills a block on its own (a CPU's emulated bf16 matmul, seconds long) is timed
        # as a long call is: the Timer's 2 warm-up calls per block would triple its cost
        long_call = number is None and device is not None and numbers[name] == 1
        if block_warmup and not long_call:
            timers[name] = benchmark.Timer(stmt="fn()", globals={"fn": fn}, label=name,
                                           num_threads=torch.get_num_threads())  # its default is 1 thread
    times: dict[str, list[float]] = {name: [] for name in fns}
    order = list(fns.items())
    for r in range(rounds):
        # each round starts one place further along the list: a setting does not always run first
        # (or just after the same other one), so what a place in the round does to a timing, a
        # cache warmed by the setting before or a pause after the last, falls on every setting
        for name, fn in order[r % len(order):] + order[:r % len(order)]:
            for _ in range(untimed.get(name, 0)):  # what its background work left ready, used up
                fn()
            before = minor_faults() if faults is not None else None
            if name in timers:
                times[name].append(timers[name].timeit(number=numbers[name]).times[0])
            else:
                synchronize(device)
                start = time.perf_counter()
                for _ in range(numbers[name]):
                    fn()
                synchronize(device)
                times[name].append((time.perf_counter() - start) / numbers[name])
            if before is not None:  # the Timer's own warm-up calls count in its block's faults
                faults.setdefault(name, []).append((minor_faults() - before) / numbers[name])
    return times


def time_in_rounds(fns: dict[str, Callable[[], object]], *, device: torch.device | str,
                   work: float | dict[str, float] | None = None, unit: str = "",
                   min_run_s: float = 0.2, rounds: int = 5, warmup: int = 2) -> list[Timing]:
    """Time several short functions (a matmul) in turns (:func:`turns`, blocks of about
    ``min_run_s / rounds`` each): one Timing per function, the median and quartiles of its
    per-round times per call. `work` is one amount for all functions, or one per name. For
    long calls (whole training steps) use :func:`time_in_turns`.
    """
    if rounds < 1 or not fns:
        raise ValueError(f"Need at least one function and rounds >= 1, got {len(fns)} and {rounds}.")
    works = work if isinstance(work, dict) else {name: work for name in fns}
    if set(works) != set(fns):
        raise ValueError(f"Give the work of every function: missing {sorted(set(fns) - set(works))}.")
    times = turns(fns, rounds=rounds, block_s=min_run_s / rounds, warmup=warmup, device=device)
    run = next(_TURNS)
    return [timing_of(ts, name=name, device=device, work=works[name], unit=unit, turns_id=run)
            for name, ts in times.items()]


def time_in_turns(fns: dict[str, Callable[[], object]], *, device: torch.device | str,
                  work: float | None = None, unit: str = "", warmup: int = 2,
                  repeats: int = 5, min_turn_s: float = 0.0,
                  untimed: Mapping[str, int] | None = None) -> list[Timing]:
    """Time several long calls (whole training steps) in turns: `warmup` calls of each, then
    `repeats` rounds in which each runs once, between two synchronisations. A slow spell of
    the machine then falls on every setting alike. For short calls (a matmul), where one call
    is too brief to time alone, use :func:`time_in_rounds`. One Timing per function.

    `min_turn_s`: a function whose call (its last warm-up, timed) takes less runs that many
    calls back to back in each turn, and its time per call is the turn's over their number. On
    a GPU a call of a millisecond timed alone between two synchronisations also counts the gap
    while the host launches its first kernels; longer calls keep one call per turn. `untimed`:
    calls made untimed before each turn, as :func:`turns` makes them."""
    if repeats < 1 or warmup < 0 or min_turn_s < 0 or not fns:
        raise ValueError(f"Need at least one function, repeats >= 1, warmup >= 0 and min_turn_s >= 0, "
                         f"got {len(fns)}, {repeats}, {warmup} and {min_turn_s}.")
    calls: dict[str, int] = {}
    for name, fn in fns.items():
        single = None
        for _ in range(max(warmup, 1 if min_turn_s else 0)):  # one call at least, to size the turns
            synchronize(device)
            start = time.perf_counter()
            fn()
            synchronize(device)
            single = time.perf_counter() - start
        calls[name] = 1 if single is None or not min_turn_s else max(1, math.ceil(min_turn_s / max(single, 1e-9)))
    faults: dict[str, list[float]] = {}
    times = turns(fns, rounds=repeats, number=calls, warmup=0, device=device, block_warmup=False, untimed=untimed,
                  faults=faults)
    run = next(_TURNS)
    return [dataclasses.replace(timing_of(ts, name=name, device=device, work=work, unit=unit, turns_id=run),
                                faults=statistics.median(faults[name]) if faults.get(name) else None)
            for name, ts in times.items()]


PROBE = "pace probe"  # the name :func:`pace_probe` is timed under, beside the steps of a set of turns


def pace_probe(device: torch.device | str) -> Callable[[], object]:
    """A fixed piece of work to time in a set of turns beside the steps (under :data:`PROBE`), so that a move of the
    machine's pace between two sets of turns, or two notebooks, shows in it too: a float32 matmul and a copy, on a CPU
    of 1024² and 32 MiB, on a GPU of 4096² and 64 MiB (the same work in every process). It writes into buffers made
    once, so that it allocates nothing: a fresh 32 MiB buffer a call costs whatever the allocator's state makes it (on
    a CPU, glibc maps large blocks fresh, page faults and all, until freed large blocks raise its threshold), which
    is the process's history, not the machine's pace. Its tensors live as long as the function."""
    n, mib = (4096, 64) if torch.device(device).type == "cuda" else (1024, 32)
    a, c = torch.randn(n, n, device=device), torch.empty(n, n, device=device)  # (n, n) each: the matmul's input, output
    block = torch.empty(mib * 2**20 // 4, device=device)  # float32: `mib` MiB
    copy = torch.empty_like(block)  # the copy's destination
    return lambda: (torch.mm(a, a, out=c), copy.copy_(block))


def split_probe(timings: Sequence[Timing], where: str = "") -> tuple[list[Timing], Timing | None]:
    """A set of turns' timings without the pace probe's, and the probe's (None where it was not timed), as a time
    (no work: the turns' unit is the steps'), named 'pace probe, `where`' where given."""
    probe = next((t for t in timings if t.name == PROBE), None)
    if probe is not None:
        probe = dataclasses.replace(probe, work=None, unit="", name=f"{PROBE}, {where}" if where else PROBE)
    return [t for t in timings if t.name != PROBE], probe


def rate_curve(sizes: Sequence[int], device: torch.device | str,
               dtype: torch.dtype = torch.float32, min_run_s: float = 0.2,
               rounds: int = 1) -> list[Timing]:
    """Matmul rate at each size in `sizes`: one measured rate-vs-size curve, in size order.

    ``rounds=1`` times each size once with :func:`time_matmul`, one after the other;
    ``rounds=R > 1`` times all sizes in turns (:func:`time_in_rounds`), so that a slow spell
    of the machine does not pass for a dip of the curve."""
    if not sizes:
        raise ValueError("A rate curve needs at least one matrix size to measure.")
    if rounds == 1:
        return [time_matmul(n, device, dtype, min_run_s) for n in sizes]
    fns, work = {}, {}
    for n in sizes:
        a = torch.randn(n, n, device=device, dtype=dtype)
        b = torch.randn(n, n, device=device, dtype=dtype)
        name = f"matmul {n}×{n} {str(dtype).removeprefix('torch.')}"
        fns[name], work[name] = (lambda a=a, b=b: a @ b), matmul_flops(n)
    return time_in_rounds(fns, device=device, work=work, unit="FLOP/s", min_run_s=min_run_s,
                          rounds=rounds)


def best_rate(timings: Sequence[Timing]) -> Timing:
    """The timing with the highest median rate: the peak of a measured curve."""
    if not timings or any(t.rate is None for t in timings):
        raise ValueError("best_rate needs timings that all have a rate (work per second).")
    return max(timings, key=lambda t: t.rate)


def peak_matmul(device: torch.device | str, dtype: torch.dtype = torch.float32,
                sizes: Sequence[int] = (1024, 2048, 4096, 8192),
                min_run_s: float = 0.2) -> Timing:
    """The best matmul rate measured here over `sizes`: our 'peak' for efficiency ratios.

    Measured in the same run on the same device, so "x % of peak" compares like
    with like (never a datasheet constant for someone else's GPU). When a notebook
    has measured a rate curve already, take ``best_rate(curve)`` instead of measuring
    the same sizes twice.
    """
    if not sizes:
        raise ValueError("peak_matmul needs at least one matrix size to measure.")
    best = best_rate([time_matmul(n, device, dtype, min_run_s) for n in sizes])
    best.name = f"peak: {best.name}"
    return best


def rate_ratio(a: Timing, b: Timing, name: str | None = None) -> Ratio:
    """How many times the rate of `a` is the rate of `b`: 'n=512 vs n=64: 3.10× (2.90–3.32) |
    higher, beyond the spread …'. Timed in the same turns: paired round by round, as
    :func:`speedup`; measured apart: the medians, with the range their quartiles allow.

    Unlike :func:`speedup`, the two may do different work (matmuls of different sizes)."""
    if a.rate is None or b.rate is None or a.unit != b.unit:
        raise ValueError(f"Cannot compare the rates of {a.name!r} and {b.name!r}: both need work "
                         f"in the same unit.")
    name = name or f"{a.name} vs {b.name}"
    if _paired(a, b):
        return _paired_ratio(name, [a.work * tb / (b.work * max(ta, 1e-300)) for ta, tb in zip(a.samples, b.samples)],
                             a, b, "higher", "lower", a.rate / b.rate)
    return Ratio(name, a.rate / b.rate, a.rate_lo / b.rate_hi, a.rate_hi / b.rate_lo, "higher", "lower", apart=True)


def first_reaching(timings: Sequence[Timing], peak: Timing, fraction: float = 0.9) -> Timing | None:
    """The first of `timings` (in their order, e.g. by size) whose median rate is at least
    `fraction` of the `peak` rate; None when none is."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}.")
    return next((t for t in timings if t.rate is not None and t.rate >= fraction * peak.rate), None)


def curve_verdicts(timings: Sequence[Timing], sizes: Sequence[int], fraction: float = 0.9) -> list[str]:
    """What a measured rate-vs-size curve shows, one printed line each, from its numbers:
    where its fastest point is, the smallest size within `fraction` of that point (timed in the
    same rounds, so one yardstick for every size), whether the rate at the fastest point is above
    the smallest size's beyond the spread, and whether the rate after it falls beyond the spread."""
    if len(timings) != len(sizes) or not timings:
        raise ValueError(f"Give one size per timing: {len(timings)} timings, {len(sizes)} sizes.")
    best = best_rate(timings)
    n_of = {id(t): n for t, n in zip(timings, sizes)}
    peak_n, first, last = n_of[id(best)], timings[0], timings[-1]
    lines = [f"fastest point of this curve: n={peak_n}, {units.fmt_rate(best.rate, best.unit)} "
             f"(middle half of the repeats {units.fmt_rate(best.rate_lo, best.unit)}–"
             f"{units.fmt_rate(best.rate_hi, best.unit)}) | {best.device}"]
    reach = first_reaching(timings, best, fraction)
    # only a size up to the first that reaches it by its median can be the smallest to reach it
    upto = timings[:next(i for i, t in enumerate(timings) if t is reach) + 1] if reach else timings
    cross = [str(n_of[id(t)]) for t in upto if t.rate_lo < fraction * best.rate <= t.rate_hi]
    # the candidates: those, and the first to reach it by its median where its spread is past it
    maybe = cross + ([str(n_of[id(reach)])] if cross and reach and str(n_of[id(reach)]) not in cross else [])
    halves = (f"the middle half of n={cross[0]} reaches" if len(cross) == 1
              else f"the middle halves of n={', n='.join(cross)} reach")
    # the first to reach it by its median, its own middle half across the line, may not reach it: then a larger n
    larger = " or a larger n" if reach and str(n_of[id(reach)]) in cross else ""
    names = f"n={maybe[0]}" if len(maybe) == 1 else f"any of n={', n='.join(maybe)}"
    lines.append(f"smallest n at >= {fraction:.0%} of the fastest point: " + (
        f"n={n_of[id(reach)]} ({reach.rate / best.rate:.1%})" if reach else "none of these sizes")
        + (f", by the medians; {halves} across {fraction:.0%}, so {names}{larger} may be the "
           "smallest to reach it: this run cannot say which" if cross else ""))
    if best is not first:
        lines.append(str(rate_ratio(best, first, f"rate at n={peak_n} vs n={sizes[0]}")))
    else:
        lines.append(f"the smallest size, n={sizes[0]}, is the peak: no size measured here ran faster")
    if best is not last:
        lines.append(str(rate_ratio(last, best, f"rate at n={sizes[-1]} vs the fastest point (n={peak_n})")))
    return lines


def fmt_vs_peak(t: Timing, peak: Timing) -> str:
    """One line: the rate of `t` as a fraction of the measured `peak`, device named.

    'matmul 512×512 float32 | 98.1 GFLOP/s | 95% of 103.0 GFLOP/s measured peak | cpu (2 threads) AMD EPYC'
    """
    if t.rate is None or peak.rate is None or t.unit != peak.unit:
        raise ValueError(f"Cannot compare {t.name!r} with {peak.name!r}: both need work in the same unit.")
    hardware = f"{t.device} {cpu_name()}" if t.device.startswith("cpu") else t.device
    return (f"{t.name} | {units.fmt_rate(t.rate, t.unit)} | {t.rate / peak.rate:.0%} of "
            f"{units.fmt_rate(peak.rate, peak.unit)} measured peak | {hardware}")


def copy_bytes(nbytes: int) -> float:
    """Bytes a copy of `nbytes` moves: it reads them and writes them (2·nbytes)."""
    return 2.0 * nbytes


def bandwidth_curve(sizes: Sequence[int], device: torch.device | str, min_run_s: float = 0.2,
                    rounds: int = 5) -> list[Timing]:
    """Memory bandwidth (B/s) of ``dst.copy_(src)`` for buffers of each size in `sizes`
    (bytes), timed in turns (:func:`time_in_rounds`), in size order. Buffers larger than
    the caches measure main memory; small ones, the caches that hold them."""
    if not sizes:
        raise ValueError("A bandwidth curve needs at least one buffer size (bytes) to measure.")
    fns, work = {}, {}
    for n in sizes:
        src = torch.empty(n, dtype=torch.uint8, device=device).random_()
        dst = torch.empty_like(src)
        name = f"copy {units.fmt_bytes(n)}"
        fns[name], work[name] = (lambda d=dst, s=src: d.copy_(s)), copy_bytes(n)
    return time_in_rounds(fns, device=device, work=work, unit="B/s", min_run_s=min_run_s,
                          rounds=rounds)
