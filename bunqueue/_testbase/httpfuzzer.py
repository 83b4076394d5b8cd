"""Random and mutated HTTP requests against every route of a real server, and a count of its defects.

Well-formed requests (any method, path, query and body, framed with a right Content-Length) go over
keep-alive connections and must each get an answer within ``--timeout``; requests that break HTTP
framing (bad or duplicate Content-Length, chunked garbage, oversized or broken headers) go over a
throwaway connection and must get an answer or a close within that time. A defect is: a 500 other than
the reference's ``URI error`` for a malformed %-escape, ``Internal server error``, an answer that reads
like a Python exception, a hang, a well-formed request whose connection closed without an answer, the
server exiting, or a health check that fails.

    python -m bunqueue._testbase.httpfuzzer --requests 100000 --seed 1 \\
        --server-cmd 'bunqueue start --host 127.0.0.1 --tcp-port {port} --http-port {http_port}'
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from bunqueue import errors
from bunqueue._testbase.server import free_port
from bunqueue.server.http.routes import CRON_FIELDS, PUSH_FIELDS, ROUTES

# Routes of the table plus what the application answers before it (health, debug, metrics, UI).
PATHS = [(r.method, r.pattern) for r in ROUTES] + [
    ("GET", "/health"), ("GET", "/healthz"), ("GET", "/live"), ("GET", "/ready"), ("GET", "/prometheus"),
    ("GET", "/heapstats"), ("OPTIONS", "/queues"), ("GET", "/"), ("GET", "/nowhere"),
]
# Routes that wait by design: their waits are forced to 0 so that a missing answer is a hang.
WAITING = {"/jobs/:id/wait", "/queues/:q/jobs/pull-batch"}
METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE", "get", "FOO")
FIELDS = tuple(dict.fromkeys((
    *PUSH_FIELDS, *CRON_FIELDS, "name", "jobs", "ids", "tokens", "results", "durations", "result", "token",
    "error", "progress", "message", "level", "count", "owner", "lockTtl", "grace", "state", "limit",
    "concurrency", "config", "duration", "enabled", "url", "events", "secret", "queues", "workerId",
    "activeJobs", "processed", "failed", "unrecoverable", "stack", "attempts", "stallInterval", "maxStalls",
)))
# What a Python exception leaks into an answer.
EXCEPTION_TEXT = re.compile(
    r"Traceback|object has no attribute|unsupported operand|not subscriptable|is not iterable|"
    r"argument of type|NoneType|\b(Key|Type|Value|Attribute|Index|Recursion|Overflow|ZeroDivision|"
    r"UnicodeDecode|UnicodeEncode|Assertion|Runtime|Lookup|Name)Error\b|Error: \w+Error"
)
URI_ERROR = b'{"ok":false,"error":"URI error"}'


@dataclass
class Verdict:
    requests: int = 0
    answers: int = 0
    status: dict[int, int] = field(default_factory=dict)
    server_errors: list[str] = field(default_factory=list)
    exception_texts: list[str] = field(default_factory=list)
    hangs: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    health_failures: int = 0
    died: bool = False

    @property
    def defects(self) -> int:
        return (len(self.server_errors) + len(self.exception_texts) + len(self.hangs) + len(self.dropped)
                + self.health_failures + int(self.died))

    def summary(self) -> str:
        statuses = ",".join(f"{k}:{v}" for k, v in sorted(self.status.items()))
        return (f"requests={self.requests} answers={self.answers} status[{statuses}] "
                f"500s={len(self.server_errors)} exception_texts={len(self.exception_texts)} "
                f"hangs={len(self.hangs)} dropped={len(self.dropped)} health_failures={self.health_failures} "
                f"died={self.died} defects={self.defects}")


class Closed(Exception):
    """The server closed the connection before a whole answer."""


def read_answer(
    sock: socket.socket, buf: bytearray, deadline: float, bodiless: bool = False
) -> tuple[int, dict[str, str], bytes]:
    """One HTTP answer from ``sock`` (``buf`` holds what was read past the previous one); ``bodiless``
    for the answer to a HEAD, whose headers describe a body that is not sent."""

    def fill() -> None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        sock.settimeout(left)
        chunk = sock.recv(65536)
        if not chunk:
            raise Closed
        buf.extend(chunk)

    while b"\r\n\r\n" not in buf:
        fill()
    head, _, _ = bytes(buf).partition(b"\r\n\r\n")
    del buf[: len(head) + 4]
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    if bodiless or status in (204, 304):
        return status, headers, b""
    if headers.get("transfer-encoding", "").lower() == "chunked":
        chunks = bytearray()
        while True:
            while b"\r\n" not in buf:
                fill()
            size_line, _, _ = bytes(buf).partition(b"\r\n")
            size = int(size_line.split(b";")[0], 16)
            while len(buf) < len(size_line) + 2 + size + 2:
                fill()
            chunks += buf[len(size_line) + 2: len(size_line) + 2 + size]
            del buf[: len(size_line) + 2 + size + 2]
            if size == 0:
                return status, headers, bytes(chunks)
    length = int(headers.get("content-length", "0"))
    while len(buf) < length:
        fill()
    body = bytes(buf[:length])
    del buf[:length]
    return status, headers, body


class Requests:
    """Random requests: ids, queues and names from earlier answers or hostile ones."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.ids: list[str] = ["1", "0"]

    def hostile_text(self) -> str:
        r = self.rng
        return r.choice([
            "", " ", "-1", "0", "1e309", "NaN", "null", "true", "[]", "{}", "__proto__", "constructor",
            "x" * r.randrange(1, 5000), "é✓\u0000\ud7ff", "../..", "%", "%zz", "%ff%fe", "a%2Fb", "%00",
            "%E2%82", "q" * 300, str(r.randrange(-(2**70), 2**70)), "\t\n", "a b", "@#$&=?",
        ])

    def segment(self, name: str) -> str:
        r = self.rng
        if r.random() < 0.5:
            raw = (r.choice(self.ids) if name == "id" else f"fz{r.randrange(4)}")
        else:
            raw = self.hostile_text()
        if r.random() < 0.7:
            raw = quote(raw, safe="%")
        return raw or "x"

    def value(self, depth: int = 0) -> Any:
        r = self.rng
        kind = r.randrange(14 if depth < 3 else 10)
        if kind == 0:
            return None
        if kind == 1:
            return r.choice([True, False])
        if kind == 2:
            return r.choice([0, -1, 1, 2**31, -(2**31), 2**53 + 1, 2**63, -(2**64), 2**64, 10**30])
        if kind == 3:
            return r.choice([0.5, -0.0, 1e308, -1e308, 5e-324, 1.5e300])
        if kind in (4, 5):
            return self.hostile_text()
        if kind == 6:
            return r.randrange(-5, 100_000)
        if kind == 7:
            return r.choice(["waiting", "completed", "failed", "delayed", "active", "* * * * *", "http://x"])
        if kind in (8, 9):
            return r.choice(self.ids)
        if kind in (10, 11):
            return [self.value(depth + 1) for _ in range(r.randrange(4))]
        return {r.choice(FIELDS): self.value(depth + 1) for _ in range(r.randrange(4))}

    def body(self, pattern: str) -> bytes:
        """A hostile body; on a route that waits, always an object whose ``timeout`` is 0 (an empty or
        unreadable body there means the default wait)."""
        r = self.rng
        waits = pattern in WAITING
        kind = r.randrange(2 if waits else 0, 20)
        name = r.choice([f for f in FIELDS if f != "timeout"] if waits else FIELDS)
        opening = '{"timeout":0,' if waits else "{"
        if kind == 0:
            return b""
        if kind == 1:
            return r.choice([b"{", b"nul", b"{'a':1}", b"\xff\xfe", b"[1,", b'{"a":}', b"  ", b"{}}", b"\x00"])
        if kind == 2:
            n = r.randrange(100, 20_000)
            inner = r.choice([("[" * n + "]" * n), ('{"a":' * n + "1" + "}" * n)])
            return f'{opening}"{name}":{inner}}}'.encode()
        if kind == 3:
            return f'{opening}"{name}":{"9" * r.randrange(300, 20_000)}}}'.encode()
        if kind == 4:
            return f'{opening}"{name}":{r.choice(["1e400", "-1e400", "1e-400", "NaN", "Infinity"])}}}'.encode()
        if kind == 5:
            return f'{opening}"{name}":{json.dumps("s" * r.randrange(10_000, 1_000_000))}}}'.encode()
        if kind == 6 and not waits:
            return json.dumps(self.value()).encode()
        doc = {name: self.value() for name in r.sample(FIELDS, r.randrange(1, 6))}
        if waits:
            doc["timeout"] = 0
        return json.dumps(doc).encode()

    def well_formed(self) -> bytes:
        """A request with right framing: random route, method, path parameters, query and body."""
        r = self.rng
        method, pattern = r.choice(PATHS)
        if r.random() < 0.1:
            method = r.choice(METHODS)
        path = "/".join(self.segment(seg[1:]) if seg.startswith(":") else seg for seg in pattern.split("/"))
        if r.random() < 0.02:
            path = r.choice(["//ping", "/jobs/", "/queues/%/jobs", "/jobs/a/b/c/d", "*", "/" + "a" * 9000])
        query = ""
        if r.random() < 0.3:
            pairs = [(r.choice(["limit", "offset", "state", "status", "states", "timeout", "x"]),
                      quote(str(self.value()), safe="%,")) for _ in range(r.randrange(1, 4))]
            query = "?" + "&".join(f"{k}={v}" for k, v in pairs)
        if pattern == "/queues/:q/jobs" and method == "GET":
            query = "?timeout=0"
        body = self.body(pattern)
        headers = [("Host", "fuzz"), ("Content-Length", str(len(body)))]
        if r.random() < 0.5:
            headers.append(("Content-Type", r.choice(["application/json", "text/plain", "x/y; charset=zz"])))
        if r.random() < 0.05:
            headers.append((r.choice(["X-Forwarded-For", "Authorization", "X-Real-IP", "X-Long"]),
                            r.choice(["", "Bearer ", "a" * 8000, "1.2.3.4, 5.6.7.8", "é"])))
        head = f"{method} {path}{query} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers)
        return head.encode("utf-8", errors="surrogatepass") + b"\r\n" + body

    def malformed(self) -> bytes:
        """A request that breaks HTTP framing."""
        r = self.rng
        body = b'{"data":1}'
        start = b"POST /queues/fz0/jobs HTTP/1.1\r\nHost: fuzz\r\n"
        return r.choice([
            start + b"Content-Length: -5\r\n\r\n" + body,
            start + b"Content-Length: abc\r\n\r\n" + body,
            start + b"Content-Length: 99999999999999999999\r\n\r\n" + body,
            start + b"Content-Length: 10\r\nContent-Length: 3\r\n\r\n" + body,
            start + b"Content-Length: 50\r\n\r\n" + body,
            start + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n" + body + b"\r\n0\r\n\r\n",
            start + b"Transfer-Encoding: chunked\r\n\r\n5\r\n" + body + b"\r\n",
            start + b"Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
            start + b"X-Long: " + b"a" * r.randrange(70_000, 200_000) + b"\r\n\r\n",
            start + b"".join(b"X-%d: v\r\n" % i for i in range(r.randrange(100, 3000))) + b"\r\n",
            b"GET /ping HTTP/9.9\r\n\r\n", b"GET\r\n\r\n", b"\x00\x01\x02\r\n\r\n",
            b"GET /" + b"a" * r.randrange(70_000, 150_000) + b" HTTP/1.1\r\n\r\n",
            b"GET /ping HTTP/1.1\r\nBad Header\r\n\r\n", b"GET /ping HTTP/1.1\r\n: v\r\n\r\n",
            bytes(r.randrange(256) for _ in range(r.randrange(1, 200))),
        ])


