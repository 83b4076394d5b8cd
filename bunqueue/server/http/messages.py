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
        headers: dict[str, str] = {}
        for name, value in raw_headers:
            headers.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))
        self.headers = headers
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

    def head(self, keep_alive: bool, version: str) -> bytes:
        """The status line and headers (the body is written after them unless the request was HEAD)."""
        status = self.status
        lines = [f"HTTP/1.1 {status} {_reason(status)}"]
        if self.content_type is not None:
            lines.append(f"Content-Type: {self.content_type}")
        # A 304 has no body of its own: a length would describe the body it stands for.
        if status not in (204, 304) and status >= 200:
            lines.append(f"Content-Length: {len(self.body)}")
        if self.headers:
            lines.extend(f"{name}: {value}" for name, value in self.headers.items())
        lines.append(f"Date: {http_date()}")
        if not keep_alive:
            lines.append("Connection: close")
        elif version == "1.0":
            lines.append("Connection: keep-alive")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


_REASONS = {int(s): s.phrase for s in HTTPStatus}


def _reason(status: int) -> str:
    return _REASONS.get(status, "Unknown")


class _DateHeader:
    __slots__ = ("second", "text")

    def __init__(self) -> None:
        self.second = -1
        self.text = ""

    def __call__(self) -> str:
        now = int(time.time())
        if now != self.second:
            self.text = formatdate(now, usegmt=True)
            self.second = now
        return self.text


# The Date header's value, formatted once a second.
http_date = _DateHeader()
