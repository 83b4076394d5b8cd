"""Schedule arithmetic: occurrences as pure functions of a time, across daylight-saving changes."""
from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bunqueue.broker.components.recurrence import Schedule
from bunqueue.broker.components.repeatchain import next_run
from bunqueue.errors import CommandError

FIELD_COUNT = "Invalid cron expression: Cron expression must have 5 fields, or 6 fields with leading seconds"


def ms(*parts: int) -> float:
    return datetime(*parts, tzinfo=UTC).timestamp() * 1000  # type: ignore[misc]


def runs(expression: str, tz: str | None, start: float, n: int = 3) -> list[float]:
    schedule = Schedule(expression, tz)
    out: list[float] = []
    t: float | None = start
    for _ in range(n):
        assert t is not None
        t = schedule.next_after(t)
        assert t is not None
        out.append(t)
    return out


def test_five_fields_every_five_minutes() -> None:
    assert runs("*/5 * * * *", None, ms(2026, 1, 1, 10, 2, 30)) == [
        ms(2026, 1, 1, 10, 5), ms(2026, 1, 1, 10, 10), ms(2026, 1, 1, 10, 15)
    ]


def test_an_occurrence_is_strictly_after_the_given_time() -> None:
    at = ms(2026, 1, 1, 10, 5)
    assert Schedule("*/5 * * * *").next_after(at) == ms(2026, 1, 1, 10, 10)
    assert Schedule("*/5 * * * *").next_after(at - 1) == at


def test_six_fields_take_leading_seconds() -> None:
    start = ms(2026, 1, 1, 10, 0, 10) + 500
    assert runs("*/30 * * * * *", None, start) == [
        ms(2026, 1, 1, 10, 0, 30), ms(2026, 1, 1, 10, 1), ms(2026, 1, 1, 10, 1, 30)
    ]
    assert runs("5,10 0 12 * * *", None, ms(2026, 1, 1), 2) == [ms(2026, 1, 1, 12, 0, 5), ms(2026, 1, 1, 12, 0, 10)]


@pytest.mark.parametrize(
    "macro, expected",
    [
        ("@daily", ms(2026, 1, 2)),
        ("@midnight", ms(2026, 1, 2)),
        ("@hourly", ms(2026, 1, 1, 11)),
        ("@weekly", ms(2026, 1, 4)),  # the next Sunday
        ("@monthly", ms(2026, 2, 1)),
        ("@yearly", ms(2027, 1, 1)),
        ("@annually", ms(2027, 1, 1)),
        ("@DAILY", ms(2026, 1, 2)),
    ],
)
def test_macros(macro: str, expected: float) -> None:
    assert Schedule(macro).next_after(ms(2026, 1, 1, 10, 30)) == expected


def test_time_zone_keeps_the_local_hour_across_the_spring_change() -> None:
    # New York moves from UTC-5 to UTC-4 on 2026-03-08: 09:00 local is 14:00 UTC before, 13:00 after.
    assert runs("0 9 * * *", "America/New_York", ms(2026, 3, 6, 12)) == [
        ms(2026, 3, 6, 14), ms(2026, 3, 7, 14), ms(2026, 3, 8, 13)
    ]


def test_a_wall_time_skipped_by_spring_forward_runs_once_after_the_gap() -> None:
    # Rome skips 02:00-03:00 on 2026-03-29: 02:30 does not exist that day; the run comes at 03:00 CEST.
    assert runs("30 2 * * *", "Europe/Rome", ms(2026, 3, 28, 12)) == [
        ms(2026, 3, 29, 1), ms(2026, 3, 30, 0, 30), ms(2026, 3, 31, 0, 30)
    ]


def test_a_wall_time_repeated_by_fall_back_runs_once() -> None:
    # Rome repeats 02:00-03:00 on 2026-10-25: 02:30 happens at 00:30 and at 01:30 UTC; it runs once.
    assert runs("30 2 * * *", "Europe/Rome", ms(2026, 10, 24, 12)) == [
        ms(2026, 10, 25, 0, 30), ms(2026, 10, 26, 1, 30), ms(2026, 10, 27, 1, 30)
    ]


