"""Hostile request frames, and a connection that checks the server's answers to them.

The values are built as raw MessagePack, so they can be what no well-behaved encoder writes: nesting
deeper than msgpack-python packs, ext types and timestamps, NaN and infinities, oversized strings,
arrays, maps and integers, the never-used byte 0xc1. Needs ``hypothesis`` (a test dependency).
"""
from __future__ import annotations

import struct
import time
from dataclasses import dataclass, field
from typing import Any

import msgpack
from hypothesis import strategies as st

from bunqueue import errors
from bunqueue._testbase.frames import RawClient, frame
from bunqueue.server.runner import HANDLERS

COMMANDS = sorted(HANDLERS)
# Commands that may wait: their timeout stays 0, so a reply that does not come is a hang, not a wait.
WAITING = frozenset({"PULL", "PULLB", "WaitJob"})
FIELDS = (
    "queue", "id", "ids", "jobId", "jobs", "data", "name", "count", "timeout", "token", "tokens", "result",
    "results", "error", "state", "states", "limit", "offset", "priority", "delay", "owner", "lockTtl",
    "detach", "durations", "grace", "progress", "message", "customId", "key", "workerId", "concurrency",
    "max", "duration", "ttl", "stallInterval", "maxStalls", "gracePeriod", "enabled", "maxAge",
    "maxEntries", "type", "asc", "lifo", "attempts", "backoff", "uniqueKey", "dependsOn", "durable",
    "jobTimeout", "filter", "protocolVersion", "capabilities", "hostname", "pid", "force", "ms",
)
ORDINARY = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(), st.text(max_size=20),
              st.binary(max_size=20)),
    lambda inner: st.one_of(st.lists(inner, max_size=5),
                            st.dictionaries(st.text(max_size=10), inner, max_size=5)),
    max_leaves=15,
)


def _packed(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True)


def _nested(depth: int, as_map: bool, leaf: bytes) -> bytes:
    return (b"\x81\xa1k" if as_map else b"\x91") * depth + leaf


def _prefixes(items: list[bytes]) -> tuple[bytes, list[int]]:
    """``items`` packed end to end, and where each prefix of ``n`` items ends."""
    ends = [0]
    for item in items:
        ends.append(ends[-1] + len(item))
    return b"".join(items), ends


# The oversized array and map are cut from one packing of the largest, as msgpack packs the smaller ones:
# packing thousands of Python objects per draw would cost more than drawing everything else.
_ARRAY_ITEMS = _prefixes([_packed(i) for i in range(20_000)])
_MAP_ITEMS = _prefixes([_packed(f"k{i}") + _packed(i) for i in range(5_000)])


def _counting_array(n: int) -> bytes:
    """``_packed(list(range(n)))`` for 1,000 <= n < 65,536."""
    items, ends = _ARRAY_ITEMS
    return b"\xdc" + struct.pack(">H", n) + items[: ends[n]]


def _counting_map(n: int) -> bytes:
    """``_packed({f"k{i}": i for i in range(n)})`` for 1,000 <= n < 65,536."""
    items, ends = _MAP_ITEMS
    return b"\xde" + struct.pack(">H", n) + items[: ends[n]]


LEAVES = st.sampled_from([b"\x01", b"\xa1x", b"\xc0", _packed(float("nan"))])
HOSTILE = st.one_of(
    ORDINARY.map(_packed),
    st.builds(_nested, st.integers(100, 1500), st.booleans(), LEAVES),
    st.builds(lambda code, data: b"\xc7" + struct.pack(">Bb", len(data), code) + data,
              st.integers(-128, 127), st.binary(max_size=16)),
    st.sampled_from([
        _packed(float("nan")), _packed(float("inf")), _packed(float("-inf")),
        b"\xca" + struct.pack(">f", float("nan")), b"\xca" + struct.pack(">f", float("inf")),
        b"\xd6\xff\x00\x00\x00\x01",  # a timestamp
        b"\xd4\x00\x00",  # JS undefined
        b"\xcf" + b"\xff" * 8, b"\xd3\x80" + b"\x00" * 7,
        b"\xc1",
    ]),
    st.builds(lambda n: _packed("q" * n), st.integers(257, 200_000)),
    st.builds(_counting_array, st.integers(1_000, 20_000)),
    st.builds(_counting_map, st.integers(1_000, 5_000)),
    st.builds(lambda n: _packed(b"\x00" * n), st.integers(1_000, 500_000)),
)


def request_body(index: int, cmd: str, fields: dict[str, bytes], req_id: bytes | None) -> bytes:
    items = [(_packed("cmd"), _packed(cmd)), (_packed("reqId"), _packed(index) if req_id is None else req_id)]
    for name, value in fields.items():
        if cmd in WAITING and name == "timeout":
            value = b"\x00"
        items.append((_packed(name), value))
    return b"\xde" + struct.pack(">H", len(items)) + b"".join(k + v for k, v in items)


# One hostile request: (command, fields, reqId); a reqId of None is replaced by the frame's index.
REQUESTS = st.tuples(
    st.sampled_from(COMMANDS),
    st.dictionaries(st.sampled_from(FIELDS), HOSTILE, max_size=4),
    st.one_of(st.none(), st.none(), HOSTILE),
)


def batches(size: int) -> st.SearchStrategy[list[bytes]]:
    """``size`` hostile request bodies."""
    return st.lists(REQUESTS, min_size=size, max_size=size).map(
        lambda parts: [request_body(i, *part) for i, part in enumerate(parts)]
    )


