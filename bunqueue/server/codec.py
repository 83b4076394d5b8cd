"""MessagePack request bodies as the JS clients write them. Replies are packed by ``_core.packer``."""
from __future__ import annotations

from typing import Any

import msgpack

from bunqueue import errors
from bunqueue._core.unpacker import RequestUnpacker
from bunqueue.errors import BadFrame

__all__ = ["PAYLOAD_FIELDS", "UNDEFINED", "BadFrame", "decode_command", "ext_hook", "without_undefined"]

#: msgpackr's JS ``undefined`` (fixext 1, type 0, ``d4 00 00``). Published clients send every unset option
#: as this value (2.7.x even inside each job of a PUSHB), and the reference reads it as absent.
UNDEFINED = msgpack.ExtType(0, b"\x00")

#: Request fields that hold the user's own values (job data, results, progress, texts). What is inside
#: them is kept as sent, ``undefined`` included, and written back as the same three bytes; everything else
#: in a request is an option, where ``undefined`` means absent.
PAYLOAD_FIELDS = frozenset({"data", "result", "results", "progress", "message", "error"})


def ext_hook(code: int, data: bytes) -> Any:
    """The ``ext_hook`` for ``msgpack.unpackb`` where a body is read outside the server's request path
    (stored rows): type 0 is ``UNDEFINED``, other types stay ``ExtType``."""
    if code == 0:
        return UNDEFINED
    return msgpack.ExtType(code, data)


# Frames are decoded on the event loop's thread only, one at a time, so one reader (and its table of short
# strings) serves every connection.
_reader = RequestUnpacker(UNDEFINED, msgpack.ExtType, msgpack.Timestamp)
_unpack = _reader.unpack


def decode_command(body: bytes) -> dict[str, Any]:
    """The request map of a frame, with every option sent as JS ``undefined`` left out (``without_undefined``)."""
    try:
        value = _unpack(body)
    except Exception:
        # msgpackr reads the never-used byte 0xc1 as a value, so the reference answers "Invalid command".
        raise BadFrame(errors.INVALID_COMMAND if body == b"\xc1" else errors.INVALID_COMMAND_FORMAT) from None
    if type(value) is not dict:
        raise BadFrame(errors.INVALID_COMMAND_FORMAT if value is None else errors.INVALID_COMMAND)
    if _reader.saw_undefined:
        return without_undefined(value)
    return value


def without_undefined(request: dict[Any, Any]) -> dict[Any, Any]:
    """``request`` with every option whose value is ``UNDEFINED`` left out, at any depth.

    This is the one rule for every command and every transport: a map value that is ``UNDEFINED`` is
    absent, in the request itself, in each map of a list (the jobs of PUSHB/PUSHF) and in nested option
    maps (``dedup``, ``repeat``, ``backoff``, ``group``, ``jobOptions``). The values of ``PAYLOAD_FIELDS``
    are not looked into. An ``UNDEFINED`` element of a list stays, so that the command's own check names
    the field (``jobs[0]``, ``ids``) rather than see a shorter list.
    """
    return {
        key: _options(item) if type(item) in _NESTED and key not in PAYLOAD_FIELDS else item
        for key, item in request.items()
        if item is not UNDEFINED
    }


def _options_list(items: list[Any]) -> list[Any]:
    return [_options(item) if type(item) in _NESTED else item for item in items]


def _options(value: Any) -> Any:
    return without_undefined(value) if type(value) is dict else _options_list(value)


_NESTED = frozenset({dict, list})
