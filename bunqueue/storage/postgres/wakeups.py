"""Waking pullers when another broker (or this one) makes jobs claimable: LISTEN on one connection.

A pull that found nothing registers a waiter for its queue and sleeps until a notification for that queue
arrives or the poll interval passes, whichever is first; then it claims again. The waiter is registered
before the claim that found nothing, so a notification sent while that claim ran is not missed. The poll
is the safety net for notifications lost with the listening connection; a lost connection is made again
(every second until the database answers), and every waiter claims again meanwhile.

The same connection hears the job events other brokers send (``broadcast``): a payload that starts with
``broadcast.MARK`` goes to ``on_events``.
"""
from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable

import asyncpg

from bunqueue.storage.postgres.pgtext import from_text
from bunqueue.storage.postgres.statements import CHANNEL

log = logging.getLogger("bunqueue.postgres")

RECONNECT_S = 1.0
Connect = Callable[[], Awaitable[asyncpg.Connection]]
# What starts an event notification (``broadcast.MARK``); a wake-up is a JSON array.
EVENTS_MARK = "E"


class Wakeups:
    """This broker's waiters, by queue; ``listen`` feeds them from the namespace's notifications."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self._waiters: dict[str, dict[asyncio.Future[None], None]] = {}
        self._conn: asyncpg.Connection | None = None
        self._connect: Connect | None = None
        self._reconnecting: asyncio.Task[None] | None = None
        # Notifications of this namespace received, for the logs and the tests.
        self.received = 0
        # Where event notifications (any namespace's) go; set by the engine.
        self.on_events: Callable[[str], None] | None = None
        # Wake-ups per queue so far: a reading taken before a claim tells whether work came since.
        self.rounds: dict[str, int] = {}

    async def listen(self, connect: Connect) -> None:
        """Open a connection with ``connect`` (dedicated: a LISTEN holds it) and wake waiters from its
        notifications; open another when it is lost."""
        self._connect = connect
        await self._listen(await connect())

    async def _listen(self, conn: asyncpg.Connection) -> None:
        await conn.add_listener(CHANNEL, self._on_notification)
        conn.add_termination_listener(self._on_lost)
        self._conn = conn

    def _on_lost(self, conn: object) -> None:
        if self._conn is not conn or self._connect is None:
            return
        self._conn = None
        log.warning("the PostgreSQL listening connection was lost; reconnecting")
        self.wake_all()
        self._reconnecting = asyncio.get_running_loop().create_task(self._reconnect())

    async def _reconnect(self) -> None:
        while self._connect is not None:
            try:
                await self._listen(await self._connect())
            except Exception as exc:
                log.debug("listening connection not back yet: %s", exc)
                await asyncio.sleep(RECONNECT_S)
            else:
                # Anything committed while no one listened: let every waiter look.
                self.wake_all()
                return

    def wake_all(self) -> None:
        for queue in list(self._waiters):
            self.wake(queue)

    async def close(self) -> None:
        self._connect = None
        if self._reconnecting is not None:
            self._reconnecting.cancel()
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
        if payload.startswith(EVENTS_MARK):
            if self.on_events is not None:
                self.on_events(payload)
            return
        try:
            namespace, queue = json.loads(payload)
        except (ValueError, TypeError):
            log.warning("ignored a malformed notification on %s: %r", CHANNEL, payload[:200])
            return
        # The names are as stored (``pgtext``): a notification's payload is no statement result.
        if type(namespace) is str and from_text(namespace) == self.namespace and type(queue) is str:
            self.received += 1
            self.wake(from_text(queue))

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
