"""Replies as JSON: through the same encoder as a TCP reply, so both transports show the same fields."""
from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import msgpack

from bunqueue._core.jsonreply import JsonWriter
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
# Replies made of plain values (most of them) are written in one pass, skipping the wire round trip.
_WRITER = JsonWriter()
# The wire's integers are 64-bit, signed or not.
_INT_MIN = -(2**63)
_INT_END = 2**64


def _through_the_wire(doc: Any) -> str:
    wire = msgpack.unpackb(_PACKER.pack(doc), raw=False, strict_map_key=False, ext_hook=_ext)
    return _encode(_plain(wire))


def json_bytes(doc: Any) -> bytes:
    """A reply as UTF-8 JSON, through the same encoder as a TCP reply so both transports show the same
    fields."""
    written = _WRITER.plain_json(doc)
    return written if written is not None else _through_the_wire(doc).encode()


def dumps(doc: Any) -> str:
    """``json_bytes`` as text."""
    written = _WRITER.plain_json(doc)
    return written.decode() if written is not None else _through_the_wire(doc)


def _js_int(text: str) -> int | float:
    """A JSON integer as JSON.parse reads it where the wire cannot carry it: a number (Infinity past the
    float range) instead of an integer the commands' bounds cannot compare with a float."""
    if len(text) < 20:
        return int(text)
    value = int(text) if len(text) < 40 else _INT_END
    return value if _INT_MIN <= value < _INT_END else float(text)


# The decoder's own scanner, called without JSONDecoder.decode's Python wrapper and its two regex passes.
_scan: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder(parse_int=_js_int).scan_once  # type: ignore[attr-defined]
# What JSON counts as whitespace around a value.
_SPACE = " \t\n\r"


class TooDeep(ValueError):
    """A JSON body nested deeper than the parser can follow."""


def loads(text: str) -> Any:
    """A request body's JSON; ValueError when it is not JSON, ``TooDeep`` when nested too deeply."""
    start = len(text) - len(text.lstrip(_SPACE))
    try:
        doc, end = _scan(text, start)
    except StopIteration:
        raise ValueError("no JSON value") from None
    except RecursionError as exc:
        raise TooDeep(text[:40]) from exc
    if end != len(text) and text[end:].strip(_SPACE):
        raise ValueError("extra data after the JSON value")
    return doc
