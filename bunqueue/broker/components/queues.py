"""One queue's scheduling state: the ready heap, group lanes, the delayed heap and O(1) counters."""
from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from bunqueue._core.groups import ANY_LANE, NO_LANE, GroupClaim, GroupScheduler
from bunqueue._core.jobs import Job
from bunqueue._core.readyqueue import ReadyQueue
from bunqueue._core.timers import TimerHeap
from bunqueue.broker.components.queuelimits import QueueLimits
from bunqueue.broker.components.stallconfig import DEFAULT_STALL_CONFIG, merged_config


class QueueState:
    """Jobs of one queue: heaps for those waiting to run, id sets for the others.

    Ungrouped ready jobs sit in one heap in the reference order. Grouped jobs wait in the compiled group
    lanes (``bunqueue._core.groups``), served round-robin after any ready ungrouped job. Delayed jobs sit
    in a time heap until their run time passes; they are moved to the ready side lazily, by whoever looks
    next, so no timer runs per delayed job.
    """

    __slots__ = (
        "active",
        "completed",
        "delayed",
        "dlq_config",
        "groups",
        "limits",
        "n_active",
        "n_completed",
        "n_prioritized",
        "n_waiting",
        "n_waiting_children",
        "name",
        "paused",
        "ready",
        "stall_config",
        "stall_watch",
        "waiters",
        "waiting_children",
    )

    def __init__(self, name: str) -> None:
        self.name = name
        self.ready = ReadyQueue()
        # Grouped jobs (ready, and counts of delayed and active ones) and the group controls.
        self.groups = GroupScheduler()
        self.delayed = TimerHeap()
        self.paused = False
        self.n_waiting = 0
        self.n_prioritized = 0
        self.n_active = 0
        self.n_completed = 0
        self.n_waiting_children = 0
        self.waiters: deque = deque()
        # Ids of this queue's active, completed (in completion order) and waiting-children jobs, so that
        # listing, cleaning and obliterating a queue cost O(queue), never a scan of the whole broker.
        self.active: dict[str, None] = {}
        self.completed: dict[str, None] = {}
        self.waiting_children: dict[str, None] = {}
        # This queue's DLQ policy (SetDlqConfig), or None for the defaults.
        self.dlq_config: dict[str, object] | None = None
        # Rate and concurrency limits (RateLimit, SetConcurrency), or None: all an unlimited pull checks.
        self.limits: QueueLimits | None = None
        # SetStallConfig settings, or None for the defaults.
        self.stall_config: dict[str, Any] | None = None
        # Active jobs awaiting their first stall check, in pull order (see timers.stalls); None while
        # stall detection is disabled for this queue.
        self.stall_watch: dict[str, None] | None = {}

    def wake(self, n: int) -> None:
        """Let up to ``n`` long-polling pulls of this queue look again."""
        waiters = self.waiters
        while n > 0 and waiters:
            fut = waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                n -= 1

    # -- ready side --------------------------------------------------------------------------------

    def add_ready(self, job: Job) -> None:
        group = job.group_id
        if group is None:
            self.ready.push(job.id, job.priority, job.lifo, job.run_at, job.seq)
        else:
            self.groups.add(job.id, group, job.priority, job.seq)
        # _count_in, inlined: this runs once for every pushed job.
        if job.priority > 0:
            self.n_prioritized += 1
        else:
            self.n_waiting += 1

    def _count_in(self, job: Job) -> None:
        if job.priority > 0:
            self.n_prioritized += 1
        else:
            self.n_waiting += 1

    def remove_ready(self, job: Job) -> bool:
        group = job.group_id
        if group is None:
            removed = self.ready.remove(job.id)
        else:
            removed = self.groups.remove(job.id, group, 0.0)
        if removed:
            self._count_out(job)
        return removed

    def pop_ready(self, now: float, claim: GroupClaim | None) -> str | None:
        """The next job id to run under a pull's group defaults, or None. The caller counts it out (the
        pull path inlines ``_count_out``); a grouped job counts as active in its group from here."""
        if claim is None or claim.lanes == ANY_LANE:
            job_id = self.ready.pop()
            if job_id is not None:
                return job_id
        elif claim.lanes == NO_LANE:
            return self.ready.pop()
        groups = self.groups
        if not groups.ready_count:
            return None
        return groups.claim(now, claim)

    def _count_out(self, job: Job) -> None:
        if job.priority > 0:
            self.n_prioritized -= 1
        else:
            self.n_waiting -= 1

    # -- delayed side ------------------------------------------------------------------------------

    def add_delayed(self, job: Job) -> None:
        self.delayed.push(job.id, job.run_at)
        if job.group_id is not None:
            self.groups.add_delayed(job.group_id)

    def pop_due(self, now: float) -> list[str]:
        """The delayed job ids whose run time has passed, out of the delayed heap (``Transitions.promote_due``
        moves them to the ready side)."""
        delayed = self.delayed
        due = delayed.peek_time()
        if due is None or due > now:
            return []
        return delayed.pop_due(now)

    def add_promoted(self, job: Job) -> None:
        """A delayed job whose run time passed joins the ready side."""
        if job.group_id is None:
            self.add_ready(job)
        else:
            self.groups.promote(job.id, job.group_id, job.priority, job.seq)
            self._count_in(job)

    def group_depth(self, group: str) -> int:
        return self.groups.depth(group)

    def next_run_at(self) -> float | None:
        return self.delayed.peek_time()

    def settings(self) -> dict[str, object] | None:
        """The queue's persistent controls, or None when all are at their defaults."""
        out: dict[str, object] = {}
        if self.paused:
            out["paused"] = True
        if self.dlq_config is not None:
            out["dlqConfig"] = dict(self.dlq_config)
        if self.limits is not None:
            out.update(self.limits.settings())
        if self.stall_config is not None:
            out["stallConfig"] = dict(self.stall_config)
        return out or None

    def apply_settings(self, settings: dict[str, object], now: float) -> None:
        """Controls read back from storage."""
        self.paused = bool(settings.get("paused", False))
        dlq_config = settings.get("dlqConfig")
        self.dlq_config = dict(dlq_config) if isinstance(dlq_config, dict) else None
        self.limits = QueueLimits.from_settings(settings, now)
        stall_config = settings.get("stallConfig")
        if isinstance(stall_config, dict):
            self.stall_config = merged_config(DEFAULT_STALL_CONFIG, stall_config)
            self.stall_watch = {} if self.stall_config["enabled"] else None

    # -- membership outside the heaps -------------------------------------------------------------

    def remove_delayed(self, job: Job) -> bool:
        if not self.delayed.remove(job.id):
            return False
        if job.group_id is not None:
            self.groups.remove_delayed(job.group_id, 0.0)
        return True

    def remove_queued(self, job: Job) -> bool:
        """Take a waiting, prioritized or delayed job out of its heap, counters included."""
        return self.remove_delayed(job) or self.remove_ready(job)

    def queued_ids(self) -> list[str]:
        """Every waiting, prioritized and delayed job id, in no particular order."""
        ids = self.ready.ids()
        ids.extend(self.groups.ids())
        ids.extend(self.delayed.keys())
        return ids

    def clear_queued(self) -> list[str]:
        """Empty the heaps at once (Drain, Obliterate); the ids they held."""
        ids = self.queued_ids()
        self.ready.clear()
        self.groups.clear(0.0)
        self.delayed.clear()
        self.n_waiting = self.n_prioritized = 0
        return ids

    def note_completed(self, job_id: str) -> None:
        self.completed[job_id] = None
        self.n_completed += 1

    def forget_completed(self, job_id: str) -> None:
        """A completed job leaves memory (retried, cleaned, evicted, replaced)."""
        if self.completed.pop(job_id, False) is None:
            self.n_completed -= 1

    def park(self, job_id: str) -> None:
        """A job starts waiting for its dependencies or children."""
        self.waiting_children[job_id] = None
        self.n_waiting_children += 1

    def unpark(self, job_id: str) -> None:
        if self.waiting_children.pop(job_id, False) is None:
            self.n_waiting_children -= 1

    @property
    def n_ready(self) -> int:
        return self.n_waiting + self.n_prioritized

    @property
    def n_queued(self) -> int:
        return self.n_waiting + self.n_prioritized + len(self.delayed)

    def is_idle(self) -> bool:
        return (
            not self.n_queued
            and not self.n_active
            and not self.n_completed
            and not self.n_waiting_children
            and not self.waiters
            and not self.paused
            and self.limits is None
            and self.stall_config is None
            and not self.groups.lane_count
        )


class Queues(dict[str, QueueState]):
    """The broker's queues by name; a queue exists from the first time anything names it."""

    def __init__(self) -> None:
        super().__init__()
        # Told the name of every queue that comes into being (the broker points it at its event hub).
        self.on_created: Callable[[str], None] | None = None

    def of(self, name: str) -> QueueState:
        q = self.get(name)
        if q is None:
            q = self[name] = QueueState(name)
            if self.on_created is not None:
                self.on_created(name)
        return q
