"""Job groups in process on a fake clock: the exact wake-up a held-back pull arms, the group's active count
on every way out of active, and what the store is told of group controls."""
from __future__ import annotations

import asyncio
from typing import Any

from bunqueue._testbase.clock import T0
from bunqueue._testbase.inprocess import QUEUE, World
from bunqueue.broker.timers.deadlines import GROUP_LIMITS, LEASES

LIMITED = {"limit": {"max": 1, "duration": 1000}}


def active(world: World, group: str) -> int:
    count: int = world.send({"cmd": "GetGroupActiveCount", "queue": QUEUE, "groupId": group})["data"]["count"]
    return count


def test_a_pull_held_back_by_a_window_arms_the_group_timer_for_the_window_end(world: World) -> None:
    world.push(groupId="G")
    world.push(groupId="G")
    world.pull(group=LIMITED)
    world.armed.clear()
    assert world.send({"cmd": "PULL", "queue": QUEUE, "group": LIMITED})["job"] is None
    assert world.armed == [(GROUP_LIMITS, T0 + 1000)]
    q = world.broker.queues[QUEUE]
    loop = asyncio.new_event_loop()
    try:
        waiter = loop.create_future()
        q.waiters.append(waiter)
        handler = world.broker.deadline_handlers()[GROUP_LIMITS]
        assert handler(T0 + 999) == T0 + 1000 and not waiter.done()
        assert handler(T0 + 1000) is None and waiter.done()
    finally:
        loop.close()
    world.clock.set(T0 + 1000)
    job, _ = world.pull(group=LIMITED)
    assert job.group_id == "G"


def test_a_manual_deadline_arms_the_timer_for_its_end(world: World) -> None:
    world.push(groupId="G")
    assert world.send({"cmd": "RateLimitGroup", "queue": QUEUE, "groupId": "G", "duration": 250}) == {"ok": True}
    world.armed.clear()
    assert world.send({"cmd": "PULL", "queue": QUEUE})["job"] is None
    assert world.armed == [(GROUP_LIMITS, T0 + 250)]
    world.clock.advance(250)
    world.pull()


def test_every_way_out_of_active_releases_the_group_slot(world: World) -> None:
    for _ in range(3):
        world.push(groupId="G", maxAttempts=5)
    acked, token = world.pull(owner="w")
    assert world.send({"cmd": "ACK", "id": acked.id, "token": token}) == {"ok": True}
    failed, token = world.pull(owner="w")
    assert world.send({"cmd": "FAIL", "id": failed.id, "token": token}) == {"ok": True}
    world.pull(owner="w", lockTtl=100)
    assert active(world, "G") == 1
    world.clock.advance(101)
    world.broker.deadline_handlers()[LEASES](world.clock())
    assert active(world, "G") == 0
    # The lost attempts are back in the group's depth (one retried by FAIL, one by the lease).
    depth = world.send({"cmd": "GetGroupJobsCount", "queue": QUEUE, "groupId": "G"})["data"]["count"]
    assert depth == 2


class GroupStore:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []

    def group_changed(self, queue: str, group_id: str, controls: dict[str, Any] | None) -> None:
        self.calls.append((queue, group_id, controls))


def test_the_store_is_told_of_each_control_change(world: World) -> None:
    recorder = GroupStore()
    world.broker.groups.store.group_changed = recorder.group_changed  # type: ignore[method-assign]
    world.send({"cmd": "SetGroupConcurrency", "queue": QUEUE, "groupId": "G", "concurrency": 2})
    world.send({"cmd": "PauseGroup", "queue": QUEUE, "groupId": "G"})
    world.send({"cmd": "PauseGroup", "queue": QUEUE, "groupId": "G"})
    world.send({"cmd": "RemoveGroupConcurrency", "queue": QUEUE, "groupId": "G"})
    world.send({"cmd": "ResumeGroup", "queue": QUEUE, "groupId": "G"})
    world.send({"cmd": "RateLimitGroup", "queue": QUEUE, "groupId": "G", "duration": 50})
    full = {"concurrency": 2, "rateMax": 0, "rateDuration": 0, "paused": False}
    assert recorder.calls == [
        (QUEUE, "G", full),
        (QUEUE, "G", {**full, "paused": True}),
        (QUEUE, "G", {**full, "concurrency": 0, "paused": True}),
        (QUEUE, "G", None),
    ]
