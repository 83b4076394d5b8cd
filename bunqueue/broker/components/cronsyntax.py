"""Which cron expressions a schedule may be, by the reference's rules, and the words for the rest.

The reference takes a macro (``@daily``...), 5 calendar fields, or 6 with leading seconds. It reads the
seconds field itself (numbers, ``*``, lists, ranges, steps) and hands the calendar fields to Bun's cron
parser, which also takes names of months and weekdays (``JAN``, ``monday``, any case), 7 for Sunday, and
numbers as Zig reads them (a sign, ``_`` between digits). Nothing else: no ``?``, ``L``, ``W`` or ``#``.

``croniter_fields`` checks an expression and writes it the way croniter reads it the same: each field a
plain list of numbers, or ``*`` where it was ``*`` (croniter, like Bun, matches a day by day-of-month OR
weekday only when neither field is ``*``). Occurrences are croniter's business.

A refused field is named with its bounds, as the reference words its seconds field; for the calendar
fields the reference passes on Bun's parser's words ("value out of range for field"), which name neither.
"""
from __future__ import annotations

import re
from typing import NoReturn

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
# What JavaScript's trim() and \s take for white space (Python's str.split takes a different set).
_JS_SPACE = "\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_SPACES = re.compile(f"[{_JS_SPACE}]+")
_EDGES = re.compile(f"^[{_JS_SPACE}]+|[{_JS_SPACE}]+$")

_MONTHS = {
    name: number
    for number, names in enumerate(
        (("jan", "january"), ("feb", "february"), ("mar", "march"), ("apr", "april"), ("may",),
         ("jun", "june"), ("jul", "july"), ("aug", "august"), ("sep", "september"), ("oct", "october"),
         ("nov", "november"), ("dec", "december")),
        start=1,
    )
    for name in names
}
_WEEKDAYS = {
    name: number
    for number, names in enumerate(
        (("sun", "sunday"), ("mon", "monday"), ("tue", "tuesday"), ("wed", "wednesday"),
         ("thu", "thursday"), ("fri", "friday"), ("sat", "saturday"))
    )
    for name in names
}
# (field name, lowest, highest, names, how the names read) of each calendar field.
_CALENDAR = (
    ("minute", 0, 59, None, None),
    ("hour", 0, 23, None, None),
    ("day-of-month", 1, 31, None, None),
    ("month", 1, 12, _MONTHS, "JAN-DEC"),
    ("weekday", 0, 7, _WEEKDAYS, "SUN-SAT"),
)
# Bun reads a step as a 7-bit and a value as an 8-bit unsigned integer.
_MAX_STEP = 127
_MAX_VALUE = 255


def croniter_fields(expression: str) -> str:
    """``expression`` as croniter reads it the same (6 fields when it has seconds); CommandError otherwise,
    with the reason the reference gives after ``Invalid cron expression: ``."""
    text = _EDGES.sub("", MACROS.get(_EDGES.sub("", expression).lower(), expression))
    fields = _SPACES.split(text) if text else []
    if len(fields) == 1 and text.startswith("@"):
        raise CommandError(errors.invalid_cron(errors.CRON_SYNTAX))
    if len(fields) == 6:
        seconds = _seconds(fields[0])
        return " ".join([",".join(map(str, seconds)), *_calendar(fields[1:])])
    if len(fields) == 5:
        return " ".join(_calendar(fields))
    raise CommandError(errors.invalid_cron(errors.CRON_FIELD_COUNT))


def _calendar(fields: list[str]) -> list[str]:
    if fields[0].startswith("@"):
        # Bun takes a leading "@" for a macro, and the macros were expanded already.
        raise CommandError(errors.invalid_cron(errors.CRON_SYNTAX))
    out = []
    for field, (name, low, high, names, shown_names) in zip(fields, _CALENDAR):
        values = _calendar_field(_FieldRules(name, field, low, high, names, shown_names))
        out.append("*" if field == "*" else ",".join(map(str, values)))
    return out


class _FieldRules:
    """One calendar field being read, and how to refuse it."""

    __slots__ = ("name", "text", "low", "high", "names", "shown_names")

    def __init__(self, name: str, text: str, low: int, high: int, names: dict[str, int] | None,
                 shown_names: str | None) -> None:
        self.name, self.text, self.low, self.high = name, text, low, high
        self.names, self.shown_names = names, shown_names

    def refuse(self, reason: str) -> NoReturn:
        raise CommandError(errors.invalid_cron(errors.cron_field(self.name, self.text, reason)))

    def value(self, text: str) -> int:
        names = self.names
        if names is not None and text.isascii() and text.lower() in names:
            return names[text.lower()]
        value = _zig_unsigned(text, _MAX_VALUE)
        if value is None or not self.low <= value <= self.high:
            self.refuse(errors.cron_values(self.low, self.high, self.shown_names))
        return value


