"""Wire values in columns: PostgreSQL's text cannot hold NUL and its bigint ends at 2^63, a wire value can
go past both.

``to_text`` writes NUL as ``\\0`` and a backslash as ``\\\\``, so every string has one stored form and
``from_text`` gives it back; a string with neither (nearly all) is stored as it is.

Every connection of the engine is a ``TextConnection``: each string argument of a statement, alone or in an
array, is stored through ``to_text``, and each ``text`` value a statement returns comes back through
``from_text`` (``decode_text``). So a job id, key, token or name with NUL round-trips exactly, as in memory,
and no statement fails on one. ``text[]`` results are not decoded (asyncpg takes no codec for an array
type): a reader of one applies ``from_text`` to its elements.
"""
from __future__ import annotations

import re
from typing import Any

import asyncpg

_ESCAPED = re.compile(r"\\(.)", re.DOTALL)


def to_text(value: str) -> str:
    if "\\" in value or "\x00" in value:
        return value.replace("\\", "\\\\").replace("\x00", "\\0")
    return value


def from_text(value: str) -> str:
    if "\\" not in value:
        return value
    return _ESCAPED.sub(lambda m: "\x00" if m.group(1) == "0" else m.group(1), value)


INT_MAX = 2 ** 61
INT_MIN = -INT_MAX
# A wire string that is a btree key (a job id, a unique key, a worker id) is refused past this many
# characters: PostgreSQL caps an index entry near 2,700 bytes, and 512 characters fit whatever they are
# (4 bytes each in UTF-8, 2 for an escaped one) beside the namespace.
MAX_KEY_CHARS = 512


def bigint_sql(expr: str) -> str:
    """SQL for a float expression (a time plus a wire duration) stored as bigint within the same bound."""
    return f"least(greatest({expr}, {INT_MIN}), {INT_MAX})::bigint"


def _stored(value: Any) -> Any:
    kind = type(value)
    if kind is str:
        return to_text(value)
    if kind is int:
        return min(max(value, INT_MIN), INT_MAX)
    return value


def _changes(value: Any) -> bool:
    """Whether ``value`` has another stored form (``_stored``)."""
    kind = type(value)
    if kind is str:
        return "\\" in value or "\x00" in value
    return kind is int and not INT_MIN <= value <= INT_MAX


def stored_args(args: Any) -> Any:
    """``args`` with every string and integer, alone or in a list, in its stored form; ``args`` itself when
    none changes (nearly always), so a statement pays one scan of its arguments."""
    out: list[Any] | None = None
    for i, arg in enumerate(args):
        if type(arg) is list:
            stored = _stored_list(arg)
            if stored is not arg:
                out = list(args) if out is None else out
                out[i] = stored
        elif _changes(arg):
            out = list(args) if out is None else out
            out[i] = _stored(arg)
    return args if out is None else tuple(out)


def _stored_list(values: list[Any]) -> list[Any]:
    # A column's values are of one type or null: a join, or a min and max, look at all of them at C speed.
    if _unchanged(values):
        return values
    present = [v for v in values if v is not None]
    if len(present) < len(values) and _unchanged(present):
        return values
    for i, value in enumerate(values):
        if _changes(value):
            return values[:i] + [_stored(v) for v in values[i:]]
    return values


def _unchanged(values: list[Any]) -> bool:
    """True when no value of ``values`` changes (``_changes``), as far as one look of C speed tells."""
    try:
        joined = "".join(values)
    except TypeError:
        pass
    else:
        return "\\" not in joined and "\x00" not in joined
    try:
        b"".join(values)
        return True
    except TypeError:
        pass
    try:
        return not values or bool(INT_MIN <= min(values) and max(values) <= INT_MAX)
    except TypeError:
        return False


class TextConnection(asyncpg.Connection):  # type: ignore[misc]
    """A connection whose statements store their arguments as ``stored_args`` does (see the module's note)."""

    async def _execute(self, query: str, args: Any, limit: int, timeout: Any, **kwargs: Any) -> Any:
        return await super()._execute(query, stored_args(args), limit, timeout, **kwargs)


def _text_out(value: Any) -> bytes:
    return str(value).encode()


def _text_in(data: bytes) -> str:
    return from_text(data.decode())


async def decode_text(conn: asyncpg.Connection) -> None:
    """Give ``text`` results back through ``from_text``; arguments are already stored forms, kept as they are.
    The binary format (the same UTF-8 bytes as the text one) lets a binary COPY write text columns."""
    await conn.set_type_codec("text", schema="pg_catalog", encoder=_text_out, decoder=_text_in, format="binary")
