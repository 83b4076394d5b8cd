"""One answer as the connection writes it: a plain object, no I/O (a request is ``bunqueue._core.httprequest``'s)."""
from __future__ import annotations

import itertools
import time
from email.utils import formatdate
from http import HTTPStatus

JSON_TYPE = "application/json"
TEXT_TYPE = "text/plain;charset=utf-8"


class HttpResponse:
    __slots__ = ("body", "content_type", "headers", "status")

    def __init__(self, status: int, body: bytes, content_type: str | None = JSON_TYPE,
                 headers: dict[str, str] | None = None) -> None:
        self.status = status
        self.body = body
        self.content_type = content_type
        # Headers besides Content-Type, Content-Length, Date and Connection.
        self.headers = headers

    def message(self, keep_alive: bool, version: str, with_body: bool) -> bytes:
        """The status line and headers, then the body unless ``with_body`` is false (a HEAD request)."""
        headers = self.headers
        if type(headers) is FixedHeaders:
            key: HeadKey = (self.status, self.content_type, headers.serial)
        else:
            key = (self.status, self.content_type, tuple(headers.items()) if headers else None)
        parts = _HEADS.get(key)
        if parts is None:
            parts = _head_parts(self.status, self.content_type, tuple(headers.items()) if headers else None)
            if len(_HEADS) < MAX_CACHED_HEADS:
                _HEADS[key] = parts
        start, end = parts
        body = self.body
        tail = _CLOSE if not keep_alive else _KEEP_ALIVE if version == "1.0" else b"\r\n"
        if end is None:
            # No Content-Length: ``start`` runs up to the Date header.
            return b"".join((start, http_date(), tail, body if with_body else b""))
        return b"".join((start, b"%d" % len(body), end, http_date(), tail, body if with_body else b""))


class FixedHeaders(dict[str, str]):
    """Headers that many answers share and nobody changes (the API's CORS headers): their heads are found by
    a number of their own instead of by their items, which would be copied and hashed for every answer."""

    def __init__(self, headers: dict[str, str]) -> None:
        super().__init__(headers)
        self.serial = next(_serials)


_serials = itertools.count()

# What a head holds besides its Content-Length value and its Date and Connection headers, made once for
# each status, content type and extra headers (a few dozen kinds in all; past the bound, made each time).
HeadKey = tuple[int, str | None, tuple[tuple[str, str], ...] | int | None]
_HEADS: dict[HeadKey, tuple[bytes, bytes | None]] = {}
MAX_CACHED_HEADS = 256
_CLOSE = b"Connection: close\r\n\r\n"
_KEEP_ALIVE = b"Connection: keep-alive\r\n\r\n"


def _head_parts(status: int, content_type: str | None,
                headers: tuple[tuple[str, str], ...] | None) -> tuple[bytes, bytes | None]:
    """The head up to the Content-Length value and from it to the Date header (None: no length)."""
    lines = [f"HTTP/1.1 {status} {_reason(status)}"]
    if content_type is not None:
        lines.append(f"Content-Type: {content_type}")
    extra = "".join(f"{name}: {value}\r\n" for name, value in headers or ())
    # A 304 has no body of its own: a length would describe the body it stands for.
    if status not in (204, 304) and status >= 200:
        lines.append("Content-Length: ")
        return "\r\n".join(lines).encode("latin-1"), ("\r\n" + extra + "Date: ").encode("latin-1")
    return ("\r\n".join(lines) + "\r\n" + extra + "Date: ").encode("latin-1"), None


_REASONS = {int(s): s.phrase for s in HTTPStatus}


def _reason(status: int) -> str:
    return _REASONS.get(status, "Unknown")


class _DateHeader:
    __slots__ = ("second", "value")

    def __init__(self) -> None:
        self.second = -1
        self.value = b""

    def __call__(self) -> bytes:
        now = int(time.time())
        if now != self.second:
            self.value = formatdate(now, usegmt=True).encode("latin-1") + b"\r\n"
            self.second = now
        return self.value


# The Date header's value and line end, formatted once a second.
http_date = _DateHeader()
