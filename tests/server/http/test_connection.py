"""HTTP/1.1 connection handling against a real server over raw sockets: pipelining in order, keep-alive and
HTTP/1.0, `Expect: 100-continue`, chunked bodies, large bodies however they arrive, HEAD, refused requests,
a client that leaves while its long-poll waits, and idle connections."""
from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator

import pytest

from bunqueue._testbase.server import ServerProcess, free_port
from bunqueue.client import connect
from bunqueue.config import Settings
from bunqueue.server import app as server_app
from bunqueue.server.http import connection


@pytest.fixture(scope="module")
def http_server() -> Iterator[ServerProcess]:
    proc = ServerProcess(env={"RATE_LIMIT_MAX_REQUESTS": "100000000"}).start()
    yield proc
    proc.stop()


Response = tuple[int, dict[str, str], bytes]


async def read_response(reader: asyncio.StreamReader, head_only: bool = False) -> Response:
    status_line = await asyncio.wait_for(reader.readline(), 5)
    assert status_line, "the connection closed before an answer"
    status = int(status_line.split()[1])
    headers: dict[str, str] = {}
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    body = b"" if head_only else await reader.readexactly(length)
    return status, headers, body


async def open_http(server: ServerProcess) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", server.http_port)


async def test_pipelined_requests_are_answered_in_order_behind_one_that_waits(http_server: ServerProcess) -> None:
    reader, writer = await open_http(http_server)
    started = time.monotonic()
    writer.write(b"GET /queues/pipelined-empty/jobs?timeout=300 HTTP/1.1\r\nHost: x\r\n\r\n"
                 b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
                 b"POST /queues/pipelined/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n{\"data\":1}\n")
    pulled = await read_response(reader)
    waited = time.monotonic() - started
    probe = await read_response(reader)
    pushed = await read_response(reader)
    assert pulled[0] == 200 and json.loads(pulled[2]) == {"ok": True, "job": None}
    assert waited >= 0.25, "the long-poll answered before its timeout"
    assert probe[:1] == (200,) and probe[2] == b"OK"
    assert pushed[0] == 200 and json.loads(pushed[2])["ok"] is True
    writer.close()


