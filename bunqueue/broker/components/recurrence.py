"""Schedule arithmetic for crons and repeating jobs: pure functions of a time, no clock of their own.

An expression has 5 fields, or 6 with *leading* seconds (croniter's ``second_at_beginning``), or is one of
the ``@daily``-style macros. Times are epoch milliseconds; a time zone is an IANA name read with
``zoneinfo`` (UTC when none is given). Occurrences are computed in the zone's wall-clock time, so a
schedule keeps its local hour across daylight-saving changes: a wall time skipped by a spring-forward
change does not run that day, and one repeated by a fall-back change runs once.
"""
from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadCronError, CroniterBadDateError, CroniterError, croniter

from bunqueue import errors
from bunqueue.errors import CommandError

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


@lru_cache(maxsize=256)
def zone(name: str | None) -> ZoneInfo | None:
    """The IANA zone ``name`` (None: UTC); raises CommandError for a name zoneinfo does not know."""
    if name is None:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise CommandError(errors.unknown_timezone(name)) from None


@lru_cache(maxsize=4096)
def shared(expression: str, tz: str | None = None) -> Schedule:
    """One Schedule per (expression, zone): crons on the same schedule share its parse and its answers."""
    return Schedule(expression, tz)


class Schedule:
    """A parsed cron expression in a time zone; ``next_after`` gives its occurrences."""

    __slots__ = ("expression", "fields", "fixed_hour", "iterator", "last", "tz")

    def __init__(self, expression: str, tz: str | None = None) -> None:
        self.expression = expression
        self.tz = zone(tz)
        text = expression.strip()
        text = MACROS.get(text.lower(), text)
        parts = text.split()
        if len(parts) not in (5, 6):
            raise CommandError(errors.invalid_cron(errors.CRON_FIELD_COUNT))
        self.fields = " ".join(parts)
        # A schedule naming its hours runs once on a day whose wall clock repeats an hour; one that runs
        # every hour runs in both (they are different hours of real time).
        self.fixed_hour = "*" not in parts[-4]
        try:
            # Parses every field once, here: firing never meets a bad expression, and only moves the
            # iterator (parsing costs more than finding an occurrence).
            self.iterator = croniter(
                self.fields, datetime(2000, 1, 1, tzinfo=self.tz or UTC), second_at_beginning=True
            )
        except (CroniterBadCronError, CroniterError, ValueError, KeyError) as exc:
            raise CommandError(errors.invalid_cron(str(exc) or errors.CRON_FIELD_COUNT)) from None
        # (second asked about, its answer): crons sharing a schedule fire together and ask the same.
        self.last: tuple[float, float | None] = (math.nan, None)

    def next_after(self, after_ms: float) -> float | None:
        """The first occurrence strictly after ``after_ms`` (epoch ms), or None when there is none."""
        # Whole seconds: an occurrence falls on a second, and croniter starts from the next one.
        second = after_ms // 1000
        if self.last[0] == second:
            return self.last[1]
        it = self.iterator
        try:
            it.set_current(datetime.fromtimestamp(second, self.tz or UTC), force=True)
            found = it.get_next(datetime)
            if self.fixed_hour and self.tz is not None and _repeated_wall_time(found):
                found = it.get_next(datetime)
            following: float | None = _epoch_ms(found)
        except (CroniterBadDateError, CroniterError, OverflowError):
            following = None
        self.last = (second, following)
        return following

    def check_future(self, now_ms: float) -> None:
        if self.next_after(now_ms) is None:
            raise CommandError(errors.invalid_cron(errors.CRON_NO_FUTURE))


def _repeated_wall_time(when: datetime) -> bool:
    """Whether ``when`` is the second instance of a wall time that a fall-back change repeats."""
    first = when.replace(fold=0)
    second = when.replace(fold=1)
    offset = when.utcoffset()
    return first.utcoffset() != second.utcoffset() and offset == second.utcoffset() and offset != first.utcoffset()


def _epoch_ms(when: datetime) -> float:
    return float((when - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1))
