"""The PostgreSQL server's dispatch: one connection's commands take effect in the order they were sent, even
pipelined in one write; a long-poll holds up nothing sent after it."""
from __future__ import annotations

import asyncio
import time

import pytest

from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.server import ServerProcess
from bunqueue.storage.postgres.dispatch import CommandOrder

pytestmark = pytest.mark.usefixtures("postgres")


def test_pipelined_commands_see_the_effects_of_those_sent_before_them(pg_server: ServerProcess) -> None:
    client = RawClient(pg_server.addr)
    frames = []
    for i in range(20):
        frames += [
            {"cmd": "PUSH", "queue": "order-pipe", "data": i, "jobId": f"order-{i}", "reqId": f"p{i}"},
            {"cmd": "GetState", "id": f"order-{i}", "reqId": f"s{i}"},
        ]
    for frame in frames:
        client.send(frame)
    replies = {reply["reqId"]: reply for reply in (client.recv() for _ in frames)}
    client.close()
    assert all(replies[f"s{i}"]["state"] == "waiting" for i in range(20)), replies


def test_a_long_poll_holds_up_no_later_command(pg_server: ServerProcess) -> None:
    client = RawClient(pg_server.addr, timeout=10)
    client.send({"cmd": "PULL", "queue": "order-idle", "timeout": 3000, "reqId": "wait"})
    sent = time.monotonic()
    client.send({"cmd": "GetJobCounts", "queue": "order-idle", "reqId": "counts"})
    first = client.recv()
    assert first["reqId"] == "counts" and time.monotonic() - sent < 2.5, first
    assert client.recv()["reqId"] == "wait"
    client.close()


async def test_a_run_of_one_kind_waits_only_for_what_came_before_the_run() -> None:
    order = CommandOrder()
    before_first, first = order.enter("GetJob", False)
    before_push, push = order.enter("PUSH", False)
    before_second_push, second_push = order.enter("PUSH", False)
    before_ack, _ = order.enter("ACK", False)
    assert before_first == [] and before_push == [first] and before_second_push == [first]
    assert before_ack == [push, second_push]
    first.set_result(None)
    push.set_result(None)
    _, _ = order.enter("GetJob", True)
    # A long-poll is not waited for by what follows it.
    before_next, _ = order.enter("Count", False)
    assert before_next == []
    await asyncio.sleep(0)
