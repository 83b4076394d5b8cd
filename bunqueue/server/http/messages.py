"""One HTTP request as the API reads it, and one answer as the connection writes it: plain objects, no I/O."""
from __future__ import annotations

import time
from email.utils import formatdate
from http import HTTPStatus
from urllib.parse import parse_qsl

JSON_TYPE = "application/json"
TEXT_TYPE = "text/plain;charset=utf-8"


class HttpRequest:
    """A parsed request. Header names are lowercase; a repeated header keeps its first value."""

    __slots__ = ("body", "headers", "keep_alive", "method", "path", "query_string", "raw_headers", "rest", "target",
                 "version")

    def __init__(self, method: str, target: bytes, version: str, raw_headers: list[tuple[bytes, bytes]],
                 body: bytes) -> None:
        self.method = method
        self.target = target
        self.version = version
        self.raw_headers = raw_headers
        self.body = body
        path, _, query = target.partition(b"?")
        # The path as sent (percent escapes included), as the route table matches it.
        self.path = path.decode("latin-1")
        self.query_string = query.decode("latin-1")
        # Built from the last header to the first, so that a repeated name keeps its first value.
        self.headers = {name.decode("latin-1").lower(): value.decode("latin-1")
                        for name, value in reversed(raw_headers)}
        # Bytes that followed an upgrade request (a WebSocket's first frames): they belong to the stream.
        self.rest = b""
        self.keep_alive = True

    def query(self) -> dict[str, list[str]]:
        """Each query parameter with all of its values, in order (``+`` and escapes decoded)."""
        if not self.query_string:
            return {}
        found: dict[str, list[str]] = {}
        for key, value in parse_qsl(self.query_string, keep_blank_values=True):
            found.setdefault(key, []).append(value)
        return found

    def raw(self) -> bytes:
        """The request as it came (the same bytes but for header-name case): for a stream handler that
        parses it again."""
        lines = [b"%s %s HTTP/%s" % (self.method.encode(), self.target, self.version.encode())]
        lines += [name + b": " + value for name, value in self.raw_headers]
        return b"\r\n".join(lines) + b"\r\n\r\n" + self.body + self.rest


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
        key = (self.status, self.content_type, tuple(headers.items()) if headers else None)
        parts = _HEADS.get(key)
        if parts is None:
            parts = _head_parts(*key)
            if len(_HEADS) < MAX_CACHED_HEADS:
                _HEADS[key] = parts
        start, end = parts
        body = self.body
        tail = _CLOSE if not keep_alive else _KEEP_ALIVE if version == "1.0" else b"\r\n"
        if end is None:
            # No Content-Length: ``start`` runs up to the Date header.
            return b"".join((start, http_date(), tail, body if with_body else b""))
        return b"".join((start, b"%d" % len(body), end, http_date(), tail, body if with_body else b""))


# What a head holds besides its Content-Length value and its Date and Connection headers, made once for
# each status, content type and extra headers (a few dozen kinds in all; past the bound, made each time).
HeadKey = tuple[int, str | None, tuple[tuple[str, str], ...] | None]
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
