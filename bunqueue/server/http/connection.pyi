import asyncio
from collections import deque
from collections.abc import Callable
from typing import Protocol

from bunqueue._core.httprequest import HttpRequest, RequestReader
from bunqueue._core.httpresponse import HttpResponse
from bunqueue.server.http.api import HttpApi

MAX_BODY_BYTES: int
MAX_HEAD_BYTES: int
MAX_PIPELINED: int
KEEPALIVE_S: float
LINGER_S: float
INTERNAL_ERROR: bytes
REFUSALS: dict[int, HttpResponse]
CONTINUE: bytes

class Listener(Protocol):
    """What a connection needs of the listener that accepted it."""

    # The open connections, and whether the server is shutting down.
    connections: set[HttpConnection]
    closing: bool

    def with_stream_server(self, then: Callable[[Callable[[], asyncio.Protocol] | None], None]) -> None: ...

def text_answer(status: int, text: str) -> HttpResponse: ...

class HttpConnection(asyncio.Protocol):
    listener: Listener
    api: HttpApi
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport | None
    queue: deque[HttpRequest]
    reader: RequestReader
    waiting: asyncio.Task[None] | None
    final: HttpResponse | None
    closing: bool
    streaming: HttpRequest | None
    def __init__(self, listener: Listener, api: HttpApi) -> None: ...
    def check_idle(self) -> None: ...
    def take_over(self, server: Callable[[], asyncio.Protocol] | None) -> None: ...
    def close_if_idle(self) -> None: ...
