"""Stall detection driven by a fake clock: exact check times, the two phases, the actions, and that
nothing is scheduled per heartbeat."""
from __future__ import annotations

import pytest

from bunqueue._testbase.clock import T0, FakeClock
from bunqueue.broker import states
from bunqueue.broker.components.stallconfig import merged_config
from bunqueue.broker.facade import Broker
from bunqueue.broker.session import Session
from bunqueue.broker.timers.deadlines import STALLS
from bunqueue.broker.timers.stalls import STALL_CONFIRM_MS, config_of


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def broker(clock: FakeClock) -> Broker:
    b = Broker(clock=clock)
    b.armed = []  # type: ignore[attr-defined]
    b.wake_at = lambda kind, when: b.armed.append((kind, when))  # type: ignore[attr-defined]
    return b


def configure(b: Broker, queue: str, **config: object) -> None:
    q = b.queue(queue)
    q.stall_config = merged_config(config_of(q), config)
    b.stalls.config_changed(q, T0)


def push_and_pull(b: Broker, queue: str, n: int = 1, **opts: object) -> list[str]:
    ids = b.push_many(queue, [{"name": f"j{i}", "data": i, **opts} for i in range(n)])
    jobs, _ = b.pull(b.queue(queue), n, Session(), None, 30000.0, False)
    assert [j.id for j in jobs] == ids
    return ids


def settle(b: Broker, clock: FakeClock, at: float) -> float | None:
    clock.now = at
    return b.deadline_handlers()[STALLS](at)


def test_default_first_check_is_at_the_interval(broker: Broker, clock: FakeClock) -> None:
    push_and_pull(broker, "q")
    assert broker.armed == [(STALLS, T0 + 30000)]  # type: ignore[attr-defined]
    assert settle(broker, clock, T0 + 29999) == T0 + 30000


def test_two_phases_then_retry(broker: Broker, clock: FakeClock) -> None:
    configure(broker, "q", stallInterval=1000, gracePeriod=0)
    (job_id,) = push_and_pull(broker, "q", backoff=0)
    # At the interval the job is not yet silent for *more* than it: looked at again 1 ms later.
    assert settle(broker, clock, T0 + 1000) == T0 + 1001
    assert settle(broker, clock, T0 + 1001) == T0 + 1001 + STALL_CONFIRM_MS
    assert job_id in broker.stalls.candidates
    assert broker.jobs[job_id].state == states.ACTIVE
    assert settle(broker, clock, T0 + 1001 + STALL_CONFIRM_MS) is None
    job = broker.jobs[job_id]
    assert (job.state, job.attempts, job.stall_count) == (states.READY, 1, 1)
    assert broker.queues["q"].n_active == 0 and broker.queues["q"].n_waiting == 1


def test_a_heartbeat_during_candidacy_saves_the_job(broker: Broker, clock: FakeClock) -> None:
    configure(broker, "q", stallInterval=1000, gracePeriod=0)
    (job_id,) = push_and_pull(broker, "q")
    settle(broker, clock, T0 + 1001)
    assert job_id in broker.stalls.candidates
    broker.jobs[job_id].last_heartbeat = T0 + 5500
    # Still alive at confirmation: no longer a candidate, next looked at when silent again.
    assert settle(broker, clock, T0 + 1001 + STALL_CONFIRM_MS) == T0 + 6500
    assert job_id not in broker.stalls.candidates
    assert broker.jobs[job_id].state == states.ACTIVE


def test_heartbeats_cost_no_heap_work(broker: Broker, clock: FakeClock) -> None:
    configure(broker, "q", stallInterval=1000, gracePeriod=0)
    (job_id,) = push_and_pull(broker, "q")
    job = broker.jobs[job_id]
    for t in range(100, 1000, 100):
        job.last_heartbeat = T0 + t
    assert len(broker.stalls.exact) == 0
    # The first check finds it alive and schedules one re-check at its real deadline.
    assert settle(broker, clock, T0 + 1000) == T0 + 1900
    assert len(broker.stalls.exact) == 1


