"""``on_telemetry``: the SDK's events (kinds, fields and order) from a real server's connection."""
from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import bunqueue
from bunqueue._testbase.server import ServerProcess, free_port

pytestmark = pytest.mark.timeout(60)


class Recorder:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def __call__(self, event: dict[str, Any]) -> None:
        with self.lock:
            self.events.append(event)

    def kinds(self) -> list[str]:
        with self.lock:
            return [e["type"] for e in self.events]

    def wait_for(self, kind: str, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while kind not in self.kinds():
            assert time.monotonic() < deadline, f"no {kind} event: {self.kinds()}"
            time.sleep(0.02)


@pytest.fixture(scope="module")
def token_server() -> Iterator[ServerProcess]:
    proc = ServerProcess(env={"AUTH_TOKENS": "tele-token"}).start()
    yield proc
    proc.stop()


def _shape(event: dict[str, Any]) -> tuple[str, list[str]]:
    return event["type"], sorted(event)


def test_connection_and_command_events(token_server: ServerProcess) -> None:
    seen = Recorder()
    conn = bunqueue.Connection(host="127.0.0.1", port=token_server.port, token="tele-token", on_telemetry=seen)
    assert conn.ping() is True
    queue = bunqueue.Queue(f"tele-{uuid.uuid4().hex[:8]}", connection=conn)
    with pytest.raises(bunqueue.CommandError):
        queue.promote_job("no-such-job")
    conn.close()
    seen.wait_for("disconnect")
    events = seen.events
    assert [_shape(e) for e in events] == [
        ("auth", ["ok", "type"]),
        ("connect", ["duration_ms", "generation", "host", "port", "type"]),
        ("command", ["cmd", "duration_ms", "ok", "req_id", "type"]),
        ("command", ["cmd", "duration_ms", "ok", "req_id", "type"]),
        ("disconnect", ["generation", "host", "port", "type"]),
    ], events
    auth, connect, ping, bad, disconnect = events
    assert auth["ok"] is True
    assert (connect["host"], connect["port"], connect["generation"]) == ("127.0.0.1", token_server.port, 1)
    assert connect["duration_ms"] >= 0
    assert (ping["cmd"], ping["ok"], bad["cmd"], bad["ok"]) == ("Ping", True, "Promote", False)
    assert isinstance(ping["req_id"], str) and ping["req_id"] != bad["req_id"]
    assert ping["duration_ms"] >= 0
    assert (disconnect["host"], disconnect["port"], disconnect["generation"]) == ("127.0.0.1", token_server.port, 1)


def test_refused_token_and_unreachable_server(token_server: ServerProcess) -> None:
    seen = Recorder()
    queue = bunqueue.Queue("tele", host="127.0.0.1", port=token_server.port, token="wrong", on_telemetry=seen)
    with pytest.raises(bunqueue.AuthError):
        queue.add("x", {})
    assert seen.events == [{"type": "auth", "ok": False}]
    queue.close()

    seen = Recorder()
    port = free_port()
    flow = bunqueue.FlowProducer(host="127.0.0.1", port=port, on_telemetry=seen)
    with pytest.raises(bunqueue.ConnectionClosedError):
        flow.add({"name": "p", "queueName": "q", "data": {}})
    scheduled, error = seen.events
    assert scheduled == {"type": "reconnect_scheduled", "host": "127.0.0.1", "port": port, "attempt": 1,
                         "delay_ms": 500.0}
    assert error["type"] == "error" and error["operation"] == "connect" and "Errno 111" in error["error"]
    flow.close()


def test_worker_reports_its_commands(token_server: ServerProcess) -> None:
    seen = Recorder()
    name = f"tele-{uuid.uuid4().hex[:8]}"
    addr: dict[str, Any] = {"host": "127.0.0.1", "port": token_server.port, "token": "tele-token"}
    queue = bunqueue.Queue(name, **addr)
    queue.add("x", {"n": 1})
    done = threading.Event()
    worker = bunqueue.Worker(name, lambda job: 1, on_telemetry=seen, **addr)
    worker.on("completed", lambda job, result: done.set())
    assert done.wait(20)
    assert worker.close(timeout=15)
    commands = [e["cmd"] for e in seen.events if e["type"] == "command"]
    assert commands[0] == "RegisterWorker" and "PULLB" in commands and "ACK" in commands, commands
    assert commands[-1] == "UnregisterWorker", commands
    queue.close()
