"""Every way an attempt ends, through the handler table on a fake clock: the job's state and counters,
what the store was told and which events went out."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bunqueue import errors
from bunqueue._core.jobfactory import JobFactory
from bunqueue._testbase.clock import T0
from bunqueue._testbase.inprocess import QUEUE, World
from bunqueue.broker import states
from bunqueue.broker.recovery import restore
from bunqueue.broker.timers.deadlines import LEASES, STALLS, TIMEOUTS
from bunqueue.broker.timers.stalls import STALL_CONFIRM_MS
from bunqueue.storage import MemoryStore, notice_hook
from bunqueue.storage.schema import Snapshot

# Exponential backoff after the first failure: base * 2 with +-50 % jitter.
FIRST_RETRY = (1000.0, 3000.0)


def pulled(world: World, **push: object) -> tuple[str, str | None]:
    """Push one job and pull it (with a lease when ``owner`` is given); the log so far is dropped."""
    owner = push.pop("owner", None)
    lock_ttl = push.pop("lockTtl", None)
    job_id = world.push(**push)
    pull: dict[str, object] = {} if owner is None else {"owner": owner}
    if lock_ttl is not None:
        pull["lockTtl"] = lock_ttl
    job, token = world.pull(**pull)
    assert job.id == job_id and job.state == states.ACTIVE
    world.store.take()
    world.take_events()
    return job_id, token


def delayed_by_backoff(world: World, job_id: str, now: float) -> None:
    job = world.job(job_id)
    assert job.state == states.DELAYED
    assert now + FIRST_RETRY[0] <= job.run_at <= now + FIRST_RETRY[1]
    assert math.isnan(job.started_at)


def test_fail_is_a_lost_attempt_retried_with_backoff(world: World) -> None:
    job_id, token = pulled(world, maxAttempts=3, backoff=1000, owner="w")
    world.clock.advance(200)
    assert world.send({"cmd": "FAIL", "id": job_id, "token": token, "error": "boom"}) == {"ok": True}
    job = world.job(job_id)
    assert (job.attempts, job.stall_count) == (1, 0)
    delayed_by_backoff(world, job_id, T0 + 200)
    assert job_id not in world.broker.leases
    assert world.store.take() == [("job_changed", job_id)]
    assert world.take_events() == [("failed", False), ("retried", "failed")]
    [failure] = world.broker.records.failures[job_id]
    assert (failure["attempt"], failure["reason"], failure["error"], failure["duration"]) == (
        1, "explicit_fail", "boom", 200,
    )
    assert [entry["state"] for entry in job.timeline[-2:]] == [states.FAILED_NAME, states.WAITING]


def test_lease_expiry_requeues_at_once_and_counts_a_stall(world: World) -> None:
    job_id, _ = pulled(world, maxAttempts=3, backoff=1000, owner="w", lockTtl=1000)
    assert world.settle(LEASES, T0 + 1001) is None
    job = world.job(job_id)
    assert (job.state, job.attempts, job.stall_count, job.run_at) == (states.READY, 1, 1, T0)
    assert job_id not in world.broker.leases and job.last_heartbeat == T0 + 1001
    assert world.store.take() == [("job_changed", job_id)]
    assert world.take_events() == [("stalled", {"stallCount": 1, "action": "retry"})]
    [failure] = world.broker.records.failures[job_id]
    assert (failure["reason"], failure["error"]) == ("stalled", errors.LOCK_EXPIRED)


def test_lease_expiry_on_the_last_attempt_dead_letters(world: World) -> None:
    job_id, _ = pulled(world, maxAttempts=1, owner="w", lockTtl=1000)
    world.settle(LEASES, T0 + 1001)
    job = world.job(job_id)
    assert (job.state, job.attempts, job.stall_count) == (states.FAILED, 1, 1)
    entry = world.broker.dlq.get(job_id)
    assert entry is not None
    assert (entry["reason"], entry["error"]) == ("max_attempts_exceeded", errors.lock_expired_at_max_attempts(1))
    assert world.store.take() == [("job_changed", job_id), ("dlq_changed", job_id)]
    assert world.take_events() == [("stalled", {"stallCount": 1, "action": "move_to_dlq"})]


def test_a_confirmed_stall_is_retried_with_backoff(world: World) -> None:
    world.send({"cmd": "SetStallConfig", "queue": QUEUE, "config": {"stallInterval": 1000, "gracePeriod": 0}})
    job_id, _ = pulled(world, maxAttempts=3, backoff=1000)
    # Silent for strictly longer than the interval, then still silent STALL_CONFIRM_MS later.
    assert world.settle(STALLS, T0 + 1000) == T0 + 1001
    assert world.settle(STALLS, T0 + 1001) == T0 + 1001 + STALL_CONFIRM_MS
    assert world.job(job_id).state == states.ACTIVE
    now = T0 + 1001 + STALL_CONFIRM_MS
    assert world.settle(STALLS, now) is None
    job = world.job(job_id)
    assert (job.attempts, job.stall_count) == (1, 1)
    delayed_by_backoff(world, job_id, now)
    assert world.store.take() == [("job_changed", job_id)]
    assert world.take_events() == [("stalled", {"stallCount": 1, "action": "retry"})]
    [failure] = world.broker.records.failures[job_id]
    assert (failure["reason"], failure["error"]) == ("stalled", errors.STALLED)


def test_a_timeout_fails_the_attempt_and_retires_it(world: World) -> None:
    job_id, token = pulled(world, maxAttempts=3, backoff=1000, timeout=500, owner="w")
    assert world.settle(TIMEOUTS, T0 + 500) is None
    job = world.job(job_id)
    assert (job.attempts, job.stall_count) == (1, 0)
    delayed_by_backoff(world, job_id, T0 + 500)
    assert world.store.take() == [("job_changed", job_id)]
    assert world.take_events() == [("failed", False), ("retried", "failed")]
    [failure] = world.broker.records.failures[job_id]
    assert (failure["reason"], failure["error"]) == ("timeout", errors.JOB_TIMEOUT_EXCEEDED)
    # The worker's late ACK for the timed-out attempt changes nothing.
    late = world.send({"cmd": "ACK", "id": job_id, "token": token})
    assert late == {"ok": True, "data": {"applied": False, "reason": "already-finalized"}}
    assert world.job(job_id).state == states.DELAYED and world.store.take() == []


def interrupted(world: World, max_attempts: int, pulled_after_record: bool = False) -> str:
    """A job that was active when the server stopped, read back by ``restore``.

    Its record holds the pull, or (``pulled_after_record``) predates it: then only the pull's state and
    start reached the file.
    """
    job = JobFactory().build({"name": "n", "data": 1, "maxAttempts": max_attempts, "backoff": 1000}, QUEUE,
                             T0 - 5000, False)
    job.timeline = [{"state": states.WAITING, "timestamp": T0 - 5000}]
    job.state = states.ACTIVE
    pulls = {}
    if pulled_after_record:
        pulls[job.id] = T0 - 100
    else:
        job.started_at = T0 - 100
        job.note({"state": states.ACTIVE_NAME, "timestamp": T0 - 100})
    counts = restore(world.broker, Snapshot(jobs=[job], pulls=pulls))
    assert counts["active"] == 1
    return job.id


@pytest.mark.parametrize("pulled_after_record", [False, True])
def test_recovery_of_an_active_job_charges_the_interrupted_attempt(
    world: World, pulled_after_record: bool
) -> None:
    world.store.take()
    job_id = interrupted(world, 3, pulled_after_record)
    job = world.job(job_id)
    assert (job.attempts, job.stall_count) == (1, 1)
    assert job.state == states.DELAYED
    assert T0 + FIRST_RETRY[0] <= job.run_at <= T0 + FIRST_RETRY[1]
    # The interrupted attempt keeps its start and timeline entry until the next pull, as in the reference.
    assert job.started_at == T0 - 100
    assert job.timeline == [
        {"state": states.WAITING, "timestamp": T0 - 5000},
        {"state": states.ACTIVE_NAME, "timestamp": T0 - 100},
    ]
    assert world.store.take() == [("job_changed", job_id)]
    assert world.broker.queue(QUEUE).n_active == 0 and world.events == []


def test_recovery_on_the_last_attempt_dead_letters(world: World) -> None:
    world.store.take()
    job_id = interrupted(world, 1)
    assert world.job(job_id).state == states.FAILED
    entry = world.broker.dlq.get(job_id)
    assert entry is not None
    assert (entry["reason"], entry["error"]) == ("max_attempts_exceeded", "Interrupted by a restart")
    [attempt] = entry["attempts"]
    assert (attempt["attempt"], attempt["startedAt"], attempt["duration"]) == (1, T0 - 5000, 0)
    assert world.store.take() == [("job_changed", job_id), ("dlq_changed", job_id)]


def test_ack_completes_and_frees_the_unique_key(world: World) -> None:
    job_id, token = pulled(world, uniqueKey="k", owner="w")
    world.clock.advance(50)
    assert world.send({"cmd": "ACK", "id": job_id, "token": token, "result": {"r": 1}}) == {"ok": True}
    job = world.job(job_id)
    assert (job.state, job.attempts, job.completed_at) == (states.COMPLETED, 0, T0 + 50)
    assert world.broker.records.results[job_id] == {"r": 1}
    assert world.store.take() == [("job_changed", job_id), ("result_stored", job_id)]
    assert world.take_events() == [("completed", None)]
    assert world.broker.queue(QUEUE).n_active == 0 and job_id not in world.broker.leases
    assert world.push(uniqueKey="k") != job_id


def test_fail_on_the_last_attempt_goes_to_the_dlq(world: World) -> None:
    job_id, token = pulled(world, maxAttempts=1, owner="w", uniqueKey="k")
    assert world.send({"cmd": "FAIL", "id": job_id, "token": token, "error": "e"}) == {"ok": True}
    job = world.job(job_id)
    assert (job.state, job.attempts) == (states.FAILED, 1)
    entry = world.broker.dlq.get(job_id)
    assert entry is not None
    assert (entry["reason"], entry["error"], len(entry["attempts"])) == ("max_attempts_exceeded", "e", 1)
    assert job_id not in world.broker.records.failures
    assert world.store.take() == [("job_changed", job_id), ("dlq_changed", job_id)]
    assert world.take_events() == [("failed", True)]
    assert world.broker.keys.owners == {}


def test_cancel_removes_the_job(world: World) -> None:
    job_id = world.push(uniqueKey="k")
    world.store.take()
    world.take_events()
    assert world.send({"cmd": "Cancel", "id": job_id}) == {"ok": True}
    assert job_id not in world.broker.jobs
    assert world.broker.queue(QUEUE).n_queued == 0 and world.broker.keys.owners == {}
    assert world.store.take() == [("job_removed", job_id)]
    assert world.take_events() == [("removed", "waiting")]


def test_a_closed_connection_requeues_its_jobs_without_charge(world: World) -> None:
    job_id, _ = pulled(world, maxAttempts=3)
    assert world.broker.release_session(world.session) == 1
    job = world.job(job_id)
    assert (job.state, job.attempts, job.stall_count) == (states.READY, 0, 0)
    assert math.isnan(job.started_at)
    assert world.store.take() == [("job_changed", job_id)]


def test_a_new_queue_is_announced_to_system_listeners_only_while_one_listens(world: World) -> None:
    world.push(queue="before")
    heard: list[tuple[str, dict[str, object]]] = []
    world.broker.events.notices.append(lambda name, data: heard.append((name, data)))
    world.push(queue="fresh")
    world.push(queue="fresh")
    world.push(queue="before")
    world.send({"cmd": "Pause", "queue": "paused-first"})
    assert heard == [("queue:created", {"queue": "fresh"}), ("queue:created", {"queue": "paused-first"}),
                     ("queue:paused", {"queue": "paused-first"})]


def test_a_batch_of_plain_jobs_reaches_a_store_that_keeps_them_and_spares_one_that_keeps_nothing() -> None:
    world = World()
    world.store.take()
    reply = world.send({"cmd": "PUSHB", "queue": QUEUE, "jobs": [{"name": "a", "data": {}}, {"name": "b"},
                                                                   {"name": "c", "customId": "custom-c"}]})
    assert reply["ok"], reply
    # The plain jobs go through the batch loop, the one with a custom id through the full path: all told.
    assert world.store.take() == [("job_added", job_id) for job_id in reply["ids"]]
    assert reply["ids"][2] == "custom-c"
    assert notice_hook(world.store, "job_added") == world.store.job_added
    assert notice_hook(MemoryStore(), "job_added") is None and notice_hook(MemoryStore(), "job_changed") is None


# Jobs of every kind admission tells apart: plain, prioritized, LIFO, delayed, grouped, with a custom id
# (repeated: the second push answers the first job) or a unique key.
_admitted_kinds = st.lists(st.fixed_dictionaries({}, optional={
    "priority": st.integers(1, 3), "lifo": st.just(True), "delay": st.sampled_from([0, 500]),
    "groupId": st.sampled_from(["g1", "g2"]), "customId": st.sampled_from(["c1", "c2"]),
    "uniqueKey": st.sampled_from(["k1", "k2"]),
}), min_size=1, max_size=12)


@settings(max_examples=100, deadline=None)
@given(_admitted_kinds)
def test_model_a_push_at_a_time_admits_as_one_batch_does(kinds: list[dict[str, object]]) -> None:
    # PUSH (compiled one-job admission) against PUSHB (its plain-job loop and the full path for the rest).
    one, batch = World(), World()
    ids_one = []
    for i, kind in enumerate(kinds):
        opts = {("jobId" if name == "customId" else name): value for name, value in kind.items()}
        ids_one.append(one.send({"cmd": "PUSH", "queue": QUEUE, "name": f"j{i}", "data": {}, **opts})["id"])
    jobs = [{"name": f"j{i}", "data": {}, **kind} for i, kind in enumerate(kinds)]
    reply = batch.send({"cmd": "PUSHB", "queue": QUEUE, "jobs": jobs})
    ids_batch = reply["ids"]

    def shape(world: World, ids: list[str]) -> object:
        q = world.broker.queues.of(QUEUE)
        positions = {job_id: i for i, job_id in reversed(list(enumerate(ids)))}
        jobs = [world.job(job_id) for job_id in ids]
        states_of = [(positions[job.id], job.state, [entry["state"] for entry in job.timeline]) for job in jobs]
        order = []
        while True:
            pulled = world.send({"cmd": "PULL", "queue": QUEUE})["job"]
            if pulled is None:
                break
            order.append(positions[pulled.id])
        return (q.n_waiting, q.n_prioritized, len(q.delayed), [positions[job_id] for job_id in ids], states_of,
                order)

    assert shape(one, ids_one) == shape(batch, ids_batch)
