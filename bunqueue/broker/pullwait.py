"""Long-poll PULL/PULLB: wait, without polling, until a job may be ready or the deadline passes."""
from __future__ import annotations

import asyncio
from typing import Any

from bunqueue._core.groups import GroupClaim
from bunqueue._core.jobs import Job
from bunqueue.broker.components.queues import QueueState
from bunqueue.broker.session import Session
from bunqueue.broker.wiring import Wiring


async def wait_for_jobs(
    broker: Wiring,
    q: QueueState,
    count: int,
    session: Session,
    owner: str | None,
    lock_ttl: float,
    detach: bool,
    timeout_ms: float,
    claim: GroupClaim | None = None,
) -> tuple[list[Job], list[str] | None]:
    """Pull up to ``count`` jobs, waiting up to ``timeout_ms`` for the first one.

    A waiter is woken by a push, a retry or a release into its queue (one waiter per job), by a resume,
    or by its own timer set to the earliest delayed run time of the queue; it then pulls again and goes
    back to sleep if another waiter was faster.
    """
    loop = asyncio.get_running_loop()
    deadline = broker.clock() + timeout_ms
    session.waiting += 1
    try:
        while True:
            now = broker.clock()
            if now >= deadline:
                return [], [] if owner is not None else None
            wake_at = deadline
            next_run = q.next_run_at()
            if next_run is not None and next_run < wake_at:
                wake_at = next_run
            fut: asyncio.Future[Any] = loop.create_future()
            q.waiters.append(fut)
            timer = loop.call_later(max(0.0, wake_at - now) / 1000.0, _wake, fut)
            try:
                await fut
            finally:
                timer.cancel()
                if not fut.done():
                    fut.cancel()
                try:
                    # Woken by its own timer (or cancelled): still queued, and must not be left behind.
                    q.waiters.remove(fut)
                except ValueError:
                    pass
            jobs, tokens = broker.pull(q, count, session, owner, lock_ttl, detach, claim)
            if jobs:
                return jobs, tokens
    finally:
        session.waiting -= 1


def _wake(fut: asyncio.Future[Any]) -> None:
    if not fut.done():
        fut.set_result(None)
