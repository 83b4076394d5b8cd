"""The kinds of broker deadline, and how the broker asks for a wake-up.

The broker has no event loop. Each kind of deadline (leases, job timeouts, stall checks, worker
staleness, rate-limit windows, group windows, DLQ maintenance, cron runs,
completed-job retention) lives in one heap owned by a
broker component, and the component calls ``Alarms.arm(kind, when)`` (the broker's ``wake_at``) whenever
that kind may now be due earlier than anything armed. The server keeps one loop timer per kind, armed for
its earliest deadline (``bunqueue.server.scheduler``); when it fires it calls the kind's handler, which
settles what is due and returns the next deadline of that kind.
Nothing ever scans all jobs on a period.
"""
from __future__ import annotations

from collections.abc import Callable

LEASES = "leases"
TIMEOUTS = "timeouts"
STALLS = "stalls"
WORKERS = "workers"
RATE_LIMITS = "rate-limits"
# The end of a group's rate window or RateLimitGroup deadline, for long-pollers it holds back.
GROUP_LIMITS = "group-limits"
# DLQ maintenance: automatic retries and expiry.
DLQ = "dlq"
# Cron schedules: the earliest next run (bunqueue.broker.timers.cronregistry).
CRON = "cron"
# Completed-job retention by age: the earliest removal (bunqueue.broker.timers.retention).
RETENTION = "retention"

KINDS = (LEASES, TIMEOUTS, STALLS, WORKERS, RATE_LIMITS, GROUP_LIMITS, DLQ, CRON, RETENTION)

# Settles what is due at `now` (epoch ms); returns the next deadline of its kind, or None.
Handler = Callable[[float], "float | None"]
# Called by the broker: this kind may be due at `when` (epoch ms), possibly earlier than armed.
Alarm = Callable[[str, float], None]


def no_alarm(kind: str, when: float) -> None:
    """The broker's alarm until a server arms real timers (unit tests drive handlers directly)."""


class Alarms:
    """The one line from the broker's components to the server's timers, shared by all of them, so that
    arming real timers later (``Wiring.wake_at = ...``) reaches every component at once."""

    __slots__ = ("arm",)

    def __init__(self) -> None:
        self.arm: Alarm = no_alarm
