JSON_TYPE: str
TEXT_TYPE: str
MAX_CACHED_HEADS: int

class FixedHeaders(dict[str, str]):
    serial: int
    def __init__(self, headers: dict[str, str]) -> None: ...

class HttpResponse:
    status: int
    body: bytes
    content_type: str | None
    headers: dict[str, str] | None
    def __init__(self, status: int, body: bytes, content_type: str | None = ...,
                 headers: dict[str, str] | None = ...) -> None: ...
    def message(self, keep_alive: bool, version: str, with_body: bool) -> bytes: ...
