"""Job group controls (SetGroupConcurrency, SetGroupRateLimit, PauseGroup, RateLimitGroup...) and the
wake-ups of long-pollers that a group holds back.

The lanes, counters and limit checks live in the compiled ``bunqueue._core.groups.GroupScheduler`` of each
queue; this component changes its stored controls, tells the store, and wakes the queue's waiting pulls
whenever a change may let one of them claim. Runtime windows (a rate window, a RateLimitGroup deadline)
are memory only. A pull that finds every lane held back by a window or a deadline leaves its queue in
one heap keyed by queue name, due when the first of them ends; one loop timer serves the heap.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bunqueue._core.groups import GroupScheduler
from bunqueue._core.timers import TimerHeap
from bunqueue.broker.components.queues import Queues, QueueState
from bunqueue.broker.timers.deadlines import GROUP_LIMITS, Alarms
from bunqueue.storage import Store

# What a queue never seen answers from (nothing is created to answer a read).
NO_GROUPS = GroupScheduler()


class GroupControls:
    def __init__(self, queues: Queues, store: Store, alarms: Alarms, clock: Callable[[], float]) -> None:
        self.queues = queues
        self.store = store
        self.alarms = alarms
        self.clock = clock
        # Queues whose long-pollers wait for a group window or deadline to end, by that time.
        self.due = TimerHeap()

    # -- long-poll wake-ups ------------------------------------------------------------------------

    def wait(self, queue: str, when: float) -> None:
        armed = self.due.when(queue)
        if armed is None or when < armed:
            self.due.push(queue, when)
            self.alarms.arm(GROUP_LIMITS, when)

    def expire(self, now: float) -> float | None:
        queues = self.queues
        for name in self.due.pop_due(now):
            q = queues.get(name)
            if q is not None and q.waiters:
                q.wake(len(q.waiters))
        return self.due.peek_time()

    # -- reads -------------------------------------------------------------------------------------

    def lanes(self, queue: str) -> GroupScheduler:
        q = self.queues.get(queue)
        return NO_GROUPS if q is None else q.groups

    def rate_limit(self, queue: str, group_id: str) -> dict[str, int] | None:
        limit = self.lanes(queue).rate_limit(group_id)
        return None if limit is None else {"max": limit[0], "duration": limit[1]}

    def rate_limit_ttl(self, queue: str, group_id: str, max_jobs: int) -> float:
        return self.lanes(queue).rate_limit_ttl(group_id, self.clock(), max_jobs)

    # -- changes -----------------------------------------------------------------------------------

    def _changed(self, q: QueueState, group_id: str, wake: bool) -> None:
        self.store.group_changed(q.name, group_id, controls_record(q.groups.controls(group_id)))
        if wake and q.waiters and q.groups.has_ready(group_id):
            q.wake(len(q.waiters))

    def set_concurrency(self, queue: str, group_id: str, concurrency: int) -> None:
        q = self.queues.of(queue)
        q.groups.set_concurrency(group_id, concurrency)
        self._changed(q, group_id, True)

    def remove_concurrency(self, queue: str, group_id: str) -> int:
        q = self.queues.get(queue)
        if q is None or not q.groups.remove_concurrency(group_id, self.clock()):
            return 0
        self._changed(q, group_id, True)
        return 1

    def set_rate_limit(self, queue: str, group_id: str, max_jobs: int, duration: int) -> None:
        q = self.queues.of(queue)
        q.groups.set_rate_limit(group_id, max_jobs, duration)
        self._changed(q, group_id, True)

    def remove_rate_limit(self, queue: str, group_id: str) -> int:
        q = self.queues.get(queue)
        if q is None:
            return 0
        had = q.groups.rate_limit(group_id) is not None
        q.groups.remove_rate_limit(group_id, self.clock())
        if had:
            self._changed(q, group_id, True)
        elif q.waiters and q.groups.has_ready(group_id):
            # No stored override, but the open window is gone all the same.
            q.wake(len(q.waiters))
        return 1 if had else 0

    def pause(self, queue: str, group_id: str) -> bool:
        q = self.queues.of(queue)
        if not q.groups.pause(group_id):
            return False
        self._changed(q, group_id, False)
        return True

    def resume(self, queue: str, group_id: str) -> bool:
        q = self.queues.get(queue)
        if q is None or not q.groups.resume(group_id, self.clock()):
            return False
        self._changed(q, group_id, True)
        return True

    def limit_for(self, queue: str, group_id: str, duration: int) -> None:
        """RateLimitGroup: no new claim from the group for ``duration`` ms."""
        self.queues.of(queue).groups.limit_until(group_id, self.clock() + duration)

    def restore(self, queue: str, group_id: str, controls: dict[str, Any]) -> None:
        """Controls read back from storage."""
        self.queues.of(queue).groups.restore_controls(
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
