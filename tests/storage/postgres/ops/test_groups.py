"""The group family on PostgreSQL, frame for frame against the memory engine: the group getters and
controls, and grouped jobs pulled in lane order under pause, RateLimitGroup, group concurrency and rate
limits, and under the queue's own concurrency and rate limits. Across two brokers: a group concurrency, a
rate window and the queue's limits that hold when both pull at once, and long-polls woken by a resume or a
grouped push on the other broker. And idle group rows going."""
from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest

from bunqueue._core.groups import ONE_LANE, GroupClaim
from bunqueue._core.jobfactory import JobFactory
from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.postgres import PostgresServer
from bunqueue._testbase.twins import Twins
from bunqueue.config import Settings
from bunqueue.storage.postgres.hotpath import HotPath
from bunqueue.storage.postgres.migrations import migrate
from bunqueue.storage.postgres.ops.groups import GroupsFamily
from bunqueue.storage.postgres.pool import PostgresConfig, connect
from tests.storage.postgres.ops.conftest import postgres_broker

pytestmark = pytest.mark.usefixtures("postgres")


def _names(reply: dict[str, Any]) -> list[str]:
    jobs = reply["jobs"] if "jobs" in reply else [reply["job"]] if reply["job"] else []
    return [job["name"] for job in jobs]


def test_getters_of_a_queue_and_group_never_seen(twins: Twins) -> None:
    for cmd in ("GetGroupJobsCount", "GetGroupActiveCount", "GetGroupConcurrency", "GetGroupRateLimit",
                "IsGroupPaused", "GetGroupRateLimitTtl", "RemoveGroupConcurrency", "RemoveGroupRateLimit",
                "ResumeGroup"):
        twins.same({"cmd": cmd, "queue": "g-never", "groupId": "x"})
    assert twins.same({"cmd": "GetGroupsJobsCount", "queue": "g-never"}) == {"ok": True, "data": {"count": 0}}
    assert twins.same({"cmd": "GetGroupRateLimitTtl", "queue": "g-never", "groupId": "x"})["data"]["ttl"] == -2


def test_controls_are_set_read_and_removed_as_in_memory(twins: Twins) -> None:
    q = "g-controls"
    frames = [
        {"cmd": "SetGroupConcurrency", "queue": q, "groupId": "A", "concurrency": 3},
        {"cmd": "GetGroupConcurrency", "queue": q, "groupId": "A"},
        {"cmd": "SetGroupConcurrency", "queue": q, "groupId": "A", "concurrency": 2},
        {"cmd": "GetGroupConcurrency", "queue": q, "groupId": "A"},
        {"cmd": "RemoveGroupConcurrency", "queue": q, "groupId": "A"},
        {"cmd": "RemoveGroupConcurrency", "queue": q, "groupId": "A"},
        {"cmd": "GetGroupConcurrency", "queue": q, "groupId": "A"},
        {"cmd": "SetGroupRateLimit", "queue": q, "groupId": "A", "max": 4, "duration": 9000},
        {"cmd": "GetGroupRateLimit", "queue": q, "groupId": "A"},
        {"cmd": "GetGroupRateLimitTtl", "queue": q, "groupId": "A"},
        {"cmd": "RemoveGroupRateLimit", "queue": q, "groupId": "A"},
        {"cmd": "RemoveGroupRateLimit", "queue": q, "groupId": "A"},
        {"cmd": "GetGroupRateLimit", "queue": q, "groupId": "A"},
        {"cmd": "IsGroupPaused", "queue": q, "groupId": "B"},
        {"cmd": "PauseGroup", "queue": q, "groupId": "B"},
        {"cmd": "PauseGroup", "queue": q, "groupId": "B"},
        {"cmd": "IsGroupPaused", "queue": q, "groupId": "B"},
        {"cmd": "IsGroupPaused", "queue": q, "groupId": "A"},
        {"cmd": "ResumeGroup", "queue": q, "groupId": "B"},
        {"cmd": "ResumeGroup", "queue": q, "groupId": "B"},
        {"cmd": "IsGroupPaused", "queue": q, "groupId": "B"},
    ]
    replies = [twins.same(frame) for frame in frames]
    assert replies[1] == {"ok": True, "data": {"concurrency": 3}}
    assert [r["data"]["removed"] for r in (replies[4], replies[5])] == [1, 0]
    assert replies[8] == {"ok": True, "data": {"limit": {"max": 4, "duration": 9000}}}
    assert [r["data"]["changed"] for r in (replies[14], replies[15], replies[18], replies[19])] == [
        True, False, True, False]


