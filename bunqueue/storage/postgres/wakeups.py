"""Waking pullers when another broker (or this one) makes jobs claimable: LISTEN on one connection.

A pull that found nothing registers a waiter for its queue and sleeps until a notification for that queue
arrives or the poll interval passes, whichever is first; then it claims again. The waiter is registered
before the claim that found nothing, so a notification sent while that claim ran is not missed. The poll
is the safety net for notifications lost with the listening connection.
"""
from __future__ import annotations

import asyncio
import json
import logging

import asyncpg

from bunqueue.storage.postgres.statements import CHANNEL

log = logging.getLogger("bunqueue.postgres")


class Wakeups:
    """This broker's waiters, by queue; ``listen`` feeds them from the namespace's notifications."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self._waiters: dict[str, dict[asyncio.Future[None], None]] = {}
        self._conn: asyncpg.Connection | None = None
        # Notifications of this namespace received, for the logs and the tests.
        self.received = 0
        # Wake-ups per queue so far: a reading taken before a claim tells whether work came since.
        self.rounds: dict[str, int] = {}

    async def listen(self, conn: asyncpg.Connection) -> None:
        """Take ``conn`` (dedicated: a LISTEN holds it) and wake waiters from its notifications."""
        await conn.add_listener(CHANNEL, self._on_notification)
        self._conn = conn

    async def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await conn.remove_listener(CHANNEL, self._on_notification)
            await conn.close()
        for waiters in self._waiters.values():
            for future in waiters:
                if not future.done():
                    future.set_result(None)
        self._waiters.clear()

    def _on_notification(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        try:
            namespace, queue = json.loads(payload)
        except (ValueError, TypeError):
            log.warning("ignored a malformed notification on %s: %r", CHANNEL, payload[:200])
            return
        if namespace == self.namespace:
            self.received += 1
            self.wake(queue)

    def waiter(self, queue: str) -> asyncio.Future[None]:
        """A future that completes at the queue's next wake-up."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(queue, {})[future] = None
        return future

    def forget(self, queue: str, future: asyncio.Future[None]) -> None:
        waiters = self._waiters.get(queue)
        if waiters is not None:
            waiters.pop(future, None)
            if not waiters:
                del self._waiters[queue]

    def wake(self, queue: str) -> None:
        """Every waiter of ``queue`` claims again."""
        self.rounds[queue] = self.rounds.get(queue, 0) + 1
        waiters = self._waiters.pop(queue, None)
        if waiters:
            for future in waiters:
                if not future.done():
                    future.set_result(None)

    async def sleep(self, queue: str, future: asyncio.Future[None], seconds: float) -> None:
        """Until ``future`` (from ``waiter``) completes or ``seconds`` pass; the waiter is gone after."""
        timer = asyncio.get_running_loop().call_later(seconds, _settle, future)
        try:
            await future
        finally:
            timer.cancel()
            self.forget(queue, future)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
