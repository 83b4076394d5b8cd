"""The moves a job's state may make, and the check of each assignment in a debug build.

``PREDECESSORS[state]`` is every state a job may be in when a transition moves it to ``state`` (``NEW``: a
job just built, not yet admitted). It is the state diagram of the package docstring written as data. With
``BUNQUEUE_DEBUG=1`` in the environment (the test suite sets it) every assignment in ``transitions/``
checks its predecessor first, as asyncpg's ``_set_state`` does, and a move the diagram lacks raises; in the
normal build the check is one test of a module constant.
"""
from __future__ import annotations

import os

from bunqueue._core.jobs import Job
from bunqueue.broker import states

# Job.state of a job that was built and not yet admitted (JobFactory leaves it at 0).
NEW = 0

CHECKED = os.environ.get("BUNQUEUE_DEBUG") == "1"

_QUEUED = (states.READY, states.DELAYED)

PREDECESSORS: dict[int, frozenset[int]] = {
    # admit; promotion of a due delayed job; a requeue (retry, release, move, delay change); a released
    # parent; a restart from the DLQ or from completion.
    states.READY: frozenset(
        (NEW, *_QUEUED, states.ACTIVE, states.WAITING_CHILDREN, states.COMPLETED, states.FAILED)
    ),
    states.DELAYED: frozenset((NEW, *_QUEUED, states.ACTIVE, states.WAITING_CHILDREN)),
    # PULL takes only ready jobs (a due delayed one is promoted first).
    states.ACTIVE: frozenset((states.READY,)),
    # ACK; a late ACK of an attempt whose job went back to its queue.
    states.COMPLETED: frozenset((states.ACTIVE, *_QUEUED)),
    # a lost last attempt; Discard; failParentOnFailure.
    states.FAILED: frozenset((states.ACTIVE, *_QUEUED, states.WAITING_CHILDREN)),
    # dependencies at admission; UpdateParent; MoveToWaitingChildren; a parked job read back at start-up.
    states.WAITING_CHILDREN: frozenset((NEW, *_QUEUED, states.ACTIVE, states.WAITING_CHILDREN)),
}

_NAMES = {
    NEW: "new", states.READY: "ready", states.DELAYED: "delayed", states.ACTIVE: "active",
    states.COMPLETED: "completed", states.FAILED: "failed", states.WAITING_CHILDREN: "waiting-children",
}


class IllegalMove(AssertionError):
    """A transition moved a job along an edge the state diagram does not have."""


def check_move(job: Job, to: int) -> None:
    if job.state not in PREDECESSORS[to]:
        raise IllegalMove(f"job {job.id}: no move from {_NAMES.get(job.state, job.state)} to {_NAMES[to]}")
