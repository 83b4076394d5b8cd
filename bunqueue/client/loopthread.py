"""The event loop the synchronous client and the embedded broker run on: one daemon thread per process.

Blocking calls hand a coroutine to this loop and wait for its result, so every synchronous object shares
one loop, one set of connections per object and, in embedded mode, the engine itself.
"""
from __future__ import annotations

import asyncio
import atexit
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from bunqueue.errors import BLOCKING_ON_LOOP

T = TypeVar("T")

_lock = threading.Lock()
_instance: LoopThread | None = None
# Coroutine functions run on the loop when the interpreter exits (the embedded engines' stores close).
_at_exit: list[Callable[[], Coroutine[Any, Any, None]]] = []
EXIT_TIMEOUT_S = 10.0


class LoopThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._serve, name="bunqueue-client", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and wait for its result from another thread."""
        if threading.current_thread() is self.thread:
            coro.close()
            raise RuntimeError(BLOCKING_ON_LOOP)
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def on_loop(self) -> bool:
        return threading.current_thread() is self.thread


def background() -> LoopThread:
    """The process's client loop, started on first use."""
    global _instance
    with _lock:
        if _instance is None:
            _instance = LoopThread()
            atexit.register(_shutdown)
        return _instance


def at_exit(hook: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run ``hook()`` on the loop at interpreter exit, before the loop thread is gone."""
    _at_exit.append(hook)


def _shutdown() -> None:
    if _instance is None or not _at_exit:
        return

    async def run_hooks() -> None:
        for hook in reversed(_at_exit):
            await hook()

    try:
        asyncio.run_coroutine_threadsafe(run_hooks(), _instance.loop).result(EXIT_TIMEOUT_S)
    except Exception:  # noqa: BLE001 - exiting anyway; the store's own commit already made replies durable
        pass


async def hop(coro: Coroutine[Any, Any, T]) -> T:
    """Await ``coro`` on the background loop from any loop (directly when already there)."""
    bg = background()
    if bg.on_loop():
        return await coro
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, bg.loop))
