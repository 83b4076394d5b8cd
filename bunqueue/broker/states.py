"""Where a job lives, and the public state names derived from it."""
from __future__ import annotations

# Job.state codes: the physical home of a job. "waiting", "prioritized" and "delayed" are not homes but
# views of READY/DELAYED jobs, derived from priority and run time when asked.
READY = 1
DELAYED = 2
ACTIVE = 3
COMPLETED = 4
FAILED = 5
WAITING_CHILDREN = 6

WAITING = "waiting"
PRIORITIZED = "prioritized"
DELAYED_NAME = "delayed"
ACTIVE_NAME = "active"
COMPLETED_NAME = "completed"
FAILED_NAME = "failed"
WAITING_CHILDREN_NAME = "waiting-children"
UNKNOWN = "unknown"

LIVE = frozenset((READY, DELAYED, ACTIVE, WAITING_CHILDREN))

_FIXED_NAMES = {
    ACTIVE: ACTIVE_NAME,
    COMPLETED: COMPLETED_NAME,
    FAILED: FAILED_NAME,
    WAITING_CHILDREN: WAITING_CHILDREN_NAME,
}


def state_name(state: int, priority: float, run_at: float, now: float) -> str:
    if state == READY or state == DELAYED:
        if run_at > now:
            return DELAYED_NAME
        return PRIORITIZED if priority > 0 else WAITING
    return _FIXED_NAMES[state]