def test_refusals_name_the_field_as_in_memory(twins: Twins) -> None:
    for frame in (
        {"cmd": "GetGroupJobsCount", "queue": "g-bad"},
        {"cmd": "GetGroupJobsCount", "queue": "g-bad", "groupId": ""},
        {"cmd": "SetGroupRateLimit", "queue": "g-bad", "groupId": "A", "max": 0, "duration": 1000},
        {"cmd": "SetGroupConcurrency", "queue": "g-bad", "groupId": "A", "concurrency": "2"},
        {"cmd": "RateLimitGroup", "queue": "g-bad", "groupId": "A", "duration": 0},
        {"cmd": "PULL", "queue": "g-bad", "group": {"concurrency": 0}},
        {"cmd": "PULL", "queue": "g-bad", "group": {"affinity": 3}},
    ):
        assert twins.same(frame)["ok"] is False


def test_counts_follow_waiting_delayed_and_running_grouped_jobs(twins: Twins) -> None:
    q = "g-counts"
    twins.same({"cmd": "PUSHB", "queue": q, "jobs": [
        {"name": "d", "data": 1, "groupId": "A", "delay": 60000},
        {"name": "w", "data": 2, "groupId": "A"},
        {"name": "x", "data": 3, "groupId": "B", "priority": 2},
        {"name": "u", "data": 4},
    ]})
    counts = [
        {"cmd": "GetGroupJobsCount", "queue": q, "groupId": "A"},
        {"cmd": "GetGroupJobsCount", "queue": q, "groupId": "B"},
        {"cmd": "GetGroupsJobsCount", "queue": q},
        {"cmd": "GetGroupActiveCount", "queue": q, "groupId": "A"},
    ]
    assert [twins.same(frame)["data"]["count"] for frame in counts] == [2, 1, 3, 0]
    assert _names(twins.same({"cmd": "PULLB", "queue": q, "count": 2})) == ["u", "w"]
    assert [twins.same(frame)["data"]["count"] for frame in counts] == [1, 1, 2, 1]


def test_lanes_are_served_round_robin_after_ungrouped_jobs_lower_priority_first(twins: Twins) -> None:
    q = "g-order"
    for name, group, priority in (("a1", "A", 3), ("a2", "A", 0), ("a3", "A", 1), ("b1", "B", 0),
                                  ("b2", "B", 0), ("u1", None, 0), ("c1", "C", 5), ("u2", None, 9)):
        frame: dict[str, Any] = {"cmd": "PUSH", "queue": q, "name": name, "data": name, "priority": priority}
        if group is not None:
            frame["groupId"] = group
        twins.same(frame)
    assert _names(twins.same({"cmd": "PULL", "queue": q})) == ["u2"]
    assert _names(twins.same({"cmd": "PULLB", "queue": q, "count": 3})) == ["u1", "a2", "b1"]
    # A lane that was served waits behind those that were not; then round two.
    assert _names(twins.same({"cmd": "PULLB", "queue": q, "count": 10})) == ["c1", "a3", "b2", "a1"]
    twins.same({"cmd": "PUSH", "queue": q, "name": "b3", "data": 1, "groupId": "B"})
    twins.same({"cmd": "PUSH", "queue": q, "name": "d1", "data": 1, "groupId": "D"})
    assert _names(twins.same({"cmd": "PULLB", "queue": q, "count": 10})) == ["b3", "d1"]


def test_paused_and_rate_limited_groups_are_skipped(twins: Twins) -> None:
    q = "g-held"
    twins.same({"cmd": "PauseGroup", "queue": q, "groupId": "P"})
    twins.same({"cmd": "PUSHB", "queue": q, "jobs": [
        {"name": name, "data": 1, "groupId": name[0].upper()} for name in ("p1", "r1", "r2", "f1")]})
    twins.same({"cmd": "RateLimitGroup", "queue": q, "groupId": "R", "duration": 60000})
    # The time left differs by the milliseconds between the two calls.
    both = twins.both({"cmd": "GetGroupRateLimitTtl", "queue": q, "groupId": "R"})
    assert all(0 < reply["data"]["ttl"] <= 60000 for reply in both), both
    assert _names(twins.same({"cmd": "PULLB", "queue": q, "count": 10})) == ["f1"]
    twins.same({"cmd": "ResumeGroup", "queue": q, "groupId": "P"})
    assert _names(twins.same({"cmd": "PULLB", "queue": q, "count": 10})) == ["p1"]
    assert twins.same({"cmd": "GetGroupJobsCount", "queue": q, "groupId": "R"})["data"]["count"] == 2


