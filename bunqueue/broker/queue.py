"""One queue's scheduling state: the ready heap, group lanes, the delayed heap and O(1) counters."""
from __future__ import annotations

from collections import deque
from typing import Any

from bunqueue._core.jobs import Job
from bunqueue._core.readyqueue import ReadyQueue
from bunqueue._core.timers import TimerHeap
from bunqueue.broker.clock import now_ms
from bunqueue.broker.limits import QueueLimits
from bunqueue.broker.stalls import DEFAULT_STALL_CONFIG, merged_config


class QueueState:
    """Jobs of one queue: heaps for those waiting to run, id sets for the others.

    Ungrouped ready jobs sit in one heap in the reference order. Grouped jobs wait in one lane per group
    (lower intra-group priority first, then admission order) and are served round-robin, after any ready
    ungrouped job. Delayed jobs sit in a time heap until their run time passes; they are moved to the
    ready side lazily, by whoever looks next, so no timer runs per delayed job.
    """

    __slots__ = (
        "active",
        "completed",
        "delayed",
        "delayed_by_group",
        "dlq_config",
        "lanes",
        "limits",
        "n_active",
        "n_completed",
        "n_prioritized",
        "n_waiting",
        "n_waiting_children",
        "name",
        "paused",
        "ready",
        "rotation",
        "stall_config",
        "stall_watch",
        "waiters",
        "waiting_children",
    )

    def __init__(self, name: str) -> None:
        self.name = name
        self.ready = ReadyQueue()
        self.lanes: dict[str, ReadyQueue] = {}
        # Groups with ready jobs, in round-robin order: the head is served next.
        self.rotation: deque[str] = deque()
        self.delayed = TimerHeap()
        # Delayed jobs per group: with the lanes, the pending depth that groupMaxSize caps.
        self.delayed_by_group: dict[str, int] = {}
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
        # Active jobs awaiting their first stall check, in pull order (see broker.stalls); None while
        # stall detection is disabled for this queue.
        self.stall_watch: dict[str, None] | None = {}

    # -- ready side --------------------------------------------------------------------------------

    def add_ready(self, job: Job) -> None:
        group = job.group_id
        if group is None:
            self.ready.push(job.id, job.priority, job.lifo, job.run_at, job.seq)
        else:
            lane = self.lanes.get(group)
            if lane is None:
                lane = self.lanes[group] = ReadyQueue()
            if not lane:
                self.rotation.append(group)
            # Lanes run lower priorities first and ignore LIFO and run time: admission order breaks ties.
            lane.push(job.id, -job.priority, False, 0.0, job.seq)
        if job.priority > 0:
            self.n_prioritized += 1
        else:
            self.n_waiting += 1

    def remove_ready(self, job: Job) -> bool:
        group = job.group_id
        if group is None:
            removed = self.ready.remove(job.id)
        else:
            lane = self.lanes.get(group)
            removed = lane is not None and lane.remove(job.id)
            if removed and not lane:
                self._drop_lane(group)
        if removed:
            self._count_out(job)
        return removed

    def pop_ready(self) -> str | None:
        """The next job id to run, or None. The caller counts it out with ``took``."""
        job_id = self.ready.pop()
        if job_id is not None or not self.rotation:
            return job_id
        group = self.rotation[0]
        lane = self.lanes[group]
        job_id = lane.pop()
        if lane:
            self.rotation.rotate(-1)
        else:
            self._drop_lane(group)
        return job_id

    def took(self, job: Job) -> None:
        self._count_out(job)

    def _count_out(self, job: Job) -> None:
        if job.priority > 0:
            self.n_prioritized -= 1
        else:
            self.n_waiting -= 1

    def _drop_lane(self, group: str) -> None:
        del self.lanes[group]
        try:
            self.rotation.remove(group)
        except ValueError:
            pass

    # -- delayed side ------------------------------------------------------------------------------

    def add_delayed(self, job: Job) -> None:
        self.delayed.push(job.id, job.run_at)
        if job.group_id is not None:
            self.delayed_by_group[job.group_id] = self.delayed_by_group.get(job.group_id, 0) + 1

    def promote_due(self, now: float, jobs: dict[str, Job], ready_state: int) -> None:
        """Move every delayed job whose run time has passed to the ready side."""
        delayed = self.delayed
        due = delayed.peek_time()
        if due is None or due > now:
            return
        by_group = self.delayed_by_group
        for job_id in delayed.pop_due(now):
            job = jobs[job_id]
            if job.group_id is not None:
                by_group[job.group_id] -= 1
            job.state = ready_state
            self.add_ready(job)

    def group_depth(self, group: str) -> int:
        lane = self.lanes.get(group)
        return (len(lane) if lane is not None else 0) + self.delayed_by_group.get(group, 0)

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

    def apply_settings(self, settings: dict[str, object]) -> None:
        """Controls read back from storage."""
        self.paused = bool(settings.get("paused", False))
        dlq_config = settings.get("dlqConfig")
        self.dlq_config = dict(dlq_config) if isinstance(dlq_config, dict) else None
        self.limits = QueueLimits.from_settings(settings, now_ms())
        stall_config = settings.get("stallConfig")
        if isinstance(stall_config, dict):
            self.stall_config = merged_config(DEFAULT_STALL_CONFIG, stall_config)
            self.stall_watch = {} if self.stall_config["enabled"] else None

    # -- membership outside the heaps -------------------------------------------------------------

    def remove_delayed(self, job: Job) -> bool:
        if not self.delayed.remove(job.id):
            return False
        if job.group_id is not None:
            self.delayed_by_group[job.group_id] -= 1
        return True

    def remove_queued(self, job: Job) -> bool:
        """Take a waiting, prioritized or delayed job out of its heap, counters included."""
        return self.remove_delayed(job) or self.remove_ready(job)

    def queued_ids(self) -> list[str]:
        """Every waiting, prioritized and delayed job id, in no particular order."""
        ids = self.ready.ids()
        for lane in self.lanes.values():
            ids.extend(lane.ids())
        ids.extend(self.delayed.keys())
        return ids

    def clear_queued(self) -> list[str]:
        """Empty the heaps at once (Drain, Obliterate); the ids they held."""
        ids = self.queued_ids()
        self.ready.clear()
        self.lanes.clear()
        self.rotation.clear()
        self.delayed.clear()
        self.delayed_by_group.clear()
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
        )
