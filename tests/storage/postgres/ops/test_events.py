"""Job events in PostgreSQL mode: the subscription commands as memory answers them, the events of a job's
life as memory sends them, and an event committed on one broker heard on another (TCP and SSE)."""
from __future__ import annotations

import json
import socket
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.postgres import PostgresServer
from bunqueue._testbase.server import ServerProcess
from bunqueue._testbase.twins import Names, Twins
from tests.storage.postgres.ops.conftest import postgres_broker

pytestmark = pytest.mark.usefixtures("postgres")


def test_subscribe_and_unsubscribe_answer_as_in_memory(twins: Twins) -> None:
    assert twins.same({"cmd": "SubscribeEvents", "queue": "ev-sub", "reqId": "s"}) == {"ok": True, "reqId": "s"}
    assert twins.same({"cmd": "SubscribeEvents", "queue": "bad queue"})["ok"] is False
    assert twins.same({"cmd": "SubscribeEvents"})["ok"] is False
    assert twins.same({"cmd": "UnsubscribeEvents"}) == {"ok": True}


def lifecycle(server: ServerProcess, queue: str) -> list[dict[str, Any]]:
    """Every event a subscriber of ``queue`` hears while a job is pushed, pulled, completed, and another
    fails once (retried) and then for good; then the frames after an unsubscribe (none expected)."""
    subscriber, worker = RawClient(server.addr), RawClient(server.addr)
    try:
        assert subscriber.call({"cmd": "SubscribeEvents", "queue": queue}) == {"ok": True}
        done = worker.ok({"cmd": "PUSH", "queue": queue, "data": {"n": 1}})["id"]
        worker.ok({"cmd": "PUSH", "queue": queue + "-other", "data": 0})
        pulled = worker.ok({"cmd": "PULL", "queue": queue, "owner": "w", "lockTtl": 60_000})
        worker.ok({"cmd": "ACK", "id": done, "token": pulled["token"], "result": {"done": True}})
        failing = worker.ok({"cmd": "PUSH", "queue": queue, "data": 7, "maxAttempts": 2, "backoff": 0})["id"]
        for error in ("e1", "e2"):
            pulled = worker.ok({"cmd": "PULL", "queue": queue, "owner": "w", "lockTtl": 60_000})
            worker.ok({"cmd": "FAIL", "id": failing, "token": pulled["token"], "error": error})
        events = [subscriber.recv() for _ in range(9)]
        assert subscriber.call({"cmd": "UnsubscribeEvents"}) == {"ok": True}
        worker.ok({"cmd": "PUSH", "queue": queue, "data": 2})
        # The next frame the subscriber reads is its Ping's reply: the push after the unsubscribe sent nothing.
        assert subscriber.call({"cmd": "Ping"})["data"]["pong"] is True
        return events
    finally:
        subscriber.close()
        worker.close()


def test_a_jobs_events_have_the_memory_engines_shapes(server: ServerProcess, pg_server: ServerProcess) -> None:
    memory = lifecycle(server, "ev-life")
    postgres = lifecycle(pg_server, "ev-life")
    assert [(e["type"], e["event"]["eventType"]) for e in postgres] == [("event", kind) for kind in (
        "pushed", "pulled", "completed", "pushed", "pulled", "failed", "retried", "pulled", "failed",
    )]
    assert Names()(postgres) == Names()(memory)


def sse_stream(server: ServerProcess, path: str) -> socket.socket:
    """An open SSE stream of ``server``, past its headers and first message."""
    conn = socket.create_connection(("127.0.0.1", server.http_port), timeout=5)
    conn.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n".encode())
    received = b""
    while b"retry: 3000" not in received:
        received += conn.recv(4096)
    return conn


def sse_event(conn: socket.socket, name: str) -> dict[str, Any]:
    """The data of the next SSE message named ``name`` on ``conn``."""
    buffered = b""
    while True:
        while b"\n\n" not in buffered:
            buffered += conn.recv(4096)
        message, buffered = buffered.split(b"\n\n", 1)
        fields = dict(line.split(": ", 1) for line in message.decode().splitlines() if ": " in line)
        if fields.get("event") == name:
            data: dict[str, Any] = json.loads(fields["data"])
            return data


@pytest.fixture(scope="module")
def brokers(postgres: PostgresServer) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    """Two brokers in one namespace."""
    namespace = f"ev-two-{uuid.uuid4().hex[:12]}"
    first = postgres_broker(postgres, namespace)
    second = postgres_broker(postgres, namespace)
    yield first, second
    first.stop()
    second.stop()


