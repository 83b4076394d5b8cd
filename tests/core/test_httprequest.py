"""RequestReader and HttpRequest: requests assembled from a byte stream cut anywhere, the head and body limits,
upgrades and 100-continue, plus a model test of pipelined requests fed in random pieces."""
from __future__ import annotations

from collections import deque

from hypothesis import given, settings
from hypothesis import strategies as st

from bunqueue._core.httprequest import (
    HEADER_LINE_BYTES,
    PARSED,
    REFUSED,
    REQUEST_LINE_BYTES,
    UPGRADED,
    HttpRequest,
    RequestReader,
)

MAX_HEAD = 1024
MAX_BODY = 4096


def reader() -> tuple[RequestReader, deque[HttpRequest]]:
    requests: deque[HttpRequest] = deque()
    return RequestReader(requests, MAX_HEAD, MAX_BODY), requests


def test_a_request_is_assembled_with_its_headers_query_and_body():
    read, requests = reader()
    wire = (b"POST /queues/q%20x/jobs?limit=5&tag=a&tag=b+c HTTP/1.1\r\nHost: h\r\nX-Two: first\r\n"
            b"x-two: second\r\nContent-Length: 7\r\n\r\n{\"a\":1}")
    assert read.feed(wire) == PARSED
    (request,) = requests
    assert (request.method, request.target, request.version) == ("POST", b"/queues/q%20x/jobs?limit=5&tag=a&tag=b+c",
                                                                 "1.1")
    assert request.path == "/queues/q%20x/jobs" and request.query_string == "limit=5&tag=a&tag=b+c"
    assert request.query() == {"limit": ["5"], "tag": ["a", "b c"]}
    # Lowercase names; a repeated name keeps its first value.
    assert request.headers == {"host": "h", "x-two": "first", "content-length": "7"}
    assert request.body == b'{"a":1}' and request.keep_alive and request.rest == b""
    assert request.raw() == wire


