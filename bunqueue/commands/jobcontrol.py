"""Job control commands: Cancel, Update, ChangePriority, Promote, PromoteJobs, MoveToDelayed, ChangeDelay,
MoveToWait, Discard, Progress and WaitJob.
"""
from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from bunqueue import options
from bunqueue._core.jobfactory import MAX_DURATION, check_nesting
from bunqueue._core.jobs import NO_DATA
from bunqueue.broker.engine import Engine, Session
from bunqueue.errors import CANNOT_CHANGE_DELAY, CommandError, must_be_string

Reply = dict[str, Any]

DEFAULT_WAIT_TIMEOUT = 30_000.0
MAX_WAIT_TIMEOUT = 600_000.0


def handle_cancel(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    broker.cancel(options.job_id_arg(cmd))
    return {"ok": True}


def handle_update(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    # Update without data leaves the job without data, as the reference stores an undefined payload.
    data = cmd.get("data", NO_DATA)
    check_nesting(data, "data")
    broker.update_data(options.job_id_arg(cmd), data)
    return {"ok": True}


def handle_change_priority(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    # A missing priority is 0 (BullMQ's changePriority({lifo})); a numeric string is its number.
    priority = options.number_arg(cmd, "priority", 0.0, coerce=True)
    assert priority is not None
    # An absent lifo keeps the job's own.
    lifo = None if cmd.get("lifo") is None else options.flag(cmd, "lifo")
    broker.change_priority(options.job_id_arg(cmd), priority, lifo)
    return {"ok": True}


def handle_promote(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    broker.promote(options.job_id_arg(cmd), broker.clock())
    return {"ok": True}


def handle_promote_jobs(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    queue = options.queue_name(cmd)
    count = options.count_arg(cmd, "count")
    return {"ok": True, "count": broker.promote_jobs(queue, count, broker.clock())}


def _delay(cmd: dict[str, Any]) -> float:
    """A required finite delay (numeric strings count), clamped to the longest honoured duration."""
    delay = options.number_arg(cmd, "delay", required=True, coerce=True)
    assert delay is not None
    return max(-MAX_DURATION, min(MAX_DURATION, delay))


def handle_move_to_delayed(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    delay = _delay(cmd)
    broker.move_to_delayed(options.job_id_arg(cmd), delay, cmd.get("token"), broker.clock())
    return {"ok": True}


def handle_change_delay(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    delay = _delay(cmd)
    job_id = options.job_id_arg(cmd)
    broker.change_delay(job_id, delay, cmd.get("token"), broker.clock(), CANNOT_CHANGE_DELAY)
    return {"ok": True}


def handle_move_to_wait(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    broker.move_to_wait(options.job_id_arg(cmd), cmd.get("token"), broker.clock())
    return {"ok": True}


def handle_discard(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    broker.discard(options.job_id_arg(cmd), cmd.get("token"), broker.clock())
    return {"ok": True}


def handle_progress(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    message = cmd.get("message")
    if message is not None and type(message) is not str:
        raise CommandError(must_be_string("message"))
    broker.update_progress(
        options.job_id_arg(cmd), cmd.get("progress"), message, "message" in cmd, broker.clock()
    )
    return {"ok": True}


def handle_get_progress(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    job = broker.running_job(options.job_id_arg(cmd), broker.clock())
    return {"ok": True, "progress": job.progress, "message": job.progress_message}


def handle_wait_job(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply | Awaitable[Reply]:
    timeout = options.number_arg(cmd, "timeout", DEFAULT_WAIT_TIMEOUT, lo=0, hi=MAX_WAIT_TIMEOUT)
    assert timeout is not None
    reply: Reply | Awaitable[Reply] = broker.wait_job(options.job_id_arg(cmd), timeout)
    return reply
