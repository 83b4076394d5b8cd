"""Job group controls (SetGroupConcurrency, SetGroupRateLimit, PauseGroup, RateLimitGroup...) and the
wake-ups of long-pollers that a group holds back.

The lanes, counters and limit checks live in the compiled ``bunqueue._core.groups.GroupScheduler`` of each
queue; this module changes its stored controls, tells the store, and wakes the queue's waiting pulls
whenever a change may let one of them claim. Runtime windows (a rate window, a RateLimitGroup deadline)
are memory only. A pull that finds every lane held back by a window or a deadline leaves its queue in
one heap keyed by queue name, due when the first of them ends; one loop timer serves the heap.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bunqueue._core.groups import GroupScheduler
from bunqueue._core.timers import TimerHeap
from bunqueue.broker.clock import now_ms
from bunqueue.broker.deadlines import GROUP_LIMITS

if TYPE_CHECKING:
    from bunqueue.broker.broker import Broker
    from bunqueue.broker.queue import QueueState

NO_GROUPS = GroupScheduler()


class GroupWakeups:
    """Queues whose long-pollers wait for a group window or deadline to end, by that time."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.due = TimerHeap()

    def wait(self, queue: str, when: float) -> None:
        armed = self.due.when(queue)
        if armed is None or when < armed:
            self.due.push(queue, when)
            self.broker.wake_at(GROUP_LIMITS, when)

    def expire(self, now: float) -> float | None:
        broker = self.broker
        for name in self.due.pop_due(now):
            q = broker.queues.get(name)
            if q is not None and q.waiters:
                broker.wake(q, len(q.waiters))
        return self.due.peek_time()


def lanes_of(broker: Broker, queue: str) -> GroupScheduler:
    """The queue's groups for reading; an empty scheduler for a queue never seen (nothing is created)."""
    q = broker.queues.get(queue)
    return NO_GROUPS if q is None else q.groups


def _changed(broker: Broker, q: QueueState, group_id: str, wake: bool) -> None:
    broker.store.group_changed(q.name, group_id, controls_record(q.groups.controls(group_id)))
    if wake and q.waiters and q.groups.has_ready(group_id):
        broker.wake(q, len(q.waiters))


def set_concurrency(broker: Broker, queue: str, group_id: str, concurrency: int) -> None:
    q = broker.queue(queue)
    q.groups.set_concurrency(group_id, concurrency)
    _changed(broker, q, group_id, True)


def remove_concurrency(broker: Broker, queue: str, group_id: str) -> int:
    q = broker.queues.get(queue)
    if q is None or not q.groups.remove_concurrency(group_id, now_ms()):
        return 0
    _changed(broker, q, group_id, True)
    return 1


def set_rate_limit(broker: Broker, queue: str, group_id: str, max_jobs: int, duration: int) -> None:
    q = broker.queue(queue)
    q.groups.set_rate_limit(group_id, max_jobs, duration)
    _changed(broker, q, group_id, True)


def remove_rate_limit(broker: Broker, queue: str, group_id: str) -> int:
    q = broker.queues.get(queue)
    if q is None:
        return 0
    had = q.groups.rate_limit(group_id) is not None
    q.groups.remove_rate_limit(group_id, now_ms())
    if had:
        _changed(broker, q, group_id, True)
    elif q.waiters and q.groups.has_ready(group_id):
        # No stored override, but the open window is gone all the same.
        broker.wake(q, len(q.waiters))
    return 1 if had else 0


def rate_limit(broker: Broker, queue: str, group_id: str) -> dict[str, int] | None:
    limit = lanes_of(broker, queue).rate_limit(group_id)
    return None if limit is None else {"max": limit[0], "duration": limit[1]}


def rate_limit_ttl(broker: Broker, queue: str, group_id: str, max_jobs: int) -> float:
    return lanes_of(broker, queue).rate_limit_ttl(group_id, now_ms(), max_jobs)


def pause(broker: Broker, queue: str, group_id: str) -> bool:
    q = broker.queue(queue)
    if not q.groups.pause(group_id):
        return False
    _changed(broker, q, group_id, False)
    return True


def resume(broker: Broker, queue: str, group_id: str) -> bool:
    q = broker.queues.get(queue)
    if q is None or not q.groups.resume(group_id, now_ms()):
        return False
    _changed(broker, q, group_id, True)
    return True


def limit_for(broker: Broker, queue: str, group_id: str, duration: int) -> None:
    """RateLimitGroup: no new claim from the group for ``duration`` ms."""
    broker.queue(queue).groups.limit_until(group_id, now_ms() + duration)


def restore(broker: Broker, queue: str, group_id: str, controls: dict[str, Any]) -> None:
    """Controls read back from storage."""
    broker.queue(queue).groups.restore_controls(
        group_id,
        int(controls.get("concurrency") or 0),
        int(controls.get("rateMax") or 0),
        int(controls.get("rateDuration") or 0),
        bool(controls.get("paused")),
    )


def controls_record(controls: tuple[int, int, int, bool] | None) -> dict[str, Any] | None:
    """The stored form of ``GroupScheduler.controls``."""
    if controls is None:
        return None
    concurrency, rate_max, rate_duration, paused = controls
    return {"concurrency": concurrency, "rateMax": rate_max, "rateDuration": rate_duration, "paused": paused}