def _calendar_field(rules: _FieldRules) -> list[int]:
    values: set[int] = set()
    for part in rules.text.split(","):
        if not part:
            rules.refuse(errors.SECONDS_EMPTY_ENTRY)
        pieces = part.split("/")
        if len(pieces) > 2:
            rules.refuse(errors.CRON_STEP_RANGE)
        step = 1
        if len(pieces) == 2:
            step = _zig_unsigned(pieces[1], _MAX_STEP) or 0
            if not step:
                rules.refuse(errors.CRON_STEP_RANGE)
        base = pieces[0]
        if base == "*":
            start, end = rules.low, rules.high
        elif (bounds := _range(base)) is not None:
            start, end = rules.value(bounds[0]), rules.value(bounds[1])
            if start > end:
                rules.refuse(errors.SECONDS_RANGE_ORDER)
        else:
            start = rules.value(base)
            end = rules.high if len(pieces) == 2 else start
        values.update(range(start, end + 1, step))
    if rules.names is _WEEKDAYS and 7 in values:
        values.discard(7)
        values.add(0)
    return sorted(values)


def _range(base: str) -> tuple[str, str] | None:
    """``base`` cut at its one inner '-', or None when it is not a range (Bun reads it as one value)."""
    cut = base.find("-")
    if cut <= 0 or cut == len(base) - 1 or "-" in base[cut + 1 :]:
        return None
    return base[:cut], base[cut + 1 :]


def _zig_unsigned(text: str, highest: int) -> int | None:
    """``text`` read as Zig's parseInt reads a decimal unsigned integer up to ``highest``, or None.

    A leading sign is allowed (minus only before zero), and underscores between digits.
    """
    negative = text[:1] == "-"
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits or digits[0] == "_" or digits[-1] == "_":
        return None
    value = _decimal(digits.replace("_", ""))
    if value is None or (negative and value):
        return None
    return value if value <= highest else None


def _decimal(text: str) -> int | None:
    """ASCII digits as a number (any number past 9,999 as 10,000: every bound here is below), else None."""
    if not (text.isascii() and text.isdigit()):
        return None
    significant = text.lstrip("0")
    return int(significant or "0") if len(significant) <= 4 else 10_000


def _seconds(field: str) -> list[int]:
    """The leading seconds field's values, by the reference's own parser."""
    selected: set[int] = set()
    for segment in field.split(","):
        if not segment:
            _refuse_seconds(field, errors.SECONDS_EMPTY_ENTRY)
        pieces = segment.split("/")
        if len(pieces) > 2 or not pieces[0] or pieces[1:] == [""]:
            _refuse_seconds(field, errors.seconds_segment(segment))
        has_step = len(pieces) == 2
        step = _seconds_number(field, pieces[1], "step") if has_step else 1
        if not 1 <= step <= 60:
            _refuse_seconds(field, errors.SECONDS_STEP_RANGE)
        base = pieces[0]
        if base == "*":
            start, end = 0, 59
        elif "-" in base:
            bounds = base.split("-")
            if len(bounds) != 2 or not bounds[0] or not bounds[1]:
                _refuse_seconds(field, errors.seconds_range(base))
            start = _seconds_number(field, bounds[0], "range start")
            end = _seconds_number(field, bounds[1], "range end")
        else:
            if has_step:
                _refuse_seconds(field, errors.SECONDS_STEP_BASE)
            start = end = _seconds_number(field, base, "value")
        if not (0 <= start <= 59 and 0 <= end <= 59):
            _refuse_seconds(field, errors.SECONDS_VALUE_RANGE)
        if start > end:
            _refuse_seconds(field, errors.SECONDS_RANGE_ORDER)
        selected.update(range(start, end + 1, step))
    return sorted(selected)


def _seconds_number(field: str, text: str, label: str) -> int:
    value = _decimal(text)
    if value is None:
        _refuse_seconds(field, errors.seconds_not_integer(label))
    return value


def _refuse_seconds(field: str, reason: str) -> NoReturn:
    raise CommandError(errors.invalid_cron(errors.cron_field("seconds", field, reason)))
