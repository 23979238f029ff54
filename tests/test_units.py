"""course_lib.units: sizes, times and rates in human units."""

import pytest

from course_lib import units


@pytest.mark.parametrize("seconds, text", [(2.51, "2.51 s"), (0.0413, "41.3 ms"),
                                           (12e-6, "12 µs"), (3e-9, "3 ns"),
                                           (125.4, "125 s"), (1250.0, "20.8 min")])
def test_fmt_time(seconds, text):
    assert units.fmt_time(seconds) == text


@pytest.mark.parametrize("n, text", [(512, "512 B"), (1536, "1.5 KiB"),
                                     (163.2 * 2**20, "163.2 MiB"), (12.4 * 2**30, "12.4 GiB"),
                                     (2**50, "1024.0 TiB"), (-3 * 2**20, "-3.0 MiB")])
def test_fmt_bytes(n, text):
    assert units.fmt_bytes(n) == text


@pytest.mark.parametrize("rate, unit, text", [(198.4e12, "FLOP/s", "198.4 TFLOP/s"),
                                              (3.1e9, "B/s", "3.10 GB/s"),
                                              (12.3e3, "img/s", "12.3 kimg/s"),
                                              (2e15, "FLOP/s", "2.00 PFLOP/s"), (7, "img/s", "7.00 img/s")])
def test_fmt_rate(rate, unit, text):
    assert units.fmt_rate(rate, unit) == text


@pytest.mark.parametrize("n, digits, text", [(1388, 2, "1,400"), (10993, 2, "11,000"), (951.4, 2, "950"),
                                             (7, 2, "7"), (1388, 3, "1,390")])
def test_fmt_count_rounds_to_significant_digits_with_separators(n, digits, text):
    assert units.fmt_count(n, digits) == text


def test_time_scale_is_the_unit_fmt_time_writes():
    for seconds in (0.0413, 12e-6, 2.51, 125.0, 1250.0, 3e-9):
        scale, unit = units.time_scale(seconds)
        assert units.fmt_time(seconds).endswith(" " + unit)


def test_unit_scale_reads_an_si_prefix_back():
    assert units.unit_scale("GFLOP/s", "FLOP/s") == 1e9 and units.unit_scale("tok/s", "tok/s") == 1.0
    assert units.unit_scale("ktok/s", "tok/s") == 1e3 and units.unit_scale("PFLOP/s", "FLOP/s") == 1e15
    assert units.unit_scale("GB/s", "FLOP/s") is None and units.unit_scale("xFLOP/s", "FLOP/s") is None
    assert units.unit_scale("ms", "") is None
    scale, prefixed = units.rate_scale(3.2e10, "FLOP/s")
    assert units.unit_scale(prefixed, "FLOP/s") == scale  # the inverse of rate_scale's prefix
