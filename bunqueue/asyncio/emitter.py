"""``on``/``once``/``off``/``emit`` with Node's semantics, for Worker and QueueEvents.

A listener may be a plain function or a coroutine function (its coroutine runs as a task). A listener that
raises is logged and does not stop the others.
"""
from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger("bunqueue.client")

Listener = Callable[..., Any]


class EventEmitter:
    def __init__(self) -> None:
        self._listeners: dict[str, list[tuple[Listener, bool]]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    def on(self, event: str, listener: Listener) -> EventEmitter:
        self._listeners.setdefault(event, []).append((listener, False))
        return self

    def once(self, event: str, listener: Listener) -> EventEmitter:
        self._listeners.setdefault(event, []).append((listener, True))
        return self

    def off(self, event: str, listener: Listener) -> EventEmitter:
        entries = self._listeners.get(event)
        if entries:
            self._listeners[event] = [e for e in entries if e[0] is not listener]
        return self

    def remove_all_listeners(self, event: str | None = None) -> None:
        if event is None:
            self._listeners.clear()
        else:
            self._listeners.pop(event, None)

    def listener_count(self, event: str) -> int:
        return len(self._listeners.get(event, ()))

    def emit(self, event: str, *args: Any) -> bool:
        """Call the listeners of ``event``; False when there is none."""
        entries = self._listeners.get(event)
        if not entries:
            return False
        if any(once for _, once in entries):
            self._listeners[event] = [e for e in entries if not e[1]]
        for listener, _ in entries:
            self._dispatch(event, listener, args)
        return True

    def _dispatch(self, event: str, listener: Listener, args: tuple[Any, ...]) -> None:
        try:
            result = listener(*args)
        except Exception:
            log.warning("a listener of %r raised", event, exc_info=True)
            return
        if inspect.isawaitable(result):
            task = asyncio.ensure_future(result)
            self._tasks.add(task)
            task.add_done_callback(self._listener_done)

    def _listener_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("a listener raised", exc_info=task.exception())
