"""A circuit breaker over a Worker: after ``threshold`` failures in a row it opens and pauses the worker;
after ``reset_timeout`` ms it half-opens and resumes it; the next success closes it, the next failure
opens it again."""
from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, Protocol

from bunqueue.simple.retry import option

DEFAULT_THRESHOLD = 5
DEFAULT_RESET_TIMEOUT_MS = 30000.0
CLOSED, OPEN, HALF_OPEN = "closed", "open", "half-open"


class Pausable(Protocol):
    def pause(self) -> None: ...

    def resume(self) -> None: ...

    def is_paused(self) -> bool: ...


class WorkerCircuitBreaker:
    """``config``: ``threshold``, ``reset_timeout`` (ms) and the callbacks ``on_open(failures)``,
    ``on_half_open()``, ``on_close()`` (camelCase names too)."""

    def __init__(self, config: Mapping[str, Any], worker: Pausable) -> None:
        self._config = config
        self._worker = worker
        self._lock = threading.Lock()
        self._state = CLOSED
        self._failures = 0
        self._timer: threading.Timer | None = None

    @property
    def current_state(self) -> str:
        return self._state

    def is_open(self) -> bool:
        return self._state == OPEN

    def on_success(self) -> None:
        with self._lock:
            closing = self._state == HALF_OPEN
            if closing:
                self._state = CLOSED
            if self._state == CLOSED:
                self._failures = 0
        callback = option(self._config, "on_close", "onClose")
        if closing and callback:
            callback()

    def on_failure(self) -> None:
        with self._lock:
            self._failures += 1
            threshold = int(self._config.get("threshold") or DEFAULT_THRESHOLD)
            opening = self._state == HALF_OPEN or self._failures >= threshold
        if opening:
            self._open()

    def _open(self) -> None:
        with self._lock:
            self._state = OPEN
            failures = self._failures
            self._cancel_timer()
            reset_ms = float(option(self._config, "reset_timeout", "resetTimeout") or DEFAULT_RESET_TIMEOUT_MS)
            self._timer = threading.Timer(reset_ms / 1000, self._half_open)
            self._timer.daemon = True
            self._timer.start()
        callback = option(self._config, "on_open", "onOpen")
        if callback:
            callback(failures)
        self._worker.pause()

    def _half_open(self) -> None:
        with self._lock:
            self._state = HALF_OPEN
        callback = option(self._config, "on_half_open", "onHalfOpen")
        if callback:
            callback()
        self._worker.resume()

    def reset(self) -> None:
        """Closed again at once, the worker resumed."""
        with self._lock:
            self._state = CLOSED
            self._failures = 0
            self._cancel_timer()
        if self._worker.is_paused():
            self._worker.resume()

    def destroy(self) -> None:
        with self._lock:
            self._cancel_timer()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
