"""Schedule arithmetic for crons and repeating jobs: pure functions of a time, no clock of their own.

An expression has 5 fields, or 6 with *leading* seconds (croniter's ``second_at_beginning``), or is one of
the ``@daily``-style macros; ``cronsyntax`` checks it by the reference's rules. Times are epoch
milliseconds; a time zone is an IANA name (any case, as the reference takes it) read with ``zoneinfo``
(UTC when none is given). Occurrences are computed in the zone's wall-clock time, so a
schedule keeps its local hour across daylight-saving changes: a wall time skipped by a spring-forward
change does not run that day, and one repeated by a fall-back change runs once.
"""
from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo, available_timezones

from croniter import CroniterBadDateError, CroniterError, croniter

from bunqueue import errors
from bunqueue.broker.components.cronsyntax import croniter_fields
from bunqueue.errors import CommandError

# tzdata's files that name no zone the reference knows.
_NOT_ZONES = frozenset({"Factory", "localtime", "posixrules"})


def zone(name: object) -> ZoneInfo | None:
    """The IANA zone ``name`` (None: UTC); raises CommandError for a name the reference would not take."""
    if name is None:
        return None
    if type(name) is not str:
        raise CommandError(errors.invalid_cron(errors.TIMEZONE_NOT_STRING))
    known = _zone_names().get(name.lower())
    if known is None:
        raise CommandError(errors.invalid_cron(errors.unknown_timezone(name)))
    return _zone(known)


@lru_cache(maxsize=1)
def _zone_names() -> dict[str, str]:
    # Looked up here, not by opening a file named after the request's text.
    return {name.lower(): name for name in available_timezones() if name not in _NOT_ZONES}


@lru_cache(maxsize=256)
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


@lru_cache(maxsize=4096)
def shared(expression: str, tz: str | None = None) -> Schedule:
    """One Schedule per (expression, zone): crons on the same schedule share its parse and its answers."""
    return Schedule(expression, tz)


class Schedule:
    """A parsed cron expression in a time zone; ``next_after`` gives its occurrences."""

    __slots__ = ("expression", "fields", "fixed_hour", "iterator", "last", "tz")

    def __init__(self, expression: str, tz: str | None = None) -> None:
        self.expression = expression
        self.fields = croniter_fields(expression)
        # The reference checks the zone after the expression.
        self.tz = zone(tz)
        parts = self.fields.split()
        # As in the reference, a schedule that runs every minute or every hour runs in both instances of
        # an hour that a fall-back change repeats (they are different hours of real time); any other runs
        # once on that day.
        self.fixed_hour = not (_every(parts[-5], 60) or _every(parts[-4], 24))
        # Parses every field once, here: firing only moves the iterator (parsing costs more than finding an
        # occurrence). croniter_fields wrote the fields as croniter reads them.
        self.iterator = croniter(self.fields, datetime(2000, 1, 1, tzinfo=self.tz or UTC), second_at_beginning=True)
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


def _every(field: str, count: int) -> bool:
    return field == "*" or field.count(",") == count - 1


def _repeated_wall_time(when: datetime) -> bool:
    """Whether ``when`` is the second instance of a wall time that a fall-back change repeats."""
    first = when.replace(fold=0)
    second = when.replace(fold=1)
    offset = when.utcoffset()
    return first.utcoffset() != second.utcoffset() and offset == second.utcoffset() and offset != first.utcoffset()


def _epoch_ms(when: datetime) -> float:
    return float((when - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1))
