from collections import deque

REQUEST_LINE_BYTES: int
HEADER_LINE_BYTES: int
PARSED: int
UPGRADED: int
REFUSED: int

class HttpRequest:
    method: str
    target: bytes
    version: str
    raw_headers: list[tuple[bytes, bytes]]
    body: bytes
    path: str
    query_string: str
    headers: dict[str, str]
    rest: bytes
    keep_alive: bool
    def __init__(
        self, method: str, target: bytes, version: str, raw_headers: list[tuple[bytes, bytes]], body: bytes
    ) -> None: ...
    def query(self) -> dict[str, list[str]]: ...
    def raw(self) -> bytes: ...

class RequestReader:
    parser: object
    refused: int
    continues: int
    upgrade_at: int
    def __init__(self, requests: deque[HttpRequest], max_head: int, max_body: int) -> None: ...
    def feed(self, piece: bytes | memoryview) -> int: ...
    def on_message_begin(self) -> None: ...
    def on_url(self, url: bytes) -> None: ...
    def on_header(self, name: bytes, value: bytes) -> None: ...
    def on_headers_complete(self) -> None: ...
    def on_body(self, body: bytes) -> None: ...
    def on_message_complete(self) -> None: ...