class HttpFuzzer:
    def __init__(self, addr: tuple[str, int], seed: int, timeout: float = 5.0, conns: int = 4) -> None:
        self.addr = addr
        self.rng = random.Random(seed)
        self.requests = Requests(self.rng)
        self.timeout = timeout
        self.conns: list[tuple[socket.socket, bytearray] | None] = [None] * conns
        self.verdict = Verdict()

    def judge(self, request: bytes, status: int, body: bytes) -> None:
        v = self.verdict
        v.answers += 1
        v.status[status] = v.status.get(status, 0) + 1
        text = body.decode("utf-8", errors="replace")
        if (status >= 500 and body != URI_ERROR and status != 503) or errors.INTERNAL_ERROR in text:
            v.server_errors.append(f"{status} {text[:200]} <- {request[:300]!r}")
        if EXCEPTION_TEXT.search(text):
            v.exception_texts.append(f"{status} {text[:300]} <- {request[:300]!r}")

    def connection(self, slot: int) -> tuple[socket.socket, bytearray]:
        held = self.conns[slot]
        if held is None:
            held = (socket.create_connection(self.addr, timeout=self.timeout), bytearray())
            self.conns[slot] = held
        return held

    def drop(self, slot: int) -> None:
        held = self.conns[slot]
        if held is not None:
            held[0].close()
        self.conns[slot] = None

    def send_well_formed(self) -> None:
        request = self.requests.well_formed()
        slot = self.rng.randrange(len(self.conns))
        sock, buf = self.connection(slot)
        self.verdict.requests += 1
        try:
            sock.sendall(request)
            status, headers, body = read_answer(sock, buf, time.monotonic() + self.timeout,
                                                request.startswith(b"HEAD "))
        except TimeoutError:
            self.verdict.hangs.append(repr(request[:300]))
            self.drop(slot)
            return
        except (Closed, OSError):
            self.verdict.dropped.append(repr(request[:300]))
            self.drop(slot)
            return
        self.judge(request, status, body)
        self.learn(body)
        if headers.get("connection", "").lower() == "close":
            self.drop(slot)

    def learn(self, body: bytes) -> None:
        match = re.search(rb'"(?:id|jobId)":"([^"]{1,40})"', body)
        if match and len(self.requests.ids) < 200:
            self.requests.ids.append(match.group(1).decode())

    def send_malformed(self) -> None:
        request = self.requests.malformed()
        self.verdict.requests += 1
        with socket.create_connection(self.addr, timeout=self.timeout) as sock:
            buf = bytearray()
            try:
                sock.sendall(request)
                sock.shutdown(socket.SHUT_WR)
                status, _, body = read_answer(sock, buf, time.monotonic() + self.timeout)
            except TimeoutError:
                self.verdict.hangs.append(repr(request[:300]))
            except (Closed, OSError, ValueError, IndexError):
                pass  # a close (or a garbled close) is a fine answer to broken framing
            else:
                self.judge(request, status, body)

    def healthy(self) -> bool:
        try:
            with socket.create_connection(self.addr, timeout=self.timeout) as sock:
                sock.sendall(b"GET /ping HTTP/1.1\r\nHost: fuzz\r\n\r\n")
                status, _, _ = read_answer(sock, bytearray(), time.monotonic() + self.timeout)
                return status == 200
        except (OSError, Closed, TimeoutError):
            return False

    def run(self, count: int, alive: Any = lambda: True) -> Verdict:
        for i in range(count):
            if self.rng.random() < 0.05:
                self.send_malformed()
            else:
                self.send_well_formed()
            if i % 500 == 499:
                if not alive():
                    self.verdict.died = True
                    break
                self.verdict.health_failures += not self.healthy()
        for slot in range(len(self.conns)):
            self.drop(slot)
        self.verdict.died = self.verdict.died or not alive() or not self.healthy()
        return self.verdict


