"""Wire strings in ``text`` columns: PostgreSQL's text cannot hold NUL, a wire string can.

``to_text`` writes NUL as ``\\0`` and a backslash as ``\\\\``, so every string has one stored form and
``from_text`` gives it back; a string with neither (nearly all) is stored as it is. Keys that are only
compared (a cron's name, a webhook's id) need ``to_text`` alone; values read back need both.
"""
from __future__ import annotations

import re

_ESCAPED = re.compile(r"\\(.)", re.DOTALL)


def to_text(value: str) -> str:
    if "\\" in value or "\x00" in value:
        return value.replace("\\", "\\\\").replace("\x00", "\\0")
    return value


def from_text(value: str) -> str:
    if "\\" not in value:
        return value
    return _ESCAPED.sub(lambda m: "\x00" if m.group(1) == "0" else m.group(1), value)
