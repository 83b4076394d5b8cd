"""``BlockingEngine``: the PostgreSQL engine as the command handlers see it, from a worker thread.

The handlers of ``bunqueue.commands`` are plain functions that call the engine and shape its answer; the
memory engine answers at once, the PostgreSQL engine after a round trip. Rather than write every handler
twice, the PostgreSQL server runs the handlers that are not on the hot path in a thread pool, where this
face turns each call into a wait for the engine's coroutine on the event loop. The engine itself is only
ever touched from the loop, so it needs no locks. The job family (PUSH ... FAIL) never comes here: its
handlers await the engine on the loop (``AwaitedJobs``). A method that waits for long (``wait_job``) is
a plain method returning an awaitable: the face hands it back unawaited and ``dispatch`` awaits it on the
loop, so a long wait holds no thread.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
from collections.abc import Callable
from typing import Any

# Attributes a handler may read from any thread: plain values and the pure clock.
_DIRECT = frozenset({"clock", "awaits_jobs"})


class BlockingEngine:
    """Every method of ``engine`` as a blocking call run on ``loop``: a coroutine is awaited there, a plain
    method called there, so an engine method never runs on a worker thread."""

    def __init__(self, engine: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._engine = engine
        self._loop = loop

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._engine, name)
        if name in _DIRECT or not callable(attr):
            return attr
        call = self._blocking(attr)
        # Made once per name: later lookups find it on the instance.
        setattr(self, name, call)
        return call

    def _blocking(self, method: Callable[..., Any]) -> Callable[..., Any]:
        loop = self._loop
        if inspect.iscoroutinefunction(method):
            def awaited(*args: Any, **kwargs: Any) -> Any:
                return asyncio.run_coroutine_threadsafe(method(*args, **kwargs), loop).result()
            return awaited

        def called(*args: Any, **kwargs: Any) -> Any:
            done: concurrent.futures.Future[Any] = concurrent.futures.Future()

            def run() -> None:
                try:
                    done.set_result(method(*args, **kwargs))
                except BaseException as exc:
                    done.set_exception(exc)

            loop.call_soon_threadsafe(run)
            return done.result()
        return called
