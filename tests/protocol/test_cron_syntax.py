"""Which cron schedules Cron takes, and the words for those it refuses, case by case against the reference.

The expected replies were recorded from the reference server (bunqueue 2.9.5 on Bun 1.4.5) by sending the
same Cron frames; a schedule is refused there by the reference's own seconds parser or by Bun's cron
parser (whose message the reference prefixes once more with "Invalid cron expression: ").
"""
from __future__ import annotations

import itertools
from typing import Any

import pytest

from bunqueue._testbase.frames import RawClient

VALUE = "Invalid cron expression: Invalid cron expression: value out of range for field"
STEP = "Invalid cron expression: Invalid cron expression: step value must be a positive integer"
RANGE = (
    "Invalid cron expression: Invalid cron expression: range must be ascending (use 'a,b' or 'a-max,0-b' for "
    "wrap-around)"
)
SYNTAX = "Invalid cron expression: Invalid cron expression: unrecognized field syntax"
FIELD_COUNT = "Invalid cron expression: Cron expression must have 5 fields, or 6 fields with leading seconds"
NO_FUTURE = "Invalid cron expression: Cron expression has no future occurrences"
NO_TIMING = "Cron job must have either schedule or repeatEvery"
NOT_STRING = "Invalid cron expression: Bun.cron: options.tz must be a string"


def seconds(field: str, reason: str) -> str:
    return f'Invalid cron expression: Invalid cron seconds field "{field}": {reason}'


def unknown_zone(name: str) -> str:
    return f"Invalid cron expression: Bun.cron: unknown time zone '{name}'"


