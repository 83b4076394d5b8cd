"""Replies as JSON: through the same encoder as a TCP reply, so both transports show the same fields."""
from __future__ import annotations

import json
import math
from typing import Any

import msgpack

from bunqueue._core.packer import ReplyPacker

_PACKER = ReplyPacker()
_UNDEFINED = object()


def _ext(code: int, data: bytes) -> Any:
    return _UNDEFINED if code == 0 else None


def _plain(value: Any) -> Any:
    """JSON's view of a wire value: JS `undefined` is left out of objects and null in arrays (as
    JSON.stringify does), integral floats within 2^53 print as integers."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if v is not _UNDEFINED}
    if isinstance(value, list):
        return [None if v is _UNDEFINED else _plain(v) for v in value]
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        if value.is_integer() and abs(value) < 2**53:
            return int(value)
    return value


# Made once: json.dumps with options builds an encoder per call.
_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
# Values that read the same on the wire and in JSON.
_AS_IS = frozenset({str, bool, type(None)})
# The wire's integers are 64-bit, signed or not.
_INT_MIN = -(2**63)
_INT_END = 2**64
# What ``_ready`` answers for a value that only the wire round trip can render.
_NOT_PLAIN = object()


def _ready(value: Any) -> Any:
    """``_plain`` of a value made only of str-keyed dicts, lists, strings, numbers, booleans and None (the
    wire leaves those as they are, so the round trip can be skipped); ``_NOT_PLAIN`` for anything else."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return value
    if kind is int:
        # A larger one takes the round trip, which refuses it.
        return value if _INT_MIN <= value < _INT_END else _NOT_PLAIN
    if kind is float:
        if value != value or value in (math.inf, -math.inf):
            return None
        return int(value) if value.is_integer() and abs(value) < 2**53 else value
    if kind is dict:
        out = {}
        for key, item in value.items():
            if type(key) is not str:
                return _NOT_PLAIN
            # Strings, booleans, None and integers are most of a reply: taken without a call.
            kind = type(item)
            if kind not in _AS_IS and not (kind is int and _INT_MIN <= item < _INT_END):
                item = _ready(item)
                if item is _NOT_PLAIN:
                    return _NOT_PLAIN
            out[key] = item
        return out
    if kind is list:
        items = []
        for item in value:
            kind = type(item)
            if kind not in _AS_IS and not (kind is int and _INT_MIN <= item < _INT_END):
                item = _ready(item)
                if item is _NOT_PLAIN:
                    return _NOT_PLAIN
            items.append(item)
        return items
    return _NOT_PLAIN


def dumps(doc: Any) -> str:
    """A reply as JSON, through the same encoder as a TCP reply so both transports show the same fields."""
    ready = _ready(doc)
    if ready is not _NOT_PLAIN:
        return _encode(ready)
    wire = msgpack.unpackb(_PACKER.pack(doc), raw=False, strict_map_key=False, ext_hook=_ext)
    return _encode(_plain(wire))


def _js_int(text: str) -> int | float:
    """A JSON integer as JSON.parse reads it where the wire cannot carry it: a number (Infinity past the
    float range) instead of an integer the commands' bounds cannot compare with a float."""
    if len(text) < 20:
        return int(text)
    value = int(text) if len(text) < 40 else _INT_END
    return value if _INT_MIN <= value < _INT_END else float(text)


_decode = json.JSONDecoder(parse_int=_js_int).decode


class TooDeep(ValueError):
    """A JSON body nested deeper than the parser can follow."""


def loads(text: str) -> Any:
    """A request body's JSON; ValueError when it is not JSON, ``TooDeep`` when nested too deeply."""
    try:
        return _decode(text)
    except RecursionError as exc:
        raise TooDeep(text[:40]) from exc
