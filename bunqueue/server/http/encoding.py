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


# Values that the wire encoder leaves as they are: a reply made only of them needs no round trip.
_AS_IS = frozenset({str, bool, int, type(None)})
# Made once: json.dumps with options builds an encoder per call.
_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def dumps(doc: Any) -> str:
    """A reply as JSON, through the same encoder as a TCP reply so both transports show the same fields."""
    if type(doc) is dict and all(type(v) in _AS_IS for v in doc.values()):
        # The common small replies ({ok, id}, {ok}, {ok, error}) as they stand.
        return _encode(doc)
    wire = msgpack.unpackb(_PACKER.pack(doc), raw=False, strict_map_key=False, ext_hook=_ext)
    return _encode(_plain(wire))