def test_pull_defaults_and_overrides_limit_each_group(twins: Twins) -> None:
    q = "g-limits"
    twins.same({"cmd": "PUSHB", "queue": q, "jobs": [
        {"name": f"{g}{i}", "data": i, "groupId": g.upper()} for g in "abc" for i in range(4)]})
    twins.same({"cmd": "SetGroupConcurrency", "queue": q, "groupId": "A", "concurrency": 1})
    twins.same({"cmd": "SetGroupRateLimit", "queue": q, "groupId": "C", "max": 3, "duration": 60000})
    # Without defaults a pull is held by neither the override nor the limit.
    twins.same({"cmd": "PULLB", "queue": q, "count": 3, "owner": "w"})
    pulled = twins.same({"cmd": "PULLB", "queue": q, "count": 20, "owner": "w", "group": {"concurrency": 2}})
    # A is at its override (1 running), B and C at the pull's 2.
    assert _names(pulled) == ["b1", "c1"]
    _ack_first(twins, q, {"cmd": "PULL", "queue": q, "owner": "w", "group": {"affinity": "A"}})
    # B opens a window of the pull's 2, C one of its override's 3.
    limited = {"concurrency": 9, "limit": {"max": 2, "duration": 60000}}
    assert _names(twins.same({"cmd": "PULLB", "queue": q, "count": 20, "owner": "w", "group": limited})) == [
        "b2", "c2", "b3", "c3"]
    assert twins.same({"cmd": "GetGroupRateLimitTtl", "queue": q, "groupId": "C", "maxJobs": 5})["data"] == {
        "ttl": 0}
    twins.same({"cmd": "PUSHB", "queue": q, "jobs": [{"name": f"c{i}", "data": i, "groupId": "C"} for i in (4, 5)]})
    assert _names(twins.same({"cmd": "PULLB", "queue": q, "count": 20, "owner": "w", "group": limited})) == ["c4"]
    assert _names(twins.same({"cmd": "PULLB", "queue": q, "count": 20, "owner": "w", "group": limited})) == []
    both = twins.both({"cmd": "GetGroupRateLimitTtl", "queue": q, "groupId": "C"})
    assert all(0 < reply["data"]["ttl"] <= 60000 for reply in both), both
    for group in "ABC":
        twins.same({"cmd": "GetGroupActiveCount", "queue": q, "groupId": group})


def _ack_first(twins: Twins, q: str, pull: dict[str, Any]) -> None:
    """Pull one job on both servers and complete it on each with its own token."""
    for client, reply in zip((twins.memory, twins.postgres), twins.both(pull)):
        assert client.call({"cmd": "ACK", "id": reply["job"]["id"], "token": reply["token"]}) == {"ok": True}


def test_affinity_takes_one_lane_and_null_affinity_ungrouped_jobs_only(twins: Twins) -> None:
    q = "g-affinity"
    twins.same({"cmd": "PUSHB", "queue": q, "jobs": [
        {"name": "a1", "data": 1, "groupId": "A"}, {"name": "b1", "data": 2, "groupId": "B"},
        {"name": "b2", "data": 3, "groupId": "B"}, {"name": "u1", "data": 4}]})
    assert _names(twins.same({"cmd": "PULLB", "queue": q, "count": 5, "group": {"affinity": "B"}})) == ["b1", "b2"]
    assert _names(twins.same({"cmd": "PULLB", "queue": q, "count": 5, "group": {"affinity": None}})) == ["u1"]
    assert _names(twins.same({"cmd": "PULL", "queue": q, "group": {"affinity": None}})) == []
    assert _names(twins.same({"cmd": "PULL", "queue": q, "group": {"affinity": "Z"}})) == []
    assert _names(twins.same({"cmd": "PULL", "queue": q})) == ["a1"]


