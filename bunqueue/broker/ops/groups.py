"""Job groups: the group counts, the group rate limit and concurrency overrides, PauseGroup/ResumeGroup/
IsGroupPaused and RateLimitGroup, over ``timers.groupcontrols.GroupControls`` and each queue's group lanes."""
from __future__ import annotations

from bunqueue.broker.wiring import Wiring


def group_jobs_count(broker: Wiring, queue: str, group_id: str) -> int:
    return broker.groups.lanes(queue).depth(group_id)


def groups_count(broker: Wiring, queue: str) -> int:
    return len(broker.groups.lanes(queue))


def group_active_count(broker: Wiring, queue: str, group_id: str) -> int:
    return broker.groups.lanes(queue).active_count(group_id)


def set_group_rate_limit(broker: Wiring, queue: str, group_id: str, max_jobs: int, duration: int) -> None:
    broker.groups.set_rate_limit(queue, group_id, max_jobs, duration)


def group_rate_limit(broker: Wiring, queue: str, group_id: str) -> dict[str, int] | None:
    return broker.groups.rate_limit(queue, group_id)


def remove_group_rate_limit(broker: Wiring, queue: str, group_id: str) -> int:
    return broker.groups.remove_rate_limit(queue, group_id)


def group_rate_limit_ttl(broker: Wiring, queue: str, group_id: str, max_jobs: int) -> float:
    """Milliseconds until the group's window has room; ``max_jobs`` -1 means the group's own limit."""
    return broker.groups.rate_limit_ttl(queue, group_id, max_jobs)


def set_group_concurrency(broker: Wiring, queue: str, group_id: str, concurrency: int) -> None:
    broker.groups.set_concurrency(queue, group_id, concurrency)


def group_concurrency(broker: Wiring, queue: str, group_id: str) -> int | None:
    return broker.groups.lanes(queue).concurrency(group_id)


def remove_group_concurrency(broker: Wiring, queue: str, group_id: str) -> int:
    return broker.groups.remove_concurrency(queue, group_id)


def pause_group(broker: Wiring, queue: str, group_id: str) -> bool:
    return broker.groups.pause(queue, group_id)


def resume_group(broker: Wiring, queue: str, group_id: str) -> bool:
    return broker.groups.resume(queue, group_id)


def is_group_paused(broker: Wiring, queue: str, group_id: str) -> bool:
    return broker.groups.lanes(queue).is_paused(group_id)


def rate_limit_group(broker: Wiring, queue: str, group_id: str, duration: int) -> None:
    broker.groups.limit_for(queue, group_id, duration)