def test_a_push_on_one_broker_reaches_the_other_brokers_tcp_and_sse_listeners(
    brokers: tuple[ServerProcess, ServerProcess],
) -> None:
    a, b = brokers
    subscriber, pusher = RawClient(b.addr), RawClient(a.addr)
    stream = sse_stream(b, "/events/queues/ev-two")
    try:
        assert subscriber.call({"cmd": "SubscribeEvents", "queue": "ev-two"}) == {"ok": True}
        started = time.monotonic()
        job_id = pusher.ok({"cmd": "PUSH", "queue": "ev-two", "data": {"big": "x" * 20_000}})["id"]
        heard = subscriber.recv()
        tcp_delay_ms = (time.monotonic() - started) * 1000
        streamed = sse_event(stream, "job:pushed")
        sse_delay_ms = (time.monotonic() - started) * 1000
        print(f"a push on broker A reached broker B's TCP subscriber in {tcp_delay_ms:.1f} ms, "
              f"its SSE stream in {sse_delay_ms:.1f} ms")
        assert heard["type"] == "event"
        assert {k: v for k, v in heard["event"].items() if k != "timestamp"} == {
            "eventType": "pushed", "queue": "ev-two", "jobId": job_id,
        }
        assert isinstance(heard["event"]["timestamp"], (int, float))
        assert streamed["jobId"] == job_id and streamed["queue"] == "ev-two"
        # Once the connections are warm: from the push's reply on A to the event on B.
        again = pusher.ok({"cmd": "PUSH", "queue": "ev-two", "data": 2})["id"]
        replied = time.monotonic()
        assert subscriber.recv()["event"]["jobId"] == again
        print(f"then {(time.monotonic() - replied) * 1000:.1f} ms after the push's reply")
        assert sse_event(stream, "job:pushed")["jobId"] == again
        # B's own events reach its subscriber too: a worker on B pulls and completes the job.
        pulled = RawClient(b.addr)
        job = pulled.ok({"cmd": "PULL", "queue": "ev-two", "owner": "w", "lockTtl": 60_000})
        pulled.ok({"cmd": "ACK", "id": job_id, "token": job["token"], "result": {"r": 1}})
        pulled.close()
        assert subscriber.recv()["event"]["eventType"] == "pulled"
        completed = subscriber.recv()["event"]
        assert (completed["eventType"], completed["data"]) == ("completed", {"r": 1})
    finally:
        stream.close()
        subscriber.close()
        pusher.close()


def test_another_brokers_events_keep_their_fields_and_skip_other_queues(
    brokers: tuple[ServerProcess, ServerProcess],
) -> None:
    a, b = brokers
    subscriber, worker = RawClient(b.addr), RawClient(a.addr)
    try:
        assert subscriber.call({"cmd": "SubscribeEvents", "queue": "ev-fields"}) == {"ok": True}
        worker.ok({"cmd": "PUSH", "queue": "ev-fields-other", "data": 1})
        job_id = worker.ok({"cmd": "PUSH", "queue": "ev-fields", "data": b"\x00\xff", "maxAttempts": 1})["id"]
        job = worker.ok({"cmd": "PULL", "queue": "ev-fields", "owner": "w", "lockTtl": 60_000})
        worker.ok({"cmd": "FAIL", "id": job_id, "token": job["token"], "error": "boom"})
        events = [subscriber.recv()["event"] for _ in range(3)]
        assert [e["eventType"] for e in events] == ["pushed", "pulled", "failed"]
        failed = events[2]
        assert (failed["jobId"], failed["data"], failed["error"], failed["terminal"]) == (
            job_id, b"\x00\xff", "boom", True)
    finally:
        subscriber.close()
        worker.close()