def test_keep_alive_follows_the_version_and_the_connection_header():
    cases = ((b"GET / HTTP/1.0\r\n\r\n", False), (b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n", False),
             (b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", True), (b"GET / HTTP/1.1\r\n\r\n", True))
    for wire, keep_alive in cases:
        read, requests = reader()
        assert read.feed(wire) == PARSED
        assert [r.keep_alive for r in requests] == [keep_alive], wire


def test_a_head_over_the_limit_is_refused_431_whether_reported_or_still_streaming():
    read, requests = reader()
    assert read.feed(b"GET /" + b"a" * MAX_HEAD + b" HTTP/1.1\r\n\r\n") == REFUSED
    assert read.refused == 431 and not requests
    # One header line that never ends: the parser reports nothing, the pieces still count.
    read, requests = reader()
    assert read.feed(b"GET / HTTP/1.1\r\nX-Long: ") == PARSED
    outcome = PARSED
    while outcome == PARSED:
        outcome = read.feed(b"v" * 100)
    assert outcome == REFUSED and read.refused == 431
    # Just under the limit, counted as the parser reports it, passes.
    read, requests = reader()
    value = b"v" * (MAX_HEAD - REQUEST_LINE_BYTES - 1 - len(b"x-h") - HEADER_LINE_BYTES)
    assert read.feed(b"GET / HTTP/1.1\r\nx-h: " + value + b"\r\n\r\n") == PARSED and len(requests) == 1


def test_a_body_over_the_limit_is_refused_413_declared_or_sent():
    read, requests = reader()
    assert read.feed(b"POST / HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % (MAX_BODY + 1)) == REFUSED
    assert read.refused == 413 and not requests
    read, requests = reader()
    assert read.feed(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n") == PARSED
    chunk = b"%x\r\n%s\r\n" % (MAX_BODY // 2, b"b" * (MAX_BODY // 2))
    assert read.feed(chunk) == PARSED
    assert read.feed(chunk + b"1\r\nb\r\n") == REFUSED and read.refused == 413 and not requests


def test_garbage_is_refused_400():
    read, requests = reader()
    assert read.feed(b"NOT HTTP AT ALL\r\n\r\n") == REFUSED and read.refused == 400 and not requests


def test_an_upgrade_tells_where_the_new_protocols_bytes_begin():
    read, requests = reader()
    head = b"GET /ws HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
    assert read.feed(head + b"\x81\x05hello") == UPGRADED
    (request,) = requests
    assert request.path == "/ws" and read.upgrade_at == len(head)


def test_each_request_asking_for_100_continue_is_counted():
    read, requests = reader()
    one = b"POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nok"
    assert read.feed(one + one) == PARSED
    assert read.continues == 2 and len(requests) == 2
    read.continues = 0
    assert read.feed(b"POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n") == PARSED and read.continues == 0


request_strategy = st.builds(
    lambda method, segments, query, headers, body: (method, segments, query, headers, body),
    st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH"]),
    st.lists(st.text("abcxyz019-_", min_size=1, max_size=8), min_size=1, max_size=4),
    st.text("abc=&019", max_size=12),
    st.lists(st.tuples(st.sampled_from(["X-A", "x-b", "Authorization", "X-Forwarded-For"]),
                       st.text("abcdef 0129/=", max_size=20).map(str.strip)), max_size=5),
    st.binary(max_size=300),
)


def encode(method: str, segments: list[str], query: str, headers: list[tuple[str, str]], body: bytes) -> bytes:
    target = "/" + "/".join(segments) + (f"?{query}" if query else "")
    lines = [f"{method} {target} HTTP/1.1", "Host: model"] + [f"{name}: {value}" for name, value in headers]
    lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


@settings(max_examples=150, deadline=None)
@given(st.lists(request_strategy, min_size=1, max_size=6), st.lists(st.integers(1, 97), min_size=1, max_size=40))
def test_model_pipelined_requests_cut_anywhere_come_out_whole_and_in_order(sent, cuts):
    stream = b"".join(encode(*request) for request in sent)
    read, requests = reader()
    start, i = 0, 0
    while start < len(stream):
        end = start + cuts[i % len(cuts)]
        assert read.feed(stream[start:end]) == PARSED
        start, i = end, i + 1
    assert len(requests) == len(sent)
    for request, (method, segments, query, headers, body) in zip(requests, sent):
        assert request.method == method and request.body == body
        assert request.path == "/" + "/".join(segments) and request.query_string == query
        first: dict[str, str] = {"host": "model"}
        for name, value in headers:
            first.setdefault(name.lower(), value)
        first.setdefault("content-length", str(len(body)))
        assert request.headers == first
        assert request.raw() == encode(method, segments, query, headers, body)


# Requests of every kind, the fast path's and the parser's: odd methods, versions, targets, header names and
# values, framing headers, bodies shorter or longer than declared, bare LF line ends. Each part is usually one
# the fast path takes, so that most requests are read whole and a few parts at a time are odd.
def _mostly(good: st.SearchStrategy, odd: st.SearchStrategy) -> st.SearchStrategy:
    return st.integers(0, 5).flatmap(lambda k: odd if k == 0 else good)


_methods = _mostly(st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"]),
                   st.sampled_from(["TRACE", "get", "GETS", "", "G\tT"]))
_targets = _mostly(st.text("abc/?&=#%~+019", max_size=16).map(lambda t: b"/" + t.encode()),
                   st.sampled_from([b"*", b"http://h/", b"", b"/\x7f", b"/caf\xe9"]))
_versions = _mostly(st.sampled_from([b"HTTP/1.1", b"HTTP/1.0"]),
                    st.sampled_from([b"HTTP/2.0", b"http/1.1", b"HTTP/1.1 ", b"HTTP/1.10"]))
_names = _mostly(st.sampled_from([b"Host", b"X-A", b"x-a", b"Content-Length", b"content-LENGTH", b"Connection"]),
                 st.sampled_from([b"Expect", b"Transfer-Encoding", b"Upgrade", b"Bad Name", b"", b"X" * 70,
                                  b"Caf\xe9", b"X-A "]))
_values = _mostly(st.text(" \tab,;=-019", max_size=10).map(str.encode)
                  | st.sampled_from([b"close", b"Keep-Alive", b"0", b"5", b"007", b"1 ", b" 3"]),
                  st.sampled_from([b"keep-alive, x", b"upgrade", b"100-continue", b"chunked", b"-1",
                                   b"99999999999999999999", b"\x7f", b"caf\xe9", b"a\x00b"]))
_request = st.tuples(_methods, _targets, _versions, st.lists(st.tuples(_names, _values), max_size=5),
                     st.binary(max_size=12), _mostly(st.just(b"\r\n"), st.just(b"\n")))


def _wire(method: str, target: bytes, version: bytes, headers: list[tuple[bytes, bytes]], body: bytes,
          end: bytes) -> bytes:
    lines = [method.encode() + b" " + target + b" " + version] + [name + b": " + value for name, value in headers]
    return end.join(lines) + end + end + body


def _read_all(pieces: list[bytes], twin: bool) -> tuple[list[tuple[object, ...]], list[int], int, int, int]:
    read, requests = reader()
    outcomes = []
    for piece in pieces:
        outcome = read.feed(memoryview(piece) if twin else piece)
        outcomes.append(outcome)
        if outcome != PARSED:
            break
    found = [(r.method, r.target, r.version, r.raw_headers, r.body, r.path, r.query_string, r.headers,
              r.keep_alive) for r in requests]
    return found, outcomes, read.refused, read.continues, read.upgrade_at if outcomes[-1] == UPGRADED else -1


@settings(max_examples=400, deadline=None)
@given(st.lists(_request, min_size=1, max_size=4), st.lists(st.integers(1, 200), max_size=6))
def test_model_the_fast_path_reads_every_request_as_the_parser_does(sent, cuts):
    # The parser alone reads a memoryview; bytes go through the fast path first.
    stream = b"".join(_wire(*request) for request in sent)
    pieces, start = [], 0
    for cut in cuts:
        if start < len(stream):
            pieces.append(stream[start:start + cut])
            start += cut
    pieces.append(stream[start:])
    assert _read_all(pieces, twin=False) == _read_all(pieces, twin=True)


def test_the_fast_path_and_the_parser_meet_in_one_piece():
    # Whole requests the fast path reads, then one it leaves (chunked) with more behind it in the same piece.
    simple = b"GET /a?x=1 HTTP/1.1\r\nHost: h\r\n\r\n"
    chunked = b"POST /b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"
    read, requests = reader()
    assert read.feed(simple + simple + chunked + simple) == PARSED
    assert [(r.method, r.path, r.body) for r in requests] == [("GET", "/a", b""), ("GET", "/a", b""),
                                                              ("POST", "/b", b"ok"), ("GET", "/a", b"")]
    # An upgrade behind a fast-path request: where the new protocol begins counts from the whole piece.
    upgrade = b"GET /ws HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
    read, requests = reader()
    assert read.feed(simple + upgrade + b"\x81\x00") == UPGRADED
    assert read.upgrade_at == len(simple + upgrade) and len(requests) == 2
