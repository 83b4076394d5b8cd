"""MessagePack request bodies as the JS clients write them. Replies are packed by ``_core.packer``."""
from __future__ import annotations

from typing import Any

import msgpack

from bunqueue import errors
from bunqueue.errors import BadFrame

#: msgpackr's JS ``undefined`` (fixext 1, type 0, ``d4 00 00``). A command field holding it is absent, as
#: the reference reads it. Inside a value the broker keeps (job data, a result) it stays, and is written
#: back as the same three bytes, as the reference does: the TS client sends `{by: undefined}` results.
UNDEFINED = msgpack.ExtType(0, b"\x00")


def _ext_hook(code: int, data: bytes) -> Any:
    if code == 0:
        return UNDEFINED
    return msgpack.ExtType(code, data)


_unpackb = msgpack.unpackb


def decode_command(body: bytes) -> dict[str, Any]:
    """The request map of a frame, with JS-undefined values dropped as the reference reads them."""
    if body == b"\xc1":
        # msgpackr reads the never-used byte 0xc1 as a value, so the reference answers "Invalid command".
        raise BadFrame(errors.INVALID_COMMAND)
    try:
        value = _unpackb(body, raw=False, strict_map_key=False, ext_hook=_ext_hook)
    except Exception:
        raise BadFrame(errors.INVALID_COMMAND_FORMAT) from None
    if type(value) is not dict:
        raise BadFrame(errors.INVALID_COMMAND_FORMAT if value is None else errors.INVALID_COMMAND)
    for item in value.values():
        if item is UNDEFINED:
            return _drop_undefined(value)
    return value


def _drop_undefined(value: dict[Any, Any]) -> dict[Any, Any]:
    out = {k: v for k, v in value.items() if v is not UNDEFINED}
    jobs = out.get("jobs")
    if type(jobs) is list:
        out["jobs"] = [_drop_undefined(j) if type(j) is dict else j for j in jobs]
    return out
