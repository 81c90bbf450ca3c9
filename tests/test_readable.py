"""Values as people read them (`advisor.readable`): each rule counted by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from enum import Enum

from advisor import readable


def test_a_duration_beyond_a_day_reads_as_days_and_a_clock_not_as_a_date() -> None:
    # 1970 days, 3 h 40 min 31 s: Slurm's form was 1970-03:40:31, which reads as a year and a month.
    assert readable.duration(1970 * 86400 + 3 * 3600 + 40 * 60 + 31) == "1,970d 03:40"
    assert readable.duration(timedelta(days=1, minutes=5)) == "1d 00:05"
    assert readable.duration(3 * 3600 + 59.6) == "03:01:00"
    assert readable.duration(None) == "-" and readable.duration(float("inf")) == "never"


def test_a_step_time_gets_its_unit() -> None:
    assert readable.short_time(0.0007014745421049226) == "701 µs"
    assert readable.short_time(0.0123) == "12.3 ms"
    assert readable.short_time(1.25) == "1.25 s"
    assert readable.short_time(125) == "00:02:05"


def test_sizes_are_binary_units_with_three_digits() -> None:
    assert readable.size(150175268) == "143 MiB"  # 150175268 / 2**20 = 143.2
    assert readable.size(512) == "512 B"
    assert readable.size(3 * 2**30 // 2) == "1.5 GiB"
    assert readable.size(2**31) == "2 GiB", "no zeros that say nothing"
    assert readable.size_mb(16000) == "15.6 GiB"


def test_shares_ratios_and_costs() -> None:
    assert readable.percent(0.3645259433303454) == "36.5%"
    assert readable.percent(0.042) == "4.2%"
    assert readable.ratio(1.62) == "1.62x"  # beside a 1.6 cut: not rounded onto it
    assert readable.cost(1234.5, "credits") == "1,234.50 credits"


def test_timestamps_are_to_the_minute_in_utc() -> None:
    assert readable.timestamp("2026-12-04T23:06:14.123456+00:00") == "2026-12-04 23:06 UTC"
    assert readable.timestamp(datetime(2026, 12, 4, 23, 6, 59, tzinfo=UTC)) == "2026-12-04 23:06 UTC"


def test_headers_are_words() -> None:
    assert readable.header("heldout_mape") == "held-out MAPE"
    assert readable.header("gpus_used") == "GPUs in use"
    assert readable.header("mem_mb") == "memory per node (--mem)", "not mem mb"
    assert readable.header("run_p90_s") == "run p90"


class _Colour(Enum):
    RED = "red"


def test_cells_carry_no_python_reprs() -> None:
    assert readable.value(None) == "-" and readable.value(True) == "yes" and readable.value(False) == "no"
    assert readable.value(0.3645259433303454) == "0.365"
    assert readable.value(1234.5678) == "1,235"
    assert [readable.value(n) for n in (3.0, 30.0, 2.5, 100.0, 0.1)] == ["3", "30", "2.5", "100", "0.1"]
    assert readable.value(["t4", "v100"]) == "t4, v100"
    assert readable.value({"num_classes": 10}) == "num_classes=10"
    assert readable.value(_Colour.RED) == "red"
    assert readable.field("peak_memory_bytes", 150175268) == "143 MiB"
    assert readable.field("step_s", 0.0007014745421049226) == "701 µs"
    assert readable.field("heldout_mape", 0.3645259433303454) == "36.5%"
    assert readable.field("created_at", "2026-12-04T23:06:14.123456+00:00") == "2026-12-04 23:06 UTC"