def _at_once(clients: list[RawClient], frames: dict[str, Any] | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A frame sent by every client at the same moment (``frames``, or its own of a list), each from its
    own thread; the replies."""
    replies: list[dict[str, Any]] = []
    start = threading.Barrier(len(clients))

    def send(client: RawClient, frame: dict[str, Any]) -> None:
        start.wait()
        replies.append(client.call(frame))

    each = frames if isinstance(frames, list) else [frames] * len(clients)
    threads = [threading.Thread(target=send, args=pair) for pair in zip(clients, each)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return replies


def test_a_group_concurrency_of_one_holds_across_two_brokers_pulling_at_once(postgres: PostgresServer) -> None:
    namespace = f"groups-{uuid.uuid4().hex[:12]}"
    brokers = [postgres_broker(postgres, namespace), postgres_broker(postgres, namespace)]
    clients = [RawClient(broker.addr) for broker in brokers for _ in range(3)]
    try:
        q = "g-two"
        clients[0].call({"cmd": "SetGroupConcurrency", "queue": q, "groupId": "A", "concurrency": 1})
        clients[0].call({"cmd": "PUSHB", "queue": q, "jobs": [{"data": i, "groupId": "A"} for i in range(30)]})
        pull = {"cmd": "PULLB", "queue": q, "count": 5, "owner": "w", "group": {"concurrency": 4}}
        for _ in range(3):
            replies = _at_once(clients, pull)
            running = [(job["id"], token) for reply in replies for job, token in zip(reply["jobs"], reply["tokens"])]
            assert len(running) == 1, replies
            for client in clients[::3]:
                assert client.call({"cmd": "GetGroupActiveCount", "queue": q, "groupId": "A"}) == {
                    "ok": True, "data": {"count": 1}}
            assert clients[-1].call({"cmd": "ACK", "id": running[0][0], "token": running[0][1]}) == {"ok": True}
        assert clients[1].call({"cmd": "GetGroupJobsCount", "queue": q, "groupId": "A"})["data"]["count"] == 27
    finally:
        for client in clients:
            client.close()
        for broker in brokers:
            broker.stop()


def test_a_group_rate_window_counts_every_brokers_claims(postgres: PostgresServer) -> None:
    namespace = f"groups-{uuid.uuid4().hex[:12]}"
    brokers = [postgres_broker(postgres, namespace), postgres_broker(postgres, namespace)]
    clients = [RawClient(broker.addr) for broker in brokers for _ in range(4)]
    try:
        q = "g-window"
        clients[0].call({"cmd": "PUSHB", "queue": q, "jobs": [{"data": i, "groupId": "G"} for i in range(200)]})
        limit = {"limit": {"max": 5, "duration": 60000}}
        # Pulls of different sizes at once: each window's count must take in every broker's claims.
        pulls = [{"cmd": "PULLB", "queue": q, "count": 1 + i % 3, "group": limit} for i in range(len(clients))]
        taken = [job["id"] for _ in range(4) for reply in _at_once(clients, pulls) for job in reply["jobs"]]
        # One window of 5 across both brokers, however their claims interleaved.
        assert len(taken) == len(set(taken)) == 5
        ttl = clients[-1].call({"cmd": "GetGroupRateLimitTtl", "queue": q, "groupId": "G", "maxJobs": 5})
        assert 0 < ttl["data"]["ttl"] <= 60000
    finally:
        for client in clients:
            client.close()
        for broker in brokers:
            broker.stop()


def _woken_pull(postgres: PostgresServer, queue: str, before: list[dict[str, Any]],
                wake: dict[str, Any]) -> dict[str, Any]:
    """A long-poll PULL on one broker, ``before`` sent first and ``wake`` while it waits, both through a
    second broker; its reply, asserted to come well before the next poll would have."""
    namespace = f"groups-{uuid.uuid4().hex[:12]}"
    brokers = [postgres_broker(postgres, namespace, BUNQUEUE_POSTGRES_POLL_INTERVAL_MS="30000") for _ in range(2)]
    waiter, controller = RawClient(brokers[0].addr), RawClient(brokers[1].addr)
    try:
        for frame in before:
            assert controller.call(frame)["ok"] is True
        replies: list[dict[str, Any]] = []
        pull = {"cmd": "PULL", "queue": queue, "timeout": 20000}
        poll = threading.Thread(target=lambda: replies.append(waiter.call(pull)))
        poll.start()
        time.sleep(0.5)
        assert not replies
        started = time.monotonic()
        assert controller.call(wake)["ok"] is True
        poll.join(20)
        assert time.monotonic() - started < 5
        assert len(replies) == 1
        return replies[0]
    finally:
        waiter.close()
        controller.close()
        for broker in brokers:
            broker.stop()


def test_resuming_a_group_wakes_a_long_poll_on_another_broker(postgres: PostgresServer) -> None:
    q = "g-wake"
    reply = _woken_pull(postgres, q, [
        {"cmd": "PauseGroup", "queue": q, "groupId": "G"},
        {"cmd": "PUSH", "queue": q, "name": "g1", "data": 1, "groupId": "G"},
    ], {"cmd": "ResumeGroup", "queue": q, "groupId": "G"})
    assert reply["job"]["name"] == "g1"


def test_a_grouped_push_on_another_broker_wakes_a_plain_long_poll(postgres: PostgresServer) -> None:
    # The waiting broker found the queue's lanes empty; the push's notification makes it look again.
    q = "g-push-wake"
    reply = _woken_pull(postgres, q, [], {"cmd": "PUSH", "queue": q, "name": "g1", "data": 1, "groupId": "G"})
    assert reply["job"]["name"] == "g1"


async def test_group_rows_left_with_nothing_to_hold_are_forgotten(postgres_url: str) -> None:
    config = PostgresConfig.from_settings(Settings(
        postgres_url=postgres_url, broker_id="b", postgres_namespace="ns", postgres_pool_size=2))
    conn = await connect(config)
    try:
        await migrate(conn)
    finally:
        await conn.close()
    hot = await HotPath.open(config)
    groups = GroupsFamily()
    groups.pool, groups.namespace = hot.pool, "ns"
    try:
        factory, now = JobFactory(), time.time() * 1000
        await hot.push_many([factory.build({"data": 1, "groupId": g}, "q", now, True) for g in ("A", "A", "F")])

        async def run_one(claim: GroupClaim | None) -> None:
            (job,), (token,) = await hot.claim("q", 1, "w", 60000, claim)
            await hot.ack(job.id, token)

        await run_one(None)  # A's first job: A keeps a ready one
        await run_one(GroupClaim(0, 0, 0, ONE_LANE, "F"))  # F runs dry
        await groups.pause_group("q", "C")
        await groups.set_group_concurrency("q", "E", 2)
        await groups.remove_group_concurrency("q", "E")
        await hot.push(factory.build({"data": 1, "groupId": "D"}, "q", now, False))
        await hot.claim("q", 1, "w", 60000, GroupClaim(0, 5, 60000, ONE_LANE, "D"))  # D opens a window
        rows = "SELECT group_id FROM bunqueue_groups WHERE namespace = 'ns' ORDER BY 1"
        assert [row[0] for row in await hot.pool.fetch(rows)] == ["A", "C", "D", "E", "F"]
        await groups.forget_idle_groups()
        assert [row[0] for row in await hot.pool.fetch(rows)] == ["A", "C", "D"]
    finally:
        await hot.close()


def test_a_paused_queue_gives_none_of_its_grouped_jobs(twins: Twins) -> None:
    twins.same({"cmd": "PUSH", "queue": "g-paused", "data": 1, "groupId": "a"})
    twins.same({"cmd": "Pause", "queue": "g-paused"})
    assert twins.same({"cmd": "PULL", "queue": "g-paused", "owner": "w"})["job"] is None
    twins.same({"cmd": "Resume", "queue": "g-paused"})
    assert twins.same({"cmd": "PULL", "queue": "g-paused", "owner": "w"})["job"] is not None


def _ack_each(twins: Twins, pulled: tuple[dict[str, Any], dict[str, Any]], name: str) -> None:
    """Complete job ``name`` of a PULLB both servers answered, on each with its own token."""
    for client, reply in zip((twins.memory, twins.postgres), pulled):
        job_id, token = next((job["id"], token) for job, token in zip(reply["jobs"], reply["tokens"])
                             if job["name"] == name)
        assert client.call({"cmd": "ACK", "id": job_id, "token": token}) == {"ok": True}


def test_a_queue_concurrency_limit_counts_and_holds_grouped_jobs(twins: Twins) -> None:
    q = "g-queue-conc"
    twins.same({"cmd": "SetConcurrency", "queue": q, "limit": 2})
    twins.same({"cmd": "PUSHB", "queue": q, "jobs": [
        {"name": name, "data": 1, **({"groupId": name[0].upper()} if name[0] != "u" else {})}
        for name in ("u1", "a1", "a2", "b1", "c1")]})
    first = twins.both({"cmd": "PULLB", "queue": q, "count": 10, "owner": "w"})
    assert [_names(reply) for reply in first] == [["u1", "a1"]] * 2
    for pull in ({"cmd": "PULL", "queue": q, "owner": "w", "group": {"affinity": "B"}},
                 {"cmd": "PULLB", "queue": q, "count": 10, "owner": "w", "group": {"concurrency": 5}},
                 {"cmd": "PULLB", "queue": q, "count": 10, "owner": "w"}):
        assert _names(twins.same(pull)) == []
    assert twins.same({"cmd": "GetQueueLimits", "queue": q})["data"]["limits"]["maxed"] is True
    # A grouped job finishing frees a slot of the queue as an ungrouped one does.
    _ack_each(twins, first, "a1")
    assert _names(twins.same({"cmd": "PULLB", "queue": q, "count": 10, "owner": "w"})) == ["b1"]
    _ack_each(twins, first, "u1")
    assert _names(twins.same({"cmd": "PULL", "queue": q, "owner": "w", "group": {"affinity": "A"}})) == ["a2"]
    assert _names(twins.same({"cmd": "PULL", "queue": q, "owner": "w"})) == []
    twins.same({"cmd": "ClearConcurrency", "queue": q})
    assert _names(twins.same({"cmd": "PULLB", "queue": q, "count": 10, "owner": "w"})) == ["c1"]


def test_a_queue_rate_limit_spends_its_tokens_on_grouped_jobs(twins: Twins) -> None:
    q = "g-queue-rate"
    twins.same({"cmd": "RateLimit", "queue": q, "limit": 3, "duration": 60000})
    twins.same({"cmd": "PUSHB", "queue": q, "jobs": [
        {"name": name, "data": 1, **({"groupId": name[0].upper()} if name[0] != "u" else {})}
        for name in ("u1", "a1", "a2", "b1", "b2")]})
    assert _names(twins.same({"cmd": "PULLB", "queue": q, "count": 2, "owner": "w"})) == ["u1", "a1"]
    assert _names(twins.same({"cmd": "PULLB", "queue": q, "count": 10, "owner": "w"})) == ["b1"]
    assert _names(twins.same({"cmd": "PULL", "queue": q, "owner": "w", "group": {"affinity": "A"}})) == []
    assert _names(twins.same({"cmd": "PULLB", "queue": q, "count": 10, "owner": "w"})) == []
    both = twins.both({"cmd": "GetQueueLimits", "queue": q})
    assert all(0 < reply["data"]["limits"]["rateLimitTtl"] <= 60000 for reply in both), both
    twins.same({"cmd": "RateLimitClear", "queue": q})
    assert _names(twins.same({"cmd": "PULLB", "queue": q, "count": 10, "owner": "w"})) == ["a2", "b2"]


def test_queue_limits_bind_grouped_claims_of_two_brokers_pulling_at_once(postgres: PostgresServer) -> None:
    namespace = f"groups-{uuid.uuid4().hex[:12]}"
    brokers = [postgres_broker(postgres, namespace), postgres_broker(postgres, namespace)]
    clients = [RawClient(broker.addr) for broker in brokers for _ in range(3)]
    try:
        conc, rate = "g-two-conc", "g-two-rate"
        clients[0].call({"cmd": "SetConcurrency", "queue": conc, "limit": 2})
        clients[3].call({"cmd": "RateLimit", "queue": rate, "limit": 4, "duration": 60000})
        for q in (conc, rate):
            clients[0].call({"cmd": "PUSHB", "queue": q, "jobs": [
                {"data": i, "groupId": f"G{i % 8}"} for i in range(40)]})
        pull = {"cmd": "PULLB", "queue": conc, "count": 3, "owner": "w", "group": {"concurrency": 5}}
        for _ in range(3):
            replies = _at_once(clients, pull)
            running = [(job["id"], token) for reply in replies for job, token in zip(reply["jobs"], reply["tokens"])]
            assert len(running) == 2, replies
            for job_id, token in running:
                assert clients[-1].call({"cmd": "ACK", "id": job_id, "token": token}) == {"ok": True}
        # One bucket of 4 tokens for both brokers' grouped claims, however they interleave.
        pulls = [{"cmd": "PULLB", "queue": rate, "count": 1 + i % 2, "owner": "w"} for i in range(len(clients))]
        taken = [job["id"] for _ in range(3) for reply in _at_once(clients, pulls) for job in reply["jobs"]]
        assert len(taken) == len(set(taken)) == 4
    finally:
        for client in clients:
            client.close()
        for broker in brokers:
            broker.stop()