async def test_http_1_0_closes_unless_kept_alive(http_server: ServerProcess) -> None:
    reader, writer = await open_http(http_server)
    writer.write(b"GET /healthz HTTP/1.0\r\n\r\n")
    status, headers, body = await read_response(reader)
    assert (status, body, headers["connection"]) == (200, b"OK", "close")
    assert await asyncio.wait_for(reader.read(), 5) == b""
    reader, writer = await open_http(http_server)
    writer.write(b"GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
    status, headers, _ = await read_response(reader)
    assert (status, headers["connection"]) == (200, "keep-alive")
    writer.write(b"GET /healthz HTTP/1.0\r\n\r\n")
    assert (await read_response(reader))[0] == 200
    writer.close()


async def test_expect_continue_and_chunked_bodies(http_server: ServerProcess) -> None:
    reader, writer = await open_http(http_server)
    body = json.dumps({"name": "big", "data": {"blob": "x" * 5000}}).encode()
    writer.write(b"POST /queues/continue/jobs HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(body))
    assert await asyncio.wait_for(reader.readline(), 5) == b"HTTP/1.1 100 Continue\r\n"
    assert await reader.readline() == b"\r\n"
    writer.write(body)
    status, _, answer = await read_response(reader)
    assert status == 200 and json.loads(answer)["ok"] is True
    chunked = b'{"name": "c", "data": {"n": 7}}'
    writer.write(b"POST /queues/continue/jobs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                 b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (10, chunked[:10], len(chunked) - 10, chunked[10:]))
    status, _, answer = await read_response(reader)
    job_id = json.loads(answer)["id"]
    writer.write(b"GET /jobs/%s HTTP/1.1\r\nHost: x\r\n\r\n" % job_id.encode())
    status, _, answer = await read_response(reader)
    assert json.loads(answer)["job"]["data"] == {"n": 7}
    writer.close()


async def test_head_answers_headers_only(http_server: ServerProcess) -> None:
    reader, writer = await open_http(http_server)
    writer.write(b"HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    status, headers, _ = await read_response(reader, head_only=True)
    assert (status, headers["content-length"]) == (200, "2")
    # The next answer follows at once: the HEAD answer carried no body.
    status, _, body = await read_response(reader)
    assert (status, body) == (200, b"OK")
    writer.close()


async def test_unreadable_and_oversized_requests_are_refused_and_closed(http_server: ServerProcess) -> None:
    reader, writer = await open_http(http_server)
    writer.write(b"NOT HTTP AT ALL\r\n\r\n")
    status, _, body = await read_response(reader)
    assert (status, body) == (400, b"Bad Request")
    assert await asyncio.wait_for(reader.read(), 5) == b""
    reader, writer = await open_http(http_server)
    writer.write(b"POST /queues/big/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (65 * 1024 * 1024))
    # A client that keeps sending its body after the refusal still reads the refusal.
    for _ in range(32):
        writer.write(b"x" * 8192)
        await writer.drain()
    status, _, _ = await read_response(reader)
    assert status == 413
    assert await asyncio.wait_for(reader.read(), 5) == b""
    # Neither affected anybody else.
    reader, writer = await open_http(http_server)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (await read_response(reader))[0] == 200
    writer.close()


async def test_a_head_that_never_ends_is_refused(http_server: ServerProcess) -> None:
    reader, writer = await open_http(http_server)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Endless: ")
    # Sent a piece at a time, as a slow client would: the parser holds the unfinished header meanwhile. The
    # pieces after the refusal are read and dropped, so they do not reset the connection under the answer.
    for _ in range(12):
        writer.write(b"a" * 8192)
        await writer.drain()
        await asyncio.sleep(0.01)
    status, _, body = await read_response(reader)
    assert (status, body) == (431, b"Request Header Fields Too Large")
    assert await asyncio.wait_for(reader.read(), 5) == b""


KIB = 1024
MIB = 1024 * KIB


def job_body(size: int) -> tuple[dict[str, object], bytes]:
    """A push body of about ``size`` bytes, and the job data it carries."""
    data: dict[str, object] = {"blob": "x" * max(size - 40, 0), "n": size}
    return data, json.dumps({"name": "large", "data": data}).encode()


def push_head(queue: str, headers: bytes) -> bytes:
    return b"POST /queues/%s/jobs HTTP/1.1\r\nHost: x\r\n%s\r\n" % (queue.encode(), headers)


async def pushed_data(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> object:
    """The data of the job that the answer being read says was pushed, as GetJob returns it."""
    status, _, answer = await read_response(reader)
    assert status == 200, answer[:200]
    job_id = json.loads(answer)["id"]
    writer.write(b"GET /jobs/%s HTTP/1.1\r\nHost: x\r\n\r\n" % job_id.encode())
    status, _, answer = await read_response(reader)
    assert status == 200
    return json.loads(answer)["job"]["data"]


@pytest.mark.parametrize("size", [64 * KIB + 1, 100_000, 1 * MIB, 9 * MIB])
async def test_a_large_body_in_one_write_is_read_whole(http_server: ServerProcess, size: int) -> None:
    reader, writer = await open_http(http_server)
    data, body = job_body(size)
    # The head and the whole body in one write: the body's bytes are not the head's.
    writer.write(push_head("large-bodies", b"Content-Length: %d\r\n" % len(body)) + body)
    assert await pushed_data(reader, writer) == data
    writer.close()


@pytest.mark.parametrize("size", [100_000, 3 * MIB])
async def test_a_large_chunked_body_is_read_whole(http_server: ServerProcess, size: int) -> None:
    reader, writer = await open_http(http_server)
    data, body = job_body(size)
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 7000]), body[i:i + 7000])
                      for i in range(0, len(body), 7000))
    writer.write(push_head("large-bodies", b"Transfer-Encoding: chunked\r\n") + chunks + b"0\r\n\r\n")
    assert await pushed_data(reader, writer) == data
    writer.close()


async def test_a_body_trickled_in_small_writes_is_read_whole(http_server: ServerProcess) -> None:
    reader, writer = await open_http(http_server)
    data, body = job_body(200_000)
    message = push_head("large-bodies", b"Content-Length: %d\r\n" % len(body)) + body
    # The first write carries the head and the start of the body, the rest comes a little at a time.
    for start in range(0, len(message), 1500):
        writer.write(message[start:start + 1500])
        await writer.drain()
        if start % 30_000 == 0:
            await asyncio.sleep(0.001)
    assert await pushed_data(reader, writer) == data
    writer.close()


async def test_a_request_behind_a_large_body_in_the_same_write_is_answered(http_server: ServerProcess) -> None:
    reader, writer = await open_http(http_server)
    data, body = job_body(300_000)
    small = json.dumps({"data": {"after": True}}).encode()
    writer.write(push_head("large-bodies", b"Content-Length: %d\r\n" % len(body)) + body
                 + push_head("large-bodies", b"Content-Length: %d\r\n" % len(small)) + small)
    first = await read_response(reader)
    second = await read_response(reader)
    assert (first[0], second[0]) == (200, 200)
    for (_, _, answer), expected in ((first, data), (second, {"after": True})):
        writer.write(b"GET /jobs/%s HTTP/1.1\r\nHost: x\r\n\r\n" % json.loads(answer)["id"].encode())
        assert json.loads((await read_response(reader))[2])["job"]["data"] == expected
    writer.close()


async def test_job_data_over_ten_megabytes_is_refused_as_the_reference_does(http_server: ServerProcess) -> None:
    reader, writer = await open_http(http_server)
    _, body = job_body(20 * MIB)
    writer.write(push_head("too-large-data", b"Content-Length: %d\r\n" % len(body)) + body)
    status, headers, answer = await read_response(reader)
    assert (status, headers["content-type"]) == (400, "application/json")
    assert json.loads(answer) == {"ok": False, "error": "Job data too large (max 10MB)"}
    bulk = json.dumps({"jobs": [{"data": {"small": 1}}, {"data": {"blob": "x" * 20 * MIB}}]}).encode()
    writer.write(b"POST /queues/too-large-data/jobs/bulk HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
                 % (len(bulk), bulk))
    status, _, answer = await read_response(reader)
    assert (status, json.loads(answer)) == (400, {"ok": False, "error": "jobs[1]: Job data too large (max 10MB)"})
    # Nothing of either was admitted, and the connection goes on.
    writer.write(b"GET /queues/too-large-data/count HTTP/1.1\r\nHost: x\r\n\r\n")
    status, _, answer = await read_response(reader)
    assert (status, json.loads(answer)["count"]) == (200, 0)
    writer.close()


async def test_a_chunked_body_over_the_cap_is_refused(http_server: ServerProcess) -> None:
    reader, writer = await open_http(http_server)
    writer.write(push_head("over-cap", b"Transfer-Encoding: chunked\r\n"))
    chunk = b"%x\r\n%s\r\n" % (MIB, b"y" * MIB)
    for _ in range(connection.MAX_BODY_BYTES // MIB + 1):
        writer.write(chunk)
        await writer.drain()
    status, _, body = await read_response(reader)
    assert (status, body) == (413, b"Request Entity Too Large")
    assert await asyncio.wait_for(reader.read(), 5) == b""


async def test_the_head_limit_counts_the_request_line_and_headers_only(http_server: ServerProcess) -> None:
    # Just under the limit, with a body in the same write: answered.
    reader, writer = await open_http(http_server)
    data, body = job_body(100_000)
    padding = b"X-Pad: " + b"p" * (connection.MAX_HEAD_BYTES - 200) + b"\r\n"
    writer.write(push_head("head-limit", padding + b"Content-Length: %d\r\n" % len(body)) + body)
    assert await pushed_data(reader, writer) == data
    writer.close()
    # Just over it, in one write: refused.
    reader, writer = await open_http(http_server)
    padding = b"X-Pad: " + b"p" * connection.MAX_HEAD_BYTES + b"\r\n"
    writer.write(push_head("head-limit", padding + b"Content-Length: 2\r\n") + b"{}")
    status, _, answer = await read_response(reader)
    assert (status, answer) == (431, b"Request Header Fields Too Large")
    assert await asyncio.wait_for(reader.read(), 5) == b""
    # Many headers, each small, sent a few at a time.
    reader, writer = await open_http(http_server)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
    for i in range(connection.MAX_HEAD_BYTES // 1000 + 2):
        writer.write(b"X-Many-%d: %s\r\n" % (i, b"m" * 1000))
        await writer.drain()
    writer.write(b"\r\n")
    status, _, answer = await read_response(reader)
    assert (status, answer) == (431, b"Request Header Fields Too Large")


async def test_a_long_poll_whose_client_left_takes_no_job(http_server: ServerProcess) -> None:
    reader, writer = await open_http(http_server)
    writer.write(b"GET /queues/left-behind/jobs?timeout=5000 HTTP/1.1\r\nHost: x\r\n\r\n")
    await writer.drain()
    await asyncio.sleep(0.2)
    writer.close()
    await asyncio.sleep(0.2)
    tcp = await connect(*http_server.addr)
    pushed = await tcp.request({"cmd": "PUSH", "queue": "left-behind", "data": {}})
    await asyncio.sleep(0.1)
    state = await tcp.request({"cmd": "GetState", "id": pushed["id"]})
    assert state["state"] == "waiting", "the departed long-poll took the job"
    pulled = await tcp.request({"cmd": "PULL", "queue": "left-behind"})
    assert pulled["job"]["id"] == pushed["id"]
    await tcp.close()


async def test_an_idle_keep_alive_connection_is_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connection, "KEEPALIVE_S", 0.3)
    settings = Settings.load(env={"TCP_PORT": "0", "HTTP_PORT": str(free_port()), "HOST": "127.0.0.1"})
    server = server_app.BrokerServer(settings)
    await server.start()
    try:
        assert server.http is not None
        reader, writer = await asyncio.open_connection("127.0.0.1", server.http.port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (await read_response(reader))[0] == 200
        started = time.monotonic()
        assert await asyncio.wait_for(reader.read(), 5) == b""
        assert time.monotonic() - started >= 0.2
        assert not server.http.connections
    finally:
        await server.shutdown()


async def test_answers_are_written_byte_for_byte_in_the_originals_layout(http_server: ServerProcess) -> None:
    """Status line, Content-Type, Content-Length, the CORS header (CORS_ALLOW_ORIGIN is empty here), Date,
    then Connection when it is not the version's default: the same bytes whichever cached head parts they
    were assembled from."""
    reader, writer = await open_http(http_server)
    job = '{"data":"\u00e9"}'.encode()
    writer.write(b"POST /queues/layout/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(job), job)
                 + b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
                 b"OPTIONS /queues HTTP/1.1\r\nHost: x\r\n\r\n"
                 b"GET /nowhere HTTP/1.0\r\n\r\n")
    raw = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    answers = raw.split(b"HTTP/1.1 ")[1:]
    heads = [answer.partition(b"\r\n\r\n") for answer in answers]
    dates = [line for head, _, _ in heads for line in head.split(b"\r\n") if line.startswith(b"Date: ")]
    assert len(dates) == 4 and all(time.strptime(d[6:].decode(), "%a, %d %b %Y %H:%M:%S GMT") for d in dates)
    pushed = json.loads(heads[0][2])
    body = json.dumps({"ok": True, "id": pushed["id"]}, separators=(",", ":")).encode()
    assert answers[0] == (b"200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                          b"Access-Control-Allow-Origin: \r\n%s\r\n\r\n%s" % (len(body), dates[0], body))
    assert answers[1] == b"200 OK\r\nContent-Type: text/plain;charset=utf-8\r\nContent-Length: 2\r\n" \
                         b"Access-Control-Allow-Origin: \r\n%s\r\n\r\nOK" % dates[1]
    assert answers[2] == (b"204 No Content\r\nAccess-Control-Allow-Origin: \r\n"
                          b"Access-Control-Allow-Methods: GET, POST, PUT, DELETE, OPTIONS\r\n"
                          b"Access-Control-Allow-Headers: Content-Type, Authorization\r\n"
                          b"Access-Control-Max-Age: 86400\r\n%s\r\n\r\n" % dates[2])
    assert answers[3] == (b"404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 32\r\n"
                          b"Access-Control-Allow-Origin: \r\n%s\r\nConnection: close\r\n\r\n"
                          b'{"ok":false,"error":"Not found"}' % dates[3])
