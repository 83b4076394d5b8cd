"""Which cron schedules Cron takes, and the words for those it refuses, case by case against the reference.

Which schedules are taken and which refused was recorded from the reference server (bunqueue 2.9.5 on
Bun 1.4.5) by sending the same Cron frames, and so were the texts of the whole-expression refusals, the
seconds field's and the zones'. A calendar field refused by Bun's cron parser reads, on the reference,
"Invalid cron expression: Invalid cron expression: value out of range for field" (or "step value must be
a positive integer", "range must be ascending ...", "unrecognized field syntax"): the parser's own words,
naming neither the field nor its bounds. This broker words those as the reference words the seconds field.
"""
from __future__ import annotations

import itertools
from typing import Any

import pytest

from bunqueue._testbase.frames import RawClient

SYNTAX = "Invalid cron expression: Invalid cron expression: unrecognized field syntax"
FIELD_COUNT = "Invalid cron expression: Cron expression must have 5 fields, or 6 fields with leading seconds"
NO_FUTURE = "Invalid cron expression: Cron expression has no future occurrences"
NO_TIMING = "Cron job must have either schedule or repeatEvery"
NOT_STRING = "Invalid cron expression: Bun.cron: options.tz must be a string"


def field(name: str, text: str, reason: str) -> str:
    return f'Invalid cron expression: Invalid cron {name} field "{text}": {reason}'


def seconds(text: str, reason: str) -> str:
    return field("seconds", text, reason)


def unknown_zone(name: str) -> str:
    return f"Invalid cron expression: Bun.cron: unknown time zone '{name}'"


# (schedule, error or None when taken): verdicts recorded from bunqueue 2.9.5, calendar-field texts ours.
SCHEDULES = [
    ('* * * * *', None),
    ('*/5 * * * *', None),
    ('0 9 * * 1-5', None),
    ('0 0 1 1 *', None),
    ('59 23 31 12 7', None),
    ('0-59 0-23 1-31 1-12 0-7', None),
    ('60 * * * *', field('minute', '60', 'values must be between 0 and 59')),
    ('61 * * * *', field('minute', '61', 'values must be between 0 and 59')),
    ('* 24 * * *', field('hour', '24', 'values must be between 0 and 23')),
    ('* * 0 * *', field('day-of-month', '0', 'values must be between 1 and 31')),
    ('* * 32 * *', field('day-of-month', '32', 'values must be between 1 and 31')),
    ('* * * 0 *', field('month', '0', 'values must be between 1 and 12 or JAN-DEC')),
    ('* * * 13 *', field('month', '13', 'values must be between 1 and 12 or JAN-DEC')),
    ('* * * * 8', field('weekday', '8', 'values must be between 0 and 7 or SUN-SAT')),
    ('*/0 * * * *', field('minute', '*/0', 'step must be a whole number between 1 and 127')),
    ('*/60 * * * *', None),
    ('*/127 * * * *', None),
    ('*/128 * * * *', field('minute', '*/128', 'step must be a whole number between 1 and 127')),
    ('*/ * * * *', field('minute', '*/', 'step must be a whole number between 1 and 127')),
    ('*/5/2 * * * *', field('minute', '*/5/2', 'step must be a whole number between 1 and 127')),
    ('/5 * * * *', field('minute', '/5', 'values must be between 0 and 59')),
    ('1-5/2 * * * *', None),
    ('5/10 * * * *', None),
    ('5-1 * * * *', field('minute', '5-1', 'range start must not exceed range end')),
    ('1-2-3 * * * *', field('minute', '1-2-3', 'values must be between 0 and 59')),
    ('1- * * * *', field('minute', '1-', 'values must be between 0 and 59')),
    ('-1 * * * *', field('minute', '-1', 'values must be between 0 and 59')),
    ('-0 * * * *', None),
    ('+5 * * * *', None),
    ('1_0 * * * *', None),
    ('_1 * * * *', field('minute', '_1', 'values must be between 0 and 59')),
    ('1_ * * * *', field('minute', '1_', 'values must be between 0 and 59')),
    ('256 * * * *', field('minute', '256', 'values must be between 0 and 59')),
    ('007 * * * *', None),
    ('1,,2 * * * *', field('minute', '1,,2', 'list entries cannot be empty')),
    (',1 * * * *', field('minute', ',1', 'list entries cannot be empty')),
    ('1, * * * *', field('minute', '1,', 'list entries cannot be empty')),
    ('1,2,3 * * * *', None),
    ('* * * JAN *', None),
    ('* * * jan-mar *', None),
    ('* * * January *', None),
    ('* * * DEC-JAN *', field('month', 'DEC-JAN', 'range start must not exceed range end')),
    ('* * * JANU *', field('month', 'JANU', 'values must be between 1 and 12 or JAN-DEC')),
    ('* * * * MON', None),
    ('* * * * mon-fri', None),
    ('* * * * Sunday', None),
    ('* * * * SUN-SAT', None),
    ('* * * * 7-1', field('weekday', '7-1', 'range start must not exceed range end')),
    ('* * * * 5-7', None),
    ('* * * * 0-7', None),
    ('MON * * * *', field('minute', 'MON', 'values must be between 0 and 59')),
    ('* JAN * * *', field('hour', 'JAN', 'values must be between 0 and 23')),
    ('* * * * 1#2', field('weekday', '1#2', 'values must be between 0 and 7 or SUN-SAT')),
    ('* * L * *', field('day-of-month', 'L', 'values must be between 1 and 31')),
    ('* * * * 5L', field('weekday', '5L', 'values must be between 0 and 7 or SUN-SAT')),
    ('* * 15W * *', field('day-of-month', '15W', 'values must be between 1 and 31')),
    ('* * LW * *', field('day-of-month', 'LW', 'values must be between 1 and 31')),
    ('? * * * *', field('minute', '?', 'values must be between 0 and 59')),
    ('* * ? * *', field('day-of-month', '?', 'values must be between 1 and 31')),
    ('* * * * ?', field('weekday', '?', 'values must be between 0 and 7 or SUN-SAT')),
    ('H * * * *', field('minute', 'H', 'values must be between 0 and 59')),
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
    ('0 61 * * * *', field('minute', '61', 'values must be between 0 and 59')),
    ('0 ? * * * *', field('minute', '?', 'values must be between 0 and 59')),
    ('0 * * L * *', field('day-of-month', 'L', 'values must be between 1 and 31')),
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
    ('0 0 31 2 * *', field('hour', '31', 'values must be between 0 and 23')),
    ('١ * * * *', field('minute', '١', 'values must be between 0 and 59')),
    ('* * * * ١', field('weekday', '١', 'values must be between 0 and 7 or SUN-SAT')),
    ('١ * * * * *', seconds('١', 'value must be an integer')),
    ('99999999999999999999 * * * *',
     field('minute', '99999999999999999999', 'values must be between 0 and 59')),
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
    ("61 * * * *", "Nope/Zone", field('minute', '61', 'values must be between 0 and 59')),
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
