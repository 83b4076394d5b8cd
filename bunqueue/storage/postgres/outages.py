"""``OutageLog``: one line when a repeated database task starts failing and one when it runs again; and
``one_line_pool_warnings``: asyncpg's pool says each failed reconnection with its traceback.

The broker's timers run every few dozen milliseconds; a database away for a minute must not write a warning
each time. The failures in between go to the debug level."""
from __future__ import annotations

import logging

log = logging.getLogger("bunqueue.postgres")


class OutageLog:
    """For repeated tasks of one kind (the engine's timers, or one loop): a warning when the first starts
    failing, debug lines while any still fails, and one line when the last that failed has run again."""

    __slots__ = ("subject", "failing")

    def __init__(self, subject: str) -> None:
        self.subject = subject
        self.failing: set[str] = set()

    def failed(self, exc: BaseException, task: str = "") -> None:
        if self.failing:
            self.failing.add(task)
            log.debug("PostgreSQL %s failed again (%s): %s", self.subject, task, exc)
            return
        self.failing.add(task)
        where = f" ({task})" if task else ""
        log.warning("PostgreSQL %s failed%s: %s (retrying; told again when it recovers)", self.subject, where, exc)

    def ran(self, task: str = "") -> None:
        if task in self.failing:
            self.failing.discard(task)
            if not self.failing:
                log.info("PostgreSQL %s recovered", self.subject)


class _WithoutTraceback(logging.Filter):
    """A record that carries an exception keeps its text on the same line and drops the traceback: a database
    that went away is an expected condition, said by the broker's own lines."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            record.msg = f"{record.getMessage()}: {record.exc_info[1]}"
            record.args = None
            record.exc_info = None
            record.exc_text = None
        return True


_POOL_FILTER = _WithoutTraceback()


def one_line_pool_warnings() -> None:
    """asyncpg's pool logs each failed reconnection of its connection floor in one line."""
    logging.getLogger("asyncpg.pool").addFilter(_POOL_FILTER)