def test_max_stalls_sends_to_the_dlq(broker: Broker, clock: FakeClock) -> None:
    configure(broker, "q", stallInterval=0, gracePeriod=0, maxStalls=1)
    (job_id,) = push_and_pull(broker, "q")
    settle(broker, clock, T0 + 1)
    settle(broker, clock, T0 + 1 + STALL_CONFIRM_MS)
    job = broker.jobs[job_id]
    assert (job.state, job.stall_count, job.attempts) == (states.FAILED, 1, 1)
    entry = broker.dlq.entries("q")[0]
    assert (entry["reason"], entry["error"]) == ("stalled", "Job stalled 1 times")


def test_last_attempt_stall_is_max_attempts_exceeded(broker: Broker, clock: FakeClock) -> None:
    configure(broker, "q", stallInterval=0, gracePeriod=0)
    push_and_pull(broker, "q", maxAttempts=1)
    settle(broker, clock, T0 + 1)
    settle(broker, clock, T0 + 1 + STALL_CONFIRM_MS)
    entry = broker.dlq.entries("q")[0]
    assert (entry["reason"], entry["error"]) == ("max_attempts_exceeded", "Job stalled at max attempts (1)")


def test_grace_period_delays_the_first_check(broker: Broker, clock: FakeClock) -> None:
    configure(broker, "q", stallInterval=100, gracePeriod=2000)
    push_and_pull(broker, "q")
    assert broker.stalls.queue_due.peek_time() == T0 + 2000


def test_own_stall_timeout_is_checked_exactly(broker: Broker, clock: FakeClock) -> None:
    (job_id,) = push_and_pull(broker, "q", stallTimeout=7000)
    assert broker.stalls.exact.when(job_id) == T0 + 7000
    assert not broker.queues["q"].stall_watch


def test_only_the_front_of_a_queue_is_looked_at(broker: Broker, clock: FakeClock) -> None:
    configure(broker, "q", stallInterval=1000, gracePeriod=0)
    first = push_and_pull(broker, "q", 3)
    clock.now = T0 + 500
    later = push_and_pull(broker, "q", 2)
    settle(broker, clock, T0 + 1001)
    assert set(broker.stalls.candidates) == set(first)
    assert list(broker.queues["q"].stall_watch) == later
    assert broker.stalls.queue_due.when("q") == T0 + 1500


def test_leaving_active_forgets_the_job(broker: Broker, clock: FakeClock) -> None:
    configure(broker, "q", stallInterval=1000, gracePeriod=0)
    (job_id,) = push_and_pull(broker, "q")
    settle(broker, clock, T0 + 1001)
    broker.ack(broker.jobs[job_id], None, False, False)
    assert len(broker.stalls.exact) == 0 and not broker.stalls.candidates
    assert not broker.queues["q"].stall_watch


def test_disable_and_enable(broker: Broker, clock: FakeClock) -> None:
    configure(broker, "q", enabled=False, stallInterval=0, gracePeriod=0)
    (job_id,) = push_and_pull(broker, "q")
    assert broker.queues["q"].stall_watch is None
    configure(broker, "q", enabled=True)
    assert list(broker.queues["q"].stall_watch) == [job_id]
    settle(broker, clock, T0 + 1)
    assert job_id in broker.stalls.candidates


def test_a_shorter_interval_reschedules_running_jobs(broker: Broker, clock: FakeClock) -> None:
    (job_id,) = push_and_pull(broker, "q")
    assert broker.stalls.queue_due.when("q") == T0 + 30000
    configure(broker, "q", stallInterval=1000, gracePeriod=0)
    assert broker.stalls.queue_due.when("q") == T0 + 1000
    settle(broker, clock, T0 + 1001)
    assert job_id in broker.stalls.candidates
