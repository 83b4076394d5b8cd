"""The auth gate and the per-connection rate limit, each on a server of its own."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.server import ServerProcess


@pytest.fixture(scope="module")
def auth_server() -> Iterator[ServerProcess]:
    proc = ServerProcess(env={"AUTH_TOKENS": "tok-one,tok-two"}).start()
    yield proc
    proc.stop()


def test_commands_before_auth_are_refused(auth_server: ServerProcess) -> None:
    c = RawClient(auth_server.addr)
    assert c.call({"cmd": "Ping", "reqId": "pre"}) == {"ok": False, "error": "Not authenticated", "reqId": "pre"}
    assert c.call({"cmd": "PUSH", "queue": "a", "name": "j", "data": 1})["error"] == "Not authenticated"
    assert c.call({"cmd": "Hello", "protocolVersion": 3})["error"] == "Not authenticated"
    assert c.call({"cmd": "Auth", "token": "wrong", "reqId": "a1"}) == {
        "ok": False, "error": "Invalid token", "reqId": "a1"}
    assert c.call({"cmd": "Auth", "token": "tok-two"}) == {"ok": True}
    assert c.call({"cmd": "PUSH", "queue": "auth-q", "name": "j", "data": 1})["ok"]
    other = RawClient(auth_server.addr)
    assert other.call({"cmd": "GetJobCounts", "queue": "auth-q"})["error"] == "Not authenticated"
    assert other.call({"cmd": "Auth", "token": "tok-one"})["ok"]
    assert other.call({"cmd": "GetJobCounts", "queue": "auth-q"})["counts"]["waiting"] == 1


def test_auth_without_configured_tokens_fails(raw: RawClient) -> None:
    assert raw.call({"cmd": "Auth", "token": "anything"})["error"] == "Invalid token"


def test_rate_limit_per_connection() -> None:
    proc = ServerProcess(env={"RATE_LIMIT_MAX_REQUESTS": "5", "RATE_LIMIT_WINDOW_MS": "60000"}).start()
    try:
        c = RawClient(proc.addr)
        replies = [c.call({"cmd": "Ping", "reqId": i}) for i in range(7)]
        assert [r["ok"] for r in replies] == [True] * 5 + [False] * 2
        assert replies[5] == {"ok": False, "error": "Rate limit exceeded", "reqId": 5}
        fresh = RawClient(proc.addr)
        assert fresh.call({"cmd": "Ping"})["ok"], "the limit is per connection"
    finally:
        proc.stop()


def test_sigterm_stops_the_server_cleanly() -> None:
    proc = ServerProcess().start()
    assert proc.stop(timeout=10) == 0