# (schedule, error or None when taken), recorded from bunqueue 2.9.5.
SCHEDULES = [
    ('* * * * *', None),
    ('*/5 * * * *', None),
    ('0 9 * * 1-5', None),
    ('0 0 1 1 *', None),
    ('59 23 31 12 7', None),
    ('0-59 0-23 1-31 1-12 0-7', None),
    ('60 * * * *', VALUE),
    ('61 * * * *', VALUE),
    ('* 24 * * *', VALUE),
    ('* * 0 * *', VALUE),
    ('* * 32 * *', VALUE),
    ('* * * 0 *', VALUE),
    ('* * * 13 *', VALUE),
    ('* * * * 8', VALUE),
    ('*/0 * * * *', STEP),
    ('*/60 * * * *', None),
    ('*/127 * * * *', None),
    ('*/128 * * * *', STEP),
    ('*/ * * * *', STEP),
    ('*/5/2 * * * *', STEP),
    ('/5 * * * *', VALUE),
    ('1-5/2 * * * *', None),
    ('5/10 * * * *', None),
    ('5-1 * * * *', RANGE),
    ('1-2-3 * * * *', VALUE),
    ('1- * * * *', VALUE),
    ('-1 * * * *', VALUE),
    ('-0 * * * *', None),
    ('+5 * * * *', None),
    ('1_0 * * * *', None),
    ('_1 * * * *', VALUE),
    ('1_ * * * *', VALUE),
    ('256 * * * *', VALUE),
    ('007 * * * *', None),
    ('1,,2 * * * *', SYNTAX),
    (',1 * * * *', SYNTAX),
    ('1, * * * *', SYNTAX),
    ('1,2,3 * * * *', None),
    ('* * * JAN *', None),
    ('* * * jan-mar *', None),
    ('* * * January *', None),
    ('* * * DEC-JAN *', RANGE),
    ('* * * JANU *', VALUE),
    ('* * * * MON', None),
    ('* * * * mon-fri', None),
    ('* * * * Sunday', None),
    ('* * * * SUN-SAT', None),
    ('* * * * 7-1', RANGE),
    ('* * * * 5-7', None),
    ('* * * * 0-7', None),
    ('MON * * * *', VALUE),
    ('* JAN * * *', VALUE),
    ('* * * * 1#2', VALUE),
    ('* * L * *', VALUE),
    ('* * * * 5L', VALUE),
    ('* * 15W * *', VALUE),
    ('* * LW * *', VALUE),
    ('? * * * *', VALUE),
    ('* * ? * *', VALUE),
    ('* * * * ?', VALUE),
    ('H * * * *', VALUE),
    ('* * * * * *', None),
    ('0 * * * * *', None),
    ('*/15 * * * * *', None),
    ('0-30/10 * * * * *', None),
    ('61 * * * * *', seconds('61', 'values must be between 0 and 59')),
    ('60 * * * * *', seconds('60', 'values must be between 0 and 59')),
    ('*/0 * * * * *', seconds('*/0', 'step must be between 1 and 60')),
    ('*/61 * * * * *', seconds('*/61', 'step must be between 1 and 60')),
    ('5/10 * * * * *', seconds('5/10', 'steps require a wildcard or range')),
    ('1-2-3 * * * * *', seconds('1-2-3', 'invalid range "1-2-3"')),
    ('1- * * * * *', seconds('1-', 'invalid range "1-"')),
    ('-1 * * * * *', seconds('-1', 'invalid range "-1"')),
    ('30-10 * * * * *', seconds('30-10', 'range start must not exceed range end')),
    ('a * * * * *', seconds('a', 'value must be an integer')),
    ('1,,2 * * * * *', seconds('1,,2', 'list entries cannot be empty')),
    ('1, * * * * *', seconds('1,', 'list entries cannot be empty')),
    ('*/a * * * * *', seconds('*/a', 'step must be an integer')),
    ('5-a * * * * *', seconds('5-a', 'range end must be an integer')),
    ('+5 * * * * *', seconds('+5', 'value must be an integer')),
    ('1_0 * * * * *', seconds('1_0', 'value must be an integer')),
    ('*/5/2 * * * * *', seconds('*/5/2', 'invalid segment "*/5/2"')),
    ('/5 * * * * *', seconds('/5', 'invalid segment "/5"')),
    ('*/ * * * * *', seconds('*/', 'invalid segment "*/"')),
    ('0 61 * * * *', VALUE),
    ('0 ? * * * *', VALUE),
    ('0 * * L * *', VALUE),
    ('0 @daily * * * *', SYNTAX),
    ('', NO_TIMING),
    ('   ', FIELD_COUNT),
    ('*', FIELD_COUNT),
    ('* * * *', FIELD_COUNT),
    ('* * * * * * *', FIELD_COUNT),
    ('@daily', None),
    ('@DAILY', None),
    ('@hourly', None),
    ('@weekly', None),
    ('@monthly', None),
    ('@yearly', None),
    ('@annually', None),
    ('@midnight', None),
    ('@reboot', SYNTAX),
    ('@every 5m', FIELD_COUNT),
    ('@', SYNTAX),
    ('@ * * * *', SYNTAX),
    (' @daily ', None),
    ('  * * * * *  ', None),
    ('\t* * * * *', None),
    ('* *\t* * *', None),
    ('*\n* * * *', None),
    ('* * * * *\n', None),
    ('*\xa0* * * *', None),
    ('*\u3000* * * *', None),
    ('*\x1c* * * *', FIELD_COUNT),
    ('0 0 30 2 *', NO_FUTURE),
    ('0 0 31 4 *', NO_FUTURE),
    ('0 0 30 2 1', None),
    ('0 0 29 2 *', None),
    ('0 0 30 2 */1', None),
    ('0 0 31 2 * *', VALUE),
    ('١ * * * *', VALUE),
    ('* * * * ١', VALUE),
    ('١ * * * * *', seconds('١', 'value must be an integer')),
    ('99999999999999999999 * * * *', VALUE),
    ('99999999999999999999 * * * * *', seconds('99999999999999999999', 'values must be between 0 and 59')),
]