def test_a_burst_crosses_in_order_and_an_event_too_large_for_a_notification_gets_its_data_back(
    brokers: tuple[ServerProcess, ServerProcess],
) -> None:
    a, b = brokers
    subscriber, worker = RawClient(b.addr), RawClient(a.addr)
    try:
        assert subscriber.call({"cmd": "SubscribeEvents", "queue": "ev-burst"}) == {"ok": True}
        # 600 events need several notifications (each under PostgreSQL's 8000 bytes).
        ids = worker.ok({"cmd": "PUSHB", "queue": "ev-burst", "jobs": [{"data": i} for i in range(600)]})["ids"]
        assert [subscriber.recv()["event"]["jobId"] for _ in ids] == ids
        job = worker.ok({"cmd": "PULL", "queue": "ev-burst", "owner": "w", "lockTtl": 60_000})
        worker.ok({"cmd": "ACK", "id": ids[0], "token": job["token"], "result": "r" * 10_000})
        worker.ok({"cmd": "PUSH", "queue": "ev-burst", "data": "after"})
        assert subscriber.recv()["event"]["eventType"] == "pulled"
        completed = subscriber.recv()["event"]
        assert (completed["eventType"], completed["jobId"], completed["data"]) == ("completed", ids[0], "r" * 10_000)
        # What was sent after it waited for its data: the order holds.
        assert subscriber.recv()["event"]["eventType"] == "pushed"
    finally:
        subscriber.close()
        worker.close()


def controlled(server: ServerProcess, queue: str) -> list[dict[str, Any]]:
    """Every event a subscriber of ``queue`` hears while the other families' commands move jobs: Progress,
    MoveToDelayed, Cancel, ChangePriority and Promote (no job event), Pause and Resume, and a lease that
    lapses; then nothing more."""
    subscriber, worker = RawClient(server.addr), RawClient(server.addr)
    try:
        assert subscriber.call({"cmd": "SubscribeEvents", "queue": queue}) == {"ok": True}
        moved = worker.ok({"cmd": "PUSH", "queue": queue, "data": {"n": 1}})["id"]
        pulled = worker.ok({"cmd": "PULL", "queue": queue, "owner": "w", "lockTtl": 60_000})
        worker.ok({"cmd": "Progress", "id": moved, "progress": 40, "message": "half"})
        worker.ok({"cmd": "MoveToDelayed", "id": moved, "delay": 60_000, "token": pulled["token"]})
        worker.ok({"cmd": "Cancel", "id": moved})
        lapsing = worker.ok({"cmd": "PUSH", "queue": queue, "data": 2, "delay": 60_000})["id"]
        worker.ok({"cmd": "ChangePriority", "id": lapsing, "priority": 5})
        worker.ok({"cmd": "Promote", "id": lapsing})
        worker.ok({"cmd": "Pause", "queue": queue})
        worker.ok({"cmd": "Resume", "queue": queue})
        worker.ok({"cmd": "PULL", "queue": queue, "owner": "w", "lockTtl": 100})
        events = [subscriber.recv() for _ in range(10)]
        assert subscriber.call({"cmd": "Ping"})["data"]["pong"] is True
        return events
    finally:
        subscriber.close()
        worker.close()


def test_the_other_families_events_have_the_memory_engines_shapes(
    server: ServerProcess, pg_server: ServerProcess,
) -> None:
    memory = controlled(server, "ev-controls")
    postgres = controlled(pg_server, "ev-controls")
    assert [e["event"]["eventType"] for e in postgres] == [
        "pushed", "pulled", "progress", "delayed", "removed", "pushed", "paused", "resumed", "pulled", "stalled",
    ]
    events = {e["event"]["eventType"]: e["event"] for e in postgres}
    assert (events["progress"]["progress"], events["progress"]["data"]) == (40, {"progress": 40, "message": "half"})
    assert (events["delayed"]["delay"], events["removed"]["prev"]) == (60_000, "delayed")
    assert (events["paused"]["jobId"], events["resumed"]["jobId"]) == ("", "")
    assert events["stalled"]["data"] == {"stallCount": 1, "action": "retry"}
    assert Names()(postgres) == Names()(memory)