@dataclass
class Verdict:
    frames: int = 0
    replies: int = 0
    internal_errors: list[dict[str, Any]] = field(default_factory=list)
    hangs: int = 0
    silent_closes: int = 0
    lost_jobs: int = 0
    extra_replies: int = 0
    # Replies replaced because the server could not encode them: data it admitted but cannot send back.
    unencodable: int = 0
    # Batches whose replies all came, but only after the reply timeout (within the connection's grace).
    late: int = 0
    # The request bodies of the batches that hung or came late, for replay.
    slow_batches: list[list[bytes]] = field(default_factory=list)


class FuzzConnection:
    """Sends a batch of hostile frames between a healthy PUSH and its PULL, and checks the answers.

    The healthy job a batch pulled is acknowledged at the head of the next batch, so a long run on one
    queue keeps the server's state flat instead of leaving a retried job behind per batch.
    """

    def __init__(
        self, addr: tuple[str, int], queue: str, reply_timeout: float = 10.0, grace: float = 0.0
    ) -> None:
        self.addr = addr
        self.queue = queue
        self.reply_timeout = reply_timeout
        self.client = RawClient(addr)
        # How much longer to wait for the replies of a batch past ``reply_timeout`` before it counts as a
        # hang rather than as late.
        self.grace = grace
        self.batch: list[bytes] = []
        self.expected = 0
        self.replies: list[dict[str, Any]] = []
        self.unacked: str | None = None
        self.overhead = 0

    def close(self) -> None:
        self.client.close()

    def run(self, batch: list[bytes], verdict: Verdict, settle: float = 0.0) -> None:
        """Send ``batch``; with ``settle``, also wait that long for replies that should not come."""
        if self.send(batch, verdict):
            self.check(verdict, settle)

    def send(self, batch: list[bytes], verdict: Verdict) -> bool:
        """Write ``batch`` between the healthy frames in one write; False if that already failed."""
        healthy = _packed({"cmd": "PUSH", "queue": self.queue, "name": "healthy", "data": {"n": 1},
                           "reqId": "healthy-push"})
        pull = _packed({"cmd": "PULL", "queue": self.queue, "reqId": "healthy-pull"})
        ping = _packed({"cmd": "Ping", "reqId": "healthy-ping"})
        bodies = [healthy, *batch, pull, ping]
        if self.unacked is not None:
            bodies.insert(0, _packed({"cmd": "ACK", "id": self.unacked, "reqId": "healthy-ack"}))
            self.unacked = None
        self.overhead = len(bodies) - len(batch)
        verdict.frames += len(batch)
        self.batch = batch
        self.expected = len(bodies)
        self.replies = []
        try:
            self.client.send_bytes(b"".join(frame(body) for body in bodies))
        except TimeoutError:
            verdict.hangs += 1
            verdict.slow_batches.append(batch)
        except OSError:
            verdict.silent_closes += 1
        else:
            return True
        self.reconnect()
        return False

    def check(self, verdict: Verdict, settle: float = 0.0) -> None:
        """Read and judge the replies to the batch ``send`` wrote."""
        try:
            replies = self.collect(self.expected, self.reply_timeout)
        except TimeoutError:
            verdict.slow_batches.append(self.batch)
            try:
                replies = self.collect(self.expected, self.grace)
            except TimeoutError:
                verdict.hangs += 1
                self.reconnect()
                return
            except OSError:
                verdict.silent_closes += 1
                self.reconnect()
                return
            verdict.late += 1
        except OSError:
            verdict.silent_closes += 1
            self.reconnect()
            return
        verdict.replies += len(replies) - self.overhead
        if settle:
            verdict.extra_replies += self.count_extra(settle)
        by_id = {r.get("reqId"): r for r in replies if isinstance(r.get("reqId"), str)}
        for reply in replies:
            if reply.get("error") == errors.INTERNAL_ERROR:
                verdict.internal_errors.append(reply)
            elif reply.get("error") == errors.REPLY_NOT_ENCODABLE:
                verdict.unencodable += 1
        pushed, pulled = by_id.get("healthy-push"), by_id.get("healthy-pull")
        job = pulled.get("job") if pulled else None
        acked = by_id.get("healthy-ack", {"ok": True})
        if not (pushed and pushed.get("ok") and job and job.get("id") == pushed.get("id")):
            verdict.lost_jobs += 1
        elif not acked.get("ok"):
            verdict.lost_jobs += 1
        else:
            self.unacked = job["id"]

    def collect(self, n: int, timeout: float) -> list[dict[str, Any]]:
        """The batch's ``n`` replies (event frames skipped), the rest of them within ``timeout``."""
        deadline = time.monotonic() + timeout
        replies = self.replies
        while len(replies) < n:
            body = self.client.raw_frame(deadline)
            reply = msgpack.unpackb(body, raw=False, strict_map_key=False)
            if reply.get("type") != "event":
                replies.append(reply)
        return replies

    def count_extra(self, wait: float) -> int:
        extra = 0
        deadline = time.monotonic() + wait
        try:
            while True:
                reply = msgpack.unpackb(self.client.raw_frame(deadline), raw=False, strict_map_key=False)
                extra += reply.get("type") != "event"
        except TimeoutError:
            return extra

    def reconnect(self) -> None:
        self.client.close()
        self.client = RawClient(self.addr)
        # A job pulled on the old connection may come back to its queue later: go on with a fresh queue.
        self.unacked = None
        self.queue = f"{self.queue}+"