# (schedule, timezone, error or None when taken), recorded from bunqueue 2.9.5: the expression is checked
# before the zone, the zone before the search for a next run; zone names are IANA's, in any case.
ZONES: list[tuple[str, Any, str | None]] = [
    ("* * * * *", "Europe/Rome", None),
    ("* * * * *", "europe/rome", None),
    ("* * * * *", "ETC/UTC", None),
    ("* * * * *", "America/New_york", None),
    ("* * * * *", "EST5EDT", None),
    ("* * * * *", "Etc/GMT-14", None),
    ("* * * * *", "GMT0", None),
    ("* * * * *", "Asia/Calcutta", None),
    ("* * * * *", None, None),
    ("* * * * *", "Nope/Zone", unknown_zone("Nope/Zone")),
    ("* * * * *", "Etc/GMT+14", unknown_zone("Etc/GMT+14")),
    ("* * * * *", "UTC+1", unknown_zone("UTC+1")),
    ("* * * * *", "+01:00", unknown_zone("+01:00")),
    ("* * * * *", " UTC", unknown_zone(" UTC")),
    ("* * * * *", "Europe/Rome/", unknown_zone("Europe/Rome/")),
    ("* * * * *", "Local", unknown_zone("Local")),
    ("* * * * *", "Factory", unknown_zone("Factory")),
    ("* * * * *", "localtime", unknown_zone("localtime")),
    ("* * * * *", "posixrules", unknown_zone("posixrules")),
    ("* * * * *", "right/UTC", unknown_zone("right/UTC")),
    ("* * * * *", "../etc/passwd", unknown_zone("../etc/passwd")),
    ("* * * * *", True, NOT_STRING),
    ("* * * * *", 1.5, NOT_STRING),
    ("* * * * *", ["UTC"], NOT_STRING),
    ("* * * * *", {"a": 1}, NOT_STRING),
    ("61 * * * *", "Nope/Zone", VALUE),
    ("61 * * * * *", "Nope/Zone",
     seconds('61', 'values must be between 0 and 59')),
    ("* * * *", "Nope/Zone", FIELD_COUNT),
    ("@nope", "Nope/Zone", SYNTAX),
    ("@daily", "Nope/Zone", unknown_zone("Nope/Zone")),
    ("0 0 30 2 *", "Nope/Zone", unknown_zone("Nope/Zone")),
]

_names = itertools.count()


def _cron(raw: RawClient, **fields: Any) -> dict[str, Any]:
    name = f"syntax-{next(_names)}"
    reply = raw.call({"cmd": "Cron", "name": name, "queue": "cron-syntax", "data": {}, **fields})
    if reply["ok"]:
        raw.ok({"cmd": "CronDelete", "name": name})
    return dict(reply)


@pytest.mark.parametrize(("schedule", "error"), SCHEDULES)
def test_schedules_are_taken_or_refused_as_the_reference_does(
    raw: RawClient, schedule: str, error: str | None
) -> None:
    reply = _cron(raw, schedule=schedule)
    if error is None:
        assert reply["ok"] is True, reply
        assert reply["cron"]["schedule"] == schedule
    else:
        assert reply == {"ok": False, "error": error}


@pytest.mark.parametrize(("schedule", "timezone", "error"), ZONES)
def test_time_zones_are_taken_or_refused_as_the_reference_does(
    raw: RawClient, schedule: str, timezone: Any, error: str | None
) -> None:
    reply = _cron(raw, schedule=schedule, timezone=timezone)
    if error is None:
        assert reply["ok"] is True, reply
        assert reply["cron"]["timezone"] == timezone
    else:
        assert reply == {"ok": False, "error": error}


def test_an_interval_keeps_its_zone_unchecked(raw: RawClient) -> None:
    """As in the reference: nothing reads an interval's zone, so none is refused."""
    reply = _cron(raw, repeatEvery=60000, timezone="Nope/Zone")
    assert reply["ok"] is True and reply["cron"]["timezone"] == "Nope/Zone", reply


def test_a_zone_name_too_long_for_a_file_name_is_unknown(raw: RawClient) -> None:
    """Zone names are looked up in the list of zones, never as a file named after the request."""
    reply = _cron(raw, schedule="* * * * *", timezone="x" * 5000)
    # The name is quoted as every request value in an error text is: its first 256 characters.
    assert reply == {"ok": False, "error": unknown_zone("x" * 256)}