def start_server(template: str, log: Any) -> tuple[subprocess.Popen[bytes], tuple[str, int]]:
    port, http_port = free_port(), free_port()
    cmd = shlex.split(template.format(port=port, http_port=http_port))
    env = {**os.environ, "RATE_LIMIT_MAX_REQUESTS": "1000000000"}
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=log)
    addr = ("127.0.0.1", http_port)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            socket.create_connection(addr, timeout=0.2).close()
            return proc, addr
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"server did not start: {cmd}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=5.0)
    parser.add_argument("--server-cmd", default=f"{sys.executable} -m bunqueue start --host 127.0.0.1 "
                        "--tcp-port {port} --http-port {http_port}")
    parser.add_argument("--show", type=int, default=5, help="offending requests shown per kind")
    args = parser.parse_args()
    with tempfile.NamedTemporaryFile(prefix="bunqueue-httpfuzz-", suffix=".log", delete=False) as log:
        proc, addr = start_server(args.server_cmd, log)
        try:
            verdict = HttpFuzzer(addr, args.seed, args.timeout).run(args.requests, lambda: proc.poll() is None)
        finally:
            proc.terminate()
            proc.wait(10)
    for kind in ("server_errors", "exception_texts", "hangs", "dropped"):
        for line in getattr(verdict, kind)[: args.show]:
            print(f"{kind}: {line}")
    print(f"server log: {log.name}")
    print(verdict.summary())
    sys.exit(1 if verdict.defects else 0)


if __name__ == "__main__":
    main()
