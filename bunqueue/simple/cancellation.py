"""Cooperative cancellation of the jobs a simple-mode app is running: one signal per job."""
from __future__ import annotations

import threading


class CancelSignal:
    """AbortSignal's ``aborted`` flag: set once by ``abort()``; a processor checks it and gives up."""

    def __init__(self) -> None:
        self._aborted = threading.Event()

    @property
    def aborted(self) -> bool:
        return self._aborted.is_set()

    def abort(self) -> None:
        self._aborted.set()


class CancellationManager:
    """The signals of running jobs by id; ``cancel`` aborts one at once or after a grace period."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._signals: dict[str, CancelSignal] = {}
        self._grace_timers: dict[str, threading.Timer] = {}

    def register(self, job_id: str) -> CancelSignal:
        signal = CancelSignal()
        with self._lock:
            self._signals[job_id] = signal
        return signal

    def unregister(self, job_id: str) -> None:
        with self._lock:
            self._signals.pop(job_id, None)
            timer = self._grace_timers.pop(job_id, None)
        if timer is not None:
            timer.cancel()

    def cancel(self, job_id: str, grace_period_ms: float = 0) -> None:
        """Abort the job's signal, after ``grace_period_ms`` when positive; an unknown job is ignored."""
        with self._lock:
            signal = self._signals.get(job_id)
            if signal is None:
                return
            if grace_period_ms > 0:
                timer = threading.Timer(grace_period_ms / 1000, signal.abort)
                timer.daemon = True
                self._grace_timers[job_id] = timer
                timer.start()
                return
        signal.abort()

    def is_cancelled(self, job_id: str) -> bool:
        signal = self.get_signal(job_id)
        return signal is not None and signal.aborted

    def get_signal(self, job_id: str) -> CancelSignal | None:
        with self._lock:
            return self._signals.get(job_id)

    def destroy_all(self) -> None:
        """Abort every signal and drop every pending grace period."""
        with self._lock:
            signals = list(self._signals.values())
            timers = list(self._grace_timers.values())
            self._signals.clear()
            self._grace_timers.clear()
        for timer in timers:
            timer.cancel()
        for signal in signals:
            signal.abort()