def test_an_hourly_schedule_runs_in_both_repeated_hours() -> None:
    assert runs("30 * * * *", "Europe/Rome", ms(2026, 10, 24, 23, 45), 4) == [
        ms(2026, 10, 25, 0, 30), ms(2026, 10, 25, 1, 30), ms(2026, 10, 25, 2, 30), ms(2026, 10, 25, 3, 30)
    ]


def test_an_every_minute_schedule_runs_on_into_the_repeated_hour() -> None:
    # As in the reference: every minute of 02:00 runs in both of its instances, 02:59 CEST then 02:00 CET.
    assert runs("* 2 * * *", "Europe/Rome", ms(2026, 10, 25, 0, 58)) == [
        ms(2026, 10, 25, 0, 59), ms(2026, 10, 25, 1, 0), ms(2026, 10, 25, 1, 1)
    ]


def test_a_schedule_every_other_hour_runs_once_in_the_repeated_hour() -> None:
    # 02:30 CEST (00:30 UTC) has passed; 02:30 CET is the same wall time again and does not run.
    assert runs("30 */2 * * *", "Europe/Rome", ms(2026, 10, 25, 0, 58), 2) == [
        ms(2026, 10, 25, 3, 30), ms(2026, 10, 25, 5, 30)
    ]


@pytest.mark.parametrize(
    "expression, tz, message",
    [
        ("* * * * * * *", None, FIELD_COUNT),
        ("bogus", None, FIELD_COUNT),
        ("", None, FIELD_COUNT),
        ("@reboot", None, "Invalid cron expression: Invalid cron expression: unrecognized field syntax"),
        ("61 * * * *", None,
         'Invalid cron expression: Invalid cron minute field "61": values must be between 0 and 59'),
        ("0 9 * * *", "Mars/Base", "Invalid cron expression: Bun.cron: unknown time zone 'Mars/Base'"),
        ("0 9 * * *", "../etc/passwd", "Invalid cron expression: Bun.cron: unknown time zone '../etc/passwd'"),
    ],
)
def test_invalid_expressions_and_zones(expression: str, tz: str | None, message: str) -> None:
    with pytest.raises(CommandError) as info:
        Schedule(expression, tz)
    assert info.value.message == message


def test_a_schedule_with_no_future_run() -> None:
    schedule = Schedule("0 0 30 2 *")
    assert schedule.next_after(ms(2026, 1, 1)) is None
    with pytest.raises(CommandError) as info:
        schedule.check_future(ms(2026, 1, 1))
    assert info.value.message == "Invalid cron expression: Cron expression has no future occurrences"


def test_repeat_every_keeps_its_phase_and_never_lands_in_the_past() -> None:
    now = 1_000_000.0
    assert next_run({"every": 1000}, now) == now + 1000
    # The previous run was due at 990,500: the next is 991,500 + k*1000, the first after now.
    assert next_run({"every": 1000, "prevMillis": 990_500}, now) == 1_000_500
    assert next_run({"every": 1000, "startDate": now + 5000}, now) == now + 5000
    assert next_run({"every": 1000, "endDate": now + 500}, now) is None


def test_repeat_pattern_follows_the_schedule_and_its_window() -> None:
    now = ms(2026, 1, 1, 10, 2)
    assert next_run({"pattern": "*/5 * * * *"}, now) == ms(2026, 1, 1, 10, 5)
    assert next_run({"pattern": "*/5 * * * *", "prevMillis": ms(2026, 1, 1, 10, 5)}, now) == ms(2026, 1, 1, 10, 10)
    assert next_run({"pattern": "*/5 * * * *", "startDate": ms(2026, 1, 1, 11)}, now) == ms(2026, 1, 1, 11)
    assert next_run({"pattern": "0 9 * * *", "tz": "America/New_York"}, ms(2026, 3, 7, 15)) == ms(2026, 3, 8, 13)
    assert next_run({"pattern": "*/5 * * * *", "endDate": ms(2026, 1, 1, 10, 4)}, now) is None