def test_the_other_families_events_committed_on_one_broker_reach_the_other(
    brokers: tuple[ServerProcess, ServerProcess],
) -> None:
    a, b = brokers
    subscriber, worker = RawClient(b.addr), RawClient(a.addr)
    try:
        assert subscriber.call({"cmd": "SubscribeEvents", "queue": "ev-moves"}) == {"ok": True}
        job_id = worker.ok({"cmd": "PUSH", "queue": "ev-moves", "data": 1})["id"]
        pulled = worker.ok({"cmd": "PULL", "queue": "ev-moves", "owner": "w", "lockTtl": 60_000})
        worker.ok({"cmd": "Progress", "id": job_id, "progress": 70})
        worker.ok({"cmd": "MoveToDelayed", "id": job_id, "delay": 5_000, "token": pulled["token"]})
        worker.ok({"cmd": "Cancel", "id": job_id})
        worker.ok({"cmd": "Pause", "queue": "ev-moves"})
        events = [subscriber.recv()["event"] for _ in range(6)]
        told = [{k: v for k, v in event.items() if k != "timestamp"} for event in events]
        assert told == [
            {"eventType": "pushed", "queue": "ev-moves", "jobId": job_id},
            {"eventType": "pulled", "queue": "ev-moves", "jobId": job_id},
            {"eventType": "progress", "queue": "ev-moves", "jobId": job_id, "progress": 70,
             "data": {"progress": 70, "message": None}},
            {"eventType": "delayed", "queue": "ev-moves", "jobId": job_id, "delay": 5_000},
            {"eventType": "removed", "queue": "ev-moves", "jobId": job_id, "prev": "delayed"},
            {"eventType": "paused", "queue": "ev-moves", "jobId": ""},
        ]
        # A lease that lapses is told by whichever broker's sweep took it, and heard on B either way.
        worker.ok({"cmd": "Resume", "queue": "ev-moves"})
        lapsing = worker.ok({"cmd": "PUSH", "queue": "ev-moves", "data": 2, "maxAttempts": 1})["id"]
        worker.ok({"cmd": "PULL", "queue": "ev-moves", "owner": "w", "lockTtl": 100})
        kinds = [subscriber.recv()["event"] for _ in range(4)]
        assert [e["eventType"] for e in kinds] == ["resumed", "pushed", "pulled", "stalled"]
        assert (kinds[3]["jobId"], kinds[3]["data"]) == (lapsing, {"stallCount": 1, "action": "move_to_dlq"})
    finally:
        subscriber.close()
        worker.close()


# Periodic figures and connection notices: not told by the commands streamed below.
UNTOLD = ("stats:snapshot", "health:status", "storage:status", "queue:counts", "client:connected",
          "client:disconnected", "worker:connected", "worker:disconnected")


def streamed(server: ServerProcess, queue: str) -> list[tuple[str, dict[str, Any]]]:
    """The named messages of an all-events stream while the other families' commands run, up to the
    queue:removed of the closing Obliterate."""
    stream = sse_stream(server, "/events")
    client = RawClient(server.addr)
    try:
        ids = client.ok({"cmd": "PUSHB", "queue": queue, "jobs": [{"data": 1, "maxAttempts": 1}, {"data": 2}]})["ids"]
        pulled = client.ok({"cmd": "PULLB", "queue": queue, "count": 2, "owner": "w", "lockTtl": 60_000})
        tokens = dict(zip((job["id"] for job in pulled["jobs"]), pulled["tokens"]))
        client.ok({"cmd": "FAIL", "id": ids[0], "token": tokens[ids[0]], "error": "boom"})
        client.ok({"cmd": "RetryDlq", "queue": queue, "jobId": ids[0]})
        client.ok({"cmd": "ChangePriority", "id": ids[0], "priority": 3})
        client.ok({"cmd": "Update", "id": ids[0], "data": {"n": 3}})
        client.ok({"cmd": "ChangeDelay", "id": ids[0], "delay": 60_000})
        client.ok({"cmd": "Promote", "id": ids[0]})
        client.ok({"cmd": "SetDlqConfig", "queue": queue, "config": {"maxEntries": 50}})
        client.ok({"cmd": "SetStallConfig", "queue": queue, "config": {"maxStalls": 4}})
        client.ok({"cmd": "RateLimit", "queue": queue, "limit": 10})
        client.ok({"cmd": "RateLimitClear", "queue": queue})
        client.ok({"cmd": "SetConcurrency", "queue": queue, "limit": 2})
        client.ok({"cmd": "ClearConcurrency", "queue": queue})
        client.ok({"cmd": "Pause", "queue": queue})
        client.ok({"cmd": "Resume", "queue": queue})
        client.ok({"cmd": "Drain", "queue": queue})
        client.ok({"cmd": "Obliterate", "queue": queue})
        told: list[tuple[str, dict[str, Any]]] = []
        while not told or told[-1][0] != "queue:removed":
            name, data = sse_next(stream)
            if name not in UNTOLD:
                told.append((name, data))
        return told
    finally:
        client.close()
        stream.close()


