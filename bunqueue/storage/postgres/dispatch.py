"""The PostgreSQL server's dispatch table: the one table of ``bunqueue.commands``, each handler run so that
the engine's round trips never block the loop and one connection's commands take effect in order.

* The job family (``AWAITED``) runs on the loop: its handlers validate at once and return a coroutine over
  the engine (``AwaitedJobs``).
* Every other handler runs in a worker thread against ``BlockingEngine``; a reply that is itself an
  awaitable (a long-poll) is awaited back on the loop.
* ``CommandOrder`` keeps each connection's commands in order: a command starts its round trips once the
  commands sent before it on the same connection are done, except that a run of pushes (or acks, or fails)
  is submitted at once, because one collector keeps their order. A long-poll (a pull or WaitJob with a
  timeout) holds up no later command, as in memory.
* A command that cannot reach the database fails with ``Storage unavailable: <why>`` and never waits past
  its limit (the statement timeout, plus the long-poll's own timeout): the broker stays up and the client
  may retry (a retried push with a custom id is idempotent).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
from collections.abc import Awaitable
from typing import Any

from bunqueue import errors
from bunqueue.broker.session import Session
from bunqueue.commands import HANDLERS, Handler
from bunqueue.errors import CommandError
from bunqueue.storage.postgres.blocking import BlockingEngine
from bunqueue.storage.postgres.pool import UNREACHABLE, reason

Reply = dict[str, Any]

AWAITED = frozenset({"PUSH", "PUSHB", "PULL", "PULLB", "ACK", "ACKB", "FAIL"})
# Commands whose consecutive requests may overlap: each kind goes through one collector, in arrival order.
COLLECTED = frozenset({"PUSH", "PUSHB", "ACK", "ACKB", "FAIL"})
# Answered from the connection's own state: no engine call, no order to keep.
LOCAL = frozenset({"Hello", "Ping", "Auth"})
# Handler threads: a command holds one for its round trips only (a long wait gives it back).
THREADS = 32


class CommandOrder:
    """One connection's commands in flight: the kind of the last run and what the next command waits for."""

    __slots__ = ("kind", "before", "pending")

    def __init__(self) -> None:
        self.kind: str | None = None
        # What the current run of commands waits for (the commands before the run).
        self.before: list[asyncio.Future[None]] = []
        # The current run's commands not done yet.
        self.pending: list[asyncio.Future[None]] = []

    def enter(self, kind: str, long_poll: bool) -> tuple[list[asyncio.Future[None]], asyncio.Future[None]]:
        """What a new command of ``kind`` waits for, and the future it settles when it is done."""
        if kind != self.kind or kind not in COLLECTED:
            self.before = [f for f in self.pending if not f.done()]
            self.pending = []
            self.kind = kind
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if not long_poll:
            self.pending.append(done)
        return self.before, done


def order_of(session: Session) -> CommandOrder:
    order = session.order
    if order is None:
        order = session.order = CommandOrder()
    return order  # type: ignore[no-any-return]


def _waits_ms(cmd: dict[str, Any]) -> float:
    """How long a long-poll may wait by its own timeout; 0 for any other command."""
    timeout = cmd.get("timeout")
    if cmd.get("cmd") in ("PULL", "PULLB", "WaitJob") and isinstance(timeout, (int, float)) and timeout > 0:
        return float(timeout)
    return 0.0


class Limits:
    """How long a command may take once it starts: the statement timeout, plus a long-poll's own wait."""

    __slots__ = ("statement_s",)

    def __init__(self, statement_ms: int) -> None:
        self.statement_s = statement_ms / 1000

    def of(self, waits_ms: float) -> float:
        return self.statement_s + waits_ms / 1000


async def _in_order(
    before: list[asyncio.Future[None]], done: asyncio.Future[None], reply: Awaitable[Reply], limit_s: float
) -> Reply:
    try:
        for earlier in before:
            await earlier
        async with asyncio.timeout(limit_s):
            return await reply
    except TimeoutError:
        raise CommandError(errors.storage_timeout(limit_s)) from None
    except UNREACHABLE as exc:
        raise CommandError(errors.storage_unavailable(reason(exc))) from None
    finally:
        done.set_result(None)


def build_handlers(
    engine: Any, loop: asyncio.AbstractEventLoop, statement_timeout_ms: int
) -> tuple[dict[str, Handler], concurrent.futures.Executor]:
    """The table the runner serves with ``engine``, and the thread pool it uses (shut down by the server)."""
    limits = Limits(statement_timeout_ms)
    blocking = BlockingEngine(engine, loop)
    pool = concurrent.futures.ThreadPoolExecutor(THREADS, thread_name_prefix="bunqueue-command")
    table: dict[str, Handler] = {}
    for name, handler in HANDLERS.items():
        if name in LOCAL:
            table[name] = handler
        elif name in AWAITED:
            table[name] = _awaited(name, handler, limits)
        else:
            table[name] = _threaded(name, handler, blocking, pool, loop, limits)
    return table, pool


def _awaited(name: str, handler: Handler, limits: Limits) -> Handler:
    def run(broker: Any, cmd: dict[str, Any], session: Session) -> Any:
        reply = handler(broker, cmd, session)
        if not inspect.isawaitable(reply):
            return reply
        waits = _waits_ms(cmd)
        before, done = order_of(session).enter(name, waits > 0)
        return _in_order(before, done, reply, limits.of(waits))
    return run


def _threaded(
    name: str, handler: Handler, blocking: BlockingEngine, pool: concurrent.futures.Executor,
    loop: asyncio.AbstractEventLoop, limits: Limits,
) -> Handler:
    async def call(cmd: dict[str, Any], session: Session) -> Reply:
        reply = await loop.run_in_executor(pool, handler, blocking, cmd, session)
        if inspect.isawaitable(reply):
            return await reply  # type: ignore[no-any-return]
        return reply  # type: ignore[return-value]

    def run(broker: Any, cmd: dict[str, Any], session: Session) -> Any:
        waits = _waits_ms(cmd)
        before, done = order_of(session).enter(name, waits > 0)
        return _in_order(before, done, call(cmd, session), limits.of(waits))
    return run
