"""Random and mangled frames: each gets an error or a close on its own connection, never a crash."""
from __future__ import annotations

import itertools
import random
import socket
import struct

import msgpack
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.fuzzer import FuzzConnection, Verdict, batches
from bunqueue._testbase.server import ServerProcess

COMMANDS = ["PUSH", "PUSHB", "PULL", "PULLB", "ACK", "ACKB", "FAIL", "GetJob", "GetJobs", "Clean", "Dlq",
            "RetryDlq", "ExtendLocks", "RateLimit", "RegisterWorker", "SubscribeEvents", "WaitJob", "Ping"]
VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(), st.text(max_size=20),
              st.binary(max_size=20)),
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=10), inner, max_size=5)),
    max_leaves=15,
)
REQUESTS = st.fixed_dictionaries(
    {"cmd": st.sampled_from(COMMANDS)},
    optional={key: VALUES for key in ("queue", "id", "ids", "jobs", "data", "count", "timeout", "token",
                                      "tokens", "results", "filter", "durations", "name", "owner", "grace")},
)


def _send(sock: socket.socket, body: bytes) -> None:
    sock.sendall(struct.pack(">I", len(body)) + body)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(request=REQUESTS)
def test_random_commands_get_a_reply(server: ServerProcess, request: dict) -> None:
    request = dict(request)
    if request.get("timeout") is not None and request["cmd"] in ("PULL", "PULLB", "WaitJob"):
        request["timeout"] = 0
    client = RawClient(server.addr)
    try:
        client.send(request)
        reply = client.recv()
        assert isinstance(reply, dict) and isinstance(reply.get("ok"), bool), reply
        if reply["ok"] is False:
            assert isinstance(reply["error"], str) and reply["error"] != "Internal server error", (request, reply)
    finally:
        client.close()


def test_random_bytes_leave_other_connections_alone(server: ServerProcess) -> None:
    rng = random.Random(5)
    watcher = RawClient(server.addr)
    for _ in range(200):
        with socket.create_connection(server.addr, timeout=5) as sock:
            size = rng.randrange(0, 64)
            body = bytes(rng.randrange(256) for _ in range(size))
            if rng.random() < 0.5:
                _send(sock, body)
            else:
                sock.sendall(body)
        assert watcher.call({"cmd": "Ping"})["ok"]
    mangled = msgpack.packb({"cmd": "PUSH", "queue": "fz", "name": "x", "data": list(range(50))})
    for cut in range(1, len(mangled)):
        with socket.create_connection(server.addr, timeout=5) as sock:
            _send(sock, mangled[:cut])
    assert watcher.call({"cmd": "Count", "queue": "fz"})["count"] == 0
    watcher.close()

_queues = itertools.count()


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(batch=batches(8))
def test_hostile_fields_cost_no_other_reply_and_no_job(server: ServerProcess, batch: list[bytes]) -> None:
    """Nested, ext-typed, non-finite and oversized values in every command's fields, and as reqIds."""
    fuzz = FuzzConnection(server.addr, f"fz-healthy-{next(_queues)}")
    verdict = Verdict()
    try:
        fuzz.run(batch, verdict, settle=0.05)
    finally:
        fuzz.close()
    assert verdict.hangs == 0 and verdict.silent_closes == 0
    assert verdict.replies == verdict.frames and verdict.extra_replies == 0
    assert verdict.internal_errors == []
    assert verdict.lost_jobs == 0