def sse_next(conn: socket.socket) -> tuple[str, dict[str, Any]]:
    """The next named SSE message on ``conn``: its name and data."""
    buffered = b""
    while b"\n\n" not in buffered:
        buffered += conn.recv(1)
    fields = dict(line.split(": ", 1) for line in buffered.decode().splitlines() if ": " in line)
    if "event" not in fields:
        return sse_next(conn)
    return fields["event"], json.loads(fields["data"])


def test_the_streams_hear_the_other_families_system_events_as_in_memory(
    server: ServerProcess, pg_server: ServerProcess,
) -> None:
    memory = streamed(server, "ev-stream")
    postgres = streamed(pg_server, "ev-stream")
    names = [name for name, _ in postgres]
    for name in ("batch:pushed", "batch:pulled", "dlq:added", "dlq:retried", "job:priority-changed",
                 "job:data-updated", "job:delay-changed", "job:promoted", "config:dlq-changed",
                 "config:stall-changed", "ratelimit:set", "ratelimit:cleared", "concurrency:set",
                 "concurrency:cleared", "queue:paused", "job:paused", "queue:resumed", "queue:drained",
                 "queue:obliterated"):
        assert name in names
    assert Names()([list(told) for told in postgres]) == Names()([list(told) for told in memory])


def parent_failed(server: ServerProcess, parent_id: str) -> list[dict[str, Any]]:
    """The events a subscriber of a flow parent's queue hears when its failParentOnFailure child fails for
    good, up to the parent's ``failed``."""
    subscriber, worker = RawClient(server.addr), RawClient(server.addr)
    try:
        assert subscriber.call({"cmd": "SubscribeEvents", "queue": "ev-parents"}) == {"ok": True}
        worker.ok({"cmd": "PUSHF", "jobs": [
            {"id": parent_id, "queue": "ev-parents", "input": {
                "name": "parent", "data": {"p": 1, "__childrenIds": ["ev-kid"]},
                "childrenIds": ["ev-kid"], "dependsOn": ["ev-kid"]}},
            {"id": "ev-kid", "queue": "ev-kids", "input": {
                "name": "kid", "data": {"__parentId": parent_id, "__parentQueue": "ev-parents"},
                "parentId": parent_id, "maxAttempts": 1, "failParentOnFailure": True}},
        ]})
        pulled = worker.ok({"cmd": "PULL", "queue": "ev-kids", "owner": "w", "lockTtl": 60_000})
        worker.ok({"cmd": "FAIL", "id": "ev-kid", "token": pulled["token"], "error": "boom"})
        events = [subscriber.recv()]
        while events[-1]["event"]["eventType"] != "failed":
            events.append(subscriber.recv())
        return events
    finally:
        subscriber.close()
        worker.close()


def test_a_parent_its_child_fails_is_told_failed_as_in_memory(server: ServerProcess, pg_server: ServerProcess) -> None:
    memory = parent_failed(server, "ev-parent")
    postgres = parent_failed(pg_server, "ev-parent")
    failed = postgres[-1]["event"]
    assert (failed["jobId"], failed["data"]["p"], failed["terminal"]) == ("ev-parent", 1, True)
    assert "ev-kid" in failed["error"]
    assert Names()(postgres) == Names()(memory)


def sse_events_until(conn: socket.socket, last: str, names: set[str]) -> list[tuple[str, dict[str, Any]]]:
    """The SSE messages named in ``names`` on ``conn``, in order, up to and including the first named ``last``
    (or those that came within 10 s)."""
    out: list[tuple[str, dict[str, Any]]] = []
    buffered = b""
    deadline = time.monotonic() + 10
    while (not out or out[-1][0] != last) and time.monotonic() < deadline:
        while b"\n\n" not in buffered:
            buffered += conn.recv(4096)
        message, buffered = buffered.split(b"\n\n", 1)
        fields = dict(line.split(": ", 1) for line in message.decode().splitlines() if ": " in line)
        if fields.get("event") in names:
            out.append((fields["event"], json.loads(fields["data"])))
    return out


