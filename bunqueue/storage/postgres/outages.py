"""``OutageLog``: one line when a repeated database task starts failing and one when it runs again.

The broker's timers run every few dozen milliseconds; a database away for a minute must not write a warning
each time. The failures in between go to the debug level."""
from __future__ import annotations

import logging

log = logging.getLogger("bunqueue.postgres")


class OutageLog:
    __slots__ = ("what", "failing")

    def __init__(self, what: str) -> None:
        self.what = what
        self.failing = False

    def failed(self, exc: BaseException) -> None:
        if self.failing:
            log.debug("PostgreSQL %s failed again: %s", self.what, exc)
            return
        self.failing = True
        log.warning("PostgreSQL %s failed: %s (retrying; said again only once it runs)", self.what, exc)

    def ran(self) -> None:
        if self.failing:
            self.failing = False
            log.warning("PostgreSQL %s runs again", self.what)
