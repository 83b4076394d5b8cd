"""Blocking twins of the asyncio client's coroutine methods, run on the client's background loop."""
from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Concatenate, ParamSpec, TypeVar

from bunqueue.asyncio.emitter import EventEmitter, Listener
from bunqueue.client.loopthread import background

P = ParamSpec("P")
R = TypeVar("R")


def blocking(method: Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]) -> Callable[Concatenate[Any, P], R]:
    """A method that runs ``method`` of ``self._aio`` (the asyncio object) and waits for its result."""
    name = method.__name__

    @functools.wraps(method)
    def call(self: Any, *args: P.args, **kwargs: P.kwargs) -> R:
        return background().run(getattr(self._aio, name)(*args, **kwargs))

    return call


def run(coro: Coroutine[Any, Any, R], timeout: float | None = None) -> R:
    return background().run(coro, timeout)


class ThreadedEmitter(EventEmitter):
    """Listeners run in order on a thread of their own, so they may make blocking client calls."""

    def __init__(self) -> None:
        super().__init__()
        self._listener_thread = ThreadPoolExecutor(1, thread_name_prefix="bunqueue-listeners")

    def _dispatch(self, event: str, listener: Listener, args: tuple[Any, ...]) -> None:
        self._listener_thread.submit(super()._dispatch, event, listener, args)

    def _settle_listeners(self) -> None:
        """Wait until every event emitted so far has reached its listeners."""
        self._listener_thread.submit(lambda: None).result()


class Bridged:
    """Put before an asyncio emitter's class: its events go to the listeners of ``outer``, the synchronous
    object that runs it."""

    outer: ThreadedEmitter

    def emit(self, event: str, *args: Any) -> bool:
        return self.outer.emit(event, *args)

    def listener_count(self, event: str) -> int:
        return self.outer.listener_count(event)