def test_system_events_told_on_one_broker_reach_the_other_brokers_streams(
    brokers: tuple[ServerProcess, ServerProcess],
) -> None:
    a, b = brokers
    q = "ev-system"
    stream = sse_stream(b, "/events")
    client = RawClient(a.addr)
    try:
        client.ok({"cmd": "SetConcurrency", "queue": q, "limit": 5})
        later = client.ok({"cmd": "PUSHB", "queue": q, "jobs": [
            {"data": 1, "delay": 60_000}, {"data": 2, "maxAttempts": 1}]})["ids"]
        client.ok({"cmd": "Promote", "id": later[0]})
        failing = client.ok({"cmd": "PULL", "queue": q, "owner": "w"})
        assert failing["job"]["id"] == later[1]
        client.ok({"cmd": "FAIL", "id": later[1], "token": failing["token"], "error": "boom"})
        watched = {"client:connected", "concurrency:set", "batch:pushed", "job:promoted", "dlq:added"}
        heard = sse_events_until(stream, "dlq:added", watched)
        # In the order told on A; A's own connections stay with A's streams.
        assert heard == [
            ("concurrency:set", {"queue": q, "concurrency": 5}),
            ("batch:pushed", {"queue": q, "total": 2, "inserted": 2, "duplicates": 0}),
            ("job:promoted", {"jobId": later[0]}),
            ("dlq:added", {"queue": q, "jobId": later[1], "reason": "max_attempts_exceeded"}),
        ]
    finally:
        stream.close()
        client.close()


def dependency_events(commands: ServerProcess, listener: ServerProcess, q: str) -> list[tuple[str, dict[str, Any]]]:
    """What ``listener``'s stream tells while ``commands`` completes a job another depends on, then a flow's
    two children: job:dependencies-resolved and flow:completed, up to the closing drain's queue:drained,
    with generated ids as their labels."""
    stream = sse_stream(listener, "/events")
    client = RawClient(commands.addr)
    try:
        first = client.ok({"cmd": "PUSH", "queue": q, "data": {}})["id"]
        second = client.ok({"cmd": "PUSH", "queue": q + "-next", "data": {}, "dependsOn": [first]})["id"]
        pulled = client.ok({"cmd": "PULL", "queue": q, "owner": "w"})
        client.ok({"cmd": "ACK", "id": first, "token": pulled["token"]})
        parent, kids = q + "-P", [q + "-A", q + "-B"]
        kid_data = {"__parentId": parent, "__parentQueue": q + "-parent"}
        client.ok({"cmd": "PUSHF", "jobs": [
            {"id": parent, "queue": q + "-parent",
             "input": {"name": "parent", "data": {"__childrenIds": kids}, "childrenIds": kids, "dependsOn": kids}},
            *({"id": kid, "queue": q + "-kids", "input": {"name": kid, "data": kid_data, "parentId": parent}}
              for kid in kids),
        ]})
        for _ in kids:
            job = client.ok({"cmd": "PULL", "queue": q + "-kids", "owner": "w"})
            client.ok({"cmd": "ACK", "id": job["job"]["id"], "token": job["token"]})
        client.ok({"cmd": "Drain", "queue": q + "-next"})
        watched = {"job:dependencies-resolved", "flow:completed", "queue:drained"}
        labels = {first: "first", second: "second"}
        told: list[tuple[str, dict[str, Any]]] = []
        # Up to this call's drain: another broker's stream may still hear an earlier call's events late.
        while not told or told[-1][0] != "queue:drained":
            name, data = sse_next(stream)
            if name in watched and data.get("queue", "").startswith(q + "-"):
                told.append((name, {k: labels.get(v, v) for k, v in data.items()}))
        return told
    finally:
        client.close()
        stream.close()


def told_of_dependencies(q: str) -> list[tuple[str, dict[str, Any]]]:
    """What the memory engine tells in ``dependency_events``."""
    return [
        ("job:dependencies-resolved", {"jobId": "second", "queue": q + "-next"}),
        ("job:dependencies-resolved", {"jobId": q + "-P", "queue": q + "-parent"}),
        ("flow:completed", {"parentJobId": q + "-P", "queue": q + "-parent", "childrenCount": 2}),
        ("queue:drained", {"queue": q + "-next", "count": 1}),
    ]


def test_released_dependants_and_finished_flows_are_told_as_in_memory_and_on_every_broker(
    server: ServerProcess, brokers: tuple[ServerProcess, ServerProcess],
) -> None:
    q = "ev-deps-" + uuid.uuid4().hex[:6]
    assert dependency_events(server, server, q) == told_of_dependencies(q)
    a, b = brokers
    assert dependency_events(a, a, q) == told_of_dependencies(q)
    assert dependency_events(a, b, q + "-b") == told_of_dependencies(q + "-b")
